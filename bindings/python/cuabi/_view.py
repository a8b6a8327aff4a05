"""Views and array exchange: DLPack (versioned and legacy capsules) and
__cuda_array_interface__, in and out."""
from __future__ import annotations

import ctypes as C
import itertools
import math
import struct
import sys
import threading

from . import _capi
from ._core import Device, Stream, raw_stream_of
from ._handle import Handle
from ._lib import address, call, close_handle, fast, hooks, lib, new_struct, raise_last, raw
from .errors import ClosedHandleError, I64_MAX, I64_MIN, dims_arg, index_arg

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
    if isinstance(dtype, type) and "numpy" in sys.modules:   # np.float32, the scalar type
        try:
            dtype = sys.modules["numpy"].dtype(dtype)
        except TypeError:
            pass
    name = getattr(dtype, "name", None) or str(dtype)
    if name in _BY_NAME:
        return _BY_NAME[name]
    s = getattr(dtype, "str", name).lstrip("<>|=")
    if len(s) >= 2 and s[0] in _KIND_CODE and s[1:].isdigit():
        return _KIND_CODE[s[0]], int(s[1:]) * 8
    raise TypeError(f"cuabi: unsupported dtype {dtype!r}")


def _numpy():
    """numpy when installed (imported here on first use), else None."""
    np = sys.modules.get("numpy")
    if np is None:
        try:
            import numpy as np                  # lazy: import time (optional)
        except ImportError:
            return None
    return np


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


class _CView:
    """Owns one reference to a C view and drops it when collected, or when
    called (a View's release: cuabi._lib.close_handle and the last call in
    flight take it out of View._fin, so it runs once). `keep`: what the
    memory belongs to, for a C view that borrows it (kept until the C view
    is released, which a close() may leave to a call in flight). Views are
    made per array exchange: a weakref.finalize costs more than the whole
    import, and a __del__ on View itself would run for every lazy view too,
    which has nothing to release."""
    __slots__ = ("h", "keep")

    _release = raw("cuabi_view_release")

    def __call__(self):
        h = self.h
        if h is not None:
            self.h = None
            self._release(C.c_void_p(h))
        self.keep = None

    release = __call__

    def __del__(self):
        h = self.h
        if h is not None:
            self.h = None
            try:
                self._release(C.c_void_p(h))
            except BaseException:  # interpreter shutdown
                pass


def _release_on_death(h, keep=None) -> _CView:
    r = _CView.__new__(_CView)
    r.h = h
    r.keep = keep
    return r


class View(Handle):
    """A typed, strided window onto memory that keeps its owner alive.

    Implements __dlpack__/__dlpack_device__ (array API standard), and
    __cuda_array_interface__ (device memory) or __array_interface__ (host
    memory), so numpy, torch, CuPy and JAX take it without a copy.

    A view made by from_dlpack()'s attribute paths (numpy, torch, CUDA array
    interface) is *lazy*: it holds a Python description of the array (`_d`)
    and no C view until something needs one (`cuabi_handle`, __dlpack__, slicing, a
    C function taking the view); its facts and its kernel-argument address
    come from the description. Views from DLPack capsules and buffers are C
    views from the start (`_d` is None)."""

    _ctype = "cuabi_view"
    _cuabi_pointer_ = True     # a kernel argument: its data pointer
    # No __dict__ and no weakref.finalize: a view is made per array exchange.
    __slots__ = ("_info", "_stream", "_owner", "_d")

    def __init__(self, obj, stream=None):
        """View of any DLPack / CUDA-array-interface / buffer-protocol object."""
        other = from_dlpack(obj, stream=stream)
        self._h, self._fin = other._h, other._fin
        other._h = other._fin = None
        self._info, self._stream, self._owner = other._info, other._stream, other._owner
        self._d = other._d

    @property
    def cuabi_handle(self) -> int:
        """The C view (an int), made now for a lazy view; raises after close()."""
        h = self._h
        if h is None:
            h = self._materialize()
        return h

    def _materialize(self) -> int:
        # One C view per View even when threads ask at once (the C call
        # releases the GIL, hence the lock). close() on another thread
        # clears _d first, then _owner: read in the other order, an owner
        # read here belongs to the description read after it.
        with _MATERIALIZE_LOCK:
            h = self._h
            if h is None:
                owner = self._owner
                d = self._d
                if d is None:
                    raise ClosedHandleError("View is closed")
                h = _c_view_of(d, owner)
                self._fin = _release_on_death(h)
                self._h = h
                if self._d is None:
                    # Closed meanwhile, maybe before the C view was here to
                    # release: release it (now, or after the calls in flight).
                    close_handle(self)
                    raise ClosedHandleError("View is closed")
            return h

    @property
    def closed(self) -> bool:
        return self._h is None and self._d is None

    @property
    def lazy(self) -> bool:
        """True while the view has no C view yet (see the class notes)."""
        return self._h is None and self._d is not None

    def close(self) -> None:
        """Release the C view (now, or when the last call on it that other
        threads have in flight returns; never blocks) and the producer (a
        numpy array, a torch tensor): a closed view no longer keeps its
        memory alive. Idempotent."""
        self._d = None          # first: _materialize reads them the other way round
        self._owner = None      # a C view in use keeps what it borrows (_CView.keep)
        close_handle(self)

    def __eq__(self, other):
        return self is other or (type(other) is type(self) and self._h is not None
                                 and other._h == self._h)

    def __hash__(self):
        # Equal views share a C view, hence a data pointer; stable across
        # materialisation.
        return hash((View, None if self.closed else self.ptr))

    @classmethod
    def _new(cls, h, stream=None, owner=None):
        obj = cls.__new__(cls)
        obj._h = h
        obj._fin = _release_on_death(h, owner)
        obj._info = None
        obj._stream = stream
        obj._owner = owner
        obj._d = None
        return obj

    @classmethod
    def _wrap(cls, value):
        return cls._new(value)

    @classmethod
    def of_buffer(cls, buffer, dtype, shape=None, strides=None, offset=0, readonly=False):
        code, bits = dtype_code(dtype)
        offset = index_arg(offset, "view: offset")
        if shape is None:   # the rest of the buffer (0 elements past its end)
            shape = (max(buffer.size - offset, 0) // (bits // 8),)
        elif not hasattr(shape, "__len__"):
            shape = (index_arg(shape, "view: shape", 0, I64_MAX),)
        shape = dims_arg(shape, "view: shape", 0, I64_MAX)
        ndim = len(shape)
        if strides is not None:
            strides = dims_arg(strides, "view: strides", I64_MIN, I64_MAX, length=ndim)
        shp = (C.c_int64 * ndim)(*shape) if ndim else None
        st = (C.c_int64 * ndim)(*strides) if strides is not None and ndim else None
        flags = _capi.CUABI_VIEW_READ_ONLY if readonly else 0
        return cls._new(call("cuabi_view_create", buffer, offset, code, bits, ndim, shp, st,
                             flags))

    def copy_peer(self, src: "View", stream=None) -> None:
        """Copy every element of `src`, a view of device memory on any device,
        into this view (same shape and dtype; strided up to 3-D after merging
        contiguous dimensions): cuMemcpy3DPeer."""
        from ._memory import _stream_arg     # lazy: import time (from_dlpack needs no buffers)
        lib.cuabi_peer_copy_view(self, src, _stream_arg(stream))

    def __reduce__(self):
        """Pickling a view of CUDA device memory sends an IPC descriptor of
        the memory it spans plus its layout (see Buffer.__reduce__)."""
        dev_type, dev_id = self.__dlpack_device__()
        if dev_type != _capi.CUABI_DLPACK_CUDA:
            raise TypeError("only views of CUDA device memory pickle (through IPC)")
        from ._memory import Buffer          # lazy: import time
        shape, strides, item = self.shape, self.strides, self.itemsize
        if any(st < 0 for st in strides):
            raise TypeError("views with negative strides do not pickle")
        span = item + sum((n - 1) * st * item for n, st in zip(shape, strides)) \
            if all(shape) else item
        with Buffer.wrap(self.ptr, span, "device", dev_id) as b:
            desc = b.get_ipc_descriptor()
        return (_view_from_ipc, (desc, self.dtype_name, shape, strides, self.readonly))

    def as_tensor_map(self, box_dim=None, *, options=None, **kwargs):
        """A tiled TMA descriptor of this view (cuda.core's
        StridedMemoryView.as_tensor_map); see TensorMapDescriptor.from_tiled."""
        # TensorMapDescriptor: cuabi._tensormap, a layer above (through cuabi._lib.hooks).
        return hooks.tensor_map_class().from_tiled(self, box_dim, options=options, **kwargs)

    # ---- facts: from the description (lazy views) or the C view
    def _get_info(self):
        info = self._info
        if info is None:
            info = new_struct(_capi.cuabi_view_info)
            lib.cuabi_view_get_info(C.byref(info), self)
            self._info = info
        return info

    @property
    def ndim(self) -> int:
        d = self._d
        return len(d[5]) if d is not None else self._get_info().ndim

    @property
    def shape(self) -> tuple:
        d = self._d
        if d is not None:
            return tuple(d[5])
        i = self._get_info()
        return tuple(i.shape[k] for k in range(i.ndim))

    @property
    def strides(self) -> tuple:
        """Strides in elements."""
        d = self._d
        if d is not None:
            return _elem_strides(d)
        i = self._get_info()
        return tuple(i.strides[k] for k in range(i.ndim))

    @property
    def _code_bits(self) -> tuple:
        d = self._d
        if d is not None:
            return d[3], d[4]
        i = self._get_info()
        return i.dtype_code, i.dtype_bits

    @property
    def dtype(self):
        """cuda.core's meaning: the element type as a numpy dtype where numpy
        is installed (and knows the type: bfloat16 needs ml_dtypes), so
        `view.dtype == np.int32` holds; else its name. A numpy dtype equals
        its name too (`view.dtype == "float32"`)."""
        name = self.dtype_name
        np = _numpy()
        if np is not None:
            try:
                return np.dtype(name)
            except TypeError:
                pass
        return name

    @property
    def dtype_name(self) -> str:
        """Element type name ("float32", "int64", "bfloat16", ...): cuabi's
        former `dtype`."""
        cb = self._code_bits
        return _NAMES.get(cb, f"dtype({cb[0]},{cb[1]})")

    @property
    def device_id(self) -> int:
        """cuda.core's device_id: the device ordinal, -1 for host memory."""
        kind, dev = self.__dlpack_device__()
        return -1 if kind == CPU else dev

    @property
    def is_device_accessible(self) -> bool:
        """cuda.core's: the GPU can reach the data (device, pinned or managed)."""
        return self.__dlpack_device__()[0] != CPU

    @property
    def itemsize(self) -> int:
        d = self._d
        return d[4] >> 3 if d is not None else self._get_info().itemsize

    @property
    def size(self) -> int:
        d = self._d
        return math.prod(d[5]) if d is not None else self._get_info().size

    @property
    def nbytes(self) -> int:
        d = self._d
        if d is not None:
            return math.prod(d[5]) * (d[4] >> 3)
        return call("cuabi_view_nbytes", self)

    @property
    def ptr(self) -> int:
        """Address of the first element (what a kernel receives)."""
        d = self._d
        if d is not None:
            return d[0]
        i = self._get_info()
        return i.data + i.byte_offset

    @property
    def readonly(self) -> bool:
        d = self._d
        flags = d[7] if d is not None else self._get_info().flags
        return bool(flags & _capi.CUABI_VIEW_READ_ONLY)

    @property
    def is_c_contiguous(self) -> bool:
        d = self._d
        if d is not None:
            return _contiguous(d[5], _elem_strides(d), True)
        return bool(call("cuabi_view_is_c_contiguous", self))

    @property
    def is_f_contiguous(self) -> bool:
        d = self._d
        if d is not None:
            return _contiguous(d[5], _elem_strides(d), False)
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
        return (f"<cuabi.{type(self).__name__} {self.dtype_name}{list(self.shape)} on "
                f"{self.__dlpack_device__()} at 0x{self.ptr:x}{' (lazy)' if self.lazy else ''}>")

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
        d = self._d
        if d is not None:
            return (d[1], d[2])
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

    _dlpack_py = __dlpack__

    # ---- array interfaces
    def _interface(self):
        isz = self.itemsize
        strides = None if self.is_c_contiguous else tuple(s * isz for s in self.strides)
        return {"shape": self.shape, "typestr": _typestr(*self._code_bits),
                "data": (self.ptr, self.readonly), "strides": strides, "version": 3}

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


_View_new = View.__new__


# ---- lazy views
#
# A lazy view's description `_d` is the tuple
#   (data pointer, device type, device id, dtype code, bits, shape,
#    strides or None (row-major), view flags, stride unit)
# where strides are in units of `unit` bytes (1 = already in elements; the
# item size for producers that give byte strides, converted on demand).

_MATERIALIZE_LOCK = threading.Lock()


def _lazy(d, owner, stream=None):
    v = _View_new(View)
    v._h = None
    v._fin = None
    v._info = None
    v._stream = stream
    v._owner = owner
    v._d = d
    return v


def _row_major(shape) -> tuple:
    # cuabi__row_major(): extents of 0 or 1 do not scale the next stride.
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n if n > 1 else 1
    return tuple(reversed(out))


def _elem_strides(d) -> tuple:
    st = d[6]
    if st is None:
        return _row_major(d[5])
    u = d[8]
    if u == 1:
        return tuple(st)
    # Exact for the multiples the importers admit; elsewhere (extents of 1,
    # which numpy exempts) C's truncating division, as numpy's export does.
    return tuple([s // u if s >= 0 else -(-s // u) for s in st])


def _contiguous(shape, strides, c_order) -> bool:
    # The C library's rule (NumPy's): extents of 1 ignore their stride;
    # empty views are dense.
    if 0 in shape:
        return True
    expected = 1
    dims = range(len(shape) - 1, -1, -1) if c_order else range(len(shape))
    for k in dims:
        n = shape[k]
        if n == 1:
            continue
        if strides[k] != expected:
            return False
        expected *= n
    return True


_INT64_LIMIT = 1 << 63


def _layout_ok(shape, byte_strides, itemsize, ptr) -> bool:
    """Whether the C import (cuabi__check_layout and import_tensor) will
    accept this layout, its first element at address `ptr` (byte offset 0);
    byte strides or None (row-major). Exact (Python integers): the element
    count times the item size, the lowest and the highest byte reached fit
    in 64-bit signed arithmetic, and no element's address wraps around the
    address space. False sends the caller to the C import, which raises its
    own error."""
    if len(shape) > _capi.CUABI_VIEW_MAX_NDIM or (shape and min(shape) < 0):
        return False
    if ptr is not None and not 0 <= ptr < _ADDRESS_LIMIT:
        return False      # not an address: the C import's describer refuses it
    n = math.prod(shape)
    if n == 0:
        return True
    if n * itemsize >= _INT64_LIMIT or not ptr:
        return False
    lo = 0
    if byte_strides is None:
        end = n * itemsize
    else:
        hi = 0
        for e, s in zip(shape, byte_strides):
            if e != 1:
                r = (e - 1) * s
                if r > 0:
                    hi += r
                else:
                    lo += r
        end = hi + itemsize
        if -lo > _INT64_LIMIT or end >= _INT64_LIMIT:
            return False
    return ptr + lo >= 0 and ptr + end <= _ADDRESS_LIMIT


_ADDRESS_LIMIT = 1 << 64


# The C view of a lazy view: a DLManagedTensorVersioned whose deleter drops
# the owner, so the owner lives exactly as long as the C view (which may
# outlive the Python View: exported capsules, sub-views).
_OWNERS: dict = {}                  # key -> (owner, tensor, dims); no lock:
_owner_keys = itertools.count(1)   # the deleter may run inside any allocation
_MT = _capi.DLManagedTensorVersioned
_MT_DELETER_T = dict(_MT._fields_)["deleter"]


def _drop_owner(p):
    try:
        _OWNERS.pop(p.contents.manager_ctx, None)
    except BaseException:  # interpreter shutdown
        pass


_OWNER_DELETER = _MT_DELETER_T(_drop_owner)
_I64P = C.POINTER(C.c_int64)


def _c_view_of(d, owner) -> int:
    ptr, dev_type, dev_id, code, bits, shape, _st, flags, _u = d
    nd = len(shape)
    strides = _elem_strides(d)
    dims = (C.c_int64 * (2 * nd or 1))(*shape, *strides)
    mt = _MT()
    mt.version.major, mt.version.minor = 1, 1
    key = next(_owner_keys)
    mt.manager_ctx = key
    mt.deleter = _OWNER_DELETER
    mt.flags = flags
    t = mt.dl_tensor
    t.data = ptr
    t.device.device_type, t.device.device_id = dev_type, dev_id
    t.ndim = nd
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.shape = C.cast(dims, _I64P)
    t.strides = C.cast(C.addressof(dims) + 8 * nd, _I64P)
    _OWNERS[key] = (owner, mt, dims)
    out = C.c_void_p()
    st = _view_from_v(C.byref(out), C.byref(mt))   # refusals call the deleter
    if st:
        raise_last(st, "cuabi_view_from_dlpack_versioned")
    return out.value


# ---- import
#
# from_dlpack() is on the hot path of every array exchange, so it picks a
# handler once per argument type (_HANDLERS) and each handler does the least
# work that gives the same view as the DLPack path:
#   torch tensors        their attributes (data_ptr(), shape, stride(), ...):
#                        torch's own __dlpack__ costs several microseconds;
#   cupy.ndarray         its attributes (data.ptr, shape, strides, dtype, ...),
#                        as its __cuda_array_interface__ would give them;
#   __cuda_array_interface__ objects (numba, ...): the interface dict;
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
    __slots__ = ("mem", "base", "ref", "out", "out_ref", "out_addr")

    def __init__(self):
        self.mem = (C.c_char * _SCRATCH_SIZE)()
        self.base = C.addressof(self.mem)
        self.ref = C.byref(self.mem)
        self.out = C.c_void_p()
        self.out_ref = C.byref(self.out)
        self.out_addr = C.addressof(self.out)


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
    """Lazy View of an object with __cuda_array_interface__ (or
    __array_interface__), borrowing its memory: the view keeps `obj` alive."""
    if cai.get("mask") is not None:
        raise BufferError("cuabi.from_dlpack: masked arrays are not supported")
    shape = cai["shape"]
    typestr = cai["typestr"]
    cb = _TYPESTR_CODE.get(typestr) or dtype_code(typestr)
    ptr, ro = cai["data"]
    strides = cai.get("strides")
    itemsize = cb[1] >> 3
    if strides is not None and any(s % itemsize for s in strides):
        raise BufferError("cuabi.from_dlpack: strides are not a multiple of the item size")
    if is_cuda:
        dev = CUDA, _cai_device_id(obj)
        if stream is None:
            stream = cai.get("stream") or None   # a raw CUstream: wrapped on demand
    else:
        dev = CPU, 0
    flags = _READ_ONLY if ro else 0
    if not _layout_ok(shape, strides, itemsize, ptr):   # the C import says why
        return _view_of(ptr, dev[0], dev[1], cb[0], cb[1], shape,
                        None if strides is None else [s // itemsize for s in strides],
                        flags, obj, _as_stream(stream))
    return _lazy((ptr or 0, dev[0], dev[1], cb[0], cb[1], tuple(shape),
                  None if strides is None else tuple(strides), flags, itemsize),
                 obj, _as_stream(stream))


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


# ---- the DLPack C exchange API (DLPack 1.3)
#
# A producer type may carry `__dlpack_c_exchange_api__`: a capsule named
# "dlpack_exchange_api" holding a static DLPackExchangeAPI table of C
# functions that describe one of its objects without going through
# __dlpack__ (torch >= 2.10; before, an int named __c_dlpack_exchange_api__).
# The functions need the GIL and report failure as -1 with a Python
# exception set, so they are called through PYFUNCTYPE (the GIL stays held
# and ctypes raises the exception). "NoSync": they order nothing, like a
# from_dlpack() without a stream.

class _ExchangeHeader(C.Structure):
    pass


_ExchangeHeader._fields_ = [("major", C.c_uint32), ("minor", C.c_uint32),
                            ("prev_api", C.POINTER(_ExchangeHeader))]


class _ExchangeAPI(C.Structure):
    _fields_ = [("header", _ExchangeHeader),
                ("managed_tensor_allocator", C.c_void_p),
                ("managed_tensor_from_py_object_no_sync", C.c_void_p),
                ("managed_tensor_to_py_object_no_sync", C.c_void_p),
                ("dltensor_from_py_object_no_sync", C.c_void_p),
                ("current_work_stream", C.c_void_p)]


_EXCHANGE_CAPSULE = b"dlpack_exchange_api"
# cuabi_view_from_exchange(cuabi_view **out, const DLPackExchangeAPI *api,
#                          void *py_object): the producer's function needs
# the GIL, so called like a Python C-API function (PYFUNCTYPE keeps the GIL
# and raises the Python exception the producer set).
_view_from_exchange = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.py_object)(
    address("cuabi_view_from_exchange"))


# cuabi_view_from_exchange_on(out, api, py_object, cuabi_stream *stream): the
# same, with the DLPack stream contract kept in C (the producer's current work
# stream ordered before `stream`) instead of the producer's __dlpack__(stream=)
# (torch's: ~17 us of Python per tensor).
_view_from_exchange_on = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.py_object, C.c_void_p)(
    address("cuabi_view_from_exchange_on"))
_EXCHANGE_ON: dict = {}     # type -> its table's address when it can order streams, else 0


def _exchange_on_table(tp):
    t = _EXCHANGE_ON.get(tp)
    if t is None:
        api = _exchange_api_of(tp)
        t = _EXCHANGE_ON[tp] = (C.addressof(api) if api is not None
                                and api.managed_tensor_from_py_object_no_sync
                                and api.current_work_stream else 0)
    return t


def _from_exchange_on(obj, stream):
    """from_dlpack(obj, stream=s) for a cuabi Stream through the producer's
    exchange table, or None where the producer's __dlpack__ must decide."""
    tp = type(obj)
    table = _exchange_on_table(tp)
    if not table:
        return None
    if tp.__module__ == "torch" and obj.is_conj():
        return None     # torch's __dlpack__ refuses the conjugate bit; its C export would not
    sh = stream.cuabi_handle        # ClosedHandleError for a closed stream, not the producer's
    sc = _tls.__dict__.get("s") or _scratch()
    try:
        st = _view_from_exchange_on(sc.out_addr, table, obj, sh)
    except Exception:   # the producer's exception: let __dlpack__ say it
        return None
    if st in (_capi.CUABI_ERROR_CALLBACK, _capi.CUABI_ERROR_NOT_SUPPORTED):
        return None
    if st:
        raise_last(st, "cuabi_view_from_exchange_on")
    return View._new(sc.out.value, stream)


def _exchange_api_of(tp):
    """The major-version-1 DLPackExchangeAPI table of type `tp`, or None."""
    cap = getattr(tp, "__dlpack_c_exchange_api__", None)
    if cap is not None:
        if type(cap).__name__ != "PyCapsule" or not _capsule_valid(cap, _EXCHANGE_CAPSULE):
            return None
        addr = _capsule_ptr(cap, _EXCHANGE_CAPSULE)
    else:
        addr = getattr(tp, "__c_dlpack_exchange_api__", None)
        if type(addr) is not int:
            return None
    # Newer major versions may chain an older table through prev_api.
    seen = 0
    while addr and seen < 16:
        api = _ExchangeAPI.from_address(addr)
        if api.header.major == 1:
            return api
        addr = C.cast(api.header.prev_api, C.c_void_p).value
        seen += 1
    return None


def _exchange_handler_for(tp):
    """Any producer with an exchange table: its owning export
    (managed_tensor_from_py_object_no_sync) straight into the C import
    (cuabi_view_from_exchange), which takes the tensor's flags (read-only,
    ...) as a capsule's. Without the function, or when it fails, the
    producer's __dlpack__ decides."""
    api = _exchange_api_of(tp)
    if api is None or not api.managed_tensor_from_py_object_no_sync:
        return None
    table = C.addressof(api)

    def exchange_handler(obj):
        sc = _tls.__dict__.get("s") or _scratch()
        try:
            st = _view_from_exchange(sc.out_addr, table, obj)
        except Exception:   # the producer's exception: let __dlpack__ say it
            st = _capi.CUABI_ERROR_CALLBACK
        if st == _capi.CUABI_ERROR_CALLBACK:
            return _dlpack_handler(obj)
        if st:
            raise_last(st, "cuabi_view_from_exchange")
        return View._new(sc.out.value)
    return exchange_handler


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
    owner = obj._owner    # before _d (see View._materialize)
    d = obj._d
    if d is not None:     # another lazy view of the same description
        return _lazy(d, owner, obj._stream)
    return View._shared(obj)


def _torch_handler_for(torch):
    """Torch tensors through five reads: dtype, is_cuda/is_cpu (+
    get_device()), shape, stride(), data_ptr(). data_ptr() already includes
    the storage offset and stride() is in elements, as torch's DLPack export
    gives them (data = data_ptr(), byte_offset 0, flags 0).

    Measured on the H200 machine (torch 2.11), this is cheaper than torch's
    DLPack C exchange API called through ctypes: one foreign call (~0.4 us)
    costs more than the five reads (~0.45 us together) plus the parsing of
    the DLTensor it fills. Like the exchange API, it shares tensors that
    require grad (their data, as t.detach() would) and, like torch's own
    __dlpack__, ignores the negative bit. Tensors with the conjugate bit,
    dtypes outside the map, other devices and layouts without strides or
    data pointer (sparse, nested: torch raises) take torch's __dlpack__,
    which refuses or converts them itself."""
    if getattr(getattr(torch, "version", None), "hip", None):
        return _dlpack_handler          # ROCm: device "cuda" is kDLROCM in DLPack
    dtypes = {}
    for name, cb in _BY_NAME.items():
        dt = getattr(torch, name, None)
        if dt is not None:
            dtypes[dt] = cb
    dget = dtypes.get

    def torch_handler(t):
        try:
            cb = dget(t.dtype)
            if t.is_cuda:
                dev_type, dev_id = CUDA, t.get_device()
            elif t.is_cpu:
                dev_type, dev_id = CPU, 0
            else:
                return _dlpack_handler(t)
            shape = t.shape
            strides = t.stride()
            ptr = t.data_ptr()
        except Exception:   # no strides or storage: torch's own refusal
            return _dlpack_handler(t)
        if cb is None or len(shape) > _MAX_NDIM or (cb[0] == _COMPLEX and t.is_conj()):
            return _dlpack_handler(t)
        # torch keeps every element inside its storage: extents are sane.
        v = _View_new(View)
        v._h = v._fin = v._info = v._stream = None
        v._owner = t
        v._d = (ptr, dev_type, dev_id, cb[0], cb[1], shape, strides, 0, 1)
        return v
    return torch_handler


_COMPLEX = _CODES["complex"]


def _cupy_handler_for(cupy):
    """cupy.ndarray through its attributes, giving exactly the view its
    __cuda_array_interface__ gives (CuPy builds that dict on every read,
    ~1 us): strides None when CuPy marks the array C-contiguous, data 0 for
    empty arrays, and as producer stream CuPy's current stream, the legacy
    or per-thread default one when that is the null stream (what the
    interface's "stream" entry says, read the way CuPy reads it). Anything
    unusual (dtypes outside the map, strides that are not multiples of the
    item size, layouts the C import refuses, interface version other than 3)
    goes through the interface itself."""
    try:
        if getattr(cupy.cuda.runtime, "is_hip", True):
            return _cai_or_dlpack_handler      # HIP: no CUDA array interface
        import importlib          # lazy: import time (only for CuPy arrays)
        # CuPy's current stream as a pointer: get_current_stream_ptr()
        # where CuPy has it (no Stream object made), else the Stream's .ptr.
        current_ptr = getattr(getattr(cupy.cuda, "stream", None), "get_current_stream_ptr", None)
        if current_ptr is None:
            current = cupy.cuda.get_current_stream
            current_ptr = lambda: current().ptr     # noqa: E731
        # Where CuPy keeps the interface's export version: cupy._util in
        # CuPy 14 (seen on the H200 machine), cupy._core._util before. A
        # submodule is not an attribute of its package until imported.
        util = None
        for name in ("cupy._util", "cupy._core._util"):
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            if hasattr(mod, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION"):
                util = mod
                break
        util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION    # AttributeError: no handler
        default_ptr = importlib.import_module("cupy_backends.cuda.stream").get_default_stream_ptr
        np = sys.modules["numpy"]
        codes = {np.dtype(name): (cb[0], cb[1], cb[1] >> 3)
                 for name, cb in _BY_NAME.items() if name != "bfloat16"}
    except Exception:
        return _cai_or_dlpack_handler
    cget = codes.get

    def cupy_handler(x):
        c = cget(x.dtype)
        if c is None or util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION != 3:
            return _cai_or_dlpack_handler(x)
        isz = c[2]
        shape = x.shape
        mem = x.data                       # a MemoryPointer: .ptr, .device_id
        ptr = mem.ptr if x.size else 0
        if x._c_contiguous:
            # An allocation's own extent is sane: only what the C import
            # limits beyond CuPy (dimensions) and a NULL data pointer.
            strides = None
            if len(shape) > _MAX_NDIM or (not ptr and x.size):
                return _cai_or_dlpack_handler(x)
        else:
            strides = x.strides
            if any(s % isz for s in strides) or not _layout_ok(shape, strides, isz, ptr):
                return _cai_or_dlpack_handler(x)
        d = (ptr, CUDA, mem.device_id, c[0], c[1], shape, strides, 0, isz)
        stream = current_ptr() or default_ptr()      # a raw CUstream, wrapped on demand
        if fast_lazy is not None:                    # the compiled backend: in C
            return fast_lazy(d, x, stream)
        v = _View_new(View)
        v._h = v._fin = v._info = None
        v._stream = stream
        v._owner = x
        v._d = d
        return v
    fast_lazy = fast.lazy_view if fast is not None else None
    return cupy_handler


_MAX_NDIM = _capi.CUABI_VIEW_MAX_NDIM
_CPU0 = (CPU, 0)
_SUPPORTED_DEVICES = (CPU, CUDA, CUDA_HOST, CUDA_MANAGED)
# All of memory as 8-byte words: _WORDS[addr >> 3] reads the word at addr
# (a third of c_void_p.from_address(addr).value). Nothing is touched until
# an index is read.
_WORDS = memoryview((C.c_uint64 * (sys.maxsize // 8)).from_address(0)).cast("B").cast("Q")
_NPY_C_CONTIGUOUS, _NPY_WRITEABLE = 0x1, 0x400


def _numpy_handler_for(np):
    """numpy.ndarray through its C struct (PyArrayObject_fields, part of
    numpy's ABI: data right after the object header, flags 48 bytes later),
    read with one memory access each instead of __array_interface__
    (~1.5 us) or a capsule; shape, strides and dtype through attributes.
    The layout is checked on probe arrays first; anything the fast path is
    not sure about (dtypes other than the native built-in ones, strides numpy
    or the C import would refuse) takes the DLPack path, which gives the
    producer's or the library's own error."""
    off = object.__basicsize__
    if sys.implementation.name != "cpython" or off % 8:
        return _dlpack_handler
    words = _WORDS

    def layout_holds(a):
        addr = id(a) + off
        fl = words[(addr + 48) >> 3] & 0xFFFFFFFF
        return (words[addr >> 3] == a.__array_interface__["data"][0]
                and bool(fl & _NPY_C_CONTIGUOUS) == a.flags.c_contiguous
                and bool(fl & _NPY_WRITEABLE) == a.flags.writeable)
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    ro = base[1:]
    ro.flags.writeable = False
    if not all(layout_holds(a) for a in (base, base[1:, ::2], base.T, ro, np.zeros(0, np.int8))):
        return _dlpack_handler
    # Native built-in dtypes are singletons: key them by identity (kept
    # alive here, so no other object can take their id).
    dts = [(np.dtype(name), cb) for name, cb in _BY_NAME.items() if name != "bfloat16"]
    codes = {id(dt): (cb[0], cb[1], cb[1] >> 3, dt) for dt, cb in dts}
    cget = codes.get

    def numpy_handler(a):
        c = cget(id(a.dtype))
        addr = id(a) + off
        fl = words[(addr + 48) >> 3]
        if c is None or not (fl & _NPY_C_CONTIGUOUS or _np_strides_ok(a, c[2], words[addr >> 3])):
            return _dlpack_handler(a)
        if a.base is None:
            dev = _CPU0
        else:   # numpy arrays from a capsule report the capsule's device
            dev = a.__dlpack_device__()
            if dev[0] not in _SUPPORTED_DEVICES:
                return _dlpack_handler(a)
        v = _View_new(View)
        v._h = None
        v._fin = None
        v._info = None
        v._stream = None
        v._owner = a
        v._d = (words[addr >> 3], dev[0], dev[1], c[0], c[1], a.shape, a.strides,
                0 if fl & _NPY_WRITEABLE else _READ_ONLY, c[2])
        return v
    return numpy_handler


def _np_strides_ok(a, itemsize, ptr) -> bool:
    """A non-C-contiguous array at address `ptr`: numpy's DLPack export rule
    (strides of extents other than 1 are multiples of the item size, unless
    the array has one element) and the C import's extent rule."""
    shape, strides = a.shape, a.strides
    if a.size != 1 and any(n != 1 and s % itemsize for n, s in zip(shape, strides)):
        return False
    return _layout_ok(shape, strides, itemsize, ptr)


def _handler_for(tp):
    """The cheapest exact import for objects of type `tp`."""
    if tp is View:
        return _view_handler
    mod = tp.__module__ or ""
    if mod == "numpy" and tp.__name__ == "ndarray":   # exactly: not subclasses
        np = sys.modules.get("numpy")
        if np is not None and tp is np.ndarray:
            return _numpy_handler_for(np)
    if (mod == "torch" or mod.startswith("torch.")) and hasattr(tp, "data_ptr") \
            and hasattr(tp, "__dlpack__"):
        torch = sys.modules.get("torch")
        return _dlpack_handler if torch is None else _torch_handler_for(torch)
    if mod.startswith("cupy") and tp.__name__ == "ndarray":
        cupy = sys.modules.get("cupy")
        if cupy is not None and getattr(cupy, "ndarray", None) is tp:   # exactly
            return _cupy_handler_for(cupy)
    if hasattr(tp, "__dlpack__"):
        h = _exchange_handler_for(tp)
        if h is not None:
            return h
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


def from_dlpack_py(obj, *, stream=None) -> View:
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


from_dlpack = from_dlpack_py


def _no_handler(obj):
    # Instances may gain interfaces their type lacks (e.g. set in __init__).
    return _from_dlpack_stream(obj, None)


def _export(dl, kw):
    """The producer's capsule: versioned when it can."""
    try:
        return dl(max_version=(1, 0), **kw)
    except TypeError:  # a producer older than DLPack 1.0
        return dl(**kw)


_push_current, _pop_current = raw("cuabi_device_push_current"), raw("cuabi_device_pop_current")
_EXPORT_DEVICES: dict = {}      # ordinal -> (Device, its handle as a c_void_p), kept


def _export_on(ordinal, dl, kw):
    """_export with GPU `ordinal`'s context pushed: Device.as_current's C
    calls without a Device object and a generator per call (fake driver:
    ~0.8 us, not ~7; from_dlpack with a stream is on every collective)."""
    dh = _EXPORT_DEVICES.get(ordinal)
    if dh is None:
        d = Device(ordinal)
        dh = _EXPORT_DEVICES.setdefault(ordinal, (d, C.c_void_p(d.cuabi_handle)))
    h = dh[1]
    st = _push_current(h)
    if st:
        raise_last(st, "cuabi_device_push_current")
    try:
        return _export(dl, kw)
    finally:
        _pop_current(h)


def _from_dlpack_stream(obj, stream) -> View:
    """The general path: what from_dlpack() does for any object and stream."""
    if type(obj) is View:
        return View._shared(obj)
    if type(stream) is Stream:
        v = _from_exchange_on(obj, stream)
        if v is not None:
            return v
    return _from_producer(obj, stream)


def _from_producer(obj, stream) -> View:
    """_from_dlpack_stream past the exchange table's route (not for this
    object, or refused by the producer): its __dlpack__, a capsule, the
    (CUDA) array interface. The compiled from_dlpack comes here when its
    own exchange-table route is refused."""
    dl = getattr(obj, "__dlpack__", None)
    if dl is not None:
        kw = {}
        gpu = None
        if stream is not None:
            dev, dev_id = obj.__dlpack_device__()[:2]
            if dev != CPU:
                # DLPack: 0 is not a valid CUDA stream value; the legacy
                # default stream is 1 (torch rejects 0 outright).
                kw["stream"] = raw_stream_of(stream) or 1
            if dev in (CUDA, CUDA_MANAGED):
                gpu = dev_id
        # The producer orders its work on the array's device, and may ask the
        # runtime which device is current (torch refuses an array of another):
        # the array's device is current while it exports.
        capsule = _export(dl, kw) if gpu is None else _export_on(gpu, dl, kw)
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


# ---- the compiled backend (cuabi._fast: bindings/python/src/fast_view.c)

def _reset_handlers() -> None:
    """Forget the handler chosen for each type (both backends' caches)."""
    _HANDLERS.clear()
    if fast is not None:
        fast.clear_handlers()


def _fast_handler_for(tp):
    """(kind, Python handler, exchange table address) for objects of type
    `tp`: how the compiled from_dlpack() reads them (the kinds of
    fast_view.c); the Python handler takes whatever it leaves."""
    py = _HANDLERS.get(tp)
    if py is None:
        py = _HANDLERS[tp] = _handler_for(tp) or _no_handler
    mod = tp.__module__ or ""
    if mod == "numpy" and tp.__name__ == "ndarray" and py is not _dlpack_handler:
        np = sys.modules.get("numpy")
        if np is not None and tp is np.ndarray and _numpy_c_setup(np):
            return fast.H_NUMPY, py, None
    if hasattr(tp, "__dlpack__"):
        api = _exchange_api_of(tp)
        if api is not None:
            torch = mod == "torch" or mod.startswith("torch.")
            if torch and py is not _dlpack_handler and api.dltensor_from_py_object_no_sync:
                return fast.H_DLTENSOR, py, C.addressof(api)
            if py.__name__ == "exchange_handler":
                return fast.H_MANAGED, _dlpack_handler, C.addressof(api)
    return fast.H_PYTHON, py, None


_numpy_c_ready = None


def _numpy_c_setup(np) -> bool:
    """Tell the extension where numpy keeps an array's fields
    (PyArrayObject_fields: data, nd, dimensions, strides, base, descr,
    flags, right after the object header), after checking each on probe
    arrays; False (the Python handler) when any differs."""
    global _numpy_c_ready
    if _numpy_c_ready is not None:
        return _numpy_c_ready
    head = object.__basicsize__
    offs = tuple(head + 8 * i for i in range(7))       # the fields, 8 bytes apart

    def word(a, i):
        return C.c_ssize_t.from_address(id(a) + offs[i]).value

    def holds(a):
        nd = C.c_int.from_address(id(a) + offs[1]).value
        flags = C.c_int.from_address(id(a) + offs[6]).value
        if nd != a.ndim:
            return False
        if nd and (tuple((C.c_int64 * nd).from_address(word(a, 2))) != a.shape
                   or tuple((C.c_int64 * nd).from_address(word(a, 3))) != a.strides):
            return False
        return (word(a, 0) == a.__array_interface__["data"][0]
                and word(a, 4) == (0 if a.base is None else id(a.base))
                and word(a, 5) == id(a.dtype)
                and bool(flags & _NPY_C_CONTIGUOUS) == a.flags.c_contiguous
                and bool(flags & _NPY_WRITEABLE) == a.flags.writeable)
    try:
        base = np.arange(24, dtype=np.float64).reshape(4, 6)
        ro = base[1:]
        ro.flags.writeable = False
        probes = (base, base[1:, ::2], base.T, ro, np.zeros(0, np.int8), np.zeros(()))
        ok = sys.implementation.name == "cpython" and all(holds(a) for a in probes)
    except Exception:
        ok = False
    if ok:
        dts = [(np.dtype(name), cb[0], cb[1]) for name, cb in _BY_NAME.items()
               if name != "bfloat16"]
        fast.numpy_setup(np.ndarray, offs, _NPY_C_CONTIGUOUS, _NPY_WRITEABLE, dts)
    _numpy_c_ready = ok
    return ok


if fast is not None:
    fast.view_setup(View, from_dlpack_py, _fast_handler_for, View._new, list(_NAMES), Stream,
                    _from_producer)
    _lazy = fast.lazy_view          # the same object, made in C
    # The DLPack C exchange API, producer side (fast_exchange.c): torch and
    # C extensions take views through these functions instead of __dlpack__.
    View.__dlpack_c_exchange_api__, View.__c_dlpack_exchange_api__ = fast.exchange_api()
    from_dlpack = fast.from_dlpack
    # __dlpack__ in C for the common call (torch.from_dlpack(view) makes
    # one per tensor); the rest goes to the Python method.
    View.__dlpack__ = fast.dlpack_setup(View._dlpack_py)


def _view_from_ipc(descriptor, dtype, shape, strides, readonly):
    """Unpickle a View: map the exporter's memory and lay the view over it."""
    from ._memory import Buffer          # lazy: import time
    with Buffer.from_ipc_descriptor(descriptor) as b:   # the view keeps the mapping
        return View.of_buffer(b, dtype, shape, strides, 0, readonly)


# ---- cuda.core's StridedMemoryView (cuda.core.utils; cuabi.utils re-exports)

def _stream_of_ptr(stream_ptr):
    """cuda.core's stream_ptr: -1 or None = no stream ordering; else a
    CUstream (an int, or an object int() takes: Stream.handle)."""
    if stream_ptr is None:
        return None
    if isinstance(stream_ptr, Stream):
        return stream_ptr
    v = int(stream_ptr)
    return None if v == -1 else (v or 1)


class StridedMemoryView(View):
    """cuda.core's StridedMemoryView: a View (DLPack, CUDA array interface,
    array interface, a Buffer) with cuda.core's names: ptr, shape, strides
    (in elements), dtype (numpy), size, device_id, is_device_accessible,
    readonly, exporting_obj. StridedMemoryView(obj, stream_ptr) tries DLPack
    first, then the CUDA array interface; stream_ptr=-1 skips stream
    ordering."""

    __slots__ = ("exporting_obj",)

    def __init__(self, obj=None, stream_ptr=None):
        if obj is None:
            raise TypeError("StridedMemoryView(obj, stream_ptr): obj is required")
        self._take(_from_any(obj, stream_ptr), obj)

    def _take(self, other, obj):
        self._h, self._fin = other._h, other._fin
        other._h = other._fin = None
        self._info, self._stream, self._owner = other._info, other._stream, other._owner
        self._d = other._d
        other._d = other._owner = None
        self.exporting_obj = obj

    @classmethod
    def _of(cls, view, obj):
        out = cls.__new__(cls)
        out._take(view, obj)
        return out

    @classmethod
    def from_dlpack(cls, obj, stream_ptr=None) -> "StridedMemoryView":
        if getattr(obj, "__dlpack__", None) is None:
            raise BufferError(f"{type(obj).__name__} has no __dlpack__")
        return cls._of(from_dlpack(obj, stream=_stream_of_ptr(stream_ptr)), obj)

    @classmethod
    def from_cuda_array_interface(cls, obj, stream_ptr=None) -> "StridedMemoryView":
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is None:
            raise BufferError(f"{type(obj).__name__} has no __cuda_array_interface__")
        holder = _InterfaceOnly("__cuda_array_interface__", cai, obj)
        return cls._of(from_dlpack(holder, stream=_stream_of_ptr(stream_ptr)), obj)

    @classmethod
    def from_array_interface(cls, obj) -> "StridedMemoryView":
        ai = getattr(obj, "__array_interface__", None)
        if ai is None:
            raise BufferError(f"{type(obj).__name__} has no __array_interface__")
        return cls._of(from_dlpack(_InterfaceOnly("__array_interface__", ai, obj)), obj)

    @classmethod
    def from_any_interface(cls, obj, stream_ptr=None) -> "StridedMemoryView":
        return cls._of(_from_any(obj, stream_ptr), obj)

    @classmethod
    def from_buffer(cls, buffer, shape, strides=None, *, itemsize=None, dtype=None,
                    is_readonly: bool = False) -> "StridedMemoryView":
        """A view of a Buffer: shape, strides in elements (None: C order),
        dtype (a numpy dtype or name; with only itemsize, unsigned ints of
        that size)."""
        if dtype is None:
            if itemsize is None:
                raise ValueError("from_buffer: give dtype or itemsize")
            dtype = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}.get(itemsize)
            if dtype is None:
                raise ValueError(f"from_buffer: itemsize {itemsize} has no dtype")
        elif itemsize is not None and dtype_code(dtype)[1] // 8 != itemsize:
            raise ValueError("from_buffer: dtype's itemsize and itemsize differ")
        v = View.of_buffer(buffer, dtype, tuple(shape),
                           None if strides is None else tuple(strides), 0, is_readonly)
        return cls._of(v, buffer)

    def view(self, layout=None, dtype=None) -> "StridedMemoryView":
        """cuda.core's StridedMemoryView.view: a new view of the same memory
        with another layout and/or dtype. layout: an object with `shape`,
        `strides` (in elements; None: C order) and optionally `itemsize` and
        `slice_offset_in_bytes` (cuda.core's _StridedLayout; None: this
        view's); dtype: a numpy dtype or name (None: this view's, or for a
        layout of another itemsize, unsigned ints of that size). Every
        element of the new view must lie in the memory this view spans."""
        return _relayout(self, layout, dtype)

    def copy_from(self, other: "StridedMemoryView", stream=None, allocator=None,
                  blocking: bool | None = None) -> None:
        """cuda.core's copy_from: every element of `other` (same shape and
        dtype, any layouts) into this view, host to device, device to host
        or device to device, ordered on `stream` (None: the legacy default
        stream, synchronous). Strided host-device copies go through a
        contiguous temporary from `allocator` (a MemoryResource; default:
        the device's memory_resource). blocking: True waits for the copy;
        None waits for host-device copies only; host memory always waits."""
        _copy_views(self, other, stream, allocator, blocking, "copy_from")

    def copy_to(self, other: "StridedMemoryView", stream=None, allocator=None,
                blocking: bool | None = None) -> None:
        """cuda.core's copy_to: this view into `other`; see copy_from."""
        _copy_views(other, self, stream, allocator, blocking, "copy_to")


class _InterfaceOnly:
    """An object offering one array interface of another (from_dlpack then
    takes that path), keeping the original alive."""

    def __init__(self, name, value, owner):
        setattr(self, name, value)
        self._owner = owner


def _from_any(obj, stream_ptr):
    """DLPack first, then the CUDA array interface, then the array
    interface; BufferError when none."""
    if isinstance(obj, View) and type(obj) is not StridedMemoryView:
        return View._shared(obj)
    if not any(hasattr(obj, a) for a in ("__dlpack__", "__cuda_array_interface__",
                                         "__array_interface__")):
        raise BufferError(f"{type(obj).__name__} supports neither DLPack nor the CUDA "
                          f"array interface")
    return from_dlpack(obj, stream=_stream_of_ptr(stream_ptr))


class _StridedMemoryViewProxy:
    """What args_viewable_as_strided_memory passes: .view(stream_ptr)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def view(self, stream_ptr=None) -> StridedMemoryView:
        return StridedMemoryView(self.obj, stream_ptr)


def args_viewable_as_strided_memory(arg_indices):
    """cuda.core's decorator: the positional arguments at `arg_indices`
    arrive as proxies whose view(stream_ptr) gives a StridedMemoryView."""
    import functools                                    # lazy: import time

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            args = list(args)
            for i in arg_indices:
                args[i] = _StridedMemoryViewProxy(args[i])
            return fn(*args, **kwargs)
        return inner
    return wrap


# ---- StridedMemoryView.view / copy_from / copy_to (cuda.core's)

_WRAP_KINDS = {_capi.CUABI_DLPACK_CPU: "host", _capi.CUABI_DLPACK_CUDA: "device",
               _capi.CUABI_DLPACK_CUDA_HOST: "pinned", _capi.CUABI_DLPACK_CUDA_MANAGED: "managed"}


def _span(shape, strides, itemsize) -> tuple[int, int]:
    """(first, end) byte offsets, from the first element's address, of the
    memory a layout touches ((0, 0) when it has no element)."""
    if not shape or all(shape):
        lo = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0) * itemsize
        hi = (sum((n - 1) * st for n, st in zip(shape, strides) if st > 0) + 1) * itemsize
        return lo, hi
    return 0, 0


def _c_strides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _wrapped(view, lo: int, size: int):
    """A Buffer over `size` bytes of a view's memory from byte `lo` (relative
    to its first element), keeping the view (and so its owner) alive."""
    from ._memory import Buffer          # lazy: import time (from_dlpack needs no buffers)
    dev_type, dev_id = view.__dlpack_device__()
    kind = _WRAP_KINDS.get(dev_type)
    if kind is None:
        raise BufferError(f"the view's memory (DLPack device type {dev_type}) is not host or "
                          "CUDA memory")
    return Buffer.wrap(view.ptr + lo, size, kind, None if kind == "host" else dev_id,
                       owner=view)


def _relayout(view, layout, dtype):
    item = view.itemsize
    if layout is None:
        shape, strides, off = view.shape, view.strides, 0
        new_item = item if dtype is None else dtype_code(dtype)[1] // 8
        if new_item != item:
            raise ValueError(f"view: dtype {dtype!r} has {new_item}-byte elements, this view "
                             f"{item}-byte ones: give a layout for them")
    else:
        shape = getattr(layout, "shape", None)
        if shape is None or not hasattr(layout, "strides"):
            raise TypeError(f"view: layout must have shape and strides (cuda.core's "
                            f"_StridedLayout), not {type(layout).__name__}")
        shape = tuple(dims_arg(shape, "view: layout.shape", 0, I64_MAX))
        strides = layout.strides
        strides = _c_strides(shape) if strides is None else tuple(
            dims_arg(strides, "view: layout.strides", I64_MIN, I64_MAX, length=len(shape)))
        off = index_arg(getattr(layout, "slice_offset_in_bytes", 0) or 0,
                        "view: layout.slice_offset_in_bytes")
        new_item = getattr(layout, "itemsize", None)
        if dtype is not None:
            dsize = dtype_code(dtype)[1] // 8
            if new_item is not None and new_item != dsize:
                raise ValueError(f"view: the layout's itemsize {new_item} is not dtype "
                                 f"{dtype!r}'s {dsize}")
            new_item = dsize
        elif new_item is None:
            new_item = item
    if dtype is None:
        dtype = view.dtype_name if new_item == item else \
            {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}.get(new_item)
        if dtype is None:
            raise ValueError(f"view: itemsize {new_item} has no dtype: give one")
    lo, hi = _span(view.shape, view.strides, item)
    nlo, nhi = _span(shape, strides, new_item)
    if nhi > nlo and (off + nlo < lo or off + nhi > hi):
        raise ValueError(f"view: the layout reaches bytes [{off + nlo}, {off + nhi}) from the "
                         f"first element; this view spans [{lo}, {hi})")
    base = min(lo, off + nlo) if nhi > nlo else 0
    with _wrapped(view, base, max(hi - base, 1) if hi > lo else 1) as b:
        v = View.of_buffer(b, dtype, shape, strides, off - base, view.readonly)
    return StridedMemoryView._of(v, view.exporting_obj if isinstance(view, StridedMemoryView)
                                 else view)


def _host_array(view):
    """A numpy array over a host view's memory (writable as the view is)."""
    import numpy as np                   # lazy: import time (numpy only for strided host copies)
    item = view.itemsize
    lo, hi = _span(view.shape, view.strides, item)
    raw_bytes = (C.c_char * max(hi - lo, 1)).from_address(view.ptr + lo)
    a = np.ndarray(view.shape, dtype=np.dtype(view.dtype_name), buffer=raw_bytes,
                   offset=-lo, strides=tuple(st * item for st in view.strides))
    a.flags.writeable = not view.readonly
    return a, raw_bytes


def _span_bytes(view, s):
    """The bytes a device view spans, copied into host memory (a numpy
    uint8 array), and the numpy array of the view's elements over them."""
    import numpy as np                   # lazy: import time (numpy only for strided host copies)
    lo, hi = _span(view.shape, view.strides, view.itemsize)
    raw_bytes = np.empty(max(hi - lo, 1), np.uint8)
    from ._memory import Buffer          # lazy: import time
    with _wrapped(view, lo, hi - lo) as db, \
            Buffer.wrap(raw_bytes.ctypes.data, hi - lo, "host", owner=raw_bytes) as hb:
        lib.cuabi_buffer_copy(hb, 0, db, 0, hi - lo, s)
    if s is not None:
        s.sync()
    arr = np.ndarray(view.shape, dtype=np.dtype(view.dtype_name), buffer=raw_bytes, offset=-lo,
                     strides=tuple(st * view.itemsize for st in view.strides))
    return raw_bytes, arr


def _copy_views(dst, src, stream, allocator, blocking, what):
    other = src if what == "copy_from" else dst
    if not isinstance(other, View):
        raise TypeError(f"{what}: other must be a StridedMemoryView, not "
                        f"{type(other).__name__}")
    if dst.readonly:
        raise ValueError(f"{what}: the destination view is read-only")
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError(f"{what}: shapes differ ({tuple(src.shape)} and {tuple(dst.shape)})")
    if src.dtype_name != dst.dtype_name:
        raise ValueError(f"{what}: dtypes differ ({src.dtype_name} and {dst.dtype_name})")
    if blocking is not None and not isinstance(blocking, bool):
        raise TypeError(f"{what}: blocking must be True, False or None")
    from ._memory import Buffer, MemoryResource, _stream_arg   # lazy: import time
    from .errors import NotSupportedError                     # lazy: import time
    if allocator is not None and not isinstance(allocator, MemoryResource):
        raise TypeError(f"{what}: allocator must be a MemoryResource, not "
                        f"{type(allocator).__name__}")
    s = _stream_arg(stream)
    if not src.size:
        return
    cpu = _capi.CUABI_DLPACK_CPU
    src_host = src.__dlpack_device__()[0] == cpu
    dst_host = dst.__dlpack_device__()[0] == cpu
    nbytes = src.nbytes

    def wait():
        if s is not None:
            s.sync()

    c_src, c_dst = src.is_c_contiguous, dst.is_c_contiguous
    if c_src and c_dst and not (src_host and dst_host):   # one copy, any memory
        with _wrapped(dst, 0, nbytes) as db, _wrapped(src, 0, nbytes) as sb:
            lib.cuabi_buffer_copy(db, 0, sb, 0, nbytes, s)
        if blocking or src_host or dst_host:         # host memory: done before returning
            wait()
        return
    if not src_host and not dst_host:                # device to device, strided
        try:
            lib.cuabi_peer_copy_view(dst, src, s)
            if blocking:
                wait()
            return
        except NotSupportedError:                    # layouts cuMemcpy3D cannot do
            pass

    def scratch(device_view):
        """A contiguous device buffer (and its C-order view) near a device end."""
        mr = allocator
        if mr is None:
            from ._core import Device    # lazy: import time
            mr = Device(device_view.__dlpack_device__()[1]).memory_resource
        b = mr.allocate(nbytes, stream=s)
        return b, View.of_buffer(b, src.dtype_name, tuple(src.shape), None, 0, False)

    import numpy as np                   # lazy: import time (numpy only for strided host copies)
    # the source's elements in host memory, C order
    if src_host:
        tmp = np.ascontiguousarray(_host_array(src)[0])
    else:
        tmp = np.empty(tuple(src.shape), dtype=np.dtype(src.dtype_name))
        with Buffer.wrap(tmp.ctypes.data, nbytes, "host", owner=tmp) as hb:
            if c_src:
                with _wrapped(src, 0, nbytes) as sb:
                    lib.cuabi_buffer_copy(hb, 0, sb, 0, nbytes, s)
                wait()
            else:
                b, bv = scratch(src)
                try:
                    lib.cuabi_peer_copy_view(bv, src, s)
                    lib.cuabi_buffer_copy(hb, 0, b, 0, nbytes, s)
                    wait()
                except NotSupportedError:            # gather on the host
                    keep, arr = _span_bytes(src, s)
                    tmp[...] = arr
                finally:
                    bv.close()
                    b.close(s)
    # ... into the destination
    if dst_host:
        _host_array(dst)[0][...] = tmp
        return
    with Buffer.wrap(tmp.ctypes.data, nbytes, "host", owner=tmp) as hb:
        if c_dst:
            with _wrapped(dst, 0, nbytes) as db:
                lib.cuabi_buffer_copy(db, 0, hb, 0, nbytes, s)
            wait()                                   # the host copy must outlive the copy
            return
        b, bv = scratch(dst)
        try:
            lib.cuabi_buffer_copy(b, 0, hb, 0, nbytes, s)
            lib.cuabi_peer_copy_view(dst, bv, s)
            wait()
        except NotSupportedError:                    # scatter on the host: read the span,
            keep, arr = _span_bytes(dst, s)          # write the elements, write it back
            arr[...] = tmp
            lo, hi = _span(dst.shape, dst.strides, dst.itemsize)
            with _wrapped(dst, lo, hi - lo) as db, \
                    Buffer.wrap(keep.ctypes.data, hi - lo, "host", owner=keep) as kb:
                lib.cuabi_buffer_copy(db, 0, kb, 0, hi - lo, s)
            wait()
        finally:
            bv.close()
            b.close(s)
