"""Pool IPC from Python on a real GPU (skipped without one): buffers of an
IPC pool (MemoryResource.ipc_pool, cuda.core's ipc_enabled pool) pickle
through multiprocessing (spawn) to a warm child, which maps the pool once
and imports every buffer into it; the child checks the parent's writes after
waiting on an IPC event, writes its own, and frees its imports before the
parent frees; cuda.core's explicit names (get_allocation_handle,
from_allocation_handle, from_ipc_descriptor(mr, d)) in a second child;
same-process misuse; device memory before/after."""
import multiprocessing as mp
import pickle

import pytest

import cuabi

N = 1 << 16      # uint32 elements per buffer
COUNT = 8        # buffers per message
ROUNDS = 10


def _child_loop(conn):
    import cuabi as c
    from cuabi import _ipc_pool
    s = None
    while True:
        msg = conn.recv()                        # unpickling maps the pool, imports the buffers
        if msg is None:
            break
        bufs, event, i = msg
        if s is None:
            s = bufs[0].device.create_stream(non_blocking=False)
        s.wait(event)
        ok = True
        for j, b in enumerate(bufs):
            host = memoryview(b.to_bytes(stream=s)).cast("I")
            s.synchronize()
            ok = ok and host[0] == 1000 * i + j and host[N - 1] == 1000 * i + j
            b.fill(7000 * i + j, width=4, stream=s)
        s.synchronize()
        mapped = list(_ipc_pool._mapped.values())
        for b in bufs:                           # importers free first
            b.close()
        conn.send((ok, len(mapped), all(m.is_mapped for m in mapped)))


def test_pool_buffers_pickle_to_a_child(gpu):
    gpu.synchronize()
    free0, _ = gpu.memory_info()
    mr = cuabi.MemoryResource.ipc_pool(gpu, max_size=256 << 20)
    assert mr.is_ipc_enabled and not mr.is_mapped
    stream = gpu.create_stream(non_blocking=False)
    bufs = [cuabi.Buffer(N * 4, mr, stream=stream) for _ in range(COUNT)]
    event = cuabi.Event.create_ipc(gpu)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child_loop, args=(child,))
    p.start()
    try:
        for i in range(ROUNDS):
            for j, b in enumerate(bufs):
                b.fill(1000 * i + j, width=4, stream=stream)
            event.record(stream)                 # allocation and writes before the import reads
            parent.send((bufs, event, i))
            ok, mapped, all_mapped = parent.recv()
            assert ok, f"round {i}: the child read before the parent's write"
            assert mapped == 1 and all_mapped, "the pool must be mapped once per child"
            for j, b in enumerate(bufs):
                host = memoryview(b.to_bytes()).cast("I")
                assert host[0] == 7000 * i + j and host[N - 1] == 7000 * i + j
        parent.send(None)
        p.join(60)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
    for b in bufs:
        b.free_async(stream)
    stream.synchronize()
    mr.trim(0)
    for o in (event, stream, mr):
        o.close()
    gpu.synchronize()
    free1, _ = gpu.memory_info()
    print(f"free device memory before {free0}, after {free1}")


def _handle_child(conn):
    import cuabi as c
    h, descriptors = conn.recv()
    mr = c.MemoryResource.from_allocation_handle(0, h)
    h.close()
    try:
        c.Buffer(64, mr)
        allocated = True
    except c.NotSupportedError:
        allocated = False
    sums = []
    for d in descriptors:
        with c.Buffer.from_ipc_descriptor(mr, d) as b:
            assert b.is_mapped                      # cuda.core's Buffer.is_mapped
            sums.append(sum(b.to_bytes()))
    conn.send((allocated, sums))


def test_cuda_core_names_in_a_child(gpu):
    mr = cuabi.MemoryResource.ipc_pool(gpu)
    bufs = [cuabi.Buffer(4096, mr) for _ in range(3)]
    for j, b in enumerate(bufs):
        b.fill(j + 1)
    gpu.synchronize()
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_handle_child, args=(b,))
    p.start()
    try:
        with mr.get_allocation_handle() as h:
            a.send((h, [x.get_ipc_descriptor() for x in bufs]))
        allocated, sums = a.recv()
        p.join(60)
    finally:
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0
    assert not allocated
    assert sums == [4096 * (j + 1) for j in range(3)]
    assert not any(x.is_mapped for x in bufs)


def test_same_process_misuse(gpu):
    mr = cuabi.MemoryResource.ipc_pool(gpu)
    with cuabi.Buffer(4096, mr) as b:
        with pytest.raises(cuabi.IPCError, match="this process exported the pool"):
            cuabi.Buffer.from_ipc_descriptor(mr, b.get_ipc_descriptor())
        with pytest.raises(cuabi.IPCError, match="cuabi_ipc_pool_buffer_import"):
            cuabi.Buffer.from_ipc_descriptor(b.get_ipc_descriptor())
    with pytest.raises(TypeError):
        pickle.dumps(cuabi.MemoryResource.device_default(gpu))
    mr.close()


# ---- the batch path (issue 24 item 4): many buffers of a pool in one C call
# each way, and a pickled list whose descriptors the parent keeps

def _answer(conn, p, seconds=120):
    """The child's answer, or a failure once it died or went quiet (never a
    wait without end)."""
    assert conn.poll(seconds), f"no answer from the child (exit code {p.exitcode})"
    return conn.recv()


def _batch_child(conn):
    import cuabi as c
    h, blob, count, other = conn.recv()
    mr = c.MemoryResource.from_allocation_handle(0, h)
    h.close()
    out = {}
    bufs = c.Buffer.from_ipc_descriptors(mr, blob)          # one C call
    out["count"] = len(bufs)
    out["mapped"] = all(b.is_mapped for b in bufs)
    # the address came with the import: the library's own answer agrees
    out["addresses"] = all(b.ptr == c._lib.call("cuabi_buffer_pointer", b) for b in bufs)
    out["sizes"] = [b.size for b in bufs]
    out["firsts"] = [bytes(b.to_bytes(size=4)) for b in bufs]
    for j, b in enumerate(bufs):
        b.fill(200 + j)
    c.Device(0).synchronize()
    for b in bufs:
        b.close()
    # all or nothing: a corrupt descriptor at 5, another pool's at 2
    D = c._capi.CUABI_IPC_DESCRIPTOR_SIZE
    bad = bytearray(blob)
    bad[5 * D + 40] ^= 1
    try:
        c.Buffer.from_ipc_descriptors(mr, bytes(bad))
        out["corrupt"] = "imported"
    except c.IPCError as e:
        out["corrupt"] = str(e)
    try:
        c.Buffer.from_ipc_descriptors(mr, blob[:2 * D] + other + blob[3 * D:])
        out["other"] = "imported"
    except c.IPCError as e:
        out["other"] = str(e)
    # and every buffer imports again afterwards (nothing was left imported)
    again = c.Buffer.from_ipc_descriptors(mr, [blob[i * D:(i + 1) * D] for i in range(count)])
    out["again"] = [bytes(b.to_bytes(size=4)) for b in again]
    for b in again:
        b.close()
    conn.send(out)


def test_batch_descriptors_to_a_child(gpu):
    mr = cuabi.MemoryResource.ipc_pool(gpu, max_size=256 << 20)
    other = cuabi.MemoryResource.ipc_pool(gpu)
    count = 32
    bufs = [cuabi.Buffer((1 << 20) + 256 * j, mr) for j in range(count)]
    for j, b in enumerate(bufs):
        b.fill(j + 1)
    ob = cuabi.Buffer(4096, other)
    gpu.synchronize()
    descs = cuabi.Buffer.get_ipc_descriptors(bufs)          # one C call
    assert descs == [b.get_ipc_descriptor() for b in bufs]
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_batch_child, args=(b,))
    p.start()
    try:
        with mr.get_allocation_handle() as h:
            a.send((h, b"".join(descs), count, ob.get_ipc_descriptor()))
        out = _answer(a, p)
        p.join(60)
    finally:
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0
    assert out["count"] == count and out["mapped"] and out["addresses"]
    assert out["sizes"] == [(1 << 20) + 256 * j for j in range(count)]
    assert out["firsts"] == [bytes([j + 1]) * 4 for j in range(count)]
    assert "descriptors[5]" in out["corrupt"] and "corrupt" in out["corrupt"]
    assert "descriptors[2]" in out["other"] and "belongs to pool" in out["other"]
    assert out["again"] == [bytes([200 + j]) * 4 for j in range(count)]
    for j, x in enumerate(bufs):                            # the child's writes
        assert bytes(x.to_bytes(size=4)) == bytes([200 + j]) * 4
    for x in bufs + [ob]:
        x.close()
    mr.close()
    other.close()


def _list_child(conn):
    import cuabi as c
    while True:
        msg = conn.recv()                       # a plain list of Buffers
        if msg is None:
            break
        seen = [bytes(b.to_bytes(size=4)) + bytes(b.to_bytes(offset=b.size - 4)) for b in msg]
        for b in msg:                           # importers free first
            b.close()
        conn.send(seen)


def test_pickled_lists_kept_and_fresh(gpu):
    """The same list pickled again (its kept descriptors), then lists of new
    buffers (new descriptors) at addresses the pool reuses."""
    mr = cuabi.MemoryResource.ipc_pool(gpu, max_size=256 << 20)
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_list_child, args=(b,))
    p.start()
    try:
        bufs = [cuabi.Buffer(1 << 20, mr) for _ in range(32)]
        for r in range(3):
            for j, x in enumerate(bufs):
                x.fill((r * 32 + j) % 251)
            gpu.synchronize()
            a.send(bufs)
            assert _answer(a, p) == [bytes([(r * 32 + j) % 251]) * 8 for j in range(32)]
        for r in range(3):
            for x in bufs:
                x.close()
            bufs = [cuabi.Buffer(1 << 20, mr) for _ in range(32)]
            for j, x in enumerate(bufs):
                x.fill((r + 7 * j) % 251)
            gpu.synchronize()
            a.send(bufs)
            assert _answer(a, p) == [bytes([(r + 7 * j) % 251]) * 8 for j in range(32)]
        a.send(None)
        p.join(60)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
    for x in bufs:
        x.close()
    mr.close()
