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
