/* Fatbins: the container parser, packing through nvFatbin or the
 * `fatbinary` tool, and the cuabi_fatbin_* functions (see fatbin.h). */
#include "fatbin.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objcode.h"

extern char **environ;

/* Entry kinds and flags of the container (as nvcc's fatbinary writes them). */
#define KIND_PTX 1u
#define KIND_ELF 2u
#define KIND_NVVM 8u            /* LTO-IR */
#define FLAG_COMPRESS_LZ4 0x2000u
#define FLAG_COMPRESS_ZSTD 0x8000u
#define HEADER_SIZE 16u
#define ENTRY_MIN 64u

#define IDENT_NVFATBIN "cuabi:nvfatbin"
#define IDENT_FATBINARY "cuabi:fatbinary"

/* ---------------------------------------------------------- parsing */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static cuabi_code_type kind_type(unsigned kind)
{
    return kind == KIND_PTX ? CUABI_CODE_PTX : kind == KIND_ELF ? CUABI_CODE_CUBIN
         : kind == KIND_NVVM ? CUABI_CODE_LTOIR : CUABI_CODE_NONE;
}

static cuabi_status bad(const char *caller, const char *what, size_t off, const char *defect)
{
    return cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: %s is not a well-formed fatbin: %s "
                        "(at byte %zu)", caller, what, defect, off);
}

/* One entry at p[0..avail): header, identifier, payload, all inside. */
static cuabi_status parse_entry(cuabi__fatbin_image *img, size_t *used, const unsigned char *p,
                                size_t avail, size_t off, const char *what, const char *caller)
{
    if (avail < ENTRY_MIN)
        return bad(caller, what, off, "an entry header is cut short");
    uint32_t ehs = rd32(p + 4);
    uint64_t payload = rd64(p + 8);
    uint32_t name_off = rd32(p + 32), name_len = rd32(p + 36);
    uint64_t flags = rd64(p + 40);
    if (ehs < ENTRY_MIN || ehs > avail)
        return bad(caller, what, off, "an entry's header size is out of range");
    if (payload > avail - ehs)
        return bad(caller, what, off, "an entry's payload runs past the container");
    if (name_len && (name_off < ENTRY_MIN || name_off > ehs || name_len > ehs - name_off))
        return bad(caller, what, off, "an entry's identifier lies outside its header");
    *img = (cuabi__fatbin_image){
        .kind = rd16(p), .arch = rd32(p + 28),
        .compressed = (flags & (FLAG_COMPRESS_LZ4 | FLAG_COMPRESS_ZSTD)) != 0,
        .data = p + ehs, .size = (size_t)payload,
        .ident = name_len ? (const char *)p + name_off : "", .ident_len = name_len };
    img->type = kind_type(img->kind);
    *used = ehs + (size_t)payload;
    return CUABI_SUCCESS;
}

static cuabi_status add_image(cuabi__fatbin *f, size_t *cap, const cuabi__fatbin_image *img)
{
    if (f->count == *cap) {
        size_t n = *cap ? *cap * 2 : 8;
        cuabi__fatbin_image *ni = cuabi__realloc(f->images, n * sizeof *ni);
        if (!ni)
            return CUABI_ERROR_OUT_OF_MEMORY;
        f->images = ni;
        *cap = n;
    }
    f->images[f->count++] = *img;
    return CUABI_SUCCESS;
}

/* The containers one after the other; what follows the last may only be
 * zero padding. */
static cuabi_status parse_all(cuabi__fatbin *f, const unsigned char *d, size_t size,
                              const char *what, const char *caller)
{
    size_t off = 0, cap = 0;
    while (off < size) {
        size_t left = size - off;
        if (left < 4 || rd32(d + off) != CUABI__FATBIN_MAGIC) {
            for (size_t i = off; i < size; i++)
                if (d[i])
                    return off == 0 ? bad(caller, what, 0, "no fatbin header (magic 0xBA55ED50)")
                                    : bad(caller, what, off, "bytes after the last container");
            break;
        }
        if (left < HEADER_SIZE)
            return bad(caller, what, off, "the header is cut short");
        uint16_t hs = rd16(d + off + 6);
        uint64_t body = rd64(d + off + 8);
        if (hs < HEADER_SIZE || hs > left)
            return bad(caller, what, off, "the header size is out of range");
        if (body > left - hs)
            return bad(caller, what, off, "the container is larger than the data");
        size_t pos = off + hs, end = pos + (size_t)body;
        while (pos < end) {
            cuabi__fatbin_image img;
            size_t used = 0;
            CUABI__TRY(parse_entry(&img, &used, d + pos, end - pos, pos, what, caller));
            CUABI__TRY(add_image(f, &cap, &img));
            pos += used;
        }
        off = end;
    }
    if (f->count == 0)
        return bad(caller, what, 0, "it holds no images");
    return CUABI_SUCCESS;
}

cuabi_status cuabi__fatbin_parse(cuabi__fatbin *out, const void *data, size_t size,
                                 const char *what, const char *caller)
{
    *out = (cuabi__fatbin){ NULL, 0 };
    cuabi_status st = parse_all(out, data, size, what, caller);
    if (st != CUABI_SUCCESS)
        cuabi__fatbin_free(out);
    return st;
}

void cuabi__fatbin_free(cuabi__fatbin *f)
{
    cuabi__free(f->images);
    f->images = NULL;
    f->count = 0;
}

/* "sm_90, sm_90 PTX, ..." of what the fatbin holds, for messages. */
static void describe(const cuabi__fatbin *f, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < f->count && used + 1 < len; i++) {
        const cuabi__fatbin_image *m = &f->images[i];
        int n = m->type == CUABI_CODE_CUBIN
                    ? snprintf(buf + used, len - used, "%ssm_%u CUBIN", i ? ", " : "", m->arch)
                : m->type == CUABI_CODE_NONE
                    ? snprintf(buf + used, len - used, "%skind %u for %u", i ? ", " : "",
                               m->kind, m->arch)
                    : snprintf(buf + used, len - used, "%scompute_%u %s", i ? ", " : "",
                               m->arch, cuabi__code_type_name(m->type));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static cuabi_status compressed(const cuabi__fatbin_image *m, const char *name, const char *caller)
{
    return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the %s image for %u in %s is "
                        "compressed, which cuabi does not read offline (the driver loads it); "
                        "make the fatbin uncompressed (fatbinary --compress=false, nvFatbin "
                        "-compress=false)", caller, cuabi__code_type_name(m->type), m->arch,
                        name);
}

/* The arch number of "sm_90", "sm_90a", "compute_100f". */
static unsigned arch_number(const char *arch)
{
    const char *d = !strncmp(arch, "sm_", 3) ? arch + 3 : !strncmp(arch, "compute_", 8) ? arch + 8
                                                                                       : arch;
    return (unsigned)strtoul(d, NULL, 10);
}

cuabi_status cuabi__fatbin_cubin_for(void **cubin, size_t *cubin_size, const void *data,
                                     size_t size, const char *name, const char *arch,
                                     const char *caller)
{
    cuabi__fatbin f;
    *cubin = NULL;
    *cubin_size = 0;
    CUABI__TRY(cuabi__fatbin_parse(&f, data, size, name, caller));
    unsigned want = arch_number(arch);
    const cuabi__fatbin_image *elf = NULL, *ptx = NULL;
    for (size_t i = 0; i < f.count; i++) {
        const cuabi__fatbin_image *m = &f.images[i];
        if (m->type == CUABI_CODE_CUBIN && m->arch == want)
            elf = m;
        if (m->type == CUABI_CODE_PTX && m->arch <= want && (!ptx || m->arch > ptx->arch))
            ptx = m;
    }
    cuabi_status st = CUABI_SUCCESS;
    const cuabi__fatbin_image *use = elf ? elf : ptx;
    if (!use) {
        char have[512];
        describe(&f, have, sizeof have);
        st = cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: %s has no CUBIN for %s and no PTX for it "
                          "or an older architecture (it holds %s)", caller, name, arch, have);
    } else if (use->compressed) {
        st = compressed(use, name, caller);
    } else if (use == elf) {
        *cubin = cuabi__malloc(use->size ? use->size : 1);
        if (!*cubin)
            st = CUABI_ERROR_OUT_OF_MEMORY;
        else
            memcpy(*cubin, use->data, use->size), *cubin_size = use->size;
    } else {
        /* PTX: text up to its first NUL (the payload is padded), compiled. */
        size_t len = strnlen((const char *)use->data, use->size);
        char *text = cuabi__malloc(len + 1);
        if (!text) {
            st = CUABI_ERROR_OUT_OF_MEMORY;
        } else {
            memcpy(text, use->data, len);
            text[len] = '\0';
            st = cuabi__link_to_cubin(cubin, cubin_size, CUABI_CODE_PTX, text, len, name, arch,
                                      caller);
            cuabi__free(text);
        }
    }
    cuabi__fatbin_free(&f);
    return st;
}

unsigned cuabi__fatbin_best_arch(const void *data, size_t size)
{
    cuabi__fatbin f;
    unsigned best_elf = 0, best_ptx = 0;
    if (cuabi__fatbin_parse(&f, data, size, "fatbin", "cuabi") != CUABI_SUCCESS) {
        cuabi_error_clear();
        return 0;
    }
    for (size_t i = 0; i < f.count; i++) {
        const cuabi__fatbin_image *m = &f.images[i];
        if (m->type == CUABI_CODE_CUBIN && m->arch > best_elf)
            best_elf = m->arch;
        if (m->type == CUABI_CODE_PTX && m->arch > best_ptx)
            best_ptx = m->arch;
    }
    cuabi__fatbin_free(&f);
    return best_elf ? best_elf : best_ptx;
}

unsigned cuabi__ptx_target_arch(const char *ptx, size_t size)
{
    for (size_t i = 0; i + 8 < size; i++) {
        if (ptx[i] != '.' || memcmp(ptx + i, ".target", 7) != 0)
            continue;
        size_t j = i + 7;
        while (j < size && (ptx[j] == ' ' || ptx[j] == '\t'))
            j++;
        if (j + 3 < size && !memcmp(ptx + j, "sm_", 3)) {
            unsigned v = 0;
            for (j += 3; j < size && ptx[j] >= '0' && ptx[j] <= '9' && v < 100000; j++)
                v = v * 10 + (unsigned)(ptx[j] - '0');
            return v;
        }
        return 0;
    }
    return 0;
}

/* ---------------------------------------------------------- packing */

static _Atomic int forced_packer;

void cuabi__fatbin_force_packer(int which) { atomic_store(&forced_packer, which); }

static cuabi_status nvfatbin_fail(const cuabi__nvfatbin *nf, int r, const char *call,
                                  const char *caller)
{
    const char *why = nf->nvFatbinGetErrorString ? nf->nvFatbinGetErrorString(r) : NULL;
    return cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: %s failed with %s (%d)", caller, call,
                        why ? why : "an nvFatbin error", r);
}

static cuabi_status pack_nvfatbin(const cuabi__nvfatbin *nf, void **out, size_t *out_size,
                                  const cuabi__fatbin_input *in, size_t n, const char *caller)
{
    const char *opts[] = { "-64", "-compress=false" };
    cuabi__nvfatbin_handle h = NULL;
    int r = nf->nvFatbinCreate(&h, opts, 2);
    if (r != 0)
        return nvfatbin_fail(nf, r, "nvFatbinCreate", caller);
    cuabi_status st = CUABI_SUCCESS;
    for (size_t i = 0; i < n && st == CUABI_SUCCESS; i++) {
        char arch[16], ident[48];
        snprintf(arch, sizeof arch, "%u", in[i].arch);
        /* nvFatbin wants each identifier once. */
        snprintf(ident, sizeof ident, IDENT_NVFATBIN ":%zu", i);
        if (in[i].type == CUABI_CODE_PTX) {
            /* NUL-terminated: cuabi keeps PTX so one byte past its size. */
            r = nf->nvFatbinAddPTX(h, in[i].data, in[i].size + 1, arch, ident, "");
            if (r != 0)
                st = nvfatbin_fail(nf, r, "nvFatbinAddPTX", caller);
        } else {
            r = nf->nvFatbinAddCubin(h, in[i].data, in[i].size, arch, ident);
            if (r != 0)
                st = nvfatbin_fail(nf, r, "nvFatbinAddCubin", caller);
        }
    }
    size_t size = 0;
    if (st == CUABI_SUCCESS && (r = nf->nvFatbinSize(h, &size)) != 0)
        st = nvfatbin_fail(nf, r, "nvFatbinSize", caller);
    if (st == CUABI_SUCCESS && !(*out = cuabi__malloc(size ? size : 1)))
        st = CUABI_ERROR_OUT_OF_MEMORY;
    if (st == CUABI_SUCCESS && (r = nf->nvFatbinGet(h, *out)) != 0) {
        st = nvfatbin_fail(nf, r, "nvFatbinGet", caller);
        cuabi__free(*out);
        *out = NULL;
    }
    if (st == CUABI_SUCCESS)
        *out_size = size;
    nf->nvFatbinDestroy(&h);
    return st;
}

static bool executable(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* Where the fatbinary tool is: CUABI_FATBINARY alone when set, else the
 * toolkit cuabi was built against, CUDA_HOME, CUDA_PATH, then PATH.
 * `looked` says where it looked when none is found. */
static bool find_fatbinary(char *path, size_t len, char *looked, size_t looked_len)
{
    const char *env = getenv("CUABI_FATBINARY");
    if (env && *env) {
        snprintf(looked, looked_len, "CUABI_FATBINARY=%s (not an executable file)", env);
        snprintf(path, len, "%s", env);
        return executable(path);
    }
    const char *homes[] = { getenv("CUDA_HOME"), getenv("CUDA_PATH") };
    size_t used = 0;
    looked[0] = '\0';
#define TRY(...)                                                              \
    do {                                                                       \
        snprintf(path, len, __VA_ARGS__);                                      \
        if (executable(path))                                                  \
            return true;                                                       \
        if (used + 1 < looked_len) {                                           \
            int n_ = snprintf(looked + used, looked_len - used, "%s%s",        \
                              used ? ", " : "", path);                         \
            used += n_ > 0 ? (size_t)n_ : 0;                                   \
        }                                                                      \
    } while (0)
    TRY("%s/../bin/fatbinary", CUABI_CUDA_LIBDIR);
    for (size_t i = 0; i < 2; i++)
        if (homes[i] && *homes[i])
            TRY("%s/bin/fatbinary", homes[i]);
    const char *p = getenv("PATH");
    while (p && *p) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (n > 0 && n < 900)
            TRY("%.*s/fatbinary", (int)n, p);
        p = colon ? colon + 1 : NULL;
    }
#undef TRY
    if (used + 1 < looked_len)
        snprintf(looked + used, looked_len - used, "%sthe PATH", used ? ", " : "");
    return false;
}

static cuabi_status write_file(const char *path, const void *data, size_t size,
                               const char *caller)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, size, f) == size;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        return cuabi__error(CUABI_ERROR_IO, "%s: cannot write '%s' for fatbinary: %s", caller,
                            path, strerror(errno));
    return CUABI_SUCCESS;
}

/* Run the tool with stdout and stderr into `log`; the exit status or -1. */
static int run_tool(char *const *argv, const char *log, char *why, size_t why_len)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        snprintf(why, why_len, "posix_spawn_file_actions_init failed");
        return -1;
    }
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) {
        snprintf(why, why_len, "cannot run %s: %s", argv[0], strerror(err));
        return -1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, why_len, "waitpid failed: %s", strerror(errno));
            return -1;
        }
    if (WIFSIGNALED(status)) {
        snprintf(why, why_len, "%s was killed by signal %d", argv[0], WTERMSIG(status));
        return -1;
    }
    return WEXITSTATUS(status);
}

/* The temporary directory's files, for cleaning up. */
typedef struct tmpdir {
    char dir[512];
    char files[40][600];
    size_t n;
} tmpdir;

static const char *tmp_path(tmpdir *t, const char *name)
{
    if (t->n == sizeof t->files / sizeof t->files[0])
        return NULL;
    char *slot = t->files[t->n];
    size_t dl = strlen(t->dir), nl = strlen(name);
    if (dl + 1 + nl >= sizeof t->files[0])
        return NULL;
    memcpy(slot, t->dir, dl);
    slot[dl] = '/';
    memcpy(slot + dl + 1, name, nl + 1);
    return t->files[t->n++];
}

static void tmp_remove(tmpdir *t)
{
    for (size_t i = 0; i < t->n; i++)
        unlink(t->files[i]);
    rmdir(t->dir);
}

/* A failed run: its exit status and output. */
static cuabi_status tool_failed(const char *tool, int code, const char *why, const char *log,
                                const char *caller)
{
    void *text = NULL;
    size_t n = 0;
    if (cuabi__read_file(log, &text, &n, caller) != CUABI_SUCCESS)
        cuabi_error_clear();
    const char *t = text ? text : "";
    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == ' '))
        n--;
    cuabi_status st;
    if (code < 0)
        st = cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: %s%s%.*s", caller, why, n ? ": " : "",
                          (int)(n > 3000 ? 3000 : n), t);
    else
        st = cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: %s failed (exit status %d)%s%.*s",
                          caller, tool, code, n ? ": " : "", (int)(n > 3000 ? 3000 : n), t);
    if (n)
        cuabi__error_set_log(t, n);
    cuabi__free(text);
    return st;
}

static cuabi_status pack_fatbinary(const char *tool, void **out, size_t *out_size,
                                   const cuabi__fatbin_input *in, size_t n, const char *caller)
{
    if (n > 32)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu images; the fatbinary tool "
                            "takes up to 32 at a time from cuabi", caller, n);
    tmpdir *t = cuabi__calloc(1, sizeof *t);
    if (!t)
        return CUABI_ERROR_OUT_OF_MEMORY;
    const char *base = getenv("TMPDIR");
    /* The image specs are comma-separated: a comma in the path would split one. */
    if (!base || !*base || strchr(base, ',') || strlen(base) > 400)
        base = "/tmp";
    snprintf(t->dir, sizeof t->dir, "%s/cuabi-fatbin-XXXXXX", base);
    if (!mkdtemp(t->dir)) {
        cuabi_status st = cuabi__error(CUABI_ERROR_IO, "%s: cannot make a temporary directory "
                                       "'%s' for fatbinary: %s", caller, t->dir,
                                       strerror(errno));
        cuabi__free(t);
        return st;
    }
    char *argv[40] = { 0 };
    char specs[32][700], create[600];
    size_t a = 0;
    cuabi_status st = CUABI_SUCCESS;
    const char *outp = tmp_path(t, "out.fatbin"), *log = tmp_path(t, "log.txt");
    argv[a++] = (char *)tool;
    argv[a++] = "-64";
    snprintf(create, sizeof create, "--create=%s", outp);
    argv[a++] = create;
    argv[a++] = "--ident=" IDENT_FATBINARY;
    argv[a++] = "--compress=false";
    for (size_t i = 0; i < n && st == CUABI_SUCCESS; i++) {
        char name[32];
        bool ptx = in[i].type == CUABI_CODE_PTX;
        snprintf(name, sizeof name, "in%zu.%s", i, ptx ? "ptx" : "cubin");
        const char *p = tmp_path(t, name);
        st = write_file(p, in[i].data, in[i].size, caller);
        snprintf(specs[i], sizeof specs[i], "--image3=kind=%s,sm=%u,file=%s", ptx ? "ptx" : "elf",
                 in[i].arch, p);
        argv[a++] = specs[i];
    }
    if (st == CUABI_SUCCESS) {
        char why[600] = "";
        int code = run_tool(argv, log, why, sizeof why);
        if (code != 0)
            st = tool_failed(tool, code, why, log, caller);
        else
            st = cuabi__read_file(outp, out, out_size, caller);
    }
    tmp_remove(t);
    cuabi__free(t);
    return st;
}

static cuabi_status check_inputs(cuabi__fatbin_input *in, size_t n, const char *caller)
{
    if (n == 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: no images to pack into a fatbin",
                            caller);
    for (size_t i = 0; i < n; i++) {
        if (in[i].type != CUABI_CODE_CUBIN && in[i].type != CUABI_CODE_PTX)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: image %zu is %s; a fatbin "
                                "is made of CUBIN and PTX images", caller, i,
                                cuabi__code_type_name(in[i].type));
        if (in[i].arch < 10 || in[i].arch > 9999)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: image %zu (%s) names no "
                                "architecture (%u)", caller, i,
                                cuabi__code_type_name(in[i].type), in[i].arch);
        for (size_t j = 0; j < i; j++)
            if (in[j].type == in[i].type && in[j].arch == in[i].arch)
                return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: images %zu and %zu are "
                                    "both %s for %u", caller, j, i,
                                    cuabi__code_type_name(in[i].type), in[i].arch);
    }
    return CUABI_SUCCESS;
}

cuabi_status cuabi__fatbin_pack(void **out, size_t *out_size, const char **packer,
                                const cuabi__fatbin_input *inputs, size_t n, const char *caller)
{
    *out = NULL;
    *out_size = 0;
    *packer = "";
    cuabi__fatbin_input in[64];
    if (n > 64)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu images; a fatbin takes up "
                            "to 64", caller, n);
    memcpy(in, inputs, n * sizeof *in);
    for (size_t i = 0; i < n; i++)
        if (!in[i].arch && in[i].type == CUABI_CODE_PTX)
            in[i].arch = cuabi__ptx_target_arch(in[i].data, in[i].size);
    CUABI__TRY(check_inputs(in, n, caller));
    int force = atomic_load(&forced_packer);
    char missing[2400] = "";
    if (force != 2) {
        const cuabi__nvfatbin *nf;
        cuabi_status st = cuabi__nvfatbin_get_for(&nf, caller);
        if (st == CUABI_SUCCESS) {
            *packer = "nvfatbin";
            return pack_nvfatbin(nf, out, out_size, in, n, caller);
        }
        if (force == 1)
            return st;
        const char *why = cuabi_last_error()->message;
        size_t cl = strlen(caller); /* "caller: nvFatbin unavailable: ..." */
        if (!strncmp(why, caller, cl) && why[cl] == ':' && why[cl + 1] == ' ')
            why += cl + 2;
        snprintf(missing, sizeof missing, "%s", why);
        cuabi_error_clear();
    }
    char tool[1024], looked[1500];
    if (!find_fatbinary(tool, sizeof tool, looked, sizeof looked))
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: cannot make a fatbin: %s%sand no "
                            "fatbinary tool was found (looked for %s; set CUABI_FATBINARY to "
                            "its path)", caller, missing[0] ? missing : "", missing[0] ? "; " : "",
                            looked);
    *packer = "fatbinary";
    return pack_fatbinary(tool, out, out_size, in, n, caller);
}

/* ---------------------------------------------------------- public API */

/* The objcode, which must be a fatbin, parsed. */
static cuabi_status get_fatbin(cuabi__objcode **o, cuabi__fatbin *f, cuabi_objcode *objcode,
                               const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(objcode, CUABI__T_OBJCODE, &obj, caller));
    *o = obj;
    if ((*o)->type != CUABI_CODE_FATBIN)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is a %s objcode, not a "
                            "fatbin", caller, (*o)->name, cuabi__code_type_name((*o)->type));
    return cuabi__fatbin_parse(f, (*o)->data, (*o)->size, (*o)->name, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_create(cuabi_objcode **out,
                                               cuabi_objcode **images, size_t count)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(images || count == 0, "%s: images is NULL but count is %zu", __func__,
                     count);
    CUABI__CHECK_ARG(count > 0 && count <= 64, "%s: count is %zu; give 1 to 64 images",
                     __func__, count);
    cuabi__fatbin_input in[64];
    for (size_t i = 0; i < count; i++) {
        cuabi__objcode *o;
        CUABI__GET(o, images[i], OBJCODE);
        in[i] = (cuabi__fatbin_input){ o->type, o->data, o->size, 0 };
        if (o->type == CUABI_CODE_CUBIN) {
            const cuabi__elf_info *elf;
            CUABI__TRY(cuabi__objcode_elf(o, NULL, &elf, __func__));
            in[i].arch = (unsigned)elf->arch;
        }
    }
    void *data;
    size_t size;
    const char *packer;
    CUABI__TRY(cuabi__fatbin_pack(&data, &size, &packer, in, count, __func__));
    cuabi__objcode *o;
    CUABI__TRY(cuabi__objcode_new_trusted(&o, CUABI_CODE_FATBIN, data, size, "<fatbin>"));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_image_count(size_t *out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    *out = f.count;
    cuabi__fatbin_free(&f);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_image_info(cuabi_code_type *out, int *arch,
                                                   cuabi_objcode *objcode, size_t index)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(arch, "%s: arch is NULL", __func__);
    *out = CUABI_CODE_NONE;
    *arch = 0;
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    cuabi_status st = CUABI_SUCCESS;
    if (index >= f.count)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: index %zu is out of range (%s "
                          "holds %zu images)", __func__, index, o->name, f.count);
    else
        *out = f.images[index].type, *arch = (int)f.images[index].arch;
    cuabi__fatbin_free(&f);
    return st;
}

/* No subtraction: a fatbin may claim any 32-bit architecture number
 * (fuzz_fatbin found INT_MAX - (-1) overflowing). */
static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_archs(int *out, size_t capacity, size_t *count,
                                              cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(count, "%s: count is NULL", __func__);
    *count = 0;
    CUABI__CHECK_ARG(out || capacity == 0, "%s: out is NULL but capacity is %zu", __func__,
                     capacity);
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    int *all = cuabi__malloc((f.count ? f.count : 1) * sizeof *all);
    if (!all) {
        cuabi__fatbin_free(&f);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    size_t n = 0;
    for (size_t i = 0; i < f.count; i++)
        if (f.images[i].type == CUABI_CODE_CUBIN)
            all[n++] = (int)f.images[i].arch;
    qsort(all, n, sizeof *all, cmp_int);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || all[u - 1] != all[i])
            all[u++] = all[i];
    for (size_t i = 0; i < u && i < capacity; i++)
        out[i] = all[i];
    *count = u;
    cuabi__free(all);
    cuabi__fatbin_free(&f);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_packer(const char **out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    const cuabi__fatbin_image *m = &f.images[0];
    size_t nv = sizeof IDENT_NVFATBIN - 1, fb = sizeof IDENT_FATBINARY - 1;
    *out = m->ident_len >= nv && !memcmp(m->ident, IDENT_NVFATBIN, nv) ? "nvfatbin"
         : m->ident_len >= fb && !memcmp(m->ident, IDENT_FATBINARY, fb) ? "fatbinary" : "";
    cuabi__fatbin_free(&f);
    return CUABI_SUCCESS;
}

/* A new objcode of one image, with the fatbin's name expressions. */
static cuabi_status child(cuabi__objcode **out, cuabi__objcode *o, const cuabi__fatbin_image *m,
                          const char *arch, const char *caller)
{
    bool ptx = m->type == CUABI_CODE_PTX;
    size_t n = ptx ? strnlen((const char *)m->data, m->size) : m->size;
    void *copy = cuabi__malloc(n + 1);
    char name[600];
    if (!copy)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memcpy(copy, m->data, n);
    ((char *)copy)[n] = '\0';
    snprintf(name, sizeof name, "%.500s [%s]", o->name, arch);
    CUABI__TRY(cuabi__objcode_new(out, m->type, copy, n, name));
    const char *sigs = NULL;
    cuabi_status st = cuabi__objcode_signatures(o, &sigs);
    char *sig_copy = st == CUABI_SUCCESS && sigs ? cuabi__strdup(sigs) : NULL;
    if (st == CUABI_SUCCESS && sigs && !sig_copy)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    if (sig_copy)
        cuabi__objcode_set_signatures(*out, sig_copy);
    pthread_mutex_lock(&o->lock);
    for (size_t i = 0; st == CUABI_SUCCESS && i < o->name_count; i++)
        st = cuabi__objcode_add_name(*out, o->names[i].expression, o->names[i].lowered);
    pthread_mutex_unlock(&o->lock);
    if (st != CUABI_SUCCESS) {
        cuabi__object_release(&(*out)->base);
        *out = NULL;
    }
    (void)caller;
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_extract(cuabi_objcode **out, cuabi_objcode *objcode,
                                                const char *arch)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(arch, "%s: arch is NULL", __func__);
    bool virt = !strncmp(arch, "compute_", 8);
    unsigned want = arch_number(arch);
    CUABI__CHECK_ARG((virt || !strncmp(arch, "sm_", 3)) && want >= 10,
                     "%s: arch \"%s\" is not of the form sm_XX (the CUBIN) or compute_XX (the "
                     "PTX)", __func__, arch);
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    const cuabi__fatbin_image *m = NULL;
    cuabi_code_type type = virt ? CUABI_CODE_PTX : CUABI_CODE_CUBIN;
    for (size_t i = 0; i < f.count && !m; i++)
        if (f.images[i].type == type && f.images[i].arch == want)
            m = &f.images[i];
    cuabi_status st;
    if (!m) {
        char have[512];
        describe(&f, have, sizeof have);
        st = cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: %s has no %s for %s (it holds %s)",
                          __func__, o->name, cuabi__code_type_name(type), arch, have);
    } else if (m->compressed) {
        st = compressed(m, o->name, __func__);
    } else {
        cuabi__objcode *c;
        st = child(&c, o, m, arch, __func__);
        if (st == CUABI_SUCCESS)
            *out = CUABI__HANDLE(c, cuabi_objcode);
    }
    cuabi__fatbin_free(&f);
    return st;
}
