/* Fake peer and IPC entry points for CPU-only tests (issue 15). Builds on
 * fake_memory.h: "device" memory is host memory, so peer copies (also the
 * pitched 3-D ones) can be checked byte by byte. cuMemAlloc records its
 * allocations so cuMemGetAddressRange and the IPC handles work; an IPC
 * memory handle holds the allocation's address, an event handle the event's.
 * Opened mappings and events are counted to catch leaks.
 *
 * Pool IPC: pools remember their handle types; an exported pool is a memfd
 * holding the pool's token (so it survives SCM_RIGHTS and dup), an import
 * is a new pool token marked imported. Pool allocations are recorded like
 * cuMemAlloc's (cuMemGetAddressRange works on them); cuMemPoolExportPointer
 * data holds the address, and an imported pointer is freed with cuMemFree
 * without freeing the exporter's memory. fake_pool_imports counts live
 * imported pointers; fake_pool_order_errors counts exporter frees of memory
 * an importer had not freed yet (CUDA's rule: importers free first).
 *
 * Use after fake_driver_install() and fake_memory_install():
 * fake_multigpu_install(). */
#ifndef CUABI_FAKE_MULTIGPU_H
#define CUABI_FAKE_MULTIGPU_H

#include "fake_memory.h"

#include <sys/mman.h>
#include <unistd.h>

static int fake_peer_supported = 1;             /* 0: the pair cannot be peers */
static int fake_peer_enabled[FAKE_DEVICES][FAKE_DEVICES];
static CUmemAccess_flags fake_pool_access[FAKE_DEVICES];
static int fake_ipc_open_maps, fake_peer_copies, fake_3d_copies;
static int fake_pool_imports, fake_pool_order_errors, fake_pools_imported;
static size_t fake_last_pool_max_size;
static CUDA_MEMCPY3D_PEER fake_last_3d;

enum { FAKE_ALLOC_SLOTS = 64 };
/* pool: the exportable pool the memory came from (NULL: cuMemAlloc's) */
static struct { uintptr_t base; size_t size; void *pool; } fake_allocs[FAKE_ALLOC_SLOTS];

static int fake_ctx_device(void)
{
    return fake_current ? (int)((uintptr_t)fake_current - 0x1000) : -1;
}

static CUresult CUDAAPI fake_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags)
{
    int me = fake_ctx_device(), other = (int)((uintptr_t)peer - 0x1000);
    if (me < 0 || flags) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_peer_supported) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (fake_peer_enabled[me][other]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    fake_peer_enabled[me][other] = 1;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuCtxDisablePeerAccess(CUcontext peer)
{
    int me = fake_ctx_device(), other = (int)((uintptr_t)peer - 0x1000);
    if (me < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!fake_peer_enabled[me][other]) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    fake_peer_enabled[me][other] = 0;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuDeviceGetP2PAttribute(int *v, CUdevice_P2PAttribute a, CUdevice s,
                                                     CUdevice d)
{
    if (s == d) return CUDA_ERROR_INVALID_DEVICE;
    *v = a == CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ? 0 : fake_peer_supported;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s,
                                          CUcontext sc, size_t n)
{
    if (!dc || !sc) return CUDA_ERROR_INVALID_CONTEXT;
    fake_peer_copies++;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s,
                                               CUcontext sc, size_t n, CUstream st)
{
    fake_last_stream = st;
    return fake_cuMemcpyPeer(d, dc, s, sc, n);
}
static CUresult CUDAAPI fake_cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *c)
{
    if (!c->srcContext || !c->dstContext || c->srcPitch < c->WidthInBytes ||
        c->dstPitch < c->WidthInBytes || c->srcHeight < c->Height || c->dstHeight < c->Height)
        return CUDA_ERROR_INVALID_VALUE;
    fake_3d_copies++;
    fake_last_3d = *c;
    for (size_t z = 0; z < c->Depth; z++)
        for (size_t y = 0; y < c->Height; y++)
            memmove((char *)(uintptr_t)c->dstDevice + (z * c->dstHeight + y) * c->dstPitch,
                    (const char *)(uintptr_t)c->srcDevice + (z * c->srcHeight + y) * c->srcPitch,
                    c->WidthInBytes);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *c, CUstream st)
{
    fake_last_stream = st;
    return fake_cuMemcpy3DPeer(c);
}
static CUresult CUDAAPI fake_cuMemPoolSetAccess(CUmemoryPool p, const CUmemAccessDesc *m,
                                                size_t n)
{
    (void)p;
    if (n != 1 || m->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_peer_supported) return CUDA_ERROR_INVALID_DEVICE;
    fake_pool_access[m->location.id] = m->flags;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolGetAccess(CUmemAccess_flags *f, CUmemoryPool p,
                                                CUmemLocation *loc)
{
    (void)p;
    *f = fake_pool_access[loc->id];
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_mg_cuMemAlloc(CUdeviceptr *d, size_t n)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < FAKE_ALLOC_SLOTS; i++)
        if (!fake_allocs[i].base) {
            void *p = fake_alloc(n);
            fake_allocs[i].base = (uintptr_t)p;
            fake_allocs[i].size = n;
            fake_allocs[i].pool = NULL;
            *d = (CUdeviceptr)(uintptr_t)p;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}
static int fake_alloc_slot(uintptr_t p)
{
    for (int i = 0; i < FAKE_ALLOC_SLOTS; i++)
        if (fake_allocs[i].base && p >= fake_allocs[i].base &&
            p < fake_allocs[i].base + fake_allocs[i].size)
            return i;
    return -1;
}
static CUresult CUDAAPI fake_mg_cuMemFree(CUdeviceptr d)
{
    int i = fake_alloc_slot((uintptr_t)d);
    if (i >= 0 && fake_allocs[i].base == (uintptr_t)d)
        fake_allocs[i].base = 0;
    return fake_cuMemFree(d);
}
static CUresult CUDAAPI fake_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr d)
{
    int i = fake_alloc_slot((uintptr_t)d);
    if (i < 0) return CUDA_ERROR_NOT_FOUND;
    *base = (CUdeviceptr)fake_allocs[i].base;
    *size = fake_allocs[i].size;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr d)
{
    int i = fake_alloc_slot((uintptr_t)d);
    if (i < 0 || fake_allocs[i].base != (uintptr_t)d || fake_allocs[i].pool)
        return CUDA_ERROR_INVALID_VALUE;   /* pool memory: legacy IPC cannot share it */
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, "FAKEMEM", 8);
    memcpy(h->reserved + 8, &fake_allocs[i].base, sizeof(uintptr_t));
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuIpcOpenMemHandle(CUdeviceptr *d, CUipcMemHandle h, unsigned flags)
{
    uintptr_t p;
    if (!fake_current || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
    if (memcmp(h.reserved, "FAKEMEM", 8) != 0) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&p, h.reserved + 8, sizeof p);
    int i = fake_alloc_slot(p);
    if (i < 0 || fake_allocs[i].base != p) return CUDA_ERROR_INVALID_HANDLE;  /* freed: stale */
    fake_ipc_open_maps++;
    *d = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuIpcCloseMemHandle(CUdeviceptr d)
{
    (void)d;
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    fake_ipc_open_maps--;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e)
{
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, "FAKEEVT", 8);
    memcpy(h->reserved + 8, &e, sizeof e);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle h)
{
    if (memcmp(h.reserved, "FAKEEVT", 8) != 0) return CUDA_ERROR_INVALID_VALUE;
    return fake_cuEventCreate(e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
}

/* ------------------------------------------------------------ pool IPC */

/* Every live pool is on a list, as a driver holds its pools: a pool whose
 * destroy a test made fail is the driver's leak (test_faults counts it),
 * not one LeakSanitizer should report. */
typedef struct fake_pool {
    struct fake_pool *next;
    CUmemAllocationHandleType types;
    int imported;
    int shared;   /* exported to a shareable handle once: its pointers export (CUDA's rule) */
} fake_pool;
static fake_pool *fake_pools_all;

static fake_pool *fake_pool_new(CUmemAllocationHandleType types, int imported)
{
    fake_pool *fp = calloc(1, sizeof *fp);
    fp->types = types;
    fp->imported = imported;
    fp->next = fake_pools_all;
    fake_pools_all = fp;
    fake_live_pools++;
    return fp;
}
static CUresult CUDAAPI fake_ipc_cuMemPoolDestroy(CUmemoryPool p)
{
    for (fake_pool **link = &fake_pools_all; *link; link = &(*link)->next)
        if (*link == (fake_pool *)p) {
            *link = (*link)->next;
            free(p);
            fake_live_pools--;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

enum { FAKE_IMPORT_SLOTS = 64 };
static uintptr_t fake_imported_ptrs[FAKE_IMPORT_SLOTS];

static CUresult CUDAAPI fake_ipc_cuMemPoolCreate(CUmemoryPool *p, const CUmemPoolProps *props)
{
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    fake_last_pool_max_size = props->maxSize;
    *p = (CUmemoryPool)fake_pool_new(props->handleTypes, 0);
    return CUDA_SUCCESS;
}
static int fake_import_slot(uintptr_t p)
{
    for (int i = 0; i < FAKE_IMPORT_SLOTS; i++)
        if (fake_imported_ptrs[i] == p)
            return i;
    return -1;
}
static int fake_pool_exportable(CUmemoryPool p)
{
    for (int d = 0; d < FAKE_DEVICES; d++)
        if (p == (CUmemoryPool)&fake_default_pool_token[d])
            return 0;
    return ((fake_pool *)p)->types == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}
/* Memory of exportable pools is recorded where a slot is free (other fakes,
 * the graph's, free pool memory without this table: a slot whose address
 * comes back is stale and taken over). */
static CUresult CUDAAPI fake_ipc_cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, CUmemoryPool p,
                                                         CUstream s)
{
    CUresult r = fake_cuMemAllocFromPoolAsync(d, n, p, s);
    if (r != CUDA_SUCCESS || !fake_pool_exportable(p))
        return r;
    int slot = -1;
    for (int i = 0; i < FAKE_ALLOC_SLOTS; i++) {
        if (fake_allocs[i].base == (uintptr_t)*d)
            fake_allocs[i].base = 0;
        if (!fake_allocs[i].base && slot < 0)
            slot = i;
    }
    if (slot >= 0) {
        fake_allocs[slot].base = (uintptr_t)*d;
        fake_allocs[slot].size = n;
        fake_allocs[slot].pool = p;
    }
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_ipc_cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
    int i = fake_alloc_slot((uintptr_t)d);
    if (i >= 0 && fake_allocs[i].base == (uintptr_t)d)
        fake_allocs[i].base = 0;
    if (fake_import_slot((uintptr_t)d) >= 0)
        fake_pool_order_errors++;
    return fake_cuMemFreeAsync(d, s);
}
static CUresult CUDAAPI fake_ipc_cuMemFree(CUdeviceptr d)
{
    int i = fake_import_slot((uintptr_t)d);
    if (i >= 0) {   /* an importer's free: the exporter's memory stays */
        fake_imported_ptrs[i] = 0;
        fake_pool_imports--;
        return CUDA_SUCCESS;
    }
    return fake_mg_cuMemFree(d);
}
static CUresult CUDAAPI fake_cuMemPoolExportToShareableHandle(void *out, CUmemoryPool p,
                                                              CUmemAllocationHandleType t,
                                                              unsigned long long flags)
{
    fake_pool *fp = (fake_pool *)p;
    if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags || fp->types != t || fp->imported)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("fake-pool", MFD_CLOEXEC);
    if (fd < 0 || pwrite(fd, &p, sizeof p, 0) != (ssize_t)sizeof p) return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)out = fd;
    fp->shared = 1;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolImportFromShareableHandle(CUmemoryPool *out, void *handle,
                                                                CUmemAllocationHandleType t,
                                                                unsigned long long flags)
{
    CUmemoryPool src = NULL;
    if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags) return CUDA_ERROR_INVALID_VALUE;
    if (pread((int)(uintptr_t)handle, &src, sizeof src, 0) != (ssize_t)sizeof src || !src)
        return CUDA_ERROR_INVALID_VALUE;   /* not a pool's fd */
    fake_pools_imported++;
    *out = (CUmemoryPool)fake_pool_new(t, 1);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolExportPointer(CUmemPoolPtrExportData *data, CUdeviceptr d)
{
    int i = fake_alloc_slot((uintptr_t)d);
    if (i < 0 || fake_allocs[i].base != (uintptr_t)d) return CUDA_ERROR_INVALID_VALUE;
    /* the real driver exports pointers only "from an already shared memory
     * pool": one never exported to a shareable handle refuses (H100, 2026-11-26) */
    if (!fake_allocs[i].pool || !((fake_pool *)fake_allocs[i].pool)->shared)
        return CUDA_ERROR_INVALID_VALUE;
    memset(data, 0, sizeof *data);
    memcpy(data->reserved, "FAKEPOOL", 8);
    memcpy(data->reserved + 8, &d, sizeof d);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuMemPoolImportPointer(CUdeviceptr *d, CUmemoryPool p,
                                                    CUmemPoolPtrExportData *data)
{
    CUdeviceptr ptr;
    if (!fake_current || !((fake_pool *)p)->imported) return CUDA_ERROR_INVALID_VALUE;
    if (memcmp(data->reserved, "FAKEPOOL", 8) != 0) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&ptr, data->reserved + 8, sizeof ptr);
    int i = fake_alloc_slot((uintptr_t)ptr);
    if (i < 0 || fake_allocs[i].base != (uintptr_t)ptr) return CUDA_ERROR_INVALID_VALUE; /* freed */
    int slot = fake_import_slot(0);
    if (slot < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    fake_imported_ptrs[slot] = (uintptr_t)ptr;
    fake_pool_imports++;
    *d = ptr;
    return CUDA_SUCCESS;
}

static inline void fake_multigpu_install(void)
{
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuCtxEnablePeerAccess = fake_cuCtxEnablePeerAccess;
    d->cuCtxDisablePeerAccess = fake_cuCtxDisablePeerAccess;
    d->cuDeviceGetP2PAttribute = fake_cuDeviceGetP2PAttribute;
    d->cuMemcpyPeerAsync = fake_cuMemcpyPeerAsync;
    d->cuMemcpy3DPeerAsync = fake_cuMemcpy3DPeerAsync;
    d->cuMemPoolSetAccess = fake_cuMemPoolSetAccess;
    d->cuMemPoolGetAccess = fake_cuMemPoolGetAccess;
    d->cuMemAlloc = fake_mg_cuMemAlloc;
    d->cuMemFree = fake_mg_cuMemFree;
    d->cuMemGetAddressRange = fake_cuMemGetAddressRange;
    d->cuIpcGetMemHandle = fake_cuIpcGetMemHandle;
    d->cuIpcOpenMemHandle = fake_cuIpcOpenMemHandle;
    d->cuIpcCloseMemHandle = fake_cuIpcCloseMemHandle;
    d->cuIpcGetEventHandle = fake_cuIpcGetEventHandle;
    d->cuIpcOpenEventHandle = fake_cuIpcOpenEventHandle;
    d->cuMemPoolCreate = fake_ipc_cuMemPoolCreate;
    d->cuMemPoolDestroy = fake_ipc_cuMemPoolDestroy;
    d->cuMemAllocFromPoolAsync = fake_ipc_cuMemAllocFromPoolAsync;
    d->cuMemFreeAsync = fake_ipc_cuMemFreeAsync;
    d->cuMemFree = fake_ipc_cuMemFree;
    d->cuMemPoolExportToShareableHandle = fake_cuMemPoolExportToShareableHandle;
    d->cuMemPoolImportFromShareableHandle = fake_cuMemPoolImportFromShareableHandle;
    d->cuMemPoolExportPointer = fake_cuMemPoolExportPointer;
    d->cuMemPoolImportPointer = fake_cuMemPoolImportPointer;
    memset(fake_imported_ptrs, 0, sizeof fake_imported_ptrs);
    fake_pool_imports = fake_pool_order_errors = fake_pools_imported = 0;
    fake_peer_supported = 1;
    memset(fake_peer_enabled, 0, sizeof fake_peer_enabled);
    memset(fake_pool_access, 0, sizeof fake_pool_access);
    memset(fake_allocs, 0, sizeof fake_allocs);
    fake_ipc_open_maps = fake_peer_copies = fake_3d_copies = 0;
}

#endif
