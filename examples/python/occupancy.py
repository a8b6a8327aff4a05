#!/usr/bin/env python3
"""Choose a block size from occupancy, with cuda.core's names: offline for
sm_80 and sm_90 (no GPU needed), and live on GPU 0 when there is one.

    python3 examples/python/occupancy.py

Needs NVRTC. Runs from any directory of a source checkout built in build/
(see _cuabi_path.py); elsewhere install the package (pip install
./bindings/python) or set CUABI_LIBRARY to the absolute path of libcuabi.so.
"""
import sys

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi

SOURCE = r"""
template <int TILE> __global__ void blur(const float *in, float *out, int n)
{
    extern __shared__ float halo[];           // blockDim.x + 2 floats
    __shared__ float weights[TILE];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < TILE) weights[threadIdx.x] = 1.0f / TILE;
    halo[threadIdx.x + 1] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = (halo[threadIdx.x] + halo[threadIdx.x + 1] + halo[threadIdx.x + 2])
                        * weights[threadIdx.x % TILE];
}
"""


def smem(block_size):
    """Dynamic shared memory a block of block_size threads needs."""
    return (block_size + 2) * 4


if cuabi.runtime_info()["nvrtc_status"] != 0:
    print("NVRTC is not available:", cuabi.runtime_info()["nvrtc_error"])
    sys.exit(0)

for arch in ("sm_80", "sm_90"):
    code = cuabi.Program(SOURCE, options=cuabi.ProgramOptions(arch=arch)) \
        .compile("cubin", name_expressions=["blur<6144>"])
    occ = code.get_kernel("blur<6144>").occupancy_for(arch)
    best = occ.max_potential_block_size(smem, 0)
    print(f"{arch} (offline, {occ.limits['example_gpu']}): block {best.max_block_size}, "
          f"grid >= {best.min_grid_size}")
    for block in (128, 512, 1024):
        print("   ", occ.report(block, smem(block)))

try:
    gpu = cuabi.Device(0) if cuabi.device_count() else None
except cuabi.CuabiError:
    gpu = None
if gpu is not None:
    code = cuabi.Program(SOURCE, options=cuabi.ProgramOptions(arch=gpu.arch)) \
        .compile("cubin", name_expressions=["blur<6144>"])
    k = code.get_kernel("blur<6144>")
    best = k.occupancy.max_potential_block_size(smem, 0)
    print(f"{gpu.name} ({gpu.arch}, live): block {best.max_block_size}, "
          f"grid >= {best.min_grid_size}; {k.occupancy.report(best.max_block_size, smem(best.max_block_size))}")
