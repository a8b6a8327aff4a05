/* Texture and surface objects against the fake driver
 * (tests/fixtures/fake_texture.h): what reaches cuTexObjectCreate for each
 * resource (array, mipmapped array, linear and pitched views, an image
 * copied into a new array) and each sampling setting, the rules checked
 * first, what each object keeps alive, surfaces, argument-pack slots that
 * resolve the object at launch (and refuse a released one), captured
 * launches keeping the objects, driver failures and bad handles. */
#include "testutil.h"
#include "fake_texture.h"
#include "runtime/capture.h"

static cuabi_device *dev;
static cuabi_stream *stream;
static cuabi_memory_resource *pool;
static cuabi_objcode *code;
static cuabi_kernel *kern;

/* The fake "add" kernel records its three 8-byte arguments. */
static uint64_t seen[3];
static void record_args(const unsigned char args[FG_ARGS], const unsigned grid[3])
{
    (void)grid;
    memcpy(seen, args, sizeof seen);
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_texture_install();
    fake_kernel_implement("add", record_args);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin",
             cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    memset(seen, 0, sizeof seen);
}

static void teardown(void)
{
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(stream);
    cuabi_device_release(dev);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    ck_assert_msg(cuabi__handle_live_count() == 0, "%zu handles leaked",
                  cuabi__handle_live_count());
    ck_assert_int_eq(fake_live_texobjs, 0);
    ck_assert_int_eq(fake_live_surfobjs, 0);
    ck_assert_int_eq(fake_live_arrays, 0);
    ck_assert_int_eq(fake_live_mipmaps, 0);
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_int_eq(fake_live_graphs, 0);
    ck_assert_int_eq(fake_live_execs, 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_array *array2d(size_t w, size_t h, cuabi_array_format f, unsigned ch, unsigned flags)
{
    cuabi_array_desc d = CUABI_ARRAY_DESC_INIT;
    d.width = w;
    d.height = h;
    d.format = f;
    d.num_channels = ch;
    d.flags = flags;
    cuabi_array *a;
    ck_assert_ok(cuabi_array_create(&a, dev, &d));
    return a;
}

static cuabi_view *view_at(int devtype, int id, uintptr_t addr, int code_, int bits, int ndim,
                           const int64_t *shape, const int64_t *strides)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)addr;
    t.device.device_type = (DLDeviceType)devtype;
    t.device.device_id = id;
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

static uint64_t tex_value(cuabi_texture *t)
{
    uint64_t v;
    ck_assert_ok(cuabi_texture_object(&v, t));
    return v;
}

/* ------------------------------------------------------------ arrays */

START_TEST(a_texture_over_an_array_with_every_setting)
{
    cuabi_array *a = array2d(64, 32, CUABI_ARRAY_FORMAT_UINT8, 4, 0);
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.address_mode[0] = CUABI_TEXTURE_ADDRESS_WRAP;
    d.address_mode[1] = CUABI_TEXTURE_ADDRESS_BORDER;
    d.address_mode[2] = CUABI_TEXTURE_ADDRESS_MIRROR;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    d.read_mode = CUABI_TEXTURE_READ_NORMALIZED_FLOAT;
    d.normalized_coords = 1;
    d.srgb = 1;
    d.disable_trilinear_optimization = 1;
    d.max_anisotropy = 8;
    d.mipmap_filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    d.mipmap_level_bias = 0.5f;
    d.min_mipmap_level_clamp = 1.0f;
    d.max_mipmap_level_clamp = 3.0f;
    d.border_color[0] = 0.25f;
    d.border_color[3] = 1.0f;
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, &d));
    ck_assert_int_eq(fake_live_texobjs, 1);
    ck_assert_int_eq(fake_tex_last_res.resType, CU_RESOURCE_TYPE_ARRAY);
    uintptr_t h;
    ck_assert_ok(cuabi_array_native_handle(&h, a));
    ck_assert_ptr_eq(fake_tex_last_res.res.array.hArray, (CUarray)h);
    CUDA_TEXTURE_DESC *c = &fake_tex_last_desc;
    ck_assert_int_eq(c->addressMode[0], CU_TR_ADDRESS_MODE_WRAP);
    ck_assert_int_eq(c->addressMode[1], CU_TR_ADDRESS_MODE_BORDER);
    ck_assert_int_eq(c->addressMode[2], CU_TR_ADDRESS_MODE_MIRROR);
    ck_assert_int_eq(c->filterMode, CU_TR_FILTER_MODE_LINEAR);
    ck_assert_uint_eq(c->flags, CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |
                                CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION);
    ck_assert_uint_eq(c->maxAnisotropy, 8);
    ck_assert_int_eq(c->mipmapFilterMode, CU_TR_FILTER_MODE_LINEAR);
    ck_assert(c->mipmapLevelBias == 0.5f && c->minMipmapLevelClamp == 1.0f &&
              c->maxMipmapLevelClamp == 3.0f);
    ck_assert(c->borderColor[0] == 0.25f && c->borderColor[1] == 0.0f && c->borderColor[3] == 1.0f);
    /* What the texture says of itself. */
    cuabi_texture_desc back = CUABI_TEXTURE_DESC_INIT;
    ck_assert_ok(cuabi_texture_get_desc(&back, t));
    ck_assert_int_eq(memcmp(&back, &d, sizeof d), 0);
    cuabi_texture_info info = CUABI_TEXTURE_INFO_INIT;
    ck_assert_ok(cuabi_texture_get_info(&info, t));
    ck_assert_int_eq(info.resource, CUABI_TEXTURE_RESOURCE_ARRAY);
    ck_assert_int_eq(info.format, CUABI_ARRAY_FORMAT_UINT8);
    ck_assert_uint_eq(info.num_channels, 4);
    ck_assert_uint_eq(info.width, 64);
    ck_assert_uint_eq(info.height, 32);
    ck_assert_ptr_eq(info.array, a);
    ck_assert_ptr_null(info.view);
    ck_assert_uint_eq(info.object, tex_value(t));
    ck_assert_uint_ne(info.object, 0);
    /* The texture keeps the array alive. */
    ck_assert_ok(cuabi_array_release(a));
    ck_assert_int_eq(fake_live_arrays, 1);
    ck_assert_ok(cuabi_texture_release(t));
    ck_assert_int_eq(fake_live_texobjs, 0);
    ck_assert_int_eq(fake_live_arrays, 0);
}
END_TEST

START_TEST(the_defaults_read_elements_unfiltered)
{
    cuabi_array *a = array2d(8, 8, CUABI_ARRAY_FORMAT_INT32, 1, 0);
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, NULL));
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fake_tex_last_desc.addressMode[i], CU_TR_ADDRESS_MODE_CLAMP);
    ck_assert_int_eq(fake_tex_last_desc.filterMode, CU_TR_FILTER_MODE_POINT);
    ck_assert_uint_eq(fake_tex_last_desc.flags, CU_TRSF_READ_AS_INTEGER);
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    ck_assert_ok(cuabi_texture_get_desc(&d, t));
    ck_assert_int_eq(d.read_mode, CUABI_TEXTURE_READ_ELEMENT_TYPE);
    cuabi_texture_release(t);
    cuabi_array_release(a);
}
END_TEST

START_TEST(descriptions_that_break_a_rule)
{
    cuabi_array *u8 = array2d(8, 8, CUABI_ARRAY_FORMAT_UINT8, 1, 0);
    cuabi_array *i32 = array2d(8, 8, CUABI_ARRAY_FORMAT_INT32, 1, 0);
    cuabi_texture *t = (cuabi_texture *)0x1;
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.address_mode[1] = CUABI_TEXTURE_ADDRESS_WRAP;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("address_mode[1] is WRAP, which needs normalized coordinates");
    ck_assert_ptr_null(t);
    /* z does not count for a 2-D array. */
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.address_mode[2] = CUABI_TEXTURE_ADDRESS_MIRROR;
    ck_assert_ok(cuabi_texture_create_from_array(&t, u8, &d));
    cuabi_texture_release(t);
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("NORMALIZED_FLOAT to filter");
    d.read_mode = CUABI_TEXTURE_READ_NORMALIZED_FLOAT;
    ck_assert_ok(cuabi_texture_create_from_array(&t, u8, &d));
    cuabi_texture_release(t);
    ck_assert_status(cuabi_texture_create_from_array(&t, i32, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("32-bit integer");
    d.filter_mode = CUABI_TEXTURE_FILTER_POINT;
    ck_assert_status(cuabi_texture_create_from_array(&t, i32, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("8- and 16-bit");
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.max_anisotropy = 17;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.seamless_cubemap = 1;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cube maps");
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.address_mode[0] = (cuabi_texture_address_mode)4;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.filter_mode = (cuabi_texture_filter_mode)2;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.read_mode = (cuabi_texture_read_mode)-1;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_ARGUMENT);
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.version = 0;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_VERSION);
    d.version = CUABI_TEXTURE_DESC_VERSION + 1;
    ck_assert_status(cuabi_texture_create_from_array(&t, u8, &d), CUABI_ERROR_INVALID_VERSION);
    ck_assert_int_eq(fake_live_texobjs, 0);
    cuabi_array_release(i32);
    cuabi_array_release(u8);
}
END_TEST

START_TEST(layered_and_cube_textures)
{
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = ad.height = 16;
    ad.depth = 6;
    ad.format = CUABI_ARRAY_FORMAT_FLOAT32;
    ad.flags = CUABI_ARRAY_CUBEMAP;
    cuabi_array *cube;
    ck_assert_ok(cuabi_array_create(&cube, dev, &ad));
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.seamless_cubemap = 1;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_array(&t, cube, &d));
    ck_assert_uint_eq(fake_tex_last_desc.flags & CU_TRSF_SEAMLESS_CUBEMAP, CU_TRSF_SEAMLESS_CUBEMAP);
    cuabi_texture_release(t);
    cuabi_array_release(cube);
    /* Layers: x and y are coordinates, the layer an index (address_mode[2] free). */
    ad.flags = CUABI_ARRAY_LAYERED;
    ad.depth = 4;
    cuabi_array *layers;
    ck_assert_ok(cuabi_array_create(&layers, dev, &ad));
    d = (cuabi_texture_desc)CUABI_TEXTURE_DESC_INIT;
    d.address_mode[2] = CUABI_TEXTURE_ADDRESS_WRAP;
    ck_assert_ok(cuabi_texture_create_from_array(&t, layers, &d));
    cuabi_texture_info info = CUABI_TEXTURE_INFO_INIT;
    ck_assert_ok(cuabi_texture_get_info(&info, t));
    ck_assert_uint_eq(info.depth, 4);
    cuabi_texture_release(t);
    d.address_mode[1] = CUABI_TEXTURE_ADDRESS_WRAP;
    ck_assert_status(cuabi_texture_create_from_array(&t, layers, &d), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_array_release(layers);
}
END_TEST

START_TEST(mipmapped_textures)
{
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = 32;
    ad.height = 32;
    ad.format = CUABI_ARRAY_FORMAT_FLOAT32;
    cuabi_mipmapped_array *m;
    ck_assert_ok(cuabi_mipmapped_array_create(&m, dev, &ad, 6));
    cuabi_texture *t;
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    ck_assert_status(cuabi_texture_create_from_mipmapped_array(&t, m, &d),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("normalized coordinates");
    d.normalized_coords = 1;
    d.mipmap_filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    d.max_mipmap_level_clamp = 5.0f;
    ck_assert_ok(cuabi_texture_create_from_mipmapped_array(&t, m, &d));
    ck_assert_int_eq(fake_tex_last_res.resType, CU_RESOURCE_TYPE_MIPMAPPED_ARRAY);
    cuabi_texture_info info = CUABI_TEXTURE_INFO_INIT;
    ck_assert_ok(cuabi_texture_get_info(&info, t));
    ck_assert_int_eq(info.resource, CUABI_TEXTURE_RESOURCE_MIPMAPPED_ARRAY);
    ck_assert_ptr_eq(info.mipmapped_array, m);
    ck_assert_ptr_null(info.array);
    ck_assert_ok(cuabi_mipmapped_array_release(m));
    ck_assert_int_eq(fake_live_mipmaps, 1);
    ck_assert_ok(cuabi_texture_release(t));
    ck_assert_int_eq(fake_live_mipmaps, 0);
}
END_TEST

/* ------------------------------------------------------------ views */

START_TEST(textures_over_views_in_place)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 1 << 16, 0, stream));
    /* Linear: 100 float2 from the buffer's start. */
    int64_t s1[2] = { 100, 2 };
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, s1, NULL, 0));
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_view(&t, v, 2, NULL));
    ck_assert_int_eq(fake_tex_last_res.resType, CU_RESOURCE_TYPE_LINEAR);
    ck_assert_int_eq(fake_tex_last_res.res.linear.format, CU_AD_FORMAT_FLOAT);
    ck_assert_uint_eq(fake_tex_last_res.res.linear.numChannels, 2);
    ck_assert_uint_eq(fake_tex_last_res.res.linear.sizeInBytes, 800);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(fake_tex_last_res.res.linear.devPtr, p);
    cuabi_texture_info info = CUABI_TEXTURE_INFO_INIT;
    ck_assert_ok(cuabi_texture_get_info(&info, t));
    ck_assert_int_eq(info.resource, CUABI_TEXTURE_RESOURCE_LINEAR);
    ck_assert_ptr_eq(info.view, v);
    ck_assert_uint_eq(info.address, p);
    /* The texture keeps the view, and so the buffer's memory. */
    cuabi_view_release(v);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_eq(fake_live_allocs, 1);
    cuabi_texture_release(t);
    ck_assert_int_eq(fake_live_allocs, 0);

    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 1 << 16, 0, stream));
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    /* Pitched: 30 x 20 uint16 in rows of 64 elements (128 bytes). */
    int64_t s2[2] = { 20, 30 }, st2[2] = { 64, 1 };
    ck_assert_ok(cuabi_view_create(&v, b, 256, CUABI_DTYPE_UINT, 16, 2, s2, st2, 0));
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.read_mode = CUABI_TEXTURE_READ_NORMALIZED_FLOAT;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    ck_assert_ok(cuabi_texture_create_from_view(&t, v, 1, &d));
    ck_assert_int_eq(fake_tex_last_res.resType, CU_RESOURCE_TYPE_PITCH2D);
    ck_assert_uint_eq(fake_tex_last_res.res.pitch2D.devPtr, p + 256);
    ck_assert_uint_eq(fake_tex_last_res.res.pitch2D.width, 30);
    ck_assert_uint_eq(fake_tex_last_res.res.pitch2D.height, 20);
    ck_assert_uint_eq(fake_tex_last_res.res.pitch2D.pitchInBytes, 128);
    ck_assert_int_eq(fake_tex_last_res.res.pitch2D.format, CU_AD_FORMAT_UNSIGNED_INT16);
    cuabi_texture_release(t);
    cuabi_view_release(v);
    /* What a view may not be. */
    int64_t odd[2] = { 20, 30 }, odd_st[2] = { 40, 1 };    /* 80-byte rows: not 32-aligned */
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 16, 2, odd, odd_st, 0));
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("pitch alignment (32 bytes)");
    cuabi_view_release(v);
    ck_assert_ok(cuabi_view_create(&v, b, 4, CUABI_DTYPE_FLOAT, 32, 1, s1, NULL, 0));
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("texture alignment of 256 bytes");
    cuabi_view_release(v);
    int64_t s3[3] = { 2, 4, 4 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 3, s3, NULL, 0));
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("copy 3-D data into an array");
    /* The same view as 2 rows of 4 float4: pitched memory. */
    ck_assert_ok(cuabi_texture_create_from_view(&t, v, 4, NULL));
    ck_assert_int_eq(fake_tex_last_res.resType, CU_RESOURCE_TYPE_PITCH2D);
    ck_assert_uint_eq(fake_tex_last_res.res.pitch2D.numChannels, 4);
    ck_assert_uint_eq(fake_tex_last_res.res.pitch2D.pitchInBytes, 64);
    cuabi_texture_release(t);
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 3, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_view_release(v);
    int64_t cols[2] = { 1, 64 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, s2, cols, 0));
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not contiguous");
    cuabi_view_release(v);
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 64, 1, s1, NULL, 0));
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("no array format");
    cuabi_view_release(v);
    float host[16];
    v = view_at(kDLCPU, 0, (uintptr_t)host, CUABI_DTYPE_FLOAT, 32, 1, s1, NULL);
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_texture_create_from_image");
    cuabi_view_release(v);
    ck_assert_int_eq(fake_live_texobjs, 0);
    cuabi_buffer_destroy(b);
}
END_TEST

START_TEST(an_image_becomes_a_texture_in_one_call)
{
    uint8_t img[4][6][4];
    for (int i = 0; i < 96; i++)
        (&img[0][0][0])[i] = (uint8_t)(3 * i);
    int64_t shape[3] = { 4, 6, 4 };
    cuabi_view *v = view_at(kDLCPU, 0, (uintptr_t)img, CUABI_DTYPE_UINT, 8, 3, shape, NULL);
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.read_mode = CUABI_TEXTURE_READ_NORMALIZED_FLOAT;
    d.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    cuabi_texture *t;
    ck_assert_ok(cuabi_texture_create_from_image(&t, v, 4, 0, &d, NULL));
    cuabi_view_release(v);
    ck_assert_int_eq(fake_live_arrays, 1);
    cuabi_texture_info info = CUABI_TEXTURE_INFO_INIT;
    ck_assert_ok(cuabi_texture_get_info(&info, t));
    ck_assert_int_eq(info.resource, CUABI_TEXTURE_RESOURCE_ARRAY);
    ck_assert_uint_eq(info.width, 6);
    ck_assert_uint_eq(info.height, 4);
    ck_assert_uint_eq(info.num_channels, 4);
    uintptr_t h;
    ck_assert_ok(cuabi_array_native_handle(&h, info.array));
    ck_assert_int_eq(fake_array_data((CUarray)h, 5, 3, 0)[2], img[3][5][2]);
    ck_assert_ok(cuabi_texture_release(t));
    ck_assert_int_eq(fake_live_arrays, 0);
    /* A description the image's format cannot have: nothing is left. */
    int32_t ints[8];
    int64_t s1[1] = { 8 };
    v = view_at(kDLCPU, 0, (uintptr_t)ints, CUABI_DTYPE_INT, 32, 1, s1, NULL);
    ck_assert_status(cuabi_texture_create_from_image(&t, v, 1, 0, &d, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fake_live_arrays, 0);
    cuabi_view_release(v);
}
END_TEST

/* ------------------------------------------------------------ surfaces */

START_TEST(surfaces)
{
    cuabi_array *plain = array2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1, 0);
    cuabi_surface *s = (cuabi_surface *)0x1;
    ck_assert_status(cuabi_surface_create(&s, plain), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("CUABI_ARRAY_SURFACE_LDST");
    ck_assert_ptr_null(s);
    cuabi_array *a = array2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    ck_assert_ok(cuabi_surface_create(&s, a));
    ck_assert_int_eq(fake_live_surfobjs, 1);
    uint64_t v;
    ck_assert_ok(cuabi_surface_object(&v, s));
    ck_assert_uint_ne(v, 0);
    cuabi_array *got;
    ck_assert_ok(cuabi_surface_array(&got, s));
    ck_assert_ptr_eq(got, a);
    ck_assert_ok(cuabi_array_release(a));
    ck_assert_int_eq(fake_live_arrays, 2);      /* kept by the surface */
    ck_assert_ok(cuabi_surface_release(s));
    ck_assert_int_eq(fake_live_arrays, 1);
    /* A level of a surface-writable mipmapped array. */
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = ad.height = 8;
    ad.format = CUABI_ARRAY_FORMAT_FLOAT32;
    ad.flags = CUABI_ARRAY_SURFACE_LDST;
    cuabi_mipmapped_array *m;
    ck_assert_ok(cuabi_mipmapped_array_create(&m, dev, &ad, 3));
    cuabi_array *l1;
    ck_assert_ok(cuabi_mipmapped_array_get_level(&l1, m, 1));
    ck_assert_ok(cuabi_surface_create(&s, l1));
    cuabi_array_release(l1);
    cuabi_mipmapped_array_release(m);
    ck_assert_int_eq(fake_live_mipmaps, 1);
    cuabi_surface_release(s);
    ck_assert_int_eq(fake_live_mipmaps, 0);
    ck_assert_status(cuabi_surface_create(NULL, plain), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_surface_create(&s, (cuabi_array *)dev), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_surface_object(&v, (cuabi_surface *)plain), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_surface_array(&got, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_array_release(plain);
}
END_TEST

/* ------------------------------------------------------------ argument packs */

static cuabi_launch_config on_stream(void)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.stream = stream;
    return c;
}

START_TEST(pack_slots_take_the_objects_at_launch)
{
    cuabi_array *a = array2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    cuabi_texture *t;
    cuabi_surface *s;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, NULL));
    ck_assert_ok(cuabi_surface_create(&s, a));
    uint64_t sv;
    ck_assert_ok(cuabi_surface_object(&sv, s));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, handle, u64"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_surface(p, 1, s));
    ck_assert_ok(cuabi_argpack_set_texture(p, 2, t));         /* a u64 parameter too */
    cuabi_launch_config c = on_stream();
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(seen[0], tex_value(t));
    ck_assert_uint_eq(seen[1], sv);
    ck_assert_uint_eq(seen[2], tex_value(t));
    /* The pack holds handles: a raw value replaces one. */
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, 77));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(seen[2], 77);
    uint64_t h;
    ck_assert_ok(cuabi_argpack_get_bytes(&h, 8, p, 0));
    ck_assert_uint_eq(h, (uintptr_t)t);
    /* A released texture fails the launch, naming the slot. */
    ck_assert_ok(cuabi_texture_release(t));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 0 holds a texture that was released");
    /* Slots that cannot take an object, and wrong handles. */
    cuabi_argpack *q;
    ck_assert_ok(cuabi_argpack_create(&q, "f32, ptr, u32, buffer"));
    for (size_t i = 0; i < 4; i++) {
        ck_assert_status(cuabi_argpack_set_surface(q, i, s), CUABI_ERROR_ARGUMENT_MISMATCH);
        ck_assert_error_mentions("not handle");
    }
    ck_assert_status(cuabi_argpack_set_surface(q, 4, s), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_surface(p, 0, (cuabi_surface *)a), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_set_texture(p, 0, (cuabi_texture *)s), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_set_texture((cuabi_argpack *)s, 0, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    /* A whole blob of raw values drops the references. */
    uint64_t blob[3] = { 1, 2, 3 };
    ck_assert_ok(cuabi_argpack_set_blob(p, blob, sizeof blob));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(seen[0], 1);
    ck_assert_uint_eq(seen[1], 2);
    cuabi_argpack_release(q);
    cuabi_argpack_release(p);
    cuabi_surface_release(s);
    cuabi_array_release(a);
}
END_TEST

START_TEST(a_captured_launch_keeps_its_objects)
{
    cuabi_array *a = array2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    cuabi_texture *t;
    cuabi_surface *s;
    ck_assert_ok(cuabi_texture_create_from_array(&t, a, NULL));
    ck_assert_ok(cuabi_surface_create(&s, a));
    uint64_t tv = tex_value(t);
    cuabi_array_release(a);
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "handle, handle, u64"));
    ck_assert_ok(cuabi_argpack_set_texture(p, 0, t));
    ck_assert_ok(cuabi_argpack_set_surface(p, 1, s));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, 5));
    cuabi_launch_config c = on_stream();
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    ck_assert_ok(cuabi_texture_release(t));
    ck_assert_ok(cuabi_surface_release(s));
    cuabi_argpack_release(p);
    ck_assert_int_eq(fake_live_texobjs, 1);
    ck_assert_int_eq(fake_live_surfobjs, 1);
    ck_assert_int_eq(fake_live_arrays, 1);
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_uint_eq(seen[0], tv);
    ck_assert_uint_eq(seen[2], 5);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    ck_assert_int_eq(fake_live_texobjs, 0);
    ck_assert_int_eq(fake_live_surfobjs, 0);
    ck_assert_int_eq(fake_live_arrays, 0);
}
END_TEST

/* ------------------------------------------------------------ failures */

START_TEST(driver_failures_leave_nothing)
{
    cuabi_array *a = array2d(8, 8, CUABI_ARRAY_FORMAT_FLOAT32, 1, CUABI_ARRAY_SURFACE_LDST);
    cuabi_texture *t;
    cuabi_surface *s;
    cuabi__fault_arm("cuTexObjectCreate", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_texture_create_from_array(&t, a, NULL), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuTexObjectCreate");
    cuabi__fault_arm("cuSurfObjectCreate", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_surface_create(&s, a), CUABI_ERROR_CUDA);
    cuabi__fault_arm("cuDeviceGetAttribute", 1, false, CUDA_ERROR_INVALID_VALUE);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 4096, 0, stream));
    int64_t shape[1] = { 16 };
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver *drv = cuabi__driver_for_test();
    PFN_cuTexObjectDestroy_v5000 td = drv->cuTexObjectDestroy;
    drv->cuTexObjectDestroy = NULL;
    ck_assert_status(cuabi_texture_create_from_array(&t, a, NULL), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_status(cuabi_texture_create_from_view(&t, v, 1, NULL),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    drv->cuTexObjectDestroy = td;
    PFN_cuSurfObjectDestroy_v5000 sd = drv->cuSurfObjectDestroy;
    drv->cuSurfObjectDestroy = NULL;
    ck_assert_status(cuabi_surface_create(&s, a), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    drv->cuSurfObjectDestroy = sd;
    ck_assert_int_eq(fake_live_texobjs, 0);
    ck_assert_int_eq(fake_live_surfobjs, 0);
    cuabi_view_release(v);
    cuabi_buffer_destroy(b);
    cuabi_array_release(a);
}
END_TEST

START_TEST(null_and_wrong_handles)
{
    cuabi_texture *t;
    uint64_t v;
    cuabi_texture_info info = CUABI_TEXTURE_INFO_INIT;
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    ck_assert_status(cuabi_texture_create_from_array(NULL, NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_texture_create_from_array(&t, (cuabi_array *)dev, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_texture_create_from_mipmapped_array(&t, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_texture_create_from_view(&t, (cuabi_view *)stream, 1, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_texture_create_from_image(&t, NULL, 1, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_texture_get_info(&info, (cuabi_texture *)dev), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_texture_get_info(NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_texture_get_desc(&d, NULL), CUABI_ERROR_INVALID_HANDLE);
    d.version = 0;
    ck_assert_status(cuabi_texture_get_desc(&d, NULL), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_texture_object(&v, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_texture_object(NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_texture_release((cuabi_texture *)dev), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_surface_release(NULL), CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("texture");
    TCase *tc = tcase_create("fake");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_texture_over_an_array_with_every_setting);
    tcase_add_test(tc, the_defaults_read_elements_unfiltered);
    tcase_add_test(tc, descriptions_that_break_a_rule);
    tcase_add_test(tc, layered_and_cube_textures);
    tcase_add_test(tc, mipmapped_textures);
    tcase_add_test(tc, textures_over_views_in_place);
    tcase_add_test(tc, an_image_becomes_a_texture_in_one_call);
    tcase_add_test(tc, surfaces);
    tcase_add_test(tc, pack_slots_take_the_objects_at_launch);
    tcase_add_test(tc, a_captured_launch_keeps_its_objects);
    tcase_add_test(tc, driver_failures_leave_nothing);
    tcase_add_test(tc, null_and_wrong_handles);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
