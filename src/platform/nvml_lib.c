/* Loading NVML: see nvml_lib.h. */
#include "platform/nvml_lib.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file the loader opens without CUABI_NVML_PATH: the driver installs
 * it in the loader's search path (the toolkit has only a stub that
 * refuses every call). */
static const char nvml_name[] = "libnvidia-ml.so.1";

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int state; /* 0 not tried, 1 loaded, -1 failed */
static void *dl;
static cuabi__nvml nvml;
static cuabi__lib_info info;

/* nvmlReturn_t names, for messages (nvml.h's numbers). */
static const char *const return_names[] = {
    "NVML_SUCCESS", "NVML_ERROR_UNINITIALIZED", "NVML_ERROR_INVALID_ARGUMENT",
    "NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_ALREADY_INITIALIZED",
    "NVML_ERROR_NOT_FOUND", "NVML_ERROR_INSUFFICIENT_SIZE", "NVML_ERROR_INSUFFICIENT_POWER",
    "NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_TIMEOUT", "NVML_ERROR_IRQ_ISSUE",
    "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_CORRUPTED_INFOROM", "NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED",
    "NVML_ERROR_OPERATING_SYSTEM", "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "NVML_ERROR_IN_USE",
    "NVML_ERROR_MEMORY", "NVML_ERROR_NO_DATA", "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
    "NVML_ERROR_INSUFFICIENT_RESOURCES", "NVML_ERROR_FREQ_NOT_SUPPORTED",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "NVML_ERROR_DEPRECATED", "NVML_ERROR_NOT_READY",
    "NVML_ERROR_GPU_NOT_FOUND", "NVML_ERROR_INVALID_STATE",
};

void cuabi__nvml_describe(char *out, size_t cap, cuabi__nvml_return r)
{
    const char *name = r >= 0 && (size_t)r < sizeof return_names / sizeof *return_names
                           ? return_names[r]
                       : r == CUABI__NVML_ERROR_UNKNOWN ? "NVML_ERROR_UNKNOWN"
                                                        : "an nvmlReturn_t unknown to cuabi";
    /* NVML's own words, where the library says something printable. */
    const char *words = nvml.nvmlErrorString ? nvml.nvmlErrorString(r) : NULL;
    char text[128] = "";
    for (size_t i = 0; words && words[i] && i + 1 < sizeof text; i++) {
        unsigned char c = (unsigned char)words[i];
        text[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
        text[i + 1] = '\0';
    }
    if (text[0])
        snprintf(out, cap, "%s (%s, %d)", text, name, r);
    else
        snprintf(out, cap, "%s (%d)", name, r);
}

cuabi_status cuabi__nvml_fail(cuabi__nvml_return r, const char *entry, const char *caller)
{
    char why[256];
    cuabi__nvml_describe(why, sizeof why, r);
    cuabi_status st = cuabi__error(CUABI_ERROR_NVML, "%s: %s failed: %s", caller, entry, why);
    cuabi__error_set_nvml(r);
    return st;
}

static void *open_nvml(void)
{
    const char *override = getenv("CUABI_NVML_PATH");
    const char *name = override && *override ? override : nvml_name;
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        if (override && *override)
            snprintf(info.error, sizeof info.error, "CUABI_NVML_PATH=%.900s could not be "
                     "loaded: %.900s", override, why ? why : "?");
        else
            snprintf(info.error, sizeof info.error, "%s could not be loaded (%.900s); it comes "
                     "with the NVIDIA driver (set CUABI_NVML_PATH to use another file)",
                     nvml_name, why ? why : "?");
        return NULL;
    }
    struct link_map *map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
        snprintf(info.path, sizeof info.path, "%s", map->l_name);
    else
        snprintf(info.path, sizeof info.path, "%s", name);
    return h;
}

static int load(void)
{
    void *h = open_nvml();
    if (!h)
        return -1;
    const char *missing = NULL;
#define RESOLVE(name, params, args, req)                                          \
    nvml.name = (__typeof__(nvml.name))dlsym(h, #name);                        \
    if (!nvml.name && req && !missing) missing = #name;
    CUABI__NVML_FUNCS(RESOLVE)
#undef RESOLVE
    nvml.nvmlErrorString = (__typeof__(nvml.nvmlErrorString))dlsym(h, "nvmlErrorString");
    if (missing) {
        snprintf(info.error, sizeof info.error, "%.900s lacks %.100s: is it NVML "
                 "(libnvidia-ml.so.1)?", info.path, missing);
        memset(&nvml, 0, sizeof nvml);
        dlclose(h);
        return -1;
    }
    cuabi__nvml_return r = nvml.nvmlInit_v2();
    if (r != CUABI__NVML_SUCCESS) {
        char why[256];
        cuabi__nvml_describe(why, sizeof why, r);
        snprintf(info.error, sizeof info.error, "nvmlInit_v2 of %.900s failed: %s%s", info.path,
                 why, r == CUABI__NVML_ERROR_DRIVER_NOT_LOADED
                          ? " (is the NVIDIA kernel driver loaded?)" : "");
        /* Kept open: NVML may have mapped what it could; nothing of it
         * is called again but nvmlErrorString. */
        dl = h;
        return -1;
    }
    dl = h;
    return 1;
}

cuabi_status cuabi__nvml_get_for(const cuabi__nvml **out, const char *caller)
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
    *out = &nvml;
    if (s == 1)
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: NVML not available: %s", caller,
                        info.error);
}

bool cuabi__nvml_loaded(void) { return atomic_load_explicit(&state, memory_order_acquire) == 1; }

const cuabi__lib_info *cuabi__nvml_info(void) { return &info; }

cuabi__nvml *cuabi__nvml_for_test(void) { return &nvml; }

void cuabi__nvml_reset_for_test(void)
{
    pthread_mutex_lock(&lock);
    if (atomic_load(&state) == 1 && nvml.nvmlShutdown)
        nvml.nvmlShutdown();
    /* Forgotten, not closed: a library's one-time allocations keep its
     * name for the sanitizer's suppressions (as nvvm_lib.c does). */
    dl = NULL;
    memset(&nvml, 0, sizeof nvml);
    memset(&info, 0, sizeof info);
    atomic_store(&state, 0);
    pthread_mutex_unlock(&lock);
}

void cuabi__nvml_install_fake(const cuabi__nvml *fake)
{
    pthread_mutex_lock(&lock);
    memset(&info, 0, sizeof info);
    if (fake) {
        nvml = *fake;
        snprintf(info.path, sizeof info.path, "(fake NVML)");
        info.loaded = 1;
        atomic_store(&state, 1);
    } else {
        memset(&nvml, 0, sizeof nvml);
        atomic_store(&state, 0);
    }
    dl = NULL;
    pthread_mutex_unlock(&lock);
}
