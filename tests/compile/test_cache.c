/* The compile cache without a GPU: hits and misses in both layers, what the
 * key covers, corrupt entries, hostile ones (FIFOs, links, huge sparse files,
 * other users' entries, shared directories: issue 29), threads and processes
 * filling one key, LRU eviction, unwritable and full directories, turning it
 * off, precompile. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "platform/libident.h"
#include "compile/program.h"

static const char *src =
    "template <typename T, int N> __global__ void segred(T *x) { x[threadIdx.x] *= N; }\n"
    "extern \"C\" __global__ void plain(float *x) { x[0] = 1.0f; }\n";

static char tmpdir[64];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-test-cache-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    setenv("CUABI_CACHE_DIR", tmpdir, 1);
    unsetenv("CUABI_CACHE");
    unsetenv("CUABI_CACHE_SIZE");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", tmpdir, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}

/* Compile `source` (with name expression segred<float, 256>); returns where it came from. */
static int compile_src(const char *source, const char *arch, char **log_out)
{
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, 0, "c.cu"));
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = arch;
    o.name_expressions = names;
    o.num_name_expressions = 1;
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_program_compile(&obj, p, &o));
    const char *low;
    ck_assert_ok(cuabi_objcode_lowered_name(&low, obj, "segred<float, 256>"));
    ck_assert_str_eq(low, "_Z6segredIfLi256EEvPT_");
    ck_assert_ok(cuabi_program_lowered_name(&low, p, "segred<float, 256>"));
    ck_assert_str_eq(low, "_Z6segredIfLi256EEvPT_");
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    if (log_out) {
        const char *log;
        ck_assert_ok(cuabi_program_log(&log, p));
        *log_out = strdup(log);
    }
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_program_release(p));
    return hit;
}
static int compile_one(void) { return compile_src(src, NULL, NULL); }

static cuabi_cache_stats stats(void)
{
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    ck_assert_ok(cuabi_cache_get_stats(&s));
    return s;
}

/* The only entry file of the cache directory (caller frees). */
static char *only_entry(void)
{
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "c.cu"));
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = names;
    o.num_name_expressions = 1;
    cuabi__compile_args a;
    cuabi__cache_key key;
    ck_assert_ok(cuabi__compile_args_build(&a, CUABI_CODE_CUDA_CXX, &o, "test"));
    cuabi__program *pp;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_PROGRAM, (void **)&pp, "test"));
    ck_assert_ok(cuabi__program_key(&key, pp, &a));
    cuabi__compile_args_free(&a);
    ck_assert_ok(cuabi_program_release(p));
    char *path = cuabi__cache_entry_path(&key);
    ck_assert_ptr_nonnull(path);
    return path;
}

START_TEST(miss_then_memory_then_disk_hit)
{
    ck_assert_int_eq(compile_one(), 0);
    ck_assert_int_eq(compile_one(), 1);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_one(), 2); /* the name map came from disk too */
    ck_assert_int_eq(compile_one(), 1);
    cuabi_cache_stats s = stats();
    ck_assert_int_eq(s.enabled, 1);
    ck_assert_uint_eq(s.misses, 1);
    ck_assert_uint_eq(s.memory_hits, 2);
    ck_assert_uint_eq(s.disk_hits, 1);
    ck_assert_uint_eq(s.stores, 1);
    ck_assert_uint_eq(s.entries, 1);
    ck_assert_uint_gt(s.bytes, 100);
    ck_assert_uint_eq(s.memory_entries, 1);
    ck_assert_uint_eq(s.size_limit, (uint64_t)1 << 30);
    struct stat st;
    ck_assert_int_eq(stat(tmpdir, &st), 0);
    char *path = only_entry();
    ck_assert_int_eq(stat(path, &st), 0);
    free(path);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL));
    ck_assert_uint_eq(stats().entries, 0);
    ck_assert_int_eq(compile_one(), 0);
}
END_TEST

/* ------------------------------------------------------ key sensitivity */

static cuabi__cache_key key_of(cuabi_code_type type, const char *source,
                               const cuabi_program_options *o)
{
    cuabi_program *p;
    cuabi__program *pp;
    cuabi__compile_args a;
    cuabi__cache_key k;
    ck_assert_ok(cuabi_program_create(&p, type, source, 0, "k.cu"));
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_PROGRAM, (void **)&pp, "test"));
    ck_assert_ok(cuabi__compile_args_build(&a, type, o, "test"));
    ck_assert_ok(cuabi__program_key(&k, pp, &a));
    cuabi__compile_args_free(&a);
    ck_assert_ok(cuabi_program_release(p));
    return k;
}

START_TEST(every_ingredient_changes_the_key)
{
    const char *hn[] = { "a.h", "b.h" }, *hc[] = { "int a;", "int b;" };
    const char *hc2[] = { "int a;", "int c;" }, *hn2[] = { "a.h", "c.h" };
    const char *defs[] = { "X=1" }, *defs2[] = { "X=2" };
    const char *incs[] = { "/inc" }, *incs2[] = { "/inc2" };
    const char *names[] = { "segred<float, 256>" }, *names2[] = { "segred<float, 128>" };
    const char *extra[] = { "--extra-device-vectorization" };
    cuabi_program_options base = CUABI_PROGRAM_OPTIONS_INIT;
    base.arch = "sm_90";
    base.header_names = hn;
    base.header_contents = hc;
    base.num_headers = 2;
    base.defines = defs;
    base.num_defines = 1;
    base.include_paths = incs;
    base.num_include_paths = 1;
    base.name_expressions = names;
    base.num_name_expressions = 1;
    cuabi__cache_key k0 = key_of(CUABI_CODE_CUDA_CXX, src, &base);
    cuabi__cache_key again = key_of(CUABI_CODE_CUDA_CXX, src, &base);
    ck_assert_int_eq(memcmp(&k0, &again, sizeof k0), 0);
    /* The default architecture without a driver is sm_90: same key. */
    cuabi_program_options o = base;
    o.arch = NULL;
    again = key_of(CUABI_CODE_CUDA_CXX, src, &o);
    ck_assert_int_eq(memcmp(&k0, &again, sizeof k0), 0);

    cuabi__cache_key seen[32];
    int n = 0;
    seen[n++] = k0;
#define VARY(setup)                                                              \
    do {                                                                         \
        o = base;                                                                \
        setup;                                                                   \
        cuabi__cache_key k = key_of(CUABI_CODE_CUDA_CXX, src, &o);               \
        for (int i = 0; i < n; i++)                                              \
            ck_assert_msg(memcmp(&k, &seen[i], sizeof k) != 0, "%s: same key as #%d", \
                          #setup, i);                                            \
        seen[n++] = k;                                                           \
    } while (0)
    VARY(o.arch = "sm_80");
    VARY(o.arch = "sm_90a");
    VARY(o.output = CUABI_CODE_PTX);
    VARY(o.output = CUABI_CODE_LTOIR);
    VARY(o.std = "c++17");
    VARY(o.opt_level = 1);
    VARY(o.debug = 1);
    VARY(o.line_info = 1);
    VARY(o.fast_math = 1);
    VARY(o.relocatable = 1);
    VARY(o.defines = defs2);
    VARY(o.num_defines = 0);
    VARY(o.include_paths = incs2);
    VARY(o.header_contents = hc2);
    VARY(o.header_names = hn2);
    VARY(o.num_headers = 1);
    VARY(o.name_expressions = names2);
    VARY(o.num_name_expressions = 0);
    VARY((o.extra_options = extra, o.num_extra_options = 1));
#undef VARY
    /* the source, by one byte */
    char *src2 = strdup(src);
    src2[strlen(src2) - 2] = ' ';
    cuabi__cache_key k = key_of(CUABI_CODE_CUDA_CXX, src2, &base);
    ck_assert_int_ne(memcmp(&k, &k0, sizeof k), 0);
    free(src2);
    /* the code type (PTX input of the same text) */
    cuabi_program_options plain = CUABI_PROGRAM_OPTIONS_INIT;
    cuabi__cache_key kc = key_of(CUABI_CODE_CUDA_CXX, src, &plain);
    cuabi__cache_key kp = key_of(CUABI_CODE_PTX, src, &plain);
    ck_assert_int_ne(memcmp(&kc, &kp, sizeof kc), 0);
    /* the compiler's identity (libident.h; NVRTC is loaded here, so the
     * identity in use is the loaded file's: pretend it is another one) */
    static cuabi__ident_text other;
    other.len = (size_t)snprintf(other.s, sizeof other.s, "nvrtc /elsewhere/libnvrtc.so.13 "
                                 "1 2 - 13000");
    const cuabi__ident_text *was = atomic_exchange(&cuabi__compiler_nvrtc.text, &other);
    k = key_of(CUABI_CODE_CUDA_CXX, src, &base);
    atomic_store(&cuabi__compiler_nvrtc.text, was);
    ck_assert_int_ne(memcmp(&k, &k0, sizeof k), 0);
    /* field boundaries count: "ab"+"c" is not "a"+"bc" */
    cuabi__bytes f1[] = { { "ab", 2 }, { "c", 1 } }, f2[] = { { "a", 1 }, { "bc", 2 } };
    cuabi__cache_key a, b;
    cuabi__cache_key_compute(&a, f1, 2);
    cuabi__cache_key_compute(&b, f2, 2);
    ck_assert_int_ne(memcmp(&a, &b, sizeof a), 0);
}
END_TEST

/* ------------------------------------------------------------ corruption */

static void corrupt_and_check(void (*damage)(const char *path))
{
    ck_assert_int_eq(compile_one(), 0);
    char *path = only_entry();
    damage(path);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    char *log;
    ck_assert_int_eq(compile_src(src, NULL, &log), 0); /* ignored: compiled again */
    ck_assert_msg(strstr(log, "corrupt entry") != NULL, "log: %s", log);
    free(log);
    ck_assert_uint_eq(stats().corrupt, 1);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_one(), 2); /* and rebuilt */
    free(path);
}

static void truncate_it(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size / 2), 0);
}
static void truncate_header(const char *path) { ck_assert_int_eq(truncate(path, 10), 0); }
static void flip_at(const char *path, long where)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    fstat(fd, &st);
    off_t off = where >= 0 ? where : st.st_size + where;
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, off), 1);
    c ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
    close(fd);
}
static void flip_payload(const char *path) { flip_at(path, 200); }
static void flip_last(const char *path) { flip_at(path, -1); }
static void flip_magic(const char *path) { flip_at(path, 0); }
static void flip_checksum(const char *path) { flip_at(path, 45); }

START_TEST(corrupt_entries_are_rebuilt)
{
    void (*damages[])(const char *) = { truncate_it, truncate_header, flip_payload, flip_last,
                                        flip_magic, flip_checksum };
    for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
        teardown();
        setup();
        corrupt_and_check(damages[i]);
    }
}
END_TEST

/* ------------------------------------------------- hostile entries (issue 29) */

static double now_s(void)
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

/* What verify said about each file: removed or left alone, and why. */
typedef struct findings {
    int n, removed, left;
    char problem[8][256];
    int was_removed[8];
} findings;

static int on_finding(const cuabi_cache_verify_finding *f, void *payload)
{
    findings *r = payload;
    ck_assert_int_eq(f->version, CUABI_CACHE_VERIFY_FINDING_VERSION);
    ck_assert_ptr_nonnull(f->path);
    if (r->n < 8) {
        snprintf(r->problem[r->n], 256, "%s", f->problem);
        r->was_removed[r->n] = f->removed;
    }
    r->n++;
    f->removed ? r->removed++ : r->left++;
    return 0;
}

static int list_problem(const cuabi_cache_entry_info *e, void *payload)
{
    snprintf(payload, 256, "%s", e->problem ? e->problem : "(none)");
    return 0;
}

/* A FIFO at an entry's path blocked the lookup for ever (open without
 * O_NONBLOCK); a symbolic link was followed out of the directory. Both are
 * refused now, listed with what they are, removed by a miss and by verify
 * (the link itself, never its target). */
START_TEST(special_files_at_an_entry_path)
{
    ck_assert_int_eq(compile_one(), 0);
    char *path = only_entry(), *log, problem[256];
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    alarm(20); /* the open used to block here for ever */
    ck_assert_int_eq(compile_src(src, NULL, &log), 0);
    alarm(0);
    ck_assert_msg(strstr(log, "removed corrupt entry") && strstr(log, "a FIFO"), "%s", log);
    free(log);
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode)); /* stored again in its place */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_one(), 2);
    /* listed with what it is; not counted as an entry */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_ok(cuabi_cache_list(list_problem, problem));
    ck_assert_str_eq(problem, "a FIFO, not a regular file");
    ck_assert_uint_eq(stats().entries, 0);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_one(), 0);

    /* a link to a whole entry elsewhere: not followed, the target left */
    char elsewhere[128];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", tmpdir);
    ck_assert_int_eq(rename(path, elsewhere), 0);
    ck_assert_int_eq(symlink(elsewhere, path), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_src(src, NULL, &log), 0);
    ck_assert_msg(strstr(log, "symbolic link"), "%s", log);
    free(log);
    ck_assert_int_eq(access(elsewhere, F_OK), 0);

    /* verify: a FIFO and a link removed (the link's target stays), a
     * directory under an entry's name reported and left */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    char other[200];
    snprintf(other, sizeof other, "%s/0123456789abcdef0123456789abcdef.bin", tmpdir);
    ck_assert_int_eq(symlink(elsewhere, other), 0);
    char dirent[200];
    snprintf(dirent, sizeof dirent, "%s/fedcba9876543210fedcba9876543210.bin", tmpdir);
    ck_assert_int_eq(mkdir(dirent, 0700), 0);
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    findings f = { 0 };
    alarm(20);
    ck_assert_ok(cuabi_cache_verify_each(&r, on_finding, &f));
    alarm(0);
    ck_assert_uint_eq(r.removed, 2);
    ck_assert_uint_eq(r.skipped, 1);
    ck_assert_int_eq(f.removed, 2);
    ck_assert_int_eq(f.left, 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_ne(access(other, F_OK), 0);
    ck_assert_int_eq(access(elsewhere, F_OK), 0);
    ck_assert_int_eq(access(dirent, F_OK), 0);
    bool named_dir = false;
    for (int i = 0; i < f.n && i < 8; i++)
        named_dir |= !f.was_removed[i] && strstr(f.problem[i], "a directory") &&
                     strstr(f.problem[i], "cannot remove");
    ck_assert_msg(named_dir, "%s / %s / %s", f.problem[0], f.problem[1], f.problem[2]);
    /* clearing the directory is no failure for what the cache cannot use */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_DISK));
    ck_assert_int_eq(access(dirent, F_OK), 0);
    rmdir(dirent);
    free(path);
}
END_TEST

/* An entry was read whole before its header was checked: 20 GB of sparse
 * file cost 61 s and 20.9 GB of memory before "truncated or padded
 * payload". The header's claim is checked first now, against the file's
 * size and against CUABI__CACHE_MAX_ENTRY, before anything else is read. */
static void make_huge(const char *path, bool claim, uint64_t size)
{
    if (claim) { /* a header that claims all of it: exact, but too much */
        int fd = open(path, O_WRONLY);
        ck_assert_int_ge(fd, 0);
        uint64_t payload = size - 64;
        ck_assert_int_eq(pwrite(fd, &payload, 8, 16), 8);
        close(fd);
    }
    ck_assert_int_eq(truncate(path, (off_t)size), 0); /* sparse: zeros cost no disk */
}

START_TEST(huge_entries_are_refused_unread)
{
    static const char *const why[] = { "truncated or padded payload", "claims a payload of" };
    ck_assert_int_eq(compile_one(), 0);
    char *path = only_entry(), *log;
    for (int claim = 0; claim <= 1; claim++) {
        make_huge(path, claim, (uint64_t)8 << 30);
        long rss = maxrss_kib();
        double t0 = now_s();
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        ck_assert_int_eq(compile_src(src, NULL, &log), 0); /* a miss, compiled again */
        double took = now_s() - t0;
        ck_assert_msg(took < 2.0, "the lookup took %.2f s", took);
        ck_assert_msg(maxrss_kib() - rss < 64 * 1024, "max RSS grew by %ld KiB",
                      maxrss_kib() - rss);
        ck_assert_msg(strstr(log, "removed corrupt entry") && strstr(log, why[claim]), "%s",
                      log);
        free(log);
        /* verify, on a 4 GiB one (it took 3.4 s and 4.2 GB) */
        make_huge(path, claim, (uint64_t)4 << 30);
        t0 = now_s();
        cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
        findings f = { 0 };
        ck_assert_ok(cuabi_cache_verify_each(&r, on_finding, &f));
        took = now_s() - t0;
        ck_assert_msg(took < 2.0, "verify took %.2f s", took);
        ck_assert_msg(maxrss_kib() - rss < 64 * 1024, "max RSS grew by %ld KiB",
                      maxrss_kib() - rss);
        ck_assert_uint_eq(r.removed, 1);
        ck_assert_uint_eq(r.checked, 1);
        ck_assert_msg(strstr(f.problem[0], why[claim]), "%s", f.problem[0]);
        ck_assert_int_eq(f.was_removed[0], 1);
        ck_assert_int_ne(access(path, F_OK), 0);
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        ck_assert_int_eq(compile_one(), 0); /* stored again for the next round */
    }
    free(path);
}
END_TEST

/* Only the directory's owner was checked: an entry another user put (or
 * could write) was loaded and its code run. Now an entry that is not this
 * user's own — another owner (root excepted), or writable by its group or
 * others — is never used; verify leaves it and says why; and a file it
 * cannot read (permissions, memory) is left and reported, where it used to
 * be deleted. */
START_TEST(entries_not_ours_are_never_used)
{
    ck_assert_int_eq(compile_one(), 0);
    char *path = only_entry(), *log;
    struct stat st;
    ck_assert_int_eq(chmod(path, 0664), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_src(src, NULL, &log), 0);
    ck_assert_msg(strstr(log, "cannot use") && strstr(log, "writable by its group (mode 0664)"),
                  "%s", log);
    free(log);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600); /* the miss stored a good one in its place */
    const char *expect;
    if (geteuid() == 0) { /* root can make another user's file; permissions bind no one */
        printf("note: root: an unreadable entry (chmod 000) cannot be tested, permissions do "
               "not bind root; another user's entry is tested instead\n");
        ck_assert_int_eq(chown(path, 4242, 4242), 0);
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        ck_assert_int_eq(compile_src(src, NULL, &log), 0); /* not loaded */
        ck_assert_msg(strstr(log, "owned by uid 4242, not by this user (uid 0)"), "%s", log);
        free(log);
        ck_assert_int_eq(chown(path, 4242, 4242), 0);
        expect = "owned by uid 4242, not by this user (uid 0)";
    } else {
        printf("note: not root: another user's entry cannot be made; an unreadable one is "
               "tested instead\n");
        ck_assert_int_eq(chmod(path, 0), 0);
        expect = "Permission denied";
    }
    char problem[256];
    ck_assert_ok(cuabi_cache_list(list_problem, problem));
    ck_assert_str_eq(problem, expect);
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    findings f = { 0 };
    ck_assert_ok(cuabi_cache_verify_each(&r, on_finding, &f));
    ck_assert_uint_eq(r.removed, 0);
    ck_assert_uint_eq(r.skipped, 1);
    ck_assert_uint_eq(r.checked, 0);
    ck_assert_int_eq(f.left, 1);
    ck_assert_str_eq(f.problem[0], expect);
    ck_assert_int_eq(lstat(path, &st), 0); /* left alone */
    /* cuabi_cache_verify's callback hears of removals only; a version-1
     * report ends before `skipped` */
    cuabi_cache_verify_report r1[2];
    memset(r1, 0x5a, sizeof r1);
    r1[0].version = 1;
    ck_assert_ok(cuabi_cache_verify(&r1[0], NULL, NULL));
    ck_assert_uint_eq(r1[0].removed, 0);
    unsigned char *tail = (unsigned char *)&r1[0].skipped;
    ck_assert_int_eq(tail[0], 0x5a);
    chmod(path, 0600);
    free(path);
}
END_TEST

/* A cache directory others may write to was used as long as it was this
 * user's: another user could plant entries. Refused now unless sticky,
 * where each entry is checked as above. */
START_TEST(shared_directories)
{
    static const struct { mode_t mode; const char *why; } refused[] = {
        { 0777, "writable by others (mode 0777) and not sticky" },
        { 0770, "writable by its group (mode 0770) and not sticky" },
    };
    char *log;
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(chmod(tmpdir, refused[i].mode), 0);
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        ck_assert_int_eq(compile_src(src, NULL, &log), 0);
        ck_assert_msg(strstr(log, "cuabi cache: not used:") && strstr(log, refused[i].why) &&
                      strstr(log, "others may put files in"), "%s", log);
        free(log);
        cuabi_cache_stats st = CUABI_CACHE_STATS_INIT;
        ck_assert_status(cuabi_cache_get_stats(&st), CUABI_ERROR_CACHE);
        ck_assert_error_mentions(refused[i].why);
        ck_assert_status(cuabi_cache_verify(NULL, NULL, NULL), CUABI_ERROR_CACHE);
    }
    ck_assert_int_eq(chmod(tmpdir, 01777), 0); /* sticky, like /tmp: used */
    ck_assert_int_eq(stats().entries, 0); /* nothing was stored while refused */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_one(), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_one(), 2);
    if (geteuid() == 0) { /* an entry planted by another user is not loaded */
        char *path = only_entry();
        ck_assert_int_eq(chown(path, 4242, 4242), 0);
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
        ck_assert_int_eq(compile_src(src, NULL, &log), 0);
        ck_assert_msg(strstr(log, "owned by uid 4242"), "%s", log);
        free(log);
        free(path);
    }
    ck_assert_int_eq(chmod(tmpdir, 0700), 0);
}
END_TEST

/* ----------------------------------------------------------- concurrency */

static void *thread_compile(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        cuabi_program *p;
        cuabi_objcode *o;
        if (cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "c.cu") != CUABI_SUCCESS)
            return (void *)1;
        cuabi_status st = cuabi_program_compile(&o, p, NULL);
        cuabi_program_release(p);
        if (st != CUABI_SUCCESS)
            return (void *)2;
        const void *d;
        size_t n;
        cuabi_code_type t;
        if (cuabi_objcode_bytes(&d, &n, o) != CUABI_SUCCESS || cuabi_objcode_code_type(&t, o) ||
            t != CUABI_CODE_CUBIN || memcmp(d, "\x7f" "ELF", 4))
            st = CUABI_ERROR_INTERNAL;
        cuabi_objcode_release(o);
        if (st != CUABI_SUCCESS)
            return (void *)3;
        cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY); /* make the next one go to disk */
    }
    return NULL;
}

START_TEST(threads_fill_one_key)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, thread_compile, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    cuabi_cache_stats s = stats();
    ck_assert_uint_eq(s.entries, 1);
    ck_assert_uint_eq(s.corrupt, 0);
    ck_assert_uint_eq(s.memory_hits + s.disk_hits + s.misses, 24);
}
END_TEST

/* Forked children: the suite runs without fork (CK_NOFORK), so Check's
 * message file is shared with the parent; a child that runs a ck_assert
 * (even a passing one writes a location record) or returns into Check
 * corrupts it ("check_pack.c: Bad message type"). Children therefore use
 * plain C, report through their exit status and leave with _exit(). They
 * name the architecture so nothing asks the driver: CUDA state inherited
 * across fork() is unusable. */
static int child_stats_corrupt(void)
{
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    return cuabi_cache_get_stats(&s) != CUABI_SUCCESS || s.corrupt != 0;
}

static int child_compile(const char *source)
{
    cuabi_program *p;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    const char *names[] = { "segred<float, 256>" };
    o.arch = "sm_90";
    o.name_expressions = names;
    o.num_name_expressions = 1;
    if (cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, 0, "f.cu") != CUABI_SUCCESS)
        return 0;
    int ok = cuabi_program_compile(NULL, p, &o) == CUABI_SUCCESS;
    cuabi_program_release(p);
    return ok;
}

START_TEST(processes_fill_one_key)
{
    const char *other = "extern \"C\" __global__ void forked(int *x) { x[0] = 4; }\n"
        "template <typename T, int N> __global__ void segred(T *x) { x[threadIdx.x] *= N; }\n";
    pid_t kids[4];
    fflush(NULL); /* nothing buffered to be written twice */
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            int ok = 1;
            for (int r = 0; r < 3 && ok; r++) {
                ok = child_compile(other);
                cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY);
            }
            _exit(ok && !child_stats_corrupt() ? 0 : 1);
        }
        ck_assert_int_ge(kids[i], 0);
    }
    for (int i = 0; i < 4; i++) {
        int status;
        ck_assert_int_eq(waitpid(kids[i], &status, 0), kids[i]);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
    }
    ck_assert_int_eq(compile_src(other, "sm_90", NULL), 2);
    ck_assert_uint_eq(stats().entries, 1);
    ck_assert_uint_eq(stats().corrupt, 0);
}
END_TEST

/* ------------------------------------------------------------------ LRU */

static char *variant(int i)
{
    char *s;
    ck_assert_int_ge(asprintf(&s, "%s// variant %d\n", src, i), 0);
    return s;
}

static int compile_variant(int i)
{
    char *s = variant(i);
    int hit = compile_src(s, NULL, NULL);
    free(s);
    return hit;
}

START_TEST(lru_eviction)
{
    ck_assert_int_eq(compile_variant(0), 0);
    uint64_t one = stats().bytes;
    ck_assert_ok(cuabi_cache_set_size_limit(3 * one + one / 2)); /* room for three */
    struct timespec pause = { 0, 20 * 1000 * 1000 };
    for (int i = 1; i < 3; i++) {
        nanosleep(&pause, NULL);
        ck_assert_int_eq(compile_variant(i), 0);
    }
    nanosleep(&pause, NULL);
    /* use variant 0 again (from disk): now 1 is the least recently used */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_variant(0), 2);
    nanosleep(&pause, NULL);
    ck_assert_int_eq(compile_variant(3), 0);
    cuabi_cache_stats s = stats();
    ck_assert_uint_eq(s.entries, 3);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_uint_le(s.bytes, s.size_limit);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_variant(1), 0); /* evicted */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_variant(3), 2);
    ck_assert_ok(cuabi_cache_set_size_limit(0));
}
END_TEST

/* ------------------------------------------------- unusable directories */

START_TEST(unwritable_directory_does_not_fail)
{
    /* A path under a regular file can never be created, even by root. */
    char file[128], dir[160];
    snprintf(file, sizeof file, "%s/file", tmpdir);
    fclose(fopen(file, "w"));
    snprintf(dir, sizeof dir, "%s/sub", file);
    ck_assert_ok(cuabi_cache_set_directory(dir));
    char *log;
    ck_assert_int_eq(compile_src(src, NULL, &log), 0);
    ck_assert_msg(strstr(log, "cuabi cache: not stored") != NULL, "log: %s", log);
    free(log);
    ck_assert_uint_eq(stats().store_failures, 1);
    ck_assert_int_eq(compile_one(), 1); /* the memory layer still works */
    if (geteuid() != 0) { /* a read-only directory, where permissions bind */
        ck_assert_ok(cuabi_cache_set_directory(tmpdir));
        ck_assert_int_eq(chmod(tmpdir, 0500), 0);
        ck_assert_int_eq(compile_src(src, "sm_80", &log), 0);
        ck_assert_msg(strstr(log, "Permission denied") != NULL, "log: %s", log);
        free(log);
        chmod(tmpdir, 0700);
    }
}
END_TEST

START_TEST(full_directory_does_not_fail)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) { /* plain C only: see child_compile */
        /* A file size limit makes every write fail like a full disk. */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { 100, 100 };
        setrlimit(RLIMIT_FSIZE, &rl);
        cuabi_program *p;
        cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
        o.arch = "sm_90";
        cuabi_status st = cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "c.cu");
        if (st != CUABI_SUCCESS)
            _exit(2);
        st = cuabi_program_compile(NULL, p, &o);
        const char *l = "";
        cuabi_program_log(&l, p);
        cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
        int ok = st == CUABI_SUCCESS && strstr(l, "not stored") &&
                 cuabi_cache_get_stats(&s) == CUABI_SUCCESS && s.store_failures == 1 &&
                 s.entries == 0;
        if (!ok)
            dprintf(2, "status %d, log: %s\n", st, l);
        cuabi_program_release(p);
        _exit(ok ? 0 : 1);
    }
    ck_assert_int_ge(kid, 0);
    int status;
    ck_assert_int_eq(waitpid(kid, &status, 0), kid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* ---------------------------------------------------------- on and off */

START_TEST(disabled_cache)
{
    ck_assert_ok(cuabi_cache_set_enabled(0));
    ck_assert_int_eq(compile_one(), 0);
    ck_assert_int_eq(compile_one(), 0);
    cuabi_cache_stats s = stats();
    ck_assert_int_eq(s.enabled, 0);
    ck_assert_uint_eq(s.entries, 0);
    ck_assert_uint_eq(s.misses, 0);
    ck_assert_ok(cuabi_cache_set_enabled(1));
    ck_assert_int_eq(compile_one(), 0);
    ck_assert_int_eq(compile_one(), 1);

    setenv("CUABI_CACHE", "0", 1);
    cuabi__cache_reset_for_test();
    ck_assert_int_eq(compile_one(), 0);
    ck_assert_int_eq(stats().enabled, 0);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    ck_assert_int_eq(stats().enabled, 1);
    ck_assert_status(cuabi_cache_set_enabled(2), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(directory_resolution)
{
    char buf[512], xdg[128];
    size_t n = sizeof buf;
    ck_assert_ok(cuabi_cache_get_directory(buf, &n));
    ck_assert_str_eq(buf, tmpdir);
    ck_assert_uint_eq(n, strlen(tmpdir) + 1);
    n = 4;
    ck_assert_status(cuabi_cache_get_directory(buf, &n), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(n, strlen(tmpdir) + 1);
    ck_assert_status(cuabi_cache_get_directory(NULL, &n), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_cache_get_directory(buf, NULL), CUABI_ERROR_INVALID_ARGUMENT);

    unsetenv("CUABI_CACHE_DIR");
    snprintf(xdg, sizeof xdg, "%s/xdg", tmpdir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    ck_assert_ok(cuabi_cache_set_directory(NULL));
    n = sizeof buf;
    ck_assert_ok(cuabi_cache_get_directory(buf, &n));
    ck_assert_str_eq(buf + strlen(buf) - 10, "/xdg/cuabi");
    ck_assert_int_eq(compile_one(), 0);
    struct stat st;
    ck_assert_int_eq(stat(buf, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);

    const char *old_xdg = NULL;
    unsetenv("XDG_CACHE_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", tmpdir, 1);
    ck_assert_ok(cuabi_cache_set_directory(NULL));
    n = sizeof buf;
    ck_assert_ok(cuabi_cache_get_directory(buf, &n));
    ck_assert_str_eq(buf + strlen(buf) - 13, "/.cache/cuabi");
    unsetenv("HOME");
    ck_assert_ok(cuabi_cache_set_directory(NULL));
    n = sizeof buf;
    ck_assert_status(cuabi_cache_get_directory(buf, &n), CUABI_ERROR_NOT_FOUND);
    ck_assert_int_eq(compile_one(), 0); /* memory only, still works */
    if (home)
        setenv("HOME", home, 1);
    free(home);
    (void)old_xdg;
    ck_assert_ok(cuabi_cache_set_directory(tmpdir));
    ck_assert_status(cuabi_cache_set_directory(""), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

static int count_entries(const cuabi_cache_entry_info *e, void *payload)
{
    ck_assert_int_eq(strlen(e->key), 32);
    ck_assert_int_eq(e->code_type, CUABI_CODE_CUBIN);
    ck_assert_uint_eq(e->num_names, 1);
    ck_assert_uint_gt(e->size, 64);
    ck_assert_ptr_nonnull(strstr(e->path, e->key));
    return ++*(int *)payload == 2; /* stop after two */
}

START_TEST(list_and_clear)
{
    for (int i = 0; i < 3; i++)
        compile_variant(i);
    int seen = 0;
    ck_assert_ok(cuabi_cache_list(count_entries, &seen));
    ck_assert_int_eq(seen, 2);
    ck_assert_status(cuabi_cache_list(NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_cache_clear(0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_cache_clear(8), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_DISK));
    ck_assert_uint_eq(stats().entries, 0);
    ck_assert_uint_eq(stats().memory_entries, 3);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_uint_eq(stats().memory_entries, 0);
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    s.version = 0;
    ck_assert_status(cuabi_cache_get_stats(&s), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_cache_get_stats(NULL), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* A linked result's parts (src/compile/linker.c) survive both layers: the second
 * log (the error log), the linked flag; compiles have neither. */
static int linked_flag(const cuabi_cache_entry_info *e, void *payload)
{
    ck_assert_int_eq(e->version, CUABI_CACHE_ENTRY_INFO_VERSION);
    ((int *)payload)[e->linked ? 1 : 0]++;
    return 0;
}

START_TEST(second_log_and_linked_flag)
{
    static const char code[] = "not really a cubin";
    cuabi__bytes field = { "second_log_and_linked_flag", 26 };
    cuabi__cache_key key;
    cuabi__cache_key_compute(&key, &field, 1);
    cuabi__cache_entry e = { .type = CUABI_CODE_CUBIN, .data = (void *)code,
                             .size = sizeof code, .log = "info: 10 registers",
                             .log2 = "warning: something", .flags = CUABI__ENTRY_LINKED };
    cuabi__codeblob *b;
    ck_assert_ok(cuabi__codeblob_make(&b, &e));
    cuabi__str notes = { 0 };
    cuabi__cache_store(&key, b, &notes);
    cuabi__codeblob_release(b);
    ck_assert_ptr_null(notes.s);
    for (int layer = 1; layer <= 2; layer++) {
        cuabi__codeblob *got;
        int where;
        ck_assert_ok(cuabi__cache_lookup(&key, &got, &where, &notes));
        ck_assert_int_eq(where, layer);
        ck_assert_uint_eq(got->size, sizeof code);
        ck_assert_int_eq(memcmp(got->data, code, sizeof code), 0);
        ck_assert_str_eq(got->log, "info: 10 registers");
        ck_assert_str_eq(got->log2, "warning: something");
        ck_assert_uint_eq(got->flags, CUABI__ENTRY_LINKED);
        cuabi__codeblob_release(got);
        ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    }
    compile_one();
    int seen[2] = { 0, 0 };
    ck_assert_ok(cuabi_cache_list(linked_flag, seen));
    ck_assert_int_eq(seen[0], 1); /* the compile */
    ck_assert_int_eq(seen[1], 1); /* the link */
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    ck_assert_ok(cuabi_cache_verify(&r, NULL, NULL));
    ck_assert_uint_eq(r.checked, 2);
    ck_assert_uint_eq(r.removed, 0);
    cuabi__str_free(&notes);
}
END_TEST

/* ------------------------------- memory hits share the result (issue 13) */

static cuabi_program_options segred_options(const char **names)
{
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.name_expressions = names;
    o.num_name_expressions = 1;
    return o;
}

static const void *bytes_of(cuabi_objcode *obj, size_t *size)
{
    const void *data;
    ck_assert_ok(cuabi_objcode_bytes(&data, size, obj));
    return data;
}

/* Issue 13 item 4: a memory hit hands out the cached result itself, not a
 * copy, so two hits see the very same bytes; each result stays whole for
 * its holder after the cache drops the entry and the others are released. */
START_TEST(memory_hits_share_one_result)
{
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = segred_options(names);
    cuabi_program *p;
    cuabi_objcode *miss, *a, *b;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "c.cu"));
    ck_assert_ok(cuabi_program_compile(&miss, p, &o));
    ck_assert_ok(cuabi_program_compile(&a, p, &o));
    ck_assert_ok(cuabi_program_compile(&b, p, &o));
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1);
    size_t n, nb;
    const void *data = bytes_of(a, &n);
    ck_assert_ptr_eq(bytes_of(b, &nb), data);    /* shared, not copied */
    ck_assert_ptr_eq(bytes_of(miss, &nb), data); /* the miss's result is the one kept */
    void *copy = malloc(n);
    memcpy(copy, data, n);
    ck_assert_ok(cuabi_objcode_release(miss));
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL));
    ck_assert_uint_eq(stats().memory_entries, 0);
    ck_assert_ok(cuabi_objcode_release(a));
    const char *low;
    ck_assert_ok(cuabi_program_lowered_name(&low, p, "segred<float, 256>"));
    ck_assert_str_eq(low, "_Z6segredIfLi256EEvPT_");
    ck_assert_ok(cuabi_program_release(p));
    /* b alone holds the result now */
    data = bytes_of(b, &nb);
    ck_assert_uint_eq(nb, n);
    ck_assert_int_eq(memcmp(data, copy, n), 0);
    ck_assert_ok(cuabi_objcode_lowered_name(&low, b, "segred<float, 256>"));
    ck_assert_str_eq(low, "_Z6segredIfLi256EEvPT_");
    size_t kernels;
    ck_assert_ok(cuabi_objcode_kernel_count(&kernels, b));
    ck_assert_uint_eq(kernels, 2);
    ck_assert_ok(cuabi_objcode_release(b));
    free(copy);
}
END_TEST

/* A memory hit allocates the objcode it hands out and nothing else: the
 * key is hashed in place, the result shared (counted through the library's
 * allocation wrappers, src/util/alloc.c; it made 16 before issue 13 item 4). */
START_TEST(a_memory_hit_allocates_only_its_objcode)
{
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = segred_options(names);
    cuabi_program *p;
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "c.cu"));
    ck_assert_ok(cuabi_program_compile(&obj, p, &o));
    ck_assert_ok(cuabi_objcode_release(obj));
    enum { HITS = 20 };
    cuabi__alloc_count(true);
    for (int i = 0; i < HITS; i++) {
        ck_assert_ok(cuabi_program_compile(&obj, p, &o));
        ck_assert_ok(cuabi_objcode_release(obj));
    }
    cuabi__alloc_count(false);
    ck_assert_int_le(cuabi__alloc_counted(), HITS);
    cuabi__alloc_count(true);
    ck_assert_ok(cuabi_program_compile(NULL, p, &o)); /* no objcode asked for */
    cuabi__alloc_count(false);
    ck_assert_int_eq(cuabi__alloc_counted(), 0);
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1);
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

/* ------------------------------------------- files reached by #include */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Compile `source` named `name` to PTX with `o`; the PTX (caller frees)
 * and where it came from. */
static char *compile_ptx(const char *source, const char *name, cuabi_program_options o,
                         int *hit, char **log)
{
    cuabi_program *p;
    cuabi_objcode *obj;
    o.arch = "sm_90";
    o.output = CUABI_CODE_PTX;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, 0, name));
    ck_assert_ok(cuabi_program_compile(&obj, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(hit, p));
    const void *data;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&data, &size, obj));
    char *ptx = strndup(data, size);
    if (log) {
        const char *l;
        ck_assert_ok(cuabi_program_log(&l, p));
        *log = strdup(l);
    }
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_program_release(p));
    return ptx;
}

static void expect_value(const char *source, const char *name, cuabi_program_options o,
                         int want_hit, const char *value)
{
    int hit;
    char *ptx = compile_ptx(source, name, o, &hit, NULL);
    char needle[32];
    snprintf(needle, sizeof needle, ", %s;", value);
    ck_assert_msg(strstr(ptx, needle) != NULL, "the PTX does not store %s:\n%s", value, ptx);
    ck_assert_int_eq(hit, want_hit);
    free(ptx);
}

/* Issue 17 item 5: a header edited under an include path (or next to the
 * source) never brings back the old binary, from memory or from disk. */
START_TEST(edited_header_is_not_stale)
{
    char inc[128], hdr[160], name[160], local[160];
    snprintf(inc, sizeof inc, "%s/inc", tmpdir);
    ck_assert_int_eq(mkdir(inc, 0700), 0);
    snprintf(hdr, sizeof hdr, "%s/cfg.h", inc);
    write_text(hdr, "#define VALUE 2\n");
    const char *text = "#include <cfg.h>\n"
                      "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n";
    const char *paths[] = { inc };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = paths;
    o.num_include_paths = 1;
    expect_value(text, "k.cu", o, 0, "2");
    expect_value(text, "k.cu", o, 1, "2");
    write_text(hdr, "#define VALUE 3\n"); /* same size, same second */
    expect_value(text, "k.cu", o, 0, "3");
    expect_value(text, "k.cu", o, 1, "3");
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    expect_value(text, "k.cu", o, 2, "3");
    write_text(hdr, "#define VALUE 2\n"); /* back: the first entry is right again */
    expect_value(text, "k.cu", o, 2, "2");

    /* "quoted" includes next to the source, named by the program's name */
    snprintf(name, sizeof name, "%s/k.cu", tmpdir);
    snprintf(local, sizeof local, "%s/local.h", tmpdir);
    write_text(local, "#define VALUE 5\n");
    const char *quoted = "#include \"local.h\"\n"
                         "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n";
    cuabi_program_options plain = CUABI_PROGRAM_OPTIONS_INIT;
    expect_value(quoted, name, plain, 0, "5");
    write_text(local, "#define VALUE 6\n");
    expect_value(quoted, name, plain, 0, "6");
    expect_value(quoted, name, plain, 1, "6");
}
END_TEST

/* An include the scan cannot follow turns the cache off for that compile,
 * says so in the program's log, and stores nothing. */
START_TEST(unfollowable_include_skips_the_cache)
{
    char inc[128], hdr[160];
    snprintf(inc, sizeof inc, "%s/inc", tmpdir);
    ck_assert_int_eq(mkdir(inc, 0700), 0);
    snprintf(hdr, sizeof hdr, "%s/cfg.h", inc);
    write_text(hdr, "#define VALUE 4\n");
    const char *text = "#include PICK(cfg)\n"
                      "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n";
    const char *paths[] = { inc }, *defs[] = { "PICK(x)=<x.h>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = paths;
    o.num_include_paths = 1;
    o.defines = defs;
    o.num_defines = 1;
    for (int i = 0; i < 2; i++) {
        int hit;
        char *log;
        free(compile_ptx(text, "k.cu", o, &hit, &log));
        ck_assert_int_eq(hit, 0);
        ck_assert_msg(strstr(log, "cuabi cache: not used:") && strstr(log, "PICK(cfg)"),
                      "log: %s", log);
        free(log);
    }
    cuabi_cache_stats s = stats();
    ck_assert_uint_eq(s.stores, 0);
    ck_assert_uint_eq(s.entries, 0);
    ck_assert_uint_eq(s.memory_entries, 0);
    /* a macro defined as a file name is followed, and cached */
    const char *defs2[] = { "PICK=<cfg.h>" };
    o.defines = defs2;
    const char *src2 = "#include PICK\n"
                       "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n";
    expect_value(src2, "k.cu", o, 0, "4");
    expect_value(src2, "k.cu", o, 1, "4");
    write_text(hdr, "#define VALUE 8\n");
    expect_value(src2, "k.cu", o, 0, "8");
}
END_TEST

/* ------------------------------------------------------------ precompile */

typedef struct progress_log {
    size_t calls, last_done, total, failures;
    int cancel_at;
    char archs[8][16];
} progress_log;

static int on_progress(size_t done, size_t total, const char *name, const char *arch,
                       cuabi_status status, int hit, void *payload)
{
    progress_log *l = payload;
    (void)hit;
    ck_assert_uint_eq(done, l->calls + 1);
    ck_assert_ptr_nonnull(name);
    if (l->calls < 8)
        snprintf(l->archs[l->calls], 16, "%s", arch);
    l->calls++;
    l->last_done = done;
    l->total = total;
    l->failures += status != CUABI_SUCCESS;
    return l->cancel_at && (int)done == l->cancel_at;
}

START_TEST(precompile_into_the_cache)
{
    const char *names[] = { "segred<float, 256>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = names;
    o.num_name_expressions = 1;
    cuabi_precompile_item items[2] = { CUABI_PRECOMPILE_ITEM_INIT, CUABI_PRECOMPILE_ITEM_INIT };
    items[0].source = src;
    items[0].name = "segred";
    items[0].options = &o;
    char *v = variant(7);
    items[1].source = v;
    items[1].options = &o;
    const char *archs[] = { "sm_80", "sm_90" };
    progress_log l = { 0 };
    ck_assert_ok(cuabi_cache_precompile(items, 2, archs, 2, on_progress, &l));
    ck_assert_uint_eq(l.calls, 4);
    ck_assert_uint_eq(l.total, 4);
    ck_assert_str_eq(l.archs[0], "sm_80");
    ck_assert_str_eq(l.archs[1], "sm_90");
    ck_assert_uint_eq(stats().entries, 4);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_src(src, "sm_80", NULL), 2);
    ck_assert_int_eq(compile_src(v, "sm_90", NULL), 2);
    /* no archs: each item's own (here the default) */
    l = (progress_log){ 0 };
    ck_assert_ok(cuabi_cache_precompile(items, 1, NULL, 0, on_progress, &l));
    ck_assert_str_eq(l.archs[0], "sm_90");
    ck_assert_uint_eq(l.calls, 1);
    free(v);

    /* a failing item does not stop the others */
    cuabi_precompile_item bad[2] = { CUABI_PRECOMPILE_ITEM_INIT, CUABI_PRECOMPILE_ITEM_INIT };
    bad[0].source = "__global__ void k() { nope; }";
    bad[0].name = "broken";
    bad[1].source = src;
    l = (progress_log){ 0 };
    ck_assert_status(cuabi_cache_precompile(bad, 2, archs, 2, on_progress, &l),
                     CUABI_ERROR_COMPILE);
    ck_assert_error_mentions("2 of 4 compiles failed");
    ck_assert_uint_eq(l.calls, 4);
    ck_assert_uint_eq(l.failures, 2);
    /* cancel */
    l = (progress_log){ .cancel_at = 1 };
    ck_assert_status(cuabi_cache_precompile(items, 1, archs, 2, on_progress, &l),
                     CUABI_ERROR_CALLBACK);
    ck_assert_uint_eq(l.calls, 1);
    /* bad input */
    ck_assert_status(cuabi_cache_precompile(NULL, 1, NULL, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_cache_precompile(items, 1, NULL, 2, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    const char *empty_arch[] = { "" };
    ck_assert_status(cuabi_cache_precompile(items, 1, empty_arch, 1, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_precompile_item nosrc = CUABI_PRECOMPILE_ITEM_INIT;
    ck_assert_status(cuabi_cache_precompile(&nosrc, 1, NULL, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    nosrc.version = 0;
    ck_assert_status(cuabi_cache_precompile(&nosrc, 1, NULL, 0, NULL, NULL),
                     CUABI_ERROR_INVALID_VERSION);
    const char *unknown[] = { "sm_42" };
    ck_assert_status(cuabi_cache_precompile(items, 1, unknown, 1, NULL, NULL),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_cache_precompile(items, 0, NULL, 0, NULL, NULL));
    ck_assert_ok(cuabi_cache_set_enabled(0));
    ck_assert_status(cuabi_cache_precompile(items, 1, NULL, 0, NULL, NULL), CUABI_ERROR_CACHE);
    ck_assert_ok(cuabi_cache_set_enabled(1));
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, miss_then_memory_then_disk_hit);
    tcase_add_test(tc, every_ingredient_changes_the_key);
    tcase_add_test(tc, corrupt_entries_are_rebuilt);
    tcase_add_test(tc, special_files_at_an_entry_path);
    tcase_add_test(tc, huge_entries_are_refused_unread);
    tcase_add_test(tc, entries_not_ours_are_never_used);
    tcase_add_test(tc, shared_directories);
    tcase_add_test(tc, threads_fill_one_key);
    tcase_add_test(tc, processes_fill_one_key);
    tcase_add_test(tc, lru_eviction);
    tcase_add_test(tc, unwritable_directory_does_not_fail);
    tcase_add_test(tc, full_directory_does_not_fail);
    tcase_add_test(tc, disabled_cache);
    tcase_add_test(tc, directory_resolution);
    tcase_add_test(tc, list_and_clear);
    tcase_add_test(tc, second_log_and_linked_flag);
    tcase_add_test(tc, memory_hits_share_one_result);
    tcase_add_test(tc, a_memory_hit_allocates_only_its_objcode);
    tcase_add_test(tc, precompile_into_the_cache);
    tcase_add_test(tc, edited_header_is_not_stale);
    tcase_add_test(tc, unfollowable_include_skips_the_cache);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
