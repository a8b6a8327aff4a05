/* Helpers for the objcode/kernel/linker suites: compile CUDA C++ with NVRTC
 * directly (the program module is another area's) and read test data. */
#ifndef CUABI_OBJCODE_TESTUTIL_H
#define CUABI_OBJCODE_TESTUTIL_H

#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

/* Compile `src` with NVRTC; return the output of `kind` (PTX, CUBIN or
 * LTOIR) in a malloc'ed buffer (PTX: NUL-terminated, *size without it). */
static inline void *test_nvrtc(const char *src, const char **opts, int nopts,
                               cuabi_code_type kind, size_t *size)
{
    const cuabi__nvrtc *nv;
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    nvrtcProgram prog;
    ck_assert_int_eq(nv->nvrtcCreateProgram(&prog, src, "test.cu", 0, NULL, NULL), NVRTC_SUCCESS);
    nvrtcResult r = nv->nvrtcCompileProgram(prog, nopts, opts);
    if (r != NVRTC_SUCCESS) {
        size_t n;
        nv->nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        nv->nvrtcGetProgramLog(prog, log);
        ck_abort_msg("NVRTC failed: %s", log);
    }
    void *out = NULL;
    size_t n = 0;
    if (kind == CUABI_CODE_PTX) {
        nv->nvrtcGetPTXSize(prog, &n);
        out = malloc(n);
        nv->nvrtcGetPTX(prog, out);
        n = strlen(out);
    } else if (kind == CUABI_CODE_CUBIN) {
        nv->nvrtcGetCUBINSize(prog, &n);
        out = malloc(n);
        nv->nvrtcGetCUBIN(prog, out);
    } else {
        ck_assert_ptr_nonnull(nv->nvrtcGetLTOIRSize);
        nv->nvrtcGetLTOIRSize(prog, &n);
        out = malloc(n);
        nv->nvrtcGetLTOIR(prog, out);
    }
    nv->nvrtcDestroyProgram(&prog);
    *size = n;
    return out;
}

static inline char *test_data_path(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s", cuabi_test_srcdir(), name);
    return path;
}

#endif
