"""Does a process stay usable for NCCL after a rank that never arrives timed out?
(ON A TWO-GPU MACHINE; Rust's gpu_nccl hung after that test ran first in-process.)

    NCCL_DEBUG=WARN timeout 120 python3 scripts/diag_nccl_after_timeout.py [--order timeout-first|all-first]

Times each step: an init of rank 0 of 2 whose peer never comes (timeout 3 s),
then init_all over GPUs 0 and 1 and one all-reduce (or the other way round)."""
import argparse
import sys
import time

import numpy as np

import cuabi


def step(name, fn):
    t0 = time.perf_counter()
    print(f"{name} ...", flush=True)
    try:
        r = fn()
        print(f"{name}: ok in {time.perf_counter() - t0:.2f} s", flush=True)
        return r
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"{name}: {type(e).__name__} in {time.perf_counter() - t0:.2f} s: {e}", flush=True)
        return None


def lonely():
    cuabi.Communicator(2, 0, cuabi.get_unique_id(), device=0, timeout=3)


def all_reduce():
    cs = cuabi.Communicator.init_all([0, 1], timeout=60)
    ss = [cuabi.Device(r).create_stream() for r in range(2)]
    bs = [cuabi.Buffer.from_host(np.full(1000, r + 1, np.float32),
                                 cuabi.MemoryResource.device_default(cuabi.Device(r)), stream=ss[r])
          for r in range(2)]
    with cuabi.nccl_group():
        for r in range(2):
            cs[r].all_reduce(cuabi.View.of_buffer(bs[r], "float32", (1000,)), stream=ss[r])
    for r in range(2):
        ss[r].sync()
        v = np.frombuffer(bs[r].to_bytes(), np.float32)
        assert (v == 3).all(), v[:4]
    for c in cs:
        c.close()


ap = argparse.ArgumentParser()
ap.add_argument("--order", default="timeout-first")
order = ap.parse_args().order
steps = [("lonely rank (timeout 3 s)", lonely), ("init_all + all_reduce", all_reduce)]
if order == "all-first":
    steps = steps[::-1] + steps[1:]
for name, fn in steps:
    step(name, fn)
print("done", flush=True)
sys.stdout.flush()
