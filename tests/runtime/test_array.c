/* CUDA arrays against the fake driver (tests/fixtures/fake_texture.h): every
 * kind of array and its description's rules, copies from and to host
 * memory, buffers and strided views (regions, pitches, rows, channels,
 * slices copied one by one), between arrays, block-compressed formats,
 * mipmapped arrays and their levels, arrays made from views, streams and
 * synchronous copies, copies captured into a graph (which keeps the array
 * and the buffer alive), releases during a capture, driver failures and
 * bad handles. Fake arrays are host memory, read back directly. */
#include "testutil.h"
#include "fake_texture.h"
#include "runtime/capture.h"

static cuabi_device *dev, *dev1;
static cuabi_stream *stream, *stream1;
static cuabi_memory_resource *pool, *host;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_texture_install();
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&stream1, dev1, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    ck_assert_ok(cuabi_memory_resource_host(&host));
}

static void teardown(void)
{
    cuabi_memory_resource_release(host);
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(stream1);
    cuabi_stream_release(stream);
    cuabi_device_release(dev1);
    cuabi_device_release(dev);
    ck_assert_msg(cuabi__handle_live_count() == 0, "%zu handles leaked",
                  cuabi__handle_live_count());
    ck_assert_int_eq(fake_live_arrays, 0);
    ck_assert_int_eq(fake_live_mipmaps, 0);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_int_eq(fake_live_graphs, 0);
    ck_assert_int_eq(fake_live_execs, 0);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* ------------------------------------------------------------ helpers */

static cuabi_array_desc desc2d(size_t w, size_t h, cuabi_array_format f, unsigned ch)
{
    cuabi_array_desc d = CUABI_ARRAY_DESC_INIT;
    d.width = w;
    d.height = h;
    d.format = f;
    d.num_channels = ch;
    return d;
}

static cuabi_array *make(const cuabi_array_desc *d)
{
    cuabi_array *a;
    ck_assert_ok(cuabi_array_create(&a, dev, d));
    return a;
}

static CUarray native(cuabi_array *a)
{
    uintptr_t h;
    ck_assert_ok(cuabi_array_native_handle(&h, a));
    return (CUarray)h;
}

static float fat(cuabi_array *a, size_t x, size_t y, size_t z)
{
    float f;
    memcpy(&f, fake_array_data(native(a), x, y, z), 4);
    return f;
}

typedef cuabi_array_region region;
static region box(size_t x, size_t y, size_t z, size_t w, size_t h, size_t d)
{
    region r = CUABI_ARRAY_REGION_INIT;
    r.x = x, r.y = y, r.z = z, r.width = w, r.height = h, r.depth = d;
    return r;
}

/* A borrowed view of memory at `addr` (strides in elements; NULL: row-major). */
static cuabi_view *view_at(int devtype, int id, const void *addr, int code, int bits, int ndim,
                           const int64_t *shape, const int64_t *strides)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)addr;
    t.device.device_type = (DLDeviceType)devtype;
    t.device.device_id = id;
    t.ndim = ndim;
    t.dtype.code = (uint8_t)code;
    t.dtype.bits = (uint8_t)bits;
    t.dtype.lanes = 1;
    t.shape = (int64_t *)shape;
    t.strides = (int64_t *)strides;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dltensor(&v, &t, 0));
    return v;
}

/* ------------------------------------------------------------ making arrays */

START_TEST(a_2d_array_and_what_it_says)
{
    cuabi_array_desc d = desc2d(33, 7, CUABI_ARRAY_FORMAT_FLOAT32, 4);
    d.flags = CUABI_ARRAY_SURFACE_LDST;
    cuabi_array *a = make(&d);
    ck_assert_int_eq(fake_live_arrays, 1);
    fake_array *fa = fake_array_of(native(a));
    ck_assert_ptr_nonnull(fa);
    ck_assert_uint_eq(fa->d.Width, 33);
    ck_assert_uint_eq(fa->d.Height, 7);
    ck_assert_uint_eq(fa->d.Depth, 0);
    ck_assert_int_eq(fa->d.Format, CU_AD_FORMAT_FLOAT);
    ck_assert_uint_eq(fa->d.NumChannels, 4);
    ck_assert_uint_eq(fa->d.Flags, CUDA_ARRAY3D_SURFACE_LDST);
    cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
    ck_assert_ok(cuabi_array_get_info(&info, a));
    ck_assert_uint_eq(info.width, 33);
    ck_assert_uint_eq(info.height, 7);
    ck_assert_uint_eq(info.depth, 0);
    ck_assert_int_eq(info.dims, 2);
    ck_assert_uint_eq(info.layers, 1);
    ck_assert_uint_eq(info.element_size, 16);
    ck_assert_uint_eq(info.block, 1);
    ck_assert_uint_eq(info.size_bytes, 33 * 7 * 16);
    ck_assert_int_eq(info.level, -1);
    ck_assert_uint_eq(info.num_levels, 1);
    ck_assert_int_eq(info.device, 0);
    ck_assert_uint_eq(info.native, (uintptr_t)native(a));
    cuabi_device *got;
    ck_assert_ok(cuabi_array_device(&got, a));
    ck_assert_ptr_eq(got, dev);
    ck_assert_ok(cuabi_array_release(a));
    ck_assert_int_eq(fake_live_arrays, 0);
}
END_TEST

START_TEST(every_kind_of_array)
{
    struct { size_t w, h, d; unsigned flags; int dims; size_t layers; } k[] = {
        { 100, 0, 0, 0, 1, 1 },                                        /* 1-D */
        { 16, 16, 0, 0, 2, 1 },                                        /* 2-D */
        { 8, 8, 8, 0, 3, 1 },                                          /* 3-D */
        { 64, 0, 5, CUABI_ARRAY_LAYERED, 1, 5 },                       /* layered 1-D */
        { 32, 32, 3, CUABI_ARRAY_LAYERED, 2, 3 },                      /* layered 2-D */
        { 16, 16, 6, CUABI_ARRAY_CUBEMAP, 2, 6 },                      /* cube */
        { 16, 16, 12, CUABI_ARRAY_CUBEMAP | CUABI_ARRAY_LAYERED, 2, 12 },
        { 16, 16, 0, CUABI_ARRAY_TEXTURE_GATHER, 2, 1 },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cuabi_array_desc d = desc2d(k[i].w, k[i].h, CUABI_ARRAY_FORMAT_UINT8, 1);
        d.depth = k[i].d;
        d.flags = k[i].flags;
        cuabi_array *a = make(&d);
        cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
        ck_assert_ok(cuabi_array_get_info(&info, a));
        ck_assert_int_eq(info.dims, k[i].dims);
        ck_assert_uint_eq(info.layers, k[i].layers);
        ck_assert_uint_eq(info.size_bytes, k[i].w * (k[i].h ? k[i].h : 1) * (k[i].d ? k[i].d : 1));
        cuabi_array_release(a);
    }
    /* Every channel format the driver takes has its element size. */
    struct { cuabi_array_format f; unsigned ch; size_t elem, block; } f[] = {
        { CUABI_ARRAY_FORMAT_UINT8, 2, 2, 1 }, { CUABI_ARRAY_FORMAT_INT16, 4, 8, 1 },
        { CUABI_ARRAY_FORMAT_FLOAT16, 2, 4, 1 }, { CUABI_ARRAY_FORMAT_UINT32, 1, 4, 1 },
        { CUABI_ARRAY_FORMAT_UNORM_INT8X4, 4, 4, 1 }, { CUABI_ARRAY_FORMAT_UNORM_INT_101010_2, 4, 4, 1 },
        { CUABI_ARRAY_FORMAT_BC1_UNORM, 4, 8, 4 }, { CUABI_ARRAY_FORMAT_BC7_UNORM, 4, 16, 4 },
        { CUABI_ARRAY_FORMAT_NV12, 1, 0, 1 },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        cuabi_array_desc d = desc2d(8, 8, f[i].f, f[i].ch);
        cuabi_array *a = make(&d);
        cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
        ck_assert_ok(cuabi_array_get_info(&info, a));
        ck_assert_uint_eq(info.element_size, f[i].elem);
        ck_assert_uint_eq(info.block, f[i].block);
        cuabi_array_release(a);
    }
}
END_TEST

START_TEST(descriptions_that_break_a_rule)
{
    cuabi_array *a = (cuabi_array *)0x1;
    struct { cuabi_array_desc d; const char *says; } bad[8];
    bad[0].d = desc2d(0, 4, CUABI_ARRAY_FORMAT_UINT8, 1), bad[0].says = "desc.width is 0";
    bad[1].d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 3), bad[1].says = "1, 2 or 4 channels";
    bad[2].d = desc2d(4, 4, (cuabi_array_format)0x77, 1), bad[2].says = "not a cuabi_array_format";
    bad[3].d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1), bad[3].says = "unknown flags 0x400";
    bad[3].d.flags = 0x400;
    bad[4].d = desc2d(8, 4, CUABI_ARRAY_FORMAT_UINT8, 1), bad[4].says = "faces are square";
    bad[4].d.flags = CUABI_ARRAY_CUBEMAP, bad[4].d.depth = 6;
    bad[5].d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1), bad[5].says = "a multiple of 6";
    bad[5].d.flags = CUABI_ARRAY_CUBEMAP | CUABI_ARRAY_LAYERED, bad[5].d.depth = 7;
    bad[6].d = desc2d(4, 0, CUABI_ARRAY_FORMAT_UINT8, 1), bad[6].says = "set CUABI_ARRAY_LAYERED";
    bad[6].d.depth = 3;
    bad[7].d = desc2d(16, 0, CUABI_ARRAY_FORMAT_BC1_UNORM, 4), bad[7].says = "block-compressed";
    for (int i = 0; i < 8; i++) {
        ck_assert_status(cuabi_array_create(&a, dev, &bad[i].d), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions(bad[i].says);
        ck_assert_ptr_null(a);
    }
    cuabi_array_desc d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1);
    d.flags = CUABI_ARRAY_LAYERED;
    ck_assert_status(cuabi_array_create(&a, dev, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("at least 1");
    d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1);
    d.version = 0;
    ck_assert_status(cuabi_array_create(&a, dev, &d), CUABI_ERROR_INVALID_VERSION);
    d.version = 99;
    ck_assert_status(cuabi_array_create(&a, dev, &d), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_array_create(&a, dev, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1);
    ck_assert_status(cuabi_array_create(NULL, dev, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_array_create(&a, (cuabi_device *)stream, &d), CUABI_ERROR_INVALID_HANDLE);
    /* Past the address space. */
    d = desc2d(SIZE_MAX / 2, 4, CUABI_ARRAY_FORMAT_FLOAT32, 4);
    ck_assert_status(cuabi_array_create(&a, dev, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("address space");
    ck_assert_int_eq(fake_live_arrays, 0);
}
END_TEST

/* ------------------------------------------------------------ host copies */

START_TEST(host_copies_of_regions_with_pitches)
{
    cuabi_array_desc d = desc2d(10, 6, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    cuabi_array *a = make(&d);
    float img[6][10];
    for (int y = 0; y < 6; y++)
        for (int x = 0; x < 10; x++)
            img[y][x] = (float)(100 * y + x);
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, NULL));
    ck_assert(fat(a, 0, 0, 0) == 0.0f && fat(a, 9, 5, 0) == 509.0f && fat(a, 3, 2, 0) == 203.0f);
    ck_assert_ptr_eq(fake_last_stream, CU_STREAM_LEGACY);      /* synchronous */
    ck_assert_int_eq(fake_last_copy3d.dstMemoryType, CU_MEMORYTYPE_ARRAY);
    ck_assert_int_eq(fake_last_copy3d.srcMemoryType, CU_MEMORYTYPE_HOST);
    /* A 3x2 box at (4, 1) from rows 16 floats apart. */
    float src[2][16];
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 16; x++)
            src[y][x] = -(float)(10 * y + x);
    region r = box(4, 1, 0, 3, 2, 0);
    ck_assert_ok(cuabi_array_copy_from_host(a, &r, src, sizeof src, 16 * 4, 0, stream));
    ck_assert(fat(a, 4, 1, 0) == 0.0f && fat(a, 6, 1, 0) == -2.0f && fat(a, 6, 2, 0) == -12.0f);
    ck_assert(fat(a, 7, 1, 0) == 107.0f && fat(a, 3, 1, 0) == 103.0f);
    ck_assert_uint_eq(fake_last_copy3d.dstXInBytes, 16);
    ck_assert_uint_eq(fake_last_copy3d.dstY, 1);
    ck_assert_uint_eq(fake_last_copy3d.WidthInBytes, 12);
    ck_assert_uint_eq(fake_last_copy3d.srcPitch, 64);
    /* Read a box back into padded rows. */
    float out[3][8];
    memset(out, 0, sizeof out);
    r = box(2, 3, 0, 4, 3, 1);
    ck_assert_ok(cuabi_array_copy_to_host(out, sizeof out, 8 * 4, 0, a, &r, NULL));
    ck_assert(out[0][0] == 302.0f && out[2][3] == 505.0f && out[0][4] == 0.0f);
    /* An extent of 0 reaches the end. */
    r = box(8, 4, 0, 0, 0, 0);
    float tail[2][2];
    ck_assert_ok(cuabi_array_copy_to_host(tail, sizeof tail, 0, 0, a, &r, NULL));
    ck_assert(tail[0][0] == 408.0f && tail[1][1] == 509.0f);
    cuabi_array_release(a);
}
END_TEST

START_TEST(host_copies_that_break_a_rule)
{
    cuabi_array_desc d = desc2d(10, 6, CUABI_ARRAY_FORMAT_UINT16, 2);
    cuabi_array *a = make(&d);
    uint32_t img[6][10];
    region r;
    /* The host memory is too small for what the copy reaches. */
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, img, sizeof img - 1, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("only 239 are given");
    ck_assert_status(cuabi_array_copy_to_host(img, sizeof img, 4 * 10 + 4, 0, a, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* A pitch shorter than a row; rows fewer than the height. */
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 36, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("less than one row");
    r = box(0, 0, 0, 10, 6, 1);
    ck_assert_status(cuabi_array_copy_from_host(a, &r, img, sizeof img, 0, 5, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("less than the region's height");
    /* Regions outside the array. */
    r = box(10, 0, 0, 0, 0, 0);
    ck_assert_status(cuabi_array_copy_from_host(a, &r, img, sizeof img, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the array's 10");
    r = box(4, 0, 0, 7, 1, 1);
    ck_assert_status(cuabi_array_copy_from_host(a, &r, img, sizeof img, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("runs past");
    r = box(0, 0, 1, 1, 1, 1);
    ck_assert_status(cuabi_array_copy_from_host(a, &r, img, sizeof img, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("depth");
    r = box(0, 0, 0, 1, 1, 1);
    r.version = 0;
    ck_assert_status(cuabi_array_copy_from_host(a, &r, img, sizeof img, 0, 0, NULL),
                     CUABI_ERROR_INVALID_VERSION);
    /* Sizes that overflow; NULL memory; a wrapping span. */
    r = box(0, 0, 0, 1, 6, 1);
    ck_assert_status(cuabi_array_copy_from_host(a, &r, img, sizeof img, SIZE_MAX / 2, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("address space");
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, NULL, sizeof img, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, (void *)(UINTPTR_MAX - 8), 64, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("wraps");
    /* A stream of another device; handles of the wrong type. */
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, stream1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    ck_assert_status(cuabi_array_copy_from_host((cuabi_array *)stream, NULL, img, sizeof img, 0, 0,
                                                NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0,
                                                (cuabi_stream *)a), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(fake_copies3d, 0);
    cuabi_array_release(a);
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

/* ------------------------------------------------------------ buffers and views */

START_TEST(buffer_copies)
{
    cuabi_array_desc d = desc2d(4, 3, CUABI_ARRAY_FORMAT_INT32, 1);
    d.depth = 2;
    cuabi_array *a = make(&d);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 4096, 0, stream));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    /* Slices of 3 rows padded to 4, rows of 4 ints padded to 8, from byte 64. */
    int32_t *src = (int32_t *)(p + 64);
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++)
                src[(z * 4 + y) * 8 + x] = 1000 * z + 10 * y + x;
    ck_assert_ok(cuabi_array_copy_from_buffer(a, NULL, b, 64, 32, 4, stream));
    ck_assert_int_eq(fake_last_copy3d.srcMemoryType, CU_MEMORYTYPE_DEVICE);
    ck_assert_uint_eq(fake_last_copy3d.srcHeight, 4);
    ck_assert_uint_eq(fake_last_copy3d.Depth, 2);
    int32_t v;
    memcpy(&v, fake_array_data(native(a), 3, 2, 1), 4);
    ck_assert_int_eq(v, 1023);
    /* Back, packed, into another part of the buffer. */
    ck_assert_ok(cuabi_array_copy_to_buffer(b, 1024, 0, 0, a, NULL, NULL));
    int32_t *dst = (int32_t *)(p + 1024);
    ck_assert_int_eq(dst[0], 0);
    ck_assert_int_eq(dst[4 * 3 * 2 - 1], 1023);
    ck_assert_int_eq(dst[4 * 3 + 5], 1011);
    /* Past the buffer's end. */
    ck_assert_status(cuabi_array_copy_to_buffer(b, 4096 - 16, 0, 0, a, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the end");
    /* A buffer of the other device. */
    cuabi_memory_resource *pool1;
    cuabi_buffer *b1;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool1, dev1));
    ck_assert_ok(cuabi_buffer_allocate(&b1, pool1, 4096, 0, stream1));
    ck_assert_status(cuabi_array_copy_from_buffer(a, NULL, b1, 0, 0, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    cuabi_buffer_destroy(b1);
    cuabi_memory_resource_release(pool1);
    /* Host buffers are host memory to the copy. */
    cuabi_buffer *hb;
    ck_assert_ok(cuabi_buffer_allocate(&hb, host, 4 * 4 * 3 * 2, 0, NULL));
    ck_assert_ok(cuabi_array_copy_to_buffer(hb, 0, 0, 0, a, NULL, NULL));
    ck_assert_int_eq(fake_last_copy3d.dstMemoryType, CU_MEMORYTYPE_HOST);
    ck_assert_ok(cuabi_buffer_pointer(&p, hb));
    ck_assert_int_eq(((int32_t *)p)[23], 1023);
    ck_assert_status(cuabi_array_copy_to_buffer((cuabi_buffer *)a, 0, 0, 0, a, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    cuabi_buffer_destroy(hb);
    cuabi_buffer_destroy(b);
    cuabi_array_release(a);
}
END_TEST

START_TEST(strided_views_with_channels)
{
    /* An RGBA8 array filled from a uint8 (H, W, 4) view cut out of a larger image. */
    cuabi_array_desc d = desc2d(5, 3, CUABI_ARRAY_FORMAT_UINT8, 4);
    cuabi_array *a = make(&d);
    static uint8_t img[8][12][4];
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 12; x++)
            for (int c = 0; c < 4; c++)
                img[y][x][c] = (uint8_t)(16 * y + x + 64 * c);
    int64_t shape[3] = { 3, 5, 4 }, strides[3] = { 2 * 12 * 4, 4, 1 };   /* every other row */
    cuabi_view *v = view_at(kDLCPU, 0, &img[1][2][0], CUABI_DTYPE_UINT, 8, 3, shape, strides);
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, v, NULL));
    ck_assert_uint_eq(fake_last_copy3d.srcPitch, 2 * 12 * 4);
    ck_assert_int_eq(fake_last_copy3d.srcMemoryType, CU_MEMORYTYPE_HOST);
    ck_assert_int_eq(fake_array_data(native(a), 0, 0, 0)[0], img[1][2][0]);
    ck_assert_int_eq(fake_array_data(native(a), 4, 2, 0)[3], img[5][6][3]);
    cuabi_view_release(v);
    /* The same elements as uint32 pixels: no channel dimension. */
    uint32_t px[3][5];
    for (int i = 0; i < 15; i++)
        px[i / 5][i % 5] = 0x01020304u * (uint32_t)i;
    int64_t shape2[2] = { 3, 5 };
    v = view_at(kDLCPU, 0, px, CUABI_DTYPE_UINT, 32, 2, shape2, NULL);
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, v, NULL));
    uint32_t got;
    memcpy(&got, fake_array_data(native(a), 4, 2, 0), 4);
    ck_assert_uint_eq(got, 0x01020304u * 14);
    /* And back into a writable view. */
    uint32_t back[3][5];
    cuabi_view *w = view_at(kDLCPU, 0, back, CUABI_DTYPE_UINT, 32, 2, shape2, NULL);
    ck_assert_ok(cuabi_array_copy_to_view(w, a, NULL, NULL));
    ck_assert_int_eq(memcmp(back, px, sizeof px), 0);
    cuabi_view_release(w);
    /* What a view may not be. */
    int64_t wrong[2] = { 3, 4 };
    cuabi_view *bad = view_at(kDLCPU, 0, px, CUABI_DTYPE_UINT, 32, 2, wrong, NULL);
    ck_assert_status(cuabi_array_copy_from_view(a, NULL, bad, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not match the region");
    cuabi_view_release(bad);
    bad = view_at(kDLCPU, 0, px, CUABI_DTYPE_UINT, 16, 2, shape2, NULL);
    ck_assert_status(cuabi_array_copy_from_view(a, NULL, bad, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not the array's");
    cuabi_view_release(bad);
    int64_t cols[2] = { 1, 3 };     /* columns, not rows */
    bad = view_at(kDLCPU, 0, px, CUABI_DTYPE_UINT, 32, 2, shape2, cols);
    ck_assert_status(cuabi_array_copy_from_view(a, NULL, bad, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("not contiguous");
    cuabi_view_release(bad);
    int64_t neg[2] = { -5, 1 };
    bad = view_at(kDLCPU, 0, &px[2][0], CUABI_DTYPE_UINT, 32, 2, shape2, neg);
    ck_assert_status(cuabi_array_copy_from_view(a, NULL, bad, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("negative, zero or overlapping");
    cuabi_view_release(bad);
    bad = view_at(kDLCUDA, 1, px, CUABI_DTYPE_UINT, 32, 2, shape2, NULL);
    ck_assert_status(cuabi_array_copy_from_view(a, NULL, bad, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    cuabi_view_release(bad);
    DLTensor t = { .data = px, .device = { kDLCPU, 0 }, .ndim = 2,
                   .dtype = { CUABI_DTYPE_UINT, 32, 1 }, .shape = shape2 };
    ck_assert_ok(cuabi_view_from_dltensor(&bad, &t, CUABI_VIEW_READ_ONLY));
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, bad, NULL));     /* reading is fine */
    ck_assert_status(cuabi_array_copy_to_view(bad, a, NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("read-only");
    cuabi_view_release(bad);
    cuabi_view_release(v);
    cuabi_array_release(a);
}
END_TEST

START_TEST(views_whose_slices_are_not_whole_rows_apart)
{
    /* A (4, 3, 2) float32 view whose slices are 7 elements apart: rows of
     * 2 floats 2 apart, slices 7 apart (not a multiple of 2): one copy per
     * slice. */
    cuabi_array_desc d = desc2d(2, 3, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    d.depth = 4;
    cuabi_array *a = make(&d);
    float data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (float)i;
    int64_t shape[3] = { 4, 3, 2 }, strides[3] = { 7, 2, 1 };
    cuabi_view *v = view_at(kDLCPU, 0, data, CUABI_DTYPE_FLOAT, 32, 3, shape, strides);
    int before = fake_copies3d;
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, v, NULL));
    ck_assert_int_eq(fake_copies3d - before, 4);
    for (int z = 0; z < 4; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 2; x++)
                ck_assert(fat(a, x, y, z) == (float)(7 * z + 2 * y + x));
    /* Whole rows apart (slices 8 apart, 4 rows of 2): one copy. */
    int64_t strides2[3] = { 8, 2, 1 };
    cuabi_view *w = view_at(kDLCPU, 0, data, CUABI_DTYPE_FLOAT, 32, 3, shape, strides2);
    before = fake_copies3d;
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, w, NULL));
    ck_assert_int_eq(fake_copies3d - before, 1);
    ck_assert_uint_eq(fake_last_copy3d.srcHeight, 4);
    ck_assert(fat(a, 1, 2, 3) == 29.0f);
    /* Overlapping slices are refused. */
    int64_t strides3[3] = { 5, 2, 1 };
    cuabi_view *x = view_at(kDLCPU, 0, data, CUABI_DTYPE_FLOAT, 32, 3, shape, strides3);
    ck_assert_status(cuabi_array_copy_to_view(x, a, NULL, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("do not overlap");
    cuabi_view_release(x);
    cuabi_view_release(w);
    cuabi_view_release(v);
    cuabi_array_release(a);
}
END_TEST

START_TEST(layers_and_faces)
{
    /* Layers 1..2 of a layered 2-D array from a (2, 4, 4) view. */
    cuabi_array_desc d = desc2d(4, 4, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    d.depth = 3;
    d.flags = CUABI_ARRAY_LAYERED;
    cuabi_array *a = make(&d);
    float data[2][4][4];
    for (int i = 0; i < 32; i++)
        (&data[0][0][0])[i] = (float)(i + 1);
    int64_t shape[3] = { 2, 4, 4 };
    cuabi_view *v = view_at(kDLCPU, 0, data, CUABI_DTYPE_FLOAT, 32, 3, shape, NULL);
    region r = box(0, 0, 1, 0, 0, 2);
    ck_assert_ok(cuabi_array_copy_from_view(a, &r, v, NULL));
    ck_assert_uint_eq(fake_last_copy3d.dstZ, 1);
    ck_assert(fat(a, 0, 0, 0) == 0.0f && fat(a, 0, 0, 1) == 1.0f && fat(a, 3, 3, 2) == 32.0f);
    cuabi_view_release(v);
    cuabi_array_release(a);
    /* A layered 1-D array takes (layers, width). */
    d = desc2d(8, 0, CUABI_ARRAY_FORMAT_INT16, 1);
    d.depth = 3;
    d.flags = CUABI_ARRAY_LAYERED;
    a = make(&d);
    int16_t rows[3][8];
    for (int i = 0; i < 24; i++)
        (&rows[0][0])[i] = (int16_t)(i * 3);
    int64_t s2[2] = { 3, 8 };
    v = view_at(kDLCPU, 0, rows, CUABI_DTYPE_INT, 16, 2, s2, NULL);
    ck_assert_ok(cuabi_array_copy_from_view(a, NULL, v, NULL));
    int16_t h;
    memcpy(&h, fake_array_data(native(a), 7, 0, 2), 2);
    ck_assert_int_eq(h, 23 * 3);
    cuabi_view_release(v);
    cuabi_array_release(a);
    /* A cube map: six faces, outermost. */
    d = desc2d(2, 2, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    d.depth = 6;
    d.flags = CUABI_ARRAY_CUBEMAP;
    a = make(&d);
    float faces[6][2][2];
    for (int i = 0; i < 24; i++)
        (&faces[0][0][0])[i] = (float)i;
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, faces, sizeof faces, 0, 0, NULL));
    ck_assert(fat(a, 1, 1, 5) == 23.0f);
    cuabi_array_release(a);
}
END_TEST

START_TEST(block_compressed_copies)
{
    /* A 10x8 BC1 array: 3x2 blocks of 8 bytes (the last column of blocks partial). */
    cuabi_array_desc d = desc2d(10, 8, CUABI_ARRAY_FORMAT_BC1_UNORM, 4);
    cuabi_array *a = make(&d);
    cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
    ck_assert_ok(cuabi_array_get_info(&info, a));
    ck_assert_uint_eq(info.size_bytes, 3 * 2 * 8);
    uint8_t blocks[2][3][8];
    for (int i = 0; i < 48; i++)
        (&blocks[0][0][0])[i] = (uint8_t)i;
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, blocks, sizeof blocks, 0, 0, NULL));
    ck_assert_uint_eq(fake_last_copy3d.WidthInBytes, 24);
    ck_assert_uint_eq(fake_last_copy3d.Height, 2);
    ck_assert_int_eq(fake_array_data(native(a), 2, 1, 0)[7], 47);
    /* The partial column: from x 8 to the edge. */
    region r = box(8, 4, 0, 0, 0, 0);
    uint8_t one[8];
    ck_assert_ok(cuabi_array_copy_to_host(one, sizeof one, 0, 0, a, &r, NULL));
    ck_assert_int_eq(one[0], 40);
    ck_assert_uint_eq(fake_last_copy3d.srcXInBytes, 16);
    r = box(2, 0, 0, 4, 4, 1);
    ck_assert_status(cuabi_array_copy_to_host(one, sizeof one, 0, 0, a, &r, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("4x4 blocks");
    r = box(0, 0, 0, 6, 4, 1);
    ck_assert_status(cuabi_array_copy_to_host(blocks, sizeof blocks, 0, 0, a, &r, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    int64_t shape[2] = { 2, 24 };
    cuabi_view *v = view_at(kDLCPU, 0, blocks, CUABI_DTYPE_UINT, 8, 2, shape, NULL);
    ck_assert_status(cuabi_array_copy_from_view(a, NULL, v, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("block-compressed");
    cuabi_view_release(v);
    cuabi_array_release(a);
    /* Video formats are made, and copied by the driver only. */
    d = desc2d(16, 16, CUABI_ARRAY_FORMAT_NV12, 1);
    a = make(&d);
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, blocks, sizeof blocks, 0, 0, NULL),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuabi_array_native_handle");
    cuabi_array_release(a);
}
END_TEST

START_TEST(array_to_array)
{
    cuabi_array_desc d = desc2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    cuabi_array *a = make(&d), *b = make(&d);
    float img[8][8];
    for (int i = 0; i < 64; i++)
        (&img[0][0])[i] = (float)i;
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, img, sizeof img, 0, 0, NULL));
    region sr = box(1, 2, 0, 3, 2, 1), dr = box(5, 6, 0, 99, 99, 99);   /* dst extent ignored */
    ck_assert_ok(cuabi_array_copy(b, &dr, a, &sr, stream));
    ck_assert_int_eq(fake_last_copy3d.srcMemoryType, CU_MEMORYTYPE_ARRAY);
    ck_assert_int_eq(fake_last_copy3d.dstMemoryType, CU_MEMORYTYPE_ARRAY);
    ck_assert(fat(b, 5, 6, 0) == 17.0f && fat(b, 7, 7, 0) == 27.0f && fat(b, 4, 6, 0) == 0.0f);
    ck_assert_ok(cuabi_array_copy(b, NULL, a, NULL, NULL));
    ck_assert(fat(b, 7, 7, 0) == 63.0f);
    dr = box(6, 0, 0, 0, 0, 0);
    ck_assert_status(cuabi_array_copy(b, &dr, a, &sr, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("destination region");
    cuabi_array_desc d2 = desc2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT16, 1);
    cuabi_array *c = make(&d2), *e;
    ck_assert_status(cuabi_array_copy(c, NULL, a, NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("elements differ");
    ck_assert_ok(cuabi_array_create(&e, dev1, &d));
    ck_assert_status(cuabi_array_copy(e, NULL, a, NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("devices");
    cuabi_array_release(e);
    cuabi_array_release(c);
    cuabi_array_release(b);
    cuabi_array_release(a);
}
END_TEST

/* ------------------------------------------------------------ mipmaps */

START_TEST(mipmapped_arrays_and_levels)
{
    cuabi_array_desc d = desc2d(16, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    cuabi_mipmapped_array *m;
    ck_assert_ok(cuabi_mipmapped_array_create(&m, dev, &d, 5));
    ck_assert_int_eq(fake_live_mipmaps, 1);
    cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
    ck_assert_ok(cuabi_mipmapped_array_get_info(&info, m));
    ck_assert_uint_eq(info.num_levels, 5);
    ck_assert_uint_eq(info.width, 16);
    ck_assert_int_eq(info.level, -1);
    cuabi_array *l2;
    ck_assert_ok(cuabi_mipmapped_array_get_level(&l2, m, 2));
    ck_assert_ok(cuabi_array_get_info(&info, l2));
    ck_assert_uint_eq(info.width, 4);
    ck_assert_uint_eq(info.height, 2);
    ck_assert_int_eq(info.level, 2);
    /* The level keeps the mipmapped array alive. */
    ck_assert_ok(cuabi_mipmapped_array_release(m));
    ck_assert_int_eq(fake_live_mipmaps, 1);
    float px[2][4] = { { 1, 2, 3, 4 }, { 5, 6, 7, 8 } };
    ck_assert_ok(cuabi_array_copy_from_host(l2, NULL, px, sizeof px, 0, 0, NULL));
    ck_assert(fat(l2, 3, 1, 0) == 8.0f);
    ck_assert_ok(cuabi_array_release(l2));
    ck_assert_int_eq(fake_live_mipmaps, 0);
    ck_assert_int_eq(fake_live_arrays, 0);
    /* Rules. */
    ck_assert_status(cuabi_mipmapped_array_create(&m, dev, &d, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_mipmapped_array_create(&m, dev, &d, 6), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("halves to 1 after 5 levels");
    ck_assert_status(cuabi_mipmapped_array_create(&m, dev, &d, CUABI_ARRAY_MAX_LEVELS + 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_mipmapped_array_create(&m, dev, &d, 1));
    ck_assert_status(cuabi_mipmapped_array_get_level(&l2, m, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(l2);
    ck_assert_status(cuabi_mipmapped_array_get_level(&l2, (cuabi_mipmapped_array *)stream, 0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_mipmapped_array_get_info(&info, (cuabi_mipmapped_array *)dev),
                     CUABI_ERROR_INVALID_HANDLE);
    cuabi_mipmapped_array_release(m);
}
END_TEST

START_TEST(arrays_made_from_views)
{
    /* A (3, 5, 4) uint8 image: a 5x3 RGBA8 array with its pixels. */
    uint8_t img[3][5][4];
    for (int i = 0; i < 60; i++)
        (&img[0][0][0])[i] = (uint8_t)(i * 7);
    int64_t shape[3] = { 3, 5, 4 };
    cuabi_view *v = view_at(kDLCPU, 0, img, CUABI_DTYPE_UINT, 8, 3, shape, NULL);
    cuabi_array *a;
    ck_assert_ok(cuabi_array_create_from_view(&a, v, 4, 0, NULL, NULL));
    cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
    ck_assert_ok(cuabi_array_get_info(&info, a));
    ck_assert_uint_eq(info.width, 5);
    ck_assert_uint_eq(info.height, 3);
    ck_assert_uint_eq(info.depth, 0);
    ck_assert_int_eq(info.format, CUABI_ARRAY_FORMAT_UINT8);
    ck_assert_uint_eq(info.num_channels, 4);
    ck_assert_int_eq(info.device, 0);
    ck_assert_int_eq(fake_array_data(native(a), 4, 2, 0)[3], img[2][4][3]);
    cuabi_array_release(a);
    /* The same view as one channel: a 3-D array of 3 x 5 x 4. */
    ck_assert_ok(cuabi_array_create_from_view(&a, v, 1, CUABI_ARRAY_SURFACE_LDST, dev, stream));
    ck_assert_ok(cuabi_array_get_info(&info, a));
    ck_assert_uint_eq(info.width, 4);
    ck_assert_uint_eq(info.height, 5);
    ck_assert_uint_eq(info.depth, 3);
    ck_assert_uint_eq(info.flags, CUABI_ARRAY_SURFACE_LDST);
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, stream));
    ck_assert_ptr_eq(fake_last_stream, (CUstream)raw);
    cuabi_array_release(a);
    /* Layered: (layers, width) and (layers, height, width). */
    int64_t s2[2] = { 3, 20 };
    cuabi_view *rows = view_at(kDLCPU, 0, img, CUABI_DTYPE_UINT, 8, 2, s2, NULL);
    ck_assert_ok(cuabi_array_create_from_view(&a, rows, 1, CUABI_ARRAY_LAYERED, NULL, NULL));
    ck_assert_ok(cuabi_array_get_info(&info, a));
    ck_assert_uint_eq(info.width, 20);
    ck_assert_uint_eq(info.height, 0);
    ck_assert_uint_eq(info.depth, 3);
    ck_assert_int_eq(info.dims, 1);
    cuabi_array_release(a);
    /* What cannot be an array. */
    ck_assert_status(cuabi_array_create_from_view(&a, v, 2, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("last dimension is the channels");
    ck_assert_status(cuabi_array_create_from_view(&a, v, 3, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    double dd[4];
    int64_t s1[1] = { 4 };
    cuabi_view *f64 = view_at(kDLCPU, 0, dd, CUABI_DTYPE_FLOAT, 64, 1, s1, NULL);
    ck_assert_status(cuabi_array_create_from_view(&a, f64, 1, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("float64 to float32");
    cuabi_view_release(f64);
    ck_assert_status(cuabi_array_create_from_view(&a, rows, 1, CUABI_ARRAY_CUBEMAP, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_view *gpu1 = view_at(kDLCUDA, 1, img, CUABI_DTYPE_UINT, 8, 2, s2, NULL);
    ck_assert_status(cuabi_array_create_from_view(&a, gpu1, 1, 0, dev, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not of device 0");
    ck_assert_ok(cuabi_array_create_from_view(&a, gpu1, 1, 0, NULL, NULL));     /* its device */
    ck_assert_ok(cuabi_array_get_info(&info, a));
    ck_assert_int_eq(info.device, 1);
    cuabi_array_release(a);
    cuabi_view_release(gpu1);
    cuabi_view_release(rows);
    cuabi_view_release(v);
    ck_assert_int_eq(fake_live_arrays, 0);
}
END_TEST

/* ------------------------------------------------------------ captures, failures */

START_TEST(a_captured_copy_keeps_its_array_and_buffer)
{
    cuabi_array_desc d = desc2d(4, 2, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    cuabi_array *a = make(&d);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 32, 0, stream));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    for (int i = 0; i < 8; i++)
        ((float *)p)[i] = (float)i;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_array_copy_from_buffer(a, NULL, b, 0, 0, 0, stream));
    ck_assert(fat(a, 3, 1, 0) == 0.0f);       /* recorded, not run */
    /* Released while captured: the graph keeps both. */
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_array_release(a));
    ck_assert_int_eq(fake_live_arrays, 1);
    ck_assert_int_eq(fake_unsafe_refusals, 0);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(fake_live_arrays, 1);
    ck_assert_ok(cuabi_graph_exec_release(e));
    ck_assert_ok(cuabi_graph_release(g));
    ck_assert_int_eq(fake_live_arrays, 0);
    ck_assert_int_eq(fake_unsafe_refusals, 0);
}
END_TEST

START_TEST(the_captured_copy_runs_with_the_graph)
{
    cuabi_array_desc d = desc2d(4, 2, CUABI_ARRAY_FORMAT_FLOAT32, 1);
    cuabi_array *a = make(&d);
    float src[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, src, sizeof src, 0, 0, stream));
    /* A synchronous copy on the legacy stream conflicts with the capture. */
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, src, sizeof src, 0, 0, NULL),
                     CUABI_ERROR_STREAM_CAPTURE);
    cuabi_graph *g;
    ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert(fat(a, 3, 1, 0) == 0.0f);
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_array_copy_from_host(a, NULL, src, sizeof src, 0, 0, stream));
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert(fat(a, 3, 1, 0) == 8.0f && fat(a, 0, 1, 0) == 5.0f);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    cuabi_array_release(a);
}
END_TEST

START_TEST(releases_during_a_capture_elsewhere_are_relaxed)
{
    cuabi_array_desc d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1);
    cuabi_array *a = make(&d);
    cuabi_mipmapped_array *m;
    ck_assert_ok(cuabi_mipmapped_array_create(&m, dev, &d, 2));
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_array_release(a));
    ck_assert_ok(cuabi_mipmapped_array_release(m));
    ck_assert_int_eq(fake_unsafe_refusals, 0);
    ck_assert_int_eq(fake_live_arrays, 0);
    ck_assert_int_eq(fake_live_mipmaps, 0);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_release(g);
}
END_TEST

START_TEST(driver_failures_leave_nothing)
{
    cuabi_array_desc d = desc2d(4, 4, CUABI_ARRAY_FORMAT_UINT8, 1);
    cuabi_array *a;
    cuabi__fault_arm("cuArray3DCreate_v2", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_status(cuabi_array_create(&a, dev, &d), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_OUT_OF_MEMORY);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ptr_null(a);
    a = make(&d);
    uint8_t px[16] = { 0 };
    cuabi__fault_arm("cuMemcpy3DAsync_v2", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, px, 16, 0, 0, NULL), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuMemcpy3DAsync_v2");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    /* Entry points an old driver lacks. */
    cuabi__driver *drv = cuabi__driver_for_test();
    PFN_cuMemcpy3DAsync_v3020 copy = drv->cuMemcpy3DAsync;
    drv->cuMemcpy3DAsync = NULL;
    ck_assert_status(cuabi_array_copy_from_host(a, NULL, px, 16, 0, 0, NULL),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    drv->cuMemcpy3DAsync = copy;
    PFN_cuArrayDestroy_v2000 destroy = drv->cuArrayDestroy;
    drv->cuArrayDestroy = NULL;
    cuabi_array *b;
    ck_assert_status(cuabi_array_create(&b, dev, &d), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    drv->cuArrayDestroy = destroy;
    /* The fake driver refuses a copy it finds outside the array. */
    cuabi_array_release(a);
    ck_assert_int_eq(fake_live_arrays, 0);
}
END_TEST

START_TEST(null_and_wrong_handles)
{
    cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
    uintptr_t h;
    cuabi_device *dv;
    ck_assert_status(cuabi_array_get_info(&info, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_get_info(NULL, (cuabi_array *)dev), CUABI_ERROR_INVALID_ARGUMENT);
    info.version = 0;
    ck_assert_status(cuabi_array_get_info(&info, (cuabi_array *)dev), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_array_native_handle(&h, (cuabi_array *)dev), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_native_handle(NULL, (cuabi_array *)dev),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_array_device(&dv, (cuabi_array *)stream), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_copy(NULL, NULL, NULL, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_copy_to_view(NULL, NULL, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_copy_from_view(NULL, NULL, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_copy_from_buffer(NULL, NULL, NULL, 0, 0, 0, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_copy_to_host(&h, 8, 0, 0, NULL, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_create_from_view(NULL, NULL, 1, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_array *a;
    ck_assert_status(cuabi_array_create_from_view(&a, (cuabi_view *)dev, 1, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_array_retain(NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_mipmapped_array_release((cuabi_mipmapped_array *)dev),
                     CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("array");
    TCase *tc = tcase_create("fake");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_2d_array_and_what_it_says);
    tcase_add_test(tc, every_kind_of_array);
    tcase_add_test(tc, descriptions_that_break_a_rule);
    tcase_add_test(tc, host_copies_of_regions_with_pitches);
    tcase_add_test(tc, host_copies_that_break_a_rule);
    tcase_add_test(tc, buffer_copies);
    tcase_add_test(tc, strided_views_with_channels);
    tcase_add_test(tc, views_whose_slices_are_not_whole_rows_apart);
    tcase_add_test(tc, layers_and_faces);
    tcase_add_test(tc, block_compressed_copies);
    tcase_add_test(tc, array_to_array);
    tcase_add_test(tc, mipmapped_arrays_and_levels);
    tcase_add_test(tc, arrays_made_from_views);
    tcase_add_test(tc, a_captured_copy_keeps_its_array_and_buffer);
    tcase_add_test(tc, the_captured_copy_runs_with_the_graph);
    tcase_add_test(tc, releases_during_a_capture_elsewhere_are_relaxed);
    tcase_add_test(tc, driver_failures_leave_nothing);
    tcase_add_test(tc, null_and_wrong_handles);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
