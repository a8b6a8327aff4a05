"""Issue 29, hostile sizes from Python: every size, count, offset, shape,
stride, grid or block dimension, alignment and device ordinal is an integer
(an int or anything with __index__, numpy integers included; not a bool,
float or str) in the range of its C parameter, else TypeError or
InvalidArgumentError (a ValueError) naming the argument. ctypes used to wrap
them silently (Buffer(2**64) was 0 bytes, Buffer(-1) asked for 2**64 - 1).
Runs once per backend (tests/bindings/check_python.sh); needs no GPU."""
import ctypes as C

import numpy as np
import pytest

import cuabi
from cuabi import _capi
from cuabi.errors import dims_arg, index_arg


@pytest.fixture(scope="module")
def host():
    return cuabi.MemoryResource.host()


# ---- the helper itself

def test_index_arg_rule():
    assert index_arg(5, "n") == 5
    assert type(index_arg(np.int64(5), "n")) is int
    assert index_arg(np.uint64(2**64 - 1), "n") == 2**64 - 1
    assert index_arg(-3, "n", -10, 10) == -3
    for bad in (1.0, 3.5, "10", b"1", None, [1], True, False, np.bool_(True)):
        with pytest.raises(TypeError, match="n must be an integer"):
            index_arg(bad, "n")
    with pytest.raises(TypeError, match="not a bool"):
        index_arg(True, "n")
    for bad in (-1, 2**64, 2**64 + 8):
        with pytest.raises(cuabi.InvalidArgumentError) as ei:
            index_arg(bad, "f: n")
        assert isinstance(ei.value, ValueError)
        assert ei.value.message.startswith(f"f: n is {bad}; it must be ")
    with pytest.raises(ValueError, match="at most 2\\*\\*31 - 1"):
        index_arg(2**31, "n", 0, 2**31 - 1)
    assert dims_arg([1, np.int32(2)], "s") == (1, 2)
    with pytest.raises(ValueError, match=r"s\[1\] is -2"):
        dims_arg((1, -2), "s")
    with pytest.raises(ValueError, match="s has 1 entry; 2 expected"):
        dims_arg((1,), "s", length=2)
    with pytest.raises(TypeError, match="s must be a sequence"):
        dims_arg(5, "s")


# ---- buffers (issue 29 item 6)

def test_buffer_sizes(host):
    for size in (2**64, 2**64 + 8, -1, -(2**63)):
        with pytest.raises(cuabi.InvalidArgumentError, match="Buffer: size is"):
            cuabi.Buffer(size, host)
    for size in (3.5, "10", True, None, 8.0):
        with pytest.raises(TypeError, match="Buffer: size must be an integer"):
            cuabi.Buffer(size, host)
    with pytest.raises(ValueError, match="Buffer: alignment is -8"):
        cuabi.Buffer(8, host, alignment=-8)
    assert cuabi.Buffer(np.int64(24), host).size == 24
    assert cuabi.Buffer(np.uint8(3), host).size == 3
    # a wrapped buffer: pointer and size are checked the same way
    with pytest.raises(ValueError, match="Buffer.wrap: size is -1"):
        cuabi.Buffer.wrap(0x1000, -1, "host")
    with pytest.raises(ValueError, match="Buffer.wrap: ptr is -4096"):
        cuabi.Buffer.wrap(-0x1000, 8, "host")


def test_buffer_ranges(host):
    b = cuabi.Buffer(16, host)
    b.copy_from(bytes(range(16)))
    with pytest.raises(ValueError, match="copy_from: offset is -1"):
        b.copy_from(b"x", offset=-1)
    with pytest.raises(ValueError, match="copy_to: offset is -8"):
        b.to_bytes(offset=-8)
    # more than the destination holds was copied into it anyway
    small = bytearray(4)
    with pytest.raises(ValueError, match="copy_to: size is 16; it must be at most 4"):
        b.copy_to(small, size=16)
    assert small == bytearray(4)
    assert b.copy_to(bytearray(4), offset=12) == bytearray(range(12, 16))
    with pytest.raises(ValueError, match="past the end"):     # the library names the range
        b.to_bytes(offset=17)
    with pytest.raises(ValueError, match="fill: count is -1"):
        b.fill(0, count=-1)
    with pytest.raises(ValueError, match="fill: value is 4294967296"):
        b.fill(2**32, width=4)
    with pytest.raises(TypeError, match="fill: width must be an integer"):
        b.fill(0, width=1.0)
    with pytest.raises(ValueError, match="allocate: size is -1"):
        host.allocate(-1)


class _BadResource(cuabi.MemoryResource):
    """Returns a pointer that is not an address: it was wrapped into size_t."""

    def __init__(self, ptr):
        self.ptr = ptr
        super().__init__(kind="host", stream_ordered=False)

    def allocate_ptr(self, size, alignment, stream):
        return self.ptr

    def deallocate_ptr(self, ptr, size, alignment, stream):
        pass


def test_python_resource_results_are_checked():
    for ptr in (-1, 2**64 + 0x1000):
        r = _BadResource(ptr)
        with pytest.raises(cuabi.CallbackError) as ei:
            cuabi.Buffer(8, r)
        assert "allocate() result" in str(ei.value.__cause__)
        r.close()


# ---- views (issue 29 items 1 and 6)

def test_view_shapes_that_wrap(host):
    b = cuabi.Buffer(64, host)
    with pytest.raises(cuabi.InvalidArgumentError, match="element count overflows"):
        b.view("uint8", (1 << 62, 4))                 # 2^64: was nbytes 0
    with pytest.raises(ValueError, match=r"view: shape\[0\] is 18446744073709551616"):
        b.view("uint8", (1 << 64,))                   # was (0,)
    with pytest.raises(ValueError, match=r"view: shape\[0\] is 9223372036854775808"):
        b.view("uint8", (1 << 63,))                   # was "extent -2^63 is negative"
    with pytest.raises(ValueError, match="view: shape is -1"):
        b.view("uint8", -1)
    with pytest.raises(TypeError, match="view: shape must be an integer"):
        b.view("uint8", 4.0)
    with pytest.raises(ValueError, match="view: offset is -1"):
        b.view("uint8", 4, offset=-1)
    with pytest.raises(ValueError, match="offset 65 is past the end"):
        b.view("uint8", 0, offset=65)
    with pytest.raises(ValueError, match="offset 100 is past the end"):
        b.view("uint8", offset=100)                   # the rest of the buffer: none
    v = b.view("uint8", (8, 8))
    assert v.nbytes == 64
    assert v[5:6].ptr == b.ptr + 40
    assert v[7:8, 3:4].ptr == b.ptr + 59


def test_view_strides(host):
    b = cuabi.Buffer(64, host)
    with pytest.raises(ValueError, match="view: strides has 1 entry; 2 expected"):
        b.view("uint8", (4, 4), strides=(1,))          # was a bare IndexError / stride 0
    with pytest.raises(ValueError, match="view: strides has 3 entries; 2 expected"):
        b.view("uint8", (4, 4), strides=(4, 1, 1))
    with pytest.raises(ValueError, match=r"view: strides\[1\] is 9223372036854775808"):
        b.view("uint8", (2, 2), strides=(2, 1 << 63))
    v = b.view("uint8", (4, 4), strides=(np.int64(-4), 1), offset=12)
    assert v.strides == (-4, 1) and v.ptr == b.ptr + 12
    # 2^62 doubles at one address: the count fits, its bytes do not
    with pytest.raises(ValueError, match="overflow 63 bits"):
        b.view("float64", (1 << 62,), strides=(0,))


def test_numpy_never_sees_a_wrapped_view(host):
    b = cuabi.Buffer(64, host)
    for shape in ((1 << 62, 4), (1 << 61, 8), (4, 1 << 62)):
        with pytest.raises(ValueError):
            b.view("uint8", shape)
    a = np.from_dlpack(b.view("uint8", (8, 8)))
    assert a.shape == (8, 8)


class _Interface:
    """An array interface of any shape and strides (untrusted)."""

    def __init__(self, shape, strides, ptr, typestr="|u1", cuda=False):
        d = {"shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides,
             "version": 3}
        if cuda:
            self.__cuda_array_interface__ = d
        else:
            self.__array_interface__ = d


def test_foreign_layouts_are_checked_on_import():
    keep = np.zeros(16, np.uint8)
    ptr = keep.ctypes.data
    # an element count that wraps to 0, lazy path or not
    with pytest.raises(BufferError, match="element count overflows"):
        cuabi.from_dlpack(_Interface((1 << 62, 4), None, ptr))
    with pytest.raises(BufferError, match="element count overflows"):
        cuabi.from_dlpack(_Interface((1 << 62, 4), None, 0x10000, cuda=True))
    # negative strides below address 0; positive ones past the top
    with pytest.raises(BufferError, match="wrap around the address space"):
        cuabi.from_dlpack(_Interface((0x2000,), (-1,), 0x1000, cuda=True))
    with pytest.raises(BufferError, match="wrap around the address space"):
        cuabi.from_dlpack(_Interface((16,), (1,), 2**64 - 8, cuda=True))
    v = cuabi.from_dlpack(_Interface((0x1001,), (-1,), 0x1000, cuda=True))
    assert v.nbytes == 0x1001
    v = cuabi.from_dlpack(_Interface((16,), None, ptr))
    assert v.nbytes == 16


def test_lazy_and_c_imports_agree():
    """A lazy view (described in Python) is accepted exactly when the C
    import accepts the same layout: materializing never raises later."""
    cases = [((1 << 62, 4), None), ((1 << 61, 2), (0, 0)), ((1 << 60,), (0,)),
             ((2, 2), (1, 1 << 62)), ((2, 2), (-(1 << 62), 1)), ((3,), (-(1 << 62),)),
             ((0x1000,), (-1,)), ((0x1001,), (-1,)), ((0x1002,), (-1,))]
    for shape, strides in cases:
        obj = _Interface(shape, strides, 0x1000, cuda=True)
        try:
            v = cuabi.from_dlpack(obj)
        except BufferError:
            continue
        v.handle                                  # materializes without raising
        assert v.nbytes == int(np.prod(shape))


# ---- launches, devices, argument packs, tensor maps

def test_launch_config_dimensions():
    for grid in (2**32, -1, (1, 2**32), (1, 1, 1, 1)):
        with pytest.raises(ValueError, match="LaunchConfig.grid"):
            cuabi.LaunchConfig(grid=grid, block=32)
    for block in (1.5, "32", True):
        with pytest.raises(TypeError, match="LaunchConfig.block"):
            cuabi.LaunchConfig(grid=1, block=block)
    with pytest.raises(ValueError, match="LaunchConfig: shared_mem is -1"):
        cuabi.LaunchConfig(grid=1, block=32, shared_mem=-1)
    with pytest.raises(ValueError, match="LaunchConfig.cluster"):
        cuabi.LaunchConfig(grid=2, block=32, cluster=(2, -1))
    c = cuabi.LaunchConfig(grid=np.int32(4), block=(np.uint16(32), 2))
    assert c.grid == (4, 1, 1) and c.block == (32, 2, 1)
    assert type(c.grid[0]) is int


def test_device_ordinals():
    for ordinal in (-1, 2**31, 2**32):
        with pytest.raises(ValueError, match="Device: ordinal is"):
            cuabi.Device(ordinal)
    for ordinal in (0.0, "0", True):
        with pytest.raises(TypeError, match="Device: ordinal must be an integer"):
            cuabi.Device(ordinal)


def test_argpack_sizes():
    with pytest.raises(ValueError, match=r"from_sizes: sizes\[0\] is -4"):
        cuabi.ArgPack.from_sizes([-4])
    with pytest.raises(ValueError, match="from_sizes: offsets has 2 entries; 1 expected"):
        cuabi.ArgPack.from_sizes([4], [0, 4])
    with pytest.raises(ValueError, match="sizes overflow"):
        cuabi.ArgPack.from_sizes([2**64 - 8, 16])            # the library: wrapped layout
    with pytest.raises(ValueError, match="size is -1"):
        cuabi.ArgPack.from_types([(_capi.CUABI_ARG_RAW, 0, -1)])
    p = cuabi.ArgPack.from_sizes([np.int64(8), 4])
    assert p.blob_size == 16
    p[-1] = b"\x01\x02\x03\x04"                               # as a list indexes
    assert p[1] == b"\x01\x02\x03\x04"
    with pytest.raises(IndexError):
        p[2] = b"abcd"
    with pytest.raises(TypeError, match="slot must be an integer"):
        p[1.0]


def test_tensor_map_arguments():
    from cuabi._tensormap import TensorMapDescriptorOptions
    with pytest.raises(ValueError, match=r"box_dim\[1\] is -1"):
        TensorMapDescriptorOptions(box_dim=(8, -1))
    with pytest.raises(ValueError, match=r"box_dim\[0\] is 4294967296"):
        TensorMapDescriptorOptions(box_dim=(2**32,))
    with pytest.raises(TypeError, match=r"element_strides\[0\] must be an integer"):
        TensorMapDescriptorOptions(box_dim=(8,), element_strides=(1.0,))
