/* cuabi info's GPU health from NVML: the NVML line, the health table
 * (text) or "health" array (JSON), the processes on each GPU, the
 * topology between GPUs, and --watch, which refreshes the table until it
 * is interrupted (SIGINT or SIGTERM end it with exit status 0: stopping a
 * watch is how a watch ends). Values NVML does not report show as "n/a"
 * (text) or null (JSON). */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NA "n/a"
enum { MAX_PROCS = 256, MAX_GPUS = 64 };

/* ------------------------------------------------------------ reading */

typedef struct gpu_read {
    cuabi_status st;             /* of the first query that failed */
    char why[1024];
    cuabi_nvml_device_info info;
    cuabi_nvml_health health;
    int cuda_ordinal;            /* -1: none, or no driver to ask */
    int links_up;
    bool throughput;             /* NVML counted PCIe bytes: tx, rx (KiB/s) */
    unsigned tx, rx;
    cuabi_status procs_st;       /* CUABI_ERROR_NOT_SUPPORTED: NVML lists none */
    size_t nprocs;               /* how many there are (maybe more than kept) */
    cuabi_nvml_process procs[MAX_PROCS];
} gpu_read;

static bool read_ok(gpu_read *g, cuabi_status st)
{
    if (st != CUABI_SUCCESS && g->st == CUABI_SUCCESS) {
        g->st = st;
        snprintf(g->why, sizeof g->why, "%s", cuabi_last_error()->message);
    }
    return g->st == CUABI_SUCCESS;
}

/* Everything the table shows about GPU `index`. */
static void read_gpu(gpu_read *g, int index, bool map_cuda)
{
    memset(g, 0, sizeof *g);
    g->info = (cuabi_nvml_device_info)CUABI_NVML_DEVICE_INFO_INIT;
    g->health = (cuabi_nvml_health)CUABI_NVML_HEALTH_INIT;
    g->cuda_ordinal = -1;
    if (!read_ok(g, cuabi_nvml_device_info_get(&g->info, index)) ||
        !read_ok(g, cuabi_nvml_device_health_get(&g->health, index)))
        return;
    for (int l = 0; l < g->info.nvlink_count; l++) {
        cuabi_nvml_nvlink link = CUABI_NVML_NVLINK_INIT;
        if (!read_ok(g, cuabi_nvml_device_nvlink_get(&link, index, l)))
            return;
        g->links_up += link.active;
    }
    cuabi_status st = cuabi_nvml_device_pcie_throughput(&g->tx, &g->rx, index);
    g->throughput = st == CUABI_SUCCESS;
    if (st != CUABI_ERROR_NOT_SUPPORTED && !read_ok(g, st))
        return;
    for (size_t k = 0; k < MAX_PROCS; k++)
        cuabi_nvml_process_init(&g->procs[k], CUABI_NVML_PROCESS_VERSION);
    g->procs_st = cuabi_nvml_device_processes(g->procs, MAX_PROCS, &g->nprocs, index);
    if (g->procs_st != CUABI_ERROR_NOT_SUPPORTED && !read_ok(g, g->procs_st))
        return;
    /* The CUDA ordinal needs the driver: without one it stays unknown. */
    if (map_cuda && cuabi_nvml_device_cuda_ordinal(&g->cuda_ordinal, index) != CUABI_SUCCESS)
        g->cuda_ordinal = -1;
}

/* ------------------------------------------------------------ names */

static const struct { uint64_t bit; const char *text, *json; } throttle_names[] = {
    { CUABI_NVML_THROTTLE_GPU_IDLE, "idle", "gpu_idle" },
    { CUABI_NVML_THROTTLE_APPLICATIONS_CLOCKS_SETTING, "app-clocks", "applications_clocks_setting" },
    { CUABI_NVML_THROTTLE_SW_POWER_CAP, "power-cap", "sw_power_cap" },
    { CUABI_NVML_THROTTLE_HW_SLOWDOWN, "hw-slowdown", "hw_slowdown" },
    { CUABI_NVML_THROTTLE_SYNC_BOOST, "sync-boost", "sync_boost" },
    { CUABI_NVML_THROTTLE_SW_THERMAL_SLOWDOWN, "sw-thermal", "sw_thermal_slowdown" },
    { CUABI_NVML_THROTTLE_HW_THERMAL_SLOWDOWN, "hw-thermal", "hw_thermal_slowdown" },
    { CUABI_NVML_THROTTLE_HW_POWER_BRAKE_SLOWDOWN, "power-brake", "hw_power_brake_slowdown" },
    { CUABI_NVML_THROTTLE_DISPLAY_CLOCK_SETTING, "display-clocks", "display_clock_setting" },
};
#define NUM_THROTTLE (sizeof throttle_names / sizeof *throttle_names)

/* "idle,power-cap" (bits cuabi does not name as hex), "none" for 0. */
static void throttle_text(char *out, size_t cap, uint64_t bits)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < NUM_THROTTLE; i++)
        if (bits & throttle_names[i].bit) {
            used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s",
                                     used ? "," : "", throttle_names[i].text);
            bits &= ~throttle_names[i].bit;
        }
    if (bits && used < cap)
        used += (size_t)snprintf(out + used, cap - used, "%s0x%" PRIx64, used ? "," : "", bits);
    if (!used)
        snprintf(out, cap, "none");
}

static const char *level_name(cuabi_nvml_topology_level level)
{
    switch (level) {
    case CUABI_NVML_TOPOLOGY_INTERNAL: return "BOARD";
    case CUABI_NVML_TOPOLOGY_SINGLE: return "PIX";
    case CUABI_NVML_TOPOLOGY_MULTIPLE: return "PXB";
    case CUABI_NVML_TOPOLOGY_HOSTBRIDGE: return "PHB";
    case CUABI_NVML_TOPOLOGY_NODE: return "NODE";
    default: return "SYS";
    }
}

static const char *p2p_name(cuabi_nvml_p2p_status s)
{
    static const char *const names[] = { "ok", "chipset_not_supported", "gpu_not_supported",
                                         "ioh_topology_not_supported", "disabled_by_regkey",
                                         "not_supported", "unknown" };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

/* ------------------------------------------------------------ text */

static const char *cell(char *buf, size_t cap, bool missing, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static const char *cell(char *buf, size_t cap, bool missing, const char *fmt, ...)
{
    if (missing)
        return snprintf(buf, cap, NA), buf;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return buf;
}

static void text_head(void)
{
    printf("%4s %4s  %-24s %5s %13s %9s %17s %13s %8s %6s %6s  %s\n", "NVML", "CUDA", "name",
           "temp", "power/limit W", "util g/m", "memory used/total", "SM/mem MHz", "PCIe",
           "NVLink", "ECC", "throttle");
}

static void text_row(int index, const gpu_read *g)
{
    char cuda[16] = "-", t[16], pw[32], ut[24], mem[40], clk[32], pcie[24], nvl[16], ecc[24],
         thr[160];
    if (g->st != CUABI_SUCCESS) {
        printf("%4d %4s  error: %s (%s)\n", index, cuda, g->why, cuabi_status_name(g->st));
        return;
    }
    const cuabi_nvml_health *h = &g->health;
    uint64_t u = h->unavailable;
    if (g->cuda_ordinal >= 0)
        snprintf(cuda, sizeof cuda, "%d", g->cuda_ordinal);
    double gib = 1024.0 * 1024.0 * 1024.0;
    printf("%4d %4s  %-24.24s %5s %13s %9s %17s %13s %8s %6s %6s  %s\n", index, cuda,
           g->info.name, cell(t, sizeof t, u & CUABI_NVML_FIELD_TEMPERATURE, "%dC",
                              h->temperature_gpu),
           cell(pw, sizeof pw, u & (CUABI_NVML_FIELD_POWER_USAGE | CUABI_NVML_FIELD_POWER_LIMIT),
                "%.0f/%.0f", h->power_usage_mw / 1e3, h->power_limit_mw / 1e3),
           cell(ut, sizeof ut, u & CUABI_NVML_FIELD_UTILIZATION, "%u%%/%u%%", h->utilization_gpu,
                h->utilization_memory),
           cell(mem, sizeof mem, u & CUABI_NVML_FIELD_MEMORY, "%.1f/%.1f GiB",
                (double)h->memory_used / gib, (double)h->memory_total / gib),
           cell(clk, sizeof clk, u & (CUABI_NVML_FIELD_CLOCK_SM | CUABI_NVML_FIELD_CLOCK_MEMORY),
                "%u/%u", h->clock_sm_mhz, h->clock_memory_mhz),
           cell(pcie, sizeof pcie, u & CUABI_NVML_FIELD_PCIE_LINK, "gen%u x%u", h->pcie_generation,
                h->pcie_width),
           cell(nvl, sizeof nvl, g->info.nvlink_count == 0, "%d/%d", g->links_up,
                g->info.nvlink_count),
           cell(ecc, sizeof ecc, u & CUABI_NVML_FIELD_ECC_VOLATILE, "%" PRIu64,
                h->ecc_uncorrected_volatile),
           (u & CUABI_NVML_FIELD_THROTTLE_REASONS) ? NA
               : (throttle_text(thr, sizeof thr, h->throttle_reasons), thr));
}

static void text_processes(const gpu_read *gpus, int count)
{
    printf("\nProcesses (NVML)\n%5s %9s  %-18s %12s\n", "GPU", "PID", "kind", "memory");
    int shown = 0;
    for (int i = 0; i < count; i++) {
        const gpu_read *g = &gpus[i];
        if (g->st == CUABI_SUCCESS && g->procs_st == CUABI_ERROR_NOT_SUPPORTED)
            printf("%5d  NVML lists no processes for this GPU\n", i), shown++;
        for (size_t k = 0; g->st == CUABI_SUCCESS && k < g->nprocs && k < MAX_PROCS; k++) {
            const cuabi_nvml_process *p = &g->procs[k];
            char mem[32];
            unsigned kinds = p->kinds;
            printf("%5d %9u  %-18s %12s\n", i, p->pid,
                   kinds == (CUABI_NVML_PROCESS_COMPUTE | CUABI_NVML_PROCESS_GRAPHICS)
                       ? "compute+graphics" : kinds & CUABI_NVML_PROCESS_GRAPHICS ? "graphics"
                                                                                  : "compute",
                   cell(mem, sizeof mem, p->used_memory == UINT64_MAX, "%" PRIu64 " MiB",
                        p->used_memory >> 20));
            shown++;
        }
    }
    if (!shown)
        printf("%5s  none\n", "");
}

/* ------------------------------------------------------------ JSON */

static void json_u64(cli_json *j, const char *key, uint64_t value, bool missing)
{
    if (missing)
        json_null(j, key);
    else
        json_int(j, key, value > (uint64_t)INT64_MAX ? INT64_MAX : (long long)value);
}

static void json_health_fields(cli_json *j, const cuabi_nvml_health *h)
{
    uint64_t u = h->unavailable;
    json_u64(j, "memory_total", h->memory_total, u & CUABI_NVML_FIELD_MEMORY);
    json_u64(j, "memory_used", h->memory_used, u & CUABI_NVML_FIELD_MEMORY);
    json_u64(j, "memory_free", h->memory_free, u & CUABI_NVML_FIELD_MEMORY);
    json_u64(j, "memory_reserved", h->memory_reserved, u & CUABI_NVML_FIELD_MEMORY_RESERVED);
    json_u64(j, "utilization_gpu", h->utilization_gpu, u & CUABI_NVML_FIELD_UTILIZATION);
    json_u64(j, "utilization_memory", h->utilization_memory, u & CUABI_NVML_FIELD_UTILIZATION);
    if (u & CUABI_NVML_FIELD_TEMPERATURE)
        json_null(j, "temperature_gpu");
    else
        json_int(j, "temperature_gpu", h->temperature_gpu);
    json_u64(j, "power_usage_mw", h->power_usage_mw, u & CUABI_NVML_FIELD_POWER_USAGE);
    json_u64(j, "power_limit_mw", h->power_limit_mw, u & CUABI_NVML_FIELD_POWER_LIMIT);
    json_u64(j, "power_management_limit_mw", h->power_management_limit_mw,
             u & CUABI_NVML_FIELD_POWER_MANAGEMENT_LIMIT);
    json_u64(j, "clock_graphics_mhz", h->clock_graphics_mhz, u & CUABI_NVML_FIELD_CLOCK_GRAPHICS);
    json_u64(j, "clock_sm_mhz", h->clock_sm_mhz, u & CUABI_NVML_FIELD_CLOCK_SM);
    json_u64(j, "clock_memory_mhz", h->clock_memory_mhz, u & CUABI_NVML_FIELD_CLOCK_MEMORY);
    json_u64(j, "ecc_corrected_volatile", h->ecc_corrected_volatile,
             u & CUABI_NVML_FIELD_ECC_VOLATILE);
    json_u64(j, "ecc_uncorrected_volatile", h->ecc_uncorrected_volatile,
             u & CUABI_NVML_FIELD_ECC_VOLATILE);
    json_u64(j, "ecc_corrected_aggregate", h->ecc_corrected_aggregate,
             u & CUABI_NVML_FIELD_ECC_AGGREGATE);
    json_u64(j, "ecc_uncorrected_aggregate", h->ecc_uncorrected_aggregate,
             u & CUABI_NVML_FIELD_ECC_AGGREGATE);
    json_u64(j, "pcie_generation", h->pcie_generation, u & CUABI_NVML_FIELD_PCIE_LINK);
    json_u64(j, "pcie_width", h->pcie_width, u & CUABI_NVML_FIELD_PCIE_LINK);
    json_u64(j, "performance_state", (uint64_t)h->performance_state,
             u & CUABI_NVML_FIELD_PERFORMANCE_STATE);
    json_u64(j, "fan_speed_percent", h->fan_speed_percent, u & CUABI_NVML_FIELD_FAN_SPEED);
}

static void json_throttle(cli_json *j, const cuabi_nvml_health *h)
{
    if (h->unavailable & CUABI_NVML_FIELD_THROTTLE_REASONS) {
        json_null(j, "throttle_reasons");
        return;
    }
    uint64_t bits = h->throttle_reasons;
    json_begin_array(j, "throttle_reasons");
    for (size_t i = 0; i < NUM_THROTTLE; i++)
        if (bits & throttle_names[i].bit) {
            json_string(j, NULL, throttle_names[i].json);
            bits &= ~throttle_names[i].bit;
        }
    if (bits) {
        char hex[24];
        snprintf(hex, sizeof hex, "0x%" PRIx64, bits);
        json_string(j, NULL, hex);
    }
    json_end_array(j);
}

static void json_processes(cli_json *j, const gpu_read *g)
{
    if (g->procs_st == CUABI_ERROR_NOT_SUPPORTED) {
        json_null(j, "processes");
        return;
    }
    json_begin_array(j, "processes");
    for (size_t k = 0; k < g->nprocs && k < MAX_PROCS; k++) {
        const cuabi_nvml_process *p = &g->procs[k];
        json_begin_object(j, NULL);
        json_int(j, "pid", p->pid);
        json_u64(j, "used_memory", p->used_memory, p->used_memory == UINT64_MAX);
        json_bool(j, "compute", p->kinds & CUABI_NVML_PROCESS_COMPUTE);
        json_bool(j, "graphics", p->kinds & CUABI_NVML_PROCESS_GRAPHICS);
        json_end_object(j);
    }
    json_end_array(j);
}

static void json_gpu(cli_json *j, int index, const gpu_read *g)
{
    json_begin_object(j, NULL);
    json_int(j, "index", index);
    if (g->st != CUABI_SUCCESS) {
        json_string(j, "error", g->why);
        json_string(j, "status", cuabi_status_name(g->st));
        json_end_object(j);
        return;
    }
    if (g->cuda_ordinal >= 0)
        json_int(j, "cuda_ordinal", g->cuda_ordinal);
    else
        json_null(j, "cuda_ordinal");
    json_string(j, "name", g->info.name);
    json_string(j, "uuid", g->info.uuid);
    json_string(j, "pci_bus_id", g->info.pci_bus_id);
    json_health_fields(j, &g->health);
    json_u64(j, "pcie_tx_kib_per_s", g->tx, !g->throughput);
    json_u64(j, "pcie_rx_kib_per_s", g->rx, !g->throughput);
    json_throttle(j, &g->health);
    json_int(j, "nvlink_count", g->info.nvlink_count);
    json_int(j, "nvlink_active", g->links_up);
    json_processes(j, g);
    json_end_object(j);
}

/* ------------------------------------------------------------ reports */

/* Read every GPU NVML lists (at most MAX_GPUS): a new array, *count set;
 * NULL with *count 0 when there are none or the memory is missing. */
static gpu_read *read_all(int *count, bool map_cuda)
{
    int n = 0;
    *count = 0;
    if (cuabi_nvml_device_count(&n) != CUABI_SUCCESS || n <= 0)
        return NULL;
    n = n > MAX_GPUS ? MAX_GPUS : n;
    gpu_read *gpus = calloc((size_t)n, sizeof *gpus);
    if (!gpus)
        return NULL;
    for (int i = 0; i < n; i++)
        read_gpu(&gpus[i], i, map_cuda);
    *count = n;
    return gpus;
}

bool health_nvml_header(cli_json *j, cuabi_nvml_system_info *sys)
{
    *sys = (cuabi_nvml_system_info)CUABI_NVML_SYSTEM_INFO_INIT;
    cuabi_status st = cuabi_nvml_system_info_get(sys);
    const char *why = st == CUABI_SUCCESS ? "" : cuabi_last_error()->message;
    const char *said = strstr(why, "NVML not available: "); /* said once is enough */
    why = said ? said + strlen("NVML not available: ") : why;
    if (json_on(j)) {
        json_begin_object(j, "nvml");
        json_bool(j, "available", st == CUABI_SUCCESS);
        json_string(j, "version", sys->nvml_version);
        json_string(j, "driver_version", sys->driver_version);
        json_int(j, "cuda_driver_version", sys->cuda_driver_version);
        json_string(j, "path", sys->library_path ? sys->library_path : "");
        json_string(j, "error", why);
        json_end_object(j);
    } else if (st != CUABI_SUCCESS) {
        printf("%-10s not available: %s\n", "NVML", why);
    } else {
        printf("%-10s %s  driver %s (CUDA %d.%d)  %s\n", "NVML", sys->nvml_version,
               sys->driver_version, sys->cuda_driver_version / 1000,
               (sys->cuda_driver_version % 1000) / 10, sys->library_path);
    }
    return st == CUABI_SUCCESS;
}

static void topology_pairs(cli_json *j, int count)
{
    if (!json_on(j) && count > 1)
        printf("\nTopology (NVML; NV: peer access over NVLink)\n%6s", "");
    for (int b = 0; !json_on(j) && b < count && count > 1; b++) {
        char name[16];
        snprintf(name, sizeof name, "GPU%d", b);
        printf(" %7s", name);
    }
    json_begin_array(j, "topology");
    for (int a = 0; a < count && count > 1; a++) {
        if (!json_on(j))
            printf("\nGPU%-3d", a);
        for (int b = 0; b < count; b++) {
            cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
            bool ok = a != b && cuabi_nvml_topology_get(&t, a, b) == CUABI_SUCCESS;
            const char *code = a == b ? "X" : !ok ? "?" : t.p2p_nvlink == CUABI_NVML_P2P_OK
                                                              ? "NV" : level_name(t.common_ancestor);
            if (!json_on(j)) {
                printf(" %7s", code);
            } else if (ok && a < b) {
                json_begin_object(j, NULL);
                json_int(j, "gpu1", a);
                json_int(j, "gpu2", b);
                json_string(j, "common_ancestor", level_name(t.common_ancestor));
                json_string(j, "p2p_read", p2p_name(t.p2p_read));
                json_string(j, "p2p_write", p2p_name(t.p2p_write));
                json_string(j, "p2p_nvlink", p2p_name(t.p2p_nvlink));
                json_string(j, "p2p_atomics", p2p_name(t.p2p_atomics));
                json_string(j, "p2p_pci", p2p_name(t.p2p_pci));
                json_end_object(j);
            }
        }
    }
    json_end_array(j);
    if (!json_on(j) && count > 1)
        printf("\n");
}

void health_report(cli_json *j, bool topology, cuabi_status *failed, char *why, size_t len)
{
    int count;
    gpu_read *gpus = read_all(&count, true);
    if (!json_on(j) && count) {
        printf("\nGPU health (NVML)\n");
        text_head();
    }
    json_begin_array(j, "health");
    for (int i = 0; i < count; i++) {
        if (json_on(j))
            json_gpu(j, i, &gpus[i]);
        else
            text_row(i, &gpus[i]);
        if (gpus[i].st != CUABI_SUCCESS && *failed == CUABI_SUCCESS) {
            *failed = gpus[i].st;
            snprintf(why, len, "NVML GPU %d: %s", i, gpus[i].why);
        }
    }
    json_end_array(j);
    if (!json_on(j) && count)
        text_processes(gpus, count);
    if (topology)
        topology_pairs(j, count);
    free(gpus);
}

/* ------------------------------------------------------------ --watch */

static volatile sig_atomic_t stop_watch;

static void on_stop(int sig)
{
    (void)sig;
    stop_watch = 1;
}

/* Until `deadline` (CLOCK_MONOTONIC) or a stop signal. */
static void wait_until(const struct timespec *deadline)
{
    while (!stop_watch &&
           clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline, NULL) == EINTR)
        ;
}

static void watch_once(bool json, long long seconds, long long n, bool map_cuda)
{
    char stamp[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    int count;
    gpu_read *gpus = read_all(&count, map_cuda);
    if (json) {
        cli_json j;
        if (!json_start(&j))
            return;
        json_begin_object(&j, NULL);
        json_string(&j, "time", stamp);
        json_int(&j, "refresh", n);
        json_begin_array(&j, "health");
        for (int i = 0; i < count; i++)
            json_gpu(&j, i, &gpus[i]);
        json_end_array(&j);
        json_finish(&j, 0);
    } else {
        if (isatty(STDOUT_FILENO))
            printf("\033[H\033[2J");
        else if (n > 1)
            printf("\n");
        printf("cuabi info --watch %lld   %s   (refresh %lld; Ctrl-C ends)\n", seconds, stamp, n);
        text_head();
        for (int i = 0; i < count; i++)
            text_row(i, &gpus[i]);
        text_processes(gpus, count);
        fflush(stdout);
    }
    free(gpus);
}

int health_watch(bool json, long long seconds, long long count)
{
    cuabi_nvml_system_info sys = CUABI_NVML_SYSTEM_INFO_INIT;
    cli_json j = { 0 };
    if (cuabi_nvml_system_info_get(&sys) != CUABI_SUCCESS)
        return json && json_start(&j) ? cli_fail("info --watch", cuabi_last_error()->status, &j)
                                      : cli_fail("info --watch", cuabi_last_error()->status, NULL);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: the sleep ends at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int probe = -1; /* the CUDA ordinals only when a driver answers */
    bool map_cuda = cuabi_nvml_device_cuda_ordinal(&probe, 0) == CUABI_SUCCESS;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long long n = 1; !stop_watch && (count == 0 || n <= count); n++) {
        if (n > 1) {
            next.tv_sec += (time_t)seconds;
            wait_until(&next);
            if (stop_watch)
                break;
        }
        watch_once(json, seconds, n, map_cuda);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return 0;
}
