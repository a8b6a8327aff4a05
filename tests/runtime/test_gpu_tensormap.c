/* TMA tensor maps on a GPU: a Hopper kernel loads 16 x 32 tiles of a
 * strided view (rows 3..98, columns 4..83 of a 100 x 96 float matrix) with
 * cp.async.bulk.tensor completing on an mbarrier, writes them out, and the
 * result equals the host's slice; the tiles past the view's last column
 * come back zero-filled although memory is there. Then the same map with
 * its address replaced reads another matrix; the real driver accepts every
 * valid combination the checks let through, and the broken rules are named
 * before it is asked. The kernel is compiled with NVRTC for the device (and
 * for sm_90 without a GPU). Exits 77 without a GPU. */
#include "testutil.h"

#include <cuda.h>

#include "tensormap_cases.h"

static const char source[] =
    "/* The CUtensorMap a kernel receives by value (64-byte aligned, 128 bytes). */\n"
    "struct __align__(64) TmaMap { unsigned long long q[16]; };\n"
    "#define TILE_ROWS 16\n"
    "#define TILE_COLS 32\n"
    "/* One block per tile: thread 0 loads the tile at (blockIdx.y * 16,\n"
    " * blockIdx.x * 32) with one bulk tensor copy completing on an mbarrier;\n"
    " * every thread then writes the tile's elements that lie inside the\n"
    " * rows x cols tensor to out (dense, row-major) and counts the non-zero\n"
    " * elements outside it (TMA fills them with zeros) into *oob. */\n"
    "extern \"C\" __global__ void tma_tiles(const __grid_constant__ TmaMap map, float *out, int rows,\n"
    "                                     int cols, unsigned *oob) {\n"
    "  __shared__ __align__(128) float tile[TILE_ROWS * TILE_COLS];\n"
    "  __shared__ __align__(8) unsigned long long bar;\n"
    "  unsigned bar_s = (unsigned)__cvta_generic_to_shared(&bar);\n"
    "  unsigned tile_s = (unsigned)__cvta_generic_to_shared(tile);\n"
    "  int c0 = blockIdx.x * TILE_COLS, r0 = blockIdx.y * TILE_ROWS;\n"
    "  if (threadIdx.x == 0) {\n"
    "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], 1;\" :: \"r\"(bar_s));\n"
    "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
    "  }\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x == 0) {\n"
    "    asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\"\n"
    "                 :: \"r\"(bar_s), \"r\"((unsigned)sizeof tile) : \"memory\");\n"
    "    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes\"\n"
    "                 \" [%0], [%1, {%2, %3}], [%4];\"\n"
    "                 :: \"r\"(tile_s), \"l\"((unsigned long long)&map), \"r\"(c0), \"r\"(r0), \"r\"(bar_s)\n"
    "                 : \"memory\");\n"
    "  }\n"
    "  unsigned done = 0;\n"
    "  while (!done)\n"
    "    asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\"\n"
    "                 \" selp.u32 %0, 1, 0, p; }\" : \"=r\"(done) : \"r\"(bar_s) : \"memory\");\n"
    "  for (int i = threadIdx.x; i < TILE_ROWS * TILE_COLS; i += blockDim.x) {\n"
    "    int r = r0 + i / TILE_COLS, c = c0 + i % TILE_COLS;\n"
    "    if (r < rows && c < cols)\n"
    "      out[r * cols + c] = tile[i];\n"
    "    else if (tile[i] != 0.0f)\n"
    "      atomicAdd(oob, 1u);\n"
    "  }\n"
    "}\n";

enum { ROWS = 100, COLS = 96, VR = 96, VC = 80, R0 = 3, C0 = 4 };

static cuabi_device *dev;
static cuabi_memory_resource *res;
static int cc_major;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_attribute(&cc_major, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    ck_assert_ok(cuabi_memory_resource_device_default(&res, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(res);
    cuabi_device_release(dev);
}

static float value(int sign, int r, int c)
{
    return (float)(sign * (r * 1000 + c));
}

/* A ROWS x COLS matrix of value(sign, r, c) and the view of its rows
 * R0..R0+VR-1, columns C0..C0+VC-1 (row stride COLS floats = 384 bytes). */
static cuabi_buffer *matrix(int sign, cuabi_view **view)
{
    static float host[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            host[r * COLS + c] = value(sign, r, c);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, res, sizeof host, 0, NULL));
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, host, sizeof host, NULL));
    int64_t shape[2] = { VR, VC }, strides[2] = { COLS, 1 };
    ck_assert_ok(cuabi_view_create(view, b, (R0 * COLS + C0) * sizeof(float), CUABI_DTYPE_FLOAT,
                                   32, 2, shape, strides, 0));
    return b;
}

static void run_tiles(cuabi_kernel *k, cuabi_tensormap *tm, int sign)
{
    cuabi_buffer *out, *oob;
    ck_assert_ok(cuabi_buffer_allocate(&out, res, VR * VC * sizeof(float), 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&oob, res, sizeof(unsigned), 0, NULL));
    ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 1, VR * VC * sizeof(float), NULL));
    ck_assert_ok(cuabi_buffer_memset(oob, 0, 0, 1, sizeof(unsigned), NULL));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "tensormap, buffer, i32, i32, buffer"));
    ck_assert_ok(cuabi_argpack_set_tensormap(p, 0, tm));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, out));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, VR));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, VC));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 4, oob));
    ck_assert_ok(cuabi_argpack_check_kernel(p, k));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = (VC + 31) / 32;
    c.grid[1] = VR / 16;
    c.block[0] = 128;
    c.device = dev;
    ck_assert_ok(cuabi_launch(k, p, &c));
    ck_assert_ok(cuabi_device_synchronize(dev));
    static float host[VR * VC];
    unsigned zeros_broken = 99;
    ck_assert_ok(cuabi_buffer_copy_to_host(host, out, 0, sizeof host, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(&zeros_broken, oob, 0, sizeof zeros_broken, NULL));
    for (int r = 0; r < VR; r++)
        for (int col = 0; col < VC; col++)
            if (host[r * VC + col] != value(sign, R0 + r, C0 + col))
                ck_abort_msg("element (%d, %d) of the view: %g from TMA, %g on the host", r, col,
                             (double)host[r * VC + col], (double)value(sign, R0 + r, C0 + col));
    ck_assert_uint_eq(zeros_broken, 0);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(oob);
}

START_TEST(tiles_of_a_strided_view)
{
    cuabi_view *va, *vb;
    cuabi_buffer *a = matrix(1, &va), *b = matrix(-1, &vb);
    uint32_t box[2] = { 16, 32 };
    cuabi_tensormap *tm;
    if (cc_major < 9) {
        ck_assert_status(cuabi_tensormap_encode_tiled(&tm, va, box, 2, NULL), CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("compute capability 9.0");
        printf("tensormap: compute capability %d.x has no TMA; encoding refused as it should\n",
               cc_major);
        goto done;
    }
    cuabi_program *prog;
    cuabi_objcode *code;
    cuabi_kernel *k;
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "tma.cu"));
    ck_assert_ok(cuabi_program_compile(&code, prog, NULL));
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "tma_tiles"));
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, va, box, 2, NULL));
    run_tiles(k, tm, 1);
    /* the same descriptor, pointed at the other matrix */
    ck_assert_ok(cuabi_tensormap_replace_address(tm, vb));
    run_tiles(k, tm, -1);
    printf("tensormap: %d tiles of 16 x 32 floats loaded by cp.async.bulk.tensor match the host, "
           "before and after cuabi_tensormap_replace_address\n", VR / 16 * ((VC + 31) / 32));
    cuabi_tensormap_release(tm);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_program_release(prog);
done:
    cuabi_view_release(va);
    cuabi_view_release(vb);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
}
END_TEST

/* The real driver against cuabi's rules: every combination the checks let
 * through is encoded; the broken ones never reach it. */
START_TEST(the_driver_agrees_with_the_rules)
{
    if (cc_major < 9)
        return;
    cuabi_buffer *buf;
    ck_assert_ok(cuabi_buffer_allocate(&buf, res, 1 << 22, 0, NULL));
    for (size_t i = 0; i < TENSORMAP_NUM_VALID_CASES; i++) {
        const tensormap_case *tc = &tensormap_valid_cases[i];
        cuabi_view *v;
        ck_assert_ok(cuabi_view_create(&v, buf, 0, tc->code, tc->bits, tc->ndim, tc->shape, NULL, 0));
        cuabi_tensormap_options o = tensormap_case_options(tc);
        cuabi_tensormap *tm;
        cuabi_status st = cuabi_tensormap_encode_tiled(&tm, v, tc->box, (size_t)tc->ndim, &o);
        ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", tc->what, cuabi_last_error()->message);
        cuabi_tensormap_release(tm);
        cuabi_view_release(v);
    }
    /* im2col: NHWC half, 3x3 windows with padding 1 */
    int64_t nhwc[4] = { 2, 16, 16, 64 };
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, buf, 0, CUABI_DTYPE_FLOAT, 16, 4, nhwc, NULL, 0));
    int lower[2] = { -1, -1 }, upper[2] = { -1, -1 };
    cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
    o.swizzle = CUABI_TENSORMAP_SWIZZLE_128B;
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_im2col(&tm, v, lower, upper, 2, 64, 128, &o));
    cuabi_tensormap_release(tm);
    /* the three: a misaligned address, a stride not a multiple of 16, a box too large */
    cuabi_view *bad;
    int64_t shape[2] = { 64, 64 }, odd_rows[2] = { 65, 1 };
    uint32_t box[2] = { 8, 8 }, big[2] = { 8, 512 };
    ck_assert_ok(cuabi_view_create(&bad, buf, 4, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, bad, box, 2, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("is not 16-byte aligned");
    cuabi_view_release(bad);
    ck_assert_ok(cuabi_view_create(&bad, buf, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, odd_rows, 0));
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, bad, box, 2, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("stride of 260 bytes, not a multiple of 16");
    cuabi_view_release(bad);
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, big, 2, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("the box has 2 dimensions, the view 4");
    ck_assert_ok(cuabi_view_create(&bad, buf, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, bad, big, 2, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("box[1] = 512; TMA boxes have 1 to 256 elements");
    cuabi_view_release(bad);
    cuabi_view_release(v);
    cuabi_buffer_destroy(buf);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_tensormap");
    TCase *tc = tcase_create("tensormap");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tiles_of_a_strided_view);
    tcase_add_test(tc, the_driver_agrees_with_the_rules);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
