/* cuabi_view_from_exchange: a producer's DLPack C exchange table (DLPack
 * 1.3), with C stand-ins for the producer's functions (no Python needed:
 * the object is only ever handed to them). */
#include "testutil.h"
#include "fake_driver.h"

#include <stdatomic.h>

typedef struct producer {
    DLManagedTensorVersioned mt;
    int64_t shape[2];
    float data[6];
} producer;

static atomic_int deletes, exports;
static const char *seen_object;      /* what the export was given */
static int bad_lanes;                /* export a tensor the import refuses */
static int on_gpu;                   /* export a kDLCUDA tensor of GPU 0 */
static int work_stream_calls, work_stream_fails;
static void *work_stream;            /* what current_work_stream answers */

static void producer_deleter(DLManagedTensorVersioned *self)
{
    atomic_fetch_add(&deletes, 1);
    free(self->manager_ctx);
}

static int export_ok(void *py_object, DLManagedTensorVersioned **out)
{
    atomic_fetch_add(&exports, 1);
    seen_object = py_object;
    producer *p = calloc(1, sizeof *p);
    p->mt.version.major = 1;
    p->mt.version.minor = 3;
    p->mt.manager_ctx = p;
    p->mt.deleter = producer_deleter;
    p->mt.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    p->shape[0] = 2;
    p->shape[1] = 3;
    DLTensor *t = &p->mt.dl_tensor;
    t->data = p->data;
    t->device.device_type = on_gpu ? kDLCUDA : kDLCPU;
    t->ndim = 2;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = bad_lanes ? 4 : 1;
    t->shape = p->shape;
    *out = &p->mt;
    return 0;
}

static int export_fails(void *py_object, DLManagedTensorVersioned **out)
{
    (void)py_object;
    *out = NULL;
    return -1;
}

static DLPackExchangeAPI table(unsigned major, DLPackManagedTensorFromPyObjectNoSync export)
{
    DLPackExchangeAPI t;
    memset(&t, 0, sizeof t);
    t.header.version.major = major;
    t.header.version.minor = 3;
    t.managed_tensor_from_py_object_no_sync = export;
    return t;
}

static int current_work_stream(DLDeviceType type, int32_t id, void **out)
{
    work_stream_calls++;
    ck_assert_int_eq(type, kDLCUDA);
    ck_assert_int_eq(id, 0);
    *out = work_stream;
    return work_stream_fails ? -1 : 0;
}

static const char object[] = "a PyObject stand-in";

static void reset(void)
{
    deletes = exports = 0;
    seen_object = NULL;
    bad_lanes = on_gpu = work_stream_calls = work_stream_fails = 0;
    work_stream = NULL;
    fake_event_records = fake_stream_waits = 0;
    fake_last_record_stream = fake_last_wait_stream = NULL;
}

START_TEST(views_the_object_through_its_export)
{
    reset();
    DLPackExchangeAPI t = table(1, export_ok);
    cuabi_view *v = NULL;
    ck_assert_ok(cuabi_view_from_exchange(&v, &t, (void *)object));
    ck_assert_ptr_eq(seen_object, object);
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, v));
    ck_assert_int_eq(info.ndim, 2);
    ck_assert_int_eq(info.shape[1], 3);
    ck_assert_uint_eq(info.flags & CUABI_VIEW_READ_ONLY, CUABI_VIEW_READ_ONLY);
    ck_assert_int_eq(deletes, 0);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(deletes, 1);     /* the view owned the producer's tensor */
}
END_TEST

START_TEST(follows_the_chain_to_a_major_one_table)
{
    reset();
    DLPackExchangeAPI old = table(1, export_ok);
    DLPackExchangeAPI newer = table(2, export_fails);
    newer.header.prev_api = &old.header;
    cuabi_view *v = NULL;
    ck_assert_ok(cuabi_view_from_exchange(&v, &newer, (void *)object));
    ck_assert_int_eq(exports, 1);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(deletes, 1);
}
END_TEST

START_TEST(unknown_versions_are_refused)
{
    reset();
    cuabi_view *v = (cuabi_view *)&v;
    DLPackExchangeAPI two = table(2, export_ok);
    ck_assert_status(cuabi_view_from_exchange(&v, &two, (void *)object), CUABI_ERROR_INVALID_VERSION);
    ck_assert_error_mentions("cuabi_view_from_exchange");
    ck_assert_error_mentions("DLPack 2.3");
    ck_assert_ptr_null(v);
    /* A chain that loops back on itself ends, refused. */
    DLPackExchangeAPI a = table(3, export_ok), b = table(4, export_ok);
    a.header.prev_api = &b.header;
    b.header.prev_api = &a.header;
    ck_assert_status(cuabi_view_from_exchange(&v, &a, (void *)object), CUABI_ERROR_INVALID_VERSION);
    ck_assert_int_eq(exports, 0);
}
END_TEST

START_TEST(producer_failure_and_refused_tensors)
{
    reset();
    cuabi_view *v = NULL;
    DLPackExchangeAPI failing = table(1, export_fails);
    ck_assert_status(cuabi_view_from_exchange(&v, &failing, (void *)object), CUABI_ERROR_CALLBACK);
    ck_assert_error_mentions("managed_tensor_from_py_object_no_sync failed");
    ck_assert_ptr_null(v);
    /* A tensor the import refuses is deleted once, and the error says why. */
    bad_lanes = 1;
    DLPackExchangeAPI t = table(1, export_ok);
    ck_assert_status(cuabi_view_from_exchange(&v, &t, (void *)object), CUABI_ERROR_DLPACK);
    ck_assert_error_mentions("cuabi_view_from_exchange: the producer's tensor was refused");
    ck_assert_error_mentions("lanes");
    ck_assert_int_eq(deletes, 1);
    ck_assert_ptr_null(v);
}
END_TEST

START_TEST(bad_arguments)
{
    reset();
    cuabi_view *v = NULL;
    DLPackExchangeAPI t = table(1, export_ok);
    ck_assert_status(cuabi_view_from_exchange(NULL, &t, (void *)object), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_from_exchange(&v, NULL, (void *)object), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("api is NULL");
    ck_assert_status(cuabi_view_from_exchange(&v, &t, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    DLPackExchangeAPI empty = table(1, NULL);
    ck_assert_status(cuabi_view_from_exchange(&v, &empty, (void *)object), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("managed_tensor_from_py_object_no_sync");
    ck_assert_int_eq(exports, 0);
}
END_TEST

START_TEST(layout_of_the_exchange_table)
{
    /* DLPack 1.3 on LP64: header (version, prev_api), then five functions. */
    ck_assert_uint_eq(sizeof(DLPackExchangeAPIHeader), 16);
    ck_assert_uint_eq(offsetof(DLPackExchangeAPI, managed_tensor_allocator), 16);
    ck_assert_uint_eq(offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync), 24);
    ck_assert_uint_eq(offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync), 32);
    ck_assert_uint_eq(offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync), 40);
    ck_assert_uint_eq(offsetof(DLPackExchangeAPI, current_work_stream), 48);
    ck_assert_uint_eq(sizeof(DLPackExchangeAPI), 56);
}
END_TEST


/* cuabi_view_from_exchange_on: the DLPack stream contract without
 * __dlpack__ -- the producer's current work stream before the consumer's. */
static cuabi_stream *consumer(void)
{
    cuabi_device *d;
    cuabi_stream *s;
    ck_assert_ok(cuabi_device_get(&d, 0));
    ck_assert_ok(cuabi_stream_create(&s, d, NULL));
    cuabi_device_release(d);
    return s;
}

static CUstream raw_of(cuabi_stream *s)
{
    uintptr_t r;
    ck_assert_ok(cuabi_stream_raw(&r, s));
    return (CUstream)r;
}

START_TEST(a_gpu_tensor_is_ordered_before_the_consumers_stream)
{
    fake_driver_install();
    reset();
    on_gpu = 1;
    work_stream = (void *)(uintptr_t)0x5170;     /* the producer's (torch's current) stream */
    cuabi_stream *s = consumer();
    int events = fake_live_events;
    DLPackExchangeAPI t = table(1, export_ok);
    t.current_work_stream = current_work_stream;
    cuabi_view *v = NULL;
    ck_assert_ok(cuabi_view_from_exchange_on(&v, &t, (void *)object, s));
    ck_assert_int_eq(work_stream_calls, 1);
    ck_assert_int_eq(fake_event_records, 1);
    ck_assert_ptr_eq(fake_last_record_stream, work_stream);
    ck_assert_int_eq(fake_stream_waits, 1);
    ck_assert_ptr_eq(fake_last_wait_stream, raw_of(s));
    ck_assert_ptr_eq(fake_last_wait_event, fake_last_record_event);
    ck_assert_int_eq(fake_live_events, events + 1);      /* the device's (cuabi_stream_wait_raw) */
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(deletes, 1);
    /* The producer already works on the consumer's stream: nothing to order. */
    work_stream = raw_of(s);
    ck_assert_ok(cuabi_view_from_exchange_on(&v, &t, (void *)object, s));
    ck_assert_int_eq(fake_event_records, 1);
    ck_assert_int_eq(fake_stream_waits, 1);
    ck_assert_ok(cuabi_view_release(v));
    /* No stream: no ordering, not even the question. */
    ck_assert_ok(cuabi_view_from_exchange_on(&v, &t, (void *)object, NULL));
    ck_assert_int_eq(work_stream_calls, 2);
    ck_assert_ok(cuabi_view_release(v));
    /* A host tensor needs none either. */
    on_gpu = 0;
    ck_assert_ok(cuabi_view_from_exchange_on(&v, &t, (void *)object, s));
    ck_assert_int_eq(work_stream_calls, 2);
    ck_assert_int_eq(fake_event_records, 1);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(deletes, 4);
    cuabi_stream_release(s);
    ck_assert_int_eq(fake_live_events, events);          /* gone with the device */
    cuabi__driver_install_fake(NULL);
}
END_TEST

START_TEST(ordering_refusals_make_nothing)
{
    fake_driver_install();
    reset();
    on_gpu = 1;
    work_stream = (void *)(uintptr_t)0x5170;
    cuabi_stream *s = consumer();
    size_t live = cuabi__handle_live_count();
    cuabi_view *v = (cuabi_view *)&v;
    /* A table without current_work_stream: refused before the export. */
    DLPackExchangeAPI t = table(1, export_ok);
    ck_assert_status(cuabi_view_from_exchange_on(&v, &t, (void *)object, s),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("current_work_stream");
    ck_assert_ptr_null(v);
    ck_assert_int_eq(exports, 0);
    /* current_work_stream fails: the view goes, the tensor is deleted once. */
    t.current_work_stream = current_work_stream;
    work_stream_fails = 1;
    v = (cuabi_view *)&v;
    ck_assert_status(cuabi_view_from_exchange_on(&v, &t, (void *)object, s), CUABI_ERROR_CALLBACK);
    ck_assert_error_mentions("current_work_stream failed for GPU 0");
    ck_assert_ptr_null(v);
    ck_assert_int_eq(deletes, 1);
    ck_assert_int_eq(fake_event_records, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* A released stream is refused before anything is asked. */
    work_stream_fails = 0;
    cuabi_stream_release(s);
    ck_assert_status(cuabi_view_from_exchange_on(&v, &t, (void *)object, s),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(exports, 1);
    ck_assert_status(cuabi_view_from_exchange_on(NULL, &t, (void *)object, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_from_exchange_on(&v, NULL, (void *)object, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi__driver_install_fake(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exchange");
    TCase *tc = tcase_create("exchange");
    tcase_add_test(tc, views_the_object_through_its_export);
    tcase_add_test(tc, follows_the_chain_to_a_major_one_table);
    tcase_add_test(tc, unknown_versions_are_refused);
    tcase_add_test(tc, producer_failure_and_refused_tensors);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, a_gpu_tensor_is_ordered_before_the_consumers_stream);
    tcase_add_test(tc, ordering_refusals_make_nothing);
    tcase_add_test(tc, layout_of_the_exchange_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
