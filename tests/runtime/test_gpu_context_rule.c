/* The context rule on a real GPU (tests/runtime/test_context_rule.c is the
 * fake driver's table): a cuabi call gives the calling thread's current
 * context back as it found it. With one GPU: none current before, none
 * after; device 0 current, still current and never switched. With two:
 * device 1's current while the call works on device 0, device 1's after --
 * the H100 pair where torch followed a context cuabi left current. Exits 77
 * without a GPU. */
#include "testutil.h"
#include "platform/loader.h"

#include <stdint.h>

static int ndev;
static cuabi_device *dev0, *dev1;
static const cuabi__driver *drv;

static CUcontext current(void)
{
    CUcontext c = NULL;
    ck_assert_int_eq(drv->cuCtxGetCurrent(&c), CUDA_SUCCESS);
    return c;
}

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    dev1 = NULL;
    if (ndev > 1)
        ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi__driver_get(&drv));
}

static void teardown(void)
{
    drv->cuCtxSetCurrent(NULL);
    if (dev1)
        cuabi_device_release(dev1);
    cuabi_device_release(dev0);
}

/* ------------------------------------------------------------ the calls */

static cuabi_status c_synchronize(void) { return cuabi_device_synchronize(dev0); }

static cuabi_status c_memory_info(void)
{
    uint64_t f, t;
    return cuabi_device_memory_info(&f, &t, dev0);
}

static cuabi_status c_stream_event(void)
{
    cuabi_stream *s;
    cuabi_event *e;
    cuabi_status st = cuabi_stream_create(&s, dev0, NULL);
    if (st != CUABI_SUCCESS)
        return st;
    st = cuabi_event_create(&e, dev0, NULL);
    if (st == CUABI_SUCCESS) {
        st = cuabi_event_record(e, s);
        if (st == CUABI_SUCCESS)
            st = cuabi_event_synchronize(e);
        cuabi_event_release(e);
    }
    cuabi_stream_release(s);
    return st;
}

static cuabi_status c_legacy(void)
{
    cuabi_stream *legacy;
    cuabi_status st = cuabi_stream_legacy_default(&legacy, dev0);
    if (st == CUABI_SUCCESS) {
        st = cuabi_stream_synchronize(legacy);
        cuabi_stream_release(legacy);
    }
    return st;
}

/* Allocate and free without a stream, copy and fill: the device's context. */
static cuabi_status c_memory(void)
{
    cuabi_memory_resource *pool;
    cuabi_status st = cuabi_memory_resource_device_default(&pool, dev0);
    if (st != CUABI_SUCCESS)
        return st;
    cuabi_buffer *a = NULL, *b = NULL;
    st = cuabi_buffer_allocate(&a, pool, 1 << 20, 0, NULL);
    if (st == CUABI_SUCCESS)
        st = cuabi_buffer_allocate(&b, pool, 1 << 20, 0, NULL);
    if (st == CUABI_SUCCESS)
        st = cuabi_buffer_memset(a, 0, 0x5a, 1, 1 << 20, NULL);
    if (st == CUABI_SUCCESS)
        st = cuabi_buffer_copy(b, 0, a, 0, 1 << 20, NULL);
    if (b)
        cuabi_buffer_destroy(b);
    if (a)
        cuabi_buffer_destroy(a);
    cuabi_memory_resource_release(pool);
    return st;
}

static cuabi_status c_pool_create(void)
{
    cuabi_memory_resource *r;
    cuabi_status st = cuabi_memory_resource_pool_create(&r, dev0, NULL);
    if (st == CUABI_SUCCESS) {
        uintptr_t p;
        st = cuabi_memory_resource_allocate(&p, r, 4096, 0, NULL);
        if (st == CUABI_SUCCESS)
            st = cuabi_memory_resource_deallocate(r, p, 4096, 0, NULL);
        cuabi_memory_resource_release(r);
    }
    return st;
}

static cuabi_status c_pinned(void)
{
    cuabi_memory_resource *r;
    cuabi_status st = cuabi_memory_resource_pinned(&r, dev0);
    if (st == CUABI_SUCCESS) {
        cuabi_buffer *b;
        st = cuabi_buffer_allocate(&b, r, 4096, 0, NULL);
        if (st == CUABI_SUCCESS)
            cuabi_buffer_destroy(b);
        cuabi_memory_resource_release(r);
    }
    return st;
}

/* Peer access from device 0 to device 1 (two GPUs that can be peers). */
static cuabi_status c_peer(void)
{
    int can = 0;
    cuabi_status st = cuabi_device_can_access_peer(&can, dev0, dev1);
    if (st != CUABI_SUCCESS || !can)
        return st;
    st = cuabi_peer_enable(dev0, dev1);
    if (st == CUABI_SUCCESS)
        st = cuabi_peer_disable(dev0, dev1);
    return st;
}

typedef struct rule_case {
    const char *name;
    cuabi_status (*fn)(void);
    bool two_gpus;
} rule_case;

static const rule_case cases[] = {
    { "device synchronize", c_synchronize, false },
    { "memory info", c_memory_info, false },
    { "stream and event", c_stream_event, false },
    { "legacy stream synchronize", c_legacy, false },
    { "allocate, fill, copy, free without a stream", c_memory, false },
    { "pool create, allocate, free", c_pool_create, false },
    { "pinned memory", c_pinned, false },
    { "peer access", c_peer, true },
};
enum { NCASES = sizeof cases / sizeof cases[0] };

START_TEST(no_context_stays_none)
{
    const rule_case *c = &cases[_i];
    if (c->two_gpus && ndev < 2)
        return;
    ck_assert_int_eq(drv->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    cuabi_status st = c->fn();
    ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(current() == NULL, "%s: left a context current (the caller had none)", c->name);
}
END_TEST

START_TEST(current_device_stays)
{
    const rule_case *c = &cases[_i];
    if (c->two_gpus && ndev < 2)
        return;
    ck_assert_ok(cuabi_device_set_current(dev0));
    CUcontext before = current();
    cuabi_status st = c->fn();
    ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(current() == before, "%s: device 0's context is no longer current", c->name);
}
END_TEST

START_TEST(other_device_comes_back)
{
    const rule_case *c = &cases[_i];
    if (ndev < 2) {
        printf("(%s: one GPU, the two-device case is not run)\n", c->name);
        return;
    }
    ck_assert_ok(cuabi_device_set_current(dev1));
    CUcontext one = current();
    uintptr_t raw1;
    ck_assert_ok(cuabi_device_context(&raw1, dev1));
    ck_assert_ptr_eq(one, (CUcontext)raw1);
    cuabi_status st = c->fn();
    ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(current() == one, "%s: device 1's context is no longer current", c->name);
}
END_TEST

/* A failure after the switch: a copy past the buffer's end is refused by
 * cuabi before the driver; an allocation too large for the device is
 * refused by the driver, in device 0's context. */
START_TEST(failure_gives_it_back)
{
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev0));
    if (ndev > 1)
        ck_assert_ok(cuabi_device_set_current(dev1));
    else
        ck_assert_int_eq(drv->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CUcontext before = current();
    uintptr_t p = 0;
    cuabi_status st = cuabi_memory_resource_allocate(&p, pool, (size_t)1 << 52, 0, NULL);
    ck_assert_int_ne(st, CUABI_SUCCESS);
    ck_assert_ptr_eq(current(), before);
    cuabi_memory_resource_release(pool);
}
END_TEST

START_TEST(set_current_sets_it)
{
    ck_assert_int_eq(drv->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    ck_assert_ok(cuabi_device_set_current(dev0));
    uintptr_t raw0;
    ck_assert_ok(cuabi_device_context(&raw0, dev0));
    ck_assert_ptr_eq(current(), (CUcontext)raw0);
    if (ndev > 1) {
        ck_assert_ok(cuabi_device_synchronize(dev1));     /* other work: device 0 stays */
        ck_assert_ptr_eq(current(), (CUcontext)raw0);
    }
}
END_TEST

/* The other exception: a push makes the device's context current until its
 * pop gives the previous one (none, or device 0's) back; a pop that does not
 * match is refused and pops nothing. */
START_TEST(push_and_pop_current)
{
    cuabi_device *other = ndev > 1 ? dev1 : dev0;
    uintptr_t raw0, raw_other;
    ck_assert_ok(cuabi_device_context(&raw0, dev0));
    ck_assert_ok(cuabi_device_context(&raw_other, other));
    ck_assert_int_eq(drv->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    ck_assert_ok(cuabi_device_push_current(other));
    ck_assert_ptr_eq(current(), (CUcontext)raw_other);
    ck_assert_ok(cuabi_device_synchronize(dev0));        /* other work: the push stays */
    ck_assert_ptr_eq(current(), (CUcontext)raw_other);
    ck_assert_ok(cuabi_device_pop_current(other));
    ck_assert_ptr_null(current());
    ck_assert_ok(cuabi_device_set_current(dev0));
    ck_assert_ok(cuabi_device_push_current(other));
    ck_assert_ok(cuabi_device_push_current(dev0));
    if (other != dev0) {
        ck_assert_status(cuabi_device_pop_current(other), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_eq(current(), (CUcontext)raw0);
    }
    ck_assert_ok(cuabi_device_pop_current(dev0));
    ck_assert_ptr_eq(current(), (CUcontext)raw_other);
    ck_assert_ok(cuabi_device_pop_current(other));
    ck_assert_ptr_eq(current(), (CUcontext)raw0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_context_rule");
    TCase *tc = tcase_create("rule");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, no_context_stays_none, 0, NCASES);
    tcase_add_loop_test(tc, current_device_stays, 0, NCASES);
    tcase_add_loop_test(tc, other_device_comes_back, 0, NCASES);
    tcase_add_test(tc, failure_gives_it_back);
    tcase_add_test(tc, set_current_sets_it);
    tcase_add_test(tc, push_and_pop_current);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    ndev = cuabi_test_require_gpu();
    return cuabi_test_run(suite());
}
