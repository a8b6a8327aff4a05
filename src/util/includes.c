/* What a CUDA C++ compile can read through #include: see includes.h.
 *
 * Three parts: a lexer that lists the include-like directives and the
 * "file"-valued macro definitions of a text (comments, line continuations,
 * string and raw-string literals handled; conditionals not evaluated), a
 * resolver that follows them as NVRTC would, hashing every outcome, and a
 * memory of files already read (by stat identity) and texts already lexed
 * (by content hash), so a compile that hits the in-memory cache costs a
 * stat per reachable file and no reading. One mutex guards it all. */
#include "util/includes.h"
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define MAX_FILE ((size_t)256 << 20)   /* a larger "header" is refused */
#define MAX_TEXTS 4096                 /* lexed texts remembered */
#define MAX_FILES 65536                /* files remembered */
#define FRESH_SECONDS 2                /* read again if modified this close to reading */

/* ------------------------------------------------------------- lexing */

enum kind {
    INC_QUOTE, INC_ANGLE,     /* #include "x" / <x> */
    NEXT_QUOTE, NEXT_ANGLE,   /* #include_next */
    HAS_QUOTE, HAS_ANGLE,     /* __has_include("x") / (<x>) */
    INC_MACRO,                /* #include NAME */
    INC_OTHER,                /* anything else after #include: not followed */
};

typedef struct directive {
    unsigned char kind;
    char *text;
} directive;

typedef struct definition {
    char *name, *value;       /* value: "x", <x> or an identifier */
} definition;

/* What one text says, lexed once. */
typedef struct unit {
    directive *dirs;
    size_t ndirs, capdirs;
    definition *defs;
    size_t ndefs, capdefs;
    bool oom;
} unit;

static void unit_free(unit *u)
{
    for (size_t i = 0; i < u->ndirs; i++)
        free(u->dirs[i].text);
    for (size_t i = 0; i < u->ndefs; i++) {
        free(u->defs[i].name);
        free(u->defs[i].value);
    }
    free(u->dirs);
    free(u->defs);
    *u = (unit){ 0 };
}

static void add_directive(unit *u, unsigned char kind, const char *text, size_t n)
{
    if (u->ndirs == u->capdirs) {
        size_t cap = u->capdirs ? 2 * u->capdirs : 8;
        directive *d = realloc(u->dirs, cap * sizeof *d);
        if (!d) {
            u->oom = true;
            return;
        }
        u->dirs = d;
        u->capdirs = cap;
    }
    char *t = strndup(text, n);
    if (!t) {
        u->oom = true;
        return;
    }
    u->dirs[u->ndirs++] = (directive){ kind, t };
}

static void add_definition(definition **defs, size_t *n, size_t *cap, bool *oom,
                           const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        definition *d = realloc(*defs, c * sizeof *d);
        if (!d) {
            *oom = true;
            return;
        }
        *defs = d;
        *cap = c;
    }
    char *a = strndup(name, nlen), *b = strndup(value, vlen);
    if (!a || !b) {
        free(a);
        free(b);
        *oom = true;
        return;
    }
    (*defs)[(*n)++] = (definition){ a, b };
}

static bool ident_start(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
static const char *skip_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f' || *p == '\v'))
        p++;
    return p;
}

/* "x" or <x> at p: the kind offset (0 quote, 1 angle) and the name. */
static bool header_name(const char *p, const char *end, int *angle, const char **name,
                        size_t *len)
{
    if (p >= end)
        return false; /* before reading *p: the directive may end right here */
    char close = *p == '"' ? '"' : *p == '<' ? '>' : 0;
    if (!close)
        return false;
    const char *q = memchr(p + 1, close, (size_t)(end - p - 1));
    if (!q)
        return false;
    *angle = close == '>';
    *name = p + 1;
    *len = (size_t)(q - p - 1);
    return true;
}

/* One directive line (after the '#', comments already spaces). */
static void directive_line(unit *u, const char *p, const char *end)
{
    p = skip_space(p, end);
    const char *w = p;
    while (p < end && ident_char(*p))
        p++;
    size_t wl = (size_t)(p - w);
    bool include = (wl == 7 && !memcmp(w, "include", 7)) || (wl == 6 && !memcmp(w, "import", 6));
    bool next = wl == 12 && !memcmp(w, "include_next", 12);
    if (include || next) {
        p = skip_space(p, end);
        int angle;
        const char *name;
        size_t len;
        if (header_name(p, end, &angle, &name, &len)) {
            add_directive(u, (unsigned char)((next ? NEXT_QUOTE : INC_QUOTE) + angle), name, len);
        } else if (p < end && ident_start(*p)) {
            const char *m = p;
            while (p < end && ident_char(*p))
                p++;
            const char *rest = skip_space(p, end);
            if (rest == end && !next)
                add_directive(u, INC_MACRO, m, (size_t)(p - m));
            else
                add_directive(u, INC_OTHER, m, (size_t)(end - m));
        } else if (p < end) {
            add_directive(u, INC_OTHER, p, (size_t)(end - p));
        }
        return;
    }
    if (wl == 6 && !memcmp(w, "define", 6)) {
        p = skip_space(p, end);
        const char *name = p;
        while (p < end && ident_char(*p))
            p++;
        size_t nl = (size_t)(p - name);
        if (!nl || (p < end && *p == '(')) /* function-like: not followed */
            return;
        const char *v = skip_space(p, end), *ve = end;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
            ve--;
        int angle;
        const char *hn;
        size_t hl;
        bool ident = ve > v && ident_start(*v);
        for (const char *q = v; ident && q < ve; q++)
            ident = ident_char(*q);
        if ((header_name(v, ve, &angle, &hn, &hl) && hn + hl + 1 == ve) || ident)
            add_definition(&u->defs, &u->ndefs, &u->capdefs, &u->oom, name, nl, v,
                           (size_t)(ve - v));
        return;
    }
    /* #if / #elif: every __has_include in the line */
    for (const char *q = p; q < end;) {
        const char *h = memmem(q, (size_t)(end - q), "__has_include", 13);
        if (!h)
            break;
        q = h + 13;
        if ((h > p && ident_char(h[-1])))
            continue;
        if (end - q >= 5 && !memcmp(q, "_next", 5))
            q += 5;
        if (q < end && ident_char(*q))
            continue;
        const char *a = skip_space(q, end);
        if (a >= end || *a != '(')
            continue; /* "#ifdef __has_include": the feature test */
        a = skip_space(a + 1, end);
        int angle;
        const char *name;
        size_t len;
        if (header_name(a, end, &angle, &name, &len))
            add_directive(u, (unsigned char)(HAS_QUOTE + angle), name, len);
        else
            add_directive(u, INC_OTHER, a, (size_t)(end - a));
    }
}

/* The text of a raw string literal R"delim( ... )delim" starting at s[i]
 * (the quote): the index after it, or n. */
static size_t skip_raw_string(const char *s, size_t n, size_t i)
{
    size_t d = i + 1;
    while (d < n && d - i <= 17 && s[d] != '(')
        d++;
    if (d >= n || s[d] != '(')
        return i + 1;
    size_t dl = d - i - 1;
    for (size_t j = d + 1; j + dl + 1 < n + 1 && j < n; j++)
        if (s[j] == ')' && j + dl + 1 < n && !memcmp(s + j + 1, s + i + 1, dl) &&
            s[j + dl + 1] == '"')
            return j + dl + 2;
    return n;
}

static bool raw_prefix(const char *s, size_t i)
{
    /* R"...", or u8R / uR / UR / LR, not the end of a longer identifier */
    if (i == 0 || s[i - 1] != 'R')
        return false;
    size_t k = i - 1;
    if (k >= 2 && s[k - 2] == 'u' && s[k - 1] == '8')
        k -= 2;
    else if (k >= 1 && (s[k - 1] == 'u' || s[k - 1] == 'U' || s[k - 1] == 'L'))
        k -= 1;
    return k == 0 || !ident_char(s[k - 1]);
}

typedef struct linebuf {
    char *s;
    size_t len, cap;
    bool oom;
} linebuf;

static void lb_add(linebuf *b, const char *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
}

static void end_directive(unit *u, const linebuf *line)
{
    if (line->len) /* "#" alone: a null directive */
        directive_line(u, line->s, line->s + line->len);
}

static void lex(unit *u, const char *s, size_t n)
{
    linebuf line = { 0 };
    bool start = true, in_directive = false;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '\\' && i + 1 < n && (s[i + 1] == '\n' ||
                                       (s[i + 1] == '\r' && i + 2 < n && s[i + 2] == '\n'))) {
            i += s[i + 1] == '\n' ? 2 : 3; /* a continued line */
            continue;
        }
        if (c == '/' && i + 1 < n && s[i + 1] == '/') {
            while (i < n && s[i] != '\n')
                i++;
            continue;
        }
        if (c == '/' && i + 1 < n && s[i + 1] == '*') {
            const char *e = memmem(s + i + 2, n - i - 2, "*/", 2);
            i = e ? (size_t)(e - s) + 2 : n;
            if (in_directive)
                lb_add(&line, " ", 1);
            continue;
        }
        if (c == '\n') {
            if (in_directive)
                end_directive(u, &line);
            in_directive = false;
            start = true;
            line.len = 0;
            i++;
            continue;
        }
        if (start && (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v')) {
            i++;
            continue;
        }
        if (start && (c == '#' || (c == '%' && i + 1 < n && s[i + 1] == ':'))) {
            in_directive = true; /* "%:" is the digraph of '#' */
            start = false;
            line.len = 0;
            i += c == '#' ? 1 : 2;
            continue;
        }
        start = false;
        if (c == '"' && !in_directive && raw_prefix(s, i)) {
            i = skip_raw_string(s, n, i);
            continue;
        }
        if (c == '"' || c == '\'') {
            size_t j = i + 1;
            while (j < n && s[j] != c && s[j] != '\n')
                j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            size_t stop = j < n && s[j] == c ? j + 1 : j;
            if (in_directive)
                lb_add(&line, s + i, stop - i);
            i = stop;
            continue;
        }
        if (in_directive)
            lb_add(&line, &c, 1);
        i++;
    }
    if (in_directive)
        end_directive(u, &line);
    u->oom |= line.oom;
    free(line.s);
}

/* ------------------------------------------------------ remembered state */

typedef struct text_entry {
    XXH128_hash_t hash;
    size_t size;
    unit u;
    struct text_entry *next;
} text_entry;

typedef struct file_entry {
    char *path;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    time_t read_at;
    XXH128_hash_t hash;
    unit u;
    unsigned long scan;           /* the scan that last read it */
    struct file_entry *next;
} file_entry;

#define NBUCKETS 4096
static struct {
    pthread_mutex_t lock;
    text_entry *texts[NBUCKETS];
    file_entry *files[NBUCKETS];
    size_t ntexts, nfiles;
    unsigned long scan;           /* counts scans */
} mem = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void forget_all(void)
{
    for (size_t b = 0; b < NBUCKETS; b++) {
        for (text_entry *t = mem.texts[b], *n; t; t = n) {
            n = t->next;
            unit_free(&t->u);
            free(t);
        }
        for (file_entry *f = mem.files[b], *n; f; f = n) {
            n = f->next;
            unit_free(&f->u);
            free(f->path);
            free(f);
        }
        mem.texts[b] = NULL;
        mem.files[b] = NULL;
    }
    mem.ntexts = mem.nfiles = 0;
}

void cuabi__includes_reset_for_test(void)
{
    pthread_mutex_lock(&mem.lock);
    forget_all();
    pthread_mutex_unlock(&mem.lock);
}

/* The lexed form of an in-memory text; NULL when out of memory. */
static const unit *text_unit(const char *s, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(s, n);
    text_entry **b = &mem.texts[h.low64 % NBUCKETS];
    for (text_entry *t = *b; t; t = t->next)
        if (t->size == n && XXH128_isEqual(t->hash, h))
            return &t->u;
    text_entry *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    lex(&t->u, s, n);
    if (t->u.oom) {
        unit_free(&t->u);
        free(t);
        return NULL;
    }
    t->hash = h;
    t->size = n;
    t->next = *b;
    *b = t;
    mem.ntexts++;
    return &t->u;
}

/* A regular file at `path`: its remembered (or freshly read) content hash
 * and lexed form. Returns 1, 0 when there is no such file, -1 on error
 * (reason in `why`). */
static int file_unit(const char *path, const file_entry **out, char *why, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    uint64_t hp = XXH3_64bits(path, strlen(path));
    file_entry **b = &mem.files[hp % NBUCKETS], *f;
    for (f = *b; f && strcmp(f->path, path); f = f->next)
        ;
    /* Read once per scan whatever happens: the scan holds pointers into
     * what it read (and a file read twice in one scan is one outcome). */
    if (f && f->scan == mem.scan && f->size >= 0) {
        *out = f;
        return 1;
    }
    if (f && f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
        f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec &&
        f->ctime.tv_sec == st.st_ctim.tv_sec && f->ctime.tv_nsec == st.st_ctim.tv_nsec &&
        f->read_at - st.st_mtim.tv_sec >= FRESH_SECONDS) {
        *out = f;
        return 1;
    }
    if ((size_t)st.st_size > MAX_FILE) {
        snprintf(why, cap, "%s is larger than %zu MiB", path, MAX_FILE >> 20);
        return -1;
    }
    /* Opened as every file is (util/file.h): what was a regular file at the
     * stat may be a FIFO by now, and must not block the compile. */
    struct stat ost;
    char whyopen[256];
    int fd = cuabi__file_open(path, 0, MAX_FILE, &ost, whyopen, sizeof whyopen);
    if (fd < 0) {
        snprintf(why, cap, "cannot read %s: %s", path, whyopen);
        return -1;
    }
    char *data = NULL;
    size_t got = 0;
    int r = ost.st_dev != st.st_dev || ost.st_ino != st.st_ino ? (errno = EAGAIN, -1)
            : cuabi__file_read_fd(fd, (uint64_t)st.st_size, MAX_FILE, false, &data, &got);
    int err = errno;
    close(fd);
    if (r != 0 || got != (size_t)st.st_size) {
        snprintf(why, cap, "cannot read %s: %s", path, r != 0 && err == ENOMEM
                 ? strerror(err) : "it changed while being read");
        free(data);
        return -1;
    }
    if (!f) {
        if (!(f = calloc(1, sizeof *f)) || !(f->path = strdup(path))) {
            free(f);
            free(data);
            snprintf(why, cap, "out of memory");
            return -1;
        }
        f->next = *b;
        *b = f;
        mem.nfiles++;
    }
    unit_free(&f->u);
    lex(&f->u, data, got);
    f->hash = XXH3_128bits(data, got);
    free(data);
    if (f->u.oom) {
        unit_free(&f->u);
        f->size = -1; /* never matches: read again next time */
        snprintf(why, cap, "out of memory");
        return -1;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->size = st.st_size;
    f->mtime = st.st_mtim;
    f->ctime = st.st_ctim;
    f->read_at = time(NULL);
    f->scan = mem.scan;
    *out = f;
    return 1;
}

/* ------------------------------------------------------------- scanning */

/* A text still to scan: a file (by path) or an in-memory header. */
typedef struct work {
    const unit *u;
    char *dir;     /* where its "quoted" includes are looked for first */
    char *shown;   /* its name in messages */
} work;

typedef struct pending {   /* an #include of a macro, resolved at the end */
    char *macro, *dir, *shown;
    bool done;
} pending;

typedef struct scan {
    XXH3_state_t st;
    const cuabi_program_options *o;
    const char **dirs;            /* include paths, in order */
    size_t ndirs;
    definition *defs;             /* macros with a file-like value */
    size_t ndefs, capdefs;
    work *queue;
    size_t nqueue, capqueue;
    pending *pend;
    size_t npend, cappend;
    uint64_t *seen;               /* hashes of what was queued once */
    size_t nseen, capseen;
    bool oom, unresolved, any;
    char *why;
    size_t why_cap;
    /* cuabi__includes_visit: told of each file an include reads; non-zero stops */
    int (*visit)(const char *path, void *ctx);
    void *visit_ctx;
    bool stopped;
} scan;

/* Length-prefixed fields into the digest. */
static void event(scan *s, char tag, const char *a, const char *b, const void *h, size_t hn)
{
    const char *parts[2] = { a ? a : "", b ? b : "" };
    XXH3_128bits_update(&s->st, &tag, 1);
    for (int i = 0; i < 2; i++) {
        uint64_t n = strlen(parts[i]);
        XXH3_128bits_update(&s->st, &n, sizeof n);
        XXH3_128bits_update(&s->st, parts[i], n);
    }
    uint64_t n = hn;
    XXH3_128bits_update(&s->st, &n, sizeof n);
    if (hn)
        XXH3_128bits_update(&s->st, h, hn);
    s->any = true;
}

/* Whether `tag`+`what` was queued already (a set of 64-bit hashes, open
 * addressing, 0 meaning empty); records it when not. */
static bool seen_before(scan *s, const char *tag, const char *what)
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, tag, strlen(tag) + 1);
    XXH3_64bits_update(&st, what, strlen(what));
    uint64_t h = XXH3_64bits_digest(&st);
    h += !h;
    if (2 * (s->nseen + 1) > s->capseen) {
        size_t cap = s->capseen ? 2 * s->capseen : 64;
        uint64_t *n = calloc(cap, sizeof *n);
        if (!n) {
            s->oom = true;
            return true;
        }
        for (size_t i = 0; i < s->capseen; i++)
            if (s->seen[i]) {
                size_t j = s->seen[i] & (cap - 1);
                while (n[j])
                    j = (j + 1) & (cap - 1);
                n[j] = s->seen[i];
            }
        free(s->seen);
        s->seen = n;
        s->capseen = cap;
    }
    size_t j = h & (s->capseen - 1);
    for (; s->seen[j]; j = (j + 1) & (s->capseen - 1))
        if (s->seen[j] == h)
            return true;
    s->seen[j] = h;
    s->nseen++;
    return false;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

static void enqueue(scan *s, const unit *u, const char *where, const char *shown)
{
    if (s->nqueue == s->capqueue) {
        size_t cap = s->capqueue ? 2 * s->capqueue : 16;
        work *q = realloc(s->queue, cap * sizeof *q);
        if (!q) {
            s->oom = true;
            return;
        }
        s->queue = q;
        s->capqueue = cap;
    }
    char *dir = dir_of(where), *sh = strdup(shown);
    if (!dir || !sh) {
        free(dir);
        free(sh);
        s->oom = true;
        return;
    }
    s->queue[s->nqueue++] = (work){ u, dir, sh };
}

static void unresolved(scan *s, const char *fmt, const char *a, const char *b)
{
    if (!s->unresolved)
        snprintf(s->why, s->why_cap, fmt, a, b);
    s->unresolved = true;
}

/* A candidate file: hash it (contents for an include, presence for
 * __has_include), queue an included one. true when it exists. */
static bool try_file(scan *s, const char *path, bool has_only)
{
    const file_entry *f;
    char why[512];
    int r = file_unit(path, &f, why, sizeof why);
    if (r < 0) {
        unresolved(s, "%s%s", why, "");
        return false;
    }
    if (r == 0)
        return false;
    if (has_only) {
        event(s, 'E', path, NULL, NULL, 0);
    } else {
        event(s, 'F', path, NULL, &f->hash, sizeof f->hash);
        if (!seen_before(s, "F", path)) {
            if (s->visit && s->visit(path, s->visit_ctx) != 0) {
                s->stopped = true;
                s->unresolved = true; /* stops every loop of the scan */
                return true;
            }
            enqueue(s, &f->u, path, path);
        }
    }
    return true;
}

/* Follow one header name from a text whose quoted includes start in `dir`. */
static void resolve(scan *s, unsigned char kind, const char *name, const char *dir)
{
    bool quote = kind == INC_QUOTE || kind == NEXT_QUOTE || kind == HAS_QUOTE;
    bool next = kind == NEXT_QUOTE || kind == NEXT_ANGLE;
    bool has = kind == HAS_QUOTE || kind == HAS_ANGLE;
    event(s, 'I', quote ? dir : "", name, &kind, 1);
    const cuabi_program_options *o = s->o;
    if (!next)
        for (size_t i = 0; i < o->num_headers; i++)
            if (!strcmp(o->header_names[i], name)) {
                event(s, 'M', name, NULL, NULL, 0);
                if (!has && !seen_before(s, "M", name)) {
                    const char *c = o->header_contents[i];
                    const unit *u = text_unit(c, strlen(c));
                    if (!u)
                        s->oom = true;
                    else
                        enqueue(s, u, name, name);
                }
                return;
            }
    char path[8192];
    bool found = false;
    if (name[0] == '/') {
        found = try_file(s, name, has);
    } else {
        /* #include_next: every candidate counts (the one after the
         * including file's directory is the one read; all are hashed). */
        if (quote && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path)
            found = try_file(s, path, has);
        for (size_t i = 0; i < s->ndirs && (!found || next); i++)
            if (snprintf(path, sizeof path, "%s/%s", s->dirs[i], name) < (int)sizeof path)
                found |= try_file(s, path, has);
    }
    if (!found)
        event(s, 'A', name, NULL, NULL, 0);
}

static void add_pending(scan *s, const char *macro, const char *dir, const char *shown)
{
    if (s->npend == s->cappend) {
        size_t cap = s->cappend ? 2 * s->cappend : 8;
        pending *p = realloc(s->pend, cap * sizeof *p);
        if (!p) {
            s->oom = true;
            return;
        }
        s->pend = p;
        s->cappend = cap;
    }
    pending p = { strdup(macro), strdup(dir), strdup(shown), false };
    if (!p.macro || !p.dir || !p.shown) {
        free(p.macro);
        free(p.dir);
        free(p.shown);
        s->oom = true;
        return;
    }
    s->pend[s->npend++] = p;
}

static void scan_unit(scan *s, const work *w)
{
    const unit *u = w->u;
    for (size_t i = 0; i < u->ndefs; i++)
        add_definition(&s->defs, &s->ndefs, &s->capdefs, &s->oom, u->defs[i].name,
                       strlen(u->defs[i].name), u->defs[i].value, strlen(u->defs[i].value));
    for (size_t i = 0; i < u->ndirs && !s->unresolved && !s->oom; i++) {
        const directive *d = &u->dirs[i];
        if (d->kind == INC_MACRO)
            add_pending(s, d->text, w->dir, w->shown);
        else if (d->kind == INC_OTHER)
            unresolved(s, "%s has `#include %s` (or an __has_include of a macro), which the "
                       "cache cannot follow without compiling", w->shown, d->text);
        else
            resolve(s, d->kind, d->text, w->dir);
    }
}

static void drain(scan *s)
{
    for (size_t i = 0; i < s->nqueue && !s->unresolved && !s->oom; i++)
        scan_unit(s, &s->queue[i]);
}

/* Expand `macro` through the definitions seen (chains of names, 8 deep)
 * and resolve every file-like value; false when none is. */
static bool expand(scan *s, const char *macro, const char *dir, int depth)
{
    bool any = false;
    for (size_t i = 0; i < s->ndefs && depth < 8; i++) {
        if (strcmp(s->defs[i].name, macro))
            continue;
        const char *v = s->defs[i].value;
        size_t n = strlen(v);
        if (n >= 2 && (v[0] == '"' || v[0] == '<')) {
            char name[4096];
            snprintf(name, sizeof name, "%.*s", (int)(n - 2), v + 1);
            event(s, 'D', macro, v, NULL, 0);
            resolve(s, v[0] == '"' ? INC_QUOTE : INC_ANGLE, name, dir);
            any = true;
        } else if (strcmp(v, macro)) {
            any |= expand(s, v, dir, depth + 1);
        }
    }
    return any;
}

/* Definitions given on the command line: "NAME=VALUE" (options.defines,
 * -D..., --define-macro=...). */
static void option_define(scan *s, const char *d)
{
    const char *eq = strchr(d, '=');
    if (eq && eq > d)
        add_definition(&s->defs, &s->ndefs, &s->capdefs, &s->oom, d, (size_t)(eq - d), eq + 1,
                       strlen(eq + 1));
}

/* Include paths, pre-included headers, definitions and a precompiled header
 * named among extra_options (NVRTC's spellings, joined or as two words). */
static void read_options(scan *s, const char ***pre, size_t *npre)
{
    const cuabi_program_options *o = s->o;
    for (size_t i = 0; i < o->num_include_paths; i++)
        s->dirs[s->ndirs++] = o->include_paths[i];
    for (size_t i = 0; i < o->num_defines; i++)
        option_define(s, o->defines[i]);
    for (size_t i = 0; i < o->num_extra_options; i++) {
        const char *x = o->extra_options[i];
        const char *nx = i + 1 < o->num_extra_options ? o->extra_options[i + 1] : NULL;
        if (!strcmp(x, "-I") && nx)
            s->dirs[s->ndirs++] = nx, i++;
        else if (!strncmp(x, "-I", 2))
            s->dirs[s->ndirs++] = x + 2;
        else if (!strncmp(x, "--include-path=", 15))
            s->dirs[s->ndirs++] = x + 15;
        else if (!strcmp(x, "-include") && nx)
            (*pre)[(*npre)++] = nx, i++;
        else if (!strncmp(x, "-include=", 9))
            (*pre)[(*npre)++] = x + 9;
        else if (!strncmp(x, "--pre-include=", 14))
            (*pre)[(*npre)++] = x + 14;
        else if (!strcmp(x, "-D") && nx)
            option_define(s, nx), i++;
        else if (!strncmp(x, "-D", 2))
            option_define(s, x + 2);
        else if (!strncmp(x, "--define-macro=", 15))
            option_define(s, x + 15);
        else if (!strncmp(x, "--use-pch=", 10) && !try_file(s, x + 10, false))
            event(s, 'A', x + 10, NULL, NULL, 0);
    }
}

static bool starts(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && !memcmp(p, word, n);
}

/* Whether a text could name a file: a '#' followed by include / import,
 * or by if / elif on a line with __has_include; a "%:" digraph or a
 * continued line (either could hide one). memchr only: this runs on every
 * compile, in-memory hits included, and glibc's memmem is byte by byte. */
static bool names_a_file(const char *text, size_t size)
{
    const char *end = text + size;
    for (const char *p = text; (p = memchr(p, '#', (size_t)(end - p))); p++) {
        const char *q = skip_space(p + 1, end);
        if (starts(q, end, "include") || starts(q, end, "import"))
            return true;
        if (starts(q, end, "if") || starts(q, end, "elif")) {
            const char *nl = memchr(q, '\n', (size_t)(end - q));
            if (memmem(q, (size_t)((nl ? nl : end) - q), "__has_include", 13))
                return true;
        }
    }
    for (const char *p = text; (p = memchr(p, '\\', (size_t)(end - p))); p++)
        if ((end - p > 1 && p[1] == '\n') || (end - p > 2 && p[1] == '\r' && p[2] == '\n'))
            return true;
    for (const char *p = text; (p = memchr(p, '%', (size_t)(end - p))); p++)
        if (end - p > 1 && p[1] == ':')
            return true;
    return false;
}

/* Whether anything in the compile could name a file: a text that could
 * (the source or an in-memory header), or a file-naming option. Cheap
 * (memmem). */
static bool may_include(const char *source, size_t size, const cuabi_program_options *o)
{
    if (names_a_file(source, size))
        return true;
    for (size_t i = 0; i < o->num_headers; i++)
        if (names_a_file(o->header_contents[i], strlen(o->header_contents[i])))
            return true;
    for (size_t i = 0; i < o->num_extra_options; i++) {
        const char *x = o->extra_options[i];
        if (!strncmp(x, "-include", 8) || !strncmp(x, "--pre-include=", 14) ||
            !strncmp(x, "--use-pch=", 10))
            return true;
    }
    return false;
}

static void scan_free(scan *s)
{
    for (size_t i = 0; i < s->nqueue; i++) {
        free(s->queue[i].dir);
        free(s->queue[i].shown);
    }
    for (size_t i = 0; i < s->npend; i++) {
        free(s->pend[i].macro);
        free(s->pend[i].dir);
        free(s->pend[i].shown);
    }
    for (size_t i = 0; i < s->ndefs; i++) {
        free(s->defs[i].name);
        free(s->defs[i].value);
    }
    free(s->queue);
    free(s->pend);
    free(s->defs);
    free(s->seen);
    free(s->dirs);
}

static void run(scan *s, const char *name, const char *source, size_t size)
{
    const cuabi_program_options *o = s->o;
    size_t nx = o->num_extra_options;
    const char **pre = malloc((nx + 1) * sizeof *pre);
    s->dirs = malloc((o->num_include_paths + nx + 1) * sizeof *s->dirs);
    size_t npre = 0;
    if (!pre || !s->dirs) {
        free(pre);
        s->oom = true;
        return;
    }
    read_options(s, &pre, &npre);
    const unit *main_unit = text_unit(source, size);
    if (!main_unit) {
        s->oom = true;
    } else {
        /* NVRTC reads pre-included headers from the working directory,
         * then the include paths; then the source. */
        for (size_t i = 0; i < npre; i++)
            resolve(s, INC_QUOTE, pre[i], ".");
        enqueue(s, main_unit, name, name);
    }
    free(pre);
    drain(s);
    /* Macros: expand with every definition seen; what they reach may
     * define more, so go round while something new is resolved. */
    bool progress = true;
    while (progress && !s->unresolved && !s->oom) {
        progress = false;
        size_t before = s->nqueue;
        for (size_t i = 0; i < s->npend; i++)
            if (!s->pend[i].done && expand(s, s->pend[i].macro, s->pend[i].dir, 0))
                s->pend[i].done = progress = true;
        for (size_t i = before; i < s->nqueue && !s->unresolved && !s->oom; i++)
            scan_unit(s, &s->queue[i]);
    }
    for (size_t i = 0; i < s->npend && !s->unresolved; i++)
        if (!s->pend[i].done)
            unresolved(s, "%s has `#include %s`, and the scan saw no definition of it as "
                       "\"file\" or <file>", s->pend[i].shown, s->pend[i].macro);
}

/* One scan of a compile (digest and/or visits); *result as below. */
static cuabi_status scan_compile(scan *s, int *result, uint8_t digest[16], const char *name,
                                 const char *source, size_t size)
{
    *result = CUABI__INCLUDES_NONE;
    if (s->why_cap)
        s->why[0] = '\0';
    if (!may_include(source, size, s->o))
        return CUABI_SUCCESS;
    XXH3_INITSTATE(&s->st);
    XXH3_128bits_reset(&s->st);
    pthread_mutex_lock(&mem.lock);
    if (mem.ntexts > MAX_TEXTS || mem.nfiles > MAX_FILES)
        forget_all(); /* nothing of theirs is in use between scans */
    mem.scan++;
    run(s, name ? name : "program.cu", source, size);
    pthread_mutex_unlock(&mem.lock);
    if (s->oom) {
        scan_free(s);
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "cuabi_program_compile: out of memory "
                            "scanning the includes");
    }
    if (s->stopped) {
        *result = CUABI__INCLUDES_STOPPED;
    } else if (s->unresolved) {
        *result = CUABI__INCLUDES_UNRESOLVED;
    } else if (s->any) {
        if (digest) {
            XXH128_canonical_t c;
            XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&s->st));
            memcpy(digest, c.digest, 16);
        }
        *result = CUABI__INCLUDES_HASHED;
    }
    scan_free(s);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__includes_digest(int *result, uint8_t digest[16], const char *name,
                                    const char *source, size_t size,
                                    const cuabi_program_options *o, char *why, size_t why_cap)
{
    static const cuabi_program_options defaults = CUABI_PROGRAM_OPTIONS_INIT;
    scan s = { .o = o ? o : &defaults, .why = why, .why_cap = why_cap };
    return scan_compile(&s, result, digest, name, source, size);
}

cuabi_status cuabi__includes_visit(int *result, const char *name, const char *source,
                                   size_t size, const cuabi_program_options *o,
                                   int (*visit)(const char *path, void *ctx), void *ctx,
                                   char *why, size_t why_cap)
{
    static const cuabi_program_options defaults = CUABI_PROGRAM_OPTIONS_INIT;
    scan s = { .o = o ? o : &defaults, .why = why, .why_cap = why_cap, .visit = visit,
               .visit_ctx = ctx };
    return scan_compile(&s, result, NULL, name, source, size);
}
