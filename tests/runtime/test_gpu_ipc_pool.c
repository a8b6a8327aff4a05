/* Pool IPC on a real GPU: two processes share NBUF buffers of an IPC pool.
 * The parent creates the pool, sends its fd and descriptor over a unix
 * socket (cuabi_ipc_fd_send, SCM_RIGHTS), then the buffers' descriptors and
 * an IPC event's. Each of ROUNDS rounds: the parent runs a kernel that spins
 * and then fills buffer 0, memsets the others, records the event and tells
 * the child at once; the child imports every buffer afresh into its mapped
 * pool (odd rounds: all in one cuabi_ipc_pool_buffers_import, with their
 * addresses), waits on the event on its stream, checks the values, writes its
 * own, frees its imports and answers; the parent checks the child's values. Misuse on the
 * real driver: a buffer of another pool, the pool in its own process, a
 * legacy import of a pool buffer, allocating from a mapped pool, a batch
 * with another pool's buffer in it (refused whole, naming it). Device
 * memory before and after is printed (not asserted: the whole device's).
 * Exits 77 without a GPU. */
#include "testutil.h"
#include "ipc_testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"
#include "runtime/ipc.h"

#include <spawn.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { N = 1 << 18, NBUF = 8, ROUNDS = 20, D = CUABI_IPC_DESCRIPTOR_SIZE };

static const char source[] =
    "extern \"C\" __global__ void spin_fill(unsigned *p, int n, unsigned v, long long cycles) {\n"
    "  long long t = clock64();\n"
    "  while (clock64() - t < cycles) { }\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] = v;\n"
    "}\n";

#define CHILD_CHECK(cond, ...)                                                \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "child: " __VA_ARGS__);                            \
            fprintf(stderr, " (%s)\n", cuabi_last_error()->message);           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static uint32_t value(uint32_t round, int buf, int child)
{
    return (child ? 500000u : 1000u) + round * 100u + (uint32_t)buf;
}

/* The child's rounds over the mapped pool `mr`. */
static int child_rounds(int sock, cuabi_memory_resource *mr, cuabi_device *dev,
                        uint8_t desc[NBUF][D], cuabi_event *ev)
{
    cuabi_stream *s;
    CHILD_CHECK(cuabi_stream_create(&s, dev, NULL) == CUABI_SUCCESS, "stream");
    uint32_t *host = malloc(N * 4);
    for (uint32_t r = 0; r < ROUNDS; r++) {
        uint32_t msg;
        CHILD_CHECK(recv(sock, &msg, 4, 0) == 4 && msg == r, "round %u: message", r);
        cuabi_buffer *b[NBUF];
        if (r % 2) {     /* odd rounds: all of them in one call, with their addresses */
            uint64_t addr[NBUF];
            CHILD_CHECK(cuabi_ipc_pool_buffers_import(b, addr, mr, &desc[0][0], sizeof(uint8_t)
                                                      * NBUF * D, NBUF) == CUABI_SUCCESS,
                        "round %u: batch import", r);
            for (int i = 0; i < NBUF; i++) {
                uintptr_t p;
                CHILD_CHECK(cuabi_buffer_pointer(&p, b[i]) == CUABI_SUCCESS && p == addr[i] &&
                            driver_maps(dev, p) == 1, "round %u: batch address %d", r, i);
            }
        } else {
            for (int i = 0; i < NBUF; i++)
                CHILD_CHECK(cuabi_ipc_pool_buffer_import(&b[i], mr, desc[i], D) == CUABI_SUCCESS,
                            "round %u: import %d", r, i);
        }
        CHILD_CHECK(cuabi_stream_wait_event(s, ev) == CUABI_SUCCESS, "wait");
        for (int i = 0; i < NBUF; i++) {
            CHILD_CHECK(cuabi_buffer_copy_to_host(host, b[i], 0, N * 4, s) == CUABI_SUCCESS, "copy");
            CHILD_CHECK(cuabi_stream_synchronize(s) == CUABI_SUCCESS, "sync");
            for (uint32_t j = 0; j < N; j += 97)
                CHILD_CHECK(host[j] == value(r, i, 0), "round %u: buffer %d element %u is %u, "
                            "not %u (read before the exporter's write was waited for?)", r, i,
                            j, host[j], value(r, i, 0));
            CHILD_CHECK(cuabi_buffer_memset(b[i], 0, value(r, i, 1), 4, N, s) == CUABI_SUCCESS,
                        "memset");
        }
        CHILD_CHECK(cuabi_stream_synchronize(s) == CUABI_SUCCESS, "sync");
        for (int i = 0; i < NBUF; i++) {
            uintptr_t p;
            CHILD_CHECK(cuabi_buffer_pointer(&p, b[i]) == CUABI_SUCCESS &&
                        driver_maps(dev, p) == 1, "round %u: the import is mapped", r);
            CHILD_CHECK(cuabi_buffer_destroy(b[i]) == CUABI_SUCCESS, "destroy");
            /* CUDA documents no answer for a freed import's address (the
             * mapped pool may keep its range reserved): printed once. */
            if (r == 0 && i == 0)
                printf("child: after the import's free, cuMemGetAddressRange %s its address\n",
                       driver_maps(dev, p) == 1 ? "still knows" : "no longer knows");
        }
        CHILD_CHECK(send(sock, &r, 4, 0) == 4, "reply");
    }
    free(host);
    cuabi_stream_release(s);
    return 0;
}

/* The child: argv = self --pool-child <socket fd>. */
static int child_main(char **argv)
{
    int sock = atoi(argv[2]), fd;
    uint8_t pd[D], desc[NBUF][D], evd[D], other[D];
    CHILD_CHECK(cuabi_ipc_fd_receive(&fd, pd, D, sock) == CUABI_SUCCESS, "receive the pool");
    for (int i = 0; i < NBUF; i++)
        CHILD_CHECK(recv(sock, desc[i], D, 0) == D, "descriptor %d", i);
    CHILD_CHECK(recv(sock, evd, D, 0) == D && recv(sock, other, D, 0) == D, "descriptors");
    cuabi_memory_resource *mr, *again;
    CHILD_CHECK(cuabi_ipc_pool_import(&mr, fd, pd, D) == CUABI_SUCCESS, "pool import");
    CHILD_CHECK(cuabi_ipc_pool_import(&again, fd, pd, D) == CUABI_SUCCESS && again == mr,
                "a second import gives the same resource");
    cuabi_memory_resource_release(again);
    close(fd);
    cuabi_event *ev;
    CHILD_CHECK(cuabi_ipc_event_import(&ev, evd, D) == CUABI_SUCCESS, "event import");
    cuabi_device *borrowed, *dev;
    int ord;
    CHILD_CHECK(cuabi_memory_resource_device(&borrowed, mr) == CUABI_SUCCESS &&
                cuabi_device_ordinal(&ord, borrowed) == CUABI_SUCCESS &&
                cuabi_device_get(&dev, ord) == CUABI_SUCCESS, "device of the mapped pool");
    /* Misuse: the wrong pool's buffer, a legacy import, an allocation. */
    cuabi_buffer *no = NULL;
    CHILD_CHECK(cuabi_ipc_pool_buffer_import(&no, mr, other, D) == CUABI_ERROR_IPC && !no,
                "a buffer of another pool is refused");
    CHILD_CHECK(cuabi_ipc_buffer_import(&no, desc[0], D) == CUABI_ERROR_IPC && !no,
                "the legacy import refuses a pool buffer");
    CHILD_CHECK(cuabi_buffer_allocate(&no, mr, 64, 0, NULL) == CUABI_ERROR_NOT_SUPPORTED,
                "a mapped pool does not allocate");
    /* A batch with another pool's buffer at 3: refused, nothing left imported
     * (the driver would keep imports of 0..2 otherwise: the address checks). */
    {
        uint8_t mixed[NBUF][D];
        cuabi_buffer *out[NBUF];
        uint64_t addr[NBUF];
        memcpy(mixed, desc, sizeof mixed);
        memcpy(mixed[3], other, D);
        cuabi_buffer *probe;
        uintptr_t p0;
        CHILD_CHECK(cuabi_ipc_pool_buffer_import(&probe, mr, desc[0], D) == CUABI_SUCCESS &&
                    cuabi_buffer_pointer(&p0, probe) == CUABI_SUCCESS, "probe import");
        cuabi_buffer_destroy(probe);
        CHILD_CHECK(cuabi_ipc_pool_buffers_import(out, addr, mr, &mixed[0][0], sizeof mixed,
                                                  NBUF) == CUABI_ERROR_IPC &&
                    strstr(cuabi_last_error()->message, "descriptors[3]"),
                    "a batch with another pool's buffer is refused, naming it");
        for (int i = 0; i < NBUF; i++)
            CHILD_CHECK(!out[i] && !addr[i], "a refused batch leaves no buffer (%d)", i);
        CHILD_CHECK(cuabi_ipc_pool_buffers_import(out, addr, mr, &mixed[0][0], sizeof mixed - 1,
                                                  NBUF) == CUABI_ERROR_BUFFER_TOO_SMALL,
                    "a short batch is refused");
        printf("child: after a refused batch, cuMemGetAddressRange %s buffer 0's address\n",
               driver_maps(dev, p0) == 1 ? "still knows" : "no longer knows");
    }
    uint64_t free0, free1, total;
    cuabi_device_memory_info(&free0, &total, dev);
    int rc = child_rounds(sock, mr, dev, desc, ev);
    cuabi_device_memory_info(&free1, &total, dev);
    printf("child: free device memory before the rounds %llu, after %llu\n",
           (unsigned long long)free0, (unsigned long long)free1);
    cuabi_event_release(ev);
    cuabi_memory_resource_release(mr);
    cuabi_device_release(dev);
    return rc;
}

static const char *self;
static cuabi_device *dev;

static void setup(void) { ck_assert_ok(cuabi_device_get(&dev, 0)); }
static void teardown(void) { cuabi_device_release(dev); }

static pid_t spawn_child(int child_end, int parent_end)
{
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", child_end);
    char *args[] = { (char *)self, "--pool-child", fdarg, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, parent_end);
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, self, &fa, NULL, args, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

static int wait_exit(pid_t pid)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Send the pool (fd + descriptor), the buffers', the event's and another
 * pool's buffer's descriptors. */
static void send_all(int sock, cuabi_memory_resource *r, cuabi_buffer **b, cuabi_event *ev,
                     cuabi_buffer *other)
{
    int fd;
    uint8_t d[D];
    ck_assert_ok(cuabi_ipc_pool_export(&fd, d, D, r));
    ck_assert_ok(cuabi_ipc_fd_send(sock, fd, d, D));
    close(fd);
    /* Even buffers go as the batch export wrote them, odd ones exported one
     * by one: the child imports both kinds. (The bytes differ between two
     * exports of one buffer on an H100 -- the driver's export data is not
     * deterministic -- so they are not compared.) */
    uint8_t all[NBUF * D];
    ck_assert_ok(cuabi_ipc_buffers_export(all, sizeof all, b, NBUF));
    for (int i = 0; i < NBUF; i++) {
        if (i % 2) {
            ck_assert_ok(cuabi_ipc_buffer_export(d, D, b[i]));
            ck_assert_int_eq(send(sock, d, D, 0), D);
        } else {
            ck_assert_int_eq(send(sock, all + i * D, D, 0), D);
        }
    }
    ck_assert_ok(cuabi_ipc_event_export(d, D, ev));
    ck_assert_int_eq(send(sock, d, D, 0), D);
    ck_assert_ok(cuabi_ipc_buffer_export(d, D, other));
    ck_assert_int_eq(send(sock, d, D, 0), D);
}

START_TEST(two_processes_share_a_pool)
{
    cuabi_program *p;
    cuabi_objcode *code;
    cuabi_kernel *k;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "pool.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "spin_fill"));
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    uint64_t free0, free1, total;
    ck_assert_ok(cuabi_device_memory_info(&free0, &total, dev));

    cuabi_ipc_pool_options opts = CUABI_IPC_POOL_OPTIONS_INIT;
    opts.max_size = (uint64_t)256 << 20;
    cuabi_memory_resource *r, *r2;
    ck_assert_ok(cuabi_ipc_pool_create(&r, dev, &opts));
    ck_assert_ok(cuabi_ipc_pool_create(&r2, dev, NULL));
    cuabi_buffer *b[NBUF], *other;
    for (int i = 0; i < NBUF; i++)
        ck_assert_ok(cuabi_buffer_allocate(&b[i], r, N * 4, 0, s));
    ck_assert_ok(cuabi_buffer_allocate(&other, r2, 4096, 0, s));
    ck_assert_ok(cuabi_stream_synchronize(s));   /* allocated before anyone imports */
    cuabi_event *ev;
    ck_assert_ok(cuabi_ipc_event_create(&ev, dev));
    /* The exporter cannot map its own pool. */
    {
        int fd;
        uint8_t d[D];
        cuabi_memory_resource *own;
        ck_assert_ok(cuabi_ipc_pool_export(&fd, d, D, r));
        ck_assert_status(cuabi_ipc_pool_import(&own, fd, d, D), CUABI_ERROR_IPC);
        close(fd);
    }
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    pid_t child = spawn_child(sv[1], sv[0]);
    close(sv[1]);
    send_all(sv[0], r, b, ev, other);

    cuabi_argpack *pack;
    ck_assert_ok(cuabi_argpack_create(&pack, "buffer, i32, u32, i64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pack, 0, b[0]));
    ck_assert_ok(cuabi_argpack_set_int(pack, 1, N));
    ck_assert_ok(cuabi_argpack_set_int(pack, 3, 2000000));   /* ~1 ms of spinning */
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 32;
    c.block[0] = 256;
    c.stream = s;
    uint32_t *host = malloc(N * 4);
    for (uint32_t round = 0; round < ROUNDS; round++) {
        for (int i = 1; i < NBUF; i++)
            ck_assert_ok(cuabi_buffer_memset(b[i], 0, value(round, i, 0), 4, N, s));
        ck_assert_ok(cuabi_argpack_set_uint(pack, 2, value(round, 0, 0)));
        ck_assert_ok(cuabi_launch(k, pack, &c));
        ck_assert_ok(cuabi_event_record(ev, s));
        ck_assert_int_eq(send(sv[0], &round, 4, 0), 4);   /* before the kernel is done */
        uint32_t reply;
        ck_assert_msg(recv(sv[0], &reply, 4, 0) == 4 && reply == round, "round %u: no reply "
                      "(see the child's message above)", round);
        for (int i = 0; i < NBUF; i++) {
            ck_assert_ok(cuabi_buffer_copy_to_host(host, b[i], 0, N * 4, NULL));
            ck_assert_uint_eq(host[0], value(round, i, 1));
            ck_assert_uint_eq(host[N - 1], value(round, i, 1));
        }
    }
    ck_assert_int_eq(wait_exit(child), 0);
    close(sv[0]);
    free(host);
    /* The importer is gone (its frees done): the exporter frees. */
    cuabi_argpack_release(pack);
    for (int i = 0; i < NBUF; i++)
        ck_assert_ok(cuabi_buffer_free_async(b[i], s));
    ck_assert_ok(cuabi_buffer_free_async(other, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_memory_resource_trim(r, 0));
    ck_assert_ok(cuabi_event_release(ev));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_memory_resource_release(r2));
    ck_assert_ok(cuabi_device_synchronize(dev));
    ck_assert_ok(cuabi_device_memory_info(&free1, &total, dev));
    printf("exporter: free device memory before %llu, after %llu\n", (unsigned long long)free0,
           (unsigned long long)free1);
    cuabi_stream_release(s);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_ipc_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, two_processes_share_a_pool);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--pool-child") == 0)
        return child_main(argv);
    self = argv[0];
    cuabi_test_require_gpu();
    return cuabi_test_run(suite());
}
