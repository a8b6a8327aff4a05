/* Host allocation wrappers with failure injection for tests (SQLite's
 * method: fail the Nth allocation, once or for ever, and loop N until the
 * operation succeeds), and a count tests can read. Failures are reported
 * as CUABI_ERROR_OUT_OF_MEMORY by the callers' error paths, never by
 * abort(). */
#include "util/alloc.h"
#include "util/error.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic long fail_countdown; /* 0: off; n: the nth call fails */
static _Atomic bool fail_sticky;
static _Atomic long fail_fired;     /* failures injected since arming */
static _Atomic bool counting;
static _Atomic long counted;        /* allocations since counting began */

void cuabi__alloc_fail_at(long n, bool sticky)
{
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_fired, 0);
    atomic_store(&fail_countdown, n);
}

long cuabi__alloc_fail_count(void) { return atomic_load(&fail_fired); }

void cuabi__alloc_count(bool on)
{
    if (on)
        atomic_store(&counted, 0);
    atomic_store(&counting, on);
}

long cuabi__alloc_counted(void) { return atomic_load(&counted); }

/* Every wrapped allocation passes here: counted when asked, and failed
 * when a test armed the injection. */
CUABI__HOT static bool should_fail(void)
{
    if (CUABI__UNLIKELY(atomic_load_explicit(&counting, memory_order_relaxed)))
        atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
    long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (CUABI__UNLIKELY(n > 0)) {
        if (n == 1) {
            if (!atomic_load(&fail_sticky))
                atomic_store(&fail_countdown, 0);
            atomic_fetch_add(&fail_fired, 1);
            return true;
        }
        atomic_fetch_sub(&fail_countdown, 1);
    }
    return false;
}

static void *oom(size_t size, const char *caller)
{
    cuabi__error(CUABI_ERROR_OUT_OF_MEMORY,
                 "%s: out of host memory allocating %zu bytes", caller, size);
    return NULL;
}

void *cuabi__malloc_in(size_t size, const char *caller)
{
    void *p = should_fail() ? NULL : malloc(size ? size : 1);
    return p ? p : oom(size, caller);
}

CUABI__HOT void *cuabi__calloc_in(size_t n, size_t size, const char *caller)
{
    void *p = should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
    return p ? p : oom(n * size, caller);
}

CUABI__HOT void *cuabi__realloc_in(void *old, size_t size, const char *caller)
{
    void *p = should_fail() ? NULL : realloc(old, size ? size : 1);
    return p ? p : oom(size, caller);
}

char *cuabi__strdup_in(const char *s, const char *caller)
{
    size_t n = strlen(s) + 1;
    char *p = cuabi__malloc_in(n, caller);
    if (p)
        memcpy(p, s, n);
    return p;
}

void cuabi__free(void *p) { free(p); }
