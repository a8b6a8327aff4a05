/* Who a compiler library is, without loading it: see libident.h.
 *
 * Locating follows glibc's dlopen() for a name without a slash: an object
 * already loaded under that soname (dlopen RTLD_NOLOAD), then the search
 * list glibc itself reports for the object that calls dlopen (dlinfo
 * RTLD_DI_SERINFO: DT_RPATH of it and of the executable, LD_LIBRARY_PATH,
 * DT_RUNPATH, the system directories), with /etc/ld.so.cache looked up
 * before the system directories as ld.so does. Where this guesses wrong
 * (glibc-hwcaps subdirectories, a file that dlopen() then refuses), the
 * loaded file's identity replaces the guess as soon as a miss loads the
 * library, so an entry is never stored under the wrong compiler. */
#include "platform/libident.h"
#include "util/file.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ------------------------------------------------------------ ELF files */

/* The ELF class and machine of this code's own object: dlopen() skips
 * files built for another. */
static bool own_elf(unsigned char *cls, unsigned *machine)
{
    Dl_info info;
    if (!dladdr((void *)own_elf, &info) || !info.dli_fbase)
        return false;
    const ElfW(Ehdr) *h = info.dli_fbase;
    *cls = h->e_ident[EI_CLASS];
    *machine = h->e_machine;
    return true;
}

/* A regular file holding a shared object this process could load. Opened
 * as every file is (util/file.h): a FIFO there is refused, not waited on. */
static bool loadable(const char *path)
{
    struct stat st;
    char why[256];
    int fd = cuabi__file_open(path, 0, UINT64_MAX, &st, why, sizeof why);
    if (fd < 0)
        return false;
    ElfW(Ehdr) h;
    bool ok = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
              !memcmp(h.e_ident, ELFMAG, SELFMAG) && h.e_type == ET_DYN;
    close(fd);
    unsigned char cls;
    unsigned machine;
    if (ok && own_elf(&cls, &machine))
        ok = h.e_ident[EI_CLASS] == cls && h.e_machine == machine;
    return ok;
}

/* The NT_GNU_BUILD_ID note of an open ELF file; 0 bytes when it has none. */
static size_t build_id(int fd, uint8_t *out, size_t cap)
{
    ElfW(Ehdr) h;
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h.e_ident, ELFMAG, SELFMAG) ||
        h.e_phentsize != sizeof(ElfW(Phdr)) || h.e_phnum == 0 || h.e_phnum > 256)
        return 0;
    ElfW(Phdr) ph[256]; /* 14 KiB */
    size_t bytes = (size_t)h.e_phnum * sizeof ph[0];
    if (pread(fd, ph, bytes, (off_t)h.e_phoff) != (ssize_t)bytes)
        return 0;
    uint8_t *notes = malloc(65536);
    size_t found = 0;
    for (size_t i = 0; notes && !found && i < h.e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz == 0 || ph[i].p_filesz > 65536)
            continue;
        size_t n = ph[i].p_filesz;
        if (pread(fd, notes, n, (off_t)ph[i].p_offset) != (ssize_t)n)
            continue;
        size_t align = ph[i].p_align == 8 ? 8 : 4;
        for (size_t off = 0; off + sizeof(ElfW(Nhdr)) <= n;) {
            ElfW(Nhdr) nh;
            memcpy(&nh, notes + off, sizeof nh);
            size_t name_at = off + sizeof nh;
            size_t desc_at = name_at + ((nh.n_namesz + align - 1) & ~(align - 1));
            size_t next = desc_at + ((nh.n_descsz + align - 1) & ~(align - 1));
            if (nh.n_namesz > n || nh.n_descsz > n || desc_at > n || next > n || next <= off)
                break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                !memcmp(notes + name_at, "GNU", 4) && nh.n_descsz <= cap) {
                memcpy(out, notes + desc_at, nh.n_descsz);
                found = nh.n_descsz;
                break;
            }
            off = next;
        }
    }
    free(notes);
    return found;
}

int cuabi__file_id_read(cuabi__file_id *out, const char *path)
{
    *out = (cuabi__file_id){ .size = 0 };
    char *canon = realpath(path, NULL);
    if (!canon)
        return -1;
    if (strlen(canon) >= sizeof out->path) {
        free(canon);
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(out->path, canon);
    free(canon);
    struct stat st;
    char why[256];
    int fd = cuabi__file_open(out->path, 0, UINT64_MAX, &st, why, sizeof why);
    if (fd < 0)
        return -1;
    out->size = (uint64_t)st.st_size;
    out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    out->build_id_len = build_id(fd, out->build_id, sizeof out->build_id);
    close(fd);
    return 0;
}

bool cuabi__file_id_equal(const cuabi__file_id *a, const cuabi__file_id *b)
{
    return !strcmp(a->path, b->path) && a->size == b->size && a->mtime_ns == b->mtime_ns &&
           a->build_id_len == b->build_id_len &&
           !memcmp(a->build_id, b->build_id, a->build_id_len);
}

/* ----------------------------------------------------------- locating */

static bool found_at(char *out, size_t cap, const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", *dir ? dir : ".", name) >= (int)sizeof path ||
        !loadable(path))
        return false;
    char *canon = realpath(path, NULL);
    bool ok = canon && strlen(canon) < cap;
    if (ok)
        strcpy(out, canon);
    free(canon);
    return ok;
}

/* /etc/ld.so.cache (glibc's "glibc-ld.so.cache1.1" format, alone or after
 * the old "ld.so-1.7.0" table): the first loadable file listed for `name`. */
static bool from_ld_cache(char *out, size_t cap, const char *name)
{
    static const char new_magic[] = "glibc-ld.so.cache1.1";
    struct stat st;
    char why[256];
    int fd = cuabi__file_open("/etc/ld.so.cache", 0, (64 << 20) - 1, &st, why, sizeof why);
    if (fd < 0)
        return false;
    uint8_t *buf = NULL;
    size_t size = 0;
    if (st.st_size > 0) {
        size = (size_t)st.st_size;
        buf = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (buf == MAP_FAILED)
            buf = NULL;
    }
    close(fd);
    bool ok = buf != NULL;
    const uint8_t *hdr = NULL;
    if (ok && size >= 48 && !memcmp(buf, new_magic, 20)) {
        hdr = buf;
    } else if (ok && size >= 16 && !memcmp(buf, "ld.so-1.7.0", 11)) {
        uint32_t nold;
        memcpy(&nold, buf + 12, 4);
        size_t at = (16 + (size_t)nold * 12 + 7) & ~(size_t)7;
        if (nold < size / 12 && at + 48 <= size && !memcmp(buf + at, new_magic, 20))
            hdr = buf + at;
    }
    bool found = false;
    size_t len = strlen(name);
    if (hdr) {
        size_t avail = size - (size_t)(hdr - buf);
        uint32_t nlibs;
        memcpy(&nlibs, hdr + 20, 4);
        for (uint32_t i = 0; i < nlibs && !found && 48 + ((size_t)i + 1) * 24 <= avail; i++) {
            uint32_t key, value;
            memcpy(&key, hdr + 48 + (size_t)i * 24 + 4, 4);
            memcpy(&value, hdr + 48 + (size_t)i * 24 + 8, 4);
            if (key >= avail || avail - key <= len || memcmp(hdr + key, name, len + 1) ||
                value >= avail || !memchr(hdr + value, '\0', avail - value))
                continue;
            const char *v = (const char *)hdr + value;
            if (loadable(v)) {
                char *canon = realpath(v, NULL);
                found = canon && strlen(canon) < cap;
                if (found)
                    strcpy(out, canon);
                free(canon);
            }
        }
    }
    if (buf)
        munmap(buf, size);
    return found;
}

/* dlopen()'s search list for the object holding this code, `defaults`
 * selecting the system directories (else everything before them). */
static bool from_search_list(char *out, size_t cap, const char *name, bool defaults)
{
    Dl_info info;
    struct link_map *self = NULL;
    if (!dladdr1((void *)from_search_list, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
        return false;
    /* The executable's link map has an empty name: dlopen(NULL) names it. */
    void *h = self->l_name && *self->l_name ? dlopen(self->l_name, RTLD_LAZY | RTLD_NOLOAD)
                                            : dlopen(NULL, RTLD_LAZY);
    if (!h)
        return false;
    Dl_serinfo size;
    Dl_serinfo *si = NULL;
    bool found = false;
    if (dlinfo(h, RTLD_DI_SERINFOSIZE, &size) == 0 && (si = malloc(size.dls_size))) {
        *si = size; /* dls_size and dls_cnt, as dlinfo(3) asks */
        if (dlinfo(h, RTLD_DI_SERINFO, si) == 0)
            for (unsigned i = 0; i < si->dls_cnt && !found; i++)
                if (((si->dls_serpath[i].dls_flags & LA_SER_DEFAULT) != 0) == defaults)
                    found = found_at(out, cap, si->dls_serpath[i].dls_name, name);
        free(si);
    }
    dlclose(h);
    return found;
}

typedef struct loaded_match {
    const char *name;    /* the soname asked for */
    size_t stem;         /* its length up to ".so" included */
    char *out;
    size_t cap;
    bool found;
} loaded_match;

static int match_loaded(struct dl_phdr_info *info, size_t size, void *payload)
{
    (void)size;
    loaded_match *m = payload;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    /* Cheap first: the file name shares the soname's stem ("libnvrtc.so"),
     * then the file it really is (a "libnvrtc.so" link names the .so.13). */
    if (!base || strncmp(base + 1, m->name, m->stem))
        return 0;
    char *canon = realpath(info->dlpi_name, NULL);
    const char *cbase = canon ? strrchr(canon, '/') : NULL;
    if (cbase && !strcmp(cbase + 1, m->name) && strlen(canon) < m->cap) {
        strcpy(m->out, canon);
        m->found = true;
    }
    free(canon);
    return m->found;
}

/* An object of that name loaded already, by whoever: dlopen() returns it.
 * (dlopen's own RTLD_NOLOAD would search the disk first: 20-50 us.) */
static bool already_loaded(char *out, size_t cap, const char *name)
{
    const char *so = strstr(name, ".so");
    loaded_match m = { name, so ? (size_t)(so - name) + 3 : strlen(name), out, cap, false };
    dl_iterate_phdr(match_loaded, &m);
    return m.found;
}

int cuabi__lib_locate(char *out, size_t cap, const char *name)
{
    if (!name || !*name)
        return -1;
    if (strchr(name, '/')) {
        if (!loadable(name))
            return -1;
        char *canon = realpath(name, NULL);
        bool ok = canon && strlen(canon) < cap;
        if (ok)
            strcpy(out, canon);
        free(canon);
        return ok ? 0 : -1;
    }
    if (already_loaded(out, cap, name) || from_search_list(out, cap, name, false) ||
        from_ld_cache(out, cap, name) || from_search_list(out, cap, name, true))
        return 0;
    return -1;
}

/* ------------------------------------------------------------- records */

#define RECORD_MAGIC "cuabi-compiler-identity 1"

static void hex(char *out, const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

char *cuabi__ident_record_path(const char *dir, const char *lib, const cuabi__file_id *id)
{
    char *p;
    if (asprintf(&p, "%s/id-%s-%016" PRIx64, dir, lib,
                 (uint64_t)XXH3_64bits(id->path, strlen(id->path))) < 0)
        return NULL;
    return p;
}

/* The record's text, without its checksum line. */
static int record_body(char *out, size_t cap, const char *lib, const cuabi__file_id *id,
                       int version)
{
    char bid[2 * sizeof id->build_id + 1];
    hex(bid, id->build_id, id->build_id_len);
    return snprintf(out, cap, RECORD_MAGIC "\nlib %s\npath %s\nsize %" PRIu64 "\nmtime %" PRId64
                    "\nbuild-id %s\nversion %d\n", lib, id->path, id->size, id->mtime_ns,
                    id->build_id_len ? bid : "-", version);
}

/* The checksum line must close the text and cover everything before it. */
static bool checksum_ok(const char *text)
{
    const char *sum = strstr(text, "checksum ");
    if (!sum || (sum != text && sum[-1] != '\n'))
        return false;
    char want[32];
    snprintf(want, sizeof want, "checksum %016" PRIx64 "\n",
             (uint64_t)XXH3_64bits(text, (size_t)(sum - text)));
    return !strcmp(sum, want);
}

#define RECORD_MAX 8192

/* A record file's text, NUL-terminated, into text[RECORD_MAX + 64]: opened
 * as every file is (util/file.h: a FIFO refused, never waited on), never
 * through a symbolic link, and only when it is this user's own (a shared
 * cache directory may hold another user's). 1 read; 0 not read (missing,
 * unreadable: why says); -1 not a record at all (not a regular file, too
 * large); -2 not this user's (owner or mode). */
static int record_text(const char *path, char *text, char *why, size_t why_cap)
{
    struct stat st;
    int fd = cuabi__file_open(path, CUABI__FILE_NOFOLLOW, RECORD_MAX + 63, &st, why, why_cap);
    if (fd < 0)
        return fd == CUABI__FILE_ERR_OPEN ? 0 : -1;
    if (cuabi__file_owned(&st, geteuid(), why, why_cap) != 0) {
        close(fd);
        return -2;
    }
    char *data;
    size_t n;
    int r = cuabi__file_read_fd(fd, (uint64_t)st.st_size, RECORD_MAX + 63, false, &data, &n);
    int err = errno;
    close(fd);
    if (r != 0) {
        snprintf(why, why_cap, "%s", strerror(err));
        return err == EFBIG ? -1 : 0;
    }
    memcpy(text, data, n + 1);
    free(data);
    return 1;
}

int cuabi__ident_record_read(const char *dir, const char *lib, const cuabi__file_id *id,
                             int *version)
{
    char *path = cuabi__ident_record_path(dir, lib, id);
    if (!path)
        return -1;
    char text[RECORD_MAX + 64], why[256];
    int r = record_text(path, text, why, sizeof why);
    free(path);
    if (r != 1 || !text[0])
        return -1;
    /* The last line is "checksum <16 hex>" over everything before it. */
    if (!checksum_ok(text))
        return -1;
    const char *sum = strstr(text, "checksum ");
    /* Whole and undamaged: it counts only when it names this very file. */
    int v = 0;
    const char *vline = strstr(text, "\nversion ");
    if (!vline || sscanf(vline, "\nversion %d\n", &v) != 1 || v <= 0)
        return -1;
    char body[RECORD_MAX];
    int len = record_body(body, sizeof body, lib, id, v);
    if (len < 0 || (size_t)len >= sizeof body || (size_t)len != (size_t)(sum - text) ||
        memcmp(body, text, (size_t)len))
        return -1;
    *version = v;
    return 0;
}

int cuabi__ident_record_intact(const char *path, char *why, size_t why_cap)
{
    char text[RECORD_MAX + 64];
    int r = record_text(path, text, why, why_cap);
    if (r == 0 || r == -2)
        return -1;
    if (r == -1)
        return 0;
    if (strncmp(text, RECORD_MAGIC "\n", sizeof RECORD_MAGIC) || !checksum_ok(text)) {
        snprintf(why, why_cap, "damaged compiler identity record");
        return 0;
    }
    return 1;
}

bool cuabi__ident_record_name(const char *name)
{
    return !strncmp(name, "id-", 3);
}

int cuabi__ident_record_write(const char *dir, const char *lib, const cuabi__file_id *id,
                              int version)
{
    char text[RECORD_MAX + 64];
    int len = record_body(text, sizeof text - 64, lib, id, version);
    if (len < 0 || (size_t)len >= sizeof text - 64)
        return -1;
    len += snprintf(text + len, 64, "checksum %016" PRIx64 "\n",
                    (uint64_t)XXH3_64bits(text, (size_t)len));
    char *path = cuabi__ident_record_path(dir, lib, id), *tmp = NULL;
    int rc = -1;
    if (!path || asprintf(&tmp, "%s/tmp-id-%s-XXXXXX", dir, lib) < 0) {
        tmp = NULL;
        goto out;
    }
    int fd = mkstemp(tmp);
    if (fd < 0)
        goto out;
    bool ok = write(fd, text, (size_t)len) == len;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        rc = 0;
    else
        unlink(tmp);
out:
    free(tmp);
    free(path);
    return rc;
}

/* ----------------------------------------------------- compiler identity */

enum { UNKNOWN = 0, PREDICTED = 1, VERIFIED = 2 };

static cuabi_status nvrtc_load(const char *caller)
{
    const cuabi__nvrtc *nv;
    return cuabi__nvrtc_get_for(&nv, caller);
}

static cuabi_status nvjitlink_load(const char *caller)
{
    const cuabi__nvjitlink *j;
    return cuabi__nvjitlink_get_for(&j, caller);
}

cuabi__compiler cuabi__compiler_nvrtc =
    CUABI__COMPILER_INIT("nvrtc", "CUABI_NVRTC_PATH", cuabi__nvrtc_names, cuabi__nvrtc_loaded,
                         nvrtc_load, cuabi__nvrtc_info);
cuabi__compiler cuabi__compiler_nvjitlink =
    CUABI__COMPILER_INIT("nvjitlink", "CUABI_NVJITLINK_PATH", cuabi__nvjitlink_names,
                         cuabi__nvjitlink_loaded, nvjitlink_load, cuabi__nvjitlink_info);

static void compose(cuabi__ident_text *t, const char *lib, const cuabi__file_id *id, int version)
{
    char bid[2 * sizeof id->build_id + 1];
    hex(bid, id->build_id, id->build_id_len);
    int n = snprintf(t->s, sizeof t->s, "%s %s %" PRIu64 " %" PRId64 " %s %d", lib, id->path,
                     id->size, id->mtime_ns, id->build_id_len ? bid : "-", version);
    t->len = n < 0 ? 0 : (size_t)n < sizeof t->s ? (size_t)n : sizeof t->s - 1;
}

/* The file the loader would open, as it would try them. */
static int locate(const cuabi__compiler *c, cuabi__file_id *id)
{
    char path[4096];
    const char *override = getenv(c->env);
    if (override && *override)
        return cuabi__lib_locate(path, sizeof path, override) == 0
                   ? cuabi__file_id_read(id, path) : -1;
    for (const char *const *n = c->candidates; *n; n++)
        if (cuabi__lib_locate(path, sizeof path, *n) == 0)
            return cuabi__file_id_read(id, path);
    return -1;
}

static void publish(cuabi__compiler *c, const cuabi__ident_text *t, int state)
{
    atomic_store_explicit(&c->text, t, memory_order_release);
    atomic_store_explicit(&c->state, state, memory_order_release);
}

/* The library is loaded: its own file's identity, recorded for the next
 * process (unless that record is the one the prediction came from). Under
 * c->lock. */
static void from_loaded(cuabi__compiler *c, char *(*record_dir)(void))
{
    const cuabi__lib_info *info = c->info();
    cuabi__file_id id;
    if (cuabi__file_id_read(&id, info->path) != 0) {
        /* Loaded from a file that cannot be read back (removed since): the
         * path and version are all that is known. */
        id = (cuabi__file_id){ .size = 0 };
        snprintf(id.path, sizeof id.path, "%s", info->path);
    }
    compose(&c->verified, c->name, &id, info->version);
    bool as_predicted = atomic_load_explicit(&c->state, memory_order_relaxed) == PREDICTED &&
                        c->predicted.len == c->verified.len &&
                        !memcmp(c->predicted.s, c->verified.s, c->verified.len);
    char *dir = as_predicted || !id.size ? NULL : record_dir();
    int known;
    if (dir && (cuabi__ident_record_read(dir, c->name, &id, &known) != 0 ||
                known != info->version))
        cuabi__ident_record_write(dir, c->name, &id, info->version);
    free(dir);
    publish(c, &c->verified, VERIFIED);
}

static cuabi_status ident_slow(cuabi__compiler *c, char *(*record_dir)(void), const char *caller)
{
    cuabi_status st = CUABI_SUCCESS;
    pthread_mutex_lock(&c->lock);
    int state = atomic_load_explicit(&c->state, memory_order_relaxed);
    if (state == VERIFIED) {
        /* another thread got here first */
    } else if (c->loaded()) {
        from_loaded(c, record_dir);
    } else if (state == UNKNOWN) {
        cuabi__file_id id;
        char *dir = NULL;
        int version = 0;
        if (locate(c, &id) == 0 && (dir = record_dir()) &&
            cuabi__ident_record_read(dir, c->name, &id, &version) == 0) {
            compose(&c->predicted, c->name, &id, version);
            publish(c, &c->predicted, PREDICTED);
        } else if ((st = c->load(caller)) == CUABI_SUCCESS) {
            from_loaded(c, record_dir);
        }
        free(dir);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

cuabi_status cuabi__compiler_ident(cuabi__compiler *c, char *(*record_dir)(void),
                                   const char **text, size_t *len, const char *caller)
{
    int state = atomic_load_explicit(&c->state, memory_order_acquire);
    if (CUABI__UNLIKELY(state != VERIFIED && (state == UNKNOWN || c->loaded())))
        CUABI__TRY(ident_slow(c, record_dir, caller));
    const cuabi__ident_text *t = atomic_load_explicit(&c->text, memory_order_acquire);
    *text = t->s;
    *len = t->len;
    return CUABI_SUCCESS;
}

void cuabi__compiler_reset_for_test(cuabi__compiler *c)
{
    pthread_mutex_lock(&c->lock);
    atomic_store(&c->state, UNKNOWN);
    atomic_store(&c->text, NULL);
    pthread_mutex_unlock(&c->lock);
}
