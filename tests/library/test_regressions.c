/* Regressions for bugs the fuzzers found in other modules (each input is
 * also in fuzz/corpus/<target>/regression_*, replayed by check_fuzz.sh). */
#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

/* nvJitLink exit()s the whole process on a one-digit architecture
 * ("fatal: Unknown arch name 'compute_9'"): every path that hands an arch
 * to nvJitLink must refuse it first. */
START_TEST(one_digit_arch_never_reaches_nvjitlink)
{
    static const char *bad[] = { "sm_9", "sm_8f", "sm_1a", "sm_09", "sm_+90", "sm_ 90" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
        cuabi_linker *l;
        o.arch = bad[i];
        ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions(bad[i]);

        static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                  ".visible .entry k()\n{\n  ret;\n}\n";
        cuabi_objcode *obj;
        cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
        ck_assert_ok(cuabi_objcode_from_memory(&obj, CUABI_CODE_PTX, ptx, sizeof ptx - 1, "k"));
        ck_assert_status(cuabi_objcode_kernel_resources(&r, obj, "k", bad[i]),
                         CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_ok(cuabi_objcode_release(obj));

        cuabi_program *p;
        cuabi_objcode *out;
        cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
        po.arch = bad[i];
        po.cache = 0;
        ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_PTX, ptx, 0, "k.ptx"));
        cuabi_status st = cuabi_program_compile(&out, p, &po);
        ck_assert_msg(st == CUABI_ERROR_INVALID_ARGUMENT || st == CUABI_ERROR_NOT_SUPPORTED,
                      "%s: %s", bad[i], cuabi_last_error()->message);
        ck_assert_ok(cuabi_program_release(p));
    }
    /* Still fine: two digits and a suffix. */
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    cuabi_linker *l;
    o.arch = "sm_90a";
    ck_assert_ok(cuabi_linker_create(&l, &o));
    ck_assert_ok(cuabi_linker_destroy(l));
}
END_TEST

/* Row-major strides of an empty tensor with huge other extents overflowed
 * int64 (UBSan: signed overflow in cuabi__row_major), and slicing such a
 * view overflowed again. */
START_TEST(empty_tensor_with_huge_extents)
{
    static float data[4];
    int64_t shape[3] = { 605637648, 25775898624LL, 0 };
    DLTensor t = { .data = data, .device = { kDLCPU, 0 }, .ndim = 3,
                   .dtype = { kDLFloat, 32, 1 }, .shape = shape };
    cuabi_view *v, *s;
    ck_assert_ok(cuabi_view_from_dltensor(&v, &t, 0));
    uint64_t n;
    ck_assert_ok(cuabi_view_nbytes(&n, v));
    ck_assert_uint_eq(n, 0);
    int64_t start[3] = { 1, 9, 0 }, stop[3] = { 605637648, 25775898624LL, 0 };
    cuabi_status st = cuabi_view_slice(&s, v, 3, start, stop, NULL);
    if (st == CUABI_SUCCESS) {
        ck_assert_ok(cuabi_view_nbytes(&n, s));
        ck_assert_uint_eq(n, 0);
        ck_assert_ok(cuabi_view_release(s));
    }
    ck_assert_ok(cuabi_view_release(v));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("regressions");
    TCase *tc = tcase_create("fuzz finds");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, one_digit_arch_never_reaches_nvjitlink);
    tcase_add_test(tc, empty_tensor_with_huge_extents);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cuabi_test_run(suite()); }
