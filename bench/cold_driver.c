/* The floor of a cold start: what the CUDA driver itself costs a new process
 * from nothing to the first result, with no library between. bench_cold.py
 * runs it beside cuabi, CuPy and cuda.core; it prints one JSON line of
 * milliseconds since main() for each step:
 *   driver_init   dlopen(libcuda.so.1) + cuInit + primary context current
 *   module_load   cuModuleLoadData of a CUBIN + cuModuleGetFunction
 *   first_result  3 cuMemAlloc, 2 copies in, 1 launch, copy out, sync
 *
 *   bench/cold_driver CUBIN FUNCTION_NAME [--cuabi-sequence]
 * The kernel is the segmented reduction (const float *in, float *out,
 * const int *offsets) with 256 threads per block: 2 segments of 1000.
 *
 * --cuabi-sequence makes the driver calls cuabi makes for the same work
 * (cuLibraryLoadData + cuLibraryGetKernel + cuKernelGetFunction, a created
 * non-blocking stream, the device's default memory pool, cuMemcpyAsync of
 * pageable memory, cuStreamSynchronize) and adds each call's time under
 * "steps": what of cuabi's first result is the driver's own cost. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "cold_driver: %s missing\n", name);
        exit(2);
    }
    return p;
}

#define CK(call)                                                              \
    do {                                                                       \
        CUresult r__ = (call);                                                 \
        if (r__) {                                                             \
            fprintf(stderr, "cold_driver: %s failed: %d\n", #call, r__);       \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    *size = (size_t)n;
    return b;
}

enum { SEG = 1000, NSEG = 2 };
static float in[SEG * NSEG];
static float out[NSEG];
static int offsets[NSEG + 1] = { 0, SEG, 2 * SEG };

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static void fill_input(void)
{
    for (int i = 0; i < SEG * NSEG; i++) in[i] = (float)(i % 7);
}

static int check_result(void)
{
    double want = 0;
    for (int i = 0; i < SEG; i++) want += (float)(i % 7);
    return out[0] == (float)want;
}

/* The classic sequence: module API, cuMemAlloc, synchronous copies. */
static int classic_sequence(void *lib, const char *image, const char *name, double t0,
                            double t_init)
{
    CUresult (*load)(CUmodule *, const void *) = sym(lib, "cuModuleLoadData");
    CUresult (*get_fn)(CUfunction *, CUmodule, const char *) = sym(lib, "cuModuleGetFunction");
    CUresult (*alloc)(CUdeviceptr *, size_t) = sym(lib, "cuMemAlloc_v2");
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = sym(lib, "cuMemcpyHtoD_v2");
    CUresult (*dtoh)(void *, CUdeviceptr, size_t) = sym(lib, "cuMemcpyDtoH_v2");
    launch_fn launch = sym(lib, "cuLaunchKernel");
    CUresult (*sync)(void) = sym(lib, "cuCtxSynchronize");
    CUmodule mod;
    CUfunction fn;
    CK(load(&mod, image));
    CK(get_fn(&fn, mod, name));
    double t_load = now_ms();
    fill_input();
    CUdeviceptr d_in, d_out, d_off;
    CK(alloc(&d_in, sizeof in));
    CK(alloc(&d_out, sizeof out));
    CK(alloc(&d_off, sizeof offsets));
    CK(htod(d_in, in, sizeof in));
    CK(htod(d_off, offsets, sizeof offsets));
    void *args[] = { &d_in, &d_out, &d_off };
    CK(launch(fn, NSEG, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CK(dtoh(out, d_out, sizeof out));
    CK(sync());
    double t_done = now_ms();
    int correct = check_result();
    printf("{\"driver_init\": %.2f, \"module_load\": %.2f, \"first_result\": %.2f, "
           "\"total\": %.2f, \"correct\": %s}\n",
           t_init - t0, t_load - t_init, t_done - t_load, t_done - t0,
           correct ? "true" : "false");
    return correct;
}

/* The calls cuabi makes for the same work, each timed. */
static int cuabi_sequence(void *lib, CUdevice dev, const char *image, const char *name,
                          double t0, double t_init)
{
    typedef void *CUlibrary, *CUkernel, *CUmemoryPool;
    CUresult (*lib_load)(CUlibrary *, const void *, void *, void *, unsigned, void *, void *,
                         unsigned) = sym(lib, "cuLibraryLoadData");
    CUresult (*lib_kernel)(CUkernel *, CUlibrary, const char *) = sym(lib, "cuLibraryGetKernel");
    CUresult (*kernel_fn)(CUfunction *, CUkernel) = sym(lib, "cuKernelGetFunction");
    CUresult (*stream_create)(CUstream *, unsigned, int) = sym(lib, "cuStreamCreateWithPriority");
    CUresult (*default_pool)(CUmemoryPool *, CUdevice) = sym(lib, "cuDeviceGetDefaultMemPool");
    CUresult (*pool_alloc)(CUdeviceptr *, size_t, CUmemoryPool, CUstream) =
        sym(lib, "cuMemAllocFromPoolAsync");
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = sym(lib, "cuMemcpyAsync");
    launch_fn launch = sym(lib, "cuLaunchKernel");
    CUresult (*ssync)(CUstream) = sym(lib, "cuStreamSynchronize");
    double steps[12];
    int k = 0;
    double t = now_ms();
#define STEP(call) do { CK(call); double n__ = now_ms(); steps[k++] = n__ - t; t = n__; } while (0)
    CUlibrary l;
    CUkernel kern;
    CUfunction fn;
    CUstream s;
    CUmemoryPool pool;
    STEP(stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */, 0));
    STEP(lib_load(&l, image, NULL, NULL, 0, NULL, NULL, 0));
    STEP(lib_kernel(&kern, l, name));
    STEP(kernel_fn(&fn, kern));
    double t_load = now_ms();
    fill_input();
    CUdeviceptr d_in, d_out, d_off;
    STEP(default_pool(&pool, dev));
    STEP(pool_alloc(&d_in, sizeof in, pool, s));
    STEP(copy(d_in, (CUdeviceptr)(uintptr_t)in, sizeof in, s));
    STEP(pool_alloc(&d_off, sizeof offsets, pool, s));
    STEP(copy(d_off, (CUdeviceptr)(uintptr_t)offsets, sizeof offsets, s));
    STEP(pool_alloc(&d_out, sizeof out, pool, s));
    void *args[] = { &d_in, &d_out, &d_off };
    STEP(launch(fn, NSEG, 1, 1, 256, 1, 1, 0, s, args, NULL));
    CK(copy((CUdeviceptr)(uintptr_t)out, d_out, sizeof out, s));
    STEP(ssync(s));
#undef STEP
    double t_done = now_ms();
    int correct = check_result();
    static const char *names[] = { "stream_create", "library_load", "library_get_kernel",
                                   "kernel_get_function", "default_pool", "pool_alloc_first",
                                   "copy_in_first", "pool_alloc_2", "copy_in_2", "pool_alloc_3",
                                   "launch", "copy_out_sync" };
    printf("{\"driver_init\": %.2f, \"module_load\": %.2f, \"first_result\": %.2f, "
           "\"total\": %.2f, \"correct\": %s, \"steps\": {",
           t_init - t0, t_load - t_init, t_done - t_load, t_done - t0,
           correct ? "true" : "false");
    for (int i = 0; i < k; i++) printf("%s\"%s\": %.3f", i ? ", " : "", names[i], steps[i]);
    printf("}}\n");
    return correct;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cold_driver CUBIN FUNCTION_NAME [--cuabi-sequence]\n");
        return 2;
    }
    double t0 = now_ms();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cold_driver: %s\n", dlerror()); return 77; }
    CUresult (*cuInit)(unsigned) = sym(lib, "cuInit");
    CUresult (*cuDeviceGet)(CUdevice *, int) = sym(lib, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = sym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*set_current)(CUcontext) = sym(lib, "cuCtxSetCurrent");

    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(retain(&ctx, dev));
    CK(set_current(ctx));
    double t_init = now_ms();

    size_t n;
    char *image = read_file(argv[1], &n);
    if (!image) { fprintf(stderr, "cold_driver: cannot read %s\n", argv[1]); return 2; }
    int ok = argc > 3 && !strcmp(argv[3], "--cuabi-sequence")
                 ? cuabi_sequence(lib, dev, image, argv[2], t0, t_init)
                 : classic_sequence(lib, image, argv[2], t0, t_init);
    free(image);
    return ok ? 0 : 1;
}
