/* The segmented-reduction template used by the program tests and the compile
 * benchmark: one segment per block, instantiated through a name expression
 * such as "segred<float, 256>". */
#ifndef CUABI_SEGRED_KERNEL_H
#define CUABI_SEGRED_KERNEL_H

static const char *const segred_src =
    "template <typename T, int BLOCK>\n"
    "__global__ void segred(const T *in, T *out, const int *offsets)\n"
    "{\n"
    "    __shared__ T part[BLOCK];\n"
    "    int s = blockIdx.x, t = threadIdx.x;\n"
    "    T acc = 0;\n"
    "    for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK) acc += in[i];\n"
    "    part[t] = acc;\n"
    "    __syncthreads();\n"
    "    for (int w = BLOCK / 2; w > 0; w /= 2) {\n"
    "        if (t < w) part[t] += part[t + w];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (t == 0) out[s] = part[0];\n"
    "}\n";

#endif
