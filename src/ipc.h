/* Internal layout of IPC descriptors (tests forge and reseal them). */
#ifndef CUABI_IPC_INTERNAL_H
#define CUABI_IPC_INTERNAL_H

#include "internal.h"

/* Byte offsets of a descriptor's fields (all little-endian). */
enum {
    CUABI__IPC_MAGIC = 0,       /* "CUABIIPC" */
    CUABI__IPC_VERSION = 8,     /* u16: CUABI__IPC_FORMAT */
    CUABI__IPC_KIND = 10,       /* u16: cuabi_ipc_kind */
    CUABI__IPC_LENGTH = 12,     /* u32: CUABI_IPC_DESCRIPTOR_SIZE */
    CUABI__IPC_PID = 16,        /* u32: exporting process */
    CUABI__IPC_HOST = 24,       /* u64: hash of boot id and host name */
    CUABI__IPC_UUID = 32,       /* 16 bytes: device UUID */
    CUABI__IPC_SIZE = 48,       /* u64: bytes described */
    CUABI__IPC_OFFSET = 56,     /* u64: offset inside the exported allocation */
    CUABI__IPC_HANDLE = 64,     /* 64 bytes: CUipcMemHandle / CUipcEventHandle */
    CUABI__IPC_CHECKSUM = 128,  /* u64: FNV-1a of bytes 0..127 */
    CUABI__IPC_FORMAT = 1,
};

/* This host's identity as descriptors carry it. */
uint64_t cuabi__ipc_host_hash(void);
/* Recompute a descriptor's checksum after changing a field. */
void cuabi__ipc_reseal(uint8_t *desc);
/* Read/write little-endian fields. */
uint64_t cuabi__ipc_get(const uint8_t *p, int bytes);
void cuabi__ipc_put(uint8_t *p, uint64_t v, int bytes);

#endif
