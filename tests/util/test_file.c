/* Opening and reading files (src/util/file.c, issue 29): nothing blocks in
 * open() (a FIFO, a device, a directory are refused by name), nothing is read
 * before its size is checked (an 8 GiB sparse file costs a stat), symbolic
 * links are refused where asked, a file changing size while read is
 * survived, and the owner/mode rules of the compile cache. The callers'
 * regressions are in their own suites (test_cache, test_precompile,
 * test_objcode, test_linker, test_nvvm, test_libident). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "util/file.h"

static char tmpdir[64];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-test-file-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *at(const char *rel)
{
    static char path[4][256];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 256, "%s/%s", tmpdir, rel);
    return p;
}

static void put(const char *rel, const char *text)
{
    FILE *f = fopen(at(rel), "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

START_TEST(special_files_are_refused_without_blocking)
{
    ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
    alarm(20); /* a blocking open would never return: the test dies instead */
    struct stat st;
    char why[256];
    int fd = cuabi__file_open(at("fifo"), 0, 1 << 20, &st, why, sizeof why);
    ck_assert_int_eq(fd, CUABI__FILE_ERR_TYPE);
    ck_assert_str_eq(why, "a FIFO, not a regular file");
    void *data;
    size_t size;
    ck_assert_status(cuabi__read_file(at("fifo"), &data, &size, "t"), CUABI_ERROR_IO);
    ck_assert_error_mentions("is a FIFO, not a regular file");
    ck_assert_ptr_null(data);

    ck_assert_int_eq(cuabi__file_open(tmpdir, 0, 1 << 20, &st, why, sizeof why),
                     CUABI__FILE_ERR_TYPE);
    ck_assert_str_eq(why, "a directory, not a regular file");
    ck_assert_int_eq(cuabi__file_open("/dev/null", 0, 1 << 20, &st, why, sizeof why),
                     CUABI__FILE_ERR_TYPE);
    ck_assert_str_eq(why, "a character device, not a regular file");
    /* a socket cannot be opened at all (ENXIO): named all the same */
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", at("sock"));
    ck_assert_int_eq(bind(sock, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(cuabi__file_open(at("sock"), 0, 1 << 20, &st, why, sizeof why),
                     CUABI__FILE_ERR_TYPE);
    ck_assert_str_eq(why, "a socket, not a regular file");
    close(sock);
    ck_assert_int_eq(cuabi__file_open(at("missing"), 0, 1 << 20, &st, why, sizeof why),
                     CUABI__FILE_ERR_OPEN);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_str_eq(why, strerror(ENOENT));
    alarm(0);
    cuabi_error_clear();
}
END_TEST

START_TEST(symbolic_links_are_refused_where_asked)
{
    put("real", "text");
    ck_assert_int_eq(symlink(at("real"), at("link")), 0);
    struct stat st;
    char why[256];
    int fd = cuabi__file_open(at("link"), CUABI__FILE_NOFOLLOW, 100, &st, why, sizeof why);
    ck_assert_int_eq(fd, CUABI__FILE_ERR_TYPE);
    ck_assert_msg(strstr(why, "symbolic link"), "%s", why);
    fd = cuabi__file_open(at("link"), 0, 100, &st, why, sizeof why);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(st.st_size, 4);
    /* blocking again once open: O_NONBLOCK is cleared */
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    /* a link to a FIFO, followed: still a FIFO, still refused */
    ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
    ck_assert_int_eq(symlink(at("fifo"), at("fifolink")), 0);
    alarm(20);
    ck_assert_int_eq(cuabi__file_open(at("fifolink"), 0, 100, &st, why, sizeof why),
                     CUABI__FILE_ERR_TYPE);
    alarm(0);
}
END_TEST

START_TEST(sizes_are_checked_before_reading)
{
    /* 8 GiB of nothing (sparse): refused on its size, at the cost of a stat */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "truncate -s 8G %s", at("huge"));
    ck_assert_int_eq(system(cmd), 0);
    long rss = maxrss_kib();
    double t0 = now();
    struct stat st;
    char why[256];
    ck_assert_int_eq(cuabi__file_open(at("huge"), 0, CUABI__FILE_MAX, &st, why, sizeof why),
                     CUABI__FILE_ERR_SIZE);
    ck_assert_str_eq(why, "8589934592 bytes, more than the 1073741824 allowed");
    void *data;
    size_t size;
    ck_assert_status(cuabi__read_file(at("huge"), &data, &size, "t"), CUABI_ERROR_IO);
    ck_assert_error_mentions("8589934592 bytes, more than the 1073741824 allowed");
    ck_assert_msg(now() - t0 < 1.0, "took %.2f s", now() - t0);
    ck_assert_msg(maxrss_kib() - rss < 16 * 1024, "max RSS grew by %ld KiB", maxrss_kib() - rss);
    cuabi_error_clear();

    /* exactly the maximum is fine; one byte more is not */
    put("ten", "0123456789");
    ck_assert_ok(cuabi__read_file_max(at("ten"), 0, 10, &data, &size, "t"));
    ck_assert_uint_eq(size, 10);
    ck_assert_str_eq(data, "0123456789");
    cuabi__free(data);
    ck_assert_status(cuabi__read_file_max(at("ten"), 0, 9, &data, &size, "t"), CUABI_ERROR_IO);
    ck_assert_error_mentions("10 bytes, more than the 9 allowed");
    cuabi_error_clear();
}
END_TEST

START_TEST(a_file_changing_size_is_survived)
{
    /* The size fstat gave is only a hint: a file that grew since (hint 0)
     * is read to its end, one that shrank (hint too large) to its end, and
     * one that grows past the maximum fails without reading on. */
    char big[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    FILE *f = fopen(at("grown"), "w");
    ck_assert_uint_eq(fwrite(big, 1, sizeof big, f), sizeof big);
    fclose(f);
    for (int counted = 0; counted <= 1; counted++) {
        int fd = open(at("grown"), O_RDONLY);
        char *data;
        size_t size;
        ck_assert_int_eq(cuabi__file_read_fd(fd, 0, 1 << 20, counted, &data, &size), 0);
        ck_assert_uint_eq(size, sizeof big);
        ck_assert(!memcmp(data, big, sizeof big) && data[size] == '\0');
        counted ? cuabi__free(data) : free(data);
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        ck_assert_int_eq(cuabi__file_read_fd(fd, 1 << 20, 1 << 20, counted, &data, &size), 0);
        ck_assert_uint_eq(size, sizeof big);
        counted ? cuabi__free(data) : free(data);
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        ck_assert_int_eq(cuabi__file_read_fd(fd, 10, 1000, counted, &data, &size), -1);
        ck_assert_int_eq(errno, EFBIG);
        ck_assert_ptr_null(data);
        close(fd);
    }
    /* a regular file whose size says 0 but which holds text (procfs) */
    void *data;
    size_t size;
    ck_assert_ok(cuabi__read_file("/proc/self/status", &data, &size, "t"));
    ck_assert_uint_gt(size, 0);
    ck_assert_ptr_nonnull(strstr(data, "Name:"));
    cuabi__free(data);
}
END_TEST

static struct stat with(uid_t uid, mode_t mode)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_uid = uid;
    st.st_mode = mode;
    return st;
}

START_TEST(owners_and_modes)
{
    char why[256];
    struct stat st = with(1000, S_IFREG | 0600);
    ck_assert_int_eq(cuabi__file_owned(&st, 1000, why, sizeof why), 0);
    st = with(0, S_IFREG | 0644); /* root's, read-only to others: trusted */
    ck_assert_int_eq(cuabi__file_owned(&st, 1000, why, sizeof why), 0);
    st = with(1001, S_IFREG | 0600);
    ck_assert_int_eq(cuabi__file_owned(&st, 1000, why, sizeof why), -1);
    ck_assert_str_eq(why, "owned by uid 1001, not by this user (uid 1000)");
    st = with(1000, S_IFREG | 0664);
    ck_assert_int_eq(cuabi__file_owned(&st, 1000, why, sizeof why), -1);
    ck_assert_str_eq(why, "writable by its group (mode 0664)");
    st = with(1000, S_IFREG | 0602);
    ck_assert_int_eq(cuabi__file_owned(&st, 1000, why, sizeof why), -1);
    ck_assert_str_eq(why, "writable by others (mode 0602)");

    st = with(1000, S_IFDIR | 0700);
    ck_assert_int_eq(cuabi__dir_owned(&st, 1000, "/c", why, sizeof why), 0);
    st = with(1000, S_IFDIR | 0755);
    ck_assert_int_eq(cuabi__dir_owned(&st, 1000, "/c", why, sizeof why), 0);
    st = with(1000, S_IFDIR | 01777); /* like /tmp: shared, each file checked */
    ck_assert_int_eq(cuabi__dir_owned(&st, 1000, "/c", why, sizeof why), 1);
    st = with(1000, S_IFDIR | 0775);
    ck_assert_int_eq(cuabi__dir_owned(&st, 1000, "/c", why, sizeof why), -1);
    ck_assert_str_eq(why, "/c is writable by its group (mode 0775) and not sticky: another "
                          "user could put files in it");
    st = with(1000, S_IFDIR | 0777);
    ck_assert_int_eq(cuabi__dir_owned(&st, 1000, "/c", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "writable by others (mode 0777)"), "%s", why);
    st = with(1001, S_IFDIR | 0700);
    ck_assert_int_eq(cuabi__dir_owned(&st, 1000, "/c", why, sizeof why), -1);
    ck_assert_str_eq(why, "/c belongs to uid 1001, not to this user (uid 1000)");

    /* the same through real files: another uid needs root to make */
    put("mine", "x");
    ck_assert_int_eq(chmod(at("mine"), 0600), 0);
    ck_assert_int_eq(stat(at("mine"), &st), 0);
    ck_assert_int_eq(cuabi__file_owned(&st, geteuid(), why, sizeof why), 0);
    ck_assert_int_eq(chmod(at("mine"), 0620), 0);
    ck_assert_int_eq(stat(at("mine"), &st), 0);
    ck_assert_int_eq(cuabi__file_owned(&st, geteuid(), why, sizeof why), -1);
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(at("mine"), 4242, 4242), 0);
        ck_assert_int_eq(chmod(at("mine"), 0600), 0);
        ck_assert_int_eq(stat(at("mine"), &st), 0);
        ck_assert_int_eq(cuabi__file_owned(&st, 0, why, sizeof why), -1);
        ck_assert_str_eq(why, "owned by uid 4242, not by this user (uid 0)");
    } else {
        printf("note: not root: a file of another uid is only tested through a made-up stat\n");
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("file");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, special_files_are_refused_without_blocking);
    tcase_add_test(tc, symbolic_links_are_refused_where_asked);
    tcase_add_test(tc, sizes_are_checked_before_reading);
    tcase_add_test(tc, a_file_changing_size_is_survived);
    tcase_add_test(tc, owners_and_modes);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
