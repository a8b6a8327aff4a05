/* Shared helpers for cuabi's Check suites.
 *
 * Suites run without fork (CK_NOFORK) so the CUDA driver is initialised once
 * per process and sanitizers see the whole run. A GPU suite calls
 * cuabi_test_require_gpu() first: without a usable device it prints why and
 * exits 77, which Automake reports as SKIP. */
#ifndef CUABI_TESTUTIL_H
#define CUABI_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuabi.h"

/* Assert a call's status, printing the last error's message on mismatch. */
#define ck_assert_status(expr, expected)                                        \
    do {                                                                         \
        cuabi_status got__ = (expr);                                             \
        ck_assert_msg(got__ == (expected), "%s returned %s, expected %s: %s",   \
                      #expr, cuabi_status_name(got__), cuabi_status_name(expected), \
                      cuabi_last_error()->message);                              \
    } while (0)
#define ck_assert_ok(expr) ck_assert_status(expr, CUABI_SUCCESS)

/* The last error's message contains `needle`. */
#define ck_assert_error_mentions(needle)                                        \
    ck_assert_msg(strstr(cuabi_last_error()->message, (needle)) != NULL,        \
                  "last error \"%s\" does not mention \"%s\"",                  \
                  cuabi_last_error()->message, (needle))

static inline const char *cuabi_test_srcdir(void)
{
    const char *d = getenv("CUABI_TEST_SRCDIR");
    return d ? d : ".";
}

/* Exit 77 (SKIP) unless a GPU is usable; returns the device count. */
static inline int cuabi_test_require_gpu(void)
{
    int n = 0;
    cuabi_status st = cuabi_device_count(&n);
    if (st != CUABI_SUCCESS || n == 0) {
        printf("SKIP: no usable GPU (%s)\n",
               st != CUABI_SUCCESS ? cuabi_last_error()->message : "0 devices");
        exit(77);
    }
    return n;
}

/* The ordinal GPU suites test: $CUABI_TEST_DEVICE (default 0), so the
 * same suite runs on the second GPU of a multi-GPU host
 * (tests/check_gpu_device1.sh). Exits 77 when that device is not there. */
static inline int cuabi_test_device_ordinal(void)
{
    const char *e = getenv("CUABI_TEST_DEVICE");
    int ord = e && *e ? atoi(e) : 0, n = 0;
    if (cuabi_device_count(&n) != CUABI_SUCCESS || ord < 0 || ord >= n) {
        printf("SKIP: CUABI_TEST_DEVICE=%d but %d device%s visible\n", ord, n, n == 1 ? "" : "s");
        exit(77);
    }
    return ord;
}

/* CPU suites call this first in main(): they then see the machine as one
 * without a CUDA driver (cuabi loads none), on a GPU machine too, and
 * install the fake driver where they need one. Without it a real driver
 * would load wherever a suite asks for the driver outside a fake. */
static inline void cuabi_test_no_driver(void)
{
    setenv("CUABI_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
}

/* Run one suite without fork; exit status for Automake. */
static inline int cuabi_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
