/* The TOML subset reader behind precompile manifests (src/util/toml.c): what it
 * reads, what it refuses (with the line), that it goes on after an error
 * (marking the table damaged), and a leading BOM. Malformed input at large
 * is fuzz/fuzz_toml.c's job. */
#include "testutil.h"
#include "util/toml.h"

static cuabi__toml_doc parse(const char *text)
{
    cuabi__toml_doc d;
    ck_assert_int_eq(cuabi__toml_parse(&d, text, strlen(text)), 0);
    return d;
}

static const cuabi__toml_value *get(const cuabi__toml_value *t, const char *k)
{
    const cuabi__toml_value *v = cuabi__toml_get(t, k);
    ck_assert_msg(v != NULL, "no key %s", k);
    return v;
}

static const char *str(const cuabi__toml_value *t, const char *k)
{
    const cuabi__toml_value *v = get(t, k);
    ck_assert_int_eq(v->kind, CUABI__TOML_STRING);
    return v->str;
}

/* The document has exactly one error, on `line`, mentioning `needle`. */
static void one_error(const char *text, int line, const char *needle)
{
    cuabi__toml_doc d = parse(text);
    ck_assert_msg(d.num_errors >= 1, "no error for:\n%s", text);
    ck_assert_msg(d.errors[0].line == line && strstr(d.errors[0].message, needle),
                  "for:\n%s\ngot line %d: %s (wanted line %d: ...%s...)", text,
                  d.errors[0].line, d.errors[0].message, line, needle);
    cuabi__toml_free(&d);
}

START_TEST(reads_the_subset)
{
    cuabi__toml_doc d = parse(
        "# a manifest\n"
        "archs = [\"sm_80\", 'sm_90',]   # trailing comma\n"
        "jobs = 4\n"
        "neg = -17\n"
        "big = 9_223_372_036_854_775_807\n"
        "small = -9223372036854775808\n"
        "hex = 0xdead_BEEF\n"
        "oct = 0o755\n"
        "bin = 0b1010\n"
        "yes = true\n"
        "no = false\n"
        "\"quoted key\" = \"tab\\there \\\"q\\\" \\\\ \\u00e9 \\U0001F600\"\n"
        "'literal key' = 'C:\\no\\escapes'\n"
        "multi = \"\"\"\n"
        "line one\n"
        "line two \\\n"
        "    continued\"\"\"\n"
        "raw = '''\n"
        "keep \\n as is\n"
        "'''\n"
        "quotes = \"\"\"a \"\"quoted\"\" b\"\"\"\"\n"
        "nested = [[1, 2], [\"x\"], []]\n"
        "spread = [\n"
        "  \"a\",  # comment\n"
        "\n"
        "  \"b\"\n"
        "]\n"
        "dotted.key = 3\n"
        "[defaults]\n"
        "std = \"c++17\"\n"
        "[a.b]\n"
        "c = 1\n"
        "[a]\n"
        "d = 2\n"
        "[[source]]\n"
        "file = \"one.cu\"\n"
        "[[source.header]]\n"
        "name = \"h1.h\"\n"
        "[[source.header]]\n"
        "name = \"h2.h\"\n"
        "[[source]]\n"
        "file = \"two.cu\"\n");
    ck_assert_msg(d.num_errors == 0, "line %d: %s", d.errors[0].line, d.errors[0].message);
    const cuabi__toml_value *r = d.root;
    const cuabi__toml_value *archs = get(r, "archs");
    ck_assert_int_eq(archs->kind, CUABI__TOML_ARRAY);
    ck_assert_uint_eq(archs->count, 2);
    ck_assert_str_eq(archs->items[1]->str, "sm_90");
    ck_assert_int_eq(archs->line, 2);
    ck_assert_int_eq(get(r, "jobs")->integer, 4);
    ck_assert_int_eq(get(r, "neg")->integer, -17);
    ck_assert_int_eq(get(r, "big")->integer, INT64_MAX);
    ck_assert_int_eq(get(r, "small")->integer, INT64_MIN);
    ck_assert_int_eq(get(r, "hex")->integer, 0xdeadbeef);
    ck_assert_int_eq(get(r, "oct")->integer, 0755);
    ck_assert_int_eq(get(r, "bin")->integer, 10);
    ck_assert(get(r, "yes")->boolean);
    ck_assert(!get(r, "no")->boolean);
    ck_assert_str_eq(str(r, "quoted key"), "tab\there \"q\" \\ \xc3\xa9 \xf0\x9f\x98\x80");
    ck_assert_str_eq(str(r, "literal key"), "C:\\no\\escapes");
    ck_assert_str_eq(str(r, "multi"), "line one\nline two continued");
    ck_assert_str_eq(str(r, "raw"), "keep \\n as is\n");
    ck_assert_str_eq(str(r, "quotes"), "a \"\"quoted\"\" b\"");
    const cuabi__toml_value *nested = get(r, "nested");
    ck_assert_uint_eq(nested->count, 3);
    ck_assert_int_eq(nested->items[0]->items[1]->integer, 2);
    ck_assert_uint_eq(nested->items[2]->count, 0);
    ck_assert_uint_eq(get(r, "spread")->count, 2);
    ck_assert_int_eq(get(get(r, "dotted"), "key")->integer, 3);
    ck_assert_str_eq(str(get(r, "defaults"), "std"), "c++17");
    const cuabi__toml_value *a = get(r, "a");
    ck_assert_int_eq(get(get(a, "b"), "c")->integer, 1);
    ck_assert_int_eq(get(a, "d")->integer, 2);
    const cuabi__toml_value *src = get(r, "source");
    ck_assert(src->of_tables);
    ck_assert_uint_eq(src->count, 2);
    ck_assert_str_eq(str(src->items[0], "file"), "one.cu");
    ck_assert_int_eq(src->items[0]->line, 35);
    const cuabi__toml_value *hdr = get(src->items[0], "header");
    ck_assert_uint_eq(hdr->count, 2);
    ck_assert_str_eq(str(hdr->items[1], "name"), "h2.h");
    ck_assert_str_eq(str(src->items[1], "file"), "two.cu");
    ck_assert_ptr_null(cuabi__toml_get(src->items[1], "header"));
    ck_assert_ptr_null(cuabi__toml_get(r, "nothing"));
    ck_assert_ptr_null(cuabi__toml_get(archs, "x")); /* not a table */
    cuabi__toml_free(&d);

    /* CRLF line ends, an empty document, a file without a final newline */
    d = parse("a = 1\r\nb = \"x\"\r\n[t]\r\nc = true");
    ck_assert_uint_eq(d.num_errors, 0);
    ck_assert(get(get(d.root, "t"), "c")->boolean);
    cuabi__toml_free(&d);
    d = parse("");
    ck_assert_uint_eq(d.num_errors, 0);
    ck_assert_uint_eq(d.root->count, 0);
    cuabi__toml_free(&d);
}
END_TEST

START_TEST(refuses_with_the_line)
{
    one_error("a = 1\nb = 2.5\n", 2, "floats and dates are not supported");
    one_error("a = 1e3\n", 1, "floats");
    one_error("when = 1979-05-27\n", 1, "dates");
    one_error("a = inf\n", 1, "floats");
    one_error("\n\nt = { x = 1 }\n", 3, "inline tables");
    one_error("a = 1\na = 2\n", 2, "given twice (first on line 1)");
    one_error("[t]\nx = 1\n[t]\n", 3, "[t] is defined already");
    one_error("[[t]]\n[t]\n", 2, "defined already (an array of tables");
    one_error("t = 1\n[[t]]\n", 2, "not an array of tables");
    one_error("t = 1\n[t.u]\n", 2, "\"t\" is already an integer");
    one_error("a.b = 1\n[a]\n", 2, "defined already");
    one_error("a = \"open\n", 1, "unterminated string");
    one_error("a = \"\"\"\nnever\nclosed\n", 1, "unterminated multi-line");
    one_error("a = \"\\q\"\n", 1, "unknown escape \\q");
    one_error("a = \"\\u12\"\n", 1, "needs 4 hexadecimal digits");
    one_error("a = \"\\uD800\"\n", 1, "not a Unicode scalar value");
    one_error("a = \"\\u0000\"\n", 1, "a NUL cannot appear");
    one_error("a = \"x\x01y\"\n", 1, "control character 0x01");
    one_error("a = 007\n", 1, "leading zeros");
    one_error("a = 1__0\n", 1, "between two digits");
    one_error("a = 9223372036854775808\n", 1, "out of range");
    one_error("a = +0x10\n", 1, "a sign before");
    one_error("a = 12abc\n", 1, "is not a number");
    one_error("a = [1, 2\nb = 3\n", 2, "expected ',' or ']'");
    one_error("a = [1 2]\n", 1, "expected ',' or ']'");
    one_error("a =\n", 1, "expected a value, found the end of the line");
    one_error("a = nope\n", 1, "is not a number");
    one_error("a = @\n", 1, "expected a value");
    one_error("a 1\n", 1, "expected '=' after the key \"a\"");
    one_error("= 1\n", 1, "expected a key");
    one_error("a = 1 b = 2\n", 1, "unexpected 'b' after the value");
    one_error("[t] x = 1\n", 1, "after the table header");
    one_error("[t\n", 1, "expected ']' after [t");
    one_error("[[t]\n", 1, "expected ']]' after [[t");
    one_error("\"\"\"k\"\"\" = 1\n", 1, "a key cannot be a multi-line string");
    one_error("ok = 1\nbad = \"\xff\"\n", 2, "invalid UTF-8");
    /* deep nesting is refused, not a stack overflow */
    char deep[200] = "a = ";
    for (int i = 0; i < 40; i++)
        strcat(deep, "[");
    one_error(deep, 1, "nested more than");
}
END_TEST

START_TEST(goes_on_after_errors)
{
    cuabi__toml_doc d = parse("a = 1.5\n"          /* 1: float */
                              "b = 2\n"            /* 2: fine */
                              "[bad\n"             /* 3: bad header ... */
                              "dropped = 1\n"      /* 4: ... so this is dropped */
                              "[good]\n"           /* 5 */
                              "c = \"x\" junk\n"   /* 6: junk after the value */
                              "d = 4\n"            /* 7 */
                              "e = [\n"            /* 8: unterminated array */
                              "[[s]]\n"            /* 9 */
                              "f = 6\n");          /* 10 */
    ck_assert_uint_eq(d.num_errors, 4);
    ck_assert_int_eq(d.errors[0].line, 1);
    ck_assert_int_eq(d.errors[1].line, 3);
    ck_assert_int_eq(d.errors[2].line, 6);
    ck_assert_int_eq(d.errors[3].line, 9);
    ck_assert_int_eq(get(d.root, "b")->integer, 2);
    ck_assert_ptr_null(cuabi__toml_get(d.root, "dropped"));
    ck_assert_ptr_null(cuabi__toml_get(d.root, "bad"));
    const cuabi__toml_value *good = get(d.root, "good");
    ck_assert_int_eq(get(good, "d")->integer, 4);
    /* "e = [" reads "[[s]]" as an element and fails at 's'; the next line goes on */
    ck_assert_int_eq(get(good, "f")->integer, 6);
    ck_assert_ptr_null(cuabi__toml_get(good, "e"));
    cuabi__toml_free(&d);

    /* a flood of bad lines stops being recorded, without failing */
    size_t n = 5000 * 4;
    char *flood = malloc(n + 1);
    for (size_t i = 0; i < n; i += 4)
        memcpy(flood + i, "= \n\n", 4);
    flood[n] = '\0';
    d = parse(flood);
    ck_assert_uint_le(d.num_errors, 202);
    ck_assert_ptr_nonnull(strstr(d.errors[d.num_errors - 1].message, "too many errors"));
    cuabi__toml_free(&d);
    free(flood);
}
END_TEST

/* issue 29 item 5: a UTF-8 byte order mark at the start is skipped (TOML
 * allows one; it was an error that hid the first line), and a table with
 * an error on one of its lines is marked damaged, so the manifest does not
 * compile a source whose `name` (or any value) was dropped or mangled. */
START_TEST(byte_order_mark_and_damaged_tables)
{
    cuabi__toml_doc d = parse("\xef\xbb\xbf" "a = 1\n[t]\nb = 'x'\n");
    ck_assert_uint_eq(d.num_errors, 0);
    ck_assert_int_eq(get(d.root, "a")->integer, 1);
    ck_assert_str_eq(str(get(d.root, "t"), "b"), "x");
    ck_assert(!d.root->damaged);
    cuabi__toml_free(&d);
    one_error("a = 1\n\xef\xbb\xbf" "b = 2\n", 2, "expected a key"); /* only at the start */

    d = parse("[[source]]\n"                      /* 1 */
              "name = \"\\u0000x.cu\"\n"          /* 2: refused, line dropped */
              "code = \"k\"\n"
              "[[source]]\n"                      /* 4: fine */
              "code = \"j\"\n"
              "[[source]]\n"                      /* 6 */
              "name = \"bad\xff" "name.cu\"\n"    /* 7: invalid UTF-8 */
              "[u]\n"                             /* 8 */
              "x = 1 # \xfe\n"                    /* 9: in a comment */
              "[v]\n"                             /* 10 */
              "# \xfe\n"                          /* 11: a comment line */
              "[w]\n"                             /* 12: fine */
              "y = \"\"\"\n\xff\n\"\"\"\n"        /* 13-15: inside a multi-line string */
              "[z]\n"
              "k = 1\n");
    ck_assert_uint_eq(d.num_errors, 5);
    ck_assert_int_eq(d.errors[0].line, 7); /* the UTF-8 pass comes first */
    ck_assert_int_eq(d.errors[1].line, 9);
    ck_assert_int_eq(d.errors[2].line, 11);
    ck_assert_int_eq(d.errors[3].line, 14);
    ck_assert_int_eq(d.errors[4].line, 2);
    const cuabi__toml_value *src = get(d.root, "source");
    ck_assert_uint_eq(src->count, 3);
    ck_assert(src->items[0]->damaged);
    ck_assert_ptr_null(cuabi__toml_get(src->items[0], "name"));
    ck_assert(!src->items[1]->damaged);
    ck_assert(src->items[2]->damaged);
    ck_assert(get(d.root, "u")->damaged);
    ck_assert(get(d.root, "v")->damaged);
    ck_assert(get(d.root, "w")->damaged);
    ck_assert(!get(d.root, "z")->damaged);
    ck_assert(!d.root->damaged);
    cuabi__toml_free(&d);

    /* an error at the top level damages the root, not the tables after it */
    d = parse("a = \n[t]\nb = 1\n");
    ck_assert(d.root->damaged);
    ck_assert(!get(d.root, "t")->damaged);
    cuabi__toml_free(&d);
    /* cuabi__utf8_valid */
    ck_assert(cuabi__utf8_valid("", 0));
    ck_assert(cuabi__utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10));
    ck_assert(!cuabi__utf8_valid("\xc0\x80", 2));           /* overlong */
    ck_assert(!cuabi__utf8_valid("\xed\xa0\x80", 3));       /* a surrogate */
    ck_assert(!cuabi__utf8_valid("\xf4\x90\x80\x80", 4));   /* past U+10FFFF */
    ck_assert(!cuabi__utf8_valid("\xe2\x82", 2));           /* cut short */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("toml");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, reads_the_subset);
    tcase_add_test(tc, refuses_with_the_line);
    tcase_add_test(tc, goes_on_after_errors);
    tcase_add_test(tc, byte_order_mark_and_damaged_tables);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
