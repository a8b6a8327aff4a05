/* Launch overhead: the same empty kernel k(float *, int, float) launched
 *   raw      cuLaunchKernel with a void *[3] built by hand (the floor),
 *   pack     cuabi_launch(kernel, pack, config),
 *   prepared cuabi_prepared_launch(prepared),
 * on the legacy default stream (and again on a created stream, where no
 * current-context check is needed; plus raw with a cuCtxGetCurrent per
 * launch, what the legacy stream's check costs), in many short interleaved
 * blocks. Each row: the best block in microseconds per launch, the median
 * block, the best's ratio to the best raw block, and the median over blocks of each
 * block's ratio to the raw launch on the same kind of stream in that block.
 * Usage: bench_launch [launches per block (default 2000)] [blocks (301)].
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000;
    int blocks = argc > 2 ? atoi(argv[2]) : 301;
    if (n < 1) n = 1;
    if (blocks < 1) blocks = 1;
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("bench_launch: no GPU (%s); nothing measured\n",
               ndev == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    /* The driver cuabi uses (CUABI_DRIVER_PATH, e.g. the do-nothing
     * bench/.libs/fake_libcuda.so: then the ratios are cuabi's own cost). */
    const char *path = getenv("CUABI_DRIVER_PATH");
    void *cuda = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
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

    /* The same launches on a created stream (no current-context check needed). */
    cuabi_stream *stream;
    uintptr_t raw_stream;
    CHECK(cuabi_stream_create(&stream, dev, NULL));
    CHECK(cuabi_stream_raw(&raw_stream, stream));
    cuabi_launch_config scfg = cfg;
    scfg.stream = stream;
    cuabi_prepared *sprep;
    CHECK(cuabi_prepared_create(&sprep, kern, pack, &scfg));
    typedef CUresult (*ctx_get_fn)(CUcontext *);
    ctx_get_fn ctx_get = (ctx_get_fn)dlsym(cuda, "cuCtxGetCurrent");

    CUdeviceptr p = 0;
    int in = 1000;
    float s = 2.0f;
    void *params[3] = { &p, &in, &s };
    enum { MODES = 7, MAX_BLOCKS = 4096 };
    static double times[MODES][MAX_BLOCKS];
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    static const char *names[MODES] = {
        "raw cuLaunchKernel", "cuabi_launch (pack)", "cuabi_prepared_launch",
        "raw cuCtxGetCurrent+launch", "raw, created stream", "cuabi_launch, created stream",
        "cuabi_prepared, created stream" };
    /* Many short blocks, every mode once per block in a rotating order, the
     * queue drained before each: the host's drift between blocks cancels in
     * each block's ratio to raw (docs/PERFORMANCE.md). Block -1 warms up. */
    for (int b = -1; b < blocks; b++) {
        for (int j = 0; j < MODES; j++) {
            int m = (j + (b < 0 ? 0 : b)) % MODES;
            if (m == 3 && !ctx_get) continue;
            ctx_sync();
            double t0 = now();
            for (long i = 0; i < n; i++) {
                CUresult cr = CUDA_SUCCESS;
                CUcontext cur;
                switch (m) {
                case 0: cr = raw_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL); break;
                case 1: CHECK(cuabi_launch(kern, pack, &cfg)); break;
                case 2: CHECK(cuabi_prepared_launch(prep)); break;
                case 3:
                    cr = ctx_get(&cur);
                    if (!cr) cr = raw_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
                    break;
                case 4:
                    cr = raw_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, (CUstream)raw_stream,
                                    params, NULL);
                    break;
                case 5: CHECK(cuabi_launch(kern, pack, &scfg)); break;
                case 6: CHECK(cuabi_prepared_launch(sprep)); break;
                }
                if (cr) {
                    fprintf(stderr, "bench_launch: cuLaunchKernel failed (%d)\n", (int)cr);
                    return 1;
                }
            }
            double us = (now() - t0) / (double)n * 1e6;
            if (b >= 0)
                times[m][b] = us;
        }
    }
    ctx_sync();
    printf("launch overhead, empty kernel k(float*, int, float), %d interleaved blocks of %ld launches\n",
           blocks, n);
    printf("  %-32s %9s %9s %9s %12s\n", "", "best us", "median us", "x raw", "median ratio");
    static double ratio[MAX_BLOCKS], sorted[MAX_BLOCKS];
    for (int m = 0; m < MODES; m++) {
        if (m == 3 && !ctx_get) continue;
        int base = m >= 4 ? 4 : 0;
        double best = 1e30, best_raw = 1e30;
        for (int b = 0; b < blocks; b++) {
            if (times[m][b] < best) best = times[m][b];
            if (times[base][b] < best_raw) best_raw = times[base][b];
            sorted[b] = times[m][b];
            ratio[b] = times[m][b] / times[base][b];
        }
        qsort(ratio, (size_t)blocks, sizeof ratio[0], cmp_double);
        qsort(sorted, (size_t)blocks, sizeof sorted[0], cmp_double);
        printf("  %-32s %9.3f %9.3f %9.3f %12.3f\n", names[m], best, sorted[blocks / 2],
               best / best_raw, ratio[blocks / 2]);
    }
    cuabi_prepared_release(sprep);
    cuabi_stream_release(stream);
    cuabi_prepared_release(prep);
    cuabi_argpack_release(pack);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    cuabi_device_release(dev);
    return 0;
}
