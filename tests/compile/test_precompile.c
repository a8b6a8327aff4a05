/* Precompiling a project (issue 13 item 3): manifests read into compiles
 * (src/compile/manifest.c), cuabi_cache_warm_manifest end to end on NVRTC without
 * a GPU (explicit architectures), its bad input (FIFOs, odd names, a BOM,
 * files outside the manifest's tree: issue 29), cuabi_cache_verify, and
 * that nothing half-written is ever read. The CLI is tests/check_cli_cache.sh. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "compile/cache.h"
#include "compile/manifest.h"
#include "compile/objcode.h"
#include "compile/program.h"
#include "util/file.h"

static char tmpdir[64], cachedir[96];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/cuabi-test-precompile-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(cachedir, sizeof cachedir, "%s/cache", tmpdir);
    setenv("CUABI_CACHE_DIR", cachedir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

static void teardown(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s; rm -rf %s", tmpdir, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}

static char *at(const char *rel)
{
    static char path[8][256];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 256, "%s/%s", tmpdir, rel);
    return p;
}

static void put(const char *rel, const char *text)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", at(rel));
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(at(rel), "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static cuabi__manifest read_text(const char *text)
{
    cuabi__manifest m;
    ck_assert_ok(cuabi__manifest_read(&m, text, strlen(text), "m.toml", tmpdir, 0, "test"));
    return m;
}

/* The manifest has a problem on `line` whose message holds `needle`. */
static void has_problem(const cuabi__manifest *m, int line, const char *needle)
{
    for (size_t i = 0; i < m->num_problems; i++)
        if (m->problems[i].line == line && strstr(m->problems[i].message, needle))
            return;
    for (size_t i = 0; i < m->num_problems; i++)
        fprintf(stderr, "  problem line %d: %s\n", m->problems[i].line, m->problems[i].message);
    ck_abort_msg("no problem on line %d mentioning \"%s\"", line, needle);
}

/* ------------------------------------------------------------ manifests */

START_TEST(manifest_settings)
{
    put("k.cu", "__global__ void k() {}\n");
    put("k.ptx", ".version 8.0\n.target sm_80\n.address_size 64\n");
    put("inc/h.h", "#define H 1\n");
    cuabi__manifest m = read_text(
        "archs = [\"sm_80\", \"sm_90\"]\n"            /* 1 */
        "std = \"c++17\"\n"
        "defines = [\"A=1\"]\n"
        "include_paths = [\"/top\"]\n"
        "options = [\"-lineinfo\"]\n"                 /* 5 */
        "opt_level = 2\n"
        "[[header]]\n"
        "name = \"h.h\"\n"
        "file = \"inc/h.h\"\n"
        "[[source]]\n"                                /* 10 */
        "file = \"k.cu\"\n"
        "name_expressions = [\"a\", \"b\"]\n"
        "defines = [\"B=2\"]\n"
        "archs = \"sm_75\"\n"
        "debug = true\n"                              /* 15 */
        "opt_level = 0\n"
        "output = \"ltoir\"\n"
        "lto = true\n"
        "[[source.header]]\n"
        "name = \"own.h\"\n"                          /* 20 */
        "code = \"#define OWN 1\"\n"
        "[[source]]\n"
        "name = \"inline.cu\"\n"
        "code = '''\n"
        "__global__ void j() {}\n"                    /* 25 */
        "'''\n"
        "[[source]]\n"
        "file = \"k.ptx\"\n");
    ck_assert_msg(m.num_problems == 0, "%s", m.num_problems ? m.problems[0].message : "");
    ck_assert_uint_eq(m.num_sources, 3);
    const cuabi__manifest_source *s = &m.sources[0];
    ck_assert_int_eq(s->line, 10);
    ck_assert_int_eq(s->archs_line, 14);
    ck_assert_uint_eq(s->num_archs, 1);
    ck_assert_str_eq(s->archs[0], "sm_75");
    ck_assert_str_eq(s->name, at("k.cu"));
    ck_assert_str_eq(s->text, "__global__ void k() {}\n");
    ck_assert_int_eq(s->type, CUABI_CODE_CUDA_CXX);
    const cuabi_program_options *o = &s->options;
    ck_assert_str_eq(o->std, "c++17");
    ck_assert_uint_eq(o->num_defines, 2); /* lists add up */
    ck_assert_str_eq(o->defines[0], "A=1");
    ck_assert_str_eq(o->defines[1], "B=2");
    ck_assert_uint_eq(o->num_include_paths, 1);
    ck_assert_uint_eq(o->num_extra_options, 1);
    ck_assert_int_eq(o->opt_level, 0); /* a value replaces */
    ck_assert_int_eq(o->debug, 1);
    ck_assert_int_eq(o->lto, 1);
    ck_assert_int_eq(o->output, CUABI_CODE_LTOIR);
    ck_assert_uint_eq(o->num_name_expressions, 2);
    ck_assert_uint_eq(o->num_headers, 2);
    ck_assert_str_eq(o->header_names[0], "h.h");
    ck_assert_str_eq(o->header_contents[0], "#define H 1\n");
    ck_assert_str_eq(o->header_names[1], "own.h");
    s = &m.sources[1];
    ck_assert_str_eq(s->name, "inline.cu");
    ck_assert_str_eq(s->text, "__global__ void j() {}\n");
    ck_assert_uint_eq(s->num_archs, 2);
    ck_assert_int_eq(s->options.opt_level, 2);
    s = &m.sources[2]; /* PTX: only the defaults that apply to PTX */
    ck_assert_int_eq(s->type, CUABI_CODE_PTX);
    ck_assert_ptr_null(s->options.std);
    ck_assert_uint_eq(s->options.num_defines, 0);
    ck_assert_uint_eq(s->options.num_include_paths, 0);
    ck_assert_uint_eq(s->options.num_headers, 0);
    ck_assert_uint_eq(s->num_archs, 2);
    ck_assert_uint_eq(s->options.num_extra_options, 1);
    cuabi__manifest_free(&m);
}
END_TEST

START_TEST(manifest_problems_with_their_lines)
{
    put("k.cu", "__global__ void k() {}\n");
    put("nul.cu", "");
    FILE *f = fopen(at("nul.cu"), "wb");
    fwrite("a\0b", 1, 3, f);
    fclose(f);
    cuabi__manifest m = read_text(
        "[[source]]\n"                                /* 1: fine */
        "file = \"k.cu\"\n"
        "[[source]]\n"                                /* 3 */
        "file = \"missing.cu\"\n"                     /* 4: missing file */
        "[[source]]\n"                                /* 5 */
        "file = \"k.cu\"\n"
        "archs = [\"sm_9\"]\n"                        /* 7: malformed arch */
        "[[source]]\n"                                /* 8: neither file nor code */
        "name = \"x\"\n"
        "[[source]]\n"                                /* 10 */
        "file = \"k.cu\"\n"
        "code = \"x\"\n"                              /* both */
        "[[source]]\n"                                /* 13 */
        "file = \"k.cu\"\n"
        "naem_expressions = [\"k\"]\n"                /* 15: misspelt */
        "[[source]]\n"                                /* 16 */
        "file = \"k.cu\"\n"
        "defines = \"A=1\"\n"                         /* 18: not an array */
        "debug = 1\n"                                 /* 19: not a boolean */
        "[[source]]\n"                                /* 20 */
        "file = \"k.cu\"\n"
        "output = \"object\"\n"                       /* 22 */
        "opt_level = 7\n"                             /* 23 */
        "[[source]]\n"                                /* 24 */
        "file = \"nul.cu\"\n"                         /* 25: NUL byte */
        "[[source]]\n"                                /* 26 */
        "code = \"\"\n"                               /* 27: empty */
        "[[source]]\n"                                /* 28 */
        "file = \"k.cu\"\n"
        "name_expressions = [\"\", 3]\n"              /* 30 */
        "[[source]]\n"                                /* 31 */
        "file = \"k.cu\"\n"
        "[[source.header]]\n"                         /* 33: header without content */
        "name = \"h.h\"\n"
        "[[source]]\n"                                /* 35 */
        "file = \"k.cu\"\n"
        "[[source.header]]\n"
        "name = \"h.h\"\n"
        "file = \"nothere.h\"\n"                      /* 39 */
        "colour = \"red\"\n"                          /* 40 */
        "x = 1.5\n"                                   /* 41: TOML error, kept going */
        "[[source]]\n"                                /* 42: fine again */
        "code = \"__global__ void z() {}\"\n");
    has_problem(&m, 4, "cannot open");
    has_problem(&m, 7, "sm_9");
    has_problem(&m, 8, "needs either file");
    has_problem(&m, 10, "not both");
    has_problem(&m, 15, "unknown key \"naem_expressions\"");
    has_problem(&m, 18, "\"defines\" must be an array of strings, not a string");
    has_problem(&m, 19, "\"debug\" must be a boolean, not an integer");
    has_problem(&m, 22, "\"output\" is \"object\"");
    has_problem(&m, 23, "\"opt_level\" is 7");
    has_problem(&m, 25, "holds a NUL byte");
    has_problem(&m, 27, "\"code\" is empty");
    has_problem(&m, 30, "must be a non-empty string");
    has_problem(&m, 33, "needs a name and either file or code");
    has_problem(&m, 39, "cannot open");
    has_problem(&m, 40, "unknown key \"colour\"");
    has_problem(&m, 41, "floats");
    ck_assert_uint_eq(m.num_sources, 2); /* lines 1 and 42 */
    ck_assert_int_eq(m.sources[0].line, 1);
    ck_assert_int_eq(m.sources[1].line, 42);
    for (size_t i = 0; i < m.num_problems; i++)
        ck_assert_int_ne(m.problems[i].status, CUABI_SUCCESS);
    cuabi__manifest_free(&m);

    /* a problem at the top level: reported once, and nothing is compiled */
    m = read_text("std = 17\nname_expressions = [\"k\"]\n[[source]]\nfile = \"k.cu\"\n"
                  "[[source]]\nfile = \"k.cu\"\n");
    ck_assert_uint_eq(m.num_problems, 2);
    has_problem(&m, 1, "\"std\" must be a string");
    has_problem(&m, 2, "belong to a [[source]]");
    ck_assert_uint_eq(m.num_sources, 0);
    cuabi__manifest_free(&m);
    m = read_text("# nothing\n");
    has_problem(&m, 0, "lists no [[source]]");
    cuabi__manifest_free(&m);
    m = read_text("source = 1\n");
    has_problem(&m, 1, "[[source]] tables");
    cuabi__manifest_free(&m);
    m = read_text("[[header]]\nname = \"h\"\nfile = \"gone.h\"\n[[source]]\nfile = \"k.cu\"\n");
    has_problem(&m, 3, "cannot open");
    ck_assert_uint_eq(m.num_problems, 1);
    ck_assert_uint_eq(m.num_sources, 0);
    cuabi__manifest_free(&m);
}
END_TEST

/* issue 29 item 5: a BOM is skipped; a name with a NUL (the escape is
 * refused, the line dropped: the source compiled as "program.cu") or with
 * invalid UTF-8 (reported, then compiled under that name) is a problem and
 * its source is not compiled; the other sources are. */
START_TEST(manifest_names_and_bom)
{
    cuabi__manifest m = read_text("\xef\xbb\xbf" "archs = [\"sm_90\"]\n[[source]]\n"
                                  "code = \"__global__ void k() {}\"\n");
    ck_assert_msg(m.num_problems == 0, "%s", m.num_problems ? m.problems[0].message : "");
    ck_assert_uint_eq(m.num_sources, 1);
    ck_assert_uint_eq(m.sources[0].num_archs, 1);
    cuabi__manifest_free(&m);

    m = read_text("[[source]]\n"                              /* 1 */
                  "name = \"\\u0000x.cu\"\n"                  /* 2 */
                  "code = \"__global__ void k() {}\"\n"
                  "[[source]]\n"                              /* 4 */
                  "name = \"bad\xff\xfe" "name.cu\"\n"        /* 5 */
                  "code = \"__global__ void k() {}\"\n"
                  "[[source]]\n"                              /* 7 */
                  "code = \"__global__ void k() {}\"\n"
                  "[[source.header]]\n"                       /* 9 */
                  "name = \"h\xc0\xaf.h\"\n"                  /* 10: overlong '/' */
                  "code = \"\"\n"
                  "[[source]]\n"                              /* 12: fine */
                  "name = \"ok.cu\"\n"
                  "code = \"__global__ void k() {}\"\n");
    has_problem(&m, 2, "NUL");
    has_problem(&m, 5, "invalid UTF-8");
    has_problem(&m, 10, "invalid UTF-8");
    ck_assert_uint_eq(m.num_problems, 3);
    ck_assert_uint_eq(m.num_sources, 1);
    ck_assert_str_eq(m.sources[0].name, "ok.cu");
    cuabi__manifest_free(&m);

    /* in a top-level [[header]]: nothing is compiled */
    m = read_text("[[header]]\nname = \"h\xff.h\"\ncode = \"\"\n[[source]]\n"
                  "code = \"__global__ void k() {}\"\n");
    has_problem(&m, 2, "invalid UTF-8");
    ck_assert_uint_eq(m.num_sources, 0);
    cuabi__manifest_free(&m);
}
END_TEST

/* issue 29 item 3: a FIFO as the manifest, as a source's or a header's
 * file blocked in fopen for ever; refused at once now, by name. */
START_TEST(manifest_fifos)
{
    put("k.cu", "__global__ void k() {}\n");
    ck_assert_int_eq(mkfifo(at("m.toml"), 0600), 0);
    ck_assert_int_eq(mkfifo(at("fifo.cu"), 0600), 0);
    ck_assert_int_eq(mkfifo(at("fifo.h"), 0600), 0);
    alarm(20);
    cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_IO);
    ck_assert_error_mentions("is a FIFO, not a regular file");
    cuabi__manifest m = read_text("[[source]]\n"
                                  "file = \"fifo.cu\"\n"      /* 2 */
                                  "[[source]]\n"
                                  "file = \"k.cu\"\n"
                                  "[[source.header]]\n"
                                  "name = \"h.h\"\n"
                                  "file = \"fifo.h\"\n"       /* 7 */
                                  "[[source]]\n"
                                  "file = \"k.cu\"\n");
    alarm(0);
    has_problem(&m, 2, "a FIFO, not a regular file");
    has_problem(&m, 7, "a FIFO, not a regular file");
    ck_assert_uint_eq(m.num_sources, 1);
    cuabi__manifest_free(&m);
}
END_TEST

/* issue 29 item 8: a manifest read any path — file = "../../../etc/passwd"
 * or "/etc/shadow", a link out of its tree, an include path or an #include
 * elsewhere — and the compile error quoted its first line (stdout JSON and
 * stderr: a manifest from an untrusted repository copied readable files
 * into CI logs). Everything a manifest makes the library read now lies in
 * its own tree unless the caller (never the manifest) allows it, and a
 * file that is not UTF-8 text is not compiled. */
static cuabi__manifest read_in(const char *dir, const char *text, unsigned flags)
{
    cuabi__manifest m;
    ck_assert_ok(cuabi__manifest_read(&m, text, strlen(text), "m.toml", dir, flags, "test"));
    return m;
}

START_TEST(manifests_stay_in_their_tree)
{
    put("secret.txt", "root:x:0:0:SECRET-LINE\n");
    put("proj/k.cu", "#include \"inc/h.h\"\n__global__ void k() { H; }\n");
    put("proj/inc/h.h", "#define H\n");
    put("proj/latin1.cu", "// caf\xe9\n__global__ void l() {}\n");
    ck_assert_int_eq(symlink(at("secret.txt"), at("proj/link.cu")), 0);
    ck_assert_int_eq(symlink(at("proj/k.cu"), at("proj/inner.cu")), 0); /* a link inside: fine */
    char proj[128], text[4096];
    snprintf(proj, sizeof proj, "%s", at("proj"));
    snprintf(text, sizeof text,
             "[[source]]\n"                                         /* 1 */
             "file = \"../secret.txt\"\n"                           /* 2 */
             "[[source]]\n"                                         /* 3 */
             "file = \"%s\"\n"                                      /* 4: absolute */
             "[[source]]\n"                                         /* 5 */
             "file = \"link.cu\"\n"                                 /* 6: a link out */
             "[[source]]\n"                                         /* 7 */
             "file = \"k.cu\"\n"
             "[[source.header]]\n"
             "name = \"s.h\"\n"
             "file = \"../secret.txt\"\n"                           /* 11 */
             "[[source]]\n"                                         /* 12 */
             "file = \"k.cu\"\n"
             "include_paths = [\"%s\"]\n"                           /* 14 */
             "[[source]]\n"                                         /* 15 */
             "file = \"k.cu\"\n"
             "options = [\"-I\", \"%s\", \"--pre-include=/etc/hostname\"]\n" /* 17 */
             "[[source]]\n"                                         /* 18 */
             "code = \"#include \\\"%s\\\"\"\n"                     /* an #include outside */
             "[[source]]\n"                                         /* 20 */
             "name = \"%s/x.cu\"\n"                                 /* quoted: next to the name */
             "code = \"#include \\\"secret.txt\\\"\"\n"
             "[[source]]\n"                                         /* 23 */
             "code = \"#include PICK(x)\"\n"                        /* cannot be followed */
             "[[source]]\n"                                         /* 25 */
             "file = \"latin1.cu\"\n"                               /* 26: not UTF-8 */
             "[[source]]\n"                                         /* 27: fine */
             "file = \"k.cu\"\n"
             "[[source]]\n"                                         /* 29: fine */
             "file = \"inner.cu\"\n",
             at("secret.txt"), tmpdir, tmpdir, at("secret.txt"), tmpdir);
    cuabi__manifest m = read_in(proj, text, 0);
    has_problem(&m, 2, "lies outside the manifest's directory");
    has_problem(&m, 4, "lies outside");
    has_problem(&m, 6, "lies outside");
    has_problem(&m, 11, "lies outside");
    has_problem(&m, 14, "include path");
    has_problem(&m, 17, "lies outside");
    has_problem(&m, 18, "secret.txt, which lies outside");
    has_problem(&m, 20, "secret.txt, which lies outside");
    has_problem(&m, 23, "cannot be told without compiling");
    has_problem(&m, 26, "is not UTF-8 text (line 1)");
    for (size_t i = 0; i < m.num_problems; i++) {
        ck_assert_msg(!strstr(m.problems[i].message, "SECRET"), "%s", m.problems[i].message);
        ck_assert_msg(strstr(m.problems[i].message, "--allow-outside") ||
                      strstr(m.problems[i].message, "UTF-8"), "%s", m.problems[i].message);
    }
    ck_assert_uint_eq(m.num_problems, 11); /* line 17 twice: -I and --pre-include */
    ck_assert_uint_eq(m.num_sources, 2);
    ck_assert_int_eq(m.sources[0].line, 27);
    ck_assert_int_eq(m.sources[1].line, 29);
    cuabi__manifest_free(&m);

    /* the caller can allow it (never the manifest); UTF-8 is still required */
    m = read_in(proj, text, CUABI__MANIFEST_ALLOW_OUTSIDE);
    has_problem(&m, 26, "is not UTF-8 text");
    ck_assert_uint_eq(m.num_problems, 1);
    ck_assert_uint_eq(m.num_sources, 11);
    cuabi__manifest_free(&m);
}
END_TEST

/* The same end to end: the compile error of a file outside never reaches
 * the event, the error or the log; allow_outside (version 2 of the options
 * only) lets it through. */
typedef struct leak_check {
    int events;
    bool leaked;
} leak_check;

static int no_secret(const cuabi_warm_event *ev, void *payload)
{
    leak_check *c = payload;
    c->events++;
    c->leaked |= strstr(ev->message, "SECRET") || strstr(ev->log, "SECRET");
    return 0;
}

START_TEST(warm_stays_in_the_tree)
{
    put("secret.txt", "root:x:0:0:SECRET-LINE\n");
    put("proj/m.toml", "archs = [\"sm_90\"]\n[[source]]\nfile = \"../secret.txt\"\n"
                       "type = \"cuda\"\n");
    leak_check c = { 0 };
    cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("proj/m.toml"), NULL, no_secret, &c),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(!strstr(cuabi_last_error()->message, "SECRET"), "%s",
                  cuabi_last_error()->message);
    ck_assert_error_mentions("lies outside");
    ck_assert(!c.leaked);
    ck_assert_uint_eq(s.problems, 1);
    ck_assert_uint_eq(s.total, 0);
    /* a version-1 options struct has no allow_outside: confined */
    cuabi_warm_options o = CUABI_WARM_OPTIONS_INIT;
    o.version = 1;
    o.allow_outside = 1; /* past the end of a version-1 struct: not read */
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("proj/m.toml"), &o, no_secret, &c),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert(!c.leaked);
    /* allowed by the caller: compiled, and the compiler quotes it */
    o = (cuabi_warm_options)CUABI_WARM_OPTIONS_INIT;
    o.allow_outside = 1;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("proj/m.toml"), &o, no_secret, &c),
                     CUABI_ERROR_COMPILE);
    ck_assert(c.leaked);
    ck_assert_uint_eq(s.total, 1);
}
END_TEST

/* --------------------------------------------------------------- warming */

typedef struct events {
    size_t n;
    int lines[32], hits[32];
    cuabi_status status[32];
    char arch[32][16], name[32][128], message[32][256];
    int cancel_at;
} events;

static int record(const cuabi_warm_event *ev, void *payload)
{
    events *e = payload;
    ck_assert_uint_eq(ev->done, e->n + 1);
    ck_assert_uint_ge(ev->total, ev->done);
    ck_assert_ptr_nonnull(ev->message);
    ck_assert_ptr_nonnull(ev->log);
    if (e->n < 32) {
        e->lines[e->n] = ev->line;
        e->hits[e->n] = ev->cache_hit;
        e->status[e->n] = ev->status;
        snprintf(e->arch[e->n], 16, "%s", ev->arch);
        snprintf(e->name[e->n], 128, "%s", ev->name);
        snprintf(e->message[e->n], 256, "%s", ev->message);
    }
    e->n++;
    return e->cancel_at && (int)ev->done == e->cancel_at;
}

static const char project[] =
    "archs = [\"sm_80\", \"sm_90\"]\n"                 /* 1 */
    "include_paths = [\"%s/inc\"]\n"
    "\n"
    "[[source]]\n"                                     /* 4 */
    "file = \"kernels/seg.cu\"\n"
    "name_expressions = [\"seg<float, 128>\"]\n"
    "\n"
    "[[source]]\n"                                     /* 8 */
    "file = \"kernels/broken.cu\"\n"
    "archs = [\"sm_90\"]\n"
    "\n"
    "[[source]]\n"                                     /* 12 */
    "file = \"kernels/absent.cu\"\n"                   /* 13 */
    "this is not TOML\n";                              /* 14 */

static void write_project(void)
{
    put("inc/scale.h", "#define SCALE 3\n");
    put("kernels/seg.cu", "#include <scale.h>\n"
                          "template <typename T, int N> __global__ void seg(T *x) "
                          "{ x[threadIdx.x] *= N * SCALE; }\n");
    put("kernels/broken.cu", "__global__ void broken() { nope; }\n");
    char text[1024];
    snprintf(text, sizeof text, project, tmpdir);
    put("m.toml", text);
}

START_TEST(warm_a_project)
{
    write_project();
    for (int jobs = 0; jobs <= 1; jobs++) { /* one per CPU, then one by one */
        events e = { 0 };
        cuabi_warm_options o = CUABI_WARM_OPTIONS_INIT;
        o.jobs = jobs;
        cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
        ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), &o, record, &e),
                         CUABI_ERROR_COMPILE);
        ck_assert_error_mentions("1 of 3 compiles failed, 2 problems with the manifest");
        ck_assert_uint_eq(e.n, 5);
        /* in line order: seg x2 (line 4), broken (8), absent (13), junk (14) */
        int want_lines[] = { 4, 4, 8, 13, 14 };
        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(e.lines[i], want_lines[i]);
        ck_assert_str_eq(e.arch[0], "sm_80");
        ck_assert_str_eq(e.arch[1], "sm_90");
        ck_assert_int_eq(e.status[0], CUABI_SUCCESS);
        ck_assert_int_eq(e.hits[0], jobs == 0 ? 0 : 1); /* the second round: memory */
        ck_assert_int_eq(e.status[2], CUABI_ERROR_COMPILE);
        ck_assert_msg(strstr(e.message[2], "nope"), "%s", e.message[2]);
        ck_assert_int_eq(e.status[3], CUABI_ERROR_IO);
        ck_assert_int_eq(e.hits[3], -1);
        ck_assert_str_eq(e.arch[3], "");
        ck_assert_str_eq(e.name[3], at("m.toml"));
        ck_assert_int_eq(e.status[4], CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_uint_eq(s.total, 3);
        ck_assert_uint_eq(s.compiled, jobs == 0 ? 2 : 0);
        ck_assert_uint_eq(s.cached, jobs == 0 ? 0 : 2);
        ck_assert_uint_eq(s.failed, 1);
        ck_assert_uint_eq(s.problems, 2);
    }
    /* a fresh process would find it on disk: the program's own compile
     * (same options) is a disk hit */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    cuabi_program *p;
    const char *names[] = { "seg<float, 128>" }, *incs[2];
    char inc[160];
    snprintf(inc, sizeof inc, "%s/inc", tmpdir);
    incs[0] = inc;
    cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
    po.arch = "sm_90";
    po.include_paths = incs;
    po.num_include_paths = 1;
    po.name_expressions = names;
    po.num_name_expressions = 1;
    FILE *f = fopen(at("kernels/seg.cu"), "r");
    char src[512] = "";
    ck_assert_uint_gt(fread(src, 1, sizeof src - 1, f), 0);
    fclose(f);
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, at("kernels/seg.cu")));
    ck_assert_ok(cuabi_program_compile(NULL, p, &po));
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 2);
    ck_assert_ok(cuabi_program_release(p));

    /* options.archs replace the manifest's; a NULL summary is fine */
    events e = { 0 };
    const char *archs[] = { "sm_75" };
    cuabi_warm_options o = CUABI_WARM_OPTIONS_INIT;
    o.archs = archs;
    o.num_archs = 1;
    ck_assert_status(cuabi_cache_warm_manifest(NULL, at("m.toml"), &o, record, &e),
                     CUABI_ERROR_COMPILE);
    ck_assert_uint_eq(e.n, 4);
    ck_assert_str_eq(e.arch[0], "sm_75");
    ck_assert_int_eq(e.hits[0], 0);

    /* cancel from the callback: the compiles under way end, no more reports */
    e = (events){ .cancel_at = 1 };
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL));
    ck_assert_status(cuabi_cache_warm_manifest(NULL, at("m.toml"), NULL, record, &e),
                     CUABI_ERROR_CALLBACK);
    ck_assert_uint_eq(e.n, 1);
    /* no callback at all */
    ck_assert_status(cuabi_cache_warm_manifest(NULL, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_COMPILE);
}
END_TEST

/* NVVM IR in a manifest: .ll text and .bc bitcode (binary: NUL bytes are
 * fine there), PTX by default whatever output the C++ sources take,
 * libdevice on request; what libNVVM cannot make is reported with the
 * source's line. A warmed entry is what the program's own compile hits. */
static void copy_data(const char *name, const char *rel)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/tests/fixtures/data/%s' '%s'", at("ir"),
             cuabi_test_srcdir(), name, at(rel));
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(warm_nvvm_ir)
{
    copy_data("nvvm_kernels.ll", "ir/k.ll");
    copy_data("nvvm_kernels.bc", "ir/k.bc");
    put("m.toml", "archs = \"sm_90\"\n"                    /* 1 */
                  "output = \"cubin\"\n"                   /* 2: the C++ sources' */
                  "std = \"c++17\"\n"
                  "libdevice = true\n"                     /* 4: NVVM IR's */
                  "[[source]]\n"                           /* 5 */
                  "file = \"ir/k.ll\"\n"
                  "[[source]]\n"                           /* 7 */
                  "file = \"ir/k.bc\"\n"
                  "output = \"ltoir\"\n"
                  "[[source]]\n"                           /* 10 */
                  "type = \"nvvm\"\n"
                  "code = \"define void @k() {\\n  bogus\\n}\\n\"\n"
                  "[[source]]\n"                           /* 13 */
                  "file = \"ir/k.ll\"\n"
                  "output = \"cubin\"\n"
                  "[[source]]\n"                           /* 16 */
                  "code = \"__global__ void c() {}\"\n");
    events e = { 0 };
    cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, record, &e),
                     CUABI_ERROR_COMPILE);
    ck_assert_uint_eq(e.n, 5);
    int want_lines[] = { 5, 7, 10, 15, 16 };
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(e.lines[i], want_lines[i]);
    ck_assert_msg(e.status[0] == CUABI_SUCCESS, "%s", e.message[0]);
    ck_assert_msg(e.status[1] == CUABI_SUCCESS, "%s", e.message[1]);
    ck_assert_int_eq(e.status[2], CUABI_ERROR_COMPILE);
    ck_assert_msg(strstr(e.message[2], "bogus") || strstr(e.message[2], "parse"), "%s",
                  e.message[2]);
    ck_assert_int_eq(e.status[3], CUABI_ERROR_INVALID_ARGUMENT); /* the manifest's */
    ck_assert_int_eq(e.hits[3], -1);
    ck_assert_msg(strstr(e.message[3], "not \"cubin\""), "%s", e.message[3]);
    ck_assert_msg(e.status[4] == CUABI_SUCCESS, "%s", e.message[4]); /* no std/libdevice */
    ck_assert_uint_eq(s.compiled, 3);
    ck_assert_uint_eq(s.failed, 1);
    ck_assert_uint_eq(s.problems, 1);

    /* the program's own compile of the text IR (PTX, libdevice) hits on disk */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    void *ir;
    size_t size;
    ck_assert_ok(cuabi__read_file(at("ir/k.ll"), &ir, &size, "test"));
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, ir, size, at("ir/k.ll")));
    cuabi__free(ir);
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.output = CUABI_CODE_PTX;
    o.libdevice = 1;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 2);
    ck_assert_ok(cuabi_program_release(p));

    /* the reader: types by extension or name, bitcode's NUL bytes only */
    put("x.cu", "__global__ void x() {}\n");
    cuabi__manifest m = read_text("[[source]]\nfile = \"ir/k.bc\"\n"
                                  "[[source]]\nfile = \"ir/k.bc\"\ntype = \"cuda\"\n"
                                  "[[source]]\nfile = \"x.cu\"\ntype = \"nvvm\"\n"
                                  "[[source]]\ncode = \"x\"\ntype = \"llvm\"\n");
    ck_assert_uint_eq(m.num_sources, 2);
    ck_assert_int_eq(m.sources[0].type, CUABI_CODE_NVVM);
    ck_assert_int_eq(m.sources[0].options.output, CUABI_CODE_PTX);
    ck_assert_uint_gt(m.sources[0].size, strlen(m.sources[0].text)); /* binary, kept whole */
    ck_assert_int_eq(m.sources[1].type, CUABI_CODE_NVVM);
    has_problem(&m, 4, "holds a NUL byte");
    has_problem(&m, 11, "use one of \"cuda\", \"c++\", \"ptx\", \"nvvm\"");
    cuabi__manifest_free(&m);
    /* a top-level type is every source's default, and the defaults that
     * apply are that type's (no std for NVVM IR, PTX output) */
    m = read_text("type = \"nvvm\"\nstd = \"c++17\"\noutput = \"cubin\"\n"
                  "[[source]]\ncode = \"define void @k() {\\n  ret void\\n}\"\n");
    ck_assert_uint_eq(m.num_problems, 0);
    ck_assert_uint_eq(m.num_sources, 1);
    ck_assert_int_eq(m.sources[0].type, CUABI_CODE_NVVM);
    ck_assert_ptr_null(m.sources[0].options.std);
    ck_assert_int_eq(m.sources[0].options.output, CUABI_CODE_PTX);
    ck_assert_str_eq(m.sources[0].name, "program.ll");
    cuabi__manifest_free(&m);
}
END_TEST

START_TEST(warm_bad_input)
{
    write_project();
    cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
    cuabi_warm_options o = CUABI_WARM_OPTIONS_INIT;
    ck_assert_status(cuabi_cache_warm_manifest(&s, NULL, NULL, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_cache_warm_manifest(&s, "", NULL, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("none.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_IO);
    ck_assert_error_mentions("none.toml");
    ck_assert_status(cuabi_cache_warm_manifest(&s, tmpdir, NULL, NULL, NULL), CUABI_ERROR_IO);
    s.version = 0;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_INVALID_VERSION);
    s.version = CUABI_WARM_SUMMARY_VERSION;
    o.version = 99;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), &o, NULL, NULL),
                     CUABI_ERROR_INVALID_VERSION);
    o = (cuabi_warm_options)CUABI_WARM_OPTIONS_INIT;
    o.jobs = -1;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), &o, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    o.jobs = 0;
    o.num_archs = 1;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), &o, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    const char *bad[] = { "sm9" }, *empty[] = { "" };
    o.archs = bad;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), &o, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("sm9");
    o.archs = empty;
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), &o, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* the cache off, or a directory it cannot use: CUABI_ERROR_CACHE */
    ck_assert_ok(cuabi_cache_set_enabled(0));
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_CACHE);
    ck_assert_error_mentions("disabled");
    ck_assert_ok(cuabi_cache_set_enabled(1));
    put("plainfile", "x");
    ck_assert_ok(cuabi_cache_set_directory(at("plainfile")));
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_CACHE);
    ck_assert_error_mentions("not a directory");
    char foreign[160];
    if (geteuid() == 0) {
        snprintf(foreign, sizeof foreign, "%s/foreign", tmpdir);
        ck_assert_int_eq(mkdir(foreign, 0700), 0);
        ck_assert_int_eq(chown(foreign, 65534, 65534), 0);
    } else {
        snprintf(foreign, sizeof foreign, "/"); /* root's */
    }
    ck_assert_ok(cuabi_cache_set_directory(foreign));
    ck_assert_status(cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_CACHE);
    ck_assert_error_mentions("belongs to uid");
    /* the other public calls say the same, and a compile still works from memory */
    cuabi_cache_stats st = CUABI_CACHE_STATS_INIT;
    ck_assert_status(cuabi_cache_get_stats(&st), CUABI_ERROR_CACHE);
    ck_assert_status(cuabi_cache_verify(NULL, NULL, NULL), CUABI_ERROR_CACHE);
    ck_assert_status(cuabi_cache_clear(CUABI_CACHE_CLEAR_DISK), CUABI_ERROR_CACHE);
    cuabi_program *p;
    cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
    po.arch = "sm_90";
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, "__global__ void q() {}", 0,
                                      NULL));
    ck_assert_ok(cuabi_program_compile(NULL, p, &po));
    const char *log;
    ck_assert_ok(cuabi_program_log(&log, p));
    ck_assert_msg(strstr(log, "cuabi cache: not used:") && strstr(log, "belongs to uid"), "%s",
                  log);
    ck_assert_ok(cuabi_program_release(p));
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}
END_TEST

/* A full disk: every store fails, and warm says so for each compile. */
START_TEST(warm_on_a_full_disk)
{
    write_project();
    put("ok.toml", "archs = [\"sm_90\"]\n[[source]]\ncode = \"__global__ void f() {}\"\n");
    ck_assert_int_eq(mkdir(cachedir, 0700), 0);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) { /* plain C only: see test_cache.c's child_compile */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { 100, 100 }; /* writes fail as on a full disk */
        setrlimit(RLIMIT_FSIZE, &rl);
        cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
        cuabi_status st = cuabi_cache_warm_manifest(&s, at("ok.toml"), NULL, NULL, NULL);
        int ok = st == CUABI_ERROR_CACHE && s.failed == 1 && s.compiled == 0 &&
                 strstr(cuabi_last_error()->message, "not stored");
        if (!ok)
            dprintf(2, "status %d, failed %zu: %s\n", st, s.failed, cuabi_last_error()->message);
        _exit(ok ? 0 : 1);
    }
    ck_assert_int_ge(kid, 0);
    int status;
    ck_assert_int_eq(waitpid(kid, &status, 0), kid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* ----------------------------------------------------- verify, temp files */

typedef struct removed {
    int n;
    char problems[8][128];
    int stop_after;
} removed;

static int on_removed(const char *path, const char *problem, void *payload)
{
    removed *r = payload;
    ck_assert_ptr_nonnull(path);
    if (r->n < 8)
        snprintf(r->problems[r->n], 128, "%s", problem);
    r->n++;
    return r->stop_after && r->n >= r->stop_after;
}

static int compile_variant(int i)
{
    char src[128];
    snprintf(src, sizeof src, "__global__ void v%d(int *x) { x[0] = %d; }\n", i, i);
    cuabi_program *p;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, NULL));
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_ok(cuabi_program_release(p));
    return hit;
}

/* The entry files, in name order (caller frees each). */
static int entries(char **out, int max)
{
    int n = 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls %s/*.bin 2>/dev/null | sort", cachedir);
    FILE *ls = popen(cmd, "r");
    char line[512];
    while (n < max && fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = '\0';
        out[n++] = strdup(line);
    }
    pclose(ls);
    return n;
}

START_TEST(verify_removes_damaged_entries)
{
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(compile_variant(i), 0);
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    ck_assert_ok(cuabi_cache_verify(&r, NULL, NULL));
    ck_assert_uint_eq(r.checked, 5);
    ck_assert_uint_eq(r.removed, 0);
    char *e[8];
    ck_assert_int_eq(entries(e, 8), 5);
    /* a flipped byte, a truncation, a foreign format, junk under an entry's name */
    FILE *f = fopen(e[0], "r+b");
    fseek(f, 100, SEEK_SET);
    fputc('!', f);
    fclose(f);
    ck_assert_int_eq(truncate(e[1], 30), 0);
    f = fopen(e[2], "r+b");
    fseek(f, 8, SEEK_SET);
    uint32_t other = 99;
    fwrite(&other, 4, 1, f);
    fclose(f);
    f = fopen(e[3], "wb");
    for (int i = 0; i < 10; i++)
        fputs("not an entry", f);
    fclose(f);
    /* a damaged identity record (NVRTC wrote one: it is loaded here) */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "for r in %s/id-*; do printf x >> \"$r\"; done", cachedir);
    ck_assert_int_eq(system(cmd), 0);
    removed rm = { 0 };
    ck_assert_ok(cuabi_cache_verify(&r, on_removed, &rm));
    ck_assert_uint_eq(r.checked, 4);
    ck_assert_uint_eq(r.kept, 1);
    ck_assert_uint_ge(r.removed, 4); /* three entries and at least one record */
    ck_assert_uint_gt(r.bytes_removed, 0);
    ck_assert_int_eq(rm.n, (int)r.removed);
    ck_assert_str_eq(rm.problems[0], "checksum mismatch");
    ck_assert_msg(strstr(rm.problems[1], "truncated") != NULL, "%s", rm.problems[1]);
    ck_assert_str_eq(rm.problems[2], "not a cuabi cache entry");
    ck_assert_int_ne(access(e[0], F_OK), 0);
    ck_assert_int_eq(access(e[2], F_OK), 0); /* another format: kept */
    ck_assert_int_eq(access(e[4], F_OK), 0);
    for (int i = 0; i < 5; i++)
        free(e[i]);
    ck_assert_ok(cuabi_cache_verify(&r, NULL, NULL));
    ck_assert_uint_eq(r.removed, 0);
    /* the callback stops it; NULL report; bad version */
    for (int i = 5; i < 8; i++)
        compile_variant(i);
    ck_assert_int_eq(entries(e, 8), 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(truncate(e[i], 10), 0);
        free(e[i]);
    }
    rm = (removed){ .stop_after = 1 };
    ck_assert_ok(cuabi_cache_verify(NULL, on_removed, &rm));
    ck_assert_int_eq(rm.n, 1);
    r.version = 0;
    ck_assert_status(cuabi_cache_verify(&r, NULL, NULL), CUABI_ERROR_INVALID_VERSION);
    /* no directory at all: nothing to verify */
    ck_assert_ok(cuabi_cache_set_directory(at("never-made")));
    r = (cuabi_cache_verify_report)CUABI_CACHE_VERIFY_REPORT_INIT;
    ck_assert_ok(cuabi_cache_verify(&r, NULL, NULL));
    ck_assert_uint_eq(r.checked, 0);
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}
END_TEST

/* A writer that died half-way leaves a temp file: it is never read as an
 * entry, the key is compiled and stored again, and the leftover is removed
 * once old. A whole file under the entry's name that is cut short is caught
 * by its checksum (test_cache.c corrupt_entries_are_rebuilt). */
START_TEST(half_written_entries_are_never_read)
{
    ck_assert_int_eq(compile_variant(1), 0);
    char *e[2];
    ck_assert_int_eq(entries(e, 2), 1);
    /* make the entry a half-written temp file of the same key */
    const char *name = strrchr(e[0], '/') + 1;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/tmp-%.32s-AbCdEf", cachedir, name);
    ck_assert_int_eq(rename(e[0], tmp), 0);
    ck_assert_int_eq(truncate(tmp, 70), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_variant(1), 0); /* a miss, not the half file */
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert_int_eq(compile_variant(1), 2);
    ck_assert_int_eq(access(tmp, F_OK), 0);
    struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } };
    ck_assert_int_eq(utimensat(AT_FDCWD, tmp, old, 0), 0);
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    ck_assert_ok(cuabi_cache_verify(&r, NULL, NULL)); /* the scan clears old leftovers */
    ck_assert_int_ne(access(tmp, F_OK), 0);
    ck_assert_uint_eq(r.checked, 1);
    free(e[0]);
}
END_TEST

/* cuabi_cache_precompile runs on the same pool now: several compiles at
 * once, reported in order on this thread. */
static pthread_t caller_thread;

static int check_thread(size_t done, size_t total, const char *name, const char *arch,
                        cuabi_status status, int hit, void *payload)
{
    (void)name;
    (void)arch;
    (void)hit;
    ck_assert(pthread_equal(pthread_self(), caller_thread));
    ck_assert_int_eq(status, CUABI_SUCCESS);
    size_t *last = payload;
    ck_assert_uint_eq(done, *last + 1);
    ck_assert_uint_le(done, total);
    *last = done;
    return 0;
}

START_TEST(precompile_in_parallel_reports_in_order)
{
    cuabi_precompile_item items[6];
    char src[6][96];
    for (int i = 0; i < 6; i++) {
        items[i] = (cuabi_precompile_item)CUABI_PRECOMPILE_ITEM_INIT;
        snprintf(src[i], sizeof src[i], "__global__ void p%d(int *x) { x[0] = %d; }\n", i, i);
        items[i].source = src[i];
    }
    const char *archs[] = { "sm_80", "sm_90" };
    size_t last = 0;
    caller_thread = pthread_self();
    ck_assert_ok(cuabi_cache_precompile(items, 6, archs, 2, check_thread, &last));
    ck_assert_uint_eq(last, 12);
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    ck_assert_ok(cuabi_cache_get_stats(&s));
    ck_assert_uint_eq(s.entries, 12);
    /* an unusable directory fails up front, before compiling */
    ck_assert_ok(cuabi_cache_set_directory("/proc/self/nope"));
    ck_assert_status(cuabi_cache_precompile(items, 1, archs, 1, NULL, NULL), CUABI_ERROR_CACHE);
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}
END_TEST

/* A caller built against version 1 of cuabi_program_options passes a
 * struct that ends before `libdevice`: precompile copies only that much
 * (regression: it copied the whole current struct; the ASan run sees the
 * heap read past the caller's block). */
START_TEST(precompile_copies_options_by_their_version)
{
    size_t v1_size = offsetof(cuabi_program_options, libdevice);
    cuabi_program_options *v1 = malloc(v1_size);
    ck_assert_ptr_nonnull(v1);
    /* only version 1's fields are written */
    ck_assert_ok(cuabi_program_options_init(v1, 1));
    cuabi_precompile_item item = CUABI_PRECOMPILE_ITEM_INIT;
    item.source = "__global__ void v1(int *x) { x[0] = 1; }\n";
    item.options = v1;
    const char *archs[] = { "sm_90" };
    ck_assert_ok(cuabi_cache_precompile(&item, 1, archs, 1, NULL, NULL));
    free(v1);
}
END_TEST

/* Fatbin output (issue 16): the architectures make one fatbin, one job. */
static int fatbin_progress(size_t done, size_t total, const char *name, const char *arch,
                           cuabi_status status, int hit, void *payload)
{
    (void)name;
    (void)hit;
    (void)done;
    ck_assert_uint_eq(total, 1);
    ck_assert_str_eq(arch, "sm_80,sm_90");
    ck_assert_int_eq(status, CUABI_SUCCESS);
    ++*(int *)payload;
    return 0;
}

START_TEST(precompile_a_fatbin)
{
    cuabi_precompile_item item = CUABI_PRECOMPILE_ITEM_INIT;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.output = CUABI_CODE_FATBIN;
    item.source = "__global__ void f(int *x) { x[0] = 80; }\n";
    item.options = &o;
    const char *archs[] = { "sm_80", "sm_90" };
    int calls = 0;
    ck_assert_ok(cuabi_cache_precompile(&item, 1, archs, 2, fatbin_progress, &calls));
    ck_assert_int_eq(calls, 1);
    /* The same compile afterwards is a hit. */
    cuabi_program *p;
    cuabi_objcode *obj;
    int hit;
    o.arch = "sm_80,sm_90";
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, item.source, 0, NULL));
    ck_assert_ok(cuabi_program_compile(&obj, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_ne(hit, 0);
    cuabi_objcode_release(obj);
    cuabi_program_release(p);
}
END_TEST

/* Every allocation of a warm, failed in turn: a clear status, never a
 * crash or a leak (the ASan and valgrind runs check the leaks). */
START_TEST(warm_when_memory_runs_out)
{
    put("k.cu", "__global__ void k() {}\n");
    put("m.toml", "archs = [\"sm_90\"]\n[[source]]\nfile = \"k.cu\"\n[[source]]\n"
                  "file = \"gone.cu\"\n");
    ck_assert_status(cuabi_cache_warm_manifest(NULL, at("m.toml"), NULL, NULL, NULL),
                     CUABI_ERROR_IO); /* compiled once: the rest are hits */
    long n;
    for (n = 1; n < 400; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
        cuabi_status st = cuabi_cache_warm_manifest(&s, at("m.toml"), NULL, NULL, NULL);
        long fired = cuabi__alloc_fail_count();
        cuabi__alloc_fail_at(0, false);
        if (!fired) {
            ck_assert_int_eq(st, CUABI_ERROR_IO); /* the missing file, as without faults */
            break;
        }
        ck_assert_msg(st != CUABI_SUCCESS, "allocation %ld failed, yet success", n);
    }
    ck_assert_int_lt(n, 400);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("precompile");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, manifest_settings);
    tcase_add_test(tc, manifest_problems_with_their_lines);
    tcase_add_test(tc, manifest_names_and_bom);
    tcase_add_test(tc, manifest_fifos);
    tcase_add_test(tc, manifests_stay_in_their_tree);
    tcase_add_test(tc, warm_stays_in_the_tree);
    tcase_add_test(tc, warm_a_project);
    tcase_add_test(tc, warm_bad_input);
    tcase_add_test(tc, warm_nvvm_ir);
    tcase_add_test(tc, warm_on_a_full_disk);
    tcase_add_test(tc, verify_removes_damaged_entries);
    tcase_add_test(tc, half_written_entries_are_never_read);
    tcase_add_test(tc, precompile_in_parallel_reports_in_order);
    tcase_add_test(tc, precompile_copies_options_by_their_version);
    tcase_add_test(tc, precompile_a_fatbin);
    tcase_add_test(tc, warm_when_memory_runs_out);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
