/* Argument packs: layouts against the C compiler's own (offsetof/sizeof),
 * every type, nested and aligned structs, setters, the blob, errors. */
#include "testutil.h"
#include "runtime/argpack.h"

#include <stddef.h>
#include <stdint.h>

#define ALIGNED(n) __attribute__((aligned(n)))

static size_t slot_off(cuabi_argpack *p, size_t i)
{
    size_t v = 0;
    ck_assert_ok(cuabi_argpack_slot_offset(&v, p, i));
    return v;
}
static size_t slot_size(cuabi_argpack *p, size_t i)
{
    size_t v = 0;
    ck_assert_ok(cuabi_argpack_slot_size(&v, p, i));
    return v;
}
static size_t blob_size(cuabi_argpack *p)
{
    size_t v = 0;
    ck_assert_ok(cuabi_argpack_blob_size(&v, p));
    return v;
}
static cuabi_arg_info item(cuabi_argpack *p, size_t i)
{
    cuabi_arg_info info = CUABI_ARG_INFO_INIT;
    ck_assert_ok(cuabi_argpack_item(&info, p, i));
    return info;
}

#define CHECK_SLOT(p, i, T, m)                                        \
    do {                                                              \
        ck_assert_uint_eq(slot_off(p, i), offsetof(T, m));            \
        ck_assert_uint_eq(slot_size(p, i), sizeof(((T *)0)->m));      \
    } while (0)

struct s4 { float a, b, c; int d; };
struct issue_sig { uint64_t p; int32_t i; float f; struct s4 s; };

START_TEST(issue_signature_matches_c)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, i32, f32, struct{f32, f32, f32, i32}"));
    size_t n;
    ck_assert_ok(cuabi_argpack_count(&n, p));
    ck_assert_uint_eq(n, 4);
    CHECK_SLOT(p, 0, struct issue_sig, p);
    CHECK_SLOT(p, 1, struct issue_sig, i);
    CHECK_SLOT(p, 2, struct issue_sig, f);
    CHECK_SLOT(p, 3, struct issue_sig, s);
    ck_assert_uint_eq(blob_size(p), sizeof(struct issue_sig));
    ck_assert_ok(cuabi_argpack_item_count(&n, p));
    ck_assert_uint_eq(n, 8);
    cuabi_arg_info s = item(p, 3);
    ck_assert_int_eq(s.kind, CUABI_ARG_STRUCT);
    ck_assert_uint_eq(s.member_count, 4);
    ck_assert_uint_eq(s.align, _Alignof(struct s4));
    cuabi_arg_info d = item(p, 7);
    ck_assert_int_eq(d.kind, CUABI_ARG_I32);
    ck_assert_uint_eq(d.offset, offsetof(struct s4, d));
    ck_assert_uint_eq(d.slot, 3);
    ck_assert_int_eq(d.depth, 1);
    cuabi_argpack_release(p);
}
END_TEST

typedef struct ALIGNED(8) { float re, im; } c64_t;
typedef struct ALIGNED(16) { double re, im; } c128_t;
typedef struct ALIGNED(64) { uint64_t v[16]; } tensormap_t;
struct every {
    int8_t a; int16_t b; int32_t c; int64_t d;
    uint8_t e; uint16_t f; uint32_t g; uint64_t h;
    uint16_t half; uint16_t bf; float fl; double db;
    c64_t c64; c128_t c128; _Bool bo; uint64_t ptr; uint64_t buf; uint64_t view;
    uint64_t handle; tensormap_t tm; int8_t tail;
};

START_TEST(every_type_matches_c)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p,
        "i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, c64, c128, bool, "
        "ptr, buffer, view, handle, tensormap, i8"));
    CHECK_SLOT(p, 0, struct every, a);
    CHECK_SLOT(p, 1, struct every, b);
    CHECK_SLOT(p, 2, struct every, c);
    CHECK_SLOT(p, 3, struct every, d);
    CHECK_SLOT(p, 4, struct every, e);
    CHECK_SLOT(p, 5, struct every, f);
    CHECK_SLOT(p, 6, struct every, g);
    CHECK_SLOT(p, 7, struct every, h);
    CHECK_SLOT(p, 8, struct every, half);
    CHECK_SLOT(p, 9, struct every, bf);
    CHECK_SLOT(p, 10, struct every, fl);
    CHECK_SLOT(p, 11, struct every, db);
    CHECK_SLOT(p, 12, struct every, c64);
    CHECK_SLOT(p, 13, struct every, c128);
    CHECK_SLOT(p, 14, struct every, bo);
    CHECK_SLOT(p, 15, struct every, ptr);
    CHECK_SLOT(p, 16, struct every, buf);
    CHECK_SLOT(p, 17, struct every, view);
    CHECK_SLOT(p, 18, struct every, handle);
    CHECK_SLOT(p, 19, struct every, tm);
    CHECK_SLOT(p, 20, struct every, tail);
    ck_assert_uint_eq(blob_size(p), sizeof(struct every));
    ck_assert_uint_eq(item(p, 19).align, 64);
    cuabi_argpack_release(p);
}
END_TEST

struct inner { int16_t x; double y; };
struct outer { int8_t a; struct inner in; uint8_t b; };
struct nested_sig { int8_t c; struct outer o; _Bool z; };

START_TEST(nested_structs_match_c)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, " i8 ,struct { i8, struct{i16, f64}, u8 }, bool "));
    CHECK_SLOT(p, 0, struct nested_sig, c);
    CHECK_SLOT(p, 1, struct nested_sig, o);
    CHECK_SLOT(p, 2, struct nested_sig, z);
    ck_assert_uint_eq(blob_size(p), sizeof(struct nested_sig));
    /* items: 0 i8, 1 struct, 2 i8, 3 struct, 4 i16, 5 f64, 6 u8, 7 bool */
    ck_assert_uint_eq(item(p, 2).offset, offsetof(struct outer, a));
    ck_assert_uint_eq(item(p, 3).offset, offsetof(struct outer, in));
    ck_assert_uint_eq(item(p, 3).size, sizeof(struct inner));
    ck_assert_uint_eq(item(p, 4).offset, offsetof(struct outer, in.x));
    ck_assert_uint_eq(item(p, 5).offset, offsetof(struct outer, in.y));
    ck_assert_int_eq(item(p, 5).depth, 2);
    ck_assert_uint_eq(item(p, 6).offset, offsetof(struct outer, b));
    ck_assert_uint_eq(item(p, 7).slot, 2);
    cuabi_argpack_release(p);
}
END_TEST

struct ALIGNED(16) v3 { float x, y, z; };
typedef struct ALIGNED(16) { int x, y, z, w; } int4_t;
typedef struct ALIGNED(8) { float x, y; } float2_t;
typedef struct ALIGNED(16) { double x, y; } double2_t;
struct aligned_sig {
    int32_t a; struct v3 v; float b; int4_t i4; float c; float2_t f2; int8_t d; double2_t d2;
    int8_t e; ALIGNED(32) float f;
};

START_TEST(aligned_and_vector_types_match_c)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p,
        "i32, align(16) struct{f32, f32, f32}, f32, int4, f32, float2, i8, double2, i8, align(32) f32"));
    CHECK_SLOT(p, 0, struct aligned_sig, a);
    CHECK_SLOT(p, 1, struct aligned_sig, v);
    CHECK_SLOT(p, 2, struct aligned_sig, b);
    CHECK_SLOT(p, 3, struct aligned_sig, i4);
    CHECK_SLOT(p, 4, struct aligned_sig, c);
    CHECK_SLOT(p, 5, struct aligned_sig, f2);
    CHECK_SLOT(p, 6, struct aligned_sig, d);
    CHECK_SLOT(p, 7, struct aligned_sig, d2);
    CHECK_SLOT(p, 8, struct aligned_sig, e);
    CHECK_SLOT(p, 9, struct aligned_sig, f);
    ck_assert_uint_eq(blob_size(p), sizeof(struct aligned_sig));
    /* A plain struct of four ints is only 4-aligned: the point of int4. */
    cuabi_argpack *q;
    ck_assert_ok(cuabi_argpack_create(&q, "i32, struct{i32, i32, i32, i32}"));
    ck_assert_uint_eq(slot_off(q, 1), 4);
    cuabi_argpack_release(q);
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(from_types_matches_signature)
{
    cuabi_arg_type t[6];
    for (int i = 0; i < 6; i++)
        ck_assert_ok(cuabi_arg_type_init(&t[i], CUABI_ARG_TYPE_VERSION));
    t[0].kind = CUABI_ARG_PTR;
    t[1].kind = CUABI_ARG_STRUCT; t[1].member_count = 2; t[1].align = 16;
    t[2].kind = CUABI_ARG_F32;
    t[3].kind = CUABI_ARG_STRUCT; t[3].member_count = 1;
    t[4].kind = CUABI_ARG_I64;
    t[5].kind = CUABI_ARG_RAW; t[5].size = 3;
    cuabi_argpack *a, *b;
    ck_assert_ok(cuabi_argpack_create_from_types(&a, t, 6));
    ck_assert_ok(cuabi_argpack_create(&b, "ptr, align(16) struct{f32, struct{i64}}"));
    size_t n;
    ck_assert_ok(cuabi_argpack_count(&n, a));
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(slot_off(a, 1), slot_off(b, 1));
    ck_assert_uint_eq(slot_size(a, 1), 16);
    ck_assert_uint_eq(item(a, 4).offset, 8);
    ck_assert_uint_eq(slot_off(a, 2), 32);
    ck_assert_uint_eq(slot_size(a, 2), 3);
    ck_assert_uint_eq(blob_size(a), 48); /* rounded to the 16-byte alignment */
    cuabi_argpack_release(a);
    cuabi_argpack_release(b);

    /* bad descriptors */
    cuabi_argpack *c = (cuabi_argpack *)1;
    t[1].member_count = 9;
    ck_assert_status(cuabi_argpack_create_from_types(&c, t, 6), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("member_count");
    ck_assert_ptr_null(c);
    t[1].member_count = 2;
    t[2].version = 0;
    ck_assert_status(cuabi_argpack_create_from_types(&c, t, 6), CUABI_ERROR_INVALID_VERSION);
    ck_assert_error_mentions("types[2]");
    t[2].version = CUABI_ARG_TYPE_VERSION;
    t[2].align = 3;
    ck_assert_status(cuabi_argpack_create_from_types(&c, t, 6), CUABI_ERROR_INVALID_ARGUMENT);
    t[2].align = 0;
    t[5].size = 0;
    ck_assert_status(cuabi_argpack_create_from_types(&c, t, 6), CUABI_ERROR_INVALID_ARGUMENT);
    t[5].size = 3;
    t[0].kind = (cuabi_arg_kind)99;
    ck_assert_status(cuabi_argpack_create_from_types(&c, t, 6), CUABI_ERROR_INVALID_ARGUMENT);
    t[0].kind = CUABI_ARG_STRUCT;
    t[0].member_count = 0;
    ck_assert_status(cuabi_argpack_create_from_types(&c, t, 6), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_create_from_types(&c, NULL, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_create_from_types(NULL, t, 6), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_create_from_types(&c, NULL, 0));
    ck_assert_ok(cuabi_argpack_count(&n, c));
    ck_assert_uint_eq(n, 0);
    cuabi_argpack_release(c);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

START_TEST(from_sizes)
{
    size_t sizes[] = { 8, 4, 4, 16 }, offsets[] = { 0, 8, 12, 16 };
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create_from_sizes(&p, sizes, offsets, 4));
    ck_assert_uint_eq(slot_off(p, 3), 16);
    ck_assert_uint_eq(blob_size(p), 32);
    cuabi_arg_kind k;
    ck_assert_ok(cuabi_argpack_slot_kind(&k, p, 3));
    ck_assert_int_eq(k, CUABI_ARG_RAW);
    cuabi_argpack_release(p);
    ck_assert_ok(cuabi_argpack_create_from_sizes(&p, sizes, NULL, 4));
    ck_assert_uint_eq(slot_off(p, 3), 16);
    cuabi_argpack_release(p);
    size_t bad_off[] = { 0, 8, 13, 16 };
    ck_assert_status(cuabi_argpack_create_from_sizes(&p, sizes, bad_off, 4), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("offsets[2]");
    ck_assert_ptr_null(p);
    size_t zero[] = { 0 };
    ck_assert_status(cuabi_argpack_create_from_sizes(&p, zero, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_create_from_sizes(&p, NULL, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

/* Issue 29: sizes near SIZE_MAX wrapped libffi's layout (it adds and
 * rounds without checks) to a few bytes, whose slots then pointed before or
 * past the storage; a member_count near SIZE_MAX was allocated for before
 * the array was seen to end. Both are refused up front. */
START_TEST(layouts_that_overflow_are_refused)
{
    cuabi_arg_type t[3];
    for (int i = 0; i < 3; i++)
        ck_assert_ok(cuabi_arg_type_init(&t[i], CUABI_ARG_TYPE_VERSION));
    t[0].kind = CUABI_ARG_RAW; t[0].size = SIZE_MAX - 7;          /* 2^64 - 8 */
    t[1].kind = CUABI_ARG_RAW; t[1].size = 16; t[1].align = 8;   /* ends at 2^64 + 8 */
    cuabi_argpack *p = (cuabi_argpack *)1;
    ck_assert_status(cuabi_argpack_create_from_types(&p, t, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("sizes overflow");
    ck_assert_ptr_null(p);
    /* the final rounding to the alignment wraps */
    t[0].size = SIZE_MAX - 2;
    t[1].kind = CUABI_ARG_RAW; t[1].size = 1; t[1].align = 0;
    t[2].kind = CUABI_ARG_I64;
    ck_assert_status(cuabi_argpack_create_from_types(&p, t, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("sizes overflow");
    /* inside a struct, with alignment raised by align */
    t[0].kind = CUABI_ARG_STRUCT; t[0].member_count = 1; t[0].align = 4096; t[0].size = 0;
    t[1].kind = CUABI_ARG_RAW; t[1].size = SIZE_MAX - 100; t[1].align = 0;
    ck_assert_status(cuabi_argpack_create_from_types(&p, t, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("sizes overflow");
    /* the same through sizes, without and with offsets */
    size_t sizes[2] = { SIZE_MAX - 7, 16 }, offsets[2] = { 0, SIZE_MAX - 7 };
    ck_assert_status(cuabi_argpack_create_from_sizes(&p, sizes, NULL, 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_create_from_sizes(&p, sizes, offsets, 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    /* a member_count past the end of the array, however large */
    t[0].kind = CUABI_ARG_STRUCT; t[0].member_count = SIZE_MAX; t[0].align = 0;
    t[1].kind = CUABI_ARG_I32; t[1].size = 0;
    ck_assert_status(cuabi_argpack_create_from_types(&p, t, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("types[0].member_count");
    t[0].member_count = 2;
    ck_assert_status(cuabi_argpack_create_from_types(&p, t, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("member_count");
    t[0].member_count = 1;
    ck_assert_ok(cuabi_argpack_create_from_types(&p, t, 2));
    ck_assert_uint_eq(blob_size(p), 4);
    cuabi_argpack_release(p);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

START_TEST(signature_errors)
{
    static const char *bad[] = {
        "i33", "ptr,", ",ptr", "struct{}", "struct{i32", "struct i32", "align(3) i32",
        "align(16 i32", "align() i32", "i32 i32", "struct{i32,,}", "foo", "i32;", "align(16)",
        "averyveryveryveryveryverylongtypename",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cuabi_argpack *p = (cuabi_argpack *)1;
        ck_assert_msg(cuabi_argpack_create(&p, bad[i]) == CUABI_ERROR_INVALID_ARGUMENT,
                      "signature \"%s\" accepted", bad[i]);
        ck_assert_ptr_null(p);
        ck_assert_error_mentions("signature");
    }
    cuabi_argpack *p;
    ck_assert_status(cuabi_argpack_create(&p, "ptr, i3"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("position 5");
    ck_assert_status(cuabi_argpack_create(&p, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_create(NULL, "i32"), CUABI_ERROR_INVALID_ARGUMENT);
    /* nesting bound */
    char deep[800] = "";
    for (int i = 0; i < 70; i++) strcat(deep, "struct{");
    strcat(deep, "i32");
    for (int i = 0; i < 70; i++) strcat(deep, "}");
    ck_assert_status(cuabi_argpack_create(&p, deep), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_create(&p, "  "));
    size_t n = 9;
    ck_assert_ok(cuabi_argpack_count(&n, p));
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(blob_size(p), 0);
    cuabi_argpack_release(p);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

START_TEST(aliases)
{
    cuabi_argpack *a, *b;
    ck_assert_ok(cuabi_argpack_create(&a, "int, uint, float, double, half, long, size_t, unsigned"));
    ck_assert_ok(cuabi_argpack_create(&b, "i32, u32, f32, f64, f16, i64, u64, u32"));
    for (size_t i = 0; i < 8; i++) {
        cuabi_arg_kind ka, kb;
        ck_assert_ok(cuabi_argpack_slot_kind(&ka, a, i));
        ck_assert_ok(cuabi_argpack_slot_kind(&kb, b, i));
        ck_assert_int_eq(ka, kb);
    }
    cuabi_argpack_release(a);
    cuabi_argpack_release(b);
}
END_TEST

START_TEST(int_setters)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "i8, u8, i16, u16, i32, u32, i64, u64, bool, f32"));
    struct { int8_t a; uint8_t b; int16_t c; uint16_t d; int32_t e; uint32_t f; int64_t g;
             uint64_t h; _Bool i; float j; } want = { -128, 255, -32768, 65535, INT32_MIN,
             UINT32_MAX, INT64_MIN, UINT64_MAX, 1, 0 };
    ck_assert_ok(cuabi_argpack_set_int(p, 0, -128));
    ck_assert_ok(cuabi_argpack_set_uint(p, 1, 255));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, -32768));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, 65535));
    ck_assert_ok(cuabi_argpack_set_int(p, 4, INT32_MIN));
    ck_assert_ok(cuabi_argpack_set_uint(p, 5, UINT32_MAX));
    ck_assert_ok(cuabi_argpack_set_int(p, 6, INT64_MIN));
    ck_assert_ok(cuabi_argpack_set_uint(p, 7, UINT64_MAX));
    ck_assert_ok(cuabi_argpack_set_int(p, 8, 1));
    ck_assert_uint_eq(blob_size(p), sizeof want);
    cuabi__argpack *in;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    ck_assert_int_eq(memcmp(in->storage, &want, sizeof want), 0);
    int64_t g;
    ck_assert_ok(cuabi_argpack_get_bytes(&g, 8, p, 6));
    ck_assert(g == INT64_MIN);
    /* out of range */
    ck_assert_status(cuabi_argpack_set_int(p, 0, 128), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not fit slot 0");
    ck_assert_status(cuabi_argpack_set_int(p, 0, -129), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_int(p, 1, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_uint(p, 4, (uint64_t)INT32_MAX + 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_uint(p, 6, (uint64_t)INT64_MAX + 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_int(p, 8, 2), CUABI_ERROR_INVALID_ARGUMENT);
    /* wrong kind, wrong slot */
    ck_assert_status(cuabi_argpack_set_int(p, 9, 1), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("slot 9 is f32");
    ck_assert_status(cuabi_argpack_set_int(p, 10, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("out of range");
    ck_assert_status(cuabi_argpack_set_float(p, 0, 1.0), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_complex(p, 0, 1.0, 2.0), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_pointer(p, 0, 1), CUABI_ERROR_ARGUMENT_MISMATCH);
    cuabi_argpack_release(p);
}
END_TEST

static uint16_t f16_of(cuabi_argpack *p, double v)
{
    uint16_t h;
    ck_assert_ok(cuabi_argpack_set_float(p, 0, v));
    ck_assert_ok(cuabi_argpack_get_bytes(&h, 2, p, 0));
    return h;
}

START_TEST(float_setters)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "f16, bf16, f32, f64, c64, c128"));
    ck_assert_uint_eq(f16_of(p, 1.0), 0x3c00);
    ck_assert_uint_eq(f16_of(p, -2.0), 0xc000);
    ck_assert_uint_eq(f16_of(p, 65504.0), 0x7bff);
    ck_assert_uint_eq(f16_of(p, 65520.0), 0x7c00);     /* rounds to inf */
    ck_assert_uint_eq(f16_of(p, 1e6), 0x7c00);
    ck_assert_uint_eq(f16_of(p, 5.960464477539063e-08), 0x0001); /* smallest subnormal */
    ck_assert_uint_eq(f16_of(p, 6.103515625e-05), 0x0400);       /* smallest normal */
    ck_assert_uint_eq(f16_of(p, 1.0 + 1.0 / 2048), 0x3c00);      /* tie to even */
    ck_assert_uint_eq(f16_of(p, 1.0 + 3.0 / 2048), 0x3c02);
    ck_assert_uint_eq(f16_of(p, 1e-10), 0x0000);
    ck_assert_uint_eq(f16_of(p, 0.333251953125), 0x3555);
    ck_assert_uint_eq(f16_of(p, NAN) & 0x7e00, 0x7e00);
    ck_assert_uint_eq(cuabi__f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(cuabi__f32_to_bf16(-1.0f), 0xbf80);
    ck_assert_uint_eq(cuabi__f32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
    ck_assert_uint_eq(cuabi__f32_to_bf16(1.01171875f), 0x3f82);
    ck_assert_uint_eq(cuabi__f32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 3.0));
    ck_assert_ok(cuabi_argpack_set_float(p, 2, 0.5));
    ck_assert_ok(cuabi_argpack_set_float(p, 3, 0.1));
    ck_assert_ok(cuabi_argpack_set_complex(p, 4, 1.5, -2.5));
    ck_assert_ok(cuabi_argpack_set_complex(p, 5, 0.1, 0.2));
    uint16_t bf;
    float f, c64[2];
    double d, c128[2];
    ck_assert_ok(cuabi_argpack_get_bytes(&bf, 2, p, 1));
    ck_assert_uint_eq(bf, 0x4040);
    ck_assert_ok(cuabi_argpack_get_bytes(&f, 4, p, 2));
    ck_assert(f == 0.5f);
    ck_assert_ok(cuabi_argpack_get_bytes(&d, 8, p, 3));
    ck_assert(d == 0.1);
    ck_assert_ok(cuabi_argpack_get_bytes(c64, 8, p, 4));
    ck_assert(c64[0] == 1.5f && c64[1] == -2.5f);
    ck_assert_ok(cuabi_argpack_get_bytes(c128, 16, p, 5));
    ck_assert(c128[0] == 0.1 && c128[1] == 0.2);
    ck_assert_status(cuabi_argpack_set_int(p, 2, 1), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_complex(p, 2, 1, 1), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_get_bytes(&d, 4, p, 3), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_get_bytes(NULL, 8, p, 3), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(bytes_pointer_and_blob)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, i32, f32, struct{f32, f32, f32, i32}, handle, tensormap"));
    struct s4 s = { 1, 2, 3, 4 };
    ck_assert_ok(cuabi_argpack_set_bytes(p, 3, &s, sizeof s));
    ck_assert_status(cuabi_argpack_set_bytes(p, 3, &s, sizeof s - 1), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("slot 3 (struct) is 16 bytes, 15 given");
    ck_assert_status(cuabi_argpack_set_bytes(p, 3, NULL, 16), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_set_pointer(p, 0, 0xdead0000));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 4, 0x1234));
    ck_assert_status(cuabi_argpack_set_pointer(p, 1, 1), CUABI_ERROR_ARGUMENT_MISMATCH);
    unsigned char tm[128];
    memset(tm, 7, sizeof tm);
    ck_assert_ok(cuabi_argpack_set_bytes(p, 5, tm, sizeof tm));
    struct s4 back;
    ck_assert_ok(cuabi_argpack_get_bytes(&back, sizeof back, p, 3));
    ck_assert_int_eq(memcmp(&back, &s, sizeof s), 0);

    /* the whole blob at once, then read back per slot */
    struct { uint64_t p; int32_t i; float f; struct s4 s; uint64_t h; tensormap_t tm; } blob;
    memset(&blob, 0, sizeof blob);
    blob.p = 42; blob.i = -3; blob.f = 2.5f; blob.s = s; blob.h = 9;
    ck_assert_uint_eq(blob_size(p), sizeof blob);
    ck_assert_ok(cuabi_argpack_set_blob(p, &blob, sizeof blob));
    int32_t i;
    uint64_t ptr;
    ck_assert_ok(cuabi_argpack_get_bytes(&i, 4, p, 1));
    ck_assert_int_eq(i, -3);
    ck_assert_ok(cuabi_argpack_get_bytes(&ptr, 8, p, 0));
    ck_assert_uint_eq(ptr, 42);
    ck_assert_status(cuabi_argpack_set_blob(p, &blob, sizeof blob - 8), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("blob");
    ck_assert_status(cuabi_argpack_set_blob(p, NULL, sizeof blob), CUABI_ERROR_INVALID_ARGUMENT);

    /* the kernelParams array points into the storage */
    cuabi__argpack *in;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    ck_assert_int_eq(*(int32_t *)in->params[1], -3);
    ck_assert_ptr_eq(in->params[3], in->storage + offsetof(struct issue_sig, s));
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(blob_pointer_writes_in_place)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, i32, f32"));
    void *blob = NULL;
    ck_assert_ok(cuabi_argpack_blob_pointer(&blob, p));
    cuabi__argpack *in;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    ck_assert_ptr_eq(blob, in->storage);
    struct { uint64_t p; int32_t i; float f; } v = { 0xabc0, -7, 1.5f };
    memcpy(blob, &v, sizeof v);             /* writing is setting */
    int32_t i;
    ck_assert_ok(cuabi_argpack_get_bytes(&i, 4, p, 1));
    ck_assert_int_eq(i, -7);
    ck_assert_int_eq(*(int32_t *)in->params[1], -7);
    ck_assert_status(cuabi_argpack_blob_pointer(NULL, p), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_argpack_release(p);
    ck_assert_status(cuabi_argpack_blob_pointer(&blob, p), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_blob_pointer(&blob, NULL), CUABI_ERROR_INVALID_HANDLE);
    /* buffer/view handles live outside the blob: refused, naming the slot */
    ck_assert_ok(cuabi_argpack_create(&p, "i32, view"));
    ck_assert_status(cuabi_argpack_blob_pointer(&blob, p), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("slot 1");
    cuabi_argpack_release(p);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

START_TEST(buffer_and_view_slots)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, view, ptr"));
    cuabi__argpack *in;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    ck_assert_uint_eq(in->nrefs, 2);
    /* never set: the launch-time resolution says so, naming the slot */
    ck_assert_status(cuabi__argpack_resolve(in, "cuabi_launch"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("argument 0 (buffer) was never set");
    ck_assert_status(cuabi_argpack_set_bytes(p, 0, &in, 8), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_pointer(p, 1, 5), CUABI_ERROR_ARGUMENT_MISMATCH);
    /* a blob carries handle values for these slots */
    uint64_t blob[3] = { 0xCAB1000000000001ull, 0xCAB1000000000002ull, 77 };
    ck_assert_ok(cuabi_argpack_set_blob(p, blob, sizeof blob));
    uint64_t h;
    ck_assert_ok(cuabi_argpack_get_bytes(&h, 8, p, 1));
    ck_assert_uint_eq(h, blob[1]);
    /* stale/foreign handles fail resolution with a clear message */
    ck_assert_status(cuabi__argpack_resolve(in, "cuabi_launch"), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 0 holds a buffer that was released");
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(live_buffers_and_views)
{
    static float host[64];
    cuabi_buffer *buf;
    ck_assert_ok(cuabi_buffer_wrap(&buf, NULL, CUABI_MEMORY_HOST, (uintptr_t)host, sizeof host,
                                   NULL, NULL));
    int64_t shape[1] = { 8 };
    cuabi_view *view;
    ck_assert_ok(cuabi_view_create(&view, buf, 16, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, view, ptr, i32"));
    cuabi__argpack *in;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, buf));
    ck_assert_ok(cuabi_argpack_set_view(p, 1, view));
    ck_assert_ok(cuabi_argpack_set_view(p, 2, view));   /* a ptr slot takes a view too */
    ck_assert_uint_eq(in->nrefs, 3);
    ck_assert_ok(cuabi__argpack_resolve(in, "cuabi_launch"));
    uint64_t a, b, c;
    memcpy(&a, in->params[0], 8);
    memcpy(&b, in->params[1], 8);
    memcpy(&c, in->params[2], 8);
    ck_assert_uint_eq(a, (uintptr_t)host);
    ck_assert_uint_eq(b, (uintptr_t)host + 16);
    ck_assert_uint_eq(c, (uintptr_t)host + 16);
    /* wrong kinds and handles */
    ck_assert_status(cuabi_argpack_set_buffer(p, 1, buf), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_view(p, 0, view), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_buffer(p, 3, buf), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_buffer(p, 4, buf), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_buffer(p, 0, (cuabi_buffer *)view), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_set_view(p, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_set_buffer(NULL, 0, buf), CUABI_ERROR_INVALID_HANDLE);
    /* a raw pointer replaces the view in the ptr slot */
    ck_assert_ok(cuabi_argpack_set_pointer(p, 2, 0x1000));
    ck_assert_uint_eq(in->nrefs, 2);
    /* the buffer goes away: the next launch is refused, naming slot 0 */
    ck_assert_ok(cuabi_buffer_destroy(buf));
    ck_assert_status(cuabi__argpack_resolve(in, "cuabi_launch"), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("cuabi_launch: argument 0 holds a buffer that was released");
    /* set again with a live view: fine (the view keeps the memory) */
    ck_assert_ok(cuabi_argpack_set_pointer(p, 2, 0));
    cuabi_argpack_release(p);
    ck_assert_ok(cuabi_argpack_create(&p, "view"));
    ck_assert_ok(cuabi_argpack_set_view(p, 0, view));
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    ck_assert_ok(cuabi__argpack_resolve(in, "cuabi_launch"));
    ck_assert_ok(cuabi_view_release(view));
    ck_assert_status(cuabi__argpack_resolve(in, "cuabi_launch"), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 0 holds a view");
    cuabi_argpack_release(p);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

START_TEST(layout_check)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, i32, f32"));
    cuabi__argpack *in;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&in, "test"));
    size_t sizes[] = { 8, 4, 4 }, offs[] = { 0, 8, 12 };
    ck_assert_ok(cuabi__argpack_check_layout(in, 3, offs, sizes, "cuabi_launch"));
    ck_assert_ok(cuabi__argpack_check_layout(in, 3, NULL, sizes, "cuabi_launch"));
    ck_assert_status(cuabi__argpack_check_layout(in, 2, offs, sizes, "cuabi_launch"),
                     CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("the kernel takes 2 parameters, the pack has 3");
    size_t sizes2[] = { 8, 8, 4 };
    ck_assert_status(cuabi__argpack_check_layout(in, 3, NULL, sizes2, "cuabi_launch"),
                     CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 1: the kernel expects 8 bytes, the pack gives 4");
    size_t offs2[] = { 0, 8, 16 };
    ck_assert_status(cuabi__argpack_check_layout(in, 3, offs2, sizes, "cuabi_launch"),
                     CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 2: the kernel expects offset 16");
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(bad_handles)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "i32"));
    cuabi_argpack *dead = p;
    ck_assert_ok(cuabi_argpack_release(p));
    size_t n;
    cuabi_arg_kind k;
    cuabi_arg_info info = CUABI_ARG_INFO_INIT;
    int x = 0;
    cuabi_argpack *wrong = (cuabi_argpack *)(uintptr_t)0x1234;
    cuabi_argpack *handles[] = { NULL, dead, wrong };
    for (int i = 0; i < 3; i++) {
        cuabi_argpack *h = handles[i];
        ck_assert_status(cuabi_argpack_count(&n, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_blob_size(&n, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_slot_size(&n, h, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_slot_offset(&n, h, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_slot_kind(&k, h, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_item_count(&n, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_item(&info, h, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_int(h, 0, 1), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_uint(h, 0, 1), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_float(h, 0, 1), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_complex(h, 0, 1, 1), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_pointer(h, 0, 1), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_bytes(h, 0, &x, 4), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_get_bytes(&x, 4, h, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_set_blob(h, &x, 4), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_retain(h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_argpack_release(h), CUABI_ERROR_INVALID_HANDLE);
    }
    /* a device handle is not a pack */
    ck_assert_ok(cuabi_argpack_create(&p, "i32"));
    ck_assert_ok(cuabi_argpack_retain(p));
    ck_assert_ok(cuabi_argpack_release(p));
    ck_assert_status(cuabi_argpack_count(NULL, p), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_item(NULL, p, 0), CUABI_ERROR_INVALID_ARGUMENT);
    info.version = 0;
    ck_assert_status(cuabi_argpack_item(&info, p, 0), CUABI_ERROR_INVALID_VERSION);
    info.version = CUABI_ARG_INFO_VERSION;
    ck_assert_status(cuabi_argpack_item(&info, p, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_slot_size(&n, p, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_slot_size(NULL, p, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_slot_offset(NULL, p, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_slot_kind(NULL, p, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_blob_size(NULL, p), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_item_count(NULL, p), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_release(p));
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

START_TEST(allocation_failures_leak_nothing)
{
    const char *sig = "ptr, struct{i8, struct{i16, f64}}, int4, c128, tensormap";
    int failures = 0;
    for (long n = 1; n < 200; n++) {
        cuabi_argpack *p = NULL;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_argpack_create(&p, sig);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS) {
            cuabi_argpack_release(p);
            break;
        }
        failures++;
        ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(p);
    }
    ck_assert_int_gt(failures, 5);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("argpack");
    TCase *tc = tcase_create("argpack");
    tcase_add_test(tc, issue_signature_matches_c);
    tcase_add_test(tc, every_type_matches_c);
    tcase_add_test(tc, nested_structs_match_c);
    tcase_add_test(tc, aligned_and_vector_types_match_c);
    tcase_add_test(tc, from_types_matches_signature);
    tcase_add_test(tc, from_sizes);
    tcase_add_test(tc, layouts_that_overflow_are_refused);
    tcase_add_test(tc, signature_errors);
    tcase_add_test(tc, aliases);
    tcase_add_test(tc, int_setters);
    tcase_add_test(tc, float_setters);
    tcase_add_test(tc, bytes_pointer_and_blob);
    tcase_add_test(tc, blob_pointer_writes_in_place);
    tcase_add_test(tc, buffer_and_view_slots);
    tcase_add_test(tc, live_buffers_and_views);
    tcase_add_test(tc, layout_check);
    tcase_add_test(tc, bad_handles);
    tcase_add_test(tc, allocation_failures_leak_nothing);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
