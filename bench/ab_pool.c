/* A/B of libcuabi builds on the pool allocate + free pair, in one process:
 *
 *     bench/ab_pool A/libcuabi.so.1 B/libcuabi.so.1 [...]
 *
 * Each build is opened on its own (RTLD_LOCAL: its own handles, caches and
 * per-thread state), makes its own stream on device 0 and runs blocks of
 * cuabi_buffer_allocate + cuabi_buffer_free_async pairs, interleaved with
 * blocks of the raw driver pair in a rotating order. A build's figure is
 * the median of its per-block ratios to the raw block of the same round.
 * One process removes the 10-40% that separate processes of one host
 * differ by, which hides differences of a few nanoseconds. Public API and
 * the driver only; the builds' headers need not match this file's. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int status_t; /* cuabi_status */
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_fn)(CUdeviceptr, CUstream);

enum { SIZE = 1 << 20, PAIRS = 2000, BLOCKS = 200, MAX_BUILDS = 8 };

typedef struct build {
    const char *path;
    status_t (*allocate)(void **, void *, size_t, size_t, void *);
    status_t (*free_async)(void *, void *);
    void *resource, *stream;
} build;

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

/* Open one build and make its stream and default resource; the first
 * build's pool and stream serve the raw pair. */
static int open_build(build *b, const char *path, CUmemoryPool *pool, CUstream *stream)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "ab_pool: %s\n", dlerror());
        return -1;
    }
    status_t (*device_get)(void **, int) = (status_t(*)(void **, int))dlsym(h, "cuabi_device_get");
    status_t (*stream_create)(void **, void *, void *) =
        (status_t(*)(void **, void *, void *))dlsym(h, "cuabi_stream_create");
    status_t (*default_pool)(void **, void *) =
        (status_t(*)(void **, void *))dlsym(h, "cuabi_memory_resource_device_default");
    status_t (*pool_raw)(uintptr_t *, void *) =
        (status_t(*)(uintptr_t *, void *))dlsym(h, "cuabi_memory_resource_pool");
    status_t (*stream_raw)(uintptr_t *, void *) =
        (status_t(*)(uintptr_t *, void *))dlsym(h, "cuabi_stream_raw");
    b->path = path;
    b->allocate = (status_t(*)(void **, void *, size_t, size_t, void *))dlsym(h, "cuabi_buffer_allocate");
    b->free_async = (status_t(*)(void *, void *))dlsym(h, "cuabi_buffer_free_async");
    void *dev;
    uintptr_t u;
    if (!device_get || !stream_create || !default_pool || !pool_raw || !stream_raw ||
        !b->allocate || !b->free_async || device_get(&dev, 0) ||
        stream_create(&b->stream, dev, NULL) || default_pool(&b->resource, dev)) {
        fprintf(stderr, "ab_pool: %s: setup failed\n", path);
        return -1;
    }
    if (!*pool) {
        pool_raw(&u, b->resource);
        *pool = (CUmemoryPool)u;
        stream_raw(&u, b->stream);
        *stream = (CUstream)u;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int nbuilds = argc - 1;
    if (nbuilds < 1 || nbuilds > MAX_BUILDS) {
        fprintf(stderr, "usage: ab_pool LIBCUABI.so [LIBCUABI.so ...] (at most %d)\n", MAX_BUILDS);
        return 2;
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    alloc_fn raw_alloc = cuda ? (alloc_fn)dlsym(cuda, "cuMemAllocFromPoolAsync") : NULL;
    free_fn raw_free = cuda ? (free_fn)dlsym(cuda, "cuMemFreeAsync") : NULL;
    if (!raw_alloc || !raw_free) {
        printf("ab_pool: skipped (no CUDA driver)\n");
        return 0;
    }
    build builds[MAX_BUILDS];
    CUmemoryPool pool = NULL;
    CUstream cs = NULL;
    for (int i = 0; i < nbuilds; i++)
        if (open_build(&builds[i], argv[i + 1], &pool, &cs))
            return 1;
    int nv = nbuilds + 1; /* 0: raw */
    static double t[MAX_BUILDS + 1][BLOCKS];
    for (int blk = -2; blk < BLOCKS; blk++) {   /* two blocks warm up */
        for (int k = 0; k < nv; k++) {
            int v = (k + blk + 4 * nv) % nv;
            double t0 = now_ns();
            if (v == 0) {
                for (int i = 0; i < PAIRS; i++) {
                    CUdeviceptr p;
                    raw_alloc(&p, SIZE, pool, cs);
                    raw_free(p, cs);
                }
            } else {
                build *b = &builds[v - 1];
                for (int i = 0; i < PAIRS; i++) {
                    void *buf;
                    b->allocate(&buf, b->resource, SIZE, 0, b->stream);
                    b->free_async(buf, b->stream);
                }
            }
            if (blk >= 0)
                t[v][blk] = (now_ns() - t0) / PAIRS;
        }
    }
    for (int v = 1; v < nv; v++) {
        double ratio[BLOCKS];
        for (int blk = 0; blk < BLOCKS; blk++)
            ratio[blk] = t[v][blk] / t[0][blk];
        qsort(ratio, BLOCKS, sizeof ratio[0], cmp_double);
        qsort(t[v], BLOCKS, sizeof t[v][0], cmp_double);
        printf("%-40s ratio %.3f (quartiles %.3f..%.3f), %.1f ns a pair\n", builds[v - 1].path,
               ratio[BLOCKS / 2], ratio[BLOCKS / 4], ratio[3 * BLOCKS / 4], t[v][BLOCKS / 2]);
    }
    qsort(t[0], BLOCKS, sizeof t[0][0], cmp_double);
    printf("%-40s %.1f ns a pair\n", "raw driver", t[0][BLOCKS / 2]);
    return 0;
}
