/* Several GPUs and processes (issue 15), public API only.
 *
 *   bench/bench_peer [--quick]
 *
 * 1. Peer copy bandwidth GPU 0 -> GPU 1 (cuabi_peer_copy on a stream of
 *    GPU 0, timed with events), 1 MiB .. 1 GiB, with peer access off and
 *    on, against the raw cuMemcpyPeerAsync on the same buffers and stream
 *    (resolved with dlopen). Needs two GPUs.
 * 2. IPC latency: cuabi_ipc_buffer_export in this process, and
 *    cuabi_ipc_buffer_import and destroy in a child process (this program,
 *    re-executed, its context made before anything is timed), per call,
 *    1 MiB buffers, beside the raw cuIpcGetMemHandle / cuIpcOpenMemHandle /
 *    cuIpcCloseMemHandle on the same memory. Needs one GPU.
 * 3. Pool IPC latency: the same for buffers of an IPC pool
 *    (cuabi_ipc_pool_create): the pool's fd goes to the child once
 *    (cuabi_ipc_fd_send), which maps it (timed once), then per buffer
 *    cuabi_ipc_buffer_export here, cuabi_ipc_pool_buffer_import and destroy
 *    there, beside the raw cuMemPoolExportPointer / cuMemPoolImportPointer /
 *    cuMemFree on the same memory. Needs one GPU.
 *
 * Prints one table; figures are medians of the runs.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuabi.h"

extern char **environ;

static void check(cuabi_status st, const char *what)
{
    if (st != CUABI_SUCCESS) {
        fprintf(stderr, "bench_peer: %s: %s\n", what, cuabi_last_error()->message);
        exit(1);
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* ------------------------------------------------------------ bandwidth */

typedef CUresult (*peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);

typedef struct pair {
    cuabi_buffer *src, *dst;
    cuabi_stream *stream;
    cuabi_event *start, *end;
    uintptr_t sp, dp, sctx, dctx, raw_stream;
    peer_fn raw;
} pair;

/* GB/s of `iters` copies of `size` bytes, through cuabi or the raw driver. */
static double gbps(pair *p, size_t size, int iters, int raw)
{
    check(cuabi_event_record(p->start, p->stream), "record");
    for (int i = 0; i < iters; i++) {
        if (raw) {
            if (p->raw((CUdeviceptr)p->dp, (CUcontext)p->dctx, (CUdeviceptr)p->sp,
                       (CUcontext)p->sctx, size, (CUstream)p->raw_stream) != CUDA_SUCCESS) {
                fprintf(stderr, "bench_peer: raw cuMemcpyPeerAsync failed\n");
                exit(1);
            }
        } else {
            check(cuabi_peer_copy(p->dst, 0, p->src, 0, size, p->stream), "peer copy");
        }
    }
    check(cuabi_event_record(p->end, p->stream), "record");
    check(cuabi_event_synchronize(p->end), "sync");
    float ms;
    check(cuabi_event_elapsed_ms(&ms, p->start, p->end), "elapsed");
    return (double)size * iters / (ms * 1e-3) / 1e9;
}

static void bench_bandwidth(int quick)
{
    int n = 0;
    check(cuabi_device_count(&n), "device count");
    if (n < 2) {
        printf("peer copy bandwidth: skipped (%d GPU%s; needs 2)\n", n, n == 1 ? "" : "s");
        return;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    pair p = { 0 };
    p.raw = lib ? (peer_fn)dlsym(lib, "cuMemcpyPeerAsync") : NULL;
    cuabi_device *d0, *d1;
    cuabi_memory_resource *r0, *r1;
    check(cuabi_device_get(&d0, 0), "device 0");
    check(cuabi_device_get(&d1, 1), "device 1");
    check(cuabi_memory_resource_device_default(&r0, d0), "pool 0");
    check(cuabi_memory_resource_device_default(&r1, d1), "pool 1");
    size_t most = quick ? (size_t)64 << 20 : (size_t)1 << 30;
    check(cuabi_stream_create(&p.stream, d0, NULL), "stream");
    check(cuabi_buffer_allocate(&p.src, r0, most, 0, p.stream), "src");
    check(cuabi_buffer_allocate(&p.dst, r1, most, 0, p.stream), "dst");
    check(cuabi_stream_synchronize(p.stream), "sync");
    check(cuabi_event_create(&p.start, d0, NULL), "event");
    check(cuabi_event_create(&p.end, d0, NULL), "event");
    check(cuabi_buffer_pointer(&p.sp, p.src), "ptr");
    check(cuabi_buffer_pointer(&p.dp, p.dst), "ptr");
    check(cuabi_device_context(&p.sctx, d0), "ctx");
    check(cuabi_device_context(&p.dctx, d1), "ctx");
    check(cuabi_stream_raw(&p.raw_stream, p.stream), "raw stream");
    int can = 0;
    check(cuabi_peer_get_attribute(&can, d0, d1, CUABI_PEER_ACCESS_SUPPORTED), "attribute");
    printf("peer copy GPU 0 -> GPU 1 (GB/s, median of 5; raw = cuMemcpyPeerAsync)\n");
    printf("%10s  %12s %12s  %12s %12s\n", "size", "cuabi off", "raw off", "cuabi on", "raw on");
    for (size_t size = (size_t)1 << 20; size <= most; size <<= 2) {
        double fig[4] = { 0, 0, 0, 0 };
        for (int peer = 0; peer < 2; peer++) {
            if (peer && !can)
                break;
            /* "On": context peer access and, for these pool buffers, the pools'
             * access (without it the driver stages pool-to-pool copies through
             * the host: 38 GB/s instead of NVLink's on the 2026-11-26 run). */
            if (peer) {
                check(cuabi_peer_enable(d0, d1), "enable"), check(cuabi_peer_enable(d1, d0), "enable");
                check(cuabi_peer_set_pool_access(r0, d1, CUABI_PEER_ACCESS_READ_WRITE), "pool");
                check(cuabi_peer_set_pool_access(r1, d0, CUABI_PEER_ACCESS_READ_WRITE), "pool");
            }
            int iters = (int)(((size_t)2 << 30) / size);
            iters = iters < 3 ? 3 : iters > 200 ? 200 : iters;
            for (int raw = 0; raw < 2; raw++) {
                if (raw && !p.raw)
                    continue;
                double runs[5];
                gbps(&p, size, 1, raw);   /* warm up */
                for (int r = 0; r < 5; r++)
                    runs[r] = gbps(&p, size, iters, raw);
                fig[peer * 2 + raw] = median(runs, 5);
            }
            if (peer)
                check(cuabi_peer_disable(d0, d1), "disable"), check(cuabi_peer_disable(d1, d0), "disable");
        }
        printf("%7zu MiB  %12.1f %12.1f  %12.1f %12.1f\n", size >> 20, fig[0], fig[1], fig[2],
               fig[3]);
    }
    if (!can)
        printf("(peer access not supported between GPU 0 and GPU 1: the 'on' columns are 0)\n");
    cuabi_event_release(p.start);
    cuabi_event_release(p.end);
    cuabi_buffer_destroy(p.src);
    cuabi_buffer_destroy(p.dst);
    cuabi_stream_release(p.stream);
    cuabi_memory_resource_release(r0);
    cuabi_memory_resource_release(r1);
    cuabi_device_release(d0);
    cuabi_device_release(d1);
}

/* ------------------------------------------------------------------ IPC */

enum { IPC_BUFFERS = 64 };

typedef CUresult (*ipc_get_fn)(CUipcMemHandle *, CUdeviceptr);
typedef CUresult (*ipc_open_fn)(CUdeviceptr *, CUipcMemHandle, unsigned int);
typedef CUresult (*ipc_close_fn)(CUdeviceptr);

static void *driver_entry(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f) {
        fprintf(stderr, "bench_peer: cannot resolve %s\n", name);
        exit(1);
    }
    return f;
}

static void hex(char *out, const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void unhex(uint8_t *d, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(s + 2 * i, "%2x", &v);
        d[i] = (uint8_t)v;
    }
}

/* The child: make the context current first (a process's start is not an
 * IPC cost), then for each line on stdin either import a cuabi descriptor
 * and destroy the buffer ("C hex") or open and close a raw cuIpcMemHandle
 * ("R hex"), and print the medians in microseconds: cuabi import, cuabi
 * release, raw open, raw close. */
static int ipc_child(void)
{
    cuabi_device *dev;
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_device_set_current(dev), "set current");
    ipc_open_fn raw_open = (ipc_open_fn)driver_entry("cuIpcOpenMemHandle_v2");
    ipc_close_fn raw_close = (ipc_close_fn)driver_entry("cuIpcCloseMemHandle");
    char line[2 * CUABI_IPC_DESCRIPTOR_SIZE + 8];
    double imp[IPC_BUFFERS], rel[IPC_BUFFERS], ropen[IPC_BUFFERS], rclose[IPC_BUFFERS];
    int n = 0, m = 0;
    while (fgets(line, sizeof line, stdin)) {
        double t0 = now_us(), t1;
        if (line[0] == 'C' && n < IPC_BUFFERS) {
            uint8_t d[CUABI_IPC_DESCRIPTOR_SIZE];
            unhex(d, sizeof d, line + 2);
            cuabi_buffer *b;
            t0 = now_us();
            check(cuabi_ipc_buffer_import(&b, d, sizeof d), "import");
            t1 = now_us();
            check(cuabi_buffer_destroy(b), "destroy");
            imp[n] = t1 - t0;
            rel[n++] = now_us() - t1;
        } else if (line[0] == 'R' && m < IPC_BUFFERS) {
            CUipcMemHandle h;
            unhex((uint8_t *)&h, sizeof h, line + 2);
            CUdeviceptr p;
            t0 = now_us();
            if (raw_open(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS) {
                fprintf(stderr, "bench_peer: raw cuIpcOpenMemHandle failed\n");
                return 1;
            }
            t1 = now_us();
            raw_close(p);
            ropen[m] = t1 - t0;
            rclose[m++] = now_us() - t1;
        }
    }
    printf("%.2f %.2f %.2f %.2f\n", median(imp, n), median(rel, n), median(ropen, m),
           median(rclose, m));
    cuabi_device_release(dev);
    return 0;
}

static pid_t spawn_child(const char *self, FILE **to, FILE **from)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out)) {
        perror("bench_peer: pipe");
        exit(1);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char *args[] = { (char *)self, "--ipc-child", NULL };
    pid_t pid;
    if (posix_spawn(&pid, self, &fa, NULL, args, environ) != 0) {
        perror("bench_peer: spawn");
        exit(1);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    *to = fdopen(in[1], "w");
    *from = fdopen(out[0], "r");
    return pid;
}

static void bench_ipc(const char *self)
{
    int n = 0;
    check(cuabi_device_count(&n), "device count");
    if (n < 1) {
        printf("IPC latency: skipped (no GPU)\n");
        return;
    }
    cuabi_device *dev;
    cuabi_memory_resource *r;
    cuabi_buffer *bufs[IPC_BUFFERS];
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_ipc_memory_resource(&r, dev), "ipc resource");
    for (int i = 0; i < IPC_BUFFERS; i++)
        check(cuabi_buffer_allocate(&bufs[i], r, (size_t)1 << 20, 0, NULL), "allocate");
    ipc_get_fn raw_get = (ipc_get_fn)driver_entry("cuIpcGetMemHandle");
    FILE *to, *from;
    pid_t pid = spawn_child(self, &to, &from);
    uint8_t d[CUABI_IPC_DESCRIPTOR_SIZE];
    double t[IPC_BUFFERS], traw[IPC_BUFFERS];
    char h[2 * CUABI_IPC_DESCRIPTOR_SIZE + 2];
    for (int i = 0; i < IPC_BUFFERS; i++) {
        double t0 = now_us();
        check(cuabi_ipc_buffer_export(d, sizeof d, bufs[i]), "export");
        t[i] = now_us() - t0;
        hex(h, d, sizeof d);
        fprintf(to, "C %s\n", h);
        /* the same memory as a raw handle (an IPC resource's buffer is a
         * whole allocation: its pointer is the base) */
        uintptr_t p;
        CUipcMemHandle raw;
        check(cuabi_buffer_pointer(&p, bufs[i]), "pointer");
        t0 = now_us();
        if (raw_get(&raw, (CUdeviceptr)p) != CUDA_SUCCESS) {
            fprintf(stderr, "bench_peer: raw cuIpcGetMemHandle failed\n");
            exit(1);
        }
        traw[i] = now_us() - t0;
        hex(h, (const uint8_t *)&raw, sizeof raw);
        fprintf(to, "R %s\n", h);
    }
    fclose(to);
    double imp = -1, rel = -1, ropen = -1, rclose = -1;
    if (fscanf(from, "%lf %lf %lf %lf", &imp, &rel, &ropen, &rclose) != 4)
        imp = rel = ropen = rclose = -1;
    fclose(from);
    int status;
    waitpid(pid, &status, 0);
    printf("IPC, 1 MiB buffers, median us per call (raw = the driver's cuIpc* calls):\n"
           "  export %.2f (raw cuIpcGetMemHandle %.2f); in another process, context made: "
           "import %.2f (raw open %.2f), release %.2f (raw close %.2f)\n",
           median(t, IPC_BUFFERS), median(traw, IPC_BUFFERS), imp, ropen, rel, rclose);
    for (int i = 0; i < IPC_BUFFERS; i++)
        cuabi_buffer_destroy(bufs[i]);
    cuabi_memory_resource_release(r);
    cuabi_device_release(dev);
}

/* ------------------------------------------------------------- pool IPC */

typedef CUresult (*pool_export_fn)(CUmemPoolPtrExportData *, CUdeviceptr);
typedef CUresult (*pool_import_fn)(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *);
typedef CUresult (*pool_from_fd_fn)(CUmemoryPool *, void *, CUmemAllocationHandleType,
                                    unsigned long long);
typedef CUresult (*mem_free_fn)(CUdeviceptr);

typedef struct pool_figures {
    double map, imp, rel, rimp, rfree;
} pool_figures;

/* The raw driver's import and free of the same pointers, through its own
 * import of the pool (the driver hands a process one pool per export, so
 * this is the pool cuabi mapped; it is left to the process's end). */
static void pool_child_raw(int fd, uint8_t (*d)[CUABI_IPC_DESCRIPTOR_SIZE], pool_figures *f)
{
    pool_from_fd_fn from_fd = (pool_from_fd_fn)driver_entry("cuMemPoolImportFromShareableHandle");
    pool_import_fn imp = (pool_import_fn)driver_entry("cuMemPoolImportPointer");
    mem_free_fn mfree = (mem_free_fn)driver_entry("cuMemFree_v2");
    CUmemoryPool pool;
    if (from_fd(&pool, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) {
        fprintf(stderr, "bench_peer: raw cuMemPoolImportFromShareableHandle failed\n");
        exit(1);
    }
    double ti[IPC_BUFFERS], tf[IPC_BUFFERS];
    for (int i = 0; i < IPC_BUFFERS; i++) {
        CUmemPoolPtrExportData data;
        memcpy(data.reserved, d[i] + 64, sizeof data.reserved);  /* the descriptor's handle */
        CUdeviceptr p;
        double t0 = now_us();
        if (imp(&p, pool, &data) != CUDA_SUCCESS) {
            fprintf(stderr, "bench_peer: raw cuMemPoolImportPointer failed\n");
            exit(1);
        }
        double t1 = now_us();
        mfree(p);
        ti[i] = t1 - t0;
        tf[i] = now_us() - t1;
    }
    f->rimp = median(ti, IPC_BUFFERS);
    f->rfree = median(tf, IPC_BUFFERS);
}

/* The child: receive the pool and the buffers' descriptors on the socket,
 * map the pool (timed), import and destroy each buffer (timed), then the
 * raw driver's calls; answer the figures. */
static int pool_child(int sock)
{
    cuabi_device *dev;
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_device_set_current(dev), "set current");
    int fd;
    uint8_t pd[CUABI_IPC_DESCRIPTOR_SIZE], d[IPC_BUFFERS][CUABI_IPC_DESCRIPTOR_SIZE];
    check(cuabi_ipc_fd_receive(&fd, pd, sizeof pd, sock), "receive the pool");
    for (int i = 0; i < IPC_BUFFERS; i++)
        if (recv(sock, d[i], sizeof d[i], 0) != (ssize_t)sizeof d[i]) {
            fprintf(stderr, "bench_peer: pool child: descriptor %d missing\n", i);
            return 1;
        }
    pool_figures f;
    cuabi_memory_resource *mr;
    double t0 = now_us();
    check(cuabi_ipc_pool_import(&mr, fd, pd, sizeof pd), "pool import");
    f.map = now_us() - t0;
    double ti[IPC_BUFFERS], tr[IPC_BUFFERS];
    for (int i = 0; i < IPC_BUFFERS; i++) {
        cuabi_buffer *b;
        t0 = now_us();
        check(cuabi_ipc_pool_buffer_import(&b, mr, d[i], sizeof d[i]), "pool buffer import");
        double t1 = now_us();
        check(cuabi_buffer_destroy(b), "destroy");
        ti[i] = t1 - t0;
        tr[i] = now_us() - t1;
    }
    f.imp = median(ti, IPC_BUFFERS);
    f.rel = median(tr, IPC_BUFFERS);
    pool_child_raw(fd, d, &f);
    close(fd);
    if (send(sock, &f, sizeof f, 0) != (ssize_t)sizeof f)
        return 1;
    cuabi_memory_resource_release(mr);
    cuabi_device_release(dev);
    return 0;
}

static pid_t spawn_pool_child(const char *self, int child_end, int parent_end)
{
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", child_end);
    char *args[] = { (char *)self, "--pool-child", fdarg, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, parent_end);
    pid_t pid;
    if (posix_spawn(&pid, self, &fa, NULL, args, environ) != 0) {
        perror("bench_peer: spawn");
        exit(1);
    }
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

static void bench_pool_ipc(const char *self)
{
    cuabi_device *dev;
    cuabi_memory_resource *r;
    cuabi_stream *s;
    cuabi_buffer *bufs[IPC_BUFFERS];
    check(cuabi_device_get(&dev, 0), "device");
    check(cuabi_ipc_pool_create(&r, dev, NULL), "ipc pool");
    check(cuabi_stream_create(&s, dev, NULL), "stream");
    for (int i = 0; i < IPC_BUFFERS; i++)
        check(cuabi_buffer_allocate(&bufs[i], r, (size_t)1 << 20, 0, s), "allocate");
    check(cuabi_stream_synchronize(s), "sync");   /* allocated before the child imports */
    pool_export_fn raw_export = (pool_export_fn)driver_entry("cuMemPoolExportPointer");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) {
        perror("bench_peer: socketpair");
        exit(1);
    }
    pid_t pid = spawn_pool_child(self, sv[1], sv[0]);
    close(sv[1]);
    int fd;
    uint8_t pd[CUABI_IPC_DESCRIPTOR_SIZE], d[CUABI_IPC_DESCRIPTOR_SIZE];
    check(cuabi_ipc_pool_export(&fd, pd, sizeof pd, r), "pool export");
    check(cuabi_ipc_fd_send(sv[0], fd, pd, sizeof pd), "send the pool");
    close(fd);
    double t[IPC_BUFFERS], traw[IPC_BUFFERS];
    for (int i = 0; i < IPC_BUFFERS; i++) {
        double t0 = now_us();
        check(cuabi_ipc_buffer_export(d, sizeof d, bufs[i]), "export");
        t[i] = now_us() - t0;
        if (send(sv[0], d, sizeof d, 0) != (ssize_t)sizeof d) {
            perror("bench_peer: send");
            exit(1);
        }
        uintptr_t p;
        CUmemPoolPtrExportData raw;
        check(cuabi_buffer_pointer(&p, bufs[i]), "pointer");
        t0 = now_us();
        if (raw_export(&raw, (CUdeviceptr)p) != CUDA_SUCCESS) {
            fprintf(stderr, "bench_peer: raw cuMemPoolExportPointer failed\n");
            exit(1);
        }
        traw[i] = now_us() - t0;
    }
    pool_figures f = { -1, -1, -1, -1, -1 };
    if (recv(sv[0], &f, sizeof f, 0) != (ssize_t)sizeof f)
        f = (pool_figures){ -1, -1, -1, -1, -1 };
    close(sv[0]);
    int status;
    waitpid(pid, &status, 0);   /* the importer freed everything: now the exporter */
    printf("pool IPC, 1 MiB buffers, median us per call (raw = the driver's cuMemPool* calls):\n"
           "  export %.2f (raw cuMemPoolExportPointer %.2f); in another process, context made: "
           "pool mapped once in %.2f, then import %.2f (raw cuMemPoolImportPointer %.2f), "
           "release %.2f (raw cuMemFree %.2f)\n",
           median(t, IPC_BUFFERS), median(traw, IPC_BUFFERS), f.map, f.imp, f.rimp, f.rel,
           f.rfree);
    for (int i = 0; i < IPC_BUFFERS; i++)
        cuabi_buffer_free_async(bufs[i], s);
    cuabi_stream_synchronize(s);
    cuabi_stream_release(s);
    cuabi_memory_resource_release(r);
    cuabi_device_release(dev);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ipc-child") == 0)
        return ipc_child();
    if (argc > 2 && strcmp(argv[1], "--pool-child") == 0)
        return pool_child(atoi(argv[2]));
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int n = 0;
    cuabi_status st = cuabi_device_count(&n);
    if (st != CUABI_SUCCESS || n == 0) {
        printf("bench_peer: skipped (no GPU: %s)\n",
               st == CUABI_SUCCESS ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    bench_bandwidth(quick);
    bench_ipc(argv[0]);
    bench_pool_ipc(argv[0]);
    return 0;
}
