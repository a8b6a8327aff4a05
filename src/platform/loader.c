/* dlopen()-based loading of the CUDA driver, NVRTC and nvJitLink.
 *
 * Each library is loaded once, on first use, under its own mutex; the
 * outcome (success or the reason for failure) is sticky for the life of the
 * process so every later call fails fast with the same message. */
#include "platform/loader.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CUABI_CUDA_LIBDIR
#define CUABI_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

typedef struct loaded_lib {
    pthread_mutex_t lock;
    _Atomic int state;      /* 0 not tried, 1 loaded, -1 failed */
    cuabi_status fail_status;
    void *dl;
    cuabi__lib_info info;
} loaded_lib;

static loaded_lib driver_lib = { PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, {0} };
static loaded_lib nvrtc_lib = { PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, {0} };
static loaded_lib jit_lib = { PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, {0} };

cuabi__driver cuabi__drv;
_Atomic int cuabi__driver_ready;
#define drv cuabi__drv
static cuabi__nvrtc nvrtc;
static cuabi__nvjitlink jit;

static void record_path(loaded_lib *lib, void *dl, const char *fallback)
{
    struct link_map *map = NULL;
    if (dlinfo(dl, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
        snprintf(lib->info.path, sizeof lib->info.path, "%s", map->l_name);
    else
        snprintf(lib->info.path, sizeof lib->info.path, "%s", fallback);
}

/* Try the environment override alone when set, else each candidate. */
static void *open_first(loaded_lib *lib, const char *env, const char *const *names)
{
    const char *override = getenv(env);
    char tried[400] = "";
    if (override && *override) {
        void *dl = dlopen(override, RTLD_NOW | RTLD_LOCAL);
        if (dl)
            record_path(lib, dl, override);
        else
            snprintf(lib->info.error, sizeof lib->info.error,
                     "%s=%s could not be loaded: %s", env, override, dlerror());
        return dl;
    }
    for (const char *const *n = names; *n; n++) {
        void *dl = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (dl) {
            record_path(lib, dl, *n);
            return dl;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", *n);
    }
    snprintf(lib->info.error, sizeof lib->info.error,
             "none of %s could be loaded (set %s to its path)", tried, env);
    return NULL;
}

static cuabi_status fail_fast(loaded_lib *lib, const char *what, const char *caller)
{
    return cuabi__error(lib->fail_status, "%s: %s unavailable: %s", caller, what, lib->info.error);
}

/* ------------------------------------------------------------------ driver */

static int load_driver(void)
{
    static const char *const names[] = { "libcuda.so.1", NULL };
    loaded_lib *lib = &driver_lib;
    lib->fail_status = CUABI_ERROR_DRIVER_NOT_FOUND;
    void *dl = open_first(lib, "CUABI_DRIVER_PATH", names);
    if (!dl) {
        snprintf(lib->info.error + strlen(lib->info.error),
                 sizeof lib->info.error - strlen(lib->info.error),
                 "; is the NVIDIA driver installed?");
        return -1;
    }
    PFN_cuGetProcAddress_v12000 gpa =
        (PFN_cuGetProcAddress_v12000)dlsym(dl, "cuGetProcAddress_v2");
    if (!gpa) {
        snprintf(lib->info.error, sizeof lib->info.error,
                 "%.900s has no cuGetProcAddress_v2: the driver is older than "
                 "CUDA 12.0, which cuabi needs", lib->info.path);
        dlclose(dl);
        return -1;
    }
#define RESOLVE(name, ver)                                                    \
    {                                                                          \
        void *p = NULL;                                                        \
        CUdriverProcAddressQueryResult found;                                  \
        if (gpa(#name, &p, ver, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==        \
                CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS)          \
            drv.name = (PFN_##name##_v##ver)p;                                 \
    }
    CUABI__DRIVER_FUNCS(RESOLVE)
#undef RESOLVE
    if (!drv.cuInit || !drv.cuDriverGetVersion) {
        snprintf(lib->info.error, sizeof lib->info.error,
                 "%.900s lacks cuInit/cuDriverGetVersion", lib->info.path);
        dlclose(dl);
        memset(&drv, 0, sizeof drv);
        return -1;
    }
    drv.cuDriverGetVersion(&lib->info.version);
    CUresult r = drv.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        if (drv.cuGetErrorName)
            drv.cuGetErrorName(r, &name);
        lib->fail_status = r == CUDA_ERROR_NO_DEVICE ? CUABI_ERROR_NO_DEVICE
                                                     : CUABI_ERROR_CUDA;
        snprintf(lib->info.error, sizeof lib->info.error,
                 "cuInit failed with %s (%d)%s", name, (int)r,
                 r == CUDA_ERROR_NO_DEVICE ? ": no CUDA-capable GPU is visible" : "");
        /* Keep the library open: version queries still work. */
        lib->dl = dl;
        return -1;
    }
    lib->dl = dl;
    return 1;
}

static cuabi_status ensure(loaded_lib *lib, int (*load)(void), const char *what,
                           const char *caller)
{
    int state = atomic_load_explicit(&lib->state, memory_order_acquire);
    if (CUABI__UNLIKELY(state == 0)) {
        pthread_mutex_lock(&lib->lock);
        state = atomic_load(&lib->state);
        if (state == 0) {
            state = load();
            lib->info.loaded = state;
            atomic_store_explicit(&lib->state, state, memory_order_release);
        }
        pthread_mutex_unlock(&lib->lock);
    }
    return state == 1 ? CUABI_SUCCESS : fail_fast(lib, what, caller);
}

CUABI__HOT cuabi_status cuabi__driver_get_for(const cuabi__driver **out, const char *caller)
{
    cuabi_status st = ensure(&driver_lib, load_driver, "CUDA driver", caller);
    *out = &drv;
    if (st == CUABI_SUCCESS)
        atomic_store_explicit(&cuabi__driver_ready, 1, memory_order_release);
    return st;
}

void cuabi__driver_install_fake(const cuabi__driver *fake)
{
    pthread_mutex_lock(&driver_lib.lock);
    atomic_store(&cuabi__driver_ready, 0);
    if (fake) {
        drv = *fake;
        driver_lib.info.loaded = 1;
        driver_lib.info.version = 13000;
        snprintf(driver_lib.info.path, sizeof driver_lib.info.path, "(fake driver)");
        atomic_store(&driver_lib.state, 1);
    } else {
        memset(&drv, 0, sizeof drv);
        memset(&driver_lib.info, 0, sizeof driver_lib.info);
        atomic_store(&driver_lib.state, 0);
    }
    pthread_mutex_unlock(&driver_lib.lock);
}

cuabi__driver *cuabi__driver_for_test(void) { return &drv; }

/* ------------------------------------------------------------------ NVRTC */

/* The files tried, in order (after CUABI_NVRTC_PATH when it is set);
 * src/platform/libident.c follows the same list to name NVRTC without loading it. */
const char *const cuabi__nvrtc_names[] = {
    "libnvrtc.so.13", "libnvrtc.so.12",
    CUABI_CUDA_LIBDIR "/libnvrtc.so.13", CUABI_CUDA_LIBDIR "/libnvrtc.so.12",
    NULL };

static int load_nvrtc(void)
{
    loaded_lib *lib = &nvrtc_lib;
    lib->fail_status = CUABI_ERROR_NVRTC_NOT_FOUND;
    void *dl = open_first(lib, "CUABI_NVRTC_PATH", cuabi__nvrtc_names);
    if (!dl)
        return -1;
    const char *missing = NULL;
#define RESOLVE(name, req)                                                    \
    nvrtc.name = (__typeof__(nvrtc.name))dlsym(dl, #name);                     \
    if (!nvrtc.name && req && !missing) missing = #name;
    CUABI__NVRTC_FUNCS(RESOLVE)
#undef RESOLVE
    int major = 0, minor = 0;
    if (!missing && nvrtc.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
        missing = "nvrtcVersion";
    if (missing || major < 12) {
        if (missing)
            snprintf(lib->info.error, sizeof lib->info.error, "%.900s lacks %.100s",
                     lib->info.path, missing);
        else
            snprintf(lib->info.error, sizeof lib->info.error,
                     "%.900s is NVRTC %d.%d; cuabi needs 12 or newer",
                     lib->info.path, major, minor);
        memset(&nvrtc, 0, sizeof nvrtc);
        dlclose(dl);
        return -1;
    }
    lib->info.version = major * 1000 + minor * 10;
    lib->dl = dl;
    return 1;
}

cuabi_status cuabi__nvrtc_get_for(const cuabi__nvrtc **out, const char *caller)
{
    cuabi_status st = ensure(&nvrtc_lib, load_nvrtc, "NVRTC", caller);
    *out = &nvrtc;
    return st;
}

cuabi__nvrtc *cuabi__nvrtc_for_test(void) { return &nvrtc; }

/* -------------------------------------------------------------- nvJitLink */

static void *jit_symbol(void *dl, const char *name, int major)
{
    void *p = dlsym(dl, name);
    if (!p) {
        /* Versioned spelling used by the header's inline wrappers. */
        char versioned[128];
        snprintf(versioned, sizeof versioned, "__%s_%d_0", name, major);
        p = dlsym(dl, versioned);
    }
    return p;
}

/* As cuabi__nvrtc_names, after CUABI_NVJITLINK_PATH. */
const char *const cuabi__nvjitlink_names[] = {
    "libnvJitLink.so.13", "libnvJitLink.so.12",
    CUABI_CUDA_LIBDIR "/libnvJitLink.so.13",
    CUABI_CUDA_LIBDIR "/libnvJitLink.so.12", NULL };

static int load_nvjitlink(void)
{
    loaded_lib *lib = &jit_lib;
    lib->fail_status = CUABI_ERROR_NVJITLINK_NOT_FOUND;
    void *dl = open_first(lib, "CUABI_NVJITLINK_PATH", cuabi__nvjitlink_names);
    if (!dl)
        return -1;
    int major = strstr(lib->info.path, ".so.12") ? 12 : 13;
    const char *missing = NULL;
#define RESOLVE(name, req)                                                    \
    jit.name = (__typeof__(jit.name))jit_symbol(dl, #name, major);             \
    if (!jit.name && req && !missing) missing = #name;
    CUABI__NVJITLINK_FUNCS(RESOLVE)
#undef RESOLVE
    if (missing) {
        snprintf(lib->info.error, sizeof lib->info.error, "%.900s lacks %.100s",
                 lib->info.path, missing);
        memset(&jit, 0, sizeof jit);
        dlclose(dl);
        return -1;
    }
    unsigned jmaj = (unsigned)major, jmin = 0;
    if (jit.nvJitLinkVersion)
        jit.nvJitLinkVersion(&jmaj, &jmin);
    lib->info.version = (int)(jmaj * 1000 + jmin * 10);
    lib->dl = dl;
    return 1;
}

cuabi_status cuabi__nvjitlink_get_for(const cuabi__nvjitlink **out, const char *caller)
{
    cuabi_status st = ensure(&jit_lib, load_nvjitlink, "nvJitLink", caller);
    *out = &jit;
    return st;
}

cuabi__nvjitlink *cuabi__nvjitlink_for_test(void) { return &jit; }

/* -------------------------------------------------------------- nvFatbin */

static loaded_lib fatbin_lib = { PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, {0} };
static cuabi__nvfatbin nvfatbin;

/* As cuabi__nvrtc_names, after CUABI_NVFATBIN_PATH. */
const char *const cuabi__nvfatbin_names[] = {
    "libnvfatbin.so.13", "libnvfatbin.so.12",
    CUABI_CUDA_LIBDIR "/libnvfatbin.so.13", CUABI_CUDA_LIBDIR "/libnvfatbin.so.12", NULL };

/* The version, asked through the table like every other call (so a fake's,
 * or one made to fail by tests/fixtures/fault_wrap.h). A failed query leaves it 0,
 * unknown: packing does not need it, so nvFatbin stays usable. */
static void nvfatbin_record_version(void)
{
    unsigned major = 0, minor = 0;
    bool ok = nvfatbin.nvFatbinVersion && nvfatbin.nvFatbinVersion(&major, &minor) == 0;
    fatbin_lib.info.version = ok ? (int)(major * 1000 + minor * 10) : 0;
}

static int load_nvfatbin(void)
{
    loaded_lib *lib = &fatbin_lib;
    lib->fail_status = CUABI_ERROR_NOT_SUPPORTED;
    void *dl = open_first(lib, "CUABI_NVFATBIN_PATH", cuabi__nvfatbin_names);
    if (!dl)
        return -1;
    const char *missing = NULL;
#define RESOLVE(name, ret, params)                                            \
    nvfatbin.name = (__typeof__(nvfatbin.name))dlsym(dl, #name);               \
    if (!nvfatbin.name && !missing) missing = #name;
    CUABI__NVFATBIN_FUNCS(RESOLVE)
#undef RESOLVE
    if (missing) {
        snprintf(lib->info.error, sizeof lib->info.error, "%.900s lacks %s", lib->info.path,
                 missing);
        memset(&nvfatbin, 0, sizeof nvfatbin);
        dlclose(dl);
        return -1;
    }
    nvfatbin_record_version();
    lib->dl = dl;
    return 1;
}

cuabi_status cuabi__nvfatbin_get_for(const cuabi__nvfatbin **out, const char *caller)
{
    cuabi_status st = ensure(&fatbin_lib, load_nvfatbin, "nvFatbin", caller);
    *out = &nvfatbin;
    return st;
}

const cuabi__lib_info *cuabi__nvfatbin_info(void) { return &fatbin_lib.info; }
cuabi__nvfatbin *cuabi__nvfatbin_for_test(void) { return &nvfatbin; }

void cuabi__nvfatbin_install_fake(const cuabi__nvfatbin *fake)
{
    pthread_mutex_lock(&fatbin_lib.lock);
    if (fatbin_lib.dl)
        dlclose(fatbin_lib.dl);
    fatbin_lib.dl = NULL;
    memset(&fatbin_lib.info, 0, sizeof fatbin_lib.info);
    if (fake) {
        nvfatbin = *fake;
        fatbin_lib.info.loaded = 1;
        snprintf(fatbin_lib.info.path, sizeof fatbin_lib.info.path, "(fake nvFatbin)");
        nvfatbin_record_version();
    } else {
        memset(&nvfatbin, 0, sizeof nvfatbin);
    }
    atomic_store(&fatbin_lib.state, fake ? 1 : 0);
    pthread_mutex_unlock(&fatbin_lib.lock);
}

/* ------------------------------------------------------------------- info */

const cuabi__lib_info *cuabi__driver_info(void) { return &driver_lib.info; }
const cuabi__lib_info *cuabi__nvrtc_info(void) { return &nvrtc_lib.info; }
const cuabi__lib_info *cuabi__nvjitlink_info(void) { return &jit_lib.info; }

/* Loaded, without trying to load: the cache asks this on every compile. */
bool cuabi__nvrtc_loaded(void)
{
    return atomic_load_explicit(&nvrtc_lib.state, memory_order_acquire) == 1;
}
bool cuabi__nvjitlink_loaded(void)
{
    return atomic_load_explicit(&jit_lib.state, memory_order_acquire) == 1;
}

/* ----------------------------------------------------------- error helpers */

cuabi_status cuabi__missing_entry(const char *entry, const char *caller)
{
    return cuabi__error(CUABI_ERROR_ENTRY_POINT_NOT_FOUND,
                        "%s: the loaded CUDA driver (version %d) does not "
                        "provide %s; update the NVIDIA driver",
                        caller, driver_lib.info.version, entry);
}

CUABI__HOT cuabi_status cuabi__cu_check(CUresult r, const char *entry, const char *caller)
{
    if (CUABI__UNLIKELY(r != CUDA_SUCCESS)) {
        const char *name = NULL, *text = NULL;
        if (drv.cuGetErrorName)
            drv.cuGetErrorName(r, &name);
        if (drv.cuGetErrorString)
            drv.cuGetErrorString(r, &text);
        /* Stream-capture errors (900..908) and a failed graph update have
         * statuses of their own (graphs). */
        bool capture = r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
                       r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
        cuabi_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? CUABI_ERROR_DEVICE_OUT_OF_MEMORY
                        : r == CUDA_ERROR_NOT_READY ? CUABI_ERROR_NOT_READY
                        : capture ? CUABI_ERROR_STREAM_CAPTURE
                        : r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? CUABI_ERROR_GRAPH_UPDATE
                        : CUABI_ERROR_CUDA;
        cuabi__error(st, "%s: %s failed with %s (%d): %s%s", caller, entry,
                     name ? name : "CUDA error", (int)r, text ? text : "",
                     r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                         ? " (a call that synchronises, or work on the legacy default stream, "
                           "while a stream is being captured; the capture is now invalid: end "
                           "it and capture again without that call)"
                     : r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                         ? " (an earlier call broke the capture; end it and capture again)"
                         : "");
        cuabi__error_set_cu((int)r);
        return st;
    }
    return CUABI_SUCCESS;
}

/* ---------------------------------------------------------- fault injection */

_Atomic int cuabi__faults_armed;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static char fault_entry[128];
static long fault_countdown;
static bool fault_sticky;
static CUresult fault_code;
static long fault_fired;

void cuabi__fault_arm(const char *entry, long n, bool sticky, CUresult result)
{
    pthread_mutex_lock(&fault_lock);
    snprintf(fault_entry, sizeof fault_entry, "%s", entry ? entry : "");
    fault_countdown = n;
    fault_sticky = sticky;
    fault_code = result;
    fault_fired = 0;
    atomic_store(&cuabi__faults_armed, n > 0);
    pthread_mutex_unlock(&fault_lock);
}

bool cuabi__fault_fires(const char *entry)
{
    bool fire = false;
    pthread_mutex_lock(&fault_lock);
    if (fault_countdown > 0 && (!fault_entry[0] || strcmp(fault_entry, entry) == 0)) {
        if (fault_countdown == 1) {
            fire = true;
            fault_fired++;
            if (!fault_sticky) {
                fault_countdown = 0;
                atomic_store(&cuabi__faults_armed, 0);
            }
        } else {
            fault_countdown--;
        }
    }
    pthread_mutex_unlock(&fault_lock);
    return fire;
}

CUresult cuabi__fault_result(void) { return fault_code; }

long cuabi__fault_count(void)
{
    pthread_mutex_lock(&fault_lock);
    long n = fault_fired;
    pthread_mutex_unlock(&fault_lock);
    return n;
}
