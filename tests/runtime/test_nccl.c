/* Collectives (api/nccl.toml) against the fake NCCL (tests/fixtures/fake_nccl.c,
 * loaded through CUABI_NCCL_PATH the way the real one is) and the fake
 * driver: loading and its errors, unique ids, init by rank (threads), the
 * timeout of a rank that never arrives, init-all, split, finalize, abort,
 * every collective with its values over buffers and views, the refusals
 * (non-contiguous views, mismatched sizes, wrong devices), groups, sends
 * and receives, registration, captures, asynchronous errors and the
 * synchronize timeout. */
#include "testutil.h"
#include "fake_graph.h"
#include "platform/nccl_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static cuabi_device *dev0, *dev1;
static cuabi_stream *s0, *s1;
static void *fake_dl;
static char fake_path[1024];

static int (*live_comms)(void);
static int (*live_regs)(void);
static void (*set_version)(int);
static void (*set_async)(int);
static void (*plan_fail)(const char *, int, int);
static long (*calls)(const char *);
static int (*pending_ops)(void);

static void load_fake(void)
{
    snprintf(fake_path, sizeof fake_path, "%s/tests/fixtures/.libs/fake_nccl.so",
             getenv("CUABI_TEST_BUILDDIR") ? getenv("CUABI_TEST_BUILDDIR") : ".");
    fake_dl = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(fake_dl != NULL, "cannot load %s: %s", fake_path, dlerror());
    *(void **)&live_comms = dlsym(fake_dl, "fake_nccl_live_comms");
    *(void **)&live_regs = dlsym(fake_dl, "fake_nccl_live_registrations");
    *(void **)&set_version = dlsym(fake_dl, "fake_nccl_set_version");
    *(void **)&set_async = dlsym(fake_dl, "fake_nccl_set_async_error");
    *(void **)&plan_fail = dlsym(fake_dl, "fake_nccl_fail");
    *(void **)&calls = dlsym(fake_dl, "fake_nccl_calls");
    *(void **)&pending_ops = dlsym(fake_dl, "fake_nccl_pending_ops");
    ck_assert_ptr_nonnull(pending_ops);
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_graph_install();
    if (!fake_dl)
        load_fake();
    setenv("CUABI_NCCL_PATH", fake_path, 1);
    unsetenv("CUABI_NCCL_TIMEOUT_MS");
    cuabi__nccl_install_fake(NULL); /* load again, through the variable */
    set_version(22809);
    set_async(0);
    plan_fail("", 0, 0);
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&s0, dev0, NULL));
    ck_assert_ok(cuabi_stream_create(&s1, dev1, NULL));
}

static void teardown(void)
{
    cuabi_stream_release(s0);
    cuabi_stream_release(s1);
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    ck_assert_int_eq(live_comms(), 0);
    ck_assert_int_eq(live_regs(), 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* "Device" memory of the fake driver is host memory: wrap malloc'ed bytes. */
static void release_free(uintptr_t p, size_t n, void *payload)
{
    (void)n; (void)payload;
    free((void *)p);
}
static cuabi_buffer *dbuf(cuabi_device *d, size_t bytes)
{
    cuabi_buffer *b;
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert_ok(cuabi_buffer_wrap(&b, d, CUABI_MEMORY_DEVICE, (uintptr_t)p, bytes, release_free,
                                   NULL));
    return b;
}
static void *mem(cuabi_buffer *b)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    return (void *)p;
}

static cuabi_nccl_comm_options opts_timeout(int64_t ms)
{
    cuabi_nccl_comm_options o = CUABI_NCCL_COMM_OPTIONS_INIT;
    o.timeout_ms = ms;
    return o;
}

/* ------------------------------------------------------------- loading */

START_TEST(loads_through_the_variable)
{
    int v = 0;
    ck_assert_status(cuabi_nccl_version(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_nccl_version(&v));
    ck_assert_int_eq(v, 22809);
    ck_assert_str_eq(cuabi__nccl_info()->path, fake_path);
    /* A directory holding libnccl.so.2 would do too; a missing file names
     * the variable. */
    setenv("CUABI_NCCL_PATH", "/nonexistent/libnccl.so.2", 1);
    cuabi__nccl_install_fake(NULL);
    ck_assert_status(cuabi_nccl_version(&v), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("CUABI_NCCL_PATH=/nonexistent/libnccl.so.2");
    ck_assert_error_mentions("cuabi_nccl_version");
    cuabi_nccl_unique_id id;
    ck_assert_status(cuabi_nccl_get_unique_id(&id), CUABI_ERROR_NOT_SUPPORTED);
    /* Not NCCL at all: a library lacking its entry points. */
    char libm[64] = "libm.so.6";
    setenv("CUABI_NCCL_PATH", libm, 1);
    cuabi__nccl_install_fake(NULL);
    ck_assert_status(cuabi_nccl_version(&v), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("lacks ncclGetVersion");
    /* Too old. */
    setenv("CUABI_NCCL_PATH", fake_path, 1);
    set_version(21805);
    cuabi__nccl_install_fake(NULL);
    ck_assert_status(cuabi_nccl_version(&v), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("2.18.5");
    ck_assert_error_mentions("2.19");
    set_version(22809);
    cuabi__nccl_install_fake(NULL);
    ck_assert_ok(cuabi_nccl_version(&v));
}
END_TEST

START_TEST(runtime_info_reports_nccl)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_int_eq(info.version, 3);
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_int_eq(info.nccl_status, CUABI_SUCCESS);
    ck_assert_int_eq(info.nccl_version, 22809);
    ck_assert_str_eq(info.nccl_path, fake_path);
    ck_assert_str_eq(info.nccl_error, "");
    /* A version-2 struct: the NCCL fields are never written. */
    setenv("CUABI_NCCL_PATH", "/nonexistent", 1);
    cuabi__nccl_install_fake(NULL);
    cuabi_runtime_info v2;
    memset(&v2, 0xab, sizeof v2);
    cuabi_runtime_info_init(&v2, 2);
    ck_assert_ok(cuabi_runtime_info_get(&v2));
    ck_assert_int_eq(v2.nccl_version, (int)0xabababab);
    ck_assert(!cuabi__nccl_loaded());
    /* Missing: the struct says why, the call succeeds. */
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_int_eq(info.nccl_status, CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(info.nccl_error, "/nonexistent"));
}
END_TEST

/* The real NCCL of this machine, when the toolkit ships one: only its
 * version and a unique id (no GPU needed for either). */
START_TEST(real_nccl_when_present)
{
    const char *real = "/usr/local/cuda/lib64/libnccl.so.2";
    FILE *f = fopen(real, "rb");
    if (!f)
        return;
    fclose(f);
    setenv("CUABI_NCCL_PATH", "/usr/local/cuda/lib64", 1); /* a directory */
    cuabi__nccl_install_fake(NULL);
    int v = 0;
    ck_assert_ok(cuabi_nccl_version(&v));
    ck_assert_int_ge(v, 21900);
    ck_assert_ptr_nonnull(strstr(cuabi__nccl_info()->path, "libnccl.so"));
}
END_TEST

START_TEST(unique_ids_differ)
{
    cuabi_nccl_unique_id a, b;
    ck_assert_status(cuabi_nccl_get_unique_id(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_nccl_get_unique_id(&a));
    ck_assert_ok(cuabi_nccl_get_unique_id(&b));
    ck_assert_int_ne(memcmp(&a, &b, sizeof a), 0);
    ck_assert_uint_eq(sizeof a, CUABI_NCCL_UNIQUE_ID_BYTES);
    plan_fail("ncclGetUniqueId", 2, 1);
    ck_assert_status(cuabi_nccl_get_unique_id(&a), CUABI_ERROR_NCCL);
    ck_assert_error_mentions("ncclSystemError");
    ck_assert_error_mentions("failed as planned");
}
END_TEST

/* ---------------------------------------------------------------- init */

START_TEST(init_rank_arguments)
{
    cuabi_nccl_comm *c = (cuabi_nccl_comm *)1;
    cuabi_nccl_unique_id id;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_status(cuabi_nccl_comm_init_rank(NULL, dev0, 1, &id, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, NULL, 1, &id, 0, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(c);
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 0, &id, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("nranks");
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 2, &id, 2, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("rank 2 is not in [0, 2)");
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 2, NULL, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_nccl_comm_options o = CUABI_NCCL_COMM_OPTIONS_INIT;
    o.version = 99;
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, &o),
                     CUABI_ERROR_INVALID_VERSION);
    o = opts_timeout(0);
    o.nonblocking = 2;
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    o = opts_timeout(0);
    o.min_ctas = -5;
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("min_ctas");
    /* Not inside a group. */
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("inside a group");
    ck_assert_ok(cuabi_nccl_group_end());
    ck_assert_status(cuabi_nccl_group_end(), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("no group");
    ck_assert_int_eq(live_comms(), 0);
}
END_TEST

/* One rank alone: nonblocking setup, then the blocking child. */
START_TEST(init_rank_single)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    long splits = calls("ncclCommSplit");
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL));
    ck_assert_int_eq(live_comms(), 2); /* setup + blocking child */
    ck_assert_int_eq(calls("ncclCommSplit"), splits + 1);
    int r = -1, n = -1, e = -1;
    ck_assert_ok(cuabi_nccl_comm_rank(&r, c));
    ck_assert_ok(cuabi_nccl_comm_size(&n, c));
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(n, 1);
    cuabi_device *d;
    ck_assert_ok(cuabi_nccl_comm_device(&d, c));
    ck_assert_ptr_eq(d, dev0);
    cuabi_device_release(d);
    ck_assert_ok(cuabi_nccl_comm_get_async_error(&e, c));
    ck_assert_int_eq(e, 0);
    ck_assert_status(cuabi_nccl_comm_rank(NULL, c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_comm_rank(&r, (cuabi_nccl_comm *)dev0), CUABI_ERROR_INVALID_HANDLE);
    /* An all-reduce of one rank copies send to receive. */
    cuabi_buffer *a = dbuf(dev0, 16), *b = dbuf(dev0, 16);
    int32_t *pa = mem(a), *pb = mem(b);
    for (int i = 0; i < 4; i++) pa[i] = i + 1;
    ck_assert_ok(cuabi_nccl_all_reduce(c, a, 0, b, 0, 4, CUABI_NCCL_INT32, CUABI_NCCL_SUM, s0));
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pb[i], i + 1);
    ck_assert_ok(cuabi_nccl_comm_synchronize(c, s0, 0));
    ck_assert_ok(cuabi_nccl_comm_synchronize(c, NULL, 0));
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
    long destroys = calls("ncclCommDestroy");
    cuabi_nccl_comm_release(c);
    ck_assert_int_eq(calls("ncclCommDestroy"), destroys + 2);
}
END_TEST

/* A negative timeout: a plain blocking init, no split. */
START_TEST(init_rank_blocking_without_timeout)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    cuabi_nccl_comm_options o = opts_timeout(-1);
    long splits = calls("ncclCommSplit");
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, &o));
    ck_assert_int_eq(live_comms(), 1);
    ck_assert_int_eq(calls("ncclCommSplit"), splits);
    cuabi_nccl_comm_release(c);
}
END_TEST

/* The rank that never arrives: CUABI_ERROR_TIMEOUT, nothing left. */
START_TEST(init_rank_times_out)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c = NULL;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    cuabi_nccl_comm_options o = opts_timeout(150);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 2, &id, 0, &o), CUABI_ERROR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_double_ge(ms, 140);
    ck_assert_double_lt(ms, 5000);
    ck_assert_ptr_null(c);
    ck_assert_error_mentions("did not finish within 150 ms");
    ck_assert_error_mentions("aborted");
    ck_assert_int_eq(live_comms(), 0);
    /* The environment's default. */
    setenv("CUABI_NCCL_TIMEOUT_MS", "60", 1);
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_status(cuabi_nccl_comm_init_rank(&c, dev0, 3, &id, 1, NULL), CUABI_ERROR_TIMEOUT);
    ck_assert_error_mentions("within 60 ms");
    unsetenv("CUABI_NCCL_TIMEOUT_MS");
    ck_assert_int_eq(live_comms(), 0);
}
END_TEST

/* Ranks in threads, as processes would be. */
typedef struct rank_job {
    cuabi_nccl_unique_id id;
    int rank, nranks, color;
    cuabi_device *dev;
    cuabi_nccl_comm *comm, *child;
    cuabi_status st, split_st;
    int child_rank, child_size;
    bool split;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    cuabi_nccl_comm_options o = opts_timeout(5000);
    j->st = cuabi_nccl_comm_init_rank(&j->comm, j->dev, j->nranks, &j->id, j->rank, &o);
    if (j->st == CUABI_SUCCESS && j->split) {
        j->split_st = cuabi_nccl_comm_split(&j->child, j->comm, j->color, -j->rank, NULL);
        if (j->child) {
            cuabi_nccl_comm_rank(&j->child_rank, j->child);
            cuabi_nccl_comm_size(&j->child_size, j->child);
        }
    }
    return NULL;
}

static void run_ranks(rank_job *jobs, int n, bool split)
{
    pthread_t t[8];
    cuabi_nccl_unique_id id;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    for (int i = 0; i < n; i++) {
        jobs[i].id = id;
        jobs[i].rank = i;
        jobs[i].nranks = n;
        jobs[i].dev = i % 2 ? dev1 : dev0;
        jobs[i].split = split;
        ck_assert_int_eq(pthread_create(&t[i], NULL, rank_main, &jobs[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++)
        ck_assert_msg(jobs[i].st == CUABI_SUCCESS, "rank %d: %s", i, cuabi_status_name(jobs[i].st));
}

START_TEST(init_rank_in_threads_and_all_reduce)
{
    rank_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    run_ranks(jobs, 2, false);
    cuabi_buffer *b[2] = { dbuf(dev0, 8 * 4), dbuf(dev1, 8 * 4) };
    for (int r = 0; r < 2; r++) {
        float *p = mem(b[r]);
        for (int i = 0; i < 8; i++) p[i] = (float)(i * (r + 1));
    }
    /* Each rank posts from its own thread here: posting in turn is enough,
     * the fake runs the operation when the last rank arrives. */
    ck_assert_ok(cuabi_nccl_all_reduce(jobs[0].comm, NULL, 0, b[0], 0, 8, CUABI_NCCL_FLOAT32,
                                       CUABI_NCCL_SUM, s0));
    ck_assert_int_eq(pending_ops(), 1);
    ck_assert_ok(cuabi_nccl_all_reduce(jobs[1].comm, NULL, 0, b[1], 0, 8, CUABI_NCCL_FLOAT32,
                                       CUABI_NCCL_SUM, s1));
    ck_assert_int_eq(pending_ops(), 0);
    for (int r = 0; r < 2; r++) {
        float *p = mem(b[r]);
        for (int i = 0; i < 8; i++) ck_assert_float_eq(p[i], (float)(3 * i));
    }
    /* The stream must be the communicator's device's. */
    ck_assert_status(cuabi_nccl_all_reduce(jobs[0].comm, NULL, 0, b[0], 0, 8, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("the stream is on device 1, the communicator on device 0");
    /* And so must the buffer. */
    ck_assert_status(cuabi_nccl_all_reduce(jobs[0].comm, NULL, 0, b[1], 0, 8, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("receive buffer is on device 1");
    for (int r = 0; r < 2; r++) {
        cuabi_buffer_destroy(b[r]);
        cuabi_nccl_comm_release(jobs[r].comm);
    }
}
END_TEST

START_TEST(split_by_color_and_key)
{
    rank_job jobs[4];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < 4; i++)
        jobs[i].color = i == 3 ? CUABI_NCCL_SPLIT_NOCOLOR : i % 2;
    run_ranks(jobs, 4, true);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(jobs[i].split_st == CUABI_SUCCESS, "rank %d split: %s", i,
                      cuabi_status_name(jobs[i].split_st));
    /* color 0: ranks 0 and 2, keys 0 and -2: rank 2 first. color 1: rank 1
     * alone. rank 3: no color, no communicator. */
    ck_assert_int_eq(jobs[0].child_size, 2);
    ck_assert_int_eq(jobs[0].child_rank, 1);
    ck_assert_int_eq(jobs[2].child_rank, 0);
    ck_assert_int_eq(jobs[1].child_size, 1);
    ck_assert_ptr_null(jobs[3].child);
    ck_assert_status(cuabi_nccl_comm_split(&jobs[3].child, jobs[3].comm, -7, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++) {
        if (jobs[i].child)
            cuabi_nccl_comm_release(jobs[i].child);
        cuabi_nccl_comm_release(jobs[i].comm);
    }
}
END_TEST

/* ------------------------------------------------------------ init-all */

static void init_all(cuabi_nccl_comm *c[2])
{
    cuabi_device *devs[2] = { dev0, dev1 };
    /* The caller's current context is the same after (each rank's device was
     * made current in turn, the last one left: 2 x H100, 2026-11-28). */
    ck_assert_ok(cuabi_device_set_current(dev0));
    CUcontext before = fake_current;
    ck_assert_ok(cuabi_nccl_comm_init_all(c, devs, 2, NULL));
    ck_assert_ptr_eq(fake_current, before);
    int r;
    ck_assert_ok(cuabi_nccl_comm_rank(&r, c[1]));
    ck_assert_int_eq(r, 1);
}

START_TEST(init_all_arguments)
{
    cuabi_nccl_comm *c[2] = { (cuabi_nccl_comm *)1, (cuabi_nccl_comm *)1 };
    cuabi_device *same[2] = { dev0, dev0 }, *bad[2] = { dev0, NULL };
    ck_assert_status(cuabi_nccl_comm_init_all(c, same, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("same device");
    ck_assert_ptr_null(c[0]);
    ck_assert_status(cuabi_nccl_comm_init_all(c, bad, 2, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_nccl_comm_init_all(c, same, 0, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_comm_init_all(c, NULL, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    /* NCCL refuses the second init: nothing is left. */
    cuabi_device *devs[2] = { dev0, dev1 };
    plan_fail("ncclGroupEnd", 3, 1);
    ck_assert_status(cuabi_nccl_comm_init_all(c, devs, 2, NULL), CUABI_ERROR_NCCL);
    ck_assert_error_mentions("ncclGroupEnd");
    ck_assert_ptr_null(c[0]);
    ck_assert_ptr_null(c[1]);
    ck_assert_int_eq(live_comms(), 0);
}
END_TEST

/* Every collective over buffers, several types and operations, both ranks
 * from one thread in a group (as NCCL requires for several devices). */
typedef struct dcase { cuabi_nccl_datatype t; size_t size; } dcase;

static double get(const void *p, cuabi_nccl_datatype t, size_t i)
{
    switch (t) {
    case CUABI_NCCL_INT8: return ((const int8_t *)p)[i];
    case CUABI_NCCL_UINT8: return ((const uint8_t *)p)[i];
    case CUABI_NCCL_INT32: return ((const int32_t *)p)[i];
    case CUABI_NCCL_UINT32: return ((const uint32_t *)p)[i];
    case CUABI_NCCL_INT64: return (double)((const int64_t *)p)[i];
    case CUABI_NCCL_UINT64: return (double)((const uint64_t *)p)[i];
    case CUABI_NCCL_FLOAT32: return ((const float *)p)[i];
    case CUABI_NCCL_FLOAT64: return ((const double *)p)[i];
    case CUABI_NCCL_FLOAT16: { /* small integers only: exact */
        uint16_t h = ((const uint16_t *)p)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        return e ? (1.0 + m / 1024.0) * (double)(1 << e) / (double)(1 << 15) : 0.0;
    }
    case CUABI_NCCL_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    default: return 0;
    }
}

static void put(void *p, cuabi_nccl_datatype t, size_t i, int v)
{
    switch (t) {
    case CUABI_NCCL_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case CUABI_NCCL_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CUABI_NCCL_INT32: ((int32_t *)p)[i] = v; break;
    case CUABI_NCCL_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case CUABI_NCCL_INT64: ((int64_t *)p)[i] = v; break;
    case CUABI_NCCL_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case CUABI_NCCL_FLOAT32: ((float *)p)[i] = (float)v; break;
    case CUABI_NCCL_FLOAT64: ((double *)p)[i] = v; break;
    case CUABI_NCCL_FLOAT16: { /* 0 <= v < 1024 */
        uint16_t h = 0;
        if (v) {
            int e = 0;
            while ((v >> e) > 1) e++;
            h = (uint16_t)(((e + 15) << 10) | ((v << (10 - e)) & 1023));
        }
        ((uint16_t *)p)[i] = h;
        break;
    }
    case CUABI_NCCL_BFLOAT16: {
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(bits >> 16);
        break;
    }
    default: break;
    }
}

static const dcase dcases[] = {
    { CUABI_NCCL_INT8, 1 }, { CUABI_NCCL_UINT8, 1 }, { CUABI_NCCL_INT32, 4 },
    { CUABI_NCCL_UINT32, 4 }, { CUABI_NCCL_INT64, 8 }, { CUABI_NCCL_UINT64, 8 },
    { CUABI_NCCL_FLOAT16, 2 }, { CUABI_NCCL_FLOAT32, 4 }, { CUABI_NCCL_FLOAT64, 8 },
    { CUABI_NCCL_BFLOAT16, 2 },
};

START_TEST(every_collective_every_type)
{
    const dcase *dc = &dcases[_i];
    cuabi_nccl_comm *c[2];
    init_all(c);
    cuabi_stream *st[2] = { s0, s1 };
    cuabi_device *dv[2] = { dev0, dev1 };
    const size_t n = 6, es = dc->size;
    cuabi_buffer *snd[2], *rcv[2], *big[2];
    for (int r = 0; r < 2; r++) {
        snd[r] = dbuf(dv[r], n * es);
        rcv[r] = dbuf(dv[r], n * es);
        big[r] = dbuf(dv[r], 2 * n * es);
    }
    /* rank r's element i is i + 1 + r (small: exact in every type). */
#define FILL()                                                                \
    for (int r = 0; r < 2; r++)                                                \
        for (size_t i = 0; i < n; i++) put(mem(snd[r]), dc->t, i, (int)(i + 1 + (size_t)r))
    static const cuabi_nccl_op ops[] = { CUABI_NCCL_SUM, CUABI_NCCL_PROD, CUABI_NCCL_MAX,
                                         CUABI_NCCL_MIN, CUABI_NCCL_AVG };
    for (size_t k = 0; k < 5; k++) {
        FILL();
        ck_assert_ok(cuabi_nccl_group_start());
        for (int r = 0; r < 2; r++)
            ck_assert_ok(cuabi_nccl_all_reduce(c[r], snd[r], 0, rcv[r], 0, n, dc->t, ops[k], st[r]));
        ck_assert_ok(cuabi_nccl_group_end());
        for (int r = 0; r < 2; r++)
            for (size_t i = 0; i < n; i++) {
                double a = (double)i + 1, b = (double)i + 2;
                double want = ops[k] == CUABI_NCCL_SUM ? a + b : ops[k] == CUABI_NCCL_PROD ? a * b
                            : ops[k] == CUABI_NCCL_MAX ? b : ops[k] == CUABI_NCCL_MIN ? a
                            : (dc->t <= CUABI_NCCL_UINT64 ? (double)(((long)a + (long)b) / 2)
                                                          : (a + b) / 2);
                ck_assert_msg(get(mem(rcv[r]), dc->t, i) == want, "type %d op %d rank %d [%zu]: "
                              "%g, want %g", dc->t, ops[k], r, i, get(mem(rcv[r]), dc->t, i), want);
            }
    }
    /* broadcast from rank 1 */
    FILL();
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_broadcast(c[r], snd[r], 0, rcv[r], 0, n, dc->t, 1, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < n; i++)
            ck_assert(get(mem(rcv[r]), dc->t, i) == (double)i + 2);
    /* reduce (sum) to rank 0; rank 1 passes no receive buffer */
    FILL();
    memset(mem(rcv[0]), 0, n * es);
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_ok(cuabi_nccl_reduce(c[0], snd[0], 0, rcv[0], 0, n, dc->t, CUABI_NCCL_SUM, 0, st[0]));
    ck_assert_ok(cuabi_nccl_reduce(c[1], snd[1], 0, NULL, 0, n, dc->t, CUABI_NCCL_SUM, 0, st[1]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (size_t i = 0; i < n; i++)
        ck_assert(get(mem(rcv[0]), dc->t, i) == 2.0 * (double)i + 3);
    /* all-gather into the big buffers */
    FILL();
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_all_gather(c[r], snd[r], 0, big[r], 0, n, dc->t, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < 2 * n; i++)
            ck_assert(get(mem(big[r]), dc->t, i) == (double)(i % n) + 1 + (double)(i / n));
    /* reduce-scatter (max) of the big buffers: block r to rank r */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_reduce_scatter(c[r], big[r], 0, rcv[r], 0, n, dc->t,
                                               CUABI_NCCL_MAX, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < n; i++)
            ck_assert(get(mem(rcv[r]), dc->t, i) == (double)i + 1 + r);
    /* send / receive: rank 0 -> rank 1, in a group */
    FILL();
    memset(mem(rcv[1]), 0, n * es);
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_ok(cuabi_nccl_send(c[0], snd[0], 0, n, dc->t, 1, st[0]));
    ck_assert_ok(cuabi_nccl_recv(c[1], rcv[1], 0, n, dc->t, 0, st[1]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (size_t i = 0; i < n; i++)
        ck_assert(get(mem(rcv[1]), dc->t, i) == (double)i + 1);
#undef FILL
    for (int r = 0; r < 2; r++) {
        cuabi_buffer_destroy(snd[r]);
        cuabi_buffer_destroy(rcv[r]);
        cuabi_buffer_destroy(big[r]);
        cuabi_nccl_comm_release(c[r]);
    }
}
END_TEST

START_TEST(buffer_refusals)
{
    cuabi_nccl_comm *c[2];
    init_all(c);
    cuabi_buffer *b = dbuf(dev0, 64), *host;
    static char hostmem[64];
    ck_assert_ok(cuabi_buffer_wrap(&host, NULL, CUABI_MEMORY_HOST, (uintptr_t)hostmem, 64, NULL,
                                   NULL));
    /* out of range; overflow; host memory; bad type, op, root, peer */
    ck_assert_status(cuabi_nccl_all_reduce(c[0], NULL, 0, b, 8, 15, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("receive");
    ck_assert_status(cuabi_nccl_all_reduce(c[0], NULL, 0, b, 0, SIZE_MAX / 2, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("overflow");
    ck_assert_status(cuabi_nccl_all_reduce(c[0], host, 0, b, 0, 4, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("host memory");
    ck_assert_status(cuabi_nccl_all_reduce(c[0], NULL, 0, b, 0, 4, (cuabi_nccl_datatype)12,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_all_reduce(c[0], NULL, 0, b, 0, 4, CUABI_NCCL_FLOAT32,
                                           (cuabi_nccl_op)5, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_broadcast(c[0], NULL, 0, b, 0, 4, CUABI_NCCL_FLOAT32, 2, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("root 2 is not a rank");
    ck_assert_status(cuabi_nccl_send(c[0], b, 0, 4, CUABI_NCCL_FLOAT32, -1, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_reduce(c[0], b, 0, NULL, 0, 4, CUABI_NCCL_FLOAT32,
                                       CUABI_NCCL_SUM, 0, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("root: it needs a receive buffer");
    ck_assert_status(cuabi_nccl_all_gather(c[0], NULL, 0, b, 0, 9, CUABI_NCCL_FLOAT32, s0),
                     CUABI_ERROR_INVALID_ARGUMENT); /* 18 floats do not fit in 64 bytes */
    ck_assert_status(cuabi_nccl_reduce_scatter(c[0], b, 0, b, 0, 9, CUABI_NCCL_FLOAT32,
                                               CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nccl_all_reduce(NULL, NULL, 0, b, 0, 4, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_INVALID_HANDLE);
    /* NCCL's own refusal: CUABI_ERROR_NCCL naming the call and NCCL's words. */
    plan_fail("ncclAllReduce", 4, 1);
    ck_assert_status(cuabi_nccl_all_reduce(c[0], NULL, 0, b, 0, 4, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_NCCL);
    ck_assert_error_mentions("ncclAllReduce failed: ncclInvalidArgument (4: invalid argument)");
    ck_assert_error_mentions("failed as planned");
    cuabi_buffer_destroy(b);
    cuabi_buffer_destroy(host);
    cuabi_nccl_comm_release(c[0]);
    cuabi_nccl_comm_release(c[1]);
}
END_TEST

/* --------------------------------------------------------------- views */

START_TEST(views_collectives_and_refusals)
{
    cuabi_nccl_comm *c[2];
    init_all(c);
    cuabi_stream *st[2] = { s0, s1 };
    cuabi_buffer *b[2] = { dbuf(dev0, 256), dbuf(dev1, 256) };
    cuabi_view *v[2], *half[2], *tall[2], *strided, *ro, *cplx, *bytes16;
    int64_t shape[2] = { 2, 3 }, hs[1] = { 3 }, ts[2] = { 4, 3 };
    for (int r = 0; r < 2; r++) {
        ck_assert_ok(cuabi_view_create(&v[r], b[r], 0, CUABI_DTYPE_FLOAT, 64, 2, shape, NULL, 0));
        ck_assert_ok(cuabi_view_create(&half[r], b[r], 128, CUABI_DTYPE_FLOAT, 64, 1, hs, NULL, 0));
        ck_assert_ok(cuabi_view_create(&tall[r], b[r], 48, CUABI_DTYPE_FLOAT, 64, 2, ts, NULL, 0));
        double *p = mem(b[r]);
        for (int i = 0; i < 6; i++) p[i] = i + 10 * r;
    }
    /* all-reduce in place, type and count from the views */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_all_reduce_view(c[r], NULL, v[r], CUABI_NCCL_SUM, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 6; i++)
            ck_assert_double_eq(((double *)mem(b[r]))[i], 2.0 * i + 10);
    /* all-gather 3 + 3 into 6; reduce-scatter back */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_all_gather_view(c[r], half[r], v[r], st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_reduce_scatter_view(c[r], v[r], half[r], CUABI_NCCL_SUM, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    /* broadcast, reduce, send/recv of views */
    ck_assert_ok(cuabi_nccl_group_start());
    for (int r = 0; r < 2; r++)
        ck_assert_ok(cuabi_nccl_broadcast_view(c[r], NULL, v[r], 0, st[r]));
    ck_assert_ok(cuabi_nccl_group_end());
    ck_assert_int_eq(memcmp(mem(b[0]), mem(b[1]), 48), 0);
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_ok(cuabi_nccl_reduce_view(c[0], v[0], v[0], CUABI_NCCL_MAX, 0, st[0]));
    ck_assert_ok(cuabi_nccl_reduce_view(c[1], v[1], NULL, CUABI_NCCL_MAX, 0, st[1]));
    ck_assert_ok(cuabi_nccl_send_view(c[1], half[1], 0, st[1]));
    ck_assert_ok(cuabi_nccl_recv_view(c[0], half[0], 1, st[0]));
    ck_assert_ok(cuabi_nccl_group_end());
    ck_assert_int_eq(pending_ops(), 0);
    /* Refusals: each names what is wrong. */
    int64_t sshape[1] = { 3 }, sstride[1] = { 2 };
    ck_assert_ok(cuabi_view_create(&strided, b[0], 0, CUABI_DTYPE_FLOAT, 64, 1, sshape, sstride, 0));
    ck_assert_status(cuabi_nccl_all_reduce_view(c[0], NULL, strided, CUABI_NCCL_SUM, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not contiguous");
    ck_assert_status(cuabi_nccl_all_reduce_view(c[0], half[0], v[0], CUABI_NCCL_SUM, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("mismatched sizes: the send view has 3 elements and the receive "
                             "view 6");
    ck_assert_status(cuabi_nccl_all_gather_view(c[0], v[0], v[0], s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("nranks times");
    ck_assert_status(cuabi_nccl_reduce_scatter_view(c[0], tall[0], half[0], CUABI_NCCL_SUM, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("mismatched sizes");
    ck_assert_status(cuabi_nccl_all_reduce_view(c[0], NULL, v[1], CUABI_NCCL_SUM, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("view is on device 1");
    ck_assert_ok(cuabi_view_create(&ro, b[0], 0, CUABI_DTYPE_FLOAT, 64, 2, shape, NULL,
                                   CUABI_VIEW_READ_ONLY));
    ck_assert_status(cuabi_nccl_all_reduce_view(c[0], NULL, ro, CUABI_NCCL_SUM, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("read-only");
    ck_assert_ok(cuabi_nccl_all_reduce_view(c[0], ro, v[0], CUABI_NCCL_SUM, NULL)); /* read-only send */
    ck_assert_ok(cuabi_nccl_all_reduce_view(c[1], NULL, v[1], CUABI_NCCL_SUM, NULL));
    /* complex: moved as bytes, never reduced */
    ck_assert_ok(cuabi_view_create(&cplx, b[0], 0, CUABI_DTYPE_COMPLEX, 64, 1, hs, NULL, 0));
    ck_assert_status(cuabi_nccl_all_reduce_view(c[0], NULL, cplx, CUABI_NCCL_SUM, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cannot reduce");
    ck_assert_ok(cuabi_view_create(&bytes16, b[1], 0, CUABI_DTYPE_COMPLEX, 64, 1, hs, NULL, 0));
    ((float *)mem(b[0]))[0] = 42.0f;
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_ok(cuabi_nccl_broadcast_view(c[0], NULL, cplx, 0, s0));
    ck_assert_ok(cuabi_nccl_broadcast_view(c[1], NULL, bytes16, 0, s1));
    ck_assert_ok(cuabi_nccl_group_end());
    ck_assert_float_eq(((float *)mem(b[1]))[0], 42.0f);
    cuabi_view *all[] = { strided, ro, cplx, bytes16, v[0], v[1], half[0], half[1], tall[0],
                          tall[1] };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        cuabi_view_release(all[i]);
    for (int r = 0; r < 2; r++) {
        cuabi_buffer_destroy(b[r]);
        cuabi_nccl_comm_release(c[r]);
    }
}
END_TEST

/* ------------------------------------------- abort, finalize, errors */

START_TEST(abort_and_finalize)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c, *d;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL));
    cuabi_buffer *b = dbuf(dev0, 16);
    long destroys = calls("ncclCommDestroy"), aborts = calls("ncclCommAbort");
    ck_assert_ok(cuabi_nccl_comm_abort(c));
    ck_assert_ok(cuabi_nccl_comm_abort(c)); /* twice: no error, one abort each */
    ck_assert_int_eq(calls("ncclCommAbort"), aborts + 2);
    ck_assert_int_eq(live_comms(), 0);
    ck_assert_status(cuabi_nccl_all_reduce(c, NULL, 0, b, 0, 4, CUABI_NCCL_FLOAT32,
                                           CUABI_NCCL_SUM, s0), CUABI_ERROR_NCCL);
    ck_assert_error_mentions("aborted");
    int e;
    ck_assert_status(cuabi_nccl_comm_get_async_error(&e, c), CUABI_ERROR_NCCL);
    cuabi_nccl_comm_release(c);
    ck_assert_int_eq(calls("ncclCommDestroy"), destroys); /* nothing left to destroy */
    /* finalize: collectives refused afterwards, release destroys */
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_ok(cuabi_nccl_comm_init_rank(&d, dev0, 1, &id, 0, NULL));
    ck_assert_ok(cuabi_nccl_comm_finalize(d));
    ck_assert_status(cuabi_nccl_comm_finalize(d), CUABI_ERROR_NCCL);
    ck_assert_error_mentions("finalized");
    ck_assert_status(cuabi_nccl_broadcast(d, NULL, 0, b, 0, 4, CUABI_NCCL_FLOAT32, 0, s0),
                     CUABI_ERROR_NCCL);
    cuabi_nccl_comm_release(d);
    ck_assert_int_eq(calls("ncclCommDestroy"), destroys + 2);
    cuabi_buffer_destroy(b);
}
END_TEST

static CUresult CUDAAPI stream_never_done(CUstream s)
{
    (void)s;
    return CUDA_ERROR_NOT_READY;
}

START_TEST(async_errors_and_synchronize_timeout)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL));
    /* A peer failed: the query reports it, synchronize aborts. */
    set_async(6);
    int e = 0;
    ck_assert_ok(cuabi_nccl_comm_get_async_error(&e, c));
    ck_assert_int_eq(e, 6);
    ck_assert_status(cuabi_nccl_comm_synchronize(c, s0, 0), CUABI_ERROR_NCCL);
    ck_assert_error_mentions("ncclRemoteError");
    ck_assert_error_mentions("aborted");
    ck_assert_int_eq(live_comms(), 0);
    set_async(0);
    cuabi_nccl_comm_release(c);
    /* A stream that never finishes (a peer that never posts): a timeout. */
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL));
    PFN_cuStreamQuery_v2000 saved = cuabi__driver_for_test()->cuStreamQuery;
    cuabi__driver_for_test()->cuStreamQuery = stream_never_done;
    ck_assert_status(cuabi_nccl_comm_synchronize(c, s0, 80), CUABI_ERROR_TIMEOUT);
    ck_assert_error_mentions("did not finish within 80 ms");
    cuabi__driver_for_test()->cuStreamQuery = saved;
    ck_assert_int_eq(live_comms(), 0);
    ck_assert_status(cuabi_nccl_comm_synchronize(c, s0, 80), CUABI_ERROR_NCCL);
    cuabi_nccl_comm_release(c);
}
END_TEST

/* The nonblocking option: every call polled. */
START_TEST(nonblocking_option)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    cuabi_nccl_comm_options o = opts_timeout(2000);
    o.nonblocking = 1;
    o.comm_name = "nb";
    o.net_name = "Socket";
    long splits = calls("ncclCommSplit"), polls = calls("ncclCommGetAsyncError");
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, &o));
    ck_assert_int_eq(calls("ncclCommSplit"), splits);
    ck_assert_int_eq(live_comms(), 1);
    cuabi_buffer *b = dbuf(dev0, 16);
    ck_assert_ok(cuabi_nccl_all_reduce(c, NULL, 0, b, 0, 4, CUABI_NCCL_INT32, CUABI_NCCL_SUM, s0));
    ck_assert_int_gt(calls("ncclCommGetAsyncError"), polls + 1);
    ck_assert_ok(cuabi_nccl_group_start());
    ck_assert_ok(cuabi_nccl_all_reduce(c, NULL, 0, b, 0, 4, CUABI_NCCL_INT32, CUABI_NCCL_SUM, s0));
    ck_assert_ok(cuabi_nccl_send(c, b, 0, 4, CUABI_NCCL_INT32, 0, s0));
    ck_assert_ok(cuabi_nccl_recv(c, b, 0, 4, CUABI_NCCL_INT32, 0, s0));
    ck_assert_ok(cuabi_nccl_group_end());
    /* a split of a nonblocking communicator keeps the mode */
    cuabi_nccl_comm *k;
    ck_assert_ok(cuabi_nccl_comm_split(&k, c, 0, 0, NULL));
    ck_assert_int_eq(live_comms(), 2);
    ck_assert_ok(cuabi_nccl_comm_finalize(k));
    cuabi_nccl_comm_release(k);
    cuabi_nccl_comm_release(c);
    cuabi_buffer_destroy(b);
}
END_TEST

/* --------------------------------------------- registration, captures */

START_TEST(registration_keeps_what_it_names)
{
    cuabi_nccl_comm *c[2];
    init_all(c);
    cuabi_buffer *b = dbuf(dev0, 64);
    cuabi_nccl_registration *g = (cuabi_nccl_registration *)1;
    ck_assert_status(cuabi_nccl_register(&g, c[0], NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(g);
    plan_fail("ncclCommRegister", 2, 1);
    ck_assert_status(cuabi_nccl_register(&g, c[0], b), CUABI_ERROR_NCCL);
    ck_assert_int_eq(live_regs(), 0);
    ck_assert_ok(cuabi_nccl_register(&g, c[0], b));
    ck_assert_int_eq(live_regs(), 1);
    cuabi_nccl_comm_release(c[0]);
    cuabi_buffer_destroy(b);
    ck_assert_int_eq(live_comms(), 2); /* the registration keeps rank 0 */
    cuabi_nccl_registration_destroy(g);
    ck_assert_int_eq(live_regs(), 0);
    ck_assert_int_eq(live_comms(), 1);
    cuabi_nccl_comm_release(c[1]);
}
END_TEST

START_TEST(captured_collective_keeps_the_communicator)
{
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm *c;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_ok(cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL));
    cuabi_buffer *b = dbuf(dev0, 16);
    cuabi_view *v;
    int64_t shape[1] = { 4 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_graph_capture_begin(s0, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_nccl_all_reduce(c, NULL, 0, b, 0, 4, CUABI_NCCL_INT32, CUABI_NCCL_SUM, s0));
    ck_assert_ok(cuabi_nccl_all_reduce_view(c, NULL, v, CUABI_NCCL_SUM, s0));
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, s0));
    cuabi_nccl_comm_release(c);
    cuabi_view_release(v);
    cuabi_buffer_destroy(b);
    ck_assert_int_eq(live_comms(), 2); /* the graph holds it */
    cuabi_graph_release(g);
    ck_assert_int_eq(live_comms(), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nccl");
    TCase *tc = tcase_create("fake NCCL");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, loads_through_the_variable);
    tcase_add_test(tc, runtime_info_reports_nccl);
    tcase_add_test(tc, real_nccl_when_present);
    tcase_add_test(tc, unique_ids_differ);
    tcase_add_test(tc, init_rank_arguments);
    tcase_add_test(tc, init_rank_single);
    tcase_add_test(tc, init_rank_blocking_without_timeout);
    tcase_add_test(tc, init_rank_times_out);
    tcase_add_test(tc, init_rank_in_threads_and_all_reduce);
    tcase_add_test(tc, split_by_color_and_key);
    tcase_add_test(tc, init_all_arguments);
    tcase_add_loop_test(tc, every_collective_every_type, 0,
                        (int)(sizeof dcases / sizeof *dcases));
    tcase_add_test(tc, buffer_refusals);
    tcase_add_test(tc, views_collectives_and_refusals);
    tcase_add_test(tc, abort_and_finalize);
    tcase_add_test(tc, async_errors_and_synchronize_timeout);
    tcase_add_test(tc, nonblocking_option);
    tcase_add_test(tc, registration_keeps_what_it_names);
    tcase_add_test(tc, captured_collective_keeps_the_communicator);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
