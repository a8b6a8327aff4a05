/* NVVM IR programs on a real GPU: kernels compiled by libNVVM (text and
 * bitcode, with libdevice) load and compute the right answer, from a fresh
 * compile and from the cache; NVVM LTO-IR linked with C++ LTO-IR through
 * nvJitLink runs. Memory and launches go straight through the driver
 * table. SKIP (77) without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"
#include "compile/objcode.h"
#include "util/file.h"

static char tmpdir[64];
static cuabi_device *dev;
static const cuabi__driver *drv;

/* A file of tests/fixtures/data, NUL-terminated (cuabi__free it). */
static char *slurp(const char *name, size_t *size)
{
    char path[4096];
    void *data;
    snprintf(path, sizeof path, "%s/tests/fixtures/data/%s", cuabi_test_srcdir(), name);
    ck_assert_ok(cuabi__read_file(path, &data, size, "test"));
    return data;
}

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-gpu-nvvm-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    ck_assert_ok(cuabi_cache_set_directory(tmpdir));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_set_current(dev));
    ck_assert_ok(cuabi__driver_get(&drv));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_ok(cuabi_device_release(dev));
}

enum { N = 1000 };

/* Launch `name` of `obj` over N floats: args are (out, in, [a,] n). */
static void run(cuabi_objcode *obj, const char *name, const float *in, float *out, float *a)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, obj, name));
    uintptr_t raw;
    ck_assert_ok(cuabi_kernel_raw(&raw, k));
    CUdeviceptr din, dout;
    int n = N;
    ck_assert_int_eq(drv->cuMemAlloc(&din, N * sizeof *in), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemAlloc(&dout, N * sizeof *out), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyHtoD(din, in, N * sizeof *in), CUDA_SUCCESS);
    void *with_a[] = { &dout, &din, a, &n }, *without_a[] = { &dout, &din, &n };
    ck_assert_int_eq(drv->cuLaunchKernel((CUfunction)raw, (N + 127) / 128, 1, 1, 128, 1, 1,
                                         0, NULL, a ? with_a : without_a, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyDtoH(out, dout, N * sizeof *out), CUDA_SUCCESS);
    drv->cuMemFree(din);
    drv->cuMemFree(dout);
    ck_assert_ok(cuabi_kernel_release(k));
}

static cuabi_objcode *compile(cuabi_program *p, int expect_hit)
{
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.output = CUABI_CODE_PTX; /* arch: the device's */
    o.libdevice = 1;
    cuabi_objcode *obj;
    ck_assert_msg(cuabi_program_compile(&obj, p, &o) == CUABI_SUCCESS, "%s",
                  cuabi_last_error()->message);
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, expect_hit);
    return obj;
}

static void check_kernels(cuabi_objcode *obj)
{
    static float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)(i - N / 2) / 100.0f; /* -5 .. 5 */
    run(obj, "expk", in, out, NULL);
    for (int i = 0; i < N; i++) {
        double want = exp((double)in[i]);
        ck_assert_msg(fabs(out[i] - want) <= 2e-6 * want, "expk[%d]: exp(%g) = %g, not %g", i,
                      in[i], out[i], want);
    }
    float a = 2.5f;
    run(obj, "scale", in, out, &a);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(out[i], a * in[i]);
}

START_TEST(nvvm_kernels_run_from_every_path)
{
    for (int bitcode = 0; bitcode < 2; bitcode++) {
        size_t size;
        char *ir = slurp(bitcode ? "nvvm_kernels.bc" : "nvvm_kernels.ll", &size);
        cuabi_program *p;
        ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, ir, size, NULL));
        cuabi_objcode *obj = compile(p, 0);
        check_kernels(obj);
        ck_assert_ok(cuabi_objcode_release(obj));
        obj = compile(p, 1); /* in-memory hit */
        check_kernels(obj);
        ck_assert_ok(cuabi_objcode_release(obj));
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        obj = compile(p, 2); /* on-disk hit */
        check_kernels(obj);
        ck_assert_ok(cuabi_objcode_release(obj));
        ck_assert_ok(cuabi_program_release(p));
        cuabi__free(ir);
    }
}
END_TEST

/* The NVVM side calls a device function the C++ side defines; nvJitLink
 * links the two LTO-IR units into one CUBIN. */
START_TEST(nvvm_ltoir_links_with_cxx_ltoir)
{
    static const char ir[] =
        "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-"
        "i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
        "target triple = \"nvptx64-nvidia-cuda\"\n"
        "@llvm.used = appending global [1 x i8*] [i8* bitcast (void (float*, float*, i32)* "
        "@k to i8*)], section \"llvm.metadata\"\n"
        "declare float @cxx_twice_plus(float)\n"
        "declare float @__nv_expf(float)\n"
        "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
        "define void @k(float* %out, float* %in, i32 %n) {\n"
        "  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
        "  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
        "  %b128 = mul i32 %b, 128\n"
        "  %i = add i32 %b128, %t\n"
        "  %ok = icmp slt i32 %i, %n\n"
        "  br i1 %ok, label %body, label %done\n"
        "body:\n"
        "  %pi = getelementptr float, float* %in, i32 %i\n"
        "  %x = load float, float* %pi\n"
        "  %e = call float @__nv_expf(float %x)\n"
        "  %y = call float @cxx_twice_plus(float %e)\n"
        "  %po = getelementptr float, float* %out, i32 %i\n"
        "  store float %y, float* %po\n"
        "  br label %done\n"
        "done:\n"
        "  ret void\n"
        "}\n"
        "!nvvm.annotations = !{!0}\n"
        "!0 = !{void (float*, float*, i32)* @k, !\"kernel\", i32 1}\n"
        "!nvvmir.version = !{!1}\n"
        "!1 = !{i32 2, i32 0, i32 3, i32 1}\n";
    static const char cxx[] =
        "extern \"C\" __device__ float cxx_twice_plus(float x) { return 2.0f * x + 0.5f; }\n";
    cuabi_program *pi, *pc;
    cuabi_objcode *li, *lc, *linked;
    ck_assert_ok(cuabi_program_create(&pi, CUABI_CODE_NVVM, ir, 0, "k.ll"));
    ck_assert_ok(cuabi_program_create(&pc, CUABI_CODE_CUDA_CXX, cxx, 0, "op.cu"));
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.output = CUABI_CODE_LTOIR;
    o.libdevice = 1;
    ck_assert_msg(cuabi_program_compile(&li, pi, &o) == CUABI_SUCCESS, "%s",
                  cuabi_last_error()->message);
    o.libdevice = 0;
    o.relocatable = 1;
    ck_assert_ok(cuabi_program_compile(&lc, pc, &o));
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.lto = 1;
    cuabi_linker *ln;
    ck_assert_ok(cuabi_linker_create(&ln, &lo));
    ck_assert_ok(cuabi_linker_add_objcode(ln, li));
    ck_assert_ok(cuabi_linker_add_objcode(ln, lc));
    ck_assert_msg(cuabi_linker_complete(&linked, ln, CUABI_CODE_CUBIN) == CUABI_SUCCESS, "%s",
                  cuabi_last_error()->message);
    ck_assert_ok(cuabi_linker_destroy(ln));
    static float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)(i % 50) / 10.0f;
    run(linked, "k", in, out, NULL);
    for (int i = 0; i < N; i++) {
        double want = 2.0 * exp((double)in[i]) + 0.5;
        ck_assert_msg(fabs(out[i] - want) <= 4e-6 * want, "k[%d] = %g, not %g", i, out[i],
                      want);
    }
    ck_assert_ok(cuabi_objcode_release(linked));
    ck_assert_ok(cuabi_objcode_release(li));
    ck_assert_ok(cuabi_objcode_release(lc));
    ck_assert_ok(cuabi_program_release(pi));
    ck_assert_ok(cuabi_program_release(pc));
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_nvvm");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, nvvm_kernels_run_from_every_path);
    tcase_add_test(tc, nvvm_ltoir_links_with_cxx_ltoir);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
