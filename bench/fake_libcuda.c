/* A stand-in libcuda.so for measuring the shipped libcuabi.so on a machine
 * without a GPU: enough of the driver for a device, streams and the default
 * memory pool, each call doing almost nothing. With
 *
 *     CUABI_DRIVER_PATH=bench/.libs/fake_libcuda.so bench/bench_memory
 *
 * (bench_memory and bench_launch open the same library for their raw calls)
 * "cuabi - raw" is
 * what the library itself costs, TLS and PLT included, which a test binary
 * linking the objects statically does not show. Never a correctness fake:
 * tests use tests/fake_driver.h. Every entry point not named here returns
 * CUDA_SUCCESS and writes nothing. */
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static int token_ctx, token_pool;
static __thread CUcontext current;
static uintptr_t next_ptr = 0x10000000;

static CUresult ok(void) { return CUDA_SUCCESS; }
/* Parameter layouts then come from the CUBIN, as on a driver without the
 * query: enough for launches (bench_python.py's Python overhead). */
static CUresult not_supported(void) { return CUDA_ERROR_NOT_SUPPORTED; }
static CUresult func_attribute(int *v, CUfunction_attribute a)
{
    *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return CUDA_SUCCESS;
}
static CUresult kernel_attribute(int *v, CUfunction_attribute a, CUkernel k, CUdevice d)
{
    (void)k; (void)d;
    return func_attribute(v, a);
}
static CUresult driver_version(int *v) { *v = 13000; return CUDA_SUCCESS; }
static CUresult device_count(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult device_get(CUdevice *d, int i) { *d = i; return CUDA_SUCCESS; }
static CUresult device_attribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
         : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0 : 1024;
    return CUDA_SUCCESS;
}
static CUresult device_name(char *s, int n, CUdevice d)
{
    (void)d;
    strncpy(s, "fake", (size_t)n);
    return CUDA_SUCCESS;
}
static CUresult total_mem(size_t *b, CUdevice d) { (void)d; *b = (size_t)1 << 34; return CUDA_SUCCESS; }
static CUresult primary_retain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = (CUcontext)&token_ctx;
    return CUDA_SUCCESS;
}
static CUresult ctx_get(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
static CUresult ctx_set(CUcontext c) { current = c; return CUDA_SUCCESS; }
static CUresult ctx_device(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
static CUresult ctx_pop(CUcontext *c) { if (c) *c = current; return CUDA_SUCCESS; }
static CUresult priority_range(int *lo, int *hi) { *lo = 0; *hi = -5; return CUDA_SUCCESS; }
static CUresult stream_create(CUstream *s, unsigned flags, int prio)
{
    (void)flags; (void)prio;
    *s = malloc(64);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult stream_destroy(CUstream s) { free(s); return CUDA_SUCCESS; }
static CUresult stream_ctx(CUstream s, CUcontext *c) { (void)s; *c = (CUcontext)&token_ctx; return CUDA_SUCCESS; }
static CUresult default_pool(CUmemoryPool *p, CUdevice d)
{
    (void)d;
    *p = (CUmemoryPool)&token_pool;
    return CUDA_SUCCESS;
}
static CUresult pool_alloc(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s)
{
    (void)p; (void)s;
    *d = (CUdeviceptr)next_ptr;
    next_ptr += n;
    return CUDA_SUCCESS;
}
static CUresult free_async(CUdeviceptr d, CUstream s)
{
    (void)s;
    next_ptr = (uintptr_t)d;
    return CUDA_SUCCESS;
}

/* Enough of the library/kernel API for bench_launch: tokens for handles (the
 * parameter layout comes from the CUBIN: cuKernelGetParamInfo is
 * not_supported above). */
static int token_library, token_kernel, token_function;
static CUresult library_load(CUlibrary *l, const void *image, CUjit_option *jo, void **jv,
                             unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl)
{
    (void)image; (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
    *l = (CUlibrary)&token_library;
    return CUDA_SUCCESS;
}
static CUresult library_kernel(CUkernel *k, CUlibrary l, const char *name)
{
    (void)l; (void)name;
    *k = (CUkernel)&token_kernel;
    return CUDA_SUCCESS;
}
static CUresult kernel_function(CUfunction *f, CUkernel k)
{
    (void)k;
    *f = (CUfunction)&token_function;
    return CUDA_SUCCESS;
}
static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                       void **extra)
{
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)s;
    (void)extra;
    /* Touch the arguments as the driver does (it copies them). */
    volatile char sink = params ? *(char *)params[0] : 0;
    (void)sink;
    return CUDA_SUCCESS;
}

static const struct { const char *name; void *fn; } table[] = {
    {"cuLibraryLoadData", (void *)library_load}, {"cuLibraryGetKernel", (void *)library_kernel},
    {"cuKernelGetFunction", (void *)kernel_function},
    {"cuLaunchKernel", (void *)launch},
    {"cuDriverGetVersion", (void *)driver_version}, {"cuDeviceGetCount", (void *)device_count},
    {"cuDeviceGet", (void *)device_get}, {"cuDeviceGetAttribute", (void *)device_attribute},
    {"cuDeviceGetName", (void *)device_name}, {"cuDeviceTotalMem", (void *)total_mem},
    {"cuDevicePrimaryCtxRetain", (void *)primary_retain}, {"cuCtxGetCurrent", (void *)ctx_get},
    {"cuCtxSetCurrent", (void *)ctx_set}, {"cuCtxPushCurrent", (void *)ctx_set},
    {"cuCtxPopCurrent", (void *)ctx_pop}, {"cuCtxGetDevice", (void *)ctx_device},
    {"cuCtxGetStreamPriorityRange", (void *)priority_range},
    {"cuStreamCreateWithPriority", (void *)stream_create},
    {"cuStreamDestroy", (void *)stream_destroy}, {"cuStreamGetCtx", (void *)stream_ctx},
    {"cuDeviceGetDefaultMemPool", (void *)default_pool},
    {"cuMemAllocFromPoolAsync", (void *)pool_alloc}, {"cuMemFreeAsync", (void *)free_async},
    {"cuKernelGetParamInfo", (void *)not_supported}, {"cuFuncGetParamInfo", (void *)not_supported},
    {"cuFuncGetAttribute", (void *)func_attribute}, {"cuKernelGetAttribute", (void *)kernel_attribute},
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)version; (void)flags;
    *pfn = (void *)ok;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0)
            *pfn = table[i].fn;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* What bench_memory resolves with dlsym for its raw loop. */
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s)
{
    return pool_alloc(d, n, p, s);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) { return free_async(d, s); }

/* What bench_launch resolves with dlsym for its raw loop. */
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned smem, CUstream s,
                               void **params, void **extra)
{
    return launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}
EXPORT CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
