"""Does a group that mixes a collective with send/recv finish? (ON A TWO-GPU
MACHINE; Rust's gpu_nccl hung in such a group at n=1000, where the C and
Python tests group the reduce-scatter apart from the send/recv.)

    timeout 30 python3 scripts/diag_nccl_mixed_group.py N [apart|mixed|p2p-first]"""
import sys
import time

import numpy as np

import cuabi

n, how = int(sys.argv[1]), sys.argv[2]
cs = cuabi.Communicator.init_all([0, 1], timeout=60)
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
