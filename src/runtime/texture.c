/* Texture and surface objects, and their argument-pack slots.
 *
 * A texture is made from one of four resources -- an array, a mipmapped
 * array, a view as linear or as pitched memory -- and a sampling
 * description. The rules the driver answers with a bare
 * CUDA_ERROR_INVALID_VALUE are checked first, naming what is wrong: enum
 * ranges, wrap and mirror addressing without normalized coordinates, a
 * linear filter where the texture returns integers, normalized reads of
 * 32-bit integers, the anisotropy range, a surface over an array made
 * without CUABI_ARRAY_SURFACE_LDST, and for views: GPU memory of the
 * texture's device, the device's texture alignment of the first element
 * and pitch alignment of the rows, contiguous elements within a row.
 *
 * Each object retains what it reads (array, mipmapped array or view) and
 * so its device (a view's texture retains the device itself), and destroys its CUtexObject / CUsurfObject with its last
 * reference. Neither destroy frees memory, so neither is on the release
 * list of platform/release.h. */
#include "runtime/argpack.h"
#include "runtime/array.h"

#include <stddef.h>
#include <string.h>

typedef struct cuabi__texture {
    cuabi__object base;
    uint64_t tex;                         /* the CUtexObject (cuabi__valued_object) */
    cuabi__device *device;                /* retained for a view; an array or
                                             mipmapped array holds it already */
    const cuabi__driver *drv;             /* the table it was made with */
    cuabi_texture_resource_kind kind;
    cuabi__array *array;                  /* retained; or */
    cuabi__mipmapped_array *mipmapped;    /* retained; or */
    cuabi__view *view;                    /* retained */
    cuabi_texture_desc desc;              /* as made, at this library's version */
    int format;
    unsigned channels;
    size_t width, height, depth, pitch;
    uintptr_t address;
} cuabi__texture;

typedef struct cuabi__surface {
    cuabi__object base;
    uint64_t surf;                        /* the CUsurfObject (cuabi__valued_object) */
    cuabi__array *array;                  /* retained */
} cuabi__surface;

/* Argument packs read the object value through cuabi__valued_object. */
_Static_assert(offsetof(cuabi__texture, tex) == offsetof(cuabi__valued_object, value),
               "a texture starts as a cuabi__valued_object");
_Static_assert(offsetof(cuabi__surface, surf) == offsetof(cuabi__valued_object, value),
               "a surface starts as a cuabi__valued_object");

/* ------------------------------------------------------------ descriptions */

/* How many coordinates address a resource (its address modes that count):
 * 0 for linear memory and cube maps, which have none to check. */
static int coord_dims(cuabi_texture_resource_kind kind, const cuabi_array_desc *d)
{
    if (kind == CUABI_TEXTURE_RESOURCE_LINEAR)
        return 0;
    if (kind == CUABI_TEXTURE_RESOURCE_PITCH2D)
        return 2;
    if (d->flags & CUABI_ARRAY_CUBEMAP)
        return 0;
    if (d->flags & CUABI_ARRAY_LAYERED)
        return d->height ? 2 : 1;
    return d->depth ? 3 : d->height ? 2 : 1;
}

/* What a description is checked against: the texture's format, how many
 * coordinates address it, whether filtering applies (not to linear
 * memory), and the kind of array. */
typedef struct tex_target {
    int format, dims;
    bool filters_apply, mipmapped, cubemap;
} tex_target;

static cuabi_status check_tex_desc(const cuabi_texture_desc *t, const tex_target *g,
                                   const char *caller)
{
    int format = g->format, dims = g->dims;
    bool filters_apply = g->filters_apply;
    CUABI__CHECK_ARG(!g->mipmapped || t->normalized_coords, "%s: a mipmapped array is sampled "
                     "with normalized coordinates (set desc.normalized_coords)", caller);
    CUABI__CHECK_ARG(!t->seamless_cubemap || g->cubemap, "%s: desc.seamless_cubemap is for cube "
                     "maps; the array is not one", caller);
    for (int i = 0; i < 3; i++)
        CUABI__CHECK_ARG((unsigned)t->address_mode[i] <= CUABI_TEXTURE_ADDRESS_BORDER,
                         "%s: desc.address_mode[%d] = %d is not a cuabi_texture_address_mode",
                         caller, i, (int)t->address_mode[i]);
    CUABI__CHECK_ARG((unsigned)t->filter_mode <= CUABI_TEXTURE_FILTER_LINEAR &&
                     (unsigned)t->mipmap_filter_mode <= CUABI_TEXTURE_FILTER_LINEAR,
                     "%s: desc.filter_mode (%d) or desc.mipmap_filter_mode (%d) is not a "
                     "cuabi_texture_filter_mode", caller, (int)t->filter_mode,
                     (int)t->mipmap_filter_mode);
    CUABI__CHECK_ARG((unsigned)t->read_mode <= CUABI_TEXTURE_READ_NORMALIZED_FLOAT,
                     "%s: desc.read_mode = %d is not a cuabi_texture_read_mode", caller,
                     (int)t->read_mode);
    CUABI__CHECK_ARG(t->max_anisotropy <= 16, "%s: desc.max_anisotropy = %u; textures take 0 "
                     "to 16", caller, t->max_anisotropy);
    for (int i = 0; i < dims; i++)
        CUABI__CHECK_ARG(t->normalized_coords ||
                         (t->address_mode[i] != CUABI_TEXTURE_ADDRESS_WRAP &&
                          t->address_mode[i] != CUABI_TEXTURE_ADDRESS_MIRROR),
                         "%s: desc.address_mode[%d] is %s, which needs normalized coordinates "
                         "(set desc.normalized_coords)", caller, i,
                         t->address_mode[i] == CUABI_TEXTURE_ADDRESS_WRAP ? "WRAP" : "MIRROR");
    const char *why;
    if (filters_apply && (t->filter_mode == CUABI_TEXTURE_FILTER_LINEAR ||
                          t->mipmap_filter_mode == CUABI_TEXTURE_FILTER_LINEAR) &&
        !cuabi__array_format_filters(format, (int)t->read_mode, &why))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a linear filter needs a texture "
                            "that returns floats; %s", caller, why);
    if (t->read_mode == CUABI_TEXTURE_READ_NORMALIZED_FLOAT &&
        (format == CUABI_ARRAY_FORMAT_UINT32 || format == CUABI_ARRAY_FORMAT_INT32))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: normalized-float reads are for 8- "
                            "and 16-bit integers; this texture holds 32-bit ones", caller);
    return CUABI_SUCCESS;
}

/* Filled in place (returned by value, the zeroed struct was copied back
 * through the stack: a store-forwarding stall on every texture made). */
static void driver_tex_desc(CUDA_TEXTURE_DESC *c, const cuabi_texture_desc *t)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 3; i++)
        c->addressMode[i] = (CUaddress_mode)t->address_mode[i];
    c->filterMode = (CUfilter_mode)t->filter_mode;
    c->flags = (t->read_mode == CUABI_TEXTURE_READ_ELEMENT_TYPE ? CU_TRSF_READ_AS_INTEGER : 0) |
               (t->normalized_coords ? CU_TRSF_NORMALIZED_COORDINATES : 0) |
               (t->srgb ? CU_TRSF_SRGB : 0) |
               (t->disable_trilinear_optimization ? CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION : 0) |
               (t->seamless_cubemap ? CU_TRSF_SEAMLESS_CUBEMAP : 0);
    c->maxAnisotropy = t->max_anisotropy;
    c->mipmapFilterMode = (CUfilter_mode)t->mipmap_filter_mode;
    c->mipmapLevelBias = t->mipmap_level_bias;
    c->minMipmapLevelClamp = t->min_mipmap_level_clamp;
    c->maxMipmapLevelClamp = t->max_mipmap_level_clamp;
    memcpy(c->borderColor, t->border_color, sizeof c->borderColor);
}

/* The caller's description at this library's version (a shorter, older
 * struct is read field by field: none yet), or the defaults. */
static cuabi_status read_tex_desc(cuabi_texture_desc *out, const cuabi_texture_desc *desc,
                                  const char *caller)
{
    static const cuabi_texture_desc defaults = CUABI_TEXTURE_DESC_INIT;
    if (desc && (desc->version == 0 || desc->version > CUABI_TEXTURE_DESC_VERSION))
        return cuabi__error(CUABI_ERROR_INVALID_VERSION, "%s: cuabi_texture_desc version %u is "
                            "not supported (use CUABI_TEXTURE_DESC_INIT)", caller, desc->version);
    *out = desc ? *desc : defaults;
    out->version = CUABI_TEXTURE_DESC_VERSION;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ textures */

/* Whether the texture holds its own reference to its device: an array or
 * mipmapped array it keeps alive holds the device already (one atomic pair
 * less per texture: creating and destroying one is the benchmarked pair). */
static bool owns_device_ref(const cuabi__texture *t)
{
    return !t->array && !t->mipmapped;
}

static void texture_destroy(cuabi__object *o)
{
    cuabi__texture *t = (cuabi__texture *)o;
    const cuabi__driver *drv = t->drv;    /* made with it: cuTexObjectDestroy is there */
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* a release: the caller's back */
    (void)cuabi__device_enter(&scope, t->device, drv);   /* destroyed even if refused */
    CUABI__CU_RELEASE(drv, cuTexObjectDestroy, (CUtexObject)t->tex);
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    if (owns_device_ref(t))
        cuabi__object_release(&t->device->base);
    if (t->array)
        cuabi__object_release(&t->array->base);
    if (t->mipmapped)
        cuabi__object_release(&t->mipmapped->base);
    if (t->view)
        cuabi__object_release(&t->view->base);
    cuabi__free(t);
}

/* Create the object for `t` (its resource fields filled, nothing retained
 * yet) from `res`; on success retain what it reads and publish it. */
static cuabi_status texture_make(cuabi_texture **out, cuabi__texture *t,
                                 const CUDA_RESOURCE_DESC *res, const char *caller)
{
    const cuabi__driver *drv;
    cuabi_status st = cuabi__driver_get_for(&drv, caller);
    if (st == CUABI_SUCCESS && !drv->cuTexObjectDestroy)
        st = cuabi__missing_entry("cuTexObjectDestroy", caller);
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (st == CUABI_SUCCESS)
        st = cuabi__device_enter(&scope, t->device, drv);
    CUDA_TEXTURE_DESC td;
    driver_tex_desc(&td, &t->desc);
    CUtexObject tex = 0;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_IN(caller, drv, cuTexObjectCreate, &tex, res, &td, NULL);
    t->tex = (uint64_t)tex;
    t->drv = drv;
    if (st == CUABI_SUCCESS) {
        st = cuabi__handle_register(&t->base, CUABI__T_TEXTURE, texture_destroy);
        if (st != CUABI_SUCCESS)
            CUABI__CU_RELEASE(drv, cuTexObjectDestroy, (CUtexObject)t->tex);
    }
    cuabi_status left = cuabi__context_end(&scope, CUABI_SUCCESS);   /* the caller's back */
    if (st != CUABI_SUCCESS) {
        cuabi__free(t);
        return st;
    }
    if (owns_device_ref(t))
        cuabi__object_retain(&t->device->base);
    if (t->array)
        cuabi__object_retain(&t->array->base);
    if (t->mipmapped)
        cuabi__object_retain(&t->mipmapped->base);
    if (t->view)
        cuabi__object_retain(&t->view->base);
    *out = CUABI__HANDLE(t, cuabi_texture);
    if (left == CUABI_SUCCESS)
        return CUABI_SUCCESS;
    /* The caller's context could not be given back: the call fails, so the
     * texture goes back (all or nothing). */
    (void)cuabi__handle_release(*out, CUABI__T_TEXTURE);
    *out = NULL;
    return cuabi__context_made_lost(caller);
}

static cuabi__texture *texture_alloc(const cuabi_texture_desc *desc, const char *caller)
{
    cuabi__texture *t = cuabi__calloc_in(1, sizeof *t, caller);
    if (t)
        t->desc = *desc;
    return t;
}

static cuabi_status texture_of_array(cuabi_texture **out, cuabi__array *a,
                                     const cuabi_texture_desc *desc, const char *caller)
{
    cuabi_texture_desc d;
    CUABI__TRY(read_tex_desc(&d, desc, caller));
    tex_target g = { (int)a->desc.format, coord_dims(CUABI_TEXTURE_RESOURCE_ARRAY, &a->desc),
                     true, false, (a->desc.flags & CUABI_ARRAY_CUBEMAP) != 0 };
    CUABI__TRY(check_tex_desc(&d, &g, caller));
    cuabi__texture *t = texture_alloc(&d, caller);
    if (!t)
        return CUABI_ERROR_OUT_OF_MEMORY;
    t->kind = CUABI_TEXTURE_RESOURCE_ARRAY;
    t->device = a->device;
    t->array = a;
    t->format = (int)a->desc.format;
    t->channels = a->desc.num_channels;
    t->width = a->desc.width;
    t->height = a->desc.height;
    t->depth = a->desc.depth;
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_ARRAY;
    res.res.array.hArray = a->cu;
    return texture_make(out, t, &res, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_texture_create_from_array(cuabi_texture **out, cuabi_array *array,
                                                           const cuabi_texture_desc *desc)
{
    cuabi__array *a;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(a, array, ARRAY);
    return texture_of_array(out, a, desc, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_texture_create_from_mipmapped_array(
    cuabi_texture **out, cuabi_mipmapped_array *mipmapped_array, const cuabi_texture_desc *desc)
{
    cuabi__mipmapped_array *m;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(m, mipmapped_array, MIPMAPPED_ARRAY);
    cuabi_texture_desc d;
    CUABI__TRY(read_tex_desc(&d, desc, __func__));
    tex_target g = { (int)m->desc.format,
                     coord_dims(CUABI_TEXTURE_RESOURCE_MIPMAPPED_ARRAY, &m->desc), true, true,
                     (m->desc.flags & CUABI_ARRAY_CUBEMAP) != 0 };
    CUABI__TRY(check_tex_desc(&d, &g, __func__));
    cuabi__texture *t = texture_alloc(&d, __func__);
    if (!t)
        return CUABI_ERROR_OUT_OF_MEMORY;
    t->kind = CUABI_TEXTURE_RESOURCE_MIPMAPPED_ARRAY;
    t->device = m->device;
    t->mipmapped = m;
    t->format = (int)m->desc.format;
    t->channels = m->desc.num_channels;
    t->width = m->desc.width;
    t->height = m->desc.height;
    t->depth = m->desc.depth;
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    res.res.mipmap.hMipmappedArray = m->cu;
    return texture_make(out, t, &res, __func__);
}

/* A device attribute (alignments); the driver's error names `caller`. */
static cuabi_status device_attr(int *out, cuabi__device *dev, CUdevice_attribute attr,
                                const char *caller)
{
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    return CUABI__CU_IN(caller, drv, cuDeviceGetAttribute, out, attr, dev->cu_device);
}

/* The view's memory as a linear (1-D) or pitched (2-D) resource. */
static cuabi_status view_resource(CUDA_RESOURCE_DESC *res, cuabi__texture *t,
                                  const cuabi__view *v, unsigned channels, const char *caller)
{
    CUABI__CHECK_ARG(channels == 1 || channels == 2 || channels == 4,
                     "%s: num_channels = %u; textures have 1, 2 or 4 channels", caller, channels);
    if (v->device_type != CUABI_DLPACK_CUDA && v->device_type != CUABI_DLPACK_CUDA_MANAGED)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a texture reads GPU memory in "
                            "place; the view is %s memory (make an array of it with "
                            "cuabi_texture_create_from_image)", caller,
                            v->device_type == CUABI_DLPACK_CPU ? "host" : "pinned host");
    CUABI__TRY(cuabi__array_format_of_dtype(&t->format, v, caller));
    t->channels = channels;
    size_t item = (size_t)v->bits / 8, elem = item * channels;
    int ns = v->ndim - (channels > 1);
    if (channels > 1 && (v->ndim < 1 || v->shape[v->ndim - 1] != (int64_t)channels ||
                         v->strides[v->ndim - 1] != 1))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: with %u channels the view's last "
                            "dimension is %u contiguous channels", caller, channels, channels);
    if (ns != 1 && ns != 2)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a texture over a view reads 1-D "
                            "(linear) or 2-D (pitched) memory; the view has %d dimension%s "
                            "besides the channels (copy 3-D data into an array)", caller, ns,
                            ns == 1 ? "" : "s");
    for (int i = 0; i < ns; i++)
        CUABI__CHECK_ARG(v->shape[i] > 0, "%s: the view is empty", caller);
    int64_t row_step = channels > 1 ? (int64_t)channels : 1;
    if (v->shape[ns - 1] > 1 && v->strides[ns - 1] != row_step)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view's elements are not "
                            "contiguous along its last dimension (stride %lld); copy it into an "
                            "array (cuabi_texture_create_from_image)", caller,
                            (long long)v->strides[ns - 1]);
    t->address = v->data + (uintptr_t)v->byte_offset;
    int align;
    CUABI__TRY(device_attr(&align, t->device, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, caller));
    if (align > 0 && t->address % (uintptr_t)align)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view's first element at 0x%llx "
                            "is not aligned to the device's texture alignment of %d bytes", caller,
                            (unsigned long long)t->address, align);
    t->width = (size_t)v->shape[ns - 1];
    memset(res, 0, sizeof *res);
    if (ns == 1) {
        t->kind = CUABI_TEXTURE_RESOURCE_LINEAR;
        res->resType = CU_RESOURCE_TYPE_LINEAR;
        res->res.linear.devPtr = (CUdeviceptr)t->address;
        res->res.linear.format = (CUarray_format)t->format;
        res->res.linear.numChannels = channels;
        res->res.linear.sizeInBytes = t->width * elem;     /* the view holds it */
        return CUABI_SUCCESS;
    }
    t->kind = CUABI_TEXTURE_RESOURCE_PITCH2D;
    t->height = (size_t)v->shape[0];
    size_t row = t->width * elem;
    t->pitch = row;
    if (t->height > 1) {
        if (v->strides[0] <= 0 || (uint64_t)v->strides[0] > SIZE_MAX / item ||
            (size_t)v->strides[0] * item < row)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view's rows are %lld "
                                "elements apart; pitched memory has rows in order, at least a "
                                "row apart", caller, (long long)v->strides[0]);
        t->pitch = (size_t)v->strides[0] * item;
    }
    int pitch_align;
    CUABI__TRY(device_attr(&pitch_align, t->device, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT,
                           caller));
    if (pitch_align > 0 && t->pitch % (size_t)pitch_align)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view's rows are %zu bytes "
                            "apart, not a multiple of the device's texture pitch alignment (%d "
                            "bytes); pad the rows, or copy the view into an array "
                            "(cuabi_texture_create_from_image)", caller, t->pitch, pitch_align);
    res->resType = CU_RESOURCE_TYPE_PITCH2D;
    res->res.pitch2D.devPtr = (CUdeviceptr)t->address;
    res->res.pitch2D.format = (CUarray_format)t->format;
    res->res.pitch2D.numChannels = channels;
    res->res.pitch2D.width = t->width;
    res->res.pitch2D.height = t->height;
    res->res.pitch2D.pitchInBytes = t->pitch;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_texture_create_from_view(cuabi_texture **out, cuabi_view *view,
                                                          unsigned int num_channels,
                                                          const cuabi_texture_desc *desc)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(v, view, VIEW);
    cuabi_texture_desc d;
    CUABI__TRY(read_tex_desc(&d, desc, __func__));
    cuabi__device *dev;
    CUABI__TRY(cuabi__array_view_device(&dev, v, NULL, __func__));
    cuabi__texture *t = texture_alloc(&d, __func__);
    cuabi_status st = t ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    CUDA_RESOURCE_DESC res;
    if (st == CUABI_SUCCESS) {
        t->device = dev;
        t->view = v;
        st = view_resource(&res, t, v, num_channels, __func__);
    }
    if (st == CUABI_SUCCESS) {
        tex_target g = { t->format, coord_dims(t->kind, NULL),
                         t->kind != CUABI_TEXTURE_RESOURCE_LINEAR, false, false };
        st = check_tex_desc(&d, &g, __func__);
    }
    if (st != CUABI_SUCCESS)
        cuabi__free(t);
    else
        st = texture_make(out, t, &res, __func__);
    cuabi__object_release(&dev->base);     /* texture_make took its own */
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_texture_create_from_image(cuabi_texture **out, cuabi_view *view,
                                                           unsigned int num_channels,
                                                           unsigned int flags,
                                                           const cuabi_texture_desc *desc,
                                                           cuabi_device *device)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi_texture_desc d;
    CUABI__TRY(read_tex_desc(&d, desc, __func__));
    cuabi_array *ah;
    CUABI__TRY(cuabi_array_create_from_view(&ah, view, num_channels, flags, device, NULL));
    void *obj;
    (void)cuabi__handle_get(ah, CUABI__T_ARRAY, &obj, __func__);
    cuabi_status st = texture_of_array(out, obj, &d, __func__);
    cuabi__handle_release(ah, CUABI__T_ARRAY);      /* the texture keeps it */
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_texture_get_info(cuabi_texture_info *out, cuabi_texture *texture)
{
    cuabi__texture *t;
    CUABI__CHECK_OPTS(out, "cuabi_texture_info", CUABI_TEXTURE_INFO_VERSION, false);
    CUABI__GET(t, texture, TEXTURE);
    unsigned version = out->version;
    memset((char *)out + sizeof out->version, 0, sizeof *out - sizeof out->version);
    out->version = version;
    out->resource = t->kind;
    out->format = (cuabi_array_format)t->format;
    out->num_channels = t->channels;
    out->width = t->width;
    out->height = t->height;
    out->depth = t->depth;
    out->pitch = t->pitch;
    out->address = t->address;
    out->device = t->device->ordinal;
    out->array = t->array ? CUABI__HANDLE(t->array, cuabi_array) : NULL;
    out->mipmapped_array = t->mipmapped ? CUABI__HANDLE(t->mipmapped, cuabi_mipmapped_array) : NULL;
    out->view = t->view ? CUABI__HANDLE(t->view, cuabi_view) : NULL;
    out->object = (uint64_t)t->tex;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_texture_get_desc(cuabi_texture_desc *out, cuabi_texture *texture)
{
    cuabi__texture *t;
    CUABI__CHECK_OPTS(out, "cuabi_texture_desc", CUABI_TEXTURE_DESC_VERSION, false);
    CUABI__GET(t, texture, TEXTURE);
    unsigned version = out->version;
    *out = t->desc;
    out->version = version;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_texture_object(uint64_t *out, cuabi_texture *texture)
{
    cuabi__texture *t;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(t, texture, TEXTURE);
    *out = (uint64_t)t->tex;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ surfaces */

static void surface_destroy(cuabi__object *o)
{
    cuabi__surface *s = (cuabi__surface *)o;
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* a release: the caller's back */
    if (cuabi__driver_get_for(&drv, "cuabi_surface_release") == CUABI_SUCCESS &&
        drv->cuSurfObjectDestroy) {
        (void)cuabi__device_enter(&scope, s->array->device, drv);   /* destroyed even if refused */
        CUABI__CU_RELEASE(drv, cuSurfObjectDestroy, (CUsurfObject)s->surf);
    }
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    cuabi__object_release(&s->array->base);
    cuabi__free(s);
}

CUABI_EXTERN(cuabi_status) cuabi_surface_create(cuabi_surface **out, cuabi_array *array)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__array *a;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(a, array, ARRAY);
    if (!(a->desc.flags & CUABI_ARRAY_SURFACE_LDST))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the array was made without "
                            "CUABI_ARRAY_SURFACE_LDST; a surface needs it", __func__);
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuSurfObjectDestroy)
        return cuabi__missing_entry("cuSurfObjectDestroy", __func__);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, a->device, drv));
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_ARRAY;
    res.res.array.hArray = a->cu;
    CUsurfObject so;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuSurfObjectCreate, &so, &res));
    cuabi__surface *s = cuabi__calloc(1, sizeof *s);
    cuabi_status st = s ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    if (s) {
        s->surf = so;
        s->array = a;
        st = cuabi__handle_register(&s->base, CUABI__T_SURFACE, surface_destroy);
    }
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuSurfObjectDestroy, so);
        cuabi__free(s);
        CUABI__SCOPE_RETURN(st);
    }
    cuabi__object_retain(&a->base);
    *out = CUABI__HANDLE(s, cuabi_surface);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, SURFACE, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_surface_object(uint64_t *out, cuabi_surface *surface)
{
    cuabi__surface *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(s, surface, SURFACE);
    *out = (uint64_t)s->surf;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_surface_array(cuabi_array **out, cuabi_surface *surface)
{
    cuabi__surface *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(s, surface, SURFACE);
    *out = CUABI__HANDLE(s->array, cuabi_array);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ argument packs */

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_texture(cuabi_argpack *pack, size_t slot,
                                                     cuabi_texture *texture)
{
    return cuabi__argpack_set_object(pack, slot, texture, CUABI__REF_TEXTURE, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_surface(cuabi_argpack *pack, size_t slot,
                                                     cuabi_surface *surface)
{
    return cuabi__argpack_set_object(pack, slot, surface, CUABI__REF_SURFACE, __func__);
}
