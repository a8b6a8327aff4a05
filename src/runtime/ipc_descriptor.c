/* The descriptor frame of both kinds of IPC (ipc.h has its layout): the
 * magic, version, kind, exporting process and host, device UUID and
 * checksum written around each descriptor, and the checks every import
 * makes before it trusts one. Legacy IPC (ipc.c) and exportable pools
 * (ipc_pool.c) build on it. Descriptors are untrusted input. */
#include "runtime/ipc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static const char magic[8] = { 'C', 'U', 'A', 'B', 'I', 'I', 'P', 'C' };

uint64_t cuabi__ipc_get(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void cuabi__ipc_put(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The boot id changes with every boot, differs between hosts and is the
 * same in every container of one kernel (which can share a GPU through
 * IPC); the host name stands in where it cannot be read. Hashed: the
 * descriptor carries neither. Read once per process: it cannot change while
 * the process runs, and reading the file cost a few microseconds of every
 * import (the pool path imports in about that). */
static uint64_t host_hash_read(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    char buf[256] = { 0 };
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    size_t n = 0;
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    if (n == 0 && gethostname(buf, sizeof buf - 1) == 0)
        n = strlen(buf);
    return fnv1a(h, buf, n);
}

uint64_t cuabi__ipc_host_hash(void)
{
    static _Atomic uint64_t cached;   /* 0: not read yet (a zero hash is read each time) */
    uint64_t h = atomic_load_explicit(&cached, memory_order_relaxed);
    if (h == 0) {
        h = host_hash_read();
        atomic_store_explicit(&cached, h, memory_order_relaxed);
    }
    return h;
}

void cuabi__ipc_reseal(uint8_t *desc)
{
    cuabi__ipc_put(desc + CUABI__IPC_CHECKSUM,
                   fnv1a(0xcbf29ce484222325ull, desc, CUABI__IPC_CHECKSUM), 8);
}

void cuabi__ipc_seal(uint8_t *out, cuabi_ipc_kind kind, const uint8_t uuid[16], uint64_t size,
                     uint64_t offset, const void *handle)
{
    memset(out, 0, CUABI_IPC_DESCRIPTOR_SIZE);
    memcpy(out + CUABI__IPC_MAGIC, magic, sizeof magic);
    cuabi__ipc_put(out + CUABI__IPC_VERSION, CUABI__IPC_FORMAT, 2);
    cuabi__ipc_put(out + CUABI__IPC_KIND, (uint64_t)kind, 2);
    cuabi__ipc_put(out + CUABI__IPC_LENGTH, CUABI_IPC_DESCRIPTOR_SIZE, 4);
    cuabi__ipc_put(out + CUABI__IPC_PID, (uint64_t)getpid(), 4);
    cuabi__ipc_put(out + CUABI__IPC_HOST, cuabi__ipc_host_hash(), 8);
    memcpy(out + CUABI__IPC_UUID, uuid, 16);
    cuabi__ipc_put(out + CUABI__IPC_SIZE, size, 8);
    cuabi__ipc_put(out + CUABI__IPC_OFFSET, offset, 8);
    if (handle)
        memcpy(out + CUABI__IPC_HANDLE, handle, 64);
    cuabi__ipc_reseal(out);
}

#define IPC_FAIL(caller, ...) cuabi__error(CUABI_ERROR_IPC, __VA_ARGS__)

const char *cuabi__ipc_kind_name(cuabi_ipc_kind kind)
{
    switch (kind) {
    case CUABI_IPC_MEMORY: return "memory (legacy IPC)";
    case CUABI_IPC_EVENT: return "an event";
    case CUABI_IPC_POOL: return "a memory pool";
    case CUABI_IPC_POOL_MEMORY: return "memory of an IPC pool";
    case CUABI_IPC_VMM_CHUNK: return "a chunk of a VMM buffer";
    case CUABI_IPC_VMM_FABRIC_CHUNK: return "a chunk of a VMM buffer (fabric handle)";
    default: return "an unknown kind";
    }
}

/* Everything about a descriptor that needs no driver, in the order that
 * gives the most useful message. */
cuabi_status cuabi__ipc_check_frame(cuabi_ipc_kind *kind, const uint8_t *d, size_t size,
                                const char *caller)
{
    if (!d)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: descriptor is NULL", caller);
    if (size < sizeof magic || memcmp(d, magic, sizeof magic) != 0)
        return IPC_FAIL(caller, "%s: not a cuabi IPC descriptor (%zu bytes without the "
                        "\"CUABIIPC\" magic)", caller, size);
    if (size < CUABI__IPC_LENGTH)
        return IPC_FAIL(caller, "%s: the descriptor is truncated (%zu of %d bytes)", caller,
                        size, CUABI_IPC_DESCRIPTOR_SIZE);
    unsigned version = (unsigned)cuabi__ipc_get(d + CUABI__IPC_VERSION, 2);
    if (version != CUABI__IPC_FORMAT && version != CUABI__IPC_FORMAT_HOST_POOL)
        return IPC_FAIL(caller, "%s: descriptor format version %u; this library reads versions "
                        "%d and %d (exporter and importer must use compatible cuabi releases)",
                        caller, version, CUABI__IPC_FORMAT, CUABI__IPC_FORMAT_HOST_POOL);
    if (size != CUABI_IPC_DESCRIPTOR_SIZE)
        return IPC_FAIL(caller, "%s: the descriptor is %zu bytes, not %d (truncated or with "
                        "trailing bytes)", caller, size, CUABI_IPC_DESCRIPTOR_SIZE);
    uint64_t sum = fnv1a(0xcbf29ce484222325ull, d, CUABI__IPC_CHECKSUM);
    if (cuabi__ipc_get(d + CUABI__IPC_LENGTH, 4) != CUABI_IPC_DESCRIPTOR_SIZE ||
        cuabi__ipc_get(d + CUABI__IPC_CHECKSUM, 8) != sum)
        return IPC_FAIL(caller, "%s: the descriptor is corrupt (checksum mismatch)", caller);
    unsigned k = (unsigned)cuabi__ipc_get(d + CUABI__IPC_KIND, 2);
    if (k < CUABI_IPC_MEMORY || k > CUABI_IPC_VMM_FABRIC_CHUNK)
        return IPC_FAIL(caller, "%s: unknown descriptor kind %u", caller, k);
    if (version == CUABI__IPC_FORMAT_HOST_POOL && k != CUABI_IPC_POOL)
        return IPC_FAIL(caller, "%s: a descriptor of format %d describes a pool in host memory, "
                        "not %s: forged or corrupt", caller, CUABI__IPC_FORMAT_HOST_POOL,
                        cuabi__ipc_kind_name((cuabi_ipc_kind)k));
    if (cuabi__ipc_get(d + CUABI__IPC_HOST, 8) != cuabi__ipc_host_hash())
        return IPC_FAIL(caller, "%s: the descriptor comes from another host (or an earlier "
                        "boot of this one); IPC only works between processes of one host",
                        caller);
    *kind = (cuabi_ipc_kind)k;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_ipc_descriptor_kind(cuabi_ipc_kind *out,
                                                     const uint8_t *descriptor, size_t size)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    return cuabi__ipc_check_frame(out, descriptor, size, __func__);
}

/* The frame, the kind and the exporting process (another one, still
 * alive). */
cuabi_status cuabi__ipc_open_check(const uint8_t *d, size_t size, cuabi_ipc_kind want,
                                   const char *caller)
{
    cuabi_ipc_kind kind;
    CUABI__TRY(cuabi__ipc_check_frame(&kind, d, size, caller));
    if (kind != want)
        return IPC_FAIL(caller, "%s: the descriptor describes %s, not %s%s", caller,
                        cuabi__ipc_kind_name(kind), cuabi__ipc_kind_name(want),
                        kind == CUABI_IPC_POOL_MEMORY
                            ? " (import it into its mapped pool: cuabi_ipc_pool_buffer_import)"
                            : "");
    pid_t pid = (pid_t)cuabi__ipc_get(d + CUABI__IPC_PID, 4);
    if (pid == getpid())
        return IPC_FAIL(caller, "%s: the descriptor was exported by this process (%d); use the "
                        "exported object itself (the driver cannot open its own handles)",
                        caller, (int)pid);
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
        return IPC_FAIL(caller, "%s: the exporting process %d is gone; its memory and events "
                        "went with it (stale descriptor)", caller, (int)pid);
    return CUABI_SUCCESS;
}

/* The device whose UUID the descriptor names, as a new device reference. */
cuabi_status cuabi__ipc_open_device(cuabi__context_scope *scope, cuabi_device **hdev,
                                    cuabi__device **dev, const uint8_t *uuid, bool first_else,
                                    const cuabi__driver **drv, const char *caller)
{
    CUABI__TRY(cuabi__driver_get(drv));
    int count;
    CUABI__TRY(cuabi_device_count(&count));
    int found = -1;
    for (int i = 0; i < count && found < 0; i++) {
        CUuuid u;
        CUdevice cu;
        CUABI__TRY(CUABI__CU_IN(caller, *drv, cuDeviceGet, &cu, i));
        CUABI__TRY(CUABI__CU_IN(caller, *drv, cuDeviceGetUuid, &u, cu));
        if (memcmp(u.bytes, uuid, 16) == 0)
            found = i;
    }
    if (found < 0 && first_else && count > 0)
        found = 0;
    if (found < 0)
        return IPC_FAIL(caller, "%s: the descriptor's device is not visible in this process "
                        "(check CUDA_VISIBLE_DEVICES)", caller);
    CUABI__TRY(cuabi_device_get(hdev, found));
    void *o;
    CUABI__TRY(cuabi__handle_get(*hdev, CUABI__T_DEVICE, &o, caller));
    *dev = o;
    return cuabi__device_enter(scope, *dev, *drv);
}

cuabi_status cuabi__ipc_open_begin(cuabi__context_scope *scope, cuabi_device **hdev,
                                   cuabi__device **dev, const uint8_t *d, size_t size, cuabi_ipc_kind want, const cuabi__driver **drv,
                                   const char *caller)
{
    CUABI__TRY(cuabi__ipc_open_check(d, size, want, caller));
    return cuabi__ipc_open_device(scope, hdev, dev, d + CUABI__IPC_UUID, false, drv, caller);
}

/* Nothing but zeros in [from, to) of a descriptor. */
static bool zero_bytes(const uint8_t *d, int from, int to)
{
    for (int i = from; i < to; i++)
        if (d[i])
            return false;
    return true;
}

cuabi_status cuabi__ipc_pool_location(cuabi_location_type *type, int *id, const uint8_t *d,
                                      const char *caller)
{
    unsigned version = (unsigned)cuabi__ipc_get(d + CUABI__IPC_VERSION, 2);
    *type = CUABI_LOCATION_NONE;
    *id = 0;
    if (version == CUABI__IPC_FORMAT) {
        if (!zero_bytes(d, CUABI__IPC_HANDLE, CUABI__IPC_CHECKSUM))
            return IPC_FAIL(caller, "%s: the pool descriptor carries handle bytes (a pool's "
                            "handle is its file descriptor): forged or corrupt", caller);
        return CUABI_SUCCESS;
    }
    uint64_t t = cuabi__ipc_get(d + CUABI__IPC_POOL_LOCATION, 4);
    uint64_t node = cuabi__ipc_get(d + CUABI__IPC_POOL_NODE, 4);
    if (t != CUABI_LOCATION_HOST_NUMA)
        return IPC_FAIL(caller, "%s: the pool descriptor names location type %llu; an IPC pool "
                        "in host memory is on a NUMA node (CUABI_LOCATION_HOST_NUMA, %d): "
                        "forged or corrupt", caller, (unsigned long long)t,
                        (int)CUABI_LOCATION_HOST_NUMA);
    if (node > CUABI__IPC_NUMA_MAX)
        return IPC_FAIL(caller, "%s: the pool descriptor names NUMA node %llu (at most %d): "
                        "forged or corrupt", caller, (unsigned long long)node,
                        CUABI__IPC_NUMA_MAX);
    if (!zero_bytes(d, CUABI__IPC_POOL_NODE + 4, CUABI__IPC_CHECKSUM))
        return IPC_FAIL(caller, "%s: the pool descriptor carries bytes after its location: "
                        "forged or corrupt", caller);
    *type = CUABI_LOCATION_HOST_NUMA;
    *id = (int)node;
    return CUABI_SUCCESS;
}

void cuabi__ipc_seal_pool(uint8_t *out, const uint8_t uuid[16], uint64_t pool_id,
                          cuabi_location_type type, int id)
{
    cuabi__ipc_seal(out, CUABI_IPC_POOL, uuid, 0, pool_id, NULL);
    if (type != CUABI_LOCATION_HOST_NUMA)
        return;
    cuabi__ipc_put(out + CUABI__IPC_VERSION, CUABI__IPC_FORMAT_HOST_POOL, 2);
    cuabi__ipc_put(out + CUABI__IPC_POOL_LOCATION, (uint64_t)type, 4);
    cuabi__ipc_put(out + CUABI__IPC_POOL_NODE, (uint64_t)(uint32_t)id, 4);
    cuabi__ipc_reseal(out);
}

/* Results that mean "this handle or this memory cannot be shared": the rest
 * (out of memory, a sticky context error, ...) stay CUDA errors. */
bool cuabi__ipc_refusal(CUresult r)
{
    return r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE ||
           r == CUDA_ERROR_MAP_FAILED || r == CUDA_ERROR_NOT_FOUND ||
           r == CUDA_ERROR_INVALID_DEVICE || r == CUDA_ERROR_NOT_SUPPORTED ||
           r == CUDA_ERROR_ALREADY_MAPPED || r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

/* The driver refused a handle: stale (freed memory, destroyed event),
 * forged, or not openable from here. */
cuabi_status cuabi__ipc_driver_refused(CUresult r, const char *entry, const char *caller)
{
    if (!cuabi__ipc_refusal(r))
        return cuabi__cu_check(r, entry, caller);
    cuabi_status st = IPC_FAIL(caller, "%s: %s refused the handle (CUresult %d): the exporter "
                               "freed it, it is forged, or this process may not open it",
                               caller, entry, (int)r);
    cuabi__error_set_cu((int)r);
    return st;
}

cuabi_status cuabi__ipc_batch_error(cuabi_status st, const char *array, size_t i,
                                    const char *caller)
{
    const cuabi_error_info *e = cuabi_last_error();
    int cu = e->cu_result;
    const char *why = e->message;
    size_t n = strlen(caller);
    if (strncmp(why, caller, n) == 0 && why[n] == ':' && why[n + 1] == ' ')
        why += n + 2;                   /* the caller is named once */
    cuabi__error(st, "%s: %s[%zu]: %s", caller, array, i, why);
    if (cu)
        cuabi__error_set_cu(cu);
    return st;
}
