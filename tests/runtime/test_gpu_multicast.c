/* Multicast objects on a real 2-GPU host (issue 25 item 5; nvidia-h100-x2
 * has CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 1): granularities
 * (printed), an object for GPUs 0 and 1 with its size rounded up and said,
 * each GPU binding memory of its own (GPU 0 a VMM chunk by handle, GPU 1 a
 * VMM buffer by address, in two halves), the object mapped; then through
 * the multicast address: a kernel's multimem.st on GPU 0 lands in both
 * GPUs' memory; multimem.red.add from kernels on both GPUs adds on both;
 * multimem.ld_reduce.add on GPU 1 reads the sum of both GPUs' values.
 * Every figure is checked on each GPU's own buffer. Then unbinding one GPU,
 * binding a fresh buffer in its place and storing again; the refusals the
 * real driver leaves to cuabi (a chunk boundary, offsets off the
 * granularity, a device outside the team); releasing in every order.
 * Exits 77 with fewer than two GPUs or without multicast, saying which. */
#include "testutil.h"

#include <stdbool.h>

static const char source[] =
    "extern \"C\" __global__ void mc_store(unsigned long long mc, int n, unsigned v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "    unsigned *p = (unsigned *)mc + i;\n"
    "    unsigned x = v + i;\n"
    "    asm volatile(\"multimem.st.relaxed.sys.global.u32 [%0], %1;\" :: \"l\"(p), \"r\"(x)\n"
    "                 : \"memory\");\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void mc_add(unsigned long long mc, int n, unsigned v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "    unsigned *p = (unsigned *)mc + i;\n"
    "    asm volatile(\"multimem.red.relaxed.sys.global.add.u32 [%0], %1;\" :: \"l\"(p), \"r\"(v)\n"
    "                 : \"memory\");\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void mc_sum(unsigned long long mc, int n, unsigned *out) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "    unsigned *p = (unsigned *)mc + i;\n"
    "    unsigned r;\n"
    "    asm volatile(\"multimem.ld_reduce.relaxed.sys.global.add.u32 %0, [%1];\" : \"=r\"(r)\n"
    "                 : \"l\"(p) : \"memory\");\n"
    "    out[i] = r;\n"
    "  }\n"
    "}\n";

static cuabi_device *d[2];
static cuabi_memory_resource *v[2];
static size_t gran;

static void setup(void)
{
    for (int i = 0; i < 2; i++) {
        ck_assert_ok(cuabi_device_get(&d[i], i));
        cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
        o.handle_type = CUABI_VMM_HANDLE_NONE;
        o.reserve_size = 64u << 20;
        ck_assert_ok(cuabi_vmm_resource_create(&v[i], d[i], &o));
    }
    ck_assert_ok(cuabi_multicast_granularity(&gran, 2, 1, 0));
}
static void teardown(void)
{
    for (int i = 0; i < 2; i++) {
        cuabi_memory_resource_release(v[i]);
        cuabi_device_release(d[i]);
    }
}

/* kernel `name` on device `dev` with (mc, n, third) */
static void run(int dev, const char *name, uintptr_t mc, size_t n, uint64_t third, bool ptr)
{
    cuabi_program *p;
    cuabi_objcode *code;
    cuabi_kernel *k;
    ck_assert_ok(cuabi_device_set_current(d[dev]));
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1,
                                      "multicast.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, name));
    cuabi_argpack *a;
    ck_assert_ok(cuabi_argpack_create(&a, ptr ? "u64, i32, ptr" : "u64, i32, u32"));
    ck_assert_ok(cuabi_argpack_set_uint(a, 0, mc));
    ck_assert_ok(cuabi_argpack_set_int(a, 1, (int64_t)n));
    if (ptr)
        ck_assert_ok(cuabi_argpack_set_pointer(a, 2, third));
    else
        ck_assert_ok(cuabi_argpack_set_uint(a, 2, third));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 64;
    c.block[0] = 256;
    c.device = d[dev];
    ck_assert_ok(cuabi_launch(k, a, &c));
    ck_assert_ok(cuabi_device_synchronize(d[dev]));
    cuabi_argpack_release(a);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
}

/* every word i of b (n words) is base + i * step */
static void expect(cuabi_buffer *b, size_t n, uint32_t base, uint32_t step, const char *what)
{
    uint32_t *h = malloc(n * 4);
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, 0, n * 4, NULL));
    for (size_t i = 0; i < n; i++)
        if (h[i] != (uint32_t)(base + i * step))
            ck_abort_msg("%s: word %zu is %u, expected %u", what, i, h[i],
                         (uint32_t)(base + i * step));
    free(h);
}

static void put(cuabi_buffer *b, size_t n, uint32_t base, uint32_t step)
{
    uint32_t *h = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint32_t)(base + i * step);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, h, n * 4, NULL));
    free(h);
}

START_TEST(stores_reductions_and_loads_reach_both_gpus)
{
    size_t rec;
    ck_assert_ok(cuabi_multicast_granularity(&rec, 2, 1, 1));
    printf("multicast granularity for 2 GPUs: minimum %zu, recommended %zu\n", gran, rec);
    ck_assert_uint_gt(gran, 0);
    ck_assert_uint_ge(rec, gran);
    cuabi_multicast *m;
    ck_assert_ok(cuabi_multicast_create(&m, d, 2, gran + 1, CUABI_VMM_HANDLE_NONE));
    size_t size;
    ck_assert_ok(cuabi_multicast_size(&size, m));
    ck_assert_uint_eq(size, 2 * gran);                  /* rounded up, and said */
    cuabi_buffer *b0, *b1;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b0, v[0], size, 0));
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b1, v[1], size, 0));
    ck_assert_ok(cuabi_multicast_bind_memory(m, 0, b0, 0, size));
    ck_assert_ok(cuabi_multicast_bind_buffer(m, 0, b1, 0, gran));
    ck_assert_ok(cuabi_multicast_bind_buffer(m, gran, b1, gran, gran));
    cuabi_buffer *mc;
    ck_assert_ok(cuabi_multicast_map(&mc, m));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, mc));
    size_t n = size / 4;
    /* a store from GPU 0 reaches both */
    run(0, "mc_store", p, n, 1000, false);
    expect(b0, n, 1000, 1, "GPU 0 after GPU 0's multimem.st");
    expect(b1, n, 1000, 1, "GPU 1 after GPU 0's multimem.st");
    /* reductions from both GPUs add on both: +3 and +5 */
    run(0, "mc_add", p, n, 3, false);
    run(1, "mc_add", p, n, 5, false);
    expect(b0, n, 1008, 1, "GPU 0 after both GPUs' multimem.red.add");
    expect(b1, n, 1008, 1, "GPU 1 after both GPUs' multimem.red.add");
    /* different values on each side; GPU 1 reads their sum through the object */
    put(b0, n, 7, 2);
    put(b1, n, 100, 3);
    cuabi_memory_resource *pool1;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool1, d[1]));
    cuabi_buffer *out;
    ck_assert_ok(cuabi_buffer_allocate(&out, pool1, size, 0, NULL));
    uintptr_t op;
    ck_assert_ok(cuabi_buffer_pointer(&op, out));
    run(1, "mc_sum", p, n, op, true);
    expect(out, n, 107, 5, "multimem.ld_reduce.add on GPU 1");
    expect(b0, n, 7, 2, "GPU 0 unchanged by the load");
    /* unbind GPU 1, bind a fresh buffer in its place, store again */
    ck_assert_ok(cuabi_multicast_unbind(m, d[1], 0));
    ck_assert_ok(cuabi_multicast_unbind(m, d[1], gran));
    ck_assert_status(cuabi_multicast_unbind(m, d[1], 0), CUABI_ERROR_NOT_FOUND);
    cuabi_buffer *b2;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b2, v[1], size, 0));
    put(b2, n, 0, 0);
    ck_assert_ok(cuabi_multicast_bind_memory(m, 0, b2, 0, size));
    run(0, "mc_store", p, n, 50, false);
    expect(b0, n, 50, 1, "GPU 0 after the rebinding");
    expect(b2, n, 50, 1, "GPU 1's new buffer after the rebinding");
    expect(b1, n, 100, 3, "GPU 1's old buffer, unbound, untouched");
    /* bound buffers' memory outlives their handles; the mapping outlives the handle */
    ck_assert_ok(cuabi_buffer_destroy(b0));
    ck_assert_ok(cuabi_buffer_destroy(b2));
    ck_assert_ok(cuabi_multicast_release(m));
    run(1, "mc_add", p, n, 1, false);               /* still bound, still mapped */
    ck_assert_ok(cuabi_buffer_destroy(mc));         /* the last: unbinds and releases */
    ck_assert_ok(cuabi_buffer_destroy(out));
    ck_assert_ok(cuabi_buffer_destroy(b1));
    ck_assert_ok(cuabi_memory_resource_release(pool1));
}
END_TEST

START_TEST(refusals_on_the_real_driver)
{
    /* U: a unit both the VMM chunks and the multicast bindings align to */
    size_t vg;
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    ck_assert_ok(cuabi_vmm_granularity(&vg, d[0], &o));
    const size_t U = vg > gran ? vg : gran;
    cuabi_multicast *m;
    ck_assert_ok(cuabi_multicast_create(&m, d, 2, 4 * U, CUABI_VMM_HANDLE_NONE));
    cuabi_buffer *b0;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b0, v[0], U, 8 * U));
    ck_assert_ok(cuabi_vmm_buffer_resize(b0, 3 * U, NULL));   /* chunks [0,U) [U,3U) */
    ck_assert_status(cuabi_multicast_bind_memory(m, 0, b0, 0, 2 * U),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("one physical chunk");
    ck_assert_status(cuabi_multicast_bind_memory(m, 1, b0, 0, U), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("granularity");
    ck_assert_status(cuabi_multicast_bind_buffer(m, 4 * U, b0, 0, U),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the multicast object");
    /* by address, within the second chunk */
    ck_assert_ok(cuabi_multicast_bind_buffer(m, 0, b0, U, U));
    ck_assert_ok(cuabi_multicast_unbind(m, d[0], 0));
    /* a team of one GPU: the other's buffer is refused. The driver itself
     * may refuse a team of one: two H200s (driver 580.159.04, 2026-11-28,
     * scripts/probe_multicast_solo.c) answer CUDA_ERROR_INVALID_VALUE to
     * numDevices 1 at every size and handle type, and make teams of two.
     * Then cuabi must say so with the driver's result (the bind check is the
     * fake driver's test, test_multicast). */
    cuabi_multicast *solo = NULL;
    cuabi_status solo_st = cuabi_multicast_create(&solo, d, 1, gran, CUABI_VMM_HANDLE_NONE);
    if (solo_st != CUABI_SUCCESS) {
        ck_assert_int_eq(solo_st, CUABI_ERROR_CUDA);
        ck_assert_int_eq(cuabi_last_error()->cu_result, 1);   /* CUDA_ERROR_INVALID_VALUE */
        ck_assert_error_mentions("cuMulticastCreate");
        ck_assert_ptr_null(solo);
    }
    cuabi_buffer *b1;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b1, v[1], gran, 0));
    if (solo) {
        ck_assert_status(cuabi_multicast_bind_memory(solo, 0, b1, 0, gran),
                         CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions("not in the multicast team");
    }
    cuabi_device *twice[2] = { d[0], d[0] };
    cuabi_multicast *bad = NULL;
    ck_assert_status(cuabi_multicast_create(&bad, twice, 2, gran, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(bad);
    /* the object released while bound: it unbinds first */
    ck_assert_ok(cuabi_multicast_bind_memory(m, 0, b0, 0, U));
    ck_assert_ok(cuabi_multicast_release(m));
    if (solo)
        ck_assert_ok(cuabi_multicast_release(solo));
    ck_assert_ok(cuabi_buffer_destroy(b0));
    ck_assert_ok(cuabi_buffer_destroy(b1));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_multicast");
    TCase *tc = tcase_create("multicast");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, stores_reductions_and_loads_reach_both_gpus);
    tcase_add_test(tc, refusals_on_the_real_driver);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int n = cuabi_test_require_gpu();
    if (n < 2) {
        printf("SKIP: multicast tests need two GPUs (%d visible); run on nvidia-h100-x2\n", n);
        return 77;
    }
    for (int i = 0; i < 2; i++) {
        cuabi_device *dev;
        int yes = 0;
        if (cuabi_device_get(&dev, i) != CUABI_SUCCESS ||
            cuabi_multicast_supported(&yes, dev) != CUABI_SUCCESS || !yes) {
            printf("SKIP: GPU %d has no multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is "
                   "0)\n", i);
            return 77;
        }
        cuabi_device_release(dev);
    }
    return cuabi_test_run(suite());
}
