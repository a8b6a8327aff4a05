/* The C twin of the Rust safe-launch benchmark
 * (bindings/rust/cuabi/examples/bench_launch.rs, issue 28): the same empty
 * kernel `__global__ void k(float *p, int n, float s)` compiled as C++ (its
 * name expression "k"), launched with cuabi_launch(kernel, pack, config) on a
 * created stream, the pack "ptr, i32, f32" made once and pointing at one
 * float of the device's pool. Blocks of launches with the stream drained
 * before each, as the Rust program times them (`bench_launch --only safe` and
 * `--only c` run exactly this structure, one path per process, for the
 * cross-process comparison of bench/bench_rust_launch.sh); prints the best and median
 * block in microseconds per launch and, last, `c median us: X`, which
 * bench/bench_rust_launch.sh collects over processes.
 * Usage: bench_launch_cxx [launches per block (2000)] [blocks (101)].
 * Without a GPU it says so and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuabi.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cuabi_status st__ = (call);                                                          \
        if (st__ != CUABI_SUCCESS) {                                                         \
            fprintf(stderr, "bench_launch_cxx: %s: %s\n", #call, cuabi_last_error()->message); \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000;
    int blocks = argc > 2 ? atoi(argv[2]) : 101;
    if (n < 1) n = 1;
    if (blocks < 1) blocks = 1;
    if (blocks > 100000) blocks = 100000;
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0) {
        printf("bench_launch_cxx: no GPU (%s); nothing measured\n",
               ndev == 0 ? "0 devices" : cuabi_last_error()->message);
        return 0;
    }
    static const char src[] = "__global__ void k(float *p, int n, float s) {}\n";
    const char *exprs[] = { "k" };
    cuabi_device *dev;
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *kern;
    cuabi_stream *stream;
    cuabi_memory_resource *res;
    cuabi_buffer *p;
    cuabi_argpack *pack;
    CHECK(cuabi_device_get(&dev, 0));
    CHECK(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, sizeof src - 1, "empty.cu"));
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = exprs;
    o.num_name_expressions = 1;
    CHECK(cuabi_program_compile(&code, prog, &o));
    CHECK(cuabi_objcode_get_kernel(&kern, code, "k"));
    CHECK(cuabi_stream_create(&stream, dev, NULL));
    CHECK(cuabi_memory_resource_device_default(&res, dev));
    CHECK(cuabi_buffer_allocate(&p, res, sizeof(float), 0, stream));
    uintptr_t addr;
    CHECK(cuabi_buffer_pointer(&addr, p));
    CHECK(cuabi_argpack_create(&pack, "ptr, i32, f32"));
    CHECK(cuabi_argpack_set_pointer(pack, 0, addr));
    CHECK(cuabi_argpack_set_int(pack, 1, 1000));
    CHECK(cuabi_argpack_set_float(pack, 2, 2.0));
    cuabi_launch_config cfg = CUABI_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 32;
    cfg.stream = stream;
    CHECK(cuabi_launch(kern, pack, &cfg)); /* warm up */
    CHECK(cuabi_stream_synchronize(stream));

    double *times = malloc(sizeof(double) * (size_t)blocks);
    if (!times) return 1;
    for (int b = 0; b < blocks; b++) {
        CHECK(cuabi_stream_synchronize(stream));
        double t0 = now();
        for (long i = 0; i < n; i++)
            CHECK(cuabi_launch(kern, pack, &cfg));
        times[b] = (now() - t0) / (double)n * 1e6;
    }
    CHECK(cuabi_stream_synchronize(stream));
    qsort(times, (size_t)blocks, sizeof times[0], cmp_double);
    printf("launch overhead, empty kernel k(float*, int, float) (C++), created stream, "
           "%d blocks of %ld launches\n", blocks, n);
    printf("  %-28s %9.3f best us %9.3f median us\n", "c: cuabi_launch", times[0], times[blocks / 2]);
    printf("c median us: %.4f\n", times[blocks / 2]);
    free(times);
    cuabi_argpack_release(pack);
    cuabi_buffer_destroy(p);
    cuabi_memory_resource_release(res);
    cuabi_stream_release(stream);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
    cuabi_device_release(dev);
    return 0;
}
