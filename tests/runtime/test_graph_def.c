/* Editing explicit graphs against the fake driver (tests/fixtures/fake_graph.h),
 * what cuda.core's GraphDefinition / GraphNode need from the C API (issue 24):
 * destroying nodes (edges go, later nodes are renumbered, the handle stays a
 * handle that names nothing), conditional nodes refused while their bodies are
 * held, memory allocation and free nodes (address, size, what they refuse),
 * and destroys racing queries on other threads. */
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"
#include "fake_graph.h"
#include "graph_testutil.h"
#include "runtime/graph.h"

static cuabi_device *dev, *dev1;
static cuabi_stream *stream;
static cuabi_memory_resource *pool;
static cuabi_objcode *code;
static cuabi_kernel *kern;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_kernel_implement("add", fake_impl_add_i64);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin",
             cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    ck_assert_ok(cuabi_device_get(&dev, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_create(&stream, dev, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(pool);
    cuabi_stream_release(stream);
    cuabi_device_release(dev1);
    cuabi_device_release(dev);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    graph_test_no_leaks();
}

static cuabi_buffer *ints(size_t n, int64_t first)
{
    return graph_test_ints(pool, stream, n, first);
}

static int64_t at(cuabi_buffer *b, size_t i)
{
    return *graph_test_slot(b, i);
}

static size_t node_count(cuabi_graph *g)
{
    size_t n;
    ck_assert_ok(cuabi_graph_node_count(&n, g));
    return n;
}

static size_t index_of(cuabi_graph_node *n)
{
    size_t i;
    ck_assert_ok(cuabi_graph_node_index(&i, n));
    return i;
}

static size_t deps_of(cuabi_graph_node *n)
{
    size_t c;
    ck_assert_ok(cuabi_graph_node_dependency_count(&c, n));
    return c;
}

static size_t dependents_of(cuabi_graph_node *n)
{
    size_t c;
    ck_assert_ok(cuabi_graph_node_dependent_count(&c, n));
    return c;
}

static int valid(cuabi_graph_node *n)
{
    int v = -1;
    ck_assert_ok(cuabi_graph_node_is_valid(&v, n));
    return v;
}

static void noop(void *payload)
{
    (void)payload;
}

static void run(cuabi_graph *g)
{
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    cuabi_graph_exec_release(e);
}

/* --------------------------------------------------------------- destroy */

START_TEST(destroy_removes_edges_and_renumbers)
{
    cuabi_graph *g;
    cuabi_graph_node *a, *b, *c, *d, *again;
    cuabi_buffer *out = ints(1, 5);
    ck_assert_ok(cuabi_graph_create(&g));
    /* a -> b -> c, a -> d; b sets out to 0 (a memset). */
    ck_assert_ok(cuabi_graph_add_empty(&a, g, NULL, 0));
    ck_assert_ok(cuabi_graph_add_memset(&b, g, &a, 1, out, 0, 0, 4, 2));
    ck_assert_ok(cuabi_graph_add_empty(&c, g, &b, 1));
    ck_assert_ok(cuabi_graph_add_empty(&d, g, &a, 1));
    ck_assert_int_eq(valid(b), 1);
    ck_assert_uint_eq(dependents_of(a), 2);
    ck_assert_ok(cuabi_graph_node_destroy(b));
    /* Gone from the graph and from the driver's edges; later nodes move down. */
    ck_assert_int_eq(valid(b), 0);
    ck_assert_int_eq(valid(c), 1);
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert_uint_eq(index_of(a), 0);
    ck_assert_uint_eq(index_of(c), 1);
    ck_assert_uint_eq(index_of(d), 2);
    ck_assert_uint_eq(deps_of(c), 0);
    ck_assert_uint_eq(dependents_of(a), 1);
    ck_assert_ok(cuabi_graph_node_at(&again, g, 1));
    ck_assert_ptr_eq(again, c);
    cuabi_graph_node_release(again);
    ck_assert_ok(cuabi_graph_node_dependent(&again, a, 0));
    ck_assert_ptr_eq(again, d);
    cuabi_graph_node_release(again);
    /* The destroyed handle names nothing: every call but release refuses it. */
    size_t idx;
    uintptr_t raw;
    cuabi_graph_node_kind kind;
    ck_assert_status(cuabi_graph_node_index(&idx, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("destroyed");
    ck_assert_status(cuabi_graph_node_type(&kind, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_node_raw(&raw, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_node_dependency_count(&idx, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_node_dependent(&again, b, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_empty(&again, g, &b, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("destroyed");
    cuabi_graph_node *from[1] = { a }, *to[1] = { b };
    ck_assert_status(cuabi_graph_add_dependencies(g, from, to, 1), CUABI_ERROR_INVALID_ARGUMENT);
    uintptr_t p;
    size_t size;
    ck_assert_status(cuabi_graph_node_mem_info(&p, &size, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_graph_node_destroy(b)); /* again: a no-op */
    /* The map of driver nodes was rebuilt: edges between the moved nodes work. */
    to[0] = c;
    ck_assert_ok(cuabi_graph_add_dependencies(g, from, to, 1));
    ck_assert_uint_eq(deps_of(c), 1);
    from[0] = c;
    to[0] = a;
    ck_assert_status(cuabi_graph_add_dependencies(g, from, to, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("cycle");
    /* The memset is gone: a run leaves out as it was. */
    run(g);
    ck_assert_int_eq(at(out, 0), 5);
    cuabi_graph_node_release(b);
    /* Destroying every node leaves an empty graph that still runs. */
    ck_assert_ok(cuabi_graph_node_destroy(d));
    ck_assert_ok(cuabi_graph_node_destroy(a));
    ck_assert_ok(cuabi_graph_node_destroy(c));
    ck_assert_uint_eq(node_count(g), 0);
    run(g);
    cuabi_graph_node_release(a);
    cuabi_graph_node_release(c);
    cuabi_graph_node_release(d);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(out);
    ck_assert_status(cuabi_graph_node_destroy(NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_node_is_valid(NULL, a), CUABI_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(destroy_keeps_what_executables_run)
{
    cuabi_graph *g;
    cuabi_graph_node *k, *copy;
    cuabi_buffer *out = ints(1, 0), *in = ints(2, 3), *back = ints(1, 0);
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, out));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, in));
    ck_assert_ok(cuabi_argpack_set_uint(p, 2, 2));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.device = dev;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_kernel(&k, g, NULL, 0, kern, p, &c));
    ck_assert_ok(cuabi_graph_add_memcpy(&copy, g, &k, 1, back, 0, out, 0, 8));
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    /* The kernel node goes from the graph; the executable still has it, and
     * the buffers it names stay alive (the graph keeps them) after the
     * caller lets them go. */
    ck_assert_ok(cuabi_graph_node_destroy(k));
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(in);
    ck_assert_status(cuabi_graph_exec_update_kernel(e, k, NULL, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_graph_exec_launch(e, stream));
    ck_assert_int_eq(at(out, 0), 7);
    ck_assert_int_eq(at(back, 0), 7);
    /* The graph without it: only the copy. */
    ck_assert_uint_eq(node_count(g), 1);
    ck_assert_uint_eq(index_of(copy), 0);
    ck_assert_uint_eq(deps_of(copy), 0);
    run(g);
    ck_assert_int_eq(at(out, 0), 7);
    cuabi_graph_exec_release(e);
    cuabi_graph_node_release(k);
    cuabi_graph_node_release(copy);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(out);
    cuabi_buffer_destroy(back);
}
END_TEST

START_TEST(destroy_conditional_waits_for_its_bodies)
{
    cuabi_graph *g, *body;
    cuabi_graph_node *before, *cond, *after, *inner;
    uint64_t handle;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_empty(&before, g, NULL, 0));
    ck_assert_ok(cuabi_graph_conditional_handle_create(&handle, g, dev, 0, 0));
    ck_assert_ok(cuabi_graph_add_conditional(&cond, g, &before, 1, handle,
                                             CUABI_GRAPH_CONDITIONAL_IF, 2));
    ck_assert_ok(cuabi_graph_add_empty(&after, g, &cond, 1));
    ck_assert_ok(cuabi_graph_node_body(&body, cond, 1));
    ck_assert_ok(cuabi_graph_add_empty(&inner, body, NULL, 0));
    /* A body handle (or a node in the body) is live: refused, nothing changes. */
    ck_assert_status(cuabi_graph_node_destroy(cond), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("body graph 1");
    ck_assert_int_eq(valid(cond), 1);
    cuabi_graph_release(body);
    ck_assert_status(cuabi_graph_node_destroy(cond), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_graph_node_release(inner);
    ck_assert_ok(cuabi_graph_node_destroy(cond));
    ck_assert_int_eq(valid(cond), 0);
    ck_assert_status(cuabi_graph_node_body(&body, cond, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(node_count(g), 2);
    ck_assert_uint_eq(index_of(after), 1);
    ck_assert_uint_eq(deps_of(after), 0);
    cuabi_graph_node_release(cond);
    cuabi_graph_node_release(before);
    cuabi_graph_node_release(after);
    cuabi_graph_release(g);
}
END_TEST

START_TEST(destroy_renumbers_body_graphs_of_later_conditionals)
{
    cuabi_graph *g, *body;
    cuabi_graph_node *first, *cond, *inner;
    uint64_t handle;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_empty(&first, g, NULL, 0));
    ck_assert_ok(cuabi_graph_conditional_handle_create(&handle, g, dev, 0, 0));
    ck_assert_ok(cuabi_graph_add_conditional(&cond, g, NULL, 0, handle,
                                             CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    ck_assert_ok(cuabi_graph_node_body(&body, cond, 0));
    ck_assert_ok(cuabi_graph_node_destroy(first));
    ck_assert_uint_eq(index_of(cond), 0);
    /* The body still finds its conditional: a host node names it in the refusal. */
    ck_assert_status(cuabi_graph_add_host(&inner, body, NULL, 0, noop, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("body of conditional node 0");
    ck_assert_ok(cuabi_graph_add_empty(&inner, body, NULL, 0));
    cuabi_graph_node_release(inner);
    /* Released in any order: the body after the node, the graph first. */
    cuabi_graph_release(g);
    cuabi_graph_node_release(first);
    cuabi_graph_node_release(cond);
    cuabi_graph_release(body);
}
END_TEST

/* ----------------------------------------------------------- memory nodes */

START_TEST(memory_nodes_allocate_and_free)
{
    cuabi_graph *g;
    cuabi_graph_node *alloc, *set, *copy, *fr;
    cuabi_buffer *back = ints(1, 0);
    ck_assert_ok(cuabi_graph_create(&g));
    cuabi_device *peers[1] = { dev1 };
    ck_assert_ok(cuabi_graph_add_mem_alloc(&alloc, g, NULL, 0, dev, CUABI_MEMORY_DEVICE, 64,
                                           peers, 1));
    uintptr_t ptr = 0, p2 = 0;
    size_t size = 0;
    ck_assert_ok(cuabi_graph_node_mem_info(&ptr, &size, alloc));
    ck_assert(ptr != 0);
    ck_assert_uint_eq(size, 64);
    cuabi_graph_node_kind kind;
    ck_assert_ok(cuabi_graph_node_type(&kind, alloc));
    ck_assert_int_eq(kind, CUABI_GRAPH_NODE_MEM_ALLOC);
    /* Work on the allocation: wrap the address (the graph owns the memory). */
    cuabi_buffer *mem;
    ck_assert_ok(cuabi_buffer_wrap(&mem, dev, CUABI_MEMORY_DEVICE, ptr, 64, NULL, NULL));
    ck_assert_ok(cuabi_graph_add_memset(&set, g, &alloc, 1, mem, 0, 0x01020304u, 4, 2));
    ck_assert_ok(cuabi_graph_add_memcpy(&copy, g, &set, 1, back, 0, mem, 0, 8));
    ck_assert_ok(cuabi_graph_add_mem_free(&fr, g, &copy, 1, ptr));
    ck_assert_ok(cuabi_graph_node_mem_info(&p2, &size, fr));
    ck_assert_uint_eq(p2, ptr);
    ck_assert_uint_eq(size, 0);
    ck_assert_ok(cuabi_graph_node_type(&kind, fr));
    ck_assert_int_eq(kind, CUABI_GRAPH_NODE_MEM_FREE);
    cuabi_device *d;
    ck_assert_ok(cuabi_graph_device(&d, g));
    ck_assert_ptr_eq(d, dev);
    run(g);
    ck_assert_int_eq(at(back, 0), (int64_t)UINT64_C(0x0102030401020304));
    /* CUDA keeps every node and edge of a graph with memory nodes. */
    ck_assert_status(cuabi_graph_node_destroy(set), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("memory allocation node (node 0)");
    int v = 0;
    ck_assert_ok(cuabi_graph_node_is_valid(&v, set));
    ck_assert_int_eq(v, 1);
    cuabi_graph_node *from[1] = { set }, *to[1] = { copy };
    ck_assert_int_ne(cuabi_graph_remove_dependencies(g, from, to, 1), CUABI_SUCCESS);
    ck_assert_uint_eq(node_count(g), 4);
    /* A second free of the allocation, and an address no allocation node returned. */
    cuabi_graph_node *bad = NULL;
    ck_assert_int_ne(cuabi_graph_add_mem_free(&bad, g, NULL, 0, ptr), CUABI_SUCCESS);
    uintptr_t bp;
    ck_assert_ok(cuabi_buffer_pointer(&bp, back));
    ck_assert_int_ne(cuabi_graph_add_mem_free(&bad, g, NULL, 0, bp), CUABI_SUCCESS);
    ck_assert_ptr_null(bad);
    ck_assert_uint_eq(node_count(g), 4);
    /* Other kinds have no memory to report. */
    ck_assert_status(cuabi_graph_node_mem_info(&p2, &size, set), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a memory allocation or free node");
    ck_assert_status(cuabi_graph_node_mem_info(NULL, &size, set), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_buffer_destroy(mem);
    cuabi_graph_node_release(alloc);
    cuabi_graph_node_release(set);
    cuabi_graph_node_release(copy);
    cuabi_graph_node_release(fr);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(back);
}
END_TEST

START_TEST(memory_nodes_refuse_bad_input)
{
    cuabi_graph *g, *child, *body;
    cuabi_graph_node *n = (cuabi_graph_node *)1, *cond;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, CUABI_MEMORY_HOST, 64, NULL,
                                               0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("plain host memory");
    ck_assert_ptr_null(n);
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, (cuabi_memory_kind)77, 64,
                                               NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, CUABI_MEMORY_DEVICE, 0, NULL,
                                               0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("size is 0");
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, NULL, CUABI_MEMORY_DEVICE, 8, NULL,
                                               0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, CUABI_MEMORY_DEVICE, 8, NULL,
                                               2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("peers is NULL");
    cuabi_device *twice[2] = { dev1, dev1 };
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, CUABI_MEMORY_DEVICE, 8, twice,
                                               2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("given twice");
    cuabi_device *bad[1] = { (cuabi_device *)stream };
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, CUABI_MEMORY_DEVICE, 8, bad,
                                               1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("peers[0]");
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, g, NULL, 0, dev, CUABI_MEMORY_DEVICE, 8, NULL,
                                               100), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_mem_free(&n, g, NULL, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("pointer is 0");
    ck_assert_uint_eq(node_count(g), 0);
    ck_assert_int_eq(fake_live_allocs, 0);
    /* Not in conditional bodies. */
    uint64_t handle;
    ck_assert_ok(cuabi_graph_conditional_handle_create(&handle, g, dev, 0, 0));
    ck_assert_ok(cuabi_graph_add_conditional(&cond, g, NULL, 0, handle,
                                             CUABI_GRAPH_CONDITIONAL_IF, 1));
    ck_assert_ok(cuabi_graph_node_body(&body, cond, 0));
    ck_assert_status(cuabi_graph_add_mem_alloc(&n, body, NULL, 0, dev, CUABI_MEMORY_DEVICE, 8,
                                               NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("body of conditional node");
    ck_assert_status(cuabi_graph_add_mem_free(&n, body, NULL, 0, 4096),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("body of conditional node");
    cuabi_graph_release(body);
    cuabi_graph_node_release(cond);
    /* A graph with memory nodes cannot be a child graph (the driver refuses). */
    cuabi_graph_node *a, *c;
    ck_assert_ok(cuabi_graph_create(&child));
    ck_assert_ok(cuabi_graph_add_mem_alloc(&a, child, NULL, 0, dev, CUABI_MEMORY_MANAGED, 16, NULL,
                                           0));
    ck_assert_int_ne(cuabi_graph_add_child(&c, g, NULL, 0, child), CUABI_SUCCESS);
    ck_assert_error_mentions("cuGraphAddChildGraphNode");
    ck_assert_uint_eq(node_count(g), 1);
    /* Pinned memory: the fake puts it on the host. */
    cuabi_graph_node *pinned;
    ck_assert_ok(cuabi_graph_add_mem_alloc(&pinned, child, &a, 1, dev, CUABI_MEMORY_PINNED, 16,
                                           NULL, 0));
    ck_assert_uint_eq(fake_live_allocs, 2);
    cuabi_graph_node_release(pinned);
    cuabi_graph_node_release(a);
    cuabi_graph_release(child);
    cuabi_graph_release(g);
}
END_TEST

/* ------------------------------------------------ copies and memsets by address */

START_TEST(copies_and_memsets_by_address)
{
    cuabi_graph *g;
    cuabi_graph_node *set, *copy, *up, *n = NULL;
    cuabi_buffer *a = ints(8, 0), *b = ints(8, 100);
    uintptr_t pa, pb;
    ck_assert_ok(cuabi_buffer_pointer(&pa, a));
    ck_assert_ok(cuabi_buffer_pointer(&pb, b));
    static int64_t host[2] = { 41, 42 };
    ck_assert_ok(cuabi_graph_create(&g));
    /* 3 rows of 2 u32 elements, 16 bytes apart: words 0,1 4,5 8,9 of a set. */
    ck_assert_ok(cuabi_graph_add_memset_ptr(&set, g, NULL, 0, dev, pa, a, 7, 4, 2, 3, 16));
    ck_assert_ok(cuabi_graph_add_memcpy_ptr(&copy, g, &set, 1, dev, pb, b, pa, a, 64));
    ck_assert_ok(cuabi_graph_add_memcpy_ptr(&up, g, &copy, 1, dev, pb + 56, NULL,
                                            (uintptr_t)host, NULL, 8));
    ck_assert_status(cuabi_graph_add_memcpy_ptr(&n, g, NULL, 0, dev, pb, (cuabi_buffer *)g, pa,
                                                NULL, 8), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("dst_keep");
    run(g);
    const uint32_t *w = (const uint32_t *)pb;
    for (int i = 0; i < 14; i++)   /* words 14, 15: the host copy */
        ck_assert_uint_eq(w[i], ((const uint32_t *)pa)[i]);
    for (int i = 0; i < 12; i++)
        ck_assert_uint_eq(w[i] == 7u, (i % 4) < 2);
    ck_assert_int_eq(at(b, 7), 41);
    ck_assert_int_eq(at(a, 7), 7); /* untouched by the memset: ints(8, 0)[7] */
    /* Refusals, each naming the problem; nothing is added. */
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, pa, NULL, 7, 3, 2, 1, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("1, 2 or 4");
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, pa, NULL, 256, 1, 2, 1, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not fit");
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, 0, NULL, 1, 1, 2, 1, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, pa, NULL, 1, 1, 0, 1, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("width is 0");
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, pa, NULL, 1, 4, 4, 2, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("pitch 8 is less than a row");
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, pa, NULL, 1, 4, 4, SIZE_MAX,
                                                SIZE_MAX / 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("too large");
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, dev, pa, NULL, 1, 4, SIZE_MAX, 1,
                                                0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_graph_add_memset_ptr(&n, g, NULL, 0, NULL, pa, NULL, 1, 1, 1, 1, 0),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_graph_add_memcpy_ptr(&n, g, NULL, 0, dev, pa, NULL, pb, NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("size is 0");
    ck_assert_status(cuabi_graph_add_memcpy_ptr(&n, g, NULL, 0, dev, 0, NULL, pb, NULL, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("destination address is 0");
    ck_assert_status(cuabi_graph_add_memcpy_ptr(&n, g, NULL, 0, dev, UINTPTR_MAX - 3, NULL, pb,
                                                NULL, 8),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("wrap");
    ck_assert_status(cuabi_graph_add_memcpy_ptr(&n, g, NULL, 0, (cuabi_device *)a, pa, NULL, pb,
                                                NULL, 8),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ptr_null(n);
    ck_assert_uint_eq(node_count(g), 3);
    cuabi_graph_node_kind kind;
    ck_assert_ok(cuabi_graph_node_type(&kind, set));
    ck_assert_int_eq(kind, CUABI_GRAPH_NODE_MEMSET);
    cuabi_graph_node_release(set);
    cuabi_graph_node_release(copy);
    cuabi_graph_node_release(up);
    cuabi_graph_release(g);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
}
END_TEST

/* ---------------------------------------------------------------- threads */

struct race {
    cuabi_graph *g;
    cuabi_graph_node **nodes;
    size_t n;
};

static void *destroy_all(void *arg)
{
    struct race *r = arg;
    for (size_t i = 0; i < r->n; i += 2)
        ck_assert_ok(cuabi_graph_node_destroy(r->nodes[i]));
    return NULL;
}

START_TEST(destroy_races_queries)
{
    enum { N = 200 };
    cuabi_graph *g;
    static cuabi_graph_node *nodes[N];
    ck_assert_ok(cuabi_graph_create(&g));
    for (size_t i = 0; i < N; i++)
        ck_assert_ok(cuabi_graph_add_empty(&nodes[i], g, i ? &nodes[i - 1] : NULL, i ? 1 : 0));
    struct race r = { g, nodes, N };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, destroy_all, &r), 0);
    /* Meanwhile: the odd nodes' queries give answers or "destroyed", never a crash. */
    for (int round = 0; round < 20; round++)
        for (size_t i = 1; i < N; i += 2) {
            size_t c, idx;
            ck_assert_ok(cuabi_graph_node_dependency_count(&c, nodes[i]));
            ck_assert_ok(cuabi_graph_node_index(&idx, nodes[i]));
            ck_assert_uint_le(idx, i);
            ck_assert_ok(cuabi_graph_node_count(&c, g));
        }
    pthread_join(t, NULL);
    ck_assert_uint_eq(node_count(g), N / 2);
    for (size_t i = 1; i < N; i += 2) {
        ck_assert_uint_eq(index_of(nodes[i]), i / 2);
        ck_assert_uint_eq(deps_of(nodes[i]), 0);
    }
    for (size_t i = 0; i < N; i++)
        cuabi_graph_node_release(nodes[i]);
    cuabi_graph_release(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("graph_def");
    TCase *tc = tcase_create("graph_def");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, destroy_removes_edges_and_renumbers);
    tcase_add_test(tc, destroy_keeps_what_executables_run);
    tcase_add_test(tc, destroy_conditional_waits_for_its_bodies);
    tcase_add_test(tc, destroy_renumbers_body_graphs_of_later_conditionals);
    tcase_add_test(tc, memory_nodes_allocate_and_free);
    tcase_add_test(tc, memory_nodes_refuse_bad_input);
    tcase_add_test(tc, copies_and_memsets_by_address);
    tcase_add_test(tc, destroy_races_queries);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
