/* Versions, run-time info, layout queries and the plugin table. */
#include <unistd.h>

#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"
#include "compile/nvvm.h"

START_TEST(versions_agree)
{
    ck_assert_str_eq(cuabi_version_string(), CUABI_VERSION_STRING);
    ck_assert_uint_eq(cuabi_version_hex(), CUABI_VERSION_HEX);
    ck_assert_uint_eq(cuabi_abi_version(), CUABI_ABI_VERSION);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", CUABI_VERSION_MAJOR, CUABI_VERSION_MINOR,
             CUABI_VERSION_PATCH);
    ck_assert_str_eq(cuabi_version_string(), expect);
}
END_TEST

START_TEST(runtime_info)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_str_eq(info.library_version, CUABI_VERSION_STRING);
    ck_assert_int_eq(info.nvrtc_status, CUABI_SUCCESS);
    ck_assert_int_ge(info.nvrtc_version, 12000);
    ck_assert_ptr_nonnull(info.driver_path);
    ck_assert_ptr_nonnull(info.driver_error);
    if (info.driver_status != CUABI_SUCCESS)
        ck_assert_uint_gt(strlen(info.driver_error), 0);
    ck_assert_status(cuabi_runtime_info_get(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    info.version = 0;
    ck_assert_status(cuabi_runtime_info_get(&info), CUABI_ERROR_INVALID_VERSION);
}
END_TEST

/* An old caller's struct (version 1) ends at nvjitlink_error: neither
 * _init nor _get may write past it, and its fields are filled as before.
 * Asking version 1's questions loads neither libNVVM nor nvFatbin (this
 * runs first in its process). */
START_TEST(runtime_info_version_1_gets_version_1_fields)
{
    size_t v1 = offsetof(cuabi_runtime_info, nvvm_status), guard = 64;
    unsigned char *buf = malloc(v1 + guard);
    ck_assert_ptr_nonnull(buf);
    memset(buf, 0xA5, v1 + guard);
    cuabi_runtime_info *old = (cuabi_runtime_info *)buf;
    ck_assert_ok(cuabi_runtime_info_init(old, 1));
    ck_assert_uint_eq(old->version, 1);
    ck_assert_ok(cuabi_runtime_info_get(old));
    for (size_t i = v1; i < v1 + guard; i++)
        ck_assert_msg(buf[i] == 0xA5, "byte %zu past a version-1 struct was written", i);
    ck_assert_str_eq(old->library_version, CUABI_VERSION_STRING);
    ck_assert_int_eq(old->nvrtc_status, CUABI_SUCCESS);
    ck_assert_int_ge(old->nvrtc_version, 12000);
    ck_assert_ptr_nonnull(old->nvjitlink_error);
    ck_assert(!cuabi__nvvm_loaded());
    ck_assert_int_eq(cuabi__nvfatbin_info()->loaded, 0);
    free(buf);
    /* Exactly version 1's size: the sanitizer build sees any write past it. */
    old = malloc(v1);
    ck_assert_ptr_nonnull(old);
    ck_assert_ok(cuabi_runtime_info_init(old, 1));
    ck_assert_ok(cuabi_runtime_info_get(old));
    free(old);
    /* A version this library does not know yet is refused. */
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    info.version = CUABI_RUNTIME_INFO_VERSION + 1;
    ck_assert_status(cuabi_runtime_info_get(&info), CUABI_ERROR_INVALID_VERSION);
}
END_TEST

static int fake_nvfatbin_version(unsigned *major, unsigned *minor)
{
    *major = 13;
    *minor = 5;
    return 0;
}

/* Version 2: libNVVM and nvFatbin, found (path, version) or not (why). */
START_TEST(runtime_info_reports_nvvm_and_nvfatbin)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_uint_eq(info.version, 3); /* version 3 adds NCCL: tests/runtime/test_nccl */
    ck_assert_ok(cuabi_runtime_info_get(&info));
    const cuabi__nvvm *nv;
    cuabi_status st = cuabi__nvvm_get(&nv);
    cuabi_error_clear();
    ck_assert_int_eq(info.nvvm_status, st);
    if (st == CUABI_SUCCESS) {
        ck_assert_int_ge(info.nvvm_version, 1000);  /* libNVVM 2.0 in CUDA 12 and 13 */
        ck_assert_int_eq(access(info.nvvm_path, R_OK), 0);
        ck_assert_str_eq(info.nvvm_error, "");
    }

    /* Neither can be loaded: each says why, with no version or path. */
    setenv("CUABI_NVVM_PATH", "/nonexistent/libnvvm.so.4", 1);
    setenv("CUABI_NVFATBIN_PATH", "/nonexistent/libnvfatbin.so.13", 1);
    cuabi__nvvm_reset_for_test();
    cuabi__nvfatbin_install_fake(NULL);
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_int_eq(info.nvvm_status, CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(info.nvvm_error, "CUABI_NVVM_PATH=/nonexistent/libnvvm.so.4"));
    ck_assert_int_eq(info.nvvm_version, 0);
    ck_assert_str_eq(info.nvvm_path, "");
    ck_assert_int_eq(info.nvfatbin_status, CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(info.nvfatbin_error,
                                 "CUABI_NVFATBIN_PATH=/nonexistent/libnvfatbin.so.13"));
    ck_assert_int_eq(info.nvfatbin_version, 0);
    ck_assert_str_eq(info.nvfatbin_path, "");
    ck_assert_int_eq(cuabi_last_error()->status, CUABI_SUCCESS); /* in the struct only */

    /* An nvFatbin that loads: its version and file. */
    static const cuabi__nvfatbin fake = { .nvFatbinVersion = fake_nvfatbin_version };
    cuabi__nvfatbin_install_fake(&fake);
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_int_eq(info.nvfatbin_status, CUABI_SUCCESS);
    ck_assert_int_eq(info.nvfatbin_version, 13050);
    ck_assert_str_eq(info.nvfatbin_path, "(fake nvFatbin)");
    ck_assert_str_eq(info.nvfatbin_error, "");

    unsetenv("CUABI_NVVM_PATH");
    unsetenv("CUABI_NVFATBIN_PATH");
    cuabi__nvvm_reset_for_test();
    cuabi__nvfatbin_install_fake(NULL);
}
END_TEST

START_TEST(layout_queries)
{
    size_t v;
    ck_assert_ok(cuabi_struct_size(&v, "cuabi_stream_options"));
    ck_assert_uint_eq(v, sizeof(cuabi_stream_options));
    ck_assert_ok(cuabi_struct_field_offset(&v, "cuabi_stream_options", "priority"));
    ck_assert_uint_eq(v, offsetof(cuabi_stream_options, priority));
    ck_assert_ok(cuabi_struct_field_offset(&v, "cuabi_device_properties", "total_memory"));
    ck_assert_uint_eq(v, offsetof(cuabi_device_properties, total_memory));
    ck_assert_status(cuabi_struct_size(&v, "nope"), CUABI_ERROR_NOT_FOUND);
    ck_assert_status(cuabi_struct_field_offset(&v, "cuabi_stream_options", "nope"),
                     CUABI_ERROR_NOT_FOUND);
    ck_assert_status(cuabi_struct_size(NULL, "cuabi_stream_options"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_struct_field_offset(&v, "cuabi_stream_options", NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(plugin_table)
{
    const cuabi_api *api = NULL;
    ck_assert_ok(cuabi_get_api(CUABI_API_TABLE_VERSION, &api));
    ck_assert_ptr_nonnull(api);
    ck_assert_uint_eq(api->size, sizeof(cuabi_api));
    ck_assert_ptr_eq(api->version_string, cuabi_version_string);
    ck_assert_ptr_eq(api->stream_create, cuabi_stream_create);
    /* Every slot is filled. */
    const char *p = (const char *)api + offsetof(cuabi_api, size) + sizeof(size_t);
    size_t n = (sizeof(cuabi_api) - offsetof(cuabi_api, size) - sizeof(size_t)) / sizeof(void *);
    for (size_t i = 0; i < n; i++) {
        void *fn;
        memcpy(&fn, p + i * sizeof(void *), sizeof fn);
        ck_assert_ptr_nonnull(fn);
    }
    ck_assert_status(cuabi_get_api(0, &api), CUABI_ERROR_INVALID_VERSION);
    ck_assert_ptr_null(api);
    ck_assert_status(cuabi_get_api(CUABI_API_TABLE_VERSION + 1, &api), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_get_api(1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("library");
    TCase *tc = tcase_create("library");
    tcase_add_test(tc, versions_agree);
    tcase_add_test(tc, runtime_info_version_1_gets_version_1_fields);
    tcase_add_test(tc, runtime_info);
    tcase_add_test(tc, runtime_info_reports_nvvm_and_nvfatbin);
    tcase_add_test(tc, layout_queries);
    tcase_add_test(tc, plugin_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
