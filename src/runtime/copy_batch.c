/* Batched copies: many copies in one driver call (cuMemcpyBatchAsync, and
 * cuMemcpy3DBatchAsync for pitched 3-D ones), each between a buffer, a
 * view or a raw address at a byte offset, with its own source access
 * order, location hints and flags; one copy per driver call where the
 * driver lacks the batched entry points (the result says so).
 *
 * Everything is checked before anything is queued: each end names exactly
 * one of buffer / view / address, its range lies inside the buffer or the
 * view's bytes (overflow-checked), the enums are known. Copies whose
 * attributes equal their predecessor's share its attribute set (the
 * driver's attrsIdxs runs). */
#include "runtime/capture.h"
#include "runtime/memory.h"
#include "util/checked.h"

#include <string.h>

/* One end of a copy, resolved: its first byte and how many bytes follow
 * it (SIZE_MAX for a raw address: only the address space bounds it). */
typedef struct end {
    uintptr_t base;
    size_t limit;
    bool bounded;
} end;

static cuabi_status end_resolve(end *e, cuabi_buffer *buffer, cuabi_view *view,
                                uintptr_t address, const char *which, size_t i,
                                const char *caller)
{
    int given = (buffer != NULL) + (view != NULL) + (address != 0);
    if (given != 1)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: copy %zu: the %s must be exactly one of a buffer, a view or "
                            "an address (%d given)", caller, i, which, given);
    void *obj;
    if (buffer) {
        CUABI__TRY(cuabi__handle_get(buffer, CUABI__T_BUFFER, &obj, caller));
        cuabi__buffer *b = obj;
        e->base = b->ptr;
        e->limit = __atomic_load_n(&b->size, __ATOMIC_ACQUIRE);
        e->bounded = true;
        return CUABI_SUCCESS;
    }
    if (view) {
        CUABI__TRY(cuabi__handle_get(view, CUABI__T_VIEW, &obj, caller));
        cuabi__view *v = obj;
        int contiguous = 0;
        CUABI__TRY(cuabi_view_is_c_contiguous(&contiguous, view));
        if (!contiguous)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: copy %zu: the %s view is not contiguous (a batched copy "
                                "moves bytes; use cuabi_copy_batch_3d with its pitches)", caller,
                                i, which);
        size_t itemsize = cuabi__dtype_itemsize(v->code, v->bits, 1, CUABI_ERROR_INVALID_ARGUMENT,
                                                caller);
        if (!itemsize || !cuabi__size_mul(&e->limit, (size_t)v->size, itemsize))
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: copy %zu: the %s view's bytes overflow", caller, i, which);
        e->base = v->data + (uintptr_t)v->byte_offset;
        e->bounded = true;
        return CUABI_SUCCESS;
    }
    e->base = address;
    e->limit = SIZE_MAX;
    e->bounded = false;
    return CUABI_SUCCESS;
}

/* `bytes` bytes at `offset` of the end: its address, or an error naming
 * the copy. */
static cuabi_status end_range(uintptr_t *at, const end *e, uint64_t offset, size_t bytes,
                              const char *which, size_t i, const char *caller)
{
    if (offset > SIZE_MAX ||
        (e->bounded ? !cuabi__range_inside((size_t)offset, bytes, e->limit)
                    : !cuabi__span_fits(e->base, (size_t)offset) ||
                          !cuabi__span_fits(e->base + (size_t)offset, bytes)))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: copy %zu: %zu bytes at offset %llu run past the end of the %s "
                            "(%s%zu bytes)", caller, i, bytes, (unsigned long long)offset, which,
                            e->bounded ? "" : "the address space; ", e->bounded ? e->limit : 0);
    *at = e->base + (size_t)offset;
    return CUABI_SUCCESS;
}

static bool location_ok(cuabi_location_type t)
{
    return t >= CUABI_LOCATION_NONE && t <= CUABI_LOCATION_HOST_NUMA_CURRENT;
}

/* The attributes of one copy, as the driver takes them. */
static cuabi_status attributes_of(CUmemcpyAttributes *a, cuabi_copy_src_order order,
                                  cuabi_location_type st, int sid, cuabi_location_type dt,
                                  int did, unsigned flags, size_t i, const char *caller)
{
    if (order < CUABI_COPY_SRC_STREAM || order > CUABI_COPY_SRC_ANY)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: copy %zu: src_access_order %d is not a cuabi_copy_src_order",
                            caller, i, (int)order);
    if (!location_ok(st) || !location_ok(dt))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: copy %zu: a location hint type (%d, %d) is not a "
                            "cuabi_location_type", caller, i, (int)st, (int)dt);
    if (flags & ~(unsigned)CUABI_COPY_PREFER_OVERLAP_WITH_COMPUTE)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: copy %zu: unknown flags 0x%x",
                            caller, i, flags);
    memset(a, 0, sizeof *a);
    a->srcAccessOrder = (CUmemcpySrcAccessOrder)order;
    a->srcLocHint.type = (CUmemLocationType)st;
    a->srcLocHint.id = st == CUABI_LOCATION_NONE ? 0 : sid;
    a->dstLocHint.type = (CUmemLocationType)dt;
    a->dstLocHint.id = dt == CUABI_LOCATION_NONE ? 0 : did;
    a->flags = flags;
    return CUABI_SUCCESS;
}

static bool attributes_equal(const CUmemcpyAttributes *a, const CUmemcpyAttributes *b)
{
    return a->srcAccessOrder == b->srcAccessOrder && a->flags == b->flags &&
           a->srcLocHint.type == b->srcLocHint.type && a->srcLocHint.id == b->srcLocHint.id &&
           a->dstLocHint.type == b->dstLocHint.type && a->dstLocHint.id == b->dstLocHint.id;
}

/* The stream, not the legacy default stream, and the driver. */
static cuabi_status batch_stream(cuabi__stream **s, const cuabi__driver **drv,
                                 cuabi_stream *stream, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    *s = obj;
    if (!(*s)->cu_stream || (*s)->cu_stream == CU_STREAM_LEGACY)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: batched copies cannot go on the legacy default stream "
                            "(cuMemcpyBatchAsync refuses it): use a created stream or the "
                            "per-thread default stream", caller);
    return cuabi__driver_get(drv);
}

/* The driver runs a stream's copies in the current context: the stream's
 * device's is made current in *scope for the batch and the caller's given
 * back (two H200s refused a batch on GPU 0's stream with GPU 1's context
 * current). Then the stream must not be under a cuabi capture (the driver
 * has no graph node for a batch; the per-thread default stream is the
 * current context's, hence the order). */
static cuabi_status batch_enter(cuabi__context_scope *scope, cuabi__stream *s,
                                const cuabi__driver *drv, const char *caller)
{
    CUABI__TRY(cuabi__device_enter(scope, s->device, drv));
    if (CUABI__UNLIKELY(cuabi__capturing()) && drv->cuStreamIsCapturing) {
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (drv->cuStreamIsCapturing(s->cu_stream, &cs) == CUDA_SUCCESS &&
            cs != CU_STREAM_CAPTURE_STATUS_NONE)
            return cuabi__error(CUABI_ERROR_STREAM_CAPTURE,
                                "%s: the stream is being captured, and a batched copy cannot be "
                                "part of a graph (the driver has no node for it): copy with "
                                "cuabi_buffer_copy during the capture", caller);
    }
    return CUABI_SUCCESS;
}

static void result_fill(cuabi_copy_result *r, cuabi_copy_path path, size_t copies,
                        uint64_t bytes, size_t calls, size_t sets, int synced,
                        const char *reason)
{
    if (!r)
        return;
    r->path = path;
    r->copies = copies;
    r->bytes = bytes;
    r->driver_calls = calls;
    r->attribute_sets = sets;
    r->synchronized = synced;
    r->reason = reason;
}

static const char no_batch[] = "the driver has no cuMemcpyBatchAsync (CUDA 13.0+)";
static const char no_batch_3d[] = "the driver has no cuMemcpy3DBatchAsync (CUDA 13.0+)";

/* --------------------------------------------------------------- 1-D */

typedef struct plan {
    CUdeviceptr *dst, *src;
    size_t *size, *idx;
    CUmemcpyAttributes *attr;
    size_t n, nattr;
    uint64_t bytes;
    bool during_call;            /* some copy reads its source during the call */
} plan;

static void plan_free(plan *p)
{
    cuabi__free(p->dst);   /* one block */
}

static cuabi_status plan_alloc(plan *p, size_t count, const char *caller)
{
    memset(p, 0, sizeof *p);
    size_t words, bytes;
    /* dst, src, size, idx: four words per copy; then the attributes */
    if (!cuabi__size_mul(&words, count, 4 * sizeof(size_t)) ||
        !cuabi__size_mul_add(&bytes, count, sizeof(CUmemcpyAttributes), words))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu copies overflow", caller,
                            count);
    char *m = cuabi__malloc(bytes ? bytes : 1);
    if (!m)
        return CUABI_ERROR_OUT_OF_MEMORY;
    p->dst = (CUdeviceptr *)m;
    p->src = p->dst + count;
    p->size = (size_t *)(p->src + count);
    p->idx = p->size + count;
    p->attr = (CUmemcpyAttributes *)(m + words);
    return CUABI_SUCCESS;
}

/* Add a copy (size > 0) with its attributes to the plan. */
static void plan_add(plan *p, uintptr_t dst, uintptr_t src, size_t size,
                     const CUmemcpyAttributes *a)
{
    if (p->nattr == 0 || !attributes_equal(&p->attr[p->nattr - 1], a)) {
        p->attr[p->nattr] = *a;
        p->idx[p->nattr++] = p->n;
    }
    p->dst[p->n] = (CUdeviceptr)dst;
    p->src[p->n] = (CUdeviceptr)src;
    p->size[p->n++] = size;
    p->bytes += size;
    p->during_call |= a->srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
}

static cuabi_status plan_items(plan *p, const cuabi_copy_item *items, size_t count,
                               const char *caller)
{
    for (size_t i = 0; i < count; i++) {
        const cuabi_copy_item *it = &items[i];
        if (it->version == 0 || it->version > CUABI_COPY_ITEM_VERSION)
            return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                                "%s: copy %zu: cuabi_copy_item version %u is not supported "
                                "(use CUABI_COPY_ITEM_INIT)", caller, i, it->version);
        CUmemcpyAttributes a;
        CUABI__TRY(attributes_of(&a, it->src_access_order, it->src_hint_type, it->src_hint_id,
                                 it->dst_hint_type, it->dst_hint_id, it->flags, i, caller));
        end d, s;
        CUABI__TRY(end_resolve(&d, it->dst_buffer, it->dst_view, it->dst_address, "destination",
                               i, caller));
        CUABI__TRY(end_resolve(&s, it->src_buffer, it->src_view, it->src_address, "source", i,
                               caller));
        uintptr_t da, sa;
        CUABI__TRY(end_range(&da, &d, it->dst_offset, it->size, "destination", i, caller));
        CUABI__TRY(end_range(&sa, &s, it->src_offset, it->size, "source", i, caller));
        if (it->size)
            plan_add(p, da, sa, it->size, &a);
    }
    return CUABI_SUCCESS;
}

/* The planned copies on the stream (its device's context current): one
 * batch, or one cuMemcpyAsync each where the driver has no batch. */
static cuabi_status run_plan(cuabi_copy_result *result, const plan *p, cuabi__stream *s,
                             const cuabi__driver *drv)
{
    cuabi_status st = CUABI_SUCCESS;
    if (drv->cuMemcpyBatchAsync) {
        st = CUABI__CU(drv, cuMemcpyBatchAsync, p->dst, p->src, p->size, p->n, p->attr,
                       p->idx, p->nattr, s->cu_stream);
        if (st == CUABI_SUCCESS)
            result_fill(result, CUABI_COPY_PATH_BATCHED, p->n, p->bytes, 1, p->nattr, 0, "");
        return st;
    }
    size_t calls = 0;
    for (size_t i = 0; st == CUABI_SUCCESS && i < p->n; i++, calls++)
        st = CUABI__CU(drv, cuMemcpyAsync, p->dst[i], p->src[i], p->size[i], s->cu_stream);
    bool sync = st == CUABI_SUCCESS && p->during_call;
    if (sync)   /* the source was to be read before returning: make it so */
        st = CUABI__CU(drv, cuStreamSynchronize, s->cu_stream);
    if (st == CUABI_SUCCESS)
        result_fill(result, CUABI_COPY_PATH_SINGLE, p->n, p->bytes, calls, 0, sync, no_batch);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_copy_batch(cuabi_copy_result *result,
                                            const cuabi_copy_item *items, size_t count,
                                            cuabi_stream *stream)
{
    CUABI__CHECK_OPTS(result, "cuabi_copy_result", CUABI_COPY_RESULT_VERSION, true);
    result_fill(result, CUABI_COPY_PATH_NONE, 0, 0, 0, 0, 0, "");
    CUABI__CHECK_ARG(items || count == 0, "%s: items is NULL", __func__);
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__TRY(batch_stream(&s, &drv, stream, __func__));
    plan p;
    CUABI__TRY(plan_alloc(&p, count, __func__));
    cuabi_status st = plan_items(&p, items, count, __func__);
    if (st != CUABI_SUCCESS || p.n == 0) {
        plan_free(&p);
        return st;
    }
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    st = batch_enter(&scope, s, drv, __func__);
    if (st == CUABI_SUCCESS)
        st = run_plan(result, &p, s, drv);
    plan_free(&p);
    return cuabi__context_end(&scope, st);
}

/* --------------------------------------------------------------- 3-D */

/* The pitched range of one end: bytes from its first byte to one past its
 * last, with the row length and layer height checked against the extent. */
static cuabi_status pitched_bytes(size_t *out, size_t *row, size_t *layer, size_t width,
                                  size_t height, size_t depth, const char *which, size_t i,
                                  const char *caller)
{
    if (*row == 0)
        *row = width;
    if (*layer == 0)
        *layer = height;
    if (*row < width || *layer < height)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: copy %zu: the %s's row length (%zu bytes) or layer height (%zu "
                            "rows) is below the extent (%zu bytes, %zu rows)", caller, i, which,
                            *row, *layer, width, height);
    size_t rows;   /* rows before the last one: (depth-1)*layer + (height-1) */
    if (!cuabi__size_mul_add(&rows, depth - 1, *layer, height - 1) ||
        !cuabi__size_mul_add(out, rows, *row, width))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: copy %zu: the %s's pitched extent overflows", caller, i, which);
    return CUABI_SUCCESS;
}

static cuabi_status op_of(CUDA_MEMCPY3D_BATCH_OP *op, const cuabi_copy_3d_item *it, size_t i,
                          const char *caller)
{
    CUmemcpyAttributes a;
    CUABI__TRY(attributes_of(&a, it->src_access_order, it->src_hint_type, it->src_hint_id,
                             it->dst_hint_type, it->dst_hint_id, it->flags, i, caller));
    end d, s;
    CUABI__TRY(end_resolve(&d, it->dst_buffer, it->dst_view, it->dst_address, "destination", i,
                           caller));
    CUABI__TRY(end_resolve(&s, it->src_buffer, it->src_view, it->src_address, "source", i,
                           caller));
    size_t drow = it->dst_row_length, dlayer = it->dst_layer_height;
    size_t srow = it->src_row_length, slayer = it->src_layer_height;
    size_t dbytes, sbytes;
    CUABI__TRY(pitched_bytes(&dbytes, &drow, &dlayer, it->width, it->height, it->depth,
                             "destination", i, caller));
    CUABI__TRY(pitched_bytes(&sbytes, &srow, &slayer, it->width, it->height, it->depth,
                             "source", i, caller));
    uintptr_t da, sa;
    CUABI__TRY(end_range(&da, &d, it->dst_offset, dbytes, "destination", i, caller));
    CUABI__TRY(end_range(&sa, &s, it->src_offset, sbytes, "source", i, caller));
    memset(op, 0, sizeof *op);
    op->src.type = op->dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op->src.op.ptr.ptr = (CUdeviceptr)sa;
    op->src.op.ptr.rowLength = srow;
    op->src.op.ptr.layerHeight = slayer;
    op->src.op.ptr.locHint = a.srcLocHint;
    op->dst.op.ptr.ptr = (CUdeviceptr)da;
    op->dst.op.ptr.rowLength = drow;
    op->dst.op.ptr.layerHeight = dlayer;
    op->dst.op.ptr.locHint = a.dstLocHint;
    op->extent.width = it->width;
    op->extent.height = it->height;
    op->extent.depth = it->depth;
    op->srcAccessOrder = a.srcAccessOrder;
    op->flags = a.flags;
    return CUABI_SUCCESS;
}

/* One 3-D copy without the batch: cuMemcpy3DPeerAsync between unified
 * addresses, in the stream's context. */
static cuabi_status single_3d(const CUDA_MEMCPY3D_BATCH_OP *op, cuabi__stream *s,
                              const cuabi__driver *drv, const char *caller)
{
    /* the caller made the stream's device's context current */
    CUcontext ctx = atomic_load_explicit(&s->device->primary, memory_order_acquire);
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = op->src.op.ptr.ptr;
    c.dstDevice = op->dst.op.ptr.ptr;
    c.srcContext = c.dstContext = ctx;
    c.srcPitch = op->src.op.ptr.rowLength;
    c.srcHeight = op->src.op.ptr.layerHeight;
    c.dstPitch = op->dst.op.ptr.rowLength;
    c.dstHeight = op->dst.op.ptr.layerHeight;
    c.WidthInBytes = op->extent.width;
    c.Height = op->extent.height;
    c.Depth = op->extent.depth;
    return CUABI__CU_IN(caller, drv, cuMemcpy3DPeerAsync, &c, s->cu_stream);
}

CUABI_EXTERN(cuabi_status) cuabi_copy_batch_3d(cuabi_copy_result *result,
                                               const cuabi_copy_3d_item *items, size_t count,
                                               cuabi_stream *stream)
{
    CUABI__CHECK_OPTS(result, "cuabi_copy_result", CUABI_COPY_RESULT_VERSION, true);
    result_fill(result, CUABI_COPY_PATH_NONE, 0, 0, 0, 0, 0, "");
    CUABI__CHECK_ARG(items || count == 0, "%s: items is NULL", __func__);
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__TRY(batch_stream(&s, &drv, stream, __func__));
    size_t bytes;
    CUABI__CHECK_ARG(cuabi__size_mul(&bytes, count, sizeof(CUDA_MEMCPY3D_BATCH_OP)),
                     "%s: %zu copies overflow", __func__, count);
    CUDA_MEMCPY3D_BATCH_OP *ops = cuabi__malloc(bytes ? bytes : 1);
    if (!ops)
        return CUABI_ERROR_OUT_OF_MEMORY;
    size_t n = 0;
    uint64_t total = 0;
    bool during_call = false;
    cuabi_status st = CUABI_SUCCESS;
    for (size_t i = 0; st == CUABI_SUCCESS && i < count; i++) {
        const cuabi_copy_3d_item *it = &items[i];
        if (it->version == 0 || it->version > CUABI_COPY_3D_ITEM_VERSION) {
            st = cuabi__error(CUABI_ERROR_INVALID_VERSION,
                              "%s: copy %zu: cuabi_copy_3d_item version %u is not supported "
                              "(use CUABI_COPY_3D_ITEM_INIT)", __func__, i, it->version);
            break;
        }
        if (!it->width || !it->height || !it->depth)   /* nothing to copy; still checked */
            continue;
        st = op_of(&ops[n], it, i, __func__);
        if (st == CUABI_SUCCESS) {
            size_t b = 0;
            (void)cuabi__size_mul(&b, it->width, it->height);
            (void)cuabi__size_mul(&b, b, it->depth);
            total += b;
            during_call |= ops[n].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
            n++;
        }
    }
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (st == CUABI_SUCCESS && n > 0 &&
        (st = batch_enter(&scope, s, drv, __func__)) == CUABI_SUCCESS) {
        if (drv->cuMemcpy3DBatchAsync) {
            st = CUABI__CU(drv, cuMemcpy3DBatchAsync, n, ops, 0, s->cu_stream);
            if (st == CUABI_SUCCESS)
                result_fill(result, CUABI_COPY_PATH_BATCHED, n, total, 1, n, 0, "");
        } else {
            size_t calls = 0;
            for (size_t i = 0; st == CUABI_SUCCESS && i < n; i++, calls++)
                st = single_3d(&ops[i], s, drv, __func__);
            bool sync = st == CUABI_SUCCESS && during_call;
            if (sync)
                st = CUABI__CU(drv, cuStreamSynchronize, s->cu_stream);
            if (st == CUABI_SUCCESS)
                result_fill(result, CUABI_COPY_PATH_SINGLE, n, total, calls, 0, sync,
                            no_batch_3d);
        }
    }
    cuabi__free(ops);
    return cuabi__context_end(&scope, st);
}
