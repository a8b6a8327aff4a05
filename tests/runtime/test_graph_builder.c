/* Conditionals and child graphs added into a stream capture (what cuda.core's
 * GraphBuilder.create_condition / if_then / if_else / switch / while_loop /
 * embed do), against the fake driver (tests/fixtures/fake_graph.h):
 * cuabi_graph_capture_begin_to_graph into a graph and into a conditional's
 * body, cuabi_graph_capture_conditional_handle, _add_conditional and
 * _add_child at the capture's dependencies, what the graph keeps alive, and
 * the hostile cases (a handle of another graph, a builder used after its
 * end, a switch of 0 or a huge number of cases, a closed child, captures
 * not begun into a graph, failed captures). */
#include <limits.h>
#include <pthread.h>

#include "testutil.h"
#include "fake_graph.h"
#include "graph_testutil.h"
#include "runtime/graph.h"

static cuabi_device *dev;
static cuabi_stream *stream, *body_stream, *body_stream2;
static cuabi_memory_resource *pool;
static cuabi_objcode *code;
static cuabi_kernel *add, *loop_kernel;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_kernel_implement("add", fake_impl_add_i64);
    fake_kernel_implement("empty", fake_impl_count_loop);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin",
             cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&add, code, "add"));
    ck_assert_ok(cuabi_objcode_get_kernel(&loop_kernel, code, "empty"));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&body_stream, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&body_stream2, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(body_stream2);
    cuabi_stream_release(body_stream);
    cuabi_stream_release(stream);
    cuabi_device_release(dev);
    cuabi_kernel_release(loop_kernel);
    cuabi_kernel_release(add);
    cuabi_objcode_release(code);
    graph_test_no_leaks();
}

/* ------------------------------------------------------------ helpers */

static cuabi_buffer *ints(size_t n, int64_t first)
{
    return graph_test_ints(pool, stream, n, first);
}

static int64_t at(cuabi_buffer *b, size_t i)
{
    return *graph_test_slot(b, i);
}

static void set(cuabi_buffer *b, size_t i, int64_t v)
{
    *graph_test_slot(b, i) = v;
}

/* out[0] += in[0..n) on `s`. */
static void launch_add(cuabi_stream *s, cuabi_buffer *out, cuabi_buffer *in, uint64_t n)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, out));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, n));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.stream = s;
    ck_assert_ok(cuabi_launch(add, p, &c));
    cuabi_argpack_release(p);
}

/* One loop iteration on `s`: counter++, the condition is counter < limit. */
static void launch_step(cuabi_stream *s, uint64_t handle, cuabi_buffer *counter, uint64_t limit)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "u64, buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_uint(p, 0, handle));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, counter));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, limit));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.stream = s;
    ck_assert_ok(cuabi_launch(loop_kernel, p, &c));
    cuabi_argpack_release(p);
}

static void run(cuabi_graph *g)
{
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    cuabi_graph_exec_release(e);
}

static cuabi_graph_node_kind kind_at(cuabi_graph *g, size_t i, size_t *ndeps)
{
    cuabi_graph_node *n;
    cuabi_graph_node_kind k;
    ck_assert_ok(cuabi_graph_node_at(&n, g, i));
    ck_assert_ok(cuabi_graph_node_type(&k, n));
    if (ndeps)
        ck_assert_ok(cuabi_graph_node_dependency_count(ndeps, n));
    cuabi_graph_node_release(n);
    return k;
}

/* A body captured on `s`: begin into the node's body `index`, `fill`, end;
 * the end gives the body itself back. */
static cuabi_graph *body_begin(cuabi_graph_node *node, unsigned index, cuabi_stream *s)
{
    cuabi_graph *body;
    ck_assert_ok(cuabi_graph_node_body(&body, node, index));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(s, body, CUABI_CAPTURE_MODE_RELAXED));
    return body;
}

static void body_end(cuabi_graph *body, cuabi_stream *s)
{
    cuabi_graph *same;
    ck_assert_ok(cuabi_graph_capture_end(&same, s));
    ck_assert_ptr_eq(same, body);
    cuabi_graph_release(same);
    cuabi_graph_release(body);
}

/* ------------------------------------------------------------- tests */

/* GraphBuilder's while_loop: work before, the loop, work after, in order. */
START_TEST(while_loop_in_a_capture)
{
    cuabi_graph *g, *same;
    cuabi_graph_node *loop;
    cuabi_buffer *counter = ints(1, 0), *in = ints(1, 100), *back = ints(1, 0);
    uint64_t h = 0;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 1);
    ck_assert_ok(cuabi_buffer_memset(counter, 0, 0, 2, 4, stream));   /* counter = 0 */
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&h, stream, 1,
                                                        CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    ck_assert_ok(cuabi_graph_capture_add_conditional(&loop, stream, h,
                                                     CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    ck_assert_int_eq(fake_update_deps_calls, 1);
    cuabi_graph *body = body_begin(loop, 0, body_stream);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 2);
    launch_step(body_stream, h, counter, 5);
    body_end(body, body_stream);
    /* After the loop: back[0] = counter (a copy depending on the loop). */
    ck_assert_ok(cuabi_buffer_copy(back, 0, counter, 0, 8, stream));
    launch_add(stream, back, in, 1);                                       /* back += 100 */
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    ck_assert_ptr_eq(same, g);
    cuabi_graph_release(same);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    size_t n, d;
    ck_assert_ok(cuabi_graph_node_count(&n, g));
    ck_assert_uint_eq(n, 4);
    /* cuabi's record of the conditional comes first, the captured nodes in
     * the driver's order after it; each captured node after the first has
     * one dependency (the chain memset -> loop -> copy -> kernel). */
    ck_assert_int_eq(kind_at(g, 0, &d), CUABI_GRAPH_NODE_CONDITIONAL);
    ck_assert_uint_eq(d, 1);
    size_t kinds[14] = { 0 };
    for (size_t i = 0; i < n; i++) {
        cuabi_graph_node_kind k = kind_at(g, i, &d);
        kinds[k]++;
        ck_assert_uint_eq(d, k == CUABI_GRAPH_NODE_MEMSET ? 0 : 1);
    }
    ck_assert_uint_eq(kinds[CUABI_GRAPH_NODE_MEMSET], 1);
    ck_assert_uint_eq(kinds[CUABI_GRAPH_NODE_MEMCPY], 1);
    ck_assert_uint_eq(kinds[CUABI_GRAPH_NODE_KERNEL], 1);
    /* The graph keeps what the body and the outer work use. */
    cuabi_buffer_destroy(in);
    cuabi_kernel_release(loop_kernel);
    loop_kernel = NULL;
    set(counter, 0, 42);
    run(g);
    ck_assert_int_eq(at(counter, 0), 5);
    ck_assert_int_eq(at(back, 0), 105);
    run(g);
    ck_assert_int_eq(at(back, 0), 105);
    cuabi_graph_node_release(loop);
    cuabi_graph_release(g);
    ck_assert_ok(cuabi_objcode_get_kernel(&loop_kernel, code, "empty"));
    cuabi_buffer_destroy(counter);
    cuabi_buffer_destroy(back);
}
END_TEST

/* if_then, if_else and switch: the branch the condition picks runs. */
START_TEST(if_else_and_switch_in_a_capture)
{
    cuabi_graph *g, *same;
    cuabi_graph_node *ifn, *sw;
    cuabi_buffer *out = ints(1, 0), *one = ints(1, 1), *ten = ints(1, 10), *hundred = ints(1, 100);
    uint64_t hif = 0, hsw = 0;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&hif, stream, 0,
                                                        CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&hsw, stream, 2,
                                                        CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    ck_assert_uint_ne(hif, hsw);
    ck_assert_ok(cuabi_graph_capture_add_conditional(&ifn, stream, hif,
                                                     CUABI_GRAPH_CONDITIONAL_IF, 2));
    cuabi_graph *then = body_begin(ifn, 0, body_stream);
    cuabi_graph *other = body_begin(ifn, 1, body_stream2);   /* two bodies at once */
    launch_add(body_stream, out, one, 1);
    launch_add(body_stream2, out, ten, 1);
    body_end(then, body_stream);
    body_end(other, body_stream2);
    ck_assert_ok(cuabi_graph_capture_add_conditional(&sw, stream, hsw,
                                                     CUABI_GRAPH_CONDITIONAL_SWITCH, 3));
    for (unsigned i = 0; i < 3; i++) {
        cuabi_graph *b = body_begin(sw, i, body_stream);
        launch_add(body_stream, out, i == 2 ? hundred : one, 1);
        body_end(b, body_stream);
    }
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    size_t d;
    /* The switch follows the if (its one dependency). */
    ck_assert_int_eq(kind_at(g, 1, &d), CUABI_GRAPH_NODE_CONDITIONAL);
    ck_assert_uint_eq(d, 1);
    cuabi_buffer_destroy(one);
    cuabi_buffer_destroy(ten);
    cuabi_buffer_destroy(hundred);
    run(g);   /* if: 0 -> else (+10); switch: 2 -> case 2 (+100) */
    ck_assert_int_eq(at(out, 0), 110);
    cuabi_graph_node_release(ifn);
    cuabi_graph_node_release(sw);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(out);
}
END_TEST

/* GraphBuilder.embed: a child graph node at the capture's place. */
START_TEST(embed_a_child_in_a_capture)
{
    cuabi_graph *child, *g, *same;
    cuabi_graph_node *node;
    cuabi_buffer *out = ints(1, 0), *in = ints(2, 1);
    ck_assert_ok(cuabi_graph_capture_begin(body_stream, CUABI_CAPTURE_MODE_GLOBAL));
    launch_add(body_stream, out, in, 2);                                   /* out += 3 */
    ck_assert_ok(cuabi_graph_capture_end(&child, body_stream));
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 2, 4, stream));
    ck_assert_ok(cuabi_graph_capture_add_child(&node, stream, child));
    cuabi_graph_node_release(node);
    ck_assert_status(cuabi_graph_capture_add_child(&node, stream, g), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("still being captured");
    ck_assert_ok(cuabi_graph_capture_add_child(&node, stream, child));   /* twice: two nodes */
    cuabi_graph_node_release(node);
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    /* The graph keeps the child (and the child its buffers). */
    cuabi_graph_release(child);
    cuabi_buffer_destroy(in);
    run(g);
    ck_assert_int_eq(at(out, 0), 6);
    size_t d;
    ck_assert_int_eq(kind_at(g, 1, &d), CUABI_GRAPH_NODE_GRAPH);
    ck_assert_uint_eq(d, 1);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(out);
}
END_TEST

/* Nested: a while loop inside an if, the inner captured into the outer body. */
START_TEST(nested_conditionals)
{
    cuabi_graph *g, *same;
    cuabi_graph_node *ifn, *loop;
    cuabi_buffer *counter = ints(1, 0);
    uint64_t hif, hloop;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&hif, stream, 1,
                                                        CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    ck_assert_ok(cuabi_graph_capture_add_conditional(&ifn, stream, hif,
                                                     CUABI_GRAPH_CONDITIONAL_IF, 1));
    cuabi_graph *then = body_begin(ifn, 0, body_stream);
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&hloop, body_stream, 1,
                                                        CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    ck_assert_ok(cuabi_graph_capture_add_conditional(&loop, body_stream, hloop,
                                                     CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    cuabi_graph *lb = body_begin(loop, 0, body_stream2);
    launch_step(body_stream2, hloop, counter, 3);
    body_end(lb, body_stream2);
    body_end(then, body_stream);
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    /* Handles of the nodes outlive the graph's handle. */
    cuabi_graph_release(g);
    ck_assert_ok(cuabi_graph_node_graph(&g, ifn));
    ck_assert_ok(cuabi_graph_retain(g));
    run(g);
    ck_assert_int_eq(at(counter, 0), 3);
    cuabi_graph_release(g);
    cuabi_graph_node_release(loop);
    cuabi_graph_node_release(ifn);
    cuabi_buffer_destroy(counter);
}
END_TEST

/* A stream that joined the capture through an event adds there too. */
START_TEST(a_joined_stream_adds_to_the_capture)
{
    cuabi_graph *g, *same;
    cuabi_graph_node *ifn;
    cuabi_event *fork, *join;
    cuabi_buffer *out = ints(1, 0), *in = ints(1, 7);
    uint64_t h;
    ck_assert_ok(cuabi_event_create(&fork, dev, NULL));
    ck_assert_ok(cuabi_event_create(&join, dev, NULL));
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_event_record(fork, stream));
    ck_assert_ok(cuabi_stream_wait_event(body_stream2, fork));
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&h, body_stream2, 1, 1));
    ck_assert_ok(cuabi_graph_capture_add_conditional(&ifn, body_stream2, h,
                                                     CUABI_GRAPH_CONDITIONAL_IF, 1));
    cuabi_graph *then = body_begin(ifn, 0, body_stream);
    launch_add(body_stream, out, in, 1);
    body_end(then, body_stream);
    ck_assert_ok(cuabi_event_record(join, body_stream2));
    ck_assert_ok(cuabi_stream_wait_event(stream, join));
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    run(g);
    ck_assert_int_eq(at(out, 0), 7);
    cuabi_graph_node_release(ifn);
    cuabi_graph_release(g);
    cuabi_event_release(fork);
    cuabi_event_release(join);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

START_TEST(hostile_input)
{
    cuabi_graph *g, *other, *same;
    cuabi_graph_node *n = (cuabi_graph_node *)1;
    uint64_t h = 0, hother = 0;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_create(&other));
    ck_assert_ok(cuabi_graph_conditional_handle_create(&hother, other, dev, 0, 0));
    /* Not capturing. */
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, 1,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(n);
    ck_assert_error_mentions("not being captured");
    ck_assert_status(cuabi_graph_capture_conditional_handle(&h, stream, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_add_child(&n, stream, other),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* A capture not begun into a graph. */
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_status(cuabi_graph_capture_conditional_handle(&h, stream, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_graph_capture_begin_to_graph");
    ck_assert_status(cuabi_graph_capture_add_child(&n, stream, other),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    /* Into a graph: every refusal leaves it as it was. */
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_status(cuabi_graph_capture_begin_to_graph(body_stream, g,
                                                        CUABI_CAPTURE_MODE_RELAXED),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("another stream is capturing into this graph");
    ck_assert_status(cuabi_graph_capture_begin_to_graph(stream, other, CUABI_CAPTURE_MODE_RELAXED),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("already being captured");
    ck_assert_status(cuabi_graph_capture_begin_to_graph(body_stream, g, (cuabi_capture_mode)7),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_conditional_handle(&h, stream, 0, 6),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("unknown flags");
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&h, stream, 0, 0));
    /* A handle of another graph. */
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, hother,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("was not made");
    /* Switch counts: 0 and huge; while with two bodies; a bad type. */
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_SWITCH, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("at least 1");
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_SWITCH,
                                                         UINT_MAX),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("at most 65536");
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_WHILE, 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                         (cuabi_graph_conditional_type)9, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_add_conditional(NULL, stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* A child that is part of the graph, or released. */
    ck_assert_status(cuabi_graph_capture_add_child(&n, stream, g), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_graph *gone;
    ck_assert_ok(cuabi_graph_create(&gone));
    cuabi_graph_release(gone);
    ck_assert_status(cuabi_graph_capture_add_child(&n, stream, gone),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_uint_eq(fake_update_deps_calls, 0);
    /* A body builder used after its end. */
    ck_assert_ok(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                     CUABI_GRAPH_CONDITIONAL_IF, 1));
    cuabi_graph *body = body_begin(n, 0, body_stream);
    body_end(body, body_stream);
    cuabi_graph_node *none;
    ck_assert_status(cuabi_graph_capture_add_conditional(&none, body_stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not being captured");
    /* The node's body outlives neither the node's destroy (refused while
     * a body handle lives) nor leaks. */
    ck_assert_ok(cuabi_graph_node_body(&body, n, 0));
    ck_assert_status(cuabi_graph_node_destroy(n), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_graph_release(body);
    cuabi_graph_node_release(n);
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    /* Released handles. */
    ck_assert_status(cuabi_graph_capture_begin_to_graph(stream, gone, CUABI_CAPTURE_MODE_RELAXED),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    cuabi_graph_release(other);
    cuabi_graph_release(g);
}
END_TEST

/* A capture into a graph that an unsafe call breaks: the end fails, the
 * graph stays its owner's and keeps what the recorded nodes use. */
START_TEST(failed_capture_into_a_graph)
{
    cuabi_graph *g, *same = (cuabi_graph *)1;
    cuabi_graph_node *n;
    cuabi_buffer *out = ints(1, 0), *in = ints(1, 5);
    uint64_t h;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_GLOBAL));
    launch_add(stream, out, in, 1);
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&h, stream, 0, 0));
    ck_assert_ok(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                     CUABI_GRAPH_CONDITIONAL_IF, 1));
    cuabi_graph *body = body_begin(n, 0, body_stream);
    ck_assert_status(cuabi_stream_synchronize(stream), CUABI_ERROR_STREAM_CAPTURE);
    cuabi_graph_node *none;
    ck_assert_status(cuabi_graph_capture_add_conditional(&none, stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1),
                     CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_error_mentions("invalidated");
    ck_assert_status(cuabi_graph_capture_end(&same, stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_ptr_null(same);
    body_end(body, body_stream);
    cuabi_buffer_destroy(in);
    cuabi_graph_node_release(n);
    size_t count;
    ck_assert_ok(cuabi_graph_node_count(&count, g));
    ck_assert_uint_ge(count, 1);
    cuabi_graph_release(g);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    cuabi_buffer_destroy(out);
}
END_TEST

START_TEST(needs_the_driver)
{
    cuabi_graph *g;
    cuabi_graph_node *n;
    ck_assert_ok(cuabi_graph_create(&g));
    cuabi__driver_for_test()->cuStreamBeginCaptureToGraph = NULL;
    ck_assert_status(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_GLOBAL),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuStreamBeginCaptureToGraph");
    cuabi__driver_for_test()->cuStreamBeginCaptureToGraph = fake_cuStreamBeginCaptureToGraph;
    ck_assert_ok(cuabi_graph_capture_begin_to_graph(stream, g, CUABI_CAPTURE_MODE_GLOBAL));
    uint64_t h;
    ck_assert_ok(cuabi_graph_capture_conditional_handle(&h, stream, 0, 0));
    cuabi__driver_for_test()->cuStreamUpdateCaptureDependencies = NULL;
    ck_assert_status(cuabi_graph_capture_add_conditional(&n, stream, h,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuStreamUpdateCaptureDependencies");
    size_t count;
    ck_assert_ok(cuabi_graph_node_count(&count, g));
    ck_assert_uint_eq(count, 0);   /* the node went again */
    cuabi_graph *same;
    ck_assert_ok(cuabi_graph_capture_end(&same, stream));
    cuabi_graph_release(same);
    cuabi_graph_release(g);
}
END_TEST

/* Handles released in any order on several threads while captures run. */
typedef struct { cuabi_stream *s; int64_t sum; } worker;

static void *work(void *arg)
{
    worker *w = arg;
    cuabi_graph *g, *same;
    cuabi_graph_node *n;
    cuabi_stream *bs;
    uint64_t h;
    cuabi_buffer *out = ints(1, 0), *in = ints(1, 2);
    ck_assert_ok(cuabi_stream_create(&bs, dev, NULL));
    for (int i = 0; i < 20; i++) {
        ck_assert_ok(cuabi_graph_create(&g));
        ck_assert_ok(cuabi_graph_capture_begin_to_graph(w->s, g, CUABI_CAPTURE_MODE_RELAXED));
        cuabi_graph_release(g);                         /* the capture keeps it */
        ck_assert_ok(cuabi_graph_capture_conditional_handle(&h, w->s, 1, 1));
        ck_assert_ok(cuabi_graph_capture_add_conditional(&n, w->s, h,
                                                         CUABI_GRAPH_CONDITIONAL_IF, 1));
        cuabi_graph *body = body_begin(n, 0, bs);
        cuabi_graph_node_release(n);                    /* the body keeps the graph */
        launch_add(bs, out, in, 1);
        body_end(body, bs);
        ck_assert_ok(cuabi_graph_capture_end(&same, w->s));
        cuabi_graph_release(same);
    }
    w->sum = at(out, 0);
    cuabi_buffer_destroy(in);
    cuabi_buffer_destroy(out);
    cuabi_stream_release(bs);
    return NULL;
}

START_TEST(threads_build_at_once)
{
    worker w[2] = { { stream, -1 }, { body_stream2, -1 } };
    pthread_t t[2];
    /* The fake driver is not thread-safe: one at a time, different threads. */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].sum, 0);   /* built, never run */
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("graph_builder");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, while_loop_in_a_capture);
    tcase_add_test(tc, if_else_and_switch_in_a_capture);
    tcase_add_test(tc, embed_a_child_in_a_capture);
    tcase_add_test(tc, nested_conditionals);
    tcase_add_test(tc, a_joined_stream_adds_to_the_capture);
    tcase_add_test(tc, hostile_input);
    tcase_add_test(tc, failed_capture_into_a_graph);
    tcase_add_test(tc, needs_the_driver);
    tcase_add_test(tc, threads_build_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
