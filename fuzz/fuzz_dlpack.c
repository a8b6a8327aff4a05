/* DLPack import from random DLManagedTensorVersioned, DLManagedTensor and
 * DLTensor contents: version, device, dtype, ndim, shape, strides, byte
 * offset, flags. Whatever the contents, the import either succeeds or
 * fails with a status, and the producer's deleter runs exactly once (after
 * the view is released, or at the failed import). Views that import are
 * queried, sliced and exported again, and the exported tensor's deleter is
 * called. The data pointer is never dereferenced by an import, so it points
 * at a buffer of the right size only when the input says so. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuabi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct reader { const uint8_t *p; size_t n; } reader;
static uint64_t take(reader *r, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++) {
        v = v << 8 | (r->n ? *r->p : 0);
        if (r->n) r->p++, r->n--;
    }
    return v;
}

enum { MAXDIM = 128 }; /* ndim is an int8_t here: the arrays hold any ndim */
typedef struct producer {
    int64_t shape[MAXDIM], strides[MAXDIM];
    int deletes;
} producer;

static void versioned_deleter(DLManagedTensorVersioned *t) { ((producer *)t->manager_ctx)->deletes++; }
static void legacy_deleter(DLManagedTensor *t) { ((producer *)t->manager_ctx)->deletes++; }

static void exercise(cuabi_view *v, reader *r)
{
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    int ndim = 0, c, f;
    uint64_t nbytes;
    uintptr_t ptr;
    int64_t shape[MAXDIM], strides[MAXDIM];
    (void)cuabi_view_get_info(&info, v);
    (void)cuabi_view_ndim(&ndim, v);
    (void)cuabi_view_shape(shape, MAXDIM, v);
    (void)cuabi_view_strides(strides, MAXDIM, v);
    (void)cuabi_view_is_c_contiguous(&c, v);
    (void)cuabi_view_is_f_contiguous(&f, v);
    (void)cuabi_view_nbytes(&nbytes, v);
    (void)cuabi_view_data_pointer(&ptr, v);
    if (ndim > 0 && ndim <= MAXDIM) {
        int64_t start[MAXDIM], stop[MAXDIM], step[MAXDIM];
        for (int i = 0; i < ndim; i++) {
            start[i] = (int8_t)take(r, 1);
            stop[i] = (int8_t)take(r, 1);
            step[i] = (int8_t)take(r, 1);
        }
        cuabi_view *s = NULL;
        if (cuabi_view_slice(&s, v, ndim, start, stop, step) == CUABI_SUCCESS) {
            (void)cuabi_view_nbytes(&nbytes, s);
            cuabi_view_release(s);
        }
    }
    DLManagedTensorVersioned *out = NULL;
    if (cuabi_view_to_dlpack_versioned(&out, v) == CUABI_SUCCESS)
        out->deleter(out);
    DLManagedTensor *legacy = NULL;
    if (cuabi_view_to_dlpack(&legacy, v) == CUABI_SUCCESS)
        legacy->deleter(legacy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = { data, size };
    static double buffer[4096];
    unsigned mode = (unsigned)take(&r, 1);
    producer p = { .deletes = 0 };
    DLTensor t;
    memset(&t, 0, sizeof t);
    unsigned major = (unsigned)take(&r, 1), minor = (unsigned)take(&r, 1);
    uint64_t flags = take(&r, 1);
    t.device.device_type = (DLDeviceType)(int8_t)take(&r, 1);
    t.device.device_id = (int8_t)take(&r, 1);
    t.ndim = (int8_t)take(&r, 1);
    t.dtype.code = (uint8_t)take(&r, 1);
    t.dtype.bits = (uint8_t)take(&r, 1);
    t.dtype.lanes = (uint16_t)take(&r, 2);
    t.byte_offset = take(&r, 1) & 0x80 ? take(&r, 8) : take(&r, 1);
    int nd = t.ndim < 0 ? 0 : t.ndim;
    for (int i = 0; i < nd; i++) {
        uint8_t how = (uint8_t)take(&r, 1);
        p.shape[i] = how & 0x80 ? (int64_t)take(&r, 8) : (int64_t)(how & 0x7f);
        uint8_t s = (uint8_t)take(&r, 1);
        p.strides[i] = s & 0x80 ? (int64_t)take(&r, 8) : (int8_t)(s << 1) >> 1;
    }
    t.shape = mode & 0x10 && t.ndim ? NULL : p.shape;
    t.strides = mode & 0x20 ? NULL : p.strides;
    t.data = mode & 0x40 ? NULL : mode & 0x80 ? (void *)(uintptr_t)take(&r, 8) : buffer;

    cuabi_view *v = NULL;
    int owned = 1;
    switch (mode & 3) {
    case 0: {
        DLManagedTensorVersioned mt = { .version = { major, minor }, .manager_ctx = &p,
                                        .deleter = versioned_deleter, .flags = flags,
                                        .dl_tensor = t };
        if (mode & 4) mt.deleter = NULL; /* a producer without a deleter is allowed */
        if (cuabi_view_from_dlpack_versioned(&v, &mt) == CUABI_SUCCESS) {
            exercise(v, &r);
            cuabi_view_release(v);
        }
        if (mode & 4) owned = 0;
        break;
    }
    case 1: {
        DLManagedTensor mt = { .dl_tensor = t, .manager_ctx = &p, .deleter = legacy_deleter };
        if (mode & 4) mt.deleter = NULL;
        if (cuabi_view_from_dlpack(&v, &mt) == CUABI_SUCCESS) {
            exercise(v, &r);
            cuabi_view_release(v);
        }
        if (mode & 4) owned = 0;
        break;
    }
    default:
        owned = 0;
        if (cuabi_view_from_dltensor(&v, &t, (unsigned)flags) == CUABI_SUCCESS) {
            exercise(v, &r);
            cuabi_view_release(v);
        }
        break;
    }
    /* Exactly once, whatever happened (no deleter: never). */
    if (p.deletes != owned)
        __builtin_trap();
    return 0;
}
