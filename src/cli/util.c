/* Helpers shared by the cuabi subcommands: error output, reading input
 * files, and the JSON writer. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Errors ---- */

int cli_fail(const char *command, cuabi_status st, cli_json *j)
{
    const cuabi_error_info *e = cuabi_last_error();
    const char *message = e->status == st ? e->message : cuabi_status_message(st);
    fprintf(stderr, "cuabi %s: %s (%s)\n", command, message, cuabi_status_name(st));
    if (e->status == st && e->log_size)
        fprintf(stderr, "%s\n", e->log);
    return json_fail(j, st, message, 1);
}

int cli_error(cli_json *j, const char *command, cuabi_status st, int rc, const char *fmt, ...)
{
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuabi %s: %s\n", command, message);
    return json_fail(j, st, message, rc);
}

/* ---- Reading files ---- */

static const char *kind_of_file(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a file";
}

/* Open without blocking (a FIFO with no writer would wait forever), check
 * it is a regular file of a sane size, then go back to blocking reads.
 * Returns the fd and its size, or -1 with the reason in why. */
static int open_regular(const char *path, off_t *size, char *why, size_t len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, len, "%s", strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        snprintf(why, len, "%s", strerror(EISDIR));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "%s, not a regular file", kind_of_file(st.st_mode));
    } else if ((unsigned long long)st.st_size > CLI_MAX_FILE_BYTES) {
        snprintf(why, len, "%lld bytes, more than %u, the most a file may have",
                 (long long)st.st_size, CLI_MAX_FILE_BYTES);
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        snprintf(why, len, "%s", strerror(errno));
    } else {
        *size = st.st_size;
        return fd;
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Read to the end: the size fstat gave is where to start, not a promise
 * (/proc files say 0, a file may grow), so the buffer grows as needed, up
 * to the limit. */
static char *read_all(int fd, size_t hint, size_t *size, char *why, size_t len)
{
    size_t cap = hint + 1 < 4096 ? 4096 : hint + 1, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 == cap) {
            if (n >= CLI_MAX_FILE_BYTES) {
                snprintf(why, len, "more than %u bytes, the most a file may have",
                         CLI_MAX_FILE_BYTES);
                break;
            }
            size_t want = cap > CLI_MAX_FILE_BYTES / 2 ? (size_t)CLI_MAX_FILE_BYTES + 1 : cap * 2;
            char *bigger = realloc(buf, want);
            if (!bigger) {
                snprintf(why, len, "%s", strerror(ENOMEM));
                break;
            }
            buf = bigger;
            cap = want;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got == 0) {
            buf[n] = '\0';
            *size = n;
            return buf;
        }
        if (got < 0 && errno != EINTR) {
            snprintf(why, len, "%s", strerror(errno));
            break;
        }
        n += got > 0 ? (size_t)got : 0;
    }
    if (!buf)
        snprintf(why, len, "%s", strerror(ENOMEM));
    free(buf);
    return NULL;
}

char *cli_read_file(const char *path, size_t *size, char *why, size_t len)
{
    off_t hint = 0;
    size_t n = 0;
    int fd = open_regular(path, &hint, why, len);
    if (fd < 0)
        return NULL;
    char *buf = read_all(fd, (size_t)hint, &n, why, len);
    close(fd);
    if (buf && size)
        *size = n;
    return buf;
}

/* ---- JSON ---- */

/* The length of the valid UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static int utf8_length(const unsigned char *s)
{
    unsigned char c = s[0];
    int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (!n || c > 0xf4)
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

void json_write_string(FILE *out, const char *s)
{
    static const char *const named[0x20] = { ['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n",
                                             ['\r'] = "\\r", ['\t'] = "\\t" };
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', out);
    while (*p) {
        int n = *p < 0x80 ? 1 : utf8_length(p);
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 && named[*p])
            fputs(named[*p], out);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else if (n == 0)
            fputs("\\ufffd", out);   /* not UTF-8: one replacement per byte */
        else
            fwrite(p, 1, (size_t)n, out);
        p += n ? n : 1;
    }
    fputc('"', out);
}

bool json_start_to(cli_json *j, FILE *dest)
{
    memset(j, 0, sizeof *j);
    j->dest = dest;
    j->out = open_memstream(&j->buf, &j->size);
    if (!j->out)
        fprintf(stderr, "cuabi: out of memory\n");
    return j->out != NULL;
}

bool json_start(cli_json *j)
{
    return json_start_to(j, stdout);
}

bool json_on(const cli_json *j)
{
    return j && j->out;
}

static void json_key(cli_json *j, const char *key)
{
    if (j->depth > 0 && j->need_comma[j->depth])
        fputc(',', j->out);
    if (j->depth > 0)
        j->need_comma[j->depth] = true;
    if (key) {
        json_write_string(j->out, key);
        fputc(':', j->out);
    }
}

static void json_open(cli_json *j, const char *key, char bracket)
{
    if (!json_on(j) || j->depth + 1 >= CLI_JSON_DEPTH)
        return;
    json_key(j, key);
    fputc(bracket, j->out);
    j->depth++;
    j->need_comma[j->depth] = false;
    j->open[j->depth] = bracket;
}

static void json_close(cli_json *j)
{
    if (!json_on(j) || j->depth == 0)
        return;
    fputc(j->open[j->depth] == '{' ? '}' : ']', j->out);
    j->depth--;
}

void json_begin_object(cli_json *j, const char *key) { json_open(j, key, '{'); }
void json_end_object(cli_json *j) { json_close(j); }
void json_begin_array(cli_json *j, const char *key) { json_open(j, key, '['); }
void json_end_array(cli_json *j) { json_close(j); }

/* The buffer, closed, to j->dest; the writer is then off. */
static int json_emit(cli_json *j, int rc)
{
    fputc('\n', j->out);
    bool ok = fclose(j->out) == 0;
    j->out = NULL;
    ok = ok && fwrite(j->buf, 1, j->size, j->dest) == j->size && fflush(j->dest) == 0;
    free(j->buf);
    j->buf = NULL;
    return ok ? rc : rc ? rc : 1;
}

int json_finish(cli_json *j, int rc)
{
    if (!json_on(j))
        return rc;
    while (j->depth > 0)
        json_close(j);
    return json_emit(j, rc);
}

int json_fail(cli_json *j, cuabi_status st, const char *message, int rc)
{
    if (!json_on(j))
        return rc;
    if (j->depth == 0 || j->open[1] != '{') {
        /* nothing yet, or an array (a list a script would take as the
         * answer): start again with the error alone */
        FILE *dest = j->dest;
        fclose(j->out);
        free(j->buf);
        if (!json_start_to(j, dest))
            return rc;
        json_begin_object(j, NULL);
    }
    while (j->depth > 1)
        json_close(j);
    json_string(j, "error", message);
    json_string(j, "status", cuabi_status_name(st));
    j->failed = true;
    return json_finish(j, rc);
}

void json_string(cli_json *j, const char *key, const char *value)
{
    if (!json_on(j))
        return;
    json_key(j, key);
    if (value)
        json_write_string(j->out, value);
    else
        fputs("null", j->out);
}

void json_int(cli_json *j, const char *key, long long value)
{
    if (!json_on(j))
        return;
    json_key(j, key);
    fprintf(j->out, "%lld", value);
}

void json_double(cli_json *j, const char *key, double value)
{
    if (!json_on(j))
        return;
    json_key(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.6g", value);
    else
        fputs("null", j->out);
}

void json_bool(cli_json *j, const char *key, bool value)
{
    if (!json_on(j))
        return;
    json_key(j, key);
    fputs(value ? "true" : "false", j->out);
}

void json_null(cli_json *j, const char *key)
{
    if (!json_on(j))
        return;
    json_key(j, key);
    fputs("null", j->out);
}
