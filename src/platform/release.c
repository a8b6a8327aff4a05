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
