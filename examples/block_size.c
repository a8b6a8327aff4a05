/* Choosing a block size from occupancy: a kernel whose dynamic shared
 * memory grows with the block (8 bytes per thread), searched through a
 * callback with a payload; live on a GPU, offline for sm_90 otherwise. */
#include <stdio.h>

#include "cuabi.h"

static const char src[] =
    "extern \"C\" __global__ void stencil(const double *in, double *out, int n) {\n"
    "  extern __shared__ double tile[];\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  tile[threadIdx.x] = i < n ? in[i] : 0.0;\n"
    "  __syncthreads();\n"
    "  double l = threadIdx.x > 0 ? tile[threadIdx.x - 1] : 0.0;\n"
    "  if (i < n) out[i] = 0.5 * (l + tile[threadIdx.x]);\n"
    "}\n";

#define TRY(call) do { if ((call) != CUABI_SUCCESS) { \
    fprintf(stderr, "%s\n", cuabi_last_error()->message); return 1; } } while (0)

/* Dynamic shared memory for a block size: payload = bytes per thread. */
static size_t smem_for(int block_size, void *payload)
{
    return (size_t)block_size * *(const size_t *)payload;
}

int main(void)
{
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *k;
    TRY(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "stencil.cu"));
    TRY(cuabi_program_compile(&code, prog, NULL));
    TRY(cuabi_objcode_get_kernel(&k, code, "stencil"));
    size_t per_thread = sizeof(double);
    int block = 0, grid = 0, ndev = 0;
    if (cuabi_device_count(&ndev) == CUABI_SUCCESS && ndev > 0) {
        cuabi_device *dev;
        TRY(cuabi_device_get(&dev, 0));
        TRY(cuabi_occupancy_max_potential_block_size(&block, &grid, k, dev, smem_for, &per_thread, 0, 0));
        cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
        TRY(cuabi_occupancy_max_active_blocks(&r, k, dev, block, smem_for(block, &per_thread)));
        printf("live: block %d, grid %d to fill the GPU, %.0f%% occupancy (limited by %s)\n",
               block, grid, r.occupancy * 100, cuabi_occupancy_limiter_name(r.limiter));
        cuabi_device_release(dev);
    } else {
        cuabi_kernel_resources res = CUABI_KERNEL_RESOURCES_INIT;
        TRY(cuabi_kernel_get_resources(&res, k));
        TRY(cuabi_occupancy_offline_max_potential_block_size(&block, &grid, "sm_90", &res, smem_for,
                                                             &per_thread, 0, 0, NULL));
        cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
        TRY(cuabi_occupancy_offline_max_active_blocks(&r, "sm_90", &res, block,
                                                      smem_for(block, &per_thread), NULL));
        printf("offline (no GPU), sm_90: block %d, grid %d, %.0f%% occupancy (limited by %s)\n",
               block, grid, r.occupancy * 100, cuabi_occupancy_limiter_name(r.limiter));
    }
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    return block > 0 ? 0 : 1;
}
