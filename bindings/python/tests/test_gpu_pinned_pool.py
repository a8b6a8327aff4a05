"""cuda.core's PinnedMemoryResource on a real GPU (issue 24; skipped without
one): a stream-ordered pool of page-locked host memory. Each scenario is
written once against cuda.core's API and run with cuabi and, when
`cuda.core` imports, with cuda.core too; the results must be equal:

  * the resources: options None (the driver's current host pool, not
    owned), options given (an owned pool; max_size honoured: 48 MiB fit in
    a 64 MiB pool, 32 MiB more do not), numa_id given, ipc_enabled (numa_id
    from the current device's host_numa_id): numa_id, device_id,
    is_ipc_enabled, is_host_accessible, is_device_accessible;
  * the data: a buffer allocated on a stream, written by the host through
    DLPack (numpy), copied to device memory and back on the stream, read
    by the host;
  * other processes: an IPC-enabled pool's buffers pickled through
    multiprocessing (spawn) to a child, which maps the pool (from the
    pickle), reads each buffer through its host pointer (numpy), writes
    into it and closes its imports; the parent sees the child's writes.

Devices without host memory pools skip (their attribute is 0)."""
import multiprocessing as mp
import os
import queue

import numpy as np
import pytest

import cuabi

MiB = 1 << 20


@pytest.fixture(scope="module")
def libs(gpu):
    if not gpu.properties.host_memory_pools_supported:
        pytest.skip("device 0 has no host memory pools (CUDA 13 driver, attribute 144)")
    if gpu.properties.host_numa_id < 0:
        pytest.skip("device 0 names no host NUMA node (an IPC pinned pool needs one)")
    out = {"cuabi": cuabi}
    if os.environ.get("CUABI_TEST_WITHOUT_CUDA_CORE"):   # cuabi's side alone (diagnosis)
        cuabi.Device(0).set_current()
        return out
    try:
        import cuda.core as cc
        cc.PinnedMemoryResource, cc.PinnedMemoryResourceOptions, cc.Device
        cc.Device(0).set_current()
        out["cuda.core"] = cc
    except (ImportError, AttributeError):
        pass                       # cuabi alone; the parity needs cuda.core
    cuabi.Device(0).set_current()
    return out


def each(libs, scenario):
    """scenario(core) with each library; the results, checked equal."""
    got = {name: scenario(core) for name, core in libs.items()}
    if "cuda.core" in got:
        assert got["cuabi"] == got["cuda.core"], got
    return got["cuabi"]


def _facts(mr):
    return (mr.numa_id, mr.device_id, mr.is_ipc_enabled, mr.is_host_accessible,
            mr.is_device_accessible)


def test_resources(libs, gpu):
    node = gpu.properties.host_numa_id

    def resources(core):
        dev = core.Device(0)
        dev.set_current()
        cur = core.PinnedMemoryResource()
        owned = core.PinnedMemoryResource(core.PinnedMemoryResourceOptions(max_size=64 * MiB))
        numa = core.PinnedMemoryResource(core.PinnedMemoryResourceOptions(numa_id=node))
        ipc = core.PinnedMemoryResource(core.PinnedMemoryResourceOptions(ipc_enabled=True))
        facts = [_facts(m) for m in (cur, owned, numa, ipc)]
        # max_size honoured
        s = dev.create_stream()
        big = owned.allocate(48 * MiB, stream=s)
        try:
            more = owned.allocate(32 * MiB, stream=s)
            more.close(s)
            refused = False
        except Exception:                          # cuda.core: CUDAError; cuabi: CudaError
            refused = True
        big.close(s)
        s.sync()
        again = owned.allocate(32 * MiB, stream=s)   # room again
        again.close(s)
        s.sync()
        for m in (owned, numa, ipc):
            m.close()
        cur.close()
        return facts, refused
    facts, refused = each(libs, resources)
    assert facts == [(-1, -1, False, True, True), (-1, -1, False, True, True),
                     (node, -1, False, True, True), (node, -1, True, True, True)]
    assert refused
    # cuabi's extras say where the pools are
    own = cuabi.PinnedMemoryResource({"numa_id": node, "max_size": 8 * MiB})
    st = own.pool_stats()
    assert (st.location_type, st.location_id, st.owned, st.max_size) == \
        (cuabi._capi.CUABI_LOCATION_HOST_NUMA, node, 1, 8 * MiB)
    assert cuabi.PinnedMemoryResource().pool_stats().owned == 0


def test_data_round_trip(libs):
    n = 1 << 20

    def round_trip(core):
        dev = core.Device(0)
        dev.set_current()
        s = dev.create_stream()
        out = []
        for opts in (None, core.PinnedMemoryResourceOptions(),
                     core.PinnedMemoryResourceOptions(ipc_enabled=True)):
            mr = core.PinnedMemoryResource(opts)
            buf = mr.allocate(n, stream=s)
            s.sync()
            host = np.from_dlpack(buf).view(np.uint8)
            host[:] = np.arange(n, dtype=np.uint64).astype(np.uint8)
            dbuf = dev.allocate(n, stream=s)              # device memory
            dbuf.copy_from(buf, stream=s)
            s.sync()            # the copy reads `host`: only after it may it be cleared
            host[:] = 0
            buf.copy_from(dbuf, stream=s)
            s.sync()
            out.append((buf.size, buf.is_host_accessible, buf.is_device_accessible,
                        int(host[0]), int(host[255]), int(host[n - 1]),
                        bool((host == np.arange(n, dtype=np.uint64).astype(np.uint8)).all()),
                        buf.memory_resource is mr))
            dbuf.close(s)
            buf.close(s)
            s.sync()
            if opts is not None:
                mr.close()
        return out
    assert each(libs, round_trip) == [(n, True, True, 0, 255, 255, True, True)] * 3


def _child(lib, q, out, log):
    """The child's steps go to `log` too: a child that does not answer is explained
    by how far it got (its stderr may not reach the test's output)."""
    import faulthandler
    with open(log, "a", buffering=1) as f:
        faulthandler.enable(f)
        f.write(f"start {lib} pid {os.getpid()}\n")
        try:
            if lib == "cuabi":
                import cuabi as core
            else:
                import cuda.core as core
            core.Device(0).set_current()
            f.write("current\n")
            while True:
                msg = q.get()           # unpickling maps the pool and imports the buffers
                f.write(f"message {type(msg).__name__}\n")
                if msg is None:
                    break
                mr, bufs, value = msg
                seen = []
                for b in bufs:
                    host = np.from_dlpack(b).view(np.uint8)
                    seen.append((b.size, b.is_mapped, b.is_host_accessible,
                                 b.is_device_accessible, int(host[0]), int(host[-1])))
                    host[:16] = value + 1      # the child writes through its host pointer
                for b in bufs:                 # importers free first
                    b.close()
                out.put((type(mr).__name__, mr.is_ipc_enabled, seen))
                f.write(f"answered {seen}\n")
        except BaseException as e:
            f.write(f"error {e!r}\n")
            out.put(("error", repr(e), []))
        f.write("done\n")


def test_buffers_pickle_to_a_child(libs, tmp_path):
    def share(core):
        name = "cuabi" if core is cuabi else "cuda.core"
        dev = core.Device(0)
        dev.set_current()
        s = dev.create_stream()
        mr = core.PinnedMemoryResource(core.PinnedMemoryResourceOptions(ipc_enabled=True,
                                                                        max_size=64 * MiB))
        bufs = [mr.allocate(4096 * (i + 1), stream=s) for i in range(4)]
        s.sync()
        ctx = mp.get_context("spawn")
        q, out = ctx.Queue(), ctx.Queue()
        log = tmp_path / f"{name}-child.log"
        p = ctx.Process(target=_child, args=(name, q, out, str(log)))
        p.start()
        rounds = []
        try:
            for r in range(3):
                for b in bufs:
                    np.from_dlpack(b).view(np.uint8)[:] = 10 * r + 1
                q.put((mr, bufs, 10 * r + 1))
                try:
                    kind, ipc, seen = out.get(timeout=60)
                except queue.Empty:
                    steps = log.read_text() if log.exists() else "(no log: it never started)"
                    raise AssertionError(f"{name}'s child did not answer in round {r} (alive: "
                                         f"{p.is_alive()}, exit code {p.exitcode}); its "
                                         f"steps:\n{steps}") from None
                if kind == "error":         # the child stops at an error: say it now
                    raise AssertionError(f"{name}'s child failed in round {r}: {ipc}; its "
                                         f"steps:\n{log.read_text()}")
                parent_sees = [int(np.from_dlpack(b).view(np.uint8)[0]) for b in bufs]
                rounds.append((kind, ipc, seen, parent_sees))
        finally:
            q.put(None)
            p.join(30)
            if p.is_alive():
                p.terminate()
        for b in bufs:
            b.close(s)
        s.sync()
        mr.close()
        return rounds, p.exitcode
    rounds, code = each(libs, share)
    assert code == 0
    for r, (kind, ipc, seen, parent_sees) in enumerate(rounds):
        v = 10 * r + 1
        assert kind == "PinnedMemoryResource" and ipc, (kind, ipc)
        assert seen == [(4096 * (i + 1), True, True, True, v, v) for i in range(4)]
        assert parent_sees == [v + 1] * 4       # one memory: the child's write is here


def test_allocation_handle_to_a_child(libs):
    """cuda.core's explicit form: allocation_handle, then
    PinnedMemoryResource.from_allocation_handle(handle) in the child."""
    mr = cuabi.PinnedMemoryResource({"ipc_enabled": True})
    dev = cuabi.Device(0)
    s = dev.create_stream()
    buf = mr.allocate(1 << 16, stream=s)
    s.sync()
    np.from_dlpack(buf).view(np.uint8)[:] = 42
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_handle_child, args=(b,))
    p.start()
    with mr.allocation_handle as h:
        a.send((h, buf.get_ipc_descriptor()))
    assert a.poll(60), f"the child did not answer (alive: {p.is_alive()}, exit code {p.exitcode})"
    got = a.recv()
    p.join(120)
    assert p.exitcode == 0
    assert got == ("PinnedMemoryResource", True, mr.numa_id, -1, 1 << 16, True, 42, 42)
    assert int(np.from_dlpack(buf).view(np.uint8)[7]) == 43
    buf.close(s)
    mr.close()


def _handle_child(conn):
    import cuabi as c
    c.Device(0).set_current()
    h, d = conn.recv()
    mr = c.PinnedMemoryResource.from_allocation_handle(h)
    h.close()
    b = c.Buffer.from_ipc_descriptor(mr, d)
    host = np.from_dlpack(b).view(np.uint8)
    first, last = int(host[0]), int(host[-1])
    host[7] = 43
    conn.send((type(mr).__name__, mr.is_mapped, mr.numa_id, mr.device_id, b.size,
               b.is_host_accessible, first, last))
    b.close()
    mr.close()
