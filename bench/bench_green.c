/* Two kernels on two partitions of one GPU (green contexts) against the
 * same two kernels sharing the whole device, time to finish both, with the
 * offline prediction beside each measurement.
 *
 * The kernels do a fixed amount of work per block, so a grid's time is its
 * waves times the time of one wave: A is compute-bound (FMA chains), B is
 * memory-bound (a copy of its own 64 KiB per block). Each one alone on the
 * whole device gives the time of one of its waves; the offline calculator
 * (cuabi_occupancy_offline_waves, from the kernel's resources and the
 * partition's SM count) gives the waves on any number of SMs. Predicted:
 *   serial      solo(A) + solo(B)
 *   shared      the same: two streams, each kernel fills the device, so the
 *               waves of both run one after the other (at best overlapping
 *               the tails)
 *   partitions  max(waves_A(p_A) x wave_A, waves_B(p_B) x wave_B)
 * The prediction counts SMs only: a memory-bound kernel on few SMs gets
 * more than its share of bandwidth, and runs faster than predicted.
 * Every configuration is timed `reps` times (events from a common start
 * to the later end); the median is printed.
 * Usage: bench_green [reps (default 15)] [grid scale (default 1)].
 * Without a GPU, or without green contexts, it says so and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "cuabi.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        cuabi_status st__ = (call);                                                    \
        if (st__ != CUABI_SUCCESS) {                                                   \
            fprintf(stderr, "bench_green: %s: %s\n", #call, cuabi_last_error()->message); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static const char src[] =
    "extern \"C\" __global__ void fma_work(float *out, int iters) {\n"
    "  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.5f, d = blockIdx.x * 1e-6f;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    a = fmaf(a, b, c); c = fmaf(c, b, d); d = fmaf(d, b, a); b = fmaf(b, 0.9999f, 1e-7f);\n"
    "  }\n"
    "  if (a + b + c + d == 12345.0f) out[0] = a;\n"
    "}\n"
    "extern \"C\" __global__ void copy_work(float4 *dst, const float4 *src, int per_block) {\n"
    "  size_t base = (size_t)blockIdx.x * per_block;\n"
    "  for (int i = threadIdx.x; i < per_block; i += blockDim.x) dst[base + i] = src[base + i];\n"
    "}\n";

enum { BLOCK = 256, PER_BLOCK = 4096 /* float4s: 64 KiB */ };

typedef struct kern {
    const char *name;
    cuabi_kernel *k;
    cuabi_argpack *pack;
    cuabi_buffer *bufs[2];      /* what the pack names (a pack keeps no reference) */
    cuabi_kernel_resources res;
    unsigned grid;
    double solo_ms, wave_ms;
    unsigned long long solo_waves;
} kern;

static cuabi_device *dev;
static char arch[16];
static int sms, reps = 15;

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static unsigned long long waves_on(const kern *k, int n_sms)
{
    cuabi_grid_waves w = CUABI_GRID_WAVES_INIT;
    CHECK(cuabi_occupancy_offline_waves(&w, arch, &k->res, n_sms, BLOCK, 0, k->grid, NULL));
    return w.waves;
}

/* Median time from a common start to the later of the two kernels' ends;
 * b may be NULL (a alone). */
static double time_pair(kern *a, cuabi_stream *sa, kern *b, cuabi_stream *sb)
{
    cuabi_stream *origin;
    cuabi_event *start, *ea, *eb;
    CHECK(cuabi_stream_create(&origin, dev, NULL));
    CHECK(cuabi_event_create(&start, dev, NULL));
    CHECK(cuabi_event_create(&ea, dev, NULL));
    CHECK(cuabi_event_create(&eb, dev, NULL));
    double *t = calloc((size_t)reps + 1, sizeof *t);
    for (int r = -1; r < reps; r++) {   /* r = -1: warm-up */
        CHECK(cuabi_event_record(start, origin));
        CHECK(cuabi_stream_wait_event(sa, start));
        cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
        c.grid[0] = a->grid;
        c.block[0] = BLOCK;
        c.stream = sa;
        CHECK(cuabi_launch(a->k, a->pack, &c));
        CHECK(cuabi_event_record(ea, sa));
        if (b) {
            CHECK(cuabi_stream_wait_event(sb, start));
            c.grid[0] = b->grid;
            c.stream = sb;
            CHECK(cuabi_launch(b->k, b->pack, &c));
            CHECK(cuabi_event_record(eb, sb));
        }
        CHECK(cuabi_event_synchronize(ea));
        float ms_a = 0, ms_b = 0;
        CHECK(cuabi_event_elapsed_ms(&ms_a, start, ea));
        if (b) {
            CHECK(cuabi_event_synchronize(eb));
            CHECK(cuabi_event_elapsed_ms(&ms_b, start, eb));
        }
        if (r >= 0)
            t[r] = ms_a > ms_b ? ms_a : ms_b;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    double median = t[reps / 2];
    free(t);
    cuabi_event_release(eb);
    cuabi_event_release(ea);
    cuabi_event_release(start);
    cuabi_stream_release(origin);
    return median;
}

/* A green context of `n` SMs: one group of a split (exactly n when the
 * driver's rounding allows) or, when `rest` is given, the remainder. */
static cuabi_green_ctx *partition(unsigned n, cuabi_green_ctx **rest, int *got, int *got_rest)
{
    cuabi_sm_resource *all, *g[1], *rem = NULL;
    CHECK(cuabi_device_sm_resource(&all, dev));
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    o.min_count = n;
    size_t cnt = 1;
    CHECK(cuabi_sm_resource_split(g, &cnt, rest ? &rem : NULL, all, &o));
    cuabi_green_ctx *green;
    CHECK(cuabi_green_ctx_create(&green, dev, g, 1));
    CHECK(cuabi_green_ctx_sm_count(got, green));
    if (rest) {
        *rest = NULL;
        *got_rest = 0;
        if (rem) {
            CHECK(cuabi_green_ctx_create(rest, dev, &rem, 1));
            CHECK(cuabi_green_ctx_sm_count(got_rest, *rest));
            cuabi_sm_resource_release(rem);
        }
    }
    cuabi_sm_resource_release(g[0]);
    cuabi_sm_resource_release(all);
    return green;
}

static void row(const char *what, int pa, int pb, double ms, double pred, unsigned long long wa,
                unsigned long long wb)
{
    printf("%-26s %4d/%-4d %10.3f %12.3f %+8.0f%%   %llu/%llu\n", what, pa, pb, ms, pred,
           100.0 * (ms - pred) / pred, wa, wb);
}

/* Two partitions: A on `ga`, B on `gb`. */
static void run_partitions(const char *what, kern *a, kern *b, cuabi_green_ctx *ga,
                           cuabi_green_ctx *gb)
{
    int pa, pb;
    CHECK(cuabi_green_ctx_sm_count(&pa, ga));
    CHECK(cuabi_green_ctx_sm_count(&pb, gb));
    cuabi_stream *sa, *sb;
    CHECK(cuabi_green_ctx_stream_create(&sa, ga, NULL));
    CHECK(cuabi_green_ctx_stream_create(&sb, gb, NULL));
    double ms = time_pair(a, sa, b, sb);
    unsigned long long wa = waves_on(a, pa), wb = waves_on(b, pb);
    double pa_ms = (double)wa * a->wave_ms, pb_ms = (double)wb * b->wave_ms;
    row(what, pa, pb, ms, pa_ms > pb_ms ? pa_ms : pb_ms, wa, wb);
    cuabi_stream_release(sb);
    cuabi_stream_release(sa);
}

static void make_kernel(kern *k, cuabi_objcode *code, const char *name, unsigned grid,
                        cuabi_memory_resource *pool)
{
    k->name = name;
    k->grid = grid;
    CHECK(cuabi_objcode_get_kernel(&k->k, code, name));
    k->res = (cuabi_kernel_resources)CUABI_KERNEL_RESOURCES_INIT;
    CHECK(cuabi_kernel_get_resources(&k->res, k->k));
    if (strcmp(name, "fma_work") == 0) {
        k->bufs[1] = NULL;
        CHECK(cuabi_buffer_allocate(&k->bufs[0], pool, 64, 0, NULL));
        CHECK(cuabi_argpack_create(&k->pack, "buffer, i32"));
        CHECK(cuabi_argpack_set_buffer(k->pack, 0, k->bufs[0]));
        CHECK(cuabi_argpack_set_int(k->pack, 1, 4096));
    } else {
        size_t bytes = (size_t)grid * PER_BLOCK * 16;
        CHECK(cuabi_buffer_allocate(&k->bufs[0], pool, bytes, 0, NULL));
        CHECK(cuabi_buffer_allocate(&k->bufs[1], pool, bytes, 0, NULL));
        CHECK(cuabi_argpack_create(&k->pack, "buffer, buffer, i32"));
        CHECK(cuabi_argpack_set_buffer(k->pack, 0, k->bufs[0]));
        CHECK(cuabi_argpack_set_buffer(k->pack, 1, k->bufs[1]));
        CHECK(cuabi_argpack_set_int(k->pack, 2, PER_BLOCK));
    }
}

int main(int argc, char **argv)
{
    reps = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 15;
    int scale = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("bench_green: no GPU (%s); nothing measured\n",
               ndev == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    CHECK(cuabi_device_get(&dev, 0));
    cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
    CHECK(cuabi_device_get_properties(&p, dev));
    sms = p.multiprocessor_count;
    snprintf(arch, sizeof arch, "sm_%d%d", p.compute_capability_major, p.compute_capability_minor);
    cuabi_sm_resource *all;
    cuabi_status st = cuabi_device_sm_resource(&all, dev);
    if (st != CUABI_SUCCESS) {
        printf("bench_green: no green contexts on %s: %s\n", p.name, cuabi_last_error()->message);
        return 0;
    }
    cuabi_sm_resource_info ri = CUABI_SM_RESOURCE_INFO_INIT;
    CHECK(cuabi_sm_resource_get_info(&ri, all));
    cuabi_sm_resource_release(all);
    printf("bench_green: %s (%s), %d SMs; partitions of at least %d SMs, aligned to %d; "
           "median of %d\n\n", p.name, arch, sms, ri.min_partition_size,
           ri.coscheduled_alignment, reps);

    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
    po.arch = arch;
    CHECK(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "green.cu"));
    CHECK(cuabi_program_compile(&code, prog, &po));
    cuabi_program_release(prog);
    cuabi_memory_resource *pool;
    CHECK(cuabi_memory_resource_device_default(&pool, dev));
    kern a, b;
    make_kernel(&a, code, "fma_work", (unsigned)(sms * 8 * 6 * scale), pool);
    make_kernel(&b, code, "copy_work", (unsigned)(sms * 8 * 6 * scale), pool);

    /* each alone on the whole device: the time of one wave */
    cuabi_stream *s1, *s2;
    CHECK(cuabi_stream_create(&s1, dev, NULL));
    CHECK(cuabi_stream_create(&s2, dev, NULL));
    kern *ks[2] = { &a, &b };
    for (int i = 0; i < 2; i++) {
        kern *k = ks[i];
        cuabi_grid_waves w = CUABI_GRID_WAVES_INIT, wl = CUABI_GRID_WAVES_INIT;
        CHECK(cuabi_occupancy_offline_waves(&w, arch, &k->res, sms, BLOCK, 0, k->grid, NULL));
        CHECK(cuabi_occupancy_waves(&wl, k->k, dev, BLOCK, 0, k->grid));
        k->solo_waves = w.waves;
        k->solo_ms = time_pair(k, s1, NULL, NULL);
        k->wave_ms = k->solo_ms / (double)w.waves;
        printf("kernel %-9s %d threads, grid %u, %d registers: %d blocks/SM offline (%d live); "
               "alone on %d SMs %.3f ms = %llu waves x %.3f ms\n", k->name, BLOCK, k->grid,
               k->res.registers, w.blocks_per_sm, wl.blocks_per_sm, sms, k->solo_ms,
               (unsigned long long)w.waves, k->wave_ms);
    }
    printf("\n%-26s %9s %10s %12s %9s   %s\n", "both kernels", "SMs A/B", "measured ms",
           "predicted ms", "error", "waves A/B");
    double serial = time_pair(&a, s1, &b, s1);
    row("serial (one stream)", sms, sms, serial, a.solo_ms + b.solo_ms, a.solo_waves, b.solo_waves);
    double shared = time_pair(&a, s1, &b, s2);
    row("shared (two streams)", sms, sms, shared, a.solo_ms + b.solo_ms, a.solo_waves,
        b.solo_waves);

    /* halves: two groups of one split */
    cuabi_sm_resource *full, *g[2];
    CHECK(cuabi_device_sm_resource(&full, dev));
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    o.min_count = (unsigned)(sms / 2);
    size_t n = 2;
    CHECK(cuabi_sm_resource_split(g, &n, NULL, full, &o));
    if (n < 2) {   /* the driver rounds half up past half: two smaller groups */
        cuabi_sm_resource_release(g[0]);
        o.min_count = (unsigned)(sms / 2 - ri.coscheduled_alignment);
        n = 2;
        CHECK(cuabi_sm_resource_split(g, &n, NULL, full, &o));
    }
    if (n == 2) {
        cuabi_green_ctx *ga, *gb;
        CHECK(cuabi_green_ctx_create(&ga, dev, &g[0], 1));
        CHECK(cuabi_green_ctx_create(&gb, dev, &g[1], 1));
        run_partitions("partitions: halves", &a, &b, ga, gb);
        cuabi_green_ctx_release(gb);
        cuabi_green_ctx_release(ga);
        cuabi_sm_resource_release(g[1]);
    }
    cuabi_sm_resource_release(g[0]);
    cuabi_sm_resource_release(full);
    /* one group and the remainder, in proportion to the kernels' solo times */
    double share = a.solo_ms / (a.solo_ms + b.solo_ms);
    unsigned want = (unsigned)(share * sms);
    if (want < (unsigned)ri.min_partition_size)
        want = (unsigned)ri.min_partition_size;
    for (int flip = 0; flip < 2; flip++) {
        cuabi_green_ctx *rest = NULL;
        int got = 0, got_rest = 0;
        cuabi_green_ctx *ga = partition(flip ? (unsigned)sms - want : want, &rest, &got,
                                        &got_rest);
        if (rest) {
            run_partitions(flip ? "partitions: B gets a group" : "partitions: A gets a group",
                           &a, &b, flip ? rest : ga, flip ? ga : rest);
            cuabi_green_ctx_release(rest);
        }
        cuabi_green_ctx_release(ga);
    }
    /* each kernel on a partition alone: the prediction per kernel */
    printf("\n%-26s %9s %10s %12s %9s   %s\n", "one kernel on a partition", "SMs", "measured ms",
           "predicted ms", "error", "waves");
    unsigned sizes[] = { (unsigned)ri.min_partition_size, 16, 32, 64, (unsigned)sms };
    for (int i = 0; i < 2; i++)
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            int got, unused;
            cuabi_green_ctx *gc = partition(sizes[z], NULL, &got, &unused);
            cuabi_stream *s;
            CHECK(cuabi_green_ctx_stream_create(&s, gc, NULL));
            double ms = time_pair(ks[i], s, NULL, NULL);
            unsigned long long w = waves_on(ks[i], got);
            char what[64];
            snprintf(what, sizeof what, "%s", ks[i]->name);
            printf("%-26s %9d %10.3f %12.3f %+8.0f%%   %llu\n", what, got, ms,
                   (double)w * ks[i]->wave_ms, 100.0 * (ms - (double)w * ks[i]->wave_ms) /
                   ((double)w * ks[i]->wave_ms), w);
            cuabi_stream_release(s);
            cuabi_green_ctx_release(gc);
        }
    printf("\npredicted: waves from the offline calculator (the partition's SM count) x the "
           "time of one wave measured alone on the whole device\n");
    cuabi_stream_release(s2);
    cuabi_stream_release(s1);
    cuabi_argpack_release(a.pack);
    cuabi_argpack_release(b.pack);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (ks[i]->bufs[j])
                cuabi_buffer_destroy(ks[i]->bufs[j]);
    cuabi_kernel_release(a.k);
    cuabi_kernel_release(b.k);
    cuabi_memory_resource_release(pool);
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
    return 0;
}
