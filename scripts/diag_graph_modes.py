"""First and later graph capture / instantiate from Python, per capture mode and spelling,
one fresh process per run (ON THE GPU MACHINE, issue 24 item 3; docs/PERFORMANCE.md):

    python3 scripts/diag_graph_modes.py [--processes 5]

Variants (each a process of its own, alternating): cuabi `s.capture()` (global mode),
`s.capture("relaxed")`, cuabi's GraphBuilder (cuda.core's spelling, relaxed), cuda.core's
GraphBuilder relaxed (its default) and global. Each process: compile, one launch, then a
100-launch capture split into enter / first launch / 99 launches / exit, the first
instantiate, and three more graphs (capture, instantiate). Prints the medians over processes.
cuabi's modules are read from bytecode compiled first (as installed)."""
import json
import statistics
import subprocess
import sys
import time

VARIANTS = ["cuabi:global", "cuabi:relaxed", "cuabi:builder", "cuda.core:relaxed",
            "cuda.core:global"]
SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'


def child(variant):
    import numpy as np
    T = time.perf_counter
    lib, mode = variant.split(":")
    out = {}
    if lib == "cuabi":
        import compileall, importlib.util, tempfile
        sys.pycache_prefix = tempfile.mkdtemp()
        for d in importlib.util.find_spec("cuabi").submodule_search_locations:
            compileall.compile_dir(d, quiet=1)
        import cuabi
        dev = cuabi.Device(0)
        s = dev.create_stream(non_blocking=True)
        k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
        buf = cuabi.Buffer(4096, stream=s)
        cfg = cuabi.LaunchConfig(grid=1, block=32)
        launch = cuabi.launch
    else:
        import cuda.core as cc
        dev = cc.Device(0)
        dev.set_current()
        s = dev.create_stream()
        k = cc.Program(SRC, code_type="c++", options=cc.ProgramOptions(
            arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("k")
        buf = dev.memory_resource.allocate(4096, stream=s)
        cfg = cc.LaunchConfig(grid=1, block=32)
        launch = cc.launch
    a, b = np.int32(5), np.float32(1.0)
    launch(s, cfg, k, buf, a, b)
    s.sync()

    def make(record):
        t0 = T()
        if lib == "cuabi" and mode != "builder":
            cm = s.capture(mode)
            t1 = T()
            g = cm.__enter__()
            target = s
        else:
            gb = s.create_graph_builder()
            t1 = T()
            gb.begin_building(mode if lib == "cuda.core" else "relaxed")
            target = gb
        t2 = T()
        launch(target, cfg, k, buf, a, b)
        t3 = T()
        for _ in range(99):
            launch(target, cfg, k, buf, a, b)
        t4 = T()
        if lib == "cuabi" and mode != "builder":
            cm.__exit__(None, None, None)
            inst = g.instantiate
        else:
            gb.end_building()
            inst = gb.complete
        t5 = T()
        e = inst()
        t6 = T()
        if record is not None:
            record.update(prepare=t1 - t0, enter=t2 - t1, launch1=t3 - t2, launches99=t4 - t3,
                          exit=t5 - t4, capture=t5 - t0, instantiate=t6 - t5)
        return e, t5 - t0, t6 - t5

    e, _, _ = make(out)
    t0 = T()
    e.launch(s)
    s.sync()
    out["first_launch"] = T() - t0
    caps, insts = [], []
    for _ in range(3):
        _, c, i = make(None)
        caps.append(c)
        insts.append(i)
    out["capture_again"] = statistics.median(caps)
    out["instantiate_again"] = statistics.median(insts)
    print("RESULT " + json.dumps({k2: v * 1e6 for k2, v in out.items()}))


def main():
    n = int(sys.argv[sys.argv.index("--processes") + 1]) if "--processes" in sys.argv else 5
    res = {v: [] for v in VARIANTS}
    for _ in range(n):
        for v in VARIANTS:
            r = subprocess.run([sys.executable, __file__, "--child", v], capture_output=True,
                               text=True, timeout=120)
            line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                print(f"{v}: failed rc={r.returncode}: {r.stderr[-800:]}")
                continue
            res[v].append(json.loads(line[0][7:]))
    keys = ["prepare", "enter", "launch1", "launches99", "exit", "capture", "instantiate",
            "first_launch", "capture_again", "instantiate_again"]
    print(f"{'variant (median us of ' + str(n) + ' processes)':34}" + "".join(f"{k:>12}" for k in keys))
    for v, rows in res.items():
        if rows:
            print(f"{v:34}" + "".join(f"{statistics.median(r[k] for r in rows):12.1f}" for k in keys))
    for v, rows in res.items():
        print(v, "first capture per process:", [round(r["capture"]) for r in rows],
              "first instantiate:", [round(r["instantiate"]) for r in rows])


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(sys.argv[sys.argv.index("--child") + 1])
    else:
        main()
