/* Internal declarations of memory resources, buffers and views. */
#ifndef CUABI_MEMORY_INTERNAL_H
#define CUABI_MEMORY_INTERNAL_H

#include "runtime/stream.h"
#include "platform/release.h"

/* ------------------------------------------------------------ resources */

typedef enum cuabi__resource_impl {
    CUABI__RES_HOST = 1,     /* aligned malloc */
    CUABI__RES_POOL,         /* cuMemAllocFromPoolAsync / cuMemFreeAsync */
    CUABI__RES_PINNED,       /* cuMemAllocHost / cuMemFreeHost */
    CUABI__RES_MANAGED,      /* cuMemAllocManaged / cuMemFree */
    CUABI__RES_USER,         /* callbacks */
    CUABI__RES_IPC,          /* cuMemAlloc / cuMemFree: legacy IPC can export it */
    CUABI__RES_IPC_MAPPED,   /* a pool imported from another process (ipc_pool.c):
                                receives buffers, allocates nothing */
    CUABI__RES_VMM,          /* virtual memory (vmm.c): allocation and free through
                                the resource's hooks (vmm_allocate / vmm_free) */
} cuabi__resource_impl;

/* How many streams a stream-ordered resource keeps for its buffers. */
#define CUABI__RESOURCE_STREAMS 4

typedef struct cuabi__memory_resource {
    cuabi__object base;
    cuabi__resource_impl impl;
    cuabi_memory_kind kind;
    bool stream_ordered;           /* buffers remember their stream */
    /* Threads may keep spare references for its buffers (park.h); false
     * from the first release by a caller on. */
    _Atomic bool leasable;
    /* The first streams the resource's buffers were ordered on, retained
     * until the resource is destroyed; filled once each, never cleared.
     * A buffer on one of them shares this reference instead of taking its
     * own (see cuabi__resource_keep_stream). */
    _Atomic(cuabi__stream *) streams[CUABI__RESOURCE_STREAMS];
    cuabi__device *device;         /* retained; NULL for host without device */
    /* GPU resources: the driver table, loaded before they were made (saves
     * a loader check per allocation and deallocation). */
    const cuabi__driver *drv;
    CUmemoryPool pool;             /* CUABI__RES_POOL */
    bool owns_pool;                /* created here: destroy with the resource */
    /* IPC pools (ipc_pool.c): the random id every descriptor of the pool
     * carries (0: not an IPC pool) and the device UUID, read once. */
    uint64_t ipc_pool_id;
    uint8_t ipc_uuid[16];
    /* Set by the module that made the resource when its destruction must
     * also undo something of that module's (ipc_pool.c: forget a mapped
     * pool): called first by the destructor. Resources keep no pointer
     * upward otherwise, so memory.c stays below the modules built on it. */
    void (*before_destroy)(struct cuabi__memory_resource *self);
    cuabi_memory_resource_callbacks user;
    void *payload;
    /* Pools: the maximum size asked for at creation (0: the driver's
     * default; unknown for pools cuabi did not create). */
    uint64_t max_size;
    /* Pools of a location (pool.c): where (NONE: the resource's device).
     * CUABI__RES_MANAGED: the preferred location advised for every
     * allocation (NONE: none), and the attach flag (0: global). */
    cuabi_location_type location_type;
    int location_id;
    unsigned managed_attach;
    /* CUABI__RES_VMM: a buffer's size is rounded up to this many bytes
     * (cuabi_buffer_allocate reports the rounded size); 0 elsewhere. */
    size_t granularity;
    /* CUABI__RES_VMM: the module's allocate and free (memory.c calls them
     * from its general path only; never NULL for that kind) and its state,
     * which the module's before_destroy frees. */
    cuabi_status (*vmm_allocate)(uintptr_t *out, struct cuabi__memory_resource *self,
                                 size_t size, const char *caller);
    cuabi_status (*vmm_free)(struct cuabi__memory_resource *self, uintptr_t ptr,
                             const char *caller);
    void *module_state;
} cuabi__memory_resource;

/* Every CUDA allocation is at least this aligned (and more is refused). */
#define CUABI__CUDA_ALIGNMENT 256

/* A pool resource ordered on a created stream (which carries its context):
 * the hot case of cuabi_buffer_allocate / cuabi_buffer_free_async. */
static inline bool cuabi__pool_fast(const cuabi__memory_resource *r, const cuabi__stream *s)
{
    return r->impl == CUABI__RES_POOL && s && (uintptr_t)s->cu_stream > 2;
}

/* The hot pool free in the default release mode: cuMemFreeAsync on a
 * created stream, in RELAXED capture mode (memory.c). */
cuabi_status cuabi__pool_free_relaxed(cuabi__memory_resource *res, uintptr_t ptr,
                                      cuabi__stream *stream, const char *caller);

/* Every case of the two below (memory.c). */
cuabi_status cuabi__resource_allocate_general(uintptr_t *out, cuabi__memory_resource *res,
                                              size_t size, size_t *alignment,
                                              cuabi__stream *stream, const char *caller);
cuabi_status cuabi__resource_deallocate_general(cuabi__memory_resource *res, uintptr_t ptr,
                                                size_t size, size_t alignment,
                                                cuabi__stream *stream, const char *caller);

/* Allocate / deallocate through a resource. `stream` may be NULL (default
 * stream). Size 0 gives 0 and deallocating 0 does nothing. `caller` names
 * the public function in error messages. *alignment (0 = default) is
 * checked and replaced by the alignment used: pass that to deallocate.
 * Inline so that the hot case (a pool on a created stream, the default
 * alignment) is the driver call and a few compares in its caller. */
static inline cuabi_status cuabi__resource_allocate(uintptr_t *out, cuabi__memory_resource *res,
                                                    size_t size, size_t *alignment,
                                                    cuabi__stream *stream, const char *caller)
{
    if (CUABI__LIKELY(*alignment == 0 && size != 0 && cuabi__pool_fast(res, stream))) {
        CUdeviceptr d = 0;
        cuabi_status st = CUABI__CU_IN(caller, res->drv, cuMemAllocFromPoolAsync, &d, size,
                                       res->pool, stream->cu_stream);
        *out = (uintptr_t)d;
        *alignment = CUABI__CUDA_ALIGNMENT;
        return st;
    }
    return cuabi__resource_allocate_general(out, res, size, alignment, stream, caller);
}

static inline cuabi_status cuabi__resource_deallocate(cuabi__memory_resource *res, uintptr_t ptr,
                                                      size_t size, size_t alignment,
                                                      cuabi__stream *stream, const char *caller)
{
    /* CUABI_RELEASE_FAST: the driver call alone; the default mode makes it
     * RELAXED (platform/release.h), so no capture anywhere breaks. */
    if (CUABI__LIKELY(ptr != 0 && cuabi__pool_fast(res, stream))) {
        if (cuabi__release_is_fast())
            return CUABI__CU_IN(caller, res->drv, cuMemFreeAsync, (CUdeviceptr)ptr,
                                stream->cu_stream);
        return cuabi__pool_free_relaxed(res, ptr, stream, caller);
    }
    return cuabi__resource_deallocate_general(res, ptr, size, alignment, stream, caller);
}

/* Pool frees on the legacy default stream that a blocking stream's
 * capture made wait (memory.c): free those no capture holds back any more.
 * Costs one relaxed load when there are none. */
extern _Atomic size_t cuabi__memory_deferred_frees;    /* how many wait */
void cuabi__memory_flush_deferred_slow(void);
static inline void cuabi__memory_flush_deferred(void)
{
    if (CUABI__UNLIKELY(atomic_load_explicit(&cuabi__memory_deferred_frees,
                                             memory_order_relaxed) != 0))
        cuabi__memory_flush_deferred_slow();
}

/* A resource of `impl` (not stream-ordered, no pool) on a device: the
 * constructors of pinned, managed and IPC memory. `caller` names the public
 * function. */
cuabi_status cuabi__resource_simple(cuabi_memory_resource **out, cuabi_device *device,
                                    cuabi__resource_impl impl, cuabi_memory_kind kind,
                                    const char *caller);

/* The start of every GPU resource constructor: check `out` (set to NULL),
 * resolve `device`, load the driver and make the device current in *scope
 * (the constructor gives the caller's back: cuabi__context_leave). */
cuabi_status cuabi__gpu_resource_begin(cuabi__context_scope *scope, cuabi_memory_resource **out,
                                       cuabi_device *device, cuabi__device **dev,
                                       const cuabi__driver **drv, const char *caller);
/* Whether a pool may be made at this location (options of
 * cuabi_memory_resource_pool_create, cuabi_ipc_pool_create): DEVICE, HOST
 * (not with `ipc`: the driver makes no IPC-capable pool there) or HOST_NUMA
 * with a node >= 0; else CUABI_ERROR_INVALID_ARGUMENT naming `caller`. */
cuabi_status cuabi__pool_location_check(cuabi_location_type type, int id, bool ipc,
                                        const char *caller);
/* cuMemPoolCreate on `dev` (loc_type CUABI_LOCATION_DEVICE) or in host
 * memory (CUABI_LOCATION_HOST, or CUABI_LOCATION_HOST_NUMA node loc_id),
 * with the given handle types and maximum size (0: the driver's default),
 * then its release threshold; a host pool then gives `dev` read-write
 * access (cuabi__pool_grant_device_access). Nothing is left behind on
 * failure. */
cuabi_status cuabi__memory_pool_make(CUmemoryPool *out, cuabi__device *dev,
                                     const cuabi__driver *drv, CUmemAllocationHandleType types,
                                     cuabi_location_type loc_type, int loc_id, size_t max_size,
                                     uint64_t release_threshold, const char *caller);
/* A pool in host memory gives the devices no access of their own (CUDA 13;
 * cuMemPoolCreate: "their default accessibility will be from the host
 * CPU"): give `dev` read-write access, asked first (cuMemPoolGetAccess) so
 * that a pool open to it already is left alone. `where` names the pool's
 * location in the error ("host", "host NUMA node 1"). */
cuabi_status cuabi__pool_grant_device_access(const cuabi__driver *drv, CUmemoryPool pool,
                                             const cuabi__device *dev, const char *where,
                                             const char *caller);
/* "host" or "host NUMA node N" into `out`, for messages. */
void cuabi__pool_location_text(char *out, size_t size, cuabi_location_type type, int id);
/* Publish a resource over `pool` (impl CUABI__RES_POOL: stream-ordered;
 * CUABI__RES_IPC_MAPPED: receives buffers only). `owns_pool`: destroy the
 * pool with the resource. `loc_type` / `loc_id`: where the pool lives
 * (CUABI_LOCATION_NONE: on `dev`); a host location makes the resource's
 * kind CUABI_MEMORY_PINNED. On failure nothing is published and the pool is
 * left to the caller; on success *res is the new object. */
cuabi_status cuabi__resource_pool_publish(cuabi_memory_resource **out,
                                          cuabi__memory_resource **res, cuabi__device *dev,
                                          const cuabi__driver *drv, CUmemoryPool pool,
                                          cuabi__resource_impl impl, bool owns_pool,
                                          uint64_t ipc_pool_id, cuabi_location_type loc_type,
                                          int loc_id);

/* Whether `res` holds a reference to `stream` (which the caller keeps alive
 * during the call), taking one into a free place of its stream set if it
 * has one. True means a buffer of `res` may keep `stream` by keeping `res`. */
bool cuabi__resource_keep_stream(cuabi__memory_resource *res, cuabi__stream *stream);
/* The same, with the common case (the resource's first stream) inline. */
static inline bool cuabi__resource_keeps_stream(cuabi__memory_resource *res,
                                                cuabi__stream *stream)
{
    return atomic_load_explicit(&res->streams[0], memory_order_acquire) == stream ||
           cuabi__resource_keep_stream(res, stream);
}

/* -------------------------------------------------------------- buffers */

/* The handle (base) is unique: destroying it invalidates it at once. The
 * memory has its own count (`mem_refs`: one for the handle, one per view)
 * and goes back to its resource, or to the release callback, at zero. */
typedef struct cuabi__buffer {
    cuabi__object base;
    _Atomic int64_t mem_refs;
    uintptr_t ptr;
    size_t size, alignment;
    cuabi_memory_kind kind;
    cuabi__device *device;           /* retained; NULL for host memory */
    cuabi__memory_resource *res;     /* retained; NULL when wrapped */
    cuabi__stream *stream;           /* deallocate on it (may be NULL); kept alive by
                                        the buffer (stream_owned) or the resource */
    bool stream_owned;
    cuabi_buffer_release_fn release; /* wrapped buffers */
    void *payload;
} cuabi__buffer;

void cuabi__buffer_mem_retain(cuabi__buffer *b);
/* `size` bytes at `offset` lie within `b`, else an error naming the `what`
 * ("source", "destination") buffer and `caller`. */
cuabi_status cuabi__buffer_check_range(const cuabi__buffer *b, size_t offset, size_t size,
                                       const char *what, const char *caller);
/* Drop one memory reference; the last one frees the memory and the struct.
 * Returns the deallocation's status (success when nothing was freed);
 * `caller` names the public function in its error. */
cuabi_status cuabi__buffer_mem_release(cuabi__buffer *b, const char *caller);
/* The memory's last reference is gone: free it (to its resource or release
 * callback) and the struct; returns the deallocation's status. A capture
 * may put this off (graph.h: cuabi__capture_defer_free). */
cuabi_status cuabi__buffer_mem_free(cuabi__buffer *b, const char *caller);

/* Free this thread's cached buffer structs (tests: make the next buffer
 * come from cuabi__malloc, to inject its failure). */
void cuabi__buffer_cache_flush(void);

/* ---------------------------------------------------------------- views */

typedef enum cuabi__view_owner {
    CUABI__OWN_NONE = 0,       /* borrowed DLTensor */
    CUABI__OWN_VERSIONED,      /* DLManagedTensorVersioned *: call its deleter */
    CUABI__OWN_LEGACY,         /* DLManagedTensor *: call its deleter */
    CUABI__OWN_BUFFER,         /* cuabi__buffer *: a memory reference */
    CUABI__OWN_VIEW,           /* cuabi__view *: an object reference */
} cuabi__view_owner;

/* One allocation: the struct, then shape[ndim] and strides[ndim]. */
typedef struct cuabi__view {
    cuabi__object base;
    uintptr_t data;
    uint64_t byte_offset;
    int32_t device_type, device_id;
    uint8_t code, bits;
    int32_t ndim;
    unsigned flags;                /* cuabi_view_flags */
    cuabi__view_owner owner_kind;
    void *owner;
    int64_t size;                  /* number of elements */
    int64_t *shape, *strides;      /* point into dims */
    int64_t dims[];
} cuabi__view;

/* Allocate a view with room for ndim dimensions (fields zeroed except
 * shape/strides pointers); not yet registered. */
cuabi__view *cuabi__view_alloc(int32_t ndim);
/* Register `v` and hand out its handle; on failure `v` is freed WITHOUT
 * touching its owner (the caller undoes that). */
cuabi_status cuabi__view_publish(cuabi_view **out, cuabi__view *v);
/* Bytes per element of a supported dtype, or 0 (and an error naming
 * `caller`) for unsupported ones. */
size_t cuabi__dtype_itemsize(int code, int bits, int lanes, cuabi_status status,
                             const char *caller);
/* What a layout reaches, relative to its first element. Empty layouts (an
 * extent of 0) reach nothing: count, lo, hi, byte_lo and byte_end are 0. */
typedef struct cuabi__layout {
    int64_t count;       /* number of elements */
    int64_t lo, hi;      /* lowest / highest element index reached */
    int64_t byte_lo;     /* lo * itemsize (<= 0) */
    int64_t byte_end;    /* (hi + 1) * itemsize: one past the last byte reached */
} cuabi__layout;
/* Check the extents and strides (NULL: row-major) of a tensor of `itemsize`
 * byte elements and compute what it reaches. Every figure is computed with
 * overflow checks: the element count times the item size, the lowest and
 * the highest byte reached must each fit in 64-bit signed arithmetic (as
 * DLPack and NumPy hold them), else an error with `status` naming
 * `caller` and the argument (shape or strides). */
cuabi_status cuabi__check_layout(cuabi__layout *out, int32_t ndim, const int64_t *shape,
                                 const int64_t *strides, size_t itemsize, cuabi_status status,
                                 const char *caller);
/* Fill row-major strides. */
void cuabi__row_major(int64_t *strides, const int64_t *shape, int32_t ndim);

#endif
