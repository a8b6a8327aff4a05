/* NVVM IR linked with C++ through LTO: the picture of a Python JIT (Numba
 * writes NVVM IR) calling into a CUDA C++ library (CUB-style device
 * functions). libNVVM compiles the IR kernel to LTO-IR, with libdevice for
 * its math; NVRTC compiles the C++ device function to LTO-IR (-dlto); and
 * nvJitLink links both, optimising across the two, into one CUBIN.
 * Runs the kernel on a GPU; without one it compiles, links and inspects. */
#include <stdio.h>

#include "cuabi.h"

/* The "JIT" side: out[i] = cxx_op(sqrtf(v[i])), cxx_op defined in C++. */
static const char nvvm_ir[] =
    "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-"
    "i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
    "target triple = \"nvptx64-nvidia-cuda\"\n"
    /* nvJitLink keeps only what llvm.used names (and what it reaches) */
    "@llvm.used = appending global [1 x i8*] [i8* bitcast (void (float*, i32)* @apply to i8*)], "
    "section \"llvm.metadata\"\n"
    "declare float @cxx_op(float)\n"
    "declare float @__nv_sqrtf(float)\n"
    "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    "define void @apply(float* %v, i32 %n) {\n"
    "entry:\n"
    "  %i = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    "  %ok = icmp slt i32 %i, %n\n"
    "  br i1 %ok, label %body, label %done\n"
    "body:\n"
    "  %p = getelementptr float, float* %v, i32 %i\n"
    "  %x = load float, float* %p\n"
    "  %r = call float @__nv_sqrtf(float %x)\n"
    "  %y = call float @cxx_op(float %r)\n"
    "  store float %y, float* %p\n"
    "  br label %done\n"
    "done:\n"
    "  ret void\n"
    "}\n"
    "!nvvm.annotations = !{!0}\n"
    "!0 = !{void (float*, i32)* @apply, !\"kernel\", i32 1}\n"
    "!nvvmir.version = !{!1}\n"
    "!1 = !{i32 2, i32 0, i32 3, i32 1}\n";

/* The "library" side, in C++. */
static const char cxx_src[] =
    "extern \"C\" __device__ float cxx_op(float x) { return 3.0f * x + 1.0f; }\n";

#define TRY(call) do { if ((call) != CUABI_SUCCESS) { \
    fprintf(stderr, "%s\n%s\n", cuabi_last_error()->message, cuabi_last_error()->log); \
    return 1; } } while (0)

static int to_ltoir(cuabi_objcode **out, cuabi_code_type type, const char *src, size_t size,
                    const char *name)
{
    cuabi_program *p;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.output = CUABI_CODE_LTOIR;
    if (type == CUABI_CODE_NVVM)
        o.libdevice = 1;  /* __nv_sqrtf */
    else
        o.relocatable = 1; /* cxx_op is called from another unit */
    TRY(cuabi_program_create(&p, type, src, size, name));
    TRY(cuabi_program_compile(out, p, &o));
    cuabi_program_release(p);
    return 0;
}

int main(void)
{
    cuabi_objcode *ir, *cxx, *linked;
    if (to_ltoir(&ir, CUABI_CODE_NVVM, nvvm_ir, sizeof nvvm_ir - 1, "apply.ll") ||
        to_ltoir(&cxx, CUABI_CODE_CUDA_CXX, cxx_src, sizeof cxx_src - 1, "op.cu"))
        return 1;
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.lto = 1;
    cuabi_linker *ln;
    TRY(cuabi_linker_create(&ln, &lo));
    TRY(cuabi_linker_add_objcode(ln, ir));
    TRY(cuabi_linker_add_objcode(ln, cxx));
    TRY(cuabi_linker_complete(&linked, ln, CUABI_CODE_CUBIN));
    cuabi_linker_destroy(ln);
    cuabi_kernel *k;
    TRY(cuabi_objcode_get_kernel(&k, linked, "apply"));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    TRY(cuabi_kernel_get_resources(&r, k));
    printf("linked NVVM IR with C++ through LTO: apply uses %d registers\n", r.registers);

    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("no GPU, so the launch is skipped\n");
        return 0;
    }
    cuabi_device *dev;
    cuabi_memory_resource *res;
    cuabi_buffer *buf;
    float v[4] = { 0, 1, 4, 9 };
    TRY(cuabi_device_get(&dev, 0));
    TRY(cuabi_memory_resource_device_default(&res, dev));
    TRY(cuabi_buffer_allocate(&buf, res, sizeof v, 0, NULL));
    TRY(cuabi_buffer_copy_from_host(buf, 0, v, sizeof v, NULL));
    cuabi_argpack *args;
    TRY(cuabi_argpack_create(&args, "buffer, i32"));
    TRY(cuabi_argpack_set_buffer(args, 0, buf));
    TRY(cuabi_argpack_set_int(args, 1, 4));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 32;
    cfg.device = dev;
    TRY(cuabi_launch(k, args, &cfg));
    TRY(cuabi_buffer_copy_to_host(v, buf, 0, sizeof v, NULL));
    printf("3*sqrt(x)+1 of [0, 1, 4, 9] = [%g, %g, %g, %g]\n", v[0], v[1], v[2], v[3]);
    cuabi_argpack_release(args);
    cuabi_buffer_destroy(buf);
    cuabi_memory_resource_release(res);
    cuabi_device_release(dev);
    cuabi_kernel_release(k);
    cuabi_objcode_release(linked);
    cuabi_objcode_release(ir);
    cuabi_objcode_release(cxx);
    return v[0] == 1.0f && v[1] == 4.0f && v[2] == 7.0f && v[3] == 10.0f ? 0 : 1;
}
