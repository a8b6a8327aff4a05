/* CPU-side cost of a pool allocate + free pair, against the fake driver.
 *
 * bench_memory measures cuabi against the real driver on a GPU; this one
 * isolates what cuabi adds on the CPU: the fake cuMemAllocFromPoolAsync and
 * cuMemFreeAsync do almost nothing, so "cuabi - raw" is cuabi's overhead per
 * pair (target: <= ~65 ns, 10% of the driver's ~650 ns on an H200). Same
 * size, same stream, raw and cuabi rounds interleaved, best of RUNS.
 * Usage: bench_memory_cpu [iterations]  (built with make, run by hand). */
#include "fake_driver.h"

#include <stdio.h>
#include <time.h>

#define RUNS 9

static uintptr_t next_ptr = 0x10000000;
static CUresult CUDAAPI cheap_alloc(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s)
{
    (void)p; (void)s;
    *d = (CUdeviceptr)next_ptr;
    next_ptr += n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI cheap_free(CUdeviceptr d, CUstream s)
{
    (void)s;
    next_ptr = (uintptr_t)d;
    return CUDA_SUCCESS;
}
static int pool_token;
static CUresult CUDAAPI default_pool(CUmemoryPool *p, CUdevice d)
{
    (void)d;
    *p = (CUmemoryPool)&pool_token;
    return CUDA_SUCCESS;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void check(cuabi_status st, const char *what)
{
    if (st != CUABI_SUCCESS) {
        fprintf(stderr, "bench_memory_cpu: %s: %s\n", what, cuabi_last_error()->message);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 1000000;
    if (iters <= 0)
        iters = 1000000;
    fake_driver_install();
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemAllocFromPoolAsync = cheap_alloc;
    d->cuMemFreeAsync = cheap_free;
    d->cuDeviceGetDefaultMemPool = default_pool;
    cuabi_device *dev;
    cuabi_stream *stream;
    cuabi_memory_resource *res;
    uintptr_t pool_raw, stream_raw;
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_stream_create(&stream, dev, NULL), "stream");
    check(cuabi_memory_resource_device_default(&res, dev), "default pool");
    check(cuabi_memory_resource_pool(&pool_raw, res), "pool");
    check(cuabi_stream_raw(&stream_raw, stream), "raw stream");
    CUmemoryPool pool = (CUmemoryPool)pool_raw;
    CUstream cs = (CUstream)stream_raw;
    /* through the table, as an application calling the driver would */
    CUresult (*volatile raw_alloc)(CUdeviceptr *, size_t, CUmemoryPool, CUstream) = cheap_alloc;
    CUresult (*volatile raw_free)(CUdeviceptr, CUstream) = cheap_free;
    const size_t size = (size_t)1 << 20;
    double best_raw = 1e30, best_cuabi = 1e30;
    for (int run = 0; run < RUNS; run++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            CUdeviceptr p;
            if (raw_alloc(&p, size, pool, cs) != CUDA_SUCCESS || raw_free(p, cs) != CUDA_SUCCESS)
                return 1;
        }
        double raw = (now_ns() - t0) / (double)iters;
        t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            cuabi_buffer *b;
            check(cuabi_buffer_allocate(&b, res, size, 0, stream), "allocate");
            check(cuabi_buffer_free_async(b, stream), "free_async");
        }
        double ours = (now_ns() - t0) / (double)iters;
        if (raw < best_raw)
            best_raw = raw;
        if (ours < best_cuabi)
            best_cuabi = ours;
    }
    printf("fake_pool_alloc_free_raw_ns %.1f\n", best_raw);
    printf("fake_pool_alloc_free_cuabi_ns %.1f\n", best_cuabi);
    printf("fake_pool_alloc_free_overhead_ns %.1f  (target <= 65)\n", best_cuabi - best_raw);
    check(cuabi_memory_resource_release(res), "release");
    check(cuabi_stream_release(stream), "release");
    check(cuabi_device_release(dev), "release");
    cuabi__driver_install_fake(NULL);
    return 0;
}
