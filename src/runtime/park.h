/* Per-thread state that makes the buffer allocate/free loop cheap
 * (src/runtime/park.c): the park of freed buffer structs and the resource lease.
 * Inline here because both halves of the hot pair (buffer.c) use them.
 *
 * The park. A freed buffer struct is not given back at once: it waits in a
 * per-thread FIFO ring together with its handle slot (keeps_slot,
 * handle.h), and a later buffer takes it over with cuabi__handle_revive:
 * no malloc/free and no trip through the handle registry's free lists. A
 * struct is reused only once more than CUABI__PARK_KEEP others wait behind
 * it, so a thread churning one buffer still cycles through
 * CUABI__PARK_KEEP + 1 slots (the registry's guarantee against a stale
 * handle aliasing a new buffer, handle.c). A full park gives its oldest
 * struct and slot back; a thread's park is emptied when the thread ends.
 * Sanitizer builds park nothing, so use-after-free of a struct is caught.
 *
 * The lease. A buffer holds a counted reference to its resource, and the
 * two atomic updates per allocate + free pair cost more than the rest of
 * cuabi's share of it (bench_pool_parts). So a thread keeps a few spare
 * references to the last resource it freed a buffer of: the free puts the
 * buffer's reference there, the next allocation from that resource takes
 * it back, and neither touches the shared count. Only the owning thread
 * touches its lease, inside a short "section" (busy = 1 ... busy = 0)
 * that ends early when a reclaim holds the park. A caller's release of a
 * resource handle reclaims every thread's spares for it first
 * (cuabi__resource_before_release: hold every park, an asymmetric fence
 * with membarrier(2) so no section can miss the hold or hide its busy
 * flag, wait out running sections, take the spares) and ends leasing for
 * that resource, so a released resource is destroyed as soon as its last
 * buffer goes, whatever other threads do. Without membarrier (old kernels,
 * seccomp) there are no leases: the counted references are updated as
 * before. */
#ifndef CUABI_PARK_H
#define CUABI_PARK_H

#include "runtime/memory.h"

#if defined(__SANITIZE_ADDRESS__)
#  define CUABI__PARK_CAP 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define CUABI__PARK_CAP 0
#  endif
#endif
#ifndef CUABI__PARK_CAP
#  define CUABI__PARK_CAP 32
#endif
#define CUABI__PARK_KEEP  16
#define CUABI__PARK_SLOTS (CUABI__PARK_CAP ? CUABI__PARK_CAP : 1) /* sanitizers: unused */
/* Spare references a lease keeps at most (more go back to the count). */
#define CUABI__LEASE_MAX  256

typedef struct cuabi__park {
    cuabi__buffer *ring[CUABI__PARK_SLOTS]; /* oldest at head */
    uint32_t head, count;
    int state; /* 0 unknown, 1 usable, -1 not (no TSD key); in the struct: one
                  thread-local access per use (each is a call in a .so) */
    /* The lease: `spares` counted references to `lease_res`. Written by the
     * owner inside a section, or by a reclaim while the park is held. */
    cuabi__memory_resource *lease_res;
    int64_t spares;
    _Atomic int busy;  /* the owner is inside a section */
    _Atomic int hold;  /* a reclaim is under way: sections end at once */
    bool listed;       /* on the list reclaims walk: leases allowed */
    struct cuabi__park *prev, *next;
} cuabi__park;

extern _Thread_local cuabi__park cuabi__park_tls;

/* A thread's first use: register its park (thread-exit emptying, the
 * reclaim list). */
void cuabi__park_init(cuabi__park *p);

/* This thread's park, or NULL when it could not be emptied at thread exit. */
static inline cuabi__park *cuabi__my_park(void)
{
    cuabi__park *p = &cuabi__park_tls;
    __asm__("" : "+r"(p)); /* one thread-local address computation (handle.c) */
    if (CUABI__UNLIKELY(p->state == 0))
        cuabi__park_init(p);
    return p->state > 0 ? p : NULL;
}

/* The oldest parked struct (its slot comes along) once more than
 * CUABI__PARK_KEEP wait, or NULL. */
static inline cuabi__buffer *cuabi__park_take(cuabi__park *p)
{
    if (!CUABI__PARK_CAP || !p || p->count <= CUABI__PARK_KEEP)
        return NULL;
    cuabi__buffer *b = p->ring[p->head];
    p->head = (p->head + 1) % CUABI__PARK_SLOTS;
    p->count--;
    return b;
}

/* Park `b` (with its slot); false when the park is full or unusable. */
static inline bool cuabi__park_put(cuabi__park *p, cuabi__buffer *b)
{
    /* count + 1 > CAP, not count >= CAP: with CAP 0 (sanitizers) the
     * latter is a comparison GCC warns is always true */
    if (!CUABI__PARK_CAP || !p || p->count + 1 > CUABI__PARK_CAP)
        return false;
    p->ring[(p->head + p->count) % CUABI__PARK_SLOTS] = b;
    p->count++;
    return true;
}

/* ------------------------------------------------------------- leases */

/* Enter a section; false (and no section) while a reclaim holds the park.
 * The signal fence only stops the compiler from moving the hold check
 * above the busy store; the reclaim's membarrier stands in for the CPU
 * fence this side does not pay for. */
static inline bool cuabi__lease_enter(cuabi__park *p)
{
    atomic_store_explicit(&p->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (CUABI__LIKELY(!atomic_load_explicit(&p->hold, memory_order_acquire)))
        return true;
    atomic_store_explicit(&p->busy, 0, memory_order_release);
    return false;
}

static inline void cuabi__lease_leave(cuabi__park *p)
{
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}

/* A counted reference to `r` for a new buffer: a spare of this thread's
 * lease when it has one, else a new one. */
static inline void cuabi__resource_hold(cuabi__park *p, cuabi__memory_resource *r)
{
    if (p && p->listed && cuabi__lease_enter(p)) {
        bool spare = p->lease_res == r && p->spares > 0;
        if (spare)
            p->spares--;
        cuabi__lease_leave(p);
        if (spare)
            return;
    }
    cuabi__object_retain(&r->base);
}

/* Start a lease for `r` with the caller's reference to it as its spare,
 * giving the previous lease's spares back; the reference is released
 * instead when r may not be leased (its caller released it). Out of line:
 * a change of resource. */
void cuabi__lease_switch(cuabi__park *p, cuabi__memory_resource *r);

/* A buffer's reference to `r` is done with: into this thread's lease when
 * it is r's and has room, or starting a lease for r, else released. */
static inline void cuabi__resource_unhold(cuabi__park *p, cuabi__memory_resource *r)
{
    if (p && p->listed && cuabi__lease_enter(p)) {
        cuabi__memory_resource *held = p->lease_res;
        bool kept = held == r && p->spares < CUABI__LEASE_MAX;
        if (kept)
            p->spares++;
        cuabi__lease_leave(p);
        if (kept)
            return;
        if (held != r) {
            cuabi__lease_switch(p, r);
            return;
        }
    }
    cuabi__object_release(&r->base);
}

/* The caller's release of a resource handle (generated, api/memory.toml's
 * release_hook): end every thread's lease of it first. */
void cuabi__resource_before_release(const void *handle);

/* Tests: empty this thread's park and give its lease back. */
void cuabi__buffer_cache_flush(void);
/* Tests: whether threads may lease (membarrier works here). */
bool cuabi__leases_available(void);

#endif
