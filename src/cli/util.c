/* Helpers shared by the cuabi subcommands: error output and JSON. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *command, cuabi_status st)
{
    const cuabi_error_info *e = cuabi_last_error();
    fprintf(stderr, "cuabi %s: %s (%s)\n", command,
            e->status == st ? e->message : cuabi_status_message(st), cuabi_status_name(st));
    if (e->status == st && e->log_size)
        fprintf(stderr, "%s\n", e->log);
    return 1;
}

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    return false;
}

/* Read in chunks rather than by the size ftell reports, so pipes
 * (/dev/stdin) work too and a directory fails with EISDIR. */
char *cli_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        char *bigger = n + 1 < cap ? buf : realloc(buf, cap *= 2);
        if (!bigger)
            free(buf);
        buf = bigger;
    }
    int err = !buf ? ENOMEM : ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    if (size)
        *size = n;
    return buf;
}

static void json_escape(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void json_key(cli_json *j, const char *key)
{
    if (j->depth > 0 && j->need_comma[j->depth])
        fputc(',', j->out);
    if (j->depth > 0)
        j->need_comma[j->depth] = true;
    if (key) {
        json_escape(j->out, key);
        fputc(':', j->out);
    }
}

void json_begin_object(cli_json *j, const char *key)
{
    json_key(j, key);
    fputc('{', j->out);
    j->need_comma[++j->depth] = false;
}

void json_end_object(cli_json *j)
{
    fputc('}', j->out);
    if (--j->depth == 0)
        fputc('\n', j->out);
}

void json_begin_array(cli_json *j, const char *key)
{
    json_key(j, key);
    fputc('[', j->out);
    j->need_comma[++j->depth] = false;
}

void json_end_array(cli_json *j)
{
    fputc(']', j->out);
    if (--j->depth == 0)
        fputc('\n', j->out);
}

void json_string(cli_json *j, const char *key, const char *value)
{
    json_key(j, key);
    if (value)
        json_escape(j->out, value);
    else
        fputs("null", j->out);
}

void json_int(cli_json *j, const char *key, long long value)
{
    json_key(j, key);
    fprintf(j->out, "%lld", value);
}

void json_double(cli_json *j, const char *key, double value)
{
    json_key(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.6g", value);
    else
        fputs("null", j->out);
}

void json_bool(cli_json *j, const char *key, bool value)
{
    json_key(j, key);
    fputs(value ? "true" : "false", j->out);
}

void json_null(cli_json *j, const char *key)
{
    json_key(j, key);
    fputs("null", j->out);
}
