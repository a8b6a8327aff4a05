/* Internal view of VMM buffers (vmm.c), for the modules built on them
 * (multicast.c binds a buffer's physical chunk). */
#ifndef CUABI_RUNTIME_VMM_H
#define CUABI_RUNTIME_VMM_H

#include "runtime/memory.h"

/* The physical chunk of VMM buffer `b` that holds `size` bytes at `offset`
 * (all of them: a range across two chunks is refused), its handle and the
 * range's offset inside the chunk. CUABI_ERROR_NOT_SUPPORTED for a buffer
 * that is not a VMM buffer; errors name `caller`. */
cuabi_status cuabi__vmm_chunk_at(CUmemGenericAllocationHandle *handle, size_t *chunk_offset,
                                 cuabi__buffer *b, size_t offset, size_t size,
                                 const char *caller);

/* Device attribute `attr` of `dev` is non-zero, else CUABI_ERROR_NOT_SUPPORTED
 * naming the attribute (`attr_name`) and `what` needs it. */
cuabi_status cuabi__device_requires(const cuabi__driver *drv, const cuabi__device *dev,
                                    CUdevice_attribute attr, const char *attr_name,
                                    const char *what, const char *caller);

#endif
