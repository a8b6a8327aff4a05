/* Memory resources, buffers and DLPack export on a real GPU (SKIP without
 * one): device pools, pinned and managed memory, copies in every direction,
 * memsets of each width, free on a stream. */
#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

static cuabi_device *dev;
static cuabi_stream *stream;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
}
static void teardown(void)
{
    ck_assert_ok(cuabi_stream_release(stream));
    ck_assert_ok(cuabi_device_release(dev));
}

/* Round-trip data through a buffer of `r` in every direction, and check
 * memsets of each width by copying back. */
static void exercise(cuabi_memory_resource *r, cuabi_memory_kind want)
{
    enum { N = 1 << 16 };
    uint32_t *in = malloc(N * 4), *out = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++) in[i] = i * 2654435761u;
    cuabi_buffer *a, *b, *h;
    cuabi_memory_resource *host;
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_buffer_allocate(&a, r, N * 4, 0, stream));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, N * 4, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&h, host, N * 4, 0, NULL));
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_buffer_kind(&k, a));
    ck_assert_int_eq(k, want);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, a));
    ck_assert_uint_eq(p % 256, 0);
    /* host -> a (sync), a -> b (stream), b -> plain host buffer (sync),
     * host buffer -> a (stream), a -> host memory (stream) */
    ck_assert_ok(cuabi_buffer_copy_from_host(a, 0, in, N * 4, NULL));
    ck_assert_ok(cuabi_buffer_copy(b, 0, a, 0, N * 4, stream));
    ck_assert_ok(cuabi_stream_synchronize(stream));
    ck_assert_ok(cuabi_buffer_copy(h, 0, b, 0, N * 4, NULL));
    ck_assert_ok(cuabi_buffer_memset(a, 0, 0, 4, N, NULL));
    ck_assert_ok(cuabi_buffer_copy(a, 0, h, 0, N * 4, stream));
    memset(out, 0, N * 4);
    ck_assert_ok(cuabi_buffer_copy_to_host(out, a, 0, N * 4, stream));
    ck_assert_ok(cuabi_stream_synchronize(stream));
    ck_assert_int_eq(memcmp(in, out, N * 4), 0);
    /* sync copy with offsets */
    ck_assert_ok(cuabi_buffer_copy(b, 4, a, 8, 16, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 4, 16, NULL));
    ck_assert_int_eq(memcmp(out, in + 2, 16), 0);
    /* memsets of each width, sync and on the stream */
    ck_assert_ok(cuabi_buffer_memset(a, 0, 0x5a, 1, 16, NULL));
    ck_assert_ok(cuabi_buffer_memset(a, 16, 0xbeef, 2, 8, stream));
    ck_assert_ok(cuabi_buffer_memset(a, 32, 0xcafef00d, 4, 4, stream));
    ck_assert_ok(cuabi_buffer_memset(a, 48, 0x1234, 2, 2, NULL));
    ck_assert_ok(cuabi_buffer_memset(a, 52, 0x77, 1, 4, stream));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, a, 0, 64, stream));
    ck_assert_ok(cuabi_stream_synchronize(stream));
    ck_assert_uint_eq(out[0], 0x5a5a5a5a);
    ck_assert_uint_eq(out[3], 0x5a5a5a5a);
    ck_assert_uint_eq(out[4], 0xbeefbeef);
    ck_assert_uint_eq(out[7], 0xbeefbeef);
    ck_assert_uint_eq(out[8], 0xcafef00d);
    ck_assert_uint_eq(out[11], 0xcafef00d);
    ck_assert_uint_eq(out[12], 0x12341234);
    ck_assert_uint_eq(out[13], 0x77777777);
    ck_assert_uint_eq(out[14], in[14]);
    /* free on a stream, and a plain destroy */
    ck_assert_ok(cuabi_buffer_free_async(a, stream));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_stream_synchronize(stream));
    ck_assert_ok(cuabi_memory_resource_release(host));
    free(in);
    free(out);
}

START_TEST(default_pool)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_device_default(&r, dev));
    uintptr_t pool;
    ck_assert_ok(cuabi_memory_resource_pool(&pool, r));
    ck_assert_uint_ne(pool, 0);
    exercise(r, CUABI_MEMORY_DEVICE);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(created_pool_with_release_threshold)
{
    cuabi_memory_resource *r;
    cuabi_memory_pool_options o = CUABI_MEMORY_POOL_OPTIONS_INIT;
    o.release_threshold = 64 << 20;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev, &o));
    uintptr_t pool;
    ck_assert_ok(cuabi_memory_resource_pool(&pool, r));
    const cuabi__driver *drv;
    ck_assert_ok(cuabi__driver_get(&drv));
    cuuint64_t threshold = 0;
    ck_assert_int_eq(drv->cuMemPoolGetAttribute((CUmemoryPool)pool,
                                                CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold), 0);
    ck_assert_uint_eq(threshold, 64 << 20);
    exercise(r, CUABI_MEMORY_DEVICE);
    /* a buffer outlives the resource handle; the pool dies after it */
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 1 << 20, 0, stream));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 1, 1, 1 << 20, stream));
    ck_assert_ok(cuabi_buffer_free_async(b, stream));
    ck_assert_ok(cuabi_stream_synchronize(stream));
}
END_TEST

START_TEST(pool_trim)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev, NULL));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 8 << 20, 0, stream));
    ck_assert_ok(cuabi_buffer_free_async(b, stream));
    ck_assert_ok(cuabi_stream_synchronize(stream));
    ck_assert_ok(cuabi_memory_resource_trim(r, 0));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(pinned)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_pinned(&r, dev));
    exercise(r, CUABI_MEMORY_PINNED);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(managed)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_managed(&r, dev));
    exercise(r, CUABI_MEMORY_MANAGED);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(dlpack_export_of_device_memory)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    cuabi_view *v;
    ck_assert_ok(cuabi_memory_resource_device_default(&r, dev));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 4 * 6 * 4, 0, stream));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0x3f800000, 4, 24, stream)); /* 1.0f */
    int64_t shape[2] = { 4, 6 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_free_async(b, stream)); /* the view keeps the memory */
    ck_assert_ok(cuabi_memory_resource_release(r));
    DLManagedTensorVersioned *e;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&e, v));
    ck_assert_ok(cuabi_view_release(v));
    int ord;
    ck_assert_ok(cuabi_device_ordinal(&ord, dev));
    ck_assert_int_eq(e->dl_tensor.device.device_type, kDLCUDA);
    ck_assert_int_eq(e->dl_tensor.device.device_id, ord);
    /* import it back as a consumer would and read it */
    cuabi_view *w;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&w, e));
    uintptr_t p;
    ck_assert_ok(cuabi_view_data_pointer(&p, w));
    float out[24];
    cuabi_buffer *wrap;
    ck_assert_ok(cuabi_buffer_wrap(&wrap, dev, CUABI_MEMORY_DEVICE, p, sizeof out, NULL, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, wrap, 0, sizeof out, stream));
    ck_assert_ok(cuabi_stream_synchronize(stream));
    ck_assert_float_eq(out[23], 1.0f);
    ck_assert_ok(cuabi_buffer_destroy(wrap));
    ck_assert_ok(cuabi_view_release(w)); /* export deleter -> view -> buffer memory freed */
    ck_assert_ok(cuabi_stream_synchronize(stream));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_memory");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, default_pool);
    tcase_add_test(tc, created_pool_with_release_threshold);
    tcase_add_test(tc, pool_trim);
    tcase_add_test(tc, pinned);
    tcase_add_test(tc, managed);
    tcase_add_test(tc, dlpack_export_of_device_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_require_gpu();
    cuabi_test_device_ordinal();
    return cuabi_test_run(suite());
}
