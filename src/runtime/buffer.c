/* Buffers: memory from a resource or wrapped, with copies and memsets.
 *
 * The handle is unique and dies at cuabi_buffer_destroy(); the memory has
 * its own reference count (the handle's plus one per view) so views keep it
 * alive after the handle is gone. */
#include "runtime/capture.h"
#include "runtime/memory.h"
#include "runtime/park.h"
#include "util/checked.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ buffer structs */

/* A struct for a new buffer: a parked one (keeps_slot: its handle slot
 * comes along; park.h) or a fresh one (no slot yet). */
static inline __attribute__((always_inline)) cuabi__buffer *buffer_struct_alloc(cuabi__park *p)
{
    cuabi__buffer *b = cuabi__park_take(p);
    if (b)
        return b;
    b = cuabi__malloc(sizeof(cuabi__buffer));
    if (b)
        b->base.keeps_slot = false;
    return b;
}

/* The struct's buffer is over: park it with its slot, or give both back. */
static inline __attribute__((always_inline)) void buffer_struct_free(cuabi__park *p,
                                                                    cuabi__buffer *b)
{
    if (b->base.keeps_slot) {
        if (cuabi__park_put(p, b))
            return;
        cuabi__handle_give_back(&b->base, false);
    }
    cuabi__free(b);
}

/* ------------------------------------------------------------- buffers */

void cuabi__buffer_mem_retain(cuabi__buffer *b)
{
    atomic_fetch_add_explicit(&b->mem_refs, 1, memory_order_relaxed);
}

/* The memory's last reference is gone: give it back (to its resource or
 * release callback) and free the struct. Inline in mem_release: its hot
 * case (a pool buffer on a created stream) is the allocate/free pair's. */
static inline __attribute__((always_inline)) cuabi_status buffer_mem_free(cuabi__buffer *b,
                                                                         const char *caller)
{
    cuabi_status st = CUABI_SUCCESS;
    if (b->res)
        st = cuabi__resource_deallocate(b->res, b->ptr, b->size, b->alignment, b->stream, caller);
    else if (b->release)
        b->release(b->ptr, b->size, b->payload);
    if (b->stream && b->stream_owned)
        cuabi__object_release(&b->stream->base);
    cuabi__park *p = cuabi__my_park();
    if (b->res)
        cuabi__resource_unhold(p, b->res);
    else if (b->device)
        cuabi__object_release(&b->device->base);
    buffer_struct_free(p, b);
    return st;
}

/* Inline in cuabi_buffer_free_async, the other half of the hot pair. */
static inline __attribute__((always_inline)) cuabi_status buffer_mem_release(cuabi__buffer *b, const char *caller)
{
    /* A count of 1 seen with acquire is ours alone: a new reference needs
     * the buffer handle or a view holding one of the others, so no one can
     * add one now and the atomic decrement can be skipped. */
    if (atomic_load_explicit(&b->mem_refs, memory_order_acquire) != 1 &&
        atomic_fetch_sub_explicit(&b->mem_refs, 1, memory_order_acq_rel) != 1)
        return CUABI_SUCCESS;
    if (CUABI__UNLIKELY(cuabi__capturing()) && cuabi__capture_defer_free(b))
        return CUABI_SUCCESS;
    return buffer_mem_free(b, caller);
}

cuabi_status cuabi__buffer_mem_release(cuabi__buffer *b, const char *caller)
{
    return buffer_mem_release(b, caller);
}

cuabi_status cuabi__buffer_mem_free(cuabi__buffer *b, const char *caller)
{
    return buffer_mem_free(b, caller);
}

static void buffer_destroy(cuabi__object *o)
{
    (void)cuabi__buffer_mem_release((cuabi__buffer *)o, "cuabi_buffer_destroy");
}

/* Keep `s` alive for the buffer's deallocation: through the resource's
 * stream set where it can, else with a reference of the buffer's own.
 * Returns whether the buffer owns a reference. */
static inline bool buffer_keep_stream(cuabi__buffer *b, cuabi__stream *s)
{
    if (b->res && cuabi__resource_keeps_stream(b->res, s))
        return false;
    cuabi__object_retain(&s->base);
    return true;
}

/* Register a filled buffer and take its references; on failure nothing is
 * touched (the caller still owns the struct). `p`: this thread's park. */
static inline __attribute__((always_inline)) cuabi_status buffer_publish(cuabi_buffer **out,
                                                                        cuabi__buffer *b,
                                                                        cuabi__park *p)
{
    atomic_store_explicit(&b->mem_refs, 1, memory_order_relaxed);
    if (b->base.keeps_slot) {
        cuabi__handle_revive(&b->base, CUABI__T_BUFFER, buffer_destroy);
    } else {
        cuabi_status st = cuabi__handle_register(&b->base, CUABI__T_BUFFER, buffer_destroy);
        if (st != CUABI_SUCCESS)
            return st;
        b->base.keeps_slot = true;
    }
    /* A resource holds its device: one reference fewer per buffer. */
    if (b->res)
        cuabi__resource_hold(p, b->res);
    else if (b->device)
        cuabi__object_retain(&b->device->base);
    b->stream_owned = false;
    if (b->stream)
        b->stream_owned = buffer_keep_stream(b, b->stream);
    *out = CUABI__HANDLE(b, cuabi_buffer);
    return CUABI_SUCCESS;
}

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

/* The stream argument of an allocation from `r`. The resource keeps its
 * first stream alive (cuabi__resource_keep_stream), so a handle equal to
 * that stream's own is live: the common loop on one stream skips the
 * registry lookup. */
static inline cuabi_status resource_stream(cuabi__stream **s, cuabi__memory_resource *r,
                                           cuabi_stream *stream, const char *caller)
{
    cuabi__stream *first = atomic_load_explicit(&r->streams[0], memory_order_acquire);
    if (first && (uintptr_t)stream == first->base.handle) {
        *s = first;
        return CUABI_SUCCESS;
    }
    return optional_stream(s, stream, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_allocate(cuabi_buffer **out,
                                                 cuabi_memory_resource *resource, size_t size,
                                                 size_t alignment, cuabi_stream *stream)
{
    cuabi__memory_resource *r;
    cuabi__stream *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    CUABI__TRY(resource_stream(&s, r, stream, __func__));
    cuabi__park *p = cuabi__my_park();
    cuabi__buffer *b = buffer_struct_alloc(p);
    if (!b)
        return CUABI_ERROR_OUT_OF_MEMORY;
    /* Filled before the driver call, so that little must survive it (fewer
     * registers to save on the hot path); stream is the allocation's until
     * the buffer is published. */
    b->size = size;
    b->alignment = alignment;
    b->kind = r->kind;
    b->device = r->device;
    b->res = r;
    b->stream = s;
    b->release = NULL;
    b->payload = NULL;
    cuabi_status st = cuabi__resource_allocate(&b->ptr, r, size, &b->alignment, s, __func__);
    if (st != CUABI_SUCCESS) {
        buffer_struct_free(p, b);
        return st;
    }
    s = b->stream;
    if (!b->res->stream_ordered) {
        b->stream = NULL;
        /* Virtual memory maps whole granules: the buffer is what was mapped
         * (vmm.c checked that the rounding fits). Pools never get here. */
        if (b->res->granularity)
            b->size = cuabi__size_round_up_sat(b->size, b->res->granularity);
    }
    st = buffer_publish(out, b, p);
    if (CUABI__UNLIKELY(st != CUABI_SUCCESS)) {
        (void)cuabi__resource_deallocate(b->res, b->ptr, b->size, b->alignment, s, __func__);
        buffer_struct_free(p, b);
    } else if (CUABI__UNLIKELY(cuabi__capturing()) && b->stream) {
        cuabi__capture_note_alloc(b);
    }
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_wrap(cuabi_buffer **out, cuabi_device *device,
                                             cuabi_memory_kind kind, uintptr_t ptr, size_t size,
                                             cuabi_buffer_release_fn release, void *payload)
{
    cuabi__device *dev = NULL;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    if (device)
        CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(kind >= CUABI_MEMORY_HOST && kind <= CUABI_MEMORY_MANAGED,
                     "%s: %d is not a cuabi_memory_kind", __func__, (int)kind);
    CUABI__CHECK_ARG(dev || kind == CUABI_MEMORY_HOST,
                     "%s: memory of kind %d needs a device (only CUABI_MEMORY_HOST may pass NULL)",
                     __func__, (int)kind);
    CUABI__CHECK_ARG(ptr || size == 0, "%s: ptr is 0 but size is %zu", __func__, size);
    CUABI__CHECK_ARG(ptr + size >= ptr, "%s: ptr + size wraps around", __func__);
    cuabi__park *p = cuabi__my_park();
    cuabi__buffer *b = buffer_struct_alloc(p);
    if (!b)
        return CUABI_ERROR_OUT_OF_MEMORY;
    /* zero all but the header: a parked struct brings its handle slot */
    memset((char *)b + sizeof b->base, 0, sizeof *b - sizeof b->base);
    b->ptr = ptr;
    b->size = size;
    b->kind = kind;
    b->device = dev;
    b->release = release;
    b->payload = payload;
    cuabi_status st = buffer_publish(out, b, p);
    if (st != CUABI_SUCCESS)
        buffer_struct_free(p, b); /* the memory stays the caller's */
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_free_async(cuabi_buffer *buffer, cuabi_stream *stream)
{
    cuabi__buffer *b;
    CUABI__GET(b, buffer, BUFFER);
    /* The buffer keeps its stream alive: the same handle is live. */
    cuabi__stream *s = b->stream;
    if (!s || (uintptr_t)stream != s->base.handle)
        CUABI__GET(s, stream, STREAM);
    if (b->res && b->res->stream_ordered && s != b->stream) {
        cuabi__stream *old = b->stream;
        bool old_owned = b->stream_owned;
        b->stream_owned = buffer_keep_stream(b, s);
        b->stream = s;
        if (old && old_owned)
            cuabi__object_release(&old->base);
    }
    /* A buffer handle is unique (nothing retains it), so this is its only
     * reference: invalidate it (the slot stays with the struct: a published
     * buffer keeps it), then drop its memory reference here so the
     * deallocation's status (when no view holds the memory) reaches the
     * caller. */
    cuabi__handle_retire(&b->base);
    return buffer_mem_release(b, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_pointer(uintptr_t *out, cuabi_buffer *buffer)
{
    cuabi__buffer *b;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(b, buffer, BUFFER);
    *out = b->ptr;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_size(size_t *out, cuabi_buffer *buffer)
{
    cuabi__buffer *b;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(b, buffer, BUFFER);
    *out = b->size;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_kind(cuabi_memory_kind *out, cuabi_buffer *buffer)
{
    cuabi__buffer *b;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(b, buffer, BUFFER);
    *out = b->kind;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_device(cuabi_device **out, cuabi_buffer *buffer)
{
    cuabi__buffer *b;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(b, buffer, BUFFER);
    if (b->device)
        *out = CUABI__HANDLE(b->device, cuabi_device);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_resource(cuabi_memory_resource **out,
                                                 cuabi_buffer *buffer)
{
    cuabi__buffer *b;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(b, buffer, BUFFER);
    if (b->res)
        *out = CUABI__HANDLE(b->res, cuabi_memory_resource);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------ copies, memsets */

cuabi_status cuabi__buffer_check_range(const cuabi__buffer *b, size_t offset, size_t size,
                                       const char *what, const char *caller)
{
    if (offset > b->size || size > b->size - offset)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: %zu bytes at offset %zu run past the end of the %s buffer "
                            "(%zu bytes)", caller, size, offset, what, b->size);
    return CUABI_SUCCESS;
}

/* Copies and fills run with the right context current -- the stream's for a
 * created or wrapped stream, the device's for a default stream or a
 * synchronous call -- and give the caller's back after: the driver does them
 * in the current context, so with another device's context current (left by
 * NCCL, torch or the caller) a copy into pool memory of the stream's device
 * was refused with CUDA_ERROR_INVALID_VALUE, and a synchronous copy used to
 * leave the buffer's device current, which moved torch's current device
 * (2 x H100, 2026-11-28). The driver, the raw stream and that context
 * current in *scope. */
static cuabi_status driver_begin(const cuabi__driver **drv, CUstream *raw, cuabi__stream *s,
                                 cuabi__device *a, cuabi__device *b, cuabi__context_scope *scope)
{
    CUABI__TRY(cuabi__driver_get(drv));
    if (s) {
        *raw = s->cu_stream;
        return cuabi__stream_context_enter(scope, s, *drv);   /* runtime/stream.h */
    }
    *raw = NULL;
    return cuabi__device_enter(scope, a ? a : b, *drv);
}

/* Without a stream the operation is synchronous: wait for the legacy
 * default stream, where cuMemcpy/cuMemset queue device-side work. */
static cuabi_status driver_end(const cuabi__driver *drv, cuabi__stream *s)
{
    return s ? CUABI_SUCCESS : CUABI__CU(drv, cuStreamSynchronize, CU_STREAM_LEGACY);
}

/* Work queued on a stream that may be under capture (graph.h): the graph
 * keeps the buffers; host-only work would run now instead of in the graph,
 * so it is refused. */
static cuabi_status capture_check(cuabi__stream *s, cuabi__buffer *a, cuabi__buffer *b,
                                  bool host_only, size_t size, const char *caller)
{
    if (CUABI__LIKELY(!s || size == 0 || !cuabi__capturing()))
        return CUABI_SUCCESS;
    if (host_only)
        return cuabi__capture_refuse_host_work(s, "work on host memory only", caller);
    return cuabi__capture_keep_buffers(s, a, b, caller);
}

static cuabi_status copy_raw(uintptr_t dst, cuabi__device *dst_dev, bool dst_host, uintptr_t src,
                             cuabi__device *src_dev, bool src_host, size_t size, cuabi__stream *s)
{
    if (size == 0)
        return CUABI_SUCCESS;
    if (dst_host && src_host) {
        memmove((void *)dst, (const void *)src, size);
        return CUABI_SUCCESS;
    }
    const cuabi__driver *drv;
    CUstream raw;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(driver_begin(&drv, &raw, s, dst_dev, src_dev, &scope));
    if (s)
        return cuabi__context_leave(&scope, drv, CUABI__CU(drv, cuMemcpyAsync, (CUdeviceptr)dst,
                                                           (CUdeviceptr)src, size, raw));
    cuabi_status st = CUABI__CU(drv, cuMemcpy, (CUdeviceptr)dst, (CUdeviceptr)src, size);
    if (st == CUABI_SUCCESS)
        st = driver_end(drv, s);
    return cuabi__context_leave(&scope, drv, st);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_copy(cuabi_buffer *dst, size_t dst_offset,
                                             cuabi_buffer *src, size_t src_offset, size_t size,
                                             cuabi_stream *stream)
{
    cuabi__buffer *d, *sb;
    cuabi__stream *s;
    CUABI__GET(d, dst, BUFFER);
    CUABI__GET(sb, src, BUFFER);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__TRY(cuabi__buffer_check_range(d, dst_offset, size, "destination", __func__));
    CUABI__TRY(cuabi__buffer_check_range(sb, src_offset, size, "source", __func__));
    CUABI__TRY(capture_check(s, d, sb, d->kind == CUABI_MEMORY_HOST && sb->kind == CUABI_MEMORY_HOST,
                             size, __func__));
    return copy_raw(d->ptr + dst_offset, d->device, d->kind == CUABI_MEMORY_HOST,
                    sb->ptr + src_offset, sb->device, sb->kind == CUABI_MEMORY_HOST, size, s);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_copy_from_host(cuabi_buffer *dst, size_t dst_offset,
                                                       const void *src, size_t size,
                                                       cuabi_stream *stream)
{
    cuabi__buffer *d;
    cuabi__stream *s;
    CUABI__GET(d, dst, BUFFER);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__CHECK_ARG(src || size == 0, "%s: src is NULL", __func__);
    CUABI__CHECK_ARG(cuabi__span_fits((uintptr_t)src, size),
                     "%s: src + size (%zu bytes) wraps around the address space", __func__, size);
    CUABI__TRY(cuabi__buffer_check_range(d, dst_offset, size, "destination", __func__));
    CUABI__TRY(capture_check(s, d, NULL, d->kind == CUABI_MEMORY_HOST, size, __func__));
    return copy_raw(d->ptr + dst_offset, d->device, d->kind == CUABI_MEMORY_HOST,
                    (uintptr_t)src, NULL, true, size, s);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_copy_to_host(void *dst, cuabi_buffer *src,
                                                     size_t src_offset, size_t size,
                                                     cuabi_stream *stream)
{
    cuabi__buffer *sb;
    cuabi__stream *s;
    CUABI__CHECK_ARG(dst || size == 0, "%s: dst is NULL", __func__);
    CUABI__CHECK_ARG(cuabi__span_fits((uintptr_t)dst, size),
                     "%s: dst + size (%zu bytes) wraps around the address space", __func__, size);
    CUABI__GET(sb, src, BUFFER);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__TRY(cuabi__buffer_check_range(sb, src_offset, size, "source", __func__));
    CUABI__TRY(capture_check(s, sb, NULL, sb->kind == CUABI_MEMORY_HOST, size, __func__));
    return copy_raw((uintptr_t)dst, NULL, true, sb->ptr + src_offset, sb->device,
                    sb->kind == CUABI_MEMORY_HOST, size, s);
}

static void host_fill(void *p, uint32_t value, unsigned width, size_t count)
{
    if (width == 1) {
        memset(p, (int)value, count);
        return;
    }
    /* memcpy per element: wrapped host memory need not be aligned. */
    uint16_t v16 = (uint16_t)value;
    const void *v = width == 2 ? (const void *)&v16 : (const void *)&value;
    for (size_t i = 0; i < count; i++)
        memcpy((char *)p + i * width, v, width);
}

/* `caller` names the public function in a driver error. */
static cuabi_status driver_fill(uintptr_t p, uint32_t value, unsigned width, size_t count,
                                cuabi__device *dev, cuabi__stream *s, const char *caller)
{
    const cuabi__driver *drv;
    CUstream raw;
    CUdeviceptr d = (CUdeviceptr)p;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(driver_begin(&drv, &raw, s, dev, NULL, &scope));
    if (s) {
        cuabi_status st;
        if (width == 1)
            st = CUABI__CU_IN(caller, drv, cuMemsetD8Async, d, (unsigned char)value, count, raw);
        else if (width == 2)
            st = CUABI__CU_IN(caller, drv, cuMemsetD16Async, d, (unsigned short)value, count, raw);
        else
            st = CUABI__CU_IN(caller, drv, cuMemsetD32Async, d, value, count, raw);
        return cuabi__context_leave(&scope, drv, st);
    }
    cuabi_status st;
    if (width == 1)
        st = CUABI__CU_IN(caller, drv, cuMemsetD8, d, (unsigned char)value, count);
    else if (width == 2)
        st = CUABI__CU_IN(caller, drv, cuMemsetD16, d, (unsigned short)value, count);
    else
        st = CUABI__CU_IN(caller, drv, cuMemsetD32, d, value, count);
    if (st == CUABI_SUCCESS)
        st = driver_end(drv, s);
    return cuabi__context_leave(&scope, drv, st);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_memset(cuabi_buffer *buffer, size_t offset,
                                               uint32_t value, unsigned int width, size_t count,
                                               cuabi_stream *stream)
{
    cuabi__buffer *b;
    cuabi__stream *s;
    CUABI__GET(b, buffer, BUFFER);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__CHECK_ARG(width == 1 || width == 2 || width == 4,
                     "%s: width must be 1, 2 or 4 bytes, not %u", __func__, width);
    CUABI__CHECK_ARG(width == 4 || value < (UINT32_C(1) << (8 * width)),
                     "%s: value 0x%x does not fit in %u byte%s", __func__, value, width,
                     width == 1 ? "" : "s");
    CUABI__CHECK_ARG(offset % width == 0, "%s: offset %zu is not a multiple of the width %u",
                     __func__, offset, width);
    CUABI__CHECK_ARG(count <= SIZE_MAX / width, "%s: count %zu overflows", __func__, count);
    CUABI__TRY(cuabi__buffer_check_range(b, offset, count * width, "target", __func__));
    if (count == 0)
        return CUABI_SUCCESS;
    CUABI__TRY(capture_check(s, b, NULL, b->kind == CUABI_MEMORY_HOST, count, __func__));
    if (b->kind == CUABI_MEMORY_HOST) {
        host_fill((void *)(b->ptr + offset), value, width, count);
        return CUABI_SUCCESS;
    }
    return driver_fill(b->ptr + offset, value, width, count, b->device, s, __func__);
}
