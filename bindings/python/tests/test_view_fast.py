"""from_dlpack's attribute fast paths (torch, CUDA array interface,
__array_interface__) give exactly the view the DLPack path gives."""
import itertools

import numpy as np
import pytest

import cuabi
from cuabi import _view as V
from fake_arrays import CUPY_STATE, CUPY_UTIL, FakeCupyArray, make_fake_torch

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def facts(v, strides=True):
    """Everything a view says. Zero-size arrays: numpy's __array_interface__
    says "C-contiguous" (strides None) where its capsule gives the raw
    strides, so the array-interface paths are compared without them."""
    return (v.ptr, v.strides if strides or v.size else None, v.__dlpack_device__(), v.dtype, v.shape, v.readonly,
            v.itemsize, v.size, v.is_c_contiguous, v.is_f_contiguous)


def arrays():
    """Many shapes, dtypes, strided slices, zero-size and read-only arrays."""
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    shapes = [base, base[0], base[:, 1], base[..., ::2], base[:, ::-1], base.T,
              base[:, :, 1:3, ::3], base[0, 0, 0], base[0, 0, 0, 0], base[:0],
              base[:, 1:1], np.float64(1.0) * np.ones(()), base.reshape(-1)[::7]]
    for dt, a in itertools.product(DTYPES, shapes):
        yield a.astype(dt)[...] if a.ndim else np.asarray(a, dtype=dt)
    for dt in ("float32", "int16"):
        x = np.arange(60, dtype=dt).reshape(3, 4, 5)[:, ::2, 1:]
        yield x
        ro = x.copy()
        ro.flags.writeable = False
        yield ro
        yield np.broadcast_to(np.arange(5, dtype=dt), (3, 5))   # zero strides, read-only


@pytest.mark.parametrize("a", list(arrays()), ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_numpy_paths_agree(a):
    dl = V._dlpack_handler(a)
    ai = V._ai_handler(a)
    assert facts(ai, False) == facts(dl, False)
    assert facts(cuabi.from_dlpack(a)) == facts(dl)
    if a.size:
        assert np.array_equal(np.from_dlpack(ai), a)


@pytest.fixture
def torch(monkeypatch):
    t = make_fake_torch()
    monkeypatch.setitem(__import__("sys").modules, "torch", t)
    return t


@pytest.mark.parametrize("a", [a for a in arrays() if a.flags.writeable],
                         ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_torch_attribute_path_matches_dlpack(torch, a):
    t = torch.Tensor(a)
    fast = cuabi.from_dlpack(t)
    assert facts(fast) == facts(V._dlpack_handler(t))
    assert fast._owner is t          # the tensor stays alive with the view


def test_torch_cuda_device_and_fallbacks(torch):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:]
    v = cuabi.from_dlpack(torch.Tensor(a, device=("cuda", 3)))
    assert v.__dlpack_device__() == (V.CUDA, 3) and v.shape == (3, 3) and v.strides == (4, 1)
    assert v.ptr == a.__array_interface__["data"][0] and not v.readonly
    # Tensors that require grad are shared as their data (torch's __dlpack__
    # refuses them; consumers of its exchange API take them too).
    g = cuabi.from_dlpack(torch.Tensor(a, requires_grad=True))
    assert g.ptr == v.ptr and g.shape == (3, 3)
    # What torch's __dlpack__ refuses otherwise, the fast path refuses too
    # (by asking it): the conjugate bit, layouts without strides.
    c = np.zeros(3, np.complex64)
    with pytest.raises(RuntimeError, match="conjugate"):
        cuabi.from_dlpack(torch.Tensor(c, conj=True))
    with pytest.raises(RuntimeError, match="layout"):
        cuabi.from_dlpack(torch.Tensor(a, layout=torch.sparse_coo))
    # The conjugate bit only matters for complex tensors (it is never set
    # on others); the negative bit is ignored, as torch's export does.
    assert cuabi.from_dlpack(torch.Tensor(a, neg=True)).ptr == v.ptr
    # A dtype cuabi has no fast mapping for goes through DLPack as well.
    t = torch.Tensor(a, dtype=torch.complex32)
    assert cuabi.from_dlpack(t).dtype == "float32"     # numpy's capsule says float32
    # Other devices (mps, xpu, ...) likewise.
    assert cuabi.from_dlpack(torch.Tensor(a, device=("mps", 0))).__dlpack_device__() == (1, 0)


def test_torch_rocm_uses_dlpack(torch):
    torch.version.hip = "6.2"
    t = torch.Tensor(np.zeros(3, np.float32), device=("cuda", 0))
    assert V._torch_handler_for(torch) is V._dlpack_handler
    del t


@pytest.mark.parametrize("a", list(arrays()), ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_cuda_array_interface_path_matches_dlpack(a):
    c = FakeCupyArray(a, device_id=1)
    fast = cuabi.from_dlpack(c)
    dl = V._dlpack_handler(c)          # numpy's capsule: CPU, otherwise the same
    assert fast.__dlpack_device__() == (V.CUDA, 1)
    f, d = facts(fast, False), facts(dl, False)
    # CuPy arrays are always writable (its interface says so), numpy's may not be.
    assert f[1:2] == d[1:2] and f[3:5] == d[3:5] and f[6:] == d[6:] and f[5] is False
    # CuPy's interface says data 0 for empty arrays.
    assert fast.ptr == (dl.ptr if a.size else 0)
    assert fast._owner is c


def test_cuda_array_interface_stream_is_wrapped_lazily():
    c = FakeCupyArray(np.zeros(4, np.float32))
    try:
        CUPY_STATE.current = 0x1234
        v = V._cai_or_dlpack_handler(c)
        assert v._stream == 0x1234                      # no Stream made per import
        assert v.__cuda_array_interface__["stream"] == 0x1234
        CUPY_UTIL.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 2   # exports no stream
        assert V._cai_or_dlpack_handler(c)._stream is None
    finally:
        CUPY_STATE.current = 0
        CUPY_UTIL.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 3


def test_owner_lives_exactly_as_long_as_the_view(torch):
    import gc
    import weakref
    t = torch.Tensor(np.ones(8, np.float32))
    ref = weakref.ref(t)
    v = cuabi.from_dlpack(t)
    del t
    gc.collect()
    assert ref() is not None
    assert np.from_dlpack(v).sum() == 8
    del v
    gc.collect()
    assert ref() is None


def test_bad_interfaces_are_refused():
    class Odd:
        def __init__(self, **kw):
            self.__array_interface__ = dict(dict(shape=(2,), typestr="<f4", version=3,
                                                 data=(np.zeros(2, np.float32).ctypes.data,
                                                       False), strides=None), **kw)
    with pytest.raises(BufferError):
        cuabi.from_dlpack(Odd(strides=(3,)))        # not a multiple of the item size
    with pytest.raises(BufferError):
        cuabi.from_dlpack(Odd(mask=object()))
    with pytest.raises(cuabi.CuabiError):
        cuabi.from_dlpack(Odd(shape=(-1,)))         # refused by the C validation
    with pytest.raises(BufferError):
        cuabi.from_dlpack(Odd(shape=(1,) * 65, strides=None))


def test_imports_from_threads_do_not_mix():
    import threading
    arrays_ = [np.arange(n, dtype=np.int32).reshape(-1, 1)[::-1] for n in range(2, 10)]
    bad = []

    def work(a):
        for _ in range(300):
            v = cuabi.from_dlpack(FakeCupyArray(a))
            if v.shape != a.shape or v.strides != (-1, 1):
                bad.append((a.shape, v.shape))
    ts = [threading.Thread(target=work, args=(a,)) for a in arrays_]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_backend_is_visible():
    assert cuabi.backend in ("compiled", "ctypes") and isinstance(cuabi.backend_note, str)
