/* Per-architecture limits for offline occupancy, from NVIDIA's published
 * "Technical Specifications per Compute Capability" (CUDA C++ Programming
 * Guide) and the rules documented in the toolkit's cuda_occupancy.h.
 *
 * Numbers that differ between GPUs of one architecture (SM count, GPCs) are
 * those of the named example GPU; they only affect the suggested minimum
 * grid size and the cluster estimates, never blocks per SM. */
#include "runtime/occupancy.h"

#include <stdlib.h>
#include <string.h>

/* Shared-memory sizes (KiB) an SM can be configured to (the carveouts). */
static const int carve_volta[] = { 0, 8, 16, 32, 64, 96, -1 };
static const int carve_turing[] = { 32, 64, -1 };
static const int carve_ga100[] = { 0, 8, 16, 32, 64, 100, 132, 164, -1 };
static const int carve_ga10x[] = { 0, 8, 16, 32, 64, 100, -1 };
static const int carve_hopper[] = { 0, 8, 16, 32, 64, 100, 132, 164, 196, 228, -1 };

#define KIB 1024u

/* arch, example, SMs, warp, threads/block, threads/SM, blocks/SM,
 * regs/SM, regs/block, regs/thread, reg unit, sub-partitions,
 * smem/SM, smem/block, smem/block opt-in, reserved/block, smem unit,
 * carveouts, barriers per block slot, cluster size portable/non-portable, GPCs */
static const cuabi__arch_limits table[] = {
    { 70, "Tesla V100", 80, 32, 1024, 2048, 32, 65536, 65536, 255, 256, 4,
      96 * KIB, 48 * KIB, 96 * KIB, 0, 256, carve_volta, 2, 0, 0, 6 },
    { 72, "Jetson AGX Xavier", 8, 32, 1024, 2048, 32, 65536, 65536, 255, 256, 4,
      96 * KIB, 48 * KIB, 96 * KIB, 0, 256, carve_volta, 2, 0, 0, 1 },
    { 75, "Tesla T4", 40, 32, 1024, 1024, 16, 65536, 65536, 255, 256, 4,
      64 * KIB, 48 * KIB, 64 * KIB, 0, 256, carve_turing, 2, 0, 0, 3 },
    { 80, "A100", 108, 32, 1024, 2048, 32, 65536, 65536, 255, 256, 4,
      164 * KIB, 48 * KIB, 163 * KIB, 1 * KIB, 128, carve_ga100, 2, 0, 0, 7 },
    { 86, "RTX 3090", 82, 32, 1024, 1536, 16, 65536, 65536, 255, 256, 4,
      100 * KIB, 48 * KIB, 99 * KIB, 1 * KIB, 128, carve_ga10x, 1, 0, 0, 7 },
    { 87, "Jetson AGX Orin", 16, 32, 1024, 1536, 16, 65536, 65536, 255, 256, 4,
      164 * KIB, 48 * KIB, 163 * KIB, 1 * KIB, 128, carve_ga100, 1, 0, 0, 2 },
    /* NVRTC 13 targets sm_88, which no published GPU or specification table
     * names yet: the limits are cuda_occupancy.h's rules for compute 8.x
     * other than 8.0/8.7 (16 blocks and 100 KiB of shared memory per SM,
     * 1 KiB reserved per block, 128-byte units) with the 1536 threads per SM
     * of every other such part (8.6, 8.7, 8.9); the SM count is sm_86's
     * example, a placeholder that only sizes suggested grids (pass
     * cuabi_occupancy_options.sm_count for a real GPU). */
    { 88, "compute 8.8 (no published GPU)", 82, 32, 1024, 1536, 16, 65536, 65536, 255, 256, 4,
      100 * KIB, 48 * KIB, 99 * KIB, 1 * KIB, 128, carve_ga10x, 1, 0, 0, 7 },
    { 89, "RTX 4090", 128, 32, 1024, 1536, 24, 65536, 65536, 255, 256, 4,
      100 * KIB, 48 * KIB, 99 * KIB, 1 * KIB, 128, carve_ga10x, 1, 0, 0, 11 },
    { 90, "H100 SXM", 132, 32, 1024, 2048, 32, 65536, 65536, 255, 256, 4,
      228 * KIB, 48 * KIB, 227 * KIB, 1 * KIB, 128, carve_hopper, 2, 8, 16, 8 },
    { 100, "B200", 148, 32, 1024, 2048, 32, 65536, 65536, 255, 256, 4,
      228 * KIB, 48 * KIB, 227 * KIB, 1 * KIB, 128, carve_hopper, 2, 8, 16, 8 },
    { 103, "B300", 148, 32, 1024, 2048, 32, 65536, 65536, 255, 256, 4,
      228 * KIB, 48 * KIB, 227 * KIB, 1 * KIB, 128, carve_hopper, 2, 8, 16, 8 },
    { 110, "Jetson Thor", 20, 32, 1024, 1536, 24, 65536, 65536, 255, 256, 4,
      228 * KIB, 48 * KIB, 227 * KIB, 1 * KIB, 128, carve_hopper, 1, 8, 8, 3 },
    { 120, "RTX 5090", 170, 32, 1024, 1536, 24, 65536, 65536, 255, 256, 4,
      100 * KIB, 48 * KIB, 99 * KIB, 1 * KIB, 128, carve_ga10x, 1, 8, 8, 11 },
    { 121, "DGX Spark (GB10)", 48, 32, 1024, 1536, 24, 65536, 65536, 255, 256, 4,
      100 * KIB, 48 * KIB, 99 * KIB, 1 * KIB, 128, carve_ga10x, 1, 8, 8, 4 },
};

const cuabi__arch_limits *cuabi__arch_limits_find(int arch)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].arch == arch)
            return &table[i];
    return NULL;
}

const cuabi__arch_limits *cuabi__arch_limits_at(size_t index)
{
    return index < sizeof table / sizeof table[0] ? &table[index] : NULL;
}

int cuabi__arch_parse(const char *s)
{
    if (!s)
        return -1;
    if (strncmp(s, "sm_", 3) == 0)
        s += 3;
    else if (strncmp(s, "compute_", 8) == 0)
        s += 8;
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    long major = strtol(s, &end, 10);
    if (*end == '.') { /* "9.0" */
        const char *m = end + 1;
        long minor = strtol(m, &end, 10);
        if (end == m || *end || minor > 9 || major > 99)
            return -1;
        return (int)(major * 10 + minor);
    }
    /* "90", "90a", "100f" */
    if ((*end == 'a' || *end == 'f') && end[1] == 0)
        end++;
    if (*end || major < 10 || major > 999)
        return -1;
    return (int)major;
}
