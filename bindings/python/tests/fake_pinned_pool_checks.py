"""cuda.core's PinnedMemoryResource (issue 24) against the C tests' fake
driver (no GPU): run by test_pinned_pool.py in a process whose
CUABI_DRIVER_PATH names tests/fixtures/.libs/fake_cuda_graph.so. The fake has
pools in host memory (HOST, HOST_NUMA nodes 0 and 1; a device's
host_numa_id is 1), gives devices no access to them until granted, and
refuses device work on them without it. A forked child
(multiprocessing's fork context) sees the parent's memory as it was at
the fork, so buffers are made and filled before the child starts."""
import multiprocessing as mp
import os
import pickle
import uuid

import numpy as np
import pytest

import cuabi
from cuabi import _capi

MiB = 1 << 20
HOST, HOST_NUMA = _capi.CUABI_LOCATION_HOST, _capi.CUABI_LOCATION_HOST_NUMA


@pytest.fixture
def dev():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    d = cuabi.Device(0)
    d.set_current()
    return d


def _pinned_buffer_works(mr, stream):
    """A buffer of `mr` on `stream`: pinned, this resource's, written by the
    device (memset), read and written by the host through DLPack."""
    b = mr.allocate(4096, stream=stream)
    assert b.kind == "pinned" and b.memory_resource is mr
    assert b.is_host_accessible and b.is_device_accessible and not b.is_managed
    assert b.__dlpack_device__()[0] == 3                  # kDLCUDAHost
    b.fill(0x5A, stream=stream)                            # the device's memset
    stream.sync()
    host = np.from_dlpack(b)
    assert host[0] == 0x5A and host[4095] == 0x5A
    host[:4] = (1, 2, 3, 4)                                # the host writes
    assert bytes(b.to_bytes(size=5)) == bytes([1, 2, 3, 4, 0x5A])
    return b


def test_options_none_is_the_current_host_pool(dev):
    s = dev.create_stream()
    mr = cuabi.PinnedMemoryResource()
    assert not isinstance(mr, cuabi.LegacyPinnedMemoryResource)
    assert isinstance(mr, cuabi.MemoryResource)
    assert mr.kind == "pinned" and mr.device_id == -1 and mr.numa_id == -1
    assert mr.is_device_accessible and mr.is_host_accessible and not mr.is_ipc_enabled
    st = mr.pool_stats()
    assert (st.location_type, st.owned, st.ipc) == (HOST, 0, 0)
    b = _pinned_buffer_works(mr, s)
    # cuda.core's Buffer.device_id is its resource's: -1 for pinned memory
    # (it was the device's ordinal here before), the device's for device memory
    assert b.device_id == -1 and b.memory_resource is mr
    assert cuabi.LegacyPinnedMemoryResource().allocate(64).device_id == -1
    assert dev.memory_resource.allocate(64, stream=s).device_id == dev.ordinal
    used = mr.attributes.used_mem_current
    assert used >= 4096
    b.close(s)
    # not owned: closing the resource leaves the driver's pool, which the
    # next resource finds again (the same CUmemoryPool)
    raw = cuabi._lib.call("cuabi_memory_resource_pool", mr)
    mr.close()
    again = cuabi.PinnedMemoryResource(None)
    assert cuabi._lib.call("cuabi_memory_resource_pool", again) == raw
    b = again.allocate(64, stream=s)
    b.close(s)
    # stream-ordered: deallocate on a stream, as cuda.core
    p = again.allocate_ptr(128, 0, s)
    again.deallocate(p, 128, stream=s)
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        again.allocation_handle
    with pytest.raises(TypeError):
        pickle.dumps(again)


def test_options_make_an_owned_pool(dev):
    s = dev.create_stream()
    for opts, loc, node in ((cuabi.PinnedMemoryResourceOptions(), HOST, -1),
                            ({"max_size": 32 * MiB}, HOST, -1),
                            (cuabi.PinnedMemoryResourceOptions(numa_id=1), HOST_NUMA, 1),
                            ({"numa_id": 0, "max_size": 8 * MiB}, HOST_NUMA, 0)):
        mr = cuabi.PinnedMemoryResource(opts)
        st = mr.pool_stats()
        assert (st.location_type, st.owned, st.ipc) == (loc, 1, 0), opts
        want_max = opts.get("max_size", 0) if isinstance(opts, dict) else opts.max_size
        assert st.max_size == want_max
        assert mr.numa_id == node and mr.device_id == -1 and not mr.is_ipc_enabled
        assert cuabi._lib.call("cuabi_memory_resource_pool", mr) != \
            cuabi._lib.call("cuabi_memory_resource_pool", cuabi.PinnedMemoryResource())
        b = _pinned_buffer_works(mr, s)
        b.close(s)
        mr.close()
    # cuda.core's refusals
    with pytest.raises(ValueError, match="numa_id must be >= 0"):
        cuabi.PinnedMemoryResource(cuabi.PinnedMemoryResourceOptions(numa_id=-1))
    with pytest.raises(TypeError):
        cuabi.PinnedMemoryResource(cuabi.PinnedMemoryResourceOptions(numa_id=1.5))
    with pytest.raises(TypeError):
        cuabi.PinnedMemoryResource({"bogus": 1})
    with pytest.raises(TypeError, match="PinnedMemoryResourceOptions"):
        cuabi.PinnedMemoryResource(3)
    with pytest.raises(ValueError):
        cuabi.PinnedMemoryResource({"max_size": -1})
    # a node the host does not have: the driver's refusal, explained
    with pytest.raises(cuabi.CudaError, match="HOST_NUMA_MEMORY_POOLS_SUPPORTED"):
        cuabi.PinnedMemoryResource({"numa_id": 7})


def test_ipc_enabled_pool(dev):
    # numa_id None: the current device's host_numa_id (the fake says 1)
    assert dev.properties.host_numa_id == 1
    mr = cuabi.PinnedMemoryResource(cuabi.PinnedMemoryResourceOptions(ipc_enabled=True,
                                                                      max_size=64 * MiB))
    assert isinstance(mr, cuabi.PinnedMemoryResource)
    assert mr.is_ipc_enabled and not mr.is_mapped and mr.numa_id == 1 and mr.device_id == -1
    st = mr.pool_stats()
    assert (st.location_type, st.location_id, st.owned, st.ipc, st.max_size) == \
        (HOST_NUMA, 1, 1, 1, 64 * MiB)
    h = mr.allocation_handle
    assert isinstance(h, cuabi.IPCAllocationHandle) and h.handle >= 0
    assert h.descriptor[8] == 2                      # format 2: a pool in host memory
    assert h.descriptor[64] == HOST_NUMA and h.descriptor[68] == 1
    h.close()
    explicit = cuabi.PinnedMemoryResource({"ipc_enabled": True, "numa_id": 0})
    assert explicit.numa_id == 0 and explicit.is_ipc_enabled
    s = dev.create_stream()
    b = _pinned_buffer_works(mr, s)
    d = b.get_ipc_descriptor()
    assert d[10] == _capi.CUABI_IPC_POOL_MEMORY
    b.close(s)
    # register / from_registry, one registry with DeviceMemoryResource
    key = uuid.uuid4()
    assert mr.register(key) is mr
    assert cuabi.PinnedMemoryResource.from_registry(key) is mr
    assert explicit.register(key) is mr
    explicit.close()
    mr.close()


def test_host_numa_id_unknown(dev, monkeypatch):
    """cuda.core's RuntimeError when no NUMA node can be derived."""
    monkeypatch.setattr(type(dev.properties), "host_numa_id", property(lambda self: -1),
                        raising=False)
    with pytest.raises(RuntimeError, match="Set numa_id explicitly"):
        cuabi.PinnedMemoryResource({"ipc_enabled": True})
    assert cuabi.PinnedMemoryResource({"ipc_enabled": True, "numa_id": 1}).numa_id == 1


def test_legacy_pinned_is_still_cumemallochost(dev):
    legacy = cuabi.LegacyPinnedMemoryResource()
    assert legacy.kind == "pinned" and legacy.device_id == -1
    assert not isinstance(legacy, cuabi.PinnedMemoryResource)
    with pytest.raises(cuabi.NotSupportedError):
        legacy.pool_stats()                          # not a pool
    b = legacy.allocate(64)
    assert b.is_host_accessible and b.is_device_accessible
    b.close()


def test_device_memory_resource_max_size(dev):
    """DeviceMemoryResourceOptions(max_size=) without ipc_enabled: a pool of
    that size (cuabi_memory_pool_options.max_size)."""
    mr = cuabi.DeviceMemoryResource(dev, cuabi.DeviceMemoryResourceOptions(max_size=16 * MiB))
    st = mr.pool_stats()
    assert (st.max_size, st.owned, st.ipc, st.location_type) == \
        (16 * MiB, 1, 0, _capi.CUABI_LOCATION_DEVICE)
    assert mr.kind == "device" and not mr.is_ipc_enabled
    b = mr.allocate(4096, stream=dev.create_stream())
    assert b.kind == "device"
    b.close()
    mr.close()
    with pytest.raises(ValueError):
        cuabi.DeviceMemoryResource(dev, {"max_size": -5})


# ---- to other processes

def _child_handle(conn):
    try:
        _child_handle_body(conn)
    except BaseException:
        import traceback
        conn.send({"error": traceback.format_exc()})


def _child_handle_body(conn):
    import cuabi as c
    out = {}
    h, descs, device_handle = conn.recv()
    mr = c.PinnedMemoryResource.from_allocation_handle(h)
    out["type"] = type(mr).__name__
    out["again"] = c.PinnedMemoryResource.from_allocation_handle(h) is mr
    out["props"] = (mr.is_mapped, mr.is_ipc_enabled, mr.numa_id, mr.device_id, mr.kind,
                    mr.is_host_accessible, mr.is_device_accessible)
    h.close()
    try:
        c.Buffer(64, mr)
        out["alloc"] = "allocated"
    except c.NotSupportedError:
        out["alloc"] = "refused"
    try:
        c.PinnedMemoryResource.from_allocation_handle(5)
        out["int"] = "mapped"
    except TypeError as e:
        out["int"] = str(e)
    try:
        c.PinnedMemoryResource.from_allocation_handle(device_handle)
        out["device"] = "mapped"
    except TypeError as e:
        out["device"] = str(e)
    device_handle.close()
    bufs = []
    for d in descs:
        b = c.Buffer.from_ipc_descriptor(mr, d)
        bufs.append(b)
    out["bufs"] = [(b.size, b.kind, b.is_mapped, b.memory_resource is mr,
                    bytes(np.from_dlpack(b)[:3])) for b in bufs]
    np.from_dlpack(bufs[0])[:2] = (100, 101)          # the child writes through its pointer
    for b in bufs:
        b.close()
    conn.send(out)


def test_allocation_handle_to_a_child(dev):
    mr = cuabi.PinnedMemoryResource({"ipc_enabled": True})
    other = cuabi.DeviceMemoryResource(dev, {"ipc_enabled": True})
    s = dev.create_stream()
    bufs = [mr.allocate(100 * (i + 1), stream=s) for i in range(3)]
    for i, b in enumerate(bufs):
        b.fill(10 + i, stream=s)
    s.sync()
    ctx = mp.get_context("fork")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_child_handle, args=(b,))
    p.start()
    with mr.allocation_handle as h, other.allocation_handle as oh:
        a.send((h, [x.get_ipc_descriptor() for x in bufs], oh))
    assert a.poll(60), "the child did not answer (its traceback is above)"
    out = a.recv()
    p.join(60)
    assert "error" not in out, out.get("error")
    assert p.exitcode == 0
    assert out["type"] == "PinnedMemoryResource" and out["again"]
    assert out["props"] == (True, True, 1, -1, "pinned", True, True)
    assert out["alloc"] == "refused"
    assert "bare file descriptor" in out["int"]
    assert "device pool" in out["device"]
    assert out["bufs"] == [(100 * (i + 1), "pinned", True, True, bytes([10 + i]) * 3)
                           for i in range(3)]
    # one memory: the child's host write is the parent's (the fake's fork
    # copies memory, so only a real GPU run shows it: test_gpu_pinned_pool.py)
    for x in bufs:
        x.close(s)


def _child_pickled(q, out):
    import cuabi as c
    while True:
        msg = q.get()
        if msg is None:
            break
        mr, bufs = msg
        out.put((type(mr).__name__, mr.is_mapped, mr.numa_id,
                 [(b.size, b.kind, type(b.memory_resource).__name__,
                   b.memory_resource is mr, bytes(b.to_bytes(size=2))) for b in bufs],
                 len(c._ipc_pool._mapped)))
        for b in bufs:
            b.close()


def test_pickled_to_a_child(dev):
    """The resource and its buffers through multiprocessing, as
    DeviceMemoryResource's IPC pools go: the pool's fd once, the child maps
    it as a PinnedMemoryResource."""
    mr = cuabi.PinnedMemoryResource({"ipc_enabled": True, "numa_id": 0, "max_size": 8 * MiB})
    s = dev.create_stream()
    bufs = [mr.allocate(256 + i, stream=s) for i in range(4)]
    for i, b in enumerate(bufs):
        b.fill(40 + i, stream=s)
    s.sync()
    ctx = mp.get_context("fork")
    q, out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_child_pickled, args=(q, out))
    p.start()
    try:
        for _ in range(3):
            q.put((mr, bufs))
            name, mapped, node, seen, n = out.get(timeout=60)
            assert (name, mapped, node, n) == ("PinnedMemoryResource", True, 0, 1)
            assert seen == [(256 + i, "pinned", "PinnedMemoryResource", True,
                             bytes([40 + i]) * 2) for i in range(4)]
    finally:
        q.put(None)
        p.join(60)
    assert p.exitcode == 0
    for b in bufs:
        b.close(s)
