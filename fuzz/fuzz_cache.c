/* Mutated compile-cache entries (the read path of src/compile/cache.c): the input
 * becomes the entry file of a fixed program's key in a private cache
 * directory, and the program is looked up and, on a hit, "compiled" from
 * the entry (an objcode sharing the entry's bytes and name map), then the cache
 * is listed and verified. A corrupt entry must be reported as a miss and
 * removed, never crash. Byte 0 of the input: bit 0 set = fix the header up
 * (magic, format, payload length, key and checksum) so the mutations reach
 * the blob parser behind the checksum; bit 1 set = then make the header
 * claim 2^40 more payload bytes than the file holds (issue 29: the claim is
 * checked before anything is read); the rest is the file, written 0600 (an
 * entry that is not this user's own is never read, nor removed).
 *
 * CUABI_FUZZ_WRITE_SEED=FILE: compile the program for real once and write
 * its entry (with the mode byte) to FILE, for the seed corpus. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "runtime/stream.h"
#include "runtime/event.h"
#include "compile/cache.h"
#include "compile/program.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char src[] =
    "template <typename T> __global__ void fill(T *p, T v) { p[threadIdx.x] = v; }\n";
static const char *exprs[] = { "fill<int>" };
static cuabi_program *prog;
static cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
static cuabi__cache_key key;
static char *path;

static int list_fn(const cuabi_cache_entry_info *info, void *payload)
{
    (void)info;
    (void)payload;
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[] = "/tmp/cuabi-fuzz-cache-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    setenv("CUABI_CACHE_DIR", dir, 1);
    unsetenv("CUABI_CACHE");
    opts.arch = "sm_90";
    opts.output = CUABI_CODE_PTX;
    opts.name_expressions = exprs;
    opts.num_name_expressions = 1;
    if (cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, 0, "fill.cu") != CUABI_SUCCESS)
        abort();
    cuabi__program *p;
    cuabi__compile_args a;
    if (cuabi__handle_get(prog, CUABI__T_PROGRAM, (void **)&p, "fuzz") != CUABI_SUCCESS ||
        cuabi__compile_args_build(&a, CUABI_CODE_CUDA_CXX, &opts, "fuzz") != CUABI_SUCCESS ||
        cuabi__program_key(&key, p, &a) != CUABI_SUCCESS)
        abort();
    cuabi__compile_args_free(&a);
    path = cuabi__cache_entry_path(&key);
    if (!path)
        abort();
    const char *seed = getenv("CUABI_FUZZ_WRITE_SEED");
    if (seed) {
        cuabi_objcode *o;
        if (cuabi_program_compile(&o, prog, &opts) != CUABI_SUCCESS)
            abort();
        cuabi_objcode_release(o);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "printf '\\001' > '%s' && cat '%s' >> '%s'", seed, path, seed);
        if (system(cmd) != 0)
            abort();
    }
    return 0;
}

/* Make the header consistent with the body (what a bit flip in the body
 * after a correct checksum would look like). */
static void fix_up(uint8_t *b, size_t n)
{
    if (n < 64)
        return;
    uint32_t format = CUABI__CACHE_FORMAT;
    uint64_t payload = n - 64;
    memcpy(b, "CUABICE", 8);
    memcpy(b + 8, &format, 4);
    memcpy(b + 16, &payload, 8);
    memcpy(b + 24, key.b, 16);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(b + 64, payload));
    memcpy(b + 40, c.digest, 16);
}

/* The entry file, this user's own (0600), whatever umask says. */
static void write_entry(const uint8_t *bytes, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0 || write(fd, bytes, n) != (ssize_t)n || close(fd) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t *file = malloc(size);
    memcpy(file, data + 1, size - 1);
    if (data[0] & 1)
        fix_up(file, size - 1);
    if ((data[0] & 2) && size - 1 >= 64) {
        uint64_t payload;
        memcpy(&payload, file + 16, 8);
        payload += (uint64_t)1 << 40;
        memcpy(file + 16, &payload, 8);
    }
    write_entry(file, size - 1);
    free(file);

    cuabi__cache_reset_for_test();
    cuabi__codeblob *b = NULL;
    cuabi__str notes = { 0 };
    int where = 0;
    if (cuabi__cache_lookup(&key, &b, &where, &notes) != CUABI_SUCCESS)
        abort(); /* only out of memory may fail */
    cuabi__codeblob_release(b);
    cuabi__str_free(&notes);
    if (where == 2) {
        /* The entry is in memory now: the compile takes it from there. */
        cuabi_objcode *o = NULL;
        if (cuabi_program_compile(&o, prog, &opts) == CUABI_SUCCESS) {
            const char *lowered;
            size_t count;
            cuabi_code_type t;
            (void)cuabi_objcode_lowered_name(&lowered, o, "fill<int>");
            /* Offline enumeration only for CUBIN (PTX would go to nvJitLink). */
            if (cuabi_objcode_code_type(&t, o) == CUABI_SUCCESS && t == CUABI_CODE_CUBIN)
                (void)cuabi_objcode_kernel_count(&count, o);
            cuabi_objcode_release(o);
        }
    } else if (access(path, F_OK) == 0) {
        __builtin_trap(); /* a corrupt entry must be removed */
    }
    cuabi_cache_stats stats = CUABI_CACHE_STATS_INIT;
    (void)cuabi_cache_get_stats(&stats);
    write_entry(data + 1, size - 1); /* listing reads the header of each file */
    (void)cuabi_cache_list(list_fn, NULL);
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    if (cuabi_cache_verify_each(&r, NULL, NULL) != CUABI_SUCCESS || r.skipped)
        __builtin_trap(); /* a file of ours, readable: checked, never skipped */
    unlink(path);
    return 0;
}
