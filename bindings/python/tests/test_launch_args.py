"""Kernel arguments: raw slots (sizes only), typed slots from a kernel's PTX
or mangled name, and the plain launch's in-place packers. Array-like objects
are their address, never a number; a float is never reinterpreted as an
integer or the reverse (issue 17); no GPU needed."""
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
    p.set(x, 5, np.float32(1.5), CAI(0xAB00))
    assert p[0] == q(x.ctypes.data) and p[3] == q(0xAB00)
    assert p[1] == struct.pack("<i", 5) and p[2] == struct.pack("<f", 1.5)
    p.set(TorchLike(0x7000), np.int32(7), np.float32(2.0), AI(0x9900))
    assert p[0] == q(0x7000) and p[3] == q(0x9900)
    assert p[1] == struct.pack("<i", 7) and p[2] == struct.pack("<f", 2.0)
    with cuabi.MemoryResource.host() as r, cuabi.Buffer(64, r) as b:
        v = b.view("float32")        # a View's dtype is a name, not a numpy dtype
        p.set(b, 1, np.float32(1.0), v)
        assert p[0] == q(b.ptr) and p[3] == q(v.ptr)
        v.close()


def test_raw_slots_numbers_of_their_size_only():
    p = cuabi.ArgPack.from_sizes([8, 4, 4, 8])
    p.set(np.float64(2.5), np.int32(-3), np.float32(0.5), np.int64(-9))
    assert p[0] == struct.pack("<d", 2.5)
    assert p[1] == struct.pack("<i", -3)
    assert p[2] == struct.pack("<f", 0.5)
    assert p[3] == struct.pack("<q", -9)
    p.set(1 << 40, 0xFFFFFFFF, True, None)     # Python ints: integers of the slot's size
    assert p[0] == struct.pack("<q", 1 << 40) and p[1] == b"\xff" * 4
    assert p[2] == struct.pack("<i", 1) and p[3] == bytes(8)
    p.set(b"\x01" * 8, b"\x02" * 4, np.float32(0), 0)
    assert p[0] == b"\x01" * 8 and p[1] == b"\x02" * 4


def test_raw_slots_refuse_a_python_float():
    """Issue 17: 3.7 into an int parameter gave the kernel 1080872141."""
    p = cuabi.ArgPack.from_sizes([8, 4])
    with pytest.raises(TypeError, match=r"argument 1 \(raw\).*types are unknown.*numpy.float32"):
        p.set(0, 3.7)
    with pytest.raises(TypeError, match=r"argument 0 .*numpy.float64"):
        p.set(2.0, 1)
    # a numpy scalar whose size is not the slot's: which type is meant is unknown
    with pytest.raises(TypeError, match=r"argument 1 .*8-byte numpy scalar for a 4-byte"):
        p.set(0, np.float64(1.0))
    with pytest.raises(TypeError, match=r"argument 0 .*4-byte numpy scalar"):
        p.set(np.int32(1), 1)
    with pytest.raises(ValueError, match=r"argument 1 .*3 bytes given"):
        p.set(0, b"abc")


def test_arrays_refused_for_small_slots():
    p = cuabi.ArgPack.from_sizes([8, 4])
    for arr in (np.zeros(4, np.float32), CAI(0x10), TorchLike(0x20)):
        with pytest.raises(TypeError, match=r"argument 1 .*4-byte"):
            p.set(0, arr)


def test_typed_pack_rules():
    """The rules of docs/launch.md for signature packs (the same code serves
    kernels' typed packs)."""
    p = cuabi.ArgPack("i32, f32, f64, u8, bool, ptr, i64")
    p.set(np.int16(-2), 3, np.float32(0.5), np.uint8(200), True, None, np.int64(-1))
    assert p[0] == struct.pack("<i", -2) and p[1] == struct.pack("<f", 3.0)
    assert p[2] == struct.pack("<d", 0.5) and p[3] == b"\xc8" and p[4] == b"\x01"
    assert p[5] == bytes(8) and p[6] == b"\xff" * 8
    good = [1, 1.0, 1.0, 1, False, 0, 1]
    for i, bad, pat in [(0, 3.7, r"argument 0 \(i32\): the parameter is an integer, a float"),
                        (0, np.float32(2), "a float is refused"),
                        (1, "x", r"argument 1 \(f32\): the parameter is a float"),
                        (0, np.zeros(3), "an array for a scalar parameter"),
                        (1, np.zeros(3), "an array for a scalar parameter"),
                        (5, 1.5, r"argument 5 \(ptr\).*a float is refused"),
                        (4, 0.5, "a float is refused")]:
        args = list(good)
        args[i] = bad
        with pytest.raises(TypeError, match=pat):
            p.set(*args)
    for i, bad in [(0, 1 << 31), (3, 256), (3, -1), (4, 2), (6, 1 << 63)]:
        args = list(good)
        args[i] = bad
        with pytest.raises(TypeError, match=rf"argument {i} .*does not fit"):
            p.set(*args)
    # the pack keeps working after refusals, with the other packer too
    p.set(*good)
    assert p[0] == struct.pack("<i", 1)


def test_setitem_per_slot_kind():
    p = cuabi.ArgPack("i32, f64, buffer")
    p[0] = np.int8(-4)
    p[1] = 3
    assert p[0] == struct.pack("<i", -4) and p[1] == struct.pack("<d", 3.0)
    with pytest.raises(TypeError, match=r"argument 0 \(i32\).*float is refused"):
        p[0] = 1.5
    with cuabi.MemoryResource.host() as r, cuabi.Buffer(64, r) as b:
        p[2] = b                          # a buffer slot keeps the handle
        assert p[2] == struct.pack("<Q", b.cuabi_handle)
        with pytest.raises(TypeError, match=r"argument 2 \(buffer\)"):
            p[2] = 1.0


def test_vector_structs_take_tuples():
    p = cuabi.ArgPack("i8, float4, int2, struct{f32, i32}")
    p.set(1, (1, 2.5, np.float32(3), 4), [5, -6], b"\0" * 8)
    assert p[1] == struct.pack("<4f", 1, 2.5, 3, 4) and p[2] == struct.pack("<2i", 5, -6)
    p.set(1, struct.pack("<4f", 9, 9, 9, 9), (1, 2), bytes(8))     # bytes still work
    assert p[1] == struct.pack("<4f", 9, 9, 9, 9)
    with pytest.raises(TypeError, match=r"argument 1 \(float4\)|argument 1 \(struct\).*4 f32"):
        p.set(1, (1, 2, 3), (1, 2), bytes(8))
    with pytest.raises(TypeError, match=r"argument 2 .*a float is refused"):
        p.set(1, (1, 2, 3, 4), (1.5, 2), bytes(8))
    with pytest.raises(TypeError, match=r"argument 3 .*pass bytes"):
        p.set(1, (1, 2, 3, 4), (1, 2), (1.0, 2))    # mixed struct: bytes only


def test_wrong_argument_count_says_how_many():
    p = cuabi.ArgPack("ptr, i32, f32")
    with pytest.raises(TypeError, match=r"the pack takes 3 arguments \(ptr, i32, f32\), 2 given"):
        p.set(0, 1)
    with pytest.raises(TypeError, match="3 arguments .* 4 given"):
        p.set(0, 1, np.float32(1), 4)
    p.set(0, 1, 2.0)     # a packer for these types exists now
    with pytest.raises(TypeError, match="2 given"):
        p.set(0, 1)


@pytest.fixture
def kernel():
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    with cuabi.ObjectCode.from_bytes(PTX, "ptx", name="k.ptx") as oc:
        yield oc.get_kernel("k")


def _blob(kernel):  # the first 24 bytes (the blob is rounded to 8)
    pl = kernel._launch_cache["plain"]
    return bytes(pl.blob)[:24]


def _launch(kernel, *args):
    """Pack and launch; without a GPU the launch itself fails after packing."""
    try:
        cuabi.launch(None, cuabi.LaunchConfig(grid=1, block=32), kernel, *args)
    except cuabi.CuabiError as e:
        assert not isinstance(e, (cuabi.ClosedHandleError,)), e
    return _blob(kernel)


def test_ptx_kernel_types(kernel):
    assert kernel.signature == ".u64, .u32, .f32, .u64"
    kinds = [t.kind for t in kernel.param_types]
    assert kinds == ["intptr", "integer", "f32", "intptr"]
    assert {t.source for t in kernel.param_types} == {"ptx"}
    assert kernel.num_arguments == 4
    assert [(a.offset, a.size) for a in kernel.arguments_info] == [(0, 8), (8, 4), (12, 4),
                                                                   (16, 8)]


@pytest.mark.parametrize("make", [
    lambda: np.ones(1000, np.float32), lambda: CAI(0xAB00), lambda: TorchLike(0x7000)])
def test_plain_launch_packs_arrays_in_place(kernel, make):
    x, y = make(), make()
    blob = _launch(kernel, x, 5, 1.5, y)
    want = struct.pack("<QifQ", cuabi.device_pointer(x), 5, 1.5, cuabi.device_pointer(y))
    assert blob == want
    blob = _launch(kernel, x, np.int32(6), np.float32(2.5), y)   # another packer
    assert blob == struct.pack("<QifQ", cuabi.device_pointer(x), 6, 2.5, cuabi.device_pointer(y))


def test_plain_launch_numbers_and_refusals(kernel):
    assert _launch(kernel, 1, 0xFFFFFFFF, 0.5, np.int32(-2)) == \
        struct.pack("<QIfq", 1, 0xFFFFFFFF, 0.5, -2)   # unsigned: the exact path
    assert _launch(kernel, None, np.int64(3), 2, -1) == \
        struct.pack("<qifq", 0, 3, 2.0, -1)             # an int for a float: converted
    with pytest.raises(TypeError, match=r"kernel k takes 4 arguments \(.u64, .u32, .f32, .u64\)"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 1, 2)
    with pytest.raises(TypeError, match=r"argument 1 \(.u32\): an array for a scalar"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, np.zeros(3), 1.0, 0)
    with pytest.raises(TypeError, match=r"argument 1 \(.u32\): .*does not fit"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, 1 << 40, 1.0, 0)
    # issue 17: 3.7 into an int parameter, a float into a pointer/long
    with pytest.raises(TypeError, match=r"argument 1 \(.u32\): the parameter is an integer"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, 3.7, 1.0, 0)
    with pytest.raises(TypeError, match=r"argument 0 \(.u64\).*a float is refused"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, np.float64(1.0), 3, 0.25, None)
    with pytest.raises(TypeError, match=r"argument 2 \(.f32\): an array"):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, 1, np.ones(1), 0)


def test_plain_launch_closed_objects(kernel):
    s = cuabi.Stream.__new__(cuabi.Stream)
    s._h, s._fin = None, None
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.launch(s, cuabi.LaunchConfig(), kernel, 0, 1, 1.0, 0)
    kernel.close()
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.launch(None, cuabi.LaunchConfig(), kernel, 0, 1, 1.0, 0)


CXX = r"""
struct P { float x, y, z; int id; };
extern "C" __global__ void k_c(int n, float a, double b, float *out, P p) {}
template <typename T, int N>
__global__ void segred(const T *x, T *y, T s, int n, float4 v, bool flag) {}
"""


@pytest.fixture
def cxx():
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    obj = cuabi.Program(CXX).compile(arch="sm_90", name_expressions=["segred<double, 4>"])
    yield obj
    obj.close()


def test_cxx_kernel_types_from_the_mangled_name(cxx):
    k = cxx.get_kernel("segred<double, 4>")
    assert k.signature == "double const*, double*, double, int, float4, bool"
    t = k.param_types
    assert [x.kind for x in t] == ["ptr", "ptr", "f64", "i32", "struct", "bool"]
    assert t[0].source == "name" and t[0].type_name == "double const*"
    pack = cuabi.ArgPack.for_kernel(k)
    pack.set(0, None, 2, np.int8(3), struct.pack("<4f", 1, 2, 3, 4), True)
    assert pack[2] == struct.pack("<d", 2.0) and pack[3] == struct.pack("<i", 3)
    pack.set(0, None, 2, 3, (1, 2, 3, 4.5), False)          # float4 from a tuple
    assert pack[4] == struct.pack("<4f", 1, 2, 3, 4.5)
    try:                                                    # the plain launch path too
        cuabi.launch(None, cuabi.LaunchConfig(), k, 0, None, 2.0, 3, (1, 2, 3, 4), True)
    except cuabi.CuabiError:
        pass                                                # no GPU: packed, not launched
    assert bytes(k._launch_cache["plain"].blob)[32:48] == struct.pack("<4f", 1, 2, 3, 4)
    with pytest.raises(TypeError, match=r"argument 3 \(int\): the parameter is an integer"):
        pack.set(0, 0, 1.0, 3.7, bytes(16), False)
    with pytest.raises(TypeError, match=r"argument 0 \(double const\*\).*float is refused"):
        pack.set(2.0, 0, 1.0, 3, bytes(16), False)
    with pytest.raises(TypeError, match=r"argument 5 \(bool\).*does not fit"):
        pack.set(0, 0, 1.0, 3, bytes(16), 2)
    with pytest.raises(TypeError, match=r"kernel .*segred.* takes 6 arguments"):
        pack.set(0, 0, 1.0)


def test_extern_c_kernel_types_from_the_ptx(cxx):
    """A CUBIN compiled here keeps the PTX's types: 2 into a double is 2.0,
    not 1e-323 (issue 17)."""
    k = cxx.get_kernel("k_c")
    assert k.signature == ".u32, .f32, .f64, .u64, .b8[16]"
    pack = cuabi.ArgPack.for_kernel(k)
    pack.set(3, 1, 2, 0, bytes(16))
    assert pack[2] == struct.pack("<d", 2.0) and pack[1] == struct.pack("<f", 1.0)
    with pytest.raises(TypeError, match=r"argument 0 \(.u32\).*a float is refused"):
        pack.set(3.7, 1, 2, 0, bytes(16))
    with pytest.raises(TypeError, match=r"argument 4 \(.b8\[16\]\)"):
        pack.set(3, 1, 2, 0, 5.0)
