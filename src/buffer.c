/* Buffers: memory from a resource or wrapped, with copies and memsets.
 *
 * The handle is unique and dies at cuabi_buffer_destroy(); the memory has
 * its own reference count (the handle's plus one per view) so views keep it
 * alive after the handle is gone. */
#include "graph.h"
#include "memory.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- buffer struct cache */

/* Allocating and freeing buffers in a loop is the common pattern, so each
 * thread keeps a few freed buffer structs (linked through `payload`) instead
 * of calling malloc/free for every buffer. A thread's structs are freed when
 * it ends. Sanitizer builds keep none, so that use-after-free of a buffer
 * struct is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#  define BUFFER_CACHE_CAP 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define BUFFER_CACHE_CAP 0
#  endif
#endif
#ifndef BUFFER_CACHE_CAP
#  define BUFFER_CACHE_CAP 32
#endif

typedef struct buffer_cache {
    cuabi__buffer *head;
    int count; /* signed: the cap is 0 in sanitizer builds */
    int state; /* 0 unknown, 1 usable, -1 not (no TSD key); in the struct: one
                  thread-local access per use (each is a call in a .so) */
} buffer_cache;
static _Thread_local buffer_cache bcache;
static pthread_key_t bcache_key;
static pthread_once_t bcache_once = PTHREAD_ONCE_INIT;
static bool bcache_key_ok;

static void bcache_flush_at_exit(void *p)
{
    buffer_cache *c = p;
    while (c->head) {
        cuabi__buffer *b = c->head;
        c->head = b->payload;
        free(b);
    }
    c->count = 0;
}

void cuabi__buffer_cache_flush(void)
{
    bcache_flush_at_exit(&bcache);
}

static void bcache_key_create(void)
{
    bcache_key_ok = pthread_key_create(&bcache_key, bcache_flush_at_exit) == 0;
}

/* A thread's first use: register its cache for the flush at thread exit. */
static __attribute__((noinline, cold)) void bcache_init(buffer_cache *c)
{
    pthread_once(&bcache_once, bcache_key_create);
    c->state = bcache_key_ok && pthread_setspecific(bcache_key, c) == 0 ? 1 : -1;
}

/* This thread's cache, or NULL when it could not be freed at thread exit. */
static inline buffer_cache *my_bcache(void)
{
    buffer_cache *c = &bcache;
    __asm__("" : "+r"(c)); /* one thread-local address computation (handle.c) */
    if (CUABI__UNLIKELY(c->state == 0))
        bcache_init(c);
    return c->state > 0 ? c : NULL;
}

static cuabi__buffer *buffer_struct_alloc(void)
{
    buffer_cache *c = BUFFER_CACHE_CAP ? my_bcache() : NULL;
    if (c && c->head) {
        cuabi__buffer *b = c->head;
        c->head = b->payload;
        c->count--;
        return b;
    }
    return cuabi__malloc(sizeof(cuabi__buffer));
}

static void buffer_struct_free(cuabi__buffer *b)
{
    buffer_cache *c = BUFFER_CACHE_CAP ? my_bcache() : NULL;
    if (c && c->count < BUFFER_CACHE_CAP) {
        b->payload = c->head;
        c->head = b;
        c->count++;
        return;
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
    if (b->res)
        cuabi__object_release(&b->res->base);
    else if (b->device)
        cuabi__object_release(&b->device->base);
    buffer_struct_free(b);
    return st;
}

cuabi_status cuabi__buffer_mem_release(cuabi__buffer *b, const char *caller)
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
static bool buffer_keep_stream(cuabi__buffer *b, cuabi__stream *s)
{
    if (b->res && cuabi__resource_keep_stream(b->res, s))
        return false;
    cuabi__object_retain(&s->base);
    return true;
}

/* Register a filled buffer and take its references; on failure the struct
 * is freed and nothing else is touched. */
static cuabi_status buffer_publish(cuabi_buffer **out, cuabi__buffer *b)
{
    atomic_store_explicit(&b->mem_refs, 1, memory_order_relaxed);
    cuabi_status st = cuabi__handle_register(&b->base, CUABI__T_BUFFER, buffer_destroy);
    if (st != CUABI_SUCCESS) {
        buffer_struct_free(b);
        return st;
    }
    /* A resource holds its device: one reference fewer per buffer. */
    if (b->res)
        cuabi__object_retain(&b->res->base);
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

CUABI_EXTERN(cuabi_status) cuabi_buffer_allocate(cuabi_buffer **out,
                                                 cuabi_memory_resource *resource, size_t size,
                                                 size_t alignment, cuabi_stream *stream)
{
    cuabi__memory_resource *r;
    cuabi__stream *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    cuabi__buffer *b = buffer_struct_alloc();
    if (!b)
        return CUABI_ERROR_OUT_OF_MEMORY;
    uintptr_t ptr;
    cuabi_status st = cuabi__resource_allocate(&ptr, r, size, &alignment, s, __func__);
    if (st != CUABI_SUCCESS) {
        buffer_struct_free(b);
        return st;
    }
    b->ptr = ptr;
    b->size = size;
    b->alignment = alignment;
    b->kind = r->kind;
    b->device = r->device;
    b->res = r;
    b->stream = r->stream_ordered ? s : NULL;
    b->release = NULL;
    b->payload = NULL;
    st = buffer_publish(out, b);
    if (st != CUABI_SUCCESS)
        (void)cuabi__resource_deallocate(r, ptr, size, alignment, s, __func__);
    else if (CUABI__UNLIKELY(cuabi__capturing()) && b->stream)
        cuabi__capture_note_alloc(b);
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
    cuabi__buffer *b = buffer_struct_alloc();
    if (!b)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memset(b, 0, sizeof *b);
    b->ptr = ptr;
    b->size = size;
    b->kind = kind;
    b->device = dev;
    b->release = release;
    b->payload = payload;
    return buffer_publish(out, b);
}

CUABI_EXTERN(cuabi_status) cuabi_buffer_free_async(cuabi_buffer *buffer, cuabi_stream *stream)
{
    cuabi__buffer *b;
    cuabi__stream *s;
    CUABI__GET(b, buffer, BUFFER);
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
     * reference: invalidate it, then drop its memory reference here so the
     * deallocation's status (when no view holds the memory) reaches the
     * caller. */
    cuabi__object_invalidate(&b->base);
    return cuabi__buffer_mem_release(b, __func__);
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

static cuabi_status check_range(const cuabi__buffer *b, size_t offset, size_t size,
                                const char *what, const char *caller)
{
    if (offset > b->size || size > b->size - offset)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: %zu bytes at offset %zu run past the end of the %s buffer "
                            "(%zu bytes)", caller, size, offset, what, b->size);
    return CUABI_SUCCESS;
}

/* Make a context current for a driver copy/memset and pick the stream:
 * the stream's device when one is given, else the first buffer device. */
static cuabi_status driver_begin(const cuabi__driver **drv, CUstream *raw, cuabi__stream *s,
                                 cuabi__device *a, cuabi__device *b)
{
    CUABI__TRY(cuabi__driver_get(drv));
    if (s) {
        *raw = s->cu_stream;
        return cuabi__stream_prepare(s, *drv);
    }
    *raw = NULL;
    return cuabi__device_activate(a ? a : b, *drv);
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
    CUABI__TRY(driver_begin(&drv, &raw, s, dst_dev, src_dev));
    if (s)
        return CUABI__CU(drv, cuMemcpyAsync, (CUdeviceptr)dst, (CUdeviceptr)src, size, raw);
    CUABI__TRY(CUABI__CU(drv, cuMemcpy, (CUdeviceptr)dst, (CUdeviceptr)src, size));
    return driver_end(drv, s);
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
    CUABI__TRY(check_range(d, dst_offset, size, "destination", __func__));
    CUABI__TRY(check_range(sb, src_offset, size, "source", __func__));
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
    CUABI__TRY(check_range(d, dst_offset, size, "destination", __func__));
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
    CUABI__GET(sb, src, BUFFER);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__TRY(check_range(sb, src_offset, size, "source", __func__));
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

static cuabi_status driver_fill(uintptr_t p, uint32_t value, unsigned width, size_t count,
                                cuabi__device *dev, cuabi__stream *s)
{
    const cuabi__driver *drv;
    CUstream raw;
    CUdeviceptr d = (CUdeviceptr)p;
    CUABI__TRY(driver_begin(&drv, &raw, s, dev, NULL));
    if (s) {
        if (width == 1)
            return CUABI__CU(drv, cuMemsetD8Async, d, (unsigned char)value, count, raw);
        if (width == 2)
            return CUABI__CU(drv, cuMemsetD16Async, d, (unsigned short)value, count, raw);
        return CUABI__CU(drv, cuMemsetD32Async, d, value, count, raw);
    }
    if (width == 1)
        CUABI__TRY(CUABI__CU(drv, cuMemsetD8, d, (unsigned char)value, count));
    else if (width == 2)
        CUABI__TRY(CUABI__CU(drv, cuMemsetD16, d, (unsigned short)value, count));
    else
        CUABI__TRY(CUABI__CU(drv, cuMemsetD32, d, value, count));
    return driver_end(drv, s);
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
    CUABI__TRY(check_range(b, offset, count * width, "target", __func__));
    if (count == 0)
        return CUABI_SUCCESS;
    CUABI__TRY(capture_check(s, b, NULL, b->kind == CUABI_MEMORY_HOST, count, __func__));
    if (b->kind == CUABI_MEMORY_HOST) {
        host_fill((void *)(b->ptr + offset), value, width, count);
        return CUABI_SUCCESS;
    }
    return driver_fill(b->ptr + offset, value, width, count, b->device, s);
}
