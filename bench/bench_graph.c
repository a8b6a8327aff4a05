/* Graph replay against launching one by one: 100 launches of the empty
 * kernel k(float *, int, float) on one stream, as
 *   raw    100 cuLaunchKernel calls (the floor of launching one by one),
 *   pack   100 cuabi_launch calls,
 *   graph  one cuabi_graph_exec_launch of those 100 launches captured once,
 * interleaved in rounds. Host time is the time the calls take (the queue
 * never fills: each round submits REPLAYS x 100 kernels, then waits);
 * device time is the round's time to completion. Per kernel, best round,
 * and as a ratio to raw. Then the cost of making the graph: capture,
 * instantiate, and the first launch (call, and to completion).
 * Usage: bench_graph [replays per round (default 20)] [rounds (9)].
 * Without a GPU it says so and exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#include "cuabi.h"

enum { KERNELS = 100 };

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        cuabi_status st__ = (call);                                                    \
        if (st__ != CUABI_SUCCESS) {                                                   \
            fprintf(stderr, "bench_graph: %s: %s\n", #call, cuabi_last_error()->message); \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    int replays = argc > 1 ? atoi(argv[1]) : 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("bench_graph: no GPU (%s); nothing measured\n",
               ndev == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    launch_fn raw_launch = cuda ? (launch_fn)dlsym(cuda, "cuLaunchKernel") : NULL;
    if (!raw_launch) {
        fprintf(stderr, "bench_graph: cannot find cuLaunchKernel in libcuda.so.1\n");
        return 1;
    }
    static const char src[] = "extern \"C\" __global__ void k(float *p, int n, float s) {}\n";
    cuabi_device *dev;
    cuabi_stream *stream;
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *kern;
    CHECK(cuabi_device_get(&dev, 0));
    CHECK(cuabi_stream_create(&stream, dev, NULL));
    CHECK(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "empty.cu"));
    CHECK(cuabi_program_compile(&code, prog, NULL));
    CHECK(cuabi_objcode_get_kernel(&kern, code, "k"));
    uintptr_t fn, raw_stream;
    CHECK(cuabi_kernel_function(&fn, kern, dev));
    CHECK(cuabi_stream_raw(&raw_stream, stream));
    CHECK(cuabi_device_set_current(dev));

    cuabi_argpack *pack;
    CHECK(cuabi_argpack_create(&pack, "ptr, i32, f32"));
    CHECK(cuabi_argpack_set_pointer(pack, 0, 0));
    CHECK(cuabi_argpack_set_int(pack, 1, 1000));
    CHECK(cuabi_argpack_set_float(pack, 2, 2.0));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 32;
    cfg.stream = stream;
    CHECK(cuabi_launch(kern, pack, &cfg)); /* loaded and checked before timing */
    CHECK(cuabi_stream_synchronize(stream));

    /* Making the graph: capture, instantiate, first launch. */
    double t0 = now();
    cuabi_graph *graph;
    CHECK(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < KERNELS; i++)
        CHECK(cuabi_launch(kern, pack, &cfg));
    CHECK(cuabi_graph_capture_end(&graph, stream));
    double t_capture = now() - t0;
    t0 = now();
    cuabi_graph_exec *exec;
    CHECK(cuabi_graph_instantiate(&exec, graph, NULL));
    double t_inst = now() - t0;
    t0 = now();
    CHECK(cuabi_graph_exec_launch(exec, stream));
    double t_first_call = now() - t0;
    CHECK(cuabi_stream_synchronize(stream));
    double t_first_done = now() - t0;

    CUdeviceptr p = 0;
    int in = 1000;
    float s = 2.0f;
    void *params[3] = { &p, &in, &s };
    static const char *names[3] = { "raw cuLaunchKernel x100", "cuabi_launch x100",
                                    "cuabi graph replay (100 nodes)" };
    double host[3] = { 1e30, 1e30, 1e30 }, device[3] = { 1e30, 1e30, 1e30 };
    double per_round = (double)replays * KERNELS;
    for (int r = 0; r <= rounds; r++) { /* round 0 warms up */
        for (int m = 0; m < 3; m++) {
            CHECK(cuabi_stream_synchronize(stream));
            double start = now();
            for (int rep = 0; rep < replays; rep++) {
                if (m == 0) {
                    for (int i = 0; i < KERNELS; i++)
                        if (raw_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, (CUstream)raw_stream,
                                       params, NULL)) {
                            fprintf(stderr, "bench_graph: cuLaunchKernel failed\n");
                            return 1;
                        }
                } else if (m == 1) {
                    for (int i = 0; i < KERNELS; i++)
                        CHECK(cuabi_launch(kern, pack, &cfg));
                } else {
                    CHECK(cuabi_graph_exec_launch(exec, stream));
                }
            }
            double submitted = now();
            CHECK(cuabi_stream_synchronize(stream));
            double done = now();
            double h = (submitted - start) / per_round * 1e6, d = (done - start) / per_round * 1e6;
            if (r > 0 && h < host[m])
                host[m] = h;
            if (r > 0 && d < device[m])
                device[m] = d;
        }
    }
    printf("graph replay, empty kernel k(float*, int, float), %d x %d kernels per round x %d "
           "rounds, best round, per kernel\n", replays, KERNELS, rounds);
    for (int m = 0; m < 3; m++)
        printf("  %-32s host %7.3f us  %6.3fx raw   to completion %7.3f us  %6.3fx raw\n",
               names[m], host[m], host[m] / host[0], device[m], device[m] / device[0]);
    printf("  target: graph host cost per kernel <= 0.3x raw: %s (%.3fx)\n",
           host[2] <= 0.3 * host[0] ? "met" : "NOT MET", host[2] / host[0]);
    printf("making the 100-node graph: capture %.1f us, instantiate %.1f us, first launch %.1f us "
           "(call) / %.1f us (to completion)\n", t_capture * 1e6, t_inst * 1e6,
           t_first_call * 1e6, t_first_done * 1e6);
    cuabi_graph_exec_release(exec);
    cuabi_graph_release(graph);
    cuabi_argpack_release(pack);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    cuabi_stream_release(stream);
    cuabi_device_release(dev);
    return 0;
}
