/* Fake cuMem* entry points for CPU-only tests of the device paths of
 * memory resources and buffers. "Device" memory is host memory here, so
 * tests can check copies and memsets directly. Live allocations and pools
 * are counted; leaks also show under LeakSanitizer.
 *
 * Use after fake_driver_install(): fake_memory_install(). */
#ifndef CUABI_FAKE_MEMORY_H
#define CUABI_FAKE_MEMORY_H

#include "fake_driver.h"

static int fake_live_allocs, fake_live_pools, fake_async_frees, fake_syncs;
static CUstream fake_last_stream;
static cuuint64_t fake_last_threshold;
static int fake_default_pool_token[FAKE_DEVICES];

static CUresult CUDAAPI fake_cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice d)
{
    *p = (CUmemoryPool)&fake_default_pool_token[d];
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolCreate(CUmemoryPool *p, const CUmemPoolProps *props)
{
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    *p = (CUmemoryPool)malloc(16);
    fake_live_pools++;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolDestroy(CUmemoryPool p)
{
    free(p);
    fake_live_pools--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute a, void *v)
{
    (void)p;
    if (a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        fake_last_threshold = *(cuuint64_t *)v;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolTrimTo(CUmemoryPool p, size_t keep)
{
    (void)p; (void)keep;
    return CUDA_SUCCESS;
}
static void *fake_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 256, n) != 0) return NULL;
    fake_live_allocs++;
    return p;
}
static CUresult CUDAAPI fake_cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, CUmemoryPool p,
                                                     CUstream s)
{
    (void)p;
    if (!fake_current && (uintptr_t)s <= 2) return CUDA_ERROR_INVALID_CONTEXT;
    fake_last_stream = s;
    *d = (CUdeviceptr)(uintptr_t)fake_alloc(n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
    fake_last_stream = s;
    fake_async_frees++;
    free((void *)(uintptr_t)d);
    fake_live_allocs--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemAllocHost(void **p, size_t n)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    *p = fake_alloc(n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemFreeHost(void *p)
{
    free(p);
    fake_live_allocs--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemAllocManaged(CUdeviceptr *d, size_t n, unsigned flags)
{
    if (!fake_current || flags != CU_MEM_ATTACH_GLOBAL) return CUDA_ERROR_INVALID_VALUE;
    *d = (CUdeviceptr)(uintptr_t)fake_alloc(n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemFree(CUdeviceptr d)
{
    free((void *)(uintptr_t)d);
    fake_live_allocs--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    fake_last_stream = st;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n)
{
    memset((void *)(uintptr_t)d, v, n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemsetD16(CUdeviceptr d, unsigned short v, size_t n)
{
    for (size_t i = 0; i < n; i++) ((unsigned short *)(uintptr_t)d)[i] = v;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemsetD32(CUdeviceptr d, unsigned int v, size_t n)
{
    for (size_t i = 0; i < n; i++) ((unsigned int *)(uintptr_t)d)[i] = v;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    fake_last_stream = s;
    return fake_cuMemsetD8(d, v, n);
}
static CUresult CUDAAPI fake_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n,
                                              CUstream s)
{
    fake_last_stream = s;
    return fake_cuMemsetD16(d, v, n);
}
static CUresult CUDAAPI fake_cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{
    fake_last_stream = s;
    return fake_cuMemsetD32(d, v, n);
}
static CUresult CUDAAPI fake_cuStreamSyncCounted(CUstream s)
{
    (void)s;
    fake_syncs++;
    return CUDA_SUCCESS;
}

static inline void fake_memory_install(void)
{
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuDeviceGetDefaultMemPool = fake_cuDeviceGetDefaultMemPool;
    d->cuMemPoolCreate = fake_cuMemPoolCreate;
    d->cuMemPoolDestroy = fake_cuMemPoolDestroy;
    d->cuMemPoolSetAttribute = fake_cuMemPoolSetAttribute;
    d->cuMemPoolTrimTo = fake_cuMemPoolTrimTo;
    d->cuMemAllocFromPoolAsync = fake_cuMemAllocFromPoolAsync;
    d->cuMemFreeAsync = fake_cuMemFreeAsync;
    d->cuMemAllocHost = fake_cuMemAllocHost;
    d->cuMemFreeHost = fake_cuMemFreeHost;
    d->cuMemAllocManaged = fake_cuMemAllocManaged;
    d->cuMemFree = fake_cuMemFree;
    d->cuMemcpy = fake_cuMemcpy;
    d->cuMemcpyAsync = fake_cuMemcpyAsync;
    d->cuMemsetD8 = fake_cuMemsetD8;
    d->cuMemsetD16 = fake_cuMemsetD16;
    d->cuMemsetD32 = fake_cuMemsetD32;
    d->cuMemsetD8Async = fake_cuMemsetD8Async;
    d->cuMemsetD16Async = fake_cuMemsetD16Async;
    d->cuMemsetD32Async = fake_cuMemsetD32Async;
    d->cuStreamSynchronize = fake_cuStreamSyncCounted;
    fake_live_allocs = fake_live_pools = fake_async_frees = fake_syncs = 0;
}

#endif
