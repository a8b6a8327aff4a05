/* Launch attributes beyond clusters and cooperative launches (see
 * launch_attrs.h): checks before the driver call, the CUlaunchAttribute
 * array, and an error that names the attributes when the driver refuses a
 * launch (the driver only says CUDA_ERROR_INVALID_VALUE). */
#include "runtime/launch_attrs.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static cuabi_status attr_error(cuabi_status st, const char *caller, const char *fmt, ...)
    CUABI__PRINTF(3, 4);
static cuabi_status attr_error(cuabi_status st, const char *caller, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cuabi__error(st, "%s: %s", caller, msg);
}

#define CONFIG_ERROR(caller, ...) attr_error(CUABI_ERROR_LAUNCH_CONFIG, caller, __VA_ARGS__)

static bool any3(const unsigned int v[3])
{
    return v[0] || v[1] || v[2];
}

/* A cluster-like triple as the driver takes it: all 0 is none, a 0 entry
 * of a set triple is 1 (the configuration's cluster rule). */
static unsigned int dim_or_1(unsigned int v)
{
    return v ? v : 1;
}

/* ------------------------------------------------------------ checks */

static cuabi_status check_event(cuabi__event **out, cuabi_event *handle, const char *field,
                                cuabi__device *dev, const char *caller)
{
    void *obj;
    *out = NULL;
    if (!handle)
        return CUABI_SUCCESS;
    if (cuabi__handle_get(handle, CUABI__T_EVENT, &obj, caller) != CUABI_SUCCESS)
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: attributes.%s is not a live cuabi_event (released, or another "
                            "type of handle); NULL for none", caller, field);
    cuabi__event *e = obj;
    if (e->device != dev)
        return CONFIG_ERROR(caller, "attributes.%s is an event of device %d, the launch is on "
                            "device %d", field, e->device->ordinal, dev->ordinal);
    if (!(e->flags & CUABI_EVENT_DISABLE_TIMING))
        return CONFIG_ERROR(caller, "attributes.%s must be created with CUABI_EVENT_DISABLE_TIMING "
                            "(the driver records no timing for launch events)", field);
    *out = e;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__launch_attrs_check_grid(const cuabi_launch_attributes *a,
                                            const unsigned int grid[3],
                                            const unsigned int cluster[3], const char *caller)
{
    static const char axis[] = "xyz";
    if (!any3(a->preferred_cluster))
        return CUABI_SUCCESS;
    if (!any3(cluster))
        return CONFIG_ERROR(caller, "attributes.preferred_cluster needs a cluster size "
                            "(config.cluster): the preferred cluster is a multiple of it");
    for (int i = 0; i < 3; i++) {
        unsigned int p = dim_or_1(a->preferred_cluster[i]), c = dim_or_1(cluster[i]);
        if (i == 2 ? p != c : p % c != 0)
            return CONFIG_ERROR(caller, "attributes.preferred_cluster.%c = %u must %s "
                                "cluster.%c = %u", axis[i], p,
                                i == 2 ? "equal" : "be a multiple of", axis[i], c);
        if (grid[i] % p)
            return CONFIG_ERROR(caller, "attributes.preferred_cluster.%c = %u does not divide "
                                "grid.%c = %u", axis[i], p, axis[i], grid[i]);
    }
    return CUABI_SUCCESS;
}

static bool is_unset_or(int v, int lo, int hi)
{
    return v == CUABI_LAUNCH_UNSET || (v >= lo && v <= hi);
}

static cuabi_status check_access_policy(const cuabi_launch_attributes *a, const char *caller)
{
    if (a->access_policy_bytes == 0)
        return CUABI_SUCCESS;
    if (!a->access_policy_base)
        return CONFIG_ERROR(caller, "attributes.access_policy_base is 0 with a window of %zu "
                            "bytes (set access_policy_bytes to 0 for no window)",
                            a->access_policy_bytes);
    float h = a->access_policy_hit_ratio;
    if (!(h >= 0.0f && h <= 1.0f))
        return CONFIG_ERROR(caller, "attributes.access_policy_hit_ratio = %g is not in 0..1",
                            (double)h);
    if ((unsigned)a->access_policy_hit_property > CUABI_ACCESS_PROPERTY_PERSISTING)
        return CONFIG_ERROR(caller, "attributes.access_policy_hit_property = %d is not a "
                            "cuabi_access_property", (int)a->access_policy_hit_property);
    if ((unsigned)a->access_policy_miss_property > CUABI_ACCESS_PROPERTY_STREAMING)
        return CONFIG_ERROR(caller, "attributes.access_policy_miss_property = %d must be "
                            "CUABI_ACCESS_PROPERTY_NORMAL or _STREAMING (the driver allows no "
                            "persisting misses)", (int)a->access_policy_miss_property);
    return CUABI_SUCCESS;
}

static cuabi_status check_values(const cuabi_launch_attributes *a, const cuabi_launch_config *c,
                                 const char *caller)
{
    if ((unsigned)a->cluster_scheduling_policy > CUABI_CLUSTER_SCHEDULING_LOAD_BALANCING)
        return CONFIG_ERROR(caller, "attributes.cluster_scheduling_policy = %d is not a "
                            "cuabi_cluster_scheduling_policy", (int)a->cluster_scheduling_policy);
    if (a->cluster_scheduling_policy != CUABI_CLUSTER_SCHEDULING_DEFAULT && !any3(c->cluster))
        return CONFIG_ERROR(caller, "attributes.cluster_scheduling_policy needs a cluster size "
                            "(config.cluster)");
    CUABI__TRY(cuabi__launch_attrs_check_grid(a, c->grid, c->cluster, caller));
    CUABI__TRY(check_access_policy(a, caller));
    if (!is_unset_or(a->mem_sync_domain, CUABI_MEM_SYNC_DOMAIN_DEFAULT, CUABI_MEM_SYNC_DOMAIN_REMOTE))
        return CONFIG_ERROR(caller, "attributes.mem_sync_domain = %d is not a cuabi_mem_sync_domain "
                            "(or CUABI_LAUNCH_UNSET)", a->mem_sync_domain);
    const int *map = a->mem_sync_domain_map;
    if ((map[0] == CUABI_LAUNCH_UNSET) != (map[1] == CUABI_LAUNCH_UNSET))
        return CONFIG_ERROR(caller, "attributes.mem_sync_domain_map sets one domain id and leaves "
                            "the other unset; set both (default and remote) or neither");
    for (int i = 0; i < 2; i++)
        if (!is_unset_or(map[i], 0, 255))
            return CONFIG_ERROR(caller, "attributes.mem_sync_domain_map[%d] = %d is not a domain "
                                "id (0..255, below the device's domain count)", i, map[i]);
    if (!is_unset_or(a->preferred_shared_memory_carveout, 0, 100))
        return CONFIG_ERROR(caller, "attributes.preferred_shared_memory_carveout = %d is not a "
                            "percentage (0..100, or CUABI_LAUNCH_UNSET)",
                            a->preferred_shared_memory_carveout);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__launch_attrs_check(cuabi__launch_events *ev, const cuabi_launch_attributes *a,
                                       const cuabi_launch_config *c, cuabi__device *dev,
                                       const char *caller)
{
    if (a->version == 0 || a->version > CUABI_LAUNCH_ATTRIBUTES_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_launch_attributes version %u is not supported (this "
                            "library knows 1..%u; use CUABI_LAUNCH_ATTRIBUTES_INIT)", caller,
                            a->version, (unsigned)CUABI_LAUNCH_ATTRIBUTES_VERSION);
    CUABI__TRY(check_values(a, c, caller));
    CUABI__TRY(check_event(&ev->programmatic, a->programmatic_event, "programmatic_event", dev,
                           caller));
    return check_event(&ev->completion, a->launch_completion_event, "launch_completion_event",
                       dev, caller);
}

cuabi_status cuabi__launch_attrs_check_device(const cuabi_launch_attributes *a, cuabi__device *dev,
                                              const cuabi__driver *drv, const char *caller)
{
    int v = 0;
    if (a->programmatic_event) {
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuDeviceGetAttribute, &v,
                                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev->cu_device));
        if (v < 9)
            return attr_error(CUABI_ERROR_NOT_SUPPORTED, caller,
                              "attributes.programmatic_event needs compute capability 9.0 or "
                              "newer, device %d has %d.x (launch_completion_event works on "
                              "every GPU)", dev->ordinal, v);
    }
    if (a->access_policy_bytes) {
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuDeviceGetAttribute, &v,
                                CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE,
                                dev->cu_device));
        if (v <= 0)
            return attr_error(CUABI_ERROR_NOT_SUPPORTED, caller,
                              "device %d has no L2 access-policy windows (compute capability "
                              "8.0 and newer do); set attributes.access_policy_bytes to 0",
                              dev->ordinal);
        if (a->access_policy_bytes > (size_t)v)
            return CONFIG_ERROR(caller, "attributes.access_policy_bytes = %zu is over device "
                                "%d's largest access-policy window of %d bytes",
                                a->access_policy_bytes, dev->ordinal, v);
    }
    if (a->mem_sync_domain_map[0] != CUABI_LAUNCH_UNSET) {
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuDeviceGetAttribute, &v,
                                CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, dev->cu_device));
        for (int i = 0; i < 2; i++)
            if (a->mem_sync_domain_map[i] >= v)
                return CONFIG_ERROR(caller, "attributes.mem_sync_domain_map[%d] = %d is not below "
                                    "device %d's %d memory sync domains", i,
                                    a->mem_sync_domain_map[i], dev->ordinal, v);
    }
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ the array */

static CUlaunchAttributeValue *add(CUlaunchAttribute *attrs, unsigned *n, CUlaunchAttributeID id)
{
    CUlaunchAttribute *at = &attrs[(*n)++];
    memset(at, 0, sizeof *at);
    at->id = id;
    return &at->value;
}

unsigned cuabi__launch_attrs_fill(CUlaunchAttribute *attrs, unsigned n,
                                  const cuabi_launch_attributes *a, const cuabi__launch_events *ev)
{
    CUlaunchAttributeValue *v;
    if (any3(a->preferred_cluster)) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION);
        v->preferredClusterDim.x = dim_or_1(a->preferred_cluster[0]);
        v->preferredClusterDim.y = dim_or_1(a->preferred_cluster[1]);
        v->preferredClusterDim.z = dim_or_1(a->preferred_cluster[2]);
    }
    if (a->cluster_scheduling_policy != CUABI_CLUSTER_SCHEDULING_DEFAULT) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
        v->clusterSchedulingPolicyPreference = (CUclusterSchedulingPolicy)a->cluster_scheduling_policy;
    }
    if (a->programmatic_stream_serialization) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        v->programmaticStreamSerializationAllowed = 1;
    }
    if (ev->programmatic) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT);
        v->programmaticEvent.event = ev->programmatic->cu_event;
        v->programmaticEvent.triggerAtBlockStart = a->programmatic_event_trigger_at_block_start != 0;
    }
    if (ev->completion) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT);
        v->launchCompletionEvent.event = ev->completion->cu_event;
    }
    if (a->priority != CUABI_LAUNCH_UNSET)
        add(attrs, &n, CU_LAUNCH_ATTRIBUTE_PRIORITY)->priority = a->priority;
    if (a->access_policy_bytes) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
        v->accessPolicyWindow.base_ptr = (void *)a->access_policy_base;
        v->accessPolicyWindow.num_bytes = a->access_policy_bytes;
        v->accessPolicyWindow.hitRatio = a->access_policy_hit_ratio;
        v->accessPolicyWindow.hitProp = (CUaccessProperty)a->access_policy_hit_property;
        v->accessPolicyWindow.missProp = (CUaccessProperty)a->access_policy_miss_property;
    }
    if (a->mem_sync_domain != CUABI_LAUNCH_UNSET)
        add(attrs, &n, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)->memSyncDomain =
            (CUlaunchMemSyncDomain)a->mem_sync_domain;
    if (a->mem_sync_domain_map[0] != CUABI_LAUNCH_UNSET) {
        v = add(attrs, &n, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP);
        v->memSyncDomainMap.default_ = (unsigned char)a->mem_sync_domain_map[0];
        v->memSyncDomainMap.remote = (unsigned char)a->mem_sync_domain_map[1];
    }
    if (a->preferred_shared_memory_carveout != CUABI_LAUNCH_UNSET)
        add(attrs, &n, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)->sharedMemCarveout =
            (unsigned)a->preferred_shared_memory_carveout;
    if (a->nvlink_util_centric_scheduling)
        add(attrs, &n, CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING)
            ->nvlinkUtilCentricScheduling = 1;
    return n;
}

/* ------------------------------------------------------------ refusals */

/* Each attribute by its cuabi name, and the first driver version that
 * knows it (0: every driver with cuLaunchKernelEx). */
static const struct attr_name {
    CUlaunchAttributeID id;
    const char *name;
    int driver;
} attr_names[] = {
    { CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, "access_policy_window", 0 },
    { CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "cooperative", 0 },
    { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster", 0 },
    { CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, "cluster_scheduling_policy", 0 },
    { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, "programmatic_stream_serialization", 0 },
    { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, "programmatic_event", 0 },
    { CU_LAUNCH_ATTRIBUTE_PRIORITY, "priority", 0 },
    { CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, "mem_sync_domain_map", 12000 },
    { CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "mem_sync_domain", 12000 },
    { CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, "preferred_cluster", 12080 },
    { CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT, "launch_completion_event", 12030 },
    { CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, "preferred_shared_memory_carveout", 0 },
    { CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING, "nvlink_util_centric_scheduling", 13000 },
};

static const struct attr_name *attr_lookup(CUlaunchAttributeID id)
{
    for (size_t i = 0; i < sizeof attr_names / sizeof attr_names[0]; i++)
        if (attr_names[i].id == id)
            return &attr_names[i];
    return NULL;
}

/* "name value" of one attribute into buf. */
static void describe(char *buf, size_t cap, const CUlaunchAttribute *at)
{
    const struct attr_name *an = attr_lookup(at->id);
    const char *name = an ? an->name : "unknown attribute";
    const CUlaunchAttributeValue *v = &at->value;
    switch (at->id) {
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        snprintf(buf, cap, "%s (%u, %u, %u)", name, v->clusterDim.x, v->clusterDim.y,
                 v->clusterDim.z);
        break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        snprintf(buf, cap, "%s (%u, %u, %u)", name, v->preferredClusterDim.x,
                 v->preferredClusterDim.y, v->preferredClusterDim.z);
        break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        snprintf(buf, cap, "%s %d", name, (int)v->clusterSchedulingPolicyPreference);
        break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        snprintf(buf, cap, "%s %d", name, v->priority);
        break;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        snprintf(buf, cap, "%s (%zu bytes at %p, hit ratio %g)", name,
                 v->accessPolicyWindow.num_bytes, v->accessPolicyWindow.base_ptr,
                 (double)v->accessPolicyWindow.hitRatio);
        break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        snprintf(buf, cap, "%s %d", name, (int)v->memSyncDomain);
        break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        snprintf(buf, cap, "%s (%u, %u)", name, v->memSyncDomainMap.default_,
                 v->memSyncDomainMap.remote);
        break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        snprintf(buf, cap, "%s %u%%", name, v->sharedMemCarveout);
        break;
    default:
        snprintf(buf, cap, "%s", name);
        break;
    }
}

static void append(char *buf, size_t cap, size_t *len, const char *s)
{
    int n = snprintf(buf + *len, cap - *len, "%s", s);
    if (n > 0)
        *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

cuabi_status cuabi__launch_attrs_refused(CUresult r, const char *entry, const CUlaunchConfig *lc,
                                         const cuabi__driver *drv, const char *caller)
{
    int version = cuabi__driver_info()->version;
    char list[1024] = "", old[512] = "", one[160];
    size_t ll = 0, ol = 0;
    for (unsigned i = 0; i < lc->numAttrs; i++) {
        describe(one, sizeof one, &lc->attrs[i]);
        append(list, sizeof list, &ll, i ? ", " : "");
        append(list, sizeof list, &ll, one);
        const struct attr_name *an = attr_lookup(lc->attrs[i].id);
        if (an && an->driver > version) {
            char need[96];
            snprintf(need, sizeof need, "%s%s needs a CUDA %d.%d driver", ol ? "; " : "",
                     an->name, an->driver / 1000, an->driver % 1000 / 10);
            append(old, sizeof old, &ol, need);
        }
    }
    const char *name = NULL;
    if (drv->cuGetErrorName)
        drv->cuGetErrorName(r, &name);
    cuabi_status st = r == CUDA_ERROR_NOT_SUPPORTED || ol ? CUABI_ERROR_NOT_SUPPORTED
                    : r == CUDA_ERROR_INVALID_VALUE ? CUABI_ERROR_LAUNCH_CONFIG
                    : r == CUDA_ERROR_OUT_OF_MEMORY ? CUABI_ERROR_DEVICE_OUT_OF_MEMORY
                    : CUABI_ERROR_CUDA;
    const char *what = name ? name : "a CUDA error";
    if (ol)
        cuabi__error(st, "%s: %s refused the launch with %s (%d); its launch attributes: %s (%s; "
                     "this driver is %d.%d)", caller, entry, what, (int)r, list, old,
                     version / 1000, version % 1000 / 10);
    else if (st == CUABI_ERROR_LAUNCH_CONFIG || st == CUABI_ERROR_NOT_SUPPORTED)
        cuabi__error(st, "%s: %s refused the launch with %s (%d): one of its launch attributes is "
                     "not supported by this driver or device, or not with this kernel: %s",
                     caller, entry, what, (int)r, list);
    else
        cuabi__error(st, "%s: %s failed with %s (%d); the launch had the attributes: %s", caller,
                     entry, what, (int)r, list);
    cuabi__error_set_cu((int)r);
    return st;
}
