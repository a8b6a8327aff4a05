#!/usr/bin/env python3
"""The Python side of pool IPC per buffer (issue 24 item 4), without the
queue and the other process's scheduling that bench_peer.py's figure holds:

    CUABI_DRIVER_PATH=build/tests/fixtures/.libs/fake_cuda_graph.so \\
        python3 bench/bench_ipc_python.py [--count 32] [--rounds 30]

send: ForkingPickler.dumps of a list of COUNT buffers of one IPC pool (what
a multiprocessing queue's feeder thread does), per buffer: the first pickle
of new buffers (their descriptors exported) and a list pickled again (the
descriptors each buffer keeps). receive: pickle.loads of that message in a
warm child plus `.ptr` of each buffer (round 1 maps the pool: the fd server,
its authentication, the driver's import), and Buffer.from_ipc_descriptors
of the same descriptors (one C call). Medians over the rounds, µs per
buffer. With the fake driver (CUABI_DRIVER_PATH: the C tests' libcuda
stand-in, host memory) the child is forked; on a GPU it is spawned.
CUABI_PYTHON_PATH=build/bindings/python measures the compiled backend."""
import argparse
import multiprocessing as mp
import os
import pickle
import sys
import time
from multiprocessing.reduction import ForkingPickler

HERE = os.path.dirname(os.path.abspath(__file__))
# CUABI_PYTHON_PATH: a build tree's package (with the compiled cuabi._fast)
sys.path.insert(0, os.environ.get("CUABI_PYTHON_PATH") or os.path.join(HERE, "..", "bindings",
                                                                        "python"))
import cuabi  # noqa: E402

MiB = 1 << 20


def _median(v):
    v = sorted(v)
    return v[len(v) // 2]


def _child(conn, count):
    cuabi.Device(0).set_current()
    res = []
    while True:
        data = conn.recv_bytes()
        if not data:
            break
        blob = conn.recv_bytes()
        t0 = time.perf_counter()
        bufs = pickle.loads(data)
        for b in bufs:
            b.ptr
        t1 = time.perf_counter()
        for b in bufs:
            b.close()
        mr = cuabi._ipc_pool._mapped[blob[56:64]]       # the pool, mapped by the unpickling
        t2 = time.perf_counter()
        bufs = cuabi.Buffer.from_ipc_descriptors(mr, blob)
        for b in bufs:
            b.ptr
        t3 = time.perf_counter()
        for b in bufs:
            b.close()
        res.append(((t1 - t0) / count * 1e6, (t3 - t2) / count * 1e6))
    conn.send(res)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    try:
        dev = cuabi.Device(0)
    except cuabi.CuabiError as e:
        print(f"bench_ipc_python.py: skipped ({e})")
        return
    fake = bool(os.environ.get("CUABI_DRIVER_PATH"))
    size = 4096 if fake else MiB
    mr = cuabi.MemoryResource.ipc_pool(dev, max_size=256 * MiB)
    ForkingPickler.dumps([cuabi.Buffer(size, mr)])      # the fd server, lazy imports
    first, again, export = [], [], []
    msgs = []
    for _ in range(a.rounds):
        fresh = [cuabi.Buffer(size, mr) for _ in range(a.count)]
        t0 = time.perf_counter()
        ForkingPickler.dumps(fresh)
        first.append((time.perf_counter() - t0) / a.count * 1e6)
        fresh2 = [cuabi.Buffer(size, mr) for _ in range(a.count)]
        t0 = time.perf_counter()
        cuabi.Buffer.get_ipc_descriptors(fresh2)
        export.append((time.perf_counter() - t0) / a.count * 1e6)
        for b in fresh + fresh2:
            b.close()
    bufs = [cuabi.Buffer(size, mr) for _ in range(a.count)]
    blob = b"".join(cuabi.Buffer.get_ipc_descriptors(bufs))
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        msgs.append(bytes(ForkingPickler.dumps(bufs)))
        again.append((time.perf_counter() - t0) / a.count * 1e6)
    dev.synchronize()
    ctx = mp.get_context("fork" if fake else "spawn")
    p_conn, c_conn = ctx.Pipe()
    p = ctx.Process(target=_child, args=(c_conn, a.count))
    p.start()
    for m in msgs:
        p_conn.send_bytes(m)
        p_conn.send_bytes(blob)
    p_conn.send_bytes(b"")
    res = p_conn.recv()
    p.join(60)
    print(f"{'fake driver' if fake else 'GPU'}, {a.count} buffers a message, "
          f"{len(msgs[0])} bytes a pickled list, medians of {a.rounds} rounds, us per buffer:")
    print(f"  send: pickle a list of new buffers {_median(first):.2f}, the same list again "
          f"{_median(again):.2f}; Buffer.get_ipc_descriptors of new buffers {_median(export):.2f}")
    print(f"  receive: unpickle + ptr, round 1 (maps the pool) {res[0][0]:.2f}, rounds 2.. "
          f"{_median([r[0] for r in res[1:]]):.2f}; Buffer.from_ipc_descriptors + ptr "
          f"{_median([r[1] for r in res]):.2f}")


if __name__ == "__main__":
    main()
