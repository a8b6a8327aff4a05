/* NVML without a GPU: every cuabi_nvml_* function against the fake NVML
 * (tests/fixtures/fake_nvml.c, loaded through CUABI_NVML_PATH), each value
 * it reports, each way an NVML call fails or an entry point is missing,
 * hostile answers; NVML absent or not initialisable; the mapping to CUDA
 * ordinals against the fake driver, which must see no context made. */
#include <pthread.h>
#include <ctype.h>
#include <stdint.h>

#include "testutil.h"
#include "fake_driver.h"
#include "fake_nvml.h"
#include "platform/nvml_lib.h"

static fake_nvml_ctl fake;

/* Load the fake afresh, with its defaults. */
static void use_fake(void)
{
    cuabi__nvml_reset_for_test();
    fake.reset();
    setenv("CUABI_NVML_PATH", fake_nvml_path(), 1);
}

static void setup(void)
{
    unsetenv("CUABI_FAKE_NVML");
    use_fake();
}

static void teardown(void)
{
    cuabi__nvml_reset_for_test();
    ck_assert_int_eq(fake.inits(), 0); /* every nvmlInit_v2 shut down */
    cuabi__driver_install_fake(NULL);
}

static cuabi_nvml_health health(int index)
{
    cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
    ck_assert_ok(cuabi_nvml_device_health_get(&h, index));
    return h;
}

static cuabi_nvml_device_info info(int index)
{
    cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
    ck_assert_ok(cuabi_nvml_device_info_get(&d, index));
    return d;
}

/* ------------------------------------------------------------ absent */

START_TEST(absent_nvml_is_not_supported_everywhere)
{
    cuabi__nvml_reset_for_test();
    setenv("CUABI_NVML_PATH", "/nonexistent/libnvidia-ml.so.1", 1);
    int n = 7, idx;
    size_t count = 9;
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
    cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
    cuabi_nvml_nvlink l = CUABI_NVML_NVLINK_INIT;
    cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
    cuabi_status got[] = {
        cuabi_nvml_device_count(&n), cuabi_nvml_system_info_get(&s),
        cuabi_nvml_device_info_get(&d, 0), cuabi_nvml_device_health_get(&h, 0),
        cuabi_nvml_device_nvlink_get(&l, 0, 0), cuabi_nvml_topology_get(&t, 0, 1),
        cuabi_nvml_device_processes(NULL, 0, &count, 0), cuabi_nvml_device_find(&idx, "01:00.0"),
        cuabi_nvml_device_cuda_ordinal(&idx, 0), cuabi_nvml_device_from_cuda_ordinal(&idx, 0),
    };
    for (size_t i = 0; i < sizeof got / sizeof *got; i++)
        ck_assert_int_eq(got[i], CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(n, 0);
    ck_assert_uint_eq(count, 0);
    ck_assert_status(cuabi_nvml_device_count(&n), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuabi_nvml_device_count: NVML not available: ");
    ck_assert_error_mentions("CUABI_NVML_PATH=/nonexistent/libnvidia-ml.so.1");
    ck_assert(!cuabi__nvml_loaded());
    ck_assert_int_eq(cuabi__nvml_info()->loaded, -1);
}
END_TEST

/* Without CUABI_NVML_PATH the driver's libnvidia-ml.so.1 is tried; here
 * (no NVIDIA driver) it is missing and the message says what was tried. */
START_TEST(default_name_is_named_when_missing)
{
    cuabi__nvml_reset_for_test();
    unsetenv("CUABI_NVML_PATH");
    int n;
    cuabi_status st = cuabi_nvml_device_count(&n);
    if (st == CUABI_SUCCESS) {
        printf("note: a real NVML is installed here (%s): not testing its absence\n",
               cuabi__nvml_info()->path);
        return;
    }
    ck_assert_int_eq(st, CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("NVML not available: ");
    ck_assert_error_mentions("libnvidia-ml.so.1");
}
END_TEST

START_TEST(a_library_that_is_not_nvml_is_refused)
{
    cuabi__nvml_reset_for_test();
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/.libs/fake_cuda_graph.so",
             getenv("CUABI_TEST_BUILDDIR") ? getenv("CUABI_TEST_BUILDDIR") : ".");
    setenv("CUABI_NVML_PATH", path, 1);
    int n;
    ck_assert_status(cuabi_nvml_device_count(&n), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("lacks nvmlInit_v2");
}
END_TEST

START_TEST(init_failure_is_not_available_with_nvml_reason)
{
    fake.set("init", 9); /* NVML_ERROR_DRIVER_NOT_LOADED */
    int n;
    ck_assert_status(cuabi_nvml_device_count(&n), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("NVML not available: nvmlInit_v2 of ");
    ck_assert_error_mentions("NVML_ERROR_DRIVER_NOT_LOADED, 9");
    ck_assert_error_mentions("kernel driver");
    /* Remembered: no second nvmlInit_v2. */
    long inits = fake.calls("nvmlInit_v2");
    ck_assert_status(cuabi_nvml_device_count(&n), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(fake.calls("nvmlInit_v2"), inits);
}
END_TEST

/* ------------------------------------------------------------ system */

START_TEST(system_info)
{
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    ck_assert_str_eq(s.driver_version, "580.65.06");
    ck_assert_str_eq(s.nvml_version, "13.580.65.06");
    ck_assert_int_eq(s.cuda_driver_version, 13000);
    ck_assert_int_eq(s.device_count, 2);
    ck_assert_ptr_nonnull(strstr(s.library_path, "fake_nvml.so"));
    ck_assert_int_eq(fake.inits(), 1);
    /* Loaded once: a second call initialises nothing again. */
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    ck_assert_int_eq(fake.calls("nvmlInit_v2"), 1);
    ck_assert_status(cuabi_nvml_system_info_get(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    s.version = 0;
    ck_assert_status(cuabi_nvml_system_info_get(&s), CUABI_ERROR_INVALID_VERSION);
    s.version = CUABI_NVML_SYSTEM_INFO_VERSION + 1;
    ck_assert_status(cuabi_nvml_system_info_get(&s), CUABI_ERROR_INVALID_VERSION);
}
END_TEST

START_TEST(system_info_without_optional_entries)
{
    int n;
    ck_assert_ok(cuabi_nvml_device_count(&n));
    cuabi__nvml *t = cuabi__nvml_for_test();
    t->nvmlSystemGetCudaDriverVersion_v2 = NULL; /* an older NVML */
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    ck_assert_int_eq(s.cuda_driver_version, 13000);
    ck_assert_int_eq(fake.calls("nvmlSystemGetCudaDriverVersion"), 1);
    t->nvmlSystemGetCudaDriverVersion = NULL;
    t->nvmlSystemGetDriverVersion = NULL;
    fake.inject("nvmlSystemGetNVMLVersion", -1, 3, 0);
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    ck_assert_int_eq(s.cuda_driver_version, 0);
    ck_assert_str_eq(s.driver_version, "");
    ck_assert_str_eq(s.nvml_version, "");
    ck_assert_int_eq(s.device_count, 2);
}
END_TEST

START_TEST(device_count)
{
    int n = -1;
    ck_assert_ok(cuabi_nvml_device_count(&n));
    ck_assert_int_eq(n, 2);
    fake.set("count", 5);
    ck_assert_ok(cuabi_nvml_device_count(&n));
    ck_assert_int_eq(n, 5);
    fake.set("count", 0);
    ck_assert_ok(cuabi_nvml_device_count(&n));
    ck_assert_int_eq(n, 0);
    ck_assert_status(cuabi_nvml_device_count(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    fake.inject("nvmlDeviceGetCount_v2", -1, 15, 1);
    ck_assert_status(cuabi_nvml_device_count(&n), CUABI_ERROR_NVML);
    ck_assert_int_eq(cuabi_last_error()->nvml_result, 15);
    ck_assert_error_mentions("cuabi_nvml_device_count: nvmlDeviceGetCount_v2 failed: GPU is lost "
                             "(NVML_ERROR_GPU_IS_LOST, 15)");
}
END_TEST

/* ------------------------------------------------------------ one GPU */

START_TEST(device_info)
{
    for (int i = 0; i < 2; i++) {
        cuabi_nvml_device_info d = info(i);
        int ordinal = 1 - i; /* NVML lists the fake driver's GPUs in the other order */
        char want[64];
        ck_assert_int_eq(d.index, i);
        snprintf(want, sizeof want, "NVIDIA H100 80GB HBM3 (fake %d)", i);
        ck_assert_str_eq(d.name, want);
        ck_assert_int_eq(strncmp(d.uuid, "GPU-", 4), 0);
        ck_assert_uint_eq(strlen(d.uuid), 40);
        for (int b = 0; b < 16; b++)
            ck_assert_uint_eq(d.uuid_bytes[b], (unsigned)(b + ordinal));
        snprintf(want, sizeof want, "00000000:%02X:00.0", ordinal + 1);
        ck_assert_str_eq(d.pci_bus_id, want);
        ck_assert_uint_eq(d.pci_domain, 0);
        ck_assert_uint_eq(d.pci_bus, (unsigned)ordinal + 1);
        ck_assert_uint_eq(d.pci_device, 0);
        ck_assert_uint_eq(d.pci_device_id, 0x233010de);
        ck_assert_int_eq(d.compute_capability_major, 9);
        ck_assert_int_eq(d.compute_capability_minor, 0);
        ck_assert_uint_eq(d.memory_total, 80ULL << 30);
        ck_assert_uint_eq(d.pcie_max_generation, 5);
        ck_assert_uint_eq(d.pcie_max_width, 16);
        ck_assert_uint_eq(d.max_clock_graphics_mhz, 1980);
        ck_assert_uint_eq(d.max_clock_sm_mhz, 1980);
        ck_assert_uint_eq(d.max_clock_memory_mhz, 2619);
        ck_assert_int_eq(d.ecc_enabled, 1);
        ck_assert_int_eq(d.ecc_pending, 1);
        ck_assert_uint_eq(d.minor_number, (unsigned)ordinal);
        ck_assert_int_eq(d.nvlink_count, 4);
        ck_assert_uint_eq(d.unavailable, 0);
    }
}
END_TEST

START_TEST(device_info_bad_arguments)
{
    cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
    ck_assert_status(cuabi_nvml_device_info_get(&d, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("GPU index 2: NVML lists 2 GPUs (indices 0 .. 1)");
    ck_assert_status(cuabi_nvml_device_info_get(&d, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_info_get(NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    d.version = 0;
    ck_assert_status(cuabi_nvml_device_info_get(&d, 0), CUABI_ERROR_INVALID_VERSION);
    fake.set("count", 0);
    d.version = CUABI_NVML_DEVICE_INFO_VERSION;
    ck_assert_status(cuabi_nvml_device_info_get(&d, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("NVML lists 0 GPUs");
    fake.set("count", 2);
    fake.inject("nvmlDeviceGetHandleByIndex_v2", 1, 4, 1);
    ck_assert_status(cuabi_nvml_device_info_get(&d, 1), CUABI_ERROR_NVML);
    ck_assert_error_mentions("nvmlDeviceGetHandleByIndex_v2 failed: Insufficient Permissions");
}
END_TEST

START_TEST(device_info_unreported_fields)
{
    fake.set("ecc_enabled.0", 0);
    fake.inject("nvmlDeviceGetCudaComputeCapability", 0, 3, 0);
    fake.inject("nvmlDeviceGetMaxPcieLinkWidth", 0, 4, 0);
    fake.inject("nvmlDeviceGetMinorNumber", 0, 13, 0); /* FUNCTION_NOT_FOUND */
    fake.set("nvlinks.0", 0);
    cuabi_nvml_device_info d = info(0);
    ck_assert_int_eq(d.ecc_enabled, 0);
    ck_assert_uint_eq(d.unavailable, CUABI_NVML_FIELD_COMPUTE_CAPABILITY |
                                         CUABI_NVML_FIELD_PCIE_MAX_LINK |
                                         CUABI_NVML_FIELD_MINOR_NUMBER);
    ck_assert_int_eq(d.compute_capability_major, 0);
    ck_assert_uint_eq(d.pcie_max_generation, 0); /* the pair, whole or not at all */
    ck_assert_uint_eq(d.pcie_max_width, 0);
    ck_assert_int_eq(d.nvlink_count, 0);
    /* The other GPU is not touched by GPU 0's failures. */
    ck_assert_uint_eq(info(1).unavailable, 0);
    /* Entry points this NVML lacks. */
    cuabi__nvml *t = cuabi__nvml_for_test();
    t->nvmlDeviceGetName = NULL;
    t->nvmlDeviceGetUUID = NULL;
    t->nvmlDeviceGetPciInfo_v3 = NULL;
    t->nvmlDeviceGetNvLinkState = NULL;
    d = info(1);
    ck_assert_uint_eq(d.unavailable, CUABI_NVML_FIELD_NAME | CUABI_NVML_FIELD_UUID |
                                         CUABI_NVML_FIELD_PCI);
    ck_assert_str_eq(d.name, "");
    ck_assert_str_eq(d.uuid, "");
    ck_assert_str_eq(d.pci_bus_id, "");
    ck_assert_int_eq(d.nvlink_count, 0);
}
END_TEST

/* Strings NVML fills to the end without a NUL, a UUID that is none: each
 * is cut at its field's end, and the UUID bytes are unavailable. */
START_TEST(hostile_strings_are_bounded)
{
    fake.set("garbage.1", 1);
    cuabi_nvml_device_info d = info(1);
    ck_assert_uint_eq(strlen(d.name), sizeof d.name - 1);
    ck_assert_uint_eq(strlen(d.uuid), sizeof d.uuid - 1);
    ck_assert_uint_eq(strlen(d.pci_bus_id), sizeof d.pci_bus_id - 1);
    ck_assert_uint_eq(d.unavailable, CUABI_NVML_FIELD_UUID);
    for (int b = 0; b < 16; b++)
        ck_assert_uint_eq(d.uuid_bytes[b], 0);
    int idx;
    /* A GPU without a usable UUID is skipped, not an error. */
    ck_assert_status(cuabi_nvml_device_find(&idx, info(0).uuid), CUABI_SUCCESS);
    ck_assert_int_eq(idx, 0);
    ck_assert_status(cuabi_nvml_device_find(&idx, "GPU-00000000-0000-0000-0000-000000000000"),
                     CUABI_ERROR_NOT_FOUND);
}
END_TEST

/* Strings of control characters and bytes past ASCII (a terminal escape,
 * invalid UTF-8): handed back as printable ASCII, '?' for each such byte. */
START_TEST(hostile_strings_are_printable)
{
    fake.set("garbage.1", 2);
    cuabi_nvml_device_info d = info(1);
    const char *texts[] = { d.name, d.uuid, d.pci_bus_id };
    for (int t = 0; t < 3; t++) {
        ck_assert_uint_gt(strlen(texts[t]), 0);
        for (const char *c = texts[t]; *c; c++)
            ck_assert_msg(*c >= 0x20 && *c <= 0x7e, "byte 0x%02x in \"%s\"",
                          (unsigned char)*c, texts[t]);
    }
    ck_assert_int_eq(strncmp(d.name, "?[2J?????????[2J????????", 24), 0);
    ck_assert(d.unavailable & CUABI_NVML_FIELD_UUID);
}
END_TEST

START_TEST(health_values)
{
    cuabi_nvml_health h = health(1);
    ck_assert_int_eq(h.index, 1);
    ck_assert_uint_eq(h.unavailable, 0);
    ck_assert_uint_eq(h.memory_total, 80ULL << 30);
    ck_assert_uint_eq(h.memory_used, (1ULL << 30) + 1);
    ck_assert_uint_eq(h.memory_reserved, 512ULL << 20);
    ck_assert_uint_eq(h.memory_free, (80ULL << 30) - (512ULL << 20) - (1ULL << 30) - 1);
    ck_assert_uint_eq(h.utilization_gpu, 10);
    ck_assert_uint_eq(h.utilization_memory, 5);
    ck_assert_int_eq(h.temperature_gpu, 41);
    ck_assert_uint_eq(h.power_usage_mw, 71000);
    ck_assert_uint_eq(h.power_limit_mw, 700000);
    ck_assert_uint_eq(h.power_management_limit_mw, 700000);
    ck_assert_uint_eq(h.clock_graphics_mhz, 1755);
    ck_assert_uint_eq(h.clock_sm_mhz, 1980);
    ck_assert_uint_eq(h.clock_memory_mhz, 2619);
    ck_assert_uint_eq(h.ecc_corrected_volatile, 3);
    ck_assert_uint_eq(h.ecc_uncorrected_volatile, 0);
    ck_assert_uint_eq(h.ecc_corrected_aggregate, 7);
    ck_assert_uint_eq(h.ecc_uncorrected_aggregate, 1);
    ck_assert_uint_eq(h.throttle_reasons, CUABI_NVML_THROTTLE_GPU_IDLE);
    ck_assert_uint_eq(h.pcie_generation, 5);
    ck_assert_uint_eq(h.pcie_width, 16);
    ck_assert_int_eq(h.performance_state, 0);
    ck_assert_uint_eq(h.fan_speed_percent, 30);
    /* Values change as NVML's do. */
    fake.set("temp.1", 87);
    fake.set("power.1", 650123);
    fake.set("throttle.1", CUABI_NVML_THROTTLE_SW_POWER_CAP | CUABI_NVML_THROTTLE_HW_SLOWDOWN |
                               0x10000 /* a bit NVML adds later */);
    fake.set("ecc_uv", 12);
    fake.set("pstate.1", 8);
    h = health(1);
    ck_assert_int_eq(h.temperature_gpu, 87);
    ck_assert_uint_eq(h.power_usage_mw, 650123);
    ck_assert_uint_eq(h.throttle_reasons, 0x1000c);
    ck_assert_uint_eq(h.ecc_uncorrected_volatile, 12);
    ck_assert_int_eq(h.performance_state, 8);
}
END_TEST

START_TEST(health_unreported_fields)
{
    fake.set("temp.0", -1);        /* the fake's "not supported" */
    fake.set("ecc_enabled.0", 0);  /* no ECC counts while ECC is off */
    fake.set("pstate.0", 32);      /* NVML_PSTATE_UNKNOWN */
    fake.inject("nvmlDeviceGetPowerUsage", 0, 3, 0);
    fake.inject("nvmlDeviceGetFanSpeed", 0, 13, 0);       /* FUNCTION_NOT_FOUND */
    fake.inject("nvmlDeviceGetCurrPcieLinkWidth", 0, 3, 0);
    cuabi_nvml_health h = health(0);
    ck_assert_uint_eq(h.unavailable,
                      CUABI_NVML_FIELD_TEMPERATURE | CUABI_NVML_FIELD_ECC_VOLATILE |
                          CUABI_NVML_FIELD_ECC_AGGREGATE | CUABI_NVML_FIELD_PERFORMANCE_STATE |
                          CUABI_NVML_FIELD_POWER_USAGE |
                          CUABI_NVML_FIELD_FAN_SPEED | CUABI_NVML_FIELD_PCIE_LINK);
    ck_assert_int_eq(h.temperature_gpu, 0);
    ck_assert_uint_eq(h.ecc_corrected_volatile + h.ecc_corrected_aggregate, 0);
    ck_assert_int_eq(h.performance_state, 0);
    ck_assert_uint_eq(h.power_usage_mw, 0);
    ck_assert_uint_eq(h.pcie_generation, 0); /* half a pair reads 0 */
    ck_assert_uint_eq(h.power_limit_mw, 700000);
    ck_assert_uint_eq(health(1).unavailable, 0);
}
END_TEST

/* An NVML failure that is no "not reported": the call fails, names the
 * entry point and NVML's code, and asks nothing more of NVML. */
START_TEST(health_failure_stops_the_query)
{
    fake.inject("nvmlDeviceGetPowerUsage", 1, 15, 1);
    long clocks = fake.calls("nvmlDeviceGetClockInfo");
    cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
    ck_assert_status(cuabi_nvml_device_health_get(&h, 1), CUABI_ERROR_NVML);
    const cuabi_error_info *e = cuabi_last_error();
    ck_assert_int_eq(e->nvml_result, 15);
    ck_assert_int_eq(e->cu_result, 0);
    ck_assert_uint_ge(e->version, 2);
    ck_assert_error_mentions("cuabi_nvml_device_health_get: nvmlDeviceGetPowerUsage failed: "
                             "GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)");
    ck_assert_int_eq(fake.calls("nvmlDeviceGetClockInfo"), clocks);
    /* Once: the next call answers. */
    ck_assert_uint_eq(health(1).power_usage_mw, 71000);
    cuabi_error_clear();
    ck_assert_int_eq(cuabi_last_error()->nvml_result, 0);
    /* Without nvmlErrorString, and with a code cuabi does not know. */
    cuabi__nvml_for_test()->nvmlErrorString = NULL;
    fake.inject("nvmlDeviceGetTemperature", 1, 12345, 1);
    ck_assert_status(cuabi_nvml_device_health_get(&h, 1), CUABI_ERROR_NVML);
    ck_assert_error_mentions("nvmlDeviceGetTemperature failed: an nvmlReturn_t unknown to cuabi "
                             "(12345)");
    ck_assert_int_eq(cuabi_last_error()->nvml_result, 12345);
    fake.inject("nvmlDeviceGetTemperature", 1, 999, 1);
    ck_assert_status(cuabi_nvml_device_health_get(&h, 1), CUABI_ERROR_NVML);
    ck_assert_error_mentions("NVML_ERROR_UNKNOWN (999)");
}
END_TEST

/* Older NVMLs: memory without v2 (then `used` holds what the driver
 * reserves), throttle reasons under their old name. */
START_TEST(health_falls_back_to_older_queries)
{
    cuabi_nvml_health h = health(0);
    ck_assert_int_eq(fake.calls("nvmlDeviceGetMemoryInfo"), 0);
    ck_assert_int_eq(fake.calls("nvmlDeviceGetCurrentClocksThrottleReasons"), 0);
    fake.inject("nvmlDeviceGetMemoryInfo_v2", -1, 25, 1); /* ARGUMENT_VERSION_MISMATCH */
    h = health(0);
    ck_assert_uint_eq(h.unavailable, CUABI_NVML_FIELD_MEMORY_RESERVED);
    ck_assert_uint_eq(h.memory_used, (1ULL << 30) + (512ULL << 20));
    ck_assert_uint_eq(h.memory_reserved, 0);
    ck_assert_uint_eq(h.memory_total, 80ULL << 30);
    cuabi__nvml *t = cuabi__nvml_for_test();
    t->nvmlDeviceGetMemoryInfo_v2 = NULL;
    t->nvmlDeviceGetCurrentClocksEventReasons = NULL;
    fake.set("throttle", CUABI_NVML_THROTTLE_SW_THERMAL_SLOWDOWN);
    h = health(0);
    ck_assert_uint_eq(h.unavailable, CUABI_NVML_FIELD_MEMORY_RESERVED);
    ck_assert_uint_eq(h.throttle_reasons, CUABI_NVML_THROTTLE_SW_THERMAL_SLOWDOWN);
    ck_assert_int_eq(fake.calls("nvmlDeviceGetCurrentClocksThrottleReasons"), 1);
    t->nvmlDeviceGetMemoryInfo = NULL;
    t->nvmlDeviceGetCurrentClocksThrottleReasons = NULL;
    h = health(0);
    ck_assert_uint_eq(h.unavailable, CUABI_NVML_FIELD_MEMORY_RESERVED | CUABI_NVML_FIELD_MEMORY |
                                         CUABI_NVML_FIELD_THROTTLE_REASONS);
    ck_assert_uint_eq(h.memory_total, 0);
}
END_TEST

START_TEST(pcie_throughput)
{
    unsigned tx = 7, rx = 7;
    ck_assert_ok(cuabi_nvml_device_pcie_throughput(&tx, &rx, 1));
    ck_assert_uint_eq(tx, 1000);
    ck_assert_uint_eq(rx, 2000);
    /* Not in the health query: it costs NVML 20 ms a direction. */
    long before = fake.calls("nvmlDeviceGetPcieThroughput");
    health(1);
    ck_assert_int_eq(fake.calls("nvmlDeviceGetPcieThroughput"), before);
    fake.inject("nvmlDeviceGetPcieThroughput", 0, 4, 0); /* NO_PERMISSION */
    ck_assert_status(cuabi_nvml_device_pcie_throughput(&tx, &rx, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("does not count PCIe bytes of GPU 0");
    ck_assert_uint_eq(tx + rx, 0);
    fake.inject("nvmlDeviceGetPcieThroughput", 1, 15, 1);
    ck_assert_status(cuabi_nvml_device_pcie_throughput(&tx, &rx, 1), CUABI_ERROR_NVML);
    ck_assert_status(cuabi_nvml_device_pcie_throughput(&tx, &rx, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_pcie_throughput(NULL, &rx, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_pcie_throughput(&tx, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(health_bad_arguments)
{
    cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
    ck_assert_status(cuabi_nvml_device_health_get(&h, 7), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_health_get(NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    h.version = 77;
    ck_assert_status(cuabi_nvml_device_health_get(&h, 0), CUABI_ERROR_INVALID_VERSION);
}
END_TEST

/* ------------------------------------------------------------ NVLink */

START_TEST(nvlink_links)
{
    cuabi_nvml_nvlink l = CUABI_NVML_NVLINK_INIT;
    for (int link = 0; link < 2; link++) {
        ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 0, link));
        ck_assert_int_eq(l.link, link);
        ck_assert_int_eq(l.active, 1);
        ck_assert_uint_eq(l.nvlink_version, 6);
        ck_assert_int_eq(l.version_major, 4);
        ck_assert_int_eq(l.version_minor, 0);
        ck_assert_str_eq(l.remote_pci_bus_id, "00000000:01:00.0"); /* GPU 1 */
        ck_assert_int_eq(l.remote_index, 1);
        ck_assert_int_eq(l.p2p_supported, 1);
        ck_assert_uint_eq(l.unavailable, 0);
    }
    ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 1, 0));
    ck_assert_int_eq(l.remote_index, 0);
    ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 0, 2)); /* to an NVSwitch */
    ck_assert_str_eq(l.remote_pci_bus_id, "00000000:80:00.0");
    ck_assert_int_eq(l.remote_index, -1);
    ck_assert_int_eq(l.p2p_supported, 0);
    ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 0, 3)); /* down */
    ck_assert_int_eq(l.active, 0);
    ck_assert_int_eq(l.remote_index, -1);
    ck_assert_str_eq(l.remote_pci_bus_id, "");
    ck_assert_uint_eq(l.unavailable, CUABI_NVML_FIELD_NVLINK_REMOTE);
    fake.set("nvlink_version", 99); /* a version cuabi does not know */
    ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 0, 0));
    ck_assert_uint_eq(l.nvlink_version, 99);
    ck_assert_int_eq(l.version_major, 0);
}
END_TEST

START_TEST(nvlink_bad_links)
{
    cuabi_nvml_nvlink l = CUABI_NVML_NVLINK_INIT;
    ck_assert_status(cuabi_nvml_device_nvlink_get(&l, 0, 4), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("link 4: GPU 0 has 4 NVLink links");
    ck_assert_status(cuabi_nvml_device_nvlink_get(&l, 0, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_nvlink_get(&l, 2, 0), CUABI_ERROR_INVALID_ARGUMENT);
    fake.set("nvlinks", 0);
    ck_assert_status(cuabi_nvml_device_nvlink_get(&l, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("none NVML reports");
    fake.set("nvlinks", 40); /* more than NVML's maximum: its INVALID_ARGUMENT ends the count */
    ck_assert_int_eq(info(0).nvlink_count, 18);
    ck_assert_status(cuabi_nvml_device_nvlink_get(NULL, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    fake.set("nvlinks", 4);
    fake.inject("nvmlDeviceGetNvLinkVersion", 0, 15, 1);
    ck_assert_status(cuabi_nvml_device_nvlink_get(&l, 0, 0), CUABI_ERROR_NVML);
    ck_assert_error_mentions("nvmlDeviceGetNvLinkVersion");
    fake.inject("nvmlDeviceGetNvLinkCapability", 0, 3, 1);
    ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 0, 0));
    ck_assert_uint_eq(l.unavailable, CUABI_NVML_FIELD_NVLINK_P2P);
}
END_TEST

/* ------------------------------------------------------------ topology */

START_TEST(topology)
{
    cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
    ck_assert_ok(cuabi_nvml_topology_get(&t, 0, 1));
    ck_assert_int_eq(t.common_ancestor, CUABI_NVML_TOPOLOGY_NODE);
    ck_assert_int_eq(t.p2p_read, CUABI_NVML_P2P_OK);
    ck_assert_int_eq(t.p2p_write, CUABI_NVML_P2P_OK);
    ck_assert_int_eq(t.p2p_nvlink, CUABI_NVML_P2P_OK);
    ck_assert_int_eq(t.p2p_atomics, CUABI_NVML_P2P_OK);
    ck_assert_int_eq(t.p2p_pci, CUABI_NVML_P2P_NOT_SUPPORTED);
    ck_assert_uint_eq(t.unavailable, 0);
    ck_assert_ok(cuabi_nvml_topology_get(&t, 1, 1));
    ck_assert_int_eq(t.common_ancestor, CUABI_NVML_TOPOLOGY_INTERNAL);
    ck_assert_status(cuabi_nvml_topology_get(&t, 0, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_topology_get(&t, -3, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_topology_get(NULL, 0, 1), CUABI_ERROR_INVALID_ARGUMENT);
    fake.inject("nvmlDeviceGetTopologyCommonAncestor", -1, 3, 1);
    fake.inject("nvmlDeviceGetP2PStatus", -1, 3, 2);
    ck_assert_ok(cuabi_nvml_topology_get(&t, 0, 1));
    ck_assert_uint_eq(t.unavailable, CUABI_NVML_FIELD_TOPOLOGY);
    ck_assert_int_eq(t.common_ancestor, CUABI_NVML_TOPOLOGY_SYSTEM);
    ck_assert_int_eq(t.p2p_read, CUABI_NVML_P2P_UNKNOWN);
    ck_assert_int_eq(t.p2p_write, CUABI_NVML_P2P_UNKNOWN);
    ck_assert_int_eq(t.p2p_nvlink, CUABI_NVML_P2P_OK);
    fake.inject("nvmlDeviceGetP2PStatus", -1, 15, 1);
    ck_assert_status(cuabi_nvml_topology_get(&t, 0, 1), CUABI_ERROR_NVML);
}
END_TEST

/* ------------------------------------------------------------ processes */

static cuabi_nvml_process procs[8];

static void procs_init(void)
{
    for (size_t i = 0; i < 8; i++)
        ck_assert_ok(cuabi_nvml_process_init(&procs[i], CUABI_NVML_PROCESS_VERSION));
}

START_TEST(processes)
{
    procs_init();
    size_t n = 99;
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 0));
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(procs[0].pid, 1000);
    ck_assert_uint_eq(procs[0].kinds, CUABI_NVML_PROCESS_COMPUTE);
    ck_assert_uint_eq(procs[0].used_memory, 512ULL << 20);
    ck_assert_uint_eq(procs[1].pid, 1001); /* in both lists: one entry */
    ck_assert_uint_eq(procs[1].kinds, CUABI_NVML_PROCESS_COMPUTE | CUABI_NVML_PROCESS_GRAPHICS);
    ck_assert_uint_eq(procs[1].used_memory, 256ULL << 20);
    ck_assert_uint_eq(procs[2].pid, 1002);
    ck_assert_uint_eq(procs[2].kinds, CUABI_NVML_PROCESS_GRAPHICS);
    ck_assert_uint_eq(procs[2].used_memory, UINT64_MAX);
    ck_assert_uint_eq(procs[2].gpu_instance_id, 0xFFFFFFFFu);
    ck_assert_uint_eq(procs[2].version, CUABI_NVML_PROCESS_VERSION);
    /* Fewer slots than processes: the count still says all. */
    procs_init();
    ck_assert_ok(cuabi_nvml_device_processes(procs, 2, &n, 0));
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(procs[1].pid, 1001);
    ck_assert_uint_eq(procs[2].pid, 0);
    ck_assert_ok(cuabi_nvml_device_processes(NULL, 0, &n, 0));
    ck_assert_uint_eq(n, 3);
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 1));
    ck_assert_uint_eq(n, 0);
    fake.set("procs.1", 5);
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 1));
    ck_assert_uint_eq(n, 5);
    ck_assert_uint_eq(procs[4].pid, 2004);
}
END_TEST

START_TEST(processes_bad_arguments)
{
    procs_init();
    size_t n = 5;
    ck_assert_status(cuabi_nvml_device_processes(procs, 8, NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_processes(NULL, 1, &n, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(n, 0);
    procs[5].version = 0;
    ck_assert_status(cuabi_nvml_device_processes(procs, 8, &n, 0), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_nvml_device_processes(procs, 5, &n, 9), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(processes_when_nvml_lists_few)
{
    procs_init();
    size_t n;
    fake.inject("nvmlDeviceGetGraphicsRunningProcesses_v3", -1, 3, 0);
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 0));
    ck_assert_uint_eq(n, 2); /* compute only: 1000 and 1001 */
    ck_assert_uint_eq(procs[1].kinds, CUABI_NVML_PROCESS_COMPUTE);
    fake.inject("nvmlDeviceGetComputeRunningProcesses_v3", -1, 4, 0);
    ck_assert_status(cuabi_nvml_device_processes(procs, 8, &n, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("NVML lists no processes");
    fake.reset();
    /* An NVML without the _v3 queries: the _v2 ones (the same layout). */
    cuabi__nvml *t = cuabi__nvml_for_test();
    t->nvmlDeviceGetComputeRunningProcesses_v3 = NULL;
    t->nvmlDeviceGetGraphicsRunningProcesses_v3 = NULL;
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 0));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_gt(fake.calls("nvmlDeviceGetComputeRunningProcesses_v2"), 0);
    t->nvmlDeviceGetComputeRunningProcesses_v2 = NULL;
    t->nvmlDeviceGetGraphicsRunningProcesses_v2 = NULL;
    ck_assert_status(cuabi_nvml_device_processes(procs, 8, &n, 0), CUABI_ERROR_NOT_SUPPORTED);
}
END_TEST

/* A list that grows between the size query and the fetch is asked again;
 * a count past reason is refused, not allocated; a failure is reported. */
START_TEST(processes_hostile_counts)
{
    procs_init();
    size_t n;
    fake.set("proc_grow.0", 1);
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 0));
    ck_assert_uint_ge(n, 4);
    fake.reset();
    fake.set("proc_claim.0", 100000000);
    ck_assert_status(cuabi_nvml_device_processes(procs, 8, &n, 0), CUABI_ERROR_NVML);
    ck_assert_error_mentions("reports 100000000 processes, more than the 65536");
    ck_assert_uint_eq(n, 0);
    fake.set("proc_claim.0", 40); /* claims 40, returns 2 */
    ck_assert_ok(cuabi_nvml_device_processes(procs, 8, &n, 0));
    ck_assert_uint_eq(n, 3);
    fake.reset();
    fake.set("proc_grow.0", 50); /* grows past every retry's room until the fake's maximum */
    ck_assert_ok(cuabi_nvml_device_processes(NULL, 0, &n, 0));
    ck_assert_uint_le(n, 64);
    fake.reset();
    fake.inject("nvmlDeviceGetComputeRunningProcesses_v3", 0, 15, 1);
    ck_assert_status(cuabi_nvml_device_processes(procs, 8, &n, 0), CUABI_ERROR_NVML);
    ck_assert_error_mentions("nvmlDeviceGetComputeRunningProcesses_v3 failed: GPU is lost");
}
END_TEST

/* ------------------------------------------------------------ finding GPUs */

START_TEST(find_by_uuid_and_pci)
{
    int idx = -5;
    cuabi_nvml_device_info d0 = info(0), d1 = info(1);
    ck_assert_ok(cuabi_nvml_device_find(&idx, d0.uuid));
    ck_assert_int_eq(idx, 0);
    ck_assert_ok(cuabi_nvml_device_find(&idx, d1.uuid + 4)); /* without "GPU-" */
    ck_assert_int_eq(idx, 1);
    char upper[96];
    snprintf(upper, sizeof upper, "%s", d1.uuid);
    for (char *p = upper; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    ck_assert_ok(cuabi_nvml_device_find(&idx, upper));
    ck_assert_int_eq(idx, 1);
    ck_assert_ok(cuabi_nvml_device_find(&idx, "00000000:02:00.0"));
    ck_assert_int_eq(idx, 0);
    ck_assert_ok(cuabi_nvml_device_find(&idx, "0000:01:00.0")); /* CUDA's form */
    ck_assert_int_eq(idx, 1);
    ck_assert_ok(cuabi_nvml_device_find(&idx, "01:00.0"));
    ck_assert_int_eq(idx, 1);
    ck_assert_status(cuabi_nvml_device_find(&idx, "0000:09:00.0"), CUABI_ERROR_NOT_FOUND);
    ck_assert_int_eq(idx, -1);
    ck_assert_error_mentions("no GPU NVML lists is 0000:09:00.0");
    ck_assert_status(cuabi_nvml_device_find(&idx, "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"),
                     CUABI_ERROR_NOT_FOUND);
}
END_TEST

START_TEST(find_refuses_what_is_no_id)
{
    int idx;
    static const char *const bad[] = {
        "", "hello", " 0000:01:00.0", "0000:01:00.0 ", "-1:00.0", "0x01:00.0", "01:00", "01:32.0",
        "01:00.8", "GPU-0102", "GPU-0102030405060708090a0b0c0d0e0f10ff",
        "GPU-zz02030405060708090a0b0c0d0e0f10",
        "1:2:3:4.5",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(cuabi_nvml_device_find(&idx, bad[i]) == CUABI_ERROR_INVALID_ARGUMENT,
                      "\"%s\" was taken: %s", bad[i], cuabi_last_error()->message);
        ck_assert_int_eq(idx, -1);
    }
    char *huge = malloc(100000);
    memset(huge, 'a', 99999);
    huge[99999] = '\0';
    ck_assert_status(cuabi_nvml_device_find(&idx, huge), CUABI_ERROR_INVALID_ARGUMENT);
    free(huge);
    ck_assert_status(cuabi_nvml_device_find(&idx, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_find(NULL, "01:00.0"), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* ------------------------------------------------------------ CUDA ordinals */

/* Driver calls that make or use a context: none may come from NVML's
 * functions. */
static int context_calls;
static CUresult CUDAAPI trip_retain(CUcontext *c, CUdevice d)
{
    (void)c, (void)d;
    context_calls++;
    return CUDA_ERROR_INVALID_CONTEXT;
}
static CUresult CUDAAPI trip_set(CUcontext c)
{
    (void)c;
    context_calls++;
    return CUDA_ERROR_INVALID_CONTEXT;
}

static void install_tripwired_driver(void)
{
    fake_driver_install();
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuDevicePrimaryCtxRetain = trip_retain;
    d->cuCtxSetCurrent = trip_set;
    d->cuCtxPushCurrent = NULL;
    context_calls = 0;
}

START_TEST(cuda_ordinals_by_uuid)
{
    install_tripwired_driver();
    int ord = -5, idx = -5;
    ck_assert_ok(cuabi_nvml_device_cuda_ordinal(&ord, 0));
    ck_assert_int_eq(ord, 1);
    ck_assert_ok(cuabi_nvml_device_cuda_ordinal(&ord, 1));
    ck_assert_int_eq(ord, 0);
    ck_assert_ok(cuabi_nvml_device_from_cuda_ordinal(&idx, 0));
    ck_assert_int_eq(idx, 1);
    ck_assert_ok(cuabi_nvml_device_from_cuda_ordinal(&idx, 1));
    ck_assert_int_eq(idx, 0);
    /* The UUIDs agree with what cuabi_device_properties would say. */
    CUuuid u;
    cuabi__driver_for_test()->cuDeviceGetUuid(&u, 1);
    ck_assert_int_eq(memcmp(u.bytes, info(0).uuid_bytes, 16), 0);
    /* A GPU CUDA does not show here (the fake driver has two). */
    fake.set("count", 3);
    ck_assert_ok(cuabi_nvml_device_cuda_ordinal(&ord, 2));
    ck_assert_int_eq(ord, -1);
    ck_assert_status(cuabi_nvml_device_from_cuda_ordinal(&idx, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_from_cuda_ordinal(&idx, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_cuda_ordinal(&ord, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_cuda_ordinal(NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_nvml_device_from_cuda_ordinal(NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    /* A CUDA device NVML does not list. */
    fake.set("count", 1);
    ck_assert_status(cuabi_nvml_device_from_cuda_ordinal(&idx, 0), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("CUDA device 0 is none of the 1 GPUs NVML lists");
    /* NVML without UUIDs cannot map. */
    fake.set("count", 2);
    fake.inject("nvmlDeviceGetUUID", -1, 3, 0);
    ck_assert_status(cuabi_nvml_device_cuda_ordinal(&ord, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("NVML does not tell GPU 0's UUID");
    ck_assert_status(cuabi_nvml_device_from_cuda_ordinal(&idx, 0), CUABI_ERROR_NOT_FOUND);
    /* A driver failure is the driver's error. */
    fake.reset();
    cuabi__driver_for_test()->cuDeviceGetUuid = NULL;
    ck_assert_status(cuabi_nvml_device_cuda_ordinal(&ord, 0), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_int_eq(context_calls, 0);
}
END_TEST

START_TEST(cuda_ordinals_without_a_driver)
{
    cuabi__driver_install_fake(NULL);
    cuabi_test_no_driver();
    int ord = 5;
    ck_assert_status(cuabi_nvml_device_cuda_ordinal(&ord, 0), CUABI_ERROR_DRIVER_NOT_FOUND);
    ck_assert_int_eq(ord, -1);
    ck_assert_error_mentions("cuabi_nvml_device_cuda_ordinal");
    ck_assert_status(cuabi_nvml_device_from_cuda_ordinal(&ord, 0), CUABI_ERROR_DRIVER_NOT_FOUND);
}
END_TEST

/* Every NVML function but the two mappings leaves the CUDA driver alone:
 * not even loaded. */
START_TEST(nvml_never_loads_the_driver)
{
    cuabi__driver_install_fake(NULL);
    cuabi_test_no_driver();
    ck_assert_int_eq(cuabi__driver_info()->loaded, 0);
    int n, idx;
    size_t count;
    cuabi_nvml_system_info s = CUABI_NVML_SYSTEM_INFO_INIT;
    cuabi_nvml_nvlink l = CUABI_NVML_NVLINK_INIT;
    cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
    ck_assert_ok(cuabi_nvml_system_info_get(&s));
    ck_assert_ok(cuabi_nvml_device_count(&n));
    info(0), health(1);
    ck_assert_ok(cuabi_nvml_device_nvlink_get(&l, 1, 1));
    ck_assert_ok(cuabi_nvml_topology_get(&t, 0, 1));
    ck_assert_ok(cuabi_nvml_device_processes(NULL, 0, &count, 0));
    ck_assert_ok(cuabi_nvml_device_find(&idx, "01:00.0"));
    ck_assert_int_eq(cuabi__driver_info()->loaded, 0);
}
END_TEST

/* ------------------------------------------------------------ threads */

static void *hammer(void *arg)
{
    int index = (int)(intptr_t)arg;
    for (int i = 0; i < 200; i++) {
        cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
        cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
        cuabi_nvml_process p[4];
        size_t n;
        for (int k = 0; k < 4; k++)
            cuabi_nvml_process_init(&p[k], CUABI_NVML_PROCESS_VERSION);
        if (cuabi_nvml_device_health_get(&h, index % 2) != CUABI_SUCCESS ||
            cuabi_nvml_device_info_get(&d, index % 2) != CUABI_SUCCESS ||
            cuabi_nvml_device_processes(p, 4, &n, 0) != CUABI_SUCCESS || n != 3 ||
            h.temperature_gpu != 40 + index % 2)
            return (void *)1;
    }
    return NULL;
}

START_TEST(threads_share_nvml)
{
    cuabi__nvml_reset_for_test(); /* the first use races to load it */
    pthread_t t[6];
    for (intptr_t i = 0; i < 6; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, (void *)i), 0);
    for (int i = 0; i < 6; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_int_eq(fake.calls("nvmlInit_v2"), 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nvml");
    TCase *tc = tcase_create("nvml");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, absent_nvml_is_not_supported_everywhere);
    tcase_add_test(tc, default_name_is_named_when_missing);
    tcase_add_test(tc, a_library_that_is_not_nvml_is_refused);
    tcase_add_test(tc, init_failure_is_not_available_with_nvml_reason);
    tcase_add_test(tc, system_info);
    tcase_add_test(tc, system_info_without_optional_entries);
    tcase_add_test(tc, device_count);
    tcase_add_test(tc, device_info);
    tcase_add_test(tc, device_info_bad_arguments);
    tcase_add_test(tc, device_info_unreported_fields);
    tcase_add_test(tc, hostile_strings_are_bounded);
    tcase_add_test(tc, hostile_strings_are_printable);
    tcase_add_test(tc, health_values);
    tcase_add_test(tc, health_unreported_fields);
    tcase_add_test(tc, health_failure_stops_the_query);
    tcase_add_test(tc, health_falls_back_to_older_queries);
    tcase_add_test(tc, health_bad_arguments);
    tcase_add_test(tc, pcie_throughput);
    tcase_add_test(tc, nvlink_links);
    tcase_add_test(tc, nvlink_bad_links);
    tcase_add_test(tc, topology);
    tcase_add_test(tc, processes);
    tcase_add_test(tc, processes_bad_arguments);
    tcase_add_test(tc, processes_when_nvml_lists_few);
    tcase_add_test(tc, processes_hostile_counts);
    tcase_add_test(tc, find_by_uuid_and_pci);
    tcase_add_test(tc, find_refuses_what_is_no_id);
    tcase_add_test(tc, cuda_ordinals_by_uuid);
    tcase_add_test(tc, cuda_ordinals_without_a_driver);
    tcase_add_test(tc, nvml_never_loads_the_driver);
    tcase_add_test(tc, threads_share_nvml);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    if (fake_nvml_open(&fake) != 0) {
        printf("FAIL: the fake NVML %s is not built or lacks its controls: %s\n",
               fake_nvml_path(), dlerror());
        return 1;
    }
    return cuabi_test_run(suite());
}
