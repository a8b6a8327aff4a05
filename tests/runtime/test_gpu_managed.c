/* Managed memory on a real GPU (issue 25 item 3): a managed resource
 * (default, and attach-host with a preferred location), memory written by
 * the host, prefetched to the device on a stream, changed there by a
 * kernel, prefetched back and read by the host, several rounds; the range
 * attributes after each prefetch (last prefetch location device / host);
 * advice: read-mostly, preferred location, accessed-by (read back through
 * the range attributes, then unset); discard and discard-and-prefetch
 * where the driver has them (CUDA 13; else the refusal naming the entry
 * point); batches of whole buffers (prefetch with one location for all and
 * one each, discard, discard-and-prefetch; batched vs per-buffer timing,
 * printed); the DLPack device type of a managed view (kDLCUDAManaged, 13);
 * pool and host buffers refused by the managed calls; prefetch time for
 * 256 MiB each way (printed). Exits 77 without a GPU, and without
 * concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
 * which every Linux H100 has). */
#include "testutil.h"

#include <time.h>

enum { MiB = 1 << 20, CONCURRENT_MANAGED_ACCESS = 89 };

static const char source[] =
    "extern \"C\" __global__ void add(unsigned *p, int n, unsigned v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] += v;\n"
    "}\n";

static cuabi_device *dev;
static int ord;
static cuabi_stream *s;
static cuabi_objcode *code;
static cuabi_kernel *k_add;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    ck_assert_ok(cuabi_device_ordinal(&ord, dev));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1,
                                      "managed.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k_add, code, "add"));
}
static void teardown(void)
{
    cuabi_kernel_release(k_add);
    cuabi_objcode_release(code);
    cuabi_stream_release(s);
    cuabi_device_release(dev);
}

static void add_on_device(uintptr_t p, size_t words, unsigned v)
{
    cuabi_argpack *a;
    ck_assert_ok(cuabi_argpack_create(&a, "ptr, i32, u32"));
    ck_assert_ok(cuabi_argpack_set_pointer(a, 0, p));
    ck_assert_ok(cuabi_argpack_set_int(a, 1, (int64_t)words));
    ck_assert_ok(cuabi_argpack_set_uint(a, 2, v));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 256;
    c.block[0] = 256;
    c.stream = s;
    c.device = dev;
    ck_assert_ok(cuabi_launch(k_add, a, &c));
    cuabi_argpack_release(a);
}

static cuabi_managed_range range(cuabi_buffer *b, size_t off, size_t n)
{
    cuabi_managed_range r = CUABI_MANAGED_RANGE_INIT;
    ck_assert_ok(cuabi_managed_range_info(&r, b, off, n));
    return r;
}

START_TEST(host_and_device_take_turns_with_prefetch)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev, NULL));
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_MANAGED);
    size_t n = 16 * MiB, words = n / 4;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    ck_assert_ok(cuabi_buffer_kind(&kind, b));
    ck_assert_int_eq(kind, CUABI_MEMORY_MANAGED);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    uint32_t *h = (uint32_t *)p;
    for (size_t i = 0; i < words; i++)     /* the host writes it directly */
        h[i] = (uint32_t)i;
    for (unsigned round = 1; round <= 3; round++) {
        ck_assert_ok(cuabi_managed_prefetch(b, 0, n, CUABI_LOCATION_DEVICE, ord, s));
        add_on_device(p, words, round);
        ck_assert_ok(cuabi_stream_synchronize(s));
        cuabi_managed_range mr = range(b, 0, n);
        ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_DEVICE);
        ck_assert_int_eq(mr.last_prefetch_location_id, ord);
        ck_assert_ok(cuabi_managed_prefetch(b, 0, n, CUABI_LOCATION_HOST, 0, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        mr = range(b, 0, n);
        ck_assert_msg(mr.last_prefetch_location_type == CUABI_LOCATION_HOST ||
                      mr.last_prefetch_location_type == CUABI_LOCATION_HOST_NUMA,
                      "last prefetch location type %d", mr.last_prefetch_location_type);
        unsigned want_add = round * (round + 1) / 2;
        for (size_t i = 0; i < words; i += 4093)
            ck_assert_uint_eq(h[i], (uint32_t)(i + want_add));
        ck_assert_uint_eq(h[words - 1], (uint32_t)(words - 1 + want_add));
        h[7] += 1000;                       /* the host's change, seen by the next round */
    }
    uint32_t v;
    ck_assert_ok(cuabi_buffer_copy_to_host(&v, b, 28, 4, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(v, 7 + 6 + 3000);
    /* part of the range: the second half to the device, the first stays */
    ck_assert_ok(cuabi_managed_prefetch(b, n / 2, n / 2, CUABI_LOCATION_DEVICE, ord, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_int_eq(range(b, n / 2, n / 2).last_prefetch_location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_ne(range(b, 0, n / 2).last_prefetch_location_type, CUABI_LOCATION_DEVICE);
    /* refusals */
    ck_assert_status(cuabi_managed_prefetch(b, n, 1, CUABI_LOCATION_HOST, 0, s),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_prefetch(b, 0, n, CUABI_LOCATION_NONE, 0, s),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(advice_read_back)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev, NULL));
    size_t n = 4 * MiB;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    cuabi_managed_range mr = range(b, 0, n);
    ck_assert_int_eq(mr.read_mostly, 0);
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_NONE);
    ck_assert_ok(cuabi_managed_advise(b, 0, n, CUABI_MANAGED_SET_READ_MOSTLY, CUABI_LOCATION_NONE,
                                      0));
    ck_assert_int_eq(range(b, 0, n).read_mostly, 1);
    int32_t one;
    ck_assert_ok(cuabi_managed_range_get(&one, 1, b, 0, n, CUABI_MANAGED_RANGE_READ_MOSTLY));
    ck_assert_int_eq(one, 1);
    ck_assert_ok(cuabi_managed_advise(b, 0, n, CUABI_MANAGED_UNSET_READ_MOSTLY,
                                      CUABI_LOCATION_NONE, 0));
    ck_assert_int_eq(range(b, 0, n).read_mostly, 0);
    /* preferred location: the device, on half the range */
    ck_assert_ok(cuabi_managed_advise(b, 0, n / 2, CUABI_MANAGED_SET_PREFERRED_LOCATION,
                                      CUABI_LOCATION_DEVICE, ord));
    mr = range(b, 0, n / 2);
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_eq(mr.preferred_location_id, ord);
    ck_assert_int_eq(range(b, 0, n).preferred_location_type, CUABI_LOCATION_NONE); /* mixed */
    ck_assert_ok(cuabi_managed_range_get(&one, 1, b, 0, n / 2,
                                         CUABI_MANAGED_RANGE_PREFERRED_LOCATION));
    ck_assert_int_eq(one, ord);
    ck_assert_ok(cuabi_managed_advise(b, 0, n / 2, CUABI_MANAGED_SET_PREFERRED_LOCATION,
                                      CUABI_LOCATION_HOST, 0));
    ck_assert_ok(cuabi_managed_range_get(&one, 1, b, 0, n / 2,
                                         CUABI_MANAGED_RANGE_PREFERRED_LOCATION));
    ck_assert_int_eq(one, -1);
    ck_assert_ok(cuabi_managed_advise(b, 0, n / 2, CUABI_MANAGED_UNSET_PREFERRED_LOCATION,
                                      CUABI_LOCATION_NONE, 0));
    ck_assert_int_eq(range(b, 0, n / 2).preferred_location_type, CUABI_LOCATION_NONE);
    /* accessed-by: the device appears in the list, the rest is -2 */
    ck_assert_ok(cuabi_managed_advise(b, 0, n, CUABI_MANAGED_SET_ACCESSED_BY,
                                      CUABI_LOCATION_DEVICE, ord));
    int32_t list[8];
    ck_assert_ok(cuabi_managed_range_get(list, 8, b, 0, n, CUABI_MANAGED_RANGE_ACCESSED_BY));
    int seen = 0;
    for (int i = 0; i < 8; i++) {
        seen += list[i] == ord;
        ck_assert_msg(list[i] == ord || list[i] == -2, "accessed-by[%d] = %d", i, list[i]);
    }
    ck_assert_int_eq(seen, 1);
    ck_assert_ok(cuabi_managed_advise(b, 0, n, CUABI_MANAGED_UNSET_ACCESSED_BY,
                                      CUABI_LOCATION_DEVICE, ord));
    ck_assert_ok(cuabi_managed_range_get(list, 8, b, 0, n, CUABI_MANAGED_RANGE_ACCESSED_BY));
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(list[i], -2);
    /* the host still reads and writes the advised memory; a kernel still adds */
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    memset((void *)p, 0, n);
    add_on_device(p, n / 4, 9);
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_uint_eq(((uint32_t *)p)[n / 4 - 1], 9);
    /* bad advice */
    ck_assert_status(cuabi_managed_advise(b, 0, n, (cuabi_managed_advice)99, CUABI_LOCATION_NONE,
                                          0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_managed_advise(b, n - 1, 2, CUABI_MANAGED_SET_READ_MOSTLY,
                                          CUABI_LOCATION_NONE, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(options_attach_host_and_preferred_location)
{
    cuabi_managed_options o = CUABI_MANAGED_OPTIONS_INIT;
    o.attach = CUABI_MANAGED_ATTACH_HOST;
    o.preferred_location_type = CUABI_LOCATION_DEVICE;
    o.preferred_location_id = ord;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev, &o));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, MiB, 0, NULL));
    cuabi_managed_range mr = range(b, 0, MiB);
    ck_assert_int_eq(mr.preferred_location_type, CUABI_LOCATION_DEVICE);
    ck_assert_int_eq(mr.preferred_location_id, ord);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    memset((void *)p, 1, MiB);
    ck_assert_ok(cuabi_buffer_memset(b, 0, 2, 1, 16, NULL));
    ck_assert_uint_eq(((uint8_t *)p)[15], 2);
    ck_assert_uint_eq(((uint8_t *)p)[16], 1);
    /* a managed view exports as kDLCUDAManaged, device id 0 */
    cuabi_view *v;
    int64_t shape[2] = { 16, 16 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    DLManagedTensorVersioned *t;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&t, v));
    ck_assert_int_eq(t->dl_tensor.device.device_type, 13);
    ck_assert_int_eq(t->dl_tensor.device.device_id, 0);
    t->deleter(t);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(discard_where_the_driver_has_it)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev, NULL));
    size_t n = 8 * MiB;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    memset((void *)p, 0x77, n);
    cuabi_status st = cuabi_managed_discard(b, 0, n / 2, s);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        ck_assert_error_mentions("cuMemDiscardBatchAsync");
        printf("SKIP part: %s\n", cuabi_last_error()->message);
    } else {
        ck_assert_ok(st);
        ck_assert_ok(cuabi_stream_synchronize(s));
        /* the second half is untouched; the first is undefined but usable */
        ck_assert_uint_eq(((uint8_t *)p)[n / 2], 0x77);
        ck_assert_uint_eq(((uint8_t *)p)[n - 1], 0x77);
        ((uint8_t *)p)[0] = 5;
        ck_assert_uint_eq(((uint8_t *)p)[0], 5);
    }
    st = cuabi_managed_discard_prefetch(b, n / 2, n / 2, CUABI_LOCATION_DEVICE, ord, s);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        ck_assert_error_mentions("cuMemDiscardAndPrefetchBatchAsync");
        printf("SKIP part: %s\n", cuabi_last_error()->message);
    } else {
        ck_assert_ok(st);
        add_on_device(p + n / 2, n / 8, 1);   /* usable on the device after the discard */
        ck_assert_ok(cuabi_stream_synchronize(s));
        ck_assert_int_eq(range(b, n / 2, n / 2).last_prefetch_location_type,
                         CUABI_LOCATION_DEVICE);
    }
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(only_managed_buffers)
{
    cuabi_memory_resource *pool, *pinned;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    cuabi_buffer *d, *h;
    ck_assert_ok(cuabi_buffer_allocate(&d, pool, 4096, 0, s));
    ck_assert_ok(cuabi_buffer_allocate(&h, pinned, 4096, 0, NULL));
    cuabi_buffer *bs[2] = { d, h };
    for (int i = 0; i < 2; i++) {
        ck_assert_status(cuabi_managed_prefetch(bs[i], 0, 64, CUABI_LOCATION_HOST, 0, s),
                         CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("not managed memory");
        cuabi_managed_range mr = CUABI_MANAGED_RANGE_INIT;
        ck_assert_status(cuabi_managed_range_info(&mr, bs[i], 0, 64), CUABI_ERROR_NOT_SUPPORTED);
    }
    ck_assert_ok(cuabi_buffer_free_async(d, s));
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_memory_resource_release(pinned));
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

START_TEST(prefetch_bandwidth_report)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev, NULL));
    size_t n = 256 * MiB;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    memset((void *)p, 1, n);
    double t0 = now();
    ck_assert_ok(cuabi_managed_prefetch(b, 0, n, CUABI_LOCATION_DEVICE, ord, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    double t1 = now();
    ck_assert_ok(cuabi_managed_prefetch(b, 0, n, CUABI_LOCATION_HOST, 0, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    double t2 = now();
    printf("prefetch 256 MiB: to the device %.1f GB/s, to the host %.1f GB/s\n",
           n / (t1 - t0) / 1e9, n / (t2 - t1) / 1e9);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(batches_of_whole_buffers)
{
    /* four buffers: the host writes them, one batched prefetch sends them to
     * the device, a kernel adds, a batch with one location each sends two
     * back to the host (read there) and two stay; a discard batch, and a
     * discard-and-prefetch batch, where the driver has them; and the
     * batched timing beside one prefetch per buffer (printed) */
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_managed_resource_create(&r, dev, NULL));
    enum { NB = 4 };
    size_t n = 4 * MiB, words = n / 4;
    cuabi_buffer *b[NB];
    uint32_t *h[NB];
    for (int k = 0; k < NB; k++) {
        ck_assert_ok(cuabi_buffer_allocate(&b[k], r, n, 0, NULL));
        uintptr_t p;
        ck_assert_ok(cuabi_buffer_pointer(&p, b[k]));
        h[k] = (uint32_t *)p;
        for (size_t i = 0; i < words; i++)
            h[k][i] = (uint32_t)(i + (size_t)k * 1000);
    }
    int32_t dt = CUABI_LOCATION_DEVICE, di = ord;
    ck_assert_ok(cuabi_managed_prefetch_batch(b, NB, &dt, &di, 1, s));
    for (int k = 0; k < NB; k++)
        add_on_device((uintptr_t)h[k], words, (unsigned)k + 1);
    ck_assert_ok(cuabi_stream_synchronize(s));
    for (int k = 0; k < NB; k++) {
        cuabi_managed_range mr = range(b[k], 0, n);
        ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_DEVICE);
        ck_assert_int_eq(mr.last_prefetch_location_id, ord);
    }
    int32_t ts[NB] = { CUABI_LOCATION_HOST, CUABI_LOCATION_DEVICE, CUABI_LOCATION_HOST,
                       CUABI_LOCATION_DEVICE };
    int32_t is[NB] = { 0, ord, 0, ord };
    ck_assert_ok(cuabi_managed_prefetch_batch(b, NB, ts, is, NB, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    for (int k = 0; k < NB; k++) {
        cuabi_managed_range mr = range(b[k], 0, n);
        if (ts[k] == CUABI_LOCATION_DEVICE)
            ck_assert_int_eq(mr.last_prefetch_location_type, CUABI_LOCATION_DEVICE);
        else
            ck_assert_msg(mr.last_prefetch_location_type == CUABI_LOCATION_HOST ||
                          mr.last_prefetch_location_type == CUABI_LOCATION_HOST_NUMA,
                          "buffer %d: last prefetch location type %d", k,
                          mr.last_prefetch_location_type);
        for (size_t i = 0; i < words; i += 4093)
            ck_assert_uint_eq(h[k][i], (uint32_t)(i + (size_t)k * 1000 + (size_t)k + 1));
    }
    cuabi_status st = cuabi_managed_discard_batch(b, 2, s);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        ck_assert_error_mentions("cuMemDiscardBatchAsync");
        printf("SKIP part: %s\n", cuabi_last_error()->message);
    } else {
        ck_assert_ok(st);
        ck_assert_ok(cuabi_stream_synchronize(s));
        ck_assert_uint_eq(h[2][5], (uint32_t)(5 + 2000 + 3));   /* not in the batch */
        h[0][0] = 9;                                           /* usable after it */
        ck_assert_uint_eq(h[0][0], 9);
    }
    st = cuabi_managed_discard_prefetch_batch(&b[2], 2, &dt, &di, 1, s);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        ck_assert_error_mentions("cuMemDiscardAndPrefetchBatchAsync");
        printf("SKIP part: %s\n", cuabi_last_error()->message);
    } else {
        ck_assert_ok(st);
        add_on_device((uintptr_t)h[2], words, 1);
        ck_assert_ok(cuabi_stream_synchronize(s));
        ck_assert_int_eq(range(b[3], 0, n).last_prefetch_location_type, CUABI_LOCATION_DEVICE);
    }
    /* refusals before the driver: a pool buffer in the batch */
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    cuabi_buffer *d;
    ck_assert_ok(cuabi_buffer_allocate(&d, pool, 4096, 0, s));
    cuabi_buffer *mixed[2] = { b[0], d };
    ck_assert_status(cuabi_managed_prefetch_batch(mixed, 2, &dt, &di, 1, s),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("buffers[1] is not managed memory");
    ck_assert_ok(cuabi_buffer_free_async(d, s));
    /* timing: 64 buffers of 64 KiB, batched vs one call each (printed) */
    enum { NT = 64 };
    cuabi_buffer *t[NT];
    for (int k = 0; k < NT; k++)
        ck_assert_ok(cuabi_buffer_allocate(&t[k], r, 65536, 0, NULL));
    int32_t ht = CUABI_LOCATION_HOST, hi = 0;
    double best_batch = 1e9, best_single = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        ck_assert_ok(cuabi_managed_prefetch_batch(t, NT, &dt, &di, 1, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        double t1 = now();
        ck_assert_ok(cuabi_managed_prefetch_batch(t, NT, &ht, &hi, 1, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        double t2 = now();
        for (int k = 0; k < NT; k++)
            ck_assert_ok(cuabi_managed_prefetch(t[k], 0, 65536, CUABI_LOCATION_DEVICE, ord, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        double t3 = now();
        ck_assert_ok(cuabi_managed_prefetch_batch(t, NT, &ht, &hi, 1, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        if (t1 - t0 < best_batch) best_batch = t1 - t0;
        if (t3 - t2 < best_single) best_single = t3 - t2;
        (void)t2;
    }
    printf("prefetch 64 x 64 KiB to the device: one batch %.1f us, one call each %.1f us\n",
           best_batch * 1e6, best_single * 1e6);
    for (int k = 0; k < NT; k++)
        ck_assert_ok(cuabi_buffer_destroy(t[k]));
    ck_assert_ok(cuabi_stream_synchronize(s));
    for (int k = 0; k < NB; k++)
        ck_assert_ok(cuabi_buffer_destroy(b[k]));
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("gpu_managed");
    TCase *tc = tcase_create("managed");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, host_and_device_take_turns_with_prefetch);
    tcase_add_test(tc, advice_read_back);
    tcase_add_test(tc, options_attach_host_and_preferred_location);
    tcase_add_test(tc, discard_where_the_driver_has_it);
    tcase_add_test(tc, only_managed_buffers);
    tcase_add_test(tc, prefetch_bandwidth_report);
    tcase_add_test(tc, batches_of_whole_buffers);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    cuabi_test_require_gpu();
    cuabi_device *d;
    int cma = 0;
    if (cuabi_device_get(&d, cuabi_test_device_ordinal()) == CUABI_SUCCESS &&
        cuabi_device_attribute(&cma, d, CONCURRENT_MANAGED_ACCESS) == CUABI_SUCCESS && !cma) {
        printf("SKIP: the device has no concurrent managed access "
               "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0)\n");
        return 77;
    }
    cuabi_device_release(d);
    return cuabi_test_run(suite());
}
