/* GPU: launches from several threads at once. 8 threads share one kernel
 * (one objcode, lazily loaded by whichever thread comes first) and each
 * launches 200 times on its own stream into its own slice of one device
 * buffer, with its own argument pack; then every slice holds its thread's
 * count. Skips (77) without a GPU. Run under compute-sanitizer (memcheck,
 * racecheck) on the device machine too. */
#include <pthread.h>

#include "testutil.h"

enum { THREADS = 8, LAUNCHES = 200, N = 256 };

static cuabi_device *dev;
static cuabi_kernel *kernel;
static cuabi_buffer *buf;

static const char src[] =
    "extern \"C\" __global__ void bump(int *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] += 1;\n"
    "}\n";

static void *worker(void *arg)
{
    long t = (long)arg;
    cuabi_stream *s;
    cuabi_argpack *p;
    uintptr_t base;
    if (cuabi_stream_create(&s, dev, NULL) || cuabi_argpack_create(&p, "ptr, i32") ||
        cuabi_buffer_pointer(&base, buf))
        return (void *)1;
    cuabi_argpack_set_pointer(p, 0, base + (uintptr_t)t * N * sizeof(int));
    cuabi_argpack_set_int(p, 1, N);
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = N / 64;
    c.block[0] = 64;
    c.stream = s;
    for (int i = 0; i < LAUNCHES; i++)
        if (cuabi_launch(kernel, p, &c) != CUABI_SUCCESS) {
            fprintf(stderr, "thread %ld launch %d: %s\n", t, i, cuabi_last_error()->message);
            return (void *)1;
        }
    void *rv = cuabi_stream_synchronize(s) ? (void *)1 : NULL;
    cuabi_argpack_release(p);
    cuabi_stream_release(s);
    return rv;
}

START_TEST(launches_from_threads)
{
    cuabi_program *prog;
    cuabi_objcode *o;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, src, 0, "bump.cu"));
    ck_assert_ok(cuabi_program_compile(&o, prog, NULL));
    ck_assert_ok(cuabi_objcode_get_kernel(&kernel, o, "bump"));
    ck_assert_ok(cuabi_memory_resource_device_default(&r, dev));
    ck_assert_ok(cuabi_buffer_allocate(&buf, r, THREADS * N * sizeof(int), 256, NULL));
    ck_assert_ok(cuabi_buffer_memset(buf, 0, 0, 4, THREADS * N, NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        failed += rv != NULL;
    }
    ck_assert_int_eq(failed, 0);
    static int host[THREADS * N];
    ck_assert_ok(cuabi_buffer_copy_to_host(host, buf, 0, sizeof host, NULL));
    for (int i = 0; i < THREADS * N; i++)
        ck_assert_int_eq(host[i], LAUNCHES);
    ck_assert_ok(cuabi_buffer_destroy(buf));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_ok(cuabi_kernel_release(kernel));
    ck_assert_ok(cuabi_objcode_release(o));
    ck_assert_ok(cuabi_program_release(prog));
    ck_assert_ok(cuabi_device_release(dev));
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_concurrency");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, launches_from_threads);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
