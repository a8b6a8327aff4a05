/* Devices, streams and events against the fake driver: every code path and
 * error path without a GPU. */
#include "testutil.h"

#include <pthread.h>
#include "fake_driver.h"

static void setup(void) { fake_driver_install(); }
static void teardown(void)
{
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

START_TEST(device_count_and_get)
{
    int n = -1;
    ck_assert_ok(cuabi_device_count(&n));
    ck_assert_int_eq(n, FAKE_DEVICES);
    cuabi_device *a, *b, *c;
    ck_assert_ok(cuabi_device_get(&a, 0));
    ck_assert_ok(cuabi_device_get(&b, 0));
    ck_assert_ptr_eq(a, b); /* same handle for the same ordinal */
    ck_assert_ok(cuabi_device_get(&c, 1));
    ck_assert_ptr_ne(a, c);
    int ord;
    ck_assert_ok(cuabi_device_ordinal(&ord, c));
    ck_assert_int_eq(ord, 1);
    ck_assert_status(cuabi_device_get(&b, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("out of range");
    ck_assert_ptr_null(b);
    ck_assert_status(cuabi_device_get(&b, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_device_get(NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_device_count(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_device_release(a));
    ck_assert_ok(cuabi_device_release(a));
    ck_assert_status(cuabi_device_ordinal(&ord, a), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_device_release(c));
}
END_TEST

START_TEST(device_properties_and_attributes)
{
    cuabi_device *d;
    ck_assert_ok(cuabi_device_get(&d, 1));
    cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
    ck_assert_ok(cuabi_device_get_properties(&p, d));
    ck_assert_str_eq(p.name, "Fake GPU 1");
    ck_assert_str_eq(p.pci_bus_id, "0000:02:00.0");
    ck_assert_int_eq(p.compute_capability_major, 9);
    ck_assert_int_eq(p.multiprocessor_count, 132);
    ck_assert_int_eq(p.uuid[3], 4);
    ck_assert_uint_eq(p.total_memory, (uint64_t)80 << 30);
    ck_assert_int_eq(p.max_shared_memory_per_block_optin, 232448);
    cuabi_device_properties bad = CUABI_DEVICE_PROPERTIES_INIT;
    bad.version = 0;
    ck_assert_status(cuabi_device_get_properties(&bad, d), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_device_get_properties(NULL, d), CUABI_ERROR_INVALID_ARGUMENT);
    int v;
    ck_assert_ok(cuabi_device_attribute(&v, d, CU_DEVICE_ATTRIBUTE_WARP_SIZE));
    ck_assert_int_eq(v, 32);
    ck_assert_status(cuabi_device_attribute(&v, d, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_device_attribute(&v, d, 100000), CUABI_ERROR_INVALID_ARGUMENT);
    uint64_t f, t;
    ck_assert_ok(cuabi_device_memory_info(&f, &t, d));
    ck_assert_uint_eq(t, (uint64_t)80 << 30);
    int least, greatest;
    ck_assert_ok(cuabi_device_stream_priority_range(&least, &greatest, d));
    ck_assert_int_eq(greatest, -5);
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(primary_context_retained_once_and_released)
{
    cuabi_device *d;
    ck_assert_ok(cuabi_device_get(&d, 0));
    ck_assert_int_eq(fake_ctx_refs[0], 0); /* lazily */
    ck_assert_ok(cuabi_device_set_current(d));
    ck_assert_ok(cuabi_device_set_current(d));
    ck_assert_int_eq(fake_ctx_refs[0], 1);
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
    uintptr_t ctx;
    ck_assert_ok(cuabi_device_context(&ctx, d));
    ck_assert_uint_eq(ctx, 0x1000);
    ck_assert_ok(cuabi_device_synchronize(d));
    ck_assert_ok(cuabi_device_release(d));
    ck_assert_int_eq(fake_ctx_refs[0], 0);
}
END_TEST

static void *pop_on_another_thread(void *device)
{
    return (void *)(intptr_t)cuabi_device_pop_current(device);
}

START_TEST(push_and_pop_current_nest_and_refuse_mismatches)
{
    cuabi_device *d0, *d1, *again;
    size_t live = cuabi__handle_live_count();
    ck_assert_ok(cuabi_device_get(&d0, 0));
    ck_assert_ok(cuabi_device_get(&d1, 1));
    ck_assert_status(cuabi_device_pop_current(d0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("nothing was pushed");
    /* NULL, another type's handle, a released one: refused, nothing pushed */
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, d0, NULL));
    ck_assert_status(cuabi_device_push_current(NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_device_pop_current(NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_device_push_current((cuabi_device *)s), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_device_pop_current((cuabi_device *)s), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_stream_release(s));
    cuabi_device *gone;
    ck_assert_ok(cuabi_device_get(&gone, 1));
    ck_assert_ok(cuabi_device_release(d1));
    ck_assert_ok(cuabi_device_release(gone));   /* device 1's last reference */
    ck_assert_status(cuabi_device_push_current(gone), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(fake_current);
    ck_assert_ok(cuabi_device_get(&d1, 1));
    ck_assert_ok(cuabi_device_push_current(d0));
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ok(cuabi_device_push_current(d1));
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1001);
    /* out of order: refused, nothing popped */
    ck_assert_status(cuabi_device_pop_current(d0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("reverse order");
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1001);
    /* another thread pushed nothing */
    pthread_t t;
    void *rc;
    ck_assert_int_eq(pthread_create(&t, NULL, pop_on_another_thread, d1), 0);
    ck_assert_int_eq(pthread_join(t, &rc), 0);
    ck_assert_int_eq((int)(intptr_t)rc, CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_device_pop_current(d1));
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
    /* the push keeps the device and its context alive after the caller's release */
    ck_assert_ok(cuabi_device_release(d0));
    ck_assert_int_eq(fake_ctx_refs[0], 1);
    ck_assert_ok(cuabi_device_get(&again, 0));
    ck_assert_ptr_eq(again, d0);
    /* set over since the push: refused, then popped once it is current again */
    ck_assert_ok(cuabi_device_set_current(d1));
    ck_assert_status(cuabi_device_pop_current(again), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("no longer");
    ck_assert_ok(cuabi_device_set_current(again));
    ck_assert_ok(cuabi_device_pop_current(again));
    ck_assert_ptr_null(fake_current);
    /* a refused push holds nothing */
    cuabi__fault_arm("cuCtxPushCurrent_v2", 1, false, CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_status(cuabi_device_push_current(again), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ptr_null(fake_current);
    ck_assert_status(cuabi_device_pop_current(again), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_device_release(again));
    ck_assert_ok(cuabi_device_release(d1));
    ck_assert_int_eq(fake_ctx_refs[0], 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(streams_keep_device_alive)
{
    cuabi_device *d;
    cuabi_stream *s;
    size_t live = cuabi__handle_live_count();
    ck_assert_ok(cuabi_device_get(&d, 0));
    cuabi_stream_options o = CUABI_STREAM_OPTIONS_INIT;
    o.flags = CUABI_STREAM_NON_BLOCKING;
    o.priority = -3;
    ck_assert_ok(cuabi_stream_create(&s, d, &o));
    ck_assert_int_eq(fake_live_streams, 1);
    ck_assert_ok(cuabi_device_release(d)); /* the stream still holds it */
    cuabi_device *got;
    ck_assert_ok(cuabi_stream_device(&got, s));
    ck_assert_ptr_eq(got, d);
    int prio, done;
    ck_assert_ok(cuabi_stream_priority(&prio, s));
    ck_assert_int_eq(prio, -3);
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_stream_query(&done, s));
    ck_assert_int_eq(done, 1);
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_int_eq(fake_live_streams, 0);
    ck_assert_int_eq(fake_ctx_refs[0], 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(stream_options_and_misuse)
{
    cuabi_device *d;
    cuabi_stream *s = (cuabi_stream *)1;
    ck_assert_ok(cuabi_device_get(&d, 0));
    ck_assert_ok(cuabi_stream_create(&s, d, NULL));
    ck_assert_ok(cuabi_stream_release(s));
    cuabi_stream_options o = CUABI_STREAM_OPTIONS_INIT;
    o.version = 7;
    ck_assert_status(cuabi_stream_create(&s, d, &o), CUABI_ERROR_INVALID_VERSION);
    ck_assert_ptr_null(s);
    o.version = CUABI_STREAM_OPTIONS_VERSION;
    o.flags = 0x80;
    ck_assert_status(cuabi_stream_create(&s, d, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("unknown stream flags");
    ck_assert_status(cuabi_stream_create(&s, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_create(NULL, d, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    /* A device handle is not a stream. */
    ck_assert_status(cuabi_stream_synchronize((cuabi_stream *)d), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_query(NULL, (cuabi_stream *)d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fake_live_streams, 0);
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(wrapped_and_default_streams_are_not_destroyed)
{
    cuabi_device *d;
    cuabi_stream *w, *legacy, *per_thread;
    ck_assert_ok(cuabi_device_get(&d, 1));
    ck_assert_ok(cuabi_stream_wrap(&w, d, 0xdead0));
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, d));
    ck_assert_ok(cuabi_stream_per_thread_default(&per_thread, d));
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, w));
    ck_assert_uint_eq(raw, 0xdead0);
    ck_assert_ok(cuabi_stream_raw(&raw, legacy));
    ck_assert_uint_eq(raw, (uintptr_t)CU_STREAM_LEGACY);
    ck_assert_ok(cuabi_stream_raw(&raw, per_thread));
    ck_assert_uint_eq(raw, (uintptr_t)CU_STREAM_PER_THREAD);
    /* Default streams act on the current context: the device is made current
     * for the call, and the caller's (none) comes back (test_context_rule.c
     * checks which context the call ran in). */
    fake_current = NULL;
    ck_assert_ok(cuabi_stream_synchronize(legacy));
    ck_assert_ptr_null(fake_current);
    ck_assert_ok(cuabi_stream_release(w)); /* would crash if it freed 0xdead0 */
    ck_assert_ok(cuabi_stream_release(legacy));
    ck_assert_ok(cuabi_stream_release(per_thread));
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(events_record_wait_time)
{
    cuabi_device *d, *d1;
    cuabi_stream *s, *s1;
    cuabi_event *a, *b;
    ck_assert_ok(cuabi_device_get(&d, 0));
    ck_assert_ok(cuabi_device_get(&d1, 1));
    ck_assert_ok(cuabi_stream_create(&s, d, NULL));
    ck_assert_ok(cuabi_stream_create(&s1, d1, NULL));
    ck_assert_ok(cuabi_event_create(&a, d, NULL));
    cuabi_event_options o = CUABI_EVENT_OPTIONS_INIT;
    o.flags = CUABI_EVENT_BLOCKING_SYNC;
    ck_assert_ok(cuabi_event_create(&b, d, &o));
    ck_assert_ok(cuabi_event_record(a, s));
    ck_assert_ok(cuabi_event_record(b, s));
    ck_assert_status(cuabi_event_record(a, s1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 0 but the stream on device 1");
    ck_assert_ok(cuabi_stream_wait_event(s, a));
    ck_assert_ok(cuabi_event_synchronize(b));
    int done;
    ck_assert_ok(cuabi_event_query(&done, b));
    ck_assert_int_eq(done, 1);
    float ms;
    ck_assert_ok(cuabi_event_elapsed_ms(&ms, a, b));
    ck_assert_float_eq(ms, 1.5f);
    ck_assert_status(cuabi_event_elapsed_ms(&ms, a, (cuabi_event *)s), CUABI_ERROR_INVALID_HANDLE);
    o.flags = 0x40;
    cuabi_event *bad;
    ck_assert_status(cuabi_event_create(&bad, d, &o), CUABI_ERROR_INVALID_ARGUMENT);
    uintptr_t raw;
    ck_assert_ok(cuabi_event_raw(&raw, a));
    ck_assert_uint_ne(raw, 0);
    ck_assert_ok(cuabi_event_release(a));
    ck_assert_ok(cuabi_event_release(b));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_stream_release(s1));
    ck_assert_ok(cuabi_device_release(d));
    ck_assert_ok(cuabi_device_release(d1));
    ck_assert_int_eq(fake_live_events, 0);
}
END_TEST

/* cuEventRecord that notes the context current when it ran. */
static CUcontext record_context;
static CUresult CUDAAPI record_noting_context(CUevent e, CUstream st)
{
    record_context = fake_current;
    return fake_cuEventRecord(e, st);
}

/* The streams the two wait tests use: s and other on GPU 0, on1 on GPU 1,
 * and their CUstreams. */
typedef struct {
    cuabi_device *d, *d1;
    cuabi_stream *s, *other, *on1;
    uintptr_t r, ro, r1;
} wait_streams;

static void wait_streams_make(wait_streams *w)
{
    ck_assert_ok(cuabi_device_get(&w->d, 0));
    ck_assert_ok(cuabi_device_get(&w->d1, 1));
    ck_assert_ok(cuabi_stream_create(&w->s, w->d, NULL));
    ck_assert_ok(cuabi_stream_create(&w->other, w->d, NULL));
    ck_assert_ok(cuabi_stream_create(&w->on1, w->d1, NULL));
    ck_assert_ok(cuabi_stream_raw(&w->r, w->s));
    ck_assert_ok(cuabi_stream_raw(&w->ro, w->other));
    ck_assert_ok(cuabi_stream_raw(&w->r1, w->on1));
}

START_TEST(waiting_for_a_raw_stream)
{
    wait_streams w;
    wait_streams_make(&w);
    cuabi_device *d = w.d, *d1 = w.d1;
    cuabi_stream *s = w.s, *other = w.other, *on1 = w.on1;
    uintptr_t r = w.r, ro = w.ro, r1 = w.r1;
    int events = fake_live_events;
    fake_event_records = fake_stream_waits = 0;
    /* The event cannot be made: the error, nothing kept; the next call makes it. */
    cuabi__fault_arm("cuEventCreate", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_status(cuabi_stream_wait_raw(s, 0, ro), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_int_eq(fake_live_events, events);
    ck_assert_int_eq(fake_stream_waits, 0);
    /* The stream itself: nothing queued. */
    ck_assert_ok(cuabi_stream_wait_raw(s, 0, r));
    ck_assert_int_eq(fake_event_records, 0);
    ck_assert_int_eq(fake_stream_waits, 0);
    /* Another stream of the GPU: recorded there, waited for on s. */
    ck_assert_ok(cuabi_stream_wait_raw(s, 0, ro));
    ck_assert_int_eq(fake_event_records, 1);
    ck_assert_ptr_eq(fake_last_record_stream, (CUstream)ro);
    ck_assert_int_eq(fake_stream_waits, 1);
    ck_assert_ptr_eq(fake_last_wait_stream, (CUstream)r);
    ck_assert_ptr_eq(fake_last_wait_event, fake_last_record_event);
    ck_assert_int_eq(fake_live_events, events + 1);      /* the device's event, kept */
    CUevent first = fake_last_record_event;
    ck_assert_ok(cuabi_stream_wait_raw(s, 0, ro));
    ck_assert_ptr_eq(fake_last_record_event, first);     /* reused, not made again */
    ck_assert_int_eq(fake_live_events, events + 1);
    /* A default stream (CU_STREAM_LEGACY) means the current context's: the
     * GPU's primary context is current for the record, the caller's after. */
    CUcontext mine = fake_current;
    cuabi__driver_for_test()->cuEventRecord = record_noting_context;
    record_context = NULL;
    ck_assert_ok(cuabi_stream_wait_raw(s, 0, 1));
    ck_assert_ptr_eq(fake_last_record_stream, (CUstream)1);
    ck_assert_ptr_nonnull(record_context);
    ck_assert_ptr_eq(fake_current, mine);
    cuabi__driver_for_test()->cuEventRecord = fake_cuEventRecord;
    /* Another GPU's stream: that GPU's own event. */
    ck_assert_ok(cuabi_stream_wait_raw(s, 1, r1));
    ck_assert_ptr_eq(fake_last_record_stream, (CUstream)r1);
    ck_assert_ptr_ne(fake_last_record_event, first);
    ck_assert_ptr_eq(fake_last_wait_stream, (CUstream)r);
    ck_assert_int_eq(fake_live_events, events + 2);
    /* A failing record: its error, and the lock is free again. */
    cuabi__fault_arm("cuEventRecord", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_status(cuabi_stream_wait_raw(s, 0, ro), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    int waits = fake_stream_waits;
    ck_assert_ok(cuabi_stream_wait_raw(s, 0, ro));
    ck_assert_int_eq(fake_stream_waits, waits + 1);
    /* Refusals. */
    ck_assert_status(cuabi_stream_wait_raw(s, 7, ro), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("out of range");
    ck_assert_status(cuabi_stream_wait_raw(NULL, 0, ro), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_wait_raw((cuabi_stream *)d, 0, ro), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_wait_raw(s, -1, ro), CUABI_ERROR_INVALID_ARGUMENT);
    /* The events go with their devices; a released stream is refused. */
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_status(cuabi_stream_wait_raw(s, 0, ro), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_stream_release(other));
    ck_assert_ok(cuabi_stream_release(on1));
    ck_assert_ok(cuabi_device_release(d));
    ck_assert_ok(cuabi_device_release(d1));
    ck_assert_int_eq(fake_live_events, events);
}
END_TEST

/* cuabi_stream_wait_stream: the other stream's GPU's ordering event,
 * recorded on the other stream and waited for on ours; nothing for the
 * stream itself or a handle wrapping the same CUstream. */
START_TEST(waiting_for_another_stream)
{
    wait_streams w;
    wait_streams_make(&w);
    cuabi_device *d = w.d, *d1 = w.d1;
    cuabi_stream *s = w.s, *other = w.other, *on1 = w.on1;
    uintptr_t r = w.r, ro = w.ro, r1 = w.r1;
    cuabi_stream *same;
    ck_assert_ok(cuabi_stream_wrap(&same, d, r));
    int events = fake_live_events;
    fake_event_records = fake_stream_waits = 0;
    ck_assert_ok(cuabi_stream_wait_stream(s, s));
    ck_assert_ok(cuabi_stream_wait_stream(s, same));
    ck_assert_int_eq(fake_event_records, 0);
    ck_assert_int_eq(fake_stream_waits, 0);
    ck_assert_ok(cuabi_stream_wait_stream(s, other));
    ck_assert_int_eq(fake_event_records, 1);
    ck_assert_ptr_eq(fake_last_record_stream, (CUstream)ro);
    ck_assert_ptr_eq(fake_last_wait_stream, (CUstream)r);
    ck_assert_ptr_eq(fake_last_wait_event, fake_last_record_event);
    CUevent first = fake_last_record_event;
    ck_assert_ok(cuabi_stream_wait_stream(other, s));      /* the same event, both ways */
    ck_assert_ptr_eq(fake_last_record_event, first);
    ck_assert_ptr_eq(fake_last_record_stream, (CUstream)r);
    ck_assert_ptr_eq(fake_last_wait_stream, (CUstream)ro);
    ck_assert_int_eq(fake_live_events, events + 1);
    ck_assert_ok(cuabi_stream_wait_stream(s, on1));       /* GPU 1's own event */
    ck_assert_ptr_eq(fake_last_record_stream, (CUstream)r1);
    ck_assert_ptr_ne(fake_last_record_event, first);
    ck_assert_ptr_eq(fake_last_wait_stream, (CUstream)r);
    ck_assert_int_eq(fake_live_events, events + 2);
    /* A failing record: its error, nothing waited for, the lock free again. */
    int waits = fake_stream_waits;
    cuabi__fault_arm("cuEventRecord", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_status(cuabi_stream_wait_stream(s, other), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_int_eq(fake_stream_waits, waits);
    ck_assert_ok(cuabi_stream_wait_stream(s, other));
    ck_assert_int_eq(fake_stream_waits, waits + 1);
    /* Refusals: NULL, wrong types, a released stream on either side. */
    ck_assert_status(cuabi_stream_wait_stream(NULL, other), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_wait_stream(s, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_wait_stream(s, (cuabi_stream *)d), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_stream_release(other));
    ck_assert_status(cuabi_stream_wait_stream(s, other), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_wait_stream(other, s), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_stream_release(same));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_stream_release(on1));
    ck_assert_ok(cuabi_device_release(d));
    ck_assert_ok(cuabi_device_release(d1));
    ck_assert_int_eq(fake_live_events, events);
}
END_TEST

static CUresult CUDAAPI failing_stream_create(CUstream *s, unsigned f, int p)
{
    (void)s; (void)f; (void)p;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

START_TEST(injected_driver_failure_gives_status_and_no_leak)
{
    cuabi_device *d;
    cuabi_stream *s;
    ck_assert_ok(cuabi_device_get(&d, 0));
    size_t live = cuabi__handle_live_count();
    cuabi__driver_for_test()->cuStreamCreateWithPriority = failing_stream_create;
    ck_assert_status(cuabi_stream_create(&s, d, NULL), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_error_mentions("cuStreamCreateWithPriority failed with CUDA_ERROR_OUT_OF_MEMORY");
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* A driver without an entry point fails only that call. */
    cuabi__driver_for_test()->cuStreamCreateWithPriority = fake_cuStreamCreateWithPriority;
    cuabi__driver_for_test()->cuStreamGetPriority = NULL;
    ck_assert_ok(cuabi_stream_create(&s, d, NULL));
    int prio;
    ck_assert_status(cuabi_stream_priority(&prio, s), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuStreamGetPriority");
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(allocation_failures_at_every_step)
{
    /* SQLite's method: fail the Nth allocation for N = 1, 2, ... until the
     * whole operation succeeds; each failure must be clean. */
    cuabi_device *d;
    ck_assert_ok(cuabi_device_get(&d, 0));
    size_t live = cuabi__handle_live_count();
    int failures = 0;
    for (long n = 1; n < 100; n++) {
        cuabi_stream *s = NULL;
        cuabi_event *e = NULL;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_stream_create(&s, d, NULL);
        if (st == CUABI_SUCCESS)
            st = cuabi_event_create(&e, d, NULL);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            ck_assert_ok(cuabi_event_release(e));
            ck_assert_ok(cuabi_stream_release(s));
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        if (s)
            ck_assert_ok(cuabi_stream_release(s));
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
        ck_assert_int_eq(fake_live_streams, 0);
        ck_assert_int_eq(fake_live_events, 0);
    }
    ck_assert_int_ge(failures, 2);
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(driver_failures_at_every_call)
{
    /* Fail the Nth driver call for N = 1, 2, ... through a whole
     * device -> stream -> event -> record -> sync sequence; every failure
     * must give CUABI_ERROR_CUDA with the injected code, leak nothing, and
     * leave the library usable. */
    size_t live = cuabi__handle_live_count();
    int failures = 0;
    for (long n = 1; n < 200; n++) {
        cuabi_device *d = NULL;
        cuabi_stream *s = NULL;
        cuabi_event *e = NULL;
        cuabi__fault_arm(NULL, n, false, CUDA_ERROR_LAUNCH_FAILED);
        cuabi_status st = cuabi_device_get(&d, 0);
        if (st == CUABI_SUCCESS) st = cuabi_stream_create(&s, d, NULL);
        if (st == CUABI_SUCCESS) st = cuabi_event_create(&e, d, NULL);
        if (st == CUABI_SUCCESS) st = cuabi_event_record(e, s);
        if (st == CUABI_SUCCESS) st = cuabi_stream_synchronize(s);
        long fired = cuabi__fault_count();
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        if (e) ck_assert_ok(cuabi_event_release(e));
        if (s) ck_assert_ok(cuabi_stream_release(s));
        if (d) ck_assert_ok(cuabi_device_release(d));
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
        ck_assert_int_eq(fake_live_streams, 0);
        ck_assert_int_eq(fake_live_events, 0);
        if (fired == 0) {
            ck_assert_ok(st);
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_CUDA);
        ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_LAUNCH_FAILED);
    }
    ck_assert_int_ge(failures, 5);
    /* Targeted and sticky: every cuEventCreate fails. */
    cuabi_device *d;
    cuabi_event *e;
    ck_assert_ok(cuabi_device_get(&d, 0));
    cuabi__fault_arm("cuEventCreate", 1, true, CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 0; i < 3; i++)
        ck_assert_status(cuabi_event_create(&e, d, NULL), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    ck_assert_int_eq(cuabi__fault_count(), 3);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_event_create(&e, d, NULL));
    ck_assert_ok(cuabi_event_release(e));
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("device_cpu");
    TCase *tc = tcase_create("fake driver");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, device_count_and_get);
    tcase_add_test(tc, device_properties_and_attributes);
    tcase_add_test(tc, primary_context_retained_once_and_released);
    tcase_add_test(tc, push_and_pop_current_nest_and_refuse_mismatches);
    tcase_add_test(tc, streams_keep_device_alive);
    tcase_add_test(tc, stream_options_and_misuse);
    tcase_add_test(tc, wrapped_and_default_streams_are_not_destroyed);
    tcase_add_test(tc, events_record_wait_time);
    tcase_add_test(tc, waiting_for_a_raw_stream);
    tcase_add_test(tc, waiting_for_another_stream);
    tcase_add_test(tc, injected_driver_failure_gives_status_and_no_leak);
    tcase_add_test(tc, allocation_failures_at_every_step);
    tcase_add_test(tc, driver_failures_at_every_call);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
