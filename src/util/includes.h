/* What a CUDA C++ compile can read through #include, for the cache key
 * (issue 17 item 5: a header edited under an include path must not bring
 * back the old binary), and for precompile manifests, whose sources may
 * include only files of their own tree (issue 29, cuabi__includes_visit).
 *
 * NVRTC cannot say which files it opened (it has no -MD), so the key hashes
 * what the source can reach: every #include, #include_next and
 * __has_include of the source, of the in-memory headers and of every file
 * found, resolved as NVRTC resolves them — an in-memory header of that exact
 * name first, then for "quoted" names the including file's directory (the
 * main source's is the directory of the program's name), then each include
 * path in order (options.include_paths, then -I / --include-path= in
 * extra_options) — hashing each file found (path and contents) and the
 * absence of each name not found. Conditional compilation is not evaluated:
 * both branches count, which can only cost a miss. An #include of a macro
 * is followed when the macro is defined as "file" or <file> (by -D or a
 * #define in a file scanned); any other include cannot be resolved without
 * compiling, and the compile then does not use the cache (the reason goes
 * to the program's log).
 *
 * Files are read once and remembered by their stat identity (device, inode,
 * size, modification and change times); a file modified within the last two
 * seconds before it was read is read again on every use, as a same-size
 * edit within a coarse timestamp's tick would otherwise go unnoticed. */
#ifndef CUABI_INCLUDES_H
#define CUABI_INCLUDES_H

#include "util/common.h"

enum {
    CUABI__INCLUDES_NONE = 0,        /* nothing reachable: no directive anywhere */
    CUABI__INCLUDES_HASHED = 1,      /* `digest` covers every file reachable */
    CUABI__INCLUDES_UNRESOLVED = -1, /* an include the scan cannot follow; see `why` */
    CUABI__INCLUDES_STOPPED = -2,    /* cuabi__includes_visit: the visitor stopped it */
};

/* Scan the compile of `source` (named `name`, for the directory of its
 * quoted includes) with options `o` (NULL: defaults). *result is one of the
 * values above; `digest` is written when HASHED. Fails only when out of
 * memory. Thread-safe. */
cuabi_status cuabi__includes_digest(int *result, uint8_t digest[16], const char *name,
                                    const char *source, size_t size,
                                    const cuabi_program_options *o, char *why, size_t why_cap);

/* The same scan, telling `visit` each file an #include (or a pre-include,
 * or --use-pch) of the compile would read — the path as found, as NVRTC
 * would open it — once, in the order found (__has_include only asks
 * whether a file exists: not told). `visit` returning non-zero stops the
 * scan: *result is then CUABI__INCLUDES_STOPPED; else as above (UNRESOLVED:
 * an include the scan cannot follow, so what the compile reads is not
 * known). Precompile manifests use it to keep a compile inside the
 * manifest's tree (src/compile/manifest.c). Fails only when out of memory. */
cuabi_status cuabi__includes_visit(int *result, const char *name, const char *source,
                                   size_t size, const cuabi_program_options *o,
                                   int (*visit)(const char *path, void *ctx), void *ctx,
                                   char *why, size_t why_cap);

/* Testing: forget every remembered file and scan. */
void cuabi__includes_reset_for_test(void);

#endif
