/* Views over buffers: creation, queries, contiguity, slicing, lifetime. */
#include "testutil.h"
#include "runtime/memory.h"

static cuabi_memory_resource *res;
static void setup(void) { ck_assert_ok(cuabi_memory_resource_host(&res)); }
static void teardown(void) { ck_assert_ok(cuabi_memory_resource_release(res)); }

/* A host buffer of n int32 holding 0, 1, 2, ... */
static cuabi_buffer *iota(int n)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, res, (size_t)n * 4, 0, NULL));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    for (int i = 0; i < n; i++)
        ((int32_t *)p)[i] = i;
    return b;
}

/* Element at index (i, j) of a 2-D int32 view. */
static int32_t at2(cuabi_view *v, int64_t i, int64_t j)
{
    uintptr_t p;
    int64_t st[2];
    ck_assert_ok(cuabi_view_data_pointer(&p, v));
    ck_assert_ok(cuabi_view_strides(st, 2, v));
    return ((int32_t *)p)[i * st[0] + j * st[1]];
}

START_TEST(view_over_buffer_info)
{
    cuabi_buffer *b = iota(24);
    cuabi_view *v;
    int64_t shape[2] = { 4, 5 };
    ck_assert_ok(cuabi_view_create(&v, b, 4, CUABI_DTYPE_INT, 32, 2, shape, NULL, 0));
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, v));
    uintptr_t base;
    ck_assert_ok(cuabi_buffer_pointer(&base, b));
    ck_assert_uint_eq(info.data, base);
    ck_assert_uint_eq(info.byte_offset, 4);
    ck_assert_int_eq(info.device_type, CUABI_DLPACK_CPU);
    ck_assert_int_eq(info.device_id, 0);
    ck_assert_int_eq(info.dtype_code, CUABI_DTYPE_INT);
    ck_assert_int_eq(info.dtype_bits, 32);
    ck_assert_int_eq(info.dtype_lanes, 1);
    ck_assert_int_eq(info.ndim, 2);
    ck_assert_int_eq(info.shape[1], 5);
    ck_assert_int_eq(info.strides[0], 5);
    ck_assert_int_eq(info.strides[1], 1);
    ck_assert_uint_eq(info.itemsize, 4);
    ck_assert_int_eq(info.size, 20);
    ck_assert_uint_eq(info.flags, 0);
    uintptr_t p;
    ck_assert_ok(cuabi_view_data_pointer(&p, v));
    ck_assert_uint_eq(p, base + 4);
    ck_assert_int_eq(at2(v, 1, 2), 8);
    uint64_t nb;
    ck_assert_ok(cuabi_view_nbytes(&nb, v));
    ck_assert_uint_eq(nb, 80);
    int nd, c, f;
    ck_assert_ok(cuabi_view_ndim(&nd, v));
    ck_assert_int_eq(nd, 2);
    ck_assert_ok(cuabi_view_is_c_contiguous(&c, v));
    ck_assert_ok(cuabi_view_is_f_contiguous(&f, v));
    ck_assert_int_eq(c, 1);
    ck_assert_int_eq(f, 0);
    int64_t out[2];
    ck_assert_status(cuabi_view_shape(out, 1, v), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_ok(cuabi_view_shape(out, 2, v));
    ck_assert_int_eq(out[0], 4);
    /* the view keeps the buffer's memory alive after the buffer handle */
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(at2(v, 3, 4), 20);
    ck_assert_ok(cuabi_view_release(v));
}
END_TEST

START_TEST(view_create_rejects_bad_layouts)
{
    cuabi_buffer *b = iota(24);
    cuabi_view *v = (cuabi_view *)1;
    int64_t shape[2] = { 4, 6 }, strides[2] = { 6, 1 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, strides,
                                   CUABI_VIEW_READ_ONLY));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_status(cuabi_view_create(&v, b, 4, CUABI_DTYPE_FLOAT, 32, 2, shape, strides, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("outside the buffer");
    ck_assert_ptr_null(v);
    int64_t neg[2] = { -6, 1 };
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, neg, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_view_create(&v, b, 18 * 4, CUABI_DTYPE_FLOAT, 32, 2, shape, neg, 0));
    ck_assert_ok(cuabi_view_release(v));
    int64_t bad_shape[2] = { 4, -1 };
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, bad_shape, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("negative");
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 12, 2, shape, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT4_E2M1FN, 4, 2, shape, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, shape, NULL, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 65, shape, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, NULL, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    int64_t huge[2] = { INT64_MAX, 2 };
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, huge, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    int64_t big_stride[2] = { INT64_MAX / 2, 1 };
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, shape, big_stride, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("overflows");
    /* scalar and empty views */
    ck_assert_ok(cuabi_view_create(&v, b, 8, CUABI_DTYPE_INT, 32, 0, NULL, NULL, 0));
    uint64_t nb;
    ck_assert_ok(cuabi_view_nbytes(&nb, v));
    ck_assert_uint_eq(nb, 4);
    ck_assert_ok(cuabi_view_release(v));
    int64_t empty[2] = { 0, 1000 };
    ck_assert_ok(cuabi_view_create(&v, b, 96, CUABI_DTYPE_INT, 32, 2, empty, NULL, 0));
    int c, f;
    ck_assert_ok(cuabi_view_is_c_contiguous(&c, v));
    ck_assert_ok(cuabi_view_is_f_contiguous(&f, v));
    ck_assert_int_eq(c & f, 1);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_status(cuabi_view_create(NULL, b, 0, CUABI_DTYPE_INT, 32, 0, NULL, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_create(&v, (cuabi_buffer *)res, 0, CUABI_DTYPE_INT, 32, 0, NULL,
                                       NULL, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 0, NULL, NULL, 0),
                     CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(every_supported_dtype)
{
    cuabi_buffer *b = iota(8);
    static const int ok[][2] = {
        { CUABI_DTYPE_INT, 8 }, { CUABI_DTYPE_INT, 64 }, { CUABI_DTYPE_UINT, 16 },
        { CUABI_DTYPE_FLOAT, 16 }, { CUABI_DTYPE_FLOAT, 64 }, { CUABI_DTYPE_BFLOAT, 16 },
        { CUABI_DTYPE_COMPLEX, 64 }, { CUABI_DTYPE_COMPLEX, 128 }, { CUABI_DTYPE_BOOL, 8 },
        { CUABI_DTYPE_FLOAT8_E3M4, 8 }, { CUABI_DTYPE_FLOAT8_E4M3FN, 8 },
        { CUABI_DTYPE_FLOAT8_E5M2, 8 }, { CUABI_DTYPE_FLOAT8_E8M0FNU, 8 },
    };
    static const int bad[][2] = {
        { CUABI_DTYPE_INT, 4 }, { CUABI_DTYPE_FLOAT, 8 }, { CUABI_DTYPE_BFLOAT, 32 },
        { CUABI_DTYPE_BOOL, 1 }, { CUABI_DTYPE_OPAQUE_HANDLE, 64 },
        { CUABI_DTYPE_FLOAT6_E2M3FN, 6 }, { CUABI_DTYPE_FLOAT8_E4M3, 16 }, { 99, 8 }, { -1, 8 },
    };
    int64_t shape[1] = { 2 };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cuabi_view *v;
        ck_assert_ok(cuabi_view_create(&v, b, 0, ok[i][0], ok[i][1], 1, shape, NULL, 0));
        uint64_t nb;
        ck_assert_ok(cuabi_view_nbytes(&nb, v));
        ck_assert_uint_eq(nb, 2u * (unsigned)ok[i][1] / 8u);
        ck_assert_ok(cuabi_view_release(v));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cuabi_view *v;
        ck_assert_status(cuabi_view_create(&v, b, 0, bad[i][0], bad[i][1], 1, shape, NULL, 0),
                         CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions("not supported");
    }
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

START_TEST(slices_with_steps)
{
    cuabi_buffer *b = iota(30);
    cuabi_view *v, *s, *t;
    int64_t shape[2] = { 5, 6 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_destroy(b));
    /* rows 1..4 step 2, columns 5..0 step -2 */
    int64_t start[2] = { 1, 5 }, stop[2] = { 5, -1 }, step[2] = { 2, -2 };
    ck_assert_ok(cuabi_view_slice(&s, v, 2, start, stop, step));
    int64_t sh[2], st[2];
    ck_assert_ok(cuabi_view_shape(sh, 2, s));
    ck_assert_ok(cuabi_view_strides(st, 2, s));
    ck_assert_int_eq(sh[0], 2);
    ck_assert_int_eq(sh[1], 3);
    ck_assert_int_eq(st[0], 12);
    ck_assert_int_eq(st[1], -2);
    ck_assert_int_eq(at2(s, 0, 0), 11);
    ck_assert_int_eq(at2(s, 1, 2), 19);
    int c, f;
    ck_assert_ok(cuabi_view_is_c_contiguous(&c, s));
    ck_assert_ok(cuabi_view_is_f_contiguous(&f, s));
    ck_assert_int_eq(c + f, 0);
    /* a slice of a slice, then drop the parents: the root keeps the memory */
    int64_t s2[2] = { 1, 0 }, e2[2] = { 2, 3 };
    ck_assert_ok(cuabi_view_slice(&t, s, 2, s2, e2, NULL));
    ck_assert_ok(cuabi_view_release(s));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(at2(t, 0, 0), 23);
    ck_assert_int_eq(at2(t, 0, 2), 19);
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, t));
    ck_assert_int_eq(info.size, 3);
    ck_assert_ok(cuabi_view_release(t));
}
END_TEST

START_TEST(slice_contiguity_and_errors)
{
    cuabi_buffer *b = iota(30);
    cuabi_view *v, *s = (cuabi_view *)1;
    int64_t shape[2] = { 5, 6 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, shape, NULL, 0));
    int64_t a[2] = { 2, 0 }, z[2] = { 3, 6 };
    ck_assert_ok(cuabi_view_slice(&s, v, 2, a, z, NULL)); /* one row: both orders */
    int c, f;
    ck_assert_ok(cuabi_view_is_c_contiguous(&c, s));
    ck_assert_ok(cuabi_view_is_f_contiguous(&f, s));
    ck_assert_int_eq(c, 1);
    ck_assert_int_eq(f, 1); /* NumPy agrees: extents of 1 do not count */
    ck_assert_ok(cuabi_view_release(s));
    int64_t a2[2] = { 0, 2 }, z2[2] = { 5, 3 };
    ck_assert_ok(cuabi_view_slice(&s, v, 2, a2, z2, NULL)); /* one column */
    ck_assert_ok(cuabi_view_is_c_contiguous(&c, s));
    ck_assert_int_eq(c, 0);
    ck_assert_ok(cuabi_view_release(s));
    int64_t e[2] = { 3, 3 };
    ck_assert_ok(cuabi_view_slice(&s, v, 2, e, e, NULL)); /* empty */
    uint64_t nb;
    ck_assert_ok(cuabi_view_nbytes(&nb, s));
    ck_assert_uint_eq(nb, 0);
    ck_assert_ok(cuabi_view_release(s));
    int64_t bad_start[2] = { 6, 0 }, zero[2] = { 0, 0 }, neg1[2] = { 0, -1 };
    ck_assert_status(cuabi_view_slice(&s, v, 2, bad_start, z, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("slice.indices");
    ck_assert_ptr_null(s);
    ck_assert_status(cuabi_view_slice(&s, v, 2, a, z, zero), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("step");
    ck_assert_status(cuabi_view_slice(&s, v, 2, a, neg1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_slice(&s, v, 1, a, z, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_slice(&s, v, 2, NULL, z, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_slice(NULL, v, 2, a, z, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_slice(&s, (cuabi_view *)b, 2, a, z, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_view_release(v));
}
END_TEST

START_TEST(view_handle_misuse)
{
    cuabi_buffer *b = iota(4);
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 0, NULL, NULL, 0));
    cuabi_view *wrong = (cuabi_view *)b;
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    uintptr_t p;
    int i;
    int64_t dims[1];
    uint64_t nb;
    ck_assert_status(cuabi_view_get_info(&info, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_data_pointer(&p, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_ndim(&i, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_shape(dims, 1, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_strides(dims, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_is_c_contiguous(&i, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_is_f_contiguous(&i, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_nbytes(&nb, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_retain(wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_get_info(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    info.version = 0;
    ck_assert_status(cuabi_view_get_info(&info, v), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_view_data_pointer(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_ndim(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_is_c_contiguous(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_is_f_contiguous(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_nbytes(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_view_shape(NULL, 0, v)); /* ndim 0 */
    ck_assert_ok(cuabi_view_retain(v));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_status(cuabi_view_ndim(&i, v), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_release(v), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

static int released;
static void on_release(uintptr_t ptr, size_t size, void *payload)
{
    (void)ptr; (void)size; (void)payload;
    released++;
}

START_TEST(wrapped_memory_outlives_buffer_until_last_view)
{
    static int32_t mem[8];
    cuabi_buffer *b;
    cuabi_view *v;
    released = 0;
    ck_assert_ok(cuabi_buffer_wrap(&b, NULL, CUABI_MEMORY_HOST, (uintptr_t)mem, sizeof mem,
                                   on_release, NULL));
    int64_t shape[1] = { 8 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(released, 0);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(released, 1);
}
END_TEST

START_TEST(allocation_failures_leak_nothing)
{
    cuabi_buffer *b = iota(30);
    cuabi_view *v, *s;
    int64_t shape[2] = { 5, 6 }, a[2] = { 0, 0 }, z[2] = { 2, 2 };
    size_t live = cuabi__handle_live_count();
    int failures = 0;
    for (long n = 1; n < 20; n++) {
        v = s = NULL;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 2, shape, NULL, 0);
        if (st == CUABI_SUCCESS)
            st = cuabi_view_slice(&s, v, 2, a, z, NULL);
        cuabi__alloc_fail_at(0, false);
        if (v)
            ck_assert_ok(cuabi_view_release(v));
        if (st == CUABI_SUCCESS) {
            ck_assert_ok(cuabi_view_release(s));
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(s);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    ck_assert_int_ge(failures, 2);
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

/* Issue 29 item 1: a shape whose element count wraps around 2^64 (2^62 x 4
 * is 0 modulo 2^64) was taken for an empty view: accepted with nbytes 0,
 * every slice at the buffer's start. Counts and byte sizes must fit. */
START_TEST(view_sizes_that_wrap_are_refused)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, res, 64, 0, NULL));
    cuabi_view *v = (cuabi_view *)1;
    int64_t wraps[2] = { INT64_C(1) << 62, 4 };
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 2, wraps, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("shape: the element count overflows 64 bits");
    ck_assert_ptr_null(v);
    int64_t wraps3[3] = { 4, INT64_C(1) << 62, 4 };   /* wraps to 0 from the middle */
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 3, wraps3, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    int64_t pow63[1] = { INT64_MIN };                  /* (1 << 63) as int64 */
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 1, pow63, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("negative");
    /* the count fits, its bytes do not (2^62 x 8): broadcast (stride 0) or not */
    int64_t big[1] = { INT64_C(1) << 62 }, zero[1] = { 0 };
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 64, 1, big, zero, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("overflow 63 bits");
    ck_assert_status(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 64, 1, big, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* a broadcast view of 2^60 bytes over one element is fine, nbytes exact */
    int64_t bcast[1] = { INT64_C(1) << 60 };
    ck_assert_ok(cuabi_view_create(&v, b, 8, CUABI_DTYPE_UINT, 8, 1, bcast, zero, 0));
    uint64_t nb;
    ck_assert_ok(cuabi_view_nbytes(&nb, v));
    ck_assert_uint_eq(nb, UINT64_C(1) << 60);
    cuabi_view *s;
    int64_t start[1] = { 1000 }, stop[1] = { 1001 };
    ck_assert_ok(cuabi_view_slice(&s, v, 1, start, stop, NULL));
    uintptr_t p, q;
    ck_assert_ok(cuabi_view_data_pointer(&p, v));
    ck_assert_ok(cuabi_view_data_pointer(&q, s));
    ck_assert_uint_eq(p, q);                            /* stride 0: the same byte */
    ck_assert_ok(cuabi_view_release(s));
    ck_assert_ok(cuabi_view_release(v));
    /* rows of a real 2-D view land on their own bytes */
    int64_t rows[2] = { 16, 4 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 2, rows, NULL, 0));
    int64_t st2[2] = { 5, 0 }, sp2[2] = { 6, 4 };
    ck_assert_ok(cuabi_view_slice(&s, v, 2, st2, sp2, NULL));
    ck_assert_ok(cuabi_view_data_pointer(&q, s));
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(q, p + 20);
    ck_assert_ok(cuabi_view_release(s));
    ck_assert_ok(cuabi_view_release(v));
    /* the offset of an empty view may reach the end of the buffer, not past it */
    int64_t empty[1] = { 0 };
    ck_assert_ok(cuabi_view_create(&v, b, 64, CUABI_DTYPE_UINT, 8, 1, empty, NULL, 0));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_status(cuabi_view_create(&v, b, 65, CUABI_DTYPE_UINT, 8, 1, empty, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("offset 65 is past the end");
    ck_assert_status(cuabi_view_create(&v, b, UINT64_MAX, CUABI_DTYPE_UINT, 8, 1, empty, NULL,
                                       0), CUABI_ERROR_INVALID_ARGUMENT);
    /* an offset whose end wraps */
    int64_t one[1] = { 1 };
    ck_assert_status(cuabi_view_create(&v, b, UINT64_MAX, CUABI_DTYPE_UINT, 8, 1, one, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

/* Steps at the ends of int64: -INT64_MIN does not exist, and a stride times
 * a step that overflows only matters for a dimension that moves. */
START_TEST(slice_extreme_steps)
{
    cuabi_buffer *b = iota(8);
    cuabi_view *v, *s;
    int64_t shape[1] = { 4 }, strides[1] = { 2 };   /* 0, 2, 4, 6 */
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_INT, 32, 1, shape, strides, 0));
    int64_t start[1] = { 3 }, stop[1] = { -1 }, step[1] = { INT64_MIN };
    ck_assert_ok(cuabi_view_slice(&s, v, 1, start, stop, step));
    int64_t n;
    ck_assert_ok(cuabi_view_shape(&n, 1, s));
    ck_assert_int_eq(n, 1);
    uintptr_t p;
    ck_assert_ok(cuabi_view_data_pointer(&p, s));
    ck_assert_int_eq(*(int32_t *)p, 6);
    ck_assert_ok(cuabi_view_release(s));
    int64_t fstart[1] = { 1 }, fstop[1] = { 4 }, fstep[1] = { INT64_MAX };
    ck_assert_ok(cuabi_view_slice(&s, v, 1, fstart, fstop, fstep));
    ck_assert_ok(cuabi_view_shape(&n, 1, s));
    ck_assert_int_eq(n, 1);
    ck_assert_ok(cuabi_view_data_pointer(&p, s));
    ck_assert_int_eq(*(int32_t *)p, 2);
    ck_assert_ok(cuabi_view_release(s));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("view");
    TCase *tc = tcase_create("views");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, view_over_buffer_info);
    tcase_add_test(tc, view_create_rejects_bad_layouts);
    tcase_add_test(tc, every_supported_dtype);
    tcase_add_test(tc, slices_with_steps);
    tcase_add_test(tc, slice_contiguity_and_errors);
    tcase_add_test(tc, view_handle_misuse);
    tcase_add_test(tc, wrapped_memory_outlives_buffer_until_last_view);
    tcase_add_test(tc, allocation_failures_leak_nothing);
    tcase_add_test(tc, view_sizes_that_wrap_are_refused);
    tcase_add_test(tc, slice_extreme_steps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
