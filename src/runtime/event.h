/* Events, seen from inside the library: the object behind a cuabi_event
 * handle, and adoption of an event the driver made (IPC opens them). */
#ifndef CUABI_RUNTIME_EVENT_H
#define CUABI_RUNTIME_EVENT_H

#include "runtime/device.h"

typedef struct cuabi__event {
    cuabi__object base;
    cuabi__device *device;   /* retained */
    CUevent cu_event;
    unsigned flags;          /* CUevent_flags it was created with */
} cuabi__event;

/* Give a handle to an event the driver made (created or opened from IPC) on
 * `dev`; on failure the event is destroyed. */
cuabi_status cuabi__event_adopt(cuabi_event **out, cuabi__device *dev, CUevent raw,
                                unsigned flags);

#endif
