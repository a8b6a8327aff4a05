/* Concurrency: 8 threads x 1,000 mixed operations — compiles through the
 * compile cache, handle create/retain/release/destroy, views exported to
 * DLPack and imported back, error records — with no failure and nothing
 * left; and 4 processes filling the same cache keys at once leave every
 * entry readable (no corrupt entry). Run under ThreadSanitizer by
 * tests/check_tsan.sh. CUABI_CONCURRENCY_OPS overrides the 1,000. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"
#include "compile/cache.h"

enum { THREADS = 8, SOURCES = 4 };
static long ops_per_thread = 1000;
static char tmpdir[64];
static _Atomic long done_ops, compiles;

static const char *source(int i)
{
    static const char *src[SOURCES] = {
        "extern \"C\" __global__ void k0(float *x) { x[threadIdx.x] += 1.0f; }\n",
        "extern \"C\" __global__ void k1(int *x) { x[threadIdx.x] *= 2; }\n",
        "template <typename T> __global__ void k2(T *x) { x[0] = T(3); }\n",
        "extern \"C\" __global__ void k3(double *x, double a) { x[threadIdx.x] = a; }\n",
    };
    return src[i];
}

#define OK(expr)                                                              \
    do {                                                                       \
        cuabi_status s__ = (expr);                                             \
        if (s__ != CUABI_SUCCESS) {                                            \
            fprintf(stderr, "%s failed: %s\n", #expr, cuabi_last_error()->message); \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static int op_compile(unsigned r)
{
    cuabi_program *p;
    cuabi_objcode *o;
    const char *exprs[] = { "k2<int>" }, *lowered;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    int i = (int)(r % SOURCES);
    opts.arch = "sm_90";
    opts.output = CUABI_CODE_PTX;
    if (i == 2) {
        opts.name_expressions = exprs;
        opts.num_name_expressions = 1;
    }
    OK(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source(i), 0, "c.cu"));
    OK(cuabi_program_compile(&o, p, &opts));
    int hit = 0;
    OK(cuabi_program_cache_hit(&hit, p));
    if (!hit)
        atomic_fetch_add(&compiles, 1);
    if (i == 2)
        OK(cuabi_objcode_lowered_name(&lowered, o, "k2<int>"));
    OK(cuabi_objcode_retain(o));
    OK(cuabi_program_release(p));
    OK(cuabi_objcode_release(o));
    OK(cuabi_objcode_release(o));
    return 0;
}

static cuabi_memory_resource *shared_host; /* used by every thread */
static cuabi_view *shared_view;

static void versioned_deleter(DLManagedTensorVersioned *t) { free(t); }

static int op_views(unsigned r)
{
    cuabi_buffer *b;
    cuabi_view *v, *s, *back;
    int64_t shape[2] = { 8, 4 }, start[2] = { 1, 0 }, stop[2] = { 7, 4 }, step[2] = { 2, 1 };
    OK(cuabi_buffer_allocate(&b, shared_host, 8 * 4 * sizeof(float), 64, NULL));
    OK(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    OK(cuabi_buffer_destroy(b)); /* the view keeps the memory */
    OK(cuabi_view_slice(&s, v, 2, start, stop, step));
    DLManagedTensorVersioned *out;
    OK(cuabi_view_to_dlpack_versioned(&out, r & 1 ? s : shared_view));
    OK(cuabi_view_release(s));
    OK(cuabi_view_from_dlpack_versioned(&back, out)); /* takes ownership */
    uint64_t n;
    OK(cuabi_view_nbytes(&n, back));
    OK(cuabi_view_release(v));
    OK(cuabi_view_release(back));
    /* A foreign producer's tensor, imported and released. */
    DLManagedTensorVersioned *mt = calloc(1, sizeof *mt);
    static float data[6];
    static int64_t sh[1] = { 6 };
    mt->version.major = 1;
    mt->deleter = versioned_deleter;
    mt->dl_tensor = (DLTensor){ .data = data, .device = { kDLCPU, 0 }, .ndim = 1,
                                .dtype = { kDLFloat, 32, 1 }, .shape = sh };
    OK(cuabi_view_from_dlpack_versioned(&back, mt));
    OK(cuabi_view_retain(back));
    OK(cuabi_view_release(back));
    OK(cuabi_view_release(back));
    return 0;
}

static int op_handles(unsigned r)
{
    cuabi_memory_resource *h;
    OK(cuabi_memory_resource_host(&h));
    OK(cuabi_memory_resource_retain(h));
    OK(cuabi_memory_resource_release(h));
    uintptr_t p;
    OK(cuabi_memory_resource_allocate(&p, h, 64 + (r % 512), 16, NULL));
    OK(cuabi_memory_resource_deallocate(h, p, 64 + (r % 512), 16, NULL));
    OK(cuabi_memory_resource_release(h));
    /* A released handle is refused, not used. */
    if (cuabi_memory_resource_release(h) != CUABI_ERROR_INVALID_HANDLE)
        return 1;
    cuabi_error_clear();
    return 0;
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    for (long i = 0; i < ops_per_thread; i++) {
        unsigned r = rand_r(&seed);
        int bad;
        switch (r % 8) {
        case 0: bad = op_compile(r >> 3); break;
        case 1: case 2: case 3: bad = op_views(r >> 3); break;
        default: bad = op_handles(r >> 3); break;
        }
        if (bad)
            return (void *)1;
        atomic_fetch_add(&done_ops, 1);
    }
    return NULL;
}

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-test-conc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    setenv("CUABI_CACHE_DIR", tmpdir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    const char *n = getenv("CUABI_CONCURRENCY_OPS");
    if (n)
        ops_per_thread = atol(n);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(threads_times_mixed_operations)
{
    size_t live = cuabi__handle_live_count();
    cuabi_buffer *b;
    int64_t shape[1] = { 16 };
    ck_assert_ok(cuabi_memory_resource_host(&shared_host));
    ck_assert_ok(cuabi_buffer_allocate(&b, shared_host, 64, 64, NULL));
    ck_assert_ok(cuabi_view_create(&shared_view, b, 0, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_destroy(b));
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        failed += rv != NULL;
    }
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(done_ops, THREADS * ops_per_thread);
    ck_assert_ok(cuabi_view_release(shared_view));
    ck_assert_ok(cuabi_memory_resource_release(shared_host));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    cuabi_cache_stats st = CUABI_CACHE_STATS_INIT;
    ck_assert_ok(cuabi_cache_get_stats(&st));
    ck_assert_uint_eq(st.corrupt, 0);
    printf("concurrency: %d threads x %ld operations, %ld real compiles, %llu cache hits\n",
           THREADS, ops_per_thread, (long)compiles,
           (unsigned long long)(st.memory_hits + st.disk_hits));
}
END_TEST

/* 4 processes compile the same programs into the same directory at once
 * (each with an empty in-memory cache), then a fresh reader finds every
 * entry whole. */
START_TEST(processes_fill_the_same_keys)
{
    enum { PROCS = 4, ROUNDS = 3 };
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pid[p] = fork();
        ck_assert_int_ge(pid[p], 0);
        if (pid[p] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) < 0)
                _exit(3);
            for (int round = 0; round < ROUNDS; round++) {
                cuabi__cache_reset_for_test(); /* no memory layer: race on the files */
                for (int i = 0; i < SOURCES; i++)
                    if (op_compile((unsigned)(i + p) % SOURCES))
                        _exit(1);
            }
            cuabi_cache_stats st = CUABI_CACHE_STATS_INIT;
            if (cuabi_cache_get_stats(&st) != CUABI_SUCCESS || st.corrupt)
                _exit(2);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]); /* everyone starts now */
    for (int p = 0; p < PROCS; p++) {
        int status;
        ck_assert_int_eq(waitpid(pid[p], &status, 0), pid[p]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", p,
                      status);
    }
    cuabi__cache_reset_for_test();
    long before = compiles;
    for (int i = 0; i < SOURCES; i++)
        ck_assert_int_eq(op_compile((unsigned)i), 0);
    ck_assert_int_eq(compiles, before); /* every one a hit from disk */
    cuabi_cache_stats st = CUABI_CACHE_STATS_INIT;
    ck_assert_ok(cuabi_cache_get_stats(&st));
    ck_assert_uint_eq(st.corrupt, 0);
    ck_assert_uint_eq(st.disk_hits, SOURCES);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("concurrency");
    TCase *tc = tcase_create("stress");
    tcase_set_timeout(tc, 900);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, threads_times_mixed_operations);
    tcase_add_test(tc, processes_fill_the_same_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cuabi_test_run(suite()); }
