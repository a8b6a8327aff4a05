/* NVVM IR programs through libNVVM: see nvvm.h. */
#include "nvvm.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CUABI_CUDA_LIBDIR
#define CUABI_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* ------------------------------------------------------------ where */

/* The files the loader tries, in order, after CUABI_NVVM_PATH: the
 * toolkit's nvvm/lib64 under $CUDA_HOME and under the directory configure
 * was given, then beside NVRTC (pip wheels put libnvvm.so.4 next to
 * libnvrtc; a toolkit has it in ../nvvm/lib64), then the loader's search
 * path. Built once; libident.c resolves the same list for the cache key. */
enum { MAX_NAMES = 12 };
static char name_buf[MAX_NAMES][1200];
static const char *names[MAX_NAMES + 1];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void add_name(size_t *n, const char *fmt, const char *dir)
{
    if (*n >= MAX_NAMES || !dir || !*dir || strlen(dir) > 1000)
        return;
    snprintf(name_buf[*n], sizeof name_buf[*n], fmt, dir);
    for (size_t i = 0; i < *n; i++) /* the same place named twice: once */
        if (!strcmp(names[i], name_buf[*n]))
            return;
    names[*n] = name_buf[*n];
    (*n)++;
}

/* The directory holding the NVRTC the loader would open, without loading it. */
static bool nvrtc_dir(char *out, size_t cap)
{
    const char *override = getenv("CUABI_NVRTC_PATH");
    bool found = override && *override ? cuabi__lib_locate(out, cap, override) == 0 : false;
    for (const char *const *n = cuabi__nvrtc_names; !found && *n; n++)
        found = cuabi__lib_locate(out, cap, *n) == 0;
    char *slash = found ? strrchr(out, '/') : NULL;
    if (slash)
        *slash = '\0';
    return slash != NULL;
}

static void names_init(void)
{
    size_t n = 0;
    char dir[4096];
    add_name(&n, "%s/nvvm/lib64/libnvvm.so.4", getenv("CUDA_HOME"));
    add_name(&n, "%s/../nvvm/lib64/libnvvm.so.4", CUABI_CUDA_LIBDIR);
    if (nvrtc_dir(dir, sizeof dir)) {
        add_name(&n, "%s/../nvvm/lib64/libnvvm.so.4", dir);
        add_name(&n, "%s/libnvvm.so.4", dir);
    }
    add_name(&n, "%s", "libnvvm.so.4");
    names[n] = NULL;
}

static const char *const *nvvm_names(void)
{
    pthread_once(&names_once, names_init);
    return names;
}

/* ------------------------------------------------------------ loading */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int state; /* 0 not tried, 1 loaded, -1 failed */
static void *dl;
static cuabi__nvvm nvvm;
static cuabi__lib_info info;
/* Where libdevice was found (the search runs once; the key still stats
 * the file on every compile). */
static char libdevice_path[4096];

static void *open_named(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    struct link_map *map = NULL;
    if (h && dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
        snprintf(info.path, sizeof info.path, "%s", map->l_name);
    else if (h)
        snprintf(info.path, sizeof info.path, "%s", name);
    return h;
}

/* Open libNVVM; on failure info.error names every place looked. */
static void *open_nvvm(void)
{
    const char *override = getenv("CUABI_NVVM_PATH");
    if (override && *override) {
        void *h = open_named(override);
        if (!h)
            snprintf(info.error, sizeof info.error, "CUABI_NVVM_PATH=%.900s could not be "
                     "loaded: %.900s", override, dlerror());
        return h;
    }
    size_t used = 0;
    info.error[0] = '\0';
    for (const char *const *n = nvvm_names(); *n; n++) {
        void *h = open_named(*n);
        if (h)
            return h;
        used += (size_t)snprintf(info.error + used, sizeof info.error - used, "%s%s",
                                 used ? ", " : "none of ", *n);
        if (used >= sizeof info.error)
            used = sizeof info.error - 1;
    }
    snprintf(info.error + used, sizeof info.error - used, " could be loaded (set "
             "CUABI_NVVM_PATH to libnvvm.so, or CUDA_HOME to the toolkit holding "
             "nvvm/lib64)");
    return NULL;
}

static int load(void)
{
    void *h = open_nvvm();
    if (!h)
        return -1;
    const char *missing = NULL;
#define RESOLVE(name, params, req)                                            \
    nvvm.name = (__typeof__(nvvm.name))dlsym(h, #name);                        \
    if (!nvvm.name && req && !missing) missing = #name;
    CUABI__NVVM_FUNCS(RESOLVE)
#undef RESOLVE
    int major = 0, minor = 0;
    if (!missing && nvvm.nvvmVersion(&major, &minor) != CUABI__NVVM_SUCCESS)
        missing = "nvvmVersion";
    if (missing) {
        snprintf(info.error, sizeof info.error, "%.900s lacks %.100s: is it libNVVM?",
                 info.path, missing);
        memset(&nvvm, 0, sizeof nvvm);
        dlclose(h);
        return -1;
    }
    info.version = major * 1000 + minor * 10;
    dl = h;
    return 1;
}

cuabi_status cuabi__nvvm_get_for(const cuabi__nvvm **out, const char *caller)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (CUABI__UNLIKELY(s == 0)) {
        pthread_mutex_lock(&lock);
        if ((s = atomic_load(&state)) == 0) {
            s = load();
            info.loaded = s;
            atomic_store_explicit(&state, s, memory_order_release);
        }
        pthread_mutex_unlock(&lock);
    }
    *out = &nvvm;
    if (s == 1)
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: libNVVM (NVVM IR programs) "
                        "unavailable: %s", caller, info.error);
}

bool cuabi__nvvm_loaded(void)
{
    return atomic_load_explicit(&state, memory_order_acquire) == 1;
}

const cuabi__lib_info *cuabi__nvvm_info(void) { return &info; }

cuabi__nvvm *cuabi__nvvm_for_test(void) { return &nvvm; }

static cuabi_status compiler_load(const char *caller)
{
    const cuabi__nvvm *nv;
    return cuabi__nvvm_get_for(&nv, caller);
}

static cuabi__compiler compiler =
    CUABI__COMPILER_INIT("nvvm", "CUABI_NVVM_PATH", names, cuabi__nvvm_loaded, compiler_load,
                         cuabi__nvvm_info);

cuabi__compiler *cuabi__nvvm_compiler(void)
{
    nvvm_names();
    return &compiler;
}

void cuabi__nvvm_reset_for_test(void)
{
    pthread_mutex_lock(&lock);
    /* The library stays mapped (its handle is forgotten, not closed):
     * libNVVM's own one-time allocations then keep its name for the
     * sanitizer's suppressions (tests/lsan.supp) instead of an unknown
     * module's. */
    dl = NULL;
    memset(&nvvm, 0, sizeof nvvm);
    memset(&info, 0, sizeof info);
    libdevice_path[0] = '\0';
    atomic_store(&state, 0);
    pthread_mutex_unlock(&lock);
    cuabi__compiler_reset_for_test(&compiler);
}

/* ---------------------------------------------------------- libdevice */

/* libdevice beside the libNVVM file `lib`: a toolkit has nvvm/lib64 and
 * nvvm/libdevice, a pip layout lib/ and nvvm/libdevice. */
static bool libdevice_beside(char *out, size_t cap, const char *lib)
{
    static const char *const rel[] = { "../libdevice", "../nvvm/libdevice" };
    const char *slash = strrchr(lib, '/');
    if (!slash)
        return false;
    for (size_t i = 0; i < 2; i++) {
        int n = snprintf(out, cap, "%.*s/%s/libdevice.10.bc", (int)(slash - lib), lib, rel[i]);
        if (n > 0 && (size_t)n < cap && access(out, R_OK) == 0)
            return true;
    }
    return false;
}

static int libdevice_search(char *out, size_t cap);

int cuabi__libdevice_locate(char *out, size_t cap, char *why, size_t why_cap)
{
    const char *override = getenv("CUABI_LIBDEVICE_PATH");
    if (override && *override) {
        snprintf(out, cap, "%s", override);
        if (access(out, R_OK) == 0)
            return 0;
        snprintf(why, why_cap, "CUABI_LIBDEVICE_PATH=%s cannot be read: %s", override,
                 strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&lock);
    int rc = libdevice_path[0] ? 0 : libdevice_search(libdevice_path, sizeof libdevice_path);
    if (rc == 0)
        snprintf(out, cap, "%s", libdevice_path);
    pthread_mutex_unlock(&lock);
    if (rc != 0)
        snprintf(why, why_cap, "libdevice.10.bc was not found beside libNVVM (../libdevice or "
                 "../nvvm/libdevice of each of its places); set CUABI_LIBDEVICE_PATH");
    return rc;
}

static int libdevice_search(char *out, size_t cap)
{
    char lib[4096];
    if (cuabi__nvvm_loaded() && libdevice_beside(out, cap, info.path))
        return 0;
    const char *env = getenv("CUABI_NVVM_PATH");
    if (env && *env && cuabi__lib_locate(lib, sizeof lib, env) == 0 &&
        libdevice_beside(out, cap, lib))
        return 0;
    for (const char *const *n = nvvm_names(); *n; n++)
        if (cuabi__lib_locate(lib, sizeof lib, *n) == 0 && libdevice_beside(out, cap, lib))
            return 0;
    out[0] = '\0';
    return -1;
}

static cuabi_status read_libdevice(char **data, size_t *size, const char *caller)
{
    char path[4096], why[1024];
    if (cuabi__libdevice_locate(path, sizeof path, why, sizeof why) != 0)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: options.libdevice = 1: %s", caller, why);
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    cuabi_status st = CUABI_SUCCESS;
    if (n <= 0 || fseek(f, 0, SEEK_SET) != 0)
        st = cuabi__error(CUABI_ERROR_IO, "%s: cannot read libdevice %s: %s", caller, path,
                          n == 0 ? "empty file" : strerror(errno));
    else if (!(*data = cuabi__malloc((size_t)n)))
        st = CUABI_ERROR_OUT_OF_MEMORY;
    else if (fread(*data, 1, (size_t)n, f) != (size_t)n)
        st = cuabi__error(CUABI_ERROR_IO, "%s: short read of libdevice %s", caller, path);
    else
        *size = (size_t)n;
    if (f)
        fclose(f);
    return st;
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
    if (prog)
        nv->nvvmDestroyProgram(&prog);
    cuabi__free(lib);
    return st;
}
