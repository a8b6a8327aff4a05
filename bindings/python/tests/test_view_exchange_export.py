"""cuabi.View's DLPack C exchange table (DLPack 1.3, the producer side, in
cuabi._fast): called through ctypes as a C consumer (torch, tvm-ffi, a C
extension) calls it, with the GIL held. The ctypes backend has no table."""
import ctypes as C
import gc
import weakref

import numpy as np
import pytest

import cuabi
from cuabi import _capi, _lib
from fake_arrays import DLTensorView, _Table, numpy_export

pytestmark = pytest.mark.skipif(_lib.fast is None, reason="cuabi._fast not in use")

FROM_OBJECT = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_void_p)
TO_OBJECT = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.py_object))
SET_ERROR = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p, C.c_char_p)
ALLOCATOR = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p), C.c_void_p, SET_ERROR)
STREAM = C.PYFUNCTYPE(C.c_int, C.c_int, C.c_int32, C.POINTER(C.c_void_p))
MT = _capi.DLManagedTensorVersioned


def table():
    cap, address = cuabi.View.__dlpack_c_exchange_api__, cuabi.View.__c_dlpack_exchange_api__
    get_name = C.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = C.c_char_p, [C.py_object]
    assert get_name(cap) == b"dlpack_exchange_api"
    get_ptr = C.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
    assert get_ptr(cap, b"dlpack_exchange_api") == address
    return _Table.from_address(address)


def host_view():
    buf = cuabi.Buffer(96, resource=cuabi.MemoryResource.host())
    return buf.view("float32", (4, 6))[:, 1::2]


def test_table_version_and_functions():
    t = table()
    assert (t.header.major, t.header.minor) == (1, 3) and not t.header.prev_api
    for name in ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
                 "managed_tensor_to_py_object_no_sync", "dltensor_from_py_object_no_sync",
                 "current_work_stream"):
        assert getattr(t, name), name


def test_owning_export_round_trip():
    before = _lib.fast.exchange_calls()
    t = table()
    export = FROM_OBJECT(t.managed_tensor_from_py_object_no_sync)
    to_object = TO_OBJECT(t.managed_tensor_to_py_object_no_sync)
    v = host_view()
    out = C.c_void_p()
    assert export(v, C.addressof(out)) == 0
    mt = MT.from_address(out.value)
    assert (mt.version.major, mt.dl_tensor.ndim) == (1, 2)
    assert tuple(mt.dl_tensor.shape[i] for i in range(2)) == (4, 3)
    assert tuple(mt.dl_tensor.strides[i] for i in range(2)) == (6, 2)
    back = C.py_object()
    assert to_object(out, C.byref(back)) == 0          # the new View owns the tensor
    w = back.value
    assert isinstance(w, cuabi.View)
    after = _lib.fast.exchange_calls()
    for name in ("managed_tensor_from_py_object_no_sync", "managed_tensor_to_py_object_no_sync"):
        assert after[name] == before[name] + 1
    assert (w.ptr, w.shape, w.strides, w.dtype) == (v.ptr, v.shape, v.strides, v.dtype)


def test_owning_export_of_a_lazy_view_materialises_it():
    t = table()
    export = FROM_OBJECT(t.managed_tensor_from_py_object_no_sync)
    a = np.arange(6, dtype=np.int32)
    v = cuabi.from_dlpack(a)
    assert v.lazy
    out = C.c_void_p()
    assert export(v, C.addressof(out)) == 0
    assert not v.lazy
    mt = MT.from_address(out.value)
    assert mt.dl_tensor.data == a.__array_interface__["data"][0]
    mt.deleter(C.cast(out, C.POINTER(MT)))


def test_owning_export_refuses_other_objects_and_closed_views():
    export = FROM_OBJECT(table().managed_tensor_from_py_object_no_sync)
    out = C.c_void_p()
    with pytest.raises(TypeError, match="not a cuabi.View"):
        export(np.zeros(3), C.addressof(out))
    v = host_view()
    v.close()
    with pytest.raises(cuabi.ClosedHandleError):
        export(v, C.addressof(out))
    assert not out.value


def test_non_owning_export():
    fill = FROM_OBJECT(table().dltensor_from_py_object_no_sync)
    v = host_view()
    t = DLTensorView()
    assert fill(v, C.addressof(t)) == 0
    assert t.data + t.byte_offset == v.ptr and (t.device_type, t.device_id) == (1, 0)
    assert (t.ndim, t.code, t.bits, t.lanes) == (2, 2, 32, 1)
    assert tuple((C.c_int64 * 2).from_address(t.shape)) == v.shape
    assert tuple((C.c_int64 * 2).from_address(t.strides)) == v.strides
    with pytest.raises(TypeError):
        fill("not a view", C.addressof(t))


def test_import_refusal_deletes_the_tensor():
    to_object = TO_OBJECT(table().managed_tensor_to_py_object_no_sync)
    base = np.zeros(4, np.float32)
    ref = weakref.ref(base)
    p = numpy_export(base)
    MT.from_address(p).dl_tensor.dtype.lanes = 2
    del base
    back = C.py_object()
    with pytest.raises(cuabi.CuabiError, match="lanes"):
        to_object(p, C.byref(back))
    gc.collect()
    assert ref() is None              # the deleter ran, once


def errors_recorder():
    seen = []

    @SET_ERROR
    def set_error(ctx, kind, message):
        seen.append((kind.decode(), message.decode()))
    return seen, set_error


def prototype(shape, device=(1, 0), code=2, bits=32, lanes=1, ndim=None):
    t = DLTensorView()
    t.device_type, t.device_id = device
    t.ndim = len(shape) if ndim is None else ndim
    t.code, t.bits, t.lanes = code, bits, lanes
    dims = (C.c_int64 * max(len(shape), 1))(*shape)
    t.shape = C.addressof(dims)
    t._keep = dims
    return t


def test_allocator_makes_host_tensors():
    t = table()
    alloc = ALLOCATOR(t.managed_tensor_allocator)
    to_object = TO_OBJECT(t.managed_tensor_to_py_object_no_sync)
    seen, set_error = errors_recorder()
    out = C.c_void_p()
    assert alloc(C.addressof(prototype((3, 4))), C.byref(out), None, set_error) == 0, seen
    back = C.py_object()
    assert to_object(out, C.byref(back)) == 0
    v = back.value
    assert (v.shape, v.dtype, v.is_c_contiguous) == ((3, 4), "float32", True)
    arr = np.from_dlpack(v)
    arr[:] = 7
    assert np.from_dlpack(v).sum() == 84


def test_allocator_errors_go_through_set_error():
    alloc = ALLOCATOR(table().managed_tensor_allocator)
    seen, set_error = errors_recorder()
    out = C.c_void_p()
    for proto in (prototype((2,), lanes=4), prototype((2,), device=(7, 0)),
                  prototype((2,), ndim=-1), prototype((1 << 62, 1 << 62))):
        assert alloc(C.addressof(proto), C.byref(out), None, set_error) == -1
        assert not out.value
    assert [k for k, _ in seen] == ["BufferError"] * 4
    assert "one lane" in seen[0][1] and "kDLCUDA" in seen[1][1] and "too large" in seen[3][1]
    try:
        has_gpu = cuabi.device_count() > 0
    except cuabi.CuabiError:
        has_gpu = False
    if not has_gpu:                # the library's own error, through SetError
        seen.clear()
        assert alloc(C.addressof(prototype((2,), device=(2, 0))), C.byref(out), None,
                     set_error) == -1
        assert seen and seen[0][0] == "RuntimeError" and "cuabi_" in seen[0][1]


def test_current_work_stream_is_the_default_stream():
    get = STREAM(table().current_work_stream)
    s = C.c_void_p(123)
    assert get(2, 0, C.byref(s)) == 0 and s.value is None


def test_consumers_of_our_table_given_other_objects_fall_back():
    # Another type carrying cuabi's table: the table refuses its objects
    # (TypeError), and from_dlpack takes the object's __dlpack__.
    class Wrapper:
        __dlpack_c_exchange_api__ = cuabi.View.__dlpack_c_exchange_api__

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)
    v = cuabi.from_dlpack(Wrapper(np.arange(3.0)))
    assert v.shape == (3,) and v.dtype == "float64"
