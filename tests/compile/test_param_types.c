/* Kernel parameter types: the demangler path, the PTX path, how the two
 * combine with the layout, typed packs from kernels, and the cache keeping
 * the signatures (no GPU: PTX through nvJitLink, C++ through NVRTC). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/argpack.h"
#include "runtime/kernel.h"
#include "compile/param_types.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

/* Build the types of `name` from a layout of natural offsets. */
static cuabi__param_types build(const char *name, const char *sigs, size_t n,
                                const size_t *sizes)
{
    size_t offs[64], at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t a = sizes[i] >= 16 ? 16 : sizes[i];
        at = (at + a - 1) / a * a;
        offs[i] = at;
        at += sizes[i];
    }
    cuabi__param_types t;
    ck_assert_ok(cuabi__param_types_build(&t, name, sigs, n, offs, sizes));
    ck_assert_uint_eq(t.count, n);
    return t;
}

/* ------------------------------------------------------------ demangling */

START_TEST(demangled_builtins)
{
    /* void segred<float, 256>(float const*, float*, float, int) */
    size_t sizes[] = { 8, 8, 4, 4 };
    cuabi__param_types t = build("_Z6segredIfLi256EEvPKT_PS0_S0_i", NULL, 4, sizes);
    cuabi_arg_kind want[] = { CUABI_ARG_PTR, CUABI_ARG_PTR, CUABI_ARG_F32, CUABI_ARG_I32 };
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(t.params[i].kind, want[i]);
        ck_assert_int_eq(t.params[i].source, CUABI_PARAM_FROM_NAME);
    }
    ck_assert_str_eq(t.params[0].type_name, "float const*");
    ck_assert_str_eq(t.signature, "float const*, float*, float, int");
    cuabi__param_types_free(&t);
}
END_TEST

START_TEST(demangled_every_kind)
{
    /* cpp(int, unsigned int, long, float4, P, Mode, __half, void (*)(int),
     *     float const*, __nv_bfloat16, long long, unsigned long long, char,
     *     signed char, bool, double2) */
    const char *name = "_Z3cppijl6float41P4Mode6__halfPFviEPKf13__nv_bfloat16xycab7double2";
    size_t sizes[] = { 4, 4, 8, 16, 16, 4, 2, 8, 8, 2, 8, 8, 1, 1, 1, 16 };
    cuabi__param_types t = build(name, NULL, 16, sizes);
    cuabi_arg_kind want[] = { CUABI_ARG_I32, CUABI_ARG_U32, CUABI_ARG_I64, CUABI_ARG_STRUCT,
                              CUABI_ARG_RAW, CUABI_ARG_RAW, CUABI_ARG_F16, CUABI_ARG_PTR,
                              CUABI_ARG_PTR, CUABI_ARG_BF16, CUABI_ARG_I64, CUABI_ARG_U64,
                              CUABI_ARG_I8, CUABI_ARG_I8, CUABI_ARG_BOOL, CUABI_ARG_STRUCT };
    for (int i = 0; i < 16; i++)
        ck_assert_msg(t.params[i].kind == want[i], "param %d: kind %d, want %d", i,
                      (int)t.params[i].kind, (int)want[i]);
    ck_assert_int_eq(t.params[3].elem, CUABI_ARG_F32);
    ck_assert_int_eq(t.params[3].count, 4);
    ck_assert_uint_eq(t.params[3].align, 16);
    ck_assert_int_eq(t.params[15].elem, CUABI_ARG_F64);
    /* A struct or enum: the name is known, the kind is not. */
    ck_assert_str_eq(t.params[4].type_name, "P");
    ck_assert_int_eq(t.params[4].source, CUABI_PARAM_FROM_NAME);
    ck_assert_str_eq(t.params[7].type_name, "void (*)(int)");
    cuabi__param_types_free(&t);
}
END_TEST

START_TEST(demangled_templates_and_oddities)
{
    /* void k<foo::Bar<3> >(foo::Bar<3>, foo::Bar<3>*) */
    size_t s2[] = { 4, 8 };
    cuabi__param_types t = build("_Z1kIN3foo3BarILi3EEEEvT_PS3_", NULL, 2, s2);
    ck_assert_int_eq(t.params[0].kind, CUABI_ARG_RAW);
    ck_assert_str_eq(t.params[0].type_name, "foo::Bar<3>");
    ck_assert_int_eq(t.params[1].kind, CUABI_ARG_PTR);
    cuabi__param_types_free(&t);
    /* void k<((1)>(2))>(int): a '>' inside a template-argument expression */
    size_t s1[] = { 4 };
    t = build("_Z1kIXgtLi1ELi2EEEvi", NULL, 1, s1);
    ck_assert_int_eq(t.params[0].kind, CUABI_ARG_I32);
    cuabi__param_types_free(&t);
    /* references and pointers to arrays are addresses; member pointers unknown */
    size_t s3[] = { 8, 8 };
    t = build("_ZN2ns1kEPKiRS0_", NULL, 2, s3);
    ck_assert_int_eq(t.params[0].kind, CUABI_ARG_PTR);
    ck_assert_int_eq(t.params[1].kind, CUABI_ARG_PTR);
    cuabi__param_types_free(&t);
    size_t s16[] = { 16 };
    t = build("_Z1kM1AFviE", NULL, 1, s16);
    ck_assert_int_eq(t.params[0].kind, CUABI_ARG_RAW);
    cuabi__param_types_free(&t);
    /* a pointer to a restrict-qualified pointer, a volatile int: qualifiers dropped */
    size_t s8_4[] = { 8, 4 };
    t = build("_Z1kPPrfVi", NULL, 2, s8_4);
    ck_assert_int_eq(t.params[0].kind, CUABI_ARG_PTR);
    ck_assert_int_eq(t.params[1].kind, CUABI_ARG_I32);
    cuabi__param_types_free(&t);
    /* k() and k(void): none */
    t = build("_Z1kv", NULL, 0, NULL);
    ck_assert_str_eq(t.signature, "");
    cuabi__param_types_free(&t);
}
END_TEST

START_TEST(demangled_disagreeing_with_layout)
{
    /* Sizes that contradict the name (a wrong layout, a foreign ABI): the
     * type is dropped, never trusted. */
    size_t sizes[] = { 8, 8, 8, 4 };
    cuabi__param_types t = build("_Z6segredIfLi256EEvPKT_PS0_S0_i", NULL, 4, sizes);
    ck_assert_int_eq(t.params[2].kind, CUABI_ARG_RAW);
    ck_assert_int_eq(t.params[3].kind, CUABI_ARG_I32);
    cuabi__param_types_free(&t);
    /* A different count: the whole name is ignored. */
    size_t three[] = { 8, 8, 4 };
    t = build("_Z6segredIfLi256EEvPKT_PS0_S0_i", NULL, 3, three);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(t.params[i].kind, CUABI_ARG_RAW);
    ck_assert_str_eq(t.signature, "?, ?, ?");
    cuabi__param_types_free(&t);
    /* Not a mangled name, or a broken one: unknown. */
    t = build("_Zgarbage", NULL, 1, three);
    ck_assert_int_eq(t.params[0].source, CUABI_PARAM_UNKNOWN);
    cuabi__param_types_free(&t);
}
END_TEST

/* ------------------------------------------------------------ PTX */

#define PTX_HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"
/* Valid PTX (ptxas takes it) ... */
#define PTX_VALID \
    "// .entry commented(.param .u32 x)\n" \
    "/* .entry also_commented( */\n" \
    ".visible .entry k_c(\n" \
    "\t.param .u32 k_c_param_0,\n" \
    "\t.param .u64 .ptr.global.align 8 k_c_param_1,\n" \
    "\t.param .f32 k_c_param_2,\n" \
    "\t.param .f64 k_c_param_3,\n" \
    "\t.param .align 16 .b8 k_c_param_4[16],\n" \
    "\t.param .s32 k_c_param_5,\n" \
    "\t.param .u8 k_c_param_6\n" \
    ")\n{\n\tret;\n}\n" \
    ".visible .entry empty()\n{\n\tret;\n}\n" \
    ".visible .entry bare\n{\n\tret;\n}\n" \
    ".weak .entry _Z6segredIfLi256EEvPKT_PS0_S0_i(\n" \
    "\t.param .u64 a, .param .u64 b, .param .f32 c, .param .u32 d)\n{\n\tret;\n}\n"
static const char VALID[] = PTX_HEAD PTX_VALID;
/* ... and with a declaration the parser must skip. */
static const char PTX[] = PTX_HEAD
    ".visible .entry broken(.param .u32 a .param)\n{\n\tret;\n}\n" PTX_VALID;

START_TEST(ptx_signature_text)
{
    char *sigs;
    ck_assert_ok(cuabi__ptx_signatures(&sigs, PTX, strlen(PTX)));
    ck_assert_ptr_nonnull(sigs);
    ck_assert_str_eq(sigs, "k_c(.u32,.u64@8,.f32,.f64,.b8[16]@16,.s32,.u8)\n"
                           "empty()\n"
                           "bare()\n"
                           "_Z6segredIfLi256EEvPKT_PS0_S0_i(.u64,.u64,.f32,.u32)\n");
    cuabi__free(sigs);
    ck_assert_ok(cuabi__ptx_signatures(&sigs, "no entries here", 15));
    ck_assert_ptr_null(sigs);
    /* Truncated in the middle of a declaration: no signature, no crash. */
    for (size_t n = 0; n < strlen(PTX); n += 7) {
        ck_assert_ok(cuabi__ptx_signatures(&sigs, PTX, n));
        cuabi__free(sigs);
    }
}
END_TEST

START_TEST(ptx_kinds)
{
    char *sigs;
    ck_assert_ok(cuabi__ptx_signatures(&sigs, PTX, strlen(PTX)));
    size_t sizes[] = { 4, 8, 4, 8, 16, 4, 1 };
    cuabi__param_types t = build("k_c", sigs, 7, sizes);
    cuabi_arg_kind want[] = { CUABI_ARG_INTEGER, CUABI_ARG_INTPTR, CUABI_ARG_F32, CUABI_ARG_F64,
                              CUABI_ARG_RAW, CUABI_ARG_I32, CUABI_ARG_INTEGER };
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(t.params[i].kind, want[i]);
        ck_assert_int_eq(t.params[i].source, CUABI_PARAM_FROM_PTX);
    }
    ck_assert_uint_eq(t.params[0].size, 4);
    ck_assert_uint_eq(t.params[6].size, 1);
    ck_assert_str_eq(t.signature, ".u32, .u64, .f32, .f64, .b8[16], .s32, .u8");
    cuabi__param_types_free(&t);
    /* The name wins over the PTX where it knows the type. */
    size_t s4[] = { 8, 8, 4, 4 };
    t = build("_Z6segredIfLi256EEvPKT_PS0_S0_i", sigs, 4, s4);
    ck_assert_int_eq(t.params[0].kind, CUABI_ARG_PTR);
    ck_assert_int_eq(t.params[3].kind, CUABI_ARG_I32);
    ck_assert_int_eq(t.params[3].source, CUABI_PARAM_FROM_NAME);
    cuabi__param_types_free(&t);
    /* A kernel the text does not list, or a count that differs: unknown. */
    t = build("other", sigs, 1, sizes);
    ck_assert_int_eq(t.params[0].source, CUABI_PARAM_UNKNOWN);
    cuabi__param_types_free(&t);
    t = build("k_c", sigs, 6, sizes);
    ck_assert_int_eq(t.params[0].source, CUABI_PARAM_UNKNOWN);
    cuabi__param_types_free(&t);
    cuabi__free(sigs);
}
END_TEST

START_TEST(out_of_memory)
{
    char *sigs = NULL;
    ck_assert_ok(cuabi__ptx_signatures(&sigs, PTX, strlen(PTX)));
    size_t sizes[] = { 4, 8, 4, 8, 16, 4, 1 }, offs[] = { 0, 8, 16, 24, 32, 48, 52 };
    for (long i = 1; i < 40; i++) {
        cuabi__param_types t;
        cuabi__alloc_fail_at(i, false);
        cuabi_status st = cuabi__param_types_build(&t, "k_c", sigs, 7, offs, sizes);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS)
            cuabi__param_types_free(&t);
        else
            ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        char *again = NULL;
        cuabi__alloc_fail_at(i, false);
        st = cuabi__ptx_signatures(&again, PTX, strlen(PTX));
        cuabi__alloc_fail_at(0, false);
        ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_OUT_OF_MEMORY);
        cuabi__free(again);
    }
    cuabi__free(sigs);
}
END_TEST

/* ------------------------------------------------------------ public API */

static bool have_nvjitlink(void)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    cuabi_runtime_info_get(&info);
    return info.nvjitlink_status == CUABI_SUCCESS;
}

static bool have_nvrtc(void)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    cuabi_runtime_info_get(&info);
    return info.nvrtc_status == CUABI_SUCCESS;
}

static cuabi_kernel *ptx_kernel(cuabi_objcode **code, const char *name)
{
    ck_assert_ok(cuabi_objcode_from_memory(code, CUABI_CODE_PTX, VALID, strlen(VALID), "t.ptx"));
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, *code, name));
    return k;
}

START_TEST(public_param_type)
{
    if (!have_nvjitlink())
        return;
    cuabi_objcode *code;
    cuabi_kernel *k = ptx_kernel(&code, "k_c");
    cuabi_param_type t = CUABI_PARAM_TYPE_INIT;
    ck_assert_ok(cuabi_kernel_param_type(&t, k, 1));
    ck_assert_int_eq(t.kind, CUABI_ARG_INTPTR);
    ck_assert_uint_eq(t.size, 8);
    ck_assert_uint_eq(t.offset, 8);
    ck_assert_int_eq(t.source, CUABI_PARAM_FROM_PTX);
    ck_assert_str_eq(t.type_name, ".u64");
    ck_assert_ok(cuabi_kernel_param_type(&t, k, 4));
    ck_assert_int_eq(t.kind, CUABI_ARG_RAW);
    ck_assert_str_eq(t.type_name, ".b8[16]");
    const char *sig;
    ck_assert_ok(cuabi_kernel_signature(&sig, k));
    ck_assert_str_eq(sig, ".u32, .u64, .f32, .f64, .b8[16], .s32, .u8");
    /* errors */
    ck_assert_status(cuabi_kernel_param_type(&t, k, 7), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("parameter 7 is out of range");
    ck_assert_status(cuabi_kernel_param_type(NULL, k, 0), CUABI_ERROR_INVALID_ARGUMENT);
    t.version = 0;
    ck_assert_status(cuabi_kernel_param_type(&t, k, 0), CUABI_ERROR_INVALID_VERSION);
    t.version = CUABI_PARAM_TYPE_VERSION;
    ck_assert_status(cuabi_kernel_param_type(&t, NULL, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_kernel_param_type(&t, (cuabi_kernel *)code, 0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_kernel_signature(NULL, k), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_kernel_signature(&sig, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_kernel_release(k);
    ck_assert_status(cuabi_kernel_param_type(&t, k, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_kernel_signature(&sig, k), CUABI_ERROR_INVALID_HANDLE);
    cuabi_objcode_release(code);
}
END_TEST

START_TEST(typed_pack_for_kernel)
{
    if (!have_nvjitlink())
        return;
    cuabi_objcode *code;
    cuabi_kernel *k = ptx_kernel(&code, "k_c");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create_for_kernel(&p, k));
    cuabi_arg_kind kind;
    cuabi_arg_kind want[] = { CUABI_ARG_INTEGER, CUABI_ARG_INTPTR, CUABI_ARG_F32, CUABI_ARG_F64,
                              CUABI_ARG_RAW, CUABI_ARG_I32, CUABI_ARG_INTEGER };
    for (size_t i = 0; i < 7; i++) {
        ck_assert_ok(cuabi_argpack_slot_kind(&kind, p, i));
        ck_assert_int_eq(kind, want[i]);
    }
    ck_assert_ok(cuabi_argpack_check_kernel(p, k));
    /* Issue 17: a float into an integer parameter and the reverse are refused. */
    ck_assert_status(cuabi_argpack_set_float(p, 0, 3.7), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("slot 0 is integer, not a floating-point type");
    ck_assert_status(cuabi_argpack_set_int(p, 3, 2), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_float(p, 1, 1.0), CUABI_ERROR_ARGUMENT_MISMATCH);
    /* Integers of unknown signedness take both ranges of their size. */
    uint32_t u;
    ck_assert_ok(cuabi_argpack_set_int(p, 0, -1));
    ck_assert_ok(cuabi_argpack_get_bytes(&u, 4, p, 0));
    ck_assert_uint_eq(u, 0xFFFFFFFFu);
    ck_assert_ok(cuabi_argpack_set_uint(p, 0, 0xFFFFFFFFu));
    ck_assert_status(cuabi_argpack_set_uint(p, 0, 0x100000000u), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_argpack_set_int(p, 6, 256), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_set_int(p, 6, -128));
    /* intptr: integers and addresses */
    ck_assert_ok(cuabi_argpack_set_int(p, 1, -5));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 1, 0xA000));
    ck_assert_ok(cuabi_argpack_set_float(p, 2, 0.5));
    ck_assert_ok(cuabi_argpack_set_float(p, 3, 2.0));
    double d;
    ck_assert_ok(cuabi_argpack_get_bytes(&d, 8, p, 3));
    ck_assert(d == 2.0);
    ck_assert_status(cuabi_argpack_set_int(p, 5, INT64_C(1) << 31), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
}
END_TEST

START_TEST(typed_pack_intptr_takes_buffers)
{
    if (!have_nvjitlink())
        return;
    cuabi_objcode *code;
    cuabi_kernel *k = ptx_kernel(&code, "k_c");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create_for_kernel(&p, k));
    cuabi_memory_resource *host;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_buffer_allocate(&b, host, 64, 0, NULL));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, b));
    ck_assert_status(cuabi_argpack_set_buffer(p, 0, b), CUABI_ERROR_ARGUMENT_MISMATCH);
    /* a value set afterwards replaces the buffer (it is not looked up at launch) */
    cuabi__argpack *ip;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_ARGPACK, (void **)&ip, "test"));
    ck_assert_uint_eq(ip->nrefs, 1);
    ck_assert_ok(cuabi_argpack_set_int(p, 1, 42));
    ck_assert_uint_eq(ip->nrefs, 0);
    /* an 8-byte slot of unknown type takes a buffer too (its address) */
    cuabi_argpack *raw;
    size_t sizes[] = { 8, 4 };
    ck_assert_ok(cuabi_argpack_create_from_sizes(&raw, sizes, NULL, 2));
    ck_assert_ok(cuabi_argpack_set_buffer(raw, 0, b));
    ck_assert_status(cuabi_argpack_set_buffer(raw, 1, b), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_ok(cuabi_argpack_set_float(raw, 0, 1.5));
    ck_assert_ok(cuabi__handle_get(raw, CUABI__T_ARGPACK, (void **)&ip, "test"));
    ck_assert_uint_eq(ip->nrefs, 0);
    cuabi_argpack_release(raw);
    cuabi_buffer_destroy(b);
    cuabi_memory_resource_release(host);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
}
END_TEST

START_TEST(descriptors_integer_kind)
{
    cuabi_arg_type t[2] = { CUABI_ARG_TYPE_INIT, CUABI_ARG_TYPE_INIT };
    t[0].kind = CUABI_ARG_INTEGER;
    t[0].size = 2;
    t[1].kind = CUABI_ARG_INTPTR;
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create_from_types(&p, t, 2));
    size_t off;
    ck_assert_ok(cuabi_argpack_slot_offset(&off, p, 1));
    ck_assert_uint_eq(off, 8);
    ck_assert_ok(cuabi_argpack_slot_size(&off, p, 0));
    ck_assert_uint_eq(off, 2);
    cuabi_argpack_release(p);
    t[0].size = 3;
    ck_assert_status(cuabi_argpack_create_from_types(&p, t, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("integer of size 3");
    /* "intptr" is a signature type; "integer" needs a size, so it is not */
    ck_assert_ok(cuabi_argpack_create(&p, "intptr, float3, uchar4, longlong4_32a"));
    ck_assert_ok(cuabi_argpack_slot_offset(&off, p, 3));
    ck_assert_uint_eq(off, 32);
    cuabi_argpack_release(p);
    ck_assert_status(cuabi_argpack_create(&p, "integer"), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

static const char CXX[] =
    "struct P { float x, y, z; int id; };\n"
    "enum Mode { A, B };\n"
    "extern \"C\" __global__ void k_c(int a, float b, double c, float *d, P e, Mode f) {}\n"
    "template <typename T> __global__ void t(const T *x, T s, int n, float4 v, Mode m) {}\n"
    "template __global__ void t<double>(const double *, double, int, float4, Mode);\n";

START_TEST(compiled_cubin_keeps_signatures)
{
    if (!have_nvrtc() || !have_nvjitlink())
        return;
    char dir[] = "/tmp/cuabi-ptypes-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ok(cuabi_cache_set_directory(dir));
    for (int round = 0; round < 3; round++) {
        if (round == 2) /* only the disk is left: the signatures must come from the file */
            ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        cuabi_program *prog;
        ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, CXX, 0, "pt.cu"));
        cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
        const char *exprs[] = { "t<double>" };
        o.arch = "sm_90";
        o.output = CUABI_CODE_CUBIN;
        o.name_expressions = exprs;
        o.num_name_expressions = 1;
        cuabi_objcode *code;
        ck_assert_ok(cuabi_program_compile(&code, prog, &o));
        int hit;
        ck_assert_ok(cuabi_program_cache_hit(&hit, prog));
        ck_assert_int_eq(hit, round);
        cuabi_kernel *k;
        const char *sig;
        ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "k_c"));
        ck_assert_ok(cuabi_kernel_signature(&sig, k));
        ck_assert_str_eq(sig, ".u32, .f32, .f64, .u64, .b8[16], .u32");
        cuabi_kernel_release(k);
        ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "t<double>"));
        ck_assert_ok(cuabi_kernel_signature(&sig, k));
        ck_assert_str_eq(sig, "double const*, double, int, float4, Mode");
        cuabi_param_type t = CUABI_PARAM_TYPE_INIT;
        ck_assert_ok(cuabi_kernel_param_type(&t, k, 4));   /* an enum: .u32 in the PTX */
        ck_assert_int_eq(t.kind, CUABI_ARG_INTEGER);
        ck_assert_int_eq(t.source, CUABI_PARAM_FROM_PTX);
        ck_assert_str_eq(t.type_name, "Mode");
        ck_assert_ok(cuabi_kernel_param_type(&t, k, 3));
        ck_assert_int_eq(t.kind, CUABI_ARG_STRUCT);
        cuabi_kernel_release(k);
        cuabi_objcode_release(code);
        cuabi_program_release(prog);
    }
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY | CUABI_CACHE_CLEAR_DISK));
    ck_assert_ok(cuabi_cache_set_directory(NULL));
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("param_types");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, demangled_builtins);
    tcase_add_test(tc, demangled_every_kind);
    tcase_add_test(tc, demangled_templates_and_oddities);
    tcase_add_test(tc, demangled_disagreeing_with_layout);
    tcase_add_test(tc, ptx_signature_text);
    tcase_add_test(tc, ptx_kinds);
    tcase_add_test(tc, out_of_memory);
    tcase_add_test(tc, public_param_type);
    tcase_add_test(tc, typed_pack_for_kernel);
    tcase_add_test(tc, typed_pack_intptr_takes_buffers);
    tcase_add_test(tc, descriptors_integer_kind);
    tcase_add_test(tc, compiled_cubin_keeps_signatures);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
