"""Kernel arguments for packs made from a kernel's parameter info (raw slots
of known size only) and the plain launch's in-place packers: array-like
objects are their address, never a number (no GPU needed)."""
import struct

import pytest

import cuabi

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.skipif(not hasattr(cuabi, "launch"), reason="no launch module")

PTX = b""".version 8.0
.target sm_90
.address_size 64

.visible .entry k(
    .param .u64 p,
    .param .u32 n,
    .param .f32 a,
    .param .u64 q
)
{
    ret;
}
"""


class CAI:
    """A CuPy-like device array of 1000 float32: .item() must never be used."""

    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (1000,),
                                         "typestr": "<f4", "version": 3}
        self.dtype = np.dtype(np.float32)
        self.shape = (1000,)

    def item(self):
        raise ValueError("can only convert an array of size 1 to a Python scalar")


class TorchLike:
    """A torch-like tensor: data_ptr(), a 4-byte dtype, __dlpack__, .item() fails."""

    dtype = np.dtype(np.float32)
    shape = (1024,)

    def __init__(self, ptr):
        self._ptr = ptr

    def data_ptr(self):
        return self._ptr

    def item(self):
        raise RuntimeError("a Tensor with 1024 elements cannot be converted to Scalar")

    def __dlpack__(self, **kw):
        raise AssertionError("DLPack must not be needed for an address")


class AI:
    def __init__(self, ptr):
        self.__array_interface__ = {"data": (ptr, False), "shape": (3,), "typestr": "<i4",
                                    "version": 3}


def q(v):
    return struct.pack("<Q", v)


def test_raw_slots_take_arrays_as_addresses():
    p = cuabi.ArgPack.from_sizes([8, 4, 4, 8])
    x = np.ones(1000, np.float32)
    p.set(x, 5, 1.5, CAI(0xAB00))
    assert p[0] == q(x.ctypes.data) and p[3] == q(0xAB00)
    assert p[1] == struct.pack("<i", 5) and p[2] == struct.pack("<f", 1.5)
    p.set(TorchLike(0x7000), np.int32(7), np.float32(2.0), AI(0x9900))
    assert p[0] == q(0x7000) and p[3] == q(0x9900)
    assert p[1] == struct.pack("<i", 7) and p[2] == struct.pack("<f", 2.0)
    with cuabi.MemoryResource.host() as r, cuabi.Buffer(64, r) as b:
        v = b.view("float32")        # a View's dtype is a name, not a numpy dtype
        p.set(b, 1, 1.0, v)
        assert p[0] == q(b.ptr) and p[3] == q(v.ptr)
        v.close()


def test_raw_slots_numbers_by_size():
    p = cuabi.ArgPack.from_sizes([8, 4, 4, 8])
    p.set(np.float64(2.5), np.int64(-3), np.float32(0.5), np.int32(-9))
    assert p[0] == struct.pack("<d", 2.5)
    assert p[1] == struct.pack("<i", -3)
    assert p[2] == struct.pack("<f", 0.5)
    assert p[3] == struct.pack("<q", -9)
    p.set(1 << 40, 0xFFFFFFFF, True, 2.0)
    assert p[0] == struct.pack("<q", 1 << 40) and p[1] == b"\xff" * 4
    assert p[2] == struct.pack("<i", 1) and p[3] == struct.pack("<d", 2.0)


def test_arrays_refused_for_small_slots():
    p = cuabi.ArgPack.from_sizes([8, 4])
    for arr in (np.zeros(4, np.float32), CAI(0x10), TorchLike(0x20)):
        with pytest.raises(TypeError, match="4-byte"):
            p.set(0, arr)


@pytest.fixture
def kernel():
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    with cuabi.ObjectCode.from_bytes(PTX, "ptx", name="k.ptx") as oc:
        yield oc.get_kernel("k")


def _blob(kernel):  # the first 24 bytes (the blob is rounded to 8)
    pl = kernel._launch_cache["plain"]
    return bytes(pl.mem)[:24]


def _launch(kernel, *args):
    """Pack and launch; without a GPU the launch itself fails after packing."""
    try:
        cuabi.launch(None, cuabi.LaunchConfig(grid=1, block=32), kernel, *args)
    except cuabi.CuabiError as e:
        assert not isinstance(e, (cuabi.ClosedHandleError,)), e
    return _blob(kernel)


@pytest.mark.parametrize("make", [
    lambda: np.ones(1000, np.float32), lambda: CAI(0xAB00), lambda: TorchLike(0x7000)])
def test_plain_launch_packs_arrays_in_place(kernel, make):
    x, y = make(), make()
    blob = _launch(kernel, x, 5, 1.5, y)
    want = struct.pack("<QifQ", cuabi.device_pointer(x), 5, 1.5, cuabi.device_pointer(y))
    assert blob == want
    blob = _launch(kernel, x, np.int32(6), np.float32(2.5), y)   # another packer
    assert blob == struct.pack("<QifQ", cuabi.device_pointer(x), 6, 2.5, cuabi.device_pointer(y))


def test_plain_launch_numbers_and_fallbacks(kernel):
    assert _launch(kernel, 1, 0xFFFFFFFF, 0.5, np.int32(-2)) == \
        struct.pack("<QIfq", 1, 0xFFFFFFFF, 0.5, -2)   # unsigned: the generic path
    assert _launch(kernel, np.float64(1.0), np.int64(3), np.float64(0.25), None) == \
        struct.pack("<dif", 1.0, 3, 0.25) + bytes(8)
    with pytest.raises(TypeError):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 1, 2)
    with pytest.raises(TypeError, match="4-byte"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, np.zeros(3), 1.0, 0)
    with pytest.raises(TypeError):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, 1 << 40, 1.0, 0)


def test_plain_launch_closed_objects(kernel):
    s = cuabi.Stream.__new__(cuabi.Stream)
    s._h, s._fin = None, None
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.launch(s, cuabi.LaunchConfig(), kernel, 0, 1, 1.0, 0)
    kernel.close()
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, 1, 1.0, 0)
