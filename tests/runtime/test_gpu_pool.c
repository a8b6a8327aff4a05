/* Pool statistics on a real GPU (issue 25 item 2): a pool of our own whose
 * used and reserved figures move with stream-ordered allocations and frees
 * (current and high-water), a reset of the high-water marks, the release
 * threshold deciding what a synchronisation gives back (0: everything
 * unused; UINT64_MAX: nothing), a trim, the reuse policies set and read
 * back, a maximum pool size the driver enforces, the one-call summary and
 * its log line (printed), pools of a location (the device's current and
 * default pool; the host's and NUMA node 0's where the driver has them --
 * CUDA 13 -- else the refusal naming cuMemGetMemPool; a host pool open to
 * the device: memset, copies, a kernel on its memory), an IPC pool's
 * summary, and the cost of one statistics query (printed; bench/bench_pool
 * asserts nothing either, it prints the ratio). Exits 77 without a GPU. */
#include "testutil.h"

#include <time.h>

enum { MiB = 1 << 20 };

static cuabi_device *dev;
static cuabi_stream *s;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
}
static void teardown(void)
{
    cuabi_stream_release(s);
    cuabi_device_release(dev);
}

static uint64_t attr(cuabi_memory_resource *r, cuabi_pool_attribute a)
{
    uint64_t v = 0;
    ck_assert_ok(cuabi_pool_get_attribute(&v, r, a));
    return v;
}

static void print_stats(const char *what, cuabi_memory_resource *r)
{
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    char text[512];
    size_t n = sizeof text;
    ck_assert_ok(cuabi_pool_stats_format(text, &n, &st));
    ck_assert_uint_eq(n, strlen(text) + 1);
    printf("%s: %s\n", what, text);
}

START_TEST(statistics_move_with_allocations)
{
    cuabi_memory_resource *r;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.release_threshold = UINT64_MAX;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev, &o));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 0);
    ck_assert_uint_eq(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), 0);
    cuabi_buffer *a, *b;
    ck_assert_ok(cuabi_buffer_allocate(&a, r, 8 * MiB, 0, s));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 24 * MiB, 0, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 32u * MiB);
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 32u * MiB);
    uint64_t reserved = attr(r, CUABI_POOL_RESERVED_MEM_CURRENT);
    ck_assert_uint_ge(reserved, 32u * MiB);
    ck_assert_uint_ge(attr(r, CUABI_POOL_RESERVED_MEM_HIGH), reserved);
    print_stats("after 8 + 24 MiB", r);
    /* a free lowers used, not the mark; threshold UINT64_MAX keeps the memory */
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 8u * MiB);
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 32u * MiB);
    ck_assert_uint_eq(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), reserved);
    /* a reset brings the marks to the current figures */
    ck_assert_ok(cuabi_pool_reset_high_water(r));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 8u * MiB);
    ck_assert_uint_eq(attr(r, CUABI_POOL_RESERVED_MEM_HIGH), reserved);
    /* the same through the attribute: only 0 may be set */
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 16 * MiB, 0, s));
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 24u * MiB);
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_USED_MEM_HIGH, 0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 8u * MiB);
    ck_assert_status(cuabi_pool_set_attribute(r, CUABI_POOL_USED_MEM_HIGH, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_pool_set_attribute(r, CUABI_POOL_RESERVED_MEM_CURRENT, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* a trim gives back what is unused, not what is used */
    ck_assert_ok(cuabi_memory_resource_trim(r, 0));
    uint64_t after_trim = attr(r, CUABI_POOL_RESERVED_MEM_CURRENT);
    ck_assert_uint_ge(after_trim, 8u * MiB);
    ck_assert_uint_le(after_trim, reserved);   /* equal when both lie in one reservation */
    print_stats("after a trim", r);
    /* threshold 0: a synchronisation gives back every unused byte */
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_RELEASE_THRESHOLD, 0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_RELEASE_THRESHOLD), 0);
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64 * MiB, 0, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_ge(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), 72u * MiB);
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_le(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), after_trim);
    ck_assert_ok(cuabi_buffer_free_async(a, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 0);
    ck_assert_uint_eq(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), 0);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(reuse_policies_and_maximum_size)
{
    cuabi_memory_resource *r;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.max_size = 64 * MiB;
    cuabi_status st = cuabi_memory_resource_pool_create(&r, dev, &o);
    if (st == CUABI_ERROR_CUDA) {   /* drivers before 12.2 have no maximum size */
        printf("SKIP part: the driver refuses a pool maximum (%s)\n", cuabi_last_error()->message);
        o.max_size = 0;
        ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev, &o));
    } else {
        ck_assert_ok(st);
    }
    const cuabi_pool_attribute reuse[3] = { CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
                                            CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC,
                                            CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES };
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(attr(r, reuse[i]), 1);
        ck_assert_ok(cuabi_pool_set_attribute(r, reuse[i], 0));
        ck_assert_uint_eq(attr(r, reuse[i]), 0);
    }
    cuabi_pool_stats stats = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&stats, r));
    ck_assert_int_eq(stats.reuse_follow_event_dependencies, 0);
    ck_assert_int_eq(stats.reuse_allow_opportunistic, 0);
    ck_assert_int_eq(stats.reuse_allow_internal_dependencies, 0);
    ck_assert_uint_eq(stats.max_size, o.max_size);
    ck_assert_int_eq(stats.owned, 1);
    ck_assert_int_eq(stats.location_type, CUABI_LOCATION_DEVICE);
    int ord;
    ck_assert_ok(cuabi_device_ordinal(&ord, dev));
    ck_assert_int_eq(stats.location_id, ord);
    for (int i = 0; i < 3; i++)
        ck_assert_ok(cuabi_pool_set_attribute(r, reuse[i], 1));
    ck_assert_status(cuabi_pool_set_attribute(r, reuse[0], 2), CUABI_ERROR_INVALID_ARGUMENT);
    if (o.max_size) {
        /* the driver enforces the maximum: 48 + 48 MiB does not fit 64 */
        cuabi_buffer *a, *b = NULL;
        ck_assert_ok(cuabi_buffer_allocate(&a, r, 48 * MiB, 0, s));
        ck_assert_status(cuabi_buffer_allocate(&b, r, 48 * MiB, 0, s),
                         CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
        ck_assert_ptr_null(b);
        ck_assert_ok(cuabi_buffer_free_async(a, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        print_stats("a pool of at most 64 MiB", r);
    }
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* The device's own work on host-pool memory (a host pool gives devices no
 * access until cuabi_pool_at_location grants it; before that fix the
 * memset failed with CUDA_ERROR_INVALID_VALUE on an H100): copies both
 * ways on the stream and synchronously, a kernel adding one to 1 Mi ints
 * (checked from the host pointer and through a copy back), a device
 * buffer to host pool and back, and a second resource over the same pool
 * still finding the access. `b` holds 4 MiB, `p` its address. */
static void host_pool_device_work(cuabi_memory_resource *h, cuabi_buffer *b, uintptr_t p)
{
    enum { N = MiB / 4 };   /* ints in the 1 MiB at offset 2 MiB */
    static int in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = i * 3 - 7;
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 2 * MiB, in, sizeof in, s));
    static const char *const src =
        "extern \"C\" __global__ void add_one(int *x, int n)\n"
        "{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) x[i] += 1;\n"
        "}\n";
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *kern;
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, 0, "add_one.cu"));
    ck_assert_ok(cuabi_program_compile(&code, prog, NULL));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add_one"));
    cuabi_argpack *pack;
    ck_assert_ok(cuabi_argpack_create(&pack, "ptr, i32"));
    ck_assert_ok(cuabi_argpack_set_pointer(pack, 0, p + 2 * MiB));
    ck_assert_ok(cuabi_argpack_set_int(pack, 1, N));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = N / 256;
    c.block[0] = 256;
    c.stream = s;
    ck_assert_ok(cuabi_launch(kern, pack, &c));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 2 * MiB, sizeof out, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    const int *seen = (const int *)(p + 2 * MiB);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(out[i], in[i] + 1);
        ck_assert_int_eq(seen[i], in[i] + 1);
    }
    /* synchronous copies, and device memory <-> host pool memory */
    cuabi_memory_resource *dm;
    cuabi_buffer *d;
    ck_assert_ok(cuabi_memory_resource_device_default(&dm, dev));
    ck_assert_ok(cuabi_buffer_allocate(&d, dm, MiB, 0, s));
    ck_assert_ok(cuabi_buffer_copy(d, 0, b, 2 * MiB, MiB, s));
    ck_assert_ok(cuabi_buffer_memset(b, 2 * MiB, 0, 4, N, s));
    ck_assert_ok(cuabi_buffer_copy(b, 3 * MiB, d, 0, MiB, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_int_eq(((const int *)(p + 3 * MiB))[N - 1], in[N - 1] + 1);
    ck_assert_int_eq(seen[N - 1], 0);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 2 * MiB, in, 64, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 2 * MiB, 64, NULL));
    ck_assert_int_eq(memcmp(out, in, 64), 0);
    ck_assert_ok(cuabi_buffer_free_async(d, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_memory_resource_release(dm));
    /* another resource over the pool: the access is the pool's, still there */
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, h));
    cuabi_memory_resource *again;
    ck_assert_ok(cuabi_pool_at_location(&again, dev, st.location_type, st.location_id,
                                        CUABI_POOL_DEFAULT));
    cuabi_peer_access acc = CUABI_PEER_ACCESS_NONE;
    ck_assert_ok(cuabi_peer_get_pool_access(&acc, again, dev));
    ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
    ck_assert_ok(cuabi_memory_resource_release(again));
    cuabi_argpack_release(pack);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
}

START_TEST(pools_of_a_location)
{
    int ord;
    ck_assert_ok(cuabi_device_ordinal(&ord, dev));
    cuabi_memory_resource *cur, *dflt, *def2;
    ck_assert_ok(cuabi_pool_at_location(&cur, dev, CUABI_LOCATION_DEVICE, ord, CUABI_POOL_CURRENT));
    ck_assert_ok(cuabi_pool_at_location(&dflt, dev, CUABI_LOCATION_DEVICE, ord, CUABI_POOL_DEFAULT));
    ck_assert_ok(cuabi_memory_resource_device_default(&def2, dev));
    uintptr_t p1, p2, p3;
    ck_assert_ok(cuabi_memory_resource_pool(&p1, cur));
    ck_assert_ok(cuabi_memory_resource_pool(&p2, dflt));
    ck_assert_ok(cuabi_memory_resource_pool(&p3, def2));
    ck_assert_uint_eq(p2, p3);
    ck_assert_uint_eq(p1, p2);   /* nobody set another current pool */
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, dflt));
    ck_assert_int_eq(st.owned, 0);
    ck_assert_int_eq(st.location_id, ord);
    print_stats("the device's default pool", dflt);
    ck_assert_ok(cuabi_memory_resource_release(cur));
    ck_assert_ok(cuabi_memory_resource_release(dflt));
    ck_assert_ok(cuabi_memory_resource_release(def2));
    /* host pools (CUDA 13): pinned, stream-ordered, with statistics */
    const cuabi_location_type hosts[2] = { CUABI_LOCATION_HOST, CUABI_LOCATION_HOST_NUMA };
    for (int i = 0; i < 2; i++) {
        cuabi_memory_resource *h;
        cuabi_status rc = cuabi_pool_at_location(&h, dev, hosts[i], 0, CUABI_POOL_DEFAULT);
        if (rc != CUABI_SUCCESS) {
            printf("SKIP part: no %s pool (%s)\n", i ? "host NUMA node 0" : "host",
                   cuabi_last_error()->message);
            ck_assert_msg(rc == CUABI_ERROR_NOT_SUPPORTED || rc == CUABI_ERROR_CUDA, "%s",
                          cuabi_status_name(rc));
            continue;
        }
        cuabi_memory_kind k;
        ck_assert_ok(cuabi_memory_resource_kind(&k, h));
        ck_assert_int_eq(k, CUABI_MEMORY_PINNED);
        /* the pool is open to the resource's device (cuMemPoolGetAccess) */
        cuabi_peer_access acc = CUABI_PEER_ACCESS_NONE;
        ck_assert_ok(cuabi_peer_get_pool_access(&acc, h, dev));
        ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
        uint64_t used0 = attr(h, CUABI_POOL_USED_MEM_CURRENT);
        cuabi_buffer *b;
        ck_assert_ok(cuabi_buffer_allocate(&b, h, 4 * MiB, 0, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        ck_assert_uint_eq(attr(h, CUABI_POOL_USED_MEM_CURRENT), used0 + 4 * MiB);
        /* the host can touch pinned pool memory */
        uintptr_t p;
        ck_assert_ok(cuabi_buffer_pointer(&p, b));
        memset((void *)p, 0x3c, 4 * MiB);
        ck_assert_ok(cuabi_buffer_memset(b, MiB, 0x11, 1, 16, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        ck_assert_uint_eq(((uint8_t *)p)[MiB + 15], 0x11);
        ck_assert_uint_eq(((uint8_t *)p)[MiB + 16], 0x3c);
        host_pool_device_work(h, b, p);
        ck_assert_ok(cuabi_pool_stats_get(&st, h));
        ck_assert_int_eq(st.location_type, hosts[i]);
        print_stats(i ? "host NUMA node 0 pool" : "host pool", h);
        ck_assert_ok(cuabi_buffer_free_async(b, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        ck_assert_ok(cuabi_memory_resource_release(h));
    }
}
END_TEST

START_TEST(ipc_pool_summary)
{
    cuabi_memory_resource *r;
    cuabi_ipc_pool_options io = CUABI_IPC_POOL_OPTIONS_INIT;
    ck_assert_ok(cuabi_ipc_pool_create(&r, dev, &io));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 2 * MiB, 0, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_int_eq(st.ipc, 1);
    ck_assert_int_eq(st.owned, 1);
    ck_assert_uint_eq(st.used_current, 2u * MiB);
    print_stats("an IPC pool", r);
    ck_assert_ok(cuabi_buffer_free_async(b, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Printed, not asserted here: bench/bench_pool is the measurement. */
START_TEST(query_cost_report)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_device_default(&r, dev));
    uint64_t v;
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    enum { N = 100000 };
    double t0 = now();
    for (int i = 0; i < N; i++)
        ck_assert_ok(cuabi_pool_get_attribute(&v, r, CUABI_POOL_USED_MEM_CURRENT));
    double t1 = now();
    for (int i = 0; i < N / 10; i++)
        ck_assert_ok(cuabi_pool_stats_get(&st, r));
    double t2 = now();
    printf("one pool attribute: %.0f ns; the whole summary: %.0f ns\n", (t1 - t0) / N * 1e9,
           (t2 - t1) / (N / 10) * 1e9);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("gpu_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, statistics_move_with_allocations);
    tcase_add_test(tc, reuse_policies_and_maximum_size);
    tcase_add_test(tc, pools_of_a_location);
    tcase_add_test(tc, ipc_pool_summary);
    tcase_add_test(tc, query_cost_report);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    cuabi_test_require_gpu();
    cuabi_test_device_ordinal();
    return cuabi_test_run(suite());
}
