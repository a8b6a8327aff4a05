/* Object codes and kernels on a real GPU: loading, lookup, enumeration
 * through the driver, attributes, and — the point for offline occupancy —
 * the resources read from the CUBIN equal what the driver reports. */
#include "objcode_testutil.h"
#include "runtime/kernel.h"
#include "util/file.h"

static const char source[] =
    "extern \"C\" __global__ void __launch_bounds__(256) add(float *a, const float *b, int n) {\n"
    "  __shared__ float t[300];\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  t[threadIdx.x % 300] = b[i];\n"
    "  __syncthreads();\n"
    "  if (i < n) a[i] += t[(threadIdx.x + 1) % 300];\n"
    "}\n"
    "extern \"C\" __global__ void dyn(float *o) { extern __shared__ float s[]; s[threadIdx.x] = 1;\n"
    "  __syncthreads(); o[threadIdx.x] = s[threadIdx.x ^ 1]; }\n"
    "__device__ __noinline__ int rec(int n) { return n <= 0 ? 0 : rec(n - 1) + n; }\n"
    "extern \"C\" __global__ void spill(int *o, int n) { int a[200];\n"
    "  for (int i = 0; i < 200; i++) a[i] = o[i * n];\n"
    "  o[threadIdx.x] = a[o[0] % 200] + rec(n); }\n"
    "extern \"C\" __global__ void empty() {}\n";

static cuabi_device *dev;
static char arch[16];

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, 0));
    cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
    ck_assert_ok(cuabi_device_get_properties(&p, dev));
    snprintf(arch, sizeof arch, "sm_%d%d", p.compute_capability_major, p.compute_capability_minor);
}
static void teardown(void) { cuabi_device_release(dev); }

static cuabi_objcode *cubin_for_device(void)
{
    char opt[32];
    snprintf(opt, sizeof opt, "-arch=%s", arch);
    const char *opts[] = { opt };
    size_t n;
    void *c = test_nvrtc(source, opts, 1, CUABI_CODE_CUBIN, &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, c, n, "gpu.cubin"));
    free(c);
    return o;
}

static void compare_with_driver(cuabi_objcode *o, const char *name)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, name));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_kernel_get_resources(&r, k));
    int regs, smem, local, cmem, maxt;
    ck_assert_ok(cuabi_kernel_attribute(&regs, k, dev, CU_FUNC_ATTRIBUTE_NUM_REGS));
    ck_assert_ok(cuabi_kernel_attribute(&smem, k, dev, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
    ck_assert_ok(cuabi_kernel_attribute(&local, k, dev, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
    ck_assert_ok(cuabi_kernel_attribute(&cmem, k, dev, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES));
    ck_assert_ok(cuabi_kernel_attribute(&maxt, k, dev, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    printf("%s on %s: regs elf %d drv %d | smem elf %zu drv %d | local elf %zu drv %d | "
           "const0 elf %zu drv-const %d | maxthreads elf %d drv %d\n", name, arch, r.registers,
           regs, r.shared_static_bytes, smem, r.local_bytes, local, r.const_bytes, cmem,
           r.max_threads_per_block, maxt);
    ck_assert_int_eq(r.registers, regs);
    ck_assert_int_eq((int)r.shared_static_bytes, smem);
    ck_assert_int_eq((int)r.local_bytes, local);
    if (r.max_threads_per_block)
        ck_assert_int_eq(r.max_threads_per_block, maxt);
    /* Parameters: the driver's cuKernelGetParamInfo vs the CUBIN's. */
    size_t n;
    ck_assert_ok(cuabi_kernel_param_count(&n, k));
    ck_assert_uint_eq(n, r.param_count);
    ck_assert_ok(cuabi_kernel_release(k));
}

START_TEST(resources_equal_driver_attributes)
{
    cuabi_objcode *o = cubin_for_device();
    const char *names[] = { "add", "dyn", "spill", "empty" };
    for (int i = 0; i < 4; i++)
        compare_with_driver(o, names[i]);
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

START_TEST(ptx_loads_and_enumerates)
{
    const char *opts[] = { "-arch=compute_75" };
    size_t n;
    char *ptx = test_nvrtc(source, opts, 1, CUABI_CODE_PTX, &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, ptx, n, "gpu.ptx"));
    ck_assert_ok(cuabi_objcode_load(o));
    size_t count;
    ck_assert_ok(cuabi_objcode_kernel_count(&count, o));
    ck_assert_uint_eq(count, 4);
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "add"));
    uintptr_t f;
    ck_assert_ok(cuabi_kernel_function(&f, k, dev));
    ck_assert_uint_ne(f, 0);
    size_t off, size;
    ck_assert_ok(cuabi_kernel_param_info(&off, &size, k, 2));
    ck_assert_uint_eq(off, 16);
    ck_assert_uint_eq(size, 4);
    int v;
    ck_assert_ok(cuabi_kernel_attribute(&v, k, dev, CU_FUNC_ATTRIBUTE_PTX_VERSION));
    ck_assert_int_gt(v, 0);
    ck_assert_ok(cuabi_kernel_set_attribute(k, dev, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            64 * 1024));
    ck_assert_ok(cuabi_kernel_attribute(&v, k, dev, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
    ck_assert_int_eq(v, 64 * 1024);
    ck_assert_ok(cuabi_kernel_set_attribute(k, dev, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                            50));
    /* A failed lookup sets its out to NULL: keep k for the release. */
    cuabi_kernel *none;
    ck_assert_status(cuabi_objcode_get_kernel(&none, o, "nope"), CUABI_ERROR_NOT_FOUND);
    ck_assert_ptr_null(none);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
    free(ptx);
}
END_TEST

START_TEST(bad_images_give_driver_messages)
{
    static const char bad[] = ".version 8.0\n.target sm_75\n.address_size 64\n"
                              ".visible .entry broken() { frobnicate; }\n";
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, bad, sizeof bad - 1, "broken.ptx"));
    /* Loading makes the driver parse the image (cuLibraryGetKernelCount),
     * lazy module loading or not; should this driver still defer the JIT,
     * the lookup must fail the same way. Either way: INVALID_IMAGE, the
     * CUDA result kept, and the name. */
    cuabi_kernel *k = NULL;
    cuabi_status st = cuabi_objcode_load(o);
    if (st == CUABI_SUCCESS) {
        printf("note: the driver deferred the PTX JIT past cuabi_objcode_load\n");
        st = cuabi_objcode_get_kernel(&k, o, "broken");
    }
    ck_assert_msg(st == CUABI_ERROR_INVALID_IMAGE, "broken PTX gave %s: %s",
                  cuabi_status_name(st), cuabi_last_error()->message);
    ck_assert_ptr_null(k);
    printf("driver says: %s\n", cuabi_last_error()->message);
    ck_assert_error_mentions("broken.ptx");
    ck_assert_int_ne(cuabi_last_error()->cu_result, 0);
    ck_assert_ok(cuabi_objcode_release(o));
    /* A CUBIN for another architecture. */
    size_t n;
    void *d;
    const char *other = strcmp(arch, "sm_75") == 0 ? "objcode_kernels_sm90.cubin"
                                                   : "objcode_kernels_sm75.cubin";
    ck_assert_ok(cuabi__read_file(test_data_path(other), &d, &n, "t"));
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, d, n, other));
    /* The kernel serves offline queries; its use on this GPU is refused. */
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "add"));
    uintptr_t f = 0;
    ck_assert_status(cuabi_kernel_function(&f, k, dev), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_NO_BINARY_FOR_GPU);
    printf("other-arch CUBIN: %s\n", cuabi_last_error()->message);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
    cuabi__free(d);
}
END_TEST

/* cuda.core's ObjectCode.get_module: the CUmodule cuabi_objcode_module gives
 * is the library's in the device's context -- the driver's own
 * cuModuleGetFunction on it finds each kernel's CUfunction -- the same on
 * every call; and an object is refused before anything loads. */
START_TEST(module_is_the_drivers)
{
    cuabi_objcode *o = cubin_for_device();
    uintptr_t m = 0, again = 0;
    ck_assert_ok(cuabi_objcode_module(&m, o, dev));
    ck_assert_uint_ne(m, 0);
    ck_assert_ok(cuabi_objcode_module(&again, o, dev));
    ck_assert_uint_eq(m, again);
    const cuabi__driver *drv;
    ck_assert_ok(cuabi__driver_get(&drv));
    ck_assert_ptr_nonnull(drv->cuModuleGetFunction);
    static const char *const names[] = { "add", "dyn", "spill", "empty" };
    for (size_t i = 0; i < 4; i++) {
        CUfunction f = NULL;
        ck_assert_int_eq(drv->cuModuleGetFunction(&f, (CUmodule)m, names[i]), CUDA_SUCCESS);
        cuabi_kernel *k;
        uintptr_t kf;
        ck_assert_ok(cuabi_objcode_get_kernel(&k, o, names[i]));
        ck_assert_ok(cuabi_kernel_function(&kf, k, dev));
        ck_assert_uint_eq((uintptr_t)f, kf);       /* one module: the same functions */
        ck_assert_ok(cuabi_kernel_release(k));
    }
    const void *bytes;
    size_t n;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &n, o));
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_objcode_from_memory(&obj, CUABI_CODE_OBJECT, bytes, n, "dev.o"));
    ck_assert_status(cuabi_objcode_module(&again, obj, dev), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_objcode");
    TCase *tc = tcase_create("gpu_objcode");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, resources_equal_driver_attributes);
    tcase_add_test(tc, ptx_loads_and_enumerates);
    tcase_add_test(tc, bad_images_give_driver_messages);
    tcase_add_test(tc, module_is_the_drivers);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
