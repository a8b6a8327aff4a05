/* Argument-pack signature strings and setters: the input is
 * "<signature>\0<setter bytes>"; the signature is parsed, and when it
 * builds a pack, each setter record (slot, which setter, value bytes) is
 * applied: right-typed, wrong-typed and out-of-range slots alike, then the
 * layout is read back and a raw blob set. Everything returns a status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuabi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    char *sig = malloc(slen + 1);
    memcpy(sig, data, slen);
    sig[slen] = '\0';
    cuabi_argpack *p = NULL;
    cuabi_status st = cuabi_argpack_create(&p, sig);
    free(sig);
    if (st != CUABI_SUCCESS)
        return 0;
    size_t count = 0, blob = 0, items = 0;
    if (cuabi_argpack_count(&count, p) || cuabi_argpack_blob_size(&blob, p) ||
        cuabi_argpack_item_count(&items, p))
        __builtin_trap();
    for (size_t i = 0; i < items; i++) {
        cuabi_arg_info info = CUABI_ARG_INFO_INIT;
        if (cuabi_argpack_item(&info, p, i))
            __builtin_trap();
    }
    const uint8_t *r = nul ? nul + 1 : data + size, *end = data + size;
    uint8_t bytes[64];
    while (end - r >= 10) {
        size_t slot = r[0] % (count + 2); /* a few past the end */
        uint8_t which = r[1];
        uint64_t v;
        memcpy(&v, r + 2, 8);
        r += 10;
        double d;
        memcpy(&d, &v, sizeof d);
        size_t sz, off;
        cuabi_arg_kind kind;
        (void)cuabi_argpack_slot_size(&sz, p, slot);
        (void)cuabi_argpack_slot_offset(&off, p, slot);
        (void)cuabi_argpack_slot_kind(&kind, p, slot);
        switch (which % 8) {
        case 0: (void)cuabi_argpack_set_int(p, slot, (int64_t)v); break;
        case 1: (void)cuabi_argpack_set_uint(p, slot, v); break;
        case 2: (void)cuabi_argpack_set_float(p, slot, d); break;
        case 3: (void)cuabi_argpack_set_complex(p, slot, d, -d); break;
        case 4: (void)cuabi_argpack_set_pointer(p, slot, v); break;
        case 5: {
            size_t n = (which >> 3) % sizeof bytes;
            memset(bytes, (int)v, sizeof bytes);
            (void)cuabi_argpack_set_bytes(p, slot, bytes, n);
            break;
        }
        case 6: {
            size_t n = (which >> 3) % sizeof bytes;
            (void)cuabi_argpack_get_bytes(bytes, n, p, slot);
            break;
        }
        default: {
            void *b = calloc(1, blob + 1);
            (void)cuabi_argpack_set_blob(p, b, (which & 8) ? blob : blob + 1);
            free(b);
            break;
        }
        }
    }
    cuabi_argpack_release(p);
    return 0;
}
