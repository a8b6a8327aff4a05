/* Strided views: creation over buffers, slicing, queries. DLPack import and
 * export live in dlpack.c. */
#include "runtime/memory.h"

#include <string.h>

static void view_destroy(cuabi__object *o)
{
    cuabi__view *v = (cuabi__view *)o;
    switch (v->owner_kind) {
    case CUABI__OWN_VERSIONED: {
        DLManagedTensorVersioned *t = v->owner;
        if (t->deleter)
            t->deleter(t);
        break;
    }
    case CUABI__OWN_LEGACY: {
        DLManagedTensor *t = v->owner;
        if (t->deleter)
            t->deleter(t);
        break;
    }
    case CUABI__OWN_BUFFER:
        (void)cuabi__buffer_mem_release(v->owner, "cuabi_view_release");
        break;
    case CUABI__OWN_VIEW:
        cuabi__object_release(v->owner);
        break;
    case CUABI__OWN_NONE:
        break;
    }
    cuabi__free(v);
}

cuabi__view *cuabi__view_alloc(int32_t ndim)
{
    /* One allocation for the view, its shape and its strides: views are
     * made for every array a binding passes, so this path is kept short. */
    cuabi__view *v = cuabi__malloc(sizeof *v + 2 * (size_t)ndim * sizeof(int64_t));
    if (!v)
        return NULL;
    v->shape = v->dims;
    v->strides = v->dims + ndim;
    v->ndim = ndim;
    v->byte_offset = 0;
    v->flags = 0;
    v->owner_kind = CUABI__OWN_NONE;
    v->owner = NULL;
    return v;
}

cuabi_status cuabi__view_publish(cuabi_view **out, cuabi__view *v)
{
    cuabi_status st = cuabi__handle_register(&v->base, CUABI__T_VIEW, view_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(v);
        return st;
    }
    *out = CUABI__HANDLE(v, cuabi_view);
    return CUABI_SUCCESS;
}

size_t cuabi__dtype_itemsize(int code, int bits, int lanes, cuabi_status status,
                             const char *caller)
{
    bool ok;
    switch (code) {
    case CUABI_DTYPE_INT:
    case CUABI_DTYPE_UINT:
        ok = bits == 8 || bits == 16 || bits == 32 || bits == 64;
        break;
    case CUABI_DTYPE_FLOAT:
        ok = bits == 16 || bits == 32 || bits == 64;
        break;
    case CUABI_DTYPE_BFLOAT:
        ok = bits == 16;
        break;
    case CUABI_DTYPE_COMPLEX:
        ok = bits == 32 || bits == 64 || bits == 128;
        break;
    case CUABI_DTYPE_BOOL:
        ok = bits == 8;
        break;
    case CUABI_DTYPE_FLOAT8_E3M4: case CUABI_DTYPE_FLOAT8_E4M3:
    case CUABI_DTYPE_FLOAT8_E4M3B11FNUZ: case CUABI_DTYPE_FLOAT8_E4M3FN:
    case CUABI_DTYPE_FLOAT8_E4M3FNUZ: case CUABI_DTYPE_FLOAT8_E5M2:
    case CUABI_DTYPE_FLOAT8_E5M2FNUZ: case CUABI_DTYPE_FLOAT8_E8M0FNU:
        ok = bits == 8;
        break;
    default:
        cuabi__error(status, "%s: dtype code %d is not supported (sub-byte, opaque and unknown "
                     "types are not; see cuabi_dtype_code)", caller, code);
        return 0;
    }
    if (!ok) {
        cuabi__error(status, "%s: dtype code %d with %d bits is not supported%s", caller, code,
                     bits, bits % 8 ? " (sub-byte elements are not)" : "");
        return 0;
    }
    if (lanes != 1) {
        cuabi__error(status, "%s: dtype with %d lanes is not supported (only 1 lane)", caller,
                     lanes);
        return 0;
    }
    return (size_t)bits / 8;
}

cuabi_status cuabi__check_layout(cuabi__layout *out, int32_t ndim, const int64_t *shape,
                                 const int64_t *strides, size_t itemsize, cuabi_status status,
                                 const char *caller)
{
    memset(out, 0, sizeof *out);
    if (ndim < 0 || ndim > CUABI_VIEW_MAX_NDIM)
        return cuabi__error(status, "%s: ndim %d is out of range (0..%d)", caller, (int)ndim,
                            CUABI_VIEW_MAX_NDIM);
    if (ndim > 0 && !shape)
        return cuabi__error(status, "%s: shape is NULL with ndim %d", caller, (int)ndim);
    /* An extent of 0 anywhere makes the tensor empty, whatever the others:
     * decided before any product, so that a count that wraps to 0 (2^62 x 4)
     * is never taken for an empty tensor. */
    bool empty = false;
    for (int32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return cuabi__error(status, "%s: shape: extent %lld of dimension %d is negative",
                                caller, (long long)shape[d], (int)d);
        empty |= shape[d] == 0;
    }
    if (empty)
        return CUABI_SUCCESS;
    int64_t n = 1, bytes;
    for (int32_t d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(n, shape[d], &n))
            return cuabi__error(status, "%s: shape: the element count overflows 64 bits "
                                "(dimension %d has extent %lld)", caller, (int)d,
                                (long long)shape[d]);
    if (itemsize > INT64_MAX || __builtin_mul_overflow(n, (int64_t)itemsize, &bytes))
        return cuabi__error(status, "%s: shape: %lld elements of %zu bytes overflow 63 bits",
                            caller, (long long)n, itemsize);
    out->count = n;
    int64_t lo = 0, hi = 0;
    if (!strides) { /* row-major: elements 0 .. n-1 */
        hi = n - 1;
    } else {
        for (int32_t d = 0; d < ndim; d++) {
            int64_t reach;
            if (shape[d] == 1)
                continue;   /* its stride is never multiplied by more than 0 */
            if (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
                __builtin_add_overflow(reach > 0 ? hi : lo, reach, reach > 0 ? &hi : &lo))
                return cuabi__error(status, "%s: strides: the extent of the strides overflows "
                                    "64 bits (dimension %d: extent %lld, stride %lld)", caller,
                                    (int)d, (long long)shape[d], (long long)strides[d]);
        }
    }
    int64_t byte_lo, byte_end;
    if (__builtin_mul_overflow(lo, (int64_t)itemsize, &byte_lo) ||
        __builtin_add_overflow(hi, 1, &byte_end) ||
        __builtin_mul_overflow(byte_end, (int64_t)itemsize, &byte_end))
        return cuabi__error(status, "%s: strides: the byte extent of the strides overflows 64 "
                            "bits (elements %lld..%lld of %zu bytes)", caller, (long long)lo,
                            (long long)hi, itemsize);
    out->lo = lo;
    out->hi = hi;
    out->byte_lo = byte_lo;
    out->byte_end = byte_end;
    return CUABI_SUCCESS;
}

void cuabi__row_major(int64_t *strides, const int64_t *shape, int32_t ndim)
{
    int64_t s = 1;
    for (int32_t d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        /* Saturate: the product can only overflow for an empty tensor (an
         * extent of 0 elsewhere; others are rejected by check_layout), whose
         * strides address nothing. */
        if (__builtin_mul_overflow(s, shape[d] > 1 ? shape[d] : 1, &s))
            s = INT64_MAX;
    }
}

/* -------------------------------------------------------- view creation */

static int device_type_of(cuabi_memory_kind k)
{
    switch (k) {
    case CUABI_MEMORY_DEVICE: return CUABI_DLPACK_CUDA;
    case CUABI_MEMORY_PINNED: return CUABI_DLPACK_CUDA_HOST;
    case CUABI_MEMORY_MANAGED: return CUABI_DLPACK_CUDA_MANAGED;
    default: return CUABI_DLPACK_CPU;
    }
}

#define KNOWN_FLAGS ((unsigned)(CUABI_VIEW_READ_ONLY | CUABI_VIEW_IS_COPIED))

CUABI_EXTERN(cuabi_status) cuabi_view_create(cuabi_view **out, cuabi_buffer *buffer,
                                             uint64_t offset, int dtype_code, int dtype_bits,
                                             int ndim, const int64_t *shape,
                                             const int64_t *strides, unsigned int flags)
{
    cuabi__buffer *b;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(b, buffer, BUFFER);
    CUABI__CHECK_ARG((flags & ~KNOWN_FLAGS) == 0, "%s: unknown view flags 0x%x", __func__, flags);
    size_t itemsize = cuabi__dtype_itemsize(dtype_code, dtype_bits, 1,
                                            CUABI_ERROR_INVALID_ARGUMENT, __func__);
    if (!itemsize)
        return CUABI_ERROR_INVALID_ARGUMENT;
    cuabi__layout l;
    CUABI__TRY(cuabi__check_layout(&l, ndim, shape, strides, itemsize,
                                   CUABI_ERROR_INVALID_ARGUMENT, __func__));
    /* The first element's address lies inside the buffer (or at its end,
     * for an empty view), and so does every byte any element reaches. */
    if (offset > b->size)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: offset %llu is past the end of the buffer (%zu bytes)",
                            __func__, (unsigned long long)offset, b->size);
    if (l.count > 0) {
        uint64_t below = (uint64_t)0 - (uint64_t)l.byte_lo, end;
        if (below > offset || __builtin_add_overflow(offset, (uint64_t)l.byte_end, &end) ||
            end > b->size)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: the view reaches outside the buffer (%zu bytes): elements "
                                "%lld..%lld of %zu bytes from byte offset %llu", __func__,
                                b->size, (long long)l.lo, (long long)l.hi, itemsize,
                                (unsigned long long)offset);
    }
    cuabi__view *v = cuabi__view_alloc(ndim);
    if (!v)
        return CUABI_ERROR_OUT_OF_MEMORY;
    v->data = b->ptr;
    v->byte_offset = offset;
    v->device_type = device_type_of(b->kind);
    v->device_id = b->kind == CUABI_MEMORY_DEVICE && b->device ? b->device->ordinal : 0;
    v->code = (uint8_t)dtype_code;
    v->bits = (uint8_t)dtype_bits;
    v->flags = flags;
    v->size = l.count;
    if (ndim)
        memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
    if (strides)
        memcpy(v->strides, strides, (size_t)ndim * sizeof *strides);
    else
        cuabi__row_major(v->strides, v->shape, ndim);
    v->owner_kind = CUABI__OWN_BUFFER;
    v->owner = b;
    CUABI__TRY(cuabi__view_publish(out, v));
    cuabi__buffer_mem_retain(b);
    return CUABI_SUCCESS;
}

/* One dimension of a slice: the new extent and the first index. */
static cuabi_status slice_dim(int64_t *len, int64_t n, int64_t start, int64_t stop, int64_t step,
                              int d, const char *caller)
{
    if (step == 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: step of dimension %d is 0",
                            caller, d);
    bool ok = step > 0 ? (start >= 0 && start <= n && stop >= 0 && stop <= n)
                       : (start >= -1 && start < n && stop >= -1 && stop < n);
    if (!ok)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: slice %lld:%lld:%lld of dimension %d (extent %lld) is out of "
                            "range; pass the values of Python's slice.indices(extent)", caller,
                            (long long)start, (long long)stop, (long long)step, d, (long long)n);
    /* The differences cannot overflow (the bounds above); -step can (a step
     * of INT64_MIN), so the negative case divides by its magnitude. */
    if (step > 0)
        *len = stop > start ? (stop - start - 1) / step + 1 : 0;
    else
        *len = start > stop
                   ? (int64_t)((uint64_t)(start - stop - 1) / ((uint64_t)0 - (uint64_t)step)) + 1
                   : 0;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_slice(cuabi_view **out, cuabi_view *view, int ndim,
                                            const int64_t *start, const int64_t *stop,
                                            const int64_t *step)
{
    cuabi__view *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(p, view, VIEW);
    CUABI__CHECK_ARG(ndim == p->ndim, "%s: ndim %d does not match the view's %d", __func__, ndim,
                     (int)p->ndim);
    CUABI__CHECK_ARG(ndim == 0 || (start && stop), "%s: start and stop must not be NULL",
                     __func__);
    cuabi__view *v = cuabi__view_alloc(ndim);
    if (!v)
        return CUABI_ERROR_OUT_OF_MEMORY;
    int64_t first = 0, n = 1;
    for (int d = 0; d < ndim; d++) {
        int64_t st = step ? step[d] : 1, len = 0;
        cuabi_status s = slice_dim(&len, p->shape[d], start[d], stop[d], st, d, __func__);
        /* A dimension of one element keeps its parent's stride when the
         * product would not fit: its stride is never used to move. */
        if (s == CUABI_SUCCESS && __builtin_mul_overflow(p->strides[d], st, &v->strides[d])) {
            if (len <= 1)
                v->strides[d] = p->strides[d];
            else
                s = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: step: the stride of "
                                 "dimension %d (%lld x step %lld) overflows 64 bits", __func__,
                                 d, (long long)p->strides[d], (long long)st);
        }
        if (s != CUABI_SUCCESS) {
            cuabi__free(v);
            return s;
        }
        v->shape[d] = len;
        /* Only an empty parent (an extent of 0 elsewhere) can overflow these;
         * its slice is empty too, and first is then unused. */
        if (__builtin_mul_overflow(n, len, &n))
            n = INT64_MAX;
        if (len > 0 && p->size > 0)
            first += start[d] * p->strides[d]; /* inside the parent: cannot overflow */
    }
    /* The first element lies inside the parent's reach, whose byte extent
     * fits (cuabi__check_layout), so delta fits and data + offset + delta is
     * an address of the parent's memory; a negative offset that passes the
     * base pointer is folded into it. Unsigned arithmetic: byte_offset may
     * exceed INT64_MAX for a view of a very large buffer. */
    int64_t delta = n > 0 ? first * (int64_t)(p->bits / 8) : 0;
    v->data = p->data;
    v->byte_offset = p->byte_offset;
    if (delta >= 0) {
        v->byte_offset += (uint64_t)delta;
    } else if ((uint64_t)0 - (uint64_t)delta <= v->byte_offset) {
        v->byte_offset -= (uint64_t)0 - (uint64_t)delta;
    } else {
        v->data = p->data + (uintptr_t)p->byte_offset - (uintptr_t)((uint64_t)0 - (uint64_t)delta);
        v->byte_offset = 0;
    }
    v->device_type = p->device_type;
    v->device_id = p->device_id;
    v->code = p->code;
    v->bits = p->bits;
    v->flags = p->flags;
    v->size = n;
    /* Keep the root owner alive, not a chain of parents. */
    cuabi__view *root = p->owner_kind == CUABI__OWN_VIEW ? p->owner : p;
    v->owner_kind = CUABI__OWN_VIEW;
    v->owner = root;
    CUABI__TRY(cuabi__view_publish(out, v));
    cuabi__object_retain(&root->base);
    return CUABI_SUCCESS;
}

/* --------------------------------------------------------------- queries */

CUABI_EXTERN(cuabi_status) cuabi_view_get_info(cuabi_view_info *out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_OPTS(out, "cuabi_view_info", CUABI_VIEW_INFO_VERSION, false);
    CUABI__GET(v, view, VIEW);
    out->data = v->data;
    out->byte_offset = v->byte_offset;
    out->device_type = v->device_type;
    out->device_id = v->device_id;
    out->dtype_code = v->code;
    out->dtype_bits = v->bits;
    out->dtype_lanes = 1;
    out->ndim = v->ndim;
    out->shape = v->shape;
    out->strides = v->strides;
    out->flags = v->flags;
    out->itemsize = v->bits / 8u;
    out->size = v->size;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_data_pointer(uintptr_t *out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(v, view, VIEW);
    *out = v->data + (uintptr_t)v->byte_offset;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_ndim(int *out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(v, view, VIEW);
    *out = v->ndim;
    return CUABI_SUCCESS;
}

static cuabi_status copy_dims(int64_t *out, size_t capacity, cuabi_view *view, bool strides,
                              const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(view, CUABI__T_VIEW, &obj, caller));
    cuabi__view *v = obj;
    if (capacity < (size_t)v->ndim)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                            "%s: the view has %d dimensions but capacity is %zu", caller,
                            (int)v->ndim, capacity);
    if (v->ndim == 0)
        return CUABI_SUCCESS;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    memcpy(out, strides ? v->strides : v->shape, (size_t)v->ndim * sizeof *out);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_shape(int64_t *out, size_t capacity, cuabi_view *view)
{
    return copy_dims(out, capacity, view, false, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_view_strides(int64_t *out, size_t capacity, cuabi_view *view)
{
    return copy_dims(out, capacity, view, true, __func__);
}

/* NumPy's rule: extents of 1 ignore their stride; empty views are dense. */
static int contiguous(const cuabi__view *v, bool c_order)
{
    if (v->size == 0)
        return 1;
    int64_t expected = 1;
    for (int32_t i = 0; i < v->ndim; i++) {
        int32_t d = c_order ? v->ndim - 1 - i : i;
        if (v->shape[d] == 1)
            continue;
        if (v->strides[d] != expected)
            return 0;
        expected *= v->shape[d];
    }
    return 1;
}

CUABI_EXTERN(cuabi_status) cuabi_view_is_c_contiguous(int *out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(v, view, VIEW);
    *out = contiguous(v, true);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_is_f_contiguous(int *out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(v, view, VIEW);
    *out = contiguous(v, false);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_nbytes(uint64_t *out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(v, view, VIEW);
    *out = (uint64_t)v->size * (v->bits / 8u);
    return CUABI_SUCCESS;
}
