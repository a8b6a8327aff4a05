/* Green contexts against the fake driver (tests/fixtures/fake_green.h, over
 * the graph fake so that kernels run on the host and captures make
 * graphs): SM resources and their splits as the driver rounds them, green
 * contexts of one or several groups, their streams and lifetimes (a stream
 * keeps its green context), every launch path on a green stream (one-shot,
 * prepared, with attributes, captured), the cooperative check against the
 * partition's SMs, synchronize from several threads (never current on two
 * at once), events, live occupancy per partition, and every refusal. */
#include <pthread.h>

#include "testutil.h"
#include "fake_graph.h"
#include "fake_green.h"
#include "runtime/graph.h"
#include "runtime/occupancy.h"

static cuabi_device *dev, *dev1;
static cuabi_memory_resource *pool;
static cuabi_objcode *code;
static cuabi_kernel *kern;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_green_install();
    fake_kernel_implement("add", fake_impl_add_i64);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin",
             cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(pool);
    cuabi_device_release(dev1);
    cuabi_device_release(dev);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    ck_assert_msg(cuabi__handle_live_count() == 0, "%zu handles leaked",
                  cuabi__handle_live_count());
    ck_assert_int_eq(fake_live_greens, 0);
    ck_assert_int_eq(fake_green_stream_leaks, 0);
    ck_assert_int_eq(fake_live_streams, 0);
    ck_assert_int_eq(fake_live_graphs, 0);
    ck_assert_int_eq(fake_live_execs, 0);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_int_eq(fake_live_libraries, 0);
    ck_assert_int_eq(atomic_load(&fake_green_overlaps), 0);
    fake_green_reset();
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* ------------------------------------------------------------ helpers */

static cuabi_sm_resource *device_sms(cuabi_device *d)
{
    cuabi_sm_resource *r;
    ck_assert_ok(cuabi_device_sm_resource(&r, d));
    return r;
}

static cuabi_sm_resource_info info_of(cuabi_sm_resource *r)
{
    cuabi_sm_resource_info i = CUABI_SM_RESOURCE_INFO_INIT;
    ck_assert_ok(cuabi_sm_resource_get_info(&i, r));
    return i;
}

/* Split the device's SMs into up to `want` groups of at least `min` SMs. */
static size_t split(cuabi_sm_resource **groups, size_t want, cuabi_sm_resource **rem,
                    unsigned min, unsigned flags)
{
    cuabi_sm_resource *all = device_sms(dev);
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    o.min_count = min;
    o.flags = flags;
    size_t n = want;
    ck_assert_ok(cuabi_sm_resource_split(groups, &n, rem, all, &o));
    cuabi_sm_resource_release(all);
    return n;
}

static void release_all(cuabi_sm_resource **r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (r[i])
            cuabi_sm_resource_release(r[i]);
}

/* A green context of one group of at least `min` SMs. */
static cuabi_green_ctx *green_of(unsigned min)
{
    cuabi_sm_resource *g[1];
    ck_assert_uint_eq(split(g, 1, NULL, min, 0), 1);
    cuabi_green_ctx *green;
    ck_assert_ok(cuabi_green_ctx_create(&green, dev, g, 1));
    cuabi_sm_resource_release(g[0]);
    return green;
}

static cuabi_buffer *ints(size_t n, int64_t first, cuabi_stream *s)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, n * 8, 0, s));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    for (size_t i = 0; i < n; i++)
        ((int64_t *)p)[i] = first + (int64_t)i;
    return b;
}

static int64_t at(cuabi_buffer *b, size_t i)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    return ((int64_t *)p)[i];
}

static cuabi_argpack *add_pack(cuabi_buffer *out, cuabi_buffer *in, uint64_t n)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, out));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, n));
    return p;
}

/* ------------------------------------------------------------ SM resources */

START_TEST(device_resource_reports_the_driver)
{
    cuabi_sm_resource *all = device_sms(dev);
    cuabi_sm_resource_info i = info_of(all);
    ck_assert_int_eq(i.sm_count, 132);
    ck_assert_int_eq(i.min_partition_size, 8);
    ck_assert_int_eq(i.coscheduled_alignment, 8);
    ck_assert_int_eq(i.kind, CUABI_SM_RESOURCE_DEVICE);
    ck_assert_int_eq(i.ordinal, 0);
    ck_assert_uint_eq(i.split_id, 0);
    ck_assert_int_eq(i.index, -1);
    cuabi_device *d = NULL;
    ck_assert_ok(cuabi_sm_resource_device(&d, all));
    ck_assert_ptr_eq(d, dev);
    /* the resource keeps its device alive */
    cuabi_sm_resource *all1 = device_sms(dev1);
    ck_assert_int_eq(info_of(all1).ordinal, 1);
    cuabi_sm_resource_release(all1);
    /* refusals */
    cuabi_sm_resource_info bad = CUABI_SM_RESOURCE_INFO_INIT;
    bad.version = 0;
    ck_assert_status(cuabi_sm_resource_get_info(&bad, all), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_sm_resource_get_info(NULL, all), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_sm_resource_get_info(&i, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_sm_resource_get_info(&i, (cuabi_sm_resource *)dev),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_sm_resource_device(NULL, all), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_device_sm_resource(NULL, dev), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_sm_resource *r = (cuabi_sm_resource *)1;
    ck_assert_status(cuabi_device_sm_resource(&r, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(r);
    cuabi_sm_resource_release(all);
    ck_assert_status(cuabi_sm_resource_get_info(&i, all), CUABI_ERROR_INVALID_HANDLE);
    /* a driver without the entry point, one that does not support them */
    cuabi__driver_for_test()->cuDeviceGetDevResource = NULL;
    ck_assert_status(cuabi_device_sm_resource(&r, dev), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuDeviceGetDevResource");
    cuabi__driver_for_test()->cuDeviceGetDevResource = fake_cuDeviceGetDevResource;
    cuabi__fault_arm("cuDeviceGetDevResource", 1, false, CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_device_sm_resource(&r, dev), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("does not support green contexts");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_NOT_SUPPORTED);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(splits_round_as_the_driver_does)
{
    cuabi_sm_resource *all = device_sms(dev);
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    size_t n = 0;
    /* dry runs: groups of 8 (the minimum), of 16 for 10, of 10 when fine */
    ck_assert_ok(cuabi_sm_resource_split(NULL, &n, NULL, all, NULL));
    ck_assert_uint_eq(n, 16);   /* the fake divides; an H100 made 15 (test_gpu_green) */
    o.min_count = 10;
    ck_assert_ok(cuabi_sm_resource_split(NULL, &n, NULL, all, &o));
    ck_assert_uint_eq(n, 8);
    o.flags = CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING;
    ck_assert_ok(cuabi_sm_resource_split(NULL, &n, NULL, all, &o));
    ck_assert_uint_eq(n, 13);
    /* two groups of (10 -> 16) and the remainder */
    cuabi_sm_resource *g[20], *rem;
    o.flags = 0;
    n = 2;
    ck_assert_ok(cuabi_sm_resource_split(g, &n, &rem, all, &o));
    ck_assert_uint_eq(n, 2);
    cuabi_sm_resource_info i0 = info_of(g[0]), i1 = info_of(g[1]), ir = info_of(rem);
    ck_assert_int_eq(i0.sm_count, 16);
    ck_assert_int_eq(i1.sm_count, 16);
    ck_assert_int_eq(ir.sm_count, 100);
    /* the driver leaves a split's minimum and alignment unset: so do we */
    ck_assert_int_eq(i0.min_partition_size, 0);
    ck_assert_int_eq(i0.coscheduled_alignment, 0);
    ck_assert_int_eq(i0.kind, CUABI_SM_RESOURCE_GROUP);
    ck_assert_int_eq(ir.kind, CUABI_SM_RESOURCE_REMAINDER);
    ck_assert_int_eq(i0.index, 0);
    ck_assert_int_eq(i1.index, 1);
    ck_assert_int_eq(ir.index, -1);
    ck_assert(i0.split_id != 0 && i0.split_id == i1.split_id && i0.split_id == ir.split_id);
    release_all(g, 2);
    cuabi_sm_resource_release(rem);
    /* asking for more groups than fit: as many as fit; remainder not asked */
    o.min_count = 16;
    n = 20;
    ck_assert_ok(cuabi_sm_resource_split(g, &n, NULL, all, &o));
    ck_assert_uint_eq(n, 8);
    for (size_t k = n; k < 20; k++)
        ck_assert_ptr_null(g[k]);
    uint64_t id = info_of(g[0]).split_id;
    release_all(g, n);
    /* a second split has another id; the whole device leaves no remainder */
    o.min_count = 132;
    n = 1;
    rem = (cuabi_sm_resource *)1;
    ck_assert_ok(cuabi_sm_resource_split(g, &n, &rem, all, &o));
    ck_assert_uint_eq(n, 1);
    ck_assert_ptr_null(rem);
    ck_assert_int_eq(info_of(g[0]).sm_count, 132);
    ck_assert(info_of(g[0]).split_id != id);
    cuabi_sm_resource_release(g[0]);
    /* groups for the largest clusters: the same rounding here */
    o.min_count = 20;
    o.flags = CUABI_SM_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
    n = 1;
    ck_assert_ok(cuabi_sm_resource_split(g, &n, NULL, all, &o));
    ck_assert_int_eq(info_of(g[0]).sm_count, 24);
    cuabi_sm_resource_release(g[0]);
    cuabi_sm_resource_release(all);
}
END_TEST

START_TEST(split_refusals)
{
    cuabi_sm_resource *all = device_sms(dev), *g[4], *rem;
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    size_t n = 2;
    ck_assert_status(cuabi_sm_resource_split(g, NULL, NULL, all, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    n = 0;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, all, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    n = 1025;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, all, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("1 to 1024");
    n = 2;
    o.min_count = 133;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, all, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("132 SMs");
    ck_assert_ptr_null(g[0]);
    o.min_count = 8;
    o.flags = 4;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, all, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.flags = 0;
    o.version = 0;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, all, &o), CUABI_ERROR_INVALID_VERSION);
    o.version = CUABI_SM_SPLIT_OPTIONS_VERSION;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, NULL, &o), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, (cuabi_sm_resource *)dev, &o),
                     CUABI_ERROR_INVALID_HANDLE);
    /* a group or a remainder is not split again */
    ck_assert_ok(cuabi_sm_resource_split(g, &n, &rem, all, &o));
    size_t m = 1;
    cuabi_sm_resource *sub[1];
    ck_assert_status(cuabi_sm_resource_split(sub, &m, NULL, g[0], &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("green context of it");
    ck_assert_status(cuabi_sm_resource_split(sub, &m, NULL, rem, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("remainder");
    release_all(g, n);
    cuabi_sm_resource_release(rem);
    /* the driver's refusal, its missing entry point, a failed allocation */
    n = 2;
    cuabi__fault_arm("cuDevSmResourceSplitByCount", 1, false, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    ck_assert_status(cuabi_sm_resource_split(g, &n, &rem, all, &o), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuDevSmResourceSplitByCount");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ptr_null(g[0]);
    ck_assert_ptr_null(rem);
    ck_assert_uint_eq(n, 2);
    cuabi__driver_for_test()->cuDevSmResourceSplitByCount = NULL;
    ck_assert_status(cuabi_sm_resource_split(g, &n, NULL, all, &o), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    cuabi__driver_for_test()->cuDevSmResourceSplitByCount = fake_cuDevSmResourceSplitByCount;
    for (int k = 1; k <= 4; k++) {
        cuabi__alloc_fail_at(k, false);
        n = 2;
        cuabi_status st = cuabi_sm_resource_split(g, &n, &rem, all, &o);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            release_all(g, n);
            cuabi_sm_resource_release(rem);
            continue;
        }
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(g[0]);
        ck_assert_ptr_null(g[1]);
        ck_assert_ptr_null(rem);
    }
    cuabi_sm_resource_release(all);
}
END_TEST

/* ------------------------------------------------------------ green contexts */

START_TEST(green_contexts_of_groups)
{
    cuabi_sm_resource *g[2], *rem;
    ck_assert_uint_eq(split(g, 2, &rem, 16, 0), 2);
    cuabi_green_ctx *one, *two, *mixed;
    ck_assert_ok(cuabi_green_ctx_create(&one, dev, g, 1));
    ck_assert_ok(cuabi_green_ctx_create(&two, dev, g, 2));
    cuabi_sm_resource *gr[2] = { g[1], rem };
    ck_assert_ok(cuabi_green_ctx_create(&mixed, dev, gr, 2));
    ck_assert_int_eq(fake_live_greens, 3);
    int sms = 0;
    ck_assert_ok(cuabi_green_ctx_sm_count(&sms, one));
    ck_assert_int_eq(sms, 16);
    ck_assert_ok(cuabi_green_ctx_sm_count(&sms, two));
    ck_assert_int_eq(sms, 32);
    ck_assert_ok(cuabi_green_ctx_sm_count(&sms, mixed));
    ck_assert_int_eq(sms, 116);
    /* the driver retains the primary context for each */
    ck_assert_int_eq(fake_ctx_refs[0], 4);
    uintptr_t raw = 0, ctx = 0;
    ck_assert_ok(cuabi_green_ctx_raw(&raw, one));
    ck_assert_ok(cuabi_green_ctx_context(&ctx, one));
    ck_assert(raw != 0 && ctx == raw);   /* the fake's, as the driver's */
    cuabi_device *d = NULL;
    ck_assert_ok(cuabi_green_ctx_device(&d, one));
    ck_assert_ptr_eq(d, dev);
    /* its resource: the partition, with the driver's rules, split again */
    cuabi_sm_resource *mine, *sub[2];
    ck_assert_ok(cuabi_green_ctx_sm_resource(&mine, one));
    cuabi_sm_resource_info i = info_of(mine);
    ck_assert_int_eq(i.sm_count, 16);
    ck_assert_int_eq(i.min_partition_size, 8);
    ck_assert_int_eq(i.kind, CUABI_SM_RESOURCE_GREEN_CTX);
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    size_t n = 2;
    ck_assert_ok(cuabi_sm_resource_split(sub, &n, NULL, mine, &o));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(info_of(sub[0]).sm_count, 8);
    /* a resource taken from a green context keeps it alive */
    cuabi_green_ctx_release(one);
    ck_assert_int_eq(fake_live_greens, 3);
    cuabi_sm_resource_release(mine);
    ck_assert_int_eq(fake_live_greens, 3);   /* the split's groups still hold it */
    cuabi_green_ctx *eight;
    ck_assert_ok(cuabi_green_ctx_create(&eight, dev, sub, 1));
    ck_assert_ok(cuabi_green_ctx_sm_count(&sms, eight));
    ck_assert_int_eq(sms, 8);
    release_all(sub, 2);
    ck_assert_int_eq(fake_live_greens, 3);   /* one released, eight made */
    cuabi_green_ctx_release(eight);
    cuabi_green_ctx_release(two);
    cuabi_green_ctx_release(mixed);
    ck_assert_int_eq(fake_live_greens, 0);
    release_all(g, 2);
    cuabi_sm_resource_release(rem);
}
END_TEST

/* CUDA 13.1's workqueue configurations: the device's (the driver's cap), a
 * green context made with one (limit and scope reach the driver's
 * descriptor, and read back), without one (the device's), every refusal,
 * and a 13.0 driver's refusal of the type as NOT_SUPPORTED. */
START_TEST(workqueue_configurations)
{
    cuabi_workqueue_config wq = CUABI_WORKQUEUE_CONFIG_INIT;
    ck_assert_int_eq(wq.ordinal, -1);
    ck_assert_ok(cuabi_device_workqueue_config(&wq, dev1));
    ck_assert_uint_eq(wq.concurrency_limit, FAKE_GREEN_WQ_LIMIT);
    ck_assert_int_eq(wq.sharing_scope, CUABI_WORKQUEUE_SCOPE_DEVICE_CTX);
    ck_assert_int_eq(wq.ordinal, 1);
    cuabi_sm_resource *g[2], *rem;
    ck_assert_uint_eq(split(g, 2, &rem, 16, 0), 2);
    cuabi_green_ctx *a, *b;
    cuabi_workqueue_config want = CUABI_WORKQUEUE_CONFIG_INIT;
    want.concurrency_limit = 3;
    want.sharing_scope = CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED;
    ck_assert_ok(cuabi_green_ctx_create_with_workqueue(&a, dev, g, 2, &want));
    ck_assert_int_eq(fake_green_last_wq_count, 1);
    ck_assert_uint_eq(fake_green_last_wq_limit, 3);
    ck_assert_int_eq(fake_green_last_wq_scope, 1);
    int sms = 0;
    ck_assert_ok(cuabi_green_ctx_sm_count(&sms, a));
    ck_assert_int_eq(sms, 32);          /* the configuration adds no SMs */
    cuabi_workqueue_config got = CUABI_WORKQUEUE_CONFIG_INIT;
    ck_assert_ok(cuabi_green_ctx_workqueue_config(&got, a));
    ck_assert_uint_eq(got.concurrency_limit, 3);
    ck_assert_int_eq(got.sharing_scope, CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED);
    ck_assert_int_eq(got.ordinal, 0);
    /* NULL: exactly cuabi_green_ctx_create (no configuration given) */
    ck_assert_ok(cuabi_green_ctx_create_with_workqueue(&b, dev, g, 1, NULL));
    ck_assert_int_eq(fake_green_last_wq_count, 0);
    ck_assert_ok(cuabi_green_ctx_workqueue_config(&got, b));
    ck_assert_uint_eq(got.concurrency_limit, FAKE_GREEN_WQ_LIMIT);
    ck_assert_int_eq(got.sharing_scope, CUABI_WORKQUEUE_SCOPE_DEVICE_CTX);
    cuabi_green_ctx_release(b);
    /* refusals, before the driver is asked */
    cuabi_green_ctx *none = (cuabi_green_ctx *)1;
    int descs = fake_green_descs;
    cuabi_workqueue_config bad = want;
    bad.concurrency_limit = 0;
    ck_assert_status(cuabi_green_ctx_create_with_workqueue(&none, dev, g, 2, &bad),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(none);
    ck_assert_ptr_nonnull(strstr(cuabi_last_error()->message, "concurrency_limit is 0"));
    bad = want;
    bad.sharing_scope = (cuabi_workqueue_scope)7;
    ck_assert_status(cuabi_green_ctx_create_with_workqueue(&none, dev, g, 2, &bad),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(cuabi_last_error()->message, "sharing_scope is 7"));
    bad = want;
    bad.version = 99;
    ck_assert_status(cuabi_green_ctx_create_with_workqueue(&none, dev, g, 2, &bad),
                     CUABI_ERROR_INVALID_VERSION);
    ck_assert_ptr_nonnull(strstr(cuabi_last_error()->message, "cuabi_green_ctx_create_with_workqueue"));
    ck_assert_status(cuabi_green_ctx_create_with_workqueue(&none, dev1, g, 2, &want),
                     CUABI_ERROR_INVALID_ARGUMENT);          /* resources of another device */
    ck_assert_int_eq(fake_green_descs, descs);
    ck_assert_status(cuabi_device_workqueue_config(NULL, dev), CUABI_ERROR_INVALID_ARGUMENT);
    bad.version = 0;
    ck_assert_status(cuabi_device_workqueue_config(&bad, dev), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_green_ctx_workqueue_config(&got, NULL), CUABI_ERROR_INVALID_HANDLE);
    /* a CUDA 13.0 driver refuses the type: NOT_SUPPORTED, naming 13.1 */
    fake_green_no_workqueue = true;
    ck_assert_status(cuabi_device_workqueue_config(&got, dev), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(cuabi_last_error()->message, "CUDA 13.1"));
    ck_assert_status(cuabi_green_ctx_workqueue_config(&got, a), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_green_ctx_create_with_workqueue(&none, dev, g, 2, &want),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_null(none);
    ck_assert_int_eq(fake_live_greens, 1);
    fake_green_no_workqueue = false;
    cuabi_green_ctx_release(a);
    release_all(g, 2);
    cuabi_sm_resource_release(rem);
}
END_TEST

START_TEST(green_context_refusals)
{
    cuabi_sm_resource *a[2], *b[2], *all = device_sms(dev), *other = device_sms(dev1);
    ck_assert_uint_eq(split(a, 2, NULL, 8, 0), 2);
    ck_assert_uint_eq(split(b, 2, NULL, 8, 0), 2);
    cuabi_green_ctx *gc = (cuabi_green_ctx *)1;
    ck_assert_status(cuabi_green_ctx_create(NULL, dev, a, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(gc);
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, a, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, a, 1025), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_green_ctx_create(&gc, NULL, a, 1), CUABI_ERROR_INVALID_HANDLE);
    cuabi_sm_resource *nul[1] = { NULL };
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, nul, 1), CUABI_ERROR_INVALID_HANDLE);
    /* groups of two splits, the device's resource with a group, a group twice */
    cuabi_sm_resource *two_splits[2] = { a[0], b[1] };
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, two_splits, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("one split");
    cuabi_sm_resource *with_all[2] = { a[0], all };
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, with_all, 2), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_sm_resource *twice[2] = { a[0], a[0] };
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, twice, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("the same resource");
    /* another device's resource */
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, &other, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    /* one resource alone may be the device's whole */
    ck_assert_ok(cuabi_green_ctx_create(&gc, dev, &all, 1));
    int sms;
    ck_assert_ok(cuabi_green_ctx_sm_count(&sms, gc));
    ck_assert_int_eq(sms, 132);
    cuabi_green_ctx_release(gc);
    /* each driver call failing: nothing left behind */
    static const char *const entries[] = { "cuDevResourceGenerateDesc", "cuGreenCtxCreate",
                                           "cuCtxFromGreenCtx", "cuGreenCtxGetDevResource" };
    for (size_t e = 0; e < sizeof entries / sizeof *entries; e++) {
        cuabi__fault_arm(entries[e], 1, false, CUDA_ERROR_OUT_OF_MEMORY);
        gc = (cuabi_green_ctx *)1;
        cuabi_status st = cuabi_green_ctx_create(&gc, dev, a, 1);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        ck_assert_msg(st == CUABI_ERROR_DEVICE_OUT_OF_MEMORY, "%s: %s", entries[e],
                      cuabi_status_name(st));
        ck_assert_error_mentions(entries[e]);
        ck_assert_ptr_null(gc);
        ck_assert_int_eq(fake_live_greens, 0);
    }
    cuabi__fault_arm("cuGreenCtxCreate", 1, false, CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_green_ctx_create(&gc, dev, a, 1), CUABI_ERROR_NOT_SUPPORTED);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    for (int k = 1; k <= 4; k++) {
        cuabi__alloc_fail_at(k, false);
        cuabi_status st = cuabi_green_ctx_create(&gc, dev, a, 2);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            cuabi_green_ctx_release(gc);
            continue;
        }
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(gc);
        ck_assert_int_eq(fake_live_greens, 0);
    }
    /* queries: NULL outputs, bad handles */
    ck_assert_status(cuabi_green_ctx_sm_count(&sms, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_green_ctx_sm_count(NULL, (cuabi_green_ctx *)dev), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_green_ctx_sm_count(&sms, (cuabi_green_ctx *)dev), CUABI_ERROR_INVALID_HANDLE);
    uintptr_t raw;
    ck_assert_status(cuabi_green_ctx_raw(&raw, (cuabi_green_ctx *)all), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_green_ctx_context(NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_device *d;
    ck_assert_status(cuabi_green_ctx_device(&d, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_sm_resource *r;
    ck_assert_status(cuabi_green_ctx_sm_resource(&r, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_green_ctx_synchronize(NULL), CUABI_ERROR_INVALID_HANDLE);
    release_all(a, 2);
    release_all(b, 2);
    cuabi_sm_resource_release(all);
    cuabi_sm_resource_release(other);
}
END_TEST

/* ------------------------------------------------------------ streams */

START_TEST(green_streams)
{
    cuabi_green_ctx *green = green_of(16);
    cuabi_stream *s, *prio, *plain;
    ck_assert_ok(cuabi_green_ctx_stream_create(&s, green, NULL));
    ck_assert_uint_eq(fake_green_last_stream_flags, CU_STREAM_NON_BLOCKING);
    cuabi_stream_options o = CUABI_STREAM_OPTIONS_INIT;
    o.priority = -3;
    o.flags = CUABI_STREAM_NON_BLOCKING;
    ck_assert_ok(cuabi_green_ctx_stream_create(&prio, green, &o));
    int p = 0;
    ck_assert_ok(cuabi_stream_priority(&p, prio));
    ck_assert_int_eq(p, -3);
    ck_assert_ok(cuabi_stream_create(&plain, dev, NULL));
    /* which green context a stream is of */
    cuabi_green_ctx *of = NULL;
    ck_assert_ok(cuabi_stream_green_ctx(&of, s));
    ck_assert_ptr_eq(of, green);
    of = (cuabi_green_ctx *)1;
    ck_assert_ok(cuabi_stream_green_ctx(&of, plain));
    ck_assert_ptr_null(of);
    cuabi_device *d;
    ck_assert_ok(cuabi_stream_device(&d, s));
    ck_assert_ptr_eq(d, dev);
    int done = 0;
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_stream_query(&done, s));
    ck_assert_int_eq(done, 1);
    /* a stream keeps its green context: released first, it lives on */
    cuabi_green_ctx_release(green);
    ck_assert_int_eq(fake_live_greens, 1);
    ck_assert_ok(cuabi_stream_synchronize(s));
    cuabi_stream_release(prio);
    ck_assert_int_eq(fake_live_greens, 1);
    cuabi_stream_release(s);
    ck_assert_int_eq(fake_live_greens, 0);
    ck_assert_int_eq(fake_green_stream_leaks, 0);
    /* refusals */
    green = green_of(8);
    o.flags = 4;
    ck_assert_status(cuabi_green_ctx_stream_create(&s, green, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.flags = 0;
    o.version = 0;
    ck_assert_status(cuabi_green_ctx_stream_create(&s, green, &o), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_green_ctx_stream_create(NULL, green, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_green_ctx_stream_create(&s, (cuabi_green_ctx *)plain, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_green_ctx(&of, (cuabi_stream *)green), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_green_ctx(NULL, plain), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi__fault_arm("cuGreenCtxStreamCreate", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_status(cuabi_green_ctx_stream_create(&s, green, NULL), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ptr_null(s);
    cuabi__alloc_fail_at(1, false);   /* the handle: the driver's stream is destroyed again */
    ck_assert_status(cuabi_green_ctx_stream_create(&s, green, NULL), CUABI_ERROR_OUT_OF_MEMORY);
    cuabi__alloc_fail_at(0, false);
    ck_assert_int_eq(fake_live_streams, 1);   /* plain */
    cuabi_stream_release(plain);
    cuabi_green_ctx_release(green);
}
END_TEST

/* ------------------------------------------------------------ launches */

START_TEST(every_launch_path_takes_a_green_stream)
{
    cuabi_green_ctx *green = green_of(16);
    cuabi_stream *s;
    ck_assert_ok(cuabi_green_ctx_stream_create(&s, green, NULL));
    cuabi_buffer *out = ints(1, 0, s), *in = ints(4, 1, s);   /* 1+2+3+4 = 10 */
    cuabi_argpack *pack = add_pack(out, in, 4);
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 2;
    c.block[0] = 32;
    c.stream = s;
    /* one-shot */
    ck_assert_ok(cuabi_launch(kern, pack, &c));
    ck_assert_int_eq(at(out, 0), 10);
    ck_assert_int_eq(fake_green_launches, 1);
    ck_assert_int_eq(fake_green_last_sms, 16);
    ck_assert_ok(cuabi_launch_check(kern, pack, &c));
    /* prepared */
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, pack, &c));
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_int_eq(at(out, 0), 20);
    ck_assert_int_eq(fake_green_launches, 2);
    /* with launch attributes (cuLaunchKernelEx) */
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.priority = -1;
    c.attributes = &a;
    ck_assert_ok(cuabi_launch(kern, pack, &c));
    ck_assert_int_eq(at(out, 0), 30);
    ck_assert_int_eq(fake_green_launches, 3);
    cuabi_prepared *pla;
    ck_assert_ok(cuabi_prepared_create(&pla, kern, pack, &c));
    ck_assert_ok(cuabi_prepared_launch(pla));
    ck_assert_int_eq(at(out, 0), 40);
    c.attributes = NULL;
    /* captured on the green stream, replayed there */
    cuabi_graph *g;
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_capture_begin(s, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(kern, pack, &c));
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_ok(cuabi_graph_capture_end(&g, s));
    ck_assert_int_eq(at(out, 0), 40);   /* captured, not run */
    size_t nodes;
    ck_assert_ok(cuabi_graph_node_count(&nodes, g));
    ck_assert_uint_eq(nodes, 2);
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, s));
    ck_assert_int_eq(at(out, 0), 60);
    ck_assert_ok(cuabi_stream_synchronize(s));
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    /* cooperative: the partition's SMs bound the grid (the fake: 4 blocks per SM) */
    c.cooperative = 1;
    c.grid[0] = 64;
    ck_assert_ok(cuabi_launch_check(kern, pack, &c));
    c.grid[0] = 65;
    ck_assert_status(cuabi_launch_check(kern, pack, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("16 SMs of the stream's green context");
    cuabi_prepared *coop;
    ck_assert_status(cuabi_prepared_create(&coop, kern, pack, &c), CUABI_ERROR_LAUNCH_CONFIG);
    c.grid[0] = 64;
    ck_assert_ok(cuabi_prepared_create(&coop, kern, pack, &c));
    ck_assert_status(cuabi_prepared_set_grid(coop, 65, 1, 1), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_ok(cuabi_prepared_set_grid(coop, 64, 1, 1));
    cuabi_prepared_release(coop);
    /* the stream outlives its green context handle; the prepared launch its stream */
    cuabi_green_ctx_release(green);
    cuabi_stream_release(s);
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_int_eq(at(out, 0), 70);
    ck_assert_int_eq(fake_live_greens, 1);
    cuabi_prepared_release(pl);
    cuabi_prepared_release(pla);
    cuabi_argpack_release(pack);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
    /* the pool keeps the stream it allocated on (and so the green context)
     * until it is released: teardown checks that both go then */
}
END_TEST

/* ------------------------------------------------------------ current, events */

static cuabi_green_ctx *shared_green;
static void *sync_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++)
        if (cuabi_green_ctx_synchronize(shared_green) != CUABI_SUCCESS)
            return (void *)1;
    return NULL;
}

START_TEST(synchronize_pushes_and_pops)
{
    cuabi_green_ctx *green = green_of(24);
    ck_assert_ok(cuabi_device_set_current(dev1));
    CUcontext before = fake_current;
    ck_assert_ok(cuabi_green_ctx_synchronize(green));
    ck_assert_int_eq(atomic_load(&fake_green_syncs), 1);
    ck_assert_ptr_eq(fake_current, before);   /* what was current stays current */
    /* from four threads at once: never current on two */
    shared_green = green;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, sync_many, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    ck_assert_int_eq(atomic_load(&fake_green_syncs), 801);
    ck_assert_int_eq(atomic_load(&fake_green_overlaps), 0);
    /* the push refused, the synchronisation refused: popped, unlocked */
    cuabi__fault_arm("cuCtxPushCurrent_v2", 1, false, CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_status(cuabi_green_ctx_synchronize(green), CUABI_ERROR_CUDA);
    cuabi__fault_arm("cuCtxSynchronize", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_status(cuabi_green_ctx_synchronize(green), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuCtxSynchronize");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ptr_eq(fake_current, before);
    ck_assert_ok(cuabi_green_ctx_synchronize(green));
    cuabi__driver_for_test()->cuCtxPushCurrent = NULL;
    ck_assert_status(cuabi_green_ctx_synchronize(green), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    cuabi__driver_for_test()->cuCtxPushCurrent = fake_green_cuCtxPushCurrent;
    cuabi_green_ctx_release(green);
}
END_TEST

START_TEST(green_events)
{
    cuabi_green_ctx *green = green_of(16);
    cuabi_event *e0, *e1;
    ck_assert_ok(cuabi_event_create(&e0, dev, NULL));
    ck_assert_ok(cuabi_event_create(&e1, dev1, NULL));
    ck_assert_ok(cuabi_green_ctx_record_event(green, e0));
    ck_assert_ok(cuabi_green_ctx_wait_event(green, e0));
    ck_assert_ok(cuabi_green_ctx_wait_event(green, e1));   /* any device's */
    ck_assert_int_eq(fake_green_records, 1);
    ck_assert_int_eq(fake_green_waits, 2);
    ck_assert_status(cuabi_green_ctx_record_event(green, e1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    ck_assert_status(cuabi_green_ctx_record_event(NULL, e0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_green_ctx_record_event(green, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_green_ctx_wait_event(green, (cuabi_event *)green),
                     CUABI_ERROR_INVALID_HANDLE);
    cuabi__fault_arm("cuGreenCtxRecordEvent", 1, false, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_status(cuabi_green_ctx_record_event(green, e0), CUABI_ERROR_STREAM_CAPTURE);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver_for_test()->cuGreenCtxWaitEvent = NULL;
    ck_assert_status(cuabi_green_ctx_wait_event(green, e0), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    cuabi_event_release(e0);
    cuabi_event_release(e1);
    cuabi_green_ctx_release(green);
}
END_TEST

/* ------------------------------------------------------------ occupancy */

START_TEST(live_occupancy_per_partition)
{
    cuabi_green_ctx *green = green_of(16);
    int block = 0, grid = 0, whole = 0;
    ck_assert_ok(cuabi_occupancy_max_potential_block_size(&block, &whole, kern, dev, NULL, NULL,
                                                          0, 0));
    ck_assert_ok(cuabi_occupancy_green_max_potential_block_size(&block, &grid, kern, green, NULL,
                                                                NULL, 0, 0));
    /* the driver counts the partition's SMs when the green context is current */
    ck_assert_int_eq(grid, whole / 132 * 16);
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT, rw = CUABI_OCCUPANCY_RESULT_INIT;
    ck_assert_ok(cuabi_occupancy_green_max_active_blocks(&r, kern, green, 128, 0));
    ck_assert_ok(cuabi_occupancy_max_active_blocks(&rw, kern, dev, 128, 0));
    ck_assert_int_eq(r.active_blocks_per_sm, rw.active_blocks_per_sm);   /* per SM: the same */
    /* waves: 1000 blocks at 4 per SM: 64 per wave on 16 SMs (16 waves), 528 on 132 (2) */
    cuabi_grid_waves w = CUABI_GRID_WAVES_INIT;
    ck_assert_ok(cuabi_occupancy_green_waves(&w, kern, green, 128, 0, 1000));
    ck_assert_int_eq(w.sm_count, 16);
    ck_assert_int_eq(w.blocks_per_sm, 4);
    ck_assert_uint_eq(w.blocks_per_wave, 64);
    ck_assert_uint_eq(w.waves, 16);
    ck_assert_uint_eq(w.last_wave_blocks, 1000 - 15 * 64);
    ck_assert(w.efficiency > 0.976 && w.efficiency < 0.977);
    ck_assert_ok(cuabi_occupancy_waves(&w, kern, dev, 128, 0, 1000));
    ck_assert_int_eq(w.sm_count, 132);
    ck_assert_uint_eq(w.waves, 2);
    ck_assert_uint_eq(w.last_wave_blocks, 1000 - 528);
    ck_assert_ok(cuabi_occupancy_waves(&w, kern, dev, 128, 0, 528));
    ck_assert_uint_eq(w.waves, 1);
    ck_assert(w.efficiency == 1.0);
    /* the queries leave the current context as they found it; never two at once */
    ck_assert_int_eq(atomic_load(&fake_green_overlaps), 0);
    /* refusals */
    ck_assert_status(cuabi_occupancy_green_waves(&w, kern, green, 128, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_green_waves(&w, kern, NULL, 128, 0, 10),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_occupancy_green_max_active_blocks(&r, kern, green, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_green_max_active_blocks(&r, (cuabi_kernel *)green, green, 32, 0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_occupancy_green_max_potential_block_size(NULL, NULL, kern, green, NULL,
                                                                    NULL, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_green_max_potential_block_size(&block, NULL, kern, green,
                                                                    NULL, NULL, 0, -1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    w.version = 0;
    ck_assert_status(cuabi_occupancy_waves(&w, kern, dev, 128, 0, 10), CUABI_ERROR_INVALID_VERSION);
    cuabi__fault_arm("cuOccupancyMaxPotentialBlockSizeWithFlags", 1, false, CUDA_ERROR_UNKNOWN);
    ck_assert_status(cuabi_occupancy_green_max_potential_block_size(&block, &grid, kern, green,
                                                                    NULL, NULL, 0, 0),
                     CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_occupancy_green_max_potential_block_size(&block, &grid, kern, green, NULL,
                                                                NULL, 0, 0));
    cuabi_green_ctx_release(green);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("green");
    TCase *tc = tcase_create("green");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, device_resource_reports_the_driver);
    tcase_add_test(tc, splits_round_as_the_driver_does);
    tcase_add_test(tc, split_refusals);
    tcase_add_test(tc, green_contexts_of_groups);
    tcase_add_test(tc, green_context_refusals);
    tcase_add_test(tc, workqueue_configurations);
    tcase_add_test(tc, green_streams);
    tcase_add_test(tc, every_launch_path_takes_a_green_stream);
    tcase_add_test(tc, synchronize_pushes_and_pops);
    tcase_add_test(tc, green_events);
    tcase_add_test(tc, live_occupancy_per_partition);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
