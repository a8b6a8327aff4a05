/* Batched copies on a real GPU (issue 25 item 4): one call copying between
 * every kind of end -- a pool buffer, a VMM buffer, pinned and managed
 * buffers, a view, pageable host memory by address -- checked byte by byte,
 * with the path taken (batched on a CUDA 13 driver; single copies with the
 * reason otherwise) printed and checked against the driver's version;
 * 1,000 copies of 4 KiB in one call, checked, and its time beside 1,000
 * cuabi_buffer_copy calls (printed: bench/bench_copy_batch is the
 * measurement); source access orders (a source on the stack read during
 * the call and overwritten right after; "any" order) and location hints
 * on managed memory; pitched 3-D copies device <-> pinned host, checked;
 * a refused batch queues nothing (the destination is unchanged); with two
 * GPUs, a batch copying between them. Exits 77 without a GPU. */
#include "testutil.h"

#include <time.h>

enum { KiB = 1024, MiB = 1 << 20 };

static cuabi_device *dev;
static int ord;
static cuabi_stream *s;
static cuabi_memory_resource *pool, *pinned, *managed, *vmm;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    ck_assert_ok(cuabi_device_ordinal(&ord, dev));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    ck_assert_ok(cuabi_managed_resource_create(&managed, dev, NULL));
    ck_assert_ok(cuabi_vmm_resource_create(&vmm, dev, NULL));
}
static void teardown(void)
{
    cuabi_memory_resource_release(vmm);
    cuabi_memory_resource_release(managed);
    cuabi_memory_resource_release(pinned);
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(s);
    cuabi_device_release(dev);
}

static cuabi_buffer *buf(cuabi_memory_resource *r, size_t n, uint8_t seed)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, s));
    uint8_t *h = malloc(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(seed + i * 13);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, h, n, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    free(h);
    return b;
}

/* bytes [off, off + n) of b equal seed + (src_off + i) * 13 */
static void expect(cuabi_buffer *b, size_t off, size_t n, uint8_t seed, size_t src_off)
{
    uint8_t *h = malloc(n);
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, off, n, NULL));
    for (size_t i = 0; i < n; i++)
        if (h[i] != (uint8_t)(seed + (src_off + i) * 13))
            ck_abort_msg("byte %zu: %u, expected %u", off + i, h[i],
                         (uint8_t)(seed + (src_off + i) * 13));
    free(h);
}

static int driver_version(void)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_ok(cuabi_runtime_info_get(&info));
    return info.driver_version;
}

static void say_path(const char *what, const cuabi_copy_result *r)
{
    printf("%s: %s, %llu copies, %llu bytes, %llu driver calls, %llu attribute sets%s%s\n", what,
           r->path == CUABI_COPY_PATH_BATCHED ? "batched" : "single copies",
           (unsigned long long)r->copies, (unsigned long long)r->bytes,
           (unsigned long long)r->driver_calls, (unsigned long long)r->attribute_sets,
           *r->reason ? ": " : "", r->reason);
    if (driver_version() >= 13000)
        ck_assert_int_eq(r->path, CUABI_COPY_PATH_BATCHED);
    if (r->path == CUABI_COPY_PATH_SINGLE)
        ck_assert_msg(*r->reason, "single copies without a reason");
}

START_TEST(every_kind_of_end_in_one_call)
{
    size_t n = 64 * KiB;
    cuabi_buffer *dev_b = buf(pool, n, 1), *pin = buf(pinned, n, 2), *man = buf(managed, n, 3);
    cuabi_buffer *vm = buf(vmm, n, 4), *dst = buf(pool, 8 * n, 0), *pin_dst = buf(pinned, n, 0);
    uint8_t *page_src = malloc(n), *page_dst = calloc(1, n);
    for (size_t i = 0; i < n; i++)
        page_src[i] = (uint8_t)(5 + i * 13);
    cuabi_view *v;
    int64_t shape[2] = { 64, 256 };     /* 16 KiB of dev_b from byte 4096 */
    ck_assert_ok(cuabi_view_create(&v, dev_b, 4096, CUABI_DTYPE_UINT, 8, 2, shape, NULL, 0));
    cuabi_copy_item it[8];
    for (int i = 0; i < 8; i++) {
        cuabi_copy_item x = CUABI_COPY_ITEM_INIT;
        it[i] = x;
        it[i].dst_buffer = dst, it[i].dst_offset = (uint64_t)i * n, it[i].size = n;
    }
    it[0].src_buffer = dev_b;                               /* device -> device */
    it[1].src_buffer = pin;                                 /* pinned -> device */
    it[2].src_buffer = man;                                 /* managed -> device */
    it[3].src_buffer = vm;                                  /* VMM -> device */
    it[4].src_address = (uintptr_t)page_src;                /* pageable -> device */
    it[5].src_view = v, it[5].size = 16 * KiB;              /* a view -> device */
    it[6].dst_buffer = NULL, it[6].dst_address = (uintptr_t)page_dst;   /* VMM -> pageable */
    it[6].dst_offset = 0, it[6].src_buffer = vm, it[6].src_offset = 100, it[6].size = n - 100;
    it[7].dst_buffer = pin_dst, it[7].dst_offset = 0, it[7].src_buffer = man;  /* managed -> pinned */
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, it, 8, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    say_path("8 copies of every kind", &r);
    ck_assert_uint_eq(r.copies, 8);
    ck_assert_uint_eq(r.bytes, 6 * n + 16 * KiB + n - 100);
    expect(dst, 0, n, 1, 0);
    expect(dst, n, n, 2, 0);
    expect(dst, 2 * n, n, 3, 0);
    expect(dst, 3 * n, n, 4, 0);
    expect(dst, 4 * n, n, 5, 0);
    expect(dst, 5 * n, 16 * KiB, 1, 4096);
    for (size_t i = 0; i < n - 100; i++)
        if (page_dst[i] != (uint8_t)(4 + (100 + i) * 13))
            ck_abort_msg("pageable byte %zu", i);
    expect(pin_dst, 0, n, 3, 0);
    /* into a view, from pageable memory */
    cuabi_copy_item one = CUABI_COPY_ITEM_INIT;
    one.dst_view = v, one.src_address = (uintptr_t)page_src, one.size = 16 * KiB;
    ck_assert_ok(cuabi_copy_batch(&r, &one, 1, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    expect(dev_b, 4096, 16 * KiB, 5, 0);
    expect(dev_b, 4096 + 16 * KiB, 16, 1, 4096 + 16 * KiB);   /* not past the view */
    ck_assert_ok(cuabi_view_release(v));
    cuabi_buffer *all[6] = { dev_b, pin, man, vm, dst, pin_dst };
    for (int i = 0; i < 6; i++)
        ck_assert_ok(cuabi_buffer_destroy(all[i]));
    free(page_src);
    free(page_dst);
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

START_TEST(a_thousand_small_copies)
{
    enum { N = 1000, SZ = 4 * KiB };
    cuabi_buffer *a = buf(pool, (size_t)N * SZ, 9), *b = buf(pool, (size_t)N * SZ * 2, 0);
    cuabi_copy_item *it = calloc(N, sizeof *it);
    for (int i = 0; i < N; i++) {
        cuabi_copy_item x = CUABI_COPY_ITEM_INIT;
        it[i] = x;
        /* reversed order, every other slot of the destination */
        it[i].src_buffer = a, it[i].src_offset = (uint64_t)(N - 1 - i) * SZ;
        it[i].dst_buffer = b, it[i].dst_offset = (uint64_t)i * 2 * SZ;
        it[i].size = SZ;
    }
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, it, N, s));   /* warm */
    ck_assert_ok(cuabi_stream_synchronize(s));
    say_path("1,000 x 4 KiB", &r);
    ck_assert_uint_eq(r.copies, N);
    ck_assert_uint_eq(r.bytes, (uint64_t)N * SZ);
    ck_assert_uint_eq(r.attribute_sets, 1);
    for (int i = 0; i < N; i += 37) {
        expect(b, (size_t)i * 2 * SZ, SZ, 9, (size_t)(N - 1 - i) * SZ);
        expect(b, (size_t)i * 2 * SZ + SZ, 4, 0, (size_t)i * 2 * SZ + SZ);  /* gaps untouched */
    }
    expect(b, (size_t)(N - 1) * 2 * SZ, SZ, 9, 0);
    double t0 = now();
    for (int rep = 0; rep < 20; rep++)
        ck_assert_ok(cuabi_copy_batch(&r, it, N, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    double t1 = now();
    for (int rep = 0; rep < 20; rep++)
        for (int i = 0; i < N; i++)
            ck_assert_ok(cuabi_buffer_copy(b, it[i].dst_offset, a, it[i].src_offset, SZ, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    double t2 = now();
    printf("1,000 x 4 KiB: batched %.1f us, 1,000 single copies %.1f us (ratio %.2f)\n",
           (t1 - t0) / 20 * 1e6, (t2 - t1) / 20 * 1e6, (t1 - t0) / (t2 - t1));
    free(it);
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

START_TEST(access_orders_and_hints)
{
    cuabi_buffer *dst = buf(pool, 4 * KiB, 0), *man = buf(managed, 64 * KiB, 7);
    cuabi_buffer *src = buf(pool, 4 * KiB, 8);
    /* a source on the stack, read during the call: overwritten right after */
    uint8_t stack_src[256];
    for (int i = 0; i < 256; i++)
        stack_src[i] = (uint8_t)(6 + i * 13);
    cuabi_copy_item it[3];
    for (int i = 0; i < 3; i++) {
        cuabi_copy_item x = CUABI_COPY_ITEM_INIT;
        it[i] = x;
    }
    it[0].dst_buffer = dst, it[0].src_address = (uintptr_t)stack_src, it[0].size = 256;
    it[0].src_access_order = CUABI_COPY_SRC_DURING_API_CALL;
    it[1].dst_buffer = dst, it[1].dst_offset = 1024, it[1].src_buffer = src, it[1].size = 1024;
    it[1].src_access_order = CUABI_COPY_SRC_ANY;
    it[1].flags = CUABI_COPY_PREFER_OVERLAP_WITH_COMPUTE;
    /* managed source with a hint: read from the device */
    it[2].dst_buffer = dst, it[2].dst_offset = 2048, it[2].src_buffer = man, it[2].size = 2048;
    it[2].src_hint_type = CUABI_LOCATION_DEVICE, it[2].src_hint_id = ord;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, it, 3, s));
    memset(stack_src, 0xff, sizeof stack_src);
    ck_assert_ok(cuabi_stream_synchronize(s));
    say_path("three access orders", &r);
    if (r.path == CUABI_COPY_PATH_BATCHED)
        ck_assert_uint_eq(r.attribute_sets, 3);
    else
        ck_assert_int_eq(r.synchronized, 1);
    expect(dst, 0, 256, 6, 0);
    expect(dst, 1024, 1024, 8, 0);
    expect(dst, 2048, 2048, 7, 0);
    /* a host hint on the managed destination */
    cuabi_copy_item back = CUABI_COPY_ITEM_INIT;
    back.dst_buffer = man, back.src_buffer = src, back.size = 4 * KiB;
    back.dst_hint_type = CUABI_LOCATION_HOST;
    ck_assert_ok(cuabi_copy_batch(&r, &back, 1, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, man));
    for (int i = 0; i < 4 * KiB; i++)
        ck_assert_uint_eq(((uint8_t *)p)[i], (uint8_t)(8 + i * 13));
    ck_assert_uint_eq(((uint8_t *)p)[4 * KiB], (uint8_t)(7 + 4 * KiB * 13));
    ck_assert_ok(cuabi_buffer_destroy(dst));
    ck_assert_ok(cuabi_buffer_destroy(man));
    ck_assert_ok(cuabi_buffer_destroy(src));
}
END_TEST

START_TEST(pitched_3d_both_ways)
{
    /* a 3-D block: 5 layers x 40 rows x 300 bytes inside a device array of
     * 8 layers x 64 rows x 512-byte rows, to a packed pinned buffer and back */
    enum { W = 300, H = 40, DEP = 5, RL = 512, LH = 64 };
    cuabi_buffer *a = buf(pool, (size_t)8 * LH * RL, 11), *h = buf(pinned, W * H * DEP, 0);
    cuabi_buffer *c = buf(pool, (size_t)12 * LH * RL, 0);
    cuabi_copy_3d_item it = CUABI_COPY_3D_ITEM_INIT;
    it.src_buffer = a, it.src_offset = (uint64_t)LH * RL + 3 * RL + 17;
    it.src_row_length = RL, it.src_layer_height = LH;
    it.dst_buffer = h;
    it.width = W, it.height = H, it.depth = DEP;
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch_3d(&r, &it, 1, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    say_path("3-D device -> pinned", &r);
    ck_assert_uint_eq(r.bytes, (uint64_t)W * H * DEP);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, h));
    const uint8_t *hp = (const uint8_t *)p;
    for (int z = 0; z < DEP; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                size_t src = (size_t)(z + 1) * LH * RL + (size_t)(y + 3) * RL + 17 + x;
                if (hp[((size_t)z * H + y) * W + x] != (uint8_t)(11 + src * 13))
                    ck_abort_msg("3-D byte (%d, %d, %d)", z, y, x);
            }
    /* back into the same place of another array: the rest stays 0-seeded */
    cuabi_copy_3d_item up = CUABI_COPY_3D_ITEM_INIT;
    up.src_buffer = h;
    up.dst_buffer = c, up.dst_offset = it.src_offset;
    up.dst_row_length = RL, up.dst_layer_height = LH;
    up.width = W, up.height = H, up.depth = DEP;
    cuabi_copy_3d_item two[2] = { up, up };
    two[1].dst_offset += (uint64_t)6 * LH * RL;        /* and again 6 layers further */
    ck_assert_ok(cuabi_copy_batch_3d(&r, two, 2, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(r.copies, 2);
    size_t total = (size_t)12 * LH * RL;
    uint8_t *back = malloc(total);
    ck_assert_ok(cuabi_buffer_copy_to_host(back, c, 0, total, NULL));
    for (size_t at = 0; at < total; at++) {
        size_t z = at / ((size_t)LH * RL), y = at / RL % LH, x = at % RL;
        int rows = y >= 3 && y < 3 + H && x >= 17 && x < 17 + W;
        uint8_t want = (uint8_t)(at * 13);                 /* untouched */
        if (rows && z >= 1 && z < 1 + DEP)
            want = (uint8_t)(11 + at * 13);                /* a's bytes at the same place */
        else if (rows && z >= 7 && z < 7 + DEP)
            want = (uint8_t)(11 + (at - (size_t)6 * LH * RL) * 13);
        if (back[at] != want)
            ck_abort_msg("3-D upload byte (%zu, %zu, %zu): %u, expected %u", z, y, x, back[at],
                         want);
    }
    free(back);
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_buffer_destroy(c));
}
END_TEST

START_TEST(a_refused_batch_queues_nothing)
{
    cuabi_buffer *a = buf(pool, 4 * KiB, 1), *b = buf(pool, 4 * KiB, 0);
    cuabi_copy_item it[3];
    for (int i = 0; i < 3; i++) {
        cuabi_copy_item x = CUABI_COPY_ITEM_INIT;
        it[i] = x;
        it[i].dst_buffer = b, it[i].dst_offset = (uint64_t)i * KiB;
        it[i].src_buffer = a, it[i].size = KiB;
    }
    it[2].src_offset = 4 * KiB - 10;                   /* past the end */
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_status(cuabi_copy_batch(&r, it, 3, s), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("copy 2");
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_NONE);
    ck_assert_ok(cuabi_stream_synchronize(s));
    expect(b, 0, 4 * KiB, 0, 0);                       /* copies 0 and 1 did not run */
    ck_assert_status(cuabi_copy_batch(&r, it, 3, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_stream *legacy;
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, dev));
    ck_assert_status(cuabi_copy_batch(&r, it, 2, legacy), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("legacy default stream");
    ck_assert_ok(cuabi_stream_release(legacy));
    cuabi_stream *per_thread;   /* a real stream to the driver: accepted */
    ck_assert_ok(cuabi_stream_per_thread_default(&per_thread, dev));
    ck_assert_ok(cuabi_copy_batch(&r, it, 2, per_thread));
    ck_assert_ok(cuabi_stream_synchronize(per_thread));
    ck_assert_ok(cuabi_stream_release(per_thread));
    expect(b, 0, KiB, 1, 0);
    ck_assert_ok(cuabi_copy_batch(&r, it, 0, s));      /* nothing */
    ck_assert_int_eq(r.path, CUABI_COPY_PATH_NONE);
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

START_TEST(between_two_gpus)
{
    cuabi_device *d1;
    ck_assert_ok(cuabi_device_get(&d1, ord == 0 ? 1 : 0));
    cuabi_memory_resource *p1;
    ck_assert_ok(cuabi_memory_resource_device_default(&p1, d1));
    /* Pool memory is reachable from another GPU only with the pool's access
     * (cuMemPoolSetAccess): without it two H200s refused the batch, and
     * cuMemcpyAsync of the same copies, with CUDA_ERROR_INVALID_VALUE. */
    cuabi_status acc = cuabi_peer_set_pool_access(p1, dev, CUABI_PEER_ACCESS_READ_WRITE);
    if (acc == CUABI_ERROR_PEER_ACCESS) {
        printf("GPU -> GPU: the GPUs cannot be peers; not tested\n");
        ck_assert_ok(cuabi_memory_resource_release(p1));
        cuabi_device_release(d1);
        return;
    }
    ck_assert_ok(acc);
    ck_assert_ok(cuabi_peer_set_pool_access(pool, d1, CUABI_PEER_ACCESS_READ_WRITE));
    cuabi_buffer *a = buf(pool, MiB, 21), *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, p1, 2 * MiB, 0, NULL));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, 2 * MiB, NULL));
    cuabi_copy_item it[2];
    for (int i = 0; i < 2; i++) {
        cuabi_copy_item x = CUABI_COPY_ITEM_INIT;
        it[i] = x;
    }
    it[0].dst_buffer = b, it[0].src_buffer = a, it[0].size = MiB;
    it[1].dst_buffer = b, it[1].dst_offset = MiB, it[1].src_buffer = b, it[1].size = MiB;
    /* the second copies within GPU 1 what the first brought over: stream order */
    cuabi_copy_result r = CUABI_COPY_RESULT_INIT;
    ck_assert_ok(cuabi_copy_batch(&r, it, 2, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    say_path("GPU -> GPU", &r);
    expect(b, 0, MiB, 21, 0);
    /* within one batch the copies are not ordered: the second may read before
     * the first wrote, so only check it read either 0 or the new bytes */
    uint8_t h[16];
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, MiB, 16, NULL));
    ck_assert(h[1] == 0 || h[1] == (uint8_t)(21 + 13));
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_peer_set_pool_access(pool, d1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_peer_set_pool_access(p1, dev, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_memory_resource_release(p1));
    cuabi_device_release(d1);
}
END_TEST

static Suite *suite(int gpus)
{
    Suite *su = suite_create("gpu_copy_batch");
    TCase *tc = tcase_create("copy_batch");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_kind_of_end_in_one_call);
    tcase_add_test(tc, a_thousand_small_copies);
    tcase_add_test(tc, access_orders_and_hints);
    tcase_add_test(tc, pitched_3d_both_ways);
    tcase_add_test(tc, a_refused_batch_queues_nothing);
    if (gpus >= 2)
        tcase_add_test(tc, between_two_gpus);
    else
        printf("SKIP part: a batch between GPUs needs two (%d visible)\n", gpus);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    int n = cuabi_test_require_gpu();
    cuabi_test_device_ordinal();
    return cuabi_test_run(suite(n));
}
