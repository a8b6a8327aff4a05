/* A struct passed by value, next to a float4 that needs 16-byte alignment.
 * The pack's layout is C's (through libffi) and is checked against the
 * kernel's own parameter info before anything launches. */
#include <stdio.h>

#include "cuabi.h"

static const char src[] =
    "struct Particle { float x, y, z; int id; };\n"
    "extern \"C\" __global__ void move(Particle p, int scale, float4 dir, float *out) {\n"
    "  out[0] = p.x + dir.x; out[1] = p.y + dir.y; out[2] = p.z + dir.z; out[3] = p.id * dir.w * scale;\n"
    "}\n";

#define TRY(call) do { if ((call) != CUABI_SUCCESS) { \
    fprintf(stderr, "%s\n", cuabi_last_error()->message); return 1; } } while (0)

struct particle { float x, y, z; int id; };

int main(void)
{
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *k;
    TRY(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "move.cu"));
    TRY(cuabi_program_compile(&code, prog, NULL));
    TRY(cuabi_objcode_get_kernel(&k, code, "move"));
    cuabi_argpack *args;
    TRY(cuabi_argpack_create(&args, "struct{f32, f32, f32, i32}, i32, float4, ptr"));
    size_t off;
    TRY(cuabi_argpack_slot_offset(&off, args, 2));
    printf("float4 argument at offset %zu (16-aligned)\n", off);
    TRY(cuabi_argpack_check_kernel(args, k));   /* works without a GPU too */

    /* A plain struct of four floats is only 4-aligned: it would sit at
     * offset 20, the kernel reads offset 32. Caught before any launch: */
    cuabi_argpack *wrong;
    TRY(cuabi_argpack_create(&wrong, "struct{f32, f32, f32, i32}, i32, struct{f32, f32, f32, f32}, ptr"));
    if (cuabi_argpack_check_kernel(wrong, k) != CUABI_SUCCESS)
        printf("as a plain struct: %s\n", cuabi_last_error()->message);
    cuabi_argpack_release(wrong);

    struct particle p = { 1, 2, 3, 7 };
    float dir[4] = { 0.5f, 0.5f, 0.5f, 2 };
    TRY(cuabi_argpack_set_bytes(args, 0, &p, sizeof p));
    TRY(cuabi_argpack_set_int(args, 1, 3));
    TRY(cuabi_argpack_set_bytes(args, 2, dir, sizeof dir));
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("no GPU, so the launch is skipped\n");
        return 0;
    }
    cuabi_device *dev;
    cuabi_memory_resource *res;
    cuabi_buffer *out;
    TRY(cuabi_device_get(&dev, 0));
    TRY(cuabi_memory_resource_device_default(&res, dev));
    TRY(cuabi_buffer_allocate(&out, res, 4 * sizeof(float), 0, NULL));
    TRY(cuabi_argpack_set_buffer(args, 3, out));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.device = dev;
    TRY(cuabi_launch(k, args, &cfg));
    float r[4];
    TRY(cuabi_buffer_copy_to_host(r, out, 0, sizeof r, NULL));
    printf("moved: (%g, %g, %g), id*w*scale = %g\n", r[0], r[1], r[2], r[3]);
    cuabi_buffer_destroy(out);
    cuabi_memory_resource_release(res);
    cuabi_device_release(dev);
    cuabi_argpack_release(args);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    return r[3] == 42.0f ? 0 : 1;
}
