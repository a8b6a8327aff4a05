/* Launches: one-shot (cuabi_launch) and prepared (cuabi_prepared_*).
 *
 * The one-shot path makes only the checks that cost nothing (dimensions,
 * the pack's layout against the kernel, cached per pack) before calling
 * the driver (cuLaunchKernel, or cuLaunchKernelEx when the launch has
 * cluster or cooperative attributes, or a version-2 configuration's
 * cuabi_launch_attributes: launch_attrs.c); when the driver refuses a launch, the full checks run
 * to say why in cuabi's words. Nothing is launched either way. The prepared
 * path runs the full checks once, at creation, and keeps everything the
 * driver call needs: the launch itself is a handle lookup, a context check
 * and the driver call. No launch allocates. */
#include "runtime/argpack.h"
#include "runtime/capture.h"
#include "runtime/kernel.h"
#include "runtime/launch.h"
#include "runtime/launch_attrs.h"
#include "runtime/occupancy.h"

#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------ targets */

typedef struct target {
    cuabi__device *dev;
    cuabi__stream *stream;   /* NULL: the legacy default stream */
    CUstream cu_stream;
} target;

/* Devices used implicitly (a launch naming neither stream nor device),
 * kept for the life of the process as the CUDA runtime keeps its current
 * device: a borrowed target must outlive the launch. */
#define IMPLICIT_DEVICES 64
static _Atomic(cuabi__device *) implicit_devices[IMPLICIT_DEVICES];

/* The device of a launch with neither stream nor device: the one whose
 * context is current on this thread, else the first the kernel was loaded
 * on, else device 0. */
static cuabi_status implicit_device(cuabi__device **out, const cuabi__kernel *k,
                                    const char *caller)
{
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    int ordinal = -1;
    CUcontext ctx = NULL;
    CUdevice cu;
    if (drv->cuCtxGetCurrent && drv->cuCtxGetDevice &&
        CUABI__CU_RAW(drv, cuCtxGetCurrent, &ctx) == CUDA_SUCCESS && ctx &&
        CUABI__CU_RAW(drv, cuCtxGetDevice, &cu) == CUDA_SUCCESS)
        ordinal = (int)cu;   /* CUdevice values are the visible ordinals */
    for (int i = 0; ordinal < 0 && k && i < CUABI__KERNEL_FUNCTION_CACHE; i++)
        if (atomic_load_explicit(&k->functions[i], memory_order_acquire))
            ordinal = i;
    if (ordinal < 0)
        ordinal = 0;
    if (ordinal >= IMPLICIT_DEVICES)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the current device (%d) has no implicit default stream here; "
                            "set config.stream or config.device", caller, ordinal);
    cuabi__device *dev = atomic_load_explicit(&implicit_devices[ordinal], memory_order_acquire);
    if (!dev) {
        cuabi_device *h;
        void *obj;
        CUABI__TRY(cuabi_device_get(&h, ordinal));
        CUABI__TRY(cuabi__handle_get(h, CUABI__T_DEVICE, &obj, caller));
        cuabi__device *expected = NULL;
        dev = obj;
        if (!atomic_compare_exchange_strong(&implicit_devices[ordinal], &expected, dev)) {
            cuabi__object_release(&dev->base);   /* another thread kept it first */
            dev = expected;
        }
    }
    *out = dev;
    return CUABI_SUCCESS;
}

void cuabi__launch_forget_implicit_devices(void)
{
    for (int i = 0; i < IMPLICIT_DEVICES; i++) {
        cuabi__device *dev = atomic_exchange(&implicit_devices[i], NULL);
        if (dev)
            cuabi__object_release(&dev->base);
    }
}

CUABI__HOT static cuabi_status resolve_target(target *t, const cuabi_launch_config *c,
                                              const cuabi__kernel *k, const char *caller)
{
    void *obj;
    t->stream = NULL;
    t->cu_stream = NULL;
    if (c->stream) {
        CUABI__TRY(cuabi__handle_get(c->stream, CUABI__T_STREAM, &obj, caller));
        t->stream = obj;
        t->dev = t->stream->device;
        t->cu_stream = t->stream->cu_stream;
        return CUABI_SUCCESS;
    }
    if (!c->device)
        return implicit_device(&t->dev, k, caller);
    CUABI__TRY(cuabi__handle_get(c->device, CUABI__T_DEVICE, &obj, caller));
    t->dev = obj;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__launch_target(cuabi__device **dev, CUstream *stream,
                                  const cuabi_launch_config *c, const char *caller)
{
    target t;
    if (!c)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: config is NULL", caller);
    if (c->version == 0 || c->version > CUABI_LAUNCH_CONFIG_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_launch_config version %u is not supported (use "
                            "CUABI_LAUNCH_CONFIG_INIT)", caller, c->version);
    CUABI__TRY(resolve_target(&t, c, NULL, caller));
    *dev = t.dev;
    *stream = t.cu_stream;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ checks */

static cuabi_status config_error(const char *caller, const char *fmt, ...) CUABI__PRINTF(2, 3);

#include <stdarg.h>
#include <stdio.h>
static cuabi_status config_error(const char *caller, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cuabi__error(CUABI_ERROR_LAUNCH_CONFIG, "%s: %s", caller, msg);
}

static unsigned long long prod3(const unsigned int v[3])
{
    return (unsigned long long)v[0] * v[1] * v[2];
}

static bool has_cluster(const cuabi_launch_config *c)
{
    return c->cluster[0] || c->cluster[1] || c->cluster[2];
}

/* The common case in a handful of compares: every dimension in range (an
 * unsigned v - 1 < max rejects 0 and too large at once), a block of at most
 * 1024 threads, no cluster. */
static inline bool dims_plain(const cuabi_launch_config *c)
{
    return (c->grid[0] - 1u) < 2147483647u && (c->grid[1] - 1u) < 65535u &&
           (c->grid[2] - 1u) < 65535u && (c->block[0] - 1u) < 1024u &&
           (c->block[1] - 1u) < 1024u && (c->block[2] - 1u) < 64u &&
           (unsigned long long)c->block[0] * c->block[1] * c->block[2] <= 1024 &&
           !(c->cluster[0] | c->cluster[1] | c->cluster[2]) &&
           c->dynamic_shared_bytes <= UINT_MAX;
}

/* Checks that need neither kernel nor device. */
CUABI__HOT static cuabi_status check_dims(const cuabi_launch_config *c, const char *caller)
{
    if (CUABI__LIKELY(dims_plain(c)))
        return CUABI_SUCCESS;
    static const char axis[] = "xyz";
    static const unsigned int max_block[3] = { 1024, 1024, 64 };
    static const unsigned int max_grid[3] = { 2147483647u, 65535, 65535 };
    for (int i = 0; i < 3; i++) {
        if (CUABI__UNLIKELY(c->grid[i] == 0 || c->block[i] == 0))
            return config_error(caller, "grid (%u, %u, %u) and block (%u, %u, %u) dimensions must "
                                "all be at least 1", c->grid[0], c->grid[1], c->grid[2],
                                c->block[0], c->block[1], c->block[2]);
        if (CUABI__UNLIKELY(c->block[i] > max_block[i]))
            return config_error(caller, "block.%c = %u is over the limit of %u", axis[i],
                                c->block[i], max_block[i]);
        if (CUABI__UNLIKELY(c->grid[i] > max_grid[i]))
            return config_error(caller, "grid.%c = %u is over the limit of %u", axis[i],
                                c->grid[i], max_grid[i]);
    }
    if (CUABI__UNLIKELY(prod3(c->block) > 1024))
        return config_error(caller, "a block of %llu threads is over the limit of 1024",
                            prod3(c->block));
    /* The driver takes an unsigned int: a larger size must not reach it
     * truncated (2^32 + 16 bytes would launch with 16). */
    if (CUABI__UNLIKELY(c->dynamic_shared_bytes > UINT_MAX))
        return config_error(caller, "config->dynamic_shared_bytes = %zu is over the driver's "
                            "limit of %u", c->dynamic_shared_bytes, UINT_MAX);
    if (has_cluster(c)) {
        for (int i = 0; i < 3; i++) {
            unsigned int d = c->cluster[i] ? c->cluster[i] : 1;
            if (c->grid[i] % d)
                return config_error(caller, "cluster.%c = %u does not divide grid.%c = %u",
                                    axis[i], d, axis[i], c->grid[i]);
        }
    }
    return CUABI_SUCCESS;
}

static cuabi_status func_attr(int *out, CUfunction_attribute a, CUfunction f,
                              const cuabi__driver *drv)
{
    return CUABI__CU(drv, cuFuncGetAttribute, out, a, f);
}

static cuabi_status dev_attr(int *out, CUdevice_attribute a, cuabi__device *dev,
                             const cuabi__driver *drv)
{
    return CUABI__CU(drv, cuDeviceGetAttribute, out, a, dev->cu_device);
}

/* The SMs a launch on `t` may use: a green context's partition, else 0
 * (the whole device). */
static inline int target_sms(const target *t)
{
    return t->stream ? t->stream->partition_sms : 0;
}

/* Checks against the kernel's attributes and the device (`sms_override`: the SMs of
 * the stream's green context, 0 for the whole device). */
static cuabi_status check_full(CUfunction f, cuabi__device *dev, int sms_override,
                               const cuabi_launch_config *c, const cuabi__driver *drv,
                               const char *caller)
{
    int v = 0;
    unsigned long long threads = prod3(c->block);
    CUABI__TRY(func_attr(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f, drv));
    if (threads > (unsigned long long)v) {
        int regs = 0;
        func_attr(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f, drv);
        return config_error(caller, "a block of %llu threads is larger than the kernel allows (%d, "
                            "from its %d registers per thread or its launch bounds)",
                            threads, v, regs);
    }
    CUABI__TRY(func_attr(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f, drv));
    if (c->dynamic_shared_bytes > (size_t)v) {
        int optin = 0, stat = 0;
        dev_attr(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev, drv);
        func_attr(&stat, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f, drv);
        if (c->dynamic_shared_bytes + (size_t)stat > (size_t)optin)
            return config_error(caller, "%zu bytes of dynamic shared memory plus %d static is over "
                                "the device's limit of %d per block", c->dynamic_shared_bytes,
                                stat, optin);
        return config_error(caller, "%zu bytes of dynamic shared memory is over the kernel's limit "
                            "of %d; raise it with cuabi_kernel_set_attribute("
                            "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) (up to %d)",
                            c->dynamic_shared_bytes, v, optin - stat);
    }
    if (has_cluster(c)) {
        CUABI__TRY(dev_attr(&v, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, dev, drv));
        if (!v)
            return config_error(caller, "thread-block clusters need a GPU of compute capability "
                                "9.0 or newer; this one has none (set config.cluster to 0, 0, 0)");
        unsigned long long size = 1;
        for (int i = 0; i < 3; i++)
            size *= c->cluster[i] ? c->cluster[i] : 1;
        if (size > 8) {
            CUABI__TRY(func_attr(&v, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, f, drv));
            if (!v || size > 16)
                return config_error(caller, "a cluster of %llu blocks is over the portable limit "
                                    "of 8%s", size, size > 16 ? " (and the non-portable one of 16)"
                                    : "; allow more with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_"
                                      "SIZE_ALLOWED");
        }
    }
    if (c->cooperative) {
        CUABI__TRY(dev_attr(&v, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev, drv));
        if (!v)
            return config_error(caller, "this device does not support cooperative launches");
        int per_sm = 0, sms = 0;
        /* The occupancy query works in the current context: the function's
         * device's for the call (a launch on a created or green stream enters
         * none; an H200 refused it with CUDA_ERROR_INVALID_CONTEXT). */
        cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
        CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
        cuabi_status st = CUABI__CU(drv, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                                    &per_sm, f, (int)threads, c->dynamic_shared_bytes, 0);
        CUABI__TRY(cuabi__context_leave(&scope, drv, st));
        if (sms_override > 0)
            sms = sms_override;
        else
            CUABI__TRY(dev_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev, drv));
        unsigned long long blocks = prod3(c->grid), most = (unsigned long long)per_sm * (unsigned)sms;
        if (blocks > most)
            return config_error(caller, "a cooperative grid of %llu blocks is larger than can be "
                                "resident at once (%llu: %d per SM x %d SMs%s)", blocks, most,
                                per_sm, sms, sms_override > 0 ? " of the stream's green context"
                                                              : "");
    }
    const cuabi_launch_attributes *a = cuabi__launch_attributes(c);
    if (a)
        CUABI__TRY(cuabi__launch_attrs_check_device(a, dev, drv, caller));
    return CUABI_SUCCESS;
}

/* The pack against the kernel's parameters, remembered per pack: a pack's
 * layout never changes, nor does a kernel's, and handle values are never
 * reused for another object. */
CUABI__HOT static cuabi_status check_pack(cuabi__argpack *p, cuabi__kernel *k, const char *caller)
{
    if (atomic_load_explicit(&p->checked_kernel, memory_order_relaxed) == k->base.handle)
        return CUABI_SUCCESS;
    size_t n;
    const size_t *offs, *sizes;
    CUABI__TRY(cuabi__kernel_param_layout(k, &n, &offs, &sizes));
    CUABI__TRY(cuabi__argpack_check_layout(p, n, offs, sizes, caller));
    atomic_store_explicit(&p->checked_kernel, k->base.handle, memory_order_relaxed);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ the driver call */

/* Fill `lc` (and its attributes) from a configuration. */
CUABI__HOT void cuabi__launch_fill(CUlaunchConfig *lc, CUlaunchAttribute attrs[2],
                                   const cuabi_launch_config *c, CUstream s)
{
    memset(lc, 0, sizeof *lc);
    lc->gridDimX = c->grid[0];
    lc->gridDimY = c->grid[1];
    lc->gridDimZ = c->grid[2];
    lc->blockDimX = c->block[0];
    lc->blockDimY = c->block[1];
    lc->blockDimZ = c->block[2];
    lc->sharedMemBytes = (unsigned int)c->dynamic_shared_bytes;
    lc->hStream = s;
    lc->attrs = attrs;
    unsigned n = 0;
    if (has_cluster(c)) {
        memset(&attrs[n], 0, sizeof attrs[n]);
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[n].value.clusterDim.x = c->cluster[0] ? c->cluster[0] : 1;
        attrs[n].value.clusterDim.y = c->cluster[1] ? c->cluster[1] : 1;
        attrs[n].value.clusterDim.z = c->cluster[2] ? c->cluster[2] : 1;
        n++;
    }
    if (c->cooperative) {
        memset(&attrs[n], 0, sizeof attrs[n]);
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n].value.cooperative = 1;
        n++;
    }
    lc->numAttrs = n;
}

/* The driver call. Without launch attributes cuLaunchKernel does the same
 * work as cuLaunchKernelEx with less to read (measured on an H200: Ex cost
 * a few percent more per launch), so it is used whenever it can be. */
static inline CUresult drive(const cuabi__driver *drv, const CUlaunchConfig *lc, CUfunction f,
                             void **params, const char **entry)
{
    if (lc->numAttrs == 0 && drv->cuLaunchKernel) {
        *entry = "cuLaunchKernel";
        return drv->cuLaunchKernel(f, lc->gridDimX, lc->gridDimY, lc->gridDimZ, lc->blockDimX,
                                   lc->blockDimY, lc->blockDimZ, lc->sharedMemBytes, lc->hStream,
                                   params, NULL);
    }
    *entry = "cuLaunchKernelEx";
    if (CUABI__UNLIKELY(!drv->cuLaunchKernelEx))
        return CUDA_ERROR_NOT_SUPPORTED;
    return drv->cuLaunchKernelEx(lc, f, params, NULL);
}

/* A launch on the legacy default stream (or a wrapped 0 / CU_STREAM_LEGACY /
 * CU_STREAM_PER_THREAD) goes to the current context's stream, so the device
 * must be made current first; a created or wrapped stream carries its
 * context and needs no cuCtxGetCurrent per launch (cuda-api-wrappers #367
 * dropped the same call). */
static inline bool needs_current_context(const target *t)
{
    return (uintptr_t)t->cu_stream <= 2;
}

/* The driver refused a launch made without making the device current: when
 * it says the context is wrong (a driver that wants one current for every
 * launch), make it current and launch once more. */
static inline bool context_refused(CUresult r)
{
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* drive(), and once more in the device's context (entered in *scope) when
 * the driver refused a launch made without it (see context_refused). */
static inline CUresult drive_in_context(cuabi__context_scope *scope, const cuabi__driver *drv,
                                        const CUlaunchConfig *lc, CUfunction f, void **params,
                                        const char **entry, const target *t)
{
    CUresult r = drive(drv, lc, f, params, entry);
    if (CUABI__UNLIKELY(r != CUDA_SUCCESS) && context_refused(r) && !needs_current_context(t) &&
        cuabi__device_enter(scope, t->dev, drv) == CUABI_SUCCESS)
        r = drive(drv, lc, f, params, entry);
    return r;
}

/* Everything a launch needs, resolved: function, device, stream; a default
 * stream's device made current in *scope (the launch gives the caller's
 * context back). */
CUABI__HOT
static cuabi_status prepare_common(cuabi__context_scope *scope, CUfunction *f, target *t,
                                   cuabi__kernel **k,
                                   cuabi__argpack **p, cuabi_kernel *kernel, cuabi_argpack *pack,
                                   const cuabi_launch_config *config, const cuabi__driver **drv,
                                   const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(kernel, CUABI__T_KERNEL, &obj, caller));
    *k = obj;
    CUABI__TRY(cuabi__handle_get(pack, CUABI__T_ARGPACK, &obj, caller));
    *p = obj;
    if (CUABI__UNLIKELY(!config))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: config is NULL", caller);
    if (CUABI__UNLIKELY(config->version == 0 || config->version > CUABI_LAUNCH_CONFIG_VERSION))
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_launch_config version %u is not supported (use "
                            "CUABI_LAUNCH_CONFIG_INIT)", caller, config->version);
    CUABI__TRY(check_dims(config, caller));
    CUABI__TRY(check_pack(*p, *k, caller));
    CUABI__TRY(resolve_target(t, config, *k, caller));
    CUABI__TRY(cuabi__driver_get(drv));
    CUABI__TRY(cuabi__kernel_function(*k, t->dev, *drv, f, caller));
    return needs_current_context(t) ? cuabi__device_enter(scope, t->dev, *drv) : CUABI_SUCCESS;
}

/* The driver refused a launch: say why in our words when a check can tell. */
static cuabi_status launch_refused(CUresult r, const char *entry, CUfunction f, const target *t,
                                   const cuabi_launch_config *config, const cuabi__driver *drv,
                                   const char *caller)
{
    if (r == CUDA_ERROR_NOT_SUPPORTED && !drv->cuLaunchKernelEx)
        return cuabi__missing_entry(entry, caller);
    CUABI__TRY(check_full(f, t->dev, target_sms(t), config, drv, caller));
    return cuabi__cu_check(r, entry, caller);
}

/* A launch whose configuration carries cuabi_launch_attributes: kept out of
 * cuabi_launch's common path. The attributes' own checks run first (they
 * need no driver), then the launch; a refusal names the attributes. */
static __attribute__((noinline)) cuabi_status
launch_with_attributes(cuabi__context_scope *scope, CUfunction f, const target *t, cuabi__argpack *p,
                                           const cuabi_launch_config *config,
                                           const cuabi__driver *drv, const char *caller)
{
    cuabi__launch_events ev;
    const cuabi_launch_attributes *a = config->attributes;
    CUABI__TRY(cuabi__launch_attrs_check(&ev, a, config, t->dev, caller));
    CUlaunchConfig lc;
    CUlaunchAttribute attrs[CUABI__LAUNCH_MAX_ATTRS];
    cuabi__launch_fill(&lc, attrs, config, t->cu_stream);
    lc.numAttrs = cuabi__launch_attrs_fill(attrs, lc.numAttrs, a, &ev);
    const char *entry;
    CUresult r = drive_in_context(scope, drv, &lc, f, p->params, &entry, t);
    if (r == CUDA_SUCCESS)
        return CUABI_SUCCESS;
    if (r == CUDA_ERROR_NOT_SUPPORTED && !drv->cuLaunchKernelEx)
        return cuabi__missing_entry(entry, caller);
    CUABI__TRY(check_full(f, t->dev, target_sms(t), config, drv, caller));
    return lc.numAttrs ? cuabi__launch_attrs_refused(r, entry, &lc, drv, caller)
                       : cuabi__cu_check(r, entry, caller);
}

CUABI__HOT CUABI_EXTERN(cuabi_status) cuabi_launch(cuabi_kernel *kernel, cuabi_argpack *pack,
                                                   const cuabi_launch_config *config)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUfunction f;
    target t;
    cuabi__kernel *k;
    cuabi__argpack *p;
    const cuabi__driver *drv;
    CUABI__TRY_SCOPE(prepare_common(&scope, &f, &t, &k, &p, kernel, pack, config, &drv, __func__));
    CUABI__TRY_SCOPE(cuabi__argpack_resolve(p, __func__));
    if (CUABI__UNLIKELY(cuabi__capturing())) /* a graph must keep what it runs */
        CUABI__TRY_SCOPE(cuabi__capture_keep_launch(t.cu_stream, k, p, __func__));
    if (CUABI__UNLIKELY(cuabi__launch_attributes(config) != NULL))
        CUABI__SCOPE_RETURN(launch_with_attributes(&scope, f, &t, p, config, drv, __func__));
    CUlaunchConfig lc;
    CUlaunchAttribute attrs[2];
    cuabi__launch_fill(&lc, attrs, config, t.cu_stream);
    const char *entry;
    CUresult r = drive_in_context(&scope, drv, &lc, f, p->params, &entry, &t);
    if (CUABI__UNLIKELY(r != CUDA_SUCCESS))
        CUABI__SCOPE_RETURN(launch_refused(r, entry, f, &t, config, drv, __func__));
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_launch_check(cuabi_kernel *kernel, cuabi_argpack *pack,
                                              const cuabi_launch_config *config)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUfunction f;
    target t;
    cuabi__kernel *k;
    cuabi__argpack *p;
    const cuabi__driver *drv;
    CUABI__TRY_SCOPE(prepare_common(&scope, &f, &t, &k, &p, kernel, pack, config, &drv, __func__));
    const cuabi_launch_attributes *a = cuabi__launch_attributes(config);
    cuabi__launch_events ev;
    if (a)
        CUABI__TRY_SCOPE(cuabi__launch_attrs_check(&ev, a, config, t.dev, __func__));
    scope_st = check_full(f, t.dev, target_sms(&t), config, drv, __func__);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* Every check of cuabi_launch_check with errors naming `caller`, handing
 * back the CUfunction and the device (graph kernel nodes, graph.h). */
cuabi_status cuabi__launch_check_for(CUfunction *f, cuabi__device **dev, cuabi_kernel *kernel,
                                     cuabi_argpack *pack, const cuabi_launch_config *config,
                                     const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    target t;
    cuabi__kernel *k;
    cuabi__argpack *p;
    const cuabi__driver *drv;
    CUABI__TRY_SCOPE(prepare_common(&scope, f, &t, &k, &p, kernel, pack, config, &drv, caller));
    CUABI__TRY_SCOPE(check_full(*f, t.dev, target_sms(&t), config, drv, caller));
    *dev = t.dev;
    scope_st = CUABI_SUCCESS;
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ------------------------------------------------------------ prepared launches */

typedef struct cuabi__prepared {
    cuabi__object base;
    cuabi__kernel *kernel;        /* retained */
    cuabi__argpack *pack;         /* retained */
    cuabi__stream *stream;        /* retained, or NULL */
    cuabi__device *device;        /* retained */
    CUfunction func;
    bool activate;                /* a default stream: make the device current per launch */
    cuabi_launch_config config;   /* stream/device fields are not used after creation;
                                     attributes, if any, points to `attributes` */
    CUlaunchConfig lc;
    CUlaunchAttribute attrs[CUABI__LAUNCH_MAX_ATTRS];
    cuabi_launch_attributes attributes;  /* the caller's, copied */
    cuabi__launch_events events;  /* retained */
} cuabi__prepared;

/* The caller's configuration, only the fields of its version: a version-1
 * caller's struct ends before `attributes`. */
void cuabi__launch_config_copy(cuabi_launch_config *dst, const cuabi_launch_config *src)
{
    size_t size = src->version >= 2 ? sizeof *dst : offsetof(cuabi_launch_config, attributes);
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, size);
    dst->version = CUABI_LAUNCH_CONFIG_VERSION;
    dst->stream = NULL;
    dst->device = NULL;
}

static void events_retain(const cuabi__launch_events *ev)
{
    if (ev->programmatic)
        cuabi__object_retain(&ev->programmatic->base);
    if (ev->completion)
        cuabi__object_retain(&ev->completion->base);
}

static void prepared_destroy(cuabi__object *o)
{
    cuabi__prepared *pl = (cuabi__prepared *)o;
    cuabi__object_release(&pl->kernel->base);
    cuabi__object_release(&pl->pack->base);
    if (pl->stream)
        cuabi__object_release(&pl->stream->base);
    cuabi__object_release(&pl->device->base);
    if (pl->events.programmatic)
        cuabi__object_release(&pl->events.programmatic->base);
    if (pl->events.completion)
        cuabi__object_release(&pl->events.completion->base);
    cuabi__free(pl);
}

CUABI_EXTERN(cuabi_status) cuabi_prepared_create(cuabi_prepared **out, cuabi_kernel *kernel,
                                                 cuabi_argpack *pack,
                                                 const cuabi_launch_config *config)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUfunction f;
    target t;
    cuabi__kernel *k;
    cuabi__argpack *p;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY_SCOPE(prepare_common(&scope, &f, &t, &k, &p, kernel, pack, config, &drv, __func__));
    const cuabi_launch_attributes *a = cuabi__launch_attributes(config);
    cuabi__launch_events ev = { NULL, NULL };
    if (a)
        CUABI__TRY_SCOPE(cuabi__launch_attrs_check(&ev, a, config, t.dev, __func__));
    CUABI__TRY_SCOPE(check_full(f, t.dev, target_sms(&t), config, drv, __func__));
    cuabi__prepared *pl = cuabi__calloc(1, sizeof *pl);
    if (!pl)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    pl->kernel = k;
    pl->pack = p;
    pl->stream = t.stream;
    pl->device = t.dev;
    pl->func = f;
    pl->activate = needs_current_context(&t);
    cuabi__launch_config_copy(&pl->config, config);
    cuabi__launch_fill(&pl->lc, pl->attrs, &pl->config, t.cu_stream);
    if (a) {
        pl->attributes = *a;     /* version 1 is the only one: copy by version once it grows */
        pl->config.attributes = &pl->attributes;
        pl->events = ev;
        pl->lc.numAttrs = cuabi__launch_attrs_fill(pl->attrs, pl->lc.numAttrs, a, &ev);
    }
    cuabi_status st = cuabi__handle_register(&pl->base, CUABI__T_PREPARED, prepared_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(pl);
        CUABI__SCOPE_RETURN(st);
    }
    cuabi__object_retain(&k->base);
    cuabi__object_retain(&p->base);
    if (t.stream)
        cuabi__object_retain(&t.stream->base);
    cuabi__object_retain(&t.dev->base);
    events_retain(&ev);
    *out = CUABI__HANDLE(pl, cuabi_prepared);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, PREPARED, __func__);
}

/* Out of line: the prepared launch's failure path (a refusal for want of a
 * current context is retried once in it: see context_refused). */
static __attribute__((noinline, cold)) cuabi_status
prepared_refused(cuabi__context_scope *scope, cuabi__prepared *pl, const cuabi__driver *drv,
                 CUresult r, const char *entry)
{
    const char *caller = "cuabi_prepared_launch";
    if (context_refused(r) && !pl->activate &&
        cuabi__device_enter(scope, pl->device, drv) == CUABI_SUCCESS)
        r = drive(drv, &pl->lc, pl->func, pl->pack->params, &entry);
    if (r == CUDA_SUCCESS)
        return CUABI_SUCCESS;
    if (!drv->cuLaunchKernelEx && pl->lc.numAttrs)
        return cuabi__missing_entry(entry, caller);
    if (pl->config.attributes && pl->lc.numAttrs)
        return cuabi__launch_attrs_refused(r, entry, &pl->lc, drv, caller);
    return cuabi__cu_check(r, entry, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_prepared_launch(cuabi_prepared *prepared)
{
    cuabi__prepared *pl;
    const cuabi__driver *drv;
    CUABI__GET(pl, prepared, PREPARED);
    CUABI__TRY(cuabi__argpack_resolve(pl->pack, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    if (CUABI__UNLIKELY(cuabi__capturing())) /* a graph must keep what it runs */
        CUABI__TRY(cuabi__capture_keep_launch(pl->lc.hStream, pl->kernel, pl->pack, __func__));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (pl->activate)
        CUABI__TRY(cuabi__device_enter(&scope, pl->device, drv));
    const char *entry;
    CUresult r = drive(drv, &pl->lc, pl->func, pl->pack->params, &entry);
    cuabi_status st = CUABI__LIKELY(r == CUDA_SUCCESS) ? CUABI_SUCCESS
                                                       : prepared_refused(&scope, pl, drv, r, entry);
    return cuabi__context_end(&scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_prepared_pack(cuabi_argpack **out, cuabi_prepared *prepared)
{
    cuabi__prepared *pl;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(pl, prepared, PREPARED);
    *out = CUABI__HANDLE(pl->pack, cuabi_argpack);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_prepared_set_grid(cuabi_prepared *prepared, unsigned int x,
                                                   unsigned int y, unsigned int z)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__prepared *pl;
    const cuabi__driver *drv;
    CUABI__GET(pl, prepared, PREPARED);
    cuabi_launch_config c = pl->config;
    c.grid[0] = x;
    c.grid[1] = y;
    c.grid[2] = z;
    CUABI__TRY(check_dims(&c, __func__));
    if (c.attributes)
        CUABI__TRY(cuabi__launch_attrs_check_grid(c.attributes, c.grid, c.cluster, __func__));
    if (c.cooperative) {
        CUABI__TRY(cuabi__driver_get(&drv));
        CUABI__TRY_SCOPE(cuabi__device_enter(&scope, pl->device, drv));
        CUABI__TRY_SCOPE(check_full(pl->func, pl->device, pl->stream ? pl->stream->partition_sms : 0,
                              &c, drv, __func__));
    }
    pl->config = c;
    pl->lc.gridDimX = x;
    pl->lc.gridDimY = y;
    pl->lc.gridDimZ = z;
    scope_st = CUABI_SUCCESS;
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ------------------------------------------------------------ packs and kernels */

CUABI_EXTERN(cuabi_status) cuabi_argpack_check_kernel(cuabi_argpack *pack, cuabi_kernel *kernel)
{
    cuabi__argpack *p;
    cuabi__kernel *k;
    CUABI__GET(p, pack, ARGPACK);
    CUABI__GET(k, kernel, KERNEL);
    return check_pack(p, k, __func__);
}
