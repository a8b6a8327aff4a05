/* cuabi compile: CUDA C++, PTX or NVVM IR to CUBIN / PTX / LTO-IR through
 * the compile cache, writing the output and printing each kernel's
 * resources. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_compile(int argc, char **argv);

static const char *ext_of(cuabi_code_type t)
{
    return t == CUABI_CODE_PTX ? "ptx" : t == CUABI_CODE_LTOIR ? "ltoir"
         : t == CUABI_CODE_FATBIN ? "fatbin" : "cubin";
}

/* The output path: OUT or FILE's stem, with ".ARCH" before the extension
 * when several architectures are built. */
static char *out_path(const char *file, const char *out, const char *arch, bool several,
                      cuabi_code_type kind)
{
    char *res;
    if (out) {
        if (!several)
            return strdup(out);
        const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
        if (dot && (!slash || dot > slash)) {
            if (asprintf(&res, "%.*s.%s%s", (int)(dot - out), out, arch, dot) < 0)
                return NULL;
        } else if (asprintf(&res, "%s.%s", out, arch) < 0)
            return NULL;
        return res;
    }
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    const char *dot = strrchr(base, '.');
    int stem = dot ? (int)(dot - base) : (int)strlen(base);
    if (asprintf(&res, several ? "%.*s.%s.%s" : "%.*s.%s%.0s", stem, base,
                 several ? arch : ext_of(kind), ext_of(kind)) < 0)
        return NULL;
    return res;
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, size, f);
    return fclose(f) == 0 && w == size ? 0 : -1;
}

static const char *hit_name(int hit)
{
    return hit == 1 ? "memory cache" : hit == 2 ? "disk cache" : "compiled";
}

/* Kernels and their resources, as text or JSON. */
static void report_kernels(cuabi_objcode *o, const char *arch, bool json, cli_json *j)
{
    size_t count = 0;
    const char *res_arch = !strncmp(arch, "sm_", 3) ? arch : NULL;
    if (cuabi_objcode_kernel_count(&count, o) != CUABI_SUCCESS) {
        if (!json)
            printf("  (kernels unavailable: %s)\n", cuabi_last_error()->message);
        count = 0;
    }
    if (json)
        json_begin_array(j, "kernels");
    else if (count)
        printf("  %-40s %5s %8s %7s %7s %7s %8s\n", "kernel", "regs", "smem", "local", "stack",
               "maxthr", "barriers");
    for (size_t i = 0; i < count; i++) {
        const char *name;
        if (cuabi_objcode_kernel_name(&name, o, i) != CUABI_SUCCESS)
            continue;
        cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
        cuabi_status st = cuabi_objcode_kernel_resources(&r, o, name, res_arch);
        if (json) {
            json_begin_object(j, NULL);
            json_string(j, "name", name);
            if (st == CUABI_SUCCESS) {
                json_int(j, "registers", r.registers);
                json_int(j, "shared_static_bytes", (long long)r.shared_static_bytes);
                json_int(j, "local_bytes", (long long)r.local_bytes);
                json_int(j, "stack_bytes", (long long)r.stack_bytes);
                json_int(j, "max_threads_per_block", r.max_threads_per_block);
                json_int(j, "barriers", r.barriers);
                json_int(j, "param_bytes", (long long)r.param_bytes);
            } else {
                json_string(j, "error", cuabi_last_error()->message);
            }
            json_end_object(j);
        } else if (st == CUABI_SUCCESS) {
            printf("  %-40s %5d %8zu %7zu %7zu %7d %8d\n", name, r.registers,
                   r.shared_static_bytes, r.local_bytes, r.stack_bytes,
                   r.max_threads_per_block, r.barriers);
        } else {
            printf("  %-40s (%s)\n", name, cuabi_last_error()->message);
        }
    }
    if (json)
        json_end_array(j);
}

/* A fatbin: how it was packed, then the kernels of each CUBIN architecture. */
static void report_fatbin(cuabi_objcode *o, bool json, cli_json *j)
{
    const char *packer = "";
    int archs[64];
    size_t n = 0;
    cuabi_fatbin_packer(&packer, o);
    if (cuabi_fatbin_archs(archs, 64, &n, o) != CUABI_SUCCESS)
        n = 0;
    if (json) {
        json_string(j, "packer", packer);
        json_begin_array(j, "images");
    } else {
        printf("  packed by %s\n", packer);
    }
    for (size_t i = 0; i < n && i < 64; i++) {
        char arch[16];
        snprintf(arch, sizeof arch, "sm_%d", archs[i]);
        if (json) {
            json_begin_object(j, NULL);
            json_string(j, "arch", arch);
        } else {
            printf("  %s:\n", arch);
        }
        report_kernels(o, arch, json, j);
        if (json)
            json_end_object(j);
    }
    if (json)
        json_end_array(j);
}


typedef struct job {
    const char *file, *out;
    const char *source;
    size_t size;                   /* of source: bitcode holds NUL bytes */
    cuabi_code_type type;
    int kind;                      /* the output: a cuabi_code_type */
    cli_list archs;                /* one architecture each: copies, --arch a,b is split */
    cli_list defines, incs, names;
    bool json, libdevice;
    cli_json j;
} job;

/* NVVM IR to a CUBIN takes two programs: libNVVM makes PTX only, so its
 * PTX is then compiled as a PTX program (nvJitLink), each step through the
 * cache; *hit is the second step's. */
static cuabi_status nvvm_to_cubin(cuabi_objcode **out, int *hit, const char *file,
                                  cuabi_program *p, const cuabi_program_options *o)
{
    cuabi_program_options po = *o;
    po.output = CUABI_CODE_PTX;
    cuabi_objcode *ptx;
    cuabi_status st = cuabi_program_compile(&ptx, p, &po);
    if (st != CUABI_SUCCESS)
        return st;
    const void *text;
    size_t size;
    char name[1024];
    cuabi_program *pp = NULL;
    snprintf(name, sizeof name, "%s.ptx", file);
    cuabi_objcode_bytes(&text, &size, ptx);
    st = cuabi_program_create(&pp, CUABI_CODE_PTX, text, size, name);
    cuabi_program_options co = *o;
    co.libdevice = 0;              /* linked already, into the PTX */
    co.num_name_expressions = 0;   /* looked up in the IR, as it spells them */
    if (st == CUABI_SUCCESS)
        st = cuabi_program_compile(out, pp, &co);
    if (st == CUABI_SUCCESS)
        cuabi_program_cache_hit(hit, pp);
    if (pp)
        cuabi_program_release(pp);
    cuabi_objcode_release(ptx);
    return st;
}

/* Compile `p` with `o`; *hit says where the result came from. */
static cuabi_status compile_to(cuabi_objcode **out, int *hit, const job *jb, cuabi_program *p,
                               const cuabi_program_options *o)
{
    *hit = 0;
    if (jb->type == CUABI_CODE_NVVM && o->output == CUABI_CODE_CUBIN)
        return nvvm_to_cubin(out, hit, jb->file, p, o);
    cuabi_status st = cuabi_program_compile(out, p, o);
    if (st == CUABI_SUCCESS)
        cuabi_program_cache_hit(hit, p);
    return st;
}


static cuabi_program_options options_for(const job *jb, const char *arch)
{
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = arch;
    o.output = jb->kind;
    o.libdevice = jb->libdevice;
    o.defines = jb->defines.v;
    o.num_defines = jb->defines.n;
    o.include_paths = jb->incs.v;
    o.num_include_paths = jb->incs.n;
    o.name_expressions = jb->names.v;
    o.num_name_expressions = jb->names.n;
    return o;
}

/* A failed compile: the message carries the compiler's log already. */
static int compile_failed(job *jb, cuabi_status st)
{
    char message[8192];
    const char *msg = cuabi_last_error()->message;
    int n = snprintf(message, sizeof message, "%s", msg);
    fprintf(stderr, "cuabi compile: %s (%s)\n", msg, cuabi_status_name(st));
    if (jb->type == CUABI_CODE_NVVM && !jb->libdevice && strstr(msg, "'__nv_")) {
        fprintf(stderr, "cuabi compile: %s calls libdevice (__nv_*): add --libdevice\n", jb->file);
        if (n > 0 && (size_t)n < sizeof message)
            snprintf(message + n, sizeof message - (size_t)n,
                     "\n%s calls libdevice (__nv_*): add --libdevice", jb->file);
    }
    return json_fail(&jb->j, st, message, 1);
}

/* Resources live in a CUBIN: for PTX / LTO-IR output of a real
 * architecture, read them from the same program compiled to one. NULL when
 * there is none. */
static cuabi_objcode *resources_cubin(const job *jb, const cuabi_program_options *o,
                                      const char *arch)
{
    if (jb->kind == CUABI_CODE_CUBIN || jb->kind == CUABI_CODE_FATBIN ||
        (arch && strncmp(arch, "sm_", 3)))
        return NULL;
    cuabi_program *again;
    cuabi_objcode *cubin = NULL;
    cuabi_program_options oc = *o;
    int hit;
    oc.output = CUABI_CODE_CUBIN;
    if (cuabi_program_create(&again, jb->type, jb->source, jb->size, jb->file) != CUABI_SUCCESS)
        return NULL;
    if (compile_to(&cubin, &hit, jb, again, &oc) != CUABI_SUCCESS)
        cubin = NULL;
    cuabi_program_release(again);
    return cubin;
}

/* What one compile made, for the report. */
typedef struct output {
    cuabi_program *p;
    cuabi_objcode *obj, *cubin;    /* cubin: for the resources, or NULL */
    int hit;
    const char *path;
    char arch[160];                /* as asked, else the code's, else "default" */
    size_t size;
} output;

static void shown_arch(output *out, const char *arch)
{
    int sm = 0;
    cuabi_objcode_arch(&sm, out->cubin ? out->cubin : out->obj);
    if (arch)
        snprintf(out->arch, sizeof out->arch, "%s", arch);
    else if (sm > 0)
        snprintf(out->arch, sizeof out->arch, "sm_%d", sm);
    else
        snprintf(out->arch, sizeof out->arch, "default");
}

static void report_json(job *jb, const output *out)
{
    cli_json *j = &jb->j;
    json_begin_object(j, NULL);
    json_string(j, "arch", out->arch);
    json_string(j, "output", ext_of(jb->kind));
    json_string(j, "path", out->path);
    json_int(j, "bytes", (long long)out->size);
    json_string(j, "source", hit_name(out->hit));
    json_begin_array(j, "name_expressions");
    for (size_t i = 0; i < jb->names.n; i++) {
        const char *low = "";
        cuabi_program_lowered_name(&low, out->p, jb->names.v[i]);
        json_begin_object(j, NULL);
        json_string(j, "expression", jb->names.v[i]);
        json_string(j, "lowered", low);
        json_end_object(j);
    }
    json_end_array(j);
    if (jb->kind == CUABI_CODE_FATBIN)
        report_fatbin(out->obj, true, j);
    else
        report_kernels(out->cubin ? out->cubin : out->obj, out->arch, true, j);
    const char *log = "";
    cuabi_program_log(&log, out->p);
    json_string(j, "log", log);
    json_end_object(j);
}

static void report_text(const job *jb, const output *out)
{
    printf("%s -> %s (%s, %s, %zu bytes, %s)\n", jb->file, out->path, out->arch,
           ext_of(jb->kind), out->size, hit_name(out->hit));
    for (size_t i = 0; i < jb->names.n; i++) {
        const char *low = "";
        cuabi_program_lowered_name(&low, out->p, jb->names.v[i]);
        printf("  %s = %s\n", jb->names.v[i], low);
    }
    if (jb->kind == CUABI_CODE_FATBIN)
        report_fatbin(out->obj, false, NULL);
    else
        report_kernels(out->cubin ? out->cubin : out->obj, out->arch, false, NULL);
    const char *log = "";
    cuabi_program_log(&log, out->p);
    if (*log)
        fprintf(stderr, "%s", log);
}

/* Write the output and report it; the exit status. */
static int write_and_report(job *jb, output *out, bool several)
{
    const void *data;
    cuabi_objcode_bytes(&data, &out->size, out->obj);
    char *path = out_path(jb->file, jb->out, out->arch, several, jb->kind);
    int rc = 0;
    if (!path)
        rc = cli_error(&jb->j, "compile", CUABI_ERROR_OUT_OF_MEMORY, 1, "out of memory");
    else if (write_file(path, data, out->size) != 0)
        rc = cli_error(&jb->j, "compile", CUABI_ERROR_IO, 1, "cannot write %s", path);
    out->path = path;
    if (rc == 0 && jb->json)
        report_json(jb, out);
    else if (rc == 0)
        report_text(jb, out);
    free(path);
    return rc;
}

/* Compile for one architecture; returns the exit status. */
static int build_one(job *jb, const char *arch, bool several)
{
    output out = { .p = NULL };
    cuabi_status st = cuabi_program_create(&out.p, jb->type, jb->source, jb->size, jb->file);
    if (st != CUABI_SUCCESS)
        return cli_fail("compile", st, &jb->j);
    cuabi_program_options o = options_for(jb, arch);
    st = compile_to(&out.obj, &out.hit, jb, out.p, &o);
    int rc = 0;
    if (st != CUABI_SUCCESS) {
        rc = compile_failed(jb, st);
    } else {
        out.cubin = resources_cubin(jb, &o, arch);
        shown_arch(&out, arch);
        rc = write_and_report(jb, &out, several);
    }
    if (out.cubin)
        cuabi_objcode_release(out.cubin);
    if (out.obj)
        cuabi_objcode_release(out.obj);
    cuabi_program_release(out.p);
    return rc;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n > t && !strcmp(s + n - t, tail);
}


/* The input's kind by FILE's extension, and the options that need one. */
static int check_input(job *jb)
{
    if (ends_with(jb->file, ".ptx"))
        jb->type = CUABI_CODE_PTX;
    else if (ends_with(jb->file, ".ll") || ends_with(jb->file, ".bc"))
        jb->type = CUABI_CODE_NVVM;
    if (jb->libdevice && jb->type != CUABI_CODE_NVVM)
        return cli_error(&jb->j, "compile", CUABI_ERROR_INVALID_ARGUMENT, 2,
                         "--libdevice applies to NVVM IR (a .ll or .bc FILE) only");
    if (jb->kind == CUABI_CODE_FATBIN && jb->type == CUABI_CODE_NVVM)
        return cli_error(&jb->j, "compile", CUABI_ERROR_INVALID_ARGUMENT, 2,
                         "--fatbin takes CUDA C++ or PTX; compile NVVM IR %s with --ptx (then "
                         "cuabi compile the .ptx with --fatbin), --cubin or --ltoir", jb->file);
    return 0;
}

/* --arch a,b,c: each architecture a copy of its own in the list. */
static int add_archs(const char *value, void *target, char *why, size_t len)
{
    const char *p = value;
    do {
        size_t n = strcspn(p, ",");
        char *arch = n ? strndup(p, n) : NULL;
        if (!arch || cli_list_push(target, arch) != 0) {
            snprintf(why, len, n ? "needs more memory than there is"
                                 : "wants architectures such as sm_90 or sm_80,compute_90, got '%s'",
                     value);
            free(arch);
            return -1;
        }
        p += n;
    } while (*p++ == ',');
    return 0;
}

static const char compile_about[] =
    "Compile FILE through the compile cache, write the result and print each\n"
    "kernel's registers, shared, local and stack memory, thread limit and\n"
    "barriers, read from the CUBIN without a GPU. FILE is CUDA C++, or by its\n"
    "extension PTX (.ptx) or NVVM IR (.ll text, .bc bitcode; through libNVVM,\n"
    "which makes PTX: --cubin compiles that PTX on, --fatbin is not offered).\n";

static int parse(job *jb, int argc, char **argv)
{
    const cli_option table[] = {
        CLI_ARG("FILE", &jb->file, 1, "CUDA C++, PTX (.ptx) or NVVM IR (.ll, .bc)"),
        CLI_OPT_CALL("arch", 0, "A", add_archs, &jb->archs,
                     "target (sm_90, compute_90, ...); repeat or comma-separate for several; "
                     "default: the current GPU's, or sm_90 without one"),
        CLI_OPT_LIST(NULL, 'D', "NAME[=V]", &jb->defines, "define a macro (CUDA C++ only)"),
        CLI_OPT_LIST(NULL, 'I', "DIR", &jb->incs, "add an include directory (CUDA C++ only)"),
        CLI_OPT_LIST("name-expr", 0, "E", &jb->names,
                     "instantiate and name a template kernel, e.g. 'segred<float, 256>' (NVVM "
                     "IR: a kernel's name as the IR spells it, without '@')"),
        CLI_OPT_CHOICE("ptx", &jb->kind, CUABI_CODE_PTX, "output PTX"),
        CLI_OPT_CHOICE("cubin", &jb->kind, CUABI_CODE_CUBIN, "output a CUBIN (the default)"),
        CLI_OPT_CHOICE("ltoir", &jb->kind, CUABI_CODE_LTOIR, "output LTO-IR"),
        CLI_OPT_CHOICE("fatbin", &jb->kind, CUABI_CODE_FATBIN,
                       "one fatbin holding every --arch: sm_XX a CUBIN, compute_XX PTX (through "
                       "nvFatbin, else the fatbinary tool); kernels are reported per CUBIN "
                       "architecture"),
        CLI_OPT_FLAG("libdevice", 0, &jb->libdevice,
                     "NVVM IR only: link libdevice (__nv_expf and the other math functions)"),
        CLI_OPT_STRING(NULL, 'o', "OUT", &jb->out,
                       "output file (default FILE's name with .cubin/.ptx/.ltoir/.fatbin); with "
                       "several --arch, the arch goes before the extension"),
        CLI_OPT_FLAG("json", 0, &jb->json,
                     "one JSON object on stdout: {\"file\", \"outputs\": [{\"arch\", \"output\", "
                     "\"path\", \"bytes\", \"source\", \"name_expressions\", \"kernels\", "
                     "\"log\"}]}"),
    };
    const cli_spec spec = { "compile", compile_about, table, sizeof table / sizeof table[0] };
    return cli_parse(&spec, argc, argv);
}

/* Every --arch at once into one fatbin, or one output each. */
static int build_all(job *jb)
{
    if (jb->kind != CUABI_CODE_FATBIN) {
        int rc = 0;
        size_t n = jb->archs.n ? jb->archs.n : 1;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = build_one(jb, jb->archs.n ? jb->archs.v[i] : NULL, jb->archs.n > 1);
        return rc;
    }
    size_t total = 1;
    for (size_t i = 0; i < jb->archs.n; i++)
        total += strlen(jb->archs.v[i]) + 1;
    char *joined = calloc(1, total);
    if (!joined)
        return cli_error(&jb->j, "compile", CUABI_ERROR_OUT_OF_MEMORY, 1, "out of memory");
    for (size_t i = 0; i < jb->archs.n; i++)
        strcat(strcat(joined, i ? "," : ""), jb->archs.v[i]);
    int rc = build_one(jb, jb->archs.n ? joined : NULL, false);
    free(joined);
    return rc;
}

/* Read FILE and build it; with --json the document is begun first, so that
 * every failure lands in it. */
static int compile_file(job *jb)
{
    if (jb->json && !json_start(&jb->j))
        return 1;
    json_begin_object(&jb->j, NULL);
    json_string(&jb->j, "file", jb->file);
    json_begin_array(&jb->j, "outputs");
    int rc = check_input(jb);
    if (rc)
        return rc;
    char why[256];
    char *text = cli_read_file(jb->file, &jb->size, why, sizeof why);
    if (!text)
        return cli_error(&jb->j, "compile", CUABI_ERROR_IO, 1, "cannot read %s: %s", jb->file,
                         why);
    jb->source = text;
    rc = build_all(jb);
    free(text);
    return json_finish(&jb->j, rc);
}

int cli_compile(int argc, char **argv)
{
    job jb = { .kind = CUABI_CODE_CUBIN, .type = CUABI_CODE_CUDA_CXX };
    int rc = parse(&jb, argc, argv);
    if (rc == CLI_GO_ON)
        rc = compile_file(&jb);
    for (size_t i = 0; i < jb.archs.n; i++)
        free((char *)jb.archs.v[i]);
    cli_list_free(&jb.archs);
    cli_list_free(&jb.defines);
    cli_list_free(&jb.incs);
    cli_list_free(&jb.names);
    return rc;
}
