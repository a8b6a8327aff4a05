"""First and later graph capture / instantiate from Python, per capture mode and spelling,
one fresh process per run (ON THE GPU MACHINE, issue 24 item 3; docs/PERFORMANCE.md):

    python3 scripts/diag_graph_modes.py [--processes 5] [--causes | --cc | --init | --stages | --first]

Variants (each a process of its own, alternating): cuabi `s.capture()` (global mode),
`s.capture("relaxed")`, cuabi's GraphBuilder (cuda.core's spelling, relaxed), cuda.core's
GraphBuilder relaxed (its default) and global. Each process: compile, one launch, then a
100-launch capture split into enter / first launch / 99 launches / exit, the first
instantiate, and three more graphs (capture, instantiate). Prints the medians over processes.
cuabi's modules are read from bytecode compiled first (as installed)."""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

VARIANTS = ["cuabi:global", "cuabi:relaxed", "cuabi:builder", "cuda.core:relaxed",
            "cuda.core:global"]
# What the first instantiate depends on (issue 24 item 3): the same cuabi process
# after importing cuda.core, after growing and freeing the Python heap, with
# NVRTC run in the process (the compile cache off), after a one-launch graph was
# captured and instantiated first; and the first capture's C calls timed alone.
CAUSES = ["cuabi:global", "cuabi:global:nocache", "cuabi:global:imp", "cuabi:global:heap",
          "cuabi:global:warm", "cuabi:global:cparts", "cuda.core:relaxed"]
# Which of cuda.core's setup steps, done first in a cuabi process, changes cuabi's first
# instantiate: its device and stream, + a pool allocation, + a compiled kernel launched.
CC_STEPS = ["cuabi:global", "cuabi:global:ccdev", "cuabi:global:ccalloc", "cuabi:global:cckernel",
            "cuabi:global:stream2", "cuabi:global:ccimpdev", "cuda.core:relaxed"]
# Which part of cuda.core's `Device(0).set_current()` it is (--init): the driver loaded and
# initialised through ctypes, the primary context retained and made current through ctypes,
# cuda.bindings' cuInit alone, cuabi's own device made current before anything else, and
# cuda.core's set_current as the control; `smaps` adds which mappings the first instantiate grows.
STAGE_STEPS = ["cuabi:global:+stages", "cuabi:global:early+stages", "cuabi:global:ctctx+stages",
               "cuabi:global:ctctxlate+stages", "cuabi:global:ccimpdev+stages"]
# Like with like (--first): cuabi with its compile cache off, so NVRTC runs in the process
# as cuda.core's compile does; its first capture split at the C calls (cparts).
FIRST_STEPS = ["cuabi:global:nocache", "cuabi:global:cparts+nocache", "cuabi:builder:nocache",
               "cuda.core:relaxed", "cuda.core:global"]
INIT_STEPS = ["cuabi:global", "cuabi:global:ctinit", "cuabi:global:ctctx", "cuabi:global:cbinit",
              "cuabi:global:early", "cuabi:global:ccimpdev", "cuabi:global:smaps",
              "cuabi:global:ccimpdev+smaps"]
SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'


def child(variant):
    import numpy as np
    T = time.perf_counter
    lib, mode, extra = (variant + ":").split(":")[:3]
    out = {}
    extra, _, watch = extra.partition("+")
    watch = watch or extra
    global STAGES
    STAGES = [] if watch == "stages" else None
    mark("start")
    if extra == "ctctxlate":   # cuabi imported first, then ctypes' context
        import cuabi  # noqa: F401
    if extra in ("ctinit", "ctctx", "ctctxlate"):
        import ctypes
        cu = ctypes.CDLL("libcuda.so.1")
        assert cu.cuInit(0) == 0
        if extra in ("ctctx", "ctctxlate"):
            ctx = ctypes.c_void_p()
            assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
            assert cu.cuCtxSetCurrent(ctx) == 0
    if extra == "cbinit":
        from cuda.bindings import driver
        assert driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS
    if extra == "early":
        import cuabi
        cuabi.Device(0).set_current()
    mark("extra")
    if extra == "imp":
        import cuda.core  # noqa: F401
    if extra.startswith("cc"):
        import cuda.core as cc0
        d0 = cc0.Device(0)
        d0.set_current()
        s0 = d0.create_stream() if extra != "ccimpdev" else None
        if extra in ("ccalloc", "cckernel"):
            b0 = d0.memory_resource.allocate(4096, stream=s0)
        if extra == "cckernel":
            k0 = cc0.Program(SRC, code_type="c++", options=cc0.ProgramOptions(
                arch=f"sm_{d0.arch}")).compile("cubin").get_kernel("k")
            cc0.launch(s0, cc0.LaunchConfig(grid=1, block=32), k0, b0, np.int32(5),
                       np.float32(1.0))
        if s0 is not None:
            s0.sync()
    if extra == "heap":
        junk = [bytearray(4096) for _ in range(20000)]
        big = bytearray(64 << 20)
        del junk, big
    if lib == "cuabi":
        import compileall, importlib.util, tempfile
        sys.pycache_prefix = tempfile.mkdtemp()
        for d in importlib.util.find_spec("cuabi").submodule_search_locations:
            compileall.compile_dir(d, quiet=1)
        import cuabi
        mark("import")
        dev = cuabi.Device(0)
        mark("device")
        s = dev.create_stream(non_blocking=True)
        mark("stream")
        k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
        mark("kernel")
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
    mark("setup")
    launch(s, cfg, k, buf, a, b)
    s.sync()
    mark("launched")
    if extra == "stream2":      # a second stream of the process, idle
        s_extra = dev.create_stream()  # noqa: F841
    if extra == "warm":
        with s.capture() as g0:
            launch(s, cfg, k, buf, a, b)
        g0.instantiate().close()
        g0.close()
    if extra == "cparts":
        return cparts(s, cfg, k, buf, a, b)

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
        if record is not None:
            mark("captured")
        m0 = mallinfo() if record is not None else None
        before = smaps() if record is not None and watch == "smaps" else None
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        e = inst()
        t6 = T()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        if before is not None:
            grown = smaps_growth(before, smaps())
            print("SMAPS " + json.dumps(grown))
        if m0 is not None:
            mark("instantiated")
            if STAGES:
                print("STAGES " + json.dumps(STAGES))
            m1 = mallinfo()
            # malloc's heap (arena) and mmapped (hblkhd) bytes the instantiate added (x 1e-6: KiB)
            record.update(inst_arena_kib=(m1[0] - m0[0]) / 1024 * 1e-6,
                          inst_mmap_kib=(m1[1] - m0[1]) / 1024 * 1e-6)
        if record is not None:
            record.update(prepare=t1 - t0, enter=t2 - t1, launch1=t3 - t2, launches99=t4 - t3,
                          exit=t5 - t4, capture=t5 - t0, instantiate=t6 - t5)
            # Page faults and context switches of the first instantiate (x 1e-6: printed as counts)
            record.update(inst_minflt=(r1.ru_minflt - r0.ru_minflt) * 1e-6,
                          inst_csw=(r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw) * 1e-6,
                          inst_cpu=(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
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


def mallinfo():
    """glibc's malloc totals: (arena bytes, mmapped bytes, in-use bytes, free bytes)."""
    import ctypes

    class MI2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")]
    f = ctypes.CDLL(None).mallinfo2
    f.restype = MI2
    m = f()
    return (m.arena, m.hblkhd, m.uordblks, m.fordblks, m.keepcost)


STAGES = []


def mark(name):
    """With `+stages`: malloc's state (KiB: heap, free in it, releasable top, mmapped) and
    the thread count at this point of the child."""
    if STAGES is not None:
        a, h, _, f, k = mallinfo()
        with open("/proc/self/status") as st:
            th = [ln.split()[1] for ln in st if ln.startswith("Threads:")][0]
        STAGES.append((name, a >> 10, f >> 10, k >> 10, h >> 10, int(th)))


def smaps():
    """Resident KiB per mapping of this process (key: address range and name)."""
    out, key = {}, None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                key = head[0] + " " + (head[5] if len(head) > 5 else "[anon]")
            elif head[0] == "Rss:":
                out[key] = int(head[1])
    return out


def smaps_growth(before, after):
    """The mappings whose resident size grew (KiB), new ones included, largest first."""
    grown = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    return dict(sorted(grown.items(), key=lambda kv: -kv[1])[:12])


def cparts(s, cfg, k, buf, a, b):
    """The first capture through the C functions alone (resolved first), each timed."""
    import ctypes as C
    import cuabi
    from cuabi._lib import raw
    T = time.perf_counter
    begin, end = raw("cuabi_graph_capture_begin"), raw("cuabi_graph_capture_end")
    inst = raw("cuabi_graph_instantiate")
    sh = C.c_void_p(s.cuabi_handle)
    g, e = C.c_void_p(), C.c_void_p()
    t0 = T()
    assert begin(sh, C.c_int(0)) == 0
    t1 = T()
    cuabi.launch(s, cfg, k, buf, a, b)
    t2 = T()
    for _ in range(99):
        cuabi.launch(s, cfg, k, buf, a, b)
    t3 = T()
    assert end(C.byref(g), sh) == 0
    t4 = T()
    assert inst(C.byref(e), g, None) == 0
    t5 = T()
    out = dict(prepare=0.0, enter=t1 - t0, launch1=t2 - t1, launches99=t3 - t2, exit=t4 - t3,
               capture=t4 - t0, instantiate=t5 - t4, first_launch=0.0, capture_again=0.0,
               instantiate_again=0.0)
    print("RESULT " + json.dumps({k2: v * 1e6 for k2, v in out.items()}))


def main():
    n = int(sys.argv[sys.argv.index("--processes") + 1]) if "--processes" in sys.argv else 5
    variants = (CAUSES if "--causes" in sys.argv else CC_STEPS if "--cc" in sys.argv
                else INIT_STEPS if "--init" in sys.argv
                else STAGE_STEPS if "--stages" in sys.argv
                else FIRST_STEPS if "--first" in sys.argv else VARIANTS)
    res = {v: [] for v in variants}
    for _ in range(n):
        for v in variants:
            env = dict(os.environ, CUABI_CACHE="0") if "nocache" in v else None
            r = subprocess.run([sys.executable, __file__, "--child", v], capture_output=True,
                               text=True, timeout=120, env=env)
            line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
            for x in r.stdout.splitlines():
                if x.startswith("SMAPS ") and len(res[v]) < 2:
                    print(f"{v}: first instantiate grew (KiB): {x[6:]}")
                if x.startswith("STAGES ") and len(res[v]) < 2:
                    print(f"{v}: (stage, heap, free, top, mmapped KiB, threads):")
                    for st in json.loads(x[7:]):
                        print("   ", st)
            if not line:
                print(f"{v}: failed rc={r.returncode}: {r.stderr[-800:]}")
                continue
            res[v].append(json.loads(line[0][7:]))
    keys = ["prepare", "enter", "launch1", "launches99", "exit", "capture", "instantiate",
            "first_launch", "capture_again", "instantiate_again", "inst_minflt", "inst_csw",
            "inst_cpu", "inst_arena_kib", "inst_mmap_kib"]
    print(f"{'variant (median us of ' + str(n) + ' processes)':34}" + "".join(f"{k:>12}" for k in keys))
    print("(inst_minflt, inst_csw: page faults and context switches of the first instantiate; "
          "inst_cpu: its CPU time, us)")
    for v, rows in res.items():
        if rows:
            print(f"{v:34}" + "".join(f"{statistics.median(r.get(k, 0) for r in rows):12.1f}"
                                      for k in keys))
    for v, rows in res.items():
        print(v, "first capture per process:", [round(r["capture"]) for r in rows],
              "first instantiate:", [round(r["instantiate"]) for r in rows])


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(sys.argv[sys.argv.index("--child") + 1])
    else:
        main()
