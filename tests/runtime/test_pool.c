/* Pool statistics and attributes against the fake driver (fake_memory.h
 * keeps per-pool figures that follow its allocations): attributes read and
 * set, the high-water marks and their reset, the one-call summary and its
 * text, the pools of a location (device, host, NUMA node; a driver without
 * host pools; host pools opened to the resource's device, which the fake
 * requires of a device memset or copy there), the maximum size of created
 * pools, pools created in host memory (HOST, HOST_NUMA), and every
 * refusal. */
#include "testutil.h"
#include "fake_multigpu.h"
#include "runtime/memory.h"

static cuabi_device *dev0, *dev1;
static cuabi_stream *s0;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&s0, dev0, NULL));
}
static void teardown(void)
{
    cuabi_stream_release(s0);
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static uint64_t attr(cuabi_memory_resource *r, cuabi_pool_attribute a)
{
    uint64_t v = 12345;
    ck_assert_ok(cuabi_pool_get_attribute(&v, r, a));
    return v;
}

START_TEST(statistics_follow_allocations)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev0, NULL));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 0);
    cuabi_buffer *a, *b;
    ck_assert_ok(cuabi_buffer_allocate(&a, r, 1 << 20, 0, s0));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 3 << 20, 0, s0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 4u << 20);
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 4u << 20);
    ck_assert_uint_ge(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), 4u << 20);
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_CURRENT), 1u << 20);
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 4u << 20);   /* the mark stays */
    ck_assert_ok(cuabi_pool_reset_high_water(r));
    ck_assert_uint_eq(attr(r, CUABI_POOL_USED_MEM_HIGH), 1u << 20);   /* back to current */
    ck_assert_uint_ge(attr(r, CUABI_POOL_RESERVED_MEM_HIGH), 1u << 20);
    /* a trim lowers what the pool holds, not below what is used */
    ck_assert_ok(cuabi_memory_resource_trim(r, 0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_RESERVED_MEM_CURRENT), 1u << 20);
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(attributes_set_and_refused)
{
    cuabi_memory_resource *r;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.release_threshold = 1 << 30;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev0, &o));
    ck_assert_uint_eq(attr(r, CUABI_POOL_RELEASE_THRESHOLD), 1u << 30);
    ck_assert_uint_eq(attr(r, CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC), 1);
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC, 0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC), 0);
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES, 0));
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0));
    ck_assert_uint_eq(attr(r, CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES), 0);
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_RELEASE_THRESHOLD, UINT64_MAX));
    ck_assert_uint_eq(attr(r, CUABI_POOL_RELEASE_THRESHOLD), UINT64_MAX);
    ck_assert_ok(cuabi_pool_set_attribute(r, CUABI_POOL_USED_MEM_HIGH, 0));
    ck_assert_status(cuabi_pool_set_attribute(r, CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC, 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("0 or 1");
    ck_assert_status(cuabi_pool_set_attribute(r, CUABI_POOL_USED_MEM_HIGH, 5),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("high-water");
    ck_assert_status(cuabi_pool_set_attribute(r, CUABI_POOL_USED_MEM_CURRENT, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("read only");
    ck_assert_status(cuabi_pool_set_attribute(r, (cuabi_pool_attribute)0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    uint64_t v = 7;
    ck_assert_status(cuabi_pool_get_attribute(&v, r, (cuabi_pool_attribute)9),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(v, 0);
    ck_assert_status(cuabi_pool_get_attribute(NULL, r, CUABI_POOL_USED_MEM_HIGH),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_pool_get_attribute(&v, NULL, CUABI_POOL_USED_MEM_HIGH),
                     CUABI_ERROR_INVALID_HANDLE);
    /* resources that are not pools */
    cuabi_memory_resource *h, *m;
    ck_assert_ok(cuabi_memory_resource_host(&h));
    ck_assert_ok(cuabi_memory_resource_managed(&m, dev0));
    ck_assert_status(cuabi_pool_get_attribute(&v, h, CUABI_POOL_USED_MEM_HIGH),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("not a memory pool");
    ck_assert_status(cuabi_pool_reset_high_water(m), CUABI_ERROR_NOT_SUPPORTED);
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_status(cuabi_pool_stats_get(&st, h), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_memory_resource_release(h));
    ck_assert_ok(cuabi_memory_resource_release(m));
    /* the driver refusing */
    cuabi__fault_arm("cuMemPoolGetAttribute", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_pool_get_attribute(&v, r, CUABI_POOL_USED_MEM_HIGH), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuMemPoolGetAttribute");
    cuabi__fault_arm("cuMemPoolGetAttribute", 5, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_pool_stats_get(&st, r), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(summary_and_text)
{
    cuabi_memory_resource *r, *dflt;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.max_size = 1ull << 32;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev1, &o));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 3 << 20, 0, NULL));
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_uint_eq(st.used_current, 3u << 20);
    ck_assert_uint_eq(st.used_high, 3u << 20);
    ck_assert_uint_eq(st.reserved_current, 3u << 20);
    ck_assert_uint_eq(st.release_threshold, UINT64_MAX);
    ck_assert_int_eq(st.reuse_follow_event_dependencies, 1);
    ck_assert_int_eq(st.reuse_allow_opportunistic, 1);
    ck_assert_int_eq(st.reuse_allow_internal_dependencies, 1);
    ck_assert_uint_eq(st.max_size, 1ull << 32);
    ck_assert_int_eq(st.location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_eq(st.location_id, 1);
    ck_assert_int_eq(st.owned, 1);
    ck_assert_int_eq(st.ipc, 0);
    char text[512];
    size_t n = sizeof text;
    ck_assert_ok(cuabi_pool_stats_format(text, &n, &st));
    ck_assert_uint_eq(n, strlen(text) + 1);
    ck_assert_msg(strstr(text, "pool device 1 (owned): reserved 3.0 MiB (high 3.0 MiB), used "
                               "3.0 MiB (high 3.0 MiB), release threshold keep all, max size "
                               "4.0 GiB, reuse: follow-events on") != NULL, "%s", text);
    /* the size asked first */
    size_t need = 0;
    ck_assert_status(cuabi_pool_stats_format(NULL, &need, &st), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(need, n);
    size_t small = 10;
    ck_assert_status(cuabi_pool_stats_format(text, &small, &st), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(small, n);
    ck_assert_status(cuabi_pool_stats_format(NULL, &small, &st), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_pool_stats_format(text, NULL, &st), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_pool_stats bad = st;
    bad.version = 0;
    ck_assert_status(cuabi_pool_stats_format(text, &n, &bad), CUABI_ERROR_INVALID_VERSION);
    /* the default pool: not owned, the driver's maximum; small figures */
    ck_assert_ok(cuabi_memory_resource_device_default(&dflt, dev0));
    ck_assert_ok(cuabi_pool_set_attribute(dflt, CUABI_POOL_RELEASE_THRESHOLD, 1536));
    ck_assert_ok(cuabi_pool_stats_get(&st, dflt));
    ck_assert_int_eq(st.owned, 0);
    ck_assert_uint_eq(st.max_size, 0);
    n = sizeof text;
    ck_assert_ok(cuabi_pool_stats_format(text, &n, &st));
    ck_assert_msg(strstr(text, "pool device 0: reserved 0 B") && strstr(text, "threshold 1.5 KiB") &&
                  strstr(text, "max size driver default"), "%s", text);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(dflt));
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* an IPC pool says so, and its maximum */
    cuabi_ipc_pool_options io = CUABI_IPC_POOL_OPTIONS_INIT;
    io.max_size = 1 << 30;
    ck_assert_ok(cuabi_ipc_pool_create(&r, dev0, &io));
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_int_eq(st.ipc, 1);
    ck_assert_uint_eq(st.max_size, 1u << 30);
    n = sizeof text;
    ck_assert_ok(cuabi_pool_stats_format(text, &n, &st));
    ck_assert_msg(strstr(text, "(IPC) (owned)") != NULL, "%s", text);
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* pool options of version 1 (no max_size) still work */
    cuabi_memory_pool_options o1;
    ck_assert_ok(cuabi_memory_pool_options_init(&o1, 1));
    o1.max_size = 99;    /* not read: version 1 has no such field */
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev0, &o1));
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_uint_eq(st.max_size, 0);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(pools_of_a_location)
{
    cuabi_memory_resource *r, *d0;
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 1, CUABI_POOL_CURRENT));
    uintptr_t raw;
    ck_assert_ok(cuabi_memory_resource_pool(&raw, r));
    ck_assert_uint_eq(raw, (uintptr_t)&fake_default_pool_token[1]);
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 0, CUABI_POOL_DEFAULT));
    ck_assert_ok(cuabi_memory_resource_device_default(&d0, dev0));
    uintptr_t raw0;
    ck_assert_ok(cuabi_memory_resource_pool(&raw0, d0));
    ck_assert_ok(cuabi_memory_resource_pool(&raw, r));
    ck_assert_uint_eq(raw, raw0);
    ck_assert_ok(cuabi_memory_resource_release(d0));
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* host pools: pinned memory, stream-ordered */
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_HOST_NUMA, 1, CUABI_POOL_DEFAULT));
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_memory_resource_kind(&k, r));
    ck_assert_int_eq(k, CUABI_MEMORY_PINNED);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 4096, 0, s0));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0x7e, 1, 4096, s0));   /* the device may use it */
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_int_eq(st.location_type, CUABI_LOCATION_HOST_NUMA);
    ck_assert_int_eq(st.location_id, 1);
    ck_assert_uint_eq(st.used_current, 4096);
    ck_assert_int_eq(st.owned, 0);
    char text[512];
    size_t n = sizeof text;
    ck_assert_ok(cuabi_pool_stats_format(text, &n, &st));
    ck_assert_msg(strstr(text, "pool host NUMA node 1:") != NULL, "%s", text);
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_HOST, 7, CUABI_POOL_CURRENT));
    ck_assert_ok(cuabi_pool_stats_get(&st, r));
    ck_assert_int_eq(st.location_type, CUABI_LOCATION_HOST);
    ck_assert_int_eq(st.location_id, 0);
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* refusals */
    r = (void *)1;
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_HOST_NUMA_CURRENT, 0,
                                            CUABI_POOL_CURRENT), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, -1,
                                            CUABI_POOL_CURRENT), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 0,
                                            (cuabi_pool_which)3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 9,
                                            CUABI_POOL_CURRENT), CUABI_ERROR_CUDA);
    ck_assert_status(cuabi_pool_at_location(&r, NULL, CUABI_LOCATION_DEVICE, 0,
                                            CUABI_POOL_CURRENT), CUABI_ERROR_INVALID_HANDLE);
    /* a driver before CUDA 13: device pools through the older calls, no host pools */
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemGetMemPool = NULL;
    d->cuMemGetDefaultMemPool = NULL;
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 1, CUABI_POOL_CURRENT));
    ck_assert_ok(cuabi_memory_resource_pool(&raw, r));
    ck_assert_uint_eq(raw, (uintptr_t)&fake_default_pool_token[1]);
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 1, CUABI_POOL_DEFAULT));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_HOST, 0, CUABI_POOL_CURRENT),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuMemGetMemPool");
}
END_TEST

/* Host pools give the devices no access of their own (CUDA 13; an H100
 * refused a memset on such memory): cuabi_pool_at_location grants the
 * resource's device read-write access when it lacks it, asking first, and
 * a refused grant is a clear error that leaves nothing behind. */
static CUresult CUDAAPI refuse_set_access(CUmemoryPool p, const CUmemAccessDesc *m, size_t n)
{
    (void)p, (void)m, (void)n;
    return CUDA_ERROR_NOT_PERMITTED;
}
static CUresult CUDAAPI refuse_get_access(CUmemAccess_flags *f, CUmemoryPool p,
                                          CUmemLocation *loc)
{
    (void)f, (void)p, (void)loc;
    return CUDA_ERROR_INVALID_VALUE;
}

START_TEST(host_pools_open_to_the_device)
{
    const cuabi_location_type types[2] = { CUABI_LOCATION_HOST_NUMA, CUABI_LOCATION_HOST };
    const int slot[2] = { 2, 0 };   /* fake_host_pool_token: NUMA node 1, the host */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fake_host_pool_access[slot[i]][0], CU_MEM_ACCESS_FLAGS_PROT_NONE);
        int grants = fake_host_pool_set_calls;
        cuabi_memory_resource *r;
        ck_assert_ok(cuabi_pool_at_location(&r, dev0, types[i], 1, CUABI_POOL_DEFAULT));
        ck_assert_int_eq(fake_host_pool_set_calls, grants + 1);
        ck_assert_int_eq(fake_host_pool_access[slot[i]][0], CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        cuabi_peer_access acc = CUABI_PEER_ACCESS_NONE;
        ck_assert_ok(cuabi_peer_get_pool_access(&acc, r, dev0));
        ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
        /* only the resource's device: device 1 was not asked for */
        ck_assert_ok(cuabi_peer_get_pool_access(&acc, r, dev1));
        ck_assert_int_eq(acc, CUABI_PEER_ACCESS_NONE);
        /* the device's work on the pool's memory: memset, copies both ways */
        cuabi_buffer *b;
        ck_assert_ok(cuabi_buffer_allocate(&b, r, 4096, 0, s0));
        ck_assert_ok(cuabi_buffer_memset(b, 0, 0x5a, 1, 4096, s0));
        ck_assert_ok(cuabi_buffer_memset(b, 64, 0x01020304u, 4, 4, s0));
        uint8_t in[32], out[4096];
        for (int k = 0; k < 32; k++)
            in[k] = (uint8_t)(k * 7 + 1);
        ck_assert_ok(cuabi_buffer_copy_from_host(b, 1024, in, sizeof in, s0));
        ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, sizeof out, s0));
        ck_assert_ok(cuabi_stream_synchronize(s0));
        ck_assert_uint_eq(out[0], 0x5a);
        ck_assert_uint_eq(out[4095], 0x5a);
        ck_assert_uint_eq(out[64], 0x04);
        ck_assert_uint_eq(out[79], 0x01);
        ck_assert_uint_eq(out[80], 0x5a);
        ck_assert_int_eq(memcmp(out + 1024, in, sizeof in), 0);
        /* a second resource over the same pool asks, finds it, sets nothing */
        cuabi_memory_resource *again;
        ck_assert_ok(cuabi_pool_at_location(&again, dev0, types[i], 1, CUABI_POOL_CURRENT));
        ck_assert_int_eq(fake_host_pool_set_calls, grants + 1);
        ck_assert_ok(cuabi_memory_resource_release(again));
        /* the fake refuses device work where the access is missing (what
         * the H100 did before the fix) */
        fake_host_pool_access[slot[i]][0] = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        ck_assert_status(cuabi_buffer_memset(b, 0, 0, 1, 16, s0), CUABI_ERROR_CUDA);
        ck_assert_status(cuabi_buffer_copy_to_host(out, b, 0, 16, s0), CUABI_ERROR_CUDA);
        /* a resource for device 1 opens the pool to device 1 as well */
        cuabi_memory_resource *r1;
        ck_assert_ok(cuabi_pool_at_location(&r1, dev1, types[i], 1, CUABI_POOL_DEFAULT));
        ck_assert_int_eq(fake_host_pool_access[slot[i]][1], CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        ck_assert_ok(cuabi_memory_resource_release(r1));
        ck_assert_ok(cuabi_buffer_free_async(b, s0));
        ck_assert_ok(cuabi_memory_resource_release(r));
    }
    /* refusals name the call and the pool; no resource is made */
    ck_assert_uint_eq(cuabi__handle_live_count(), 3);   /* dev0, dev1, s0 */
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemPoolSetAccess = refuse_set_access;
    cuabi_memory_resource *r = (void *)1;
    ck_assert_status(cuabi_pool_at_location(&r, dev1, CUABI_LOCATION_HOST_NUMA, 2,
                                            CUABI_POOL_DEFAULT), CUABI_ERROR_CUDA);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_NOT_PERMITTED);
    ck_assert_error_mentions("cuabi_pool_at_location");
    ck_assert_error_mentions("cuMemPoolSetAccess");
    ck_assert_error_mentions("host NUMA node 2 pool");
    ck_assert_error_mentions("device 1");
    ck_assert_uint_eq(cuabi__handle_live_count(), 3);
    d->cuMemPoolGetAccess = refuse_get_access;
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_HOST, 0,
                                            CUABI_POOL_CURRENT), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuMemPoolGetAccess");
    ck_assert_error_mentions("the host pool");
    /* device pools are the device's own: no access call at all */
    ck_assert_ok(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 0, CUABI_POOL_CURRENT));
    ck_assert_ok(cuabi_memory_resource_release(r));
    d->cuMemPoolGetAccess = NULL;
    ck_assert_status(cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_HOST, 0,
                                            CUABI_POOL_CURRENT),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuMemPoolGetAccess");
    ck_assert_uint_eq(cuabi__handle_live_count(), 3);
}
END_TEST

/* Pools created in host memory (cuabi_memory_pool_options version 3):
 * HOST and HOST_NUMA, what the driver was asked for, the kind of the
 * resource and its buffers, the device's access (granted at creation: the
 * fake refuses device work on host-pool memory without it), stream-ordered
 * allocation read through the host pointer, statistics, max_size, the
 * refusals, and older struct versions that know no location. */
START_TEST(created_host_pools)
{
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    const cuabi_location_type types[2] = { CUABI_LOCATION_HOST, CUABI_LOCATION_HOST_NUMA };
    for (int i = 0; i < 2; i++) {
        cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
        ck_assert_uint_eq(o.version, 3);
        ck_assert_int_eq(o.location_type, CUABI_LOCATION_DEVICE);
        o.location_type = types[i];
        o.location_id = 1;              /* the node; ignored for HOST */
        o.max_size = 32 << 20;
        o.release_threshold = 4096;
        int grants = fake_host_pool_set_calls;
        cuabi_memory_resource *r;
        ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev1, &o));
        ck_assert_int_eq(fake_live_pools, pools + 1);
        ck_assert_int_eq(fake_last_pool_props.location.type, (CUmemLocationType)types[i]);
        ck_assert_int_eq(fake_last_pool_props.location.id, i == 0 ? 0 : 1);
        ck_assert_int_eq(fake_last_pool_props.handleTypes, CU_MEM_HANDLE_TYPE_NONE);
        ck_assert_int_eq(fake_last_pool_props.allocType, CU_MEM_ALLOCATION_TYPE_PINNED);
        ck_assert_uint_eq(fake_last_pool_props.maxSize, 32 << 20);
        ck_assert_uint_eq(fake_last_threshold, 4096);
        /* device 1 was given read-write access (asked, then granted once) */
        ck_assert_int_eq(fake_host_pool_set_calls, grants + 1);
        cuabi_peer_access acc = CUABI_PEER_ACCESS_NONE;
        ck_assert_ok(cuabi_peer_get_pool_access(&acc, r, dev1));
        ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
        ck_assert_ok(cuabi_peer_get_pool_access(&acc, r, dev0));
        ck_assert_int_eq(acc, CUABI_PEER_ACCESS_NONE);
        cuabi_memory_kind kind;
        ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
        ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
        cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
        ck_assert_ok(cuabi_pool_stats_get(&st, r));
        ck_assert_int_eq(st.location_type, types[i]);
        ck_assert_int_eq(st.location_id, i == 0 ? 0 : 1);
        ck_assert_int_eq(st.owned, 1);
        ck_assert_int_eq(st.ipc, 0);
        ck_assert_uint_eq(st.max_size, 32 << 20);
        uintptr_t raw;
        ck_assert_ok(cuabi_memory_resource_pool(&raw, r));
        ck_assert_uint_ne(raw, 0);
        /* stream-ordered buffers of pinned memory; the device writes, the
         * host reads the pointer itself */
        cuabi_stream *s1;
        ck_assert_ok(cuabi_stream_create(&s1, dev1, NULL));
        cuabi_buffer *b;
        ck_assert_ok(cuabi_buffer_allocate(&b, r, 1000, 0, s1));
        ck_assert_ok(cuabi_buffer_kind(&kind, b));
        ck_assert_int_eq(kind, CUABI_MEMORY_PINNED);
        ck_assert_ok(cuabi_buffer_memset(b, 0, 0x77, 1, 1000, s1));
        ck_assert_ok(cuabi_stream_synchronize(s1));
        uintptr_t p;
        ck_assert_ok(cuabi_buffer_pointer(&p, b));
        ck_assert_uint_eq(((uint8_t *)p)[0], 0x77);
        ck_assert_uint_eq(((uint8_t *)p)[999], 0x77);
        ((uint8_t *)p)[5] = 9;             /* and the host writes, the device reads */
        uint8_t back[8];
        ck_assert_ok(cuabi_buffer_copy_to_host(back, b, 0, sizeof back, s1));
        ck_assert_ok(cuabi_stream_synchronize(s1));
        ck_assert_uint_eq(back[5], 9);
        ck_assert_ok(cuabi_pool_stats_get(&st, r));
        ck_assert_uint_eq(st.used_current, 1000);
        /* DLPack sees host memory the device can reach (kDLCUDAHost) */
        cuabi_view *v;
        int64_t shape[1] = { 1000 };
        ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 1, shape, NULL, 0));
        DLManagedTensorVersioned *t;
        ck_assert_ok(cuabi_view_to_dlpack_versioned(&t, v));
        ck_assert_int_eq(t->dl_tensor.device.device_type, kDLCUDAHost);
        t->deleter(t);
        ck_assert_ok(cuabi_view_release(v));
        /* without the grant the fake refuses device work, as an H100 does */
        fake_host_pool_access[fake_host_pool_index((CUmemoryPool)raw)][1] =
            CU_MEM_ACCESS_FLAGS_PROT_NONE;
        ck_assert_status(cuabi_buffer_memset(b, 0, 0, 1, 16, s1), CUABI_ERROR_CUDA);
        ck_assert_ok(cuabi_buffer_free_async(b, s1));
        ck_assert_ok(cuabi_stream_release(s1));
        ck_assert_ok(cuabi_memory_resource_release(r));
        ck_assert_int_eq(fake_live_pools, pools);   /* owned: destroyed with it */
    }
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(created_host_pool_refusals)
{
    size_t live = cuabi__handle_live_count();
    int pools = fake_live_pools;
    cuabi_memory_resource *r = (void *)1;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    const int bad_types[4] = { CUABI_LOCATION_NONE, CUABI_LOCATION_HOST_NUMA_CURRENT, 99, -1 };
    for (int i = 0; i < 4; i++) {
        o.location_type = (cuabi_location_type)bad_types[i];
        ck_assert_status(cuabi_memory_resource_pool_create(&r, dev0, &o),
                         CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_null(r);
        ck_assert_error_mentions("cuabi_memory_resource_pool_create");
        ck_assert_error_mentions("location_type");
    }
    o.location_type = CUABI_LOCATION_HOST_NUMA;
    o.location_id = -1;
    ck_assert_status(cuabi_memory_resource_pool_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a NUMA node");
    /* a node the host does not have: the driver's refusal, explained */
    o.location_id = FAKE_NUMA_NODES;
    ck_assert_status(cuabi_memory_resource_pool_create(&r, dev0, &o), CUABI_ERROR_CUDA);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    ck_assert_error_mentions("cuMemPoolCreate");
    ck_assert_error_mentions("host NUMA node 2");
    ck_assert_error_mentions("HOST_NUMA_MEMORY_POOLS_SUPPORTED");
    /* a refused grant destroys the pool again and names the call */
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemPoolSetAccess = refuse_set_access;
    o.location_id = 0;
    ck_assert_status(cuabi_memory_resource_pool_create(&r, dev1, &o), CUABI_ERROR_CUDA);
    ck_assert_ptr_null(r);
    ck_assert_error_mentions("cuMemPoolSetAccess");
    ck_assert_error_mentions("device 1");
    ck_assert_error_mentions("host NUMA node 0 pool");
    ck_assert_int_eq(fake_live_pools, pools);
    d->cuMemPoolSetAccess = fake_cuMemPoolSetAccess;
    /* a driver without cuMemPoolGetAccess: nothing is made */
    d->cuMemPoolGetAccess = NULL;
    o.location_type = CUABI_LOCATION_HOST;
    ck_assert_status(cuabi_memory_resource_pool_create(&r, dev1, &o),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_int_eq(fake_live_pools, pools);
    d->cuMemPoolGetAccess = fake_cuMemPoolGetAccess;
    /* older callers pass shorter structs: what lies past them is not read
     * (here: a location that would be refused), so the pool is the device's */
    for (unsigned v = 1; v <= 2; v++) {
        cuabi_memory_pool_options old;
        ck_assert_ok(cuabi_memory_pool_options_init(&old, v));
        ck_assert_uint_eq(old.version, v);
        old.location_type = (cuabi_location_type)99;
        old.location_id = -5;
        old.max_size = 1 << 20;            /* read from version 2 only */
        ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev0, &old));
        ck_assert_int_eq(fake_last_pool_props.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
        ck_assert_int_eq(fake_last_pool_props.location.id, 0);
        ck_assert_uint_eq(fake_last_pool_props.maxSize, v >= 2 ? 1 << 20 : 0);
        cuabi_memory_kind kind;
        ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
        ck_assert_int_eq(kind, CUABI_MEMORY_DEVICE);
        cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
        ck_assert_ok(cuabi_pool_stats_get(&st, r));
        ck_assert_int_eq(st.location_type, CUABI_LOCATION_DEVICE);
        ck_assert_ok(cuabi_memory_resource_release(r));
    }
    /* version 3 with the default location: the device, location_id ignored */
    cuabi_memory_pool_options dflt = CUABI_MEMORY_POOL_OPTIONS_INIT;
    dflt.location_id = 7;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev1, &dflt));
    ck_assert_int_eq(fake_last_pool_props.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_last_pool_props.location.id, 1);
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_live_pools, pools);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, statistics_follow_allocations);
    tcase_add_test(tc, attributes_set_and_refused);
    tcase_add_test(tc, summary_and_text);
    tcase_add_test(tc, pools_of_a_location);
    tcase_add_test(tc, host_pools_open_to_the_device);
    tcase_add_test(tc, created_host_pools);
    tcase_add_test(tc, created_host_pool_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
