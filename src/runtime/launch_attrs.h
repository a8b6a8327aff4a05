/* Launch attributes beyond clusters and cooperative launches: the
 * cuabi_launch_attributes a version-2 launch configuration points to.
 *
 * launch.c keeps the hot path; everything about these attributes lives in
 * launch_attrs.c, reached only when a configuration carries them (one test:
 * cuabi__launch_attributes() != NULL). */
#ifndef CUABI_LAUNCH_ATTRS_H
#define CUABI_LAUNCH_ATTRS_H

#include "runtime/event.h"
#include "runtime/stream.h"

/* Room for every attribute one launch can carry: cluster and cooperative
 * from the configuration, then each field of cuabi_launch_attributes. */
#define CUABI__LAUNCH_MAX_ATTRS 16

/* The attributes of a configuration, or NULL (version 1 has none). */
static inline const cuabi_launch_attributes *cuabi__launch_attributes(const cuabi_launch_config *c)
{
    return c->version >= 2 ? c->attributes : NULL;
}

/* The events an attribute set names, resolved for one launch. */
typedef struct cuabi__launch_events {
    cuabi__event *programmatic;   /* NULL: none */
    cuabi__event *completion;     /* NULL: none */
} cuabi__launch_events;

/* Every check that needs no driver: the struct's version, each value's
 * range, preferred clusters against the configuration's cluster and grid,
 * and the events (live, on `dev`, created without timing), which are
 * resolved into *ev. CUABI_ERROR_LAUNCH_CONFIG (or INVALID_HANDLE /
 * INVALID_VERSION) naming the field; `caller` is the public function. */
cuabi_status cuabi__launch_attrs_check(cuabi__launch_events *ev, const cuabi_launch_attributes *a,
                                       const cuabi_launch_config *c, cuabi__device *dev,
                                       const char *caller);

/* The preferred cluster against a grid (cuabi_prepared_set_grid). */
cuabi_status cuabi__launch_attrs_check_grid(const cuabi_launch_attributes *a,
                                            const unsigned int grid[3],
                                            const unsigned int cluster[3], const char *caller);

/* Checks against the device: programmatic events need compute capability
 * 9.0, the access-policy window the device's maximum, the domain map the
 * device's domain count. CUABI_ERROR_NOT_SUPPORTED for what the device
 * cannot do, CUABI_ERROR_LAUNCH_CONFIG for values over its limits. */
cuabi_status cuabi__launch_attrs_check_device(const cuabi_launch_attributes *a, cuabi__device *dev,
                                              const cuabi__driver *drv, const char *caller);

/* Append the attributes to attrs[n..] (CUABI__LAUNCH_MAX_ATTRS in all) and
 * return the new count. */
unsigned cuabi__launch_attrs_fill(CUlaunchAttribute *attrs, unsigned n,
                                  const cuabi_launch_attributes *a, const cuabi__launch_events *ev);

/* The driver refused a launch whose attributes passed every check: the
 * error names every attribute the launch carried (the driver does not say
 * which one it refused) and those the loaded driver is too old for.
 * CUDA_ERROR_INVALID_VALUE gives CUABI_ERROR_LAUNCH_CONFIG,
 * CUDA_ERROR_NOT_SUPPORTED or a too old driver CUABI_ERROR_NOT_SUPPORTED;
 * cu_result is set. */
cuabi_status cuabi__launch_attrs_refused(CUresult r, const char *entry, const CUlaunchConfig *lc,
                                         const cuabi__driver *drv, const char *caller);

#endif
