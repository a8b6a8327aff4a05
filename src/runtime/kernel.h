/* Kernel internals, shared with the argument-pack and launch modules. */
#ifndef CUABI_KERNEL_INTERNAL_H
#define CUABI_KERNEL_INTERNAL_H

#include "compile/objcode.h"
#include "compile/param_types.h"
#include "runtime/device.h"

/* Devices whose CUfunction a kernel caches (by ordinal); more still work,
 * uncached. */
#define CUABI__KERNEL_FUNCTION_CACHE 64

typedef struct cuabi__kernel {
    cuabi__object base;
    cuabi__objcode *objcode;         /* retained */
    char *name;                      /* lowered entry name */
    _Atomic(CUkernel) cu_kernel;     /* NULL until looked up through the driver */
    _Atomic(CUfunction) functions[CUABI__KERNEL_FUNCTION_CACHE];

    pthread_mutex_t lock;            /* guards the parameter layout and types */
    bool params_ready;
    size_t param_count;
    size_t *param_offsets, *param_sizes;
    bool types_ready;
    cuabi__param_types types;
} cuabi__kernel;

/* A new kernel handle (refs = 1) retaining `o`; `cu_kernel` may be NULL
 * (looked up later, when a driver is there). */
cuabi_status cuabi__kernel_new(cuabi__kernel **out, cuabi__objcode *o, const char *name,
                               CUkernel cu_kernel);
/* The CUkernel, loading the objcode and looking it up if needed. */
cuabi_status cuabi__kernel_cukernel(cuabi__kernel *k, const cuabi__driver *drv,
                                    CUkernel *out, const char *caller);
/* The kernel's CUfunction in the device's primary context (made current),
 * cached per device. */
cuabi_status cuabi__kernel_function(cuabi__kernel *k, cuabi__device *dev,
                                    const cuabi__driver *drv, CUfunction *out,
                                    const char *caller);
/* Parameter count, offsets and sizes, cached: from cuKernelGetParamInfo when
 * the driver has it and the kernel is loaded, else from the CUBIN. The arrays
 * are borrowed from the kernel. */
cuabi_status cuabi__kernel_param_layout(cuabi__kernel *k, size_t *count,
                                        const size_t **offsets, const size_t **sizes);

/* The parameter types (param_types.h), built once after the layout.
 * Borrowed from the kernel. */
cuabi_status cuabi__kernel_param_types(cuabi__kernel *k, const cuabi__param_types **out,
                                       const char *caller);

#endif
