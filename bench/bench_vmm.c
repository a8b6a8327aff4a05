/* Virtual memory, batched copies and pool statistics (issue 25 item 7),
 * public API beside the raw driver (resolved with dlopen).
 *
 *   bench/bench_vmm [--processes N]      (default 5; each figure the median
 *                                          of the N processes' own figures)
 *
 * 1. Growing a VMM buffer 1 GiB -> 8 GiB in 1 GiB steps: cuabi
 *    (cuabi_vmm_buffer_allocate of 1 GiB with an 8 GiB reservation, then
 *    seven cuabi_vmm_buffer_resize) against the raw calls for the same steps
 *    (cuMemAddressReserve of 8 GiB, then per GiB cuMemCreate + cuMemMap +
 *    cuMemSetAccess). Target: ratio <= 1.05.
 * 2. A batched copy of 1,000 x 4 KiB device -> device, enqueue + stream
 *    synchronize: cuabi_copy_batch against raw cuMemcpyBatchAsync with the
 *    same arrays (target <= 1.05), and its ratio to 1,000 raw cuMemcpyAsync
 *    (printed).
 * 3. A pool statistics query: cuabi_pool_get_attribute (one figure) and
 *    cuabi_pool_stats_get (all eight) against raw cuMemPoolGetAttribute.
 *    Target: one query <= 1 us.
 *
 * The card is named in the first line. Each process prints one line of
 * figures ("R ..."), the parent the medians and ratios. Needs a GPU with VMM
 * and 16 GiB free; the batched-copy rows need a CUDA 13 driver.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuabi.h"

extern char **environ;

#define GiB (1ull << 30)
#define NCOPY 1000
#define COPY_SIZE 4096
#define NFIG 9

static void check(cuabi_status st, const char *what)
{
    if (st != CUABI_SUCCESS) {
        fprintf(stderr, "bench_vmm: %s: %s\n", what, cuabi_last_error()->message);
        exit(1);
    }
}

static void cucheck(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "bench_vmm: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the raw driver */
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*afree_fn)(CUdeviceptr, size_t);
typedef CUresult (*batch_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                             size_t *, size_t, CUstream);
typedef CUresult (*copy_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*sync_fn)(CUstream);
typedef CUresult (*pattr_fn)(CUmemoryPool, CUmemPool_attribute, void *);
typedef CUresult (*name_fn)(char *, int, CUdevice);
typedef CUresult (*ctxsync_fn)(void);

static struct {
    reserve_fn reserve;
    create_fn create;
    map_fn map;
    access_fn access;
    unmap_fn unmap;
    release_fn release;
    afree_fn afree;
    batch_fn batch;
    copy_fn copy;
    sync_fn sync;
    pattr_fn pattr;
    name_fn name;
    ctxsync_fn ctxsync;
} raw;

static void *sym(void *lib, const char *name, int required)
{
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f && required) {
        fprintf(stderr, "bench_vmm: %s not in libcuda.so.1\n", name);
        exit(1);
    }
    return f;
}

static void load_raw(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    raw.reserve = (reserve_fn)sym(lib, "cuMemAddressReserve", 1);
    raw.create = (create_fn)sym(lib, "cuMemCreate", 1);
    raw.map = (map_fn)sym(lib, "cuMemMap", 1);
    raw.access = (access_fn)sym(lib, "cuMemSetAccess", 1);
    raw.unmap = (unmap_fn)sym(lib, "cuMemUnmap", 1);
    raw.release = (release_fn)sym(lib, "cuMemRelease", 1);
    raw.afree = (afree_fn)sym(lib, "cuMemAddressFree", 1);
    raw.batch = (batch_fn)sym(lib, "cuMemcpyBatchAsync_v2", 0);
    raw.copy = (copy_fn)sym(lib, "cuMemcpyAsync", 1);
    raw.sync = (sync_fn)sym(lib, "cuStreamSynchronize", 1);
    raw.pattr = (pattr_fn)sym(lib, "cuMemPoolGetAttribute", 1);
    raw.name = (name_fn)sym(lib, "cuDeviceGetName", 1);
    raw.ctxsync = (ctxsync_fn)sym(lib, "cuCtxSynchronize", 1);
}

/* ---- 1. VMM growth */

static double grow_cuabi(cuabi_memory_resource *r)
{
    cuabi_buffer *b;
    double t0 = now_us();
    check(cuabi_vmm_buffer_allocate(&b, r, GiB, 8 * GiB), "vmm allocate");
    for (int g = 2; g <= 8; g++)
        check(cuabi_vmm_buffer_resize(b, g * GiB, NULL), "vmm resize");
    double dt = now_us() - t0;
    check(cuabi_buffer_destroy(b), "vmm destroy");
    return dt;
}

static double grow_raw(int ordinal)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, ordinal },
                            CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h[8];
    CUdeviceptr base;
    double t0 = now_us();
    cucheck(raw.reserve(&base, 8 * GiB, 0, 0, 0), "cuMemAddressReserve");
    for (int g = 0; g < 8; g++) {
        cucheck(raw.create(&h[g], GiB, &prop, 0), "cuMemCreate");
        cucheck(raw.map(base + g * GiB, GiB, 0, h[g], 0), "cuMemMap");
        cucheck(raw.access(base + g * GiB, GiB, &acc, 1), "cuMemSetAccess");
    }
    double dt = now_us() - t0;
    cucheck(raw.ctxsync(), "cuCtxSynchronize");
    for (int g = 0; g < 8; g++) {
        cucheck(raw.unmap(base + g * GiB, GiB), "cuMemUnmap");
        cucheck(raw.release(h[g]), "cuMemRelease");
    }
    cucheck(raw.afree(base, 8 * GiB), "cuMemAddressFree");
    return dt;
}

/* ---- 2. batched copies */

static CUstream cu_stream_of(cuabi_stream *s)
{
    uintptr_t r;
    check(cuabi_stream_raw(&r, s), "stream raw");
    return (CUstream)r;
}

/* one process: figures[] = grow cuabi, grow raw, batch cuabi, batch raw,
 * singles raw, singles cuabi, attr cuabi, stats cuabi, attr raw (us) */
static int run_once(void)
{
    load_raw();
    cuabi_device *dev;
    check(cuabi_device_get(&dev, 0), "device");
    double fig[NFIG] = { 0 };
    /* 1 */
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.reserve_size = 8 * GiB;
    cuabi_memory_resource *vr;
    check(cuabi_vmm_resource_create(&vr, dev, &o), "vmm resource");
    double gc[3], gr[3];
    grow_cuabi(vr), grow_raw(0);   /* warm */
    for (int i = 0; i < 3; i++) {
        gc[i] = grow_cuabi(vr);
        gr[i] = grow_raw(0);
    }
    fig[0] = median(gc, 3), fig[1] = median(gr, 3);
    check(cuabi_memory_resource_release(vr), "release");
    /* 2 */
    cuabi_memory_resource *pool;
    check(cuabi_memory_resource_device_default(&pool, dev), "pool");
    cuabi_stream *s;
    check(cuabi_stream_create(&s, dev, NULL), "stream");
    CUstream cs = cu_stream_of(s);
    cuabi_buffer *a, *b;
    check(cuabi_buffer_allocate(&a, pool, (size_t)NCOPY * COPY_SIZE, 0, s), "alloc");
    check(cuabi_buffer_allocate(&b, pool, (size_t)NCOPY * COPY_SIZE, 0, s), "alloc");
    uintptr_t pa, pb;
    check(cuabi_buffer_pointer(&pa, a), "ptr");
    check(cuabi_buffer_pointer(&pb, b), "ptr");
    static cuabi_copy_item items[NCOPY];
    static CUdeviceptr dsts[NCOPY], srcs[NCOPY];
    static size_t sizes[NCOPY];
    for (int i = 0; i < NCOPY; i++) {
        cuabi_copy_item x = CUABI_COPY_ITEM_INIT;
        items[i] = x;
        items[i].src_buffer = a, items[i].src_offset = (uint64_t)i * COPY_SIZE;
        items[i].dst_buffer = b, items[i].dst_offset = (uint64_t)(NCOPY - 1 - i) * COPY_SIZE;
        items[i].size = COPY_SIZE;
        srcs[i] = pa + (uint64_t)i * COPY_SIZE;
        dsts[i] = pb + (uint64_t)(NCOPY - 1 - i) * COPY_SIZE;
        sizes[i] = COPY_SIZE;
    }
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t idx0 = 0;
    enum { REPS = 31 };
    double bc[REPS], br[REPS], sr[REPS], sc[REPS];
    cuabi_copy_result res = CUABI_COPY_RESULT_INIT;
    check(cuabi_copy_batch(&res, items, NCOPY, s), "copy batch");   /* warm */
    check(cuabi_stream_synchronize(s), "sync");
    for (int r = 0; r < REPS; r++) {
        double t0 = now_us();
        check(cuabi_copy_batch(&res, items, NCOPY, s), "copy batch");
        check(cuabi_stream_synchronize(s), "sync");
        bc[r] = now_us() - t0;
        br[r] = 0;
        if (raw.batch) {
            t0 = now_us();
            cucheck(raw.batch(dsts, srcs, sizes, NCOPY, &attr, &idx0, 1, cs),
                    "cuMemcpyBatchAsync");
            cucheck(raw.sync(cs), "cuStreamSynchronize");
            br[r] = now_us() - t0;
        }
        t0 = now_us();
        for (int i = 0; i < NCOPY; i++)
            cucheck(raw.copy(dsts[i], srcs[i], COPY_SIZE, cs), "cuMemcpyAsync");
        cucheck(raw.sync(cs), "cuStreamSynchronize");
        sr[r] = now_us() - t0;
        t0 = now_us();
        for (int i = 0; i < NCOPY; i++)
            check(cuabi_buffer_copy(b, items[i].dst_offset, a, items[i].src_offset, COPY_SIZE, s),
                  "copy");
        check(cuabi_stream_synchronize(s), "sync");
        sc[r] = now_us() - t0;
    }
    fig[2] = median(bc, REPS), fig[3] = raw.batch ? median(br, REPS) : 0;
    fig[4] = median(sr, REPS), fig[5] = median(sc, REPS);
    if (res.path != CUABI_COPY_PATH_BATCHED)
        fprintf(stderr, "bench_vmm: single copies: %s\n", res.reason);
    /* 3 */
    uintptr_t rawpool;
    check(cuabi_memory_resource_pool(&rawpool, pool), "raw pool");
    enum { Q = 200000 };
    uint64_t v;
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    double t0 = now_us();
    for (int i = 0; i < Q; i++)
        check(cuabi_pool_get_attribute(&v, pool, CUABI_POOL_USED_MEM_CURRENT), "attr");
    fig[6] = (now_us() - t0) / Q;
    t0 = now_us();
    for (int i = 0; i < Q / 10; i++)
        check(cuabi_pool_stats_get(&st, pool), "stats");
    fig[7] = (now_us() - t0) / (Q / 10);
    cuuint64_t rv;
    t0 = now_us();
    for (int i = 0; i < Q; i++)
        cucheck(raw.pattr((CUmemoryPool)rawpool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &rv),
                "cuMemPoolGetAttribute");
    fig[8] = (now_us() - t0) / Q;
    check(cuabi_buffer_free_async(a, s), "free");
    check(cuabi_buffer_free_async(b, s), "free");
    check(cuabi_stream_synchronize(s), "sync");
    cuabi_stream_release(s);
    cuabi_memory_resource_release(pool);
    cuabi_device_release(dev);
    printf("R");
    for (int i = 0; i < NFIG; i++)
        printf(" %.4f", fig[i]);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--once") == 0)
        return run_once();
    int procs = 5;
    if (argc == 3 && strcmp(argv[1], "--processes") == 0)
        procs = atoi(argv[2]) < 1 ? 1 : atoi(argv[2]);
    load_raw();
    cuabi_device *dev;
    check(cuabi_device_get(&dev, 0), "device (needs a GPU)");
    char name[256] = "?";
    int ord = 0;
    check(cuabi_device_ordinal(&ord, dev), "ordinal");
    CUdevice cu = ord;
    (void)raw.name(name, sizeof name, cu);
    cuabi_device_release(dev);
    double (*fig)[NFIG] = calloc((size_t)procs, sizeof *fig);
    for (int p = 0; p < procs; p++) {
        int pipefd[2];
        if (pipe(pipefd) != 0)
            return 1;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pipefd[0]);
        char *args[] = { argv[0], "--once", NULL };
        pid_t pid;
        if (posix_spawn(&pid, argv[0], &fa, NULL, args, environ) != 0) {
            fprintf(stderr, "bench_vmm: cannot run %s\n", argv[0]);
            return 1;
        }
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        FILE *f = fdopen(pipefd[0], "r");
        char line[512] = "";
        while (fgets(line, sizeof line, f) && line[0] != 'R') { }
        fclose(f);
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line[0] != 'R') {
            fprintf(stderr, "bench_vmm: process %d failed\n", p);
            return 1;
        }
        char *q = line + 1;
        for (int i = 0; i < NFIG; i++)
            fig[p][i] = strtod(q, &q);
    }
    double med[NFIG], col[64];
    for (int i = 0; i < NFIG; i++) {
        for (int p = 0; p < procs && p < 64; p++)
            col[p] = fig[p][i];
        med[i] = median(col, procs < 64 ? procs : 64);
    }
    printf("bench_vmm on %s (device %d), median of %d processes\n", name, ord, procs);
    printf("VMM 1 -> 8 GiB in 1 GiB steps: cuabi %.1f us, raw %.1f us, ratio %.3f (target <= 1.05)\n",
           med[0], med[1], med[0] / med[1]);
    if (med[3] > 0)
        printf("batched copy 1,000 x 4 KiB: cuabi %.1f us, raw cuMemcpyBatchAsync %.1f us, ratio "
               "%.3f (target <= 1.05)\n", med[2], med[3], med[2] / med[3]);
    else
        printf("batched copy 1,000 x 4 KiB: cuabi %.1f us (single copies: no "
               "cuMemcpyBatchAsync_v2 in this driver)\n", med[2]);
    printf("1,000 single copies: raw cuMemcpyAsync %.1f us, cuabi_buffer_copy %.1f us; "
           "batched / single (raw) %.3f\n", med[4], med[5], med[2] / med[4]);
    printf("pool statistics: one attribute %.3f us (raw cuMemPoolGetAttribute %.3f us, ratio "
           "%.2f; target <= 1 us), all eight %.3f us\n", med[6], med[8], med[6] / med[8], med[7]);
    free(fig);
    return 0;
}
