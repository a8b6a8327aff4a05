/* Managed memory: a resource with attach flags and a preferred location,
 * and advice, prefetch, discard and range attributes for ranges of managed
 * buffers (cuMemAdvise, cuMemPrefetchAsync, cuMemDiscardBatchAsync,
 * cuMemDiscardAndPrefetchBatchAsync, cuMemRangeGetAttribute(s)), and the
 * same for batches of whole buffers (cuMemPrefetchBatchAsync, ...). */
#include "runtime/memory.h"
#include "util/alloc.h"
#include "util/checked.h"

#include <string.h>

static bool location_valid(cuabi_location_type t, bool none_ok)
{
    return (none_ok && t == CUABI_LOCATION_NONE) ||
           (t >= CUABI_LOCATION_DEVICE && t <= CUABI_LOCATION_HOST_NUMA_CURRENT);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_resource_create(cuabi_memory_resource **out,
                                                         cuabi_device *device,
                                                         const cuabi_managed_options *options)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_OPTS(options, "cuabi_managed_options", CUABI_MANAGED_OPTIONS_VERSION, true);
    if (options) {
        CUABI__CHECK_ARG(options->attach == CUABI_MANAGED_ATTACH_GLOBAL ||
                             options->attach == CUABI_MANAGED_ATTACH_HOST,
                         "%s: attach %d is not a cuabi_managed_attach", __func__,
                         (int)options->attach);
        CUABI__CHECK_ARG(location_valid(options->preferred_location_type, true),
                         "%s: preferred_location_type %d is not a cuabi_location_type",
                         __func__, (int)options->preferred_location_type);
        CUABI__CHECK_ARG(options->preferred_location_id >= 0 ||
                             (options->preferred_location_type != CUABI_LOCATION_DEVICE &&
                              options->preferred_location_type != CUABI_LOCATION_HOST_NUMA),
                         "%s: preferred_location_id %d is negative", __func__,
                         options->preferred_location_id);
    }
    cuabi_memory_resource *h;
    CUABI__TRY(cuabi__resource_simple(&h, device, CUABI__RES_MANAGED, CUABI_MEMORY_MANAGED,
                                      __func__));
    if (options) {
        void *obj;
        (void)cuabi__handle_get(h, CUABI__T_MEMORY_RESOURCE, &obj, __func__);
        cuabi__memory_resource *r = obj;
        r->managed_attach = options->attach == CUABI_MANAGED_ATTACH_HOST ? CU_MEM_ATTACH_HOST
                                                                         : CU_MEM_ATTACH_GLOBAL;
        r->location_type = options->preferred_location_type;
        r->location_id = options->preferred_location_type == CUABI_LOCATION_HOST
                             ? 0 : options->preferred_location_id;
    }
    *out = h;
    return CUABI_SUCCESS;
}

/* The managed buffer, a range of it, the driver and its device current. */
static cuabi_status managed_range(cuabi__context_scope *scope, cuabi__buffer **b, const cuabi__driver **drv,
                                  cuabi_buffer *buffer, size_t offset, size_t size,
                                  const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(buffer, CUABI__T_BUFFER, &obj, caller));
    *b = obj;
    if ((*b)->kind != CUABI_MEMORY_MANAGED)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the buffer is not managed memory (kind %d): advice, prefetch "
                            "and discard work on buffers of a managed resource", caller,
                            (int)(*b)->kind);
    CUABI__TRY(cuabi__buffer_check_range(*b, offset, size, "managed", caller));
    CUABI__TRY(cuabi__driver_get(drv));
    return cuabi__device_enter(scope, (*b)->device, *drv);
}

static cuabi_status location_of(CUmemLocation *loc, cuabi_location_type t, int id,
                                const char *caller)
{
    if (!location_valid(t, false))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: location type %d is not a device or host location", caller,
                            (int)t);
    if ((t == CUABI_LOCATION_DEVICE || t == CUABI_LOCATION_HOST_NUMA) && id < 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: location id %d is negative",
                            caller, id);
    loc->type = (CUmemLocationType)t;
    loc->id = t == CUABI_LOCATION_DEVICE || t == CUABI_LOCATION_HOST_NUMA ? id : 0;
    return CUABI_SUCCESS;
}

static cuabi_status optional_stream(cuabi__context_scope *scope, CUstream *raw, cuabi_stream *stream, const cuabi__driver *drv,
                                    const char *caller)
{
    *raw = NULL;
    if (!stream)
        return CUABI_SUCCESS;
    void *obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    cuabi__stream *s = obj;
    *raw = s->cu_stream;
    return cuabi__stream_enter(scope, s, drv);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_advise(cuabi_buffer *buffer, size_t offset, size_t size,
                                                cuabi_managed_advice advice,
                                                cuabi_location_type location_type,
                                                int location_id)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(advice >= CUABI_MANAGED_SET_READ_MOSTLY &&
                         advice <= CUABI_MANAGED_UNSET_ACCESSED_BY,
                     "%s: %d is not a cuabi_managed_advice", __func__, (int)advice);
    CUABI__TRY_SCOPE(managed_range(&scope, &b, &drv, buffer, offset, size, __func__));
    /* Where the driver ignores the location (read-mostly, unsetting the
     * preferred one) it still refuses CU_MEM_LOCATION_TYPE_INVALID (an H100,
     * driver 580: CUDA_ERROR_INVALID_VALUE): the host stands in. */
    CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
    bool read_mostly = advice == CUABI_MANAGED_SET_READ_MOSTLY ||
                       advice == CUABI_MANAGED_UNSET_READ_MOSTLY;
    /* the driver ignores the location of an unset of the preferred one:
     * CUABI_LOCATION_NONE is fine there */
    bool any_location = advice == CUABI_MANAGED_UNSET_PREFERRED_LOCATION &&
                        location_type == CUABI_LOCATION_NONE;
    if (!read_mostly && !any_location)
        CUABI__TRY_SCOPE(location_of(&loc, location_type, location_id, __func__));
    if (size == 0)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    CUABI__SCOPE_RETURN(CUABI__CU(drv, cuMemAdvise, (CUdeviceptr)(b->ptr + offset), size,
                     (CUmem_advise)advice, loc));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_prefetch(cuabi_buffer *buffer, size_t offset,
                                                  size_t size, cuabi_location_type location_type,
                                                  int location_id, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUmemLocation loc;
    CUstream raw;
    CUABI__TRY_SCOPE(managed_range(&scope, &b, &drv, buffer, offset, size, __func__));
    CUABI__TRY_SCOPE(location_of(&loc, location_type, location_id, __func__));
    CUABI__TRY_SCOPE(optional_stream(&scope, &raw, stream, drv, __func__));
    if (size == 0)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    CUABI__SCOPE_RETURN(CUABI__CU(drv, cuMemPrefetchAsync, (CUdeviceptr)(b->ptr + offset), size, loc, 0, raw));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_discard(cuabi_buffer *buffer, size_t offset,
                                                 size_t size, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUstream raw;
    CUABI__TRY_SCOPE(managed_range(&scope, &b, &drv, buffer, offset, size, __func__));
    CUABI__TRY_SCOPE(optional_stream(&scope, &raw, stream, drv, __func__));
    if (size == 0)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    if (!drv->cuMemDiscardBatchAsync)
        CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the driver has no cuMemDiscardBatchAsync (CUDA 13.0+)",
                            __func__));
    CUdeviceptr p = (CUdeviceptr)(b->ptr + offset);
    CUABI__SCOPE_RETURN(CUABI__CU(drv, cuMemDiscardBatchAsync, &p, &size, 1, 0, raw));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_discard_prefetch(cuabi_buffer *buffer, size_t offset,
                                                          size_t size,
                                                          cuabi_location_type location_type,
                                                          int location_id, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUmemLocation loc;
    CUstream raw;
    CUABI__TRY_SCOPE(managed_range(&scope, &b, &drv, buffer, offset, size, __func__));
    CUABI__TRY_SCOPE(location_of(&loc, location_type, location_id, __func__));
    CUABI__TRY_SCOPE(optional_stream(&scope, &raw, stream, drv, __func__));
    if (size == 0)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    if (!drv->cuMemDiscardAndPrefetchBatchAsync)
        CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the driver has no cuMemDiscardAndPrefetchBatchAsync (CUDA "
                            "13.0+)", __func__));
    CUdeviceptr p = (CUdeviceptr)(b->ptr + offset);
    size_t index = 0;
    CUABI__SCOPE_RETURN(CUABI__CU(drv, cuMemDiscardAndPrefetchBatchAsync, &p, &size, 1, &loc, &index, 1, 0,
                     raw));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_range_get(int32_t *out, size_t count,
                                                   cuabi_buffer *buffer, size_t offset,
                                                   size_t size,
                                                   cuabi_managed_range_attribute attribute)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out && count > 0, "%s: out is NULL or count is 0", __func__);
    CUABI__CHECK_ARG(attribute >= CUABI_MANAGED_RANGE_READ_MOSTLY &&
                         attribute <= CUABI_MANAGED_RANGE_LAST_PREFETCH_LOCATION_ID,
                     "%s: %d is not a cuabi_managed_range_attribute", __func__, (int)attribute);
    CUABI__CHECK_ARG(count == 1 || attribute == CUABI_MANAGED_RANGE_ACCESSED_BY,
                     "%s: the attribute is one int; count is %zu", __func__, count);
    size_t bytes;
    CUABI__CHECK_ARG(cuabi__size_mul(&bytes, count, sizeof *out), "%s: count %zu overflows",
                     __func__, count);
    CUABI__TRY_SCOPE(managed_range(&scope, &b, &drv, buffer, offset, size, __func__));
    CUABI__CHECK_ARG_SCOPE(size > 0, "%s: the range is empty", __func__);
    scope_st = CUABI__CU(drv, cuMemRangeGetAttribute, out, bytes, (CUmem_range_attribute)attribute,
                     (CUdeviceptr)(b->ptr + offset), size);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* A pre-13 location attribute (device ordinal, -1 host, -2 none). */
static void legacy_location(cuabi_location_type *t, int *id, int v)
{
    *t = v >= 0 ? CUABI_LOCATION_DEVICE : v == -1 ? CUABI_LOCATION_HOST : CUABI_LOCATION_NONE;
    *id = v >= 0 ? v : 0;
}

static cuabi_location_type location_type_of(int v)
{
    return v >= CUABI_LOCATION_DEVICE && v <= CUABI_LOCATION_HOST_NUMA_CURRENT
               ? (cuabi_location_type)v : CUABI_LOCATION_NONE;
}

CUABI_EXTERN(cuabi_status) cuabi_managed_range_info(cuabi_managed_range *out,
                                                    cuabi_buffer *buffer, size_t offset,
                                                    size_t size)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUABI__CHECK_OPTS(out, "cuabi_managed_range", CUABI_MANAGED_RANGE_VERSION, false);
    CUABI__TRY_SCOPE(managed_range(&scope, &b, &drv, buffer, offset, size, __func__));
    CUABI__CHECK_ARG_SCOPE(size > 0, "%s: the range is empty", __func__);
    CUdeviceptr p = (CUdeviceptr)(b->ptr + offset);
    int v[5] = { 0, 0, 0, 0, 0 };
    void *data[5] = { &v[0], &v[1], &v[2], &v[3], &v[4] };
    size_t sizes[5] = { 4, 4, 4, 4, 4 };
    CUmem_range_attribute attrs[5] = {
        CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
        CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID,
        CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
        CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
    };
    int drv_version = 0;
    if (drv->cuDriverGetVersion)
        (void)drv->cuDriverGetVersion(&drv_version);
    if (drv_version >= 13000) {
        CUABI__TRY_SCOPE(CUABI__CU(drv, cuMemRangeGetAttributes, data, sizes, attrs, 5, p, size));
        out->read_mostly = v[0] != 0;
        out->preferred_location_type = location_type_of(v[1]);
        out->preferred_location_id = out->preferred_location_type ? v[2] : 0;
        out->last_prefetch_location_type = location_type_of(v[3]);
        out->last_prefetch_location_id = out->last_prefetch_location_type ? v[4] : 0;
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    }
    attrs[1] = CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION;
    attrs[2] = CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuMemRangeGetAttributes, data, sizes, attrs, 3, p, size));
    out->read_mostly = v[0] != 0;
    legacy_location(&out->preferred_location_type, &out->preferred_location_id, v[1]);
    legacy_location(&out->last_prefetch_location_type, &out->last_prefetch_location_id, v[2]);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ---- batches of whole managed buffers (cuda.core's prefetch_batch,
 * discard_batch and discard_prefetch_batch) */

/* What one batch call hands the driver: the non-empty buffers' addresses
 * and sizes, and (with locations) the distinct runs of locations with the
 * index of each run's first range -- all in one allocation. */
typedef struct batch {
    void *mem;
    CUdeviceptr *ptrs;
    size_t *sizes;
    CUmemLocation *locs;
    size_t *idx;
    size_t n, nlocs;
    const cuabi__driver *drv;
    CUstream stream;
    cuabi__context_scope scope;   /* the caller's context (memset: none entered) */
} batch;

static cuabi_status batch_make(batch *bt, cuabi_buffer *const *buffers, size_t count,
                               const int32_t *location_types, const int32_t *location_ids,
                               size_t location_count, bool with_locations, cuabi_stream *stream,
                               const char *caller)
{
    memset(bt, 0, sizeof *bt);
    CUABI__CHECK_ARG(buffers && count > 0, "%s: buffers is NULL or count is 0", caller);
    if (with_locations) {
        CUABI__CHECK_ARG(location_types && location_ids,
                         "%s: location_types or location_ids is NULL", caller);
        CUABI__CHECK_ARG(location_count == 1 || location_count == count,
                         "%s: %zu locations for %zu buffers (1 for all of them, or one each)",
                         caller, location_count, count);
    }
    size_t each = sizeof(CUdeviceptr) + sizeof(size_t) + sizeof(CUmemLocation) + sizeof(size_t);
    size_t bytes;
    CUABI__CHECK_ARG(cuabi__size_mul(&bytes, count, each), "%s: count %zu overflows", caller,
                     count);
    cuabi__buffer *first = NULL;
    for (size_t i = 0; i < count; i++) {
        void *obj;
        cuabi_status st = cuabi__handle_get(buffers[i], CUABI__T_BUFFER, &obj, caller);
        if (st != CUABI_SUCCESS)
            return cuabi__error(st, "%s: buffers[%zu] is not a live buffer", caller, i);
        cuabi__buffer *b = obj;
        if (b->kind != CUABI_MEMORY_MANAGED)
            return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                                "%s: buffers[%zu] is not managed memory (kind %d): batches of "
                                "prefetches and discards take buffers of a managed resource",
                                caller, i, (int)b->kind);
        if (with_locations) {
            CUmemLocation loc;
            size_t k = location_count == 1 ? 0 : i;
            st = location_of(&loc, (cuabi_location_type)location_types[k], location_ids[k],
                             caller);
            if (st != CUABI_SUCCESS)
                return cuabi__error(st, "%s: location %zu: type %d id %d is not a device or "
                                    "host location", caller, k, (int)location_types[k],
                                    (int)location_ids[k]);
        }
        if (!first)
            first = b;
    }
    CUABI__TRY(cuabi__driver_get(&bt->drv));
    CUABI__TRY(cuabi__device_enter(&bt->scope, first->device, bt->drv));
    CUABI__TRY(optional_stream(&bt->scope, &bt->stream, stream, bt->drv, caller));
    bt->mem = cuabi__malloc(bytes);
    if (!bt->mem)
        return CUABI_ERROR_OUT_OF_MEMORY;
    bt->ptrs = bt->mem;
    bt->sizes = (size_t *)(bt->ptrs + count);
    bt->idx = bt->sizes + count;
    bt->locs = (CUmemLocation *)(bt->idx + count);
    for (size_t i = 0; i < count; i++) {
        void *obj;
        (void)cuabi__handle_get(buffers[i], CUABI__T_BUFFER, &obj, caller);
        cuabi__buffer *b = obj;
        if (b->size == 0)
            continue;                     /* an empty buffer: nothing to do */
        if (with_locations) {
            size_t k = location_count == 1 ? 0 : i;
            CUmemLocation loc;
            (void)location_of(&loc, (cuabi_location_type)location_types[k], location_ids[k],
                              caller);
            if (bt->nlocs == 0 || bt->locs[bt->nlocs - 1].type != loc.type ||
                bt->locs[bt->nlocs - 1].id != loc.id) {
                bt->locs[bt->nlocs] = loc;
                bt->idx[bt->nlocs++] = bt->n;
            }
        }
        bt->ptrs[bt->n] = (CUdeviceptr)b->ptr;
        bt->sizes[bt->n++] = b->size;
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_managed_prefetch_batch(cuabi_buffer **buffers,
                                                        size_t count,
                                                        const int32_t *location_types,
                                                        const int32_t *location_ids,
                                                        size_t location_count,
                                                        cuabi_stream *stream)
{
    batch bt;
    cuabi_status st = batch_make(&bt, buffers, count, location_types, location_ids,
                                 location_count, true, stream, __func__);
    if (st == CUABI_SUCCESS && bt.n > 0) {
        if (bt.drv->cuMemPrefetchBatchAsync) {
            st = CUABI__CU(bt.drv, cuMemPrefetchBatchAsync, bt.ptrs, bt.sizes, bt.n, bt.locs,
                           bt.idx, bt.nlocs, 0, bt.stream);
        } else {
            /* drivers before CUDA 13: one cuMemPrefetchAsync per buffer, as
             * cuda.core does on CUDA 12 */
            size_t run = 0;
            for (size_t i = 0; i < bt.n && st == CUABI_SUCCESS; i++) {
                if (run + 1 < bt.nlocs && bt.idx[run + 1] == i)
                    run++;
                st = CUABI__CU(bt.drv, cuMemPrefetchAsync, bt.ptrs[i], bt.sizes[i],
                               bt.locs[run], 0, bt.stream);
            }
        }
    }
    cuabi__free(bt.mem);
    return cuabi__context_end(&bt.scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_discard_batch(cuabi_buffer **buffers,
                                                       size_t count, cuabi_stream *stream)
{
    batch bt;
    cuabi_status st = batch_make(&bt, buffers, count, NULL, NULL, 0, false, stream, __func__);
    if (st == CUABI_SUCCESS && bt.n > 0) {
        if (!bt.drv->cuMemDiscardBatchAsync)
            st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                              "%s: the driver has no cuMemDiscardBatchAsync (CUDA 13.0+)",
                              __func__);
        else
            st = CUABI__CU(bt.drv, cuMemDiscardBatchAsync, bt.ptrs, bt.sizes, bt.n, 0,
                           bt.stream);
    }
    cuabi__free(bt.mem);
    return cuabi__context_end(&bt.scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_managed_discard_prefetch_batch(cuabi_buffer **buffers,
                                                                size_t count,
                                                                const int32_t *location_types,
                                                                const int32_t *location_ids,
                                                                size_t location_count,
                                                                cuabi_stream *stream)
{
    batch bt;
    cuabi_status st = batch_make(&bt, buffers, count, location_types, location_ids,
                                 location_count, true, stream, __func__);
    if (st == CUABI_SUCCESS && bt.n > 0) {
        if (!bt.drv->cuMemDiscardAndPrefetchBatchAsync)
            st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                              "%s: the driver has no cuMemDiscardAndPrefetchBatchAsync (CUDA "
                              "13.0+)", __func__);
        else
            st = CUABI__CU(bt.drv, cuMemDiscardAndPrefetchBatchAsync, bt.ptrs, bt.sizes, bt.n,
                           bt.locs, bt.idx, bt.nlocs, 0, bt.stream);
    }
    cuabi__free(bt.mem);
    return cuabi__context_end(&bt.scope, st);
}
