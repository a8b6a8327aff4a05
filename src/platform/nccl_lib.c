/* Loading NCCL: see nccl_lib.h. */
#include "platform/nccl_lib.h"
#include "platform/libident.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CUABI_CUDA_LIBDIR
#define CUABI_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int state; /* 0 not tried, 1 loaded, -1 failed */
static cuabi__nccl nccl;
static cuabi__lib_info info;

/* ------------------------------------------------------------ where */

enum { MAX_PLACES = 16 };
typedef struct places {
    size_t n;
    char name[MAX_PLACES][1100];
} places;

static void add_place(places *p, const char *fmt, const char *dir)
{
    if (p->n >= MAX_PLACES || !dir || !*dir || strlen(dir) > 1000)
        return;
    snprintf(p->name[p->n], sizeof p->name[p->n], fmt, dir);
    for (size_t i = 0; i < p->n; i++) /* the same place named twice: once */
        if (!strcmp(p->name[i], p->name[p->n]))
            return;
    p->n++;
}

/* The directory of the NVRTC the loader would open, without loading it. */
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

/* Every place after CUABI_NCCL_PATH, in order (nccl_lib.h). */
static void list_places(places *p)
{
    char dir[4096];
    p->n = 0;
    add_place(p, "%s/libnccl.so.2", getenv("CUABI_NCCL_WHEEL_DIR"));
    /* A pip layout keeps every NVIDIA wheel under site-packages/nvidia/<x>/lib. */
    if (nvrtc_dir(dir, sizeof dir) && strstr(dir, "/nvidia/"))
        add_place(p, "%s/../../nccl/lib/libnccl.so.2", dir);
    const char *venv = getenv("VIRTUAL_ENV");
    if (venv && *venv && strlen(venv) < 900) {
        char pattern[1100];
        glob_t g;
        snprintf(pattern, sizeof pattern, "%s/lib/python3*/site-packages/nvidia/nccl/lib/"
                 "libnccl.so.2", venv);
        if (glob(pattern, 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc; i++)
                add_place(p, "%s", g.gl_pathv[i]);
        }
        globfree(&g);
    }
    add_place(p, "%s", "libnccl.so.2");
    add_place(p, "%s/libnccl.so.2", CUABI_CUDA_LIBDIR);
}

/* ------------------------------------------------------------ loading */

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

/* CUABI_NCCL_PATH: a file, or a directory holding libnccl.so.2. */
static void *open_override(const char *override)
{
    char name[1200];
    size_t len = strlen(override);
    if (len > 1000) {
        snprintf(info.error, sizeof info.error, "CUABI_NCCL_PATH is %zu characters long; "
                 "name a file of at most 1000", len);
        return NULL;
    }
    snprintf(name, sizeof name, "%s", override);
    void *h = open_named(name);
    if (h)
        return h;
    char first[900];
    snprintf(first, sizeof first, "%s", dlerror());
    snprintf(name, sizeof name, "%s/libnccl.so.2", override);
    h = open_named(name);
    if (!h)
        snprintf(info.error, sizeof info.error, "CUABI_NCCL_PATH=%.900s could not be loaded: "
                 "%.900s", override, first);
    return h;
}

static void *open_nccl(void)
{
    const char *override = getenv("CUABI_NCCL_PATH");
    if (override && *override)
        return open_override(override);
    places *p = malloc(sizeof *p); /* 17 KiB: not on a thread's stack */
    if (!p) {
        snprintf(info.error, sizeof info.error, "out of host memory");
        return NULL;
    }
    list_places(p);
    size_t used = 0;
    info.error[0] = '\0';
    void *h = NULL;
    for (size_t i = 0; i < p->n && !h; i++) {
        h = open_named(p->name[i]);
        if (h)
            break;
        used += (size_t)snprintf(info.error + used, sizeof info.error - used, "%s%s",
                                 used ? ", " : "none of ", p->name[i]);
        if (used >= sizeof info.error)
            used = sizeof info.error - 1;
    }
    free(p);
    if (!h)
        snprintf(info.error + used, sizeof info.error - used, " could be loaded (install the "
                 "nvidia-nccl-cu13 wheel or NCCL's package, or set CUABI_NCCL_PATH to "
                 "libnccl.so.2)");
    return h;
}

/* Ask the version through the table and check it; -1 with info.error set. */
static int check_version(void)
{
    int v = 0;
    if (nccl.ncclGetVersion(&v) != CUABI__NCCL_SUCCESS || v <= 0) {
        snprintf(info.error, sizeof info.error, "%.900s: ncclGetVersion failed", info.path);
        return -1;
    }
    info.version = v;
    if (v < CUABI__NCCL_MIN_VERSION) {
        snprintf(info.error, sizeof info.error, "%.900s is NCCL %d.%d.%d; cuabi needs 2.19 or "
                 "newer", info.path, v / 10000, v / 100 % 100, v % 100);
        return -1;
    }
    return 1;
}

static int load(void)
{
    void *h = open_nccl();
    if (!h)
        return -1;
    const char *missing = NULL;
#define RESOLVE(name, params, req)                                            \
    nccl.name = (__typeof__(nccl.name))dlsym(h, #name);                        \
    if (!nccl.name && req && !missing) missing = #name;
    CUABI__NCCL_FUNCS(RESOLVE)
    RESOLVE(ncclGetErrorString, (), 1)
    RESOLVE(ncclGetLastError, (), 0)
#undef RESOLVE
    if (missing) {
        snprintf(info.error, sizeof info.error, "%.900s lacks %.100s: is it NCCL?", info.path,
                 missing);
        memset(&nccl, 0, sizeof nccl);
        dlclose(h);
        return -1;
    }
    if (check_version() < 0) {
        memset(&nccl, 0, sizeof nccl);
        dlclose(h);
        return -1;
    }
    /* The library stays loaded for the life of the process: NCCL keeps
     * threads and a proxy of its own, which unloading would pull out. */
    return 1;
}

cuabi_status cuabi__nccl_get_for(const cuabi__nccl **out, const char *caller)
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
    *out = &nccl;
    if (CUABI__LIKELY(s == 1))
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: NCCL (collectives) unavailable: %s",
                        caller, info.error);
}

bool cuabi__nccl_loaded(void)
{
    return atomic_load_explicit(&state, memory_order_acquire) == 1;
}

const cuabi__lib_info *cuabi__nccl_info(void) { return &info; }

cuabi__nccl *cuabi__nccl_for_test(void) { return &nccl; }

void cuabi__nccl_install_fake(const cuabi__nccl *fake)
{
    pthread_mutex_lock(&lock);
    memset(&info, 0, sizeof info);
    if (fake) {
        nccl = *fake;
        snprintf(info.path, sizeof info.path, "(fake NCCL table)");
        int s = check_version();
        info.loaded = s;
        atomic_store(&state, s);
    } else {
        memset(&nccl, 0, sizeof nccl);
        atomic_store(&state, 0);
    }
    pthread_mutex_unlock(&lock);
}

/* --------------------------------------------------------- messages */

static const char *const result_names[] = {
    "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
    "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
};

const char *cuabi__nccl_describe(char *buf, size_t cap, const cuabi__nccl *n,
                                 cuabi__nccl_result r, cuabi__nccl_comm comm)
{
    const char *name = r >= 0 && r < (int)(sizeof result_names / sizeof *result_names)
                           ? result_names[r] : "an unknown ncclResult_t";
    const char *text = n && n->ncclGetErrorString ? n->ncclGetErrorString(r) : NULL;
    const char *last = n && n->ncclGetLastError ? n->ncclGetLastError(comm) : NULL;
    int used = snprintf(buf, cap, "%s (%d: %s)", name, r, text ? text : "no description");
    if (last && *last && used > 0 && (size_t)used < cap)
        snprintf(buf + used, cap - (size_t)used, "; NCCL says: %.600s", last);
    return buf;
}
