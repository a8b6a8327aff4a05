/* A compile's result, shared: the code, its logs, name map and kernel
 * signatures in one immutable allocation with a reference count.
 *
 * The in-memory cache layer holds one reference, and every objcode and
 * program made from the result holds its own, so a memory hit hands out
 * the same bytes instead of copying them (issue 13 item 4: a copy per hit
 * was most of its ~20 allocations). Nothing in a blob changes after
 * cuabi__codeblob_make, so holders read it without a lock, and results
 * stay independent for the user: releasing one, or the cache dropping
 * the entry, leaves the others' bytes alone; the last release frees it. */
#ifndef CUABI_CODEBLOB_H
#define CUABI_CODEBLOB_H

#include "platform/loader.h"

/* A name expression and its lowered name (an objcode's name map). */
typedef struct cuabi__name_entry {
    char *expression;                /* "segred<float, 256>" */
    char *lowered;                   /* "_Z6segredIfLi256EEvPKT_PS0_" */
} cuabi__name_entry;

typedef struct cuabi__codeblob {
    _Atomic size_t refs;
    cuabi_code_type type;
    uint32_t flags;                  /* CUABI__ENTRY_* (cache.h) */
    const void *data;                /* a NUL past size: PTX goes to the driver as is */
    size_t size;
    const char *log;                 /* "" when none */
    const char *signatures;          /* the kernels' PTX signatures; NULL: unknown */
    const char *log2;                /* a link's error log; NULL: none */
    const cuabi__name_entry *names;
    size_t num_names;
    size_t bytes;                    /* the allocation's size */
} cuabi__codeblob;

struct cuabi__cache_entry;
/* A blob (refs = 1) holding a copy of everything in `e`; OUT_OF_MEMORY
 * recorded when it cannot be allocated. */
cuabi_status cuabi__codeblob_make(cuabi__codeblob **out, const struct cuabi__cache_entry *e);
cuabi__codeblob *cuabi__codeblob_retain(cuabi__codeblob *b);
/* Drop a reference (NULL: nothing); the last one frees the blob. */
void cuabi__codeblob_release(cuabi__codeblob *b);

#endif
