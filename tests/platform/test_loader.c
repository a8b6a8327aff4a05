/* Lazy loading: a missing driver or library fails only the calls that need
 * it, with a message naming what is missing; NVRTC loads without a GPU. */
#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

START_TEST(missing_driver_fails_only_gpu_calls)
{
    /* Set before anything loads the driver in this process. */
    setenv("CUABI_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
    int n = 42;
    ck_assert_status(cuabi_device_count(&n), CUABI_ERROR_DRIVER_NOT_FOUND);
    ck_assert_error_mentions("/nonexistent/libcuda.so.1");
    ck_assert_int_eq(n, 0);
    cuabi_device *d;
    ck_assert_status(cuabi_device_get(&d, 0), CUABI_ERROR_DRIVER_NOT_FOUND);
    /* Sticky and fast: the same answer again. */
    ck_assert_status(cuabi_device_count(&n), CUABI_ERROR_DRIVER_NOT_FOUND);
    /* Functions that need no GPU still work. */
    cuabi_stream_options o;
    ck_assert_ok(cuabi_stream_options_init(&o, CUABI_STREAM_OPTIONS_VERSION));
    ck_assert_str_eq(cuabi_version_string(), CUABI_VERSION_STRING);
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_int_eq(info.driver_status, CUABI_ERROR_DRIVER_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(info.driver_error, "/nonexistent/libcuda.so.1"));
}
END_TEST

START_TEST(nvrtc_loads_without_gpu)
{
    const cuabi__nvrtc *nv;
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    ck_assert_ptr_nonnull(nv->nvrtcCompileProgram);
    int major = 0, minor = 0;
    ck_assert_int_eq(nv->nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
    ck_assert_int_ge(major, 12);
    ck_assert_int_eq(cuabi__nvrtc_info()->version, major * 1000 + minor * 10);
    ck_assert_ptr_nonnull(strstr(cuabi__nvrtc_info()->path, "nvrtc"));
}
END_TEST

START_TEST(nvjitlink_loads_without_gpu)
{
    const cuabi__nvjitlink *jit;
    ck_assert_ok(cuabi__nvjitlink_get(&jit));
    ck_assert_ptr_nonnull(jit->nvJitLinkCreate);
    ck_assert_ptr_nonnull(jit->nvJitLinkGetLinkedCubin);
    ck_assert_int_ge(cuabi__nvjitlink_info()->version, 12000);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("dlopen");
    tcase_add_test(tc, missing_driver_fails_only_gpu_calls);
    tcase_add_test(tc, nvrtc_loads_without_gpu);
    tcase_add_test(tc, nvjitlink_loads_without_gpu);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cuabi_test_run(suite()); }
