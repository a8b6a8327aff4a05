/* Peers on a real multi-GPU host (issue 15): attributes, enable/disable,
 * peer copies of buffers and strided views (checked byte by byte), a kernel
 * on GPU 1 reading and writing GPU 0's memory through peer access, pool
 * memory made accessible from the other GPU, and copy bandwidth (printed,
 * not asserted). Exits 77 without two GPUs. */
#include "testutil.h"

#include <cuda.h>
#include <time.h>

static const char source[] =
    "extern \"C\" __global__ void sum_remote(const unsigned *in, unsigned long long *out, int n) {\n"
    "  unsigned long long acc = 0;\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    acc += in[i];\n"
    "  atomicAdd(out, acc);\n"
    "}\n"
    "extern \"C\" __global__ void fill_remote(unsigned *p, int n, unsigned v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] = v + i;\n"
    "}\n";

static cuabi_device *d0, *d1;
static cuabi_memory_resource *r0, *r1;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&d0, 0));
    ck_assert_ok(cuabi_device_get(&d1, 1));
    ck_assert_ok(cuabi_memory_resource_device_default(&r0, d0));
    ck_assert_ok(cuabi_memory_resource_device_default(&r1, d1));
}
static void teardown(void)
{
    cuabi_memory_resource_release(r0);
    cuabi_memory_resource_release(r1);
    cuabi_device_release(d0);
    cuabi_device_release(d1);
}

static int peer_ok(void)
{
    int a = 0, b = 0;
    ck_assert_ok(cuabi_peer_get_attribute(&a, d1, d0, CUABI_PEER_ACCESS_SUPPORTED));
    ck_assert_ok(cuabi_device_can_access_peer(&b, d1, d0));
    ck_assert_int_eq(a, b);
    return a;
}

START_TEST(attributes_and_enable)
{
    for (int dir = 0; dir < 2; dir++) {
        cuabi_device *a = dir ? d1 : d0, *b = dir ? d0 : d1;
        int v[4];
        for (int at = 1; at <= 4; at++)
            ck_assert_ok(cuabi_peer_get_attribute(&v[at - 1], a, b, (cuabi_peer_attribute)at));
        printf("peer %d -> %d: rank %d, access %d, native atomics %d, arrays %d\n", !dir ? 0 : 1,
               !dir ? 1 : 0, v[0], v[1], v[2], v[3]);
    }
    ck_assert_status(cuabi_peer_enable(d0, d0), CUABI_ERROR_PEER_ACCESS);
    if (!peer_ok()) {
        ck_assert_status(cuabi_peer_enable(d1, d0), CUABI_ERROR_PEER_ACCESS);
        return;
    }
    ck_assert_ok(cuabi_peer_enable(d1, d0));
    ck_assert_ok(cuabi_peer_enable(d1, d0));   /* twice is fine */
    ck_assert_ok(cuabi_peer_disable(d1, d0));
    ck_assert_status(cuabi_peer_disable(d1, d0), CUABI_ERROR_PEER_ACCESS);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}
END_TEST

static cuabi_buffer *alloc(cuabi_memory_resource *r, size_t n)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    return b;
}

START_TEST(copies_between_devices)
{
    enum { N = 1 << 22 };   /* 16 MiB of uint32 */
    uint32_t *in = malloc(N * 4), *out = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++)
        in[i] = i * 2654435761u;
    cuabi_buffer *a = alloc(r0, N * 4), *b = alloc(r1, N * 4);
    ck_assert_ok(cuabi_buffer_copy_from_host(a, 0, in, N * 4, NULL));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 4, N, NULL));
    /* Synchronous, then on a stream of either side, with and without peer access. */
    for (int round = 0; round < 4; round++) {
        if (round == 2 && peer_ok()) {
            ck_assert_ok(cuabi_peer_enable(d0, d1));
            ck_assert_ok(cuabi_peer_enable(d1, d0));
        }
        cuabi_stream *s = NULL;
        if (round % 2)
            ck_assert_ok(cuabi_stream_create(&s, round == 1 ? d0 : d1, NULL));
        ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 4, N, NULL));
        ck_assert_ok(cuabi_peer_copy(b, 4, a, 0, (N - 1) * 4, s));
        if (s) {
            ck_assert_ok(cuabi_stream_synchronize(s));
            ck_assert_ok(cuabi_stream_release(s));
        }
        ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, N * 4, NULL));
        ck_assert_uint_eq(out[0], 0);
        ck_assert_int_eq(memcmp(out + 1, in, (N - 1) * 4), 0);
    }
    if (peer_ok()) {
        ck_assert_ok(cuabi_peer_disable(d0, d1));
        ck_assert_ok(cuabi_peer_disable(d1, d0));
    }
    /* A strided 3-D block of GPU 0's pitched array into a packed one on GPU 1. */
    int64_t shape[3] = { 6, 50, 300 }, src_st[3] = { 64 * 512, 512, 1 };
    cuabi_view *vs, *vd;
    ck_assert_ok(cuabi_view_create(&vs, a, 4 * 17, CUABI_DTYPE_UINT, 32, 3, shape, src_st, 0));
    ck_assert_ok(cuabi_view_create(&vd, b, 0, CUABI_DTYPE_UINT, 32, 3, shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 4, N, NULL));
    ck_assert_ok(cuabi_peer_copy_view(vd, vs, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, 6 * 50 * 300 * 4, NULL));
    for (int z = 0; z < 6; z++)
        for (int y = 0; y < 50; y++)
            for (int x = 0; x < 300; x++)
                ck_assert_uint_eq(out[(z * 50 + y) * 300 + x], in[17 + z * 64 * 512 + y * 512 + x]);
    cuabi_view_release(vs);
    cuabi_view_release(vd);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
    free(in);
    free(out);
}
END_TEST

static cuabi_kernel *kernel(cuabi_objcode **code, const char *name)
{
    cuabi_program *p;
    cuabi_kernel *k;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "peer.cu"));
    ck_assert_ok(cuabi_program_compile(code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k, *code, name));
    return k;
}

/* A kernel on GPU 1 reads GPU 0's buffer through peer access (its sum is
 * checked against the CPU) and writes into it. */
START_TEST(kernel_on_gpu1_uses_gpu0_memory)
{
    if (!peer_ok()) {
        printf("SKIP part: no peer access between GPU 1 and GPU 0\n");
        return;
    }
    enum { N = 1 << 20 };
    uint32_t *in = malloc(N * 4);
    unsigned long long want = 0;
    for (uint32_t i = 0; i < N; i++) {
        in[i] = i % 1000;
        want += in[i];
    }
    cuabi_buffer *remote = alloc(r0, N * 4), *sum = alloc(r1, 8);
    ck_assert_ok(cuabi_buffer_copy_from_host(remote, 0, in, N * 4, NULL));
    ck_assert_ok(cuabi_buffer_memset(sum, 0, 0, 4, 2, NULL));
    /* The default pool's memory needs pool access, not context peer access. */
    ck_assert_ok(cuabi_peer_enable(d1, d0));
    ck_assert_ok(cuabi_peer_set_pool_access(r0, d1, CUABI_PEER_ACCESS_READ_WRITE));
    cuabi_peer_access acc;
    ck_assert_ok(cuabi_peer_get_pool_access(&acc, r0, d1));
    ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
    cuabi_objcode *code;
    cuabi_kernel *k = kernel(&code, "sum_remote");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, remote));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, sum));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, N));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 64;
    c.block[0] = 256;
    c.device = d1;
    ck_assert_ok(cuabi_launch(k, p, &c));
    ck_assert_ok(cuabi_device_synchronize(d1));
    unsigned long long got = 0;
    ck_assert_ok(cuabi_buffer_copy_to_host(&got, sum, 0, 8, NULL));
    ck_assert_uint_eq(got, want);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    /* Writes from GPU 1 into GPU 0's memory. */
    k = kernel(&code, "fill_remote");
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32, u32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, remote));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, N));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, 7));
    ck_assert_ok(cuabi_launch(k, p, &c));
    ck_assert_ok(cuabi_device_synchronize(d1));
    ck_assert_ok(cuabi_buffer_copy_to_host(in, remote, 0, N * 4, NULL));
    for (uint32_t i = 0; i < N; i += 997)
        ck_assert_uint_eq(in[i], 7 + i);
    ck_assert_ok(cuabi_peer_set_pool_access(r0, d1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_peer_disable(d1, d0));
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_buffer_destroy(remote);
    cuabi_buffer_destroy(sum);
    free(in);
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Reported, not asserted (the benchmark bench/bench_peer has the table). */
START_TEST(bandwidth_report)
{
    size_t n = (size_t)256 << 20;
    cuabi_buffer *a = alloc(r0, n), *b = alloc(r1, n);
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, d0, NULL));
    for (int peer = 0; peer < 2; peer++) {
        if (peer && !peer_ok())
            break;
        if (peer) {
            ck_assert_ok(cuabi_peer_enable(d0, d1));
            ck_assert_ok(cuabi_peer_enable(d1, d0));
        }
        ck_assert_ok(cuabi_peer_copy(b, 0, a, 0, n, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        double t0 = now();
        for (int i = 0; i < 5; i++)
            ck_assert_ok(cuabi_peer_copy(b, 0, a, 0, n, s));
        ck_assert_ok(cuabi_stream_synchronize(s));
        double dt = now() - t0;
        printf("peer copy 256 MiB GPU0->GPU1, peer access %s: %.1f GB/s\n", peer ? "on" : "off",
               5.0 * n / dt / 1e9);
    }
    if (peer_ok()) {
        ck_assert_ok(cuabi_peer_disable(d0, d1));
        ck_assert_ok(cuabi_peer_disable(d1, d0));
    }
    cuabi_stream_release(s);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_peer");
    TCase *tc = tcase_create("peer");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, attributes_and_enable);
    tcase_add_test(tc, copies_between_devices);
    tcase_add_test(tc, kernel_on_gpu1_uses_gpu0_memory);
    tcase_add_test(tc, bandwidth_report);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int n = cuabi_test_require_gpu();
    if (n < 2) {
        printf("SKIP: peer tests need two GPUs (%d visible)\n", n);
        return 77;
    }
    return cuabi_test_run(suite());
}
