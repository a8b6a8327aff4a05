"""Where the first capture and instantiate time goes, cuabi or cuda.core, one process per run
(ON THE GPU MACHINE: python3 scripts/diag_graph_first.py cuabi|cuda.core; docs/PERFORMANCE.md,
2026-11-28)."""
import sys, time, os, io, cProfile, pstats, compileall, importlib.util, tempfile
lib = sys.argv[1]
SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'
import numpy as np
T = time.perf_counter
def us(a, b): return f"{(b - a) * 1e6:8.1f}"
if lib == "cuabi":
    cache = tempfile.mkdtemp(); sys.pycache_prefix = cache
    spec = importlib.util.find_spec("cuabi")
    for d in spec.submodule_search_locations: compileall.compile_dir(d, quiet=1)
    import cuabi
    dev = cuabi.Device(0); s = dev.create_stream(non_blocking=True)
    k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
    buf = cuabi.Buffer(4096, stream=s); cfg = cuabi.LaunchConfig(grid=1, block=32)
    a, b = np.int32(5), np.float32(1.0)
    cuabi.launch(s, cfg, k, buf, a, b); s.sync()
    before = set(sys.modules)
    t0 = T(); cm = s.capture(); t1 = T()
    newmods = sorted(set(sys.modules) - before)
    g = cm.__enter__(); t2 = T()
    cuabi.launch(s, cfg, k, buf, a, b); t3 = T()
    cuabi.launch(s, cfg, k, buf, a, b); t4 = T()
    for _ in range(98): cuabi.launch(s, cfg, k, buf, a, b)
    t5 = T(); cm.__exit__(None, None, None); t6 = T()
    print("cuabi capture(): import", us(t0, t1), "enter", us(t1, t2), "launch1", us(t2, t3),
          "launch2", us(t3, t4), "98 more", us(t4, t5), "exit", us(t5, t6), "total", us(t0, t6), newmods)
    pr = cProfile.Profile(); t0 = T(); pr.enable(); e = g.instantiate(); pr.disable(); t1 = T()
    print("cuabi first instantiate", us(t0, t1))
    st = io.StringIO()
    pstats.Stats(pr, stream=st).sort_stats("tottime").print_stats(12)
    print(st.getvalue()[-2500:])
    t0 = T(); e.launch(s); s.sync(); t1 = T(); print("cuabi first launch", us(t0, t1))
    for i in range(3):
        t0 = T()
        with s.capture() as g2:
            for _ in range(100): cuabi.launch(s, cfg, k, buf, a, b)
        t1 = T(); e2 = g2.instantiate(); t2 = T()
        print("cuabi again: capture", us(t0, t1), "instantiate", us(t1, t2))
else:
    import cuda.core as cc
    dev = cc.Device(0); dev.set_current(); s = dev.create_stream()
    prog = cc.Program(SRC, code_type="c++", options=cc.ProgramOptions(arch=f"sm_{dev.arch}"))
    k = prog.compile("cubin").get_kernel("k")
    buf = dev.memory_resource.allocate(4096, stream=s); cfg = cc.LaunchConfig(grid=1, block=32)
    a, b = np.int32(5), np.float32(1.0)
    cc.launch(s, cfg, k, buf, a, b); s.sync()
    t0 = T(); gb = s.create_graph_builder(); gb.begin_building(); t1 = T()
    cc.launch(gb, cfg, k, buf, a, b); t2 = T()
    cc.launch(gb, cfg, k, buf, a, b); t3 = T()
    for _ in range(98): cc.launch(gb, cfg, k, buf, a, b)
    t4 = T(); gb.end_building(); t5 = T()
    print("cuda.core capture: begin", us(t0, t1), "launch1", us(t1, t2), "launch2", us(t2, t3),
          "98 more", us(t3, t4), "end", us(t4, t5), "total", us(t0, t5))
    t0 = T(); e = gb.complete(); t1 = T(); print("cuda.core first instantiate", us(t0, t1))
    for i in range(3):
        t0 = T(); gb = s.create_graph_builder(); gb.begin_building()
        for _ in range(100): cc.launch(gb, cfg, k, buf, a, b)
        gb.end_building(); t1 = T(); e2 = gb.complete(); t2 = T()
        print("cuda.core again: capture", us(t0, t1), "instantiate", us(t1, t2))
