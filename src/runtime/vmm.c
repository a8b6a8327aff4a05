/* Virtual memory: a memory resource whose buffers are reserved address
 * ranges backed by physical chunks (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess), buffers that grow in place, and chunks shared
 * with other processes (cuMemExportToShareableHandle: a file descriptor or
 * a fabric handle per chunk).
 *
 * A buffer is one reservation (`reserved` bytes at `base`, never moved)
 * and a list of chunks mapped back to back from `base` (`mapped` bytes).
 * Its size is a multiple of the granularity: growing maps one new chunk of
 * the difference after the mapped part; shrinking unmaps the chunks that
 * lie wholly past the new size (a chunk straddling it stays, and `mapped`
 * stays above the size). A failed shrink leaves the buffer as it was: its
 * size, mapped size and chunks (the chunks it had unmapped are mapped back;
 * see unmap_for_shrink for the one case where that fails too). The buffer
 * struct's size changes with it (buffer.c's copies, views and exports read
 * it: growth only adds memory, so what they saw stays valid; a shrink is
 * refused while views hold the memory).
 *
 * The state of each buffer (a "block") is found from its buffer: buffers a
 * VMM resource allocated through memory.c's hooks are in a registry keyed
 * by address (the resource's allocate/free interface carries only the
 * address); imported buffers are wrapped buffers whose payload is the block.
 * A block's lock orders resizes, access changes and exports of the buffer. */
#include "platform/release.h"
#include "runtime/ipc.h"
#include "runtime/vmm.h"
#include "util/checked.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Chunks per buffer: descriptors carry the index and the count in 16 bits. */
#define MAX_CHUNKS 65535u

typedef struct vmm_chunk {
    CUmemGenericAllocationHandle handle;
    size_t offset, size;
} vmm_chunk;

/* Who gets which access to a range: a list of CUmemAccessDesc. */
typedef struct access_list {
    CUmemAccessDesc *desc;
    size_t count;
} access_list;

typedef struct vmm_block {
    struct vmm_block *next;          /* registry chain */
    uintptr_t base;
    size_t reserved, mapped, size, requested, granularity;
    vmm_chunk *chunks;
    size_t nchunks, cap;
    CUmemAllocationProp prop;
    access_list access;
    const cuabi__driver *drv;
    cuabi__device *device;           /* kept alive by the buffer */
    const cuabi__memory_resource *owner;  /* the allocating resource; NULL: imported */
    cuabi_vmm_handle_type handle_type;
    uint64_t id;                     /* random: ties exported chunks together */
    uint8_t uuid[16];
    bool imported;
    pthread_mutex_t lock;
} vmm_block;

/* A VMM resource's state (memory_resource.module_state). */
typedef struct vmm_resource {
    CUmemAllocationProp prop;
    size_t granularity, reserve_size, addr_align;
    cuabi_vmm_handle_type handle_type;
    uint8_t uuid[16];
    pthread_mutex_t lock;            /* guards access */
    access_list access;
} vmm_resource;

static cuabi_status access_copy(access_list *to, const access_list *from)
{
    to->desc = NULL;
    to->count = 0;
    if (!from->count)
        return CUABI_SUCCESS;
    to->desc = cuabi__calloc(from->count, sizeof *to->desc);
    if (!to->desc)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memcpy(to->desc, from->desc, from->count * sizeof *to->desc);
    to->count = from->count;
    return CUABI_SUCCESS;
}

/* Set `dev`'s entry to `flags` (NONE removes it). */
static cuabi_status access_put(access_list *l, CUdevice dev, CUmemAccess_flags flags)
{
    for (size_t i = 0; i < l->count; i++) {
        if (l->desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            l->desc[i].location.id != dev)
            continue;
        if (flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
            l->desc[i] = l->desc[--l->count];
        else
            l->desc[i].flags = flags;
        return CUABI_SUCCESS;
    }
    if (flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
        return CUABI_SUCCESS;
    CUmemAccessDesc *d = cuabi__realloc(l->desc, (l->count + 1) * sizeof *d);
    if (!d)
        return CUABI_ERROR_OUT_OF_MEMORY;
    l->desc = d;
    d[l->count].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d[l->count].location.id = dev;
    d[l->count].flags = flags;
    l->count++;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__device_requires(const cuabi__driver *drv, const cuabi__device *dev,
                                    CUdevice_attribute attr, const char *attr_name,
                                    const char *what, const char *caller)
{
    int v = 0;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuDeviceGetAttribute, &v, attr, dev->cu_device));
    if (v)
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                        "%s: device %d does not support %s (%s is 0)", caller, dev->ordinal,
                        what, attr_name);
}
#define REQUIRE(drv, dev, attr, what, caller)                                 \
    CUABI__TRY(cuabi__device_requires((drv), (dev), attr, #attr, (what), (caller)))

/* A nonzero random id (ipc_pool.c's recipe). */
static uint64_t random_id(void)
{
    static _Atomic uint64_t counter;
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
             ((uint64_t)getpid() << 40) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    }
    return id ? id : 1;
}

/* ------------------------------------------------------------ registry */

enum { BUCKETS = 256 };
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static vmm_block *registry[BUCKETS];

static size_t bucket_of(uintptr_t base)
{
    return (size_t)((base >> 21) ^ (base >> 29)) % BUCKETS;
}

static void registry_add(vmm_block *k)
{
    pthread_mutex_lock(&registry_lock);
    size_t i = bucket_of(k->base);
    k->next = registry[i];
    registry[i] = k;
    pthread_mutex_unlock(&registry_lock);
}

/* Find the block at `base`; with `take` (the resource it must belong to),
 * remove it. */
static vmm_block *registry_find(uintptr_t base, const cuabi__memory_resource *take)
{
    pthread_mutex_lock(&registry_lock);
    vmm_block **link = &registry[bucket_of(base)];
    while (*link && ((*link)->base != base || (take && (*link)->owner != take)))
        link = &(*link)->next;
    vmm_block *k = *link;
    if (k && take)
        *link = k->next;
    pthread_mutex_unlock(&registry_lock);
    return k;
}

/* --------------------------------------------------------- mapping work */

static void block_free(vmm_block *k)
{
    pthread_mutex_destroy(&k->lock);
    cuabi__free(k->chunks);
    cuabi__free(k->access.desc);
    cuabi__free(k);
}

/* Unmap and release chunks [from, nchunks) (release path: errors are
 * remembered, the rest still goes). */
static CUresult unmap_from(vmm_block *k, size_t from)
{
    CUresult first = CUDA_SUCCESS;
    while (k->nchunks > from) {
        vmm_chunk *c = &k->chunks[--k->nchunks];
        CUresult r = CUDA_SUCCESS;
        if (k->drv->cuMemUnmap)
            r = CUABI__CU_RELEASE(k->drv, cuMemUnmap, (CUdeviceptr)(k->base + c->offset), c->size);
        if (r == CUDA_SUCCESS && k->drv->cuMemRelease)
            r = CUABI__CU_RELEASE(k->drv, cuMemRelease, c->handle);
        if (first == CUDA_SUCCESS)
            first = r;
        k->mapped = c->offset;
    }
    return first;
}

/* Everything of a block goes: its device's work first (VMM memory is not
 * stream-ordered; an unmap under a running kernel faults it), then the
 * chunks and the reservation. */
static CUresult block_release(vmm_block *k)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* a release: the caller's back */
    if (cuabi__device_enter(&scope, k->device, k->drv) == CUABI_SUCCESS &&
        k->drv->cuCtxSynchronize)
        (void)k->drv->cuCtxSynchronize();
    CUresult r = unmap_from(k, 0);
    if (k->drv->cuMemAddressFree) {
        CUresult f = CUABI__CU_RELEASE(k->drv, cuMemAddressFree, (CUdeviceptr)k->base,
                                       k->reserved);
        if (r == CUDA_SUCCESS)
            r = f;
    }
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    return r;
}

/* Map `h` (`size` bytes) at the end of the mapped part and give it the
 * block's access; the chunk list has room (the caller made it). On failure
 * nothing is mapped and `h` is the caller's. */
static cuabi_status map_chunk(vmm_block *k, CUmemGenericAllocationHandle h, size_t size,
                              const char *caller)
{
    CUdeviceptr at = (CUdeviceptr)(k->base + k->mapped);
    CUABI__TRY(CUABI__CU_IN(caller, k->drv, cuMemMap, at, size, 0, h, 0));
    if (k->access.count) {
        cuabi_status st = CUABI__CU_IN(caller, k->drv, cuMemSetAccess, at, size, k->access.desc,
                                       k->access.count);
        if (st != CUABI_SUCCESS) {
            (void)CUABI__CU_RELEASE(k->drv, cuMemUnmap, at, size);
            return st;
        }
    }
    k->chunks[k->nchunks++] = (vmm_chunk){ .handle = h, .offset = k->mapped, .size = size };
    k->mapped += size;
    return CUABI_SUCCESS;
}

static cuabi_status chunks_room(vmm_block *k, size_t more, const char *caller)
{
    if (k->nchunks + more > MAX_CHUNKS)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: a VMM buffer has at most %u chunks (one per growth); this one "
                            "has %zu: allocate it larger at once", caller, MAX_CHUNKS, k->nchunks);
    if (k->nchunks + more <= k->cap)
        return CUABI_SUCCESS;
    size_t cap = k->cap ? k->cap * 2 : 4;
    while (cap < k->nchunks + more)
        cap *= 2;
    vmm_chunk *c = cuabi__realloc(k->chunks, cap * sizeof *c);
    if (!c)
        return CUABI_ERROR_OUT_OF_MEMORY;
    k->chunks = c;
    k->cap = cap;
    return CUABI_SUCCESS;
}

/* Create a chunk of `size` bytes and map it at the end. */
static cuabi_status grow_by(vmm_block *k, size_t size, const char *caller)
{
    CUABI__TRY(chunks_room(k, 1, caller));
    CUmemGenericAllocationHandle h;
    CUABI__TRY(CUABI__CU_IN(caller, k->drv, cuMemCreate, &h, size, &k->prop, 0));
    cuabi_status st = map_chunk(k, h, size, caller);
    if (st != CUABI_SUCCESS)
        (void)CUABI__CU_RELEASE(k->drv, cuMemRelease, h);
    return st;
}

static vmm_block *block_new(const cuabi__driver *drv, cuabi__device *dev)
{
    vmm_block *k = cuabi__calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->drv = drv;
    k->device = dev;
    k->id = random_id();
    pthread_mutex_init(&k->lock, NULL);
    return k;
}

/* ------------------------------------------------------------ resource */

static _Thread_local size_t pending_reserve;   /* cuabi_vmm_buffer_allocate's `reserve` */

static cuabi_status vmm_free(cuabi__memory_resource *r, uintptr_t ptr, const char *caller);

static cuabi_status vmm_allocate(uintptr_t *out, cuabi__memory_resource *r, size_t size,
                                 const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    vmm_resource *v = r->module_state;
    size_t rounded, reserve;
    if (!cuabi__size_round_up(&rounded, size, v->granularity))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: %zu bytes rounded up to the granularity (%zu) do not fit a "
                            "size_t", caller, size, v->granularity);
    reserve = pending_reserve ? pending_reserve : v->reserve_size;
    if (!cuabi__size_round_up(&reserve, reserve, v->granularity))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: a reservation of %zu bytes rounded up to the granularity does "
                            "not fit a size_t", caller, reserve);
    if (reserve < rounded)
        reserve = rounded;
    const cuabi__driver *drv = r->drv;
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, r->device, drv));
    vmm_block *k = block_new(drv, r->device);
    if (!k)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    k->owner = r;
    k->prop = v->prop;
    k->granularity = v->granularity;
    k->handle_type = v->handle_type;
    memcpy(k->uuid, v->uuid, 16);
    pthread_mutex_lock(&v->lock);
    cuabi_status st = access_copy(&k->access, &v->access);
    pthread_mutex_unlock(&v->lock);
    CUdeviceptr base = 0;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_IN(caller, drv, cuMemAddressReserve, &base, reserve,
                          v->addr_align ? v->addr_align : v->granularity, 0, 0);
    if (st != CUABI_SUCCESS) {
        block_free(k);
        CUABI__SCOPE_RETURN(st);
    }
    k->base = (uintptr_t)base;
    k->reserved = reserve;
    st = grow_by(k, rounded, caller);
    if (st != CUABI_SUCCESS) {
        (void)CUABI__CU_RELEASE(drv, cuMemAddressFree, base, reserve);
        block_free(k);
        CUABI__SCOPE_RETURN(st);
    }
    k->size = rounded;
    k->requested = size;
    registry_add(k);
    *out = k->base;
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    if (cuabi__context_end(&scope, scope_st) == CUABI_SUCCESS || scope_st != CUABI_SUCCESS)
        return scope_st;
    /* The caller's context could not be given back: the call fails, so the
     * block goes back (block_release makes the device current again for
     * itself, in a scope of its own). */
    (void)vmm_free(r, *out, caller);
    *out = 0;
    return cuabi__context_made_lost(caller);
}

static cuabi_status vmm_free(cuabi__memory_resource *r, uintptr_t ptr, const char *caller)
{
    vmm_block *k = registry_find(ptr, r);
    if (!k)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: 0x%llx is not the address of a buffer of this VMM resource",
                            caller, (unsigned long long)ptr);
    CUresult res = block_release(k);
    block_free(k);
    return res == CUDA_SUCCESS ? CUABI_SUCCESS : cuabi__cu_check(res, "cuMemUnmap", caller);
}

static void vmm_resource_destroy(cuabi__memory_resource *r)
{
    vmm_resource *v = r->module_state;
    if (!v)
        return;
    pthread_mutex_destroy(&v->lock);
    cuabi__free(v->access.desc);
    cuabi__free(v);
    r->module_state = NULL;
}

static bool access_valid(cuabi_peer_access a, bool none_ok)
{
    return a == CUABI_PEER_ACCESS_READ || a == CUABI_PEER_ACCESS_READ_WRITE ||
           (none_ok && a == CUABI_PEER_ACCESS_NONE);
}

/* The allocation properties and granularity the options describe; checks
 * the options and what the device supports. */
static cuabi_status options_prop(CUmemAllocationProp *prop, size_t *granularity,
                                 const cuabi_vmm_options *o, const cuabi__device *dev,
                                 const cuabi__driver *drv, const char *caller)
{
    CUABI__CHECK_ARG(o->location_type >= CUABI_LOCATION_DEVICE &&
                         o->location_type <= CUABI_LOCATION_HOST_NUMA_CURRENT,
                     "%s: location_type %d is not a VMM location (DEVICE, HOST, HOST_NUMA, "
                     "HOST_NUMA_CURRENT)", caller, (int)o->location_type);
    CUABI__CHECK_ARG(o->handle_type == CUABI_VMM_HANDLE_NONE ||
                         o->handle_type == CUABI_VMM_HANDLE_POSIX_FD ||
                         o->handle_type == CUABI_VMM_HANDLE_FABRIC,
                     "%s: handle_type %d is not a cuabi_vmm_handle_type", caller,
                     (int)o->handle_type);
    CUABI__CHECK_ARG(o->granularity == CUABI_VMM_GRANULARITY_MINIMUM ||
                         o->granularity == CUABI_VMM_GRANULARITY_RECOMMENDED,
                     "%s: granularity %d is not a cuabi_vmm_granularity_kind", caller,
                     (int)o->granularity);
    CUABI__CHECK_ARG(access_valid(o->self_access, false),
                     "%s: self_access %d must be CUABI_PEER_ACCESS_READ or _READ_WRITE", caller,
                     (int)o->self_access);
    CUABI__CHECK_ARG((o->addr_align & (o->addr_align - 1)) == 0 && o->addr_align <= SIZE_MAX,
                     "%s: addr_align %llu is not a power of two", caller,
                     (unsigned long long)o->addr_align);
    CUABI__CHECK_ARG(o->reserve_size <= SIZE_MAX, "%s: reserve_size %llu does not fit a size_t",
                     caller, (unsigned long long)o->reserve_size);
    CUABI__CHECK_ARG(o->location_type != CUABI_LOCATION_HOST_NUMA || o->location_id >= 0,
                     "%s: location_id %d is not a NUMA node", caller, o->location_id);
    REQUIRE(drv, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
            "virtual memory management", caller);
    if (o->location_type == CUABI_LOCATION_HOST_NUMA ||
        o->location_type == CUABI_LOCATION_HOST_NUMA_CURRENT)
        REQUIRE(drv, dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                "virtual memory on host NUMA nodes", caller);
    if (o->handle_type == CUABI_VMM_HANDLE_POSIX_FD)
        REQUIRE(drv, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                "file descriptor handles", caller);
    if (o->handle_type == CUABI_VMM_HANDLE_FABRIC)
        REQUIRE(drv, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, "fabric handles",
                caller);
    if (o->gpu_direct_rdma)
        REQUIRE(drv, dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                "GPUDirect RDMA with virtual memory", caller);
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = (CUmemAllocationHandleType)o->handle_type;
    prop->location.type = (CUmemLocationType)o->location_type;
    prop->location.id = o->location_type == CUABI_LOCATION_DEVICE ? dev->cu_device
                        : o->location_type == CUABI_LOCATION_HOST_NUMA ? o->location_id : 0;
    prop->allocFlags.gpuDirectRDMACapable = o->gpu_direct_rdma ? 1 : 0;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemGetAllocationGranularity, granularity, prop,
                            (CUmemAllocationGranularity_flags)o->granularity));
    if (*granularity == 0 || (*granularity & (*granularity - 1)))
        return cuabi__error(CUABI_ERROR_CUDA, "%s: the driver gave granularity %zu", caller,
                            *granularity);
    return CUABI_SUCCESS;
}

static const cuabi_vmm_options default_options = CUABI_VMM_OPTIONS_INIT;

CUABI_EXTERN(cuabi_status) cuabi_vmm_supported(int *out, cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    return CUABI__CU(drv, cuDeviceGetAttribute, out,
                     CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev->cu_device);
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_granularity(size_t *out, cuabi_device *device,
                                                 const cuabi_vmm_options *options)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__CHECK_OPTS(options, "cuabi_vmm_options", CUABI_VMM_OPTIONS_VERSION, true);
    if (!options)
        options = &default_options;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUmemAllocationProp prop;
    scope_st = options_prop(&prop, out, options, dev, drv, __func__);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_resource_create(cuabi_memory_resource **out,
                                                     cuabi_device *device,
                                                     const cuabi_vmm_options *options)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_OPTS(options, "cuabi_vmm_options", CUABI_VMM_OPTIONS_VERSION, true);
    if (!options)
        options = &default_options;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    vmm_resource *v = cuabi__calloc(1, sizeof *v);
    if (!v)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    pthread_mutex_init(&v->lock, NULL);
    cuabi_status st = options_prop(&v->prop, &v->granularity, options, dev, drv, __func__);
    CUuuid uuid;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuDeviceGetUuid, &uuid, dev->cu_device);
    if (st == CUABI_SUCCESS && !cuabi__size_round_up(&v->reserve_size,
                                                     (size_t)options->reserve_size,
                                                     v->granularity))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                          "%s: reserve_size %llu rounded up to the granularity does not fit a "
                          "size_t", __func__, (unsigned long long)options->reserve_size);
    if (st == CUABI_SUCCESS)
        st = access_put(&v->access, dev->cu_device, (CUmemAccess_flags)options->self_access);
    cuabi_memory_resource *h = NULL;
    if (st == CUABI_SUCCESS) {
        bool host = options->location_type != CUABI_LOCATION_DEVICE;
        st = cuabi__resource_simple(&h, device, CUABI__RES_VMM,
                                    host ? CUABI_MEMORY_PINNED : CUABI_MEMORY_DEVICE, __func__);
    }
    if (st != CUABI_SUCCESS) {
        pthread_mutex_destroy(&v->lock);
        cuabi__free(v->access.desc);
        cuabi__free(v);
        CUABI__SCOPE_RETURN(st);
    }
    memcpy(v->uuid, uuid.bytes, 16);
    v->addr_align = (size_t)options->addr_align;
    v->handle_type = options->handle_type;
    void *obj;
    (void)cuabi__handle_get(h, CUABI__T_MEMORY_RESOURCE, &obj, __func__);
    cuabi__memory_resource *r = obj;
    r->granularity = v->granularity;
    r->module_state = v;
    r->vmm_allocate = vmm_allocate;
    r->vmm_free = vmm_free;
    r->before_destroy = vmm_resource_destroy;
    *out = h;
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, MEMORY_RESOURCE, __func__);
}

static cuabi_status vmm_resource_of(cuabi__memory_resource **r, cuabi_memory_resource *res,
                                    const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(res, CUABI__T_MEMORY_RESOURCE, &obj, caller));
    *r = obj;
    if ((*r)->impl != CUABI__RES_VMM)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the resource is not a VMM resource (cuabi_vmm_resource_create)",
                            caller);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_resource_set_peer_access(cuabi_memory_resource *resource,
                                                              cuabi_device *device,
                                                              cuabi_peer_access access)
{
    cuabi__memory_resource *r;
    cuabi__device *dev;
    CUABI__TRY(vmm_resource_of(&r, resource, __func__));
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(access_valid(access, true), "%s: %d is not a cuabi_peer_access", __func__,
                     (int)access);
    CUABI__CHECK_ARG(dev->cu_device != r->device->cu_device || access != CUABI_PEER_ACCESS_NONE,
                     "%s: the resource's own device keeps its access (set self_access)",
                     __func__);
    vmm_resource *v = r->module_state;
    pthread_mutex_lock(&v->lock);
    cuabi_status st = access_put(&v->access, dev->cu_device, (CUmemAccess_flags)access);
    pthread_mutex_unlock(&v->lock);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_buffer_allocate(cuabi_buffer **out,
                                                     cuabi_memory_resource *resource, size_t size,
                                                     size_t reserve)
{
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY(vmm_resource_of(&r, resource, __func__));
    CUABI__CHECK_ARG(size > 0, "%s: size is 0 (a VMM buffer maps at least one granule)",
                     __func__);
    pending_reserve = reserve;
    cuabi_status st = cuabi_buffer_allocate(out, resource, size, 0, NULL);
    pending_reserve = 0;
    return st;
}

/* -------------------------------------------------------------- buffers */

static void import_release(uintptr_t ptr, size_t size, void *payload);

/* The block of a VMM buffer (allocated here, or imported), locked. */
static cuabi_status block_of(vmm_block **out, cuabi__buffer **bp, cuabi_buffer *buffer,
                             const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(buffer, CUABI__T_BUFFER, &obj, caller));
    cuabi__buffer *b = obj;
    vmm_block *k = NULL;
    if (b->res && b->res->impl == CUABI__RES_VMM)
        k = registry_find(b->ptr, NULL);
    else if (!b->res && b->release == import_release)
        k = b->payload;
    if (!k)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the buffer is not a VMM buffer (cuabi_vmm_resource_create, "
                            "cuabi_vmm_import)", caller);
    pthread_mutex_lock(&k->lock);
    *out = k;
    if (bp)
        *bp = b;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__vmm_chunk_at(CUmemGenericAllocationHandle *handle, size_t *chunk_offset,
                                 cuabi__buffer *b, size_t offset, size_t size,
                                 const char *caller)
{
    vmm_block *k;
    CUABI__TRY(block_of(&k, NULL, CUABI__HANDLE(b, cuabi_buffer), caller));
    bool found = false;
    size_t chunks = k->nchunks;
    for (size_t i = 0; !found && i < k->nchunks; i++) {
        vmm_chunk *c = &k->chunks[i];
        if (offset >= c->offset && cuabi__range_inside(offset - c->offset, size, c->size) &&
            cuabi__range_inside(offset, size, k->size)) {
            *handle = c->handle;
            *chunk_offset = offset - c->offset;
            found = true;
        }
    }
    pthread_mutex_unlock(&k->lock);
    if (found)
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                        "%s: %zu bytes at offset %zu are not inside one physical chunk of the "
                        "VMM buffer (%zu chunks)", caller, size, offset, chunks);
}

/* Map chunk `c` back at its place with the block's access (a shrink
 * undoing its unmaps). */
static CUresult remap_chunk(vmm_block *k, const vmm_chunk *c)
{
    CUdeviceptr at = (CUdeviceptr)(k->base + c->offset);
    CUresult r = CUABI__CU_RAW(k->drv, cuMemMap, at, c->size, 0, c->handle, 0);
    if (r == CUDA_SUCCESS && k->access.count) {
        r = CUABI__CU_RAW(k->drv, cuMemSetAccess, at, c->size, k->access.desc, k->access.count);
        if (r != CUDA_SUCCESS)
            (void)CUABI__CU_RELEASE(k->drv, cuMemUnmap, at, c->size);
    }
    return r;
}

/* Unmap chunks [keep, nchunks) for a shrink, last first, keeping their
 * handles. When an unmap fails, the chunks already unmapped are mapped back
 * (same handles, same offsets, same access: same bytes), so the buffer is
 * as it was. Only when that remap fails too does the buffer end smaller:
 * the chunks from the first one not mapped back on are released, and `size`
 * and `mapped` say what is really mapped (the error says so). With every
 * unmap done, the handles are released (release path: a refused release is
 * the driver's object left behind; the memory is unmapped, the shrink is
 * done). */
static cuabi_status unmap_for_shrink(vmm_block *k, size_t keep, size_t old_size,
                                     const char *caller)
{
    size_t n = k->nchunks, at = n;
    if (n > keep && !k->drv->cuMemUnmap)
        return cuabi__missing_entry("cuMemUnmap", caller);
    CUresult r = CUDA_SUCCESS;
    while (at > keep) {
        const vmm_chunk *c = &k->chunks[at - 1];
        r = CUABI__CU_RELEASE(k->drv, cuMemUnmap, (CUdeviceptr)(k->base + c->offset), c->size);
        if (r != CUDA_SUCCESS)
            break;
        at--;
    }
    if (r == CUDA_SUCCESS) {
        for (size_t i = keep; i < n && k->drv->cuMemRelease; i++)
            (void)CUABI__CU_RELEASE(k->drv, cuMemRelease, k->chunks[i].handle);
        k->nchunks = keep;
        k->mapped = keep ? k->chunks[keep - 1].offset + k->chunks[keep - 1].size : 0;
        return CUABI_SUCCESS;
    }
    /* chunk at-1 is still mapped; [at, n) are not: map them back in order */
    size_t back = at;
    CUresult remap = CUDA_SUCCESS;
    while (back < n && (remap = remap_chunk(k, &k->chunks[back])) == CUDA_SUCCESS)
        back++;
    if (back == n) {
        cuabi_status st = cuabi__cu_check(r, "cuMemUnmap", caller);
        char driver_said[512];
        snprintf(driver_said, sizeof driver_said, "%s", cuabi_last_error()->message);
        cuabi__error(st, "%s (the shrink was undone: the buffer is as it was, %zu bytes in %zu "
                     "chunks)", driver_said, old_size, k->nchunks);
        cuabi__error_set_cu((int)r);
        return st;
    }
    for (size_t i = back; i < n && k->drv->cuMemRelease; i++)
        (void)CUABI__CU_RELEASE(k->drv, cuMemRelease, k->chunks[i].handle);
    k->nchunks = back;
    k->mapped = k->chunks[back - 1].offset + k->chunks[back - 1].size;
    if (k->size > k->mapped)
        k->size = k->mapped;
    if (k->size > old_size)
        k->size = old_size;
    cuabi_status st = cuabi__cu_check(r, "cuMemUnmap", caller);
    cuabi__error(st, "%s: the shrink failed (cuMemUnmap, CUresult %d) and mapping the chunks "
                 "already unmapped back failed too (cuMemMap/cuMemSetAccess, CUresult %d): the "
                 "buffer is now %zu bytes, %zu chunks", caller, (int)r, (int)remap, k->size,
                 k->nchunks);
    cuabi__error_set_cu((int)r);
    return st;
}

static cuabi_status shrink(cuabi__context_scope *scope, vmm_block *k, cuabi__buffer *b,
                           size_t rounded, cuabi_stream *stream, const char *caller)
{
    if (atomic_load_explicit(&b->mem_refs, memory_order_acquire) != 1)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: views or DLPack exports hold the buffer's memory: it cannot "
                            "shrink (release them first; growing is always allowed)", caller);
    cuabi__stream *s = NULL;
    if (stream) {
        void *obj;
        CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
        s = obj;
    }
    CUABI__TRY(cuabi__device_enter(scope, k->device, k->drv));
    if (s)
        CUABI__TRY(CUABI__CU_IN(caller, k->drv, cuStreamSynchronize, s->cu_stream));
    else
        CUABI__TRY(CUABI__CU_IN(caller, k->drv, cuCtxSynchronize));
    size_t keep = 0;   /* chunks that hold bytes below the new size */
    while (keep < k->nchunks && k->chunks[keep].offset < rounded)
        keep++;
    /* The smaller size shows first, so that work checked against the
     * buffer's size from now on stays below it while the chunks go; a
     * failed shrink puts the old size back (unmap_for_shrink: the chunks
     * are mapped back too). */
    size_t old_size = k->size;
    __atomic_store_n(&b->size, rounded, __ATOMIC_RELEASE);
    cuabi_status st = unmap_for_shrink(k, keep, old_size, caller);
    if (st == CUABI_SUCCESS)
        k->size = rounded;
    __atomic_store_n(&b->size, k->size, __ATOMIC_RELEASE);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_buffer_resize(cuabi_buffer *buffer, size_t size,
                                                   cuabi_stream *stream)
{
    vmm_block *k;
    cuabi__buffer *b;
    CUABI__TRY(block_of(&k, &b, buffer, __func__));
    cuabi_status st = CUABI_SUCCESS;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    size_t rounded = 0;
    if (k->imported)
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                          "%s: the buffer was imported from another process: only its "
                          "exporter can resize it", __func__);
    else if (!cuabi__size_round_up(&rounded, size, k->granularity) || rounded > k->reserved)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                          "%s: %zu bytes (rounded up to the granularity, %zu) do not fit the "
                          "buffer's reserved range of %zu bytes: it grows in place up to its "
                          "reservation (ask for more: cuabi_vmm_buffer_allocate's reserve, "
                          "cuabi_vmm_options.reserve_size)", __func__, size, k->granularity,
                          k->reserved);
    if (st == CUABI_SUCCESS) {
        if (rounded > k->mapped) {
            st = cuabi__device_enter(&scope, k->device, k->drv);
            if (st == CUABI_SUCCESS)
                st = grow_by(k, rounded - k->mapped, __func__);
            if (st == CUABI_SUCCESS) {
                k->size = rounded;
                __atomic_store_n(&b->size, rounded, __ATOMIC_RELEASE);
            }
        } else if (rounded < k->size) {
            st = shrink(&scope, k, b, rounded, stream, __func__);
        } else {
            k->size = rounded;      /* within the mapped part (after a shrink) */
            __atomic_store_n(&b->size, rounded, __ATOMIC_RELEASE);
        }
    }
    if (st == CUABI_SUCCESS)
        k->requested = size;
    pthread_mutex_unlock(&k->lock);
    return cuabi__context_end(&scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_buffer_info(cuabi_vmm_info *out, cuabi_buffer *buffer)
{
    vmm_block *k;
    CUABI__CHECK_OPTS(out, "cuabi_vmm_info", CUABI_VMM_INFO_VERSION, false);
    CUABI__TRY(block_of(&k, NULL, buffer, __func__));
    out->address = k->base;
    out->requested = k->requested;
    out->size = k->size;
    out->mapped = k->mapped;
    out->reserved = k->reserved;
    out->granularity = k->granularity;
    out->chunks = k->nchunks;
    out->handle_type = k->handle_type;
    out->imported = k->imported;
    pthread_mutex_unlock(&k->lock);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_set_access(cuabi_buffer *buffer, cuabi_device *device,
                                                cuabi_peer_access access)
{
    cuabi__device *dev;
    vmm_block *k;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(access_valid(access, true), "%s: %d is not a cuabi_peer_access", __func__,
                     (int)access);
    CUABI__TRY(block_of(&k, NULL, buffer, __func__));
    CUmemAccessDesc d = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
                                        .id = dev->cu_device },
                          .flags = (CUmemAccess_flags)access };
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status st = cuabi__device_enter(&scope, k->device, k->drv);
    for (size_t i = 0; st == CUABI_SUCCESS && i < k->nchunks; i++)
        st = CUABI__CU(k->drv, cuMemSetAccess, (CUdeviceptr)(k->base + k->chunks[i].offset),
                       k->chunks[i].size, &d, 1);
    if (st == CUABI_SUCCESS)
        st = access_put(&k->access, dev->cu_device, (CUmemAccess_flags)access);
    pthread_mutex_unlock(&k->lock);
    return cuabi__context_end(&scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_get_access(cuabi_peer_access *out, cuabi_buffer *buffer,
                                                cuabi_device *device)
{
    cuabi__device *dev;
    vmm_block *k;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = CUABI_PEER_ACCESS_NONE;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(block_of(&k, NULL, buffer, __func__));
    cuabi_status st = CUABI_SUCCESS;
    if (k->nchunks == 0) {          /* nothing mapped: what the next chunk gets */
        for (size_t i = 0; i < k->access.count; i++)
            if (k->access.desc[i].location.id == dev->cu_device)
                *out = (cuabi_peer_access)k->access.desc[i].flags;
    } else {
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev->cu_device };
        unsigned long long flags = 0;
        st = CUABI__CU(k->drv, cuMemGetAccess, &flags, &loc, (CUdeviceptr)k->base);
        if (st == CUABI_SUCCESS)
            *out = (cuabi_peer_access)flags;
    }
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* ------------------------------------------------------------ processes */

CUABI_EXTERN(cuabi_status) cuabi_vmm_export_chunk(int *fd, uint8_t *out, size_t out_size,
                                                  cuabi_buffer *buffer, size_t index)
{
    vmm_block *k;
    CUABI__CHECK_ARG(fd, "%s: fd is NULL", __func__);
    *fd = -1;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__TRY(block_of(&k, NULL, buffer, __func__));
    cuabi_status st = CUABI_SUCCESS;
    if (k->imported)
        st = cuabi__error(CUABI_ERROR_IPC, "%s: the buffer was imported from another process; "
                          "only its exporter can export it", __func__);
    else if (k->handle_type == CUABI_VMM_HANDLE_NONE)
        st = cuabi__error(CUABI_ERROR_IPC, "%s: the buffer's resource has handle type "
                          "CUABI_VMM_HANDLE_NONE: its memory cannot be shared (create the "
                          "resource with CUABI_VMM_HANDLE_POSIX_FD or _FABRIC)", __func__);
    else if (index >= k->nchunks)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: chunk %zu of a buffer of %zu chunks",
                          __func__, index, k->nchunks);
    else if (out_size < CUABI_IPC_DESCRIPTOR_SIZE)
        st = cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                          "%s: a descriptor needs CUABI_IPC_DESCRIPTOR_SIZE (%d) bytes, got %zu",
                          __func__, CUABI_IPC_DESCRIPTOR_SIZE, out_size);
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (st == CUABI_SUCCESS)
        st = cuabi__device_enter(&scope, k->device, k->drv);
    if (st == CUABI_SUCCESS) {
        vmm_chunk *c = &k->chunks[index];
        if (k->handle_type == CUABI_VMM_HANDLE_POSIX_FD) {
            int h = -1;
            st = CUABI__CU(k->drv, cuMemExportToShareableHandle, &h, c->handle,
                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            if (st == CUABI_SUCCESS) {
                cuabi__ipc_seal(out, CUABI_IPC_VMM_CHUNK, k->uuid, c->size, k->id, NULL);
                *fd = h;
            }
        } else {
            CUmemFabricHandle fh;
            st = CUABI__CU(k->drv, cuMemExportToShareableHandle, &fh, c->handle,
                           CU_MEM_HANDLE_TYPE_FABRIC, 0);
            if (st == CUABI_SUCCESS)
                cuabi__ipc_seal(out, CUABI_IPC_VMM_FABRIC_CHUNK, k->uuid, c->size, k->id,
                                fh.data);
        }
        if (st == CUABI_SUCCESS) {
            cuabi__ipc_put(out + CUABI__IPC_CHUNK, index, 2);
            cuabi__ipc_put(out + CUABI__IPC_CHUNKS, k->nchunks, 2);
            cuabi__ipc_reseal(out);
        }
    }
    pthread_mutex_unlock(&k->lock);
    if (cuabi__context_end(&scope, st) == CUABI_SUCCESS || st != CUABI_SUCCESS)
        return st;
    /* The restore failed after the export: the call fails, and a caller
     * that sees a failure has no fd to close. */
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
    return cuabi__context_made_lost(__func__);
}

/* A chunk descriptor's own rules beyond the frame: a chunk kind, an index
 * below a count of 1..MAX_CHUNKS, a size. */
static cuabi_status check_chunk(cuabi_ipc_kind *kind, size_t *index, size_t *count,
                                const uint8_t *d, size_t size, const char *caller)
{
    CUABI__TRY(cuabi__ipc_check_frame(kind, d, size, caller));
    if (*kind != CUABI_IPC_VMM_CHUNK && *kind != CUABI_IPC_VMM_FABRIC_CHUNK)
        return cuabi__error(CUABI_ERROR_IPC, "%s: the descriptor describes %s, not a chunk of a "
                            "VMM buffer", caller, cuabi__ipc_kind_name(*kind));
    *index = (size_t)cuabi__ipc_get(d + CUABI__IPC_CHUNK, 2);
    *count = (size_t)cuabi__ipc_get(d + CUABI__IPC_CHUNKS, 2);
    if (*count == 0 || *index >= *count)
        return cuabi__error(CUABI_ERROR_IPC, "%s: the descriptor names chunk %zu of %zu "
                            "(forged or corrupt)", caller, *index, *count);
    if (cuabi__ipc_get(d + CUABI__IPC_SIZE, 8) == 0)
        return cuabi__error(CUABI_ERROR_IPC, "%s: the chunk's size is 0 (forged or corrupt)",
                            caller);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_descriptor_chunks(size_t *index, size_t *count,
                                                       const uint8_t *descriptor, size_t size)
{
    cuabi_ipc_kind kind;
    CUABI__CHECK_ARG(index && count, "%s: index or count is NULL", __func__);
    *index = *count = 0;
    return check_chunk(&kind, index, count, descriptor, size, __func__);
}

static void import_release(uintptr_t ptr, size_t size, void *payload)
{
    (void)ptr;
    (void)size;
    vmm_block *k = payload;
    (void)block_release(k);
    block_free(k);
}

/* Check every descriptor of an import against the first: the same
 * exporter, buffer, device and kind, index i in place i, a size that is a
 * whole number of granules; the total fits. */
static cuabi_status check_set(size_t *total, cuabi_ipc_kind *kind, const uint8_t *d, size_t n,
                              size_t granularity, const char *caller)
{
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *di = d + i * CUABI_IPC_DESCRIPTOR_SIZE;
        cuabi_ipc_kind ki;
        size_t index, count;
        CUABI__TRY(check_chunk(&ki, &index, &count, di, CUABI_IPC_DESCRIPTOR_SIZE, caller));
        if (count != n)
            return cuabi__error(CUABI_ERROR_IPC, "%s: the buffer has %zu chunks but %zu "
                                "descriptors were given (receive every chunk; the exporter may "
                                "have grown it in between: export again)", caller, count, n);
        if (index != i)
            return cuabi__error(CUABI_ERROR_IPC, "%s: descriptor %zu is chunk %zu: give the "
                                "chunks in order, each once", caller, i, index);
        if (i && (ki != *kind || memcmp(di + CUABI__IPC_PID, d + CUABI__IPC_PID, 4) != 0 ||
                  memcmp(di + CUABI__IPC_UUID, d + CUABI__IPC_UUID, 16) != 0 ||
                  memcmp(di + CUABI__IPC_OFFSET, d + CUABI__IPC_OFFSET, 8) != 0))
            return cuabi__error(CUABI_ERROR_IPC, "%s: descriptor %zu belongs to another "
                                "buffer, device or process than descriptor 0", caller, i);
        *kind = ki;
        uint64_t sz = cuabi__ipc_get(di + CUABI__IPC_SIZE, 8);
        if (sz > SIZE_MAX || sz % granularity)
            return cuabi__error(CUABI_ERROR_IPC, "%s: chunk %zu's size (%llu bytes) is not a "
                                "multiple of this resource's granularity (%zu)", caller, i,
                                (unsigned long long)sz, granularity);
        if (!cuabi__size_add(total, *total, (size_t)sz))
            return cuabi__error(CUABI_ERROR_IPC, "%s: the chunks' sizes overflow a size_t "
                                "(forged or corrupt)", caller);
    }
    return CUABI_SUCCESS;
}

/* Import chunk i's handle (fd or fabric) and map it at the end. */
static cuabi_status import_chunk(vmm_block *k, const uint8_t *d, cuabi_ipc_kind kind, int fd,
                                 const char *caller)
{
    size_t size = (size_t)cuabi__ipc_get(d + CUABI__IPC_SIZE, 8);
    CUmemGenericAllocationHandle h;
    CUresult r;
    if (!k->drv->cuMemImportFromShareableHandle)
        return cuabi__missing_entry("cuMemImportFromShareableHandle", caller);
    if (kind == CUABI_IPC_VMM_CHUNK) {
        r = CUABI__CU_RAW(k->drv, cuMemImportFromShareableHandle, &h, (void *)(intptr_t)fd,
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    } else {
        CUmemFabricHandle fh;
        memcpy(fh.data, d + CUABI__IPC_HANDLE, sizeof fh.data);
        r = CUABI__CU_RAW(k->drv, cuMemImportFromShareableHandle, &h, &fh,
                          CU_MEM_HANDLE_TYPE_FABRIC);
    }
    if (r != CUDA_SUCCESS)
        return cuabi__ipc_driver_refused(r, "cuMemImportFromShareableHandle", caller);
    cuabi_status st = map_chunk(k, h, size, caller);
    if (st != CUABI_SUCCESS)
        (void)CUABI__CU_RELEASE(k->drv, cuMemRelease, h);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_vmm_import(cuabi_buffer **out, cuabi_memory_resource *resource,
                                            const int *fds, size_t count,
                                            const uint8_t *descriptors, size_t size)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY(vmm_resource_of(&r, resource, __func__));
    CUABI__CHECK_ARG(descriptors, "%s: descriptors is NULL", __func__);
    CUABI__CHECK_ARG(count > 0 && count <= MAX_CHUNKS,
                     "%s: count is %zu; a VMM buffer has 1 to %u chunks", __func__, count,
                     MAX_CHUNKS);
    size_t want;
    CUABI__CHECK_ARG(cuabi__size_mul(&want, count, CUABI_IPC_DESCRIPTOR_SIZE) && size == want,
                     "%s: %zu chunks need %zu bytes of descriptors, got %zu", __func__, count,
                     count * (size_t)CUABI_IPC_DESCRIPTOR_SIZE, size);
    vmm_resource *v = r->module_state;
    size_t total;
    cuabi_ipc_kind kind = CUABI_IPC_VMM_CHUNK;
    CUABI__TRY(check_set(&total, &kind, descriptors, count, v->granularity, __func__));
    cuabi_vmm_handle_type ht = kind == CUABI_IPC_VMM_CHUNK ? CUABI_VMM_HANDLE_POSIX_FD
                                                           : CUABI_VMM_HANDLE_FABRIC;
    if (ht != v->handle_type)
        return cuabi__error(CUABI_ERROR_IPC, "%s: the chunks are shared as %s handles but the "
                            "importing resource uses handle type %d", __func__,
                            ht == CUABI_VMM_HANDLE_FABRIC ? "fabric" : "file descriptor",
                            (int)v->handle_type);
    if (ht == CUABI_VMM_HANDLE_POSIX_FD) {
        CUABI__CHECK_ARG(fds, "%s: fds is NULL but the chunks travel as file descriptors",
                         __func__);
        for (size_t i = 0; i < count; i++)
            if (fds[i] < 0 || fcntl(fds[i], F_GETFD) == -1)
                return cuabi__error(CUABI_ERROR_IPC, "%s: fds[%zu] (%d) is not an open file "
                                    "descriptor (each chunk's descriptor comes with the fd "
                                    "cuabi_vmm_export_chunk gave, received here)", __func__, i,
                                    fds[i]);
    }
    /* The exporter: another live process of this host, a device it names
     * that is visible here. */
    cuabi_device *hdev = NULL;
    cuabi__device *edev;
    const cuabi__driver *drv;
    /* the device handle comes back on a late failure too (activating it) */
    cuabi_status opened = cuabi__ipc_open_begin(&scope, &hdev, &edev, descriptors,
                                                CUABI_IPC_DESCRIPTOR_SIZE, kind, &drv, __func__);
    if (hdev)
        cuabi__handle_release(hdev, CUABI__T_DEVICE);
    CUABI__TRY_SCOPE(opened);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, r->device, drv));
    vmm_block *k = block_new(drv, r->device);
    if (!k)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    k->imported = true;
    k->granularity = v->granularity;
    k->handle_type = ht;
    k->id = cuabi__ipc_get(descriptors + CUABI__IPC_OFFSET, 8);
    memcpy(k->uuid, descriptors + CUABI__IPC_UUID, 16);
    pthread_mutex_lock(&v->lock);
    cuabi_status st = access_copy(&k->access, &v->access);
    pthread_mutex_unlock(&v->lock);
    if (st == CUABI_SUCCESS)
        st = chunks_room(k, count, __func__);
    CUdeviceptr base = 0;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuMemAddressReserve, &base, total,
                       v->addr_align ? v->addr_align : v->granularity, 0, 0);
    if (st != CUABI_SUCCESS) {
        block_free(k);
        CUABI__SCOPE_RETURN(st);
    }
    k->base = (uintptr_t)base;
    k->reserved = total;
    for (size_t i = 0; st == CUABI_SUCCESS && i < count; i++)
        st = import_chunk(k, descriptors + i * CUABI_IPC_DESCRIPTOR_SIZE, kind,
                          fds ? fds[i] : -1, __func__);
    k->size = k->requested = k->mapped;
    if (st == CUABI_SUCCESS)
        st = cuabi_buffer_wrap(out, CUABI__HANDLE(r->device, cuabi_device), r->kind, k->base,
                               total, import_release, k);
    if (st != CUABI_SUCCESS) {
        cuabi_status keep = st;
        (void)unmap_from(k, 0);
        (void)CUABI__CU_RELEASE(drv, cuMemAddressFree, base, total);
        block_free(k);
        CUABI__SCOPE_RETURN(keep);
    }
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, BUFFER, __func__);
}
