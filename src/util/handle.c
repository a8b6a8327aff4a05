/* Handle registry: index + generation handles.
 *
 * A public handle is not a pointer. It encodes a slot index and the slot's
 * generation under a magic tag:
 *
 *     bits 63..48  0xCAB1 (magic)     bits 47..24  generation
 *     bits 23..0   slot index          (constants and slot: handle.h)
 *
 * Slots live in chunks that are allocated once and never freed or moved, so
 * resolving a handle is a few loads and compares with no lock and no read of
 * freed memory: NULL, foreign (bad magic, unknown slot), destroyed
 * (generation moved on) and wrong-type handles are all detected. Freed slots
 * are reused first-in first-out, so a stale handle would need ~16M reuses of
 * the same slot to alias a new object.
 *
 * Registering and releasing take no lock in the common case: each thread
 * keeps its freed slots in a small FIFO ring of its own and reuses one only
 * once more than CACHE_KEEP others wait behind it (so a thread churning one
 * object cycles through at least CACHE_KEEP + 1 slots, never one). A full
 * ring hands its older half to the global FIFO list; a thread's ring goes
 * there when the thread ends. A free slot is owned by exactly one ring or
 * the global list, so only its owner touches it; or by the object it
 * belonged to, when that object keeps it (keeps_slot: freed buffers wait in
 * a per-thread park with their slots, buffer.c, and come back to life
 * through cuabi__handle_revive without touching the rings).
 *
 * Using a handle on one thread while another thread drops its last reference
 * is a race in the caller's program, as with any reference-counted API.
 */
#include "util/handle.h"

#include "util/alloc.h"
#include "util/tables.h"

#include <pthread.h>
#include <stdlib.h>

/* The handle layout (magic, index and generation bits, chunk size) and the
 * slot struct are in handle.h, shared with the inline cuabi__handle_get. */
#define MAGIC          CUABI__HANDLE_MAGIC
#define INDEX_BITS     CUABI__HANDLE_INDEX_BITS
#define CHUNK_BITS     CUABI__HANDLE_CHUNK_BITS
#define CHUNK_SIZE     CUABI__HANDLE_CHUNK_SIZE
#define GEN_MASK       CUABI__HANDLE_GEN_MASK
#define INDEX_MASK     CUABI__HANDLE_INDEX_MASK
#define NO_SLOT        UINT32_MAX

typedef cuabi__slot slot;
#define chunks cuabi__handle_chunks
_Atomic(slot *) cuabi__handle_chunks[CUABI__HANDLE_MAX_CHUNKS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t next_unused;            /* first never-used index */
static uint32_t free_head = NO_SLOT, free_tail = NO_SLOT;

/* The per-thread ring of freed slots (oldest at head). */
#define CACHE_CAP  64
#define CACHE_KEEP 16
/* One thread-local object (state included): in a shared library each
 * thread-local access is a call, so the hot paths make one. */
typedef struct slot_cache {
    uint32_t idx[CACHE_CAP];
    uint32_t head, count;
    int state;                          /* 0 unknown, 1 usable, -1 not (no TSD key) */
} slot_cache;
static _Thread_local slot_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

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

/* Append `idx` to the global FIFO list; registry_lock held. */
static void global_push(uint32_t idx)
{
    slot_at(idx)->next_free = NO_SLOT;
    if (free_tail != NO_SLOT)
        slot_at(free_tail)->next_free = idx;
    else
        free_head = idx;
    free_tail = idx;
}

/* Move the `n` oldest slots of a ring to the global list; registry_lock held. */
static void cache_spill(slot_cache *c, uint32_t n)
{
    for (; n > 0 && c->count > 0; n--, c->count--) {
        global_push(c->idx[c->head]);
        c->head = (c->head + 1) % CACHE_CAP;
    }
}

static void cache_flush_at_exit(void *p)
{
    pthread_mutex_lock(&registry_lock);
    cache_spill(p, CACHE_CAP);
    pthread_mutex_unlock(&registry_lock);
}

static void cache_key_create(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_flush_at_exit) == 0;
}

/* A thread's first use: register its ring for the flush at thread exit. */
static __attribute__((noinline, cold)) void cache_init(slot_cache *c)
{
    pthread_once(&cache_once, cache_key_create);
    c->state = cache_key_ok && pthread_setspecific(cache_key, c) == 0 ? 1 : -1;
}

/* This thread's ring, or NULL when threads can't be told to flush it. The
 * empty asm keeps the address in a register: left alone, the compiler
 * computes a thread-local address again (a call in a .so) at each use. */
static inline slot_cache *my_cache(void)
{
    slot_cache *c = &cache;
    __asm__("" : "+r"(c));
    if (CUABI__UNLIKELY(c->state == 0))
        cache_init(c);
    return c->state > 0 ? c : NULL;
}

/* Pop the ring's oldest slot when it holds more than `keep`. */
static bool cache_pop(slot_cache *c, uint32_t keep, uint32_t *out)
{
    if (!c || c->count <= keep)
        return false;
    *out = c->idx[c->head];
    c->head = (c->head + 1) % CACHE_CAP;
    c->count--;
    return true;
}

static cuabi_status take_slot_locked(slot_cache *c, uint32_t *out);

/* Take a free slot: from this thread's ring past CACHE_KEEP, else (under the
 * lock, out of line) the global list, a never-used slot, the rest of the
 * ring or a new chunk. */
static inline cuabi_status take_slot(uint32_t *out)
{
    slot_cache *c = my_cache();
    if (CUABI__LIKELY(cache_pop(c, CACHE_KEEP, out)))
        return CUABI_SUCCESS;
    return take_slot_locked(c, out);
}

CUABI__HOT
static __attribute__((noinline)) cuabi_status take_slot_locked(slot_cache *c, uint32_t *out)
{
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&registry_lock);
    uint32_t ci = next_unused >> CHUNK_BITS;
    if (free_head != NO_SLOT) {
        *out = free_head;
        free_head = slot_at(free_head)->next_free;
        if (free_head == NO_SLOT)
            free_tail = NO_SLOT;
    } else if (next_unused <= INDEX_MASK &&
               atomic_load_explicit(&chunks[ci], memory_order_relaxed)) {
        *out = next_unused++;
    } else if (cache_pop(c, 0, out)) {
        /* reuse a recent slot rather than grow */
    } else if (next_unused > INDEX_MASK) {
        st = cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "too many live cuabi handles (limit %u)",
                          INDEX_MASK + 1);
    } else {
        slot *chunk = cuabi__calloc(CHUNK_SIZE, sizeof(slot));
        if (chunk) {
            atomic_store_explicit(&chunks[ci], chunk, memory_order_release);
            *out = next_unused++;
        } else {
            st = CUABI_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

CUABI__HOT cuabi_status cuabi__handle_register(cuabi__object *obj, cuabi__handle_type type,
                                               void (*destroy)(cuabi__object *))
{
    uint32_t idx = 0;
    CUABI__TRY(take_slot(&idx));
    slot *s = slot_at(idx);
    uint64_t gen = ((atomic_load_explicit(&s->state, memory_order_relaxed) >> 8) + 1) & GEN_MASK;
    if (gen == 0)
        gen = 1;
    atomic_store_explicit(&obj->refs, 1, memory_order_relaxed);
    obj->type = type;
    obj->keeps_slot = false;
    obj->destroy = destroy;
    obj->handle = encode(idx, (uint32_t)gen);
    atomic_store_explicit(&s->obj, obj, memory_order_relaxed);
    /* publishes the object to cuabi__handle_get (acquire) */
    atomic_store_explicit(&s->state, gen << 8 | (uint64_t)type, memory_order_release);
    return CUABI_SUCCESS;
}

static const char *type_name(uint32_t type)
{
    return type < CUABI__T_COUNT ? cuabi__handle_type_names[type] : "handle";
}

/* The error of a failed lookup, out of line so the inline fast path
 * (handle.h) stays small. */
cuabi_status cuabi__handle_error(const void *handle, cuabi__handle_type type, const char *caller)
{
    uint64_t v = (uint64_t)(uintptr_t)handle;
    if (!handle)
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: %s handle is NULL", caller, type_name(type));
    slot *s = (v >> 48) == MAGIC ? slot_at((uint32_t)(v & INDEX_MASK)) : NULL;
    if (!s)
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: %p is not a cuabi handle (expected %s)",
                            caller, handle, type_name(type));
    uint64_t state = atomic_load_explicit(&s->state, memory_order_acquire);
    if ((state >> 8) != ((v >> INDEX_BITS) & GEN_MASK) || (state & 0xff) == 0)
        return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                            "%s: %s handle %p was already released or "
                            "destroyed", caller, type_name(type), handle);
    return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                        "%s: handle %p is a %s, expected %s", caller,
                        handle, type_name((uint32_t)(state & 0xff)),
                        type_name(type));
}

static void unregister_locked(slot_cache *c, uint32_t idx);
static void free_slot(uint32_t idx);

/* Invalidate the object's slot and, unless the object keeps it, hand it to
 * this thread's ring (or, when the ring is full or unusable, the global
 * list). */
static void unregister(cuabi__object *obj)
{
    uint32_t idx = (uint32_t)(obj->handle & INDEX_MASK);
    slot *s = slot_at(idx); /* never NULL: the object was registered */
    uint64_t gen = atomic_load_explicit(&s->state, memory_order_relaxed) >> 8;
    atomic_store_explicit(&s->state, gen << 8, memory_order_release);
    atomic_store_explicit(&s->obj, NULL, memory_order_relaxed);
    if (!obj->keeps_slot)
        free_slot(idx);
}

void cuabi__handle_give_back(cuabi__object *obj, bool exiting)
{
    uint32_t idx = (uint32_t)(obj->handle & INDEX_MASK);
    obj->keeps_slot = false;
    if (!exiting) {
        free_slot(idx);
        return;
    }
    /* Thread-exit destructors run in no set order: this thread's ring may
     * already have been flushed, so the slot goes to the global list. */
    pthread_mutex_lock(&registry_lock);
    global_push(idx);
    pthread_mutex_unlock(&registry_lock);
}

/* An invalid slot back to this thread's ring, or the global list. */
static void free_slot(uint32_t idx)
{
    slot_cache *c = my_cache();
    if (CUABI__LIKELY(c && c->count < CACHE_CAP)) {
        c->idx[(c->head + c->count) % CACHE_CAP] = idx;
        c->count++;
        return;
    }
    unregister_locked(c, idx);
}

/* The ring is full (spill half of it first) or unusable (global list). */
static __attribute__((noinline)) void unregister_locked(slot_cache *c, uint32_t idx)
{
    pthread_mutex_lock(&registry_lock);
    if (c) {
        cache_spill(c, CACHE_CAP / 2);
        c->idx[(c->head + c->count) % CACHE_CAP] = idx;
        c->count++;
    } else {
        global_push(idx);
    }
    pthread_mutex_unlock(&registry_lock);
}

bool cuabi__object_drop(cuabi__object *obj)
{
    if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) != 1)
        return false;
    unregister(obj);
    return true;
}

/* The last reference of cuabi__object_release (handle.h) is gone. */
void cuabi__object_finish(cuabi__object *obj)
{
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

/* Counted by a scan rather than a shared counter that every register and
 * release would have to update: only tests ask. */
size_t cuabi__handle_live_count(void)
{
    pthread_mutex_lock(&registry_lock);
    uint32_t n = next_unused;
    pthread_mutex_unlock(&registry_lock);
    size_t live = 0;
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load_explicit(&slot_at(i)->state, memory_order_acquire) & 0xff)
            live++;
    return live;
}

/* At dlclose() (and process exit): delete the key whose destructor flushes
 * a thread's ring, so a thread that used cuabi and ends after the library
 * is unloaded does not call into unmapped code. The slot chunks are kept
 * (about 96 KiB per load cycle): at process exit another thread may still
 * be registering handles, and freeing them under it would crash. */
__attribute__((destructor)) static void registry_unload(void)
{
    if (cache_key_ok)
        pthread_key_delete(cache_key);
}
