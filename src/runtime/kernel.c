/* Kernels: a named entry of an objcode. The CUkernel (context-independent)
 * is looked up lazily; the CUfunction of each device's primary context is
 * cached lock-free for the launch path. Offline queries (resources,
 * parameters) read the objcode's CUBIN. */
#include <string.h>

#include "runtime/kernel.h"

static void kernel_destroy(cuabi__object *base)
{
    cuabi__kernel *k = (cuabi__kernel *)base;
    cuabi__object_release(&k->objcode->base);
    cuabi__free(k->name);
    cuabi__free(k->param_offsets);
    cuabi__free(k->param_sizes);
    cuabi__param_types_free(&k->types);
    pthread_mutex_destroy(&k->lock);
    cuabi__free(k);
}

cuabi_status cuabi__kernel_new(cuabi__kernel **out, cuabi__objcode *o, const char *name,
                               CUkernel cu_kernel)
{
    *out = NULL;
    cuabi__kernel *k = cuabi__calloc(1, sizeof *k);
    if (!k)
        return CUABI_ERROR_OUT_OF_MEMORY;
    k->name = cuabi__strdup(name);
    if (!k->name) {
        cuabi__free(k);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&k->lock, NULL);
    atomic_store(&k->cu_kernel, cu_kernel);
    k->objcode = o;
    cuabi_status st = cuabi__handle_register(&k->base, CUABI__T_KERNEL, kernel_destroy);
    if (st != CUABI_SUCCESS) {
        pthread_mutex_destroy(&k->lock);
        cuabi__free(k->name);
        cuabi__free(k);
        return st;
    }
    cuabi__object_retain(&o->base);
    *out = k;
    return CUABI_SUCCESS;
}

CUABI__HOT
cuabi_status cuabi__kernel_cukernel(cuabi__kernel *k, const cuabi__driver *drv, CUkernel *out,
                                    const char *caller)
{
    CUkernel ck = atomic_load_explicit(&k->cu_kernel, memory_order_acquire);
    if (!ck) {
        CUlibrary lib;
        CUABI__TRY(cuabi__objcode_library(k->objcode, drv, &lib, caller));
        if (!drv->cuLibraryGetKernel)
            return cuabi__missing_entry("cuLibraryGetKernel", caller);
        CUresult r = CUABI__CU_RAW(drv, cuLibraryGetKernel, &ck, lib, k->name);
        if (r == CUDA_ERROR_NOT_FOUND)
            return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: the driver finds no kernel '%s' in %s",
                                caller, k->name, k->objcode->name);
        CUABI__TRY(cuabi__objcode_cu_check(k->objcode, drv, r, "cuLibraryGetKernel", caller));
        /* Two threads may race here; both get the same CUkernel. */
        atomic_store_explicit(&k->cu_kernel, ck, memory_order_release);
    }
    *out = ck;
    return CUABI_SUCCESS;
}

CUABI__HOT cuabi_status cuabi__kernel_function(cuabi__kernel *k, cuabi__device *dev,
                                               const cuabi__driver *drv, CUfunction *out,
                                               const char *caller)
{
    bool cached = dev->ordinal >= 0 && dev->ordinal < CUABI__KERNEL_FUNCTION_CACHE;
    CUfunction f = cached ? atomic_load_explicit(&k->functions[dev->ordinal],
                                                 memory_order_acquire) : NULL;
    if (f) {
        *out = f;
        return CUABI_SUCCESS;
    }
    CUkernel ck;
    CUABI__TRY(cuabi__kernel_cukernel(k, drv, &ck, caller));
    /* Lazy loading compiles for this device now: image errors show here.
     * The function is the current context's: the device's, made current
     * for the call only. */
    if (!drv->cuKernelGetFunction)
        return cuabi__missing_entry("cuKernelGetFunction", caller);
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    cuabi_status st = cuabi__objcode_cu_check(k->objcode, drv,
                                              CUABI__CU_RAW(drv, cuKernelGetFunction, &f, ck),
                                              "cuKernelGetFunction", caller);
    CUABI__TRY(cuabi__context_end(&scope, st));
    if (cached)
        atomic_store_explicit(&k->functions[dev->ordinal], f, memory_order_release);
    *out = f;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ parameters */

/* The layout through cuKernelGetParamInfo: ask index 0, 1, ... until the
 * driver says the index is out of range. Returns false when the driver
 * can't tell (no GPU, old driver): the caller falls back to the CUBIN. */
static bool params_from_driver(cuabi__kernel *k)
{
    const cuabi__driver *drv;
    CUkernel ck;
    if (cuabi__driver_get(&drv) != CUABI_SUCCESS || !drv->cuKernelGetParamInfo ||
        cuabi__kernel_cukernel(k, drv, &ck, __func__) != CUABI_SUCCESS) {
        cuabi_error_clear();
        return false;
    }
    size_t cap = 0, n = 0, *offs = NULL, *sizes = NULL;
    for (;;) {
        size_t off, size;
        CUresult r = CUABI__CU_RAW(drv, cuKernelGetParamInfo, ck, n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE && n > 0)
            break;
        if (r != CUDA_SUCCESS) {
            /* Index 0 invalid: no parameters, or the driver can't tell;
             * anything else: let the CUBIN answer. */
            cuabi__free(offs);
            cuabi__free(sizes);
            if (r == CUDA_ERROR_INVALID_VALUE && k->objcode->type != CUABI_CODE_CUBIN) {
                k->param_count = 0;
                return true;
            }
            return false;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            size_t *no = cuabi__realloc(offs, cap * sizeof *no);
            if (no)
                offs = no;
            size_t *ns = no ? cuabi__realloc(sizes, cap * sizeof *ns) : NULL;
            if (!ns) {
                cuabi__free(offs);
                cuabi__free(sizes);
                cuabi_error_clear();
                return false;
            }
            sizes = ns;
        }
        offs[n] = off;
        sizes[n] = size;
        n++;
    }
    k->param_count = n;
    k->param_offsets = offs;
    k->param_sizes = sizes;
    return true;
}

static cuabi_status params_from_elf(cuabi__kernel *k, const char *caller)
{
    const cuabi__elf_kernel *ek;
    CUABI__TRY(cuabi__objcode_find_offline(k->objcode, k->name, NULL, &ek, caller));
    if (!ek->params_known)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the CUBIN of %s does not describe the parameters of '%s' "
                            "(no EIATTR_KPARAM_INFO); a driver 12.4+ can tell",
                            caller, k->objcode->name, k->name);
    size_t n = ek->res.param_count;
    k->param_count = n;
    if (n == 0)
        return CUABI_SUCCESS;
    k->param_offsets = cuabi__malloc(n * sizeof(size_t));
    k->param_sizes = cuabi__malloc(n * sizeof(size_t));
    if (!k->param_offsets || !k->param_sizes) {
        cuabi__free(k->param_offsets);
        cuabi__free(k->param_sizes);
        k->param_offsets = k->param_sizes = NULL;
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    memcpy(k->param_offsets, ek->param_offsets, n * sizeof(size_t));
    memcpy(k->param_sizes, ek->param_sizes, n * sizeof(size_t));
    return CUABI_SUCCESS;
}

CUABI__HOT
cuabi_status cuabi__kernel_param_layout(cuabi__kernel *k, size_t *count, const size_t **offsets,
                                        const size_t **sizes)
{
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&k->lock);
    if (!k->params_ready) {
        if (!params_from_driver(k))
            st = params_from_elf(k, __func__);
        k->params_ready = st == CUABI_SUCCESS;
    }
    pthread_mutex_unlock(&k->lock);
    if (st != CUABI_SUCCESS)
        return st;
    *count = k->param_count;
    *offsets = k->param_offsets;
    *sizes = k->param_sizes;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__kernel_param_types(cuabi__kernel *k, const cuabi__param_types **out,
                                       const char *caller)
{
    size_t n;
    const size_t *offs, *sizes;
    const char *sigs;
    CUABI__TRY(cuabi__kernel_param_layout(k, &n, &offs, &sizes));
    CUABI__TRY(cuabi__objcode_signatures(k->objcode, &sigs));
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&k->lock);
    if (!k->types_ready) {
        st = cuabi__param_types_build(&k->types, k->name, sigs, n, offs, sizes);
        k->types_ready = st == CUABI_SUCCESS;
    }
    pthread_mutex_unlock(&k->lock);
    if (st != CUABI_SUCCESS)
        return cuabi__error(st, "%s: out of memory reading the parameter types of '%s'",
                            caller, k->name);
    *out = &k->types;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ public API */

CUABI_EXTERN(cuabi_status) cuabi_kernel_name(const char **out, cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    *out = k->name;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_objcode(cuabi_objcode **out, cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    *out = CUABI__HANDLE(k->objcode, cuabi_objcode);
    return CUABI_SUCCESS;
}

static bool settable(int attribute)
{
    switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return true;
    default:
        return false;
    }
}

/* Resolve kernel + device and make the device current in *scope: the
 * per-device attribute calls act on the library as loaded in its primary
 * context. */
static cuabi_status prepare(cuabi__context_scope *scope, cuabi__kernel *k, cuabi__device *dev,
                            const cuabi__driver **drv, CUkernel *ck, const char *caller)
{
    CUABI__TRY(cuabi__driver_get(drv));
    CUABI__TRY(cuabi__kernel_cukernel(k, *drv, ck, caller));
    return cuabi__device_enter(scope, dev, *drv);
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_attribute(int *out, cuabi_kernel *kernel,
                                                  cuabi_device *device, int attribute)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__kernel *k;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUkernel ck;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(attribute >= 0 && attribute < CU_FUNC_ATTRIBUTE_MAX,
                     "%s: %d is not a CUfunction_attribute (0..%d)", __func__, attribute,
                     CU_FUNC_ATTRIBUTE_MAX - 1);
    CUABI__TRY_SCOPE(prepare(&scope, k, dev, &drv, &ck, __func__));
    scope_st = CUABI__CU(drv, cuKernelGetAttribute, out, (CUfunction_attribute)attribute, ck,
                     dev->cu_device);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_set_attribute(cuabi_kernel *kernel, cuabi_device *device,
                                                      int attribute, int value)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__kernel *k;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUkernel ck;
    CUABI__GET(k, kernel, KERNEL);
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(settable(attribute),
                     "%s: CUfunction_attribute %d is not settable (settable: max dynamic shared "
                     "size, preferred carveout, required cluster width/height/depth, non-portable "
                     "cluster size, cluster scheduling policy)", __func__, attribute);
    CUABI__TRY_SCOPE(prepare(&scope, k, dev, &drv, &ck, __func__));
    scope_st = CUABI__CU(drv, cuKernelSetAttribute, (CUfunction_attribute)attribute, value, ck,
                     dev->cu_device);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_param_count(size_t *out, cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    const size_t *offs, *sizes;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    return cuabi__kernel_param_layout(k, out, &offs, &sizes);
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_param_info(size_t *offset, size_t *size,
                                                   cuabi_kernel *kernel, size_t index)
{
    cuabi__kernel *k;
    const size_t *offs, *sizes;
    size_t n;
    CUABI__CHECK_ARG(offset && size, "%s: offset or size is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    CUABI__TRY(cuabi__kernel_param_layout(k, &n, &offs, &sizes));
    CUABI__CHECK_ARG(index < n, "%s: parameter %zu is out of range ('%s' has %zu)", __func__,
                     index, k->name, n);
    *offset = offs[index];
    *size = sizes[index];
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_get_resources(cuabi_kernel_resources *out,
                                                      cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    const cuabi__elf_kernel *ek;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    CUABI__TRY(cuabi__objcode_find_offline(k->objcode, k->name, NULL, &ek, __func__));
    return cuabi__elf_copy_resources(out, ek, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_raw(uintptr_t *out, cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    const cuabi__driver *drv;
    CUkernel ck;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__kernel_cukernel(k, drv, &ck, __func__));
    *out = (uintptr_t)ck;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_function(uintptr_t *out, cuabi_kernel *kernel,
                                                 cuabi_device *device)
{
    cuabi__kernel *k;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUfunction f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(k, kernel, KERNEL);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__kernel_function(k, dev, drv, &f, __func__));
    *out = (uintptr_t)f;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_module(uintptr_t *out, cuabi_objcode *objcode,
                                                cuabi_device *device)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__objcode *o;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUlibrary lib;
    CUmodule m = NULL;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__objcode_loadable(o, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__objcode_library(o, drv, &lib, __func__));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));   /* the module is per context */
    if (!drv->cuLibraryGetModule)
        CUABI__SCOPE_RETURN(cuabi__missing_entry("cuLibraryGetModule", __func__));
    CUABI__TRY_SCOPE(cuabi__objcode_cu_check(o, drv, CUABI__CU_RAW(drv, cuLibraryGetModule, &m, lib),
                                       "cuLibraryGetModule", __func__));
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    /* The module is borrowed (the library owns it): nothing to release, but a
     * call that fails -- its restore included -- hands nothing out. */
    scope_st = cuabi__context_end(&scope, scope_st);
    if (scope_st == CUABI_SUCCESS)
        *out = (uintptr_t)m;
    return scope_st;
}

CUABI_EXTERN(cuabi_status) cuabi_objcode_library(uintptr_t *out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    const cuabi__driver *drv;
    CUlibrary lib;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__TRY(cuabi__objcode_loadable(o, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY(cuabi__objcode_library(o, drv, &lib, __func__));
    *out = (uintptr_t)lib;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_param_type(cuabi_param_type *out, cuabi_kernel *kernel,
                                                   size_t index)
{
    cuabi__kernel *k;
    const cuabi__param_types *t;
    CUABI__CHECK_OPTS(out, "cuabi_param_type", CUABI_PARAM_TYPE_VERSION, false);
    CUABI__GET(k, kernel, KERNEL);
    CUABI__TRY(cuabi__kernel_param_types(k, &t, __func__));
    CUABI__CHECK_ARG(index < t->count, "%s: parameter %zu is out of range ('%s' has %zu)",
                     __func__, index, k->name, t->count);
    const cuabi__param *p = &t->params[index];
    out->kind = p->kind;
    out->size = k->param_sizes[index];
    out->offset = k->param_offsets[index];
    out->source = p->source;
    out->type_name = p->type_name;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_kernel_signature(const char **out, cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    const cuabi__param_types *t;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(k, kernel, KERNEL);
    CUABI__TRY(cuabi__kernel_param_types(k, &t, __func__));
    *out = t->signature;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ from objcodes */

CUABI_EXTERN(cuabi_status) cuabi_objcode_get_kernel(cuabi_kernel **out, cuabi_objcode *objcode,
                                                    const char *name)
{
    cuabi__objcode *o;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(name && *name, "%s: name is NULL or empty", __func__);
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__TRY(cuabi__objcode_loadable(o, __func__));
    const char *lowered = cuabi__objcode_resolve_name(o, name);
    const cuabi__driver *drv;
    CUkernel ck = NULL;
    cuabi_status st = cuabi__driver_get(&drv);
    if (st == CUABI_SUCCESS) {
        CUlibrary lib;
        CUABI__TRY(cuabi__objcode_library(o, drv, &lib, __func__));
        if (!drv->cuLibraryGetKernel)
            return cuabi__missing_entry("cuLibraryGetKernel", __func__);
        CUresult r = CUABI__CU_RAW(drv, cuLibraryGetKernel, &ck, lib, lowered);
        if (r == CUDA_ERROR_NOT_FOUND) {
            const cuabi__elf_info *elf = NULL;
            if (o->type == CUABI_CODE_CUBIN)
                CUABI__TRY(cuabi__objcode_elf(o, NULL, &elf, __func__));
            return cuabi__objcode_not_found(o, elf, name, __func__);
        }
        if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) {
            /* Code for another architecture (an sm_80 CUBIN on an H100): a
             * kernel for the offline queries all the same; using it on this
             * GPU gives the driver's refusal then (cuabi__kernel_cukernel). */
            const cuabi__elf_kernel *k;
            CUABI__TRY(cuabi__objcode_find_offline(o, name, NULL, &k, __func__));
            ck = NULL;
        } else {
            CUABI__TRY(cuabi__objcode_cu_check(o, drv, r, "cuLibraryGetKernel", __func__));
        }
    } else if (st == CUABI_ERROR_DRIVER_NOT_FOUND || st == CUABI_ERROR_NO_DEVICE) {
        /* No GPU: a kernel for the offline queries, checked against the CUBIN. */
        const cuabi__elf_kernel *k;
        CUABI__TRY(cuabi__objcode_find_offline(o, name, NULL, &k, __func__));
        cuabi_error_clear();
    } else {
        return st;
    }
    cuabi__kernel *k;
    CUABI__TRY(cuabi__kernel_new(&k, o, lowered, ck));
    *out = CUABI__HANDLE(k, cuabi_kernel);
    return CUABI_SUCCESS;
}
