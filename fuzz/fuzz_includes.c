/* The include scan behind the compile cache's key (src/util/includes.c) on
 * untrusted sources: the input is a CUDA C++ source, up to its first NUL,
 * and after it an in-memory header "m.h". A private directory holds a few
 * headers (one including the other, one through a macro) on the include
 * path, so #include lines in the input reach real files. Every input must
 * give NONE, HASHED or UNRESOLVED with a reason: no crash, leak or read
 * past the end, and the same input must give the same digest twice. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/includes.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/cuabi-fuzz-includes-XXXXXX";
static char inc[64];

static void put(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", inc, name);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (!mkdtemp(dir))
        abort();
    snprintf(inc, sizeof inc, "%s/inc", dir);
    if (mkdir(inc, 0700) != 0)
        abort();
    put("a.h", "#pragma once\n#include \"b.h\"\n#define NEXT <c.h>\n#include NEXT\n");
    put("b.h", "#include <a.h>\n#if __has_include(<missing.h>)\n#endif\n");
    put("c.h", "#include_next <c.h>\n#define CFG \"a.h\"\n");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    size_t src_len = nul ? (size_t)(nul - data) : size;
    char *src = malloc(src_len + 1);
    char *hdr = strndup(nul ? (const char *)nul + 1 : "", nul ? size - src_len - 1 : 0);
    if (!src || !hdr)
        abort();
    memcpy(src, data, src_len);
    src[src_len] = '\0';
    const char *paths[] = { inc }, *names[] = { "m.h" }, *contents[] = { hdr };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = paths;
    o.num_include_paths = 1;
    o.header_names = names;
    o.header_contents = contents;
    o.num_headers = nul ? 1 : 0;
    int r1, r2;
    uint8_t d1[16] = { 0 }, d2[16] = { 0 };
    char why[512];
    cuabi_status s1 = cuabi__includes_digest(&r1, d1, "fuzz.cu", src, src_len, &o, why,
                                             sizeof why);
    cuabi_status s2 = cuabi__includes_digest(&r2, d2, "fuzz.cu", src, src_len, &o, why,
                                             sizeof why);
    if (s1 == CUABI_SUCCESS && s2 == CUABI_SUCCESS &&
        (r1 != r2 || r1 < -1 || r1 > 1 || memcmp(d1, d2, 16) ||
         (r1 == CUABI__INCLUDES_UNRESOLVED && !why[0])))
        __builtin_trap();
    free(src);
    free(hdr);
    return 0;
}
