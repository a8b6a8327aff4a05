/* NVVM IR programs through libNVVM: see nvvm.h (loading it: src/platform/nvvm_lib.c). */
#include "compile/nvvm.h"
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- libdevice */

/* Read as every file is (util/file.h): a FIFO or a device at the path is
 * refused, never waited on, and a file over CUABI__FILE_MAX is not read. */
static cuabi_status read_libdevice(char **data, size_t *size, const char *caller)
{
    char path[4096], why[1024], who[128];
    if (cuabi__libdevice_locate(path, sizeof path, why, sizeof why) != 0)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: options.libdevice = 1: %s", caller, why);
    snprintf(who, sizeof who, "%s: libdevice", caller);
    void *bytes;
    CUABI__TRY(cuabi__read_file(path, &bytes, size, who));
    if (*size == 0) {
        cuabi__free(bytes);
        return cuabi__error(CUABI_ERROR_IO, "%s: cannot read libdevice %s: empty file", caller,
                            path);
    }
    *data = bytes;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ options */

cuabi_status cuabi__nvvm_check_options(const cuabi_program_options *o, const char *caller)
{
    if (o->output != CUABI_CODE_PTX && o->output != CUABI_CODE_LTOIR)
        return cuabi__error(o->output == CUABI_CODE_CUBIN || o->output == CUABI_CODE_FATBIN
                                ? CUABI_ERROR_NOT_SUPPORTED : CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: libNVVM produces PTX or LTO-IR, not code type %d: set "
                            "options.output to CUABI_CODE_PTX (cuabi_library loads it) or "
                            "CUABI_CODE_LTOIR (for cuabi_linker)", caller, (int)o->output);
    const char *cxx_only = o->std ? "std" : o->relocatable ? "relocatable"
        : o->num_defines ? "defines" : o->num_include_paths ? "include_paths"
        : o->num_headers ? "headers" : NULL;
    if (cxx_only)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s applies to CUDA C++ "
                            "only, and this program is NVVM IR", caller, cxx_only);
    return CUABI_SUCCESS;
}

/* libNVVM targets virtual architectures only: sm_90a compiles as compute_90a. */
void cuabi__nvvm_each_arg(const cuabi__compile_args *a, cuabi__arg_fn fn, void *ctx)
{
    const cuabi_program_options *o = a->opts;
    char level[16];
    fn("-arch=compute_", a->arch + (a->arch[0] == 's' ? 3 : 8), ctx);
    if (o->opt_level >= 0) {
        snprintf(level, sizeof level, "%d", o->opt_level);
        fn("-opt=", level, ctx);
    }
    if (o->debug)
        fn("-g", "", ctx);
    if (o->line_info)
        fn("-generate-line-info", "", ctx);
    if (o->fast_math) { /* what nvcc's --use_fast_math means for device code */
        static const char *const fast[] = { "-ftz=1", "-prec-div=0", "-prec-sqrt=0", "-fma=1" };
        for (size_t i = 0; i < 4; i++)
            fn(fast[i], "", ctx);
    }
    if (a->output == CUABI_CODE_LTOIR)
        fn("-gen-lto", "", ctx);
    if (a->v3.numba_debug)
        fn("--numba-debug", "", ctx);
    for (size_t i = 0; i < o->num_extra_options; i++)
        fn(o->extra_options[i], "", ctx);
}

/* ------------------------------------------------------------ compiling */

bool cuabi__nvvm_is_bitcode(const void *data, size_t size)
{
    static const unsigned char raw[4] = { 'B', 'C', 0xC0, 0xDE };
    static const unsigned char wrapped[4] = { 0xDE, 0xC0, 0x17, 0x0B };
    return size >= 4 && (!memcmp(data, raw, 4) || !memcmp(data, wrapped, 4));
}

static char *nvvm_log(const cuabi__nvvm *nv, cuabi__nvvm_program prog)
{
    size_t n = 0;
    if (nv->nvvmGetProgramLogSize(prog, &n) != CUABI__NVVM_SUCCESS || n <= 1)
        return cuabi__strdup("");
    char *log = cuabi__malloc(n);
    if (log && nv->nvvmGetProgramLog(prog, log) != CUABI__NVVM_SUCCESS)
        log[0] = '\0';
    if (log)
        log[n - 1] = '\0';
    return log;
}

static cuabi_status nvvm_failed(cuabi__nvvm_result r, const char *entry, const char *log,
                                const cuabi__program *p, const char *caller)
{
    cuabi_status st;
    if (r == CUABI__NVVM_ERROR_OUT_OF_MEMORY)
        st = cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: %s ran out of memory", caller, entry);
    else if (r == CUABI__NVVM_ERROR_INVALID_OPTION)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: libNVVM rejected an option "
                          "(%s: error %d): %s", caller, entry, (int)r, log);
    else
        st = cuabi__error(CUABI_ERROR_COMPILE, "%s: NVVM IR %s failed to compile (%s: error "
                          "%d%s):\n%s", caller, p->name, entry, (int)r,
                          r == CUABI__NVVM_ERROR_INVALID_INPUT ? ", not NVVM IR text or bitcode"
                                                               : "", log);
    cuabi__error_set_log(log, strlen(log));
    return st;
}

static cuabi_status nvvm_output(const cuabi__nvvm *nv, cuabi__nvvm_program prog,
                                cuabi_code_type kind, cuabi__cache_entry *e, const char *caller)
{
    size_t n = 0;
    cuabi__nvvm_result r = nv->nvvmGetCompiledResultSize(prog, &n);
    if (r != CUABI__NVVM_SUCCESS || n == 0)
        return cuabi__error(CUABI_ERROR_COMPILE, "%s: libNVVM returned no output "
                            "(nvvmGetCompiledResultSize: error %d)", caller, (int)r);
    if (!(e->data = cuabi__malloc(n + 1)))
        return CUABI_ERROR_OUT_OF_MEMORY;
    if ((r = nv->nvvmGetCompiledResult(prog, e->data)) != CUABI__NVVM_SUCCESS)
        return cuabi__error(CUABI_ERROR_COMPILE, "%s: libNVVM failed to return its output "
                            "(nvvmGetCompiledResult: error %d)", caller, (int)r);
    ((char *)e->data)[n] = '\0';
    /* PTX comes NUL-terminated; keep the NUL out of the size. */
    e->size = kind == CUABI_CODE_PTX && ((char *)e->data)[n - 1] == '\0' ? n - 1 : n;
    e->type = kind;
    return CUABI_SUCCESS;
}

/* Whether the module defines `name`: in text IR a "define ... @name(", in
 * PTX output an ".entry name(" or ".func ... name(" (bitcode with LTO-IR
 * output: its string table holds the name). */
static bool defines_name(const char *text, size_t size, const char *name, bool ptx)
{
    size_t len = strlen(name);
    for (const char *s = text; (s = memmem(s, size - (size_t)(s - text), name, len));
         s += len) {
        char before = s > text ? s[-1] : ' ', after = s + len < text + size ? s[len] : ' ';
        if ((ptx ? before == ' ' || before == '\t' : before == '@') &&
            (after == '(' || after == ' ' || after == '\n'))
            return true;
    }
    return false;
}

/* Name lookups: NVVM IR does not mangle, so a kernel's name is the name as
 * written in the IR; each requested one must be defined. */
static cuabi_status nvvm_names_map(const cuabi__program *p, const cuabi_program_options *o,
                                   cuabi__cache_entry *e, const char *caller)
{
    size_t n = o->num_name_expressions;
    if (!n)
        return CUABI_SUCCESS;
    if (!(e->exprs = cuabi__calloc(n, sizeof(char *))) ||
        !(e->lowered = cuabi__calloc(n, sizeof(char *))))
        return CUABI_ERROR_OUT_OF_MEMORY;
    e->num_names = n;
    bool ptx = e->type == CUABI_CODE_PTX, bitcode = cuabi__nvvm_is_bitcode(p->source, p->size);
    for (size_t i = 0; i < n; i++) {
        const char *name = o->name_expressions[i];
        bool found = ptx ? defines_name(e->data, e->size, name, true)
                   : bitcode ? memmem(p->source, p->size, name, strlen(name)) != NULL
                             : defines_name(p->source, p->size, name, false);
        if (!found)
            return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: name expression \"%s\" is not "
                                "defined by NVVM IR %s (NVVM names are not mangled: give "
                                "the name as the IR spells it, without '@')", caller, name,
                                p->name);
        if (!(e->exprs[i] = cuabi__strdup(name)) || !(e->lowered[i] = cuabi__strdup(name)))
            return CUABI_ERROR_OUT_OF_MEMORY;
    }
    return CUABI_SUCCESS;
}

cuabi_status cuabi__nvvm_compile(const cuabi__program *p, const cuabi__compile_args *a,
                                 cuabi__cache_entry *e, char **log, const char *caller)
{
    const cuabi__nvvm *nv;
    CUABI__TRY(cuabi__nvvm_get_for(&nv, caller));
    char *lib = NULL;
    size_t lib_size = 0;
    if (a->libdevice)
        CUABI__TRY(read_libdevice(&lib, &lib_size, caller));
    cuabi__nvvm_program prog = NULL;
    const char *entry = "nvvmCreateProgram";
    cuabi__nvvm_result r = nv->nvvmCreateProgram(&prog);
    if (r == CUABI__NVVM_SUCCESS) {
        entry = "nvvmAddModuleToProgram";
        r = nv->nvvmAddModuleToProgram(prog, p->source, p->size, p->name);
    }
    /* The extra modules (options.extra_sources), in order, after the program's. */
    for (size_t i = 0; r == CUABI__NVVM_SUCCESS && i < a->v3.num_extra_sources; i++)
        r = nv->nvvmAddModuleToProgram(prog, a->v3.extra_sources[i],
                                       cuabi__extra_source_size(a, i),
                                       a->v3.extra_source_names[i]);
    if (r == CUABI__NVVM_SUCCESS && lib) {
        entry = "nvvmLazyAddModuleToProgram";
        r = nv->nvvmLazyAddModuleToProgram(prog, lib, lib_size, "libdevice.10.bc");
    }
    if (r == CUABI__NVVM_SUCCESS) {
        entry = "nvvmCompileProgram";
        r = nv->nvvmCompileProgram(prog, (int)a->argc, (const char **)a->argv);
    }
    cuabi_status st = CUABI_SUCCESS;
    *log = prog ? nvvm_log(nv, prog) : cuabi__strdup("");
    if (!*log)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    else if (r != CUABI__NVVM_SUCCESS)
        st = nvvm_failed(r, entry, *log, p, caller);
    else if ((st = nvvm_output(nv, prog, a->output, e, caller)) == CUABI_SUCCESS)
        st = nvvm_names_map(p, a->opts, e, caller);
    if (prog && a->keep) /* cuabi_program_backend_handle was asked: the program keeps it */
        *a->keep = prog;
    else if (prog)
        nv->nvvmDestroyProgram(&prog);
    cuabi__free(lib);
    return st;
}
