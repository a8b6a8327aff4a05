"""Does a group that mixes a collective with send/recv finish? (ON A TWO-GPU
MACHINE; Rust's gpu_nccl hung in such a group at n=1000, where the C and
Python tests group the reduce-scatter apart from the send/recv.)

    timeout 30 python3 scripts/diag_nccl_mixed_group.py N [apart|mixed|p2p-first]
    timeout 60 python3 scripts/diag_nccl_mixed_group.py 0 rust-sequence

rust-sequence: Rust's init_all_every_collective step by step through Python, one
communicator pair for n = 1, 1000, 2^20 + 3: (A) all-reduce + all-gather + int64
product all-reduce in one group, (B) broadcast from rank 1, (C) reduce-scatter + send
+ recv in one group; each step printed before it runs (the Rust test hung in C's wait
at n = 1000 on two H200s, 2026-11-28; the single mixed group passes)."""
import sys
import time

import numpy as np

import cuabi

n, how = int(sys.argv[1]), sys.argv[2]
cs = cuabi.Communicator.init_all([0, 1], timeout=60)
if how == "rust-sequence":
    ss = [cuabi.Device(r).create_stream() for r in range(2)]
    mr = [cuabi.MemoryResource.device_default(cuabi.Device(r)) for r in range(2)]

    def put(r, a, dt=np.float32):
        return cuabi.Buffer.from_host(np.ascontiguousarray(a, dt), mr[r], stream=ss[r])

    def get(r, b, dt=np.float32):
        ss[r].sync()
        return np.frombuffer(b.to_bytes(), dt)

    def say(what):
        print(f"n={k} {what}", flush=True)

    for k in (1, 1000, (1 << 20) + 3):
        val = [((np.arange(k) % 13) + 1 + r).astype(np.float32) for r in range(2)]
        b = [put(r, val[r]) for r in range(2)]
        src = [put(r, val[r]) for r in range(2)]
        o = [put(r, np.zeros(k)) for r in range(2)]
        g = [put(r, np.zeros(2 * k)) for r in range(2)]
        ints = [put(r, np.full(k, r + 1), np.int64) for r in range(2)]
        f32 = lambda x, m: cuabi.View.of_buffer(x, "float32", (m,))  # noqa: E731
        say("A: all-reduce + all-gather + int64 product")
        with cuabi.nccl_group():
            for r in range(2):
                cs[r].all_reduce(f32(b[r], k), op="sum", stream=ss[r])
                cs[r].all_gather(f32(src[r], k), f32(g[r], 2 * k), stream=ss[r])
                cs[r].all_reduce(cuabi.View.of_buffer(ints[r], "int64", (k,)), op="prod",
                                 stream=ss[r])
        for r in range(2):
            assert (get(r, b[r]) == val[0] + val[1]).all() and (get(r, ints[r], np.int64) == 2).all()
        say("B: broadcast from rank 1")
        with cuabi.nccl_group():
            for r in range(2):
                cs[r].broadcast(f32(src[r], k), f32(o[r], k), root=1, stream=ss[r])
        for r in range(2):
            assert (get(r, o[r]) == val[1]).all()
        say("C: reduce-scatter + send + recv")
        with cuabi.nccl_group():
            for r in range(2):
                cs[r].reduce_scatter(f32(g[r], 2 * k), f32(o[r], k), op="max", stream=ss[r])
                cs[r].send(f32(src[r], k), 1 - r, stream=ss[r])
                cs[r].recv(f32(b[r], k), 1 - r, stream=ss[r])
        for r in range(2):
            assert (get(r, o[r]) == val[r]).all() and (get(r, b[r]) == val[1 - r]).all()
        for r in range(2):
            cs[r].synchronize(ss[r])
        say("done")
    sys.exit(0)
ss = [cuabi.Device(r).create_stream() for r in range(2)]
mr = [cuabi.MemoryResource.device_default(cuabi.Device(r)) for r in range(2)]


def up(r, a):
    return cuabi.Buffer.from_host(np.ascontiguousarray(a, np.float32), mr[r], stream=ss[r])


def vw(b, k):
    return cuabi.View.of_buffer(b, "float32", (k,))


big = [up(r, np.arange(2 * n) + r) for r in range(2)]
out = [up(r, np.zeros(n)) for r in range(2)]
src = [up(r, np.full(n, r + 1)) for r in range(2)]
rcv = [up(r, np.zeros(n)) for r in range(2)]


def rs(r):
    cs[r].reduce_scatter(vw(big[r], 2 * n), vw(out[r], n), op="max", stream=ss[r])


def p2p(r):
    cs[r].send(vw(src[r], n), 1 - r, stream=ss[r])
    cs[r].recv(vw(rcv[r], n), 1 - r, stream=ss[r])


t0 = time.perf_counter()
if how == "apart":
    with cuabi.nccl_group():
        for r in range(2):
            rs(r)
    with cuabi.nccl_group():
        for r in range(2):
            p2p(r)
else:
    with cuabi.nccl_group():
        for r in range(2):
            if how == "p2p-first":
                p2p(r)
                rs(r)
            else:
                rs(r)
                p2p(r)
for r in range(2):
    ss[r].sync()
got = [np.frombuffer(b.to_bytes(), np.float32) for b in rcv]
assert (got[0] == 2).all() and (got[1] == 1).all(), (got[0][:4], got[1][:4])
print(f"n={n} {how}: ok in {(time.perf_counter() - t0) * 1e3:.1f} ms", flush=True)
for c in cs:
    c.close()
