/* cuda.core's compile-side names on a real GPU: kernels compiled with a
 * precompiled header (create_pch, use_pch, automatic pch) and an NVVM IR
 * program compiled with an extra module load and compute the right answer,
 * and the CUBIN NVRTC holds behind cuabi_program_backend_handle (and
 * nvJitLink behind cuabi_linker_backend_handle) is the code that runs.
 * SKIP (77) without a GPU. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "platform/loader.h"

static char tmpdir[64];
static cuabi_device *dev;
static const cuabi__driver *drv;

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-gpu-backend-XXXXXX");
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
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

enum { N = 1000 };

/* Launch k(float *v, int n) of `obj` over N floats and check v = 3x + 1. */
static void check_affine(cuabi_objcode *obj)
{
    static float host[N];
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, obj, "k"));
    uintptr_t raw;
    ck_assert_ok(cuabi_kernel_raw(&raw, k));
    for (int i = 0; i < N; i++)
        host[i] = (float)(i - N / 2) / 64.0f;
    CUdeviceptr d;
    int n = N;
    ck_assert_int_eq(drv->cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyHtoD(d, host, sizeof host), CUDA_SUCCESS);
    void *args[] = { &d, &n };
    ck_assert_int_eq(drv->cuLaunchKernel((CUfunction)raw, (N + 127) / 128, 1, 1, 128, 1, 1, 0,
                                         NULL, args, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(drv->cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    drv->cuMemFree(d);
    for (int i = 0; i < N; i++) {
        float x = (float)(i - N / 2) / 64.0f;
        ck_assert_msg(host[i] == 3.0f * x + 1.0f, "v[%d] = %g, not %g", i, host[i],
                      3.0f * x + 1.0f);
    }
    ck_assert_ok(cuabi_kernel_release(k));
}

static const char cxx_src[] =
    "#include \"ops.h\"\n"
    "extern \"C\" __global__ void k(float *v, int n)\n"
    "{\n"
    "    int i = blockIdx.x * 128 + threadIdx.x;\n"
    "    if (i < n) v[i] = affine(v[i]);\n"
    "}\n";

static void write_header(char *inc, size_t len)
{
    snprintf(inc, len, "%s/inc", tmpdir);
    ck_assert_int_eq(mkdir(inc, 0700), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/ops.h", inc);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#pragma once\n"
          "template <typename T> __device__ T scale(T x) { return T(3) * x; }\n"
          "__device__ inline float affine(float x) { return __fadd_rn(scale(x), 1.0f); }\n", f);
    fclose(f);
}

START_TEST(pch_kernels_run)
{
    const cuabi__nvrtc *nv;
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    if (!nv->nvrtcGetPCHCreateStatus) {
        printf("NVRTC older than 12.8: no PCH\n");
        return;
    }
    char inc[128], pch[128], autodir[128];
    write_header(inc, sizeof inc);
    snprintf(pch, sizeof pch, "%s/ops.pch", tmpdir);
    snprintf(autodir, sizeof autodir, "%s/auto", tmpdir);
    ck_assert_int_eq(mkdir(autodir, 0700), 0);
    const char *incs[] = { inc };
    for (int step = 0; step < 3; step++) {
        cuabi_program *p;
        ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, cxx_src, 0, "pch.cu"));
        cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT; /* arch: the device's */
        o.include_paths = incs;
        o.num_include_paths = 1;
        o.create_pch = step == 0 ? pch : NULL;
        o.use_pch = step == 1 ? pch : NULL;
        o.pch = step == 2;
        o.pch_dir = step == 2 ? autodir : NULL;
        cuabi_objcode *obj;
        ck_assert_msg(cuabi_program_compile(&obj, p, &o) == CUABI_SUCCESS, "step %d: %s", step,
                      cuabi_last_error()->message);
        cuabi_pch_status st;
        ck_assert_ok(cuabi_program_pch_status(&st, p));
        if (step == 0)
            ck_assert_int_eq(st, CUABI_PCH_CREATED);
        else if (step == 1)
            ck_assert_int_eq(st, CUABI_PCH_NONE);
        else
            ck_assert(st == CUABI_PCH_CREATED || st == CUABI_PCH_NOT_ATTEMPTED);
        check_affine(obj);
        ck_assert_ok(cuabi_objcode_release(obj));
        ck_assert_ok(cuabi_program_release(p));
    }
}
END_TEST

#define NVVM_HEAD                                                                          \
    "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-"      \
    "i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n" \
    "target triple = \"nvptx64-nvidia-cuda\"\n"
#define NVVM_VER "!nvvmir.version = !{!9}\n!9 = !{i32 2, i32 0, i32 3, i32 1}\n"

START_TEST(nvvm_extra_module_runs)
{
    static const char main_ir[] =
        NVVM_HEAD
        "declare float @op(float)\n"
        "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
        "define void @k(float* %v, i32 %n) {\n"
        "  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
        "  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
        "  %b128 = mul i32 %b, 128\n"
        "  %i = add i32 %b128, %t\n"
        "  %ok = icmp slt i32 %i, %n\n"
        "  br i1 %ok, label %body, label %done\n"
        "body:\n"
        "  %p = getelementptr float, float* %v, i32 %i\n"
        "  %x = load float, float* %p\n"
        "  %y = call float @op(float %x)\n"
        "  store float %y, float* %p\n"
        "  br label %done\n"
        "done:\n"
        "  ret void\n"
        "}\n"
        "!nvvm.annotations = !{!0}\n"
        "!0 = !{void (float*, i32)* @k, !\"kernel\", i32 1}\n" NVVM_VER;
    static const char op_ir[] =
        NVVM_HEAD
        "define float @op(float %x) {\n"
        "  %m = fmul float %x, 3.0\n"
        "  %r = fadd float %m, 1.0\n"
        "  ret float %r\n"
        "}\n" NVVM_VER;
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, main_ir, 0, "main.ll"));
    void *h;
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    const char *names[] = { "op.ll" }, *srcs[] = { op_ir };
    size_t sizes[] = { sizeof op_ir - 1 };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.output = CUABI_CODE_PTX;
    o.opt_level = 0; /* no contraction of 3x+1 into an fma: the answer is exact */
    o.extra_source_names = names;
    o.extra_sources = srcs;
    o.extra_source_sizes = sizes;
    o.num_extra_sources = 1;
    for (int hit = 0; hit < 2; hit++) {
        cuabi_objcode *obj;
        ck_assert_msg(cuabi_program_compile(&obj, p, &o) == CUABI_SUCCESS, "%s",
                      cuabi_last_error()->message);
        int got;
        ck_assert_ok(cuabi_program_cache_hit(&got, p));
        ck_assert_int_eq(got, hit);
        check_affine(obj);
        ck_assert_ok(cuabi_objcode_release(obj));
    }
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

START_TEST(handles_hold_the_code_that_runs)
{
    char inc[128];
    write_header(inc, sizeof inc);
    const char *incs[] = { inc };
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, cxx_src, 0, "h.cu"));
    void *h;
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = incs;
    o.num_include_paths = 1;
    o.cache = 0;
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_program_compile(&obj, p, &o));
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    const cuabi__nvrtc *nv;
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    size_t n = 0;
    ck_assert_int_eq(nv->nvrtcGetCUBINSize(h, &n), NVRTC_SUCCESS);
    char *cubin = malloc(n);
    ck_assert_int_eq(nv->nvrtcGetCUBIN(h, cubin), NVRTC_SUCCESS);
    const void *code;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, obj));
    ck_assert_uint_eq(size, n);
    ck_assert_int_eq(memcmp(code, cubin, n), 0);
    free(cubin);
    check_affine(obj);
    ck_assert_ok(cuabi_objcode_release(obj));

    /* The same source as PTX, linked by a cached linker asked for its session. */
    o.output = CUABI_CODE_PTX;
    cuabi_objcode *ptx, *linked;
    ck_assert_ok(cuabi_program_compile(&ptx, p, &o));
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, NULL)); /* arch: the device's */
    ck_assert_ok(cuabi_linker_backend_handle(&h, l));
    ck_assert_ok(cuabi_linker_add_objcode(l, ptx));
    ck_assert_ok(cuabi_linker_complete(&linked, l, CUABI_CODE_CUBIN));
    const cuabi__nvjitlink *jl;
    ck_assert_ok(cuabi__nvjitlink_get(&jl));
    ck_assert_int_eq(jl->nvJitLinkGetLinkedCubinSize(h, &n), NVJITLINK_SUCCESS);
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, linked));
    ck_assert_uint_eq(size, n);
    check_affine(linked);
    ck_assert_ok(cuabi_objcode_release(linked));
    ck_assert_ok(cuabi_linker_destroy(l));
    ck_assert_ok(cuabi_objcode_release(ptx));
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_program_backend");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, pch_kernels_run);
    tcase_add_test(tc, nvvm_extra_module_runs);
    tcase_add_test(tc, handles_hold_the_code_that_runs);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
