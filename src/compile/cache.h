/* The compile cache, seen from inside the library (src/compile/program.c uses it).
 *
 * A key is an XXH3-128 hash over length-prefixed fields that the caller
 * lists; an entry is the compiled code plus its name-expression map and
 * compile log, built as a cuabi__cache_entry and kept as a shared
 * cuabi__codeblob. Lookups try the in-memory layer, then the directory;
 * stores go to both. Problems with the directory never fail a compile: they are
 * described in `notes` (which ends up in the program's log). */
#ifndef CUABI_CACHE_INTERNAL_H
#define CUABI_CACHE_INTERNAL_H

#include "compile/codeblob.h"
#include "platform/loader.h"

/* Format of the key and of entry files; part of every key, so bumping it
 * makes old entries unreachable (they age out by LRU). 2: entries end with
 * the kernels' PTX signatures. 3: then a second log (a link's error log),
 * and header flags (CUABI__ENTRY_LINKED). */
#define CUABI__CACHE_FORMAT 3
#define CUABI__CACHE_FORMAT_STR "3"
/* The most payload an entry file may hold (its header says how much it holds,
 * and it is checked against this before anything is read): larger results
 * are not stored, larger files are bad entries. */
#define CUABI__CACHE_MAX_ENTRY ((uint64_t)1 << 30)
/* Header flag: the entry is a linker's output (src/compile/linker.c). */
#define CUABI__ENTRY_LINKED 1u

typedef struct cuabi__cache_key {
    uint8_t b[16];
} cuabi__cache_key;

/* One input of a key. */
typedef struct cuabi__bytes {
    const void *data;
    size_t size;
} cuabi__bytes;

/* A growable NUL-terminated string (for logs and notes). */
typedef struct cuabi__str {
    char *s;
    size_t len, cap;
} cuabi__str;
/* Append; on allocation failure the text is dropped (notes are best effort). */
void cuabi__str_add(cuabi__str *b, const char *fmt, ...) CUABI__PRINTF(2, 3);
void cuabi__str_addn(cuabi__str *b, const char *text, size_t n);
void cuabi__str_free(cuabi__str *b);

typedef struct cuabi__cache_entry {
    cuabi_code_type type;
    void *data;            /* cuabi__malloc'ed */
    size_t size;
    size_t num_names;
    char **exprs;          /* name expressions ... */
    char **lowered;        /* ... and their lowered names */
    char *log;             /* compile log ("" when none) */
    char *signatures;      /* the kernels' PTX signatures (param_types.h); NULL: unknown */
    char *log2;            /* a second log: a link's error log; NULL: none */
    uint32_t flags;        /* CUABI__ENTRY_* */
} cuabi__cache_entry;
void cuabi__cache_entry_clear(cuabi__cache_entry *e);

/* A key hashed field by field, straight from the caller's data (no list
 * of fields or joined strings to build): XXH3-128's streaming state, kept
 * opaque so xxhash.h stays inside cache.c, which checks its size. */
typedef struct cuabi__key_state {
    _Alignas(64) unsigned char opaque[640];
} cuabi__key_state;
void cuabi__key_begin(cuabi__key_state *s);
/* One field, length-prefixed, so boundaries count. */
void cuabi__key_add(cuabi__key_state *s, const void *data, size_t size);
/* One field that is `head` and `tail` joined (hashes as that string). */
void cuabi__key_add_joined(cuabi__key_state *s, const char *head, const char *tail);
void cuabi__key_end(cuabi__key_state *s, cuabi__cache_key *out);
/* All of it for a list of fields. */
void cuabi__cache_key_compute(cuabi__cache_key *out, const cuabi__bytes *fields, size_t n);
void cuabi__cache_key_hex(char out[33], const cuabi__cache_key *key);

/* How notes in a program's log begin when the cache could not keep a
 * compile (src/compile/precompile.c reports these as failures). */
#define CUABI__NOTE_NOT_STORED "cuabi cache: not stored: "
#define CUABI__NOTE_NOT_USED "cuabi cache: not used: "

/* Whether compiles should use the cache at all (cuabi_cache_set_enabled, CUABI_CACHE). */
bool cuabi__cache_enabled(void);

/* Look `key` up. On a hit *out is a reference to the shared result (the
 * caller releases it; a memory hit copies nothing) and *where is 1
 * (memory) or 2 (disk); on a miss *out = NULL and *where = 0. Fails only
 * on OUT_OF_MEMORY; directory trouble is described in `notes`. */
cuabi_status cuabi__cache_lookup(const cuabi__cache_key *key, cuabi__codeblob **out,
                                 int *where, cuabi__str *notes);
/* Keep `b` in memory (a reference of its own) and write it to disk (best
 * effort; reasons for not storing go to `notes`). */
void cuabi__cache_store(const cuabi__cache_key *key, cuabi__codeblob *b, cuabi__str *notes);

/* CUABI_ERROR_CACHE (naming `caller`, saying why) unless the cache
 * directory can be named and used by this user; creates it if missing. */
cuabi_status cuabi__cache_dir_check(const char *caller);
/* The cache directory (created 0700 if missing) for small records of our
 * own (src/platform/libident.c); NULL when the cache is off or the directory cannot
 * be used. Caller frees with free(). */
char *cuabi__cache_record_dir(void);

/* Testing: forget all state and re-read the environment. */
void cuabi__cache_reset_for_test(void);
/* Testing: the entry file of a key (caller frees), or NULL. */
char *cuabi__cache_entry_path(const cuabi__cache_key *key);

#endif
