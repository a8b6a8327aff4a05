/* Lazy loading of the CUDA driver, NVRTC and nvJitLink.
 *
 * Nothing here is linked at build time: each library is dlopen()ed on first
 * use. Driver entry points are resolved one by one through cuGetProcAddress
 * at the CUDA version whose signature we use (the number in each X() entry,
 * matching PFN_<name>_v<version> in cudaTypedefs.h), so a driver that lacks
 * one entry point fails only the calls that need it.
 *
 * The tables are plain structs of function pointers so tests can swap
 * entries to inject failures (see cuabi__driver_for_test()).
 */
#ifndef CUABI_LOADER_H
#define CUABI_LOADER_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>
#include <nvJitLink.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "util/common.h"

/* Every driver entry point cuabi uses: X(name, cuda_version). Add new ones
 * here; the version picks the signature (PFN_<name>_v<version>). */
#define CUABI__DRIVER_FUNCS(X) \
    X(cuInit, 2000) X(cuDriverGetVersion, 2020) \
    X(cuGetErrorName, 6000) X(cuGetErrorString, 6000) \
    X(cuDeviceGet, 2000) X(cuDeviceGetCount, 2000) X(cuDeviceGetName, 2000) \
    X(cuDeviceGetUuid, 11040) X(cuDeviceGetAttribute, 2000) \
    X(cuDeviceTotalMem, 3020) X(cuDeviceGetPCIBusId, 4010) \
    X(cuDeviceCanAccessPeer, 4000) X(cuDeviceGetDefaultMemPool, 11020) \
    X(cuDevicePrimaryCtxRetain, 7000) X(cuDevicePrimaryCtxRelease, 11000) \
    X(cuCtxGetCurrent, 4000) X(cuCtxSetCurrent, 4000) X(cuCtxGetDevice, 2000) \
    X(cuCtxSynchronize, 2000) X(cuCtxGetStreamPriorityRange, 5050) \
    X(cuCtxPushCurrent, 4000) X(cuCtxPopCurrent, 4000) \
    X(cuMemGetInfo, 3020) \
    X(cuStreamCreateWithPriority, 5050) X(cuStreamDestroy, 4000) \
    X(cuStreamSynchronize, 2000) X(cuStreamQuery, 2000) \
    X(cuStreamWaitEvent, 3020) X(cuStreamGetPriority, 5050) \
    X(cuStreamGetFlags, 5050) X(cuStreamGetCtx, 9020) X(cuStreamGetId, 12000) \
    X(cuEventCreate, 2000) X(cuEventDestroy, 4000) X(cuEventRecord, 2000) \
    X(cuEventSynchronize, 2000) X(cuEventQuery, 2000) \
    X(cuEventElapsedTime, 2000) \
    X(cuMemAlloc, 3020) X(cuMemFree, 3020) \
    X(cuMemAllocAsync, 11020) X(cuMemFreeAsync, 11020) \
    X(cuMemAllocFromPoolAsync, 11020) X(cuMemPoolCreate, 11020) \
    X(cuMemPoolDestroy, 11020) X(cuMemPoolSetAttribute, 11020) \
    X(cuMemPoolGetAttribute, 11020) X(cuMemPoolTrimTo, 11020) \
    X(cuMemAllocHost, 3020) X(cuMemFreeHost, 2000) \
    X(cuMemHostRegister, 6050) X(cuMemHostUnregister, 4000) \
    X(cuMemAllocManaged, 6000) X(cuMemPrefetchAsync, 12020) \
    X(cuMemcpy, 4000) X(cuMemcpyAsync, 4000) \
    X(cuMemcpyHtoD, 3020) X(cuMemcpyDtoH, 3020) X(cuMemcpyDtoD, 3020) \
    X(cuMemcpyHtoDAsync, 3020) X(cuMemcpyDtoHAsync, 3020) \
    X(cuMemcpyDtoDAsync, 3020) \
    X(cuMemsetD8, 3020) X(cuMemsetD16, 3020) X(cuMemsetD32, 3020) \
    X(cuMemsetD8Async, 3020) X(cuMemsetD16Async, 3020) \
    X(cuMemsetD32Async, 3020) \
    X(cuPointerGetAttribute, 4000) X(cuPointerGetAttributes, 7000) \
    X(cuLibraryLoadData, 12000) X(cuLibraryLoadFromFile, 12000) \
    X(cuLibraryUnload, 12000) X(cuLibraryGetKernel, 12000) \
    X(cuLibraryGetKernelCount, 12040) X(cuLibraryEnumerateKernels, 12040) \
    X(cuLibraryGetModule, 12000) \
    X(cuKernelGetName, 12030) X(cuKernelGetAttribute, 12000) \
    X(cuKernelSetAttribute, 12000) X(cuKernelGetFunction, 12000) \
    X(cuKernelGetParamInfo, 12040) X(cuKernelGetLibrary, 12050) \
    X(cuModuleGetFunction, 2000) \
    X(cuFuncGetAttribute, 2020) X(cuFuncSetAttribute, 9000) \
    X(cuFuncGetName, 12030) X(cuFuncGetParamInfo, 12040) \
    X(cuLaunchKernel, 4000) X(cuLaunchKernelEx, 11060) \
    X(cuLaunchCooperativeKernel, 9000) \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000) \
    X(cuOccupancyMaxPotentialBlockSizeWithFlags, 7000) \
    X(cuOccupancyAvailableDynamicSMemPerBlock, 10020) \
    X(cuOccupancyMaxPotentialClusterSize, 11070) \
    X(cuOccupancyMaxActiveClusters, 11070) \
    /* launchattrs: TMA tensor maps */ \
    X(cuTensorMapEncodeTiled, 12000) X(cuTensorMapEncodeIm2col, 12000) \
    X(cuTensorMapReplaceAddress, 12000) \
    /* graphs (issue 14): capture, nodes, edges, executables */ \
    X(cuStreamBeginCapture, 10010) X(cuStreamEndCapture, 10000) \
    X(cuStreamGetCaptureInfo, 12030) X(cuStreamIsCapturing, 10000) \
    /* captures into a given graph, and nodes added at a capture's dependencies \
       (GraphBuilder's conditionals and embed): the 12.3 signatures with edge data */ \
    X(cuStreamBeginCaptureToGraph, 12030) X(cuStreamUpdateCaptureDependencies, 12030) \
    X(cuThreadExchangeStreamCaptureMode, 10010) \
    X(cuGraphCreate, 10000) X(cuGraphDestroy, 10000) \
    X(cuGraphGetNodes, 10000) X(cuGraphNodeGetType, 10000) X(cuGraphDestroyNode, 10000) \
    X(cuGraphNodeGetDependencies, 12030) X(cuGraphNodeGetDependentNodes, 12030) \
    X(cuGraphAddDependencies, 12030) X(cuGraphRemoveDependencies, 12030) \
    X(cuGraphAddKernelNode, 12000) X(cuGraphKernelNodeGetParams, 12000) \
    X(cuGraphKernelNodeSetParams, 12000) X(cuGraphKernelNodeSetAttribute, 11000) \
    X(cuGraphAddMemcpyNode, 10000) X(cuGraphAddMemsetNode, 10000) \
    X(cuGraphAddHostNode, 10000) X(cuGraphAddEmptyNode, 10000) \
    X(cuGraphAddEventRecordNode, 11010) X(cuGraphAddEventWaitNode, 11010) \
    X(cuGraphAddChildGraphNode, 10000) X(cuGraphAddNode, 12030) \
    X(cuGraphConditionalHandleCreate, 12030) \
    /* explicit graph memory nodes (cuda.core's GraphDefinition.allocate / deallocate) */ \
    X(cuGraphAddMemAllocNode, 11040) X(cuGraphAddMemFreeNode, 11040) \
    X(cuGraphMemAllocNodeGetParams, 11040) X(cuGraphMemFreeNodeGetParams, 11040) \
    X(cuGraphDebugDotPrint, 11030) \
    X(cuGraphInstantiateWithParams, 12000) X(cuGraphExecDestroy, 10000) \
    X(cuGraphLaunch, 10000) X(cuGraphUpload, 11010) \
    X(cuGraphExecUpdate, 12000) X(cuGraphExecKernelNodeSetParams, 12000) \
    X(cuLaunchHostFunc, 10000) \
    /* multigpu (issue 15): peers and IPC */ \
    X(cuCtxEnablePeerAccess, 4000) X(cuCtxDisablePeerAccess, 4000) \
    X(cuDeviceGetP2PAttribute, 8000) \
    X(cuMemcpyPeerAsync, 4000) X(cuMemcpy3DPeerAsync, 4000) \
    X(cuMemPoolSetAccess, 11020) X(cuMemPoolGetAccess, 11020) \
    X(cuMemGetAddressRange, 3020) \
    X(cuIpcGetMemHandle, 4010) X(cuIpcOpenMemHandle, 11000) X(cuIpcCloseMemHandle, 4010) \
    X(cuIpcGetEventHandle, 4010) X(cuIpcOpenEventHandle, 4010) \
    /* pool IPC: exportable pools and their pointers */ \
    X(cuMemPoolExportToShareableHandle, 11020) X(cuMemPoolImportFromShareableHandle, 11020) \
    X(cuMemPoolExportPointer, 11020) X(cuMemPoolImportPointer, 11020) \
    /* textures (issue 27): arrays, their copies, texture and surface objects, \
       stream memory operations (the _v2 ones: PFN_..._v11070) */ \
    X(cuArray3DCreate, 3020) X(cuArray3DGetDescriptor, 3020) X(cuArrayDestroy, 2000) \
    X(cuMipmappedArrayCreate, 5000) X(cuMipmappedArrayGetLevel, 5000) \
    X(cuMipmappedArrayDestroy, 5000) X(cuMemcpy3DAsync, 3020) \
    X(cuTexObjectCreate, 5000) X(cuTexObjectDestroy, 5000) \
    X(cuSurfObjectCreate, 5000) X(cuSurfObjectDestroy, 5000) \
    X(cuStreamWaitValue32, 11070) X(cuStreamWaitValue64, 11070) \
    X(cuStreamWriteValue32, 11070) X(cuStreamWriteValue64, 11070) \
    X(cuStreamBatchMemOp, 11070) \
    /* green contexts (issue 26): SM resources, splits, green contexts */ \
    X(cuDeviceGetDevResource, 12040) X(cuDevSmResourceSplitByCount, 12040) \
    X(cuDevResourceGenerateDesc, 12040) X(cuGreenCtxCreate, 12040) \
    X(cuGreenCtxDestroy, 12040) X(cuGreenCtxGetDevResource, 12040) \
    X(cuCtxFromGreenCtx, 12040) X(cuGreenCtxStreamCreate, 12050) \
    X(cuGreenCtxRecordEvent, 12040) X(cuGreenCtxWaitEvent, 12040) \
    /* checkpoint and restore (issue 26) */ \
    X(cuCheckpointProcessGetState, 12080) X(cuCheckpointProcessGetRestoreThreadId, 12080) \
    X(cuCheckpointProcessLock, 12080) X(cuCheckpointProcessCheckpoint, 12080) \
    X(cuCheckpointProcessRestore, 12080) X(cuCheckpointProcessUnlock, 12080) \
    /* memory (issue 25): virtual memory, pools at a location, managed \
     * memory, batched copies (the CUDA 13.0 signatures: a 12.8/12.9 \
     * driver's v1 is not resolved, and copies fall back), multicast */ \
    X(cuMemGetAllocationGranularity, 10020) \
    X(cuMemAddressReserve, 10020) X(cuMemAddressFree, 10020) \
    X(cuMemCreate, 10020) X(cuMemRelease, 10020) \
    X(cuMemMap, 10020) X(cuMemUnmap, 10020) \
    X(cuMemSetAccess, 10020) X(cuMemGetAccess, 10020) \
    X(cuMemExportToShareableHandle, 10020) X(cuMemImportFromShareableHandle, 10020) \
    X(cuDeviceGetMemPool, 11020) \
    X(cuMemGetMemPool, 13000) X(cuMemGetDefaultMemPool, 13000) \
    X(cuMemAdvise, 12020) \
    X(cuMemRangeGetAttribute, 8000) X(cuMemRangeGetAttributes, 8000) \
    X(cuMemDiscardBatchAsync, 13000) X(cuMemDiscardAndPrefetchBatchAsync, 13000) \
    X(cuMemPrefetchBatchAsync, 13000) \
    X(cuMemcpyBatchAsync, 13000) X(cuMemcpy3DBatchAsync, 13000) \
    X(cuMulticastCreate, 12010) X(cuMulticastAddDevice, 12010) \
    X(cuMulticastBindMem, 12010) X(cuMulticastBindAddr, 12010) \
    X(cuMulticastUnbind, 12010) X(cuMulticastGetGranularity, 12010)

#define CUABI__DRV_FIELD(name, ver) PFN_##name##_v##ver name;
typedef struct cuabi__driver {
    CUABI__DRIVER_FUNCS(CUABI__DRV_FIELD)
} cuabi__driver;
#undef CUABI__DRV_FIELD

/* NVRTC entry points: X(name, required). Optional ones may be NULL. */
#define CUABI__NVRTC_FUNCS(X) \
    X(nvrtcVersion, 1) X(nvrtcGetErrorString, 1) \
    X(nvrtcCreateProgram, 1) X(nvrtcDestroyProgram, 1) \
    X(nvrtcCompileProgram, 1) \
    X(nvrtcGetPTXSize, 1) X(nvrtcGetPTX, 1) \
    X(nvrtcGetCUBINSize, 1) X(nvrtcGetCUBIN, 1) \
    X(nvrtcGetLTOIRSize, 0) X(nvrtcGetLTOIR, 0) \
    X(nvrtcGetProgramLogSize, 1) X(nvrtcGetProgramLog, 1) \
    X(nvrtcAddNameExpression, 1) X(nvrtcGetLoweredName, 1) \
    X(nvrtcGetNumSupportedArchs, 0) X(nvrtcGetSupportedArchs, 0) \
    X(nvrtcGetPCHCreateStatus, 0) X(nvrtcGetPCHHeapSizeRequired, 0) \
    X(nvrtcSetPCHHeapSize, 0)

#define CUABI__NVRTC_FIELD(name, req) __typeof__(&name) name;
typedef struct cuabi__nvrtc {
    CUABI__NVRTC_FUNCS(CUABI__NVRTC_FIELD)
} cuabi__nvrtc;
#undef CUABI__NVRTC_FIELD

/* nvJitLink entry points. The header maps each name to a versioned symbol
 * (__nvJitLinkCreate_13_0); the library also exports the plain names, which
 * is what we resolve, falling back to the versioned ones. X(name, required) */
#define CUABI__NVJITLINK_FUNCS(X) \
    X(nvJitLinkCreate, 1) X(nvJitLinkDestroy, 1) X(nvJitLinkAddData, 1) \
    X(nvJitLinkAddFile, 1) X(nvJitLinkComplete, 1) \
    X(nvJitLinkGetLinkedCubinSize, 1) X(nvJitLinkGetLinkedCubin, 1) \
    X(nvJitLinkGetLinkedPtxSize, 1) X(nvJitLinkGetLinkedPtx, 1) \
    X(nvJitLinkGetErrorLogSize, 1) X(nvJitLinkGetErrorLog, 1) \
    X(nvJitLinkGetInfoLogSize, 1) X(nvJitLinkGetInfoLog, 1) \
    X(nvJitLinkVersion, 0)

#define CUABI__NVJITLINK_FIELD(name, req) __typeof__(&name) name;
typedef struct cuabi__nvjitlink {
    CUABI__NVJITLINK_FUNCS(CUABI__NVJITLINK_FIELD)
} cuabi__nvjitlink;
#undef CUABI__NVJITLINK_FIELD

/* Load (once) and return the table; on failure set the last error (status
 * CUABI_ERROR_DRIVER_NOT_FOUND / NO_DEVICE / NVRTC_NOT_FOUND /
 * NVJITLINK_NOT_FOUND) and return it. Thread-safe. */
cuabi_status cuabi__driver_get_for(const cuabi__driver **out, const char *caller);
cuabi_status cuabi__nvrtc_get_for(const cuabi__nvrtc **out, const char *caller);
cuabi_status cuabi__nvjitlink_get_for(const cuabi__nvjitlink **out, const char *caller);
/* The driver's table once it has loaded: cuabi__driver_get's fast path is
 * one acquire load and no call (it runs on every launch). */
extern cuabi__driver cuabi__drv;
extern _Atomic int cuabi__driver_ready;
static inline cuabi_status cuabi__driver_get_fast(const cuabi__driver **out, const char *caller)
{
    if (__builtin_expect(atomic_load_explicit(&cuabi__driver_ready, memory_order_acquire), 1)) {
        *out = &cuabi__drv;
        return CUABI_SUCCESS;
    }
    return cuabi__driver_get_for(out, caller);
}
/* The error message names the calling public function. */
#define cuabi__driver_get(out) cuabi__driver_get_fast((out), __func__)
#define cuabi__nvrtc_get(out) cuabi__nvrtc_get_for((out), __func__)
#define cuabi__nvjitlink_get(out) cuabi__nvjitlink_get_for((out), __func__)

/* Facts about what was loaded, for cuabi_runtime_info_get(). */
typedef struct cuabi__lib_info {
    int loaded;           /* 1 loaded, 0 not tried, -1 failed */
    char path[1024];      /* resolved file path of the loaded library */
    char error[2048];     /* why loading failed */
    int version;          /* driver: 13000 style; NVRTC/nvJitLink: major*1000+minor*10 */
} cuabi__lib_info;
const cuabi__lib_info *cuabi__driver_info(void);
const cuabi__lib_info *cuabi__nvrtc_info(void);
const cuabi__lib_info *cuabi__nvjitlink_info(void);
/* True once NVRTC / nvJitLink loaded successfully; never loads anything. */
bool cuabi__nvrtc_loaded(void);
bool cuabi__nvjitlink_loaded(void);
/* The files each loader tries, in order, after its environment override
 * (NULL-terminated); src/platform/libident.c resolves them the same way without
 * loading. */
extern const char *const cuabi__nvrtc_names[];
extern const char *const cuabi__nvjitlink_names[];

/* Error for an entry point the loaded driver does not have. */
cuabi_status cuabi__missing_entry(const char *entry, const char *caller);
/* Convert a CUresult from `entry` into a status + last error. */
cuabi_status cuabi__cu_check(CUresult r, const char *entry, const char *caller);

/* Success stays inline (no call on the hot path); failure is converted
 * out of line. */
static inline cuabi_status cuabi__cu_result(CUresult r, const char *entry, const char *caller)
{
    return __builtin_expect(r == CUDA_SUCCESS, 1) ? CUABI_SUCCESS
                                                  : cuabi__cu_check(r, entry, caller);
}

/* Call a driver entry point, converting failure into a status:
 *   cuabi_status st = CUABI__CU(drv, cuStreamSynchronize, s);           */
#define CUABI__CU(drv, fn, ...) CUABI__CU_IN(__func__, drv, fn, __VA_ARGS__)
/* The same, with the error naming `caller` (a public function's name). */
#define CUABI__CU_IN(caller, drv, fn, ...)                                    \
    (CUABI__UNLIKELY(atomic_load_explicit(&cuabi__faults_armed,                \
                                          memory_order_relaxed)) &&            \
             cuabi__fault_fires(CUABI__FN_NAME(fn))                            \
         ? cuabi__cu_check(cuabi__fault_result(), CUABI__FN_NAME(fn), (caller)) \
     : (drv)->fn ? cuabi__cu_result((drv)->fn(__VA_ARGS__), CUABI__FN_NAME(fn), \
                                    (caller))                                  \
                 : cuabi__missing_entry(CUABI__FN_NAME(fn), (caller)))
/* An entry point's name as the table knows it: cuda.h maps some names to
 * versioned ones (cuGraphAddKernelNode -> cuGraphAddKernelNode_v2); the
 * indirection expands the mapping, so every call path (CUABI__CU,
 * CUABI__CU_IN, CUABI__CU_RAW) reports the same name to fault injection. */
#define CUABI__FN_NAME(fn) #fn

/* The same for calls whose raw CUresult the caller inspects (or ignores, as
 * in destroy functions): returns the CUresult, with fault injection, and
 * expects the caller to have checked that the entry point exists. */
#define CUABI__CU_RAW(drv, fn, ...)                                           \
    (CUABI__UNLIKELY(atomic_load_explicit(&cuabi__faults_armed,                \
                                          memory_order_relaxed)) &&            \
             cuabi__fault_fires(CUABI__FN_NAME(fn))                            \
         ? cuabi__fault_result()                                               \
         : (drv)->fn(__VA_ARGS__))

/* Fault injection for tests (SQLite's method applied to CUDA): make the Nth
 * driver call made through CUABI__CU fail with `result` — only calls to
 * `entry` when it is not NULL — once, or every call from the Nth on when
 * `sticky`. n = 0 disarms. The check costs one relaxed load when disarmed.
 * cuabi__fault_count() returns how many faults fired since arming. */
extern _Atomic int cuabi__faults_armed;
void cuabi__fault_arm(const char *entry, long n, bool sticky, CUresult result);
bool cuabi__fault_fires(const char *entry);
CUresult cuabi__fault_result(void);
long cuabi__fault_count(void);

/* Testing: replace the driver table wholesale (marks the driver loaded) or
 * reach the live tables to swap entries. Pass NULL to forget a fake and
 * return to "not loaded". Not exported from the shared library. */
void cuabi__driver_install_fake(const cuabi__driver *fake);
cuabi__driver *cuabi__driver_for_test(void);
cuabi__nvrtc *cuabi__nvrtc_for_test(void);
cuabi__nvjitlink *cuabi__nvjitlink_for_test(void);

/* nvFatbin (fatbins, src/compile/fatbin.c). Not every toolkit ships nvFatbin.h, so
 * the entry points are declared here; results are nvFatbinResult values
 * (0 is NVFATBIN_SUCCESS). Loaded on first use like NVRTC; when it is
 * missing, src/compile/fatbin.c falls back to the `fatbinary` tool. */
typedef struct cuabi__nvfatbin_opaque *cuabi__nvfatbin_handle;
/* nvFatbin's entry points, all required: X(name, return type, parameters). */
#define CUABI__NVFATBIN_FUNCS(X)                                              \
    X(nvFatbinGetErrorString, const char *, (int result))                      \
    X(nvFatbinCreate, int, (cuabi__nvfatbin_handle *h, const char **options, size_t count)) \
    X(nvFatbinDestroy, int, (cuabi__nvfatbin_handle *h))                       \
    X(nvFatbinAddPTX, int, (cuabi__nvfatbin_handle h, const char *code, size_t size, \
                            const char *arch, const char *identifier, const char *options)) \
    X(nvFatbinAddCubin, int, (cuabi__nvfatbin_handle h, const void *code, size_t size, \
                              const char *arch, const char *identifier))       \
    X(nvFatbinAddLTOIR, int, (cuabi__nvfatbin_handle h, const void *code, size_t size, \
                              const char *arch, const char *identifier, const char *options)) \
    X(nvFatbinSize, int, (cuabi__nvfatbin_handle h, size_t *size))             \
    X(nvFatbinGet, int, (cuabi__nvfatbin_handle h, void *buffer))              \
    X(nvFatbinVersion, int, (unsigned int *major, unsigned int *minor))

#define CUABI__NVFATBIN_FIELD(name, ret, params) ret (*name) params;
typedef struct cuabi__nvfatbin {
    CUABI__NVFATBIN_FUNCS(CUABI__NVFATBIN_FIELD)
} cuabi__nvfatbin;
#undef CUABI__NVFATBIN_FIELD
/* CUABI_ERROR_NOT_SUPPORTED (which files were tried, and CUABI_NVFATBIN_PATH)
 * when it cannot be loaded. */
cuabi_status cuabi__nvfatbin_get_for(const cuabi__nvfatbin **out, const char *caller);
#define cuabi__nvfatbin_get(out) cuabi__nvfatbin_get_for((out), __func__)
const cuabi__lib_info *cuabi__nvfatbin_info(void);
extern const char *const cuabi__nvfatbin_names[];
/* Testing: install a fake table (NULL: forget it and everything loaded, so
 * the next use loads again, reading CUABI_NVFATBIN_PATH anew). Its version
 * is asked through the table, as a real load asks it. */
void cuabi__nvfatbin_install_fake(const cuabi__nvfatbin *fake);
/* Testing: the live table, to swap entries (tests/fixtures/fault_wrap.h). */
cuabi__nvfatbin *cuabi__nvfatbin_for_test(void);

#endif
