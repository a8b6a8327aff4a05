/* Object code internals, shared with the program (NVRTC) and linker modules. */
#ifndef CUABI_OBJCODE_INTERNAL_H
#define CUABI_OBJCODE_INTERNAL_H

#include <pthread.h>

#include "compile/codeblob.h"
#include "util/cubin_elf.h"
#include "platform/loader.h"

typedef struct cuabi__objcode {
    cuabi__object base;
    cuabi_code_type type;
    const void *data;                /* never written; PTX is NUL-terminated past size */
    size_t size;
    /* A compile's result, shared with the compile cache and other objcodes
     * (codeblob.h): it holds data, the name map and, when known, the
     * signatures. NULL: the objcode owns data and names itself. */
    cuabi__codeblob *shared;

    pthread_mutex_t lock;            /* guards everything below */
    CUlibrary library;               /* loaded lazily (cuLibraryLoadData) */
    bool loaded;
    /* The JIT error log given to cuLibraryLoadData. Kept while the library
     * is loaded: with lazy module loading the driver JIT-compiles at the
     * first lookup (cuLibraryGetKernel) and writes its log here then. */
    char *jit_log;
    const cuabi__name_entry *names;  /* name expression -> lowered name */
    size_t name_count;
    /* Offline view: the image's CUBIN, or one compiled from PTX/LTO-IR for
     * offline queries, parsed. Built lazily, kept for the objcode's life. */
    cuabi__elf_info *elf;
    void *offline_cubin;             /* owned when compiled here */
    char offline_arch[16];           /* what it was compiled for */
    /* Kernel names from the driver, for images with no offline view. */
    char **driver_kernels;
    size_t driver_kernel_count;
    /* PTX signatures of the kernels (param_types.h): handed over by the
     * compiler for its output (then they are the shared result's), read
     * from the image for PTX; NULL when unknown. Read once, kept for the
     * objcode's life. */
    char *signatures;                /* owned: read or handed over here */
    bool signatures_ready;
    char name[];                     /* for messages; allocated with the objcode */
} cuabi__objcode;

/* Wrap `data` (allocated with cuabi__malloc; ownership passes, also on
 * failure) of `size` bytes in a new objcode handle (refs = 1). The type is
 * checked against the bytes (CUABI_CODE_NONE detects it); a CUBIN is parsed
 * now so a malformed one fails here with CUABI_ERROR_INVALID_IMAGE. */
cuabi_status cuabi__objcode_new(cuabi__objcode **out, cuabi_code_type type, void *data,
                                size_t size, const char *name);
/* The same for bytes known good (compiler output, checksummed cache
 * entries): a CUBIN is parsed at its first offline query, not now, which
 * keeps an in-memory cache hit cheap. */
cuabi_status cuabi__objcode_new_trusted(cuabi__objcode **out, cuabi_code_type type, void *data,
                                        size_t size, const char *name);
/* An objcode (refs = 1) over a compile's result: it shares the blob's
 * bytes, name map and signatures (no copy) and holds a reference to it.
 * Trusted like cuabi__objcode_new_trusted. */
cuabi_status cuabi__objcode_new_shared(cuabi__objcode **out, cuabi__codeblob *b,
                                       const char *name);
/* Register a name expression and its lowered name (copies both); not for
 * an objcode over a shared result. */
cuabi_status cuabi__objcode_add_name(cuabi__objcode *o, const char *name_expression,
                                     const char *lowered_name);
/* Whether two name expressions are the same but for white space that does
 * not separate two words ("t<float,4>" and "t<float, 4>"). */
bool cuabi__same_expression(const char *a, const char *b);
/* The lowered name of `expr` in a name map: the entry written the same,
 * else one that is the same expression; NULL when none. */
const char *cuabi__name_lookup(const cuabi__name_entry *names, size_t n, const char *expr);
/* The lowered name for `name` when it is a registered expression, else
 * `name` itself. Borrowed from the objcode. */
const char *cuabi__objcode_resolve_name(cuabi__objcode *o, const char *name);
/* Keep `sigs` (cuabi__malloc'ed, may be NULL; ownership passes) as the
 * objcode's PTX signature text. Only while the creator holds the only
 * reference, before handing the objcode out. */
void cuabi__objcode_set_signatures(cuabi__objcode *o, char *sigs);
/* The PTX signature text of the objcode's kernels, NULL when unknown
 * (borrowed). Fails only when out of memory. */
cuabi_status cuabi__objcode_signatures(cuabi__objcode *o, const char **out);
/* The loaded CUlibrary, loading it on first use. */
/* A driver result `r` of `api` on this objcode's library as a status:
 * image errors (invalid PTX, no code for this GPU, PTX too new, ...) become
 * CUABI_ERROR_INVALID_IMAGE with the driver's message and JIT log, the CUDA
 * result kept in the error; others as cuabi__cu_check. */
cuabi_status cuabi__objcode_cu_check(cuabi__objcode *o, const cuabi__driver *drv, CUresult r,
                                     const char *api, const char *caller);
/* CUABI_ERROR_NOT_SUPPORTED for an object or a library (linked, never
 * loaded), before the driver is asked; success for every other type. */
cuabi_status cuabi__objcode_loadable(const cuabi__objcode *o, const char *caller);
cuabi_status cuabi__objcode_library(cuabi__objcode *o, const cuabi__driver *drv,
                                    CUlibrary *out, const char *caller);
/* The offline (ELF) view; PTX/LTO-IR is compiled with nvJitLink for `arch`
 * (NULL: sm_90). Borrowed from the objcode. */
cuabi_status cuabi__objcode_elf(cuabi__objcode *o, const char *arch,
                                const cuabi__elf_info **out, const char *caller);

/* CUABI_ERROR_NOT_FOUND for kernel `name`, listing the image's kernels
 * (from `elf` when known) and its registered name expressions. */
cuabi_status cuabi__objcode_not_found(const cuabi__objcode *o, const cuabi__elf_info *elf,
                                     const char *name, const char *caller);
/* The offline kernel `name` (kernel name or registered expression); NOT_FOUND
 * lists the image's kernels. */
cuabi_status cuabi__objcode_find_offline(cuabi__objcode *o, const char *name, const char *arch,
                                         const cuabi__elf_kernel **out, const char *caller);


/* "sm_XY" of device 0 when a GPU is there, else "sm_90". Never fails. */
void cuabi__default_arch(char *buf, size_t len);


#endif
