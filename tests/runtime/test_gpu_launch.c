/* Real launches on a GPU: segmented reduction, structs and vectors by
 * value, prepared relaunches, released buffers, the driver's own parameter
 * info, clusters (sm_90+) and cooperative launches. Exits 77 without one. */
#include "testutil.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

static const char source[] =
    "template <typename T, int BLOCK>\n"
    "__global__ void segreduce(const T *in, const int *off, T *out, int segs) {\n"
    "  __shared__ T part[BLOCK];\n"
    "  int s = blockIdx.x; if (s >= segs) return;\n"
    "  T acc = 0;\n"
    "  for (int i = off[s] + threadIdx.x; i < off[s + 1]; i += BLOCK) acc += in[i];\n"
    "  part[threadIdx.x] = acc; __syncthreads();\n"
    "  for (int st = BLOCK / 2; st > 0; st /= 2) {\n"
    "    if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];\n"
    "    __syncthreads(); }\n"
    "  if (threadIdx.x == 0) out[s] = part[0];\n"
    "}\n"
    "struct P { float x, y, z; int n; };\n"
    "struct Q { char c; struct { short s; double d; } in; unsigned char u; };\n"
    "extern \"C\" __global__ void sbv(P p, float4 v, double d, Q q, signed char b, float *out) {\n"
    "  out[0] = p.x; out[1] = p.y; out[2] = p.z; out[3] = p.n;\n"
    "  out[4] = v.x; out[5] = v.y; out[6] = v.z; out[7] = v.w; out[8] = (float)d;\n"
    "  out[9] = q.c; out[10] = q.in.s; out[11] = (float)q.in.d; out[12] = q.u; out[13] = b;\n"
    "}\n"
    "extern \"C\" __global__ void v4(signed char b, float4 v, float *out) { out[0] = v.w + b; }\n"
    "extern \"C\" __global__ void rank(unsigned *out) {\n"
    "  unsigned r = 0;\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "  asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(r));\n"
    "#endif\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = r;\n"
    "}\n"
    "extern \"C\" __global__ void count(unsigned *c) { if (threadIdx.x == 0) atomicAdd(c, 1u); }\n"
    "extern \"C\" __global__ void typed(int n, double d, float f, unsigned u, float *out) {\n"
    "  out[0] = n; out[1] = (float)d; out[2] = f; out[3] = (float)u;\n"
    "}\n"
    "template <typename T> __global__ void typedt(T *out, T d, int n, bool b) {\n"
    "  out[0] = d; out[1] = n; out[2] = b;\n"
    "}\n"
    "template __global__ void typedt<double>(double *, double, int, bool);\n";

static cuabi_device *dev;
static cuabi_objcode *code;
static cuabi_memory_resource *res;
static int cc_major;

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    ck_assert_ok(cuabi_device_attribute(&cc_major, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    cuabi_program *p;
    const char *exprs[] = { "segreduce<float, 256>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = exprs;
    o.num_name_expressions = 1;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "t.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, &o));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_memory_resource_device_default(&res, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(res);
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
}

static cuabi_buffer *upload(const void *data, size_t size)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, res, size, 0, NULL));
    if (data)
        ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, data, size, NULL));
    else
        ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, size, NULL));
    return b;
}

static cuabi_launch_config cfg(unsigned grid, unsigned block)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = grid;
    c.block[0] = block;
    c.device = dev;
    return c;
}

START_TEST(segmented_reduction)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "segreduce<float, 256>"));
    float in[12];
    for (int i = 0; i < 12; i++) in[i] = (float)(i + 1);
    int off[4] = { 0, 4, 8, 12 };
    cuabi_buffer *bin = upload(in, sizeof in), *boff = upload(off, sizeof off),
                 *bout = upload(NULL, 3 * sizeof(float));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, bin));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, boff));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 2, bout));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, 3));
    cuabi_launch_config c = cfg(3, 256);
    ck_assert_ok(cuabi_launch(k, p, &c));
    float out[3];
    ck_assert_ok(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
    ck_assert(out[0] == 10 && out[1] == 26 && out[2] == 42);
    /* prepared: relaunch on fewer segments by changing one argument */
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, k, p, &c));
    ck_assert_ok(cuabi_buffer_memset(bout, 0, 0, 1, sizeof out, NULL));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, 2));
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
    ck_assert(out[0] == 10 && out[1] == 26 && out[2] == 0);
    /* wrong sizes against the driver's parameter info: nothing launched */
    cuabi_argpack *bad;
    ck_assert_ok(cuabi_argpack_create(&bad, "ptr, ptr, ptr, i64"));
    ck_assert_status(cuabi_launch(k, bad, &c), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 3: the kernel expects 4 bytes, the pack gives 8");
    cuabi_argpack_release(bad);
    /* a released buffer: refused by both paths, naming the slot */
    ck_assert_ok(cuabi_buffer_destroy(bout));
    ck_assert_status(cuabi_prepared_launch(pl), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 2 holds a buffer that was released");
    ck_assert_status(cuabi_launch(k, p, &c), CUABI_ERROR_INVALID_HANDLE);
    /* configuration errors from the real kernel and device */
    cuabi_launch_config big = cfg(1, 2048);
    ck_assert_status(cuabi_launch_check(k, p, &big), CUABI_ERROR_LAUNCH_CONFIG);
    big = cfg(1, 256);
    big.dynamic_shared_bytes = 1 << 20;
    ck_assert_status(cuabi_launch_check(k, p, &big), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("dynamic shared memory");
    cuabi_prepared_release(pl);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(bin);
    cuabi_buffer_destroy(boff);
    cuabi_kernel_release(k);
}
END_TEST

START_TEST(large_random_reduction)
{
    enum { SEGS = 3000 };
    static int off[SEGS + 1];
    unsigned seed = 7;
    for (int s = 0; s < SEGS; s++) {
        seed = seed * 1103515245u + 12345u;
        off[s + 1] = off[s] + (int)((seed >> 8) % 5000);
    }
    float *in = malloc((size_t)off[SEGS] * sizeof *in), out[SEGS];
    for (int i = 0; i < off[SEGS]; i++) {
        seed = seed * 1103515245u + 12345u;
        in[i] = (float)((seed >> 8) % 50);
    }
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "segreduce<float, 256>"));
    cuabi_buffer *bin = upload(in, (size_t)off[SEGS] * sizeof *in), *boff = upload(off, sizeof off),
                 *bout = upload(NULL, sizeof out);
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create_for_kernel(&p, k)); /* raw slots from the driver */
    uintptr_t a;
    ck_assert_ok(cuabi_buffer_pointer(&a, bin));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 0, a));
    ck_assert_ok(cuabi_buffer_pointer(&a, boff));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 1, a));
    ck_assert_ok(cuabi_buffer_pointer(&a, bout));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 2, a));
    ck_assert_ok(cuabi_argpack_set_int(p, 3, SEGS));
    cuabi_launch_config c = cfg(SEGS, 256);
    ck_assert_ok(cuabi_launch(k, p, &c));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
    for (int s = 0; s < SEGS; s++) {
        double want = 0;
        for (int i = off[s]; i < off[s + 1]; i++) want += in[i];
        ck_assert_msg(out[s] == want, "segment %d: %f != %f", s, out[s], want);
    }
    free(in);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(bin);
    cuabi_buffer_destroy(boff);
    cuabi_buffer_destroy(bout);
    cuabi_kernel_release(k);
}
END_TEST

START_TEST(struct_by_value)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "sbv"));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p,
        "struct{f32, f32, f32, i32}, float4, f64, struct{i8, struct{i16, f64}, u8}, i8, buffer"));
    ck_assert_ok(cuabi_argpack_check_kernel(p, k));
    struct { float x, y, z; int n; } sp = { 1.5f, 2.5f, 3.5f, 42 };
    float v[4] = { 5, 6, 7, 8 };
    struct { char c; struct { short s; double d; } in; unsigned char u; } q = { 9, { 10, 11.0 }, 12 };
    ck_assert_ok(cuabi_argpack_set_bytes(p, 0, &sp, sizeof sp));
    ck_assert_ok(cuabi_argpack_set_bytes(p, 1, v, sizeof v));
    ck_assert_ok(cuabi_argpack_set_float(p, 2, 9.25));
    ck_assert_ok(cuabi_argpack_set_bytes(p, 3, &q, sizeof q));
    ck_assert_ok(cuabi_argpack_set_int(p, 4, -13));
    cuabi_buffer *bout = upload(NULL, 14 * sizeof(float));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 5, bout));
    cuabi_launch_config c = cfg(1, 1);
    ck_assert_ok(cuabi_launch(k, p, &c));
    float out[14];
    ck_assert_ok(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
    const float want[14] = { 1.5f, 2.5f, 3.5f, 42, 5, 6, 7, 8, 9.25f, 9, 10, 11, 12, -13 };
    for (int i = 0; i < 14; i++)
        ck_assert_msg(out[i] == want[i], "out[%d] = %f, want %f", i, out[i], want[i]);
    /* The driver describes parameters by offset and size only: after a
     * 16-byte struct, a plain struct of four floats lands at offset 16 just
     * as a float4 does, so that pack has the same layout and passes. */
    cuabi_argpack *same;
    ck_assert_ok(cuabi_argpack_create(&same,
        "struct{f32, f32, f32, i32}, struct{f32, f32, f32, f32}, f64, struct{i8, struct{i16, f64}, u8}, i8, ptr"));
    ck_assert_ok(cuabi_argpack_check_kernel(same, k));
    cuabi_argpack_release(same);
    /* After an i8 the plain struct is at offset 4, the float4 at 16: caught. */
    cuabi_kernel *k4;
    ck_assert_ok(cuabi_objcode_get_kernel(&k4, code, "v4"));
    cuabi_argpack *bad, *good;
    ck_assert_ok(cuabi_argpack_create(&bad, "i8, struct{f32, f32, f32, f32}, ptr"));
    ck_assert_ok(cuabi_argpack_create(&good, "i8, float4, ptr"));
    ck_assert_status(cuabi_argpack_check_kernel(bad, k4), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_ok(cuabi_argpack_check_kernel(good, k4));
    ck_assert_status(cuabi_argpack_check_kernel(bad, k4), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_check_kernel(good, k), CUABI_ERROR_ARGUMENT_MISMATCH);
    cuabi_argpack_release(bad);
    cuabi_argpack_release(good);
    cuabi_kernel_release(k4);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(bout);
    cuabi_kernel_release(k);
}
END_TEST

/* Issue 17: packs made for a kernel are typed from its PTX (extern "C")
 * or its mangled name (C++), so each value reaches the kernel as itself;
 * issue 12: neither stream nor device launches on the current device. */
START_TEST(typed_packs_and_implicit_stream)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "typed"));
    const char *sig;
    ck_assert_ok(cuabi_kernel_signature(&sig, k));
    ck_assert_str_eq(sig, ".u32, .f64, .f32, .u32, .u64");
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create_for_kernel(&p, k));
    ck_assert_status(cuabi_argpack_set_float(p, 0, 3.7), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_set_int(p, 1, 2), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_ok(cuabi_argpack_set_int(p, 0, -3));
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 2.0));
    ck_assert_ok(cuabi_argpack_set_float(p, 2, 3.5));
    ck_assert_ok(cuabi_argpack_set_uint(p, 3, 4000000000u));   /* an unsigned beyond INT_MAX */
    cuabi_buffer *bout = upload(NULL, 4 * sizeof(float));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 4, bout));
    cuabi_launch_config c = cfg(1, 1);
    c.device = NULL;                         /* the current device's legacy stream */
    ck_assert_ok(cuabi_device_set_current(dev));
    ck_assert_ok(cuabi_launch(k, p, &c));
    ck_assert_ok(cuabi_device_synchronize(dev));
    float out[4];
    ck_assert_ok(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
    ck_assert(out[0] == -3 && out[1] == 2.0f && out[2] == 3.5f && out[3] == 4e9f);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    /* A C++ template: exact types from the mangled name. */
    cuabi_program *prog;
    const char *exprs[] = { "typedt<double>" };
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = exprs;
    o.num_name_expressions = 1;
    cuabi_objcode *tcode;
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "t.cu"));
    ck_assert_ok(cuabi_program_compile(&tcode, prog, &o));
    ck_assert_ok(cuabi_objcode_get_kernel(&k, tcode, "typedt< double >"));
    ck_assert_ok(cuabi_kernel_signature(&sig, k));
    ck_assert_str_eq(sig, "double*, double, int, bool");
    ck_assert_ok(cuabi_argpack_create_for_kernel(&p, k));
    cuabi_buffer *bd = upload(NULL, 3 * sizeof(double));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, bd));
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 0.125));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, -7));
    ck_assert_status(cuabi_argpack_set_int(p, 3, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_set_int(p, 3, 1));
    c = cfg(1, 1);
    ck_assert_ok(cuabi_launch(k, p, &c));
    double dout[3];
    ck_assert_ok(cuabi_buffer_copy_to_host(dout, bd, 0, sizeof dout, NULL));
    ck_assert(dout[0] == 0.125 && dout[1] == -7 && dout[2] == 1);
    cuabi_argpack_release(p);
    cuabi_kernel_release(k);
    cuabi_buffer_destroy(bd);
    cuabi_buffer_destroy(bout);
    cuabi_objcode_release(tcode);
    cuabi_program_release(prog);
}
END_TEST

START_TEST(clusters)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "rank"));
    cuabi_buffer *bout = upload(NULL, 8 * sizeof(unsigned));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, bout));
    cuabi_launch_config c = cfg(8, 64);
    c.cluster[0] = 2;
    if (cc_major < 9) {
        ck_assert_status(cuabi_launch(k, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
        ck_assert_error_mentions("clusters need");
    } else {
        ck_assert_ok(cuabi_launch(k, p, &c));
        unsigned out[8];
        ck_assert_ok(cuabi_buffer_copy_to_host(out, bout, 0, sizeof out, NULL));
        for (unsigned i = 0; i < 8; i++)
            ck_assert_uint_eq(out[i], i % 2);
        int n = 0;
        ck_assert_ok(cuabi_occupancy_max_potential_cluster_size(&n, k, &c));
        ck_assert_int_ge(n, 2);
        ck_assert_ok(cuabi_occupancy_max_active_clusters(&n, k, &c));
        ck_assert_int_gt(n, 0);
        c.grid[0] = 7;
        ck_assert_status(cuabi_launch(k, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
        ck_assert_error_mentions("does not divide");
    }
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(bout);
    cuabi_kernel_release(k);
}
END_TEST

START_TEST(cooperative)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "count"));
    cuabi_buffer *bc = upload(NULL, sizeof(unsigned));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, bc));
    int sms = 0;
    ck_assert_ok(cuabi_device_attribute(&sms, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
    ck_assert_ok(cuabi_occupancy_max_active_blocks(&r, k, dev, 128, 0));
    unsigned most = (unsigned)(r.active_blocks_per_sm * sms);
    cuabi_launch_config c = cfg(most, 128);
    c.cooperative = 1;
    ck_assert_ok(cuabi_launch(k, p, &c));
    unsigned n;
    ck_assert_ok(cuabi_buffer_copy_to_host(&n, bc, 0, sizeof n, NULL));
    ck_assert_uint_eq(n, most);
    c.grid[0] = most + 1;
    ck_assert_status(cuabi_launch(k, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("larger than can be resident");
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(bc);
    cuabi_kernel_release(k);
}
END_TEST

/* A launch on a created stream needs no current context (cuabi makes no
 * cuCtxGetCurrent call for it): from a thread with no context current, and
 * from one where another context of the same device is current, every
 * launch lands on the stream's device and counts. */
typedef struct ctxless_job {
    cuabi_kernel *k;
    cuabi_argpack *p;
    cuabi_launch_config c;
    cuabi_prepared *pl;
    int foreign_context;
    cuabi_status st[4];
} ctxless_job;

static void *ctxless_thread(void *arg)
{
    ctxless_job *j = arg;
    CUcontext mine = NULL;
    typedef CUresult (*create_fn)(CUcontext *, unsigned, CUdevice);
    typedef CUresult (*destroy_fn)(CUcontext);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    create_fn create = cuda ? (create_fn)dlsym(cuda, "cuCtxCreate_v2") : NULL;
    destroy_fn destroy = cuda ? (destroy_fn)dlsym(cuda, "cuCtxDestroy_v2") : NULL;
    CUdevice cu = (CUdevice)cuabi_test_device_ordinal();
    if (j->foreign_context && (!create || create(&mine, 0, cu) != CUDA_SUCCESS))
        mine = NULL;
    j->st[0] = cuabi_prepared_launch(j->pl);
    j->st[1] = cuabi_launch(j->k, j->p, &j->c);
    j->st[2] = cuabi_prepared_launch(j->pl);
    j->st[3] = mine || !j->foreign_context ? CUABI_SUCCESS : CUABI_ERROR_CUDA;
    if (mine)
        destroy(mine);
    if (cuda)
        dlclose(cuda);
    return NULL;
}

START_TEST(created_stream_without_current_context)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "count"));
    cuabi_buffer *bc = upload(NULL, sizeof(unsigned));
    cuabi_stream *st;
    ck_assert_ok(cuabi_stream_create(&st, dev, NULL));
    ctxless_job j = { .k = k, .c = cfg(3, 32) };
    j.c.stream = st;
    ck_assert_ok(cuabi_argpack_create(&j.p, "buffer"));
    ck_assert_ok(cuabi_argpack_set_buffer(j.p, 0, bc));
    ck_assert_ok(cuabi_prepared_create(&j.pl, k, j.p, &j.c));
    for (int foreign = 0; foreign < 2; foreign++) {
        pthread_t t;
        j.foreign_context = foreign;
        ck_assert_int_eq(pthread_create(&t, NULL, ctxless_thread, &j), 0);
        pthread_join(t, NULL);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(j.st[i] == CUABI_SUCCESS, "launch %d (foreign context %d): %s", i,
                          foreign, cuabi_status_name(j.st[i]));
    }
    ck_assert_ok(cuabi_stream_synchronize(st));
    unsigned n;
    ck_assert_ok(cuabi_buffer_copy_to_host(&n, bc, 0, sizeof n, NULL));
    ck_assert_uint_eq(n, 2 * 3 * 3);     /* 2 threads x 3 launches x 3 blocks */
    cuabi_prepared_release(j.pl);
    cuabi_argpack_release(j.p);
    cuabi_stream_release(st);
    cuabi_buffer_destroy(bc);
    cuabi_kernel_release(k);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    cuabi_test_device_ordinal();
    Suite *s = suite_create("gpu_launch");
    TCase *tc = tcase_create("launch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, segmented_reduction);
    tcase_add_test(tc, large_random_reduction);
    tcase_add_test(tc, struct_by_value);
    tcase_add_test(tc, typed_packs_and_implicit_stream);
    tcase_add_test(tc, clusters);
    tcase_add_test(tc, cooperative);
    tcase_add_test(tc, created_stream_without_current_context);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
