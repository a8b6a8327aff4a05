/* The DLPack C exchange API (DLPack 1.3), consumer side: view a producer's
 * Python object through its table of C functions.
 *
 * libcuabi has no Python dependency: the object is an opaque pointer that
 * only the producer's function looks at (with the GIL, which the caller
 * holds). The producer side -- cuabi views publishing a table -- needs the
 * Python C API and lives in the Python package's extension
 * (bindings/python/src/fast_exchange.c). */
#include "runtime/stream.h"
#include "runtime/event.h"

#include <stdio.h>
#include <string.h>

#define CHAIN_LIMIT 16   /* prev_api links followed before giving up (a cycle) */

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
    if (st != CUABI_SUCCESS) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", cuabi_last_error()->message);
        return cuabi__error(st, "%s: the producer's tensor was refused: %s", __func__, msg);
    }
    return CUABI_SUCCESS;
}
