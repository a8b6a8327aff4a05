/* The DLPack C exchange API (DLPack 1.3), consumer side: view a producer's
 * Python object through its table of C functions.
 *
 * libcuabi has no Python dependency: the object is an opaque pointer that
 * only the producer's function looks at (with the GIL, which the caller
 * holds). The producer side -- cuabi views publishing a table -- needs the
 * Python C API and lives in the Python package's extension
 * (bindings/python/src/fast_exchange.c). */
#include "runtime/stream.h"
#include "runtime/memory.h"

#include <stdio.h>
#include <string.h>

#define CHAIN_LIMIT 16   /* prev_api links followed before giving up (a cycle) */

/* `st` again, its recorded message prefixed with "caller: what: ". */
static cuabi_status explained(cuabi_status st, const char *caller, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cuabi_last_error()->message);
    return cuabi__error(st, "%s: %s: %s", caller, what, msg);
}

/* The major-1 table of `api`'s chain, or NULL with the error recorded. */
static const DLPackExchangeAPI *major_one(const DLPackExchangeAPI *api, const char *caller)
{
    const DLPackExchangeAPIHeader *h = &api->header;
    unsigned first = h->version.major, minor = h->version.minor;
    for (int i = 0; h && i < CHAIN_LIMIT; i++, h = h->prev_api)
        if (h->version.major == 1)
            return (const DLPackExchangeAPI *)h;
    cuabi__error(CUABI_ERROR_INVALID_VERSION,
                 "%s: the producer's exchange table is DLPack %u.%u and links no 1.x table "
                 "(this library reads DLPack 1.x exchange tables)", caller, first, minor);
    return NULL;
}

CUABI_EXTERN(cuabi_status) cuabi_view_from_exchange(cuabi_view **out,
                                                    const DLPackExchangeAPI *api,
                                                    void *py_object)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(api, "%s: api is NULL", __func__);
    CUABI__CHECK_ARG(py_object, "%s: py_object is NULL", __func__);
    const DLPackExchangeAPI *t = major_one(api, __func__);
    if (!t)
        return cuabi_last_error()->status;
    CUABI__CHECK_ARG(t->managed_tensor_from_py_object_no_sync,
                     "%s: the producer's table has no managed_tensor_from_py_object_no_sync",
                     __func__);
    DLManagedTensorVersioned *mt = NULL;
    if (t->managed_tensor_from_py_object_no_sync(py_object, &mt) != 0 || !mt)
        return cuabi__error(CUABI_ERROR_CALLBACK,
                            "%s: the producer's managed_tensor_from_py_object_no_sync failed "
                            "(its Python exception, if any, is set)", __func__);
    cuabi_status st = cuabi_view_from_dlpack_versioned(out, mt);   /* owns mt from here on */
    if (st != CUABI_SUCCESS)
        return explained(st, __func__, "the producer's tensor was refused");
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_view_from_exchange_on(cuabi_view **out,
                                                       const DLPackExchangeAPI *api,
                                                       void *py_object, cuabi_stream *stream)
{
    cuabi__stream *s = NULL;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    if (stream)
        CUABI__GET(s, stream, STREAM);
    CUABI__CHECK_ARG(api, "%s: api is NULL", __func__);
    const DLPackExchangeAPI *t = major_one(api, __func__);
    if (!t)
        return cuabi_last_error()->status;
    if (s && !t->current_work_stream)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: the producer's table has no current_work_stream: its stream "
                            "cannot be ordered before the consumer's (use its __dlpack__(stream=))",
                            __func__);
    cuabi_view *v;
    CUABI__TRY(cuabi_view_from_exchange(&v, api, py_object));
    void *obj = NULL;
    cuabi_status st = cuabi__handle_get(v, CUABI__T_VIEW, &obj, __func__);
    const cuabi__view *view = obj;
    if (st == CUABI_SUCCESS && s && (view->device_type == kDLCUDA || view->device_type == kDLCUDAManaged)) {
        void *ps = NULL;
        if (t->current_work_stream((DLDeviceType)view->device_type, view->device_id, &ps) != 0)
            st = cuabi__error(CUABI_ERROR_CALLBACK,
                              "%s: the producer's current_work_stream failed for GPU %d (its "
                              "Python exception, if any, is set)", __func__, (int)view->device_id);
        else if ((st = cuabi_stream_wait_raw(stream, view->device_id, (uintptr_t)ps)) !=
                 CUABI_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "ordering GPU %d's producer stream before the "
                     "consumer's", (int)view->device_id);
            st = explained(st, __func__, what);
        }
    }
    if (st != CUABI_SUCCESS) {
        (void)cuabi__handle_release(v, CUABI__T_VIEW);
        return st;
    }
    *out = v;
    return CUABI_SUCCESS;
}
