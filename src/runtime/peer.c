/* Several GPUs in one process: peer access, peer attributes, copies between
 * devices (byte ranges of buffers, strided views up to 3-D) and pool access
 * from other devices. */
#include "runtime/capture.h"
#include "runtime/memory.h"

#include <string.h>

/* A driver refusal that means "these two devices cannot be peers" (or the
 * direction is not enabled) becomes CUABI_ERROR_PEER_ACCESS; the CUresult
 * stays in the record. */
static bool peer_refusal(CUresult r)
{
    return r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED || r == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED ||
           r == CUDA_ERROR_TOO_MANY_PEERS || r == CUDA_ERROR_INVALID_DEVICE ||
           r == CUDA_ERROR_NOT_SUPPORTED;
}

static cuabi_status peer_error(CUresult r, const char *entry, const char *caller,
                               const char *what, const cuabi__device *a, const cuabi__device *b)
{
    if (!peer_refusal(r))
        return cuabi__cu_check(r, entry, caller);
    cuabi_status st = cuabi__error(CUABI_ERROR_PEER_ACCESS,
                                   "%s: %s from device %d to device %d: %s refused it (CUresult "
                                   "%d); check cuabi_peer_get_attribute(CUABI_PEER_ACCESS_SUPPORTED)",
                                   caller, what, a->ordinal, b->ordinal, entry, (int)r);
    cuabi__error_set_cu((int)r);
    return st;
}

/* The primary context of `dev`, retained by the device on first use (not
 * made current: the caller enters the one its driver call works in). */
static cuabi_status primary_context(CUcontext *ctx, cuabi__device *dev, const cuabi__driver *drv)
{
    return cuabi__device_primary(ctx, dev, drv);
}

static cuabi_status two_devices(cuabi__device **a, cuabi__device **b, cuabi_device *device,
                                cuabi_device *peer, const char *caller)
{
    void *o;
    CUABI__TRY(cuabi__handle_get(device, CUABI__T_DEVICE, &o, caller));
    *a = o;
    CUABI__TRY(cuabi__handle_get(peer, CUABI__T_DEVICE, &o, caller));
    *b = o;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_peer_enable(cuabi_device *device, cuabi_device *peer)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev, *other;
    const cuabi__driver *drv;
    CUABI__TRY(two_devices(&dev, &other, device, peer, __func__));
    if (dev == other)
        return cuabi__error(CUABI_ERROR_PEER_ACCESS,
                            "%s: device %d cannot be its own peer (it reaches its memory anyway)",
                            __func__, dev->ordinal);
    CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuCtxEnablePeerAccess)
        return cuabi__missing_entry("cuCtxEnablePeerAccess", __func__);
    CUcontext peer_ctx;
    CUABI__TRY(primary_context(&peer_ctx, other, drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUresult r = CUABI__CU_RAW(drv, cuCtxEnablePeerAccess, peer_ctx, 0);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    CUABI__SCOPE_RETURN(peer_error(r, "cuCtxEnablePeerAccess", __func__, "enabling peer access", dev, other));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_peer_disable(cuabi_device *device, cuabi_device *peer)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev, *other;
    const cuabi__driver *drv;
    CUABI__TRY(two_devices(&dev, &other, device, peer, __func__));
    if (dev == other)
        return cuabi__error(CUABI_ERROR_PEER_ACCESS, "%s: device %d is not its own peer",
                            __func__, dev->ordinal);
    CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuCtxDisablePeerAccess)
        return cuabi__missing_entry("cuCtxDisablePeerAccess", __func__);
    CUcontext peer_ctx;
    CUABI__TRY(primary_context(&peer_ctx, other, drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUresult r = CUABI__CU_RAW(drv, cuCtxDisablePeerAccess, peer_ctx);
    if (r == CUDA_SUCCESS)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    if (r == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) {
        cuabi_status st = cuabi__error(CUABI_ERROR_PEER_ACCESS,
                                       "%s: peer access from device %d to device %d is not "
                                       "enabled", __func__, dev->ordinal, other->ordinal);
        cuabi__error_set_cu((int)r);
        CUABI__SCOPE_RETURN(st);
    }
    CUABI__SCOPE_RETURN(peer_error(r, "cuCtxDisablePeerAccess", __func__, "disabling peer access", dev, other));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_peer_get_attribute(int *out, cuabi_device *device,
                                                    cuabi_device *peer,
                                                    cuabi_peer_attribute attribute)
{
    cuabi__device *dev, *other;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__TRY(two_devices(&dev, &other, device, peer, __func__));
    CUABI__CHECK_ARG(attribute >= CUABI_PEER_PERFORMANCE_RANK &&
                         attribute <= CUABI_PEER_CUDA_ARRAY_ACCESS_SUPPORTED,
                     "%s: %d is not a cuabi_peer_attribute", __func__, (int)attribute);
    CUABI__CHECK_ARG(dev != other, "%s: the two devices are the same (device %d); peer "
                     "attributes describe a pair of different devices", __func__, dev->ordinal);
    CUABI__TRY(cuabi__driver_get(&drv));
    return CUABI__CU(drv, cuDeviceGetP2PAttribute, out, (CUdevice_P2PAttribute)attribute,
                     dev->cu_device, other->cu_device);
}

/* ------------------------------------------------------------- copies */

static cuabi_status optional_stream(cuabi__stream **s, cuabi_stream *stream, const char *caller)
{
    *s = NULL;
    if (!stream)
        return CUABI_SUCCESS;
    void *obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    *s = obj;
    return CUABI_SUCCESS;
}

/* The contexts of both sides, then, in *scope, the destination's current
 * (whose legacy stream carries a copy without a stream), or a default
 * stream's device's, for the copy itself. */
static cuabi_status copy_contexts(cuabi__context_scope *scope, CUcontext *dst_ctx, CUcontext *src_ctx, CUstream *raw,
                                  cuabi__device *dst, cuabi__device *src, cuabi__stream *s,
                                  const cuabi__driver *drv)
{
    CUABI__TRY(primary_context(src_ctx, src, drv));
    CUABI__TRY(primary_context(dst_ctx, dst, drv));
    CUABI__TRY(cuabi__context_enter(scope, *dst_ctx, drv));
    if (!s) {
        *raw = NULL;
        return CUABI_SUCCESS;
    }
    *raw = s->cu_stream;
    return cuabi__stream_enter(scope, s, drv);
}

static cuabi_status device_buffer(const cuabi__buffer *b, const char *what, const char *caller)
{
    if (b->kind != CUABI_MEMORY_DEVICE || !b->device)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the %s buffer is not device memory (kind %d); peer copies move "
                            "device memory, cuabi_buffer_copy() moves the rest", caller, what,
                            (int)b->kind);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_peer_copy(cuabi_buffer *dst, size_t dst_offset, cuabi_buffer *src,
                                           size_t src_offset, size_t size, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *d, *sb;
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__GET(d, dst, BUFFER);
    CUABI__GET(sb, src, BUFFER);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__TRY(device_buffer(d, "destination", __func__));
    CUABI__TRY(device_buffer(sb, "source", __func__));
    CUABI__TRY(cuabi__buffer_check_range(d, dst_offset, size, "destination", __func__));
    CUABI__TRY(cuabi__buffer_check_range(sb, src_offset, size, "source", __func__));
    if (s && s->device != d->device && s->device != sb->device)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the stream is on device %d, neither the source's (%d) nor the "
                            "destination's (%d)", __func__, s->device->ordinal,
                            sb->device->ordinal, d->device->ordinal);
    if (size == 0)
        return CUABI_SUCCESS;
    if (s && cuabi__capturing())
        CUABI__TRY(cuabi__capture_keep_buffers(s, d, sb, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcontext dctx, sctx;
    CUstream raw;
    CUABI__TRY_SCOPE(copy_contexts(&scope, &dctx, &sctx, &raw, d->device, sb->device, s, drv));
    CUdeviceptr dp = (CUdeviceptr)(d->ptr + dst_offset), sp = (CUdeviceptr)(sb->ptr + src_offset);
    if (s)
        CUABI__SCOPE_RETURN(CUABI__CU(drv, cuMemcpyPeerAsync, dp, dctx, sp, sctx, size, raw));
    /* cuMemcpyPeer may CUABI__SCOPE_RETURN(before a device-to-device copy is done);
     * "synchronous" here means done, as for cuabi_buffer_copy. */
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuMemcpyPeerAsync, dp, dctx, sp, sctx, size, CU_STREAM_LEGACY));
    CUABI__SCOPE_RETURN(CUABI__CU(drv, cuStreamSynchronize, CU_STREAM_LEGACY));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* A strided copy of at most 3 dimensions in bytes, as cuMemcpy3DPeer takes
 * it: rows of `width` bytes, `height` rows a slice, `depth` slices; pitches
 * and slice heights per side. */
typedef struct copy_plan {
    size_t width, height, depth;
    size_t pitch[2], slice_rows[2];   /* [0] destination, [1] source */
    bool empty;
} copy_plan;

/* Merge what both sides lay out contiguously, then map up to three
 * dimensions onto the driver's pitched 3-D copy. */
static cuabi_status plan_copy(copy_plan *p, const cuabi__view *const v[2], size_t item,
                              const char *caller)
{
    int64_t shape[CUABI_VIEW_MAX_NDIM], st[2][CUABI_VIEW_MAX_NDIM];
    int n = 0;
    memset(p, 0, sizeof *p);
    for (int32_t i = 0; i < v[0]->ndim; i++) {
        if (v[0]->shape[i] == 0) {
            p->empty = true;
            return CUABI_SUCCESS;
        }
        if (v[0]->shape[i] == 1)
            continue;
        for (int k = 0; k < 2; k++)
            if (v[k]->strides[i] <= 0)
                return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                                    "%s: the %s view has a %s stride in dimension %d; copy "
                                    "through a contiguous temporary", caller,
                                    k ? "source" : "destination",
                                    v[k]->strides[i] ? "negative" : "zero (broadcast)", (int)i);
        /* Mergeable when the outer stride is this dimension's whole span; a
         * span that does not fit in 64 bits equals no stride (a view's
         * reach fits, (extent - 1) x stride, but one stride more need not). */
        bool merge = n > 0;
        for (int k = 0; k < 2 && merge; k++) {
            int64_t span;
            merge = !__builtin_mul_overflow(v[k]->strides[i], v[k]->shape[i], &span) &&
                    st[k][n - 1] == span;
        }
        if (merge) {
            shape[n - 1] *= v[0]->shape[i];
            for (int k = 0; k < 2; k++)
                st[k][n - 1] = v[k]->strides[i];
            continue;
        }
        shape[n] = v[0]->shape[i];
        for (int k = 0; k < 2; k++)
            st[k][n] = v[k]->strides[i];
        n++;
    }
    if (n > 3)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the views need %d dimensions after merging contiguous ones; a "
                            "peer copy takes at most 3 (copy slices in a loop)", caller, n);
    if (n > 0)
        for (int k = 0; k < 2; k++)
            if (st[k][n - 1] != 1)
                return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                                    "%s: the %s view's innermost stride is %lld elements; a peer "
                                    "copy needs contiguous rows", caller,
                                    k ? "source" : "destination", (long long)st[k][n - 1]);
    p->width = n > 0 ? (size_t)shape[n - 1] * item : item;
    p->height = n > 1 ? (size_t)shape[n - 2] : 1;
    p->depth = n > 2 ? (size_t)shape[n - 3] : 1;
    for (int k = 0; k < 2; k++) {
        p->pitch[k] = n > 1 ? (size_t)st[k][n - 2] * item : p->width;
        p->slice_rows[k] = p->height;
        if (n > 2) {
            if (st[k][n - 3] % st[k][n - 2] != 0)
                return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                                    "%s: the %s view's outer stride (%lld) is not a multiple of "
                                    "its row stride (%lld)", caller, k ? "source" : "destination",
                                    (long long)st[k][n - 3], (long long)st[k][n - 2]);
            p->slice_rows[k] = (size_t)(st[k][n - 3] / st[k][n - 2]);
        }
        if (p->pitch[k] < p->width || p->slice_rows[k] < p->height)
            return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                                "%s: the %s view's rows or slices overlap", caller,
                                k ? "source" : "destination");
    }
    return CUABI_SUCCESS;
}

static cuabi_status check_views(const cuabi__view *d, const cuabi__view *s, const char *caller)
{
    const cuabi__view *v[2] = { d, s };
    for (int k = 0; k < 2; k++)
        if (v[k]->device_type != CUABI_DLPACK_CUDA)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: the %s view is not CUDA device memory (DLPack device type "
                                "%d)", caller, k ? "source" : "destination",
                                (int)v[k]->device_type);
    if (d->flags & CUABI_VIEW_READ_ONLY)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the destination view is read-only",
                            caller);
    if (d->code != s->code || d->bits != s->bits || d->bits % 8 != 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the views' element types differ (code %d/%d bits vs %d/%d bits)",
                            caller, d->code, d->bits, s->code, s->bits);
    bool same = d->ndim == s->ndim;
    for (int32_t i = 0; same && i < d->ndim; i++)
        same = d->shape[i] == s->shape[i];
    if (!same)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the views' shapes differ", caller);
    return CUABI_SUCCESS;
}

/* The device objects of two views' ordinals, as new references. */
static cuabi_status view_devices(cuabi_device *h[2], cuabi__device *dev[2],
                                 const cuabi__view *const v[2])
{
    h[0] = h[1] = NULL;
    for (int k = 0; k < 2; k++) {
        CUABI__TRY(cuabi_device_get(&h[k], v[k]->device_id));
        void *o;
        CUABI__TRY(cuabi__handle_get(h[k], CUABI__T_DEVICE, &o, "cuabi_peer_copy_view"));
        dev[k] = o;
    }
    return CUABI_SUCCESS;
}

static cuabi_status copy_planned(const copy_plan *p, const cuabi__view *const v[2],
                                 cuabi__device *const dev[2], cuabi__stream *s,
                                 const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcontext ctx[2];
    CUstream raw;
    CUABI__TRY_SCOPE(copy_contexts(&scope, &ctx[0], &ctx[1], &raw, dev[0], dev[1], s, drv));
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.dstMemoryType = c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = (CUdeviceptr)(v[0]->data + v[0]->byte_offset);
    c.srcDevice = (CUdeviceptr)(v[1]->data + v[1]->byte_offset);
    c.dstContext = ctx[0];
    c.srcContext = ctx[1];
    c.dstPitch = p->pitch[0];
    c.srcPitch = p->pitch[1];
    c.dstHeight = p->slice_rows[0];
    c.srcHeight = p->slice_rows[1];
    c.WidthInBytes = p->width;
    c.Height = p->height;
    c.Depth = p->depth;
    if (s)
        CUABI__SCOPE_RETURN(CUABI__CU_IN(caller, drv, cuMemcpy3DPeerAsync, &c, raw));
    CUABI__TRY_SCOPE(CUABI__CU_IN(caller, drv, cuMemcpy3DPeerAsync, &c, CU_STREAM_LEGACY));
    CUABI__SCOPE_RETURN(CUABI__CU_IN(caller, drv, cuStreamSynchronize, CU_STREAM_LEGACY));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_peer_copy_view(cuabi_view *dst, cuabi_view *src,
                                                cuabi_stream *stream)
{
    cuabi__view *d, *sv;
    cuabi__stream *s;
    CUABI__GET(d, dst, VIEW);
    CUABI__GET(sv, src, VIEW);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__TRY(check_views(d, sv, __func__));
    if (s && s->device->ordinal != d->device_id && s->device->ordinal != sv->device_id)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the stream is on device %d, neither the source's (%d) nor the "
                            "destination's (%d)", __func__, s->device->ordinal,
                            (int)sv->device_id, (int)d->device_id);
    const cuabi__view *v[2] = { d, sv };
    copy_plan plan;
    CUABI__TRY(plan_copy(&plan, v, d->bits / 8u, __func__));
    if (plan.empty)
        return CUABI_SUCCESS;
    cuabi_device *h[2];
    cuabi__device *dev[2];
    cuabi_status st = view_devices(h, dev, v);
    if (st == CUABI_SUCCESS)
        st = copy_planned(&plan, v, dev, s, __func__);
    for (int k = 0; k < 2; k++)
        if (h[k])
            cuabi__handle_release(h[k], CUABI__T_DEVICE);
    return st;
}

/* --------------------------------------------------------- pool access */

static cuabi_status pool_of(cuabi__memory_resource **r, cuabi__device **dev,
                            cuabi_memory_resource *resource, cuabi_device *device,
                            const char *caller)
{
    void *o;
    CUABI__TRY(cuabi__handle_get(resource, CUABI__T_MEMORY_RESOURCE, &o, caller));
    *r = o;
    CUABI__TRY(cuabi__handle_get(device, CUABI__T_DEVICE, &o, caller));
    *dev = o;
    if ((*r)->impl != CUABI__RES_POOL)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the resource has no memory pool (only "
                            "cuabi_memory_resource_device_default() and _pool_create() do)",
                            caller);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_peer_set_pool_access(cuabi_memory_resource *resource,
                                                      cuabi_device *device,
                                                      cuabi_peer_access access)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    cuabi__device *dev;
    CUABI__TRY(pool_of(&r, &dev, resource, device, __func__));
    CUABI__CHECK_ARG(access == CUABI_PEER_ACCESS_NONE || access == CUABI_PEER_ACCESS_READ ||
                         access == CUABI_PEER_ACCESS_READ_WRITE,
                     "%s: %d is not a cuabi_peer_access", __func__, (int)access);
    CUABI__CHECK_ARG(dev != r->device || access == CUABI_PEER_ACCESS_READ_WRITE,
                     "%s: device %d owns the pool; its access is always read-write", __func__,
                     dev->ordinal);
    const cuabi__driver *drv = r->drv;
    if (!drv->cuMemPoolSetAccess)
        return cuabi__missing_entry("cuMemPoolSetAccess", __func__);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, r->device, drv));
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = dev->cu_device;
    desc.flags = (CUmemAccess_flags)access;
    CUresult res = CUABI__CU_RAW(drv, cuMemPoolSetAccess, r->pool, &desc, 1);
    if (res == CUDA_SUCCESS)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    CUABI__SCOPE_RETURN(peer_error(res, "cuMemPoolSetAccess", __func__, "pool access", dev, r->device));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_peer_get_pool_access(cuabi_peer_access *out,
                                                      cuabi_memory_resource *resource,
                                                      cuabi_device *device)
{
    cuabi__memory_resource *r;
    cuabi__device *dev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__TRY(pool_of(&r, &dev, resource, device, __func__));
    CUmemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = dev->cu_device;
    CUmemAccess_flags flags;
    CUABI__TRY(CUABI__CU(r->drv, cuMemPoolGetAccess, &flags, r->pool, &loc));
    *out = (cuabi_peer_access)flags;
    return CUABI_SUCCESS;
}
