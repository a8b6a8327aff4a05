/* The cuabi tool's option parser (src/cli/options.c) on a table of its own:
 * every kind of row, "--", glued values, the usage errors and their JSON
 * form, and --help listing every row. The subcommands' own tables are
 * checked through the tool by tests/check_cli_options.sh. */
#include <stdarg.h>

#include "testutil.h"
#include "cli/cli.h"

/* What one parse gave: the targets, the exit status, and what it wrote. */
typedef struct parsed {
    bool json, verbose;
    int mode;
    const char *out, *file;
    long long jobs;
    cli_list defines, inputs, calls;
    int rc;
    char *stdout_text, *stderr_text;
} parsed;

/* A CLI_CALL row: takes "ok...", refuses anything else. */
static int take_ok(const char *value, void *target, char *why, size_t len)
{
    if (strncmp(value, "ok", 2)) {
        snprintf(why, len, "wants ok..., got '%s'", value);
        return -1;
    }
    return cli_list_push(target, value);
}

static const char test_about[] = "A table with a row of each kind.\n";

/* Parse "test ARGS..." (a NULL-terminated list) by the test table. */
static parsed *parse_args(const char *first, ...)
{
    static parsed p;
    static char *argv[32];
    cli_list_free(&p.defines);
    cli_list_free(&p.inputs);
    cli_list_free(&p.calls);
    free(p.stdout_text);
    free(p.stderr_text);
    memset(&p, 0, sizeof p);
    int argc = 0;
    argv[argc++] = "test";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    const cli_option table[] = {
        CLI_ARG("FILE", &p.file, 1, "the input"),
        CLI_ARGS("MORE...", &p.inputs, 0, "more inputs"),
        CLI_OPT_FLAG("json", 0, &p.json, "JSON out"),
        CLI_OPT_FLAG("verbose", 'v', &p.verbose, "say more"),
        CLI_OPT_CHOICE("fast", &p.mode, 1, "go fast"),
        CLI_OPT_CHOICE("slow", &p.mode, 2, "go slowly"),
        CLI_OPT_STRING(NULL, 'o', "OUT", &p.out, "the output"),
        CLI_OPT_LIST(NULL, 'D', "NAME[=V]", &p.defines, "a macro"),
        CLI_OPT_INT("jobs", 'j', "N", &p.jobs, 1, 64, "at once"),
        CLI_OPT_CALL("check", 0, "OK", take_ok, &p.calls, "a checked value"),
    };
    const cli_spec spec = { "test", test_about, table, sizeof table / sizeof table[0] };
    size_t no, ne;
    FILE *out = open_memstream(&p.stdout_text, &no), *err = open_memstream(&p.stderr_text, &ne);
    ck_assert(out && err);
    p.rc = cli_parse_to(&spec, argc, argv, out, err);
    fclose(out);
    fclose(err);
    return &p;
}

/* The usage error: exit 2, and stderr names it. */
static void refused(const parsed *p, const char *message)
{
    ck_assert_int_eq(p->rc, 2);
    ck_assert_msg(strstr(p->stderr_text, message), "stderr \"%s\" lacks \"%s\"", p->stderr_text,
                  message);
    ck_assert_msg(strstr(p->stderr_text, "usage: cuabi test FILE [MORE...]"), "%s",
                  p->stderr_text);
}

START_TEST(reads_every_kind_of_row)
{
    parsed *p = parse_args("in", "--json", "-v", "--slow", "-o", "o.bin", "-DA=1", "-D", "B",
                           "--jobs=8", "--check", "ok1", "--check=ok2", "x", "y", NULL);
    ck_assert_int_eq(p->rc, CLI_GO_ON);
    ck_assert(p->json && p->verbose);
    ck_assert_int_eq(p->mode, 2);
    ck_assert_str_eq(p->out, "o.bin");
    ck_assert_str_eq(p->file, "in");
    ck_assert_int_eq(p->jobs, 8);
    ck_assert_uint_eq(p->defines.n, 2);
    ck_assert_str_eq(p->defines.v[0], "A=1");
    ck_assert_str_eq(p->defines.v[1], "B");
    ck_assert_uint_eq(p->calls.n, 2);
    ck_assert_str_eq(p->calls.v[1], "ok2");
    ck_assert_uint_eq(p->inputs.n, 2);
    ck_assert_str_eq(p->inputs.v[1], "y");
    ck_assert_str_eq(p->stdout_text, "");
    ck_assert_str_eq(p->stderr_text, "");

    /* glued short values, hex numbers, flags and alternatives repeated */
    p = parse_args("-j0x10", "-ofile", "in", "-v", "-v", "--fast", "--fast", NULL);
    ck_assert_int_eq(p->rc, CLI_GO_ON);
    ck_assert_int_eq(p->jobs, 16);
    ck_assert_str_eq(p->out, "file");
    ck_assert_int_eq(p->mode, 1);

    /* "--" ends the options; "-" alone is an argument; a glued value may
     * start with '-' */
    p = parse_args("-", "--", "--json", "-v", "-o=-x", NULL);
    ck_assert_int_eq(p->rc, CLI_GO_ON);
    ck_assert_str_eq(p->file, "-");
    ck_assert(!p->json && !p->verbose);
    ck_assert_uint_eq(p->inputs.n, 3);
    ck_assert_str_eq(p->inputs.v[0], "--json");
    p = parse_args("in", "-o-x", "--check=ok-", NULL);
    ck_assert_int_eq(p->rc, CLI_GO_ON);
    ck_assert_str_eq(p->out, "-x");
}
END_TEST

START_TEST(refuses_with_a_clear_message)
{
    refused(parse_args("in", "--bogus", NULL), "cuabi test: unknown option '--bogus'");
    refused(parse_args("in", "--bogus=1", NULL), "unknown option '--bogus'");
    refused(parse_args("in", "-q", NULL), "unknown option '-q'");
    refused(parse_args("in", "-vx", NULL), "unknown option '-vx'");
    refused(parse_args("in", "-o", NULL), "missing argument to -o (OUT)");
    refused(parse_args("in", "--jobs", NULL), "missing argument to --jobs (N)");
    refused(parse_args("in", "-o", "--json", NULL), "missing argument to -o (OUT)");
    refused(parse_args("in", "--json=1", NULL), "--json takes no value (got '--json=1')");
    refused(parse_args("in", "--jobs", "x", NULL), "--jobs wants an integer in 1..64, got 'x'");
    refused(parse_args("in", "-j", "0", NULL), "-j wants an integer in 1..64, got '0'");
    refused(parse_args("in", "-j", "-3", NULL), "-j wants an integer in 1..64, got '-3'");
    refused(parse_args("in", "-j", "65", NULL), "got '65'");
    refused(parse_args("in", "-j", " 5", NULL), "got ' 5'");
    refused(parse_args("in", "-j", "5 ", NULL), "got '5 '");
    refused(parse_args("in", "-j", "", NULL), "got ''");
    refused(parse_args("in", "-j", "99999999999999999999", NULL), "got '99999999999999999999'");
    refused(parse_args("in", "-o", "a", "-o", "b", NULL), "-o given twice ('a', then 'b')");
    refused(parse_args("in", "-j", "2", "--jobs", "2", NULL), "--jobs given twice");
    refused(parse_args("in", "--fast", "--slow", NULL), "--fast and --slow cannot go together");
    refused(parse_args("in", "--check", "no", NULL), "--check wants ok..., got 'no'");
    refused(parse_args(NULL), "missing FILE");
    refused(parse_args("-v", NULL), "missing FILE");
}
END_TEST

START_TEST(json_usage_errors_are_json)
{
    parsed *p = parse_args("in", "--json", "--bogus", NULL);
    ck_assert_int_eq(p->rc, 2);
    ck_assert_str_eq(p->stdout_text, "{\"error\":\"unknown option '--bogus'\","
                                     "\"status\":\"CUABI_ERROR_INVALID_ARGUMENT\"}\n");
    /* no --json: nothing on stdout */
    p = parse_args("in", "--bogus", NULL);
    ck_assert_str_eq(p->stdout_text, "");
    /* after "--", --json is an argument, not a request for JSON */
    p = parse_args("in", "-j", "0", "--", "--json", NULL);
    ck_assert_int_eq(p->rc, 2);
    ck_assert_str_eq(p->stdout_text, "");
}
END_TEST

START_TEST(help_lists_every_row)
{
    parsed *p = parse_args("--bogus", "--help", NULL);   /* help wins */
    ck_assert_int_eq(p->rc, 0);
    ck_assert_str_eq(p->stderr_text, "");
    const char *h = p->stdout_text;
    static const char *const want[] = {
        "usage: cuabi test FILE [MORE...] [--json] [--verbose]", "[--fast | --slow]",
        "[-o OUT]", "[-D NAME[=V]]...", "[--jobs N]", "[--check OK]...",
        "\n\nA table with a row of each kind.\n",
        "\narguments:\n  FILE                the input\n  MORE...             more inputs\n",
        "\noptions:\n  --json              JSON out\n",
        "  -v, --verbose       say more\n", "  --fast              go fast\n",
        "  --slow              go slowly\n", "  -o OUT              the output\n",
        "  -D NAME[=V]         a macro\n", "  -j, --jobs N        at once\n",
        "  --check OK          a checked value\n", "  -h, --help          show this help\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(h, want[i]), "help lacks \"%s\":\n%s", want[i], h);
    p = parse_args("-h", NULL);
    ck_assert_int_eq(p->rc, 0);
    ck_assert_ptr_nonnull(strstr(p->stdout_text, "usage: cuabi test"));
}
END_TEST

START_TEST(json_writer_escapes)
{
    char *text;
    size_t size;
    FILE *f = open_memstream(&text, &size);
    /* control characters, quotes, valid UTF-8 kept, bad bytes replaced one
     * by one: a lone continuation byte, a truncated sequence, an overlong
     * '/', a surrogate, past U+10FFFF, 0xff */
    json_write_string(f, "a\"b\\c\n\t\r\b\f\x01\x1f\x7f é€😀 \x80 \xe2\x82 \xc0\xaf "
                         "\xed\xa0\x80 \xf4\x90\x80\x80 \xff");
    fclose(f);
    ck_assert_str_eq(text, "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\x7f é€😀 \\ufffd "
                           "\\ufffd\\ufffd \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd "
                           "\\ufffd\\ufffd\\ufffd\\ufffd \\ufffd\"");
    free(text);
}
END_TEST

START_TEST(json_failure_replaces_a_list)
{
    char *text;
    size_t size;
    FILE *f = open_memstream(&text, &size);
    cli_json j;
    ck_assert(json_start_to(&j, f));
    json_begin_array(&j, NULL);
    json_int(&j, NULL, 1);
    ck_assert_int_eq(json_fail(&j, CUABI_ERROR_CACHE, "no", 1), 1);
    json_int(&j, NULL, 2);               /* written already: ignored */
    ck_assert_int_eq(json_finish(&j, 0), 0);
    /* an object under way gets the members, its open children closed */
    ck_assert(json_start_to(&j, f));
    json_begin_object(&j, NULL);
    json_begin_array(&j, "xs");
    json_begin_object(&j, NULL);
    json_fail(&j, CUABI_ERROR_IO, "bad\xff", 1);
    fclose(f);
    ck_assert_str_eq(text, "{\"error\":\"no\",\"status\":\"CUABI_ERROR_CACHE\"}\n"
                           "{\"xs\":[{}],\"error\":\"bad\\ufffd\",\"status\":\"CUABI_ERROR_IO\"}\n");
    free(text);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("cli_options");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, reads_every_kind_of_row);
    tcase_add_test(tc, refuses_with_a_clear_message);
    tcase_add_test(tc, json_usage_errors_are_json);
    tcase_add_test(tc, help_lists_every_row);
    tcase_add_test(tc, json_writer_escapes);
    tcase_add_test(tc, json_failure_replaces_a_list);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
