/* The handle registry: live, NULL, foreign, destroyed and wrong-type handles. */
#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

#include <pthread.h>

typedef struct fake_obj {
    cuabi__object base;
    int *destroyed;
} fake_obj;

static void fake_destroy(cuabi__object *o)
{
    fake_obj *f = (fake_obj *)o;
    (*f->destroyed)++;
    free(f);
}

static fake_obj *fake_new(cuabi__handle_type type, int *destroyed)
{
    fake_obj *f = calloc(1, sizeof *f);
    f->destroyed = destroyed;
    ck_assert_ok(cuabi__handle_register(&f->base, type, fake_destroy));
    return f;
}

START_TEST(register_get_release)
{
    int destroyed = 0;
    size_t live = cuabi__handle_live_count();
    fake_obj *f = fake_new(CUABI__T_STREAM, &destroyed);
    void *h = (void *)(uintptr_t)f->base.handle;
    ck_assert_uint_eq(cuabi__handle_live_count(), live + 1);
    void *obj = NULL;
    ck_assert_ok(cuabi__handle_get(h, CUABI__T_STREAM, &obj, "t"));
    ck_assert_ptr_eq(obj, f);
    ck_assert_ok(cuabi_stream_retain(h));
    ck_assert_ok(cuabi_stream_release(h));
    ck_assert_int_eq(destroyed, 0);
    ck_assert_ok(cuabi_stream_release(h));
    ck_assert_int_eq(destroyed, 1);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* Destroyed: every later use is an invalid handle, not a crash. */
    ck_assert_status(cuabi_stream_release(h), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("already released");
    uintptr_t raw;
    ck_assert_status(cuabi_stream_raw(&raw, h), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(destroyed, 1);
}
END_TEST

START_TEST(null_and_foreign_handles)
{
    uintptr_t raw;
    int stack_var = 0;
    void *heap = malloc(64);
    ck_assert_status(cuabi_stream_raw(&raw, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("NULL");
    ck_assert_status(cuabi_stream_raw(&raw, (cuabi_stream *)&stack_var), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("not a cuabi handle");
    ck_assert_status(cuabi_stream_raw(&raw, heap), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_raw(&raw, (cuabi_stream *)(uintptr_t)0x1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_raw(&raw, (cuabi_stream *)(uintptr_t)UINT64_MAX),
                     CUABI_ERROR_INVALID_HANDLE);
    /* Right magic, slot never allocated. */
    ck_assert_status(cuabi_stream_raw(&raw, (cuabi_stream *)(uintptr_t)UINT64_C(0xCAB1000001FFFFFF)),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_event_release((cuabi_event *)heap), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_device_release(NULL), CUABI_ERROR_INVALID_HANDLE);
    free(heap);
}
END_TEST

START_TEST(wrong_type_handles)
{
    int destroyed = 0;
    fake_obj *f = fake_new(CUABI__T_EVENT, &destroyed);
    void *h = (void *)(uintptr_t)f->base.handle;
    uintptr_t raw;
    ck_assert_status(cuabi_stream_raw(&raw, h), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("is a cuabi_event, expected cuabi_stream");
    ck_assert_status(cuabi_stream_release(h), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_device_retain(h), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(destroyed, 0);
    ck_assert_ok(cuabi_event_release(h));
    ck_assert_int_eq(destroyed, 1);
}
END_TEST

START_TEST(stale_handle_stays_invalid_after_slot_reuse)
{
    int destroyed = 0;
    fake_obj *a = fake_new(CUABI__T_STREAM, &destroyed);
    void *stale = (void *)(uintptr_t)a->base.handle;
    ck_assert_ok(cuabi_stream_release(stale));
    /* Churn through enough handles to reuse the slot. */
    for (int i = 0; i < 5000; i++) {
        fake_obj *b = fake_new(CUABI__T_STREAM, &destroyed);
        ck_assert_ptr_ne((void *)(uintptr_t)b->base.handle, stale);
        ck_assert_ok(cuabi_stream_release((void *)(uintptr_t)b->base.handle));
    }
    uintptr_t raw;
    ck_assert_status(cuabi_stream_raw(&raw, stale), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(destroyed, 5001);
}
END_TEST

START_TEST(register_fails_cleanly_when_allocation_fails)
{
    /* With every allocation failing, registrations succeed only while a
     * slot is free; the first one that needs a new chunk must fail with
     * OUT_OF_MEMORY and register nothing. Then it works again. */
    enum { N = 2 * 4096 + 2 };
    static fake_obj *objs[N];
    int destroyed = 0, n = 0;
    cuabi_status st = CUABI_SUCCESS;
    cuabi__alloc_fail_at(1, true);
    while (n < N) {
        fake_obj *f = calloc(1, sizeof *f);
        f->destroyed = &destroyed;
        size_t live = cuabi__handle_live_count();
        st = cuabi__handle_register(&f->base, CUABI__T_STREAM, fake_destroy);
        if (st != CUABI_SUCCESS) {
            ck_assert_uint_eq(cuabi__handle_live_count(), live);
            free(f);
            break;
        }
        objs[n++] = f;
    }
    cuabi__alloc_fail_at(0, false);
    ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
    ck_assert_error_mentions("out of host memory");
    objs[n] = fake_new(CUABI__T_STREAM, &destroyed);
    n++;
    for (int i = 0; i < n; i++)
        ck_assert_ok(cuabi_stream_release((void *)(uintptr_t)objs[i]->base.handle));
    ck_assert_int_eq(destroyed, n);
}
END_TEST

static void *churn(void *arg)
{
    int *destroyed = arg;
    for (int i = 0; i < 20000; i++) {
        fake_obj *f = calloc(1, sizeof *f);
        f->destroyed = destroyed;
        if (cuabi__handle_register(&f->base, CUABI__T_EVENT, fake_destroy) != CUABI_SUCCESS)
            return (void *)1;
        void *h = (void *)(uintptr_t)f->base.handle;
        if (cuabi_event_retain(h) || cuabi_event_release(h) || cuabi_event_release(h))
            return (void *)1;
    }
    return NULL;
}

START_TEST(threads_register_and_release_concurrently)
{
    enum { T = 8 };
    pthread_t t[T];
    static int destroyed[T];
    size_t live = cuabi__handle_live_count();
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &destroyed[i]), 0);
    for (int i = 0; i < T; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
        ck_assert_int_eq(destroyed[i], 20000);
    }
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

/* Handles made on one thread and released on another: freed slots land in
 * the releasing thread's ring, spill to the global list when it fills, and
 * return there when the thread ends; none is lost or handed out twice. */
enum { HANDOFF = 3000 };
static fake_obj *handoff[HANDOFF];
static int handoff_destroyed;

static void *make_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < HANDOFF; i++)
        if (!(handoff[i] = fake_new(CUABI__T_EVENT, &handoff_destroyed)))
            return (void *)1;
    return NULL;
}

static void *release_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < HANDOFF; i++)
        if (cuabi_event_release((void *)(uintptr_t)handoff[i]->base.handle))
            return (void *)1;
    return NULL;
}

START_TEST(handles_released_on_another_thread)
{
    size_t live = cuabi__handle_live_count();
    for (int round = 0; round < 3; round++) {
        pthread_t t;
        void *r;
        ck_assert_int_eq(pthread_create(&t, NULL, make_many, NULL), 0);
        pthread_join(t, &r);
        ck_assert_ptr_null(r);
        ck_assert_uint_eq(cuabi__handle_live_count(), live + HANDOFF);
        /* all distinct */
        for (int i = 1; i < HANDOFF; i++)
            ck_assert_uint_ne(handoff[i]->base.handle, handoff[i - 1]->base.handle);
        ck_assert_int_eq(pthread_create(&t, NULL, release_many, NULL), 0);
        pthread_join(t, &r);
        ck_assert_ptr_null(r);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    ck_assert_int_eq(handoff_destroyed, 3 * HANDOFF);
    /* one object churned on one thread cycles through several slots */
    uint64_t first = 0;
    int same = 0;
    for (int i = 0; i < 100; i++) {
        int d = 0;
        fake_obj *f = fake_new(CUABI__T_STREAM, &d);
        uint32_t idx = (uint32_t)(f->base.handle & 0xffffff);
        if (i == 0)
            first = idx;
        else
            same += idx == first;
        ck_assert_ok(cuabi_stream_release((void *)(uintptr_t)f->base.handle));
    }
    ck_assert_int_lt(same, 10);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("handle");
    TCase *tc = tcase_create("registry");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, register_get_release);
    tcase_add_test(tc, null_and_foreign_handles);
    tcase_add_test(tc, wrong_type_handles);
    tcase_add_test(tc, stale_handle_stays_invalid_after_slot_reuse);
    tcase_add_test(tc, register_fails_cleanly_when_allocation_fails);
    tcase_add_test(tc, threads_register_and_release_concurrently);
    tcase_add_test(tc, handles_released_on_another_thread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
