/* Handle registry: index + generation handles.
 *
 * A public handle is not a pointer. It encodes a slot index and the slot's
 * generation under a magic tag:
 *
 *     bits 63..48  0xCAB1 (magic)     bits 47..24  generation
 *     bits 23..0   slot index
 *
 * Slots live in chunks that are allocated once and never freed or moved, so
 * resolving a handle is a few loads and compares with no lock and no read of
 * freed memory: NULL, foreign (bad magic, unknown slot), destroyed
 * (generation moved on) and wrong-type handles are all detected. Freed slots
 * are reused first-in first-out, so a stale handle would need ~16M reuses of
 * the same slot to alias a new object.
 *
 * Using a handle on one thread while another thread drops its last reference
 * is a race in the caller's program, as with any reference-counted API.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

#define MAGIC          UINT64_C(0xCAB1)
#define INDEX_BITS     24
#define GEN_BITS       24
#define CHUNK_BITS     12
#define CHUNK_SIZE     (1u << CHUNK_BITS)
#define MAX_CHUNKS     (1u << (INDEX_BITS - CHUNK_BITS))
#define GEN_MASK       ((1u << GEN_BITS) - 1)
#define INDEX_MASK     ((1u << INDEX_BITS) - 1)
#define NO_SLOT        UINT32_MAX

typedef struct slot {
    /* state: generation << 8 | type; type 0 means free. */
    _Atomic uint64_t state;
    _Atomic(cuabi__object *) obj;
    uint32_t next_free;
} slot;

static _Atomic(slot *) chunks[MAX_CHUNKS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t next_unused;            /* first never-used index */
static uint32_t free_head = NO_SLOT, free_tail = NO_SLOT;
static _Atomic size_t live_count;

static inline uint64_t encode(uint32_t index, uint32_t gen)
{
    return (MAGIC << 48) | ((uint64_t)(gen & GEN_MASK) << INDEX_BITS) | index;
}

static inline slot *slot_at(uint32_t index)
{
    slot *chunk = atomic_load_explicit(&chunks[index >> CHUNK_BITS],
                                       memory_order_acquire);
    return chunk ? &chunk[index & (CHUNK_SIZE - 1)] : NULL;
}

/* Take a free slot index; called with registry_lock held. */
static cuabi_status take_slot(uint32_t *out)
{
    if (free_head != NO_SLOT) {
        uint32_t idx = free_head;
        free_head = slot_at(idx)->next_free;
        if (free_head == NO_SLOT)
            free_tail = NO_SLOT;
        *out = idx;
        return CUABI_SUCCESS;
    }
    if (next_unused > INDEX_MASK)
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY,
                            "too many live cuabi handles (limit %u)",
                            INDEX_MASK + 1);
    uint32_t c = next_unused >> CHUNK_BITS;
    if (!atomic_load_explicit(&chunks[c], memory_order_relaxed)) {
        slot *chunk = cuabi__calloc(CHUNK_SIZE, sizeof(slot));
        if (!chunk)
            return CUABI_ERROR_OUT_OF_MEMORY;
        atomic_store_explicit(&chunks[c], chunk, memory_order_release);
    }
    *out = next_unused++;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__handle_register(cuabi__object *obj, cuabi__handle_type type,
                                    void (*destroy)(cuabi__object *))
{
    uint32_t idx = 0;
    pthread_mutex_lock(&registry_lock);
    cuabi_status st = take_slot(&idx);
    if (st == CUABI_SUCCESS) {
        slot *s = slot_at(idx);
        uint64_t gen = ((atomic_load(&s->state) >> 8) + 1) & GEN_MASK;
        if (gen == 0)
            gen = 1;
        atomic_store(&obj->refs, 1);
        obj->type = type;
        obj->destroy = destroy;
        obj->handle = encode(idx, (uint32_t)gen);
        atomic_store_explicit(&s->obj, obj, memory_order_relaxed);
        atomic_store_explicit(&s->state, gen << 8 | (uint64_t)type,
                              memory_order_release);
        atomic_fetch_add(&live_count, 1);
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

static const char *type_name(uint32_t type)
{
    return type < CUABI__T_COUNT ? cuabi__handle_type_names[type] : "handle";
}

cuabi_status cuabi__handle_get(const void *handle, cuabi__handle_type type,
                               void **out, const char *caller)
{
    uint64_t v = (uint64_t)(uintptr_t)handle;
    if (CUABI__UNLIKELY(!handle))
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: %s handle is NULL", caller, type_name(type));
    uint32_t idx = (uint32_t)(v & INDEX_MASK);
    uint64_t gen = (v >> INDEX_BITS) & GEN_MASK;
    slot *s = (v >> 48) == MAGIC ? slot_at(idx) : NULL;
    if (CUABI__UNLIKELY(!s))
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: %p is not a cuabi handle (expected %s)",
                            caller, handle, type_name(type));
    uint64_t state = atomic_load_explicit(&s->state, memory_order_acquire);
    if (CUABI__UNLIKELY((state >> 8) != gen || (state & 0xff) == 0))
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: %s handle %p was already released or "
                            "destroyed", caller, type_name(type), handle);
    if (CUABI__UNLIKELY((state & 0xff) != (uint64_t)type))
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: handle %p is a %s, expected %s", caller,
                            handle, type_name((uint32_t)(state & 0xff)),
                            type_name(type));
    *out = atomic_load_explicit(&s->obj, memory_order_relaxed);
    return CUABI_SUCCESS;
}

void cuabi__object_retain(cuabi__object *obj)
{
    atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
}

/* Invalidate the object's slot and put it at the tail of the free list. */
static void unregister(cuabi__object *obj)
{
    uint32_t idx = (uint32_t)(obj->handle & INDEX_MASK);
    pthread_mutex_lock(&registry_lock);
    slot *s = slot_at(idx); /* never NULL: the object was registered */
    if (!s) {
        pthread_mutex_unlock(&registry_lock);
        return;
    }
    uint64_t gen = (atomic_load(&s->state) >> 8);
    atomic_store_explicit(&s->state, gen << 8, memory_order_release);
    atomic_store_explicit(&s->obj, NULL, memory_order_relaxed);
    s->next_free = NO_SLOT;
    if (free_tail != NO_SLOT)
        slot_at(free_tail)->next_free = idx;
    else
        free_head = idx;
    free_tail = idx;
    atomic_fetch_sub(&live_count, 1);
    pthread_mutex_unlock(&registry_lock);
}

void cuabi__object_release(cuabi__object *obj)
{
    if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) != 1)
        return;
    unregister(obj);
    obj->destroy(obj);
}

cuabi_status cuabi__handle_retain(const void *handle, cuabi__handle_type type)
{
    void *obj;
    cuabi_status st = cuabi__handle_get(handle, type, &obj, "retain");
    if (st == CUABI_SUCCESS)
        cuabi__object_retain(obj);
    return st;
}

cuabi_status cuabi__handle_release(const void *handle, cuabi__handle_type type)
{
    void *obj;
    cuabi_status st = cuabi__handle_get(handle, type, &obj, "release");
    if (st == CUABI_SUCCESS)
        cuabi__object_release(obj);
    return st;
}

size_t cuabi__handle_live_count(void)
{
    return atomic_load(&live_count);
}

/* At dlclose() (and process exit) give the slot chunks back, so that
 * loading and unloading the library repeatedly does not leak them. Only
 * when no handle is live: a live one may still be reached by a DLPack
 * deleter running from another library's destructor, and a lookup after
 * this finds no chunk and reports an invalid handle. */
__attribute__((destructor)) static void registry_unload(void)
{
    pthread_mutex_lock(&registry_lock);
    if (atomic_load(&live_count) == 0) {
        for (uint32_t c = 0; c < MAX_CHUNKS; c++) {
            slot *chunk = atomic_exchange(&chunks[c], NULL);
            free(chunk);
        }
        next_unused = 0;
        free_head = free_tail = NO_SLOT;
    }
    pthread_mutex_unlock(&registry_lock);
}
