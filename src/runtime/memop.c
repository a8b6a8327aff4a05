/* Stream memory operations: wait on and write 32/64-bit words from a
 * stream (cuStreamWaitValue32/64, cuStreamWriteValue32/64), one at a time
 * or batched (cuStreamBatchMemOp).
 *
 * The word is a buffer and an offset: the range and alignment are checked
 * here, and the kind of memory: the driver takes device and pinned memory;
 * plain host memory would be a wild address to it, and its documentation
 * excludes managed memory (cuMemAllocManaged) from every stream memory
 * operation. When the driver refuses a word anyway (CUDA_ERROR_INVALID_VALUE)
 * the error names where the word's memory came from, since the driver's
 * code alone does not say. Flags are checked against the driver's enums. On a stream being captured the graph
 * keeps every buffer named (runtime/capture.h). Entries of a batch are all
 * checked before anything is queued. */
#include "runtime/capture.h"
#include "runtime/memory.h"

#include <stdio.h>
#include <string.h>

#define WAIT_CONDITIONS 3u                              /* GEQ, EQ, AND, NOR: the low 2 bits */
#define WAIT_KNOWN (WAIT_CONDITIONS | (unsigned)CUABI_STREAM_WAIT_VALUE_FLUSH)

static const char *op_name(int kind)
{
    switch (kind) {
    case CUABI_STREAM_MEM_OP_WAIT_VALUE_32: return "32-bit wait";
    case CUABI_STREAM_MEM_OP_WRITE_VALUE_32: return "32-bit write";
    case CUABI_STREAM_MEM_OP_WAIT_VALUE_64: return "64-bit wait";
    case CUABI_STREAM_MEM_OP_WRITE_VALUE_64: return "64-bit write";
    case CUABI_STREAM_MEM_OP_BARRIER: return "barrier";
    default: return "flush";
    }
}

/* One operation, checked, as the driver takes it; *buf: its buffer (NULL
 * for flushes and barriers). `what` prefixes messages ("ops[3]: "). */
static cuabi_status check_op(CUstreamBatchMemOpParams *out, cuabi__buffer **buf, int kind,
                             cuabi_buffer *buffer, size_t offset, uint64_t value, unsigned flags,
                             const char *what, const char *caller)
{
    memset(out, 0, sizeof *out);
    *buf = NULL;
    bool wait = kind == CUABI_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CUABI_STREAM_MEM_OP_WAIT_VALUE_64;
    bool write = kind == CUABI_STREAM_MEM_OP_WRITE_VALUE_32 ||
                 kind == CUABI_STREAM_MEM_OP_WRITE_VALUE_64;
    bool wide = kind == CUABI_STREAM_MEM_OP_WAIT_VALUE_64 ||
                kind == CUABI_STREAM_MEM_OP_WRITE_VALUE_64;
    out->operation = (CUstreamBatchMemOpType)kind;
    if (kind == CUABI_STREAM_MEM_OP_FLUSH_REMOTE_WRITES || kind == CUABI_STREAM_MEM_OP_BARRIER) {
        CUABI__CHECK_ARG(!buffer, "%s: %sa %s names no buffer", caller, what, op_name(kind));
        if (kind == CUABI_STREAM_MEM_OP_BARRIER) {
            CUABI__CHECK_ARG(flags <= CUABI_STREAM_BARRIER_GPU, "%s: %sbarrier flags %u are not a "
                             "cuabi_stream_barrier_scope", caller, what, flags);
            out->memoryBarrier.flags = flags;
        } else {
            CUABI__CHECK_ARG(flags == 0, "%s: %sa flush takes flags 0, not %u", caller, what,
                             flags);
        }
        return CUABI_SUCCESS;
    }
    CUABI__CHECK_ARG(wait || write, "%s: %skind %d is not a cuabi_stream_mem_op_kind", caller,
                     what, kind);
    if (wait)
        CUABI__CHECK_ARG((flags & ~WAIT_KNOWN) == 0, "%s: %sunknown wait flags 0x%x (a condition "
                         "GEQ/EQ/AND/NOR, optionally | FLUSH)", caller, what, flags & ~WAIT_KNOWN);
    else
        CUABI__CHECK_ARG(flags <= CUABI_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER, "%s: %sunknown "
                         "write flags 0x%x", caller, what, flags);
    CUABI__CHECK_ARG(wide || value <= UINT32_MAX, "%s: %sthe value 0x%llx does not fit in the "
                     "32-bit word", caller, what, (unsigned long long)value);
    void *obj;
    CUABI__TRY(cuabi__handle_get(buffer, CUABI__T_BUFFER, &obj, caller));
    cuabi__buffer *b = obj;
    size_t width = wide ? 8 : 4;
    CUABI__TRY(cuabi__buffer_check_range(b, offset, width, "word's", caller));
    if (b->kind == CUABI_MEMORY_HOST)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %sthe buffer is plain host memory, "
                            "which a stream cannot reach; use device or pinned memory",
                            caller, what);
    if (b->kind == CUABI_MEMORY_MANAGED)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %sthe buffer is managed memory, "
                            "which the driver's stream memory operations do not take "
                            "(cuStreamWaitValue32 and the rest: \"cannot be used with managed "
                            "memory\"); use device or pinned memory", caller, what);
    uintptr_t addr = b->ptr + offset;
    if (addr % width)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %sthe %zu-byte word at 0x%llx (offset "
                            "%zu) is not %zu-byte aligned", caller, what, width,
                            (unsigned long long)addr, offset, width);
    if (wait) {
        out->waitValue.address = (CUdeviceptr)addr;
        if (wide)
            out->waitValue.value64 = value;
        else
            out->waitValue.value = (cuuint32_t)value;
        out->waitValue.flags = flags;
    } else {
        out->writeValue.address = (CUdeviceptr)addr;
        if (wide)
            out->writeValue.value64 = value;
        else
            out->writeValue.value = (cuuint32_t)value;
        out->writeValue.flags = flags;
    }
    *buf = b;
    return CUABI_SUCCESS;
}

/* Where a word's memory came from, for the driver's refusals. */
static const char *memory_origin(const cuabi__buffer *b)
{
    if (!b->res)
        return "wrapped memory (cuabi_buffer_wrap or an import)";
    switch (b->res->impl) {
    case CUABI__RES_POOL: return "a stream-ordered memory pool's memory (cuMemAllocFromPoolAsync)";
    case CUABI__RES_PINNED: return "pinned host memory (cuMemAllocHost)";
    case CUABI__RES_IPC: return "device memory from cuMemAlloc";
    case CUABI__RES_IPC_MAPPED: return "memory of a pool imported from another process";
    case CUABI__RES_VMM: return "virtual memory (cuMemCreate + cuMemMap)";
    case CUABI__RES_USER: return "memory from a user memory resource";
    default: return "memory of another kind";
    }
}

/* The driver's status for operations on the word of `b` (NULL: none);
 * a refusal of the address (CUDA_ERROR_INVALID_VALUE, whose code alone
 * does not say why) gains where the memory came from. `batch`: the driver
 * does not say which entry it refused, so the first word is named. */
static cuabi_status driver_verdict(cuabi_status st, const cuabi__buffer *b, bool batch)
{
    if (st != CUABI_ERROR_CUDA || !b || cuabi_last_error()->cu_result != CUDA_ERROR_INVALID_VALUE)
        return st;
    char driver_said[512];
    snprintf(driver_said, sizeof driver_said, "%s", cuabi_last_error()->message);
    cuabi__error(st, "%s; the %sword lies in %s on device %d: the driver may not take stream "
                 "memory operations there (device memory from cuMemAlloc, e.g. "
                 "cuabi_ipc_memory_resource, and pinned memory are what its documentation "
                 "names)", driver_said, batch ? "batch's first " : "", memory_origin(b),
                 b->device ? b->device->ordinal : -1);
    cuabi__error_set_cu(CUDA_ERROR_INVALID_VALUE);
    return st;
}

/* The stream to queue on (made ready for the driver: a default stream's
 * device current in *scope): `stream`, or the legacy default stream of
 * `dev` (NULL: none known). *s is NULL for the legacy stream. */
static cuabi_status op_stream(cuabi__context_scope *scope, CUstream *raw, cuabi__stream **s, cuabi_stream *stream,
                              cuabi__device *dev, const cuabi__driver *drv, const char *caller)
{
    *s = NULL;
    if (stream) {
        void *obj;
        CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
        *s = obj;
        if (dev && (*s)->device != dev)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the stream is on device %d, "
                                "the memory on device %d", caller, (*s)->device->ordinal,
                                dev->ordinal);
        *raw = (*s)->cu_stream;
        return cuabi__stream_enter(scope, *s, drv);
    }
    if (!dev)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: without a stream the operations "
                            "go to the legacy default stream of their buffers' device, and none "
                            "is named: give a stream", caller);
    *raw = CU_STREAM_LEGACY;
    return cuabi__device_enter(scope, dev, drv);
}

static cuabi_status single(int kind, cuabi_stream *stream, cuabi_buffer *buffer, size_t offset,
                           uint64_t value, unsigned flags, const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUstreamBatchMemOpParams op;
    cuabi__buffer *b;
    CUABI__TRY(check_op(&op, &b, kind, buffer, offset, value, flags, "", caller));
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    CUstream raw;
    cuabi__stream *s;
    CUABI__TRY_SCOPE(op_stream(&scope, &raw, &s, stream, b->device, drv, caller));
    if (s && cuabi__capturing())
        CUABI__TRY_SCOPE(cuabi__capture_keep_buffers(s, b, NULL, caller));
    CUdeviceptr a = kind == CUABI_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CUABI_STREAM_MEM_OP_WAIT_VALUE_64
                        ? op.waitValue.address : op.writeValue.address;
    cuabi_status st;
    switch (kind) {
    case CUABI_STREAM_MEM_OP_WAIT_VALUE_32:
        st = CUABI__CU_IN(caller, drv, cuStreamWaitValue32, raw, a, (cuuint32_t)value, flags);
        break;
    case CUABI_STREAM_MEM_OP_WAIT_VALUE_64:
        st = CUABI__CU_IN(caller, drv, cuStreamWaitValue64, raw, a, value, flags);
        break;
    case CUABI_STREAM_MEM_OP_WRITE_VALUE_32:
        st = CUABI__CU_IN(caller, drv, cuStreamWriteValue32, raw, a, (cuuint32_t)value, flags);
        break;
    default:
        st = CUABI__CU_IN(caller, drv, cuStreamWriteValue64, raw, a, value, flags);
        break;
    }
    scope_st = CUABI__LIKELY(st == CUABI_SUCCESS) ? st : driver_verdict(st, b, false);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_wait_value32(cuabi_stream *stream, cuabi_buffer *buffer,
                                                     size_t offset, uint32_t value,
                                                     unsigned int flags)
{
    return single(CUABI_STREAM_MEM_OP_WAIT_VALUE_32, stream, buffer, offset, value, flags,
                  __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_wait_value64(cuabi_stream *stream, cuabi_buffer *buffer,
                                                     size_t offset, uint64_t value,
                                                     unsigned int flags)
{
    return single(CUABI_STREAM_MEM_OP_WAIT_VALUE_64, stream, buffer, offset, value, flags,
                  __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_write_value32(cuabi_stream *stream, cuabi_buffer *buffer,
                                                      size_t offset, uint32_t value,
                                                      unsigned int flags)
{
    return single(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, stream, buffer, offset, value, flags,
                  __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_write_value64(cuabi_stream *stream, cuabi_buffer *buffer,
                                                      size_t offset, uint64_t value,
                                                      unsigned int flags)
{
    return single(CUABI_STREAM_MEM_OP_WRITE_VALUE_64, stream, buffer, offset, value, flags,
                  __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_batch_mem_op(cuabi_stream *stream,
                                                     const cuabi_stream_mem_op *ops, size_t count)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUABI__CHECK_ARG(count >= 1 && count <= CUABI_STREAM_MEM_OP_MAX_BATCH, "%s: count = %zu; a "
                     "batch has 1 to %d operations", __func__, count,
                     CUABI_STREAM_MEM_OP_MAX_BATCH);
    CUABI__CHECK_ARG(ops, "%s: ops is NULL", __func__);
    CUstreamBatchMemOpParams params[CUABI_STREAM_MEM_OP_MAX_BATCH];
    cuabi__buffer *bufs[CUABI_STREAM_MEM_OP_MAX_BATCH];
    cuabi__device *dev = NULL;
    for (size_t i = 0; i < count; i++) {
        const cuabi_stream_mem_op *o = &ops[i];
        char what[32];
        snprintf(what, sizeof what, "ops[%zu]: ", i);
        if (o->version == 0 || o->version > CUABI_STREAM_MEM_OP_VERSION)
            return cuabi__error(CUABI_ERROR_INVALID_VERSION, "%s: %scuabi_stream_mem_op version "
                                "%u is not supported (use CUABI_STREAM_MEM_OP_INIT)", __func__,
                                what, o->version);
        CUABI__TRY(check_op(&params[i], &bufs[i], (int)o->kind, o->buffer, o->offset, o->value,
                            o->flags, what, __func__));
        cuabi__device *d = bufs[i] ? bufs[i]->device : NULL;
        if (d && dev && d != dev)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %sthe buffer is on device %d, "
                                "an earlier one on device %d: a batch runs on one device",
                                __func__, what, d->ordinal, dev->ordinal);
        if (d)
            dev = d;
    }
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUstream raw;
    cuabi__stream *s;
    CUABI__TRY_SCOPE(op_stream(&scope, &raw, &s, stream, dev, drv, __func__));
    if (s && cuabi__capturing())
        for (size_t i = 0; i < count; i++)
            if (bufs[i])
                CUABI__TRY_SCOPE(cuabi__capture_keep_buffers(s, bufs[i], NULL, __func__));
    cuabi_status st = CUABI__CU(drv, cuStreamBatchMemOp, raw, (unsigned)count, params, 0);
    if (CUABI__LIKELY(st == CUABI_SUCCESS))
        CUABI__SCOPE_RETURN(st);
    const cuabi__buffer *first = NULL;   /* the driver does not say which entry: name the first word */
    for (size_t i = 0; i < count && !first; i++)
        first = bufs[i];
    CUABI__SCOPE_RETURN(driver_verdict(st, first, count > 1));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}
