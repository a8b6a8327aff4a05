/* Memory resources: one allocate/deallocate interface over plain host
 * memory, device memory pools, pinned and managed memory, and user
 * callbacks. */
#include "platform/release.h"
#include "runtime/memory.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The driver returns at least 256-byte aligned memory for every CUDA
 * allocation; larger alignments would need over-allocation, which the
 * stream-ordered pools make hard to undo exactly, so they are refused. */
#define CUDA_ALIGNMENT CUABI__CUDA_ALIGNMENT
#define HOST_ALIGNMENT 64

static void resource_destroy(cuabi__object *o)
{
    cuabi__memory_resource *r = (cuabi__memory_resource *)o;
    const cuabi__driver *drv;
    if (r->before_destroy)
        r->before_destroy(r);
    if (r->owns_pool && cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuMemPoolDestroy)
        CUABI__CU_RELEASE(drv, cuMemPoolDestroy, r->pool);
    if (r->impl == CUABI__RES_USER && r->user.release_payload)
        r->user.release_payload(r->payload);
    for (int i = 0; i < CUABI__RESOURCE_STREAMS; i++) {
        cuabi__stream *s = atomic_load_explicit(&r->streams[i], memory_order_acquire);
        if (s)
            cuabi__object_release(&s->base);
    }
    if (r->device)
        cuabi__object_release(&r->device->base);
    cuabi__free(r);
}

/* Register a filled resource; it retains `dev` on success. On failure the
 * struct is freed and nothing else is touched. */
static cuabi_status resource_publish(cuabi_memory_resource **out, cuabi__memory_resource *r)
{
    cuabi_status st = cuabi__handle_register(&r->base, CUABI__T_MEMORY_RESOURCE, resource_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(r);
        return st;
    }
    if (r->device)
        cuabi__object_retain(&r->device->base);
    *out = CUABI__HANDLE(r, cuabi_memory_resource);
    return CUABI_SUCCESS;
}

static cuabi__memory_resource *resource_alloc(cuabi__resource_impl impl, cuabi_memory_kind kind,
                                              cuabi__device *dev)
{
    cuabi__memory_resource *r = cuabi__calloc(1, sizeof *r);
    if (r) {
        r->impl = impl;
        r->kind = kind;
        r->device = dev;
        atomic_init(&r->leasable, true);
    }
    return r;
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_host(cuabi_memory_resource **out)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi__memory_resource *r = resource_alloc(CUABI__RES_HOST, CUABI_MEMORY_HOST, NULL);
    return r ? resource_publish(out, r) : CUABI_ERROR_OUT_OF_MEMORY;
}

/* Every buffer must keep its stream alive until its memory is freed on it,
 * but a reference per buffer costs two atomic updates per allocate + free
 * pair. Most programs order
 * a resource's memory on a few long-lived streams, so the resource keeps
 * the first CUABI__RESOURCE_STREAMS of them until it is destroyed, and
 * buffers on those share that reference (a buffer keeps its resource).
 * Slots go from NULL to a stream once and are read without a lock. */
bool cuabi__resource_keep_stream(cuabi__memory_resource *r, cuabi__stream *s)
{
    for (int i = 0; i < CUABI__RESOURCE_STREAMS; i++) {
        cuabi__stream *held = atomic_load_explicit(&r->streams[i], memory_order_acquire);
        if (held == s)
            return true;
        if (held)
            continue;
        cuabi__object_retain(&s->base);
        cuabi__stream *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(&r->streams[i], &expected, s,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            return true;
        cuabi__object_release(&s->base); /* another thread filled the slot */
        if (expected == s)
            return true;
    }
    return false;
}

cuabi_status cuabi__gpu_resource_begin(cuabi__context_scope *scope, cuabi_memory_resource **out,
                                       cuabi_device *device, cuabi__device **dev,
                                       const cuabi__driver **drv, const char *caller)
{
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    *out = NULL;
    void *obj;
    CUABI__TRY(cuabi__handle_get(device, CUABI__T_DEVICE, &obj, caller));
    *dev = obj;
    CUABI__TRY(cuabi__driver_get(drv));
    return cuabi__device_enter(scope, *dev, *drv);
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_device_default(cuabi_memory_resource **out,
                                                                cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__gpu_resource_begin(&scope, out, device, &dev, &drv, __func__));
    CUmemoryPool pool;
    cuabi_status st = CUABI__CU(drv, cuDeviceGetDefaultMemPool, &pool, dev->cu_device);
    if (st == CUABI_SUCCESS) {
        cuabi__memory_resource *r = resource_alloc(CUABI__RES_POOL, CUABI_MEMORY_DEVICE, dev);
        if (r) {
            r->drv = drv;
            r->pool = pool;
            r->stream_ordered = true;
            st = resource_publish(out, r);
        } else {
            st = CUABI_ERROR_OUT_OF_MEMORY;
        }
    }
    return CUABI__CONTEXT_END_OUT(&scope, st, out, MEMORY_RESOURCE, __func__);
}

static bool location_is_host(cuabi_location_type t)
{
    return t == CUABI_LOCATION_HOST || t == CUABI_LOCATION_HOST_NUMA;
}

cuabi_status cuabi__pool_location_check(cuabi_location_type type, int id, bool ipc,
                                        const char *caller)
{
    if (type != CUABI_LOCATION_DEVICE && type != CUABI_LOCATION_HOST &&
        type != CUABI_LOCATION_HOST_NUMA)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: a pool's location_type is CUABI_LOCATION_DEVICE, _HOST or "
                            "_HOST_NUMA, not %d", caller, (int)type);
    if (type == CUABI_LOCATION_HOST_NUMA && id < 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: location_id %d is not a NUMA node (0 or more)", caller, id);
    if (ipc && type == CUABI_LOCATION_HOST)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: an IPC pool in host memory needs a NUMA node: the driver makes "
                            "no IPC-capable pool at CU_MEM_LOCATION_TYPE_HOST (its handle types "
                            "must be 0); use CUABI_LOCATION_HOST_NUMA with the node (the "
                            "device's nearest is its CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)", caller);
    return CUABI_SUCCESS;
}

void cuabi__pool_location_text(char *out, size_t size, cuabi_location_type type, int id)
{
    if (type == CUABI_LOCATION_HOST_NUMA)
        snprintf(out, size, "host NUMA node %d", id);
    else
        snprintf(out, size, "host");
}

/* The driver's words for a failed call, then what was being done. */
static cuabi_status explain(CUresult res, const char *entry, const char *caller, const char *what)
{
    cuabi_status st = cuabi__cu_check(res, entry, caller);
    char driver_said[512];
    snprintf(driver_said, sizeof driver_said, "%s", cuabi_last_error()->message);
    cuabi__error(st, "%s (%s)", driver_said, what);
    cuabi__error_set_cu((int)res);
    return st;
}

cuabi_status cuabi__pool_grant_device_access(const cuabi__driver *drv, CUmemoryPool pool,
                                             const cuabi__device *dev, const char *where,
                                             const char *caller)
{
    if (!drv->cuMemPoolGetAccess)
        return cuabi__missing_entry("cuMemPoolGetAccess", caller);
    if (!drv->cuMemPoolSetAccess)
        return cuabi__missing_entry("cuMemPoolSetAccess", caller);
    CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev->cu_device };
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    const char *entry = "cuMemPoolGetAccess";
    CUresult res = CUABI__CU_RAW(drv, cuMemPoolGetAccess, &flags, pool, &loc);
    if (res == CUDA_SUCCESS) {
        if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUABI_SUCCESS;
        CUmemAccessDesc want = { .location = loc, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        entry = "cuMemPoolSetAccess";
        res = CUABI__CU_RAW(drv, cuMemPoolSetAccess, pool, &want, 1);
        if (res == CUDA_SUCCESS)
            return CUABI_SUCCESS;
    }
    char what[160];
    snprintf(what, sizeof what, "giving device %d read-write access to the %s pool; without "
             "it the device cannot use the pool's memory", dev->ordinal, where);
    return explain(res, entry, caller, what);
}

cuabi_status cuabi__memory_pool_make(CUmemoryPool *out, cuabi__device *dev,
                                     const cuabi__driver *drv, CUmemAllocationHandleType types,
                                     cuabi_location_type loc_type, int loc_id, size_t max_size,
                                     uint64_t release_threshold, const char *caller)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = types;
    bool host = location_is_host(loc_type);
    props.location.type = host ? (CUmemLocationType)loc_type : CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = !host ? dev->cu_device : loc_type == CUABI_LOCATION_HOST_NUMA ? loc_id : 0;
    props.maxSize = max_size;
    CUmemoryPool pool;
    char where[48];
    cuabi__pool_location_text(where, sizeof where, loc_type, loc_id);
    if (!drv->cuMemPoolCreate)
        return cuabi__missing_entry("cuMemPoolCreate", caller);
    CUresult res = CUABI__CU_RAW(drv, cuMemPoolCreate, &pool, &props);
    if (res != CUDA_SUCCESS && !host)
        return cuabi__cu_check(res, "cuMemPoolCreate", caller);
    if (res != CUDA_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "a pool in %s memory needs a CUDA 13 driver and a device "
                 "with CU_DEVICE_ATTRIBUTE_%s_MEMORY_POOLS_SUPPORTED%s", where,
                 loc_type == CUABI_LOCATION_HOST ? "HOST" : "HOST_NUMA",
                 types != CU_MEM_HANDLE_TYPE_NONE ? "; an IPC pool there, a driver that shares "
                                                    "host pools as file descriptors" : "");
        return explain(res, "cuMemPoolCreate", caller, what);
    }
    cuuint64_t threshold = release_threshold;
    cuabi_status st = CUABI__CU_IN(caller, drv, cuMemPoolSetAttribute, pool,
                                   CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
    if (st == CUABI_SUCCESS && host)
        st = cuabi__pool_grant_device_access(drv, pool, dev, where, caller);
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuMemPoolDestroy, pool);
        return st;
    }
    *out = pool;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__resource_pool_publish(cuabi_memory_resource **out,
                                          cuabi__memory_resource **res, cuabi__device *dev,
                                          const cuabi__driver *drv, CUmemoryPool pool,
                                          cuabi__resource_impl impl, bool owns_pool,
                                          uint64_t ipc_pool_id, cuabi_location_type loc_type,
                                          int loc_id)
{
    bool host = location_is_host(loc_type);
    cuabi__memory_resource *r = resource_alloc(impl, host ? CUABI_MEMORY_PINNED
                                                          : CUABI_MEMORY_DEVICE, dev);
    if (!r)
        return CUABI_ERROR_OUT_OF_MEMORY;
    r->drv = drv;
    r->pool = pool;
    r->owns_pool = owns_pool;
    r->stream_ordered = impl == CUABI__RES_POOL;
    r->ipc_pool_id = ipc_pool_id;
    r->location_type = loc_type;
    r->location_id = loc_type == CUABI_LOCATION_HOST ? 0 : loc_id;
    if (res)
        *res = r;
    return resource_publish(out, r);
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_pool_create(
    cuabi_memory_resource **out, cuabi_device *device, const cuabi_memory_pool_options *options)
{
    static const cuabi_memory_pool_options defaults = CUABI_MEMORY_POOL_OPTIONS_INIT;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_OPTS(options, "cuabi_memory_pool_options", CUABI_MEMORY_POOL_OPTIONS_VERSION,
                      true);
    if (!options)
        options = &defaults;
    /* Older callers pass a shorter struct: max_size only from version 2,
     * the location from version 3. */
    uint64_t max_size = options->version >= 2 ? options->max_size : 0;
    cuabi_location_type loc_type = options->version >= 3 ? options->location_type
                                                         : CUABI_LOCATION_DEVICE;
    int loc_id = options->version >= 3 ? options->location_id : 0;
    CUABI__CHECK_ARG(max_size <= SIZE_MAX, "%s: max_size %llu does not fit a size_t", __func__,
                     (unsigned long long)max_size);
    CUABI__TRY(cuabi__pool_location_check(loc_type, loc_id, false, __func__));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__gpu_resource_begin(&scope, out, device, &dev, &drv, __func__));
    CUmemoryPool pool;
    cuabi_status st = cuabi__memory_pool_make(&pool, dev, drv, CU_MEM_HANDLE_TYPE_NONE, loc_type,
                                              loc_id, (size_t)max_size,
                                              options->release_threshold, __func__);
    if (st == CUABI_SUCCESS) {
        cuabi__memory_resource *r;
        bool host = location_is_host(loc_type);
        st = cuabi__resource_pool_publish(out, &r, dev, drv, pool, CUABI__RES_POOL, true, 0,
                                          host ? loc_type : CUABI_LOCATION_NONE, loc_id);
        if (st != CUABI_SUCCESS)
            CUABI__CU_RELEASE(drv, cuMemPoolDestroy, pool);
        else
            r->max_size = max_size;
    }
    return CUABI__CONTEXT_END_OUT(&scope, st, out, MEMORY_RESOURCE, __func__);
}

cuabi_status cuabi__resource_simple(cuabi_memory_resource **out, cuabi_device *device,
                                    cuabi__resource_impl impl, cuabi_memory_kind kind,
                                    const char *caller)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__gpu_resource_begin(&scope, out, device, &dev, &drv, caller));
    cuabi__memory_resource *r = resource_alloc(impl, kind, dev);
    cuabi_status st = r ? (r->drv = drv, resource_publish(out, r)) : CUABI_ERROR_OUT_OF_MEMORY;
    return CUABI__CONTEXT_END_OUT(&scope, st, out, MEMORY_RESOURCE, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_pinned(cuabi_memory_resource **out,
                                                        cuabi_device *device)
{
    return cuabi__resource_simple(out, device, CUABI__RES_PINNED, CUABI_MEMORY_PINNED, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_managed(cuabi_memory_resource **out,
                                                         cuabi_device *device)
{
    return cuabi__resource_simple(out, device, CUABI__RES_MANAGED, CUABI_MEMORY_MANAGED, __func__);
}

static bool kind_valid(cuabi_memory_kind k)
{
    return k >= CUABI_MEMORY_HOST && k <= CUABI_MEMORY_MANAGED;
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_user(cuabi_memory_resource **out,
                                                      cuabi_device *device,
                                                      const cuabi_memory_resource_callbacks *callbacks,
                                                      void *payload)
{
    cuabi__device *dev = NULL;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_OPTS(callbacks, "cuabi_memory_resource_callbacks",
                      CUABI_MEMORY_RESOURCE_CALLBACKS_VERSION, false);
    CUABI__CHECK_ARG(callbacks->allocate && callbacks->deallocate,
                     "%s: the allocate and deallocate callbacks are required", __func__);
    CUABI__CHECK_ARG(kind_valid(callbacks->kind), "%s: %d is not a cuabi_memory_kind", __func__,
                     (int)callbacks->kind);
    if (device)
        CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(dev || callbacks->kind == CUABI_MEMORY_HOST,
                     "%s: memory of kind %d needs a device (only CUABI_MEMORY_HOST may pass NULL)",
                     __func__, (int)callbacks->kind);
    cuabi__memory_resource *r = resource_alloc(CUABI__RES_USER, callbacks->kind, dev);
    if (!r)
        return CUABI_ERROR_OUT_OF_MEMORY;
    r->user = *callbacks;
    r->payload = payload;
    r->stream_ordered = callbacks->stream_ordered != 0;
    return resource_publish(out, r);
}

/* --------------------------------------------------- allocate / release */

static cuabi_status check_alignment(size_t *alignment, const cuabi__memory_resource *r,
                                    const char *caller)
{
    size_t a = *alignment;
    if (a & (a - 1))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: alignment %zu is not a power of two", caller, a);
    bool host = r->kind == CUABI_MEMORY_HOST;
    if (a == 0)
        a = host ? HOST_ALIGNMENT : CUDA_ALIGNMENT;
    if (r->impl != CUABI__RES_HOST && r->impl != CUABI__RES_USER && a > CUDA_ALIGNMENT)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: alignment %zu is larger than the %d bytes CUDA allocations "
                            "guarantee; allocate more and align inside the buffer",
                            caller, a, CUDA_ALIGNMENT);
    *alignment = a;
    return CUABI_SUCCESS;
}

/* The raw stream to order on, with the right context current in *scope:
 * a pool's stream-ordered call on a created or wrapped stream works in the
 * stream's context (none needed); a default stream, a stream-less call and
 * the synchronous allocators (cuMemAllocHost, cuMemAllocManaged, cuMemAlloc
 * and their frees, which ignore the stream) act on the current context:
 * the resource's device's. They used to find it current only because an
 * earlier cuabi call had left it so. */
static cuabi_status enter_stream(cuabi__context_scope *scope, CUstream *raw,
                                 cuabi__memory_resource *r, cuabi__stream *s,
                                 const cuabi__driver *drv)
{
    *raw = s ? s->cu_stream : NULL;
    if (s && r->impl == CUABI__RES_POOL)
        return cuabi__stream_enter(scope, s, drv);
    return cuabi__device_enter(scope, r->device, drv);
}

static cuabi_status host_allocate(uintptr_t *out, size_t size, size_t alignment,
                                  const char *caller)
{
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    void *p = NULL;
    if (posix_memalign(&p, alignment, size) != 0)
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY,
                            "%s: out of host memory allocating %zu bytes", caller, size);
    *out = (uintptr_t)p;
    return CUABI_SUCCESS;
}

static cuabi_status resource_allocate_slow(uintptr_t *out, cuabi__memory_resource *r,
                                           size_t size, size_t alignment, cuabi__stream *s,
                                           const char *caller);
static cuabi_status driver_allocate(uintptr_t *out, cuabi__memory_resource *r, size_t size,
                                    CUstream raw, const char *caller);

/* The driver cannot allocate from an imported pool, and its memory is only
 * what the exporter shares: buffers come from cuabi_ipc_pool_buffer_import. */
static cuabi_status mapped_refuses(const char *caller)
{
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                        "%s: the resource is a pool imported from another process "
                        "(cuabi_ipc_pool_import): it cannot allocate or free memory, only "
                        "receive the exporter's buffers (cuabi_ipc_pool_buffer_import)", caller);
}

cuabi_status cuabi__resource_allocate_general(uintptr_t *out, cuabi__memory_resource *r,
                                              size_t size, size_t *alignment_io,
                                              cuabi__stream *s, const char *caller)
{
    *out = 0;
    CUABI__TRY(check_alignment(alignment_io, r, caller));
    if (size == 0)
        return CUABI_SUCCESS;
    return resource_allocate_slow(out, r, size, *alignment_io, s, caller);
}

/* Every resource and stream (memory.h inlines a pool on a created stream
 * with the default alignment). */
static cuabi_status resource_allocate_slow(uintptr_t *out, cuabi__memory_resource *r,
                                           size_t size, size_t alignment, cuabi__stream *s,
                                           const char *caller)
{
    if (r->impl == CUABI__RES_HOST)
        return host_allocate(out, size, alignment, caller);
    if (r->impl == CUABI__RES_USER) {
        uintptr_t p = 0;
        int rc = r->user.allocate(&p, size, alignment, s ? (uintptr_t)s->cu_stream : 0, r->payload);
        if (rc != 0 || (p == 0))
            return cuabi__error(CUABI_ERROR_CALLBACK,
                                "%s: the user resource's allocate callback failed (returned %d%s) "
                                "for %zu bytes", caller, rc, rc ? "" : " with address 0", size);
        *out = p;
        return CUABI_SUCCESS;
    }
    if (r->impl == CUABI__RES_IPC_MAPPED)
        return mapped_refuses(caller);
    if (r->impl == CUABI__RES_VMM)     /* synchronous: the stream plays no part */
        return r->vmm_allocate(out, r, size, caller);
    const cuabi__driver *drv = r->drv;
    CUstream raw;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(enter_stream(&scope, &raw, r, s, drv));
    cuabi_status st = driver_allocate(out, r, size, raw, caller);
    if (cuabi__context_leave(&scope, drv, st) == CUABI_SUCCESS || st != CUABI_SUCCESS)
        return st;
    /* The caller's context could not be given back: the call fails, so the
     * memory goes back. Not freed before the leave (whose failure cannot be
     * known before it is tried), so the free makes its context current
     * again in a scope of its own, as any deallocation does: the device's,
     * or a pool's memory on the stream it was allocated on (ordered after
     * the allocation). */
    (void)cuabi__resource_deallocate_general(r, *out, size, alignment, s, caller);
    *out = 0;
    return cuabi__context_made_lost(caller);
}

/* The driver's allocation, its context current. */
static cuabi_status driver_allocate(uintptr_t *out, cuabi__memory_resource *r, size_t size,
                                    CUstream raw, const char *caller)
{
    const cuabi__driver *drv = r->drv;
    CUdeviceptr d = 0;
    void *h = NULL;
    switch (r->impl) {
    case CUABI__RES_POOL:
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemAllocFromPoolAsync, &d, size, r->pool, raw));
        break;
    case CUABI__RES_PINNED:
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemAllocHost, &h, size));
        d = (CUdeviceptr)(uintptr_t)h;
        break;
    case CUABI__RES_MANAGED:
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemAllocManaged, &d, size,
                                r->managed_attach ? r->managed_attach : CU_MEM_ATTACH_GLOBAL));
        if (r->location_type != CUABI_LOCATION_NONE) {
            /* cuabi_managed_resource_create's preferred location */
            CUmemLocation loc = { .type = (CUmemLocationType)r->location_type,
                                  .id = r->location_id };
            cuabi_status st = CUABI__CU_IN(caller, drv, cuMemAdvise, d, size,
                                           CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc);
            if (st != CUABI_SUCCESS) {
                (void)CUABI__CU_RELEASE(drv, cuMemFree, d);
                return st;
            }
        }
        break;
    case CUABI__RES_IPC: {
        /* A whole number of 2 MiB pages: the driver suballocates smaller
         * cuMemAlloc blocks from shared pages, and an IPC handle names the
         * page's allocation, so a freed small buffer stayed importable (a
         * stale descriptor mapped; GPU run 2026-11-26). Its own allocation
         * is gone with its free, and the import is refused. */
        const size_t page = (size_t)2 << 20;
        if (size > SIZE_MAX - page)
            return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: %zu bytes is too large", caller,
                                size);
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemAlloc, &d, (size + page - 1) / page * page));
        break;
    }
    default:
        return cuabi__error(CUABI_ERROR_INTERNAL, "%s: bad resource kind", caller);
    }
    *out = (uintptr_t)d;
    return CUABI_SUCCESS;
}

/* ---- pool frees on the legacy default stream during a capture
 *
 * Work on the legacy stream depends on every blocking stream of its
 * context: while one of them is captured, a free queued there conflicts
 * with the capture whatever the thread's capture mode (the driver refuses
 * it and invalidates the capture). Such a free -- a buffer without a stream
 * released by a finalizer inside someone's capture -- waits here instead,
 * with its resource retained, until a later pool free, the end of a cuabi
 * capture or cuabi_memory_resource_trim finds no blocking capture. The
 * driver's test does not disturb a capture: cuStreamIsCapturing on the
 * legacy stream answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and "the
 * blocking stream capture is not invalidated". */

typedef struct legacy_free {
    cuabi__memory_resource *res;   /* retained */
    uintptr_t ptr;
    struct legacy_free *next;
} legacy_free;

static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;
static legacy_free *legacy_frees;          /* guarded by legacy_lock */
_Atomic size_t cuabi__memory_deferred_frees;

/* Whether a blocking stream of the current context is being captured. */
static bool legacy_conflicts(const cuabi__driver *drv)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return drv->cuStreamIsCapturing &&
           drv->cuStreamIsCapturing(CU_STREAM_LEGACY, &st) == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

static bool is_legacy(CUstream raw)
{
    return !raw || raw == CU_STREAM_LEGACY;
}

/* Keep the free for later; false when there is no memory to remember it. */
static bool legacy_defer(cuabi__memory_resource *r, uintptr_t ptr)
{
    legacy_free *f = cuabi__malloc(sizeof *f);
    if (!f)
        return false;
    cuabi__object_retain(&r->base);
    f->res = r;
    f->ptr = ptr;
    pthread_mutex_lock(&legacy_lock);
    f->next = legacy_frees;
    legacy_frees = f;
    atomic_fetch_add_explicit(&cuabi__memory_deferred_frees, 1, memory_order_relaxed);
    pthread_mutex_unlock(&legacy_lock);
    return true;
}

void cuabi__memory_flush_deferred_slow(void)
{
    pthread_mutex_lock(&legacy_lock);
    legacy_free *list = legacy_frees;
    legacy_frees = NULL;
    pthread_mutex_unlock(&legacy_lock);
    legacy_free *keep = NULL;
    /* Each free in its resource's context; the caller's comes back after. */
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    while (list) {
        legacy_free *f = list;
        list = f->next;
        cuabi__memory_resource *r = f->res;
        if (cuabi__context_save(&scope, r->drv) != CUABI_SUCCESS ||
            cuabi__device_enter(&scope, r->device, r->drv) != CUABI_SUCCESS ||
            legacy_conflicts(r->drv)) {
            f->next = keep;                 /* still captured: later */
            keep = f;
            continue;
        }
        (void)CUABI__CU_RELEASE(r->drv, cuMemFreeAsync, (CUdeviceptr)f->ptr, CU_STREAM_LEGACY);
        atomic_fetch_sub_explicit(&cuabi__memory_deferred_frees, 1, memory_order_relaxed);
        cuabi__free(f);
        cuabi__object_release(&r->base);
    }
    if (keep) {
        pthread_mutex_lock(&legacy_lock);
        legacy_free **tail = &keep;
        while (*tail)
            tail = &(*tail)->next;
        *tail = legacy_frees;
        legacy_frees = keep;
        pthread_mutex_unlock(&legacy_lock);
    }
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
}

/* A leaf (nothing releases inside it): the mode exchange is made here,
 * without release.c's nesting count, whose thread-local state costs as much
 * again. Exchanging RELAXED for RELAXED inside an outer release is harmless. */
cuabi_status cuabi__pool_free_relaxed(cuabi__memory_resource *res, uintptr_t ptr,
                                      cuabi__stream *stream, const char *caller)
{
    const cuabi__driver *drv = res->drv;
    if (!drv->cuThreadExchangeStreamCaptureMode)
        return CUABI__CU_IN(caller, drv, cuMemFreeAsync, (CUdeviceptr)ptr, stream->cu_stream);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    bool exchanged = drv->cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
    CUresult r = CUABI__CU_RAW(drv, cuMemFreeAsync, (CUdeviceptr)ptr, stream->cu_stream);
    if (exchanged)
        drv->cuThreadExchangeStreamCaptureMode(&mode);
    return cuabi__cu_result(r, "cuMemFreeAsync", caller);
}

static cuabi_status driver_free(cuabi__memory_resource *r, uintptr_t ptr, CUstream raw,
                                const char *caller);

/* Everything but a pool on a created stream (memory.h inlines that). */
cuabi_status cuabi__resource_deallocate_general(cuabi__memory_resource *r, uintptr_t ptr,
                                                size_t size, size_t alignment,
                                                cuabi__stream *s, const char *caller)
{
    if (ptr == 0)
        return CUABI_SUCCESS;
    if (r->impl == CUABI__RES_HOST) {
        free((void *)ptr);
        return CUABI_SUCCESS;
    }
    if (r->impl == CUABI__RES_USER) {
        int rc = r->user.deallocate(ptr, size, alignment, s ? (uintptr_t)s->cu_stream : 0,
                                    r->payload);
        return rc == 0 ? CUABI_SUCCESS
                       : cuabi__error(CUABI_ERROR_CALLBACK,
                                      "%s: the user resource's deallocate callback failed "
                                      "(returned %d)", caller, rc);
    }
    if (r->impl == CUABI__RES_IPC_MAPPED)
        return mapped_refuses(caller);
    if (r->impl == CUABI__RES_VMM)
        return r->vmm_free(r, ptr, caller);
    const cuabi__driver *drv = r->drv;
    CUstream raw;
    /* A release: freed even when the switch is refused (a skipped free
     * would lose the memory; the driver says whether the free went). */
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (enter_stream(&scope, &raw, r, s, drv) != CUABI_SUCCESS)
        cuabi_error_clear();   /* the free's own result is the answer */
    return cuabi__context_leave(&scope, drv, driver_free(r, ptr, raw, caller));
}

/* The driver's free, its context current. */
static cuabi_status driver_free(cuabi__memory_resource *r, uintptr_t ptr, CUstream raw,
                                const char *caller)
{
    const cuabi__driver *drv = r->drv;
    switch (r->impl) {
    case CUABI__RES_POOL:
        if (is_legacy(raw)) {
            if (legacy_conflicts(drv) && legacy_defer(r, ptr))
                return CUABI_SUCCESS;
            cuabi__memory_flush_deferred();
        }
        return CUABI__CU_RELEASE_IN(caller, drv, cuMemFreeAsync, (CUdeviceptr)ptr, raw);
    case CUABI__RES_PINNED:
        return CUABI__CU_RELEASE_IN(caller, drv, cuMemFreeHost, (void *)ptr);
    case CUABI__RES_MANAGED:
    case CUABI__RES_IPC:
        return CUABI__CU_RELEASE_IN(caller, drv, cuMemFree, (CUdeviceptr)ptr);
    default:
        return cuabi__error(CUABI_ERROR_INTERNAL, "%s: bad resource kind", caller);
    }
}

/* Resolve the optional stream argument of a public call. */
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

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_allocate(uintptr_t *out,
                                                          cuabi_memory_resource *resource,
                                                          size_t size, size_t alignment,
                                                          cuabi_stream *stream)
{
    cuabi__memory_resource *r;
    cuabi__stream *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    return cuabi__resource_allocate(out, r, size, &alignment, s, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_deallocate(cuabi_memory_resource *resource,
                                                            uintptr_t ptr, size_t size,
                                                            size_t alignment, cuabi_stream *stream)
{
    cuabi__memory_resource *r;
    cuabi__stream *s;
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    CUABI__TRY(optional_stream(&s, stream, __func__));
    CUABI__TRY(check_alignment(&alignment, r, __func__));
    return cuabi__resource_deallocate(r, ptr, size, alignment, s, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_kind(cuabi_memory_kind *out,
                                                      cuabi_memory_resource *resource)
{
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    *out = r->kind;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_device(cuabi_device **out,
                                                        cuabi_memory_resource *resource)
{
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    if (r->device)
        *out = CUABI__HANDLE(r->device, cuabi_device);
    return CUABI_SUCCESS;
}

static cuabi_status pool_of(cuabi__memory_resource **r, cuabi_memory_resource *resource,
                            const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(resource, CUABI__T_MEMORY_RESOURCE, &obj, caller));
    *r = obj;
    if ((*r)->impl != CUABI__RES_POOL)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the resource is not a device memory pool (kind %d)", caller,
                            (int)(*r)->kind);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_pool(uintptr_t *out,
                                                      cuabi_memory_resource *resource)
{
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__TRY(pool_of(&r, resource, __func__));
    *out = (uintptr_t)r->pool;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_memory_resource_trim(cuabi_memory_resource *resource,
                                                      size_t keep_bytes)
{
    cuabi__memory_resource *r;
    const cuabi__driver *drv;
    CUABI__TRY(pool_of(&r, resource, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__memory_flush_deferred();
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__device_enter(&scope, r->device, drv));
    return cuabi__context_leave(&scope, drv, CUABI__CU(drv, cuMemPoolTrimTo, r->pool, keep_bytes));
}
