/* A segmented reduction: one segment per block, instantiated by name
 * expression (segred<float, 256>, ...). */
#include <config.h>
#include "common.cuh"

template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out, const int *offsets)
{
    __shared__ T part[BLOCK];
    int s = blockIdx.x, t = threadIdx.x;
    T acc = 0;
    for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK)
        acc += in[i];
    part[t] = acc;
    __syncthreads();
    T total = block_sum(part, t, BLOCK);
    if (t == 0)
        out[s] = total;
}
