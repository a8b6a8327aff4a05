/* Kernel parameter types, internal view: what the kernel, objcode and
 * program modules use to learn and keep them. */
#ifndef CUABI_PARAM_TYPES_INTERNAL_H
#define CUABI_PARAM_TYPES_INTERNAL_H

#include "platform/loader.h"

/* One parameter's type as far as it is known. */
typedef struct cuabi__param {
    cuabi_arg_kind kind;        /* CUABI_ARG_RAW when unknown */
    size_t size;                /* the kind's size; 0 for RAW (the layout's) */
    size_t align;               /* STRUCT (vector types): alignment */
    cuabi_arg_kind elem;        /* STRUCT (vector types): element kind ... */
    int count;                  /* ... and how many */
    cuabi_param_source source;
    const char *type_name;      /* into the owning cuabi__param_types' text */
} cuabi__param;

/* All parameters of one kernel, built once from its name, the PTX
 * signature kept with its code, and its parameter layout. */
typedef struct cuabi__param_types {
    size_t count;
    cuabi__param *params;
    char *text;                 /* the type names, NUL-separated */
    char *signature;            /* the type names joined with ", " */
} cuabi__param_types;

/* Build the types of a kernel named `name` (lowered: a mangled C++ name or
 * an extern "C" one) with `count` parameters of the given offsets and sizes;
 * `ptx_signatures` is the objcode's signature text (NULL when unknown).
 * Anything that does not agree with the layout is left unknown (raw). */
cuabi_status cuabi__param_types_build(cuabi__param_types *out, const char *name,
                                      const char *ptx_signatures, size_t count,
                                      const size_t *offsets, const size_t *sizes);
void cuabi__param_types_free(cuabi__param_types *t);

/* The .entry declarations of a PTX text as compact signature text, one line
 * per kernel: "name(.u64,.u32,.f32,.b8[16]@4)". *out is NULL when the text has
 * no entry (cuabi__malloc'ed otherwise). Fails only when out of memory. */
cuabi_status cuabi__ptx_signatures(char **out, const char *ptx, size_t size);

/* A CUDA vector type by name ("float4", "int2", "double4_32a", ...): its
 * element kind, element count and alignment; false when `name` is none. */
bool cuabi__vector_type(const char *name, size_t len, cuabi_arg_kind *elem, int *count,
                        size_t *align);

#endif
