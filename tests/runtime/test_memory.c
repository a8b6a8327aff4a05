/* Memory resources: plain host and user resources for real, device pool,
 * pinned and managed resources against the fake driver. */
#include "testutil.h"
#include "fake_memory.h"
#include "runtime/memory.h"

static void setup(void) { fake_driver_install(); fake_memory_install(); }
static void teardown(void)
{
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

START_TEST(host_resource_allocates_aligned)
{
    cuabi_memory_resource *r;
    size_t live = cuabi__handle_live_count();
    ck_assert_ok(cuabi_memory_resource_host(&r));
    uintptr_t p;
    ck_assert_ok(cuabi_memory_resource_allocate(&p, r, 100, 0, NULL));
    ck_assert_uint_eq(p % 64, 0);
    memset((void *)p, 1, 100);
    ck_assert_ok(cuabi_memory_resource_deallocate(r, p, 100, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_allocate(&p, r, 10, 4096, NULL));
    ck_assert_uint_eq(p % 4096, 0);
    ck_assert_ok(cuabi_memory_resource_deallocate(r, p, 10, 4096, NULL));
    ck_assert_ok(cuabi_memory_resource_allocate(&p, r, 0, 0, NULL));
    ck_assert_uint_eq(p, 0);
    ck_assert_ok(cuabi_memory_resource_deallocate(r, 0, 0, 0, NULL));
    ck_assert_status(cuabi_memory_resource_allocate(&p, r, 10, 48, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a power of two");
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_memory_resource_kind(&k, r));
    ck_assert_int_eq(k, CUABI_MEMORY_HOST);
    cuabi_device *d = (cuabi_device *)1;
    ck_assert_ok(cuabi_memory_resource_device(&d, r));
    ck_assert_ptr_null(d);
    ck_assert_status(cuabi_memory_resource_pool(&p, r), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_memory_resource_trim(r, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(resource_handle_misuse)
{
    cuabi_memory_resource *r;
    cuabi_device *dev;
    uintptr_t p;
    cuabi_memory_kind k;
    ck_assert_status(cuabi_memory_resource_host(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_memory_resource_release(r));
    /* destroyed */
    ck_assert_status(cuabi_memory_resource_allocate(&p, r, 8, 0, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("already released");
    ck_assert_status(cuabi_memory_resource_deallocate(r, 0, 0, 0, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_kind(&k, r), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_release(r), CUABI_ERROR_INVALID_HANDLE);
    /* NULL and wrong type */
    cuabi_memory_resource *wrong = (cuabi_memory_resource *)dev;
    ck_assert_status(cuabi_memory_resource_allocate(&p, NULL, 8, 0, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_allocate(&p, wrong, 8, 0, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("expected cuabi_memory_resource");
    ck_assert_status(cuabi_memory_resource_kind(&k, wrong), CUABI_ERROR_INVALID_HANDLE);
    cuabi_device *got;
    ck_assert_status(cuabi_memory_resource_device(&got, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_pool(&p, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_trim(wrong, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_retain(wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_device_default(&r, (cuabi_device *)0x1234),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_pinned(&r, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_managed(NULL, dev), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_memory_resource_pool_create(&r, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    /* NULL outputs */
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_status(cuabi_memory_resource_allocate(NULL, r, 8, 0, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_memory_resource_kind(NULL, r), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_memory_resource_device(NULL, r), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_memory_resource_pool(NULL, r), CUABI_ERROR_INVALID_ARGUMENT);
    /* a wrong-type stream */
    ck_assert_status(cuabi_memory_resource_allocate(&p, r, 8, 0, (cuabi_stream *)dev),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

/* A user resource that counts its calls. */
typedef struct counting {
    int allocs, deallocs, releases, fail;
    uintptr_t last_stream;
    size_t last_alignment;
} counting;

static int user_alloc(uintptr_t *out, size_t size, size_t alignment, uintptr_t stream, void *p)
{
    counting *c = p;
    if (c->fail)
        return 7;
    c->allocs++;
    c->last_stream = stream;
    c->last_alignment = alignment;
    void *m = NULL;
    if (posix_memalign(&m, alignment < sizeof(void *) ? sizeof(void *) : alignment, size))
        return 1;
    *out = (uintptr_t)m;
    return 0;
}
static int user_dealloc(uintptr_t ptr, size_t size, size_t alignment, uintptr_t stream, void *p)
{
    counting *c = p;
    (void)size;
    ck_assert_uint_eq(alignment, c->last_alignment);
    c->deallocs++;
    c->last_stream = stream;
    free((void *)ptr);
    return c->fail;
}
static void user_release(void *p) { ((counting *)p)->releases++; }

START_TEST(user_resource_calls_back)
{
    counting c = { 0 };
    cuabi_device *dev;
    cuabi_stream *s;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_wrap(&s, dev, 0xabc0));
    cuabi_memory_resource_callbacks cb = CUABI_MEMORY_RESOURCE_CALLBACKS_INIT;
    cb.allocate = user_alloc;
    cb.deallocate = user_dealloc;
    cb.release_payload = user_release;
    ck_assert_ok(cuabi_memory_resource_user(&r, dev, &cb, &c));
    ck_assert_ok(cuabi_device_release(dev)); /* the resource keeps it */
    uintptr_t p;
    ck_assert_ok(cuabi_memory_resource_allocate(&p, r, 64, 0, s));
    ck_assert_int_eq(c.allocs, 1);
    ck_assert_uint_eq(c.last_stream, 0xabc0);
    ck_assert_uint_eq(c.last_alignment, 256);
    ck_assert_ok(cuabi_memory_resource_deallocate(r, p, 64, 0, NULL));
    ck_assert_uint_eq(c.last_stream, 0);
    /* A buffer keeps the resource alive; the payload goes after it. */
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 32, 1024, s));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(c.releases, 0);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(c.deallocs, 2);
    ck_assert_uint_eq(c.last_stream, 0xabc0); /* freed on its allocation stream */
    ck_assert_int_eq(c.releases, 1);
    ck_assert_ok(cuabi_stream_release(s));
}
END_TEST

START_TEST(user_resource_failures)
{
    counting c = { 0 };
    cuabi_memory_resource *r = (cuabi_memory_resource *)1;
    cuabi_memory_resource_callbacks cb = CUABI_MEMORY_RESOURCE_CALLBACKS_INIT;
    ck_assert_status(cuabi_memory_resource_user(&r, NULL, &cb, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    ck_assert_error_mentions("required");
    cb.allocate = user_alloc;
    cb.deallocate = user_dealloc;
    cb.release_payload = user_release;
    ck_assert_status(cuabi_memory_resource_user(&r, NULL, &cb, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("needs a device");
    cb.kind = 9;
    ck_assert_status(cuabi_memory_resource_user(&r, NULL, &cb, &c), CUABI_ERROR_INVALID_ARGUMENT);
    cb.kind = CUABI_MEMORY_HOST;
    cb.version = 99;
    ck_assert_status(cuabi_memory_resource_user(&r, NULL, &cb, &c), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_memory_resource_user(&r, NULL, NULL, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_memory_resource_user(NULL, NULL, &cb, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_memory_resource_user(&r, (cuabi_device *)&c, &cb, &c),
                     CUABI_ERROR_INVALID_VERSION);
    cb.version = CUABI_MEMORY_RESOURCE_CALLBACKS_VERSION;
    ck_assert_status(cuabi_memory_resource_user(&r, (cuabi_device *)&c, &cb, &c),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(c.releases, 0); /* failures call nothing */
    ck_assert_ok(cuabi_memory_resource_user(&r, NULL, &cb, &c));
    uintptr_t p;
    ck_assert_ok(cuabi_memory_resource_allocate(&p, r, 16, 0, NULL));
    ck_assert_uint_eq(c.last_alignment, 64);
    c.fail = 3;
    ck_assert_status(cuabi_memory_resource_deallocate(r, p, 16, 0, NULL), CUABI_ERROR_CALLBACK);
    ck_assert_error_mentions("returned 3");
    ck_assert_status(cuabi_memory_resource_allocate(&p, r, 16, 0, NULL), CUABI_ERROR_CALLBACK);
    ck_assert_error_mentions("allocate callback failed");
    cuabi_buffer *b = (cuabi_buffer *)1;
    ck_assert_status(cuabi_buffer_allocate(&b, r, 16, 0, NULL), CUABI_ERROR_CALLBACK);
    ck_assert_ptr_null(b);
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(c.releases, 1);
}
END_TEST

START_TEST(device_pools_on_the_fake_driver)
{
    cuabi_device *dev;
    cuabi_stream *s;
    cuabi_memory_resource *def, *pool;
    ck_assert_ok(cuabi_device_get(&dev, 1));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&def, dev));
    uintptr_t raw;
    ck_assert_ok(cuabi_memory_resource_pool(&raw, def));
    ck_assert_uint_eq(raw, (uintptr_t)&fake_default_pool_token[1]);
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_memory_resource_kind(&k, def));
    ck_assert_int_eq(k, CUABI_MEMORY_DEVICE);
    cuabi_device *got;
    ck_assert_ok(cuabi_memory_resource_device(&got, def));
    ck_assert_ptr_eq(got, dev);
    ck_assert_ok(cuabi_memory_resource_pool_create(&pool, dev, NULL));
    ck_assert_uint_eq(fake_last_threshold, UINT64_MAX);
    ck_assert_int_eq(fake_live_pools, 1);
    cuabi_memory_resource *pool2;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.release_threshold = 1 << 20;
    ck_assert_ok(cuabi_memory_resource_pool_create(&pool2, dev, &o));
    ck_assert_uint_eq(fake_last_threshold, 1 << 20);
    o.version = 0;
    cuabi_memory_resource *bad;
    ck_assert_status(cuabi_memory_resource_pool_create(&bad, dev, &o), CUABI_ERROR_INVALID_VERSION);
    ck_assert_ok(cuabi_memory_resource_trim(pool, 0));
    uintptr_t p;
    fake_current = NULL; /* the NULL stream path makes the device current for the call */
    ck_assert_ok(cuabi_memory_resource_allocate(&p, pool, 1000, 0, NULL));
    ck_assert_ptr_null(fake_current);   /* and gives the caller's (none) back */
    ck_assert_int_eq(fake_live_allocs, 1);
    ck_assert_ok(cuabi_memory_resource_deallocate(pool, p, 1000, 0, s));
    uintptr_t sraw;
    ck_assert_ok(cuabi_stream_raw(&sraw, s));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)sraw);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_status(cuabi_memory_resource_allocate(&p, pool, 8, 512, s), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("256");
    ck_assert_ok(cuabi_memory_resource_release(pool2));
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_int_eq(fake_live_pools, 0);
    ck_assert_ok(cuabi_memory_resource_release(def));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_device_release(dev));
    ck_assert_int_eq(fake_ctx_refs[1], 0);
}
END_TEST

START_TEST(pinned_and_managed_on_the_fake_driver)
{
    cuabi_device *dev;
    cuabi_memory_resource *pin, *man;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_memory_resource_pinned(&pin, dev));
    ck_assert_ok(cuabi_memory_resource_managed(&man, dev));
    ck_assert_ok(cuabi_device_release(dev));
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_memory_resource_kind(&k, pin));
    ck_assert_int_eq(k, CUABI_MEMORY_PINNED);
    ck_assert_ok(cuabi_memory_resource_kind(&k, man));
    ck_assert_int_eq(k, CUABI_MEMORY_MANAGED);
    uintptr_t a, b;
    fake_current = NULL;
    ck_assert_ok(cuabi_memory_resource_allocate(&a, pin, 100, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_allocate(&b, man, 100, 128, NULL));
    ck_assert_int_eq(fake_live_allocs, 2);
    ck_assert_ok(cuabi_memory_resource_deallocate(pin, a, 100, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_deallocate(man, b, 100, 128, NULL));
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_ok(cuabi_memory_resource_release(pin));
    ck_assert_ok(cuabi_memory_resource_release(man));
    ck_assert_int_eq(fake_ctx_refs[0], 0);
}
END_TEST

static CUresult CUDAAPI failing_set_attribute(CUmemoryPool p, CUmemPool_attribute a, void *v)
{
    (void)p; (void)a; (void)v;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

START_TEST(driver_and_allocation_failures_leak_nothing)
{
    cuabi_device *dev;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    size_t live = cuabi__handle_live_count();
    cuabi__driver_for_test()->cuMemPoolSetAttribute = failing_set_attribute;
    ck_assert_status(cuabi_memory_resource_pool_create(&r, dev, NULL),
                     CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    ck_assert_error_mentions("cuMemPoolSetAttribute");
    ck_assert_int_eq(fake_live_pools, 0);
    cuabi__driver_for_test()->cuMemPoolSetAttribute = fake_cuMemPoolSetAttribute;
    cuabi__driver_for_test()->cuMemAllocManaged = NULL;
    ck_assert_ok(cuabi_memory_resource_managed(&r, dev));
    uintptr_t p;
    ck_assert_status(cuabi_memory_resource_allocate(&p, r, 8, 0, NULL),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_ok(cuabi_memory_resource_release(r));
    int failures = 0;
    for (long n = 1; n < 50; n++) {
        r = NULL;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_memory_resource_pool_create(&r, dev, NULL);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            ck_assert_ok(cuabi_memory_resource_release(r));
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(r);
        ck_assert_int_eq(fake_live_pools, 0);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    ck_assert_int_ge(failures, 1);
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("resources");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, host_resource_allocates_aligned);
    tcase_add_test(tc, resource_handle_misuse);
    tcase_add_test(tc, user_resource_calls_back);
    tcase_add_test(tc, user_resource_failures);
    tcase_add_test(tc, device_pools_on_the_fake_driver);
    tcase_add_test(tc, pinned_and_managed_on_the_fake_driver);
    tcase_add_test(tc, driver_and_allocation_failures_leak_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
