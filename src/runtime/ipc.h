/* Internal layout of IPC descriptors (tests forge and reseal them). */
#ifndef CUABI_IPC_INTERNAL_H
#define CUABI_IPC_INTERNAL_H

#include "runtime/device.h"

/* Byte offsets of a descriptor's fields (all little-endian). */
enum {
    CUABI__IPC_MAGIC = 0,       /* "CUABIIPC" */
    CUABI__IPC_VERSION = 8,     /* u16: CUABI__IPC_FORMAT */
    CUABI__IPC_KIND = 10,       /* u16: cuabi_ipc_kind */
    CUABI__IPC_LENGTH = 12,     /* u32: CUABI_IPC_DESCRIPTOR_SIZE */
    CUABI__IPC_PID = 16,        /* u32: exporting process */
    CUABI__IPC_CHUNK = 20,      /* u16, VMM chunk kinds: the chunk's index (0 otherwise) */
    CUABI__IPC_CHUNKS = 22,     /* u16, VMM chunk kinds: the buffer's number of chunks */
    CUABI__IPC_HOST = 24,       /* u64: hash of boot id and host name */
    CUABI__IPC_UUID = 32,       /* 16 bytes: device UUID */
    CUABI__IPC_SIZE = 48,       /* u64: bytes described */
    CUABI__IPC_OFFSET = 56,     /* u64: offset inside the exported allocation */
    CUABI__IPC_POOL_ID = 56,    /* u64, pool kinds: the pool's random id (no offset) */
    CUABI__IPC_HANDLE = 64,     /* 64 bytes: CUipcMemHandle / CUipcEventHandle /
                                   CUmemPoolPtrExportData (a pool: zero, or its
                                   location, below) */
    CUABI__IPC_POOL_LOCATION = 64, /* u32, a pool of format 2: cuabi_location_type
                                      (CUABI_LOCATION_HOST_NUMA) */
    CUABI__IPC_POOL_NODE = 68,  /* u32, a pool of format 2: its NUMA node */
    CUABI__IPC_CHECKSUM = 128,  /* u64: FNV-1a of bytes 0..127 */
    CUABI__IPC_FORMAT = 1,
    /* Format 2: a pool descriptor (CUABI_IPC_POOL) of a pool in host memory,
     * whose location follows the frame; a release reading format 1 only
     * refuses it rather than mapping host memory as device memory. Every
     * other descriptor is format 1. */
    CUABI__IPC_FORMAT_HOST_POOL = 2,
    /* The highest NUMA node a descriptor may name (Linux numbers nodes
     * below MAX_NUMNODES, 1024 at most today). */
    CUABI__IPC_NUMA_MAX = 65535,
    /* The most buffers one cuabi_ipc_buffers_export / cuabi_ipc_pool_buffers_import
     * call takes (api/ipc.toml says so). */
    CUABI__IPC_BATCH_MAX = 65536,
};

/* This host's identity as descriptors carry it. */
uint64_t cuabi__ipc_host_hash(void);
/* Recompute a descriptor's checksum after changing a field. */
void cuabi__ipc_reseal(uint8_t *desc);
/* Read/write little-endian fields. */
uint64_t cuabi__ipc_get(const uint8_t *p, int bytes);
void cuabi__ipc_put(uint8_t *p, uint64_t v, int bytes);

/* Shared by ipc.c (legacy IPC) and ipc_pool.c (exportable pools). */

/* Fill a descriptor: the frame (magic, version, kind, length, this process,
 * this host), the fields given, the checksum. */
void cuabi__ipc_seal(uint8_t *out, cuabi_ipc_kind kind, const uint8_t uuid[16], uint64_t size,
                     uint64_t offset, const void *handle);
/* Everything about a descriptor that needs no driver: framing, checksum,
 * a known kind, this host. */
cuabi_status cuabi__ipc_check_frame(cuabi_ipc_kind *kind, const uint8_t *d, size_t size,
                                    const char *caller);
/* The frame, kind `want`, an exporter that is another live process. */
cuabi_status cuabi__ipc_open_check(const uint8_t *d, size_t size, cuabi_ipc_kind want,
                                   const char *caller);
/* The device with UUID `uuid` (a new reference in *hdev, whose object is
 * *dev, made current in *scope); with `first_else` the first device of this process
 * when none has it (memory that is not a device's), else CUABI_ERROR_IPC. */
cuabi_status cuabi__ipc_open_device(cuabi__context_scope *scope, cuabi_device **hdev,
                                    cuabi__device **dev, const uint8_t *uuid, bool first_else,
                                    const cuabi__driver **drv, const char *caller);
/* cuabi__ipc_open_check, then the device the descriptor names. */
cuabi_status cuabi__ipc_open_begin(cuabi__context_scope *scope, cuabi_device **hdev,
                                   cuabi__device **dev, const uint8_t *d, size_t size, cuabi_ipc_kind want, const cuabi__driver **drv,
                                   const char *caller);
/* Where the pool of a CUABI_IPC_POOL descriptor (its frame checked) lives:
 * CUABI_LOCATION_NONE (the device of its UUID: format 1) or
 * CUABI_LOCATION_HOST_NUMA and the node (format 2). Anything else in the
 * descriptor's handle bytes is CUABI_ERROR_IPC (forged or corrupt). */
cuabi_status cuabi__ipc_pool_location(cuabi_location_type *type, int *id, const uint8_t *d,
                                      const char *caller);
/* Seal a pool's descriptor (CUABI_IPC_POOL): format 1 for a pool on its
 * device (type CUABI_LOCATION_NONE or _DEVICE), format 2 with the location
 * for one in host memory. */
void cuabi__ipc_seal_pool(uint8_t *out, const uint8_t uuid[16], uint64_t pool_id,
                          cuabi_location_type type, int id);
/* Whether a driver result means "this handle or this memory cannot be
 * shared" (the rest, out of memory or a sticky context error, stay CUDA
 * errors). */
bool cuabi__ipc_refusal(CUresult r);
/* A driver failure of `entry` on a handle: CUABI_ERROR_IPC when it means
 * "cannot be shared or opened" (the CUresult kept), else a CUDA error. */
cuabi_status cuabi__ipc_driver_refused(CUresult r, const char *entry, const char *caller);
struct cuabi__buffer;
/* cuabi_ipc_buffer_export for a buffer of an IPC pool (ipc_pool.c);
 * `out` has room for a descriptor. */
cuabi_status cuabi__ipc_pool_buffer_export(cuabi__context_scope *scope, uint8_t *out,
                                          struct cuabi__buffer *b, const char *caller);
/* "memory", "an event", ... for messages. */
const char *cuabi__ipc_kind_name(cuabi_ipc_kind kind);
/* The last error again, saying which element of a batch call it is about
 * ("caller: array[i]: why"; the CUresult kept). Returns st. */
cuabi_status cuabi__ipc_batch_error(cuabi_status st, const char *array, size_t i,
                                    const char *caller);

#endif
