/* Handles and the objects behind them (handle.c).
 *
 * Every handle-backed object starts with a cuabi__object header; its public
 * handle is not a pointer but an index + generation into the registry,
 * whose layout is shared by handle.c and the inline lookup below (every
 * public call resolves handles, so the common case is inlined). The facts
 * about how a handle encodes its slot live here and nowhere else; handle.c
 * documents the registry's guarantees. */
#ifndef CUABI_UTIL_HANDLE_H
#define CUABI_UTIL_HANDLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuabi.h"
#include "util/error.h"
#include "util/handle_types.h"

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

/*     bits 63..48  0xCAB1 (magic)     bits 47..24  generation
 *     bits 23..0   slot index                                       */
#define CUABI__HANDLE_MAGIC      UINT64_C(0xCAB1)
#define CUABI__HANDLE_INDEX_BITS 24
#define CUABI__HANDLE_GEN_BITS   24
#define CUABI__HANDLE_CHUNK_BITS 12
#define CUABI__HANDLE_CHUNK_SIZE (1u << CUABI__HANDLE_CHUNK_BITS)
#define CUABI__HANDLE_MAX_CHUNKS (1u << (CUABI__HANDLE_INDEX_BITS - CUABI__HANDLE_CHUNK_BITS))
#define CUABI__HANDLE_GEN_MASK   ((1u << CUABI__HANDLE_GEN_BITS) - 1)
#define CUABI__HANDLE_INDEX_MASK ((1u << CUABI__HANDLE_INDEX_BITS) - 1)

typedef struct cuabi__slot {
    /* state: generation << 8 | type; type 0 means free. */
    _Atomic uint64_t state;
    _Atomic(cuabi__object *) obj;
    uint32_t next_free;
} cuabi__slot;

/* Slot chunks: allocated once, never freed or moved (see handle.c). */
extern _Atomic(cuabi__slot *) cuabi__handle_chunks[CUABI__HANDLE_MAX_CHUNKS];

/* The error of a failed lookup (NULL, foreign, destroyed, wrong type). */
cuabi_status cuabi__handle_error(const void *handle, cuabi__handle_type type, const char *caller)
#if defined(__GNUC__)
    __attribute__((cold))
#endif
    ;

/* Resolve a public handle to its object, checking liveness and type;
 * `caller` names the public function for the error message. One compare
 * checks magic, liveness, generation and type at once: the slot's state
 * must be the one a live object of `type` with this handle's generation
 * has. The acquire loads pair with the release stores of handle.c. */
static inline cuabi_status cuabi__handle_get(const void *handle, cuabi__handle_type type,
                                             void **out, const char *caller)
{
    uint64_t v = (uint64_t)(uintptr_t)handle;
    cuabi__slot *chunk =
        (v >> 48) == CUABI__HANDLE_MAGIC
            ? atomic_load_explicit(&cuabi__handle_chunks[(v & CUABI__HANDLE_INDEX_MASK) >>
                                                         CUABI__HANDLE_CHUNK_BITS],
                                   memory_order_acquire)
            : NULL;
    if (__builtin_expect(!chunk, 0))
        goto fail;
    cuabi__slot *s = &chunk[v & (CUABI__HANDLE_CHUNK_SIZE - 1)];
    uint64_t want = ((v >> CUABI__HANDLE_INDEX_BITS) & CUABI__HANDLE_GEN_MASK) << 8 |
                    (uint64_t)type;
    if (__builtin_expect(atomic_load_explicit(&s->state, memory_order_acquire) != want ||
                             type == 0, 0))
        goto fail;
    *out = atomic_load_explicit(&s->obj, memory_order_relaxed);
    return CUABI_SUCCESS;
fail:
    *out = NULL; /* callers' compilers can't see that the error is never success */
    return cuabi__handle_error(handle, type, caller);
}

/* The slot of an object registered before, invalidated with keeps_slot set
 * and kept by its owner (buffer.c parks freed buffers with their slots):
 * make it live again under a new generation, the way
 * cuabi__handle_register would, without taking a slot from the free lists.
 * The refcount is 1 again. The release store publishes the object to
 * cuabi__handle_get. */
static inline void cuabi__handle_revive(cuabi__object *obj, cuabi__handle_type type,
                                        void (*destroy)(cuabi__object *))
{
    uint32_t index = (uint32_t)(obj->handle & CUABI__HANDLE_INDEX_MASK);
    cuabi__slot *chunk = atomic_load_explicit(
        &cuabi__handle_chunks[index >> CUABI__HANDLE_CHUNK_BITS], memory_order_relaxed);
    cuabi__slot *s = &chunk[index & (CUABI__HANDLE_CHUNK_SIZE - 1)];
    uint64_t gen = ((atomic_load_explicit(&s->state, memory_order_relaxed) >> 8) + 1) &
                   CUABI__HANDLE_GEN_MASK;
    if (__builtin_expect(gen == 0, 0))
        gen = 1;
    atomic_store_explicit(&obj->refs, 1, memory_order_relaxed);
    obj->type = type;
    obj->destroy = destroy;
    obj->handle = (CUABI__HANDLE_MAGIC << 48) | (gen << CUABI__HANDLE_INDEX_BITS) | index;
    atomic_store_explicit(&s->obj, obj, memory_order_relaxed);
    atomic_store_explicit(&s->state, gen << 8 | (uint64_t)type, memory_order_release);
}

/* Invalidate the handle of an object that keeps its slot (keeps_slot) and
 * whose only reference the caller holds (unique handles: nothing else
 * retains them), without an atomic count update or a call: buffers' hot
 * free path. */
static inline void cuabi__handle_retire(cuabi__object *obj)
{
    uint32_t index = (uint32_t)(obj->handle & CUABI__HANDLE_INDEX_MASK);
    cuabi__slot *chunk = atomic_load_explicit(
        &cuabi__handle_chunks[index >> CUABI__HANDLE_CHUNK_BITS], memory_order_relaxed);
    cuabi__slot *s = &chunk[index & (CUABI__HANDLE_CHUNK_SIZE - 1)];
    uint64_t gen = atomic_load_explicit(&s->state, memory_order_relaxed) >> 8;
    atomic_store_explicit(&s->state, gen << 8, memory_order_release);
    atomic_store_explicit(&s->obj, NULL, memory_order_relaxed);
}

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

#endif
