/* Making fatbins: through nvFatbin when it loads (src/platform/loader.c),
 * else the toolkit's `fatbinary` tool run in a temporary directory (see
 * fatbin.h). */
#include "compile/fatbin.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/code_type.h"
#include "util/file.h"

extern char **environ;

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
        snprintf(ident, sizeof ident, CUABI__IDENT_NVFATBIN ":%zu", i);
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

/* A new file of our own temporary directory: never one that is there
 * already, nor through a link. */
static cuabi_status write_file(const char *path, const void *data, size_t size,
                               const char *caller)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
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
    argv[a++] = "--ident=" CUABI__IDENT_FATBINARY;
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
