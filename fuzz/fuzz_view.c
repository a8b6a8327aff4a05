/* Views over buffers and their slices from random sizes (issue 29): a
 * buffer (a real host one of up to 4 KiB, or a wrapped one of any size that
 * is never touched), a dtype, ndim, extents, strides (or row-major), a byte
 * offset; then slices of the view and of its slices, and a DLPack round
 * trip. Extents, strides, offsets and slice bounds come small or as whole
 * 64-bit values, so sums and products near 2^63 and 2^64 are common.
 *
 * Differential: every answer is checked against the same rules computed in
 * __int128, where nothing wraps. A view is accepted exactly when its
 * element count times the item size, its lowest and highest byte reached
 * fit in 63 bits and every element lies inside the buffer; a slice exactly
 * for the bounds Python's slice.indices() gives. An accepted view's count,
 * nbytes, first address and span must be the exact ones, and each element
 * of a real buffer is read (ASan reports a byte outside the allocation). A
 * refusal must be INVALID_ARGUMENT with a message and a NULL handle.
 * Disagreement traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuabi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef __int128 i128;
#define I64_MIN ((i128)INT64_MIN)
#define I64_MAX ((i128)INT64_MAX)
#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

typedef struct reader { const uint8_t *p; size_t n; } reader;
static uint64_t take(reader *r, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++) {
        v = v << 8 | (r->n ? *r->p : 0);
        if (r->n) r->p++, r->n--;
    }
    return v;
}

/* A signed 64-bit value: small (-64..63) or any (a whole word), or one of
 * the edges the arithmetic lives at. */
static int64_t value(reader *r)
{
    uint8_t how = (uint8_t)take(r, 1);
    switch (how >> 6) {
    case 0: case 1: return (int8_t)(how << 1) >> 1;
    case 2: {
        static const int64_t edges[] = { INT64_MAX, INT64_MIN, INT64_C(1) << 62,
                                         INT64_C(1) << 61, INT64_C(1) << 32, INT64_C(1) << 31,
                                         (INT64_C(1) << 32) - 1, (INT64_C(1) << 62) - 1 };
        uint64_t e = (uint64_t)edges[how & 7];   /* +-1 around it, wrapping at the ends */
        return (int64_t)((how & 8) ? (uint64_t)0 - e : e + ((how >> 4) & 3) - 1);
    }
    default: return (int64_t)take(r, 8);
    }
}

enum { MAXDIM = 64 };
typedef struct layout {
    int ndim;
    int64_t shape[MAXDIM], strides[MAXDIM];
} layout;

/* What a layout reaches, exactly: 0 when it is invalid on its own. */
typedef struct reach { i128 count, lo, end; } reach;
static int oracle_reach(reach *out, int ndim, const int64_t *shape, const int64_t *strides,
                        i128 item)
{
    out->count = out->lo = out->end = 0;
    int empty = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return 0;
        empty |= shape[d] == 0;
    }
    if (empty)
        return 1;
    i128 n = 1;
    for (int d = 0; d < ndim; d++)
        if ((n *= shape[d]) > I64_MAX)
            return 0;
    if (n * item > I64_MAX)
        return 0;
    i128 lo = 0, hi = 0;
    if (!strides) {
        hi = n - 1;
    } else {
        for (int d = 0; d < ndim; d++) {
            i128 t = (i128)(shape[d] - 1) * strides[d];
            if (t > 0)
                hi += t;
            else
                lo += t;
            if (hi > I64_MAX || lo < I64_MIN)   /* one sign only: stays out */
                return 0;
        }
    }
    if (lo * item < I64_MIN || (hi + 1) * item > I64_MAX)
        return 0;
    out->count = n;
    out->lo = lo * item;
    out->end = (hi + 1) * item;
    return 1;
}

typedef struct buf {
    uintptr_t base;
    size_t size;
    int real;                 /* host memory of `size` bytes: elements are read */
} buf;

static void expect_refusal(cuabi_status st, const void *out)
{
    CHECK(st == CUABI_ERROR_INVALID_ARGUMENT && out == NULL);
    const cuabi_error_info *e = cuabi_last_error();
    CHECK(e->status == st && e->message && e->message[0]);
}

static volatile uint8_t sink;

/* An accepted view (of `b`) against what it must be. */
static void check_view(cuabi_view *v, const buf *b, i128 first, int ndim, const int64_t *shape,
                       i128 item)
{
    uintptr_t p;
    uint64_t nbytes;
    int64_t sh[MAXDIM], st[MAXDIM];
    int nd = -1;
    CHECK(cuabi_view_data_pointer(&p, v) == CUABI_SUCCESS && (i128)p == first);
    CHECK(cuabi_view_ndim(&nd, v) == CUABI_SUCCESS && nd == ndim);
    CHECK(cuabi_view_shape(sh, MAXDIM, v) == CUABI_SUCCESS);
    CHECK(cuabi_view_strides(st, MAXDIM, v) == CUABI_SUCCESS);
    i128 n = 1;
    for (int d = 0; d < ndim; d++) {
        CHECK(sh[d] == shape[d]);
        if (sh[d] == 0)
            n = 0;
    }
    for (int d = 0; n && d < ndim; d++) {   /* an empty view's other extents may be huge */
        n *= sh[d];
        CHECK(n <= I64_MAX);
    }
    CHECK(cuabi_view_nbytes(&nbytes, v) == CUABI_SUCCESS && (i128)nbytes == n * item);
    if (n == 0) {
        CHECK(first >= (i128)b->base && first <= (i128)b->base + b->size);
        return;
    }
    /* every element inside the buffer: the lowest and the highest byte */
    i128 lo = first, hi = first;
    for (int d = 0; d < ndim; d++) {
        i128 t = (i128)(sh[d] - 1) * st[d] * item;
        if (t > 0)
            hi += t;
        else
            lo += t;
    }
    CHECK(lo >= (i128)b->base && hi + item <= (i128)b->base + b->size);
    if (!b->real || n > 4096)
        return;
    /* read each element (ASan: none outside the allocation) */
    int64_t idx[MAXDIM] = { 0 };
    for (i128 k = 0; k < n; k++) {
        i128 off = 0;
        for (int d = 0; d < ndim; d++)
            off += (i128)idx[d] * st[d] * item;
        const uint8_t *e = (const uint8_t *)(uintptr_t)(first + off);
        sink = e[0];
        sink = e[item - 1];
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < sh[d])
                break;
            idx[d] = 0;
        }
    }
}

/* Slices of `v` (`depth` more levels), each against the oracle. */
static void slices(cuabi_view *v, const buf *b, i128 first, int ndim, const int64_t *shape,
                   const int64_t *strides, i128 item, reader *r, int depth)
{
    if (depth == 0 || r->n == 0)
        return;
    int64_t start[MAXDIM], stop[MAXDIM], step[MAXDIM], len[MAXDIM], cst[MAXDIM];
    int ok = 1;
    i128 count = 1, off = 0;
    for (int d = 0; d < ndim; d++) {
        int64_t n = shape[d];
        uint8_t how = (uint8_t)take(r, 1);
        int64_t a = value(r), z = value(r), s = how & 0x80 ? value(r) : (int8_t)how >> 4;
        if ((how & 0x40) && s != 0 && n < INT64_MAX - 2) {
            /* what slice.indices(n) gives for (a, z, s): clamp like Python */
            i128 lo = s < 0 ? -1 : 0, hi = s < 0 ? (i128)n - 1 : n;
            i128 aa = a < 0 ? (i128)a + n : a, zz = z < 0 ? (i128)z + n : z;
            aa = aa < lo ? lo : aa > hi ? hi : aa;
            zz = zz < lo ? lo : zz > hi ? hi : zz;
            a = (int64_t)aa;
            z = (int64_t)zz;
        }
        start[d] = a, stop[d] = z, step[d] = s;
        int valid = s > 0 ? (a >= 0 && a <= n && z >= 0 && z <= n)
                  : s < 0 ? (a >= -1 && a < n && z >= -1 && z < n) : 0;
        i128 l = 0;
        if (valid && s > 0 && z > a)
            l = ((i128)z - a - 1) / s + 1;
        else if (valid && s < 0 && a > z)
            l = ((i128)a - z - 1) / -(i128)s + 1;
        i128 prod = (i128)strides[d] * s;
        if (valid && (prod < I64_MIN || prod > I64_MAX) && l > 1)
            valid = 0;
        ok &= valid;
        len[d] = (int64_t)l;
        cst[d] = prod < I64_MIN || prod > I64_MAX ? strides[d] : (int64_t)prod;
        /* an empty parent's extents may be huge: 0 wins, and a product past
         * 2^63 (only an invalid slice of such a parent) is capped */
        count = count == 0 || l == 0 ? 0 : count * l > I64_MAX ? I64_MAX + 1 : count * l;
    }
    /* The first element's index: every start is an element when the slice
     * is not empty (and then within the parent's reach: no overflow). */
    for (int d = 0; ok && count > 0 && d < ndim; d++)
        off += (i128)start[d] * strides[d];
    cuabi_view *s = (cuabi_view *)1;
    cuabi_status st = cuabi_view_slice(&s, v, ndim, start, stop, step);
    if (!ok) {
        expect_refusal(st, s);
        return;
    }
    CHECK(st == CUABI_SUCCESS);
    i128 child_first = count > 0 ? first + off * item : first;
    check_view(s, b, child_first, ndim, len, item);
    int64_t got[MAXDIM];
    CHECK(cuabi_view_strides(got, MAXDIM, s) == CUABI_SUCCESS);
    for (int d = 0; d < ndim; d++)
        CHECK(got[d] == cst[d]);
    slices(s, b, child_first, ndim, len, cst, item, r, depth - 1);
    CHECK(cuabi_view_release(s) == CUABI_SUCCESS);
}

/* Out through DLPack and back: the same memory, the same layout. */
static void round_trip(cuabi_view *v, const buf *b, i128 first, int ndim, const int64_t *shape,
                       i128 item)
{
    DLManagedTensorVersioned *t = NULL;
    CHECK(cuabi_view_to_dlpack_versioned(&t, v) == CUABI_SUCCESS);
    CHECK((i128)(uintptr_t)t->dl_tensor.data == first && t->dl_tensor.byte_offset == 0);
    cuabi_view *w = NULL;
    CHECK(cuabi_view_from_dlpack_versioned(&w, t) == CUABI_SUCCESS);   /* owns t now */
    check_view(w, b, first, ndim, shape, item);
    CHECK(cuabi_view_release(w) == CUABI_SUCCESS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = { data, size };
    static cuabi_memory_resource *host;
    if (!host && cuabi_memory_resource_host(&host) != CUABI_SUCCESS)
        __builtin_trap();
    uint8_t mode = (uint8_t)take(&r, 1);
    buf b;
    cuabi_buffer *handle = NULL;
    if (mode & 1) {          /* wrapped, any size, never touched */
        b.base = 0x10000;
        b.size = (size_t)take(&r, 8) % (UINTPTR_MAX - b.base);
        b.real = 0;
        CHECK(cuabi_buffer_wrap(&handle, NULL, CUABI_MEMORY_HOST, b.base, b.size, NULL, NULL) ==
              CUABI_SUCCESS);
    } else {
        b.size = (size_t)(take(&r, 2) % 4097);
        b.real = 1;
        CHECK(cuabi_buffer_allocate(&handle, host, b.size, 0, NULL) == CUABI_SUCCESS);
        CHECK(cuabi_buffer_pointer(&b.base, handle) == CUABI_SUCCESS);
    }
    static const struct { int code, bits; } dtypes[] = {
        { CUABI_DTYPE_UINT, 8 }, { CUABI_DTYPE_INT, 16 }, { CUABI_DTYPE_FLOAT, 32 },
        { CUABI_DTYPE_FLOAT, 64 }, { CUABI_DTYPE_COMPLEX, 128 }, { CUABI_DTYPE_BOOL, 8 },
    };
    int k = (mode >> 1) % 6;
    i128 item = dtypes[k].bits / 8;
    layout l;
    uint8_t nd = (uint8_t)take(&r, 1);
    l.ndim = nd & 0x80 ? (int8_t)nd : nd % 6;            /* 0..5, or anything */
    int stored = l.ndim < 0 ? 0 : l.ndim > MAXDIM ? MAXDIM : l.ndim;
    for (int d = 0; d < stored; d++) {
        l.shape[d] = (mode & 0x40) ? value(&r) : (int64_t)(take(&r, 1) % 9);
        l.strides[d] = value(&r);
    }
    int row_major = (mode & 0x20) != 0;
    uint64_t offset = (mode & 0x80) ? take(&r, 8) : take(&r, 2);

    cuabi_view *v = (cuabi_view *)1;
    cuabi_status st = cuabi_view_create(&v, handle, offset, dtypes[k].code, dtypes[k].bits,
                                        l.ndim, l.shape, row_major ? NULL : l.strides, 0);
    reach re;
    int valid = l.ndim >= 0 && l.ndim <= MAXDIM &&
                oracle_reach(&re, l.ndim, l.shape, row_major ? NULL : l.strides, item) &&
                offset <= b.size &&
                (re.count == 0 || ((i128)offset + re.lo >= 0 && (i128)offset + re.end <= b.size));
    if (!valid) {
        expect_refusal(st, v);
    } else {
        CHECK(st == CUABI_SUCCESS);
        i128 first = (i128)b.base + offset;
        check_view(v, &b, first, l.ndim, l.shape, item);
        int64_t es[MAXDIM];
        CHECK(cuabi_view_strides(es, MAXDIM, v) == CUABI_SUCCESS);
        if (!row_major)
            for (int d = 0; d < l.ndim; d++)
                CHECK(es[d] == l.strides[d]);
        round_trip(v, &b, first, l.ndim, l.shape, item);
        /* the buffer handle goes first: the view keeps the memory */
        CHECK(cuabi_buffer_destroy(handle) == CUABI_SUCCESS);
        handle = NULL;
        slices(v, &b, first, l.ndim, l.shape, es, item, &r, 3);
        CHECK(cuabi_view_release(v) == CUABI_SUCCESS);
    }
    if (handle)
        CHECK(cuabi_buffer_destroy(handle) == CUABI_SUCCESS);
    return 0;
}
