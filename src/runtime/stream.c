/* Streams: created, wrapped (foreign, not owned) and the default streams. */
#include "platform/release.h"
#include "runtime/stream.h"
#include "runtime/event.h"

static void stream_destroy(cuabi__object *o)
{
    cuabi__stream *s = (cuabi__stream *)o;
    const cuabi__driver *drv;
    if (s->owned && cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuStreamDestroy)
        CUABI__CU_RELEASE(drv, cuStreamDestroy, s->cu_stream);
    if (s->green)   /* after the stream: the driver refuses streams of a destroyed green context */
        cuabi__object_release(s->green);
    cuabi__object_release(&s->device->base);
    cuabi__free(s);
}

cuabi_status cuabi__stream_new(cuabi_stream **out, cuabi__device *dev, CUstream raw, bool owned,
                               cuabi__object *green, int partition_sms)
{
    cuabi__stream *s = cuabi__calloc(1, sizeof *s);
    if (!s)
        return CUABI_ERROR_OUT_OF_MEMORY;
    s->device = dev;
    s->cu_stream = raw;
    s->owned = owned;
    s->green = green;
    s->partition_sms = green ? partition_sms : 0;
    cuabi_status st = cuabi__handle_register(&s->base, CUABI__T_STREAM, stream_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(s);
        return st;
    }
    cuabi__object_retain(&dev->base);
    if (green)
        cuabi__object_retain(green);
    *out = CUABI__HANDLE(s, cuabi_stream);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__stream_context_enter(cuabi__context_scope *scope, cuabi__stream *s,
                                         const cuabi__driver *drv)
{
    if (cuabi__stream_is_default(s) || !s->green)
        return cuabi__device_enter(scope, s->device, drv);
    CUcontext want = NULL;
    if (drv->cuStreamGetCtx)
        CUABI__TRY(CUABI__CU(drv, cuStreamGetCtx, s->cu_stream, &want));
    return want ? cuabi__context_enter(scope, want, drv) : CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_stream_create(cuabi_stream **out, cuabi_device *device,
                                               const cuabi_stream_options *options)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    static const cuabi_stream_options defaults = CUABI_STREAM_OPTIONS_INIT;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_OPTS(options, "cuabi_stream_options", CUABI_STREAM_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    CUABI__CHECK_ARG((options->flags & ~(unsigned)CUABI_STREAM_NON_BLOCKING) == 0,
                     "%s: unknown stream flags 0x%x", __func__, options->flags);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the stream is made in the current context */
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    CUstream raw;
    cuabi_status st = CUABI__CU(drv, cuStreamCreateWithPriority, &raw, options->flags,
                                options->priority);
    if (st == CUABI_SUCCESS) {
        st = cuabi__stream_new(out, dev, raw, true, NULL, 0);
        if (st != CUABI_SUCCESS)
            CUABI__CU_RELEASE(drv, cuStreamDestroy, raw);
    }
    return CUABI__CONTEXT_END_OUT(&scope, st, out, STREAM, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_wrap(cuabi_stream **out, cuabi_device *device,
                                             uintptr_t raw_stream)
{
    cuabi__device *dev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    return cuabi__stream_new(out, dev, (CUstream)raw_stream, false, NULL, 0);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_legacy_default(cuabi_stream **out, cuabi_device *device)
{
    return cuabi_stream_wrap(out, device, (uintptr_t)CU_STREAM_LEGACY);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_per_thread_default(cuabi_stream **out,
                                                           cuabi_device *device)
{
    return cuabi_stream_wrap(out, device, (uintptr_t)CU_STREAM_PER_THREAD);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_synchronize(cuabi_stream *stream)
{
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__GET(s, stream, STREAM);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__stream_enter(&scope, s, drv));
    return cuabi__context_leave(&scope, drv, CUABI__CU(drv, cuStreamSynchronize, s->cu_stream));
}

CUABI_EXTERN(cuabi_status) cuabi_stream_query(int *out, cuabi_stream *stream)
{
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(s, stream, STREAM);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__stream_enter(&scope, s, drv));
    cuabi_status st = CUABI__CU(drv, cuStreamQuery, s->cu_stream);
    if (st == CUABI_ERROR_NOT_READY) {
        cuabi_error_clear();
        *out = 0;
        st = CUABI_SUCCESS;
    } else {
        *out = st == CUABI_SUCCESS;
    }
    return cuabi__context_leave(&scope, drv, st);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_wait_event(cuabi_stream *stream, cuabi_event *event)
{
    cuabi__stream *s;
    cuabi__event *e;
    const cuabi__driver *drv;
    CUABI__GET(s, stream, STREAM);
    CUABI__GET(e, event, EVENT);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__stream_enter(&scope, s, drv));
    return cuabi__context_leave(&scope, drv,
                                CUABI__CU(drv, cuStreamWaitEvent, s->cu_stream, e->cu_event, 0));
}

/* Record GPU `pd`'s ordering event on `raw` and make `s` wait for it, under
 * the device's order_lock (device.h). The primary context is made current
 * only where the driver needs it: to create the event, and for a default
 * stream (0/1/2), which means the current context's. */
static cuabi_status wait_raw(cuabi__stream *s, cuabi__device *pd, CUstream raw,
                             const cuabi__driver *drv)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&pd->order_lock);
    if (!pd->order_event || (uintptr_t)raw <= 2)
        st = cuabi__device_enter(&scope, pd, drv);
    if (st == CUABI_SUCCESS && !pd->order_event)
        st = CUABI__CU(drv, cuEventCreate, &pd->order_event, CU_EVENT_DISABLE_TIMING);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuEventRecord, pd->order_event, raw);
    /* The consumer's default stream acts in its device's context (the same
     * scope: the caller's context is the one it gives back). */
    if (st == CUABI_SUCCESS)
        st = cuabi__stream_enter(&scope, s, drv);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuStreamWaitEvent, s->cu_stream, pd->order_event, 0);
    pthread_mutex_unlock(&pd->order_lock);
    return cuabi__context_leave(&scope, drv, st);
}

CUABI__HOT
CUABI_EXTERN(cuabi_status) cuabi_stream_wait_raw(cuabi_stream *stream, int device, uintptr_t raw)
{
    cuabi__stream *s;
    CUABI__GET(s, stream, STREAM);
    if (device == s->device->ordinal && (CUstream)raw == s->cu_stream)
        return CUABI_SUCCESS;           /* in order already */
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    if (device == s->device->ordinal)
        return wait_raw(s, s->device, (CUstream)raw, drv);
    cuabi_device *held;                 /* another GPU's stream: checks the ordinal */
    CUABI__TRY(cuabi_device_get(&held, device));
    void *pd;
    cuabi_status st = cuabi__handle_get(held, CUABI__T_DEVICE, &pd, __func__);
    if (st == CUABI_SUCCESS)
        st = wait_raw(s, pd, (CUstream)raw, drv);
    (void)cuabi__handle_release(held, CUABI__T_DEVICE);
    return st;
}

/* A green context's stream is ordered through the primary context's event as
 * well: the driver records an event of the primary context on a stream of one
 * of its green contexts (580.159.04 on the H200, 2026-11-29; cuda.core makes
 * the event in the stream's context instead), as cuabi_event_record() on a
 * green stream has always relied on -- test_gpu_green checks both. */
CUABI__HOT
CUABI_EXTERN(cuabi_status) cuabi_stream_wait_stream(cuabi_stream *stream, cuabi_stream *other)
{
    cuabi__stream *s, *o;
    CUABI__GET(s, stream, STREAM);
    CUABI__GET(o, other, STREAM);
    if (o->device == s->device && o->cu_stream == s->cu_stream)
        return CUABI_SUCCESS;           /* in order already */
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    return wait_raw(s, o->device, o->cu_stream, drv);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_raw(uintptr_t *out, cuabi_stream *stream)
{
    cuabi__stream *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(s, stream, STREAM);
    *out = (uintptr_t)s->cu_stream;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_stream_device(cuabi_device **out, cuabi_stream *stream)
{
    cuabi__stream *s;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(s, stream, STREAM);
    *out = CUABI__HANDLE(s->device, cuabi_device);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_stream_priority(int *out, cuabi_stream *stream)
{
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(s, stream, STREAM);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__stream_enter(&scope, s, drv));
    return cuabi__context_leave(&scope, drv, CUABI__CU(drv, cuStreamGetPriority, s->cu_stream, out));
}
