/* Pool IPC against the fake driver: IPC-enabled pools, their export (fd +
 * descriptor) and import (a mapped resource), buffers exported and imported
 * through them, the SCM_RIGHTS helpers, and every refusal: NULLs, wrong
 * kinds, truncated / corrupt / other-host / same-process / stale
 * descriptors, the wrong pool, closed and foreign fds, allocation from a
 * mapped pool, driver failures; pools in host memory (a NUMA node: their
 * descriptors carry it, format 2) and forged locations; nothing leaks (handles, fake pools, imports,
 * fds). "Another process" is faked by rewriting the exporter pid to our
 * parent's and resealing, as test_multigpu does. */
#include "testutil.h"
#include "fake_multigpu.h"
#include "runtime/ipc.h"
#include "runtime/memory.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { D = CUABI_IPC_DESCRIPTOR_SIZE };

static cuabi_device *dev0, *dev1;
static int fds_at_start;

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    fds_at_start = open_fds();
}
static void teardown(void)
{
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* Make a descriptor look as if another live process (our parent) made it. */
static void from_parent(uint8_t *desc)
{
    cuabi__ipc_put(desc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(desc);
}

static cuabi_memory_resource *ipc_pool(cuabi_device *d)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_ipc_pool_create(&r, d, NULL));
    return r;
}

/* Export `pool`: its fd in *fd, its descriptor (as if from our parent). */
static void export_pool(int *fd, uint8_t *desc, cuabi_memory_resource *pool)
{
    ck_assert_ok(cuabi_ipc_pool_export(fd, desc, D, pool));
    ck_assert_int_ge(*fd, 0);
    from_parent(desc);
}

static cuabi_memory_resource *mapped_of(cuabi_memory_resource *pool)
{
    int fd;
    uint8_t desc[D];
    cuabi_memory_resource *m;
    export_pool(&fd, desc, pool);
    ck_assert_ok(cuabi_ipc_pool_import(&m, fd, desc, D));
    close(fd);
    return m;
}

static uint8_t *host_of(cuabi_buffer *b)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    return (uint8_t *)p;   /* fake device memory is host memory */
}

static void export_buffer(uint8_t *desc, cuabi_buffer *b)
{
    ck_assert_ok(cuabi_ipc_buffer_export(desc, D, b));
    from_parent(desc);
}

/* ----------------------------------------------------------- the pool */

START_TEST(pool_create)
{
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    cuabi_memory_resource *r, *r2;
    cuabi_ipc_pool_options bad = CUABI_IPC_POOL_OPTIONS_INIT, opts = CUABI_IPC_POOL_OPTIONS_INIT;
    bad.version = 99;
    ck_assert_status(cuabi_ipc_pool_create(NULL, dev0, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_pool_create(&r, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(r);
    ck_assert_status(cuabi_ipc_pool_create(&r, dev0, &bad), CUABI_ERROR_INVALID_VERSION);
    opts.max_size = 64 << 20;
    opts.release_threshold = 12345;
    ck_assert_ok(cuabi_ipc_pool_create(&r, dev1, &opts));
    ck_assert_uint_eq(fake_last_pool_max_size, 64 << 20);
    ck_assert_uint_eq(fake_last_threshold, 12345);
    ck_assert_int_eq(fake_live_pools, pools + 1);
    ck_assert_ok(cuabi_ipc_pool_create(&r2, dev1, NULL));
    ck_assert_uint_eq(fake_last_pool_max_size, 0);
    ck_assert_uint_eq(fake_last_threshold, UINT64_MAX);
    cuabi_ipc_pool_role role;
    uint64_t id, id2;
    ck_assert_ok(cuabi_ipc_pool_info(&role, &id, r));
    ck_assert_int_eq(role, CUABI_IPC_POOL_EXPORTER);
    ck_assert_uint_ne(id, 0);
    ck_assert_ok(cuabi_ipc_pool_info(&role, &id2, r2));
    ck_assert_uint_ne(id, id2);
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_DEVICE);
    /* Allocation as from any pool: on a created stream (the inline path) and
     * without one. */
    cuabi_stream *s;
    cuabi_buffer *a, *b;
    ck_assert_ok(cuabi_stream_create(&s, dev1, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&a, r, 1000, 0, s));
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, s));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw);
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    memset(host_of(a), 7, 1000);
    ck_assert_ok(cuabi_buffer_free_async(a, s));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_memory_resource_trim(r, 0));   /* a pool like the others */
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_memory_resource_release(r2));
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_int_eq(fake_live_allocs, 0);
    /* Other resources are not IPC pools. */
    cuabi_memory_resource *plain;
    ck_assert_ok(cuabi_memory_resource_pool_create(&plain, dev0, NULL));
    ck_assert_ok(cuabi_ipc_pool_info(&role, &id, plain));
    ck_assert_int_eq(role, CUABI_IPC_POOL_NONE);
    ck_assert_uint_eq(id, 0);
    ck_assert_status(cuabi_ipc_pool_info(NULL, &id, plain), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_pool_info(&role, NULL, plain), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_pool_info(&role, &id, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_memory_resource_release(plain));
    /* Driver failures leave no pool behind. */
    for (long n = 1; n <= 4; n++) {
        cuabi__fault_arm(NULL, n, false, CUDA_ERROR_OUT_OF_MEMORY);
        cuabi_status st = cuabi_ipc_pool_create(&r, dev0, NULL);
        long fired = cuabi__fault_count();
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        if (st == CUABI_SUCCESS) {
            ck_assert_int_eq(fired, 0);
            ck_assert_ok(cuabi_memory_resource_release(r));
        } else {
            ck_assert_ptr_null(r);
        }
        ck_assert_int_eq(fake_live_pools, pools);
    }
    for (long n = 1; n < 4; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_ipc_pool_create(&r, dev0, NULL);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS)
            ck_assert_ok(cuabi_memory_resource_release(r));
        ck_assert_int_eq(fake_live_pools, pools);
    }
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(pool_export)
{
    cuabi_memory_resource *r = ipc_pool(dev0), *plain, *host;
    int fd = 5;
    uint8_t desc[D];
    ck_assert_status(cuabi_ipc_pool_export(NULL, desc, D, r), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_pool_export(&fd, NULL, D, r), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fd, -1);
    ck_assert_status(cuabi_ipc_pool_export(&fd, desc, D - 1, r), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_status(cuabi_ipc_pool_export(&fd, desc, D, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_memory_resource_pool_create(&plain, dev0, NULL));
    ck_assert_status(cuabi_ipc_pool_export(&fd, desc, D, plain), CUABI_ERROR_IPC);
    ck_assert_error_mentions("cuabi_ipc_pool_create");
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_status(cuabi_ipc_pool_export(&fd, desc, D, host), CUABI_ERROR_IPC);
    ck_assert_int_eq(fd, -1);
    ck_assert_ok(cuabi_ipc_pool_export(&fd, desc, D, r));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD), -1);
    cuabi_ipc_kind kind;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, desc, D));
    ck_assert_int_eq(kind, CUABI_IPC_POOL);
    cuabi_ipc_pool_role role;
    uint64_t id;
    ck_assert_ok(cuabi_ipc_pool_info(&role, &id, r));
    ck_assert_uint_eq(cuabi__ipc_get(desc + CUABI__IPC_POOL_ID, 8), id);
    ck_assert_uint_eq(cuabi__ipc_get(desc + CUABI__IPC_PID, 4), (uint64_t)getpid());
    uint8_t uuid[16];
    for (int i = 0; i < 16; i++)
        uuid[i] = (uint8_t)i;   /* the fake device 0's */
    ck_assert_int_eq(memcmp(desc + CUABI__IPC_UUID, uuid, 16), 0);
    close(fd);
    /* The driver refuses: a CUDA error, no fd. */
    cuabi__fault_arm("cuMemPoolExportToShareableHandle", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_ne(cuabi_ipc_pool_export(&fd, desc, D, r), CUABI_SUCCESS);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_int_eq(fd, -1);
    /* A mapped pool cannot be exported again. */
    cuabi_memory_resource *m = mapped_of(r);
    ck_assert_status(cuabi_ipc_pool_export(&fd, desc, D, m), CUABI_ERROR_IPC);
    ck_assert_error_mentions("imported from another process");
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_memory_resource_release(host));
    ck_assert_ok(cuabi_memory_resource_release(plain));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* ------------------------------------------------------ the round trip */

START_TEST(round_trip)
{
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    enum { N = 5 };
    cuabi_memory_resource *r = ipc_pool(dev1);
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev1, NULL));
    cuabi_buffer *b[N], *imp[N];
    uint8_t desc[N][D];
    for (int i = 0; i < N; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&b[i], r, 100 + (size_t)i * 1000, 0, s));
        memset(host_of(b[i]), 'a' + i, 100 + (size_t)i * 1000);
        ck_assert_ok(cuabi_ipc_buffer_export(desc[i], D, b[i]));
        cuabi_ipc_kind kind;
        ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, desc[i], D));
        ck_assert_int_eq(kind, CUABI_IPC_POOL_MEMORY);
        ck_assert_uint_eq(cuabi__ipc_get(desc[i] + CUABI__IPC_SIZE, 8), 100 + (uint64_t)i * 1000);
        from_parent(desc[i]);
    }
    /* The pool travels over a unix socket, as it would between processes. */
    int sv[2], fd, got;
    uint8_t pd[D], received[D];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    export_pool(&fd, pd, r);
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], fd, pd, D));
    close(fd);
    ck_assert_ok(cuabi_ipc_fd_receive(&got, received, D, sv[1]));
    ck_assert_int_eq(memcmp(received, pd, D), 0);
    cuabi_memory_resource *m, *again;
    ck_assert_ok(cuabi_ipc_pool_import(&m, got, received, D));
    ck_assert_int_eq(fake_live_pools, pools + 2);   /* the exporter's and the import */
    cuabi_ipc_pool_role role;
    uint64_t id, own;
    ck_assert_ok(cuabi_ipc_pool_info(&role, &id, m));
    ck_assert_int_eq(role, CUABI_IPC_POOL_MAPPED);
    ck_assert_ok(cuabi_ipc_pool_info(&role, &own, r));
    ck_assert_uint_eq(id, own);
    ck_assert_int_eq(fake_pool_access[1], CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cuabi_device *d;
    ck_assert_ok(cuabi_memory_resource_device(&d, m));
    ck_assert_ptr_eq(d, dev1);   /* found by UUID */
    /* The same pool again in this process: the live resource, no new import. */
    ck_assert_ok(cuabi_ipc_pool_import(&again, got, received, D));
    ck_assert_ptr_eq(again, m);
    ck_assert_int_eq(fake_pools_imported, 1);
    ck_assert_ok(cuabi_memory_resource_release(again));
    close(got);
    close(sv[0]);
    close(sv[1]);
    /* It receives, it does not allocate. */
    cuabi_buffer *no = (cuabi_buffer *)1;
    uintptr_t p = 1;
    ck_assert_status(cuabi_buffer_allocate(&no, m, 64, 0, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cannot allocate");
    ck_assert_ptr_null(no);
    ck_assert_status(cuabi_memory_resource_allocate(&p, m, 64, 0, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_memory_resource_deallocate(m, 4096, 64, 0, NULL),
                     CUABI_ERROR_NOT_SUPPORTED);
    for (int i = 0; i < N; i++) {
        ck_assert_ok(cuabi_ipc_pool_buffer_import(&imp[i], m, desc[i], D));
        size_t n;
        cuabi_memory_kind k;
        ck_assert_ok(cuabi_buffer_size(&n, imp[i]));
        ck_assert_uint_eq(n, 100 + (size_t)i * 1000);
        ck_assert_ok(cuabi_buffer_kind(&k, imp[i]));
        ck_assert_int_eq(k, CUABI_MEMORY_DEVICE);
        ck_assert_ok(cuabi_buffer_device(&d, imp[i]));
        ck_assert_ptr_eq(d, dev1);
        ck_assert_ptr_eq(host_of(imp[i]), host_of(b[i]));
        ck_assert_int_eq(host_of(imp[i])[n - 1], 'a' + i);
    }
    ck_assert_int_eq(fake_pool_imports, N);
    /* Writes both ways (one memory). */
    ck_assert_ok(cuabi_buffer_memset(imp[2], 0, 'z', 1, 10, s));
    ck_assert_int_eq(host_of(b[2])[9], 'z');
    /* The mapped resource lives on while its buffers do; a view keeps an
     * import after its buffer handle goes. */
    ck_assert_ok(cuabi_memory_resource_release(m));
    cuabi_view *v;
    int64_t shape[1] = { 100 };
    ck_assert_ok(cuabi_view_create(&v, imp[0], 0, CUABI_DTYPE_UINT, 8, 1, shape, NULL, 0));
    for (int i = 0; i < N; i++)
        ck_assert_ok(cuabi_buffer_destroy(imp[i]));
    ck_assert_int_eq(fake_pool_imports, 1);
    ck_assert_int_eq(fake_live_pools, pools + 2);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(fake_pool_imports, 0);
    ck_assert_int_eq(fake_live_pools, pools + 1);   /* the import went with its last buffer */
    /* Importers freed first: the exporter may now free. */
    for (int i = 0; i < N; i++)
        ck_assert_ok(cuabi_buffer_free_async(b[i], s));
    ck_assert_int_eq(fake_pool_order_errors, 0);
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* -------------------------------------------------- refused pool imports */

/* Pool import must fail with `status`, mention `needle`, leave nothing. */
static void pool_refused(int fd, const uint8_t *desc, size_t n, cuabi_status status,
                         const char *needle)
{
    cuabi_memory_resource *m = (cuabi_memory_resource *)1;
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    ck_assert_status(cuabi_ipc_pool_import(&m, fd, desc, n), status);
    ck_assert_error_mentions(needle);
    ck_assert_error_mentions("cuabi_ipc_pool_import");
    ck_assert_ptr_null(m);
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}

START_TEST(pool_import_refusals)
{
    cuabi_memory_resource *r = ipc_pool(dev0);
    int fd;
    uint8_t good[D], d[D + 4];
    ck_assert_ok(cuabi_ipc_pool_export(&fd, good, D, r));
    /* Same process first. */
    pool_refused(fd, good, D, CUABI_ERROR_IPC, "this process");
    from_parent(good);
    ck_assert_status(cuabi_ipc_pool_import(NULL, fd, good, D), CUABI_ERROR_INVALID_ARGUMENT);
    pool_refused(fd, NULL, D, CUABI_ERROR_INVALID_ARGUMENT, "NULL");
    for (size_t n = 0; n < D; n += 9)
        pool_refused(fd, good, n, CUABI_ERROR_IPC, n < 8 ? "not a cuabi IPC descriptor"
                                                         : "truncated");
    memcpy(d, good, D);
    pool_refused(fd, d, D + 4, CUABI_ERROR_IPC, "trailing");
    for (size_t i = 16; i < D; i += 11) {
        memcpy(d, good, D);
        d[i] ^= 0x04;
        pool_refused(fd, d, D, CUABI_ERROR_IPC, "corrupt");
    }
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_HOST, cuabi__ipc_host_hash() + 1, 8);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "another host");
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_KIND, 9, 2);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "unknown descriptor kind 9");
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_PID, (uint64_t)child, 4);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "gone");
    memcpy(d, good, D);
    d[CUABI__IPC_UUID + 3] ^= 0x40;
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "not visible");
    /* A buffer's descriptor, an event's, a legacy buffer's. */
    cuabi_buffer *b, *lb;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    export_buffer(d, b);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "memory of an IPC pool, not a memory pool");
    cuabi_event *ev;
    ck_assert_ok(cuabi_ipc_event_create(&ev, dev0));
    ck_assert_ok(cuabi_ipc_event_export(d, D, ev));
    from_parent(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "an event");
    ck_assert_ok(cuabi_event_release(ev));
    cuabi_memory_resource *legacy;
    ck_assert_ok(cuabi_ipc_memory_resource(&legacy, dev0));
    ck_assert_ok(cuabi_buffer_allocate(&lb, legacy, 64, 0, NULL));
    export_buffer(d, lb);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "legacy");
    ck_assert_ok(cuabi_buffer_destroy(lb));
    ck_assert_ok(cuabi_memory_resource_release(legacy));
    /* File descriptors: negative, closed, not a pool's. */
    pool_refused(-1, good, D, CUABI_ERROR_IPC, "not an open file descriptor");
    int closed = dup(fd);
    close(closed);
    pool_refused(closed, good, D, CUABI_ERROR_IPC, "not an open file descriptor");
    /* Open fds of other kinds: the real driver answers CUDA_ERROR_UNKNOWN to
     * each (scripts/probe_ipc_driver.c), which is a refusal here, naming
     * what the fd is. */
    int pipefd[2], sv[2], devnull = open("/dev/null", O_RDWR);
    ck_assert_int_eq(pipe(pipefd), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    char path[] = "/tmp/cuabi-test-ipc-XXXXXX";
    int file = mkstemp(path);
    ck_assert_int_ge(file, 0);
    unlink(path);
    ck_assert_int_eq(write(file, "a file, not a pool", 18), 18);
    struct { int fd; const char *kind; } others[] = {
        { pipefd[0], "a pipe or FIFO" }, { sv[0], "a socket" }, { devnull, "a character device" },
        { file, "a regular file" },
    };
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        pool_refused(others[i].fd, good, D, CUABI_ERROR_IPC, "refused");
        ck_assert_error_mentions(others[i].kind);
        ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_UNKNOWN);
    }
    close(pipefd[0]);
    close(pipefd[1]);
    close(sv[0]);
    close(sv[1]);
    close(devnull);
    close(file);
    /* Driver failures: the import is undone. */
    cuabi__fault_arm("cuMemPoolImportFromShareableHandle", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    pool_refused(fd, good, D, CUABI_ERROR_CUDA, "cuMemPoolImportFromShareableHandle");
    cuabi__fault_arm("cuMemPoolGetAccess", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
    pool_refused(fd, good, D, CUABI_ERROR_DEVICE_OUT_OF_MEMORY, "cuMemPoolGetAccess");
    cuabi__fault_arm("cuMemPoolSetAccess", 1, false, CUDA_ERROR_INVALID_DEVICE);
    pool_refused(fd, good, D, CUABI_ERROR_CUDA, "cuMemPoolSetAccess");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver_for_test()->cuMemPoolImportFromShareableHandle = NULL;
    pool_refused(fd, good, D, CUABI_ERROR_ENTRY_POINT_NOT_FOUND, "cuMemPoolImportFromShareableHandle");
    cuabi__driver_for_test()->cuMemPoolImportFromShareableHandle =
        fake_cuMemPoolImportFromShareableHandle;
    /* Host allocation failures on the way leak nothing. */
    for (long n = 1; n < 8; n++) {
        cuabi_memory_resource *m = NULL;
        int pools = fake_live_pools;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_ipc_pool_import(&m, fd, good, D);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS)
            ck_assert_ok(cuabi_memory_resource_release(m));
        else
            ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(fake_live_pools, pools);
    }
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    close(fd);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* ------------------------------------------------ refused buffer imports */

static void buffer_refused(cuabi_memory_resource *m, const uint8_t *desc, size_t n,
                           cuabi_status status, const char *needle)
{
    cuabi_buffer *b = (cuabi_buffer *)1;
    size_t live = cuabi__handle_live_count();
    int imports = fake_pool_imports;
    ck_assert_status(cuabi_ipc_pool_buffer_import(&b, m, desc, n), status);
    ck_assert_error_mentions(needle);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(fake_pool_imports, imports);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}

START_TEST(buffer_import_refusals)
{
    cuabi_memory_resource *r = ipc_pool(dev0), *other = ipc_pool(dev0), *plain;
    cuabi_memory_resource *m = mapped_of(r), *mo = mapped_of(other);
    cuabi_buffer *b, *ob, *imp;
    uint8_t good[D], d[D + 1];
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 4096, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&ob, other, 64, 0, NULL));
    export_buffer(good, b);
    ck_assert_status(cuabi_ipc_pool_buffer_import(NULL, m, good, D), CUABI_ERROR_INVALID_ARGUMENT);
    buffer_refused(NULL, good, D, CUABI_ERROR_INVALID_HANDLE, "cuabi_ipc_pool_buffer_import");
    buffer_refused(m, NULL, D, CUABI_ERROR_INVALID_ARGUMENT, "NULL");
    /* Resources that are not mapped pools. */
    buffer_refused(r, good, D, CUABI_ERROR_IPC, "this process exported the pool");
    ck_assert_ok(cuabi_memory_resource_pool_create(&plain, dev0, NULL));
    buffer_refused(plain, good, D, CUABI_ERROR_IPC, "not a pool mapped");
    ck_assert_ok(cuabi_memory_resource_release(plain));
    /* Another pool's buffer, and this pool's buffer given to the other. */
    export_buffer(d, ob);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "belongs to pool");
    buffer_refused(mo, good, D, CUABI_ERROR_IPC, "import that pool first");
    /* Framing. */
    for (size_t n = 0; n < D; n += 13)
        buffer_refused(m, good, n, CUABI_ERROR_IPC, n < 8 ? "not a cuabi" : "truncated");
    memcpy(d, good, D);
    d[D] = 0;
    buffer_refused(m, d, D + 1, CUABI_ERROR_IPC, "trailing");
    for (size_t i = 16; i < D; i += 5) {
        memcpy(d, good, D);
        d[i] ^= 0x01;
        buffer_refused(m, d, D, CUABI_ERROR_IPC, "corrupt");
    }
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_HOST, 42, 8);
    cuabi__ipc_reseal(d);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "another host");
    /* Other kinds. */
    cuabi_memory_resource *legacy;
    cuabi_buffer *lb;
    ck_assert_ok(cuabi_ipc_memory_resource(&legacy, dev0));
    ck_assert_ok(cuabi_buffer_allocate(&lb, legacy, 64, 0, NULL));
    export_buffer(d, lb);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "cuabi_ipc_buffer_import");
    int fd;
    export_pool(&fd, d, r);
    close(fd);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "a memory pool, not memory of an IPC pool");
    /* The legacy import points pool buffers at their mapped pool. */
    ck_assert_status(cuabi_ipc_buffer_import(&imp, good, D), CUABI_ERROR_IPC);
    ck_assert_error_mentions("cuabi_ipc_pool_buffer_import");
    ck_assert_ok(cuabi_buffer_destroy(lb));
    ck_assert_ok(cuabi_memory_resource_release(legacy));
    /* Forged sizes: zero, past the allocation (the import is undone). */
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_SIZE, 0, 8);
    cuabi__ipc_reseal(d);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "size is 0");
    cuabi__ipc_put(d + CUABI__IPC_SIZE, 4097, 8);
    cuabi__ipc_reseal(d);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "runs past");
    /* Forged export data: the driver refuses it (its CUresult kept). */
    memcpy(d, good, D);
    memset(d + CUABI__IPC_HANDLE, 0x33, 64);
    cuabi__ipc_reseal(d);
    buffer_refused(m, d, D, CUABI_ERROR_IPC, "forged");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    /* Driver failures that are not refusals stay CUDA errors. */
    cuabi__fault_arm("cuMemPoolImportPointer", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    buffer_refused(m, good, D, CUABI_ERROR_CUDA, "cuMemPoolImportPointer");
    cuabi__fault_arm("cuMemGetAddressRange_v2", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    buffer_refused(m, good, D, CUABI_ERROR_CUDA, "cuMemGetAddressRange");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    for (long n = 1; n < 6; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_ipc_pool_buffer_import(&imp, m, good, D);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS)
            ck_assert_ok(cuabi_buffer_destroy(imp));
        else
            ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(fake_pool_imports, 0);
    }
    /* Stale: the exporter freed the buffer. */
    ck_assert_ok(cuabi_buffer_destroy(b));
    buffer_refused(m, good, D, CUABI_ERROR_IPC, "freed");
    ck_assert_int_eq(fake_pool_order_errors, 0);
    ck_assert_ok(cuabi_buffer_destroy(ob));
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_memory_resource_release(mo));
    ck_assert_ok(cuabi_memory_resource_release(other));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_allocs, 0);
}
END_TEST

START_TEST(buffer_export_refusals)
{
    cuabi_memory_resource *r = ipc_pool(dev0), *m = mapped_of(r);
    cuabi_buffer *b, *imp, *empty;
    uint8_t d[D];
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 256, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&empty, r, 0, 0, NULL));
    ck_assert_status(cuabi_ipc_buffer_export(d, D - 1, b), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_status(cuabi_ipc_buffer_export(NULL, D, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_buffer_export(d, D, empty), CUABI_ERROR_IPC);
    ck_assert_error_mentions("non-empty");
    cuabi__fault_arm("cuMemPoolExportPointer", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_ipc_buffer_export(d, D, b), CUABI_ERROR_IPC);
    ck_assert_error_mentions("cuMemPoolExportPointer");
    cuabi__fault_arm("cuMemPoolExportPointer", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_status(cuabi_ipc_buffer_export(d, D, b), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver_for_test()->cuMemPoolExportPointer = NULL;
    ck_assert_status(cuabi_ipc_buffer_export(d, D, b), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    cuabi__driver_for_test()->cuMemPoolExportPointer = fake_cuMemPoolExportPointer;
    export_buffer(d, b);
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&imp, m, d, D));
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_buffer_destroy(empty));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* A mapped resource dying while the pool is imported again: the new import
 * gets a resource of its own over the same driver pool, which is destroyed
 * only with the last of them. */
START_TEST(reimport_shares_the_driver_pool)
{
    int pools = fake_live_pools;
    cuabi_memory_resource *r = ipc_pool(dev0), *m1 = mapped_of(r), *m2;
    cuabi_buffer *b, *imp;
    uint8_t d[D];
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    export_buffer(d, b);
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&imp, m1, d, D));
    ck_assert_ok(cuabi_memory_resource_release(m1));   /* its buffer keeps it */
    m2 = mapped_of(r);
    ck_assert_ptr_eq(m2, m1);                          /* still live: shared */
    ck_assert_ok(cuabi_memory_resource_release(m2));
    ck_assert_ok(cuabi_buffer_destroy(imp));           /* now gone */
    ck_assert_int_eq(fake_live_pools, pools + 1);
    m2 = mapped_of(r);                                 /* a fresh import */
    ck_assert_int_eq(fake_pools_imported, 2);
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&imp, m2, d, D));
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_memory_resource_release(m2));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_pools, pools);
}
END_TEST

/* A mapped pool is found again by its id, but only for descriptors of the
 * same exporter and device: a descriptor that names a mapped pool's id with
 * another process or device is forged (or an id collision) and refused,
 * whatever fd comes with it; the mapping stays as it was. */
START_TEST(mapped_pool_id_is_bound_to_its_exporter)
{
    int pools = fake_live_pools;
    size_t live = cuabi__handle_live_count();
    cuabi_memory_resource *r = ipc_pool(dev0), *m, *again;
    int fd, fd2;
    uint8_t good[D], d[D];
    export_pool(&fd, good, r);
    ck_assert_ok(cuabi_ipc_pool_import(&m, fd, good, D));
    /* Another live process claims the pool (a child that waits). */
    int hold[2];
    ck_assert_int_eq(pipe(hold), 0);
    pid_t other = fork();
    if (other == 0) {
        char c;
        close(hold[1]);
        (void)read(hold[0], &c, 1);
        _exit(0);
    }
    close(hold[0]);
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_PID, (uint64_t)other, 4);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "another exporter");
    /* ... with the fd of another pool of its own, too. */
    cuabi_memory_resource *r2 = ipc_pool(dev0);
    uint8_t d2[D];
    ck_assert_ok(cuabi_ipc_pool_export(&fd2, d2, D, r2));
    pool_refused(fd2, d, D, CUABI_ERROR_IPC, "another exporter");
    /* The same exporter, another device. */
    memcpy(d, good, D);
    for (int i = 0; i < 16; i++)   /* the fake device 1's UUID */
        d[CUABI__IPC_UUID + i] = (uint8_t)(i + 1);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "another device");
    /* The genuine descriptor still finds the mapping. */
    ck_assert_ok(cuabi_ipc_pool_import(&again, fd, good, D));
    ck_assert_ptr_eq(again, m);
    ck_assert_ok(cuabi_memory_resource_release(again));
    ck_assert_int_eq(fake_pools_imported, 1);
    close(hold[1]);
    waitpid(other, NULL, 0);
    close(fd);
    close(fd2);
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_memory_resource_release(r2));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* ------------------------------------------------------- fd helpers */

static ino_t inode_of(int fd)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return st.st_ino;
}

START_TEST(fd_send_receive)
{
    int sv[2], fd = -5, pipefd[2];
    uint8_t msg[40], in[40];
    for (int i = 0; i < 40; i++)
        msg[i] = (uint8_t)(i * 3);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    ck_assert_int_eq(pipe(pipefd), 0);
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], pipefd[1], msg, sizeof msg));
    ck_assert_ok(cuabi_ipc_fd_receive(&fd, in, sizeof in, sv[1]));
    ck_assert_int_eq(memcmp(in, msg, sizeof msg), 0);
    ck_assert_int_ne(fd, pipefd[1]);
    ck_assert_uint_eq(inode_of(fd), inode_of(pipefd[1]));
    ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    ck_assert_int_eq(write(fd, "x", 1), 1);   /* the same pipe */
    char c;
    ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
    ck_assert_int_eq(c, 'x');
    close(fd);
    /* Bad arguments. */
    ck_assert_status(cuabi_ipc_fd_send(sv[0], pipefd[1], NULL, 4), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_fd_send(sv[0], pipefd[1], msg, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_fd_send(sv[0], -1, msg, 4), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_fd_receive(NULL, in, 4, sv[1]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_fd_receive(&fd, NULL, 4, sv[1]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fd, -1);
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 5000, sv[1]), CUABI_ERROR_INVALID_ARGUMENT);
    /* Not a socket; a closed descriptor to send. */
    ck_assert_status(cuabi_ipc_fd_send(pipefd[0], pipefd[1], msg, 4), CUABI_ERROR_IO);
    ck_assert_error_mentions("sendmsg");
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 4, pipefd[1]), CUABI_ERROR_IO);
    int closed = dup(pipefd[0]);
    close(closed);
    ck_assert_status(cuabi_ipc_fd_send(sv[0], closed, msg, 4), CUABI_ERROR_IO);
    /* Wrong messages: no descriptor, another length, two descriptors; all
     * received descriptors are closed. */
    int before = open_fds();
    ck_assert_int_eq(send(sv[0], msg, 8, 0), 8);
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 8, sv[1]), CUABI_ERROR_IPC);
    ck_assert_error_mentions("no descriptor or several");
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], pipefd[1], msg, 12));
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 8, sv[1]), CUABI_ERROR_IPC);
    ck_assert_error_mentions("another message");
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], pipefd[1], msg, 4));
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 8, sv[1]), CUABI_ERROR_IPC);
    {
        union { struct cmsghdr h; char buf[CMSG_SPACE(2 * sizeof(int))]; } ctl;
        memset(&ctl, 0, sizeof ctl);
        struct iovec iov = { .iov_base = msg, .iov_len = 8 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof ctl.buf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
        memcpy(CMSG_DATA(cm), pipefd, 2 * sizeof(int));
        ck_assert_int_eq(sendmsg(sv[0], &mh, 0), 8);
    }
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 8, sv[1]), CUABI_ERROR_IPC);
    ck_assert_int_eq(open_fds(), before);
    ck_assert_int_eq(fd, -1);
    /* The peer closes. */
    close(sv[0]);
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, 8, sv[1]), CUABI_ERROR_IO);
    ck_assert_error_mentions("closed");
    close(sv[1]);
    close(pipefd[0]);
    close(pipefd[1]);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* Send `len` bytes with `n` descriptors in one message, any count and any
 * length (zero too), as a hostile peer may. */
static ssize_t send_fds(int sock, const void *data, size_t len, const int *fdv, int n)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(16 * sizeof(int))]; } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (n > 0) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
        memcpy(CMSG_DATA(c), fdv, (size_t)n * sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* cuabi_ipc_fd_receive against hostile senders: every refused message is
 * CUABI_ERROR_IPC (or IO), *fd stays -1 and every descriptor it carried is
 * closed. */
START_TEST(fd_receive_hostile_senders)
{
    static const int types[] = { SOCK_SEQPACKET, SOCK_DGRAM };
    int sv[2], fd, pipefd[2], many[16];
    uint8_t msg[D + 8], in[D];
    memset(msg, 0x5a, sizeof msg);
    ck_assert_int_eq(pipe(pipefd), 0);
    for (int i = 0; i < 16; i++)
        many[i] = pipefd[i % 2];
    struct { size_t len; int nfds; const char *needle; } cases[] = {
        { D, 0, "no descriptor or several" },
        { D, 2, "no descriptor or several" },
        { D, 4, "no descriptor or several" },
        { D, 7, "no descriptor or several" },    /* more than cuabi makes room for: MSG_CTRUNC */
        { D, 16, "no descriptor or several" },
        { D - 1, 1, "another length" },          /* truncated */
        { 1, 1, "another length" },
        { D + 1, 1, "another length" },          /* a descriptor of the wrong size */
        { D + 8, 3, "another length" },
        { 0, 1, "empty message" },               /* no byte, one descriptor */
        { 0, 3, "empty message" },
    };
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        ck_assert_int_eq(socketpair(AF_UNIX, types[t], 0, sv), 0);
        int before = open_fds();
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            ck_assert_int_eq(send_fds(sv[0], msg, cases[i].len, many, cases[i].nfds),
                             (ssize_t)cases[i].len);
            fd = 7;
            ck_assert_status(cuabi_ipc_fd_receive(&fd, in, D, sv[1]), CUABI_ERROR_IPC);
            ck_assert_error_mentions(cases[i].needle);
            ck_assert_int_eq(fd, -1);
            ck_assert_msg(open_fds() == before, "type %d case %zu (%zu bytes, %d fds) left %d fds",
                          types[t], i, cases[i].len, cases[i].nfds, open_fds() - before);
        }
        /* Then a good message still comes through. */
        ck_assert_int_eq(send_fds(sv[0], msg, D, many, 1), D);
        ck_assert_ok(cuabi_ipc_fd_receive(&fd, in, D, sv[1]));
        close(fd);
        close(sv[0]);
        close(sv[1]);
    }
    /* A stream peer that sends part of a message and closes mid-way. */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int before = open_fds();
    ck_assert_int_eq(send_fds(sv[0], msg, 50, many, 1), 50);
    close(sv[0]);
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, D, sv[1]), CUABI_ERROR_IPC);
    ck_assert_error_mentions("another length");
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, D, sv[1]), CUABI_ERROR_IO);
    ck_assert_error_mentions("closed");
    ck_assert_int_eq(open_fds(), before - 1);
    close(sv[1]);
    /* No room for the descriptors (RLIMIT_NOFILE reached): the kernel drops
     * them (MSG_CTRUNC); the message is refused (in a child: the limit). */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    ck_assert_int_eq(send_fds(sv[0], msg, D, many, 1), D);
    pid_t child = fork();
    if (child == 0) {
        int lowest = dup(0);
        close(lowest);
        struct rlimit rl = { (rlim_t)lowest, (rlim_t)lowest };
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(2);
        int got = 7;
        cuabi_status st = cuabi_ipc_fd_receive(&got, in, D, sv[1]);
        _exit(st == CUABI_ERROR_IPC && got == -1 &&
              strstr(cuabi_last_error()->message, "no descriptor or several") ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    close(sv[1]);
    /* The wrong kind of descriptor is received (cuabi_ipc_fd_receive does not
     * look at it); the pool import refuses it. */
    cuabi_memory_resource *r = ipc_pool(dev0), *m = (cuabi_memory_resource *)1;
    uint8_t pd[D];
    int pool_fd;
    export_pool(&pool_fd, pd, r);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], pipefd[0], pd, D));
    ck_assert_ok(cuabi_ipc_fd_receive(&fd, in, D, sv[1]));
    ck_assert_status(cuabi_ipc_pool_import(&m, fd, in, D), CUABI_ERROR_IPC);
    ck_assert_error_mentions("refused");
    ck_assert_ptr_null(m);
    close(fd);
    close(pool_fd);
    ck_assert_ok(cuabi_memory_resource_release(r));
    close(sv[0]);
    close(sv[1]);
    /* A peer that never sends: the call waits as recvmsg(2) does; a receive
     * timeout (SO_RCVTIMEO) or a non-blocking socket bounds it. */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
    ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    double t0 = now_s();
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, D, sv[1]), CUABI_ERROR_IO);
    double waited = now_s() - t0;
    ck_assert_error_mentions("no message arrived");
    ck_assert_msg(waited > 0.15 && waited < 5, "waited %.3f s", waited);
    ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    t0 = now_s();
    ck_assert_status(cuabi_ipc_fd_receive(&fd, in, D, sv[1]), CUABI_ERROR_IO);
    ck_assert_error_mentions("no message arrived");
    ck_assert(now_s() - t0 < 0.1);
    ck_assert_int_eq(fd, -1);
    close(sv[0]);
    close(sv[1]);
    close(pipefd[0]);
    close(pipefd[1]);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* cuabi_ipc_fd_send with descriptors and sockets that cannot be used. */
START_TEST(fd_send_bad_descriptors)
{
    int sv[2], pipefd[2];
    uint8_t msg[64] = { 1 };
    ck_assert_int_eq(pipe(pipefd), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    int closed = dup(pipefd[0]);
    close(closed);
    static const int bad[] = { -1, INT_MIN };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_status(cuabi_ipc_fd_send(sv[0], bad[i], msg, 8), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions("not a file descriptor");
    }
    ck_assert_status(cuabi_ipc_fd_send(sv[0], closed, msg, 8), CUABI_ERROR_IO);
    ck_assert_error_mentions("Bad file descriptor");
    ck_assert_status(cuabi_ipc_fd_send(sv[0], INT_MAX, msg, 8), CUABI_ERROR_IO);
    ck_assert_status(cuabi_ipc_fd_send(sv[0], pipefd[0], msg, 4097), CUABI_ERROR_INVALID_ARGUMENT);
    /* Sockets: none, closed, not connected, a peer gone (EPIPE, no SIGPIPE). */
    ck_assert_status(cuabi_ipc_fd_send(-1, pipefd[0], msg, 8), CUABI_ERROR_IO);
    ck_assert_status(cuabi_ipc_fd_send(closed, pipefd[0], msg, 8), CUABI_ERROR_IO);
    int lone = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    ck_assert_status(cuabi_ipc_fd_send(lone, pipefd[0], msg, 8), CUABI_ERROR_IO);
    close(lone);
    close(sv[1]);
    ck_assert_status(cuabi_ipc_fd_send(sv[0], pipefd[0], msg, 8), CUABI_ERROR_IO);
    ck_assert_error_mentions("Broken pipe");
    close(sv[0]);
    /* A full non-blocking socket. */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    cuabi_status st;
    int sent = 0;
    while ((st = cuabi_ipc_fd_send(sv[0], pipefd[0], msg, sizeof msg)) == CUABI_SUCCESS)
        ck_assert_int_lt(++sent, 100000);
    ck_assert_status(st, CUABI_ERROR_IO);
    /* What was queued still arrives, each with its descriptor. */
    for (int i = 0; i < sent; i++) {
        int fd;
        uint8_t in[64];
        ck_assert_ok(cuabi_ipc_fd_receive(&fd, in, sizeof in, sv[1]));
        close(fd);
    }
    close(sv[0]);
    close(sv[1]);
    close(pipefd[0]);
    close(pipefd[1]);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* The pool travels to a real child process over a socket; the child checks
 * the fd and descriptor arrive whole (the fake driver's memory is not
 * shared across fork, so the child imports nothing). */
START_TEST(fd_to_child_process)
{
    int sv[2], fd;
    uint8_t desc[D];
    cuabi_memory_resource *r = ipc_pool(dev0);
    ck_assert_ok(cuabi_ipc_pool_export(&fd, desc, D, r));
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        int got;
        uint8_t in[D];
        cuabi_ipc_kind kind;
        int ok = cuabi_ipc_fd_receive(&got, in, D, sv[1]) == CUABI_SUCCESS &&
                 cuabi_ipc_descriptor_kind(&kind, in, D) == CUABI_SUCCESS &&
                 kind == CUABI_IPC_POOL && fcntl(got, F_GETFD) != -1;
        _exit(ok ? 0 : 1);
    }
    close(sv[1]);
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], fd, desc, D));
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    close(fd);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* ------------------------------------------------------------- batches */

enum { BATCH = 6 };

/* BATCH buffers of `r` (sizes 1000 + 100 i, filled with 40 + i) and their
 * descriptors end to end, as if from our parent. */
static void batch_of(cuabi_buffer **bufs, uint8_t *descs, cuabi_memory_resource *r)
{
    for (int i = 0; i < BATCH; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&bufs[i], r, 1000 + 100 * (size_t)i, 0, NULL));
        memset(host_of(bufs[i]), 40 + i, 1000 + 100 * (size_t)i);
    }
    memset(descs, 0xee, BATCH * D);
    ck_assert_ok(cuabi_ipc_buffers_export(descs, BATCH * D, bufs, BATCH));
    for (int i = 0; i < BATCH; i++) {
        uint8_t one[D];
        ck_assert_ok(cuabi_ipc_buffer_export(one, D, bufs[i]));   /* the same bytes */
        ck_assert_int_eq(memcmp(one, descs + i * D, D), 0);
        from_parent(descs + i * D);
    }
}

START_TEST(batch_round_trip)
{
    size_t live = cuabi__handle_live_count();
    cuabi_memory_resource *r = ipc_pool(dev0), *m = mapped_of(r);
    cuabi_buffer *bufs[BATCH], *imp[BATCH];
    uint8_t descs[BATCH * D];
    uint64_t addr[BATCH];
    int imports = fake_pool_imports;
    batch_of(bufs, descs, r);
    ck_assert_ok(cuabi_ipc_pool_buffers_import(imp, addr, m, descs, sizeof descs, BATCH));
    ck_assert_int_eq(fake_pool_imports, imports + BATCH);
    for (int i = 0; i < BATCH; i++) {
        uintptr_t p;
        size_t size;
        ck_assert_ok(cuabi_buffer_pointer(&p, imp[i]));
        ck_assert_uint_eq(p, addr[i]);
        ck_assert_ok(cuabi_buffer_size(&size, imp[i]));
        ck_assert_uint_eq(size, 1000 + 100 * (size_t)i);
        ck_assert_uint_eq(host_of(imp[i])[size - 1], 40 + i);
    }
    for (int i = 0; i < BATCH; i++)
        ck_assert_ok(cuabi_buffer_destroy(imp[i]));
    ck_assert_int_eq(fake_pool_imports, imports);
    /* Without addresses, and a single one through the batch. */
    ck_assert_ok(cuabi_ipc_pool_buffers_import(imp, NULL, m, descs, sizeof descs, BATCH));
    for (int i = 0; i < BATCH; i++)
        ck_assert_ok(cuabi_buffer_destroy(imp[i]));
    ck_assert_ok(cuabi_ipc_pool_buffers_import(imp, addr, m, descs + 2 * D, D, 1));
    ck_assert_uint_eq(host_of(imp[0])[0], 42);
    ck_assert_ok(cuabi_buffer_destroy(imp[0]));
    ck_assert_int_eq(fake_pool_imports, imports);
    /* Export: room to spare is fine; mixed kinds are fine. */
    uint8_t more[(BATCH + 1) * D];
    ck_assert_ok(cuabi_ipc_buffers_export(more, sizeof more, bufs, BATCH));
    cuabi_memory_resource *legacy;
    cuabi_buffer *mix[2];
    ck_assert_ok(cuabi_ipc_memory_resource(&legacy, dev0));
    ck_assert_ok(cuabi_buffer_allocate(&mix[0], legacy, 256, 0, NULL));
    mix[1] = bufs[0];
    ck_assert_ok(cuabi_ipc_buffers_export(more, 2 * D, mix, 2));
    cuabi_ipc_kind kind;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, more, D));
    ck_assert_int_eq(kind, CUABI_IPC_MEMORY);
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, more + D, D));
    ck_assert_int_eq(kind, CUABI_IPC_POOL_MEMORY);
    ck_assert_ok(cuabi_buffer_destroy(mix[0]));
    ck_assert_ok(cuabi_memory_resource_release(legacy));
    for (int i = 0; i < BATCH; i++)
        ck_assert_ok(cuabi_buffer_destroy(bufs[i]));
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_pool_order_errors, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(batch_export_refusals)
{
    cuabi_memory_resource *r = ipc_pool(dev0), *host;
    cuabi_buffer *bufs[3], *hb;
    uint8_t descs[3 * D];
    ck_assert_ok(cuabi_buffer_allocate(&bufs[0], r, 64, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_buffer_allocate(&hb, host, 64, 0, NULL));
    bufs[1] = hb;
    bufs[2] = bufs[0];
    ck_assert_status(cuabi_ipc_buffers_export(NULL, sizeof descs, bufs, 3),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_buffers_export(descs, sizeof descs, NULL, 3),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_buffers_export(descs, sizeof descs, bufs, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("1 to 65536");
    ck_assert_status(cuabi_ipc_buffers_export(descs, sizeof descs, bufs, 65537),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_buffers_export(descs, 3 * D - 1, bufs, 3),
                     CUABI_ERROR_BUFFER_TOO_SMALL);
    /* The host buffer, element 1, is named. */
    ck_assert_status(cuabi_ipc_buffers_export(descs, sizeof descs, bufs, 3), CUABI_ERROR_IPC);
    ck_assert_error_mentions("buffers[1]");
    ck_assert_error_mentions("only non-empty device memory");
    /* A closed handle. */
    cuabi_buffer *gone;
    ck_assert_ok(cuabi_buffer_allocate(&gone, r, 64, 0, NULL));
    ck_assert_ok(cuabi_buffer_destroy(gone));
    bufs[1] = gone;
    ck_assert_status(cuabi_ipc_buffers_export(descs, sizeof descs, bufs, 3),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("buffers[1]");
    /* The driver refuses element 2: its CUresult is kept. */
    bufs[1] = bufs[0];
    cuabi__fault_arm("cuMemPoolExportPointer", 3, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_ipc_buffers_export(descs, sizeof descs, bufs, 3), CUABI_ERROR_IPC);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_error_mentions("buffers[2]");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    ck_assert_ok(cuabi_buffer_destroy(hb));
    ck_assert_ok(cuabi_buffer_destroy(bufs[0]));
    ck_assert_ok(cuabi_memory_resource_release(host));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* A refused batch import: the status, the message, nothing imported, every
 * out[] NULL and address 0. */
static void batch_refused(cuabi_memory_resource *m, const uint8_t *descs, size_t size,
                          size_t count, cuabi_status status, const char *needle)
{
    cuabi_buffer *out[BATCH + 1];
    uint64_t addr[BATCH + 1];
    size_t live = cuabi__handle_live_count();
    int imports = fake_pool_imports;
    for (size_t i = 0; i < BATCH + 1; i++) {
        out[i] = (cuabi_buffer *)1;
        addr[i] = 7;
    }
    ck_assert_status(cuabi_ipc_pool_buffers_import(out, addr, m, descs, size, count), status);
    ck_assert_error_mentions(needle);
    for (size_t i = 0; i < count && i < BATCH + 1; i++) {
        ck_assert_ptr_null(out[i]);
        ck_assert_uint_eq(addr[i], 0);
    }
    ck_assert_int_eq(fake_pool_imports, imports);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}

START_TEST(batch_import_refusals)
{
    cuabi_memory_resource *r = ipc_pool(dev0), *other = ipc_pool(dev0);
    cuabi_memory_resource *m = mapped_of(r);
    cuabi_buffer *bufs[BATCH], *ob, *out[BATCH];
    uint8_t descs[BATCH * D], bad[BATCH * D];
    batch_of(bufs, descs, r);
    ck_assert_ok(cuabi_buffer_allocate(&ob, other, 64, 0, NULL));
    ck_assert_status(cuabi_ipc_pool_buffers_import(NULL, NULL, m, descs, sizeof descs, BATCH),
                     CUABI_ERROR_INVALID_ARGUMENT);
    batch_refused(m, NULL, sizeof descs, BATCH, CUABI_ERROR_INVALID_ARGUMENT, "NULL");
    batch_refused(m, descs, sizeof descs, 0, CUABI_ERROR_INVALID_ARGUMENT, "1 to 65536");
    ck_assert_status(cuabi_ipc_pool_buffers_import(out, NULL, m, descs, sizeof descs, 65537),
                     CUABI_ERROR_INVALID_ARGUMENT);
    batch_refused(NULL, descs, sizeof descs, BATCH, CUABI_ERROR_INVALID_HANDLE,
                  "cuabi_ipc_pool_buffers_import");
    batch_refused(r, descs, sizeof descs, BATCH, CUABI_ERROR_IPC, "this process exported");
    /* Sizes that do not match the count: short, long, a count that says more. */
    batch_refused(m, descs, sizeof descs - 1, BATCH, CUABI_ERROR_BUFFER_TOO_SMALL, "need");
    batch_refused(m, descs, sizeof descs, BATCH - 1, CUABI_ERROR_IPC, "padded");
    batch_refused(m, descs, 5 * D, BATCH, CUABI_ERROR_BUFFER_TOO_SMALL, "need");
    /* One bad descriptor in the middle: those before it are freed again. */
    for (int at = 0; at < BATCH; at += 2) {
        memcpy(bad, descs, sizeof bad);
        bad[at * D + 40] ^= 1;
        char needle[64];
        snprintf(needle, sizeof needle, "descriptors[%d]: the descriptor is corrupt", at);
        batch_refused(m, bad, sizeof bad, BATCH, CUABI_ERROR_IPC, needle);
    }
    memcpy(bad, descs, sizeof bad);
    ck_assert_ok(cuabi_ipc_buffer_export(bad + 3 * D, D, ob));      /* another pool's */
    from_parent(bad + 3 * D);
    batch_refused(m, bad, sizeof bad, BATCH, CUABI_ERROR_IPC, "descriptors[3]: the buffer "
                  "belongs to pool");
    memcpy(bad, descs, sizeof bad);
    memcpy(bad + 4 * D, descs, D);          /* a duplicate: the fake imports it twice, fine */
    cuabi_buffer *dup[BATCH];
    ck_assert_ok(cuabi_ipc_pool_buffers_import(dup, NULL, m, bad, sizeof bad, BATCH));
    for (int i = 0; i < BATCH; i++)
        ck_assert_ok(cuabi_buffer_destroy(dup[i]));
    /* The driver refuses the k-th import, or its range check fails: the
     * CUresult is kept, nothing stays imported. */
    for (long k = 1; k <= BATCH; k++) {
        cuabi__fault_arm("cuMemPoolImportPointer", k, false, CUDA_ERROR_INVALID_VALUE);
        batch_refused(m, descs, sizeof descs, BATCH, CUABI_ERROR_IPC, "descriptors[");
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        cuabi__fault_arm("cuMemGetAddressRange_v2", k, false, CUDA_ERROR_INVALID_VALUE);
        cuabi_status st = cuabi_ipc_pool_buffers_import(out, NULL, m, descs, sizeof descs, BATCH);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        ck_assert_int_ne(st, CUABI_SUCCESS);
        for (int i = 0; i < BATCH; i++)
            ck_assert_ptr_null(out[i]);
    }
    /* Allocation failures anywhere in the batch leak nothing. */
    int imports = fake_pool_imports;
    size_t live = cuabi__handle_live_count();
    for (long n = 1; n < 40; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_ipc_pool_buffers_import(out, NULL, m, descs, sizeof descs, BATCH);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS)
            for (int i = 0; i < BATCH; i++)
                ck_assert_ok(cuabi_buffer_destroy(out[i]));
        else
            for (int i = 0; i < BATCH; i++)
                ck_assert_ptr_null(out[i]);
        ck_assert_int_eq(fake_pool_imports, imports);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    ck_assert_ok(cuabi_buffer_destroy(ob));
    for (int i = 0; i < BATCH; i++)
        ck_assert_ok(cuabi_buffer_destroy(bufs[i]));
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_memory_resource_release(other));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_pool_order_errors, 0);
}
END_TEST

/* ------------------------------------------- pools in host memory (pinned) */

/* The access the fake driver gives `dev` to a pool in host memory that
 * `r` (an exporter or a mapped pool) is over. */
static CUmemAccess_flags host_access(cuabi_memory_resource *r, int dev)
{
    void *obj;
    ck_assert_ok(cuabi__handle_get(r, CUABI__T_MEMORY_RESOURCE, &obj, "test"));
    int row = fake_host_pool_index(((cuabi__memory_resource *)obj)->pool);
    ck_assert_int_ge(row, 4);
    return fake_host_pool_access[row][dev];
}

static cuabi_memory_resource *host_ipc_pool(cuabi_device *d, int node, uint64_t max_size)
{
    cuabi_ipc_pool_options o = CUABI_IPC_POOL_OPTIONS_INIT;
    ck_assert_uint_eq(o.version, 2);
    ck_assert_int_eq(o.location_type, CUABI_LOCATION_DEVICE);
    o.location_type = CUABI_LOCATION_HOST_NUMA;
    o.location_id = node;
    o.max_size = max_size;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_ipc_pool_create(&r, d, &o));
    return r;
}

/* cuda.core's PinnedMemoryResource with ipc_enabled: an IPC pool on a host
 * NUMA node. The exporter's buffers and the importer's are pinned memory,
 * the descriptor carries the node (format 2), the importer's device gets
 * read-write access to the imported pool, and the bytes go both ways. */
START_TEST(host_pool_round_trip)
{
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    cuabi_memory_resource *r = host_ipc_pool(dev1, 1, 8 << 20);
    ck_assert_int_eq(fake_last_pool_props.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
    ck_assert_int_eq(fake_last_pool_props.location.id, 1);
    ck_assert_int_eq(fake_last_pool_props.handleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    ck_assert_uint_eq(fake_last_pool_props.maxSize, 8 << 20);
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_int_eq(st.location_type, CUABI_LOCATION_HOST_NUMA);
    ck_assert_int_eq(st.location_id, 1);
    ck_assert_int_eq(st.ipc, 1);
    ck_assert_int_eq(st.owned, 1);
    ck_assert_uint_eq(st.max_size, 8 << 20);
    cuabi_peer_access acc = CUABI_PEER_ACCESS_NONE;
    ck_assert_ok(cuabi_peer_get_pool_access(&acc, r, dev1));
    ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev1, NULL));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 3000, 0, s));
    ck_assert_ok(cuabi_buffer_kind(&kind, b));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    ck_assert_ok(cuabi_buffer_memset(b, 0, 'p', 1, 3000, s));   /* the device writes */
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_int_eq(host_of(b)[2999], 'p');                      /* the host reads */
    /* the pool's descriptor: format 2, the location after the frame */
    int fd;
    uint8_t pd[D], bd[D];
    ck_assert_ok(cuabi_ipc_pool_export(&fd, pd, D, r));
    ck_assert_uint_eq(cuabi__ipc_get(pd + CUABI__IPC_VERSION, 2), CUABI__IPC_FORMAT_HOST_POOL);
    ck_assert_uint_eq(cuabi__ipc_get(pd + CUABI__IPC_POOL_LOCATION, 4), CUABI_LOCATION_HOST_NUMA);
    ck_assert_uint_eq(cuabi__ipc_get(pd + CUABI__IPC_POOL_NODE, 4), 1);
    cuabi_ipc_kind ik;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&ik, pd, D));
    ck_assert_int_eq(ik, CUABI_IPC_POOL);
    from_parent(pd);
    /* buffer descriptors stay format 1 */
    export_buffer(bd, b);
    ck_assert_uint_eq(cuabi__ipc_get(bd + CUABI__IPC_VERSION, 2), CUABI__IPC_FORMAT);
    /* the importer: a pinned mapped pool, opened to its device */
    int grants = fake_host_pool_set_calls;
    cuabi_memory_resource *m;
    ck_assert_ok(cuabi_ipc_pool_import(&m, fd, pd, D));
    ck_assert_int_eq(fake_live_pools, pools + 2);
    ck_assert_int_eq(fake_host_pool_set_calls, grants + 1);
    ck_assert_ok(cuabi_memory_resource_kind(&kind, m));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    /* The driver answers no attribute query of an imported host pool (H100):
     * the stats still come, with the counters 0; one attribute is refused. */
    ck_assert_ok(cuabi_pool_stats_get(&st, m));
    ck_assert_int_eq(st.location_type, CUABI_LOCATION_HOST_NUMA);
    ck_assert_int_eq(st.location_id, 1);
    ck_assert_int_eq(st.ipc, 2);
    ck_assert_int_eq(st.owned, 0);
    ck_assert_uint_eq(st.reserved_current, 0);
    ck_assert_int_eq(st.reuse_allow_opportunistic, 0);
    uint64_t attr;
    ck_assert_status(cuabi_pool_get_attribute(&attr, m, CUABI_POOL_USED_MEM_CURRENT),
                     CUABI_ERROR_CUDA);
    ck_assert_int_eq(host_access(m, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ck_assert_int_eq(host_access(m, 0), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    cuabi_device *d;
    ck_assert_ok(cuabi_memory_resource_device(&d, m));
    ck_assert_ptr_eq(d, dev1);               /* the exporter's device, visible here */
    cuabi_buffer *imp, *imps[1];
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&imp, m, bd, D));
    ck_assert_ok(cuabi_buffer_kind(&kind, imp));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    ck_assert_ptr_eq(host_of(imp), host_of(b));
    ck_assert_int_eq(host_of(imp)[1234], 'p');
    ck_assert_ok(cuabi_ipc_pool_buffers_import(imps, NULL, m, bd, D, 1));
    ck_assert_ok(cuabi_buffer_kind(&kind, imps[0]));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    /* the importer writes (the device, then the host), the exporter reads */
    ck_assert_ok(cuabi_buffer_memset(imp, 10, 'q', 1, 5, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    host_of(imp)[20] = 'r';
    uint8_t back[32];
    ck_assert_ok(cuabi_buffer_copy_to_host(back, b, 0, sizeof back, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_int_eq(back[9], 'p');
    ck_assert_int_eq(back[10], 'q');
    ck_assert_int_eq(back[14], 'q');
    ck_assert_int_eq(back[20], 'r');
    /* DLPack: host memory the device reaches */
    cuabi_view *v;
    int64_t shape[1] = { 3000 };
    ck_assert_ok(cuabi_view_create(&v, imp, 0, CUABI_DTYPE_UINT, 8, 1, shape, NULL, 0));
    DLManagedTensorVersioned *t;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&t, v));
    ck_assert_int_eq(t->dl_tensor.device.device_type, kDLCUDAHost);
    t->deleter(t);
    ck_assert_ok(cuabi_view_release(v));
    /* a second import gives the live mapping */
    cuabi_memory_resource *again;
    ck_assert_ok(cuabi_ipc_pool_import(&again, fd, pd, D));
    ck_assert_ptr_eq(again, m);
    ck_assert_ok(cuabi_memory_resource_release(again));
    ck_assert_ok(cuabi_buffer_destroy(imps[0]));
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_int_eq(fake_pool_imports, 0);
    ck_assert_int_eq(fake_live_pools, pools + 1);
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_int_eq(fake_pool_order_errors, 0);
    close(fd);
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* A host pool's importer need not see the exporter's device: the pool is
 * no device's, so it maps on this process's first device (device pools
 * are refused, as before). */
/* The same buffer imported again while its first import lives (a pickle
 * received twice, a view that outlives its buffer): one driver import,
 * shared by every buffer on it, singly and in a batch -- a pinned pool's
 * driver refuses a second import, a device pool's gives the same address,
 * whose first free unmaps both (the fake does as the H200 did). The import
 * goes with its last buffer; then the buffer imports anew. */
static void duplicate_imports_share_one(cuabi_memory_resource *r)
{
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev1, NULL));
    cuabi_buffer *b, *x, *y, *z, *pair[2];
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 4096, 0, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    uint8_t bd[D], two[2 * D];
    export_buffer(bd, b);
    cuabi_memory_resource *m = mapped_of(r);
    int imports = fake_pool_imports, dups = fake_duplicate_imports;
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&x, m, bd, D));
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&y, m, bd, D));
    ck_assert_ptr_ne(x, y);
    ck_assert_ptr_eq(host_of(x), host_of(y));
    ck_assert_int_eq(fake_pool_imports, imports + 1);
    memcpy(two, bd, D);
    memcpy(two + D, bd, D);
    uint64_t addr[2];
    ck_assert_ok(cuabi_ipc_pool_buffers_import(pair, addr, m, two, 2 * D, 2));
    ck_assert_uint_eq(addr[0], addr[1]);
    ck_assert_uint_eq(addr[0], (uintptr_t)host_of(x));
    ck_assert_int_eq(fake_pool_imports, imports + 1);
    ck_assert_ok(cuabi_buffer_destroy(x));
    ck_assert_ok(cuabi_buffer_destroy(pair[0]));
    ck_assert_ok(cuabi_buffer_destroy(pair[1]));
    ck_assert_int_eq(fake_pool_imports, imports + 1);      /* y maps it still */
    host_of(y)[7] = 'y';
    ck_assert_int_eq(host_of(b)[7], 'y');
    ck_assert_ok(cuabi_memory_resource_release(m));       /* y keeps the mapped pool */
    ck_assert_ok(cuabi_buffer_destroy(y));
    ck_assert_int_eq(fake_pool_imports, imports);
    m = mapped_of(r);
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&z, m, bd, D));   /* anew */
    ck_assert_int_eq(fake_pool_imports, imports + 1);
    ck_assert_ok(cuabi_buffer_destroy(z));
    ck_assert_int_eq(fake_pool_imports, imports);
    ck_assert_int_eq(fake_duplicate_imports, dups);        /* never a second driver import */
    ck_assert_ok(cuabi_memory_resource_release(m));
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_int_eq(fake_pool_order_errors, 0);
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_memory_resource_release(r));
}

START_TEST(duplicate_imports_share_one_device_pool)
{
    size_t live = cuabi__handle_live_count();
    duplicate_imports_share_one(ipc_pool(dev1));
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

START_TEST(duplicate_imports_share_one_pinned_pool)
{
    size_t live = cuabi__handle_live_count();
    duplicate_imports_share_one(host_ipc_pool(dev1, 1, 8 << 20));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

START_TEST(host_pool_import_without_the_exporters_device)
{
    cuabi_memory_resource *r = host_ipc_pool(dev1, 0, 0), *m;
    int fd;
    uint8_t pd[D], dd[D];
    export_pool(&fd, pd, r);
    memset(pd + CUABI__IPC_UUID, 0xee, 16);           /* a device not here */
    cuabi__ipc_reseal(pd);
    ck_assert_ok(cuabi_ipc_pool_import(&m, fd, pd, D));
    cuabi_device *d;
    ck_assert_ok(cuabi_memory_resource_device(&d, m));
    ck_assert_ptr_eq(d, dev0);
    ck_assert_int_eq(host_access(m, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cuabi_buffer *b, *imp;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    memset(host_of(b), 7, 64);
    export_buffer(dd, b);
    ck_assert_ok(cuabi_ipc_pool_buffer_import(&imp, m, dd, D));
    ck_assert_int_eq(host_of(imp)[63], 7);   /* one process: the fake's exporter pool is
                                                device 1's, so device 0 reads by the host */
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_memory_resource_release(m));
    close(fd);
    /* a device pool's descriptor with that UUID is still refused */
    cuabi_memory_resource *dp = ipc_pool(dev0);
    export_pool(&fd, pd, dp);
    memset(pd + CUABI__IPC_UUID, 0xee, 16);
    cuabi__ipc_reseal(pd);
    pool_refused(fd, pd, D, CUABI_ERROR_IPC, "not visible");
    close(fd);
    ck_assert_ok(cuabi_memory_resource_release(dp));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

/* Descriptors are hostile input: the location of a pool descriptor is
 * range-checked (type, node, the bytes after it), format 2 belongs to pool
 * descriptors only, a format 1 pool descriptor carries no handle bytes,
 * and a mapped pool's id is bound to its location; the options refuse
 * what the driver cannot do. Nothing is left behind. */
START_TEST(host_pool_refusals)
{
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    cuabi_memory_resource *r = (void *)1;
    cuabi_ipc_pool_options o = CUABI_IPC_POOL_OPTIONS_INIT;
    o.location_type = CUABI_LOCATION_HOST;
    ck_assert_status(cuabi_ipc_pool_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    ck_assert_error_mentions("cuabi_ipc_pool_create");
    ck_assert_error_mentions("CUABI_LOCATION_HOST_NUMA");
    ck_assert_error_mentions("HOST_NUMA_ID");
    const int bad_types[3] = { CUABI_LOCATION_NONE, CUABI_LOCATION_HOST_NUMA_CURRENT, 42 };
    for (int i = 0; i < 3; i++) {
        o.location_type = (cuabi_location_type)bad_types[i];
        ck_assert_status(cuabi_ipc_pool_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions("location_type");
    }
    o.location_type = CUABI_LOCATION_HOST_NUMA;
    o.location_id = -3;
    ck_assert_status(cuabi_ipc_pool_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a NUMA node");
    o.location_id = FAKE_NUMA_NODES;                  /* the driver refuses the node */
    ck_assert_status(cuabi_ipc_pool_create(&r, dev0, &o), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuMemPoolCreate");
    ck_assert_error_mentions("host NUMA node 2");
    ck_assert_int_eq(fake_live_pools, pools);
    /* a version 1 caller's struct ends before the location: a device pool */
    cuabi_ipc_pool_options old;
    ck_assert_ok(cuabi_ipc_pool_options_init(&old, 1));
    old.location_type = (cuabi_location_type)77;
    ck_assert_ok(cuabi_ipc_pool_create(&r, dev1, &old));
    ck_assert_int_eq(fake_last_pool_props.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_last_pool_props.location.id, 1);
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_DEVICE);
    int dfd;
    uint8_t dev_pd[D];
    export_pool(&dfd, dev_pd, r);
    ck_assert_uint_eq(cuabi__ipc_get(dev_pd + CUABI__IPC_VERSION, 2), CUABI__IPC_FORMAT);

    cuabi_memory_resource *h = host_ipc_pool(dev0, 1, 0);
    int fd;
    uint8_t good[D], d[D];
    export_pool(&fd, good, h);
    struct { int at, bytes; uint64_t value; const char *needle; } forged[] = {
        { CUABI__IPC_POOL_LOCATION, 4, CUABI_LOCATION_HOST, "location type 2" },
        { CUABI__IPC_POOL_LOCATION, 4, CUABI_LOCATION_DEVICE, "location type 1" },
        { CUABI__IPC_POOL_LOCATION, 4, 0, "location type 0" },
        { CUABI__IPC_POOL_LOCATION, 4, 0xffffffffu, "location type 4294967295" },
        { CUABI__IPC_POOL_NODE, 4, CUABI__IPC_NUMA_MAX + 1, "NUMA node 65536" },
        { CUABI__IPC_POOL_NODE, 4, 0x80000000u, "NUMA node 2147483648" },
        { CUABI__IPC_POOL_NODE + 4, 1, 1, "after its location" },
        { CUABI__IPC_CHECKSUM - 1, 1, 0x80, "after its location" },
        { CUABI__IPC_VERSION, 2, 3, "format version 3" },
        { CUABI__IPC_VERSION, 2, 0, "format version 0" },
    };
    for (size_t i = 0; i < sizeof forged / sizeof *forged; i++) {
        memcpy(d, good, D);
        cuabi__ipc_put(d + forged[i].at, forged[i].value, forged[i].bytes);
        cuabi__ipc_reseal(d);
        pool_refused(fd, d, D, CUABI_ERROR_IPC, forged[i].needle);
    }
    /* the host pool's location written into a format 1 descriptor: handle
     * bytes a pool descriptor of format 1 never has */
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_VERSION, CUABI__IPC_FORMAT, 2);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "handle bytes");
    memcpy(d, dev_pd, D);
    d[CUABI__IPC_HANDLE + 40] = 1;
    cuabi__ipc_reseal(d);
    pool_refused(dfd, d, D, CUABI_ERROR_IPC, "handle bytes");
    /* format 2 on any other kind is forged: a buffer's descriptor */
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, h, 64, 0, NULL));
    export_buffer(d, b);
    cuabi__ipc_put(d + CUABI__IPC_VERSION, CUABI__IPC_FORMAT_HOST_POOL, 2);
    cuabi__ipc_reseal(d);
    cuabi_ipc_kind ik;
    ck_assert_status(cuabi_ipc_descriptor_kind(&ik, d, D), CUABI_ERROR_IPC);
    ck_assert_error_mentions("format 2");
    ck_assert_error_mentions("memory of an IPC pool");
    /* the mapped pool's id is bound to its location */
    cuabi_memory_resource *m;
    ck_assert_ok(cuabi_ipc_pool_import(&m, fd, good, D));
    memcpy(d, good, D);
    cuabi__ipc_put(d + CUABI__IPC_POOL_NODE, 0, 4);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "another location");
    memcpy(d, good, D);           /* the same id as a device pool (format 1) */
    cuabi__ipc_put(d + CUABI__IPC_VERSION, CUABI__IPC_FORMAT, 2);
    memset(d + CUABI__IPC_HANDLE, 0, 64);
    cuabi__ipc_reseal(d);
    pool_refused(fd, d, D, CUABI_ERROR_IPC, "another location");
    cuabi_memory_resource *again;
    ck_assert_ok(cuabi_ipc_pool_import(&again, fd, good, D));
    ck_assert_ptr_eq(again, m);
    ck_assert_ok(cuabi_memory_resource_release(again));
    ck_assert_ok(cuabi_memory_resource_release(m));
    /* a refused access grant in the importer leaves nothing mapped */
    cuabi__fault_arm("cuMemPoolSetAccess", 1, false, CUDA_ERROR_NOT_PERMITTED);
    pool_refused(fd, good, D, CUABI_ERROR_CUDA, "cuMemPoolSetAccess");
    ck_assert_error_mentions("host NUMA node 1 pool");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_buffer_destroy(b));
    close(fd);
    close(dfd);
    ck_assert_ok(cuabi_memory_resource_release(h));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_int_eq(open_fds(), fds_at_start);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ipc_pool");
    TCase *tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, pool_create);
    tcase_add_test(tc, pool_export);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, pool_import_refusals);
    tcase_add_test(tc, buffer_import_refusals);
    tcase_add_test(tc, buffer_export_refusals);
    tcase_add_test(tc, reimport_shares_the_driver_pool);
    tcase_add_test(tc, mapped_pool_id_is_bound_to_its_exporter);
    tcase_add_test(tc, batch_round_trip);
    tcase_add_test(tc, batch_export_refusals);
    tcase_add_test(tc, batch_import_refusals);
    tcase_add_test(tc, host_pool_round_trip);
    tcase_add_test(tc, host_pool_import_without_the_exporters_device);
    tcase_add_test(tc, host_pool_refusals);
    tcase_add_test(tc, duplicate_imports_share_one_device_pool);
    tcase_add_test(tc, duplicate_imports_share_one_pinned_pool);
    suite_add_tcase(s, tc);
    tc = tcase_create("fds");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, fd_send_receive);
    tcase_add_test(tc, fd_receive_hostile_senders);
    tcase_add_test(tc, fd_send_bad_descriptors);
    tcase_add_test(tc, fd_to_child_process);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
