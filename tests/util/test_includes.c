/* The include scan behind the compile cache's key (src/util/includes.c; issue
 * 17 item 5): what reaches a file, what each kind of edit does to the
 * digest, what the scan refuses to guess, and its visitor (what a manifest's
 * source would read, issue 29). The end-to-end regression
 * (an edited header never brings back the old binary) is in test_cache.c. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "util/includes.h"

static char dir[64];

static void setup(void)
{
    strcpy(dir, "/tmp/cuabi-test-includes-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cuabi__includes_reset_for_test();
}

static void teardown(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s; rm -rf %s", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Write dir/rel (making its directory). */
static void put(const char *rel, const char *text)
{
    char path[256], cmd[300];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static char *at(const char *rel)
{
    static char path[8][256];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 256, "%s/%s", dir, rel);
    return p;
}

typedef struct outcome {
    int result;
    uint8_t digest[16];
    char why[1024];
} outcome;

static outcome scan_opts(const char *name, const char *source, const cuabi_program_options *o)
{
    outcome r;
    memset(&r, 0, sizeof r);
    ck_assert_ok(cuabi__includes_digest(&r.result, r.digest, name, source, strlen(source), o,
                                        r.why, sizeof r.why));
    return r;
}

/* Scan `source` named dir/main.cu with include path dir/inc. */
static outcome scan(const char *source)
{
    const char *inc[] = { at("inc") };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = inc;
    o.num_include_paths = 1;
    return scan_opts(at("main.cu"), source, &o);
}

static bool same(const outcome *a, const outcome *b)
{
    return a->result == b->result && !memcmp(a->digest, b->digest, 16);
}

#define ck_assert_hashed(o) \
    ck_assert_msg((o).result == CUABI__INCLUDES_HASHED, "result %d: %s", (o).result, (o).why)

START_TEST(nothing_to_follow)
{
    outcome o = scan("__global__ void k(int *x) { x[0] = 1; }\n");
    ck_assert_int_eq(o.result, CUABI__INCLUDES_NONE);
    /* in comments and strings, an include is no include */
    o = scan("// #include \"a.h\"\n/* #include <b.h>\n#include \"c.h\" */\n"
             "const char *s = \"#include <d.h>\";\n"
             "const char *r = R\"x(\n#include \"e.h\"\n)x\";\n__global__ void k() {}\n");
    ck_assert_int_eq(o.result, CUABI__INCLUDES_NONE);
    ck_assert_str_eq(o.why, "");
}
END_TEST

START_TEST(editing_a_header_changes_the_digest)
{
    put("inc/a.h", "#define A 1\n");
    const char *src = "#include <a.h>\n__global__ void k(int *x) { x[0] = A; }\n";
    outcome o1 = scan(src), o2 = scan(src);
    ck_assert_hashed(o1);
    ck_assert(same(&o1, &o2));
    /* same size, same second: still seen (files modified this recently are read again) */
    put("inc/a.h", "#define A 2\n");
    outcome o3 = scan(src);
    ck_assert_hashed(o3);
    ck_assert(!same(&o1, &o3));
    put("inc/a.h", "#define A 1\n");
    outcome o4 = scan(src);
    ck_assert(same(&o1, &o4)); /* the same contents: the same digest */
    /* a nested header, found next to its includer */
    put("inc/a.h", "#include \"sub/b.h\"\n");
    put("inc/sub/b.h", "#define B 1\n");
    outcome n1 = scan(src);
    put("inc/sub/b.h", "#define B 7\n");
    outcome n2 = scan(src);
    ck_assert(!same(&n1, &n2));
    /* an edit older than the memory of the file: noticed through its stat */
    struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } };
    ck_assert_int_eq(utimensat(AT_FDCWD, at("inc/sub/b.h"), old, 0), 0);
    outcome n3 = scan(src);
    put("inc/sub/b.h", "#define B 8\n");
    ck_assert_int_eq(utimensat(AT_FDCWD, at("inc/sub/b.h"), old, 0), 0);
    outcome n4 = scan(src);
    ck_assert(!same(&n3, &n4)); /* the change time differs */
}
END_TEST

START_TEST(where_files_are_looked_for)
{
    put("inc/a.h", "#define A 1\n");
    const char *quoted = "#include \"a.h\"\n";
    outcome o1 = scan(quoted);
    ck_assert_hashed(o1);
    /* a file of that name next to the source now comes first */
    put("a.h", "#define A 2\n");
    outcome o2 = scan(quoted);
    ck_assert(!same(&o1, &o2));
    /* ... but not for <a.h>, which searches the include paths only */
    outcome a1 = scan("#include <a.h>\n");
    unlink(at("a.h"));
    outcome a2 = scan("#include <a.h>\n");
    ck_assert(same(&a1, &a2));
    /* an absent header appearing in an include path */
    outcome m1 = scan("#include <missing.h>\n");
    ck_assert_hashed(m1);
    put("inc/missing.h", "\n");
    outcome m2 = scan("#include <missing.h>\n");
    ck_assert(!same(&m1, &m2));
    /* a second include path earlier in the list takes over */
    put("inc2/a.h", "#define A 3\n");
    const char *inc[] = { at("inc2"), at("inc") };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = inc;
    o.num_include_paths = 2;
    outcome p1 = scan_opts(at("main.cu"), "#include <a.h>\n", &o);
    put("inc2/a.h", "#define A 4\n");
    outcome p2 = scan_opts(at("main.cu"), "#include <a.h>\n", &o);
    ck_assert(!same(&p1, &p2));
    /* include paths among extra_options, in NVRTC's spellings */
    const char *extra[] = { "-I", at("inc2") };
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.extra_options = extra;
    o.num_extra_options = 2;
    outcome x1 = scan_opts(at("main.cu"), "#include <a.h>\n", &o);
    put("inc2/a.h", "#define A 5\n");
    outcome x2 = scan_opts(at("main.cu"), "#include <a.h>\n", &o);
    ck_assert(!same(&x1, &x2));
    char joined[300];
    snprintf(joined, sizeof joined, "--include-path=%s", at("inc2"));
    extra[0] = joined;
    o.num_extra_options = 1;
    outcome y1 = scan_opts(at("main.cu"), "#include <a.h>\n", &o);
    put("inc2/a.h", "#define A 6\n");
    outcome y2 = scan_opts(at("main.cu"), "#include <a.h>\n", &o);
    ck_assert(!same(&y1, &y2));
}
END_TEST

START_TEST(in_memory_headers_and_options)
{
    put("inc/f.h", "#define F 1\n");
    /* an in-memory header comes first; its own includes reach files */
    const char *hn[] = { "m.h" }, *hc[] = { "#include <f.h>\n" };
    const char *inc[] = { at("inc") };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = inc;
    o.num_include_paths = 1;
    o.header_names = hn;
    o.header_contents = hc;
    o.num_headers = 1;
    outcome o1 = scan_opts(at("main.cu"), "#include \"m.h\"\n", &o);
    ck_assert_hashed(o1);
    put("inc/f.h", "#define F 2\n");
    outcome o2 = scan_opts(at("main.cu"), "#include \"m.h\"\n", &o);
    ck_assert(!same(&o1, &o2));
    /* a file named like the in-memory header does not matter */
    put("m.h", "#define M 1\n");
    outcome o3 = scan_opts(at("main.cu"), "#include \"m.h\"\n", &o);
    ck_assert(same(&o2, &o3));
    /* pre-included headers and a precompiled header count */
    char pre[300], pch[300];
    snprintf(pre, sizeof pre, "--pre-include=%s", at("inc/f.h"));
    snprintf(pch, sizeof pch, "--use-pch=%s", at("x.pch"));
    const char *extra[] = { pre, pch };
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.extra_options = extra;
    o.num_extra_options = 2;
    outcome p1 = scan_opts(at("main.cu"), "__global__ void k() {}\n", &o);
    ck_assert_hashed(p1);
    put("x.pch", "pch");
    outcome p2 = scan_opts(at("main.cu"), "__global__ void k() {}\n", &o);
    ck_assert(!same(&p1, &p2));
    put("inc/f.h", "#define F 3\n");
    outcome p3 = scan_opts(at("main.cu"), "__global__ void k() {}\n", &o);
    ck_assert(!same(&p2, &p3));
    const char *extra2[] = { "-include", at("inc/f.h") };
    o.extra_options = extra2;
    outcome p4 = scan_opts(at("main.cu"), "__global__ void k() {}\n", &o);
    ck_assert_hashed(p4);
}
END_TEST

START_TEST(has_include_and_include_next)
{
    const char *src = "#if __has_include(<opt.h>)\n#define HAVE 1\n#endif\n";
    outcome o1 = scan(src);
    ck_assert_hashed(o1);
    put("inc/opt.h", "x");
    outcome o2 = scan(src);
    ck_assert(!same(&o1, &o2));
    put("inc/opt.h", "y"); /* __has_include asks only whether it exists */
    outcome o3 = scan(src);
    ck_assert(same(&o2, &o3));
    ck_assert_int_eq(scan("#ifdef __has_include\n#endif\n").result, CUABI__INCLUDES_NONE);
    /* #include_next: every include path's file counts */
    put("inc/n.h", "#include_next <n.h>\n");
    put("inc2/n.h", "#define N 1\n");
    const char *inc[] = { at("inc"), at("inc2") };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = inc;
    o.num_include_paths = 2;
    outcome n1 = scan_opts(at("main.cu"), "#include <n.h>\n", &o);
    put("inc2/n.h", "#define N 2\n");
    outcome n2 = scan_opts(at("main.cu"), "#include <n.h>\n", &o);
    ck_assert(!same(&n1, &n2));
}
END_TEST

START_TEST(macros_and_what_cannot_be_followed)
{
    put("inc/a.h", "#define A 1\n");
    /* a macro defined as a file name in the source, by -D, or in a header */
    outcome o1 = scan("#define H <a.h>\n#include H\n");
    ck_assert_hashed(o1);
    put("inc/a.h", "#define A 2\n");
    outcome o2 = scan("#define H <a.h>\n#include H\n");
    ck_assert(!same(&o1, &o2));
    const char *defs[] = { "H=\"a.h\"" };
    const char *inc[] = { at("inc") };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.include_paths = inc;
    o.num_include_paths = 1;
    o.defines = defs;
    o.num_defines = 1;
    ck_assert_hashed(scan_opts(at("main.cu"), "#include H\n", &o));
    const char *extra[] = { "-DH=<a.h>" };
    o.num_defines = 0;
    o.extra_options = extra;
    o.num_extra_options = 1;
    ck_assert_hashed(scan_opts(at("main.cu"), "#include H\n", &o));
    put("inc/names.h", "#define CONFIG_H <a.h>\n#define PICK CONFIG_H\n");
    ck_assert_hashed(scan("#include <names.h>\n#include PICK\n"));
    /* what the scan cannot know without compiling */
    outcome u = scan("#include UNKNOWN\n");
    ck_assert_int_eq(u.result, CUABI__INCLUDES_UNRESOLVED);
    ck_assert_msg(strstr(u.why, "#include UNKNOWN") && strstr(u.why, "main.cu"), "%s", u.why);
    u = scan("#define F(x) <x.h>\n#include F(a)\n");
    ck_assert_int_eq(u.result, CUABI__INCLUDES_UNRESOLVED);
    ck_assert_msg(strstr(u.why, "F(a)") != NULL, "%s", u.why);
    u = scan("#if __has_include(SOMETHING)\n#endif\n");
    ck_assert_int_eq(u.result, CUABI__INCLUDES_UNRESOLVED);
    /* a header that cannot be read */
    if (geteuid() != 0) {
        put("inc/secret.h", "x");
        ck_assert_int_eq(chmod(at("inc/secret.h"), 0), 0);
        u = scan("#include <secret.h>\n");
        ck_assert_int_eq(u.result, CUABI__INCLUDES_UNRESOLVED);
        ck_assert_msg(strstr(u.why, "cannot read") != NULL, "%s", u.why);
    }
}
END_TEST

START_TEST(odd_texts)
{
    /* continued lines, spaces, comments inside the directive, cycles */
    put("inc/a.h", "#include \"b.h\"\n");
    put("inc/b.h", "#include \"a.h\"\n#include <a.h>\n");
    outcome o = scan("  #  inc\\\nlude /* c */ <a.h> // d\n");
    ck_assert_hashed(o);
    put("inc/b.h", "#include \"a.h\"\n#include <a.h>\n//\n");
    outcome o2 = scan("  #  inc\\\nlude /* c */ <a.h> // d\n");
    ck_assert(!same(&o, &o2));
    ck_assert_hashed(scan("%:include <a.h>\n")); /* the digraph of # */
    /* regressions (docs/RELIABILITY.md): an empty directive (was NULL + 0),
     * and a header that includes itself by #include_next, just written so
     * it is read again on every use (was a read of its freed directives) */
    ck_assert_hashed(scan("#\n#include <a.h>\n#\n"));
    put("inc/self.h", "#include_next <self.h>\n#include <self.h>\n#include \"self.h\"\n");
    ck_assert_hashed(scan("#include <self.h>\n#include <self.h>\n"));
    /* unterminated things end the scan quietly */
    ck_assert_int_ne(scan("#include \"a.h").result, CUABI__INCLUDES_UNRESOLVED + 100);
    scan("#include <a.h");
    scan("/* never closed #include <a.h>\n");
    scan("R\"x(never closed\n#include <a.h>\n");
    scan("#define\n#define X\n#define Y(\n#include\n#include_next H\n");
    /* regression (fuzz_includes, ASan): a directive ending in spaces right
     * at the end of the lexer's line buffer, where a header name would
     * start, was read one byte past it; every length up to a few buffer
     * doublings, so one ends exactly at a capacity */
    static char ws[1100];
    for (size_t n = 0; n < 1000; n++) {
        for (int form = 0; form < 2; form++) {
            const char *head = form ? "#if __has_include(" : "#include";
            size_t h = strlen(head);
            memcpy(ws, head, h);
            memset(ws + h, form ? '\t' : ' ', n);
            ws[h + n] = '\0';
            scan(ws);
        }
    }
    /* a thousand files, each including the next */
    char rel[64], text[96];
    for (int i = 0; i < 1000; i++) {
        snprintf(rel, sizeof rel, "inc/chain/%d.h", i);
        snprintf(text, sizeof text, "#include \"%d.h\"\n", i + 1);
        put(rel, text);
    }
    o = scan("#include <chain/0.h>\n");
    ck_assert_hashed(o);
    put("inc/chain/999.h", "#define END 1\n");
    o2 = scan("#include <chain/0.h>\n");
    ck_assert(!same(&o, &o2));
    /* NUL bytes and binary junk in a header */
    FILE *f = fopen(at("inc/bin.h"), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 4096; i++)
        fputc((i * 7919) & 255, f);
    fclose(f);
    ck_assert_hashed(scan("#include <bin.h>\n"));
}
END_TEST

/* cuabi__includes_visit (issue 29 item 8: a manifest's sources may include
 * only files of its tree): every file an include would read, once, in the
 * order found — not those __has_include only asks about — and a visitor
 * that says stop stops the scan. */
typedef struct visits {
    int n, stop_at;
    char seen[8][256];
} visits;

static int on_file(const char *path, void *ctx)
{
    visits *v = ctx;
    if (v->n < 8)
        snprintf(v->seen[v->n], 256, "%s", path);
    return ++v->n == v->stop_at;
}

START_TEST(visiting_what_a_compile_reads)
{
    put("a.h", "#include \"b.h\"\n#include \"b.h\"\n");
    put("b.h", "#if __has_include(\"c.h\")\n#endif\n");
    put("c.h", "");
    char src[512], why[256];
    snprintf(src, sizeof src, "#include \"%s\"\n#include <%s>\n", at("a.h"), "missing.h");
    visits v = { 0 };
    int result;
    ck_assert_ok(cuabi__includes_visit(&result, "k.cu", src, strlen(src), NULL, on_file, &v,
                                       why, sizeof why));
    ck_assert_int_eq(result, CUABI__INCLUDES_HASHED);
    ck_assert_int_eq(v.n, 2);
    ck_assert_str_eq(v.seen[0], at("a.h"));
    ck_assert_ptr_nonnull(strstr(v.seen[1], "b.h"));
    v = (visits){ .stop_at = 1 };
    ck_assert_ok(cuabi__includes_visit(&result, "k.cu", src, strlen(src), NULL, on_file, &v,
                                       why, sizeof why));
    ck_assert_int_eq(result, CUABI__INCLUDES_STOPPED);
    ck_assert_int_eq(v.n, 1);
    v = (visits){ 0 };
    ck_assert_ok(cuabi__includes_visit(&result, "k.cu", "#include PICK(x)\n", 17, NULL,
                                       on_file, &v, why, sizeof why));
    ck_assert_int_eq(result, CUABI__INCLUDES_UNRESOLVED);
    ck_assert_ok(cuabi__includes_visit(&result, "k.cu", "int x;\n", 7, NULL, on_file, &v,
                                       why, sizeof why));
    ck_assert_int_eq(result, CUABI__INCLUDES_NONE);
    ck_assert_int_eq(v.n, 0);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("includes");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, nothing_to_follow);
    tcase_add_test(tc, editing_a_header_changes_the_digest);
    tcase_add_test(tc, where_files_are_looked_for);
    tcase_add_test(tc, in_memory_headers_and_options);
    tcase_add_test(tc, has_include_and_include_next);
    tcase_add_test(tc, macros_and_what_cannot_be_followed);
    tcase_add_test(tc, odd_texts);
    tcase_add_test(tc, visiting_what_a_compile_reads);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
