/* Green contexts: SM resources (the device's, the groups and remainder of a
 * split, a green context's), green contexts made of them, and their
 * streams.
 *
 * What an H100 said (driver 580.159.04, tests/runtime/test_gpu_green.c and
 * docs/green-contexts.md): 132 SMs, minimum partition 8 and alignment 8
 * (with CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING: 2 and 2); a split asks for
 * groups of at least min_count SMs and gets them rounded up; the groups and
 * the remainder a split hands back carry no minimum or alignment of their
 * own (0); cuGreenCtxCreate wants CU_GREEN_CTX_DEFAULT_STREAM and
 * cuGreenCtxStreamCreate CU_STREAM_NON_BLOCKING; a kernel's CUfunction of
 * the primary context launches on a green stream and runs on the
 * partition's SMs only, so every launch path takes green streams as they
 * are; a stream whose green context was destroyed refuses every call, its
 * destroy included (CUDA_ERROR_CONTEXT_IS_DESTROYED), so a stream keeps its
 * green context alive; cuStreamDestroy of a green stream and
 * cuGreenCtxDestroy left a GLOBAL capture on another stream intact (not on
 * the release list of platform/release.h). */
#include <string.h>

#include "platform/release.h"
#include "runtime/event.h"
#include "runtime/green.h"
#include "runtime/stream.h"

/* The most groups one split makes, and resources one green context takes:
 * far above any GPU's SM count, low enough for one small allocation. */
#define MAX_GROUPS 1024

static _Atomic uint64_t split_ids;

/* A refusal of the driver's: "not supported" in cuabi's words, the rest as
 * every driver failure. */
static cuabi_status green_refused(CUresult r, const char *entry, const char *caller)
{
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
        cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                     "%s: %s: the driver does not support green contexts on this device "
                     "(CUDA_ERROR_NOT_SUPPORTED; they need compute capability 6.0+ and a CUDA "
                     "12.4+ driver)", caller, entry);
        cuabi__error_set_cu((int)r);
        return CUABI_ERROR_NOT_SUPPORTED;
    }
    return cuabi__cu_check(r, entry, caller);
}

static inline cuabi_status green_result(CUresult r, const char *entry, const char *caller)
{
    return CUABI__LIKELY(r == CUDA_SUCCESS) ? CUABI_SUCCESS : green_refused(r, entry, caller);
}

/* A driver call of this module (fault injection included): a missing
 * entry point, a refusal, or success. */
#define GREEN_CU(drv, fn, caller, ...)                                        \
    ((drv)->fn ? green_result(CUABI__CU_RAW(drv, fn, __VA_ARGS__), CUABI__FN_NAME(fn), (caller)) \
               : cuabi__missing_entry(CUABI__FN_NAME(fn), (caller)))

/* ------------------------------------------------------------ SM resources */

static void resource_destroy(cuabi__object *o)
{
    cuabi__sm_resource *r = (cuabi__sm_resource *)o;
    if (r->owner)
        cuabi__object_release(r->owner);
    cuabi__object_release(&r->device->base);
    cuabi__free(r);
}

/* A handle for `res`, retaining `dev` (and `owner` when not NULL). */
static cuabi_status resource_new(cuabi_sm_resource **out, cuabi__device *dev,
                                 cuabi__object *owner, const CUdevResource *res,
                                 cuabi_sm_resource_kind kind, uint64_t split_id, int index)
{
    cuabi__sm_resource *r = cuabi__calloc(1, sizeof *r);
    if (!r)
        return CUABI_ERROR_OUT_OF_MEMORY;
    r->device = dev;
    r->owner = owner;
    r->res = *res;
    r->kind = kind;
    r->split_id = split_id;
    r->index = index;
    cuabi_status st = cuabi__handle_register(&r->base, CUABI__T_SM_RESOURCE, resource_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(r);
        return st;
    }
    cuabi__object_retain(&dev->base);
    if (owner)
        cuabi__object_retain(owner);
    *out = CUABI__HANDLE(r, cuabi_sm_resource);
    return CUABI_SUCCESS;
}

/* A resource the driver handed back must be an SM resource. */
static cuabi_status check_sm(const CUdevResource *res, const char *entry, const char *caller)
{
    if (res->type != CU_DEV_RESOURCE_TYPE_SM)
        return cuabi__error(CUABI_ERROR_CUDA, "%s: %s handed back a resource of type %d, not "
                            "SMs (%d)", caller, entry, (int)res->type, (int)CU_DEV_RESOURCE_TYPE_SM);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_device_sm_resource(cuabi_sm_resource **out, cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUdevResource res;
    memset(&res, 0, sizeof res);
    CUABI__TRY(GREEN_CU(drv, cuDeviceGetDevResource, __func__, dev->cu_device, &res,
                        CU_DEV_RESOURCE_TYPE_SM));
    CUABI__TRY(check_sm(&res, "cuDeviceGetDevResource", __func__));
    return resource_new(out, dev, NULL, &res, CUABI_SM_RESOURCE_DEVICE, 0, -1);
}

CUABI_EXTERN(cuabi_status) cuabi_sm_resource_get_info(cuabi_sm_resource_info *out,
                                                      cuabi_sm_resource *resource)
{
    cuabi__sm_resource *r;
    CUABI__CHECK_OPTS(out, "cuabi_sm_resource_info", CUABI_SM_RESOURCE_INFO_VERSION, false);
    CUABI__GET(r, resource, SM_RESOURCE);
    out->sm_count = (int)r->res.sm.smCount;
    out->min_partition_size = (int)r->res.sm.minSmPartitionSize;
    out->coscheduled_alignment = (int)r->res.sm.smCoscheduledAlignment;
    out->kind = r->kind;
    out->ordinal = r->device->ordinal;
    out->split_id = r->split_id;
    out->index = r->index;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_sm_resource_device(cuabi_device **out, cuabi_sm_resource *resource)
{
    cuabi__sm_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(r, resource, SM_RESOURCE);
    *out = CUABI__HANDLE(r->device, cuabi_device);
    return CUABI_SUCCESS;
}

/* The handles of one split: every group, then the remainder; all or none. */
static cuabi_status split_handles(cuabi_sm_resource **groups, cuabi_sm_resource **remainder,
                                  const cuabi__sm_resource *in, const CUdevResource *res,
                                  unsigned n, const CUdevResource *rem)
{
    uint64_t id = atomic_fetch_add(&split_ids, 1) + 1;
    cuabi_status st = CUABI_SUCCESS;
    unsigned made = 0;
    for (; made < n && st == CUABI_SUCCESS; made++)
        if ((st = check_sm(&res[made], "cuDevSmResourceSplitByCount", "cuabi_sm_resource_split")) ==
            CUABI_SUCCESS)
            st = resource_new(&groups[made], in->device, in->owner, &res[made],
                              CUABI_SM_RESOURCE_GROUP, id, (int)made);
    if (st == CUABI_SUCCESS && remainder && rem->type == CU_DEV_RESOURCE_TYPE_SM &&
        rem->sm.smCount > 0)
        st = resource_new(remainder, in->device, in->owner, rem, CUABI_SM_RESOURCE_REMAINDER,
                          id, -1);
    if (st != CUABI_SUCCESS) {
        for (unsigned i = 0; i < n; i++)
            if (groups[i]) {
                cuabi__handle_release(groups[i], CUABI__T_SM_RESOURCE);
                groups[i] = NULL;
            }
    }
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_sm_resource_split(cuabi_sm_resource **groups, size_t *count,
                                                   cuabi_sm_resource **remainder,
                                                   cuabi_sm_resource *input,
                                                   const cuabi_sm_split_options *options)
{
    static const cuabi_sm_split_options defaults = CUABI_SM_SPLIT_OPTIONS_INIT;
    cuabi__sm_resource *in;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(count, "%s: count is NULL", __func__);
    if (remainder)
        *remainder = NULL;
    size_t want = *count;
    if (groups) {
        CUABI__CHECK_ARG(want >= 1 && want <= MAX_GROUPS, "%s: *count = %zu groups; ask for "
                         "1 to %d (or pass groups = NULL for a dry run)", __func__, want,
                         MAX_GROUPS);
        memset(groups, 0, want * sizeof *groups);
    }
    CUABI__GET(in, input, SM_RESOURCE);
    CUABI__CHECK_OPTS(options, "cuabi_sm_split_options", CUABI_SM_SPLIT_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    unsigned known = CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING | CUABI_SM_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
    CUABI__CHECK_ARG((options->flags & ~known) == 0, "%s: unknown split flags 0x%x", __func__,
                     options->flags & ~known);
    CUABI__CHECK_ARG(in->kind != CUABI_SM_RESOURCE_GROUP && in->kind != CUABI_SM_RESOURCE_REMAINDER,
                     "%s: the input is a %s of a split, which the driver does not split again; "
                     "make a green context of it and split cuabi_green_ctx_sm_resource()",
                     __func__, in->kind == CUABI_SM_RESOURCE_GROUP ? "group" : "remainder");
    CUABI__CHECK_ARG(options->min_count <= in->res.sm.smCount,
                     "%s: options->min_count = %u is more than the resource's %u SMs", __func__,
                     options->min_count, in->res.sm.smCount);
    CUABI__TRY(cuabi__driver_get(&drv));
    unsigned n = 0;
    if (!groups) {   /* a dry run: how many groups the driver would make */
        CUABI__TRY(GREEN_CU(drv, cuDevSmResourceSplitByCount, __func__, NULL, &n, &in->res, NULL,
                            options->flags, options->min_count));
        *count = n;
        return CUABI_SUCCESS;
    }
    CUdevResource *res = cuabi__calloc(want, sizeof *res);
    if (!res)
        return CUABI_ERROR_OUT_OF_MEMORY;
    CUdevResource rem;
    memset(&rem, 0, sizeof rem);
    n = (unsigned)want;
    cuabi_status st = GREEN_CU(drv, cuDevSmResourceSplitByCount, __func__, res, &n, &in->res,
                               remainder ? &rem : NULL, options->flags, options->min_count);
    if (st == CUABI_SUCCESS && n > want)
        st = cuabi__error(CUABI_ERROR_CUDA, "%s: cuDevSmResourceSplitByCount made %u groups in "
                          "room for %zu", __func__, n, want);
    if (st == CUABI_SUCCESS)
        st = split_handles(groups, remainder, in, res, n, &rem);
    cuabi__free(res);
    if (st == CUABI_SUCCESS)
        *count = n;
    return st;
}

/* ------------------------------------------------------------ green contexts */

static void green_destroy(cuabi__object *o)
{
    cuabi__green_ctx *g = (cuabi__green_ctx *)o;
    const cuabi__driver *drv;
    if (cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuGreenCtxDestroy)
        CUABI__CU_RELEASE(drv, cuGreenCtxDestroy, g->cu_green);
    pthread_mutex_destroy(&g->lock);
    cuabi__object_release(&g->device->base);
    cuabi__free(g);
}

/* The resources of a green context, checked: handles of the device, and
 * when more than one, distinct groups (and remainder) of one split. Their
 * CUdevResources are copied into `res`. */
static cuabi_status gather(CUdevResource *res, cuabi__sm_resource **objs, cuabi__device *dev,
                           cuabi_sm_resource **resources, size_t count, const char *caller)
{
    for (size_t i = 0; i < count; i++) {
        void *obj;
        CUABI__TRY(cuabi__handle_get(resources[i], CUABI__T_SM_RESOURCE, &obj, caller));
        cuabi__sm_resource *r = obj;
        if (r->device != dev)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: resources[%zu] is of device "
                                "%d, not of device %d", caller, i, r->device->ordinal,
                                dev->ordinal);
        for (size_t j = 0; j < i; j++)
            if (objs[j] == r)
                return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: resources[%zu] and "
                                    "resources[%zu] are the same resource", caller, j, i);
        objs[i] = r;
        res[i] = r->res;
    }
    for (size_t i = 0; count > 1 && i < count; i++)
        if (objs[i]->split_id == 0 || objs[i]->split_id != objs[0]->split_id)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a green context of several "
                                "resources takes groups (and the remainder) of one split "
                                "(the driver's rule); resources[%zu] is %s", caller, i,
                                objs[i]->split_id == 0 ? "not a split's"
                                                       : "of another split than resources[0]");
    return CUABI_SUCCESS;
}

/* The driver's green context of `res`, its CUcontext and its SMs. */
static cuabi_status green_make(cuabi__green_ctx *g, CUdevResource *res, unsigned count,
                               const cuabi__driver *drv, const char *caller)
{
    CUdevResourceDesc desc = NULL;
    CUABI__TRY(GREEN_CU(drv, cuDevResourceGenerateDesc, caller, &desc, res, count));
    CUABI__TRY(GREEN_CU(drv, cuGreenCtxCreate, caller, &g->cu_green, desc, g->device->cu_device,
                        CU_GREEN_CTX_DEFAULT_STREAM));
    CUdevResource sm;
    memset(&sm, 0, sizeof sm);
    cuabi_status st = GREEN_CU(drv, cuCtxFromGreenCtx, caller, &g->cu_ctx, g->cu_green);
    if (st == CUABI_SUCCESS)
        st = GREEN_CU(drv, cuGreenCtxGetDevResource, caller, g->cu_green, &sm,
                      CU_DEV_RESOURCE_TYPE_SM);
    if (st == CUABI_SUCCESS)
        st = check_sm(&sm, "cuGreenCtxGetDevResource", caller);
    if (st != CUABI_SUCCESS) {
        if (drv->cuGreenCtxDestroy)
            CUABI__CU_RELEASE(drv, cuGreenCtxDestroy, g->cu_green);
        return st;
    }
    g->sm_count = (int)sm.sm.smCount;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------- workqueues
 *
 * CUDA 13.1's workqueue configuration resource, which the CUDA 13.0 cuda.h
 * this library builds against lacks: the type value and the wqConfig member
 * of CUdevResource's union (at the union's offset, where .sm is), as CUDA
 * 13.1's cuda.h and the driver's documentation give them. A 13.0 driver
 * refuses the type (CUDA_ERROR_INVALID_VALUE or _INVALID_RESOURCE_TYPE):
 * CUABI_ERROR_NOT_SUPPORTED saying so. */
#define WQ_CONFIG_TYPE ((CUdevResourceType)1000)   /* CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG */

typedef struct wq_config {
    CUdevice device;
    unsigned int wqConcurrencyLimit;
    int sharingScope;                               /* CUdevWorkqueueConfigScope */
} wq_config;

_Static_assert(sizeof(wq_config) <= sizeof(((CUdevResource *)0)->_oversize),
               "CUDA 13.1's wqConfig fits CUdevResource's union");

static wq_config *wq_of(CUdevResource *r)
{
    return (wq_config *)(void *)&r->sm;
}

/* The workqueue configuration of a device (g NULL) or a green context. */
static cuabi_status wq_query(CUdevResource *res, const cuabi__driver *drv, CUdevice dev,
                             CUgreenCtx g, const char *caller)
{
    const char *entry = g ? "cuGreenCtxGetDevResource" : "cuDeviceGetDevResource";
    if (g ? !drv->cuGreenCtxGetDevResource : !drv->cuDeviceGetDevResource)
        return cuabi__missing_entry(entry, caller);
    memset(res, 0, sizeof *res);
    CUresult r = g ? CUABI__CU_RAW(drv, cuGreenCtxGetDevResource, g, res, WQ_CONFIG_TYPE)
                   : CUABI__CU_RAW(drv, cuDeviceGetDevResource, dev, res, WQ_CONFIG_TYPE);
    if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_RESOURCE_TYPE ||
        r == CUDA_ERROR_NOT_SUPPORTED) {
        cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                     "%s: %s refused CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG (CUresult %d): "
                     "workqueue resources need a CUDA 13.1+ driver", caller, entry, (int)r);
        cuabi__error_set_cu((int)r);
        return CUABI_ERROR_NOT_SUPPORTED;
    }
    CUABI__TRY(green_result(r, entry, caller));
    if (res->type != WQ_CONFIG_TYPE)
        return cuabi__error(CUABI_ERROR_CUDA, "%s: %s handed back a resource of type %d, not a "
                            "workqueue configuration (%d)", caller, entry, (int)res->type,
                            (int)WQ_CONFIG_TYPE);
    return CUABI_SUCCESS;
}

static void wq_fill(cuabi_workqueue_config *out, CUdevResource *res, int ordinal)
{
    const wq_config *c = wq_of(res);
    out->concurrency_limit = c->wqConcurrencyLimit;
    out->sharing_scope = (cuabi_workqueue_scope)c->sharingScope;
    out->ordinal = ordinal;
}

CUABI_EXTERN(cuabi_status) cuabi_device_workqueue_config(cuabi_workqueue_config *out,
                                                         cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_OPTS(out, "cuabi_workqueue_config", CUABI_WORKQUEUE_CONFIG_VERSION, false);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUdevResource res;
    CUABI__TRY(wq_query(&res, drv, dev->cu_device, NULL, __func__));
    wq_fill(out, &res, dev->ordinal);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_workqueue_config(cuabi_workqueue_config *out,
                                                            cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    const cuabi__driver *drv;
    CUABI__CHECK_OPTS(out, "cuabi_workqueue_config", CUABI_WORKQUEUE_CONFIG_VERSION, false);
    CUABI__GET(g, green, GREEN_CTX);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUdevResource res;
    CUABI__TRY(wq_query(&res, drv, 0, g->cu_green, __func__));
    wq_fill(out, &res, g->device->ordinal);
    return CUABI_SUCCESS;
}

static cuabi_status green_create(cuabi_green_ctx **out, cuabi_device *device,
                                 cuabi_sm_resource **resources, size_t count,
                                 const cuabi_workqueue_config *wq, const char *caller)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", caller);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(resources, "%s: resources is NULL", caller);
    CUABI__CHECK_ARG(count >= 1 && count <= MAX_GROUPS, "%s: count = %zu; give 1 to %d resources",
                     caller, count, MAX_GROUPS);
    if (wq) {
        if (wq->version == 0 || wq->version > CUABI_WORKQUEUE_CONFIG_VERSION)
            return cuabi__error(CUABI_ERROR_INVALID_VERSION, "%s: cuabi_workqueue_config "
                                "version %u is not supported (this library knows 1..%u; use "
                                "CUABI_WORKQUEUE_CONFIG_INIT)", caller, (unsigned)wq->version,
                                (unsigned)CUABI_WORKQUEUE_CONFIG_VERSION);
        CUABI__CHECK_ARG(wq->concurrency_limit >= 1, "%s: workqueue->concurrency_limit is 0; "
                         "give 1 or more", caller);
        CUABI__CHECK_ARG(wq->sharing_scope == CUABI_WORKQUEUE_SCOPE_DEVICE_CTX ||
                         wq->sharing_scope == CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED,
                         "%s: workqueue->sharing_scope is %d, not a cuabi_workqueue_scope",
                         caller, (int)wq->sharing_scope);
    }
    size_t total = count + (wq ? 1 : 0);
    CUdevResource *res = cuabi__calloc(total, sizeof *res);
    cuabi__sm_resource **objs = res ? cuabi__calloc(count, sizeof *objs) : NULL;
    cuabi__green_ctx *g = objs ? cuabi__calloc(1, sizeof *g) : NULL;
    cuabi_status st = g ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    if (st == CUABI_SUCCESS)
        st = gather(res, objs, dev, resources, count, caller);
    if (st == CUABI_SUCCESS)
        st = cuabi__driver_get(&drv);
    /* The workqueue configuration: the device's, as the driver hands it
     * (its internal part included), with the caller's limit and scope. */
    if (st == CUABI_SUCCESS && wq) {
        st = wq_query(&res[count], drv, dev->cu_device, NULL, caller);
        if (st == CUABI_SUCCESS) {
            wq_of(&res[count])->wqConcurrencyLimit = wq->concurrency_limit;
            wq_of(&res[count])->sharingScope = (int)wq->sharing_scope;
        }
    }
    /* The driver retains the primary context for the green one; having it
     * active first spares a second initialisation (cuGreenCtxCreate). */
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the caller's comes back */
    if (st == CUABI_SUCCESS)
        st = cuabi__device_enter(&scope, dev, drv);
    if (st == CUABI_SUCCESS) {
        g->device = dev;
        st = green_make(g, res, (unsigned)total, drv, caller);
    }
    cuabi__free(res);
    cuabi__free(objs);
    if (st != CUABI_SUCCESS) {
        cuabi__free(g);
        return cuabi__context_end(&scope, st);
    }
    /* Published inside the scope: a failed restore releases it (all or
     * nothing, CUABI__CONTEXT_END_OUT). */
    pthread_mutex_init(&g->lock, NULL);
    st = cuabi__handle_register(&g->base, CUABI__T_GREEN_CTX, green_destroy);
    if (st != CUABI_SUCCESS) {
        if (drv->cuGreenCtxDestroy)
            CUABI__CU_RELEASE(drv, cuGreenCtxDestroy, g->cu_green);
        pthread_mutex_destroy(&g->lock);
        cuabi__free(g);
        return cuabi__context_end(&scope, st);
    }
    cuabi__object_retain(&dev->base);
    *out = CUABI__HANDLE(g, cuabi_green_ctx);
    return CUABI__CONTEXT_END_OUT(&scope, st, out, GREEN_CTX, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_create(cuabi_green_ctx **out, cuabi_device *device,
                                                  cuabi_sm_resource **resources,
                                                  size_t count)
{
    return green_create(out, device, resources, count, NULL, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_create_with_workqueue(
    cuabi_green_ctx **out, cuabi_device *device, cuabi_sm_resource **resources, size_t count,
    const cuabi_workqueue_config *workqueue)
{
    return green_create(out, device, resources, count, workqueue, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_sm_resource(cuabi_sm_resource **out,
                                                       cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(g, green, GREEN_CTX);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUdevResource res;
    memset(&res, 0, sizeof res);
    CUABI__TRY(GREEN_CU(drv, cuGreenCtxGetDevResource, __func__, g->cu_green, &res,
                        CU_DEV_RESOURCE_TYPE_SM));
    CUABI__TRY(check_sm(&res, "cuGreenCtxGetDevResource", __func__));
    return resource_new(out, g->device, &g->base, &res, CUABI_SM_RESOURCE_GREEN_CTX, 0, -1);
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_sm_count(int *out, cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(g, green, GREEN_CTX);
    *out = g->sm_count;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_device(cuabi_device **out, cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(g, green, GREEN_CTX);
    *out = CUABI__HANDLE(g->device, cuabi_device);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_raw(uintptr_t *out, cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(g, green, GREEN_CTX);
    *out = (uintptr_t)g->cu_green;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_context(uintptr_t *out, cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(g, green, GREEN_CTX);
    *out = (uintptr_t)g->cu_ctx;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ streams */

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_stream_create(cuabi_stream **out,
                                                         cuabi_green_ctx *green,
                                                         const cuabi_stream_options *options)
{
    static const cuabi_stream_options defaults = CUABI_STREAM_OPTIONS_INIT;
    cuabi__green_ctx *g;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(g, green, GREEN_CTX);
    CUABI__CHECK_OPTS(options, "cuabi_stream_options", CUABI_STREAM_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    CUABI__CHECK_ARG((options->flags & ~(unsigned)CUABI_STREAM_NON_BLOCKING) == 0,
                     "%s: unknown stream flags 0x%x", __func__, options->flags);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUstream raw;
    CUABI__TRY(GREEN_CU(drv, cuGreenCtxStreamCreate, __func__, &raw, g->cu_green,
                        CU_STREAM_NON_BLOCKING, options->priority));
    cuabi_status st = cuabi__stream_new(out, g->device, raw, true, &g->base, g->sm_count);
    if (st != CUABI_SUCCESS && drv->cuStreamDestroy)
        CUABI__CU_RELEASE(drv, cuStreamDestroy, raw);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_stream_green_ctx(cuabi_green_ctx **out, cuabi_stream *stream)
{
    cuabi__stream *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(s, stream, STREAM);
    if (s->green)
        *out = CUABI__HANDLE((cuabi__green_ctx *)s->green, cuabi_green_ctx);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ current */

cuabi_status cuabi__green_enter(cuabi__green_ctx *g, const cuabi__driver *drv, const char *caller)
{
    if (!drv->cuCtxPushCurrent || !drv->cuCtxPopCurrent)
        return cuabi__missing_entry(!drv->cuCtxPushCurrent ? "cuCtxPushCurrent" : "cuCtxPopCurrent",
                                    caller);
    pthread_mutex_lock(&g->lock);
    cuabi_status st = CUABI__CU_IN(caller, drv, cuCtxPushCurrent, g->cu_ctx);
    if (st != CUABI_SUCCESS)
        pthread_mutex_unlock(&g->lock);
    return st;
}

/* The pop undoes this thread's own push, so it cannot be refused short of
 * a broken driver; it is called directly, outside fault injection: an
 * injected failure would leave the green context current on this thread
 * for good, out of its lock (test_faults found that). */
void cuabi__green_leave(cuabi__green_ctx *g, const cuabi__driver *drv)
{
    CUcontext popped;
    (void)drv->cuCtxPopCurrent(&popped);
    pthread_mutex_unlock(&g->lock);
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_synchronize(cuabi_green_ctx *green)
{
    cuabi__green_ctx *g;
    const cuabi__driver *drv;
    CUABI__GET(g, green, GREEN_CTX);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__green_enter(g, drv, __func__));
    cuabi_status st = CUABI__CU(drv, cuCtxSynchronize);
    cuabi__green_leave(g, drv);
    return st;
}

/* ------------------------------------------------------------ events */

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_record_event(cuabi_green_ctx *green, cuabi_event *event)
{
    cuabi__green_ctx *g;
    cuabi__event *e;
    const cuabi__driver *drv;
    CUABI__GET(g, green, GREEN_CTX);
    CUABI__GET(e, event, EVENT);
    CUABI__CHECK_ARG(e->device == g->device, "%s: the event is of device %d, the green context "
                     "of device %d (the driver wants both of one primary context)", __func__,
                     e->device->ordinal, g->device->ordinal);
    CUABI__TRY(cuabi__driver_get(&drv));
    return GREEN_CU(drv, cuGreenCtxRecordEvent, __func__, g->cu_green, e->cu_event);
}

CUABI_EXTERN(cuabi_status) cuabi_green_ctx_wait_event(cuabi_green_ctx *green, cuabi_event *event)
{
    cuabi__green_ctx *g;
    cuabi__event *e;
    const cuabi__driver *drv;
    CUABI__GET(g, green, GREEN_CTX);
    CUABI__GET(e, event, EVENT);
    CUABI__TRY(cuabi__driver_get(&drv));
    return GREEN_CU(drv, cuGreenCtxWaitEvent, __func__, g->cu_green, e->cu_event);
}
