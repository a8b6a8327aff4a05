#include "testutil.h"
START_TEST(placeholder) { }
END_TEST
int main(void)
{
    Suite *s = suite_create("gpu_objcode");
    TCase *tc = tcase_create("gpu_objcode");
    tcase_add_test(tc, placeholder);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
