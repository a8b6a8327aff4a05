/* Occupancy calculator internals: per-architecture limits and the offline
 * rules (the ones cuda_occupancy.h documents), shared by the live and the
 * offline entry points and by launch-configuration checks. */
#ifndef CUABI_OCCUPANCY_INTERNAL_H
#define CUABI_OCCUPANCY_INTERNAL_H

#include "runtime/device.h"

/* What the calculator knows of a GPU: an architecture's published limits,
 * or (live) the same fields read from a device. */
typedef struct cuabi__arch_limits {
    int arch;                     /* 90 for sm_90 */
    const char *example;          /* a GPU of this architecture, for messages */
    int sm_count;                 /* SMs of that example GPU */
    int warp_size;
    int max_threads_per_block;
    int max_threads_per_sm;
    int max_blocks_per_sm;
    int regs_per_sm;
    int regs_per_block;
    int max_regs_per_thread;
    int reg_alloc_unit;           /* registers per warp are rounded up to this */
    int sub_partitions;           /* registers are split between these */
    size_t smem_per_sm;
    size_t smem_per_block;        /* without opt-in */
    size_t smem_per_block_optin;
    size_t smem_reserved_per_block;   /* taken by the driver from every block */
    int smem_alloc_unit;
    const int *smem_carveouts_kib;    /* the shared-memory sizes an SM can be set to, ascending, -1 ends */
    int barriers_per_block_slot;      /* block barriers per resident-block slot (1 or 2) */
    int max_cluster_size;             /* portable; 0 = no clusters */
    int max_cluster_size_nonportable;
    int gpc_count;                    /* of the example GPU (cluster estimates) */
} cuabi__arch_limits;

/* The table entry for an architecture number (90), or NULL. */
const cuabi__arch_limits *cuabi__arch_limits_find(int arch);
/* Entry `index` of the table (ascending architectures), or NULL past the end. */
const cuabi__arch_limits *cuabi__arch_limits_at(size_t index);
/* Parse "sm_90", "sm_90a", "compute_90", "90" or "9.0"; -1 when not one. */
int cuabi__arch_parse(const char *s);

/* What the calculator needs of a kernel. */
typedef struct cuabi__occ_kernel {
    int registers;
    size_t static_smem;
    int max_threads_per_block;    /* the kernel's own limit (launch bounds); 0 = none */
    size_t max_dynamic_smem;      /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
} cuabi__occ_kernel;

typedef struct cuabi__occ_result {
    int blocks;                   /* active blocks per SM */
    unsigned limiters;            /* bit (1 << cuabi_occupancy_limiter) for each limit reached */
    int limiter;                  /* the one to report */
    int limit_warps, limit_regs, limit_smem, limit_blocks;
    int regs_per_block;
    size_t smem_per_block;
} cuabi__occ_result;

/* Active blocks per SM for a block size and dynamic shared memory, with the
 * limiting resource. `carveout` is the preferred shared-memory carveout in
 * percent, -1 for none. */
void cuabi__occ_blocks(cuabi__occ_result *r, const cuabi__arch_limits *a,
                       const cuabi__occ_kernel *k, int block, size_t dyn, int carveout);
/* Dynamic shared memory available per block when `blocks` blocks of `block`
 * threads must fit on one SM; false when they cannot. */
bool cuabi__occ_available_smem(size_t *out, const cuabi__arch_limits *a,
                               const cuabi__occ_kernel *k, int blocks, int block, int carveout);
/* The block size with the most threads resident per SM (largest first on
 * ties), its blocks per SM, as cudaOccMaxPotentialOccupancyBlockSize. */
typedef size_t (*cuabi__occ_smem_fn)(int block, void *payload);
void cuabi__occ_best_block(int *block, int *blocks, const cuabi__arch_limits *a,
                           const cuabi__occ_kernel *k, cuabi__occ_smem_fn fn, void *payload,
                           size_t dyn, int block_limit, int carveout);

#endif
