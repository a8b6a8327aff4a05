/* Loading libNVVM and finding libdevice: see nvvm_lib.h. */
#include "platform/nvvm_lib.h"

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
     * sanitizer's suppressions (tests/fixtures/lsan.supp) instead of an unknown
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
