/* The compiled packer (fast_pack.c): kernel arguments to slot bytes. */
#ifndef CUABI_FAST_PACK_H
#define CUABI_FAST_PACK_H

#include "fast_common.h"

/* One slot of a pack: its kind (cuabi_arg_kind), size and blob offset. */
typedef struct fast_arg_slot {
    int kind;
    size_t size, offset;
} fast_arg_slot;

/* Write `arg` into its slot of `blob`: 1 when done; 0 when this argument is
 * for the Python packer (a type or value the rules leave to it, refusals
 * included). Never raises. */
int fast_pack_arg(const fast_arg_slot *slot, unsigned char *blob, PyObject *arg);

/* Where View keeps a lazy view's description (View._d), for array args. */
void fast_pack_set_view_offset(Py_ssize_t offset);

/* Adds this part's functions, types and constants to the module (called by
 * fast_module.c only). */
int fast_pack_init(PyObject *module);

#endif
