/* cuda.core's compile-side names over the C API, without a GPU (NVRTC,
 * libNVVM and nvJitLink work here): the compiler's own program and
 * nvJitLink session (cuabi_program_backend_handle, cuabi_linker_backend_handle),
 * the argument lists as the compilers receive them (*_options_render),
 * precompiled headers (options version 3: pch, create_pch, use_pch... and
 * cuabi_program_pch_status), NVVM extra modules, numba_debug, bundled
 * headers, and what each does to the compile cache. */
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "fake_driver.h"
#include "compile/program.h"
#include "platform/loader.h"
#include "platform/nvvm_lib.h"

static const char *kernel_src =
    "extern \"C\" __global__ void axpy(float a, const float *x, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

#define NVVM_HEAD                                                                        \
    "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-"    \
    "i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n" \
    "target triple = \"nvptx64-nvidia-cuda\"\n"

/* A kernel calling a function another module defines. */
static const char nvvm_main[] =
    NVVM_HEAD
    "declare float @twice(float)\n"
    "define void @k(float* %x) {\n"
    "  %v = load float, float* %x\n"
    "  %e = call float @twice(float %v)\n"
    "  store float %e, float* %x\n"
    "  ret void\n"
    "}\n"
    "!nvvm.annotations = !{!0}\n"
    "!0 = !{void (float*)* @k, !\"kernel\", i32 1}\n"
    "!nvvmir.version = !{!1}\n"
    "!1 = !{i32 2, i32 0, i32 3, i32 1}\n";

static const char nvvm_twice[] =
    NVVM_HEAD
    "define float @twice(float %v) {\n"
    "  %r = fmul float %v, 5.0\n"
    "  ret float %r\n"
    "}\n"
    "!nvvmir.version = !{!0}\n"
    "!0 = !{i32 2, i32 0, i32 3, i32 1}\n";

static const char nvvm_thrice[] =
    NVVM_HEAD
    "define float @twice(float %v) {\n"
    "  %r = fmul float %v, 3.0\n"
    "  ret float %r\n"
    "}\n"
    "!nvvmir.version = !{!0}\n"
    "!0 = !{i32 2, i32 0, i32 3, i32 1}\n";

static char tmpdir[] = "/tmp/cuabi-test-backend-XXXXXX";

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(strcpy(tmpdir, "/tmp/cuabi-test-backend-XXXXXX")));
    setenv("CUABI_CACHE_DIR", tmpdir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_cache_set_directory(NULL));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
}

/* The rendered list as an array of pointers into `buf` (NULL-terminated). */
static size_t split(char *buf, size_t size, const char **argv, size_t cap)
{
    size_t n = 0;
    for (size_t at = 0; at < size && n + 1 < cap; at += strlen(buf + at) + 1)
        argv[n++] = buf + at;
    argv[n] = NULL;
    return n;
}

static size_t render(cuabi_code_type type, const cuabi_program_options *o, char *buf,
                     size_t cap, const char **argv)
{
    size_t size = cap;
    ck_assert_ok(cuabi_program_options_render(buf, &size, type, o));
    return split(buf, size, argv, 64);
}

static bool has(const char **argv, const char *want)
{
    for (; *argv; argv++)
        if (!strcmp(*argv, want))
            return true;
    return false;
}

/* ------------------------------------------------------------ rendering */

static void check_argv_agrees(cuabi_code_type type, const cuabi_program_options *o)
{
    char buf[4096];
    const char *argv[64];
    size_t n = render(type, o, buf, sizeof buf, argv);
    cuabi__compile_args a;
    ck_assert_ok(cuabi__compile_args_build(&a, type, o, "test"));
    ck_assert_ok(cuabi__compile_args_argv(&a));
    ck_assert_uint_eq(a.argc, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(a.argv[i], argv[i]);
    cuabi__compile_args_free(&a);
}

START_TEST(render_is_what_the_compiler_gets)
{
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    const char *defs[] = { "N=4" }, *extra[] = { "--restrict" };
    o.arch = "sm_80";
    o.std = "c++17";
    o.opt_level = 2;
    o.line_info = 1;
    o.defines = defs;
    o.num_defines = 1;
    o.extra_options = extra;
    o.num_extra_options = 1;
    o.pch_verbose = 1;
    o.pch_messages = 0;
    o.instantiate_templates_in_pch = 1;
    o.use_pch = "/nonexistent/x.pch";
    o.pch_dir = "/tmp/pchdir";
    o.numba_debug = 1;
    char buf[4096];
    const char *argv[64];
    size_t n = render(CUABI_CODE_CUDA_CXX, &o, buf, sizeof buf, argv);
    ck_assert_uint_ge(n, 10);
    ck_assert_str_eq(argv[0], "-arch=sm_80");
    ck_assert(has(argv, "-std=c++17"));
    ck_assert(has(argv, "--ptxas-options=-O2"));
    ck_assert(has(argv, "-lineinfo"));
    ck_assert(has(argv, "-DN=4"));
    ck_assert(has(argv, "--use-pch=/nonexistent/x.pch"));
    ck_assert(has(argv, "--pch-dir=/tmp/pchdir"));
    ck_assert(has(argv, "--pch-verbose=true"));
    ck_assert(has(argv, "--pch-messages=false"));
    ck_assert(has(argv, "--instantiate-templates-in-pch=true"));
    ck_assert(has(argv, "--numba-debug"));
    ck_assert_str_eq(argv[n - 1], "--restrict"); /* raw options last */
    check_argv_agrees(CUABI_CODE_CUDA_CXX, &o);

    /* NVVM IR: libNVVM's spelling; numba_debug too. */
    cuabi_program_options v = CUABI_PROGRAM_OPTIONS_INIT;
    v.arch = "sm_90";
    v.output = CUABI_CODE_PTX;
    v.numba_debug = 1;
    n = render(CUABI_CODE_NVVM, &v, buf, sizeof buf, argv);
    ck_assert_str_eq(argv[0], "-arch=compute_90");
    ck_assert(has(argv, "--numba-debug"));
    check_argv_agrees(CUABI_CODE_NVVM, &v);

    /* PTX: nvJitLink cannot honor numba_debug; it is dropped, as cuda.core does. */
    cuabi_program_options x = CUABI_PROGRAM_OPTIONS_INIT;
    x.arch = "sm_90";
    x.numba_debug = 1;
    x.debug = 1;
    n = render(CUABI_CODE_PTX, &x, buf, sizeof buf, argv);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(argv[0], "-arch=sm_90");
    ck_assert_str_eq(argv[1], "-g");
    check_argv_agrees(CUABI_CODE_PTX, &x);

    /* Defaults (NULL): no driver here, so sm_90, and the built-in header. */
    n = render(CUABI_CODE_CUDA_CXX, NULL, buf, sizeof buf, argv);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(argv[0], "-arch=sm_90");
    ck_assert(!strncmp(argv[1], "--pre-include=", 14));
}
END_TEST

START_TEST(render_buffer_and_errors)
{
    size_t size = 0, need;
    ck_assert_status(cuabi_program_options_render(NULL, &size, CUABI_CODE_CUDA_CXX, NULL),
                     CUABI_ERROR_BUFFER_TOO_SMALL);
    need = size;
    ck_assert_uint_gt(need, 10);
    char small[8];
    size = sizeof small;
    ck_assert_status(cuabi_program_options_render(small, &size, CUABI_CODE_CUDA_CXX, NULL),
                     CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(size, need);
    char *exact = malloc(need);
    size = need;
    ck_assert_ok(cuabi_program_options_render(exact, &size, CUABI_CODE_CUDA_CXX, NULL));
    ck_assert_uint_eq(size, need);
    ck_assert_int_eq(exact[need - 1], '\0');
    free(exact);
    ck_assert_status(cuabi_program_options_render(NULL, NULL, CUABI_CODE_CUDA_CXX, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    size = 4;
    ck_assert_status(cuabi_program_options_render(NULL, &size, CUABI_CODE_CUDA_CXX, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    size = 0;
    ck_assert_status(cuabi_program_options_render(NULL, &size, CUABI_CODE_CUBIN, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);

    /* Checked as a compile checks them. */
    char buf[1024];
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.pch = 1;
    o.create_pch = "/tmp/x.pch";
    size = sizeof buf;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cannot be given together");
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.pch_verbose = 2;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("pch_verbose");
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.create_pch = "";
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("create_pch is empty");
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.numba_debug = 2;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* NVRTC-only options on PTX and NVVM IR programs */
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.use_pch = "/tmp/x.pch";
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_PTX, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("use_pch applies to CUDA C++");
    o.use_pch = NULL;
    o.use_bundled_headers = 1;
    o.output = CUABI_CODE_PTX;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_NVVM, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("use_bundled_headers");
    /* extra sources: NVVM IR only, each named and non-empty */
    const char *names[] = { "m" }, *srcs[] = { "x" }, *empty[] = { "" };
    o = (cuabi_program_options)CUABI_PROGRAM_OPTIONS_INIT;
    o.extra_source_names = names;
    o.extra_sources = srcs;
    o.num_extra_sources = 1;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("NVVM IR modules");
    o.output = CUABI_CODE_PTX;
    o.extra_sources = empty;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_NVVM, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("is empty");
    o.extra_sources = NULL;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_NVVM, &o),
                     CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* A version-2 caller passes a shorter struct: nothing past it is read
 * (ASan sees an overread of the exact-size allocation). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds" /* the point: a shorter struct */
START_TEST(version_2_struct_is_read_to_its_end_only)
{
    size_t v2 = offsetof(cuabi_program_options, pch);
    cuabi_program_options *o = malloc(v2);
    ck_assert_ok(cuabi_program_options_init(o, 2));
    ck_assert_uint_eq(o->version, 2);
    o->arch = "sm_90";
    char buf[1024];
    const char *argv[64];
    size_t n = render(CUABI_CODE_CUDA_CXX, o, buf, sizeof buf, argv);
    ck_assert_uint_eq(n, 2);
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "v2.cu"));
    o->output = CUABI_CODE_PTX;
    ck_assert_ok(cuabi_program_compile(NULL, p, o));
    cuabi_pch_status pst = 9;
    ck_assert_ok(cuabi_program_pch_status(&pst, p));
    ck_assert_int_eq(pst, CUABI_PCH_NONE);
    cuabi_program_release(p);
    free(o);
}
END_TEST
#pragma GCC diagnostic pop

START_TEST(linker_render)
{
    char buf[1024];
    const char *argv[64];
    size_t size = sizeof buf;
    ck_assert_ok(cuabi_linker_options_render(buf, &size, NULL));
    size_t n = split(buf, size, argv, 64);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(argv[0], "-arch=sm_90");
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    const char *extra[] = { "-split-compile=0" };
    o.arch = "sm_80";
    o.lto = 1;
    o.optimization = 3;
    o.debug = 1;
    o.ftz = 0;
    o.fma = 1;
    o.max_registers = 64;
    o.verbose = 1;
    o.extra_options = extra;
    o.extra_option_count = 1;
    size = sizeof buf;
    ck_assert_ok(cuabi_linker_options_render(buf, &size, &o));
    n = split(buf, size, argv, 64);
    static const char *const want[] = { "-arch=sm_80", "-lto", "-O3", "-g", "-ftz=0",
                                        "-fma=1", "-maxrregcount=64", "-verbose",
                                        "-split-compile=0" };
    ck_assert_uint_eq(n, sizeof want / sizeof *want);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(argv[i], want[i]);
    /* A fatbin's list: the first architecture leads. */
    o.arch = "sm_80,sm_90";
    size = sizeof buf;
    ck_assert_ok(cuabi_linker_options_render(buf, &size, &o));
    ck_assert_str_eq(buf, "-arch=sm_80");
    /* too small, then errors as cuabi_linker_create gives them */
    size = 3;
    ck_assert_status(cuabi_linker_options_render(buf, &size, &o), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_gt(size, 3);
    o.arch = "sm_9";
    size = sizeof buf;
    ck_assert_status(cuabi_linker_options_render(buf, &size, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.arch = NULL;
    o.ftz = 7;
    ck_assert_status(cuabi_linker_options_render(buf, &size, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o.ftz = -1;
    o.extra_options = NULL;
    ck_assert_status(cuabi_linker_options_render(buf, &size, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_linker_options_render(buf, NULL, &o), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* ------------------------------------------------------------ handles */

START_TEST(program_handle_is_nvrtcs_program)
{
    const cuabi__nvrtc *nv;
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "h.cu"));
    /* Never asked: a compile keeps no compiler program. */
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.output = CUABI_CODE_PTX;
    o.cache = 0;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    void *obj;
    ck_assert_ok(cuabi__handle_get(p, CUABI__T_PROGRAM, &obj, "test"));
    ck_assert_ptr_null(((cuabi__program *)obj)->backend);
    /* Asked: one from the source exists at once, usable with NVRTC. */
    void *h = NULL;
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    ck_assert_ptr_nonnull(h);
    void *again = NULL;
    ck_assert_ok(cuabi_program_backend_handle(&again, p));
    ck_assert_ptr_eq(h, again);
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    size_t n = 0;
    ck_assert_int_eq(nv->nvrtcGetProgramLogSize(h, &n), NVRTC_SUCCESS);
    /* From now on the compile's own program is kept: its PTX is NVRTC's answer. */
    o.line_info = 1;
    cuabi_objcode *oc;
    ck_assert_ok(cuabi_program_compile(&oc, p, &o));
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(nv->nvrtcGetPTXSize(h, &n), NVRTC_SUCCESS);
    const void *code;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, oc));
    ck_assert_uint_eq(n, size + 1); /* NVRTC counts the NUL */
    char *ptx = malloc(n);
    ck_assert_int_eq(nv->nvrtcGetPTX(h, ptx), NVRTC_SUCCESS);
    ck_assert_int_eq(memcmp(ptx, code, size), 0);
    free(ptx);
    cuabi_objcode_release(oc);
    /* A cache hit runs no compiler: the handle stays the last compile's. */
    o.cache = 1;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o)); /* miss: stored, new program */
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    ck_assert_ok(cuabi_program_compile(NULL, p, &o)); /* memory hit */
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1);
    ck_assert_ok(cuabi_program_backend_handle(&again, p));
    ck_assert_ptr_eq(h, again);
    /* A fatbin compiles several programs and keeps none. */
    cuabi_program_options f = CUABI_PROGRAM_OPTIONS_INIT;
    f.arch = "sm_80,compute_90";
    f.output = CUABI_CODE_FATBIN;
    f.cache = 0;
    cuabi_status st = cuabi_program_compile(NULL, p, &f);
    ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_NOT_FOUND); /* no packer here */
    ck_assert_ok(cuabi_program_backend_handle(&again, p));
    ck_assert_ptr_eq(h, again);
    cuabi_program_release(p); /* frees the kept program (ASan/leak checks) */

    /* PTX programs have none; bad arguments */
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_PTX,
                                      ".version 8.0\n.target sm_90\n.address_size 64\n", 0,
                                      NULL));
    ck_assert_status(cuabi_program_backend_handle(&h, p), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_null(h);
    ck_assert_status(cuabi_program_backend_handle(NULL, p), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_program_release(p);
    ck_assert_status(cuabi_program_backend_handle(&h, p), CUABI_ERROR_INVALID_HANDLE);
    cuabi_pch_status ps;
    ck_assert_status(cuabi_program_pch_status(&ps, p), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_program_pch_status(NULL, p), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

static bool have_nvvm(void)
{
    const cuabi__nvvm *nv;
    if (cuabi__nvvm_get(&nv) == CUABI_SUCCESS)
        return true;
    printf("libNVVM not found (%s): NVVM cases skipped\n", cuabi_last_error()->message);
    cuabi_error_clear();
    return false;
}

START_TEST(nvvm_handle_and_extra_sources)
{
    if (!have_nvvm())
        return;
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_NVVM, nvvm_main, 0, "main.ll"));
    void *h = NULL;
    ck_assert_ok(cuabi_program_backend_handle(&h, p));
    ck_assert_ptr_nonnull(h);
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.output = CUABI_CODE_PTX;
    /* Alone, @twice stays an external function of the PTX. */
    cuabi_objcode *oc;
    const void *code;
    size_t size;
    ck_assert_ok(cuabi_program_compile(&oc, p, &o));
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, oc));
    ck_assert_ptr_nonnull(memmem(code, size, ".extern .func", 13));
    cuabi_objcode_release(oc);
    const char *names[] = { "twice.ll" }, *srcs[] = { nvvm_twice };
    o.extra_source_names = names;
    o.extra_sources = srcs;
    o.num_extra_sources = 1;
    ck_assert_ok(cuabi_program_compile(&oc, p, &o));
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, oc));
    ck_assert_ptr_null(memmem(code, size, ".extern .func", 13)); /* defined: linked in */
    ck_assert_ptr_nonnull(memmem(code, size, "0f40A00000", 10)); /* 5.0f */
    cuabi_objcode_release(oc);
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    void *kept;
    ck_assert_ok(cuabi_program_backend_handle(&kept, p));
    ck_assert_ptr_nonnull(kept);
    /* Same modules: a hit. Another module's text: another key. */
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1);
    srcs[0] = nvvm_thrice;
    ck_assert_ok(cuabi_program_compile(&oc, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, oc));
    ck_assert_ptr_nonnull(memmem(code, size, "0f40400000", 10)); /* 3.0f */
    cuabi_objcode_release(oc);
    /* Sizes given (bitcode needs them): the first bytes only. */
    size_t sizes[] = { strlen(nvvm_twice) };
    srcs[0] = nvvm_twice;
    o.extra_source_sizes = sizes;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1); /* the same bytes as the first */
    /* A name changes the key too (it names the module in messages). */
    names[0] = "other.ll";
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    /* numba_debug reaches libNVVM: this one refuses or takes it, either way told. */
    o.numba_debug = 1;
    o.cache = 0;
    cuabi_status st = cuabi_program_compile(NULL, p, &o);
    ck_assert_msg(st == CUABI_SUCCESS || st == CUABI_ERROR_INVALID_ARGUMENT ||
                  st == CUABI_ERROR_COMPILE, "numba_debug: %s", cuabi_status_name(st));
    cuabi_program_release(p);
}
END_TEST

START_TEST(linker_handle_is_nvjitlinks)
{
    const cuabi__nvjitlink *nvj;
    ck_assert_ok(cuabi__nvjitlink_get(&nvj));
    cuabi_program *p;
    cuabi_objcode *ptx, *out;
    cuabi_program_options po = CUABI_PROGRAM_OPTIONS_INIT;
    po.arch = "sm_90";
    po.output = CUABI_CODE_PTX;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "l.cu"));
    ck_assert_ok(cuabi_program_compile(&ptx, p, &po));
    cuabi_program_release(p);

    /* Through the cache: asking opens the session with the inputs so far. */
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.arch = "sm_90";
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, &lo));
    void *h = NULL;
    ck_assert_ok(cuabi_linker_backend_handle(&h, l));
    ck_assert_ptr_nonnull(h);
    ck_assert_ok(cuabi_linker_add_objcode(l, ptx));
    void *again;
    ck_assert_ok(cuabi_linker_backend_handle(&again, l));
    ck_assert_ptr_eq(h, again);
    ck_assert_ok(cuabi_linker_complete(&out, l, CUABI_CODE_CUBIN));
    size_t n = 0;
    ck_assert_int_eq(nvj->nvJitLinkGetLinkedCubinSize(h, &n), NVJITLINK_SUCCESS);
    const void *code;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&code, &size, out));
    ck_assert_uint_eq(n, size);
    int hit = -1;
    ck_assert_ok(cuabi_linker_cache_hit(&hit, l));
    ck_assert_int_eq(hit, 0);
    cuabi_objcode_release(out);
    cuabi_linker_destroy(l);

    /* The same link again, without asking: stored? No - the asked one stored
     * nothing; this one misses, stores, and a third is a hit with no session. */
    for (int i = 0; i < 2; i++) {
        ck_assert_ok(cuabi_linker_create(&l, &lo));
        ck_assert_ok(cuabi_linker_add_objcode(l, ptx));
        ck_assert_ok(cuabi_linker_complete(&out, l, CUABI_CODE_CUBIN));
        ck_assert_ok(cuabi_linker_cache_hit(&hit, l));
        ck_assert_int_eq(hit, i);
        if (i == 1) {
            ck_assert_status(cuabi_linker_backend_handle(&h, l), CUABI_ERROR_NOT_FOUND);
            ck_assert_ptr_null(h);
        } else {
            ck_assert_ok(cuabi_linker_backend_handle(&h, l));
            ck_assert_ptr_nonnull(h);
        }
        cuabi_objcode_release(out);
        cuabi_linker_destroy(l);
    }

    /* Cache off: the session exists from creation. */
    lo.cache = 0;
    ck_assert_ok(cuabi_linker_create(&l, &lo));
    ck_assert_ok(cuabi_linker_backend_handle(&h, l));
    ck_assert_ptr_nonnull(h);
    ck_assert_status(cuabi_linker_backend_handle(NULL, l), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_linker_destroy(l);
    ck_assert_status(cuabi_linker_backend_handle(&h, l), CUABI_ERROR_INVALID_HANDLE);
    cuabi_objcode_release(ptx);
}
END_TEST

/* ------------------------------------------------------------ PCH */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(precompiled_headers)
{
    const cuabi__nvrtc *nv;
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    if (!nv->nvrtcGetPCHCreateStatus) {
        printf("NVRTC older than 12.8: PCH cases skipped\n");
        return;
    }
    char inc[256], pch[256], hdr[300];
    snprintf(inc, sizeof inc, "%s/inc", tmpdir);
    ck_assert_int_eq(mkdir(inc, 0700), 0);
    snprintf(hdr, sizeof hdr, "%s/big.h", inc);
    write_file(hdr, "#pragma once\n"
                    "template <typename T> __device__ T sq(T x) { return x * x; }\n"
                    "struct pair_t { float a, b; };\n");
    snprintf(pch, sizeof pch, "%s/big.pch", tmpdir);
    static const char src[] =
        "#include \"big.h\"\n"
        "extern \"C\" __global__ void k(float *x) { x[0] = sq(x[0]); }\n";
    const char *incs[] = { inc };
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "pch.cu"));
    cuabi_pch_status ps = 9;
    ck_assert_ok(cuabi_program_pch_status(&ps, p));
    ck_assert_int_eq(ps, CUABI_PCH_NONE); /* no compile yet */

    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.output = CUABI_CODE_PTX;
    o.include_paths = incs;
    o.num_include_paths = 1;
    o.create_pch = pch;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_pch_status(&ps, p));
    ck_assert_int_eq(ps, CUABI_PCH_CREATED);
    struct stat stt;
    ck_assert_int_eq(stat(pch, &stt), 0);
    ck_assert_int_gt(stt.st_size, 0);
    const char *log;
    ck_assert_ok(cuabi_program_log(&log, p));
    ck_assert_msg(strstr(log, "writes a precompiled header"), "log: %s", log);
    /* Creating again compiles again (never a hit: the file must be written). */
    ck_assert_int_eq(unlink(pch), 0);
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    int hit;
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(stat(pch, &stt), 0);

    /* Using it: through the cache, keyed by the file's identity. */
    o.create_pch = NULL;
    o.use_pch = pch;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_pch_status(&ps, p));
    ck_assert_int_eq(ps, CUABI_PCH_NONE); /* none was asked to be created */
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1);
    /* A rewritten PCH is another key. */
    o.use_pch = NULL;
    o.create_pch = pch;
    sleep(1); /* a visibly newer modification time */
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    o.create_pch = NULL;
    o.use_pch = pch;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    /* A missing PCH file: compiled without the cache, and NVRTC says why. */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none.pch", tmpdir);
    o.use_pch = missing;
    cuabi_status st = cuabi_program_compile(NULL, p, &o);
    ck_assert_status(st, CUABI_ERROR_COMPILE);
    ck_assert_error_mentions("none.pch");
    ck_assert_ok(cuabi_program_log(&log, p));
    ck_assert_msg(strstr(log, "use_pch"), "log: %s", log);

    /* Automatic PCH in a directory of its own. */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/auto", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    o.use_pch = NULL;
    o.pch = 1;
    o.pch_dir = dir;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_pch_status(&ps, p));
    ck_assert_msg(ps == CUABI_PCH_CREATED || ps == CUABI_PCH_NOT_ATTEMPTED, "status %d", ps);
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    /* A compile without PCH says none again. */
    o.pch = 0;
    o.pch_dir = NULL;
    ck_assert_ok(cuabi_program_compile(NULL, p, &o));
    ck_assert_ok(cuabi_program_pch_status(&ps, p));
    ck_assert_int_eq(ps, CUABI_PCH_NONE);
    cuabi_program_release(p);
}
END_TEST

START_TEST(bundled_headers)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/hdrs", tmpdir);
    setenv("CUABI_NVRTC_HEADERS_DIR", dir, 1);
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = "sm_90";
    o.output = CUABI_CODE_PTX;
    o.use_bundled_headers = 1;
    char buf[4096], want[400];
    const char *argv[64];
    render(CUABI_CODE_CUDA_CXX, &o, buf, sizeof buf, argv);
    snprintf(want, sizeof want, "--use-bundled-headers=%s", dir);
    ck_assert(has(argv, want));
    const cuabi__nvrtc *nv;
    int major = 0, minor = 0;
    ck_assert_ok(cuabi__nvrtc_get(&nv));
    ck_assert_int_eq(nv->nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX,
                                      "#include <cuda/std/cstdint>\n"
                                      "extern \"C\" __global__ void k(cuda::std::uint32_t *x) "
                                      "{ x[0] = 1; }\n", 0, "b.cu"));
    cuabi_status st = cuabi_program_compile(NULL, p, &o);
    if (major * 100 + minor < 1303) {
        ck_assert_status(st, CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("NVRTC 13.3 or newer");
    } else {
        ck_assert_msg(st == CUABI_SUCCESS, "%s", cuabi_last_error()->message);
        struct stat stt;
        ck_assert_int_eq(stat(dir, &stt), 0);
    }
    cuabi_program_release(p);
    /* No directory to use */
    unsetenv("CUABI_NVRTC_HEADERS_DIR");
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    char *h = home ? strdup(home) : NULL, *x = xdg ? strdup(xdg) : NULL;
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    size_t size = sizeof buf;
    ck_assert_status(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &o),
                     CUABI_ERROR_NOT_FOUND);
    if (h)
        setenv("HOME", h, 1);
    if (x)
        setenv("XDG_CACHE_HOME", x, 1);
    free(h);
    free(x);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("program_backend");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, render_is_what_the_compiler_gets);
    tcase_add_test(tc, render_buffer_and_errors);
    tcase_add_test(tc, version_2_struct_is_read_to_its_end_only);
    tcase_add_test(tc, linker_render);
    tcase_add_test(tc, program_handle_is_nvrtcs_program);
    tcase_add_test(tc, nvvm_handle_and_extra_sources);
    tcase_add_test(tc, linker_handle_is_nvjitlinks);
    tcase_add_test(tc, precompiled_headers);
    tcase_add_test(tc, bundled_headers);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
