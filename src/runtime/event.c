/* Events: record on a stream, wait, query, time. */
#include "platform/release.h"
#include "runtime/stream.h"
#include "runtime/event.h"

static void event_destroy(cuabi__object *o)
{
    cuabi__event *e = (cuabi__event *)o;
    const cuabi__driver *drv;
    if (cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuEventDestroy)
        CUABI__CU_RELEASE(drv, cuEventDestroy, e->cu_event);
    cuabi__object_release(&e->device->base);
    cuabi__free(e);
}

CUABI_EXTERN(cuabi_status) cuabi_event_create(cuabi_event **out, cuabi_device *device,
                                              const cuabi_event_options *options)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    static const cuabi_event_options defaults = CUABI_EVENT_OPTIONS_INIT;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_OPTS(options, "cuabi_event_options", CUABI_EVENT_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    const unsigned known = CUABI_EVENT_BLOCKING_SYNC | CUABI_EVENT_DISABLE_TIMING;
    CUABI__CHECK_ARG((options->flags & ~known) == 0, "%s: unknown event flags 0x%x", __func__,
                     options->flags);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the event is made in the current context */
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    CUevent raw;
    cuabi_status st = CUABI__CU(drv, cuEventCreate, &raw, options->flags);
    if (st == CUABI_SUCCESS)
        st = cuabi__event_adopt(out, dev, raw, options->flags);
    return CUABI__CONTEXT_END_OUT(&scope, st, out, EVENT, __func__);
}

cuabi_status cuabi__event_adopt(cuabi_event **out, cuabi__device *dev, CUevent raw,
                                unsigned flags)
{
    const cuabi__driver *drv;
    cuabi_status st = cuabi__driver_get(&drv);
    if (st != CUABI_SUCCESS)
        return st;
    cuabi__event *e = cuabi__calloc(1, sizeof *e);
    if (e) {
        e->cu_event = raw;
        e->device = dev;
        e->flags = flags;
    }
    st = e ? cuabi__handle_register(&e->base, CUABI__T_EVENT, event_destroy)
           : CUABI_ERROR_OUT_OF_MEMORY;
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuEventDestroy, raw);
        cuabi__free(e);
        return st;
    }
    cuabi__object_retain(&dev->base);
    *out = CUABI__HANDLE(e, cuabi_event);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_event_record(cuabi_event *event, cuabi_stream *stream)
{
    cuabi__event *e;
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__GET(e, event, EVENT);
    CUABI__GET(s, stream, STREAM);
    CUABI__CHECK_ARG(e->device == s->device,
                     "%s: the event is on device %d but the stream on device %d", __func__,
                     e->device->ordinal, s->device->ordinal);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__stream_enter(&scope, s, drv));
    return cuabi__context_leave(&scope, drv, CUABI__CU(drv, cuEventRecord, e->cu_event, s->cu_stream));
}

CUABI_EXTERN(cuabi_status) cuabi_event_synchronize(cuabi_event *event)
{
    cuabi__event *e;
    const cuabi__driver *drv;
    CUABI__GET(e, event, EVENT);
    CUABI__TRY(cuabi__driver_get(&drv));
    return CUABI__CU(drv, cuEventSynchronize, e->cu_event);
}

CUABI_EXTERN(cuabi_status) cuabi_event_query(int *out, cuabi_event *event)
{
    cuabi__event *e;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(e, event, EVENT);
    CUABI__TRY(cuabi__driver_get(&drv));
    cuabi_status st = CUABI__CU(drv, cuEventQuery, e->cu_event);
    if (st == CUABI_ERROR_NOT_READY) {
        cuabi_error_clear();
        *out = 0;
        return CUABI_SUCCESS;
    }
    *out = st == CUABI_SUCCESS;
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_event_elapsed_ms(float *out, cuabi_event *start, cuabi_event *end)
{
    cuabi__event *a, *b;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(a, start, EVENT);
    CUABI__GET(b, end, EVENT);
    CUABI__TRY(cuabi__driver_get(&drv));
    return CUABI__CU(drv, cuEventElapsedTime, out, a->cu_event, b->cu_event);
}

CUABI_EXTERN(cuabi_status) cuabi_event_raw(uintptr_t *out, cuabi_event *event)
{
    cuabi__event *e;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(e, event, EVENT);
    *out = (uintptr_t)e->cu_event;
    return CUABI_SUCCESS;
}
