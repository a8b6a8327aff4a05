/* cuabi compile: CUDA C++, PTX or NVVM IR to CUBIN / PTX / LTO-IR through
 * the compile cache, writing the output and printing each kernel's
 * resources. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_compile(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuabi compile FILE [--arch sm_XX]... [-D NAME=V]... [-I DIR]...\n"
            "                     [--name-expr E]... [--ptx | --cubin | --ltoir | --fatbin]\n"
            "                     [--libdevice] [-o OUT] [--json]\n\n"
            "Compile FILE through the compile cache, write the result and print each\n"
            "kernel's registers, shared, local and stack memory, thread limit and\n"
            "barriers, read from the CUBIN without a GPU. FILE is CUDA C++, or by its\n"
            "extension PTX (.ptx) or NVVM IR (.ll text, .bc bitcode; through libNVVM,\n"
            "which makes PTX: --cubin compiles that PTX on, --fatbin is not offered).\n\n"
            "  --arch A        target (sm_90, compute_90, ...); repeat or comma-separate for\n"
            "                  several; default:\n"
            "                  the current GPU's, or sm_90 without one\n"
            "  -D NAME[=V]     define a macro            -I DIR   add an include directory\n"
            "                  (CUDA C++ only)\n"
            "  --name-expr E   instantiate and name a template kernel, e.g. 'segred<float, 256>'\n"
            "                  (NVVM IR: a kernel's name as the IR spells it, without '@')\n"
            "  --ptx --cubin --ltoir   output kind (default --cubin)\n"
            "  --fatbin        one fatbin holding every --arch: sm_XX a CUBIN, compute_XX PTX\n"
            "                  (through nvFatbin, else the fatbinary tool); kernels are\n"
            "                  reported per CUBIN architecture\n"
            "  --libdevice     NVVM IR only: link libdevice (__nv_expf and the other math\n"
            "                  functions)\n"
            "  -o OUT          output file (default FILE's name with .cubin/.ptx/.ltoir/.fatbin);\n"
            "                  with\n"
            "                  several --arch, the arch goes before the extension\n"
            "  --json          machine-readable report on stdout\n");
}

typedef struct list {
    const char **v;
    size_t n;
} list;

static int push(list *l, const char *s)
{
    const char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return -1;
    v[l->n++] = s;
    l->v = v;
    return 0;
}

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
    cuabi_code_type type, kind;
    list archs, defines, incs, names;
    bool json, libdevice;
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

/* Compile for one architecture; returns the exit code. */
static int build_one(const job *jb, const char *arch, bool several, cli_json *j)
{
    cuabi_program *p;
    cuabi_status st = cuabi_program_create(&p, jb->type, jb->source, jb->size, jb->file);
    if (st != CUABI_SUCCESS)
        return cli_fail("compile", st);
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
    cuabi_objcode *obj, *cubin = NULL;
    int hit = 0, again_hit;
    st = compile_to(&obj, &hit, jb, p, &o);
    if (st != CUABI_SUCCESS) {
        /* The message carries the compiler's log already. */
        const char *msg = cuabi_last_error()->message;
        fprintf(stderr, "cuabi compile: %s (%s)\n", msg, cuabi_status_name(st));
        if (jb->type == CUABI_CODE_NVVM && !jb->libdevice && strstr(msg, "'__nv_"))
            fprintf(stderr, "cuabi compile: %s calls libdevice (__nv_*): add --libdevice\n",
                    jb->file);
        cuabi_program_release(p);
        return 1;
    }
    /* Resources live in a CUBIN: for PTX / LTO-IR output of a real
     * architecture, read them from the same program compiled to one. */
    if (jb->kind != CUABI_CODE_CUBIN && jb->kind != CUABI_CODE_FATBIN &&
        (!arch || !strncmp(arch, "sm_", 3))) {
        cuabi_program *again;
        cuabi_program_options oc = o;
        oc.output = CUABI_CODE_CUBIN;
        if (cuabi_program_create(&again, jb->type, jb->source, jb->size, jb->file) ==
            CUABI_SUCCESS) {
            if (compile_to(&cubin, &again_hit, jb, again, &oc) != CUABI_SUCCESS)
                cubin = NULL;
            cuabi_program_release(again);
        }
    }
    const void *data;
    size_t size;
    cuabi_objcode_bytes(&data, &size, obj);
    char shown[160];
    int sm = 0;
    cuabi_objcode_arch(&sm, cubin ? cubin : obj);
    if (arch)
        snprintf(shown, sizeof shown, "%s", arch);
    else if (sm > 0)
        snprintf(shown, sizeof shown, "sm_%d", sm);
    else
        snprintf(shown, sizeof shown, "default");
    char *path = out_path(jb->file, jb->out, shown, several, jb->kind);
    int rc = 0;
    if (!path || write_file(path, data, size) != 0) {
        fprintf(stderr, "cuabi compile: cannot write %s\n", path ? path : "(out of memory)");
        rc = 1;
    } else if (jb->json) {
        json_begin_object(j, NULL);
        json_string(j, "arch", shown);
        json_string(j, "output", ext_of(jb->kind));
        json_string(j, "path", path);
        json_int(j, "bytes", (long long)size);
        json_string(j, "source", hit_name(hit));
        json_begin_array(j, "name_expressions");
        for (size_t i = 0; i < jb->names.n; i++) {
            const char *low = "";
            cuabi_program_lowered_name(&low, p, jb->names.v[i]);
            json_begin_object(j, NULL);
            json_string(j, "expression", jb->names.v[i]);
            json_string(j, "lowered", low);
            json_end_object(j);
        }
        json_end_array(j);
        if (jb->kind == CUABI_CODE_FATBIN)
            report_fatbin(obj, true, j);
        else
            report_kernels(cubin ? cubin : obj, shown, true, j);
        const char *log = "";
        cuabi_program_log(&log, p);
        json_string(j, "log", log);
        json_end_object(j);
    } else {
        printf("%s -> %s (%s, %s, %zu bytes, %s)\n", jb->file, path, shown, ext_of(jb->kind),
               size, hit_name(hit));
        for (size_t i = 0; i < jb->names.n; i++) {
            const char *low = "";
            cuabi_program_lowered_name(&low, p, jb->names.v[i]);
            printf("  %s = %s\n", jb->names.v[i], low);
        }
        if (jb->kind == CUABI_CODE_FATBIN)
            report_fatbin(obj, false, NULL);
        else
            report_kernels(cubin ? cubin : obj, shown, false, NULL);
        const char *log = "";
        cuabi_program_log(&log, p);
        if (*log)
            fprintf(stderr, "%s", log);
    }
    free(path);
    if (cubin)
        cuabi_objcode_release(cubin);
    cuabi_objcode_release(obj);
    cuabi_program_release(p);
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
    if (jb->libdevice && jb->type != CUABI_CODE_NVVM) {
        fprintf(stderr, "cuabi compile: --libdevice applies to NVVM IR (a .ll or .bc FILE) "
                "only\n");
        return 2;
    }
    if (jb->kind == CUABI_CODE_FATBIN && jb->type == CUABI_CODE_NVVM) {
        fprintf(stderr, "cuabi compile: --fatbin takes CUDA C++ or PTX; compile NVVM IR %s "
                "with --ptx (then cuabi compile the .ptx with --fatbin), --cubin or "
                "--ltoir\n", jb->file);
        return 2;
    }
    return 0;
}

static int parse(job *jb, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        list *target = NULL;
        if (!strcmp(a, "--json"))
            jb->json = true;
        else if (!strcmp(a, "--ptx"))
            jb->kind = CUABI_CODE_PTX;
        else if (!strcmp(a, "--cubin"))
            jb->kind = CUABI_CODE_CUBIN;
        else if (!strcmp(a, "--ltoir"))
            jb->kind = CUABI_CODE_LTOIR;
        else if (!strcmp(a, "--fatbin"))
            jb->kind = CUABI_CODE_FATBIN;
        else if (!strcmp(a, "--libdevice"))
            jb->libdevice = true;
        else if (!strcmp(a, "--arch"))
            target = &jb->archs;
        else if (!strcmp(a, "-D"))
            target = &jb->defines;
        else if (!strcmp(a, "-I"))
            target = &jb->incs;
        else if (!strcmp(a, "--name-expr"))
            target = &jb->names;
        else if (!strcmp(a, "-o")) {
            if (!val)
                goto missing;
            jb->out = val;
            i++;
        } else if (!strncmp(a, "-D", 2) && a[2]) {
            if (push(&jb->defines, a + 2)) return 1;
        } else if (!strncmp(a, "-I", 2) && a[2]) {
            if (push(&jb->incs, a + 2)) return 1;
        } else if (!strncmp(a, "--arch=", 7)) {
            if (push(&jb->archs, a + 7)) return 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cuabi compile: unknown option %s (see cuabi compile --help)\n", a);
            return 2;
        } else if (jb->file) {
            fprintf(stderr, "cuabi compile: one FILE only (got %s and %s)\n", jb->file, a);
            return 2;
        } else
            jb->file = a;
        if (target) {
            if (!val)
                goto missing;
            if (push(target, val))
                return 1;
            i++;
        }
        continue;
    missing:
        fprintf(stderr, "cuabi compile: %s needs a value\n", a);
        return 2;
    }
    if (!jb->file) {
        usage(stderr);
        return 2;
    }
    return check_input(jb);
}

int cli_compile(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    job jb = { .kind = CUABI_CODE_CUBIN, .type = CUABI_CODE_CUDA_CXX };
    int rc = parse(&jb, argc, argv);
    char *text = NULL, *joined = NULL, *split = NULL;
    if (rc)
        goto out;
    char why[256];
    if (!(text = cli_read_file(jb.file, &jb.size, why, sizeof why))) {
        fprintf(stderr, "cuabi compile: cannot read %s: %s\n", jb.file, why);
        rc = 1;
        goto out;
    }
    jb.source = text;
    cli_json j = { .out = stdout };
    if (jb.json) {
        json_begin_object(&j, NULL);
        json_string(&j, "file", jb.file);
        json_begin_array(&j, "outputs");
    }
    /* Every --arch, comma lists included: one fatbin of them all, or one
     * output each. */
    size_t total = 1;
    for (size_t i = 0; i < jb.archs.n; i++)
        total += strlen(jb.archs.v[i]) + 1;
    joined = calloc(1, total);
    list each = { 0 };
    for (size_t i = 0; joined && i < jb.archs.n; i++)
        strcat(strcat(joined, i ? "," : ""), jb.archs.v[i]);
    if (!joined || !(split = strdup(joined))) {
        rc = 1;
    } else if (jb.kind == CUABI_CODE_FATBIN) {
        rc = build_one(&jb, jb.archs.n ? joined : NULL, false, &j);
    } else {
        for (char *save = NULL, *t = strtok_r(split, ",", &save); t && !rc;
             t = strtok_r(NULL, ",", &save))
            rc = push(&each, t);
        size_t n = each.n ? each.n : 1;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = build_one(&jb, each.n ? each.v[i] : NULL, each.n > 1, &j);
    }
    free(each.v);
    if (jb.json) {
        json_end_array(&j);
        json_end_object(&j);
        fputc('\n', stdout);
    }
out:
    free(joined);
    free(split);
    free(text);
    free(jb.archs.v);
    free(jb.defines.v);
    free(jb.incs.v);
    free(jb.names.v);
    return rc;
}
