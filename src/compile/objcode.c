/* Object code: an image in memory, loaded lazily into the driver as a
 * context-independent CUlibrary, with an offline (ELF) view for queries
 * that need no GPU. */
#include "platform/release.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compile/code_type.h"
#include "compile/fatbin.h"
#include "compile/jitlink.h"
#include "compile/objcode.h"
#include "compile/param_types.h"
#include "util/file.h"
#include "util/heap.h"

/* The default target of offline compiles when no GPU says otherwise. */
#define DEFAULT_OFFLINE_ARCH "sm_90"

static cuabi_code_type type_from_extension(const char *path)
{
    static const struct { const char *ext; cuabi_code_type type; } table[] = {
        { ".cubin", CUABI_CODE_CUBIN }, { ".ptx", CUABI_CODE_PTX },
        { ".ltoir", CUABI_CODE_LTOIR }, { ".fatbin", CUABI_CODE_FATBIN },
        { ".o", CUABI_CODE_OBJECT }, { ".a", CUABI_CODE_LIBRARY },
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(dot, table[i].ext) == 0)
            return table[i].type;
    return CUABI_CODE_NONE;
}

/* ------------------------------------------------------------ lifetime */

static void free_names(cuabi__objcode *o)
{
    if (!o->shared) {
        for (size_t i = 0; i < o->name_count; i++) {
            cuabi__free(o->names[i].expression);
            cuabi__free(o->names[i].lowered);
        }
        cuabi__free((void *)o->names);
    }
    for (size_t i = 0; i < o->driver_kernel_count; i++)
        cuabi__free(o->driver_kernels[i]);
    cuabi__free(o->driver_kernels);
}

static void objcode_free(cuabi__objcode *o)
{
    free_names(o);
    cuabi__elf_free(o->elf);
    cuabi__free(o->offline_cubin);
    cuabi__free(o->jit_log);
    cuabi__free(o->signatures);
    if (o->shared)
        cuabi__codeblob_release(o->shared);
    else
        cuabi__free((void *)o->data);
    pthread_mutex_destroy(&o->lock);
    cuabi__free(o);
}

static void objcode_destroy(cuabi__object *base)
{
    cuabi__objcode *o = (cuabi__objcode *)base;
    const cuabi__driver *drv;
    if (o->loaded && cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuLibraryUnload)
        CUABI__CU_RELEASE(drv, cuLibraryUnload, o->library);
    objcode_free(o);
}

/* Check `type` against the bytes; NONE becomes the detected type. */
static cuabi_status check_type(cuabi_code_type *type, const void *data, size_t size,
                               const char *what, const char *caller)
{
    cuabi_code_type found = cuabi__code_detect(data, size);
    if (*type == CUABI_CODE_NONE) {
        if (found == CUABI_CODE_NONE)
            return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                                "%s: cannot tell what kind of code %s is (not a CUBIN, fatbin, "
                                "LTO-IR or PTX); pass its cuabi_code_type", caller, what);
        *type = found;
    }
    switch (*type) {
    case CUABI_CODE_CUBIN: case CUABI_CODE_FATBIN: case CUABI_CODE_LTOIR:
        if (found != *type)
            return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                                "%s: %s is not a %s image (its first bytes are %s)", caller,
                                what, cuabi__code_type_name(*type),
                                found == CUABI_CODE_NONE ? "unrecognised"
                                                         : cuabi__code_type_name(found));
        return CUABI_SUCCESS;
    case CUABI_CODE_PTX:
        if (found != CUABI_CODE_PTX && found != CUABI_CODE_NONE)
            return cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: %s is a %s image, not PTX",
                                caller, what, cuabi__code_type_name(found));
        if (memchr(data, 0, size) && strnlen(data, size) + 1 < size)
            return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                                "%s: PTX %s has a NUL byte before its end (wrong size?)",
                                caller, what);
        return CUABI_SUCCESS;
    case CUABI_CODE_OBJECT:      /* nvJitLink's inputs: an ELF object, an archive */
        if (found != CUABI_CODE_OBJECT && found != CUABI_CODE_CUBIN)
            return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                                "%s: %s is not an ELF object (its first bytes are %s)", caller,
                                what, found == CUABI_CODE_NONE ? "unrecognised"
                                                               : cuabi__code_type_name(found));
        return CUABI_SUCCESS;
    case CUABI_CODE_LIBRARY:
        if (found != CUABI_CODE_LIBRARY)
            return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                                "%s: %s is not a library archive (no \"!<arch>\" header)",
                                caller, what);
        return CUABI_SUCCESS;
    default:
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: an objcode holds CUBIN, PTX, fatbin, LTO-IR, an object or a "
                            "library, not %s (type %d)",
                            caller, cuabi__code_type_name(*type), (int)*type);
    }
}

/* The driver and nvJitLink want PTX NUL-terminated: bytes the objcode
 * owns get a NUL past their size (a shared result has one already). */
static cuabi_status terminate_ptx(cuabi__objcode *o)
{
    char *p = cuabi__realloc((void *)o->data, o->size + 1);
    if (!p)
        return CUABI_ERROR_OUT_OF_MEMORY;
    p[o->size] = '\0';
    o->data = p;
    return CUABI_SUCCESS;
}

/* A new objcode named `name` (copied into it), with no bytes yet. */
static cuabi__objcode *objcode_alloc(const char *name)
{
    size_t n = strlen(name ? name : "<memory>") + 1;
    cuabi__objcode *o = cuabi__calloc(1, sizeof *o + n);
    if (o) {
        pthread_mutex_init(&o->lock, NULL);
        memcpy(o->name, name ? name : "<memory>", n);
    }
    return o;
}

/* Check the bytes, parse a CUBIN when `parse_now`, register; `o` is freed
 * on failure. */
static cuabi_status objcode_finish(cuabi__objcode **out, cuabi__objcode *o, cuabi_code_type type,
                                   bool parse_now)
{
    static const char caller[] = "cuabi_objcode";
    cuabi_status st = check_type(&type, o->data, o->size, o->name, caller);
    o->type = type;
    if (st == CUABI_SUCCESS && type == CUABI_CODE_PTX && !o->shared)
        st = terminate_ptx(o);
    /* A CUBIN is parsed now: a malformed one fails here, not at first use. */
    if (st == CUABI_SUCCESS && type == CUABI_CODE_CUBIN && parse_now)
        st = cuabi__elf_parse(&o->elf, o->data, o->size, caller, o->name);
    if (st == CUABI_SUCCESS)
        st = cuabi__handle_register(&o->base, CUABI__T_OBJCODE, objcode_destroy);
    if (st != CUABI_SUCCESS) {
        objcode_free(o);
        return st;
    }
    *out = o;
    return CUABI_SUCCESS;
}

static cuabi_status objcode_create(cuabi__objcode **out, cuabi_code_type type, void *data,
                                   size_t size, const char *name, bool parse_now)
{
    *out = NULL;
    cuabi__objcode *o = objcode_alloc(name);
    if (!o) {
        cuabi__free(data);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    o->data = data;
    o->size = size;
    return objcode_finish(out, o, type, parse_now);
}

cuabi_status cuabi__objcode_new(cuabi__objcode **out, cuabi_code_type type, void *data,
                                size_t size, const char *name)
{
    return objcode_create(out, type, data, size, name, true);
}

cuabi_status cuabi__objcode_new_trusted(cuabi__objcode **out, cuabi_code_type type, void *data,
                                        size_t size, const char *name)
{
    return objcode_create(out, type, data, size, name, false);
}

cuabi_status cuabi__objcode_new_shared(cuabi__objcode **out, cuabi__codeblob *b,
                                       const char *name)
{
    *out = NULL;
    cuabi__objcode *o = objcode_alloc(name);
    if (!o)
        return CUABI_ERROR_OUT_OF_MEMORY;
    o->shared = cuabi__codeblob_retain(b);
    o->data = b->data;
    o->size = b->size;
    o->names = b->names;
    o->name_count = b->num_names;
    o->signatures_ready = b->signatures != NULL; /* else read from the image when asked */
    return objcode_finish(out, o, b->type, false);
}

/* A CUBIN's parsed ELF, parsed at the first need when the objcode was
 * created trusted. */
static cuabi_status cubin_elf(cuabi__objcode *o, const cuabi__elf_info **out, const char *caller)
{
    pthread_mutex_lock(&o->lock);
    cuabi_status st = o->elf ? CUABI_SUCCESS
                             : cuabi__elf_parse(&o->elf, o->data, o->size, caller, o->name);
    *out = o->elf;
    pthread_mutex_unlock(&o->lock);
    return st;
}

cuabi_status cuabi__objcode_add_name(cuabi__objcode *o, const char *name_expression,
                                     const char *lowered_name)
{
    if (!name_expression || !lowered_name)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: NULL name", __func__);
    char *e = cuabi__strdup(name_expression), *l = cuabi__strdup(lowered_name);
    pthread_mutex_lock(&o->lock);
    cuabi__name_entry *n = e && l ? cuabi__realloc((void *)o->names,
                                                   (o->name_count + 1) * sizeof *n)
                                  : NULL;
    if (n) {
        o->names = n;
        n[o->name_count++] = (cuabi__name_entry){ e, l };
    }
    pthread_mutex_unlock(&o->lock);
    if (!n) {
        cuabi__free(e);
        cuabi__free(l);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    return CUABI_SUCCESS;
}

static bool word_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* The next character of a name expression with insignificant white space
 * dropped: a run of spaces counts only between two word characters
 * ("unsigned int"), and then as one space. 0 at the end. */
static int canon_next(const char **p, int *prev)
{
    const char *s = *p;
    bool space = false;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++, space = true;
    *p = s;
    if (!*s)
        return 0;
    if (space && word_char(*prev) && word_char((unsigned char)*s)) {
        *prev = ' ';
        return ' ';
    }
    *prev = (unsigned char)*s;
    *p = s + 1;
    return (unsigned char)*s;
}

/* "t<float,4>" is "t<float, 4>": NVRTC registers expressions as written,
 * users write them either way. */
bool cuabi__same_expression(const char *a, const char *b)
{
    int pa = 0, pb = 0;
    for (;;) {
        int ca = canon_next(&a, &pa), cb = canon_next(&b, &pb);
        if (ca != cb)
            return false;
        if (!ca)
            return true;
    }
}

const char *cuabi__name_lookup(const cuabi__name_entry *names, size_t n, const char *expr)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i].expression, expr) == 0)
            return names[i].lowered;
    for (size_t i = 0; i < n; i++)
        if (cuabi__same_expression(names[i].expression, expr))
            return names[i].lowered;
    return NULL;
}

/* Names are only added while the creator holds the only reference (before
 * handing the objcode out; a shared result's never change), so reads need
 * no lock. */
static const char *lookup_name(const cuabi__objcode *o, const char *expr)
{
    return cuabi__name_lookup(o->names, o->name_count, expr);
}

/* "; name expressions: \"a\", \"b\"" of the registered expressions, or "". */
static void list_expressions(const cuabi__objcode *o, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < o->name_count && used + 1 < len; i++) {
        int n = snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "; name expressions: ",
                         o->names[i].expression);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

const char *cuabi__objcode_resolve_name(cuabi__objcode *o, const char *name)
{
    const char *lowered = lookup_name(o, name);
    return lowered ? lowered : name;
}

void cuabi__objcode_set_signatures(cuabi__objcode *o, char *sigs)
{
    cuabi__free(o->signatures);
    o->signatures = sigs;
    o->signatures_ready = true;
}

/* A fatbin made elsewhere: the signatures of its first readable PTX image,
 * if it has one (a malformed fatbin has none; only running out of memory
 * fails). */
static cuabi_status fatbin_signatures(cuabi__objcode *o)
{
    cuabi__fatbin f;
    if (cuabi__fatbin_parse(&f, o->data, o->size, o->name, "cuabi_objcode") != CUABI_SUCCESS) {
        cuabi_error_clear();
        return CUABI_SUCCESS;
    }
    cuabi_status st = CUABI_SUCCESS;
    for (size_t i = 0; i < f.count; i++) {
        const cuabi__fatbin_image *m = &f.images[i];
        if (m->type == CUABI_CODE_PTX && !m->compressed) {
            st = cuabi__ptx_signatures(&o->signatures, (const char *)m->data,
                                       strnlen((const char *)m->data, m->size));
            break;
        }
    }
    cuabi__fatbin_free(&f);
    return st;
}

cuabi_status cuabi__objcode_signatures(cuabi__objcode *o, const char **out)
{
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&o->lock);
    if (!o->signatures_ready) {
        if (o->type == CUABI_CODE_PTX)
            st = cuabi__ptx_signatures(&o->signatures, o->data, o->size);
        else if (o->type == CUABI_CODE_FATBIN)
            st = fatbin_signatures(o);
        o->signatures_ready = st == CUABI_SUCCESS;
    }
    /* Ready with none of its own: the shared result's. */
    *out = o->signatures ? o->signatures : o->shared ? o->shared->signatures : NULL;
    pthread_mutex_unlock(&o->lock);
    return st;
}

/* ------------------------------------------------------------ loading */

/* Results that say the image itself is unusable here. At load time the
 * driver also answers CUDA_ERROR_INVALID_VALUE for bytes it cannot parse. */
static bool is_image_error(CUresult r)
{
    return r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX ||
           r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
           r == CUDA_ERROR_INVALID_SOURCE || r == CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND ||
           r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND;
}

enum { JIT_LOG_SIZE = 16384 };

static cuabi_status image_error(cuabi__objcode *o, const cuabi__driver *drv, CUresult r,
                                const char *api, const char *caller)
{
    const char *ename = NULL, *estr = NULL;
    if (drv->cuGetErrorName)
        drv->cuGetErrorName(r, &ename);
    if (drv->cuGetErrorString)
        drv->cuGetErrorString(r, &estr);
    const char *hint =
        r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
            ? " (the PTX is newer than this driver: update the driver or compile to a CUBIN)"
        : r == CUDA_ERROR_NO_BINARY_FOR_GPU
            ? " (no code for this GPU's architecture: compile for it, or include PTX)"
        : r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND
            ? " (the driver's PTX JIT compiler is missing: compile to a CUBIN)" : "";
    /* Copy the log: the driver may write it again on a later lookup. */
    char *log = o->jit_log ? cuabi__malloc(JIT_LOG_SIZE) : NULL;
    size_t n = 0;
    if (log) {
        memcpy(log, o->jit_log, JIT_LOG_SIZE);
        log[JIT_LOG_SIZE - 1] = '\0';
        n = strlen(log);
        while (n && (log[n - 1] == '\n' || log[n - 1] == ' '))
            log[--n] = '\0';
    }
    cuabi_status st = cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                                   "%s: the driver rejected %s %s (%s failed with %s (%d): %s)%s%s%s",
                                   caller, cuabi__code_type_name(o->type), o->name, api,
                                   ename ? ename : "error", (int)r, estr ? estr : "", hint,
                                   n ? ": " : "", n ? log : "");
    cuabi__error_set_cu((int)r);
    if (n)
        cuabi__error_set_log(log, n);
    cuabi__free(log);
    return st;
}

CUABI__HOT
cuabi_status cuabi__objcode_cu_check(cuabi__objcode *o, const cuabi__driver *drv, CUresult r,
                                     const char *api, const char *caller)
{
    if (r != CUDA_SUCCESS && is_image_error(r))
        return image_error(o, drv, r, api, caller);
    return cuabi__cu_check(r, api, caller);
}

cuabi_status cuabi__objcode_loadable(const cuabi__objcode *o, const char *caller)
{
    if (o->type == CUABI_CODE_OBJECT || o->type == CUABI_CODE_LIBRARY)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: %s is %s: it is linked (cuabi_linker_add_objcode), not loaded",
                            caller, o->name,
                            o->type == CUABI_CODE_OBJECT ? "an object" : "a library");
    return CUABI_SUCCESS;
}

static cuabi_status load_locked(cuabi__objcode *o, const cuabi__driver *drv, const char *caller)
{
    CUABI__TRY(cuabi__objcode_loadable(o, caller));
    if (!drv->cuLibraryLoadData)
        return cuabi__missing_entry("cuLibraryLoadData", caller);
    if (!o->jit_log && !(o->jit_log = cuabi__calloc(1, JIT_LOG_SIZE)))
        return CUABI_ERROR_OUT_OF_MEMORY;
    CUjit_option opt[2] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *val[2] = { o->jit_log, (void *)(uintptr_t)JIT_LOG_SIZE };
    CUlibrary lib = NULL;
    CUresult r = CUABI__CU_RAW(drv, cuLibraryLoadData, &lib, o->data, opt, val, 2, NULL, NULL, 0);
    if (r == CUDA_ERROR_INVALID_VALUE)
        return image_error(o, drv, r, "cuLibraryLoadData", caller);
    CUABI__TRY(cuabi__objcode_cu_check(o, drv, r, "cuLibraryLoadData", caller));
    /* With lazy loading (the default) the driver has not even parsed the
     * image yet; counting its kernels makes it, so a broken image fails
     * here with its JIT log rather than at some later lookup. */
    if (drv->cuLibraryGetKernelCount) {
        unsigned int n;
        r = CUABI__CU_RAW(drv, cuLibraryGetKernelCount, &n, lib);
        if (r != CUDA_SUCCESS) {
            cuabi_status st = cuabi__objcode_cu_check(o, drv, r, "cuLibraryGetKernelCount", caller);
            if (drv->cuLibraryUnload)
                CUABI__CU_RELEASE(drv, cuLibraryUnload, lib);
            return st;
        }
    }
    o->library = lib;
    o->loaded = true;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__objcode_library(cuabi__objcode *o, const cuabi__driver *drv,
                                    CUlibrary *out, const char *caller)
{
    pthread_mutex_lock(&o->lock);
    bool loading = !o->loaded;
    cuabi_status st = loading ? load_locked(o, drv, caller) : CUABI_SUCCESS;
    *out = o->library;
    pthread_mutex_unlock(&o->lock);
    /* This call loaded code: the driver's first graphs come next
     * (util/heap.c says why this helps them; once per process, outside the
     * objcode's lock, and not on the calls that find the code loaded). */
    if (loading && st == CUABI_SUCCESS)
        cuabi__heap_reserve();
    return st;
}

/* ------------------------------------------------------------ offline view */

/* The architecture for offline compiles: the caller's, else device 0's
 * when a GPU is there, else sm_90. */
void cuabi__default_arch(char *buf, size_t len)
{
    const cuabi__driver *drv;
    int n = 0, major = 0, minor = 0;
    CUdevice dev;
    if (cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuDeviceGetCount &&
        CUABI__CU_RAW(drv, cuDeviceGetCount, &n) == CUDA_SUCCESS && n > 0 && drv->cuDeviceGet &&
        CUABI__CU_RAW(drv, cuDeviceGet, &dev, 0) == CUDA_SUCCESS && drv->cuDeviceGetAttribute &&
        CUABI__CU_RAW(drv, cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == 0 &&
        CUABI__CU_RAW(drv, cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == 0 &&
        major > 0) {
        snprintf(buf, len, "sm_%d%d", major, minor);
    } else {
        snprintf(buf, len, "%s", DEFAULT_OFFLINE_ARCH);
    }
    cuabi_error_clear();
}

static cuabi_status check_arch(const char *arch, const char *caller)
{
    size_t n = strlen(arch);
    /* Two digits at least: nvJitLink exit()s the process on "-arch=sm_8f". */
    bool ok = n >= 5 && n < 16 && strncmp(arch, "sm_", 3) == 0 && arch[3] >= '1' &&
              arch[3] <= '9' && arch[4] >= '0' && arch[4] <= '9';
    for (size_t i = 4; ok && i < n; i++)
        ok = (arch[i] >= '0' && arch[i] <= '9') || (i == n - 1 && (arch[i] == 'a' || arch[i] == 'f'));
    if (!ok)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: architecture '%s' is not of the form sm_XY (e.g. sm_90)", caller,
                            arch);
    return CUABI_SUCCESS;
}

/* Compile a PTX/LTO-IR image to a CUBIN and parse it. */
static cuabi_status offline_build(cuabi__objcode *o, const char *arch, void **cubin,
                                  cuabi__elf_info **elf, const char *caller)
{
    size_t size = 0;
    *cubin = NULL;
    *elf = NULL;
    if (o->type == CUABI_CODE_FATBIN) /* its CUBIN for arch, or its PTX compiled */
        CUABI__TRY(cuabi__fatbin_cubin_for(cubin, &size, o->data, o->size, o->name, arch, caller));
    else if (o->type != CUABI_CODE_PTX && o->type != CUABI_CODE_LTOIR)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: offline queries on a %s objcode (%s) are not supported; "
                            "use a CUBIN, PTX, LTO-IR or fatbin image, or query through a GPU",
                            caller, cuabi__code_type_name(o->type), o->name);
    else
        CUABI__TRY(cuabi__link_to_cubin(cubin, &size, o->type, o->data, o->size, o->name, arch,
                                        caller));
    cuabi_status st = cuabi__elf_parse(elf, *cubin, size, caller, o->name);
    if (st != CUABI_SUCCESS) {
        cuabi__free(*cubin);
        *cubin = NULL;
    }
    return st;
}

/* A fatbin's offline view without an architecture: the device's (`want`)
 * when the fatbin has a CUBIN for it, else its newest CUBIN's (or PTX's). */
static void fatbin_default_arch(const cuabi__objcode *o, char *want, size_t len)
{
    unsigned dev = (unsigned)strtoul(want + 3, NULL, 10), best = 0;
    cuabi__fatbin f;
    if (cuabi__fatbin_parse(&f, o->data, o->size, o->name, "cuabi_objcode") != CUABI_SUCCESS) {
        cuabi_error_clear(); /* the query itself reports the defect */
        return;
    }
    for (size_t i = 0; i < f.count && best != dev; i++)
        if (f.images[i].type == CUABI_CODE_CUBIN)
            best = f.images[i].arch == dev || f.images[i].arch > best ? f.images[i].arch : best;
    cuabi__fatbin_free(&f);
    if (!best)
        best = cuabi__fatbin_best_arch(o->data, o->size);
    if (best)
        snprintf(want, len, "sm_%u", best);
}

/* Resources of a fatbin's kernel for an architecture other than that of
 * its kept offline view: from a view made for the purpose. */
static cuabi_status fatbin_resources(cuabi_kernel_resources *out, cuabi__objcode *o,
                                     const char *name, const char *arch, const char *caller)
{
    void *cubin;
    cuabi__elf_info *elf;
    CUABI__TRY(offline_build(o, arch, &cubin, &elf, caller));
    const cuabi__elf_kernel *k = cuabi__elf_find(elf, cuabi__objcode_resolve_name(o, name));
    cuabi_status st = k ? cuabi__elf_copy_resources(out, k, caller) : cuabi__objcode_not_found(o, elf, name, caller);
    cuabi__elf_free(elf);
    cuabi__free(cubin);
    return st;
}

cuabi_status cuabi__objcode_elf(cuabi__objcode *o, const char *arch,
                                const cuabi__elf_info **out, const char *caller)
{
    if (o->type == CUABI_CODE_CUBIN)
        return cubin_elf(o, out, caller); /* immutable once parsed */
    char want[16];
    if (arch) {
        CUABI__TRY(check_arch(arch, caller));
        snprintf(want, sizeof want, "%s", arch);
    } else {
        cuabi__default_arch(want, sizeof want);
        if (o->type == CUABI_CODE_FATBIN)
            fatbin_default_arch(o, want, sizeof want);
    }
    pthread_mutex_lock(&o->lock);
    cuabi_status st = CUABI_SUCCESS;
    if (!o->elf) {
        st = offline_build(o, want, &o->offline_cubin, &o->elf, caller);
        if (st == CUABI_SUCCESS)
            snprintf(o->offline_arch, sizeof o->offline_arch, "%s", want);
    } else if (strcmp(o->offline_arch, want) != 0) {
        /* Another architecture: not cached (rare); the caller frees it via
         * the objcode's scratch list would be overkill, so refuse politely. */
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                          "%s: %s was already compiled for %s for offline queries; "
                          "link it for %s with cuabi_linker to query that architecture",
                          caller, o->name, o->offline_arch, want);
    }
    *out = o->elf;
    pthread_mutex_unlock(&o->lock);
    return st;
}

/* ------------------------------------------------------------ public API */

CUABI_EXTERN(cuabi_status) cuabi_objcode_from_memory(cuabi_objcode **out, cuabi_code_type type,
                                                     const void *data, size_t size,
                                                     const char *name)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(data, "%s: data is NULL", __func__);
    CUABI__CHECK_ARG(size > 0, "%s: size is 0", __func__);
    CUABI__CHECK_ARG((unsigned)type <= CUABI_CODE_NVVM, "%s: unknown code type %d", __func__,
                     (int)type);
    void *copy = cuabi__malloc(size);
    if (!copy)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memcpy(copy, data, size);
    cuabi__objcode *o;
    CUABI__TRY(cuabi__objcode_new(&o, type, copy, size, name));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_from_file(cuabi_objcode **out, cuabi_code_type type,
                                                   const char *path)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(path, "%s: path is NULL", __func__);
    CUABI__CHECK_ARG((unsigned)type <= CUABI_CODE_NVVM, "%s: unknown code type %d", __func__,
                     (int)type);
    void *data;
    size_t size;
    CUABI__TRY(cuabi__read_file(path, &data, &size, __func__));
    if (size == 0) {
        cuabi__free(data);
        return cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: '%s' is empty", __func__, path);
    }
    if (type == CUABI_CODE_NONE && cuabi__code_detect(data, size) == CUABI_CODE_NONE)
        type = type_from_extension(path);
    cuabi__objcode *o;
    CUABI__TRY(cuabi__objcode_new(&o, type, data, size, path));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_code_type(cuabi_code_type *out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(o, objcode, OBJCODE);
    *out = o->type;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_bytes(const void **data, size_t *size,
                                               cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    CUABI__CHECK_ARG(data && size, "%s: data or size is NULL", __func__);
    CUABI__GET(o, objcode, OBJCODE);
    *data = o->data;
    *size = o->size;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_arch(int *out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(o, objcode, OBJCODE);
    *out = 0;
    if (o->type == CUABI_CODE_CUBIN) {
        const cuabi__elf_info *elf;
        CUABI__TRY(cubin_elf(o, &elf, __func__));
        *out = elf->arch;
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_load(cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    const cuabi__driver *drv;
    CUlibrary lib;
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__TRY(cuabi__objcode_loadable(o, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    return cuabi__objcode_library(o, drv, &lib, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_lowered_name(const char **out, cuabi_objcode *objcode,
                                                      const char *name_expression)
{
    cuabi__objcode *o;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(name_expression, "%s: name_expression is NULL", __func__);
    CUABI__GET(o, objcode, OBJCODE);
    *out = lookup_name(o, name_expression);
    if (!*out) {
        char exprs[512];
        list_expressions(o, exprs, sizeof exprs);
        return cuabi__error(CUABI_ERROR_NOT_FOUND,
                            "%s: name expression '%s' was not registered when %s was compiled "
                            "(add it to the program's name expressions%s)",
                            __func__, name_expression, o->name, exprs);
    }
    return CUABI_SUCCESS;
}

/* Kernel names through the driver (cuLibraryEnumerateKernels), once. */
static cuabi_status driver_kernel_names(cuabi__objcode *o, const char *caller)
{
    const cuabi__driver *drv;
    CUlibrary lib;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__objcode_library(o, drv, &lib, caller));
    pthread_mutex_lock(&o->lock);
    cuabi_status st = CUABI_SUCCESS;
    unsigned int n = 0;
    CUkernel *ks = NULL;
    char **names = NULL;
    if (o->driver_kernels)
        goto done;
    st = drv->cuLibraryGetKernelCount
             ? cuabi__objcode_cu_check(o, drv, CUABI__CU_RAW(drv, cuLibraryGetKernelCount, &n, lib),
                                       "cuLibraryGetKernelCount", caller)
             : cuabi__missing_entry("cuLibraryGetKernelCount", caller);
    if (st == CUABI_SUCCESS && n > 0) {
        ks = cuabi__calloc(n, sizeof *ks);
        names = cuabi__calloc(n, sizeof *names);
        st = !(ks && names) ? CUABI_ERROR_OUT_OF_MEMORY
             : drv->cuLibraryEnumerateKernels
             ? cuabi__objcode_cu_check(o, drv, CUABI__CU_RAW(drv, cuLibraryEnumerateKernels, ks, n, lib),
                                       "cuLibraryEnumerateKernels", caller)
             : cuabi__missing_entry("cuLibraryEnumerateKernels", caller);
    }
    for (unsigned i = 0; st == CUABI_SUCCESS && i < n; i++) {
        const char *kn = NULL;
        st = CUABI__CU(drv, cuKernelGetName, &kn, ks[i]);
        if (st == CUABI_SUCCESS && !(names[i] = cuabi__strdup(kn ? kn : "")))
            st = CUABI_ERROR_OUT_OF_MEMORY;
    }
    if (st == CUABI_SUCCESS) {
        if (!names && !(names = cuabi__calloc(1, sizeof *names)))
            st = CUABI_ERROR_OUT_OF_MEMORY;
        o->driver_kernels = names;
        o->driver_kernel_count = n;
        names = NULL;
    }
    for (unsigned i = 0; names && i < n; i++)
        cuabi__free(names[i]);
    cuabi__free(names);
done:
    cuabi__free(ks);
    pthread_mutex_unlock(&o->lock);
    return st;
}

/* Enumeration source: the offline view where one exists, else the driver. */
static cuabi_status kernel_list(cuabi__objcode *o, const cuabi__elf_info **elf,
                                const char *caller)
{
    *elf = NULL;
    if (o->type == CUABI_CODE_CUBIN || o->type == CUABI_CODE_PTX || o->type == CUABI_CODE_LTOIR ||
        o->type == CUABI_CODE_FATBIN) {
        cuabi_status st = cuabi__objcode_elf(o, NULL, elf, caller);
        if (st != CUABI_ERROR_NVJITLINK_NOT_FOUND)
            return st;
        /* No nvJitLink: the driver may still list them. */
    }
    return driver_kernel_names(o, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_kernel_count(size_t *out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    const cuabi__elf_info *elf;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__TRY(kernel_list(o, &elf, __func__));
    *out = elf ? elf->kernel_count : o->driver_kernel_count;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_kernel_name(const char **out, cuabi_objcode *objcode,
                                                     size_t index)
{
    cuabi__objcode *o;
    const cuabi__elf_info *elf;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__TRY(kernel_list(o, &elf, __func__));
    size_t n = elf ? elf->kernel_count : o->driver_kernel_count;
    if (index >= n)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: index %zu is out of range (%s has %zu kernels)", __func__, index,
                            o->name, n);
    *out = elf ? elf->kernels[index].name : o->driver_kernels[index];
    return CUABI_SUCCESS;
}

/* "a, b, c" of up to a few kernel names, for not-found messages. */
static void list_names(const cuabi__elf_info *elf, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; elf && i < elf->kernel_count && used + 1 < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", elf->kernels[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (!elf || elf->kernel_count == 0)
        snprintf(buf, len, "none");
}

cuabi_status cuabi__objcode_not_found(const cuabi__objcode *o, const cuabi__elf_info *elf,
                                     const char *name, const char *caller)
{
    char names[512], exprs[512];
    list_names(elf, names, sizeof names);
    list_expressions(o, exprs, sizeof exprs);
    return cuabi__error(CUABI_ERROR_NOT_FOUND,
                        "%s: no kernel '%s' in %s (kernels: %s%s); use the extern \"C\" name, "
                        "the mangled name, or a name expression registered at compile time",
                        caller, name, o->name, elf ? names : "see cuabi_objcode_kernel_name",
                        exprs);
}

cuabi_status cuabi__objcode_find_offline(cuabi__objcode *o, const char *name, const char *arch,
                                         const cuabi__elf_kernel **out, const char *caller)
{
    const cuabi__elf_info *elf;
    *out = NULL;
    CUABI__TRY(cuabi__objcode_elf(o, arch, &elf, caller));
    const char *lowered = cuabi__objcode_resolve_name(o, name);
    *out = cuabi__elf_find(elf, lowered);
    return *out ? CUABI_SUCCESS : cuabi__objcode_not_found(o, elf, name, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_kernel_resources(cuabi_kernel_resources *out,
                                                          cuabi_objcode *objcode,
                                                          const char *name, const char *arch)
{
    cuabi__objcode *o;
    const cuabi__elf_kernel *k;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(name, "%s: name is NULL", __func__);
    CUABI__GET(o, objcode, OBJCODE);
    if (arch)
        CUABI__TRY(check_arch(arch, __func__));
    if (arch && o->type == CUABI_CODE_CUBIN) {
        char have[16];
        const cuabi__elf_info *elf;
        CUABI__TRY(cubin_elf(o, &elf, __func__));
        snprintf(have, sizeof have, "sm_%d", elf->arch);
        if (strncmp(arch, have, strlen(have)) != 0)
            return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                                "%s: %s is a CUBIN for %s, not %s", __func__, o->name, have, arch);
    }
    if (arch && o->type == CUABI_CODE_FATBIN) {
        /* One view is kept per objcode; a fatbin answers for each of its
         * architectures. */
        pthread_mutex_lock(&o->lock);
        bool kept = o->elf && strcmp(o->offline_arch, arch) == 0;
        pthread_mutex_unlock(&o->lock);
        if (!kept)
            return fatbin_resources(out, o, name, arch, __func__);
    }
    CUABI__TRY(cuabi__objcode_find_offline(o, name, arch, &k, __func__));
    return cuabi__elf_copy_resources(out, k, __func__);
}
