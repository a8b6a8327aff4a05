#!/usr/bin/env python3
"""CUDA graphs from Python: the segmented reduction of 64 batches captured
once from ordinary cuabi.launch() calls and replayed.

    python3 examples/python/graph_replay.py

Runs from any directory of a source checkout built in build/ (see
_cuabi_path.py); elsewhere install the package (pip install ./bindings/python)
or set CUABI_LIBRARY to the absolute path of libcuabi.so. Without a GPU it
compiles the kernel and says the rest is skipped.
"""
import numpy as np

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi

SRC = r'''
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
BATCHES, SEGS, SEG_LEN = 64, 8, 100

try:
    gpus = cuabi.device_count()
except cuabi.CuabiError:
    gpus = 0
if not gpus:
    cuabi.Program(SRC).compile(arch="sm_90", name_expressions=["segred<float, 128>"])
    print("segred<float, 128> compiled; no GPU, so capture and replay are skipped")
    raise SystemExit(0)

dev = cuabi.Device(0)
segred = cuabi.Program(SRC).compile(arch=dev.arch, name_expressions=["segred<float, 128>"]) \
    .get_kernel("segred<float, 128>")
s = dev.create_stream(non_blocking=False)
x = (np.arange(BATCHES * SEGS * SEG_LEN) % 10).astype(np.float32)
offsets = (np.arange(SEGS + 1) * SEG_LEN).astype(np.int32)
dx, doff = cuabi.Buffer.from_host(x, stream=s), cuabi.Buffer.from_host(offsets, stream=s)
dout = cuabi.Buffer(4 * BATCHES * SEGS, stream=s)
cfg = cuabi.LaunchConfig(grid=SEGS, block=128)

# Capture: the 64 launches are recorded, not run.
with s.capture() as graph:
    for b in range(BATCHES):
        cuabi.launch(s, cfg, segred, dx.ptr + 4 * b * SEGS * SEG_LEN, dout.ptr + 4 * b * SEGS,
                     doff)
exe = graph.instantiate()
for _ in range(10):             # one call runs all 64 kernels
    exe.launch(s)
out = np.frombuffer(dout.to_bytes(stream=s), np.float32)
s.sync()
print(f"captured {len(graph)} launches, replayed 10 times; every segment sums to "
      f"{set(out.tolist())}")
assert (out == 450).all()
