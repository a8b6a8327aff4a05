"""from_dlpack's CuPy handler (cupy.ndarray's attributes) gives exactly the
view its __cuda_array_interface__ gives: description, facts, owner and
producer stream, and the same refusals (checked with a faithful fake)."""
import sys

import numpy as np
import pytest

import cuabi
from cuabi import _view as V
from fake_arrays import CUPY_STATE, CUPY_UTIL, FakeCupyArray, make_fake_cupy
from test_view_fast import arrays
from test_view_lazy import facts

ids = lambda a: f"{a.dtype}{a.shape}{a.strides}"  # noqa: E731


@pytest.fixture(params=[True, False], ids=["stream_ptr", "stream_obj"])
def cupy(monkeypatch, request):
    """The fake CuPy, with and without cupy.cuda.stream.get_current_stream_ptr."""
    mods = make_fake_cupy(with_stream_ptr=request.param)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    V._reset_handlers()                     # no handler cached from other tests
    request.addfinalizer(V._reset_handlers)    # nor from this one's fake module
    monkeypatch.setattr(CUPY_STATE, "current", 0)
    monkeypatch.setattr(CUPY_STATE, "ptds", False)
    monkeypatch.setattr(CUPY_UTIL, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION", 3)
    return mods["cupy"]


def both(c):
    """(CuPy handler's view, CUDA-array-interface path's view) of c."""
    return cuabi.from_dlpack(c), V._cai_or_dlpack_handler(c)


@pytest.mark.parametrize("a", list(arrays()), ids=ids)
def test_cupy_handler_equals_cai_path(cupy, a):
    c = FakeCupyArray(a, device_id=1)
    fast, cai = both(c)
    assert V._HANDLERS[FakeCupyArray] is not V._cai_or_dlpack_handler
    assert fast._d == cai._d                  # the same description, field by field
    assert fast._stream == cai._stream == 1 and fast._owner is c and fast.lazy
    f = facts(fast)
    assert f == facts(cai)
    assert f["device"] == (V.CUDA, 1)
    assert facts(cuabi.View._borrowed(fast.handle)) == f     # and its C view agrees
    if a.size == 0:
        assert fast.ptr == 0                  # CuPy's interface says 0 for empty arrays


@pytest.mark.parametrize("shape,strides", [((3, 1), (4, 8)), ((1, 4), (64, 4)),
                                           ((0, 3), (4, 8)), ((2, 3), (4, 8))])
def test_cupy_contiguity_follows_cupys_flag(cupy, shape, strides):
    # Extents of 1 and 0 ignore their strides: CuPy calls these C-contiguous
    # and its interface gives strides None (row-major), the handler likewise.
    base = np.zeros(64, np.float32)
    a = np.lib.stride_tricks.as_strided(base, shape, strides)
    fast, cai = both(FakeCupyArray(a))
    assert fast._d == cai._d and facts(fast) == facts(cai)


def test_cupy_streams_match_the_interface(cupy):
    c = FakeCupyArray(np.zeros(4, np.float32))
    for current, ptds, want in ((0, False, 1), (0, True, 2), (0x1234, False, 0x1234),
                                (0x1234, True, 0x1234)):
        CUPY_STATE.current, CUPY_STATE.ptds = current, ptds
        fast, cai = both(c)
        assert fast._stream == cai._stream == want
        assert type(fast._stream) is int       # wrapped on first use only
    CUPY_UTIL.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 2   # CuPy exports no stream then
    fast, cai = both(c)
    assert fast._stream is cai._stream is None and fast._d == cai._d
    CUPY_UTIL.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 4
    with pytest.raises(ValueError, match="EXPORT_VERSION"):
        cuabi.from_dlpack(c)


def test_cupy_refusals_match_the_interface(cupy):
    base = np.zeros(64, np.float32)
    odd = FakeCupyArray(np.lib.stride_tricks.as_strided(base.view(np.uint8), (3,), (6,))
                        .view(np.uint8))
    odd.dtype = np.dtype(np.float32)          # 4-byte items 6 bytes apart
    for bad, err in ((odd, BufferError),
                     (FakeCupyArray(np.zeros(3, "datetime64[ns]")), TypeError)):
        with pytest.raises(err) as fast:
            cuabi.from_dlpack(bad)
        with pytest.raises(err) as cai:
            V._cai_or_dlpack_handler(bad)
        assert str(fast.value) == str(cai.value)


def test_cupy_handler_only_for_cupys_own_ndarray(cupy, monkeypatch):
    assert V._handler_for(FakeCupyArray) is not V._cai_or_dlpack_handler
    monkeypatch.setattr(cupy.cuda.runtime, "is_hip", True)   # HIP: no CAI, DLPack
    assert V._handler_for(FakeCupyArray) is V._cai_or_dlpack_handler
    monkeypatch.setattr(cupy, "ndarray", object)           # another "cupy.ndarray"
    assert V._handler_for(FakeCupyArray) is V._cai_or_dlpack_handler
    monkeypatch.delitem(sys.modules, "cupy")
    assert V._handler_for(FakeCupyArray) is V._cai_or_dlpack_handler
