"""Issue 25 from Python on a real GPU (skipped without one): a VMM buffer
grown in place by modify_allocation (pointer and bytes kept, the new range
written and read back, growth past the reservation refused, a shrink), its
chunks through a spawned child process (fds with multiprocessing's
send_handle); managed memory written through numpy on the host, prefetched,
changed by a copy on the device, read back, with the advice properties read
back; pool statistics moving with allocations (mr.attributes); one
copy_batch of mixed ends checked byte by byte; beside cuda.core's names
where cuda.core is installed (the same calls run there, results compared)."""
import multiprocessing as mp
import os

import pytest

import cuabi

MiB = 1 << 20
np = pytest.importorskip("numpy")


def test_vmm_grows_in_place(gpu):
    vmr = cuabi.VirtualMemoryResource(gpu, cuabi.VirtualMemoryResourceOptions(reserve_size=64 * MiB))
    g = vmr.granularity
    assert g > 0
    b = cuabi.Buffer(g + 1, vmr)
    assert b.size == 2 * g and vmr.info(b).requested == g + 1
    p = b.ptr
    data = np.arange(b.size // 4, dtype=np.uint32)
    b.copy_from(data)
    vmr.modify_allocation(b, 6 * g)
    assert b.ptr == p and b.size == 6 * g and vmr.info(b).chunks == 2
    back = np.frombuffer(b.to_bytes(), dtype=np.uint32)
    assert (back[:data.size] == data).all()
    b.fill(0xabcd, width=4, offset=2 * g)
    tail = np.frombuffer(b.to_bytes(offset=2 * g), dtype=np.uint32)
    assert (tail == 0xabcd).all()
    with pytest.raises(cuabi.InvalidArgumentError, match="reserved range"):
        vmr.modify_allocation(b, 64 * MiB + 1)
    vmr.modify_allocation(b, g)
    assert b.size == g and vmr.info(b).chunks == 1
    assert (np.frombuffer(b.to_bytes(), dtype=np.uint32) == data[:g // 4]).all()
    assert vmr.get_access(b, gpu) == "rw"
    b.close()


def _vmm_child(conn):
    import cuabi as c
    from multiprocessing import reduction
    n = conn.recv()
    chunks = []
    for _ in range(n):
        fd = reduction.recv_handle(conn)
        chunks.append((fd, conn.recv_bytes()))
    vmr = c.VirtualMemoryResource(0)
    b = vmr.import_chunks(chunks)
    for fd, _ in chunks:
        os.close(fd)
    first = bytes(b.to_bytes(size=4))
    b.fill(0x11, offset=0, count=16)
    c.Device(0).synchronize()
    conn.send((first, b.size, c.VirtualMemoryResource.info(b).imported))
    b.close()


def test_vmm_buffer_in_another_process(gpu):
    from multiprocessing import reduction
    vmr = cuabi.VirtualMemoryResource(gpu, cuabi.VirtualMemoryResourceOptions(reserve_size=64 * MiB))
    b = cuabi.Buffer(vmr.granularity, vmr)
    vmr.modify_allocation(b, 3 * vmr.granularity)
    b.fill(0x5a)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_vmm_child, args=(child,))
    proc.start()
    chunks = vmr.export_chunks(b)
    parent.send(len(chunks))
    for fd, d in chunks:
        reduction.send_handle(parent, fd, proc.pid)
        parent.send_bytes(d)
        os.close(fd)
    assert parent.poll(120), "the child answered nothing (it died: see its traceback)"
    first, size, imported = parent.recv()
    proc.join(60)
    assert proc.exitcode == 0
    assert first == b"\x5a" * 4 and size == b.size and imported == 1
    assert bytes(b.to_bytes(size=17)) == b"\x11" * 16 + b"\x5a"
    b.close()


def _pickled_child(conn):
    import cuabi as c
    b = conn.recv()                                  # unpickling imports every chunk
    conn.send((bytes(b.to_bytes(size=4)), b.size, c.VirtualMemoryResource.info(b).imported))
    b.fill(0x22, count=8)
    c.Device(0).synchronize()
    b.close()
    conn.send("done")


def test_vmm_buffer_pickles_like_an_ipc_pool_buffer(gpu):
    vmr = cuabi.VirtualMemoryResource(gpu, cuabi.VirtualMemoryResourceOptions(reserve_size=64 * MiB))
    b = cuabi.Buffer(vmr.granularity, vmr)
    vmr.modify_allocation(b, 2 * vmr.granularity)
    b.fill(0x6b)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_pickled_child, args=(child,))
    proc.start()
    parent.send(b)
    assert parent.poll(120), "the child answered nothing (it died: see its traceback)"
    first, size, imported = parent.recv()
    assert parent.poll(60) and parent.recv() == "done"
    proc.join(60)
    assert proc.exitcode == 0
    assert first == b"\x6b" * 4 and size == b.size and imported == 1
    assert bytes(b.to_bytes(size=9)) == b"\x22" * 8 + b"\x6b"
    b.close()


def test_managed_memory_host_and_device(gpu):
    mr = cuabi.ManagedMemoryResource(device=gpu)
    b = cuabi.ManagedBuffer(4 * MiB, mr)
    host = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint32 * (b.size // 4)).from_address(b.ptr))
    host[:] = np.arange(host.size, dtype=np.uint32)
    s = gpu.create_stream()
    b.prefetch(gpu, stream=s)
    s.synchronize()
    assert b.last_prefetch_location == gpu
    b.fill(7, width=4, offset=0, count=1024, stream=s)
    b.prefetch(cuabi.Host(), stream=s)
    s.synchronize()
    assert (host[:1024] == 7).all() and host[1024] == 1024
    b.read_mostly = True
    assert b.read_mostly
    b.read_mostly = False
    b.preferred_location = gpu
    assert b.preferred_location == gpu
    b.preferred_location = None
    assert b.preferred_location is None
    b.accessed_by = {gpu}
    assert b.accessed_by == {gpu}
    b.accessed_by = set()
    assert not b.accessed_by
    assert b.view("uint32").__dlpack_device__()[0] == 13     # kDLCUDAManaged
    try:
        b.discard(stream=s, size=MiB)
    except cuabi.NotSupportedError as e:                      # before CUDA 13
        assert "cuMemDiscardBatchAsync" in str(e)
    s.synchronize()
    b.close()


def test_pool_attributes_move(gpu):
    mr = cuabi.MemoryResource.pool(gpu)
    s = gpu.create_stream()
    a = mr.attributes
    assert a.used_mem_current == 0
    bufs = [cuabi.Buffer(8 * MiB, mr, stream=s) for _ in range(3)]
    s.synchronize()
    assert a.used_mem_current == 24 * MiB and a.used_mem_high == 24 * MiB
    assert a.reserved_mem_current >= 24 * MiB
    bufs.pop().free_async(s)
    s.synchronize()
    assert a.used_mem_current == 16 * MiB and a.used_mem_high == 24 * MiB
    mr.reset_high_water()
    assert a.used_mem_high == 16 * MiB
    a.release_threshold = 0
    assert a.release_threshold == 0
    text = mr.pool_summary()
    print(text)
    assert text.startswith(f"pool device {gpu.ordinal} (owned): reserved")
    for b in bufs:
        b.free_async(s)
    s.synchronize()
    assert a.used_mem_current == 0


def test_copy_batch_mixed(gpu):
    s = gpu.create_stream()
    src = cuabi.Buffer.from_host(np.arange(4096, dtype=np.uint8), stream=s)
    dst = cuabi.Buffer(4096, stream=s)
    man = cuabi.ManagedBuffer(4096)
    host = np.zeros(1000, dtype=np.uint8)
    r = cuabi.copy_batch(s, [src, np.full(4096, 3, dtype=np.uint8), (src.ptr, 1000)],
                         [dst, man, host],
                         options=[cuabi.CopyOptions(), cuabi.CopyOptions(
                             src_access_order=cuabi.MemcpySrcAccessOrder.DURING_API_CALL),
                             cuabi.CopyOptions(overlap_mode="prefer_overlap_with_compute")])
    s.synchronize()
    print(r)
    assert r.copies == 3 and r.bytes == 9192
    assert r.path in ("batched", "single") and (r.path == "batched" or r.reason)
    assert bytes(dst.to_bytes()) == bytes(np.arange(4096, dtype=np.uint8))
    assert bytes(man.to_bytes()) == b"\x03" * 4096
    assert (host == np.arange(1000) % 256).all()


def test_beside_cuda_core(gpu):
    cc = pytest.importorskip("cuda.core")
    if not hasattr(cc, "VirtualMemoryResource"):
        pytest.skip("this cuda.core has no VirtualMemoryResource")
    dev = cc.Device(gpu.ordinal)
    dev.set_current()
    theirs = cc.VirtualMemoryResource(dev)
    ours = cuabi.VirtualMemoryResource(gpu)
    tb = theirs.allocate(3 * MiB)
    ob = cuabi.Buffer(3 * MiB, ours)
    assert ob.size == tb.size                    # both round to the same granularity
    tb.close()
    ob.close()


def test_managed_batches(gpu):
    """cuda.core.utils's batches on cuabi: four managed buffers written on
    the host, one prefetch_batch to the GPU, a fill there, a prefetch_batch
    with one location each (two back to the host, read there), a
    discard_batch and a discard_prefetch_batch where the driver has them;
    and, where cuda.core is installed, the same batch through cuda.core."""
    from cuabi.utils import discard_batch, discard_prefetch_batch, prefetch_batch
    mr = cuabi.ManagedMemoryResource(device=gpu)
    bufs = [cuabi.ManagedBuffer(2 * MiB, mr) for _ in range(4)]
    hosts = [np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint32 * (b.size // 4))
                                   .from_address(b.ptr)) for b in bufs]
    for k, h in enumerate(hosts):
        h[:] = k
    s = gpu.create_stream()
    prefetch_batch(s, bufs, gpu)
    s.synchronize()
    assert all(b.last_prefetch_location == gpu for b in bufs)
    for k, b in enumerate(bufs):
        b.fill(100 + k, width=4, count=16, stream=s)
    prefetch_batch(s, bufs, [cuabi.Host(), gpu, cuabi.Host(), gpu])
    s.synchronize()
    assert isinstance(bufs[0].last_prefetch_location, cuabi.Host)     # the host or a NUMA node
    assert bufs[1].last_prefetch_location == gpu
    for k, h in enumerate(hosts):
        assert (h[:16] == 100 + k).all() and h[16] == k
    try:
        discard_batch(s, bufs[:2])
        discard_prefetch_batch(s, bufs[2:], gpu)
        s.synchronize()
        assert bufs[3].last_prefetch_location == gpu
        bufs[0].fill(5, width=4, count=4, stream=s)      # usable after the discard
        s.synchronize()
        assert (hosts[0][:4] == 5).all()
    except cuabi.NotSupportedError as e:                  # before CUDA 13
        assert "BatchAsync" in str(e)
    with pytest.raises(cuabi.NotSupportedError):
        prefetch_batch(s, [bufs[0], cuabi.Buffer(4096, cuabi.MemoryResource.pool(gpu), stream=s)],
                       gpu)
    for b in bufs:
        b.close()
    cc = pytest.importorskip("cuda.core")
    utils = getattr(cc, "utils", None)
    if utils is None or not hasattr(utils, "prefetch_batch"):
        pytest.skip("this cuda.core has no utils.prefetch_batch")
    dev = cc.Device(gpu.ordinal)
    dev.set_current()
    theirs = cc.ManagedMemoryResource()
    ts = dev.create_stream()
    tb = [theirs.allocate(MiB, stream=ts) for _ in range(2)]     # cuda.core: stream= needed
    utils.prefetch_batch(ts, tb, dev)
    ts.sync()
    for b in tb:
        b.close()
