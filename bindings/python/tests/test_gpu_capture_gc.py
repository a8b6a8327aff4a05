"""The garbage collector inside a stream capture, on a GPU (issue 29 item 9;
skipped without one). cuabi objects of every kind in reference cycles,
collected by gc.collect() while a capture is in progress -- cuabi's own
(stream.capture(), a GraphBuilder) in GLOBAL mode on a created blocking
stream, on this thread or with another thread collecting, and torch's
torch.cuda.graph where torch is installed -- must leave the capture valid.

Before the fix, the releases their finalizers made (cuMemFree, cuMemFreeHost,
cuLibraryUnload, cuGraphExecDestroy, cuGraphDestroy, cuEventDestroy,
cuStreamDestroy, cuMemPoolDestroy, cuDevicePrimaryCtxRelease, a pool free on
the legacy stream, ...) invalidated the capture: StreamCaptureError
CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, or torch's
cudaErrorStreamCaptureInvalidated. Without the collector (gc.disable()) the
same captures passed."""
import gc
import threading

import numpy as np
import pytest

import cuabi

KERNELS = r'''
extern "C" __global__ void add_one(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
'''
ROUNDS = 300


class _Cycle:
    """Holds objects in a reference cycle: only the cyclic collector frees them."""

    def __init__(self, things):
        self.me, self.things = self, things


@pytest.fixture(scope="module")
def code(gpu):
    return cuabi.Program(KERNELS).compile(arch=gpu.arch)


def _garbage(gpu, code):
    """One object of every kind cuabi releases with a driver call."""
    s = gpu.create_stream(non_blocking=False)
    obj = cuabi.ObjectCode.from_bytes(bytes(code), "cubin")
    k = obj.get_kernel("add_one")
    g = cuabi.Graph()
    g.add_empty()
    pool = cuabi.MemoryResource.pool(gpu)
    things = [s, gpu.create_event(), k, obj, g, g.instantiate(), pool,
              cuabi.Buffer(256, pool, stream=s),
              cuabi.Buffer(256, cuabi.MemoryResource.pinned(gpu)),
              cuabi.Buffer(256, cuabi.MemoryResource.managed(gpu)),
              cuabi.Buffer(1 << 20),          # the default pool, no stream: the legacy stream
              cuabi.Buffer(256).view("int32"),
              cuabi.prepare(k, cuabi.LaunchConfig(grid=1, block=32), s, 0, np.int32(0))]
    if cuabi.device_count() > 1:
        things.append(cuabi.Device(1))      # its primary context, released last
    _Cycle(things)


def _launches(stream_like, k, x, n=100):
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    for _ in range(n):
        cuabi.launch(stream_like, cfg, k, x, np.int32(32))


@pytest.mark.parametrize("how", ["capture", "graph_builder"])
def test_gc_inside_a_global_capture(gpu, code, how):
    k = code.get_kernel("add_one")
    s = gpu.create_stream(non_blocking=False)                 # blocking: the legacy stream depends on it
    x = cuabi.Buffer(128, stream=s)
    x.fill(0, stream=s)
    for i in range(ROUNDS):
        _garbage(gpu, code)
        gen = 2 if i % 50 == 0 else 0
        if how == "capture":
            with s.capture("global") as g:
                _launches(s, k, x, 2)
                assert gc.collect(gen) > 0
                _launches(s, k, x, 2)
        else:
            b = s.create_graph_builder().begin_building("global")
            _launches(b, k, x, 2)
            assert gc.collect(gen) > 0
            _launches(b, k, x, 2)
            g = b.end_building().graph
        assert len(g) == 4
        g.close()
    # The report's shape: graphs and executables built and dropped, then 100
    # launches captured with a collection in the middle; and the graph runs.
    for _ in range(20):
        gg = cuabi.Graph()
        gg.add_empty()
        _Cycle([gg, gg.instantiate()])
    with s.capture() as g:
        _launches(s, k, x, 50)
        gc.collect()
        _launches(s, k, x, 50)
    exe = g.instantiate()
    exe.launch(s)
    s.sync()
    assert (np.frombuffer(x.to_bytes(), np.int32) == 100).all()


def test_gc_on_another_thread_inside_a_global_capture(gpu, code):
    k = code.get_kernel("add_one")
    s = gpu.create_stream(non_blocking=False)
    x = cuabi.Buffer(128, stream=s)
    for _ in range(100):
        t = threading.Thread(target=_garbage, args=(gpu, code))
        t.start()
        t.join()
        with s.capture("global") as g:
            _launches(s, k, x, 1)
            c = threading.Thread(target=gc.collect)
            c.start()
            c.join()
            _launches(s, k, x, 1)
        assert len(g) == 2
        g.close()


def test_gc_inside_torch_cuda_graph(gpu, code):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    for i in range(50):
        _garbage(gpu, code)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):           # torch's default: a GLOBAL capture
            y = x + 1
            assert gc.collect(2 if i % 10 == 0 else 0) > 0
            y += 1
        g.replay()
        torch.cuda.synchronize()
        assert float(y[0]) == 2.0
