/* Fatbins on the GPU (issue 16): a fatbin for sm_80 and sm_90 (and one of
 * the device's own architecture plus PTX) loads, the driver picks the
 * device's image, and a launch computes the right result; the offline
 * resources of the device's architecture match the driver's attributes. */
#include "testutil.h"

static const char src[] =
    "extern \"C\" __global__ void axpb(float *x, float a, float b, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = a * x[i] + b; }\n";

static cuabi_device *dev;
static char dev_arch[16];

static cuabi_objcode *fatbin_for(const char *archs)
{
    cuabi_program *p;
    cuabi_objcode *o;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = archs;
    opt.output = CUABI_CODE_FATBIN;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "axpb.cu"));
    ck_assert_ok(cuabi_program_compile(&o, p, &opt));
    const char *log;
    ck_assert_ok(cuabi_program_log(&log, p));
    printf("%s: %s", archs, log);
    cuabi_program_release(p);
    return o;
}

/* Launch axpb from the fatbin over N floats and check every one. */
static void run(cuabi_objcode *o)
{
    enum { N = 4096 };
    static float host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    cuabi_kernel *k;
    cuabi_stream *s;
    cuabi_memory_resource *pool;
    cuabi_buffer *buf;
    cuabi_argpack *p;
    uintptr_t d;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "axpb"));
    ck_assert_ok(cuabi_stream_create(&s, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    ck_assert_ok(cuabi_buffer_allocate(&buf, pool, sizeof host, 0, s));
    ck_assert_ok(cuabi_buffer_copy_from_host(buf, 0, host, sizeof host, s));
    ck_assert_ok(cuabi_buffer_pointer(&d, buf));
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, f32, f32, i32"));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 0, d));
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 2.0));
    ck_assert_ok(cuabi_argpack_set_float(p, 2, 0.5));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, N));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = N / 256;
    cfg.block[0] = 256;
    cfg.stream = s;
    ck_assert_ok(cuabi_launch(k, p, &cfg));
    ck_assert_ok(cuabi_buffer_copy_to_host(host, buf, 0, sizeof host, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    for (int i = 0; i < N; i++)
        ck_assert_msg(host[i] == 2.0f * (float)i + 0.5f, "x[%d] = %g", i, (double)host[i]);
    /* The offline resources of the device's architecture answer. */
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "axpb", dev_arch));
    ck_assert_int_gt(r.registers, 0);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(buf);
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(s);
    cuabi_kernel_release(k);
}

START_TEST(sm80_sm90_fatbin_loads_and_runs)
{
    cuabi_objcode *o = fatbin_for("sm_80,sm_90");
    const char *packer;
    ck_assert_ok(cuabi_fatbin_packer(&packer, o));
    printf("packed by %s on %s\n", packer, dev_arch);
    ck_assert_ok(cuabi_objcode_load(o));
    run(o);
    cuabi_objcode_release(o);
}
END_TEST

START_TEST(device_arch_with_ptx_loads_and_runs)
{
    char archs[64];
    snprintf(archs, sizeof archs, "sm_80,%s,compute_80", dev_arch);
    if (!strcmp(dev_arch, "sm_80"))
        snprintf(archs, sizeof archs, "sm_80,compute_80");
    cuabi_objcode *o = fatbin_for(archs);
    run(o);
    cuabi_objcode_release(o);
}
END_TEST

/* Only PTX older than the device: the driver JIT-compiles it. */
START_TEST(ptx_only_fatbin_is_jit_compiled)
{
    cuabi_objcode *o = fatbin_for("compute_80");
    run(o);
    cuabi_objcode_release(o);
}
END_TEST

/* No image for this device: the kernel answers offline queries (sm_75's
 * resources), and its first use on this GPU is a clear error, no crash. */
START_TEST(fatbin_without_the_device_image_is_refused)
{
    cuabi_objcode *o = fatbin_for("sm_75");
    cuabi_kernel *k = NULL;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "axpb"));
    uintptr_t f = 0;
    cuabi_status st = cuabi_kernel_function(&f, k, dev);
    ck_assert_int_eq(st, CUABI_ERROR_INVALID_IMAGE);
    ck_assert_int_eq(cuabi_last_error()->cu_result, 209);   /* CUDA_ERROR_NO_BINARY_FOR_GPU */
    printf("sm_75-only fatbin on %s: %s\n", dev_arch, cuabi_last_error()->message);
    cuabi_kernel_release(k);
    cuabi_objcode_release(o);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    cuabi_device_properties props = CUABI_DEVICE_PROPERTIES_INIT;
    if (cuabi_device_get(&dev, 0) != CUABI_SUCCESS ||
        cuabi_device_get_properties(&props, dev) != CUABI_SUCCESS) {
        printf("cannot read the device: %s\n", cuabi_last_error()->message);
        return 1;
    }
    snprintf(dev_arch, sizeof dev_arch, "sm_%d%d", props.compute_capability_major,
             props.compute_capability_minor);
    Suite *s = suite_create("gpu_fatbin");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sm80_sm90_fatbin_loads_and_runs);
    tcase_add_test(tc, device_arch_with_ptx_loads_and_runs);
    tcase_add_test(tc, ptx_only_fatbin_is_jit_compiled);
    tcase_add_test(tc, fatbin_without_the_device_image_is_refused);
    suite_add_tcase(s, tc);
    int rc = cuabi_test_run(s);
    cuabi_device_release(dev);
    return rc;
}
