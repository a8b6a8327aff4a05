/* Managed memory against the fake driver (fake_memory.h records each
 * managed allocation's attach flag, advice and last prefetch): the
 * resource's options, advice, prefetch to a device or the host, discard
 * (and a driver without it), range attributes (one call and the summary,
 * CUDA 13 and older drivers), batches of whole buffers, the DLPack device
 * type of managed views, and the refusals: other kinds of buffers, ranges
 * past the end, bad enums. */
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

/* Batches of whole buffers (cuda.core's prefetch_batch, discard_batch,
 * discard_prefetch_batch): one driver call with the locations grouped in
 * runs, one location for all or one each, empty buffers skipped, the
 * per-buffer fallback of older drivers, and the refusals. */
START_TEST(batches)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_managed(&r, dev0));
    cuabi_buffer *b[4];
    size_t sizes[4] = { 8192, 4096, 0, 65536 };
    for (int k = 0; k < 4; k++)
        ck_assert_ok(cuabi_buffer_allocate(&b[k], r, sizes[k], 0, NULL));
    int slot[4] = { slot_of(b[0]), slot_of(b[1]), -1, slot_of(b[3]) };
    cuabi__stream *so;
    void *obj;
    ck_assert_ok(cuabi__handle_get(s0, CUABI__T_STREAM, &obj, "test"));
    so = obj;
    /* one location for all: one batched call, every non-empty buffer there */
    int32_t t1 = CUABI_LOCATION_DEVICE, i1 = 1;
    ck_assert_ok(cuabi_managed_prefetch_batch(b, 4, &t1, &i1, 1, s0));
    ck_assert_int_eq(fake_prefetch_batches, 1);
    ck_assert_int_eq(fake_prefetches, 3);              /* the empty one is skipped */
    ck_assert_ptr_eq(fake_last_stream, so->cu_stream);
    for (int k = 0; k < 4; k++) {
        if (slot[k] < 0) continue;
        ck_assert_int_eq(fake_managed[slot[k]].last_type, CU_MEM_LOCATION_TYPE_DEVICE);
        ck_assert_int_eq(fake_managed[slot[k]].last_id, 1);
    }
    /* one location each: runs of equal ones (the fake checks the runs) */
    int32_t ts[4] = { CUABI_LOCATION_HOST, CUABI_LOCATION_HOST, CUABI_LOCATION_DEVICE,
                      CUABI_LOCATION_DEVICE };
    int32_t is[4] = { 0, 0, 1, 0 };
    ck_assert_ok(cuabi_managed_prefetch_batch(b, 4, ts, is, 4, NULL));
    ck_assert_ptr_null(fake_last_stream);
    ck_assert_int_eq(fake_managed[slot[0]].last_type, CU_MEM_LOCATION_TYPE_HOST);
    ck_assert_int_eq(fake_managed[slot[1]].last_type, CU_MEM_LOCATION_TYPE_HOST);
    ck_assert_int_eq(fake_managed[slot[3]].last_type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_managed[slot[3]].last_id, 0);
    cuabi_managed_range mr = CUABI_MANAGED_RANGE_INIT;
    ck_assert_ok(cuabi_managed_range_info(&mr, b[0], 0, 8192));
    ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_HOST);
    /* discard: every byte of every buffer is gone (the fake writes 0xdd) */
    ck_assert_ok(cuabi_buffer_memset(b[0], 0, 7, 1, 8192, NULL));
    ck_assert_ok(cuabi_buffer_memset(b[3], 0, 7, 1, 65536, NULL));
    cuabi_buffer *pair[2] = { b[0], b[3] };
    ck_assert_ok(cuabi_managed_discard_batch(pair, 2, s0));
    ck_assert_int_eq(fake_discards, 1);
    uint8_t h[2];
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b[0], 8190, 2, NULL));
    ck_assert_uint_eq(h[0], 0xdd);
    ck_assert_uint_eq(h[1], 0xdd);
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b[3], 0, 1, NULL));
    ck_assert_uint_eq(h[0], 0xdd);
    /* discard and prefetch, one location each */
    int32_t t2[2] = { CUABI_LOCATION_DEVICE, CUABI_LOCATION_HOST }, i2[2] = { 1, 0 };
    ck_assert_ok(cuabi_managed_discard_prefetch_batch(pair, 2, t2, i2, 2, s0));
    ck_assert_int_eq(fake_discards, 2);
    ck_assert_int_eq(fake_managed[slot[0]].last_type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_managed[slot[0]].last_id, 1);
    ck_assert_int_eq(fake_managed[slot[3]].last_type, CU_MEM_LOCATION_TYPE_HOST);
    /* only empty buffers: nothing to do, no driver call */
    int before = fake_prefetches;
    ck_assert_ok(cuabi_managed_prefetch_batch(&b[2], 1, &t1, &i1, 1, s0));
    ck_assert_ok(cuabi_managed_discard_batch(&b[2], 1, s0));
    ck_assert_int_eq(fake_prefetches, before);
    /* refusals, before the driver */
    ck_assert_status(cuabi_managed_prefetch_batch(NULL, 2, &t1, &i1, 1, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_prefetch_batch(b, 0, &t1, &i1, 1, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_prefetch_batch(b, 4, ts, is, 3, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("3 locations for 4 buffers");
    ck_assert_status(cuabi_managed_prefetch_batch(b, 4, NULL, is, 4, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_discard_batch(b, SIZE_MAX, s0), CUABI_ERROR_INVALID_ARGUMENT);
    int32_t bad = CUABI_LOCATION_NONE;
    ck_assert_status(cuabi_managed_prefetch_batch(b, 4, &bad, &i1, 1, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    int32_t neg = -1;
    ck_assert_status(cuabi_managed_discard_prefetch_batch(b, 4, &t1, &neg, 1, s0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_buffer *dead[2] = { b[0], (cuabi_buffer *)8 };
    ck_assert_status(cuabi_managed_discard_batch(dead, 2, s0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("buffers[1]");
    ck_assert_status(cuabi_managed_prefetch_batch(b, 4, &t1, &i1, 1, (void *)8),
                     CUABI_ERROR_INVALID_HANDLE);
    cuabi__fault_arm("cuMemPrefetchBatchAsync", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_managed_prefetch_batch(b, 4, &t1, &i1, 1, s0), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    /* an older driver: one cuMemPrefetchAsync per buffer, each to its location */
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemPrefetchBatchAsync = NULL;
    int batches = fake_prefetch_batches;
    before = fake_prefetches;
    int32_t t3[4] = { CUABI_LOCATION_DEVICE, CUABI_LOCATION_HOST, CUABI_LOCATION_HOST,
                      CUABI_LOCATION_DEVICE };
    int32_t i3[4] = { 1, 0, 0, 1 };
    ck_assert_ok(cuabi_managed_prefetch_batch(b, 4, t3, i3, 4, s0));
    ck_assert_int_eq(fake_prefetch_batches, batches);
    ck_assert_int_eq(fake_prefetches, before + 3);
    ck_assert_int_eq(fake_managed[slot[0]].last_type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_managed[slot[1]].last_type, CU_MEM_LOCATION_TYPE_HOST);
    ck_assert_int_eq(fake_managed[slot[3]].last_type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_int_eq(fake_managed[slot[3]].last_id, 1);
    d->cuMemDiscardBatchAsync = NULL;
    d->cuMemDiscardAndPrefetchBatchAsync = NULL;
    ck_assert_status(cuabi_managed_discard_batch(pair, 2, s0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuMemDiscardBatchAsync");
    ck_assert_status(cuabi_managed_discard_prefetch_batch(pair, 2, &t1, &i1, 1, s0),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuMemDiscardAndPrefetchBatchAsync");
    /* allocation failure: out of memory, nothing lost */
    d->cuMemPrefetchBatchAsync = fake_cuMemPrefetchBatchAsync;
    cuabi__alloc_fail_at(1, false);
    ck_assert_status(cuabi_managed_prefetch_batch(b, 4, &t1, &i1, 1, s0),
                     CUABI_ERROR_OUT_OF_MEMORY);
    cuabi__alloc_fail_at(0, false);
    ck_assert_ok(cuabi_managed_prefetch_batch(b, 4, &t1, &i1, 1, s0));
    for (int k = 0; k < 4; k++)
        ck_assert_ok(cuabi_buffer_destroy(b[k]));
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
        ck_assert_status(cuabi_managed_discard_batch(bs, 2, s0), CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("buffers[0] is not managed memory");
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
    tcase_add_test(tc, batches);
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
