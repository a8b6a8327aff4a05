"""End to end on a GPU: segmented reduction, torch and CuPy interop (skipped without one)."""
import numpy as np
import pytest

import cuabi

SEGRED = r'''
template <typename T>
__global__ void segred(const T *x, const int *offsets, T *out, int nseg) {
    int s = blockIdx.x;
    if (s >= nseg) return;
    __shared__ T part[256];
    T acc = 0;
    for (int i = offsets[s] + threadIdx.x; i < offsets[s + 1]; i += blockDim.x) acc += x[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[s] = part[0];
}
'''


@pytest.fixture(scope="module")
def segred(gpu):
    obj = cuabi.Program(SEGRED).compile(arch=gpu.arch, name_expressions=["segred<float>"])
    return obj.get_kernel("segred<float>")


def test_segmented_reduction(gpu, segred):
    rng = np.random.default_rng(1)
    x = rng.random(10000, dtype=np.float32)
    offsets = np.array([0, 10, 10, 5000, 9999, 10000], np.int32)
    nseg = len(offsets) - 1
    with gpu.create_stream(non_blocking=False) as s:
        dx, doff = cuabi.Buffer.from_host(x, stream=s), cuabi.Buffer.from_host(offsets, stream=s)
        dout = cuabi.Buffer(4 * nseg, stream=s)
        cfg = cuabi.LaunchConfig(grid=nseg, block=256)
        cuabi.launch(s, cfg, segred, dx, doff, dout.view("float32"), np.int32(nseg))
        out = np.zeros(nseg, np.float32)
        dout.copy_to(out, stream=s)
        s.synchronize()
        want = [x[a:b].sum() for a, b in zip(offsets[:-1], offsets[1:])]
        np.testing.assert_allclose(out, want, rtol=1e-4)
        # prepared: one call, new arguments between launches
        prep = cuabi.prepare(segred, cfg, s, dx, doff, dout, nseg)
        dout.fill(0, stream=s)
        prep()
        dout.copy_to(out, stream=s)
        s.synchronize()
        np.testing.assert_allclose(out, want, rtol=1e-4)
        prep.close()


def test_torch_in_and_out(gpu, segred):
    torch = pytest.importorskip("torch")
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    off = torch.tensor([0, 512, 1024], device="cuda", dtype=torch.int32)
    out = torch.empty(2, device="cuda", dtype=torch.float32)
    ts = torch.cuda.current_stream()
    s = cuabi.Stream.wrap(ts, gpu)
    cuabi.launch(s, cuabi.LaunchConfig(grid=2, block=256), segred, x, off, out, 2)
    assert out.cpu().tolist() == [sum(range(512)), sum(range(512, 1024))]
    v = cuabi.from_dlpack(x, stream=s)                 # shares memory
    assert v.ptr == x.data_ptr() and v.__dlpack_device__() == (2, 0)
    back = torch.from_dlpack(v)
    back[0] = 42
    assert x[0].item() == 42


def test_cupy_in_and_out(gpu, segred):
    cp = pytest.importorskip("cupy")
    x = cp.ones(1000, dtype=cp.float32)
    off = cp.asarray([0, 1000], dtype=cp.int32)
    out = cp.zeros(1, dtype=cp.float32)
    s = cuabi.Stream.wrap(cp.cuda.get_current_stream(), gpu)
    cuabi.launch(s, cuabi.LaunchConfig(grid=1, block=256), segred, x, off, out, 1)
    assert float(out[0]) == 1000.0
    v = cuabi.from_dlpack(x, stream=s)
    assert v.ptr == x.data.ptr
    y = cp.from_dlpack(v)
    y[1] = 7
    assert float(x[1]) == 7
    cai = cuabi.from_dlpack(type("CAI", (), {"__cuda_array_interface__": x.__cuda_array_interface__})())
    assert cai.ptr == x.data.ptr
