/* Programs: CUDA C++ through NVRTC, PTX through nvJitLink, with every
 * compile going through the compile cache (src/compile/cache.c).
 *
 * A compile is: check the options and build the compiler's argument list
 * (compile_args), hash everything that decides the output into a key,
 * look the key up, and on a miss compile and store. The result, fresh or
 * cached, is a cuabi__cache_entry (code, compile log, name map), turned
 * into an object code for the caller. */
#include "compile/program.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/fatbin.h"
#include "util/file.h"
#include "util/includes.h"
#include "platform/libident.h"
#include "compile/nvvm.h"
#include "compile/objcode.h"
#include "compile/param_types.h"

/* ---------------------------------------------------------- lifetime */

void cuabi__program_backend_free(cuabi_code_type type, void *backend)
{
    if (!backend)
        return;
    if (type == CUABI_CODE_NVVM) {
        const cuabi__nvvm *nv;
        cuabi__nvvm_program prog = backend;
        if (cuabi__nvvm_get_for(&nv, "cuabi_program") == CUABI_SUCCESS)
            nv->nvvmDestroyProgram(&prog);
    } else {
        const cuabi__nvrtc *nv;
        nvrtcProgram prog = backend;
        if (cuabi__nvrtc_get(&nv) == CUABI_SUCCESS) /* loaded: it made the program */
            nv->nvrtcDestroyProgram(&prog);
    }
    /* No cuabi_error_clear(): a failed compile's error record must stay. The
     * library that made the program is loaded, so the lookups succeed. */
}

void cuabi__program_keep_backend(cuabi__program *p, void *prog)
{
    if (p->backend != prog)
        cuabi__program_backend_free(p->type, p->backend);
    p->backend = prog;
}

static void program_destroy(cuabi__object *o)
{
    cuabi__program *p = (cuabi__program *)o;
    cuabi__program_backend_free(p->type, p->backend);
    cuabi__codeblob_release(p->result);
    cuabi__free(p->log);
    cuabi__free(p->source);
    cuabi__free(p->name);
    pthread_mutex_destroy(&p->lock);
    cuabi__free(p);
}

static const char *default_name(cuabi_code_type type, const char *source, size_t size)
{
    if (type == CUABI_CODE_NVVM)
        return cuabi__nvvm_is_bitcode(source, size) ? "program.bc" : "program.ll";
    return type == CUABI_CODE_PTX ? "program.ptx" : "program.cu";
}

CUABI_EXTERN(cuabi_status) cuabi_program_create(cuabi_program **out, cuabi_code_type type,
                                                const char *source, size_t size,
                                                const char *name)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(type == CUABI_CODE_CUDA_CXX || type == CUABI_CODE_PTX ||
                     type == CUABI_CODE_NVVM,
                     "%s: type %d is not a source type: use CUABI_CODE_CUDA_CXX, "
                     "CUABI_CODE_PTX or CUABI_CODE_NVVM (CUBIN, LTO-IR and fatbin go to "
                     "cuabi_objcode or cuabi_linker)", __func__, (int)type);
    CUABI__CHECK_ARG(source, "%s: source is NULL", __func__);
    if (size == 0)
        size = strlen(source);
    else if (type != CUABI_CODE_NVVM) /* NVVM bitcode holds NUL bytes */
        CUABI__CHECK_ARG(!memchr(source, '\0', size),
                         "%s: source has a NUL byte before the given size %zu: the size is "
                         "wrong, or pass 0 for NUL-terminated text", __func__, size);
    CUABI__CHECK_ARG(size > 0, "%s: source is empty", __func__);
    CUABI__CHECK_ARG(!name || *name, "%s: name is empty (pass NULL for the default)", __func__);

    cuabi__program *p = cuabi__calloc(1, sizeof *p);
    if (!p)
        return CUABI_ERROR_OUT_OF_MEMORY;
    p->type = type;
    p->size = size;
    p->source = cuabi__malloc(size + 1);
    p->name = cuabi__strdup(name ? name : default_name(type, source, size));
    if (!p->source || !p->name) {
        cuabi__free(p->source);
        cuabi__free(p->name);
        cuabi__free(p);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    memcpy(p->source, source, size);
    p->source[size] = '\0';
    pthread_mutex_init(&p->lock, NULL);
    cuabi_status st = cuabi__handle_register(&p->base, CUABI__T_PROGRAM, program_destroy);
    if (st != CUABI_SUCCESS) {
        program_destroy(&p->base);
        return st;
    }
    *out = CUABI__HANDLE(p, cuabi_program);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------ architecture */

void cuabi__current_arch(char out[32])
{
    const cuabi__driver *drv;
    CUdevice dev;
    int major = 0, minor = 0;
    snprintf(out, 32, "sm_90");
    /* No driver or no GPU: not an error here, the default is sm_90. */
    if (cuabi__driver_get(&drv) != CUABI_SUCCESS) {
        cuabi_error_clear();
        return;
    }
    if (!drv->cuCtxGetDevice || CUABI__CU_RAW(drv, cuCtxGetDevice, &dev) != CUDA_SUCCESS)
        if (!drv->cuDeviceGet || CUABI__CU_RAW(drv, cuDeviceGet, &dev, 0) != CUDA_SUCCESS)
            return;
    if (!drv->cuDeviceGetAttribute ||
        CUABI__CU_RAW(drv, cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        CUABI__CU_RAW(drv, cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        return;
    snprintf(out, 32, "sm_%d%d", major, minor);
}

/* NVRTC's supported architectures; *n = 0 when it cannot say. The list is
 * fixed once NVRTC is loaded, so it is asked once: every compile checks
 * its architecture against it, a cache hit included. */
static struct {
    pthread_mutex_t lock;
    bool known;
    int archs[128];
    size_t n;
} nvrtc_archs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static cuabi_status query_archs(void)
{
    const cuabi__nvrtc *nv;
    CUABI__TRY(cuabi__nvrtc_get(&nv));
    int count = 0;
    nvrtc_archs.n = 0;
    if (!nv->nvrtcGetNumSupportedArchs || !nv->nvrtcGetSupportedArchs ||
        nv->nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) {
        nvrtc_archs.known = true;
        return CUABI_SUCCESS;
    }
    int *all = cuabi__malloc((size_t)count * sizeof *all);
    if (!all)
        return CUABI_ERROR_OUT_OF_MEMORY;
    if (nv->nvrtcGetSupportedArchs(all) == NVRTC_SUCCESS) {
        size_t keep = (size_t)count < 128 ? (size_t)count : 128;
        memcpy(nvrtc_archs.archs, all, keep * sizeof *all);
        nvrtc_archs.n = keep;
    }
    cuabi__free(all);
    nvrtc_archs.known = true;
    return CUABI_SUCCESS;
}

static cuabi_status supported_archs(int *archs, size_t cap, size_t *n)
{
    *n = 0;
    pthread_mutex_lock(&nvrtc_archs.lock);
    cuabi_status st = nvrtc_archs.known ? CUABI_SUCCESS : query_archs();
    if (st == CUABI_SUCCESS) {
        for (size_t i = 0; i < nvrtc_archs.n && i < cap; i++)
            archs[i] = nvrtc_archs.archs[i];
        *n = nvrtc_archs.n;
    }
    pthread_mutex_unlock(&nvrtc_archs.lock);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_program_supported_archs(int *out, size_t capacity,
                                                         size_t *count)
{
    CUABI__CHECK_ARG(count, "%s: count is NULL", __func__);
    CUABI__CHECK_ARG(out || capacity == 0, "%s: out is NULL but capacity is %zu", __func__,
                     capacity);
    return supported_archs(out, capacity, count);
}

/* Check the form of "sm_90", "sm_90a", "compute_100f" (*virt tells
 * compute_); whether the compiler supports it is asked only before
 * compiling (check_arch_supported), so a cache hit needs no NVRTC. */
cuabi_status cuabi__check_arch(const char *arch, bool *virt, const char *caller)
{
    const char *digits;
    if (!strncmp(arch, "sm_", 3))
        digits = arch + 3, *virt = false;
    else if (!strncmp(arch, "compute_", 8))
        digits = arch + 8, *virt = true;
    else
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: architecture \"%s\" is not of the form sm_XX or compute_XX",
                            caller, arch);
    char *end;
    long num = strtol(digits, &end, 10);
    /* Two digits at least, no sign or space: nvJitLink (PTX programs)
     * exit()s the process on "-arch=sm_9". */
    if (end == digits || *digits < '1' || *digits > '9' || num < 10 ||
        (*end && (strcmp(end, "a") && strcmp(end, "f"))))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: architecture \"%s\" is not of the form sm_XX or compute_XX "
                            "(optionally followed by a or f)", caller, arch);
    return CUABI_SUCCESS;
}

/* Whether the loaded NVRTC targets `arch` (of a form cuabi__check_arch accepted). */
static cuabi_status check_arch_supported(const char *arch, const char *caller)
{
    long num = strtol(arch + (arch[0] == 's' ? 3 : 8), NULL, 10);
    int archs[128];
    size_t n;
    cuabi_status st = supported_archs(archs, 128, &n);
    if (st != CUABI_SUCCESS || n == 0) {
        cuabi_error_clear(); /* cannot check: let the compiler decide */
        return CUABI_SUCCESS;
    }
    for (size_t i = 0; i < n && i < 128; i++)
        if (archs[i] == num)
            return CUABI_SUCCESS;
    char list[512] = "";
    for (size_t i = 0, len = 0; i < n && i < 128 && len < sizeof list - 16; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", i ? " " : "", archs[i]);
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                        "%s: architecture \"%s\" is not supported by the loaded NVRTC "
                        "(it supports %s)", caller, arch, list);
}

static cuabi_status check_supported_cb(const char *arch, void *caller)
{
    return check_arch_supported(arch, caller);
}

/* ------------------------------------------------------------ options */

void cuabi__compile_args_free(cuabi__compile_args *a)
{
    cuabi__free(a->argv);
    a->argv = NULL;
    cuabi__free(a->bundled_dir);
    a->bundled_dir = NULL;
}


/* An array field: count > 0 needs a pointer, and no element may be NULL/empty. */
static cuabi_status check_strings(const char **v, size_t n, const char *what, bool allow_empty,
                                  const char *caller)
{
    if (n && !v)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s is NULL but its "
                            "count is %zu", caller, what, n);
    for (size_t i = 0; i < n; i++)
        if (!v[i] || (!allow_empty && !*v[i]))
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s[%zu] is %s",
                                caller, what, i, v[i] ? "empty" : "NULL");
    return CUABI_SUCCESS;
}

static cuabi_status check_flags(const cuabi_program_options *o, const char *caller)
{
    const struct { const char *name; int v; } flags[] = {
        { "debug", o->debug }, { "line_info", o->line_info }, { "fast_math", o->fast_math },
        { "relocatable", o->relocatable }, { "lto", o->lto }, { "cache", o->cache },
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].v != 0 && flags[i].v != 1)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s must be 0 or 1, "
                                "not %d", caller, flags[i].name, flags[i].v);
    if (o->opt_level < -1 || o->opt_level > 3)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.opt_level must be -1 "
                            "(default) or 0..3, not %d", caller, o->opt_level);
    if (o->debug && o->opt_level > 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.debug = 1 turns "
                            "optimisation off; it conflicts with opt_level = %d (use -1 or 0)",
                            caller, o->opt_level);
    if (o->std) {
        static const char *const stds[] = { "c++03", "c++11", "c++14", "c++17", "c++20" };
        bool ok = false;
        for (size_t i = 0; i < sizeof stds / sizeof stds[0]; i++)
            ok |= !strcmp(o->std, stds[i]);
        if (!ok)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.std \"%s\" is not "
                                "one of c++03, c++11, c++14, c++17, c++20", caller, o->std);
    }
    CUABI__TRY(check_strings(o->defines, o->num_defines, "defines", false, caller));
    for (size_t i = 0; i < o->num_defines; i++)
        if (o->defines[i][0] == '=')
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.defines[%zu] \"%s\" "
                                "has no name before '='", caller, i, o->defines[i]);
    CUABI__TRY(check_strings(o->include_paths, o->num_include_paths, "include_paths", false,
                             caller));
    CUABI__TRY(check_strings(o->header_names, o->num_headers, "header_names", false, caller));
    CUABI__TRY(check_strings(o->header_contents, o->num_headers, "header_contents", true,
                             caller));
    CUABI__TRY(check_strings(o->name_expressions, o->num_name_expressions, "name_expressions",
                             false, caller));
    CUABI__TRY(check_strings(o->extra_options, o->num_extra_options, "extra_options", false,
                             caller));
    return CUABI_SUCCESS;
}

/* What the output kind and the code type allow. */
static cuabi_status check_output(const cuabi_program_options *o, cuabi_code_type type,
                                 bool virt, const char *arch, const char *caller)
{
    cuabi_code_type out = o->output;
    if (type == CUABI_CODE_NVVM)
        CUABI__TRY(cuabi__nvvm_check_options(o, caller));
    if (out != CUABI_CODE_CUBIN && out != CUABI_CODE_PTX && out != CUABI_CODE_LTOIR &&
        out != CUABI_CODE_FATBIN)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.output %d is not "
                            "CUABI_CODE_CUBIN, CUABI_CODE_PTX, CUABI_CODE_LTOIR or "
                            "CUABI_CODE_FATBIN", caller, (int)out);
    if (o->lto && out != CUABI_CODE_LTOIR)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.lto = 1 produces LTO-IR: "
                            "set output = CUABI_CODE_LTOIR (or lto = 0)", caller);
    if (out == CUABI_CODE_CUBIN && virt)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a CUBIN needs a real "
                            "architecture (sm_XX), not %s; or ask for CUABI_CODE_PTX", caller,
                            arch);
    if (type == CUABI_CODE_PTX) {
        if (out == CUABI_CODE_LTOIR)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: PTX cannot be turned into "
                                "LTO-IR; ask for CUABI_CODE_CUBIN", caller);
        const char *cxx_only = o->std ? "std" : o->fast_math ? "fast_math"
            : o->relocatable ? "relocatable" : o->num_defines ? "defines"
            : o->num_include_paths ? "include_paths" : o->num_headers ? "headers"
            : o->num_name_expressions ? "name_expressions" : NULL;
        if (o->opt_level == 1 || o->opt_level == 2)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: nvJitLink assembles PTX at "
                                "optimisation level 0 or 3 only, not %d", caller, o->opt_level);
        if (cxx_only)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s applies to CUDA "
                                "C++ only, and this program is PTX", caller, cxx_only);
    }
    return CUABI_SUCCESS;
}

/* Version 3's fields: copied out of a version-3 struct (a shorter one has
 * none), and checked against the program's type. */
static cuabi_status read_v3(cuabi__compile_args *a, const cuabi_program_options *o,
                            cuabi_code_type type, const char *caller)
{
    a->v3.pch_verbose = a->v3.pch_messages = a->v3.instantiate_templates_in_pch = -1;
    if (o->version < 3)
        return CUABI_SUCCESS;
    a->v3.pch = o->pch;
    a->v3.pch_verbose = o->pch_verbose;
    a->v3.pch_messages = o->pch_messages;
    a->v3.instantiate_templates_in_pch = o->instantiate_templates_in_pch;
    a->v3.use_bundled_headers = o->use_bundled_headers;
    a->v3.numba_debug = o->numba_debug;
    a->v3.create_pch = o->create_pch;
    a->v3.use_pch = o->use_pch;
    a->v3.pch_dir = o->pch_dir;
    a->v3.extra_source_names = o->extra_source_names;
    a->v3.extra_sources = o->extra_sources;
    a->v3.extra_source_sizes = o->extra_source_sizes;
    a->v3.num_extra_sources = o->num_extra_sources;
    const struct { const char *name; int v, lo; } flags[] = {
        { "pch", o->pch, 0 }, { "use_bundled_headers", o->use_bundled_headers, 0 },
        { "numba_debug", o->numba_debug, 0 }, { "pch_verbose", o->pch_verbose, -1 },
        { "pch_messages", o->pch_messages, -1 },
        { "instantiate_templates_in_pch", o->instantiate_templates_in_pch, -1 },
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].v < flags[i].lo || flags[i].v > 1)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s must be %s, "
                                "not %d", caller, flags[i].name,
                                flags[i].lo ? "-1 (default), 0 or 1" : "0 or 1", flags[i].v);
    const struct { const char *name; const char *v; } paths[] = {
        { "create_pch", o->create_pch }, { "use_pch", o->use_pch }, { "pch_dir", o->pch_dir },
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (paths[i].v && !*paths[i].v)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s is empty (NULL "
                                "for none)", caller, paths[i].name);
    if (o->pch && o->create_pch)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.pch (automatic PCH) and "
                            "options.create_pch cannot be given together", caller);
    if (type != CUABI_CODE_CUDA_CXX) {
        const char *cxx_only = o->pch ? "pch" : o->create_pch ? "create_pch"
            : o->use_pch ? "use_pch" : o->pch_dir ? "pch_dir"
            : o->pch_verbose >= 0 ? "pch_verbose" : o->pch_messages >= 0 ? "pch_messages"
            : o->instantiate_templates_in_pch >= 0 ? "instantiate_templates_in_pch"
            : o->use_bundled_headers ? "use_bundled_headers" : NULL;
        if (cxx_only)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s applies to CUDA "
                                "C++ (NVRTC) only, and this program is %s", caller, cxx_only,
                                type == CUABI_CODE_PTX ? "PTX" : "NVVM IR");
    }
    if (type == CUABI_CODE_PTX)
        a->v3.numba_debug = 0; /* nvJitLink cannot honor it: ignored, as cuda.core does */
    size_t n = o->num_extra_sources;
    if (n && type != CUABI_CODE_NVVM)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.extra_sources are NVVM "
                            "IR modules (libNVVM only), and this program is %s", caller,
                            type == CUABI_CODE_PTX ? "PTX" : "CUDA C++");
    CUABI__TRY(check_strings(o->extra_source_names, n, "extra_source_names", false, caller));
    CUABI__TRY(check_strings(o->extra_sources, n, "extra_sources", true, caller));
    for (size_t i = 0; i < n; i++)
        if (cuabi__extra_source_size(a, i) == 0)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.extra_sources[%zu] "
                                "(\"%s\") is empty", caller, i, o->extra_source_names[i]);
    return CUABI_SUCCESS;
}

/* Where NVRTC installs its bundled headers: $CUABI_NVRTC_HEADERS_DIR, else
 * $XDG_CACHE_HOME/cuabi/nvrtc-headers, else ~/.cache/cuabi/nvrtc-headers. */
static cuabi_status bundled_dir(char **out, const char *caller)
{
    const char *d = getenv("CUABI_NVRTC_HEADERS_DIR");
    cuabi__str s = { 0 };
    if (d && *d == '/')
        cuabi__str_add(&s, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && *d == '/')
        cuabi__str_add(&s, "%s/cuabi/nvrtc-headers", d);
    else if ((d = getenv("HOME")) && *d == '/')
        cuabi__str_add(&s, "%s/.cache/cuabi/nvrtc-headers", d);
    else
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: options.use_bundled_headers = 1 needs "
                            "a directory: set CUABI_NVRTC_HEADERS_DIR, XDG_CACHE_HOME or HOME "
                            "(absolute)", caller);
    if (!s.s)
        return CUABI_ERROR_OUT_OF_MEMORY;
    *out = s.s;
    return CUABI_SUCCESS;
}

/* Calls `fn` with each architecture of a comma-separated list (a fatbin's:
 * sm_XX for a CUBIN, compute_XX for PTX), stopping at the first failure. */
static cuabi_status each_arch(const char *list, cuabi_status (*fn)(const char *arch, void *ctx),
                              void *ctx)
{
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char one[32];
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
        if (n >= sizeof one)
            one[0] = '\0'; /* too long: refused as malformed */
        CUABI__TRY(fn(one, ctx));
        if (!comma)
            return CUABI_SUCCESS;
        p = comma + 1;
    }
}

/* How often `arch` is an entry of the list. */
static size_t count_entry(const char *list, const char *arch)
{
    size_t n = strlen(arch), hits = 0;
    for (const char *p = list; p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        hits += len == n && !memcmp(p, arch, n);
        p = comma ? comma + 1 : NULL;
    }
    return hits;
}

typedef struct arch_check {
    const char *caller, *list;
    size_t n;
} arch_check;

static cuabi_status check_one_fatbin_arch(const char *arch, void *ctx)
{
    arch_check *c = ctx;
    bool virt;
    if (!*arch)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.arch \"%s\" has an "
                            "empty or overlong entry; a fatbin takes \"sm_80,sm_90,compute_90\" "
                            "(sm_XX: a CUBIN, compute_XX: PTX)", c->caller, c->list);
    CUABI__TRY(cuabi__check_arch(arch, &virt, c->caller));
    /* Each entry once: the fatbin holds one image per kind and architecture. */
    if (count_entry(c->list, arch) > 1)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.arch \"%s\" names %s "
                            "twice", c->caller, c->list, arch);
    if (++c->n > 32)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.arch \"%s\" names more "
                            "than 32 architectures", c->caller, c->list);
    return CUABI_SUCCESS;
}

/* A fatbin's architecture list. */
static cuabi_status check_fatbin_archs(const char *list, const char *caller)
{
    arch_check c = { caller, list, 0 };
    return each_arch(list, check_one_fatbin_arch, &c);
}

/* nvJitLink's arguments for PTX. */
static void each_ptx_arg(const cuabi_program_options *o, const char *level, cuabi__arg_fn fn,
                         void *ctx)
{
    if (o->opt_level >= 0)
        fn("-O", level, ctx);
    if (o->debug)
        fn("-g", "", ctx);
    if (o->line_info)
        fn("-lineinfo", "", ctx);
}

/* The header every CUDA C++ program gets first (--pre-include): what
 * NVIDIA's documentation writes without a declaration and NVRTC does not
 * declare. cudaGraphSetConditional (conditional graph nodes, CUDA 12.3+)
 * is a device-runtime function the driver resolves at load; NVRTC knows
 * cudaGraphConditionalHandle but not the function, so a body written as the
 * CUDA programming guide shows failed with "identifier is undefined". The
 * declaration matches cuda_device_runtime_api.h's, so a program that
 * declares it itself or includes that header still compiles. The name
 * carries a version: the compile cache's key hashes the argument list, so a
 * change of this text must come with a new name. */
#define BUILTINS_NAME "cuabi_builtins_1.h"
static const char builtins_text[] =
    "#pragma once\n"
    "extern \"C\" __device__ __cudart_builtin__ void\n"
    "cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);\n";

/* NVRTC's arguments for CUDA C++. */
static void each_cxx_arg(const cuabi__compile_args *a, const char *level, cuabi__arg_fn fn,
                         void *ctx)
{
    const cuabi_program_options *o = a->opts;
    fn("--pre-include=", BUILTINS_NAME, ctx);
    if (o->std)
        fn("-std=", o->std, ctx);
    if (o->opt_level >= 0)
        fn("--ptxas-options=-O", level, ctx);
    if (o->debug)
        fn("-G", "", ctx);
    if (o->line_info)
        fn("-lineinfo", "", ctx);
    if (o->fast_math)
        fn("-use_fast_math", "", ctx);
    if (o->relocatable)
        fn("-rdc=true", "", ctx);
    if (a->output == CUABI_CODE_LTOIR)
        fn("-dlto", "", ctx);
    for (size_t i = 0; i < o->num_defines; i++)
        fn("-D", o->defines[i], ctx);
    for (size_t i = 0; i < o->num_include_paths; i++)
        fn("-I", o->include_paths[i], ctx);
    if (a->bundled_dir)
        fn("--use-bundled-headers=", a->bundled_dir, ctx);
    static const char *const tf[] = { "false", "true" };
    if (a->v3.pch)
        fn("--pch", "", ctx);
    if (a->v3.create_pch)
        fn("--create-pch=", a->v3.create_pch, ctx);
    if (a->v3.use_pch)
        fn("--use-pch=", a->v3.use_pch, ctx);
    if (a->v3.pch_dir)
        fn("--pch-dir=", a->v3.pch_dir, ctx);
    if (a->v3.pch_verbose >= 0)
        fn("--pch-verbose=", tf[a->v3.pch_verbose], ctx);
    if (a->v3.pch_messages >= 0)
        fn("--pch-messages=", tf[a->v3.pch_messages], ctx);
    if (a->v3.instantiate_templates_in_pch >= 0)
        fn("--instantiate-templates-in-pch=", tf[a->v3.instantiate_templates_in_pch], ctx);
    if (a->v3.numba_debug)
        fn("--numba-debug", "", ctx);
}

/* The argument list NVRTC (or nvJitLink, for PTX; libNVVM for NVVM IR)
 * gets; the architecture comes first (compile_one_arch relies on it). */
void cuabi__compile_args_each(const cuabi__compile_args *a, cuabi__arg_fn fn, void *ctx)
{
    const cuabi_program_options *o = a->opts;
    if (a->type == CUABI_CODE_NVVM) {
        cuabi__nvvm_each_arg(a, fn, ctx);
        return;
    }
    char level[16] = "";
    if (o->opt_level >= 0) /* formatted only when used: a hit runs this twice */
        snprintf(level, sizeof level, "%d", o->opt_level);
    fn("-arch=", a->arch, ctx);
    if (a->type == CUABI_CODE_PTX)
        each_ptx_arg(o, level, fn, ctx);
    else
        each_cxx_arg(a, level, fn, ctx);
    for (size_t i = 0; i < o->num_extra_options; i++)
        fn(o->extra_options[i], "", ctx);
}

static void measure_arg(const char *head, const char *tail, void *ctx)
{
    cuabi__compile_args *a = ctx;
    a->argc++;
    a->argv_bytes += strlen(head) + strlen(tail) + 1;
}

typedef struct argv_fill {
    char **argv;
    size_t n;
    char *at;                  /* where the next string goes */
} argv_fill;

static void fill_arg(const char *head, const char *tail, void *ctx)
{
    argv_fill *f = ctx;
    f->argv[f->n++] = f->at;
    f->at = stpcpy(stpcpy(f->at, head), tail) + 1;
}

cuabi_status cuabi__compile_args_argv(cuabi__compile_args *a)
{
    if (a->argv)
        return CUABI_SUCCESS;
    char **argv = cuabi__malloc(a->argc * sizeof *argv + a->argv_bytes);
    if (!argv)
        return CUABI_ERROR_OUT_OF_MEMORY;
    argv_fill f = { argv, 0, (char *)(argv + a->argc) };
    cuabi__compile_args_each(a, fill_arg, &f);
    a->argv = argv;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__compile_args_build(cuabi__compile_args *a, cuabi_code_type type,
                                       const cuabi_program_options *opts, const char *caller)
{
    static const cuabi_program_options defaults = CUABI_PROGRAM_OPTIONS_INIT;
    *a = (cuabi__compile_args){ 0 };
    if (opts)
        CUABI__CHECK_VERSION("cuabi_program_options", opts->version,
                             CUABI_PROGRAM_OPTIONS_VERSION);
    else
        opts = &defaults;
    CUABI__TRY(check_flags(opts, caller));
    if (opts->arch && *opts->arch) {
        if (strlen(opts->arch) >= sizeof a->arch)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.arch is too long",
                                caller);
        memcpy(a->arch, opts->arch, strlen(opts->arch) + 1); /* fits: checked above */
    } else {
        cuabi__current_arch(a->arch);
    }
    bool virt = false;
    if (opts->output == CUABI_CODE_FATBIN)
        CUABI__TRY(check_fatbin_archs(a->arch, caller));
    else
        CUABI__TRY(cuabi__check_arch(a->arch, &virt, caller));
    CUABI__TRY(check_output(opts, type, virt, a->arch, caller));
    CUABI__TRY(read_v3(a, opts, type, caller));
    a->libdevice = opts->version >= 2 ? opts->libdevice : 0;
    if (a->libdevice != 0 && (a->libdevice != 1 || type != CUABI_CODE_NVVM))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.libdevice %s", caller,
                            a->libdevice != 1 ? "must be 0 or 1"
                                              : "= 1 applies to NVVM IR programs only");
    a->type = type;
    a->output = opts->output;
    a->use_cache = opts->cache;
    a->opts = opts;
    if (a->v3.use_bundled_headers) /* last: nothing fails after it */
        CUABI__TRY(bundled_dir(&a->bundled_dir, caller));
    cuabi__compile_args_each(a, measure_arg, a);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------------ key */

/* What a key needs beyond the options and the source: the compiler's
 * identity (libident.h: known without loading it) and, for CUDA C++, a
 * digest of every file the source can #include (includes.h). */
typedef struct key_parts {
    cuabi__bytes compiler;
    int includes;               /* CUABI__INCLUDES_NONE or _HASHED */
    uint8_t digest[16];
    cuabi__ident_text libdevice; /* NVVM with libdevice: the file linked (len 0: none) */
    cuabi__ident_text pch;       /* options.use_pch: the file read (len 0: none) */
} key_parts;

/* options.use_pch's file, as a key names it (path, size, modification
 * time); CUABI_ERROR_CACHE when it cannot be read (NVRTC then reports it). */
static cuabi_status use_pch_ident(cuabi__ident_text *t, const char *path, const char *caller)
{
    cuabi__file_id id;
    if (cuabi__file_id_read(&id, path) != 0)
        return cuabi__error(CUABI_ERROR_CACHE, "%s: options.use_pch %s cannot be read (%s)",
                            caller, path, strerror(errno));
    int n = snprintf(t->s, sizeof t->s, "use-pch %s %" PRIu64 " %" PRId64, id.path, id.size,
                     id.mtime_ns);
    t->len = n < 0 ? 0 : (size_t)n < sizeof t->s ? (size_t)n : sizeof t->s - 1;
    return CUABI_SUCCESS;
}

/* The libdevice file a compile links, as a key names it: its path, size,
 * modification time (libident.h's file identity, without reading it). */
static cuabi_status libdevice_ident(cuabi__ident_text *t, const char *caller)
{
    char path[4096], why[1024];
    cuabi__file_id id;
    if (cuabi__libdevice_locate(path, sizeof path, why, sizeof why) != 0)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: options.libdevice = 1: %s", caller, why);
    if (cuabi__file_id_read(&id, path) != 0) {
        /* why: what the file is (a FIFO is refused, never waited on), else errno's */
        int err = errno;
        struct stat st;
        int fd = cuabi__file_open(path, 0, UINT64_MAX, &st, why, sizeof why);
        if (fd >= 0) {
            close(fd);
            snprintf(why, sizeof why, "%s", strerror(err));
        }
        return cuabi__error(CUABI_ERROR_IO, "%s: cannot read libdevice %s: %s", caller, path,
                            why);
    }
    int n = snprintf(t->s, sizeof t->s, "libdevice %s %" PRIu64 " %" PRId64, id.path, id.size,
                     id.mtime_ns);
    t->len = n < 0 ? 0 : (size_t)n < sizeof t->s ? (size_t)n : sizeof t->s - 1;
    return CUABI_SUCCESS;
}

/* CUABI_ERROR_CACHE (the reason in the error) when the compile reads files
 * the key cannot cover. */
static cuabi_status get_key_parts(key_parts *k, const cuabi__program *p,
                                  const cuabi__compile_args *a)
{
    static const char caller[] = "cuabi_program_compile";
    /* Field by field: the libdevice text stays unwritten unless used. */
    k->compiler = (cuabi__bytes){ "", 0 };
    k->includes = 0;
    memset(k->digest, 0, sizeof k->digest);
    k->libdevice.len = 0;
    k->pch.len = 0;
    /* Automatic or created PCH writes files a cache hit would not. */
    if (a->v3.pch || a->v3.create_pch)
        return cuabi__error(CUABI_ERROR_CACHE, "%s: options.%s writes a precompiled header",
                            caller, a->v3.pch ? "pch" : "create_pch");
    /* CUDA C++ is NVRTC's work (to any output); PTX to CUBIN is nvJitLink's;
     * PTX kept as PTX needs no compiler. */
    cuabi__compiler *c = p->type == CUABI_CODE_NVVM ? cuabi__nvvm_compiler()
                       : p->type != CUABI_CODE_PTX ? &cuabi__compiler_nvrtc
                       : a->output != CUABI_CODE_PTX ? &cuabi__compiler_nvjitlink : NULL;
    if (c) {
        const char *text;
        size_t len;
        CUABI__TRY(cuabi__compiler_ident(c, cuabi__cache_record_dir, &text, &len, caller));
        k->compiler = (cuabi__bytes){ text, len };
    }
    if (p->type == CUABI_CODE_NVVM && a->libdevice)
        return libdevice_ident(&k->libdevice, caller);
    if (p->type != CUABI_CODE_CUDA_CXX)
        return CUABI_SUCCESS;
    if (a->v3.use_pch)
        CUABI__TRY(use_pch_ident(&k->pch, a->v3.use_pch, caller));
    char why[1024];
    CUABI__TRY(cuabi__includes_digest(&k->includes, k->digest, p->name, p->source, p->size,
                                      a->opts, why, sizeof why));
    if (k->includes == CUABI__INCLUDES_UNRESOLVED)
        return cuabi__error(CUABI_ERROR_CACHE, "%s: %s", caller, why);
    return CUABI_SUCCESS;
}

static bool same_includes(const key_parts *x, const key_parts *y)
{
    return x->includes == y->includes && !memcmp(x->digest, y->digest, sizeof x->digest) &&
           x->pch.len == y->pch.len && !memcmp(x->pch.s, y->pch.s, x->pch.len);
}

static void hash_arg(const char *head, const char *tail, void *ctx)
{
    cuabi__key_add_joined(ctx, head, tail);
}

/* Everything that decides the output goes into the key, each field
 * length-prefixed: the key scheme, the compiler's identity, code type,
 * argument list, source, in-memory headers, name expressions, output kind,
 * and the digest of the files the source can include. */
static void key_from_parts(cuabi__cache_key *out, const cuabi__program *p,
                           const cuabi__compile_args *a, const key_parts *parts)
{
    /* "key=3": the compiler named by its file and version (libident.h). */
    static const char scheme[] = "cuabi-cache-format=" CUABI__CACHE_FORMAT_STR " key=3";
    const cuabi_program_options *o = a->opts;
    uint32_t type = (uint32_t)p->type, output = (uint32_t)a->output;
    uint64_t counts[3] = { a->argc, o->num_headers, o->num_name_expressions };
    cuabi__key_state ks;
    cuabi__key_begin(&ks);
    cuabi__key_add(&ks, scheme, sizeof scheme - 1);
    cuabi__key_add(&ks, parts->compiler.data, parts->compiler.size);
    cuabi__key_add(&ks, &type, sizeof type);
    cuabi__key_add(&ks, &output, sizeof output);
    cuabi__key_add(&ks, counts, sizeof counts);
    cuabi__compile_args_each(a, hash_arg, &ks);
    cuabi__key_add(&ks, p->source, p->size);
    for (size_t i = 0; i < o->num_headers; i++) {
        cuabi__key_add(&ks, o->header_names[i], strlen(o->header_names[i]));
        cuabi__key_add(&ks, o->header_contents[i], strlen(o->header_contents[i]));
    }
    for (size_t i = 0; i < o->num_name_expressions; i++)
        cuabi__key_add(&ks, o->name_expressions[i], strlen(o->name_expressions[i]));
    if (parts->includes == CUABI__INCLUDES_HASHED) /* absent otherwise: keys stay as they were */
        cuabi__key_add(&ks, parts->digest, sizeof parts->digest);
    if (parts->libdevice.len) /* NVVM only: other keys stay as they were */
        cuabi__key_add(&ks, parts->libdevice.s, parts->libdevice.len);
    /* Version 3: present only when used, so other keys stay as they were. */
    if (parts->pch.len)
        cuabi__key_add(&ks, parts->pch.s, parts->pch.len);
    if (a->v3.num_extra_sources) {
        uint64_t nx = a->v3.num_extra_sources;
        cuabi__key_add(&ks, "extra-sources", 13);
        cuabi__key_add(&ks, &nx, sizeof nx);
        for (size_t i = 0; i < a->v3.num_extra_sources; i++) {
            cuabi__key_add(&ks, a->v3.extra_source_names[i],
                           strlen(a->v3.extra_source_names[i]));
            cuabi__key_add(&ks, a->v3.extra_sources[i], cuabi__extra_source_size(a, i));
        }
    }
    cuabi__key_add(&ks, "end", 3);
    cuabi__key_end(&ks, out);
}

cuabi_status cuabi__program_key(cuabi__cache_key *out, const cuabi__program *p,
                                const cuabi__compile_args *a)
{
    key_parts parts;
    CUABI__TRY(get_key_parts(&parts, p, a));
    key_from_parts(out, p, a, &parts);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ compiling */

static char *nvrtc_log(const cuabi__nvrtc *nv, nvrtcProgram prog)
{
    size_t n = 0;
    if (nv->nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
        return cuabi__strdup("");
    char *log = cuabi__malloc(n);
    if (log && nv->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = '\0';
    return log;
}

/* NVRTC compiles the name expressions into a pseudo-file "__nv_name_map",
 * line N holding expression N: an error there means the expression names
 * nothing in the source. Returns its index or -1. */
static long bad_name_expression(const char *log, size_t n)
{
    const char *m = strstr(log, "__nv_name_map(");
    if (!m)
        return -1;
    long line = strtol(m + strlen("__nv_name_map("), NULL, 10);
    return line >= 1 && (size_t)line <= n ? line - 1 : -1;
}

/* Log + failure status of a failed NVRTC compile. */
static cuabi_status compile_failed(nvrtcResult r, const char *log, const cuabi__program *p,
                                   const cuabi_program_options *o, const char *caller)
{
    cuabi_status st;
    long bad = bad_name_expression(log, o->num_name_expressions);
    if (r == NVRTC_ERROR_COMPILATION && bad >= 0)
        st = cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: name expression \"%s\" does not name a "
                          "kernel or function of %s:\n%s", caller, o->name_expressions[bad],
                          p->name, log);
    else if (r == NVRTC_ERROR_COMPILATION)
        st = cuabi__error(CUABI_ERROR_COMPILE, "%s: %s failed to compile:\n%s", caller,
                          p->name, log);
    else if (r == NVRTC_ERROR_INVALID_OPTION)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: NVRTC rejected an option: %s",
                          caller, log);
    else
        st = cuabi__error(CUABI_ERROR_NVRTC, "%s: NVRTC failed on %s with error %d: %s",
                          caller, p->name, (int)r, log);
    cuabi__error_set_nvrtc((int)r);
    cuabi__error_set_log(log, strlen(log));
    return st;
}

/* Copy the output of kind `a->output` out of `prog`. */
static cuabi_status nvrtc_output(const cuabi__nvrtc *nv, nvrtcProgram prog,
                                 cuabi_code_type kind, cuabi__cache_entry *e, const char *caller)
{
    nvrtcResult (*get_size)(nvrtcProgram, size_t *) = nv->nvrtcGetCUBINSize;
    nvrtcResult (*get)(nvrtcProgram, char *) = nv->nvrtcGetCUBIN;
    if (kind == CUABI_CODE_PTX)
        get_size = nv->nvrtcGetPTXSize, get = nv->nvrtcGetPTX;
    else if (kind == CUABI_CODE_LTOIR)
        get_size = nv->nvrtcGetLTOIRSize, get = nv->nvrtcGetLTOIR;
    if (!get_size || !get)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the loaded NVRTC cannot return "
                            "LTO-IR (it is older than CUDA 12.0)", caller);
    size_t n = 0;
    nvrtcResult r = get_size(prog, &n);
    if (r != NVRTC_SUCCESS || n == 0) {
        cuabi__error(CUABI_ERROR_NVRTC, "%s: NVRTC produced no output of the requested kind "
                     "(error %d)", caller, (int)r);
        cuabi__error_set_nvrtc((int)r);
        return CUABI_ERROR_NVRTC;
    }
    e->data = cuabi__malloc(n);
    if (!e->data)
        return CUABI_ERROR_OUT_OF_MEMORY;
    if ((r = get(prog, e->data)) != NVRTC_SUCCESS) {
        cuabi__error(CUABI_ERROR_NVRTC, "%s: NVRTC failed to return its output (error %d)",
                     caller, (int)r);
        cuabi__error_set_nvrtc((int)r);
        return CUABI_ERROR_NVRTC;
    }
    /* PTX comes NUL-terminated; keep the NUL out of the size but in the buffer. */
    e->size = kind == CUABI_CODE_PTX && ((char *)e->data)[n - 1] == '\0' ? n - 1 : n;
    e->type = kind;
    return CUABI_SUCCESS;
}

static cuabi_status lowered_names(const cuabi__nvrtc *nv, nvrtcProgram prog,
                                  const cuabi_program_options *o, cuabi__cache_entry *e,
                                  const char *caller)
{
    size_t n = o->num_name_expressions;
    if (!n)
        return CUABI_SUCCESS;
    e->exprs = cuabi__calloc(n, sizeof(char *));
    e->lowered = cuabi__calloc(n, sizeof(char *));
    if (!e->exprs || !e->lowered)
        return CUABI_ERROR_OUT_OF_MEMORY;
    e->num_names = n;
    for (size_t i = 0; i < n; i++) {
        const char *low = NULL;
        nvrtcResult r = nv->nvrtcGetLoweredName(prog, o->name_expressions[i], &low);
        if (r != NVRTC_SUCCESS || !low) {
            cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: NVRTC has no lowered name for \"%s\"",
                         caller, o->name_expressions[i]);
            cuabi__error_set_nvrtc((int)r);
            return CUABI_ERROR_NOT_FOUND;
        }
        if (!(e->exprs[i] = cuabi__strdup(o->name_expressions[i])) ||
            !(e->lowered[i] = cuabi__strdup(low)))
            return CUABI_ERROR_OUT_OF_MEMORY;
    }
    return CUABI_SUCCESS;
}

/* The kernels' parameter types as the PTX declares them, kept with a CUBIN
 * (param_types.h): NVRTC returns the PTX beside a CUBIN. Best effort: no
 * PTX (LTO-IR output) leaves them unknown; only running out of memory
 * fails. PTX output needs nothing: the objcode reads its own text. */
static cuabi_status keep_signatures(const cuabi__nvrtc *nv, nvrtcProgram prog,
                                    cuabi__cache_entry *e)
{
    size_t n = 0;
    if (e->type == CUABI_CODE_PTX || !nv->nvrtcGetPTXSize || !nv->nvrtcGetPTX ||
        nv->nvrtcGetPTXSize(prog, &n) != NVRTC_SUCCESS || n == 0)
        return CUABI_SUCCESS;
    char *ptx = cuabi__malloc(n);
    if (!ptx)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi_status st = CUABI_SUCCESS;
    if (nv->nvrtcGetPTX(prog, ptx) == NVRTC_SUCCESS)
        st = cuabi__ptx_signatures(&e->signatures, ptx, strnlen(ptx, n));
    cuabi__free(ptx);
    return st;
}

/* The caller's in-memory headers and the built-in one, as NVRTC takes them:
 * one allocation holding both arrays (cuabi__free(*names) frees it). */
static cuabi_status with_builtins(const char ***names, const char ***texts,
                                  const cuabi_program_options *o)
{
    size_t n = o->num_headers + 1;
    const char **both = cuabi__calloc(n, 2 * sizeof *both);
    if (!both)
        return CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < o->num_headers; i++) {
        both[i] = o->header_names[i];
        both[n + i] = o->header_contents[i];
    }
    both[n - 1] = BUILTINS_NAME;
    both[2 * n - 1] = builtins_text;
    *names = both;
    *texts = both + n;
    return CUABI_SUCCESS;
}

/* A fresh NVRTC program of p's source with the caller's in-memory headers
 * and the built-in one. */
static cuabi_status nvrtc_create(const cuabi__nvrtc *nv, const cuabi__program *p,
                                 const cuabi_program_options *o, nvrtcProgram *prog,
                                 const char *caller)
{
    const char **names, **texts;
    CUABI__TRY(with_builtins(&names, &texts, o));
    nvrtcResult r = nv->nvrtcCreateProgram(prog, p->source, p->name, (int)o->num_headers + 1,
                                           texts, names);
    cuabi__free(names);
    if (r != NVRTC_SUCCESS) {
        cuabi_status st = r == NVRTC_ERROR_OUT_OF_MEMORY ? CUABI_ERROR_OUT_OF_MEMORY
                                                         : CUABI_ERROR_NVRTC;
        cuabi__error(st, "%s: nvrtcCreateProgram failed (error %d)", caller, (int)r);
        cuabi__error_set_nvrtc((int)r);
        return st;
    }
    return CUABI_SUCCESS;
}

/* Add the name expressions and compile; `*log` gets the log (replacing one
 * of an earlier try). *r is NVRTC's answer to the compile. */
static cuabi_status nvrtc_run(const cuabi__nvrtc *nv, nvrtcProgram prog,
                              const cuabi__compile_args *a, nvrtcResult *r, char **log,
                              const char *caller)
{
    const cuabi_program_options *o = a->opts;
    *r = NVRTC_SUCCESS;
    for (size_t i = 0; i < o->num_name_expressions && *r == NVRTC_SUCCESS; i++)
        *r = nv->nvrtcAddNameExpression(prog, o->name_expressions[i]);
    if (*r != NVRTC_SUCCESS)
        return cuabi__error(CUABI_ERROR_NVRTC, "%s: nvrtcAddNameExpression failed (error %d)",
                            caller, (int)*r);
    *r = nv->nvrtcCompileProgram(prog, (int)a->argc, (const char *const *)a->argv);
    cuabi__free(*log);
    *log = nvrtc_log(nv, prog);
    return *log ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
}

/* What became of the PCH a compile was asked to create; -1: NVRTC's PCH
 * heap was too small (worth a retry with a larger one). */
static int pch_outcome(const cuabi__nvrtc *nv, nvrtcProgram prog)
{
    nvrtcResult r = nv->nvrtcGetPCHCreateStatus(prog);
    return r == NVRTC_SUCCESS ? CUABI_PCH_CREATED
         : r == NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED ? CUABI_PCH_NOT_ATTEMPTED
         : r == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED ? -1 : CUABI_PCH_FAILED;
}

/* The PCH outcome of a successful compile that asked for one. A heap too
 * small is grown to what NVRTC says it needs and the compile retried once
 * on a fresh program (*prog replaced), as cuda.core does. */
static cuabi_status pch_check(const cuabi__nvrtc *nv, const cuabi__program *p,
                              const cuabi__compile_args *a, nvrtcProgram *prog, nvrtcResult *r,
                              char **log, const char *caller)
{
    if (!a->pch_status || !(a->v3.pch || a->v3.create_pch) || !nv->nvrtcGetPCHCreateStatus)
        return CUABI_SUCCESS; /* not asked, or an NVRTC without PCH: CUABI_PCH_NONE */
    int outcome = pch_outcome(nv, *prog);
    size_t need = 0;
    if (outcome < 0 && nv->nvrtcGetPCHHeapSizeRequired && nv->nvrtcSetPCHHeapSize &&
        nv->nvrtcGetPCHHeapSizeRequired(*prog, &need) == NVRTC_SUCCESS && need &&
        nv->nvrtcSetPCHHeapSize(need) == NVRTC_SUCCESS) {
        nvrtcProgram again;
        CUABI__TRY(nvrtc_create(nv, p, a->opts, &again, caller));
        nv->nvrtcDestroyProgram(prog);
        *prog = again;
        CUABI__TRY(nvrtc_run(nv, again, a, r, log, caller));
        if (*r != NVRTC_SUCCESS)
            return CUABI_SUCCESS; /* reported by the caller */
        outcome = pch_outcome(nv, again);
    }
    *a->pch_status = outcome < 0 ? CUABI_PCH_FAILED : outcome;
    return CUABI_SUCCESS;
}

/* Compile CUDA C++ with NVRTC into `e` (cleared on failure by the caller);
 * `*log` gets the compiler's log either way. */
static cuabi_status compile_cxx(const cuabi__program *p, const cuabi__compile_args *a,
                                cuabi__cache_entry *e, char **log, const char *caller)
{
    const cuabi__nvrtc *nv;
    const cuabi_program_options *o = a->opts;
    CUABI__TRY(cuabi__nvrtc_get(&nv));
    nvrtcProgram prog;
    CUABI__TRY(nvrtc_create(nv, p, o, &prog, caller));
    nvrtcResult r;
    cuabi_status st = nvrtc_run(nv, prog, a, &r, log, caller);
    if (st == CUABI_SUCCESS && r == NVRTC_SUCCESS)
        st = pch_check(nv, p, a, &prog, &r, log, caller);
    if (st != CUABI_SUCCESS)
        goto out;
    if (r != NVRTC_SUCCESS) {
        st = compile_failed(r, *log, p, o, caller);
        goto out;
    }
    st = nvrtc_output(nv, prog, a->output, e, caller);
    if (st == CUABI_SUCCESS)
        st = lowered_names(nv, prog, o, e, caller);
    if (st == CUABI_SUCCESS)
        st = keep_signatures(nv, prog, e);
out:
    if (a->keep) /* cuabi_program_backend_handle was asked: the program keeps it */
        *a->keep = prog;
    else
        nv->nvrtcDestroyProgram(&prog);
    return st;
}

/* PTX to CUBIN with nvJitLink. */
static cuabi_status compile_ptx(const cuabi__program *p, const cuabi__compile_args *a,
                                cuabi__cache_entry *e, char **log, const char *caller)
{
    if (a->output == CUABI_CODE_PTX) { /* nothing to do */
        e->type = CUABI_CODE_PTX;
        e->size = p->size;
        e->data = cuabi__malloc(p->size + 1);
        *log = cuabi__strdup("");
        if (!e->data || !*log)
            return CUABI_ERROR_OUT_OF_MEMORY;
        memcpy(e->data, p->source, p->size + 1);
        return CUABI_SUCCESS;
    }
    const cuabi__nvjitlink *jl;
    CUABI__TRY(cuabi__nvjitlink_get(&jl));
    nvJitLinkHandle h;
    nvJitLinkResult r = jl->nvJitLinkCreate(&h, (uint32_t)a->argc, (const char **)a->argv);
    if (r != NVJITLINK_SUCCESS) {
        cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: nvJitLink rejected the options "
                     "(error %d)", caller, (int)r);
        cuabi__error_set_nvjitlink((int)r);
        return CUABI_ERROR_INVALID_ARGUMENT;
    }
    cuabi_status st = CUABI_SUCCESS;
    r = jl->nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, p->source, p->size + 1, p->name);
    if (r == NVJITLINK_SUCCESS)
        r = jl->nvJitLinkComplete(h);
    size_t n = 0;
    if (jl->nvJitLinkGetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n > 1 &&
        (*log = cuabi__malloc(n)) && jl->nvJitLinkGetErrorLog(h, *log) != NVJITLINK_SUCCESS)
        (*log)[0] = '\0';
    if (!*log && !(*log = cuabi__strdup(""))) {
        st = CUABI_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if (r != NVJITLINK_SUCCESS) {
        st = cuabi__error(CUABI_ERROR_COMPILE, "%s: PTX %s failed to assemble:\n%s", caller,
                          p->name, *log);
        cuabi__error_set_nvjitlink((int)r);
        cuabi__error_set_log(*log, strlen(*log));
        goto out;
    }
    if ((r = jl->nvJitLinkGetLinkedCubinSize(h, &n)) != NVJITLINK_SUCCESS ||
        !(e->data = cuabi__malloc(n ? n : 1)) ||
        (r = jl->nvJitLinkGetLinkedCubin(h, e->data)) != NVJITLINK_SUCCESS) {
        st = e->data || r != NVJITLINK_SUCCESS
                 ? cuabi__error(CUABI_ERROR_NVJITLINK, "%s: nvJitLink did not return the "
                                "CUBIN (error %d)", caller, (int)r)
                 : CUABI_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    e->size = n;
    e->type = CUABI_CODE_CUBIN;
    st = cuabi__ptx_signatures(&e->signatures, p->source, p->size);
out:
    jl->nvJitLinkDestroy(&h);
    return st;
}

/* ------------------------------------------------------------- fatbins */

/* A fatbin: one compile per architecture of the list (sm_XX to a CUBIN,
 * compute_XX to PTX), then packed (fatbin.h). The name map and kernel
 * signatures are the first compile's: every architecture compiles the same
 * source with the same options. */
typedef struct fatbin_job {
    const cuabi__program *p;
    const cuabi__compile_args *a;
    cuabi__cache_entry parts[32];
    cuabi__fatbin_input in[32];
    size_t n;
    cuabi__str log;
    const char *caller;
} fatbin_job;

static cuabi_status compile_one_arch(const char *arch, void *ctx)
{
    fatbin_job *j = ctx;
    bool virt = !strncmp(arch, "compute_", 8);
    cuabi__compile_args one = *j->a;
    char flag[48];
    one.argv = cuabi__malloc(j->a->argc * sizeof *one.argv);
    if (!one.argv)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memcpy(one.argv, j->a->argv, j->a->argc * sizeof *one.argv);
    snprintf(flag, sizeof flag, "-arch=%s", arch);
    one.argv[0] = flag; /* build_argv puts the architecture first */
    one.keep = NULL;    /* several compiler programs: none is kept */
    one.pch_status = NULL;
    one.output = virt ? CUABI_CODE_PTX : CUABI_CODE_CUBIN;
    snprintf(one.arch, sizeof one.arch, "%s", arch);
    cuabi__cache_entry *part = &j->parts[j->n];
    char *log = NULL;
    cuabi_status st = j->p->type == CUABI_CODE_PTX ? compile_ptx(j->p, &one, part, &log, j->caller)
                                                   : compile_cxx(j->p, &one, part, &log, j->caller);
    cuabi__free(one.argv);
    if (log && *log)
        cuabi__str_add(&j->log, "%s%s", log, log[strlen(log) - 1] == '\n' ? "" : "\n");
    cuabi__free(log);
    if (st != CUABI_SUCCESS)
        return st;
    j->in[j->n] = (cuabi__fatbin_input){ part->type, part->data, part->size,
                                         (unsigned)strtoul(arch + (virt ? 8 : 3), NULL, 10) };
    j->n++;
    return CUABI_SUCCESS;
}

/* Move the first part's name map and the signatures into `e`. */
static cuabi_status fatbin_names(fatbin_job *j, cuabi__cache_entry *e)
{
    cuabi__cache_entry *first = &j->parts[0];
    e->num_names = first->num_names;
    e->exprs = first->exprs;
    e->lowered = first->lowered;
    first->num_names = 0;
    first->exprs = first->lowered = NULL;
    for (size_t i = 0; i < j->n && !e->signatures; i++) {
        if (j->parts[i].signatures) {
            e->signatures = j->parts[i].signatures;
            j->parts[i].signatures = NULL;
        } else if (j->parts[i].type == CUABI_CODE_PTX) {
            CUABI__TRY(cuabi__ptx_signatures(&e->signatures, j->parts[i].data, j->parts[i].size));
        }
    }
    return CUABI_SUCCESS;
}

static cuabi_status compile_fatbin(const cuabi__program *p, const cuabi__compile_args *a,
                                   cuabi__cache_entry *e, char **log, const char *caller)
{
    fatbin_job *j = cuabi__calloc(1, sizeof *j);
    if (!j)
        return CUABI_ERROR_OUT_OF_MEMORY;
    j->p = p;
    j->a = a;
    j->caller = caller;
    cuabi_status st = each_arch(a->arch, compile_one_arch, j);
    const char *packer = "";
    if (st == CUABI_SUCCESS)
        st = cuabi__fatbin_pack(&e->data, &e->size, &packer, j->in, j->n, caller);
    if (st == CUABI_SUCCESS) {
        e->type = CUABI_CODE_FATBIN;
        cuabi__str_add(&j->log, "cuabi fatbin: %s packed by %s\n", a->arch, packer);
        st = fatbin_names(j, e);
    }
    *log = cuabi__strdup(j->log.s ? j->log.s : "");
    if (!*log)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < sizeof j->parts / sizeof j->parts[0]; i++)
        cuabi__cache_entry_clear(&j->parts[i]);
    cuabi__str_free(&j->log);
    cuabi__free(j);
    return st;
}

/* ------------------------------------------------------------- results */

/* `log` followed by the cache's notes, in a new string. */
static char *with_notes(const char *log, const cuabi__str *notes)
{
    size_t ll = strlen(log), nl = notes->len;
    char *full = cuabi__malloc(ll + nl + 1);
    if (!full)
        return NULL;
    memcpy(full, log, ll);
    if (nl)
        memcpy(full + ll, notes->s, nl);
    full[ll + nl] = '\0';
    return full;
}

/* Remember a successful compile: its result (name map and log), shared,
 * so a cache hit copies nothing unless the cache left notes. */
static cuabi_status remember(cuabi__program *p, cuabi__codeblob *b, const cuabi__str *notes)
{
    char *log = NULL;
    if (notes->len && !(log = with_notes(b->log, notes)))
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi__free(p->log);
    p->log = log;
    cuabi__codeblob_release(p->result);
    p->result = cuabi__codeblob_retain(b);
    return CUABI_SUCCESS;
}

/* Keep a failed compile's log readable through cuabi_program_log(); the
 * name map stays the last successful compile's. Touches the error record
 * only if it runs out of memory. */
static cuabi_status remember_failure(cuabi__program *p, const char *log, const cuabi__str *notes)
{
    char *full = with_notes(log, notes);
    if (!full)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi__free(p->log);
    p->log = full;
    return CUABI_SUCCESS;
}

/* NVRTC installs and uses its bundled headers from CUDA 13.3 on. */
static cuabi_status check_bundled_headers(const char *caller)
{
    const cuabi__nvrtc *nv;
    int major = 0, minor = 0;
    CUABI__TRY(cuabi__nvrtc_get(&nv));
    if (nv->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
        major = minor = 0;
    if (major * 100 + minor < 1303)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: options.use_bundled_headers needs "
                            "NVRTC 13.3 or newer (--use-bundled-headers); the loaded NVRTC is "
                            "%d.%d", caller, major, minor);
    return CUABI_SUCCESS;
}

/* Compile `p` (a miss, or no cache) into a shared result; `*log` gets the
 * compiler's log either way (the caller frees it). */
static cuabi_status compile_result(cuabi__program *p, cuabi__compile_args *a,
                                   cuabi__codeblob **out, char **log, const char *caller)
{
    bool fat = a->output == CUABI_CODE_FATBIN;
    /* libNVVM checks its architecture itself (asking NVRTC would load it). */
    if (p->type != CUABI_CODE_NVVM)
        CUABI__TRY(fat ? each_arch(a->arch, check_supported_cb, (void *)caller)
                       : check_arch_supported(a->arch, caller));
    if (a->bundled_dir)
        CUABI__TRY(check_bundled_headers(caller));
    CUABI__TRY(cuabi__compile_args_argv(a));
    void *kept = NULL;
    a->keep = p->keep_backend && !fat ? &kept : NULL;
    a->pch_status = &p->pch_status;
    cuabi__cache_entry e = { 0 };
    cuabi_status st = fat ? compile_fatbin(p, a, &e, log, caller)
                    : p->type == CUABI_CODE_PTX ? compile_ptx(p, a, &e, log, caller)
                    : p->type == CUABI_CODE_NVVM ? cuabi__nvvm_compile(p, a, &e, log, caller)
                                                 : compile_cxx(p, a, &e, log, caller);
    if (kept) /* cuabi_program_backend_handle hands it out until the next one */
        cuabi__program_keep_backend(p, kept);
    a->keep = NULL;
    if (st == CUABI_SUCCESS) {
        e.log = *log; /* borrowed for the copy */
        st = cuabi__codeblob_make(out, &e);
        e.log = NULL;
    }
    cuabi__cache_entry_clear(&e);
    return st;
}

/* Look up or compile; *out is the result (a reference) on success. */
static cuabi_status obtain(cuabi__program *p, cuabi__compile_args *a, cuabi__codeblob **out,
                           cuabi__str *notes, const char *caller)
{
    cuabi__cache_key key;
    key_parts before, after;
    bool cached = a->use_cache && cuabi__cache_enabled();
    p->hit = 0;
    p->pch_status = CUABI_PCH_NONE;
    if (cached) {
        cuabi_status st = get_key_parts(&before, p, a);
        if (st == CUABI_ERROR_CACHE) { /* reads files the key cannot cover */
            cuabi__str_add(notes, CUABI__NOTE_NOT_USED "%s; compiled without the cache\n",
                           cuabi_last_error()->message + sizeof "cuabi_program_compile: " - 1);
            cuabi_error_clear();
            cached = false;
        } else {
            CUABI__TRY(st);
            key_from_parts(&key, p, a, &before);
            CUABI__TRY(cuabi__cache_lookup(&key, out, &p->hit, notes));
            if (p->hit)
                return CUABI_SUCCESS;
        }
    }
    char *log = NULL;
    cuabi_status st = compile_result(p, a, out, &log, caller);
    if (st == CUABI_SUCCESS) {
        /* Store under the identity of the compiler that ran (the key above
         * named the file the loader was expected to open; libident.c), and
         * only if no included file changed while it compiled. */
        bool unchanged = cached && get_key_parts(&after, p, a) == CUABI_SUCCESS &&
                         same_includes(&before, &after);
        if (unchanged) {
            key_from_parts(&key, p, a, &after);
            cuabi__cache_store(&key, *out, notes);
        } else if (cached) {
            cuabi__str_add(notes, CUABI__NOTE_NOT_STORED "an included file changed during the "
                                  "compile\n");
        }
        cuabi_error_clear();
    } else if (log && remember_failure(p, log, notes) != CUABI_SUCCESS) {
        st = CUABI_ERROR_OUT_OF_MEMORY;
    }
    cuabi__free(log);
    return st;
}

/* The caller's objcode: it shares the result's bytes and name map. */
static cuabi_status result_objcode(cuabi_objcode **out, const cuabi__program *p,
                                   cuabi__codeblob *b)
{
    cuabi__objcode *o;
    CUABI__TRY(cuabi__objcode_new_shared(&o, b, p->name));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_program_compile(cuabi_objcode **out, cuabi_program *program,
                                                 const cuabi_program_options *options)
{
    cuabi__program *p;
    if (out)
        *out = NULL;
    CUABI__GET(p, program, PROGRAM);
    cuabi__compile_args a;
    CUABI__TRY(cuabi__compile_args_build(&a, p->type, options, __func__));
    cuabi__codeblob *b = NULL;
    cuabi__str notes = { 0 };
    pthread_mutex_lock(&p->lock);
    cuabi_status st = obtain(p, &a, &b, &notes, __func__);
    if (st == CUABI_SUCCESS)
        st = remember(p, b, &notes);
    pthread_mutex_unlock(&p->lock);
    if (st == CUABI_SUCCESS && out)
        st = result_objcode(out, p, b);
    cuabi__codeblob_release(b);
    cuabi__str_free(&notes);
    cuabi__compile_args_free(&a);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_program_log(const char **out, cuabi_program *program)
{
    cuabi__program *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, program, PROGRAM);
    pthread_mutex_lock(&p->lock);
    *out = p->log ? p->log : p->result ? p->result->log : "";
    pthread_mutex_unlock(&p->lock);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_program_lowered_name(const char **out, cuabi_program *program,
                                                      const char *name_expression)
{
    cuabi__program *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(p, program, PROGRAM);
    CUABI__CHECK_ARG(name_expression, "%s: name_expression is NULL", __func__);
    pthread_mutex_lock(&p->lock);
    if (p->result)
        *out = cuabi__name_lookup(p->result->names, p->result->num_names, name_expression);
    pthread_mutex_unlock(&p->lock);
    if (!*out)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: \"%s\" was not a name expression of "
                            "the program's last successful compile: list it in "
                            "options.name_expressions", __func__, name_expression);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_program_cache_hit(int *out, cuabi_program *program)
{
    cuabi__program *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, program, PROGRAM);
    pthread_mutex_lock(&p->lock);
    *out = p->hit;
    pthread_mutex_unlock(&p->lock);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_program_pch_status(cuabi_pch_status *out,
                                                    cuabi_program *program)
{
    cuabi__program *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, program, PROGRAM);
    pthread_mutex_lock(&p->lock);
    *out = (cuabi_pch_status)p->pch_status;
    pthread_mutex_unlock(&p->lock);
    return CUABI_SUCCESS;
}

/* A compiler program of p's source alone (no options yet): NVRTC's with the
 * built-in header, libNVVM's with the source as its module. */
static cuabi_status backend_from_source(void **out, const cuabi__program *p, const char *caller)
{
    if (p->type == CUABI_CODE_NVVM) {
        const cuabi__nvvm *nv;
        CUABI__TRY(cuabi__nvvm_get_for(&nv, caller));
        cuabi__nvvm_program prog = NULL;
        cuabi__nvvm_result r = nv->nvvmCreateProgram(&prog);
        if (r == CUABI__NVVM_SUCCESS)
            r = nv->nvvmAddModuleToProgram(prog, p->source, p->size, p->name);
        if (r != CUABI__NVVM_SUCCESS) {
            if (prog)
                nv->nvvmDestroyProgram(&prog);
            return cuabi__error(r == CUABI__NVVM_ERROR_OUT_OF_MEMORY ? CUABI_ERROR_OUT_OF_MEMORY
                                                                     : CUABI_ERROR_COMPILE,
                                "%s: libNVVM refused NVVM IR %s (error %d)", caller, p->name,
                                (int)r);
        }
        *out = prog;
        return CUABI_SUCCESS;
    }
    static const cuabi_program_options defaults = CUABI_PROGRAM_OPTIONS_INIT;
    const cuabi__nvrtc *nv;
    CUABI__TRY(cuabi__nvrtc_get_for(&nv, caller));
    nvrtcProgram prog;
    CUABI__TRY(nvrtc_create(nv, p, &defaults, &prog, caller));
    *out = prog;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_program_backend_handle(void **out, cuabi_program *program)
{
    cuabi__program *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(p, program, PROGRAM);
    if (p->type == CUABI_CODE_PTX)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: a PTX program has no compiler "
                            "program (nvJitLink assembles it in a session of its own: use a "
                            "cuabi_linker and cuabi_linker_backend_handle)", __func__);
    pthread_mutex_lock(&p->lock);
    cuabi_status st = CUABI_SUCCESS;
    if (!p->backend)
        st = backend_from_source(&p->backend, p, __func__);
    if (st == CUABI_SUCCESS) {
        p->keep_backend = true;
        *out = p->backend;
    }
    pthread_mutex_unlock(&p->lock);
    return st;
}

typedef struct render {
    char *out;
    size_t cap, need;
} render;

static void render_arg(const char *head, const char *tail, void *ctx)
{
    render *r = ctx;
    size_t h = strlen(head), t = strlen(tail);
    if (r->need + h + t + 1 <= r->cap) {
        memcpy(r->out + r->need, head, h);
        memcpy(r->out + r->need + h, tail, t);
        r->out[r->need + h + t] = '\0';
    }
    r->need += h + t + 1;
}

CUABI_EXTERN(cuabi_status) cuabi_program_options_render(char *out, size_t *size,
                                                        cuabi_code_type type,
                                                        const cuabi_program_options *options)
{
    CUABI__CHECK_ARG(size, "%s: size is NULL", __func__);
    CUABI__CHECK_ARG(out || *size == 0, "%s: out is NULL but *size is %zu", __func__, *size);
    CUABI__CHECK_ARG(type == CUABI_CODE_CUDA_CXX || type == CUABI_CODE_PTX ||
                     type == CUABI_CODE_NVVM,
                     "%s: type %d is not a source type: use CUABI_CODE_CUDA_CXX, "
                     "CUABI_CODE_PTX or CUABI_CODE_NVVM", __func__, (int)type);
    cuabi__compile_args a;
    CUABI__TRY(cuabi__compile_args_build(&a, type, options, __func__));
    render r = { out, *size, 0 };
    cuabi__compile_args_each(&a, render_arg, &r);
    cuabi__compile_args_free(&a);
    size_t had = *size;
    *size = r.need;
    if (r.need > had)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL, "%s: the arguments need %zu bytes, "
                            "the buffer has %zu", __func__, r.need, had);
    return CUABI_SUCCESS;
}
