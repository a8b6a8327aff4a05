#!/usr/bin/env python3
"""Python overheads of cuabi beside its peers, and the targets of issue 12.

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python \\
        python3 bench/bench_python.py --processes 5 --raw-cmd bench/bench_launch \\
        [--rounds 7] [--calls 20000] [--import-runs 21] [--json out.json]

Every case runs in one process, cuabi and the peers (cuda.core, CuPy, torch)
interleaved: each round times every case once (CALLS calls), and a process
reports the median over its rounds. --processes N starts N such processes
one after the other and reports, per case, each process's figure and their
median, which the targets are judged on:

  plain cuabi.launch        <= cuda.core launch() with the same arguments
  prepared launch           <= 1.15 x raw C cuLaunchKernel (bench_launch, run
                               once per process by --raw-cmd, or --raw-us)
  cuabi.from_dlpack(x)      <= cuda.core StridedMemoryView.from_dlpack(x) for
                               a numpy array, a torch tensor and a CuPy array,
                               and for a torch tensor with a stream (s, not
                               torch's: its work ordered before s)
  import cuabi              <= 40 ms over python -c pass (bench_import.py)

The DLPack C exchange API is measured both ways against __dlpack__ (a
capsule) and cuda.core: cuabi.from_dlpack of a torch tensor (torch's table)
and torch.from_dlpack of a cuabi View (cuabi's table; the report says
whether torch called it). Same empty kernel k(float*, int, float) as the
figures in docs/PERFORMANCE.md; host microseconds per call. A library that
is missing is a row that says so, never a crash. Without a GPU only the
host-memory rows run (set CUABI_DRIVER_PATH=bench/.libs/fake_libcuda.so to
time cuabi's launches against a do-nothing driver).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'
HERE = os.path.dirname(os.path.abspath(__file__))

# (row, numerator, denominator, limit): the targets, on the medians.
TARGETS = [
    ("plain launch vs cuda.core", "cuabi launch()", "cuda.core launch()", 1.0),
    ("prepared launch vs raw C", "cuabi prepared launch", "raw C cuLaunchKernel", 1.15),
    ("from_dlpack(numpy) vs cuda.core", "cuabi.from_dlpack(numpy)",
     "cuda.core SMV.from_dlpack(numpy)", 1.0),
    ("from_dlpack(torch) vs cuda.core", "cuabi.from_dlpack(torch)",
     "cuda.core SMV.from_dlpack(torch)", 1.0),
    ("from_dlpack(cupy) vs cuda.core", "cuabi.from_dlpack(cupy)",
     "cuda.core SMV.from_dlpack(cupy)", 1.0),
    ("from_dlpack(torch, stream) vs cuda.core", "cuabi.from_dlpack(torch, stream=s)",
     "cuda.core SMV.from_dlpack(torch, stream_ptr=s)", 1.0),
    ("Stream.wait(stream) vs cuda.core", "cuabi Stream.wait(stream)",
     "cuda.core Stream.wait(stream)", 1.0),
]


# ------------------------------------------------------------ one process

class Cases:
    """name -> (callable, sync): what one process times."""

    def __init__(self):
        self.cases = {}
        self.notes = {}         # name -> why it is missing
        self.info = {}

    def add(self, name, fn, sync=None):
        self.cases[name] = (fn, sync or (lambda: None))

    def group(self, label, setup):
        try:
            setup(self)
        except Exception as e:   # a missing library or GPU: a note, not a crash
            self.notes[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"


def cuabi_cases(c):
    import numpy as np
    import cuabi
    c.info["cuabi"] = f"{cuabi.__version__} backend={cuabi.backend} ({cuabi.backend_note})"
    arr = np.zeros(16, np.float32)
    c.add("cuabi.from_dlpack(numpy)", lambda: cuabi.from_dlpack(arr))
    dev = cuabi.Device(0)
    c.info["device"] = dev.name
    s = dev.create_stream(non_blocking=True)
    k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
    buf = cuabi.Buffer(4096, stream=s)
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    a, b = np.int32(5), np.float32(1.0)
    launch = cuabi.launch
    c.add("cuabi launch()", lambda: launch(s, cfg, k, buf, a, b), s.sync)
    prep = cuabi.prepare(k, cfg, s, buf, a, b)
    c.add("cuabi prepared launch", prep, s.sync)
    c.add("cuabi prepared raw_launch (status)", prep.raw_launch, s.sync)
    try:
        launch(s, cfg, k, buf, 5, 1.0)
        c.add("cuabi launch() Python int/float", lambda: launch(s, cfg, k, buf, 5, 1.0), s.sync)
    except Exception as e:     # raw slots may refuse a Python float (docs/launch.md)
        c.notes["cuabi launch() Python int/float"] = f"{type(e).__name__}: {str(e)[:80]}"
    s2 = dev.create_stream(non_blocking=True)
    c.add("cuabi Stream.wait(stream)", lambda: s.wait(s2), s.sync)
    c.keep = (s, k, buf, prep, s2)


def cuda_core_cases(c):
    import numpy as np
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    import cuda.core as cc
    c.info["cuda.core"] = getattr(cc, "__version__", "?")
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        from cuda.core.experimental.utils import StridedMemoryView
    smv = StridedMemoryView.from_dlpack
    arr = np.zeros(16, np.float32)
    c.add("cuda.core SMV.from_dlpack(numpy)", lambda: smv(arr, stream_ptr=-1))
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    ker = Program(SRC, code_type="c++",
                  options=ProgramOptions(arch="sm_" + dev.arch)).compile("cubin").get_kernel("k")
    cfg = LaunchConfig(grid=1, block=32)
    buf = dev.allocate(4096, stream=s)
    a, b = np.int32(5), np.float32(1.0)
    c.add("cuda.core launch()", lambda: launch(s, cfg, ker, buf, a, b), s.sync)
    s2 = dev.create_stream()
    c.add("cuda.core Stream.wait(stream)", lambda: s.wait(s2), s.sync)
    c.keep_cc = (s, ker, buf, s2)


def torch_cases(c):
    import torch
    import cuabi
    from cuabi import _lib
    c.info["torch"] = torch.__version__
    t = torch.zeros(16, device="cuda")
    c.add("cuabi.from_dlpack(torch)", lambda: cuabi.from_dlpack(t))
    # With a stream of the consumer's (not torch's current one): torch's
    # pending work ordered before it (an event on torch's stream, waited on s).
    s = cuabi.Device(0).create_stream()
    c.add("cuabi.from_dlpack(torch, stream=s)", lambda: cuabi.from_dlpack(t, stream=s))
    c.add("cuabi.from_dlpack(torch capsule: __dlpack__)",
          lambda: cuabi.from_dlpack(t.__dlpack__(max_version=(1, 0))))
    view = cuabi.from_dlpack(t)
    view.handle                                      # a C view, as a consumer sees it
    before = _lib.fast.exchange_calls() if _lib.fast is not None else None
    torch.from_dlpack(view)
    if before is not None:
        after = _lib.fast.exchange_calls()
        used = [k for k in after if after[k] != before[k]]
        c.info["torch.from_dlpack(View) used cuabi's exchange table"] = ", ".join(used) or "no"
    c.add("torch.from_dlpack(cuabi View)", lambda: torch.from_dlpack(view))
    c.add("torch.from_dlpack(cuabi View capsule: __dlpack__)",
          lambda: torch.utils.dlpack.from_dlpack(view.__dlpack__(max_version=(1, 0))))
    try:
        try:
            from cuda.core.utils import StridedMemoryView
        except ImportError:
            from cuda.core.experimental.utils import StridedMemoryView
        c.add("cuda.core SMV.from_dlpack(torch)",
              lambda: StridedMemoryView.from_dlpack(t, stream_ptr=-1))
        sp = s.raw       # the same kind of stream, given as cuda.core takes it
        c.add("cuda.core SMV.from_dlpack(torch, stream_ptr=s)",
              lambda: StridedMemoryView.from_dlpack(t, stream_ptr=sp))
        smv = StridedMemoryView.from_dlpack(t, stream_ptr=-1)
        torch.from_dlpack(smv)
        c.add("torch.from_dlpack(cuda.core SMV)", lambda: torch.from_dlpack(smv))
    except Exception as e:
        c.notes["cuda.core with torch"] = f"{type(e).__name__}: {str(e)[:80]}"
    c.keep_torch = (t, view, s)


def cupy_cases(c):
    import cupy as cp
    import numpy as np
    import cuabi
    c.info["CuPy"] = cp.__version__
    x = cp.zeros(16, cp.float32)
    c.add("cuabi.from_dlpack(cupy)", lambda: cuabi.from_dlpack(x))
    try:
        try:
            from cuda.core.utils import StridedMemoryView
        except ImportError:
            from cuda.core.experimental.utils import StridedMemoryView
        c.add("cuda.core SMV.from_dlpack(cupy)",
              lambda: StridedMemoryView.from_dlpack(x, stream_ptr=-1))
    except ImportError as e:
        c.notes["cuda.core with CuPy"] = str(e)
    k = cp.RawKernel(SRC, "k")
    a = cp.zeros(1024, dtype=cp.float32)
    n, f = np.int32(5), np.float32(1.0)
    c.add("CuPy RawKernel()", lambda: k((1,), (32,), (a, n, f)),
          cp.cuda.runtime.deviceSynchronize)
    c.keep_cupy = (x, k, a)


def time_case(fn, sync, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def raw_c(cmd):
    """bench_launch's raw cuLaunchKernel figure (us): its median block, as
    the Python rows are medians of rounds (the best block would flatter
    raw C), or None."""
    try:
        out = subprocess.run([cmd, "2000", "61"], capture_output=True, text=True,
                             timeout=300).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"raw cuLaunchKernel\s+[\d.]+\s+([\d.]+)", out)
    return float(m.group(1)) if m else None


def worker(opts):
    c = Cases()
    for label, setup in (("cuabi", cuabi_cases), ("cuda.core", cuda_core_cases),
                         ("torch", torch_cases), ("CuPy", cupy_cases)):
        c.group(label, setup)
    for fn, sync in c.cases.values():            # warm up
        for _ in range(min(opts.calls, 1000)):
            fn()
        sync()
    rounds = {name: [] for name in c.cases}
    for _ in range(opts.rounds):                 # interleaved: every case each round
        for name, (fn, sync) in c.cases.items():
            rounds[name].append(time_case(fn, sync, opts.calls))
    result = {name: {"median": statistics.median(v), "best": min(v), "rounds": v}
              for name, v in rounds.items()}
    raw = opts.raw_us if opts.raw_us else (raw_c(opts.raw_cmd) if opts.raw_cmd else None)
    if raw:
        result["raw C cuLaunchKernel"] = {"median": raw, "best": raw, "rounds": [raw]}
    return {"cases": result, "notes": c.notes, "info": c.info}


# ------------------------------------------------------------ the report

def import_time(runs):
    sys.path.insert(0, HERE)
    import bench_import
    env = dict(os.environ, PYTHONPYCACHEPREFIX=tempfile.mkdtemp(prefix="cuabi-pyc-"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return bench_import.measure(env, runs)["difference_ms"]


def report(procs, imp, opts):
    names = []
    for p in procs:
        names += [n for n in p["cases"] if n not in names]
    med = {}
    width = max([len(n) for n in names] + [30])
    print(f"\n{'case (us per call)':<{width}}  " + "  ".join(f"{'P' + str(i + 1):>7}"
                                                          for i in range(len(procs)))
          + "   median")
    for n in names:
        vals = [p["cases"][n]["median"] for p in procs if n in p["cases"]]
        med[n] = statistics.median(vals)
        cells = [f"{p['cases'][n]['median']:7.3f}" if n in p["cases"] else "    n/a"
                 for p in procs]
        print(f"{n:<{width}}  " + "  ".join(cells) + f"  {med[n]:7.3f}")
    if imp is not None:
        print(f"{'import cuabi (ms over python -c pass)':<{width}}  {imp:7.1f}")
    print("\ntargets (on the medians):")
    verdicts = {}
    for label, num, den, limit in TARGETS:
        if num in med and den in med:
            r = med[num] / med[den]
            per = [p["cases"][num]["median"] / p["cases"][den]["median"] for p in procs
                   if num in p["cases"] and den in p["cases"]]
            ok = r <= limit
            verdicts[label] = {"ratio": r, "limit": limit, "met": ok, "per_process": per}
            print(f"  {label:<34} {r:6.3f}x (<= {limit}): {'met' if ok else 'NOT met'}   "
                  f"per process {' '.join(f'{x:.3f}' for x in per)}")
        else:
            print(f"  {label:<34} n/a ({num if num not in med else den} not measured)")
    if imp is not None:
        verdicts["import cuabi"] = {"ms": imp, "limit": 40, "met": imp <= 40}
        print(f"  {'import cuabi':<34} {imp:6.1f} ms (<= 40): "
              f"{'met' if imp <= 40 else 'NOT met'}")
    for p in procs[:1]:
        for k, v in p["info"].items():
            print(f"  {k}: {v}")
    notes = {k: v for p in procs for k, v in p["notes"].items()}
    for k, v in notes.items():
        print(f"  not measured: {k}: {v}")
    return {"median": med, "targets": verdicts, "import_ms": imp, "processes": procs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=1, help="processes, one after another")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per process")
    ap.add_argument("--calls", type=int, default=int(os.environ.get("N", "20000")),
                    help="calls per case and round")
    ap.add_argument("--raw-us", type=float, help="the raw C launch figure, given")
    ap.add_argument("--raw-cmd", help="bench_launch, run once per process for the raw C figure")
    ap.add_argument("--import-runs", type=int, default=0,
                    help="also measure import cuabi (bench_import.py, this many pairs)")
    ap.add_argument("--json", help="write everything measured here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.worker:                       # a child of --processes: results to a file
        with open(opts.worker, "w") as f:
            json.dump(worker(opts), f)
        return 0
    procs = []
    if opts.processes <= 1:
        procs.append(worker(opts))
    else:
        for i in range(opts.processes):
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
                path = tmp.name
            args = [sys.executable, os.path.abspath(__file__), "--worker", path,
                    "--rounds", str(opts.rounds), "--calls", str(opts.calls)]
            args += ["--raw-us", str(opts.raw_us)] if opts.raw_us else []
            args += ["--raw-cmd", opts.raw_cmd] if opts.raw_cmd else []
            r = subprocess.run(args)
            if r.returncode == 0:
                with open(path) as f:
                    procs.append(json.load(f))
                print(f"process {i + 1}/{opts.processes} done", flush=True)
            else:
                print(f"process {i + 1} failed (exit {r.returncode})", flush=True)
            os.unlink(path)
    if not procs:
        return 1
    imp = import_time(opts.import_runs) if opts.import_runs else None
    out = report(procs, imp, opts)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
