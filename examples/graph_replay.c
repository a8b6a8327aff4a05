/* CUDA graphs: the segmented reduction of 64 batches captured once from
 * ordinary cuabi launches and replayed with one launch per iteration.
 * Without a GPU it compiles the kernel, then says the rest is skipped. */
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

enum { BATCHES = 64, SEGS = 8, SEG_LEN = 100, BATCH_LEN = SEGS * SEG_LEN, REPLAYS = 10 };

#define TRY(call) do { if ((call) != CUABI_SUCCESS) { \
    fprintf(stderr, "%s\n", cuabi_last_error()->message); return 1; } } while (0)

int main(void)
{
    const char *expr = "segreduce<float, 128>";
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.name_expressions = &expr;
    opts.num_name_expressions = 1;
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *k;
    TRY(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "segreduce.cu"));
    TRY(cuabi_program_compile(&code, prog, &opts));
    TRY(cuabi_objcode_get_kernel(&k, code, expr));

    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("%s compiled; no GPU, so capture and replay are skipped\n", expr);
        return 0;
    }
    cuabi_device *dev;
    cuabi_stream *stream;
    cuabi_memory_resource *res;
    TRY(cuabi_device_get(&dev, 0));
    TRY(cuabi_stream_create(&stream, dev, NULL));
    TRY(cuabi_memory_resource_device_default(&res, dev));

    static float in[BATCHES * BATCH_LEN], out[BATCHES * SEGS];
    int off[SEGS + 1];
    for (int i = 0; i < BATCHES * BATCH_LEN; i++) in[i] = (float)(i % 10);
    for (int s = 0; s <= SEGS; s++) off[s] = s * SEG_LEN;
    cuabi_buffer *bin, *boff, *bout;
    TRY(cuabi_buffer_allocate(&bin, res, sizeof in, 0, stream));
    TRY(cuabi_buffer_allocate(&boff, res, sizeof off, 0, stream));
    TRY(cuabi_buffer_allocate(&bout, res, sizeof out, 0, stream));
    TRY(cuabi_buffer_copy_from_host(bin, 0, in, sizeof in, NULL));
    TRY(cuabi_buffer_copy_from_host(boff, 0, off, sizeof off, NULL));

    /* Capture: 64 ordinary launches on the stream, recorded, not run. */
    cuabi_argpack *args;
    uintptr_t pin, pout;
    TRY(cuabi_argpack_create(&args, "ptr, buffer, ptr, i32"));
    TRY(cuabi_argpack_set_buffer(args, 1, boff));
    TRY(cuabi_argpack_set_int(args, 3, SEGS));
    TRY(cuabi_buffer_pointer(&pin, bin));
    TRY(cuabi_buffer_pointer(&pout, bout));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = SEGS;
    cfg.block[0] = 128;
    cfg.stream = stream;
    cuabi_graph *graph;
    TRY(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    for (int b = 0; b < BATCHES; b++) {
        TRY(cuabi_argpack_set_pointer(args, 0, pin + sizeof(float) * (size_t)b * BATCH_LEN));
        TRY(cuabi_argpack_set_pointer(args, 2, pout + sizeof(float) * (size_t)b * SEGS));
        TRY(cuabi_launch(k, args, &cfg));
    }
    TRY(cuabi_graph_capture_end(&graph, stream));

    /* Instantiate once, replay: one call launches all 64 kernels. */
    cuabi_graph_exec *exec;
    size_t nodes;
    TRY(cuabi_graph_node_count(&nodes, graph));
    TRY(cuabi_graph_instantiate(&exec, graph, NULL));
    for (int r = 0; r < REPLAYS; r++)
        TRY(cuabi_graph_exec_launch(exec, stream));
    TRY(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, stream));
    TRY(cuabi_stream_synchronize(stream));
    /* Each segment sums 100 values of 0..9: 450. */
    int ok = 1;
    for (int i = 0; i < BATCHES * SEGS; i++)
        ok &= out[i] == 450.0f;
    printf("captured %zu kernel launches into one graph, replayed %d times: %s\n", nodes,
           REPLAYS, ok ? "every segment sums to 450" : "WRONG RESULT");

    cuabi_graph_exec_release(exec);
    cuabi_graph_release(graph);
    cuabi_argpack_release(args);
    cuabi_buffer_destroy(bin);
    cuabi_buffer_destroy(boff);
    cuabi_buffer_destroy(bout);
    cuabi_memory_resource_release(res);
    cuabi_stream_release(stream);
    cuabi_device_release(dev);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    return ok ? 0 : 1;
}
