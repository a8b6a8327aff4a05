/* CUDA graphs against the fake driver (tests/fixtures/fake_graph.h): explicit nodes
 * and their edges, cycles refused, instantiate / launch / upload, whole
 * and per-node updates, stream capture (what it keeps alive, what breaks
 * it), conditional nodes, Graphviz output, handles released in any order,
 * and every error path of every function. */
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"
#include "fake_graph.h"
#include "graph_testutil.h"
#include "runtime/graph.h"
#include "graph_kernels.h"
#include "runtime/occupancy.h"

static cuabi_device *dev, *dev1;
static cuabi_stream *stream, *stream1;
static cuabi_memory_resource *pool;
static cuabi_objcode *code;
static cuabi_kernel *kern;

/* The fake "add" kernel adds in[0..n) to out[0] (int64); the fake "empty"
 * kernel is one iteration of a while loop counting to a limit. */
static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_kernel_implement("add", fake_impl_add_i64);
    fake_kernel_implement("empty", fake_impl_count_loop);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin", cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&stream1, dev1, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(stream1);
    cuabi_stream_release(stream);
    cuabi_device_release(dev1);
    cuabi_device_release(dev);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    ck_assert_int_eq(fake_foreign_frees, 0);
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

static cuabi_argpack *add_pack(cuabi_buffer *out, cuabi_buffer *in, uint64_t n)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, out));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, n));
    return p;
}

static cuabi_launch_config cfg(unsigned grid)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = grid;
    c.block[0] = 32;
    c.device = dev;
    return c;
}

static size_t node_count(cuabi_graph *g)
{
    size_t n;
    ck_assert_ok(cuabi_graph_node_count(&n, g));
    return n;
}

static size_t deps_of(cuabi_graph_node *n)
{
    size_t c;
    ck_assert_ok(cuabi_graph_node_dependency_count(&c, n));
    return c;
}

static void run(cuabi_graph *g)
{
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    cuabi_graph_exec_release(e);
}

/* ------------------------------------------------------- graphs, nodes */

START_TEST(create_query_release)
{
    cuabi_graph *g;
    uintptr_t raw;
    cuabi_device *d = (cuabi_device *)1;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_raw(&raw, g));
    ck_assert(raw != 0);
    ck_assert_ok(cuabi_graph_device(&d, g));
    ck_assert_ptr_null(d);
    ck_assert_uint_eq(node_count(g), 0);
    ck_assert_int_eq(fake_live_graphs, 1);
    ck_assert_ok(cuabi_graph_retain(g));
    ck_assert_ok(cuabi_graph_release(g));
    ck_assert_ok(cuabi_graph_release(g));
    ck_assert_int_eq(fake_live_graphs, 0);
    /* Released: every function refuses the handle. */
    ck_assert_status(cuabi_graph_raw(&raw, g), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_release(g), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_create(NULL), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(explicit_nodes_edges_and_run)
{
    cuabi_graph *g;
    cuabi_graph_node *set, *k, *copy, *join, *again;
    cuabi_buffer *out = ints(1, 0), *in = ints(4, 1), *back = ints(1, 0);
    cuabi_argpack *p = add_pack(out, in, 4);
    cuabi_launch_config c = cfg(1);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_memset(&set, g, NULL, 0, out, 0, 0, 4, 2));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, &set, 1, kern, p, &c));
    ck_assert_ok(cuabi_graph_add_memcpy(&copy, g, &k, 1, back, 0, out, 0, 8));
    cuabi_graph_node *both[2] = { set, copy };
    ck_assert_ok(cuabi_graph_add_empty(&join, g, both, 2));
    ck_assert_uint_eq(node_count(g), 4);
    /* Bookkeeping: indices, kinds, one handle per node, edges both ways. */
    size_t idx;
    cuabi_graph_node_kind kind;
    ck_assert_ok(cuabi_graph_node_index(&idx, copy));
    ck_assert_uint_eq(idx, 2);
    ck_assert_ok(cuabi_graph_node_type(&kind, k));
    ck_assert_int_eq(kind, CUABI_GRAPH_NODE_KERNEL);
    ck_assert_ok(cuabi_graph_node_at(&again, g, 1));
    ck_assert_ptr_eq(again, k);
    cuabi_graph_node_release(again);
    ck_assert_uint_eq(deps_of(set), 0);
    ck_assert_uint_eq(deps_of(join), 2);
    size_t n;
    ck_assert_ok(cuabi_graph_node_dependent_count(&n, set));
    ck_assert_uint_eq(n, 2);
    ck_assert_ok(cuabi_graph_node_dependency(&again, copy, 0));
    ck_assert_ptr_eq(again, k);
    cuabi_graph_node_release(again);
    ck_assert_ok(cuabi_graph_node_dependent(&again, k, 0));
    ck_assert_ptr_eq(again, copy);
    cuabi_graph_node_release(again);
    ck_assert_status(cuabi_graph_node_dependency(&again, copy, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("out of range");
    cuabi_graph *owner;
    ck_assert_ok(cuabi_graph_node_graph(&owner, k));
    ck_assert_ptr_eq(owner, g);
    cuabi_device *d;
    ck_assert_ok(cuabi_graph_device(&d, g));
    ck_assert_ptr_eq(d, dev);
    /* The graph runs: memset 0, out += 1+2+3+4, copied back. */
    run(g);
    ck_assert_int_eq(at(out, 0), 10);
    ck_assert_int_eq(at(back, 0), 10);
    run(g);
    ck_assert_int_eq(at(back, 0), 10);
    cuabi_graph_node_release(set);
    cuabi_graph_node_release(k);
    cuabi_graph_node_release(copy);
    cuabi_graph_node_release(join);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
    cuabi_buffer_destroy(back);
}
END_TEST

START_TEST(dependencies_cycles_and_duplicates)
{
    cuabi_graph *g, *other;
    cuabi_graph_node *a, *b, *c, *x;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_create(&other));
    ck_assert_ok(cuabi_graph_add_empty(&a, g, NULL, 0));
    ck_assert_ok(cuabi_graph_add_empty(&b, g, &a, 1));
    ck_assert_ok(cuabi_graph_add_empty(&c, g, &b, 1));
    ck_assert_ok(cuabi_graph_add_empty(&x, other, NULL, 0));
    /* c -> a closes a -> b -> c: refused, naming the nodes and the path. */
    ck_assert_status(cuabi_graph_add_dependencies(g, &c, &a, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_graph_add_dependencies");
    ck_assert_error_mentions("cycle");
    ck_assert_error_mentions("empty node 2 -> empty node 0");
    ck_assert_error_mentions("node 0 -> node 1 -> node 2");
    ck_assert_uint_eq(deps_of(a), 0);
    /* A cycle made within one call: a -> c is fine, then c -> b closes it;
     * nothing of the call is added. */
    cuabi_graph_node *from[2] = { a, c }, *to[2] = { c, b };
    ck_assert_status(cuabi_graph_add_dependencies(g, from, to, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("edge 1");
    ck_assert_uint_eq(deps_of(c), 1);
    /* Self-edge, an existing edge, a repeated edge, another graph's node. */
    ck_assert_status(cuabi_graph_add_dependencies(g, &a, &a, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("itself");
    ck_assert_status(cuabi_graph_add_dependencies(g, &a, &b, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("already exists");
    cuabi_graph_node *f2[2] = { a, a }, *t2[2] = { c, c };
    ck_assert_status(cuabi_graph_add_dependencies(g, f2, t2, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("already exists");
    ck_assert_status(cuabi_graph_add_dependencies(g, &x, &a, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("another graph");
    ck_assert_status(cuabi_graph_add_dependencies(g, NULL, &a, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_graph_add_dependencies(g, NULL, NULL, 0));
    /* A good edge, then removed; removing a missing one is refused. */
    ck_assert_ok(cuabi_graph_add_dependencies(g, &a, &c, 1));
    ck_assert_uint_eq(deps_of(c), 2);
    ck_assert_ok(cuabi_graph_remove_dependencies(g, &a, &c, 1));
    ck_assert_uint_eq(deps_of(c), 1);
    ck_assert_status(cuabi_graph_remove_dependencies(g, &a, &c, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not exist");
    /* Dependencies of a new node: duplicates, other graphs, released nodes. */
    cuabi_graph_node *dup[2] = { a, a }, *n;
    ck_assert_status(cuabi_graph_add_empty(&n, g, dup, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("given twice");
    ck_assert_status(cuabi_graph_add_empty(&n, g, &x, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_empty(&n, g, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(n);
    cuabi_graph_node_release(x);
    ck_assert_status(cuabi_graph_add_empty(&n, g, &x, 1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("dependencies[0]");
    ck_assert_uint_eq(node_count(g), 3);
    /* Issue 29: counts whose arrays' byte sizes wrap around 2^64 (the
     * allocation came out a few bytes long and was written past) are
     * refused before any element is read. */
    cuabi_graph_node *three[4] = { a, b, c, NULL };
    ck_assert_status(cuabi_graph_add_empty(&n, g, three, SIZE_MAX / 8 + 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("num_dependencies");
    ck_assert_error_mentions("too large");
    cuabi_graph_node *wf[2] = { a, NULL }, *wt[2] = { c, NULL };
    ck_assert_status(cuabi_graph_add_dependencies(g, wf, wt, SIZE_MAX / 16 + 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("count");
    ck_assert_error_mentions("too large");
    ck_assert_status(cuabi_graph_remove_dependencies(g, wf, wt, SIZE_MAX / 16 + 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert_uint_eq(deps_of(c), 1);
    cuabi_graph_node_release(a);
    cuabi_graph_node_release(b);
    cuabi_graph_node_release(c);
    cuabi_graph_release(other);
    cuabi_graph_release(g);
}
END_TEST

/* A cycle made behind cuabi's back (through the raw CUgraph) is caught by
 * instantiation, which names a node on it. */
START_TEST(instantiate_names_the_node_of_a_cycle)
{
    cuabi_graph *g;
    cuabi_graph_node *a, *b;
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_empty(&a, g, NULL, 0));
    ck_assert_ok(cuabi_graph_add_empty(&b, g, &a, 1));
    uintptr_t raw, ra, rb;
    ck_assert_ok(cuabi_graph_raw(&raw, g));
    ck_assert_ok(cuabi_graph_node_raw(&ra, a));
    ck_assert_ok(cuabi_graph_node_raw(&rb, b));
    CUgraphNode from = (CUgraphNode)rb, to = (CUgraphNode)ra;
    ck_assert_int_eq(fake_cuGraphAddDependencies((CUgraph)raw, &from, &to, NULL, 1), CUDA_SUCCESS);
    ck_assert_status(cuabi_graph_instantiate(&e, g, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(e);
    ck_assert_error_mentions("cuabi_graph_instantiate");
    ck_assert_error_mentions("cycle");
    ck_assert_error_mentions("empty node");
    cuabi_graph_node_release(a);
    cuabi_graph_node_release(b);
    cuabi_graph_release(g);
}
END_TEST

static int host_calls;
static void host_fn(void *payload)
{
    host_calls += *(int *)payload;
}

START_TEST(host_event_child_nodes)
{
    cuabi_graph *g, *child;
    cuabi_graph_node *h, *rec, *wait, *ch, *hc;
    cuabi_event *ev;
    int three = 3;
    host_calls = 0;
    ck_assert_ok(cuabi_event_create(&ev, dev, NULL));
    ck_assert_ok(cuabi_graph_create(&child));
    ck_assert_ok(cuabi_graph_add_host(&hc, child, NULL, 0, host_fn, &three));
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_host(&h, g, NULL, 0, host_fn, &three));
    ck_assert_ok(cuabi_graph_add_event_record(&rec, g, &h, 1, ev));
    ck_assert_ok(cuabi_graph_add_event_wait(&wait, g, &rec, 1, ev));
    ck_assert_ok(cuabi_graph_add_child(&ch, g, &wait, 1, child));
    /* The child was cloned: adding to it now changes nothing in g. */
    cuabi_graph_node *late;
    ck_assert_ok(cuabi_graph_add_host(&late, child, NULL, 0, host_fn, &three));
    /* Releasing the event and the child: the graph keeps them. */
    cuabi_event_release(ev);
    cuabi_graph_release(child);
    run(g);
    ck_assert_int_eq(host_calls, 6);
    cuabi_graph_node_kind kind;
    ck_assert_ok(cuabi_graph_node_type(&kind, ch));
    ck_assert_int_eq(kind, CUABI_GRAPH_NODE_GRAPH);
    cuabi_graph_node *no;
    ck_assert_status(cuabi_graph_add_host(&no, g, NULL, 0, NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_child(&no, g, NULL, 0, g), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("itself");
    ck_assert_status(cuabi_graph_add_event_record(&no, g, NULL, 0, (cuabi_event *)dev),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(no);
    cuabi_graph_node_release(late);
    cuabi_graph_node_release(hc);
    cuabi_graph_node_release(h);
    cuabi_graph_node_release(rec);
    cuabi_graph_node_release(wait);
    cuabi_graph_node_release(ch);
    cuabi_graph_release(g);
}
END_TEST

/* cuabi_stream_launch_host_func: a payload counted by its host calls and
 * released exactly once, when no execution can call it any more. */
typedef struct hpayload {
    int calls, releases;
} hpayload;
static void hcall(void *p)
{
    ((hpayload *)p)->calls++;
}
static void hrelease(void *p)
{
    ((hpayload *)p)->releases++;
}

START_TEST(stream_host_func_on_a_stream)
{
    hpayload a = { 0, 0 };
    ck_assert_ok(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease));
    /* The fake stream is synchronous: run once, released right after. */
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.releases, 1);
    ck_assert_int_eq(fake_host_funcs, 1);
    /* No release function: the payload stays the caller's. */
    ck_assert_ok(cuabi_stream_launch_host_func(stream, hcall, &a, NULL));
    ck_assert_int_eq(a.calls, 2);
    ck_assert_int_eq(a.releases, 1);
    /* The legacy and per-thread default streams take host functions too. */
    cuabi_stream *legacy, *pt;
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, dev));
    ck_assert_ok(cuabi_stream_per_thread_default(&pt, dev));
    ck_assert_ok(cuabi_stream_launch_host_func(legacy, hcall, &a, hrelease));
    ck_assert_ok(cuabi_stream_launch_host_func(pt, hcall, &a, hrelease));
    ck_assert_int_eq(a.calls, 4);
    ck_assert_int_eq(a.releases, 3);
    /* Bad input: nothing runs, nothing is released. */
    ck_assert_status(cuabi_stream_launch_host_func(stream, NULL, &a, hrelease),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("fn is NULL");
    ck_assert_status(cuabi_stream_launch_host_func(NULL, hcall, &a, hrelease),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_stream_launch_host_func((cuabi_stream *)dev, hcall, &a, hrelease),
                     CUABI_ERROR_INVALID_HANDLE);
    cuabi_stream *gone;
    ck_assert_ok(cuabi_stream_create(&gone, dev, NULL));
    cuabi_stream_release(gone);
    ck_assert_status(cuabi_stream_launch_host_func(gone, hcall, &a, hrelease),
                     CUABI_ERROR_INVALID_HANDLE);
    /* A driver failure: the payload stays the caller's. */
    cuabi__driver *d = cuabi__driver_for_test();
    PFN_cuLaunchHostFunc_v10000 saved = d->cuLaunchHostFunc;
    d->cuLaunchHostFunc = NULL;
    ck_assert_status(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuLaunchHostFunc");
    d->cuLaunchHostFunc = saved;
    ck_assert_int_eq(a.calls, 4);
    ck_assert_int_eq(a.releases, 3);
    cuabi_stream_release(pt);
    cuabi_stream_release(legacy);
}
END_TEST

START_TEST(stream_host_func_in_a_capture)
{
    hpayload a = { 0, 0 }, b = { 0, 0 };
    cuabi_graph *g;
    cuabi_graph_exec *e1, *e2;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease));
    ck_assert_ok(cuabi_stream_launch_host_func(stream, hcall, &b, NULL));
    /* Recorded, not run. */
    ck_assert_int_eq(a.calls + b.calls, 0);
    ck_assert_int_eq(fake_host_funcs, 0);
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    ck_assert_uint_eq(node_count(g), 2);
    cuabi_graph_node *n;
    cuabi_graph_node_kind kind;
    ck_assert_ok(cuabi_graph_node_at(&n, g, 0));
    ck_assert_ok(cuabi_graph_node_type(&kind, n));
    ck_assert_int_eq(kind, CUABI_GRAPH_NODE_HOST);
    cuabi_graph_node_release(n);
    /* Two executables, three launches: three calls, no release yet. */
    ck_assert_ok(cuabi_graph_instantiate(&e1, g, NULL));
    ck_assert_ok(cuabi_graph_instantiate(&e2, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e1, stream));
    ck_assert_ok(cuabi_graph_exec_launch(e1, stream));
    ck_assert_ok(cuabi_graph_exec_launch(e2, stream));
    ck_assert_int_eq(a.calls, 3);
    ck_assert_int_eq(b.calls, 3);
    /* The graph goes first: the executables keep it, and the payload. */
    cuabi_graph_release(g);
    ck_assert_int_eq(a.releases, 0);
    ck_assert_ok(cuabi_graph_exec_launch(e2, stream));
    ck_assert_int_eq(a.calls, 4);
    cuabi_graph_exec_release(e1);
    ck_assert_int_eq(a.releases, 0);
    cuabi_graph_exec_release(e2);
    ck_assert_int_eq(a.releases, 1);
    ck_assert_int_eq(b.releases, 0);
    ck_assert_int_eq(a.calls, 4);
}
END_TEST

START_TEST(stream_host_func_captures_that_fail_or_are_not_ours)
{
    hpayload a = { 0, 0 };
    cuabi_graph *g = NULL, *parent;
    /* A child-graph node holds the captured graph (and so the payload). */
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease));
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_node *ch;
    ck_assert_ok(cuabi_graph_create(&parent));
    ck_assert_ok(cuabi_graph_add_child(&ch, parent, NULL, 0, g));
    cuabi_graph_release(g);
    ck_assert_int_eq(a.releases, 0);
    run(parent);
    ck_assert_int_eq(a.calls, 1);
    cuabi_graph_node_release(ch);
    cuabi_graph_release(parent);
    ck_assert_int_eq(a.releases, 1);
    /* An invalidated capture: the launch is refused and the payload stays
     * the caller's; one recorded before goes when the capture ends. */
    a.calls = a.releases = 0;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease));
    ck_assert_status(cuabi_stream_synchronize(stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_int_ne(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease), CUABI_SUCCESS);
    ck_assert_error_mentions("cuLaunchHostFunc");
    ck_assert_int_eq(a.releases, 0);
    g = NULL;
    ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(a.calls, 0);
    ck_assert_int_eq(a.releases, 1);
    /* A capture begun behind cuabi's back: refused, nothing recorded. */
    a.calls = a.releases = 0;
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, stream));
    const cuabi__driver *d = cuabi__driver_for_test();
    ck_assert_int_eq(d->cuStreamBeginCapture((CUstream)raw, CU_STREAM_CAPTURE_MODE_RELAXED),
                     CUDA_SUCCESS);
    ck_assert_status(cuabi_stream_launch_host_func(stream, hcall, &a, hrelease),
                     CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_error_mentions("not by cuabi_graph_capture_begin");
    CUgraph cg = NULL;
    ck_assert_int_eq(d->cuStreamEndCapture((CUstream)raw, &cg), CUDA_SUCCESS);
    ck_assert_ptr_nonnull(cg);
    ck_assert_int_eq(d->cuGraphDestroy(cg), CUDA_SUCCESS);
    ck_assert_int_eq(a.calls + a.releases, 0);
    /* Out of memory: nothing kept, nothing released. */
    for (int at = 1;; at++) {
        ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
        cuabi__alloc_fail_at(at, false);
        cuabi_status st = cuabi_stream_launch_host_func(stream, hcall, &a, hrelease);
        bool fired = cuabi__alloc_fail_count() > 0;
        cuabi__alloc_fail_at(0, false);
        if (st != CUABI_SUCCESS) {
            ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
            ck_assert_int_eq(a.releases, 0);
        }
        ck_assert_ok(cuabi_graph_capture_end(&g, stream));
        cuabi_graph_release(g);
        ck_assert_int_eq(a.releases, st == CUABI_SUCCESS ? 1 : 0);
        a.releases = 0;
        if (!fired)
            break;
    }
    ck_assert_int_eq(a.calls, 0);
}
END_TEST

START_TEST(copies_and_memsets_checked)
{
    cuabi_graph *g;
    cuabi_graph_node *n = (cuabi_graph_node *)1;
    cuabi_buffer *a = ints(4, 7), *b = ints(4, 0), *hostb;
    cuabi_memory_resource *host;
    int64_t h[4] = { 0 }, src[4] = { 5, 6, 7, 8 };
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_buffer_allocate(&hostb, host, 32, 0, NULL));
    ck_assert_ok(cuabi_graph_create(&g));
    /* Ranges, sizes, host-only copies, memset arguments. */
    ck_assert_status(cuabi_graph_add_memcpy(&n, g, NULL, 0, a, 8, b, 0, 32),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(n);
    ck_assert_error_mentions("past the end of the destination");
    ck_assert_status(cuabi_graph_add_memcpy(&n, g, NULL, 0, a, 0, b, 0, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("size is 0");
    ck_assert_status(cuabi_graph_add_memcpy_from_host(&n, g, NULL, 0, hostb, 0, src, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("host node");
    ck_assert_status(cuabi_graph_add_memcpy_from_host(&n, g, NULL, 0, a, 0, NULL, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_memcpy_to_host(&n, g, NULL, 0, NULL, a, 0, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* Issue 29: host ranges that wrap around the address space */
    void *top = (void *)(UINTPTR_MAX - 3);
    ck_assert_status(cuabi_graph_add_memcpy_from_host(&n, g, NULL, 0, a, 0, top, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("src + size");
    ck_assert_status(cuabi_graph_add_memcpy_to_host(&n, g, NULL, 0, top, a, 0, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("dst + size");
    ck_assert_ptr_null(n);
    ck_assert_status(cuabi_graph_add_memset(&n, g, NULL, 0, a, 0, 0, 3, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("width");
    ck_assert_status(cuabi_graph_add_memset(&n, g, NULL, 0, a, 0, 256, 1, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not fit");
    ck_assert_status(cuabi_graph_add_memset(&n, g, NULL, 0, a, 2, 0, 4, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("multiple");
    ck_assert_status(cuabi_graph_add_memset(&n, g, NULL, 0, a, 0, 0, 4, 9),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_memset(&n, g, NULL, 0, a, 0, 0, 4, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_memset(&n, g, NULL, 0, hostb, 0, 0, 4, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("plain host memory");
    ck_assert_uint_eq(node_count(g), 0);
    /* Good ones: host -> device, device -> device, device -> host. */
    cuabi_graph_node *n1, *n2, *n3, *n4;
    ck_assert_ok(cuabi_graph_add_memcpy_from_host(&n1, g, NULL, 0, a, 0, src, 32));
    ck_assert_ok(cuabi_graph_add_memset(&n2, g, &n1, 1, a, 0, 9, 4, 1));
    ck_assert_ok(cuabi_graph_add_memcpy(&n3, g, &n2, 1, b, 0, a, 0, 32));
    ck_assert_ok(cuabi_graph_add_memcpy_to_host(&n4, g, &n3, 1, h, b, 8, 24));
    /* The graph keeps the buffers' memory: destroy the handles first. */
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
    int allocs = fake_live_allocs;
    run(g);
    ck_assert_int_eq(h[0], 6);
    ck_assert_int_eq(h[2], 8);
    cuabi_graph_node_release(n1);
    cuabi_graph_node_release(n2);
    cuabi_graph_node_release(n3);
    cuabi_graph_node_release(n4);
    ck_assert_int_eq(fake_live_allocs, allocs);
    cuabi_graph_release(g);
    ck_assert_int_eq(fake_live_allocs, allocs - 2);
    cuabi_buffer_destroy(hostb);
    cuabi_memory_resource_release(host);
}
END_TEST

START_TEST(memcpy_views)
{
    cuabi_graph *g;
    cuabi_graph_node *n;
    cuabi_buffer *a = ints(6, 1), *b = ints(6, 0);
    cuabi_view *va, *vb, *sl, *small;
    int64_t shape[2] = { 2, 3 }, start[2] = { 0, 0 }, stop[2] = { 2, 3 }, step[2] = { 1, 2 };
    int64_t four[1] = { 4 };
    ck_assert_ok(cuabi_view_create(&va, a, 0, CUABI_DTYPE_INT, 64, 2, shape, NULL, 0));
    ck_assert_ok(cuabi_view_create(&vb, b, 0, CUABI_DTYPE_INT, 64, 2, shape, NULL, 0));
    ck_assert_ok(cuabi_view_slice(&sl, va, 2, start, stop, step));
    ck_assert_ok(cuabi_view_create(&small, b, 0, CUABI_DTYPE_INT, 64, 1, four, NULL, 0));
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_status(cuabi_graph_add_memcpy_view(&n, g, NULL, 0, vb, sl),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not contiguous");
    ck_assert_status(cuabi_graph_add_memcpy_view(&n, g, NULL, 0, small, va),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("bytes");
    ck_assert_ok(cuabi_graph_add_memcpy_view(&n, g, NULL, 0, vb, va));
    /* The views keep their buffers' memory; the graph keeps the views. */
    cuabi_view_release(va);
    cuabi_view_release(vb);
    cuabi_buffer_destroy(a);
    run(g);
    ck_assert_int_eq(at(b, 5), 6);
    cuabi_graph_node_release(n);
    cuabi_graph_release(g);
    cuabi_view_release(sl);
    cuabi_view_release(small);
    cuabi_buffer_destroy(b);
}
END_TEST

/* ------------------------------------------------------------- kernels */

START_TEST(kernel_node_checks)
{
    cuabi_graph *g;
    cuabi_graph_node *n = (cuabi_graph_node *)1;
    cuabi_buffer *out = ints(1, 0), *in = ints(2, 1);
    cuabi_argpack *p = add_pack(out, in, 2), *wrong;
    cuabi_launch_config c = cfg(1);
    ck_assert_ok(cuabi_graph_create(&g));
    /* Configuration checks as cuabi_launch_check, naming this function. */
    c.grid[0] = 0;
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_ptr_null(n);
    ck_assert_error_mentions("cuabi_graph_add_kernel");
    /* Neither stream nor device: the implicit device, as for cuabi_launch. */
    c = cfg(1);
    c.device = NULL;
    cuabi_graph *implicit;
    ck_assert_ok(cuabi_graph_create(&implicit));
    ck_assert_ok(cuabi_graph_add_kernel(&n, implicit, NULL, 0, kern, p, &c));
    cuabi_graph_node_release(n);
    cuabi_graph_release(implicit);
    cuabi__launch_forget_implicit_devices();
    c = cfg(1);
    c.version = 99;
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c), CUABI_ERROR_INVALID_VERSION);
    c = cfg(1);
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_argpack_create(&wrong, "buffer"));
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, wrong, &c),
                     CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, (cuabi_kernel *)p, p, &c),
                     CUABI_ERROR_INVALID_HANDLE);
    /* A released buffer in the pack is refused, naming the slot. */
    cuabi_buffer_destroy(in);
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 1");
    ck_assert_uint_eq(node_count(g), 0);
    /* The stream of the configuration names the device. */
    in = ints(2, 1);
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in));
    c.device = NULL;
    c.stream = stream;
    ck_assert_ok(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c));
    cuabi_graph_node_release(n);
    /* Version-2 launch attributes are refused for nodes (merge of area/graphs
     * and area/launchattrs); a version-1 configuration is read only as far
     * as it goes. */
    cuabi_launch_attributes la = CUABI_LAUNCH_ATTRIBUTES_INIT;
    la.programmatic_stream_serialization = 1;
    c.attributes = &la;
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("config.attributes must be NULL");
    c.attributes = NULL;
    c.version = 1;
    cuabi_graph *v1;
    ck_assert_ok(cuabi_graph_create(&v1));
    ck_assert_ok(cuabi_graph_add_kernel(&n, v1, NULL, 0, kern, p, &c));
    cuabi_graph_node_release(n);
    cuabi_graph_release(v1);
    c.version = CUABI_LAUNCH_CONFIG_VERSION;
    /* Clusters become a node attribute; an attribute the driver refuses
     * is named. */
    c = cfg(4);
    c.cluster[0] = 2;
    ck_assert_ok(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c));
    uintptr_t raw;
    ck_assert_ok(cuabi_graph_node_raw(&raw, n));
    fake_gnode *fn = (fake_gnode *)raw;
    ck_assert_uint_eq(fn->nattrs, 1);
    ck_assert_int_eq(fn->attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    ck_assert_uint_eq(fn->attrs[0].value.clusterDim.x, 2);
    cuabi_graph_node_release(n);
    cuabi__fault_arm("cuGraphKernelNodeSetAttribute", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_graph_add_kernel(&n, g, NULL, 0, kern, p, &c), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_error_mentions("refused the cluster dimension attribute");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(n);
    ck_assert_uint_eq(node_count(g), 2);
    /* The graph keeps the kernel: it stays loaded after its handles go. */
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    ck_assert_int_eq(fake_live_libraries, 1);
    cuabi_graph_release(g);
    ck_assert_int_eq(fake_live_libraries, 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin", cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    cuabi_argpack_release(p);
    cuabi_argpack_release(wrong);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

START_TEST(kernel_node_set_changes_the_graph)
{
    cuabi_graph *g;
    cuabi_graph_node *k, *e;
    cuabi_buffer *out = ints(1, 0), *in = ints(4, 1), *in2 = ints(4, 100);
    cuabi_argpack *p = add_pack(out, in, 4);
    cuabi_launch_config c = cfg(1);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, NULL, 0, kern, p, &c));
    ck_assert_ok(cuabi_graph_add_empty(&e, g, NULL, 0));
    /* The node copied the pack's values: changing the pack changes nothing. */
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in2));
    run(g);
    ck_assert_int_eq(at(out, 0), 10);
    ck_assert_ok(cuabi_graph_kernel_node_set(k, p, NULL));
    run(g);
    ck_assert_int_eq(at(out, 0), 10 + 406);
    c.grid[0] = 7;
    ck_assert_ok(cuabi_graph_kernel_node_set(k, p, &c));
    uintptr_t raw;
    ck_assert_ok(cuabi_graph_node_raw(&raw, k));
    ck_assert_uint_eq(((fake_gnode *)raw)->grid[0], 7);
    c.device = dev1;
    ck_assert_status(cuabi_graph_kernel_node_set(k, p, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("names device 1");
    c.device = dev;
    c.cluster[0] = 7;
    ck_assert_status(cuabi_graph_kernel_node_set(k, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("attributes");
    ck_assert_status(cuabi_graph_kernel_node_set(e, p, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_graph_add_kernel");
    /* in2 is kept by the graph although its handle goes. */
    cuabi_buffer_destroy(in2);
    run(g);
    ck_assert_int_eq(at(out, 0), 10 + 2 * 406);
    cuabi_graph_node_release(k);
    cuabi_graph_node_release(e);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

/* ---------------------------------------------------------- executables */

START_TEST(instantiate_launch_upload)
{
    cuabi_graph *g;
    cuabi_graph_node *k;
    cuabi_graph_exec *e = (cuabi_graph_exec *)1;
    cuabi_buffer *out = ints(1, 0), *in = ints(3, 1);
    cuabi_argpack *p = add_pack(out, in, 3);
    cuabi_launch_config c = cfg(1);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, NULL, 0, kern, p, &c));
    cuabi_graph_instantiate_options o = CUABI_GRAPH_INSTANTIATE_OPTIONS_INIT;
    o.flags = 64;
    ck_assert_status(cuabi_graph_instantiate(&e, g, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(e);
    o.flags = CUABI_GRAPH_INSTANTIATE_UPLOAD;
    ck_assert_status(cuabi_graph_instantiate(&e, g, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("upload_stream");
    o.upload_stream = stream1;
    ck_assert_status(cuabi_graph_instantiate(&e, g, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device 1");
    o.version = 0;
    ck_assert_status(cuabi_graph_instantiate(&e, g, &o), CUABI_ERROR_INVALID_VERSION);
    o = (cuabi_graph_instantiate_options)CUABI_GRAPH_INSTANTIATE_OPTIONS_INIT;
    o.flags = CUABI_GRAPH_INSTANTIATE_UPLOAD | CUABI_GRAPH_INSTANTIATE_AUTO_FREE_ON_LAUNCH;
    o.upload_stream = stream;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, &o));
    ck_assert_int_eq(fake_graph_uploads, 1);
    ck_assert_ok(cuabi_graph_exec_upload(e, stream));
    ck_assert_int_eq(fake_graph_uploads, 2);
    /* Launch on the graph's device only. */
    ck_assert_status(cuabi_graph_exec_launch(e, stream1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_graph_exec_launch");
    ck_assert_error_mentions("built for device 0");
    ck_assert_status(cuabi_graph_exec_upload(e, stream1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_exec_launch(e, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_exec_launch(NULL, stream), CUABI_ERROR_INVALID_HANDLE);
    for (int i = 0; i < 5; i++)
        ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 30);
    uintptr_t raw;
    cuabi_device *d;
    cuabi_graph *from;
    ck_assert_ok(cuabi_graph_exec_raw(&raw, e));
    ck_assert(raw != 0);
    ck_assert_ok(cuabi_graph_exec_device(&d, e));
    ck_assert_ptr_eq(d, dev);
    ck_assert_ok(cuabi_graph_exec_graph(&from, e));
    ck_assert_ptr_eq(from, g);
    /* Released in any order: graph and node first, the executable runs on. */
    cuabi_graph_node_release(k);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(in);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 36);
    ck_assert_int_eq(fake_live_graphs, 1);
    cuabi_graph_exec_release(e);
    ck_assert_int_eq(fake_live_graphs, 0);
    ck_assert_status(cuabi_graph_exec_launch(e, stream), CUABI_ERROR_INVALID_HANDLE);
    cuabi_buffer_destroy(out);
}
END_TEST

/* Two graphs built the same way, the second with other arguments. */
static cuabi_graph *two_node_graph(cuabi_buffer *out, cuabi_buffer *in, uint64_t n, bool extra)
{
    cuabi_graph *g;
    cuabi_graph_node *k, *z, *x;
    cuabi_argpack *p = add_pack(out, in, n);
    cuabi_launch_config c = cfg(1);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_memset(&z, g, NULL, 0, out, 0, 0, 4, 2));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, &z, 1, kern, p, &c));
    if (extra) {
        ck_assert_ok(cuabi_graph_add_empty(&x, g, &k, 1));
        cuabi_graph_node_release(x);
    }
    cuabi_graph_node_release(k);
    cuabi_graph_node_release(z);
    cuabi_argpack_release(p);
    return g;
}

START_TEST(whole_update)
{
    cuabi_buffer *out = ints(1, 0), *in = ints(4, 1), *in2 = ints(4, 10);
    cuabi_graph *g1 = two_node_graph(out, in, 4, false);
    cuabi_graph *g2 = two_node_graph(out, in2, 4, false);
    cuabi_graph *g3 = two_node_graph(out, in2, 2, true);
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g1, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 10);
    /* Same topology, other arguments: updated in place. */
    cuabi_graph_update_info info = CUABI_GRAPH_UPDATE_INFO_INIT;
    ck_assert_ok(cuabi_graph_exec_update(e, g2, &info));
    ck_assert_int_eq(info.result, CUABI_GRAPH_UPDATE_SUCCESS);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 46);
    /* Another topology: refused, naming the node, the executable unchanged. */
    ck_assert_status(cuabi_graph_exec_update(e, g3, &info), CUABI_ERROR_GRAPH_UPDATE);
    ck_assert_error_mentions("cuabi_graph_exec_update");
    ck_assert_error_mentions("topology");
    ck_assert_error_mentions("empty node 2");
    ck_assert_int_eq(info.result, CUABI_GRAPH_UPDATE_TOPOLOGY_CHANGED);
    ck_assert_int_eq(info.node_index, 2);
    ck_assert_int_eq(info.node_type, CUABI_GRAPH_NODE_EMPTY);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 46);
    info.version = 7;
    ck_assert_status(cuabi_graph_exec_update(e, g2, &info), CUABI_ERROR_INVALID_VERSION);
    ck_assert_ok(cuabi_graph_exec_update(e, g2, NULL));
    /* The executable keeps g2 (whose nodes it runs) and g1. */
    cuabi_graph_release(g1);
    cuabi_graph_release(g2);
    cuabi_buffer_destroy(in2);
    ck_assert_int_eq(fake_live_graphs, 3);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 46);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g3);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

START_TEST(update_kernel_without_reinstantiating)
{
    cuabi_graph *g, *other;
    cuabi_graph_node *k, *z, *ok;
    cuabi_buffer *out = ints(1, 0), *in = ints(4, 1), *in2 = ints(4, 10);
    cuabi_argpack *p = add_pack(out, in, 4), *p2 = add_pack(out, in2, 2);
    cuabi_launch_config c = cfg(1);
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_memset(&z, g, NULL, 0, out, 0, 0, 4, 2));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, &z, 1, kern, p, &c));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 10);
    int execs = fake_live_execs;
    ck_assert_ok(cuabi_graph_exec_update_kernel(e, k, p2, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 21);
    ck_assert_int_eq(fake_live_execs, execs);
    /* A new grid; the executable keeps in2 after its handle goes. */
    c.grid[0] = 5;
    ck_assert_ok(cuabi_graph_exec_update_kernel(e, k, p2, &c));
    cuabi_argpack_release(p2);
    cuabi_buffer_destroy(in2);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 21);
    /* Refused: attributes, non-kernel nodes, other graphs' nodes, a
     * released buffer (naming the node and the slot). */
    c.cooperative = 1;
    ck_assert_status(cuabi_graph_exec_update_kernel(e, k, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    c.cooperative = 0;
    c.device = dev1;
    ck_assert_status(cuabi_graph_exec_update_kernel(e, k, p, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("names device 1");
    c.device = dev;
    ck_assert_status(cuabi_graph_exec_update_kernel(e, z, p, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cuabi_graph_add_kernel");
    ck_assert_ok(cuabi_graph_create(&other));
    ck_assert_ok(cuabi_graph_add_kernel(&ok, other, NULL, 0, kern, p, &c));
    ck_assert_status(cuabi_graph_exec_update_kernel(e, ok, p, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not from the graph");
    cuabi_buffer *gone = ints(1, 0);
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, gone));
    cuabi_buffer_destroy(gone);
    ck_assert_status(cuabi_graph_exec_update_kernel(e, k, p, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 1");
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in));
    ck_assert_ok(cuabi_graph_exec_update_kernel(e, k, p, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 10);
    cuabi_graph_node_release(ok);
    cuabi_graph_release(other);
    cuabi_graph_node_release(k);
    cuabi_graph_node_release(z);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

/* -------------------------------------------------------------- capture */

START_TEST(capture_records_cuabi_work)
{
    cuabi_buffer *out = ints(1, 0), *in = ints(4, 1), *back = ints(1, 0);
    cuabi_argpack *p = add_pack(out, in, 4);
    cuabi_launch_config c = cfg(1);
    c.device = NULL;
    c.stream = stream;
    cuabi_capture_status cs;
    ck_assert_ok(cuabi_graph_capture_status(&cs, stream));
    ck_assert_int_eq(cs, CUABI_CAPTURE_STATUS_NONE);
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_graph_capture_status(&cs, stream));
    ck_assert_int_eq(cs, CUABI_CAPTURE_STATUS_ACTIVE);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 1);
    ck_assert_status(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("already being captured");
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 1);
    ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 4, 2, stream));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_ok(cuabi_buffer_copy(back, 0, out, 0, 8, stream));
    /* A temporary: allocated and freed inside the capture. */
    cuabi_buffer *tmp;
    ck_assert_ok(cuabi_buffer_allocate(&tmp, pool, 64, 0, stream));
    ck_assert_ok(cuabi_buffer_free_async(tmp, stream));
    ck_assert_int_eq(at(out, 0), 0);   /* nothing ran yet */
    ck_assert_int_eq(fake_kernel_runs, 0);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    ck_assert_uint_eq(node_count(g), 5);
    cuabi_graph_node *n;
    cuabi_graph_node_kind kinds[5], want[5] = { CUABI_GRAPH_NODE_MEMSET, CUABI_GRAPH_NODE_KERNEL,
                                                CUABI_GRAPH_NODE_MEMCPY, CUABI_GRAPH_NODE_MEM_ALLOC,
                                                CUABI_GRAPH_NODE_MEM_FREE };
    for (size_t i = 0; i < 5; i++) {
        ck_assert_ok(cuabi_graph_node_at(&n, g, i));
        ck_assert_ok(cuabi_graph_node_type(&kinds[i], n));
        ck_assert_int_eq(kinds[i], want[i]);
        if (i)
            ck_assert_uint_eq(deps_of(n), 1);
        cuabi_graph_node_release(n);
    }
    cuabi_device *d;
    ck_assert_ok(cuabi_graph_device(&d, g));
    ck_assert_ptr_eq(d, dev);
    /* The capture kept the kernel and the buffers: drop their handles. */
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(in);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    ck_assert_int_eq(fake_live_libraries, 1);
    run(g);
    run(g);
    ck_assert_int_eq(at(out, 0), 10);
    ck_assert_int_eq(at(back, 0), 10);
    ck_assert_int_eq(fake_kernel_runs, 2);
    cuabi_graph_release(g);
    ck_assert_int_eq(fake_live_libraries, 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin", cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(back);
}
END_TEST

/* The same work captured and built node by node gives the same result. */
START_TEST(capture_equals_explicit)
{
    int64_t results[2];
    for (int way = 0; way < 2; way++) {
        cuabi_buffer *out = ints(8, 0), *in = ints(64, 1);
        cuabi_graph *g;
        cuabi_argpack *p;
        ck_assert_ok(cuabi_argpack_create(&p, "buffer, ptr, u64"));
        ck_assert_ok(cuabi_argpack_set_buffer(p, 0, out));
        uintptr_t base;
        ck_assert_ok(cuabi_buffer_pointer(&base, in));
        cuabi_launch_config c = cfg(1);
        if (way == 0) {
            c.device = NULL;
            c.stream = stream;
            ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_THREAD_LOCAL));
            for (int b = 0; b < 8; b++) {
                ck_assert_ok(cuabi_argpack_set_pointer(p, 1, base + 64u * b));
                ck_assert_ok(cuabi_argpack_set_uint(p, 2, 8));
                ck_assert_ok(cuabi_launch(kern, p, &c));
            }
            ck_assert_ok(cuabi_graph_capture_end(&g, stream));
        } else {
            cuabi_graph_node *prev = NULL, *n;
            ck_assert_ok(cuabi_graph_create(&g));
            for (int b = 0; b < 8; b++) {
                ck_assert_ok(cuabi_argpack_set_pointer(p, 1, base + 64u * b));
                ck_assert_ok(cuabi_argpack_set_uint(p, 2, 8));
                ck_assert_ok(cuabi_graph_add_kernel(&n, g, prev ? &prev : NULL, prev ? 1 : 0,
                                                    kern, p, &c));
                if (prev)
                    cuabi_graph_node_release(prev);
                prev = n;
            }
            cuabi_graph_node_release(prev);
        }
        run(g);
        results[way] = at(out, 0);
        cuabi_graph_release(g);
        cuabi_argpack_release(p);
        cuabi_buffer_destroy(out);
        cuabi_buffer_destroy(in);
    }
    ck_assert_int_eq(results[0], 64 * 65 / 2);
    ck_assert_int_eq(results[1], results[0]);
}
END_TEST

/* A buffer allocated before the capture and freed during it: its free is
 * not recorded (it would free at every replay); the graph frees it. */
START_TEST(capture_defers_frees_of_older_memory)
{
    cuabi_buffer *old = ints(2, 5), *out = ints(1, 0);
    int allocs = fake_live_allocs;
    cuabi_argpack *p = add_pack(out, old, 2);
    cuabi_launch_config c = cfg(1);
    c.device = NULL;
    c.stream = stream;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    cuabi_buffer *unused = ints(1, 0); /* allocated in the capture, freed by the caller later */
    ck_assert_ok(cuabi_buffer_free_async(old, stream));
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    ck_assert_int_eq(fake_foreign_frees, 0);
    ck_assert_int_eq(fake_live_allocs, allocs + 1);
    run(g);
    ck_assert_int_eq(at(out, 0), 11);
    cuabi_graph_release(g);
    ck_assert_int_eq(fake_live_allocs, allocs);
    cuabi_buffer_destroy(unused);
    ck_assert_int_eq(fake_live_allocs, allocs - 1);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
}
END_TEST

START_TEST(capture_refusals_and_invalidation)
{
    cuabi_stream *legacy, *pt;
    cuabi_graph *g = (cuabi_graph *)1;
    ck_assert_ok(cuabi_stream_legacy_default(&legacy, dev));
    ck_assert_status(cuabi_graph_capture_begin(legacy, CUABI_CAPTURE_MODE_GLOBAL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("legacy default stream");
    ck_assert_status(cuabi_graph_capture_begin(stream, (cuabi_capture_mode)9),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_begin(NULL, CUABI_CAPTURE_MODE_GLOBAL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(g);
    ck_assert_error_mentions("not being captured");
    cuabi_capture_status cs;
    ck_assert_ok(cuabi_graph_capture_status(&cs, legacy));
    ck_assert_int_eq(cs, CUABI_CAPTURE_STATUS_NONE);
    /* The per-thread default stream can be captured. */
    ck_assert_ok(cuabi_stream_per_thread_default(&pt, dev));
    ck_assert_ok(cuabi_graph_capture_begin(pt, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_graph_capture_end(&g, pt));
    ck_assert_uint_eq(node_count(g), 0);
    cuabi_graph_release(g);
    /* A synchronising call invalidates the capture: a clear error at the
     * call and at the end, no graph, nothing kept, the stream usable. */
    cuabi_buffer *out = ints(1, 0), *in = ints(1, 1);
    cuabi_argpack *p = add_pack(out, in, 1);
    cuabi_launch_config c = cfg(1);
    c.device = NULL;
    c.stream = stream;
    int graphs = fake_live_graphs;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_status(cuabi_stream_synchronize(stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_error_mentions("cuabi_stream_synchronize");
    ck_assert_error_mentions("captured");
    ck_assert_ok(cuabi_graph_capture_status(&cs, stream));
    ck_assert_int_eq(cs, CUABI_CAPTURE_STATUS_INVALIDATED);
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_ptr_null(g);
    ck_assert_error_mentions("no graph was made");
    ck_assert_error_mentions("invalidated");
    ck_assert_int_eq(fake_live_graphs, graphs);
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_int_eq(at(out, 0), 1);
    /* The same where the invalidated capture reports another id: the end
     * still finds the record it began with and lets go of what it kept. */
    fake_invalidated_id_changes = 1;
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_status(cuabi_stream_synchronize(stream), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_STREAM_CAPTURE);
    fake_invalidated_id_changes = 0;
    ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_int_eq(at(out, 0), 2);
    /* Synchronous copies in global mode break a capture on another stream. */
    cuabi_stream *s2;
    ck_assert_ok(cuabi_stream_create(&s2, dev, NULL));
    ck_assert_ok(cuabi_graph_capture_begin(s2, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_status(cuabi_buffer_copy(out, 0, in, 0, 8, NULL), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_status(cuabi_graph_capture_end(&g, s2), CUABI_ERROR_STREAM_CAPTURE);
    /* Host-only work cannot be recorded. */
    cuabi_memory_resource *host;
    cuabi_buffer *h1, *h2;
    ck_assert_ok(cuabi_memory_resource_host(&host));
    ck_assert_ok(cuabi_buffer_allocate(&h1, host, 8, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&h2, host, 8, 0, NULL));
    ck_assert_ok(cuabi_graph_capture_begin(s2, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_status(cuabi_buffer_copy(h1, 0, h2, 0, 8, s2), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_error_mentions("host");
    ck_assert_status(cuabi_buffer_memset(h1, 0, 1, 1, 8, s2), CUABI_ERROR_STREAM_CAPTURE);
    ck_assert_ok(cuabi_buffer_copy(h1, 0, h2, 0, 8, stream)); /* not captured: runs */
    ck_assert_ok(cuabi_graph_capture_end(&g, s2));
    ck_assert_uint_eq(node_count(g), 0);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(h1);
    cuabi_buffer_destroy(h2);
    cuabi_memory_resource_release(host);
    cuabi_stream_release(s2);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
    cuabi_stream_release(pt);
    cuabi_stream_release(legacy);
}
END_TEST

/* ------------------------------------------ releases during a capture */

/* Issue 29 item 9: a release may come at any moment -- a garbage
 * collector's finalizer, another thread -- while a stream is captured in
 * GLOBAL mode. The fake driver refuses the "potentially unsafe" release
 * calls then, and invalidates the capture, unless the calling thread is in
 * RELAXED mode; a pool free on the legacy stream conflicts with a capture
 * of a blocking stream in any mode. Every kind of handle cuabi releases
 * through such a call is released here inside a capture, on the capturing
 * thread and on another one, and the capture must stay valid. */
typedef struct victims {
    cuabi_device *dev;                   /* its last reference: the primary context */
    cuabi_stream *stream;
    cuabi_event *event;
    cuabi_memory_resource *pool, *pinned, *managed;
    cuabi_buffer *pinned_buf, *managed_buf, *legacy_buf, *stream_buf;
    cuabi_objcode *code;
    cuabi_kernel *kern;
    cuabi_graph *graph;
    cuabi_graph_exec *exec;
} victims;

static const void *cubin;
static size_t cubin_size;

static void victims_make(victims *v)
{
    ck_assert_ok(cuabi_device_get(&v->dev, 1));
    ck_assert_ok(cuabi_stream_create(&v->stream, v->dev, NULL));
    ck_assert_ok(cuabi_event_create(&v->event, v->dev, NULL));
    ck_assert_ok(cuabi_memory_resource_pool_create(&v->pool, v->dev, NULL));
    ck_assert_ok(cuabi_memory_resource_pinned(&v->pinned, v->dev));
    ck_assert_ok(cuabi_memory_resource_managed(&v->managed, v->dev));
    ck_assert_ok(cuabi_buffer_allocate(&v->pinned_buf, v->pinned, 64, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&v->managed_buf, v->managed, 64, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&v->legacy_buf, pool, 64, 0, NULL));
    /* The hot free: a pool buffer ordered on a created stream. */
    ck_assert_ok(cuabi_buffer_allocate(&v->stream_buf, v->pool, 64, 0, v->stream));
    ck_assert_ok(cuabi_objcode_from_memory(&v->code, CUABI_CODE_CUBIN, cubin, cubin_size, NULL));
    ck_assert_ok(cuabi_objcode_get_kernel(&v->kern, v->code, "add"));   /* loads it */
    cuabi_graph_node *n;
    ck_assert_ok(cuabi_graph_create(&v->graph));
    ck_assert_ok(cuabi_graph_add_empty(&n, v->graph, NULL, 0));
    cuabi_graph_node_release(n);
    ck_assert_ok(cuabi_graph_instantiate(&v->exec, v->graph, NULL));
}

static void victims_release(victims *v)
{
    cuabi_graph_exec_release(v->exec);
    cuabi_graph_release(v->graph);
    cuabi_kernel_release(v->kern);
    cuabi_objcode_release(v->code);
    cuabi_buffer_destroy(v->legacy_buf);
    cuabi_buffer_destroy(v->stream_buf);
    cuabi_buffer_destroy(v->managed_buf);
    cuabi_buffer_destroy(v->pinned_buf);
    cuabi_memory_resource_release(v->managed);
    cuabi_memory_resource_release(v->pinned);
    cuabi_memory_resource_release(v->pool);
    cuabi_event_release(v->event);
    cuabi_stream_release(v->stream);
    cuabi_device_release(v->dev);
}

static void *victims_release_thread(void *arg)
{
    victims_release(arg);
    return NULL;
}

/* CUABI_RELEASE_FAST gives the pool free on a created stream back to the
 * calling thread's capture mode: a GLOBAL capture on another thread then
 * breaks, as the driver breaks it (the trade the mode makes for speed);
 * the default mode keeps it whole. */
START_TEST(release_mode_decides_the_pool_free)
{
    cuabi_release_mode m;
    ck_assert_ok(cuabi_release_mode_get(&m));
    ck_assert_int_eq(m, CUABI_RELEASE_CAPTURE_SAFE);
    ck_assert_int_eq(cuabi_release_mode_set((cuabi_release_mode)7), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(cuabi_release_mode_get(NULL), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_memory_resource *r;
    cuabi_stream *other;
    ck_assert_ok(cuabi_memory_resource_pool_create(&r, dev, NULL));
    ck_assert_ok(cuabi_stream_create(&other, dev, NULL));
    for (int fast = 0; fast < 2; fast++) {
        ck_assert_ok(cuabi_release_mode_set(fast ? CUABI_RELEASE_FAST : CUABI_RELEASE_CAPTURE_SAFE));
        cuabi_buffer *b;
        uintptr_t ptr, raw_other;
        ck_assert_ok(cuabi_buffer_allocate(&b, r, 64, 0, other));
        ck_assert_ok(cuabi_buffer_pointer(&ptr, b));
        ck_assert_ok(cuabi_stream_raw(&raw_other, other));
        fake_unsafe_refusals = 0;
        ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
        cuabi_buffer_destroy(b);       /* the pool free, on a created stream */
        cuabi_graph *g = NULL;
        cuabi_status ended = cuabi_graph_capture_end(&g, stream);
        if (fast) {
            ck_assert_int_ne(ended, CUABI_SUCCESS);
            ck_assert_int_eq(fake_unsafe_refusals, 1);
            /* The refused free left the memory: give it back by hand. */
            ck_assert_int_eq(cuabi__driver_for_test()->cuMemFreeAsync((CUdeviceptr)ptr,
                                                                       (CUstream)raw_other),
                             CUDA_SUCCESS);
        } else {
            ck_assert_ok(ended);
            ck_assert_int_eq(fake_unsafe_refusals, 0);
        }
        if (g)
            cuabi_graph_release(g);
    }
    ck_assert_ok(cuabi_release_mode_set(CUABI_RELEASE_CAPTURE_SAFE));
    fake_unsafe_refusals = 0;
    cuabi_stream_release(other);
    cuabi_memory_resource_release(r);
}
END_TEST

START_TEST(releases_inside_a_capture_keep_it_valid)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin",
             cuabi_test_srcdir());
    cuabi_objcode *tmp;
    ck_assert_ok(cuabi_objcode_from_file(&tmp, CUABI_CODE_CUBIN, path));
    const void *bytes;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &cubin_size, tmp));
    void *copy = malloc(cubin_size);
    memcpy(copy, bytes, cubin_size);
    cubin = copy;
    cuabi_objcode_release(tmp);
    /* Device 1 is released with the victims: the fixture's references go first. */
    cuabi_stream_release(stream1);
    cuabi_device_release(dev1);
    ck_assert_int_eq(fake_ctx_refs[1], 0);
    cuabi_buffer *out = ints(1, 0), *in = ints(1, 1);
    cuabi_argpack *p = add_pack(out, in, 1);
    cuabi_launch_config c = cfg(1);
    c.device = NULL;
    c.stream = stream;
    int streams = fake_live_streams, allocs = fake_live_allocs;
    for (int round = 0; round < 1000; round++) {
        victims v;
        victims_make(&v);
        ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
        ck_assert_ok(cuabi_launch(kern, p, &c));
        if (round % 2) {                 /* another thread, in GLOBAL mode */
            pthread_t t;
            ck_assert_int_eq(pthread_create(&t, NULL, victims_release_thread, &v), 0);
            pthread_join(t, NULL);
        } else {
            victims_release(&v);
        }
        ck_assert_ok(cuabi_launch(kern, p, &c));
        cuabi_graph *g;
        ck_assert_msg(cuabi_graph_capture_end(&g, stream) == CUABI_SUCCESS,
                      "round %d: %s", round, cuabi_last_error()->message);
        ck_assert_uint_eq(node_count(g), 2);
        cuabi_graph_release(g);
        ck_assert_int_eq(fake_unsafe_refusals, 0);
        /* Released indeed: the primary context, the stream, the memory
         * (the legacy-stream free once the capture ended). */
        ck_assert_int_eq(fake_ctx_refs[1], 0);
        ck_assert_int_eq(fake_live_streams, streams);
        ck_assert_int_eq(fake_live_allocs, allocs);
        ck_assert_uint_eq(atomic_load(&cuabi__memory_deferred_frees), 0);
    }
    /* With no capture, a legacy-stream free goes at once. */
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 64, 0, NULL));
    cuabi_buffer_destroy(b);
    ck_assert_int_eq(fake_live_allocs, allocs);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
    free(copy);
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&stream1, dev1, NULL));
}
END_TEST

/* A pool free on the legacy stream during a capture of a blocking stream
 * waits (it would conflict with the capture in any mode) and goes when
 * the capture ends; a non-blocking stream's capture does not hold it. */
START_TEST(legacy_stream_frees_wait_for_blocking_captures)
{
    int allocs = fake_live_allocs;
    cuabi_buffer *b1, *b2;
    ck_assert_ok(cuabi_buffer_allocate(&b1, pool, 64, 0, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&b2, pool, 64, 0, NULL));
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ok(cuabi_buffer_destroy(b1));
    ck_assert_uint_eq(atomic_load(&cuabi__memory_deferred_frees), 1);
    ck_assert_int_eq(fake_live_allocs, allocs + 2);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_release(g);
    ck_assert_uint_eq(atomic_load(&cuabi__memory_deferred_frees), 0);
    ck_assert_int_eq(fake_live_allocs, allocs + 1);
    cuabi_stream *nb;
    cuabi_stream_options o = CUABI_STREAM_OPTIONS_INIT;
    o.flags = CUABI_STREAM_NON_BLOCKING;
    ck_assert_ok(cuabi_stream_create(&nb, dev, &o));
    ck_assert_ok(cuabi_graph_capture_begin(nb, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_buffer_destroy(b2));
    ck_assert_int_eq(fake_live_allocs, allocs);
    ck_assert_ok(cuabi_graph_capture_end(&g, nb));
    cuabi_graph_release(g);
    cuabi_stream_release(nb);
}
END_TEST

/* Work on a stream that joined the capture through an event is kept too;
 * a stream left unjoined fails the capture without leaking. */
START_TEST(capture_across_streams)
{
    cuabi_stream *s2;
    cuabi_event *fork, *join;
    cuabi_buffer *out = ints(1, 0), *in = ints(2, 1);
    cuabi_argpack *p = add_pack(out, in, 2);
    cuabi_launch_config c = cfg(1);
    c.device = NULL;
    c.stream = NULL;
    ck_assert_ok(cuabi_stream_create(&s2, dev, NULL));
    ck_assert_ok(cuabi_event_create(&fork, dev, NULL));
    ck_assert_ok(cuabi_event_create(&join, dev, NULL));
    for (int joined = 0; joined < 2; joined++) {
        ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
        ck_assert_ok(cuabi_event_record(fork, stream));
        ck_assert_ok(cuabi_stream_wait_event(s2, fork));
        c.stream = s2;
        ck_assert_ok(cuabi_launch(kern, p, &c));
        if (joined) {
            ck_assert_ok(cuabi_event_record(join, s2));
            ck_assert_ok(cuabi_stream_wait_event(stream, join));
        }
        cuabi_graph *g = (cuabi_graph *)1;
        if (!joined) {
            ck_assert_status(cuabi_graph_capture_end(&g, stream), CUABI_ERROR_STREAM_CAPTURE);
            ck_assert_ptr_null(g);
            ck_assert_error_mentions("cuStreamEndCapture failed");
            ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
            ck_assert_int_eq(fake_live_graphs, 0);
            continue;
        }
        ck_assert_ok(cuabi_graph_capture_end(&g, stream));
        /* The launch on s2 kept the kernel's input. */
        cuabi_buffer_destroy(in);
        in = NULL;
        run(g);
        ck_assert_int_eq(at(out, 0), 3);
        cuabi_graph_release(g);
    }
    cuabi_event_release(fork);
    cuabi_event_release(join);
    cuabi_stream_release(s2);
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
}
END_TEST

/* An executable launched into a capture becomes a child graph node and
 * stays alive with the new graph. */
START_TEST(capture_an_executable)
{
    cuabi_buffer *out = ints(1, 0), *in = ints(2, 1);
    cuabi_graph *inner = two_node_graph(out, in, 2, false), *g;
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, inner, NULL));
    cuabi_graph_release(inner);
    ck_assert_ok(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_ok(cuabi_graph_capture_end(&g, stream));
    cuabi_graph_exec_release(e);
    ck_assert_int_eq(fake_live_execs, 1); /* the new graph keeps it */
    run(g);
    ck_assert_int_eq(at(out, 0), 3);
    cuabi_graph_release(g);
    ck_assert_int_eq(fake_live_execs, 0);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

/* --------------------------------------------------------- conditionals */

START_TEST(conditional_while_runs_n_times)
{
    cuabi_graph *g, *body, *body2;
    cuabi_graph_node *loop, *k, *h;
    cuabi_buffer *counter = ints(1, 0);
    cuabi_kernel *empty;
    uint64_t handle = 0;
    ck_assert_ok(cuabi_objcode_get_kernel(&empty, code, "empty"));
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_status(cuabi_graph_conditional_handle_create(&handle, g, dev, 1, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_graph_conditional_handle_create(&handle, g, dev, 1,
                                                       CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    ck_assert_status(cuabi_graph_add_conditional(&loop, g, NULL, 0, handle + 99,
                                                 CUABI_GRAPH_CONDITIONAL_WHILE, 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("was not made");
    ck_assert_status(cuabi_graph_add_conditional(&loop, g, NULL, 0, handle,
                                                 CUABI_GRAPH_CONDITIONAL_WHILE, 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("exactly 1");
    ck_assert_ok(cuabi_graph_add_conditional(&loop, g, NULL, 0, handle,
                                             CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    ck_assert_ok(cuabi_graph_node_body(&body, loop, 0));
    ck_assert_ok(cuabi_graph_node_body(&body2, loop, 0));
    ck_assert_ptr_eq(body, body2);
    cuabi_graph_release(body2);
    ck_assert_status(cuabi_graph_node_body(&body2, loop, 1), CUABI_ERROR_INVALID_ARGUMENT);
    /* Bodies hold device work only; they are not instantiated alone. */
    ck_assert_status(cuabi_graph_add_host(&h, body, NULL, 0, host_fn, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("body of conditional node");
    cuabi_graph_exec *e;
    ck_assert_status(cuabi_graph_instantiate(&e, body, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "u64, buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_uint(p, 0, handle));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, counter));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, 7));
    cuabi_launch_config c = cfg(1);
    c.device = dev1;
    ck_assert_status(cuabi_graph_add_kernel(&k, body, NULL, 0, empty, p, &c),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device");
    c.device = dev;
    ck_assert_ok(cuabi_graph_add_kernel(&k, body, NULL, 0, empty, p, &c));
    /* Body and node outlive the outer graph's handle. */
    cuabi_graph_release(g);
    cuabi_graph_node_release(k);
    ck_assert_ok(cuabi_graph_node_graph(&g, loop));
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(counter, 0), 7);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(counter, 0), 8); /* 7 is past the limit: the body runs once */
    cuabi_graph_exec_release(e);
    cuabi_graph_release(body);
    cuabi_graph_node_release(loop);
    cuabi_argpack_release(p);
    cuabi_kernel_release(empty);
    cuabi_buffer_destroy(counter);
}
END_TEST

START_TEST(conditional_needs_the_driver)
{
    cuabi_graph *g;
    cuabi_graph_node *n;
    uint64_t h = 0;
    ck_assert_ok(cuabi_graph_create(&g));
    /* A handle no node uses makes instantiation fail, naming the cause. */
    ck_assert_ok(cuabi_graph_conditional_handle_create(&h, g, dev, 0, 0));
    cuabi_graph_exec *e;
    ck_assert_status(cuabi_graph_instantiate(&e, g, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("conditional handle");
    /* if/else and switch need CUDA 12.8; conditionals 12.3. */
    cuabi__lib_info *info = (cuabi__lib_info *)cuabi__driver_info();
    info->version = 12040;
    ck_assert_status(cuabi_graph_add_conditional(&n, g, NULL, 0, h, CUABI_GRAPH_CONDITIONAL_SWITCH,
                                                 3), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("12.8");
    cuabi__driver_for_test()->cuGraphConditionalHandleCreate = NULL;
    ck_assert_status(cuabi_graph_conditional_handle_create(&h, g, dev, 0, 0),
                     CUABI_ERROR_NOT_SUPPORTED);
    info->version = 12020;
    cuabi_graph *none = (cuabi_graph *)1;
    ck_assert_status(cuabi_graph_create(&none), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_null(none);
    ck_assert_error_mentions("12.3");
    ck_assert_status(cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL),
                     CUABI_ERROR_NOT_SUPPORTED);
    info->version = 13000;
    cuabi_graph_release(g);
}
END_TEST

/* ------------------------------------------------------------- Graphviz */

START_TEST(debug_dot)
{
    cuabi_graph *g;
    cuabi_graph_node *a, *b;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_empty(&a, g, NULL, 0));
    ck_assert_ok(cuabi_graph_add_empty(&b, g, &a, 1));
    size_t size = 0;
    ck_assert_status(cuabi_graph_debug_dot_text(NULL, &size, g, CUABI_GRAPH_DOT_VERBOSE),
                     CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_uint_gt(size, 10);
    char *text = malloc(size);
    ck_assert_ok(cuabi_graph_debug_dot_text(text, &size, g, CUABI_GRAPH_DOT_VERBOSE));
    ck_assert_uint_eq(strlen(text) + 1, size);
    ck_assert_ptr_nonnull(strstr(text, "digraph"));
    ck_assert_ptr_nonnull(strstr(text, "n0 -> n1"));
    ck_assert_ptr_nonnull(strstr(text, "verbose"));
    free(text);
    char path[] = "/tmp/cuabi-test-dot-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_ok(cuabi_graph_debug_dot(g, path, CUABI_GRAPH_DOT_DEFAULT));
    FILE *f = fopen(path, "r");
    char line[64];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_ptr_nonnull(strstr(line, "digraph"));
    fclose(f);
    unlink(path);
    ck_assert_status(cuabi_graph_debug_dot(g, NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_debug_dot_text(NULL, NULL, g, 0), CUABI_ERROR_INVALID_ARGUMENT);
    size = 4;
    ck_assert_status(cuabi_graph_debug_dot_text(NULL, &size, g, 0), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi__fault_arm("cuGraphDebugDotPrint", 1, false, CUDA_ERROR_OPERATING_SYSTEM);
    size = 0;
    ck_assert_status(cuabi_graph_debug_dot_text(NULL, &size, g, 0), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi_graph_node_release(a);
    cuabi_graph_node_release(b);
    cuabi_graph_release(g);
}
END_TEST

/* ---------------------------------------------------- handles, threads */

START_TEST(wrong_handles_everywhere)
{
    cuabi_graph *g;
    cuabi_graph_node *n, *out;
    cuabi_graph_exec *e;
    void *bad[3] = { NULL, (void *)(uintptr_t)0x1234, NULL };
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_empty(&n, g, NULL, 0));
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    bad[2] = stream; /* the wrong type */
    size_t count;
    uintptr_t raw;
    cuabi_device *d;
    cuabi_graph *gg;
    cuabi_graph_node_kind kind;
    for (int i = 0; i < 3; i++) {
        cuabi_graph *bg = bad[i];
        cuabi_graph_node *bn = bad[i];
        cuabi_graph_exec *be = bad[i];
        ck_assert_status(cuabi_graph_raw(&raw, bg), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_device(&d, bg), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_count(&count, bg), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_at(&out, bg, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_add_empty(&out, bg, NULL, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_add_dependencies(bg, &n, &n, 1), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_debug_dot(bg, "/tmp/x", 0), CUABI_ERROR_INVALID_HANDLE);
        cuabi_graph_exec *none;
        ck_assert_status(cuabi_graph_instantiate(&none, bg, NULL), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_type(&kind, bn), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_index(&count, bn), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_graph(&gg, bn), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_raw(&raw, bn), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_dependency_count(&count, bn), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_dependent(&out, bn, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_node_body(&gg, bn, 0), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_exec_raw(&raw, be), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_exec_device(&d, be), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_exec_graph(&gg, be), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_exec_update(be, g, NULL), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_exec_upload(be, stream), CUABI_ERROR_INVALID_HANDLE);
        ck_assert_status(cuabi_graph_capture_status((cuabi_capture_status *)&kind,
                                                    (cuabi_stream *)bg),
                         i == 2 ? CUABI_SUCCESS : CUABI_ERROR_INVALID_HANDLE);
    }
    /* NULL outputs. */
    ck_assert_status(cuabi_graph_node_count(NULL, g), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_node_at(NULL, g, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_empty(NULL, g, NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_instantiate(NULL, g, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_end(NULL, stream), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_capture_status(NULL, stream), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_node_at(&out, g, 5), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_node_body(&gg, n, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a conditional node");
    cuabi_graph_exec_release(e);
    cuabi_graph_node_release(n);
    cuabi_graph_release(g);
}
END_TEST

static void *add_nodes(void *arg)
{
    cuabi_graph *g = arg;
    for (int i = 0; i < 50; i++) {
        cuabi_graph_node *n, *again;
        size_t count, idx;
        if (cuabi_graph_add_empty(&n, g, NULL, 0) != CUABI_SUCCESS)
            return (void *)1;
        if (cuabi_graph_node_count(&count, g) != CUABI_SUCCESS ||
            cuabi_graph_node_index(&idx, n) != CUABI_SUCCESS ||
            cuabi_graph_node_at(&again, g, idx) != CUABI_SUCCESS || again != n)
            return (void *)2;
        cuabi_graph_node_release(again);
        cuabi_graph_node_release(n);
    }
    return NULL;
}

START_TEST(threads_add_and_query)
{
    cuabi_graph *g;
    pthread_t t[4];
    ck_assert_ok(cuabi_graph_create(&g));
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, add_nodes, g), 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_uint_eq(node_count(g), 200);
    cuabi_graph_release(g);
}
END_TEST

/* Every allocation of a node addition and of a capture fails in turn:
 * each failure is reported and leaves the graph and the counts as they
 * were. */
START_TEST(allocation_failures_leave_nothing)
{
    cuabi_buffer *out = ints(1, 0), *in = ints(1, 1);
    cuabi_argpack *p = add_pack(out, in, 1);
    cuabi_launch_config c = cfg(1);
    cuabi_graph *g;
    ck_assert_ok(cuabi_graph_create(&g));
    for (long n = 1;; n++) {
        cuabi_graph_node *k = NULL;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_graph_add_kernel(&k, g, NULL, 0, kern, p, &c);
        long fired = cuabi__alloc_fail_count();
        cuabi__alloc_fail_at(0, false);
        if (!fired) {
            ck_assert_ok(st);
            cuabi_graph_node_release(k);
            break;
        }
        ck_assert_status(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(k);
    }
    ck_assert_uint_eq(node_count(g), 1);
    cuabi_graph_release(g);
    c.device = NULL;
    c.stream = stream;
    for (long n = 1;; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_graph *cg = NULL;
        cuabi_status st = cuabi_graph_capture_begin(stream, CUABI_CAPTURE_MODE_GLOBAL);
        if (st == CUABI_SUCCESS)
            st = cuabi_launch(kern, p, &c);
        cuabi_status end = cuabi_graph_capture_end(&cg, stream);
        long fired = cuabi__alloc_fail_count();
        cuabi__alloc_fail_at(0, false);
        if (cg)
            cuabi_graph_release(cg);
        ck_assert_int_eq(atomic_load(&cuabi__captures_active), 0);
        if (!fired) {
            ck_assert_ok(st);
            ck_assert_ok(end);
            break;
        }
    }
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(in);
}
END_TEST

/* The GPU test's conditional kernel compiles here, without a GPU, both
 * ways docs/graphs.md gives: whole-program with the one-line declaration,
 * and relocatable LTO-IR linked by nvJitLink without it. */
START_TEST(conditional_kernel_compiles_with_nvrtc)
{
    cuabi_program *prog;
    cuabi_objcode *o, *lto, *linked;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.cache = 0;
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, graph_kernels_src, 0, "g.cu"));
    ck_assert_ok(cuabi_program_compile(&o, prog, &opts));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, o, "loop_body", "sm_90"));
    const void *bytes;
    size_t size;
    ck_assert_ok(cuabi_objcode_bytes(&bytes, &size, o));
    ck_assert_ptr_nonnull(memmem(bytes, size, "cudaGraphSetConditional", 23));
    cuabi_objcode_release(o);
    cuabi_program_release(prog);
    /* Relocatable: NVRTC declares the device runtime itself. */
    const char *body = strstr(graph_kernels_src, "extern \"C\" __global__ void loop_body");
    ck_assert_ptr_nonnull(body);
    ck_assert_ok(cuabi_program_create(&prog, CUABI_CODE_CUDA_CXX, body, 0, "loop.cu"));
    opts.output = CUABI_CODE_LTOIR;
    opts.lto = opts.relocatable = 1;
    ck_assert_ok(cuabi_program_compile(&lto, prog, &opts));
    cuabi_linker *l;
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.arch = "sm_90";
    lo.lto = 1;
    ck_assert_ok(cuabi_linker_create(&l, &lo));
    ck_assert_ok(cuabi_linker_add_objcode(l, lto));
    ck_assert_ok(cuabi_linker_complete(&linked, l, CUABI_CODE_CUBIN));
    ck_assert_ok(cuabi_objcode_kernel_resources(&r, linked, "loop_body", "sm_90"));
    cuabi_objcode_release(linked);
    cuabi_linker_destroy(l);
    cuabi_objcode_release(lto);
    cuabi_program_release(prog);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, create_query_release);
    tcase_add_test(tc, explicit_nodes_edges_and_run);
    tcase_add_test(tc, dependencies_cycles_and_duplicates);
    tcase_add_test(tc, instantiate_names_the_node_of_a_cycle);
    tcase_add_test(tc, host_event_child_nodes);
    tcase_add_test(tc, copies_and_memsets_checked);
    tcase_add_test(tc, memcpy_views);
    tcase_add_test(tc, kernel_node_checks);
    tcase_add_test(tc, kernel_node_set_changes_the_graph);
    tcase_add_test(tc, instantiate_launch_upload);
    tcase_add_test(tc, whole_update);
    tcase_add_test(tc, update_kernel_without_reinstantiating);
    tcase_add_test(tc, capture_records_cuabi_work);
    tcase_add_test(tc, capture_equals_explicit);
    tcase_add_test(tc, capture_defers_frees_of_older_memory);
    tcase_add_test(tc, capture_refusals_and_invalidation);
    tcase_add_test(tc, capture_across_streams);
    tcase_add_test(tc, releases_inside_a_capture_keep_it_valid);
    tcase_add_test(tc, release_mode_decides_the_pool_free);
    tcase_add_test(tc, legacy_stream_frees_wait_for_blocking_captures);
    tcase_add_test(tc, capture_an_executable);
    tcase_add_test(tc, conditional_while_runs_n_times);
    tcase_add_test(tc, conditional_needs_the_driver);
    tcase_add_test(tc, debug_dot);
    tcase_add_test(tc, wrong_handles_everywhere);
    tcase_add_test(tc, stream_host_func_on_a_stream);
    tcase_add_test(tc, stream_host_func_in_a_capture);
    tcase_add_test(tc, stream_host_func_captures_that_fail_or_are_not_ours);
    tcase_add_test(tc, threads_add_and_query);
    tcase_add_test(tc, allocation_failures_leave_nothing);
    tcase_add_test(tc, conditional_kernel_compiles_with_nvrtc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
