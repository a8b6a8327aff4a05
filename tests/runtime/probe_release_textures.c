/* Which of the texture module's release-path driver calls does a GLOBAL-mode
 * stream capture refuse (and is then invalidated by)? The probe behind
 * src/platform/release.h's entries for cuArrayDestroy and
 * cuMipmappedArrayDestroy (listed) and cuTexObjectDestroy and
 * cuSurfObjectDestroy (not listed). Not part of `make check`: run it by hand
 * on a GPU machine, from the repository root:
 *
 *   gcc -O1 -I/usr/local/cuda/include tests/runtime/probe_release_textures.c \
 *       -o /tmp/probe -lcuda -lpthread && /tmp/probe
 *
 * For each call and each of (capturing thread, GLOBAL), (another thread,
 * GLOBAL), (capturing thread, RELAXED): a GLOBAL capture begun on a created
 * stream with one memset in it, the object made before the capture, the
 * call made, then the call's result, the capture's status and
 * cuStreamEndCapture's result. A call that is refused or invalidates the
 * capture in GLOBAL mode but not in RELAXED mode belongs on the list. Last,
 * whether a stream memory operation (cuStreamWriteValue32) and an array
 * copy (cuMemcpy3DAsync) can be captured at all. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { CUresult r_ = (x); if (r_) { const char *n_; cuGetErrorName(r_, &n_); \
    printf("setup %s failed: %s (line %d)\n", #x, n_, __LINE__); exit(1); } } while (0)

static CUcontext ctx;
static CUstream cap;
static CUdeviceptr scratch;
static struct { CUarray a; CUmipmappedArray m; CUtexObject t; CUsurfObject s; } R;

static const char *const names[] = { "cuArrayDestroy", "cuMipmappedArrayDestroy",
                                     "cuTexObjectDestroy", "cuSurfObjectDestroy" };
enum { NCALLS = 4 };

static void make(int which)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = 64, d.Height = 64, d.Format = CU_AD_FORMAT_FLOAT, d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    memset(&R, 0, sizeof R);
    if (which == 1) {
        CK(cuMipmappedArrayCreate(&R.m, &d, 3));
        return;
    }
    CK(cuArray3DCreate(&R.a, &d));
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_ARRAY;
    res.res.array.hArray = R.a;
    if (which == 2) {
        CUDA_TEXTURE_DESC td;
        memset(&td, 0, sizeof td);
        td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
        CK(cuTexObjectCreate(&R.t, &res, &td, NULL));
    } else if (which == 3) {
        CK(cuSurfObjectCreate(&R.s, &res));
    }
}

static CUresult call(int which)
{
    switch (which) {
    case 0: return cuArrayDestroy(R.a);
    case 1: return cuMipmappedArrayDestroy(R.m);
    case 2: return cuTexObjectDestroy(R.t);
    default: return cuSurfObjectDestroy(R.s);
    }
}

typedef struct { int which, relaxed; CUresult r; } job;

static void *on_thread(void *p)
{
    job *j = p;
    cuCtxSetCurrent(ctx);
    CUstreamCaptureMode m = j->relaxed ? CU_STREAM_CAPTURE_MODE_RELAXED : CU_STREAM_CAPTURE_MODE_GLOBAL;
    cuThreadExchangeStreamCaptureMode(&m);
    j->r = call(j->which);
    cuThreadExchangeStreamCaptureMode(&m);
    return NULL;
}

static const char *name_of(CUresult r)
{
    const char *n = "?";
    cuGetErrorName(r, &n);
    return n;
}

int main(void)
{
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&scratch, 1 << 20));
    static const char *const modes[] = { "this thread, GLOBAL", "other thread, GLOBAL",
                                         "this thread, RELAXED" };
    printf("%-26s %-22s %-34s %-28s %s\n", "call", "mode", "result", "capture status", "end");
    for (int w = 0; w < NCALLS; w++)
        for (int mode = 0; mode < 3; mode++) {
            make(w);
            CK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
            CK(cuMemsetD8Async(scratch, 1, 256, cap));
            job j = { w, mode == 2, CUDA_SUCCESS };
            if (mode == 1) {
                pthread_t th;
                pthread_create(&th, NULL, on_thread, &j);
                pthread_join(th, NULL);
            } else {
                on_thread(&j);
            }
            CUstreamCaptureStatus st;
            CUresult qs = cuStreamIsCapturing(cap, &st);
            CUgraph g = NULL;
            CUresult er = cuStreamEndCapture(cap, &g);
            if (g) cuGraphDestroy(g);
            printf("%-26s %-22s %-34s %-28s %s\n", names[w], modes[mode], name_of(j.r),
                   qs ? name_of(qs) : st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "active"
                                    : st == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated"
                                                                                 : "none",
                   name_of(er));
            if (j.r != CUDA_SUCCESS) {
                CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
                cuThreadExchangeStreamCaptureMode(&m);
                call(w);                      /* really release it now */
                cuThreadExchangeStreamCaptureMode(&m);
            }
            if (w >= 2)
                cuArrayDestroy(R.a);          /* what the texture or surface read */
        }
    /* Stream memory operations and array copies inside a capture. */
    CUarray a;
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = 16, d.Height = 16, d.Format = CU_AD_FORMAT_FLOAT, d.NumChannels = 1;
    CK(cuArray3DCreate(&a, &d));
    CK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUresult wr = cuStreamWriteValue32(cap, scratch, 7, 0);
    CUresult wt = cuStreamWaitValue32(cap, scratch, 7, CU_STREAM_WAIT_VALUE_EQ);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = scratch, c.srcPitch = 64;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a;
    c.WidthInBytes = 64, c.Height = 16, c.Depth = 1;
    CUresult cp = cuMemcpy3DAsync(&c, cap);
    CUgraph g = NULL;
    CUresult er = cuStreamEndCapture(cap, &g);
    size_t n = 0;
    if (g) cuGraphGetNodes(g, NULL, &n);
    printf("captured write value: %s, wait value: %s, array copy: %s; end: %s, %zu nodes\n",
           name_of(wr), name_of(wt), name_of(cp), name_of(er), n);
    if (g) {
        CUgraphExec e;
        CUresult ir = cuGraphInstantiate(&e, g, 0);
        CUresult lr = ir ? ir : cuGraphLaunch(e, cap);
        CUresult sr = lr ? lr : cuStreamSynchronize(cap);
        printf("instantiate / launch / synchronize: %s\n", name_of(sr));
        if (!ir) cuGraphExecDestroy(e);
        cuGraphDestroy(g);
    }
    cuArrayDestroy(a);
    cuMemFree(scratch);
    cuStreamDestroy(cap);
    return 0;
}
