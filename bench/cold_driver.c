/* The floor of a cold start: what the CUDA driver itself costs a new process
 * from nothing to the first result, with no library between. bench_cold.py
 * runs it beside cuabi, CuPy and cuda.core; it prints one JSON line of
 * milliseconds since main() for each step:
 *   driver_init   dlopen(libcuda.so.1) + cuInit + primary context current
 *   module_load   cuModuleLoadData of a CUBIN + cuModuleGetFunction
 *   first_result  3 cuMemAlloc, 2 copies in, 1 launch, copy out, sync
 *
 *   bench/cold_driver CUBIN FUNCTION_NAME
 * The kernel is the segmented reduction (const float *in, float *out,
 * const int *offsets) with 256 threads per block: 2 segments of 1000. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cold_driver CUBIN FUNCTION_NAME\n");
        return 2;
    }
    double t0 = now_ms();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "cold_driver: %s\n", dlerror()); return 77; }
    CUresult (*cuInit)(unsigned) = sym(lib, "cuInit");
    CUresult (*cuDeviceGet)(CUdevice *, int) = sym(lib, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = sym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*set_current)(CUcontext) = sym(lib, "cuCtxSetCurrent");
    CUresult (*load)(CUmodule *, const void *) = sym(lib, "cuModuleLoadData");
    CUresult (*get_fn)(CUfunction *, CUmodule, const char *) = sym(lib, "cuModuleGetFunction");
    CUresult (*alloc)(CUdeviceptr *, size_t) = sym(lib, "cuMemAlloc_v2");
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = sym(lib, "cuMemcpyHtoD_v2");
    CUresult (*dtoh)(void *, CUdeviceptr, size_t) = sym(lib, "cuMemcpyDtoH_v2");
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **) = sym(lib, "cuLaunchKernel");
    CUresult (*sync)(void) = sym(lib, "cuCtxSynchronize");

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
    CUmodule mod;
    CUfunction fn;
    CK(load(&mod, image));
    CK(get_fn(&fn, mod, argv[2]));
    double t_load = now_ms();

    enum { SEG = 1000, NSEG = 2 };
    static float in[SEG * NSEG];
    float out[NSEG];
    int offsets[NSEG + 1] = { 0, SEG, 2 * SEG };
    for (int i = 0; i < SEG * NSEG; i++) in[i] = (float)(i % 7);
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
    double want = 0;
    for (int i = 0; i < SEG; i++) want += (float)(i % 7);
    int correct = out[0] == (float)want;
    printf("{\"driver_init\": %.2f, \"module_load\": %.2f, \"first_result\": %.2f, "
           "\"total\": %.2f, \"correct\": %s}\n",
           t_init - t0, t_load - t_init, t_done - t_load, t_done - t0,
           correct ? "true" : "false");
    free(image);
    return correct ? 0 : 1;
}
