/* Naming a compiler library without loading it (src/platform/libident.c): where the
 * loader would find it, a file's identity, identity records (whole, stale,
 * damaged, a FIFO, another user's), and the per-compiler state that the compile cache's key uses —
 * predicted from a record without loading, learnt by loading otherwise,
 * replaced by the loaded file's identity once the library is loaded. */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "compile/cache.h"
#include "platform/libident.h"

static char tmpdir[64];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-test-libident-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    setenv("CUABI_CACHE_DIR", tmpdir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

static void teardown(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", tmpdir, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

/* A small shared object to play the compiler: the C library's math library. */
static void a_library(char *out, size_t cap)
{
    void *h = dlopen("libm.so.6", RTLD_LAZY);
    ck_assert_ptr_nonnull(h);
    struct link_map *map;
    ck_assert_int_eq(dlinfo(h, RTLD_DI_LINKMAP, &map), 0);
    char *canon = realpath(map->l_name, NULL);
    ck_assert_ptr_nonnull(canon);
    snprintf(out, cap, "%s", canon);
    free(canon);
    dlclose(h);
}

/* ------------------------------------------------------------ file ids */

START_TEST(file_identity)
{
    char lib[4096], copy[128], text[128];
    a_library(lib, sizeof lib);
    cuabi__file_id a, b;
    ck_assert_int_eq(cuabi__file_id_read(&a, lib), 0);
    ck_assert_str_eq(a.path, lib);
    struct stat st;
    ck_assert_int_eq(stat(lib, &st), 0);
    ck_assert_uint_eq(a.size, (uint64_t)st.st_size);
    ck_assert_int_eq(a.mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    ck_assert_uint_eq(a.build_id_len, 20); /* Debian builds carry a SHA-1 build-id */
    ck_assert_int_eq(cuabi__file_id_read(&b, lib), 0);
    ck_assert(cuabi__file_id_equal(&a, &b));

    /* a copy keeps size, time and build-id but not the path */
    snprintf(copy, sizeof copy, "%s/libm-copy.so", tmpdir);
    copy_file(lib, copy);
    ck_assert_int_eq(cuabi__file_id_read(&b, copy), 0);
    ck_assert(!cuabi__file_id_equal(&a, &b));
    ck_assert_uint_eq(b.size, a.size);
    ck_assert_int_eq(memcmp(a.build_id, b.build_id, 20), 0);
    /* a symbolic link is the file it names */
    char link[160];
    snprintf(link, sizeof link, "%s/link.so", tmpdir);
    ck_assert_int_eq(symlink(copy, link), 0);
    cuabi__file_id c;
    ck_assert_int_eq(cuabi__file_id_read(&c, link), 0);
    ck_assert(cuabi__file_id_equal(&b, &c));

    /* not ELF: no build-id, still an identity */
    snprintf(text, sizeof text, "%s/text", tmpdir);
    write_file(text, "hello", 5);
    ck_assert_int_eq(cuabi__file_id_read(&c, text), 0);
    ck_assert_uint_eq(c.build_id_len, 0);
    ck_assert_uint_eq(c.size, 5);
    /* an ELF header with nonsense program headers: no build-id, no crash */
    unsigned char bad[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
    bad[54] = sizeof(ElfW(Phdr)); /* e_phentsize */
    bad[56] = 200;                /* e_phnum */
    bad[32] = 0xf0; bad[33] = 0xff; bad[34] = 0xff; bad[35] = 0x7f; /* e_phoff far away */
    write_file(text, bad, sizeof bad);
    ck_assert_int_eq(cuabi__file_id_read(&c, text), 0);
    ck_assert_uint_eq(c.build_id_len, 0);

    snprintf(text, sizeof text, "%s/missing", tmpdir);
    ck_assert_int_eq(cuabi__file_id_read(&c, text), -1);
}
END_TEST

/* ------------------------------------------------------------ locating */

START_TEST(locating_like_the_loader)
{
    char out[4096], lib[4096], path[160];
    a_library(lib, sizeof lib);
    /* a path: itself, canonical */
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, lib), 0);
    ck_assert_str_eq(out, lib);
    snprintf(path, sizeof path, "%s/libm-link.so.6", tmpdir);
    ck_assert_int_eq(symlink(lib, path), 0);
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, path), 0);
    ck_assert_str_eq(out, lib);
    /* a path to something that is not a loadable shared object */
    snprintf(path, sizeof path, "%s/plain.so", tmpdir);
    write_file(path, "not an ELF file", 15);
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, path), -1);
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, "/nonexistent/libx.so"), -1);
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, ""), -1);
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, NULL), -1);
    /* a soname loaded in the process: the loaded object */
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, "libm.so.6"), 0);
    ck_assert_str_eq(out, lib);
    ck_assert_int_eq(cuabi__lib_locate(out, sizeof out, "libcuabi-no-such-library.so.1"), -1);
    /* too small a buffer is "not found", never a truncated path */
    ck_assert_int_eq(cuabi__lib_locate(out, 4, "libm.so.6"), -1);
}
END_TEST

/* A soname not loaded yet is found where dlopen() then finds it (the
 * search list and /etc/ld.so.cache). Run in a child: the parent must not
 * keep NVRTC loaded for the other tests. */
START_TEST(locating_an_unloaded_soname)
{
    const char *names[] = { "libnvrtc.so.13", "libnvJitLink.so.13", "libz.so.1",
                            "libstdc++.so.6" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        fflush(NULL);
        pid_t kid = fork();
        if (kid == 0) { /* plain C only: see test_cache.c's child_compile */
            char out[4096];
            int located = cuabi__lib_locate(out, sizeof out, names[i]);
            void *h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
            if (!h)
                _exit(located == 0 ? 3 : 77); /* absent on this machine: nothing to compare */
            struct link_map *map;
            char *canon = dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 ? realpath(map->l_name, NULL)
                                                                 : NULL;
            int ok = located == 0 && canon && !strcmp(out, canon);
            if (!ok)
                dprintf(2, "%s: located %d %s, dlopen opened %s\n", names[i], located,
                        located == 0 ? out : "-", canon ? canon : "?");
            free(canon);
            _exit(ok ? 0 : 1);
        }
        ck_assert_int_ge(kid, 0);
        int status;
        ck_assert_int_eq(waitpid(kid, &status, 0), kid);
        ck_assert(WIFEXITED(status));
        ck_assert_msg(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77, "%s: exit %d",
                      names[i], WEXITSTATUS(status));
    }
}
END_TEST

/* ------------------------------------------------------------- records */

START_TEST(identity_records)
{
    char lib[4096];
    a_library(lib, sizeof lib);
    cuabi__file_id id;
    ck_assert_int_eq(cuabi__file_id_read(&id, lib), 0);
    int v = 0;
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), -1); /* none yet */
    ck_assert_int_eq(cuabi__ident_record_write(tmpdir, "nvrtc", &id, 13000), 0);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), 0);
    ck_assert_int_eq(v, 13000);
    /* another library's record of the same file is its own */
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvjitlink", &id, &v), -1);

    /* stale: the file is not the one recorded */
    cuabi__file_id other = id;
    other.size++;
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &other, &v), -1);
    other = id;
    other.mtime_ns++;
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &other, &v), -1);
    other = id;
    other.build_id[3] ^= 1;
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &other, &v), -1);

    /* damaged: every single flipped byte, truncation, garbage */
    char *path = cuabi__ident_record_path(tmpdir, "nvrtc", &id);
    ck_assert_ptr_nonnull(path);
    FILE *f = fopen(path, "rb");
    char good[8192];
    size_t n = fread(good, 1, sizeof good, f);
    fclose(f);
    ck_assert_uint_gt(n, 100);
    for (size_t i = 0; i < n; i++) {
        char bad[8192];
        memcpy(bad, good, n);
        bad[i] ^= 0x21;
        write_file(path, bad, n);
        v = 0;
        ck_assert_msg(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v) == -1,
                      "byte %zu flipped: accepted with version %d", i, v);
    }
    for (size_t cut = 0; cut < n; cut += 7) {
        write_file(path, good, cut);
        ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), -1);
    }
    write_file(path, good, n);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), 0);
    /* issue 29: a FIFO in place of the record blocked the read for ever */
    char why[256];
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(20);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), -1);
    ck_assert_int_eq(cuabi__ident_record_intact(path, why, sizeof why), 0);
    alarm(0);
    ck_assert_str_eq(why, "a FIFO, not a regular file");
    ck_assert_int_eq(unlink(path), 0);
    write_file(path, good, n);
    /* a link in place of the record is not followed */
    char target[160];
    snprintf(target, sizeof target, "%s/elsewhere", tmpdir);
    ck_assert_int_eq(rename(path, target), 0);
    ck_assert_int_eq(symlink(target, path), 0);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), -1);
    ck_assert_int_eq(cuabi__ident_record_intact(path, why, sizeof why), 0); /* verify removes it */
    ck_assert_msg(strstr(why, "symbolic link"), "%s", why);
    unlink(path);
    /* issue 29: a record that is not this user's own is never trusted (a
     * shared cache directory): writable by others, or (root can make one)
     * another user's */
    ck_assert_int_eq(rename(target, path), 0);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), 0);
    ck_assert_int_eq(cuabi__ident_record_intact(path, why, sizeof why), 1);
    ck_assert_int_eq(chmod(path, 0666), 0);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), -1);
    ck_assert_int_eq(cuabi__ident_record_intact(path, why, sizeof why), -1);
    ck_assert_str_eq(why, "writable by others (mode 0666)");
    ck_assert_int_eq(chmod(path, 0600), 0);
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(path, 4242, 4242), 0);
        ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "nvrtc", &id, &v), -1);
        ck_assert_int_eq(cuabi__ident_record_intact(path, why, sizeof why), -1);
        ck_assert_str_eq(why, "owned by uid 4242, not by this user (uid 0)");
    } else {
        printf("note: not root: another user's record cannot be made here\n");
    }
    unlink(path);
    free(path);
    /* an unwritable directory: no record, no crash */
    ck_assert_int_eq(cuabi__ident_record_write("/nonexistent/dir", "nvrtc", &id, 1), -1);
}
END_TEST

/* -------------------------------------------------- the compiler state */

typedef struct fake_state {
    bool loaded;
    int loads;
    cuabi__lib_info info;
    cuabi_status fail;
} fake_state;
static fake_state fake;
static bool fake_loaded(void) { return fake.loaded; }
static const cuabi__lib_info *fake_info(void) { return &fake.info; }
static cuabi_status fake_load(const char *caller)
{
    fake.loads++;
    if (fake.fail)
        return cuabi__error(fake.fail, "%s: the fake compiler cannot be loaded", caller);
    fake.loaded = true;
    return CUABI_SUCCESS;
}

static char fake_names[2][160];
static const char *fake_list[] = { fake_names[0], fake_names[1], NULL };
static cuabi__compiler fakec = CUABI__COMPILER_INIT("fakecc", "CUABI_TEST_FAKECC_PATH", fake_list,
                                                    fake_loaded, fake_load, fake_info);

static const char *ident(void)
{
    static char text[sizeof(cuabi__ident_text)];
    const char *t;
    size_t len;
    ck_assert_ok(cuabi__compiler_ident(&fakec, cuabi__cache_record_dir, &t, &len, "test"));
    snprintf(text, sizeof text, "%.*s", (int)len, t);
    return text;
}

START_TEST(compiler_identity_without_loading)
{
    char lib[4096], copy[160], other[160], want[8192];
    a_library(lib, sizeof lib);
    snprintf(copy, sizeof copy, "%s/libfake.so", tmpdir);
    snprintf(other, sizeof other, "%s/libfake-other.so", tmpdir);
    copy_file(lib, copy);
    copy_file(lib, other);
    /* the loader tries a missing file, then the copy */
    snprintf(fake_names[0], sizeof fake_names[0], "%s/missing.so", tmpdir);
    snprintf(fake_names[1], sizeof fake_names[1], "%s", copy);
    unsetenv("CUABI_TEST_FAKECC_PATH");
    fake = (fake_state){ .info.version = 12345 };
    snprintf(fake.info.path, sizeof fake.info.path, "%s", copy);
    cuabi__file_id id;
    ck_assert_int_eq(cuabi__file_id_read(&id, copy), 0);

    /* no record: loaded to learn the version, and the record written */
    cuabi__compiler_reset_for_test(&fakec);
    const char *t = ident();
    ck_assert_int_eq(fake.loads, 1);
    ck_assert_ptr_nonnull(strstr(t, copy));
    ck_assert_ptr_nonnull(strstr(t, " 12345"));
    ck_assert_msg(!strncmp(t, "fakecc ", 7), "%s", t);
    snprintf(want, sizeof want, "%s", t);
    int v;
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "fakecc", &id, &v), 0);
    ck_assert_int_eq(v, 12345);

    /* a fresh process (state forgotten, library not loaded): the record
     * names it without loading, with the same text */
    fake.loaded = false;
    fake.loads = 0;
    cuabi__compiler_reset_for_test(&fakec);
    ck_assert_str_eq(ident(), want);
    ck_assert_str_eq(ident(), want);
    ck_assert_int_eq(fake.loads, 0);

    /* a miss then loads the library: the same file, the same identity */
    fake.loaded = true;
    ck_assert_str_eq(ident(), want);
    ck_assert_int_eq(fake.loads, 0);

    /* the loader opened another file than predicted: its identity wins */
    fake.loaded = false;
    cuabi__compiler_reset_for_test(&fakec);
    ck_assert_str_eq(ident(), want); /* predicted: the copy */
    fake.loaded = true;
    snprintf(fake.info.path, sizeof fake.info.path, "%s", other);
    t = ident();
    ck_assert_ptr_nonnull(strstr(t, other));
    ck_assert_str_ne(t, want);
    cuabi__file_id oid;
    ck_assert_int_eq(cuabi__file_id_read(&oid, other), 0);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "fakecc", &oid, &v), 0);

    /* the environment override is tried alone */
    fake = (fake_state){ .info.version = 12345 };
    snprintf(fake.info.path, sizeof fake.info.path, "%s", other);
    setenv("CUABI_TEST_FAKECC_PATH", other, 1);
    cuabi__compiler_reset_for_test(&fakec);
    t = ident();
    ck_assert_ptr_nonnull(strstr(t, other));
    ck_assert_int_eq(fake.loads, 0);
    unsetenv("CUABI_TEST_FAKECC_PATH");

    /* the file replaced behind its path: the record is stale, so loaded */
    fake = (fake_state){ .info.version = 12346 };
    snprintf(fake.info.path, sizeof fake.info.path, "%s", copy);
    struct timespec times[2] = { { 0, UTIME_OMIT }, { 1000, 0 } };
    ck_assert_int_eq(utimensat(AT_FDCWD, copy, times, 0), 0);
    cuabi__compiler_reset_for_test(&fakec);
    t = ident();
    ck_assert_int_eq(fake.loads, 1);
    ck_assert_str_ne(t, want);
    ck_assert_ptr_nonnull(strstr(t, " 12346"));

    /* cannot be found nor loaded: the loader's error */
    fake = (fake_state){ .fail = CUABI_ERROR_NVRTC_NOT_FOUND };
    snprintf(fake_names[1], sizeof fake_names[1], "%s/also-missing.so", tmpdir);
    cuabi__compiler_reset_for_test(&fakec);
    const char *t2;
    size_t len2;
    ck_assert_status(cuabi__compiler_ident(&fakec, cuabi__cache_record_dir, &t2, &len2, "test"),
                     CUABI_ERROR_NVRTC_NOT_FOUND);
    ck_assert_error_mentions("cannot be loaded");
    ck_assert_int_eq(fake.loads, 1);

    /* the cache turned off: no records are read or written */
    snprintf(fake_names[1], sizeof fake_names[1], "%s", copy);
    fake = (fake_state){ .info.version = 7 };
    snprintf(fake.info.path, sizeof fake.info.path, "%s", copy);
    times[1].tv_sec = 2000;
    ck_assert_int_eq(utimensat(AT_FDCWD, copy, times, 0), 0);
    ck_assert_ok(cuabi_cache_set_enabled(0));
    cuabi__compiler_reset_for_test(&fakec);
    ident();
    ck_assert_int_eq(fake.loads, 1);
    ck_assert_int_eq(cuabi__file_id_read(&id, copy), 0);
    ck_assert_int_eq(cuabi__ident_record_read(tmpdir, "fakecc", &id, &v), -1);
    ck_assert_ok(cuabi_cache_set_enabled(1));
    cuabi__compiler_reset_for_test(&fakec);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("libident");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, file_identity);
    tcase_add_test(tc, locating_like_the_loader);
    tcase_add_test(tc, locating_an_unloaded_soname);
    tcase_add_test(tc, identity_records);
    tcase_add_test(tc, compiler_identity_without_loading);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
