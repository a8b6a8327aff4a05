/* Streams, seen from inside the library: the object behind a cuabi_stream
 * handle (created, wrapped or one of the default streams). */
#ifndef CUABI_RUNTIME_STREAM_H
#define CUABI_RUNTIME_STREAM_H

#include "runtime/device.h"

typedef struct cuabi__stream {
    cuabi__object base;
    cuabi__device *device;   /* retained */
    CUstream cu_stream;
    bool owned;              /* destroy cu_stream with the handle */
} cuabi__stream;

/* Driver calls on the default streams (0, CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD) act on the current context: make the stream's device
 * current first. Created and wrapped streams carry their context. */
static inline cuabi_status cuabi__stream_prepare(cuabi__stream *s, const cuabi__driver *drv)
{
    if ((uintptr_t)s->cu_stream > 2)
        return CUABI_SUCCESS;
    return cuabi__device_activate(s->device, drv);
}

#endif
