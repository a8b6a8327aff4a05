/* What every nvJitLink session of the library shares (jitlink.h): result
 * names, logs and failure reports, and the one-input link that lowers PTX
 * or LTO-IR to a CUBIN for the objcode's offline queries and for fatbins
 * that carry only PTX. The linker (linker.c) keeps the sessions users see. */
#include "compile/jitlink.h"

#include <stdio.h>
#include <string.h>

#include "compile/code_type.h"

const char *cuabi__jitlink_result_name(nvJitLinkResult r)
{
    switch (r) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    default: return "nvJitLink error";
    }
}

/* A fresh copy of the error or info log ("" when empty), or NULL. */
char *cuabi__jitlink_log(const cuabi__nvjitlink *nvj, nvJitLinkHandle h, bool error)
{
    size_t n = 0;
    nvJitLinkResult r = error ? nvj->nvJitLinkGetErrorLogSize(h, &n)
                              : nvj->nvJitLinkGetInfoLogSize(h, &n);
    char *log = cuabi__calloc(1, (r == NVJITLINK_SUCCESS ? n : 0) + 1);
    if (log && r == NVJITLINK_SUCCESS && n > 0) {
        r = error ? nvj->nvJitLinkGetErrorLog(h, log) : nvj->nvJitLinkGetInfoLog(h, log);
        if (r != NVJITLINK_SUCCESS)
            log[0] = '\0';
        log[n] = '\0';
    }
    return log;
}

/* Record a failed nvJitLink call with its error log. */
cuabi_status cuabi__jitlink_fail(cuabi_status status, const cuabi__nvjitlink *nvj, nvJitLinkHandle h,
                         nvJitLinkResult r, const char *caller, const char *what)
{
    char *log = h ? cuabi__jitlink_log(nvj, h, true) : NULL;
    const char *l = log ? log : "";
    size_t len = strlen(l);
    while (len > 0 && (l[len - 1] == '\n' || l[len - 1] == ' '))
        len--;
    cuabi__error(status, "%s: %s failed with %s (%d)%s%.*s", caller, what, cuabi__jitlink_result_name(r),
                 (int)r, len ? ": " : "", (int)(len > 3000 ? 3000 : len), l);
    cuabi__error_set_nvjitlink((int)r);
    if (log)
        cuabi__error_set_log(log, strlen(log));
    cuabi__free(log);
    return status;
}

cuabi_status cuabi__link_to_cubin(void **cubin, size_t *size, cuabi_code_type type,
                                  const void *data, size_t data_size, const char *name,
                                  const char *arch, const char *caller)
{
    const cuabi__nvjitlink *nvj;
    *cubin = NULL;
    *size = 0;
    CUABI__TRY(cuabi__nvjitlink_get(&nvj));
    char archopt[32];
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    const char *opts[2] = { archopt, "-lto" };
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = nvj->nvJitLinkCreate(&h, type == CUABI_CODE_LTOIR ? 2 : 1, opts);
    if (r != NVJITLINK_SUCCESS)
        return cuabi__jitlink_fail(CUABI_ERROR_INVALID_ARGUMENT, nvj, h, r, caller, "nvJitLinkCreate");
    nvJitLinkInputType it = type == CUABI_CODE_LTOIR ? NVJITLINK_INPUT_LTOIR : NVJITLINK_INPUT_PTX;
    /* PTX is NUL-terminated one byte past the size (see objcode.h). */
    size_t n = type == CUABI_CODE_PTX ? data_size + 1 : data_size;
    cuabi_status st = CUABI_SUCCESS;
    r = nvj->nvJitLinkAddData(h, it, data, n, name);
    if (r == NVJITLINK_SUCCESS)
        r = nvj->nvJitLinkComplete(h);
    if (r == NVJITLINK_SUCCESS)
        r = nvj->nvJitLinkGetLinkedCubinSize(h, size);
    if (r == NVJITLINK_SUCCESS) {
        *cubin = cuabi__malloc(*size ? *size : 1);
        if (!*cubin)
            st = CUABI_ERROR_OUT_OF_MEMORY;
        else
            r = nvj->nvJitLinkGetLinkedCubin(h, *cubin);
    }
    if (st == CUABI_SUCCESS && r != NVJITLINK_SUCCESS) {
        char what[300];
        snprintf(what, sizeof what, "compiling %s %s for %s with nvJitLink",
                 cuabi__code_type_name(type), name, arch);
        st = cuabi__jitlink_fail(CUABI_ERROR_INVALID_IMAGE, nvj, h, r, caller, what);
    }
    if (st != CUABI_SUCCESS) {
        cuabi__free(*cubin);
        *cubin = NULL;
        *size = 0;
    }
    nvj->nvJitLinkDestroy(&h);
    return st;
}
