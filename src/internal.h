/* Internal declarations shared by every module of libcuabi.
 * Nothing declared here is exported from the shared library. */
#ifndef CUABI_INTERNAL_H
#define CUABI_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuabi.h"
#include "generated/handle_types.h"
#include "loader.h"

#if defined(__GNUC__)
#  define CUABI__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#  define CUABI__UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define CUABI__LIKELY(x) __builtin_expect(!!(x), 1)
#else
#  define CUABI__PRINTF(fmt, args)
#  define CUABI__UNLIKELY(x) (x)
#  define CUABI__LIKELY(x) (x)
#endif

/* ---------------------------------------------------------------- errors */

typedef struct cuabi__status_info {
    cuabi_status status;
    const char *name;
    const char *message;
} cuabi__status_info;
extern const cuabi__status_info cuabi__status_table[]; /* generated */
extern const char *const cuabi__handle_type_names[];   /* generated */

/* Record an error in the calling thread's last-error record and return
 * `status`. The message is prefixed by nothing: callers name themselves
 * (usually with __func__). Clears the CUDA/NVRTC/nvJitLink codes and log. */
cuabi_status cuabi__error(cuabi_status status, const char *fmt, ...)
    CUABI__PRINTF(2, 3);
/* Attach the underlying library codes to the current record. */
void cuabi__error_set_cu(int cu_result);
void cuabi__error_set_nvrtc(int nvrtc_result);
void cuabi__error_set_nvjitlink(int nvjitlink_result);
/* Attach a compiler/linker log (copied) to the current record. Returns 0,
 * or -1 if the copy could not be allocated (the log is then dropped). */
int cuabi__error_set_log(const char *log, size_t len);

#define CUABI__CHECK_VERSION(what, version, max)                              \
    do {                                                                       \
        if ((version) == 0 || (version) > (unsigned)(max))                     \
            return cuabi__error(CUABI_ERROR_INVALID_VERSION,                   \
                                "%s: %s version %u is not supported "         \
                                "(this library knows 1..%u; use the "         \
                                "*_INIT macro or *_init())",                  \
                                __func__, what, (unsigned)(version),           \
                                (unsigned)(max));                              \
    } while (0)

/* Check a versioned struct pointer given to a function; NULL allowed when
 * `optional`. */
#define CUABI__CHECK_OPTS(opts, what, max, optional)                          \
    do {                                                                       \
        if (!(opts)) {                                                         \
            if (optional) break;                                               \
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,                  \
                                "%s: %s is NULL", __func__, what);             \
        }                                                                      \
        CUABI__CHECK_VERSION(what, (opts)->version, max);                      \
    } while (0)

#define CUABI__CHECK_ARG(cond, ...)                                           \
    do {                                                                       \
        if (CUABI__UNLIKELY(!(cond)))                                          \
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, __VA_ARGS__);    \
    } while (0)

#define CUABI__TRY(expr)                                                      \
    do {                                                                       \
        cuabi_status st__ = (expr);                                            \
        if (st__ != CUABI_SUCCESS) return st__;                                \
    } while (0)

/* --------------------------------------------------------------- handles */

/* Every handle-backed object starts with this header. */
typedef struct cuabi__object cuabi__object;
struct cuabi__object {
    _Atomic int64_t refs;
    uint32_t type;           /* cuabi__handle_type */
    bool keeps_slot;         /* the handle's slot stays with the object when it
                                is invalidated (buffers: see handle.h) */
    uint64_t handle;         /* the encoded public handle value */
    void (*destroy)(cuabi__object *self);
};

/* Give `obj` a public handle (refs = 1). `destroy` runs once, after the
 * last release, with the handle already invalid. On failure nothing is
 * registered and the caller still owns obj. */
cuabi_status cuabi__handle_register(cuabi__object *obj, cuabi__handle_type type,
                                    void (*destroy)(cuabi__object *));
/* cuabi__handle_get (inline): resolve a public handle to its object,
 * checking liveness and type; `caller` names the public function for the
 * error message. */
#include "handle.h"
cuabi_status cuabi__handle_retain(const void *handle, cuabi__handle_type type);
cuabi_status cuabi__handle_release(const void *handle, cuabi__handle_type type);
/* Reference counting on objects already resolved (child -> parent). The
 * count updates are inline; the last release calls cuabi__object_finish. */
void cuabi__object_finish(cuabi__object *obj);
static inline void cuabi__object_retain(cuabi__object *obj)
{
    atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
}
static inline void cuabi__object_release(cuabi__object *obj)
{
    if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1)
        cuabi__object_finish(obj);
}
/* Drop n references at once (n >= 1). */
static inline void cuabi__object_release_n(cuabi__object *obj, int64_t n)
{
    if (atomic_fetch_sub_explicit(&obj->refs, n, memory_order_acq_rel) == n)
        cuabi__object_finish(obj);
}
/* Drop one reference; the last one invalidates the handle and returns true
 * WITHOUT calling destroy: the caller finishes the object. */
bool cuabi__object_drop(cuabi__object *obj);
/* An object whose handle keeps its slot (keeps_slot, set after
 * registering) has its slot invalidated, not freed, by cuabi__handle_retire (handle.h),
 * cuabi__object_drop and the last release; its owner either registers it
 * again with cuabi__handle_revive (handle.h) or hands the slot back here.
 * `exiting`: called from a thread-exit destructor (straight to the global
 * list, not this thread's ring). */
void cuabi__handle_give_back(cuabi__object *obj, bool exiting);
/* Number of live handles (tests check nothing leaks). */
size_t cuabi__handle_live_count(void);

/* Public handle value of an object, typed. */
#define CUABI__HANDLE(obj, ctype) ((ctype *)(uintptr_t)(obj)->base.handle)

/* Resolve `handle` of the given tag into `var` or return the error. */
#define CUABI__GET(var, handle, TAG)                                          \
    do {                                                                       \
        void *obj__;                                                           \
        cuabi_status st__ = cuabi__handle_get((handle), CUABI__T_##TAG,        \
                                              &obj__, __func__);               \
        if (CUABI__UNLIKELY(st__ != CUABI_SUCCESS)) return st__;               \
        (var) = obj__;                                                         \
    } while (0)

/* ---------------------------------------------------------- memory helpers */

/* Allocation wrappers: failures set CUABI_ERROR_OUT_OF_MEMORY (tests can
 * make them fail; see cuabi__alloc_fail_at). */
void *cuabi__malloc_in(size_t size, const char *caller);
void *cuabi__calloc_in(size_t n, size_t size, const char *caller);
void *cuabi__realloc_in(void *p, size_t size, const char *caller);
char *cuabi__strdup_in(const char *s, const char *caller);
/* The out-of-memory message names the function that allocated. */
#define cuabi__malloc(size) cuabi__malloc_in((size), __func__)
#define cuabi__calloc(n, size) cuabi__calloc_in((n), (size), __func__)
#define cuabi__realloc(p, size) cuabi__realloc_in((p), (size), __func__)
#define cuabi__strdup(s) cuabi__strdup_in((s), __func__)
void cuabi__free(void *p);
/* Testing: make the Nth allocation from now fail (1 = next one); 0 turns
 * injection off. `sticky` keeps failing after the Nth. */
void cuabi__alloc_fail_at(long n, bool sticky);
/* Testing: how many allocations failed by injection since the last arming. */
long cuabi__alloc_fail_count(void);
/* Testing: count the allocations made through the wrappers above, from
 * zero (`on`), or stop counting; cuabi__alloc_counted() says how many
 * (tests/test_cache.c checks that a memory cache hit copies nothing). */
void cuabi__alloc_count(bool on);
long cuabi__alloc_counted(void);

/* -------------------------------------------------------------- devices */

typedef struct cuabi__device {
    cuabi__object base;
    int ordinal;
    CUdevice cu_device;
    _Atomic(CUcontext) primary;  /* retained lazily, released on destroy */
} cuabi__device;

/* Make the device's primary context current on this thread (retaining it
 * on first use). Cheap when it already is. */
cuabi_status cuabi__device_activate(cuabi__device *dev, const cuabi__driver *drv);

typedef struct cuabi__stream {
    cuabi__object base;
    cuabi__device *device;   /* retained */
    CUstream cu_stream;
    bool owned;              /* destroy cu_stream with the handle */
} cuabi__stream;

/* Driver calls on the default streams (0, CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD) act on the current context: make the stream's device
 * current first. Created and wrapped streams carry their context. */
static inline cuabi_status cuabi__stream_prepare(cuabi__stream *s, const cuabi__driver *drv)
{
    if ((uintptr_t)s->cu_stream > 2)
        return CUABI_SUCCESS;
    return cuabi__device_activate(s->device, drv);
}

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
