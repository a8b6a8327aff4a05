"""Host buffers and views exchanged with numpy both ways (no GPU needed)."""
import ctypes as C
import gc
import weakref
import sys

import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "View"), reason="no view module")
np = pytest.importorskip("numpy")


@pytest.fixture
def host():
    with cuabi.MemoryResource.host() as r:
        yield r


def test_host_buffer_roundtrip(host):
    with cuabi.Buffer(64, host) as b:
        assert b.size == 64 and b.kind == "host" and b.ptr
        b.copy_from(bytes(range(64)))
        assert bytes(b.to_bytes()) == bytes(range(64))
        b.fill(0xAB, width=1, offset=8, count=4)
        assert bytes(b.to_bytes())[8:12] == b"\xab" * 4
        c = cuabi.Buffer.from_host(np.arange(4, dtype=np.int32), host)
        out = np.zeros(4, np.int32)
        c.copy_to(out)
        assert out.tolist() == [0, 1, 2, 3]
    assert b.closed


def test_numpy_to_view_shares_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = cuabi.from_dlpack(a)
    assert v.shape == (3, 4) and v.strides == (4, 1) and v.dtype == "float32"
    assert v.__dlpack_device__() == (1, 0)
    assert v.ptr == a.ctypes.data
    assert v.is_c_contiguous and not v.readonly
    a[1, 2] = 99
    assert C.c_float.from_address(v.ptr + 6 * 4).value == 99


def test_view_to_numpy_shares_memory(host):
    b = cuabi.Buffer(48, host)
    v = b.view("int32", (3, 4))
    arr = np.from_dlpack(v)
    assert arr.shape == (3, 4) and arr.dtype == np.int32
    arr[:] = np.arange(12).reshape(3, 4)
    assert bytes(b.to_bytes())[:8] == np.array([0, 1], np.int32).tobytes()
    # through __array_interface__ as well
    arr2 = np.asarray(v)
    assert arr2.ctypes.data == arr.ctypes.data
    # the memory outlives the buffer handle and the view while numpy holds it
    b.close()
    v.close()
    gc.collect()
    assert arr.sum() == 66


def test_roundtrip_numpy_view_numpy():
    a = np.arange(10, dtype=np.int64)
    back = np.from_dlpack(cuabi.from_dlpack(a))
    assert back.ctypes.data == a.ctypes.data
    back[0] = -1
    assert a[0] == -1


def test_strided_and_sliced():
    a = np.arange(20, dtype=np.float64).reshape(4, 5)[:, ::2]
    v = cuabi.from_dlpack(a)
    assert v.strides == (5, 2) and not v.is_c_contiguous
    s = v[1:3]
    assert s.shape == (2, 3)
    np.testing.assert_array_equal(np.from_dlpack(s), a[1:3])
    r = v[::-1]
    np.testing.assert_array_equal(np.from_dlpack(r), a[::-1])


def test_readonly_numpy():
    a = np.arange(3, dtype=np.int16)
    a.flags.writeable = False
    v = cuabi.from_dlpack(a)
    assert v.readonly
    back = np.from_dlpack(v)
    assert not back.flags.writeable
    with pytest.raises(BufferError):
        v.__dlpack__()            # legacy capsules cannot say read-only


def test_capsule_protocol_versioned_and_legacy(host):
    v = cuabi.Buffer(16, host).view("uint8")
    cap = v.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    w = cuabi.from_dlpack(cap)
    assert "used_dltensor_versioned" in repr(cap)
    with pytest.raises(TypeError):
        cuabi.from_dlpack(cap)    # consumed
    cap2 = v.__dlpack__()
    assert '"dltensor"' in repr(cap2)
    w2 = cuabi.from_dlpack(cap2)
    assert "used_dltensor" in repr(cap2)
    assert w.ptr == w2.ptr == v.ptr


def test_unconsumed_capsule_calls_deleter(host):
    b = cuabi.Buffer(16, host)
    v = b.view("uint8")
    for mv in (None, (1, 0)):
        cap = v.__dlpack__(max_version=mv)
        del cap                   # destructor calls the deleter: no leak, no crash
    gc.collect()
    v.close()
    b.close()


@pytest.mark.parametrize("mv", [None, (1, 0)])
def test_unconsumed_capsule_releases_the_memory(mv):
    # The capsule's export holds the view's memory (here: the numpy array)
    # until its destructor runs the deleter (in C for the compiled backend).
    a = np.arange(4, dtype=np.float32)
    alive = weakref.ref(a)
    v = cuabi.from_dlpack(a)
    cap = v.__dlpack__(max_version=mv)
    del a
    v.close()
    gc.collect()
    assert alive() is not None
    del cap
    gc.collect()
    assert alive() is None


def test_consumed_capsule_leaves_the_memory_to_the_consumer():
    a = np.arange(4, dtype=np.float32)
    alive = weakref.ref(a)
    v = cuabi.from_dlpack(a)
    back = np.from_dlpack(v)
    del a
    v.close()
    gc.collect()
    assert alive() is not None and back[3] == 3.0
    del back
    gc.collect()
    assert alive() is None


def test_dlpack_arguments():
    v = cuabi.from_dlpack(np.zeros(4, np.float32))
    with pytest.raises(BufferError):
        v.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        v.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        v.__dlpack__(stream=5)
    assert v.__dlpack__(dl_device=(1, 0), copy=False) is not None


def test_numpy_legacy_producer():
    class Legacy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):          # no max_version: pre-1.0
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    a = np.arange(5, dtype=np.uint32)
    v = cuabi.from_dlpack(Legacy(a))
    assert v.ptr == a.ctypes.data and v.shape == (5,)


def test_array_interface_import():
    class AI:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = cuabi.from_dlpack(AI(a))
    assert v.shape == (2, 3) and v.ptr == a.ctypes.data
    np.testing.assert_array_equal(np.asarray(v), a)


def test_view_keeps_foreign_owner_alive():
    a = np.arange(1000, dtype=np.float64)
    ref = sys.getrefcount(a)
    v = cuabi.from_dlpack(a)
    assert sys.getrefcount(a) > ref      # the DLPack tensor holds the array
    del v
    gc.collect()
    assert sys.getrefcount(a) == ref     # ... and the deleter ran exactly once


def test_unsupported_objects():
    with pytest.raises(TypeError):
        cuabi.from_dlpack(object())
    with pytest.raises(TypeError):
        cuabi.Buffer(8, cuabi.MemoryResource.host()).view("object")


def test_view_misuse(host):
    b = cuabi.Buffer(16, host)
    with pytest.raises(cuabi.InvalidArgumentError):
        b.view("float32", (8,))           # 32 bytes in a 16-byte buffer
    with pytest.raises(TypeError):
        b.view("uint8")[0]
    v = b.view("uint8")
    v.close()
    with pytest.raises(cuabi.ClosedHandleError):
        v.shape


class PyHostResource(cuabi.MemoryResource):
    """A Python-defined resource: ctypes buffers kept in a dict."""

    def __init__(self):
        self.live = {}
        self.fail = False
        super().__init__(kind="host", stream_ordered=False)

    def allocate_ptr(self, size, alignment, stream):
        if self.fail:
            raise RuntimeError("pool exhausted")
        buf = C.create_string_buffer(size + alignment)
        addr = (C.addressof(buf) + alignment - 1) & ~(alignment - 1) if alignment else C.addressof(buf)
        self.live[addr] = buf
        return addr

    def deallocate_ptr(self, ptr, size, alignment, stream):
        del self.live[ptr]


def test_python_memory_resource():
    r = PyHostResource()
    b = cuabi.Buffer(100, r)
    assert len(r.live) == 1 and b.ptr in r.live
    b.copy_from(b"x" * 100)
    v = b.view("uint8")
    b.close()
    assert len(r.live) == 1               # the view keeps the memory
    v.close()
    assert r.live == {}
    r.fail = True
    with pytest.raises(cuabi.CallbackError) as ei:
        cuabi.Buffer(8, r)
    assert isinstance(ei.value.__cause__, RuntimeError)
    r.close()


def test_buffer_wrap_keeps_owner():
    arr = np.arange(8, dtype=np.uint8)
    b = cuabi.Buffer.wrap(arr.ctypes.data, arr.nbytes, "host", owner=arr)
    v = b.view("uint8")
    del arr
    b.close()
    np.testing.assert_array_equal(np.from_dlpack(v), np.arange(8, dtype=np.uint8))


def test_buffer_wrap_without_owner():
    """Regression: Buffer.wrap(ptr, size) with no owner passed None for the
    release callback, which ctypes refuses (ArgumentError)."""
    arr = np.arange(8, dtype=np.uint8)
    b = cuabi.Buffer.wrap(arr.ctypes.data, arr.nbytes, "host")
    assert b.size == 8 and b.ptr == arr.ctypes.data
    b.close()


# test_from_dlpack_never_passes_stream_0_to_a_cuda_producer: fake_memory_checks.py
# (a CUDA producer's device is made current around its export: it needs a driver).
