/* cuabi occupancy: compile a kernel and show, per block size, how many
 * blocks and warps fit on one SM, the occupancy and what limits it: live on
 * the local GPU, or offline for a named architecture. */
#include "cli.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

int cli_occupancy(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuabi occupancy FILE.cu [--kernel NAME] [--name-expr E] [--arch sm_XX]\n"
            "                       [--smem BYTES] [--json] [--svg FILE]\n\n"
            "Compile FILE.cu, then for every block size (multiples of 32 up to what the\n"
            "kernel allows) print the active blocks and warps per SM, the occupancy and the\n"
            "limiting resource, as a table and a bar chart.\n\n"
            "  --kernel NAME     the kernel: its name, or a template instance such as\n"
            "                    'segred<float, 256>' (a name with '<' is instantiated as a\n"
            "                    name expression); not needed when FILE has one kernel\n"
            "  --name-expr E     instantiate a template kernel and use it (same as --kernel E)\n"
            "  --arch sm_XX      offline, for that architecture (no GPU needed); default: live\n"
            "                    on GPU 0, or offline sm_90 when there is no GPU\n"
            "  --smem BYTES      dynamic shared memory per block (default 0)\n"
            "  --json            one record per block size: block_size, active_blocks_per_sm,\n"
            "                    active_warps_per_sm, occupancy (0-1), limiter\n"
            "  --svg FILE        write the chart as an SVG picture\n");
}

typedef struct row {
    int block;
    cuabi_occupancy_result r;
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
    size_t smem;
    bool json;
    char kernel_buf[512];   /* the kernel found when none was named */
} opts;

static int parse(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--kernel") && has) o->kernel = argv[++i];
        else if (!strcmp(a, "--name-expr") && has) o->name_expr = argv[++i];
        else if (!strcmp(a, "--arch") && has) o->arch = argv[++i];
        else if (!strcmp(a, "--svg") && has) o->svg = argv[++i];
        else if (!strcmp(a, "--smem") && has) {
            char *end;
            unsigned long long v = strtoull(argv[++i], &end, 0);
            if (*end) {
                fprintf(stderr, "cuabi occupancy: --smem wants a number of bytes, not '%s'\n", argv[i]);
                return 2;
            }
            o->smem = (size_t)v;
        } else if (!strcmp(a, "--json")) o->json = true;
        else if (a[0] == '-' ) {
            fprintf(stderr, "cuabi occupancy: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!o->file) o->file = a;
        else {
            fprintf(stderr, "cuabi occupancy: one FILE only\n");
            return 2;
        }
    }
    if (!o->file) {
        fprintf(stderr, "cuabi occupancy: which file? (cuabi occupancy FILE.cu [--kernel NAME])\n");
        usage(stderr);
        return 2;
    }
    /* A kernel name with template arguments is a name expression, and a
     * name expression alone names the kernel. */
    if (o->kernel && !o->name_expr && strchr(o->kernel, '<'))
        o->name_expr = o->kernel;
    if (o->name_expr && !o->kernel)
        o->kernel = o->name_expr;
    return 0;
}

/* No --kernel: the file's only kernel, or a usage error listing them. */
static cuabi_status pick_kernel(opts *o, cuabi_objcode *code, int *usage_error)
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
    *usage_error = 1;
    if (n == 0) {
        fprintf(stderr, "cuabi occupancy: %s defines no kernel (a template kernel needs "
                        "--kernel 'name<args>' to be instantiated)\n", o->file);
        return st;
    }
    fprintf(stderr, "cuabi occupancy: %s has %zu kernels; name one with --kernel:", o->file, n);
    for (size_t i = 0; i < n && st == CUABI_SUCCESS; i++)
        if ((st = cuabi_objcode_kernel_name(&name, code, i)) == CUABI_SUCCESS)
            fprintf(stderr, "%s %s", i ? "," : "", name);
    fprintf(stderr, "\n(a template kernel: --kernel 'name<args>', e.g. 'segred<float, 256>')\n");
    return st;
}

/* Compile for `arch`.  Live (k != NULL), the kernel is loaded
 * (cuLibraryGetKernel) for the driver's queries, so the code must be for the
 * local device.  Offline (k == NULL) only the resources are read from the
 * CUBIN: the code is never loaded, so any architecture works with or without
 * a GPU. */
static cuabi_status build(cuabi_kernel **k, cuabi_kernel_resources *res, opts *o,
                          const char *arch, const char *src, int *usage_error)
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
        st = pick_kernel(o, code, usage_error);
    if (*usage_error) {
        /* told on stderr already */
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

int cli_occupancy(int argc, char **argv)
{
    opts o;
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    int rc = parse(&o, argc, argv);
    if (rc)
        return rc;
    char why[256];
    char *src = cli_read_file(o.file, NULL, why, sizeof why);
    if (!src) {
        fprintf(stderr, "cuabi occupancy: cannot read %s: %s\n", o.file, why);
        return 1;
    }
    /* Live on GPU 0 unless an architecture is named or there is no GPU. */
    int ndev = 0;
    cuabi_device *dev = NULL;
    bool live = !o.arch && cuabi_device_count(&ndev) == CUABI_SUCCESS && ndev > 0 &&
                cuabi_device_get(&dev, 0) == CUABI_SUCCESS;
    cuabi_error_clear();
    const char *arch = o.arch;
    char live_arch[16] = "sm_90";
    if (live) {
        int major = 0, minor = 0;
        cuabi_device_attribute(&major, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        cuabi_device_attribute(&minor, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        snprintf(live_arch, sizeof live_arch, "sm_%d%d", major, minor);
    } else if (!arch) {
        arch = "sm_90";
        if (!o.json)
            printf("No GPU available: offline answers for sm_90 (name another with --arch)\n");
    }
    cuabi_kernel *k = NULL;
    cuabi_kernel_resources res = CUABI_KERNEL_RESOURCES_INIT;
    int usage_error = 0;
    cuabi_status st = build(live ? &k : NULL, &res, &o, live ? live_arch : arch, src, &usage_error);
    free(src);
    if (usage_error) {
        if (dev)
            cuabi_device_release(dev);
        return 2;
    }
    if (st != CUABI_SUCCESS) {
        if (k)
            cuabi_kernel_release(k);
        if (dev)
            cuabi_device_release(dev);
        return cli_fail("occupancy", st);
    }
    cuabi_occupancy_options oo = CUABI_OCCUPANCY_OPTIONS_INIT;
    cuabi_arch_limits lim = CUABI_ARCH_LIMITS_INIT;
    if (st == CUABI_SUCCESS && !live)
        st = cuabi_arch_limits_get(&lim, arch);
    /* Dynamic shared memory beyond the default 48 KiB needs the kernel to
     * opt in: assume it does, as a kernel that asks for it would. */
    if (st == CUABI_SUCCESS && o.smem + res.shared_static_bytes > 48 * 1024) {
        if (live) {
            int optin = 0;
            cuabi_device_attribute(&optin, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
            st = cuabi_kernel_set_attribute(k, dev, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            optin - (int)res.shared_static_bytes);
        } else {
            oo.max_dynamic_shared_bytes =
                (int64_t)(lim.shared_bytes_per_block_optin - res.shared_static_bytes);
        }
    }
    int max_block = live ? 1024 : lim.max_threads_per_block;
    if (res.max_threads_per_block > 0 && res.max_threads_per_block < max_block)
        max_block = res.max_threads_per_block;
    row rows[32];
    size_t n = 0;
    for (int b = 32; st == CUABI_SUCCESS && b <= max_block && n < 32; b += 32, n++) {
        rows[n].block = b;
        rows[n].r = (cuabi_occupancy_result)CUABI_OCCUPANCY_RESULT_INIT;
        st = live ? cuabi_occupancy_max_active_blocks(&rows[n].r, k, dev, b, o.smem)
                  : cuabi_occupancy_offline_max_active_blocks(&rows[n].r, arch, &res, b, o.smem, &oo);
    }
    if (k)
        cuabi_kernel_release(k);
    if (dev)
        cuabi_device_release(dev);
    if (st != CUABI_SUCCESS)
        return cli_fail("occupancy", st);
    const char *shown = live ? live_arch : arch;
    char title[256];
    snprintf(title, sizeof title, "%s on %s%s: %d registers, %zu B static + %zu B dynamic shared",
             o.kernel, shown, live ? " (live)" : " (offline)", res.registers,
             res.shared_static_bytes, o.smem);
    if (o.json) {
        cli_json j = { stdout, 0, { false } };
        json_begin_array(&j, NULL);
        for (size_t i = 0; i < n; i++) {
            json_begin_object(&j, NULL);
            json_int(&j, "block_size", rows[i].block);
            json_int(&j, "active_blocks_per_sm", rows[i].r.active_blocks_per_sm);
            json_int(&j, "active_warps_per_sm", rows[i].r.active_warps_per_sm);
            json_double(&j, "occupancy", rows[i].r.occupancy);
            json_string(&j, "limiter", cuabi_occupancy_limiter_name(rows[i].r.limiter));
            json_string(&j, "arch", shown);
            json_bool(&j, "live", live);
            json_end_object(&j);
        }
        json_end_array(&j);
        printf("\n");
    } else {
        printf("%s\n\n", title);
        printf("%6s %7s %6s %9s  %-14s %s\n", "block", "blocks", "warps", "occupancy", "limiter", "");
        for (size_t i = 0; i < n; i++) {
            const cuabi_occupancy_result *r = &rows[i].r;
            char bar[41];
            int len = (int)(r->occupancy * 40 + 0.5);
            memset(bar, '#', (size_t)len);
            bar[len] = 0;
            printf("%6d %7d %6d %8.0f%%  %-14s |%-40s|\n", rows[i].block, r->active_blocks_per_sm,
                   r->active_warps_per_sm, r->occupancy * 100,
                   cuabi_occupancy_limiter_name(r->limiter), bar);
        }
    }
    if (o.svg) {
        if (write_svg(o.svg, rows, n, title) != 0) {
            fprintf(stderr, "cuabi occupancy: cannot write %s\n", o.svg);
            return 1;
        }
        if (!o.json)
            printf("\nchart written to %s\n", o.svg);
    }
    return 0;
}
