/* Library versions and what was loaded at run time. */
#include "platform/loader.h"
#include "platform/nccl_lib.h"
#include "platform/nvvm_lib.h"

CUABI_EXTERN(const char *) cuabi_version_string(void) { return CUABI_VERSION_STRING; }
CUABI_EXTERN(unsigned int) cuabi_version_hex(void) { return CUABI_VERSION_HEX; }
CUABI_EXTERN(unsigned int) cuabi_abi_version(void) { return CUABI_ABI_VERSION; }

static void fill_lib(cuabi_status st, const cuabi__lib_info *info, cuabi_status *status,
                     int *version, const char **path, const char **error)
{
    *status = st;
    *version = info->version;
    *path = info->path;
    *error = st == CUABI_SUCCESS ? "" : info->error;
}

/* Version 2's libraries. Only a caller that can see the answer pays for
 * loading them (libNVVM is ~60 MB); a version-1 struct ends before these
 * fields, so they are never written there. */
static void fill_v2(cuabi_runtime_info *out)
{
    const cuabi__nvvm *nvvm;
    const cuabi__nvfatbin *nvfatbin;
    cuabi_status v = cuabi__nvvm_get_for(&nvvm, "cuabi_runtime_info_get");
    cuabi_status f = cuabi__nvfatbin_get_for(&nvfatbin, "cuabi_runtime_info_get");
    fill_lib(v, cuabi__nvvm_info(), &out->nvvm_status, &out->nvvm_version, &out->nvvm_path,
             &out->nvvm_error);
    fill_lib(f, cuabi__nvfatbin_info(), &out->nvfatbin_status, &out->nvfatbin_version,
             &out->nvfatbin_path, &out->nvfatbin_error);
}

/* Version 3: NCCL, loaded only for a caller that sees the answer. */
static void fill_v3(cuabi_runtime_info *out)
{
    const cuabi__nccl *nccl;
    cuabi_status s = cuabi__nccl_get_for(&nccl, "cuabi_runtime_info_get");
    fill_lib(s, cuabi__nccl_info(), &out->nccl_status, &out->nccl_version, &out->nccl_path,
             &out->nccl_error);
}

CUABI_EXTERN(cuabi_status) cuabi_runtime_info_get(cuabi_runtime_info *out)
{
    CUABI__CHECK_OPTS(out, "cuabi_runtime_info", CUABI_RUNTIME_INFO_VERSION, false);
    const cuabi__driver *drv;
    const cuabi__nvrtc *nvrtc;
    const cuabi__nvjitlink *jit;
    /* Each failure is reported in the struct; the call itself succeeds. */
    cuabi_status d = cuabi__driver_get(&drv);
    cuabi_status n = cuabi__nvrtc_get(&nvrtc);
    cuabi_status j = cuabi__nvjitlink_get(&jit);
    out->library_version = CUABI_VERSION_STRING;
    out->abi_version = CUABI_ABI_VERSION;
    fill_lib(d, cuabi__driver_info(), &out->driver_status, &out->driver_version,
             &out->driver_path, &out->driver_error);
    fill_lib(n, cuabi__nvrtc_info(), &out->nvrtc_status, &out->nvrtc_version,
             &out->nvrtc_path, &out->nvrtc_error);
    fill_lib(j, cuabi__nvjitlink_info(), &out->nvjitlink_status,
             &out->nvjitlink_version, &out->nvjitlink_path, &out->nvjitlink_error);
    if (out->version >= 2)
        fill_v2(out);
    if (out->version >= 3)
        fill_v3(out);
    cuabi_error_clear();
    return CUABI_SUCCESS;
}
