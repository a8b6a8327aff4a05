/* A fake CUDA driver for CPU-only tests: enough of the entry points for
 * devices, streams and events to behave plausibly, so their code paths and
 * error paths run without a GPU. Streams and events are heap tokens, so a
 * missing destroy shows up as a leak under LeakSanitizer.
 *
 * Use: fake_driver_install(); ... cuabi__driver_install_fake(NULL) to undo.
 * Tests swap single entries of cuabi__driver_for_test() to inject failures. */
#ifndef CUABI_FAKE_DRIVER_H
#define CUABI_FAKE_DRIVER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/stream.h"
#include "runtime/event.h"

enum { FAKE_DEVICES = 2 };
static int fake_ctx_refs[FAKE_DEVICES];
static _Thread_local CUcontext fake_current;
static int fake_live_streams, fake_live_events;

typedef struct fake_stream { int priority; unsigned flags; } fake_stream;

static CUresult CUDAAPI fake_cuInit(unsigned int f) { (void)f; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuGetErrorName(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGetErrorString(CUresult r, const char **s)
{
    (void)r;
    *s = "fake driver error";
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceGetCount(int *n) { *n = FAKE_DEVICES; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuDeviceGet(CUdevice *d, int ord)
{
    if (ord < 0 || ord >= FAKE_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    *d = ord;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceGetName(char *name, int len, CUdevice d)
{
    snprintf(name, (size_t)len, "Fake GPU %d", d);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceGetUuid(CUuuid *u, CUdevice d)
{
    for (int i = 0; i < 16; i++) u->bytes[i] = (char)(i + d);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceGetPCIBusId(char *s, int len, CUdevice d)
{
    snprintf(s, (size_t)len, "0000:%02x:00.0", d + 1);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceTotalMem(size_t *b, CUdevice d)
{
    (void)d;
    *b = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    default: *v = 1; break;
    }
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceCanAccessPeer(int *v, CUdevice a, CUdevice b)
{
    *v = a != b;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    fake_ctx_refs[d]++;
    *c = (CUcontext)(uintptr_t)(0x1000 + d);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDevicePrimaryCtxRelease(CUdevice d)
{
    fake_ctx_refs[d]--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuCtxGetCurrent(CUcontext *c) { *c = fake_current; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuCtxSetCurrent(CUcontext c) { fake_current = c; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuCtxGetDevice(CUdevice *d)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    *d = (CUdevice)((uintptr_t)fake_current - 0x1000);   /* primary contexts only */
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuCtxSynchronize(void)
{
    return fake_current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
static CUresult CUDAAPI fake_cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    *least = 0;
    *greatest = -5;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemGetInfo(size_t *f, size_t *t)
{
    *f = (size_t)70 << 30;
    *t = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuStreamCreateWithPriority(CUstream *s, unsigned flags, int prio)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *fs = malloc(sizeof *fs);
    fs->priority = prio;
    fs->flags = flags;
    fake_live_streams++;
    *s = (CUstream)fs;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuStreamDestroy(CUstream s)
{
    free(s);
    fake_live_streams--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuStreamOk(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuStreamWaitEvent(CUstream s, CUevent e, unsigned f)
{
    (void)s; (void)e; (void)f;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuStreamGetPriority(CUstream s, int *p)
{
    *p = (uintptr_t)s <= 2 ? 0 : ((fake_stream *)s)->priority;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuEventCreate(CUevent *e, unsigned flags)
{
    (void)flags;
    *e = (CUevent)malloc(8);
    fake_live_events++;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuEventDestroy(CUevent e)
{
    free(e);
    fake_live_events--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuEventOk(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult CUDAAPI fake_cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    (void)a; (void)b;
    *ms = 1.5f;
    return CUDA_SUCCESS;
}

static inline void fake_driver_install(void)
{
    cuabi__driver d;
    memset(&d, 0, sizeof d);
    d.cuInit = fake_cuInit;
    d.cuDriverGetVersion = fake_cuDriverGetVersion;
    d.cuGetErrorName = fake_cuGetErrorName;
    d.cuGetErrorString = fake_cuGetErrorString;
    d.cuDeviceGetCount = fake_cuDeviceGetCount;
    d.cuDeviceGet = fake_cuDeviceGet;
    d.cuDeviceGetName = fake_cuDeviceGetName;
    d.cuDeviceGetUuid = fake_cuDeviceGetUuid;
    d.cuDeviceGetPCIBusId = fake_cuDeviceGetPCIBusId;
    d.cuDeviceTotalMem = fake_cuDeviceTotalMem;
    d.cuDeviceGetAttribute = fake_cuDeviceGetAttribute;
    d.cuDeviceCanAccessPeer = fake_cuDeviceCanAccessPeer;
    d.cuDevicePrimaryCtxRetain = fake_cuDevicePrimaryCtxRetain;
    d.cuDevicePrimaryCtxRelease = fake_cuDevicePrimaryCtxRelease;
    d.cuCtxGetCurrent = fake_cuCtxGetCurrent;
    d.cuCtxSetCurrent = fake_cuCtxSetCurrent;
    d.cuCtxGetDevice = fake_cuCtxGetDevice;
    d.cuCtxSynchronize = fake_cuCtxSynchronize;
    d.cuCtxGetStreamPriorityRange = fake_cuCtxGetStreamPriorityRange;
    d.cuMemGetInfo = fake_cuMemGetInfo;
    d.cuStreamCreateWithPriority = fake_cuStreamCreateWithPriority;
    d.cuStreamDestroy = fake_cuStreamDestroy;
    d.cuStreamSynchronize = fake_cuStreamOk;
    d.cuStreamQuery = fake_cuStreamOk;
    d.cuStreamWaitEvent = fake_cuStreamWaitEvent;
    d.cuStreamGetPriority = fake_cuStreamGetPriority;
    d.cuEventCreate = fake_cuEventCreate;
    d.cuEventDestroy = fake_cuEventDestroy;
    d.cuEventRecord = fake_cuEventRecord;
    d.cuEventSynchronize = fake_cuEventOk;
    d.cuEventQuery = fake_cuEventOk;
    d.cuEventElapsedTime = fake_cuEventElapsedTime;
    cuabi__driver_install_fake(&d);
}


/* ---- Libraries and kernels (added by the objcode area). A fake library
 * accepts any image starting with ELF magic or holding ".version"; a kernel
 * is found when its name appears in the image after ".entry " (PTX) or as a
 * NUL-terminated string (CUBIN string table). Kernels report 3 parameters of
 * 8 bytes. Install with fake_driver_install_libraries() after
 * fake_driver_install(). */
typedef struct fake_library { const char *image; size_t size; } fake_library;
typedef struct fake_kernel { char name[128]; } fake_kernel;
static int fake_live_libraries, fake_library_loads;
static fake_kernel fake_kernels[16];
static int fake_kernel_count;

static CUresult CUDAAPI fake_cuLibraryLoadData(CUlibrary *lib, const void *code,
                                               CUjit_option *jo, void **jv, unsigned nj,
                                               CUlibraryOption *lo, void **lv, unsigned nl)
{
    (void)lo; (void)lv; (void)nl;
    const char *c = code;
    if (memcmp(c, "\x7f" "ELF", 4) != 0 && !strstr(c, ".version")) {
        for (unsigned i = 0; i < nj; i++)
            if (jo[i] == CU_JIT_ERROR_LOG_BUFFER)
                snprintf(jv[i], 64, "fake JIT: not an image");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    fake_library *fl = malloc(sizeof *fl);
    fl->image = c;
    fl->size = 0;
    fake_live_libraries++;
    fake_library_loads++;
    *lib = (CUlibrary)fl;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuLibraryUnload(CUlibrary lib)
{
    free(lib);
    fake_live_libraries--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    const char *img = ((fake_library *)lib)->image;
    char pat[160];
    snprintf(pat, sizeof pat, ".entry %s(", name);
    bool found = strstr(img, pat) != NULL;
    if (!found && memcmp(img, "\x7f" "ELF", 4) == 0) {
        /* The image's extent: its section and program header tables end it
         * (cuabi only loads CUBINs it has parsed). */
        uint64_t shoff, phoff;
        uint16_t phentsize, phnum, shentsize, shnum;
        memcpy(&phoff, img + 32, 8); memcpy(&shoff, img + 40, 8);
        memcpy(&phentsize, img + 54, 2); memcpy(&phnum, img + 56, 2);
        memcpy(&shentsize, img + 58, 2); memcpy(&shnum, img + 60, 2);
        uint64_t end = shoff + (uint64_t)shentsize * shnum;
        if (phoff + (uint64_t)phentsize * phnum > end) end = phoff + (uint64_t)phentsize * phnum;
        found = memmem(img, end, name, strlen(name) + 1) != NULL;
    }
    if (!found)
        return CUDA_ERROR_NOT_FOUND;
    for (int i = 0; i < fake_kernel_count; i++)
        if (strcmp(fake_kernels[i].name, name) == 0) {
            *k = (CUkernel)&fake_kernels[i];
            return CUDA_SUCCESS;
        }
    if (fake_kernel_count == 16)
        return CUDA_ERROR_OUT_OF_MEMORY;
    snprintf(fake_kernels[fake_kernel_count].name, 128, "%s", name);
    *k = (CUkernel)&fake_kernels[fake_kernel_count++];
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuKernelGetFunction(CUfunction *f, CUkernel k)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    *f = (CUfunction)((char *)k + 1);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuKernelGetAttribute(int *v, CUfunction_attribute a, CUkernel k,
                                                  CUdevice d)
{
    (void)k; (void)d;
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 42 : (int)a * 10;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k,
                                                  CUdevice d)
{
    (void)a; (void)k; (void)d;
    return v < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
    (void)k;
    if (i >= 3) return CUDA_ERROR_INVALID_VALUE;
    *off = i * 8;
    *size = 8;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuKernelGetName(const char **name, CUkernel k)
{
    *name = ((fake_kernel *)k)->name;
    return CUDA_SUCCESS;
}

static inline void fake_driver_install_libraries(void)
{
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuLibraryLoadData = fake_cuLibraryLoadData;
    d->cuLibraryUnload = fake_cuLibraryUnload;
    d->cuLibraryGetKernel = fake_cuLibraryGetKernel;
    d->cuKernelGetFunction = fake_cuKernelGetFunction;
    d->cuKernelGetAttribute = fake_cuKernelGetAttribute;
    d->cuKernelSetAttribute = fake_cuKernelSetAttribute;
    d->cuKernelGetParamInfo = fake_cuKernelGetParamInfo;
    d->cuKernelGetName = fake_cuKernelGetName;
}


/* ---- TMA tensor maps and launches (added by the launchattrs area).
 * cuabi checks the TMA rules itself, so the fake encoder stays simple: it
 * refuses a descriptor that is not 64-byte aligned (as the driver
 * documents), records the last call's parameters, and writes a marker, the
 * address, the rank and the data type into the descriptor. The fake launch
 * entry points accept any function and count launches with attributes.
 * Install with fake_driver_install_tensormaps() / _launches() after
 * fake_driver_install(). */
typedef struct fake_tensormap_call {
    int kind;                       /* 1 tiled, 2 im2col, 3 replace */
    CUtensorMapDataType type;
    unsigned rank;
    void *address;
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5], estrides[5];
    int lower[3], upper[3];
    unsigned channels, pixels;
    int interleave, swizzle, l2, oob;
} fake_tensormap_call;
#define FAKE_TENSORMAP_MARK 0x7e45u
static fake_tensormap_call fake_tm_last;
static int fake_tm_calls;
static CUresult fake_tm_result = CUDA_SUCCESS;  /* returned by every tensor-map call */

static CUresult fake_tm_write(CUtensorMap *m, int kind, CUtensorMapDataType t, cuuint32_t rank,
                              void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                              const cuuint32_t *es, CUtensorMapInterleave il,
                              CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                              CUtensorMapFloatOOBfill oob)
{
    if ((uintptr_t)m % 64)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_tm_result != CUDA_SUCCESS)
        return fake_tm_result;
    fake_tm_calls++;
    memset(&fake_tm_last, 0, sizeof fake_tm_last);
    fake_tm_last.kind = kind;
    fake_tm_last.type = t;
    fake_tm_last.rank = rank;
    fake_tm_last.address = addr;
    for (cuuint32_t i = 0; i < rank && i < 5; i++) {
        fake_tm_last.dims[i] = dims[i];
        fake_tm_last.estrides[i] = es[i];
        if (i + 1 < rank)
            fake_tm_last.strides[i] = strides[i];
    }
    fake_tm_last.interleave = il;
    fake_tm_last.swizzle = sw;
    fake_tm_last.l2 = l2;
    fake_tm_last.oob = oob;
    memset(m, 0, sizeof *m);
    m->opaque[0] = FAKE_TENSORMAP_MARK;
    m->opaque[1] = (uintptr_t)addr;
    m->opaque[2] = rank;
    m->opaque[3] = (cuuint64_t)t;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t,
                                                    cuuint32_t rank, void *addr,
                                                    const cuuint64_t *dims,
                                                    const cuuint64_t *strides,
                                                    const cuuint32_t *box, const cuuint32_t *es,
                                                    CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                                    CUtensorMapL2promotion l2,
                                                    CUtensorMapFloatOOBfill oob)
{
    CUresult r = fake_tm_write(m, 1, t, rank, addr, dims, strides, es, il, sw, l2, oob);
    for (cuuint32_t i = 0; r == CUDA_SUCCESS && i < rank && i < 5; i++)
        fake_tm_last.box[i] = box[i];
    return r;
}
static CUresult CUDAAPI fake_cuTensorMapEncodeIm2col(CUtensorMap *m, CUtensorMapDataType t,
                                                     cuuint32_t rank, void *addr,
                                                     const cuuint64_t *dims,
                                                     const cuuint64_t *strides, const int *lower,
                                                     const int *upper, cuuint32_t channels,
                                                     cuuint32_t pixels, const cuuint32_t *es,
                                                     CUtensorMapInterleave il,
                                                     CUtensorMapSwizzle sw,
                                                     CUtensorMapL2promotion l2,
                                                     CUtensorMapFloatOOBfill oob)
{
    CUresult r = fake_tm_write(m, 2, t, rank, addr, dims, strides, es, il, sw, l2, oob);
    for (cuuint32_t i = 0; r == CUDA_SUCCESS && i + 2 < rank && i < 3; i++) {
        fake_tm_last.lower[i] = lower[i];
        fake_tm_last.upper[i] = upper[i];
    }
    fake_tm_last.channels = channels;
    fake_tm_last.pixels = pixels;
    return r;
}
static CUresult CUDAAPI fake_cuTensorMapReplaceAddress(CUtensorMap *m, void *addr)
{
    if ((uintptr_t)m % 64 || m->opaque[0] != FAKE_TENSORMAP_MARK)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_tm_result != CUDA_SUCCESS)
        return fake_tm_result;
    fake_tm_calls++;
    m->opaque[1] = (uintptr_t)addr;
    return CUDA_SUCCESS;
}

static inline void fake_driver_install_tensormaps(void)
{
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuTensorMapEncodeTiled = fake_cuTensorMapEncodeTiled;
    d->cuTensorMapEncodeIm2col = fake_cuTensorMapEncodeIm2col;
    d->cuTensorMapReplaceAddress = fake_cuTensorMapReplaceAddress;
    fake_tm_calls = 0;
    fake_tm_result = CUDA_SUCCESS;
}

static int fake_attr_launches;   /* launches that carried attributes */
static CUresult CUDAAPI fake_la_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)f;
    *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024
       : a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ? 48 * 1024 : 0;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_la_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f,
                                                 void **params, void **extra)
{
    (void)f; (void)params; (void)extra;
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->numAttrs) fake_attr_launches++;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_la_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                               unsigned gz, unsigned bx, unsigned by,
                                               unsigned bz, unsigned smem, CUstream s,
                                               void **params, void **extra)
{
    CUlaunchConfig c = { gx, gy, gz, bx, by, bz, smem, s, NULL, 0 };
    return fake_la_cuLaunchKernelEx(&c, f, params, extra);
}

static inline void fake_driver_install_launches(void)
{
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuFuncGetAttribute = fake_la_cuFuncGetAttribute;
    d->cuLaunchKernelEx = fake_la_cuLaunchKernelEx;
    d->cuLaunchKernel = fake_la_cuLaunchKernel;
    fake_attr_launches = 0;
}

#endif
