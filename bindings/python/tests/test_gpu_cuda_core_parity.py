"""cuda.core's documented behaviour, run with both libraries on the GPU
(issue 24 item 2): each scenario is written once against cuda.core's API and
run with `core` = cuda.core and `core` = cuabi; the results must be equal
(and right). Skipped without a GPU or without cuda.core. The lead runs it:

    CUABI_LIBRARY=build/.libs/libcuabi.so PYTHONPATH=bindings/python \\
        python3 -m pytest -q bindings/python/tests/test_gpu_cuda_core_parity.py
"""
import numpy as np
import pytest

import cuabi

KERNELS = r"""
template <typename T>
__global__ void saxpy(T a, const T *x, const T *y, T *out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
extern "C" __global__ void grid_facts(unsigned int *out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = gridDim.x; out[1] = gridDim.y; out[2] = blockDim.x;
    }
}
extern "C" __global__ void add_one(int *v) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *v += 1;
}
"""


@pytest.fixture(scope="module")
def libs(gpu):
    try:
        import cuda.core as cc
        cc.Device, cc.LaunchConfig, cc.Program
    except (ImportError, AttributeError):
        pytest.skip("cuda.core is not installed (pip install cuda-core)")
    cc.Device(0).set_current()
    cuabi.Device(0).set_current()
    return {"cuda.core": cc, "cuabi": cuabi}


def both(libs, scenario):
    """scenario(core) with each library; the results, checked equal."""
    got = {name: scenario(core) for name, core in libs.items()}
    assert got["cuabi"] == got["cuda.core"], got
    return got["cuabi"]


def _compile(core, dev):
    opts = core.ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    return core.Program(KERNELS, code_type="c++", options=opts).compile(
        "cubin", name_expressions=("saxpy<float>",))


def _host_array(core, nbytes, dtype):
    """Pinned host memory viewed by numpy through DLPack, as the examples do."""
    buf = core.LegacyPinnedMemoryResource().allocate(nbytes)
    return buf, np.from_dlpack(buf).view(dtype)


# ---- devices

def test_device_facts(libs):
    def facts(core):
        dev = core.Device()
        dev.set_current()
        return (dev.arch, tuple(dev.compute_capability), dev.compute_capability.major,
                dev.device_id, int(dev), dev.name, dev.pci_bus_id, dev.uuid)
    arch, cc, major, *_ = both(libs, facts)
    assert arch.isdigit() and arch == f"{cc[0]}{cc[1]}" and major == cc[0]


def test_every_device_property(libs):
    names = [n for n in dir(libs["cuda.core"].Device(0).properties) if not n.startswith("_")]
    assert len(names) >= 100

    def props(core):
        p = core.Device(0).properties
        out = {}
        for n in names:
            try:
                out[n] = getattr(p, n)
            except Exception as e:          # a driver without the attribute: both say so
                out[n] = type(e).__name__ != ""
        return out
    got = both(libs, props)
    assert got["multiprocessor_count"] > 0 and isinstance(got["integrated"], bool)


# ---- streams and events

def test_streams(libs):
    def streams(core):
        dev = core.Device()
        s = dev.create_stream()
        t = dev.create_stream(options=core.StreamOptions(nonblocking=False, priority=0))
        out = (int(dev.default_stream.handle), int(s.handle) not in (0, 1, 2),
               s.__cuda_stream__()[1] == int(s.handle), int(t.handle) != int(s.handle))
        s.sync()
        s.close()
        t.close()
        return out
    assert both(libs, streams)[0] == 1                    # CU_STREAM_LEGACY


def test_create_stream_wraps_the_other_librarys_stream(libs):
    cc = libs["cuda.core"]
    theirs = cc.Device().create_stream()
    mine = cuabi.Device().create_stream(theirs)
    assert mine.handle == int(theirs.handle)
    ours = cuabi.Device().create_stream()
    back = cc.Device().create_stream(ours)
    assert int(back.handle) == ours.handle
    for s in (back, mine, theirs, ours):
        s.close()


def test_events(libs):
    def events(core):
        dev = core.Device()
        s = dev.create_stream()
        a = dev.create_event(options=core.EventOptions(timing_enabled=True))
        b = dev.create_event(options=core.EventOptions(timing_enabled=True))
        s.record(a)
        s.record(b)
        b.sync()
        ms = b - a
        plain = s.record()
        plain.sync()
        return isinstance(ms, float) and ms >= 0.0, b.is_done, plain.is_done
    assert both(libs, events) == (True, True, True)


# ---- memory

def test_buffers_and_resources(libs):
    def buffers(core):
        dev = core.Device()
        s = dev.create_stream()
        mr = dev.memory_resource
        buf = dev.allocate(1024, stream=s)
        facts = (buf.size, buf.is_device_accessible, buf.is_host_accessible, buf.device_id,
                 mr.is_device_accessible, mr.is_host_accessible, int(buf.handle) != 0,
                 buf.__dlpack_device__())
        pinned, host = _host_array(core, 1024, np.uint8)
        host[:] = np.arange(1024) % 251
        buf.copy_from(pinned, stream=s)
        back = mr.allocate(1024, stream=s)
        buf.copy_to(back, stream=s)
        out_buf, out = _host_array(core, 1024, np.uint8)
        back.copy_to(out_buf, stream=s)
        s.sync()
        data = out.tobytes()
        buf.close(s)
        back.close(s)
        s.sync()
        closed = int(buf.handle)
        pinned_facts = (pinned.is_host_accessible, pinned.is_device_accessible,
                        pinned.__dlpack_device__()[0])
        return facts, data, closed, pinned_facts
    facts, data, closed, pinned_facts = both(libs, buffers)
    assert data == (np.arange(1024) % 251).astype(np.uint8).tobytes()
    assert closed == 0 and facts[:4] == (1024, True, False, 0)
    assert pinned_facts == (True, True, 3)


def test_buffer_fill(libs):
    def fill(core):
        dev = core.Device()
        s = dev.create_stream()
        buf = dev.allocate(64, stream=s)
        buf.fill(7, stream=s)
        out_buf, out = _host_array(core, 64, np.uint8)
        buf.copy_to(out_buf, stream=s)
        s.sync()
        return out.tobytes()
    assert both(libs, fill) == b"\x07" * 64


# ---- compile and launch

def test_compile_and_launch_saxpy(libs):
    def saxpy(core):
        dev = core.Device()
        s = dev.create_stream()
        mod = _compile(core, dev)
        k = mod.get_kernel("saxpy<float>")
        n = 1000
        bufs = []
        for values in (np.arange(n, dtype=np.float32), np.ones(n, np.float32)):
            hb, h = _host_array(core, 4 * n, np.float32)
            h[:] = values
            d = dev.allocate(4 * n, stream=s)
            d.copy_from(hb, stream=s)
            bufs.append(d)
        out = dev.allocate(4 * n, stream=s)
        core.launch(s, core.LaunchConfig(grid=(n + 127) // 128, block=128), k,
                    np.float32(2.0), bufs[0], bufs[1], out, np.uint32(n))
        hb, h = _host_array(core, 4 * n, np.float32)
        out.copy_to(hb, stream=s)
        s.sync()
        return (k.num_arguments, h.tolist())
    nargs, values = both(libs, saxpy)
    assert nargs == 5 and values == (2 * np.arange(1000, dtype=np.float32) + 1).tolist()


def test_cluster_grid_counts_clusters(libs, gpu):
    if gpu.compute_capability[0] < 9:
        pytest.skip("thread-block clusters need sm_90")

    def facts(core):
        dev = core.Device()
        s = dev.create_stream()
        k = _compile(core, dev).get_kernel("grid_facts")
        hb, h = _host_array(core, 12, np.uint32)
        d = dev.allocate(12, stream=s)
        core.launch(s, core.LaunchConfig(grid=3, cluster=2, block=32), k, d)
        d.copy_to(hb, stream=s)
        s.sync()
        return h.tolist()
    assert both(libs, facts) == [6, 1, 32]          # 3 clusters of 2 blocks


def test_launch_config_positional_order(libs, gpu):
    """LaunchConfig(grid, cluster, block, shmem_size, is_cooperative):
    the same positional call means the same launch in both libraries."""
    has_clusters = gpu.compute_capability[0] >= 9

    def facts(core):
        dev = core.Device()
        s = dev.create_stream()
        k = _compile(core, dev).get_kernel("grid_facts")
        hb, h = _host_array(core, 12, np.uint32)
        d = dev.allocate(12, stream=s)
        got = []
        configs = [core.LaunchConfig(5, None, 64), core.LaunchConfig((5, 2), None, (64, 2), 0)]
        if has_clusters:
            configs.append(core.LaunchConfig(3, 2, 32, 0, False))
        for cfg in configs:
            core.launch(s, cfg, k, d)
            d.copy_to(hb, stream=s)
            s.sync()
            got.append((cfg.grid, cfg.cluster, cfg.block, cfg.shmem_size,
                        bool(cfg.is_cooperative), h.tolist()))
        return got
    got = both(libs, facts)
    assert got[0] == ((5, 1, 1), None, (64, 1, 1), 0, False, [5, 1, 64])
    assert got[1][5] == [5, 2, 64]
    if has_clusters:
        assert got[2][:3] == ((3, 1, 1), (2, 1, 1), (32, 1, 1)) and got[2][5] == [6, 1, 32]


# ---- graphs

def test_graph_build_complete_launch_update(libs):
    def graphs(core):
        dev = core.Device()
        s = dev.create_stream()
        k = _compile(core, dev).get_kernel("add_one")
        hb, h = _host_array(core, 8, np.int32)
        h[:] = 0
        cfg = core.LaunchConfig(grid=1, block=1)

        def build(ptr):
            gb = dev.create_graph_builder().begin_building()
            core.launch(gb, cfg, k, ptr)
            core.launch(gb, cfg, k, ptr)
            return gb.end_building()
        first = build(h[0:].ctypes.data)
        second = build(h[1:].ctypes.data)
        g = first.complete()
        g.upload(s)
        g.launch(s)
        s.sync()
        after_first = h.tolist()
        g.update(second)
        g.launch(s)
        s.sync()
        result = (after_first, h.tolist(), int(g.handle) != 0)
        g.close()
        first.close()
        second.close()
        return result
    assert both(libs, graphs) == ([2, 0], [2, 2], True)


def test_stream_graph_builder_with_cupy_style_pointers(libs):
    def capture(core):
        dev = core.Device()
        s = dev.create_stream()
        k = _compile(core, dev).get_kernel("add_one")
        d = dev.allocate(4, stream=s)
        d.fill(0, stream=s)
        gb = s.create_graph_builder()
        gb.begin_building()
        for _ in range(3):
            core.launch(gb, core.LaunchConfig(grid=1, block=1), k, int(d.handle))
        g = gb.end_building().complete()
        for _ in range(2):
            g.launch(s)
        hb, h = _host_array(core, 4, np.int32)
        d.copy_to(hb, stream=s)
        s.sync()
        return int(h[0])
    assert both(libs, capture) == 6


def test_host_launch_in_order_and_in_a_graph_builder(libs):
    """host_launch(stream, fn, *args): after the work before it; on a
    GraphBuilder a host node run at every launch of the graph."""
    def host(core):
        if not hasattr(core, "host_launch"):
            pytest.skip("this cuda.core has no host_launch")
        dev = core.Device()
        s = dev.create_stream()
        k = _compile(core, dev).get_kernel("add_one")
        hb, h = _host_array(core, 4, np.int32)
        h[:] = 0
        seen = []
        for i in range(3):
            core.launch(s, core.LaunchConfig(grid=1, block=1), k, h.ctypes.data)
            core.host_launch(s, lambda i: seen.append((i, int(h[0]))), i)
        s.sync()
        gb = dev.create_graph_builder().begin_building()
        core.launch(gb, core.LaunchConfig(grid=1, block=1), k, h.ctypes.data)
        core.host_launch(gb, lambda: seen.append(("node", int(h[0]))))
        g = gb.end_building().complete()
        g.launch(s)
        g.launch(s)
        s.sync()
        g.close()
        gb.close()
        return seen
    assert both(libs, host) == [(0, 1), (1, 2), (2, 3), ("node", 4), ("node", 5)]


# ---- explicit graphs (cuda.core 1.2's GraphDefinition, GraphNode, GraphCondition)

GRAPH_KERNELS = r"""
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
extern "C" __global__ void bump(int *v, int by) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *v += by;
}
extern "C" __global__ void loop_step(unsigned long long cond, int *count, int limit) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *count += 1;
        cudaGraphSetConditional(cond, *count < limit ? 1u : 0u);
    }
}
"""


def _graph_mod(core):
    import importlib
    g = importlib.import_module(core.__name__ + ".graph")
    if not hasattr(g, "GraphDefinition") or not hasattr(g, "GraphCondition"):
        pytest.skip(f"{core.__name__} has no explicit-graph API")
    return g


def _graph_kernels(core, dev):
    opts = core.ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    return core.Program(GRAPH_KERNELS, code_type="c++", options=opts).compile("cubin")


def test_explicit_graph_alloc_memset_launch_copy_free(libs):
    """GraphDefinition: allocate -> memset -> launch -> memcpy to pinned host
    -> deallocate, launched twice; what the nodes and edges are."""
    def explicit(core):
        G = _graph_mod(core)
        dev = core.Device()
        s = dev.create_stream()
        bump = _graph_kernels(core, dev).get_kernel("bump")
        hb, h = _host_array(core, 16, np.int32)
        h[:] = -1
        g = G.GraphDefinition()
        a = g.allocate(16)
        m = a.memset(a.dptr, 0, 16)
        k = m.launch(core.LaunchConfig(grid=1, block=32), bump, a.dptr, np.int32(7))
        c = k.memcpy(h.ctypes.data, a.dptr, 16, dst_owner=hb)
        f = c.deallocate(a.dptr)
        kinds = [type(n).__name__ for n in (a, m, k, c, f)]
        facts = (len(g.nodes()), len(g.edges()), a.bytesize >= 16, f.dptr == a.dptr,
                 k.grid, k.block, m.element_size, m.width, c.size,
                 {int(p.handle) for p in k.pred} == {int(m.handle)}, len(a.succ))
        exe = g.instantiate()
        out = []
        for _ in range(2):
            exe.launch(s)
            s.sync()
            out.append(h.tolist())
        exe.close()
        return kinds, facts, out
    kinds, facts, out = both(libs, explicit)
    assert kinds == ["AllocNode", "MemsetNode", "KernelNode", "MemcpyNode", "FreeNode"]
    assert facts[:2] == (5, 4) and out == [[7, 0, 0, 0], [7, 0, 0, 0]]


def test_explicit_graph_edges_as_sets_and_destroy(libs):
    def edges(core):
        G = _graph_mod(core)
        dev = core.Device()
        s = dev.create_stream()
        bump = _graph_kernels(core, dev).get_kernel("bump")
        hb, h = _host_array(core, 4, np.int32)
        h[:] = 0
        cfg = core.LaunchConfig(grid=1, block=1)
        g = G.GraphDefinition()
        a = g.launch(cfg, bump, h.ctypes.data, np.int32(1))
        b = a.launch(cfg, bump, h.ctypes.data, np.int32(10))
        c = b.launch(cfg, bump, h.ctypes.data, np.int32(100))
        j = g.join(a, c)
        before = (len(j.pred), len(a.succ), len(g.edges()))
        b.destroy()
        after = (b.is_valid, len(g.nodes()), len(c.pred), len(a.succ))
        c.pred.add(a)
        c.succ.clear()
        j.pred = [c]
        final = (len(g.edges()), len(j.pred), len(a.succ))
        exe = g.instantiate()
        exe.launch(s)
        s.sync()
        return before, after, final, int(h[0])
    assert both(libs, edges) == ((2, 2, 4), (False, 3, 0, 1), (2, 1, 1), 101)


def test_explicit_graph_conditionals(libs):
    """create_condition, while_loop set from device code, if_else on a
    default, switch picking a branch; bodies built through the explicit API."""
    def conds(core):
        G = _graph_mod(core)
        dev = core.Device()
        s = dev.create_stream()
        ks = _graph_kernels(core, dev)
        bump, step = ks.get_kernel("bump"), ks.get_kernel("loop_step")
        hb, h = _host_array(core, 16, np.int32)
        h[:] = 0
        p = h.ctypes.data
        cfg = core.LaunchConfig(grid=1, block=1)
        g = G.GraphDefinition()
        loop = g.create_condition(default_value=1)
        w = g.while_loop(loop)
        w.body.launch(cfg, step, loop, p, np.int32(5))
        pick = g.create_condition(default_value=0)
        ie = w.if_else(pick)
        ie.then.launch(cfg, bump, p + 4, np.int32(1))
        ie.else_.launch(cfg, bump, p + 4, np.int32(100))
        sw_cond = g.create_condition(default_value=2)
        sw = ie.switch(sw_cond, 3)
        for i, branch in enumerate(sw.branches):
            branch.launch(cfg, bump, p + 8, np.int32(10 ** i))
        never = g.create_condition(default_value=0)
        nested = sw.branches[2].if_then(never)
        nested.then.launch(cfg, bump, p + 12, np.int32(1))
        facts = (type(w).__name__, type(ie).__name__, type(sw).__name__, len(sw.branches),
                 isinstance(loop, G.GraphCondition), loop == loop, loop != pick)
        exe = g.instantiate()
        exe.launch(s)
        s.sync()
        return facts, h.tolist()
    facts, values = both(libs, conds)
    # loop ran 5 times; else ran; switch ran branch 2; the nested if_then did not.
    assert values == [5, 100, 100, 0]
    assert facts[:4] == ("WhileNode", "IfElseNode", "SwitchNode", 3)


def test_explicit_graph_callbacks_and_embed(libs):
    def calls(core):
        G = _graph_mod(core)
        dev = core.Device()
        s = dev.create_stream()
        bump = _graph_kernels(core, dev).get_kernel("bump")
        hb, h = _host_array(core, 4, np.int32)
        h[:] = 0
        cfg = core.LaunchConfig(grid=1, block=1)
        child = G.GraphDefinition()
        child.launch(cfg, bump, h.ctypes.data, np.int32(3))
        g = G.GraphDefinition()
        e = g.embed(child)
        seen = []
        cb = e.callback(lambda: seen.append(int(h[0])))
        exe = g.instantiate()
        for _ in range(2):
            exe.launch(s)
        s.sync()
        return type(e).__name__, type(cb).__name__, seen
    assert both(libs, calls) == ("ChildGraphNode", "HostCallbackNode", [3, 6])


def test_graph_builder_split_join_callback(libs):
    def fork(core):
        dev = core.Device()
        s = dev.create_stream()
        bump = _graph_kernels(core, dev).get_kernel("bump")
        hb, h = _host_array(core, 8, np.int32)
        h[:] = 0
        cfg = core.LaunchConfig(grid=1, block=1)
        gb = dev.create_graph_builder().begin_building()
        if not hasattr(gb, "split"):
            pytest.skip(f"{core.__name__}'s GraphBuilder has no split")
        b1, b2 = gb.split(2)
        core.launch(b1, cfg, bump, h.ctypes.data, np.int32(1))
        core.launch(b2, cfg, bump, h[1:].ctypes.data, np.int32(2))
        required = gb.is_join_required
        gb = type(gb).join(b1, b2)
        seen = []
        gb.callback(lambda: seen.append(h.tolist()))
        g = gb.end_building().complete()
        g.launch(s)
        g.launch(s)
        s.sync()
        g.close()
        gb.close()
        return required, seen
    # the builder that was split never needs joining (cuda.core: only forked ones)
    assert both(libs, fork) == (False, [[1, 2], [2, 4]])


# ---- views and DLPack

def test_strided_memory_view_of_host_and_device(libs):
    def views(core):
        from importlib import import_module
        utils = import_module(core.__name__ + ".utils")
        a = np.arange(12, dtype=np.int16).reshape(3, 4)
        v = utils.StridedMemoryView(a, -1)
        host = (v.ptr == a.ctypes.data, v.shape, tuple(v.strides or (4, 1)), v.dtype,
                v.device_id, v.is_device_accessible, v.readonly)
        dev = core.Device()
        s = dev.create_stream()
        buf = dev.allocate(48, stream=s)
        d = utils.StridedMemoryView.from_buffer(buf, (3, 4), dtype=np.dtype(np.float32))
        device = (d.ptr == int(buf.handle), d.shape, d.dtype, d.device_id,
                  d.is_device_accessible)
        return host, device
    host, device = both(libs, views)
    assert host[1:] == ((3, 4), (4, 1), np.int16, -1, False, False)
    assert device[0] and device[2] == np.float32 and device[4]


def test_buffer_dlpack_into_numpy(libs):
    def dl(core):
        buf, arr = _host_array(core, 16, np.int32)
        arr[:] = (1, 2, 3, 4)
        again = np.from_dlpack(buf)
        return again.dtype.itemsize, again.shape, again.view(np.int32).tolist()
    assert both(libs, dl) == (1, (16,), [1, 2, 3, 4])


# ---- issue 24 item 1, later names: registry, managed buffers, resources,
# system devices, checkpoint checks, array formats

def test_memory_resource_registry(libs):
    import uuid as uuidlib

    def registry(core):
        dev = core.Device()
        if not hasattr(core.DeviceMemoryResource, "from_registry"):
            pytest.skip(f"{core.__name__} has no DeviceMemoryResource.from_registry")
        # cuda.core registers IPC-enabled pools (their uuid; its register of
        # a pool without IPC fails)
        mr = core.DeviceMemoryResource(dev.device_id, core.DeviceMemoryResourceOptions(
            ipc_enabled=True, max_size=1 << 21))
        u = getattr(mr, "uuid", None) or uuidlib.uuid4()
        first = mr.register(u) is mr
        again = core.DeviceMemoryResource.from_registry(u) is mr
        try:
            core.DeviceMemoryResource.from_registry(uuidlib.uuid4())
            missing = None
        except RuntimeError as e:
            missing = "was not found" in str(e)
        return first, again, missing
    assert both(libs, registry) == (True, True, True)


def test_managed_memory_resource_allocates_a_managed_buffer(libs):
    def managed(core):
        dev = core.Device()
        if not hasattr(core, "ManagedBuffer"):
            pytest.skip(f"{core.__name__} has no ManagedBuffer")
        if not dev.properties.concurrent_managed_access:
            pytest.skip("no concurrent managed access")
        s = dev.create_stream()
        mr = core.ManagedMemoryResource()
        buf = mr.allocate(1 << 20, stream=s)
        facts = [type(buf).__name__, isinstance(buf, core.Buffer), buf.is_managed]
        buf.read_mostly = True
        facts.append(buf.read_mostly)
        buf.preferred_location = dev
        facts.append(buf.preferred_location == dev)
        buf.accessed_by.add(dev)
        facts.append(dev in buf.accessed_by)
        facts.append(len(buf.accessed_by))
        buf.accessed_by.discard(dev)
        facts.append(len(buf.accessed_by))
        buf.prefetch(dev, stream=s)
        s.sync()
        buf.close(s)
        s.sync()
        return facts
    expected = ["ManagedBuffer", True, True, True, True, True, 1, 0]
    assert managed(libs["cuabi"]) == expected
    # cuda.core 1.2.0's read_mostly setter raised CUDA_ERROR_NOT_SUPPORTED on an
    # H100 with the 580 driver (2026-11-28) where cuMemAdvise(SET_READ_MOSTLY)
    # itself works (cuabi's call above): compared only where cuda.core gets through.
    try:
        theirs = managed(libs["cuda.core"])
    except Exception as e:          # cuda.core's CUDAError
        if "CUDA_ERROR_NOT_SUPPORTED" not in str(e):
            raise
    else:
        assert theirs == expected


def test_context_and_stream_resources(libs):
    def resources(core):
        dev = core.Device()
        if not hasattr(core.Stream, "resources") or not hasattr(core.Context, "resources"):
            pytest.skip(f"{core.__name__} has no Stream/Context.resources")
        n = dev.resources.sm.sm_count
        ctx_n = dev.context.resources.sm.sm_count
        s = dev.create_stream()
        s_n = s.resources.sm.sm_count
        s.close()
        return n == ctx_n == s_n, n > 0
    assert both(libs, resources) == (True, True)


def test_to_system_device(libs):
    def system(core):
        dev = core.Device()
        if not hasattr(dev, "to_system_device"):
            pytest.skip(f"{core.__name__} has no Device.to_system_device")
        try:
            sd = dev.to_system_device()
        except (RuntimeError, ImportError) as e:
            pytest.skip(f"no NVML here: {e}")
        return sd.uuid.removeprefix("GPU-") == dev.uuid, sd.pci_info.bus_id[-7:].lower()
    facts = both(libs, system)
    assert facts[0]


def test_checkpoint_argument_checks(libs):
    def checks(core):
        from importlib import import_module
        cp = import_module(core.__name__ + ".checkpoint")
        out = []
        for bad in (True, "1", 0, -3):
            try:
                cp.Process(bad)
                out.append(None)
            except (TypeError, ValueError) as e:
                out.append((type(e).__mro__[0] is TypeError or isinstance(e, TypeError), str(e)
                            .split(": ")[-1]))
        p = cp.Process(2**20)
        for bad in (1.5, -1):
            try:
                p.lock(bad)
                out.append(None)
            except (TypeError, ValueError) as e:
                out.append((isinstance(e, TypeError), str(e).split(": ")[-1]))
            except RuntimeError as e:       # cuda.core checks its bindings first
                pytest.skip(f"{core.__name__}: no checkpoint support here: {e}")
        try:
            p.restore([("a", "b")])
        except TypeError as e:
            out.append(str(e).split(": ")[-1][:30])
        except RuntimeError as e:
            pytest.skip(f"{core.__name__}: no checkpoint support here: {e}")
        return out
    both(libs, checks)


def test_opaque_array_format_is_an_array_format_type(libs):
    def fmt(core):
        from importlib import import_module
        tex = import_module(core.__name__ + ".texture")
        typing = import_module(core.__name__ + ".typing")
        dev = core.Device()
        a = dev.create_opaque_array(tex.OpaqueArrayOptions(shape=(16, 8), format="float32",
                                                           num_channels=2))
        f = a.format
        out = (type(f).__name__, f == typing.ArrayFormatType.FLOAT32, str(f.value))
        a.close()
        return out
    assert both(libs, fmt) == ("ArrayFormatType", True, "float32")


def test_workqueue_resource(libs):
    def workqueue(core):
        dev = core.Device()
        if not hasattr(core, "WorkqueueResourceOptions"):
            pytest.skip(f"{core.__name__} has no WorkqueueResource")
        try:
            wq = dev.resources.workqueue
        except RuntimeError as e:            # a driver before CUDA 13.1
            return ("refused", "13.1" in str(e))
        limit = wq.concurrency_limit
        wq.configure(core.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced",
                                                   concurrency_limit=2))
        groups, _ = dev.resources.sm.split(core.SMResourceOptions(count=16))
        ctx = dev.create_context(core.ContextOptions(resources=[groups[0], wq]))
        got = ctx.resources.workqueue
        out = (limit, got.concurrency_limit, str(got.sharing_scope))
        ctx.close()
        return out
    print(both(libs, workqueue))


def test_graph_builder_conditionals_and_embed(libs):
    """GraphBuilder (issue 24): create_condition, while_loop, if_else, switch,
    if_then nested in a body, embed -- each body built by its own builder --
    with cuda.core and with cuabi, launched twice: the same counts."""
    def build(core):
        dev = core.Device()
        s = dev.create_stream()
        ks = _graph_kernels(core, dev)
        bump, step = ks.get_kernel("bump"), ks.get_kernel("loop_step")
        hb, h = _host_array(core, 32, np.int32)
        h[:] = 0
        p = h.ctypes.data
        cfg = core.LaunchConfig(grid=1, block=32)
        child = s.create_graph_builder().begin_building()
        core.launch(child, cfg, bump, p + 20, np.int32(1000))
        child.end_building()
        gb = s.create_graph_builder().begin_building()
        core.launch(gb, cfg, bump, p + 16, np.int32(1))               # h[4]: before
        c_loop = gb.create_condition(1)
        body = gb.while_loop(c_loop).begin_building()
        core.launch(body, cfg, step, c_loop, p, np.int32(5))           # h[0] counts to 5
        inner = body.if_then(body.create_condition(1)).begin_building()
        core.launch(inner, cfg, bump, p + 24, np.int32(1))             # h[6]: 5 a launch
        inner.end_building()
        body.end_building()
        then, else_ = gb.if_else(gb.create_condition(0))
        for b, by in ((then, 1), (else_, 10)):
            b.begin_building()
            core.launch(b, cfg, bump, p + 4, np.int32(by))             # h[1]: else
            b.end_building()
        cases = gb.switch(gb.create_condition(2), 3)
        for i, b in enumerate(cases):
            b.begin_building()
            core.launch(b, cfg, bump, p + 8, np.int32(10 ** i))        # h[2]: case 2
            b.end_building()
        gb.embed(child)                                                # h[5]: +1000
        core.launch(gb, cfg, bump, p + 12, np.int32(1))                # h[3]: after
        gb.end_building()
        exe = gb.complete()
        out = []
        for _ in range(2):
            h[0] = 0                                                   # the loop counter
            exe.launch(s)
            s.sync()
            out.append(h[:7].tolist())
        for b in (body, inner, then, else_, child, gb) + tuple(cases):
            b.close()
        return out
    out = both(libs, build)
    assert out == [[5, 10, 100, 1, 1, 1000, 5], [5, 20, 200, 2, 2, 2000, 10]]
