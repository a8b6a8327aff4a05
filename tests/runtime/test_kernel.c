/* Kernels against the fake driver (lazy loading, attributes, CUfunction
 * cache, parameters from the driver) and without one (parameters and
 * resources from the CUBIN). */
#include "objcode_testutil.h"
#include "fake_driver.h"
#include "runtime/kernel.h"

static cuabi_objcode *load_sm90(void)
{
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_file(&o, CUABI_CODE_CUBIN,
                                         test_data_path("objcode_kernels_sm90.cubin")));
    return o;
}

static void setup(void)
{
    fake_driver_install();
    fake_driver_install_libraries();
    fake_library_loads = 0;
}
static void teardown(void)
{
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

START_TEST(lazy_load_once_and_lookup)
{
    size_t live = cuabi__handle_live_count();
    cuabi_objcode *o = load_sm90();
    ck_assert_int_eq(fake_library_loads, 0); /* lazily */
    cuabi_kernel *a, *b;
    ck_assert_ok(cuabi_objcode_get_kernel(&a, o, "add"));
    ck_assert_ok(cuabi_objcode_get_kernel(&b, o, "big"));
    ck_assert_int_eq(fake_library_loads, 1);
    ck_assert_int_eq(fake_live_libraries, 1);
    ck_assert_ok(cuabi_objcode_load(o)); /* no-op now */
    ck_assert_int_eq(fake_library_loads, 1);
    cuabi_kernel *c;
    ck_assert_status(cuabi_objcode_get_kernel(&c, o, "nope"), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("add"); /* lists the kernels */
    uintptr_t raw;
    ck_assert_ok(cuabi_kernel_raw(&raw, a));
    ck_assert_str_eq(((fake_kernel *)raw)->name, "add");
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_int_eq(fake_live_libraries, 1); /* kernels keep it */
    ck_assert_ok(cuabi_kernel_release(a));
    ck_assert_ok(cuabi_kernel_release(b));
    ck_assert_int_eq(fake_live_libraries, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

/* cuda.core's ObjectCode.get_module: the library's CUmodule in a device's
 * context (cuLibraryGetModule), loading the image once; objects refused. */
START_TEST(module_of_the_library)
{
    cuabi_objcode *o = load_sm90();
    cuabi_device *d;
    ck_assert_ok(cuabi_device_get(&d, 0));
    uintptr_t m1 = 0, m2 = 0;
    ck_assert_ok(cuabi_objcode_module(&m1, o, d));
    ck_assert_int_eq(fake_library_loads, 1);
    ck_assert_ok(cuabi_objcode_module(&m2, o, d));
    ck_assert_int_eq(fake_library_loads, 1);              /* loaded once */
    ck_assert_uint_ne(m1, 0);
    ck_assert_uint_eq(m1, m2);
    ck_assert_ptr_null(fake_current);   /* the device's context was current for it, none after */
    cuabi_objcode *p = load_sm90();                       /* another library, another module */
    ck_assert_ok(cuabi_objcode_module(&m2, p, d));
    ck_assert_uint_ne(m1, m2);
    /* refusals */
    ck_assert_status(cuabi_objcode_module(NULL, o, d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_module(&m2, o, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_objcode_module(&m2, (cuabi_objcode *)8, d), CUABI_ERROR_INVALID_HANDLE);
    size_t n;
    const void *bytes;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &n, o));
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_objcode_from_memory(&obj, CUABI_CODE_OBJECT, bytes, n, "dev.o"));
    ck_assert_status(cuabi_objcode_module(&m2, obj, d), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(fake_library_loads, 2);              /* nothing loaded for it */
    cuabi__driver *drv = cuabi__driver_for_test();
    drv->cuLibraryGetModule = NULL;
    ck_assert_status(cuabi_objcode_module(&m2, o, d), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuLibraryGetModule");
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_objcode_release(p));
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_ok(cuabi_device_release(d));
}
END_TEST

START_TEST(library_handle_and_kernel_handle)
{
    cuabi_objcode *o = load_sm90();
    uintptr_t lib = 0, again = 0, ck = 0;
    ck_assert_ok(cuabi_objcode_library(&lib, o));
    ck_assert_int_eq(fake_library_loads, 1);              /* loads the image */
    ck_assert_uint_ne(lib, 0);
    ck_assert_ok(cuabi_objcode_library(&again, o));
    ck_assert_int_eq(fake_library_loads, 1);              /* once */
    ck_assert_uint_eq(lib, again);
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "add"));
    ck_assert_ok(cuabi_kernel_raw(&ck, k));
    ck_assert_uint_ne(ck, 0);
    ck_assert_uint_ne(ck, lib);
    ck_assert_status(cuabi_objcode_library(NULL, o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_library(&again, (cuabi_objcode *)8), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_objcode_library(&again, (cuabi_objcode *)k), CUABI_ERROR_INVALID_HANDLE);
    cuabi_objcode *gone = load_sm90();
    ck_assert_ok(cuabi_objcode_release(gone));
    ck_assert_status(cuabi_objcode_library(&again, gone), CUABI_ERROR_INVALID_HANDLE);
    size_t n;
    const void *bytes;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &n, o));
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_objcode_from_memory(&obj, CUABI_CODE_OBJECT, bytes, n, "dev.o"));
    again = 7;
    ck_assert_status(cuabi_objcode_library(&again, obj), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_uint_eq(again, 0);
    ck_assert_int_eq(fake_library_loads, 1);              /* nothing loaded for it */
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

START_TEST(driver_rejects_image)
{
    /* Text the objcode accepts as PTX but the (fake) driver refuses. */
    static const char text[] = "// not really PTX\n";
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, text, sizeof text - 1, "t.ptx"));
    ck_assert_status(cuabi_objcode_load(o), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("t.ptx");
    ck_assert_error_mentions("fake JIT: not an image");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_IMAGE);
    cuabi_kernel *k;
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "x"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_ok(cuabi_objcode_release(o));
    /* A driver without cuLibraryLoadData (older than 12.0). */
    cuabi__driver_for_test()->cuLibraryLoadData = NULL;
    o = load_sm90();
    ck_assert_status(cuabi_objcode_load(o), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

START_TEST(attributes_and_functions)
{
    cuabi_objcode *o = load_sm90();
    cuabi_kernel *k;
    cuabi_device *d0, *d1;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "add"));
    ck_assert_ok(cuabi_device_get(&d0, 0));
    ck_assert_ok(cuabi_device_get(&d1, 1));
    int v;
    ck_assert_ok(cuabi_kernel_attribute(&v, k, d0, CU_FUNC_ATTRIBUTE_NUM_REGS));
    ck_assert_int_eq(v, 42);
    ck_assert_ok(cuabi_kernel_attribute(&v, k, d0, CU_FUNC_ATTRIBUTE_BINARY_VERSION));
    ck_assert_status(cuabi_kernel_attribute(&v, k, d0, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_kernel_attribute(&v, k, d0, CU_FUNC_ATTRIBUTE_MAX), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_kernel_attribute(NULL, k, d0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_kernel_set_attribute(k, d0, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            100000));
    ck_assert_ok(cuabi_kernel_set_attribute(k, d1, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                            50));
    ck_assert_ok(cuabi_kernel_set_attribute(k, d1, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2));
    ck_assert_status(cuabi_kernel_set_attribute(k, d0, CU_FUNC_ATTRIBUTE_NUM_REGS, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not settable");
    ck_assert_status(cuabi_kernel_set_attribute(k, d0, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                -1), CUABI_ERROR_CUDA);
    /* CUfunction per device, in its primary context, cached. */
    fake_current = NULL;
    uintptr_t f0, f0b, f1;
    ck_assert_ok(cuabi_kernel_function(&f0, k, d0));
    ck_assert_ptr_null(fake_current);   /* made current for the lookup only */
    ck_assert_ok(cuabi_kernel_function(&f1, k, d1));
    ck_assert_ptr_null(fake_current);
    cuabi__driver_for_test()->cuKernelGetFunction = NULL; /* cached: not called again */
    ck_assert_ok(cuabi_kernel_function(&f0b, k, d0));
    ck_assert_uint_eq(f0, f0b);
    cuabi__kernel *ik;
    cuabi__device *id;
    ck_assert_ok(cuabi__handle_get(k, CUABI__T_KERNEL, (void **)&ik, "t"));
    ck_assert_ok(cuabi__handle_get(d1, CUABI__T_DEVICE, (void **)&id, "t"));
    CUfunction cf;
    ck_assert_ok(cuabi__kernel_function(ik, id, cuabi__driver_for_test(), &cf, "test"));
    ck_assert_uint_eq((uintptr_t)cf, f1);
    /* Misuse. */
    ck_assert_status(cuabi_kernel_function(&f0, k, (cuabi_device *)k), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_kernel_attribute(&v, (cuabi_kernel *)d0, d0, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_kernel_set_attribute(NULL, d0, 8, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_kernel_raw(NULL, k), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_ok(cuabi_device_release(d0));
    ck_assert_ok(cuabi_device_release(d1));
}
END_TEST

START_TEST(params_from_driver)
{
    cuabi_objcode *o = load_sm90();
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "big"));
    size_t n, off, size;
    ck_assert_ok(cuabi_kernel_param_count(&n, k));
    ck_assert_uint_eq(n, 3); /* the fake says 3 x 8 bytes */
    ck_assert_ok(cuabi_kernel_param_info(&off, &size, k, 2));
    ck_assert_uint_eq(off, 16);
    ck_assert_uint_eq(size, 8);
    ck_assert_status(cuabi_kernel_param_info(&off, &size, k, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("out of range");
    ck_assert_ok(cuabi_kernel_release(k));
    /* A driver older than 12.4: the CUBIN answers. */
    cuabi__driver_for_test()->cuKernelGetParamInfo = NULL;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "big"));
    ck_assert_ok(cuabi_kernel_param_count(&n, k));
    ck_assert_uint_eq(n, 2);
    ck_assert_ok(cuabi_kernel_param_info(&off, &size, k, 0));
    ck_assert_uint_eq(size, 160);
    ck_assert_ok(cuabi_kernel_param_info(&off, &size, k, 1));
    ck_assert_uint_eq(off, 160);
    ck_assert_uint_eq(size, 8);
    cuabi__kernel *ik;
    ck_assert_ok(cuabi__handle_get(k, CUABI__T_KERNEL, (void **)&ik, "t"));
    const size_t *offs, *sizes;
    ck_assert_ok(cuabi__kernel_param_layout(ik, &n, &offs, &sizes));
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(sizes[0], 160);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

/* A driver with lazy module loading: cuLibraryLoadData keeps the JIT log
 * buffer and accepts anything; the JIT runs (and fails) at the first
 * lookup, writing its log then. */
static char *lazy_log;
static CUresult CUDAAPI lazy_load(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv,
                                  unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl)
{
    for (unsigned i = 0; i < nj; i++)
        if (jo[i] == CU_JIT_ERROR_LOG_BUFFER)
            lazy_log = jv[i];
    (void)code;
    return fake_cuLibraryLoadData(lib, "\x7f" "ELF", NULL, NULL, 0, lo, lv, nl);
}
static CUresult CUDAAPI lazy_get_kernel(CUkernel *k, CUlibrary lib, const char *name)
{
    (void)k; (void)lib; (void)name;
    if (lazy_log)
        snprintf(lazy_log, 64, "ptxas fatal: unknown instruction 'frobnicate'\n");
    return CUDA_ERROR_INVALID_PTX;
}
static CUresult CUDAAPI count_fails(unsigned *n, CUlibrary lib)
{
    (void)n; (void)lib;
    if (lazy_log)
        snprintf(lazy_log, 64, "ptxas fatal: unknown instruction 'frobnicate'\n");
    return CUDA_ERROR_INVALID_PTX;
}

/* Regression (H200, driver 580): broken PTX loaded fine and the lookup
 * failed with CUABI_ERROR_CUDA; it is an image error, with the JIT log. */
START_TEST(lazy_jit_errors_are_image_errors)
{
    static const char bad[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry broken() { frobnicate; }\n";
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuLibraryLoadData = lazy_load;
    d->cuLibraryGetKernel = lazy_get_kernel;
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, bad, sizeof bad - 1, "broken.ptx"));
    ck_assert_ok(cuabi_objcode_load(o)); /* no cuLibraryGetKernelCount: nothing to check yet */
    cuabi_kernel *k;
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "broken"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_ptr_null(k);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_PTX);
    ck_assert_error_mentions("broken.ptx");
    ck_assert_error_mentions("cuLibraryGetKernel");
    ck_assert_error_mentions("frobnicate");
    ck_assert_uint_gt(cuabi_last_error()->log_size, 0);
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_int_eq(fake_live_libraries, 0);
    /* A driver that can count kernels: load itself makes the JIT run. */
    d->cuLibraryGetKernelCount = count_fails;
    lazy_log = NULL;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, bad, sizeof bad - 1, "broken.ptx"));
    ck_assert_status(cuabi_objcode_load(o), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_PTX);
    ck_assert_error_mentions("frobnicate");
    ck_assert_int_eq(fake_live_libraries, 0); /* the failed library is unloaded */
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "broken"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_ok(cuabi_objcode_release(o));
    lazy_log = NULL;
}
END_TEST

/* A CUBIN of another architecture on this GPU (an sm_80 CUBIN on an H100:
 * CUDA_ERROR_NO_BINARY_FOR_GPU): the kernel still serves the offline
 * queries; using it on the GPU gives the driver's refusal, as an image error
 * naming the architecture (regression: get_kernel failed, so occupancy_for
 * could not be asked on a machine with another GPU). */
static CUresult CUDAAPI no_binary_for_gpu(CUkernel *k, CUlibrary lib, const char *name)
{
    (void)k; (void)lib; (void)name;
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
}

START_TEST(cubin_for_another_gpu_serves_offline_queries)
{
    size_t live = cuabi__handle_live_count();
    cuabi__driver_for_test()->cuLibraryGetKernel = no_binary_for_gpu;
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_file(&o, CUABI_CODE_CUBIN,
                                         test_data_path("objcode_kernels_sm80.cubin")));
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "add"));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_kernel_get_resources(&r, k));
    ck_assert_int_eq(r.arch, 80);
    ck_assert_int_gt(r.registers, 0);
    /* A name the CUBIN does not have is still NOT_FOUND. */
    cuabi_kernel *none;
    ck_assert_status(cuabi_objcode_get_kernel(&none, o, "nope"), CUABI_ERROR_NOT_FOUND);
    /* On the GPU: the driver's refusal. */
    cuabi_device *d;
    ck_assert_ok(cuabi_device_get(&d, 0));
    uintptr_t f;
    ck_assert_status(cuabi_kernel_function(&f, k, d), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_NO_BINARY_FOR_GPU);
    ck_assert_error_mentions("cuabi_kernel_function:");   /* the public call, not an internal */
    ck_assert_ok(cuabi_device_release(d));
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

/* Without a driver at all: the kernel serves offline queries only. */
START_TEST(offline_kernel)
{
    cuabi__driver_install_fake(NULL); /* back to "no driver here" */
    cuabi_objcode *o = load_sm90();
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "p20k"));
    size_t n, off, size;
    ck_assert_ok(cuabi_kernel_param_count(&n, k));
    ck_assert_uint_eq(n, 4);
    ck_assert_ok(cuabi_kernel_param_info(&off, &size, k, 1));
    ck_assert_uint_eq(off, 4);
    ck_assert_uint_eq(size, 20000);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_kernel_get_resources(&r, k));
    ck_assert_uint_eq(r.param_bytes, 20016);
    ck_assert_int_eq(r.arch, 90);
    uintptr_t raw;
    ck_assert_status(cuabi_kernel_raw(&raw, k), CUABI_ERROR_DRIVER_NOT_FOUND);
    r.version = 0;
    ck_assert_status(cuabi_kernel_get_resources(&r, k), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_kernel_get_resources(NULL, k), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_kernel_param_count(NULL, k), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_kernel_param_info(NULL, &size, k, 0), CUABI_ERROR_INVALID_ARGUMENT);
    const char *name;
    ck_assert_status(cuabi_kernel_name(NULL, k), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_objcode *oo;
    ck_assert_status(cuabi_kernel_objcode(NULL, k), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_kernel_retain(k));
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_kernel_release(k));
    /* Destroyed, NULL and wrong-type handles. */
    cuabi_kernel *bad[] = { k, NULL, (cuabi_kernel *)o };
    for (int i = 0; i < 3; i++) {
        ck_assert_status(cuabi_kernel_name(&name, bad[i]), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_kernel_objcode(&oo, bad[i]), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_kernel_param_count(&n, bad[i]), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_kernel_param_info(&off, &size, bad[i], 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_kernel_get_resources(&r, bad[i]), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_kernel_raw(&raw, bad[i]), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_kernel_release(bad[i]), CUABI_ERROR_INVALID_HANDLE);
    }
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("kernel");
    TCase *tc = tcase_create("kernel");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, lazy_load_once_and_lookup);
    tcase_add_test(tc, driver_rejects_image);
    tcase_add_test(tc, module_of_the_library);
    tcase_add_test(tc, library_handle_and_kernel_handle);
    tcase_add_test(tc, lazy_jit_errors_are_image_errors);
    tcase_add_test(tc, attributes_and_functions);
    tcase_add_test(tc, params_from_driver);
    tcase_add_test(tc, offline_kernel);
    tcase_add_test(tc, cubin_for_another_gpu_serves_offline_queries);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
