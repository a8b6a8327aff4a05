/* Versions, run-time info, layout queries and the plugin table. */
#include "testutil.h"
#include "internal.h"

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
    tcase_add_test(tc, runtime_info);
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
