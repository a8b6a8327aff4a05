/* Fatbin test helpers: a container writer (the layout src/compile/fatbin.c parses)
 * and a fake nvFatbin that packs with it, for machines without nvFatbin
 * (tests/test_fatbin.c; tests/test_faults.c makes its calls fail). */
#ifndef CUABI_FATBIN_TESTUTIL_H
#define CUABI_FATBIN_TESTUTIL_H

#include "testutil.h"
#include "compile/fatbin.h"

/* ------------------------------------------------ a container writer */

typedef struct tentry {
    unsigned kind, arch;
    const void *data;
    size_t size;
    uint64_t flags;
    const char *ident;
} tentry;

static void wr16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void wr32(unsigned char *p, uint32_t v) { wr16(p, v & 0xffff); wr16(p + 2, v >> 16); }
static void wr64(unsigned char *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }
static size_t round8(size_t n) { return (n + 7) & ~(size_t)7; }

static unsigned char *build(const tentry *e, size_t n, size_t *out_size)
{
    size_t body = 0;
    for (size_t i = 0; i < n; i++)
        body += 64 + (e[i].ident ? round8(strlen(e[i].ident) + 1) : 0) + round8(e[i].size);
    unsigned char *b = calloc(1, 16 + body);
    ck_assert_ptr_nonnull(b);
    wr32(b, CUABI__FATBIN_MAGIC);
    wr16(b + 4, 1);
    wr16(b + 6, 16);
    wr64(b + 8, body);
    size_t pos = 16;
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = b + pos;
        size_t ehs = 64 + (e[i].ident ? round8(strlen(e[i].ident) + 1) : 0);
        wr16(p, e[i].kind);
        wr16(p + 2, 0x101);
        wr32(p + 4, (uint32_t)ehs);
        wr64(p + 8, round8(e[i].size));
        wr32(p + 28, e[i].arch);
        if (e[i].ident) {
            wr32(p + 32, 64);
            wr32(p + 36, (uint32_t)strlen(e[i].ident));
            memcpy(p + 64, e[i].ident, strlen(e[i].ident));
        }
        wr64(p + 40, e[i].flags | 0x11);
        memcpy(p + ehs, e[i].data, e[i].size);
        pos += ehs + round8(e[i].size);
    }
    *out_size = 16 + body;
    return b;
}

/* ------------------------------------------------ a fake nvFatbin */

static struct {
    tentry e[16];
    char idents[16][48];
    size_t n, cubins, ptxs;
    unsigned char *out;
    size_t out_size;
    int fail_add;               /* nonzero: AddCubin answers this */
} fakefb;

static const char *fake_error_string(int r) { return r ? "NVFATBIN_ERROR_FAKE" : "NVFATBIN_SUCCESS"; }
static int fake_create(cuabi__nvfatbin_handle *h, const char **o, size_t n)
{
    (void)o;
    (void)n;
    fakefb.n = 0;
    *h = (cuabi__nvfatbin_handle)&fakefb;
    return 0;
}
static int fake_destroy(cuabi__nvfatbin_handle *h)
{
    free(fakefb.out);
    fakefb.out = NULL;
    *h = NULL;
    return 0;
}
static int fake_add(unsigned kind, const void *code, size_t size, const char *arch,
                    const char *ident)
{
    if (fakefb.n == 16)
        return 1;
    snprintf(fakefb.idents[fakefb.n], sizeof fakefb.idents[0], "%s", ident);
    fakefb.e[fakefb.n] = (tentry){ kind, (unsigned)atoi(arch), code, size, 0, fakefb.idents[fakefb.n] };
    fakefb.n++;
    return 0;
}
static int fake_add_ptx(cuabi__nvfatbin_handle h, const char *code, size_t size, const char *arch,
                        const char *ident, const char *opts)
{
    (void)h;
    (void)opts;
    fakefb.ptxs++;
    return fake_add(1, code, size, arch, ident);
}
static int fake_add_cubin(cuabi__nvfatbin_handle h, const void *code, size_t size,
                          const char *arch, const char *ident)
{
    (void)h;
    if (fakefb.fail_add)
        return fakefb.fail_add;
    fakefb.cubins++;
    return fake_add(2, code, size, arch, ident);
}
static int fake_size(cuabi__nvfatbin_handle h, size_t *size)
{
    (void)h;
    free(fakefb.out);
    fakefb.out = build(fakefb.e, fakefb.n, &fakefb.out_size);
    *size = fakefb.out_size;
    return 0;
}
static int fake_get(cuabi__nvfatbin_handle h, void *buf)
{
    (void)h;
    memcpy(buf, fakefb.out, fakefb.out_size);
    return 0;
}
static int fake_version(unsigned *major, unsigned *minor)
{
    *major = 13;
    *minor = 0;
    return 0;
}

/* cuabi never packs LTO-IR, so the fake has no nvFatbinAddLTOIR. */
static const cuabi__nvfatbin fake_nvfatbin_table = {
    fake_error_string, fake_create, fake_destroy, fake_add_ptx, fake_add_cubin, NULL,
    fake_size, fake_get, fake_version };

/* A fresh fake: no counts, no failure left from an earlier test (the
 * suites run in one process). */
static void fake_nvfatbin_reset(void)
{
    fakefb.cubins = fakefb.ptxs = 0;
    fakefb.fail_add = 0;
}

static void install_fake_nvfatbin(void)
{
    fake_nvfatbin_reset();
    cuabi__nvfatbin_install_fake(&fake_nvfatbin_table);
}

#endif
