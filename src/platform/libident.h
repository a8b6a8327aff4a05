/* Who a compiler library is, without loading it (issue 13).
 *
 * The compile cache's key must name the compiler, but asking NVRTC for its
 * version means dlopen()ing ~100 MB (~100 ms) even when the answer is a cache
 * hit. The key therefore names the file the loader *would* open — found by
 * the loader's own search order without opening it — by its canonical path,
 * size, modification time and ELF build-id, plus the version that loading
 * that very file reported the last time, kept in an identity record in the
 * cache directory. A replaced file or another resolution changes the key; a
 * record that does not match the file exactly, or is damaged, is ignored:
 * the library is loaded to learn the version and the record rewritten.
 *
 * Reusable for any dlopen()ed compiler: describe it with a cuabi__compiler
 * (CUABI__COMPILER_INIT) and ask cuabi__compiler_ident() for its key text.
 */
#ifndef CUABI_LIBIDENT_H
#define CUABI_LIBIDENT_H

#include <pthread.h>

#include "platform/loader.h"

/* What identifies one library file. */
typedef struct cuabi__file_id {
    char path[4096];          /* canonical (realpath) */
    uint64_t size;
    int64_t mtime_ns;         /* modification time, ns since the epoch */
    uint8_t build_id[64];     /* the ELF NT_GNU_BUILD_ID note, if any */
    size_t build_id_len;
} cuabi__file_id;

/* The file dlopen(name) would open, without opening it: a name with a '/'
 * as is; else an object already loaded under that soname, else the
 * dynamic loader's search order for the object holding this code (its and
 * the executable's DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache,
 * the system directories), skipping files of another ELF class or machine.
 * Writes the canonical path; returns 0, or -1 when nothing is found. */
int cuabi__lib_locate(char *out, size_t cap, const char *name);

/* Read the identity of the file at `path`; 0, or -1 with errno set. */
int cuabi__file_id_read(cuabi__file_id *out, const char *path);
bool cuabi__file_id_equal(const cuabi__file_id *a, const cuabi__file_id *b);

/* Identity records: "<dir>/id-<lib>-<16 hex>" holds the file's identity and
 * the version loading it reported, with a checksum. Read returns 0 and the
 * version only when the record is whole and names exactly `id`; write is
 * atomic (temp file + rename) and best effort (0 or -1). */
int cuabi__ident_record_read(const char *dir, const char *lib, const cuabi__file_id *id,
                             int *version);
int cuabi__ident_record_write(const char *dir, const char *lib, const cuabi__file_id *id,
                              int version);
/* The record's file name for `id` (caller frees), or NULL. */
char *cuabi__ident_record_path(const char *dir, const char *lib, const cuabi__file_id *id);
/* Whether the file at `path` is a whole identity record (format and
 * checksum; cuabi_cache_verify): 1 whole; 0 damaged or not a record (not a
 * regular file, a symbolic link, too large); -1 left alone: unreadable, or
 * not this user's own (owner or mode, util/file.h). `why` says for 0 and -1.
 * Records are read this way everywhere: another user's is never trusted. */
int cuabi__ident_record_intact(const char *path, char *why, size_t why_cap);
/* Whether a directory entry's name is an identity record's. */
bool cuabi__ident_record_name(const char *name);

/* Key text of one identity: "<lib> <path> <size> <mtime> <build-id> <version>". */
typedef struct cuabi__ident_text {
    size_t len;
    char s[4096 + 256];
} cuabi__ident_text;

/* A dlopen()ed compiler: how the loader finds it, and its identity once
 * known. Define one per library with CUABI__COMPILER_INIT. */
typedef struct cuabi__compiler {
    const char *name;                          /* "nvrtc": in keys and record names */
    const char *env;                           /* the loader's override, "CUABI_NVRTC_PATH" */
    const char *const *candidates;             /* the loader's list, in order */
    bool (*loaded)(void);                      /* loaded successfully (never loads) */
    cuabi_status (*load)(const char *caller);  /* load now; sets the last error */
    const cuabi__lib_info *(*info)(void);      /* path and version once loaded */
    /* state */
    pthread_mutex_t lock;
    _Atomic int state;                         /* 0 unknown, 1 predicted, 2 of the loaded file */
    _Atomic(const cuabi__ident_text *) text;   /* the current identity */
    cuabi__ident_text predicted, verified;     /* each written once, then only read */
} cuabi__compiler;
#define CUABI__COMPILER_INIT(name, env, candidates, loaded, load, info)       \
    { name, env, candidates, loaded, load, info, PTHREAD_MUTEX_INITIALIZER,    \
      0, NULL, { 0, "" }, { 0, "" } }

extern cuabi__compiler cuabi__compiler_nvrtc, cuabi__compiler_nvjitlink;

/* The identity of compiler `c` for a cache key, without loading it when the
 * directory `record_dir()` names (malloc'ed, or NULL: none) holds a record
 * for the file the loader would open (else it is loaded, and the record
 * written). Once the library is loaded in this
 * process (a miss compiled), the identity is that of the loaded file, so a
 * wrong prediction never stores an entry under the wrong compiler. The fast
 * path is two atomic loads. Fails only when the compiler cannot be found
 * or loaded (its loader's error). */
cuabi_status cuabi__compiler_ident(cuabi__compiler *c, char *(*record_dir)(void),
                                   const char **text, size_t *len, const char *caller);

/* Testing: forget what is known (the next call resolves again). */
void cuabi__compiler_reset_for_test(cuabi__compiler *c);

#endif
