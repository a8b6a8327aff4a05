"""Stand-ins for torch tensors and CuPy arrays, built over numpy arrays, that
expose exactly the attributes cuabi's from_dlpack fast paths read (so those
paths are tested without the libraries; the GPU tests use the real ones)."""
import ctypes as C
import types

import numpy as np

_TORCH_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "bfloat16", "complex64",
                 "complex128", "complex32"]


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


class _Device:
    """torch.device: compares and hashes by (type, index)."""

    def __init__(self, type, index=None):
        self.type, self.index = type, index

    def __eq__(self, other):
        return isinstance(other, _Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


# ---- the DLPack C exchange API (DLPack 1.3) with Python callbacks

class _Header(C.Structure):
    pass


_Header._fields_ = [("major", C.c_uint32), ("minor", C.c_uint32),
                    ("prev_api", C.POINTER(_Header))]


class _Table(C.Structure):
    _fields_ = [("header", _Header), ("managed_tensor_allocator", C.c_void_p),
                ("managed_tensor_from_py_object_no_sync", C.c_void_p),
                ("managed_tensor_to_py_object_no_sync", C.c_void_p),
                ("dltensor_from_py_object_no_sync", C.c_void_p),
                ("current_work_stream", C.c_void_p)]


_FROM_OBJECT = C.CFUNCTYPE(C.c_int, C.py_object, C.c_void_p)
_WORK_STREAM = C.CFUNCTYPE(C.c_int, C.c_int, C.c_int32, C.c_void_p)
_capsule_new = C.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]
_capsule_ptr = C.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype, _capsule_ptr.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
_capsule_rename = C.pythonapi.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = C.c_int, [C.py_object, C.c_char_p]


class ExchangeTable:
    """A DLPackExchangeAPI table whose owning export is a Python callback
    (`export(obj) -> DLManagedTensorVersioned address`, -1 to fail), counting
    calls. `capsule` is what a producer type puts in
    __dlpack_c_exchange_api__, `address` the table."""

    def __init__(self, export=None, major=1, minor=3, prev=None,
                 name=b"dlpack_exchange_api", dltensor=None, work_stream=None):
        """dltensor(obj, DLTensor address) -> 0, or -1 to fail: the
        non-owning export (dltensor_from_py_object_no_sync), counted in
        calls["dltensor"]. work_stream(device_type, device_id) -> the
        producer's current stream (an int), or None to fail: the table's
        current_work_stream, its calls' arguments in calls["work_stream"]."""
        self.calls = {"export": 0, "dltensor": 0, "work_stream": []}
        self.prev = prev
        t = self.table = _Table()
        t.header.major, t.header.minor = major, minor
        if prev is not None:
            t.header.prev_api = C.cast(C.addressof(prev.table), C.POINTER(_Header))
        self._fns = []
        if export is not None:
            def call_export(o, out):
                p = export(o)
                if p == -1:
                    return -1
                C.c_void_p.from_address(out).value = p
                return 0
            t.managed_tensor_from_py_object_no_sync = self._keep(call_export)
        if dltensor is not None:
            def call_dltensor(o, out):
                self.calls["dltensor"] += 1
                return dltensor(o, out)
            f = _FROM_OBJECT(call_dltensor)
            self._fns.append(f)
            t.dltensor_from_py_object_no_sync = C.cast(f, C.c_void_p).value
        if work_stream is not None:
            def call_work_stream(kind, dev_id, out):
                self.calls["work_stream"].append((kind, dev_id))
                got = work_stream(kind, dev_id)
                if got is None:
                    return -1
                C.c_void_p.from_address(out).value = got
                return 0
            f = _WORK_STREAM(call_work_stream)
            self._fns.append(f)
            t.current_work_stream = C.cast(f, C.c_void_p).value
        self.address = C.addressof(t)
        self._name = name
        self.capsule = _capsule_new(self.address, name, None)

    def _keep(self, body):
        def counted(obj, out):
            self.calls["export"] += 1
            return body(obj, out)
        f = _FROM_OBJECT(counted)
        self._fns.append(f)
        return C.cast(f, C.c_void_p).value


def numpy_export(arr):
    """numpy's own owning DLManagedTensorVersioned for `arr` (the capsule is
    marked used, so the consumer owns the tensor and calls its deleter)."""
    cap = arr.__dlpack__(max_version=(1, 0))
    p = _capsule_ptr(cap, b"dltensor_versioned")
    _capsule_rename(cap, b"used_dltensor_versioned")
    return p


def make_fake_torch():
    """A module object named "torch" with a Tensor type mimicking torch.Tensor."""
    torch = types.ModuleType("torch")
    for n in _TORCH_DTYPES:
        setattr(torch, n, _Dtype(n))
    torch.strided, torch.sparse_coo = object(), object()
    torch.version = types.SimpleNamespace(hip=None, cuda="12.8")

    class Tensor:
        """torch.Tensor's view of a numpy array: data_ptr() includes the
        storage offset, stride() is in elements; __dlpack__ is numpy's
        (CPU), which the fast path must reproduce exactly."""

        def __init__(self, arr, device=("cpu", None), dtype=None, requires_grad=False,
                     conj=False, layout=None, neg=False):
            self._a = arr
            self.device = _Device(*device)
            self.dtype = dtype or getattr(torch, arr.dtype.name)
            self.requires_grad = requires_grad
            self._conj = conj
            self._neg = neg
            self.layout = torch.strided if layout is None else layout

        @property
        def shape(self):
            return tuple(self._a.shape)   # torch.Size is a tuple subclass

        @property
        def is_cuda(self):
            return self.device.type == "cuda"

        @property
        def is_cpu(self):
            return self.device.type == "cpu"

        def get_device(self):
            return (self.device.index or 0) if self.device.type == "cuda" else -1

        def stride(self):
            if self.layout is not torch.strided:   # as torch: sparse has none
                raise RuntimeError("sparse tensors do not have strides")
            return tuple(s // self._a.itemsize for s in self._a.strides)

        def data_ptr(self):
            return self._a.__array_interface__["data"][0]

        def is_conj(self):
            return self._conj

        def is_neg(self):
            return self._neg

        def __dlpack__(self, stream=None, max_version=None, **kw):
            if self.requires_grad:
                raise RuntimeError("Can't export tensors that require gradient, "
                                   "use tensor.detach()")
            if self._conj:
                raise RuntimeError("conjugate bit set: call resolve_conj() first")
            if self.layout is not torch.strided:
                raise RuntimeError("Can't export tensors with layout other than torch.strided")
            return self._a.__dlpack__(max_version=max_version)

        def __dlpack_device__(self):
            return (2, self.device.index or 0) if self.device.type == "cuda" else (1, 0)

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch.from_numpy = Tensor
    return torch


class _CupyDevice:
    def __init__(self, id):
        self.id = id


class _MemoryPointer:
    def __init__(self, ptr, device):
        self.ptr, self.device, self.device_id = ptr, device, device.id


# What CuPy's __cuda_array_interface__ reads besides the array: the current
# stream (a Stream with .ptr; the null stream is 0), the default stream
# (legacy 1, per-thread 2) and the export version (cupy._core._util, a
# module attribute CuPy's own tests change at run time).
CUPY_STATE = types.SimpleNamespace(current=0, ptds=False)
CUPY_UTIL = types.SimpleNamespace(CUDA_ARRAY_INTERFACE_EXPORT_VERSION=3)


def _c_contiguous(shape, strides, itemsize):
    # cupy._core.internal.get_c_contiguity: empty arrays are contiguous,
    # extents of 1 ignore their stride.
    if 0 in shape:
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


class FakeCupyArray:
    """cupy.ndarray over a numpy array: data.ptr (a MemoryPointer), shape,
    strides in bytes, size, dtype (a numpy dtype), device.id, _c_contiguous
    (readonly in CuPy), and __cuda_array_interface__ built the way CuPy
    builds it (v3: strides None when C-contiguous, data 0 when empty, the
    current stream or the default one when that is the null stream)."""

    def __init__(self, arr, device_id=0):
        self._a = arr
        self.device = _CupyDevice(device_id)
        self.data = _MemoryPointer(arr.__array_interface__["data"][0], self.device)
        self.dtype = arr.dtype
        self.size = arr.size
        self._c_contiguous = _c_contiguous(arr.shape, arr.strides, arr.itemsize)

    @property
    def shape(self):
        return tuple(self._a.shape)

    @property
    def strides(self):
        return tuple(self._a.strides)

    @property
    def __cuda_array_interface__(self):
        desc = {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr}
        ver = CUPY_UTIL.CUDA_ARRAY_INTERFACE_EXPORT_VERSION
        if ver == 3:
            desc["stream"] = CUPY_STATE.current or _default_stream_ptr()
        elif ver != 2:
            raise ValueError("CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION can only be set to "
                             "3 (default) or 2")
        desc["version"] = ver
        desc["strides"] = None if self._c_contiguous else self.strides
        desc["data"] = (self.data.ptr if self.size > 0 else 0, False)
        return desc

    def __dlpack__(self, stream=None, max_version=None, **kw):
        return self._a.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (2, self.device.id)


FakeCupyArray.__module__ = "cupy"
FakeCupyArray.__name__ = FakeCupyArray.__qualname__ = "ndarray"


def _default_stream_ptr():
    return 2 if CUPY_STATE.ptds else 1


def make_fake_cupy(with_stream_ptr=True):
    """{module name: module} for "cupy" (ndarray, cuda.get_current_stream,
    cuda.runtime.is_hip, the submodule cupy._util) and "cupy_backends.cuda.stream"
    (get_default_stream_ptr), the parts cuabi's CuPy handler reads."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeCupyArray
    cupy.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(is_hip=False),
        get_current_stream=lambda device_id=-1: types.SimpleNamespace(ptr=CUPY_STATE.current),
        # CuPy's pointer-only query (cupy.cuda.stream); with_stream_ptr=False
        # gives a CuPy without it.
        stream=types.SimpleNamespace(get_current_stream_ptr=lambda: CUPY_STATE.current))
    # As in CuPy 14.2: the export version lives in the submodule cupy._util,
    # which is not an attribute of cupy until someone imports it.
    if not with_stream_ptr:
        del cupy.cuda.stream
    cupy._core = types.ModuleType("cupy._core")
    backends = types.ModuleType("cupy_backends.cuda.stream")
    backends.get_default_stream_ptr = _default_stream_ptr
    return {"cupy": cupy, "cupy._core": cupy._core, "cupy._util": CUPY_UTIL,
            "cupy_backends.cuda.stream": backends}


_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def numpy_dltensor(arr, out, device=(1, 0), keep=None):
    """Fill the DLTensor at `out` for a numpy array as torch's
    dltensor_from_py_object_no_sync fills it for a tensor: data pointer,
    shape, strides in elements; `keep` (a list) holds the int64 arrays."""
    t = DLTensorView.from_address(out)
    t.data = arr.__array_interface__["data"][0]
    t.device_type, t.device_id = device
    t.ndim = arr.ndim
    t.code, t.bits, t.lanes = _DL_CODES[arr.dtype.kind], arr.dtype.itemsize * 8, 1
    dims = (C.c_int64 * max(arr.ndim, 1))(*arr.shape)
    strides = (C.c_int64 * max(arr.ndim, 1))(*(s // arr.itemsize for s in arr.strides))
    t.shape, t.strides, t.byte_offset = C.addressof(dims), C.addressof(strides), 0
    if keep is not None:
        keep += [dims, strides]
    return 0


class DLTensorView(C.Structure):
    """DLTensor with its device and dtype flattened (the same layout)."""
    _fields_ = [("data", C.c_void_p), ("device_type", C.c_int32), ("device_id", C.c_int32),
                ("ndim", C.c_int32), ("code", C.c_uint8), ("bits", C.c_uint8),
                ("lanes", C.c_uint16), ("shape", C.c_void_p), ("strides", C.c_void_p),
                ("byte_offset", C.c_uint64)]
