/* Programs on a real GPU: the default architecture is the device's, and code
 * from every path (fresh compile, in-memory hit, on-disk hit, PTX through
 * nvJitLink) loads and computes the right answer. Memory and the launch go
 * straight through the driver table so this suite needs only programs and
 * object codes. SKIP (77) without a GPU. */
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

#include "segred_kernel.h"

static char tmpdir[64];
static cuabi_device *dev;

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-gpu-program-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    ck_assert_ok(cuabi_cache_set_directory(tmpdir));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_set_current(dev));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_ok(cuabi_device_release(dev));
}

/* Run segred<float, 256> from `obj` over 3 segments and check the sums. */
static void run_segred(cuabi_objcode *obj, const char *name)
{
    const cuabi__driver *drv;
    ck_assert_ok(cuabi__driver_get(&drv));
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, obj, name));
    uintptr_t raw;
    ck_assert_ok(cuabi_kernel_raw(&raw, k));
    enum { N = 1000 };
    float in[N], out[3];
    int offsets[4] = { 0, 10, 500, N };
    for (int i = 0; i < N; i++)
        in[i] = (float)(i % 7);
    CUdeviceptr din, dout, doff;
    ck_assert_int_eq(drv->cuMemAlloc(&din, sizeof in), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemAlloc(&dout, sizeof out), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemAlloc(&doff, sizeof offsets), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyHtoD(din, in, sizeof in), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyHtoD(doff, offsets, sizeof offsets), CUDA_SUCCESS);
    void *args[] = { &din, &dout, &doff };
    /* A CUkernel may stand in for a CUfunction in cuLaunchKernel (CUDA 12). */
    ck_assert_int_eq(drv->cuLaunchKernel((CUfunction)raw, 3, 1, 1, 256, 1, 1, 0, NULL, args,
                                         NULL), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyDtoH(out, dout, sizeof out), CUDA_SUCCESS);
    for (int s = 0; s < 3; s++) {
        float want = 0;
        for (int i = offsets[s]; i < offsets[s + 1]; i++)
            want += in[i];
        ck_assert_float_eq(out[s], want);
    }
    drv->cuMemFree(din);
    drv->cuMemFree(dout);
    drv->cuMemFree(doff);
    ck_assert_ok(cuabi_kernel_release(k));
}

static cuabi_objcode *compile(cuabi_program *p, int expect_hit)
{
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = names;
    o.num_name_expressions = 1;
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_program_compile(&obj, p, &o));
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, expect_hit);
    return obj;
}

START_TEST(default_arch_is_the_device_and_every_path_runs)
{
    cuabi_device_properties props = CUABI_DEVICE_PROPERTIES_INIT;
    ck_assert_ok(cuabi_device_get_properties(&props, dev));
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, segred_src, 0, "segred.cu"));
    cuabi_objcode *obj = compile(p, 0);
    int arch;
    ck_assert_ok(cuabi_objcode_arch(&arch, obj));
    ck_assert_int_eq(arch, props.compute_capability_major * 10 + props.compute_capability_minor);
    run_segred(obj, "segred<float, 256>");
    ck_assert_ok(cuabi_objcode_release(obj));

    obj = compile(p, 1); /* in-memory hit */
    run_segred(obj, "segred<float, 256>");
    ck_assert_ok(cuabi_objcode_release(obj));

    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    obj = compile(p, 2); /* on-disk hit: the name map came with it */
    run_segred(obj, "segred<float, 256>");
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

START_TEST(ptx_input_through_nvjitlink_runs)
{
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, segred_src, 0, "segred.cu"));
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = names;
    o.num_name_expressions = 1;
    o.output = CUABI_CODE_PTX;
    cuabi_objcode *ptx;
    ck_assert_ok(cuabi_program_compile(&ptx, p, &o));
    const char *lowered;
    ck_assert_ok(cuabi_program_lowered_name(&lowered, p, "segred<float, 256>"));
    const void *text;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&text, &size, ptx));
    cuabi_program *pp;
    ck_assert_ok(cuabi_program_create(&pp, CUABI_CODE_PTX, text, size, "segred.ptx"));
    cuabi_objcode *cubin;
    ck_assert_ok(cuabi_program_compile(&cubin, pp, NULL));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, cubin));
    ck_assert_int_eq(t, CUABI_CODE_CUBIN);
    run_segred(cubin, lowered);
    ck_assert_ok(cuabi_objcode_release(cubin));
    ck_assert_ok(cuabi_program_release(pp));
    ck_assert_ok(cuabi_objcode_release(ptx));
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_program");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, default_arch_is_the_device_and_every_path_runs);
    tcase_add_test(tc, ptx_input_through_nvjitlink_runs);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
