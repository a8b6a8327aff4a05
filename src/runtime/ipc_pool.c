/* Sharing device memory between processes through IPC-enabled memory pools.
 *
 * Legacy IPC (ipc.c) pays the driver's cuIpcOpenMemHandle for every buffer
 * (~27 us on an H100). A pool created with CU_MEM_HANDLE_TYPE_POSIX_FILE_
 * DESCRIPTOR is exported once as a file descriptor, mapped once by the
 * importer (cuMemPoolImportFromShareableHandle), and then each of its
 * buffers travels as 64 bytes of cuMemPoolExportPointer data that
 * cuMemPoolImportPointer opens in a few microseconds. The price is the file
 * descriptor, which only travels as one (SCM_RIGHTS: cuabi_ipc_fd_send /
 * _receive below, or Python's multiprocessing, which has its own channel).
 *
 * Descriptors use ipc.c's frame (CUABI_IPC_DESCRIPTOR_SIZE bytes, format 1)
 * with two kinds: CUABI_IPC_POOL (the pool's id, no handle: the fd is the
 * handle) and CUABI_IPC_POOL_MEMORY (the pool's id, the size, the export
 * data). The random pool id ties a buffer to the pool it must be imported
 * into: the driver's own answer to a buffer imported into the wrong pool is
 * not documented.
 *
 * The driver gives the same CUmemoryPool to every import of one pool in a
 * process, so destroying one import would break the others: a process-wide
 * registry keyed by pool id makes a second import return the live mapped
 * resource, and the pool is destroyed with the last resource using it. */
#include "platform/release.h"
#include "runtime/ipc.h"
#include "runtime/memory.h"
#include "util/checked.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IPC_FAIL(...) cuabi__error(CUABI_ERROR_IPC, __VA_ARGS__)

static cuabi_status too_small(size_t out_size, const char *caller)
{
    return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                        "%s: a descriptor needs CUABI_IPC_DESCRIPTOR_SIZE (%d) bytes, got %zu",
                        caller, CUABI_IPC_DESCRIPTOR_SIZE, out_size);
}

/* A nonzero id no other pool of any process is likely to have: 64 random
 * bits (the clock, the pid and a counter where getrandom fails, which only
 * seccomp filters or pre-3.17 kernels do). */
static uint64_t random_pool_id(void)
{
    static _Atomic uint64_t counter;
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
             ((uint64_t)getpid() << 40) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    }
    return id ? id : 1;
}

/* ------------------------------------------------------------ exporter */

/* cuMemPoolExportPointer works only "from an already shared memory pool":
 * until the pool was exported to a shareable handle once, it refuses every
 * pointer (CUDA_ERROR_INVALID_VALUE; seen on an H100, 2026-11-26, for
 * buffers exported before cuabi_ipc_pool_export). So the pool is shared
 * at creation, and the descriptor it gave is closed at once. */
static cuabi_status share_once(const cuabi__driver *drv, CUmemoryPool pool, const char *caller)
{
    int fd = -1;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemPoolExportToShareableHandle, &fd, pool,
                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_pool_create(cuabi_memory_resource **out,
                                                 cuabi_device *device,
                                                 const cuabi_ipc_pool_options *options)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    static const cuabi_ipc_pool_options defaults = CUABI_IPC_POOL_OPTIONS_INIT;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_OPTS(options, "cuabi_ipc_pool_options", CUABI_IPC_POOL_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    CUABI__CHECK_ARG(options->max_size <= SIZE_MAX, "%s: max_size %llu does not fit a size_t",
                     __func__, (unsigned long long)options->max_size);
    /* Version 1 callers pass a shorter struct: the location from version 2. */
    cuabi_location_type loc_type = options->version >= 2 ? options->location_type
                                                         : CUABI_LOCATION_DEVICE;
    int loc_id = options->version >= 2 ? options->location_id : 0;
    CUABI__TRY(cuabi__pool_location_check(loc_type, loc_id, true, __func__));
    CUABI__TRY_SCOPE(cuabi__gpu_resource_begin(&scope, out, device, &dev, &drv, __func__));
    CUuuid uuid;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuDeviceGetUuid, &uuid, dev->cu_device));
    CUmemoryPool pool;
    CUABI__TRY_SCOPE(cuabi__memory_pool_make(&pool, dev, drv, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                       loc_type, loc_id, (size_t)options->max_size,
                                       options->release_threshold, __func__));
    cuabi__memory_resource *r;
    cuabi_status st = share_once(drv, pool, __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__resource_pool_publish(out, &r, dev, drv, pool, CUABI__RES_POOL, true,
                                          random_pool_id(),
                                          loc_type == CUABI_LOCATION_HOST_NUMA
                                              ? CUABI_LOCATION_HOST_NUMA : CUABI_LOCATION_NONE,
                                          loc_id);
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuMemPoolDestroy, pool);
        CUABI__SCOPE_RETURN(st);
    }
    memcpy(r->ipc_uuid, uuid.bytes, 16);
    r->max_size = options->max_size;
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, MEMORY_RESOURCE, __func__);
}

/* An IPC pool of this process, else CUABI_ERROR_IPC saying what it is. */
static cuabi_status exporter_of(cuabi__memory_resource **r, cuabi_memory_resource *resource,
                                const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(resource, CUABI__T_MEMORY_RESOURCE, &obj, caller));
    *r = obj;
    if ((*r)->impl == CUABI__RES_IPC_MAPPED)
        return IPC_FAIL("%s: the pool was imported from another process; only its exporter "
                        "can export it", caller);
    if ((*r)->impl != CUABI__RES_POOL || !(*r)->ipc_pool_id)
        return IPC_FAIL("%s: the resource is not an IPC-enabled pool (make one with "
                        "cuabi_ipc_pool_create)", caller);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_pool_export(int *fd, uint8_t *out, size_t out_size,
                                                 cuabi_memory_resource *pool)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(fd, "%s: fd is NULL", __func__);
    *fd = -1;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__TRY(exporter_of(&r, pool, __func__));
    if (out_size < CUABI_IPC_DESCRIPTOR_SIZE)
        return too_small(out_size, __func__);
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, r->device, r->drv));
    int handle = -1;
    CUABI__TRY_SCOPE(CUABI__CU(r->drv, cuMemPoolExportToShareableHandle, &handle, r->pool,
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    cuabi__ipc_seal_pool(out, r->ipc_uuid, r->ipc_pool_id, r->location_type, r->location_id);
    *fd = handle;
    scope_st = CUABI_SUCCESS;
scope_leave:
    if (cuabi__context_end(&scope, scope_st) == CUABI_SUCCESS || scope_st != CUABI_SUCCESS)
        return scope_st;
    /* The restore failed after the export: the call fails, and a caller
     * that sees a failure has no fd to close. */
    close(*fd);
    *fd = -1;
    return cuabi__context_made_lost(__func__);
}

/* cuabi_ipc_buffer_export of a buffer allocated from an IPC pool. The
 * pool's resource knows its device UUID: the export is the one driver call.
 * The whole allocation is exported (a pool buffer is one). */
cuabi_status cuabi__ipc_pool_buffer_export(cuabi__context_scope *scope, uint8_t *out,
                                          cuabi__buffer *b, const char *caller)
{
    cuabi__memory_resource *r = b->res;
    CUABI__TRY(cuabi__device_enter(scope, r->device, r->drv));
    CUmemPoolPtrExportData data;
    if (!r->drv->cuMemPoolExportPointer)
        return cuabi__missing_entry("cuMemPoolExportPointer", caller);
    CUresult res = CUABI__CU_RAW(r->drv, cuMemPoolExportPointer, &data, (CUdeviceptr)b->ptr);
    if (res != CUDA_SUCCESS)
        return cuabi__ipc_driver_refused(res, "cuMemPoolExportPointer", caller);
    cuabi__ipc_seal(out, CUABI_IPC_POOL_MEMORY, r->ipc_uuid, b->size, r->ipc_pool_id,
                    data.reserved);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ registry */

/* One entry per pool mapped in this process. `res` is the resource the
 * next import may share (NULL, or dying, once its last reference went);
 * `users` counts the resources over the pool, which is destroyed with the
 * last. `pid` and `uuid` are the exporter and device of the descriptor it
 * was mapped from, and the pool's location (NONE: on that device): a later
 * descriptor with the same id must name them too. Guarded by
 * `registry_lock`, as is every import of a pool. */
typedef struct mapped_pool {
    struct mapped_pool *next;
    uint64_t id;
    CUmemoryPool pool;
    int users;
    cuabi__memory_resource *res;
    uint32_t pid;
    uint8_t uuid[16];
    cuabi_location_type loc_type;
    int loc_id;
} mapped_pool;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mapped_pool *registry;

static mapped_pool *registry_find(uint64_t id)
{
    for (mapped_pool *m = registry; m; m = m->next)
        if (m->id == id)
            return m;
    return NULL;
}

/* A reference to `r` unless its count already reached zero (it is being
 * destroyed and waits for registry_lock to say so). */
static bool retain_live(cuabi__memory_resource *r)
{
    int64_t n = atomic_load_explicit(&r->base.refs, memory_order_relaxed);
    while (n > 0)
        if (atomic_compare_exchange_weak_explicit(&r->base.refs, &n, n + 1,
                                                  memory_order_acq_rel, memory_order_relaxed))
            return true;
    return false;
}

/* A mapped pool's resource is going away (its before_destroy): forget the
 * pool when no other resource maps it. */
static void pool_unmap(cuabi__memory_resource *r)
{
    pthread_mutex_lock(&registry_lock);
    mapped_pool **link = &registry;
    while (*link && (*link)->id != r->ipc_pool_id)
        link = &(*link)->next;
    mapped_pool *m = *link;
    if (m) {
        if (m->res == r)
            m->res = NULL;
        if (--m->users == 0) {
            *link = m->next;
            if (r->drv->cuMemPoolDestroy)
                CUABI__CU_RELEASE(r->drv, cuMemPoolDestroy, m->pool);
            cuabi__free(m);
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ------------------------------------------------------------ importer */

/* The importing process needs read-write access to the pool's memory on
 * its device; the driver may grant it with the import already (the pool's
 * own device), so ask first. */
static cuabi_status grant_access(const cuabi__driver *drv, CUmemoryPool pool,
                                 const cuabi__device *dev, cuabi_location_type loc_type,
                                 int loc_id, const char *caller)
{
    char where[48];
    if (loc_type == CUABI_LOCATION_NONE)
        snprintf(where, sizeof where, "imported device");
    else
        cuabi__pool_location_text(where, sizeof where, loc_type, loc_id);
    return cuabi__pool_grant_device_access(drv, pool, dev, where, caller);
}

/* What an fd is, for messages. */
static const char *fd_kind(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return "not open";
    return S_ISREG(st.st_mode)    ? "a regular file"
           : S_ISFIFO(st.st_mode) ? "a pipe or FIFO"
           : S_ISSOCK(st.st_mode) ? "a socket"
           : S_ISCHR(st.st_mode)  ? "a character device"
           : S_ISDIR(st.st_mode)  ? "a directory"
           : S_ISBLK(st.st_mode)  ? "a block device"
                                  : "of another kind";
}

/* Import the pool behind `fd` and publish a mapped resource over it, as a
 * new registry entry; registry_lock is held. The driver answers an fd that
 * is no exported pool's with CUDA_ERROR_UNKNOWN (every kind tried: a pipe,
 * /dev/null, a regular file, a socket, a FIFO, an eventfd, a memfd, a
 * directory; H100, driver 580.159.04), which is a refusal here. */
static cuabi_status map_new(cuabi_memory_resource **out, cuabi__device *dev,
                            const cuabi__driver *drv, int fd, uint64_t id, uint32_t pid,
                            const uint8_t *uuid, cuabi_location_type loc_type, int loc_id,
                            const char *caller)
{
    if (!drv->cuMemPoolImportFromShareableHandle)
        return cuabi__missing_entry("cuMemPoolImportFromShareableHandle", caller);
    mapped_pool *m = cuabi__calloc(1, sizeof *m);
    if (!m)
        return CUABI_ERROR_OUT_OF_MEMORY;
    CUmemoryPool pool;
    CUresult res = CUABI__CU_RAW(drv, cuMemPoolImportFromShareableHandle, &pool,
                                 (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                 0);
    if (res != CUDA_SUCCESS) {
        cuabi__free(m);
        if (res != CUDA_ERROR_UNKNOWN && !cuabi__ipc_refusal(res))
            return cuabi__cu_check(res, "cuMemPoolImportFromShareableHandle", caller);
        cuabi_status st = IPC_FAIL("%s: cuMemPoolImportFromShareableHandle refused fd %d, %s "
                                   "(CUresult %d): not the fd of a pool exported by "
                                   "cuabi_ipc_pool_export, or forged", caller, fd, fd_kind(fd),
                                   (int)res);
        cuabi__error_set_cu((int)res);
        return st;
    }
    cuabi__memory_resource *r;
    cuabi_status st = grant_access(drv, pool, dev, loc_type, loc_id, caller);
    if (st == CUABI_SUCCESS)
        st = cuabi__resource_pool_publish(out, &r, dev, drv, pool, CUABI__RES_IPC_MAPPED, false,
                                          id, loc_type, loc_id);
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuMemPoolDestroy, pool);
        cuabi__free(m);
        return st;
    }
    memcpy(r->ipc_uuid, uuid, 16);
    r->before_destroy = pool_unmap;
    *m = (mapped_pool){ .next = registry, .id = id, .pool = pool, .users = 1, .res = r,
                        .pid = pid, .loc_type = loc_type, .loc_id = loc_id };
    memcpy(m->uuid, uuid, 16);
    registry = m;
    return CUABI_SUCCESS;
}

/* The pool is mapped here already: its live resource, or (while that one is
 * being destroyed) a new resource over the same driver pool. The
 * descriptor must come from the exporter and name the device the pool was
 * mapped from: the id alone is no proof (every descriptor of the pool
 * carries it), and the fd that comes with a second descriptor is not used. */
static cuabi_status map_again(cuabi_memory_resource **out, mapped_pool *m, cuabi__device *dev,
                              const cuabi__driver *drv, uint32_t pid, const uint8_t *uuid,
                              cuabi_location_type loc_type, int loc_id, const char *caller)
{
    if (pid != m->pid)
        return IPC_FAIL("%s: pool %016llx is mapped here already, from process %u; this "
                        "descriptor names another exporter (process %u): forged, or a pool id "
                        "collision", caller, (unsigned long long)m->id, (unsigned)m->pid,
                        (unsigned)pid);
    if (memcmp(uuid, m->uuid, 16) != 0)
        return IPC_FAIL("%s: pool %016llx is mapped here already, on another device than this "
                        "descriptor names: forged or corrupt", caller, (unsigned long long)m->id);
    if (loc_type != m->loc_type || loc_id != m->loc_id)
        return IPC_FAIL("%s: pool %016llx is mapped here already, at another location than "
                        "this descriptor names: forged or corrupt", caller,
                        (unsigned long long)m->id);
    if (m->res && retain_live(m->res)) {
        *out = CUABI__HANDLE(m->res, cuabi_memory_resource);
        return CUABI_SUCCESS;
    }
    cuabi__memory_resource *r;
    CUABI__TRY(cuabi__resource_pool_publish(out, &r, dev, drv, m->pool, CUABI__RES_IPC_MAPPED,
                                            false, m->id, m->loc_type, m->loc_id));
    memcpy(r->ipc_uuid, uuid, 16);
    r->before_destroy = pool_unmap;
    m->res = r;
    m->users++;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_pool_import(cuabi_memory_resource **out, int fd,
                                                 const uint8_t *descriptor, size_t size)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi_device *hdev = NULL;
    cuabi__device *dev;
    const cuabi__driver *drv;
    cuabi_location_type loc_type = CUABI_LOCATION_NONE;
    int loc_id = 0;
    cuabi_status st = cuabi__ipc_open_check(descriptor, size, CUABI_IPC_POOL, __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__ipc_pool_location(&loc_type, &loc_id, descriptor, __func__);
    /* A pool in host memory is no device's: the exporter's device, if this
     * process sees it, else this process's first. */
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (st == CUABI_SUCCESS)
        st = cuabi__ipc_open_device(&scope, &hdev, &dev, descriptor + CUABI__IPC_UUID,
                                    loc_type != CUABI_LOCATION_NONE, &drv, __func__);
    if (st == CUABI_SUCCESS && (fd < 0 || fcntl(fd, F_GETFD) == -1))
        st = IPC_FAIL("%s: %d is not an open file descriptor (the pool's descriptor must come "
                      "with the fd cuabi_ipc_pool_export gave, received in this process)",
                      __func__, fd);
    if (st == CUABI_SUCCESS) {
        uint64_t id = cuabi__ipc_get(descriptor + CUABI__IPC_POOL_ID, 8);
        uint32_t pid = (uint32_t)cuabi__ipc_get(descriptor + CUABI__IPC_PID, 4);
        const uint8_t *uuid = descriptor + CUABI__IPC_UUID;
        pthread_mutex_lock(&registry_lock);
        mapped_pool *m = registry_find(id);
        st = m ? map_again(out, m, dev, drv, pid, uuid, loc_type, loc_id, __func__)
               : map_new(out, dev, drv, fd, id, pid, uuid, loc_type, loc_id, __func__);
        pthread_mutex_unlock(&registry_lock);
    }
    if (hdev)
        cuabi__handle_release(hdev, CUABI__T_DEVICE);
    return CUABI__CONTEXT_END_OUT(&scope, st, out, MEMORY_RESOURCE, __func__);
}

/* ------------------------------------------- one import per export, shared
 *
 * The driver maps a pool pointer once per process. A second
 * cuMemPoolImportPointer of the same export while the first lives is
 * refused for a pinned (host) pool with CUDA_ERROR_ALREADY_MAPPED, and for a
 * device pool gives the same address, whose first cuMemFree unmaps it for
 * both (the second free: CUDA_ERROR_INVALID_VALUE) -- H200, driver
 * 580.159.04, 2026-11-28, scripts/probe_pool_reimport.c; cuda.core keeps a
 * cache for the same reason. A process may well import a buffer again while
 * its first import lives (a pickle received twice, a NumPy view that outlives
 * Buffer.close()), so buffers of one export share one import: the record
 * below, freed with its last buffer. After the free the export imports anew
 * (the driver allows it: the same probe). */
typedef struct shared_import {
    struct shared_import *next;
    cuabi__memory_resource *r;       /* a reference, dropped with the record */
    CUmemPoolPtrExportData key;
    CUdeviceptr ptr;
    size_t users;                    /* buffers on the import; imports_lock */
} shared_import;

enum { IMPORT_BUCKETS = 64 };
static shared_import *imports[IMPORT_BUCKETS];
/* Held across the driver's import and free of a shared pointer: a lookup
 * never finds a record whose import is being undone (the export would then be
 * imported anew while still mapped). Only IPC imports and their frees take it. */
static pthread_mutex_t imports_lock = PTHREAD_MUTEX_INITIALIZER;

static shared_import **import_slot(const cuabi__memory_resource *r,
                                   const CUmemPoolPtrExportData *key)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)r;     /* FNV-1a */
    for (size_t i = 0; i < sizeof key->reserved; i++)
        h = (h ^ key->reserved[i]) * 1099511628211ull;
    shared_import **at = &imports[h % IMPORT_BUCKETS];
    while (*at && ((*at)->r != r || memcmp(&(*at)->key, key, sizeof *key) != 0))
        at = &(*at)->next;
    return at;
}

/* The import of `key` in the mapped pool `r` (whose device is current), one
 * more buffer on it: the live one, or a new one from the driver. */
static cuabi_status import_acquire(shared_import **out, cuabi__memory_resource *r,
                                   const CUmemPoolPtrExportData *key, const char *caller)
{
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&imports_lock);
    shared_import **at = import_slot(r, key);
    shared_import *si = *at;
    if (si) {
        si->users++;
    } else {
        CUmemPoolPtrExportData data = *key;
        CUdeviceptr ptr;
        CUresult res = CUABI__CU_RAW(r->drv, cuMemPoolImportPointer, &ptr, r->pool, &data);
        if (res != CUDA_SUCCESS) {
            st = cuabi__ipc_driver_refused(res, "cuMemPoolImportPointer", caller);
        } else if (!(si = cuabi__calloc_in(1, sizeof *si, caller))) {
            CUABI__CU_RELEASE(r->drv, cuMemFree, ptr);
            st = CUABI_ERROR_OUT_OF_MEMORY;
        } else {
            cuabi__object_retain(&r->base);
            si->r = r;
            si->key = *key;
            si->ptr = ptr;
            si->users = 1;
            *at = si;
        }
    }
    pthread_mutex_unlock(&imports_lock);
    *out = si;
    return st;
}

/* One buffer fewer on the import; the last frees it (cuMemFree returns once
 * the free is done, which CUDA requires before the exporter's free), with
 * the device's context current for the call and the caller's given back,
 * then lets the mapped pool go. */
static void import_drop(shared_import *si)
{
    cuabi__memory_resource *r = si->r;
    pthread_mutex_lock(&imports_lock);
    bool last = --si->users == 0;
    if (last) {
        *import_slot(r, &si->key) = si->next;
        /* freed even when the switch is refused (a skipped free would leak it) */
        cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
        if (r->drv->cuMemFree) {
            (void)cuabi__device_enter(&scope, r->device, r->drv);
            CUABI__CU_RELEASE(r->drv, cuMemFree, si->ptr);
        }
        (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    }
    pthread_mutex_unlock(&imports_lock);
    if (last) {
        cuabi__free(si);
        cuabi__object_release(&r->base);
    }
}

/* An imported buffer's release. */
static void import_free(uintptr_t ptr, size_t size, void *payload)
{
    (void)ptr;
    (void)size;
    import_drop(payload);
}

/* The descriptor is a buffer of exactly this mapped pool. */
static cuabi_status check_pool_buffer(const cuabi__memory_resource *r, const uint8_t *d,
                                      size_t size, const char *caller)
{
    cuabi_ipc_kind kind;
    CUABI__TRY(cuabi__ipc_check_frame(&kind, d, size, caller));
    if (kind != CUABI_IPC_POOL_MEMORY)
        return IPC_FAIL("%s: the descriptor describes %s, not memory of an IPC pool%s", caller,
                        cuabi__ipc_kind_name(kind),
                        kind == CUABI_IPC_MEMORY ? " (import it with cuabi_ipc_buffer_import)" : "");
    uint64_t id = cuabi__ipc_get(d + CUABI__IPC_POOL_ID, 8);
    if (id != r->ipc_pool_id)
        return IPC_FAIL("%s: the buffer belongs to pool %016llx, not to this mapped pool "
                        "(%016llx): import that pool first", caller, (unsigned long long)id,
                        (unsigned long long)r->ipc_pool_id);
    if (cuabi__ipc_get(d + CUABI__IPC_SIZE, 8) == 0)
        return IPC_FAIL("%s: the descriptor's size is 0 (forged or corrupt)", caller);
    return CUABI_SUCCESS;
}

/* A forged size must not let the buffer reach past the imported allocation. */
static cuabi_status check_range(const cuabi__driver *drv, CUdeviceptr ptr, uint64_t size,
                                const char *caller)
{
    CUdeviceptr base;
    size_t range = 0;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuMemGetAddressRange, &base, &range, ptr));
    if (size > range - (size_t)(ptr - base))
        return IPC_FAIL("%s: the descriptor's size (%llu bytes) runs past the shared allocation "
                        "(%zu bytes): forged or corrupt", caller, (unsigned long long)size,
                        range);
    return CUABI_SUCCESS;
}

/* A mapped pool (the resource of `pool`), its device current, ready to
 * import buffers into. */
static cuabi_status mapped_of(cuabi__memory_resource **out, cuabi_memory_resource *pool,
                              const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(pool, CUABI__T_MEMORY_RESOURCE, &obj, caller));
    cuabi__memory_resource *r = obj;
    if (r->impl != CUABI__RES_IPC_MAPPED)
        return IPC_FAIL("%s: the resource is not a pool mapped from another process "
                        "(cuabi_ipc_pool_import)%s", caller,
                        r->ipc_pool_id ? "; this process exported the pool: use its buffers "
                                         "themselves" : "");
    if (!r->drv->cuMemPoolImportPointer || !r->drv->cuMemFree)
        return cuabi__missing_entry("cuMemPoolImportPointer", caller);
    *out = r;
    return CUABI_SUCCESS;
}

/* One buffer of the mapped pool `r` (whose device is current) from its
 * descriptor of `size` bytes: checked, imported, range-checked, wrapped. */
static cuabi_status import_one(cuabi_buffer **out, uintptr_t *address, cuabi__memory_resource *r,
                               const uint8_t *descriptor, size_t size, const char *caller)
{
    CUABI__TRY(check_pool_buffer(r, descriptor, size, caller));
    CUmemPoolPtrExportData key;
    memcpy(key.reserved, descriptor + CUABI__IPC_HANDLE, sizeof key.reserved);
    shared_import *si;
    CUABI__TRY(import_acquire(&si, r, &key, caller));
    /* Each buffer's size is its descriptor's, checked against the mapping. */
    uint64_t n = cuabi__ipc_get(descriptor + CUABI__IPC_SIZE, 8);
    cuabi_status st = check_range(r->drv, si->ptr, n, caller);
    if (st == CUABI_SUCCESS) {
        st = cuabi_buffer_wrap(out, CUABI__HANDLE(r->device, cuabi_device), r->kind,
                               (uintptr_t)si->ptr, (size_t)n, import_free, si);
        if (st == CUABI_SUCCESS) {
            *address = (uintptr_t)si->ptr;
            return CUABI_SUCCESS;
        }
    }
    import_drop(si);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_pool_buffer_import(cuabi_buffer **out,
                                                        cuabi_memory_resource *pool,
                                                        const uint8_t *descriptor, size_t size)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    uintptr_t address;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY(mapped_of(&r, pool, __func__));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, r->device, r->drv));
    scope_st = import_one(out, &address, r, descriptor, size, __func__);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, BUFFER, __func__);
}

/* ------------------------------------------------------------- batches */

/* The descriptors of `count` buffers, `count` times CUABI_IPC_DESCRIPTOR_SIZE
 * bytes: checked against `size` before anything is written or read. */
static cuabi_status batch_size(size_t count, size_t size, const char *what, const char *caller)
{
    size_t need;
    CUABI__CHECK_ARG(count >= 1 && count <= CUABI__IPC_BATCH_MAX,
                     "%s: count must be 1 to %d (got %zu)", caller, CUABI__IPC_BATCH_MAX, count);
    if (!cuabi__size_mul(&need, count, CUABI_IPC_DESCRIPTOR_SIZE))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: count %zu overflows", caller,
                            count);
    if (size < need)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL, "%s: %zu descriptors need %zu bytes "
                            "(CUABI_IPC_DESCRIPTOR_SIZE each), %s has %zu", caller, count, need,
                            what, size);
    if (size != need)
        return IPC_FAIL("%s: %zu descriptors are %zu bytes, %s has %zu: truncated, padded or "
                        "forged", caller, count, need, what, size);
    return CUABI_SUCCESS;
}

/* The first `n` buffers of a batch import released and cleared. */
static void release_imports(cuabi_buffer **out, uint64_t *addresses, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        cuabi__handle_release(out[j], CUABI__T_BUFFER);
        out[j] = NULL;
        if (addresses)
            addresses[j] = 0;
    }
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_pool_buffers_import(cuabi_buffer **out, uint64_t *addresses,
                                                         cuabi_memory_resource *pool,
                                                         const uint8_t *descriptors, size_t size,
                                                         size_t count)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(count >= 1 && count <= CUABI__IPC_BATCH_MAX,
                     "%s: count must be 1 to %d (got %zu)", __func__, CUABI__IPC_BATCH_MAX, count);
    memset(out, 0, count * sizeof *out);
    if (addresses)
        memset(addresses, 0, count * sizeof *addresses);
    CUABI__CHECK_ARG(descriptors, "%s: descriptors is NULL", __func__);
    CUABI__TRY(batch_size(count, size, "descriptors", __func__));
    CUABI__TRY(mapped_of(&r, pool, __func__));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, r->device, r->drv));
    for (size_t i = 0; i < count; i++) {
        uintptr_t address;
        cuabi_status st = import_one(&out[i], &address, r,
                                     descriptors + i * CUABI_IPC_DESCRIPTOR_SIZE,
                                     CUABI_IPC_DESCRIPTOR_SIZE, __func__);
        if (st != CUABI_SUCCESS) {
            cuabi__ipc_batch_error(st, "descriptors", i, __func__);
            /* All or nothing: the buffers imported so far are freed again
             * (their imports unmapped, the pool's references dropped). The
             * error record is the failure's, not the releases'. */
            release_imports(out, addresses, i);
            CUABI__SCOPE_RETURN(st);
        }
        if (addresses)
            addresses[i] = address;
    }
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    if (cuabi__context_end(&scope, scope_st) == CUABI_SUCCESS || scope_st != CUABI_SUCCESS)
        return scope_st;
    /* A failed restore fails the call: all or nothing, as above. */
    release_imports(out, addresses, count);
    return cuabi__context_made_lost(__func__);
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_pool_info(cuabi_ipc_pool_role *role, uint64_t *pool_id,
                                               cuabi_memory_resource *resource)
{
    cuabi__memory_resource *r;
    CUABI__CHECK_ARG(role && pool_id, "%s: role or pool_id is NULL", __func__);
    CUABI__GET(r, resource, MEMORY_RESOURCE);
    *role = r->impl == CUABI__RES_IPC_MAPPED          ? CUABI_IPC_POOL_MAPPED
            : r->impl == CUABI__RES_POOL && r->ipc_pool_id ? CUABI_IPC_POOL_EXPORTER
                                                           : CUABI_IPC_POOL_NONE;
    *pool_id = *role == CUABI_IPC_POOL_NONE ? 0 : r->ipc_pool_id;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------- fds over unix sockets */

enum { FD_MESSAGE_MAX = 4096 };

CUABI_EXTERN(cuabi_status) cuabi_ipc_fd_send(int socket, int fd, const uint8_t *data, size_t size)
{
    CUABI__CHECK_ARG(data && size > 0 && size <= FD_MESSAGE_MAX,
                     "%s: data must hold 1 to %d bytes (got %zu%s)", __func__, FD_MESSAGE_MAX,
                     size, data ? "" : ", NULL");
    CUABI__CHECK_ARG(fd >= 0, "%s: fd %d is not a file descriptor", __func__, fd);
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = (void *)data, .iov_len = size };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                          .msg_controllen = sizeof ctl.buf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t n;
    do
        n = sendmsg(socket, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return cuabi__error(CUABI_ERROR_IO, "%s: sendmsg on socket %d: %s", __func__, socket,
                            strerror(errno));
    if ((size_t)n != size)   /* a stream socket took part of it: the peer cannot frame it */
        return cuabi__error(CUABI_ERROR_IO, "%s: the socket took %zd of %zu bytes", __func__, n,
                            size);
    return CUABI_SUCCESS;
}

/* Close every descriptor a received message carried. */
static void close_received(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            close(fd);
        }
    }
}

/* The one descriptor of a well-formed message, else -1. */
static int single_fd(struct msghdr *msg)
{
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    if (!c || CMSG_NXTHDR(msg, c) || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(sizeof(int)) || (msg->msg_flags & MSG_CTRUNC))
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_fd_receive(int *fd, uint8_t *data, size_t size, int socket)
{
    CUABI__CHECK_ARG(fd, "%s: fd is NULL", __func__);
    *fd = -1;
    CUABI__CHECK_ARG(data && size > 0 && size <= FD_MESSAGE_MAX,
                     "%s: data must have room for 1 to %d bytes (got %zu%s)", __func__,
                     FD_MESSAGE_MAX, size, data ? "" : ", NULL");
    /* Room for a few descriptors, so that extra ones arrive and are closed
     * rather than being cut off (MSG_CTRUNC), and one byte more than
     * expected, so that a longer message is told apart. */
    union { struct cmsghdr h; char buf[CMSG_SPACE(4 * sizeof(int))]; } ctl;
    uint8_t extra;
    struct iovec iov[2] = { { .iov_base = data, .iov_len = size },
                            { .iov_base = &extra, .iov_len = 1 } };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.buf,
                          .msg_controllen = sizeof ctl.buf };
    ssize_t n;
    do
        n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return cuabi__error(CUABI_ERROR_IO, "%s: no message arrived on socket %d (it is "
                            "non-blocking, or its receive timeout SO_RCVTIMEO passed)", __func__,
                            socket);
    if (n < 0)
        return cuabi__error(CUABI_ERROR_IO, "%s: recvmsg on socket %d: %s", __func__, socket,
                            strerror(errno));
    /* No byte: the end of a stream, or an empty datagram (SEQPACKET, DGRAM),
     * which may still carry descriptors. */
    if (n == 0 && CMSG_FIRSTHDR(&msg)) {
        close_received(&msg);
        return IPC_FAIL("%s: expected %zu bytes with one file descriptor, got an empty message "
                        "with ancillary data (descriptors closed)", __func__, size);
    }
    if (n == 0)
        return cuabi__error(CUABI_ERROR_IO, "%s: the peer closed socket %d (or sent an empty "
                            "message)", __func__, socket);
    bool other_length = (size_t)n != size || (msg.msg_flags & MSG_TRUNC);
    int got = other_length ? -1 : single_fd(&msg);
    if (got < 0) {
        close_received(&msg);
        return IPC_FAIL("%s: expected %zu bytes with one file descriptor, got %s", __func__,
                        size, other_length ? "another message (another length)"
                                           : "no descriptor or several");
    }
    *fd = got;
    return CUABI_SUCCESS;
}
