/* First and later cuGraphInstantiate of 100 captured launches of an empty kernel,
 * kernel nodes made from a CUfunction (cuKernelGetFunction) or a CUkernel (cast),
 * in a fresh process: does the handle kind explain cuabi's first instantiate? */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("%s = %d\n", #x, r_); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
int main(int argc, char **argv) {
    int use_kernel = argc > 2 && !strcmp(argv[2], "kernel");
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);
    char *img = malloc(n); if (fread(img, 1, n, f) != (size_t)n) return 1; fclose(f);
    CUdevice d; CUcontext c; CUlibrary lib; CUkernel k; CUfunction fn; CUstream s; CUdeviceptr p;
    CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
    CK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "k"));
    if (use_kernel) fn = (CUfunction)k; else CK(cuKernelGetFunction(&fn, k));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)); CK(cuMemAlloc(&p, 4096));
    int nn = 5; float a = 1; void *args[] = { &p, &nn, &a };
    CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL)); CK(cuStreamSynchronize(s));
    for (int round = 0; round < 6; round++) {
        CUgraph g; CUgraphExec e;
        double t0 = now();
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < 100; i++) CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
        CK(cuStreamEndCapture(s, &g));
        double t1 = now();
        CUDA_GRAPH_INSTANTIATE_PARAMS ip; memset(&ip, 0, sizeof ip);
        CK(cuGraphInstantiateWithParams(&e, g, &ip));
        double t2 = now();
        CK(cuGraphLaunch(e, s)); CK(cuStreamSynchronize(s));
        printf("%s round %d: capture %.1f us instantiate %.1f us\n", use_kernel ? "CUkernel" : "CUfunction", round, t1 - t0, t2 - t1);
        CK(cuGraphExecDestroy(e)); CK(cuGraphDestroy(g));
    }
    return 0;
}
