/* cuabi occupancy: compile a kernel and show, per block size, how many
 * blocks and warps fit on one SM, the occupancy and what limits it: live on
 * the local GPU (or on a green context of --sms SMs of it), or offline for a
 * named architecture (and a partition of --sms SMs); with --grid, the waves
 * a grid of that many blocks takes at each block size. */
#include "cli.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

int cli_occupancy(int argc, char **argv);

typedef struct row {
    int block;
    cuabi_occupancy_result r;
    cuabi_grid_waves w;       /* with --grid; w.waves 0: no block fits */
} row;

static const char *svg_colour(cuabi_occupancy_limiter l)
{
    switch (l) {
    case CUABI_OCCUPANCY_LIMIT_WARPS: return "#4c78a8";
    case CUABI_OCCUPANCY_LIMIT_REGISTERS: return "#e45756";
    case CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY: return "#f58518";
    case CUABI_OCCUPANCY_LIMIT_BLOCKS: return "#54a24b";
    default: return "#9d9d9d";
    }
}

/* Text for an SVG (XML) document: name expressions hold '<' and '&'. */
static void svg_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static int write_svg(const char *path, const row *rows, size_t n, const char *title)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    /* Left margin for the y axis and its label, the bars, then the legend
     * (its longest line, "limited by shared memory", is ~150 px at 11 px);
     * wide enough for the title at 14 px (~8 px a character). */
    const int bw = 18, h = 240, left = 64, top = 40, legend_width = 190;
    int chart_right = left + (int)n * bw;
    int width = chart_right + legend_width;
    int title_width = left + 8 * (int)strlen(title) + 10;
    if (width < title_width)
        width = title_width;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", width, h + top + 50);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\">", left);
    svg_text(f, title);
    fprintf(f, "</text>\n");
    fprintf(f, "<text transform=\"translate(14,%d) rotate(-90)\" text-anchor=\"middle\">"
               "occupancy (%% of the SM's warps)</text>\n", top + h / 2);
    for (int pct = 0; pct <= 100; pct += 25) {
        int y = top + h - h * pct / 100;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%d%%</text>\n",
                left, y, left + (int)n * bw, y, left - 4, y + 4, pct);
    }
    for (size_t i = 0; i < n; i++) {
        int bh = (int)(rows[i].r.occupancy * h + 0.5);
        int x = left + (int)i * bw;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\">"
                   "<title>block %d: %d blocks, %d warps, %.0f%%, limited by %s</title></rect>\n",
                x + 1, top + h - bh, bw - 2, bh, svg_colour(rows[i].r.limiter), rows[i].block,
                rows[i].r.active_blocks_per_sm, rows[i].r.active_warps_per_sm,
                rows[i].r.occupancy * 100, cuabi_occupancy_limiter_name(rows[i].r.limiter));
        if (rows[i].block % 128 == 0 || n < 12)
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                    x + bw / 2, top + h + 14, rows[i].block);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">block size (threads)</text>\n",
            left + (int)n * bw / 2, top + h + 34);
    static const cuabi_occupancy_limiter legend[] = {
        CUABI_OCCUPANCY_LIMIT_WARPS, CUABI_OCCUPANCY_LIMIT_REGISTERS,
        CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY, CUABI_OCCUPANCY_LIMIT_BLOCKS };
    for (int i = 0; i < 4; i++) {
        int x = chart_right + 16, y = top + 10 + i * 18;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">limited by %s</text>\n",
                x, y, svg_colour(legend[i]), x + 16, y + 10, cuabi_occupancy_limiter_name(legend[i]));
    }
    fprintf(f, "</svg>\n");
    return fclose(f);
}

typedef struct opts {
    const char *file, *kernel, *name_expr, *arch, *svg;
    long long smem, sms, grid;
    bool json;
    char kernel_buf[512];   /* the kernel found when none was named */
} opts;

static const char occupancy_about[] =
    "Compile FILE.cu, then for every block size (multiples of 32 up to what the\n"
    "kernel allows) print the active blocks and warps per SM, the occupancy and the\n"
    "limiting resource, as a table and a bar chart; then the best block size and the\n"
    "smallest grid that fills the GPU (or the --sms partition), and with --grid the\n"
    "waves a grid of that many blocks takes.\n";

static int parse(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    const cli_option table[] = {
        CLI_ARG("FILE.cu", &o->file, 1, "the CUDA C++ source"),
        CLI_OPT_STRING("kernel", 0, "NAME", &o->kernel,
                       "the kernel: its name, or a template instance such as 'segred<float, "
                       "256>' (a name with '<' is instantiated as a name expression); not "
                       "needed when FILE has one kernel"),
        CLI_OPT_STRING("name-expr", 0, "E", &o->name_expr,
                       "instantiate a template kernel and use it (same as --kernel E)"),
        CLI_OPT_STRING("arch", 0, "sm_XX", &o->arch,
                       "offline, for that architecture (no GPU needed); default: live on GPU "
                       "0, or offline sm_90 when there is no GPU"),
        CLI_OPT_INT("smem", 0, "BYTES", &o->smem, 0, 2147483647,
                    "dynamic shared memory per block (default 0)"),
        CLI_OPT_INT("sms", 0, "N", &o->sms, 1, 65535,
                    "a partition of N SMs: offline, the answers for N SMs of the architecture; "
                    "live, on a green context of at least N SMs of GPU 0 (the driver rounds N "
                    "up to its partition size)"),
        CLI_OPT_INT("grid", 0, "BLOCKS", &o->grid, 1, 1099511627776LL,
                    "the waves a grid of BLOCKS blocks takes at each block size and at the best"),
        CLI_OPT_FLAG("json", 0, &o->json,
                     "one record per block size: block_size, active_blocks_per_sm, "
                     "active_warps_per_sm, occupancy (0-1), limiter, arch, live, sm_count; "
                     "with --grid also grid_blocks, waves, last_wave_blocks"),
        CLI_OPT_STRING("svg", 0, "FILE", &o->svg, "write the chart as an SVG picture"),
    };
    const cli_spec spec = { "occupancy", occupancy_about, table, sizeof table / sizeof table[0] };
    int rc = cli_parse(&spec, argc, argv);
    /* A kernel name with template arguments is a name expression, and a
     * name expression alone names the kernel. */
    if (o->kernel && !o->name_expr && strchr(o->kernel, '<'))
        o->name_expr = o->kernel;
    if (o->name_expr && !o->kernel)
        o->kernel = o->name_expr;
    return rc;
}

/* No --kernel: the file's only kernel, or a usage error (exit 2) listing
 * them, told in why. */
static cuabi_status pick_kernel(opts *o, cuabi_objcode *code, char *why, size_t len)
{
    size_t n = 0;
    cuabi_status st = cuabi_objcode_kernel_count(&n, code);
    if (st != CUABI_SUCCESS || o->kernel)
        return st;
    const char *name = NULL;
    if (n == 1 && (st = cuabi_objcode_kernel_name(&name, code, 0)) == CUABI_SUCCESS) {
        snprintf(o->kernel_buf, sizeof o->kernel_buf, "%s", name);
        o->kernel = o->kernel_buf;
        return CUABI_SUCCESS;
    }
    if (n == 0) {
        snprintf(why, len, "%s defines no kernel (a template kernel needs --kernel "
                 "'name<args>' to be instantiated)", o->file);
        return st;
    }
    int at = snprintf(why, len, "%s has %zu kernels; name one with --kernel:", o->file, n);
    for (size_t i = 0; i < n && st == CUABI_SUCCESS && at > 0 && (size_t)at < len; i++)
        if ((st = cuabi_objcode_kernel_name(&name, code, i)) == CUABI_SUCCESS)
            at += snprintf(why + at, len - (size_t)at, "%s %s", i ? "," : "", name);
    if (at > 0 && (size_t)at < len)
        snprintf(why + at, len - (size_t)at,
                 "\n(a template kernel: --kernel 'name<args>', e.g. 'segred<float, 256>')");
    return st;
}

/* Compile for `arch`.  Live (k != NULL), the kernel is loaded
 * (cuLibraryGetKernel) for the driver's queries, so the code must be for the
 * local device.  Offline (k == NULL) only the resources are read from the
 * CUBIN: the code is never loaded, so any architecture works with or without
 * a GPU. A usage error (which kernel?) leaves its message in why. */
static cuabi_status build(cuabi_kernel **k, cuabi_kernel_resources *res, opts *o,
                          const char *arch, const char *src, char *why, size_t len)
{
    cuabi_program *prog = NULL;
    cuabi_objcode *code = NULL;
    cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
    const char *exprs[1] = { o->name_expr };
    po.arch = arch;
    if (o->name_expr) {
        po.name_expressions = exprs;
        po.num_name_expressions = 1;
    }
    cuabi_status st = cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, strlen(src), o->file);
    if (st == CUABI_SUCCESS)
        st = cuabi_program_compile(&code, prog, &po);
    if (st == CUABI_SUCCESS && !o->kernel)
        st = pick_kernel(o, code, why, len);
    if (*why) {
        /* which kernel is for the user to say */
    } else if (st == CUABI_SUCCESS && k) {
        st = cuabi_objcode_get_kernel(k, code, o->kernel);
        if (st == CUABI_SUCCESS)
            st = cuabi_kernel_get_resources(res, *k);
    } else if (st == CUABI_SUCCESS) {
        st = cuabi_objcode_kernel_resources(res, code, o->kernel, arch);
    }
    if (code)
        cuabi_objcode_release(code);
    if (prog)
        cuabi_program_release(prog);
    return st;
}

/* One run: where it runs, what was compiled, and the table. */
typedef struct session {
    opts o;
    cli_json j;
    cuabi_device *dev;   /* live on it, else offline for arch */
    cuabi_green_ctx *green;   /* live with --sms: the partition */
    int sms;             /* the SMs the answers are for */
    const char *arch;    /* the architecture shown */
    char live_arch[16];
    cuabi_kernel *k;
    cuabi_kernel_resources res;
    row rows[32];
    size_t n;
    row best;            /* the best block size (block 0: none fits) */
    int min_grid;        /* the smallest grid that fills the SMs with it */
} session;

/* Live on GPU 0 unless an architecture is named or there is no GPU. */
static void choose_target(session *s)
{
    int ndev = 0;
    bool gpu = !s->o.arch && cuabi_device_count(&ndev) == CUABI_SUCCESS && ndev > 0 &&
               cuabi_device_get(&s->dev, 0) == CUABI_SUCCESS;
    if (!gpu)
        s->dev = NULL;
    cuabi_error_clear();
    s->arch = s->o.arch;
    if (s->dev) {
        int major = 0, minor = 0;
        cuabi_device_attribute(&major, s->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        cuabi_device_attribute(&minor, s->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        snprintf(s->live_arch, sizeof s->live_arch, "sm_%d%d", major, minor);
        s->arch = s->live_arch;
    } else if (!s->arch) {
        s->arch = "sm_90";
        if (!s->o.json)
            printf("No GPU available: offline answers for sm_90 (name another with --arch)\n");
    }
}

/* Dynamic shared memory beyond the default 48 KiB needs the kernel to opt
 * in: assume it does, as a kernel that asks for it would. */
static cuabi_status opt_in_shared(session *s, const cuabi_arch_limits *lim,
                                  cuabi_occupancy_options *oo)
{
    if ((size_t)s->o.smem + s->res.shared_static_bytes <= 48 * 1024)
        return CUABI_SUCCESS;
    if (!s->dev) {
        oo->max_dynamic_shared_bytes =
            (int64_t)(lim->shared_bytes_per_block_optin - s->res.shared_static_bytes);
        return CUABI_SUCCESS;
    }
    int optin = 0;
    cuabi_device_attribute(&optin, s->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    return cuabi_kernel_set_attribute(s->k, s->dev, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      optin - (int)s->res.shared_static_bytes);
}

/* The SMs the answers are for: offline --sms or the architecture's example
 * GPU; live, the device's, or with --sms a green context of at least that
 * many SMs of it (what the driver rounds it to). */
static cuabi_status choose_sms(session *s, const cuabi_arch_limits *lim)
{
    if (!s->dev) {
        s->sms = s->o.sms ? (int)s->o.sms : lim->sm_count;
        return CUABI_SUCCESS;
    }
    if (!s->o.sms)
        return cuabi_device_attribute(&s->sms, s->dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    cuabi_sm_resource *all = NULL, *group = NULL;
    cuabi_sm_split_options so = CUABI_SM_SPLIT_OPTIONS_INIT;
    so.min_count = (unsigned)s->o.sms;
    size_t n = 1;
    cuabi_status st = cuabi_device_sm_resource(&all, s->dev);
    if (st == CUABI_SUCCESS)
        st = cuabi_sm_resource_split(&group, &n, NULL, all, &so);
    if (st == CUABI_SUCCESS)
        st = cuabi_green_ctx_create(&s->green, s->dev, &group, 1);
    if (st == CUABI_SUCCESS)
        st = cuabi_green_ctx_sm_count(&s->sms, s->green);
    if (group)
        cuabi_sm_resource_release(group);
    if (all)
        cuabi_sm_resource_release(all);
    return st;
}

/* One block size's row: blocks per SM, and with --grid its waves (none
 * when no block fits: the row says so, it is no error). */
static cuabi_status measure_row(session *s, row *r, cuabi_occupancy_options *oo)
{
    size_t smem = (size_t)s->o.smem;
    int b = r->block;
    uint64_t grid = (uint64_t)s->o.grid;
    r->r = (cuabi_occupancy_result)CUABI_OCCUPANCY_RESULT_INIT;
    r->w = (cuabi_grid_waves)CUABI_GRID_WAVES_INIT;
    cuabi_status st =
        s->green ? cuabi_occupancy_green_max_active_blocks(&r->r, s->k, s->green, b, smem)
        : s->dev ? cuabi_occupancy_max_active_blocks(&r->r, s->k, s->dev, b, smem)
                 : cuabi_occupancy_offline_max_active_blocks(&r->r, s->arch, &s->res, b, smem, oo);
    if (st != CUABI_SUCCESS || !grid)
        return st;
    st = s->green ? cuabi_occupancy_green_waves(&r->w, s->k, s->green, b, smem, grid)
       : s->dev ? cuabi_occupancy_waves(&r->w, s->k, s->dev, b, smem, grid)
                : cuabi_occupancy_offline_waves(&r->w, s->arch, &s->res, s->sms, b, smem, grid, oo);
    if (st == CUABI_ERROR_LAUNCH_CONFIG) {
        cuabi_error_clear();
        st = CUABI_SUCCESS;
    }
    return st;
}

/* The best block size and the grid that fills the SMs with it. */
static cuabi_status measure_best(session *s, cuabi_occupancy_options *oo)
{
    size_t smem = (size_t)s->o.smem;
    oo->sm_count = s->sms;
    cuabi_status st =
        s->green ? cuabi_occupancy_green_max_potential_block_size(&s->best.block, &s->min_grid,
                                                                  s->k, s->green, NULL, NULL, smem, 0)
        : s->dev ? cuabi_occupancy_max_potential_block_size(&s->best.block, &s->min_grid, s->k,
                                                            s->dev, NULL, NULL, smem, 0)
                 : cuabi_occupancy_offline_max_potential_block_size(&s->best.block, &s->min_grid,
                                                                    s->arch, &s->res, NULL, NULL,
                                                                    smem, 0, oo);
    if (st == CUABI_SUCCESS && s->best.block > 0)
        st = measure_row(s, &s->best, oo);
    return st;
}

/* A row per block size: multiples of 32 up to what the kernel allows. */
static cuabi_status measure(session *s)
{
    cuabi_occupancy_options oo = CUABI_OCCUPANCY_OPTIONS_INIT;
    cuabi_arch_limits lim = CUABI_ARCH_LIMITS_INIT;
    cuabi_status st = s->dev ? CUABI_SUCCESS : cuabi_arch_limits_get(&lim, s->arch);
    if (st == CUABI_SUCCESS)
        st = opt_in_shared(s, &lim, &oo);
    if (st == CUABI_SUCCESS)
        st = choose_sms(s, &lim);
    int max_block = s->dev ? 1024 : lim.max_threads_per_block;
    if (s->res.max_threads_per_block > 0 && s->res.max_threads_per_block < max_block)
        max_block = s->res.max_threads_per_block;
    for (int b = 32; st == CUABI_SUCCESS && b <= max_block && s->n < 32; b += 32, s->n++) {
        s->rows[s->n].block = b;
        st = measure_row(s, &s->rows[s->n], &oo);
    }
    if (st == CUABI_SUCCESS)
        st = measure_best(s, &oo);
    return st;
}

static void print_json(session *s)
{
    json_begin_array(&s->j, NULL);
    for (size_t i = 0; i < s->n; i++) {
        const cuabi_occupancy_result *r = &s->rows[i].r;
        json_begin_object(&s->j, NULL);
        json_int(&s->j, "block_size", s->rows[i].block);
        json_int(&s->j, "active_blocks_per_sm", r->active_blocks_per_sm);
        json_int(&s->j, "active_warps_per_sm", r->active_warps_per_sm);
        json_double(&s->j, "occupancy", r->occupancy);
        json_string(&s->j, "limiter", cuabi_occupancy_limiter_name(r->limiter));
        json_string(&s->j, "arch", s->arch);
        json_bool(&s->j, "live", s->dev != NULL);
        json_int(&s->j, "sm_count", s->sms);
        if (s->o.grid) {
            json_int(&s->j, "grid_blocks", s->o.grid);
            json_int(&s->j, "waves", (long long)s->rows[i].w.waves);
            json_int(&s->j, "last_wave_blocks", (long long)s->rows[i].w.last_wave_blocks);
        }
        json_end_object(&s->j);
    }
    json_end_array(&s->j);
}

/* "1,000" */
static const char *grouped(char *buf, size_t len, unsigned long long v)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%llu", v), at = 0;
    for (int i = 0; i < n && (size_t)at + 2 < len; i++) {
        if (i && (n - i) % 3 == 0)
            buf[at++] = ',';
        buf[at++] = digits[i];
    }
    buf[at] = 0;
    return buf;
}

/* After the table: the best block size, its min grid, and the waves. */
static void print_summary(const session *s)
{
    const row *b = &s->best;
    if (b->block <= 0) {
        printf("\nno block size fits on an SM\n");
        return;
    }
    printf("\nbest block size %d: %d blocks per SM; a grid of %d blocks fills %d SMs%s\n",
           b->block, b->r.active_blocks_per_sm, s->min_grid, s->sms,
           s->green ? " (a green context of GPU 0)" : s->o.sms || s->dev ? "" : " (the example GPU)");
    if (!s->o.grid)
        return;
    char g[48];
    if (!b->w.waves) {
        printf("a %s-block grid at %d threads never runs: no block fits\n",
               grouped(g, sizeof g, (unsigned long long)s->o.grid), b->block);
        return;
    }
    printf("a %s-block grid of %s at %d threads takes %llu wave%s on %d SMs "
           "(%llu blocks a wave, %llu in the last; %.0f%% of the slots used)\n",
           grouped(g, sizeof g, (unsigned long long)s->o.grid), s->o.kernel, b->block,
           (unsigned long long)b->w.waves, b->w.waves == 1 ? "" : "s", s->sms,
           (unsigned long long)b->w.blocks_per_wave, (unsigned long long)b->w.last_wave_blocks,
           b->w.efficiency * 100);
}

static void print_table(const session *s, const char *title)
{
    bool waves = s->o.grid > 0;
    printf("%s\n\n", title);
    printf("%6s %7s %6s %9s  %-14s %s%s\n", "block", "blocks", "warps", "occupancy", "limiter",
           waves ? "waves " : "", "");
    for (size_t i = 0; i < s->n; i++) {
        const cuabi_occupancy_result *r = &s->rows[i].r;
        char bar[41], w[24] = "";
        int len = (int)(r->occupancy * 40 + 0.5);
        memset(bar, '#', (size_t)len);
        bar[len] = 0;
        if (waves)
            snprintf(w, sizeof w, "%5llu ", (unsigned long long)s->rows[i].w.waves);
        printf("%6d %7d %6d %8.0f%%  %-14s %s|%-40s|\n", s->rows[i].block,
               r->active_blocks_per_sm, r->active_warps_per_sm, r->occupancy * 100,
               cuabi_occupancy_limiter_name(r->limiter), w, bar);
    }
    print_summary(s);
}

/* The table and the chart, or the JSON (the chart first, so that a chart
 * that cannot be written is the document's error); the exit status. */
static int report(session *s)
{
    char title[256];
    char part[48] = ")";
    if (s->o.sms)
        snprintf(part, sizeof part, ", %d SMs)", s->sms);
    snprintf(title, sizeof title, "%s on %s%s%s: %d registers, %zu B static + %zu B dynamic shared",
             s->o.kernel, s->arch, s->dev ? " (live" : " (offline", part, s->res.registers,
             s->res.shared_static_bytes, (size_t)s->o.smem);
    if (!s->o.json)
        print_table(s, title);
    if (s->o.svg && write_svg(s->o.svg, s->rows, s->n, title) != 0)
        return cli_error(&s->j, "occupancy", CUABI_ERROR_IO, 1, "cannot write %s", s->o.svg);
    if (s->o.json) {
        print_json(s);
        return json_finish(&s->j, 0);
    }
    if (s->o.svg)
        printf("\nchart written to %s\n", s->o.svg);
    return 0;
}

/* Compile, find the kernel and fill the rows; the exit status (0: go on). */
static int run(session *s, const char *src)
{
    char why[2048] = "";
    choose_target(s);
    cuabi_status st = build(s->dev ? &s->k : NULL, &s->res, &s->o, s->arch, src, why, sizeof why);
    if (*why)
        return cli_error(&s->j, "occupancy", st ? st : CUABI_ERROR_INVALID_ARGUMENT, 2, "%s", why);
    if (st == CUABI_SUCCESS)
        st = measure(s);
    return st == CUABI_SUCCESS ? 0 : cli_fail("occupancy", st, &s->j);
}

int cli_occupancy(int argc, char **argv)
{
    session s = { .res = CUABI_KERNEL_RESOURCES_INIT };
    int rc = parse(&s.o, argc, argv);
    if (rc != CLI_GO_ON || (s.o.json && !json_start(&s.j)))
        return rc != CLI_GO_ON ? rc : 1;
    char why[256];
    char *src = cli_read_file(s.o.file, NULL, why, sizeof why);
    if (!src)
        return cli_error(&s.j, "occupancy", CUABI_ERROR_IO, 1, "cannot read %s: %s", s.o.file, why);
    rc = run(&s, src);
    free(src);
    if (rc == 0)
        rc = report(&s);
    if (s.k)
        cuabi_kernel_release(s.k);
    if (s.green)
        cuabi_green_ctx_release(s.green);
    if (s.dev)
        cuabi_device_release(s.dev);
    return rc;
}
