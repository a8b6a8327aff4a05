/* Sharing device memory and events between processes: CUDA legacy IPC
 * (the descriptor frame both kinds of IPC use is ipc_descriptor.c's), and
 * cuabi_ipc_buffer_export for every kind of buffer.
 *
 * Legacy IPC (cuIpcGetMemHandle) needs no channel of its own: a handle is 64
 * plain bytes that travel in any message, which is what a pickle needs, and
 * it exports cudaMalloc memory of other allocators (torch, CuPy). Its costs:
 * only cuMemAlloc memory can be exported (hence cuabi_ipc_memory_resource()),
 * and every import is the driver's cuIpcOpenMemHandle (~27 us on an H100).
 * Exportable pools (ipc_pool.c) import a buffer in a few microseconds once
 * the pool's file descriptor reached the importer (SCM_RIGHTS); both write
 * the descriptors framed here (magic, version, kind, pid, host, UUID, ...).
 * See docs/memory.md. */
#include "platform/release.h"
#include "runtime/event.h"
#include "runtime/ipc.h"
#include "runtime/memory.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define IPC_FAIL(caller, ...) cuabi__error(CUABI_ERROR_IPC, __VA_ARGS__)

/* --------------------------------------------------------------- memory */

CUABI_EXTERN(cuabi_status) cuabi_ipc_memory_resource(cuabi_memory_resource **out,
                                                     cuabi_device *device)
{
    return cuabi__resource_simple(out, device, CUABI__RES_IPC, CUABI_MEMORY_DEVICE, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_buffer_export(uint8_t *out, size_t out_size,
                                                   cuabi_buffer *buffer)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__buffer *b;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(b, buffer, BUFFER);
    if (out_size < CUABI_IPC_DESCRIPTOR_SIZE)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                            "%s: a descriptor needs CUABI_IPC_DESCRIPTOR_SIZE (%d) bytes, got %zu",
                            __func__, CUABI_IPC_DESCRIPTOR_SIZE, out_size);
    /* A buffer of an IPC pool: device memory, or pinned host memory of a
     * pool on a host NUMA node (cuabi_ipc_pool_options version 2). */
    if (b->res && b->res->ipc_pool_id && b->res->impl == CUABI__RES_POOL && b->device &&
        b->size != 0)
        CUABI__SCOPE_RETURN(cuabi__ipc_pool_buffer_export(&scope, out, b, __func__));
    if (b->kind != CUABI_MEMORY_DEVICE || !b->device || b->size == 0)
        CUABI__SCOPE_RETURN(IPC_FAIL(__func__, "%s: only non-empty device memory, or memory of an IPC pool, "
                        "can be exported (the buffer is of kind %d, %zu bytes)", __func__,
                        (int)b->kind, b->size));
    CUABI__TRY_SCOPE(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, b->device, drv));
    CUdeviceptr base;
    size_t range;
    CUipcMemHandle h;
    if (!drv->cuIpcGetMemHandle || !drv->cuMemGetAddressRange)
        CUABI__SCOPE_RETURN(cuabi__missing_entry("cuIpcGetMemHandle", __func__));
    const char *entry = "cuMemGetAddressRange";
    CUresult r = CUABI__CU_RAW(drv, cuMemGetAddressRange, &base, &range, (CUdeviceptr)b->ptr);
    if (r == CUDA_SUCCESS) {
        entry = "cuIpcGetMemHandle";
        r = CUABI__CU_RAW(drv, cuIpcGetMemHandle, &h, base);
    }
    if (r != CUDA_SUCCESS && !cuabi__ipc_refusal(r))
        CUABI__SCOPE_RETURN(cuabi__cu_check(r, entry, __func__));
    if (r != CUDA_SUCCESS) {
        cuabi_status st = IPC_FAIL(__func__, "%s: the driver cannot export this memory "
                                   "(cuMemGetAddressRange/cuIpcGetMemHandle: CUresult %d); memory of a pool "
                                   "that is not IPC-enabled cannot be shared: allocate from "
                                   "cuabi_ipc_memory_resource() or cuabi_ipc_pool_create()",
                                   __func__, (int)r);
        cuabi__error_set_cu((int)r);
        CUABI__SCOPE_RETURN(st);
    }
    CUuuid uuid;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuDeviceGetUuid, &uuid, b->device->cu_device));
    cuabi__ipc_seal(out, CUABI_IPC_MEMORY, (const uint8_t *)uuid.bytes, b->size,
                    (uint64_t)(b->ptr - (uintptr_t)base), h.reserved);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* What an imported buffer's release closes. */
typedef struct ipc_mapping {
    cuabi__device *device;  /* retained */
    CUdeviceptr base;
} ipc_mapping;

static void mapping_close(uintptr_t ptr, size_t size, void *payload)
{
    (void)ptr;
    (void)size;
    ipc_mapping *m = payload;
    const cuabi__driver *drv;
    /* A release: in the device's context, the caller's back after; closed
     * even when the switch is refused (a skipped close would leak it). */
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuIpcCloseMemHandle) {
        (void)cuabi__device_enter(&scope, m->device, drv);
        CUABI__CU_RELEASE(drv, cuIpcCloseMemHandle, m->base);
    }
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    cuabi__object_release(&m->device->base);
    cuabi__free(m);
}

static cuabi_status open_memory(cuabi_buffer **out, cuabi_device *hdev, cuabi__device *dev,
                                const uint8_t *d, const cuabi__driver *drv, const char *caller)
{
    uint64_t size = cuabi__ipc_get(d + CUABI__IPC_SIZE, 8);
    uint64_t offset = cuabi__ipc_get(d + CUABI__IPC_OFFSET, 8);
    if (size == 0 || offset + size < offset)
        return IPC_FAIL(caller, "%s: the descriptor's range (%llu bytes at %llu) is invalid",
                        caller, (unsigned long long)size, (unsigned long long)offset);
    if (!drv->cuIpcOpenMemHandle || !drv->cuIpcCloseMemHandle)
        return cuabi__missing_entry("cuIpcOpenMemHandle", caller);
    ipc_mapping *m = cuabi__calloc(1, sizeof *m);
    if (!m)
        return CUABI_ERROR_OUT_OF_MEMORY;
    CUipcMemHandle h;
    memcpy(h.reserved, d + CUABI__IPC_HANDLE, sizeof h.reserved);
    CUresult r = CUABI__CU_RAW(drv, cuIpcOpenMemHandle, &m->base, h,
                               CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r != CUDA_SUCCESS) {
        cuabi__free(m);
        return cuabi__ipc_driver_refused(r, "cuIpcOpenMemHandle", caller);
    }
    /* A forged size must not let the buffer reach past the mapping. */
    CUdeviceptr base;
    size_t range = 0;
    cuabi_status st = CUABI__CU_IN(caller, drv, cuMemGetAddressRange, &base, &range, m->base);
    if (st == CUABI_SUCCESS && (offset > range || size > range - offset))
        st = IPC_FAIL(caller, "%s: the descriptor's range (%llu bytes at %llu) runs past the "
                      "shared allocation (%zu bytes): forged or corrupt", caller,
                      (unsigned long long)size, (unsigned long long)offset, range);
    if (st == CUABI_SUCCESS) {
        m->device = dev;
        cuabi__object_retain(&dev->base);
        st = cuabi_buffer_wrap(out, hdev, CUABI_MEMORY_DEVICE, (uintptr_t)(m->base + offset),
                               (size_t)size, mapping_close, m);
        if (st == CUABI_SUCCESS)
            return CUABI_SUCCESS;
        cuabi__object_release(&dev->base);
    }
    CUABI__CU_RELEASE(drv, cuIpcCloseMemHandle, m->base);
    cuabi__free(m);
    return st;
}

/* cuabi_ipc_buffer_export of many buffers, descriptors end to end (issue 24). */
CUABI_EXTERN(cuabi_status) cuabi_ipc_buffers_export(uint8_t *out, size_t out_size,
                                                    cuabi_buffer **buffers, size_t count)
{
    CUABI__CHECK_ARG(out && buffers, "%s: out or buffers is NULL", __func__);
    CUABI__CHECK_ARG(count >= 1 && count <= CUABI__IPC_BATCH_MAX,
                     "%s: count must be 1 to %d (got %zu)", __func__, CUABI__IPC_BATCH_MAX, count);
    if (out_size / CUABI_IPC_DESCRIPTOR_SIZE < count)     /* room to spare is fine */
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL, "%s: %zu descriptors need %zu bytes "
                            "(CUABI_IPC_DESCRIPTOR_SIZE each), out has %zu", __func__, count,
                            count * CUABI_IPC_DESCRIPTOR_SIZE, out_size);
    for (size_t i = 0; i < count; i++) {
        cuabi_status st = cuabi_ipc_buffer_export(out + i * CUABI_IPC_DESCRIPTOR_SIZE,
                                                  CUABI_IPC_DESCRIPTOR_SIZE, buffers[i]);
        if (st != CUABI_SUCCESS)
            return cuabi__ipc_batch_error(st, "buffers", i, __func__);
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_buffer_import(cuabi_buffer **out, const uint8_t *descriptor,
                                                   size_t size)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi_device *hdev = NULL;
    cuabi__device *dev;
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status st = cuabi__ipc_open_begin(&scope, &hdev, &dev, descriptor, size,
                                            CUABI_IPC_MEMORY, &drv, __func__);
    if (st == CUABI_SUCCESS)
        st = open_memory(out, hdev, dev, descriptor, drv, __func__);
    if (hdev)
        cuabi__handle_release(hdev, CUABI__T_DEVICE);
    return CUABI__CONTEXT_END_OUT(&scope, st, out, BUFFER, __func__);
}

/* --------------------------------------------------------------- events */

#define IPC_EVENT_FLAGS (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)

CUABI_EXTERN(cuabi_status) cuabi_ipc_event_create(cuabi_event **out, cuabi_device *device)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    CUevent raw;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuEventCreate, &raw, IPC_EVENT_FLAGS));
    scope_st = cuabi__event_adopt(out, dev, raw, IPC_EVENT_FLAGS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, EVENT, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_event_export(uint8_t *out, size_t out_size,
                                                  cuabi_event *event)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__event *e;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(e, event, EVENT);
    if (out_size < CUABI_IPC_DESCRIPTOR_SIZE)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                            "%s: a descriptor needs CUABI_IPC_DESCRIPTOR_SIZE (%d) bytes, got %zu",
                            __func__, CUABI_IPC_DESCRIPTOR_SIZE, out_size);
    if ((e->flags & IPC_EVENT_FLAGS) != IPC_EVENT_FLAGS)
        return IPC_FAIL(__func__, "%s: the event was not made by cuabi_ipc_event_create() "
                        "(interprocess events need CU_EVENT_INTERPROCESS and "
                        "CU_EVENT_DISABLE_TIMING)", __func__);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, e->device, drv));
    CUipcEventHandle h;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuIpcGetEventHandle, &h, e->cu_event));
    CUuuid uuid;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuDeviceGetUuid, &uuid, e->device->cu_device));
    cuabi__ipc_seal(out, CUABI_IPC_EVENT, (const uint8_t *)uuid.bytes, 0, 0, h.reserved);
    scope_st = CUABI_SUCCESS;
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_event_import(cuabi_event **out, const uint8_t *descriptor,
                                                  size_t size)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi_device *hdev = NULL;
    cuabi__device *dev;
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status st = cuabi__ipc_open_begin(&scope, &hdev, &dev, descriptor, size,
                                            CUABI_IPC_EVENT, &drv, __func__);
    if (st == CUABI_SUCCESS && !drv->cuIpcOpenEventHandle)
        st = cuabi__missing_entry("cuIpcOpenEventHandle", __func__);
    if (st == CUABI_SUCCESS) {
        CUipcEventHandle h;
        memcpy(h.reserved, descriptor + CUABI__IPC_HANDLE, sizeof h.reserved);
        CUevent raw;
        CUresult r = CUABI__CU_RAW(drv, cuIpcOpenEventHandle, &raw, h);
        st = r == CUDA_SUCCESS ? cuabi__event_adopt(out, dev, raw, IPC_EVENT_FLAGS)
                               : cuabi__ipc_driver_refused(r, "cuIpcOpenEventHandle", __func__);
    }
    if (hdev)
        cuabi__handle_release(hdev, CUABI__T_DEVICE);
    return CUABI__CONTEXT_END_OUT(&scope, st, out, EVENT, __func__);
}
