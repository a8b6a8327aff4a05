/* Program and linker options: random architectures, standards, levels,
 * flags, defines, include paths, headers, name expressions and extra
 * options through the validation layer (the argument list a compile would
 * hand NVRTC, and its cache key), and random linker options through
 * cuabi_linker_create (nvJitLinkCreate parses them; no input is linked).
 * About one input in 512 with valid-looking options is compiled for real,
 * with the cache off, to keep NVRTC calls bounded.
 *
 * Input: a few control bytes, then NUL-separated strings fed to the
 * string fields in turn. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/stream.h"
#include "runtime/event.h"
#include "compile/cache.h"
#include "compile/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAXS = 24 };
typedef struct strings {
    char *buf;
    const char *s[MAXS];
    size_t n, next;
} strings;

static const char *next(strings *st)
{
    return st->n ? st->s[st->next++ % st->n] : "";
}

static void split(strings *st, const uint8_t *d, size_t n)
{
    st->buf = malloc(n + 1);
    memcpy(st->buf, d, n);
    st->buf[n] = '\0';
    st->n = st->next = 0;
    char *p = st->buf, *end = st->buf + n;
    while (p <= end && st->n < MAXS) {
        st->s[st->n++] = p;
        p += strlen(p) + 1;
    }
}

static const char src[] = "extern \"C\" __global__ void k(int *p) { p[0] = FUZZ_VALUE; }\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    const uint8_t *c = data;
    strings st;
    split(&st, data + 8, size - 8);

    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    const char *defines[4], *incs[4], *hnames[4], *hcont[4], *exprs[4], *extra[4];
    o.arch = c[0] & 1 ? NULL : next(&st);
    o.output = (cuabi_code_type)(c[0] >> 1 & 7);
    o.std = c[0] & 0x10 ? next(&st) : NULL;
    o.opt_level = (int8_t)c[1] % 5;
    o.debug = c[1] >> 3 & 1;
    o.line_info = c[1] >> 4 & 1;
    o.fast_math = c[1] >> 5 & 1;
    o.relocatable = c[1] >> 6 & 1;
    o.lto = c[1] >> 7 & 1;
    o.num_defines = c[2] & 3;
    o.num_include_paths = c[2] >> 2 & 3;
    o.num_headers = c[2] >> 4 & 3;
    o.num_name_expressions = c[2] >> 6 & 3;
    o.num_extra_options = c[3] & 3;
    for (size_t i = 0; i < 4; i++) {
        defines[i] = next(&st);
        incs[i] = next(&st);
        hnames[i] = next(&st);
        hcont[i] = c[3] & 0x40 && i == 1 ? NULL : next(&st);
        exprs[i] = next(&st);
        extra[i] = c[3] & 0x80 && i == 0 ? NULL : next(&st);
    }
    o.defines = defines;
    o.include_paths = incs;
    o.header_names = hnames;
    o.header_contents = hcont;
    o.name_expressions = exprs;
    o.extra_options = extra;
    o.cache = 0;
    /* Version 3: PCH options, bundled headers, numba_debug, NVVM modules
     * (never compiled for real below: they write files). */
    const char *xnames[2], *xsrcs[2];
    if (c[3] & 0x40) {
        o.pch = c[0] >> 5 & 1;
        o.create_pch = c[0] >> 6 & 1 ? next(&st) : NULL;
        o.use_pch = c[0] >> 7 ? next(&st) : NULL;
        o.pch_dir = c[1] & 1 ? next(&st) : NULL;
        o.pch_verbose = (int)(c[1] >> 1 & 3) - 1;   /* 2: refused */
        o.pch_messages = (int)(c[6] >> 1 & 3) - 1;
        o.instantiate_templates_in_pch = (int)(c[6] >> 3 & 3) - 1;
        o.use_bundled_headers = c[6] >> 5 & 1;
        o.numba_debug = c[6] >> 6 & 1;
        o.num_extra_sources = c[3] >> 7 ? 2 : 0;
        for (size_t i = 0; i < 2; i++) {
            xnames[i] = next(&st);
            xsrcs[i] = next(&st);
        }
        o.extra_source_names = xnames;
        o.extra_sources = xsrcs;
    }
    if (c[3] & 0x20)
        o.version = c[4];
    bool writes = o.pch || o.create_pch || o.use_bundled_headers;

    cuabi_code_type type = c[4] & 1 ? CUABI_CODE_PTX
                         : c[4] & 2 && c[3] & 0x40 ? CUABI_CODE_NVVM : CUABI_CODE_CUDA_CXX;
    /* The rendered list, into a buffer of a fuzzed size (too small: the size needed). */
    char rendered[512];
    size_t rsize = c[7] & 1 ? sizeof rendered : c[5] % sizeof rendered;
    (void)cuabi_program_options_render(rsize ? rendered : NULL, &rsize, type, &o);
    cuabi__compile_args a;
    cuabi_status st_args = cuabi__compile_args_build(&a, type, &o, "fuzz");
    if (st_args == CUABI_SUCCESS) {
        cuabi_program *p;
        if (cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "k.cu") == CUABI_SUCCESS) {
            cuabi__program *obj;
            cuabi__cache_key key;
            if (cuabi__handle_get(p, CUABI__T_PROGRAM, (void **)&obj, "fuzz") == CUABI_SUCCESS)
                (void)cuabi__program_key(&key, obj, &a);
            /* Rarely, compile for real (bounded NVRTC use). */
            if (type == CUABI_CODE_CUDA_CXX && !writes && c[5] == 0x5a && (c[6] & 1)) {
                cuabi_objcode *out = NULL;
                const char *log;
                if (cuabi_program_compile(&out, p, &o) == CUABI_SUCCESS)
                    cuabi_objcode_release(out);
                (void)cuabi_program_log(&log, p);
            }
            cuabi_program_release(p);
        }
        cuabi__compile_args_free(&a);
    }

    cuabi_linker_options l = CUABI_LINKER_OPTIONS_INIT;
    l.arch = c[5] & 1 ? NULL : next(&st);
    l.lto = c[5] >> 1 & 1;
    l.optimization = (int8_t)c[6] % 6;
    l.debug = c[5] >> 2 & 1;
    l.line_info = c[5] >> 3 & 1;
    l.ftz = (int)(c[5] >> 4 & 3) - 1;
    l.prec_div = (int)(c[7] & 3) - 1;
    l.prec_sqrt = (int)(c[7] >> 2 & 3) - 1;
    l.fma = (int)(c[7] >> 4 & 3) - 1;
    l.max_registers = (int8_t)c[6] * 2;
    l.verbose = c[7] >> 6 & 1;
    l.extra_options = extra;
    l.extra_option_count = c[7] >> 7 ? 2 : 0;
    l.cache = 0; /* through the cache nvJitLink would see the options only at completion */
    rsize = c[7] & 2 ? sizeof rendered : c[6] % sizeof rendered;
    (void)cuabi_linker_options_render(rsize ? rendered : NULL, &rsize, &l);
    cuabi_linker *lk = NULL;
    if (cuabi_linker_create(&lk, &l) == CUABI_SUCCESS) {
        const char *log;
        (void)cuabi_linker_info_log(&log, lk);
        cuabi_linker_destroy(lk);
    }
    free(st.buf);
    return 0;
}
