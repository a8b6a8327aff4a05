"""Virtual memory, managed memory, pool statistics and batched copies from
Python against the C tests' fake driver (no GPU): run by test_memory_ext.py in
a process whose CUABI_DRIVER_PATH names tests/fixtures/.libs/fake_cuda_graph.so
(fake "device" memory is host memory; VMM chunks are memfds; granularity
64 KiB minimum, 128 KiB recommended)."""
import ctypes
import os
import pickle

import pytest

import cuabi

KiB = 1024


@pytest.fixture
def dev():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    return cuabi.Device(0)


def test_virtual_memory_grows_in_place(dev):
    opts = cuabi.VirtualMemoryResourceOptions(reserve_size=1024 * KiB)
    vmr = cuabi.VirtualMemoryResource(dev, opts)
    g = vmr.granularity
    assert g == 128 * KiB
    assert cuabi.VirtualMemoryResourceOptions(granularity="minimum").granularity == "minimum"
    b = cuabi.Buffer(g + 1, vmr)                   # rounded up, and said
    assert b.size == 2 * g
    info = vmr.info(b)
    assert (info.requested, info.size, info.reserved, info.chunks) == (g + 1, 2 * g, 1024 * KiB, 1)
    p = b.ptr
    b.copy_from(bytes(range(256)) * (2 * g // 256))
    assert vmr.modify_allocation(b, 5 * g) is b
    assert b.ptr == p and b.size == 5 * g          # the address never changes
    assert vmr.info(b).chunks == 2
    assert bytes(b.to_bytes(size=256)) == bytes(range(256))
    with pytest.raises(cuabi.InvalidArgumentError, match="reserved range"):
        vmr.modify_allocation(b, 1024 * KiB + 1)
    assert b.size == 5 * g
    vmr.modify_allocation(b, g)                    # shrink: whole chunks go
    assert b.size == g and vmr.info(b).chunks == 1
    assert vmr.get_access(b, dev) == "rw"
    vmr.set_access(b, 1, "r")
    assert vmr.get_access(b, 1) == "r"
    with pytest.raises(ValueError, match="not one of"):
        cuabi.VirtualMemoryResource(dev, cuabi.VirtualMemoryResourceOptions(handle_type="win32"))
    b2 = vmr.allocate_buffer(g, reserve=4 * g)
    assert vmr.info(b2).reserved == 4 * g
    b2.close()
    b.close()


def test_vmm_chunks_export_and_import(dev):
    vmr = cuabi.VirtualMemoryResource(dev, cuabi.VirtualMemoryResourceOptions(reserve_size=512 * KiB))
    b = cuabi.Buffer(128 * KiB, vmr)
    vmr.modify_allocation(b, 384 * KiB)
    b.copy_from(b"\x5a" * b.size)
    chunks = vmr.export_chunks(b)
    assert len(chunks) == 2
    assert all(fd >= 0 and len(d) == 136 for fd, d in chunks)
    # the same process cannot import its own export: refused, nothing leaks
    with pytest.raises(cuabi.IPCError):
        cuabi.VirtualMemoryResource(1).import_chunks(chunks)
    import os
    for fd, _ in chunks:
        os.close(fd)
    with pytest.raises(ValueError):
        vmr.import_chunks([])
    b.close()


def test_managed_buffer_advice(dev):
    mr = cuabi.ManagedMemoryResource(
        cuabi.ManagedMemoryResourceOptions(preferred_location=1, preferred_location_type="device"))
    assert mr.kind == "managed" and mr.is_managed and mr.preferred_location == ("device", 1)
    b = cuabi.ManagedBuffer(64 * KiB, mr)
    assert isinstance(b, cuabi.Buffer)
    assert b.preferred_location == cuabi.Device(1)
    assert not b.read_mostly
    b.read_mostly = True
    assert b.read_mostly
    b.preferred_location = cuabi.Host()
    assert b.preferred_location == cuabi.Host()
    b.preferred_location = None
    assert b.preferred_location is None
    s = dev.create_stream()
    b.prefetch(cuabi.Device(0), stream=s)
    assert b.last_prefetch_location == cuabi.Device(0)
    b.prefetch(cuabi.Host(numa_id=0), stream=s, offset=4096, size=4096)
    b.discard(stream=s)
    b.discard_prefetch(dev, stream=s)
    with pytest.raises(ValueError, match="managed resource"):
        cuabi.ManagedBuffer(64, cuabi.MemoryResource.host())
    with pytest.raises(TypeError):
        b.prefetch("gpu", stream=s)
    # DLPack: managed memory
    v = b.view("uint8")
    assert v.__dlpack_device__()[0] == 13
    b.close()
    with pytest.raises(ValueError):
        cuabi.ManagedMemoryResourceOptions(preferred_location=None,
                                           preferred_location_type="device")._struct()
    assert repr(cuabi.Host.numa_current()) == "Host.numa_current()"
    assert cuabi.Host(numa_id=2) == cuabi.Host(numa_id=2) != cuabi.Host()


def test_managed_resource_allocates_managed_buffers(dev):
    """cuda.core: ManagedMemoryResource.allocate gives a ManagedBuffer, whose
    accessed_by is a live set (add / discard advise) and from_handle wraps
    a managed address made elsewhere."""
    from collections.abc import MutableSet
    mr = cuabi.ManagedMemoryResource()
    s = dev.create_stream()
    b = mr.allocate(8 * KiB, stream=s)
    assert type(b) is cuabi.ManagedBuffer and b.memory_resource is mr and b.size == 8 * KiB
    ab = b.accessed_by
    assert isinstance(ab, MutableSet) and len(ab) == 0 and set(ab) == set()
    ab.add(cuabi.Device(1))
    assert cuabi.Device(1) in b.accessed_by and len(ab) == 1      # live: the driver's
    ab.add(cuabi.Host())
    assert set(b.accessed_by) == {cuabi.Device(1), cuabi.Host()}
    assert (ab & {cuabi.Host()}) == {cuabi.Host()} and type(ab | set()) is set
    ab.discard(cuabi.Device(1))
    ab.discard(cuabi.Host(numa_id=3))          # never in the set: nothing (cuda.core)
    ab.discard("gpu")
    assert set(ab) == {cuabi.Host()} and "gpu" not in ab
    with pytest.raises(TypeError, match="Device or Host"):
        ab.add(1)
    b.accessed_by = [cuabi.Device(0)]
    assert set(b.accessed_by) == {cuabi.Device(0)}
    with pytest.raises(TypeError, match="Device or Host"):
        b.accessed_by = [0]
    assert set(b.accessed_by) == {cuabi.Device(0)}                # nothing changed
    # from_handle: a ManagedBuffer over another buffer's address
    w = cuabi.ManagedBuffer.from_handle(b.handle, 4 * KiB, owner=b)
    assert type(w) is cuabi.ManagedBuffer and w.owner is b and w.handle == b.handle
    w.read_mostly = True
    assert w.read_mostly
    w.close()
    b.close()
    with pytest.raises(cuabi.ClosedHandleError):
        b.accessed_by
    # other resources still give Buffers
    assert type(cuabi.MemoryResource.host().allocate(64)) is cuabi.Buffer
    s.close()


def test_memory_resource_registry_is_cuda_cores(dev):
    """cuda.core's register / from_registry: one process-wide, weak registry
    by uuid for DeviceMemoryResource and PinnedMemoryResource."""
    import gc
    import uuid as uuidlib
    u1, u2 = uuidlib.uuid4(), uuidlib.uuid4()
    dmr = cuabi.DeviceMemoryResource(dev)
    assert dmr.register(u1) is dmr
    assert cuabi.DeviceMemoryResource.from_registry(u1) is dmr
    other = cuabi.DeviceMemoryResource(dev, cuabi.DeviceMemoryResourceOptions())
    assert other.register(u1) is dmr                 # the first one registered wins
    pmr = cuabi.PinnedMemoryResource()
    assert pmr.register(u2) is pmr
    assert cuabi.PinnedMemoryResource.from_registry(u2) is pmr
    assert cuabi.DeviceMemoryResource.from_registry(u2) is pmr     # one registry, as cuda.core's
    with pytest.raises(RuntimeError, match=f"Memory resource {u1.hex[:8]}.* was not found|"
                                           "was not found"):
        cuabi.DeviceMemoryResource.from_registry(uuidlib.uuid4())
    with pytest.raises(RuntimeError, match="was not found"):
        cuabi.PinnedMemoryResource.from_registry([1])   # unhashable: not found either
    with pytest.raises(TypeError):
        pmr.register(None)
    del pmr
    gc.collect()
    with pytest.raises(RuntimeError, match="was not found"):        # weak: gone with it
        cuabi.PinnedMemoryResource.from_registry(u2)
    other.close()


def test_pool_attributes(dev):
    mr = cuabi.MemoryResource.pool(dev)
    s = dev.create_stream()
    b = cuabi.Buffer(1 << 20, mr, stream=s)
    a = mr.attributes
    assert a.used_mem_current == 1 << 20 and a.used_mem_high == 1 << 20
    assert a.reserved_mem_current >= 1 << 20
    assert a.reuse_allow_opportunistic is True
    a.release_threshold = 4096
    assert a.release_threshold == 4096
    a.reuse_allow_opportunistic = False
    assert a.reuse_allow_opportunistic is False
    with pytest.raises(AttributeError):
        a.nonsense
    b.free_async(s)
    s.synchronize()
    assert a.used_mem_current == 0 and a.used_mem_high == 1 << 20
    mr.reset_high_water()
    assert a.used_mem_high == 0
    st = mr.pool_stats()
    assert st.release_threshold == 4096 and st.owned == 1
    assert mr.pool_summary().startswith("pool device 0 (owned): reserved")
    with pytest.raises(cuabi.NotSupportedError):
        cuabi.MemoryResource.host().attributes.used_mem_current


def test_copy_batch_mixed_ends(dev):
    s = dev.create_stream()
    src = cuabi.Buffer.from_host(bytes(range(200)) * 10, stream=s)
    dst = cuabi.Buffer(2000, stream=s)
    host = bytearray(100)
    man = cuabi.ManagedBuffer(2000)
    r = cuabi.copy_batch(s, [src, b"\x07" * 100, src], [dst, host, man],
                         options=[cuabi.CopyOptions(),
                                  cuabi.CopyOptions(src_access_order="during_api_call"),
                                  cuabi.CopyOptions(dst_location_hint=cuabi.Host(),
                                                    overlap_mode="prefer_overlap_with_compute")])
    s.synchronize()
    assert r.path == "batched" and r.copies == 3 and r.bytes == 4100 and r.driver_calls == 1
    assert r.attribute_sets == 3 and r.reason == ""
    assert bytes(dst.to_bytes()) == bytes(range(200)) * 10
    assert host == b"\x07" * 100
    assert bytes(man.to_bytes(size=5)) == bytes(range(5))
    with pytest.raises(ValueError, match="sources but"):
        cuabi.copy_batch(s, [src], [])
    with pytest.raises(ValueError, match="bytes, the destination"):
        cuabi.copy_batch(s, [src], [host])
    with pytest.raises(TypeError):
        cuabi.copy_batch(s, src, dst)
    with pytest.raises(ValueError, match="read-only"):
        cuabi.copy_batch(s, [src], [bytes(2000)])
    with pytest.raises(ValueError, match="not one of"):
        cuabi.copy_batch(s, [src], [dst], options=cuabi.CopyOptions(src_access_order="later"))
    assert cuabi.MemcpySrcAccessOrder.ANY == "any"
    assert cuabi.copy_batch(s, [], []).path == "none"


def _vmm_child(conn):
    import cuabi as c
    b = conn.recv()                                  # unpickling maps the chunks
    info = c.VirtualMemoryResource.info(b)
    conn.send((bytes(b.to_bytes(size=8)), b.size, info.imported, info.chunks))
    b.fill(0x11, count=4)
    conn.send("done")
    b.close()


def test_vmm_buffer_pickles_to_another_process(dev):
    import multiprocessing as mp
    vmr = cuabi.VirtualMemoryResource(dev, cuabi.VirtualMemoryResourceOptions(reserve_size=512 * KiB))
    b = cuabi.Buffer(128 * KiB, vmr)
    vmr.modify_allocation(b, 384 * KiB)
    b.copy_from(b"\x5a" * b.size)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_vmm_child, args=(child,))
    p.start()
    parent.send(b)
    assert parent.poll(60), "the child answered nothing (it died: see its traceback)"
    first, size, imported, chunks = parent.recv()
    assert parent.poll(60) and parent.recv() == "done"
    p.join(30)
    assert p.exitcode == 0
    assert first == b"\x5a" * 8 and size == b.size and imported == 1 and chunks == 2
    assert bytes(b.to_bytes(size=5)) == b"\x11" * 4 + b"\x5a"
    b.close()


# ---- DLPack with a stream: the producer exports with its array's device current

def _fake_current_context():
    """The fake driver's current context on this thread (its cuCtxGetCurrent)."""
    drv = ctypes.CDLL(os.environ["CUABI_DRIVER_PATH"])
    fn = ctypes.c_void_p()
    found = ctypes.c_int()
    assert drv.cuGetProcAddress_v2(b"cuCtxGetCurrent", ctypes.byref(fn), 13000,
                                   ctypes.c_uint64(0), ctypes.byref(found)) == 0 and fn.value
    get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))(fn.value)
    ctx = ctypes.c_void_p()
    assert get(ctypes.byref(ctx)) == 0
    return ctx.value or 0


class _Stop(Exception):
    pass


class _CudaProducer:
    """A producer of an array on GPU `device` that records, when asked to
    export, the stream it was given, the current context and cuabi's current
    Device(); then stops (no capsule needed to see what it saw)."""

    def __init__(self, device, kind=2):
        self.device, self.kind, self.seen = device, kind, []

    def __dlpack_device__(self):
        return (self.kind, self.device)

    def __dlpack__(self, stream=None, max_version=None, **kw):
        self.seen.append((stream, _fake_current_context(), cuabi.Device().ordinal))
        raise _Stop()


def test_from_dlpack_with_a_stream_exports_with_the_arrays_device_current(dev):
    """Regression (two H200s, torch): torch's __dlpack__(stream=...) refuses a
    tensor of another device than the current one ("Can't export tensors on a
    different CUDA device index"); an all-reduce over tensors on GPUs 0 and 1
    passed them from one thread."""
    d1 = cuabi.Device(1)
    s1 = d1.create_stream()
    dev.set_current()
    before = _fake_current_context()
    assert before == 0x1000
    for kind in (2, 13):            # kDLCUDA, kDLCUDAManaged
        p = _CudaProducer(1, kind)
        with pytest.raises(_Stop):
            cuabi.from_dlpack(p, stream=s1)
        assert p.seen == [(s1.raw, 0x1001, 0)]     # the driver's; cuabi.Device() unchanged
        assert _fake_current_context() == before and cuabi.Device().ordinal == 0
    p = _CudaProducer(0, 3)          # kDLCUDAHost: no device to make current
    with pytest.raises(_Stop):
        cuabi.from_dlpack(p, stream=s1)
    assert p.seen == [(s1.raw, before, 0)]
    s1.close()


def test_from_dlpack_never_passes_stream_0_to_a_cuda_producer(dev):
    """Regression (H200 run, torch): the legacy default stream is 1 in the
    DLPack protocol; torch raises on stream=0."""
    p = _CudaProducer(0)
    for s in (0, 1, 2, 0x1234):
        with pytest.raises(_Stop):
            cuabi.from_dlpack(p, stream=s)
    assert [seen[0] for seen in p.seen] == [1, 1, 2, 0x1234]


def test_device_as_current_nests_and_gives_the_previous_back(dev):
    d1 = cuabi.Device(1)
    dev.set_current()
    with d1.as_current() as got:
        assert got is d1 and _fake_current_context() == 0x1001
        assert cuabi.Device().ordinal == 1
        with dev.as_current():
            assert _fake_current_context() == 0x1000
        assert _fake_current_context() == 0x1001
        with pytest.raises(_Stop):
            with dev.as_current():
                raise _Stop()
        assert _fake_current_context() == 0x1001
    assert _fake_current_context() == 0x1000 and cuabi.Device().ordinal == 0
    from cuabi._lib import lib
    with pytest.raises(cuabi.InvalidArgumentError, match="nothing was pushed"):
        lib.cuabi_device_pop_current(d1)
    lib.cuabi_device_push_current(d1)
    with pytest.raises(cuabi.InvalidArgumentError, match="reverse order"):
        lib.cuabi_device_pop_current(dev)
    lib.cuabi_device_pop_current(d1)
    assert _fake_current_context() == 0x1000


def _gpu_export(arr, device_id=0):
    """numpy's owning export of `arr`, relabelled a kDLCUDA tensor of GPU
    `device_id` (fake device memory is host memory)."""
    from fake_arrays import numpy_export
    p = numpy_export(arr)
    # DLManagedTensorVersioned: version (8), manager_ctx, deleter, flags, then
    # dl_tensor {data, device {type, id}}: the device at byte 40.
    ctypes.c_int32.from_address(p + 40).value = 2
    ctypes.c_int32.from_address(p + 44).value = device_id
    return p


def _exchange_producer(table):
    class Tensor:
        dlpack_calls = []

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None, max_version=None, **kw):
            type(self).dlpack_calls.append(stream)
            raise _Stop()

        def __dlpack_device__(self):
            return (2, 0)
    Tensor.__dlpack_c_exchange_api__ = table.capsule
    Tensor.table = table
    return Tensor


def test_from_dlpack_with_a_stream_orders_through_the_exchange_table(dev, monkeypatch):
    """A producer whose exchange table has current_work_stream (torch >= 2.10)
    is viewed without its __dlpack__(stream=) (torch's: ~17 us of Python on
    an H200): its current stream of the array's GPU is asked and ordered
    before the stream in C (tests/runtime/test_exchange.c checks the event).
    The compiled backend does it without the Python route."""
    import numpy as np
    from fake_arrays import ExchangeTable
    from cuabi import _view
    if cuabi.backend == "compiled":
        def python_route(*a):
            raise AssertionError("the compiled from_dlpack took the Python route")
        monkeypatch.setattr(_view, "_from_exchange_on", python_route)
    table = ExchangeTable(export=lambda o: _gpu_export(o.a), work_stream=lambda kind, i: 0x5170)
    Tensor = _exchange_producer(table)
    s = dev.create_stream()
    a = np.arange(6, dtype=np.float32)
    v = cuabi.from_dlpack(Tensor(a), stream=s)
    assert Tensor.dlpack_calls == [] and table.calls["export"] == 1
    assert table.calls["work_stream"] == [(2, 0)]
    assert v.shape == (6,) and v.device_id == 0 and v.stream is s
    assert v.ptr == a.ctypes.data
    # Without a stream: the table's export, no ordering asked.
    cuabi.from_dlpack(Tensor(a))
    assert table.calls["work_stream"] == [(2, 0)]
    # A raw CUstream int, and a producer's failing current_work_stream: its
    # __dlpack__(stream=) decides (as it did before).
    with pytest.raises(_Stop):
        cuabi.from_dlpack(Tensor(a), stream=s.raw)
    failing = ExchangeTable(export=lambda o: _gpu_export(o.a), work_stream=lambda kind, i: None)
    Failing = _exchange_producer(failing)
    with pytest.raises(_Stop):
        cuabi.from_dlpack(Failing(a), stream=s)
    assert Failing.dlpack_calls == [s.raw] and failing.calls["work_stream"] == [(2, 0)]
    # A table without current_work_stream: never exported through it.
    plain = ExchangeTable(export=lambda o: _gpu_export(o.a))
    Plain = _exchange_producer(plain)
    with pytest.raises(_Stop):
        cuabi.from_dlpack(Plain(a), stream=s)
    assert plain.calls["export"] == 0 and Plain.dlpack_calls == [s.raw]
    # A failing export: its __dlpack__(stream=) decides too, asked once.
    refusing = ExchangeTable(export=lambda o: -1, work_stream=lambda kind, i: 0x5170)
    Refusing = _exchange_producer(refusing)
    with pytest.raises(_Stop):
        cuabi.from_dlpack(Refusing(a), stream=s)
    assert refusing.calls["export"] == 1 and Refusing.dlpack_calls == [s.raw]
    assert refusing.calls["work_stream"] == []
    del v
    s.close()
    # A closed stream: refused as a closed handle (by the Python function in
    # both backends), nothing exported.
    monkeypatch.undo()
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.from_dlpack(Tensor(a), stream=s)
    assert table.calls["export"] == 2


def test_torch_with_a_stream_reads_its_dltensor_and_orders(dev, monkeypatch, request):
    """A torch tensor with a stream: the compiled backend reads it as without
    a stream (its borrowed DLTensor into a lazy view owning the tensor) and
    orders torch's current stream before the stream in C
    (cuabi_stream_wait_raw: tests/runtime/test_device_cpu.c checks the
    event); the ctypes backend through the owning export
    (cuabi_view_from_exchange_on). The views say the same; the conjugate bit
    and a failing current_work_stream leave it to torch's __dlpack__."""
    import sys
    import numpy as np
    from cuabi import _view as V
    from fake_arrays import ExchangeTable, make_fake_torch, numpy_dltensor
    torch = make_fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    keep, work = [], {"stream": 0x5170}
    table = ExchangeTable(export=lambda o: _gpu_export(o._a),
                          dltensor=lambda o, out: numpy_dltensor(o._a, out, (2, 0), keep),
                          work_stream=lambda kind, i: work["stream"])
    torch.Tensor.__dlpack_c_exchange_api__ = table.capsule
    V._reset_handlers()
    request.addfinalizer(V._reset_handlers)
    compiled = cuabi.backend == "compiled"
    if compiled:
        def python_route(*a):
            raise AssertionError("the compiled from_dlpack took the Python route")
        monkeypatch.setattr(V, "_from_exchange_on", python_route)
    s = dev.create_stream()
    a = np.arange(6, dtype=np.float32)
    t = torch.Tensor(a, device=("cuda", 0))
    v = cuabi.from_dlpack(t, stream=s)
    assert v.stream is s and v.shape == (6,) and v.ptr == a.ctypes.data and v.device_id == 0
    assert v.dtype == "float32" and table.calls["work_stream"] == [(2, 0)]
    if compiled:
        assert v.lazy and v._owner is t
        assert table.calls["dltensor"] == 1 and table.calls["export"] == 0
    else:
        assert table.calls["export"] == 1
    # The conjugate bit: torch's __dlpack__ refuses it (its exports would not).
    c = torch.Tensor(np.zeros(3, np.complex64), device=("cuda", 0), conj=True)
    with pytest.raises(RuntimeError, match="conjugate"):
        cuabi.from_dlpack(c, stream=s)
    assert table.calls["work_stream"] == [(2, 0)]
    # torch's current_work_stream fails: its __dlpack__(stream=) decides.
    work["stream"] = None
    exports = table.calls["export"]
    w = cuabi.from_dlpack(t, stream=s)
    assert table.calls["work_stream"] == [(2, 0), (2, 0)]
    # (the owning route exported first: released again when the ordering failed)
    assert w.ptr == a.ctypes.data and table.calls["export"] == exports + (0 if compiled else 1)
    del v, w
    s.close()
