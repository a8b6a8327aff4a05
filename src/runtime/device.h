/* Devices, seen from inside the library: the object behind a cuabi_device
 * handle and the call that makes its primary context current. Every
 * runtime module that talks to the driver on a device's behalf uses it. */
#ifndef CUABI_RUNTIME_DEVICE_H
#define CUABI_RUNTIME_DEVICE_H

#include <pthread.h>

#include "platform/loader.h"
#include "util/common.h"

typedef struct cuabi__device {
    cuabi__object base;
    int ordinal;
    CUdevice cu_device;
    _Atomic(CUcontext) primary;  /* retained lazily, released on destroy */
    /* cuabi_stream_wait_raw's event in the primary context: recorded on a
     * raw stream of this GPU and waited for, under order_lock (a record of
     * another thread between the two would be waited for instead). Made on
     * first use, destroyed with the device. */
    pthread_mutex_t order_lock;
    CUevent order_event;
} cuabi__device;

/* Make the device's primary context current on this thread (retaining it
 * on first use) and leave it so. Cheap when it already is. Only the calls
 * whose job is to make a context current use it (cuabi_device_set_current);
 * every other call works in a scope (below). */
/* The device's primary context, retained on first use (not made current). */
cuabi_status cuabi__device_primary(CUcontext *out, cuabi__device *dev, const cuabi__driver *drv);

cuabi_status cuabi__device_make_current(cuabi__device *dev, const cuabi__driver *drv);

/* The calling thread's current context, given back after work cuabi does in
 * another: cuabi's calls leave the thread's current context as they found it,
 * success or failure (torch's and the runtime's "current device" is that
 * context's device). A scope starts as CUABI__CONTEXT_SCOPE_NONE; it may be
 * entered several times (the first caller's context is the one remembered)
 * and is left once, on the one exit path:
 *
 *     cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
 *     CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
 *     cuabi_status st = ...work, no return...;
 *     return cuabi__context_leave(&scope, drv, st);
 *
 * or, for a body with many early returns, a public function that calls a
 * static body taking the scope and returns cuabi__context_end(&scope, st).
 * When the wanted context is current already, entering costs one
 * cuCtxGetCurrent and leaving nothing. A failed enter switched nothing. */
typedef struct cuabi__context_scope {
    CUcontext restore;
    bool set;                  /* restore is to be made current again */
    const cuabi__driver *drv;  /* set with `set` */
} cuabi__context_scope;

#define CUABI__CONTEXT_SCOPE_NONE { NULL, false, NULL }

/* The one exit path of a function that declared `cuabi__context_scope scope`
 * and `cuabi_status scope_st` and ends with
 *     scope_leave: return cuabi__context_end(&scope, scope_st);
 * every failure after its first enter goes there (CUABI__TRY_SCOPE), and
 * every return (CUABI__SCOPE_RETURN). */
#define CUABI__TRY_SCOPE(expr)                                                \
    do {                                                                       \
        scope_st = (expr);                                                     \
        if (scope_st != CUABI_SUCCESS) goto scope_leave;                       \
    } while (0)

#define CUABI__SCOPE_RETURN(expr)                                             \
    do {                                                                       \
        scope_st = (expr);                                                     \
        goto scope_leave;                                                      \
    } while (0)

#define CUABI__CHECK_ARG_SCOPE(cond, ...)                                     \
    do {                                                                       \
        if (CUABI__UNLIKELY(!(cond)))                                          \
            CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, __VA_ARGS__)); \
    } while (0)

/* Remember the current context in *scope (given back whatever happens next). */
cuabi_status cuabi__context_save(cuabi__context_scope *scope, const cuabi__driver *drv);
/* Make `want` current; *scope remembers the caller's when it differed. */
cuabi_status cuabi__context_enter(cuabi__context_scope *scope, CUcontext want,
                                  const cuabi__driver *drv);
/* The device's primary context made current in *scope (one cuCtxGetCurrent;
 * cuCtxSetCurrent only when it differs). */
cuabi_status cuabi__device_enter(cuabi__context_scope *scope, cuabi__device *dev,
                                 const cuabi__driver *drv);
/* Give the caller's context back. Returns `st`, or an error if that failed
 * where `st` was success (the last-error record of a failure `st` stays). */
cuabi_status cuabi__context_leave(const cuabi__context_scope *scope, const cuabi__driver *drv,
                                  cuabi_status st);
/* The same with the scope's own driver table (nothing to do when nothing
 * was switched). */
cuabi_status cuabi__context_end(const cuabi__context_scope *scope, cuabi_status st);

/* The end of a call that made an object for its caller: all or nothing.
 * `made` is the new object's handle (NULL: none), whose one reference is to
 * become the caller's. Gives the caller's context back and returns `st`;
 * when that fails where `st` was success the call fails, so the object is
 * released here (its destroy gives back what it holds) and the error names
 * `caller`: a caller that sees an error owns nothing and releases nothing. */
cuabi_status cuabi__context_end_made(const cuabi__context_scope *scope, cuabi_status st,
                                     const void *made, cuabi__handle_type type,
                                     const char *caller);

/* The error of a call whose restore failed after it made something (now
 * released by the caller), naming `caller`. */
cuabi_status cuabi__context_made_lost(const char *caller);

/* cuabi__context_end_made for the handle in *out (of tag TAG), with *out
 * cleared when the call fails; `st` is a status variable, assigned. */
#define CUABI__CONTEXT_END_OUT(scope, st, out, TAG, caller)                                  \
    (((st) = cuabi__context_end_made((scope), (st), *(out), CUABI__T_##TAG, (caller))) ==    \
             CUABI_SUCCESS                                                                  \
         ? (st)                                                                             \
         : (*(out) = NULL, (st)))

#endif
