/* Release-path driver calls and capture modes: see release.h. */
#include "platform/release.h"

/* This thread's releases in progress, and the mode to go back to once the
 * outermost is done (exchanged: whether the driver took the switch). */
static _Thread_local struct {
    int depth;
    bool exchanged;
    CUstreamCaptureMode saved;
} relaxed;

void cuabi__release_enter_slow(const cuabi__driver *drv)
{
    if (relaxed.depth++ > 0)
        return;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    relaxed.exchanged = drv->cuThreadExchangeStreamCaptureMode &&
                        drv->cuThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS;
    relaxed.saved = m;
}

CUresult cuabi__release_leave_slow(const cuabi__driver *drv, CUresult r)
{
    if (--relaxed.depth > 0 || !relaxed.exchanged)
        return r;
    CUstreamCaptureMode m = relaxed.saved;
    drv->cuThreadExchangeStreamCaptureMode(&m);
    relaxed.exchanged = false;
    return r;
}

/* ------------------------------------------------------------ the mode */

_Atomic int cuabi__release_fast; /* 0: CUABI_RELEASE_CAPTURE_SAFE, the default */

CUABI_EXTERN(cuabi_status) cuabi_release_mode_set(cuabi_release_mode mode)
{
    CUABI__CHECK_ARG(mode == CUABI_RELEASE_CAPTURE_SAFE || mode == CUABI_RELEASE_FAST,
                     "%s: mode %d is not a cuabi_release_mode (CUABI_RELEASE_CAPTURE_SAFE or "
                     "CUABI_RELEASE_FAST)", __func__, (int)mode);
    atomic_store_explicit(&cuabi__release_fast, mode == CUABI_RELEASE_FAST, memory_order_relaxed);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_release_mode_get(cuabi_release_mode *out)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = atomic_load_explicit(&cuabi__release_fast, memory_order_relaxed) ? CUABI_RELEASE_FAST
                                                                           : CUABI_RELEASE_CAPTURE_SAFE;
    return CUABI_SUCCESS;
}
