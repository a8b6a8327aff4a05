/* cuabi demo: the whole path on one kernel. A segmented reduction template,
 * instantiated through a name expression, compiled to LTO-IR (through the
 * compile cache), linked with nvJitLink, inspected (resources, occupancy)
 * and, on a GPU, launched and checked against the CPU. Without a GPU it does
 * everything but the launch and says so. */
#include "cli.h"

#include <cuda.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_demo(int argc, char **argv);

static const char demo_source[] =
    "// Sum each segment [offsets[s], offsets[s+1]) of `in` into out[s]:\n"
    "// one block per segment, a tree reduction in shared memory.\n"
    "template <typename T, int BLOCK>\n"
    "__global__ void segreduce(const T *in, const int *offsets, T *out, int segments)\n"
    "{\n"
    "    __shared__ T part[BLOCK];\n"
    "    int s = blockIdx.x;\n"
    "    if (s >= segments) return;\n"
    "    T acc = 0;\n"
    "    for (int i = offsets[s] + threadIdx.x; i < offsets[s + 1]; i += BLOCK) acc += in[i];\n"
    "    part[threadIdx.x] = acc;\n"
    "    __syncthreads();\n"
    "    for (int step = BLOCK / 2; step > 0; step /= 2) {\n"
    "        if (threadIdx.x < step) part[threadIdx.x] += part[threadIdx.x + step];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0) out[s] = part[0];\n"
    "}\n";

static const char demo_expr[] = "segreduce<float, 256>";  /* as demo_about says */
enum { BLOCK = 256 };

static const char demo_about[] =
    "Compile a segmented-reduction template (segreduce<float, 256>, through a name\n"
    "expression) to LTO-IR, link it with nvJitLink, print its resources and\n"
    "occupancy, then on a GPU launch it: [1..12] in 3 segments gives [10, 26, 42];\n"
    "then a large random case is checked against the CPU. Without a GPU everything\n"
    "but the launch runs. A second run compiles from the cache.\n";

typedef struct demo {
    bool json;
    cli_json j;
    cuabi_device *dev;
    char arch[16];
} demo;

#define CUABI_CLI_TRY(expr)                          \
    do {                                             \
        cuabi_status st__ = (expr);                  \
        if (st__ != CUABI_SUCCESS) return st__;      \
    } while (0)

static void say(demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(demo *d, const char *fmt, ...)
{
    if (d->json)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

/* Compile to LTO-IR and link to a CUBIN; the kernel by its lowered name. */
static cuabi_status build(demo *d, cuabi_kernel **k, int *hit)
{
    cuabi_program *prog = NULL;
    cuabi_objcode *ltoir = NULL, *cubin = NULL;
    cuabi_linker *ln = NULL;
    const char *exprs[1] = { demo_expr };
    const char *lowered = NULL;
    int link_hit = 0;
    cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
    po.arch = d->arch;
    po.output = CUABI_CODE_LTOIR;
    po.name_expressions = exprs;
    po.num_name_expressions = 1;
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.arch = d->arch;
    lo.lto = 1;
    cuabi_status st = cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, demo_source,
                                           sizeof demo_source - 1, "segreduce.cu");
    if (st == CUABI_SUCCESS) st = cuabi_program_compile(&ltoir, prog, &po);
    if (st == CUABI_SUCCESS) st = cuabi_program_cache_hit(hit, prog);
    if (st == CUABI_SUCCESS) st = cuabi_program_lowered_name(&lowered, prog, demo_expr);
    if (st == CUABI_SUCCESS) st = cuabi_linker_create(&ln, &lo);
    if (st == CUABI_SUCCESS) st = cuabi_linker_add_objcode(ln, ltoir);
    if (st == CUABI_SUCCESS) st = cuabi_linker_complete(&cubin, ln, CUABI_CODE_CUBIN);
    if (st == CUABI_SUCCESS) st = cuabi_linker_cache_hit(&link_hit, ln);
    if (st == CUABI_SUCCESS) st = cuabi_objcode_get_kernel(k, cubin, lowered);
    if (st == CUABI_SUCCESS)
        say(d, "compiled %s to LTO-IR for %s (%s), linked with nvJitLink to a CUBIN (%s)\n"
               "  kernel %s\n", demo_expr, d->arch,
            *hit == 0 ? "compiled now" : *hit == 1 ? "from the in-memory cache"
                                                   : "from the on-disk cache",
            link_hit == 0 ? "linked now" : link_hit == 1 ? "from the in-memory cache"
                                                         : "from the on-disk cache", lowered);
    if (d->json && st == CUABI_SUCCESS) {
        json_string(&d->j, "kernel", demo_expr);
        json_string(&d->j, "lowered_name", lowered);
        json_string(&d->j, "arch", d->arch);
        json_bool(&d->j, "from_cache", *hit != 0);
        json_bool(&d->j, "link_from_cache", link_hit != 0);
    }
    if (ln)
        cuabi_linker_destroy(ln);
    if (cubin)
        cuabi_objcode_release(cubin);
    if (ltoir)
        cuabi_objcode_release(ltoir);
    if (prog)
        cuabi_program_release(prog);
    return st;
}

static cuabi_status report(demo *d, cuabi_kernel *k)
{
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    CUABI_CLI_TRY(cuabi_kernel_get_resources(&r, k));
    cuabi_occupancy_result o = CUABI_OCCUPANCY_RESULT_INIT;
    CUABI_CLI_TRY(cuabi_occupancy_offline_max_active_blocks(&o, d->arch, &r, BLOCK, 0, NULL));
    int best = 0, grid = 0;
    CUABI_CLI_TRY(cuabi_occupancy_offline_max_potential_block_size(&best, &grid, d->arch, &r, NULL,
                                                                   NULL, 0, 0, NULL));
    say(d, "resources: %d registers, %zu B static shared, %zu B local, %zu B of parameters\n",
        r.registers, r.shared_static_bytes, r.local_bytes, r.param_bytes);
    say(d, "occupancy on %s with %d threads: %d blocks (%d warps) per SM = %.0f%%, limited by %s\n",
        d->arch, BLOCK, o.active_blocks_per_sm, o.active_warps_per_sm, o.occupancy * 100,
        cuabi_occupancy_limiter_name(o.limiter));
    say(d, "best block size for occupancy: %d\n", best);
    if (d->json) {
        json_begin_object(&d->j, "resources");
        json_int(&d->j, "registers", r.registers);
        json_int(&d->j, "shared_static_bytes", (long long)r.shared_static_bytes);
        json_int(&d->j, "local_bytes", (long long)r.local_bytes);
        json_int(&d->j, "param_bytes", (long long)r.param_bytes);
        json_end_object(&d->j);
        json_begin_object(&d->j, "occupancy");
        json_int(&d->j, "block_size", BLOCK);
        json_int(&d->j, "active_blocks_per_sm", o.active_blocks_per_sm);
        json_double(&d->j, "occupancy", o.occupancy);
        json_string(&d->j, "limiter", cuabi_occupancy_limiter_name(o.limiter));
        json_int(&d->j, "best_block_size", best);
        json_end_object(&d->j);
    }
    return CUABI_SUCCESS;
}

/* Run the kernel on `n` values in `segs` segments; compare with the CPU. */
static cuabi_status run_case(demo *d, cuabi_kernel *k, const float *in, const int *offsets,
                             int segs, bool *ok, float *out)
{
    cuabi_memory_resource *res = NULL;
    cuabi_buffer *bin = NULL, *boff = NULL, *bout = NULL;
    cuabi_argpack *pack = NULL;
    cuabi_prepared *pl = NULL;
    size_t n = (size_t)offsets[segs];
    cuabi_status st = cuabi_memory_resource_device_default(&res, d->dev);
    if (st == CUABI_SUCCESS) st = cuabi_buffer_allocate(&bin, res, (n ? n : 1) * sizeof *in, 0, NULL);
    if (st == CUABI_SUCCESS) st = cuabi_buffer_allocate(&boff, res, ((size_t)segs + 1) * sizeof *offsets, 0, NULL);
    if (st == CUABI_SUCCESS) st = cuabi_buffer_allocate(&bout, res, (size_t)segs * sizeof *out, 0, NULL);
    if (st == CUABI_SUCCESS && n) st = cuabi_buffer_copy_from_host(bin, 0, in, n * sizeof *in, NULL);
    if (st == CUABI_SUCCESS) st = cuabi_buffer_copy_from_host(boff, 0, offsets, ((size_t)segs + 1) * sizeof *offsets, NULL);
    /* The kernel's signature, described once. */
    if (st == CUABI_SUCCESS) st = cuabi_argpack_create(&pack, "buffer, buffer, buffer, i32");
    if (st == CUABI_SUCCESS) st = cuabi_argpack_set_buffer(pack, 0, bin);
    if (st == CUABI_SUCCESS) st = cuabi_argpack_set_buffer(pack, 1, boff);
    if (st == CUABI_SUCCESS) st = cuabi_argpack_set_buffer(pack, 2, bout);
    if (st == CUABI_SUCCESS) st = cuabi_argpack_set_int(pack, 3, segs);
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = (unsigned)segs;
    c.block[0] = BLOCK;
    c.device = d->dev;
    if (st == CUABI_SUCCESS) st = cuabi_prepared_create(&pl, k, pack, &c);
    if (st == CUABI_SUCCESS) st = cuabi_prepared_launch(pl);
    if (st == CUABI_SUCCESS) st = cuabi_buffer_copy_to_host(out, bout, 0, (size_t)segs * sizeof *out, NULL);
    *ok = st == CUABI_SUCCESS;
    for (int s = 0; st == CUABI_SUCCESS && s < segs; s++) {
        double want = 0;
        for (int i = offsets[s]; i < offsets[s + 1]; i++)
            want += in[i];
        if ((double)out[s] != want)
            *ok = false;
    }
    if (pl)
        cuabi_prepared_release(pl);
    if (pack)
        cuabi_argpack_release(pack);
    if (bout)
        cuabi_buffer_destroy(bout);
    if (boff)
        cuabi_buffer_destroy(boff);
    if (bin)
        cuabi_buffer_destroy(bin);
    if (res)
        cuabi_memory_resource_release(res);
    return st;
}

static cuabi_status launch_cases(demo *d, cuabi_kernel *k, bool *all_ok)
{
    float small_in[12], small_out[3];
    int small_off[4] = { 0, 4, 8, 12 };
    for (int i = 0; i < 12; i++)
        small_in[i] = (float)(i + 1);
    bool ok;
    CUABI_CLI_TRY(run_case(d, k, small_in, small_off, 3, &ok, small_out));
    say(d, "[1..12] in 3 segments -> [%g, %g, %g] %s\n", small_out[0], small_out[1],
        small_out[2], ok ? "(correct)" : "(WRONG: expected [10, 26, 42])");
    *all_ok = ok && small_out[0] == 10 && small_out[1] == 26 && small_out[2] == 42;
    /* Large: 2000 segments of 0..9999 small integers (exact in float). */
    enum { SEGS = 2000 };
    int *off = malloc((SEGS + 1) * sizeof *off);
    float *out = malloc(SEGS * sizeof *out);
    unsigned seed = 12345;
    off[0] = 0;
    for (int s = 0; s < SEGS; s++) {
        seed = seed * 1103515245u + 12345u;
        off[s + 1] = off[s] + (int)((seed >> 8) % 10000);
    }
    float *in = malloc((size_t)off[SEGS] * sizeof *in + 1);
    for (int i = 0; i < off[SEGS]; i++) {
        seed = seed * 1103515245u + 12345u;
        in[i] = (float)((seed >> 8) % 100);
    }
    cuabi_status st = run_case(d, k, in, off, SEGS, &ok, out);
    if (st == CUABI_SUCCESS)
        say(d, "%d random segments, %d values: %s\n", SEGS, off[SEGS],
            ok ? "all sums match the CPU" : "MISMATCH with the CPU");
    if (d->json && st == CUABI_SUCCESS) {
        json_begin_array(&d->j, "small_result");
        for (int i = 0; i < 3; i++)
            json_double(&d->j, NULL, small_out[i]);
        json_end_array(&d->j);
        json_int(&d->j, "large_segments", SEGS);
        json_int(&d->j, "large_values", off[SEGS]);
    }
    *all_ok = *all_ok && ok;
    free(in);
    free(off);
    free(out);
    return st;
}

/* Device 0, or why there is none in words for someone without a GPU: the
 * library's own message names CUABI_DRIVER_PATH, which only helps when a
 * driver is installed where the loader does not look. */
static bool find_gpu(cuabi_device **dev, char *reason, size_t len)
{
    int ndev = 0;
    cuabi_status st = cuabi_device_count(&ndev);
    if (st == CUABI_SUCCESS && ndev > 0 && cuabi_device_get(dev, 0) == CUABI_SUCCESS)
        return true;
    if (st == CUABI_ERROR_DRIVER_NOT_FOUND)
        snprintf(reason, len, "no NVIDIA driver found (libcuda.so.1 is not where the dynamic loader looks)");
    else if (st == CUABI_SUCCESS || st == CUABI_ERROR_NO_DEVICE)
        snprintf(reason, len, "the NVIDIA driver sees no GPU");
    else
        snprintf(reason, len, "%s", cuabi_last_error()->message);
    cuabi_error_clear();
    return false;
}

/* The architecture: the GPU's, else sm_90 (offline answers only). */
static void pick_arch(demo *d, bool gpu)
{
    snprintf(d->arch, sizeof d->arch, "sm_90");
    if (gpu) {
        int major = 0, minor = 0;
        cuabi_device_attribute(&major, d->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        cuabi_device_attribute(&minor, d->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        snprintf(d->arch, sizeof d->arch, "sm_%d%d", major, minor);
    }
}

/* Build, inspect and (on a GPU) launch; the exit status. */
static int run_demo(demo *d, bool gpu, const char *reason)
{
    cuabi_kernel *k = NULL;
    int hit = 0, rc = 0;
    bool ok = true;
    json_begin_object(&d->j, NULL);
    cuabi_status st = build(d, &k, &hit);
    if (st == CUABI_SUCCESS)
        st = report(d, k);
    if (st == CUABI_SUCCESS && gpu)
        st = launch_cases(d, k, &ok);
    else if (st == CUABI_SUCCESS)
        say(d, "No GPU available (%s): compiled, linked and inspected; skipping the launch\n",
            reason);
    if (st != CUABI_SUCCESS) {
        rc = cli_fail("demo", st, &d->j);
    } else {
        json_bool(&d->j, "launched", gpu);
        if (gpu)
            json_bool(&d->j, "correct", ok);
        else
            json_null(&d->j, "correct");   /* nothing ran: neither right nor wrong */
        if (!gpu)
            json_string(&d->j, "skipped_because", reason);
        rc = ok ? json_finish(&d->j, 0)
                : json_fail(&d->j, CUABI_ERROR_INTERNAL, "the GPU's sums differ from the CPU's", 1);
    }
    if (k)
        cuabi_kernel_release(k);
    return rc;
}

int cli_demo(int argc, char **argv)
{
    demo d;
    memset(&d, 0, sizeof d);
    const cli_option table[] = {
        CLI_OPT_FLAG("json", 0, &d.json,
                     "the same as one JSON object: kernel, lowered_name, arch, from_cache, "
                     "link_from_cache, resources, occupancy, launched, correct (null when "
                     "nothing was launched), skipped_because"),
    };
    const cli_spec spec = { "demo", demo_about, table, sizeof table / sizeof table[0] };
    int rc = cli_parse(&spec, argc, argv);
    if (rc != CLI_GO_ON || (d.json && !json_start(&d.j)))
        return rc != CLI_GO_ON ? rc : 1;
    char reason[512];
    bool gpu = find_gpu(&d.dev, reason, sizeof reason);
    pick_arch(&d, gpu);
    rc = run_demo(&d, gpu, reason);
    if (d.dev)
        cuabi_device_release(d.dev);
    return rc;
}
