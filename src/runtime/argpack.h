/* Argument packs, internal view: what launch.c needs on its hot path. */
#ifndef CUABI_ARGPACK_INTERNAL_H
#define CUABI_ARGPACK_INTERNAL_H

#include "runtime/device.h"

/* One item of a pack: a slot (depth 0) or a struct member. */
typedef struct cuabi__arg_item {
    cuabi_arg_kind kind;
    int depth;
    size_t size, align;
    size_t offset;        /* slot: offset in the blob; member: offset in its slot */
    size_t slot;
    size_t member_count;
} cuabi__arg_item;

/* Where a slot's value comes from at launch: a buffer's or view's device
 * address, or a texture's or surface's object value. */
enum {
    CUABI__REF_NONE = 0, CUABI__REF_BUFFER = 1, CUABI__REF_VIEW = 2,
    CUABI__REF_TEXTURE = 3, CUABI__REF_SURFACE = 4
};

/* The handle type a reference names, and its name in messages. */
static inline cuabi__handle_type cuabi__ref_type(int ref)
{
    return ref == CUABI__REF_BUFFER ? CUABI__T_BUFFER : ref == CUABI__REF_VIEW ? CUABI__T_VIEW
         : ref == CUABI__REF_TEXTURE ? CUABI__T_TEXTURE : CUABI__T_SURFACE;
}
static inline const char *cuabi__ref_name(int ref)
{
    return ref == CUABI__REF_BUFFER ? "buffer" : ref == CUABI__REF_VIEW ? "view"
         : ref == CUABI__REF_TEXTURE ? "texture" : "surface";
}

/* Objects whose 64-bit value a slot takes (texture and surface objects,
 * runtime/texture.c) start with this layout, so the pack reads the value
 * without calling up into their module. */
typedef struct cuabi__valued_object {
    cuabi__object base;
    uint64_t value;
} cuabi__valued_object;

typedef struct cuabi__argpack {
    cuabi__object base;
    size_t nslots, nitems;
    cuabi__arg_item *items;     /* nitems, depth first */
    size_t *slot_item;          /* nslots: index into items of each slot */
    size_t blob_size;
    unsigned char *storage;     /* blob_size bytes: the packed parameters */
    void **params;              /* nslots pointers into storage (kernelParams) */
    unsigned char *ref_kind;    /* nslots: CUABI__REF_* */
    uint64_t *ref_handle;       /* nslots: buffer/view handle value, 0 = unset */
    size_t nrefs;               /* slots with ref_kind != NONE */
    _Atomic uint64_t checked_kernel; /* handle of the last kernel the layout matched */
} cuabi__argpack;

/* Write the current device address of every buffer/view slot into the
 * storage. Fails (naming `caller` and the slot) when a handle was never set
 * or has been released. Cheap when the pack has no such slots. */
cuabi_status cuabi__argpack_resolve_slow(cuabi__argpack *p, const char *caller);
static inline cuabi_status cuabi__argpack_resolve(cuabi__argpack *p, const char *caller)
{
    return p->nrefs ? cuabi__argpack_resolve_slow(p, caller) : CUABI_SUCCESS;
}

/* Point a slot at a texture or surface handle (`ref` CUABI__REF_TEXTURE /
 * _SURFACE): a handle, u64, i64, intptr or 8-byte raw slot. The pack keeps
 * the handle; cuabi__argpack_resolve writes the object's value. */
cuabi_status cuabi__argpack_set_object(cuabi_argpack *pack, size_t slot, const void *handle,
                                       int ref, const char *caller);

/* Compare the pack with a kernel's parameter layout (count, sizes and, when
 * offsets is non-NULL, offsets); CUABI_ERROR_ARGUMENT_MISMATCH naming the
 * first differing parameter. */
cuabi_status cuabi__argpack_check_layout(const cuabi__argpack *p, size_t count,
                                         const size_t *offsets, const size_t *sizes,
                                         const char *caller);

/* Half-precision conversions (round to nearest even); exposed for tests. */
uint16_t cuabi__f32_to_f16(float f);
uint16_t cuabi__f32_to_bf16(float f);

#endif
