/* The occupancy rules, as NVIDIA documents them in cuda_occupancy.h, for
 * Volta and newer: a block needs warp slots, registers (allocated per warp
 * in units, split over the SM's sub-partitions) and shared memory (static +
 * dynamic + the driver's reserved part, in allocation units, out of the SM's
 * configured carveout); the fewest blocks any resource allows is the answer.
 * No GPU involved: the same code serves offline answers and the limiter of
 * live ones. */
#include "runtime/occupancy.h"
#include "util/checked.h"

#include <limits.h>
#include <string.h>

static int div_up(int x, int y) { return (x + y - 1) / y; }
static size_t round_up(size_t x, size_t y) { return (x + y - 1) / y * y; }

#define NO_CARVEOUT ((size_t)-1)

/* The smallest carveout holding `bytes`; NO_CARVEOUT when none does. */
static size_t carveout_at_least(const cuabi__arch_limits *a, size_t bytes)
{
    for (const int *c = a->smem_carveouts_kib; *c >= 0; c++)
        if ((size_t)*c * 1024 >= bytes)
            return (size_t)*c * 1024;
    return NO_CARVEOUT;
}

/* Shared memory per SM the user's carveout preference asks for. */
static size_t preferred_smem(const cuabi__arch_limits *a, int carveout)
{
    size_t want = carveout < 0 ? a->smem_per_sm : (size_t)carveout * a->smem_per_sm / 100;
    size_t c = carveout_at_least(a, want);
    return c != NO_CARVEOUT ? c : a->smem_per_sm;
}

/* Per-block limit of shared memory: the opt-in limit once the kernel may use
 * more than the default, plus the reserved part. */
static size_t smem_limit_per_block(const cuabi__arch_limits *a, size_t max_usage)
{
    size_t lim = max_usage > a->smem_per_block ? a->smem_per_block_optin : a->smem_per_block;
    return lim + a->smem_reserved_per_block;
}

static int limit_warps(const cuabi__arch_limits *a, int block)
{
    if (block > a->max_threads_per_block)
        return 0;
    return (a->max_threads_per_sm / a->warp_size) / div_up(block, a->warp_size);
}

static int limit_regs(const cuabi__arch_limits *a, const cuabi__occ_kernel *k, int block,
                      int *per_block)
{
    int warps = div_up(block, a->warp_size);
    /* More registers than a thread may have: none fit. Checked first, so the
     * products below stay small (registers come from the caller offline). */
    if (k->registers > a->max_regs_per_thread) {
        long long need = (long long)k->registers * a->warp_size * warps;
        *per_block = need > INT_MAX ? INT_MAX : (int)need;
        return 0;
    }
    int per_warp = (int)round_up((size_t)(k->registers * a->warp_size), (size_t)a->reg_alloc_unit);
    *per_block = per_warp * warps;
    /* The hardware checks the block as if its warps were spread over all
     * sub-partitions at once. */
    int assumed = per_warp * (int)round_up((size_t)warps, (size_t)a->sub_partitions);
    if (assumed > a->regs_per_block || *per_block > a->regs_per_block ||
        k->registers > a->max_regs_per_thread)
        return 0;
    if (per_warp == 0)
        return INT_MAX;
    int warps_per_sub = (a->regs_per_sm / a->sub_partitions) / per_warp;
    return warps_per_sub * a->sub_partitions / warps;
}

static int limit_smem(const cuabi__arch_limits *a, const cuabi__occ_kernel *k, size_t dyn,
                      int carveout, size_t *per_block)
{
    /* Saturating: static and dynamic sizes come from the caller (offline
     * resources, a block-size callback); a sum past SIZE_MAX fits nowhere
     * and is reported as SIZE_MAX bytes per block. */
    size_t stat = cuabi__size_add_sat(k->static_smem, a->smem_reserved_per_block);
    size_t alloc = cuabi__size_round_up_sat(cuabi__size_add_sat(stat, dyn),
                                            (size_t)a->smem_alloc_unit);
    *per_block = alloc;
    if (dyn > k->max_dynamic_smem || alloc == SIZE_MAX ||
        alloc > smem_limit_per_block(a, cuabi__size_add_sat(stat, k->max_dynamic_smem)))
        return 0;
    size_t sm = preferred_smem(a, carveout);
    /* A preference too small for one block is raised to the next carveout
     * that fits it. */
    if (sm < alloc) {
        sm = carveout_at_least(a, alloc);
        if (sm == NO_CARVEOUT)
            return 0;
    }
    if (alloc == 0)
        return INT_MAX;
    return (int)(sm / alloc);
}

void cuabi__occ_blocks(cuabi__occ_result *r, const cuabi__arch_limits *a,
                       const cuabi__occ_kernel *k, int block, size_t dyn, int carveout)
{
    memset(r, 0, sizeof *r);
    int kmax = k->max_threads_per_block > 0 ? k->max_threads_per_block : INT_MAX;
    if (block <= 0 || block > a->max_threads_per_block || block > kmax) {
        r->limiter = CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE;
        r->limiters = 1u << CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE;
        return;
    }
    r->limit_warps = limit_warps(a, block);
    r->limit_regs = limit_regs(a, k, block, &r->regs_per_block);
    r->limit_smem = limit_smem(a, k, dyn, carveout, &r->smem_per_block);
    r->limit_blocks = a->max_blocks_per_sm;
    int n = r->limit_warps;
    if (r->limit_regs < n) n = r->limit_regs;
    if (r->limit_smem < n) n = r->limit_smem;
    if (r->limit_blocks < n) n = r->limit_blocks;
    r->blocks = n;
    /* Report the scarcest resource. On ties: warps first (all warp slots in
     * use is full occupancy, whatever else is also used up), then what the
     * kernel controls (shared memory, registers), then the block count. */
    static const int order[] = { CUABI_OCCUPANCY_LIMIT_WARPS, CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY,
                                 CUABI_OCCUPANCY_LIMIT_REGISTERS, CUABI_OCCUPANCY_LIMIT_BLOCKS };
    const int lims[] = { r->limit_warps, r->limit_smem, r->limit_regs, r->limit_blocks };
    for (int i = 3; i >= 0; i--)
        if (lims[i] == n) {
            r->limiters |= 1u << order[i];
            r->limiter = order[i];
        }
}

bool cuabi__occ_available_smem(size_t *out, const cuabi__arch_limits *a,
                               const cuabi__occ_kernel *k, int blocks, int block, int carveout)
{
    cuabi__occ_result r;
    if (blocks <= 0)
        return false;
    cuabi__occ_blocks(&r, a, k, block, 0, carveout);
    if (r.blocks < blocks)
        return false;
    size_t per_block = smem_limit_per_block(a, a->smem_per_sm);
    /* One block may use the whole per-block limit; several share the
     * carveout the preference gives. */
    size_t sm = blocks == 1 ? per_block : preferred_smem(a, carveout);
    size_t avail = sm / (size_t)blocks / (size_t)a->smem_alloc_unit * (size_t)a->smem_alloc_unit;
    if (avail > per_block)
        avail = per_block;
    avail = avail > k->static_smem ? avail - k->static_smem : 0;
    if (avail > k->max_dynamic_smem)
        avail = k->max_dynamic_smem;
    *out = avail;
    return true;
}

void cuabi__occ_best_block(int *block, int *blocks, const cuabi__arch_limits *a,
                           const cuabi__occ_kernel *k, cuabi__occ_smem_fn fn, void *payload,
                           size_t dyn, int block_limit, int carveout)
{
    int limit = a->max_threads_per_block;
    if (k->max_threads_per_block > 0 && k->max_threads_per_block < limit)
        limit = k->max_threads_per_block;
    if (block_limit > 0 && block_limit < limit)
        limit = block_limit;
    int best = 0, best_blocks = 0, best_threads = 0;
    for (int aligned = div_up(limit, a->warp_size) * a->warp_size; aligned > 0;
         aligned -= a->warp_size) {
        int b = aligned < limit ? aligned : limit;
        cuabi__occ_result r;
        cuabi__occ_blocks(&r, a, k, b, fn ? fn(b, payload) : dyn, carveout);
        if (b * r.blocks > best_threads) {
            best = b;
            best_blocks = r.blocks;
            best_threads = b * r.blocks;
        }
        if (best_threads == a->max_threads_per_sm)
            break;
    }
    *block = best;
    *blocks = best_blocks;
}
