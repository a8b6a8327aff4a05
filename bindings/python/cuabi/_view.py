"""Views and array exchange: DLPack (versioned and legacy capsules) and
__cuda_array_interface__, in and out."""
from __future__ import annotations

import ctypes as C
import struct
import threading

from . import _capi
from ._core import Stream, raw_stream_of
from ._handle import Handle
from ._lib import call, lib, new_struct, raise_last, raw

CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13

# ---- dtypes: (cuabi_dtype_code, bits) <-> names and array-interface typestrs
_CODES = {"int": 0, "uint": 1, "float": 2, "bfloat": 4, "complex": 5, "bool": 6}
_NAMES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
          (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
          (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
          (4, 16): "bfloat16", (5, 64): "complex64", (5, 128): "complex128",
          (6, 8): "bool"}
_BY_NAME = {v: k for k, v in _NAMES.items()}
_TYPESTR_KIND = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_KIND_CODE = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def dtype_code(dtype) -> tuple[int, int]:
    """(code, bits) of a dtype name, numpy dtype, or array-interface typestr."""
    if isinstance(dtype, tuple):
        return dtype
    name = getattr(dtype, "name", None) or str(dtype)
    if name in _BY_NAME:
        return _BY_NAME[name]
    s = getattr(dtype, "str", name).lstrip("<>|=")
    if len(s) >= 2 and s[0] in _KIND_CODE and s[1:].isdigit():
        return _KIND_CODE[s[0]], int(s[1:]) * 8
    raise TypeError(f"cuabi: unsupported dtype {dtype!r}")


def _typestr(code: int, bits: int) -> str:
    if code not in _TYPESTR_KIND:
        raise TypeError(f"dtype {_NAMES.get((code, bits), (code, bits))} has no array-interface typestr")
    return ("|" if bits == 8 else "<") + _TYPESTR_KIND[code] + str(bits // 8)


# ---- PyCapsule plumbing (through the Python C API, with the GIL held)
_api = C.pythonapi
_capsule_new = _api.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]
_capsule_ptr = _api.PyCapsule_GetPointer
_capsule_ptr.restype, _capsule_ptr.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
_capsule_valid = _api.PyCapsule_IsValid
_capsule_valid.restype, _capsule_valid.argtypes = C.c_int, [C.py_object, C.c_char_p]
_capsule_rename = _api.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = C.c_int, [C.py_object, C.c_char_p]
# The same functions on a raw PyObject*, for the capsule destructor.
_raw_valid = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_char_p)(("PyCapsule_IsValid", _api))
_raw_ptr = C.PYFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)(("PyCapsule_GetPointer", _api))

# Capsule names must outlive the capsules: module-level bytes objects.
_VERSIONED, _USED_VERSIONED = b"dltensor_versioned", b"used_dltensor_versioned"
_LEGACY, _USED_LEGACY = b"dltensor", b"used_dltensor"
_DELETER = C.CFUNCTYPE(None, C.c_void_p)
_OFF_DELETER_V = _capi.DLManagedTensorVersioned.deleter.offset
_OFF_DELETER_L = _capi.DLManagedTensor.deleter.offset


def _call_deleter(ptr: int, offset: int) -> None:
    fn = C.c_void_p.from_address(ptr + offset).value
    if fn:
        _DELETER(fn)(ptr)


def _capsule_destructor(capsule):
    # An export nobody consumed: the capsule still has its original name, and
    # we must call the tensor's deleter. A consumed one was renamed "used_*".
    try:
        for name, off in ((_VERSIONED, _OFF_DELETER_V), (_LEGACY, _OFF_DELETER_L)):
            if _raw_valid(capsule, name):
                _call_deleter(_raw_ptr(capsule, name), off)
                return
    except BaseException:  # interpreter shutdown or a broken producer
        pass


_DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)(_capsule_destructor)
_DESTRUCTOR_ADDR = C.cast(_DESTRUCTOR, C.c_void_p).value

# Hot path of from_dlpack: raw function pointers and reused out storage.
_view_from_v = raw("cuabi_view_from_dlpack_versioned")
_view_from_l = raw("cuabi_view_from_dlpack")


def _dlpack_device_of(device) -> tuple[int, int]:
    if hasattr(device, "__dlpack_device__"):
        return tuple(device.__dlpack_device__())
    if hasattr(device, "ordinal"):
        return (CUDA, device.ordinal)
    return tuple(device)


class View(Handle):
    """A typed, strided window onto memory that keeps its owner alive.

    Implements __dlpack__/__dlpack_device__ (array API standard), and
    __cuda_array_interface__ (device memory) or __array_interface__ (host
    memory), so numpy, torch, CuPy and JAX take it without a copy."""

    _ctype = "cuabi_view"
    _cuabi_pointer_ = True     # a kernel argument: its data pointer
    # No __dict__ and no weakref.finalize: a view is made per array exchange.
    __slots__ = ("_info", "_stream", "_owner")

    def __init__(self, obj, stream=None):
        """View of any DLPack / CUDA-array-interface / buffer-protocol object."""
        other = from_dlpack(obj, stream=stream)
        self._h, self._fin = other._h, None
        other._h = None
        self._info, self._stream, self._owner = other._info, other._stream, other._owner

    _release_view = raw("cuabi_view_release")

    def close(self) -> None:
        h = self._h
        if h is not None:
            self._h = None
            self._release_view(C.c_void_p(h))

    def __del__(self):
        h = self._h      # close(), inlined: this runs once per array exchange
        if h is not None:
            self._h = None
            try:
                self._release_view(C.c_void_p(h))
            except BaseException:  # interpreter shutdown
                pass

    @classmethod
    def _new(cls, h, stream=None, owner=None):
        # Views are made per array exchange: a weakref.finalize costs more
        # than the whole import, so views release in __del__ (same effect:
        # close() or garbage collection, errors swallowed at shutdown).
        obj = cls.__new__(cls)
        obj._h = h
        obj._fin = None
        obj._info = None
        obj._stream = stream
        obj._owner = owner
        return obj

    @classmethod
    def _wrap(cls, value):
        return cls._new(value)

    @classmethod
    def of_buffer(cls, buffer, dtype, shape=None, strides=None, offset=0, readonly=False):
        code, bits = dtype_code(dtype)
        if shape is None:
            shape = ((buffer.size - offset) // (bits // 8),)
        elif isinstance(shape, int):
            shape = (shape,)
        ndim = len(shape)
        shp = (C.c_int64 * ndim)(*shape) if ndim else None
        st = (C.c_int64 * ndim)(*strides) if strides is not None and ndim else None
        flags = _capi.CUABI_VIEW_READ_ONLY if readonly else 0
        return cls._new(call("cuabi_view_create", buffer, offset, code, bits, ndim, shp, st,
                             flags))

    # ---- facts
    def _get_info(self):
        info = self._info
        if info is None:
            info = new_struct(_capi.cuabi_view_info)
            lib.cuabi_view_get_info(C.byref(info), self)
            self._info = info
        return info

    @property
    def ndim(self) -> int:
        return self._get_info().ndim

    @property
    def shape(self) -> tuple:
        i = self._get_info()
        return tuple(i.shape[k] for k in range(i.ndim))

    @property
    def strides(self) -> tuple:
        """Strides in elements."""
        i = self._get_info()
        return tuple(i.strides[k] for k in range(i.ndim))

    @property
    def dtype(self) -> str:
        """Element type name ("float32", "int64", "bfloat16", ...)."""
        i = self._get_info()
        return _NAMES.get((i.dtype_code, i.dtype_bits), f"dtype({i.dtype_code},{i.dtype_bits})")

    @property
    def itemsize(self) -> int:
        return self._get_info().itemsize

    @property
    def size(self) -> int:
        return self._get_info().size

    @property
    def nbytes(self) -> int:
        return call("cuabi_view_nbytes", self)

    @property
    def ptr(self) -> int:
        """Address of the first element (what a kernel receives)."""
        i = self._get_info()
        return i.data + i.byte_offset

    @property
    def readonly(self) -> bool:
        return bool(self._get_info().flags & _capi.CUABI_VIEW_READ_ONLY)

    @property
    def is_c_contiguous(self) -> bool:
        return bool(call("cuabi_view_is_c_contiguous", self))

    @property
    def is_f_contiguous(self) -> bool:
        return bool(call("cuabi_view_is_f_contiguous", self))

    @property
    def stream(self):
        """The stream the producer said the data is ready on (or None)."""
        s = self._stream
        if type(s) is int:   # a raw CUstream from an array interface: wrap once
            s = self._stream = _as_stream(Stream.wrap(s))
        return s

    def __len__(self):
        return self.shape[0] if self.ndim else 0

    def __repr__(self):
        if self.closed:
            return "<cuabi.View closed>"
        return (f"<cuabi.View {self.dtype}{list(self.shape)} on "
                f"{self.__dlpack_device__()} at 0x{self.ptr:x}>")

    def __getitem__(self, key):
        """Basic slicing (slices only, one per dimension or fewer)."""
        if not isinstance(key, tuple):
            key = (key,)
        shape = self.shape
        if len(key) > len(shape) or not all(isinstance(k, slice) for k in key):
            raise TypeError("cuabi.View supports slices only (one per dimension)")
        key = key + (slice(None),) * (len(shape) - len(key))
        idx = [k.indices(n) for k, n in zip(key, shape)]
        nd = len(shape)
        arr = C.c_int64 * nd
        h = call("cuabi_view_slice", self, nd, arr(*(i[0] for i in idx)),
                 arr(*(i[1] for i in idx)), arr(*(i[2] for i in idx)))
        return View._new(h, self._stream)

    # ---- array API: DLPack export
    def __dlpack_device__(self) -> tuple[int, int]:
        i = self._get_info()
        return (i.device_type, i.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        dev = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != dev:
            raise BufferError(f"cuabi.View lives on {dev}; cannot export to {tuple(dl_device)}")
        if copy:
            raise BufferError("cuabi.View exports without copying (copy=True not supported)")
        if dev[0] == CPU:
            if stream is not None and stream != -1:
                raise BufferError("stream must be None for host memory")
        elif stream is not None and stream != -1 and self._stream is not None:
            # The consumer will use the data on `stream`: order it after the
            # producer's stream (no host sync).
            producer = self.stream
            consumer = Stream.wrap(stream, producer.device)
            consumer.wait(producer)
            consumer.close()
        if max_version is not None and tuple(max_version) >= (1, 0):
            ptr = call("cuabi_view_to_dlpack_versioned", self)
            name = _VERSIONED
        else:
            ptr = call("cuabi_view_to_dlpack", self)
            name = _LEGACY
        try:
            return _capsule_new(ptr, name, _DESTRUCTOR_ADDR)
        except BaseException:
            _call_deleter(ptr, _OFF_DELETER_V if name is _VERSIONED else _OFF_DELETER_L)
            raise

    # ---- array interfaces
    def _interface(self):
        i = self._get_info()
        nd = i.ndim
        shape = tuple(i.shape[k] for k in range(nd))
        strides = None if call("cuabi_view_is_c_contiguous", self) else \
            tuple(i.strides[k] * i.itemsize for k in range(nd))
        return {"shape": shape, "typestr": _typestr(i.dtype_code, i.dtype_bits),
                "data": (i.data + i.byte_offset, bool(i.flags & _capi.CUABI_VIEW_READ_ONLY)),
                "strides": strides, "version": 3}

    @property
    def __cuda_array_interface__(self):
        if self.__dlpack_device__()[0] == CPU:
            raise AttributeError("host views have __array_interface__, not __cuda_array_interface__")
        d = self._interface()
        s = self._stream
        d["stream"] = None if s is None else ((s if type(s) is int else s.raw) or None)
        return d

    @property
    def __array_interface__(self):
        if self.__dlpack_device__()[0] not in (CPU, CUDA_HOST, CUDA_MANAGED):
            raise AttributeError("device views have __cuda_array_interface__, not __array_interface__")
        return self._interface()


# ---- import
#
# from_dlpack() is on the hot path of every array exchange, so it picks a
# handler once per argument type (_HANDLERS) and each handler does the least
# work that gives the same view as the DLPack path:
#   torch tensors        their attributes (data_ptr(), shape, stride(), ...):
#                        torch's own __dlpack__ costs several microseconds;
#   __cuda_array_interface__ objects (CuPy, numba): the interface dict;
#   everything else      the DLPack capsule (numpy's __dlpack__ is cheaper
#                        than its __array_interface__).
# The attribute paths describe the memory to cuabi_view_from_dltensor (one C
# call, the same validation as a DLPack import) and keep the array itself
# alive as the view's owner. With a consumer stream they are not used: only
# the producer's __dlpack__(stream=...) can order its work before it.

_HEADER = struct.Struct("<QiiiBBHQQQ")   # DLTensor: data, device, ndim, dtype,
assert (_capi.DLTensor.shape.offset, _capi.DLTensor.strides.offset,    # shape*,
        _capi.DLTensor.byte_offset.offset, C.sizeof(_capi.DLTensor)) == \
    (24, 32, 40, _HEADER.size), "DLTensor layout differs from the packer's"  # strides*, offset
_SCRATCH_SIZE = _HEADER.size + 2 * 8 * _capi.CUABI_VIEW_MAX_NDIM
_ROW_MAJOR: dict = {}                    # ndim -> struct.Struct (NULL strides)
_STRIDED: dict = {}                      # ndim -> struct.Struct (with strides)
_tls = threading.local()
_from_dltensor = raw("cuabi_view_from_dltensor")


class _Scratch:
    """Per-thread storage for one import: a DLTensor followed by its shape
    and strides, and the out parameter (calls release the GIL, so threads
    must not share them)."""
    __slots__ = ("mem", "base", "ref", "out", "out_ref")

    def __init__(self):
        self.mem = (C.c_char * _SCRATCH_SIZE)()
        self.base = C.addressof(self.mem)
        self.ref = C.byref(self.mem)
        self.out = C.c_void_p()
        self.out_ref = C.byref(self.out)


def _scratch() -> _Scratch:
    s = _tls.__dict__.get("s")
    if s is None:
        s = _tls.s = _Scratch()
    return s


def _layout(nd: int, strided: bool) -> struct.Struct:
    if nd > _capi.CUABI_VIEW_MAX_NDIM:
        raise BufferError(f"cuabi.from_dlpack: {nd} dimensions (at most "
                          f"{_capi.CUABI_VIEW_MAX_NDIM})")
    fmt = struct.Struct(_HEADER.format + f"{nd}q" * (1 + strided))
    (_STRIDED if strided else _ROW_MAJOR)[nd] = fmt
    return fmt


def _view_of(ptr, dev_type, dev_id, code, bits, shape, strides, flags, owner, stream=None):
    """A View of borrowed memory described field by field (strides in
    elements or None = row-major); `owner` stays alive as long as the view."""
    sc = _tls.__dict__.get("s") or _scratch()
    nd = len(shape)
    base = sc.base
    try:
        if strides is None:
            (_ROW_MAJOR.get(nd) or _layout(nd, False)).pack_into(sc.mem, 0, ptr, dev_type, dev_id, nd, code, bits, 1,
                                         base + 48, 0, 0, *shape)
        else:
            (_STRIDED.get(nd) or _layout(nd, True)).pack_into(sc.mem, 0, ptr, dev_type, dev_id, nd, code, bits, 1,
                                        base + 48, base + 48 + 8 * nd, 0, *shape, *strides)
    except struct.error as e:
        raise BufferError(f"cuabi.from_dlpack: cannot describe the array ({e})") from None
    st = _from_dltensor(sc.out_ref, sc.ref, flags)
    if st:
        raise_last(st, "cuabi_view_from_dltensor")
    return View._new(sc.out.value, stream, owner)


def _import_capsule(capsule):
    """A new View handle from a DLPack capsule (versioned or legacy)."""
    try:  # one C-API call for the common (versioned) case
        ptr = _capsule_ptr(capsule, _VERSIONED)
        used, fn, where = _USED_VERSIONED, _view_from_v, "cuabi_view_from_dlpack_versioned"
    except ValueError:
        if not _capsule_valid(capsule, _LEGACY):
            raise TypeError("not a DLPack capsule (or one already consumed)") from None
        ptr = _capsule_ptr(capsule, _LEGACY)
        used, fn, where = _USED_LEGACY, _view_from_l, "cuabi_view_from_dlpack"
    # The library owns the tensor from here on, also when it refuses it.
    _capsule_rename(capsule, used)
    sc = _tls.__dict__.get("s") or _scratch()
    st = fn(sc.out_ref, C.c_void_p(ptr))
    if st:
        raise_last(st, where)
    return sc.out.value


def _from_cai(obj, cai, stream, is_cuda):
    """View of an object with __cuda_array_interface__ (or __array_interface__),
    borrowing its memory: the view keeps `obj` alive."""
    if cai.get("mask") is not None:
        raise BufferError("cuabi.from_dlpack: masked arrays are not supported")
    shape = cai["shape"]
    typestr = cai["typestr"]
    cb = _TYPESTR_CODE.get(typestr) or dtype_code(typestr)
    ptr, ro = cai["data"]
    strides = cai.get("strides")
    if strides is not None:
        itemsize = cb[1] >> 3
        if any(s % itemsize for s in strides):
            raise BufferError("cuabi.from_dlpack: strides are not a multiple of the item size")
        strides = [s // itemsize for s in strides]
    if is_cuda:
        dev = CUDA, _cai_device_id(obj)
        if stream is None:
            stream = cai.get("stream") or None   # a raw CUstream: wrapped on demand
    else:
        dev = CPU, 0
    return _view_of(ptr, dev[0], dev[1], cb[0], cb[1], shape, strides,
                    _READ_ONLY if ro else 0, obj, _as_stream(stream))


_READ_ONLY = _capi.CUABI_VIEW_READ_ONLY
# Array-interface typestrs -> (code, bits), for the common little-endian ones.
_TYPESTR_CODE = {order + _typestr(*cb)[1:]: cb for cb in _BY_NAME.values()
                 if cb[0] in _TYPESTR_KIND for order in "<|="}


def _cai_device_id(obj) -> int:
    # The CUDA array interface does not say which device: CuPy arrays carry
    # .device.id, torch tensors .device.index; else assume device 0.
    dev = getattr(obj, "device", None)
    for attr in ("id", "index"):
        v = getattr(dev, attr, None)
        if isinstance(v, int):
            return v
    return 0


def _as_stream(stream, obj=None):
    """What a View records as its producer stream: a cuabi Stream, or a raw
    CUstream int wrapped on first use (View.stream), or None."""
    if stream is None or stream == -1:
        return None
    if isinstance(stream, (Stream, int)):
        return stream
    try:
        return Stream.wrap(stream)
    except Exception:
        return None


# ---- per-type handlers (stream=None)

def _dlpack_handler(obj):
    try:
        capsule = obj.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0
        capsule = obj.__dlpack__()
    return View._new(_import_capsule(capsule))


def _cai_handler(obj):
    return _from_cai(obj, obj.__cuda_array_interface__, None, True)


def _ai_handler(obj):
    return _from_cai(obj, obj.__array_interface__, None, False)


def _capsule_handler(obj):
    return View._new(_import_capsule(obj))


def _view_handler(obj):
    return View._borrowed(obj.handle)


def _torch_handler_for(torch):
    """Torch tensors through their attributes: data_ptr() already includes
    the storage offset, stride() is in elements, as torch's DLPack export
    gives them (data = data_ptr(), byte_offset 0, flags 0). Anything torch's
    __dlpack__ would refuse or describe differently takes that path."""
    if getattr(getattr(torch, "version", None), "hip", None):
        return _dlpack_handler          # ROCm: device "cuda" is kDLROCM in DLPack
    dtypes = {}
    for name, cb in _BY_NAME.items():
        dt = getattr(torch, name, None)
        if dt is not None:
            dtypes[dt] = cb
    strided = getattr(torch, "strided", None)

    def torch_handler(t):
        cb = dtypes.get(t.dtype)
        dev = t.device
        kind = dev.type
        if (cb is None or t.requires_grad or t.layout is not strided or t.is_conj()
                or t.is_neg() or (kind != "cuda" and kind != "cpu")):
            return _dlpack_handler(t)   # refused or converted by torch itself
        if kind == "cuda":
            dev_type, dev_id = CUDA, dev.index or 0
        else:
            dev_type, dev_id = CPU, 0
        return _view_of(t.data_ptr(), dev_type, dev_id, cb[0], cb[1], t.shape, t.stride(), 0, t)
    return torch_handler


def _handler_for(tp):
    """The cheapest exact import for objects of type `tp`."""
    if tp is View:
        return _view_handler
    mod = tp.__module__ or ""
    if (mod == "torch" or mod.startswith("torch.")) and hasattr(tp, "data_ptr") \
            and hasattr(tp, "__dlpack__"):
        import sys
        torch = sys.modules.get("torch")
        return _dlpack_handler if torch is None else _torch_handler_for(torch)
    if hasattr(tp, "__dlpack__"):
        # A CUDA array interface (CuPy, numba) is cheaper than a capsule.
        if hasattr(tp, "__cuda_array_interface__") and mod.split(".")[0] != "numpy":
            return _cai_or_dlpack_handler
        return _dlpack_handler
    if tp.__name__ == "PyCapsule":
        return _capsule_handler
    if hasattr(tp, "__cuda_array_interface__"):
        return _cai_handler
    if hasattr(tp, "__array_interface__"):
        return _ai_handler
    return None


def _cai_or_dlpack_handler(obj):
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:   # e.g. a host array of a library exposing both
        return _dlpack_handler(obj)
    return _from_cai(obj, cai, None, True)


_HANDLERS: dict = {}


def from_dlpack(obj, *, stream=None) -> View:
    """A View of any array: a DLPack producer (asked for the versioned
    protocol first), a DLPack capsule, a __cuda_array_interface__ or
    __array_interface__ object. Shares memory; never copies.

    `stream` (a cuabi Stream, a foreign stream or a raw CUstream int) is
    where the caller will use a CUDA array: the producer orders its pending
    work before it, as the DLPack protocol says."""
    if stream is None:
        tp = type(obj)
        h = _HANDLERS.get(tp)
        if h is None:
            h = _HANDLERS[tp] = _handler_for(tp) or _no_handler
        return h(obj)
    return _from_dlpack_stream(obj, stream)


def _no_handler(obj):
    # Instances may gain interfaces their type lacks (e.g. set in __init__).
    return _from_dlpack_stream(obj, None)


def _from_dlpack_stream(obj, stream) -> View:
    """The general path: what from_dlpack() does for any object and stream."""
    if type(obj) is View:
        return View._borrowed(obj.handle)
    dl = getattr(obj, "__dlpack__", None)
    if dl is not None:
        kw = {}
        if stream is not None:
            dev = obj.__dlpack_device__()[0]
            if dev != CPU:
                # DLPack: 0 is not a valid CUDA stream value; the legacy
                # default stream is 1 (torch rejects 0 outright).
                kw["stream"] = raw_stream_of(stream) or 1
        try:
            capsule = dl(max_version=(1, 0), **kw)
        except TypeError:  # a producer older than DLPack 1.0
            capsule = dl(**kw)
        return View._new(_import_capsule(capsule), _as_stream(stream))
    if type(obj).__name__ == "PyCapsule":
        return View._new(_import_capsule(obj))
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai, stream, True)
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return _from_cai(obj, ai, None, False)
    raise TypeError(f"cuabi.from_dlpack: {type(obj).__name__} supports neither DLPack "
                    "nor the (CUDA) array interface")
