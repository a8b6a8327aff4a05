/* Precompile manifests: a TOML file listing the sources of a project, their
 * name expressions, options, headers and target architectures, read into
 * compiles for src/compile/precompile.c (format: docs/compile-cache.md, example:
 * examples/precompile.toml).
 *
 * Every problem — a TOML syntax error, an unknown key, a value of the wrong
 * kind, a file that cannot be read or lies outside the manifest's tree, a
 * malformed architecture — is kept with its line, and the sources without
 * problems are still listed: the caller compiles those and reports the
 * rest. */
#ifndef CUABI_MANIFEST_H
#define CUABI_MANIFEST_H

#include "platform/loader.h"
#include "util/toml.h"

typedef struct cuabi__manifest_problem {
    int line;                     /* 0: the manifest as a whole */
    cuabi_status status;          /* INVALID_ARGUMENT, IO, ... */
    char message[512];
} cuabi__manifest_problem;

typedef struct cuabi__manifest_source {
    int line;                     /* its [[source]] header */
    int archs_line;               /* where its architectures were given */
    const char *name;             /* the program's name */
    const char *text;             /* the source, NUL-terminated */
    size_t size;
    cuabi_code_type type;         /* CUDA C++, PTX or NVVM IR */
    cuabi_program_options options;
    const char **archs;           /* NULL/0: the compile's default */
    size_t num_archs;
} cuabi__manifest_source;

typedef struct cuabi__manifest {
    cuabi__manifest_source *sources;
    size_t num_sources;
    cuabi__manifest_problem *problems;
    size_t num_problems;
    /* owned: the parsed document (strings are borrowed from it) and every
     * block allocated while reading */
    cuabi__toml_doc doc;
    void **blocks;
    size_t num_blocks, cap_blocks;
} cuabi__manifest;

/* cuabi__manifest_load / _read flags. By default a manifest is confined to
 * its own directory tree (issue 29 item 8: a manifest from an untrusted
 * repository must not copy readable files into a compile error): every
 * `file` (symbolic links resolved), include path, path-taking option and
 * file its CUDA C++ sources can #include lies in it, or is a problem; and a
 * file read as a source or header is UTF-8 text without NUL bytes (NVVM
 * bitcode aside). Only the caller can lift the confinement, never the
 * manifest. */
#define CUABI__MANIFEST_ALLOW_OUTSIDE 1u

/* Read the manifest at `path`; relative file names in it are relative to
 * its directory. CUABI_ERROR_IO when it cannot be read at all,
 * OUT_OF_MEMORY; otherwise CUABI_SUCCESS with its sources and problems. */
cuabi_status cuabi__manifest_load(cuabi__manifest *m, const char *path, unsigned flags,
                                  const char *caller);
/* The same from text (`path` names it in messages; `dir` for relative
 * file names, and the tree it is confined to). */
cuabi_status cuabi__manifest_read(cuabi__manifest *m, const char *text, size_t size,
                                  const char *path, const char *dir, unsigned flags,
                                  const char *caller);
void cuabi__manifest_free(cuabi__manifest *m);

#endif
