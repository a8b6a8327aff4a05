/* Buffers: host buffers for real; device, pinned and managed buffers,
 * copies and memsets against the fake driver. */
#include "testutil.h"
#include "fake_memory.h"
#include "runtime/memory.h"
#include "runtime/park.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void) { fake_driver_install(); fake_memory_install(); }
static void teardown(void)
{
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

START_TEST(host_buffer_getters_and_lifetime)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    size_t live = cuabi__handle_live_count();
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 1000, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_release(r)); /* the buffer keeps it */
    uintptr_t p;
    size_t n;
    cuabi_memory_kind k;
    cuabi_device *d = (cuabi_device *)1;
    cuabi_memory_resource *got;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_ne(p, 0);
    ck_assert_uint_eq(p % 64, 0);
    ck_assert_ok(cuabi_buffer_size(&n, b));
    ck_assert_uint_eq(n, 1000);
    ck_assert_ok(cuabi_buffer_kind(&k, b));
    ck_assert_int_eq(k, CUABI_MEMORY_HOST);
    ck_assert_ok(cuabi_buffer_device(&d, b));
    ck_assert_ptr_null(d);
    ck_assert_ok(cuabi_buffer_resource(&got, b));
    ck_assert_ptr_eq(got, r);
    ck_assert_ok(cuabi_memory_resource_kind(&k, got)); /* still alive */
    ck_assert_ok(cuabi_buffer_destroy(b));
    /* A freed buffer is an invalid handle. */
    ck_assert_status(cuabi_buffer_pointer(&p, b), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("already released");
    ck_assert_status(cuabi_buffer_destroy(b), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_memory_resource_kind(&k, r), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* size 0 */
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 0, 0, NULL));
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(p, 0);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(buffer_handle_misuse)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b, *bad;
    cuabi_device *dev;
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    cuabi_buffer *wrong = (cuabi_buffer *)r;
    uintptr_t p;
    size_t n;
    cuabi_memory_kind k;
    cuabi_device *d;
    cuabi_memory_resource *got;
    char host[8];
    ck_assert_status(cuabi_buffer_allocate(NULL, r, 8, 0, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_allocate(&bad, NULL, 8, 0, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_allocate(&bad, (cuabi_memory_resource *)dev, 8, 0, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_allocate(&bad, r, 8, 0, (cuabi_stream *)r),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_allocate(&bad, r, 8, 3, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 8, 0, NULL));
    ck_assert_status(cuabi_buffer_pointer(&p, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("expected cuabi_buffer");
    ck_assert_status(cuabi_buffer_size(&n, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_kind(&k, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_device(&d, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_resource(&got, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_destroy(wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_free_async(wrong, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_free_async(b, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_copy(b, 0, wrong, 0, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_copy(wrong, 0, b, 0, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_copy(b, 0, b, 0, 1, (cuabi_stream *)b), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_copy_from_host(wrong, 0, host, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_copy_to_host(host, wrong, 0, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_memset(wrong, 0, 0, 1, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_pointer(NULL, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_size(NULL, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_kind(NULL, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_device(NULL, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_resource(NULL, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_copy_from_host(b, 0, NULL, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_copy_to_host(NULL, b, 0, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

static int released;
static uintptr_t released_ptr;
static void on_release(uintptr_t ptr, size_t size, void *payload)
{
    (void)size;
    released++;
    released_ptr = ptr;
    *(int *)payload += 1;
}

START_TEST(wrapped_buffers_release_once)
{
    static char mem[64];
    int calls = 0;
    cuabi_buffer *b;
    released = 0;
    ck_assert_ok(cuabi_buffer_wrap(&b, NULL, CUABI_MEMORY_HOST, (uintptr_t)mem, sizeof mem,
                                   on_release, &calls));
    cuabi_memory_resource *got = (cuabi_memory_resource *)1;
    ck_assert_ok(cuabi_buffer_resource(&got, b));
    ck_assert_ptr_null(got);
    ck_assert_ok(cuabi_buffer_memset(b, 0, 7, 1, 64, NULL));
    ck_assert_int_eq(mem[63], 7);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(released, 1);
    ck_assert_int_eq(calls, 1);
    ck_assert_uint_eq(released_ptr, (uintptr_t)mem);
    /* without a callback */
    ck_assert_ok(cuabi_buffer_wrap(&b, NULL, CUABI_MEMORY_HOST, (uintptr_t)mem, 8, NULL, NULL));
    ck_assert_ok(cuabi_buffer_destroy(b));
    /* device memory needs a device; failures call nothing */
    cuabi_device *dev;
    ck_assert_ok(cuabi_device_get(&dev, 1));
    ck_assert_status(cuabi_buffer_wrap(&b, NULL, CUABI_MEMORY_DEVICE, 0x1000, 8, on_release, &calls),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("needs a device");
    ck_assert_status(cuabi_buffer_wrap(&b, dev, 0, 0x1000, 8, on_release, &calls),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_wrap(&b, dev, CUABI_MEMORY_DEVICE, 0, 8, on_release, &calls),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_wrap(&b, dev, CUABI_MEMORY_DEVICE, UINTPTR_MAX, 8, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_wrap(&b, (cuabi_device *)mem, CUABI_MEMORY_HOST, 1, 1, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_buffer_wrap(NULL, dev, CUABI_MEMORY_DEVICE, 1, 1, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(calls, 1);
    ck_assert_ok(cuabi_buffer_wrap(&b, dev, CUABI_MEMORY_DEVICE, 0x1000, 8, on_release, &calls));
    ck_assert_ok(cuabi_device_release(dev)); /* kept by the buffer */
    cuabi_device *got_dev;
    ck_assert_ok(cuabi_buffer_device(&got_dev, b));
    ck_assert_ptr_eq(got_dev, dev);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(calls, 2);
    ck_assert_int_eq(fake_ctx_refs[1], 0);
}
END_TEST

START_TEST(host_copies_and_bounds)
{
    cuabi_memory_resource *r;
    cuabi_buffer *a, *b;
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_buffer_allocate(&a, r, 16, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 16, 0, NULL));
    const char src[16] = "abcdefghijklmno";
    char out[16] = { 0 };
    ck_assert_ok(cuabi_buffer_copy_from_host(a, 0, src, 16, NULL));
    ck_assert_ok(cuabi_buffer_copy(b, 4, a, 0, 12, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 4, 12, NULL));
    ck_assert_int_eq(memcmp(out, src, 12), 0);
    ck_assert_ok(cuabi_buffer_copy(a, 1, a, 0, 8, NULL)); /* overlapping: memmove */
    ck_assert_ok(cuabi_buffer_copy_to_host(out, a, 0, 9, NULL));
    ck_assert_int_eq(memcmp(out, "aabcdefgh", 9), 0);
    ck_assert_ok(cuabi_buffer_copy(a, 16, b, 0, 0, NULL)); /* empty at the end */
    ck_assert_status(cuabi_buffer_copy(a, 8, b, 0, 9, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("destination buffer (16 bytes)");
    ck_assert_status(cuabi_buffer_copy(a, 0, b, 17, 0, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_copy(a, 0, b, SIZE_MAX, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_copy_from_host(a, 1, src, 16, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_copy_to_host(out, a, 0, 17, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    /* Issue 29: a host range that wraps around the address space is
     * refused (it was memmoved: SIGSEGV) */
    const void *top = (const void *)(UINTPTR_MAX - 3);
    ck_assert_status(cuabi_buffer_copy_from_host(a, 0, top, 8, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("src + size");
    ck_assert_status(cuabi_buffer_copy_to_host((void *)top, a, 0, 8, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("dst + size");
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(host_memsets_of_each_width)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 16, 0, NULL));
    uint8_t out[16];
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0xab, 1, 16, NULL));
    ck_assert_ok(cuabi_buffer_memset(b, 2, 0x1234, 2, 2, NULL));
    ck_assert_ok(cuabi_buffer_memset(b, 8, 0xdeadbeef, 4, 2, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, 16, NULL));
    uint16_t h;
    uint32_t w;
    ck_assert_uint_eq(out[0], 0xab);
    memcpy(&h, out + 4, 2);
    ck_assert_uint_eq(h, 0x1234);
    ck_assert_uint_eq(out[6], 0xab);
    memcpy(&w, out + 12, 4);
    ck_assert_uint_eq(w, 0xdeadbeef);
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 4, 0, NULL));
    ck_assert_status(cuabi_buffer_memset(b, 0, 0, 3, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("width must be 1, 2 or 4");
    ck_assert_status(cuabi_buffer_memset(b, 0, 0x100, 1, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not fit");
    ck_assert_status(cuabi_buffer_memset(b, 0, 0x10000, 2, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_memset(b, 2, 0, 4, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a multiple");
    ck_assert_status(cuabi_buffer_memset(b, 8, 0, 4, 3, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_buffer_memset(b, 0, 0, 4, SIZE_MAX / 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(device_buffers_on_the_fake_driver)
{
    cuabi_device *dev;
    cuabi_stream *s, *s2;
    cuabi_memory_resource *pool, *pin, *man;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&s2, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_pool_create(&pool, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_pinned(&pin, dev));
    ck_assert_ok(cuabi_memory_resource_managed(&man, dev));
    uintptr_t raw_s, raw_s2;
    ck_assert_ok(cuabi_stream_raw(&raw_s, s));
    ck_assert_ok(cuabi_stream_raw(&raw_s2, s2));
    cuabi_buffer *d, *p, *m;
    ck_assert_ok(cuabi_buffer_allocate(&d, pool, 64, 0, s));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw_s);
    ck_assert_ok(cuabi_buffer_allocate(&p, pin, 64, 0, s));
    ck_assert_ok(cuabi_buffer_allocate(&m, man, 64, 0, NULL));
    ck_assert_int_eq(fake_live_allocs, 3);
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_buffer_kind(&k, d));
    ck_assert_int_eq(k, CUABI_MEMORY_DEVICE);
    /* every direction, sync (waits on the legacy stream) and on a stream */
    uint32_t in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = (uint32_t)i * 3u;
    int syncs = fake_syncs;
    ck_assert_ok(cuabi_buffer_copy_from_host(d, 0, in, 64, NULL));
    ck_assert_int_eq(fake_syncs, syncs + 1);
    ck_assert_ok(cuabi_buffer_copy(p, 0, d, 0, 64, s));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw_s);
    ck_assert_int_eq(fake_syncs, syncs + 1);
    ck_assert_ok(cuabi_buffer_copy(m, 0, p, 0, 64, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, m, 0, 64, s2));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw_s2);
    ck_assert_int_eq(memcmp(in, out, 64), 0);
    /* memsets through the driver, each width, sync and async */
    ck_assert_ok(cuabi_buffer_memset(d, 0, 0x7f, 1, 4, NULL));
    ck_assert_ok(cuabi_buffer_memset(d, 4, 0xbeef, 2, 2, s));
    ck_assert_ok(cuabi_buffer_memset(d, 8, 0xcafef00d, 4, 1, NULL));
    ck_assert_ok(cuabi_buffer_memset(m, 0, 1, 4, 16, s));
    ck_assert_ok(cuabi_buffer_memset(p, 0, 2, 2, 32, NULL));
    ck_assert_ok(cuabi_buffer_memset(p, 0, 3, 1, 1, s));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, d, 0, 12, NULL));
    ck_assert_uint_eq(out[0], 0x7f7f7f7f);
    ck_assert_uint_eq(out[1], 0xbeefbeef);
    ck_assert_uint_eq(out[2], 0xcafef00d);
    /* free on another stream: stream-ordered, on that stream */
    int frees = fake_async_frees;
    ck_assert_ok(cuabi_buffer_free_async(d, s2));
    ck_assert_int_eq(fake_async_frees, frees + 1);
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw_s2);
    ck_assert_status(cuabi_buffer_pointer(&raw_s, d), CUABI_ERROR_INVALID_HANDLE);
    /* destroy frees a pool buffer on its allocation stream */
    ck_assert_ok(cuabi_buffer_allocate(&d, pool, 64, 0, s));
    ck_assert_ok(cuabi_stream_release(s)); /* the buffer keeps it */
    ck_assert_ok(cuabi_buffer_destroy(d));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw_s);
    ck_assert_ok(cuabi_buffer_free_async(p, s2)); /* pinned: not stream-ordered */
    ck_assert_ok(cuabi_buffer_destroy(m));
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_memory_resource_release(pin));
    ck_assert_ok(cuabi_memory_resource_release(man));
    ck_assert_ok(cuabi_stream_release(s2));
    ck_assert_int_eq(fake_live_streams, 0);
    ck_assert_int_eq(fake_live_pools, 0);
    ck_assert_ok(cuabi_device_release(dev));
    ck_assert_int_eq(fake_ctx_refs[0], 0);
}
END_TEST

/* A stream's copy and fill run in its context whatever context is current,
 * and the caller's current context is the same after (2 x H100: with device
 * 1's context left current by NCCL, a copy on device 0's stream was refused). */
START_TEST(stream_work_runs_in_the_streams_context)
{
    cuabi_device *d0, *d1;
    cuabi_stream *s0;
    cuabi_memory_resource *pool;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_device_get(&d0, 0));
    ck_assert_ok(cuabi_device_get(&d1, 1));
    ck_assert_ok(cuabi_stream_create(&s0, d0, NULL));
    ck_assert_ok(cuabi_memory_resource_pool_create(&pool, d0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 64, 0, s0));
    ck_assert_ok(cuabi_device_set_current(d1));
    CUcontext other = fake_current;
    uint32_t in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = 7u * (uint32_t)i;
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, in, 64, s0));
    ck_assert_ptr_eq(fake_current, other);
    ck_assert_ok(cuabi_buffer_memset(b, 60, 0xab, 1, 4, s0));
    ck_assert_ptr_eq(fake_current, other);
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, 64, s0));
    ck_assert_ptr_eq(fake_current, other);
    in[15] = 0xabababab;
    ck_assert_int_eq(memcmp(in, out, 64), 0);
    /* Synchronous copies and fills too (they used to leave device 0 current). */
    memset(out, 0, sizeof out);
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, 64, NULL));
    ck_assert_ptr_eq(fake_current, other);
    ck_assert_int_eq(memcmp(in, out, 64), 0);
    ck_assert_ok(cuabi_buffer_memset(b, 0, 9, 4, 1, NULL));
    ck_assert_ptr_eq(fake_current, other);
    /* No context current at all: the same, and none after. */
    fake_current = NULL;
    ck_assert_ok(cuabi_buffer_memset(b, 0, 1, 4, 1, s0));
    ck_assert_ptr_null(fake_current);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_stream_release(s0));
    ck_assert_ok(cuabi_device_release(d1));
    ck_assert_ok(cuabi_device_release(d0));
}
END_TEST

static CUresult CUDAAPI failing_free_async(CUdeviceptr d, CUstream s)
{
    fake_cuMemFreeAsync(d, s);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

START_TEST(failures_leak_nothing)
{
    cuabi_device *dev;
    cuabi_stream *s;
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    size_t live = cuabi__handle_live_count();
    int failures = 0;
    for (long n = 1; n < 50; n++) {
        cuabi_buffer *b = NULL;
        cuabi__buffer_cache_flush(); /* the struct comes from malloc */
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_buffer_allocate(&b, pool, 100, 0, s);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            ck_assert_ok(cuabi_buffer_destroy(b));
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(b);
        ck_assert_int_eq(fake_live_allocs, 0);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    ck_assert_int_ge(failures, 1);
    /* a failing deallocation is reported by free_async; the handle is gone */
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 100, 0, s));
    cuabi__driver_for_test()->cuMemFreeAsync = failing_free_async;
    ck_assert_status(cuabi_buffer_free_async(b, s), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    ck_assert_error_mentions("cuMemFreeAsync");
    ck_assert_error_mentions("cuabi_buffer_free_async"); /* not cuabi_buffer_destroy */
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* a failing pool allocation names the public function, on a created
     * stream (the fast path) and on the default stream alike */
    cuabi_stream *on[2] = {s, NULL};
    for (int i = 0; i < 2; i++) {
        cuabi__fault_arm("cuMemAllocFromPoolAsync", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
        b = NULL;
        ck_assert_status(cuabi_buffer_allocate(&b, pool, 100, 0, on[i]),
                         CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        ck_assert_error_mentions("cuabi_buffer_allocate");
        ck_assert_error_mentions("cuMemAllocFromPoolAsync");
        ck_assert_ptr_null(b);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    /* a failing memset names the public function too (it named an
     * internal helper, driver_fill), on a stream and synchronously */
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 100, 0, s));
    const char *fills[2] = {"cuMemsetD8Async", "cuMemsetD8_v2"};
    for (int i = 0; i < 2; i++) {
        cuabi__error(CUABI_SUCCESS, "(cleared)");
        cuabi__fault_arm(fills[i], 1, false, CUDA_ERROR_INVALID_VALUE);
        ck_assert_status(cuabi_buffer_memset(b, 0, 7, 1, 100, on[i]), CUABI_ERROR_CUDA);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        ck_assert_error_mentions("cuabi_buffer_memset");
        ck_assert_error_mentions(fills[i]);
        ck_assert_msg(!strstr(cuabi_last_error()->message, "driver_fill"), "%s",
                      cuabi_last_error()->message);
    }
    ck_assert_ok(cuabi_buffer_destroy(b));
    cuabi__driver_for_test()->cuMemcpy = NULL;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 100, 0, s));
    char host[4];
    ck_assert_status(cuabi_buffer_copy_to_host(host, b, 0, 4, NULL), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_ok(cuabi_buffer_copy_to_host(host, b, 0, 4, s));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

/* Pool allocate + free on a created stream must cost exactly the two
 * driver calls an application would make itself: every other entry point
 * is removed from the table, so any extra call fails the pair. */
static int pair_allocs, pair_frees;
static CUresult CUDAAPI counting_alloc(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s)
{
    pair_allocs++;
    return fake_cuMemAllocFromPoolAsync(d, n, p, s);
}
static CUresult CUDAAPI counting_free(CUdeviceptr d, CUstream s)
{
    pair_frees++;
    return fake_cuMemFreeAsync(d, s);
}

START_TEST(pool_pair_makes_only_the_two_driver_calls)
{
    cuabi_device *dev;
    cuabi_stream *s;
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    cuabi__driver *d = cuabi__driver_for_test();
    cuabi__driver saved = *d;
    memset(d, 0, sizeof *d);
    d->cuMemAllocFromPoolAsync = counting_alloc;
    d->cuMemFreeAsync = counting_free;
    pair_allocs = pair_frees = 0;
    for (int i = 0; i < 100; i++) {
        cuabi_buffer *b;
        size_t n;
        ck_assert_ok(cuabi_buffer_allocate(&b, pool, 1 << 20, 0, s));
        ck_assert_ok(cuabi_buffer_free_async(b, s));
        /* freed: invalid at once */
        ck_assert_status(cuabi_buffer_size(&n, b), CUABI_ERROR_INVALID_HANDLE);
    }
    ck_assert_int_eq(pair_allocs, 100);
    ck_assert_int_eq(pair_frees, 100);
    *d = saved;
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

/* A stream-ordered resource keeps its first CUABI__RESOURCE_STREAMS streams
 * for its buffers; a buffer on any other stream keeps that stream itself. */
START_TEST(resource_keeps_its_first_streams)
{
    enum { N = CUABI__RESOURCE_STREAMS + 2 };
    cuabi_device *dev;
    cuabi_memory_resource *pool;
    cuabi_stream *s[N];
    uintptr_t raw[N];
    cuabi_buffer *b[N];
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    for (int i = 0; i < N; i++) {
        ck_assert_ok(cuabi_stream_create(&s[i], dev, NULL));
        ck_assert_ok(cuabi_stream_raw(&raw[i], s[i]));
        ck_assert_ok(cuabi_buffer_allocate(&b[i], pool, 64, 0, s[i]));
        if (i > 0)
            ck_assert_ok(cuabi_stream_release(s[i])); /* the buffer keeps it */
    }
    ck_assert_int_eq(fake_live_streams, N);
    /* Past the resource's set: the buffer's own reference, gone with it. */
    ck_assert_ok(cuabi_buffer_destroy(b[N - 2]));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw[N - 2]);
    ck_assert_int_eq(fake_live_streams, N - 1);
    /* A view holds the memory past free_async on a stream in the set; the
     * deferred free still happens on it. */
    cuabi_view *v;
    int64_t shape = 16;
    ck_assert_ok(cuabi_view_create(&v, b[N - 1], 0, 2, 32, 1, &shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_free_async(b[N - 1], s[0]));
    ck_assert_int_eq(fake_live_streams, N - 2); /* its allocation stream went */
    ck_assert_ok(cuabi_stream_release(s[0]));   /* the resource keeps it */
    int frees = fake_async_frees;
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(fake_async_frees, frees + 1);
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw[0]);
    /* In the set: destroyed only with the resource. */
    for (int i = 0; i < CUABI__RESOURCE_STREAMS; i++) {
        ck_assert_ok(cuabi_buffer_destroy(b[i]));
        ck_assert_ptr_eq(fake_last_stream, (CUstream)raw[i]);
    }
    ck_assert_int_eq(fake_live_streams, CUABI__RESOURCE_STREAMS);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_int_eq(fake_live_streams, 0);
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

/* Threads filling a resource's stream set at once: each stream is kept
 * exactly once (no leak, no double release; the sanitizer builds check). */
static cuabi_memory_resource *race_pool;
static _Atomic int race_live;
static CUresult CUDAAPI race_alloc(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s)
{
    (void)p; (void)s;
    *d = (CUdeviceptr)(uintptr_t)malloc(n);
    atomic_fetch_add(&race_live, 1);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI race_free(CUdeviceptr d, CUstream s)
{
    (void)s;
    free((void *)(uintptr_t)d);
    atomic_fetch_sub(&race_live, 1);
    return CUDA_SUCCESS;
}
static void *allocate_on_own_stream(void *arg)
{
    cuabi_stream *s = arg;
    for (int i = 0; i < 200; i++) {
        cuabi_buffer *b;
        if (cuabi_buffer_allocate(&b, race_pool, 256, 0, s) != CUABI_SUCCESS ||
            cuabi_buffer_free_async(b, s) != CUABI_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

START_TEST(resource_stream_set_under_threads)
{
    enum { T = 2 * CUABI__RESOURCE_STREAMS };
    cuabi_device *dev;
    cuabi_stream *s[T];
    pthread_t t[T];
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_memory_resource_device_default(&race_pool, dev));
    for (int i = 0; i < T; i++)
        ck_assert_ok(cuabi_stream_create(&s[i], dev, NULL));
    cuabi__driver *d = cuabi__driver_for_test(); /* the fake's counters are not atomic */
    cuabi__driver saved = *d;
    d->cuMemAllocFromPoolAsync = race_alloc;
    d->cuMemFreeAsync = race_free;
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, allocate_on_own_stream, s[i]), 0);
    for (int i = 0; i < T; i++) {
        void *rc;
        ck_assert_int_eq(pthread_join(t[i], &rc), 0);
        ck_assert_ptr_null(rc);
    }
    *d = saved;
    ck_assert_int_eq(atomic_load(&race_live), 0);
    for (int i = 0; i < T; i++)
        ck_assert_ok(cuabi_stream_release(s[i]));
    ck_assert_int_eq(fake_live_streams, CUABI__RESOURCE_STREAMS);
    ck_assert_ok(cuabi_memory_resource_release(race_pool));
    ck_assert_int_eq(fake_live_streams, 0);
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

/* Buffers freed on other threads, and threads ending with cached buffer
 * structs, lose nothing (the sanitizer build checks for leaks). */
static cuabi_memory_resource *thread_pool;
static cuabi_stream *thread_stream;
static void *churn(void *arg)
{
    cuabi_buffer **handoff = arg;
    for (int i = 0; i < 100; i++) {
        cuabi_buffer *b;
        if (cuabi_buffer_allocate(&b, thread_pool, 256, 0, thread_stream) != CUABI_SUCCESS ||
            cuabi_buffer_free_async(b, thread_stream) != CUABI_SUCCESS)
            return (void *)1;
    }
    /* made here, freed by the main thread */
    return cuabi_buffer_allocate(handoff, thread_pool, 256, 0, thread_stream) == CUABI_SUCCESS
               ? NULL : (void *)1;
}

START_TEST(buffers_across_threads)
{
    cuabi_device *dev;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&thread_stream, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_host(&thread_pool));
    size_t live = cuabi__handle_live_count();
    pthread_t t[4];
    cuabi_buffer *handoff[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &handoff[i]), 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        ck_assert_int_eq(pthread_join(t[i], &rc), 0);
        ck_assert_ptr_null(rc);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_ok(cuabi_buffer_destroy(handoff[i]));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    ck_assert_ok(cuabi_memory_resource_release(thread_pool));
    ck_assert_ok(cuabi_stream_release(thread_stream));
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

/* ---- freed buffers parked with their handle slots (src/runtime/buffer.c) */

static uint32_t slot_of(const void *handle)
{
    return (uint32_t)((uintptr_t)handle & CUABI__HANDLE_INDEX_MASK);
}

/* A stale handle must stay refused while its struct and slot are reused,
 * and churning one buffer must cycle through more than one slot. */
START_TEST(churned_buffers_get_fresh_handles)
{
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_memory_resource_host(&r));
    enum { N = 200 };
    static cuabi_buffer *seen[N];
    uint32_t slots[N];
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&seen[i], r, 64, 0, NULL));
        for (int j = 0; j < i; j++)
            ck_assert_ptr_ne(seen[j], seen[i]); /* a new handle every time */
        int k = 0;
        while (k < distinct && slots[k] != slot_of(seen[i]))
            k++;
        if (k == distinct)
            slots[distinct++] = slot_of(seen[i]);
        ck_assert_ok(cuabi_buffer_destroy(seen[i]));
    }
    ck_assert_int_ge(distinct, 17); /* PARK_KEEP + 1, or the registry's ring */
    size_t n;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(cuabi_buffer_size(&n, seen[i]), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_ptr_nonnull(strstr(cuabi_last_error()->message, "already released"));
    }
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* A destroyed buffer whose memory a view still holds keeps its slot: no
 * other buffer may get it until the view is gone. */
START_TEST(view_held_buffer_keeps_its_slot)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b, *other;
    cuabi_view *v;
    int64_t shape[1] = { 16 };
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    uint32_t held = slot_of(b);
    ck_assert_ok(cuabi_buffer_destroy(b));
    for (int i = 0; i < 100; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&other, r, 64, 0, NULL));
        ck_assert_uint_ne(slot_of(other), held);
        ck_assert_ok(cuabi_buffer_destroy(other));
    }
    uintptr_t data;
    ck_assert_ok(cuabi_view_data_pointer(&data, v));
    memset((void *)data, 0x5a, 64); /* the memory is still there */
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static cuabi_memory_resource *park_res;
static void *churn_and_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < 40; i++) {
        cuabi_buffer *b;
        if (cuabi_buffer_allocate(&b, park_res, 32, 0, NULL) != CUABI_SUCCESS ||
            cuabi_buffer_destroy(b) != CUABI_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

/* A thread's parked slots go back when it ends: a hundred short-lived
 * threads would otherwise strand 17 slots each and push new handles'
 * indices ever higher. */
START_TEST(ended_threads_give_parked_slots_back)
{
    ck_assert_ok(cuabi_memory_resource_host(&park_res));
    size_t live = cuabi__handle_live_count();
    for (int i = 0; i < 100; i++) {
        pthread_t t;
        void *rc;
        ck_assert_int_eq(pthread_create(&t, NULL, churn_and_exit, NULL), 0);
        ck_assert_int_eq(pthread_join(t, &rc), 0);
        ck_assert_ptr_null(rc);
    }
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* past the few free slots, new handles come from never-used indices */
    cuabi_buffer *b[100];
    for (int i = 0; i < 100; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&b[i], park_res, 32, 0, NULL));
        ck_assert_uint_lt(slot_of(b[i]), 1000);
    }
    for (int i = 0; i < 100; i++)
        ck_assert_ok(cuabi_buffer_destroy(b[i]));
    ck_assert_ok(cuabi_memory_resource_release(park_res));
}
END_TEST

/* ---- resource leases (src/runtime/park.h) */

static int64_t refs_of(cuabi_memory_resource *r)
{
    void *obj;
    ck_assert_ok(cuabi__handle_get(r, CUABI__T_MEMORY_RESOURCE, &obj, "test"));
    return atomic_load(&((cuabi__memory_resource *)obj)->base.refs);
}

/* membarrier(2) is there on the machines the tests run on (Linux >= 4.14
 * without a seccomp filter against it); without it there is no lease and
 * these tests would check nothing, so say so loudly. */
START_TEST(leases_are_available_here)
{
    ck_assert_msg(cuabi__leases_available(),
                  "membarrier(2) unavailable: buffers update the resource count each time");
}
END_TEST

/* After the first free, allocating and freeing from one resource on one
 * thread leaves the resource's shared count alone. */
START_TEST(a_lease_spares_the_shared_count)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_memory_resource_host(&r));
    cuabi__buffer_cache_flush();
    int64_t alone = refs_of(r);
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    ck_assert_int_eq(refs_of(r), alone + 1); /* no lease yet: counted */
    ck_assert_ok(cuabi_buffer_destroy(b));
    int64_t leased = refs_of(r);               /* its reference now a spare */
    ck_assert_int_eq(leased, alone + 1);
    for (int i = 0; i < 100; i++) {
        ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
        ck_assert_int_eq(refs_of(r), leased);
        ck_assert_ok(cuabi_buffer_destroy(b));
        ck_assert_int_eq(refs_of(r), leased);
    }
    ck_assert_ok(cuabi_memory_resource_release(r)); /* takes the spare back */
}
END_TEST

static pthread_barrier_t lease_gate;
static cuabi_memory_resource *lease_res;
static void *lease_then_idle(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++) {
        cuabi_buffer *b;
        if (cuabi_buffer_allocate(&b, lease_res, 32, 0, NULL) != CUABI_SUCCESS ||
            cuabi_buffer_destroy(b) != CUABI_SUCCESS)
            return (void *)1;
    }
    pthread_barrier_wait(&lease_gate); /* leased; now idle */
    pthread_barrier_wait(&lease_gate); /* until the main thread checked */
    return NULL;
}

/* A thread that leased a resource and went idle must not keep it alive
 * once its caller released it. */
START_TEST(release_reclaims_an_idle_threads_lease)
{
    size_t live = cuabi__handle_live_count();
    ck_assert_ok(cuabi_memory_resource_host(&lease_res));
    ck_assert_int_eq(pthread_barrier_init(&lease_gate, NULL, 2), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, lease_then_idle, NULL), 0);
    pthread_barrier_wait(&lease_gate);
    ck_assert_int_eq(refs_of(lease_res), 2); /* the caller's + the idle thread's spare */
    ck_assert_ok(cuabi_memory_resource_release(lease_res));
    cuabi_memory_kind kind;
    ck_assert_int_eq(cuabi_memory_resource_kind(&kind, lease_res), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    pthread_barrier_wait(&lease_gate);
    void *rc;
    ck_assert_int_eq(pthread_join(t, &rc), 0);
    ck_assert_ptr_null(rc);
    pthread_barrier_destroy(&lease_gate);
}
END_TEST

static cuabi_buffer *outliving;
static void *free_outliving(void *arg)
{
    (void)arg;
    return cuabi_buffer_destroy(outliving) == CUABI_SUCCESS ? NULL : (void *)1;
}

/* A buffer keeps its released resource alive; freeing it (on this thread
 * or another) destroys the resource then, and starts no new lease. */
START_TEST(released_resource_dies_with_its_last_buffer)
{
    size_t live = cuabi__handle_live_count();
    for (int other_thread = 0; other_thread < 2; other_thread++) {
        cuabi_memory_resource *r;
        cuabi_memory_kind kind;
        ck_assert_ok(cuabi_memory_resource_host(&r));
        ck_assert_ok(cuabi_buffer_allocate(&outliving, r, 64, 0, NULL));
        ck_assert_ok(cuabi_memory_resource_release(r));
        ck_assert_ok(cuabi_memory_resource_kind(&kind, r)); /* the buffer keeps it */
        if (other_thread) {
            pthread_t t;
            void *rc;
            ck_assert_int_eq(pthread_create(&t, NULL, free_outliving, NULL), 0);
            ck_assert_int_eq(pthread_join(t, &rc), 0);
            ck_assert_ptr_null(rc);
        } else {
            ck_assert_ok(cuabi_buffer_destroy(outliving));
        }
        ck_assert_int_eq(cuabi_memory_resource_kind(&kind, r), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
}
END_TEST

/* Reclaims while other threads churn buffers of other resources (inside
 * their sections) and free buffers of the one being released. */
enum { CHURNERS = 4, ROUNDS = 30, KEPT = 8 };
static cuabi_memory_resource *churn_res[CHURNERS];
static cuabi_buffer *kept_bufs[CHURNERS][KEPT];
static pthread_barrier_t churn_gate;
static void *churn_and_hand_back(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&churn_gate); /* kept_bufs[me] are from the released resource */
        for (int i = 0; i < 200; i++) {
            cuabi_buffer *b;
            if (cuabi_buffer_allocate(&b, churn_res[me], 16, 0, NULL) != CUABI_SUCCESS ||
                cuabi_buffer_destroy(b) != CUABI_SUCCESS)
                return (void *)1;
            if (i % 25 == 0 && cuabi_buffer_destroy(kept_bufs[me][i / 25]) != CUABI_SUCCESS)
                return (void *)1;
        }
        pthread_barrier_wait(&churn_gate);
    }
    return NULL;
}

START_TEST(reclaims_under_churn)
{
    size_t live = cuabi__handle_live_count();
    for (int i = 0; i < CHURNERS; i++)
        ck_assert_ok(cuabi_memory_resource_host(&churn_res[i]));
    ck_assert_int_eq(pthread_barrier_init(&churn_gate, NULL, CHURNERS + 1), 0);
    pthread_t t[CHURNERS];
    for (int i = 0; i < CHURNERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn_and_hand_back, (void *)(intptr_t)i), 0);
    for (int round = 0; round < ROUNDS; round++) {
        cuabi_memory_resource *doomed;
        cuabi_memory_kind kind;
        ck_assert_ok(cuabi_memory_resource_host(&doomed));
        for (int i = 0; i < CHURNERS; i++)
            for (int k = 0; k < KEPT; k++)
                ck_assert_ok(cuabi_buffer_allocate(&kept_bufs[i][k], doomed, 16, 0, NULL));
        /* this thread leases `doomed` too */
        cuabi_buffer *b;
        ck_assert_ok(cuabi_buffer_allocate(&b, doomed, 16, 0, NULL));
        ck_assert_ok(cuabi_buffer_destroy(b));
        pthread_barrier_wait(&churn_gate);
        ck_assert_ok(cuabi_memory_resource_release(doomed)); /* while they churn and free */
        pthread_barrier_wait(&churn_gate);
        ck_assert_int_eq(cuabi_memory_resource_kind(&kind, doomed), CUABI_ERROR_INVALID_HANDLE);
    }
    for (int i = 0; i < CHURNERS; i++) {
        void *rc;
        ck_assert_int_eq(pthread_join(t[i], &rc), 0);
        ck_assert_ptr_null(rc);
        ck_assert_ok(cuabi_memory_resource_release(churn_res[i]));
    }
    pthread_barrier_destroy(&churn_gate);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

/* A forked child (only the forking thread) must not wait for the other
 * threads' parks when it releases a resource. */
START_TEST(release_in_a_forked_child)
{
    ck_assert_ok(cuabi_memory_resource_host(&lease_res));
    ck_assert_int_eq(pthread_barrier_init(&lease_gate, NULL, 2), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, lease_then_idle, NULL), 0);
    pthread_barrier_wait(&lease_gate);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        cuabi_memory_resource *r;
        cuabi_buffer *b;
        int ok = cuabi_memory_resource_host(&r) == CUABI_SUCCESS &&
                 cuabi_buffer_allocate(&b, r, 8, 0, NULL) == CUABI_SUCCESS &&
                 cuabi_buffer_destroy(b) == CUABI_SUCCESS &&
                 cuabi_memory_resource_release(r) == CUABI_SUCCESS &&
                 cuabi_memory_resource_release(lease_res) == CUABI_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    for (int waited = 0; waited < 1000 && waitpid(pid, &status, WNOHANG) == 0; waited++)
        usleep(10 * 1000);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ck_abort_msg("the forked child hung releasing a resource");
    }
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_barrier_wait(&lease_gate);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    pthread_barrier_destroy(&lease_gate);
    ck_assert_ok(cuabi_memory_resource_release(lease_res));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("buffer");
    TCase *tc = tcase_create("buffers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, host_buffer_getters_and_lifetime);
    tcase_add_test(tc, buffer_handle_misuse);
    tcase_add_test(tc, wrapped_buffers_release_once);
    tcase_add_test(tc, host_copies_and_bounds);
    tcase_add_test(tc, host_memsets_of_each_width);
    tcase_add_test(tc, device_buffers_on_the_fake_driver);
    tcase_add_test(tc, stream_work_runs_in_the_streams_context);
    tcase_add_test(tc, failures_leak_nothing);
    tcase_add_test(tc, pool_pair_makes_only_the_two_driver_calls);
    tcase_add_test(tc, buffers_across_threads);
    tcase_add_test(tc, resource_keeps_its_first_streams);
    tcase_add_test(tc, resource_stream_set_under_threads);
    tcase_add_test(tc, churned_buffers_get_fresh_handles);
    tcase_add_test(tc, view_held_buffer_keeps_its_slot);
    tcase_add_test(tc, ended_threads_give_parked_slots_back);
    tcase_add_test(tc, leases_are_available_here);
    tcase_add_test(tc, a_lease_spares_the_shared_count);
    tcase_add_test(tc, release_reclaims_an_idle_threads_lease);
    tcase_add_test(tc, released_resource_dies_with_its_last_buffer);
    tcase_add_test(tc, reclaims_under_churn);
    tcase_add_test(tc, release_in_a_forked_child);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
