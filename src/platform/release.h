/* Release-path driver calls while a stream capture is in progress
 * (docs/RELIABILITY.md, "Threat model: threads, finalizers and captures").
 *
 * A release happens at any moment: a garbage collector's finalizer, a
 * handle dropped on another thread, while this thread or another one -- or
 * another library, torch's CUDA graphs -- captures a stream. A thread in
 * CU_STREAM_CAPTURE_MODE_GLOBAL (every thread's default) that makes a
 * "potentially unsafe" call while its own capture is not RELAXED, or while
 * any other thread has a GLOBAL capture in progress, gets the call refused
 * AND the captures invalidated. A thread in RELAXED mode "is not prohibited
 * from potentially unsafe API calls": the release calls below run with the
 * thread switched to RELAXED for the call (cuThreadExchangeStreamCaptureMode)
 * and back.
 *
 * THE list: the release-path entry points that may be unsafe during a
 * capture, each X(name). Probed on an H100 (driver 580.159.04, 2026-11-27):
 * with a GLOBAL capture in progress on another stream, each of cuMemFree,
 * cuMemFreeHost, cuMemHostUnregister, cuMemFreeAsync (on any stream, a
 * created one too), cuLibraryUnload, cuGraphExecDestroy and cuMemPoolDestroy
 * made by a GLOBAL-mode thread -- the capturing one or another -- was
 * refused and invalidated the capture, and went through in RELAXED mode;
 * cuEventDestroy, cuStreamDestroy, cuGraphDestroy and a primary context
 * release that is not the last were safe in either mode (not listed). The
 * probe could not reach cuGraphDestroyNode, a last primary context release
 * or cuIpcCloseMemHandle: listed to be safe. The virtual-memory releases
 * (issue 25: cuMemUnmap, cuMemRelease, cuMemAddressFree, cuMulticastUnbind)
 * are listed as frees are, unprobed: an H100 probe like the one above should
 * confirm that a GLOBAL-mode thread has them refused. Every release-path driver call goes through
 * CUABI__CU_RELEASE / CUABI__CU_RELEASE_IN, and only the entries listed
 * here pay for the mode exchange (two cheap driver calls, thread-local
 * state); the others cost nothing (the test folds at compile time). The hot
 * pool free (cuMemFreeAsync on a created stream) is on a list of its own:
 * relaxed in the default CUABI_RELEASE_CAPTURE_SAFE mode, not in
 * CUABI_RELEASE_FAST.
 * cuModuleUnload is not in the driver table (cuabi loads code with
 * cuLibraryLoadData only). A pool free on the legacy default stream while a
 * blocking stream is captured conflicts with the capture whatever the mode:
 * memory.c defers those (cuabi__resource_deallocate_general).
 * Arrays (issue 27): cuArrayDestroy and cuMipmappedArrayDestroy free device
 * memory as cuMemFree does, so they are listed as cuMemFree is; texture and
 * surface object destroys free no memory and are not. An H100 probe
 * (tests/runtime/probe_release_textures.c) is to confirm all four. */
#ifndef CUABI_PLATFORM_RELEASE_H
#define CUABI_PLATFORM_RELEASE_H

#include "platform/loader.h"

#define CUABI__CAPTURE_UNSAFE_RELEASES(X)                                      \
    X(cuMemFree) X(cuMemFreeHost) X(cuMemHostUnregister) X(cuLibraryUnload)    \
    X(cuGraphExecDestroy) X(cuGraphDestroyNode) X(cuMemPoolDestroy)            \
    X(cuDevicePrimaryCtxRelease) X(cuIpcCloseMemHandle)                      \
    X(cuArrayDestroy) X(cuMipmappedArrayDestroy)                              \
    X(cuMemUnmap) X(cuMemRelease) X(cuMemAddressFree) X(cuMulticastUnbind)

/* Unsafe too, but on the hot path: the pool free. Relaxed only while the
 * process is in CUABI_RELEASE_CAPTURE_SAFE mode (the default;
 * cuabi_release_mode_set), at the cost of one relaxed load otherwise. */
#define CUABI__CAPTURE_UNSAFE_HOT_RELEASES(X) X(cuMemFreeAsync)

/* Every driver entry point's index in the table (CUABI__DRIVER_FUNCS). */
enum {
#define CUABI__DRV_INDEX(name, ver) CUABI__DRV_I_##name,
    CUABI__DRIVER_FUNCS(CUABI__DRV_INDEX)
#undef CUABI__DRV_INDEX
    CUABI__DRV_COUNT
};

/* 1 for the entries of CUABI__CAPTURE_UNSAFE_RELEASES. Static and const in
 * every file: the compiler folds each call site's test, so an entry not on
 * the list (the hot pool free) costs nothing. */
static const unsigned char cuabi__release_unsafe[CUABI__DRV_COUNT] = {
#define CUABI__UNSAFE_ENTRY(name) [CUABI__DRV_I_##name] = 1,
#define CUABI__UNSAFE_HOT_ENTRY(name) [CUABI__DRV_I_##name] = 2,
    CUABI__CAPTURE_UNSAFE_RELEASES(CUABI__UNSAFE_ENTRY)
    CUABI__CAPTURE_UNSAFE_HOT_RELEASES(CUABI__UNSAFE_HOT_ENTRY)
#undef CUABI__UNSAFE_HOT_ENTRY
#undef CUABI__UNSAFE_ENTRY
};

/* The process's cuabi_release_mode (release.c): CUABI_RELEASE_FAST when
 * non-zero. The hot path reads it with one relaxed load
 * (cuabi__release_is_fast); every other call site of a hot entry runs it
 * RELAXED whatever the mode. */
extern _Atomic int cuabi__release_fast;
static inline bool cuabi__release_is_fast(void)
{
    return atomic_load_explicit(&cuabi__release_fast, memory_order_relaxed) != 0;
}

/* Around a listed call: switch this thread to RELAXED (once, however deep
 * releases nest: a graph's release drops kernels, whose object code
 * unloads) and back. Not listed, or a driver without the entry point:
 * nothing. `leave` passes the call's result through. */
void cuabi__release_enter_slow(const cuabi__driver *drv);
CUresult cuabi__release_leave_slow(const cuabi__driver *drv, CUresult r);
static inline void cuabi__release_enter(const cuabi__driver *drv, int entry)
{
    if (cuabi__release_unsafe[entry])
        cuabi__release_enter_slow(drv);
}
static inline CUresult cuabi__release_leave(const cuabi__driver *drv, int entry, CUresult r)
{
    return cuabi__release_unsafe[entry] ? cuabi__release_leave_slow(drv, r) : r;
}

/* A release-path call, returning its CUresult (CUABI__CU_RAW, fault
 * injection included): the caller checked that the entry point exists. The
 * comma operator orders enter, call, leave. */
#define CUABI__CU_RELEASE(drv, fn, ...)                                       \
    (cuabi__release_enter((drv), CUABI__DRV_I_##fn),                           \
     cuabi__release_leave((drv), CUABI__DRV_I_##fn, CUABI__CU_RAW(drv, fn, __VA_ARGS__)))

/* The same, as a status whose error names `caller` (CUABI__CU_IN). (fn is
 * pasted here, not passed on: an argument passed on is expanded first, and
 * cuda.h maps some names to versioned ones.) */
#define CUABI__CU_RELEASE_IN(caller, drv, fn, ...)                            \
    ((drv)->fn ? cuabi__cu_result((cuabi__release_enter((drv), CUABI__DRV_I_##fn), \
                                   cuabi__release_leave((drv), CUABI__DRV_I_##fn,  \
                                                        CUABI__CU_RAW(drv, fn, __VA_ARGS__))), \
                                  CUABI__FN_NAME(fn), (caller))                \
               : cuabi__missing_entry(CUABI__FN_NAME(fn), (caller)))

#endif
