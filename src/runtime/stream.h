/* Streams, seen from inside the library: the object behind a cuabi_stream
 * handle (created, wrapped, one of the default streams, or a green
 * context's: runtime/green.c). */
#ifndef CUABI_RUNTIME_STREAM_H
#define CUABI_RUNTIME_STREAM_H

#include "runtime/device.h"

typedef struct cuabi__stream {
    cuabi__object base;
    cuabi__device *device;   /* retained */
    CUstream cu_stream;
    bool owned;              /* destroy cu_stream with the handle */
    cuabi__object *green;    /* retained: the green context of a green-context
                                stream (released after cu_stream), else NULL */
    int partition_sms;       /* the green context's SMs; 0: the whole device */
} cuabi__stream;

/* Wrap `raw` in a new handle retaining `dev` (and `green`, when not NULL,
 * with `partition_sms` its SMs). On failure nothing is retained and `raw`
 * is the caller's. */
cuabi_status cuabi__stream_new(cuabi_stream **out, cuabi__device *dev, CUstream raw, bool owned,
                               cuabi__object *green, int partition_sms);

/* Driver calls on the default streams (0, CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD) act on the current context: make the stream's device
 * current first, in *scope (cuabi__context_leave gives the caller's back).
 * Created and wrapped streams carry their context: no driver call at all. */
static inline bool cuabi__stream_is_default(const cuabi__stream *s)
{
    return (uintptr_t)s->cu_stream <= 2;
}

static inline cuabi_status cuabi__stream_enter(cuabi__context_scope *scope, cuabi__stream *s,
                                               const cuabi__driver *drv)
{
    if (!cuabi__stream_is_default(s))
        return CUABI_SUCCESS;
    return cuabi__device_enter(scope, s->device, drv);
}

/* The stream's own context current in *scope, whatever the stream: for the
 * driver calls that work in the current context even on a created stream
 * (cuMemcpyAsync, cuMemsetD*Async: the H100 refused a copy on device 0's
 * stream with device 1's context current). A green context's stream: the
 * driver's answer (cuStreamGetCtx). */
cuabi_status cuabi__stream_context_enter(cuabi__context_scope *scope, cuabi__stream *s,
                                         const cuabi__driver *drv);

#endif
