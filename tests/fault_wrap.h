/* Fault injection for NVRTC, nvJitLink, libNVVM and nvFatbin, the same way CUABI__CU does it
 * for the driver: every entry point of the loaded tables is replaced by a
 * wrapper that asks the loader's fault counter (cuabi__fault_fires) whether
 * this call fails, so cuabi__fault_arm(NULL or "nvrtcCompileProgram", n,
 * sticky, ...) counts driver, NVRTC and nvJitLink calls together.
 *
 * An injected failure returns NVRTC_ERROR_OUT_OF_MEMORY /
 * NVJITLINK_ERROR_INTERNAL / NVVM_ERROR_OUT_OF_MEMORY /
 * NVFATBIN_ERROR_INTERNAL without calling the library, except for the
 * destroy functions: they do their work and then report the failure (a
 * destroy that fails without destroying would be a leak of our making, not
 * the library's). nvrtcGetErrorString and the NVRTC/nvJitLink/libNVVM
 * version queries cannot fail and are not wrapped; nvFatbin's are (its
 * error string then comes back NULL, its version query fails), because
 * cuabi handles both answers.
 *
 * Usage: fault_wrap_install() once NVRTC/nvJitLink load, and
 * fault_wrap_install_nvfatbin() for nvFatbin (the real one, else the fake
 * of fatbin_testutil.h); every wrapped entry point is listed in
 * fault_wrap_entries[]. */
#ifndef CUABI_FAULT_WRAP_H
#define CUABI_FAULT_WRAP_H

#include "runtime/stream.h"
#include "runtime/event.h"
#include "compile/nvvm.h"
#include "fatbin_testutil.h"

static cuabi__nvrtc fw_nvrtc;         /* the real tables */
static cuabi__nvjitlink fw_nvjitlink;
static cuabi__nvvm fw_nvvm;
static cuabi__nvfatbin fw_nvfatbin;

static inline bool fw_fires(const char *name)
{
    return atomic_load_explicit(&cuabi__faults_armed, memory_order_relaxed) &&
           cuabi__fault_fires(name);
}

#define FW_NVRTC(name, params, args)                                          \
    static nvrtcResult fw_##name params                                        \
    {                                                                          \
        if (fw_fires(#name)) return NVRTC_ERROR_OUT_OF_MEMORY;                 \
        return fw_nvrtc.name args;                                             \
    }
#define FW_JL(name, params, args)                                             \
    static nvJitLinkResult fw_##name params                                    \
    {                                                                          \
        if (fw_fires(#name)) return NVJITLINK_ERROR_INTERNAL;                  \
        return fw_nvjitlink.name args;                                         \
    }

FW_NVRTC(nvrtcCreateProgram,
         (nvrtcProgram *p, const char *src, const char *name, int n, const char *const *h,
          const char *const *inc), (p, src, name, n, h, inc))
static nvrtcResult fw_nvrtcDestroyProgram(nvrtcProgram *p)
{
    nvrtcResult r = fw_nvrtc.nvrtcDestroyProgram(p);
    return fw_fires("nvrtcDestroyProgram") ? NVRTC_ERROR_OUT_OF_MEMORY : r;
}
FW_NVRTC(nvrtcCompileProgram, (nvrtcProgram p, int n, const char *const *o), (p, n, o))
FW_NVRTC(nvrtcGetPTXSize, (nvrtcProgram p, size_t *n), (p, n))
FW_NVRTC(nvrtcGetPTX, (nvrtcProgram p, char *s), (p, s))
FW_NVRTC(nvrtcGetCUBINSize, (nvrtcProgram p, size_t *n), (p, n))
FW_NVRTC(nvrtcGetCUBIN, (nvrtcProgram p, char *s), (p, s))
FW_NVRTC(nvrtcGetLTOIRSize, (nvrtcProgram p, size_t *n), (p, n))
FW_NVRTC(nvrtcGetLTOIR, (nvrtcProgram p, char *s), (p, s))
FW_NVRTC(nvrtcGetProgramLogSize, (nvrtcProgram p, size_t *n), (p, n))
FW_NVRTC(nvrtcGetProgramLog, (nvrtcProgram p, char *s), (p, s))
FW_NVRTC(nvrtcAddNameExpression, (nvrtcProgram p, const char *const e), (p, e))
FW_NVRTC(nvrtcGetLoweredName, (nvrtcProgram p, const char *const e, const char **l), (p, e, l))
FW_NVRTC(nvrtcGetNumSupportedArchs, (int *n), (n))
FW_NVRTC(nvrtcGetSupportedArchs, (int *a), (a))

FW_JL(nvJitLinkCreate, (nvJitLinkHandle *h, uint32_t n, const char **o), (h, n, o))
static nvJitLinkResult fw_nvJitLinkDestroy(nvJitLinkHandle *h)
{
    nvJitLinkResult r = fw_nvjitlink.nvJitLinkDestroy(h);
    return fw_fires("nvJitLinkDestroy") ? NVJITLINK_ERROR_INTERNAL : r;
}
FW_JL(nvJitLinkAddData,
      (nvJitLinkHandle h, nvJitLinkInputType t, const void *d, size_t n, const char *name),
      (h, t, d, n, name))
FW_JL(nvJitLinkAddFile, (nvJitLinkHandle h, nvJitLinkInputType t, const char *f), (h, t, f))
FW_JL(nvJitLinkComplete, (nvJitLinkHandle h), (h))
FW_JL(nvJitLinkGetLinkedCubinSize, (nvJitLinkHandle h, size_t *n), (h, n))
FW_JL(nvJitLinkGetLinkedCubin, (nvJitLinkHandle h, void *d), (h, d))
FW_JL(nvJitLinkGetLinkedPtxSize, (nvJitLinkHandle h, size_t *n), (h, n))
FW_JL(nvJitLinkGetLinkedPtx, (nvJitLinkHandle h, char *d), (h, d))
FW_JL(nvJitLinkGetErrorLogSize, (nvJitLinkHandle h, size_t *n), (h, n))
FW_JL(nvJitLinkGetErrorLog, (nvJitLinkHandle h, char *d), (h, d))
FW_JL(nvJitLinkGetInfoLogSize, (nvJitLinkHandle h, size_t *n), (h, n))
FW_JL(nvJitLinkGetInfoLog, (nvJitLinkHandle h, char *d), (h, d))

#define FW_NVVM(name, params, args)                                           \
    static cuabi__nvvm_result fw_##name params                                 \
    {                                                                          \
        if (fw_fires(#name)) return CUABI__NVVM_ERROR_OUT_OF_MEMORY;           \
        return fw_nvvm.name args;                                              \
    }

FW_NVVM(nvvmCreateProgram, (cuabi__nvvm_program *p), (p))
static cuabi__nvvm_result fw_nvvmDestroyProgram(cuabi__nvvm_program *p)
{
    cuabi__nvvm_result r = fw_nvvm.nvvmDestroyProgram(p);
    return fw_fires("nvvmDestroyProgram") ? CUABI__NVVM_ERROR_OUT_OF_MEMORY : r;
}
FW_NVVM(nvvmAddModuleToProgram,
        (cuabi__nvvm_program p, const char *b, size_t n, const char *name), (p, b, n, name))
FW_NVVM(nvvmLazyAddModuleToProgram,
        (cuabi__nvvm_program p, const char *b, size_t n, const char *name), (p, b, n, name))
FW_NVVM(nvvmCompileProgram, (cuabi__nvvm_program p, int n, const char **o), (p, n, o))
FW_NVVM(nvvmGetCompiledResultSize, (cuabi__nvvm_program p, size_t *n), (p, n))
FW_NVVM(nvvmGetCompiledResult, (cuabi__nvvm_program p, char *b), (p, b))
FW_NVVM(nvvmGetProgramLogSize, (cuabi__nvvm_program p, size_t *n), (p, n))
FW_NVVM(nvvmGetProgramLog, (cuabi__nvvm_program p, char *b), (p, b))

/* libNVVM is wrapped when it loads (it is optional: without it the NVVM
 * entry points are simply never reached). */
static inline void fault_wrap_install_nvvm(void)
{
    const cuabi__nvvm *nv;
    if (cuabi__nvvm_get(&nv) != CUABI_SUCCESS) {
        cuabi_error_clear();
        return;
    }
    cuabi__nvvm *t = cuabi__nvvm_for_test();
    if (t->nvvmCompileProgram == fw_nvvmCompileProgram)
        return;
    fw_nvvm = *t;
#define FW_SWAP(tab, name) if ((tab)->name) (tab)->name = fw_##name;
    FW_SWAP(t, nvvmCreateProgram) FW_SWAP(t, nvvmDestroyProgram)
    FW_SWAP(t, nvvmAddModuleToProgram) FW_SWAP(t, nvvmLazyAddModuleToProgram)
    FW_SWAP(t, nvvmCompileProgram) FW_SWAP(t, nvvmGetCompiledResultSize)
    FW_SWAP(t, nvvmGetCompiledResult) FW_SWAP(t, nvvmGetProgramLogSize)
    FW_SWAP(t, nvvmGetProgramLog)
#undef FW_SWAP
}

#define FW_NVFATBIN_ERROR_INTERNAL 1 /* nvFatbinResult */
#define FW_FB(name, params, args)                                             \
    static int fw_##name params                                                \
    {                                                                          \
        if (fw_fires(#name)) return FW_NVFATBIN_ERROR_INTERNAL;                \
        return fw_nvfatbin.name args;                                          \
    }

static const char *fw_nvFatbinGetErrorString(int r)
{
    return fw_fires("nvFatbinGetErrorString") ? NULL : fw_nvfatbin.nvFatbinGetErrorString(r);
}
FW_FB(nvFatbinCreate, (cuabi__nvfatbin_handle *h, const char **o, size_t n), (h, o, n))
static int fw_nvFatbinDestroy(cuabi__nvfatbin_handle *h)
{
    int r = fw_nvfatbin.nvFatbinDestroy(h);
    return fw_fires("nvFatbinDestroy") ? FW_NVFATBIN_ERROR_INTERNAL : r;
}
FW_FB(nvFatbinAddPTX,
      (cuabi__nvfatbin_handle h, const char *c, size_t n, const char *a, const char *i,
       const char *o), (h, c, n, a, i, o))
FW_FB(nvFatbinAddCubin,
      (cuabi__nvfatbin_handle h, const void *c, size_t n, const char *a, const char *i),
      (h, c, n, a, i))
FW_FB(nvFatbinAddLTOIR,
      (cuabi__nvfatbin_handle h, const void *c, size_t n, const char *a, const char *i,
       const char *o), (h, c, n, a, i, o))
FW_FB(nvFatbinSize, (cuabi__nvfatbin_handle h, size_t *n), (h, n))
FW_FB(nvFatbinGet, (cuabi__nvfatbin_handle h, void *b), (h, b))
FW_FB(nvFatbinVersion, (unsigned *major, unsigned *minor), (major, minor))

/* Wrap the entries of an nvFatbin table in place (idempotent): the live
 * one, or a fake's before cuabi__nvfatbin_install_fake() (whose version
 * query then goes through the wrapper). Entries a table lacks stay NULL. */
static inline void fault_wrap_nvfatbin_table(cuabi__nvfatbin *t)
{
    if (t->nvFatbinCreate == fw_nvFatbinCreate)
        return;
    fw_nvfatbin = *t;
#define FW_SWAP(name, ret, params) if (t->name) t->name = fw_##name;
    CUABI__NVFATBIN_FUNCS(FW_SWAP)
#undef FW_SWAP
}

/* nvFatbin wrapped for the fault loops: the one that loads here, else the
 * fake of fatbin_testutil.h, so every machine reaches its calls. */
static inline void fault_wrap_install_nvfatbin(void)
{
    const cuabi__nvfatbin *nf;
    if (cuabi__nvfatbin_get(&nf) != CUABI_SUCCESS) {
        cuabi_error_clear();
        install_fake_nvfatbin();
    }
    fault_wrap_nvfatbin_table(cuabi__nvfatbin_for_test());
}

/* Swap the wrappers in (idempotent). Returns false if either library is
 * missing. Optional entry points the library lacks stay NULL. */
static inline bool fault_wrap_install(void)
{
    const cuabi__nvrtc *nv;
    const cuabi__nvjitlink *jl;
    if (cuabi__nvrtc_get(&nv) != CUABI_SUCCESS || cuabi__nvjitlink_get(&jl) != CUABI_SUCCESS)
        return false;
    cuabi__nvrtc *t = cuabi__nvrtc_for_test();
    cuabi__nvjitlink *j = cuabi__nvjitlink_for_test();
    fault_wrap_install_nvvm();
    if (t->nvrtcCompileProgram == fw_nvrtcCompileProgram)
        return true;
    fw_nvrtc = *t;
    fw_nvjitlink = *j;
#define FW_SWAP(tab, name) if ((tab)->name) (tab)->name = fw_##name;
    FW_SWAP(t, nvrtcCreateProgram) FW_SWAP(t, nvrtcDestroyProgram)
    FW_SWAP(t, nvrtcCompileProgram) FW_SWAP(t, nvrtcGetPTXSize) FW_SWAP(t, nvrtcGetPTX)
    FW_SWAP(t, nvrtcGetCUBINSize) FW_SWAP(t, nvrtcGetCUBIN) FW_SWAP(t, nvrtcGetLTOIRSize)
    FW_SWAP(t, nvrtcGetLTOIR) FW_SWAP(t, nvrtcGetProgramLogSize) FW_SWAP(t, nvrtcGetProgramLog)
    FW_SWAP(t, nvrtcAddNameExpression) FW_SWAP(t, nvrtcGetLoweredName)
    FW_SWAP(t, nvrtcGetNumSupportedArchs) FW_SWAP(t, nvrtcGetSupportedArchs)
    FW_SWAP(j, nvJitLinkCreate) FW_SWAP(j, nvJitLinkDestroy) FW_SWAP(j, nvJitLinkAddData)
    FW_SWAP(j, nvJitLinkAddFile) FW_SWAP(j, nvJitLinkComplete)
    FW_SWAP(j, nvJitLinkGetLinkedCubinSize) FW_SWAP(j, nvJitLinkGetLinkedCubin)
    FW_SWAP(j, nvJitLinkGetLinkedPtxSize) FW_SWAP(j, nvJitLinkGetLinkedPtx)
    FW_SWAP(j, nvJitLinkGetErrorLogSize) FW_SWAP(j, nvJitLinkGetErrorLog)
    FW_SWAP(j, nvJitLinkGetInfoLogSize) FW_SWAP(j, nvJitLinkGetInfoLog)
#undef FW_SWAP
    return true;
}

/* Every entry point that can be made to fail: driver entries of the fake
 * driver the scenarios use, then the wrapped NVRTC, nvJitLink, libNVVM and
 * nvFatbin ones. */
/* Expanded first: cuda.h maps some names to versioned ones
 * (cuGraphAddKernelNode -> cuGraphAddKernelNode_v2), which is the name
 * CUABI__CU reports to the fault counter. */
#define FW_XSTR(name) #name
#define FW_STR(name, v) FW_XSTR(name),
#define FW_FB_STR(name, ret, params) #name,
static const char *const fault_wrap_entries[] = {
    CUABI__DRIVER_FUNCS(FW_STR)
    "nvrtcCreateProgram", "nvrtcDestroyProgram", "nvrtcCompileProgram",
    "nvrtcGetPTXSize", "nvrtcGetPTX", "nvrtcGetCUBINSize", "nvrtcGetCUBIN",
    "nvrtcGetLTOIRSize", "nvrtcGetLTOIR", "nvrtcGetProgramLogSize", "nvrtcGetProgramLog",
    "nvrtcAddNameExpression", "nvrtcGetLoweredName", "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
    "nvJitLinkCreate", "nvJitLinkDestroy", "nvJitLinkAddData", "nvJitLinkAddFile",
    "nvJitLinkComplete", "nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedCubin",
    "nvJitLinkGetLinkedPtxSize", "nvJitLinkGetLinkedPtx", "nvJitLinkGetErrorLogSize",
    "nvJitLinkGetErrorLog", "nvJitLinkGetInfoLogSize", "nvJitLinkGetInfoLog",
    "nvvmCreateProgram", "nvvmDestroyProgram", "nvvmAddModuleToProgram",
    "nvvmLazyAddModuleToProgram", "nvvmCompileProgram", "nvvmGetCompiledResultSize",
    "nvvmGetCompiledResult", "nvvmGetProgramLogSize", "nvvmGetProgramLog",
    CUABI__NVFATBIN_FUNCS(FW_FB_STR)
};
#undef FW_FB_STR
#undef FW_STR
#undef FW_XSTR
#define FAULT_WRAP_NUM_ENTRIES (sizeof fault_wrap_entries / sizeof *fault_wrap_entries)

#endif
