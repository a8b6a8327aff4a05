/* The compile cache: an in-memory layer in front of a directory of entry
 * files that several processes share.
 *
 * Entry file "<32 hex key>.bin":
 *   header (64 bytes, little-endian host order):
 *     0  magic "CUABICE\0"       8  u32 format   12 u32 code type
 *     16 u64 payload bytes       24 key[16]      40 XXH3-128 of the payload[16]
 *     56 u32 number of names     60 u32 flags (CUABI__ENTRY_LINKED)
 *   payload: blobs, each u64 length + bytes: data, log, then per name the
 *   expression and its lowered name, then the kernels' PTX signatures
 *   (param_types.h; empty when unknown), then a second log (a link's error
 *   log; empty when none).
 * Files are written to a temp file in the same directory and renamed into
 * place, so readers see either nothing or a whole file; several writers of
 * one key each rename a complete file and the last one wins. The checksum
 * catches truncation and bit flips: a bad file is removed and reported as a
 * miss, so the caller compiles and stores it again.
 * Entry files are hostile input (issue 29): each is opened as every file
 * is (util/file.h: no symbolic link followed, a FIFO refused, never waited
 * on), used only when it is this user's own (owner and mode; the directory
 * must be this user's and writable by no one else unless sticky), and its
 * header — magic, format, key, and the payload size it claims, at most
 * CUABI__CACHE_MAX_ENTRY and exactly the file's — is checked before the rest
 * is read. Verify removes only files proven bad and reports the others.
 * The LRU order is the files' mtime, refreshed on every disk hit.
 * The memory layer keeps each entry as a shared, immutable result
 * (codeblob.h): a memory hit hands out a new reference, nothing copied,
 * and dropping an entry leaves the results already handed out alone. */
#include "compile/cache.h"
#include "platform/libident.h"
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define HEADER_SIZE 64
#define DEFAULT_LIMIT ((uint64_t)1 << 30)
#define MEMORY_LIMIT ((size_t)256 << 20)
#define NBUCKETS 1024
#define STALE_TEMP_SECONDS 600

static const char magic[8] = "CUABICE";

/* ------------------------------------------------------------ strings */

void cuabi__str_addn(cuabi__str *b, const char *text, size_t n)
{
    if (!b)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap); /* best effort: no error recorded */
        if (!s)
            return;
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, text, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void cuabi__str_add(cuabi__str *b, const char *fmt, ...)
{
    char buf[1024];
    if (!b)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        cuabi__str_addn(b, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void cuabi__str_free(cuabi__str *b)
{
    free(b->s);
    *b = (cuabi__str){ 0 };
}

/* ------------------------------------------------------------ entries */

void cuabi__cache_entry_clear(cuabi__cache_entry *e)
{
    for (size_t i = 0; i < e->num_names; i++) {
        if (e->exprs)
            cuabi__free(e->exprs[i]);
        if (e->lowered)
            cuabi__free(e->lowered[i]);
    }
    cuabi__free(e->exprs);
    cuabi__free(e->lowered);
    cuabi__free(e->data);
    cuabi__free(e->log);
    cuabi__free(e->signatures);
    cuabi__free(e->log2);
    *e = (cuabi__cache_entry){ 0 };
}

/* ---------------------------------------------------------------- keys */

_Static_assert(sizeof(XXH3_state_t) <= sizeof(cuabi__key_state) &&
                   _Alignof(XXH3_state_t) <= _Alignof(cuabi__key_state),
               "cuabi__key_state is too small for this xxHash's XXH3_state_t");

static XXH3_state_t *xxh(cuabi__key_state *s) { return (XXH3_state_t *)(void *)s->opaque; }

void cuabi__key_begin(cuabi__key_state *s)
{
    XXH3_INITSTATE(xxh(s));
    XXH3_128bits_reset(xxh(s));
}

void cuabi__key_add(cuabi__key_state *s, const void *data, size_t size)
{
    uint64_t len = size;
    XXH3_128bits_update(xxh(s), &len, sizeof len);
    if (len)
        XXH3_128bits_update(xxh(s), data, size);
}

void cuabi__key_add_joined(cuabi__key_state *s, const char *head, const char *tail)
{
    size_t h = strlen(head), t = strlen(tail);
    uint64_t len = h + t;
    XXH3_128bits_update(xxh(s), &len, sizeof len);
    if (h)
        XXH3_128bits_update(xxh(s), head, h);
    if (t)
        XXH3_128bits_update(xxh(s), tail, t);
}

void cuabi__key_end(cuabi__key_state *s, cuabi__cache_key *out)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xxh(s)));
    memcpy(out->b, c.digest, sizeof out->b);
}

void cuabi__cache_key_compute(cuabi__cache_key *out, const cuabi__bytes *fields, size_t n)
{
    cuabi__key_state s;
    cuabi__key_begin(&s);
    for (size_t i = 0; i < n; i++)
        cuabi__key_add(&s, fields[i].data, fields[i].size);
    cuabi__key_end(&s, out);
}

void cuabi__cache_key_hex(char out[33], const cuabi__cache_key *key)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[key->b[i] >> 4];
        out[2 * i + 1] = hex[key->b[i] & 15];
    }
    out[32] = '\0';
}

static void checksum(uint8_t out[16], const void *data, size_t size)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, size));
    memcpy(out, c.digest, 16);
}

/* --------------------------------------------------------------- state */

typedef struct mem_entry mem_entry;
struct mem_entry {
    cuabi__cache_key key;
    cuabi__codeblob *blob;      /* a reference of the layer's own */
    size_t bytes;
    mem_entry *next_in_bucket;
    mem_entry *newer, *older;   /* LRU list */
};

static struct {
    pthread_mutex_t lock;
    bool loaded;                /* environment read */
    int enabled;
    char *dir;                  /* NULL until resolved */
    uint64_t limit;
    uint64_t memory_hits, disk_hits, misses, stores, store_failures, corrupt, evictions;
    mem_entry *buckets[NBUCKETS];
    mem_entry *newest, *oldest;
    size_t mem_entries, mem_bytes;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Read the environment once (under the lock). */
static void load_env(void)
{
    if (g.loaded)
        return;
    g.loaded = true;
    const char *e = getenv("CUABI_CACHE");
    g.enabled = !(e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "false")));
    g.limit = DEFAULT_LIMIT;
    const char *s = getenv("CUABI_CACHE_SIZE");
    if (s && *s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end == '\0')
            g.limit = v;
    }
}

/* The default directory, or NULL with the reason in `notes`. Caller frees. */
static char *default_dir(cuabi__str *notes)
{
    const char *d = getenv("CUABI_CACHE_DIR");
    char *out = NULL;
    if (d && *d)
        out = cuabi__strdup(d);
    else if ((d = getenv("XDG_CACHE_HOME")) && *d == '/') {
        if (asprintf(&out, "%s/cuabi", d) < 0)
            out = NULL;
    } else if ((d = getenv("HOME")) && *d) {
        if (asprintf(&out, "%s/.cache/cuabi", d) < 0)
            out = NULL;
    } else if (notes)
        cuabi__str_add(notes, "cuabi cache: no directory (CUABI_CACHE_DIR, XDG_CACHE_HOME "
                              "and HOME are unset); using memory only\n");
    return out;
}

/* The directory in use (under the lock); NULL when none can be named. */
static const char *current_dir(cuabi__str *notes)
{
    load_env();
    if (!g.dir)
        g.dir = default_dir(notes);
    return g.dir;
}

bool cuabi__cache_enabled(void)
{
    pthread_mutex_lock(&g.lock);
    load_env();
    bool on = g.enabled;
    pthread_mutex_unlock(&g.lock);
    return on;
}

/* ------------------------------------------------------- memory layer */

static mem_entry **bucket(const cuabi__cache_key *k)
{
    uint32_t h;
    memcpy(&h, k->b, sizeof h);
    return &g.buckets[h % NBUCKETS];
}

static void lru_unlink(mem_entry *m)
{
    if (m->newer) m->newer->older = m->older; else g.newest = m->older;
    if (m->older) m->older->newer = m->newer; else g.oldest = m->newer;
    m->newer = m->older = NULL;
}

static void lru_push(mem_entry *m)
{
    m->older = g.newest;
    m->newer = NULL;
    if (g.newest) g.newest->newer = m; else g.oldest = m;
    g.newest = m;
}

static mem_entry *mem_find(const cuabi__cache_key *k)
{
    for (mem_entry *m = *bucket(k); m; m = m->next_in_bucket)
        if (!memcmp(m->key.b, k->b, sizeof k->b))
            return m;
    return NULL;
}

static void mem_remove(mem_entry *m)
{
    mem_entry **p = bucket(&m->key);
    while (*p != m)
        p = &(*p)->next_in_bucket;
    *p = m->next_in_bucket;
    lru_unlink(m);
    g.mem_entries--;
    g.mem_bytes -= m->bytes;
    cuabi__codeblob_release(m->blob); /* results handed out keep theirs */
    cuabi__free(m);
}

static void mem_clear(void)
{
    while (g.oldest)
        mem_remove(g.oldest);
}

/* Keep a reference to `b` (under the lock); silently skipped when memory
 * is short. */
static void mem_insert(const cuabi__cache_key *k, cuabi__codeblob *b)
{
    if (mem_find(k))
        return;
    mem_entry *m = cuabi__calloc(1, sizeof *m);
    if (!m) {
        cuabi_error_clear();
        return;
    }
    m->key = *k;
    m->blob = cuabi__codeblob_retain(b);
    m->bytes = b->bytes;
    mem_entry **head = bucket(k);
    m->next_in_bucket = *head;
    *head = m;
    lru_push(m);
    g.mem_entries++;
    g.mem_bytes += m->bytes;
    while (g.mem_bytes > MEMORY_LIMIT && g.oldest && g.oldest != m)
        mem_remove(g.oldest);
}

/* --------------------------------------------------------- directory */

static char *entry_path_in(const char *dir, const cuabi__cache_key *key)
{
    char hex[33], *p;
    cuabi__cache_key_hex(hex, key);
    if (asprintf(&p, "%s/%s.bin", dir, hex) < 0)
        return NULL;
    return p;
}

char *cuabi__cache_entry_path(const cuabi__cache_key *key)
{
    pthread_mutex_lock(&g.lock);
    const char *dir = current_dir(NULL);
    char *p = dir ? entry_path_in(dir, key) : NULL;
    pthread_mutex_unlock(&g.lock);
    return p;
}

static char *snapshot(uint64_t *limit, cuabi__str *notes);

/* mkdir -p with mode 0700 for what is created. */
static int make_dirs(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
    char *copy = strdup(path);
    if (!copy)
        return -1;
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
            free(copy);
            return -1;
        }
        *p = '/';
    }
    int r = mkdir(copy, 0700);
    free(copy);
    return r != 0 && errno != EEXIST ? -1 : 0;
}

/* Whether `dir` may hold this user's cache. It must be a directory owned by
 * the effective user, and others must not be able to add files to it unless
 * it is sticky (util/file.h cuabi__dir_owned): entries are code this
 * process will run, and a directory someone else controls could hand it
 * theirs (pip refuses such a cache the same way). In a sticky shared
 * directory each file is checked to be this user's own before it is read.
 * A missing directory is created (0700) when `create`, else it is simply
 * empty. Returns 0 usable, 1 missing (not created), -1 unusable with the
 * reason in `why`. */
static int check_dir(const char *dir, bool create, char *why, size_t cap)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if ((errno == ENOENT || errno == ENOTDIR) && !create)
            return 1;
        if (errno == ENOENT && make_dirs(dir) == 0 && stat(dir, &st) == 0)
            goto exists;
        snprintf(why, cap, "cannot %s %s: %s", errno == ENOENT || create ? "create" : "read",
                 dir, strerror(errno));
        return -1;
    }
exists:
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, cap, "%s is not a directory", dir);
        return -1;
    }
    if (cuabi__dir_owned(&st, geteuid(), dir, why, cap) < 0) {
        size_t len = strlen(why);
        snprintf(why + len, cap - len, "%s", st.st_uid != geteuid()
                 ? ": cuabi does not use a cache directory someone else controls; set "
                   "CUABI_CACHE_DIR to one of your own"
                 : ": cuabi does not use a cache directory others may put files in (chmod "
                   "go-w it, make it sticky like /tmp, or set CUABI_CACHE_DIR to one of your "
                   "own)");
        return -1;
    }
    return 0;
}

cuabi_status cuabi__cache_dir_check(const char *caller)
{
    uint64_t limit;
    cuabi__str why_none = { 0 };
    char why[512], *dir = snapshot(&limit, &why_none);
    cuabi_status st = CUABI_SUCCESS;
    if (!dir)
        st = cuabi__error(CUABI_ERROR_CACHE, "%s: no cache directory: set CUABI_CACHE_DIR, "
                          "XDG_CACHE_HOME or HOME, or call cuabi_cache_set_directory()", caller);
    else if (check_dir(dir, true, why, sizeof why) != 0)
        st = cuabi__error(CUABI_ERROR_CACHE, "%s: the cache directory cannot be used: %s",
                          caller, why);
    cuabi__str_free(&why_none);
    free(dir);
    return st;
}

char *cuabi__cache_record_dir(void)
{
    uint64_t limit;
    pthread_mutex_lock(&g.lock);
    load_env();
    bool on = g.enabled;
    pthread_mutex_unlock(&g.lock);
    char why[512], *dir = on ? snapshot(&limit, NULL) : NULL;
    if (dir && check_dir(dir, true, why, sizeof why) != 0) {
        free(dir);
        dir = NULL;
    }
    return dir;
}

static bool is_entry_name(const char *n)
{
    size_t len = strlen(n);
    if (len != 36 || strcmp(n + 32, ".bin"))
        return false;
    for (int i = 0; i < 32; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
            return false;
    return true;
}

/* What reading an entry file found. */
enum {
    ENTRY_OK,           /* read: its header is right, the payload is yet to check */
    ENTRY_MISSING,      /* no such file */
    ENTRY_BAD,          /* proven bad: not a regular file, not an entry, truncated, ... */
    ENTRY_OTHER_FORMAT, /* another cuabi's entry */
    ENTRY_LEFT,         /* not checked: unreadable, out of memory, not this user's */
};

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Read the entry file at `path` (for `key`): opened as every file is, never
 * through a symbolic link (util/file.h), used only when it is this user's
 * own, and its header checked — magic, format, key, the payload size it
 * claims (at most CUABI__CACHE_MAX_ENTRY, and exactly what the file holds)
 * — before the rest is read, so a 20 GB sparse file costs a stat and 64
 * bytes. ENTRY_OK with the whole file in *buf (malloc'ed); else why.
 * *file_size is the file's size (0 when unknown). */
static int read_entry(const char *path, const cuabi__cache_key *key, uint8_t **buf,
                      size_t *size, uint64_t *file_size, char *why, size_t cap)
{
    *buf = NULL;
    *size = 0;
    *file_size = 0;
    struct stat st;
    int fd = cuabi__file_open(path, CUABI__FILE_NOFOLLOW, UINT64_MAX, &st, why, cap);
    if (fd == CUABI__FILE_ERR_OPEN)
        return errno == ENOENT ? ENTRY_MISSING : ENTRY_LEFT;
    if (fd < 0) {
        struct stat lst;
        if (lstat(path, &lst) == 0)
            *file_size = (uint64_t)lst.st_size;
        return ENTRY_BAD;
    }
    *file_size = (uint64_t)st.st_size;
    int r = ENTRY_BAD;
    uint8_t h[HEADER_SIZE];
    uint32_t format;
    uint64_t payload;
    if (cuabi__file_owned(&st, geteuid(), why, cap) != 0) {
        r = ENTRY_LEFT;
    } else if ((uint64_t)st.st_size < HEADER_SIZE ||
               pread(fd, h, HEADER_SIZE, 0) != (ssize_t)HEADER_SIZE) {
        snprintf(why, cap, "truncated header");
    } else if (memcmp(h, magic, 8)) {
        snprintf(why, cap, "not a cuabi cache entry");
    } else if (memcpy(&format, h + 8, 4), format != CUABI__CACHE_FORMAT) {
        snprintf(why, cap, "unknown format version");
        r = format ? ENTRY_OTHER_FORMAT : ENTRY_BAD;
    } else if ((payload = u64_at(h + 16)) > CUABI__CACHE_MAX_ENTRY) {
        snprintf(why, cap, "claims a payload of %llu bytes, more than the %llu an entry may "
                 "hold", (unsigned long long)payload,
                 (unsigned long long)CUABI__CACHE_MAX_ENTRY);
    } else if (payload != (uint64_t)st.st_size - HEADER_SIZE) {
        snprintf(why, cap, "truncated or padded payload");
    } else if (memcmp(h + 24, key->b, 16)) {
        snprintf(why, cap, "key does not match the file name");
    } else {
        char *data;
        size_t n;
        uint64_t want = (uint64_t)st.st_size;
        if (cuabi__file_read_fd(fd, want, want, false, &data, &n) != 0) {
            int err = errno;
            snprintf(why, cap, "%s", err == EFBIG ? "changed size while read"
                                     : err == ENOMEM ? "out of memory reading it"
                                                     : strerror(err));
            r = err == EFBIG ? ENTRY_BAD : ENTRY_LEFT;
        } else if (n != want) {
            free(data);
            snprintf(why, cap, "changed size while read");
        } else {
            *buf = (uint8_t *)data;
            *size = n;
            r = ENTRY_OK;
        }
    }
    close(fd);
    return r;
}

/* Blob reader over the payload. */
typedef struct reader { const uint8_t *p, *end; } reader;
static bool read_blob(reader *r, const uint8_t **data, uint64_t *len)
{
    if ((size_t)(r->end - r->p) < sizeof *len)
        return false;
    memcpy(len, r->p, sizeof *len);
    r->p += sizeof *len;
    if (*len > (uint64_t)(r->end - r->p))
        return false;
    *data = r->p;
    r->p += *len;
    return true;
}

static char *blob_string(const uint8_t *d, uint64_t len)
{
    char *s = cuabi__malloc(len + 1);
    if (s) {
        memcpy(s, d, len);
        s[len] = '\0';
    }
    return s;
}

/* Parse an entry file; returns NULL on success or why it is bad. On OOM
 * sets *oom. */
static const char *parse_entry(const uint8_t *buf, size_t size, const cuabi__cache_key *key,
                               cuabi__cache_entry *e, bool *oom)
{
    uint32_t format, type, nnames, flags;
    uint64_t payload;
    uint8_t sum[16];
    if (size < HEADER_SIZE)
        return "truncated header";
    if (memcmp(buf, magic, 8))
        return "not a cuabi cache entry";
    memcpy(&format, buf + 8, 4);
    memcpy(&type, buf + 12, 4);
    memcpy(&payload, buf + 16, 8);
    memcpy(&nnames, buf + 56, 4);
    memcpy(&flags, buf + 60, 4);
    if (format != CUABI__CACHE_FORMAT)
        return "unknown format version";
    if (payload != size - HEADER_SIZE)
        return "truncated or padded payload";
    if (memcmp(buf + 24, key->b, 16))
        return "key does not match the file name";
    checksum(sum, buf + HEADER_SIZE, payload);
    if (memcmp(sum, buf + 40, 16))
        return "checksum mismatch";
    reader r = { buf + HEADER_SIZE, buf + size };
    const uint8_t *d;
    uint64_t len;
    *e = (cuabi__cache_entry){ .type = (cuabi_code_type)type, .flags = flags };
    if (nnames > payload / 16)
        return "name count out of range";
    if (!read_blob(&r, &d, &len))
        return "bad data blob";
    e->data = cuabi__malloc(len ? len : 1);
    if (!e->data)
        goto oom;
    memcpy(e->data, d, len);
    e->size = len;
    if (!read_blob(&r, &d, &len))
        return "bad log blob";
    if (!(e->log = blob_string(d, len)))
        goto oom;
    if (nnames) {
        e->exprs = cuabi__calloc(nnames, sizeof(char *));
        e->lowered = cuabi__calloc(nnames, sizeof(char *));
        if (!e->exprs || !e->lowered)
            goto oom;
    }
    e->num_names = nnames;
    for (uint32_t i = 0; i < nnames; i++) {
        if (!read_blob(&r, &d, &len))
            return "bad name blob";
        if (!(e->exprs[i] = blob_string(d, len)))
            goto oom;
        if (!read_blob(&r, &d, &len))
            return "bad name blob";
        if (!(e->lowered[i] = blob_string(d, len)))
            goto oom;
    }
    if (!read_blob(&r, &d, &len))
        return "bad signature blob";
    if (len && !(e->signatures = blob_string(d, len)))
        goto oom;
    if (!read_blob(&r, &d, &len))
        return "bad second log blob";
    if (len && !(e->log2 = blob_string(d, len)))
        goto oom;
    if (r.p != r.end)
        return "trailing bytes";
    return NULL;
oom:
    *oom = true;
    return "out of memory";
}

/* Look in the directory. Returns 1 hit, 0 miss, -1 out of memory. */
static int disk_lookup(const char *dir, const cuabi__cache_key *key, cuabi__cache_entry *e,
                       cuabi__str *notes)
{
    char why[512];
    int usable = check_dir(dir, false, why, sizeof why);
    if (usable != 0) {
        if (usable < 0)
            cuabi__str_add(notes, CUABI__NOTE_NOT_USED "%s\n", why);
        return 0;
    }
    char *path = entry_path_in(dir, key);
    if (!path)
        return 0;
    uint8_t *buf;
    size_t size;
    uint64_t file_size;
    int r = read_entry(path, key, &buf, &size, &file_size, why, sizeof why);
    if (r == ENTRY_MISSING || r == ENTRY_LEFT) {
        if (r == ENTRY_LEFT)
            cuabi__str_add(notes, "cuabi cache: cannot use %s: %s\n", path, why);
        free(path);
        return 0;
    }
    bool oom = false;
    const char *bad = r == ENTRY_OK ? parse_entry(buf, size, key, e, &oom) : why;
    free(buf);
    if (bad) {
        cuabi__cache_entry_clear(e);
        if (oom) {
            free(path);
            return -1;
        }
        cuabi__str_add(notes, "cuabi cache: ignored and removed corrupt entry %s (%s)\n",
                       path, bad);
        unlink(path);
        pthread_mutex_lock(&g.lock);
        g.corrupt++;
        pthread_mutex_unlock(&g.lock);
        free(path);
        return 0;
    }
    utimensat(AT_FDCWD, path, NULL, 0); /* LRU: mark as just used */
    free(path);
    return 1;
}

static bool write_all(int fd, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        size -= (size_t)w;
    }
    return true;
}

static void put_blob(cuabi__str *b, const void *data, uint64_t len)
{
    cuabi__str_addn(b, (const char *)&len, sizeof len);
    cuabi__str_addn(b, data, len);
}

/* Serialise a result; false when out of memory. */
static bool serialise(cuabi__str *out, const cuabi__cache_key *key, const cuabi__codeblob *b)
{
    uint8_t header[HEADER_SIZE] = { 0 };
    cuabi__str_addn(out, (const char *)header, sizeof header);
    put_blob(out, b->data, b->size);
    put_blob(out, b->log, strlen(b->log));
    for (size_t i = 0; i < b->num_names; i++) {
        put_blob(out, b->names[i].expression, strlen(b->names[i].expression));
        put_blob(out, b->names[i].lowered, strlen(b->names[i].lowered));
    }
    size_t sigs = b->signatures ? strlen(b->signatures) : 0;
    put_blob(out, sigs ? b->signatures : "", sigs);
    size_t log2 = b->log2 ? strlen(b->log2) : 0;
    put_blob(out, log2 ? b->log2 : "", log2);
    size_t expect = HEADER_SIZE + 32 + b->size + strlen(b->log) + sigs + log2;
    for (size_t i = 0; i < b->num_names; i++)
        expect += 16 + strlen(b->names[i].expression) + strlen(b->names[i].lowered);
    if (out->len != expect)
        return false;
    uint8_t *h = (uint8_t *)out->s;
    uint32_t format = CUABI__CACHE_FORMAT, type = (uint32_t)b->type, n = (uint32_t)b->num_names;
    uint64_t payload = out->len - HEADER_SIZE;
    memcpy(h, magic, 8);
    memcpy(h + 8, &format, 4);
    memcpy(h + 12, &type, 4);
    memcpy(h + 16, &payload, 8);
    memcpy(h + 24, key->b, 16);
    checksum(h + 40, h + HEADER_SIZE, payload);
    memcpy(h + 56, &n, 4);
    memcpy(h + 60, &b->flags, 4);
    return true;
}

/* Write the entry atomically. Returns 0, or -1 with the reason in notes. */
static int disk_store(const char *dir, const cuabi__cache_key *key, const cuabi__codeblob *b,
                      cuabi__str *notes)
{
    char why[512];
    if (check_dir(dir, true, why, sizeof why) != 0) {
        cuabi__str_add(notes, CUABI__NOTE_NOT_STORED "%s\n", why);
        return -1;
    }
    char hex[33], *tmp = NULL, *path = entry_path_in(dir, key);
    cuabi__cache_key_hex(hex, key);
    cuabi__str file = { 0 };
    int rc = -1;
    if (!path || asprintf(&tmp, "%s/tmp-%s-XXXXXX", dir, hex) < 0) {
        tmp = NULL;
        goto out;
    }
    if (!serialise(&file, key, b)) {
        cuabi__str_add(notes, CUABI__NOTE_NOT_STORED "out of memory\n");
        goto out;
    }
    if (file.len - HEADER_SIZE > CUABI__CACHE_MAX_ENTRY) { /* no reader would take it */
        cuabi__str_add(notes, CUABI__NOTE_NOT_STORED "the entry would hold %zu bytes, more "
                       "than the %llu an entry may\n", file.len - HEADER_SIZE,
                       (unsigned long long)CUABI__CACHE_MAX_ENTRY);
        goto out;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        cuabi__str_add(notes, CUABI__NOTE_NOT_STORED "cannot write in %s: %s\n", dir,
                       strerror(errno));
        goto out;
    }
    bool ok = write_all(fd, file.s, file.len);
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            err = errno;
        cuabi__str_add(notes, CUABI__NOTE_NOT_STORED "cannot write %s: %s\n", path,
                       strerror(err));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    cuabi__str_free(&file);
    free(tmp);
    free(path);
    return rc;
}

/* One directory entry for listing and eviction (its lstat: a symbolic
 * link is a link, never what it points to). */
typedef struct file_info {
    char *path;
    char name[40];
    uint64_t size;
    struct timespec mtime;
    mode_t mode;
    uid_t uid;
} file_info;

/* A regular file of this user's own: one that counts, and may be evicted. */
static bool ours(const file_info *f)
{
    char why[128];
    struct stat st = { .st_mode = f->mode, .st_uid = f->uid };
    return S_ISREG(f->mode) && cuabi__file_owned(&st, geteuid(), why, sizeof why) == 0;
}

static int by_mtime(const void *a, const void *b)
{
    const file_info *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void free_files(file_info *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(f[i].path);
    free(f);
}

/* Files under an entry's name in `dir`, oldest first, whatever they are
 * (lstat: links are not followed); *bytes counts this user's regular ones.
 * Removes stale temp files on the way. Returns -1 when the directory cannot
 * be read (a missing one is empty). */
static int scan_dir(const char *dir, file_info **out, size_t *count, uint64_t *bytes)
{
    *out = NULL;
    *count = 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    file_info *files = NULL;
    size_t n = 0, cap = 0;
    time_t now = time(NULL);
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        bool entry = is_entry_name(de->d_name);
        bool temp = !strncmp(de->d_name, "tmp-", 4);
        if (!entry && !temp)
            continue;
        struct stat st;
        char *path;
        if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
            rc = -1;
            break;
        }
        if (lstat(path, &st) != 0 || (temp && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))) {
            free(path);
            continue;
        }
        if (temp) { /* left by a writer that died */
            if (now - st.st_mtime > STALE_TEMP_SECONDS)
                unlink(path);
            free(path);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            file_info *f = realloc(files, cap * sizeof *f);
            if (!f) {
                free(path);
                rc = -1;
                break;
            }
            files = f;
        }
        files[n] = (file_info){ .path = path, .size = (uint64_t)st.st_size, .mtime = st.st_mtim,
                                .mode = st.st_mode, .uid = st.st_uid };
        snprintf(files[n].name, sizeof files[n].name, "%s", de->d_name);
        if (ours(&files[n]))
            *bytes += (uint64_t)st.st_size;
        n++;
    }
    closedir(d);
    if (rc != 0) {
        free_files(files, n);
        errno = ENOMEM;
        return -1;
    }
    if (n)
        qsort(files, n, sizeof *files, by_mtime);
    *out = files;
    *count = n;
    return 0;
}

/* Remove least recently used entries until the directory fits the limit,
 * sparing `keep` (the entry just written). */
static void evict(const char *dir, uint64_t limit, const cuabi__cache_key *keep)
{
    file_info *files;
    size_t n;
    uint64_t bytes;
    if (!limit || scan_dir(dir, &files, &n, &bytes) != 0)
        return;
    char keep_name[40];
    cuabi__cache_key_hex(keep_name, keep);
    strcat(keep_name, ".bin");
    uint64_t removed = 0;
    for (size_t i = 0; i < n && bytes > limit; i++) {
        if (!strcmp(files[i].name, keep_name) || !ours(&files[i]))
            continue;
        if (unlink(files[i].path) == 0) {
            bytes -= files[i].size;
            removed++;
        }
    }
    free_files(files, n);
    pthread_mutex_lock(&g.lock);
    g.evictions += removed;
    pthread_mutex_unlock(&g.lock);
}

/* ------------------------------------------------------ lookup / store */

/* Snapshot of the settings, so the directory work runs unlocked. */
static char *snapshot(uint64_t *limit, cuabi__str *notes)
{
    pthread_mutex_lock(&g.lock);
    const char *dir = current_dir(notes);
    char *copy = dir ? strdup(dir) : NULL;
    *limit = g.limit;
    pthread_mutex_unlock(&g.lock);
    return copy;
}

/* A memory hit: a new reference to the kept result, nothing copied. */
static bool mem_lookup(const cuabi__cache_key *key, cuabi__codeblob **out)
{
    pthread_mutex_lock(&g.lock);
    mem_entry *m = mem_find(key);
    if (m) {
        *out = cuabi__codeblob_retain(m->blob);
        lru_unlink(m);
        lru_push(m);
        g.memory_hits++;
    }
    pthread_mutex_unlock(&g.lock);
    return m != NULL;
}

/* The directory's entry as a shared result: 1 hit, 0 miss, -1 out of memory. */
static int disk_result(const cuabi__cache_key *key, cuabi__codeblob **out, cuabi__str *notes)
{
    uint64_t limit;
    cuabi__cache_entry e = { 0 };
    char *dir = snapshot(&limit, notes);
    int r = dir ? disk_lookup(dir, key, &e, notes) : 0;
    free(dir);
    if (r == 1 && cuabi__codeblob_make(out, &e) != CUABI_SUCCESS)
        r = -1;
    cuabi__cache_entry_clear(&e);
    return r;
}

cuabi_status cuabi__cache_lookup(const cuabi__cache_key *key, cuabi__codeblob **out,
                                 int *where, cuabi__str *notes)
{
    *out = NULL;
    *where = 0;
    if (mem_lookup(key, out)) {
        *where = 1;
        return CUABI_SUCCESS;
    }
    int r = disk_result(key, out, notes);
    if (r < 0)
        return CUABI_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g.lock);
    if (r == 1) {
        g.disk_hits++;
        mem_insert(key, *out);
        *where = 2;
    } else {
        g.misses++;
    }
    pthread_mutex_unlock(&g.lock);
    return CUABI_SUCCESS;
}

void cuabi__cache_store(const cuabi__cache_key *key, cuabi__codeblob *b, cuabi__str *notes)
{
    pthread_mutex_lock(&g.lock);
    mem_insert(key, b);
    pthread_mutex_unlock(&g.lock);

    uint64_t limit;
    char *dir = snapshot(&limit, notes);
    if (!dir)
        return;
    int r = disk_store(dir, key, b, notes);
    pthread_mutex_lock(&g.lock);
    if (r == 0)
        g.stores++;
    else
        g.store_failures++;
    pthread_mutex_unlock(&g.lock);
    if (r == 0)
        evict(dir, limit, key);
    free(dir);
}

void cuabi__cache_reset_for_test(void)
{
    pthread_mutex_lock(&g.lock);
    mem_clear();
    free(g.dir);
    g.dir = NULL;
    g.loaded = false;
    g.memory_hits = g.disk_hits = g.misses = g.stores = 0;
    g.store_failures = g.corrupt = g.evictions = 0;
    pthread_mutex_unlock(&g.lock);
}

/* ------------------------------------------------------------ public */

CUABI_EXTERN(cuabi_status) cuabi_cache_set_directory(const char *path)
{
    CUABI__CHECK_ARG(!path || *path, "%s: path is empty (pass NULL for the default)", __func__);
    char *copy = NULL;
    if (path && !(copy = strdup(path)))
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of memory", __func__);
    pthread_mutex_lock(&g.lock);
    free(g.dir);
    g.dir = copy;
    if (!path)
        g.loaded = false; /* re-read the environment */
    load_env();
    mem_clear(); /* the memory layer mirrors one directory */
    pthread_mutex_unlock(&g.lock);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_get_directory(char *out, size_t *size)
{
    CUABI__CHECK_ARG(size, "%s: size is NULL", __func__);
    CUABI__CHECK_ARG(out || *size == 0, "%s: out is NULL but *size is %zu", __func__, *size);
    pthread_mutex_lock(&g.lock);
    const char *dir = current_dir(NULL);
    size_t need = dir ? strlen(dir) + 1 : 0;
    bool fits = dir && need <= *size;
    if (fits)
        memcpy(out, dir, need);
    pthread_mutex_unlock(&g.lock);
    if (!need)
        return cuabi__error(CUABI_ERROR_NOT_FOUND,
                            "%s: no cache directory: set CUABI_CACHE_DIR, XDG_CACHE_HOME or "
                            "HOME, or call cuabi_cache_set_directory()", __func__);
    size_t had = *size;
    *size = need;
    if (!fits)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL,
                            "%s: the directory needs %zu bytes, the buffer has %zu", __func__,
                            need, had);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_set_enabled(int enabled)
{
    CUABI__CHECK_ARG(enabled == 0 || enabled == 1, "%s: enabled must be 0 or 1, not %d",
                     __func__, enabled);
    pthread_mutex_lock(&g.lock);
    load_env();
    g.enabled = enabled;
    pthread_mutex_unlock(&g.lock);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_set_size_limit(uint64_t bytes)
{
    pthread_mutex_lock(&g.lock);
    load_env();
    g.limit = bytes;
    pthread_mutex_unlock(&g.lock);
    return CUABI_SUCCESS;
}

/* The directory for a public call that reads it (NULL when none can be
 * named), or CUABI_ERROR_CACHE when it is unusable (someone else's). */
static cuabi_status api_dir(char **out, const char *caller)
{
    uint64_t limit;
    char why[512];
    *out = snapshot(&limit, NULL);
    if (*out && check_dir(*out, false, why, sizeof why) < 0) {
        free(*out);
        *out = NULL;
        return cuabi__error(CUABI_ERROR_CACHE, "%s: %s", caller, why);
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_get_stats(cuabi_cache_stats *out)
{
    CUABI__CHECK_OPTS(out, "cuabi_cache_stats", CUABI_CACHE_STATS_VERSION, false);
    char *dir;
    cuabi_status bad = api_dir(&dir, __func__); /* the counters are filled all the same */
    file_info *files = NULL;
    size_t n = 0;
    uint64_t bytes = 0;
    int r = dir ? scan_dir(dir, &files, &n, &bytes) : 0;
    int err = errno;
    size_t usable = 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        usable += ours(&files[i]);
    free_files(files, n);
    pthread_mutex_lock(&g.lock);
    unsigned int version = out->version;
    *out = (cuabi_cache_stats){
        .version = version, .enabled = g.enabled, .memory_hits = g.memory_hits,
        .disk_hits = g.disk_hits, .misses = g.misses, .stores = g.stores,
        .store_failures = g.store_failures, .corrupt = g.corrupt, .evictions = g.evictions,
        .entries = usable, .bytes = bytes, .memory_entries = g.mem_entries,
        .memory_bytes = g.mem_bytes, .size_limit = g.limit,
    };
    pthread_mutex_unlock(&g.lock);
    cuabi_status st = bad;
    if (r != 0)
        st = cuabi__error(CUABI_ERROR_IO, "%s: cannot read the cache directory %s: %s",
                          __func__, dir, strerror(err));
    free(dir);
    return st;
}

/* Header facts of an entry file for listing, read as lookups read it (no
 * link followed, nothing blocking, this user's own files only): NULL, or
 * why it cannot be used (into `why`). Reads 64 bytes at most. */
static const char *peek_entry(const file_info *f, cuabi_cache_entry_info *info, char *why,
                              size_t cap)
{
    uint8_t h[HEADER_SIZE];
    struct stat st;
    if (!S_ISREG(f->mode)) { /* what the scan saw (lstat): say so without opening it */
        snprintf(why, cap, "%s, not a regular file", cuabi__file_kind(f->mode));
        return why;
    }
    int fd = cuabi__file_open(f->path, CUABI__FILE_NOFOLLOW, UINT64_MAX, &st, why, cap);
    if (fd < 0)
        return why;
    const char *bad = NULL;
    if (cuabi__file_owned(&st, geteuid(), why, cap) != 0)
        bad = why;
    else if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        bad = "truncated header";
    else if (memcmp(h, magic, 8))
        bad = "not a cuabi cache entry";
    close(fd);
    if (bad)
        return bad;
    uint32_t t, n, flags;
    memcpy(&t, h + 12, 4);
    memcpy(&n, h + 56, 4);
    memcpy(&flags, h + 60, 4);
    info->code_type = (cuabi_code_type)t;
    info->num_names = n;
    info->linked = (flags & CUABI__ENTRY_LINKED) != 0;
    return NULL;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_list(cuabi_cache_list_fn fn, void *payload)
{
    CUABI__CHECK_ARG(fn, "%s: fn is NULL", __func__);
    uint64_t bytes;
    char *dir;
    CUABI__TRY(api_dir(&dir, __func__));
    if (!dir)
        return CUABI_SUCCESS;
    file_info *files;
    size_t n;
    if (scan_dir(dir, &files, &n, &bytes) != 0) {
        cuabi_status st = cuabi__error(CUABI_ERROR_IO, "%s: cannot read the cache directory "
                                       "%s: %s", __func__, dir, strerror(errno));
        free(dir);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        cuabi_cache_entry_info info = CUABI_CACHE_ENTRY_INFO_INIT;
        char why[256];
        info.problem = peek_entry(&files[i], &info, why, sizeof why);
        memcpy(info.key, files[i].name, 32);
        info.key[32] = '\0';
        info.size = files[i].size;
        info.last_used = (int64_t)files[i].mtime.tv_sec;
        info.path = files[i].path;
        if (fn(&info, payload) != 0)
            break;
    }
    free_files(files, n);
    free(dir);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_clear(unsigned int flags)
{
    CUABI__CHECK_ARG(flags && !(flags & ~(unsigned)CUABI_CACHE_CLEAR_ALL),
                     "%s: flags 0x%x: use CUABI_CACHE_CLEAR_MEMORY, _DISK or _ALL", __func__,
                     flags);
    if (flags & CUABI_CACHE_CLEAR_MEMORY) {
        pthread_mutex_lock(&g.lock);
        mem_clear();
        pthread_mutex_unlock(&g.lock);
    }
    if (!(flags & CUABI_CACHE_CLEAR_DISK))
        return CUABI_SUCCESS;
    uint64_t bytes;
    char *dir;
    CUABI__TRY(api_dir(&dir, __func__));
    if (!dir)
        return CUABI_SUCCESS;
    file_info *files;
    size_t n;
    cuabi_status st = CUABI_SUCCESS;
    if (scan_dir(dir, &files, &n, &bytes) != 0) {
        st = cuabi__error(CUABI_ERROR_IO, "%s: cannot read the cache directory %s: %s",
                          __func__, dir, strerror(errno));
    } else {
        /* what the cache cannot use anyway (another user's file, a directory)
         * is removed where it can be, and is no failure where it cannot */
        for (size_t i = 0; i < n && st == CUABI_SUCCESS; i++)
            if (unlink(files[i].path) != 0 && errno != ENOENT && ours(&files[i]))
                st = cuabi__error(CUABI_ERROR_IO, "%s: cannot remove %s: %s", __func__,
                                  files[i].path, strerror(errno));
        free_files(files, n);
    }
    free(dir);
    return st;
}

/* ---------------------------------------------------------------- verify */

typedef struct verifying {
    cuabi_cache_verify_report r;
    cuabi_cache_verify_fn fn;           /* told of removals (cuabi_cache_verify) */
    cuabi_cache_verify_each_fn each;    /* told of removals and skips */
    void *payload;
    bool stop;
} verifying;

static void tell(verifying *v, const char *path, uint64_t size, const char *problem,
                 bool removed)
{
    int stop = 0;
    if (v->each) {
        cuabi_cache_verify_finding f = CUABI_CACHE_VERIFY_FINDING_INIT;
        f.path = path;
        f.problem = problem;
        f.removed = removed;
        f.size = size;
        stop = v->each(&f, v->payload);
    } else if (v->fn && removed) {
        stop = v->fn(path, problem, v->payload);
    }
    if (stop)
        v->stop = true;
}

/* A file left alone: it could not be checked, or is not this user's. */
static void skip(verifying *v, const char *path, uint64_t size, const char *why)
{
    v->r.skipped++;
    tell(v, path, size, why, false);
}

/* A file proven bad: removed (the link itself for a symbolic link: unlink
 * never follows one), or left and reported when it cannot be. */
static void drop(verifying *v, const char *path, uint64_t size, const char *problem)
{
    if (unlink(path) != 0) {
        if (errno == ENOENT)
            return; /* someone else removed it meanwhile */
        char why[512];
        snprintf(why, sizeof why, "%s; cannot remove it: %s", problem, strerror(errno));
        skip(v, path, size, why);
        return;
    }
    v->r.removed++;
    v->r.bytes_removed += size;
    tell(v, path, size, problem, true);
}

/* One file under an entry's name: 0 done (checked, kept, removed or
 * skipped). Only what is proven bad is removed. */
static void verify_entry(verifying *v, const file_info *f)
{
    cuabi__cache_key key;
    for (int i = 0; i < 16; i++) {
        unsigned b;
        sscanf(f->name + 2 * i, "%2x", &b);
        key.b[i] = (uint8_t)b;
    }
    uint8_t *buf;
    size_t size;
    uint64_t file_size;
    char why[256];
    int r = read_entry(f->path, &key, &buf, &size, &file_size, why, sizeof why);
    switch (r) {
    case ENTRY_MISSING:
        return;
    case ENTRY_LEFT:
        skip(v, f->path, file_size ? file_size : f->size, why);
        return;
    case ENTRY_OTHER_FORMAT:
        v->r.kept++; /* another cuabi's entry: its business */
        return;
    case ENTRY_BAD:
        v->r.checked++;
        drop(v, f->path, file_size ? file_size : f->size, why);
        return;
    }
    cuabi__cache_entry e = { 0 }; /* parse_entry may stop before filling it */
    bool oom = false;
    const char *bad = parse_entry(buf, size, &key, &e, &oom);
    cuabi__cache_entry_clear(&e);
    free(buf);
    if (oom) {
        cuabi_error_clear(); /* not the call's failure: this file is left for later */
        skip(v, f->path, size, "out of memory checking it");
        return;
    }
    v->r.checked++;
    if (bad)
        drop(v, f->path, size, bad);
}

/* The identity records (libident.h): a damaged one would be ignored anyway;
 * verify removes it, and leaves another user's alone. */
static int verify_records(verifying *v, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    while (!v->stop && (de = readdir(d))) {
        if (!cuabi__ident_record_name(de->d_name))
            continue;
        char *path, why[256];
        struct stat st;
        if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
            closedir(d);
            return -1;
        }
        if (lstat(path, &st) == 0) {
            errno = 0;
            int r = cuabi__ident_record_intact(path, why, sizeof why);
            if (r == 0)
                drop(v, path, (uint64_t)st.st_size, why);
            else if (r < 0 && errno != ENOENT)
                skip(v, path, (uint64_t)st.st_size, why);
        }
        free(path);
    }
    closedir(d);
    return 0;
}

static cuabi_status verify(cuabi_cache_verify_report *out, verifying *v, const char *caller)
{
    if (out)
        CUABI__CHECK_VERSION("cuabi_cache_verify_report", out->version,
                             CUABI_CACHE_VERIFY_REPORT_VERSION);
    v->r = (cuabi_cache_verify_report){ .version = out ? out->version : 1 };
    char *dir;
    CUABI__TRY(api_dir(&dir, caller));
    file_info *files = NULL;
    size_t n = 0;
    uint64_t bytes;
    cuabi_status st = CUABI_SUCCESS;
    if (dir && scan_dir(dir, &files, &n, &bytes) != 0)
        st = cuabi__error(CUABI_ERROR_IO, "%s: cannot read the cache directory %s: %s",
                          caller, dir, strerror(errno));
    for (size_t i = 0; st == CUABI_SUCCESS && i < n && !v->stop; i++)
        verify_entry(v, &files[i]);
    if (st == CUABI_SUCCESS && dir && !v->stop && verify_records(v, dir) != 0)
        st = cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    free_files(files, n);
    free(dir);
    if (out) {
        /* a version-1 report ends before `skipped` */
        size_t n1 = offsetof(cuabi_cache_verify_report, skipped);
        memcpy(out, &v->r, out->version >= 2 ? sizeof v->r : n1);
    }
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_verify(cuabi_cache_verify_report *out,
                                              cuabi_cache_verify_fn fn, void *payload)
{
    verifying v = { .fn = fn, .payload = payload };
    return verify(out, &v, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_cache_verify_each(cuabi_cache_verify_report *out,
                                                   cuabi_cache_verify_each_fn fn,
                                                   void *payload)
{
    verifying v = { .each = fn, .payload = payload };
    return verify(out, &v, __func__);
}
