/* CUDA arrays and mipmapped arrays, and their copies.
 *
 * Every copy is one cuMemcpy3DAsync (a strided view whose slices are not a
 * whole number of rows apart: one per slice), on the caller's stream, or
 * on the legacy default stream followed by its synchronisation when there
 * is none (as cuabi_peer_copy_view does). The array side is a box of the
 * array in copy units -- elements, or 4x4 blocks of the block-compressed
 * formats -- and the linear side (host memory, a buffer, a view) rows of
 * the box's width in bytes, `pitch` bytes apart, `rows` rows a slice. The
 * box is checked against the array and the linear side's reach against the
 * memory it lies in (host size, buffer range) before the driver sees it;
 * views were checked when they were made and a copy touches exactly their
 * elements. On a stream being captured, the graph keeps the array and the
 * buffer or view (runtime/capture.h). */
#include "runtime/array.h"
#include "runtime/capture.h"
#include "util/checked.h"

#include <string.h>

/* ------------------------------------------------------------ formats */

long cuabi__array_format_elem(int format, unsigned channels, unsigned *block)
{
    *block = 1;
    switch (format) {
    case CUABI_ARRAY_FORMAT_UINT8: case CUABI_ARRAY_FORMAT_INT8:
        return (long)channels;
    case CUABI_ARRAY_FORMAT_UINT16: case CUABI_ARRAY_FORMAT_INT16:
    case CUABI_ARRAY_FORMAT_FLOAT16:
        return 2 * (long)channels;
    case CUABI_ARRAY_FORMAT_UINT32: case CUABI_ARRAY_FORMAT_INT32:
    case CUABI_ARRAY_FORMAT_FLOAT32:
        return 4 * (long)channels;
    case CUABI_ARRAY_FORMAT_UNORM_INT_101010_2:
        return 4;
    case CUABI_ARRAY_FORMAT_UNORM_INT8X1: case CUABI_ARRAY_FORMAT_SNORM_INT8X1: return 1;
    case CUABI_ARRAY_FORMAT_UNORM_INT8X2: case CUABI_ARRAY_FORMAT_SNORM_INT8X2: return 2;
    case CUABI_ARRAY_FORMAT_UNORM_INT8X4: case CUABI_ARRAY_FORMAT_SNORM_INT8X4: return 4;
    case CUABI_ARRAY_FORMAT_UNORM_INT16X1: case CUABI_ARRAY_FORMAT_SNORM_INT16X1: return 2;
    case CUABI_ARRAY_FORMAT_UNORM_INT16X2: case CUABI_ARRAY_FORMAT_SNORM_INT16X2: return 4;
    case CUABI_ARRAY_FORMAT_UNORM_INT16X4: case CUABI_ARRAY_FORMAT_SNORM_INT16X4: return 8;
    case CUABI_ARRAY_FORMAT_BC1_UNORM: case CUABI_ARRAY_FORMAT_BC1_UNORM_SRGB:
    case CUABI_ARRAY_FORMAT_BC4_UNORM: case CUABI_ARRAY_FORMAT_BC4_SNORM:
        *block = 4;
        return 8;
    case CUABI_ARRAY_FORMAT_BC2_UNORM: case CUABI_ARRAY_FORMAT_BC2_UNORM_SRGB:
    case CUABI_ARRAY_FORMAT_BC3_UNORM: case CUABI_ARRAY_FORMAT_BC3_UNORM_SRGB:
    case CUABI_ARRAY_FORMAT_BC5_UNORM: case CUABI_ARRAY_FORMAT_BC5_SNORM:
    case CUABI_ARRAY_FORMAT_BC6H_UF16: case CUABI_ARRAY_FORMAT_BC6H_SF16:
    case CUABI_ARRAY_FORMAT_BC7_UNORM: case CUABI_ARRAY_FORMAT_BC7_UNORM_SRGB:
        *block = 4;
        return 16;
    case CUABI_ARRAY_FORMAT_NV12: case CUABI_ARRAY_FORMAT_P010: case CUABI_ARRAY_FORMAT_P016:
    case CUABI_ARRAY_FORMAT_NV16: case CUABI_ARRAY_FORMAT_P210: case CUABI_ARRAY_FORMAT_P216:
    case CUABI_ARRAY_FORMAT_YUY2: case CUABI_ARRAY_FORMAT_Y210: case CUABI_ARRAY_FORMAT_Y216:
    case CUABI_ARRAY_FORMAT_AYUV: case CUABI_ARRAY_FORMAT_Y410: case CUABI_ARRAY_FORMAT_Y416:
    case CUABI_ARRAY_FORMAT_Y444_PLANAR8: case CUABI_ARRAY_FORMAT_Y444_PLANAR10:
        return 0;
    default:
        return -1;
    }
}

cuabi_status cuabi__array_format_of_dtype(int *out, const cuabi__view *v, const char *caller)
{
    int f = -1;
    switch (v->code) {
    case CUABI_DTYPE_INT:
        f = v->bits == 8 ? CUABI_ARRAY_FORMAT_INT8 : v->bits == 16 ? CUABI_ARRAY_FORMAT_INT16
          : v->bits == 32 ? CUABI_ARRAY_FORMAT_INT32 : -1;
        break;
    case CUABI_DTYPE_UINT:
        f = v->bits == 8 ? CUABI_ARRAY_FORMAT_UINT8 : v->bits == 16 ? CUABI_ARRAY_FORMAT_UINT16
          : v->bits == 32 ? CUABI_ARRAY_FORMAT_UINT32 : -1;
        break;
    case CUABI_DTYPE_BOOL:
        f = CUABI_ARRAY_FORMAT_UINT8;
        break;
    case CUABI_DTYPE_FLOAT:
        f = v->bits == 16 ? CUABI_ARRAY_FORMAT_FLOAT16 : v->bits == 32 ? CUABI_ARRAY_FORMAT_FLOAT32
          : -1;
        break;
    default:
        break;
    }
    if (f < 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the view's dtype (code %d, %d bits) has no array format; arrays "
                            "and textures hold 8-, 16- and 32-bit integers, float16 and float32 "
                            "(convert the data first, e.g. float64 to float32)", caller,
                            (int)v->code, (int)v->bits);
    *out = f;
    return CUABI_SUCCESS;
}

bool cuabi__array_format_filters(int format, int read_mode, const char **why)
{
    switch (format) {
    case CUABI_ARRAY_FORMAT_UINT32: case CUABI_ARRAY_FORMAT_INT32:
        *why = "32-bit integer formats always read as integers";
        return false;
    case CUABI_ARRAY_FORMAT_UINT8: case CUABI_ARRAY_FORMAT_INT8:
    case CUABI_ARRAY_FORMAT_UINT16: case CUABI_ARRAY_FORMAT_INT16:
        if (read_mode == CUABI_TEXTURE_READ_ELEMENT_TYPE) {
            *why = "8- and 16-bit integers read as the element type are integers (read them as "
                   "CUABI_TEXTURE_READ_NORMALIZED_FLOAT to filter)";
            return false;
        }
        return true;
    default:
        return true;
    }
}

/* ------------------------------------------------------------ devices */

cuabi_status cuabi__array_view_device(cuabi__device **out, const cuabi__view *v,
                                      cuabi_device *device, const char *caller)
{
    void *obj;
    if (device) {
        CUABI__TRY(cuabi__handle_get(device, CUABI__T_DEVICE, &obj, caller));
        cuabi__device *d = obj;
        if (v->device_type == CUABI_DLPACK_CUDA && v->device_id != d->ordinal)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: the view is memory of device %d, not of device %d (copy it "
                                "there first)", caller, (int)v->device_id, d->ordinal);
        cuabi__object_retain(&d->base);
        *out = d;
        return CUABI_SUCCESS;
    }
    int ordinal = v->device_type == CUABI_DLPACK_CUDA ? v->device_id : 0;
    cuabi_device *h;
    CUABI__TRY(cuabi_device_get(&h, ordinal));
    CUABI__TRY(cuabi__handle_get(h, CUABI__T_DEVICE, &obj, caller));
    *out = obj;            /* cuabi_device_get's reference */
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ making */

#define KNOWN_FLAGS 0x1ffu

/* The description's rules, before the driver sees it. */
static cuabi_status check_desc(const cuabi_array_desc *d, long *elem, unsigned *block,
                               const char *caller)
{
    *elem = cuabi__array_format_elem((int)d->format, d->num_channels, block);
    if (*elem < 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: desc.format = %d is not a "
                            "cuabi_array_format", caller, (int)d->format);
    CUABI__CHECK_ARG(d->num_channels == 1 || d->num_channels == 2 || d->num_channels == 4,
                     "%s: desc.num_channels = %u; arrays have 1, 2 or 4 channels", caller,
                     d->num_channels);
    CUABI__CHECK_ARG((d->flags & ~KNOWN_FLAGS) == 0, "%s: unknown flags 0x%x in desc.flags",
                     caller, d->flags & ~KNOWN_FLAGS);
    CUABI__CHECK_ARG(d->width >= 1, "%s: desc.width is 0; an array has at least one element",
                     caller);
    bool layered = d->flags & CUABI_ARRAY_LAYERED, cube = d->flags & CUABI_ARRAY_CUBEMAP;
    if (cube) {
        CUABI__CHECK_ARG(d->width == d->height, "%s: a cube map's faces are square; desc.width "
                         "is %zu, desc.height %zu", caller, d->width, d->height);
        CUABI__CHECK_ARG(layered ? d->depth > 0 && d->depth % 6 == 0 : d->depth == 6,
                         "%s: a %scube map has desc.depth %s, not %zu", caller,
                         layered ? "layered " : "", layered ? "a multiple of 6 (6 faces per "
                         "layer)" : "6 (its faces)", d->depth);
    } else if (layered) {
        CUABI__CHECK_ARG(d->depth >= 1, "%s: a layered array has desc.depth layers, at least 1",
                         caller);
    } else {
        CUABI__CHECK_ARG(d->height > 0 || d->depth == 0, "%s: a 1-D array (desc.height 0) has "
                         "desc.depth 0, not %zu (set CUABI_ARRAY_LAYERED for layers)", caller,
                         d->depth);
    }
    if (*block > 1)
        CUABI__CHECK_ARG(d->height > 0, "%s: block-compressed formats make 2-D arrays (set "
                         "desc.height)", caller);
    return CUABI_SUCCESS;
}

/* Bytes of a whole-array copy; false when it does not fit. */
static bool whole_bytes(uint64_t *out, const cuabi_array_desc *d, size_t elem, unsigned block)
{
    size_t w = (d->width + block - 1) / block;
    size_t h = d->height ? (d->height + block - 1) / block : 1;
    size_t n;
    return cuabi__size_mul(&n, w, elem) && cuabi__size_mul(&n, n, h) &&
           cuabi__size_mul(&n, n, d->depth ? d->depth : 1) && (*out = n, true);
}

static void array_destroy(cuabi__object *o)
{
    cuabi__array *a = (cuabi__array *)o;
    if (a->parent) {
        cuabi__object_release(&a->parent->base);
    } else {
        const cuabi__driver *drv;
        cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the caller's back */
        if (cuabi__driver_get_for(&drv, "cuabi_array_release") == CUABI_SUCCESS &&
            drv->cuArrayDestroy) {
            (void)cuabi__device_enter(&scope, a->device, drv);   /* destroyed even if refused */
            CUABI__CU_RELEASE(drv, cuArrayDestroy, a->cu);
        }
        (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    }
    cuabi__object_release(&a->device->base);
    cuabi__free(a);
}

/* Publish a new array object over `cu`; on failure `cu` is destroyed
 * (unless it belongs to `parent`) and nothing is left. */
static cuabi_status array_publish(cuabi_array **out, cuabi__device *dev, CUarray cu,
                                  const cuabi_array_desc *desc, cuabi__mipmapped_array *parent,
                                  int level, const cuabi__driver *drv, const char *caller)
{
    unsigned block;
    long elem = cuabi__array_format_elem((int)desc->format, desc->num_channels, &block);
    cuabi__array *a = cuabi__calloc_in(1, sizeof *a, caller);
    cuabi_status st = a ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    if (a) {
        a->cu = cu;
        a->device = dev;
        a->parent = parent;
        a->level = level;
        a->desc = *desc;
        a->desc.version = CUABI_ARRAY_DESC_VERSION;
        a->elem = elem > 0 ? (size_t)elem : 0;
        a->block = block;
        st = cuabi__handle_register(&a->base, CUABI__T_ARRAY, array_destroy);
    }
    if (st != CUABI_SUCCESS) {
        if (!parent)
            CUABI__CU_RELEASE(drv, cuArrayDestroy, cu);
        cuabi__free(a);
        return st;
    }
    cuabi__object_retain(&dev->base);
    if (parent)
        cuabi__object_retain(&parent->base);
    *out = CUABI__HANDLE(a, cuabi_array);
    return CUABI_SUCCESS;
}

static CUDA_ARRAY3D_DESCRIPTOR driver_desc(const cuabi_array_desc *d)
{
    CUDA_ARRAY3D_DESCRIPTOR c;
    memset(&c, 0, sizeof c);
    c.Width = d->width;
    c.Height = d->height;
    c.Depth = d->depth;
    c.Format = (CUarray_format)d->format;
    c.NumChannels = d->num_channels;
    c.Flags = d->flags;
    return c;
}

static cuabi_status array_make(cuabi_array **out, cuabi__device *dev, const cuabi_array_desc *desc,
                               const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    long elem;
    unsigned block;
    uint64_t bytes;
    CUABI__TRY(check_desc(desc, &elem, &block, caller));
    if (!whole_bytes(&bytes, desc, elem > 0 ? (size_t)elem : 1, block))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a %zu x %zu x %zu array of %ld-byte "
                            "elements does not fit in the address space", caller, desc->width,
                            desc->height, desc->depth, elem);
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    if (!drv->cuArrayDestroy)
        return cuabi__missing_entry("cuArrayDestroy", caller);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUDA_ARRAY3D_DESCRIPTOR c = driver_desc(desc);
    CUarray cu;
    CUABI__TRY_SCOPE(CUABI__CU_IN(caller, drv, cuArray3DCreate, &cu, &c));
    scope_st = array_publish(out, dev, cu, desc, NULL, -1, drv, caller);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, ARRAY, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_array_create(cuabi_array **out, cuabi_device *device,
                                              const cuabi_array_desc *desc)
{
    cuabi__device *dev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_OPTS(desc, "cuabi_array_desc", CUABI_ARRAY_DESC_VERSION, false);
    return array_make(out, dev, desc, __func__);
}

/* ------------------------------------------------------------ queries */

static void fill_info(cuabi_array_info *out, const cuabi_array_desc *d, size_t elem,
                      unsigned block, int level, unsigned levels, int device, uintptr_t native)
{
    unsigned version = out->version;
    memset((char *)out + sizeof out->version, 0, sizeof *out - sizeof out->version);
    out->version = version;
    out->width = d->width;
    out->height = d->height;
    out->depth = d->depth;
    out->format = d->format;
    out->num_channels = d->num_channels;
    out->flags = d->flags;
    out->dims = (d->flags & (CUABI_ARRAY_LAYERED | CUABI_ARRAY_CUBEMAP))
                    ? (d->flags & CUABI_ARRAY_CUBEMAP ? 2 : d->height ? 2 : 1)
                    : d->depth ? 3 : d->height ? 2 : 1;
    out->layers = (d->flags & (CUABI_ARRAY_LAYERED | CUABI_ARRAY_CUBEMAP)) ? d->depth : 1;
    out->element_size = elem;
    out->block = block;
    uint64_t bytes = 0;
    if (elem)
        (void)whole_bytes(&bytes, d, elem, block);
    out->size_bytes = bytes;
    out->level = level;
    out->num_levels = levels;
    out->device = device;
    out->native = native;
}

CUABI_EXTERN(cuabi_status) cuabi_array_get_info(cuabi_array_info *out, cuabi_array *array)
{
    cuabi__array *a;
    CUABI__CHECK_OPTS(out, "cuabi_array_info", CUABI_ARRAY_INFO_VERSION, false);
    CUABI__GET(a, array, ARRAY);
    fill_info(out, &a->desc, a->elem, a->block, a->level, 1, a->device->ordinal,
              (uintptr_t)a->cu);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_array_device(cuabi_device **out, cuabi_array *array)
{
    cuabi__array *a;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(a, array, ARRAY);
    *out = CUABI__HANDLE(a->device, cuabi_device);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_array_native_handle(uintptr_t *out, cuabi_array *array)
{
    cuabi__array *a;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(a, array, ARRAY);
    *out = (uintptr_t)a->cu;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ mipmaps */

static void mipmapped_destroy(cuabi__object *o)
{
    cuabi__mipmapped_array *m = (cuabi__mipmapped_array *)o;
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* a release: the caller's back */
    if (cuabi__driver_get_for(&drv, "cuabi_mipmapped_array_release") == CUABI_SUCCESS &&
        drv->cuMipmappedArrayDestroy) {
        (void)cuabi__device_enter(&scope, m->device, drv);   /* destroyed even if refused */
        CUABI__CU_RELEASE(drv, cuMipmappedArrayDestroy, m->cu);
    }
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    cuabi__object_release(&m->device->base);
    cuabi__free(m);
}

CUABI_EXTERN(cuabi_status) cuabi_mipmapped_array_create(cuabi_mipmapped_array **out,
                                                        cuabi_device *device,
                                                        const cuabi_array_desc *desc,
                                                        unsigned int num_levels)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_OPTS(desc, "cuabi_array_desc", CUABI_ARRAY_DESC_VERSION, false);
    long elem;
    unsigned block;
    CUABI__TRY(check_desc(desc, &elem, &block, __func__));
    CUABI__CHECK_ARG(num_levels >= 1 && num_levels <= CUABI_ARRAY_MAX_LEVELS,
                     "%s: num_levels = %u; a mipmapped array has 1 to %d levels", __func__,
                     num_levels, CUABI_ARRAY_MAX_LEVELS);
    size_t largest = desc->width;
    if (desc->height > largest)
        largest = desc->height;
    if (!(desc->flags & (CUABI_ARRAY_LAYERED | CUABI_ARRAY_CUBEMAP)) && desc->depth > largest)
        largest = desc->depth;
    unsigned most = 1;
    while (most < CUABI_ARRAY_MAX_LEVELS && (largest >> most) != 0)
        most++;
    CUABI__CHECK_ARG(num_levels <= most, "%s: num_levels = %u, but a largest extent of %zu "
                     "halves to 1 after %u levels", __func__, num_levels, largest, most);
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuMipmappedArrayDestroy)
        return cuabi__missing_entry("cuMipmappedArrayDestroy", __func__);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUDA_ARRAY3D_DESCRIPTOR c = driver_desc(desc);
    CUmipmappedArray cu;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuMipmappedArrayCreate, &cu, &c, num_levels));
    cuabi__mipmapped_array *m = cuabi__calloc(1, sizeof *m);
    cuabi_status st = m ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    if (m) {
        m->cu = cu;
        m->device = dev;
        m->desc = *desc;
        m->desc.version = CUABI_ARRAY_DESC_VERSION;
        m->num_levels = num_levels;
        st = cuabi__handle_register(&m->base, CUABI__T_MIPMAPPED_ARRAY, mipmapped_destroy);
    }
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuMipmappedArrayDestroy, cu);
        cuabi__free(m);
        CUABI__SCOPE_RETURN(st);
    }
    cuabi__object_retain(&dev->base);
    *out = CUABI__HANDLE(m, cuabi_mipmapped_array);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, MIPMAPPED_ARRAY, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_mipmapped_array_get_level(cuabi_array **out,
                                                           cuabi_mipmapped_array *mipmapped_array,
                                                           unsigned int level)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__mipmapped_array *m;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(m, mipmapped_array, MIPMAPPED_ARRAY);
    CUABI__CHECK_ARG(level < m->num_levels, "%s: level %u; the mipmapped array has %u", __func__,
                     level, m->num_levels);
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, m->device, drv));
    CUarray cu;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuMipmappedArrayGetLevel, &cu, m->cu, level));
    CUDA_ARRAY3D_DESCRIPTOR c;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuArray3DGetDescriptor, &c, cu));
    cuabi_array_desc d = m->desc;
    d.width = c.Width;
    d.height = c.Height;
    d.depth = c.Depth;
    if (!(c.Width >= 1 && c.Width <= m->desc.width && c.Height <= m->desc.height &&
          c.Depth <= m->desc.depth))
        CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the driver describes level %u as "
                            "%zu x %zu x %zu, larger than level 0", __func__, level, c.Width,
                            c.Height, c.Depth));
    CUABI__SCOPE_RETURN(array_publish(out, m->device, cu, &d, m, (int)level, drv, __func__));
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, ARRAY, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_mipmapped_array_get_info(cuabi_array_info *out,
                                                          cuabi_mipmapped_array *mipmapped_array)
{
    cuabi__mipmapped_array *m;
    CUABI__CHECK_OPTS(out, "cuabi_array_info", CUABI_ARRAY_INFO_VERSION, false);
    CUABI__GET(m, mipmapped_array, MIPMAPPED_ARRAY);
    unsigned block;
    long elem = cuabi__array_format_elem((int)m->desc.format, m->desc.num_channels, &block);
    fill_info(out, &m->desc, elem > 0 ? (size_t)elem : 0, block, -1, m->num_levels,
              m->device->ordinal, (uintptr_t)m->cu);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ copy plans */

/* A box of the array in copy units: x and w in elements or blocks, y and h
 * in rows or block rows, z and d in slices (layers, faces). */
typedef struct box {
    size_t x, y, z, w, h, d;
} box;

static const char *const axis_name[3] = { "width", "height", "depth" };

/* `r` (NULL: the whole array) against the array's extents; with
 * `extent` the box takes that extent instead of the region's (the
 * destination of an array-to-array copy). */
static cuabi_status resolve_region(box *b, const cuabi__array *a, const cuabi_array_region *r,
                                   const box *extent, const char *which, const char *caller)
{
    if (r && (r->version == 0 || r->version > CUABI_ARRAY_REGION_VERSION))
        return cuabi__error(CUABI_ERROR_INVALID_VERSION, "%s: cuabi_array_region version %u is "
                            "not supported (use CUABI_ARRAY_REGION_INIT)", caller, r->version);
    if (a->elem == 0)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the %sarray has a video format "
                            "(%d), whose planes cuabi does not copy; copy with the driver through "
                            "cuabi_array_native_handle()", caller, which, (int)a->desc.format);
    size_t ext[3] = { a->desc.width, a->desc.height ? a->desc.height : 1,
                      a->desc.depth ? a->desc.depth : 1 };
    size_t off[3] = { r ? r->x : 0, r ? r->y : 0, r ? r->z : 0 };
    size_t len[3] = { r ? r->width : 0, r ? r->height : 0, r ? r->depth : 0 };
    size_t unit[3] = { a->block, a->block, 1 }, out_off[3], out_len[3];
    for (int i = 0; i < 3; i++) {
        if (off[i] >= ext[i])
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %sregion starts at %zu "
                                "along its %s, past the array's %zu", caller, which, off[i],
                                axis_name[i], ext[i]);
        if (extent)
            len[i] = i == 0 ? extent->w * a->block : i == 1 ? extent->h * a->block : extent->d;
        else if (len[i] == 0)
            len[i] = ext[i] - off[i];
        if (len[i] > ext[i] - off[i])
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %sregion's %s (%zu from "
                                "%zu) runs past the array's %zu", caller, which, axis_name[i],
                                len[i], off[i], ext[i]);
        if (unit[i] > 1 && (off[i] % unit[i] || (len[i] % unit[i] && off[i] + len[i] != ext[i])))
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %sregion (%zu from %zu "
                                "along its %s) does not fall on the format's %zux%zu blocks",
                                caller, which, len[i], off[i], axis_name[i], unit[i], unit[i]);
        out_off[i] = off[i] / unit[i];
        out_len[i] = (len[i] + unit[i] - 1) / unit[i];
    }
    *b = (box){ out_off[0], out_off[1], out_off[2], out_len[0], out_len[1], out_len[2] };
    return CUABI_SUCCESS;
}

/* The linear side of a copy. */
typedef struct linear {
    CUmemorytype type;      /* HOST or DEVICE */
    uintptr_t ptr;
    size_t pitch, rows;     /* bytes between rows; rows between slices */
    size_t slice;           /* > 0: slices this many bytes apart, one copy each */
} linear;

/* Pitch and rows defaulted and checked; *reach: the bytes from the first
 * that the copy touches. */
static cuabi_status linear_reach(size_t *reach, linear *l, const box *b, size_t elem,
                                 const char *caller)
{
    size_t wbytes, n;
    if (!cuabi__size_mul(&wbytes, b->w, elem))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the region's rows overflow", caller);
    if (l->pitch == 0)
        l->pitch = wbytes;
    if (l->pitch < wbytes)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a pitch of %zu bytes is less than "
                            "one row of the region (%zu bytes)", caller, l->pitch, wbytes);
    if (l->rows == 0)
        l->rows = b->h;
    if (l->rows < b->h)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu rows per slice is less than the "
                            "region's height (%zu rows)", caller, l->rows, b->h);
    /* ((d - 1) * rows + (h - 1)) * pitch + wbytes */
    if (!cuabi__size_mul_add(&n, b->d - 1, l->rows, b->h - 1) ||
        !cuabi__size_mul_add(&n, n, l->pitch, wbytes))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the linear side (%zu slices of %zu "
                            "rows %zu bytes apart) does not fit in the address space", caller,
                            b->d, l->rows, l->pitch);
    *reach = n;
    return CUABI_SUCCESS;
}

static size_t stride_bytes(int64_t stride, size_t item, bool *ok)
{
    size_t s;
    *ok = stride > 0 && cuabi__size_mul(&s, (size_t)stride, item);
    return *ok ? s : 0;
}

/* A view's layout as the linear side of a copy of box `b` of `a`. */
static cuabi_status view_linear(linear *l, const cuabi__view *v, const cuabi__array *a,
                                const box *b, bool writing, const char *caller)
{
    if (a->block > 1)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: views of block-compressed arrays are "
                            "not supported; copy the blocks from host memory or a buffer", caller);
    if (writing && (v->flags & CUABI_VIEW_READ_ONLY))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view is read-only", caller);
    if (v->bits % 8)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view's elements are %d bits, "
                            "not whole bytes", caller, (int)v->bits);
    size_t item = (size_t)v->bits / 8;
    int nd = v->ndim;
    bool channel_dim = false;
    if (item != a->elem) {
        unsigned ch = a->desc.num_channels;
        if (ch == 1 || item * ch != a->elem || nd < 1 || v->shape[nd - 1] != (int64_t)ch)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: the view's %zu-byte elements%s are not the array's (%zu "
                                "bytes: %u channel%s); give a view of %zu-byte elements, or of "
                                "%zu-byte ones with a last dimension of %u", caller, item,
                                nd >= 1 ? "" : " (0-d)", a->elem, ch, ch == 1 ? "" : "s",
                                a->elem, a->elem / ch, ch);
        if (v->strides[nd - 1] != 1)
            return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the view's channels are %lld "
                                "elements apart; an element's channels must be contiguous",
                                caller, (long long)v->strides[nd - 1]);
        channel_dim = true;
        nd--;
    }
    /* The array's dimensions, outermost first, and the box's extents in them. */
    size_t want[3];
    int role[3], n = 0;           /* role: 2 depth, 1 height, 0 width */
    if (a->desc.depth)
        want[n] = b->d, role[n++] = 2;
    if (a->desc.height)
        want[n] = b->h, role[n++] = 1;
    want[n] = b->w, role[n++] = 0;
    int64_t st[3] = { 0, 0, 0 };  /* element strides by role */
    for (int i = 0; i < (nd > n ? nd : n); i++) {
        int vi = nd - 1 - i, ai = n - 1 - i;
        int64_t ext = vi >= 0 ? v->shape[vi] : 1;
        size_t w = ai >= 0 ? want[ai] : 1;
        if (ext < 0 || (uint64_t)ext != w)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: the view's shape does not match the region: %s %lld where "
                                "the region has %zu (the view gives the region's %s%s%s, "
                                "outermost first%s)", caller,
                                vi >= 0 ? "extent" : "a missing dimension of", (long long)ext, w,
                                a->desc.depth ? "depth or layers, " : "",
                                a->desc.height ? "height, " : "", "width",
                                channel_dim ? ", then the channels" : "");
        if (vi >= 0 && ai >= 0)
            st[role[ai]] = v->strides[vi];
    }
    bool ok;
    size_t wbytes = b->w * a->elem;   /* fits: the view holds it */
    size_t row_step = channel_dim ? (size_t)a->desc.num_channels : 1;
    if (b->w > 1 && (st[0] <= 0 || (size_t)st[0] != row_step))
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the view's rows are not contiguous "
                            "(elements %lld apart); copy through a contiguous view", caller,
                            (long long)(st[0] / (int64_t)row_step));
    l->pitch = wbytes;
    if (b->h > 1) {
        l->pitch = stride_bytes(st[1], item, &ok);
        if (!ok || l->pitch < wbytes)
            return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the view's rows are %lld "
                                "elements apart; a copy needs rows at least a row apart, in "
                                "order (no negative, zero or overlapping strides)", caller,
                                (long long)st[1]);
    }
    l->rows = b->h;
    l->slice = 0;
    if (b->d > 1) {
        size_t sb = stride_bytes(st[2], item, &ok);
        size_t span = (b->h - 1) * l->pitch + wbytes;
        if (!ok || sb < span)
            return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the view's slices are %lld "
                                "elements apart; a copy needs slices that do not overlap, in "
                                "order", caller, (long long)st[2]);
        if (sb % l->pitch == 0)
            l->rows = sb / l->pitch;
        else
            l->slice = sb;          /* one copy per slice */
    }
    l->ptr = v->data + (uintptr_t)v->byte_offset;
    l->type = v->device_type == CUABI_DLPACK_CPU || v->device_type == CUABI_DLPACK_CUDA_HOST
                  ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (v->device_type == CUABI_DLPACK_CUDA && v->device_id != a->device->ordinal)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view is memory of device %d, "
                            "the array of device %d (copy between devices with "
                            "cuabi_peer_copy_view first)", caller, (int)v->device_id,
                            a->device->ordinal);
    return CUABI_SUCCESS;
}

static cuabi_status buffer_linear(linear *l, cuabi__buffer *buf, size_t offset,
                                  const cuabi__array *a, const box *b, const char *caller)
{
    size_t reach;
    CUABI__TRY(linear_reach(&reach, l, b, a->elem, caller));
    CUABI__TRY(cuabi__buffer_check_range(buf, offset, reach, "given", caller));
    if (buf->device && buf->kind == CUABI_MEMORY_DEVICE && buf->device != a->device)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the buffer is memory of device %d, "
                            "the array of device %d", caller, buf->device->ordinal,
                            a->device->ordinal);
    l->ptr = buf->ptr + offset;
    l->type = buf->kind == CUABI_MEMORY_HOST || buf->kind == CUABI_MEMORY_PINNED
                  ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    l->slice = 0;
    return CUABI_SUCCESS;
}

static cuabi_status host_linear(linear *l, const void *p, size_t size, const cuabi__array *a,
                                const box *b, const char *caller)
{
    size_t reach;
    CUABI__CHECK_ARG(p, "%s: the host pointer is NULL", caller);
    CUABI__CHECK_ARG(cuabi__span_fits((uintptr_t)p, size), "%s: the host memory (%zu bytes) wraps "
                     "around the address space", caller, size);
    CUABI__TRY(linear_reach(&reach, l, b, a->elem, caller));
    if (reach > size)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the copy reaches %zu bytes of host "
                            "memory (%zu slices of %zu rows, %zu bytes apart), but only %zu are "
                            "given", caller, reach, b->d, l->rows, l->pitch, size);
    l->ptr = (uintptr_t)p;
    l->type = CU_MEMORYTYPE_HOST;
    l->slice = 0;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ running copies */

static void set_array_side(CUDA_MEMCPY3D *c, bool dst, const cuabi__array *a, const box *b)
{
    if (dst) {
        c->dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c->dstArray = a->cu;
        c->dstXInBytes = b->x * a->elem;
        c->dstY = b->y;
        c->dstZ = b->z;
    } else {
        c->srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c->srcArray = a->cu;
        c->srcXInBytes = b->x * a->elem;
        c->srcY = b->y;
        c->srcZ = b->z;
    }
}

static void set_linear_side(CUDA_MEMCPY3D *c, bool dst, const linear *l, uintptr_t ptr)
{
    if (dst) {
        c->dstMemoryType = l->type;
        if (l->type == CU_MEMORYTYPE_HOST)
            c->dstHost = (void *)ptr;
        else
            c->dstDevice = (CUdeviceptr)ptr;
        c->dstPitch = l->pitch;
        c->dstHeight = l->rows;
    } else {
        c->srcMemoryType = l->type;
        if (l->type == CU_MEMORYTYPE_HOST)
            c->srcHost = (const void *)ptr;
        else
            c->srcDevice = (CUdeviceptr)ptr;
        c->srcPitch = l->pitch;
        c->srcHeight = l->rows;
    }
}

/* The stream of a copy on `dev`'s array; NULL for a synchronous copy. */
static cuabi_status copy_stream(cuabi__stream **s, cuabi_stream *stream, const cuabi__device *dev,
                                const char *caller)
{
    *s = NULL;
    if (!stream)
        return CUABI_SUCCESS;
    void *obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    *s = obj;
    if ((*s)->device != dev)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the stream is on device %d, the "
                            "array on device %d", caller, (*s)->device->ordinal, dev->ordinal);
    return CUABI_SUCCESS;
}

/* What a captured copy needs kept: the arrays, and the buffer or view. */
typedef struct keep_list {
    cuabi__object *objects[3];
    cuabi__buffer *buffer;
} keep_list;

static cuabi_status keep_for_capture(cuabi__stream *s, const keep_list *k, const char *caller)
{
    if (CUABI__LIKELY(!s || !cuabi__capturing()))
        return CUABI_SUCCESS;
    for (int i = 0; i < 3; i++)
        if (k->objects[i])
            CUABI__TRY(cuabi__capture_keep_object(s->cu_stream, k->objects[i], caller));
    return k->buffer ? cuabi__capture_keep_buffers(s, k->buffer, NULL, caller) : CUABI_SUCCESS;
}

/* Queue (or run) a copy between `a`'s box and the linear side `l` (NULL:
 * `other`'s box, an array-to-array copy with `a` the destination). */
static cuabi_status run_copy(const cuabi__array *a, const box *b, bool into_array,
                             const linear *l, const cuabi__array *other, const box *ob,
                             cuabi__stream *s, const keep_list *k, const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    CUABI__TRY(keep_for_capture(s, k, caller));
    CUstream raw = CU_STREAM_LEGACY;
    if (s) {   /* cuMemcpy3DAsync works in the current context, as cuMemcpyAsync */
        raw = s->cu_stream;
        CUABI__TRY_SCOPE(cuabi__stream_context_enter(&scope, s, drv));
    } else {
        CUABI__TRY_SCOPE(cuabi__device_enter(&scope, a->device, drv));
    }
    size_t copies = l && l->slice ? b->d : 1;
    for (size_t z = 0; z < copies; z++) {
        CUDA_MEMCPY3D c;
        memset(&c, 0, sizeof c);
        box one = *b;
        if (copies > 1) {
            one.z = b->z + z;
            one.d = 1;
        }
        set_array_side(&c, into_array, a, &one);
        if (l)
            set_linear_side(&c, !into_array, l, l->ptr + z * l->slice);
        else
            set_array_side(&c, false, other, ob);
        c.WidthInBytes = b->w * a->elem;
        c.Height = b->h;
        c.Depth = one.d;
        CUABI__TRY_SCOPE(CUABI__CU_IN(caller, drv, cuMemcpy3DAsync, &c, raw));
    }
    scope_st = s ? CUABI_SUCCESS : CUABI__CU_IN(caller, drv, cuStreamSynchronize, CU_STREAM_LEGACY);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ------------------------------------------------------------ the copies */

CUABI_EXTERN(cuabi_status) cuabi_array_copy_from_host(cuabi_array *array,
                                                      const cuabi_array_region *region,
                                                      const void *src, size_t size,
                                                      size_t src_pitch, size_t src_rows,
                                                      cuabi_stream *stream)
{
    cuabi__array *a;
    cuabi__stream *s;
    box b;
    linear l = { .pitch = src_pitch, .rows = src_rows };
    CUABI__GET(a, array, ARRAY);
    CUABI__TRY(copy_stream(&s, stream, a->device, __func__));
    CUABI__TRY(resolve_region(&b, a, region, NULL, "", __func__));
    CUABI__TRY(host_linear(&l, src, size, a, &b, __func__));
    keep_list k = { { &a->base, NULL, NULL }, NULL };
    return run_copy(a, &b, true, &l, NULL, NULL, s, &k, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_array_copy_to_host(void *dst, size_t size, size_t dst_pitch,
                                                    size_t dst_rows, cuabi_array *array,
                                                    const cuabi_array_region *region,
                                                    cuabi_stream *stream)
{
    cuabi__array *a;
    cuabi__stream *s;
    box b;
    linear l = { .pitch = dst_pitch, .rows = dst_rows };
    CUABI__GET(a, array, ARRAY);
    CUABI__TRY(copy_stream(&s, stream, a->device, __func__));
    CUABI__TRY(resolve_region(&b, a, region, NULL, "", __func__));
    CUABI__TRY(host_linear(&l, dst, size, a, &b, __func__));
    keep_list k = { { &a->base, NULL, NULL }, NULL };
    return run_copy(a, &b, false, &l, NULL, NULL, s, &k, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_array_copy_from_buffer(cuabi_array *array,
                                                        const cuabi_array_region *region,
                                                        cuabi_buffer *buffer, size_t offset,
                                                        size_t pitch, size_t rows,
                                                        cuabi_stream *stream)
{
    cuabi__array *a;
    cuabi__buffer *buf;
    cuabi__stream *s;
    box b;
    linear l = { .pitch = pitch, .rows = rows };
    CUABI__GET(a, array, ARRAY);
    CUABI__GET(buf, buffer, BUFFER);
    CUABI__TRY(copy_stream(&s, stream, a->device, __func__));
    CUABI__TRY(resolve_region(&b, a, region, NULL, "", __func__));
    CUABI__TRY(buffer_linear(&l, buf, offset, a, &b, __func__));
    keep_list k = { { &a->base, NULL, NULL }, buf };
    return run_copy(a, &b, true, &l, NULL, NULL, s, &k, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_array_copy_to_buffer(cuabi_buffer *buffer, size_t offset,
                                                      size_t pitch, size_t rows,
                                                      cuabi_array *array,
                                                      const cuabi_array_region *region,
                                                      cuabi_stream *stream)
{
    cuabi__array *a;
    cuabi__buffer *buf;
    cuabi__stream *s;
    box b;
    linear l = { .pitch = pitch, .rows = rows };
    CUABI__GET(buf, buffer, BUFFER);
    CUABI__GET(a, array, ARRAY);
    CUABI__TRY(copy_stream(&s, stream, a->device, __func__));
    CUABI__TRY(resolve_region(&b, a, region, NULL, "", __func__));
    CUABI__TRY(buffer_linear(&l, buf, offset, a, &b, __func__));
    keep_list k = { { &a->base, NULL, NULL }, buf };
    return run_copy(a, &b, false, &l, NULL, NULL, s, &k, __func__);
}

static cuabi_status copy_view(cuabi__array *a, const cuabi_array_region *region, cuabi__view *v,
                              bool into_array, cuabi_stream *stream, const char *caller)
{
    cuabi__stream *s;
    box b;
    linear l;
    CUABI__TRY(copy_stream(&s, stream, a->device, caller));
    CUABI__TRY(resolve_region(&b, a, region, NULL, "", caller));
    CUABI__TRY(view_linear(&l, v, a, &b, !into_array, caller));
    keep_list k = { { &a->base, &v->base, NULL }, NULL };
    return run_copy(a, &b, into_array, &l, NULL, NULL, s, &k, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_array_copy_from_view(cuabi_array *array,
                                                      const cuabi_array_region *region,
                                                      cuabi_view *view, cuabi_stream *stream)
{
    cuabi__array *a;
    cuabi__view *v;
    CUABI__GET(a, array, ARRAY);
    CUABI__GET(v, view, VIEW);
    return copy_view(a, region, v, true, stream, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_array_copy_to_view(cuabi_view *view, cuabi_array *array,
                                                    const cuabi_array_region *region,
                                                    cuabi_stream *stream)
{
    cuabi__array *a;
    cuabi__view *v;
    CUABI__GET(v, view, VIEW);
    CUABI__GET(a, array, ARRAY);
    return copy_view(a, region, v, false, stream, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_array_copy(cuabi_array *dst, const cuabi_array_region *dst_region,
                                            cuabi_array *src, const cuabi_array_region *src_region,
                                            cuabi_stream *stream)
{
    cuabi__array *d, *sa;
    cuabi__stream *s;
    box db, sb;
    CUABI__GET(d, dst, ARRAY);
    CUABI__GET(sa, src, ARRAY);
    CUABI__CHECK_ARG(d->device == sa->device, "%s: the arrays are on devices %d and %d; copy "
                     "through a buffer", __func__, d->device->ordinal, sa->device->ordinal);
    CUABI__TRY(copy_stream(&s, stream, d->device, __func__));
    CUABI__TRY(resolve_region(&sb, sa, src_region, NULL, "source ", __func__));
    if (d->elem != sa->elem || d->block != sa->block)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the arrays' elements differ (%zu "
                            "and %zu bytes%s)", __func__, d->elem, sa->elem,
                            d->block != sa->block ? ", one block-compressed" : "");
    CUABI__TRY(resolve_region(&db, d, dst_region, &sb, "destination ", __func__));
    keep_list k = { { &d->base, &sa->base, NULL }, NULL };
    return run_copy(d, &db, true, NULL, sa, &sb, s, &k, __func__);
}

/* ------------------------------------------------------------ from a view */

/* The description of an array shaped as `v`. */
static cuabi_status desc_of_view(cuabi_array_desc *d, const cuabi__view *v, unsigned channels,
                                 unsigned flags, const char *caller)
{
    CUABI__CHECK_ARG(channels == 1 || channels == 2 || channels == 4,
                     "%s: num_channels = %u; arrays have 1, 2 or 4 channels", caller, channels);
    int format;
    CUABI__TRY(cuabi__array_format_of_dtype(&format, v, caller));
    int ns = v->ndim - (channels > 1);
    if (channels > 1 && (v->ndim < 1 || v->shape[v->ndim - 1] != (int64_t)channels))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: with %u channels the view's last "
                            "dimension is the channels; it is %lld", caller, channels,
                            v->ndim ? (long long)v->shape[v->ndim - 1] : 0LL);
    bool stacked = flags & (CUABI_ARRAY_LAYERED | CUABI_ARRAY_CUBEMAP);
    if (ns < 1 || ns > 3 || (stacked && ns < 2))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the view has %d dimension%s "
                            "besides the channels; an array takes 1 to 3%s", caller, ns,
                            ns == 1 ? "" : "s", stacked ? " (2 or 3 with its layers or faces "
                            "outermost)" : "");
    for (int i = 0; i < ns; i++)
        CUABI__CHECK_ARG(v->shape[i] > 0, "%s: the view is empty (extent %lld in dimension %d)",
                         caller, (long long)v->shape[i], i);
    *d = (cuabi_array_desc)CUABI_ARRAY_DESC_INIT;
    d->format = (cuabi_array_format)format;
    d->num_channels = channels;
    d->flags = flags;
    const int64_t *sh = v->shape;
    d->width = (size_t)sh[ns - 1];
    if (ns >= 2) {
        if (ns == 2 && stacked)
            d->depth = (size_t)sh[0];          /* layers of 1-D rows */
        else
            d->height = (size_t)sh[ns - 2];
    }
    if (ns == 3)
        d->depth = (size_t)sh[0];
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_array_create_from_view(cuabi_array **out, cuabi_view *view,
                                                        unsigned int num_channels,
                                                        unsigned int flags,
                                                        cuabi_device *device,
                                                        cuabi_stream *stream)
{
    cuabi__view *v;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(v, view, VIEW);
    cuabi_array_desc d;
    CUABI__TRY(desc_of_view(&d, v, num_channels, flags, __func__));
    cuabi__device *dev;
    CUABI__TRY(cuabi__array_view_device(&dev, v, device, __func__));
    cuabi_array *a = NULL;
    cuabi_status st = array_make(&a, dev, &d, __func__);
    if (st == CUABI_SUCCESS) {
        void *obj;
        (void)cuabi__handle_get(a, CUABI__T_ARRAY, &obj, __func__);
        st = copy_view(obj, NULL, v, true, stream, __func__);
    }
    cuabi__object_release(&dev->base);
    if (st != CUABI_SUCCESS) {
        if (a)
            cuabi__handle_release(a, CUABI__T_ARRAY);
        return st;
    }
    *out = a;
    return CUABI_SUCCESS;
}
