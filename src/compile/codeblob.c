/* Shared compile results (codeblob.h). One allocation:
 *   the header | the name map | data + NUL | log, signatures, log2 and the
 *   name strings, each NUL-terminated
 * so a result costs one malloc to make and one free to drop, and the data
 * starts at malloc's alignment (CUBIN and fatbin headers are read in place). */
#include "compile/codeblob.h"

#include <stddef.h>
#include <string.h>

#include "compile/cache.h"

#define ALIGN _Alignof(max_align_t)

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t text_size(const char *s) { return s ? strlen(s) + 1 : 0; }

/* Copy `s` (NULL stays NULL) to *at and move past it. */
static const char *put(char **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *copy = memcpy(*at, s, n);
    *at += n;
    return copy;
}

static size_t strings_size(const cuabi__cache_entry *e)
{
    size_t n = text_size(e->log ? e->log : "") + text_size(e->signatures) + text_size(e->log2);
    for (size_t i = 0; i < e->num_names; i++)
        n += text_size(e->exprs[i]) + text_size(e->lowered[i]);
    return n;
}

static void put_names(cuabi__name_entry *names, char **at, const cuabi__cache_entry *e)
{
    for (size_t i = 0; i < e->num_names; i++) {
        names[i].expression = (char *)put(at, e->exprs[i]);
        names[i].lowered = (char *)put(at, e->lowered[i]);
    }
}

cuabi_status cuabi__codeblob_make(cuabi__codeblob **out, const cuabi__cache_entry *e)
{
    size_t head = round_up(sizeof(cuabi__codeblob));
    size_t map = round_up(e->num_names * sizeof(cuabi__name_entry));
    size_t total = head + map + e->size + 1 + strings_size(e);
    char *block = cuabi__malloc(total);
    *out = NULL;
    if (!block)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi__codeblob *b = (cuabi__codeblob *)(void *)block;
    cuabi__name_entry *names = (cuabi__name_entry *)(void *)(block + head);
    char *data = block + head + map, *at = data + e->size + 1;
    if (e->size)
        memcpy(data, e->data, e->size);
    data[e->size] = '\0';
    atomic_init(&b->refs, 1);
    b->type = e->type;
    b->flags = e->flags;
    b->data = data;
    b->size = e->size;
    b->log = put(&at, e->log ? e->log : "");
    b->signatures = put(&at, e->signatures);
    b->log2 = put(&at, e->log2);
    put_names(names, &at, e);
    b->names = names;
    b->num_names = e->num_names;
    b->bytes = total;
    *out = b;
    return CUABI_SUCCESS;
}

cuabi__codeblob *cuabi__codeblob_retain(cuabi__codeblob *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void cuabi__codeblob_release(cuabi__codeblob *b)
{
    /* acq_rel: every holder's reads happen before the free */
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        cuabi__free(b);
}
