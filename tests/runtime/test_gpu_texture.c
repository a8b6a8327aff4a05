/* Arrays, textures and surfaces on a GPU (the proof: exits 77 without
 * one; stream memory operations are tests/runtime/test_gpu_memop.c's).
 * Kernels compiled with NVRTC, once for the suite:
 *
 *  - copies: host -> array -> buffer -> array -> strided view -> host round
 *    trips of 2-D, 3-D (a view whose slices are not whole rows apart: one
 *    copy per slice), layered and BC1 arrays, on streams and synchronously;
 *  - a 2-D float texture sampled with linear filtering at fractional
 *    coordinates (multiples of 1/4: exact in the hardware's 8-bit weights),
 *    against a host bilinear interpolation with clamp addressing; border
 *    colour and normalized wrap too;
 *  - a surface read and written by a kernel (surf2Dread / surf2Dwrite);
 *  - a layered texture sampled per layer (tex2DLayered);
 *  - a mipmapped lookup: each level filled with its own value, tex2DLod at
 *    whole levels (point) and between two (linear mipmap filter);
 *  - textures over a view in place (tex1Dfetch of linear memory, tex2D of
 *    pitched memory) and an RGBA8 host image made a texture in one call,
 *    read as normalized floats;
 *  - a graph captured with an array copy and a sampling launch, replayed
 *    after the texture, array and staging buffer were released;
 *  - the seed's 14-argument kernel (char, short, int, long long, unsigned,
 *    float, double, a struct, float4, bool, size_t, a texture, a surface and
 *    a pointer) fed through cuabi's own objects, by a typed pack and by a
 *    pack made from the kernel's parameter info. */
#include "testutil.h"

#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

static const char source[] =
    "extern \"C\" __global__ void sample2d(cudaTextureObject_t t, const float2 *pts, float *out,\n"
    "                                      int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = tex2D<float>(t, pts[i].x, pts[i].y);\n"
    "}\n"
    "extern \"C\" __global__ void sample2d4(cudaTextureObject_t t, const float2 *pts, float4 *out,\n"
    "                                       int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = tex2D<float4>(t, pts[i].x, pts[i].y);\n"
    "}\n"
    "extern \"C\" __global__ void fetch1d(cudaTextureObject_t t, float *out, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = tex1Dfetch<float>(t, i);\n"
    "}\n"
    "extern \"C\" __global__ void surf_scale(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w,\n"
    "                                       int h) {\n"
    "  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;\n"
    "  if (x >= w || y >= h) return;\n"
    "  float v;\n"
    "  surf2Dread(&v, in, x * (int)sizeof(float), y);\n"
    "  surf2Dwrite(v * 2.0f + 1.0f, out, x * (int)sizeof(float), y);\n"
    "}\n"
    "extern \"C\" __global__ void sample_layered(cudaTextureObject_t t, float *out, int w, int h) {\n"
    "  int x = threadIdx.x, y = blockIdx.x, l = blockIdx.y;\n"
    "  if (x < w && y < h)\n"
    "    out[(l * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);\n"
    "}\n"
    "extern \"C\" __global__ void sample_lod(cudaTextureObject_t t, const float *lods, float *out,\n"
    "                                       int n) {\n"
    "  int i = threadIdx.x;\n"
    "  if (i < n) out[i] = tex2DLod<float>(t, 0.5f, 0.5f, lods[i]);\n"
    "}\n"
    "struct Pair { int a; float b; };\n"
    "extern \"C\" __global__ void seed14(signed char c, short s, int i, long long ll, unsigned u,\n"
    "                                    float f, double d, Pair p, float4 v, bool flag,\n"
    "                                    unsigned long long sz, cudaTextureObject_t tex,\n"
    "                                    cudaSurfaceObject_t surf, double *out) {\n"
    "  out[0] = c; out[1] = s; out[2] = i; out[3] = (double)ll; out[4] = u; out[5] = f;\n"
    "  out[6] = d; out[7] = p.a; out[8] = p.b; out[9] = v.x + 10 * v.y + 100 * v.z + 1000 * v.w;\n"
    "  out[10] = flag ? 1 : 0; out[11] = (double)sz;\n"
    "  out[12] = tex2D<float>(tex, 2.5f, 1.5f);\n"
    "  float r; surf2Dread(&r, surf, 3 * (int)sizeof(float), 2);\n"
    "  out[13] = r;\n"
    "  surf2Dwrite(-7.5f, surf, 0, 0);\n"
    "}\n";

static cuabi_device *dev;
static cuabi_memory_resource *res;
static cuabi_objcode *code;
static cuabi_stream *s1, *s2;

static cuabi_kernel *kernel(const char *name)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, name));
    return k;
}

/* One NVRTC compile for the suite (one per case made it the slowest GPU
 * suite: over 40 s on an H100). */
static void compile_once(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "tex.cu"));
    cuabi_status st = cuabi_program_compile(&code, p, NULL);
    if (st != CUABI_SUCCESS)
        fprintf(stderr, "%s\n", cuabi_last_error()->log);
    ck_assert_ok(st);
    cuabi_program_release(p);
}

static void release_once(void)
{
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
}

static void setup(void)
{
    ck_assert_ok(cuabi_memory_resource_device_default(&res, dev));
    ck_assert_ok(cuabi_stream_create(&s1, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&s2, dev, NULL));
}

static void teardown(void)
{
    cuabi_stream_release(s2);
    cuabi_stream_release(s1);
    cuabi_memory_resource_release(res);
}

static cuabi_buffer *device_buffer(size_t n)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, res, n, 0, NULL));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, n, NULL));
    return b;
}

static cuabi_buffer *device_copy(const void *host, size_t n)
{
    cuabi_buffer *b = device_buffer(n);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, host, n, NULL));
    return b;
}

static cuabi_array *array_of(size_t w, size_t h, size_t d, cuabi_array_format f, unsigned ch,
                             unsigned flags)
{
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = w, ad.height = h, ad.depth = d, ad.format = f, ad.num_channels = ch;
    ad.flags = flags;
    cuabi_array *a;
    ck_assert_ok(cuabi_array_create(&a, dev, &ad));
    return a;
}

static void launch(cuabi_kernel *k, cuabi_argpack *p, unsigned gx, unsigned gy, unsigned bx,
                   cuabi_stream *s)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = gx, c.grid[1] = gy, c.block[0] = bx;
    c.stream = s;
    c.device = dev;
    ck_assert_ok(cuabi_launch(k, p, &c));
}

static cuabi_view *host_view(void *p, int code_, int bits, int ndim, const int64_t *shape,
                             const int64_t *strides)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = p;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype.code = (uint8_t)code_;
    t.dtype.bits = (uint8_t)bits;
    t.dtype.lanes = 1;
    t.shape = (int64_t *)shape;
    t.strides = (int64_t *)strides;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dltensor(&v, &t, 0));
    return v;
}

/* ------------------------------------------------------------ copies */

START_TEST(copies_round_trip_through_arrays)
{
    enum { W = 37, H = 19, D = 5 };
    static float src[D][H][W], back[D][H][W];
    for (int i = 0; i < D * H * W; i++)
        (&src[0][0][0])[i] = (float)i * 0.5f - 100.0f;
    /* 2-D: host -> array -> buffer (pitched) -> another array -> host. */
    cuabi_array *a = array_of(W, H, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    cuabi_array *b = array_of(W, H, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, src[0], sizeof src[0], 0, 0, NULL));
    cuabi_buffer *buf = device_buffer(256 * H);
    ck_assert_ok(cuabi_array_copy_to_buffer(buf, 0, 256, 0, a, NULL, s1));
    ck_assert_ok(cuabi_array_copy_from_buffer(b, NULL, buf, 0, 256, 0, s1));
    ck_assert_ok(cuabi_stream_synchronize(s1));
    memset(back, 0, sizeof back);
    ck_assert_ok(cuabi_array_copy_to_host(back[0], sizeof back[0], 0, 0, b, NULL, NULL));
    ck_assert_int_eq(memcmp(back[0], src[0], sizeof src[0]), 0);
    /* A region of one array to another place of the other. */
    cuabi_array_region sr = CUABI_ARRAY_REGION_INIT, dr = CUABI_ARRAY_REGION_INIT;
    sr.x = 3, sr.y = 4, sr.width = 10, sr.height = 5;
    dr.x = 20, dr.y = 10;
    ck_assert_ok(cuabi_array_copy(b, &dr, a, &sr, NULL));
    ck_assert_ok(cuabi_array_copy_to_host(back[0], sizeof back[0], 0, 0, b, NULL, NULL));
    ck_assert(back[0][10][20] == src[0][4][3] && back[0][14][29] == src[0][8][12]);
    ck_assert(back[0][9][20] == src[0][9][20]);
    cuabi_buffer_destroy(buf);
    cuabi_array_release(b);
    cuabi_array_release(a);
    /* 3-D through a strided host view whose slices are 1 float more than
     * whole rows apart (one copy per slice), and back through a plain one. */
    a = array_of(W, H, D, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    static float padded[D * (H * (W + 3) + 1)];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                padded[z * (H * (W + 3) + 1) + y * (W + 3) + x] = src[z][y][x];
    int64_t shape[3] = { D, H, W }, strides[3] = { H * (W + 3) + 1, W + 3, 1 };
    cuabi_view *v = host_view(padded, CUABI_DTYPE_FLOAT, 32, 3, shape, strides);
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, v, s2));
    ck_assert_ok(cuabi_stream_synchronize(s2));
    cuabi_view *w = host_view(back, CUABI_DTYPE_FLOAT, 32, 3, shape, NULL);
    memset(back, 0, sizeof back);
    ck_assert_ok(cuabi_array_copy_to_view(w, a, NULL, NULL));
    ck_assert_int_eq(memcmp(back, src, sizeof src), 0);
    cuabi_view_release(w);
    cuabi_view_release(v);
    cuabi_array_release(a);
    /* Layers 1..3 of a layered array, then all of it. */
    a = array_of(W, H, D, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_LAYERED);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, src, sizeof src, 0, 0, NULL));
    cuabi_array_region lr = CUABI_ARRAY_REGION_INIT;
    lr.z = 1, lr.depth = 3;
    static float three[3][H][W];
    ck_assert_ok(cuabi_array_copy_to_host(three, sizeof three, 0, 0, a, &lr, NULL));
    ck_assert_int_eq(memcmp(three, src[1], sizeof three), 0);
    cuabi_array_release(a);
    /* BC1: 4x4 blocks of 8 bytes round trip as bytes. */
    a = array_of(16, 8, 0, CUABI_ARRAY_FORMAT_BC1_UNORM, 4, 0);
    uint8_t blocks[2][4][8], bback[2][4][8];
    for (int i = 0; i < 64; i++)
        (&blocks[0][0][0])[i] = (uint8_t)(i * 5 + 1);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, blocks, sizeof blocks, 0, 0, NULL));
    ck_assert_ok(cuabi_array_copy_to_host(bback, sizeof bback, 0, 0, a, NULL, NULL));
    ck_assert_int_eq(memcmp(blocks, bback, sizeof blocks), 0);
    cuabi_array_release(a);
}
END_TEST

/* ------------------------------------------------------------ sampling */

enum { TW = 16, TH = 8 };
static float tex_value(int x, int y)
{
    return (float)((x * 7 + y * 13) % 23) / 23.0f + (float)y * 0.01f;
}

static float clamped(int x, int y)
{
    x = x < 0 ? 0 : x >= TW ? TW - 1 : x;
    y = y < 0 ? 0 : y >= TH ? TH - 1 : y;
    return tex_value(x, y);
}

/* tex2D's linear filter with clamp addressing: texel centres at i + 0.5. */
static float bilinear(float u, float v)
{
    float xb = u - 0.5f, yb = v - 0.5f;
    int i = (int)floorf(xb), j = (int)floorf(yb);
    float a = xb - (float)i, b = yb - (float)j;
    return (1 - a) * (1 - b) * clamped(i, j) + a * (1 - b) * clamped(i + 1, j) +
           (1 - a) * b * clamped(i, j + 1) + a * b * clamped(i + 1, j + 1);
}

static void sample(cuabi_texture *t, const float (*pts)[2], int n, float *out)
{
    cuabi_buffer *pb = device_copy(pts, sizeof(float) * 2 * (size_t)n);
    cuabi_buffer *ob = device_buffer(sizeof(float) * (size_t)n);
    cuabi_kernel *k = kernel("sample2d");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, pb));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 2, ob));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, n));
    launch(k, p, (unsigned)(n + 127) / 128, 1, 128, s1);
    ck_assert_ok(cuabi_buffer_copy_to_host(out, ob, 0, sizeof(float) * (size_t)n, s1));
    ck_assert_ok(cuabi_stream_synchronize(s1));
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(ob);
    cuabi_buffer_destroy(pb);
}

START_TEST(linear_filtering_matches_the_host)
{
    static float img[TH][TW];
    for (int y = 0; y < TH; y++)
        for (int x = 0; x < TW; x++)
            img[y][x] = tex_value(x, y);
    cuabi_array *a = array_of(TW, TH, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, NULL));
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, &d));
    cuabi_array_release(a);          /* the texture keeps it */
    enum { N = 4 * TW * 4 * TH + 4 };
    static float pts[N][2], got[N];
    int n = 0;
    for (int y = 0; y < 4 * TH; y++)
        for (int x = 0; x < 4 * TW; x++) {
            pts[n][0] = (float)x / 4.0f;
            pts[n][1] = (float)y / 4.0f;
            n++;
        }
    float outside[4][2] = { { -3, -3 }, { TW + 5.0f, 2.25f }, { 4.75f, -1 }, { 100, 100 } };
    for (int i = 0; i < 4; i++, n++)
        pts[n][0] = outside[i][0], pts[n][1] = outside[i][1];
    sample(t, (const float (*)[2])pts, n, got);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float want = bilinear(pts[i][0], pts[i][1]);
        if (fabsf(got[i] - want) > 1e-5f && bad++ < 5)
            fprintf(stderr, "tex2D at (%g, %g): %.7g, host %.7g\n", (double)pts[i][0],
                    (double)pts[i][1], (double)got[i], (double)want);
    }
    ck_assert_int_eq(bad, 0);
    cuabi_texture_release(t);
}
END_TEST

START_TEST(border_colour_and_normalized_wrap)
{
    static float img[TH][TW];
    for (int y = 0; y < TH; y++)
        for (int x = 0; x < TW; x++)
            img[y][x] = tex_value(x, y);
    cuabi_array *a = array_of(TW, TH, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, NULL));
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.address_mode[0] = d.address_mode[1] = CUABI_TEXTURE_ADDRESS_BORDER;
    d.border_color[0] = 0.625f;
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, &d));
    float pts[3][2] = { { -2.5f, 1.5f }, { 3.5f, 2.5f }, { 3.5f, TH + 3.0f } }, got[3];
    sample(t, (const float (*)[2])pts, 3, got);
    ck_assert(got[0] == 0.625f && got[1] == tex_value(3, 2) && got[2] == 0.625f);
    cuabi_texture_release(t);
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.address_mode[0] = d.address_mode[1] = CUABI_TEXTURE_ADDRESS_WRAP;
    d.normalized_coords = 1;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, &d));
    /* Texel (3, 2) at its centre, and one period further along x and back along y. */
    float u = 3.5f / TW, v = 2.5f / TH;
    float wp[3][2] = { { u, v }, { u + 1.0f, v }, { u, v - 2.0f } }, wg[3];
    sample(t, (const float (*)[2])wp, 3, wg);
    ck_assert(wg[0] == tex_value(3, 2) && wg[1] == wg[0] && wg[2] == wg[0]);
    cuabi_texture_release(t);
    cuabi_array_release(a);
}
END_TEST

START_TEST(surfaces_read_and_write)
{
    enum { W = 40, H = 9 };
    static float img[H][W], back[H][W];
    for (int i = 0; i < W * H; i++)
        (&img[0][0])[i] = (float)i - 7.0f;
    cuabi_array *in = array_of(W, H, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    cuabi_array *out = array_of(W, H, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    ck_assert_ok(cuabi_array_copy_from_host(in, NULL, img, sizeof img, 0, 0, NULL));
    cuabi_surface *si, *so;
    ck_assert_ok(cuabi_surface_create(&si, in));
    ck_assert_ok(cuabi_surface_create(&so, out));
    cuabi_kernel *k = kernel("surf_scale");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, handle, i32, i32"));
    ck_assert_ok(cuabi_argpack_set_surface(p, 0, si));
    ck_assert_ok(cuabi_argpack_set_surface(p, 1, so));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, W));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, H));
    launch(k, p, 1, H, 64, s1);
    ck_assert_ok(cuabi_stream_synchronize(s1));
    ck_assert_ok(cuabi_array_copy_to_host(back, sizeof back, 0, 0, out, NULL, NULL));
    for (int i = 0; i < W * H; i++)
        ck_assert((&back[0][0])[i] == (&img[0][0])[i] * 2.0f + 1.0f);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_surface_release(so);
    cuabi_surface_release(si);
    cuabi_array_release(out);
    cuabi_array_release(in);
}
END_TEST

START_TEST(a_layered_texture)
{
    enum { W = 12, H = 6, L = 5 };
    static float img[L][H][W], back[L][H][W];
    for (int l = 0; l < L; l++)
        for (int i = 0; i < W * H; i++)
            (&img[l][0][0])[i] = (float)(l * 1000 + i);
    int64_t shape[3] = { L, H, W };
    cuabi_view *v = host_view(img, CUABI_DTYPE_FLOAT, 32, 3, shape, NULL);
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_image(&t, v, 1, CUABI_ARRAY_LAYERED, NULL, NULL));
    cuabi_view_release(v);
    cuabi_buffer *ob = device_buffer(sizeof back);
    cuabi_kernel *k = kernel("sample_layered");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, buffer, i32, i32"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, ob));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, W));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, H));
    launch(k, p, H, L, 32, s1);
    ck_assert_ok(cuabi_buffer_copy_to_host(back, ob, 0, sizeof back, s1));
    ck_assert_ok(cuabi_stream_synchronize(s1));
    ck_assert_int_eq(memcmp(back, img, sizeof img), 0);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(ob);
    cuabi_texture_release(t);
}
END_TEST

START_TEST(a_mipmapped_lookup)
{
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = 64, ad.height = 32, ad.format = CUABI_ARRAY_FORMAT_FLOAT32;
    cuabi_mipmapped_array *m;
    ck_assert_ok(cuabi_mipmapped_array_create(&m, dev, &ad, 6));
    static float fill[64 * 32];
    for (unsigned l = 0; l < 6; l++) {
        cuabi_array *lv;
        ck_assert_ok(cuabi_mipmapped_array_get_level(&lv, m, l));
        cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
        ck_assert_ok(cuabi_array_get_info(&info, lv));
        ck_assert_uint_eq(info.width, 64u >> l);
        ck_assert_uint_eq(info.height, 32u >> l > 0 ? 32u >> l : 1);
        for (size_t i = 0; i < info.width * info.height; i++)
            fill[i] = (float)(l + 1);
        ck_assert_ok(cuabi_array_copy_from_host(lv, NULL, fill, info.size_bytes, 0, 0, NULL));
        cuabi_array_release(lv);
    }
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.normalized_coords = 1;
    d.max_mipmap_level_clamp = 5.0f;
    cuabi_texture *pt, *lt;
    ck_assert_ok(cuabi_texture_create_from_mipmapped_array(&pt, m, &d));
    d.mipmap_filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    ck_assert_ok(cuabi_texture_create_from_mipmapped_array(&lt, m, &d));
    cuabi_mipmapped_array_release(m);
    float lods[8] = { 0, 1, 2, 3, 4, 5, 0.5f, 2.25f };
    cuabi_buffer *lb = device_copy(lods, sizeof lods), *ob = device_buffer(sizeof lods);
    cuabi_kernel *k = kernel("sample_lod");
    float got[8];
    for (int pass = 0; pass < 2; pass++) {
        cuabi_argpack *p;
        ck_assert_ok(cuabi_argpack_create(&p, "handle, buffer, buffer, i32"));
        ck_assert_ok(cuabi_argpack_set_texture(p, 0, pass ? lt : pt));
        ck_assert_ok(cuabi_argpack_set_buffer(p, 1, lb));
        ck_assert_ok(cuabi_argpack_set_buffer(p, 2, ob));
        ck_assert_ok(cuabi_argpack_set_int(p, 3, 8));
        launch(k, p, 1, 1, 32, NULL);
        ck_assert_ok(cuabi_buffer_copy_to_host(got, ob, 0, sizeof got, NULL));
        for (int i = 0; i < 6; i++)
            ck_assert_msg(got[i] == (float)(i + 1), "level %d read %g", i, (double)got[i]);
        if (pass) {
            ck_assert_msg(fabsf(got[6] - 1.5f) < 1e-6f, "lod 0.5 read %g", (double)got[6]);
            ck_assert_msg(fabsf(got[7] - 3.25f) < 1e-6f, "lod 2.25 read %g", (double)got[7]);
        } else {
            ck_assert(got[6] == 1.0f || got[6] == 2.0f);   /* nearest level */
        }
        cuabi_argpack_release(p);
    }
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(ob);
    cuabi_buffer_destroy(lb);
    cuabi_texture_release(lt);
    cuabi_texture_release(pt);
}
END_TEST

/* ------------------------------------------------------------ views, images */

START_TEST(textures_over_views_in_place)
{
    int align = 0, pitch_align = 0;
    ck_assert_ok(cuabi_device_attribute(&align, dev, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT));
    ck_assert_ok(cuabi_device_attribute(&pitch_align, dev, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT));
    ck_assert_int_gt(align, 0);
    enum { N = 1000 };
    static float lin[N], got[N];
    for (int i = 0; i < N; i++)
        lin[i] = (float)i * 0.25f;
    cuabi_buffer *b = device_buffer(N * sizeof(float) + (size_t)align);
    uintptr_t base;
    ck_assert_ok(cuabi_buffer_pointer(&base, b));
    size_t off = (size_t)((align - (int)(base % (uintptr_t)align)) % align);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, off, lin, sizeof lin, NULL));
    int64_t shape[1] = { N };
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, b, off, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_view(&t, v, 1, NULL));
    cuabi_view_release(v);
    cuabi_buffer_destroy(b);          /* the texture keeps the memory */
    cuabi_buffer *ob = device_buffer(sizeof got);
    cuabi_kernel *k = kernel("fetch1d");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, ob));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, N));
    launch(k, p, (N + 255) / 256, 1, 256, NULL);
    ck_assert_ok(cuabi_buffer_copy_to_host(got, ob, 0, sizeof got, NULL));
    ck_assert_int_eq(memcmp(got, lin, sizeof lin), 0);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(ob);
    cuabi_texture_release(t);
    /* Pitched: a TW x TH view in rows padded to the pitch alignment. */
    size_t pitch = ((TW * sizeof(float) + (size_t)pitch_align - 1) / (size_t)pitch_align) *
                   (size_t)pitch_align;
    b = device_buffer(pitch * TH + (size_t)align);
    ck_assert_ok(cuabi_buffer_pointer(&base, b));
    off = (size_t)((align - (int)(base % (uintptr_t)align)) % align);
    for (int y = 0; y < TH; y++) {
        float row[TW];
        for (int x = 0; x < TW; x++)
            row[x] = tex_value(x, y);
        ck_assert_ok(cuabi_buffer_copy_from_host(b, off + (size_t)y * pitch, row, sizeof row, NULL));
    }
    int64_t sh2[2] = { TH, TW }, st2[2] = { (int64_t)(pitch / sizeof(float)), 1 };
    ck_assert_ok(cuabi_view_create(&v, b, off, CUABI_DTYPE_FLOAT, 32, 2, sh2, st2, 0));
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    ck_assert_ok(cuabi_texture_create_from_view(&t, v, 1, &d));
    cuabi_view_release(v);
    cuabi_buffer_destroy(b);
    float pts[3][2] = { { 3.5f, 2.5f }, { 4.0f, 2.5f }, { 7.25f, 5.75f } }, g3[3];
    sample(t, (const float (*)[2])pts, 3, g3);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabsf(g3[i] - bilinear(pts[i][0], pts[i][1])) <= 1e-5f, "pitched (%g, %g): %g",
                      (double)pts[i][0], (double)pts[i][1], (double)g3[i]);
    cuabi_texture_release(t);
}
END_TEST

START_TEST(an_rgba8_image_becomes_a_texture_in_one_call)
{
    enum { W = 9, H = 7 };
    static uint8_t img[H][W][4];
    for (int i = 0; i < W * H * 4; i++)
        (&img[0][0][0])[i] = (uint8_t)(i * 37);
    int64_t shape[3] = { H, W, 4 };
    cuabi_view *v = host_view(img, CUABI_DTYPE_UINT, 8, 3, shape, NULL);
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.read_mode = CUABI_TEXTURE_READ_NORMALIZED_FLOAT;
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_image(&t, v, 4, 0, &d, NULL));
    cuabi_view_release(v);
    static float pts[W * H][2];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            pts[y * W + x][0] = (float)x + 0.5f, pts[y * W + x][1] = (float)y + 0.5f;
    cuabi_buffer *pb = device_copy(pts, sizeof pts), *ob = device_buffer(sizeof(float) * 4 * W * H);
    cuabi_kernel *k = kernel("sample2d4");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, pb));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 2, ob));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, W * H));
    launch(k, p, 1, 1, 128, NULL);
    static float got[H][W][4];
    ck_assert_ok(cuabi_buffer_copy_to_host(got, ob, 0, sizeof got, NULL));
    for (int i = 0; i < W * H * 4; i++)
        ck_assert_msg(fabsf((&got[0][0][0])[i] - (float)(&img[0][0][0])[i] / 255.0f) < 1e-6f,
                      "channel %d: %g", i, (double)(&got[0][0][0])[i]);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(ob);
    cuabi_buffer_destroy(pb);
    cuabi_texture_release(t);
}
END_TEST

/* ------------------------------------------------------------ in a graph */

START_TEST(a_captured_graph_copies_and_samples)
{
    static float img[TH][TW];
    for (int y = 0; y < TH; y++)
        for (int x = 0; x < TW; x++)
            img[y][x] = tex_value(x, y);
    cuabi_buffer *staging = device_copy(img, sizeof img);
    cuabi_array *a = array_of(TW, TH, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, NULL));
    float pts[2][2] = { { 3.5f, 2.5f }, { 15.5f, 7.5f } };
    cuabi_buffer *pb = device_copy(pts, sizeof pts), *ob = device_buffer(sizeof(float) * 2);
    cuabi_kernel *k = kernel("sample2d");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, pb));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 2, ob));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, 2));
    ck_assert_ok(cuabi_graph_capture_begin(s1, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_array_copy_from_buffer(a, NULL, staging, 0, 0, 0, s1));
    launch(k, p, 1, 1, 32, s1);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, s1));
    /* Everything it uses is the graph's now. */
    cuabi_texture_release(t);
    cuabi_array_release(a);
    cuabi_buffer_destroy(staging);
    cuabi_argpack_release(p);
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    for (int rep = 0; rep < 2; rep++) {
        ck_assert_ok(cuabi_buffer_memset(ob, 0, 0, 1, sizeof(float) * 2, s1));
        ck_assert_ok(cuabi_graph_exec_launch(e, s1));
        ck_assert_ok(cuabi_stream_synchronize(s1));
        float got[2];
        ck_assert_ok(cuabi_buffer_copy_to_host(got, ob, 0, sizeof got, NULL));
        ck_assert(got[0] == tex_value(3, 2) && got[1] == tex_value(15, 7));
    }
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(ob);
    cuabi_buffer_destroy(pb);
}
END_TEST

/* ------------------------------------------------------------ the seed's kernel */

static void check_seed(const double *o, float at_21, float at_12)
{
    const double want[12] = { -5, -300, 70000, 1e12, 4000000000.0, 1.5, -2.25, 17, 0.5, 4321,
                              1, 123456789012.0 };
    for (int i = 0; i < 12; i++)
        ck_assert_msg(o[i] == want[i], "argument %d reached the kernel as %.17g, not %.17g", i,
                      o[i], want[i]);
    ck_assert_msg(o[12] == at_21, "the texture read %g", o[12]);
    ck_assert_msg(o[13] == at_12, "the surface read %g", o[13]);
}

START_TEST(the_seed_14_argument_kernel_takes_cuabi_textures_and_surfaces)
{
    enum { W = 8, H = 4 };
    float img[H][W];
    for (int i = 0; i < W * H; i++)
        (&img[0][0])[i] = (float)i * 1.25f;
    cuabi_array *a = array_of(W, H, 0, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, NULL));
    cuabi_texture *t;
    cuabi_surface *s;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, NULL));
    ck_assert_ok(cuabi_surface_create(&s, a));
    cuabi_buffer *out = device_buffer(14 * sizeof(double));
    cuabi_kernel *k = kernel("seed14");
    struct { int32_t a; float b; } pair = { 17, 0.5f };
    float v4[4] = { 1, 2, 3, 4 };
    /* A typed pack, and one made from the kernel's parameter info (where
     * the texture and surface are PTX .u64 parameters). */
    cuabi_argpack *packs[2];
    ck_assert_ok(cuabi_argpack_create(&packs[0], "i8, i16, i32, i64, u32, f32, f64, "
                                      "struct{i32, f32}, float4, bool, u64, handle, handle, buffer"));
    ck_assert_ok(cuabi_argpack_create_for_kernel(&packs[1], k));
    for (int pi = 0; pi < 2; pi++) {
        cuabi_argpack *p = packs[pi];
        size_t n;
        ck_assert_ok(cuabi_argpack_count(&n, p));
        ck_assert_uint_eq(n, 14);
        ck_assert_ok(cuabi_argpack_set_int(p, 0, -5));
        ck_assert_ok(cuabi_argpack_set_int(p, 1, -300));
        ck_assert_ok(cuabi_argpack_set_int(p, 2, 70000));
        ck_assert_ok(cuabi_argpack_set_int(p, 3, 1000000000000LL));
        ck_assert_ok(cuabi_argpack_set_uint(p, 4, 4000000000u));
        ck_assert_ok(cuabi_argpack_set_float(p, 5, 1.5));
        ck_assert_ok(cuabi_argpack_set_float(p, 6, -2.25));
        ck_assert_ok(cuabi_argpack_set_bytes(p, 7, &pair, sizeof pair));
        ck_assert_ok(cuabi_argpack_set_bytes(p, 8, v4, sizeof v4));
        ck_assert_ok(cuabi_argpack_set_int(p, 9, 1));
        ck_assert_ok(cuabi_argpack_set_uint(p, 10, 123456789012ull));
        ck_assert_ok(cuabi_argpack_set_texture(p, 11, t));
        ck_assert_ok(cuabi_argpack_set_surface(p, 12, s));
        ck_assert_ok(cuabi_argpack_set_buffer(p, 13, out));
        ck_assert_ok(cuabi_argpack_check_kernel(p, k));
        launch(k, p, 1, 1, 1, s1);
        double o[14];
        ck_assert_ok(cuabi_buffer_copy_to_host(o, out, 0, sizeof o, s1));
        ck_assert_ok(cuabi_stream_synchronize(s1));
        /* The surface wrote -7.5 at (0, 0) the first time. */
        check_seed(o, img[1][2], img[2][3]);
        float first;
        cuabi_array_region r = CUABI_ARRAY_REGION_INIT;
        r.width = r.height = 1;
        ck_assert_ok(cuabi_array_copy_to_host(&first, sizeof first, 0, 0, a, &r, NULL));
        ck_assert(first == -7.5f);
    }
    /* Released objects fail the launch instead of reaching the kernel. */
    cuabi_texture_release(t);
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.stream = s1;
    ck_assert_status(cuabi_launch(k, packs[0], &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("texture");
    cuabi_argpack_release(packs[1]);
    cuabi_argpack_release(packs[0]);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(out);
    cuabi_surface_release(s);
    cuabi_array_release(a);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_texture");
    TCase *tc = tcase_create("texture");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, compile_once, release_once);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, copies_round_trip_through_arrays);
    tcase_add_test(tc, linear_filtering_matches_the_host);
    tcase_add_test(tc, border_colour_and_normalized_wrap);
    tcase_add_test(tc, surfaces_read_and_write);
    tcase_add_test(tc, a_layered_texture);
    tcase_add_test(tc, a_mipmapped_lookup);
    tcase_add_test(tc, textures_over_views_in_place);
    tcase_add_test(tc, an_rgba8_image_becomes_a_texture_in_one_call);
    tcase_add_test(tc, a_captured_graph_copies_and_samples);
    tcase_add_test(tc, the_seed_14_argument_kernel_takes_cuabi_textures_and_surfaces);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
