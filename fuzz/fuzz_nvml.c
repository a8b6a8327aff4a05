/* NVML's answers as hostile input (issue 26): an in-process NVML whose
 * every answer -- return codes, counts, strings (with or without a NUL,
 * filling the buffer), PCI locations, process lists that claim more than
 * they give or grow between calls, link states, topology levels and P2P
 * statuses -- comes from the input, under every cuabi_nvml_* function but
 * the two that need the CUDA driver. Each string the library hands back
 * must end inside its field and be printable ASCII (no terminal escapes,
 * no invalid UTF-8), a process count must be one cuabi accepts,
 * every status must be one of the API's, and nothing may crash, leak or
 * read out of bounds. cuabi_nvml_device_find takes a string from the input
 * too (the UUID and PCI bus id parsers).
 *
 * Input: the bytes NVML's answers are read from, in call order (zeros
 * once they run out); a NUL-terminated id for device_find first. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "platform/nvml_lib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t *in;
static size_t left;

static unsigned byte(void)
{
    if (!left)
        return 0;
    left--;
    return *in++;
}

static unsigned word(void) { return byte() | byte() << 8 | byte() << 16 | (unsigned)byte() << 24; }

/* A return code: mostly success; else one of NVML's (a few unknown ones). */
static int code(void)
{
    unsigned b = byte();
    if (b < 200)
        return 0;
    static const int codes[] = { 1, 2, 3, 4, 6, 7, 9, 13, 15, 25, 999, 12345, -1 };
    return codes[b % (sizeof codes / sizeof *codes)];
}

static void fill(char *out, unsigned len)
{
    unsigned n = byte() % (len + 1), i = 0;
    for (; i < n && i < len; i++)
        out[i] = (char)byte();
    if (i < len && byte() & 1)
        out[i] = '\0'; /* sometimes terminated, sometimes not */
}

typedef cuabi__nvdev dev;
#define D (void)d
static int init(void) { return code(); }
static int count(unsigned *n)
{
    *n = byte() % 6;
    if (byte() == 255)
        *n = word(); /* a count past reason */
    return code();
}
static int handle(unsigned i, dev *d) { *d = (dev)(uintptr_t)(i + 1); return code(); }
static int sysstr(char *v, unsigned len) { fill(v, len); return code(); }
static int sysint(int *v) { *v = (int)word(); return code(); }
static int devstr(dev d, char *s, unsigned len) { D; fill(s, len); return code(); }
static int pci(dev d, cuabi__nvml_pci_info *p)
{
    D;
    p->domain = byte() & 1 ? word() : 0;
    p->bus = byte(), p->device = byte(), p->pci_device_id = word();
    fill(p->bus_id, sizeof p->bus_id);
    fill(p->bus_id_legacy, sizeof p->bus_id_legacy);
    return code();
}
static int two(dev d, int *a, int *b) { D; *a = (int)word(); *b = (int)word(); return code(); }
static int u(dev d, unsigned *v) { D; *v = word(); return code(); }
static int mem2(dev d, cuabi__nvml_memory_v2 *m)
{
    D;
    m->total = (unsigned long long)word() << 16, m->reserved = word(), m->free = word();
    m->used = word();
    return code();
}
static int mem(dev d, cuabi__nvml_memory *m)
{
    D;
    m->total = word(), m->free = word(), m->used = word();
    return code();
}
static int util(dev d, cuabi__nvml_utilization *x)
{
    D;
    x->gpu = word(), x->memory = word();
    return code();
}
static int typed(dev d, int t, unsigned *v) { D; (void)t; *v = word(); return code(); }
static int ecc(dev d, int a, int b, unsigned long long *n)
{
    D, (void)a, (void)b;
    *n = word();
    return code();
}
static int reasons(dev d, unsigned long long *r)
{
    D;
    unsigned long long high = word();
    *r = high << 32 | word();
    return code();
}
static int pstate(dev d, int *p) { D; *p = (int)byte() - 8; return code(); }
static int state(dev d, unsigned l, int *a) { D; (void)l; *a = (int)byte() - 1; return code(); }
static int link_u(dev d, unsigned l, unsigned *v) { D; (void)l; *v = word(); return code(); }
static int cap(dev d, unsigned l, int c, unsigned *r)
{
    D, (void)l, (void)c;
    *r = byte();
    return code();
}
static int remote(dev d, unsigned l, cuabi__nvml_pci_info *p) { (void)l; return pci(d, p); }
static int level(dev a, dev b, int *lv) { (void)a, (void)b; *lv = (int)byte() - 5; return code(); }
static int p2p(dev a, dev b, int i, int *s)
{
    (void)a, (void)b, (void)i;
    *s = (int)byte() - 1;
    return code();
}
static int procs(dev d, unsigned *n, cuabi__nvml_process_info *infos)
{
    D;
    unsigned want = byte() % 8;
    if (byte() == 255)
        want = word(); /* claims more than it gives, or than anyone would */
    if (*n < want) {
        *n = want;
        return byte() & 1 ? 7 : code(); /* INSUFFICIENT_SIZE, mostly */
    }
    unsigned give = want < *n ? want : *n;
    for (unsigned i = 0; i < give; i++)
        infos[i] = (cuabi__nvml_process_info){ byte(), (unsigned long long)word(), word(), word() };
    *n = byte() == 254 ? *n + 1 : give; /* a count past the array: refused */
    return code();
}
static const char *errstr(int r) { return r == 999 ? NULL : "fuzzed"; }

static void fake_table(cuabi__nvml *t)
{
    memset(t, 0, sizeof *t);
    t->nvmlInit_v2 = init;
    t->nvmlDeviceGetCount_v2 = count;
    t->nvmlDeviceGetHandleByIndex_v2 = handle;
    t->nvmlSystemGetDriverVersion = sysstr;
    t->nvmlSystemGetNVMLVersion = sysstr;
    t->nvmlSystemGetCudaDriverVersion_v2 = sysint;
    t->nvmlDeviceGetName = devstr;
    t->nvmlDeviceGetUUID = devstr;
    t->nvmlDeviceGetPciInfo_v3 = pci;
    t->nvmlDeviceGetCudaComputeCapability = two;
    t->nvmlDeviceGetMinorNumber = u;
    t->nvmlDeviceGetMemoryInfo_v2 = mem2;
    t->nvmlDeviceGetMemoryInfo = mem;
    t->nvmlDeviceGetUtilizationRates = util;
    t->nvmlDeviceGetTemperature = typed;
    t->nvmlDeviceGetPowerUsage = u;
    t->nvmlDeviceGetEnforcedPowerLimit = u;
    t->nvmlDeviceGetPowerManagementLimit = u;
    t->nvmlDeviceGetClockInfo = typed;
    t->nvmlDeviceGetMaxClockInfo = typed;
    t->nvmlDeviceGetEccMode = two;
    t->nvmlDeviceGetTotalEccErrors = ecc;
    t->nvmlDeviceGetCurrentClocksEventReasons = reasons;
    t->nvmlDeviceGetCurrPcieLinkGeneration = u;
    t->nvmlDeviceGetCurrPcieLinkWidth = u;
    t->nvmlDeviceGetMaxPcieLinkGeneration = u;
    t->nvmlDeviceGetMaxPcieLinkWidth = u;
    t->nvmlDeviceGetPcieThroughput = typed;
    t->nvmlDeviceGetPerformanceState = pstate;
    t->nvmlDeviceGetFanSpeed = u;
    t->nvmlDeviceGetNvLinkState = state;
    t->nvmlDeviceGetNvLinkVersion = link_u;
    t->nvmlDeviceGetNvLinkCapability = cap;
    t->nvmlDeviceGetNvLinkRemotePciInfo_v2 = remote;
    t->nvmlDeviceGetTopologyCommonAncestor = level;
    t->nvmlDeviceGetP2PStatus = p2p;
    t->nvmlDeviceGetComputeRunningProcesses_v3 = procs;
    t->nvmlDeviceGetGraphicsRunningProcesses_v3 = procs;
    t->nvmlErrorString = errstr;
}

/* A status the API knows, and a message when it is a failure. */
static void check_status(cuabi_status st)
{
    if (st != CUABI_SUCCESS && !strcmp(cuabi_status_name(st), "CUABI_ERROR_UNKNOWN_STATUS"))
        __builtin_trap();
    if (st != CUABI_SUCCESS && !cuabi_last_error()->message[0])
        __builtin_trap();
}

/* A string the library hands back: ends inside its field, printable ASCII. */
static void check_text(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            __builtin_trap();
}
#define ENDS_INSIDE(field) check_text((field), sizeof(field))

static void one_gpu(int i, int count)
{
    cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
    cuabi_status st = cuabi_nvml_device_info_get(&d, i);
    check_status(st);
    ENDS_INSIDE(d.name);
    ENDS_INSIDE(d.uuid);
    ENDS_INSIDE(d.pci_bus_id);
    if (d.nvlink_count < 0 || d.nvlink_count > CUABI__NVML_MAX_LINKS)
        __builtin_trap();
    cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
    check_status(cuabi_nvml_device_health_get(&h, i));
    if (h.temperature_gpu > 1000 || h.performance_state < 0 || h.performance_state > 15)
        __builtin_trap();
    /* What NVML did not report reads 0, whatever it wrote before saying so. */
    if (((h.unavailable & CUABI_NVML_FIELD_POWER_USAGE) && h.power_usage_mw) ||
        ((h.unavailable & CUABI_NVML_FIELD_PCIE_LINK) && (h.pcie_generation || h.pcie_width)) ||
        ((h.unavailable & CUABI_NVML_FIELD_MEMORY) && h.memory_total) ||
        ((d.unavailable & CUABI_NVML_FIELD_MAX_CLOCKS) && d.max_clock_sm_mhz))
        __builtin_trap();
    unsigned tx, rx;
    check_status(cuabi_nvml_device_pcie_throughput(&tx, &rx, i));
    for (int l = 0; l < 3; l++) {
        cuabi_nvml_nvlink link = CUABI_NVML_NVLINK_INIT;
        check_status(cuabi_nvml_device_nvlink_get(&link, i, l));
        ENDS_INSIDE(link.remote_pci_bus_id);
        if (link.remote_index < -1 || link.remote_index >= 4096)
            __builtin_trap();
    }
    cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
    check_status(cuabi_nvml_topology_get(&t, i, (i + 1) % count));
    if (t.p2p_read > CUABI_NVML_P2P_UNKNOWN || t.common_ancestor % 10)
        __builtin_trap();
    cuabi_nvml_process p[4];
    for (int k = 0; k < 4; k++)
        cuabi_nvml_process_init(&p[k], CUABI_NVML_PROCESS_VERSION);
    size_t n = 0;
    st = cuabi_nvml_device_processes(p, 4, &n, i);
    check_status(st);
    if ((st == CUABI_SUCCESS && n > 65536 * 2) || (st != CUABI_SUCCESS && n != 0))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cuabi__nvml table;
    static int once;
    if (!once) {
        setenv("CUABI_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
        fake_table(&table);
        once = 1;
    }
    cuabi__nvml_install_fake(&table);
    const uint8_t *nul = memchr(data, 0, size);
    char *id = strndup((const char *)data, nul ? (size_t)(nul - data) : size);
    in = nul ? nul + 1 : data + size;
    left = size - (size_t)(in - data);
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    check_status(cuabi_nvml_system_info_get(&s));
    ENDS_INSIDE(s.driver_version);
    ENDS_INSIDE(s.nvml_version);
    int count = 0;
    cuabi_status st = cuabi_nvml_device_count(&count);
    check_status(st);
    if (st == CUABI_SUCCESS && (count < 0 || count > 4096))
        __builtin_trap();
    for (int i = 0; i < count && i < 3; i++)
        one_gpu(i, count);
    int idx = -2;
    if (id) {
        st = cuabi_nvml_device_find(&idx, id);
        check_status(st);
        if ((st == CUABI_SUCCESS) != (idx >= 0))
            __builtin_trap();
    }
    free(id);
    cuabi_error_clear();
    return 0;
}
