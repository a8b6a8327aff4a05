/* CUDA arrays and mipmapped arrays, seen from inside the library: what
 * texture.c needs to make texture and surface objects of them, and the
 * formats views and arrays share. */
#ifndef CUABI_RUNTIME_ARRAY_H
#define CUABI_RUNTIME_ARRAY_H

#include "runtime/memory.h"

typedef struct cuabi__mipmapped_array {
    cuabi__object base;
    CUmipmappedArray cu;
    cuabi__device *device;          /* retained */
    cuabi_array_desc desc;          /* level 0, as made */
    unsigned num_levels;
} cuabi__mipmapped_array;

typedef struct cuabi__array {
    cuabi__object base;
    CUarray cu;
    cuabi__device *device;          /* retained */
    /* A level of a mipmapped array: retained, and the CUarray is its, not
     * destroyed with this object. NULL for a whole array. */
    cuabi__mipmapped_array *parent;
    int level;                      /* -1 for a whole array */
    cuabi_array_desc desc;          /* as made, or the level's extents */
    size_t elem;                    /* bytes per element (per block); 0: a video format */
    unsigned block;                 /* pixels per block side: 4 (BC formats) or 1 */
} cuabi__array;

/* Bytes per element (per 4x4 block for block-compressed formats, *block
 * set to 4, else 1) of `format` with `channels` channels; 0 for the video
 * formats, whose layout cuabi does not copy; -1 for a value that is no
 * cuabi_array_format. */
long cuabi__array_format_elem(int format, unsigned channels, unsigned *block);

/* The array format of a view's dtype (int/uint 8, 16, 32; float16,
 * float32), or an error naming `caller`. */
cuabi_status cuabi__array_format_of_dtype(int *out, const cuabi__view *v, const char *caller);

/* Whether a texture of `format` returns floats when read in `read_mode`
 * (what a linear filter needs); `why` says why not. */
bool cuabi__array_format_filters(int format, int read_mode, const char **why);

/* The device of `view` for making an array or texture of it: `device` when
 * given (which must be the view's own for CUDA memory), else the view's
 * (device 0 for host, pinned and managed memory). A new reference. */
cuabi_status cuabi__array_view_device(cuabi__device **out, const cuabi__view *v,
                                      cuabi_device *device, const char *caller);

#endif
