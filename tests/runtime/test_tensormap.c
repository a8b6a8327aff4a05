/* TMA tensor maps against the fake driver: what reaches cuTensorMapEncode*
 * (dimensions reversed, byte strides, box, element strides, options), every
 * documented rule broken once (CUABI_ERROR_TENSOR_MAP naming it, nothing
 * encoded), im2col, address replacement, argument packs, device and driver
 * failures, bad handles, allocation failures. Views are borrowed DLTensors
 * of device memory at made-up addresses: nothing is dereferenced. */
#include "testutil.h"
#include "fake_driver.h"
#include "tensormap_cases.h"

static cuabi_device *dev;
static cuabi_tensormap_options opts;

/* The fake device's compute capability (tensor maps need 9.0). */
static int fake_major = 9;
static CUresult CUDAAPI tm_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) {
        *v = fake_major;
        return CUDA_SUCCESS;
    }
    return fake_cuDeviceGetAttribute(v, a, d);
}

static void setup(void)
{
    fake_driver_install();
    fake_driver_install_tensormaps();
    cuabi__driver_for_test()->cuDeviceGetAttribute = tm_attr;
    fake_major = 9;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_tensormap_options_init(&opts, CUABI_TENSORMAP_OPTIONS_VERSION));
}

static void teardown(void)
{
    cuabi_device_release(dev);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* A borrowed view of `ndim` dimensions at `addr` (strides in elements; NULL
 * for row-major) on device `devtype`/`id`. */
static cuabi_view *view_on(int devtype, int id, uintptr_t addr, int code, int bits, int ndim,
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

static cuabi_view *dview(uintptr_t addr, int code, int bits, int ndim, const int64_t *shape,
                         const int64_t *strides)
{
    return view_on(kDLCUDA, 0, addr, code, bits, ndim, shape, strides);
}

static cuabi_view *f32(uintptr_t addr, int ndim, const int64_t *shape, const int64_t *strides)
{
    return dview(addr, CUABI_DTYPE_FLOAT, 32, ndim, shape, strides);
}

/* fuzz_tensormap (merge run): a leading extent-1 dimension of a tensor over
 * 2^40 bytes got a made-up stride of 2^40 or more, which the driver
 * refuses; it now repeats the previous (legal) stride. */
START_TEST(extent_one_dimension_of_a_huge_tensor)
{
    int64_t shape[5] = { 1, 1088, 3829, 2560, 1024 };
    int64_t strides[5] = { 1, 10037493760, 2621440, 1024, 1 };
    cuabi_view *v = dview(0x1000000, CUABI_DTYPE_UINT, 16, 5, shape, strides);
    uint32_t box[5] = { 1, 1, 1, 1, 16 };
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 5, NULL));
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_lt(fake_tm_last.strides[i], 1ull << 40);
        ck_assert_uint_eq(fake_tm_last.strides[i] % 16, 0);
    }
    cuabi_tensormap_release(tm);
    cuabi_view_release(v);
}
END_TEST

START_TEST(tiled_reaches_the_driver_reversed)
{
    /* rows 16..31 of a 64 x 100 float matrix padded to 128 columns, every
     * column: 16 x 100 at stride 128 elements (512 bytes) */
    int64_t shape[2] = { 16, 100 }, strides[2] = { 128, 1 };
    cuabi_view *v = f32(0x200000 + 16 * 512, 2, shape, strides);
    uint32_t box[2] = { 8, 32 };
    opts.element_strides[0] = 2;
    opts.swizzle = CUABI_TENSORMAP_SWIZZLE_128B;
    opts.l2_promotion = CUABI_TENSORMAP_L2_PROMOTION_128B;
    opts.oob_fill = CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &opts));
    ck_assert_int_eq(fake_tm_calls, 1);
    ck_assert_int_eq(fake_tm_last.kind, 1);
    ck_assert_int_eq(fake_tm_last.type, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
    ck_assert_uint_eq(fake_tm_last.rank, 2);
    ck_assert_ptr_eq(fake_tm_last.address, (void *)(0x200000 + 16 * 512));
    ck_assert_uint_eq(fake_tm_last.dims[0], 100);    /* innermost first */
    ck_assert_uint_eq(fake_tm_last.dims[1], 16);
    ck_assert_uint_eq(fake_tm_last.strides[0], 512);
    ck_assert_uint_eq(fake_tm_last.box[0], 32);
    ck_assert_uint_eq(fake_tm_last.box[1], 8);
    ck_assert_uint_eq(fake_tm_last.estrides[0], 1);
    ck_assert_uint_eq(fake_tm_last.estrides[1], 2);
    ck_assert_int_eq(fake_tm_last.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
    ck_assert_int_eq(fake_tm_last.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
    ck_assert_int_eq(fake_tm_last.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    ck_assert_int_eq(fake_tm_last.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
    /* the descriptor the driver wrote, and what the map says of itself */
    uint64_t bytes[16];
    ck_assert_ok(cuabi_tensormap_bytes(bytes, sizeof bytes, tm));
    ck_assert_uint_eq(bytes[0], FAKE_TENSORMAP_MARK);
    ck_assert_uint_eq(bytes[1], 0x200000 + 16 * 512);
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    ck_assert_ok(cuabi_tensormap_get_info(&info, tm));
    ck_assert_int_eq(info.kind, CUABI_TENSORMAP_TILED);
    ck_assert_int_eq(info.data_type, CUABI_TENSORMAP_DATA_TYPE_FLOAT32);
    ck_assert_int_eq(info.rank, 2);
    ck_assert_uint_eq(info.shape[0], 16);
    ck_assert_uint_eq(info.shape[1], 100);
    ck_assert_uint_eq(info.byte_strides[0], 512);
    ck_assert_uint_eq(info.byte_strides[1], 4);
    ck_assert_uint_eq(info.box[0], 8);
    ck_assert_uint_eq(info.element_strides[0], 2);
    ck_assert_int_eq(info.swizzle, CUABI_TENSORMAP_SWIZZLE_128B);
    ck_assert_int_eq(info.device, 0);
    /* the map keeps its view */
    cuabi_view *kept;
    ck_assert_ok(cuabi_tensormap_view(&kept, tm));
    ck_assert_ptr_eq(kept, v);
    ck_assert_ok(cuabi_view_release(v));
    uintptr_t p;
    ck_assert_ok(cuabi_view_data_pointer(&p, kept));
    ck_assert_uint_eq(p, 0x200000 + 16 * 512);
    ck_assert_ok(cuabi_tensormap_release(tm));
    ck_assert_status(cuabi_view_data_pointer(&p, kept), CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(element_types_from_the_view)
{
    static const struct { int code, bits, want; } cases[] = {
        { CUABI_DTYPE_INT, 8, CU_TENSOR_MAP_DATA_TYPE_UINT8 },
        { CUABI_DTYPE_UINT, 8, CU_TENSOR_MAP_DATA_TYPE_UINT8 },
        { CUABI_DTYPE_BOOL, 8, CU_TENSOR_MAP_DATA_TYPE_UINT8 },
        { CUABI_DTYPE_FLOAT8_E4M3FN, 8, CU_TENSOR_MAP_DATA_TYPE_UINT8 },
        { CUABI_DTYPE_INT, 16, CU_TENSOR_MAP_DATA_TYPE_UINT16 },
        { CUABI_DTYPE_FLOAT, 16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16 },
        { CUABI_DTYPE_BFLOAT, 16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 },
        { CUABI_DTYPE_INT, 32, CU_TENSOR_MAP_DATA_TYPE_INT32 },
        { CUABI_DTYPE_UINT, 32, CU_TENSOR_MAP_DATA_TYPE_UINT32 },
        { CUABI_DTYPE_FLOAT, 32, CU_TENSOR_MAP_DATA_TYPE_FLOAT32 },
        { CUABI_DTYPE_INT, 64, CU_TENSOR_MAP_DATA_TYPE_INT64 },
        { CUABI_DTYPE_UINT, 64, CU_TENSOR_MAP_DATA_TYPE_UINT64 },
        { CUABI_DTYPE_FLOAT, 64, CU_TENSOR_MAP_DATA_TYPE_FLOAT64 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t shape[1] = { 256 };
        cuabi_view *v = dview(0x100000, cases[i].code, cases[i].bits, 1, shape, NULL);
        uint32_t box[1] = { (uint32_t)(16 / (cases[i].bits / 8)) };
        cuabi_tensormap *tm;
        ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 1, NULL));
        ck_assert_int_eq(fake_tm_last.type, cases[i].want);
        cuabi_tensormap_release(tm);
        cuabi_view_release(v);
    }
    /* another type of the same size; a different size; complex */
    int64_t shape[1] = { 64 };
    uint32_t box[1] = { 4 };
    cuabi_view *v = f32(0x100000, 1, shape, NULL);
    cuabi_tensormap *tm;
    opts.data_type = CUABI_TENSORMAP_DATA_TYPE_TFLOAT32;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 1, &opts));
    ck_assert_int_eq(fake_tm_last.type, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32);
    cuabi_tensormap_release(tm);
    opts.data_type = CUABI_TENSORMAP_DATA_TYPE_FLOAT64;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 1, &opts), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("options.data_type FLOAT64 has 8-byte elements, the view's have 4");
    opts.data_type = 13;   /* CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B */
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 1, &opts), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("packed 4- and 6-bit types are not supported");
    cuabi_view_release(v);
    v = dview(0x100000, CUABI_DTYPE_COMPLEX, 64, 1, shape, NULL);
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 1, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("has no TMA element type");
    opts.data_type = CUABI_TENSORMAP_DATA_TYPE_UINT64;
    uint32_t box2[1] = { 2 };
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box2, 1, &opts));
    cuabi_tensormap_release(tm);
    cuabi_view_release(v);
}
END_TEST

/* One broken rule per case: CUABI_ERROR_TENSOR_MAP naming it, nothing encoded. */
START_TEST(each_rule_named)
{
    enum { MAXD = 6 };
    static const struct {
        const char *what;
        uintptr_t addr;
        int bits, ndim;
        int64_t shape[MAXD], strides[MAXD];   /* strides all 0: row-major */
        uint32_t box[MAXD];
        int box_rank;                         /* 0: ndim */
        int interleave, swizzle, oob, estride1, code;
        const char *says;
    } cases[] = {
        { "misaligned address", 0x100008, 32, 2, { 8, 64 }, { 0 }, { 8, 8 }, 0, 0, 0, 0, 0, 2,
          "the global address 0x100008 (the view's first element) is not 16-byte aligned" },
        { "32B interleave alignment", 0x100010, 32, 3, { 4, 8, 64 }, { 0 }, { 1, 8, 8 }, 0, 2, 1,
          0, 0, 2, "is not 32-byte aligned, as TMA requires with 32-byte interleave" },
        { "stride not a multiple of 16", 0x100000, 32, 2, { 4, 5 }, { 0 }, { 4, 4 }, 0, 0, 0, 0,
          0, 2, "dimension 0 has a stride of 20 bytes, not a multiple of 16" },
        { "32B interleave strides", 0x100000, 32, 3, { 4, 4, 12 }, { 0 }, { 1, 1, 8 }, 0, 2, 1,
          0, 0, 2, "stride of 48 bytes, not a multiple of 32" },
        { "stride of 2^40", 0x100000, 32, 2, { 2, 64 }, { 1ll << 38, 1 }, { 2, 8 }, 0, 0, 0, 0,
          0, 2, "TMA takes strides below 2^40 bytes" },
        { "innermost not contiguous", 0x100000, 32, 2, { 8, 8 }, { 1, 8 }, { 8, 8 }, 0, 0, 0, 0,
          0, 2, "the innermost dimension (1) must be contiguous" },
        { "negative stride", 0x100000, 32, 2, { 8, 8 }, { -8, 1 }, { 8, 8 }, 0, 0, 0, 0, 0, 2,
          "TMA needs positive strides" },
        { "broadcast", 0x100000, 32, 2, { 8, 8 }, { 0, 1 }, { 8, 8 }, 0, 0, 0, 0, 0, 2,
          "TMA needs positive strides" },
        { "empty", 0x100000, 32, 2, { 0, 8 }, { 0 }, { 1, 8 }, 0, 0, 0, 0, 0, 2,
          "dimension 0 of the view has extent 0; TMA takes extents of 1 to 2^32" },
        { "rank 6", 0x100000, 32, 6, { 1, 1, 1, 1, 1, 64 }, { 0 }, { 1, 1, 1, 1, 1, 8 }, 0, 0, 0,
          0, 0, 2, "a tensor map has 1 to 5 dimensions; the view has 6" },
        { "box rank", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 8, 8 }, 3, 0, 0, 0, 0, 2,
          "the box has 3 dimensions, the view 2" },
        { "box 0", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 0, 8 }, 0, 0, 0, 0, 0, 2,
          "box[0] = 0; TMA boxes have 1 to 256 elements per dimension" },
        { "box 257", 0x100000, 32, 2, { 8, 1024 }, { 0 }, { 257, 8 }, 0, 0, 0, 0, 0, 2,
          "box[0] = 257" },
        { "box row not 16 bytes", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 3 }, 0, 0, 0, 0, 0, 2,
          "the box's innermost row (box[1] = 3 elements of 4 bytes) is 12 bytes, not a multiple "
          "of 16" },
        { "swizzle span", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 16 }, 0, 0, 1, 0, 0, 2,
          "the box's innermost row is 64 bytes, longer than the 32B swizzle's span of 32 bytes" },
        { "128B swizzle span", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 64 }, 0, 0, 3, 0, 0, 2,
          "256 bytes, longer than the 128B swizzle's span of 128" },
        { "32B interleave swizzle", 0x100000, 32, 3, { 4, 8, 64 }, { 0 }, { 1, 8, 8 }, 0, 2, 2, 0,
          0, 2, "32-byte interleave requires the 32-byte swizzle (options.swizzle is 64B)" },
        { "interleave rank", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 8 }, 0, 1, 0, 0, 0, 2,
          "an interleaved layout needs rank 3 or more; the view has 2" },
        { "element stride 9", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 8 }, 0, 0, 0, 0, 9, 2,
          "options.element_strides[0] = 9; TMA takes element strides of 1 to 8" },
        { "NaN fill on integers", 0x100000, 32, 2, { 8, 64 }, { 0 }, { 8, 8 }, 0, 0, 0, 1, 0, 0,
          "the NaN out-of-bounds fill needs a floating-point element type, not INT32" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool rowmajor = true;
        for (int d = 0; d < MAXD; d++)
            rowmajor &= cases[i].strides[d] == 0;
        cuabi_view *v = dview(cases[i].addr, cases[i].code, cases[i].bits, cases[i].ndim,
                              cases[i].shape, rowmajor ? NULL : cases[i].strides);
        cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
        o.interleave = cases[i].interleave;
        o.swizzle = cases[i].swizzle;
        o.oob_fill = cases[i].oob;
        o.element_strides[0] = cases[i].estride1;
        cuabi_tensormap *tm = (cuabi_tensormap *)1;
        int rank = cases[i].box_rank ? cases[i].box_rank : cases[i].ndim;
        cuabi_status st = cuabi_tensormap_encode_tiled(&tm, v, cases[i].box, (size_t)rank, &o);
        ck_assert_msg(st == CUABI_ERROR_TENSOR_MAP, "%s: %s: %s", cases[i].what,
                      cuabi_status_name(st), cuabi_last_error()->message);
        ck_assert_msg(strstr(cuabi_last_error()->message, cases[i].says) &&
                          strstr(cuabi_last_error()->message, "cuabi_tensormap_encode_tiled: "),
                      "%s: \"%s\" does not say \"%s\"", cases[i].what,
                      cuabi_last_error()->message, cases[i].says);
        ck_assert_ptr_null(tm);
        cuabi_view_release(v);
    }
    ck_assert_int_eq(fake_tm_calls, 0);
    /* host memory; a dimension of extent 1 whose stride does not matter */
    int64_t shape[3] = { 4, 1, 64 }, odd[3] = { 64, 3, 1 };
    uint32_t box[3] = { 2, 1, 8 };
    cuabi_view *v = view_on(kDLCPU, 0, 0x100000, CUABI_DTYPE_FLOAT, 32, 3, shape, NULL);
    cuabi_tensormap *tm;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 3, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("TMA reads GPU memory; the view is host memory");
    cuabi_view_release(v);
    v = f32(0x100000, 3, shape, odd);
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 3, NULL));
    ck_assert_uint_eq(fake_tm_last.strides[0], 256);   /* 64 floats: the packed stride */
    ck_assert_uint_eq(fake_tm_last.strides[1], 256);
    cuabi_tensormap_release(tm);
    cuabi_view_release(v);
    /* pinned and managed memory are GPU-accessible: device 0 reads them */
    int64_t s1[1] = { 64 };
    uint32_t b1[1] = { 4 };
    v = view_on(kDLCUDAHost, 0, 0x100000, CUABI_DTYPE_FLOAT, 32, 1, s1, NULL);
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, b1, 1, NULL));
    cuabi_tensormap_release(tm);
    cuabi_view_release(v);
}
END_TEST

/* What the real driver encodes (tests/runtime/test_gpu_tensormap.c), cuabi lets through. */
START_TEST(valid_combinations_pass)
{
    for (size_t i = 0; i < TENSORMAP_NUM_VALID_CASES; i++) {
        const tensormap_case *tc = &tensormap_valid_cases[i];
        cuabi_view *v = dview(0x100000, tc->code, tc->bits, tc->ndim, tc->shape, NULL);
        cuabi_tensormap_options o = tensormap_case_options(tc);
        cuabi_tensormap *tm;
        cuabi_status st = cuabi_tensormap_encode_tiled(&tm, v, tc->box, (size_t)tc->ndim, &o);
        ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", tc->what, cuabi_last_error()->message);
        ck_assert_int_eq(fake_tm_last.interleave, (int)tc->interleave);
        cuabi_tensormap_release(tm);
        cuabi_view_release(v);
    }
}
END_TEST

START_TEST(bad_options_and_arguments)
{
    int64_t shape[2] = { 8, 64 };
    uint32_t box[2] = { 8, 8 };
    cuabi_view *v = f32(0x100000, 2, shape, NULL);
    cuabi_tensormap *tm = (cuabi_tensormap *)1;
    cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
    o.swizzle = 7;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("options.swizzle = 7 is not a cuabi_tensormap_swizzle");
    ck_assert_ptr_null(tm);
    o = (cuabi_tensormap_options)CUABI_TENSORMAP_OPTIONS_INIT;
    o.interleave = -1;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_tensormap_options)CUABI_TENSORMAP_OPTIONS_INIT;
    o.l2_promotion = 4;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_tensormap_options)CUABI_TENSORMAP_OPTIONS_INIT;
    o.oob_fill = 2;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_tensormap_options)CUABI_TENSORMAP_OPTIONS_INIT;
    o.version = 0;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_VERSION);
    o.version = 2;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_VERSION);
    o = (cuabi_tensormap_options)CUABI_TENSORMAP_OPTIONS_INIT;
    o.device = 1;   /* the view is memory of device 0 */
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("options.device = 1, but the view is memory of device 0");
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, NULL, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_tensormap_encode_tiled(NULL, v, box, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, NULL, box, 2, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, (cuabi_view *)dev, box, 2, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    /* pinned memory read by device 1 */
    cuabi_view *pinned = view_on(kDLCUDAHost, 0, 0x100000, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL);
    o.device = 1;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, pinned, box, 2, &o));
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    ck_assert_ok(cuabi_tensormap_get_info(&info, tm));
    ck_assert_int_eq(info.device, 1);
    cuabi_tensormap_release(tm);
    o.device = 5;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, pinned, box, 2, &o), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_view_release(pinned);
    ck_assert_int_eq(fake_tm_calls, 1);
    cuabi_view_release(v);
}
END_TEST

START_TEST(im2col_reaches_the_driver)
{
    /* NHWC half: N=2, H=10, W=12, C=64 */
    int64_t shape[4] = { 2, 10, 12, 64 };
    cuabi_view *v = dview(0x300000, CUABI_DTYPE_FLOAT, 16, 4, shape, NULL);
    int lower[2] = { -1, -2 }, upper[2] = { 1, 2 };
    opts.swizzle = CUABI_TENSORMAP_SWIZZLE_128B;
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_im2col(&tm, v, lower, upper, 2, 64, 128, &opts));
    ck_assert_int_eq(fake_tm_last.kind, 2);
    ck_assert_uint_eq(fake_tm_last.rank, 4);
    ck_assert_uint_eq(fake_tm_last.dims[0], 64);      /* C, W, H, N */
    ck_assert_uint_eq(fake_tm_last.dims[1], 12);
    ck_assert_uint_eq(fake_tm_last.dims[3], 2);
    ck_assert_uint_eq(fake_tm_last.strides[0], 128);  /* one pixel: 64 halves */
    ck_assert_uint_eq(fake_tm_last.strides[1], 128 * 12);
    ck_assert_int_eq(fake_tm_last.lower[0], -2);      /* W first */
    ck_assert_int_eq(fake_tm_last.lower[1], -1);
    ck_assert_int_eq(fake_tm_last.upper[0], 2);
    ck_assert_uint_eq(fake_tm_last.channels, 64);
    ck_assert_uint_eq(fake_tm_last.pixels, 128);
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    ck_assert_ok(cuabi_tensormap_get_info(&info, tm));
    ck_assert_int_eq(info.kind, CUABI_TENSORMAP_IM2COL);
    ck_assert_uint_eq(info.box[3], 64);
    ck_assert_uint_eq(info.box[0], 1);
    cuabi_tensormap_release(tm);
    /* the rules of im2col */
    static const struct { int lower0, upper0; size_t spatial; uint32_t ch, px; int swz; const char *says; } bad[] = {
        { -129, 0, 2, 64, 128, 0, "with rank 4 TMA takes -128 to 127" },
        { 0, 128, 2, 64, 128, 0, "are 0 and 128" },
        { 0, 0, 1, 64, 128, 0, "1 corner offsets given, the view has 2 spatial dimensions" },
        { 0, 0, 2, 0, 128, 0, "channels_per_pixel = 0; TMA takes 1 to 256" },
        { 0, 0, 2, 257, 128, 0, "channels_per_pixel = 257" },
        { 0, 0, 2, 64, 0, 0, "pixels_per_column = 0; TMA takes 1 to 1024" },
        { 0, 0, 2, 64, 1025, 0, "pixels_per_column = 1025" },
        { 0, 0, 2, 64, 128, CUABI_TENSORMAP_SWIZZLE_64B,
          "a pixel's channels is 128 bytes, longer than the 64B swizzle's span" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int lo[2] = { bad[i].lower0, 0 }, up[2] = { bad[i].upper0, 0 };
        cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
        o.swizzle = bad[i].swz;
        ck_assert_status(cuabi_tensormap_encode_im2col(&tm, v, lo, up, bad[i].spatial, bad[i].ch,
                                                       bad[i].px, &o), CUABI_ERROR_TENSOR_MAP);
        ck_assert_error_mentions(bad[i].says);
        ck_assert_error_mentions("cuabi_tensormap_encode_im2col: ");
    }
    ck_assert_status(cuabi_tensormap_encode_im2col(&tm, v, NULL, upper, 2, 64, 128, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_view_release(v);
    /* rank 3 and 5 corner ranges; rank 2 has no im2col */
    int64_t s3[3] = { 1, 40000, 16 }, s5[5] = { 1, 4, 4, 4, 16 }, s2[2] = { 4, 16 };
    v = f32(0x300000, 3, s3, NULL);
    int l3[1] = { -32768 }, u3[1] = { 32767 };
    ck_assert_ok(cuabi_tensormap_encode_im2col(&tm, v, l3, u3, 1, 16, 64, NULL));
    cuabi_tensormap_release(tm);
    l3[0] = -32769;
    ck_assert_status(cuabi_tensormap_encode_im2col(&tm, v, l3, u3, 1, 16, 64, NULL), CUABI_ERROR_TENSOR_MAP);
    cuabi_view_release(v);
    v = f32(0x300000, 5, s5, NULL);
    int l5[3] = { -16, 0, 0 }, u5[3] = { 15, 0, 16 };
    ck_assert_status(cuabi_tensormap_encode_im2col(&tm, v, l5, u5, 3, 16, 64, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("with rank 5 TMA takes -16 to 15");
    u5[2] = 15;
    ck_assert_ok(cuabi_tensormap_encode_im2col(&tm, v, l5, u5, 3, 16, 64, NULL));
    ck_assert_int_eq(fake_tm_last.lower[2], -16);     /* D last */
    cuabi_tensormap_release(tm);
    cuabi_view_release(v);
    v = f32(0x300000, 2, s2, NULL);
    ck_assert_status(cuabi_tensormap_encode_im2col(&tm, v, l3, u3, 0, 16, 64, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("an im2col tensor map has 3 to 5 dimensions");
    cuabi_view_release(v);
}
END_TEST

START_TEST(replace_address)
{
    int64_t shape[2] = { 32, 64 }, strides[2] = { 128, 1 }, other_shape[2] = { 32, 32 };
    uint32_t box[2] = { 8, 16 };
    cuabi_view *a = f32(0x400000, 2, shape, strides), *b = f32(0x800000, 2, shape, strides);
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, a, box, 2, NULL));
    ck_assert_ok(cuabi_tensormap_replace_address(tm, b));
    uint64_t bytes[16];
    ck_assert_ok(cuabi_tensormap_bytes(bytes, sizeof bytes, tm));
    ck_assert_uint_eq(bytes[1], 0x800000);
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    ck_assert_ok(cuabi_tensormap_get_info(&info, tm));
    ck_assert_uint_eq(info.address, 0x800000);
    cuabi_view *kept;
    ck_assert_ok(cuabi_tensormap_view(&kept, tm));
    ck_assert_ptr_eq(kept, b);
    /* the old view went with the replacement, the new one stays */
    ck_assert_ok(cuabi_view_release(a));
    ck_assert_ok(cuabi_view_release(b));
    ck_assert_ok(cuabi_view_nbytes(&(uint64_t){ 0 }, kept));
    /* only the address may change */
    cuabi_view *c = f32(0x400000, 2, other_shape, strides);
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("only the address may change");
    cuabi_view_release(c);
    int64_t packed[2] = { 64, 1 };
    c = f32(0x400000, 2, shape, packed);
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("stride 256 bytes");
    cuabi_view_release(c);
    c = f32(0x400004, 2, shape, strides);
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("not 16-byte aligned");
    cuabi_view_release(c);
    c = dview(0x400000, CUABI_DTYPE_FLOAT, 64, 2, shape, strides);
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("8-byte elements, the tensor map 2 of 4");
    cuabi_view_release(c);
    c = view_on(kDLCUDA, 1, 0x400000, CUABI_DTYPE_FLOAT, 32, 2, shape, strides);
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("the view is memory of device 1, the tensor map was encoded for device 0");
    cuabi_view_release(c);
    /* the driver refuses: the map is as it was */
    c = f32(0xA00000, 2, shape, strides);
    fake_tm_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_TENSOR_MAP);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    fake_tm_result = CUDA_SUCCESS;
    ck_assert_ok(cuabi_tensormap_bytes(bytes, sizeof bytes, tm));
    ck_assert_uint_eq(bytes[1], 0x800000);
    /* without the entry point */
    cuabi__driver_for_test()->cuTensorMapReplaceAddress = NULL;
    ck_assert_status(cuabi_tensormap_replace_address(tm, c), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuTensorMapReplaceAddress");
    cuabi_view_release(c);
    ck_assert_status(cuabi_tensormap_replace_address(tm, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_replace_address(NULL, kept), CUABI_ERROR_INVALID_HANDLE);
    cuabi_tensormap_release(tm);
}
END_TEST

START_TEST(packs_take_the_descriptor_by_value)
{
    int64_t shape[1] = { 64 };
    uint32_t box[1] = { 16 };
    cuabi_view *v = f32(0x500000, 1, shape, NULL);
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 1, NULL));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, tensormap, i32"));
    ck_assert_ok(cuabi_argpack_set_tensormap(p, 1, tm));
    uint64_t got[16], want[16];
    ck_assert_ok(cuabi_argpack_get_bytes(got, sizeof got, p, 1));
    ck_assert_ok(cuabi_tensormap_bytes(want, sizeof want, tm));
    ck_assert_mem_eq(got, want, sizeof got);
    size_t off;
    ck_assert_ok(cuabi_argpack_slot_offset(&off, p, 1));
    ck_assert_uint_eq(off, 64);
    ck_assert_status(cuabi_argpack_set_tensormap(p, 0, tm), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("slot 0 is not a tensormap slot");
    ck_assert_status(cuabi_argpack_set_tensormap(p, 3, tm), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_tensormap(p, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_set_tensormap(NULL, 1, tm), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_set_tensormap(p, 1, (cuabi_tensormap *)v), CUABI_ERROR_INVALID_HANDLE);
    cuabi_argpack_release(p);
    /* a pack from a kernel's parameter info: a raw 128-byte slot */
    size_t sizes[2] = { 8, 128 }, offs[2] = { 0, 64 };
    ck_assert_ok(cuabi_argpack_create_from_sizes(&p, sizes, offs, 2));
    ck_assert_ok(cuabi_argpack_set_tensormap(p, 1, tm));
    ck_assert_ok(cuabi_argpack_get_bytes(got, sizeof got, p, 1));
    ck_assert_mem_eq(got, want, sizeof got);
    ck_assert_status(cuabi_argpack_set_tensormap(p, 0, tm), CUABI_ERROR_ARGUMENT_MISMATCH);
    cuabi_argpack_release(p);
    cuabi_tensormap_release(tm);
    cuabi_view_release(v);
}
END_TEST

START_TEST(device_and_driver_failures)
{
    int64_t shape[2] = { 8, 64 };
    uint32_t box[2] = { 8, 8 };
    cuabi_view *v = f32(0x100000, 2, shape, NULL);
    cuabi_tensormap *tm = (cuabi_tensormap *)1;
    fake_major = 8;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("tensor maps need a GPU of compute capability 9.0 or newer; device 0 is 8.x");
    ck_assert_ptr_null(tm);
    fake_major = 9;
    /* the driver refuses what every checked rule allows */
    fake_tm_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("cuTensorMapEncodeTiled refused the descriptor");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    fake_tm_result = CUDA_ERROR_OUT_OF_MEMORY;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, NULL), CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    int lo[2] = { 0, 0 }, up[2] = { 0, 0 };
    int64_t nhwc[4] = { 1, 4, 4, 16 };
    cuabi_view *img = f32(0x100000, 4, nhwc, NULL);
    fake_tm_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_tensormap_encode_im2col(&tm, img, lo, up, 2, 16, 16, NULL), CUABI_ERROR_TENSOR_MAP);
    ck_assert_error_mentions("cuTensorMapEncodeIm2col refused");
    fake_tm_result = CUDA_SUCCESS;
    /* a driver without tensor maps */
    cuabi__driver_for_test()->cuTensorMapEncodeTiled = NULL;
    cuabi__driver_for_test()->cuTensorMapEncodeIm2col = NULL;
    ck_assert_status(cuabi_tensormap_encode_tiled(&tm, v, box, 2, NULL), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("does not provide cuTensorMapEncodeTiled");
    ck_assert_status(cuabi_tensormap_encode_im2col(&tm, img, lo, up, 2, 16, 16, NULL), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    fake_driver_install_tensormaps();
    /* every allocation and driver call failing in turn: an error, nothing left behind */
    for (long n = 1;; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_tensormap_encode_tiled(&tm, v, box, 2, NULL);
        long fired = cuabi__alloc_fail_count();
        cuabi__alloc_fail_at(0, false);
        if (!fired) {
            ck_assert_ok(st);
            cuabi_tensormap_release(tm);
            break;
        }
        ck_assert_status(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(tm);
    }
    for (long n = 1;; n++) {
        cuabi__fault_arm(NULL, n, false, CUDA_ERROR_LAUNCH_FAILED);
        cuabi_status st = cuabi_tensormap_encode_tiled(&tm, v, box, 2, NULL);
        long fired = cuabi__fault_count();
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        if (!fired) {
            ck_assert_ok(st);
            cuabi_tensormap_release(tm);
            break;
        }
        ck_assert_status(st, CUABI_ERROR_CUDA);
        ck_assert_ptr_null(tm);
    }
    cuabi_view_release(img);
    cuabi_view_release(v);
}
END_TEST

START_TEST(bad_handles_and_queries)
{
    int64_t shape[1] = { 64 };
    uint32_t box[1] = { 16 };
    cuabi_view *v = f32(0x100000, 1, shape, NULL);
    cuabi_tensormap *tm;
    ck_assert_ok(cuabi_tensormap_encode_tiled(&tm, v, box, 1, NULL));
    cuabi_tensormap *dead = tm;
    ck_assert_ok(cuabi_tensormap_retain(tm));
    ck_assert_ok(cuabi_tensormap_release(tm));
    uint64_t bytes[16];
    ck_assert_status(cuabi_tensormap_bytes(bytes, 64, tm), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("size is 64; a tensor map is 128 bytes");
    ck_assert_status(cuabi_tensormap_bytes(NULL, 128, tm), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    info.version = 0;
    ck_assert_status(cuabi_tensormap_get_info(&info, tm), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_tensormap_get_info(NULL, tm), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_view *kept;
    ck_assert_status(cuabi_tensormap_view(NULL, tm), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_tensormap_release(tm));
    info.version = CUABI_TENSORMAP_INFO_VERSION;
    ck_assert_status(cuabi_tensormap_bytes(bytes, 128, dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_get_info(&info, dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_view(&kept, dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_replace_address(dead, v), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_retain(dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_release(dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_bytes(bytes, 128, (cuabi_tensormap *)v), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_tensormap_get_info(&info, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_view_release(v);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("tensormap");
    TCase *tc = tcase_create("tensormap");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tiled_reaches_the_driver_reversed);
    tcase_add_test(tc, extent_one_dimension_of_a_huge_tensor);
    tcase_add_test(tc, element_types_from_the_view);
    tcase_add_test(tc, each_rule_named);
    tcase_add_test(tc, valid_combinations_pass);
    tcase_add_test(tc, bad_options_and_arguments);
    tcase_add_test(tc, im2col_reaches_the_driver);
    tcase_add_test(tc, replace_address);
    tcase_add_test(tc, packs_take_the_descriptor_by_value);
    tcase_add_test(tc, device_and_driver_failures);
    tcase_add_test(tc, bad_handles_and_queries);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
