"""CUDA graphs on a GPU (skipped without one): the segmented reduction of 64
batches captured and built node by node, updates in place, a conditional
while loop, a graph outliving the Python objects that built it, 8 threads
replaying their own executables, torch and CuPy work captured with cuabi's,
cuda.core's spellings, host_launch in stream order and inside captures (and
refused inside torch's), and bad input."""
import gc
import threading

import numpy as np
import pytest

import cuabi

SEGRED = r'''
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
'''

# The kernels of tests/fixtures/graph_kernels.h (loop_body sets a conditional handle).
KERNELS = r'''
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
extern "C" __global__ void add_one(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
extern "C" __global__ void scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void loop_body(unsigned long long handle, int *counter, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int c = ++*counter;
        cudaGraphSetConditional(handle, c < n ? 1u : 0u);
    }
}
'''

BATCHES, SEGS, SEG_LEN = 64, 16, 300


@pytest.fixture(scope="module")
def k(gpu):
    code = cuabi.Program(KERNELS).compile(arch=gpu.arch)
    seg = cuabi.Program(SEGRED).compile(arch=gpu.arch, name_expressions=["segred<float, 256>"])
    return {"add_one": code.get_kernel("add_one"), "scale": code.get_kernel("scale"),
            "loop_body": code.get_kernel("loop_body"),
            "segred": seg.get_kernel("segred<float, 256>")}


def test_capture_and_explicit_segred_agree(gpu, k):
    rng = np.random.default_rng(3)
    x = rng.integers(-6, 7, BATCHES * SEGS * SEG_LEN).astype(np.float32)
    offsets = (np.arange(SEGS + 1) * SEG_LEN).astype(np.int32)
    s = gpu.create_stream(non_blocking=False)
    dx, doff = cuabi.Buffer.from_host(x, stream=s), cuabi.Buffer.from_host(offsets, stream=s)
    outs = [cuabi.Buffer(4 * BATCHES * SEGS, stream=s) for _ in range(2)]
    cfg = cuabi.LaunchConfig(grid=SEGS, block=256)
    batch = 4 * SEGS * SEG_LEN

    with s.capture() as captured:
        for b in range(BATCHES):
            cuabi.launch(s, cfg, k["segred"], dx.ptr + b * batch, outs[0].ptr + 4 * b * SEGS, doff)
    explicit = cuabi.Graph(gpu)
    for b in range(BATCHES):
        explicit.add_kernel(k["segred"], cfg, dx.ptr + b * batch, outs[1].ptr + 4 * b * SEGS,
                            doff)
    assert len(captured) == len(explicit) == BATCHES
    for g in (captured, explicit):
        g.instantiate().launch(s)
    got = [np.frombuffer(o.to_bytes(stream=s), np.float32) for o in outs]
    s.sync()
    np.testing.assert_array_equal(got[0], got[1])
    want = x.reshape(BATCHES * SEGS, SEG_LEN).sum(axis=1)
    np.testing.assert_allclose(got[0], want, atol=1e-3)


def test_update_without_reinstantiation(gpu, k):
    n = 1024
    s = gpu.create_stream(non_blocking=False)
    x = cuabi.Buffer.from_host(np.ones(n, np.float32), stream=s)
    y = cuabi.Buffer.from_host(np.ones(n, np.float32), stream=s)
    cfg = cuabi.LaunchConfig(grid=n // 128, block=128)
    g = cuabi.Graph(gpu)
    node = g.add_kernel(k["scale"], cfg, x, np.float32(2), np.int32(n))
    exe = g.instantiate()
    raw = exe.raw
    exe.launch(s)
    exe.update_kernel(node, y, np.float32(5), np.int32(n))
    exe.launch(s)
    exe.update_kernel(node, grid=1)                  # same arguments, 128 elements
    exe.launch(s)
    xs = np.frombuffer(x.to_bytes(stream=s), np.float32)
    ys = np.frombuffer(y.to_bytes(stream=s), np.float32)
    s.sync()
    assert xs[0] == 2 and ys[0] == 25 and ys[-1] == 5
    # a whole update from a graph built the same way; then another topology
    g2 = cuabi.Graph(gpu)
    n2 = g2.add_kernel(k["scale"], cfg, x, np.float32(3), np.int32(n))
    exe.update(g2)
    exe.launch(s)
    g2.add_kernel(k["scale"], cfg, x, np.float32(3), np.int32(n), depends_on=n2)
    with pytest.raises(cuabi.GraphUpdateError) as e:
        exe.update(g2)
    assert e.value.update_result != "success"
    exe.launch(s)
    s.sync()
    assert np.frombuffer(x.to_bytes(), np.float32)[0] == 18
    assert exe.raw == raw


def test_conditional_while_loop_runs_n_times(gpu, k):
    s = gpu.create_stream(non_blocking=False)
    counter = cuabi.Buffer(4, stream=s)
    g = cuabi.Graph(gpu)
    try:
        h = g.conditional_handle(default=1)
    except cuabi.NotSupportedError as e:
        pytest.skip(f"no conditional nodes here: {e}")
    reset = g.add_memset(counter, 0, width=4)
    loop, body = g.add_while(h, depends_on=reset)
    body.add_kernel(k["loop_body"], cuabi.LaunchConfig(block=32), h, counter, np.int32(23))
    exe = g.instantiate()
    for _ in range(3):
        exe.launch(s)
        s.sync()
        assert np.frombuffer(counter.to_bytes(), np.int32)[0] == 23


def test_graph_outlives_the_python_objects_that_built_it(gpu):
    def build():
        code = cuabi.Program(KERNELS).compile(arch=gpu.arch)
        add = code.get_kernel("add_one")
        s = gpu.create_stream(non_blocking=False)
        x = cuabi.Buffer(4 * 256, stream=s)
        x.fill(0, width=4, stream=s)
        with s.capture() as g:
            for _ in range(4):
                cuabi.launch(s, cuabi.LaunchConfig(grid=2, block=128), add, x, np.int32(256))
        return g.instantiate(), x.ptr

    exe, ptr = build()
    gc.collect()
    s = gpu.create_stream(non_blocking=False)
    exe.launch(s)
    exe.launch(s)
    s.sync()
    back = np.frombuffer(cuabi.Buffer.wrap(ptr, 4 * 256).to_bytes(), np.int32)
    assert (back == 8).all()


def test_eight_threads_replay_their_own(gpu, k):
    errors = []

    def work():
        try:
            s = gpu.create_stream(non_blocking=False)
            x = cuabi.Buffer(4 * 1024, stream=s)
            x.fill(0, width=4, stream=s)
            with s.capture("thread_local") as g:
                for _ in range(10):
                    cuabi.launch(s, cuabi.LaunchConfig(grid=4, block=256), k["add_one"], x,
                                 np.int32(1024))
            exe = g.instantiate()
            for _ in range(100):
                exe.launch(s)
            back = np.frombuffer(x.to_bytes(stream=s), np.int32)
            s.sync()
            assert (back == 1000).all(), back[:4]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_torch_work_captured_with_cuabi(gpu, k):
    torch = pytest.importorskip("torch")
    ts = torch.cuda.Stream()
    x = torch.zeros(1024, dtype=torch.int32, device="cuda")
    s = cuabi.Stream.wrap(ts)
    with s.capture("thread_local") as g:
        with torch.cuda.stream(ts):
            x.add_(1)
            cuabi.launch(s, cuabi.LaunchConfig(grid=4, block=256), k["add_one"], x, np.int32(1024))
    exe = g.instantiate()
    for _ in range(3):
        exe.launch(s)
    ts.synchronize()
    assert int(x[0]) == 6 and int(x[-1]) == 6


def test_cupy_work_captured_with_cuabi(gpu, k):
    cp = pytest.importorskip("cupy")
    cs = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(1024, cp.int32)
    with cs:
        x += 1              # compiles and loads CuPy's kernel before the capture
    cs.synchronize()
    s = cuabi.Stream.wrap(cs)
    with s.capture("thread_local") as g:
        with cs:
            x += 1
        cuabi.launch(s, cuabi.LaunchConfig(grid=4, block=256), k["add_one"], x, np.int32(1024))
    g.instantiate().launch(s)
    cs.synchronize()
    assert int(x[0]) == 3


def test_cuda_core_spellings(gpu, k):
    s = gpu.create_stream(non_blocking=False)
    x = cuabi.Buffer(4 * 256, stream=s)
    x.fill(0, width=4, stream=s)
    gb = s.create_graph_builder().begin_building()
    cuabi.launch(gb, cuabi.LaunchConfig(grid=1, block=256), k["add_one"], x, np.int32(256))
    gb.end_building()
    graph = gb.complete(cuabi.CompleteOptions(upload_stream=s))
    graph.upload(s)
    graph.launch(s)
    graph.launch(s)
    s.sync()
    assert (np.frombuffer(x.to_bytes(), np.int32) == 2).all()


def test_bad_input(gpu, k):
    with pytest.raises(cuabi.InvalidArgumentError, match="legacy default stream"):
        with gpu.default_stream.capture():
            pass
    s = gpu.create_stream(non_blocking=False)
    x = cuabi.Buffer(1024, stream=s)
    with pytest.raises(cuabi.StreamCaptureError, match="cuabi_stream_synchronize"):
        with s.capture():
            cuabi.launch(s, cuabi.LaunchConfig(block=32), k["add_one"], x, np.int32(8))
            s.sync()
    assert s.capture_status == "none"
    g = cuabi.Graph(gpu)
    a = g.add_kernel(k["add_one"], cuabi.LaunchConfig(block=32), x, np.int32(8))
    b = g.add_kernel(k["add_one"], cuabi.LaunchConfig(block=32), x, np.int32(8), depends_on=a)
    with pytest.raises(cuabi.InvalidArgumentError, match="cycle"):
        g.add_dependency(b, a)
    assert "digraph" in g.to_dot()


def test_host_launch_in_stream_order_and_in_captures(gpu, k):
    """cuda.core's host_launch: in stream order after the kernels before it;
    on a GraphBuilder, a host node run at every launch of every executable,
    its callable kept until the last of them is closed (cuabi_stream_launch_
    host_func; issue 24)."""
    import ctypes
    import weakref
    s = gpu.create_stream(non_blocking=False)
    xb = cuabi.LegacyPinnedMemoryResource().allocate(4, s)
    x = ctypes.c_int.from_address(int(xb.handle))
    x.value = 0
    cfg = cuabi.LaunchConfig(1, None, 32)            # cuda.core's order: grid, cluster, block
    seen = []
    for i in range(8):
        cuabi.launch(s, cfg, k["add_one"], xb, np.int32(1))
        cuabi.host_launch(s, lambda i: seen.append((i, x.value)), i)
    s.sync()
    assert seen == [(i, i + 1) for i in range(8)]

    class Tag:
        pass
    tag, x.value = Tag(), 0
    gone = weakref.ref(tag)
    got = []
    gb = gpu.create_graph_builder().begin_building()
    cuabi.launch(gb, cfg, k["add_one"], xb, np.int32(1))
    cuabi.host_launch(gb, lambda t: got.append((t is gone(), x.value)), tag)
    gb.end_building()
    e1, e2 = gb.complete(), gb.complete()
    assert got == []                                   # recorded, not run
    e1.launch(s)
    e1.launch(s)
    e2.launch(s)
    s.sync()
    assert got == [(True, 1), (True, 2), (True, 3)]
    del tag
    gb.close()
    e1.close()
    gc.collect()
    assert gone() is not None                          # e2 still runs it
    e2.launch(s)
    s.sync()
    assert got[-1] == (True, 4)
    e2.close()                                         # the last holder: dropped at once
    gc.collect()
    assert gone() is None
    xb.close()
    s.close()


def test_host_launch_refuses_a_torch_capture(gpu):
    torch = pytest.importorskip("torch")
    ts = torch.cuda.Stream()
    cs = cuabi.Stream.wrap(ts.cuda_stream)          # before the capture
    x = torch.zeros(4, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=ts):
        x += 1
        with pytest.raises(cuabi.errors.error_class(cuabi._capi.CUABI_ERROR_STREAM_CAPTURE),
                           match="not by cuabi_graph_capture_begin"):
            cuabi.host_launch(cs, lambda: None)
        x += 1                                      # torch's capture is still valid
    g.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [2.0] * 4
    cs.close()


# ---- cuda.core 1.2's explicit-graph API (issue 24): what cuabi adds beyond
# the parity scenarios of test_gpu_cuda_core_parity.py

def test_explicit_memory_kinds_pitched_memsets_and_ctypes_callbacks(gpu, k):
    from cuabi.graph import GraphDefinition
    import ctypes
    s = gpu.create_stream(non_blocking=False)
    out = cuabi.Buffer(4 * 64, stream=s)
    out.fill(0, width=4, stream=s)
    s.sync()
    results = {}
    for kind in ("device", "host", "managed"):
        g = GraphDefinition()
        try:
            a = g.allocate(4 * 64, memory_type=kind)
        except cuabi.CuabiError as e:            # older drivers: a clean refusal
            results[kind] = f"refused: {e}"
            continue
        # 4 rows of 8 int32 (7), 64 bytes apart, then add_one over 64 ints.
        m = a.memset(a.dptr, np.uint32(7), 8, height=4, pitch=64)
        kn = m.launch(cuabi.LaunchConfig(grid=1, block=64), k["add_one"], a.dptr, np.int32(64))
        c = kn.memcpy(out, a.dptr, 4 * 64)
        c.deallocate(a.dptr)
        with pytest.raises(cuabi.CuabiError, match="memory allocation node"):
            m.destroy()
        exe = g.instantiate()
        exe.launch(s)
        s.sync()
        v = np.frombuffer(out.to_bytes(), np.int32).reshape(4, 16)
        results[kind] = bool((v[:, :8] == 8).all())   # the rest: uninitialized + 1
    assert results["device"] is True, results
    for kind in ("host", "managed"):
        assert results[kind] is True or str(results[kind]).startswith("refused"), results
    # A ctypes CUhostFn with bytes copied into the graph, and a Python callable.
    got, calls = [], []
    cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda p: got.append(ctypes.string_at(p, 4)))
    g = GraphDefinition()
    h = g.callback(cb, user_data=b"cuab")
    h.join().callback(lambda: calls.append(len(got)))
    exe = g.instantiate()
    for _ in range(3):
        exe.launch(s)
    s.sync()
    assert got == [b"cuab"] * 3 and calls == [1, 2, 3]


def test_explicit_graph_outlives_its_python_builders(gpu, k):
    """A node's graph and its bodies share what the definition keeps: the
    definition object may go; the executable still runs what it was given."""
    from cuabi.graph import GraphDefinition
    s = gpu.create_stream(non_blocking=False)
    x = cuabi.Buffer(4 * 32, stream=s)
    x.fill(0, width=4, stream=s)
    g = GraphDefinition()
    cond = g.create_condition(1)
    w = g.while_loop(cond)
    counter = cuabi.Buffer(4, stream=s)
    counter.fill(0, width=4, stream=s)
    w.body.launch(cuabi.LaunchConfig(grid=1, block=1), k["loop_body"], cond, counter,
                  np.int32(4))
    node = w.launch(cuabi.LaunchConfig(grid=1, block=32), k["add_one"], x, np.int32(32))
    del g, w
    gc.collect()
    exe = node.graph.instantiate()
    del node
    gc.collect()
    exe.launch(s)
    s.sync()
    assert np.frombuffer(counter.to_bytes(), np.int32)[0] == 4
    assert (np.frombuffer(x.to_bytes(), np.int32) == 1).all()


def test_graph_builder_while_loop_if_else_switch_embed(gpu, k):
    """cuda.core's GraphBuilder conditionals on the GPU (issue 24): a while
    loop between work, if/else and switch picked by their defaults, a child
    graph embedded; launched three times."""
    from cuabi.graph import GraphBuilder, GraphCondition
    s = cuabi.Stream()
    x = [cuabi.Buffer.from_host(np.zeros(1, np.int32), stream=None) for _ in range(4)]
    counter = cuabi.Buffer.from_host(np.zeros(1, np.int32), stream=None)
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    child = s.create_graph_builder().begin_building()
    cuabi.launch(child, cfg, k["add_one"], x[3], np.int32(1))
    child.end_building()
    gb = s.create_graph_builder().begin_building()
    counter.fill(0, width=4, stream=gb)
    c = gb.create_condition(1)
    assert isinstance(c, GraphCondition)
    body = gb.while_loop(c)
    assert isinstance(body, GraphBuilder)
    body.begin_building()
    cuabi.launch(body, cfg, k["loop_body"], c, counter, np.int32(6))
    body.end_building()
    then, else_ = gb.if_else(gb.create_condition(1))
    for b, i in ((then, 0), (else_, 1)):
        b.begin_building()
        cuabi.launch(b, cfg, k["add_one"], x[i], np.int32(1))
        b.end_building()
    cases = gb.switch(gb.create_condition(5), 2)       # out of range: no case runs
    for b in cases:
        b.begin_building()
        cuabi.launch(b, cfg, k["add_one"], x[2], np.int32(1))
        b.end_building()
    gb.embed(child)
    gb.end_building()
    exe = gb.complete()
    for _ in range(3):
        exe.launch(s)
    s.sync()
    got = [int(np.frombuffer(b.to_bytes(), np.int32)[0]) for b in x]
    assert got == [3, 0, 0, 3]
    assert np.frombuffer(counter.to_bytes(), np.int32)[0] == 6
    for b in (body, then, else_, child, gb) + cases:
        b.close()
