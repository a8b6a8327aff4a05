"""Lazy views: from_dlpack's attribute paths describe the array in Python
and make the C view only on first need; both must say the same things."""
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import cuabi
from cuabi import _view as V
from fake_arrays import FakeCupyArray, make_fake_torch
from test_view_fast import arrays

FACTS = ("ptr", "shape", "strides", "dtype", "ndim", "itemsize", "size", "nbytes", "readonly",
         "is_c_contiguous", "is_f_contiguous")


def facts(v):
    out = {k: getattr(v, k) for k in FACTS}
    out["device"] = v.__dlpack_device__()
    iface = "__array_interface__" if out["device"][0] == V.CPU else "__cuda_array_interface__"
    out["iface"] = {k: x for k, x in getattr(v, iface).items() if k != "stream"}
    return out


def c_twin(v):
    """A C-born View sharing v's C view (materialising v)."""
    return cuabi.View._borrowed(v.handle)


ids = lambda a: f"{a.dtype}{a.shape}{a.strides}"  # noqa: E731


@pytest.mark.parametrize("a", list(arrays()), ids=ids)
def test_numpy_lazy_equals_materialised(a):
    v = cuabi.from_dlpack(a)
    assert v.lazy
    lazy = facts(v)
    twin = c_twin(v)
    assert not v.lazy and twin._d is None
    assert facts(twin) == lazy == facts(v)
    assert lazy == facts(V._dlpack_handler(a)) or a.size == 0   # numpy's own capsule


@pytest.fixture
def torch(monkeypatch):
    t = make_fake_torch()
    monkeypatch.setitem(sys.modules, "torch", t)
    return t


@pytest.mark.parametrize("a", [a for a in arrays() if a.flags.writeable], ids=ids)
def test_torch_and_cai_lazy_equal_materialised(torch, a):
    for obj in (torch.Tensor(a), torch.Tensor(a, device=("cuda", 1)), FakeCupyArray(a, 2)):
        v = cuabi.from_dlpack(obj)
        assert v.lazy and v._owner is obj
        lazy = facts(v)
        assert facts(c_twin(v)) == lazy


def test_lazy_kernel_argument_makes_no_c_view():
    from cuabi._argpack import device_pointer, is_array_like
    from cuabi._argpack import _pointer_getter
    a = np.arange(8, dtype=np.float32)[2:]
    v = cuabi.from_dlpack(a)
    assert is_array_like(v)
    assert device_pointer(v) == a.__array_interface__["data"][0]
    assert _pointer_getter(type(v))(v) == v.ptr
    pack = cuabi.ArgPack("ptr, i32")
    pack.set(v, 3)
    assert v.lazy and v._h is None


def test_materialised_owner_lives_as_long_as_the_c_view():
    a = np.arange(6, dtype=np.int32)
    ref = weakref.ref(holder := _Holder(a))
    v = cuabi.from_dlpack(holder)            # __array_interface__: lazy, owner = holder
    assert v.lazy and v._owner is holder
    del holder
    cap = v.__dlpack__(max_version=(1, 0))   # materialises; the capsule holds the C view
    del v
    gc.collect()
    assert ref() is not None                 # the C view keeps the owner
    back = np.from_dlpack(_Capsule(cap))
    np.testing.assert_array_equal(back, np.arange(6))
    del back, cap
    gc.collect()
    assert ref() is None                     # ... and no longer
    assert not V._OWNERS


def test_lazy_view_without_c_view_drops_owner():
    a = np.ones(3)
    ref = weakref.ref(h := _Holder(a))
    v = cuabi.from_dlpack(h)
    del h
    assert ref() is not None
    del v
    gc.collect()
    assert ref() is None


def test_lazy_roundtrip_through_dlpack_shares_memory():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    v = cuabi.from_dlpack(a)
    b = np.from_dlpack(v)
    assert not v.lazy
    assert b.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    b[1, 1] = -5
    assert a[1, 1] == -5
    np.testing.assert_array_equal(np.from_dlpack(v[1:]), a[1:])


def test_readonly_lazy_view_exports_read_only():
    a = np.arange(4, dtype=np.int16)
    a.flags.writeable = False
    v = cuabi.from_dlpack(a)
    assert v.lazy and v.readonly
    assert not np.from_dlpack(v).flags.writeable


def test_materialisation_from_threads_makes_one_c_view():
    for _ in range(20):
        v = cuabi.from_dlpack(np.zeros(5))
        start = threading.Barrier(4)
        seen = []

        def ask():
            start.wait()
            seen.append(v.handle)
        ts = [threading.Thread(target=ask) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(set(seen)) == 1 and seen[0] == v.handle
        v.close()
    gc.collect()
    assert not V._OWNERS


def test_close_and_closed_semantics():
    v = cuabi.from_dlpack(np.zeros(3))
    assert not v.closed and v.lazy
    v.close()
    assert v.closed and not v.lazy
    with pytest.raises(cuabi.ClosedHandleError):
        v.handle
    with pytest.raises(cuabi.ClosedHandleError):
        v.shape
    w = cuabi.from_dlpack(np.zeros(3))
    w.handle
    w.close()
    w.close()                                 # idempotent
    assert w.closed
    gc.collect()
    assert not V._OWNERS


def test_view_of_a_lazy_view_is_lazy_and_equal_views():
    a = np.arange(3.0)
    v = cuabi.from_dlpack(a)
    w = cuabi.from_dlpack(v)
    assert w.lazy and w.ptr == v.ptr and w._owner is a
    assert v == v and hash(v) == hash(w)
    x = cuabi.View._borrowed(v.handle)
    assert x == v and hash(x) == hash(v)


def test_numpy_fast_path_falls_back_where_unsure():
    # byte-swapped, unsupported dtypes and subclasses take numpy's DLPack path
    with pytest.raises(BufferError):
        cuabi.from_dlpack(np.zeros(3, ">f4"))
    with pytest.raises(BufferError):
        cuabi.from_dlpack(np.zeros(3, "M8[s]"))
    m = np.ma.masked_array(np.arange(3.0))
    assert not cuabi.from_dlpack(m).lazy
    # strides that are not a multiple of the item size: numpy refuses
    rec = np.zeros(4, dtype=[("a", "i1"), ("b", "<i4")])
    with pytest.raises(BufferError):
        cuabi.from_dlpack(rec["b"])
    # a numpy array over a capsule keeps the capsule's device
    from_view = np.from_dlpack(cuabi.Buffer(16, cuabi.MemoryResource.host()).view("uint8"))
    assert cuabi.from_dlpack(from_view).__dlpack_device__() == from_view.__dlpack_device__()


def test_bad_cai_layouts_still_raise_the_c_error():
    class Odd:
        def __init__(self, **kw):
            self._a = np.zeros(2, np.float32)
            self.__cuda_array_interface__ = dict(dict(
                shape=(2,), typestr="<f4", version=3, data=(self._a.ctypes.data, False),
                strides=None), **kw)
    with pytest.raises(cuabi.CuabiError):
        cuabi.from_dlpack(Odd(shape=(2, -1)))
    with pytest.raises(cuabi.CuabiError):
        cuabi.from_dlpack(Odd(data=(0, False)))          # NULL data, 2 elements
    with pytest.raises(cuabi.CuabiError):
        cuabi.from_dlpack(Odd(shape=(2, 1 << 62), strides=(4, 1 << 40)))
    assert cuabi.from_dlpack(Odd(shape=(0, 3), data=(0, False))).size == 0


class _Holder:
    """An __array_interface__ object (no DLPack) that we can weakref."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class _Capsule:
    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, **kw):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)
