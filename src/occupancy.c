/* Occupancy: live answers from the driver, offline answers from the
 * calculator in occupancy_calc.c and the limits table in arch_limits.c. */
#include "occupancy.h"

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
