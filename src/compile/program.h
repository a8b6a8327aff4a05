/* Programs, seen from inside the library (tests and the cache use these). */
#ifndef CUABI_PROGRAM_INTERNAL_H
#define CUABI_PROGRAM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "compile/cache.h"

typedef struct cuabi__program {
    cuabi__object base;
    cuabi_code_type type;
    char *source;              /* NUL-terminated copy */
    size_t size;
    char *name;
    pthread_mutex_t lock;      /* serialises compiles; guards what follows */
    /* The last successful compile's result, shared with the cache and the
     * objcodes made from it: its name map, and its log unless `log`. */
    cuabi__codeblob *result;
    /* The last compile's log when it is not result's own (a failed
     * compile's, or one with the cache's notes); NULL otherwise. */
    char *log;
    int hit;                   /* 0 compiled, 1 memory, 2 disk */
    int pch_status;            /* cuabi_pch_status of the last compile */
    /* The compiler's program (nvrtcProgram / nvvmProgram) handed out by
     * cuabi_program_backend_handle; once asked (keep_backend), each compile
     * that runs the compiler keeps its own here, freeing the previous. */
    void *backend;
    bool keep_backend;
} cuabi__program;

/* The options of one compile, checked, and the argument list the
 * compiler gets (which is also what the cache key hashes). The list is
 * built only to compile: a cache hit hashes it as cuabi__compile_args_each
 * hands it out, with no strings made. */
typedef struct cuabi__compile_args {
    char arch[128];            /* a fatbin's: "sm_80,sm_90,compute_90" */
    cuabi_code_type type;      /* the program's */
    cuabi_code_type output;
    size_t argc;               /* known from the start */
    size_t argv_bytes;         /* what the strings take, NULs included */
    char **argv;               /* NULL until cuabi__compile_args_argv; one block */
    int use_cache;
    int libdevice;             /* options.libdevice (version 2), NVVM IR only */
    /* Version 3's fields, read only from a version-3 struct (defaults
     * otherwise): never read them through opts. */
    struct {
        int pch, pch_verbose, pch_messages, instantiate_templates_in_pch;
        int use_bundled_headers, numba_debug;
        const char *create_pch, *use_pch, *pch_dir;
        const char **extra_source_names, **extra_sources;
        const size_t *extra_source_sizes;
        size_t num_extra_sources;
    } v3;
    char *bundled_dir;         /* use_bundled_headers: the directory (owned) */
    void **keep;               /* non-NULL: the compile leaves its compiler program there */
    int *pch_status;           /* non-NULL: where a CUDA C++ compile says what became of its PCH */
    const cuabi_program_options *opts; /* borrowed: headers, name expressions */
} cuabi__compile_args;

/* Check `opts` (NULL: defaults) for a program of `type` and build the
 * argument list; `caller` names the public function in errors. */
cuabi_status cuabi__compile_args_build(cuabi__compile_args *out, cuabi_code_type type,
                                       const cuabi_program_options *opts, const char *caller);
void cuabi__compile_args_free(cuabi__compile_args *a);
/* One argument of the list as two pieces, `head` then `tail` ("-arch="
 * "sm_90"; tail "" for one given whole), so it can be hashed unjoined. */
typedef void (*cuabi__arg_fn)(const char *head, const char *tail, void *ctx);
/* Calls `fn` with each argument, in the compiler's order. */
void cuabi__compile_args_each(const cuabi__compile_args *a, cuabi__arg_fn fn, void *ctx);
/* Build a->argv (once); only a compile needs it. */
cuabi_status cuabi__compile_args_argv(cuabi__compile_args *a);
/* The cache key of compiling `p` with `a`. */
cuabi_status cuabi__program_key(cuabi__cache_key *out, const cuabi__program *p,
                                const cuabi__compile_args *a);
/* The size of extra source `i` (v3.extra_source_sizes, or its strlen). */
static inline size_t cuabi__extra_source_size(const cuabi__compile_args *a, size_t i)
{
    size_t n = a->v3.extra_source_sizes ? a->v3.extra_source_sizes[i] : 0;
    return n ? n : strlen(a->v3.extra_sources[i]);
}
/* Free a compiler program kept by a compile (nvrtcProgram or nvvmProgram). */
void cuabi__program_backend_free(cuabi_code_type type, void *backend);
/* Keep `prog` as p's backend program, freeing the previous one. */
void cuabi__program_keep_backend(cuabi__program *p, void *prog);

/* Check the form of an architecture ("sm_90", "sm_90a", "compute_100f";
 * *virt tells compute_), naming `caller` in the error. Whether the loaded
 * NVRTC supports it is checked only before compiling. */
cuabi_status cuabi__check_arch(const char *arch, bool *virt, const char *caller);
/* The default architecture: the current device's, else "sm_90". */
void cuabi__current_arch(char out[32]);

#endif
