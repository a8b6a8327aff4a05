#!/usr/bin/env python3
"""Python launch and from_dlpack overhead: cuabi against its peers, one table.

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python python3 bench/bench_python.py \
        [--raw-us US]

--raw-us: bench_launch's "raw cuLaunchKernel" figure from the same machine;
the table then also gives each launch row as a ratio to it.

Same empty kernel as the peer figures in docs/PERFORMANCE.md
(k(float*, int, float)); host time per call, best of 3 runs of N calls.
Rows whose library is missing (or whose cuabi module has not landed) say so.
"""
import argparse
import os
import sys
import time

N = int(os.environ.get("N", "100000"))
SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'
rows = []


def per_call(fn, sync=lambda: None, n=N):
    for _ in range(min(n, 1000)):
        fn()
    sync()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def row(name, f):
    try:
        rows.append((name, f"{f():.3f}"))
    except Exception as e:  # a missing peer or module is a row, not a crash
        rows.append((name, f"n/a ({type(e).__name__}: {str(e)[:60]})"))


def cuabi_rows():
    import numpy as np
    import cuabi
    print(f"cuabi backend: {getattr(cuabi, 'backend', '?')} "
          f"({getattr(cuabi, 'backend_note', '')})")
    tag = f" [{getattr(cuabi, 'backend', '?')}]"
    row("cuabi.from_dlpack(numpy)", lambda: per_call(
        lambda a=np.zeros(16, np.float32): cuabi.from_dlpack(a), n=N // 5))
    row("cuabi ArgPack.set(ptr, i32, f32) (pack only)", lambda: per_call(
        lambda p=cuabi.ArgPack("ptr, i32, f32"): p.set(0x1000, np.int32(5), np.float32(1.0))))
    try:
        dev = cuabi.Device(0)
    except cuabi.CuabiError as e:
        rows.append(("cuabi launch", f"n/a (no GPU: {e.status_name})"))
        return
    s = dev.create_stream(non_blocking=True)
    k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
    buf = cuabi.Buffer(4096, stream=s)
    if not hasattr(cuabi, "launch"):
        rows.append(("cuabi launch", "n/a (launch module not in this build)"))
        return
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    a, b = np.int32(5), np.float32(1.0)
    row("cuabi launch() plain" + tag, lambda: per_call(lambda: cuabi.launch(s, cfg, k, buf, a, b), s.sync))
    prep = cuabi.prepare(k, cfg, s, buf, a, b)
    row("cuabi prepared launch" + tag, lambda: per_call(prep, s.sync))
    if hasattr(prep, "raw_launch"):  # the foreign function bound to the handle (status out)
        row("cuabi prepared raw_launch (status)" + tag, lambda: per_call(prep.raw_launch, s.sync))
    try:
        import cupy as cp
        x = cp.zeros(16, cp.float32)
        row("cuabi.from_dlpack(cupy)", lambda: per_call(lambda: cuabi.from_dlpack(x), n=N // 5))
    except ImportError:
        pass
    try:
        import torch
        t = torch.zeros(16, device="cuda")
        row("cuabi.from_dlpack(torch)", lambda: per_call(lambda: cuabi.from_dlpack(t), n=N // 5))
    except ImportError:
        pass


def cuda_core_rows():
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    import numpy as np
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    ker = Program(SRC, code_type="c++",
                  options=ProgramOptions(arch="sm_" + dev.arch)).compile("cubin").get_kernel("k")
    cfg = LaunchConfig(grid=1, block=32)
    buf = dev.allocate(4096, stream=s)
    a, b = np.int32(5), np.float32(1.0)
    row("cuda.core launch()", lambda: per_call(lambda: launch(s, cfg, ker, buf, a, b), s.sync))
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        return
    arr = np.zeros(16, np.float32)
    # The direct constructor is deprecated (DeprecationWarning) in cuda.core 1.x.
    make = getattr(StridedMemoryView, "from_dlpack", None)
    if make is not None:
        row("cuda.core StridedMemoryView.from_dlpack(numpy)",
            lambda: per_call(lambda: make(arr, stream_ptr=-1), n=N // 5))
    else:
        row("cuda.core StridedMemoryView(numpy)",
            lambda: per_call(lambda: StridedMemoryView(arr, stream_ptr=-1), n=N // 5))


def cupy_rows():
    import cupy as cp
    import numpy as np
    k = cp.RawKernel(SRC, "k")
    a = cp.zeros(1024, dtype=cp.float32)
    n, f = np.int32(5), np.float32(1.0)
    row("CuPy RawKernel()", lambda: per_call(lambda: k((1,), (32,), (a, n, f)),
                                             cp.cuda.runtime.deviceSynchronize))


def _is_launch_row(name):
    return "launch" in name.lower() or "RawKernel" in name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw-us", type=float, default=None,
                    help="bench_launch's raw cuLaunchKernel us/launch on this machine")
    opts = ap.parse_args(argv)
    row_start = len(rows)
    for name, fn in (("cuabi", cuabi_rows), ("cuda.core", cuda_core_rows), ("CuPy", cupy_rows)):
        try:
            fn()
        except Exception as e:
            rows.append((name, f"n/a ({type(e).__name__}: {str(e)[:60]})"))
    width = max(len(r[0]) for r in rows[row_start:])
    raw = opts.raw_us
    if raw:
        rows.insert(row_start, ("raw cuLaunchKernel (bench_launch, C)", f"{raw:.3f}"))
        width = max(width, len(rows[row_start][0]))
    print(f"{'path':<{width}}  us per call" + ("  x raw C launch" if raw else ""))
    print("-" * width + "  -----------" + ("  --------------" if raw else ""))
    for name, val in rows:
        ratio = ""
        if raw and (_is_launch_row(name) or name.startswith("raw ")):
            try:
                ratio = f"  {float(val) / raw:.3f}x"
            except ValueError:
                pass
        print(f"{name:<{width}}  {val:>11}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
