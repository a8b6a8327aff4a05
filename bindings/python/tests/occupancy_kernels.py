"""Kernels for the occupancy tests (test_occupancy.py without a GPU,
test_gpu_occupancy.py on one): a light one, a register-heavy one, one with
launch bounds, one with dynamic shared memory and templated ones with large
static shared memory."""

SOURCE = r'''
extern "C" __global__ void scale(float *x, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

extern "C" __global__ void regheavy(const float *in, float *out, int n)
{
    float acc[48];
#pragma unroll
    for (int j = 0; j < 48; j++) acc[j] = in[threadIdx.x + j * n];
    float s = 0;
#pragma unroll
    for (int r = 0; r < 8; r++)
#pragma unroll
        for (int j = 0; j < 48; j++) { acc[j] = acc[j] * acc[(j + r + 1) % 48] + s; s += acc[j]; }
#pragma unroll
    for (int j = 0; j < 48; j++) out[threadIdx.x + j * n] = acc[j];
}

extern "C" __global__ void __launch_bounds__(256) bounded(float *x) { x[threadIdx.x] += 1.0f; }

extern "C" __global__ void dyn(float *x)
{
    extern __shared__ float s[];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

template <int N, typename T> __global__ void staged(T *x)
{
    __shared__ T s[N];
    for (int i = threadIdx.x; i < N; i += blockDim.x) s[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < N; i += blockDim.x) x[i] = s[N - 1 - i];
}

template <typename T, int BLOCK> __global__ void segred(const T *in, T *out)
{
    __shared__ T buf[BLOCK];
    buf[threadIdx.x] = in[blockIdx.x * BLOCK + threadIdx.x];
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
'''

# Entry names and template instances (name expressions) of SOURCE.
PLAIN = ["scale", "regheavy", "bounded", "dyn"]
TEMPLATES = ["staged<10240, float>", "staged<2048, double>", "segred<float, 256>",
             "segred<double, 1024>"]
KERNELS = PLAIN + TEMPLATES


def compile_source(cuabi, arch, source=SOURCE, code="cubin"):
    """SOURCE compiled by NVRTC for `arch` with every template instance."""
    prog = cuabi.Program(source, options=cuabi.ProgramOptions(arch=arch))
    return prog.compile(code, name_expressions=TEMPLATES)
