/* Found next to kernels/segred.cu: "quoted" includes are looked for in the
 * directory of the including file. Edit it, and the cache compiles again. */
#pragma once
template <typename T>
__device__ T block_sum(T *part, int t, int block)
{
    for (int w = block / 2; w > 0; w /= 2) {
        if (t < w)
            part[t] += part[t + w];
        __syncthreads();
    }
    return part[0];
}
