/* The per-thread park of freed buffers and the resource lease: setup,
 * thread exit, and the reclaim that ends a resource's leases (park.h says
 * what they are for). */
#include "runtime/park.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#if defined(__linux__)
#  include <linux/membarrier.h>
#  include <sys/syscall.h>
#  include <unistd.h>
#endif

_Thread_local cuabi__park cuabi__park_tls;

static pthread_key_t park_key;
static pthread_once_t park_once = PTHREAD_ONCE_INIT;
static bool park_key_ok;

/* Parks that may lease, for reclaims to walk; parks_lock also keeps a
 * listed park's thread from ending (and unlisting it) during a reclaim. */
static pthread_mutex_t parks_lock = PTHREAD_MUTEX_INITIALIZER;
static cuabi__park *parks;
static bool leases_on;

/* ------------------------------------------------------------ membarrier */

/* Whether this process may use membarrier(2)'s private expedited command
 * (registered once, Linux >= 4.14). */
static bool membarrier_register(void)
{
#if defined(__linux__) && defined(__NR_membarrier)
    long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return false;
    return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
    return false;
#endif
}

/* A full memory barrier on every running thread of this process. */
static bool membarrier_all(void)
{
#if defined(__linux__) && defined(__NR_membarrier)
    return syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
    return false;
#endif
}

/* ------------------------------------------------------------- the list */

static void park_list(cuabi__park *p)
{
    pthread_mutex_lock(&parks_lock);
    p->prev = NULL;
    p->next = parks;
    if (parks)
        parks->prev = p;
    parks = p;
    p->listed = true;
    pthread_mutex_unlock(&parks_lock);
}

/* Take `p` off the list (lock held); its lease stays with the caller. */
static void park_unlist_locked(cuabi__park *p)
{
    if (!p->listed)
        return;
    if (p->prev)
        p->prev->next = p->next;
    else
        parks = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->listed = false;
}

/* A forked child has only the forking thread: the other threads' parks
 * (one might even be inside a section) must not be waited for. */
static void fork_prepare(void) { pthread_mutex_lock(&parks_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&parks_lock); }
static void fork_child(void)
{
    cuabi__park *mine = &cuabi__park_tls;
    parks = NULL;
    if (mine->listed) {
        mine->prev = mine->next = NULL;
        parks = mine;
    }
    pthread_mutex_unlock(&parks_lock);
}

/* ----------------------------------------------------------- lifecycle */

/* Give the lease's spares back (never inside a section: this may destroy
 * the resource). */
static void lease_drop(cuabi__memory_resource *r, int64_t n)
{
    if (r && n > 0)
        cuabi__object_release_n(&r->base, n);
}

/* Give every parked struct and its slot back; `exiting`: at thread exit. */
static void park_empty(cuabi__park *p, bool exiting)
{
    for (; p->count > 0; p->count--) {
        cuabi__buffer *b = p->ring[p->head];
        p->head = (p->head + 1) % CUABI__PARK_SLOTS;
        cuabi__handle_give_back(&b->base, exiting);
        free(b);
    }
}

/* Thread exit: off the list first (no reclaim waits for it any more), then
 * the lease and the parked structs. */
static void park_end(void *arg)
{
    cuabi__park *p = arg;
    pthread_mutex_lock(&parks_lock);
    park_unlist_locked(p);
    pthread_mutex_unlock(&parks_lock);
    cuabi__memory_resource *r = p->lease_res;
    int64_t n = p->spares;
    p->lease_res = NULL;
    p->spares = 0;
    lease_drop(r, n);
    park_empty(p, true);
}

void cuabi__buffer_cache_flush(void)
{
    cuabi__park *p = &cuabi__park_tls;
    if (p->state <= 0)
        return;
    cuabi__memory_resource *r = NULL;
    int64_t n = 0;
    if (p->listed && cuabi__lease_enter(p)) {
        r = p->lease_res;
        n = p->spares;
        p->lease_res = NULL;
        p->spares = 0;
        cuabi__lease_leave(p);
    }
    lease_drop(r, n);
    park_empty(p, false);
}

static void park_once_init(void)
{
    park_key_ok = pthread_key_create(&park_key, park_end) == 0;
    leases_on = park_key_ok && membarrier_register() &&
                pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
}

void cuabi__park_init(cuabi__park *p)
{
    pthread_once(&park_once, park_once_init);
    p->state = park_key_ok && pthread_setspecific(park_key, p) == 0 ? 1 : -1;
    if (p->state > 0 && leases_on)
        park_list(p);
}

bool cuabi__leases_available(void)
{
    pthread_once(&park_once, park_once_init);
    return leases_on;
}

/* At dlclose() (and process exit): delete the key whose destructor empties
 * a thread's park, so a thread that used buffers and ends after the library
 * is unloaded does not call into unmapped code. What such threads have
 * parked or leased stays (like the handle registry's chunks). */
__attribute__((destructor)) static void park_unload(void)
{
    if (park_key_ok)
        pthread_key_delete(park_key);
}

/* --------------------------------------------------------------- leases */

void cuabi__lease_switch(cuabi__park *p, cuabi__memory_resource *r)
{
    cuabi__memory_resource *old = NULL;
    int64_t n = 0;
    bool kept = false;
    if (cuabi__lease_enter(p)) {
        if (atomic_load_explicit(&r->leasable, memory_order_relaxed)) {
            old = p->lease_res;
            n = p->spares;
            p->lease_res = r;
            p->spares = 1;
            kept = true;
        }
        cuabi__lease_leave(p);
    }
    if (!kept)
        cuabi__object_release(&r->base);
    lease_drop(old, n);
}

/* Wait until no section runs on a held park (they are a few instructions
 * long; a descheduled owner gets the CPU back soon). */
static void wait_quiet(cuabi__park *q)
{
    for (int spins = 0; atomic_load_explicit(&q->busy, memory_order_acquire); spins++)
        if (spins > 64)
            sched_yield();
}

/* End every lease of `r` and make it unleasable: hold every park, fence
 * every thread (a section that starts after sees the hold or the
 * unleasable resource; one that started before shows its busy flag), wait
 * out running sections, take the spares, let the parks go. */
static void lease_reclaim(cuabi__memory_resource *r)
{
    int64_t n = 0;
    pthread_mutex_lock(&parks_lock);
    atomic_store_explicit(&r->leasable, false, memory_order_relaxed);
    for (cuabi__park *q = parks; q; q = q->next)
        atomic_store_explicit(&q->hold, 1, memory_order_relaxed);
    /* Registered at setup, so it cannot fail for lack of registration;
     * should it fail anyway, the spares stay where they are (the resource
     * then lives until those threads end or change resources). */
    if (membarrier_all()) {
        for (cuabi__park *q = parks; q; q = q->next)
            wait_quiet(q);
        for (cuabi__park *q = parks; q; q = q->next) {
            if (q->lease_res == r) {
                n += q->spares;
                q->lease_res = NULL;
                q->spares = 0;
            }
        }
    }
    for (cuabi__park *q = parks; q; q = q->next)
        atomic_store_explicit(&q->hold, 0, memory_order_release);
    pthread_mutex_unlock(&parks_lock);
    lease_drop(r, n); /* never the last: the caller still holds its own */
}

void cuabi__resource_before_release(const void *handle)
{
    void *obj;
    if (!leases_on ||
        cuabi__handle_get(handle, CUABI__T_MEMORY_RESOURCE, &obj,
                          "cuabi_memory_resource_release") != CUABI_SUCCESS)
        return; /* the release itself reports a bad handle */
    cuabi__memory_resource *r = obj;
    if (atomic_load_explicit(&r->leasable, memory_order_relaxed))
        lease_reclaim(r);
}
