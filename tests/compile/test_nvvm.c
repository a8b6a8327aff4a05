/* NVVM IR programs without a GPU (libNVVM works here): text and bitcode IR
 * to PTX and LTO-IR, libdevice linked on request, the option mapping, name
 * lookups, the compile cache (a hit loads no libNVVM; the key names
 * libNVVM and libdevice), malformed IR and a missing libNVVM. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "compile/nvvm.h"
#include "compile/objcode.h"
#include "util/file.h"

static char tmpdir[] = "/tmp/cuabi-test-nvvm-XXXXXX";
static char *ir_text, *ir_bitcode;
static size_t ir_text_size, ir_bitcode_size;

/* A file of tests/fixtures/data, NUL-terminated (cuabi__free it). */
static char *slurp(const char *name, size_t *size)
{
    char path[4096];
    void *data;
    snprintf(path, sizeof path, "%s/tests/fixtures/data/%s", cuabi_test_srcdir(), name);
    ck_assert_ok(cuabi__read_file(path, &data, size, "test"));
    return data;
}

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(strcpy(tmpdir, "/tmp/cuabi-test-nvvm-XXXXXX")));
    setenv("CUABI_CACHE_DIR", tmpdir, 1);
    unsetenv("CUABI_CACHE");
    unsetenv("CUABI_NVVM_PATH");
    unsetenv("CUABI_LIBDEVICE_PATH");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
    if (!ir_text) {
        ir_text = slurp("nvvm_kernels.ll", &ir_text_size);
        ir_bitcode = slurp("nvvm_kernels.bc", &ir_bitcode_size);
    }
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}

static cuabi_program *make(bool bitcode)
{
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, bitcode ? ir_bitcode : ir_text,
                                      bitcode ? ir_bitcode_size : ir_text_size, NULL));
    return p;
}

static cuabi_program_options options(cuabi_code_type output)
{
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.output = output;
    return o;
}

/* Compile and return the output as a NUL-terminated copy (caller frees). */
static char *compile(cuabi_program *p, const cuabi_program_options *o, size_t *size,
                     cuabi_code_type *type)
{
    cuabi_objcode *code;
    ck_assert_msg(cuabi_program_compile(&code, p, o) == CUABI_SUCCESS, "%s",
                  cuabi_last_error()->message);
    const void *d;
    size_t n;
    ck_assert_ok(cuabi_objcode_bytes(&d, &n, code));
    ck_assert_ok(cuabi_objcode_code_type(type, code));
    char *copy = malloc(n + 1);
    memcpy(copy, d, n);
    copy[n] = '\0';
    *size = n;
    ck_assert_ok(cuabi_objcode_release(code));
    return copy;
}

static int hit_of(cuabi_program *p)
{
    int hit = -1;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    return hit;
}

START_TEST(text_and_bitcode_to_ptx)
{
    for (int bitcode = 0; bitcode < 2; bitcode++) {
        cuabi_program *p = make(bitcode);
        cuabi_program_options o = options(CUABI_CODE_PTX);
        size_t n;
        cuabi_code_type t;
        char *ptx = compile(p, &o, &n, &t);
        ck_assert_int_eq(t, CUABI_CODE_PTX);
        ck_assert_uint_eq(strlen(ptx), n);
        ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90"));
        ck_assert_ptr_nonnull(strstr(ptx, ".entry expk("));
        ck_assert_ptr_nonnull(strstr(ptx, ".entry scale("));
        /* without libdevice the math function stays an external call */
        ck_assert_ptr_nonnull(strstr(ptx, ".extern .func"));
        ck_assert_ptr_nonnull(strstr(ptx, "__nv_expf"));
        free(ptx);
        /* the kernels are found by their names in the IR (the PTX is
         * assembled for that, so __nv_expf must be in it) */
        cuabi_objcode *code;
        cuabi_kernel *k;
        o.libdevice = 1;
        ck_assert_ok(cuabi_program_compile(&code, p, &o));
        size_t count = 0;
        ck_assert_ok(cuabi_objcode_kernel_count(&count, code));
        ck_assert_uint_eq(count, 2);
        ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "scale"));
        ck_assert_ok(cuabi_kernel_release(k));
        ck_assert_ok(cuabi_objcode_release(code));
        ck_assert_ok(cuabi_program_release(p));
    }
}
END_TEST

START_TEST(libdevice_linked_on_request)
{
    for (int bitcode = 0; bitcode < 2; bitcode++) {
        cuabi_program *p = make(bitcode);
        cuabi_program_options o = options(CUABI_CODE_PTX);
        o.libdevice = 1;
        size_t n;
        cuabi_code_type t;
        char *ptx = compile(p, &o, &n, &t);
        /* __nv_expf is compiled in: no call out, an ex2 instruction instead */
        ck_assert_ptr_null(strstr(ptx, ".extern .func"));
        ck_assert_ptr_nonnull(strstr(ptx, "ex2.approx"));
        free(ptx);
        ck_assert_ok(cuabi_program_release(p));
    }
    /* a missing libdevice is named */
    setenv("CUABI_LIBDEVICE_PATH", "/nonexistent/libdevice.10.bc", 1);
    cuabi_program *p = make(false);
    cuabi_program_options o = options(CUABI_CODE_PTX);
    o.libdevice = 1;
    o.cache = 0;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("CUABI_LIBDEVICE_PATH=/nonexistent/libdevice.10.bc");
    /* issue 29: a FIFO there is refused at once (it blocked in fopen, and
     * through the cache in the key's look at the file), cache on and off */
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/libdevice.10.bc", tmpdir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    setenv("CUABI_LIBDEVICE_PATH", fifo, 1);
    alarm(20);
    for (int cache = 0; cache <= 1; cache++) {
        o.cache = cache;
        ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_IO);
        ck_assert_error_mentions("a FIFO, not a regular file");
    }
    alarm(0);
    unlink(fifo);
    unsetenv("CUABI_LIBDEVICE_PATH");
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

START_TEST(ltoir_output)
{
    for (int bitcode = 0; bitcode < 2; bitcode++) {
        cuabi_program *p = make(bitcode);
        cuabi_program_options o = options(CUABI_CODE_LTOIR);
        o.libdevice = 1;
        const char *names[] = { "expk", "scale" };
        o.name_expressions = names;
        o.num_name_expressions = 2;
        size_t n;
        cuabi_code_type t;
        char *lto = compile(p, &o, &n, &t);
        ck_assert_int_eq(t, CUABI_CODE_LTOIR);
        ck_assert_uint_gt(n, 64);
        /* libNVVM's LTO container, as nvJitLink takes it */
        ck_assert_int_eq(memcmp(lto, "\xed\x43\x4e\x7f", 4), 0);
        free(lto);
        const char *low;
        ck_assert_ok(cuabi_program_lowered_name(&low, p, "expk"));
        ck_assert_str_eq(low, "expk");
        ck_assert_ok(cuabi_program_release(p));
    }
}
END_TEST

START_TEST(options_map_to_libnvvm)
{
    cuabi_program *p = make(false);
    size_t n;
    cuabi_code_type t;
    /* fast_math: flush to zero (scale's multiply), approximate division
     * and square root */
    cuabi_program_options o = options(CUABI_CODE_PTX);
    o.libdevice = 1;
    o.fast_math = 1;
    char *ptx = compile(p, &o, &n, &t);
    ck_assert_ptr_nonnull(strstr(ptx, "mul.ftz.f32"));
    free(ptx);
    o.fast_math = 0;
    ptx = compile(p, &o, &n, &t);
    ck_assert_ptr_null(strstr(ptx, "mul.ftz.f32"));
    ck_assert_ptr_nonnull(strstr(ptx, "mul.f32"));
    free(ptx);
    /* debug and line information (the IR has no debug metadata, so they
     * change nothing here: what libNVVM is given is checked below) */
    o.opt_level = 0;
    o.debug = 1;
    free(compile(p, &o, &n, &t));
    o.debug = 0;
    o.line_info = 1;
    o.opt_level = 3;
    free(compile(p, &o, &n, &t));
    /* architectures: sm_XX and compute_XX alike (libNVVM targets compute_XX) */
    o = options(CUABI_CODE_PTX);
    o.arch = "compute_80";
    ptx = compile(p, &o, &n, &t);
    ck_assert_ptr_nonnull(strstr(ptx, ".target sm_80"));
    free(ptx);
    o.arch = "sm_90a";
    ptx = compile(p, &o, &n, &t);
    ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90a"));
    free(ptx);
    /* raw libNVVM options pass through; a bad one is the caller's error */
    const char *extra[] = { "-opt=0" };
    o.extra_options = extra;
    o.num_extra_options = 1;
    ptx = compile(p, &o, &n, &t);
    free(ptx);
    const char *bad[] = { "-no-such-option" };
    o.extra_options = bad;
    o.cache = 0;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("libNVVM rejected an option");
    /* an unknown architecture: libNVVM says so */
    o = options(CUABI_CODE_PTX);
    o.arch = "sm_10";
    o.cache = 0;
    ck_assert_int_ne(cuabi_program_compile(NULL, p, &o), CUABI_SUCCESS);
    /* a version 1 options struct has no libdevice field: it is not read */
    struct { cuabi_program_options v1; int beyond; } old;
    memset(&old, 0, sizeof old);
    old.v1 = options(CUABI_CODE_PTX);
    old.v1.version = 1;
    old.v1.libdevice = 7; /* beyond a version 1 struct: must be ignored */
    ptx = compile(p, &old.v1, &n, &t);
    ck_assert_ptr_nonnull(strstr(ptx, ".extern .func"));
    free(ptx);
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

static bool has_arg(const cuabi__compile_args *a, const char *arg)
{
    for (size_t i = 0; i < a->argc; i++)
        if (!strcmp(a->argv[i], arg))
            return true;
    return false;
}

/* What each option becomes on libNVVM's command line. */
START_TEST(argument_list)
{
    cuabi_program_options o = options(CUABI_CODE_LTOIR);
    o.arch = "sm_90a";
    o.opt_level = 0;
    o.debug = 1;
    o.line_info = 1;
    o.fast_math = 1;
    const char *extra[] = { "-prec-sqrt=1" };
    o.extra_options = extra;
    o.num_extra_options = 1;
    cuabi__compile_args a;
    ck_assert_ok(cuabi__compile_args_build(&a, CUABI_CODE_NVVM, &o, "test"));
    ck_assert_ptr_null(a.argv); /* built only to compile: a cache hit hashes without it */
    ck_assert_ok(cuabi__compile_args_argv(&a));
    static const char *const want[] = { "-arch=compute_90a", "-opt=0", "-g",
        "-generate-line-info", "-ftz=1", "-prec-div=0", "-prec-sqrt=0", "-fma=1",
        "-gen-lto" };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(has_arg(&a, want[i]), "%s missing", want[i]);
    ck_assert_str_eq(a.argv[a.argc - 1], "-prec-sqrt=1"); /* extra options last */
    cuabi__compile_args_free(&a);
    o = options(CUABI_CODE_PTX);
    o.arch = "compute_80";
    ck_assert_ok(cuabi__compile_args_build(&a, CUABI_CODE_NVVM, &o, "test"));
    ck_assert_ok(cuabi__compile_args_argv(&a));
    ck_assert_uint_eq(a.argc, 1);
    ck_assert_str_eq(a.argv[0], "-arch=compute_80");
    ck_assert_int_eq(a.libdevice, 0);
    cuabi__compile_args_free(&a);
}
END_TEST

START_TEST(options_that_do_not_apply)
{
    cuabi_program *p = make(false);
    cuabi_program_options o = options(CUABI_CODE_CUBIN);
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("CUABI_CODE_PTX");
    ck_assert_status(cuabi_program_compile(NULL, p, NULL), CUABI_ERROR_NOT_SUPPORTED);
    o = options(CUABI_CODE_FATBIN);
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_SUPPORTED);
    o = options(CUABI_CODE_PTX);
    o.std = "c++17";
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("options.std");
    o = options(CUABI_CODE_PTX);
    const char *defs[] = { "X=1" };
    o.defines = defs;
    o.num_defines = 1;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("NVVM IR");
    o = options(CUABI_CODE_PTX);
    o.relocatable = 1;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = options(CUABI_CODE_PTX);
    o.libdevice = 2;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("libdevice");
    o = options(CUABI_CODE_PTX);
    o.lto = 1;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_program_release(p));
    /* libdevice is for NVVM IR only */
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, "__global__ void k(){}", 0,
                                      NULL));
    o = options(CUABI_CODE_PTX);
    o.libdevice = 1;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("NVVM IR programs only");
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

START_TEST(name_lookups)
{
    for (int bitcode = 0; bitcode < 2; bitcode++) {
        cuabi_program *p = make(bitcode);
        cuabi_program_options o = options(CUABI_CODE_PTX);
        const char *names[] = { "scale", "expk" };
        o.name_expressions = names;
        o.num_name_expressions = 2;
        cuabi_objcode *code;
        ck_assert_ok(cuabi_program_compile(&code, p, &o));
        const char *low;
        ck_assert_ok(cuabi_program_lowered_name(&low, p, "scale"));
        ck_assert_str_eq(low, "scale");
        ck_assert_ok(cuabi_objcode_lowered_name(&low, code, "expk"));
        ck_assert_str_eq(low, "expk");
        ck_assert_ok(cuabi_objcode_release(code));
        /* a name the IR does not define */
        const char *missing[] = { "nothere" };
        o.name_expressions = missing;
        o.num_name_expressions = 1;
        ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_FOUND);
        ck_assert_error_mentions("nothere");
        /* "scal" is a prefix of a kernel's name, not a name */
        const char *prefix[] = { "scal" };
        o.name_expressions = prefix;
        if (!bitcode) /* bitcode with PTX output is checked in the PTX */
            ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_FOUND);
        ck_assert_ok(cuabi_program_release(p));
    }
}
END_TEST

START_TEST(malformed_ir)
{
    static const char *const bad[] = {
        "this is not NVVM IR\n",
        "define void @k() {\n  bogus\n}\n",
        "BC\xc0\xde garbage after the bitcode magic",
    };
    for (size_t i = 0; i < 3; i++) {
        cuabi_program *p;
        ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, bad[i], 0, NULL));
        cuabi_program_options o = options(CUABI_CODE_PTX);
        cuabi_objcode *code = (cuabi_objcode *)&code;
        ck_assert_status(cuabi_program_compile(&code, p, &o), CUABI_ERROR_COMPILE);
        ck_assert_ptr_null(code);
        ck_assert_error_mentions(i == 2 ? "program.bc" : "program.ll");
        ck_assert_error_mentions("failed to compile");
        const char *log;
        ck_assert_ok(cuabi_program_log(&log, p));
        if (i < 2) { /* the parser's message, in the log and the last error */
            ck_assert_ptr_nonnull(strstr(log, "parse"));
            ck_assert_ptr_nonnull(strstr(cuabi_last_error()->log, "parse"));
        }
        ck_assert_ok(cuabi_program_release(p));
    }
    /* bitcode cut short */
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, ir_bitcode, ir_bitcode_size / 2,
                                      "half.bc"));
    cuabi_program_options o = options(CUABI_CODE_LTOIR);
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_COMPILE);
    ck_assert_error_mentions("half.bc");
    ck_assert_ok(cuabi_program_release(p));
    /* bitcode holds NUL bytes: its size is needed, and accepted */
    ck_assert_ptr_nonnull(memchr(ir_bitcode, '\0', ir_bitcode_size));
    ck_assert_status(cuabi_program_create(&p, CUABI_CODE_PTX, ir_bitcode, ir_bitcode_size,
                                          NULL), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(cache_hits_load_no_libnvvm)
{
    /* as a fresh process: loading libNVVM records its identity in this
     * test's cache directory */
    cuabi__nvvm_reset_for_test();
    cuabi_program *p = make(true);
    cuabi_program_options o = options(CUABI_CODE_PTX);
    o.libdevice = 1;
    size_t n1, n2;
    cuabi_code_type t;
    char *first = compile(p, &o, &n1, &t);
    ck_assert_int_eq(hit_of(p), 0);
    char *again = compile(p, &o, &n2, &t);
    ck_assert_int_eq(hit_of(p), 1);
    ck_assert_uint_eq(n1, n2);
    ck_assert_int_eq(memcmp(first, again, n1), 0);
    free(again);
    /* another option or no libdevice: another key */
    o.libdevice = 0;
    free(compile(p, &o, &n2, &t));
    ck_assert_int_eq(hit_of(p), 0);
    o.libdevice = 1;
    o.opt_level = 0;
    free(compile(p, &o, &n2, &t));
    ck_assert_int_eq(hit_of(p), 0);
    o.opt_level = -1;
    /* text IR is another source */
    cuabi_program *text = make(false);
    free(compile(text, &o, &n2, &t));
    ck_assert_int_eq(hit_of(text), 0);
    ck_assert_ok(cuabi_program_release(text));
    /* a new process (as far as libNVVM goes): the disk answers, and
     * libNVVM stays unloaded */
    cuabi__nvvm_reset_for_test();
    ck_assert_ok(cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY));
    ck_assert(!cuabi__nvvm_loaded());
    again = compile(p, &o, &n2, &t);
    ck_assert_int_eq(hit_of(p), 2);
    ck_assert(!cuabi__nvvm_loaded());
    ck_assert_uint_eq(n1, n2);
    ck_assert_int_eq(memcmp(first, again, n1), 0);
    free(again);
    free(first);
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

/* The key pins libNVVM's file: another libNVVM (a copy elsewhere) misses. */
START_TEST(cache_key_names_libnvvm)
{
    const cuabi__nvvm *nv;
    ck_assert_ok(cuabi__nvvm_get(&nv));
    char copy[512], cmd[2048];
    snprintf(copy, sizeof copy, "%s/libnvvm.so.4", tmpdir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", cuabi__nvvm_info()->path, copy);
    ck_assert_int_eq(system(cmd), 0);
    cuabi_program *p = make(false);
    cuabi_program_options o = options(CUABI_CODE_PTX);
    size_t n;
    cuabi_code_type t;
    free(compile(p, &o, &n, &t));
    free(compile(p, &o, &n, &t));
    ck_assert_int_eq(hit_of(p), 1);
    setenv("CUABI_NVVM_PATH", copy, 1);
    cuabi__nvvm_reset_for_test();
    free(compile(p, &o, &n, &t));
    ck_assert_int_eq(hit_of(p), 0);
    ck_assert_str_eq(cuabi__nvvm_info()->path, copy);
    unsetenv("CUABI_NVVM_PATH");
    cuabi__nvvm_reset_for_test();
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

START_TEST(missing_libnvvm)
{
    setenv("CUABI_NVVM_PATH", "/nonexistent/nvvm/lib64/libnvvm.so", 1);
    cuabi__nvvm_reset_for_test();
    cuabi_program *p = make(false);
    cuabi_program_options o = options(CUABI_CODE_PTX);
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("libNVVM");
    ck_assert_error_mentions("/nonexistent/nvvm/lib64/libnvvm.so");
    ck_assert_error_mentions("cuabi_program_compile");
    o.cache = 0;
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_SUPPORTED);
    /* the rest of cuabi keeps working */
    cuabi_program *cxx;
    ck_assert_ok(cuabi_program_create(&cxx, CUABI_CODE_CUDA_CXX,
                                      "extern \"C\" __global__ void k(){}", 0, NULL));
    cuabi_program_options c = options(CUABI_CODE_PTX);
    ck_assert_ok(cuabi_program_compile(NULL, cxx, &c));
    ck_assert_ok(cuabi_program_release(cxx));
    /* a file that is not libNVVM */
    char path[4096];
    snprintf(path, sizeof path, "%s", cuabi__nvrtc_info()->path);
    setenv("CUABI_NVVM_PATH", path, 1);
    cuabi__nvvm_reset_for_test();
    ck_assert_status(cuabi_program_compile(NULL, p, &o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("lacks nvvm");
    /* without the override, every place looked is named when none loads:
     * here the default list finds it again */
    unsetenv("CUABI_NVVM_PATH");
    cuabi__nvvm_reset_for_test();
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ptr_nonnull(strstr(cuabi__nvvm_info()->path, "libnvvm.so"));
    ck_assert_ok(cuabi_program_release(p));
}
END_TEST

START_TEST(libdevice_beside_libnvvm)
{
    char path[4096], why[512];
    ck_assert_int_eq(cuabi__libdevice_locate(path, sizeof path, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(path, "libdevice.10.bc"));
    ck_assert_int_eq(access(path, R_OK), 0);
    setenv("CUABI_LIBDEVICE_PATH", "/nonexistent.bc", 1);
    ck_assert_int_eq(cuabi__libdevice_locate(path, sizeof path, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "/nonexistent.bc"));
    unsetenv("CUABI_LIBDEVICE_PATH");
}
END_TEST

START_TEST(no_leak_when_allocations_fail)
{
    long ok = 0;
    for (long n = 1; n < 400; n++) {
        cuabi_program *p = NULL;
        cuabi_objcode *o = NULL;
        cuabi_program_options opts = options(n % 2 ? CUABI_CODE_PTX : CUABI_CODE_LTOIR);
        opts.libdevice = 1;
        const char *names[] = { "scale" };
        opts.name_expressions = names;
        opts.num_name_expressions = 1;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_program_create(&p, CUABI_CODE_NVVM, ir_text, ir_text_size,
                                               NULL);
        if (st == CUABI_SUCCESS) {
            if (n % 3 == 0)
                cuabi_cache_clear(CUABI_CACHE_CLEAR_MEMORY);
            st = cuabi_program_compile(&o, p, &opts);
            cuabi__alloc_fail_at(0, false);
            ck_assert_ok(cuabi_program_release(p));
        }
        cuabi__alloc_fail_at(0, false);
        ck_assert_msg(st == CUABI_SUCCESS || st == CUABI_ERROR_OUT_OF_MEMORY,
                      "n=%ld: %s: %s", n, cuabi_status_name(st), cuabi_last_error()->message);
        if (o)
            ck_assert_ok(cuabi_objcode_release(o));
        ok += st == CUABI_SUCCESS;
    }
    ck_assert_int_gt(ok, 0);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("nvvm");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, text_and_bitcode_to_ptx);
    tcase_add_test(tc, libdevice_linked_on_request);
    tcase_add_test(tc, ltoir_output);
    tcase_add_test(tc, options_map_to_libnvvm);
    tcase_add_test(tc, argument_list);
    tcase_add_test(tc, options_that_do_not_apply);
    tcase_add_test(tc, name_lookups);
    tcase_add_test(tc, malformed_ir);
    tcase_add_test(tc, cache_hits_load_no_libnvvm);
    tcase_add_test(tc, cache_key_names_libnvvm);
    tcase_add_test(tc, missing_libnvvm);
    tcase_add_test(tc, libdevice_beside_libnvvm);
    tcase_add_test(tc, no_leak_when_allocations_fail);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
