/* Launches, seen from inside the library (launch.c): what graph kernel
 * nodes and occupancy queries share with the launch path. */
#ifndef CUABI_RUNTIME_LAUNCH_H
#define CUABI_RUNTIME_LAUNCH_H

#include "runtime/device.h"

/* A configuration as the driver takes it (attrs: room for 2). */
void cuabi__launch_fill(CUlaunchConfig *lc, CUlaunchAttribute attrs[2],
                        const cuabi_launch_config *c, CUstream s);
/* A copy of the caller's configuration reading only the fields its version
 * has (a version-1 struct ends before `attributes`); stream and device
 * cleared. */
void cuabi__launch_config_copy(cuabi_launch_config *dst, const cuabi_launch_config *src);
/* Testing: release the devices kept for launches naming neither stream nor
 * device. */
void cuabi__launch_forget_implicit_devices(void);
/* The device and stream a configuration names. */
cuabi_status cuabi__launch_target(cuabi__device **dev, CUstream *stream,
                                  const cuabi_launch_config *c, const char *caller);
/* Every check of cuabi_launch_check (errors naming `caller`),
 * handing back the kernel's CUfunction on the configuration's device. */
cuabi_status cuabi__launch_check_for(CUfunction *f, cuabi__device **dev, cuabi_kernel *kernel,
                                     cuabi_argpack *pack, const cuabi_launch_config *config,
                                     const char *caller);

#endif
