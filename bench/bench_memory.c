/* Benchmarks of the memory module (public API only).
 *
 *   bench/bench_memory [iterations]
 *
 * 1. DLPack import + export of a 2-D view, in C: import a producer's
 *    DLManagedTensorVersioned into a view, export the view again, release
 *    the view and call the export's deleter (which releases the producer's
 *    tensor). Host memory: needs no GPU. Target: <= 0.5 us per round trip.
 * 2. Allocate + free from the device's default pool on a stream, through
 *    cuabi_buffer_allocate + cuabi_buffer_free_async, against raw
 *    cuMemAllocFromPoolAsync + cuMemFreeAsync on the same pool and stream
 *    (resolved here with dlopen). Needs a GPU. Target: ratio <= 1.1.
 *
 * Each figure is the best of several interleaved runs, in ns per iteration;
 * the pool ratio also as the median of the rounds' own ratios.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuabi.h"

#define RUNS 7
#define POOL_RUNS 15
#define POOL_BLOCKS 4096

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void check(cuabi_status st, const char *what)
{
    if (st != CUABI_SUCCESS) {
        fprintf(stderr, "bench_memory: %s: %s\n", what, cuabi_last_error()->message);
        exit(1);
    }
}

/* ---------------------------------------------------------------- DLPack */

static long producer_deletes;
static void producer_deleter(DLManagedTensorVersioned *self)
{
    (void)self;
    producer_deletes++;
}

static double bench_dlpack(long iters)
{
    static float data[64 * 48];
    static int64_t shape[2] = { 64, 48 }, strides[2] = { 48, 1 };
    DLManagedTensorVersioned producer = {
        .version = { 1, 1 },
        .deleter = producer_deleter,
        .dl_tensor = { .data = data, .device = { kDLCPU, 0 }, .ndim = 2,
                       .dtype = { kDLFloat, 32, 1 }, .shape = shape, .strides = strides },
    };
    double best = 1e30;
    for (int run = 0; run < RUNS; run++) {
        long before = producer_deletes;
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            cuabi_view *v;
            DLManagedTensorVersioned *out;
            check(cuabi_view_from_dlpack_versioned(&v, &producer), "import");
            check(cuabi_view_to_dlpack_versioned(&out, v), "export");
            check(cuabi_view_release(v), "release");
            out->deleter(out);
        }
        double per = (now_ns() - t0) / (double)iters;
        if (producer_deletes - before != iters) {
            fprintf(stderr, "bench_memory: producer deleter ran %ld times for %ld imports\n",
                    producer_deletes - before, iters);
            exit(1);
        }
        if (per < best)
            best = per;
    }
    return best;
}

/* ------------------------------------------------------------------ pool */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_fn)(CUdeviceptr, CUstream);

static int bench_pool(long iters, size_t size, cuabi_release_mode mode, const char *key)
{
    int n = 0;
    if (cuabi_device_count(&n) != CUABI_SUCCESS || n == 0) {
        printf("pool_alloc_free: skipped (no GPU: %s)\n",
               n == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    /* The driver cuabi uses (CUABI_DRIVER_PATH: e.g. bench/fake_libcuda.so). */
    const char *path = getenv("CUABI_DRIVER_PATH");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    alloc_fn raw_alloc = lib ? (alloc_fn)dlsym(lib, "cuMemAllocFromPoolAsync") : NULL;
    free_fn raw_free = lib ? (free_fn)dlsym(lib, "cuMemFreeAsync") : NULL;
    if (!raw_alloc || !raw_free) {
        fprintf(stderr, "bench_memory: cannot resolve the raw driver entry points\n");
        return 1;
    }
    cuabi_device *dev;
    cuabi_stream *stream;
    cuabi_memory_resource *res;
    uintptr_t pool_raw, stream_raw;
    check(cuabi_release_mode_set(mode), "release mode");
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_stream_create(&stream, dev, NULL), "stream");
    check(cuabi_memory_resource_device_default(&res, dev), "default pool");
    check(cuabi_memory_resource_pool(&pool_raw, res), "pool");
    check(cuabi_stream_raw(&stream_raw, stream), "raw stream");
    CUmemoryPool pool = (CUmemoryPool)pool_raw;
    CUstream cs = (CUstream)stream_raw;
    /* Many short blocks, raw and cuabi back to back (the order alternating
     * from block to block), so the host's drift between blocks cancels in
     * each block's ratio; the median of those ratios is the figure. The
     * best block of each is reported too. */
    long block = iters / POOL_RUNS < 2000 ? iters / POOL_RUNS : 2000;
    if (block < 1)
        block = 1;
    int nblocks = (int)(iters / block);
    if (nblocks > POOL_BLOCKS)
        nblocks = POOL_BLOCKS;
    static double ratios[POOL_BLOCKS];
    double best_raw = 1e30, best_cuabi = 1e30, sum_raw = 0, sum_cuabi = 0;
    for (int blk = -1; blk < nblocks; blk++) {    /* block -1 warms up */
        double t[2];
        for (int k = 0; k < 2; k++) {
            int cuabi_first = blk & 1;
            int m = k ^ cuabi_first;               /* 0: raw, 1: cuabi */
            double t0 = now_ns();
            for (long i = 0; i < block; i++) {
                if (m == 0) {
                    CUdeviceptr p;
                    if (raw_alloc(&p, size, pool, cs) != CUDA_SUCCESS ||
                        raw_free(p, cs) != CUDA_SUCCESS) {
                        fprintf(stderr, "bench_memory: raw pool allocation failed\n");
                        return 1;
                    }
                } else {
                    cuabi_buffer *b;
                    check(cuabi_buffer_allocate(&b, res, size, 0, stream), "allocate");
                    check(cuabi_buffer_free_async(b, stream), "free_async");
                }
            }
            t[m] = (now_ns() - t0) / (double)block;
        }
        if (blk < 0)
            continue;
        ratios[blk] = t[1] / t[0];
        sum_raw += t[0];
        sum_cuabi += t[1];
        if (t[0] < best_raw)
            best_raw = t[0];
        if (t[1] < best_cuabi)
            best_cuabi = t[1];
    }
    check(cuabi_stream_synchronize(stream), "sync");
    qsort(ratios, (size_t)nblocks, sizeof ratios[0], cmp_double);
    printf("%s_raw_ns %.1f  (cuMemAllocFromPoolAsync + cuMemFreeAsync, %zu bytes; "
           "best block, mean %.1f)\n", key, best_raw, size, sum_raw / nblocks);
    printf("%s_cuabi_ns %.1f  (cuabi_buffer_allocate + cuabi_buffer_free_async, %s; "
           "best block, mean %.1f)\n", key, best_cuabi,
           mode == CUABI_RELEASE_FAST ? "CUABI_RELEASE_FAST" : "CUABI_RELEASE_CAPTURE_SAFE",
           sum_cuabi / nblocks);
    printf("%s_ratio %.3f  (best blocks; target <= 1.05)\n", key, best_cuabi / best_raw);
    printf("%s_ratio_median %.3f  (median of %d interleaved blocks of %ld pairs; "
           "quartiles %.3f..%.3f)\n", key, ratios[nblocks / 2], nblocks, block,
           ratios[nblocks / 4], ratios[3 * nblocks / 4]);
    check(cuabi_memory_resource_release(res), "release");
    check(cuabi_stream_release(stream), "release");
    check(cuabi_device_release(dev), "release");
    return 0;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    if (iters <= 0)
        iters = 200000;
    double dl = bench_dlpack(iters);
    printf("dlpack_import_export_2d_ns %.1f  (target <= 500)\n", dl);
    /* The pair in each release mode (cuabi_release_mode): the default frees
     * in RELAXED capture mode (no capture anywhere breaks), FAST at the
     * driver's floor. */
    int rc = bench_pool(iters, (size_t)1 << 20, CUABI_RELEASE_FAST, "pool_alloc_free_fast");
    if (rc == 0)
        rc = bench_pool(iters, (size_t)1 << 20, CUABI_RELEASE_CAPTURE_SAFE, "pool_alloc_free");
    return rc;
}
