/* NVML: the machine, its GPUs and their health, without a CUDA context;
 * the mapping to CUDA ordinals (api/nvml.toml, docs/nvml.md). */
#include "platform/nvml_query.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ queries */

bool cuabi__nvq_answer(cuabi__nvq *q, cuabi__nvml_return r, uint64_t bit, const char *entry)
{
    if (r == CUABI__NVML_SUCCESS)
        return true;
    if (r == CUABI__NVML_ERROR_NOT_SUPPORTED || r == CUABI__NVML_ERROR_NO_PERMISSION ||
        r == CUABI__NVML_ERROR_FUNCTION_NOT_FOUND ||
        (q->invalid_is_unavailable && r == CUABI__NVML_ERROR_INVALID_ARGUMENT)) {
        q->unavailable |= bit;
        return false;
    }
    if (q->st == CUABI_SUCCESS)
        q->st = cuabi__nvml_fail(r, entry, q->caller);
    return false;
}

cuabi_status cuabi__nvml_count(const cuabi__nvml *nv, unsigned *out, const char *caller)
{
    *out = 0;
    cuabi__nvml_return r = nv->nvmlDeviceGetCount_v2(out);
    if (r != CUABI__NVML_SUCCESS)
        return cuabi__nvml_fail(r, "nvmlDeviceGetCount_v2", caller);
    if (*out > CUABI__NVML_MAX_DEVICES) {
        unsigned n = *out;
        *out = 0;
        return cuabi__error(CUABI_ERROR_NVML, "%s: nvmlDeviceGetCount_v2 reports %u GPUs, more "
                            "than the %d cuabi takes from it", caller, n,
                            CUABI__NVML_MAX_DEVICES);
    }
    return CUABI_SUCCESS;
}

cuabi_status cuabi__nvml_handle(const cuabi__nvml *nv, int index, cuabi__nvdev *out,
                                const char *caller)
{
    unsigned count;
    CUABI__TRY(cuabi__nvml_count(nv, &count, caller));
    if (index < 0 || (unsigned)index >= count)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: GPU index %d: NVML lists %u "
                            "GPU%s (indices 0 .. %d)", caller, index, count,
                            count == 1 ? "" : "s", (int)count - 1);
    *out = NULL;
    cuabi__nvml_return r = nv->nvmlDeviceGetHandleByIndex_v2((unsigned)index, out);
    if (r != CUABI__NVML_SUCCESS)
        return cuabi__nvml_fail(r, "nvmlDeviceGetHandleByIndex_v2", caller);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__nvq_open(cuabi__nvq *q, int index, const char *caller)
{
    *q = (cuabi__nvq){ .caller = caller, .st = CUABI_SUCCESS };
    CUABI__TRY(cuabi__nvml_get_for(&q->nv, caller));
    return cuabi__nvml_handle(q->nv, index, &q->dev, caller);
}

/* A string NVML writes into a buffer of `cap` bytes: always terminated
 * here, whatever the library wrote, and printable ASCII (names, UUIDs,
 * versions and bus ids are; any other byte reads '?', so no answer puts a
 * control sequence on a terminal or invalid UTF-8 in a binding's string). */
void cuabi__nvml_text(char *s, size_t cap)
{
    s[cap - 1] = '\0';
    for (size_t i = 0; s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            s[i] = '?';
}

/* "GPU-5d2f8b2a-...", "MIG-...", or the 32 hex digits alone, dashes
 * anywhere between pairs: 0 and the 16 bytes, or -1. */
static int parse_uuid(const char *s, uint8_t out[16])
{
    if (!strncasecmp(s, "GPU-", 4) || !strncasecmp(s, "MIG-", 4))
        s += 4;
    int n = 0;
    for (; *s && n < 32; s++) {
        if (*s == '-')
            continue;
        if (!isxdigit((unsigned char)*s))
            return -1;
        int v = isdigit((unsigned char)*s) ? *s - '0' : tolower((unsigned char)*s) - 'a' + 10;
        out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | v : v << 4);
        n++;
    }
    return n == 32 && *s == '\0' ? 0 : -1;
}

/* "0000:17:00.0", "00000000:17:00.0" or "17:00.0": 0, or -1. */
static int parse_pci(const char *s, unsigned *domain, unsigned *bus, unsigned *device)
{
    unsigned d = 0, b = 0, dev = 0, fn = 0;
    int used = 0;
    if (strlen(s) > 24 || !strchr(s, ':'))
        return -1;
    for (const char *p = s; *p; p++) /* no sign, space or 0x for sscanf to take */
        if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
            return -1;
    bool whole = sscanf(s, "%8x:%2x:%2x.%1x%n", &d, &b, &dev, &fn, &used) == 4 && !s[used];
    if (!whole) {
        d = 0, used = 0;
        if (sscanf(s, "%2x:%2x.%1x%n", &b, &dev, &fn, &used) != 3 || s[used])
            return -1;
    }
    if (dev > 31 || fn > 7)
        return -1;
    *domain = d, *bus = b, *device = dev;
    return 0;
}

/* ------------------------------------------------------------ system */

CUABI_EXTERN(cuabi_status) cuabi_nvml_system_info_get(cuabi_nvml_system_info *out)
{
    CUABI__CHECK_OPTS(out, "cuabi_nvml_system_info", CUABI_NVML_SYSTEM_INFO_VERSION, false);
    unsigned v = out->version;
    *out = (cuabi_nvml_system_info){ .version = v, .library_path = "" };
    cuabi__nvq q = { .caller = __func__, .st = CUABI_SUCCESS };
    CUABI__TRY(cuabi__nvml_get(&q.nv));
    unsigned count;
    CUABI__TRY(cuabi__nvml_count(q.nv, &count, __func__));
    out->device_count = (int)count;
    out->library_path = cuabi__nvml_info()->path;
    if (CUABI__NVQ_ASK(&q, 1, nvmlSystemGetDriverVersion, out->driver_version,
                       sizeof out->driver_version))
        cuabi__nvml_text(out->driver_version, sizeof out->driver_version);
    else
        out->driver_version[0] = '\0';
    if (CUABI__NVQ_ASK(&q, 1, nvmlSystemGetNVMLVersion, out->nvml_version,
                       sizeof out->nvml_version))
        cuabi__nvml_text(out->nvml_version, sizeof out->nvml_version);
    else
        out->nvml_version[0] = '\0';
    int cuda = 0;
    if (q.nv->nvmlSystemGetCudaDriverVersion_v2
            ? CUABI__NVQ_ASK(&q, 1, nvmlSystemGetCudaDriverVersion_v2, &cuda)
            : CUABI__NVQ_ASK(&q, 1, nvmlSystemGetCudaDriverVersion, &cuda))
        out->cuda_driver_version = cuda > 0 ? cuda : 0;
    return q.st;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_count(int *out)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    const cuabi__nvml *nv;
    CUABI__TRY(cuabi__nvml_get(&nv));
    unsigned count;
    CUABI__TRY(cuabi__nvml_count(nv, &count, __func__));
    *out = (int)count;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ one GPU */

/* NVML's UUID of the query's GPU, as text and bytes (bit set when the
 * text is missing or not a UUID). */
static void ask_uuid(cuabi__nvq *q, char *text, size_t cap, uint8_t bytes[16])
{
    char buf[96] = "";
    if (CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_UUID, nvmlDeviceGetUUID, q->dev, buf, sizeof buf)) {
        cuabi__nvml_text(buf, sizeof buf);
        snprintf(text, cap, "%s", buf);
        if (parse_uuid(buf, bytes) != 0) {
            memset(bytes, 0, 16);
            q->unavailable |= CUABI_NVML_FIELD_UUID;
        }
    }
}

static void ask_pci(cuabi__nvq *q, cuabi_nvml_device_info *out)
{
    cuabi__nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    if (!CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_PCI, nvmlDeviceGetPciInfo_v3, q->dev, &pci))
        return;
    cuabi__nvml_text(pci.bus_id, sizeof pci.bus_id);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", pci.bus_id);
    out->pci_domain = pci.domain;
    out->pci_bus = pci.bus;
    out->pci_device = pci.device;
    out->pci_device_id = pci.pci_device_id;
}

int cuabi__nvq_nvlink_count(cuabi__nvq *q)
{
    int count = 0;
    bool saved = q->invalid_is_unavailable;
    q->invalid_is_unavailable = true; /* past NVML's last link */
    for (unsigned link = 0; link < CUABI__NVML_MAX_LINKS && q->st == CUABI_SUCCESS; link++) {
        int active = 0;
        uint64_t before = q->unavailable;
        if (CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_NVLINK_STATE, nvmlDeviceGetNvLinkState, q->dev,
                           link, &active))
            count = (int)link + 1;
        q->unavailable = before;
    }
    q->invalid_is_unavailable = saved;
    return count;
}

/* A field and the bit that says NVML did not report it. */
typedef struct field_bit {
    uint64_t bit;
    size_t offset, size;
} field_bit;
#define FB(type, bit, field) { bit, offsetof(type, field), sizeof(((type *)0)->field) }

/* Every field whose bit is set reads 0, whatever NVML wrote there before it
 * answered "not supported" (a pair NVML reported only in part included). */
static void zero_unreported(void *s, uint64_t u, const field_bit *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (u & f[i].bit)
            memset((char *)s + f[i].offset, 0, f[i].size);
}

#define H(bit, field) FB(cuabi_nvml_health, CUABI_NVML_FIELD_##bit, field)
static const field_bit health_fields[] = {
    H(MEMORY, memory_total), H(MEMORY, memory_free), H(MEMORY, memory_used),
    H(MEMORY_RESERVED, memory_reserved), H(UTILIZATION, utilization_gpu),
    H(UTILIZATION, utilization_memory), H(TEMPERATURE, temperature_gpu),
    H(POWER_USAGE, power_usage_mw), H(POWER_LIMIT, power_limit_mw),
    H(POWER_MANAGEMENT_LIMIT, power_management_limit_mw),
    H(CLOCK_GRAPHICS, clock_graphics_mhz), H(CLOCK_SM, clock_sm_mhz),
    H(CLOCK_MEMORY, clock_memory_mhz), H(ECC_VOLATILE, ecc_corrected_volatile),
    H(ECC_VOLATILE, ecc_uncorrected_volatile), H(ECC_AGGREGATE, ecc_corrected_aggregate),
    H(ECC_AGGREGATE, ecc_uncorrected_aggregate), H(THROTTLE_REASONS, throttle_reasons),
    H(PCIE_LINK, pcie_generation), H(PCIE_LINK, pcie_width),
    H(PERFORMANCE_STATE, performance_state), H(FAN_SPEED, fan_speed_percent),
};
#undef H
#define I(bit, field) FB(cuabi_nvml_device_info, CUABI_NVML_FIELD_##bit, field)
static const field_bit info_fields[] = {
    I(COMPUTE_CAPABILITY, compute_capability_major),
    I(COMPUTE_CAPABILITY, compute_capability_minor),
    I(MEMORY_TOTAL, memory_total), I(PCIE_MAX_LINK, pcie_max_generation),
    I(PCIE_MAX_LINK, pcie_max_width), I(MAX_CLOCKS, max_clock_graphics_mhz),
    I(MAX_CLOCKS, max_clock_sm_mhz), I(MAX_CLOCKS, max_clock_memory_mhz),
    I(ECC_MODE, ecc_enabled), I(ECC_MODE, ecc_pending), I(MINOR_NUMBER, minor_number),
};
#undef I

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_info_get(cuabi_nvml_device_info *out, int index)
{
    CUABI__CHECK_OPTS(out, "cuabi_nvml_device_info", CUABI_NVML_DEVICE_INFO_VERSION, false);
    unsigned v = out->version;
    *out = (cuabi_nvml_device_info){ .version = v, .index = index };
    cuabi__nvq q;
    CUABI__TRY(cuabi__nvq_open(&q, index, __func__));
    char name[96] = "";
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_NAME, nvmlDeviceGetName, q.dev, name, sizeof name)) {
        cuabi__nvml_text(name, sizeof name);
        snprintf(out->name, sizeof out->name, "%s", name);
    }
    ask_uuid(&q, out->uuid, sizeof out->uuid, out->uuid_bytes);
    ask_pci(&q, out);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_COMPUTE_CAPABILITY, nvmlDeviceGetCudaComputeCapability,
                   q.dev, &out->compute_capability_major, &out->compute_capability_minor);
    cuabi__nvml_memory m = { 0 };
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_MEMORY_TOTAL, nvmlDeviceGetMemoryInfo, q.dev, &m))
        out->memory_total = m.total;
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_PCIE_MAX_LINK, nvmlDeviceGetMaxPcieLinkGeneration, q.dev,
                   &out->pcie_max_generation);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_PCIE_MAX_LINK, nvmlDeviceGetMaxPcieLinkWidth, q.dev,
                   &out->pcie_max_width);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_MAX_CLOCKS, nvmlDeviceGetMaxClockInfo, q.dev,
                   CUABI__NVML_CLOCK_GRAPHICS, &out->max_clock_graphics_mhz);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_MAX_CLOCKS, nvmlDeviceGetMaxClockInfo, q.dev,
                   CUABI__NVML_CLOCK_SM, &out->max_clock_sm_mhz);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_MAX_CLOCKS, nvmlDeviceGetMaxClockInfo, q.dev,
                   CUABI__NVML_CLOCK_MEM, &out->max_clock_memory_mhz);
    int cur = 0, pend = 0;
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_ECC_MODE, nvmlDeviceGetEccMode, q.dev, &cur, &pend))
        out->ecc_enabled = cur != 0, out->ecc_pending = pend != 0;
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_MINOR_NUMBER, nvmlDeviceGetMinorNumber, q.dev,
                   &out->minor_number);
    out->nvlink_count = cuabi__nvq_nvlink_count(&q);
    out->unavailable = q.unavailable;
    zero_unreported(out, q.unavailable, info_fields, sizeof info_fields / sizeof *info_fields);
    if (q.st != CUABI_SUCCESS) /* nothing half-read is handed out */
        *out = (cuabi_nvml_device_info){ .version = v, .index = index };
    return q.st;
}

/* Memory: version 2 (with what the driver reserves), else version 1
 * (whose `used` counts the reserved bytes too): an NVML without v2, or
 * one that refuses this version of the struct. */
static void ask_memory(cuabi__nvq *q, cuabi_nvml_health *out)
{
    cuabi__nvml_memory_v2 m2 = { .version = CUABI__NVML_MEMORY_V2_VERSION };
    if (q->nv->nvmlDeviceGetMemoryInfo_v2) {
        cuabi__nvml_return r = q->nv->nvmlDeviceGetMemoryInfo_v2(q->dev, &m2);
        if (r == CUABI__NVML_SUCCESS) {
            out->memory_total = m2.total, out->memory_free = m2.free;
            out->memory_used = m2.used, out->memory_reserved = m2.reserved;
            return;
        }
        if (r != CUABI__NVML_ERROR_ARGUMENT_VERSION_MISMATCH &&
            r != CUABI__NVML_ERROR_INVALID_ARGUMENT) {
            cuabi__nvq_answer(q, r, 0, "nvmlDeviceGetMemoryInfo_v2"); /* not reported, or failed */
            if (q->st != CUABI_SUCCESS)
                return;
        }
    }
    q->unavailable |= CUABI_NVML_FIELD_MEMORY_RESERVED;
    cuabi__nvml_memory m = { 0 };
    if (CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_MEMORY, nvmlDeviceGetMemoryInfo, q->dev, &m))
        out->memory_total = m.total, out->memory_free = m.free, out->memory_used = m.used;
}

static void ask_ecc(cuabi__nvq *q, cuabi_nvml_health *out)
{
    static const struct { int type, counter; uint64_t bit; size_t offset; } asks[] = {
        { CUABI__NVML_MEMORY_ERROR_CORRECTED, CUABI__NVML_VOLATILE_ECC,
          CUABI_NVML_FIELD_ECC_VOLATILE, offsetof(cuabi_nvml_health, ecc_corrected_volatile) },
        { CUABI__NVML_MEMORY_ERROR_UNCORRECTED, CUABI__NVML_VOLATILE_ECC,
          CUABI_NVML_FIELD_ECC_VOLATILE, offsetof(cuabi_nvml_health, ecc_uncorrected_volatile) },
        { CUABI__NVML_MEMORY_ERROR_CORRECTED, CUABI__NVML_AGGREGATE_ECC,
          CUABI_NVML_FIELD_ECC_AGGREGATE, offsetof(cuabi_nvml_health, ecc_corrected_aggregate) },
        { CUABI__NVML_MEMORY_ERROR_UNCORRECTED, CUABI__NVML_AGGREGATE_ECC,
          CUABI_NVML_FIELD_ECC_AGGREGATE,
          offsetof(cuabi_nvml_health, ecc_uncorrected_aggregate) },
    };
    for (size_t i = 0; i < sizeof asks / sizeof *asks; i++) {
        unsigned long long n = 0;
        if (CUABI__NVQ_ASK(q, asks[i].bit, nvmlDeviceGetTotalEccErrors, q->dev, asks[i].type,
                           asks[i].counter, &n))
            memcpy((char *)out + asks[i].offset, &(uint64_t){ n }, sizeof(uint64_t));
    }
}

/* Power, clocks, throttle reasons, P-state, fan. */
static void ask_power_clocks(cuabi__nvq *q, cuabi_nvml_health *out)
{
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_POWER_USAGE, nvmlDeviceGetPowerUsage, q->dev,
                   &out->power_usage_mw);
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_POWER_LIMIT, nvmlDeviceGetEnforcedPowerLimit, q->dev,
                   &out->power_limit_mw);
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_POWER_MANAGEMENT_LIMIT, nvmlDeviceGetPowerManagementLimit,
                   q->dev, &out->power_management_limit_mw);
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_CLOCK_GRAPHICS, nvmlDeviceGetClockInfo, q->dev,
                   CUABI__NVML_CLOCK_GRAPHICS, &out->clock_graphics_mhz);
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_CLOCK_SM, nvmlDeviceGetClockInfo, q->dev,
                   CUABI__NVML_CLOCK_SM, &out->clock_sm_mhz);
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_CLOCK_MEMORY, nvmlDeviceGetClockInfo, q->dev,
                   CUABI__NVML_CLOCK_MEM, &out->clock_memory_mhz);
    unsigned long long reasons = 0;
    /* The new name (R535 on), else the old one. */
    if (q->nv->nvmlDeviceGetCurrentClocksEventReasons
            ? CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_THROTTLE_REASONS,
                             nvmlDeviceGetCurrentClocksEventReasons, q->dev, &reasons)
            : CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_THROTTLE_REASONS,
                             nvmlDeviceGetCurrentClocksThrottleReasons, q->dev, &reasons))
        out->throttle_reasons = reasons;
    int pstate = 0;
    if (CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_PERFORMANCE_STATE, nvmlDeviceGetPerformanceState,
                       q->dev, &pstate)) {
        if (pstate >= 0 && pstate <= 15)
            out->performance_state = pstate;
        else
            q->unavailable |= CUABI_NVML_FIELD_PERFORMANCE_STATE;
    }
    CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_FAN_SPEED, nvmlDeviceGetFanSpeed, q->dev,
                   &out->fan_speed_percent);
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_health_get(cuabi_nvml_health *out, int index)
{
    CUABI__CHECK_OPTS(out, "cuabi_nvml_health", CUABI_NVML_HEALTH_VERSION, false);
    unsigned v = out->version;
    *out = (cuabi_nvml_health){ .version = v, .index = index };
    cuabi__nvq q;
    CUABI__TRY(cuabi__nvq_open(&q, index, __func__));
    ask_memory(&q, out);
    cuabi__nvml_utilization u = { 0 };
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_UTILIZATION, nvmlDeviceGetUtilizationRates, q.dev,
                       &u))
        out->utilization_gpu = u.gpu, out->utilization_memory = u.memory;
    unsigned temp = 0;
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_TEMPERATURE, nvmlDeviceGetTemperature, q.dev,
                       CUABI__NVML_TEMPERATURE_GPU, &temp))
        out->temperature_gpu = temp > 1000 ? 1000 : (int)temp;
    ask_power_clocks(&q, out);
    ask_ecc(&q, out);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_PCIE_LINK, nvmlDeviceGetCurrPcieLinkGeneration, q.dev,
                   &out->pcie_generation);
    CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_PCIE_LINK, nvmlDeviceGetCurrPcieLinkWidth, q.dev,
                   &out->pcie_width);
    out->unavailable = q.unavailable;
    zero_unreported(out, q.unavailable, health_fields,
                    sizeof health_fields / sizeof *health_fields);
    if (q.st != CUABI_SUCCESS) /* nothing half-read is handed out */
        *out = (cuabi_nvml_health){ .version = v, .index = index };
    return q.st;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_pcie_throughput(unsigned int *tx_kib_per_s,
                                                             unsigned int *rx_kib_per_s,
                                                             int index)
{
    CUABI__CHECK_ARG(tx_kib_per_s && rx_kib_per_s, "%s: tx_kib_per_s or rx_kib_per_s is NULL",
                     __func__);
    *tx_kib_per_s = *rx_kib_per_s = 0;
    cuabi__nvq q;
    unsigned tx = 0, rx = 0;
    CUABI__TRY(cuabi__nvq_open(&q, index, __func__));
    CUABI__NVQ_ASK(&q, 1, nvmlDeviceGetPcieThroughput, q.dev, CUABI__NVML_PCIE_UTIL_TX_BYTES, &tx);
    CUABI__NVQ_ASK(&q, 1, nvmlDeviceGetPcieThroughput, q.dev, CUABI__NVML_PCIE_UTIL_RX_BYTES, &rx);
    CUABI__TRY(q.st);
    if (q.unavailable)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: NVML does not count PCIe bytes of "
                            "GPU %d here (not supported, or no permission)", __func__, index);
    *tx_kib_per_s = tx, *rx_kib_per_s = rx;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ finding GPUs */

/* The UUID bytes of GPU `index` (CUABI_ERROR_NOT_SUPPORTED when NVML does
 * not tell them). */
static cuabi_status uuid_of(const cuabi__nvml *nv, int index, uint8_t bytes[16],
                            const char *caller)
{
    cuabi__nvq q = { .nv = nv, .caller = caller, .st = CUABI_SUCCESS };
    CUABI__TRY(cuabi__nvml_handle(nv, index, &q.dev, caller));
    char text[96] = "";
    ask_uuid(&q, text, sizeof text, bytes);
    if (q.st == CUABI_SUCCESS && (q.unavailable & CUABI_NVML_FIELD_UUID))
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: NVML does not tell GPU %d's UUID%s%s",
                            caller, index, text[0] ? " (it says " : "",
                            text[0] ? "something else)" : "");
    return q.st;
}

cuabi_status cuabi__nvml_index_of_pci(const cuabi__nvml *nv, unsigned domain, unsigned bus,
                                      unsigned device, int *out, const char *caller)
{
    unsigned count;
    *out = -1;
    CUABI__TRY(cuabi__nvml_count(nv, &count, caller));
    for (unsigned i = 0; i < count; i++) {
        cuabi__nvq q = { .nv = nv, .caller = caller, .st = CUABI_SUCCESS };
        cuabi_nvml_device_info info = { .version = CUABI_NVML_DEVICE_INFO_VERSION };
        CUABI__TRY(cuabi__nvml_handle(nv, (int)i, &q.dev, caller));
        ask_pci(&q, &info);
        CUABI__TRY(q.st);
        if (!(q.unavailable & CUABI_NVML_FIELD_PCI) && info.pci_domain == domain &&
            info.pci_bus == bus && info.pci_device == device) {
            *out = (int)i;
            break;
        }
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_find(int *out, const char *id)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = -1;
    CUABI__CHECK_ARG(id, "%s: id is NULL", __func__);
    uint8_t want[16];
    unsigned domain, bus, device;
    bool by_uuid = strnlen(id, 128) < 128 && parse_uuid(id, want) == 0;
    bool by_pci = !by_uuid && strnlen(id, 128) < 128 && parse_pci(id, &domain, &bus, &device) == 0;
    CUABI__CHECK_ARG(by_uuid || by_pci, "%s: \"%.100s\" is neither a GPU UUID "
                     "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) nor a PCI bus id "
                     "(0000:17:00.0)", __func__, id);
    const cuabi__nvml *nv;
    CUABI__TRY(cuabi__nvml_get(&nv));
    if (by_pci) {
        CUABI__TRY(cuabi__nvml_index_of_pci(nv, domain, bus, device, out, __func__));
    } else {
        unsigned count;
        CUABI__TRY(cuabi__nvml_count(nv, &count, __func__));
        for (unsigned i = 0; i < count && *out < 0; i++) {
            uint8_t have[16];
            cuabi_status st = uuid_of(nv, (int)i, have, __func__);
            if (st == CUABI_ERROR_NOT_SUPPORTED)
                continue; /* a GPU without a UUID is not the one */
            CUABI__TRY(st);
            if (!memcmp(have, want, 16))
                *out = (int)i;
        }
    }
    if (*out < 0)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: no GPU NVML lists is %.100s", __func__,
                            id);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ CUDA ordinals */

/* The driver, initialised (cuInit: no context) and its device count. */
static cuabi_status cuda_devices(const cuabi__driver **drv, int *count, const char *caller)
{
    *count = 0;
    CUABI__TRY(cuabi__driver_get_for(drv, caller));
    CUABI__TRY(CUABI__CU_IN(caller, *drv, cuDeviceGetCount, count));
    return CUABI_SUCCESS;
}

static cuabi_status cuda_uuid(const cuabi__driver *drv, int ordinal, uint8_t out[16],
                              const char *caller)
{
    CUdevice dev;
    CUuuid u;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuDeviceGet, &dev, ordinal));
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuDeviceGetUuid, &u, dev));
    memcpy(out, u.bytes, 16);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_cuda_ordinal(int *out, int index)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = -1;
    const cuabi__nvml *nv;
    uint8_t want[16];
    CUABI__TRY(cuabi__nvml_get(&nv));
    CUABI__TRY(uuid_of(nv, index, want, __func__));
    const cuabi__driver *drv;
    int count;
    CUABI__TRY(cuda_devices(&drv, &count, __func__));
    for (int i = 0; i < count; i++) {
        uint8_t have[16];
        CUABI__TRY(cuda_uuid(drv, i, have, __func__));
        if (!memcmp(have, want, 16)) {
            *out = i;
            break;
        }
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_from_cuda_ordinal(int *out, int ordinal)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = -1;
    const cuabi__nvml *nv;
    CUABI__TRY(cuabi__nvml_get(&nv));
    const cuabi__driver *drv;
    int cuda_count;
    CUABI__TRY(cuda_devices(&drv, &cuda_count, __func__));
    CUABI__CHECK_ARG(ordinal >= 0 && ordinal < cuda_count, "%s: CUDA ordinal %d: CUDA shows "
                     "%d device%s here", __func__, ordinal, cuda_count,
                     cuda_count == 1 ? "" : "s");
    uint8_t want[16];
    CUABI__TRY(cuda_uuid(drv, ordinal, want, __func__));
    unsigned count;
    CUABI__TRY(cuabi__nvml_count(nv, &count, __func__));
    for (unsigned i = 0; i < count; i++) {
        uint8_t have[16];
        cuabi_status st = uuid_of(nv, (int)i, have, __func__);
        if (st == CUABI_ERROR_NOT_SUPPORTED)
            continue;
        CUABI__TRY(st);
        if (!memcmp(have, want, 16)) {
            *out = (int)i;
            return CUABI_SUCCESS;
        }
    }
    return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: CUDA device %d is none of the %u GPUs NVML "
                        "lists (a MIG instance, or a GPU NVML may not open)", __func__, ordinal,
                        count);
}
