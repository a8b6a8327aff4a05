/* Managed memory against the fake driver (fake_memory.h records each
 * managed allocation's attach flag, advice and last prefetch): the
 * resource's options, advice, prefetch to a device or the host, discard
 * (and a driver without it), range attributes (one call and the summary,
 * CUDA 13 and older drivers), the DLPack device type of managed views, and
 * the refusals: other kinds of buffers, ranges past the end, bad enums. */
#include "testutil.h"
#include "fake_multigpu.h"
#include "runtime/memory.h"

static cuabi_device *dev0, *dev1;
static cuabi_stream *s0;
static int fake_version = 13000;

static CUresult CUDAAPI version_of_test(int *v)
{
    *v = fake_version;
    return CUDA_SUCCESS;
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    cuabi__driver_for_test()->cuDriverGetVersion = version_of_test;
    fake_version = 13000;
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&s0, dev0, NULL));
}
static void teardown(void)
{
    cuabi_stream_release(s0);
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    ck_assert_int_eq(fake_live_allocs, 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_buffer *managed(cuabi_memory_resource **r, size_t n)
{
    ck_assert_ok(cuabi_memory_resource_managed(r, dev0));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, *r, n, 0, NULL));
    return b;
}

static int slot_of(cuabi_buffer *b)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    int i = fake_managed_of((CUdeviceptr)p, 1);
    ck_assert_int_ge(i, 0);
    return i;
}

START_TEST(resource_options)
{
    cuabi_managed_options o = CUABI_MANAGED_OPTIONS_INIT;
    ck_assert_int_eq(o.attach, CUABI_MANAGED_ATTACH_GLOBAL);
    ck_assert_int_eq(o.preferred_location_type, CUABI_LOCATION_NONE);
    o.attach = CUABI_MANAGED_ATTACH_HOST;
    o.preferred_location_type = CUABI_LOCATION_DEVICE;
    o.preferred_location_id = 1;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev0, &o));
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_memory_resource_kind(&k, r));
    ck_assert_int_eq(k, CUABI_MEMORY_MANAGED);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 4096, 0, NULL));
    int i = slot_of(b);
    ck_assert_uint_eq(fake_managed[i].flags, CU_MEM_ATTACH_HOST);
    ck_assert_int_eq(fake_managed[i].pref_type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_managed[i].pref_id, 1);
    cuabi_managed_range mr = CUABI_MANAGED_RANGE_INIT;
    ck_assert_ok(cuabi_managed_range_info(&mr, b, 0, 4096));
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_eq(mr.preferred_location_id, 1);
    ck_assert_ok(cuabi_buffer_destroy(b));
    /* the advice failing frees the allocation and fails the buffer */
    cuabi__fault_arm("cuMemAdvise_v2", 1, false, CUDA_ERROR_INVALID_DEVICE);
    b = (void *)1;
    ck_assert_status(cuabi_buffer_allocate(&b, r, 4096, 0, NULL), CUABI_ERROR_CUDA);
    ck_assert_ptr_null(b);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* NULL options: as cuabi_memory_resource_managed */
    ck_assert_ok(cuabi_managed_resource_create(&r, dev0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    i = slot_of(b);
    ck_assert_uint_eq(fake_managed[i].flags, CU_MEM_ATTACH_GLOBAL);
    ck_assert_int_eq(fake_managed[i].pref_type, 0);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* refusals */
    o = (cuabi_managed_options)CUABI_MANAGED_OPTIONS_INIT;
    o.attach = (cuabi_managed_attach)3;
    r = (void *)1;
    ck_assert_status(cuabi_managed_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    o = (cuabi_managed_options)CUABI_MANAGED_OPTIONS_INIT;
    o.preferred_location_type = (cuabi_location_type)9;
    ck_assert_status(cuabi_managed_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.preferred_location_type = CUABI_LOCATION_DEVICE;
    o.preferred_location_id = -3;
    ck_assert_status(cuabi_managed_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.version = 0;
    ck_assert_status(cuabi_managed_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_managed_resource_create(&r, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(advice_and_range_attributes)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b = managed(&r, 1 << 20);
    int i = slot_of(b);
    ck_assert_ok(cuabi_managed_advise(b, 0, 1 << 20, CUABI_MANAGED_SET_READ_MOSTLY,
                                      CUABI_LOCATION_NONE, 0));
    ck_assert_int_eq(fake_managed[i].read_mostly, 1);
    ck_assert_ok(cuabi_managed_advise(b, 4096, 8192, CUABI_MANAGED_SET_PREFERRED_LOCATION,
                                      CUABI_LOCATION_HOST, 0));
    ck_assert_ok(cuabi_managed_advise(b, 0, 4096, CUABI_MANAGED_SET_ACCESSED_BY,
                                      CUABI_LOCATION_DEVICE, 1));
    ck_assert_ok(cuabi_managed_advise(b, 0, 4096, CUABI_MANAGED_SET_ACCESSED_BY,
                                      CUABI_LOCATION_HOST, 0));
    int32_t v[4] = { 9, 9, 9, 9 };
    ck_assert_ok(cuabi_managed_range_get(v, 1, b, 0, 4096, CUABI_MANAGED_RANGE_READ_MOSTLY));
    ck_assert_int_eq(v[0], 1);
    ck_assert_ok(cuabi_managed_range_get(v, 1, b, 0, 4096,
                                         CUABI_MANAGED_RANGE_PREFERRED_LOCATION));
    ck_assert_int_eq(v[0], -1);                 /* the host */
    ck_assert_ok(cuabi_managed_range_get(v, 4, b, 0, 4096, CUABI_MANAGED_RANGE_ACCESSED_BY));
    ck_assert_int_eq(v[0], 1);
    ck_assert_int_eq(v[1], -1);
    ck_assert_int_eq(v[2], -2);
    ck_assert_int_eq(v[3], -2);
    cuabi_managed_range mr = CUABI_MANAGED_RANGE_INIT;
    ck_assert_ok(cuabi_managed_range_info(&mr, b, 0, 4096));
    ck_assert_int_eq(mr.read_mostly, 1);
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_HOST);
    ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_NONE);
    /* a driver before 13.0: the older attributes */
    fake_version = 12080;
    ck_assert_ok(cuabi_managed_range_info(&mr, b, 0, 4096));
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_HOST);
    fake_version = 13000;
    ck_assert_ok(cuabi_managed_advise(b, 0, 4096, CUABI_MANAGED_UNSET_ACCESSED_BY,
                                      CUABI_LOCATION_DEVICE, 1));
    ck_assert_ok(cuabi_managed_advise(b, 0, 1 << 20, CUABI_MANAGED_UNSET_READ_MOSTLY,
                                      (cuabi_location_type)77, 0));   /* ignored there */
    ck_assert_ok(cuabi_managed_advise(b, 0, 1 << 20, CUABI_MANAGED_UNSET_PREFERRED_LOCATION,
                                      CUABI_LOCATION_HOST, 0));
    /* the driver ignores an unset's location: none is fine there, not elsewhere */
    ck_assert_ok(cuabi_managed_advise(b, 0, 1 << 20, CUABI_MANAGED_UNSET_PREFERRED_LOCATION,
                                      CUABI_LOCATION_NONE, 0));
    ck_assert_status(cuabi_managed_advise(b, 0, 1 << 20, CUABI_MANAGED_SET_PREFERRED_LOCATION,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_managed_range_info(&mr, b, 0, 4096));
    ck_assert_int_eq(mr.read_mostly, 0);
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_NONE);
    ck_assert_uint_eq(fake_managed[i].accessed_by, 1u << 31);
    /* an empty range does nothing */
    int advices = fake_advices;
    ck_assert_ok(cuabi_managed_advise(b, 16, 0, CUABI_MANAGED_SET_READ_MOSTLY,
                                      CUABI_LOCATION_NONE, 0));
    ck_assert_int_eq(fake_advices, advices);
    /* refusals */
    ck_assert_status(cuabi_managed_advise(b, 0, (1 << 20) + 1, CUABI_MANAGED_SET_READ_MOSTLY,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the end");
    ck_assert_status(cuabi_managed_advise(b, SIZE_MAX, 2, CUABI_MANAGED_SET_READ_MOSTLY,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_advise(b, 0, 64, (cuabi_managed_advice)7,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_advise(b, 0, 64, CUABI_MANAGED_SET_ACCESSED_BY,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_advise(b, 0, 64, CUABI_MANAGED_SET_ACCESSED_BY,
                                          CUABI_LOCATION_DEVICE, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_range_get(v, 2, b, 0, 64, CUABI_MANAGED_RANGE_READ_MOSTLY),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_range_get(v, 1, b, 0, 0, CUABI_MANAGED_RANGE_READ_MOSTLY),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_range_get(NULL, 1, b, 0, 64, CUABI_MANAGED_RANGE_READ_MOSTLY),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_range_get(v, 1, b, 0, 64, (cuabi_managed_range_attribute)9),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi__fault_arm("cuMemAdvise_v2", 1, false, CUDA_ERROR_INVALID_DEVICE);
    ck_assert_status(cuabi_managed_advise(b, 0, 64, CUABI_MANAGED_SET_READ_MOSTLY,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuMemAdvise");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(prefetch_and_discard)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b = managed(&r, 1 << 20);
    int i = slot_of(b);
    ck_assert_ok(cuabi_managed_prefetch(b, 0, 1 << 20, CUABI_LOCATION_DEVICE, 1, s0));
    ck_assert_int_eq(fake_prefetches, 1);
    cuabi__stream *so;
    void *obj;
    ck_assert_ok(cuabi__handle_get(s0, CUABI__T_STREAM, &obj, "test"));
    so = obj;
    ck_assert_ptr_eq(fake_last_stream, so->cu_stream);
    cuabi_managed_range mr = CUABI_MANAGED_RANGE_INIT;
    ck_assert_ok(cuabi_managed_range_info(&mr, b, 0, 1 << 20));
    ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_eq(mr.last_prefetch_location_id, 1);
    ck_assert_ok(cuabi_managed_prefetch(b, 4096, 4096, CUABI_LOCATION_HOST, 0, NULL));
    ck_assert_ptr_null(fake_last_stream);       /* NULL: the legacy default stream */
    ck_assert_int_eq(fake_managed[i].last_type, CU_MEM_LOCATION_TYPE_HOST);
    ck_assert_ok(cuabi_managed_prefetch(b, 0, 4096, CUABI_LOCATION_HOST_NUMA, 0, s0));
    int32_t v;
    ck_assert_ok(cuabi_managed_range_get(&v, 1, b, 0, 4096,
                                         CUABI_MANAGED_RANGE_LAST_PREFETCH_LOCATION_TYPE));
    ck_assert_int_eq(v, CUABI_LOCATION_HOST_NUMA);
    /* discard: the bytes are gone (the fake writes 0xdd) */
    ck_assert_ok(cuabi_buffer_memset(b, 0, 7, 1, 1 << 20, NULL));
    ck_assert_ok(cuabi_managed_discard(b, 0, 65536, s0));
    uint8_t h[2];
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, 65535, 2, NULL));
    ck_assert_uint_eq(h[0], 0xdd);
    ck_assert_uint_eq(h[1], 7);
    ck_assert_ok(cuabi_managed_discard_prefetch(b, 65536, 65536, CUABI_LOCATION_DEVICE, 0, s0));
    ck_assert_int_eq(fake_discards, 2);
    ck_assert_ok(cuabi_managed_range_info(&mr, b, 65536, 65536));
    ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_eq(mr.last_prefetch_location_id, 0);
    /* a driver without discard says so */
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemDiscardBatchAsync = NULL;
    d->cuMemDiscardAndPrefetchBatchAsync = NULL;
    ck_assert_status(cuabi_managed_discard(b, 0, 4096, s0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuMemDiscardBatchAsync");
    ck_assert_status(cuabi_managed_discard_prefetch(b, 0, 4096, CUABI_LOCATION_HOST, 0, s0),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuMemDiscardAndPrefetchBatchAsync");
    ck_assert_ok(cuabi_managed_discard(b, 0, 0, s0));   /* nothing to do: no driver call */
    /* refusals */
    ck_assert_status(cuabi_managed_prefetch(b, 0, 64, CUABI_LOCATION_NONE, 0, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_prefetch(b, 1 << 20, 1, CUABI_LOCATION_HOST, 0, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_prefetch(b, 0, 64, CUABI_LOCATION_HOST, 0, (void *)8),
                     CUABI_ERROR_INVALID_HANDLE);
    cuabi__fault_arm("cuMemPrefetchAsync_v2", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_managed_prefetch(b, 0, 64, CUABI_LOCATION_HOST, 0, s0),
                     CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(only_managed_buffers)
{
    cuabi_memory_resource *pool, *host;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev0));
    ck_assert_ok(cuabi_memory_resource_host(&host));
    cuabi_buffer *d, *h;
    ck_assert_ok(cuabi_buffer_allocate(&d, pool, 4096, 0, s0));
    ck_assert_ok(cuabi_buffer_allocate(&h, host, 4096, 0, NULL));
    cuabi_buffer *bs[2] = { d, h };
    for (int k = 0; k < 2; k++) {
        ck_assert_status(cuabi_managed_prefetch(bs[k], 0, 64, CUABI_LOCATION_HOST, 0, s0),
                         CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("not managed memory");
        ck_assert_status(cuabi_managed_advise(bs[k], 0, 64, CUABI_MANAGED_SET_READ_MOSTLY,
                                              CUABI_LOCATION_NONE, 0), CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_status(cuabi_managed_discard(bs[k], 0, 64, s0), CUABI_ERROR_NOT_SUPPORTED);
        cuabi_managed_range mr = CUABI_MANAGED_RANGE_INIT;
        ck_assert_status(cuabi_managed_range_info(&mr, bs[k], 0, 64), CUABI_ERROR_NOT_SUPPORTED);
    }
    ck_assert_status(cuabi_managed_prefetch(NULL, 0, 64, CUABI_LOCATION_HOST, 0, s0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_buffer_free_async(d, s0));
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_memory_resource_release(host));
}
END_TEST

START_TEST(managed_views_export_as_cuda_managed)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b = managed(&r, 256);
    int64_t shape[1] = { 64 };
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    DLManagedTensorVersioned *t;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&t, v));
    ck_assert_int_eq(t->dl_tensor.device.device_type, CUABI_DLPACK_CUDA_MANAGED);
    ck_assert_int_eq(t->dl_tensor.device.device_type, 13);    /* kDLCUDAManaged */
    ck_assert_int_eq(t->dl_tensor.device.device_id, 0);
    t->deleter(t);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("managed");
    TCase *tc = tcase_create("managed");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, resource_options);
    tcase_add_test(tc, advice_and_range_attributes);
    tcase_add_test(tc, prefetch_and_discard);
    tcase_add_test(tc, only_managed_buffers);
    tcase_add_test(tc, managed_views_export_as_cuda_managed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
