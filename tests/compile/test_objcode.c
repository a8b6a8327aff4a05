/* Object codes without a GPU (this suite never loads a driver): creation
 * from memory and files, type detection, bad images, name expressions,
 * enumeration and offline kernels/resources for CUBIN, PTX and LTO-IR. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objcode_testutil.h"
#include "compile/objcode.h"
#include "util/file.h"

static const char segred_lowered[] = "_Z6segredIfLi256EEvPKT_PS0_";

static void *slurp(const char *name, size_t *size)
{
    void *data;
    ck_assert_ok(cuabi__read_file(test_data_path(name), &data, size, "test"));
    return data;
}

static cuabi_objcode *sm90(void)
{
    size_t n;
    void *d = slurp("objcode_kernels_sm90.cubin", &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, d, n, "sm90.cubin"));
    cuabi__free(d);
    return o;
}

START_TEST(cubin_from_memory)
{
    size_t live = cuabi__handle_live_count();
    size_t n;
    void *d = slurp("objcode_kernels_sm90.cubin", &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, d, n, NULL));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_CUBIN);
    const void *bytes;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &size, o));
    ck_assert_uint_eq(size, n);
    ck_assert_ptr_ne(bytes, d); /* copied */
    ck_assert_int_eq(memcmp(bytes, d, n), 0);
    int arch;
    ck_assert_ok(cuabi_objcode_arch(&arch, o));
    ck_assert_int_eq(arch, 90);
    size_t count;
    ck_assert_ok(cuabi_objcode_kernel_count(&count, o));
    ck_assert_uint_eq(count, 8);
    bool seen_add = false;
    for (size_t i = 0; i < count; i++) {
        const char *name;
        ck_assert_ok(cuabi_objcode_kernel_name(&name, o, i));
        seen_add |= strcmp(name, "add") == 0;
    }
    ck_assert(seen_add);
    const char *name;
    ck_assert_status(cuabi_objcode_kernel_name(&name, o, count), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("out of range");
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "add", NULL));
    ck_assert_int_eq(r.registers, 11);
    ck_assert_uint_eq(r.shared_static_bytes, 1200);
    ck_assert_int_eq(r.barriers, 1);
    ck_assert_int_eq(r.max_threads_per_block, 256);
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "add", "sm_90"));
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "add", "sm_80"), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "add", "gfx90a"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "nope", NULL), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("no kernel 'nope'");
    ck_assert_error_mentions("add");
    r.version = 0;
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "add", NULL), CUABI_ERROR_INVALID_VERSION);
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
    cuabi__free(d);
}
END_TEST

START_TEST(name_expressions)
{
    cuabi_objcode *o = sm90();
    cuabi__objcode *obj;
    ck_assert_ok(cuabi__handle_get(o, CUABI__T_OBJCODE, (void **)&obj, "test"));
    ck_assert_ok(cuabi__objcode_add_name(obj, "segred<float, 256>", segred_lowered));
    ck_assert_status(cuabi__objcode_add_name(obj, NULL, "x"), CUABI_ERROR_INVALID_ARGUMENT);
    const char *lowered;
    ck_assert_ok(cuabi_objcode_lowered_name(&lowered, o, "segred<float, 256>"));
    ck_assert_str_eq(lowered, segred_lowered);
    ck_assert_status(cuabi_objcode_lowered_name(&lowered, o, "segred<int, 8>"), CUABI_ERROR_NOT_FOUND);
    ck_assert_ptr_null(lowered);
    ck_assert_error_mentions("segred<int, 8>");
    ck_assert_status(cuabi_objcode_lowered_name(&lowered, o, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    /* Without a GPU the kernel is checked against the CUBIN. */
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "segred<float, 256>"));
    const char *kn;
    ck_assert_ok(cuabi_kernel_name(&kn, k));
    ck_assert_str_eq(kn, segred_lowered);
    cuabi_objcode *back;
    ck_assert_ok(cuabi_kernel_objcode(&back, k));
    ck_assert_ptr_eq(back, o);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "segred<float, 256>", NULL));
    ck_assert_uint_eq(r.shared_static_bytes, 1024);
    ck_assert_ok(cuabi_objcode_release(o)); /* the kernel keeps it alive */
    ck_assert_ok(cuabi_kernel_get_resources(&r, k));
    ck_assert_int_eq(r.registers, 12);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_status(cuabi_objcode_code_type(&(cuabi_code_type){0}, o), CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(unknown_kernel_names)
{
    cuabi_objcode *o = sm90();
    cuabi_kernel *k = (cuabi_kernel *)1;
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "no_such_kernel"), CUABI_ERROR_NOT_FOUND);
    ck_assert_ptr_null(k);
    ck_assert_error_mentions("no kernel 'no_such_kernel'");
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "_Z3reci"), CUABI_ERROR_NOT_FOUND); /* device fn */
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, ""), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_get_kernel(NULL, o, "add"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

static char *temp_file(const void *data, size_t n, const char *suffix)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/cuabi-objcode-XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
    return path;
}

START_TEST(from_files)
{
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_file(&o, CUABI_CODE_NONE,
                                         test_data_path("objcode_kernels_sm75.cubin")));
    int arch;
    ck_assert_ok(cuabi_objcode_arch(&arch, o));
    ck_assert_int_eq(arch, 75);
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, "/nonexistent/k.cubin"),
                     CUABI_ERROR_IO);
    ck_assert_error_mentions("/nonexistent/k.cubin");
    ck_assert_ptr_null(o);
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, "/tmp"), CUABI_ERROR_IO);
    ck_assert_error_mentions("not a regular file");
    /* issue 29: a FIFO is refused at once (it blocked in fopen), and a file
     * over the 1 GiB a read takes is refused on its size, unread */
    char fifo[] = "/tmp/cuabi-objcode-fifo-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(fifo));
    char fpath[64], big[64];
    snprintf(fpath, sizeof fpath, "%s/k.cubin", fifo);
    snprintf(big, sizeof big, "%s/big.cubin", fifo);
    ck_assert_int_eq(mkfifo(fpath, 0600), 0);
    alarm(20);
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, fpath), CUABI_ERROR_IO);
    alarm(0);
    ck_assert_error_mentions("is a FIFO, not a regular file");
    ck_assert_ptr_null(o);
    int bfd = open(big, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(bfd, 0);
    ck_assert_int_eq(ftruncate(bfd, (off_t)3 << 30), 0);
    close(bfd);
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, big), CUABI_ERROR_IO);
    ck_assert_error_mentions("3221225472 bytes, more than the 1073741824 allowed");
    unlink(fpath);
    unlink(big);
    rmdir(fifo);
    char *empty = temp_file("", 0, ".ptx");
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, empty), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("empty");
    unlink(empty);
    /* PTX text without the usual directives: the extension decides. */
    static const char text[] = "// just a comment\n";
    char *ptx = temp_file(text, sizeof text - 1, ".ptx");
    ck_assert_ok(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, ptx));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_PTX);
    ck_assert_ok(cuabi_objcode_release(o));
    unlink(ptx);
    char *bin = temp_file("\x01\x02\x03\x04", 4, ".bin");
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, bin), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("cannot tell");
    unlink(bin);
    ck_assert_status(cuabi_objcode_from_file(&o, CUABI_CODE_NONE, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_from_file(NULL, CUABI_CODE_NONE, "x"), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_from_file(&o, (cuabi_code_type)42, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(bad_images)
{
    cuabi_objcode *o = (cuabi_objcode *)1;
    unsigned char junk[512];
    for (int i = 0; i < 512; i++)
        junk[i] = (unsigned char)(i * 131 + 17);
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_ptr_null(o);
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("junk is not a CUBIN image");
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_LTOIR, junk, sizeof junk, "junk"),
                     CUABI_ERROR_INVALID_IMAGE);
    size_t n;
    void *d = slurp("objcode_kernels_sm90.cubin", &n);
    /* Truncated CUBIN, and one passed with the wrong size. */
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, d, n / 2, "half"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("half is not a valid CUBIN");
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, d, 100, "short"),
                     CUABI_ERROR_INVALID_IMAGE);
    /* A CUBIN called PTX, PTX called CUBIN. */
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, d, n, "x"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("not PTX");
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, ptx, sizeof ptx, "x"),
                     CUABI_ERROR_INVALID_IMAGE);
    /* PTX whose size runs past its text (a NUL inside). */
    char padded[128] = { 0 };
    memcpy(padded, ptx, sizeof ptx);
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, padded, sizeof padded, "x"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("wrong size");
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, ptx, sizeof ptx, "x")); /* NUL ok */
    ck_assert_ok(cuabi_objcode_release(o));
    /* Types an objcode can't hold, unknown types, bad arguments. */
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUDA_CXX, ptx, sizeof ptx, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_from_memory(&o, (cuabi_code_type)99, d, n, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, NULL, n, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, d, 0, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_from_memory(NULL, CUABI_CODE_CUBIN, d, n, "x"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi__free(d);
}
END_TEST

/* Objects and libraries (cuda.core's ObjectCode.from_object / from_library):
 * held for the linker, checked for an ELF / an ar archive, never loaded. */
START_TEST(objects_and_libraries)
{
    size_t n;
    void *d = slurp("objcode_kernels_sm90.cubin", &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_OBJECT, d, n, "dev.o"));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_OBJECT);
    const void *bytes;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &size, o));
    ck_assert_uint_eq(size, n);
    ck_assert_int_eq(memcmp(bytes, d, n), 0);
    ck_assert_status(cuabi_objcode_load(o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("dev.o is an object: it is linked");
    cuabi_kernel *k = NULL;
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "scale"), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_null(k);
    ck_assert_ok(cuabi_objcode_release(o));
    static const char archive[] = "!<arch>\n/               0           0     0     0       4"
                                  "         `\n\0\0\0\0";
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_LIBRARY, archive, sizeof archive - 1,
                                           "libdev.a"));
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_LIBRARY);
    ck_assert_status(cuabi_objcode_load(o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("a library");
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, archive, sizeof archive - 1, NULL));
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_LIBRARY);                  /* detected */
    ck_assert_ok(cuabi_objcode_release(o));
    /* the wrong bytes for the type */
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_OBJECT, ptx, sizeof ptx, "x"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("not an ELF object");
    ck_assert_status(cuabi_objcode_from_memory(&o, CUABI_CODE_LIBRARY, d, n, "x"),
                     CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("not a library archive");
    cuabi__free(d);
}
END_TEST

static const char ptx_source[] =
    "extern \"C\" __global__ void __launch_bounds__(128) scale(float *x, float a, int n) {\n"
    "  __shared__ float s[64];\n"
    "  s[threadIdx.x % 64] = x[threadIdx.x];\n"
    "  __syncthreads();\n"
    "  if ((int)threadIdx.x < n) x[threadIdx.x] = s[(threadIdx.x + 1) % 64] * a;\n"
    "}\n";

START_TEST(ptx_offline)
{
    const char *opts[] = { "-arch=compute_90" };
    size_t n;
    char *ptx = test_nvrtc(ptx_source, opts, 1, CUABI_CODE_PTX, &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, ptx, n, "scale.ptx"));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_PTX);
    int arch;
    ck_assert_ok(cuabi_objcode_arch(&arch, o));
    ck_assert_int_eq(arch, 0);
    size_t count;
    ck_assert_ok(cuabi_objcode_kernel_count(&count, o));
    ck_assert_uint_eq(count, 1);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "scale", NULL));
    ck_assert_int_eq(r.arch, 90); /* sm_90 without a GPU */
    ck_assert_uint_eq(r.shared_static_bytes, 256);
    ck_assert_int_eq(r.max_threads_per_block, 128);
    ck_assert_uint_eq(r.param_count, 3);
    ck_assert_int_gt(r.registers, 0);
    /* Another architecture than the cached offline view is refused politely. */
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_100"),
                     CUABI_ERROR_NOT_SUPPORTED);
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "scale"));
    size_t np, off, size;
    ck_assert_ok(cuabi_kernel_param_count(&np, k));
    ck_assert_uint_eq(np, 3);
    ck_assert_ok(cuabi_kernel_param_info(&off, &size, k, 1));
    ck_assert_uint_eq(off, 8);
    ck_assert_uint_eq(size, 4);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
    /* A fresh objcode asked for sm_80 first. */
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, ptx, n, "scale.ptx"));
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_80"),
                     CUABI_ERROR_INVALID_IMAGE); /* PTX for sm_90 can't target sm_80 */
    ck_assert_uint_gt(cuabi_last_error()->log_size, 0);
    ck_assert_ok(cuabi_objcode_release(o));
    free(ptx);
}
END_TEST

START_TEST(ptx_with_syntax_errors)
{
    static const char bad[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry broken(.param .u64 p) { frobnicate.u32 %r1; }\n";
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_PTX, bad, sizeof bad - 1, "broken.ptx"));
    size_t count;
    ck_assert_status(cuabi_objcode_kernel_count(&count, o), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("broken.ptx");
    ck_assert_uint_gt(cuabi_last_error()->log_size, 0);
    cuabi_kernel *k;
    ck_assert_status(cuabi_objcode_get_kernel(&k, o, "broken"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_ok(cuabi_objcode_release(o));
}
END_TEST

START_TEST(ltoir_offline)
{
    const char *opts[] = { "-arch=sm_90", "-dlto" };
    size_t n;
    void *lto = test_nvrtc(ptx_source, opts, 2, CUABI_CODE_LTOIR, &n);
    cuabi_objcode *o;
    ck_assert_ok(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, lto, n, "scale.ltoir"));
    cuabi_code_type t;
    ck_assert_ok(cuabi_objcode_code_type(&t, o));
    ck_assert_int_eq(t, CUABI_CODE_LTOIR);
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "scale", "sm_90"));
    ck_assert_uint_eq(r.shared_static_bytes, 256);
    ck_assert_ok(cuabi_objcode_release(o));
    free(lto);
}
END_TEST

START_TEST(handles_checked)
{
    cuabi_objcode *o = sm90();
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, o, "add"));
    cuabi_objcode *wrong = (cuabi_objcode *)k;
    cuabi_code_type t;
    const void *d;
    size_t n;
    int arch;
    const char *s;
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    cuabi_objcode *handles[] = { NULL, wrong, (cuabi_objcode *)(uintptr_t)0x12345678 };
    for (int i = 0; i < 3; i++) {
        cuabi_objcode *h = handles[i];
        ck_assert_status(cuabi_objcode_code_type(&t, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_bytes(&d, &n, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_arch(&arch, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_load(h), CUABI_ERROR_INVALID_HANDLE);
        cuabi_kernel *k2;
        ck_assert_status(cuabi_objcode_get_kernel(&k2, h, "add"), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_kernel_count(&n, h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_kernel_name(&s, h, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_lowered_name(&s, h, "x"), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_kernel_resources(&r, h, "add", NULL), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_retain(h), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_objcode_release(h), CUABI_ERROR_INVALID_HANDLE);
    }
    ck_assert_status(cuabi_objcode_code_type(NULL, o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_bytes(NULL, &n, o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_arch(NULL, o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_kernel_count(NULL, o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_kernel_name(NULL, o, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_kernel_resources(NULL, o, "add", NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_objcode_kernel_resources(&r, o, NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    /* No driver here: loading says so. */
    ck_assert_status(cuabi_objcode_load(o), CUABI_ERROR_DRIVER_NOT_FOUND);
    ck_assert_ok(cuabi_kernel_release(k));
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_status(cuabi_objcode_kernel_count(&n, o), CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(allocation_failures_do_not_leak)
{
    size_t n;
    void *d = slurp("objcode_kernels_sm90.cubin", &n);
    size_t live = cuabi__handle_live_count();
    for (long i = 1; i < 300; i++) {
        cuabi_objcode *o = NULL;
        cuabi_kernel *k = NULL;
        cuabi__alloc_fail_at(i, false);
        cuabi_status st = cuabi_objcode_from_memory(&o, CUABI_CODE_CUBIN, d, n, "x");
        if (st == CUABI_SUCCESS)
            st = cuabi_objcode_get_kernel(&k, o, "add");
        cuabi__alloc_fail_at(0, false);
        ck_assert_msg(st == CUABI_SUCCESS || st == CUABI_ERROR_OUT_OF_MEMORY, "%s",
                      cuabi_last_error()->message);
        if (k)
            ck_assert_ok(cuabi_kernel_release(k));
        if (o)
            ck_assert_ok(cuabi_objcode_release(o));
        ck_assert_uint_eq(cuabi__handle_live_count(), live);
        if (st == CUABI_SUCCESS)
            break;
    }
    cuabi__free(d);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("objcode");
    TCase *tc = tcase_create("objcode");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cubin_from_memory);
    tcase_add_test(tc, name_expressions);
    tcase_add_test(tc, unknown_kernel_names);
    tcase_add_test(tc, from_files);
    tcase_add_test(tc, bad_images);
    tcase_add_test(tc, objects_and_libraries);
    tcase_add_test(tc, ptx_offline);
    tcase_add_test(tc, ptx_with_syntax_errors);
    tcase_add_test(tc, ltoir_offline);
    tcase_add_test(tc, handles_checked);
    tcase_add_test(tc, allocation_failures_do_not_leak);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
