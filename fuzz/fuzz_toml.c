/* The precompile manifest reader (src/toml.c) on untrusted text: every
 * input must parse to a tree or a list of errors with lines — no crash,
 * leak, read past the end or unbounded recursion — and the tree must hold
 * its invariants (strings NUL-terminated at their length, tables with a key
 * per value, lines within the document). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int lines_in(const uint8_t *data, size_t size)
{
    int n = 1;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

static void walk(const cuabi__toml_value *v, int max_line, int depth)
{
    if (!v || depth > 64 || v->line < 1 || v->line > max_line)
        __builtin_trap();
    switch (v->kind) {
    case CUABI__TOML_STRING:
        if (!v->str || strlen(v->str) != v->len)
            __builtin_trap();
        break;
    case CUABI__TOML_ARRAY:
    case CUABI__TOML_TABLE:
        for (size_t i = 0; i < v->count; i++) {
            if (v->kind == CUABI__TOML_TABLE &&
                (!v->keys[i] || cuabi__toml_get(v, v->keys[i]) == NULL))
                __builtin_trap();
            walk(v->items[i], max_line, depth + 1);
        }
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cuabi__toml_doc doc;
    if (cuabi__toml_parse(&doc, (const char *)data, size) != 0)
        return 0; /* out of memory: nothing to free */
    int max_line = lines_in(data, size);
    walk(doc.root, max_line, 0);
    for (size_t i = 0; i < doc.num_errors; i++)
        if (doc.errors[i].line < 1 || doc.errors[i].line > max_line ||
            !memchr(doc.errors[i].message, '\0', sizeof doc.errors[i].message))
            __builtin_trap();
    cuabi__toml_free(&doc);
    return 0;
}
