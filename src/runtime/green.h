/* Green contexts, seen from inside the library: the objects behind
 * cuabi_sm_resource and cuabi_green_ctx handles, and the lock around
 * making a green context current (occupancy.c asks the driver in one). */
#ifndef CUABI_RUNTIME_GREEN_H
#define CUABI_RUNTIME_GREEN_H

#include <pthread.h>

#include "runtime/device.h"

typedef struct cuabi__sm_resource {
    cuabi__object base;
    cuabi__device *device;        /* retained */
    cuabi__object *owner;         /* retained: the green context a resource was
                                     taken from (or split from one), else NULL */
    CUdevResource res;
    cuabi_sm_resource_kind kind;
    uint64_t split_id;            /* groups and remainder of one split share it */
    int index;                    /* group index; -1 otherwise */
} cuabi__sm_resource;

typedef struct cuabi__green_ctx {
    cuabi__object base;
    cuabi__device *device;        /* retained */
    CUgreenCtx cu_green;
    CUcontext cu_ctx;             /* cuCtxFromGreenCtx */
    int sm_count;                 /* of its partition (cuGreenCtxGetDevResource) */
    /* The driver lets a green context be current on one thread at a time:
     * every push of it (cuabi__green_enter) holds this lock until its pop. */
    pthread_mutex_t lock;
} cuabi__green_ctx;

/* Make the green context current on this thread (pushed over whatever is
 * current), holding its lock; cuabi__green_leave pops it and unlocks. On
 * failure nothing is held. */
cuabi_status cuabi__green_enter(cuabi__green_ctx *g, const cuabi__driver *drv, const char *caller);
void cuabi__green_leave(cuabi__green_ctx *g, const cuabi__driver *drv);

#endif
