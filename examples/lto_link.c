/* LTO linking of two units: a kernel in one, the device function it calls
 * in another, both compiled to LTO-IR and linked (with cross-unit inlining)
 * by nvJitLink. Runs on a GPU; without one it links and inspects only. */
#include <stdio.h>

#include "cuabi.h"

static const char unit_a[] =
    "extern __device__ float scale(float x);\n"
    "extern \"C\" __global__ void apply(float *v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) v[i] = scale(v[i]);\n"
    "}\n";
static const char unit_b[] = "__device__ float scale(float x) { return 3.0f * x + 1.0f; }\n";

#define TRY(call) do { if ((call) != CUABI_SUCCESS) { \
    fprintf(stderr, "%s\n%s\n", cuabi_last_error()->message, cuabi_last_error()->log); \
    return 1; } } while (0)

static int to_ltoir(cuabi_objcode **out, const char *src, size_t size, const char *name)
{
    cuabi_program *p;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.output = CUABI_CODE_LTOIR;
    o.relocatable = 1;    /* unit_a calls a function defined elsewhere */
    TRY(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, size, name));
    TRY(cuabi_program_compile(out, p, &o));
    cuabi_program_release(p);
    return 0;
}

int main(void)
{
    cuabi_objcode *a, *b, *linked;
    if (to_ltoir(&a, unit_a, sizeof unit_a - 1, "a.cu") || to_ltoir(&b, unit_b, sizeof unit_b - 1, "b.cu"))
        return 1;
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.lto = 1;
    cuabi_linker *ln;
    TRY(cuabi_linker_create(&ln, &lo));
    TRY(cuabi_linker_add_objcode(ln, a));
    TRY(cuabi_linker_add_objcode(ln, b));
    TRY(cuabi_linker_complete(&linked, ln, CUABI_CODE_CUBIN));
    int hit;   /* through the compile cache: a second run needs no nvJitLink */
    TRY(cuabi_linker_cache_hit(&hit, ln));
    cuabi_linker_destroy(ln);
    cuabi_kernel *k;
    TRY(cuabi_objcode_get_kernel(&k, linked, "apply"));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    TRY(cuabi_kernel_get_resources(&r, k));
    printf("linked two LTO-IR units (%s): apply uses %d registers\n",
           hit ? "from the compile cache" : "by nvJitLink now", r.registers);

    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("no GPU, so the launch is skipped\n");
        return 0;
    }
    cuabi_device *dev;
    cuabi_memory_resource *res;
    cuabi_buffer *buf;
    float v[4] = { 0, 1, 2, 3 };
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
    printf("3x+1 of [0, 1, 2, 3] = [%g, %g, %g, %g]\n", v[0], v[1], v[2], v[3]);
    cuabi_argpack_release(args);
    cuabi_buffer_destroy(buf);
    cuabi_memory_resource_release(res);
    cuabi_device_release(dev);
    cuabi_kernel_release(k);
    cuabi_objcode_release(linked);
    cuabi_objcode_release(a);
    cuabi_objcode_release(b);
    return v[3] == 10.0f ? 0 : 1;
}
