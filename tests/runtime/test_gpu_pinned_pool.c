/* Pools in host memory on a real GPU (issue 24: cuda.core's
 * PinnedMemoryResource): pools cuabi_memory_resource_pool_create makes at
 * CUABI_LOCATION_HOST and at the device's nearest NUMA node
 * (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID), and an IPC pool on that node shared
 * with a spawned child process.
 *
 *  - owned_host_pool: a HOST pool (max_size 64 MiB): the device was given
 *    access at creation, buffers are CUABI_MEMORY_PINNED (DLPack
 *    kDLCUDAHost); allocated on a stream, written by a kernel and read
 *    from the host pointer directly, written by the host and read back by
 *    the device (a kernel adds one, cuMemcpy to device memory and back);
 *    the statistics; max_size honoured (48 MiB fit, 32 MiB more do not).
 *  - numa_pool: a HOST_NUMA pool on the node host_numa_id names, the same
 *    work, the location in the statistics.
 *  - ipc_pool_to_a_child: an IPC pool on that node; a kernel fills buffers,
 *    the pool's fd and descriptor (format 2: with the node) and the
 *    buffers' descriptors go to a child (posix_spawn, SCM_RIGHTS), which
 *    maps the pool (pinned, on the node), imports the buffers, reads them
 *    from their host pointers, writes them from the host and the device
 *    (memset), frees its imports and answers; the parent reads the child's
 *    writes from its own host pointers.
 *
 * Where the device lacks host memory pools (HOST_MEMORY_POOLS_SUPPORTED or
 * HOST_NUMA_MEMORY_POOLS_SUPPORTED is 0, host_numa_id is -1) the creation
 * must be refused with an error naming cuMemPoolCreate, which is checked
 * and printed instead. Exits 77 without a GPU. */
#include "testutil.h"

#include <spawn.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { MiB = 1 << 20, N = 1 << 18, NBUF = 4, D = CUABI_IPC_DESCRIPTOR_SIZE };
enum {
    ATTR_HOST_NUMA_ID = 134,                     /* CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID */
    ATTR_HOST_NUMA_MEMORY_POOLS_SUPPORTED = 142,
    ATTR_HOST_MEMORY_POOLS_SUPPORTED = 144,
    CU_OUT_OF_MEMORY = 2,                        /* CUDA_ERROR_OUT_OF_MEMORY */
};

static const char source[] =
    "extern \"C\" __global__ void fill(unsigned *p, int n, unsigned v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] = v + i;\n"
    "}\n"
    "extern \"C\" __global__ void add_one(unsigned *p, int n) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] += 1;\n"
    "}\n";

static const char *self;
static cuabi_device *dev;
static cuabi_stream *s;
static cuabi_objcode *code;
static cuabi_kernel *k_fill, *k_add;

static int attribute(int a)
{
    int v = -99;
    /* CUDA 12 drivers do not know attribute 144: not supported */
    if (cuabi_device_attribute(&v, dev, a) != CUABI_SUCCESS)
        return 0;
    return v;
}

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1,
                                      "pinned_pool.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k_fill, code, "fill"));
    ck_assert_ok(cuabi_objcode_get_kernel(&k_add, code, "add_one"));
}
static void teardown(void)
{
    cuabi_kernel_release(k_fill);
    cuabi_kernel_release(k_add);
    cuabi_objcode_release(code);
    cuabi_stream_release(s);
    cuabi_device_release(dev);
}

static void launch(cuabi_kernel *kern, cuabi_buffer *b, int n, int with_value, unsigned v)
{
    cuabi_argpack *pack;
    ck_assert_ok(cuabi_argpack_create(&pack, with_value ? "buffer, i32, u32" : "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(pack, 0, b));
    ck_assert_ok(cuabi_argpack_set_int(pack, 1, n));
    if (with_value)
        ck_assert_ok(cuabi_argpack_set_uint(pack, 2, v));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 64;
    c.block[0] = 256;
    c.stream = s;
    ck_assert_ok(cuabi_launch(kern, pack, &c));
    cuabi_argpack_release(pack);
}

static const unsigned *host_words(cuabi_buffer *b)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    return (const unsigned *)p;
}

/* The device's and the host's work on a buffer of a pinned pool `r`. */
static void pinned_work(cuabi_memory_resource *r, cuabi_location_type type, int id)
{
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_int_eq(st.location_type, type);
    ck_assert_int_eq(st.location_id, id);
    cuabi_peer_access acc = CUABI_PEER_ACCESS_NONE;
    ck_assert_ok(cuabi_peer_get_pool_access(&acc, r, dev));
    ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);

    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, N * 4, 0, s));   /* stream-ordered */
    ck_assert_ok(cuabi_buffer_kind(&kind, b));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    launch(k_fill, b, N, 1, 1000);
    ck_assert_ok(cuabi_stream_synchronize(s));
    const unsigned *w = host_words(b);
    for (int i = 0; i < N; i += 101)
        ck_assert_uint_eq(w[i], 1000u + (unsigned)i);
    ck_assert_uint_eq(w[N - 1], 1000u + N - 1);
    /* the host writes through the pointer, the device adds one */
    unsigned *hw = (unsigned *)w;
    for (int i = 0; i < N; i++)
        hw[i] = (unsigned)i * 7u;
    launch(k_add, b, N, 0, 0);
    /* and a round trip through device memory (cuMemcpy both ways) */
    cuabi_memory_resource *dm;
    cuabi_buffer *d;
    ck_assert_ok(cuabi_memory_resource_device_default(&dm, dev));
    ck_assert_ok(cuabi_buffer_allocate(&d, dm, N * 4, 0, s));
    ck_assert_ok(cuabi_buffer_copy(d, 0, b, 0, N * 4, s));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 4, N, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(w[5], 0);
    ck_assert_ok(cuabi_buffer_copy(b, 0, d, 0, N * 4, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    for (int i = 0; i < N; i += 97)
        ck_assert_uint_eq(w[i], (unsigned)i * 7u + 1u);
    /* DLPack: host memory the device reaches */
    cuabi_view *v;
    int64_t shape[1] = { N };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 32, 1, shape, NULL, 0));
    DLManagedTensorVersioned *t;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&t, v));
    ck_assert_int_eq(t->dl_tensor.device.device_type, kDLCUDAHost);
    t->deleter(t);
    cuabi_view_release(v);
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_uint_ge(st.used_current, N * 4);
    char line[512];
    size_t n = sizeof line;
    ck_assert_ok(cuabi_pool_stats_format(line, &n, &st));
    printf("%s\n", line);
    ck_assert_ok(cuabi_buffer_free_async(d, s));
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    cuabi_memory_resource_release(dm);
}

/* A pool the device cannot have: the driver's refusal, explained. */
static void refused(cuabi_status st, const char *attr)
{
    ck_assert_int_ne(st, CUABI_SUCCESS);
    ck_assert_error_mentions("cuMemPoolCreate");
    ck_assert_error_mentions(attr);
    printf("refused as expected: %s\n", cuabi_last_error()->message);
}

START_TEST(owned_host_pool)
{
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.location_type = CUABI_LOCATION_HOST;
    o.max_size = 64 * MiB;
    o.release_threshold = 0;
    cuabi_memory_resource *r = NULL;
    cuabi_status st = cuabi_memory_resource_pool_create(&r, dev, &o);
    if (!attribute(ATTR_HOST_MEMORY_POOLS_SUPPORTED)) {
        printf("device 0: no host memory pools (attribute 144 is 0)\n");
        if (st == CUABI_SUCCESS)
            cuabi_memory_resource_release(r);
        else
            refused(st, "HOST_MEMORY_POOLS_SUPPORTED");
        return;
    }
    ck_assert_msg(st == CUABI_SUCCESS, "HOST pool: %s", cuabi_last_error()->message);
    pinned_work(r, CUABI_LOCATION_HOST, 0);
    /* max_size: 48 MiB fit, 32 MiB more do not */
    cuabi_buffer *big, *more = (cuabi_buffer *)1;
    ck_assert_ok(cuabi_buffer_allocate(&big, r, 48 * MiB, 0, s));
    st = cuabi_buffer_allocate(&more, r, 32 * MiB, 0, s);
    ck_assert_msg(st != CUABI_SUCCESS, "a 64 MiB pool gave 48 + 32 MiB");
    ck_assert_ptr_null(more);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CU_OUT_OF_MEMORY);
    ck_assert_ok(cuabi_buffer_free_async(big, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_buffer_allocate(&more, r, 32 * MiB, 0, s));   /* room again */
    ck_assert_ok(cuabi_buffer_free_async(more, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    cuabi_pool_stats stats = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&stats, r));
    ck_assert_uint_eq(stats.max_size, 64 * MiB);
    ck_assert_int_eq(stats.owned, 1);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(numa_pool)
{
    int node = attribute(ATTR_HOST_NUMA_ID);
    printf("device 0: host_numa_id %d, host NUMA pools %d\n", node,
           attribute(ATTR_HOST_NUMA_MEMORY_POOLS_SUPPORTED));
    if (node < 0) {
        printf("no NUMA node: nothing to place a pool on\n");
        return;
    }
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.location_type = CUABI_LOCATION_HOST_NUMA;
    o.location_id = node;
    cuabi_memory_resource *r = NULL;
    cuabi_status st = cuabi_memory_resource_pool_create(&r, dev, &o);
    if (!attribute(ATTR_HOST_NUMA_MEMORY_POOLS_SUPPORTED)) {
        if (st == CUABI_SUCCESS)
            cuabi_memory_resource_release(r);
        else
            refused(st, "HOST_NUMA_MEMORY_POOLS_SUPPORTED");
        return;
    }
    ck_assert_msg(st == CUABI_SUCCESS, "HOST_NUMA pool: %s", cuabi_last_error()->message);
    pinned_work(r, CUABI_LOCATION_HOST_NUMA, node);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* ------------------------------------------------------------ IPC */

#define CHILD_CHECK(cond, ...)                                                \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "child: " __VA_ARGS__);                            \
            fprintf(stderr, " (%s)\n", cuabi_last_error()->message);           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static int child_main(char **argv)
{
    int sock = atoi(argv[2]), fd, node = atoi(argv[3]);
    uint8_t pd[D], desc[NBUF][D];
    CHILD_CHECK(cuabi_ipc_fd_receive(&fd, pd, D, sock) == CUABI_SUCCESS, "receive the pool");
    for (int i = 0; i < NBUF; i++)
        CHILD_CHECK(recv(sock, desc[i], D, 0) == D, "descriptor %d", i);
    cuabi_memory_resource *mr;
    CHILD_CHECK(cuabi_ipc_pool_import(&mr, fd, pd, D) == CUABI_SUCCESS, "pool import");
    close(fd);
    cuabi_memory_kind kind;
    CHILD_CHECK(cuabi_memory_resource_kind(&kind, mr) == CUABI_SUCCESS &&
                kind == CUABI_MEMORY_PINNED, "the mapped pool is pinned (kind %d)", (int)kind);
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    CHILD_CHECK(cuabi_pool_stats_get(&st, mr) == CUABI_SUCCESS &&
                st.location_type == CUABI_LOCATION_HOST_NUMA && st.location_id == node &&
                st.ipc == 2, "the mapped pool is on node %d (%d %d)", node,
                (int)st.location_type, st.location_id);
    cuabi_device *borrowed, *cdev;
    int ord;
    CHILD_CHECK(cuabi_memory_resource_device(&borrowed, mr) == CUABI_SUCCESS &&
                cuabi_device_ordinal(&ord, borrowed) == CUABI_SUCCESS &&
                cuabi_device_get(&cdev, ord) == CUABI_SUCCESS, "device of the mapped pool");
    cuabi_stream *cs;
    CHILD_CHECK(cuabi_stream_create(&cs, cdev, NULL) == CUABI_SUCCESS, "stream");
    cuabi_buffer *b[NBUF];
    uint64_t addr[NBUF];
    CHILD_CHECK(cuabi_ipc_pool_buffers_import(b, addr, mr, &desc[0][0], sizeof desc, NBUF) ==
                CUABI_SUCCESS, "buffers import");
    for (int i = 0; i < NBUF; i++) {
        CHILD_CHECK(cuabi_buffer_kind(&kind, b[i]) == CUABI_SUCCESS &&
                    kind == CUABI_MEMORY_PINNED, "buffer %d is pinned", i);
        const unsigned *w = (const unsigned *)(uintptr_t)addr[i];
        /* the host reads the exporter's kernel's values directly */
        for (int j = 0; j < N; j += 89)
            CHILD_CHECK(w[j] == 5000u * (unsigned)(i + 1) + (unsigned)j,
                        "buffer %d word %d is %u", i, j, w[j]);
        /* the child's device writes the first half, its host the second */
        CHILD_CHECK(cuabi_buffer_memset(b[i], 0, 77u + (unsigned)i, 4, N / 2, cs) ==
                    CUABI_SUCCESS, "memset %d", i);
        unsigned *hw = (unsigned *)(uintptr_t)addr[i];
        for (int j = N / 2; j < N; j++)
            hw[j] = 99u + (unsigned)i;
    }
    CHILD_CHECK(cuabi_stream_synchronize(cs) == CUABI_SUCCESS, "sync");
    for (int i = 0; i < NBUF; i++)
        cuabi_buffer_destroy(b[i]);     /* importers free first */
    char done = 1;
    CHILD_CHECK(send(sock, &done, 1, 0) == 1, "reply");
    cuabi_stream_release(cs);
    cuabi_memory_resource_release(mr);
    cuabi_device_release(cdev);
    return 0;
}

START_TEST(ipc_pool_to_a_child)
{
    int node = attribute(ATTR_HOST_NUMA_ID);
    if (node < 0)
        node = 0;
    cuabi_ipc_pool_options o = CUABI_IPC_POOL_OPTIONS_INIT;
    o.location_type = CUABI_LOCATION_HOST;          /* refused: no IPC at HOST */
    cuabi_memory_resource *r = NULL;
    ck_assert_status(cuabi_ipc_pool_create(&r, dev, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.location_type = CUABI_LOCATION_HOST_NUMA;
    o.location_id = node;
    o.max_size = 256 * MiB;
    cuabi_status st = cuabi_ipc_pool_create(&r, dev, &o);
    if (!attribute(ATTR_HOST_NUMA_MEMORY_POOLS_SUPPORTED)) {
        if (st == CUABI_SUCCESS)
            cuabi_memory_resource_release(r);
        else
            refused(st, "HOST_NUMA_MEMORY_POOLS_SUPPORTED");
        return;
    }
    ck_assert_msg(st == CUABI_SUCCESS, "IPC pool on NUMA node %d: %s", node,
                  cuabi_last_error()->message);
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
    cuabi_buffer *b[NBUF];
    for (int i = 0; i < NBUF; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&b[i], r, N * 4, 0, s));
        launch(k_fill, b[i], N, 1, 5000u * (unsigned)(i + 1));
    }
    ck_assert_ok(cuabi_stream_synchronize(s));   /* written before anyone reads */

    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    char fdarg[16], nodearg[16];
    snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
    snprintf(nodearg, sizeof nodearg, "%d", node);
    char *args[] = { (char *)self, "--pinned-child", fdarg, nodearg, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, sv[0]);
    pid_t child;
    ck_assert_int_eq(posix_spawn(&child, self, &fa, NULL, args, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);

    int fd;
    uint8_t d[D], all[NBUF * D];
    ck_assert_ok(cuabi_ipc_pool_export(&fd, d, D, r));
    ck_assert_ok(cuabi_ipc_fd_send(sv[0], fd, d, D));
    close(fd);
    ck_assert_ok(cuabi_ipc_buffers_export(all, sizeof all, b, NBUF));
    for (int i = 0; i < NBUF; i++)
        ck_assert_int_eq(send(sv[0], all + i * D, D, 0), D);
    char reply = 0;
    ck_assert_msg(recv(sv[0], &reply, 1, 0) == 1 && reply == 1,
                  "no reply from the child (see its message above)");
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
    close(sv[0]);
    for (int i = 0; i < NBUF; i++) {
        const unsigned *w = host_words(b[i]);
        ck_assert_uint_eq(w[0], 77u + (unsigned)i);
        ck_assert_uint_eq(w[N / 2 - 1], 77u + (unsigned)i);
        ck_assert_uint_eq(w[N / 2], 99u + (unsigned)i);
        ck_assert_uint_eq(w[N - 1], 99u + (unsigned)i);
        ck_assert_ok(cuabi_buffer_free_async(b[i], s));
    }
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("gpu_pinned_pool");
    TCase *tc = tcase_create("pinned_pool");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, owned_host_pool);
    tcase_add_test(tc, numa_pool);
    tcase_add_test(tc, ipc_pool_to_a_child);
    suite_add_tcase(su, tc);
    return su;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--pinned-child") == 0)
        return child_main(argv);
    self = argv[0];
    cuabi_test_require_gpu();
    return cuabi_test_run(suite());
}
