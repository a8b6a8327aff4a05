/* A reader for the subset of TOML 1.0 that precompile manifests use
 * (docs/compile-cache.md): tables ([a], [a.b]), arrays of tables ([[a]],
 * [[a.b]]), keys (bare, quoted, dotted), strings (basic, literal, and both
 * multi-line forms, with every escape), integers (decimal, 0x, 0o, 0b,
 * underscores), booleans, arrays (nested, across lines, trailing comma) and
 * comments. Floats, dates and inline tables are refused by name.
 *
 * No C TOML library is packaged for Debian (only C++ ones), hence this one.
 * It reports every problem with its line and goes on: a bad line is
 * skipped (and the table it belongs to marked `damaged`), the keys under a
 * bad table header are dropped, the rest is read. A UTF-8 byte order mark
 * at the start is skipped.
 * Nothing here allocates through cuabi__malloc: out of memory is a return
 * value, the caller records it. */
#ifndef CUABI_TOML_H
#define CUABI_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cuabi__toml_kind {
    CUABI__TOML_STRING,
    CUABI__TOML_INTEGER,
    CUABI__TOML_BOOLEAN,
    CUABI__TOML_ARRAY,
    CUABI__TOML_TABLE,
} cuabi__toml_kind;

typedef struct cuabi__toml_value cuabi__toml_value;
struct cuabi__toml_value {
    cuabi__toml_kind kind;
    int line;                     /* where it was written (a table: its header) */
    char *str;                    /* STRING: NUL-terminated (may hold no NUL: refused) */
    size_t len;                   /* STRING: bytes */
    int64_t integer;              /* INTEGER */
    bool boolean;                 /* BOOLEAN */
    cuabi__toml_value **items;    /* ARRAY: elements; TABLE: values */
    char **keys;                  /* TABLE: keys, same order as items */
    size_t count, cap;
    bool of_tables;               /* ARRAY made by [[...]] */
    bool defined;                 /* TABLE: has its own [header] or was written as a value */
    bool dotted;                  /* TABLE: made by a dotted key (a.b = 1) */
    bool damaged;                 /* TABLE: a line of it had an error (a syntax error, invalid
                                     UTF-8): a value may be missing or not what was meant */
};

typedef struct cuabi__toml_error {
    int line;
    char message[256];
} cuabi__toml_error;

typedef struct cuabi__toml_doc {
    cuabi__toml_value *root;      /* the top-level table */
    cuabi__toml_error *errors;    /* every problem found, in line order */
    size_t num_errors;
} cuabi__toml_doc;

/* Parse `size` bytes. 0: parsed (look at num_errors); -1: out of memory
 * (nothing to free). */
int cuabi__toml_parse(cuabi__toml_doc *out, const char *text, size_t size);
void cuabi__toml_free(cuabi__toml_doc *doc);

/* The value of `key` in a table, or NULL. */
const cuabi__toml_value *cuabi__toml_get(const cuabi__toml_value *table, const char *key);
/* A kind's name for messages ("string", "array", ...). */
const char *cuabi__toml_kind_name(cuabi__toml_kind kind);
/* Whether `n` bytes are valid UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF; a NUL byte is valid UTF-8: callers check for it). */
bool cuabi__utf8_valid(const char *s, size_t n);
/* How many of the `n` bytes are valid UTF-8 before the first that is not
 * (n when all are). */
size_t cuabi__utf8_prefix(const char *s, size_t n);

#endif
