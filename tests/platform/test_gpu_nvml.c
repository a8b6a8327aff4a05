/* NVML on a real GPU (exit 77 without one): the values are in plausible
 * ranges, the UUIDs, names, PCI ids and memory agree with the CUDA
 * driver's, the mapping between NVML indices and CUDA ordinals is a
 * consistent bijection onto the visible GPUs, no NVML call made a CUDA
 * context (checked first, before anything else in this process makes one:
 * cuCtxGetCurrent and cuDevicePrimaryCtxGetState), this process appears
 * in the GPU's process list once it holds memory there and its memory
 * shows in NVML's `used`, a busy kernel shows as utilisation, and NVLink
 * links and the topology between two GPUs agree with CUDA's peer access.
 * Suites run in order in one process (CK_NOFORK). */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

typedef int (*ctx_state_fn)(int dev, unsigned *flags, int *active);
typedef int (*ctx_current_fn)(void **ctx);
static ctx_state_fn primary_ctx_state;
static ctx_current_fn ctx_current;
static int cuda_count, nvml_count;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int nvml_index_of(int ordinal)
{
    int idx = -1;
    ck_assert_ok(cuabi_nvml_device_from_cuda_ordinal(&idx, ordinal));
    ck_assert_int_ge(idx, 0);
    ck_assert_int_lt(idx, nvml_count);
    return idx;
}

static cuabi_nvml_health health(int index)
{
    cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
    ck_assert_ok(cuabi_nvml_device_health_get(&h, index));
    return h;
}

static void assert_no_context(const char *after)
{
    void *cur = (void *)1;
    ck_assert_int_eq(ctx_current(&cur), 0);
    ck_assert_msg(cur == NULL, "a context is current after %s", after);
    for (int d = 0; d < cuda_count; d++) {
        unsigned flags = 0;
        int active = -1;
        ck_assert_int_eq(primary_ctx_state(d, &flags, &active), 0);
        ck_assert_msg(active == 0, "device %d's primary context is active after %s", d, after);
    }
}

/* Runs first: every NVML function, the two mappings included, and no
 * context exists afterwards. */
START_TEST(nvml_makes_no_context)
{
    assert_no_context("cuInit");
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    for (int i = 0; i < nvml_count; i++) {
        cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
        cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
        cuabi_nvml_process p[16];
        size_t n;
        int ord, idx;
        for (int k = 0; k < 16; k++)
            cuabi_nvml_process_init(&p[k], CUABI_NVML_PROCESS_VERSION);
        ck_assert_ok(cuabi_nvml_device_info_get(&d, i));
        health(i);
        ck_assert_ok(cuabi_nvml_device_processes(p, 16, &n, i));
        for (size_t k = 0; k < n && k < 16; k++)
            ck_assert_msg(p[k].pid != (unsigned)getpid(), "this process is on GPU %d already", i);
        ck_assert_ok(cuabi_nvml_topology_get(&t, i, (i + 1) % nvml_count));
        for (int l = 0; l < d.nvlink_count; l++) {
            cuabi_nvml_nvlink link = CUABI_NVML_NVLINK_INIT;
            ck_assert_ok(cuabi_nvml_device_nvlink_get(&link, i, l));
        }
        ck_assert_ok(cuabi_nvml_device_cuda_ordinal(&ord, i));
        ck_assert_ok(cuabi_nvml_device_find(&idx, d.uuid));
        ck_assert_ok(cuabi_nvml_device_find(&idx, d.pci_bus_id));
    }
    for (int o = 0; o < cuda_count; o++)
        nvml_index_of(o);
    assert_no_context("every NVML call");
}
END_TEST

START_TEST(mapping_is_a_bijection)
{
    ck_assert_int_ge(nvml_count, cuda_count);
    int seen[64] = { 0 }, mapped = 0;
    for (int o = 0; o < cuda_count; o++) {
        int idx = nvml_index_of(o), back = -2;
        ck_assert_int_lt(idx, 64);
        ck_assert_msg(!seen[idx], "NVML GPU %d is two CUDA devices", idx);
        seen[idx] = 1;
        ck_assert_ok(cuabi_nvml_device_cuda_ordinal(&back, idx));
        ck_assert_int_eq(back, o);
    }
    for (int i = 0; i < nvml_count; i++) {
        int o = -2;
        ck_assert_ok(cuabi_nvml_device_cuda_ordinal(&o, i));
        ck_assert_int_ge(o, -1);
        ck_assert_int_lt(o, cuda_count);
        mapped += o >= 0;
        ck_assert_int_eq(o >= 0, i < 64 && seen[i]);
    }
    ck_assert_int_eq(mapped, cuda_count);
    printf("mapping: %d NVML GPUs, %d CUDA devices\n", nvml_count, cuda_count);
}
END_TEST

/* "0000:17:00.0" -> domain, bus, device. */
static void parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev)
{
    ck_assert_int_eq(sscanf(s, "%x:%x:%x", dom, bus, dev), 3);
}

START_TEST(facts_agree_with_the_driver)
{
    for (int o = 0; o < cuda_count; o++) {
        int idx = nvml_index_of(o);
        cuabi_device *dev;
        cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
        ck_assert_ok(cuabi_device_get(&dev, o));
        ck_assert_ok(cuabi_device_get_properties(&p, dev));
        cuabi_device_release(dev);
        cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
        ck_assert_ok(cuabi_nvml_device_info_get(&d, idx));
        ck_assert_int_eq(memcmp(d.uuid_bytes, p.uuid, 16), 0);
        ck_assert_int_eq(strncmp(d.uuid, "GPU-", 4), 0);
        ck_assert_str_eq(d.name, p.name);
        unsigned dom, bus, devno;
        parse_bus_id(p.pci_bus_id, &dom, &bus, &devno);
        ck_assert_uint_eq(d.pci_domain, dom);
        ck_assert_uint_eq(d.pci_bus, bus);
        ck_assert_uint_eq(d.pci_device, devno);
        ck_assert_uint_eq(d.pci_device_id & 0xffff, 0x10de);
        ck_assert_int_eq(d.compute_capability_major, p.compute_capability_major);
        ck_assert_int_eq(d.compute_capability_minor, p.compute_capability_minor);
        /* cuDeviceTotalMem leaves out what the driver keeps. */
        ck_assert_uint_ge(d.memory_total, p.total_memory);
        ck_assert_uint_le(d.memory_total - p.total_memory, d.memory_total / 20);
        ck_assert_int_eq(d.ecc_enabled, p.ecc_enabled != 0);
        ck_assert_uint_ge(d.pcie_max_generation, 1);
        ck_assert_uint_le(d.pcie_max_generation, 6);
        ck_assert_uint_ge(d.pcie_max_width, 1);
        ck_assert_uint_le(d.pcie_max_width, 32);
        ck_assert_uint_ge(d.max_clock_sm_mhz, 500);
        ck_assert_uint_le(d.max_clock_sm_mhz, 4000);
        ck_assert_uint_ge(d.max_clock_memory_mhz, 500);
        ck_assert_int_ge(d.nvlink_count, 0);
        ck_assert_int_le(d.nvlink_count, 32);
        ck_assert_uint_eq(d.unavailable & (CUABI_NVML_FIELD_NAME | CUABI_NVML_FIELD_UUID |
                                           CUABI_NVML_FIELD_PCI |
                                           CUABI_NVML_FIELD_COMPUTE_CAPABILITY |
                                           CUABI_NVML_FIELD_MEMORY_TOTAL), 0);
        int found = -1;
        ck_assert_ok(cuabi_nvml_device_find(&found, d.uuid));
        ck_assert_int_eq(found, idx);
        ck_assert_ok(cuabi_nvml_device_find(&found, p.pci_bus_id)); /* CUDA's form */
        ck_assert_int_eq(found, idx);
        printf("GPU %d (CUDA %d): %s %s %s, %d NVLink links, ECC %s, unavailable 0x%llx\n", idx,
               o, d.name, d.uuid, d.pci_bus_id, d.nvlink_count, d.ecc_enabled ? "on" : "off",
               (unsigned long long)d.unavailable);
    }
}
END_TEST

START_TEST(system_info_agrees_with_the_driver)
{
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    cuabi_runtime_info rt = CUABI_RUNTIME_INFO_INIT;
    ck_assert_ok(cuabi_runtime_info_get(&rt));
    ck_assert_int_eq(s.cuda_driver_version, rt.driver_version);
    unsigned major = 0, minor = 0;
    ck_assert_int_ge(sscanf(s.driver_version, "%u.%u", &major, &minor), 2);
    ck_assert_uint_ge(major, 450);
    ck_assert_uint_gt(strlen(s.nvml_version), 0);
    ck_assert_int_eq(s.device_count, nvml_count);
    ck_assert_ptr_nonnull(strstr(s.library_path, "libnvidia-ml"));
    printf("NVML %s, driver %s (CUDA %d), %s\n", s.nvml_version, s.driver_version,
           s.cuda_driver_version, s.library_path);
}
END_TEST

static void check_plausible(const cuabi_nvml_health *h, const cuabi_nvml_device_info *d)
{
    uint64_t core = CUABI_NVML_FIELD_MEMORY | CUABI_NVML_FIELD_TEMPERATURE |
                    CUABI_NVML_FIELD_POWER_USAGE | CUABI_NVML_FIELD_POWER_LIMIT |
                    CUABI_NVML_FIELD_UTILIZATION | CUABI_NVML_FIELD_CLOCK_SM |
                    CUABI_NVML_FIELD_CLOCK_MEMORY | CUABI_NVML_FIELD_PCIE_LINK |
                    CUABI_NVML_FIELD_PERFORMANCE_STATE | CUABI_NVML_FIELD_THROTTLE_REASONS;
    ck_assert_msg((h->unavailable & core) == 0, "a data-centre GPU reports these: 0x%llx",
                  (unsigned long long)(h->unavailable & core));
    ck_assert_uint_eq(h->memory_total, d->memory_total);
    uint64_t sum = h->memory_free + h->memory_used + h->memory_reserved;
    ck_assert_msg(sum <= h->memory_total + (h->memory_total >> 6) &&
                      sum + (h->memory_total >> 6) >= h->memory_total,
                  "free %llu + used %llu + reserved %llu != total %llu",
                  (unsigned long long)h->memory_free, (unsigned long long)h->memory_used,
                  (unsigned long long)h->memory_reserved, (unsigned long long)h->memory_total);
    ck_assert_int_ge(h->temperature_gpu, 5);
    ck_assert_int_le(h->temperature_gpu, 110);
    ck_assert_uint_ge(h->power_usage_mw, 5000);
    ck_assert_uint_le(h->power_usage_mw, 1500000);
    ck_assert_uint_ge(h->power_limit_mw, 50000);
    ck_assert_uint_le(h->power_limit_mw, 1500000);
    ck_assert_uint_le(h->utilization_gpu, 100);
    ck_assert_uint_le(h->utilization_memory, 100);
    ck_assert_uint_gt(h->clock_sm_mhz, 0);
    ck_assert_uint_le(h->clock_sm_mhz, d->max_clock_sm_mhz + 100);
    ck_assert_uint_le(h->clock_memory_mhz, d->max_clock_memory_mhz + 100);
    ck_assert_uint_ge(h->pcie_generation, 1);
    ck_assert_uint_le(h->pcie_generation, d->pcie_max_generation);
    ck_assert_uint_ge(h->pcie_width, 1);
    ck_assert_uint_le(h->pcie_width, d->pcie_max_width);
    ck_assert_int_ge(h->performance_state, 0);
    ck_assert_int_le(h->performance_state, 15);
    if (d->ecc_enabled)
        ck_assert_uint_eq(h->unavailable & CUABI_NVML_FIELD_ECC_VOLATILE, 0);
    ck_assert_uint_lt(h->ecc_uncorrected_volatile, 1000000);
    ck_assert_uint_le(h->throttle_reasons >> 32, 0);
}

START_TEST(health_in_plausible_ranges)
{
    for (int i = 0; i < nvml_count; i++) {
        cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
        ck_assert_ok(cuabi_nvml_device_info_get(&d, i));
        double t0 = now();
        cuabi_nvml_health h = health(i);
        double ms = (now() - t0) * 1e3;
        check_plausible(&h, &d);
        unsigned tx = 0, rx = 0;
        t0 = now();
        cuabi_status st = cuabi_nvml_device_pcie_throughput(&tx, &rx, i);
        double tput_ms = (now() - t0) * 1e3;
        ck_assert_msg(st == CUABI_SUCCESS || st == CUABI_ERROR_NOT_SUPPORTED, "%s",
                      cuabi_last_error()->message);
        ck_assert_uint_le(tx, 100000000); /* KiB/s: at most ~100 GB/s */
        ck_assert_uint_le(rx, 100000000);
        printf("GPU %d: %d C, %.1f/%.1f W, util %u%%/%u%%, %.2f/%.2f GiB used (%.2f reserved), "
               "SM %u MHz, mem %u MHz, PCIe gen%u x%u (tx %u rx %u KiB/s: %s, %.1f ms), P%d, "
               "throttle 0x%llx, ECC %llu/%llu, unavailable 0x%llx; the health query took "
               "%.2f ms\n",
               i, h.temperature_gpu, h.power_usage_mw / 1e3, h.power_limit_mw / 1e3,
               h.utilization_gpu, h.utilization_memory, h.memory_used / 1073741824.0,
               h.memory_total / 1073741824.0, h.memory_reserved / 1073741824.0, h.clock_sm_mhz,
               h.clock_memory_mhz, h.pcie_generation, h.pcie_width, tx, rx,
               st == CUABI_SUCCESS ? "counted" : "not counted here", tput_ms,
               h.performance_state, (unsigned long long)h.throttle_reasons,
               (unsigned long long)h.ecc_corrected_volatile,
               (unsigned long long)h.ecc_uncorrected_volatile,
               (unsigned long long)h.unavailable, ms);
    }
}
END_TEST

/* A kernel that spins for about `ms` milliseconds of GPU clock. */
static const char spin_source[] =
    "extern \"C\" __global__ void spin(unsigned long long cycles, int *out) {\n"
    "  unsigned long long t0 = clock64();\n"
    "  while (clock64() - t0 < cycles) {}\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = 1;\n"
    "}\n";

/* This process on the GPU once it holds memory there, its memory in NVML's
 * used, and a busy kernel as utilisation. */
START_TEST(this_process_and_its_work_show)
{
    int ord = cuabi_test_device_ordinal(), idx = nvml_index_of(ord);
    cuabi_nvml_health before = health(idx);
    cuabi_device *dev;
    cuabi_memory_resource *res;
    cuabi_buffer *buf;
    size_t big = (size_t)1 << 30;
    ck_assert_ok(cuabi_device_get(&dev, ord));
    ck_assert_ok(cuabi_ipc_memory_resource(&res, dev)); /* cuMemAlloc: no pool in between */
    ck_assert_ok(cuabi_buffer_allocate(&buf, res, big, 0, NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    cuabi_nvml_process p[64];
    size_t n = 0, mine = SIZE_MAX;
    for (int k = 0; k < 64; k++)
        cuabi_nvml_process_init(&p[k], CUABI_NVML_PROCESS_VERSION);
    ck_assert_ok(cuabi_nvml_device_processes(p, 64, &n, idx));
    for (size_t k = 0; k < n && k < 64; k++)
        if (p[k].pid == (unsigned)getpid())
            mine = k;
    ck_assert_msg(mine != SIZE_MAX, "pid %d is not among NVML's %zu processes on GPU %d",
                  (int)getpid(), n, idx);
    ck_assert(p[mine].kinds & CUABI_NVML_PROCESS_COMPUTE);
    if (p[mine].used_memory != UINT64_MAX)
        ck_assert_uint_ge(p[mine].used_memory, big);
    cuabi_nvml_health after = health(idx);
    /* The device's used memory is every process's: another test process
     * freeing memory meanwhile moved it (two H200s, the suites side by side:
     * 155 MiB short). Asserted when this process is alone on the GPU; this
     * process's own use, above, is asserted always. */
    if (n == 1)
        ck_assert_uint_ge(after.memory_used, before.memory_used + big - (big >> 3));
    printf("GPU %d: this process (pid %u) uses %llu MiB; NVML's used rose by %lld MiB\n", idx,
           p[mine].pid, (unsigned long long)(p[mine].used_memory >> 20),
           (long long)(after.memory_used - before.memory_used) / 1048576);
    /* Utilisation while a kernel spins for about 1.5 s. */
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *k;
    cuabi_argpack *args;
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, spin_source, 0, "spin.cu"));
    ck_assert_ok(cuabi_program_compile(&code, prog, NULL));
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "spin"));
    ck_assert_ok(cuabi_argpack_create(&args, "u64, buffer"));
    ck_assert_ok(cuabi_argpack_set_uint(args, 0, (uint64_t)after.clock_sm_mhz * 1500000ULL +
                                                     3000000000ULL));
    ck_assert_ok(cuabi_argpack_set_buffer(args, 1, buf));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 132;
    c.block[0] = 128;
    c.device = dev;
    double t0 = now();
    ck_assert_ok(cuabi_launch(k, args, &c));
    unsigned best = 0, best_sm = 0;
    while (now() - t0 < 1.2) {
        usleep(200000);
        cuabi_nvml_health h = health(idx);
        best = h.utilization_gpu > best ? h.utilization_gpu : best;
        best_sm = h.clock_sm_mhz > best_sm ? h.clock_sm_mhz : best_sm;
    }
    ck_assert_ok(cuabi_device_synchronize(dev));
    printf("GPU %d: while a kernel spun for %.1f s, utilisation reached %u%%, SM clock %u MHz\n",
           idx, now() - t0, best, best_sm);
    ck_assert_uint_ge(best, 50);
    cuabi_argpack_release(args);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    cuabi_buffer_destroy(buf);
    cuabi_memory_resource_release(res);
    cuabi_device_release(dev);
}
END_TEST

START_TEST(nvlink_links_are_sane)
{
    for (int i = 0; i < nvml_count; i++) {
        cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
        ck_assert_ok(cuabi_nvml_device_info_get(&d, i));
        int active = 0, to_gpu = 0;
        for (int l = 0; l < d.nvlink_count; l++) {
            cuabi_nvml_nvlink link = CUABI_NVML_NVLINK_INIT;
            ck_assert_ok(cuabi_nvml_device_nvlink_get(&link, i, l));
            ck_assert_int_eq(link.link, l);
            ck_assert_int_ge(link.remote_index, -1);
            ck_assert_int_lt(link.remote_index, nvml_count);
            ck_assert_int_ne(link.remote_index, i);
            if (link.active) {
                active++;
                to_gpu += link.remote_index >= 0;
                ck_assert_uint_gt(strlen(link.remote_pci_bus_id), 0);
                if (!(link.unavailable & CUABI_NVML_FIELD_NVLINK_VERSION))
                    ck_assert_uint_gt(link.nvlink_version, 0);
            }
            if (l == 0)
                printf("GPU %d link 0: %s, NVLink value %u (%d.%d), remote %s (GPU %d), "
                       "P2P %d, unavailable 0x%llx\n", i, link.active ? "up" : "down",
                       link.nvlink_version, link.version_major, link.version_minor,
                       link.remote_pci_bus_id, link.remote_index, link.p2p_supported,
                       (unsigned long long)link.unavailable);
        }
        cuabi_nvml_nvlink bad = CUABI_NVML_NVLINK_INIT;
        ck_assert_status(cuabi_nvml_device_nvlink_get(&bad, i, d.nvlink_count),
                         CUABI_ERROR_INVALID_ARGUMENT);
        printf("GPU %d: %d NVLink links, %d up, %d to a GPU NVML lists\n", i, d.nvlink_count,
               active, to_gpu);
    }
}
END_TEST

/* Between every two GPUs CUDA shows: NVML's P2P over NVLink or PCIe
 * means CUDA can reach the peer. */
START_TEST(topology_agrees_with_peer_access)
{
    if (cuda_count < 2) {
        printf("topology: one GPU here, nothing to pair\n");
        cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
        ck_assert_status(cuabi_nvml_topology_get(&t, 0, nvml_count), CUABI_ERROR_INVALID_ARGUMENT);
        return;
    }
    for (int a = 0; a < cuda_count; a++)
        for (int b = 0; b < cuda_count; b++) {
            if (a == b)
                continue;
            cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
            ck_assert_ok(cuabi_nvml_topology_get(&t, nvml_index_of(a), nvml_index_of(b)));
            ck_assert_uint_eq(t.unavailable & CUABI_NVML_FIELD_TOPOLOGY, 0);
            ck_assert_int_eq(t.common_ancestor % 10, 0);
            ck_assert_int_le(t.common_ancestor, CUABI_NVML_TOPOLOGY_SYSTEM);
            cuabi_device *da, *db;
            int can = 0;
            ck_assert_ok(cuabi_device_get(&da, a));
            ck_assert_ok(cuabi_device_get(&db, b));
            ck_assert_ok(cuabi_peer_get_attribute(&can, da, db, CUABI_PEER_ACCESS_SUPPORTED));
            cuabi_device_release(da);
            cuabi_device_release(db);
            if (t.p2p_read == CUABI_NVML_P2P_OK && t.p2p_write == CUABI_NVML_P2P_OK)
                ck_assert_msg(can, "NVML: P2P between %d and %d; CUDA: no peer access", a, b);
            printf("CUDA %d -> %d: common ancestor %d, P2P read %d write %d NVLink %d atomics %d "
                   "PCI %d; CUDA peer access %d\n", a, b, t.common_ancestor, t.p2p_read,
                   t.p2p_write, t.p2p_nvlink, t.p2p_atomics, t.p2p_pci, can);
        }
}
END_TEST

static void *watch(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
        if (cuabi_nvml_device_health_get(&h, i % nvml_count) != CUABI_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

START_TEST(threads_query_at_once)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, watch, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_nvml");
    TCase *tc = tcase_create("gpu_nvml");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, nvml_makes_no_context); /* first: before any context */
    tcase_add_test(tc, mapping_is_a_bijection);
    tcase_add_test(tc, system_info_agrees_with_the_driver);
    tcase_add_test(tc, health_in_plausible_ranges);
    tcase_add_test(tc, nvlink_links_are_sane);
    tcase_add_test(tc, facts_agree_with_the_driver);
    tcase_add_test(tc, topology_agrees_with_peer_access);
    tcase_add_test(tc, threads_query_at_once);
    tcase_add_test(tc, this_process_and_its_work_show);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuda_count = cuabi_test_require_gpu();
    if (cuabi_nvml_device_count(&nvml_count) != CUABI_SUCCESS) {
        printf("SKIP: a GPU but no NVML: %s\n", cuabi_last_error()->message);
        return 77;
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    primary_ctx_state = cuda ? (ctx_state_fn)dlsym(cuda, "cuDevicePrimaryCtxGetState") : NULL;
    ctx_current = cuda ? (ctx_current_fn)dlsym(cuda, "cuCtxGetCurrent") : NULL;
    if (!primary_ctx_state || !ctx_current) {
        printf("FAIL: the driver cuabi loaded has no cuDevicePrimaryCtxGetState/cuCtxGetCurrent\n");
        return 1;
    }
    return cuabi_test_run(suite());
}
