/* Devices and their primary contexts.
 *
 * One cuabi__device object per ordinal while any reference lives, so the
 * same handle value comes back for the same GPU and the primary context is
 * retained once. The object retains the primary context lazily (first call
 * that needs it) and releases it when destroyed. */
#include "platform/release.h"
#include "runtime/stream.h"
#include "runtime/event.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static cuabi__device **devices;   /* indexed by ordinal; NULL when none lives */
static int devices_len;

static void device_destroy(cuabi__object *o)
{
    cuabi__device *dev = (cuabi__device *)o;
    pthread_mutex_lock(&devices_lock);
    if (dev->ordinal < devices_len && devices[dev->ordinal] == dev)
        devices[dev->ordinal] = NULL;
    pthread_mutex_unlock(&devices_lock);
    CUcontext ctx = atomic_load(&dev->primary);
    const cuabi__driver *drv;
    bool have_drv = cuabi__driver_get(&drv) == CUABI_SUCCESS;
    if (dev->order_event && have_drv)   /* before the context it lives in is released */
        CUABI__CU_RELEASE(drv, cuEventDestroy, dev->order_event);
    if (ctx && have_drv && drv->cuDevicePrimaryCtxRelease)
        CUABI__CU_RELEASE(drv, cuDevicePrimaryCtxRelease, dev->cu_device);
    pthread_mutex_destroy(&dev->order_lock);
    cuabi__free(dev);
}

CUABI_EXTERN(cuabi_status) cuabi_device_count(int *out)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    const cuabi__driver *drv;
    cuabi_status st = cuabi__driver_get(&drv);
    if (st == CUABI_ERROR_NO_DEVICE) {
        cuabi_error_clear();
        return CUABI_SUCCESS; /* a driver without GPUs: zero devices */
    }
    CUABI__TRY(st);
    return CUABI__CU(drv, cuDeviceGetCount, out);
}

/* Take a reference on a live device object unless it is being destroyed. */
static bool try_retain(cuabi__device *dev)
{
    int64_t r = atomic_load(&dev->base.refs);
    while (r > 0)
        if (atomic_compare_exchange_weak(&dev->base.refs, &r, r + 1))
            return true;
    return false;
}

static cuabi_status device_new(cuabi__device **out, int ordinal, const cuabi__driver *drv)
{
    CUdevice cu;
    CUABI__TRY(CUABI__CU(drv, cuDeviceGet, &cu, ordinal));
    cuabi__device *dev = cuabi__calloc(1, sizeof *dev);
    if (!dev)
        return CUABI_ERROR_OUT_OF_MEMORY;
    dev->ordinal = ordinal;
    dev->cu_device = cu;
    if (pthread_mutex_init(&dev->order_lock, NULL) != 0) {
        cuabi__free(dev);
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "cuabi_device_get: cannot create a mutex");
    }
    cuabi_status st = cuabi__handle_register(&dev->base, CUABI__T_DEVICE, device_destroy);
    if (st != CUABI_SUCCESS) {
        pthread_mutex_destroy(&dev->order_lock);
        cuabi__free(dev);
        return st;
    }
    *out = dev;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_get(cuabi_device **out, int ordinal)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    int count;
    CUABI__TRY(cuabi_device_count(&count));
    if (ordinal < 0 || ordinal >= count)
        return cuabi__error(count ? CUABI_ERROR_INVALID_ARGUMENT : CUABI_ERROR_NO_DEVICE,
                            "%s: device ordinal %d is out of range (%d device%s visible)",
                            __func__, ordinal, count, count == 1 ? "" : "s");
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&devices_lock);
    if (devices_len < count) {
        cuabi__device **grown = cuabi__realloc(devices, (size_t)count * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&devices_lock);
            return CUABI_ERROR_OUT_OF_MEMORY;
        }
        memset(grown + devices_len, 0, (size_t)(count - devices_len) * sizeof *grown);
        devices = grown;
        devices_len = count;
    }
    cuabi__device *dev = devices[ordinal];
    if (!dev || !try_retain(dev)) {
        st = device_new(&dev, ordinal, drv);
        if (st == CUABI_SUCCESS)
            devices[ordinal] = dev;
    }
    pthread_mutex_unlock(&devices_lock);
    if (st == CUABI_SUCCESS)
        *out = CUABI__HANDLE(dev, cuabi_device);
    return st;
}

/* The device's primary context, retained on first use. */
CUABI__HOT
cuabi_status cuabi__device_primary(CUcontext *out, cuabi__device *dev, const cuabi__driver *drv)
{
    CUcontext ctx = atomic_load_explicit(&dev->primary, memory_order_acquire);
    if (CUABI__UNLIKELY(!ctx)) {
        CUcontext fresh;
        CUABI__TRY(CUABI__CU(drv, cuDevicePrimaryCtxRetain, &fresh, dev->cu_device));
        CUcontext expected = NULL;
        if (atomic_compare_exchange_strong(&dev->primary, &expected, fresh)) {
            ctx = fresh;
        } else {
            CUABI__CU_RELEASE(drv, cuDevicePrimaryCtxRelease, dev->cu_device); /* lost the race */
            ctx = expected;
        }
    }
    *out = ctx;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__device_make_current(cuabi__device *dev, const cuabi__driver *drv)
{
    CUcontext ctx;
    CUABI__TRY(cuabi__device_primary(&ctx, dev, drv));
    CUcontext current = NULL;
    CUABI__TRY(CUABI__CU(drv, cuCtxGetCurrent, &current));
    if (current == ctx)
        return CUABI_SUCCESS;
    return CUABI__CU(drv, cuCtxSetCurrent, ctx);
}

cuabi_status cuabi__context_save(cuabi__context_scope *scope, const cuabi__driver *drv)
{
    if (scope->set)
        return CUABI_SUCCESS;   /* the caller's is remembered already */
    CUABI__TRY(CUABI__CU(drv, cuCtxGetCurrent, &scope->restore));
    scope->drv = drv;
    scope->set = true;
    return CUABI_SUCCESS;
}

CUABI__HOT cuabi_status cuabi__context_enter(cuabi__context_scope *scope, CUcontext want,
                                             const cuabi__driver *drv)
{
    CUcontext current = NULL;
    CUABI__TRY(CUABI__CU(drv, cuCtxGetCurrent, &current));
    if (current == want)
        return CUABI_SUCCESS;   /* the one-GPU case: one cuCtxGetCurrent, as activate */
    CUABI__TRY(CUABI__CU(drv, cuCtxSetCurrent, want));
    if (!scope->set) {          /* entered again: the first caller's stays remembered */
        scope->restore = current;
        scope->drv = drv;
        scope->set = true;
    }
    return CUABI_SUCCESS;
}

CUABI__HOT cuabi_status cuabi__device_enter(cuabi__context_scope *scope, cuabi__device *dev,
                                            const cuabi__driver *drv)
{
    CUcontext ctx;
    CUABI__TRY(cuabi__device_primary(&ctx, dev, drv));
    return cuabi__context_enter(scope, ctx, drv);
}

CUABI__HOT
cuabi_status cuabi__context_leave(const cuabi__context_scope *scope, const cuabi__driver *drv,
                                  cuabi_status st)
{
    /* Raw: a failure `st` keeps its own last-error record. */
    if (scope->set && drv->cuCtxSetCurrent(scope->restore) != CUDA_SUCCESS &&
        st == CUABI_SUCCESS)
        st = cuabi__error(CUABI_ERROR_CUDA, "cuCtxSetCurrent: the caller's context could not "
                          "be made current again");
    return st;
}

CUABI__HOT cuabi_status cuabi__context_end(const cuabi__context_scope *scope, cuabi_status st)
{
    return scope->set ? cuabi__context_leave(scope, scope->drv, st) : st;
}

cuabi_status cuabi__context_end_made(const cuabi__context_scope *scope, cuabi_status st,
                                     const void *made, cuabi__handle_type type,
                                     const char *caller)
{
    cuabi_status end = cuabi__context_end(scope, st);
    if (end == CUABI_SUCCESS || st != CUABI_SUCCESS || !made)
        return end;
    (void)cuabi__handle_release(made, type);
    return cuabi__context_made_lost(caller);
}

cuabi_status cuabi__context_made_lost(const char *caller)
{
    /* Recorded after the releases, which may record their own. */
    return cuabi__error(CUABI_ERROR_CUDA, "%s: the caller's context could not be made current "
                        "again (cuCtxSetCurrent), so the call failed and what it made is "
                        "released", caller);
}

CUABI_EXTERN(cuabi_status) cuabi_device_ordinal(int *out, cuabi_device *device)
{
    cuabi__device *dev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(dev, device, DEVICE);
    *out = dev->ordinal;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_attribute(int *out, cuabi_device *device, int attribute)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(attribute >= 1 && attribute < CU_DEVICE_ATTRIBUTE_MAX,
                     "%s: %d is not a CUdevice_attribute (1..%d)", __func__, attribute,
                     (int)CU_DEVICE_ATTRIBUTE_MAX - 1);
    CUABI__TRY(cuabi__driver_get(&drv));
    return CUABI__CU(drv, cuDeviceGetAttribute, out, (CUdevice_attribute)attribute, dev->cu_device);
}

CUABI_EXTERN(cuabi_status) cuabi_device_get_properties(cuabi_device_properties *out,
                                                       cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_OPTS(out, "cuabi_device_properties", CUABI_DEVICE_PROPERTIES_VERSION, false);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    unsigned version = out->version;
    memset(out, 0, sizeof *out);
    out->version = version;
    out->ordinal = dev->ordinal;
    CUABI__TRY(CUABI__CU(drv, cuDeviceGetName, out->name, (int)sizeof out->name, dev->cu_device));
    CUuuid uuid;
    CUABI__TRY(CUABI__CU(drv, cuDeviceGetUuid, &uuid, dev->cu_device));
    memcpy(out->uuid, uuid.bytes, sizeof out->uuid);
    CUABI__TRY(CUABI__CU(drv, cuDeviceGetPCIBusId, out->pci_bus_id, (int)sizeof out->pci_bus_id,
                         dev->cu_device));
    size_t total;
    CUABI__TRY(CUABI__CU(drv, cuDeviceTotalMem, &total, dev->cu_device));
    out->total_memory = total;
    static const struct { CUdevice_attribute attr; size_t offset; } attrs[] = {
#define A(field, name) { CU_DEVICE_ATTRIBUTE_##name, offsetof(cuabi_device_properties, field) }
        A(compute_capability_major, COMPUTE_CAPABILITY_MAJOR),
        A(compute_capability_minor, COMPUTE_CAPABILITY_MINOR),
        A(multiprocessor_count, MULTIPROCESSOR_COUNT), A(warp_size, WARP_SIZE),
        A(max_threads_per_block, MAX_THREADS_PER_BLOCK),
        A(max_block_dim[0], MAX_BLOCK_DIM_X), A(max_block_dim[1], MAX_BLOCK_DIM_Y),
        A(max_block_dim[2], MAX_BLOCK_DIM_Z), A(max_grid_dim[0], MAX_GRID_DIM_X),
        A(max_grid_dim[1], MAX_GRID_DIM_Y), A(max_grid_dim[2], MAX_GRID_DIM_Z),
        A(max_threads_per_multiprocessor, MAX_THREADS_PER_MULTIPROCESSOR),
        A(max_blocks_per_multiprocessor, MAX_BLOCKS_PER_MULTIPROCESSOR),
        A(max_registers_per_block, MAX_REGISTERS_PER_BLOCK),
        A(max_registers_per_multiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR),
        A(max_shared_memory_per_block, MAX_SHARED_MEMORY_PER_BLOCK),
        A(max_shared_memory_per_block_optin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        A(max_shared_memory_per_multiprocessor, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        A(reserved_shared_memory_per_block, RESERVED_SHARED_MEMORY_PER_BLOCK),
        A(l2_cache_size, L2_CACHE_SIZE), A(clock_rate_khz, CLOCK_RATE),
        A(memory_clock_rate_khz, MEMORY_CLOCK_RATE),
        A(memory_bus_width, GLOBAL_MEMORY_BUS_WIDTH),
        A(cooperative_launch, COOPERATIVE_LAUNCH), A(cluster_launch, CLUSTER_LAUNCH),
        A(memory_pools_supported, MEMORY_POOLS_SUPPORTED),
        A(managed_memory, MANAGED_MEMORY),
        A(concurrent_managed_access, CONCURRENT_MANAGED_ACCESS),
        A(unified_addressing, UNIFIED_ADDRESSING), A(integrated, INTEGRATED),
        A(ecc_enabled, ECC_ENABLED),
#undef A
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int *field = (int *)((char *)out + attrs[i].offset);
        /* Attributes a driver does not know read as 0 rather than failing. */
        if (CUABI__CU_RAW(drv, cuDeviceGetAttribute, field, attrs[i].attr, dev->cu_device) != CUDA_SUCCESS)
            *field = 0;
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_memory_info(uint64_t *free_bytes, uint64_t *total_bytes,
                                                    cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(free_bytes && total_bytes, "%s: free_bytes and total_bytes must not be NULL",
                     __func__);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    size_t f, t;
    cuabi_status st = CUABI__CU(drv, cuMemGetInfo, &f, &t);
    if (st == CUABI_SUCCESS) {
        *free_bytes = f;
        *total_bytes = t;
    }
    return cuabi__context_leave(&scope, drv, st);
}

CUABI_EXTERN(cuabi_status) cuabi_device_set_current(cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    return cuabi__device_make_current(dev, drv);   /* the one call that sets it, on purpose */
}

/* The devices this thread pushed, last on top: a pop is refused unless it
 * matches this thread's last push (popping a context someone else put there,
 * or releasing a reference no push took, would break the stack or the
 * device's count). Each push holds a reference on its device, so the primary
 * context stays alive while it is on the stack whatever the caller releases. */
typedef struct pushed_device {
    cuabi__device *dev;
    struct pushed_device *below;
} pushed_device;

static _Thread_local pushed_device *pushed_top;

CUABI_EXTERN(cuabi_status) cuabi_device_push_current(cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuCtxPushCurrent || !drv->cuCtxPopCurrent)
        return cuabi__missing_entry(!drv->cuCtxPushCurrent ? "cuCtxPushCurrent"
                                                           : "cuCtxPopCurrent", __func__);
    CUcontext ctx;
    CUABI__TRY(cuabi__device_primary(&ctx, dev, drv));
    pushed_device *p = cuabi__calloc(1, sizeof *p);
    if (!p)
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of memory", __func__);
    cuabi_status st = CUABI__CU(drv, cuCtxPushCurrent, ctx);
    if (st != CUABI_SUCCESS) {
        cuabi__free(p);
        return st;
    }
    cuabi__object_retain(&dev->base);
    p->dev = dev;
    p->below = pushed_top;
    pushed_top = p;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_pop_current(cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__GET(dev, device, DEVICE);
    pushed_device *p = pushed_top;
    if (!p || p->dev != dev)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: device %d is not the last device "
                            "cuabi_device_push_current pushed on this thread (%s)", __func__,
                            dev->ordinal, p ? "pops go in the reverse order of pushes"
                                            : "nothing was pushed");
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcontext current = NULL;
    CUABI__TRY(CUABI__CU(drv, cuCtxGetCurrent, &current));
    /* Refused before anything is popped: the top of the stack is another
     * context now (cuabi_device_set_current or cuCtxSetCurrent replaced it,
     * or a push of someone else's is not popped yet). */
    if (current != atomic_load_explicit(&dev->primary, memory_order_acquire))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: device %d's context is no longer "
                            "the current one on this thread (set or pushed over since the push)",
                            __func__, dev->ordinal);
    CUcontext popped;
    CUABI__TRY(CUABI__CU(drv, cuCtxPopCurrent, &popped));
    pushed_top = p->below;
    cuabi__free(p);
    cuabi__object_release(&dev->base);   /* the push's reference */
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_synchronize(cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    return cuabi__context_leave(&scope, drv, CUABI__CU(drv, cuCtxSynchronize));
}

CUABI_EXTERN(cuabi_status) cuabi_device_context(uintptr_t *out, cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcontext ctx;   /* retained, not made current */
    CUABI__TRY(cuabi__device_primary(&ctx, dev, drv));
    *out = (uintptr_t)ctx;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_stream_priority_range(int *least, int *greatest,
                                                              cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(least && greatest, "%s: least and greatest must not be NULL", __func__);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    return cuabi__context_leave(&scope, drv,
                                CUABI__CU(drv, cuCtxGetStreamPriorityRange, least, greatest));
}

CUABI_EXTERN(cuabi_status) cuabi_device_can_access_peer(int *out, cuabi_device *device,
                                                        cuabi_device *peer)
{
    cuabi__device *dev, *other;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(dev, device, DEVICE);
    CUABI__GET(other, peer, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    if (dev == other) {
        *out = 0;
        return CUABI_SUCCESS;
    }
    return CUABI__CU(drv, cuDeviceCanAccessPeer, out, dev->cu_device, other->cu_device);
}
