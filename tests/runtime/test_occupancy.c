/* Offline occupancy: the calculator against cases worked out by hand from
 * the published limits, the architecture table and its public queries. */
#include "testutil.h"
#include "runtime/occupancy.h"

#include <limits.h>

static const cuabi__arch_limits *arch(int n)
{
    const cuabi__arch_limits *a = cuabi__arch_limits_find(n);
    ck_assert_ptr_nonnull(a);
    return a;
}

/* A kernel with the driver's default dynamic-shared-memory limit. */
static cuabi__occ_kernel kern(int regs, size_t smem)
{
    cuabi__occ_kernel k = { regs, smem, 0, 48 * 1024 - smem };
    return k;
}

static cuabi__occ_result blocks(int a, cuabi__occ_kernel k, int block, size_t dyn)
{
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, arch(a), &k, block, dyn, -1);
    return r;
}

START_TEST(sm90_warps_and_registers)
{
    /* 32 regs x 32 lanes = 1024 per warp; 16384 per sub-partition -> 16
     * warps each, 64 per SM; 256 threads = 8 warps: 8 blocks both ways. */
    cuabi__occ_result r = blocks(90, kern(32, 0), 256, 0);
    ck_assert_int_eq(r.blocks, 8);
    ck_assert_int_eq(r.limit_warps, 8);
    ck_assert_int_eq(r.limit_regs, 8);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_WARPS); /* full: warps win ties */
    ck_assert_uint_eq(r.limiters, (1u << CUABI_OCCUPANCY_LIMIT_REGISTERS) |
                                  (1u << CUABI_OCCUPANCY_LIMIT_WARPS));
    ck_assert_int_eq(r.regs_per_block, 8192);
    ck_assert_uint_eq(r.smem_per_block, 1024); /* the reserved KiB */
    ck_assert_int_eq(r.limit_smem, 228);
    /* 64 regs: 2048 per warp, 8 warps per sub-partition, 32 per SM: 4 blocks */
    r = blocks(90, kern(64, 0), 256, 0);
    ck_assert_int_eq(r.blocks, 4);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_REGISTERS);
    /* 33 regs round to 1280 per warp: 12 warps per sub-partition, 48 per SM */
    r = blocks(90, kern(33, 0), 128, 0);
    ck_assert_int_eq(r.blocks, 12);
    /* 32-thread blocks: 64 warp slots but only 32 blocks */
    r = blocks(90, kern(16, 0), 32, 0);
    ck_assert_int_eq(r.blocks, 32);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_BLOCKS);
}
END_TEST

START_TEST(sm90_shared_memory)
{
    /* 48 KiB dynamic + 1 KiB reserved = 50176 per block; the kernel may use
     * more than 48 KiB in total, so the opt-in limit applies; 228 KiB per SM
     * -> 4 blocks. */
    cuabi__occ_result r = blocks(90, kern(32, 0), 128, 48 * 1024);
    ck_assert_uint_eq(r.smem_per_block, 50176);
    ck_assert_int_eq(r.blocks, 4);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY);
    /* one byte over the kernel's dynamic limit: nothing fits */
    r = blocks(90, kern(32, 0), 128, 48 * 1024 + 1);
    ck_assert_int_eq(r.blocks, 0);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY);
    /* raised limit: 100000 + 1024 -> 101120 (128 units): 2 per 228 KiB */
    cuabi__occ_kernel k = kern(32, 0);
    k.max_dynamic_smem = 227 * 1024;
    cuabi__occ_blocks(&r, arch(90), &k, 128, 100000, -1);
    ck_assert_uint_eq(r.smem_per_block, 101120);
    ck_assert_int_eq(r.blocks, 2);
    /* the whole opt-in: 227 KiB + 1 KiB = 228 KiB: one block */
    cuabi__occ_blocks(&r, arch(90), &k, 128, 227 * 1024, -1);
    ck_assert_int_eq(r.blocks, 1);
    /* static shared memory counts too: 20000 static + 1024 -> 21120 */
    r = blocks(90, kern(32, 20000), 64, 0);
    ck_assert_uint_eq(r.smem_per_block, 21120);
    ck_assert_int_eq(r.blocks, 11);
    /* carveout 25% of 228 KiB = 57 KiB -> 64 KiB carveout: 3 blocks */
    k = kern(32, 20000);
    cuabi__occ_blocks(&r, arch(90), &k, 64, 0, 25);
    ck_assert_int_eq(r.blocks, 3);
    /* carveout 0 is too small for one block: raised to the 32 KiB step */
    cuabi__occ_blocks(&r, arch(90), &k, 64, 0, 0);
    ck_assert_int_eq(r.blocks, 1);
}
END_TEST

START_TEST(other_architectures)
{
    /* sm_70: 256-byte units, no reserved memory; 20000 -> 20224, 96 KiB -> 4 */
    cuabi__occ_result r = blocks(70, kern(32, 20000), 128, 0);
    ck_assert_uint_eq(r.smem_per_block, 20224);
    ck_assert_int_eq(r.blocks, 4);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY);
    /* sm_70 without shared memory: unlimited by it */
    r = blocks(70, kern(32, 0), 128, 0);
    ck_assert_int_eq(r.limit_smem, INT_MAX);
    ck_assert_int_eq(r.blocks, 16);
    /* sm_75: 1024 threads per SM, 16 blocks */
    r = blocks(75, kern(16, 0), 32, 0);
    ck_assert_int_eq(r.blocks, 16);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_BLOCKS);
    r = blocks(75, kern(16, 0), 256, 0);
    ck_assert_int_eq(r.blocks, 4);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_WARPS);
    /* sm_86: 72 regs -> 2304 per warp, 7 warps per sub-partition, 28 per SM:
     * 3 blocks of 256 */
    r = blocks(86, kern(72, 0), 256, 0);
    ck_assert_int_eq(r.blocks, 3);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_REGISTERS);
    /* sm_86: 1536 threads: 6 blocks of 256 */
    r = blocks(86, kern(32, 0), 256, 0);
    ck_assert_int_eq(r.blocks, 6);
    /* sm_89: 24 blocks */
    r = blocks(89, kern(16, 0), 32, 0);
    ck_assert_int_eq(r.blocks, 24);
    /* sm_80: 164 KiB per SM; 40 KiB dynamic + 1 KiB -> 4 blocks */
    r = blocks(80, kern(32, 0), 64, 40 * 1024);
    ck_assert_int_eq(r.blocks, 4);
    /* sm_120: 100 KiB per SM; 40 KiB + 1 KiB -> 2 blocks */
    r = blocks(120, kern(32, 0), 64, 40 * 1024);
    ck_assert_int_eq(r.blocks, 2);
}
END_TEST

START_TEST(too_large)
{
    cuabi__occ_result r = blocks(90, kern(32, 0), 1025, 0);
    ck_assert_int_eq(r.blocks, 0);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE);
    r = blocks(90, kern(32, 0), 0, 0);
    ck_assert_int_eq(r.blocks, 0);
    /* 255 regs: 8192 per warp, 32 warps need 262144 > 65536 */
    r = blocks(90, kern(255, 0), 1024, 0);
    ck_assert_int_eq(r.blocks, 0);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_REGISTERS);
    /* 255 regs, 256 threads: 8 warps x 8192 = 65536: exactly one */
    r = blocks(90, kern(255, 0), 256, 0);
    ck_assert_int_eq(r.blocks, 1);
    /* launch bounds of the kernel */
    cuabi__occ_kernel k = kern(32, 0);
    k.max_threads_per_block = 128;
    cuabi__occ_blocks(&r, arch(90), &k, 256, 0, -1);
    ck_assert_int_eq(r.blocks, 0);
    ck_assert_int_eq(r.limiter, CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE);
}
END_TEST

static size_t smem_per_thread(int block, void *payload)
{
    return (size_t)block * *(size_t *)payload;
}

START_TEST(best_block_size)
{
    int b, n;
    cuabi__occ_kernel k = kern(32, 0);
    cuabi__occ_best_block(&b, &n, arch(90), &k, NULL, NULL, 0, 0, -1);
    ck_assert_int_eq(b, 1024);
    ck_assert_int_eq(n, 2);
    /* 64 regs: at most 1024 threads per SM whatever the size: the largest wins */
    k = kern(64, 0);
    cuabi__occ_best_block(&b, &n, arch(90), &k, NULL, NULL, 0, 0, -1);
    ck_assert_int_eq(b * n, 1024);
    ck_assert_int_eq(b, 1024);
    /* a block-size limit */
    k = kern(32, 0);
    cuabi__occ_best_block(&b, &n, arch(90), &k, NULL, NULL, 0, 200, -1);
    ck_assert_int_eq(b, 128);
    ck_assert_int_eq(n, 16);
    /* 40 bytes of shared memory per thread, 48 KiB default limit: at most
     * 1228 threads' worth per block; blocks of 1024 need 40 KiB + 1 KiB: 5
     * per SM but only 2 by warps ... */
    size_t per_thread = 40;
    cuabi__occ_best_block(&b, &n, arch(90), &k, smem_per_thread, &per_thread, 0, 0, -1);
    cuabi__occ_result r;
    cuabi__occ_blocks(&r, arch(90), &k, b, (size_t)b * per_thread, -1);
    ck_assert_int_eq(r.blocks, n);
    ck_assert_int_eq(b * n, 2048);
    /* 200 bytes per thread: a 1024 block needs 200 KiB > 48 KiB: smaller wins */
    per_thread = 200;
    cuabi__occ_best_block(&b, &n, arch(90), &k, smem_per_thread, &per_thread, 0, 0, -1);
    ck_assert_int_le(b * 200, 48 * 1024);
    ck_assert_int_gt(n, 0);
}
END_TEST

START_TEST(available_dynamic_smem)
{
    size_t avail;
    cuabi__occ_kernel k = kern(32, 0);
    /* one block: capped by the kernel's 48 KiB default */
    ck_assert(cuabi__occ_available_smem(&avail, arch(90), &k, 1, 256, -1));
    ck_assert_uint_eq(avail, 48 * 1024);
    k.max_dynamic_smem = 227 * 1024;
    ck_assert(cuabi__occ_available_smem(&avail, arch(90), &k, 1, 256, -1));
    ck_assert_uint_eq(avail, 227 * 1024);
    /* four blocks share 228 KiB: 57 KiB each */
    ck_assert(cuabi__occ_available_smem(&avail, arch(90), &k, 4, 256, -1));
    ck_assert_uint_eq(avail, 57 * 1024);
    /* static memory comes off */
    k = kern(32, 1000);
    k.max_dynamic_smem = 227 * 1024 - 1000;
    ck_assert(cuabi__occ_available_smem(&avail, arch(90), &k, 4, 256, -1));
    ck_assert_uint_eq(avail, 57 * 1024 - 1000);
    /* more blocks than can be resident */
    ck_assert(!cuabi__occ_available_smem(&avail, arch(90), &k, 9, 256, -1));
    ck_assert(!cuabi__occ_available_smem(&avail, arch(90), &k, 0, 256, -1));
}
END_TEST

START_TEST(arch_names_and_table)
{
    ck_assert_int_eq(cuabi__arch_parse("sm_90"), 90);
    ck_assert_int_eq(cuabi__arch_parse("sm_90a"), 90);
    ck_assert_int_eq(cuabi__arch_parse("sm_100f"), 100);
    ck_assert_int_eq(cuabi__arch_parse("compute_86"), 86);
    ck_assert_int_eq(cuabi__arch_parse("9.0"), 90);
    ck_assert_int_eq(cuabi__arch_parse("12.1"), 121);
    ck_assert_int_eq(cuabi__arch_parse("120"), 120);
    ck_assert_int_eq(cuabi__arch_parse("sm_"), -1);
    ck_assert_int_eq(cuabi__arch_parse("sm_9x"), -1);
    ck_assert_int_eq(cuabi__arch_parse("9"), -1);
    ck_assert_int_eq(cuabi__arch_parse(NULL), -1);
    static const int want[] = { 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121 };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cuabi_arch_limits l = CUABI_ARCH_LIMITS_INIT;
        ck_assert_ok(cuabi_arch_limits_at(&l, i));
        ck_assert_int_eq(l.arch, want[i]);
        ck_assert_int_eq(l.warp_size, 32);
        ck_assert_int_eq(l.max_threads_per_sm % 32, 0);
        ck_assert_uint_ge(l.shared_bytes_per_sm, l.shared_bytes_per_block_optin);
        /* every SM size must be one of its carveouts */
        const cuabi__arch_limits *a = cuabi__arch_limits_find(want[i]);
        bool found = false;
        for (const int *c = a->smem_carveouts_kib; *c >= 0; c++)
            found |= (size_t)*c * 1024 == a->smem_per_sm;
        ck_assert_msg(found, "sm_%d: smem per SM is not a carveout", want[i]);
    }
    cuabi_arch_limits l = CUABI_ARCH_LIMITS_INIT;
    ck_assert_status(cuabi_arch_limits_at(&l, 14), CUABI_ERROR_NOT_FOUND);
    /* issue 17: every architecture the loaded NVRTC targets has limits
     * (sm_88 had none) */
    int archs[128];
    size_t narch = 0;
    if (cuabi_program_supported_archs(archs, 128, &narch) == CUABI_SUCCESS) {
        for (size_t i = 0; i < narch && i < 128; i++) {
            char name[16];
            snprintf(name, sizeof name, "sm_%d", archs[i]);
            ck_assert_msg(cuabi_arch_limits_get(&l, name) == CUABI_SUCCESS,
                          "NVRTC targets %s but cuabi has no limits for it", name);
        }
    }
    cuabi_error_clear();
    ck_assert_ok(cuabi_arch_limits_get(&l, "sm_88"));
    ck_assert_int_eq(l.max_blocks_per_sm, 16);
    ck_assert_uint_eq(l.shared_bytes_per_sm, 100 * 1024);
    ck_assert_ok(cuabi_arch_limits_get(&l, "sm_90a"));
    ck_assert_int_eq(l.sm_count, 132);
    ck_assert_uint_eq(l.shared_bytes_per_block_optin, 232448);
    ck_assert_int_eq(l.max_cluster_size, 8);
    ck_assert_str_eq(l.example_gpu, "H100 SXM");
    ck_assert_status(cuabi_arch_limits_get(&l, "sm_60"), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("sm_60");
    ck_assert_status(cuabi_arch_limits_get(&l, "hopper"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_arch_limits_get(&l, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_arch_limits_get(NULL, "sm_90"), CUABI_ERROR_INVALID_ARGUMENT);
    l.version = 0;
    ck_assert_status(cuabi_arch_limits_get(&l, "sm_90"), CUABI_ERROR_INVALID_VERSION);
    ck_assert_str_eq(cuabi_occupancy_limiter_name(CUABI_OCCUPANCY_LIMIT_REGISTERS), "registers");
    ck_assert_str_eq(cuabi_occupancy_limiter_name((cuabi_occupancy_limiter)77), "none");
}
END_TEST

static cuabi_kernel_resources res(int regs, size_t smem)
{
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    r.arch = 90;
    r.registers = regs;
    r.shared_static_bytes = smem;
    return r;
}

START_TEST(public_offline_api)
{
    cuabi_kernel_resources r = res(64, 0);
    cuabi_occupancy_result o = CUABI_OCCUPANCY_RESULT_INIT;
    ck_assert_ok(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 256, 0, NULL));
    ck_assert_int_eq(o.active_blocks_per_sm, 4);
    ck_assert_int_eq(o.active_warps_per_sm, 32);
    ck_assert(o.occupancy == 0.5);
    ck_assert_int_eq(o.limiter, CUABI_OCCUPANCY_LIMIT_REGISTERS);
    ck_assert_int_eq(o.registers_per_block, 16384);
    /* options: a raised dynamic limit lets 100 KB fit */
    cuabi_occupancy_options opt = CUABI_OCCUPANCY_OPTIONS_INIT;
    ck_assert_ok(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 128, 100000, NULL));
    ck_assert_int_eq(o.active_blocks_per_sm, 0);
    ck_assert_int_eq(o.limiter, CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY);
    opt.max_dynamic_shared_bytes = 232448;
    ck_assert_ok(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 128, 100000, &opt));
    ck_assert_int_eq(o.active_blocks_per_sm, 2);
    /* best block size and grid: 132 SMs, or the given count */
    r = res(32, 0);
    int b, g;
    ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(&b, &g, "sm_90", &r, NULL, NULL,
                                                                  0, 0, NULL));
    ck_assert_int_eq(b, 1024);
    ck_assert_int_eq(g, 264);
    opt.sm_count = 114;
    ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(&b, &g, "sm_90", &r, NULL, NULL,
                                                                  0, 0, &opt));
    ck_assert_int_eq(g, 228);
    size_t per_thread = 40;
    ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(
        &b, NULL, "sm_90", &r, (cuabi_block_smem_fn)smem_per_thread, &per_thread, 0, 0, NULL));
    ck_assert_int_gt(b, 0);
    size_t avail;
    ck_assert_ok(cuabi_occupancy_offline_available_dynamic_smem(&avail, "sm_90", &r, 4, 256, &opt));
    ck_assert_uint_eq(avail, 57 * 1024);
    ck_assert_status(cuabi_occupancy_offline_available_dynamic_smem(&avail, "sm_90", &r, 9, 256, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* cluster estimates */
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.block[0] = 1024;
    c.cluster[0] = 2;
    int n;
    ck_assert_ok(cuabi_occupancy_offline_max_potential_cluster_size(&n, "sm_90", &r, &c, NULL));
    ck_assert_int_eq(n, 8);
    ck_assert_ok(cuabi_occupancy_offline_max_active_clusters(&n, "sm_90", &r, &c, NULL));
    ck_assert_int_eq(n, 16 * 8); /* 2 blocks x 16 SMs per GPC / 2, 8 GPCs */
    ck_assert_status(cuabi_occupancy_offline_max_active_clusters(&n, "sm_80", &r, &c, NULL),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("no thread-block clusters");
    /* bad input */
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", NULL, 256, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(&o, "sm_91", &r, 256, 0, NULL),
                     CUABI_ERROR_NOT_FOUND);
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(NULL, "sm_90", &r, 32, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    opt.carveout = 101;
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 32, 0, &opt),
                     CUABI_ERROR_INVALID_ARGUMENT);
    opt.version = 0;
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 32, 0, &opt),
                     CUABI_ERROR_INVALID_VERSION);
    r.version = 0;
    ck_assert_status(cuabi_occupancy_offline_max_active_blocks(&o, "sm_90", &r, 32, 0, NULL),
                     CUABI_ERROR_INVALID_VERSION);
    r = res(32, 0);
    ck_assert_status(cuabi_occupancy_offline_max_potential_block_size(NULL, NULL, "sm_90", &r, NULL,
                                                                      NULL, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_max_potential_block_size(&b, NULL, "sm_90", &r, NULL,
                                                                      NULL, 0, -1, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_max_potential_cluster_size(&n, "sm_90", &r, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_max_potential_cluster_size(NULL, "sm_90", &r, &c, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* Issue 26: a partition's SMs as an argument, and the waves of a grid. */
START_TEST(offline_waves_per_partition)
{
    /* 64 registers, 256 threads: 4 blocks per SM on sm_90 */
    cuabi_kernel_resources r = res(64, 0);
    cuabi_grid_waves w = CUABI_GRID_WAVES_INIT;
    /* "a 1,000-block grid of this kernel takes 16 waves on 16 SMs" */
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 256, 0, 1000, NULL));
    ck_assert_uint_eq(w.grid_blocks, 1000);
    ck_assert_int_eq(w.sm_count, 16);
    ck_assert_int_eq(w.blocks_per_sm, 4);
    ck_assert_uint_eq(w.blocks_per_wave, 64);
    ck_assert_uint_eq(w.waves, 16);             /* 15 full waves of 64 and 40 */
    ck_assert_uint_eq(w.last_wave_blocks, 40);
    ck_assert(w.efficiency == 1000.0 / 1024.0);
    ck_assert(w.occupancy == 0.5);
    ck_assert_int_eq(w.limiter, CUABI_OCCUPANCY_LIMIT_REGISTERS);
    /* the whole H100 (the example GPU): 528 a wave, 2 waves */
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 0, 256, 0, 1000, NULL));
    ck_assert_int_eq(w.sm_count, 132);
    ck_assert_uint_eq(w.waves, 2);
    ck_assert_uint_eq(w.last_wave_blocks, 472);
    /* 0 takes options->sm_count; the argument wins over it */
    cuabi_occupancy_options opt = CUABI_OCCUPANCY_OPTIONS_INIT;
    opt.sm_count = 8;
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 0, 256, 0, 1000, &opt));
    ck_assert_int_eq(w.sm_count, 8);
    ck_assert_uint_eq(w.waves, 32);             /* 1000 / 32 = 31.25 */
    ck_assert_uint_eq(w.last_wave_blocks, 8);
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 24, 256, 0, 1000, &opt));
    ck_assert_int_eq(w.sm_count, 24);
    ck_assert_uint_eq(w.waves, 11);             /* 96 a wave: 10 full, 40 */
    /* an even grid: one full last wave, efficiency 1 */
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 256, 0, 128, NULL));
    ck_assert_uint_eq(w.waves, 2);
    ck_assert_uint_eq(w.last_wave_blocks, 64);
    ck_assert(w.efficiency == 1.0);
    /* the partition agrees with the min grid size for the same count */
    int b, g;
    opt.sm_count = 16;
    ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(&b, &g, "sm_90", &r, NULL, NULL,
                                                                  0, 0, &opt));
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, b, 0, (uint64_t)g, NULL));
    ck_assert_uint_eq(w.waves, 1);
    ck_assert_uint_eq(w.blocks_per_wave, (uint64_t)g);
    /* the largest grids: no overflow */
    ck_assert_ok(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 1, 256, 0, UINT64_MAX, NULL));
    ck_assert_uint_eq(w.waves, UINT64_MAX / 4 + 1);
    ck_assert_uint_eq(w.last_wave_blocks, 3);
    /* no block fits: the error says why, with 0 waves */
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 256, 100000, 10, NULL),
                     CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("limited by shared memory");
    ck_assert_uint_eq(w.waves, 0);
    ck_assert_int_eq(w.blocks_per_sm, 0);
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 2048, 0, 10, NULL),
                     CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("block size");
    /* bad input */
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, -1, 256, 0, 10, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 65536, 256, 0, 10, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("sm_count 65536");
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 256, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 0, 0, 10, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_99", &r, 16, 256, 0, 10, NULL),
                     CUABI_ERROR_NOT_FOUND);
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", NULL, 16, 256, 0, 10, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_offline_waves(NULL, "sm_90", &r, 16, 256, 0, 10, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    w.version = 0;
    ck_assert_status(cuabi_occupancy_offline_waves(&w, "sm_90", &r, 16, 256, 0, 10, NULL),
                     CUABI_ERROR_INVALID_VERSION);
}
END_TEST

/* Issue 29: the offline calculator's inputs come from the caller. A
 * cluster whose dimensions multiply to 2^64 divided by a wrapped 0 (SIGFPE);
 * a block of 2^64 + 4 threads wrapped to 4; registers x 32 and static +
 * dynamic shared memory overflowed; a huge sm_count overflowed the grid. */
START_TEST(offline_inputs_that_overflow)
{
    cuabi_kernel_resources r = res(32, 0);
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.block[0] = 128;
    c.cluster[0] = 1u << 31;
    c.cluster[1] = 1u << 31;
    c.cluster[2] = 4;
    int n = -1;
    ck_assert_ok(cuabi_occupancy_offline_max_active_clusters(&n, "sm_90", &r, &c, NULL));
    ck_assert_int_eq(n, 0);
    c.cluster[0] = c.cluster[1] = c.cluster[2] = UINT32_MAX;
    ck_assert_ok(cuabi_occupancy_offline_max_active_clusters(&n, "sm_90", &r, &c, NULL));
    ck_assert_int_eq(n, 0);
    /* 769546 x 494770 x 48448661 = 2^64 + 4 */
    c.cluster[0] = 2;
    c.cluster[1] = c.cluster[2] = 1;
    c.block[0] = 769546;
    c.block[1] = 494770;
    c.block[2] = 48448661;
    ck_assert_status(cuabi_occupancy_offline_max_potential_cluster_size(&n, "sm_90", &r, &c, NULL),
                     CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("config->block");
    c.block[0] = c.block[1] = c.block[2] = UINT32_MAX;
    ck_assert_status(cuabi_occupancy_offline_max_active_clusters(&n, "sm_90", &r, &c, NULL),
                     CUABI_ERROR_LAUNCH_CONFIG);
    /* registers: INT_MAX x 32 overflowed an int before the limit was seen */
    cuabi__occ_result o = blocks(90, kern(INT_MAX, 0), 256, 0);
    ck_assert_int_eq(o.blocks, 0);
    ck_assert_int_eq(o.limiter, CUABI_OCCUPANCY_LIMIT_REGISTERS);
    ck_assert_int_eq(o.regs_per_block, INT_MAX);
    cuabi_occupancy_result out = CUABI_OCCUPANCY_RESULT_INIT;
    r = res(INT_MAX, 0);
    ck_assert_ok(cuabi_occupancy_offline_max_active_blocks(&out, "sm_90", &r, 256, 0, NULL));
    ck_assert_int_eq(out.active_blocks_per_sm, 0);
    /* shared memory: static + dynamic past SIZE_MAX fits nowhere (it wrapped
     * to a small allocation that fitted) */
    cuabi__occ_kernel k = kern(32, 0);
    k.static_smem = SIZE_MAX - 1000;
    k.max_dynamic_smem = SIZE_MAX;
    o = blocks(90, k, 256, 2000);
    ck_assert_int_eq(o.blocks, 0);
    ck_assert_int_eq(o.limiter, CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY);
    ck_assert_uint_eq(o.smem_per_block, SIZE_MAX);
    k.static_smem = 0;
    o = blocks(90, k, 256, SIZE_MAX - 100);
    ck_assert_int_eq(o.blocks, 0);
    ck_assert_uint_eq(o.smem_per_block, SIZE_MAX);
    r = res(32, SIZE_MAX - 1000);
    cuabi_occupancy_options opt = CUABI_OCCUPANCY_OPTIONS_INIT;
    opt.max_dynamic_shared_bytes = INT64_MAX;
    ck_assert_ok(cuabi_occupancy_offline_max_active_blocks(&out, "sm_90", &r, 256, 2000, &opt));
    ck_assert_int_eq(out.active_blocks_per_sm, 0);
    /* sm_count: blocks per SM x SMs must fit the grid's int */
    r = res(32, 0);
    cuabi_occupancy_options big = CUABI_OCCUPANCY_OPTIONS_INIT;
    big.sm_count = INT_MAX;
    int b, g;
    ck_assert_status(cuabi_occupancy_offline_max_potential_block_size(&b, &g, "sm_90", &r, NULL,
                                                                      NULL, 0, 0, &big),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("options->sm_count");
    big.sm_count = 1 << 20;
    ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(&b, &g, "sm_90", &r, NULL,
                                                                  NULL, 0, 0, &big));
    ck_assert_int_eq(g, 2 << 20);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("occupancy");
    TCase *tc = tcase_create("offline");
    tcase_add_test(tc, sm90_warps_and_registers);
    tcase_add_test(tc, sm90_shared_memory);
    tcase_add_test(tc, other_architectures);
    tcase_add_test(tc, too_large);
    tcase_add_test(tc, best_block_size);
    tcase_add_test(tc, available_dynamic_smem);
    tcase_add_test(tc, arch_names_and_table);
    tcase_add_test(tc, public_offline_api);
    tcase_add_test(tc, offline_inputs_that_overflow);
    tcase_add_test(tc, offline_waves_per_partition);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
