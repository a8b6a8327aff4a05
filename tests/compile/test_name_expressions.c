/* Name expressions are found however their template arguments are spaced,
 * and a miss lists what was registered (issue 17): no GPU needed (NVRTC and
 * nvJitLink compile, offline kernels). */
#include <string.h>

#include "compile/objcode.h"
#include "testutil.h"

static const char SRC[] =
    "template <typename T, int N> __global__ void t(T *x) { x[0] = N; }\n"
    "template <typename T> __global__ void u(T *x) { x[0] = 1; }\n";

static bool have_compilers(void)
{
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    cuabi_runtime_info_get(&info);
    return info.nvrtc_status == CUABI_SUCCESS && info.nvjitlink_status == CUABI_SUCCESS;
}

START_TEST(same_expression_rules)
{
    ck_assert(cuabi__same_expression("t<float, 4>", "t<float,4>"));
    ck_assert(cuabi__same_expression("t<float,4>", " t < float ,\t4 > "));
    ck_assert(cuabi__same_expression("u<unsigned int>", "u<unsigned  int>"));
    ck_assert(!cuabi__same_expression("u<unsigned int>", "u<unsignedint>"));
    ck_assert(!cuabi__same_expression("t<float, 4>", "t<float, 44>"));
    ck_assert(!cuabi__same_expression("t<float, 4>", "t<float, 4"));
    ck_assert(cuabi__same_expression("", "  "));
    ck_assert(cuabi__same_expression("a::b<c<d>>", "a :: b < c < d > >"));
}
END_TEST

START_TEST(get_kernel_normalises_and_lists)
{
    if (!have_compilers())
        return;
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, SRC, 0, "names.cu"));
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    const char *exprs[] = { "t<float, 4>", "u<unsigned int>" };
    o.arch = "sm_90";
    o.name_expressions = exprs;
    o.num_name_expressions = 2;
    o.cache = 0;
    cuabi_objcode *code;
    ck_assert_ok(cuabi_program_compile(&code, p, &o));
    cuabi_kernel *a, *b;
    ck_assert_ok(cuabi_objcode_get_kernel(&a, code, "t<float, 4>"));
    ck_assert_ok(cuabi_objcode_get_kernel(&b, code, "t<float,4>"));
    const char *na, *nb;
    ck_assert_ok(cuabi_kernel_name(&na, a));
    ck_assert_ok(cuabi_kernel_name(&nb, b));
    ck_assert_str_eq(na, nb);
    ck_assert_ok(cuabi_objcode_lowered_name(&nb, code, "u< unsigned  int >"));
    ck_assert_ok(cuabi_program_lowered_name(&nb, p, "t<float,4>"));
    ck_assert_str_eq(na, nb);
    cuabi_kernel *c = (cuabi_kernel *)1;
    ck_assert_status(cuabi_objcode_get_kernel(&c, code, "t<int,4>"), CUABI_ERROR_NOT_FOUND);
    ck_assert_ptr_null(c);
    ck_assert_error_mentions("name expressions: \"t<float, 4>\", \"u<unsigned int>\"");
    ck_assert_status(cuabi_objcode_lowered_name(&nb, code, "t<int, 4>"), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("\"t<float, 4>\"");
    cuabi_kernel_release(a);
    cuabi_kernel_release(b);
    cuabi_objcode_release(code);
    cuabi_program_release(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("name_expressions");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, same_expression_rules);
    tcase_add_test(tc, get_kernel_normalises_and_lists);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
