/* Collectives with the real NCCL on a host of two GPUs (issue 23 item 4):
 *   - one process, init-all over GPUs 0 and 1: every collective, values
 *     checked for several types and sizes (1, 1000 and 2^20 + 3 elements);
 *   - a graph-captured all-reduce replayed three times;
 *   - two spawned processes, init by rank (GPU = rank): all-reduce,
 *     broadcast, all-gather, reduce-scatter, send/receive, split, checked
 *     in each process; the same again forced onto NCCL's socket transport
 *     over loopback (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
 *     NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1): the path that crosses machines;
 *   - a rank that never arrives: CUABI_ERROR_TIMEOUT from the real NCCL.
 * Exits 77 without two GPUs or without NCCL. Children are fresh processes
 * (this program again, with --rank), never forks of a process that has
 * touched CUDA. */
#include "testutil.h"

#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static cuabi_device *dv[2];
static cuabi_stream *st[2];
static cuabi_memory_resource *mr[2];

static void setup(void)
{
    for (int i = 0; i < 2; i++) {
        ck_assert_ok(cuabi_device_get(&dv[i], i));
        ck_assert_ok(cuabi_stream_create(&st[i], dv[i], NULL));
        ck_assert_ok(cuabi_memory_resource_device_default(&mr[i], dv[i]));
    }
}
static void teardown(void)
{
    for (int i = 0; i < 2; i++) {
        cuabi_memory_resource_release(mr[i]);
        cuabi_stream_release(st[i]);
        cuabi_device_release(dv[i]);
    }
}

static cuabi_buffer *dbuf(int r, size_t bytes)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, mr[r], bytes ? bytes : 1, 0, st[r]));
    return b;
}

/* Element i of rank r: small integers, exact in every type tested. */
static int val(size_t i, int r) { return (int)(i % 13) + 1 + r; }

typedef struct tcase { cuabi_nccl_datatype t; size_t es; } tcase;
static const tcase types[] = { { CUABI_NCCL_INT32, 4 }, { CUABI_NCCL_FLOAT32, 4 },
                               { CUABI_NCCL_FLOAT64, 8 }, { CUABI_NCCL_INT64, 8 },
                               { CUABI_NCCL_UINT8, 1 }, { CUABI_NCCL_BFLOAT16, 2 } };
static const size_t sizes[] = { 1, 1000, (1u << 20) + 3 };

static void put(void *p, cuabi_nccl_datatype t, size_t i, int v)
{
    switch (t) {
    case CUABI_NCCL_INT32: ((int32_t *)p)[i] = v; break;
    case CUABI_NCCL_FLOAT32: ((float *)p)[i] = (float)v; break;
    case CUABI_NCCL_FLOAT64: ((double *)p)[i] = v; break;
    case CUABI_NCCL_INT64: ((int64_t *)p)[i] = v; break;
    case CUABI_NCCL_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CUABI_NCCL_BFLOAT16: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
        break;
    }
    default: break;
    }
}
static double get(const void *p, cuabi_nccl_datatype t, size_t i)
{
    switch (t) {
    case CUABI_NCCL_INT32: return ((const int32_t *)p)[i];
    case CUABI_NCCL_FLOAT32: return ((const float *)p)[i];
    case CUABI_NCCL_FLOAT64: return ((const double *)p)[i];
    case CUABI_NCCL_INT64: return (double)((const int64_t *)p)[i];
    case CUABI_NCCL_UINT8: return ((const uint8_t *)p)[i];
    case CUABI_NCCL_BFLOAT16: {
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    default: return 0;
    }
}

static void upload(cuabi_buffer *b, int r, cuabi_nccl_datatype t, size_t n, size_t es)
{
    unsigned char *h = malloc(n * es);
    for (size_t i = 0; i < n; i++) put(h, t, i, val(i, r));
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, h, n * es, NULL));
    free(h);
}
static unsigned char *download(cuabi_buffer *b, int r, size_t bytes)
{
    unsigned char *h = malloc(bytes ? bytes : 1);
    ck_assert_ok(cuabi_stream_synchronize(st[r]));
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, 0, bytes, NULL));
    return h;
}

static int skip_without_nccl(void)
{
    int v = 0;
    if (cuabi_nccl_version(&v) != CUABI_SUCCESS) {
        printf("SKIP: no NCCL: %s\n", cuabi_last_error()->message);
        return 1;
    }
    printf("NCCL %d.%d.%d from %s\n", v / 10000, v / 100 % 100, v % 100,
           getenv("CUABI_NCCL_PATH") ? getenv("CUABI_NCCL_PATH") : "the default search");
    return 0;
}

/* ------------------------------------------------ one process, init-all */

START_TEST(init_all_every_collective)
{
    const tcase *tc = &types[_i / 3];
    size_t n = sizes[_i % 3], es = tc->es;
    cuabi_nccl_comm *c[2];
    ck_assert_ok(cuabi_nccl_comm_init_all(c, dv, 2, NULL));
    cuabi_buffer *snd[2], *rcv[2], *big[2];
    for (int r = 0; r < 2; r++) {
        snd[r] = dbuf(r, n * es);
        rcv[r] = dbuf(r, n * es);
        big[r] = dbuf(r, 2 * n * es);
        upload(snd[r], r, tc->t, n, es);
    }
    /* all-reduce: sum and max */
    for (int k = 0; k < 2; k++) {
        cuabi_nccl_op op = k ? CUABI_NCCL_MAX : CUABI_NCCL_SUM;
        ck_assert_ok(cuabi_nccl_group_start());
        for (int r = 0; r < 2; r++)
            ck_assert_ok(cuabi_nccl_all_reduce(c[r], snd[r], 0, rcv[r], 0, n, tc->t, op, st[r]));
        ck_assert_ok(cuabi_nccl_group_end());
        for (int r = 0; r < 2; r++) {
            ck_assert_ok(cuabi_nccl_comm_synchronize(c[r], st[r], 60000));
            unsigned char *h = download(rcv[r], r, n * es);
            for (size_t i = 0; i < n; i++) {
                double want = k ? val(i, 1) : val(i, 0) + val(i, 1);
                ck_assert_msg(get(h, tc->t, i) == want, "all-reduce type %d n %zu rank %d [%zu]: "
                              "%g != %g", tc->t, n, r, i, get(h, tc->t, i), want);
            }
            free(h);
        }
    }
    /* broadcast from 1 */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_broadcast(c[r], snd[r], 0, rcv[r], 0, n, tc->t, 1, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++) {
        unsigned char *h = download(rcv[r], r, n * es);
        for (size_t i = 0; i < n; i++) ck_assert(get(h, tc->t, i) == val(i, 1));
        free(h);
    }
    /* reduce to 0 */
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_ok(cuabi_nccl_reduce(c[0], snd[0], 0, rcv[0], 0, n, tc->t, CUABI_NCCL_SUM, 0, st[0]));
    ck_assert_ok(cuabi_nccl_reduce(c[1], snd[1], 0, NULL, 0, n, tc->t, CUABI_NCCL_SUM, 0, st[1]));
    ck_assert_ok(cuabi_nccl_group_end());
    unsigned char *h0 = download(rcv[0], 0, n * es);
    for (size_t i = 0; i < n; i++) ck_assert(get(h0, tc->t, i) == val(i, 0) + val(i, 1));
    free(h0);
    /* all-gather, then reduce-scatter (sum) of the gathered */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_all_gather(c[r], snd[r], 0, big[r], 0, n, tc->t, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++) {
        unsigned char *h = download(big[r], r, 2 * n * es);
        for (size_t i = 0; i < 2 * n; i++) ck_assert(get(h, tc->t, i) == val(i % n, (int)(i / n)));
        free(h);
    }
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_reduce_scatter(c[r], big[r], 0, rcv[r], 0, n, tc->t,
                                               CUABI_NCCL_SUM, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++) {
        unsigned char *h = download(rcv[r], r, n * es);
        for (size_t i = 0; i < n; i++) ck_assert(get(h, tc->t, i) == 2.0 * val(i, r));
        free(h);
    }
    /* send 0 -> 1 and 1 -> 0 at once */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++) {
        ck_assert_ok(cuabi_nccl_send(c[r], snd[r], 0, n, tc->t, 1 - r, st[r]));
        ck_assert_ok(cuabi_nccl_recv(c[r], rcv[r], 0, n, tc->t, 1 - r, st[r]));
    }
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++) {
        unsigned char *h = download(rcv[r], r, n * es);
        for (size_t i = 0; i < n; i++) ck_assert(get(h, tc->t, i) == val(i, 1 - r));
        free(h);
    }
    for (int r = 0; r < 2; r++) {
        cuabi_buffer_destroy(snd[r]);
        cuabi_buffer_destroy(rcv[r]);
        cuabi_buffer_destroy(big[r]);
        cuabi_nccl_comm_release(c[r]);
    }
}
END_TEST

/* Views: an all-reduce over 2-D views, the type from the view. */
START_TEST(init_all_views)
{
    cuabi_nccl_comm *c[2];
    ck_assert_ok(cuabi_nccl_comm_init_all(c, dv, 2, NULL));
    int64_t shape[2] = { 64, 33 };
    size_t n = 64 * 33;
    cuabi_buffer *b[2];
    cuabi_view *v[2];
    for (int r = 0; r < 2; r++) {
        b[r] = dbuf(r, n * 4);
        upload(b[r], r, CUABI_NCCL_FLOAT32, n, 4);
        ck_assert_ok(cuabi_view_create(&v[r], b[r], 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    }
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_all_reduce_view(c[r], NULL, v[r], CUABI_NCCL_AVG, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++) {
        unsigned char *h = download(b[r], r, n * 4);
        for (size_t i = 0; i < n; i++)
            ck_assert_float_eq(((float *)h)[i], (val(i, 0) + val(i, 1)) / 2.0f);
        free(h);
        cuabi_view_release(v[r]);
        cuabi_buffer_destroy(b[r]);
        cuabi_nccl_comm_release(c[r]);
    }
}
END_TEST

/* A captured all-reduce on each rank's stream, replayed three times: in
 * place, each replay doubles the sum. */
START_TEST(captured_all_reduce)
{
    cuabi_nccl_comm *c[2];
    ck_assert_ok(cuabi_nccl_comm_init_all(c, dv, 2, NULL));
    size_t n = 4096;
    cuabi_buffer *b[2];
    cuabi_graph *g[2];
    cuabi_graph_exec *e[2];
    for (int r = 0; r < 2; r++) {
        b[r] = dbuf(r, n * 4);
        upload(b[r], r, CUABI_NCCL_FLOAT32, n, 4);
        ck_assert_ok(cuabi_stream_synchronize(st[r]));
    }
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_graph_capture_begin(st[r], CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_all_reduce(c[r], NULL, 0, b[r], 0, n, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++) {
        ck_assert_ok(cuabi_graph_capture_end(&g[r], st[r]));
        ck_assert_ok(cuabi_graph_instantiate(&e[r], g[r], NULL));
    }
    /* The graphs keep the communicators: drop ours now. */
    cuabi_nccl_comm_release(c[0]);
    cuabi_nccl_comm_release(c[1]);
    for (int k = 1; k <= 3; k++) {
        for (int r = 0; r < 2; r++)
            ck_assert_ok(cuabi_graph_exec_launch(e[r], st[r]));
        for (int r = 0; r < 2; r++) {
            unsigned char *h = download(b[r], r, n * 4);
            float scale = (float)(1 << (k - 1));
            for (size_t i = 0; i < n; i++)
                ck_assert_float_eq(((float *)h)[i], scale * (float)(val(i, 0) + val(i, 1)));
            free(h);
        }
    }
    for (int r = 0; r < 2; r++) {
        cuabi_graph_exec_release(e[r]);
        cuabi_graph_release(g[r]);
        cuabi_buffer_destroy(b[r]);
    }
}
END_TEST

/* ------------------------------------------------- spawned processes */

static char self_exe[4096];

static void hex(char *out, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

/* Run `nranks` children of this program (--rank r --nranks n --id HEX
 * --mode M) with `extra` variables, wait, return how many failed. */
static int spawn_ranks(int nranks, const char *mode, const char *const *extra, int *timed_out)
{
    cuabi_nccl_unique_id id;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    char idhex[2 * CUABI_NCCL_UNIQUE_ID_BYTES + 1];
    hex(idhex, id.internal, sizeof id.internal);
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    char **env = calloc(nenv + 16, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) env[k++] = environ[i];
    for (size_t i = 0; extra && extra[i]; i++) env[k++] = (char *)extra[i];
    env[k] = NULL;
    pid_t pids[8];
    for (int r = 0; r < nranks; r++) {
        char rank[16], nr[16];
        snprintf(rank, sizeof rank, "%d", r);
        snprintf(nr, sizeof nr, "%d", nranks);
        char *argv[] = { self_exe, "--rank", rank, "--nranks", nr, "--id", idhex, "--mode",
                         (char *)mode, NULL };
        ck_assert_int_eq(posix_spawn(&pids[r], self_exe, NULL, NULL, argv, env), 0);
    }
    int failed = 0;
    for (int r = 0; r < nranks; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            if (timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 3)
                (*timed_out)++;
        }
    }
    free(env);
    return failed;
}

START_TEST(two_processes_by_rank)
{
    ck_assert_int_eq(spawn_ranks(2, "all", NULL, NULL), 0);
}
END_TEST

START_TEST(two_processes_socket_transport)
{
    static const char *const sock[] = { "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1",
                                        "NCCL_SOCKET_IFNAME=lo", "NCCL_IB_DISABLE=1",
                                        "NCCL_NET=Socket", NULL };
    ck_assert_int_eq(spawn_ranks(2, "all", sock, NULL), 0);
}
END_TEST

/* Rank 0 of 2 alone: the real NCCL waits for rank 1 until the timeout. */
START_TEST(rank_that_never_arrives)
{
    int timed_out = 0;
    ck_assert_int_eq(spawn_ranks(1, "alone", NULL, &timed_out), 1);
    ck_assert_int_eq(timed_out, 1);
}
END_TEST

#define CHILD_CHECK(cond, ...)                                                \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "rank %d: ", rank);                                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " (%s)\n", cuabi_last_error()->message);           \
            return 1;                                                          \
        }                                                                      \
    } while (0)
#define CHILD_OK(expr) CHILD_CHECK((expr) == CUABI_SUCCESS, "%s failed", #expr)

static int child_verify(cuabi_buffer *b, size_t n, int rank, double (*want)(size_t, int))
{
    float *h = malloc(n * 4);
    CHILD_OK(cuabi_buffer_copy_to_host(h, b, 0, n * 4, NULL));
    for (size_t i = 0; i < n; i++)
        CHILD_CHECK(h[i] == (float)want(i, rank), "[%zu] = %g, want %g", i, h[i], want(i, rank));
    free(h);
    return 0;
}
static double w_sum(size_t i, int r) { (void)r; return val(i, 0) + val(i, 1); }
static double w_bcast(size_t i, int r) { (void)r; return val(i, 0); }
static double w_other(size_t i, int r) { return val(i, 1 - r); }
static double w_gather(size_t i, int r) { (void)r; return val(i % 1000, (int)(i / 1000)); }
static double w_scatter(size_t i, int r) { return 2.0 * val(i, r); }

static int child(int rank, int nranks, const char *idhex, const char *mode)
{
    cuabi_nccl_unique_id id;
    for (size_t i = 0; i < sizeof id.internal; i++) {
        unsigned v;
        sscanf(idhex + 2 * i, "%2x", &v);
        id.internal[i] = (uint8_t)v;
    }
    cuabi_device *d;
    cuabi_stream *s;
    cuabi_memory_resource *m;
    CHILD_OK(cuabi_device_get(&d, rank));
    CHILD_OK(cuabi_stream_create(&s, d, NULL));
    CHILD_OK(cuabi_memory_resource_device_default(&m, d));
    cuabi_nccl_comm_options o = CUABI_NCCL_COMM_OPTIONS_INIT;
    o.timeout_ms = strcmp(mode, "alone") ? 120000 : 4000;
    cuabi_nccl_comm *c = NULL;
    cuabi_status cs = cuabi_nccl_comm_init_rank(&c, d, 2, &id, rank, &o);
    if (!strcmp(mode, "alone")) {
        if (cs == CUABI_ERROR_TIMEOUT) {
            fprintf(stderr, "rank 0 alone: %s\n", cuabi_last_error()->message);
            return 3;
        }
        return 1;
    }
    CHILD_CHECK(cs == CUABI_SUCCESS, "init_rank: %s", cuabi_status_name(cs));
    (void)nranks;
    size_t n = 1000;
    cuabi_buffer *a, *b, *big;
    CHILD_OK(cuabi_buffer_allocate(&a, m, n * 4, 0, s));
    CHILD_OK(cuabi_buffer_allocate(&b, m, n * 4, 0, s));
    CHILD_OK(cuabi_buffer_allocate(&big, m, 2 * n * 4, 0, s));
    float *h = malloc(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = (float)val(i, rank);
    CHILD_OK(cuabi_buffer_copy_from_host(a, 0, h, n * 4, NULL));
    CHILD_OK(cuabi_nccl_all_reduce(c, a, 0, b, 0, n, CUABI_NCCL_FLOAT32, CUABI_NCCL_SUM, s));
    CHILD_OK(cuabi_nccl_comm_synchronize(c, s, 0));
    if (child_verify(b, n, rank, w_sum)) return 1;
    CHILD_OK(cuabi_nccl_broadcast(c, a, 0, b, 0, n, CUABI_NCCL_FLOAT32, 0, s));
    CHILD_OK(cuabi_nccl_comm_synchronize(c, s, 0));
    if (child_verify(b, n, rank, w_bcast)) return 1;
    CHILD_OK(cuabi_nccl_all_gather(c, a, 0, big, 0, n, CUABI_NCCL_FLOAT32, s));
    CHILD_OK(cuabi_nccl_comm_synchronize(c, s, 0));
    if (child_verify(big, 2 * n, rank, w_gather)) return 1;
    CHILD_OK(cuabi_nccl_reduce_scatter(c, big, 0, b, 0, n, CUABI_NCCL_FLOAT32, CUABI_NCCL_SUM, s));
    CHILD_OK(cuabi_nccl_comm_synchronize(c, s, 0));
    if (child_verify(b, n, rank, w_scatter)) return 1;
    CHILD_OK(cuabi_nccl_group_start());
    CHILD_OK(cuabi_nccl_send(c, a, 0, n, CUABI_NCCL_FLOAT32, 1 - rank, s));
    CHILD_OK(cuabi_nccl_recv(c, b, 0, n, CUABI_NCCL_FLOAT32, 1 - rank, s));
    CHILD_OK(cuabi_nccl_group_end());
    CHILD_OK(cuabi_nccl_comm_synchronize(c, s, 0));
    if (child_verify(b, n, rank, w_other)) return 1;
    /* a split: each rank alone (color = rank), then a collective on it */
    cuabi_nccl_comm *k = NULL;
    CHILD_OK(cuabi_nccl_comm_split(&k, c, rank, 0, NULL));
    int ks = 0;
    CHILD_OK(cuabi_nccl_comm_size(&ks, k));
    CHILD_CHECK(ks == 1, "split size %d", ks);
    CHILD_OK(cuabi_nccl_all_reduce(k, a, 0, b, 0, n, CUABI_NCCL_FLOAT32, CUABI_NCCL_SUM, s));
    CHILD_OK(cuabi_nccl_comm_synchronize(k, s, 0));
    cuabi_nccl_comm_release(k);
    int e = -1;
    CHILD_OK(cuabi_nccl_comm_get_async_error(&e, c));
    CHILD_CHECK(e == 0, "async error %d", e);
    CHILD_OK(cuabi_nccl_comm_finalize(c));
    cuabi_nccl_comm_release(c);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
    cuabi_buffer_destroy(big);
    free(h);
    cuabi_memory_resource_release(m);
    cuabi_stream_release(s);
    cuabi_device_release(d);
    printf("rank %d (%s): every check passed\n", rank, mode);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 9 && !strcmp(argv[1], "--rank"))
        return child(atoi(argv[2]), atoi(argv[4]), argv[6], argv[8]);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0)
        return 99;
    self_exe[len] = '\0';
    if (cuabi_test_require_gpu() < 2) {
        printf("SKIP: the collective tests need 2 GPUs\n");
        return 77;
    }
    if (skip_without_nccl())
        return 77;
    Suite *s = suite_create("gpu_nccl");
    TCase *tc = tcase_create("two GPUs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, init_all_every_collective, 0,
                        (int)(3 * sizeof types / sizeof *types));
    tcase_add_test(tc, init_all_views);
    tcase_add_test(tc, captured_all_reduce);
    tcase_add_test(tc, two_processes_by_rank);
    tcase_add_test(tc, two_processes_socket_transport);
    tcase_add_test(tc, rank_that_never_arrives);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
