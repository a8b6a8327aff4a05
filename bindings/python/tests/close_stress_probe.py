"""Run by test_close_threads.py in processes of their own (a crash must not
take pytest down): threads use cuabi objects while the main thread closes
them (docs/RELIABILITY.md, "Threat model: threads, finalizers and captures").
Prints {"errors": {exception class: count}, "calls": n} as JSON; every
error must be a ClosedHandleError.

    close_stress_probe.py buffers OBJECTS ROUNDS   host Buffers (the report of
        issue 29 item 7): view, numpy.from_dlpack(view), a write through it,
        a slice, ptr, size -- 4 threads x ROUNDS each, OBJECTS buffers in a row
    close_stress_probe.py views OBJECTS ROUNDS     the same on a View closed
        while threads slice it, export it and read it
    close_stress_probe.py launches OBJECTS ROUNDS  (a do-nothing driver:
        CUABI_DRIVER_PATH) launches, prepared launches, raw_launch, event
        records and stream synchronizations on a stream, a kernel, a
        prepared launch and an event closed while threads use them
"""
import collections
import json
import re
import sys
import threading

import numpy as np

import cuabi

THREADS = 4
errors = collections.Counter()
calls = [0]


def attempt(fn, *args):
    try:
        fn(*args)
        calls[0] += 1
    except cuabi.ClosedHandleError:
        errors["ClosedHandleError"] += 1
    except Exception as e:      # noqa: BLE001 -- counted and reported
        errors[f"{type(e).__name__}: {re.sub('0x[0-9a-f]+', '0x...', str(e))[:160]}"] += 1


def run(objects, rounds, make, work, close):
    for i in range(objects):
        things = make()
        busy = threading.Event()

        def worker():
            for _ in range(rounds):
                work(things)
                busy.set()
        ts = [threading.Thread(target=worker) for _ in range(THREADS)]
        for t in ts:
            t.start()
        if i % 2:                   # every other object: closed once work is under way
            busy.wait(10)
        close(things)
        for t in ts:
            t.join()


def buffers(objects, rounds):
    res = cuabi.MemoryResource.host()

    def work(buf):
        def one():
            v = buf.view("uint8")
            a = np.from_dlpack(v)
            a[:4] = 7
            s = v[1:3]
            buf.ptr
            buf.size
            del a, s, v
        attempt(one)
    run(objects, rounds, lambda: cuabi.Buffer(4096, res), work, lambda b: b.close())


def views(objects, rounds):
    res = cuabi.MemoryResource.host()

    def make():
        with cuabi.Buffer(4096, res) as b:
            return b.view("float32", (32, 32))

    def work(v):
        def one():
            a = np.from_dlpack(v)
            a[0, 0] = 1.0
            v[1:3, ::2].ptr
            v.shape, v.ptr
            cuabi.from_dlpack(v).close()
            del a
        attempt(one)
    run(objects, rounds, make, work, lambda v: v.close())


SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'


def launches(objects, rounds):
    dev = cuabi.Device(0)
    code = cuabi.Program(SRC).compile(arch="sm_90")
    cfg = cuabi.LaunchConfig(grid=2, block=32)
    buf = cuabi.Buffer(64, cuabi.MemoryResource.host())
    status = collections.Counter()

    def make():
        s = dev.create_stream(non_blocking=False)
        k = code.get_kernel("k")
        prep = cuabi.prepare(k, cfg, s, buf, 1, np.float32(2))
        ev = dev.create_event(timing=False)
        return s, k, prep, prep.raw_launch, ev

    def work(things):
        s, k, prep, raw, ev = things
        attempt(cuabi.launch, s, cfg, k, buf, 1, np.float32(2))
        attempt(prep)
        status[raw()] += 1
        attempt(ev.record, s)
        attempt(s.synchronize)

    def close(things):
        for t in things:
            if hasattr(t, "close"):
                t.close()
    run(objects, rounds, make, work, close)
    bad = {k: v for k, v in status.items() if k not in (0, 2)}    # 2: INVALID_HANDLE
    if bad:
        errors[f"raw_launch statuses {bad}"] += 1


def main():
    what, objects, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    {"buffers": buffers, "views": views, "launches": launches}[what](objects, rounds)
    json.dump({"errors": dict(errors), "calls": calls[0]}, sys.stdout)


if __name__ == "__main__":
    main()
