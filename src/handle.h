/* Handle registry layout, shared by src/handle.c and the inline lookup below
 * (every public call resolves handles, so the common case is inlined).
 * The facts about how a handle encodes its slot live here and nowhere else;
 * src/handle.c documents the registry's guarantees. Include internal.h,
 * not this file. */
#ifndef CUABI_HANDLE_H
#define CUABI_HANDLE_H

#include <stdatomic.h>
#include <stdint.h>

#include "cuabi.h"
#include "generated/handle_types.h"

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

typedef struct cuabi__object cuabi__object;

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

#endif
