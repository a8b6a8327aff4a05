/* The cuabi tool's option parser: each subcommand's command line is a table
 * of cli_option rows (cli.h), and parsing, --help, the usage line and every
 * usage error come from it, so they cannot disagree. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Tables are a dozen rows; the parser counts each row's uses in a fixed
 * array. */
enum { MAX_ROWS = 48, WIDTH = 80, HELP_COLUMN = 22 };

typedef struct parse_state {
    const cli_spec *spec;
    unsigned char seen[MAX_ROWS];
    const char *first_value[MAX_ROWS]; /* CLI_STRING / CLI_INT: for "given twice" */
    size_t next_arg;                   /* the positional row to fill next */
    char why[1024];                    /* the usage error, once there is one */
    int rc;                            /* its exit status: 2, or 1 out of memory */
} parse_state;

static bool is_positional(const cli_option *o)
{
    return !o->name && !o->short_name;
}

static bool takes_value(const cli_option *o)
{
    return o->metavar && !is_positional(o);
}

/* Repeatable rows: shown "[...]..." and never "given twice". */
static bool repeatable(const cli_option *o)
{
    return o->kind == CLI_LIST || o->kind == CLI_CALL;
}

static int fail(parse_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(parse_state *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    if (!s->rc)
        s->rc = 2;
    return -1;
}

int cli_list_push(cli_list *l, const char *s)
{
    const char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return -1;
    v[l->n++] = s;
    l->v = v;
    return 0;
}

void cli_list_free(cli_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

bool cli_has_arg(int argc, char **argv, const char *word)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], word))
            return true;
    return false;
}

/* ---- Looking options up ---- */

static const cli_option *find_long(const cli_spec *spec, const char *name, size_t len)
{
    for (size_t i = 0; i < spec->count; i++) {
        const char *n = spec->options[i].name;
        if (n && strlen(n) == len && !strncmp(n, name, len))
            return &spec->options[i];
    }
    return NULL;
}

static const cli_option *find_short(const cli_spec *spec, char c)
{
    for (size_t i = 0; i < spec->count; i++)
        if (spec->options[i].short_name == c)
            return &spec->options[i];
    return NULL;
}

static const cli_option *next_positional(parse_state *s)
{
    for (; s->next_arg < s->spec->count; s->next_arg++)
        if (is_positional(&s->spec->options[s->next_arg]))
            return &s->spec->options[s->next_arg];
    return NULL;
}

/* ---- Storing values ---- */

/* Decimal, or hexadecimal after 0x; the whole string, no blanks. */
static bool parse_integer(const char *text, long long *out)
{
    if (!*text || isspace((unsigned char)*text))
        return false;
    bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, hex ? 16 : 10);
    if (errno || end == text || *end)
        return false;
    *out = v;
    return true;
}

static int store_int(parse_state *s, const cli_option *o, const char *shown, const char *value)
{
    long long v;
    if (!parse_integer(value, &v) || v < o->min || v > o->max)
        return fail(s, "%s wants an integer in %lld..%lld, got '%s'", shown, o->min, o->max,
                    value);
    *(long long *)o->target = v;
    return 0;
}

/* CLI_CHOICE: alternatives share a target; the first one given holds it. */
static int store_choice(parse_state *s, const cli_option *o, const char *shown)
{
    for (size_t i = 0; i < s->spec->count; i++) {
        const cli_option *other = &s->spec->options[i];
        if (other != o && other->kind == CLI_CHOICE && other->target == o->target &&
            s->seen[i])
            return fail(s, "--%s and %s cannot go together: give one", other->name, shown);
    }
    *(int *)o->target = o->value;
    return 0;
}

static int store_call(parse_state *s, const cli_option *o, const char *shown, const char *value)
{
    char why[512] = "is not valid here";
    if (o->call(value, o->target, why, sizeof why) == 0)
        return 0;
    return fail(s, "%s %s", shown, why);
}

/* Give row o (spelt `shown`) its value; counts the row's uses. */
static int apply(parse_state *s, const cli_option *o, const char *shown, const char *value)
{
    size_t row = (size_t)(o - s->spec->options);
    if (s->seen[row] && (o->kind == CLI_STRING || o->kind == CLI_INT))
        return fail(s, "%s given twice ('%s', then '%s'): it takes one value", shown,
                    s->first_value[row], value);
    if (s->seen[row] < 255)
        s->seen[row]++;
    if (!s->first_value[row])
        s->first_value[row] = value;
    switch (o->kind) {
    case CLI_FLAG: *(bool *)o->target = true; return 0;
    case CLI_CHOICE: return store_choice(s, o, shown);
    case CLI_STRING: *(const char **)o->target = value; return 0;
    case CLI_INT: return store_int(s, o, shown, value);
    case CLI_CALL: return store_call(s, o, shown, value);
    case CLI_LIST: break;
    }
    if (cli_list_push(o->target, value) == 0)
        return 0;
    s->rc = 1;
    return fail(s, "out of memory");
}

/* ---- Reading argv ---- */

static const cli_option *last_positional(const cli_spec *spec)
{
    for (size_t i = spec->count; i-- > 0;)
        if (is_positional(&spec->options[i]))
            return &spec->options[i];
    return NULL;
}

static int positional(parse_state *s, const char *arg)
{
    const cli_option *o = next_positional(s);
    if (o) {
        int rc = apply(s, o, o->metavar, arg);
        if (o->kind != CLI_LIST) /* a list takes the rest */
            s->next_arg++;
        return rc;
    }
    const cli_option *last = last_positional(s->spec);
    if (!last)
        return fail(s, "unexpected argument '%s' (cuabi %s takes options only)", arg,
                    s->spec->command);
    return fail(s, "unexpected argument '%s' (one %s only, and '%s' is given)", arg,
                last->metavar, s->first_value[last - s->spec->options]);
}

/* The word after an option that wants a value: not an option itself
 * (`--kernel --json` is a missing kernel, not a kernel named --json), unless
 * it is a number (`--smem -1` is then out of range). A value that starts
 * with '-' is given glued: --name=-x, -D-x. */
static bool usable_value(const char *next)
{
    long long v;
    return next && (next[0] != '-' || !next[1] || parse_integer(next, &v));
}

/* "--name", "--name=value" or "--name value": returns how many extra argv
 * entries the value used (0 or 1), or -1. */
static int long_option(parse_state *s, const char *arg, const char *next)
{
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_option *o = find_long(s->spec, name, len);
    char shown[128];
    snprintf(shown, sizeof shown, "--%.*s", (int)len, name);
    if (!o)
        return fail(s, "unknown option '%s'", shown);
    if (!takes_value(o))
        return eq ? fail(s, "%s takes no value (got '%s')", shown, arg) : apply(s, o, shown, NULL);
    if (eq)
        return apply(s, o, shown, eq + 1);
    if (!usable_value(next))
        return fail(s, "missing argument to %s (%s)", shown, o->metavar);
    return apply(s, o, shown, next) < 0 ? -1 : 1;
}

/* "-x", "-xVALUE" or "-x VALUE". */
static int short_option(parse_state *s, const char *arg, const char *next)
{
    const cli_option *o = find_short(s->spec, arg[1]);
    char shown[3] = { '-', arg[1], 0 };
    if (!o || (!takes_value(o) && arg[2]))
        return fail(s, "unknown option '%s'", arg);
    if (!takes_value(o))
        return apply(s, o, shown, NULL);
    if (arg[2])
        return apply(s, o, shown, arg + 2);
    if (!usable_value(next))
        return fail(s, "missing argument to %s (%s)", shown, o->metavar);
    return apply(s, o, shown, next) < 0 ? -1 : 1;
}

static int read_argv(parse_state *s, int argc, char **argv)
{
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 0;
        if (!only_args && !strcmp(a, "--"))
            only_args = true;
        else if (only_args || a[0] != '-' || !a[1])
            used = positional(s, a);
        else if (a[1] == '-')
            used = long_option(s, a, next);
        else
            used = short_option(s, a, next);
        if (used < 0)
            return -1;
        i += used;
    }
    for (size_t r = 0; r < s->spec->count; r++) {
        const cli_option *o = &s->spec->options[r];
        if (is_positional(o) && s->seen[r] < o->min)
            return fail(s, "missing %s", o->metavar);
    }
    return 0;
}

static bool has_json_option(const cli_spec *spec)
{
    return find_long(spec, "json", 4) != NULL;
}

static int usage_error(parse_state *s, int argc, char **argv, FILE *out, FILE *err)
{
    fprintf(err, "cuabi %s: %s\n", s->spec->command, s->why);
    cli_print_usage(s->spec, NULL, err);
    fprintf(err, "(cuabi %s --help says more)\n", s->spec->command);
    if (has_json_option(s->spec) && cli_has_arg(argc, argv, "--json")) {
        cli_json j;
        if (json_start_to(&j, out))
            json_fail(&j, s->rc == 1 ? CUABI_ERROR_OUT_OF_MEMORY : CUABI_ERROR_INVALID_ARGUMENT,
                      s->why, s->rc);
    }
    return s->rc;
}

int cli_parse_to(const cli_spec *spec, int argc, char **argv, FILE *out, FILE *err)
{
    parse_state s = { .spec = spec };
    if (spec->count > MAX_ROWS) {
        fprintf(err, "cuabi %s: the option table has %zu rows, more than %d\n", spec->command,
                spec->count, (int)MAX_ROWS);
        return 2;
    }
    /* --help wins wherever it is, as it always has: `cuabi compile --bogus
     * --help` helps instead of complaining. */
    if (cli_has_arg(argc, argv, "--help") || cli_has_arg(argc, argv, "-h")) {
        cli_print_help(spec, out);
        return 0;
    }
    if (read_argv(&s, argc, argv) < 0)
        return usage_error(&s, argc, argv, out, err);
    return CLI_GO_ON;
}

int cli_parse(const cli_spec *spec, int argc, char **argv)
{
    return cli_parse_to(spec, argc, argv, stdout, stderr);
}

/* ---- Help ---- */

/* The usage line's word for one row (or for a group of alternatives,
 * starting at row i; *last: the group's last row). */
static void usage_word(const cli_spec *spec, size_t i, size_t *last, char *buf, size_t len)
{
    const cli_option *o = &spec->options[i];
    *last = i;
    if (is_positional(o)) {
        snprintf(buf, len, o->min ? "%s" : "[%s]", o->metavar);
        return;
    }
    int n = snprintf(buf, len, "[");
    for (size_t k = i; k < spec->count; k++) {
        const cli_option *c = &spec->options[k];
        if (k > i && (o->kind != CLI_CHOICE || c->kind != CLI_CHOICE || c->target != o->target))
            break;
        *last = k;
        n += snprintf(buf + n, len - (size_t)n, "%s%s%s%s%s", k > i ? " | " : "",
                      c->name ? "--" : "-", c->name ? c->name : (char[]){ c->short_name, 0 },
                      takes_value(c) ? " " : "", takes_value(c) ? c->metavar : "");
        if ((size_t)n >= len)
            return;
    }
    snprintf(buf + n, len - (size_t)n, "]%s", repeatable(o) ? "..." : "");
}

void cli_print_usage(const cli_spec *spec, const char *lead, FILE *out)
{
    char head[128], word[512];
    int indent = snprintf(head, sizeof head, "%scuabi %s", lead ? lead : "usage: ",
                          spec->command);
    int col = indent;
    fputs(head, out);
    /* the arguments first, then the options, in table order */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0, last; i < spec->count; i = last + 1) {
            usage_word(spec, i, &last, word, sizeof word);
            if (is_positional(&spec->options[i]) != (pass == 0))
                continue;
            int w = (int)strlen(word);
            if (col + 1 + w >= WIDTH && col > indent) {
                fprintf(out, "\n%*s", indent, "");
                col = indent;
            }
            fprintf(out, " %s", word);
            col += 1 + w;
        }
    }
    fputc('\n', out);
}

/* `text` wrapped to the width, every line but the first indented to
 * `column`, which the cursor is at; a '\n' in it breaks the line there. */
static void print_wrapped(FILE *out, const char *text, int column)
{
    int col = column;
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            fprintf(out, "\n%*s", column, "");
            col = column;
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (col > column && col + 1 + (int)w >= WIDTH) {
            fprintf(out, "\n%*s", column, "");
            col = column;
        } else if (col > column) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, w, out);
        col += (int)w;
        p += w;
        while (*p == ' ')
            p++;
    }
    fputc('\n', out);
}

/* The left column: "-j, --jobs N", "--kernel NAME", "-o OUT", "FILE". */
static void row_label(const cli_option *o, char *buf, size_t len)
{
    if (is_positional(o)) {
        snprintf(buf, len, "%s", o->metavar);
        return;
    }
    int n = 0;
    if (o->short_name)
        n = snprintf(buf, len, "-%c%s", o->short_name, o->name ? ", " : "");
    if (o->name)
        n += snprintf(buf + n, len - (size_t)n, "--%s", o->name);
    if (takes_value(o))
        snprintf(buf + n, len - (size_t)n, " %s", o->metavar);
}

static void print_row(FILE *out, const char *label, const char *help)
{
    int w = (int)strlen(label);
    if (2 + w + 2 > HELP_COLUMN)
        fprintf(out, "  %s\n%*s", label, HELP_COLUMN, "");
    else
        fprintf(out, "  %-*s", HELP_COLUMN - 2, label);
    print_wrapped(out, help ? help : "", HELP_COLUMN);
}

void cli_print_help(const cli_spec *spec, FILE *out)
{
    char label[256];
    cli_print_usage(spec, NULL, out);
    if (spec->about)
        fprintf(out, "\n%s", spec->about);
    for (int pass = 0; pass < 2; pass++) {
        bool first = true;
        for (size_t i = 0; i < spec->count; i++) {
            const cli_option *o = &spec->options[i];
            if (is_positional(o) != (pass == 0))
                continue;
            if (first)
                fprintf(out, "\n%s:\n", pass == 0 ? "arguments" : "options");
            first = false;
            row_label(o, label, sizeof label);
            print_row(out, label, o->help);
        }
        if (pass == 1 && first)
            fprintf(out, "\noptions:\n");
        if (pass == 1)
            print_row(out, "-h, --help", "show this help");
    }
}
