#!/usr/bin/env python3
"""Cold start: a precompiled kernel in a new process, step by step.

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python \
        python3 bench/bench_cold.py [--runs 5] [--json FILE]

One warm-up process fills each peer's compile cache with the templated
segmented reduction `segred<float, 256>` (tests/fixtures/segred_kernel.h). Then each
run starts a new process per peer, interleaved, and times, from the first
line of the script:

  import        the package
  context       driver + primary context (cuabi: Device(0) and a stream)
  kernel_ready  compile (a cache hit) and the kernel loaded
  first_result  buffers allocated and filled, one launch, copy back + sync
  total         the sum; `process` is the whole process seen from outside

and whether NVRTC / nvJitLink were mapped into the process by the hit.
Peers: cuabi, CuPy (its disk cache), cuda.core (without a cache for name
expressions: an extern "C" wrapper, compiled each time, reported as such)
and the driver alone (bench/cold_driver: dlopen + cuInit + context, module
load, first result), the floor; `driver_seq` is the driver alone making
cuabi's own calls (library API, default pool, async copies), each timed.
Medians over the runs are printed as a table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
SEG, NSEG = 1000, 2

SRC = r"""
template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out, const int *offsets)
{
    __shared__ T part[BLOCK];
    int s = blockIdx.x, t = threadIdx.x;
    T acc = 0;
    for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK) acc += in[i];
    part[t] = acc;
    __syncthreads();
    for (int w = BLOCK / 2; w > 0; w /= 2) {
        if (t < w) part[t] += part[t + w];
        __syncthreads();
    }
    if (t == 0) out[s] = part[0];
}
"""
NAME = "segred<float, 256>"
# cuda.core 1.2's cache keeps no name-expression map: an extern "C" entry.
SRC_C = SRC + 'extern "C" __global__ void segred_f256(const float *i, float *o, const int *f)' \
              "{ segred<float, 256>(i, o, f); }\n"
SRC_C = SRC_C.replace("__global__ void segred(", "__device__ void segred(")


def ms(t):
    return (t - T0) * 1e3


def mapped():
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return {}
    return {"nvrtc_mapped": "libnvrtc" in maps, "nvjitlink_mapped": "libnvJitLink" in maps}


def host_data():
    import array
    data = array.array("f", [float(i % 7) for i in range(SEG * NSEG)])
    offsets = array.array("i", [0, SEG, 2 * SEG])
    want = float(sum(i % 7 for i in range(SEG)))
    return data, offsets, want


# ------------------------------------------------------------------ children

def child_cuabi(warm):
    steps = {}
    import cuabi
    steps["import"] = ms(time.perf_counter())
    dev = cuabi.Device(0)
    stream = dev.create_stream(non_blocking=True)
    steps["context"] = ms(time.perf_counter())
    sub, t = {}, time.perf_counter()

    def mark(name):
        nonlocal t
        now = time.perf_counter()
        sub[name] = round((now - t) * 1e3, 2)
        t = now
    obj = cuabi.Program(SRC, name="segred.cu").compile(arch=dev.arch, name_expressions=[NAME])
    mark("compile_hit")
    k = obj.get_kernel(NAME)
    mark("get_kernel")
    k.function(dev)                      # loaded on the device
    mark("load")
    steps["kernel_ready"] = ms(time.perf_counter())
    steps.update(mapped())
    data, offsets, want = host_data()
    t = time.perf_counter()
    d_in = cuabi.Buffer.from_host(data, stream=stream)
    mark("buffer_in")
    d_off = cuabi.Buffer.from_host(offsets, stream=stream)
    d_out = cuabi.Buffer(4 * NSEG, stream=stream) if _takes_stream() else cuabi.Buffer(4 * NSEG)
    mark("buffers_other")
    cfg = cuabi.LaunchConfig(grid=NSEG, block=256)
    mark("config")
    cuabi.launch(stream, cfg, k, d_in, d_out, d_off)
    mark("launch")
    out = (d_out.to_bytes if hasattr(d_out, "to_bytes") else d_out.copy_to)(stream=stream)
    stream.synchronize()
    mark("copy_back_sync")
    steps["first_result"] = ms(time.perf_counter())
    steps["sub"] = sub
    import array
    got = array.array("f", bytes(out))[0]
    steps["correct"] = got == want
    steps["cache_hit"] = not warm
    return steps


def _takes_stream():
    import inspect
    import cuabi
    return "stream" in inspect.signature(cuabi.Buffer.__init__).parameters


def child_cupy(warm):
    steps = {}
    import cupy as cp
    steps["import"] = ms(time.perf_counter())
    cp.cuda.runtime.getDevice()
    cp.cuda.Device(0).use()
    steps["context"] = ms(time.perf_counter())
    mod = cp.RawModule(code=SRC, name_expressions=[NAME])
    k = mod.get_function(NAME)
    steps["kernel_ready"] = ms(time.perf_counter())
    steps.update(mapped())
    data, offsets, want = host_data()
    d_in = cp.asarray(memoryview(data).cast("B")).view(cp.float32)
    d_off = cp.asarray(memoryview(offsets).cast("B")).view(cp.int32)
    d_out = cp.empty(NSEG, cp.float32)
    k((NSEG,), (256,), (d_in, d_out, d_off))
    got = float(d_out[0].get())
    steps["first_result"] = ms(time.perf_counter())
    steps["correct"] = got == want
    return steps


def child_cuda_core(warm):
    steps = {}
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    steps["import"] = ms(time.perf_counter())
    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    steps["context"] = ms(time.perf_counter())
    prog = Program(SRC_C, code_type="c++", options=ProgramOptions(arch="sm_" + dev.arch))
    k = prog.compile("cubin").get_kernel("segred_f256")
    steps["kernel_ready"] = ms(time.perf_counter())
    steps["cache_hit"] = False           # compiled each time (see the docstring)
    steps.update(mapped())
    import numpy as np
    data, offsets, want = host_data()
    b_in, b_off, b_out = (dev.allocate(n, stream=s) for n in (4 * SEG * NSEG, 12, 4 * NSEG))
    h_in = np.frombuffer(data, np.float32)
    h_off = np.frombuffer(offsets, np.int32)
    h_out = np.zeros(NSEG, np.float32)
    _copy(b_in, h_in, s)
    _copy(b_off, h_off, s)
    launch(s, LaunchConfig(grid=NSEG, block=256), k, b_in, b_out, b_off)
    _copy_back(h_out, b_out, s)
    s.sync()
    steps["first_result"] = ms(time.perf_counter())
    steps["correct"] = float(h_out[0]) == want
    return steps


def _copy(buf, arr, s):
    from cuda.bindings import driver as drv
    drv.cuMemcpyHtoDAsync(int(buf.handle), arr.ctypes.data, arr.nbytes, int(s.handle))


def _copy_back(arr, buf, s):
    from cuda.bindings import driver as drv
    drv.cuMemcpyDtoHAsync(arr.ctypes.data, int(buf.handle), arr.nbytes, int(s.handle))


CHILDREN = {"cuabi": child_cuabi, "cupy": child_cupy, "cuda_core": child_cuda_core}


# ------------------------------------------------------------------ parent

def run_child(peer, env, warm=False):
    t0 = time.perf_counter()
    cmd = [sys.executable, os.path.abspath(__file__), "--child", peer] + (["--warm"] if warm else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    wall = (time.perf_counter() - t0) * 1e3
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not line:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]}
    d = json.loads(line[-1])
    d["process"] = wall
    return d


def run_driver(cubin, name, cuabi_sequence=False):
    exe = os.path.join(HERE, "cold_driver")
    if not os.path.exists(exe):
        return {"error": ["bench/cold_driver not built (make)"]}
    t0 = time.perf_counter()
    cmd = [exe, cubin, name] + (["--cuabi-sequence"] if cuabi_sequence else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    wall = (time.perf_counter() - t0) * 1e3
    if p.returncode:
        return {"error": [p.stderr.strip()]}
    d = json.loads(p.stdout)
    d["process"] = wall
    return d


def python_startup(env, n=5):
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        walls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(walls)


def dump_cubin(env, path):
    """The cubin and lowered name of segred<float, 256>, for the driver floor."""
    code = ("import cuabi,sys\n"
            f"d=cuabi.Device(0); o=cuabi.Program({SRC!r}).compile(arch=d.arch, name_expressions=[{NAME!r}])\n"
            f"open({path!r},'wb').write(bytes(o)); print(o.lowered_name({NAME!r}))\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peers", default="cuabi,cupy,cuda_core,driver,driver_seq")
    ap.add_argument("--json")
    ap.add_argument("--child")
    ap.add_argument("--warm", action="store_true")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(CHILDREN[a.child](a.warm)))
        return 0
    tmp = tempfile.mkdtemp(prefix="cuabi-cold-")
    # Bytecode cached as an installed package has it (the warm-up run writes
    # it): measured is loading, not compiling the sources.
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "xdg"),
               CUPY_CACHE_DIR=os.path.join(tmp, "cupy"),
               PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"))
    env.pop("CUDA_CACHE_DISABLE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    peers = a.peers.split(",")
    for p in peers:                            # fill the caches
        if p in CHILDREN:
            w = run_child(p, env, warm=True)
            if "error" in w:
                print(f"{p}: warm-up failed: {w['error']}")
    cubin = os.path.join(tmp, "segred.cubin")
    lowered = dump_cubin(env, cubin) if {"driver", "driver_seq"} & set(peers) else None
    results = {p: [] for p in peers}
    for _ in range(a.runs):
        for p in peers:
            if p.startswith("driver"):
                r = (run_driver(cubin, lowered, p == "driver_seq") if lowered
                     else {"error": ["no cubin"]})
            else:
                r = run_child(p, env)
            results[p].append(r)
    startup = python_startup(env)
    steps = ["import", "context", "kernel_ready", "first_result"]
    print(f"cold start, median of {a.runs} new processes (ms); python -c pass: {startup:.1f} ms")
    print(f"{'peer':10} {'import':>8} {'context':>8} {'kernel':>8} {'first':>8} {'total':>8} "
          f"{'process':>8}  nvrtc/jitlink mapped, correct")
    table = {}
    for p, rs in results.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            print(f"{p:10} failed: {rs[0].get('error')}")
            table[p] = {"error": rs[0].get("error")}
            continue
        if p.startswith("driver"):
            med = {k: statistics.median(r[k] for r in ok)
                   for k in ("driver_init", "module_load", "first_result", "total", "process")}
            print(f"{p:10} {'':>8} {med['driver_init']:8.1f} {med['module_load']:8.1f} "
                  f"{med['first_result']:8.1f} {med['total']:8.1f} {med['process']:8.1f}  "
                  f"correct={all(r['correct'] for r in ok)}")
            if "steps" in ok[0]:
                med["steps"] = {k: statistics.median(r["steps"][k] for r in ok) for k in ok[0]["steps"]}
                print(f"{'':10} driver calls (ms): "
                      + ", ".join(f"{k} {v:.2f}" for k, v in med["steps"].items()))
        else:
            inc = {s: statistics.median(r[s] - (r[steps[i - 1]] if i else 0) for r in ok)
                   for i, s in enumerate(steps)}
            med = dict(inc, total=statistics.median(r["first_result"] for r in ok),
                       process=statistics.median(r["process"] for r in ok))
            print(f"{p:10} {inc['import']:8.1f} {inc['context']:8.1f} {inc['kernel_ready']:8.1f} "
                  f"{inc['first_result']:8.1f} {med['total']:8.1f} {med['process']:8.1f}  "
                  f"{ok[0].get('nvrtc_mapped')}/{ok[0].get('nvjitlink_mapped')}, "
                  f"correct={all(r.get('correct') for r in ok)}")
        table[p] = {"median": med, "runs": rs}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"python_startup_ms": startup, "peers": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
