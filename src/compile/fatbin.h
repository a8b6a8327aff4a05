/* Fatbins: reading the container and making one.
 *
 * A fatbin is a sequence of containers, each a 16-byte header (magic
 * 0xBA55ED50, version, header size, size of what follows) and entries: an
 * entry header (kind 1 PTX, 2 ELF/CUBIN, 4 LTO-IR; the SM architecture;
 * flags, among them compression; an optional identifier) and its payload.
 * Every field is checked against the bytes there are: fatbins are
 * untrusted input (fuzz/fuzz_fatbin.c).
 *
 * Making one: through nvFatbin when it loads (src/platform/loader.c), else the
 * toolkit's `fatbinary` tool run in a temporary directory. Each entry
 * carries the identifier "cuabi:nvfatbin" or "cuabi:fatbinary", so the
 * bytes themselves say which path made them (cuabi_fatbin_packer). */
#ifndef CUABI_FATBIN_INTERNAL_H
#define CUABI_FATBIN_INTERNAL_H

#include "platform/loader.h"

#define CUABI__FATBIN_MAGIC 0xBA55ED50u

/* The identifier each entry cuabi packs carries: which path made it. */
#define CUABI__IDENT_NVFATBIN "cuabi:nvfatbin"
#define CUABI__IDENT_FATBINARY "cuabi:fatbinary"

typedef struct cuabi__fatbin_image {
    cuabi_code_type type;          /* CUBIN, PTX, LTOIR; NONE for another kind */
    unsigned kind;                 /* the container's kind number */
    unsigned arch;                 /* 90 for sm_90 / compute_90 */
    bool compressed;
    const unsigned char *data;     /* the payload, inside the parsed bytes */
    size_t size;
    const char *ident;             /* not NUL-terminated; ident_len bytes */
    size_t ident_len;
} cuabi__fatbin_image;

typedef struct cuabi__fatbin {
    cuabi__fatbin_image *images;
    size_t count;
} cuabi__fatbin;

/* Parse `size` bytes (borrowed: the images point into them). A malformed
 * container gives CUABI_ERROR_INVALID_IMAGE naming `caller`, `what` and the
 * defect and its offset. */
cuabi_status cuabi__fatbin_parse(cuabi__fatbin *out, const void *data, size_t size,
                                 const char *what, const char *caller);
void cuabi__fatbin_free(cuabi__fatbin *f);

/* A CUBIN for `arch` ("sm_90") from a fatbin's bytes, cuabi__malloc'ed: the
 * CUBIN entry of that architecture, else the newest PTX entry not newer
 * than it, compiled with nvJitLink. NOT_FOUND lists what the fatbin holds;
 * a compressed entry gives NOT_SUPPORTED. */
cuabi_status cuabi__fatbin_cubin_for(void **cubin, size_t *cubin_size, const void *data,
                                     size_t size, const char *name, const char *arch,
                                     const char *caller);
/* The newest architecture of the fatbin's CUBIN entries, else of its PTX
 * entries; 0 when it has neither. */
unsigned cuabi__fatbin_best_arch(const void *data, size_t size);

/* The entries of `f` for a message ("sm_90 CUBIN, compute_90 PTX"). */
void cuabi__fatbin_describe(const cuabi__fatbin *f, char *buf, size_t len);
/* CUABI_ERROR_NOT_SUPPORTED: entry `m` of fatbin `name` is compressed. */
cuabi_status cuabi__fatbin_compressed(const cuabi__fatbin_image *m, const char *name,
                                      const char *caller);
/* The number of "sm_90", "sm_90a", "compute_100f" (90, 90, 100). */
unsigned cuabi__fatbin_arch_number(const char *arch);

/* One image to pack. arch 0: read it from the image (a CUBIN's ELF header,
 * PTX's .target). */
typedef struct cuabi__fatbin_input {
    cuabi_code_type type;          /* CUBIN, PTX or LTOIR */
    const void *data;
    size_t size;                   /* PTX: without a terminating NUL */
    unsigned arch;
} cuabi__fatbin_input;

/* Pack the images into a new fatbin (*out cuabi__malloc'ed), uncompressed
 * so that it can be read offline. *packer: "nvfatbin" or "fatbinary". */
cuabi_status cuabi__fatbin_pack(void **out, size_t *out_size, const char **packer,
                                const cuabi__fatbin_input *in, size_t n, const char *caller);

/* The architecture number a PTX text targets (.target sm_90 -> 90), 0 if
 * it says none. */
unsigned cuabi__ptx_target_arch(const char *ptx, size_t size);

/* Testing: 0 try nvFatbin then fatbinary, 1 nvFatbin only, 2 fatbinary only. */
void cuabi__fatbin_force_packer(int which);

#endif
