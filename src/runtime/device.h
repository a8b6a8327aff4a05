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

#endif
