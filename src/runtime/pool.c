/* Memory pools: statistics and attributes of pool resources
 * (cuMemPoolGetAttribute / cuMemPoolSetAttribute), a one-call summary and
 * its text for logs, and resources over the pools of a location (a device,
 * the host, a host NUMA node). */
#include "platform/release.h"
#include "runtime/memory.h"

#include <stdio.h>
#include <string.h>

/* A resource over a driver pool (made here or elsewhere, or mapped from
 * another process), with its device current in *scope. */
static cuabi_status pool_of(cuabi__context_scope *scope, cuabi__memory_resource **r,
                            cuabi_memory_resource *resource, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(resource, CUABI__T_MEMORY_RESOURCE, &obj, caller));
    *r = obj;
    if ((*r)->impl != CUABI__RES_POOL && (*r)->impl != CUABI__RES_IPC_MAPPED)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the resource is not a memory pool (a device's or location's "
                            "pool, cuabi_memory_resource_pool_create, an IPC pool)", caller);
    return cuabi__device_enter(scope, (*r)->device, (*r)->drv);
}

static bool attribute_valid(cuabi_pool_attribute a)
{
    return a >= CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES && a <= CUABI_POOL_USED_MEM_HIGH;
}

static bool attribute_is_flag(cuabi_pool_attribute a)
{
    return a <= CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

/* One attribute: the reuse flags are ints to the driver, the rest 64-bit. */
static cuabi_status get_attribute(uint64_t *out, const cuabi__memory_resource *r,
                                  cuabi_pool_attribute a, const char *caller)
{
    if (attribute_is_flag(a)) {
        int v = 0;
        CUABI__TRY(CUABI__CU_IN(caller, r->drv, cuMemPoolGetAttribute, r->pool,
                                (CUmemPool_attribute)a, &v));
        *out = (uint64_t)(v != 0);
        return CUABI_SUCCESS;
    }
    cuuint64_t v = 0;
    CUABI__TRY(CUABI__CU_IN(caller, r->drv, cuMemPoolGetAttribute, r->pool,
                            (CUmemPool_attribute)a, &v));
    *out = v;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_pool_get_attribute(uint64_t *out,
                                                    cuabi_memory_resource *resource,
                                                    cuabi_pool_attribute attribute)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__CHECK_ARG(attribute_valid(attribute), "%s: %d is not a cuabi_pool_attribute",
                     __func__, (int)attribute);
    CUABI__TRY_SCOPE(pool_of(&scope, &r, resource, __func__));
    scope_st = get_attribute(out, r, attribute, __func__);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_pool_set_attribute(cuabi_memory_resource *resource,
                                                    cuabi_pool_attribute attribute,
                                                    uint64_t value)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(attribute_valid(attribute), "%s: %d is not a cuabi_pool_attribute",
                     __func__, (int)attribute);
    CUABI__CHECK_ARG(attribute != CUABI_POOL_RESERVED_MEM_CURRENT &&
                         attribute != CUABI_POOL_USED_MEM_CURRENT,
                     "%s: the current reserved and used figures are read only", __func__);
    CUABI__CHECK_ARG(!attribute_is_flag(attribute) || value <= 1,
                     "%s: a reuse policy is 0 or 1, not %llu", __func__,
                     (unsigned long long)value);
    CUABI__CHECK_ARG((attribute != CUABI_POOL_RESERVED_MEM_HIGH &&
                      attribute != CUABI_POOL_USED_MEM_HIGH) || value == 0,
                     "%s: a high-water mark can only be set to 0 (a reset), not %llu", __func__,
                     (unsigned long long)value);
    CUABI__TRY_SCOPE(pool_of(&scope, &r, resource, __func__));
    if (attribute_is_flag(attribute)) {
        int v = (int)value;
        CUABI__SCOPE_RETURN(CUABI__CU(r->drv, cuMemPoolSetAttribute, r->pool, (CUmemPool_attribute)attribute,
                         &v));
    }
    cuuint64_t v = value;
    CUABI__SCOPE_RETURN(CUABI__CU(r->drv, cuMemPoolSetAttribute, r->pool, (CUmemPool_attribute)attribute, &v));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_pool_reset_high_water(cuabi_memory_resource *resource)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__TRY_SCOPE(pool_of(&scope, &r, resource, __func__));
    cuuint64_t zero = 0;
    CUABI__TRY_SCOPE(CUABI__CU(r->drv, cuMemPoolSetAttribute, r->pool,
                         CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    zero = 0;
    scope_st = CUABI__CU(r->drv, cuMemPoolSetAttribute, r->pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                     &zero);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_pool_stats_get(cuabi_pool_stats *out,
                                                cuabi_memory_resource *resource)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__CHECK_OPTS(out, "cuabi_pool_stats", CUABI_POOL_STATS_VERSION, false);
    CUABI__TRY_SCOPE(pool_of(&scope, &r, resource, __func__));
    uint64_t v[CUABI_POOL_USED_MEM_HIGH + 1];
    for (int a = CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES; a <= CUABI_POOL_USED_MEM_HIGH; a++) {
        cuabi_status st = get_attribute(&v[a], r, (cuabi_pool_attribute)a, __func__);
        /* A mapped host pool answers no attribute query (INVALID_VALUE on an
         * H100, 2026-11-28): its counters read 0; what cuabi knows of it
         * (location, owner, IPC role, size limit) is still given. */
        if (st != CUABI_SUCCESS && r->impl == CUABI__RES_IPC_MAPPED &&
            cuabi_last_error()->cu_result == CUDA_ERROR_INVALID_VALUE) {
            v[a] = 0;
            cuabi_error_clear();
            continue;
        }
        if (st != CUABI_SUCCESS)
            CUABI__SCOPE_RETURN(st);
    }
    out->reserved_current = v[CUABI_POOL_RESERVED_MEM_CURRENT];
    out->reserved_high = v[CUABI_POOL_RESERVED_MEM_HIGH];
    out->used_current = v[CUABI_POOL_USED_MEM_CURRENT];
    out->used_high = v[CUABI_POOL_USED_MEM_HIGH];
    out->release_threshold = v[CUABI_POOL_RELEASE_THRESHOLD];
    out->reuse_follow_event_dependencies = (int)v[CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES];
    out->reuse_allow_opportunistic = (int)v[CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC];
    out->reuse_allow_internal_dependencies = (int)v[CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES];
    out->max_size = r->max_size;
    if (r->location_type != CUABI_LOCATION_NONE) {
        out->location_type = r->location_type;
        out->location_id = r->location_id;
    } else {
        out->location_type = CUABI_LOCATION_DEVICE;
        out->location_id = r->device ? r->device->ordinal : 0;
    }
    out->owned = r->owns_pool;
    out->ipc = r->impl == CUABI__RES_IPC_MAPPED ? 2 : r->ipc_pool_id ? 1 : 0;
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ------------------------------------------------------------- the text */

/* A byte count as people read it: "0 B", "512 B", "1.5 KiB" ... "2.0 TiB". */
static void human(char *out, size_t n, uint64_t bytes)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (bytes < 1024) {
        snprintf(out, n, "%llu B", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, n, "%.1f %s", v, units[u]);
}

static const char *location_name(cuabi_location_type t)
{
    switch (t) {
    case CUABI_LOCATION_DEVICE: return "device";
    case CUABI_LOCATION_HOST: return "host";
    case CUABI_LOCATION_HOST_NUMA: return "host NUMA node";
    case CUABI_LOCATION_HOST_NUMA_CURRENT: return "host NUMA node (current)";
    default: return "unknown location";
    }
}

CUABI_EXTERN(cuabi_status) cuabi_pool_stats_format(char *out, size_t *size,
                                                   const cuabi_pool_stats *stats)
{
    CUABI__CHECK_ARG(size, "%s: size is NULL", __func__);
    CUABI__CHECK_OPTS(stats, "cuabi_pool_stats", CUABI_POOL_STATS_VERSION, false);
    CUABI__CHECK_ARG(out || *size == 0, "%s: out is NULL but *size is %zu", __func__, *size);
    char rc[32], rh[32], uc[32], uh[32], th[32], mx[32], where[48];
    human(rc, sizeof rc, stats->reserved_current);
    human(rh, sizeof rh, stats->reserved_high);
    human(uc, sizeof uc, stats->used_current);
    human(uh, sizeof uh, stats->used_high);
    if (stats->release_threshold == UINT64_MAX)
        snprintf(th, sizeof th, "keep all");
    else
        human(th, sizeof th, stats->release_threshold);
    if (stats->max_size)
        human(mx, sizeof mx, stats->max_size);
    else
        snprintf(mx, sizeof mx, "driver default");
    if (stats->location_type == CUABI_LOCATION_HOST)
        snprintf(where, sizeof where, "host");
    else
        snprintf(where, sizeof where, "%s %d", location_name(stats->location_type),
                 stats->location_id);
    char line[512];
    int n = snprintf(line, sizeof line,
                     "pool %s%s%s: reserved %s (high %s), used %s (high %s), release threshold "
                     "%s, max size %s, reuse: follow-events %s, opportunistic %s, "
                     "internal-dependencies %s", where,
                     stats->ipc == 1 ? " (IPC)" : stats->ipc == 2 ? " (mapped)" : "",
                     stats->owned ? " (owned)" : "", rc, rh, uc, uh, th, mx,
                     stats->reuse_follow_event_dependencies ? "on" : "off",
                     stats->reuse_allow_opportunistic ? "on" : "off",
                     stats->reuse_allow_internal_dependencies ? "on" : "off");
    size_t need = (size_t)n + 1;
    size_t have = *size;
    *size = need;
    if (have < need)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                            "%s: the text needs %zu bytes, got %zu", __func__, need, have);
    memcpy(out, line, need);
    return CUABI_SUCCESS;
}

/* --------------------------------------------------- pools of a location */

/* A host location's pool (CUDA 13) gives the devices no access of their
 * own: without read-write access granted by cuMemPoolSetAccess, a device
 * memset, copy or kernel on its memory fails (CUDA_ERROR_INVALID_VALUE on
 * an H100). The resource's device gets it (cuabi__pool_grant_device_access).
 * The driver's pool is one per location and process, so the grant holds for
 * every user of that pool in the process, and outlives the resource. */

CUABI_EXTERN(cuabi_status) cuabi_pool_at_location(cuabi_memory_resource **out,
                                                  cuabi_device *device,
                                                  cuabi_location_type location_type,
                                                  int location_id, cuabi_pool_which which)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(location_type == CUABI_LOCATION_DEVICE ||
                         location_type == CUABI_LOCATION_HOST ||
                         location_type == CUABI_LOCATION_HOST_NUMA,
                     "%s: a pool's location is CUABI_LOCATION_DEVICE, _HOST or _HOST_NUMA, not "
                     "%d", __func__, (int)location_type);
    CUABI__CHECK_ARG(which == CUABI_POOL_CURRENT || which == CUABI_POOL_DEFAULT,
                     "%s: %d is not a cuabi_pool_which", __func__, (int)which);
    CUABI__CHECK_ARG(location_type == CUABI_LOCATION_HOST || location_id >= 0,
                     "%s: location id %d is negative", __func__, location_id);
    CUABI__TRY_SCOPE(cuabi__gpu_resource_begin(&scope, out, device, &dev, &drv, __func__));
    CUmemLocation loc = { .type = (CUmemLocationType)location_type,
                          .id = location_type == CUABI_LOCATION_HOST ? 0 : location_id };
    CUmemoryPool pool = NULL;
    bool current = which == CUABI_POOL_CURRENT;
    if (drv->cuMemGetMemPool && drv->cuMemGetDefaultMemPool) {
        /* CUDA 13: any location. */
        if (current)
            CUABI__TRY_SCOPE(CUABI__CU(drv, cuMemGetMemPool, &pool, &loc,
                                 CU_MEM_ALLOCATION_TYPE_PINNED));
        else
            CUABI__TRY_SCOPE(CUABI__CU(drv, cuMemGetDefaultMemPool, &pool, &loc,
                                 CU_MEM_ALLOCATION_TYPE_PINNED));
    } else if (location_type == CUABI_LOCATION_DEVICE) {
        CUdevice cu;
        CUABI__TRY_SCOPE(CUABI__CU(drv, cuDeviceGet, &cu, location_id));
        if (current)
            CUABI__TRY_SCOPE(CUABI__CU(drv, cuDeviceGetMemPool, &pool, cu));
        else
            CUABI__TRY_SCOPE(CUABI__CU(drv, cuDeviceGetDefaultMemPool, &pool, cu));
    } else {
        CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the driver has no host memory pools (cuMemGetMemPool, CUDA "
                            "13.0+)", __func__));
    }
    if (location_type != CUABI_LOCATION_DEVICE) {
        char where[48];
        cuabi__pool_location_text(where, sizeof where, location_type, location_id);
        CUABI__TRY_SCOPE(cuabi__pool_grant_device_access(drv, pool, dev, where, __func__));
    }
    cuabi__memory_resource *r;
    CUABI__SCOPE_RETURN(cuabi__resource_pool_publish(out, &r, dev, drv, pool, CUABI__RES_POOL, false, 0,
                                        location_type, loc.id));
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, MEMORY_RESOURCE, __func__);
}
