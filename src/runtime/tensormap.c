/* TMA tensor maps: CUtensorMap descriptors encoded from views.
 *
 * The driver answers a broken rule with CUDA_ERROR_INVALID_VALUE and no
 * word of which, so every rule its documentation states is checked here
 * first (and the fake driver of the tests can stay simple). The view is
 * described in the driver's order (dimension 0 innermost) once, in a
 * tm_layout; the kind-specific parts (box, or im2col corners) and the
 * options are checked against it; the descriptor is encoded into an
 * aligned CUtensorMap on the stack (the driver wants 64 bytes of alignment,
 * which a heap object cannot promise) and kept as plain bytes. */
#include "runtime/argpack.h"
#include "runtime/memory.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANK CUABI_TENSORMAP_MAX_RANK

/* The encoding parameters, in the driver's order: [0] is innermost. */
typedef struct tm_layout {
    int rank;
    CUtensorMapDataType data_type;
    size_t elem;                    /* bytes per element */
    uintptr_t address;
    cuuint64_t dims[MAX_RANK];
    cuuint64_t strides[MAX_RANK];   /* bytes; strides[0] is the element size */
    cuuint32_t box[MAX_RANK];       /* tiled */
    cuuint32_t estrides[MAX_RANK];
    int lower[MAX_RANK - 2], upper[MAX_RANK - 2];   /* im2col */
    cuuint32_t channels, pixels;
} tm_layout;

typedef struct cuabi__tensormap {
    cuabi__object base;
    uint64_t map[CU_TENSOR_MAP_NUM_QWORDS];   /* the CUtensorMap bytes */
    cuabi__view *view;                        /* retained: keeps the memory alive */
    cuabi__device *device;                    /* retained */
    cuabi_tensormap_kind kind;
    cuabi_tensormap_options opts;             /* as given, data_type resolved */
    tm_layout layout;
} cuabi__tensormap;

static cuabi_status rule(const char *caller, const char *fmt, ...) CUABI__PRINTF(2, 3);
static cuabi_status rule(const char *caller, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cuabi__error(CUABI_ERROR_TENSOR_MAP, "%s: %s", caller, msg);
}

/* ------------------------------------------------------------ element types */

static const struct {
    const char *name;
    size_t size;
    bool is_float;
} data_types[] = {
    { "UINT8", 1, false }, { "UINT16", 2, false }, { "UINT32", 4, false },
    { "INT32", 4, false }, { "UINT64", 8, false }, { "INT64", 8, false },
    { "FLOAT16", 2, true }, { "FLOAT32", 4, true }, { "FLOAT64", 8, true },
    { "BFLOAT16", 2, true }, { "FLOAT32_FTZ", 4, true }, { "TFLOAT32", 4, true },
    { "TFLOAT32_FTZ", 4, true },
};
#define NUM_DATA_TYPES (int)(sizeof data_types / sizeof data_types[0])

/* The TMA type of a view's dtype, or -1. */
static int type_of_dtype(int code, int bits)
{
    switch (code) {
    case CUABI_DTYPE_INT:
        return bits == 8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : bits == 16 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
             : bits == 32 ? CU_TENSOR_MAP_DATA_TYPE_INT32 : CU_TENSOR_MAP_DATA_TYPE_INT64;
    case CUABI_DTYPE_UINT:
        return bits == 8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : bits == 16 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
             : bits == 32 ? CU_TENSOR_MAP_DATA_TYPE_UINT32 : CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case CUABI_DTYPE_FLOAT:
        return bits == 16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : bits == 32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
             : CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case CUABI_DTYPE_BFLOAT:
        return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case CUABI_DTYPE_COMPLEX:
    case CUABI_DTYPE_OPAQUE_HANDLE:
        return -1;
    default:           /* bool and the 8-bit float formats: bytes */
        return bits == 8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : -1;
    }
}

static cuabi_status resolve_data_type(tm_layout *l, const cuabi__view *v, int wanted,
                                      const char *caller)
{
    l->elem = (size_t)v->bits / 8;
    if (wanted == CUABI_TENSORMAP_DATA_TYPE_AUTO) {
        int t = type_of_dtype(v->code, v->bits);
        if (t < 0)
            return rule(caller, "the view's dtype (code %d, %d bits) has no TMA element type: set "
                        "options.data_type to a type of the same size (UINT64 for complex64) or "
                        "view the data as real numbers", (int)v->code, (int)v->bits);
        l->data_type = (CUtensorMapDataType)t;
        return CUABI_SUCCESS;
    }
    if (wanted < 0 || wanted >= NUM_DATA_TYPES)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: options.data_type = %d is not a cuabi_tensormap_data_type (the "
                            "packed 4- and 6-bit types are not supported)", caller, wanted);
    if (data_types[wanted].size != l->elem)
        return rule(caller, "options.data_type %s has %zu-byte elements, the view's have %zu",
                    data_types[wanted].name, data_types[wanted].size, l->elem);
    l->data_type = (CUtensorMapDataType)wanted;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ the view */

static size_t address_alignment(int interleave)
{
    return interleave == CUABI_TENSORMAP_INTERLEAVE_32B ? 32 : 16;
}

/* Extents and byte strides of the view in the driver's order, with the
 * rules on them: device memory, aligned address, extents 1..2^32, the
 * innermost dimension contiguous, other strides positive multiples of 16
 * (32) bytes below 2^40. A dimension of extent 1 is only ever read at
 * index 0, so its stride does not matter: it gets one that passes. */
static cuabi_status describe_view(tm_layout *l, const cuabi__view *v, int interleave,
                                  const char *caller)
{
    if (v->device_type == CUABI_DLPACK_CPU)
        return rule(caller, "TMA reads GPU memory; the view is host memory (kDLCPU): copy it to "
                    "a device buffer, or use pinned or managed memory");
    int r = v->ndim;
    l->rank = r;
    l->address = v->data + (uintptr_t)v->byte_offset;
    size_t align = address_alignment(interleave);
    if (l->address % align)
        return rule(caller, "the global address 0x%llx (the view's first element) is not %zu-byte "
                    "aligned, as TMA requires%s", (unsigned long long)l->address, align,
                    align == 32 ? " with 32-byte interleave" : "");
    size_t stride_align = align;
    for (int d = 0; d < r; d++) {            /* d: driver dimension; view dimension r-1-d */
        int vd = r - 1 - d;
        int64_t ext = v->shape[vd], st = v->strides[vd];
        if (ext < 1 || (uint64_t)ext > (1ull << 32))
            return rule(caller, "dimension %d of the view has extent %lld; TMA takes extents of 1 "
                        "to 2^32", vd, (long long)ext);
        l->dims[d] = (cuuint64_t)ext;
        if (d == 0) {
            if (st != 1 && ext != 1)
                return rule(caller, "the innermost dimension (%d) must be contiguous: its stride is "
                            "%lld elements, TMA has none for it (copy to a contiguous buffer, or "
                            "transpose the box instead)", vd, (long long)st);
            l->strides[0] = l->elem;
            continue;
        }
        if (ext == 1) {
            cuuint64_t packed = l->strides[d - 1] * l->dims[d - 1];
            packed = (packed + stride_align - 1) / stride_align * stride_align;
            /* Past 2^40 (a huge tensor below it) the previous stride, itself
             * a legal one, will do (fuzz_tensormap found the overflow). */
            l->strides[d] = packed < (1ull << 40) ? packed : l->strides[d - 1];
            continue;
        }
        if (st <= 0)
            return rule(caller, "dimension %d of the view has stride %lld; TMA needs positive "
                        "strides (no reversed or broadcast dimensions)", vd, (long long)st);
        if ((uint64_t)st >= (1ull << 40) / l->elem)
            return rule(caller, "dimension %d has a stride of %lld elements of %zu bytes; TMA "
                        "takes strides below 2^40 bytes", vd, (long long)st, l->elem);
        uint64_t bytes = (uint64_t)st * l->elem;
        if (bytes % stride_align)
            return rule(caller, "dimension %d has a stride of %llu bytes, not a multiple of %zu as "
                        "TMA requires%s (pad the rows)", vd, (unsigned long long)bytes,
                        stride_align, stride_align == 32 ? " with 32-byte interleave" : "");
        l->strides[d] = bytes;
    }
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ options */

static const char *swizzle_name(int s)
{
    static const char *const names[] = { "NONE", "32B", "64B", "128B", "128B_ATOM_32B",
                                         "128B_ATOM_32B_FLIP_8B", "128B_ATOM_64B" };
    return names[s];
}

static size_t swizzle_span(int s)
{
    return s == CUABI_TENSORMAP_SWIZZLE_32B ? 32 : s == CUABI_TENSORMAP_SWIZZLE_64B ? 64 : 128;
}

/* Enum ranges (INVALID_ARGUMENT: not a value at all). */
static cuabi_status check_enums(const cuabi_tensormap_options *o, const char *caller)
{
    const struct { const char *name; int value, max; } e[] = {
        { "interleave", (int)o->interleave, CUABI_TENSORMAP_INTERLEAVE_32B },
        { "swizzle", (int)o->swizzle, CUABI_TENSORMAP_SWIZZLE_128B_ATOM_64B },
        { "l2_promotion", (int)o->l2_promotion, CUABI_TENSORMAP_L2_PROMOTION_256B },
        { "oob_fill", (int)o->oob_fill, CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA },
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        if (e[i].value < 0 || e[i].value > e[i].max)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: options.%s = %d is not a cuabi_tensormap_%s", caller,
                                e[i].name, e[i].value, e[i].name);
    return CUABI_SUCCESS;
}

/* The rules on options that hold for both kinds. `inner_bytes` is the
 * innermost box row (tiled: box[0] elements; im2col: the channels). */
static cuabi_status check_options(tm_layout *l, const cuabi_tensormap_options *o,
                                  size_t inner_bytes, const char *inner_what, const char *caller)
{
    if (o->interleave != CUABI_TENSORMAP_INTERLEAVE_NONE && l->rank < 3)
        return rule(caller, "an interleaved layout needs rank 3 or more; the view has %d", l->rank);
    if (o->interleave == CUABI_TENSORMAP_INTERLEAVE_32B && o->swizzle != CUABI_TENSORMAP_SWIZZLE_32B)
        return rule(caller, "32-byte interleave requires the 32-byte swizzle (options.swizzle is "
                    "%s)", swizzle_name(o->swizzle));
    if (o->interleave == CUABI_TENSORMAP_INTERLEAVE_NONE && o->swizzle != CUABI_TENSORMAP_SWIZZLE_NONE &&
        inner_bytes > swizzle_span(o->swizzle))
        return rule(caller, "%s is %zu bytes, longer than the %s swizzle's span of %zu bytes",
                    inner_what, inner_bytes, swizzle_name(o->swizzle), swizzle_span(o->swizzle));
    for (int d = 0; d < l->rank; d++) {
        int vd = l->rank - 1 - d;
        uint32_t s = o->element_strides[vd] ? o->element_strides[vd] : 1;
        if (s > 8)
            return rule(caller, "options.element_strides[%d] = %u; TMA takes element strides of "
                        "1 to 8", vd, s);
        l->estrides[d] = s;
    }
    if (o->oob_fill == CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
        !data_types[l->data_type].is_float)
        return rule(caller, "the NaN out-of-bounds fill needs a floating-point element type, not "
                    "%s", data_types[l->data_type].name);
    return CUABI_SUCCESS;
}

static cuabi_status check_box(tm_layout *l, const uint32_t *box, size_t rank,
                              const cuabi_tensormap_options *o, const char *caller)
{
    if (rank != (size_t)l->rank)
        return rule(caller, "the box has %zu dimensions, the view %d", rank, l->rank);
    CUABI__CHECK_ARG(box, "%s: box is NULL", caller);
    for (int d = 0; d < l->rank; d++) {
        int vd = l->rank - 1 - d;
        if (box[vd] < 1 || box[vd] > 256)
            return rule(caller, "box[%d] = %u; TMA boxes have 1 to 256 elements per dimension", vd,
                        box[vd]);
        l->box[d] = box[vd];
    }
    size_t inner = l->box[0] * l->elem;
    if (o->interleave == CUABI_TENSORMAP_INTERLEAVE_NONE && inner % 16)
        return rule(caller, "the box's innermost row (box[%d] = %u elements of %zu bytes) is %zu "
                    "bytes, not a multiple of 16 as TMA requires", l->rank - 1, l->box[0], l->elem,
                    inner);
    return check_options(l, o, inner, "the box's innermost row", caller);
}

static cuabi_status check_im2col(tm_layout *l, const int *lower, const int *upper,
                                 size_t spatial, uint32_t channels, uint32_t pixels,
                                 const cuabi_tensormap_options *o, const char *caller)
{
    if (l->rank < 3)
        return rule(caller, "an im2col tensor map has 3 to 5 dimensions (N, spatial ..., C); the "
                    "view has %d", l->rank);
    if (spatial != (size_t)l->rank - 2)
        return rule(caller, "%zu corner offsets given, the view has %d spatial dimensions (its "
                    "ndim minus 2)", spatial, l->rank - 2);
    CUABI__CHECK_ARG(lower && upper, "%s: lower_corner and upper_corner must not be NULL", caller);
    static const int limit[] = { 32768, 128, 16 };     /* by rank 3, 4, 5 */
    int lim = limit[l->rank - 3];
    for (size_t i = 0; i < spatial; i++) {
        int d = (int)(spatial - 1 - i);                /* driver order: W first */
        if (lower[i] < -lim || lower[i] >= lim || upper[i] < -lim || upper[i] >= lim)
            return rule(caller, "corner offsets of spatial dimension %zu are %d and %d; with rank "
                        "%d TMA takes -%d to %d", i, lower[i], upper[i], l->rank, lim, lim - 1);
        l->lower[d] = lower[i];
        l->upper[d] = upper[i];
    }
    if (channels < 1 || channels > 256)
        return rule(caller, "channels_per_pixel = %u; TMA takes 1 to 256", channels);
    if (pixels < 1 || pixels > 1024)
        return rule(caller, "pixels_per_column = %u; TMA takes 1 to 1024", pixels);
    l->channels = channels;
    l->pixels = pixels;
    l->box[0] = channels;
    for (int d = 1; d < l->rank; d++)
        l->box[d] = 1;
    return check_options(l, o, channels * l->elem, "a pixel's channels", caller);
}

/* ------------------------------------------------------------ the device */

/* The GPU that will read the map: retained into *out, made current in
 * *scope, with tensor maps (compute capability 9.0). */
static cuabi_status map_device(cuabi__context_scope *scope, cuabi__device **out,
                               const cuabi__view *v, int ordinal, const cuabi__driver **drv,
                               const char *caller)
{
    if (ordinal < 0)
        ordinal = v->device_type == CUABI_DLPACK_CUDA ? v->device_id : 0;
    else if (v->device_type == CUABI_DLPACK_CUDA && v->device_id != ordinal)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.device = %d, but the view "
                            "is memory of device %d", caller, ordinal, v->device_id);
    cuabi_device *handle;
    cuabi_status got = cuabi_device_get(&handle, ordinal);
    if (got != CUABI_SUCCESS) {
        char why[512];
        snprintf(why, sizeof why, "%s", cuabi_last_error()->message);
        int cu = cuabi_last_error()->cu_result;
        cuabi__error(got, "%s: the map's device: %s", caller, why);
        cuabi__error_set_cu(cu);
        return got;
    }
    void *obj;
    (void)cuabi__handle_get(handle, CUABI__T_DEVICE, &obj, caller);
    cuabi__device *dev = obj;
    int major = 0;
    cuabi_status st = cuabi__driver_get(drv);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_IN(caller, *drv, cuDeviceGetAttribute, &major,
                          CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev->cu_device);
    if (st == CUABI_SUCCESS && major < 9)
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: tensor maps need a GPU of compute "
                          "capability 9.0 or newer; device %d is %d.x", caller, ordinal, major);
    if (st == CUABI_SUCCESS)
        st = cuabi__device_enter(scope, dev, *drv);
    if (st != CUABI_SUCCESS) {
        cuabi__object_release(&dev->base);
        return st;
    }
    *out = dev;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ encoding */

static cuabi_status driver_refused(CUresult r, const char *entry, const tm_layout *l,
                                   const char *caller)
{
    if (r != CUDA_ERROR_INVALID_VALUE)
        return cuabi__cu_check(r, entry, caller);
    cuabi__error(CUABI_ERROR_TENSOR_MAP, "%s: %s refused the descriptor (CUDA_ERROR_INVALID_VALUE) "
                 "though it keeps every documented rule cuabi checks: rank %d, %s elements at "
                 "0x%llx; the GPU may lack the swizzle mode asked for", caller, entry, l->rank,
                 data_types[l->data_type].name, (unsigned long long)l->address);
    cuabi__error_set_cu((int)r);
    return CUABI_ERROR_TENSOR_MAP;
}

static cuabi_status encode(CUtensorMap *m, cuabi_tensormap_kind kind, const tm_layout *l,
                           const cuabi_tensormap_options *o, const cuabi__driver *drv,
                           const char *caller)
{
    const char *entry = kind == CUABI_TENSORMAP_TILED ? "cuTensorMapEncodeTiled"
                                                       : "cuTensorMapEncodeIm2col";
    bool missing = kind == CUABI_TENSORMAP_TILED ? !drv->cuTensorMapEncodeTiled
                                                 : !drv->cuTensorMapEncodeIm2col;
    if (missing)
        return cuabi__missing_entry(entry, caller);
    CUresult r;
    if (kind == CUABI_TENSORMAP_TILED)
        r = CUABI__CU_RAW(drv, cuTensorMapEncodeTiled, m, l->data_type, (cuuint32_t)l->rank,
                          (void *)l->address, l->dims, l->strides + 1, l->box, l->estrides,
                          (CUtensorMapInterleave)o->interleave, (CUtensorMapSwizzle)o->swizzle,
                          (CUtensorMapL2promotion)o->l2_promotion,
                          (CUtensorMapFloatOOBfill)o->oob_fill);
    else
        r = CUABI__CU_RAW(drv, cuTensorMapEncodeIm2col, m, l->data_type, (cuuint32_t)l->rank,
                          (void *)l->address, l->dims, l->strides + 1, l->lower, l->upper,
                          l->channels, l->pixels, l->estrides,
                          (CUtensorMapInterleave)o->interleave, (CUtensorMapSwizzle)o->swizzle,
                          (CUtensorMapL2promotion)o->l2_promotion,
                          (CUtensorMapFloatOOBfill)o->oob_fill);
    return r == CUDA_SUCCESS ? CUABI_SUCCESS : driver_refused(r, entry, l, caller);
}

static void tensormap_destroy(cuabi__object *o)
{
    cuabi__tensormap *tm = (cuabi__tensormap *)o;
    cuabi__object_release(&tm->view->base);
    cuabi__object_release(&tm->device->base);
    cuabi__free(tm);
}

/* What both kinds share: the view, its layout and the options before the
 * kind's own checks (`check`), then the device, the driver and the handle. */
typedef cuabi_status (*kind_check)(tm_layout *l, const cuabi_tensormap_options *o,
                                   const void *args, const char *caller);

static cuabi_status make(cuabi_tensormap **out, cuabi_tensormap_kind kind, cuabi_view *view,
                         const cuabi_tensormap_options *options, kind_check check,
                         const void *args, const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    static const cuabi_tensormap_options defaults = CUABI_TENSORMAP_OPTIONS_INIT;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    *out = NULL;
    void *obj;
    CUABI__TRY(cuabi__handle_get(view, CUABI__T_VIEW, &obj, caller));
    cuabi__view *v = obj;
    if (options && (options->version == 0 || options->version > CUABI_TENSORMAP_OPTIONS_VERSION))
        return cuabi__error(CUABI_ERROR_INVALID_VERSION, "%s: cuabi_tensormap_options version %u "
                            "is not supported (use CUABI_TENSORMAP_OPTIONS_INIT)", caller,
                            options->version);
    cuabi_tensormap_options o = options ? *options : defaults;
    if (v->ndim < 1 || v->ndim > MAX_RANK)
        return rule(caller, "a tensor map has 1 to %d dimensions; the view has %d", MAX_RANK,
                    (int)v->ndim);
    tm_layout l;
    memset(&l, 0, sizeof l);
    CUABI__TRY(check_enums(&o, caller));
    CUABI__TRY(resolve_data_type(&l, v, (int)o.data_type, caller));
    o.data_type = (cuabi_tensormap_data_type)l.data_type;
    CUABI__TRY(describe_view(&l, v, (int)o.interleave, caller));
    CUABI__TRY(check(&l, &o, args, caller));

    cuabi__device *dev = NULL;
    const cuabi__driver *drv;
    CUABI__TRY_SCOPE(map_device(&scope, &dev, v, o.device, &drv, caller));
    CUtensorMap m;
    cuabi__tensormap *tm = NULL;
    cuabi_status st = encode(&m, kind, &l, &o, drv, caller);
    if (st == CUABI_SUCCESS) {
        tm = cuabi__calloc_in(1, sizeof *tm, caller);
        st = tm ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    }
    if (st == CUABI_SUCCESS) {
        memcpy(tm->map, &m, sizeof tm->map);
        tm->view = v;
        tm->device = dev;
        tm->kind = kind;
        o.device = dev->ordinal;
        tm->opts = o;
        tm->layout = l;
        st = cuabi__handle_register(&tm->base, CUABI__T_TENSORMAP, tensormap_destroy);
    }
    if (st != CUABI_SUCCESS) {
        cuabi__free(tm);
        cuabi__object_release(&dev->base);
        CUABI__SCOPE_RETURN(st);
    }
    cuabi__object_retain(&v->base);
    *out = CUABI__HANDLE(tm, cuabi_tensormap);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, TENSORMAP, caller);
}

typedef struct tiled_args { const uint32_t *box; size_t rank; } tiled_args;

static cuabi_status tiled_check(tm_layout *l, const cuabi_tensormap_options *o, const void *args,
                                const char *caller)
{
    const tiled_args *a = args;
    return check_box(l, a->box, a->rank, o, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_tensormap_encode_tiled(cuabi_tensormap **out, cuabi_view *view,
                                                        const uint32_t *box, size_t rank,
                                                        const cuabi_tensormap_options *options)
{
    tiled_args a = { box, rank };
    return make(out, CUABI_TENSORMAP_TILED, view, options, tiled_check, &a, __func__);
}

typedef struct im2col_args {
    const int *lower, *upper;
    size_t spatial;
    uint32_t channels, pixels;
} im2col_args;

static cuabi_status im2col_check(tm_layout *l, const cuabi_tensormap_options *o,
                                 const void *args, const char *caller)
{
    const im2col_args *a = args;
    return check_im2col(l, a->lower, a->upper, a->spatial, a->channels, a->pixels, o, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_tensormap_encode_im2col(
    cuabi_tensormap **out, cuabi_view *view, const int *lower_corner, const int *upper_corner,
    size_t spatial_rank, uint32_t channels_per_pixel, uint32_t pixels_per_column,
    const cuabi_tensormap_options *options)
{
    im2col_args a = { lower_corner, upper_corner, spatial_rank, channels_per_pixel,
                      pixels_per_column };
    return make(out, CUABI_TENSORMAP_IM2COL, view, options, im2col_check, &a, __func__);
}

/* ------------------------------------------------------------ replacing */

/* The new view against the encoded one: same device, element size, extents
 * and byte strides (as described, extent-1 dimensions included). */
static cuabi_status same_layout(const cuabi__tensormap *tm, const cuabi__view *v, tm_layout *nl,
                                const char *caller)
{
    const tm_layout *l = &tm->layout;
    if (v->device_type == CUABI_DLPACK_CUDA && v->device_id != tm->device->ordinal)
        return rule(caller, "the view is memory of device %d, the tensor map was encoded for "
                    "device %d", v->device_id, tm->device->ordinal);
    if (v->ndim != l->rank || (size_t)v->bits / 8 != l->elem)
        return rule(caller, "the view has %d dimensions of %d-byte elements, the tensor map %d of "
                    "%zu", (int)v->ndim, v->bits / 8, l->rank, l->elem);
    memset(nl, 0, sizeof *nl);
    nl->elem = l->elem;
    CUABI__TRY(describe_view(nl, v, (int)tm->opts.interleave, caller));
    for (int d = 0; d < l->rank; d++)
        if (nl->dims[d] != l->dims[d] || nl->strides[d] != l->strides[d])
            return rule(caller, "the view's dimension %d (extent %llu, stride %llu bytes) differs "
                        "from the tensor map's (extent %llu, stride %llu bytes): only the address "
                        "may change", l->rank - 1 - d, (unsigned long long)nl->dims[d],
                        (unsigned long long)nl->strides[d], (unsigned long long)l->dims[d],
                        (unsigned long long)l->strides[d]);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_tensormap_replace_address(cuabi_tensormap *tensormap,
                                                           cuabi_view *view)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__tensormap *tm;
    cuabi__view *v;
    const cuabi__driver *drv;
    CUABI__GET(tm, tensormap, TENSORMAP);
    CUABI__GET(v, view, VIEW);
    tm_layout nl;
    CUABI__TRY(same_layout(tm, v, &nl, __func__));
    CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuTensorMapReplaceAddress)
        return cuabi__missing_entry("cuTensorMapReplaceAddress", __func__);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, tm->device, drv));
    CUtensorMap m;
    memcpy(&m, tm->map, sizeof m);
    CUresult r = CUABI__CU_RAW(drv, cuTensorMapReplaceAddress, &m, (void *)nl.address);
    if (r != CUDA_SUCCESS)
        CUABI__SCOPE_RETURN(driver_refused(r, "cuTensorMapReplaceAddress", &nl, __func__));
    memcpy(tm->map, &m, sizeof tm->map);
    tm->layout.address = nl.address;
    cuabi__object_retain(&v->base);
    cuabi__view *old = tm->view;
    tm->view = v;
    cuabi__object_release(&old->base);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ------------------------------------------------------------ queries */

CUABI_EXTERN(cuabi_status) cuabi_tensormap_get_info(cuabi_tensormap_info *out,
                                                    cuabi_tensormap *tensormap)
{
    cuabi__tensormap *tm;
    CUABI__CHECK_OPTS(out, "cuabi_tensormap_info", CUABI_TENSORMAP_INFO_VERSION, false);
    CUABI__GET(tm, tensormap, TENSORMAP);
    const tm_layout *l = &tm->layout;
    unsigned version = out->version;
    memset((char *)out + sizeof out->version, 0, sizeof *out - sizeof out->version);
    out->version = version;
    out->kind = tm->kind;
    out->data_type = (cuabi_tensormap_data_type)l->data_type;
    out->rank = l->rank;
    out->address = l->address;
    for (int d = 0; d < l->rank; d++) {
        int vd = l->rank - 1 - d;
        out->shape[vd] = l->dims[d];
        out->byte_strides[vd] = l->strides[d];
        out->box[vd] = l->box[d];
        out->element_strides[vd] = l->estrides[d];
    }
    out->interleave = tm->opts.interleave;
    out->swizzle = tm->opts.swizzle;
    out->l2_promotion = tm->opts.l2_promotion;
    out->oob_fill = tm->opts.oob_fill;
    out->device = tm->device->ordinal;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_tensormap_bytes(void *out, size_t size, cuabi_tensormap *tensormap)
{
    cuabi__tensormap *tm;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(tm, tensormap, TENSORMAP);
    CUABI__CHECK_ARG(size == sizeof tm->map, "%s: size is %zu; a tensor map is %zu bytes",
                     __func__, size, sizeof tm->map);
    memcpy(out, tm->map, sizeof tm->map);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_tensormap_view(cuabi_view **out, cuabi_tensormap *tensormap)
{
    cuabi__tensormap *tm;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(tm, tensormap, TENSORMAP);
    *out = CUABI__HANDLE(tm->view, cuabi_view);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_tensormap(cuabi_argpack *pack, size_t slot,
                                                       cuabi_tensormap *tensormap)
{
    cuabi__argpack *p;
    cuabi__tensormap *tm;
    CUABI__GET(p, pack, ARGPACK);
    CUABI__GET(tm, tensormap, TENSORMAP);
    CUABI__CHECK_ARG(slot < p->nslots, "%s: slot %zu is out of range (the pack has %zu)", __func__,
                     slot, p->nslots);
    const cuabi__arg_item *it = &p->items[p->slot_item[slot]];
    if (it->kind != CUABI_ARG_TENSORMAP && !(it->kind == CUABI_ARG_RAW && it->size == sizeof tm->map))
        return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                            "%s: slot %zu is not a tensormap slot (a %zu-byte parameter of kind "
                            "%d); a tensor map goes to a `tensormap` slot or a 128-byte raw one",
                            __func__, slot, it->size, (int)it->kind);
    memcpy(p->params[slot], tm->map, sizeof tm->map);
    return CUABI_SUCCESS;
}
