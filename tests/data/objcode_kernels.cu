// Kernels for cuabi's CUBIN parser tests (tests/test_elf.c). Compiled with
//   nvcc -cubin -arch=sm_XX -Xptxas -v -o objcode_kernels_smXX.cubin objcode_kernels.cu
// for XX in 75 80 90; ptxas -v's report is kept in objcode_kernels_smXX.txt.
extern "C" __global__ void __launch_bounds__(256, 2) add(float *a, const float *b, int n, double s) {
  __shared__ float t[300];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  t[threadIdx.x % 300] = b[i];
  __syncthreads();
  if (i < n) a[i] += t[(threadIdx.x + 1) % 300] * s;
}
struct Big { int x[40]; };
extern "C" __global__ void big(Big b, int *out) {
  volatile int loc[64];
  for (int i = 0; i < 64; i++) loc[i] = b.x[i % 40] * i;
  out[threadIdx.x] = loc[threadIdx.x % 64];
}
template <typename T, int N> __global__ void segred(const T *in, T *out) {
  __shared__ T buf[N];
  buf[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  for (int s = N / 2; s > 0; s >>= 1) { if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s]; __syncthreads(); }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
template __global__ void segred<float, 256>(const float *, float *);
extern "C" __global__ void empty() {}
extern "C" __global__ void dyn(float *o) { extern __shared__ float s[]; s[threadIdx.x] = 1; __syncthreads(); o[threadIdx.x] = s[threadIdx.x ^ 1]; }
struct S20k { int c[5000]; };
extern "C" __global__ void p20k(char a, S20k s, short b, int *o) { o[threadIdx.x] = s.c[threadIdx.x] + a + b; }
__device__ __noinline__ int rec(int n) { return n <= 0 ? 0 : rec(n - 1) + n; }
extern "C" __global__ void __launch_bounds__(32) spill(int *o, int n) {
  int a[200];
  for (int i = 0; i < 200; i++) a[i] = o[i * n];
  o[threadIdx.x] = a[o[0] % 200] + rec(n);
}
#if __CUDA_ARCH__ >= 900
extern "C" __global__ void __cluster_dims__(2, 1, 1) clus(int *o) { o[threadIdx.x] = 1; }
#endif
