#!/usr/bin/env python3
"""Peer copies and IPC from Python beside torch, CuPy and cuda.core (issue 15).

    python3 bench/bench_peer.py [--quick] [--json FILE]

1. GPU 0 -> GPU 1 copy bandwidth, 1 MiB .. 1 GiB: cuabi Buffer.copy_peer
   (into a preallocated buffer, stream of GPU 0), torch `t.to('cuda:1')`
   (allocates the destination, as users write it) and `dst.copy_(src)`,
   CuPy `cupy.cuda.runtime.memcpyPeer`. Peer access enabled where the pair
   supports it. Needs two GPUs.
2. IPC latency: a list of 32 buffers of 1 MiB pickled to a spawned child
   (already started, its context current) through a multiprocessing queue,
   from the put in the parent to every buffer mapped in the child, per
   buffer, median of 5 rounds: cuabi legacy IPC (MemoryResource.ipc
   buffers), cuabi pool IPC (MemoryResource.ipc_pool buffers: the pool's fd
   travels once per message, the pool is mapped once per child) and
   cuda.core (IPC-enabled DeviceMemoryResource) when importable; and
   cuabi's batch API (Buffer.get_ipc_descriptors in the parent, the pool
   and the descriptors in one message, Buffer.from_ipc_descriptors in the
   child: one C call each way). The child closes its imports before it
   answers, timed apart ("the child's close", not in the figure).
   Each row runs in --ipc-processes fresh children (default 5, the rows
   alternating), 5 rounds each: every child's median, the median over
   children, and cuabi pool IPC / cuda.core against issue 24's target (<= 1).
Peers that are not installed are reported as skipped.
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import cuabi  # noqa: E402

MiB = 1 << 20


def _median(v):
    v = sorted(v)
    return v[len(v) // 2]


def _timed(fn, sync, size, reps=5):
    fn()
    sync()
    iters = max(3, min(100, (2 << 30) // size))
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        runs.append(size * iters / (time.perf_counter() - t0) / 1e9)
    return _median(runs)


def _sync_both_cupy():
    # cudaMemcpyPeer returns before a device-to-device copy ends: wait for
    # both devices (without it the 2026-11-26 run reported 21 TB/s).
    import cupy
    for d in (0, 1):
        with cupy.cuda.Device(d):
            cupy.cuda.runtime.deviceSynchronize()


def bandwidth(sizes):
    rows = {}
    d0, d1 = cuabi.Device(0), cuabi.Device(1)
    if d0.peer_attribute(d1) and d1.peer_attribute(d0):
        d0.enable_peer_access(d1)
        d1.enable_peer_access(d0)
    most = sizes[-1]
    r0, r1 = cuabi.MemoryResource.device_default(d0), cuabi.MemoryResource.device_default(d1)
    if d0.peer_attribute(d1) and d1.peer_attribute(d0):
        # Pool memory needs the pools' access too, or the driver stages the
        # copies through the host (38 GB/s against NVLink's ~390).
        r0.set_peer_access(d1)
        r1.set_peer_access(d0)
    src = cuabi.Buffer(most, r0)
    dst = cuabi.Buffer(most, r1)
    s = d0.create_stream()
    for n in sizes:
        rows.setdefault(n, {})["cuabi copy_peer"] = _timed(
            lambda: dst.copy_peer(src, size=n, stream=s), s.synchronize, n)
    try:
        import torch
        a = torch.empty(most, dtype=torch.uint8, device="cuda:0")
        b = torch.empty(most, dtype=torch.uint8, device="cuda:1")

        def tsync():
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
        for n in sizes:
            rows[n]["torch .to('cuda:1')"] = _timed(lambda: a[:n].to("cuda:1"), tsync, n)
            rows[n]["torch copy_"] = _timed(lambda: b[:n].copy_(a[:n]), tsync, n)
        del a, b
    except Exception as e:  # noqa: BLE001 (a peer that is missing or fails is reported)
        print(f"torch: skipped ({type(e).__name__}: {e})")
    try:
        import cupy
        with cupy.cuda.Device(0):
            ca = cupy.empty(most, dtype=cupy.uint8)
        with cupy.cuda.Device(1):
            cb = cupy.empty(most, dtype=cupy.uint8)
        for n in sizes:
            rows[n]["cupy memcpyPeer"] = _timed(
                lambda: cupy.cuda.runtime.memcpyPeer(cb.data.ptr, 1, ca.data.ptr, 0, n),
                _sync_both_cupy, n)
        del ca, cb
    except Exception as e:  # noqa: BLE001
        print(f"cupy: skipped ({type(e).__name__}: {e})")
    cols = sorted({c for r in rows.values() for c in r}, key=lambda c: (c != "cuabi copy_peer", c))
    print("GPU 0 -> GPU 1 copy bandwidth (GB/s, median of 5)")
    print(f"{'size':>10}  " + "  ".join(f"{c:>20}" for c in cols))
    for n in sizes:
        print(f"{n // MiB:>6} MiB  " + "  ".join(f"{rows[n].get(c, float('nan')):>20.1f}"
                                                 for c in cols))
    return {str(n): r for n, r in rows.items()}


# ---- IPC latency: the child maps every buffer of the list it receives
#
# The child starts, loads its library and makes its context current, and
# says so before anything is timed (a new process's start and the driver's
# first initialisation are not IPC costs). Then, ROUNDS times: the parent
# notes the time and puts the list (pickling = export, in the queue's feeder
# thread), the child unpickles (= import: every buffer mapped) and touches
# every buffer, sends back the time per buffer, and unmaps them all.

ROUNDS = 5


# Each child closes what it imported before it answers (CUDA's rule:
# importers free first), timed apart: the close is not part of the IPC time,
# and no round starts while the child still closes the last one's buffers
# (before 2026-11-28 the next round's time included that close).

def _cuabi_child(q, out):
    cuabi.Device(0).set_current()
    out.put("ready")
    while True:
        t_sent = q.get()
        if t_sent is None:
            return
        bufs = q.get()                  # unpickling imports every buffer
        for b in bufs:
            b.ptr
        t = time.perf_counter()
        for b in bufs:
            b.close()
        out.put(((t - t_sent) / len(bufs) * 1e6, (time.perf_counter() - t) / len(bufs) * 1e6))


def _cuabi_batch_child(q, out):
    cuabi.Device(0).set_current()
    out.put("ready")
    while True:
        t_sent = q.get()
        if t_sent is None:
            return
        mr, blob = q.get()              # the pool (mapped once), the descriptors end to end
        bufs = cuabi.Buffer.from_ipc_descriptors(mr, blob)     # one C call
        for b in bufs:
            b.ptr
        t = time.perf_counter()
        for b in bufs:
            b.close()
        out.put(((t - t_sent) / len(bufs) * 1e6, (time.perf_counter() - t) / len(bufs) * 1e6))


def _cuda_core_child(q, out):
    from cuda.core import Device
    Device(0).set_current()
    out.put("ready")
    while True:
        t_sent = q.get()
        if t_sent is None:
            return
        mr, bufs = q.get()
        for b in bufs:
            int(b.handle)
        t = time.perf_counter()
        for b in bufs:
            b.close()
        out.put(((t - t_sent) / len(bufs) * 1e6, (time.perf_counter() - t) / len(bufs) * 1e6))


def _latency(child, payload):
    """Median over ROUNDS of the per-buffer time, in one warm child (a new
    process each call)."""
    ctx = mp.get_context("spawn")
    q, out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(q, out))
    p.start()
    try:
        if out.get(timeout=120) != "ready":
            raise RuntimeError("the child did not start")
        runs, closes = [], []
        for _ in range(ROUNDS):
            q.put(time.perf_counter())  # CLOCK_MONOTONIC: one clock for both
            q.put(payload() if callable(payload) else payload)
            r, c = out.get(timeout=60)  # a failed pickle (in the feeder thread) never arrives
            runs.append(r)
            closes.append(c)
        # the first round maps the memory for the first time; later rounds
        # map it again after the child unmapped it
        print(f"  {child.__name__}: per buffer, round 1 {runs[0]:.1f} us, rounds 2..{ROUNDS} "
              + " ".join(f"{r:.1f}" for r in runs[1:])
              + f"; the child's close {_median(closes):.1f} us (not counted)")
        return _median(runs)
    finally:
        q.put(None)
        p.join(60)


def ipc_latency(count=32, processes=5):
    res = {}
    dev = cuabi.Device(0)
    payloads = {}                       # made once per row, sent to each of its children

    def legacy():
        if "legacy" not in payloads:
            mr = cuabi.MemoryResource.ipc(dev)
            payloads["legacy"] = [cuabi.Buffer(MiB, mr) for _ in range(count)]
        return _latency(_cuabi_child, payloads["legacy"])

    def pool():
        if "pool" not in payloads:
            mr = cuabi.MemoryResource.ipc_pool(dev, max_size=256 * MiB)
            s = dev.create_stream()
            payloads["pool"] = [cuabi.Buffer(MiB, mr, stream=s) for _ in range(count)]
            s.synchronize()             # allocated before the child imports
        return _latency(_cuabi_child, payloads["pool"])

    def core():
        if "core" not in payloads:
            from cuda.core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions
            d = Device(0)
            d.set_current()
            cmr = DeviceMemoryResource(d, DeviceMemoryResourceOptions(ipc_enabled=True,
                                                                      max_size=256 * MiB))
            cs = d.create_stream()
            cbufs = [cmr.allocate(MiB, stream=cs) for _ in range(count)]  # 1.2: keyword
            cs.sync()
            payloads["core"] = (cmr, cbufs)
        return _latency(_cuda_core_child, payloads["core"])

    def batch():
        # cuabi's extra: the descriptors in one C call each way (a user's
        # explicit choice; the row above is the plain pickled list).
        if "batch" not in payloads:
            mr = cuabi.MemoryResource.ipc_pool(dev, max_size=256 * MiB)
            s = dev.create_stream()
            bufs = [cuabi.Buffer(MiB, mr, stream=s) for _ in range(count)]
            s.synchronize()
            payloads["batch"] = (mr, bufs)
        mr, bufs = payloads["batch"]
        # the export is timed too: made in the parent after the clock starts
        return _latency(_cuabi_batch_child,
                        lambda: (mr, b"".join(cuabi.Buffer.get_ipc_descriptors(bufs))))

    rows = [("cuabi legacy IPC", legacy), ("cuabi pool IPC", pool), ("cuda.core", core),
            ("cuabi pool IPC, batch API", batch)]
    per = {name: [] for name, _ in rows}
    failed = set()
    for i in range(processes):
        order = rows if i % 2 == 0 else rows[::-1]
        for name, fn in order:
            if name in failed:
                continue
            try:                        # a failing row is reported, the others still run
                per[name].append(fn())
            except Exception as e:  # noqa: BLE001
                failed.add(name)
                print(f"{name}: {'skipped' if name == 'cuda.core' else 'failed'} "
                      f"({type(e).__name__}: {e})")
    for name, vals in per.items():
        if vals:
            res[name] = _median(vals)
            print(f"  {name}: per buffer, median of each child: "
                  + " ".join(f"{v:.1f}" for v in vals) + f" -> median {res[name]:.1f} us")
    print(f"IPC: export + send + import per 1 MiB buffer, {count} in one message, warm child, "
          f"median of {ROUNDS} rounds per child, median of {processes} children (us): "
          + ", ".join(f"{k} {v:.1f}" for k, v in res.items()))
    if "cuabi pool IPC" in res and "cuda.core" in res:
        r = res["cuabi pool IPC"] / res["cuda.core"]
        print(f"  cuabi pool IPC / cuda.core: {r:.3f}x (issue 24 target <= 1: "
              f"{'met' if r <= 1 else 'NOT MET'})")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="sizes up to 64 MiB")
    ap.add_argument("--json")
    ap.add_argument("--ipc-processes", type=int, default=5,
                    help="fresh children per IPC row (medians over them)")
    a = ap.parse_args()
    try:
        n = cuabi.device_count()
    except cuabi.CuabiError as e:
        print(f"bench_peer.py: skipped ({e})")
        return
    report = {}
    sizes = [MiB << (2 * i) for i in range(4 if a.quick else 6)]
    if n >= 2:
        report["bandwidth_gbps"] = bandwidth(sizes)
    else:
        print(f"peer copy bandwidth: skipped ({n} GPU; needs 2)")
    if n >= 1:
        report["ipc_us_per_buffer"] = ipc_latency(processes=a.ipc_processes)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
