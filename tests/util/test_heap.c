/* The heap reserve (src/util/heap.c): once done, memory of the size the
 * driver's first graph takes comes from the heap without page faults, and
 * the reserve leaves nothing allocated but its small fence. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "util/heap.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static long faults(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt + ru.ru_majflt;
}

/* n blocks of `size`, each written through (as the driver writes its nodes);
 * the page faults that took; the blocks freed again. */
static long faults_of_writing(size_t n, size_t size)
{
    void *volatile b[16];   /* volatile: the compiler may not elide the allocations */
    ck_assert_uint_le(n, 16);
    long f0 = faults();
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(size);
        ck_assert_ptr_nonnull(b[i]);
        memset((void *)b[i], 0x5a, size);
    }
    long f = faults() - f0;
    for (size_t i = 0; i < n; i++)
        free(b[i]);
    return f;
}

START_TEST(reserved_memory_is_resident_and_free)
{
    size_t got = cuabi__heap_reserve_now(CUABI__HEAP_RESERVE_BYTES);
    ck_assert_uint_eq(got, CUABI__HEAP_RESERVE_BYTES);
    if (UNDER_ASAN)
        return;   /* ASan's allocator is not glibc's heap: nothing to measure */
    /* 7 x 100 KiB (700 KiB: a 100-node graph's capture and instantiate take
     * ~600 KB): from the reserve, so next to no faults (a 4 KiB page each
     * without it: ~175). */
    long f = faults_of_writing(7, 100 * 1024);
    ck_assert_msg(f < 20, "%ld page faults writing 700 KiB after the reserve", f);
    /* ...and the reserve is free memory of the heap, not held. */
    struct mallinfo2 mi = mallinfo2();
    ck_assert_msg(mi.fordblks >= CUABI__HEAP_RESERVE_BYTES - 128 * 1024,
                  "%zu bytes free in the heap after the reserve", mi.fordblks);
}
END_TEST

START_TEST(the_once_form_obeys_the_environment)
{
    if (UNDER_ASAN)
        return;
    setenv("CUABI_HEAP_RESERVE", "0", 1);
    struct mallinfo2 before = mallinfo2();
    cuabi__heap_reserve();
    cuabi__heap_reserve();
    struct mallinfo2 after = mallinfo2();
    ck_assert_msg(after.arena <= before.arena + 64 * 1024,
                  "the heap grew by %zu bytes with CUABI_HEAP_RESERVE=0",
                  after.arena - before.arena);
    unsetenv("CUABI_HEAP_RESERVE");
}
END_TEST

/* In a new process (this binary, run with --threshold): glibc maps a 512 KiB
 * array apart at first (its mmap threshold is 128 KiB); after a 4 MB reserve a
 * 6 MiB one comes from the heap (more than the reserve holds: the threshold
 * was raised), and a 512 KiB one without faults (the reserve). Exit status: 0, or what failed. */
static int threshold_child(void)
{
    size_t maps = mallinfo2().hblks;
    void *volatile before = malloc(512 * 1024);
    if (before == NULL || mallinfo2().hblks != maps + 1)
        return 2;   /* not mapped apart to begin with: nothing to show */
    free((void *)before);
    /* A 4 MB reserve, not the default 8 MiB: the 6 MiB array below must be
     * more than the reserve holds and less than the raised threshold. */
    if (cuabi__heap_reserve_now((size_t)36 * 112 * 1024) == 0)
        return 3;
    /* More than the reserve holds: under the raised threshold, so still the
     * heap's (grown), not a mapping unmapped again on free. */
    maps = mallinfo2().hblks;
    void *volatile after = malloc(6 * 1024 * 1024);
    if (after == NULL || mallinfo2().hblks != maps)
        return 4;   /* still mapped apart */
    free((void *)after);
    /* No ck_ calls here: this process runs no suite. */
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    char *volatile w = malloc(512 * 1024);
    if (w == NULL)
        return 5;
    memset((char *)w, 0x5a, 512 * 1024);
    getrusage(RUSAGE_SELF, &ru1);
    free((char *)w);
    return ru1.ru_minflt - ru0.ru_minflt < 20 ? 0 : 5;
}

START_TEST(larger_arrays_come_from_the_heap_too)
{
    if (UNDER_ASAN)
        return;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_heap", "--threshold", (char *)NULL);
        _exit(6);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the new process's check failed: status %d (2: not mapped at first, 3: no "
                  "reserve, 4: still mapped after it, 5: faults, 6: no exec)", status);
}
END_TEST

START_TEST(nothing_reserved_for_less_than_a_block)
{
    ck_assert_uint_eq(cuabi__heap_reserve_now(0), 0);
    ck_assert_uint_eq(cuabi__heap_reserve_now(1000), 0);
}
END_TEST

START_TEST(the_setting_is_kib_or_the_default)
{
    const size_t dflt = CUABI__HEAP_RESERVE_BYTES, most = (size_t)14 * 1024 * 1024;
    ck_assert_uint_eq(cuabi__heap_reserve_bytes(NULL), dflt);
    ck_assert_uint_eq(cuabi__heap_reserve_bytes(""), dflt);
    ck_assert_uint_eq(cuabi__heap_reserve_bytes("0"), 0);
    ck_assert_uint_eq(cuabi__heap_reserve_bytes("8192"), (size_t)8192 * 1024);
    ck_assert_uint_eq(cuabi__heap_reserve_bytes("1000000"), most);   /* capped */
    /* Not plain decimals: the default, never a huge or negative size. */
    const char *odd[] = {"-5", " 5", "+5", "5x", "0x10", "5 ", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        ck_assert_msg(cuabi__heap_reserve_bytes(odd[i]) == dflt, "\"%s\"", odd[i]);
    /* The cap is what the reserve can do: 14 MiB is 128 whole blocks. */
    if (!UNDER_ASAN)
        ck_assert_uint_eq(cuabi__heap_reserve_now(most), most);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("heap");
    TCase *tc = tcase_create("reserve");
    /* First: the heap is still as the process began (no fork: one process). */
    tcase_add_test(tc, the_once_form_obeys_the_environment);
    tcase_add_test(tc, reserved_memory_is_resident_and_free);
    tcase_add_test(tc, larger_arrays_come_from_the_heap_too);
    tcase_add_test(tc, nothing_reserved_for_less_than_a_block);
    tcase_add_test(tc, the_setting_is_kib_or_the_default);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--threshold") == 0)
        return threshold_child();
    return cuabi_test_run(suite());
}
