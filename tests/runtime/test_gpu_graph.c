/* CUDA graphs on a GPU: the segmented reduction of 64 batches captured and
 * built node by node (identical results, equal to the host's), updates
 * without re-instantiation, a conditional while loop set from device code,
 * a capture of every cuabi path in global mode (no call of cuabi breaks
 * it), what a graph keeps alive, 8 threads each replaying their own
 * executable, host functions on a stream and in a capture
 * (cuabi_stream_launch_host_func), and every bad input that needs a GPU.
 * Exits 77 without one. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>

#include "testutil.h"
#include "graph_kernels.h"
#include "segred_kernel.h"

#include <cuda.h>

/* cuabi__handle_live_count (internal; this suite links the core library). */
size_t cuabi__handle_live_count(void);

enum { BATCHES = 64, SEGS = 16, SEG_LEN = 300, BATCH_LEN = SEGS * SEG_LEN };

static cuabi_device *dev;
static cuabi_stream *stream;
static cuabi_memory_resource *pool;
static cuabi_objcode *segred_code, *code;
static cuabi_kernel *segred, *add_one, *scale, *loop_body;

static void setup(void)
{
    cuabi_test_require_gpu();
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    cuabi_program *p;
    const char *expr = "segred<float, 256>";
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.name_expressions = &expr;
    o.num_name_expressions = 1;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, segred_src, 0, "segred.cu"));
    ck_assert_ok(cuabi_program_compile(&segred_code, p, &o));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&segred, segred_code, expr));
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, graph_kernels_src, 0, "g.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&add_one, code, "add_one"));
    ck_assert_ok(cuabi_objcode_get_kernel(&scale, code, "scale"));
    ck_assert_ok(cuabi_objcode_get_kernel(&loop_body, code, "loop_body"));
}

static void teardown(void)
{
    cuabi_kernel_release(segred);
    cuabi_kernel_release(add_one);
    cuabi_kernel_release(scale);
    cuabi_kernel_release(loop_body);
    cuabi_objcode_release(code);
    cuabi_objcode_release(segred_code);
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(stream);
    cuabi_device_release(dev);
}

static cuabi_buffer *alloc(size_t size)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, size, 0, stream));
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, size, stream));
    return b;
}

static cuabi_launch_config on_stream(unsigned grid, unsigned block)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = grid;
    c.block[0] = block;
    c.stream = stream;
    return c;
}

static void stream_sync(void)
{
    ck_assert_ok(cuabi_stream_synchronize(stream));
}

static void run_once(cuabi_graph *g)
{
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    cuabi_graph_exec_release(e);
}

/* ------------------------------------------- segmented reduction, 64 ways */

static float in_host[BATCHES * BATCH_LEN];
static int offsets_host[SEGS + 1];

static void segred_inputs(cuabi_buffer **in, cuabi_buffer **offs)
{
    for (int i = 0; i < BATCHES * BATCH_LEN; i++)
        in_host[i] = (float)((i * 7) % 13) - 6.0f;
    for (int s = 0; s <= SEGS; s++)
        offsets_host[s] = s * SEG_LEN;
    *in = alloc(sizeof in_host);
    *offs = alloc(sizeof offsets_host);
    ck_assert_ok(cuabi_buffer_copy_from_host(*in, 0, in_host, sizeof in_host, NULL));
    ck_assert_ok(cuabi_buffer_copy_from_host(*offs, 0, offsets_host, sizeof offsets_host, NULL));
}

/* The pack for batch b: in + b * BATCH_LEN, out + b * SEGS, offsets. */
static void segred_args(cuabi_argpack *p, cuabi_buffer *in, cuabi_buffer *out,
                        cuabi_buffer *offs, int b)
{
    uintptr_t pin, pout, poff;
    ck_assert_ok(cuabi_buffer_pointer(&pin, in));
    ck_assert_ok(cuabi_buffer_pointer(&pout, out));
    ck_assert_ok(cuabi_buffer_pointer(&poff, offs));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 0, pin + sizeof(float) * (size_t)b * BATCH_LEN));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 1, pout + sizeof(float) * (size_t)b * SEGS));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 2, poff));
}

START_TEST(capture_and_explicit_segred_agree)
{
    cuabi_buffer *in, *offs, *out_cap = alloc(sizeof(float) * BATCHES * SEGS),
                              *out_exp = alloc(sizeof(float) * BATCHES * SEGS);
    segred_inputs(&in, &offs);
    stream_sync();
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, ptr, ptr"));
    cuabi_launch_config c = on_stream(SEGS, 256);
    /* Captured: 64 launches on one stream. */
    cuabi_graph *cap, *exp;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    for (int b = 0; b < BATCHES; b++) {
        segred_args(p, in, out_cap, offs, b);
        ck_assert_ok(cuabi_launch(segred, p, &c));
    }
    ck_assert_ok(cuabi_graph_capture_end(&cap, stream));
    /* Explicit: 64 independent kernel nodes. */
    ck_assert_ok(cuabi_graph_create(&exp));
    for (int b = 0; b < BATCHES; b++) {
        cuabi_graph_node *n;
        segred_args(p, in, out_exp, offs, b);
        ck_assert_ok(cuabi_graph_add_kernel(&n, exp, NULL, 0, segred, p, &c));
        cuabi_graph_node_release(n);
    }
    size_t n1, n2;
    ck_assert_ok(cuabi_graph_node_count(&n1, cap));
    ck_assert_ok(cuabi_graph_node_count(&n2, exp));
    ck_assert_uint_eq(n1, BATCHES);
    ck_assert_uint_eq(n2, BATCHES);
    run_once(cap);
    run_once(exp);
    static float a[BATCHES * SEGS], e[BATCHES * SEGS];
    ck_assert_ok(cuabi_buffer_copy_to_host(a, out_cap, 0, sizeof a, NULL));
    ck_assert_ok(cuabi_buffer_copy_to_host(e, out_exp, 0, sizeof e, NULL));
    ck_assert_int_eq(memcmp(a, e, sizeof a), 0);
    for (int b = 0; b < BATCHES; b++)
        for (int s = 0; s < SEGS; s++) {
            float want = 0;
            for (int i = 0; i < SEG_LEN; i++)
                want += in_host[b * BATCH_LEN + s * SEG_LEN + i];
            ck_assert_float_eq_tol(a[b * SEGS + s], want, 1e-3f);
        }
    cuabi_graph_release(cap);
    cuabi_graph_release(exp);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(in);
    cuabi_buffer_destroy(offs);
    cuabi_buffer_destroy(out_cap);
    cuabi_buffer_destroy(out_exp);
}
END_TEST

/* ---------------------------------------------------------------- update */

static float first_float(cuabi_buffer *b)
{
    float v;
    ck_assert_ok(cuabi_buffer_copy_to_host(&v, b, 0, sizeof v, NULL));
    return v;
}

START_TEST(update_without_reinstantiation)
{
    enum { N = 1024 };
    static float ones[N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    cuabi_buffer *x = alloc(sizeof ones), *y = alloc(sizeof ones);
    ck_assert_ok(cuabi_buffer_copy_from_host(x, 0, ones, sizeof ones, NULL));
    ck_assert_ok(cuabi_buffer_copy_from_host(y, 0, ones, sizeof ones, NULL));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, f32, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 2.0));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, N));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = N / 128;
    c.block[0] = 128;
    c.device = dev;
    cuabi_graph *g;
    cuabi_graph_node *k;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, NULL, 0, scale, p, &c));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    uintptr_t raw_before, raw_after;
    ck_assert_ok(cuabi_graph_exec_raw(&raw_before, e));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    ck_assert_float_eq(first_float(x), 2.0f);
    /* New arguments (another buffer, another factor): same executable. */
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, y));
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 5.0));
    ck_assert_ok(cuabi_graph_exec_update_kernel(e, k, p, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    ck_assert_float_eq(first_float(x), 2.0f);
    ck_assert_float_eq(first_float(y), 5.0f);
    /* A smaller grid: only the first 128 elements. */
    c.grid[0] = 1;
    ck_assert_ok(cuabi_graph_exec_update_kernel(e, k, p, &c));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    float back[N];
    ck_assert_ok(cuabi_buffer_copy_to_host(back, y, 0, sizeof back, NULL));
    ck_assert_float_eq(back[0], 25.0f);
    ck_assert_float_eq(back[N - 1], 5.0f);
    /* A whole update from a graph built the same way with factor 3. */
    cuabi_graph *g2;
    cuabi_graph_node *k2, *extra;
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_argpack_set_float(p, 1, 3.0));
    c.grid[0] = N / 128;
    ck_assert_ok(cuabi_graph_create(&g2));
    ck_assert_ok(cuabi_graph_add_kernel(&k2, g2, NULL, 0, scale, p, &c));
    ck_assert_ok(cuabi_graph_exec_update(e, g2, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    ck_assert_float_eq(first_float(x), 6.0f);
    ck_assert_ok(cuabi_graph_exec_raw(&raw_after, e));
    ck_assert(raw_after == raw_before);
    /* Another topology: refused with the node named; the executable runs on. */
    ck_assert_ok(cuabi_graph_add_kernel(&extra, g2, &k2, 1, scale, p, &c));
    cuabi_graph_update_info info = CUABI_GRAPH_UPDATE_INFO_INIT;
    ck_assert_status(cuabi_graph_exec_update(e, g2, &info), CUABI_ERROR_GRAPH_UPDATE);
    ck_assert_error_mentions("cuabi_graph_exec_update");
    ck_assert_error_mentions("node");
    ck_assert_int_ne(info.result, CUABI_GRAPH_UPDATE_SUCCESS);
    printf("update with another topology: %s (node %lld)\n", cuabi_last_error()->message,
           (long long)info.node_index);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    ck_assert_float_eq(first_float(x), 18.0f);
    cuabi_graph_node_release(extra);
    cuabi_graph_node_release(k2);
    cuabi_graph_node_release(k);
    cuabi_graph_release(g2);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(x);
    cuabi_buffer_destroy(y);
}
END_TEST

/* ------------------------------------------------------------ conditional */

START_TEST(conditional_while_loop_runs_n_times)
{
    enum { N = 37 };
    cuabi_graph *g, *body;
    cuabi_graph_node *reset, *loop, *k;
    uint64_t h;
    cuabi_buffer *counter = alloc(sizeof(int));
    stream_sync();
    ck_assert_ok(cuabi_graph_create(&g));
    cuabi_status st = cuabi_graph_conditional_handle_create(&h, g, dev, 1,
                                                            CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        printf("conditional nodes not supported here: %s\n", cuabi_last_error()->message);
        cuabi_graph_release(g);
        cuabi_buffer_destroy(counter);
        return;
    }
    ck_assert_ok(st);
    ck_assert_ok(cuabi_graph_add_memset(&reset, g, NULL, 0, counter, 0, 0, 4, 1));
    ck_assert_ok(cuabi_graph_add_conditional(&loop, g, &reset, 1, h,
                                             CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    ck_assert_ok(cuabi_graph_node_body(&body, loop, 0));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "u64, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_uint(p, 0, h));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, counter));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, N));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.block[0] = 32;
    c.device = dev;
    ck_assert_ok(cuabi_graph_add_kernel(&k, body, NULL, 0, loop_body, p, &c));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    for (int rep = 0; rep < 3; rep++) {
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
        stream_sync();
        int count = 0;
        ck_assert_ok(cuabi_buffer_copy_to_host(&count, counter, 0, sizeof count, NULL));
        ck_assert_int_eq(count, N);
    }
    /* The loop count is a kernel argument: change it in place (where the
     * driver updates nodes inside conditional bodies). */
    ck_assert_ok(cuabi_argpack_set_int(p, 2, 5));
    st = cuabi_graph_exec_update_kernel(e, k, p, NULL);
    if (st == CUABI_SUCCESS) {
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
        stream_sync();
        int count = 0;
        ck_assert_ok(cuabi_buffer_copy_to_host(&count, counter, 0, sizeof count, NULL));
        ck_assert_int_eq(count, 5);
    } else {
        ck_assert_int_eq(st, CUABI_ERROR_CUDA);
        printf("updating a kernel node in a conditional body: %s\n", cuabi_last_error()->message);
    }
    cuabi_graph_exec_release(e);
    cuabi_graph_node_release(k);
    cuabi_graph_node_release(loop);
    cuabi_graph_node_release(reset);
    cuabi_graph_release(body);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(counter);
}
END_TEST

/* GraphBuilder's way (issue 24): a capture into a graph, a while node at
 * the capture's place whose body a second stream captures, an if/else whose
 * else runs, a child graph, and a copy after them all; launched three times.
 * Then the hostile cases on a real driver: a handle of another graph, a
 * switch of 0 cases, a body stream used after its end, a capture not begun
 * into a graph. */
START_TEST(conditionals_added_into_a_capture)
{
    enum { N = 23 };
    cuabi_graph *g, *same, *child, *body, *other;
    cuabi_graph_node *loop, *ife, *ch, *none;
    cuabi_stream *bs;
    uint64_t hloop, hif, hother;
    cuabi_buffer *counter = alloc(sizeof(int)), *x[4];
    for (int i = 0; i < 4; i++) {
        x[i] = alloc(sizeof(int));
        ck_assert_ok(cuabi_buffer_memset(x[i], 0, 0, 4, 1, stream));
    }
    stream_sync();
    ck_assert_ok(cuabi_stream_create(&bs, dev, NULL));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.block[0] = 32;
    /* The child: x[3] += 1. */
    ck_assert_ok(cuabi_graph_create(&child));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(bs, child, CUABI_CAPTURE_MODE_GLOBAL));
    cuabi_argpack *inc3;
    ck_assert_ok(cuabi_argpack_create(&inc3, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(inc3, 0, x[3]));
    ck_assert_ok(cuabi_argpack_set_int(inc3, 1, 1));
    c.stream = bs;
    ck_assert_ok(cuabi_launch(add_one, inc3, &c));
    ck_assert_ok(cuabi_graph_capture_end(&same, bs));
    cuabi_graph_release(same);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_buffer_memset(counter, 0, 0, 4, 1, stream));
    cuabi_status st = cuabi_graph_capture_conditional_handle(&hloop, stream, 1,
                                                            CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        printf("conditional nodes not supported here: %s\n", cuabi_last_error()->message);
        ck_assert_ok(cuabi_graph_capture_end(&same, stream));
        cuabi_graph_release(same);
    } else {
        ck_assert_ok(st);
        ck_assert_ok(cuabi_graph_capture_add_conditional(&loop, stream, hloop,
                                                         CUABI_GRAPH_CONDITIONAL_WHILE, 1));
        ck_assert_ok(cuabi_graph_node_body(&body, loop, 0));
        ck_assert_ok(cuabi_graph_capture_begin_to_graph(bs, body, CUABI_CAPTURE_MODE_GLOBAL));
        cuabi_argpack *p;
        ck_assert_ok(cuabi_argpack_create(&p, "u64, buffer, i32"));
        ck_assert_ok(cuabi_argpack_set_uint(p, 0, hloop));
        ck_assert_ok(cuabi_argpack_set_buffer(p, 1, counter));
        ck_assert_ok(cuabi_argpack_set_int(p, 2, N));
        ck_assert_ok(cuabi_launch(loop_body, p, &c));
        ck_assert_ok(cuabi_graph_capture_end(&same, bs));
        ck_assert_ptr_eq(same, body);
        cuabi_graph_release(same);
        cuabi_graph_release(body);
        /* A body stream used after its end. */
        ck_assert_status(cuabi_graph_capture_add_conditional(&none, bs, hloop,
                                                             CUABI_GRAPH_CONDITIONAL_IF, 1),
                         CUABI_ERROR_INVALID_ARGUMENT);
        /* Hostile: a handle of another graph, a switch of 0. */
        ck_assert_ok(cuabi_graph_create(&other));
        ck_assert_ok(cuabi_graph_conditional_handle_create(&hother, other, dev, 0, 0));
        ck_assert_status(cuabi_graph_capture_add_conditional(&none, stream, hother,
                                                             CUABI_GRAPH_CONDITIONAL_IF, 1),
                         CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_status(cuabi_graph_capture_add_conditional(&none, stream, hloop,
                                                             CUABI_GRAPH_CONDITIONAL_SWITCH, 0),
                         CUABI_ERROR_INVALID_ARGUMENT);
        cuabi_graph_release(other);
        /* if/else on 0: the else body (x[1] += 1) runs. */
        ck_assert_ok(cuabi_graph_capture_conditional_handle(&hif, stream, 0,
                                                            CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
        st = cuabi_graph_capture_add_conditional(&ife, stream, hif, CUABI_GRAPH_CONDITIONAL_IF, 2);
        bool ifelse = st == CUABI_SUCCESS;
        if (!ifelse)
            ck_assert_int_eq(st, CUABI_ERROR_NOT_SUPPORTED);   /* a 12.3 - 12.7 driver */
        for (unsigned b = 0; ifelse && b < 2; b++) {
            ck_assert_ok(cuabi_graph_node_body(&body, ife, b));
            ck_assert_ok(cuabi_graph_capture_begin_to_graph(bs, body, CUABI_CAPTURE_MODE_GLOBAL));
            ck_assert_ok(cuabi_argpack_set_buffer(inc3, 0, x[b]));
            ck_assert_ok(cuabi_launch(add_one, inc3, &c));
            ck_assert_ok(cuabi_graph_capture_end(&same, bs));
            cuabi_graph_release(same);
            cuabi_graph_release(body);
        }
        ck_assert_ok(cuabi_graph_capture_add_child(&ch, stream, child));
        ck_assert_ok(cuabi_buffer_copy(x[2], 0, counter, 0, sizeof(int), stream));
        ck_assert_ok(cuabi_graph_capture_end(&same, stream));
        ck_assert_ptr_eq(same, g);
        cuabi_graph_release(same);
        cuabi_graph_release(child);
        child = NULL;
        cuabi_graph_exec *e;
        ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
        for (int rep = 0; rep < 3; rep++)
            ck_assert_ok(cuabi_graph_exec_launch(e, stream));
        stream_sync();
        int got[4];
        for (int i = 0; i < 4; i++)
            ck_assert_ok(cuabi_buffer_copy_to_host(&got[i], x[i], 0, sizeof(int), NULL));
        ck_assert_int_eq(got[0], 0);
        ck_assert_int_eq(got[1], ifelse ? 3 : 0);
        ck_assert_int_eq(got[2], N);
        ck_assert_int_eq(got[3], 3);
        cuabi_graph_exec_release(e);
        if (ifelse)
            cuabi_graph_node_release(ife);
        cuabi_graph_node_release(ch);
        cuabi_graph_node_release(loop);
        cuabi_argpack_release(p);
    }
    /* A capture not begun into a graph takes no conditional. */
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_status(cuabi_graph_capture_conditional_handle(&hif, stream, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    if (child)
        cuabi_graph_release(child);
    cuabi_graph_release(g);
    cuabi_argpack_release(inc3);
    cuabi_stream_release(bs);
    for (int i = 0; i < 4; i++)
        cuabi_buffer_destroy(x[i]);
    cuabi_buffer_destroy(counter);
}
END_TEST

/* ------------------------------------------ every cuabi path, captured */

static int host_calls;
static void count_call(void *payload)
{
    (void)payload;
    __atomic_add_fetch(&host_calls, 1, __ATOMIC_RELAXED);
}

/* Global mode makes any synchronising or otherwise unsafe call on any
 * thread fail: the capture succeeding proves cuabi's allocate, copy,
 * memset, first launch of a kernel (lazy loading), prepared launch, event
 * record and free paths make none. */
START_TEST(capture_every_cuabi_path_in_global_mode)
{
    enum { N = 256 };
    cuabi_memory_resource *pinned;
    cuabi_buffer *host_in, *host_out;
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    ck_assert_ok(cuabi_buffer_allocate(&host_in, pinned, N * sizeof(int), 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&host_out, pinned, N * sizeof(int), 0, NULL));
    uintptr_t hin, hout;
    ck_assert_ok(cuabi_buffer_pointer(&hin, host_in));
    ck_assert_ok(cuabi_buffer_pointer(&hout, host_out));
    for (int i = 0; i < N; i++)
        ((int *)hin)[i] = i;
    /* A kernel never launched before: its first launch happens in the
     * capture. */
    cuabi_program *prog;
    cuabi_objcode *fresh;
    cuabi_kernel *fresh_add;
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, graph_kernels_src, 0, "f.cu"));
    ck_assert_ok(cuabi_program_compile(&fresh, prog, NULL));
    ck_assert_ok(cuabi_objcode_get_kernel(&fresh_add, fresh, "add_one"));
    cuabi_event *ev;
    ck_assert_ok(cuabi_event_create(&ev, dev, NULL));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, N));
    cuabi_launch_config c = on_stream(N / 64, 64);
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    cuabi_buffer *tmp, *tmp2;
    ck_assert_ok(cuabi_buffer_allocate(&tmp, pool, N * sizeof(int), 0, stream));
    ck_assert_ok(cuabi_buffer_allocate(&tmp2, pool, N * sizeof(int), 0, stream));
    ck_assert_ok(cuabi_buffer_copy(tmp, 0, host_in, 0, N * sizeof(int), stream));
    ck_assert_ok(cuabi_buffer_memset(tmp2, 0, 0, 4, N, stream));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, tmp));
    ck_assert_ok(cuabi_launch(fresh_add, p, &c));
    cuabi_prepared *prep;
    ck_assert_ok(cuabi_prepared_create(&prep, fresh_add, p, &c));
    ck_assert_ok(cuabi_prepared_launch(prep));
    ck_assert_ok(cuabi_event_record(ev, stream));
    ck_assert_ok(cuabi_buffer_copy(tmp2, 0, tmp, 0, N * sizeof(int), stream));
    ck_assert_ok(cuabi_buffer_copy_to_host((void *)hout, tmp2, 0, N * sizeof(int), stream));
    ck_assert_ok(cuabi_buffer_free_async(tmp, stream));
    ck_assert_ok(cuabi_buffer_free_async(tmp2, stream));
    cuabi_capture_status cs;
    ck_assert_ok(cuabi_graph_capture_status(&cs, stream));
    ck_assert_int_eq(cs, CUABI_CAPTURE_STATUS_ACTIVE);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    /* Everything the graph runs stays alive without the handles. */
    cuabi_prepared_release(prep);
    cuabi_argpack_release(p);
    cuabi_kernel_release(fresh_add);
    cuabi_objcode_release(fresh);
    cuabi_program_release(prog);
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    cuabi_graph_release(g);
    for (int rep = 0; rep < 3; rep++) {
        memset((void *)hout, 0, N * sizeof(int));
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
        stream_sync();
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(((int *)hout)[i], i + 2);
    }
    cuabi_graph_exec_release(e);
    cuabi_event_release(ev);
    cuabi_buffer_destroy(host_in);
    cuabi_buffer_destroy(host_out);
    cuabi_memory_resource_release(pinned);
}
END_TEST

/* A graph keeps its kernels and buffers alive, and a buffer from before the
 * capture freed during it is freed with the graph, not at every replay. */
START_TEST(graph_keeps_what_it_runs)
{
    enum { N = 512 };
    cuabi_buffer *x = alloc(N * sizeof(int));
    stream_sync();
    size_t handles = cuabi__handle_live_count();
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, N));
    cuabi_launch_config c = on_stream(N / 128, 128);
    cuabi_buffer *doomed = alloc(64);
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_THREAD_LOCAL));
    ck_assert_ok(cuabi_launch(add_one, p, &c));
    ck_assert_ok(cuabi_buffer_free_async(doomed, stream));
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    uintptr_t xp;
    ck_assert_ok(cuabi_buffer_pointer(&xp, x));
    cuabi_buffer_destroy(x);
    for (int rep = 0; rep < 10; rep++)
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    /* x's memory is still the graph's: read it through a wrapped buffer. */
    cuabi_buffer *view;
    ck_assert_ok(cuabi_buffer_wrap(&view, dev, CUABI_MEMORY_DEVICE, xp, N * sizeof(int), NULL,
                                   NULL));
    int back[N];
    ck_assert_ok(cuabi_buffer_copy_to_host(back, view, 0, sizeof back, NULL));
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(back[i], 10);
    cuabi_buffer_destroy(view);
    cuabi_graph_exec_release(e);
    stream_sync();
    ck_assert_uint_eq(cuabi__handle_live_count(), handles - 1);
}
END_TEST

/* -------------------------------------------------- explicit node kinds */

START_TEST(explicit_node_kinds)
{
    enum { N = 64 };
    int host_src[N], host_dst[N];
    for (int i = 0; i < N; i++) host_src[i] = 3 * i;
    cuabi_memory_resource *pinned;
    cuabi_buffer *pin_src, *pin_dst, *a = alloc(N * sizeof(int)), *b = alloc(N * sizeof(int));
    stream_sync();
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    ck_assert_ok(cuabi_buffer_allocate(&pin_src, pinned, sizeof host_src, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&pin_dst, pinned, sizeof host_dst, 0, NULL));
    uintptr_t ps, pd;
    ck_assert_ok(cuabi_buffer_pointer(&ps, pin_src));
    ck_assert_ok(cuabi_buffer_pointer(&pd, pin_dst));
    memcpy((void *)ps, host_src, sizeof host_src);
    cuabi_event *ev;
    ck_assert_ok(cuabi_event_create(&ev, dev, NULL));
    cuabi_graph *g, *child;
    cuabi_graph_node *up, *bump, *rec, *wait, *ch, *host, *down, *set;
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, b));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, N));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.block[0] = N;
    c.device = dev;
    ck_assert_ok(cuabi_graph_create(&child));
    ck_assert_ok(cuabi_graph_add_kernel(&bump, child, NULL, 0, add_one, p, &c));
    cuabi_graph_node_release(bump);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_memcpy_from_host(&up, g, NULL, 0, a, 0, (void *)ps,
                                                  sizeof host_src));
    ck_assert_ok(cuabi_graph_add_memcpy(&set, g, &up, 1, b, 0, a, 0, sizeof host_src));
    ck_assert_ok(cuabi_graph_add_event_record(&rec, g, &set, 1, ev));
    ck_assert_ok(cuabi_graph_add_event_wait(&wait, g, &rec, 1, ev));
    ck_assert_ok(cuabi_graph_add_child(&ch, g, &wait, 1, child));
    ck_assert_ok(cuabi_graph_add_host(&host, g, &ch, 1, count_call, NULL));
    ck_assert_ok(cuabi_graph_add_memcpy_to_host(&down, g, &host, 1, (void *)pd, b, 0,
                                                sizeof host_dst));
    host_calls = 0;
    run_once(g);
    memcpy(host_dst, (void *)pd, sizeof host_dst);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(host_dst[i], 3 * i + 1);
    ck_assert_int_eq(host_calls, 1);
    /* Views: a contiguous device view copied onto another. */
    cuabi_view *va, *vb;
    int64_t shape[1] = { N };
    cuabi_graph *g2;
    cuabi_graph_node *vc;
    ck_assert_ok(cuabi_view_create(&va, a, 0, CUABI_DTYPE_INT, 32, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_view_create(&vb, b, 0, CUABI_DTYPE_INT, 32, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_graph_create(&g2));
    ck_assert_ok(cuabi_graph_add_memcpy_view(&vc, g2, NULL, 0, vb, va));
    run_once(g2);
    ck_assert_ok(cuabi_buffer_copy_to_host(host_dst, b, 0, sizeof host_dst, NULL));
    ck_assert_int_eq(host_dst[N - 1], 3 * (N - 1));
    /* Graphviz. */
    size_t size = 0;
    ck_assert_status(cuabi_graph_debug_dot_text(NULL, &size, g, CUABI_GRAPH_DOT_VERBOSE),
                     CUABI_ERROR_BUFFER_TOO_SMALL);
    char *dot = malloc(size);
    ck_assert_ok(cuabi_graph_debug_dot_text(dot, &size, g, CUABI_GRAPH_DOT_VERBOSE));
    ck_assert_ptr_nonnull(strstr(dot, "digraph"));
    free(dot);
    cuabi_graph_node *nodes[] = { up, set, rec, wait, ch, host, down, vc };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
        cuabi_graph_node_release(nodes[i]);
    cuabi_view_release(va);
    cuabi_view_release(vb);
    cuabi_graph_release(g2);
    cuabi_graph_release(g);
    cuabi_graph_release(child);
    cuabi_argpack_release(p);
    cuabi_event_release(ev);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
    cuabi_buffer_destroy(pin_src);
    cuabi_buffer_destroy(pin_dst);
    cuabi_memory_resource_release(pinned);
}
END_TEST

/* ----------------------------------------------------------- 8 threads */

enum { THREADS = 8, REPLAYS = 100, KERNELS = 10, TN = 1024 };

static void *replay_own(void *arg)
{
    (void)arg;
    cuabi_stream *s = NULL;
    cuabi_buffer *x = NULL;
    cuabi_argpack *p = NULL;
    cuabi_graph *g = NULL;
    cuabi_graph_exec *e = NULL;
    int bad = 0;
    if (cuabi_stream_create(&s, dev, NULL) || cuabi_buffer_allocate(&x, pool, TN * 4, 0, s) ||
        cuabi_buffer_memset(x, 0, 0, 4, TN, s) || cuabi_argpack_create(&p, "buffer, i32") ||
        cuabi_argpack_set_buffer(p, 0, x) || cuabi_argpack_set_int(p, 1, TN))
        return (void *)1;
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = TN / 256;
    c.block[0] = 256;
    c.stream = s;
    /* Thread-local mode: other threads' calls do not disturb the capture. */
    if (cuabi_graph_capture_begin(s, CUABI_CAPTURE_MODE_THREAD_LOCAL))
        return (void *)2;
    for (int k = 0; k < KERNELS; k++)
        bad |= cuabi_launch(add_one, p, &c) != CUABI_SUCCESS;
    if (cuabi_graph_capture_end(&g, s) || bad || cuabi_graph_instantiate(&e, g, NULL))
        return (void *)3;
    for (int r = 0; r < REPLAYS; r++)
        bad |= cuabi_graph_exec_launch(e, s) != CUABI_SUCCESS;
    int back[TN];
    if (bad || cuabi_buffer_copy_to_host(back, x, 0, sizeof back, s) ||
        cuabi_stream_synchronize(s))
        return (void *)4;
    for (int i = 0; i < TN; i++)
        if (back[i] != REPLAYS * KERNELS)
            return (void *)5;
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_free_async(x, s);
    cuabi_stream_synchronize(s);
    cuabi_stream_release(s);
    return NULL;
}

/* Memory nodes and destroyed nodes (issue 24, cuda.core's GraphDefinition):
 * alloc -> memset -> add_one -> copy out -> free, relaunched; a kernel node
 * destroyed before instantiation does not run; pinned and managed graph
 * allocations where the driver has them (a clean refusal otherwise); a peer
 * with access on two GPUs. */
START_TEST(memory_nodes_and_destroyed_nodes)
{
    enum { N = 256 };
    int host[N];
    cuabi_buffer *out = alloc(N * sizeof(int));
    stream_sync();
    cuabi_graph *g;
    cuabi_graph_node *al, *set, *k, *extra, *copy, *fr;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_mem_alloc(&al, g, NULL, 0, dev, CUABI_MEMORY_DEVICE,
                                           N * sizeof(int), NULL, 0));
    uintptr_t ptr = 0;
    size_t size = 0;
    ck_assert_ok(cuabi_graph_node_mem_info(&ptr, &size, al));
    ck_assert(ptr != 0);
    ck_assert_uint_ge(size, N * sizeof(int));
    cuabi_buffer *mem;
    ck_assert_ok(cuabi_buffer_wrap(&mem, dev, CUABI_MEMORY_DEVICE, ptr, N * sizeof(int), NULL,
                                   NULL));
    ck_assert_ok(cuabi_graph_add_memset(&set, g, &al, 1, mem, 0, 5, 4, N));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, mem));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, N));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.block[0] = N;
    c.device = dev;
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, &set, 1, add_one, p, &c));
    ck_assert_ok(cuabi_graph_add_memcpy(&copy, g, &k, 1, out, 0, mem, 0, N * sizeof(int)));
    ck_assert_ok(cuabi_graph_add_mem_free(&fr, g, &copy, 1, ptr));
    uintptr_t fptr = 0;
    ck_assert_ok(cuabi_graph_node_mem_info(&fptr, &size, fr));
    ck_assert_uint_eq(fptr, ptr);
    /* CUDA keeps every node of a graph with memory nodes. */
    ck_assert_status(cuabi_graph_node_destroy(k), CUABI_ERROR_NOT_SUPPORTED);
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    for (int round = 0; round < 3; round++) {
        ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 1, N * sizeof(int), stream));
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
        stream_sync();
        ck_assert_ok(cuabi_buffer_copy_to_host(host, out, 0, sizeof host, NULL));
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(host[i], 6);
    }
    cuabi_graph_exec_release(e);
    /* A destroyed node does not run: set 5, add_one twice, the second destroyed. */
    {
        cuabi_graph *g3;
        cuabi_graph_node *s3, *k1, *k2;
        cuabi_argpack *po;
        ck_assert_ok(cuabi_argpack_create(&po, "buffer, i32"));
        ck_assert_ok(cuabi_argpack_set_buffer(po, 0, out));
        ck_assert_ok(cuabi_argpack_set_int(po, 1, N));
        ck_assert_ok(cuabi_graph_create(&g3));
        ck_assert_ok(cuabi_graph_add_memset(&s3, g3, NULL, 0, out, 0, 5, 4, N));
        ck_assert_ok(cuabi_graph_add_kernel(&k1, g3, &s3, 1, add_one, po, &c));
        ck_assert_ok(cuabi_graph_add_kernel(&extra, g3, &k1, 1, add_one, po, &c));
        ck_assert_ok(cuabi_graph_add_kernel(&k2, g3, &extra, 1, add_one, po, &c));
        ck_assert_ok(cuabi_graph_node_destroy(extra));
        int v = 1;
        ck_assert_ok(cuabi_graph_node_is_valid(&v, extra));
        ck_assert_int_eq(v, 0);
        size_t nd = 9;
        ck_assert_ok(cuabi_graph_node_dependency_count(&nd, k2));
        ck_assert_uint_eq(nd, 0);
        cuabi_graph_node *from[1] = { k1 }, *to[1] = { k2 };
        ck_assert_ok(cuabi_graph_add_dependencies(g3, from, to, 1));
        run_once(g3);
        ck_assert_ok(cuabi_buffer_copy_to_host(host, out, 0, sizeof host, NULL));
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(host[i], 7);
        cuabi_graph_node_release(s3);
        cuabi_graph_node_release(k1);
        cuabi_graph_node_release(k2);
        cuabi_argpack_release(po);
        cuabi_graph_release(g3);
    }
    /* Pinned (host) and managed graph allocations: CUDA 12.2 / 13.0 drivers. */
    cuabi_memory_kind kinds[2] = { CUABI_MEMORY_PINNED, CUABI_MEMORY_MANAGED };
    for (int i = 0; i < 2; i++) {
        cuabi_graph *h;
        cuabi_graph_node *a2, *s2, *c2, *f2;
        ck_assert_ok(cuabi_graph_create(&h));
        cuabi_status st = cuabi_graph_add_mem_alloc(&a2, h, NULL, 0, dev, kinds[i], 64, NULL, 0);
        if (st != CUABI_SUCCESS) {
            fprintf(stderr, "note: a %s graph allocation is refused here: %s\n",
                    i ? "managed" : "pinned", cuabi_last_error()->message);
            size_t n = 1;
            ck_assert_ok(cuabi_graph_node_count(&n, h));
            ck_assert_uint_eq(n, 0);
            cuabi_graph_release(h);
            continue;
        }
        uintptr_t hp;
        ck_assert_ok(cuabi_graph_node_mem_info(&hp, &size, a2));
        cuabi_buffer *hb;
        ck_assert_ok(cuabi_buffer_wrap(&hb, dev, kinds[i], hp, 64, NULL, NULL));
        ck_assert_ok(cuabi_graph_add_memset(&s2, h, &a2, 1, hb, 0, 9, 4, 16));
        ck_assert_ok(cuabi_graph_add_memcpy(&c2, h, &s2, 1, out, 0, hb, 0, 64));
        ck_assert_ok(cuabi_graph_add_mem_free(&f2, h, &c2, 1, hp));
        run_once(h);
        ck_assert_ok(cuabi_buffer_copy_to_host(host, out, 0, 64, NULL));
        for (int j = 0; j < 16; j++)
            ck_assert_int_eq(host[j], 9);
        cuabi_buffer_destroy(hb);
        cuabi_graph_node_release(a2);
        cuabi_graph_node_release(s2);
        cuabi_graph_node_release(c2);
        cuabi_graph_node_release(f2);
        cuabi_graph_release(h);
    }
    /* A peer given access, where there are two GPUs. */
    int count = 0;
    ck_assert_ok(cuabi_device_count(&count));
    if (count > 1) {
        cuabi_device *d1;
        cuabi_graph *h;
        cuabi_graph_node *a2, *f2;
        ck_assert_ok(cuabi_device_get(&d1, 1));
        ck_assert_ok(cuabi_graph_create(&h));
        cuabi_device *peers[1] = { d1 };
        ck_assert_ok(cuabi_graph_add_mem_alloc(&a2, h, NULL, 0, dev, CUABI_MEMORY_DEVICE, 4096,
                                               peers, 1));
        uintptr_t hp;
        ck_assert_ok(cuabi_graph_node_mem_info(&hp, &size, a2));
        ck_assert_ok(cuabi_graph_add_mem_free(&f2, h, &a2, 1, hp));
        run_once(h);
        cuabi_graph_node_release(a2);
        cuabi_graph_node_release(f2);
        cuabi_graph_release(h);
        cuabi_device_release(d1);
    }
    /* Bad input the driver judges: memory no graph allocated, a second free. */
    uintptr_t op;
    ck_assert_ok(cuabi_buffer_pointer(&op, out));
    cuabi_graph *g4;
    cuabi_graph_node *bad = NULL;
    ck_assert_ok(cuabi_graph_create(&g4));
    ck_assert_int_ne(cuabi_graph_add_mem_free(&bad, g4, NULL, 0, op), CUABI_SUCCESS);
    ck_assert_ptr_null(bad);
    ck_assert_int_ne(cuabi_graph_add_mem_free(&bad, g, NULL, 0, ptr), CUABI_SUCCESS);
    ck_assert_ptr_null(bad);
    cuabi_graph_release(g4);
    cuabi_graph_node *nodes[] = { al, set, k, extra, copy, fr };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
        cuabi_graph_node_release(nodes[i]);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(mem);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(out);
}
END_TEST

START_TEST(eight_threads_replay_their_own)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, replay_own, NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_msg(rc == NULL, "thread %d failed at step %ld: %s", i, (long)rc,
                      cuabi_last_error()->message);
    }
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(bad_input_on_a_gpu)
{
    cuabi_stream *legacy;
    cuabi_graph *g = NULL;
    size_t handles = cuabi__handle_live_count();
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, dev));
    ck_assert_status(cuabi_graph_capture_begin(legacy, CUABI_CAPTURE_MODE_GLOBAL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("legacy default stream");
    /* A synchronising call during capture: refused, the capture is invalid,
     * ending it gives no graph and leaves nothing behind. */
    cuabi_buffer *x = alloc(64), *y = alloc(64);
    stream_sync();
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, 16));
    cuabi_launch_config c = on_stream(1, 32);
    size_t before = cuabi__handle_live_count();
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(add_one, p, &c));
    ck_assert_status(cuabi_stream_synchronize(stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_error_mentions("cuabi_stream_synchronize");
    ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_ptr_null(g);
    ck_assert_uint_eq(cuabi__handle_live_count(), before);
    /* A synchronous copy elsewhere during a global capture. */
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_status(cuabi_buffer_copy(y, 0, x, 0, 64, NULL), CUABI_ERROR_STREAM_CAPTURE);
    printf("a synchronous copy during a global capture: %s\n", cuabi_last_error()->message);
    /* Whether the driver also invalidates the capture is its business:
     * either way ending it works and leaves nothing behind. */
    cuabi_status end = cuabi_graph_capture_end(&g, stream);
    printf("ending that capture: %s\n", cuabi_status_name(end));
    if (end == CUABI_SUCCESS)
        cuabi_graph_release(g);
    else
        ck_assert_int_eq(end, CUABI_ERROR_STREAM_CAPTURE);
    g = NULL;
    ck_assert_uint_eq(cuabi__handle_live_count(), before);
    /* The stream works again. */
    ck_assert_ok(cuabi_launch(add_one, p, &c));
    stream_sync();
    /* A node whose buffer was released; a cycle. */
    cuabi_graph_node *a, *b, *n = NULL;
    cuabi_launch_config dc = CUABI_LAUNCH_CONFIG_INIT;
    dc.block[0] = 32;
    dc.device = dev;
    ck_assert_ok(cuabi_graph_create(&g));
    cuabi_buffer_destroy(y);
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_graph_add_kernel(&a, g, NULL, 0, add_one, p, &dc));
    ck_assert_ok(cuabi_graph_add_kernel(&b, g, &a, 1, add_one, p, &dc));
    cuabi_buffer *gone = alloc(64);
    stream_sync();
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, gone));
    cuabi_buffer_destroy(gone);
    ck_assert_status(cuabi_graph_add_kernel(&n, g, &b, 1, add_one, p, &dc),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 0");
    ck_assert_status(cuabi_graph_add_dependencies(g, &b, &a, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cycle");
    /* An executable launched on another device's stream. */
    int ndev = 0;
    ck_assert_ok(cuabi_device_count(&ndev));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    if (ndev > 1) {
        cuabi_device *d1;
        cuabi_stream *s1;
        ck_assert_ok(cuabi_device_get(&d1, 1));
        ck_assert_ok(cuabi_stream_create(&s1, d1, NULL));
        ck_assert_status(cuabi_graph_exec_launch(e, s1), CUABI_ERROR_INVALID_ARGUMENT);
        ck_assert_error_mentions("built for device 0");
        cuabi_stream_release(s1);
        cuabi_device_release(d1);
    } else {
        printf("one GPU: launching on another device's stream is checked by tests/runtime/test_graph\n");
    }
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    int back = 0;
    ck_assert_ok(cuabi_buffer_copy_to_host(&back, x, 0, sizeof back, NULL));
    ck_assert_int_eq(back, 3);
    cuabi_graph_exec_release(e);
    cuabi_graph_node_release(a);
    cuabi_graph_node_release(b);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(x);
    cuabi_stream_release(legacy);
    stream_sync();
    ck_assert_uint_eq(cuabi__handle_live_count(), handles);
}
END_TEST

/* Instantiate flags: upload at instantiation, and auto-free on launch for
 * a graph whose allocation outlives one launch. */
/* cuabi_stream_launch_host_func on a GPU: in stream order after kernels
 * writing pinned memory; released on the driver's thread right after its
 * one run on an ordinary stream; in a GLOBAL capture, a host node run at
 * every launch of two executables and released once, on this thread, when
 * the last of the graph and the executables goes; a capture begun behind
 * cuabi's back refused. */
typedef struct gpu_host_payload {
    volatile int *x;
    int seen[8];
    _Atomic int calls, releases;
    pthread_t fn_thread, release_thread;
} gpu_host_payload;

static void gpu_host_fn(void *p)
{
    gpu_host_payload *h = p;
    int i = atomic_load(&h->calls);
    if (i < 8)
        h->seen[i] = *h->x;
    h->fn_thread = pthread_self();
    atomic_fetch_add(&h->calls, 1);
}

static void gpu_host_release(void *p)
{
    gpu_host_payload *h = p;
    h->release_thread = pthread_self();
    atomic_fetch_add(&h->releases, 1);
}

START_TEST(host_functions_in_stream_order_and_in_captures)
{
    size_t handles = cuabi__handle_live_count();
    cuabi_memory_resource *pinned;
    cuabi_buffer *xb;
    uintptr_t xa;
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    ck_assert_ok(cuabi_buffer_allocate(&xb, pinned, sizeof(int), 0, NULL));
    ck_assert_ok(cuabi_buffer_pointer(&xa, xb));
    volatile int *x = (volatile int *)xa;
    *x = 0;
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, xb));
    ck_assert_ok(cuabi_argpack_set_int(p, 1, 1));
    cuabi_launch_config c = on_stream(1, 32);
    /* An ordinary stream: each call sees every kernel queued before it. */
    static gpu_host_payload once[8];
    for (int i = 0; i < 8; i++) {
        once[i] = (gpu_host_payload){ .x = x };
        ck_assert_ok(cuabi_launch(add_one, p, &c));
        ck_assert_ok(cuabi_stream_launch_host_func(stream, gpu_host_fn, &once[i],
                                                   gpu_host_release));
    }
    stream_sync();
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(atomic_load(&once[i].calls), 1);
        ck_assert_int_eq(atomic_load(&once[i].releases), 1);
        ck_assert_int_eq(once[i].seen[0], i + 1);
        ck_assert(pthread_equal(once[i].fn_thread, once[i].release_thread));
        ck_assert(!pthread_equal(once[i].fn_thread, pthread_self()));
    }
    /* A GLOBAL capture: a host node after the kernel. */
    *x = 0;
    static gpu_host_payload cap;
    cap = (gpu_host_payload){ .x = x };
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(add_one, p, &c));
    ck_assert_ok(cuabi_stream_launch_host_func(stream, gpu_host_fn, &cap, gpu_host_release));
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    ck_assert_int_eq(atomic_load(&cap.calls), 0);
    cuabi_graph_exec *e1, *e2;
    ck_assert_ok(cuabi_graph_instantiate(&e1, g, NULL));
    ck_assert_ok(cuabi_graph_instantiate(&e2, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e1, stream));
    ck_assert_ok(cuabi_graph_exec_launch(e1, stream));
    ck_assert_ok(cuabi_graph_exec_launch(e2, stream));
    stream_sync();
    ck_assert_int_eq(atomic_load(&cap.calls), 3);
    ck_assert_int_eq(cap.seen[0], 1);
    ck_assert_int_eq(cap.seen[1], 2);
    ck_assert_int_eq(cap.seen[2], 3);
    cuabi_graph_release(g);
    cuabi_graph_exec_release(e1);
    ck_assert_int_eq(atomic_load(&cap.releases), 0);
    ck_assert_ok(cuabi_graph_exec_launch(e2, stream));
    stream_sync();
    ck_assert_int_eq(atomic_load(&cap.calls), 4);
    cuabi_graph_exec_release(e2);
    ck_assert_int_eq(atomic_load(&cap.releases), 1);
    ck_assert(pthread_equal(cap.release_thread, pthread_self()));
    /* Bad input, and a capture cuabi did not begin (as torch's). */
    ck_assert_status(cuabi_stream_launch_host_func(stream, NULL, &cap, gpu_host_release),
                     CUABI_ERROR_INVALID_ARGUMENT);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(cuda);
    CUresult (*begin)(CUstream, CUstreamCaptureMode) =
        (CUresult (*)(CUstream, CUstreamCaptureMode))dlsym(cuda, "cuStreamBeginCapture_v2");
    CUresult (*end)(CUstream, CUgraph *) =
        (CUresult (*)(CUstream, CUgraph *))dlsym(cuda, "cuStreamEndCapture");
    CUresult (*destroy)(CUgraph) = (CUresult (*)(CUgraph))dlsym(cuda, "cuGraphDestroy");
    ck_assert(begin && end && destroy);
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, stream));
    ck_assert_int_eq(begin((CUstream)raw, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    gpu_host_payload foreign = { .x = x };
    ck_assert_status(cuabi_stream_launch_host_func(stream, gpu_host_fn, &foreign,
                                                   gpu_host_release),
                     CUABI_ERROR_STREAM_CAPTURE);
    CUgraph fg = NULL;
    ck_assert_int_eq(end((CUstream)raw, &fg), CUDA_SUCCESS);
    size_t nodes = 1;
    CUresult (*get_nodes)(CUgraph, CUgraphNode *, size_t *) =
        (CUresult (*)(CUgraph, CUgraphNode *, size_t *))dlsym(cuda, "cuGraphGetNodes");
    if (get_nodes && fg) {
        ck_assert_int_eq(get_nodes(fg, NULL, &nodes), CUDA_SUCCESS);
        ck_assert_uint_eq(nodes, 0);        /* nothing was recorded */
    }
    if (fg)
        ck_assert_int_eq(destroy(fg), CUDA_SUCCESS);
    dlclose(cuda);
    ck_assert_int_eq(atomic_load(&foreign.calls) + atomic_load(&foreign.releases), 0);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(xb);
    cuabi_memory_resource_release(pinned);
    ck_assert_uint_eq(cuabi__handle_live_count(), handles);
}
END_TEST

START_TEST(instantiate_flags)
{
    cuabi_buffer *keep;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_buffer_allocate(&keep, pool, 4096, 0, stream));
    ck_assert_ok(cuabi_buffer_memset(keep, 0, 7, 1, 4096, stream));
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_instantiate_options o = CUABI_GRAPH_INSTANTIATE_OPTIONS_INIT;
    o.flags = CUABI_GRAPH_INSTANTIATE_AUTO_FREE_ON_LAUNCH | CUABI_GRAPH_INSTANTIATE_UPLOAD;
    o.upload_stream = stream;
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, &o));
    ck_assert_ok(cuabi_graph_exec_upload(e, stream));
    for (int i = 0; i < 3; i++)
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    stream_sync();
    unsigned char v = 0;
    ck_assert_ok(cuabi_buffer_copy_to_host(&v, keep, 100, 1, NULL));
    ck_assert_int_eq(v, 7);
    /* The graph's allocation belongs to the caller after the launches:
     * freed on the stream like any buffer. */
    ck_assert_ok(cuabi_buffer_free_async(keep, stream));
    stream_sync();
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_graph");
    TCase *tc = tcase_create("gpu_graph");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, capture_and_explicit_segred_agree);
    tcase_add_test(tc, update_without_reinstantiation);
    tcase_add_test(tc, conditional_while_loop_runs_n_times);
    tcase_add_test(tc, capture_every_cuabi_path_in_global_mode);
    tcase_add_test(tc, graph_keeps_what_it_runs);
    tcase_add_test(tc, explicit_node_kinds);
    tcase_add_test(tc, eight_threads_replay_their_own);
    tcase_add_test(tc, bad_input_on_a_gpu);
    tcase_add_test(tc, instantiate_flags);
    tcase_add_test(tc, host_functions_in_stream_order_and_in_captures);
    tcase_add_test(tc, memory_nodes_and_destroyed_nodes);
    tcase_add_test(tc, conditionals_added_into_a_capture);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
