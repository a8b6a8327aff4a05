/* Fatbins without a GPU (issue 16): programs and linkers make one for
 * several architectures through nvFatbin (a fake one here, the real one
 * when it loads) or the fatbinary tool; the container is parsed, per
 * architecture, bounds-checked; missing packers and failing tools give
 * clear errors; host objects and static libraries feed the linker. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "compile/cache.h"
#include "compile/fatbin.h"
#include "compile/objcode.h"
#include "util/file.h"
#include "compile/code_type.h"
#include "objcode_testutil.h"
#include "fault_wrap.h"

static const char kernel_src[] =
    "extern \"C\" __global__ void scale(float *x, float f) { x[threadIdx.x] *= f; }\n"
    "template <int N> __global__ void fill(int *x) { x[threadIdx.x] = N; }\n";

static char tmpdir[256];

static const char *tmp_file(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* Compile kernel_src to a fatbin for `archs`, cache off. */
static cuabi_objcode *compile_fatbin(const char *archs, cuabi_program **prog)
{
    cuabi_program *p;
    cuabi_objcode *o = NULL;
    const char *exprs[] = { "fill<7>" };
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = archs;
    opt.output = CUABI_CODE_FATBIN;
    opt.cache = 0;
    opt.name_expressions = exprs;
    opt.num_name_expressions = 1;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "k.cu"));
    ck_assert_ok(cuabi_program_compile(&o, p, &opt));
    if (prog)
        *prog = p;
    else
        cuabi_program_release(p);
    return o;
}

/* Forget nvFatbin (loaded or fake) and name a path that does not exist. */
static void no_nvfatbin(void)
{
    setenv("CUABI_NVFATBIN_PATH", "/nonexistent/libnvfatbin.so.13", 1);
    cuabi__nvfatbin_install_fake(NULL);
}

/* ------------------------------------------------ tests */

/* What every fatbin of kernel_src for sm_80,sm_90,compute_90 answers. */
static void check_three_images(cuabi_objcode *o)
{
    size_t n;
    int archs[4] = { 0 };
    cuabi_code_type t;
    int a;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_FATBIN);
    ck_assert_ok(cuabi_fatbin_image_count(&n, o));
    ck_assert_uint_eq(n, 3);
    ck_assert_ok(cuabi_fatbin_image_info(&t, &a, o, 0));
    ck_assert_int_eq(t, CUABI_CODE_CUBIN);
    ck_assert_int_eq(a, 80);
    ck_assert_ok(cuabi_fatbin_image_info(&t, &a, o, 2));
    ck_assert_int_eq(t, CUABI_CODE_PTX);
    ck_assert_int_eq(a, 90);
    ck_assert_status(cuabi_fatbin_image_info(&t, &a, o, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_fatbin_archs(archs, 4, &n, o));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(archs[0], 80);
    ck_assert_int_eq(archs[1], 90);
    ck_assert_ok(cuabi_fatbin_archs(NULL, 0, &n, o));
    ck_assert_uint_eq(n, 2);

    /* Resources per contained architecture, and from the PTX for a newer one. */
    const char *archnames[] = { "sm_80", "sm_90", "sm_100" };
    int want[] = { 80, 90, 100 };
    for (int i = 0; i < 3; i++) {
        cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
        ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "scale", archnames[i]));
        ck_assert_int_eq(r.arch, want[i]);
        ck_assert_int_gt(r.registers, 0);
        ck_assert_uint_eq(r.param_bytes, 12);
        ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "fill<7>", archnames[i]));
    }
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_75"),
                     CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("sm_80 CUBIN, sm_90 CUBIN, compute_90 PTX");
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "nope", "sm_80"),
                     CUABI_ERROR_NOT_FOUND);
    size_t kc;
    ck_assert_ok(cuabi_objcode_kernel_count(&kc, o));
    ck_assert_uint_eq(kc, 2);

    /* One image out, with the name expressions. */
    cuabi_objcode *c;
    ck_assert_ok(cuabi_fatbin_extract(&c, o, "sm_80"));
    ck_assert_ok(cuabi_objcode_arch(&a, c));
    ck_assert_int_eq(a, 80);
    const char *low;
    ck_assert_ok(cuabi_objcode_lowered_name(&low, c, "fill<7>"));
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, c, "fill<7>", NULL));
    cuabi_objcode_release(c);
    ck_assert_ok(cuabi_fatbin_extract(&c, o, "compute_90"));
    ck_assert_ok(cuabi_objcode_code_type(&t, c));
    ck_assert_int_eq(t, CUABI_CODE_PTX);
    const void *bytes;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &n, c));
    ck_assert_ptr_nonnull(strstr(bytes, ".target sm_90"));
    cuabi_objcode_release(c);
    ck_assert_status(cuabi_fatbin_extract(&c, o, "sm_75"), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("it holds sm_80 CUBIN");
    ck_assert_status(cuabi_fatbin_extract(&c, o, "compute_80"), CUABI_ERROR_NOT_FOUND);
    ck_assert_status(cuabi_fatbin_extract(&c, o, "sm_"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_extract(&c, o, "90"), CUABI_ERROR_INVALID_ARGUMENT);
}

START_TEST(program_fatbin_through_fatbinary)
{
    cuabi__fatbin_force_packer(2);
    cuabi_program *p;
    size_t live = cuabi__handle_live_count();
    cuabi_objcode *o = compile_fatbin("sm_80,sm_90,compute_90", &p);
    const char *packer, *log;
    ck_assert_ok(cuabi_fatbin_packer(&packer, o));
    ck_assert_str_eq(packer, "fatbinary");
    ck_assert_ok(cuabi_program_log(&log, p));
    ck_assert_ptr_nonnull(strstr(log, "packed by fatbinary"));
    check_three_images(o);
    cuabi_objcode_release(o);
    cuabi_program_release(p);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    cuabi__fatbin_force_packer(0);
}
END_TEST

START_TEST(program_fatbin_through_a_fake_nvfatbin)
{
    install_fake_nvfatbin();
    cuabi_objcode *o = compile_fatbin("sm_80,sm_90,compute_90", NULL);
    ck_assert_uint_eq(fakefb.cubins, 2);
    ck_assert_uint_eq(fakefb.ptxs, 1);
    const char *packer;
    ck_assert_ok(cuabi_fatbin_packer(&packer, o));
    ck_assert_str_eq(packer, "nvfatbin");
    check_three_images(o);
    cuabi_objcode_release(o);
    /* An nvFatbin failure is an error naming the call and nvFatbin's words. */
    fakefb.fail_add = 9;
    cuabi_program *p;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = "sm_80";
    opt.output = CUABI_CODE_FATBIN;
    opt.cache = 0;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, NULL));
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("nvFatbinAddCubin failed with NVFATBIN_ERROR_FAKE (9)");
    cuabi_program_release(p);
    fake_nvfatbin_reset();
    cuabi__nvfatbin_install_fake(NULL);
}
END_TEST

/* The real nvFatbin when this machine has one (the GPU machine's toolkit
 * does; CUABI_NVFATBIN_PATH may name one elsewhere). */
START_TEST(program_fatbin_through_the_real_nvfatbin)
{
    cuabi__nvfatbin_install_fake(NULL);
    const cuabi__nvfatbin *nf;
    if (cuabi__nvfatbin_get_for(&nf, "test") != CUABI_SUCCESS) {
        printf("note: no nvFatbin here (%s); its real path is not tested\n",
               cuabi_last_error()->message);
        ck_assert_error_mentions("libnvfatbin.so.13");
        cuabi__nvfatbin_install_fake(NULL);
        return;
    }
    cuabi__fatbin_force_packer(1);
    cuabi_objcode *o = compile_fatbin("sm_80,sm_90,compute_90", NULL);
    const char *packer;
    ck_assert_ok(cuabi_fatbin_packer(&packer, o));
    ck_assert_str_eq(packer, "nvfatbin");
    check_three_images(o);
    cuabi_objcode_release(o);
    cuabi__fatbin_force_packer(0);
}
END_TEST

START_TEST(missing_nvfatbin_falls_back_to_fatbinary)
{
    no_nvfatbin();
    cuabi_objcode *o = compile_fatbin("sm_80,sm_90,compute_90", NULL);
    const char *packer;
    ck_assert_ok(cuabi_fatbin_packer(&packer, o));
    ck_assert_str_eq(packer, "fatbinary");
    cuabi_objcode_release(o);
    /* Told to use nvFatbin only: its absence is the error. */
    cuabi__fatbin_force_packer(1);
    cuabi_program *p;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = "sm_80";
    opt.output = CUABI_CODE_FATBIN;
    opt.cache = 0;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, NULL));
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("nvFatbin unavailable");
    ck_assert_error_mentions("CUABI_NVFATBIN_PATH=/nonexistent/libnvfatbin.so.13");
    cuabi_program_release(p);
    cuabi__fatbin_force_packer(0);
    unsetenv("CUABI_NVFATBIN_PATH");
    cuabi__nvfatbin_install_fake(NULL);
}
END_TEST

START_TEST(missing_both_packers_and_a_failing_tool)
{
    no_nvfatbin();
    setenv("CUABI_FATBINARY", "/nonexistent/fatbinary", 1);
    cuabi_program *p;
    cuabi_objcode *o = NULL;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = "sm_80,sm_90";
    opt.output = CUABI_CODE_FATBIN;
    opt.cache = 0;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, NULL));
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuabi_program_compile: cannot make a fatbin");
    ck_assert_error_mentions("libnvfatbin.so.13");
    ck_assert_error_mentions("CUABI_FATBINARY=/nonexistent/fatbinary");
    ck_assert_ptr_null(o);

    /* Without CUABI_FATBINARY the message lists the places looked in. */
    unsetenv("CUABI_FATBINARY");
    char *path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    char *home = getenv("CUDA_HOME") ? strdup(getenv("CUDA_HOME")) : NULL;
    setenv("PATH", "/nonexistent/bin", 1);
    setenv("CUDA_HOME", "/nonexistent/cuda", 1);
    cuabi_status st = cuabi_program_compile(&o, p, &opt);
    if (st == CUABI_SUCCESS) { /* the toolkit cuabi was built against has it */
        cuabi_objcode_release(o);
    } else {
        ck_assert_int_eq(st, CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("/nonexistent/cuda/bin/fatbinary");
        ck_assert_error_mentions("/nonexistent/bin/fatbinary");
    }
    if (path)
        setenv("PATH", path, 1);
    if (home)
        setenv("CUDA_HOME", home, 1);
    else
        unsetenv("CUDA_HOME");
    free(path);
    free(home);

    /* A tool that fails: its exit status and its output in the error. */
    const char *script = tmp_file("fatbinary");
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\necho \"fatbinary: fake failure for $3\" >&2\nexit 3\n");
    fclose(f);
    chmod(script, 0755);
    setenv("CUABI_FATBINARY", script, 1);
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("failed (exit status 3): fatbinary: fake failure for --ident=cuabi:fatbinary");
    ck_assert_ptr_nonnull(strstr(cuabi_last_error()->log, "fake failure"));
    unlink(script);
    unsetenv("CUABI_FATBINARY");
    unsetenv("CUABI_NVFATBIN_PATH");
    cuabi__nvfatbin_install_fake(NULL);
    cuabi_program_release(p);
}
END_TEST

START_TEST(ptx_program_to_fatbin)
{
    size_t n;
    const char *opts[] = { "-arch=compute_80" };
    char *ptx = test_nvrtc(kernel_src, opts, 1, CUABI_CODE_PTX, &n);
    cuabi_program *p;
    cuabi_objcode *o;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = "sm_80,sm_90,compute_80";
    opt.output = CUABI_CODE_FATBIN;
    opt.cache = 0;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_PTX, ptx, 0, "k.ptx"));
    ck_assert_ok(cuabi_program_compile(&o, p, &opt));
    int archs[4];
    ck_assert_ok(cuabi_fatbin_archs(archs, 4, &n, o));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(archs[1], 90);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_90"));
    ck_assert_int_eq(r.arch, 90);
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_86")); /* from compute_80 */
    ck_assert_int_eq(r.arch, 86);
    cuabi_objcode_release(o);
    cuabi_program_release(p);
    free(ptx);
}
END_TEST

START_TEST(program_options_for_fatbins_are_checked)
{
    cuabi_program *p;
    cuabi_objcode *o = NULL;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.output = CUABI_CODE_FATBIN;
    opt.cache = 0;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, NULL));
    const char *bad[] = { "sm_80,sm_80", "sm_80,", ",sm_80", "sm_80,,sm_90", "sm_80,sm_9",
                          "sm_80,gfx90", "sm_80,sm_90 " };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        opt.arch = bad[i];
        ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_null(o);
    }
    opt.arch = "sm_80,sm_80";
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("names sm_80 twice");
    opt.arch = "sm_80,sm_90";
    opt.output = CUABI_CODE_CUBIN; /* a list is a fatbin's */
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_INVALID_ARGUMENT);
    opt.output = CUABI_CODE_FATBIN;
    opt.lto = 1;
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_INVALID_ARGUMENT);
    opt.lto = 0;
    opt.arch = "sm_80,sm_42"; /* no such architecture */
    ck_assert_status(cuabi_program_compile(&o, p, &opt), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("sm_42");
    cuabi_program_release(p);
}
END_TEST

START_TEST(the_cache_keeps_fatbins)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/cache", tmpdir);
    setenv("CUABI_CACHE_DIR", dir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    cuabi__fatbin_force_packer(2);
    cuabi_program *p;
    cuabi_objcode *a, *b;
    int hit;
    cuabi_program_options opt = CUABI_PROGRAM_OPTIONS_INIT;
    opt.arch = "sm_80,sm_90";
    opt.output = CUABI_CODE_FATBIN;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, NULL));
    ck_assert_ok(cuabi_program_compile(&a, p, &opt));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    ck_assert_ok(cuabi_program_compile(&b, p, &opt));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 1);
    const void *da, *db;
    size_t na, nb;
    ck_assert_ok(cuabi_objcode_bytes(&da, &na, a));
    ck_assert_ok(cuabi_objcode_bytes(&db, &nb, b));
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(da, db, na) == 0);
    cuabi_objcode_release(b);
    /* From disk in a "new process", still saying how it was packed. */
    cuabi__cache_reset_for_test();
    ck_assert_ok(cuabi_program_compile(&b, p, &opt));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 2);
    const char *packer;
    ck_assert_ok(cuabi_fatbin_packer(&packer, b));
    ck_assert_str_eq(packer, "fatbinary");
    cuabi_objcode_release(b);
    /* The architecture list and the PTX entries are in the key. */
    const char *others[] = { "sm_90,sm_80", "sm_80", "sm_80,sm_90,compute_90" };
    for (size_t i = 0; i < 3; i++) {
        opt.arch = others[i];
        ck_assert_ok(cuabi_program_compile(&b, p, &opt));
        ck_assert_ok(cuabi_program_cache_hit(&hit, p));
        ck_assert_msg(hit == 0, "%s answered from the cache", others[i]);
        cuabi_objcode_release(b);
    }
    /* A CUBIN of one of the architectures is another entry too. */
    opt.arch = "sm_80";
    opt.output = CUABI_CODE_CUBIN;
    ck_assert_ok(cuabi_program_compile(&b, p, &opt));
    ck_assert_ok(cuabi_program_cache_hit(&hit, p));
    ck_assert_int_eq(hit, 0);
    cuabi_objcode_release(b);
    cuabi_objcode_release(a);
    cuabi_program_release(p);
    cuabi__fatbin_force_packer(0);
    setenv("CUABI_CACHE", "0", 1);
    cuabi__cache_reset_for_test();
}
END_TEST

START_TEST(fatbin_create_from_objcodes)
{
    size_t n80, n90, nptx;
    const char *o80[] = { "-arch=sm_80" }, *o90[] = { "-arch=sm_90" }, *optx[] = { "-arch=compute_90" };
    void *c80 = test_nvrtc(kernel_src, o80, 1, CUABI_CODE_CUBIN, &n80);
    void *c90 = test_nvrtc(kernel_src, o90, 1, CUABI_CODE_CUBIN, &n90);
    char *ptx = test_nvrtc(kernel_src, optx, 1, CUABI_CODE_PTX, &nptx);
    cuabi_objcode *img[4], *fat = NULL;
    ck_assert_ok(cuabi_objcode_from_memory(&img[0], CUABI_CODE_CUBIN, c80, n80, "a"));
    ck_assert_ok(cuabi_objcode_from_memory(&img[1], CUABI_CODE_CUBIN, c90, n90, "b"));
    ck_assert_ok(cuabi_objcode_from_memory(&img[2], CUABI_CODE_PTX, ptx, strlen(ptx), "c"));
    size_t live = cuabi__handle_live_count();
    ck_assert_ok(cuabi_fatbin_create(&fat, img, 3));
    int archs[4];
    size_t n;
    ck_assert_ok(cuabi_fatbin_archs(archs, 4, &n, fat));
    ck_assert_uint_eq(n, 2);
    ck_assert_ok(cuabi_fatbin_image_count(&n, fat));
    ck_assert_uint_eq(n, 3);
    /* A fatbin's bytes make a fatbin objcode again (type detected). */
    const void *bytes;
    cuabi_objcode *again;
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &n, fat));
    ck_assert_ok(cuabi_objcode_from_memory(&again, CUABI_CODE_NONE, bytes, n, NULL));
    ck_assert_ok(cuabi_objcode_code_type(&t, again));
    ck_assert_int_eq(t, CUABI_CODE_FATBIN);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, again, "scale", NULL));
    /* Its PTX image gives the kernels' parameter types (offline kernel). */
    cuabi_kernel *k;
    const char *sig;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, again, "scale"));
    ck_assert_ok(cuabi_kernel_signature(&sig, k));
    ck_assert_msg(strstr(sig, "?") == NULL, "signature %s", sig);
    cuabi_kernel_release(k);
    cuabi_objcode_release(again);
    cuabi_objcode_release(fat);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);

    /* Bad arguments. */
    ck_assert_status(cuabi_fatbin_create(NULL, img, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_create(&fat, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_create(&fat, img, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_create(&fat, img, 65), CUABI_ERROR_INVALID_ARGUMENT);
    img[3] = img[0];
    ck_assert_status(cuabi_fatbin_create(&fat, img, 4), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("both CUBIN for 80");
    img[3] = NULL;
    ck_assert_status(cuabi_fatbin_create(&fat, img, 4), CUABI_ERROR_INVALID_HANDLE);
    cuabi_linker *l;
    ck_assert_ok(cuabi_linker_create(&l, NULL));
    img[3] = (cuabi_objcode *)l;
    ck_assert_status(cuabi_fatbin_create(&fat, img, 4), CUABI_ERROR_INVALID_HANDLE);
    cuabi_linker_destroy(l);
    ck_assert_ptr_null(fat);
    /* LTO-IR is not packed. */
    size_t nl;
    const char *olto[] = { "-arch=sm_90", "-dlto", "-rdc=true" };
    void *lto = test_nvrtc(kernel_src, olto, 3, CUABI_CODE_LTOIR, &nl);
    ck_assert_ok(cuabi_objcode_from_memory(&img[3], CUABI_CODE_LTOIR, lto, nl, "l"));
    ck_assert_status(cuabi_fatbin_create(&fat, img + 3, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("made of CUBIN and PTX");
    /* Queries on objcodes that are not fatbins. */
    ck_assert_status(cuabi_fatbin_image_count(&n, img[0]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a fatbin");
    const char *packer;
    ck_assert_status(cuabi_fatbin_packer(&packer, img[2]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_packer(NULL, img[2]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_packer(&packer, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_fatbin_archs(archs, 4, NULL, img[0]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_archs(NULL, 4, &n, img[0]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_image_count(NULL, img[0]), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_image_info(NULL, archs, img[0], 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_image_info(&t, NULL, img[0], 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_extract(NULL, img[0], "sm_80"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_extract(&again, img[0], NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_fatbin_extract(&again, img[0], "sm_80"), CUABI_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++)
        cuabi_objcode_release(img[i]);
    ck_assert_status(cuabi_fatbin_image_count(&n, img[0]), CUABI_ERROR_INVALID_HANDLE);
    free(c80);
    free(c90);
    free(ptx);
    free(lto);
}
END_TEST

/* Every prefix of a good fatbin and a set of broken fields: a clear error,
 * never a crash (the fuzzer, fuzz/fuzz_fatbin.c, tries the rest). */
/* A fatbin of `img` (a CUBIN and a PTX) packed by nvFatbin, checked and released. */
/* Regression: architecture numbers far apart (a fatbin may claim any
 * 32-bit value) sorted without an overflowing comparison (UBSan, found by
 * fuzz_fatbin). */
START_TEST(archs_of_extreme_values_sort)
{
    static const unsigned char cubin[8] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0 };
    tentry e[3] = {
        { 2, 0x7fffffffu, cubin, sizeof cubin, 0, NULL },
        { 2, 0xffffffffu, cubin, sizeof cubin, 0, NULL },
        { 2, 90, cubin, sizeof cubin, 0, NULL },
    };
    size_t size, n;
    unsigned char *bytes = build(e, 3, &size);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, bytes, size, "extreme"));
    int archs[3];
    ck_assert_ok(cuabi_fatbin_archs(archs, 3, &n, o));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_le(archs[0], archs[1]);
    ck_assert_int_le(archs[1], archs[2]);
    ck_assert_ok(cuabi_objcode_release(o));
    free(bytes);
}
END_TEST

static void nvfatbin_packs(cuabi_objcode **img)
{
    cuabi_objcode *fat;
    const char *packer;
    size_t n;
    ck_assert_ok(cuabi_fatbin_create(&fat, img, 2));
    ck_assert_ok(cuabi_fatbin_packer(&packer, fat));
    ck_assert_str_eq(packer, "nvfatbin");
    ck_assert_ok(cuabi_fatbin_image_count(&n, fat));
    ck_assert_uint_eq(n, 2);
    cuabi_objcode_release(fat);
}

/* Each nvFatbin call cuabi makes, made to fail through tests/fixtures/fault_wrap.h
 * (the nvFatbin that loads here, else the fake): the error names the
 * public call and nvFatbin's, nothing leaks, the images stay usable and
 * the same packing succeeds right after. A failed destroy or error string
 * costs nothing; a failed version query leaves the version unknown (0)
 * and nvFatbin usable. */
START_TEST(nvfatbin_failures_are_reported)
{
    static const char *const calls[] = { "nvFatbinCreate", "nvFatbinAddCubin", "nvFatbinAddPTX",
                                         "nvFatbinSize", "nvFatbinGet" };
    size_t nc, np;
    const char *oc[] = { "-arch=sm_90" }, *op[] = { "-arch=compute_90" };
    void *cubin = test_nvrtc(kernel_src, oc, 1, CUABI_CODE_CUBIN, &nc);
    char *ptx = test_nvrtc(kernel_src, op, 1, CUABI_CODE_PTX, &np);
    cuabi_objcode *img[2], *fat;
    ck_assert_ok(cuabi_objcode_from_memory(&img[0], CUABI_CODE_CUBIN, cubin, nc, "a"));
    ck_assert_ok(cuabi_objcode_from_memory(&img[1], CUABI_CODE_PTX, ptx, np, "b"));
    fault_wrap_install_nvfatbin();
    cuabi__fatbin_force_packer(1);
    size_t live = cuabi__handle_live_count();
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        fat = NULL;
        cuabi__fault_arm(calls[i], 1, false, CUDA_ERROR_UNKNOWN);
        ck_assert_status(cuabi_fatbin_create(&fat, img, 2), CUABI_ERROR_INVALID_IMAGE);
        ck_assert_int_eq(cuabi__fault_count(), 1);
        ck_assert_ptr_null(fat);
        ck_assert_error_mentions("cuabi_fatbin_create: ");
        ck_assert_error_mentions(calls[i]);
        ck_assert_error_mentions(" failed with ");
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
        nvfatbin_packs(img);
    }
    /* nvFatbin's words missing too: the error still names the call. */
    cuabi__fault_arm(NULL, 1, true, CUDA_ERROR_UNKNOWN);
    ck_assert_status(cuabi_fatbin_create(&fat, img, 2), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("nvFatbinCreate failed with an nvFatbin error (1)");
    ck_assert_int_eq(cuabi__fault_count(), 2);
    /* A failed destroy, after it did its work, is not the caller's error. */
    cuabi__fault_arm("nvFatbinDestroy", 1, false, CUDA_ERROR_UNKNOWN);
    nvfatbin_packs(img);
    ck_assert_int_eq(cuabi__fault_count(), 1);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);

    /* The version query, asked at load (here: at install), on the fake
     * (where a real nvFatbin was wrapped above too). */
    fake_nvfatbin_reset();
    cuabi__nvfatbin table = fake_nvfatbin_table;
    fault_wrap_nvfatbin_table(&table);
    cuabi__fault_arm("nvFatbinVersion", 1, false, CUDA_ERROR_UNKNOWN);
    cuabi__nvfatbin_install_fake(&table);
    ck_assert_int_eq(cuabi__fault_count(), 1);
    ck_assert_int_eq(cuabi__nvfatbin_info()->version, 0);
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_ok(cuabi_runtime_info_get(&info));
    ck_assert_int_eq(info.nvfatbin_status, CUABI_SUCCESS);
    ck_assert_int_eq(info.nvfatbin_version, 0);
    nvfatbin_packs(img);
    cuabi__nvfatbin_install_fake(&table);
    ck_assert_int_eq(cuabi__nvfatbin_info()->version, 13000);

    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__fatbin_force_packer(0);
    cuabi__nvfatbin_install_fake(NULL);
    cuabi_objcode_release(img[1]);
    cuabi_objcode_release(img[0]);
    free(ptx);
    free(cubin);
}
END_TEST

START_TEST(corrupt_and_truncated_fatbins)
{
    size_t n80;
    const char *o80[] = { "-arch=sm_80" };
    void *c80 = test_nvrtc(kernel_src, o80, 1, CUABI_CODE_CUBIN, &n80);
    const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
    tentry e[2] = { { 2, 80, c80, n80, 0, "cuabi:test" }, { 1, 80, ptx, sizeof ptx, 0, NULL } };
    size_t size;
    unsigned char *good = build(e, 2, &size);
    cuabi_objcode *o;
    size_t count;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, good, size, "good"));
    ck_assert_ok(cuabi_fatbin_image_count(&count, o));
    ck_assert_uint_eq(count, 2);
    const char *packer;
    ck_assert_ok(cuabi_fatbin_packer(&packer, o));
    ck_assert_str_eq(packer, ""); /* not made by cuabi */
    cuabi_objcode_release(o);

    for (size_t len = 4; len < size; len++) {
        cuabi_status st = cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, good, len, "cut");
        if (st != CUABI_SUCCESS)
            continue;
        ck_assert_status(cuabi_fatbin_image_count(&count, o), CUABI_ERROR_INVALID_IMAGE);
        ck_assert_error_mentions("cuabi_fatbin_image_count: cut is not a well-formed fatbin");
        cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
        ck_assert_int_ne(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_80"), CUABI_SUCCESS);
        cuabi_objcode_release(o);
    }

    struct { size_t off; int width; uint64_t value; const char *why; } cases[] = {
        { 6, 2, 8, "header size" },                      /* header smaller than 16 */
        { 6, 2, 0xffff, "header size" },
        { 8, 8, 1u << 30, "larger than the data" },       /* container size */
        { 16 + 4, 4, 8, "header size is out of range" },  /* entry header below 64 */
        { 16 + 4, 4, 0x7fffffff, "header size is out of range" },
        { 16 + 8, 8, UINT64_MAX, "payload runs past" },
        { 16 + 8, 8, (uint64_t)1 << 63, "payload runs past" },
        { 16 + 32, 4, 8, "identifier lies outside" },
        { 16 + 36, 4, 0xffffffffu, "identifier lies outside" },
    };
    unsigned char *bad = malloc(size + 8);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, good, size);
        for (int b = 0; b < cases[i].width; b++)
            bad[cases[i].off + (size_t)b] = (unsigned char)(cases[i].value >> (8 * b));
        ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, bad, size, "bad"));
        ck_assert_status(cuabi_fatbin_image_count(&count, o), CUABI_ERROR_INVALID_IMAGE);
        ck_assert_error_mentions(cases[i].why);
        cuabi_objcode_release(o);
    }
    /* Zero padding after the container is fine; other bytes are not. */
    memcpy(bad, good, size);
    memset(bad + size, 0, 8);
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, bad, size + 8, "padded"));
    ck_assert_ok(cuabi_fatbin_image_count(&count, o));
    cuabi_objcode_release(o);
    bad[size + 3] = 1;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, bad, size + 8, "trailing"));
    ck_assert_status(cuabi_fatbin_image_count(&count, o), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("bytes after the last container");
    cuabi_objcode_release(o);
    /* No images. */
    size_t esize;
    unsigned char *empty = build(NULL, 0, &esize);
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, empty, esize, "empty"));
    ck_assert_status(cuabi_fatbin_image_count(&count, o), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("holds no images");
    cuabi_objcode_release(o);
    /* A CUBIN entry with a broken ELF: the ELF parser's error. */
    memcpy(bad, good, size);
    memset(bad + 16 + 64 + 16 + 16, 0xff, 32);
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, bad, size, "badelf"));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_80"),
                     CUABI_ERROR_INVALID_IMAGE);
    cuabi_objcode_release(o);
    /* Compressed entries are refused by name. */
    e[0].flags = 0x2000;
    e[1].flags = 0x8000;
    unsigned char *comp = build(e, 2, &esize);
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, comp, esize, "packed"));
    ck_assert_ok(cuabi_fatbin_image_count(&count, o));
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_80"),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("is compressed");
    cuabi_objcode *c;
    ck_assert_status(cuabi_fatbin_extract(&c, o, "compute_80"), CUABI_ERROR_NOT_SUPPORTED);
    cuabi_objcode_release(o);
    free(comp);
    free(empty);
    free(bad);
    free(good);
    free(c80);
}
END_TEST

START_TEST(linker_makes_a_fatbin)
{
    size_t n;
    const char *opts[] = { "-arch=compute_80" };
    char *ptx = test_nvrtc(kernel_src, opts, 1, CUABI_CODE_PTX, &n);
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.arch = "sm_80,sm_90";
    cuabi_linker *l;
    cuabi_objcode *o = NULL;
    ck_assert_ok(cuabi_linker_create(&l, &lo));
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_PTX, ptx, strlen(ptx), "k.ptx"));
    ck_assert_ok(cuabi_linker_complete(&o, l, CUABI_CODE_FATBIN));
    int archs[4];
    ck_assert_ok(cuabi_fatbin_archs(archs, 4, &n, o));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(archs[0], 80);
    ck_assert_int_eq(archs[1], 90);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_90"));
    ck_assert_int_eq(r.arch, 90);
    cuabi_objcode_release(o);
    cuabi_linker_destroy(l);
    /* One architecture to a one-image fatbin; several need fatbin output. */
    lo.arch = "sm_90";
    ck_assert_ok(cuabi_linker_create(&l, &lo));
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_PTX, ptx, strlen(ptx), "k.ptx"));
    ck_assert_ok(cuabi_linker_complete(&o, l, CUABI_CODE_FATBIN));
    ck_assert_ok(cuabi_fatbin_archs(archs, 4, &n, o));
    ck_assert_uint_eq(n, 1);
    cuabi_objcode_release(o);
    cuabi_linker_destroy(l);
    lo.arch = "sm_80,sm_90";
    ck_assert_ok(cuabi_linker_create(&l, &lo));
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_PTX, ptx, strlen(ptx), "k.ptx"));
    ck_assert_status(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("ask for CUABI_CODE_FATBIN");
    cuabi_linker_destroy(l);
    const char *bad[] = { "sm_80,", ",sm_80", "sm_80,,sm_90", "sm_80,sm_9", "sm_80,compute_90" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lo.arch = bad[i];
        ck_assert_status(cuabi_linker_create(&l, &lo), CUABI_ERROR_INVALID_ARGUMENT);
    }
    free(ptx);
}
END_TEST

/* A host object from nvcc -rdc=true -c and a static library of it, as
 * linker inputs (nvJitLink's OBJECT / LIBRARY). Needs nvcc (the toolkit's,
 * or $NVCC); skipped without one. */
START_TEST(objects_and_static_libraries_link)
{
    const char *nvcc = getenv("NVCC");
    char nvcc_path[512];
    snprintf(nvcc_path, sizeof nvcc_path, "%s/../bin/nvcc", CUABI_CUDA_LIBDIR);
    if (!nvcc || !*nvcc)
        nvcc = nvcc_path;
    if (access(nvcc, X_OK) != 0) {
        printf("note: no nvcc at %s; object and library inputs are not tested\n", nvcc);
        return;
    }
    char cmd[2048];
    const char *cu = tmp_file("helper.cu");
    FILE *f = fopen(cu, "w");
    ck_assert_ptr_nonnull(f);
    fputs("__device__ int helper(int x) { return x * 3 + 1; }\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90 -rdc=true -c '%s/helper.cu' -o '%s/helper.o' && "
             "ar rcs '%s/libhelper.a' '%s/helper.o'", nvcc, tmpdir, tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    static const char unit[] =
        "extern __device__ int helper(int x);\n"
        "extern \"C\" __global__ void kern(int *o) { o[threadIdx.x] = helper(threadIdx.x); }\n";
    size_t n;
    const char *opts[] = { "-arch=sm_90", "-rdc=true" };
    void *cubin = test_nvrtc(unit, opts, 2, CUABI_CODE_CUBIN, &n);
    const char *inputs[] = { "helper.o", "libhelper.a" };
    cuabi_code_type types[] = { CUABI_CODE_OBJECT, CUABI_CODE_LIBRARY };
    for (int i = 0; i < 2; i++) {
        for (int detect = 0; detect < 2; detect++) {
            cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
            lo.arch = "sm_90";
            cuabi_linker *l;
            cuabi_objcode *o;
            ck_assert_ok(cuabi_linker_create(&l, &lo));
            ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_CUBIN, cubin, n, "kern.cubin"));
            char path[600];
            snprintf(path, sizeof path, "%s", tmp_file(inputs[i]));
            ck_assert_ok(cuabi_linker_add_file(l, detect ? CUABI_CODE_NONE : types[i], path));
            ck_assert_ok(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN));
            cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
            ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "kern", NULL));
            cuabi_objcode_release(o);
            cuabi_linker_destroy(l);
        }
        /* From memory too, its type detected from the bytes. */
        void *data;
        size_t size;
        ck_assert_ok(cuabi__read_file(tmp_file(inputs[i]), &data, &size, "test"));
        ck_assert_int_eq(cuabi__code_detect(data, size), types[i]);
        cuabi__free(data);
    }
    /* Without the object, the helper is unresolved: the link fails. */
    cuabi_linker *l;
    cuabi_objcode *o;
    ck_assert_ok(cuabi_linker_create(&l, NULL));
    ck_assert_ok(cuabi_linker_add_data(l, CUABI_CODE_CUBIN, cubin, n, "kern.cubin"));
    ck_assert_status(cuabi_linker_complete(&o, l, CUABI_CODE_CUBIN), CUABI_ERROR_LINK);
    cuabi_linker_destroy(l);
    free(cubin);
}
END_TEST

START_TEST(ptx_target_arch)
{
    ck_assert_uint_eq(cuabi__ptx_target_arch(".version 8.0\n.target sm_90a\n", 28), 90);
    ck_assert_uint_eq(cuabi__ptx_target_arch(".target\tsm_100\n", 15), 100);
    ck_assert_uint_eq(cuabi__ptx_target_arch(".target compute_90\n", 19), 0);
    ck_assert_uint_eq(cuabi__ptx_target_arch(".target sm_", 11), 0);
    ck_assert_uint_eq(cuabi__ptx_target_arch("", 0), 0);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    setenv("CUABI_CACHE", "0", 1);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuabi-test-fatbin-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 99;
    Suite *s = suite_create("fatbin");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, program_fatbin_through_fatbinary);
    tcase_add_test(tc, archs_of_extreme_values_sort);
    tcase_add_test(tc, program_fatbin_through_a_fake_nvfatbin);
    tcase_add_test(tc, program_fatbin_through_the_real_nvfatbin);
    tcase_add_test(tc, missing_nvfatbin_falls_back_to_fatbinary);
    tcase_add_test(tc, missing_both_packers_and_a_failing_tool);
    tcase_add_test(tc, ptx_program_to_fatbin);
    tcase_add_test(tc, program_options_for_fatbins_are_checked);
    tcase_add_test(tc, the_cache_keeps_fatbins);
    tcase_add_test(tc, fatbin_create_from_objcodes);
    tcase_add_test(tc, nvfatbin_failures_are_reported);
    tcase_add_test(tc, corrupt_and_truncated_fatbins);
    tcase_add_test(tc, linker_makes_a_fatbin);
    tcase_add_test(tc, objects_and_static_libraries_link);
    tcase_add_test(tc, ptx_target_arch);
    suite_add_tcase(s, tc);
    int rc = cuabi_test_run(s);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        rc = EXIT_FAILURE;
    return rc;
}
