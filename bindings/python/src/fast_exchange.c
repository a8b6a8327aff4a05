/* The DLPack C exchange API (DLPack 1.3), producer side: the table
 * cuabi.View publishes as `__dlpack_c_exchange_api__` (a capsule named
 * "dlpack_exchange_api"; and the older int `__c_dlpack_exchange_api__`), so
 * torch.from_dlpack(view), tvm-ffi and C extensions take a view without
 * __dlpack__ and a capsule.
 *
 * Its functions take and give PyObject*, so they live here and not in
 * libcuabi, which has no Python dependency (docs/DESIGN-DECISIONS.md); the
 * work they do is libcuabi's (exports, imports, allocation through the
 * plugin table). Like every exchange table's, they run with the GIL held
 * and report failure as -1 with a Python exception set -- the same
 * exceptions the Python layer raises (ClosedHandleError, CuabiError...). */
#include "fast_exchange.h"
#include "fast_view.h"

#include <string.h>

static PyObject *str_handle;

/* Calls of each table function, for benchmarks and tests to see which path
 * a consumer took (exchange_calls()). Counted with the GIL held, except the
 * allocator's (which needs no GIL: an estimate under threads). */
static unsigned long long calls[5];
enum { C_ALLOCATOR, C_FROM_PY, C_TO_PY, C_DLTENSOR, C_STREAM };

/* The C view of a cuabi.View (made now for a lazy view), borrowed from it. */
static void *view_handle(PyObject *obj)
{
    if (!fast_api || !fast_view_type())
        return fast_not_attached(), NULL;
    if (!PyObject_TypeCheck(obj, fast_view_type())) {
        PyErr_Format(PyExc_TypeError,
                     "cuabi.View's DLPack exchange table was given a %.100s, not a cuabi.View",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *h = PyObject_GetAttr(obj, str_handle);   /* ClosedHandleError when closed */
    if (!h)
        return NULL;
    void *v = PyLong_AsVoidPtr(h);
    Py_DECREF(h);
    if (!v && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "cuabi.View has a NULL handle");
    return v;
}

static int from_py_object(void *py_object, DLManagedTensorVersioned **out)
{
    calls[C_FROM_PY]++;
    *out = NULL;
    void *view = view_handle((PyObject *)py_object);
    if (!view)
        return -1;
    cuabi_status st = fast_api->view_to_dlpack_versioned(out, view);
    return st == CUABI_SUCCESS ? 0 : fast_raise(st, "cuabi_view_to_dlpack_versioned");
}

/* Borrowed shape and strides: the C view's, alive while the View is. */
static int dltensor_from_py_object(void *py_object, DLTensor *out)
{
    calls[C_DLTENSOR]++;
    void *view = view_handle((PyObject *)py_object);
    if (!view)
        return -1;
    cuabi_view_info info = CUABI_VIEW_INFO_INIT;
    cuabi_status st = fast_api->view_get_info(&info, view);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_view_get_info");
    memset(out, 0, sizeof *out);
    out->data = (void *)info.data;
    out->device.device_type = (DLDeviceType)info.device_type;
    out->device.device_id = info.device_id;
    out->ndim = info.ndim;
    out->dtype.code = (uint8_t)info.dtype_code;
    out->dtype.bits = (uint8_t)info.dtype_bits;
    out->dtype.lanes = 1;
    out->shape = (int64_t *)info.shape;
    out->strides = (int64_t *)info.strides;
    out->byte_offset = info.byte_offset;
    return 0;
}

static int to_py_object(DLManagedTensorVersioned *tensor, void **out_py_object)
{
    calls[C_TO_PY]++;
    *out_py_object = NULL;
    if (!fast_api || !fast_view_type())
        return fast_not_attached();
    cuabi_view *view = NULL;
    cuabi_status st = fast_api->view_from_dlpack_versioned(&view, tensor);   /* owns tensor */
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_view_from_dlpack_versioned");
    PyObject *v = fast_view_from_handle(view);
    if (!v)
        return -1;
    *out_py_object = v;
    return 0;
}

/* A new tensor like the prototype (dtype, shape, device), row-major: host
 * memory for kDLCPU, the device's default pool for kDLCUDA. No Python here:
 * errors go through SetError (which, for a Python consumer, sets the
 * exception and needs the GIL the consumer holds). */
static int allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                     void (*set_error)(void *, const char *, const char *))
{
    calls[C_ALLOCATOR]++;
    *out = NULL;
    const cuabi_api *api = fast_api;
    if (!api) {
        set_error(error_ctx, "RuntimeError", "cuabi._fast is not attached to libcuabi");
        return -1;
    }
    if (prototype->dtype.lanes != 1 || prototype->ndim < 0 ||
        prototype->ndim > CUABI_VIEW_MAX_NDIM || (prototype->ndim && !prototype->shape)) {
        set_error(error_ctx, "BufferError",
                  "cuabi: allocator: the prototype needs one lane, 0..64 dimensions and a shape");
        return -1;
    }
    uint64_t n = (prototype->dtype.bits + 7u) / 8u;
    for (int i = 0; i < prototype->ndim; i++)
        if (prototype->shape[i] < 0 ||
            __builtin_mul_overflow(n, (uint64_t)prototype->shape[i], &n)) {
            set_error(error_ctx, "BufferError", "cuabi: allocator: bad or too large shape");
            return -1;
        }
    cuabi_memory_resource *res = NULL;
    cuabi_device *dev = NULL;
    cuabi_buffer *buf = NULL;
    cuabi_view *view = NULL;
    cuabi_status st;
    int type = prototype->device.device_type;
    if (type == kDLCPU) {
        st = api->memory_resource_host(&res);
    } else if (type == kDLCUDA) {
        st = api->device_get(&dev, prototype->device.device_id);
        if (st == CUABI_SUCCESS)
            st = api->memory_resource_device_default(&res, dev);
    } else {
        set_error(error_ctx, "BufferError",
                  "cuabi: allocator: only host (kDLCPU) and CUDA (kDLCUDA) memory");
        return -1;
    }
    if (st == CUABI_SUCCESS)
        st = api->buffer_allocate(&buf, res, (size_t)(n ? n : 1), 0, NULL);
    if (st == CUABI_SUCCESS)
        st = api->view_create(&view, buf, 0, prototype->dtype.code, prototype->dtype.bits,
                              prototype->ndim, prototype->shape, NULL, 0);
    if (st == CUABI_SUCCESS)
        st = api->view_to_dlpack_versioned(out, view);
    if (st != CUABI_SUCCESS)
        set_error(error_ctx, st == CUABI_ERROR_OUT_OF_MEMORY ? "MemoryError" : "RuntimeError",
                  api->last_error()->message);
    /* The export keeps the view, the view the buffer's memory. */
    if (view)
        api->view_release(view);
    if (buf)
        api->buffer_destroy(buf);
    if (res)
        api->memory_resource_release(res);
    if (dev)
        api->device_release(dev);
    return st == CUABI_SUCCESS ? 0 : -1;
}

/* cuabi has no "current stream": work on the legacy default stream. */
static int current_work_stream(DLDeviceType device_type, int32_t device_id, void **out)
{
    (void)device_type;
    (void)device_id;
    calls[C_STREAM]++;
    *out = NULL;
    return 0;
}

static const DLPackExchangeAPI table = {
    .header = {.version = {1, 3}, .prev_api = NULL},
    .managed_tensor_allocator = allocator,
    .managed_tensor_from_py_object_no_sync = from_py_object,
    .managed_tensor_to_py_object_no_sync = to_py_object,
    .dltensor_from_py_object_no_sync = dltensor_from_py_object,
    .current_work_stream = current_work_stream,
};

/* exchange_api() -> (capsule "dlpack_exchange_api", address): what View
 * publishes as __dlpack_c_exchange_api__ and __c_dlpack_exchange_api__. */
static PyObject *exchange_api(PyObject *module, PyObject *unused)
{
    PyObject *cap = PyCapsule_New((void *)&table, "dlpack_exchange_api", NULL);
    return cap ? Py_BuildValue("(NN)", cap, PyLong_FromVoidPtr((void *)&table)) : NULL;
}

/* exchange_calls() -> {function name: calls so far} */
static PyObject *exchange_calls(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{sKsKsKsKsK}", "managed_tensor_allocator", calls[C_ALLOCATOR],
                         "managed_tensor_from_py_object_no_sync", calls[C_FROM_PY],
                         "managed_tensor_to_py_object_no_sync", calls[C_TO_PY],
                         "dltensor_from_py_object_no_sync", calls[C_DLTENSOR],
                         "current_work_stream", calls[C_STREAM]);
}

static PyMethodDef methods[] = {
    {"exchange_calls", exchange_calls, METH_NOARGS,
     "exchange_calls() -> how often each function of cuabi.View's table was called."},
    {"exchange_api", exchange_api, METH_NOARGS,
     "exchange_api() -> (capsule, address) of cuabi.View's DLPack C exchange table."},
    {NULL, NULL, 0, NULL},
};

int fast_exchange_init(PyObject *module)
{
    str_handle = PyUnicode_InternFromString("cuabi_handle");
    return str_handle ? PyModule_AddFunctions(module, methods) : -1;
}
