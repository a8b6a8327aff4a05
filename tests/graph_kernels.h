/* Kernels of the graph tests and the graph benchmark, compiled with NVRTC
 * (extern "C": looked up by name). `loop_body` sets a conditional handle
 * from device code: an NVRTC compile without -rdc needs only the one-line
 * declaration of cudaGraphSetConditional below (the driver resolves the
 * symbol when the code loads, as for nvcc's output); a relocatable compile
 * (-rdc) declares it itself. tests/test_graph.c checks that this compiles
 * here, without a GPU. */
#ifndef CUABI_GRAPH_KERNELS_H
#define CUABI_GRAPH_KERNELS_H

static const char *const graph_kernels_src =
    "extern \"C\" __device__ void cudaGraphSetConditional(unsigned long long handle,\n"
    "                                                     unsigned int value);\n"
    "extern \"C\" __global__ void empty(float *p, int n, float s) {}\n"
    "extern \"C\" __global__ void add_one(int *x, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] += 1;\n"
    "}\n"
    "extern \"C\" __global__ void scale(float *x, float a, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] *= a;\n"
    "}\n"
    "/* One loop iteration: count it, and go on while the count is below n. */\n"
    "extern \"C\" __global__ void loop_body(unsigned long long handle, int *counter, int n)\n"
    "{\n"
    "    if (threadIdx.x == 0 && blockIdx.x == 0) {\n"
    "        int c = ++*counter;\n"
    "        cudaGraphSetConditional(handle, c < n ? 1u : 0u);\n"
    "    }\n"
    "}\n";

#endif
