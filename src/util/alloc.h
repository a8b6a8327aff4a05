/* Host allocation wrappers (alloc.c): failures are recorded as
 * CUABI_ERROR_OUT_OF_MEMORY naming the caller, and tests can make the Nth
 * allocation fail. */
#ifndef CUABI_UTIL_ALLOC_H
#define CUABI_UTIL_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

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
 * (tests/compile/test_cache.c checks that a memory cache hit copies nothing). */
void cuabi__alloc_count(bool on);
long cuabi__alloc_counted(void);

#endif
