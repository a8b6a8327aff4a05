/* Checkpoint and restore of a process's GPU state: the driver's
 * cuCheckpointProcess* entry points, with their refusals said in cuabi's
 * words.
 *
 * What an H100 said (driver 580.159.04, tests/runtime/test_gpu_checkpoint.c):
 * a child holding 2 GiB was locked (state 1), checkpointed (state 2; the
 * device's free memory rose by 2.5 GiB: its memory and its context's),
 * restored (state 1: locked again) and unlocked (state 0), and found its
 * data intact; locking a locked process and unlocking a running one gave
 * CUDA_ERROR_ILLEGAL_STATE, an unknown pid CUDA_ERROR_OPERATING_SYSTEM. */
#include <string.h>
#include <unistd.h>

#include "platform/loader.h"

CUABI_EXTERN(const char *) cuabi_process_state_name(cuabi_process_state state)
{
    switch (state) {
    case CUABI_PROCESS_STATE_RUNNING: return "running";
    case CUABI_PROCESS_STATE_LOCKED: return "locked";
    case CUABI_PROCESS_STATE_CHECKPOINTED: return "checkpointed";
    case CUABI_PROCESS_STATE_FAILED: return "failed";
    case CUABI_PROCESS_STATE_CHECKPOINTING: return "checkpointing";
    case CUABI_PROCESS_STATE_RESTORING: return "restoring";
    default: return "unknown";
    }
}

/* What each call needs the process to be in, for messages. */
static const char *needs(const char *entry)
{
    if (strcmp(entry, "cuCheckpointProcessLock") == 0)
        return "running";
    if (strcmp(entry, "cuCheckpointProcessRestore") == 0)
        return "checkpointed";
    return "locked";   /* Checkpoint, Unlock */
}

/* A refusal of a checkpoint call, in cuabi's words: not supported, no such
 * process (or not ours), the wrong state (named), a lock that timed out. */
static cuabi_status refused(CUresult r, const char *entry, int pid, const cuabi__driver *drv,
                            const char *caller)
{
    cuabi_status st;
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: %s: the driver does not support "
                          "checkpoint and restore here (CUDA_ERROR_NOT_SUPPORTED; Linux, a "
                          "CUDA 12.8+ driver)", caller, entry);
    } else if (r == CUDA_ERROR_OPERATING_SYSTEM) {
        st = cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: %s: no CUDA process %d that this one may "
                          "act on (CUDA_ERROR_OPERATING_SYSTEM: no such process, or another "
                          "user's; checkpointing needs the same user or root)", caller, entry,
                          pid);
    } else if (r == CUDA_ERROR_ILLEGAL_STATE) {
        CUprocessState state = (CUprocessState)-1;
        bool known = drv->cuCheckpointProcessGetState &&
                     drv->cuCheckpointProcessGetState(pid, &state) == CUDA_SUCCESS;
        st = cuabi__error(CUABI_ERROR_CUDA, "%s: %s: process %d is %s; this call needs it %s "
                          "(CUDA_ERROR_ILLEGAL_STATE)", caller, entry, pid,
                          known ? cuabi_process_state_name((cuabi_process_state)state)
                                : "in another state", needs(entry));
    } else if (r == CUDA_ERROR_NOT_READY) {
        st = cuabi__error(CUABI_ERROR_NOT_READY, "%s: %s: process %d could not be locked in "
                          "time (its work in flight did not finish); it is still running",
                          caller, entry, pid);
    } else {
        return cuabi__cu_check(r, entry, caller);
    }
    cuabi__error_set_cu((int)r);
    return st;
}

/* One checkpoint call: the entry point's presence, fault injection, the
 * refusal's words. (The driver's args structs are reserved space beyond
 * what cuabi sets: zeroed, as the driver requires.) */
#define CKPT_CU(drv, fn, pid, ...)                                            \
    ((drv)->fn ? ckpt_result(CUABI__CU_RAW(drv, fn, __VA_ARGS__), CUABI__FN_NAME(fn), (pid),   \
                             (drv), __func__)                                  \
               : cuabi__missing_entry(CUABI__FN_NAME(fn), __func__))

static inline cuabi_status ckpt_result(CUresult r, const char *entry, int pid,
                                       const cuabi__driver *drv, const char *caller)
{
    return CUABI__LIKELY(r == CUDA_SUCCESS) ? CUABI_SUCCESS : refused(r, entry, pid, drv, caller);
}

#define CHECK_PID(pid)                                                        \
    CUABI__CHECK_ARG((pid) > 0, "%s: pid %d is not a process id", __func__, (pid))

/* Lock, checkpoint, restore and unlock act on another process. On its own
 * pid the driver waits for this process's CUDA calls to drain -- the call
 * itself among them -- and never returns (the H100 run of 2026-11-27 hung in
 * a lock of getpid()): refused before the driver sees it. The state and the
 * restore thread of one's own pid are fine to ask. */
#define CHECK_NOT_SELF(pid)                                                   \
    CUABI__CHECK_ARG((pid) != (int)getpid(),                                  \
                     "%s: pid %d is this process: a process cannot checkpoint itself (the "   \
                     "driver would wait for this process's own CUDA calls, this one among "  \
                     "them, and never return); run it from another process: a controller "   \
                     "calling cuabi_checkpoint_process_* or cuabi.checkpoint.Process(pid) "  \
                     "in Python, or NVIDIA's cuda-checkpoint tool (cuda-checkpoint --toggle " \
                     "--pid %d)", __func__, (pid), (pid))

CUABI_EXTERN(cuabi_status) cuabi_checkpoint_process_state(cuabi_process_state *out, int pid)
{
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CHECK_PID(pid);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUprocessState state = CU_PROCESS_STATE_RUNNING;
    CUABI__TRY(CKPT_CU(drv, cuCheckpointProcessGetState, pid, pid, &state));
    *out = (cuabi_process_state)state;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_checkpoint_process_restore_thread_id(int *out, int pid)
{
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CHECK_PID(pid);
    CUABI__TRY(cuabi__driver_get(&drv));
    int tid = 0;
    CUABI__TRY(CKPT_CU(drv, cuCheckpointProcessGetRestoreThreadId, pid, pid, &tid));
    *out = tid;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_checkpoint_process_lock(int pid, unsigned int timeout_ms)
{
    const cuabi__driver *drv;
    CHECK_PID(pid);
    CHECK_NOT_SELF(pid);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcheckpointLockArgs args;
    memset(&args, 0, sizeof args);
    args.timeoutMs = timeout_ms;
    return CKPT_CU(drv, cuCheckpointProcessLock, pid, pid, &args);
}

CUABI_EXTERN(cuabi_status) cuabi_checkpoint_process_checkpoint(int pid)
{
    const cuabi__driver *drv;
    CHECK_PID(pid);
    CHECK_NOT_SELF(pid);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcheckpointCheckpointArgs args;
    memset(&args, 0, sizeof args);
    return CKPT_CU(drv, cuCheckpointProcessCheckpoint, pid, pid, &args);
}

/* The most GPU pairs one restore names: far above any host's GPUs. */
#define MAX_PAIRS 64

CUABI_EXTERN(cuabi_status) cuabi_checkpoint_process_restore(int pid,
                                                            const cuabi_checkpoint_gpu_pair *pairs,
                                                            size_t count)
{
    const cuabi__driver *drv;
    CHECK_PID(pid);
    CHECK_NOT_SELF(pid);
    CUABI__CHECK_ARG(count <= MAX_PAIRS, "%s: count = %zu GPU pairs; at most %d", __func__,
                     count, MAX_PAIRS);
    CUABI__CHECK_ARG(pairs || count == 0, "%s: pairs is NULL with count %zu", __func__, count);
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < i; j++)
            CUABI__CHECK_ARG(memcmp(pairs[i].old_uuid, pairs[j].old_uuid, 16) != 0,
                             "%s: pairs[%zu] and pairs[%zu] name the same checkpointed GPU",
                             __func__, j, i);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcheckpointGpuPair cu[MAX_PAIRS];
    for (size_t i = 0; i < count; i++) {
        memcpy(cu[i].oldUuid.bytes, pairs[i].old_uuid, 16);
        memcpy(cu[i].newUuid.bytes, pairs[i].new_uuid, 16);
    }
    CUcheckpointRestoreArgs args;
    memset(&args, 0, sizeof args);
    args.gpuPairs = count ? cu : NULL;
    args.gpuPairsCount = (unsigned)count;
    return CKPT_CU(drv, cuCheckpointProcessRestore, pid, pid, &args);
}

CUABI_EXTERN(cuabi_status) cuabi_checkpoint_process_unlock(int pid)
{
    const cuabi__driver *drv;
    CHECK_PID(pid);
    CHECK_NOT_SELF(pid);
    CUABI__TRY(cuabi__driver_get(&drv));
    CUcheckpointUnlockArgs args;
    memset(&args, 0, sizeof args);
    return CKPT_CU(drv, cuCheckpointProcessUnlock, pid, pid, &args);
}
