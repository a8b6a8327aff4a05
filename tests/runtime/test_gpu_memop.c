/* Stream memory operations on a GPU (the proof: exits 77 without one).
 *
 *  - where a word may lie: for each kind of memory cuabi makes (a device
 *    pool's, cuMemAlloc's, pinned, virtual memory, managed), the raw
 *    driver's cuStreamWriteValue32 / cuStreamWaitValue32 verdict beside
 *    cuabi's on the same word: they agree, cuabi refuses managed memory
 *    before the driver (its documentation excludes it), a refusal by the
 *    driver names the memory, and cuMemAlloc and pinned memory (what the
 *    documentation names) are taken. The table is printed: an H100 run of
 *    2026-11-27 saw CUDA_ERROR_INVALID_VALUE for words in pool memory;
 *  - a producer and a consumer stream synchronised only by memory
 *    operations (write value / wait value, 32-bit, then a 64-bit batch
 *    with a barrier), in every kind of memory the driver takes;
 *  - the host releasing a waiting stream through pinned memory;
 *  - a write captured into a graph, replayed twice. */
#include "testutil.h"
#include "platform/loader.h"

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

static const char source[] =
    "extern \"C\" __global__ void produce(float *data, int n, long long spin) {\n"
    "  long long t0 = clock64();\n"
    "  while (clock64() - t0 < spin) { }\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) data[i] = 3.0f * i + 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void consume(const float *data, float *out, int n) {\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = data[i];\n"
    "}\n";

static cuabi_device *dev;
static cuabi_objcode *code;
static cuabi_memory_resource *pool;
static cuabi_stream *s1, *s2;

/* The kinds of memory a word may lie in. */
enum { POOL, CUMEMALLOC, PINNED, VMM, MANAGED, KINDS };
static const char *const kind_names[KINDS] = { "device pool", "cuMemAlloc", "pinned", "VMM",
                                               "managed" };

static void compile_once(void)
{
    if (cuabi_test_require_gpu() < 0)
        return;
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1,
                                      "memop.cu"));
    cuabi_status st = cuabi_program_compile(&code, p, NULL);
    if (st != CUABI_SUCCESS)
        fprintf(stderr, "%s\n", cuabi_last_error()->log);
    ck_assert_ok(st);
    cuabi_program_release(p);
}

static void release_once(void)
{
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
}

static void setup(void)
{
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    ck_assert_ok(cuabi_stream_create(&s1, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&s2, dev, NULL));
}

static void teardown(void)
{
    cuabi_stream_release(s2);
    cuabi_stream_release(s1);
    cuabi_memory_resource_release(pool);
}

/* n zeroed bytes of memory of `kind` (the resource is released with the
 * buffer's last reference). */
static cuabi_buffer *word_in(int kind, size_t n)
{
    cuabi_memory_resource *r = NULL;
    cuabi_buffer *b = NULL;
    switch (kind) {
    case POOL: ck_assert_ok(cuabi_memory_resource_retain(pool)); r = pool; break;
    case CUMEMALLOC: ck_assert_ok(cuabi_ipc_memory_resource(&r, dev)); break;
    case PINNED: ck_assert_ok(cuabi_memory_resource_pinned(&r, dev)); break;
    case MANAGED: ck_assert_ok(cuabi_memory_resource_managed(&r, dev)); break;
    default: ck_assert_ok(cuabi_vmm_resource_create(&r, dev, NULL)); break;
    }
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    cuabi_memory_resource_release(r);
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, n, NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    return b;
}

static cuabi_kernel *kernel(const char *name)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, name));
    return k;
}

static void launch(cuabi_kernel *k, cuabi_argpack *p, cuabi_stream *s)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1, c.block[0] = 256;
    c.stream = s;
    c.device = dev;
    ck_assert_ok(cuabi_launch(k, p, &c));
}

/* ------------------------------------------------------------ where a word may lie */

static bool takes[KINDS];   /* the raw driver's verdict, for the later cases */

START_TEST(the_driver_and_cuabi_agree_on_where_a_word_may_lie)
{
    const cuabi__driver *drv;
    ck_assert_ok(cuabi__driver_get_for(&drv, "test"));
    uintptr_t raw_stream;
    ck_assert_ok(cuabi_stream_raw(&raw_stream, s1));
    printf("%-12s %-28s %-28s\n", "memory", "raw cuStreamWriteValue32", "cuabi");
    for (int kind = 0; kind < KINDS; kind++) {
        cuabi_buffer *b = word_in(kind, 64);
        uintptr_t addr;
        ck_assert_ok(cuabi_buffer_pointer(&addr, b));
        ck_assert_ok(cuabi_device_set_current(dev));
        CUresult raw = drv->cuStreamWriteValue32((CUstream)raw_stream, (CUdeviceptr)addr, 5, 0);
        if (raw == CUDA_SUCCESS)
            raw = drv->cuStreamWaitValue32((CUstream)raw_stream, (CUdeviceptr)addr, 5,
                                           CU_STREAM_WAIT_VALUE_EQ);
        const char *raw_name = "?";
        drv->cuGetErrorName(raw, &raw_name);
        ck_assert_ok(cuabi_stream_synchronize(s1));
        cuabi_status st = cuabi_stream_write_value32(s1, b, 8, 6, 0);
        if (st == CUABI_SUCCESS)
            st = cuabi_stream_wait_value32(s1, b, 8, 6, CUABI_STREAM_WAIT_VALUE_EQ);
        char said[160];
        snprintf(said, sizeof said, "%s", st == CUABI_SUCCESS ? "taken" : cuabi_status_name(st));
        printf("%-12s %-28s %-28s\n", kind_names[kind], raw == CUDA_SUCCESS ? "taken" : raw_name,
               said);
        if (st != CUABI_SUCCESS)
            printf("             %s\n", cuabi_last_error()->message);
        ck_assert_ok(cuabi_stream_synchronize(s1));
        takes[kind] = raw == CUDA_SUCCESS;
        if (kind == MANAGED) {
            ck_assert_int_eq(st, CUABI_ERROR_INVALID_ARGUMENT);
            ck_assert_error_mentions("managed memory");
        } else if (raw == CUDA_SUCCESS) {
            ck_assert_msg(st == CUABI_SUCCESS, "%s memory: the driver took the word, cuabi did "
                          "not: %s", kind_names[kind], cuabi_last_error()->message);
            uint32_t v[3];
            ck_assert_ok(cuabi_buffer_copy_to_host(v, b, 0, sizeof v, NULL));
            ck_assert_uint_eq(v[0], 5);
            ck_assert_uint_eq(v[2], 6);
        } else {
            ck_assert_int_eq(st, CUABI_ERROR_CUDA);
            ck_assert_int_eq(cuabi_last_error()->cu_result, raw);
            if (raw == CUDA_ERROR_INVALID_VALUE)
                ck_assert_error_mentions("lies in");
        }
        cuabi_buffer_destroy(b);
    }
    ck_assert_msg(takes[CUMEMALLOC] && takes[PINNED], "the driver refused a word in cuMemAlloc "
                  "or pinned memory, which its documentation names: see the table");
}
END_TEST

/* ------------------------------------------------------------ producer and consumer */

enum { PN = 4096 };

static void produce_consume(cuabi_buffer *flag, bool wide, long long spin)
{
    cuabi_buffer *data, *out;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_ipc_memory_resource(&r, dev));
    ck_assert_ok(cuabi_buffer_allocate(&data, r, PN * sizeof(float), 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&out, r, PN * sizeof(float), 0, NULL));
    cuabi_memory_resource_release(r);
    ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 1, PN * sizeof(float), NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    cuabi_kernel *kp = kernel("produce"), *kc = kernel("consume");
    cuabi_argpack *pp, *pc;
    ck_assert_ok(cuabi_argpack_create(&pp, "buffer, i32, i64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pp, 0, data));
    ck_assert_ok(cuabi_argpack_set_int(pp, 1, PN));
    ck_assert_ok(cuabi_argpack_set_int(pp, 2, spin));
    ck_assert_ok(cuabi_argpack_create(&pc, "buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(pc, 0, data));
    ck_assert_ok(cuabi_argpack_set_buffer(pc, 1, out));
    ck_assert_ok(cuabi_argpack_set_int(pc, 2, PN));
    /* Both kernels run once first: with lazy loading (CUDA's default) a
     * kernel's first launch loads it, which may wait for the context's other
     * streams -- here the consumer, blocked on the flag (the Python twin of
     * this test hung on an H100, 2026-11-28). */
    launch(kp, pp, s1);
    launch(kc, pc, s2);
    ck_assert_ok(cuabi_stream_synchronize(s1));
    ck_assert_ok(cuabi_stream_synchronize(s2));
    /* ... and the real run must see the producer's data, not the warm-up's. */
    ck_assert_ok(cuabi_buffer_memset(data, 0, 0, 1, PN * sizeof(float), NULL));
    ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 1, PN * sizeof(float), NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    /* The consumer is queued first and waits only on the flag. */
    if (wide) {
        cuabi_stream_mem_op w = CUABI_STREAM_MEM_OP_INIT;
        w.kind = CUABI_STREAM_MEM_OP_WAIT_VALUE_64;
        w.buffer = flag;
        w.value = UINT64_C(0x100000007);
        w.flags = CUABI_STREAM_WAIT_VALUE_GEQ;
        ck_assert_ok(cuabi_stream_batch_mem_op(s2, &w, 1));
    } else {
        ck_assert_ok(cuabi_stream_wait_value32(s2, flag, 0, 1, CUABI_STREAM_WAIT_VALUE_EQ));
    }
    launch(kc, pc, s2);
    launch(kp, pp, s1);
    if (wide) {
        cuabi_stream_mem_op w[2] = { CUABI_STREAM_MEM_OP_INIT, CUABI_STREAM_MEM_OP_INIT };
        w[0].kind = CUABI_STREAM_MEM_OP_BARRIER;
        w[0].flags = CUABI_STREAM_BARRIER_GPU;
        w[1].kind = CUABI_STREAM_MEM_OP_WRITE_VALUE_64;
        w[1].buffer = flag;
        w[1].value = UINT64_C(0x100000007);
        ck_assert_ok(cuabi_stream_batch_mem_op(s1, w, 2));
    } else {
        ck_assert_ok(cuabi_stream_write_value32(s1, flag, 0, 1, CUABI_STREAM_WRITE_VALUE_DEFAULT));
    }
    ck_assert_ok(cuabi_stream_synchronize(s2));
    ck_assert_ok(cuabi_stream_synchronize(s1));
    static float got[PN];
    ck_assert_ok(cuabi_buffer_copy_to_host(got, out, 0, sizeof got, NULL));
    for (int i = 0; i < PN; i++)
        ck_assert_msg(got[i] == 3.0f * (float)i + 1.0f, "consumer read %g at %d: it ran before the "
                      "producer's data was there", (double)got[i], i);
    cuabi_argpack_release(pc);
    cuabi_argpack_release(pp);
    cuabi_kernel_release(kc);
    cuabi_kernel_release(kp);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(data);
}

START_TEST(producer_and_consumer_streams_synchronised_by_memory_operations)
{
    int rate_khz = 0;
    ck_assert_ok(cuabi_device_attribute(&rate_khz, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
    long long spin = (long long)rate_khz * 50;      /* ~50 ms of producer work first */
    int ran = 0;
    for (int kind = 0; kind < KINDS; kind++) {
        if (kind == MANAGED || !takes[kind])
            continue;
        cuabi_buffer *flag = word_in(kind, 16);
        produce_consume(flag, false, spin);
        produce_consume(flag, true, spin);
        cuabi_buffer_destroy(flag);
        printf("producer/consumer through a word in %s memory: ok\n", kind_names[kind]);
        ran++;
    }
    ck_assert_int_ge(ran, 2);
}
END_TEST

static void *release_later(void *p)
{
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    __atomic_store_n((volatile uint32_t *)p, 5u, __ATOMIC_RELEASE);
    return NULL;
}

/* Stream `s` is held (by a wait on the pinned word at host address `word`):
 * checked, then the word released from another thread after 20 ms and `s`
 * synchronized. Returns the first 32-bit word of `result` afterwards. */
static uint32_t held_then_released(cuabi_stream *s, uintptr_t word, cuabi_buffer *result)
{
    int ready = 1;
    ck_assert_ok(cuabi_stream_query(&ready, s));
    ck_assert_int_eq(ready, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, release_later, (void *)word), 0);
    ck_assert_ok(cuabi_stream_synchronize(s));
    pthread_join(th, NULL);
    uint32_t v = 0;
    ck_assert_ok(cuabi_buffer_copy_to_host(&v, result, 0, 4, NULL));
    return v;
}

START_TEST(the_host_releases_a_waiting_stream)
{
    cuabi_buffer *word = word_in(PINNED, 8), *out = word_in(CUMEMALLOC, 8);
    uintptr_t hp;
    ck_assert_ok(cuabi_buffer_pointer(&hp, word));
    ck_assert_ok(cuabi_stream_wait_value32(s1, word, 0, 5, CUABI_STREAM_WAIT_VALUE_GEQ));
    ck_assert_ok(cuabi_stream_write_value32(s1, out, 0, 99, 0));
    ck_assert_uint_eq(held_then_released(s1, hp, out), 99);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(word);
}
END_TEST

/* cuabi_stream_wait_raw: s1 stands for another library's stream, given
 * raw. It is held by a wait on a pinned word the host releases later, then
 * writes 99; s2 waits for s1's work so far and copies the result out: 99,
 * where an unordered copy would read the 0 there before. */
START_TEST(a_stream_waits_for_a_raw_streams_work)
{
    cuabi_buffer *word = word_in(PINNED, 8), *out = word_in(CUMEMALLOC, 8);
    cuabi_buffer *seen = word_in(CUMEMALLOC, 8);
    uintptr_t hp, r1;
    ck_assert_ok(cuabi_buffer_pointer(&hp, word));
    ck_assert_ok(cuabi_stream_raw(&r1, s1));
    ck_assert_ok(cuabi_stream_wait_value32(s1, word, 0, 5, CUABI_STREAM_WAIT_VALUE_GEQ));
    ck_assert_ok(cuabi_stream_write_value32(s1, out, 0, 99, 0));
    ck_assert_ok(cuabi_stream_wait_raw(s2, cuabi_test_device_ordinal(), r1));
    ck_assert_ok(cuabi_buffer_copy(seen, 0, out, 0, 4, s2));
    ck_assert_uint_eq(held_then_released(s2, hp, seen), 99);   /* behind s1's wait */
    /* Again through the legacy default stream (1: the GPU's primary context
     * made current for the record), and the stream itself (nothing queued). */
    ck_assert_ok(cuabi_stream_wait_raw(s2, cuabi_test_device_ordinal(), 1));
    uintptr_t r2;
    ck_assert_ok(cuabi_stream_raw(&r2, s2));
    ck_assert_ok(cuabi_stream_wait_raw(s2, cuabi_test_device_ordinal(), r2));
    ck_assert_ok(cuabi_stream_synchronize(s2));
    cuabi_buffer_destroy(seen);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(word);
}
END_TEST

START_TEST(a_captured_write_runs_with_each_replay)
{
    cuabi_buffer *flag = word_in(CUMEMALLOC, 8);
    ck_assert_ok(cuabi_graph_capture_begin(s1, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_stream_write_value32(s1, flag, 4, 1234, 0));
    cuabi_stream_mem_op w = CUABI_STREAM_MEM_OP_INIT;
    w.kind = CUABI_STREAM_MEM_OP_WRITE_VALUE_32;
    w.buffer = flag;
    w.value = 77;
    ck_assert_ok(cuabi_stream_batch_mem_op(s1, &w, 1));
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, s1));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    for (int rep = 0; rep < 2; rep++) {
        ck_assert_ok(cuabi_buffer_memset(flag, 0, 0, 1, 8, s1));
        ck_assert_ok(cuabi_graph_exec_launch(e, s1));
        ck_assert_ok(cuabi_stream_synchronize(s1));
        uint32_t v[2];
        ck_assert_ok(cuabi_buffer_copy_to_host(v, flag, 0, sizeof v, NULL));
        ck_assert_uint_eq(v[0], 77);
        ck_assert_uint_eq(v[1], 1234);
    }
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(flag);
}
END_TEST

int main(void)
{
    if (cuabi_test_require_gpu() < 0)
        return 77;
    Suite *s = suite_create("gpu_memop");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, compile_once, release_once);
    tcase_add_checked_fixture(tc, setup, teardown);
    /* In order: the later cases use the first one's table. */
    tcase_add_test(tc, the_driver_and_cuabi_agree_on_where_a_word_may_lie);
    tcase_add_test(tc, producer_and_consumer_streams_synchronised_by_memory_operations);
    tcase_add_test(tc, the_host_releases_a_waiting_stream);
    tcase_add_test(tc, a_stream_waits_for_a_raw_streams_work);
    tcase_add_test(tc, a_captured_write_runs_with_each_replay);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
