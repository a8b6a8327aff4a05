"""Why cuabi's second instantiate from Python is a few percent over cuda.core's
(issue 24 item 3), in ONE process on the GPU machine, so process noise cancels:

    python3 scripts/diag_instantiate_same.py [--rounds 40]

Makes 100-kernel graphs five ways in the same context:
  cuabi      s.capture() and cuabi.launch (what bench_graph.py times)
  cuda.core  GraphBuilder and cuda.core.launch
  raw:fn     a driver capture of cuLaunchKernel with the CUfunction (cuabi's launch)
  raw:kern   a driver capture of cuLaunchKernelEx with the CUkernel (cuda.core's)
  raw:fnex   a driver capture of cuLaunchKernelEx with the CUfunction
prints what the driver says the first kernel node holds (function, kernel, context),
then times, round-robin, the driver's cuGraphInstantiateWithParams (flags 0) of each
graph and the two libraries' own instantiate calls (cuabi Graph.instantiate, cuda.core
GraphBuilder.complete) and cuabi_graph_instantiate called through plain ctypes, each
executable destroyed after it is timed. Medians in us."""
import argparse
import ctypes as C
import statistics
import time

import numpy as np

SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'
N = 100
cu = C.CDLL("libcuda.so.1")


def ok(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")


class InstParams(C.Structure):
    _fields_ = [("flags", C.c_uint64), ("hUploadStream", C.c_void_p),
                ("hErrNode_out", C.c_void_p), ("result_out", C.c_int)]


class KernelNodeParams(C.Structure):   # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", C.c_void_p), ("grid", C.c_uint * 3), ("block", C.c_uint * 3),
                ("shmem", C.c_uint), ("kernelParams", C.c_void_p), ("extra", C.c_void_p),
                ("kern", C.c_void_p), ("ctx", C.c_void_p)]


class LaunchConfig(C.Structure):       # CUlaunchConfig
    _fields_ = [("grid", C.c_uint * 3), ("block", C.c_uint * 3), ("shmem", C.c_uint),
                ("hStream", C.c_void_p), ("attrs", C.c_void_p), ("numAttrs", C.c_uint)]


def raw_instantiate(graph):
    e = C.c_void_p()
    p = InstParams()
    t0 = time.perf_counter()
    ok(cu.cuGraphInstantiateWithParams(C.byref(e), C.c_void_p(graph), C.byref(p)),
       "cuGraphInstantiateWithParams")
    t = (time.perf_counter() - t0) * 1e6
    ok(cu.cuGraphExecDestroy(e), "cuGraphExecDestroy")
    return t


def describe(name, graph):
    n = C.c_size_t(0)
    ok(cu.cuGraphGetNodes(C.c_void_p(graph), None, C.byref(n)), "cuGraphGetNodes")
    nodes = (C.c_void_p * n.value)()
    ok(cu.cuGraphGetNodes(C.c_void_p(graph), nodes, C.byref(n)), "cuGraphGetNodes")
    types = {}
    for nd in nodes:
        t = C.c_int()
        ok(cu.cuGraphNodeGetType(C.c_void_p(nd), C.byref(t)), "cuGraphNodeGetType")
        types[t.value] = types.get(t.value, 0) + 1
    kp = KernelNodeParams()
    r = cu.cuGraphKernelNodeGetParams_v2(C.c_void_p(nodes[0]), C.byref(kp))
    edges = C.c_size_t(0)
    cu.cuGraphGetEdges_v2(C.c_void_p(graph), None, None, None, C.byref(edges))
    print(f"  {name:10s} nodes {n.value} types {types} edges {edges.value}; node 0 "
          f"(rc {r}): func {kp.func or 0:#x} kern {kp.kern or 0:#x} ctx {kp.ctx or 0:#x} "
          f"grid {list(kp.grid)} block {list(kp.block)} params {bool(kp.kernelParams)} "
          f"extra {bool(kp.extra)}")


def raw_graph(stream, mode, fn, args_ptr):
    ok(cu.cuStreamBeginCapture_v2(stream, 0), "cuStreamBeginCapture")
    cfg = LaunchConfig()
    cfg.grid[:] = [1, 1, 1]
    cfg.block[:] = [32, 1, 1]
    cfg.hStream = stream
    for _ in range(N):
        if mode == "fn":
            ok(cu.cuLaunchKernel(C.c_void_p(fn), 1, 1, 1, 32, 1, 1, 0, stream, args_ptr, None),
               "cuLaunchKernel")
        else:
            ok(cu.cuLaunchKernelEx(C.byref(cfg), C.c_void_p(fn), args_ptr, None),
               "cuLaunchKernelEx")
    g = C.c_void_p()
    ok(cu.cuStreamEndCapture(stream, C.byref(g)), "cuStreamEndCapture")
    return g.value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    import cuabi
    import cuda.core as cc

    dev = cuabi.Device(0)
    dev.set_current()
    s = dev.create_stream(non_blocking=True)
    k = cuabi.Program(SRC).compile(arch=dev.arch).get_kernel("k")
    buf = cuabi.Buffer(4096, stream=s)
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    a, b = np.int32(5), np.float32(1.0)
    cuabi.launch(s, cfg, k, buf, a, b)
    s.sync()

    cdev = cc.Device(0)
    cdev.set_current()
    cs = cdev.create_stream()
    ck = cc.Program(SRC, code_type="c++", options=cc.ProgramOptions(arch="sm_" + cdev.arch)) \
        .compile("cubin").get_kernel("k")
    ccfg = cc.LaunchConfig(grid=1, block=32)
    cbuf = cdev.allocate(4096, stream=cs)
    cc.launch(cs, ccfg, ck, cbuf, a, b)
    cs.sync()

    def cuabi_graph():
        with s.capture() as g:
            for _ in range(N):
                cuabi.launch(s, cfg, k, buf, a, b)
        return g

    def cc_builder():
        gb = cs.create_graph_builder().begin_building()
        for _ in range(N):
            cc.launch(gb, ccfg, ck, cbuf, a, b)
        gb.end_building()
        return gb

    g = cuabi_graph()
    gb = cc_builder()
    cc_raw = None
    for get in (lambda: int(gb.graph_definition.handle), lambda: int(gb.handle),
                lambda: int(gb._mnff.graph),
                lambda: int(gb._h_graph), lambda: int(gb.graph.handle)):
        try:
            cc_raw = get()
            break
        except Exception:   # noqa: BLE001 - trying cuda.core's spellings
            pass
    if cc_raw is None:
        print("cuda.core GraphBuilder raw graph not found:",
              [n for n in dir(gb) if not n.startswith("__")])

    # Raw captures on a stream of our own, with the same buffer and arguments.
    rs = C.c_void_p()
    ok(cu.cuStreamCreate(C.byref(rs), 1), "cuStreamCreate")
    p, n_, f_ = C.c_void_p(buf.ptr), C.c_int(5), C.c_float(1.0)
    argv = (C.c_void_p * 3)(C.addressof(p), C.addressof(n_), C.addressof(f_))
    fn, kern = k.function(dev), k.raw
    graphs = {"cuabi": g.raw, "cuda.core": cc_raw,
              "raw:fn": raw_graph(rs, "fn", fn, argv), "raw:kern": raw_graph(rs, "ex", kern, argv),
              "raw:fnex": raw_graph(rs, "ex", fn, argv)}
    graphs = {k_: v for k_, v in graphs.items() if v}
    print(f"CUfunction {fn:#x} CUkernel {kern:#x}")
    for name, gr in graphs.items():
        describe(name, gr)

    from cuabi._lib import raw as c_raw
    c_inst, c_release = c_raw("cuabi_graph_instantiate"), c_raw("cuabi_graph_exec_release")
    gh = C.c_void_p(g.cuabi_handle)
    times = {name: [] for name in graphs}
    from cuabi._lib import fast
    fast_inst = getattr(fast, "graph_instantiate", None)

    def timed_raw(gr):
        return lambda: raw_instantiate(gr)

    def lib_call(fn):
        t0 = time.perf_counter()
        e = fn()
        t = (time.perf_counter() - t0) * 1e6
        e.close()
        return t

    def lib_call_after(fn, then):
        t0 = time.perf_counter()
        h = fn()
        t = (time.perf_counter() - t0) * 1e6
        then(h).close()
        return t

    def c_call():
        out = C.c_void_p()
        t0 = time.perf_counter()
        st = c_inst(C.byref(out), gh, None)
        t = (time.perf_counter() - t0) * 1e6
        assert st == 0, st
        c_release(out)
        return t

    def fast_call():
        t0 = time.perf_counter()
        h = fast_inst(g)
        t = (time.perf_counter() - t0) * 1e6
        c_release(C.c_void_p(h))
        return t

    ways = {name: timed_raw(gr) for name, gr in graphs.items()}
    ways["cuabi Graph.instantiate"] = lambda: lib_call(g.instantiate)
    ways["cuabi C call (ctypes)"] = c_call
    if fast_inst is not None:
        ways["cuabi _fast.graph_instantiate"] = fast_call
        from cuabi._graph import GraphExec
        ways["cuabi GraphExec._wrap(_fast...)"] = lambda: lib_call(lambda: GraphExec._wrap(fast_inst(g)))
        ways["cuabi fast, wrap untimed"] = lambda: lib_call_after(lambda: fast_inst(g), GraphExec._wrap)
    ways["cuda.core complete"] = lambda: lib_call(gb.complete)
    names = list(ways)
    times = {name: [] for name in names}
    for r in range(args.rounds):       # each round starts one later: no fixed neighbours
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            times[name].append(ways[name]())
    import os
    import threading
    print(f"threads: python {threading.active_count()}, process "
          f"{len(os.listdir('/proc/self/task'))}; backend {cuabi.backend}")
    print(f"instantiate, median of {args.rounds} (us), min:")
    for name, v in times.items():
        print(f"  {name:24s} {statistics.median(v):8.1f}  {min(v):8.1f}")


if __name__ == "__main__":
    main()
