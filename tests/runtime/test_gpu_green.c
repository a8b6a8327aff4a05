/* Green contexts on the local GPU: the partition rules the driver reports
 * and how splits round (printed as a table); work on a green stream runs on
 * the partition's SMs only (%smid per block) through every launch path
 * (one-shot, prepared, launch attributes, cooperative, a graph captured on
 * the green stream), two green contexts of one split use disjoint SMs;
 * lifetimes in any order; events and synchronize; and the occupancy of
 * several kernels on several partitions: offline (the partition's SM count
 * given) equal to live (asked in the green context), block counts, min
 * grid sizes and waves. Exits 77 without a GPU; CUDA_ERROR_NOT_SUPPORTED
 * (a GPU without green contexts) skips too, saying so. */
#include <pthread.h>
#include <stdbool.h>

#include "testutil.h"

#include <cuda.h>

static const char source[] =
    "extern \"C\" __global__ void smid(unsigned *out, long long spin) {\n"
    "  unsigned s;\n"
    "  asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(s));\n"
    "  long long t0 = clock64();\n"
    "  while (clock64() - t0 < spin) { }\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = s + 1;\n"
    "}\n"
    "template <int R, int S>\n"
    "__global__ void work(float *o, const float *in, int n) {\n"
    "  __shared__ float sh[S / 4 > 0 ? S / 4 : 1];\n"
    "  float acc[R];\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < R; r++) acc[r] = in[(threadIdx.x * R + r) % n];\n"
    "  sh[threadIdx.x % (S / 4 > 0 ? S / 4 : 1)] = acc[0];\n"
    "  __syncthreads();\n"
    "  float t = sh[(threadIdx.x + 1) % (S / 4 > 0 ? S / 4 : 1)];\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < R; r++) acc[r] = acc[r] * acc[(r + 1) % R] + t;\n"
    "  float s = 0;\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < R; r++) s += acc[r];\n"
    "  o[blockIdx.x * blockDim.x + threadIdx.x] = s;\n"
    "}\n";

static const char *exprs[] = { "work<2, 0>", "work<24, 8192>", "work<64, 20000>",
                                     "work<96, 40000>" };
#define NEXPRS (sizeof exprs / sizeof exprs[0])

static cuabi_device *dev;
static cuabi_objcode *code;
static cuabi_kernel *k_smid, *k_work[NEXPRS];
static cuabi_memory_resource *pool;
static int sms, min_part, align;
static char arch[16];

/* The device's SM resource, or a skip when the driver has no green
 * contexts here. */
static cuabi_sm_resource *device_sms(void)
{
    cuabi_sm_resource *all;
    cuabi_status st = cuabi_device_sm_resource(&all, dev);
    if (st == CUABI_ERROR_NOT_SUPPORTED || st == CUABI_ERROR_ENTRY_POINT_NOT_FOUND) {
        printf("SKIP: no green contexts here: %s\n", cuabi_last_error()->message);
        exit(77);
    }
    ck_assert_ok(st);
    return all;
}

static cuabi_sm_resource_info info_of(cuabi_sm_resource *r)
{
    cuabi_sm_resource_info i = CUABI_SM_RESOURCE_INFO_INIT;
    ck_assert_ok(cuabi_sm_resource_get_info(&i, r));
    return i;
}

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    int major, minor;
    ck_assert_ok(cuabi_device_attribute(&major, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    ck_assert_ok(cuabi_device_attribute(&minor, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    ck_assert_ok(cuabi_device_attribute(&sms, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    cuabi_program *p;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = arch;
    o.name_expressions = exprs;
    o.num_name_expressions = NEXPRS;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "green.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, &o));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k_smid, code, "smid"));
    for (size_t e = 0; e < NEXPRS; e++)
        ck_assert_ok(cuabi_objcode_get_kernel(&k_work[e], code, exprs[e]));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev));
    cuabi_sm_resource *all = device_sms();
    cuabi_sm_resource_info i = info_of(all);
    min_part = i.min_partition_size;
    align = i.coscheduled_alignment;
    cuabi_sm_resource_release(all);
}

static void teardown(void)
{
    cuabi_memory_resource_release(pool);
    for (size_t e = 0; e < NEXPRS; e++)
        cuabi_kernel_release(k_work[e]);
    cuabi_kernel_release(k_smid);
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
}

/* Up to `want` groups of at least `min` SMs (and the remainder if asked). */
static size_t split(cuabi_sm_resource **g, size_t want, cuabi_sm_resource **rem, unsigned min,
                    unsigned flags)
{
    cuabi_sm_resource *all = device_sms();
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    o.min_count = min;
    o.flags = flags;
    size_t n = want;
    ck_assert_ok(cuabi_sm_resource_split(g, &n, rem, all, &o));
    cuabi_sm_resource_release(all);
    return n;
}

static cuabi_green_ctx *green_of(cuabi_sm_resource *r)
{
    cuabi_green_ctx *g;
    ck_assert_ok(cuabi_green_ctx_create(&g, dev, &r, 1));
    return g;
}

/* ------------------------------------------------------------ the rules */

START_TEST(partition_rules_as_the_driver_reports_them)
{
    printf("%s, %d SMs: minimum partition %d, co-scheduling alignment %d\n", arch, sms, min_part,
           align);
    ck_assert_int_gt(min_part, 0);
    ck_assert_int_gt(align, 0);
    cuabi_sm_resource *all = device_sms();
    ck_assert_int_eq(info_of(all).sm_count, sms);
    unsigned asks[] = { 0, 1, (unsigned)min_part - 1, (unsigned)min_part, (unsigned)min_part + 1,
                        10, 16, 17, 24, 32, (unsigned)sms / 2, (unsigned)sms - 1, (unsigned)sms };
    for (int f = 0; f < 2; f++) {
        unsigned flags = f ? CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING : 0;
        printf("%s\n  %-6s %-7s %-6s %-9s\n", f ? "ignoring co-scheduling:" : "default:", "ask",
               "groups", "each", "remainder");
        unsigned smallest = (unsigned)sms;
        for (size_t a = 0; a < sizeof asks / sizeof asks[0]; a++) {
            cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
            o.min_count = asks[a];
            o.flags = flags;
            size_t n = 0;
            ck_assert_ok(cuabi_sm_resource_split(NULL, &n, NULL, all, &o));
            ck_assert_uint_ge(n, 1);
            cuabi_sm_resource *g[256], *rem = NULL;
            size_t made = n < 256 ? n : 256;
            ck_assert_ok(cuabi_sm_resource_split(g, &made, &rem, all, &o));
            ck_assert_uint_eq(made, n < 256 ? n : 256);
            int each = info_of(g[0]).sm_count, left = rem ? info_of(rem).sm_count : 0;
            printf("  %-6u %-7zu %-6d %-9d\n", asks[a], made, each, left);
            ck_assert_int_ge(each, (int)asks[a]);
            for (size_t i = 0; i < made; i++) {
                cuabi_sm_resource_info gi = info_of(g[i]);
                ck_assert_int_eq(gi.sm_count, each);          /* symmetrical groups */
                ck_assert_int_eq(gi.index, (int)i);
                ck_assert_int_eq(gi.kind, CUABI_SM_RESOURCE_GROUP);
                cuabi_sm_resource_release(g[i]);
            }
            ck_assert_int_eq((int)made * each + left, sms);    /* nothing lost */
            if (!f && each != sms)                             /* aligned, or the whole GPU */
                ck_assert_int_eq(each % align, 0);
            if (!f)
                ck_assert_int_ge(each, min_part);
            if (rem)
                cuabi_sm_resource_release(rem);
            if ((unsigned)each < smallest)
                smallest = (unsigned)each;
        }
        printf("  smallest group: %u SMs\n", smallest);
        if (!f)
            ck_assert_int_eq((int)smallest, min_part);
        else
            ck_assert_int_le((int)smallest, min_part);
    }
    cuabi_sm_resource_release(all);
}
END_TEST

/* ------------------------------------------------------------ launches */

/* Distinct SMs the last smid launch ran on (and that every block ran). */
static int distinct_sms(cuabi_buffer *out, unsigned blocks, unsigned *ids)
{
    unsigned *h = calloc(blocks, sizeof *h);
    ck_assert_ok(cuabi_buffer_copy_to_host(h, out, 0, blocks * sizeof *h, NULL));
    char seen[4096] = { 0 };
    int n = 0;
    for (unsigned b = 0; b < blocks; b++) {
        ck_assert_msg(h[b] != 0, "block %u did not run", b);
        unsigned s = h[b] - 1;
        ck_assert_uint_lt(s, 4096);
        if (!seen[s]) {
            seen[s] = 1;
            if (ids)
                ids[n] = s;
            n++;
        }
    }
    free(h);
    return n;
}

static void zero(cuabi_buffer *b, size_t bytes)
{
    void *z = calloc(1, bytes);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, z, bytes, NULL));
    /* a copy from pageable memory may return before its DMA lands, and
     * green streams do not wait for the legacy stream: wait here */
    ck_assert_ok(cuabi_device_synchronize(dev));
    free(z);
}

START_TEST(work_runs_on_the_partition_through_every_path)
{
    cuabi_sm_resource *g[2];
    ck_assert_uint_eq(split(g, 2, NULL, 16, 0), 2);
    cuabi_green_ctx *green = green_of(g[0]), *other = green_of(g[1]);
    int part = 0;
    ck_assert_ok(cuabi_green_ctx_sm_count(&part, green));
    ck_assert_int_eq(part, info_of(g[0]).sm_count);
    cuabi_stream *s, *s2, *plain;
    ck_assert_ok(cuabi_green_ctx_stream_create(&s, green, NULL));
    ck_assert_ok(cuabi_green_ctx_stream_create(&s2, other, NULL));
    ck_assert_ok(cuabi_stream_create(&plain, dev, NULL));
    unsigned blocks = 8u * (unsigned)sms;
    cuabi_buffer *out;
    ck_assert_ok(cuabi_buffer_allocate(&out, pool, blocks * 4, 0, NULL));
    cuabi_argpack *pack;
    ck_assert_ok(cuabi_argpack_create(&pack, "buffer, i64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pack, 0, out));
    ck_assert_ok(cuabi_argpack_set_int(pack, 1, 20000));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = blocks;
    c.block[0] = 128;
    c.stream = s;
    int n;
    /* the whole device first: the kernel spreads */
    c.stream = plain;
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_stream_synchronize(plain));
    n = distinct_sms(out, blocks, NULL);
    printf("whole device: %d SMs\n", n);
    ck_assert_int_gt(n, part);
    c.stream = s;
    /* one-shot */
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_stream_synchronize(s));
    n = distinct_sms(out, blocks, NULL);
    printf("cuabi_launch on %d SMs: ran on %d\n", part, n);
    ck_assert_int_le(n, part);
    ck_assert_int_ge(n, part / 2);
    /* prepared */
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, k_smid, pack, &c));
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_ok(cuabi_stream_synchronize(s));
    n = distinct_sms(out, blocks, NULL);
    printf("prepared: %d\n", n);
    ck_assert_int_le(n, part);
    /* launch attributes (cuLaunchKernelEx) */
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.priority = 0;
    c.attributes = &a;
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_stream_synchronize(s));
    n = distinct_sms(out, blocks, NULL);
    printf("with launch attributes: %d\n", n);
    ck_assert_int_le(n, part);
    c.attributes = NULL;
    /* cooperative: the whole grid resident on the partition */
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
    ck_assert_ok(cuabi_occupancy_green_max_active_blocks(&r, k_smid, green, 128, 0));
    cuabi_launch_config cc = c;
    cc.cooperative = 1;
    cc.grid[0] = (unsigned)(r.active_blocks_per_sm * part);
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &cc));
    ck_assert_ok(cuabi_stream_synchronize(s));
    n = distinct_sms(out, cc.grid[0], NULL);
    printf("cooperative grid of %u: %d\n", cc.grid[0], n);
    ck_assert_int_le(n, part);
    cc.grid[0]++;
    ck_assert_status(cuabi_launch_check(k_smid, pack, &cc), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("green context");
    /* a graph captured on the green stream, replayed on it and on a plain
     * stream: its kernels stay on the partition (the driver keeps the
     * context they were captured in) */
    cuabi_graph *graph;
    cuabi_graph_exec *e;
    ck_assert_ok(cuabi_graph_capture_begin(s, CUABI_CAPTURE_MODE_GLOBAL));
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_graph_capture_end(&graph, s));
    ck_assert_ok(cuabi_graph_instantiate(&e, graph, NULL));
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_graph_exec_launch(e, s));
    ck_assert_ok(cuabi_stream_synchronize(s));
    n = distinct_sms(out, blocks, NULL);
    printf("captured on the green stream, replayed there: %d\n", n);
    ck_assert_int_le(n, part);
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_graph_exec_launch(e, plain));
    ck_assert_ok(cuabi_stream_synchronize(plain));
    n = distinct_sms(out, blocks, NULL);
    printf("... replayed on a plain stream: %d\n", n);
    ck_assert_int_le(n, part);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(graph);
    /* two green contexts of one split: disjoint SMs */
    unsigned ids0[4096], ids1[4096];
    cuabi_buffer *out2;
    ck_assert_ok(cuabi_buffer_allocate(&out2, pool, blocks * 4, 0, NULL));
    cuabi_argpack *pack2;
    ck_assert_ok(cuabi_argpack_create(&pack2, "buffer, i64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pack2, 0, out2));
    ck_assert_ok(cuabi_argpack_set_int(pack2, 1, 20000));
    cuabi_launch_config c2 = c;
    c2.stream = s2;
    zero(out, blocks * 4);
    zero(out2, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_launch(k_smid, pack2, &c2));
    ck_assert_ok(cuabi_green_ctx_synchronize(green));
    ck_assert_ok(cuabi_green_ctx_synchronize(other));
    int n0 = distinct_sms(out, blocks, ids0), n1 = distinct_sms(out2, blocks, ids1);
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < n1; j++)
            ck_assert_msg(ids0[i] != ids1[j], "SM %u ran work of both green contexts", ids0[i]);
    printf("two green contexts of one split: %d and %d SMs, disjoint\n", n0, n1);
    cuabi_argpack_release(pack2);
    cuabi_buffer_destroy(out2);
    /* lifetimes in any order: the green context goes before its stream */
    cuabi_prepared_release(pl);
    cuabi_green_ctx_release(green);
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_stream_synchronize(s));
    ck_assert_int_le(distinct_sms(out, blocks, NULL), part);
    cuabi_stream_release(s);
    cuabi_stream_release(s2);
    cuabi_stream_release(plain);
    cuabi_green_ctx_release(other);
    cuabi_argpack_release(pack);
    cuabi_buffer_destroy(out);
    cuabi_sm_resource_release(g[0]);
    cuabi_sm_resource_release(g[1]);
}
END_TEST

/* CUDA 13.1's workqueue configurations: on an older driver every call says
 * NOT_SUPPORTED naming 13.1 (and nothing is made); on 13.1+ the device's
 * limit is the driver's cap (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), a
 * green context made with limit 2 and the balanced scope reads them back,
 * and its stream runs work on the partition. */
START_TEST(workqueue_configurations)
{
    int drv = 0;
    cuabi_runtime_info ri = CUABI_RUNTIME_INFO_INIT;
    if (cuabi_runtime_info_get(&ri) == CUABI_SUCCESS)
        drv = ri.driver_version;
    cuabi_workqueue_config wq = CUABI_WORKQUEUE_CONFIG_INIT;
    cuabi_status st = cuabi_device_workqueue_config(&wq, dev);
    cuabi_sm_resource *g[1];
    ck_assert_uint_eq(split(g, 1, NULL, 16, 0), 1);
    cuabi_workqueue_config want = CUABI_WORKQUEUE_CONFIG_INIT;
    want.concurrency_limit = 2;
    want.sharing_scope = CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED;
    cuabi_green_ctx *green = NULL;
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        printf("driver %d: no workqueue resources: %s\n", drv, cuabi_last_error()->message);
        ck_assert_msg(drv == 0 || drv < 13010, "driver %d (13.1+) refused: %s", drv,
                      cuabi_last_error()->message);
        ck_assert_ptr_nonnull(strstr(cuabi_last_error()->message, "CUDA 13.1"));
        ck_assert_status(cuabi_green_ctx_create_with_workqueue(&green, dev, g, 1, &want),
                         CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_ptr_null(green);
        cuabi_sm_resource_release(g[0]);
        return;
    }
    ck_assert_ok(st);
    printf("driver %d: device workqueue limit %u, scope %d\n", drv, wq.concurrency_limit,
           (int)wq.sharing_scope);
    ck_assert_uint_ge(wq.concurrency_limit, 1);
    ck_assert_uint_le(wq.concurrency_limit, 128);
    ck_assert_int_eq(wq.ordinal, cuabi_test_device_ordinal());
    ck_assert_ok(cuabi_green_ctx_create_with_workqueue(&green, dev, g, 1, &want));
    cuabi_workqueue_config got = CUABI_WORKQUEUE_CONFIG_INIT;
    ck_assert_ok(cuabi_green_ctx_workqueue_config(&got, green));
    printf("green context: workqueue limit %u, scope %d\n", got.concurrency_limit,
           (int)got.sharing_scope);
    ck_assert_uint_eq(got.concurrency_limit, 2);
    ck_assert_int_eq(got.sharing_scope, CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED);
    int part = 0;
    ck_assert_ok(cuabi_green_ctx_sm_count(&part, green));
    ck_assert_int_eq(part, info_of(g[0]).sm_count);
    /* its stream runs work on the partition */
    cuabi_stream *s;
    ck_assert_ok(cuabi_green_ctx_stream_create(&s, green, NULL));
    unsigned blocks = 8u * (unsigned)sms;
    cuabi_buffer *out;
    ck_assert_ok(cuabi_buffer_allocate(&out, pool, blocks * 4, 0, NULL));
    cuabi_argpack *pack;
    ck_assert_ok(cuabi_argpack_create(&pack, "buffer, i64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pack, 0, out));
    ck_assert_ok(cuabi_argpack_set_int(pack, 1, 20000));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = blocks;
    c.block[0] = 128;
    c.stream = s;
    zero(out, blocks * 4);
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    ck_assert_ok(cuabi_stream_synchronize(s));
    int n = distinct_sms(out, blocks, NULL);
    printf("green context with a workqueue configuration: %d SMs of %d\n", n, part);
    ck_assert_int_le(n, part);
    cuabi_argpack_release(pack);
    cuabi_buffer_destroy(out);
    cuabi_stream_release(s);
    cuabi_green_ctx_release(green);
    cuabi_sm_resource_release(g[0]);
}
END_TEST

/* One green context of one group, a stream on it, a plain stream and a
 * buffer for the spinning kernel: what the event tests share. */
typedef struct {
    cuabi_sm_resource *group;
    cuabi_green_ctx *green;
    cuabi_stream *gs, *plain;
    cuabi_buffer *out;
} green_pair;

static void green_pair_make(green_pair *p)
{
    cuabi_sm_resource *g[1];
    ck_assert_uint_eq(split(g, 1, NULL, 0, 0), 1);
    p->group = g[0];
    p->green = green_of(g[0]);
    ck_assert_ok(cuabi_green_ctx_stream_create(&p->gs, p->green, NULL));
    ck_assert_ok(cuabi_stream_create(&p->plain, dev, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&p->out, pool, 4096, 0, NULL));
}

static void green_pair_release(green_pair *p)
{
    cuabi_buffer_destroy(p->out);
    cuabi_stream_release(p->plain);
    cuabi_stream_release(p->gs);
    cuabi_green_ctx_release(p->green);
    cuabi_sm_resource_release(p->group);
}

/* k_smid spinning ~25 ms on `s` (8 blocks). */
static void launch_spin(cuabi_stream *s, cuabi_buffer *out)
{
    cuabi_argpack *pack;
    ck_assert_ok(cuabi_argpack_create(&pack, "buffer, i64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pack, 0, out));
    ck_assert_ok(cuabi_argpack_set_int(pack, 1, 50000000));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 8;
    c.block[0] = 32;
    c.stream = s;
    ck_assert_ok(cuabi_launch(k_smid, pack, &c));
    cuabi_argpack_release(pack);     /* the launch copied the arguments */
}

START_TEST(events_and_synchronize)
{
    green_pair p;
    green_pair_make(&p);
    launch_spin(p.gs, p.out);
    cuabi_event *e;
    ck_assert_ok(cuabi_event_create(&e, dev, NULL));
    ck_assert_ok(cuabi_green_ctx_record_event(p.green, e));
    ck_assert_ok(cuabi_stream_wait_event(p.plain, e));
    int done = 1;
    ck_assert_ok(cuabi_event_query(&done, e));
    ck_assert_int_eq(done, 0);   /* the kernel still spins */
    ck_assert_ok(cuabi_green_ctx_synchronize(p.green));
    ck_assert_ok(cuabi_event_query(&done, e));
    ck_assert_int_eq(done, 1);
    ck_assert_ok(cuabi_green_ctx_wait_event(p.green, e));
    ck_assert_ok(cuabi_stream_synchronize(p.plain));
    cuabi_event_release(e);
    green_pair_release(&p);
}
END_TEST

/* A plain stream and a green context's stream wait for each other through
 * cuabi_stream_wait_stream (the primary context's ordering event recorded on
 * the green stream) and through cuabi_event_record of a device event on the
 * green stream: work queued after each wait does not end before the
 * spinning kernel it waits for. */
static void spin_then_wait(cuabi_stream *spinning, cuabi_stream *waiting, cuabi_buffer *out,
                           bool through_event)
{
    launch_spin(spinning, out);
    cuabi_event *e, *after;
    ck_assert_ok(cuabi_event_create(&e, dev, NULL));
    ck_assert_ok(cuabi_event_create(&after, dev, NULL));
    if (through_event) {
        ck_assert_ok(cuabi_event_record(e, spinning));
        ck_assert_ok(cuabi_stream_wait_event(waiting, e));
    } else {
        ck_assert_ok(cuabi_stream_wait_stream(waiting, spinning));
    }
    ck_assert_ok(cuabi_event_record(after, waiting));
    int done = 1;
    ck_assert_ok(cuabi_event_query(&done, after));
    ck_assert_int_eq(done, 0);   /* behind the kernel that still spins */
    ck_assert_ok(cuabi_stream_synchronize(waiting));
    ck_assert_ok(cuabi_stream_query(&done, spinning));
    ck_assert_int_eq(done, 1);   /* the wait ended with the kernel */
    cuabi_event_release(after);
    cuabi_event_release(e);
}

START_TEST(plain_and_green_streams_wait_for_each_other)
{
    green_pair p;
    green_pair_make(&p);
    spin_then_wait(p.gs, p.plain, p.out, false);
    spin_then_wait(p.plain, p.gs, p.out, false);
    spin_then_wait(p.gs, p.plain, p.out, true);
    spin_then_wait(p.plain, p.gs, p.out, true);
    green_pair_release(&p);
}
END_TEST

/* ------------------------------------------------------------ occupancy */

START_TEST(offline_equals_live_per_partition)
{
    /* partitions: the smallest, 2x, 3x, a big one, the remainder of it */
    unsigned mins[] = { 0, 2u * (unsigned)min_part, 3u * (unsigned)min_part, (unsigned)sms / 2 };
    int cases = 0, mismatches = 0;
    for (size_t m = 0; m <= sizeof mins / sizeof mins[0]; m++) {
        cuabi_sm_resource *g[1], *rem = NULL;
        bool remainder = m == sizeof mins / sizeof mins[0];
        ck_assert_uint_eq(split(g, 1, &rem, remainder ? mins[m - 1] : mins[m], 0), 1);
        cuabi_green_ctx *green = green_of(remainder ? rem : g[0]);
        int part;
        ck_assert_ok(cuabi_green_ctx_sm_count(&part, green));
        for (size_t e = 0; e < NEXPRS; e++) {
            cuabi_kernel_resources res = CUABI_KERNEL_RESOURCES_INIT;
            ck_assert_ok(cuabi_kernel_get_resources(&res, k_work[e]));
            cuabi_occupancy_options opt = CUABI_OCCUPANCY_OPTIONS_INIT;
            opt.sm_count = part;
            /* min grid size: the driver counts the partition */
            int lb, lg, ob, og;
            ck_assert_ok(cuabi_occupancy_green_max_potential_block_size(&lb, &lg, k_work[e], green,
                                                                        NULL, NULL, 0, 0));
            ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(&ob, &og, arch, &res,
                                                                          NULL, NULL, 0, 0, &opt));
            cases++;
            if (lb != ob || lg != og) {
                mismatches++;
                printf("MISMATCH %s on %d SMs: best block live %d/%d, offline %d/%d\n", exprs[e],
                       part, lb, lg, ob, og);
            }
            int wb, wg;   /* the whole device's min grid, for the record */
            ck_assert_ok(cuabi_occupancy_max_potential_block_size(&wb, &wg, k_work[e], dev, NULL,
                                                                  NULL, 0, 0));
            if (e == 0)
                printf("%d SMs: min grid %d (whole device %d)\n", part, lg, wg);
            ck_assert_int_eq(lg * sms, wg * part);   /* per partition, not per device */
            /* blocks per SM and waves for several grids and block sizes */
            static const int blocks[] = { 32, 128, 256, 1024 };
            static const uint64_t grids[] = { 1, 1000, 12345, 1u << 20 };
            for (size_t b = 0; b < 4; b++)
                for (size_t gi = 0; gi < 4; gi++) {
                    cuabi_grid_waves lw = CUABI_GRID_WAVES_INIT, ow = CUABI_GRID_WAVES_INIT;
                    cuabi_status ls = cuabi_occupancy_green_waves(&lw, k_work[e], green, blocks[b],
                                                                  0, grids[gi]);
                    cuabi_status os = cuabi_occupancy_offline_waves(&ow, arch, &res, part,
                                                                    blocks[b], 0, grids[gi], NULL);
                    cuabi_error_clear();
                    cases++;
                    if (ls != os || lw.waves != ow.waves || lw.blocks_per_sm != ow.blocks_per_sm ||
                        lw.sm_count != ow.sm_count) {
                        mismatches++;
                        printf("MISMATCH %s on %d SMs, block %d, grid %llu: live %d/SM %llu "
                               "waves (%s), offline %d/SM %llu waves (%s)\n", exprs[e], part,
                               blocks[b], (unsigned long long)grids[gi], lw.blocks_per_sm,
                               (unsigned long long)lw.waves, cuabi_status_name(ls),
                               ow.blocks_per_sm, (unsigned long long)ow.waves,
                               cuabi_status_name(os));
                    }
                }
            if (e == 1) {
                cuabi_grid_waves w = CUABI_GRID_WAVES_INIT;
                ck_assert_ok(cuabi_occupancy_green_waves(&w, k_work[e], green, 256, 0, 1000));
                printf("a 1,000-block grid of %s (256 threads) takes %llu waves on %d SMs "
                       "(%d blocks per SM)\n", exprs[e], (unsigned long long)w.waves, part,
                       w.blocks_per_sm);
            }
        }
        cuabi_green_ctx_release(green);
        cuabi_sm_resource_release(g[0]);
        if (rem)
            cuabi_sm_resource_release(rem);
    }
    printf("%d cases, %d mismatches\n", cases, mismatches);
    ck_assert_int_eq(mismatches, 0);
}
END_TEST

/* ------------------------------------------------------------ threads */

static cuabi_green_ctx *shared;
static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        int b, g;
        if (cuabi_green_ctx_synchronize(shared) != CUABI_SUCCESS ||
            cuabi_occupancy_green_max_potential_block_size(&b, &g, k_work[0], shared, NULL, NULL,
                                                           0, 0) != CUABI_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

START_TEST(from_several_threads)
{
    cuabi_sm_resource *g[1];
    ck_assert_uint_eq(split(g, 1, NULL, 0, 0), 1);
    shared = green_of(g[0]);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    /* the primary context is still this thread's current one */
    uintptr_t primary, current_green;
    ck_assert_ok(cuabi_device_context(&primary, dev));
    ck_assert_ok(cuabi_green_ctx_context(&current_green, shared));
    ck_assert(primary != current_green);
    cuabi_green_ctx_release(shared);
    cuabi_sm_resource_release(g[0]);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_green");
    TCase *tc = tcase_create("green");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, partition_rules_as_the_driver_reports_them);
    tcase_add_test(tc, work_runs_on_the_partition_through_every_path);
    tcase_add_test(tc, workqueue_configurations);
    tcase_add_test(tc, events_and_synchronize);
    tcase_add_test(tc, plain_and_green_streams_wait_for_each_other);
    tcase_add_test(tc, offline_equals_live_per_partition);
    tcase_add_test(tc, from_several_threads);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
