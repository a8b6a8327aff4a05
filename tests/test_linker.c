#include "testutil.h"
START_TEST(placeholder) { }
END_TEST
int main(void)
{
    Suite *s = suite_create("linker");
    TCase *tc = tcase_create("linker");
    tcase_add_test(tc, placeholder);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
