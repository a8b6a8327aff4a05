/* Kernel parameter types from untrusted text: the input is a PTX text whose
 * .entry declarations are parsed into signatures, and also (after its first
 * NUL, or whole) a kernel name handed to the demangler; each signature line
 * and the name are then built against layouts made from the input's bytes.
 * Everything must return a status: no crash, no leak, no read past the end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compile/param_types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A layout of n parameters from the input bytes (sizes 1..32, natural offsets). */
static void layout(const uint8_t *data, size_t size, size_t n, size_t *offs, size_t *sizes)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        sizes[i] = size ? (size_t)(data[i % size] % 32) + 1 : 4;
        size_t a = sizes[i] >= 16 ? 16 : sizes[i] >= 8 ? 8 : sizes[i] >= 4 ? 4 : 1;
        at = (at + a - 1) / a * a;
        offs[i] = at;
        at += sizes[i];
    }
}

static void build(const char *name, const char *sigs, const uint8_t *data, size_t size)
{
    size_t offs[24], sizes[24];
    for (size_t n = 0; n < 24; n += 3) {
        layout(data, size, n, offs, sizes);
        cuabi__param_types t;
        cuabi_status st = cuabi__param_types_build(&t, name, sigs, n, offs, sizes);
        if (st == CUABI_SUCCESS) {
            if (!t.signature || t.count != n)
                __builtin_trap();
            for (size_t i = 0; i < n; i++)
                if (!t.params[i].type_name)
                    __builtin_trap();
            cuabi__param_types_free(&t);
        } else if (st != CUABI_ERROR_OUT_OF_MEMORY) {
            __builtin_trap();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sigs = NULL;
    if (cuabi__ptx_signatures(&sigs, (const char *)data, size) != CUABI_SUCCESS)
        return 0;
    /* Every kernel the signatures name, built against layouts of the input. */
    for (const char *line = sigs; line && *line;) {
        const char *open = strchr(line, '('), *eol = strchr(line, '\n');
        if (!open || !eol || open > eol)
            __builtin_trap();   /* the text is "name(...)\n" lines only */
        char name[256];
        size_t n = (size_t)(open - line) < sizeof name - 1 ? (size_t)(open - line) : sizeof name - 1;
        memcpy(name, line, n);
        name[n] = '\0';
        build(name, sigs, data, size);
        line = eol + 1;
    }
    /* The input as a kernel name for the demangler, with and without "_Z". */
    const uint8_t *nul = memchr(data, 0, size);
    size_t len = nul ? (size_t)(nul - data) : size;
    char *name = malloc(len + 3);
    if (name) {
        memcpy(name + 2, data, len);
        name[len + 2] = '\0';
        name[0] = '_';
        name[1] = 'Z';
        build(name + 2, sigs, data, size);
        build(name, sigs, data, size);
        free(name);
    }
    free(sigs);
    return 0;
}
