/* Batched copies against the fake driver (fake_memory.h's cuMemcpyBatchAsync
 * and cuMemcpy3DBatchAsync copy host memory, which is "device" memory
 * there, and record the batch's shape): mixed ends (buffers of several
 * kinds, views, raw addresses), attribute runs, empty copies, every
 * refusal before anything is queued, the single-copy path of an older
 * driver (and what it says in the result), pitched 3-D copies both ways,
 * and a batch refused during a capture. */
#include "testutil.h"
#include "fake_graph.h"
#include "fake_multigpu.h"
#include "runtime/memory.h"

static cuabi_device *dev0;
static cuabi_stream *s0;
static cuabi_memory_resource *pool, *host, *managed;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    fake_driver_install_libraries();
    fake_graph_install();
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_stream_create(&s0, dev0, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev0));
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_memory_resource_managed(&managed, dev0));
}
static void teardown(void)
{
    cuabi_memory_resource_release(managed);
    cuabi_memory_resource_release(host);
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(s0);
    cuabi_device_release(dev0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_buffer *buf(cuabi_memory_resource *r, size_t n, uint8_t seed)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, s0));
    uint8_t *h = malloc(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(seed + i);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, h, n, NULL));
    free(h);
    return b;
}
static uint8_t at(cuabi_buffer *b, size_t off)
{
    uint8_t v;
    ck_assert_ok(cuabi_buffer_copy_to_host(&v, b, off, 1, NULL));
    return v;
}

static cuabi_copy_item item(void)
{
    cuabi_copy_item it = CUABI_COPY_ITEM_INIT;
    return it;
}

START_TEST(mixed_ends_in_one_call)
{
    cuabi_buffer *dev = buf(pool, 4096, 0), *pin = buf(host, 4096, 100);
    cuabi_buffer *man = buf(managed, 4096, 50), *dst = buf(pool, 4096, 0);
    uint8_t raw_src[64], raw_dst[64] = { 0 };
    for (int i = 0; i < 64; i++)
        raw_src[i] = (uint8_t)(200 + i);
    cuabi_view *v;
    int64_t shape[2] = { 4, 8 };
    ck_assert_ok(cuabi_view_create(&v, man, 64, CUABI_DTYPE_UINT, 8, 2, shape, NULL, 0));
    cuabi_copy_item it[5];
    for (int i = 0; i < 5; i++)
        it[i] = item();
    it[0].dst_buffer = dst, it[0].src_buffer = dev, it[0].src_offset = 10, it[0].size = 100;
    it[1].dst_buffer = dst, it[1].dst_offset = 100, it[1].src_buffer = pin, it[1].size = 50;
    it[2].dst_buffer = dst, it[2].dst_offset = 200, it[2].src_view = v, it[2].src_offset = 4,
    it[2].size = 28;                                  /* bytes 4..31 of the view */
    it[3].dst_address = (uintptr_t)raw_dst, it[3].src_address = (uintptr_t)raw_src,
    it[3].size = 64;
    it[4].dst_view = v, it[4].src_address = (uintptr_t)raw_src, it[4].size = 32;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, it, 5, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_BATCHED);
    ck_assert_uint_eq(r.copies, 5);
    ck_assert_uint_eq(r.bytes, 100 + 50 + 28 + 64 + 32);
    ck_assert_uint_eq(r.driver_calls, 1);
    ck_assert_uint_eq(r.attribute_sets, 1);           /* all alike: one set */
    ck_assert_str_eq(r.reason, "");
    ck_assert_int_eq(fake_batches, 1);
    ck_assert_int_eq(fake_batch_copies, 5);
    ck_assert_int_eq(fake_batch_attrs, 1);
    ck_assert_int_eq(fake_batch_attr[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
    cuabi__stream *so;
    void *obj;
    ck_assert_ok(cuabi__handle_get(s0, CUABI__T_STREAM, &obj, "test"));
    so = obj;
    ck_assert_ptr_eq(fake_last_stream, so->cu_stream);
    ck_assert_uint_eq(at(dst, 0), 10);
    ck_assert_uint_eq(at(dst, 99), 109);
    ck_assert_uint_eq(at(dst, 100), 100);
    ck_assert_uint_eq(at(dst, 149), 149);
    ck_assert_uint_eq(at(dst, 200), (uint8_t)(50 + 64 + 4));   /* the view before item 4 wrote */
    ck_assert_uint_eq(raw_dst[63], (uint8_t)(200 + 63));
    ck_assert_uint_eq(at(man, 64), 200);               /* item 4 into the view */
    ck_assert_uint_eq(at(man, 95), 231);
    ck_assert_uint_eq(at(man, 96), (uint8_t)(50 + 96));
    /* the result may be NULL */
    ck_assert_ok(cuabi_copy_batch(NULL, it, 1, s0));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_buffer_free_async(dst, s0));
    ck_assert_ok(cuabi_buffer_free_async(dev, s0));
    ck_assert_ok(cuabi_buffer_destroy(man));
    ck_assert_ok(cuabi_buffer_destroy(pin));
}
END_TEST

START_TEST(attribute_runs)
{
    cuabi_buffer *a = buf(pool, 1024, 1), *b = buf(pool, 1024, 0);
    cuabi_copy_item it[6];
    cuabi_copy_src_order orders[6] = { CUABI_COPY_SRC_STREAM, CUABI_COPY_SRC_STREAM,
                                       CUABI_COPY_SRC_ANY, CUABI_COPY_SRC_ANY,
                                       CUABI_COPY_SRC_STREAM, CUABI_COPY_SRC_STREAM };
    for (int i = 0; i < 6; i++) {
        it[i] = item();
        it[i].dst_buffer = b, it[i].dst_offset = (uint64_t)i * 100;
        it[i].src_buffer = a, it[i].src_offset = (uint64_t)i * 100, it[i].size = 100;
        it[i].src_access_order = orders[i];
    }
    it[5].flags = CUABI_COPY_PREFER_OVERLAP_WITH_COMPUTE;
    it[5].dst_hint_type = CUABI_LOCATION_DEVICE, it[5].dst_hint_id = 0;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, it, 6, s0));
    ck_assert_uint_eq(r.attribute_sets, 4);            /* SS | AA | S | S+flags */
    ck_assert_int_eq(fake_batch_attrs, 4);
    ck_assert_int_eq(fake_batch_attr[1].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
    ck_assert_uint_eq(fake_batch_attr[3].flags, CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE);
    ck_assert_int_eq(fake_batch_attr[3].dstLocHint.type, CU_MEM_LOCATION_TYPE_DEVICE);
    ck_assert_uint_eq(at(b, 599), at(a, 599));
    /* empty copies are skipped; a batch of them calls nothing */
    it[1].size = 0;
    ck_assert_ok(cuabi_copy_batch(&r, it, 3, s0));
    ck_assert_uint_eq(r.copies, 2);
    ck_assert_int_eq(fake_batch_copies, 2);
    it[0].size = it[2].size = 0;
    int batches = fake_batches;
    ck_assert_ok(cuabi_copy_batch(&r, it, 3, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_NONE);
    ck_assert_uint_eq(r.copies, 0);
    ck_assert_int_eq(fake_batches, batches);
    ck_assert_ok(cuabi_copy_batch(&r, NULL, 0, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_NONE);
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
}
END_TEST

START_TEST(refused_before_anything_is_queued)
{
    cuabi_buffer *a = buf(pool, 256, 1), *b = buf(pool, 256, 0);
    uint8_t raw[16];
    cuabi_copy_item it[2];
    it[0] = item();
    it[0].dst_buffer = b, it[0].src_buffer = a, it[0].size = 16;
    int batches = fake_batches;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
#define REFUSED(status, needle)                                               \
    do {                                                                       \
        ck_assert_status(cuabi_copy_batch(&r, it, 2, s0), status);             \
        ck_assert_error_mentions(needle);                                      \
        ck_assert_int_eq(fake_batches, batches);                               \
        ck_assert_int_eq(r.path, CUABI_COPY_PATH_NONE);                       \
    } while (0)
    it[1] = it[0];
    it[1].dst_address = (uintptr_t)raw;                /* two destinations */
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "copy 1: the destination must be exactly one");
    it[1] = item();
    it[1].dst_buffer = b, it[1].size = 16;             /* no source */
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "the source must be exactly one");
    it[1] = it[0];
    it[1].src_offset = 250;                            /* past the end */
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "copy 1: 16 bytes at offset 250 run past the end");
    it[1].src_offset = UINT64_MAX;
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "run past the end");
    it[1] = it[0];
    it[1].dst_buffer = NULL, it[1].dst_address = UINTPTR_MAX - 8;   /* wraps */
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "address space");
    it[1] = it[0];
    it[1].src_access_order = (cuabi_copy_src_order)0;
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "src_access_order");
    it[1] = it[0];
    it[1].src_hint_type = (cuabi_location_type)12;
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "location hint");
    it[1] = it[0];
    it[1].flags = 6;
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "flags");
    it[1] = it[0];
    it[1].version = 0;
    REFUSED(CUABI_ERROR_INVALID_VERSION, "cuabi_copy_item version 0");
    it[1] = it[0];
    it[1].src_buffer = (cuabi_buffer *)(uintptr_t)0xdead;
    REFUSED(CUABI_ERROR_INVALID_HANDLE, "");
    /* a strided view */
    cuabi_view *v;
    int64_t shape[1] = { 8 }, strides[1] = { 2 };
    ck_assert_ok(cuabi_view_create(&v, a, 0, CUABI_DTYPE_UINT, 8, 1, shape, strides, 0));
    it[1] = it[0];
    it[1].src_buffer = NULL, it[1].src_view = v, it[1].size = 4;
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "not contiguous");
    ck_assert_ok(cuabi_view_release(v));
    /* a view's bytes end its range */
    int64_t s16[1] = { 4 };
    ck_assert_ok(cuabi_view_create(&v, a, 0, CUABI_DTYPE_FLOAT, 32, 1, s16, NULL, 0));
    it[1] = it[0];
    it[1].src_buffer = NULL, it[1].src_view = v, it[1].size = 17;
    REFUSED(CUABI_ERROR_INVALID_ARGUMENT, "(16 bytes)");
    ck_assert_ok(cuabi_view_release(v));
#undef REFUSED
    ck_assert_status(cuabi_copy_batch(&r, it, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_copy_batch(&r, NULL, 1, s0), CUABI_ERROR_INVALID_ARGUMENT);
    r.version = 0;
    ck_assert_status(cuabi_copy_batch(&r, it, 1, s0), CUABI_ERROR_INVALID_VERSION);
    /* the driver refusing the batch */
    r = (cuabi_copy_result)CUABI_COPY_RESULT_INIT;
    cuabi__fault_arm("cuMemcpyBatchAsync_v2", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_copy_batch(&r, it, 1, s0), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuMemcpyBatchAsync");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    /* the legacy default stream: the driver refuses batches there, so cuabi
     * does first, saying so, and queues nothing */
    cuabi_stream *legacy;
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, dev0));
    int before = fake_batches;
    ck_assert_status(cuabi_copy_batch(&r, it, 1, legacy), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("legacy default stream");
    ck_assert_int_eq(fake_batches, before);
    cuabi_copy_3d_item it3 = CUABI_COPY_3D_ITEM_INIT;
    it3.src_buffer = a, it3.dst_buffer = b, it3.width = 4;
    ck_assert_status(cuabi_copy_batch_3d(&r, &it3, 1, legacy), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_stream_release(legacy));
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
}
END_TEST

START_TEST(older_driver_copies_one_by_one)
{
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemcpyBatchAsync = NULL;
    cuabi_buffer *a = buf(pool, 1024, 7), *b = buf(pool, 1024, 0);
    cuabi_copy_item it[3];
    for (int i = 0; i < 3; i++) {
        it[i] = item();
        it[i].dst_buffer = b, it[i].dst_offset = (uint64_t)i * 300;
        it[i].src_buffer = a, it[i].src_offset = (uint64_t)i * 300, it[i].size = 300;
    }
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    int syncs = fake_syncs;
    ck_assert_ok(cuabi_copy_batch(&r, it, 3, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_SINGLE);
    ck_assert_uint_eq(r.driver_calls, 3);
    ck_assert_uint_eq(r.copies, 3);
    ck_assert_uint_eq(r.bytes, 900);
    ck_assert_int_eq(r.synchronized, 0);
    ck_assert_msg(strstr(r.reason, "cuMemcpyBatchAsync") != NULL, "%s", r.reason);
    ck_assert_int_eq(fake_syncs, syncs);
    ck_assert_uint_eq(at(b, 899), at(a, 899));
    /* a source read during the call: the stream is synchronised */
    it[1].src_access_order = CUABI_COPY_SRC_DURING_API_CALL;
    ck_assert_ok(cuabi_copy_batch(&r, it, 3, s0));
    ck_assert_int_eq(r.synchronized, 1);
    ck_assert_int_gt(fake_syncs, syncs);
    /* a copy failing stops the rest, with the driver's error */
    cuabi__fault_arm("cuMemcpyAsync", 2, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_copy_batch(&r, it, 3, s0), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
}
END_TEST

/* The driver runs a stream's copies in the current context: a batch on GPU
 * 0's stream with GPU 1's context current was refused (two H200s, 2026-11-28;
 * the fake refuses it too). cuabi makes the stream's device's context current
 * for the batch -- 1-D, 3-D, batched or one by one, failing or not -- and
 * gives the caller's back. */
static void expect_current(CUcontext want)
{
    CUcontext now = NULL;
    ck_assert_int_eq(cuabi__driver_for_test()->cuCtxGetCurrent(&now), CUDA_SUCCESS);
    ck_assert_ptr_eq(now, want);
}

START_TEST(another_devices_context_current)
{
    cuabi_device *dev1;
    cuabi_stream *s1;
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&s1, dev1, NULL));    /* makes GPU 1's context current */
    CUcontext ctx1 = NULL;
    ck_assert_int_eq(cuabi__driver_for_test()->cuCtxGetCurrent(&ctx1), CUDA_SUCCESS);
    cuabi_buffer *a = buf(pool, 1024, 7), *b = buf(pool, 1024, 0);
    cuabi__driver *d = cuabi__driver_for_test();
    ck_assert_int_eq(d->cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
    cuabi_copy_item it = item();
    it.dst_buffer = b, it.src_buffer = a, it.size = 1024;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, &it, 1, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_BATCHED);
    expect_current(ctx1);
    cuabi_copy_3d_item i3 = CUABI_COPY_3D_ITEM_INIT;
    i3.src_buffer = a, i3.dst_buffer = b, i3.width = 16, i3.height = 4;
    ck_assert_ok(cuabi_copy_batch_3d(&r, &i3, 1, s0));
    expect_current(ctx1);
    /* a failing batch gives the context back too */
    cuabi__fault_arm("cuMemcpyBatchAsync_v2", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_copy_batch(&r, &it, 1, s0), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    expect_current(ctx1);
    /* without the batched entry points: one copy at a time, the same */
    d->cuMemcpyBatchAsync = NULL;
    d->cuMemcpy3DBatchAsync = NULL;
    ck_assert_ok(cuabi_copy_batch(&r, &it, 1, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_SINGLE);
    expect_current(ctx1);
    ck_assert_ok(cuabi_copy_batch_3d(&r, &i3, 1, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_SINGLE);
    expect_current(ctx1);
    /* with no context current, none after */
    ck_assert_int_eq(d->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    ck_assert_ok(cuabi_copy_batch(&r, &it, 1, s0));
    expect_current(NULL);
    ck_assert_uint_eq(at(b, 1023), at(a, 1023));
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
    ck_assert_ok(cuabi_stream_release(s1));
    cuabi_device_release(dev1);
}
END_TEST

START_TEST(pitched_3d)
{
    /* src: 2 layers of 3 rows of 10 bytes, rows 16 apart, layers 4 rows apart;
     * dst packed */
    cuabi_buffer *a = buf(pool, 2 * 4 * 16, 0), *b = buf(pool, 64, 0xee);
    cuabi_copy_3d_item it = CUABI_COPY_3D_ITEM_INIT;
    ck_assert_uint_eq(it.height, 1);
    ck_assert_uint_eq(it.depth, 1);
    it.src_buffer = a, it.src_row_length = 16, it.src_layer_height = 4;
    it.dst_buffer = b;
    it.width = 10, it.height = 3, it.depth = 2;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch_3d(&r, &it, 1, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_BATCHED);
    ck_assert_uint_eq(r.bytes, 60);
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 10; x++)
                ck_assert_uint_eq(at(b, (size_t)(z * 30 + y * 10 + x)),
                                  (uint8_t)(z * 64 + y * 16 + x));
    ck_assert_uint_eq(at(b, 60), (uint8_t)(0xee + 60)); /* nothing past the extent */
    /* the same without the batched entry point */
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuMemcpy3DBatchAsync = NULL;
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, 64, NULL));
    int n3d = fake_3d_copies;
    ck_assert_ok(cuabi_copy_batch_3d(&r, &it, 1, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_SINGLE);
    ck_assert_int_eq(fake_3d_copies, n3d + 1);
    ck_assert_msg(strstr(r.reason, "cuMemcpy3DBatchAsync") != NULL, "%s", r.reason);
    ck_assert_uint_eq(at(b, 59), (uint8_t)(64 + 32 + 9));
    /* refusals: pitches below the extent, a range past the end */
    it.src_row_length = 8;
    ck_assert_status(cuabi_copy_batch_3d(&r, &it, 1, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("row length");
    it.src_row_length = 16, it.depth = 3;
    ck_assert_status(cuabi_copy_batch_3d(&r, &it, 1, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the end");
    it.depth = 2, it.src_row_length = SIZE_MAX;
    ck_assert_status(cuabi_copy_batch_3d(&r, &it, 1, s0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("overflows");
    it.src_row_length = 16, it.version = 9;
    ck_assert_status(cuabi_copy_batch_3d(&r, &it, 1, s0), CUABI_ERROR_INVALID_VERSION);
    it.version = CUABI_COPY_3D_ITEM_VERSION, it.width = 0;   /* nothing to copy */
    ck_assert_ok(cuabi_copy_batch_3d(&r, &it, 1, s0));
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_NONE);
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
}
END_TEST

START_TEST(refused_during_a_capture)
{
    cuabi_buffer *a = buf(pool, 64, 0), *b = buf(pool, 64, 0);
    cuabi_copy_item it = item();
    it.dst_buffer = b, it.src_buffer = a, it.size = 64;
    ck_assert_ok(cuabi_graph_capture_begin(s0, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_status(cuabi_copy_batch(NULL, &it, 1, s0), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_error_mentions("captured");
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, s0));
    ck_assert_ok(cuabi_graph_release(g));
    ck_assert_ok(cuabi_copy_batch(NULL, &it, 1, s0));
    ck_assert_ok(cuabi_buffer_free_async(a, s0));
    ck_assert_ok(cuabi_buffer_free_async(b, s0));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("copy_batch");
    TCase *tc = tcase_create("copy_batch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, mixed_ends_in_one_call);
    tcase_add_test(tc, attribute_runs);
    tcase_add_test(tc, refused_before_anything_is_queued);
    tcase_add_test(tc, older_driver_copies_one_by_one);
    tcase_add_test(tc, pitched_3d);
    tcase_add_test(tc, another_devices_context_current);
    tcase_add_test(tc, refused_during_a_capture);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
