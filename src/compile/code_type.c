/* What a blob of compiled code is: the names of code types, and telling a
 * type from the first bytes (CUBIN and host ELF, fatbin, LTO-IR and NVVM
 * bitcode, archives, PTX text). */
#include "compile/code_type.h"

#include <string.h>

#include "util/cubin_elf.h"

const char *cuabi__code_type_name(cuabi_code_type type)
{
    switch (type) {
    case CUABI_CODE_NONE: return "unknown code";
    case CUABI_CODE_CUDA_CXX: return "CUDA C++";
    case CUABI_CODE_PTX: return "PTX";
    case CUABI_CODE_CUBIN: return "CUBIN";
    case CUABI_CODE_LTOIR: return "LTO-IR";
    case CUABI_CODE_FATBIN: return "fatbin";
    case CUABI_CODE_OBJECT: return "object";
    case CUABI_CODE_LIBRARY: return "library";
    case CUABI_CODE_NVVM: return "NVVM IR";
    default: break;
    }
    return "invalid code type";
}

static bool starts_with(const void *data, size_t size, const void *magic, size_t n)
{
    return size >= n && memcmp(data, magic, n) == 0;
}

/* PTX: text whose first directives include .version or .target. */
static bool looks_like_ptx(const char *p, size_t size)
{
    size_t n = size < 4096 ? size : 4096;
    for (size_t i = 0; i + 8 <= n; i++)
        if (p[i] == '.' && (memcmp(p + i, ".version", 8) == 0 || memcmp(p + i, ".target ", 8) == 0))
            return true;
    return false;
}

cuabi_code_type cuabi__code_detect(const void *data, size_t size)
{
    static const unsigned char fatbin[4] = { 0x50, 0xed, 0x55, 0xba };
    static const unsigned char bitcode[4] = { 'B', 'C', 0xc0, 0xde };
    static const unsigned char bitcode_wrapper[4] = { 0xde, 0xc0, 0x17, 0x0b };
    static const unsigned char nvlto[4] = { 0xed, 0x43, 0x4e, 0x7f }; /* NVVM LTO container */
    if (!data || size == 0)
        return CUABI_CODE_NONE;
    if (cuabi__elf_is_elf(data, size)) {
        const unsigned char *p = data;
        /* EM_CUDA (190) images are CUBINs; other ELF files are host objects. */
        return size >= 20 && p[18] == 190 && p[19] == 0 ? CUABI_CODE_CUBIN : CUABI_CODE_OBJECT;
    }
    if (starts_with(data, size, fatbin, 4))
        return CUABI_CODE_FATBIN;
    if (starts_with(data, size, bitcode, 4) || starts_with(data, size, bitcode_wrapper, 4) ||
        starts_with(data, size, nvlto, 4))
        return CUABI_CODE_LTOIR;
    if (starts_with(data, size, "!<arch>\n", 8))
        return CUABI_CODE_LIBRARY;
    if (looks_like_ptx(data, size))
        return CUABI_CODE_PTX;
    return CUABI_CODE_NONE;
}
