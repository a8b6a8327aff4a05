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
 *
 * Then (issue 24) making the graph again ROUNDS times, interleaved, medians:
 *   capture     100 cuabi_launch into a cuabi capture, against 100 raw
 *               cuLaunchKernel into a raw capture (cuStreamBeginCapture);
 *   instantiate cuabi_graph_instantiate of cuabi's graph against raw
 *               cuGraphInstantiateWithParams of the same CUgraph (the floor:
 *               target <= 1.10x), and raw instantiates of the raw-captured
 *               graphs (CUfunction nodes, and CUkernel nodes as cuda.core
 *               launches them), which show whether cuabi's graph itself
 *               costs the driver more;
 *   cuStreamGetCaptureInfo on a capturing stream, per call (what cuabi's
 *               captured launches asked the driver before issue 24).
 * The process's first capture and instantiate (above) pay the driver's
 * first-use costs; these do not.
 *
 * Usage: bench_graph [replays per round (default 20)] [rounds (9)]
 *                    [processes (default 5)]
 * With processes > 1 it runs itself that many times and prints the first
 * process's table, each process's making figures and their medians; the
 * ratios over processes are the figures to report. The driver is
 * libcuda.so.1, or CUABI_DRIVER_PATH (a stand-in driver: host-side figures;
 * the CUkernel row is then skipped). Without a GPU it says so and exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "cuabi.h"

enum { KERNELS = 100 };

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*inst_fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
typedef CUresult (*exec_destroy_fn)(CUgraphExec);
typedef CUresult (*graph_destroy_fn)(CUgraph);
typedef CUresult (*info_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                            const CUgraphNode **, const CUgraphEdgeData **, size_t *);

/* A driver entry point by name through cuGetProcAddress (the fakes export
 * only that), else dlsym. */
static void *entry(void *lib, const char *name)
{
    gpa_fn gpa = (gpa_fn)dlsym(lib, "cuGetProcAddress_v2");
    void *p = NULL;
    CUdriverProcAddressQueryResult q;
    if (gpa && gpa(name, &p, 12030, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS && p)
        return p;
    return dlsym(lib, name);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* What each process reports of making the graph (medians of its rounds,
 * microseconds; the per-launch and per-call figures too). */
enum { M_CAP_CUABI, M_CAP_RAW, M_INST_CUABI, M_INST_RAW_SAME, M_INST_RAW_FUNC, M_INST_RAW_KERNEL,
       M_INFO_CALL, M_FIRST_CAP, M_FIRST_INST, M_COUNT };
static const char *m_names[M_COUNT] = {
    "capture, cuabi (100 cuabi_launch)", "capture, raw (100 cuLaunchKernel)",
    "instantiate, cuabi_graph_instantiate", "instantiate, raw, the same CUgraph",
    "instantiate, raw, raw-captured (CUfunction)", "instantiate, raw, raw-captured (CUkernel)",
    "cuStreamGetCaptureInfo in a capture, per call", "first capture of the process (cuabi)",
    "first instantiate of the process (cuabi)",
};

/* Run this program `procs` times (one process each, argument "child") and
 * print the first one's table, each one's making figures and the medians. */
static int run_processes(const char *self, int replays, int rounds, int procs)
{
    double v[M_COUNT][64];
    int got = 0;
    if (procs > 64)
        procs = 64;
    for (int p = 0; p < procs; p++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' %d %d child", self, replays, rounds);
        FILE *f = popen(cmd, "r");
        if (!f)
            return 1;
        char line[1024];
        int ok = 0;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "MAKING", 6) == 0) {
                char *q = line + 6;
                for (int m = 0; m < M_COUNT; m++)
                    v[m][got] = strtod(q, &q);
                ok = 1;
            } else if (p == 0 || strstr(line, "bench_graph:")) {
                fputs(line, stdout);
            }
        }
        int rc = pclose(f);
        if (!ok) {
            if (got == 0 && rc == 0)
                return 0; /* no GPU: the child said so */
            fprintf(stderr, "bench_graph: process %d failed\n", p + 1);
            return 1;
        }
        got++;
    }
    printf("making the 100-node graph, %d processes (each: the median of its rounds), us:\n", got);
    double med[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) {
        printf("  %-46s", m_names[m]);
        for (int p = 0; p < got; p++)
            printf(" %8.2f", v[m][p]);
        med[m] = median(v[m], got);
        printf("  -> median %8.2f\n", med[m]);
    }
    printf("  ratios of the medians: capture cuabi / raw %.3fx; instantiate cuabi / raw of the same "
           "graph %.3fx (target <= 1.10: %s); raw instantiate of cuabi's graph / of the "
           "raw-captured graph %.3fx (CUfunction), %.3fx (CUkernel)\n",
           med[M_CAP_CUABI] / med[M_CAP_RAW], med[M_INST_CUABI] / med[M_INST_RAW_SAME],
           med[M_INST_CUABI] <= 1.10 * med[M_INST_RAW_SAME] ? "met" : "NOT MET",
           med[M_INST_RAW_SAME] / med[M_INST_RAW_FUNC],
           med[M_INST_RAW_KERNEL] > 0 ? med[M_INST_RAW_SAME] / med[M_INST_RAW_KERNEL] : 0.0);
    if (med[M_INST_RAW_KERNEL] == 0)
        printf("  (the CUkernel rows are 0: skipped on a stand-in driver)\n");
    return 0;
}

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
    int child = argc > 3 && strcmp(argv[3], "child") == 0;
    int procs = argc > 3 && !child ? atoi(argv[3]) : 5;
    if (!child && procs > 1)
        return run_processes(argv[0], replays, rounds, procs);
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("bench_graph: no GPU (%s); nothing measured\n",
               ndev == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    const char *stand_in = getenv("CUABI_DRIVER_PATH");
    void *cuda = dlopen(stand_in ? stand_in : "libcuda.so.1", RTLD_NOW);
    launch_fn raw_launch = cuda ? (launch_fn)entry(cuda, "cuLaunchKernel") : NULL;
    begin_fn raw_begin = cuda ? (begin_fn)entry(cuda, "cuStreamBeginCapture") : NULL;
    end_fn raw_end = cuda ? (end_fn)entry(cuda, "cuStreamEndCapture") : NULL;
    inst_fn raw_inst = cuda ? (inst_fn)entry(cuda, "cuGraphInstantiateWithParams") : NULL;
    exec_destroy_fn raw_exec_destroy = cuda ? (exec_destroy_fn)entry(cuda, "cuGraphExecDestroy")
                                            : NULL;
    graph_destroy_fn raw_graph_destroy = cuda ? (graph_destroy_fn)entry(cuda, "cuGraphDestroy")
                                              : NULL;
    info_fn raw_info = cuda ? (info_fn)entry(cuda, "cuStreamGetCaptureInfo") : NULL;
    if (!raw_launch || !raw_begin || !raw_end || !raw_inst || !raw_exec_destroy ||
        !raw_graph_destroy || !raw_info) {
        fprintf(stderr, "bench_graph: cannot find the driver's launch and graph entry points\n");
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

    /* Making it again, interleaved with the raw driver (see the top). */
    uintptr_t raw_kernel = 0;
    CHECK(cuabi_kernel_raw(&raw_kernel, kern));
    int with_kernel = stand_in == NULL; /* the fakes take CUfunctions only */
    enum { MAXR = 64 };
    int nr = rounds < 1 ? 1 : rounds > MAXR ? MAXR : rounds;
    double r_cap[2][MAXR], r_inst[4][MAXR], r_info[MAXR];
    CUstream rs = (CUstream)raw_stream;
#define CU_CHECK(call)                                                                   \
    do {                                                                                 \
        if ((call) != CUDA_SUCCESS) {                                                    \
            fprintf(stderr, "bench_graph: %s failed\n", #call);                          \
            return 1;                                                                    \
        }                                                                                \
    } while (0)
    for (int r = 0; r < nr; r++) {
        cuabi_graph *cg;
        CUgraph fg = NULL, kg = NULL, same;
        t0 = now();
        CHECK(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < KERNELS; i++)
            CHECK(cuabi_launch(kern, pack, &cfg));
        CHECK(cuabi_graph_capture_end(&cg, stream));
        r_cap[0][r] = now() - t0;
        t0 = now();
        CU_CHECK(raw_begin(rs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < KERNELS; i++)
            CU_CHECK(raw_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0, rs, params, NULL));
        CU_CHECK(raw_end(rs, &fg));
        r_cap[1][r] = now() - t0;
        if (with_kernel) {
            CU_CHECK(raw_begin(rs, CU_STREAM_CAPTURE_MODE_GLOBAL));
            for (int i = 0; i < KERNELS; i++)
                CU_CHECK(raw_launch((CUfunction)raw_kernel, 1, 1, 1, 32, 1, 1, 0, rs, params,
                                    NULL));
            CU_CHECK(raw_end(rs, &kg));
        }
        uintptr_t same_raw;
        CHECK(cuabi_graph_raw(&same_raw, cg));
        same = (CUgraph)same_raw;
        /* Instantiate, in an order that turns each round. */
        CUgraphExec ex[4] = { NULL, NULL, NULL, NULL };
        cuabi_graph_exec *cex = NULL;
        for (int j = 0; j < 4; j++) {
            int which = (j + r) % 4;
            CUDA_GRAPH_INSTANTIATE_PARAMS ip;
            memset(&ip, 0, sizeof ip);
            t0 = now();
            if (which == 0)
                CHECK(cuabi_graph_instantiate(&cex, cg, NULL));
            else if (which == 1)
                CU_CHECK(raw_inst(&ex[1], same, &ip));
            else if (which == 2)
                CU_CHECK(raw_inst(&ex[2], fg, &ip));
            else if (with_kernel)
                CU_CHECK(raw_inst(&ex[3], kg, &ip));
            r_inst[which][r] = now() - t0;
        }
        cuabi_graph_exec_release(cex);
        for (int j = 1; j < 4; j++)
            if (ex[j])
                raw_exec_destroy(ex[j]);
        cuabi_graph_release(cg);
        raw_graph_destroy(fg);
        if (kg)
            raw_graph_destroy(kg);
        /* A status query on a capturing stream. */
        CU_CHECK(raw_begin(rs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CUstreamCaptureStatus status;
        cuuint64_t id;
        t0 = now();
        for (int i = 0; i < 1000; i++)
            CU_CHECK(raw_info(rs, &status, &id, NULL, NULL, NULL, NULL));
        r_info[r] = (now() - t0) / 1000;
        CU_CHECK(raw_end(rs, &fg));
        raw_graph_destroy(fg);
    }
    double mk[M_COUNT];
    mk[M_CAP_CUABI] = median(r_cap[0], nr) * 1e6;
    mk[M_CAP_RAW] = median(r_cap[1], nr) * 1e6;
    mk[M_INST_CUABI] = median(r_inst[0], nr) * 1e6;
    mk[M_INST_RAW_SAME] = median(r_inst[1], nr) * 1e6;
    mk[M_INST_RAW_FUNC] = median(r_inst[2], nr) * 1e6;
    mk[M_INST_RAW_KERNEL] = with_kernel ? median(r_inst[3], nr) * 1e6 : 0;
    mk[M_INFO_CALL] = median(r_info, nr) * 1e6;
    mk[M_FIRST_CAP] = t_capture * 1e6;
    mk[M_FIRST_INST] = t_inst * 1e6;
    printf("making it again, %d rounds interleaved with the raw driver, median us:\n", nr);
    for (int m = 0; m < M_FIRST_CAP; m++)
        printf("  %-46s %9.3f\n", m_names[m], mk[m]);
    printf("  instantiate cuabi / raw of the same graph: %.3fx (target <= 1.10: %s)\n",
           mk[M_INST_CUABI] / mk[M_INST_RAW_SAME],
           mk[M_INST_CUABI] <= 1.10 * mk[M_INST_RAW_SAME] ? "met" : "NOT MET");
    if (child) {
        printf("MAKING");
        for (int m = 0; m < M_COUNT; m++)
            printf(" %.3f", mk[m]);
        printf("\n");
    }
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
