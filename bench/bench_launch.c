/* Launch overhead: the same empty kernel k(float *, int, float) launched
 *   raw      cuLaunchKernel with a void *[3] built by hand (the floor),
 *   pack     cuabi_launch(kernel, pack, config),
 *   prepared cuabi_prepared_launch(prepared),
 * on the legacy default stream, interleaved in rounds; the best round of
 * each is reported as microseconds per launch and as a ratio to raw.
 * Usage: bench_launch [launches per round (default 100000)] [rounds (11)].
 * Without a GPU it says so and exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "cuabi.h"

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*sync_fn)(void);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        cuabi_status st__ = (call);                                                    \
        if (st__ != CUABI_SUCCESS) {                                                   \
            fprintf(stderr, "bench_launch: %s: %s\n", #call, cuabi_last_error()->message); \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int rounds = argc > 2 ? atoi(argv[2]) : 11;
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("bench_launch: no GPU (%s); nothing measured\n",
               ndev == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    launch_fn raw_launch = cuda ? (launch_fn)dlsym(cuda, "cuLaunchKernel") : NULL;
    sync_fn ctx_sync = cuda ? (sync_fn)dlsym(cuda, "cuCtxSynchronize") : NULL;
    if (!raw_launch || !ctx_sync) {
        fprintf(stderr, "bench_launch: cannot find cuLaunchKernel in libcuda.so.1\n");
        return 1;
    }
    static const char src[] = "extern \"C\" __global__ void k(float *p, int n, float s) {}\n";
    cuabi_device *dev;
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *kern;
    CHECK(cuabi_device_get(&dev, 0));
    CHECK(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "empty.cu"));
    CHECK(cuabi_program_compile(&code, prog, NULL));
    CHECK(cuabi_objcode_get_kernel(&kern, code, "k"));
    uintptr_t fn;
    CHECK(cuabi_kernel_function(&fn, kern, dev));
    CHECK(cuabi_device_set_current(dev));

    cuabi_argpack *pack;
    CHECK(cuabi_argpack_create(&pack, "ptr, i32, f32"));
    CHECK(cuabi_argpack_set_pointer(pack, 0, 0));
    CHECK(cuabi_argpack_set_int(pack, 1, 1000));
    CHECK(cuabi_argpack_set_float(pack, 2, 2.0));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 32;
    cfg.device = dev;
    cuabi_prepared *prep;
    CHECK(cuabi_prepared_create(&prep, kern, pack, &cfg));

    CUdeviceptr p = 0;
    int in = 1000;
    float s = 2.0f;
    void *params[3] = { &p, &in, &s };
    double best[3] = { 1e30, 1e30, 1e30 };
    static const char *names[3] = { "raw cuLaunchKernel", "cuabi_launch (pack)",
                                    "cuabi_prepared_launch" };
    for (int r = 0; r <= rounds; r++) {          /* round 0 warms up */
        for (int m = 0; m < 3; m++) {
            ctx_sync();
            double t0 = now();
            for (long i = 0; i < n; i++) {
                if (m == 0) {
                    if (raw_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL)) {
                        fprintf(stderr, "bench_launch: cuLaunchKernel failed\n");
                        return 1;
                    }
                } else if (m == 1) {
                    CHECK(cuabi_launch(kern, pack, &cfg));
                } else {
                    CHECK(cuabi_prepared_launch(prep));
                }
            }
            ctx_sync();
            double us = (now() - t0) / (double)n * 1e6;
            if (r > 0 && us < best[m])
                best[m] = us;
        }
    }
    printf("launch overhead, empty kernel k(float*, int, float), %ld launches x %d rounds, best round\n",
           n, rounds);
    for (int m = 0; m < 3; m++)
        printf("  %-24s %7.3f us/launch  %5.3fx raw\n", names[m], best[m], best[m] / best[0]);
    cuabi_prepared_release(prep);
    cuabi_argpack_release(pack);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    cuabi_device_release(dev);
    return 0;
}
