/* Segmented reduction: a template kernel instantiated through a name
 * expression, arguments described once as a pack, launched on a GPU.
 * Without a GPU it compiles and inspects, then says the launch is skipped. */
#include <stdio.h>

#include "cuabi.h"

static const char src[] =
    "template <typename T, int BLOCK>\n"
    "__global__ void segreduce(const T *in, const int *off, T *out, int segs) {\n"
    "  __shared__ T part[BLOCK];\n"
    "  int s = blockIdx.x; if (s >= segs) return;\n"
    "  T acc = 0;\n"
    "  for (int i = off[s] + threadIdx.x; i < off[s + 1]; i += BLOCK) acc += in[i];\n"
    "  part[threadIdx.x] = acc; __syncthreads();\n"
    "  for (int st = BLOCK / 2; st > 0; st /= 2) {\n"
    "    if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];\n"
    "    __syncthreads(); }\n"
    "  if (threadIdx.x == 0) out[s] = part[0];\n"
    "}\n";

#define TRY(call) do { if ((call) != CUABI_SUCCESS) { \
    fprintf(stderr, "%s\n", cuabi_last_error()->message); return 1; } } while (0)

int main(void)
{
    const char *expr = "segreduce<float, 256>";
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.name_expressions = &expr;
    opts.num_name_expressions = 1;
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *k;
    TRY(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "segreduce.cu"));
    TRY(cuabi_program_compile(&code, prog, &opts));
    TRY(cuabi_objcode_get_kernel(&k, code, expr));   /* by the name expression */

    int ndev = 0;
    cuabi_device *dev;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("%s compiled; no GPU, so the launch is skipped\n", expr);
        return 0;
    }
    TRY(cuabi_device_get(&dev, 0));
    float in[12];
    int off[4] = { 0, 4, 8, 12 };
    float out[3];
    for (int i = 0; i < 12; i++) in[i] = (float)(i + 1);
    cuabi_memory_resource *res;
    cuabi_buffer *bin, *boff, *bout;
    TRY(cuabi_memory_resource_device_default(&res, dev));
    TRY(cuabi_buffer_allocate(&bin, res, sizeof in, 0, NULL));
    TRY(cuabi_buffer_allocate(&boff, res, sizeof off, 0, NULL));
    TRY(cuabi_buffer_allocate(&bout, res, sizeof out, 0, NULL));
    TRY(cuabi_buffer_copy_from_host(bin, 0, in, sizeof in, NULL));
    TRY(cuabi_buffer_copy_from_host(boff, 0, off, sizeof off, NULL));

    cuabi_argpack *args;   /* the parameter list, once */
    TRY(cuabi_argpack_create(&args, "buffer, buffer, buffer, i32"));
    TRY(cuabi_argpack_set_buffer(args, 0, bin));
    TRY(cuabi_argpack_set_buffer(args, 1, boff));
    TRY(cuabi_argpack_set_buffer(args, 2, bout));
    TRY(cuabi_argpack_set_int(args, 3, 3));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = 3;
    cfg.block[0] = 256;
    cfg.device = dev;
    TRY(cuabi_launch(k, args, &cfg));
    TRY(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
    printf("[1..12] in 3 segments -> [%g, %g, %g]\n", out[0], out[1], out[2]);

    cuabi_argpack_release(args);
    cuabi_buffer_destroy(bin);
    cuabi_buffer_destroy(boff);
    cuabi_buffer_destroy(bout);
    cuabi_memory_resource_release(res);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    cuabi_device_release(dev);
    return out[0] == 10 && out[1] == 26 && out[2] == 42 ? 0 : 1;
}
