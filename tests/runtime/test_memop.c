/* Stream memory operations against the fake driver
 * (tests/fixtures/fake_texture.h): writes land, waits are checked against
 * the word (the fake counts a wait nothing satisfied), every condition and
 * flag reaches the driver, the word's range, alignment and kind of memory
 * are checked first, batches check every entry before queueing any, the
 * legacy default stream of the buffer's device stands in for NULL,
 * captures make batch nodes that keep their buffers and run with the
 * graph, driver failures and bad handles. */
#include "testutil.h"
#include "fake_texture.h"
#include "runtime/capture.h"

static cuabi_device *dev, *dev1;
static cuabi_stream *stream, *stream1;
static cuabi_memory_resource *pool, *pool1, *host, *pinned;
static cuabi_buffer *word;      /* 64 bytes of "device" memory */

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_texture_install();
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&stream1, dev1, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool1, dev1));
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    ck_assert_ok(cuabi_buffer_allocate(&word, pool, 64, 0, stream));
    ck_assert_ok(cuabi_buffer_memset(word, 0, 0, 1, 64, NULL));
}

static void teardown(void)
{
    cuabi_buffer_destroy(word);
    cuabi_memory_resource_release(pinned);
    cuabi_memory_resource_release(host);
    cuabi_memory_resource_release(pool1);
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(stream1);
    cuabi_stream_release(stream);
    cuabi_device_release(dev1);
    cuabi_device_release(dev);
    ck_assert_msg(cuabi__handle_live_count() == 0, "%zu handles leaked",
                  cuabi__handle_live_count());
    ck_assert_int_eq(fake_live_allocs, 0);
    ck_assert_int_eq(fake_live_graphs, 0);
    ck_assert_int_eq(fake_live_execs, 0);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static unsigned char *mem(cuabi_buffer *b)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    return (unsigned char *)p;
}

static uint32_t u32_at(cuabi_buffer *b, size_t off)
{
    uint32_t v;
    memcpy(&v, mem(b) + off, 4);
    return v;
}

static uint64_t u64_at(cuabi_buffer *b, size_t off)
{
    uint64_t v;
    memcpy(&v, mem(b) + off, 8);
    return v;
}

static CUstream raw(cuabi_stream *s)
{
    uintptr_t r;
    ck_assert_ok(cuabi_stream_raw(&r, s));
    return (CUstream)r;
}

static cuabi_stream_mem_op op(cuabi_stream_mem_op_kind k, cuabi_buffer *b, size_t off,
                              uint64_t v, unsigned flags)
{
    cuabi_stream_mem_op o = CUABI_STREAM_MEM_OP_INIT;
    o.kind = k;
    o.buffer = b;
    o.offset = off;
    o.value = v;
    o.flags = flags;
    return o;
}

START_TEST(writes_land_and_waits_see_the_word)
{
    ck_assert_ok(cuabi_stream_write_value32(stream, word, 4, 0xdeadbeefu,
                                            CUABI_STREAM_WRITE_VALUE_DEFAULT));
    ck_assert_uint_eq(u32_at(word, 4), 0xdeadbeefu);
    ck_assert_ptr_eq(fake_last_stream, raw(stream));
    ck_assert_ok(cuabi_stream_write_value64(NULL, word, 8, UINT64_C(0x0123456789abcdef),
                                            CUABI_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    ck_assert_uint_eq(u64_at(word, 8), UINT64_C(0x0123456789abcdef));
    ck_assert_ptr_eq(fake_last_stream, CU_STREAM_LEGACY);
    /* Conditions met: nothing counted. */
    ck_assert_ok(cuabi_stream_wait_value32(stream, word, 4, 0xdeadbeefu, CUABI_STREAM_WAIT_VALUE_EQ));
    ck_assert_ok(cuabi_stream_wait_value32(stream, word, 4, 0xdeadbee0u, CUABI_STREAM_WAIT_VALUE_GEQ));
    ck_assert_ok(cuabi_stream_wait_value32(stream, word, 4, 0x1u, CUABI_STREAM_WAIT_VALUE_AND));
    ck_assert_ok(cuabi_stream_wait_value32(stream, word, 0, 0x1u, CUABI_STREAM_WAIT_VALUE_NOR));
    ck_assert_ok(cuabi_stream_wait_value64(stream, word, 8, UINT64_C(0x0123456789abcdef),
                                           CUABI_STREAM_WAIT_VALUE_EQ | CUABI_STREAM_WAIT_VALUE_FLUSH));
    ck_assert_int_eq(fake_waits_unmet, 0);
    /* GEQ wraps: 1 is "after" 0xffffffff. */
    ck_assert_ok(cuabi_stream_write_value32(stream, word, 0, 1, 0));
    ck_assert_ok(cuabi_stream_wait_value32(stream, word, 0, 0xffffffffu, CUABI_STREAM_WAIT_VALUE_GEQ));
    ck_assert_int_eq(fake_waits_unmet, 0);
    /* Unmet: a GPU would wait here. */
    ck_assert_ok(cuabi_stream_wait_value32(stream, word, 0, 2, CUABI_STREAM_WAIT_VALUE_GEQ));
    ck_assert_ok(cuabi_stream_wait_value64(stream, word, 8, 5, CUABI_STREAM_WAIT_VALUE_EQ));
    ck_assert_int_eq(fake_waits_unmet, 2);
    ck_assert_int_eq(fake_memops, 11);
}
END_TEST

START_TEST(pinned_memory_too_and_managed_memory_refused)
{
    cuabi_buffer *p;
    ck_assert_ok(cuabi_buffer_allocate(&p, pinned, 16, 0, NULL));
    ck_assert_ok(cuabi_stream_write_value32(stream, p, 0, 7, 0));
    ck_assert_uint_eq(u32_at(p, 0), 7);
    ck_assert_ok(cuabi_stream_write_value32(NULL, p, 12, 8, 0));     /* its device's legacy stream */
    ck_assert_uint_eq(u32_at(p, 12), 8);
    cuabi_buffer_destroy(p);
    cuabi_memory_resource *managed;
    ck_assert_ok(cuabi_memory_resource_managed(&managed, dev));
    ck_assert_ok(cuabi_buffer_allocate(&p, managed, 16, 0, NULL));
    ck_assert_ok(cuabi_buffer_memset(p, 0, 0, 1, 16, NULL));
    /* The driver's documentation excludes managed memory: refused first,
     * in a batch too, and nothing reaches the driver. */
    int before = fake_memops;
    ck_assert_status(cuabi_stream_write_value64(stream, p, 8, 9, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("managed memory");
    cuabi_stream_mem_op o = op(CUABI_STREAM_MEM_OP_WAIT_VALUE_32, p, 0, 1, 0);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, &o, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("ops[0]: the buffer is managed memory");
    ck_assert_int_eq(fake_memops, before);
    ck_assert_uint_eq(u64_at(p, 8), 0);
    cuabi_buffer_destroy(p);
    cuabi_memory_resource_release(managed);
}
END_TEST

START_TEST(words_that_break_a_rule)
{
    ck_assert_status(cuabi_stream_write_value32(stream, word, 2, 1, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not 4-byte aligned");
    ck_assert_status(cuabi_stream_wait_value64(stream, word, 4, 1, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not 8-byte aligned");
    ck_assert_status(cuabi_stream_write_value64(stream, word, 64, 1, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the end");
    ck_assert_status(cuabi_stream_write_value32(stream, word, SIZE_MAX - 1, 1, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_stream_wait_value32(stream, word, 0, 1, 4), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("unknown wait flags 0x4");
    ck_assert_status(cuabi_stream_write_value32(stream, word, 0, 1, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("unknown write flags");
    cuabi_buffer *h;
    ck_assert_ok(cuabi_buffer_allocate(&h, host, 16, 0, NULL));
    ck_assert_status(cuabi_stream_write_value32(stream, h, 0, 1, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("plain host memory");
    cuabi_buffer_destroy(h);
    ck_assert_status(cuabi_stream_write_value32(stream1, word, 0, 1, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    ck_assert_status(cuabi_stream_write_value32((cuabi_stream *)word, word, 0, 1, 0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_write_value32(stream, (cuabi_buffer *)stream, 0, 1, 0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_wait_value64(stream, NULL, 0, 1, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(fake_memops, 0);
}
END_TEST


START_TEST(batches)
{
    cuabi_stream_mem_op ops[5] = {
        op(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, word, 0, 11, 0),
        op(CUABI_STREAM_MEM_OP_WRITE_VALUE_64, word, 8, UINT64_C(1) << 40, 0),
        op(CUABI_STREAM_MEM_OP_BARRIER, NULL, 0, 0, CUABI_STREAM_BARRIER_GPU),
        op(CUABI_STREAM_MEM_OP_WAIT_VALUE_32, word, 0, 11, CUABI_STREAM_WAIT_VALUE_EQ),
        op(CUABI_STREAM_MEM_OP_FLUSH_REMOTE_WRITES, NULL, 0, 0, 0),
    };
    ck_assert_ok(cuabi_stream_batch_mem_op(stream, ops, 5));
    ck_assert_int_eq(fake_memops, 5);
    ck_assert_int_eq(fake_waits_unmet, 0);
    ck_assert_uint_eq(u32_at(word, 0), 11);
    ck_assert_uint_eq(u64_at(word, 8), UINT64_C(1) << 40);
    ck_assert_ok(cuabi_stream_batch_mem_op(NULL, ops, 2));    /* the buffers' device */
    ck_assert_ptr_eq(fake_last_stream, CU_STREAM_LEGACY);
    /* One bad entry: nothing queued, the entry named. */
    fake_memops = 0;
    cuabi_stream_mem_op bad[3] = { ops[0], ops[1], op(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, word, 0,
                                                      UINT64_C(1) << 32, 0) };
    ck_assert_status(cuabi_stream_batch_mem_op(stream, bad, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("ops[2]: the value 0x100000000 does not fit");
    bad[2] = op(CUABI_STREAM_MEM_OP_BARRIER, word, 0, 0, 0);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, bad, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("names no buffer");
    bad[2] = op(CUABI_STREAM_MEM_OP_BARRIER, NULL, 0, 0, 2);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, bad, 3), CUABI_ERROR_INVALID_ARGUMENT);
    bad[2] = op(CUABI_STREAM_MEM_OP_FLUSH_REMOTE_WRITES, NULL, 0, 0, 1);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, bad, 3), CUABI_ERROR_INVALID_ARGUMENT);
    bad[2] = op((cuabi_stream_mem_op_kind)9, word, 0, 0, 0);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, bad, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a cuabi_stream_mem_op_kind");
    bad[2] = ops[0];
    bad[2].version = 0;
    ck_assert_status(cuabi_stream_batch_mem_op(stream, bad, 3), CUABI_ERROR_INVALID_VERSION);
    ck_assert_error_mentions("ops[2]");
    cuabi_buffer *other;
    ck_assert_ok(cuabi_buffer_allocate(&other, pool1, 16, 0, stream1));
    bad[2] = op(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, other, 0, 1, 0);
    ck_assert_status(cuabi_stream_batch_mem_op(NULL, bad, 3), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("one device");
    cuabi_buffer_destroy(other);
    ck_assert_int_eq(fake_memops, 0);
    /* Counts and streams. */
    ck_assert_status(cuabi_stream_batch_mem_op(stream, ops, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, ops, CUABI_STREAM_MEM_OP_MAX_BATCH + 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_stream_batch_mem_op(NULL, &ops[2], 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("give a stream");
    ck_assert_ok(cuabi_stream_batch_mem_op(stream, &ops[2], 1));
    /* A full batch. */
    static cuabi_stream_mem_op many[CUABI_STREAM_MEM_OP_MAX_BATCH];
    for (int i = 0; i < CUABI_STREAM_MEM_OP_MAX_BATCH; i++)
        many[i] = op(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, word, 4 * (size_t)(i % 16), (uint64_t)i, 0);
    fake_memops = 0;
    ck_assert_ok(cuabi_stream_batch_mem_op(stream, many, CUABI_STREAM_MEM_OP_MAX_BATCH));
    ck_assert_int_eq(fake_memops, CUABI_STREAM_MEM_OP_MAX_BATCH);
    ck_assert_uint_eq(u32_at(word, 4 * (254 % 16)), 254);
}
END_TEST

START_TEST(captured_operations_run_with_the_graph_and_keep_their_buffers)
{
    cuabi_buffer *flag;
    ck_assert_ok(cuabi_buffer_allocate(&flag, pool, 16, 0, stream));
    memset(mem(flag), 0, 16);
    unsigned char *fm = mem(flag);
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_stream_write_value32(stream, flag, 0, 42, 0));
    cuabi_stream_mem_op ops[2] = { op(CUABI_STREAM_MEM_OP_WAIT_VALUE_32, flag, 0, 42,
                                      CUABI_STREAM_WAIT_VALUE_EQ),
                                   op(CUABI_STREAM_MEM_OP_WRITE_VALUE_64, flag, 8, 43, 0) };
    ck_assert_ok(cuabi_stream_batch_mem_op(stream, ops, 2));
    ck_assert_ok(cuabi_buffer_destroy(flag));     /* the graph keeps its memory */
    ck_assert_int_eq(fake_memops, 0);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    size_t n;
    ck_assert_ok(cuabi_graph_node_count(&n, g));
    ck_assert_uint_eq(n, 2);
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    uint32_t v32;
    uint64_t v64;
    memcpy(&v32, fm, 4);
    memcpy(&v64, fm + 8, 8);
    ck_assert_uint_eq(v32, 42);
    ck_assert_uint_eq(v64, 43);
    ck_assert_int_eq(fake_memops, 3);
    ck_assert_int_eq(fake_waits_unmet, 0);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
}
END_TEST

START_TEST(driver_failures)
{
    cuabi__fault_arm("cuStreamWriteValue32_v2", 1, false, CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_stream_write_value32(stream, word, 0, 1, 0), CUABI_ERROR_CUDA);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuStreamWriteValue32");
    /* A refused address names where the word's memory came from. */
    cuabi__fault_arm("cuStreamWaitValue32_v2", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_stream_wait_value32(stream, word, 4, 1, 0), CUABI_ERROR_CUDA);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    ck_assert_error_mentions("cuStreamWaitValue32");
    ck_assert_error_mentions("a stream-ordered memory pool's memory (cuMemAllocFromPoolAsync) on "
                             "device 0");
    cuabi__fault_arm("cuStreamBatchMemOp_v2", 1, false, CUDA_ERROR_INVALID_VALUE);
    cuabi_buffer *p;
    ck_assert_ok(cuabi_buffer_allocate(&p, pinned, 16, 0, NULL));
    cuabi_stream_mem_op two[2] = { op(CUABI_STREAM_MEM_OP_BARRIER, NULL, 0, 0, 0),
                                   op(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, p, 0, 1, 0) };
    ck_assert_status(cuabi_stream_batch_mem_op(stream, two, 2), CUABI_ERROR_CUDA);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    ck_assert_error_mentions("batch's first word lies in pinned host memory (cuMemAllocHost)");
    cuabi_buffer_destroy(p);
    /* Other codes are the driver's alone. */
    cuabi__fault_arm("cuStreamBatchMemOp_v2", 1, false, CUDA_ERROR_NOT_SUPPORTED);
    cuabi_stream_mem_op o = op(CUABI_STREAM_MEM_OP_WRITE_VALUE_32, word, 0, 1, 0);
    ck_assert_status(cuabi_stream_batch_mem_op(stream, &o, 1), CUABI_ERROR_CUDA);
    ck_assert_msg(!strstr(cuabi_last_error()->message, "lies in"), "%s",
                  cuabi_last_error()->message);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver *drv = cuabi__driver_for_test();
    PFN_cuStreamWaitValue64_v11070 w = drv->cuStreamWaitValue64;
    drv->cuStreamWaitValue64 = NULL;
    ck_assert_status(cuabi_stream_wait_value64(stream, word, 0, 0, 0),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    drv->cuStreamWaitValue64 = w;
    ck_assert_int_eq(fake_memops, 0);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("memop");
    TCase *tc = tcase_create("fake");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, writes_land_and_waits_see_the_word);
    tcase_add_test(tc, pinned_memory_too_and_managed_memory_refused);
    tcase_add_test(tc, words_that_break_a_rule);
    tcase_add_test(tc, batches);
    tcase_add_test(tc, captured_operations_run_with_the_graph_and_keep_their_buffers);
    tcase_add_test(tc, driver_failures);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
