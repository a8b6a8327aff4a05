/* cuabi_view_from_exchange with untrusted exchange tables: a chain of up to
 * four tables with random major versions and links (NULL, forward, back to
 * themselves: cycles), a missing or present export function, and a
 * producer that fails (with or without handing out a tensor) or exports a
 * random tensor. Whatever the input, the call succeeds or fails with a
 * status, and every tensor the producer handed out is deleted exactly once
 * (after the view is released, or at a refused import). */
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

enum { MAXDIM = 16 };
static struct {
    reader *r;
    int fail;                    /* 0: export; 1: return -1; 2: -1 with a tensor out */
    int handed_out, deletes;
    int64_t shape[MAXDIM], strides[MAXDIM];
    double buffer[512];
    DLManagedTensorVersioned mt;
} st;

static void deleter(DLManagedTensorVersioned *t) { (void)t; st.deletes++; }

static int export(void *py_object, DLManagedTensorVersioned **out)
{
    (void)py_object;
    reader *r = st.r;
    DLManagedTensorVersioned *mt = &st.mt;
    memset(mt, 0, sizeof *mt);
    mt->version.major = (unsigned)take(r, 1) % 3;
    mt->version.minor = (unsigned)take(r, 1);
    mt->deleter = deleter;
    mt->flags = take(r, 1);
    DLTensor *t = &mt->dl_tensor;
    t->device.device_type = (DLDeviceType)(int8_t)take(r, 1);
    t->ndim = (int8_t)take(r, 1) % (MAXDIM + 2);
    t->dtype.code = (uint8_t)take(r, 1) % 8;
    t->dtype.bits = (uint8_t)take(r, 1);
    t->dtype.lanes = (uint16_t)take(r, 1);
    int nd = t->ndim < 0 ? 0 : t->ndim > MAXDIM ? MAXDIM : t->ndim;
    for (int i = 0; i < nd; i++) {
        st.shape[i] = (int8_t)take(r, 1);
        st.strides[i] = (int8_t)take(r, 1);
    }
    t->shape = st.shape;
    t->strides = take(r, 1) & 1 ? NULL : st.strides;
    t->data = st.buffer;
    if (st.fail == 1) {
        *out = NULL;
        return -1;
    }
    *out = mt;
    if (st.fail == 2)
        return -1;               /* a broken producer: failure, yet a tensor */
    st.handed_out = 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = { data, size };
    memset(&st, 0, sizeof st);
    st.r = &r;
    DLPackExchangeAPI tables[4];
    memset(tables, 0, sizeof tables);
    unsigned n = 1 + (unsigned)take(&r, 1) % 4;
    for (unsigned i = 0; i < n; i++) {
        uint8_t how = (uint8_t)take(&r, 1);
        tables[i].header.version.major = how & 3;
        tables[i].header.version.minor = how >> 2;
        unsigned link = (unsigned)take(&r, 1) % 6;   /* 0..3: a table; else none */
        tables[i].header.prev_api = link < 4 ? &tables[link].header : NULL;
        if (take(&r, 1) & 1)
            tables[i].managed_tensor_from_py_object_no_sync = export;
    }
    st.fail = (int)(take(&r, 1) % 4);
    if (st.fail == 3)
        st.fail = 0;
    cuabi_view *v = NULL;
    cuabi_status s = cuabi_view_from_exchange(&v, &tables[0], (void *)&r);
    if (s == CUABI_SUCCESS) {
        if (!v || !st.handed_out || st.deletes)
            __builtin_trap();
        uint64_t nbytes;
        (void)cuabi_view_nbytes(&nbytes, v);
        cuabi_view_release(v);
    } else if (v) {
        __builtin_trap();
    }
    /* Handed out and accepted by the call: deleted exactly once. A producer
     * reporting failure keeps what it made (the call ignores its tensor). */
    if (st.deletes != st.handed_out)
        __builtin_trap();
    return 0;
}
