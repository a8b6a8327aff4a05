/* The TOML subset reader: see toml.h. A hand-written recursive-descent
 * parser over the whole text; values form a tree of cuabi__toml_value.
 * Errors are collected with their line; after one, the parser skips to the
 * next line, marks the table that line belongs to damaged, and goes on. */
#include "util/toml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ERRORS 200
#define MAX_DEPTH 32       /* nested arrays */
#define MAX_KEY_PARTS 32

typedef struct parser {
    const char *p, *end;
    int line;
    cuabi__toml_doc *doc;
    cuabi__toml_value *current;   /* receives key = value; NULL: drop them */
    bool oom;
    bool failed;                  /* this line had an error */
    int *bad_lines;               /* lines holding invalid UTF-8, in order */
    size_t nbad, next_bad;
} parser;

/* ------------------------------------------------------------- values */

static void value_free(cuabi__toml_value *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->count; i++) {
        value_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

void cuabi__toml_free(cuabi__toml_doc *doc)
{
    value_free(doc->root);
    free(doc->errors);
    *doc = (cuabi__toml_doc){ 0 };
}

static cuabi__toml_value *new_value(parser *ps, cuabi__toml_kind kind, int line)
{
    cuabi__toml_value *v = calloc(1, sizeof *v);
    if (!v)
        ps->oom = true;
    else {
        v->kind = kind;
        v->line = line;
    }
    return v;
}

/* Append `v` (and, for a table, its key) to a container; takes `v` and
 * `key` either way. */
static bool append(parser *ps, cuabi__toml_value *to, char *key, cuabi__toml_value *v)
{
    if (to->count == to->cap) {
        size_t cap = to->cap ? 2 * to->cap : 4;
        cuabi__toml_value **items = realloc(to->items, cap * sizeof *items);
        if (items)
            to->items = items;
        char **keys = to->kind == CUABI__TOML_TABLE && items
                          ? realloc(to->keys, cap * sizeof *keys) : NULL;
        if (keys)
            to->keys = keys;
        if (!items || (to->kind == CUABI__TOML_TABLE && !keys)) {
            ps->oom = true;
            free(key);
            value_free(v);
            return false;
        }
        to->cap = cap;
    }
    if (to->kind == CUABI__TOML_TABLE)
        to->keys[to->count] = key;
    else
        free(key);
    to->items[to->count++] = v;
    return true;
}

static cuabi__toml_value *table_find(const cuabi__toml_value *t, const char *key)
{
    for (size_t i = 0; i < t->count; i++)
        if (!strcmp(t->keys[i], key))
            return t->items[i];
    return NULL;
}

const cuabi__toml_value *cuabi__toml_get(const cuabi__toml_value *table, const char *key)
{
    return table && table->kind == CUABI__TOML_TABLE ? table_find(table, key) : NULL;
}

const char *cuabi__toml_kind_name(cuabi__toml_kind kind)
{
    switch (kind) {
    case CUABI__TOML_STRING: return "a string";
    case CUABI__TOML_INTEGER: return "an integer";
    case CUABI__TOML_BOOLEAN: return "a boolean";
    case CUABI__TOML_ARRAY: return "an array";
    case CUABI__TOML_TABLE: return "a table";
    }
    return "?";
}

/* ------------------------------------------------------------- errors */

static void error_at(parser *ps, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void error_at(parser *ps, int line, const char *fmt, ...)
{
    ps->failed = true;
    cuabi__toml_doc *d = ps->doc;
    if (d->num_errors > MAX_ERRORS)
        return;
    cuabi__toml_error *e = realloc(d->errors, (d->num_errors + 1) * sizeof *e);
    if (!e) {
        ps->oom = true;
        return;
    }
    d->errors = e;
    e += d->num_errors++;
    e->line = line;
    if (d->num_errors > MAX_ERRORS) {
        snprintf(e->message, sizeof e->message, "too many errors; the rest are not shown");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}
#define error(ps, ...) error_at((ps), (ps)->line, __VA_ARGS__)

/* ------------------------------------------------------------- lexing */

static bool at_newline(const parser *ps)
{
    return ps->p < ps->end &&
           (*ps->p == '\n' || (*ps->p == '\r' && ps->p + 1 < ps->end && ps->p[1] == '\n'));
}

static void take_newline(parser *ps)
{
    ps->p += *ps->p == '\r' ? 2 : 1;
    ps->line++;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t'))
        ps->p++;
}

static void skip_comment(parser *ps)
{
    if (ps->p < ps->end && *ps->p == '#')
        while (ps->p < ps->end && !at_newline(ps))
            ps->p++;
}

/* Skip to the start of the next line (recovery after an error). */
static void skip_line(parser *ps)
{
    while (ps->p < ps->end && !at_newline(ps))
        ps->p++;
    if (ps->p < ps->end)
        take_newline(ps);
}

/* Whitespace, comments and newlines (inside arrays). */
static void skip_blank(parser *ps)
{
    for (;;) {
        skip_ws(ps);
        skip_comment(ps);
        if (!at_newline(ps))
            return;
        take_newline(ps);
    }
}

static const char *shown(const parser *ps)
{
    static _Thread_local char buf[24];
    if (ps->p >= ps->end)
        return "the end of the file";
    unsigned char c = (unsigned char)*ps->p;
    if (c == '\n' || c == '\r')
        snprintf(buf, sizeof buf, "the end of the line");
    else if (c < 0x20 || c == 0x7f)
        snprintf(buf, sizeof buf, "control character 0x%02x", c);
    else
        snprintf(buf, sizeof buf, "'%c'", c);
    return buf;
}

/* A growable string. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static bool sb_add(parser *ps, sbuf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            ps->oom = true;
            return false;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

static bool sb_utf8(parser *ps, sbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80)
        u[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 63)),
        u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 63)),
        u[2] = (char)(0x80 | (cp >> 6 & 63)), u[3] = (char)(0x80 | (cp & 63)), n = 4;
    return sb_add(ps, b, u, n);
}

/* An escape after '\' in a basic string; false after an error. */
static bool escape(parser *ps, sbuf *b)
{
    if (ps->p >= ps->end) {
        error(ps, "unterminated string");
        return false;
    }
    char c = *ps->p++;
    const char *simple = strchr("btnfr\"\\", c);
    if (simple && c) {
        static const char out[] = "\b\t\n\f\r\"\\";
        return sb_add(ps, b, &out[simple - "btnfr\"\\"], 1);
    }
    if (c != 'u' && c != 'U') {
        error(ps, "unknown escape \\%c in a string (TOML knows \\b \\t \\n \\f \\r \\\" \\\\ "
              "\\uXXXX \\UXXXXXXXX)", c >= 0x20 && c < 0x7f ? c : '?');
        return false;
    }
    int digits = c == 'u' ? 4 : 8;
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
        char h = ps->p < ps->end ? *ps->p : '\0';
        int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (v < 0) {
            error(ps, "\\%c needs %d hexadecimal digits", c, digits);
            return false;
        }
        cp = cp * 16 + (uint32_t)v;
        ps->p++;
    }
    if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        error(ps, cp ? "\\%c escape U+%04X is not a Unicode scalar value"
                     : "\\%c escape of U+%04X: a NUL cannot appear in a manifest string",
              c, (unsigned)cp);
        return false;
    }
    return sb_utf8(ps, b, cp);
}

/* A character allowed in a string: not a control character but tab. */
static bool string_char(char c)
{
    unsigned char u = (unsigned char)c;
    return u == '\t' || (u >= 0x20 && u != 0x7f);
}

/* A string; ps->p at its opening quote. */
static char *string(parser *ps, size_t *len)
{
    char q = *ps->p;
    bool multi = ps->end - ps->p >= 3 && ps->p[1] == q && ps->p[2] == q;
    bool basic = q == '"';
    int start = ps->line;
    sbuf b = { 0 };
    ps->p += multi ? 3 : 1;
    if (multi && at_newline(ps))
        take_newline(ps); /* a newline right after the opening quotes is trimmed */
    if (!sb_add(ps, &b, "", 0))
        return NULL;
    for (;;) {
        if (ps->p >= ps->end) {
            error_at(ps, start, "unterminated %s string", multi ? "multi-line" : "");
            break;
        }
        char c = *ps->p;
        if (c == q) {
            if (!multi) {
                ps->p++;
                *len = b.len;
                return b.s;
            }
            size_t n = 0;
            while (ps->p + n < ps->end && ps->p[n] == q)
                n++;
            if (n >= 3) {
                if (n > 5) {
                    error(ps, "too many quotes closing a multi-line string");
                    break;
                }
                if (!sb_add(ps, &b, ps->p, n - 3))
                    break;
                ps->p += n;
                *len = b.len;
                return b.s;
            }
            if (!sb_add(ps, &b, ps->p, n))
                break;
            ps->p += n;
            continue;
        }
        if (at_newline(ps)) {
            if (!multi) {
                error(ps, "unterminated string (a newline inside \"...\": use \"\"\"...\"\"\" "
                      "for several lines)");
                break;
            }
            if (!sb_add(ps, &b, "\n", 1))
                break;
            take_newline(ps);
            continue;
        }
        if (basic && c == '\\') {
            ps->p++;
            const char *save = ps->p;
            skip_ws(ps);
            if (multi && at_newline(ps)) { /* line-ending backslash: trim */
                while (ps->p < ps->end && (at_newline(ps) || *ps->p == ' ' || *ps->p == '\t')) {
                    if (at_newline(ps))
                        take_newline(ps);
                    else
                        ps->p++;
                }
                continue;
            }
            ps->p = save;
            if (!escape(ps, &b))
                break;
            continue;
        }
        if (!string_char(c)) {
            error(ps, "%s inside a string", shown(ps));
            break;
        }
        if (!sb_add(ps, &b, ps->p, 1))
            break;
        ps->p++;
    }
    free(b.s);
    return NULL;
}

static bool bare_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* A dotted key: parts[] (caller frees each); false after an error. */
static bool key(parser *ps, char **parts, size_t *n)
{
    *n = 0;
    for (;;) {
        skip_ws(ps);
        char *part = NULL;
        size_t len = 0;
        if (ps->p < ps->end && (*ps->p == '"' || *ps->p == '\'')) {
            if (ps->end - ps->p >= 3 && ps->p[1] == *ps->p && ps->p[2] == *ps->p) {
                error(ps, "a key cannot be a multi-line string");
                break;
            }
            if (!(part = string(ps, &len)))
                break;
            if (strlen(part) != len) {
                free(part);
                break;
            }
        } else {
            const char *s = ps->p;
            while (ps->p < ps->end && bare_char(*ps->p))
                ps->p++;
            if (ps->p == s) {
                error(ps, "expected a key, found %s", shown(ps));
                break;
            }
            part = malloc((size_t)(ps->p - s) + 1);
            if (!part) {
                ps->oom = true;
                break;
            }
            memcpy(part, s, (size_t)(ps->p - s));
            part[ps->p - s] = '\0';
        }
        if (*n == MAX_KEY_PARTS) {
            free(part);
            error(ps, "a key of more than %d parts", MAX_KEY_PARTS);
            break;
        }
        parts[(*n)++] = part;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == '.') {
            ps->p++;
            continue;
        }
        return true;
    }
    for (size_t i = 0; i < *n; i++)
        free(parts[i]);
    *n = 0;
    return false;
}

static void free_parts(char **parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(parts[i]);
}

/* ------------------------------------------------------------- values */

static cuabi__toml_value *value(parser *ps, int depth);

/* An integer; refuses floats and dates by name. */
static cuabi__toml_value *number(parser *ps)
{
    const char *s = ps->p, *e = s;
    while (e < ps->end && (bare_char(*e) || *e == '+' || *e == '.' || *e == ':'))
        e++;
    size_t n = (size_t)(e - s);
    char text[80];
    if (n >= sizeof text) {
        error(ps, "a number of %zu characters", n);
        return NULL;
    }
    memcpy(text, s, n);
    text[n] = '\0';
    const char *t = text;
    bool neg = false, sign = *t == '+' || *t == '-';
    if (sign)
        neg = *t++ == '-';
    int base = 10;
    if (t[0] == '0' && (t[1] == 'x' || t[1] == 'o' || t[1] == 'b')) {
        base = t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : 2;
        t += 2;
        if (sign) {
            error(ps, "a sign before %s is not allowed", text);
            return NULL;
        }
    }
    if (base == 10 && t[0] >= '0' && t[0] <= '9' && strpbrk(t, ".eE") && !strpbrk(t, "-:"))
        goto not_integer; /* 2.5, 1e3 */
    if (!strcmp(t, "inf") || !strcmp(t, "nan"))
        goto not_integer;
    uint64_t v = 0;
    bool digit_before = false;
    for (const char *c = t; *c; c++) {
        if (*c == '_') {
            if (!digit_before || !c[1] || c[1] == '_') {
                error(ps, "an underscore in %s must sit between two digits", text);
                return NULL;
            }
            digit_before = false;
            continue;
        }
        int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
              : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10 : 99;
        if (d >= base) {
            if (base == 10 && (*c == '-' || *c == ':'))
                goto not_integer;
            error(ps, "%s is not a number", text);
            return NULL;
        }
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) {
            error(ps, "%s is out of range", text);
            return NULL;
        }
        v = v * (uint64_t)base + (uint64_t)d;
        digit_before = true;
    }
    if (!*t) {
        error(ps, "%s is not a number", text);
        return NULL;
    }
    if (base == 10 && t[0] == '0' && t[1]) {
        error(ps, "%s: leading zeros are not allowed", text);
        return NULL;
    }
    if (v > (uint64_t)INT64_MAX + neg) {
        error(ps, "%s is out of range", text);
        return NULL;
    }
    cuabi__toml_value *out = new_value(ps, CUABI__TOML_INTEGER, ps->line);
    if (out)
        out->integer = neg ? (int64_t)(0 - v) : (int64_t)v;
    ps->p = e;
    return out;
not_integer:
    error(ps, "%s: floats and dates are not supported in a manifest", text);
    return NULL;
}

static cuabi__toml_value *array(parser *ps, int depth)
{
    cuabi__toml_value *a = new_value(ps, CUABI__TOML_ARRAY, ps->line);
    if (!a)
        return NULL;
    ps->p++; /* '[' */
    for (;;) {
        skip_blank(ps);
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return a;
        }
        cuabi__toml_value *v = value(ps, depth + 1);
        if (!v || !append(ps, a, NULL, v))
            break;
        skip_blank(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']')
            continue;
        error(ps, "expected ',' or ']' in an array, found %s", shown(ps));
        break;
    }
    value_free(a);
    return NULL;
}

static bool word(parser *ps, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n) ||
        (ps->p + n < ps->end && bare_char(ps->p[n])))
        return false;
    ps->p += n;
    return true;
}

static cuabi__toml_value *value(parser *ps, int depth)
{
    if (depth > MAX_DEPTH) {
        error(ps, "arrays nested more than %d deep", MAX_DEPTH);
        return NULL;
    }
    if (ps->p >= ps->end || at_newline(ps)) {
        error(ps, "expected a value, found %s", shown(ps));
        return NULL;
    }
    char c = *ps->p;
    int line = ps->line;
    if (c == '"' || c == '\'') {
        size_t len;
        char *s = string(ps, &len);
        if (!s)
            return NULL;
        cuabi__toml_value *v = new_value(ps, CUABI__TOML_STRING, line);
        if (!v) {
            free(s);
            return NULL;
        }
        v->str = s;
        v->len = len;
        return v;
    }
    if (c == '[')
        return array(ps, depth);
    if (c == '{') {
        error(ps, "inline tables ({...}) are not supported in a manifest: use a [table]");
        return NULL;
    }
    if (c == 't' || c == 'f') {
        bool t = word(ps, "true");
        if (t || word(ps, "false")) {
            cuabi__toml_value *v = new_value(ps, CUABI__TOML_BOOLEAN, line);
            if (v)
                v->boolean = t;
            return v;
        }
    }
    if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'i' || c == 'n')
        return number(ps);
    error(ps, "expected a value (a string, integer, boolean or array), found %s", shown(ps));
    return NULL;
}

/* ------------------------------------------------------------ structure */

/* The table `part` names under `t` (the last element of an array of
 * tables), creating an undefined one; NULL after an error. */
static cuabi__toml_value *descend(parser *ps, cuabi__toml_value *t, char *part, bool dotted,
                                  const char *whole)
{
    cuabi__toml_value *v = table_find(t, part);
    if (!v) {
        v = new_value(ps, CUABI__TOML_TABLE, ps->line);
        char *k = strdup(part);
        if (!v || !k) {
            ps->oom = true;
            free(k);
            value_free(v);
            return NULL;
        }
        v->dotted = dotted;
        return append(ps, t, k, v) ? v : NULL;
    }
    if (v->kind == CUABI__TOML_ARRAY && v->of_tables && !dotted)
        return v->items[v->count - 1];
    if (v->kind == CUABI__TOML_TABLE && (!dotted || v->dotted || !v->defined))
        return v;
    error(ps, "%s: \"%s\" is already %s (line %d)", whole, part,
          cuabi__toml_kind_name(v->kind), v->line);
    return NULL;
}

static void join(char *out, size_t cap, char **parts, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "." : "", parts[i]);
}

/* [a.b] or [[a.b]] */
static void header(parser *ps)
{
    bool aot = ps->end - ps->p >= 2 && ps->p[1] == '[';
    ps->p += aot ? 2 : 1;
    ps->current = NULL; /* until the header is known good */
    char *parts[MAX_KEY_PARTS];
    size_t n;
    if (!key(ps, parts, &n))
        return;
    char whole[512];
    join(whole, sizeof whole, parts, n);
    if (ps->p >= ps->end || *ps->p != ']' || (aot && (ps->end - ps->p < 2 || ps->p[1] != ']'))) {
        error(ps, "expected '%s' after [%s%s, found %s", aot ? "]]" : "]", aot ? "[" : "",
              whole, shown(ps));
        free_parts(parts, n);
        return;
    }
    ps->p += aot ? 2 : 1;
    cuabi__toml_value *t = ps->doc->root;
    for (size_t i = 0; t && i + 1 < n; i++)
        t = descend(ps, t, parts[i], false, whole);
    if (t) {
        cuabi__toml_value *last = table_find(t, parts[n - 1]);
        if (aot) {
            cuabi__toml_value *elem = new_value(ps, CUABI__TOML_TABLE, ps->line);
            if (elem)
                elem->defined = true;
            if (!last && elem) {
                last = new_value(ps, CUABI__TOML_ARRAY, ps->line);
                char *k = strdup(parts[n - 1]);
                if (last && k) {
                    last->of_tables = true;
                    if (!append(ps, t, k, last))
                        last = NULL;
                } else {
                    ps->oom = true;
                    free(k);
                    value_free(last);
                    last = NULL;
                }
            }
            if (elem && last && last->kind == CUABI__TOML_ARRAY && last->of_tables) {
                if (append(ps, last, NULL, elem))
                    ps->current = elem;
            } else {
                if (last && elem)
                    error(ps, "[[%s]]: \"%s\" is already %s (line %d), not an array of tables",
                          whole, parts[n - 1], cuabi__toml_kind_name(last->kind), last->line);
                value_free(elem);
            }
        } else if (!last) {
            cuabi__toml_value *nt = new_value(ps, CUABI__TOML_TABLE, ps->line);
            char *k = strdup(parts[n - 1]);
            if (nt && k) {
                nt->defined = true;
                if (append(ps, t, k, nt))
                    ps->current = nt;
            } else {
                ps->oom = true;
                free(k);
                value_free(nt);
            }
        } else if (last->kind == CUABI__TOML_TABLE && !last->defined && !last->dotted) {
            last->defined = true; /* made implicitly by an earlier [x.y] */
            last->line = ps->line;
            ps->current = last;
        } else {
            error(ps, "[%s] is defined already (%s, line %d)", whole,
                  last->kind == CUABI__TOML_TABLE ? "a table"
                  : last->of_tables ? "an array of tables" : cuabi__toml_kind_name(last->kind),
                  last->line);
        }
    }
    free_parts(parts, n);
}

/* key = value */
static void key_value(parser *ps)
{
    char *parts[MAX_KEY_PARTS];
    size_t n;
    int line = ps->line;
    if (!key(ps, parts, &n))
        return;
    char whole[512];
    join(whole, sizeof whole, parts, n);
    if (ps->p >= ps->end || *ps->p != '=') {
        error(ps, "expected '=' after the key \"%s\", found %s", whole, shown(ps));
        free_parts(parts, n);
        return;
    }
    ps->p++;
    skip_ws(ps);
    cuabi__toml_value *v = value(ps, 0);
    cuabi__toml_value *t = ps->current;
    for (size_t i = 0; v && t && i + 1 < n; i++)
        t = descend(ps, t, parts[i], true, whole);
    if (v && t) {
        cuabi__toml_value *old = table_find(t, parts[n - 1]);
        if (old) {
            error_at(ps, line, "\"%s\" is given twice (first on line %d)", whole, old->line);
            value_free(v);
        } else {
            v->line = line;
            if (v->kind == CUABI__TOML_TABLE)
                v->defined = true;
            if (append(ps, t, parts[n - 1], v))
                parts[n - 1] = NULL; /* taken */
        }
    } else {
        value_free(v); /* under a bad header, or after an error */
    }
    free_parts(parts, n);
}

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_char(const unsigned char *p, size_t n)
{
    unsigned c = *p;
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || n < len)
        return 0;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 31 : len == 3 ? c & 15 : c & 7;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 63);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t cuabi__utf8_prefix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    for (size_t len; i < n && (len = utf8_char(p + i, n - i)); i += len)
        ;
    return i;
}

bool cuabi__utf8_valid(const char *s, size_t n)
{
    return cuabi__utf8_prefix(s, n) == n;
}

/* Each line holding an invalid UTF-8 sequence is reported once, and kept
 * in ps->bad_lines: the table that line belongs to is marked damaged. */
static void check_utf8(parser *ps, const char *s, const char *end)
{
    int line = 1, bad_line = 0;
    for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)end;) {
        size_t n = utf8_char(p, (size_t)((const unsigned char *)end - p));
        if (!n && bad_line != line) {
            error_at(ps, line, "invalid UTF-8");
            bad_line = line;
            int *b = realloc(ps->bad_lines, (ps->nbad + 1) * sizeof *b);
            if (!b) {
                ps->oom = true;
                return;
            }
            ps->bad_lines = b;
            ps->bad_lines[ps->nbad++] = line;
        }
        if (*p == '\n')
            line++;
        p += n ? n : 1;
    }
}

/* Whether a line from `first` to `last` holds invalid UTF-8 (lines are
 * asked about in order). */
static bool bad_utf8_in(parser *ps, int first, int last)
{
    while (ps->next_bad < ps->nbad && ps->bad_lines[ps->next_bad] < first)
        ps->next_bad++;
    return ps->next_bad < ps->nbad && ps->bad_lines[ps->next_bad] <= last;
}

/* One line of the document (or several: a multi-line string or array). */
static void one_line(parser *ps)
{
    skip_ws(ps);
    skip_comment(ps);
    if (ps->p >= ps->end)
        return;
    if (at_newline(ps)) {
        take_newline(ps);
        return;
    }
    bool is_header = *ps->p == '[';
    if (is_header)
        header(ps);
    else
        key_value(ps);
    if (ps->failed) {
        skip_line(ps);
        return;
    }
    skip_ws(ps);
    skip_comment(ps);
    if (ps->p < ps->end && !at_newline(ps)) {
        error(ps, "unexpected %s after the %s (one per line)", shown(ps),
              is_header ? "table header" : "value");
        skip_line(ps);
    }
}

int cuabi__toml_parse(cuabi__toml_doc *out, const char *text, size_t size)
{
    *out = (cuabi__toml_doc){ 0 };
    /* A UTF-8 byte order mark is not part of the text (TOML allows it). */
    if (size >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) {
        text += 3;
        size -= 3;
    }
    parser ps = { .p = text, .end = text + size, .line = 1, .doc = out };
    out->root = new_value(&ps, CUABI__TOML_TABLE, 1);
    if (!out->root)
        return -1;
    out->root->defined = true;
    ps.current = out->root;
    check_utf8(&ps, text, text + size);
    while (ps.p < ps.end && !ps.oom) {
        int first = ps.line;
        ps.failed = false;
        one_line(&ps);
        /* the line's last: a newline taken ends the line before it */
        int last = ps.line > first && ps.p[-1] == '\n' ? ps.line - 1 : ps.line;
        if (ps.current && (ps.failed || bad_utf8_in(&ps, first, last)))
            ps.current->damaged = true; /* a value of it may be missing or wrong */
    }
    free(ps.bad_lines);
    if (ps.oom) {
        cuabi__toml_free(out);
        return -1;
    }
    return 0;
}
