/* DLPack import and export of views.
 *
 * Import takes ownership of the producer's tensor: its deleter runs exactly
 * once, when the view dies or before we return a refusal. Export hands out a
 * tensor holding a reference to the view; its deleter (any thread, any time)
 * drops that reference. Each direction costs one allocation. */
#include "runtime/memory.h"

#include <stdio.h>
#include <string.h>

#define DLPACK_MINOR_SUPPORTED 1 /* we read and write DLPack 1.1 */

/* Refuse an import: call the producer's deleter, keeping the error that
 * explains the refusal (the deleter may itself call into cuabi). */
static cuabi_status refuse(cuabi_status st, void (*call_deleter)(void *), void *tensor)
{
    if (!call_deleter)
        return st;
    const cuabi_error_info *e = cuabi_last_error();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", e->message);
    call_deleter(tensor);
    return cuabi__error(st, "%s", msg);
}

static void call_versioned_deleter(void *p)
{
    DLManagedTensorVersioned *t = p;
    t->deleter(t);
}

static void call_legacy_deleter(void *p)
{
    DLManagedTensor *t = p;
    t->deleter(t);
}

static bool device_supported(int type)
{
    return type == CUABI_DLPACK_CPU || type == CUABI_DLPACK_CUDA ||
           type == CUABI_DLPACK_CUDA_HOST || type == CUABI_DLPACK_CUDA_MANAGED;
}

/* Validate a DLTensor and copy it into a new, unregistered view. */
static cuabi_status import_tensor(cuabi__view **out, const DLTensor *t, unsigned flags,
                                  const char *caller)
{
    const cuabi_status E = CUABI_ERROR_DLPACK;
    int type = (int)t->device.device_type;
    if (!device_supported(type))
        return cuabi__error(E, "%s: DLPack device type %d is not supported (kDLCPU, kDLCUDA, "
                            "kDLCUDAHost and kDLCUDAManaged are)", caller, type);
    if (t->device.device_id < 0)
        return cuabi__error(E, "%s: DLPack device id %d is negative", caller,
                            (int)t->device.device_id);
    size_t itemsize = cuabi__dtype_itemsize(t->dtype.code, t->dtype.bits, t->dtype.lanes, E,
                                            caller);
    if (!itemsize)
        return E;
    cuabi__layout l;
    CUABI__TRY(cuabi__check_layout(&l, t->ndim, t->shape, t->strides, itemsize, E, caller));
    if (l.count > 0 && !t->data)
        return cuabi__error(E, "%s: data is NULL but the tensor has %lld elements", caller,
                            (long long)l.count);
    /* Byte extents must fit from the byte offset too, so slicing arithmetic
     * never overflows. */
    int64_t end;
    if (t->byte_offset > INT64_MAX ||
        __builtin_add_overflow((int64_t)t->byte_offset, l.byte_end, &end))
        return cuabi__error(E, "%s: byte_offset %llu: the byte extent of the tensor overflows 63 "
                            "bits", caller, (unsigned long long)t->byte_offset);
    /* Every byte reached is an address: none may wrap around the address
     * space (below 0 with negative strides, past the top with positive
     * ones), nor may the first element's. */
    uint64_t first = (uint64_t)(uintptr_t)t->data, below = (uint64_t)0 - (uint64_t)l.byte_lo, last;
    if (__builtin_add_overflow(first, t->byte_offset, &first) ||
        (l.count > 0 && (below > first ||
                         __builtin_add_overflow(first, (uint64_t)l.byte_end - 1, &last))))
        return cuabi__error(E, "%s: the tensor's elements wrap around the address space (data "
                            "%p, byte_offset %llu, bytes %lld..%lld from the first element)",
                            caller, t->data, (unsigned long long)t->byte_offset,
                            (long long)l.byte_lo, (long long)l.byte_end);
    cuabi__view *v = cuabi__view_alloc(t->ndim);
    if (!v)
        return CUABI_ERROR_OUT_OF_MEMORY;
    v->data = (uintptr_t)t->data;
    v->byte_offset = t->byte_offset;
    v->device_type = type;
    v->device_id = t->device.device_id;
    v->code = t->dtype.code;
    v->bits = t->dtype.bits;
    v->flags = flags;
    v->size = l.count;
    if (t->ndim) {
        memcpy(v->shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
        if (t->strides)
            memcpy(v->strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
        else /* NULL strides: row-major (pre-1.2 producers, NumPy) */
            cuabi__row_major(v->strides, v->shape, t->ndim);
    }
    *out = v;
    return CUABI_SUCCESS;
}

/* Import, owning `tensor` (deleted through `del`) as `owner_kind`. */
static cuabi_status import_owned(cuabi_view **out, const DLTensor *t, unsigned flags,
                                 cuabi__view_owner owner_kind, void *tensor,
                                 void (*del)(void *), const char *caller)
{
    cuabi__view *v;
    cuabi_status st = import_tensor(&v, t, flags, caller);
    if (st != CUABI_SUCCESS)
        return refuse(st, del, tensor);
    v->owner_kind = owner_kind;
    v->owner = tensor;
    st = cuabi__view_publish(out, v);
    return st == CUABI_SUCCESS ? st : refuse(st, del, tensor);
}

CUABI_EXTERN(cuabi_status) cuabi_view_from_dlpack_versioned(cuabi_view **out,
                                                            DLManagedTensorVersioned *tensor)
{
    CUABI__CHECK_ARG(tensor, "%s: tensor is NULL", __func__);
    void (*del)(void *) = tensor->deleter ? call_versioned_deleter : NULL;
    if (!out)
        return refuse(cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL (the "
                                   "tensor was deleted)", __func__), del, tensor);
    *out = NULL;
    /* Only the version and deleter may be read before the major version is
     * known to be ours: a different major may have a different layout. */
    if (tensor->version.major != 1)
        return refuse(cuabi__error(CUABI_ERROR_DLPACK, "%s: DLPack major version %u is not "
                                   "supported (this library reads 1.x; ask the producer for "
                                   "max_version=(1, %d))", __func__, tensor->version.major,
                                   DLPACK_MINOR_SUPPORTED), del, tensor);
    unsigned flags = (unsigned)(tensor->flags & (DLPACK_FLAG_BITMASK_READ_ONLY |
                                                 DLPACK_FLAG_BITMASK_IS_COPIED));
    return import_owned(out, &tensor->dl_tensor, flags, CUABI__OWN_VERSIONED, tensor, del,
                        __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_view_from_dlpack(cuabi_view **out, DLManagedTensor *tensor)
{
    CUABI__CHECK_ARG(tensor, "%s: tensor is NULL", __func__);
    void (*del)(void *) = tensor->deleter ? call_legacy_deleter : NULL;
    if (!out)
        return refuse(cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL (the "
                                   "tensor was deleted)", __func__), del, tensor);
    *out = NULL;
    return import_owned(out, &tensor->dl_tensor, 0, CUABI__OWN_LEGACY, tensor, del, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_view_from_dltensor(cuabi_view **out, const DLTensor *tensor,
                                                    unsigned int flags)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(tensor, "%s: tensor is NULL", __func__);
    CUABI__CHECK_ARG((flags & ~(unsigned)(CUABI_VIEW_READ_ONLY | CUABI_VIEW_IS_COPIED)) == 0,
                     "%s: unknown view flags 0x%x", __func__, flags);
    cuabi__view *v;
    CUABI__TRY(import_tensor(&v, tensor, flags, __func__));
    return cuabi__view_publish(out, v);
}

/* ---------------------------------------------------------------- export */

typedef struct export_versioned {
    DLManagedTensorVersioned mt;
    cuabi__view *view;
    int64_t dims[];
} export_versioned;

typedef struct export_legacy {
    DLManagedTensor mt;
    cuabi__view *view;
    int64_t dims[];
} export_legacy;

static void export_versioned_deleter(DLManagedTensorVersioned *self)
{
    if (!self)
        return;
    export_versioned *e = self->manager_ctx;
    cuabi__view *v = e->view;
    cuabi__free(e);
    cuabi__object_release(&v->base);
}

static void export_legacy_deleter(DLManagedTensor *self)
{
    if (!self)
        return;
    export_legacy *e = self->manager_ctx;
    cuabi__view *v = e->view;
    cuabi__free(e);
    cuabi__object_release(&v->base);
}

/* Fill a DLTensor from a view. The byte offset is folded into the data
 * pointer: several consumers ignore byte_offset (see the DLTensor.data
 * note in dlpack.h). Shape and strides are copies the consumer may keep. */
static void fill_tensor(DLTensor *t, const cuabi__view *v, int64_t *dims)
{
    t->data = (void *)(v->data + (uintptr_t)v->byte_offset);
    t->device.device_type = (DLDeviceType)v->device_type;
    t->device.device_id = v->device_id;
    t->ndim = v->ndim;
    t->dtype.code = v->code;
    t->dtype.bits = v->bits;
    t->dtype.lanes = 1;
    t->shape = dims;
    t->strides = dims + v->ndim;
    t->byte_offset = 0;
    memcpy(dims, v->dims, 2 * (size_t)v->ndim * sizeof *dims);
}

CUABI_EXTERN(cuabi_status) cuabi_view_to_dlpack_versioned(DLManagedTensorVersioned **out,
                                                          cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(v, view, VIEW);
    export_versioned *e = cuabi__malloc(sizeof *e + 2 * (size_t)v->ndim * sizeof(int64_t));
    if (!e)
        return CUABI_ERROR_OUT_OF_MEMORY;
    e->mt.version.major = 1;
    e->mt.version.minor = DLPACK_MINOR_SUPPORTED;
    e->mt.manager_ctx = e;
    e->mt.deleter = export_versioned_deleter;
    e->mt.flags = v->flags & (CUABI_VIEW_READ_ONLY | CUABI_VIEW_IS_COPIED);
    fill_tensor(&e->mt.dl_tensor, v, e->dims);
    e->view = v;
    cuabi__object_retain(&v->base);
    *out = &e->mt;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_to_dlpack(DLManagedTensor **out, cuabi_view *view)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(v, view, VIEW);
    if (v->flags & CUABI_VIEW_READ_ONLY)
        return cuabi__error(CUABI_ERROR_DLPACK, "%s: the view is read-only, which a legacy "
                            "DLManagedTensor cannot signal; export with "
                            "cuabi_view_to_dlpack_versioned()", __func__);
    export_legacy *e = cuabi__malloc(sizeof *e + 2 * (size_t)v->ndim * sizeof(int64_t));
    if (!e)
        return CUABI_ERROR_OUT_OF_MEMORY;
    e->mt.manager_ctx = e;
    e->mt.deleter = export_legacy_deleter;
    fill_tensor(&e->mt.dl_tensor, v, e->dims);
    e->view = v;
    cuabi__object_retain(&v->base);
    *out = &e->mt;
    return CUABI_SUCCESS;
}
