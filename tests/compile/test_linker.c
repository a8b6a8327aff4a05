/* The linker (nvJitLink) without a GPU: LTO across two units, PTX output,
 * logs, option checks and misuse. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/cache.h"
#include "compile/objcode.h"
#include "compile/code_type.h"
#include "objcode_testutil.h"

static const char unit_kernel[] =
    "extern __device__ int helper(int x);\n"
    "extern \"C\" __global__ void kern(int *o) { o[threadIdx.x] = helper(threadIdx.x); }\n";
static const char unit_helper[] =
    "__device__ int helper(int x) { return x * 3 + 1; }\n";

static void *ltoir(const char *src, size_t *size)
{
    const char *opts[] = { "-arch=sm_90", "-dlto", "-rdc=true" };
    return test_nvrtc(src, opts, 3, CUABI_CODE_LTOIR, size);
}

static cuabi_linker *lto_linker(int verbose)
{
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = "sm_90";
    o.lto = 1;
    o.verbose = verbose;
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, &o));
    return l;
}

START_TEST(lto_across_two_units)
{
    size_t na, nb;
    void *a = ltoir(unit_kernel, &na), *b = ltoir(unit_helper, &nb);
    ck_assert_int_eq(cuabi__code_detect(a, na), CUABI_CODE_LTOIR);
    size_t live = cuabi__handle_live_count();
    cuabi_linker *l = lto_linker(1);
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_LTOIR, a, na, "kernel.ltoir"));
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_NONE, b, nb, NULL)); /* detected */
    cuabi_objcode *o;
    ck_assert_ok(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_CUBIN);
    int arch;
    ck_assert_ok(cuabi_objcode_arch(&arch, o));
    ck_assert_int_eq(arch, 90);
    /* The kernel is in the linked CUBIN's symbol table. */
    size_t n;
    const char *name;
    ck_assert_ok(cuabi_objcode_kernel_count(&n, o));
    ck_assert_uint_eq(n, 1);
    ck_assert_ok(cuabi_objcode_kernel_name(&name, o, 0));
    ck_assert_str_eq(name, "kern");
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "kern", NULL));
    ck_assert_int_gt(r.registers, 0);
    ck_assert_uint_eq(r.param_count, 1);
    const char *info;
    ck_assert_ok(cuabi_linker_info_log(&info, l));
    ck_assert_ptr_nonnull(info);
    /* -verbose reports the kernel's registers; they match the ELF. */
    const char *used = strstr(info, "Used ");
    if (used)
        ck_assert_int_eq((int)strtol(used + 5, NULL, 10), r.registers);
    /* A completed linker takes nothing more. */
    ck_assert_status(cuabi_linker_add_data(l, CUABI_CODE_LTOIR, a, na, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("completed");
    cuabi_objcode *again;
    ck_assert_status(cuabi_linker_complete(&again, l, CUABI_CODE_CUBIN),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_linker_destroy(l));
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    free(a);
    free(b);
}
END_TEST

START_TEST(lto_to_ptx_output)
{
    size_t na, nb;
    void *a = ltoir(unit_kernel, &na), *b = ltoir(unit_helper, &nb);
    cuabi_linker *l = lto_linker(0);
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_LTOIR, a, na, "a"));
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_LTOIR, b, nb, "b"));
    cuabi_objcode *o;
    ck_assert_ok(cuabi_linker_complete(&o, l, CUABI_CODE_PTX));
    const void *data;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&data, &size, o));
    ck_assert_ptr_nonnull(strstr(data, ".entry kern"));
    ck_assert_uint_eq(strlen(data), size);
    /* And that PTX links on its own (no LTO) to a CUBIN with the kernel. */
    cuabi_linker *l2;
    cuabi_linker_options opt = CUABI_LINKER_OPTIONS_INIT;
    opt.arch = "sm_90";
    opt.optimization = 0;
    opt.max_registers = 64;
    opt.line_info = 1;
    ck_assert_ok(cuabi_linker_create(&l2, &opt));
    ck_assert_ok(cuabi_linker_add_objcode(l2, o));
    cuabi_objcode *c;
    ck_assert_ok(cuabi_linker_complete(&c, l2, CUABI_CODE_CUBIN));
    int arch;
    ck_assert_ok(cuabi_objcode_arch(&arch, c));
    ck_assert_int_eq(arch, 90);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, c, "kern", "sm_90"));
    ck_assert_status(cuabi_objcode_kernel_resources(&r, c, "kern", "sm_80"),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("a CUBIN for sm_90, not sm_80");
    ck_assert_ok(cuabi_linker_destroy(l2));
    ck_assert_ok(cuabi_objcode_release(c));
    ck_assert_ok(cuabi_linker_destroy(l));
    ck_assert_ok(cuabi_objcode_release(o));
    free(a);
    free(b);
}
END_TEST

START_TEST(unresolved_symbol_is_a_link_error_with_log)
{
    size_t na;
    void *a = ltoir(unit_kernel, &na);
    cuabi_linker *l = lto_linker(0);
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_LTOIR, a, na, "kernel.ltoir"));
    cuabi_objcode *o = (cuabi_objcode *)1;
    ck_assert_status(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN), CUABI_ERROR_LINK);
    ck_assert_ptr_null(o);
    ck_assert_error_mentions("nvJitLinkComplete");
    ck_assert_int_ne(cuabi_last_error()->nvjitlink_result, 0);
    ck_assert_uint_gt(cuabi_last_error()->log_size, 0);
    ck_assert_ptr_nonnull(strstr(cuabi_last_error()->log, "helper"));
    const char *elog;
    ck_assert_ok(cuabi_linker_error_log(&elog, l));
    ck_assert_ptr_nonnull(strstr(elog, "helper"));
    ck_assert_ok(cuabi_linker_destroy(l));
    free(a);
}
END_TEST

START_TEST(ptx_inputs_from_memory_and_files)
{
    size_t n;
    const char *opts[] = { "-arch=compute_80" };
    char *ptx = test_nvrtc("extern \"C\" __global__ void k2(float *x) { x[0] = 2; }", opts, 1,
                           CUABI_CODE_PTX, &n);
    char path[] = "/tmp/cuabi-linker-XXXXXX.ptx";
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, ptx, n), (ssize_t)n);
    close(fd);
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = "sm_80";
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, &o));
    ck_assert_ok(cuabi_linker_add_file(l, CUABI_CODE_PTX, path));
    ck_assert_status(cuabi_linker_add_file(l, CUABI_CODE_PTX, "/nonexistent/x.ptx"),
                     CUABI_ERROR_IO);
    ck_assert_error_mentions("/nonexistent/x.ptx");
    /* issue 29: a FIFO is refused at once (it blocked in fopen) */
    char fifo[] = "/tmp/cuabi-linker-fifo-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(fifo));
    char fpath[64];
    snprintf(fpath, sizeof fpath, "%s/x.ptx", fifo);
    ck_assert_int_eq(mkfifo(fpath, 0600), 0);
    alarm(20);
    ck_assert_status(cuabi_linker_add_file(l, CUABI_CODE_PTX, fpath), CUABI_ERROR_IO);
    alarm(0);
    ck_assert_error_mentions("is a FIFO, not a regular file");
    unlink(fpath);
    rmdir(fifo);
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_linker_complete(&obj, l, CUABI_CODE_CUBIN));
    const char *name;
    ck_assert_ok(cuabi_objcode_kernel_name(&name, obj, 0));
    ck_assert_str_eq(name, "k2");
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_linker_destroy(l));
    /* PTX with a syntax error fails at the link with nvJitLink's message. */
    ck_assert_ok(cuabi_linker_create(&l, &o));
    static const char broken[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                                 ".visible .entry bad() { frobnicate; }\n";
    cuabi_status st = cuabi_linker_add_data(l, CUABI_CODE_PTX, broken, sizeof broken - 1, "b.ptx");
    if (st == CUABI_SUCCESS)
        st = cuabi_linker_complete(&obj, l, CUABI_CODE_CUBIN);
    ck_assert(st == CUABI_ERROR_LINK || st == CUABI_ERROR_INVALID_IMAGE);
    ck_assert_uint_gt(cuabi_last_error()->log_size, 0);
    ck_assert_ok(cuabi_linker_destroy(l));
    unlink(path);
    free(ptx);
}
END_TEST

START_TEST(options_are_checked)
{
    cuabi_linker *l = (cuabi_linker *)1;
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    ck_assert_status(cuabi_linker_create(NULL, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.version = 0;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_VERSION);
    ck_assert_ptr_null(l);
    o.version = CUABI_LINKER_OPTIONS_VERSION + 1;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_VERSION);
    cuabi_linker_options_init(&o, CUABI_LINKER_OPTIONS_VERSION);
    o.optimization = 7;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("optimization");
    o.optimization = -1;
    o.ftz = 2;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("ftz");
    o.ftz = 1;
    o.max_registers = -4;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.max_registers = 0;
    o.arch = "vax_11";
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("sm_XY");
    o.arch = "sm_90";
    o.extra_option_count = 1;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    /* An option nvJitLink refuses: at creation without the cache; with it,
     * nvJitLink sees the options only at completion (a hit never loads it). */
    const char *extra[] = { "-no-such-option" };
    o.extra_options = extra;
    ck_assert_ok(cuabi_cache_set_enabled(0));
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("nvJitLinkCreate");
    ck_assert_ok(cuabi_cache_set_enabled(1));
    ck_assert_ok(cuabi_linker_create(&l, &o));
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry k() { ret; }\n";
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_PTX, ptx, sizeof ptx - 1, "k.ptx"));
    cuabi_objcode *obj = (cuabi_objcode *)1;
    ck_assert_status(cuabi_linker_complete(&obj, l, CUABI_CODE_CUBIN),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(obj);
    ck_assert_error_mentions("nvJitLinkCreate");
    ck_assert_ok(cuabi_linker_destroy(l));
    const char *nulls[] = { NULL };
    o.extra_options = nulls;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    const char *good[] = { "-O3" };
    o.extra_options = good;
    ck_assert_ok(cuabi_linker_create(&l, &o));
    ck_assert_ok(cuabi_linker_destroy(l));
    ck_assert_ok(cuabi_linker_create(&l, NULL)); /* defaults: sm_90 without a GPU */
    ck_assert_ok(cuabi_linker_destroy(l));
}
END_TEST

START_TEST(bad_inputs_and_handles)
{
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, NULL));
    unsigned char junk[64];
    for (int i = 0; i < 64; i++)
        junk[i] = (unsigned char)(i * 13 + 7);
    ck_assert_status(cuabi_linker_add_data(l, CUABI_CODE_NONE, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_status(cuabi_linker_add_data(l, CUABI_CODE_CUDA_CXX, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_linker_add_data(l, (cuabi_code_type)99, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_linker_add_data(l, CUABI_CODE_CUBIN, NULL, 10, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_linker_add_data(l, CUABI_CODE_CUBIN, junk, 0, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_linker_add_file(l, CUABI_CODE_PTX, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_objcode *o;
    ck_assert_status(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("nothing to link");
    ck_assert_status(cuabi_linker_complete(&o, l, CUABI_CODE_LTOIR), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_linker_complete(NULL, l, CUABI_CODE_CUBIN), CUABI_ERROR_INVALID_ARGUMENT);
    const char *log;
    ck_assert_status(cuabi_linker_info_log(NULL, l), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_linker_destroy(l));
    /* Destroyed, NULL and wrong-type handles. */
    ck_assert_status(cuabi_linker_add_data(l, CUABI_CODE_CUBIN, junk, 4, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_info_log(&log, l), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_error_log(&log, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_destroy(l), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_add_file(NULL, CUABI_CODE_PTX, "x"), CUABI_ERROR_INVALID_HANDLE);
    cuabi_objcode *obj;
    const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
    ck_assert_ok(cuabi_objcode_from_memory(&obj, CUABI_CODE_PTX, ptx, sizeof ptx - 1, NULL));
    ck_assert_status(cuabi_linker_add_objcode((cuabi_linker *)obj, obj), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_destroy((cuabi_linker *)obj), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_objcode_release(obj));
}
END_TEST

/* ---------------------------------------------------------- the cache */

static char cachedir[64];

/* A cache directory of this test's own, the in-memory layer empty. */
static void fresh_cache(void)
{
    strcpy(cachedir, "/tmp/cuabi-test-linker-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(cachedir));
    setenv("CUABI_CACHE_DIR", cachedir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

static void drop_cache(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cachedir);
    ck_assert_int_eq(system(cmd), 0);
    unsetenv("CUABI_CACHE_DIR");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

typedef struct linked {
    int hit;
    void *bytes;
    size_t size;
    char *info, *error;
} linked;

static void linked_free(linked *r)
{
    free(r->bytes);
    free(r->info);
    free(r->error);
}

/* Link the inputs (a NULL name: the default) with `o` to `output`. */
static linked link_inputs(const cuabi_linker_options *o, cuabi_code_type output, size_t n,
                          const void *const *data, const size_t *sizes, const char *const *names,
                          cuabi_code_type type)
{
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, o));
    linked r = { .hit = -1 };
    ck_assert_ok(cuabi_linker_cache_hit(&r.hit, l));
    ck_assert_int_eq(r.hit, 0); /* nothing completed yet */
    for (size_t i = 0; i < n; i++)
        ck_assert_ok(cuabi_linker_add_data(l, type, data[i], sizes[i], names[i]));
    cuabi_objcode *obj;
    ck_assert_ok(cuabi_linker_complete(&obj, l, output));
    ck_assert_ok(cuabi_linker_cache_hit(&r.hit, l));
    const void *d;
    ck_assert_ok(cuabi_objcode_bytes(&d, &r.size, obj));
    r.bytes = malloc(r.size + 1);   /* + a NUL: PTX output is read as text */
    memcpy(r.bytes, d, r.size);
    ((char *)r.bytes)[r.size] = '\0';
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, obj));
    ck_assert_int_eq(t, output);
    if (output == CUABI_CODE_CUBIN) { /* a usable image, hit or not */
        const char *kname;
        ck_assert_ok(cuabi_objcode_kernel_name(&kname, obj, 0));
    }
    const char *log;
    ck_assert_ok(cuabi_linker_info_log(&log, l));
    r.info = strdup(log);
    ck_assert_ok(cuabi_linker_error_log(&log, l));
    r.error = strdup(log);
    ck_assert_ok(cuabi_objcode_release(obj));
    ck_assert_ok(cuabi_linker_destroy(l));
    return r;
}

static void same_bytes(const linked *x, const linked *y)
{
    ck_assert_uint_eq(x->size, y->size);
    ck_assert_int_eq(memcmp(x->bytes, y->bytes, x->size), 0);
}

/* The same output and logs (a hit's logs are the recorded ones: the info
 * log's compile time says which). */
static void same_output(const linked *x, const linked *y)
{
    same_bytes(x, y);
    ck_assert_str_eq(x->info, y->info);
    ck_assert_str_eq(x->error, y->error);
}

static int count_linked(const cuabi_cache_entry_info *e, void *payload)
{
    if (e->linked)
        ++*(int *)payload;
    return 0;
}

START_TEST(links_are_cached)
{
    size_t na, nb, nc;
    void *a = ltoir(unit_kernel, &na), *b = ltoir(unit_helper, &nb);
    void *c = ltoir("__device__ int helper(int x) { return x * 5 + 2; }\n", &nc);
    fresh_cache();
    size_t live = cuabi__handle_live_count();
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = "sm_90";
    o.lto = 1;
    o.verbose = 1; /* an info log to record */
    const void *ab[] = { a, b }, *ac[] = { a, c };
    size_t sab[] = { na, nb }, sac[] = { na, nc };
    const char *names[] = { "kernel.ltoir", "helper.ltoir" };
    const char *renamed[] = { "kernel.ltoir", "other.ltoir" };
    cuabi_cache_stats s0 = CUABI_CACHE_STATS_INIT, s1 = CUABI_CACHE_STATS_INIT;
    ck_assert_ok(cuabi_cache_get_stats(&s0));
    linked first = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(first.hit, 0);
    ck_assert_ptr_nonnull(strstr(first.info, "kern")); /* -verbose: the kernel's resources */
    ck_assert_ok(cuabi_cache_get_stats(&s1));
    ck_assert_uint_eq(s1.misses, s0.misses + 1);
    ck_assert_uint_eq(s1.stores, s0.stores + 1);
    /* Memory, then disk: the same bytes and logs. */
    linked mem = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(mem.hit, 1);
    same_output(&first, &mem);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    linked disk = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(disk.hit, 2);
    same_output(&first, &disk);
    int nlinked = 0;
    ck_assert_ok(cuabi_cache_list(count_linked, &nlinked));
    ck_assert_int_eq(nlinked, 1);
    /* Another input's bytes, another input name, another option, another
     * output kind: each a miss, then a hit. */
    linked r = link_inputs(&o, CUABI_CODE_CUBIN, 2, ac, sac, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 0);
    ck_assert(r.size != first.size || memcmp(r.bytes, first.bytes, r.size) != 0);
    linked_free(&r);
    r = link_inputs(&o, CUABI_CODE_CUBIN, 2, ac, sac, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 1);
    linked_free(&r);
    r = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, renamed, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 0);
    linked_free(&r);
    o.optimization = 0;
    r = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 0);
    linked_free(&r);
    o.optimization = -1;
    o.verbose = 0;
    r = link_inputs(&o, CUABI_CODE_PTX, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 0);
    ck_assert_ptr_nonnull(strstr(r.bytes, ".entry kern"));
    linked_free(&r);
    r = link_inputs(&o, CUABI_CODE_PTX, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 1);
    linked_free(&r);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    r = link_inputs(&o, CUABI_CODE_PTX, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 2);
    ck_assert_ptr_nonnull(strstr(r.bytes, ".entry kern")); /* NUL-terminated from disk */
    ck_assert_uint_eq(strlen(r.bytes), r.size);
    linked_free(&r);
    /* options.cache = 0 and the cache turned off: nvJitLink every time, no
     * lookup, no store. */
    o.verbose = 1;
    ck_assert_ok(cuabi_cache_get_stats(&s0));
    o.cache = 0;
    r = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 0);
    same_bytes(&first, &r);
    linked_free(&r);
    o.cache = 1;
    ck_assert_ok(cuabi_cache_set_enabled(0));
    r = link_inputs(&o, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 0);
    linked_free(&r);
    ck_assert_ok(cuabi_cache_set_enabled(1));
    ck_assert_ok(cuabi_cache_get_stats(&s1));
    ck_assert_uint_eq(s1.misses + s1.memory_hits + s1.disk_hits + s1.stores,
                      s0.misses + s0.memory_hits + s0.disk_hits + s0.stores);
    /* Version 1 options (no cache field) use the cache. */
    cuabi_linker_options v1;
    ck_assert_ok(cuabi_linker_options_init(&v1, 1));
    v1.arch = "sm_90";
    v1.lto = 1;
    v1.verbose = 1;
    r = link_inputs(&v1, CUABI_CODE_CUBIN, 2, ab, sab, names, CUABI_CODE_LTOIR);
    ck_assert_int_eq(r.hit, 2); /* the memory layer was cleared above */
    same_output(&first, &r);
    linked_free(&r);
    /* verify keeps the linked entries */
    cuabi_cache_verify_report rep = CUABI_CACHE_VERIFY_REPORT_INIT;
    ck_assert_ok(cuabi_cache_verify(&rep, NULL, NULL));
    ck_assert_uint_eq(rep.removed, 0);
    ck_assert_uint_ge(rep.checked, 5);
    linked_free(&first);
    linked_free(&mem);
    linked_free(&disk);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    drop_cache();
    free(a);
    free(b);
    free(c);
}
END_TEST

/* PTX inputs: the arch is in the key; a damaged entry is relinked; the size
 * limit evicts. */
/* A fatbin link (an architecture list) goes through the cache too: the
 * list is in the key, so another list is a miss and the same one a hit with
 * the same bytes. */
START_TEST(fatbin_links_are_cached_per_list)
{
    size_t n;
    const char *opts[] = { "-arch=compute_80" };
    char *ptx = test_nvrtc("extern \"C\" __global__ void k4(float *x) { x[0] = 4; }", opts, 1,
                           CUABI_CODE_PTX, &n);
    fresh_cache();
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = "sm_80,sm_90";
    const void *in[] = { ptx };
    const char *names[] = { NULL };
    linked first = link_inputs(&o, CUABI_CODE_FATBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(first.hit, 0);
    linked again = link_inputs(&o, CUABI_CODE_FATBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(again.hit, 1);
    same_bytes(&first, &again);
    linked_free(&again);
    o.arch = "sm_90,sm_80";
    linked other = link_inputs(&o, CUABI_CODE_FATBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(other.hit, 0);
    linked_free(&other);
    linked_free(&first);
    drop_cache();
    free(ptx);
}
END_TEST

START_TEST(ptx_links_are_cached_per_arch)
{
    size_t n;
    const char *opts[] = { "-arch=compute_80" };
    char *ptx = test_nvrtc("extern \"C\" __global__ void k3(float *x) { x[0] = 3; }", opts, 1,
                           CUABI_CODE_PTX, &n);
    fresh_cache();
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = "sm_80";
    const void *in[] = { ptx };
    const char *names[] = { NULL };
    linked r80 = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r80.hit, 0);
    o.arch = "sm_86";
    linked r = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r.hit, 0);
    linked_free(&r);
    o.arch = "sm_80";
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    r = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r.hit, 2);
    same_output(&r80, &r);
    linked_free(&r);
    /* Damage every entry file: misses that relink, and store again. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "for f in %s/*.bin; do printf 'X' | dd of=$f bs=1 seek=100 "
             "conv=notrunc 2>/dev/null; done", cachedir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    r = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r.hit, 0);
    same_bytes(&r80, &r);
    linked_free(&r);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    r = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r.hit, 2);
    linked_free(&r);
    /* The size limit evicts linked entries like any other: all but the
     * newest go. */
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    ck_assert_ok(cuabi_cache_get_stats(&s));
    ck_assert_uint_eq(s.entries, 2);
    ck_assert_ok(cuabi_cache_set_size_limit(1));
    o.arch = "sm_89";
    r = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r.hit, 0);
    linked_free(&r);
    ck_assert_ok(cuabi_cache_get_stats(&s));
    ck_assert_uint_eq(s.entries, 1);
    ck_assert_uint_ge(s.evictions, 2);
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    r = link_inputs(&o, CUABI_CODE_CUBIN, 1, in, &n, names, CUABI_CODE_PTX);
    ck_assert_int_eq(r.hit, 2); /* the newest stayed */
    linked_free(&r);
    linked_free(&r80);
    drop_cache();
    free(ptx);
}
END_TEST

START_TEST(cache_hit_and_cache_option_are_checked)
{
    int hit;
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, NULL));
    ck_assert_status(cuabi_linker_cache_hit(NULL, l), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_linker_cache_hit");
    ck_assert_ok(cuabi_linker_destroy(l));
    ck_assert_status(cuabi_linker_cache_hit(&hit, l), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_linker_cache_hit(&hit, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_objcode *obj;
    const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
    ck_assert_ok(cuabi_objcode_from_memory(&obj, CUABI_CODE_PTX, ptx, sizeof ptx - 1, NULL));
    ck_assert_status(cuabi_linker_cache_hit(&hit, (cuabi_linker *)obj), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_objcode_release(obj));
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.cache = 2;
    ck_assert_status(cuabi_linker_create(&l, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("options->cache");
}
END_TEST

/* Without nvJitLink the linker says so. Checked in a fresh process (this
 * one has loaded nvJitLink already): main() runs no_nvjitlink_child(). */
static int no_nvjitlink_child(void)
{
    cuabi_linker *l;
    cuabi_status st = cuabi_linker_create(&l, NULL);
    int ok = st == CUABI_ERROR_NVJITLINK_NOT_FOUND &&
             strstr(cuabi_last_error()->message, "nvJitLink") != NULL;
    if (!ok)
        fprintf(stderr, "linker_create: %s\n", cuabi_last_error()->message);
    /* Offline queries on PTX need it too, and say so. */
    cuabi_objcode *o;
    const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ok = ok && cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, ptx, sizeof ptx - 1, NULL) == 0;
    ok = ok && cuabi_objcode_kernel_resources(&r, o, "k", NULL) == CUABI_ERROR_NVJITLINK_NOT_FOUND;
    if (!ok)
        fprintf(stderr, "kernel_resources: %s\n", cuabi_last_error()->message);
    cuabi_objcode_release(o);
    return ok ? 0 : 1;
}

START_TEST(without_nvjitlink)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("CUABI_NVJITLINK_PATH", "/nonexistent/libnvJitLink.so", 1);
        setenv("CUABI_TEST_NO_NVJITLINK_CHILD", "1", 1);
        execl("/proc/self/exe", "test_linker", (char *)NULL);
        _exit(2);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

START_TEST(allocation_failures_do_not_leak)
{
    size_t na, nb;
    void *a = ltoir(unit_kernel, &na), *b = ltoir(unit_helper, &nb);
    size_t live = cuabi__handle_live_count();
    for (long n = 1; n < 400; n++) {
        cuabi_linker *l = NULL;
        cuabi_objcode *o = NULL;
        cuabi_linker_options opt = CUABI_LINKER_OPTIONS_INIT;
        opt.lto = 1;
        opt.arch = "sm_90";
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_linker_create(&l, &opt);
        if (st == CUABI_SUCCESS)
            st = cuabi_linker_add_data(l, CUABI_CODE_LTOIR, a, na, "a");
        if (st == CUABI_SUCCESS)
            st = cuabi_linker_add_data(l, CUABI_CODE_LTOIR, b, nb, "b");
        if (st == CUABI_SUCCESS)
            st = cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN);
        cuabi__alloc_fail_at(0, false);
        ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_OUT_OF_MEMORY);
        if (l)
            ck_assert_ok(cuabi_linker_destroy(l));
        if (o)
            ck_assert_ok(cuabi_objcode_release(o));
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
        if (st == CUABI_SUCCESS)
            break;
    }
    free(a);
    free(b);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    if (getenv("CUABI_TEST_NO_NVJITLINK_CHILD"))
        return no_nvjitlink_child();
    Suite *s = suite_create("linker");
    TCase *tc = tcase_create("linker");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, lto_across_two_units);
    tcase_add_test(tc, lto_to_ptx_output);
    tcase_add_test(tc, unresolved_symbol_is_a_link_error_with_log);
    tcase_add_test(tc, ptx_inputs_from_memory_and_files);
    tcase_add_test(tc, options_are_checked);
    tcase_add_test(tc, bad_inputs_and_handles);
    tcase_add_test(tc, without_nvjitlink);
    tcase_add_test(tc, allocation_failures_do_not_leak);
    tcase_add_test(tc, links_are_cached);
    tcase_add_test(tc, ptx_links_are_cached_per_arch);
    tcase_add_test(tc, fatbin_links_are_cached_per_list);
    tcase_add_test(tc, cache_hit_and_cache_option_are_checked);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
