/* Tensor-map encoding parameters are untrusted input: a view (device type,
 * dtype, rank, address, extents, strides) and a box or im2col corners with
 * options (data type, element strides, interleave, swizzle, L2 promotion,
 * OOB fill, device) go through cuabi_tensormap_encode_tiled / _im2col
 * against the fake driver (tests/fixtures/fake_driver.h). An encoding either fails
 * with a status and a message naming the function, or succeeds and then is
 * read back (info, bytes), copied into a pack and pointed at a second view.
 * Nothing may crash, leak a handle or reach the driver with a rank, box or
 * stride it documents as invalid.
 *
 * Input: 16 control bytes, then little-endian fields read as needed (zeros
 * past the end). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/stream.h"
#include "runtime/event.h"
#include "fake_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static uint64_t take(reader *r, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)(r->p < r->end ? *r->p++ : 0) << (8 * i);
    return v;
}

/* dtypes views accept, and a few they refuse */
static const struct { uint8_t code, bits; } dtypes[] = {
    { kDLFloat, 32 }, { kDLFloat, 16 }, { kDLFloat, 64 }, { kDLBfloat, 16 }, { kDLInt, 8 },
    { kDLInt, 16 }, { kDLInt, 32 }, { kDLInt, 64 }, { kDLUInt, 8 }, { kDLUInt, 32 },
    { kDLUInt, 64 }, { 6 /* bool */, 8 }, { 5 /* complex */, 64 }, { 5, 128 }, { kDLFloat, 8 },
    { kDLInt, 4 },
};

static const int devtypes[] = { kDLCUDA, kDLCUDAHost, 13 /* managed */, kDLCPU };

/* A view of `ndim` dimensions; NULL when the view itself is refused. */
static cuabi_view *make_view(reader *r, uint8_t ctl, int ndim, uintptr_t addr, int64_t *shape,
                             int64_t *strides)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)addr;
    t.device.device_type = (DLDeviceType)devtypes[ctl % 4];
    t.device.device_id = (ctl >> 2) & 1;
    unsigned d = (unsigned)take(r, 1) % (sizeof dtypes / sizeof dtypes[0]);
    t.dtype.code = dtypes[d].code;
    t.dtype.bits = dtypes[d].bits;
    t.dtype.lanes = 1;
    t.ndim = ndim;
    t.shape = shape;
    t.strides = ctl & 8 ? NULL : strides;
    cuabi_view *v = NULL;
    if (cuabi_view_from_dltensor(&v, &t, 0) != CUABI_SUCCESS)
        return NULL;
    return v;
}

static void read_options(reader *r, cuabi_tensormap_options *o)
{
    o->data_type = (cuabi_tensormap_data_type)((int)(int8_t)take(r, 1) % 16);
    for (int i = 0; i < 5; i++)
        o->element_strides[i] = (uint32_t)take(r, 1) % 10;
    o->interleave = (cuabi_tensormap_interleave)((int)(int8_t)take(r, 1) % 4);
    o->swizzle = (cuabi_tensormap_swizzle)((int)(int8_t)take(r, 1) % 8);
    o->l2_promotion = (cuabi_tensormap_l2_promotion)((int)(int8_t)take(r, 1) % 5);
    o->oob_fill = (cuabi_tensormap_oob_fill)((int)(int8_t)take(r, 1) % 3);
    o->device = (int)(int8_t)take(r, 1) % 3;
}

/* A failed call: a known status, a message naming the function. */
static void check_failure(cuabi_status st, const char *fn)
{
    if (st != CUABI_ERROR_TENSOR_MAP && st != CUABI_ERROR_INVALID_ARGUMENT &&
        st != CUABI_ERROR_INVALID_VERSION && st != CUABI_ERROR_NOT_SUPPORTED)
        __builtin_trap();
    const char *m = cuabi_last_error()->message;
    if (strncmp(m, fn, strlen(fn)) != 0)
        __builtin_trap();
}

/* What the fake driver received must keep the documented rules. */
static void check_reached(void)
{
    const fake_tensormap_call *c = &fake_tm_last;
    if (c->rank < 1 || c->rank > 5 || (c->kind == 2 && c->rank < 3) || (uintptr_t)c->address % 16)
        __builtin_trap();
    for (unsigned i = 0; i < c->rank; i++) {
        if (c->dims[i] < 1 || c->dims[i] > (1ull << 32) || c->estrides[i] < 1 || c->estrides[i] > 8)
            __builtin_trap();
        if (c->kind == 1 && (c->box[i] < 1 || c->box[i] > 256))
            __builtin_trap();
        if (i + 1 < c->rank && (c->strides[i] % 16 || c->strides[i] >= (1ull << 40)))
            __builtin_trap();
    }
}

static void use(cuabi_tensormap *tm, cuabi_view *other)
{
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    uint64_t bytes[16];
    if (cuabi_tensormap_get_info(&info, tm) || cuabi_tensormap_bytes(bytes, sizeof bytes, tm))
        __builtin_trap();
    if (info.rank != (int)fake_tm_last.rank || info.address != (uintptr_t)fake_tm_last.address)
        __builtin_trap();
    cuabi_argpack *p;
    if (cuabi_argpack_create(&p, "ptr, tensormap") || cuabi_argpack_set_tensormap(p, 1, tm) ||
        cuabi_argpack_set_tensormap(p, 0, tm) != CUABI_ERROR_ARGUMENT_MISMATCH)
        __builtin_trap();
    cuabi_argpack_release(p);
    if (other) {
        cuabi_status st = cuabi_tensormap_replace_address(tm, other);
        if (st != CUABI_SUCCESS)
            check_failure(st, "cuabi_tensormap_replace_address");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cuabi_device *dev;
    if (!dev) {
        fake_driver_install();
        fake_driver_install_tensormaps();
        if (cuabi_device_get(&dev, 0))
            __builtin_trap();
    }
    size_t live = cuabi__handle_live_count();
    reader r = { data, data + size };
    uint8_t ctl = (uint8_t)take(&r, 1), shape_ctl = (uint8_t)take(&r, 1);
    int ndim = (int)take(&r, 1) % 8;
    uintptr_t addr = 0x1000000 + (uintptr_t)take(&r, 2);
    int64_t shape[8], strides[8];
    for (int i = 0; i < ndim; i++) {
        shape[i] = shape_ctl & 1 ? (int64_t)take(&r, 8) : (int64_t)(take(&r, 2) % 4097);
        strides[i] = shape_ctl & 2 ? (int64_t)take(&r, 8) : (int64_t)(int16_t)take(&r, 2);
    }
    cuabi_view *v = make_view(&r, ctl, ndim, addr, shape, strides);
    cuabi_view *other = make_view(&r, ctl, ndim, addr + (uintptr_t)take(&r, 2) * 16, shape, strides);
    cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
    read_options(&r, &o);
    const cuabi_tensormap_options *opts = ctl & 16 ? NULL : &o;
    cuabi_tensormap *tm = NULL;
    cuabi_status st;
    const char *fn;
    int before = fake_tm_calls;
    if (ctl & 32) {
        int lower[4], upper[4];
        size_t spatial = (size_t)take(&r, 1) % 5;
        for (int i = 0; i < 4; i++) {
            lower[i] = (int)(int16_t)take(&r, 2);
            upper[i] = (int)(int16_t)take(&r, 2);
        }
        uint32_t channels = (uint32_t)take(&r, 2) % 300, pixels = (uint32_t)take(&r, 2) % 1100;
        fn = "cuabi_tensormap_encode_im2col";
        st = cuabi_tensormap_encode_im2col(&tm, v, lower, upper, spatial, channels, pixels, opts);
    } else {
        uint32_t box[8];
        size_t rank = (size_t)take(&r, 1) % 8;
        for (int i = 0; i < 8; i++)
            box[i] = (uint32_t)take(&r, 2) % 300;
        fn = "cuabi_tensormap_encode_tiled";
        st = cuabi_tensormap_encode_tiled(&tm, v, box, rank, opts);
    }
    if (st == CUABI_SUCCESS) {
        if (fake_tm_calls != before + 1)
            __builtin_trap();
        check_reached();
        use(tm, other);
        cuabi_tensormap_release(tm);
    } else {
        if (tm || fake_tm_calls != before)
            __builtin_trap();
        if (st != CUABI_ERROR_INVALID_HANDLE || v)   /* a refused view is a NULL handle */
            check_failure(st, fn);
    }
    if (other)
        cuabi_view_release(other);
    if (v)
        cuabi_view_release(v);
    if (cuabi__handle_live_count() != live)
        __builtin_trap();
    return 0;
}
