/* Devices, streams and events on a real GPU (SKIP without one). */
#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

#include <pthread.h>

static int ndev;

START_TEST(every_device_has_properties)
{
    for (int i = 0; i < ndev; i++) {
        cuabi_device *d;
        ck_assert_ok(cuabi_device_get(&d, i));
        cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
        ck_assert_ok(cuabi_device_get_properties(&p, d));
        ck_assert_uint_gt(strlen(p.name), 0);
        ck_assert_int_ge(p.compute_capability_major, 5);
        ck_assert_int_gt(p.multiprocessor_count, 0);
        ck_assert_int_eq(p.warp_size, 32);
        ck_assert_uint_gt(p.total_memory, 1u << 30);
        ck_assert_int_eq(p.pci_bus_id[4], ':');
        int v;
        ck_assert_ok(cuabi_device_attribute(&v, d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
        ck_assert_int_eq(v, p.multiprocessor_count);
        for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
            /* Every attribute is readable or rejected cleanly by the driver. */
            cuabi_status st = cuabi_device_attribute(&v, d, a);
            ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_CUDA);
        }
        uint64_t f, t;
        ck_assert_ok(cuabi_device_memory_info(&f, &t, d));
        ck_assert_uint_le(f, t);
        ck_assert_ok(cuabi_device_synchronize(d));
        ck_assert_ok(cuabi_device_release(d));
    }
}
END_TEST

START_TEST(stream_event_timing)
{
    cuabi_device *d;
    cuabi_stream *s;
    cuabi_event *a, *b;
    ck_assert_ok(cuabi_device_get(&d, 0));
    int least, greatest;
    ck_assert_ok(cuabi_device_stream_priority_range(&least, &greatest, d));
    cuabi_stream_options o = CUABI_STREAM_OPTIONS_INIT;
    o.flags = CUABI_STREAM_NON_BLOCKING;
    o.priority = greatest;
    ck_assert_ok(cuabi_stream_create(&s, d, &o));
    int prio;
    ck_assert_ok(cuabi_stream_priority(&prio, s));
    ck_assert_int_eq(prio, greatest);
    ck_assert_ok(cuabi_event_create(&a, d, NULL));
    ck_assert_ok(cuabi_event_create(&b, d, NULL));
    ck_assert_ok(cuabi_event_record(a, s));
    ck_assert_ok(cuabi_event_record(b, s));
    ck_assert_ok(cuabi_event_synchronize(b));
    int done;
    ck_assert_ok(cuabi_event_query(&done, b));
    ck_assert_int_eq(done, 1);
    ck_assert_ok(cuabi_stream_query(&done, s));
    ck_assert_int_eq(done, 1);
    float ms = -1;
    ck_assert_ok(cuabi_event_elapsed_ms(&ms, a, b));
    ck_assert_float_ge(ms, 0.0f);
    cuabi_event *nt;
    cuabi_event_options eo = CUABI_EVENT_OPTIONS_INIT;
    eo.flags = CUABI_EVENT_DISABLE_TIMING;
    ck_assert_ok(cuabi_event_create(&nt, d, &eo));
    ck_assert_ok(cuabi_event_record(nt, s));
    ck_assert_ok(cuabi_stream_wait_event(s, nt));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_status(cuabi_event_elapsed_ms(&ms, a, nt), CUABI_ERROR_CUDA);
    ck_assert_int_ne(cuabi_last_error()->cu_result, 0);
    ck_assert_ok(cuabi_event_release(nt));
    ck_assert_ok(cuabi_event_release(a));
    ck_assert_ok(cuabi_event_release(b));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(default_and_wrapped_streams)
{
    cuabi_device *d;
    cuabi_stream *legacy, *pt, *own, *wrapped;
    ck_assert_ok(cuabi_device_get(&d, 0));
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, d));
    ck_assert_ok(cuabi_stream_per_thread_default(&pt, d));
    ck_assert_ok(cuabi_stream_synchronize(legacy));
    ck_assert_ok(cuabi_stream_synchronize(pt));
    ck_assert_ok(cuabi_stream_create(&own, d, NULL));
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, own));
    ck_assert_ok(cuabi_stream_wrap(&wrapped, d, raw));
    ck_assert_ok(cuabi_stream_synchronize(wrapped));
    ck_assert_ok(cuabi_stream_release(wrapped)); /* does not destroy `own` */
    ck_assert_ok(cuabi_stream_synchronize(own));
    ck_assert_ok(cuabi_stream_release(own));
    ck_assert_ok(cuabi_stream_release(legacy));
    ck_assert_ok(cuabi_stream_release(pt));
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

static void *worker(void *arg)
{
    /* A fresh thread with no current context: cuabi makes it current. */
    cuabi_device *d = arg;
    cuabi_stream *s;
    cuabi_event *e;
    if (cuabi_stream_create(&s, d, NULL) != CUABI_SUCCESS) return (void *)1;
    if (cuabi_event_create(&e, d, NULL) != CUABI_SUCCESS) return (void *)2;
    for (int i = 0; i < 100; i++)
        if (cuabi_event_record(e, s) || cuabi_stream_wait_event(s, e)) return (void *)3;
    if (cuabi_stream_synchronize(s)) return (void *)4;
    cuabi_event_release(e);
    cuabi_stream_release(s);
    return NULL;
}

START_TEST(handles_work_from_other_threads)
{
    cuabi_device *d;
    ck_assert_ok(cuabi_device_get(&d, 0));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker, d), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_device");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_device_has_properties);
    tcase_add_test(tc, stream_event_timing);
    tcase_add_test(tc, default_and_wrapped_streams);
    tcase_add_test(tc, handles_work_from_other_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    ndev = cuabi_test_require_gpu();
    return cuabi_test_run(suite());
}
