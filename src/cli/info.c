/* cuabi info: versions, loaded libraries, and one block per GPU. */
#include "cli.h"

#include <string.h>

static void print_lib(const char *name, cuabi_status st, int version, const char *path,
                      const char *error)
{
    if (st != CUABI_SUCCESS)
        printf("%-10s not available: %s\n", name, error);
    else if (version > 0)
        printf("%-10s %d.%d  %s\n", name, version / 1000, (version % 1000) / 10, path);
    else /* loaded, but it did not say which version it is */
        printf("%-10s ?  %s\n", name, path);
}

static void uuid_string(char out[37], const uint8_t u[16])
{
    static const int dash[] = { 4, 6, 8, 10 };
    char *p = out;
    for (int i = 0, d = 0; i < 16; i++) {
        if (d < 4 && i == dash[d]) {
            *p++ = '-';
            d++;
        }
        p += sprintf(p, "%02x", u[i]);
    }
}

static void json_lib(cli_json *j, const char *key, cuabi_status st, int version,
                     const char *path, const char *error)
{
    json_begin_object(j, key);
    json_bool(j, "available", st == CUABI_SUCCESS);
    json_int(j, "version", version);
    json_string(j, "path", path);
    json_string(j, "error", error);
    json_end_object(j);
}

static void json_device(cli_json *j, const cuabi_device_properties *p, uint64_t free_mem)
{
    char uuid[37];
    uuid_string(uuid, p->uuid);
    json_begin_object(j, NULL);
    json_int(j, "ordinal", p->ordinal);
    json_string(j, "name", p->name);
    json_string(j, "uuid", uuid);
    json_string(j, "pci_bus_id", p->pci_bus_id);
    json_int(j, "compute_capability_major", p->compute_capability_major);
    json_int(j, "compute_capability_minor", p->compute_capability_minor);
    json_int(j, "multiprocessors", p->multiprocessor_count);
    json_int(j, "total_memory", (long long)p->total_memory);
    json_int(j, "free_memory", (long long)free_mem);
    json_int(j, "max_threads_per_block", p->max_threads_per_block);
    json_int(j, "max_threads_per_multiprocessor", p->max_threads_per_multiprocessor);
    json_int(j, "max_blocks_per_multiprocessor", p->max_blocks_per_multiprocessor);
    json_int(j, "registers_per_multiprocessor", p->max_registers_per_multiprocessor);
    json_int(j, "shared_memory_per_block", p->max_shared_memory_per_block);
    json_int(j, "shared_memory_per_block_optin", p->max_shared_memory_per_block_optin);
    json_int(j, "shared_memory_per_multiprocessor", p->max_shared_memory_per_multiprocessor);
    json_int(j, "l2_cache_size", p->l2_cache_size);
    json_bool(j, "cluster_launch", p->cluster_launch);
    json_bool(j, "cooperative_launch", p->cooperative_launch);
    json_bool(j, "memory_pools", p->memory_pools_supported);
    json_end_object(j);
}

static void text_device(const cuabi_device_properties *p, uint64_t free_mem)
{
    char uuid[37];
    uuid_string(uuid, p->uuid);
    printf("\nGPU %d: %s\n", p->ordinal, p->name);
    printf("  compute capability   %d.%d (sm_%d%d)\n", p->compute_capability_major,
           p->compute_capability_minor, p->compute_capability_major, p->compute_capability_minor);
    printf("  multiprocessors      %d\n", p->multiprocessor_count);
    printf("  memory               %.1f GiB (%.1f GiB free)\n",
           (double)p->total_memory / (1 << 30), (double)free_mem / (1 << 30));
    printf("  PCI bus id / UUID    %s / GPU-%s\n", p->pci_bus_id, uuid);
    printf("  threads              %d per block, %d per SM, %d blocks per SM\n",
           p->max_threads_per_block, p->max_threads_per_multiprocessor,
           p->max_blocks_per_multiprocessor);
    printf("  registers            %d per SM, %d per block\n",
           p->max_registers_per_multiprocessor, p->max_registers_per_block);
    printf("  shared memory        %d per block (%d opt-in), %d per SM\n",
           p->max_shared_memory_per_block, p->max_shared_memory_per_block_optin,
           p->max_shared_memory_per_multiprocessor);
    printf("  L2 cache             %d KiB\n", p->l2_cache_size / 1024);
    printf("  clusters/cooperative %s/%s, memory pools %s\n", p->cluster_launch ? "yes" : "no",
           p->cooperative_launch ? "yes" : "no", p->memory_pools_supported ? "yes" : "no");
}

/* The driver's state for the "No GPU available" line: *count devices, or
 * the status and why not. */
static cuabi_status gpu_count(const cuabi_runtime_info *rt, int *count, const char **why)
{
    *count = 0;
    *why = "";
    if (rt->driver_status != CUABI_SUCCESS) {
        *why = rt->driver_error;
        return rt->driver_status;
    }
    cuabi_status st = cuabi_device_count(count);
    if (st != CUABI_SUCCESS)
        *why = cuabi_last_error()->message;
    else if (*count == 0)
        *why = "the driver sees no CUDA devices";
    return st;
}

static void json_header(cli_json *j, const cuabi_runtime_info *rt)
{
    json_begin_object(j, NULL);
    json_string(j, "library_version", rt->library_version);
    json_int(j, "abi_version", rt->abi_version);
    json_lib(j, "driver", rt->driver_status, rt->driver_version, rt->driver_path, rt->driver_error);
    json_lib(j, "nvrtc", rt->nvrtc_status, rt->nvrtc_version, rt->nvrtc_path, rt->nvrtc_error);
    json_lib(j, "nvjitlink", rt->nvjitlink_status, rt->nvjitlink_version, rt->nvjitlink_path,
             rt->nvjitlink_error);
    json_lib(j, "nvvm", rt->nvvm_status, rt->nvvm_version, rt->nvvm_path, rt->nvvm_error);
    json_lib(j, "nvfatbin", rt->nvfatbin_status, rt->nvfatbin_version, rt->nvfatbin_path,
             rt->nvfatbin_error);
    json_lib(j, "nccl", rt->nccl_status, rt->nccl_version, rt->nccl_path, rt->nccl_error);
}

static void text_header(const cuabi_runtime_info *rt)
{
    printf("cuabi      %s (ABI %u)\n", rt->library_version, rt->abi_version);
    print_lib("driver", rt->driver_status, rt->driver_version, rt->driver_path, rt->driver_error);
    print_lib("NVRTC", rt->nvrtc_status, rt->nvrtc_version, rt->nvrtc_path, rt->nvrtc_error);
    print_lib("nvJitLink", rt->nvjitlink_status, rt->nvjitlink_version, rt->nvjitlink_path,
              rt->nvjitlink_error);
    print_lib("libNVVM", rt->nvvm_status, rt->nvvm_version, rt->nvvm_path, rt->nvvm_error);
    print_lib("nvFatbin", rt->nvfatbin_status, rt->nvfatbin_version, rt->nvfatbin_path,
              rt->nvfatbin_error);
    if (rt->nccl_status != CUABI_SUCCESS) /* NCCL numbers its versions 22809 = 2.28.9 */
        printf("%-10s not available: %s\n", "NCCL", rt->nccl_error);
    else
        printf("%-10s %d.%d.%d  %s\n", "NCCL", rt->nccl_version / 10000,
               rt->nccl_version / 100 % 100, rt->nccl_version % 100, rt->nccl_path);
}

/* The device's default pool as one line (cuabi_pool_stats_format), or "". */
static void default_pool_line(char *out, size_t len, cuabi_device *d)
{
    cuabi_memory_resource *r;
    cuabi_pool_stats st = CUABI_POOL_STATS_INIT;
    out[0] = '\0';
    if (cuabi_memory_resource_device_default(&r, d) != CUABI_SUCCESS)
        return;
    if (cuabi_pool_stats_get(&st, r) == CUABI_SUCCESS &&
        cuabi_pool_stats_format(out, &len, &st) != CUABI_SUCCESS)
        out[0] = '\0';
    cuabi_memory_resource_release(r);
}

static cuabi_status device_properties(int ordinal, cuabi_device_properties *p, uint64_t *free_mem,
                                      char *pool, size_t pool_len)
{
    cuabi_device *d;
    uint64_t total = 0;
    cuabi_status st = cuabi_device_get(&d, ordinal);
    if (st != CUABI_SUCCESS)
        return st;
    st = cuabi_device_get_properties(p, d);
    if (st == CUABI_SUCCESS) {
        cuabi_device_memory_info(free_mem, &total, d);
        default_pool_line(pool, pool_len, d);
    }
    cuabi_device_release(d);
    return st;
}

/* One block per GPU. A GPU that cannot be read is told on stderr and the
 * rest go on; the first such failure goes into *failed / why. */
static void list_devices(cli_json *j, int count, cuabi_status *failed, char *why, size_t len)
{
    json_begin_array(j, "devices");
    for (int i = 0; i < count; i++) {
        cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
        uint64_t free_mem = 0;
        char pool[512];
        cuabi_status st = device_properties(i, &p, &free_mem, pool, sizeof pool);
        if (st != CUABI_SUCCESS) {
            if (*failed == CUABI_SUCCESS)
                snprintf(why, len, "GPU %d: %s", i, cuabi_last_error()->message);
            *failed = *failed ? *failed : st;
            cli_fail("info", st, NULL);
        } else if (json_on(j)) {
            json_device(j, &p, free_mem);
        } else {
            text_device(&p, free_mem);
            if (pool[0])
                printf("  default pool         %s\n", pool);
        }
    }
    json_end_array(j);
}

static const char info_about[] =
    "Print cuabi's version, the CUDA driver, NVRTC, nvJitLink, libNVVM,\n"
    "nvFatbin, NCCL and NVML it loaded (version and file, or why not), one block per\n"
    "GPU, and NVML's health table: temperature, power and limit, utilisation,\n"
    "memory, clocks, PCIe link, NVLink links up, uncorrected ECC errors since\n"
    "the driver loaded and throttle reasons per GPU (\"n/a\" where NVML does\n"
    "not report a value), the processes on each GPU and the topology between\n"
    "them. GPUs are NVML's indices, with the CUDA ordinal beside each. Without\n"
    "a driver, GPU or NVML it says so and exits 0. --watch SECONDS refreshes\n"
    "the health table until interrupted (Ctrl-C or SIGTERM: exit 0); with\n"
    "--json each refresh is one JSON document on a line of its own. libNVVM's\n"
    "version is its own (2.0), not CUDA's; without nvFatbin, fatbins are\n"
    "packed by the fatbinary tool; NCCL is found as docs/distributed.md says\n"
    "(CUABI_NCCL_PATH, the nvidia-nccl wheel, the system's libnccl.so.2).\n";

/* After the devices: NVML's health, and the document's end. */
static int finish(cli_json *j, bool nvml, cuabi_status failed, char *failure, size_t len)
{
    cuabi_status health = CUABI_SUCCESS;
    char why[1024] = "";
    if (nvml)
        health_report(j, true, &health, why, sizeof why);
    if (health != CUABI_SUCCESS) {
        if (!json_on(j))
            fprintf(stderr, "cuabi info: %s (%s)\n", why, cuabi_status_name(health));
        if (failed == CUABI_SUCCESS)
            failed = health, snprintf(failure, len, "%s", why);
    }
    if (failed != CUABI_SUCCESS)
        return json_fail(j, failed, failure, 1);
    return json_finish(j, 0);
}

int cli_info(int argc, char **argv)
{
    bool json = false;
    long long watch = 0, count = 0;
    const cli_option table[] = {
        CLI_OPT_FLAG("json", 0, &json, "one JSON object: library_version, abi_version, driver, "
                     "nvrtc, nvjitlink, nvvm, nvfatbin, nccl, devices, gpu_unavailable_reason, nvml, "
                     "health, topology"),
        CLI_OPT_INT("watch", 'w', "SECONDS", &watch, 1, 86400, "refresh NVML's health table "
                    "every SECONDS until interrupted (Ctrl-C: exit 0)"),
        CLI_OPT_INT("count", 0, "N", &count, 1, 1000000000, "with --watch: stop after N "
                    "refreshes"),
    };
    const cli_spec spec = { "info", info_about, table, sizeof table / sizeof table[0] };
    int rc = cli_parse(&spec, argc, argv);
    cli_json j = { 0 };
    if (rc == CLI_GO_ON && count && !watch) {
        rc = cli_error(json && json_start(&j) ? &j : NULL, "info", CUABI_ERROR_INVALID_ARGUMENT,
                       2, "--count needs --watch");
        cli_print_usage(&spec, NULL, stderr);
        return rc;
    }
    if (rc == CLI_GO_ON && watch)
        return health_watch(json, watch, count);
    if (rc != CLI_GO_ON || (json && !json_start(&j)))
        return rc != CLI_GO_ON ? rc : 1;
    cuabi_runtime_info rt = CUABI_RUNTIME_INFO_INIT;
    cuabi_status st = cuabi_runtime_info_get(&rt);
    if (st != CUABI_SUCCESS)
        return cli_fail("info", st, &j);
    int gpus = 0;
    const char *why = "";
    cuabi_status dst = gpu_count(&rt, &gpus, &why);
    if (json)
        json_header(&j, &rt);
    else
        text_header(&rt);
    cuabi_nvml_system_info sys;
    bool nvml = health_nvml_header(&j, &sys);
    if (!json && (dst != CUABI_SUCCESS || gpus == 0))
        printf("\nNo GPU available: %s\n", why);
    cuabi_status failed = CUABI_SUCCESS;
    char failure[1024] = "";
    list_devices(&j, gpus, &failed, failure, sizeof failure);
    json_string(&j, "gpu_unavailable_reason", why);
    return finish(&j, nvml, failed, failure, sizeof failure);
}
