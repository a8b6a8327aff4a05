/* What each part of cuabi's pool allocate + free pair costs next to the
 * real driver (issue 13, item 4): the raw pair alone, and the raw pair with
 * one ingredient of cuabi's added (two atomic updates, a malloc/free, four
 * public handle lookups, a buffer of size 0, i.e. the object without the
 * driver calls), beside cuabi's resource-level and buffer-level pairs.
 * Variants run in short blocks in rotation; each row is the median block.
 *
 *     bench/bench_pool_parts [BLOCKS]
 *
 * A breakdown, not a target: bench_memory reports the pair's ratio. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuabi.h"

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_fn)(CUdeviceptr, CUstream);

enum { SIZE = 1 << 20, PAIRS = 2000, MAX_BLOCKS = 1000 };

static alloc_fn raw_alloc;
static free_fn raw_free;
static CUmemoryPool pool;
static CUstream cu_stream;
static cuabi_memory_resource *res;
static cuabi_stream *stream;
static cuabi_buffer *kept;
static _Alignas(64) _Atomic long counter;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void raw_pair(void)
{
    CUdeviceptr p;
    raw_alloc(&p, SIZE, pool, cu_stream);
    raw_free(p, cu_stream);
}

static void raw_atomics(void)
{
    CUdeviceptr p;
    raw_alloc(&p, SIZE, pool, cu_stream);
    atomic_fetch_add(&counter, 1);
    raw_free(p, cu_stream);
    atomic_fetch_sub(&counter, 1);
}

static void raw_malloc(void)
{
    CUdeviceptr p;
    raw_alloc(&p, SIZE, pool, cu_stream);
    void *m = malloc(120);
    __asm__ volatile("" : : "r"(m) : "memory");
    raw_free(p, cu_stream);
    free(m);
}

static void raw_lookups(void)
{
    CUdeviceptr p;
    cuabi_memory_kind kind;
    uintptr_t u;
    raw_alloc(&p, SIZE, pool, cu_stream);
    cuabi_memory_resource_kind(&kind, res);
    cuabi_stream_raw(&u, stream);
    raw_free(p, cu_stream);
    cuabi_buffer_pointer(&u, kept);
    cuabi_stream_raw(&u, stream);
}

static void resource_pair(void)
{
    uintptr_t p;
    cuabi_memory_resource_allocate(&p, res, SIZE, 0, stream);
    cuabi_memory_resource_deallocate(res, p, SIZE, 0, stream);
}

static void raw_empty_buffer(void)
{
    CUdeviceptr p;
    cuabi_buffer *b;
    raw_alloc(&p, SIZE, pool, cu_stream);
    cuabi_buffer_allocate(&b, res, 0, 0, stream);
    raw_free(p, cu_stream);
    cuabi_buffer_free_async(b, stream);
}

static void buffer_pair(void)
{
    cuabi_buffer *b;
    cuabi_buffer_allocate(&b, res, SIZE, 0, stream);
    cuabi_buffer_free_async(b, stream);
}

static void empty_buffer_alone(void)
{
    cuabi_buffer *b;
    cuabi_buffer_allocate(&b, res, 0, 0, stream);
    cuabi_buffer_free_async(b, stream);
}

static const struct variant {
    const char *name;
    void (*run)(void);
} variants[] = {
    { "raw pair (cuMemAllocFromPoolAsync + cuMemFreeAsync)", raw_pair },
    { "raw + 2 atomic read-modify-writes", raw_atomics },
    { "raw + malloc/free of 120 bytes", raw_malloc },
    { "raw + 4 public handle lookups", raw_lookups },
    { "cuabi_memory_resource_allocate + deallocate", resource_pair },
    { "raw + a size-0 cuabi buffer pair", raw_empty_buffer },
    { "cuabi_buffer_allocate + free_async", buffer_pair },
    { "a size-0 cuabi buffer pair alone", empty_buffer_alone },
};
enum { NV = sizeof variants / sizeof variants[0] };

static void check(cuabi_status st, const char *what)
{
    if (st != CUABI_SUCCESS) {
        fprintf(stderr, "bench_pool_parts: %s: %s\n", what, cuabi_last_error()->message);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int blocks = argc > 1 ? atoi(argv[1]) : 100;
    if (blocks < 1 || blocks > MAX_BLOCKS)
        blocks = 100;
    int n = 0;
    if (cuabi_device_count(&n) != CUABI_SUCCESS || n == 0) {
        printf("bench_pool_parts: skipped (no GPU)\n");
        return 0;
    }
    const char *path = getenv("CUABI_DRIVER_PATH");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    raw_alloc = lib ? (alloc_fn)dlsym(lib, "cuMemAllocFromPoolAsync") : NULL;
    raw_free = lib ? (free_fn)dlsym(lib, "cuMemFreeAsync") : NULL;
    if (!raw_alloc || !raw_free) {
        fprintf(stderr, "bench_pool_parts: cannot resolve the raw driver entry points\n");
        return 1;
    }
    cuabi_device *dev;
    uintptr_t u;
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_stream_create(&stream, dev, NULL), "stream");
    check(cuabi_memory_resource_device_default(&res, dev), "default pool");
    check(cuabi_memory_resource_pool(&u, res), "pool");
    pool = (CUmemoryPool)u;
    check(cuabi_stream_raw(&u, stream), "raw stream");
    cu_stream = (CUstream)u;
    check(cuabi_buffer_allocate(&kept, res, 256, 0, stream), "allocate");
    static double t[NV][MAX_BLOCKS];
    for (int blk = -2; blk < blocks; blk++) {      /* two blocks warm up */
        for (int k = 0; k < NV; k++) {
            int v = (k + blk + NV) % NV;           /* rotate the order */
            double t0 = now_ns();
            for (int i = 0; i < PAIRS; i++)
                variants[v].run();
            if (blk >= 0)
                t[v][blk] = (now_ns() - t0) / PAIRS;
        }
    }
    check(cuabi_stream_synchronize(stream), "sync");
    double med[NV];
    for (int v = 0; v < NV; v++) {
        qsort(t[v], (size_t)blocks, sizeof t[v][0], cmp_double);
        med[v] = t[v][blocks / 2];
    }
    printf("pool pair parts, ns per pair (median of %d blocks of %d; + = over the raw pair)\n",
           blocks, PAIRS);
    for (int v = 0; v < NV; v++)
        printf("  %-52s %8.1f  %+7.1f\n", variants[v].name, med[v], med[v] - med[0]);
    check(cuabi_buffer_free_async(kept, stream), "free");
    check(cuabi_memory_resource_release(res), "release");
    check(cuabi_stream_release(stream), "release");
    check(cuabi_device_release(dev), "release");
    return 0;
}
