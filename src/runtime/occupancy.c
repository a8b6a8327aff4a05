/* Occupancy: live answers from the driver, offline answers from the
 * calculator in occupancy_calc.c and the limits table in arch_limits.c. */
#include "runtime/occupancy.h"
#include "runtime/green.h"
#include "runtime/kernel.h"
#include "runtime/launch.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

CUABI_EXTERN(const char *) cuabi_occupancy_limiter_name(cuabi_occupancy_limiter limiter)
{
    switch (limiter) {
    case CUABI_OCCUPANCY_LIMIT_WARPS: return "warps";
    case CUABI_OCCUPANCY_LIMIT_REGISTERS: return "registers";
    case CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY: return "shared memory";
    case CUABI_OCCUPANCY_LIMIT_BLOCKS: return "blocks";
    case CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE: return "block size";
    default: return "none";
    }
}

static void limits_out(cuabi_arch_limits *out, const cuabi__arch_limits *a)
{
    out->arch = a->arch;
    snprintf(out->example_gpu, sizeof out->example_gpu, "%s", a->example);
    out->sm_count = a->sm_count;
    out->warp_size = a->warp_size;
    out->max_threads_per_block = a->max_threads_per_block;
    out->max_threads_per_sm = a->max_threads_per_sm;
    out->max_blocks_per_sm = a->max_blocks_per_sm;
    out->registers_per_sm = a->regs_per_sm;
    out->registers_per_block = a->regs_per_block;
    out->max_registers_per_thread = a->max_regs_per_thread;
    out->shared_bytes_per_sm = a->smem_per_sm;
    out->shared_bytes_per_block = a->smem_per_block;
    out->shared_bytes_per_block_optin = a->smem_per_block_optin;
    out->reserved_shared_bytes_per_block = a->smem_reserved_per_block;
    out->max_cluster_size = a->max_cluster_size;
    out->max_cluster_size_nonportable = a->max_cluster_size_nonportable;
}

/* The table entry for a name, or a NOT_FOUND error naming `caller`. */
static cuabi_status find_arch(const cuabi__arch_limits **out, const char *arch, const char *caller)
{
    if (!arch)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: arch is NULL", caller);
    int n = cuabi__arch_parse(arch);
    if (n < 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: \"%s\" is not an architecture name (like \"sm_90\")", caller, arch);
    *out = cuabi__arch_limits_find(n);
    if (!*out)
        return cuabi__error(CUABI_ERROR_NOT_FOUND,
                            "%s: no limits known for sm_%d (known: sm_70 to sm_121; "
                            "cuabi_arch_limits_at lists them)", caller, n);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_arch_limits_get(cuabi_arch_limits *out, const char *arch)
{
    const cuabi__arch_limits *a;
    CUABI__CHECK_OPTS(out, "cuabi_arch_limits", CUABI_ARCH_LIMITS_VERSION, false);
    CUABI__TRY(find_arch(&a, arch, __func__));
    limits_out(out, a);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_arch_limits_at(cuabi_arch_limits *out, size_t index)
{
    CUABI__CHECK_OPTS(out, "cuabi_arch_limits", CUABI_ARCH_LIMITS_VERSION, false);
    const cuabi__arch_limits *a = cuabi__arch_limits_at(index);
    if (!a)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: index %zu is past the end of the table",
                            __func__, index);
    limits_out(out, a);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ shared */

static void result_out(cuabi_occupancy_result *out, const cuabi__occ_result *r, int blocks,
                       int block_size, const cuabi__arch_limits *a)
{
    int warps_per_block = (block_size + a->warp_size - 1) / a->warp_size;
    out->active_blocks_per_sm = blocks;
    out->active_warps_per_sm = blocks * warps_per_block;
    int max_warps = a->max_threads_per_sm / a->warp_size;
    out->occupancy = max_warps ? (double)out->active_warps_per_sm / max_warps : 0.0;
    out->limiter = (cuabi_occupancy_limiter)r->limiter;
    out->limiters = r->limiters;
    out->limit_warps = r->limit_warps;
    out->limit_registers = r->limit_regs;
    out->limit_shared_memory = r->limit_smem;
    out->limit_blocks = r->limit_blocks;
    out->registers_per_block = r->regs_per_block;
    out->shared_bytes_per_block = r->smem_per_block;
}

/* ------------------------------------------------------------ offline */

typedef struct offline {
    const cuabi__arch_limits *arch;
    cuabi__arch_limits limits;      /* with options.sm_count applied */
    cuabi__occ_kernel kernel;
    int carveout;
} offline;

static cuabi_status offline_setup(offline *o, const char *arch,
                                  const cuabi_kernel_resources *res,
                                  const cuabi_occupancy_options *opts, const char *caller)
{
    static const cuabi_occupancy_options defaults = CUABI_OCCUPANCY_OPTIONS_INIT;
    if (!res)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: resources is NULL", caller);
    if (res->version == 0 || res->version > CUABI_KERNEL_RESOURCES_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_kernel_resources version %u is not supported", caller,
                            res->version);
    if (opts && (opts->version == 0 || opts->version > CUABI_OCCUPANCY_OPTIONS_VERSION))
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_occupancy_options version %u is not supported (use "
                            "CUABI_OCCUPANCY_OPTIONS_INIT)", caller, opts->version);
    if (!opts)
        opts = &defaults;
    CUABI__TRY(find_arch(&o->arch, arch, caller));
    o->limits = *o->arch;
    /* Grid sizes are blocks per SM times SMs, in an int. */
    if (opts->sm_count > INT_MAX / (o->limits.max_blocks_per_sm > 0 ? o->limits.max_blocks_per_sm
                                                                     : 1))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: options->sm_count %d is too large (grid sizes of %d blocks per "
                            "SM would overflow an int)", caller, opts->sm_count,
                            o->limits.max_blocks_per_sm);
    if (opts->sm_count > 0)
        o->limits.sm_count = opts->sm_count;
    if (res->registers < 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: resources->registers is negative",
                            caller);
    if (opts->carveout < -1 || opts->carveout > 100)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: options->carveout %d is not -1 or a percentage", caller,
                            opts->carveout);
    o->carveout = opts->carveout;
    o->kernel.registers = res->registers;
    o->kernel.static_smem = res->shared_static_bytes;
    o->kernel.max_threads_per_block = res->max_threads_per_block;
    size_t dflt = o->limits.smem_per_block > res->shared_static_bytes
                      ? o->limits.smem_per_block - res->shared_static_bytes : 0;
    o->kernel.max_dynamic_smem = opts->max_dynamic_shared_bytes < 0
                                     ? dflt : (size_t)opts->max_dynamic_shared_bytes;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_offline_max_active_blocks(
    cuabi_occupancy_result *out, const char *arch, const cuabi_kernel_resources *resources,
    int block_size, size_t dynamic_shared_bytes, const cuabi_occupancy_options *options)
{
    offline o;
    CUABI__CHECK_OPTS(out, "cuabi_occupancy_result", CUABI_OCCUPANCY_RESULT_VERSION, false);
    CUABI__TRY(offline_setup(&o, arch, resources, options, __func__));
    CUABI__CHECK_ARG(block_size > 0, "%s: block_size %d must be positive", __func__, block_size);
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, &o.limits, &o.kernel, block_size, dynamic_shared_bytes, o.carveout);
    result_out(out, &r, r.blocks, block_size, &o.limits);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_offline_max_potential_block_size(
    int *out, int *min_grid_size, const char *arch, const cuabi_kernel_resources *resources,
    cuabi_block_smem_fn smem_fn, void *payload, size_t dynamic_shared_bytes, int block_size_limit,
    const cuabi_occupancy_options *options)
{
    offline o;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__TRY(offline_setup(&o, arch, resources, options, __func__));
    CUABI__CHECK_ARG(block_size_limit >= 0, "%s: block_size_limit is negative", __func__);
    int block, blocks;
    cuabi__occ_best_block(&block, &blocks, &o.limits, &o.kernel, (cuabi__occ_smem_fn)smem_fn,
                          payload, dynamic_shared_bytes, block_size_limit, o.carveout);
    *out = block;
    if (min_grid_size)
        *min_grid_size = blocks * o.limits.sm_count;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_offline_available_dynamic_smem(
    size_t *out, const char *arch, const cuabi_kernel_resources *resources, int num_blocks,
    int block_size, const cuabi_occupancy_options *options)
{
    offline o;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__TRY(offline_setup(&o, arch, resources, options, __func__));
    if (!cuabi__occ_available_smem(out, &o.limits, &o.kernel, num_blocks, block_size, o.carveout))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: %d blocks of %d threads cannot be resident on one SM of sm_%d",
                            __func__, num_blocks, block_size, o.limits.arch);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ waves */

/* The waves of a grid of `grid` blocks at `per_sm` blocks per SM on `sms`
 * SMs; a LAUNCH_CONFIG error (out filled, 0 waves) when no block fits. */
static cuabi_status waves_out(cuabi_grid_waves *out, uint64_t grid, int sms, int per_sm,
                              double occupancy, int limiter, int block_size, const char *caller)
{
    out->grid_blocks = grid;
    out->sm_count = sms;
    out->blocks_per_sm = per_sm;
    out->blocks_per_wave = (uint64_t)(per_sm > 0 ? per_sm : 0) * (uint64_t)(sms > 0 ? sms : 0);
    out->occupancy = occupancy;
    out->limiter = (cuabi_occupancy_limiter)limiter;
    if (out->blocks_per_wave == 0) {
        out->waves = out->last_wave_blocks = 0;
        out->efficiency = 0.0;
        return cuabi__error(CUABI_ERROR_LAUNCH_CONFIG, "%s: no block of %d threads fits on an "
                            "SM (limited by %s): a grid of %llu blocks never runs", caller,
                            block_size, cuabi_occupancy_limiter_name(out->limiter),
                            (unsigned long long)grid);
    }
    /* No overflow: grid / per_wave + 1 <= 2^64 - 1 for per_wave >= 1. */
    out->waves = grid / out->blocks_per_wave + (grid % out->blocks_per_wave != 0);
    out->last_wave_blocks = grid - (out->waves - 1) * out->blocks_per_wave;
    out->efficiency = (double)grid / ((double)out->waves * (double)out->blocks_per_wave);
    return CUABI_SUCCESS;
}

#define CHECK_GRID(grid)                                                      \
    CUABI__CHECK_ARG((grid) >= 1, "%s: grid_blocks must be at least 1", __func__)

/* The largest partition cuabi takes: far above any GPU's SMs, small enough
 * that blocks per wave fit comfortably. */
#define MAX_SMS 65535

CUABI_EXTERN(cuabi_status) cuabi_occupancy_offline_waves(
    cuabi_grid_waves *out, const char *arch, const cuabi_kernel_resources *resources,
    int sm_count, int block_size, size_t dynamic_shared_bytes, uint64_t grid_blocks,
    const cuabi_occupancy_options *options)
{
    offline o;
    CUABI__CHECK_OPTS(out, "cuabi_grid_waves", CUABI_GRID_WAVES_VERSION, false);
    CUABI__TRY(offline_setup(&o, arch, resources, options, __func__));
    CUABI__CHECK_ARG(sm_count >= 0 && sm_count <= MAX_SMS, "%s: sm_count %d is not a number of "
                     "SMs (1 to %d, or 0 for options->sm_count or the architecture's example "
                     "GPU)", __func__, sm_count, MAX_SMS);
    CUABI__CHECK_ARG(block_size > 0, "%s: block_size %d must be positive", __func__, block_size);
    CHECK_GRID(grid_blocks);
    if (sm_count > 0)
        o.limits.sm_count = sm_count;
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, &o.limits, &o.kernel, block_size, dynamic_shared_bytes, o.carveout);
    cuabi_occupancy_result res = CUABI_OCCUPANCY_RESULT_INIT;
    result_out(&res, &r, r.blocks, block_size, &o.limits);
    return waves_out(out, grid_blocks, o.limits.sm_count, r.blocks, res.occupancy, r.limiter,
                     block_size, __func__);
}

/* Clusters offline: a cluster's blocks must share one GPC. */
static cuabi_status offline_cluster(int *size, int *clusters, const char *arch,
                                    const cuabi_kernel_resources *res,
                                    const cuabi_launch_config *c,
                                    const cuabi_occupancy_options *opts, const char *caller)
{
    offline o;
    CUABI__TRY(offline_setup(&o, arch, res, opts, caller));
    if (!c)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: config is NULL", caller);
    if (c->version == 0 || c->version > CUABI_LAUNCH_CONFIG_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_launch_config version %u is not supported", caller,
                            c->version);
    if (!o.limits.max_cluster_size)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: sm_%d has no thread-block clusters (sm_90 and newer do)",
                            caller, o.limits.arch);
    /* Products of three unsigned ints: up to 2^96, checked. */
    unsigned long long threads;
    if (__builtin_mul_overflow((unsigned long long)c->block[0], c->block[1], &threads) ||
        __builtin_mul_overflow(threads, c->block[2], &threads) || threads == 0 ||
        threads > (unsigned long long)o.limits.max_threads_per_block)
        return cuabi__error(CUABI_ERROR_LAUNCH_CONFIG, "%s: config->block (%u, %u, %u) is not a "
                            "valid block (1 to %d threads)", caller, c->block[0], c->block[1],
                            c->block[2], o.limits.max_threads_per_block);
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, &o.limits, &o.kernel, (int)threads, c->dynamic_shared_bytes, o.carveout);
    int sms_per_gpc = o.limits.sm_count / (o.limits.gpc_count ? o.limits.gpc_count : 1);
    int per_gpc = r.blocks * sms_per_gpc;
    *size = per_gpc < o.limits.max_cluster_size ? per_gpc : o.limits.max_cluster_size;
    if (clusters) {
        /* A cluster larger than a GPC holds (its product overflowing
         * included) fits 0 times; never a division by a wrapped 0. */
        unsigned long long cs = 1;
        bool too_big = false;
        for (int i = 0; i < 3; i++)
            too_big |= __builtin_mul_overflow(cs, c->cluster[i] ? c->cluster[i] : 1u, &cs);
        *clusters = too_big || cs > (unsigned long long)per_gpc
                        ? 0
                        : (int)((unsigned long long)per_gpc / cs) *
                              (o.limits.gpc_count ? o.limits.gpc_count : 1);
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_offline_max_potential_cluster_size(
    int *out, const char *arch, const cuabi_kernel_resources *resources,
    const cuabi_launch_config *config, const cuabi_occupancy_options *options)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    return offline_cluster(out, NULL, arch, resources, config, options, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_offline_max_active_clusters(
    int *out, const char *arch, const cuabi_kernel_resources *resources,
    const cuabi_launch_config *config, const cuabi_occupancy_options *options)
{
    int size;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    return offline_cluster(&size, out, arch, resources, config, options, __func__);
}

/* ------------------------------------------------------------ live */

typedef struct live {
    cuabi__kernel *kernel;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUfunction func;
} live;

/* The kernel's function on the device, whose context is made current in
 * *scope (the occupancy calls answer for the current context). */
static cuabi_status live_setup(cuabi__context_scope *scope, live *l, cuabi_kernel *kernel,
                               cuabi_device *device, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(kernel, CUABI__T_KERNEL, &obj, caller));
    l->kernel = obj;
    CUABI__TRY(cuabi__handle_get(device, CUABI__T_DEVICE, &obj, caller));
    l->dev = obj;
    CUABI__TRY(cuabi__driver_get(&l->drv));
    CUABI__TRY(cuabi__kernel_function(l->kernel, l->dev, l->drv, &l->func, caller));
    return cuabi__device_enter(scope, l->dev, l->drv);
}

/* A live query in a green context: the kernel's CUfunction (of the primary
 * context: the driver takes it in a green one, and answers for the context
 * made current), the green context's device. */
static cuabi_status green_setup(live *l, cuabi__green_ctx **g, cuabi_kernel *kernel,
                                cuabi_green_ctx *green, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(kernel, CUABI__T_KERNEL, &obj, caller));
    l->kernel = obj;
    CUABI__TRY(cuabi__handle_get(green, CUABI__T_GREEN_CTX, &obj, caller));
    *g = obj;
    l->dev = (*g)->device;
    CUABI__TRY(cuabi__driver_get(&l->drv));
    return cuabi__kernel_function(l->kernel, l->dev, l->drv, &l->func, caller);
}

/* The calculator's view of a live device and kernel: the table's rules for
 * the device's architecture (or the closest older one), the device's own
 * numbers. Used only to name the limiter of a live answer. */
static cuabi_status live_limits(cuabi__arch_limits *a, cuabi__occ_kernel *k, int *carveout,
                                const live *l)
{
    const cuabi__driver *drv = l->drv;
    CUdevice d = l->dev->cu_device;
    int major = 0, minor = 0, v = 0;
#define DEV(attr, dst) do { CUABI__TRY(CUABI__CU(drv, cuDeviceGetAttribute, &v, attr, d)); dst = v; } while (0)
    DEV(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, major);
    DEV(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, minor);
    const cuabi__arch_limits *base = NULL;
    for (size_t i = 0; cuabi__arch_limits_at(i); i++)
        if (cuabi__arch_limits_at(i)->arch <= major * 10 + minor)
            base = cuabi__arch_limits_at(i);
    if (!base)
        base = cuabi__arch_limits_at(0);
    *a = *base;
    a->arch = major * 10 + minor;
    DEV(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, a->sm_count);
    DEV(CU_DEVICE_ATTRIBUTE_WARP_SIZE, a->warp_size);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, a->max_threads_per_block);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, a->max_threads_per_sm);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, a->max_blocks_per_sm);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, a->regs_per_sm);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, a->regs_per_block);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, a->smem_per_sm);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, a->smem_per_block);
    DEV(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, a->smem_per_block_optin);
    DEV(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, a->smem_reserved_per_block);
#undef DEV
#define FN(attr, dst) do { CUABI__TRY(CUABI__CU(drv, cuFuncGetAttribute, &v, attr, l->func)); dst = v; } while (0)
    FN(CU_FUNC_ATTRIBUTE_NUM_REGS, k->registers);
    FN(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->static_smem);
    FN(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->max_threads_per_block);
    FN(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->max_dynamic_smem);
    FN(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, *carveout);
#undef FN
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_max_active_blocks(cuabi_occupancy_result *out,
                                                             cuabi_kernel *kernel,
                                                             cuabi_device *device, int block_size,
                                                             size_t dynamic_shared_bytes)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    live l;
    CUABI__CHECK_OPTS(out, "cuabi_occupancy_result", CUABI_OCCUPANCY_RESULT_VERSION, false);
    CUABI__CHECK_ARG(block_size > 0, "%s: block_size %d must be positive", __func__, block_size);
    CUABI__TRY_SCOPE(live_setup(&scope, &l, kernel, device, __func__));
    int blocks = 0;
    CUABI__TRY_SCOPE(CUABI__CU(l.drv, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, &blocks,
                         l.func, block_size, dynamic_shared_bytes, CU_OCCUPANCY_DEFAULT));
    cuabi__arch_limits a;
    cuabi__occ_kernel k;
    int carveout = -1;
    CUABI__TRY_SCOPE(live_limits(&a, &k, &carveout, &l));
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, &a, &k, block_size, dynamic_shared_bytes, carveout);
    result_out(out, &r, blocks, block_size, &a);
    scope_st = CUABI_SUCCESS;
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_green_max_active_blocks(cuabi_occupancy_result *out,
                                                                   cuabi_kernel *kernel,
                                                                   cuabi_green_ctx *green,
                                                                   int block_size,
                                                                   size_t dynamic_shared_bytes)
{
    live l;
    cuabi__green_ctx *g;
    CUABI__CHECK_OPTS(out, "cuabi_occupancy_result", CUABI_OCCUPANCY_RESULT_VERSION, false);
    CUABI__CHECK_ARG(block_size > 0, "%s: block_size %d must be positive", __func__, block_size);
    CUABI__TRY(green_setup(&l, &g, kernel, green, __func__));
    int blocks = 0;
    CUABI__TRY(cuabi__green_enter(g, l.drv, __func__));
    cuabi_status st = CUABI__CU(l.drv, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                                &blocks, l.func, block_size, dynamic_shared_bytes,
                                CU_OCCUPANCY_DEFAULT);
    cuabi__green_leave(g, l.drv);
    CUABI__TRY(st);
    cuabi__arch_limits a;
    cuabi__occ_kernel k;
    int carveout = -1;
    CUABI__TRY(live_limits(&a, &k, &carveout, &l));
    a.sm_count = g->sm_count;
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, &a, &k, block_size, dynamic_shared_bytes, carveout);
    result_out(out, &r, blocks, block_size, &a);
    return CUABI_SUCCESS;
}

/* The driver's block-size callback has no payload: carry it per thread. */
static _Thread_local struct { cuabi_block_smem_fn fn; void *payload; } smem_cb;
static size_t CUDA_CB smem_trampoline(int block_size)
{
    return smem_cb.fn(block_size, smem_cb.payload);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_max_potential_block_size(
    int *out, int *min_grid_size, cuabi_kernel *kernel, cuabi_device *device,
    cuabi_block_smem_fn smem_fn, void *payload, size_t dynamic_shared_bytes, int block_size_limit)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    live l;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(block_size_limit >= 0, "%s: block_size_limit is negative", __func__);
    CUABI__TRY_SCOPE(live_setup(&scope, &l, kernel, device, __func__));
    int grid = 0, block = 0;
    smem_cb.fn = smem_fn;
    smem_cb.payload = payload;
    cuabi_status st = CUABI__CU(l.drv, cuOccupancyMaxPotentialBlockSizeWithFlags, &grid, &block,
                                l.func, smem_fn ? smem_trampoline : NULL, dynamic_shared_bytes,
                                block_size_limit, CU_OCCUPANCY_DEFAULT);
    smem_cb.fn = NULL;
    CUABI__TRY_SCOPE(st);
    *out = block;
    if (min_grid_size)
        *min_grid_size = grid;
    scope_st = CUABI_SUCCESS;
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_green_max_potential_block_size(
    int *out, int *min_grid_size, cuabi_kernel *kernel, cuabi_green_ctx *green,
    cuabi_block_smem_fn smem_fn, void *payload, size_t dynamic_shared_bytes, int block_size_limit)
{
    live l;
    cuabi__green_ctx *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(block_size_limit >= 0, "%s: block_size_limit is negative", __func__);
    CUABI__TRY(green_setup(&l, &g, kernel, green, __func__));
    int grid = 0, block = 0;
    CUABI__TRY(cuabi__green_enter(g, l.drv, __func__));
    smem_cb.fn = smem_fn;
    smem_cb.payload = payload;
    cuabi_status st = CUABI__CU(l.drv, cuOccupancyMaxPotentialBlockSizeWithFlags, &grid, &block,
                                l.func, smem_fn ? smem_trampoline : NULL, dynamic_shared_bytes,
                                block_size_limit, CU_OCCUPANCY_DEFAULT);
    smem_cb.fn = NULL;
    cuabi__green_leave(g, l.drv);
    CUABI__TRY(st);
    *out = block;
    if (min_grid_size)
        *min_grid_size = grid;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_available_dynamic_smem(size_t *out, cuabi_kernel *kernel,
                                                                  cuabi_device *device,
                                                                  int num_blocks, int block_size)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    live l;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(num_blocks > 0 && block_size > 0,
                     "%s: num_blocks %d and block_size %d must be positive", __func__, num_blocks,
                     block_size);
    CUABI__TRY_SCOPE(live_setup(&scope, &l, kernel, device, __func__));
    scope_st = CUABI__CU(l.drv, cuOccupancyAvailableDynamicSMemPerBlock, out, l.func, num_blocks,
                     block_size);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

static cuabi_status live_cluster(int *out, bool active, cuabi_kernel *kernel,
                                 const cuabi_launch_config *config, const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    void *obj;
    cuabi__device *dev;
    CUstream s;
    const cuabi__driver *drv;
    CUfunction f;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    CUABI__TRY(cuabi__handle_get(kernel, CUABI__T_KERNEL, &obj, caller));
    CUABI__TRY(cuabi__launch_target(&dev, &s, config, caller));
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__kernel_function(obj, dev, drv, &f, caller));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUlaunchConfig lc;
    CUlaunchAttribute attrs[2];
    cuabi__launch_fill(&lc, attrs, config, s);
    if (active)
        CUABI__SCOPE_RETURN(CUABI__CU(drv, cuOccupancyMaxActiveClusters, out, f, &lc));
    CUABI__SCOPE_RETURN(CUABI__CU(drv, cuOccupancyMaxPotentialClusterSize, out, f, &lc));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_max_potential_cluster_size(
    int *out, cuabi_kernel *kernel, const cuabi_launch_config *config)
{
    return live_cluster(out, false, kernel, config, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_max_active_clusters(int *out, cuabi_kernel *kernel,
                                                               const cuabi_launch_config *config)
{
    return live_cluster(out, true, kernel, config, __func__);
}

/* ------------------------------------------------------------ live waves */

CUABI_EXTERN(cuabi_status) cuabi_occupancy_waves(cuabi_grid_waves *out, cuabi_kernel *kernel,
                                                 cuabi_device *device, int block_size,
                                                 size_t dynamic_shared_bytes, uint64_t grid_blocks)
{
    CUABI__CHECK_OPTS(out, "cuabi_grid_waves", CUABI_GRID_WAVES_VERSION, false);
    CHECK_GRID(grid_blocks);
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
    CUABI__TRY(cuabi_occupancy_max_active_blocks(&r, kernel, device, block_size,
                                                 dynamic_shared_bytes));
    cuabi__device *dev;
    const cuabi__driver *drv;
    int sms = 0;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(CUABI__CU(drv, cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                         dev->cu_device));
    return waves_out(out, grid_blocks, sms, r.active_blocks_per_sm, r.occupancy, r.limiter,
                     block_size, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_occupancy_green_waves(cuabi_grid_waves *out,
                                                       cuabi_kernel *kernel,
                                                       cuabi_green_ctx *green, int block_size,
                                                       size_t dynamic_shared_bytes,
                                                       uint64_t grid_blocks)
{
    cuabi__green_ctx *g;
    CUABI__CHECK_OPTS(out, "cuabi_grid_waves", CUABI_GRID_WAVES_VERSION, false);
    CHECK_GRID(grid_blocks);
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
    CUABI__TRY(cuabi_occupancy_green_max_active_blocks(&r, kernel, green, block_size,
                                                       dynamic_shared_bytes));
    CUABI__GET(g, green, GREEN_CTX);
    return waves_out(out, grid_blocks, g->sm_count, r.active_blocks_per_sm, r.occupancy,
                     r.limiter, block_size, __func__);
}
