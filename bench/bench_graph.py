#!/usr/bin/env python3
"""Graph replay from Python: 100 launches of the empty kernel
k(float*, int, float), replayed as one graph, beside cuda.core's
GraphBuilder graph of the same launches and 100 cuabi.launch() calls.

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python python3 bench/bench_graph.py \
        [--raw-us US] [--replays 20] [--rounds 9] [--processes 5] [--again 5]

Host time of the calls per kernel (each round submits REPLAYS x 100 kernels,
then waits; best round), and the cost of making each graph (capture,
instantiate, first launch to completion; then a second graph made the same
way: capture and instantiate again). cuabi's capture is the process's
first, as a program's would be: it includes importing cuabi._graph, which
is printed apart, as are the first captured launch of the kernel launched
before the capture, that of a kernel never launched before (its first use:
description, packs, loading on the device) and the median of the others.
cuabi's modules are imported from bytecode compiled first into a private
cache, as an installed package has it (bench_import.py and bench_python.py
do the same): without it the first capture timed compiling cuabi/_graph.py
(about 4.5 ms on the development machine), which an installation never
does. --raw-us: bench_graph's (or bench_launch's) "raw cuLaunchKernel"
per-launch figure from the same machine, for ratios. Target: cuabi's replay
from Python <= cuda.core's.

Issue 24 (item 3): each library runs in processes of its own, --processes
of each (default 5, alternating), so that each one's first capture and
instantiate are its process's first, as in a program; each process then
makes --again more graphs the same way (the median of those is "again").
Printed: every process's figures, the medians over processes, and cuabi /
cuda.core for capture and instantiate, first and again, with the targets
(<= 1), and the lower quartiles' ratios (on a VM whose processes run either
fast or ~2x slow, the medians flip with how many land in each mode), the
paired ratios and the machine-normalized ones: beside each graph made again,
each process times the driver's own capture and instantiate of the same
graph through ctypes (MachineYardstick); the library's figures over that
yardstick divide out the stretch of time, fast or slow, they ran in. The
first capture is given with and without importing cuabi._graph (cuda.core imports its graph modules with the package).
--processes 1 runs both in this process, as before. Both libraries' processes do
the same work in the same order (a graph of a kernel never launched captured and
closed before the first instantiate; 100 launches timed before the graphs made
again), so that "again" finds like processes; *_faults are the page faults
the first capture and instantiate took, and the median of those the again
instantiates took (the driver's host
allocations: a process whose heap must grow pays them); *_heap_kb, *_mmap_kb
and *_maps_kb what the heap grew, what glibc mapped apart (over its mmap
threshold) and the new mappings' size in those steps (--maps lists them).
"""
import argparse
import compileall
import contextlib
import ctypes
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'
KERNELS = 100
NOTES = []      # lines printed after the table


@contextlib.contextmanager
def cuabi_bytecode():
    """Inside: imports read bytecode from a private cache, where cuabi's
    modules are compiled first (PYTHONDONTWRITEBYTECODE, if set, is ignored
    for it). Only around cuabi's rows: the peers' imports keep their own."""
    with tempfile.TemporaryDirectory(prefix="cuabi-pyc-") as cache:
        sys.pycache_prefix = cache
        try:
            spec = importlib.util.find_spec("cuabi")        # found, not imported
            for d in spec.submodule_search_locations or []:
                compileall.compile_dir(d, quiet=1)
            yield
        finally:
            sys.pycache_prefix = None


def best_round(submit, sync, replays, rounds):
    """Host microseconds per kernel of the best round (round 0 warms up)."""
    best = float("inf")
    for r in range(rounds + 1):
        sync()
        t0 = time.perf_counter()
        for _ in range(replays):
            submit()
        t1 = time.perf_counter()
        sync()
        if r:
            best = min(best, (t1 - t0) / (replays * KERNELS) * 1e6)
    return best


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e6


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]


def _mallinfo():
    try:
        f = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    f.restype = _Mallinfo2
    return f()


def heap_free_kb():
    """glibc's free bytes in the main heap, KiB (where a malloc finds memory
    without growing the heap); nan where the C library has no mallinfo2."""
    m = _mallinfo()
    return m.fordblks / 1024 if m else float("nan")


def memory_state():
    """What a step's page faults may come from: the heap's size (arena), the
    bytes glibc mapped apart (hblkhd: allocations over its mmap threshold)
    and the process's mappings (the driver's own mmaps)."""
    m = _mallinfo()
    try:
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        maps = []
    return (m.arena if m else 0, m.hblkhd if m else 0, set(maps))


def memory_growth(before, after):
    """KiB the heap grew, KiB glibc mapped apart, and the new mappings
    ('start-end perms path' lines) between two memory_state()s."""
    new = sorted(after[2] - before[2])
    return ((after[0] - before[0]) / 1024, (after[1] - before[1]) / 1024, new)


def rollup_kb(field):
    """A /proc/self/smaps_rollup figure (Rss, AnonHugePages), KiB; nan where absent."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            for ln in f:
                if ln.startswith(field + ":"):
                    return float(ln.split()[1])
    except OSError:
        pass
    return float("nan")


def layout():
    """Where the process's parts lie (ASLR places them anew in each process):
    the first address of the heap, the stack, the python executable and some
    libraries, from /proc/self/maps. Kept by --dump: the seventh session
    suspected the placement of deciding the VM's fast and slow processes; the
    eighth found the modes in stretches of time, in raw-driver C programs too,
    with the same placement fast in one run and slow in the next
    (scripts/probe_layout_mode.sh)."""
    want = {"[heap]": "heap", "[stack]": "stack", "libcuda.so": "libcuda",
            "libc.so": "libc", "libpython": "libpython", "libcuabi.so": "libcuabi",
            "python3": "python"}
    out = {}
    try:
        with open("/proc/self/maps") as f:
            for ln in f:
                parts = ln.split()
                path = parts[5] if len(parts) > 5 else ""
                for key, name in want.items():
                    if name not in out and (path == key or key in os.path.basename(path)):
                        out[name] = int(parts[0].split("-")[0], 16)
        with open("/proc/self/stat") as f:    # field 28: the stack's start, to the byte
            out["startstack"] = int(f.read().rsplit(")", 1)[1].split()[25])
    except (OSError, IndexError, ValueError):
        pass
    return out


def mapping_kb(lines):
    total = 0
    for ln in lines:
        a, b = ln.split()[0].split("-")
        total += int(b, 16) - int(a, 16)
    return total / 1024


def measured(fn, label, into):
    """fn() timed, with the page faults and memory growth it caused stored in
    into as <label>_faults, _heap_kb, _mmap_kb, _maps_kb, _maps (new mapping lines)."""
    before = memory_state()
    f0 = faults()
    out, us = timed(fn)
    into[label + "_faults"] = faults() - f0
    heap, mmapped, new = memory_growth(before, memory_state())
    into[label + "_heap_kb"], into[label + "_mmap_kb"] = heap, mmapped
    into[label + "_maps_kb"], into[label + "_maps"] = mapping_kb(new), new
    return out, us


def faults():
    """The process's page faults so far (minor + major): the driver's instantiate
    allocates host memory, and a process whose heap must grow for it pays the faults."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_minflt + ru.ru_majflt


class _InstParams(ctypes.Structure):     # CUDA_GRAPH_INSTANTIATE_PARAMS
    _fields_ = [("flags", ctypes.c_uint64), ("hUploadStream", ctypes.c_void_p),
                ("hErrNode_out", ctypes.c_void_p), ("result_out", ctypes.c_int)]


class MachineYardstick:
    """The driver's own capture and instantiate of the same 100-launch graph,
    made through ctypes with nothing of either library, one round right after
    each graph the library made again. The H200 VM runs in fast and ~2x slow
    stretches of time (seconds), raw-driver C programs as much as Python ones
    (scripts/probe_layout_mode.sh, docs/PERFORMANCE.md eighth session): a
    library's figure over the yardstick taken beside it compares the libraries
    with the machine's state divided out. function: the kernel's CUfunction
    (the primary context of device 0 is made current here: cuabi keeps none
    current)."""

    def __init__(self, function, dptr):
        self.cu = cu = ctypes.CDLL("libcuda.so.1")
        ctx, self.st = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
        self.ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.ok(cu.cuStreamCreate(ctypes.byref(self.st), 1), "cuStreamCreate")
        self.vals = (ctypes.c_void_p(dptr), ctypes.c_int(5), ctypes.c_float(1.0))
        self.argv = (ctypes.c_void_p * 3)(*(ctypes.addressof(x) for x in self.vals))
        self.fn = ctypes.c_void_p(function)
        self.caps, self.insts = [], []

    @staticmethod
    def ok(r, what):
        if r:
            raise RuntimeError(f"{what}: CUresult {r}")

    def once(self):
        """One raw capture and instantiate (us each), kept for the medians."""
        cu, ok, st = self.cu, self.ok, self.st
        g, e, ip = ctypes.c_void_p(), ctypes.c_void_p(), _InstParams()
        t0 = time.perf_counter()
        ok(cu.cuStreamBeginCapture_v2(st, 0), "cuStreamBeginCapture")
        for _ in range(KERNELS):
            ok(cu.cuLaunchKernel(self.fn, 1, 1, 1, 32, 1, 1, 0, st, self.argv, None),
               "cuLaunchKernel")
        ok(cu.cuStreamEndCapture(st, ctypes.byref(g)), "cuStreamEndCapture")
        t1 = time.perf_counter()
        ok(cu.cuGraphInstantiateWithParams(ctypes.byref(e), g, ctypes.byref(ip)),
           "cuGraphInstantiateWithParams")
        t2 = time.perf_counter()
        cu.cuGraphExecDestroy(e)
        cu.cuGraphDestroy(g)
        self.caps.append((t1 - t0) * 1e6)
        self.insts.append((t2 - t1) * 1e6)
        return self.caps[-1], self.insts[-1]

    def figures(self, caps, insts):
        """The yardstick's medians, and the library's again-figures over the
        yardstick round taken right after each (medians of the ratios)."""
        return dict(yard_capture=_med(self.caps), yard_instantiate=_med(self.insts),
                    capture_again_machine=_med([a / b for a, b in zip(caps, self.caps)]),
                    instantiate_again_machine=_med([a / b for a, b in zip(insts, self.insts)]))


def cuda_core_function(kernel):
    """cuda.core's Kernel's CUfunction in the current context (its handle is a CUkernel)."""
    cu = ctypes.CDLL("libcuda.so.1")
    f = ctypes.c_void_p()
    r = cu.cuKernelGetFunction(ctypes.byref(f), ctypes.c_void_p(int(kernel.handle)))
    if r:
        raise RuntimeError(f"cuKernelGetFunction: CUresult {r}")
    return f.value


def cuabi_rows(args, rows):
    t_start = time.perf_counter()
    import cuabi
    dev = cuabi.Device(0)
    s = dev.create_stream(non_blocking=True)
    k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
    buf = cuabi.Buffer(4096, stream=s)
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    a, b = np.int32(5), np.float32(1.0)
    cuabi.launch(s, cfg, k, buf, a, b)
    s.sync()
    t_setup = (time.perf_counter() - t_start) * 1e6
    never = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")   # first used in a capture
    parts = {}

    def capture():
        t0 = time.perf_counter()
        cm = s.capture()            # the process's first: imports cuabi._graph
        t1 = time.perf_counter()
        with cm as g:
            t2 = time.perf_counter()
            cuabi.launch(s, cfg, k, buf, a, b)
            t3 = time.perf_counter()
            for _ in range(KERNELS - 1):
                cuabi.launch(s, cfg, k, buf, a, b)
        parts["import"], parts["first"] = (t1 - t0) * 1e6, (t3 - t2) * 1e6
        return g

    free_kb = heap_free_kb()
    grown = {}
    g, t_cap = measured(capture, "capture", grown)

    def capture_never_launched():
        times = []
        with s.capture() as g2:
            for _ in range(KERNELS):
                t0 = time.perf_counter()
                cuabi.launch(s, cfg, never, buf, a, b)
                times.append((time.perf_counter() - t0) * 1e6)
        g2.close()
        return times

    times = capture_never_launched()
    others = sorted(times[1:])
    NOTES.append(f"cuabi [{cuabi.backend}] first capture: s.capture() {parts['import']:.0f} us "
                 f"(imports cuabi._graph); first captured launch {parts['first']:.1f} us of "
                 f"the kernel launched before, {times[0]:.1f} us of a kernel never launched "
                 f"(its first use); launches 2..{KERNELS} median "
                 f"{others[len(others) // 2]:.2f} us")
    exe, t_inst = measured(g.instantiate, "instantiate", grown)
    _, t_first = timed(lambda: (exe.launch(s), s.sync()))
    rows.append((f"cuabi graph replay [{cuabi.backend}]",
                 best_round(lambda: exe.launch(s), s.sync, args.replays, args.rounds)))

    def hundred():
        for _ in range(KERNELS):
            cuabi.launch(s, cfg, k, buf, a, b)

    rows.append((f"cuabi.launch() x100 [{cuabi.backend}]",
                 best_round(hundred, s.sync, args.replays, args.rounds)))

    def capture_again():
        with s.capture() as g3:
            for _ in range(KERNELS):
                cuabi.launch(s, cfg, k, buf, a, b)
        return g3
    caps, insts, flts = [], [], []
    yard = MachineYardstick(k.function(dev), buf.ptr)
    for _ in range(args.again):
        g3, t_cap2 = timed(capture_again)
        f0 = faults()
        _, t_inst2 = timed(g3.instantiate)
        flts.append(faults() - f0)
        caps.append(t_cap2)
        insts.append(t_inst2)
        yard.once()
    return dict(setup=t_setup, capture=t_cap, instantiate=t_inst, first_launch=t_first,
                capture_again=_med(caps), instantiate_again=_med(insts),
                heap_free_kb=free_kb, instantiate_again_faults=_med(flts),
                capture_import=parts["import"],
                to_first_graph=t_setup + t_cap + t_inst + t_first, **grown,
                **yard.figures(caps, insts))


def cuda_core_rows(args, rows):
    t_start = time.perf_counter()
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    ker = Program(SRC, code_type="c++",
                  options=ProgramOptions(arch="sm_" + dev.arch)).compile("cubin").get_kernel("k")
    cfg = LaunchConfig(grid=1, block=32)
    buf = dev.allocate(4096, stream=s)
    a, b = np.int32(5), np.float32(1.0)
    launch(s, cfg, ker, buf, a, b)
    s.sync()
    t_setup = (time.perf_counter() - t_start) * 1e6

    def build():
        gb = s.create_graph_builder().begin_building()
        for _ in range(KERNELS):
            launch(gb, cfg, ker, buf, a, b)
        gb.end_building()
        return gb

    never = Program(SRC, code_type="c++",
                    options=ProgramOptions(arch="sm_" + dev.arch)).compile("cubin").get_kernel("k")
    free_kb = heap_free_kb()
    grown = {}
    gb, t_cap = measured(build, "capture", grown)

    def capture_never_launched():  # cuabi's process does the same between its graphs
        gb2 = s.create_graph_builder().begin_building()
        for _ in range(KERNELS):
            launch(gb2, cfg, never, buf, a, b)
        gb2.end_building()
        gb2.close()

    capture_never_launched()
    graph, t_inst = measured(gb.complete, "instantiate", grown)
    _, t_first = timed(lambda: (graph.launch(s), s.sync()))
    rows.append(("cuda.core GraphBuilder graph replay",
                 best_round(lambda: graph.launch(s), s.sync, args.replays, args.rounds)))

    def hundred():
        for _ in range(KERNELS):
            launch(s, cfg, ker, buf, a, b)

    rows.append(("cuda.core launch() x100", best_round(hundred, s.sync, args.replays, args.rounds)))
    caps, insts, flts = [], [], []
    yard = MachineYardstick(cuda_core_function(ker), int(buf.handle))
    for _ in range(args.again):
        gb2, t_cap2 = timed(build)
        f0 = faults()
        _, t_inst2 = timed(gb2.complete)
        flts.append(faults() - f0)
        caps.append(t_cap2)
        insts.append(t_inst2)
        yard.once()
    return dict(setup=t_setup, capture=t_cap, instantiate=t_inst, first_launch=t_first,
                capture_again=_med(caps), instantiate_again=_med(insts),
                heap_free_kb=free_kb, instantiate_again_faults=_med(flts), capture_import=0.0,
                to_first_graph=t_setup + t_cap + t_inst + t_first, **grown,
                **yard.figures(caps, insts))


def _q25(v):
    """The lower quartile (linear between the two nearest)."""
    v = sorted(v)
    k = (len(v) - 1) / 4
    i = int(k)
    j = min(i + 1, len(v) - 1)
    return v[i] + (v[j] - v[i]) * (k - i) if v else float("nan")


def _med(v):
    v = sorted(v)
    n = len(v)
    return (v[n // 2] + v[(n - 1) // 2]) / 2 if n else float("nan")


FIGURES = ("setup", "capture", "capture_import", "instantiate", "first_launch", "capture_again",
           "instantiate_again", "heap_free_kb", "capture_faults", "capture_heap_kb",
           "capture_mmap_kb", "capture_maps_kb", "instantiate_faults", "instantiate_heap_kb",
           "instantiate_mmap_kb", "instantiate_maps_kb", "instantiate_again_faults",
           "to_first_graph", "rss_kb", "anon_huge_kb", "yard_capture", "yard_instantiate",
           "capture_again_machine", "instantiate_again_machine")
# Process kinds: cuabi as a program meets it (its compile cache hit: no NVRTC in the
# process), cuabi with the cache off (NVRTC runs in the process, as cuda.core's compile
# does: the driver's first capture and instantiate then find the heap pages NVRTC used
# and freed, docs/PERFORMANCE.md), cuda.core.
KINDS = {"cuabi": {}, "cuabi-nvrtc": {"CUABI_CACHE": "0"}, "cuda.core": {}}
# --kinds may add: cuabi without its heap reserve or with a larger one (docs/graphs.md), for A/Bs.
EXTRA_KINDS = {"cuabi-noreserve": {"CUABI_HEAP_RESERVE": "0"},
               "cuabi-reserve8m": {"CUABI_HEAP_RESERVE": "8192"},
               "cuabi-reserve14m": {"CUABI_HEAP_RESERVE": "14336"},
               # glibc's thresholds raised as the reserve raises them, nothing made resident
               "cuabi-threshold": {"CUABI_HEAP_RESERVE": "0", "GLIBC_TUNABLES":
                                   "glibc.malloc.mmap_threshold=8388608:"
                                   "glibc.malloc.trim_threshold=16777216"}}


def child(name, args):
    """One library in this process; its figures as one JSON line."""
    rows = []
    try:
        ours = name.startswith("cuabi")
        with cuabi_bytecode() if ours else contextlib.nullcontext():
            making = (cuabi_rows if ours else cuda_core_rows)(args, rows)
        making.update(rss_kb=rollup_kb("Rss"), anon_huge_kb=rollup_kb("AnonHugePages"),
                      layout=layout())
    except Exception as e:  # a missing peer (or GPU) is reported, not a crash
        print("RESULT " + json.dumps({"error": f"{type(e).__name__}: {str(e)[:90]}"}))
        return
    print("RESULT " + json.dumps({"rows": rows, "making": making, "notes": NOTES}))


def processes(args):
    """--processes N of each library, alternating; medians and ratios."""
    kinds = {k: dict(KINDS, **EXTRA_KINDS)[k] for k in args.kinds.split(",")}
    res = {name: [] for name in kinds}
    errors = {}
    for i in range(args.processes):
        order = list(kinds) if i % 2 == 0 else list(kinds)[::-1]
        for name in order:
            if name in errors:
                continue
            cpu = [] if not args.cpus else ["--cpu", args.cpus.split(",")[i % len(args.cpus.split(","))]]
            cmd = [sys.executable, os.path.abspath(__file__), "--child", name, *cpu,
                   "--replays", str(args.replays), "--rounds", str(args.rounds),
                   "--again", str(args.again)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, **kinds[name]))
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
            out = json.loads(line[-1][7:]) if line else {
                "error": f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-200:]}"}
            if "error" in out:
                errors[name] = out["error"]
            else:
                res[name].append(out)
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(res, f)
    print(f"graphs from Python: {args.processes} processes per library (alternating), "
          f"empty kernel k(float*, int, float), 100 launches per graph, host us")
    for name, err in errors.items():
        print(f"  {name}: n/a ({err})")
    med = {}
    for name, outs in res.items():
        if not outs:
            continue
        tag = (outs[0]["rows"][0][0].split("[")[-1].rstrip("]") if name.startswith("cuabi")
               else "peer")
        print(f"  {name} [{tag}]:")
        for f in FIGURES:
            vals = [o["making"][f] for o in outs]
            med[(name, f)] = _med(vals)
            fmt = "8.3f" if f.endswith("_machine") else "8.1f"     # ratios
            print(f"    {f:18s} " + " ".join(f"{v:{fmt}}" for v in vals)
                  + f"  -> median {med[(name, f)]:{fmt}}")
        reps = {}
        for o in outs:
            for rname, v in o["rows"]:
                if isinstance(v, float):
                    reps.setdefault(rname, []).append(v)
        for rname, vals in reps.items():
            print(f"    {rname:44s} median {_med(vals):7.3f} us per kernel (best round of each)")
        if name.startswith("cuabi") and outs[0]["notes"]:
            print(f"    process 1: {outs[0]['notes'][0]}")
        if args.maps:
            for step in ("capture", "instantiate"):
                lines = outs[0]["making"].get(step + "_maps", [])
                print(f"    process 1, mappings new in the first {step}: {len(lines)}")
                for ln in lines:
                    print(f"      {ln}")
    for ours in [k for k in kinds if k.startswith("cuabi")]:
        if not (res[ours] and res.get("cuda.core")):
            continue

        def ratio(f, g=None):
            a = med[(ours, f)] - (med[(ours, g)] if g else 0)
            return a / med[("cuda.core", f)]

        def ratio_q25(f, g=None):
            a = _q25([o["making"][f] - (o["making"][g] if g else 0) for o in res[ours]])
            return a / _q25([o["making"][f] for o in res["cuda.core"]])
        def ratio_machine(f, g=None):
            def norm(outs, g):
                if f + "_machine" in outs[0]["making"]:     # again: beside each graph
                    return _med([o["making"][f + "_machine"] for o in outs])
                yard = "yard_instantiate" if "instantiate" in f else "yard_capture"
                return _med([(o["making"][f] - (o["making"][g] if g else 0))
                             / o["making"][yard] for o in outs])
            return norm(res[ours], g) / norm(res["cuda.core"], None)

        def ratio_paired(f, g=None):
            pairs = zip(res[ours], res["cuda.core"])
            return _med([(a["making"][f] - (a["making"][g] if g else 0)) / b["making"][f]
                         for a, b in pairs])
        print(f"  {ours} / cuda.core (medians over processes; target <= 1; q25: the lower "
              "quartiles' ratio, steadier where a VM's processes run fast or ~2x slow; "
              "paired: the median of each round's ratio, its processes run one after the "
              "other, on the same CPUs with --cpus; machine: the medians of each process's "
              "figure over its raw-driver yardstick, the machine's fast or slow stretch "
              "divided out):")
        for label, f, g in (("first capture", "capture", None),
                            ("first capture without importing cuabi._graph", "capture",
                             "capture_import"),
                            ("first instantiate", "instantiate", None),
                            ("capture again", "capture_again", None),
                            ("instantiate again", "instantiate_again", None),
                            ("import to first graph done (setup..first launch)",
                             "to_first_graph", None)):
            r = ratio(f, g)
            machine = (f"  machine {ratio_machine(f, g):6.3f}x" if f != "to_first_graph"
                       else "")
            print(f"    {label:48s} {r:6.3f}x  {'met' if r <= 1 else 'NOT MET'}"
                  f"  (q25 {ratio_q25(f, g):6.3f}x, paired {ratio_paired(f, g):6.3f}x{machine})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw-us", type=float, help="raw cuLaunchKernel microseconds per launch")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--processes", type=int, default=5,
                    help="processes per library (1: both in this process, as before)")
    ap.add_argument("--again", type=int, default=5, help="graphs made after the first, per process")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="process kinds, of " + ", ".join(list(KINDS) + list(EXTRA_KINDS)))
    ap.add_argument("--maps", action="store_true",
                    help="print the mappings each library's first process made in its first "
                         "capture and instantiate (/proc/self/maps)")
    ap.add_argument("--cpus", help="comma-separated CPUs (a+b: a set): round i's processes (one of each "
                    "library) all run on CPU i mod their number, so that a CPU's own speed "
                    "(a VM's vCPUs differ) is the same for both")
    ap.add_argument("--dump", help="write every process's figures (and its layout) to this "
                    "JSON file")
    ap.add_argument("--cpu", help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if args.cpu is not None:
            os.sched_setaffinity(0, {int(c) for c in args.cpu.split("+")})
        return child(args.child, args)
    if args.processes > 1:
        return processes(args)
    rows, making = [], {}
    for name, fn in (("cuabi", cuabi_rows), ("cuda.core", cuda_core_rows)):
        try:
            with cuabi_bytecode() if name == "cuabi" else contextlib.nullcontext():
                making[name] = fn(args, rows)
        except Exception as e:  # a missing peer (or GPU) is a row, not a crash
            rows.append((name, f"n/a ({type(e).__name__}: {str(e)[:70]})"))
    print(f"graph replay from Python, empty kernel k(float*, int, float), {args.replays} x "
          f"{KERNELS} kernels per round x {args.rounds} rounds, best round, host us per kernel")
    ref = dict(rows).get("cuda.core GraphBuilder graph replay")
    for name, v in rows:
        if isinstance(v, str):
            print(f"  {name:44s} {v}")
            continue
        extra = f"  {v / args.raw_us:6.3f}x raw" if args.raw_us else ""
        if isinstance(ref, float):
            extra += f"  {v / ref:6.3f}x cuda.core's replay"
        print(f"  {name:44s} {v:8.3f}{extra}")
    # The first graph instantiated in the process pays the driver's own
    # first-use cost (cuabi's runs first here); "again" is a second graph
    # made the same way, for the comparison of like with like.
    for name, m in making.items():
        cap, inst, first, cap2, inst2 = (m[f] for f in ("capture", "instantiate", "first_launch",
                                                        "capture_again", "instantiate_again"))
        print(f"  making the {KERNELS}-node graph with {name}: capture {cap:.0f} us, "
              f"instantiate {inst:.0f} us, first launch to completion {first:.0f} us; "
              f"again: capture {cap2:.0f} us, instantiate {inst2:.0f} us")
    for line in NOTES:
        print(f"  {line}")
    ours = [v for n, v in rows if n.startswith("cuabi graph replay") and isinstance(v, float)]
    if ours and isinstance(ref, float):
        print(f"  target: cuabi's replay <= cuda.core's: {'met' if ours[0] <= ref else 'NOT MET'} "
              f"({ours[0] / ref:.3f}x)")


if __name__ == "__main__":
    main()
