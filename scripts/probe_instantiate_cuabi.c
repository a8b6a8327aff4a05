/* The first cuGraphInstantiate in a process that set up through cuabi (device,
 * stream, NVRTC program, kernel, one launch), three ways, one per process:
 *   cuabi     cuabi capture, cuabi_graph_instantiate
 *   rawinst   cuabi capture, raw cuGraphInstantiateWithParams of its CUgraph
 *   raw       raw capture (cuLaunchKernel of cuabi's CUfunction on cuabi's
 *             stream), raw instantiate
 *   rawinfo   raw, with the cuStreamGetCaptureInfo cuabi's begin makes first
 * Each round prints the capture's parts too: begin, the first launch, the
 * other 99, end (where a process's first capture goes: issue 24 item 3).
 * Against scripts/probe_instantiate_first.c (no cuabi at all): whether cuabi's
 * slower first instantiate comes from its graph or from the process cuabi set
 * up (docs/PERFORMANCE.md, 2026-11-28). Build in a built tree:
 *   gcc -O2 -Iinclude scripts/probe_instantiate_cuabi.c -L.libs -lcuabi \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -I/usr/local/cuda/include */
#include <cuabi.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define OK(x) do { if ((x) != CUABI_SUCCESS) { printf("%s: %s\n", #x, cuabi_last_error()->message); exit(1); } } while (0)
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("%s = %d\n", #x, r_); exit(1); } } while (0)

static long minflt(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "cuabi";
    static const char src[] = "extern \"C\" __global__ void k(float *p, int n, float a) "
                              "{ if (n < 0) p[0] = a; }\n";
    cuabi_device *dev;
    cuabi_stream *stream;
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *kern;
    cuabi_argpack *pack;
    uintptr_t fn, rs;
    OK(cuabi_device_get(&dev, 0));
    OK(cuabi_stream_create(&stream, dev, NULL));
    OK(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "k.cu"));
    OK(cuabi_program_compile(&code, prog, NULL));
    OK(cuabi_objcode_get_kernel(&kern, code, "k"));
    OK(cuabi_kernel_function(&fn, kern, dev));
    OK(cuabi_stream_raw(&rs, stream));
    OK(cuabi_device_set_current(dev));
    OK(cuabi_argpack_create(&pack, "ptr, i32, f32"));
    OK(cuabi_argpack_set_pointer(pack, 0, 0));
    OK(cuabi_argpack_set_int(pack, 1, 5));
    OK(cuabi_argpack_set_float(pack, 2, 1.0));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 32;
    cfg.stream = stream;
    OK(cuabi_launch(kern, pack, &cfg));
    OK(cuabi_stream_synchronize(stream));
    for (int round = 0; round < 3; round++) {
        CUgraph g = NULL;
        CUgraphExec e = NULL;
        cuabi_graph *graph = NULL;
        cuabi_graph_exec *exec = NULL;
        long f0 = minflt(), fb;
        double t0 = now(), tb, tl1, tl, t1, t2;
        if (!strncmp(mode, "raw", 3)) {
            CUdeviceptr p = 0;
            int n = 5;
            float a = 1;
            void *args[] = { &p, &n, &a };
            if (!strcmp(mode, "rawinfo")) {
                CUstreamCaptureStatus st;
                CK(cuStreamGetCaptureInfo((CUstream)rs, &st, NULL, NULL, NULL, NULL, NULL));
            }
            CK(cuStreamBeginCapture((CUstream)rs, CU_STREAM_CAPTURE_MODE_GLOBAL));
            tb = now();
            fb = minflt();
            for (int i = 0; i < 100; i++) {
                CK(cuLaunchKernel((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, (CUstream)rs, args, NULL));
                if (!i)
                    tl1 = now();
            }
            tl = now();
            CK(cuStreamEndCapture((CUstream)rs, &g));
        } else {
            OK(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
            tb = now();
            fb = minflt();
            for (int i = 0; i < 100; i++) {
                OK(cuabi_launch(kern, pack, &cfg));
                if (!i)
                    tl1 = now();
            }
            tl = now();
            OK(cuabi_graph_capture_end(&graph, stream));
            uintptr_t raw;
            OK(cuabi_graph_raw(&raw, graph));
            g = (CUgraph)raw;
        }
        t1 = now();
        if (!strcmp(mode, "cuabi")) {
            OK(cuabi_graph_instantiate(&exec, graph, NULL));
        } else {
            CUDA_GRAPH_INSTANTIATE_PARAMS ip;
            memset(&ip, 0, sizeof ip);
            CK(cuGraphInstantiateWithParams(&e, g, &ip));
        }
        t2 = now();
        printf("%s round %d: capture %.1f us (begin %.1f, first launch %.1f, 99 launches %.1f, "
               "end %.1f; page faults in begin %ld) instantiate %.1f us\n", mode, round, t1 - t0,
               tb - t0, tl1 - tb, tl - tl1, t1 - tl, fb - f0, t2 - t1);
        if (exec)
            cuabi_graph_exec_release(exec);
        if (e)
            CK(cuGraphExecDestroy(e));
        if (graph)
            cuabi_graph_release(graph);
        else
            CK(cuGraphDestroy(g));
    }
    return 0;
}
