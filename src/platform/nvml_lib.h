/* Loading NVML, the NVIDIA Management Library (nvml_lib.c), for the
 * cuabi_nvml_* functions (nvml.c).
 *
 * libnvidia-ml.so.1 comes with the driver, not the toolkit, and the
 * toolkit ships no nvml.h where configure looks: the small subset cuabi
 * calls is declared here with nvml.h's ABI (the C API has kept these
 * signatures and layouts since the _v2/_v3 names were introduced; the
 * versioned names are the ones resolved). The library is dlopen()ed on
 * first use and initialised once with nvmlInit_v2, never shut down: NVML
 * counts its initialisations, and a process that asked once keeps it.
 * Entry points are resolved one by one; only the three without which no
 * GPU can be named are required, every other one missing fails only what
 * needs it. Tests swap entries of the table (cuabi__nvml_for_test()) or
 * load the fake NVML (tests/fixtures/fake_nvml.c) through CUABI_NVML_PATH. */
#ifndef CUABI_PLATFORM_NVML_LIB_H
#define CUABI_PLATFORM_NVML_LIB_H

#include "platform/loader.h"

typedef int cuabi__nvml_return; /* nvmlReturn_t */
#define CUABI__NVML_SUCCESS 0
#define CUABI__NVML_ERROR_UNINITIALIZED 1
#define CUABI__NVML_ERROR_INVALID_ARGUMENT 2
#define CUABI__NVML_ERROR_NOT_SUPPORTED 3
#define CUABI__NVML_ERROR_NO_PERMISSION 4
#define CUABI__NVML_ERROR_NOT_FOUND 6
#define CUABI__NVML_ERROR_INSUFFICIENT_SIZE 7
#define CUABI__NVML_ERROR_DRIVER_NOT_LOADED 9
#define CUABI__NVML_ERROR_FUNCTION_NOT_FOUND 13
#define CUABI__NVML_ERROR_GPU_IS_LOST 15
#define CUABI__NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define CUABI__NVML_ERROR_UNKNOWN 999

typedef struct cuabi__nvml_device_st *cuabi__nvml_device; /* nvmlDevice_t */

/* nvmlPciInfo_t (the layout of nvmlDeviceGetPciInfo_v3). */
typedef struct cuabi__nvml_pci_info {
    char bus_id_legacy[16];
    unsigned int domain, bus, device;
    unsigned int pci_device_id;    /* device id << 16 | vendor id */
    unsigned int pci_subsystem_id;
    char bus_id[32];
} cuabi__nvml_pci_info;

/* nvmlMemory_t and nvmlMemory_v2_t. */
typedef struct cuabi__nvml_memory {
    unsigned long long total, free, used;
} cuabi__nvml_memory;
typedef struct cuabi__nvml_memory_v2 {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} cuabi__nvml_memory_v2;
/* NVML_STRUCT_VERSION(Memory, 2) */
#define CUABI__NVML_MEMORY_V2_VERSION ((unsigned)sizeof(cuabi__nvml_memory_v2) | (2u << 24))

typedef struct cuabi__nvml_utilization {
    unsigned int gpu, memory;
} cuabi__nvml_utilization;

/* nvmlProcessInfo_t (v2 layout: the _v2 and _v3 process queries). */
typedef struct cuabi__nvml_process_info {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id, compute_instance_id;
} cuabi__nvml_process_info;

/* Enumerations NVML takes, by value (nvml.h's numbers). */
enum {
    CUABI__NVML_TEMPERATURE_GPU = 0,
    CUABI__NVML_CLOCK_GRAPHICS = 0, CUABI__NVML_CLOCK_SM = 1, CUABI__NVML_CLOCK_MEM = 2,
    CUABI__NVML_MEMORY_ERROR_CORRECTED = 0, CUABI__NVML_MEMORY_ERROR_UNCORRECTED = 1,
    CUABI__NVML_VOLATILE_ECC = 0, CUABI__NVML_AGGREGATE_ECC = 1,
    CUABI__NVML_PCIE_UTIL_TX_BYTES = 0, CUABI__NVML_PCIE_UTIL_RX_BYTES = 1,
    CUABI__NVML_NVLINK_CAP_P2P_SUPPORTED = 0,
    CUABI__NVML_P2P_CAPS_INDEX_READ = 0, CUABI__NVML_P2P_CAPS_INDEX_WRITE = 1,
    CUABI__NVML_P2P_CAPS_INDEX_NVLINK = 2, CUABI__NVML_P2P_CAPS_INDEX_ATOMICS = 3,
    CUABI__NVML_P2P_CAPS_INDEX_PCI = 4,
    CUABI__NVML_PSTATE_UNKNOWN = 32,
};
/* nvmlProcessInfo_t.usedGpuMemory when NVML cannot tell. */
#define CUABI__NVML_VALUE_NOT_AVAILABLE 0xffffffffffffffffULL
/* Links cuabi asks about (NVML_NVLINK_MAX_LINKS is 18 in CUDA 12/13's
 * nvml.h; a later NVML with more answers for them too). */
#define CUABI__NVML_MAX_LINKS 32

typedef cuabi__nvml_device cuabi__nvdev;
/* NVML's entry points: X(name, parameters, arguments, required). All return
 * nvmlReturn_t; nvmlErrorString is resolved on its own. */
#define CUABI__NVML_FUNCS(X)                                                                    \
    X(nvmlInit_v2, (void), (), 1)                                                               \
    X(nvmlShutdown, (void), (), 0)                                                              \
    X(nvmlDeviceGetCount_v2, (unsigned int *count), (count), 1)                                 \
    X(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, cuabi__nvdev *device),                \
      (index, device), 1)                                                                       \
    X(nvmlSystemGetDriverVersion, (char *version, unsigned int length), (version, length), 0)   \
    X(nvmlSystemGetNVMLVersion, (char *version, unsigned int length), (version, length), 0)     \
    X(nvmlSystemGetCudaDriverVersion_v2, (int *version), (version), 0)                          \
    X(nvmlSystemGetCudaDriverVersion, (int *version), (version), 0)                             \
    X(nvmlDeviceGetName, (cuabi__nvdev d, char *name, unsigned int length),                     \
      (d, name, length), 0)                                                                     \
    X(nvmlDeviceGetUUID, (cuabi__nvdev d, char *uuid, unsigned int length),                     \
      (d, uuid, length), 0)                                                                     \
    X(nvmlDeviceGetPciInfo_v3, (cuabi__nvdev d, cuabi__nvml_pci_info *pci), (d, pci), 0)        \
    X(nvmlDeviceGetCudaComputeCapability, (cuabi__nvdev d, int *major, int *minor),             \
      (d, major, minor), 0)                                                                     \
    X(nvmlDeviceGetMinorNumber, (cuabi__nvdev d, unsigned int *minor), (d, minor), 0)           \
    X(nvmlDeviceGetMemoryInfo_v2, (cuabi__nvdev d, cuabi__nvml_memory_v2 *m), (d, m), 0)        \
    X(nvmlDeviceGetMemoryInfo, (cuabi__nvdev d, cuabi__nvml_memory *m), (d, m), 0)              \
    X(nvmlDeviceGetUtilizationRates, (cuabi__nvdev d, cuabi__nvml_utilization *u), (d, u), 0)   \
    X(nvmlDeviceGetTemperature, (cuabi__nvdev d, int sensor, unsigned int *temp),               \
      (d, sensor, temp), 0)                                                                     \
    X(nvmlDeviceGetPowerUsage, (cuabi__nvdev d, unsigned int *mw), (d, mw), 0)                  \
    X(nvmlDeviceGetEnforcedPowerLimit, (cuabi__nvdev d, unsigned int *mw), (d, mw), 0)          \
    X(nvmlDeviceGetPowerManagementLimit, (cuabi__nvdev d, unsigned int *mw), (d, mw), 0)        \
    X(nvmlDeviceGetClockInfo, (cuabi__nvdev d, int type, unsigned int *mhz),                    \
      (d, type, mhz), 0)                                                                        \
    X(nvmlDeviceGetMaxClockInfo, (cuabi__nvdev d, int type, unsigned int *mhz),                 \
      (d, type, mhz), 0)                                                                        \
    X(nvmlDeviceGetEccMode, (cuabi__nvdev d, int *current, int *pending),                       \
      (d, current, pending), 0)                                                                 \
    X(nvmlDeviceGetTotalEccErrors,                                                              \
      (cuabi__nvdev d, int error_type, int counter_type, unsigned long long *count),            \
      (d, error_type, counter_type, count), 0)                                                  \
    X(nvmlDeviceGetCurrentClocksEventReasons, (cuabi__nvdev d, unsigned long long *reasons),    \
      (d, reasons), 0)                                                                          \
    X(nvmlDeviceGetCurrentClocksThrottleReasons,                                                \
      (cuabi__nvdev d, unsigned long long *reasons),                                            \
      (d, reasons), 0)                                                                          \
    X(nvmlDeviceGetCurrPcieLinkGeneration, (cuabi__nvdev d, unsigned int *gen), (d, gen), 0)    \
    X(nvmlDeviceGetCurrPcieLinkWidth, (cuabi__nvdev d, unsigned int *width), (d, width), 0)     \
    X(nvmlDeviceGetMaxPcieLinkGeneration, (cuabi__nvdev d, unsigned int *gen), (d, gen), 0)     \
    X(nvmlDeviceGetMaxPcieLinkWidth, (cuabi__nvdev d, unsigned int *width), (d, width), 0)      \
    X(nvmlDeviceGetPcieThroughput, (cuabi__nvdev d, int counter, unsigned int *kib),            \
      (d, counter, kib), 0)                                                                     \
    X(nvmlDeviceGetPerformanceState, (cuabi__nvdev d, int *pstate), (d, pstate), 0)             \
    X(nvmlDeviceGetFanSpeed, (cuabi__nvdev d, unsigned int *percent), (d, percent), 0)          \
    X(nvmlDeviceGetNvLinkState, (cuabi__nvdev d, unsigned int link, int *active),               \
      (d, link, active), 0)                                                                     \
    X(nvmlDeviceGetNvLinkVersion, (cuabi__nvdev d, unsigned int link, unsigned int *v),         \
      (d, link, v), 0)                                                                          \
    X(nvmlDeviceGetNvLinkCapability,                                                            \
      (cuabi__nvdev d, unsigned int link, int capability, unsigned int *result),                \
      (d, link, capability, result), 0)                                                         \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2,                                                      \
      (cuabi__nvdev d, unsigned int link, cuabi__nvml_pci_info *pci),                           \
      (d, link, pci), 0)                                                                        \
    X(nvmlDeviceGetTopologyCommonAncestor, (cuabi__nvdev a, cuabi__nvdev b, int *level),        \
      (a, b, level), 0)                                                                         \
    X(nvmlDeviceGetP2PStatus, (cuabi__nvdev a, cuabi__nvdev b, int caps_index, int *status),    \
      (a, b, caps_index, status), 0)                                                            \
    X(nvmlDeviceGetComputeRunningProcesses_v3,                                                  \
      (cuabi__nvdev d, unsigned int *count, cuabi__nvml_process_info *infos),                   \
      (d, count, infos), 0)                                                                     \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3,                                                 \
      (cuabi__nvdev d, unsigned int *count, cuabi__nvml_process_info *infos),                   \
      (d, count, infos), 0)                                                                     \
    X(nvmlDeviceGetComputeRunningProcesses_v2,                                                  \
      (cuabi__nvdev d, unsigned int *count, cuabi__nvml_process_info *infos),                   \
      (d, count, infos), 0)                                                                     \
    X(nvmlDeviceGetGraphicsRunningProcesses_v2,                                                 \
      (cuabi__nvdev d, unsigned int *count, cuabi__nvml_process_info *infos),                   \
      (d, count, infos), 0)

#define CUABI__NVML_FIELD(name, params, args, req) cuabi__nvml_return (*name) params;
typedef struct cuabi__nvml {
    CUABI__NVML_FUNCS(CUABI__NVML_FIELD)
    const char *(*nvmlErrorString)(cuabi__nvml_return result);
} cuabi__nvml;
#undef CUABI__NVML_FIELD

/* Load and initialise NVML (once) and return the table; on failure
 * CUABI_ERROR_NOT_SUPPORTED with "<caller>: NVML not available: <why>",
 * naming the files tried or NVML's own reason. Thread-safe; the outcome is
 * kept for the life of the process (see the test hook). */
cuabi_status cuabi__nvml_get_for(const cuabi__nvml **out, const char *caller);
#define cuabi__nvml_get(out) cuabi__nvml_get_for((out), __func__)
bool cuabi__nvml_loaded(void);
const cuabi__lib_info *cuabi__nvml_info(void);

/* "Insufficient Permissions (NVML_ERROR_NO_PERMISSION, 4)": NVML's own
 * words where it has them, and the code's name. */
void cuabi__nvml_describe(char *out, size_t cap, cuabi__nvml_return r);
/* A failed call: CUABI_ERROR_NVML with nvml_result set, the message naming
 * the caller and the entry point. */
cuabi_status cuabi__nvml_fail(cuabi__nvml_return r, const char *entry, const char *caller);

/* Testing: the live table, to swap entries; forget the load (the next call
 * loads again, after a change of CUABI_NVML_PATH; an NVML that was
 * initialised is shut down first, so a fake's count stays even). */
cuabi__nvml *cuabi__nvml_for_test(void);
void cuabi__nvml_reset_for_test(void);
/* Testing: an in-process NVML (fuzz/fuzz_nvml.c) instead of a loaded one:
 * marks NVML loaded without calling nvmlInit_v2; NULL forgets it. */
void cuabi__nvml_install_fake(const cuabi__nvml *fake);

#endif
