/* Loading NCCL (nccl_lib.c), for communicators and collectives
 * (src/runtime/nccl.c) and for what the library reports it loaded
 * (library.c).
 *
 * NCCL is dlopen()ed on first use, like NVRTC: a process that never
 * communicates never loads it, and libcuabi has no link-time dependency on
 * it. Where it is looked for, in order:
 *
 *   1. CUABI_NCCL_PATH: a file (libnccl.so.2) or a directory holding one;
 *   2. CUABI_NCCL_WHEEL_DIR: the `nvidia-nccl-cu13` (or -cu12) wheel's
 *      library folder; the Python binding sets it at import to the wheel of
 *      the running interpreter (found with importlib, nothing imported);
 *   3. the wheel beside the NVRTC wheel the loader would open
 *      (site-packages/nvidia/<x>/lib -> site-packages/nvidia/nccl/lib), and
 *      under $VIRTUAL_ENV/lib/python3.N/site-packages/nvidia/nccl/lib: C
 *      programs started from a virtual environment find its wheel too;
 *   4. libnccl.so.2 through the system loader (LD_LIBRARY_PATH, ld.so.cache),
 *      then the toolkit's lib64 (some toolkits ship NCCL there).
 *
 * The types and entry points are declared here rather than taken from
 * nccl.h (not every machine that builds cuabi has NCCL's headers); they are
 * NCCL's stable C ABI since 2.19, the oldest release cuabi accepts
 * (ncclCommSplit 2.18, ncclCommRegister 2.19, nonblocking communicators
 * 2.14). */
#ifndef CUABI_PLATFORM_NCCL_LIB_H
#define CUABI_PLATFORM_NCCL_LIB_H

#include "platform/loader.h"

typedef int cuabi__nccl_result; /* ncclResult_t */
enum {
    CUABI__NCCL_SUCCESS = 0,
    CUABI__NCCL_UNHANDLED_CUDA_ERROR = 1,
    CUABI__NCCL_SYSTEM_ERROR = 2,
    CUABI__NCCL_INTERNAL_ERROR = 3,
    CUABI__NCCL_INVALID_ARGUMENT = 4,
    CUABI__NCCL_INVALID_USAGE = 5,
    CUABI__NCCL_REMOTE_ERROR = 6,
    CUABI__NCCL_IN_PROGRESS = 7,
};
typedef struct cuabi__nccl_comm_opaque *cuabi__nccl_comm; /* ncclComm_t */
#define CUABI__NCCL_ID_BYTES 128
typedef struct { char internal[CUABI__NCCL_ID_BYTES]; } cuabi__nccl_id; /* ncclUniqueId */
#define CUABI__NCCL_VERSION(x, y, z) ((x) * 10000 + (y) * 100 + (z))
#define CUABI__NCCL_MIN_VERSION CUABI__NCCL_VERSION(2, 19, 0)
#define CUABI__NCCL_CONFIG_MAGIC 0xcafebeefu
#define CUABI__NCCL_UNDEF_INT (-2147483647 - 1) /* NCCL_CONFIG_UNDEF_INT (INT_MIN) */
#define CUABI__NCCL_SPLIT_NOCOLOR (-1)

/* ncclConfig_t as of NCCL 2.25, the fields cuabi sets. NCCL copies
 * `size` bytes of it and leaves later fields at their defaults, so a
 * newer NCCL takes this shorter struct as it is. */
typedef struct cuabi__nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
    int split_share;
    int traffic_class;
    const char *comm_name;
} cuabi__nccl_config;
#define CUABI__NCCL_CONFIG_VERSION CUABI__NCCL_VERSION(2, 25, 0)

/* NCCL's entry points: X(name, parameters, required). Every one returns
 * ncclResult_t; the two that return strings are declared below. Optional
 * ones may be NULL (their calls say which NCCL they need). */
#define CUABI__NCCL_FUNCS(X)                                                  \
    X(ncclGetVersion, (int *version), 1)                                       \
    X(ncclGetUniqueId, (cuabi__nccl_id *id), 1)                                \
    X(ncclCommInitRankConfig, (cuabi__nccl_comm *comm, int nranks, cuabi__nccl_id id, \
                               int rank, cuabi__nccl_config *config), 1)       \
    X(ncclCommInitRank, (cuabi__nccl_comm *comm, int nranks, cuabi__nccl_id id, int rank), 0) \
    X(ncclCommInitAll, (cuabi__nccl_comm *comms, int ndev, const int *devlist), 0) \
    X(ncclCommSplit, (cuabi__nccl_comm comm, int color, int key, cuabi__nccl_comm *newcomm, \
                      cuabi__nccl_config *config), 0)                          \
    X(ncclCommFinalize, (cuabi__nccl_comm comm), 1)                            \
    X(ncclCommAbort, (cuabi__nccl_comm comm), 1)                               \
    X(ncclCommDestroy, (cuabi__nccl_comm comm), 1)                             \
    X(ncclCommCount, (const cuabi__nccl_comm comm, int *count), 1)             \
    X(ncclCommCuDevice, (const cuabi__nccl_comm comm, int *device), 1)         \
    X(ncclCommUserRank, (const cuabi__nccl_comm comm, int *rank), 1)           \
    X(ncclCommGetAsyncError, (cuabi__nccl_comm comm, cuabi__nccl_result *error), 1) \
    X(ncclAllReduce, (const void *sendbuff, void *recvbuff, size_t count, int datatype, \
                      int op, cuabi__nccl_comm comm, CUstream stream), 1)      \
    X(ncclBroadcast, (const void *sendbuff, void *recvbuff, size_t count, int datatype, \
                      int root, cuabi__nccl_comm comm, CUstream stream), 1)    \
    X(ncclReduce, (const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, \
                   int root, cuabi__nccl_comm comm, CUstream stream), 1)       \
    X(ncclAllGather, (const void *sendbuff, void *recvbuff, size_t sendcount, int datatype, \
                      cuabi__nccl_comm comm, CUstream stream), 1)              \
    X(ncclReduceScatter, (const void *sendbuff, void *recvbuff, size_t recvcount, \
                          int datatype, int op, cuabi__nccl_comm comm, CUstream stream), 1) \
    X(ncclSend, (const void *sendbuff, size_t count, int datatype, int peer, \
                 cuabi__nccl_comm comm, CUstream stream), 1)                   \
    X(ncclRecv, (void *recvbuff, size_t count, int datatype, int peer,         \
                 cuabi__nccl_comm comm, CUstream stream), 1)                   \
    X(ncclGroupStart, (void), 1)                                               \
    X(ncclGroupEnd, (void), 1)                                                 \
    X(ncclCommRegister, (const cuabi__nccl_comm comm, void *buff, size_t size, void **handle), 0) \
    X(ncclCommDeregister, (const cuabi__nccl_comm comm, void *handle), 0)

#define CUABI__NCCL_FIELD(name, params, req) cuabi__nccl_result (*name) params;
typedef struct cuabi__nccl {
    CUABI__NCCL_FUNCS(CUABI__NCCL_FIELD)
    const char *(*ncclGetErrorString)(cuabi__nccl_result result);   /* required */
    const char *(*ncclGetLastError)(cuabi__nccl_comm comm);         /* optional (2.13) */
} cuabi__nccl;
#undef CUABI__NCCL_FIELD

/* Load (once) and return the table; on failure CUABI_ERROR_NOT_SUPPORTED
 * with a message naming NCCL, every place looked and the variables that
 * choose another. Thread-safe; the outcome is kept for the life of the
 * process (see the test hooks). */
cuabi_status cuabi__nccl_get_for(const cuabi__nccl **out, const char *caller);
#define cuabi__nccl_get(out) cuabi__nccl_get_for((out), __func__)
bool cuabi__nccl_loaded(void);
/* Path and version (NCCL's own code: 22809 = 2.28.9) once loaded, or why not. */
const cuabi__lib_info *cuabi__nccl_info(void);

/* The message of an NCCL result: "ncclInvalidUsage (invalid usage)" and
 * NCCL's last error for `comm` (or the thread's) when it has one. Writes at
 * most `cap` bytes; returns `buf`. */
const char *cuabi__nccl_describe(char *buf, size_t cap, const cuabi__nccl *nccl,
                                 cuabi__nccl_result r, cuabi__nccl_comm comm);

/* Testing: install a table (NULL: forget it and everything loaded, so the
 * next use loads again, reading the variables anew). Its version is asked
 * through the table, as a real load asks it. */
void cuabi__nccl_install_fake(const cuabi__nccl *fake);
/* Testing: the live table, to swap entries. */
cuabi__nccl *cuabi__nccl_for_test(void);

#endif
