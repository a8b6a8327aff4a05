/* Devices, seen from inside the library: the object behind a cuabi_device
 * handle and the call that makes its primary context current. Every
 * runtime module that talks to the driver on a device's behalf uses it. */
#ifndef CUABI_RUNTIME_DEVICE_H
#define CUABI_RUNTIME_DEVICE_H

#include "platform/loader.h"
#include "util/common.h"

typedef struct cuabi__device {
    cuabi__object base;
    int ordinal;
    CUdevice cu_device;
    _Atomic(CUcontext) primary;  /* retained lazily, released on destroy */
} cuabi__device;

/* Make the device's primary context current on this thread (retaining it
 * on first use). Cheap when it already is. */
cuabi_status cuabi__device_activate(cuabi__device *dev, const cuabi__driver *drv);

/* The calling thread's current context, given back after work cuabi does in
 * another: cuabi's calls leave the thread's current context as they found it
 * (torch's and the runtime's "current device" is that context's device). */
typedef struct cuabi__context_scope {
    CUcontext restore;
    bool set;            /* restore is to be made current again */
} cuabi__context_scope;

/* Remember the current context in *scope (given back whatever happens next). */
cuabi_status cuabi__context_save(cuabi__context_scope *scope, const cuabi__driver *drv);
/* Make `want` current; *scope remembers the caller's when it differed. */
cuabi_status cuabi__context_enter(cuabi__context_scope *scope, CUcontext want,
                                  const cuabi__driver *drv);
/* cuabi__device_activate, with the caller's context remembered in *scope. */
cuabi_status cuabi__device_enter(cuabi__context_scope *scope, cuabi__device *dev,
                                 const cuabi__driver *drv);
/* Give the caller's context back. Returns `st`, or an error if that failed
 * where `st` was success (the last-error record of a failure `st` stays). */
cuabi_status cuabi__context_leave(const cuabi__context_scope *scope, const cuabi__driver *drv,
                                  cuabi_status st);

#endif
