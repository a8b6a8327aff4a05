/* Benchmark of texture objects (public API only): creating and destroying a
 * texture object over a 2-D array.
 *
 *   bench/bench_texture [iterations]
 *
 * cuabi: cuabi_texture_create_from_array + cuabi_texture_release (the
 * description checked, the array retained, the handle registered and
 * freed); raw: cuTexObjectCreate + cuTexObjectDestroy on the same CUarray
 * with the same resource and texture descriptions, built once (resolved
 * here with dlopen from the driver cuabi uses: CUABI_DRIVER_PATH or
 * libcuda.so.1). Target: ratio <= 1.05.
 *
 * Many short blocks, raw and cuabi back to back in alternating order, so
 * the host's drift cancels in each block's ratio; the figure is the median
 * of those ratios (with its quartiles), and the best block of each is
 * reported too. A stream memory operation pair (write value + wait value on
 * a created stream) is timed the same way against the raw driver calls.
 * Needs a GPU; prints "skipped" without one.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuabi.h"

#define MAX_BLOCKS 4096

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
        fprintf(stderr, "bench_texture: %s: %s\n", what, cuabi_last_error()->message);
        exit(1);
    }
}

static void check_cu(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "bench_texture: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

typedef CUresult (*tex_create_fn)(CUtexObject *, const CUDA_RESOURCE_DESC *,
                                  const CUDA_TEXTURE_DESC *, const CUDA_RESOURCE_VIEW_DESC *);
typedef CUresult (*tex_destroy_fn)(CUtexObject);
typedef CUresult (*write32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
typedef CUresult (*wait32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* One pair of ways to do the same work: raw (m = 0) and cuabi (m = 1). */
typedef void (*work_fn)(int m, void *ctx);

/* Interleaved blocks of `block` repetitions; prints the figures under `key`. */
static void compare(const char *key, const char *raw_what, const char *cuabi_what, long iters,
                    work_fn work, void *ctx)
{
    static double ratios[MAX_BLOCKS];
    long block = iters / 64 < 2000 ? iters / 64 : 2000;
    if (block < 1)
        block = 1;
    int nblocks = (int)(iters / block);
    if (nblocks > MAX_BLOCKS)
        nblocks = MAX_BLOCKS;
    double best[2] = { 1e30, 1e30 }, sum[2] = { 0, 0 };
    for (int blk = -1; blk < nblocks; blk++) {      /* block -1 warms up */
        double t[2];
        for (int k = 0; k < 2; k++) {
            int m = k ^ (blk & 1);
            double t0 = now_ns();
            for (long i = 0; i < block; i++)
                work(m, ctx);
            t[m] = (now_ns() - t0) / (double)block;
        }
        if (blk < 0)
            continue;
        ratios[blk] = t[1] / t[0];
        for (int m = 0; m < 2; m++) {
            sum[m] += t[m];
            if (t[m] < best[m])
                best[m] = t[m];
        }
    }
    qsort(ratios, (size_t)nblocks, sizeof ratios[0], cmp_double);
    printf("%s_raw_ns %.1f  (%s; best block, mean %.1f)\n", key, best[0], raw_what,
           sum[0] / nblocks);
    printf("%s_cuabi_ns %.1f  (%s; best block, mean %.1f)\n", key, best[1], cuabi_what,
           sum[1] / nblocks);
    printf("%s_ratio_median %.3f  (median of %d interleaved blocks of %ld; quartiles "
           "%.3f..%.3f; target <= 1.05)\n", key, ratios[nblocks / 2], nblocks, block,
           ratios[nblocks / 4], ratios[3 * nblocks / 4]);
    printf("%s_ratio_best %.3f  (best blocks)\n", key, best[1] / best[0]);
}

typedef struct tex_ctx {
    tex_create_fn create;
    tex_destroy_fn destroy;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC td;
    cuabi_array *array;
    cuabi_texture_desc desc;
} tex_ctx;

static void tex_work(int m, void *p)
{
    tex_ctx *c = p;
    if (m == 0) {
        CUtexObject t;
        check_cu(c->create(&t, &c->res, &c->td, NULL), "cuTexObjectCreate");
        check_cu(c->destroy(t), "cuTexObjectDestroy");
    } else {
        cuabi_texture *t;
        check(cuabi_texture_create_from_array(&t, c->array, &c->desc), "create");
        check(cuabi_texture_release(t), "release");
    }
}

typedef struct memop_ctx {
    write32_fn write;
    wait32_fn wait;
    CUstream cs;
    CUdeviceptr word;
    cuabi_stream *stream;
    cuabi_buffer *buffer;
    unsigned n;
} memop_ctx;

static void memop_work(int m, void *p)
{
    memop_ctx *c = p;
    c->n++;
    if (m == 0) {
        check_cu(c->write(c->cs, c->word, c->n, 0), "cuStreamWriteValue32");
        check_cu(c->wait(c->cs, c->word, c->n, CU_STREAM_WAIT_VALUE_EQ), "cuStreamWaitValue32");
    } else {
        check(cuabi_stream_write_value32(c->stream, c->buffer, 0, c->n, 0), "write_value32");
        check(cuabi_stream_wait_value32(c->stream, c->buffer, 0, c->n, CUABI_STREAM_WAIT_VALUE_EQ),
              "wait_value32");
    }
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 100000;
    if (iters <= 0)
        iters = 100000;
    int n = 0;
    if (cuabi_device_count(&n) != CUABI_SUCCESS || n == 0) {
        printf("texture_create_destroy: skipped (no GPU: %s)\n",
               n == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    const char *path = getenv("CUABI_DRIVER_PATH");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    proc_fn gpa = lib ? (proc_fn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
    tex_ctx t;
    memop_ctx mo;
    memset(&t, 0, sizeof t);
    memset(&mo, 0, sizeof mo);
    if (!gpa || gpa("cuTexObjectCreate", (void **)&t.create, 5000, 0, NULL) ||
        gpa("cuTexObjectDestroy", (void **)&t.destroy, 5000, 0, NULL) ||
        gpa("cuStreamWriteValue32", (void **)&mo.write, 11070, 0, NULL) ||
        gpa("cuStreamWaitValue32", (void **)&mo.wait, 11070, 0, NULL)) {
        fprintf(stderr, "bench_texture: cannot resolve the raw driver entry points\n");
        return 1;
    }
    cuabi_device *dev;
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_device_set_current(dev), "set current");
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = 512, ad.height = 512, ad.format = CUABI_ARRAY_FORMAT_FLOAT32;
    check(cuabi_array_create(&t.array, dev, &ad), "array");
    uintptr_t native;
    check(cuabi_array_native_handle(&native, t.array), "native");
    t.res.resType = CU_RESOURCE_TYPE_ARRAY;
    t.res.res.array.hArray = (CUarray)native;
    t.td.addressMode[0] = t.td.addressMode[1] = t.td.addressMode[2] = CU_TR_ADDRESS_MODE_CLAMP;
    t.td.filterMode = CU_TR_FILTER_MODE_LINEAR;
    t.desc = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    t.desc.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    compare("texture_create_destroy", "cuTexObjectCreate + cuTexObjectDestroy, 512x512 float",
            "cuabi_texture_create_from_array + cuabi_texture_release", iters, tex_work, &t);
    check(cuabi_array_release(t.array), "release");

    /* The memory-operation pair on a created stream, the word in device
     * memory from cuMemAlloc (what the driver's documentation names; an H100
     * refused words in the default pool, docs/textures.md). */
    cuabi_memory_resource *res;
    uintptr_t cs, word;
    check(cuabi_stream_create(&mo.stream, dev, NULL), "stream");
    check(cuabi_ipc_memory_resource(&res, dev), "cuMemAlloc resource");
    check(cuabi_buffer_allocate(&mo.buffer, res, 64, 0, mo.stream), "buffer");
    check(cuabi_buffer_memset(mo.buffer, 0, 0, 1, 64, mo.stream), "memset");
    check(cuabi_stream_raw(&cs, mo.stream), "raw stream");
    check(cuabi_buffer_pointer(&word, mo.buffer), "pointer");
    mo.cs = (CUstream)cs;
    mo.word = (CUdeviceptr)word;
    compare("memop_write_wait", "cuStreamWriteValue32 + cuStreamWaitValue32",
            "cuabi_stream_write_value32 + cuabi_stream_wait_value32", iters / 4 > 0 ? iters / 4 : 1,
            memop_work, &mo);
    check(cuabi_stream_synchronize(mo.stream), "sync");
    check(cuabi_buffer_destroy(mo.buffer), "destroy");
    check(cuabi_memory_resource_release(res), "release");
    check(cuabi_stream_release(mo.stream), "release");
    check(cuabi_device_release(dev), "release");
    return 0;
}
