/* Reading fatbins (fatbin.h says what the container is): the parser every
 * fatbin goes through, the CUBIN an architecture would run, and the PTX
 * target of a text. Fatbins are untrusted input (fuzz/fuzz_fatbin.c). */
#include "compile/fatbin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/code_type.h"
#include "compile/jitlink.h"

/* Entry kinds and flags of the container (as nvcc's fatbinary writes them). */
#define KIND_PTX 1u
#define KIND_ELF 2u
#define KIND_NVVM 8u            /* LTO-IR */
#define FLAG_COMPRESS_LZ4 0x2000u
#define FLAG_COMPRESS_ZSTD 0x8000u
#define HEADER_SIZE 16u
#define ENTRY_MIN 64u

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static cuabi_code_type kind_type(unsigned kind)
{
    return kind == KIND_PTX ? CUABI_CODE_PTX : kind == KIND_ELF ? CUABI_CODE_CUBIN
         : kind == KIND_NVVM ? CUABI_CODE_LTOIR : CUABI_CODE_NONE;
}

static cuabi_status bad(const char *caller, const char *what, size_t off, const char *defect)
{
    return cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: %s is not a well-formed fatbin: %s "
                        "(at byte %zu)", caller, what, defect, off);
}

/* One entry at p[0..avail): header, identifier, payload, all inside. */
static cuabi_status parse_entry(cuabi__fatbin_image *img, size_t *used, const unsigned char *p,
                                size_t avail, size_t off, const char *what, const char *caller)
{
    if (avail < ENTRY_MIN)
        return bad(caller, what, off, "an entry header is cut short");
    uint32_t ehs = rd32(p + 4);
    uint64_t payload = rd64(p + 8);
    uint32_t name_off = rd32(p + 32), name_len = rd32(p + 36);
    uint64_t flags = rd64(p + 40);
    if (ehs < ENTRY_MIN || ehs > avail)
        return bad(caller, what, off, "an entry's header size is out of range");
    if (payload > avail - ehs)
        return bad(caller, what, off, "an entry's payload runs past the container");
    if (name_len && (name_off < ENTRY_MIN || name_off > ehs || name_len > ehs - name_off))
        return bad(caller, what, off, "an entry's identifier lies outside its header");
    *img = (cuabi__fatbin_image){
        .kind = rd16(p), .arch = rd32(p + 28),
        .compressed = (flags & (FLAG_COMPRESS_LZ4 | FLAG_COMPRESS_ZSTD)) != 0,
        .data = p + ehs, .size = (size_t)payload,
        .ident = name_len ? (const char *)p + name_off : "", .ident_len = name_len };
    img->type = kind_type(img->kind);
    *used = ehs + (size_t)payload;
    return CUABI_SUCCESS;
}

static cuabi_status add_image(cuabi__fatbin *f, size_t *cap, const cuabi__fatbin_image *img)
{
    if (f->count == *cap) {
        size_t n = *cap ? *cap * 2 : 8;
        cuabi__fatbin_image *ni = cuabi__realloc(f->images, n * sizeof *ni);
        if (!ni)
            return CUABI_ERROR_OUT_OF_MEMORY;
        f->images = ni;
        *cap = n;
    }
    f->images[f->count++] = *img;
    return CUABI_SUCCESS;
}

/* The containers one after the other; what follows the last may only be
 * zero padding. */
static cuabi_status parse_all(cuabi__fatbin *f, const unsigned char *d, size_t size,
                              const char *what, const char *caller)
{
    size_t off = 0, cap = 0;
    while (off < size) {
        size_t left = size - off;
        if (left < 4 || rd32(d + off) != CUABI__FATBIN_MAGIC) {
            for (size_t i = off; i < size; i++)
                if (d[i])
                    return off == 0 ? bad(caller, what, 0, "no fatbin header (magic 0xBA55ED50)")
                                    : bad(caller, what, off, "bytes after the last container");
            break;
        }
        if (left < HEADER_SIZE)
            return bad(caller, what, off, "the header is cut short");
        uint16_t hs = rd16(d + off + 6);
        uint64_t body = rd64(d + off + 8);
        if (hs < HEADER_SIZE || hs > left)
            return bad(caller, what, off, "the header size is out of range");
        if (body > left - hs)
            return bad(caller, what, off, "the container is larger than the data");
        size_t pos = off + hs, end = pos + (size_t)body;
        while (pos < end) {
            cuabi__fatbin_image img;
            size_t used = 0;
            CUABI__TRY(parse_entry(&img, &used, d + pos, end - pos, pos, what, caller));
            CUABI__TRY(add_image(f, &cap, &img));
            pos += used;
        }
        off = end;
    }
    if (f->count == 0)
        return bad(caller, what, 0, "it holds no images");
    return CUABI_SUCCESS;
}

cuabi_status cuabi__fatbin_parse(cuabi__fatbin *out, const void *data, size_t size,
                                 const char *what, const char *caller)
{
    *out = (cuabi__fatbin){ NULL, 0 };
    cuabi_status st = parse_all(out, data, size, what, caller);
    if (st != CUABI_SUCCESS)
        cuabi__fatbin_free(out);
    return st;
}

void cuabi__fatbin_free(cuabi__fatbin *f)
{
    cuabi__free(f->images);
    f->images = NULL;
    f->count = 0;
}

/* "sm_90, sm_90 PTX, ..." of what the fatbin holds, for messages. */
void cuabi__fatbin_describe(const cuabi__fatbin *f, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < f->count && used + 1 < len; i++) {
        const cuabi__fatbin_image *m = &f->images[i];
        int n = m->type == CUABI_CODE_CUBIN
                    ? snprintf(buf + used, len - used, "%ssm_%u CUBIN", i ? ", " : "", m->arch)
                : m->type == CUABI_CODE_NONE
                    ? snprintf(buf + used, len - used, "%skind %u for %u", i ? ", " : "",
                               m->kind, m->arch)
                    : snprintf(buf + used, len - used, "%scompute_%u %s", i ? ", " : "",
                               m->arch, cuabi__code_type_name(m->type));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

cuabi_status cuabi__fatbin_compressed(const cuabi__fatbin_image *m, const char *name,
                                      const char *caller)
{
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the %s image for %u in %s is "
                        "compressed, which cuabi does not read offline (the driver loads it); "
                        "make the fatbin uncompressed (fatbinary --compress=false, nvFatbin "
                        "-compress=false)", caller, cuabi__code_type_name(m->type), m->arch,
                        name);
}

/* The arch number of "sm_90", "sm_90a", "compute_100f". */
unsigned cuabi__fatbin_arch_number(const char *arch)
{
    const char *d = !strncmp(arch, "sm_", 3) ? arch + 3 : !strncmp(arch, "compute_", 8) ? arch + 8
                                                                                       : arch;
    return (unsigned)strtoul(d, NULL, 10);
}

cuabi_status cuabi__fatbin_cubin_for(void **cubin, size_t *cubin_size, const void *data,
                                     size_t size, const char *name, const char *arch,
                                     const char *caller)
{
    cuabi__fatbin f;
    *cubin = NULL;
    *cubin_size = 0;
    CUABI__TRY(cuabi__fatbin_parse(&f, data, size, name, caller));
    unsigned want = cuabi__fatbin_arch_number(arch);
    const cuabi__fatbin_image *elf = NULL, *ptx = NULL;
    for (size_t i = 0; i < f.count; i++) {
        const cuabi__fatbin_image *m = &f.images[i];
        if (m->type == CUABI_CODE_CUBIN && m->arch == want)
            elf = m;
        if (m->type == CUABI_CODE_PTX && m->arch <= want && (!ptx || m->arch > ptx->arch))
            ptx = m;
    }
    cuabi_status st = CUABI_SUCCESS;
    const cuabi__fatbin_image *use = elf ? elf : ptx;
    if (!use) {
        char have[512];
        cuabi__fatbin_describe(&f, have, sizeof have);
        st = cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: %s has no CUBIN for %s and no PTX for it "
                          "or an older architecture (it holds %s)", caller, name, arch, have);
    } else if (use->compressed) {
        st = cuabi__fatbin_compressed(use, name, caller);
    } else if (use == elf) {
        *cubin = cuabi__malloc(use->size ? use->size : 1);
        if (!*cubin)
            st = CUABI_ERROR_OUT_OF_MEMORY;
        else
            memcpy(*cubin, use->data, use->size), *cubin_size = use->size;
    } else {
        /* PTX: text up to its first NUL (the payload is padded), compiled. */
        size_t len = strnlen((const char *)use->data, use->size);
        char *text = cuabi__malloc(len + 1);
        if (!text) {
            st = CUABI_ERROR_OUT_OF_MEMORY;
        } else {
            memcpy(text, use->data, len);
            text[len] = '\0';
            st = cuabi__link_to_cubin(cubin, cubin_size, CUABI_CODE_PTX, text, len, name, arch,
                                      caller);
            cuabi__free(text);
        }
    }
    cuabi__fatbin_free(&f);
    return st;
}

unsigned cuabi__fatbin_best_arch(const void *data, size_t size)
{
    cuabi__fatbin f;
    unsigned best_elf = 0, best_ptx = 0;
    if (cuabi__fatbin_parse(&f, data, size, "fatbin", "cuabi") != CUABI_SUCCESS) {
        cuabi_error_clear();
        return 0;
    }
    for (size_t i = 0; i < f.count; i++) {
        const cuabi__fatbin_image *m = &f.images[i];
        if (m->type == CUABI_CODE_CUBIN && m->arch > best_elf)
            best_elf = m->arch;
        if (m->type == CUABI_CODE_PTX && m->arch > best_ptx)
            best_ptx = m->arch;
    }
    cuabi__fatbin_free(&f);
    return best_elf ? best_elf : best_ptx;
}

unsigned cuabi__ptx_target_arch(const char *ptx, size_t size)
{
    for (size_t i = 0; i + 8 < size; i++) {
        if (ptx[i] != '.' || memcmp(ptx + i, ".target", 7) != 0)
            continue;
        size_t j = i + 7;
        while (j < size && (ptx[j] == ' ' || ptx[j] == '\t'))
            j++;
        if (j + 3 < size && !memcmp(ptx + j, "sm_", 3)) {
            unsigned v = 0;
            for (j += 3; j < size && ptx[j] >= '0' && ptx[j] <= '9' && v < 100000; j++)
                v = v * 10 + (unsigned)(ptx[j] - '0');
            return v;
        }
        return 0;
    }
    return 0;
}
