/* DLPack import and export: layouts, ownership (deleters exactly once),
 * validation of every bad input, flags, threads. */
#include "testutil.h"
#include "runtime/memory.h"

#include <pthread.h>
#include <stddef.h>

START_TEST(dlpack_layouts_match_the_spec)
{
    /* The numbers of the DLPack 1.x specification on LP64. */
    ck_assert_uint_eq(sizeof(DLPackVersion), 8);
    ck_assert_uint_eq(offsetof(DLPackVersion, minor), 4);
    ck_assert_uint_eq(sizeof(DLDevice), 8);
    ck_assert_uint_eq(sizeof(DLDataType), 4);
    ck_assert_uint_eq(sizeof(DLTensor), 48);
    ck_assert_uint_eq(offsetof(DLTensor, device), 8);
    ck_assert_uint_eq(offsetof(DLTensor, ndim), 16);
    ck_assert_uint_eq(offsetof(DLTensor, dtype), 20);
    ck_assert_uint_eq(offsetof(DLTensor, shape), 24);
    ck_assert_uint_eq(offsetof(DLTensor, strides), 32);
    ck_assert_uint_eq(offsetof(DLTensor, byte_offset), 40);
    ck_assert_uint_eq(sizeof(DLManagedTensorVersioned), 80);
    ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, version), 0);
    ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, manager_ctx), 8);
    ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, deleter), 16);
    ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, flags), 24);
    ck_assert_uint_eq(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
    ck_assert_uint_eq(sizeof(DLManagedTensor), 64);
    ck_assert_uint_eq(offsetof(DLManagedTensor, manager_ctx), 48);
    ck_assert_uint_eq(offsetof(DLManagedTensor, deleter), 56);
    ck_assert_uint_eq(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    ck_assert_uint_eq(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
    ck_assert_uint_eq(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
    ck_assert_int_eq(CUABI_VIEW_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
    ck_assert_int_eq(CUABI_VIEW_IS_COPIED, DLPACK_FLAG_BITMASK_IS_COPIED);
    ck_assert_int_eq(CUABI_DLPACK_CUDA, kDLCUDA);
    ck_assert_int_eq(CUABI_DLPACK_CUDA_MANAGED, kDLCUDAManaged);
    ck_assert_int_eq(CUABI_DTYPE_BFLOAT, kDLBfloat);
    ck_assert_int_eq(CUABI_DTYPE_COMPLEX, kDLComplex);
}
END_TEST

/* A producer: a heap tensor with a counting deleter. */
typedef struct producer {
    DLManagedTensorVersioned mt;
    int64_t shape[3], strides[3];
    float data[24];
    int *deletes;
} producer;

static _Atomic int deletes;
static void producer_deleter(DLManagedTensorVersioned *self)
{
    atomic_fetch_add(&deletes, 1);
    free(self->manager_ctx);
}

static DLManagedTensorVersioned *make_producer(void)
{
    producer *p = calloc(1, sizeof *p);
    p->mt.version.major = 1;
    p->mt.version.minor = 1;
    p->mt.manager_ctx = p;
    p->mt.deleter = producer_deleter;
    p->shape[0] = 4;
    p->shape[1] = 6;
    p->strides[0] = 6;
    p->strides[1] = 1;
    for (int i = 0; i < 24; i++) p->data[i] = (float)i;
    DLTensor *t = &p->mt.dl_tensor;
    t->data = p->data;
    t->device.device_type = kDLCPU;
    t->ndim = 2;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    t->shape = p->shape;
    t->strides = p->strides;
    return &p->mt;
}

typedef struct legacy_producer {
    DLManagedTensor mt;
    int64_t shape[1];
    int32_t data[5];
} legacy_producer;

static void legacy_deleter(DLManagedTensor *self)
{
    atomic_fetch_add(&deletes, 1);
    free(self->manager_ctx);
}

static DLManagedTensor *make_legacy(void)
{
    legacy_producer *p = calloc(1, sizeof *p);
    p->mt.manager_ctx = p;
    p->mt.deleter = legacy_deleter;
    p->shape[0] = 5;
    for (int i = 0; i < 5; i++) p->data[i] = i * 10;
    DLTensor *t = &p->mt.dl_tensor;
    t->data = p->data;
    t->device.device_type = kDLCPU;
    t->ndim = 1;
    t->dtype.code = kDLInt;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    t->shape = p->shape;
    t->strides = NULL; /* row-major */
    return &p->mt;
}

START_TEST(import_versioned_deletes_once_at_last_reference)
{
    atomic_store(&deletes, 0);
    size_t live = cuabi__handle_live_count();
    DLManagedTensorVersioned *t = make_producer();
    t->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, t));
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, v));
    ck_assert_int_eq(info.ndim, 2);
    ck_assert_int_eq(info.shape[1], 6);
    ck_assert_uint_eq(info.flags, CUABI_VIEW_READ_ONLY);
    ck_assert_int_eq(info.device_type, CUABI_DLPACK_CPU);
    uintptr_t p;
    ck_assert_ok(cuabi_view_data_pointer(&p, v));
    ck_assert_float_eq(((float *)p)[7], 7.0f);
    ck_assert_ok(cuabi_view_retain(v));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(atomic_load(&deletes), 0);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(atomic_load(&deletes), 1);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    /* a NULL deleter is allowed */
    producer stack = { 0 };
    DLManagedTensorVersioned *s = make_producer();
    memcpy(&stack, s, sizeof stack);
    free(s);
    stack.mt.deleter = NULL;
    stack.mt.dl_tensor.data = stack.data;
    stack.mt.dl_tensor.shape = stack.shape;
    stack.mt.dl_tensor.strides = stack.strides;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, &stack.mt));
    ck_assert_ok(cuabi_view_release(v));
}
END_TEST

START_TEST(import_legacy_and_borrowed)
{
    atomic_store(&deletes, 0);
    DLManagedTensor *t = make_legacy();
    cuabi_view *v, *w;
    ck_assert_ok(cuabi_view_from_dlpack(&v, t));
    int64_t st[1];
    ck_assert_ok(cuabi_view_strides(st, 1, v));
    ck_assert_int_eq(st[0], 1); /* NULL strides were row-major */
    int c;
    ck_assert_ok(cuabi_view_is_c_contiguous(&c, v));
    ck_assert_int_eq(c, 1);
    /* borrowed: no ownership, flags given by the caller */
    ck_assert_ok(cuabi_view_from_dltensor(&w, &t->dl_tensor, CUABI_VIEW_READ_ONLY));
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, w));
    ck_assert_uint_eq(info.flags, CUABI_VIEW_READ_ONLY);
    ck_assert_ptr_ne(info.shape, t->dl_tensor.shape); /* copied */
    ck_assert_ok(cuabi_view_release(w));
    ck_assert_int_eq(atomic_load(&deletes), 0);
    ck_assert_status(cuabi_view_from_dltensor(&w, &t->dl_tensor, 16), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_from_dltensor(&w, NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_from_dltensor(NULL, &t->dl_tensor, 0), CUABI_ERROR_INVALID_ARGUMENT);
    t->dl_tensor.dtype.lanes = 4;
    ck_assert_status(cuabi_view_from_dltensor(&w, &t->dl_tensor, 0), CUABI_ERROR_DLPACK);
    t->dl_tensor.dtype.lanes = 1;
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(atomic_load(&deletes), 1);
}
END_TEST

/* Import `t` expecting refusal with a message mentioning `needle`, and the
 * producer's deleter called exactly once. */
static void expect_refused(DLManagedTensorVersioned *t, const char *needle)
{
    int before = atomic_load(&deletes);
    cuabi_view *v = (cuabi_view *)1;
    ck_assert_status(cuabi_view_from_dlpack_versioned(&v, t), CUABI_ERROR_DLPACK);
    ck_assert_error_mentions(needle);
    ck_assert_error_mentions("cuabi_view_from_dlpack_versioned");
    ck_assert_ptr_null(v);
    ck_assert_int_eq(atomic_load(&deletes), before + 1);
}

START_TEST(import_validation_refuses_and_deletes_once)
{
    DLManagedTensorVersioned *t;
    t = make_producer(); t->version.major = 2; expect_refused(t, "major version 2");
    t = make_producer(); t->version.major = 0; expect_refused(t, "major version 0");
    t = make_producer(); t->dl_tensor.ndim = -1; expect_refused(t, "ndim -1");
    t = make_producer(); t->dl_tensor.ndim = 65; expect_refused(t, "ndim 65");
    t = make_producer(); ((producer *)t)->shape[1] = -2; expect_refused(t, "negative");
    t = make_producer(); t->dl_tensor.data = NULL; expect_refused(t, "data is NULL");
    t = make_producer(); t->dl_tensor.shape = NULL; expect_refused(t, "shape is NULL");
    t = make_producer(); ((producer *)t)->strides[0] = INT64_MAX / 2; expect_refused(t, "overflows");
    t = make_producer(); ((producer *)t)->shape[0] = INT64_MAX; ((producer *)t)->shape[1] = 4;
    expect_refused(t, "overflows");
    t = make_producer(); ((producer *)t)->strides[0] = INT64_MAX / 8; expect_refused(t, "byte extent");
    t = make_producer(); t->dl_tensor.byte_offset = UINT64_MAX; expect_refused(t, "byte extent");
    t = make_producer(); t->dl_tensor.dtype.lanes = 2; expect_refused(t, "2 lanes");
    t = make_producer(); t->dl_tensor.dtype.code = CUABI_DTYPE_FLOAT4_E2M1FN;
    t->dl_tensor.dtype.bits = 4; expect_refused(t, "dtype code 17");
    t = make_producer(); t->dl_tensor.dtype.code = kDLInt; t->dl_tensor.dtype.bits = 4;
    expect_refused(t, "sub-byte");
    t = make_producer(); t->dl_tensor.dtype.code = kDLOpaqueHandle; expect_refused(t, "dtype code 3");
    t = make_producer(); t->dl_tensor.device.device_type = kDLOpenCL; expect_refused(t, "device type 4");
    t = make_producer(); t->dl_tensor.device.device_type = (DLDeviceType)99; expect_refused(t, "device type 99");
    t = make_producer(); t->dl_tensor.device.device_type = kDLCUDA;
    t->dl_tensor.device.device_id = -1; expect_refused(t, "negative");
    /* NULL data is fine for an empty tensor */
    t = make_producer(); ((producer *)t)->shape[0] = 0; t->dl_tensor.data = NULL;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, t));
    ck_assert_ok(cuabi_view_release(v));
    /* legacy imports are validated and deleted the same way */
    int before = atomic_load(&deletes);
    DLManagedTensor *l = make_legacy();
    l->dl_tensor.ndim = 100;
    ck_assert_status(cuabi_view_from_dlpack(&v, l), CUABI_ERROR_DLPACK);
    ck_assert_error_mentions("cuabi_view_from_dlpack: ndim 100");
    ck_assert_int_eq(atomic_load(&deletes), before + 1);
    /* NULL out: the tensor is consumed (deleted) anyway; NULL tensor: nothing */
    ck_assert_status(cuabi_view_from_dlpack_versioned(NULL, make_producer()),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_from_dlpack(NULL, make_legacy()), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(atomic_load(&deletes), before + 3);
    ck_assert_status(cuabi_view_from_dlpack_versioned(&v, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_from_dlpack(&v, NULL), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* A deleter that calls into cuabi (as a Python deleter might) must not
 * clobber the error that explains the refusal. */
static void chatty_deleter(DLManagedTensorVersioned *self)
{
    cuabi_view *v;
    (void)cuabi_view_ndim(NULL, (cuabi_view *)&v); /* fails, sets an error */
    producer_deleter(self);
}

START_TEST(refusal_message_survives_the_deleter)
{
    DLManagedTensorVersioned *t = make_producer();
    t->deleter = chatty_deleter;
    t->dl_tensor.ndim = -5;
    expect_refused(t, "ndim -5");
}
END_TEST

START_TEST(import_allocation_failures_delete_once)
{
    size_t live = cuabi__handle_live_count();
    int failures = 0;
    for (long n = 1; n < 20; n++) {
        int before = atomic_load(&deletes);
        cuabi_view *v = NULL;
        DLManagedTensorVersioned *t = make_producer();
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_view_from_dlpack_versioned(&v, t);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            ck_assert_ok(cuabi_view_release(v));
            ck_assert_int_eq(atomic_load(&deletes), before + 1);
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(atomic_load(&deletes), before + 1);
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
    }
    ck_assert_int_ge(failures, 1);
    /* export allocation failure */
    cuabi_view *v;
    DLManagedTensorVersioned *out = (DLManagedTensorVersioned *)1;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, make_producer()));
    cuabi__alloc_fail_at(1, false);
    ck_assert_status(cuabi_view_to_dlpack_versioned(&out, v), CUABI_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(out);
    DLManagedTensor *lout;
    cuabi__alloc_fail_at(1, false);
    ck_assert_status(cuabi_view_to_dlpack(&lout, v), CUABI_ERROR_OUT_OF_MEMORY);
    cuabi__alloc_fail_at(0, false);
    ck_assert_ok(cuabi_view_release(v));
}
END_TEST

START_TEST(export_versioned_keeps_memory_until_deleter)
{
    atomic_store(&deletes, 0);
    DLManagedTensorVersioned *t = make_producer();
    t->flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    t->dl_tensor.byte_offset = 8; /* folded into data on export */
    ((producer *)t)->shape[0] = 3;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, t));
    DLManagedTensorVersioned *e;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&e, v));
    ck_assert_uint_eq(e->version.major, 1);
    ck_assert_uint_eq(e->version.minor, 1);
    ck_assert_uint_eq(e->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
    ck_assert_ptr_eq(e->dl_tensor.data, ((producer *)t)->data + 2);
    ck_assert_uint_eq(e->dl_tensor.byte_offset, 0);
    ck_assert_int_eq(e->dl_tensor.device.device_type, kDLCPU);
    ck_assert_int_eq(e->dl_tensor.ndim, 2);
    ck_assert_int_eq(e->dl_tensor.shape[0], 3);
    ck_assert_int_eq(e->dl_tensor.strides[0], 6);
    ck_assert_int_eq(e->dl_tensor.dtype.code, kDLFloat);
    ck_assert_ptr_ne(e->dl_tensor.shape, ((producer *)t)->shape);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(atomic_load(&deletes), 0); /* the export holds it */
    ck_assert_float_eq(((float *)e->dl_tensor.data)[0], 2.0f);
    /* cuabi -> cuabi: import our own export */
    cuabi_view *w;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&w, e));
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, w));
    ck_assert_uint_eq(info.flags, CUABI_VIEW_IS_COPIED);
    ck_assert_ok(cuabi_view_release(w));
    ck_assert_int_eq(atomic_load(&deletes), 1);
}
END_TEST

START_TEST(export_legacy_and_read_only)
{
    atomic_store(&deletes, 0);
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dlpack(&v, make_legacy()));
    DLManagedTensor *e;
    ck_assert_ok(cuabi_view_to_dlpack(&e, v));
    ck_assert_int_eq(e->dl_tensor.ndim, 1);
    ck_assert_int_eq(e->dl_tensor.strides[0], 1);
    ck_assert_int_eq(((int32_t *)e->dl_tensor.data)[3], 30);
    ck_assert_ok(cuabi_view_release(v));
    e->deleter(e);
    ck_assert_int_eq(atomic_load(&deletes), 1);
    DLManagedTensorVersioned *t = make_producer();
    t->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, t));
    ck_assert_status(cuabi_view_to_dlpack(&e, v), CUABI_ERROR_DLPACK);
    ck_assert_error_mentions("read-only");
    ck_assert_ptr_null(e);
    DLManagedTensorVersioned *ev;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&ev, v));
    ck_assert_uint_eq(ev->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    ev->deleter(ev);
    ck_assert_status(cuabi_view_to_dlpack_versioned(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_to_dlpack(NULL, v), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_view_to_dlpack_versioned(&ev, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_view_to_dlpack(&e, (cuabi_view *)t), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_status(cuabi_view_to_dlpack_versioned(&ev, v), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(atomic_load(&deletes), 2);
}
END_TEST

static void *delete_export(void *p)
{
    DLManagedTensorVersioned *e = p;
    e->deleter(e);
    return NULL;
}

START_TEST(export_deleters_from_other_threads)
{
    atomic_store(&deletes, 0);
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dlpack_versioned(&v, make_producer()));
    enum { N = 8 };
    DLManagedTensorVersioned *e[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        ck_assert_ok(cuabi_view_to_dlpack_versioned(&e[i], v));
    ck_assert_ok(cuabi_view_release(v));
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, delete_export, e[i]), 0);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&deletes), 1);
}
END_TEST

START_TEST(views_over_buffers_export_their_device)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    cuabi_view *v, *s;
    ck_assert_ok(cuabi_memory_resource_host(&r));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, NULL));
    int64_t shape[2] = { 4, 4 }, a[2] = { 1, 1 }, z[2] = { 3, 4 }, st[2] = { 1, 2 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 2, shape, NULL, 0));
    ck_assert_ok(cuabi_view_slice(&s, v, 2, a, z, st));
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    DLManagedTensorVersioned *e;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&e, s));
    ck_assert_ok(cuabi_view_release(s));
    ck_assert_int_eq(e->dl_tensor.device.device_type, kDLCPU);
    ck_assert_int_eq(e->dl_tensor.shape[0], 2);
    ck_assert_int_eq(e->dl_tensor.shape[1], 2);
    ck_assert_int_eq(e->dl_tensor.strides[1], 2);
    memset(e->dl_tensor.data, 1, 1); /* still alive */
    e->deleter(e);
}
END_TEST

/* Issue 29: a producer's shape, strides, data pointer and byte offset are
 * untrusted. An element count that wraps around 2^64 (2^62 x 4) was taken
 * for an empty tensor; a count whose bytes do not fit (stride 0 over 2^62
 * floats) gave nbytes 0; elements below address 0 or past the top of the
 * address space were accepted. Each is refused, and deleted once. */
static void expect_borrowed_refused(DLTensor *t, const char *needle)
{
    cuabi_view *v = (cuabi_view *)1;
    ck_assert_status(cuabi_view_from_dltensor(&v, t, 0), CUABI_ERROR_DLPACK);
    ck_assert_error_mentions(needle);
    ck_assert_ptr_null(v);
}

static void expect_borrowed_ok(DLTensor *t, int64_t size)
{
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dltensor(&v, t, 0));
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    ck_assert_ok(cuabi_view_get_info(&info, v));
    ck_assert_int_eq(info.size, size);
    uint64_t nb;
    ck_assert_ok(cuabi_view_nbytes(&nb, v));
    ck_assert_uint_eq(nb, (uint64_t)size * info.itemsize);
    ck_assert_ok(cuabi_view_release(v));
}

START_TEST(import_refuses_sizes_and_addresses_that_wrap)
{
    DLManagedTensorVersioned *t = make_producer();
    ((producer *)t)->shape[0] = INT64_C(1) << 62;   /* x 6 floats: wraps, not 0 */
    ((producer *)t)->shape[1] = 4;                  /* x 4: 2^64, 0 modulo 2^64 */
    t->dl_tensor.strides = NULL;
    t->dl_tensor.dtype.code = kDLUInt;
    t->dl_tensor.dtype.bits = 8;
    expect_refused(t, "element count overflows");

    uint8_t bytes[64] = { 0 };
    int64_t shape[2], strides[2];
    DLTensor d = { 0 };
    d.data = bytes;
    d.device.device_type = kDLCPU;
    d.ndim = 1;
    d.dtype.code = kDLFloat;
    d.dtype.bits = 64;
    d.dtype.lanes = 1;
    d.shape = shape;
    d.strides = strides;
    /* 2^62 doubles at one address: the count fits, its bytes do not */
    shape[0] = INT64_C(1) << 62;
    strides[0] = 0;
    expect_borrowed_refused(&d, "overflow 63 bits");
    shape[0] = INT64_C(1) << 59;                    /* 2^62 bytes: fits */
    expect_borrowed_ok(&d, INT64_C(1) << 59);
    /* negative strides that reach below address 0 */
    d.dtype.code = kDLUInt;
    d.dtype.bits = 8;
    d.data = (void *)(uintptr_t)0x1000;
    shape[0] = 0x2000;
    strides[0] = -1;
    expect_borrowed_refused(&d, "wrap around the address space");
    shape[0] = 0x1001;                              /* down to address 0: fine */
    expect_borrowed_ok(&d, 0x1001);
    /* positive strides past the top of the address space */
    d.data = (void *)(UINTPTR_MAX - 7);
    shape[0] = 9;
    strides[0] = 1;
    expect_borrowed_refused(&d, "wrap around the address space");
    shape[0] = 8;                                   /* up to the last byte: fine */
    expect_borrowed_ok(&d, 8);
    /* a byte offset that carries the first element past the top */
    d.data = (void *)(UINTPTR_MAX - 7);
    d.byte_offset = 16;
    shape[0] = 0;                                   /* even when empty */
    expect_borrowed_refused(&d, "wrap around the address space");
    d.byte_offset = 0;
    expect_borrowed_ok(&d, 0);
    /* 2-D: the wrap from the middle dimension */
    d.data = bytes;
    d.ndim = 3;
    int64_t s3[3] = { 2, INT64_C(1) << 62, 4 };
    d.shape = s3;
    d.strides = NULL;
    expect_borrowed_refused(&d, "element count overflows");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dlpack");
    TCase *tc = tcase_create("dlpack");
    tcase_add_test(tc, dlpack_layouts_match_the_spec);
    tcase_add_test(tc, import_versioned_deletes_once_at_last_reference);
    tcase_add_test(tc, import_legacy_and_borrowed);
    tcase_add_test(tc, import_validation_refuses_and_deletes_once);
    tcase_add_test(tc, import_refuses_sizes_and_addresses_that_wrap);
    tcase_add_test(tc, refusal_message_survives_the_deleter);
    tcase_add_test(tc, import_allocation_failures_delete_once);
    tcase_add_test(tc, export_versioned_keeps_memory_until_deleter);
    tcase_add_test(tc, export_legacy_and_read_only);
    tcase_add_test(tc, export_deleters_from_other_threads);
    tcase_add_test(tc, views_over_buffers_export_their_device);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
