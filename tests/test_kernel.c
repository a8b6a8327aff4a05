#include "testutil.h"
START_TEST(placeholder) { }
END_TEST
int main(void)
{
    Suite *s = suite_create("kernel");
    TCase *tc = tcase_create("kernel");
    tcase_add_test(tc, placeholder);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
