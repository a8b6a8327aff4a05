/* Launch attributes on a GPU, one effect each: programmatic dependent
 * launch (the dependent kernel starts before the primary ends, and its
 * griddepcontrol.wait returns after it, seen in %globaltimer stamps; results
 * stay correct), programmatic and launch-completion events (recorded; work
 * waiting on them starts after the primary's blocks started), priority
 * (a high-priority kernel jumps a queue of low-priority blocks that fill
 * every SM), the access-policy window and memory sync domains (accepted,
 * over-limit values reported), preferred cluster dimensions and scheduling
 * policy (%cluster_nctaid read back). Every kernel is compiled with NVRTC
 * for the device (it also compiles for sm_90 without a GPU). Exits 77
 * without a GPU. */
#include "testutil.h"

#include <cuda.h>
#include <limits.h>
#include <time.h>

static const char source[] =
    "__device__ __forceinline__ unsigned long long now_ns() {\n"
    "  unsigned long long t; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); return t; }\n"
    "__device__ __forceinline__ void spin_ns(unsigned long long ns) {\n"
    "  unsigned long long t0 = now_ns(); while (now_ns() - t0 < ns) { } }\n"
    "/* PDL primary: records when its first block started (t[3] = min), lets\n"
    " * dependents launch at once when `trigger`, works for `ns`, writes\n"
    " * x[i] = i + k, and records when it ended (t[0] = max). */\n"
    "extern \"C\" __global__ void primary(unsigned long long *t, int *x, int n, int k,\n"
    "                                   unsigned long long ns, int trigger) {\n"
    "  if (threadIdx.x == 0) atomicMin(&t[3], now_ns());\n"
    "  if (trigger) asm volatile(\"griddepcontrol.launch_dependents;\");\n"
    "  spin_ns(ns);\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    x[i] = i + k;\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x == 0) { __threadfence(); atomicMax(&t[0], now_ns()); }\n"
    "}\n"
    "/* PDL secondary: t[1] = when it started, t[2] = when the wait returned;\n"
    " * then y[i] = 2 * x[i] (x written by the primary). */\n"
    "extern \"C\" __global__ void secondary(unsigned long long *t, const int *x, int *y, int n) {\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0) t[1] = now_ns();\n"
    "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0) t[2] = now_ns();\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    y[i] = 2 * x[i];\n"
    "}\n"
    "/* The stream's gate: holds what follows until the host sets *flag (mapped\n"
    " * pinned memory), so every launch behind it is queued before any runs. */\n"
    "extern \"C\" __global__ void gate(volatile int *flag) {\n"
    "  while (*flag == 0) __nanosleep(1000);\n"
    "}\n"
    "/* Block starts: s[blockIdx.x] = when the block started; spins `ns`. */\n"
    "extern \"C\" __global__ void starts(unsigned long long *s, unsigned long long ns) {\n"
    "  if (threadIdx.x == 0) s[blockIdx.x] = now_ns();\n"
    "  spin_ns(ns);\n"
    "}\n"
    "/* Priority: each block takes most of an SM's shared memory (one block per\n"
    " * SM), records when it started, works `ns`. */\n"
    "extern \"C\" __global__ void hog(unsigned long long *s, unsigned long long ns) {\n"
    "  extern __shared__ char smem[];\n"
    "  if (threadIdx.x == 0) { smem[0] = 1; s[blockIdx.x] = now_ns(); }\n"
    "  spin_ns(ns);\n"
    "  if (threadIdx.x == 0 && smem[0] != 1) s[blockIdx.x] = 0;\n"
    "}\n"
    "/* Clusters: out[2*b] = %cluster_nctaid.x, out[2*b+1] = %nclusterid.x. */\n"
    "extern \"C\" __global__ void cluster_shape(unsigned *out) {\n"
    "  unsigned n = 0, c = 0;\n"
    "  asm volatile(\"mov.u32 %0, %%cluster_nctaid.x;\" : \"=r\"(n));\n"
    "  asm volatile(\"mov.u32 %0, %%nclusterid.x;\" : \"=r\"(c));\n"
    "  if (threadIdx.x == 0) { out[2 * blockIdx.x] = n; out[2 * blockIdx.x + 1] = c; }\n"
    "}\n"
    "/* Any attribute: y[i] = x[i] + 1. */\n"
    "extern \"C\" __global__ void add_one(const int *x, int *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] + 1;\n"
    "}\n";

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static cuabi_device *dev;
static cuabi_objcode *code;
static cuabi_memory_resource *res;
static int cc_major, sms;

static int dev_attr(CUdevice_attribute a)
{
    int v = 0;
    ck_assert_ok(cuabi_device_attribute(&v, dev, a));
    return v;
}

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&dev, 0));
    cc_major = dev_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    sms = dev_attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    cuabi_program *p;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "attrs.cu"));
    ck_assert_ok(cuabi_program_compile(&code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_memory_resource_device_default(&res, dev));
}

static void teardown(void)
{
    cuabi_memory_resource_release(res);
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
}

static cuabi_kernel *kernel(const char *name)
{
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, name));
    return k;
}

static cuabi_buffer *upload(const void *data, size_t size)
{
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, res, size, 0, NULL));
    if (data)
        ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, data, size, NULL));
    else
        ck_assert_ok(cuabi_buffer_memset(b, 0, 0, 1, size, NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    return b;
}

static void download(void *out, cuabi_buffer *b, size_t size)
{
    ck_assert_ok(cuabi_device_synchronize(dev));
    ck_assert_ok(cuabi_buffer_copy_to_host(out, b, 0, size, NULL));
}

static cuabi_stream *stream(int priority)
{
    cuabi_stream *s;
    cuabi_stream_options o = CUABI_STREAM_OPTIONS_INIT;
    o.flags = CUABI_STREAM_NON_BLOCKING;
    o.priority = priority;
    ck_assert_ok(cuabi_stream_create(&s, dev, &o));
    return s;
}

static cuabi_event *untimed_event(void)
{
    cuabi_event *e;
    cuabi_event_options o = CUABI_EVENT_OPTIONS_INIT;
    o.flags = CUABI_EVENT_DISABLE_TIMING;
    ck_assert_ok(cuabi_event_create(&e, dev, &o));
    return e;
}

static cuabi_launch_config on(cuabi_stream *s, unsigned grid, unsigned block)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = grid;
    c.block[0] = block;
    c.stream = s;
    return c;
}

/* The stamps of one primary/secondary pair: t[0] primary end (last block),
 * t[1] secondary start, t[2] secondary after griddepcontrol.wait, t[3]
 * primary start (first block). */
enum { N = 1 << 20 };
static const unsigned long long fresh_stamps[4] = { 0, 0, 0, ULLONG_MAX };

static void check_doubled(cuabi_buffer *y, int k)
{
    static int host[N];
    download(host, y, sizeof host);
    for (int i = 0; i < N; i++)
        if (host[i] != 2 * (i + k))
            ck_abort_msg("y[%d] = %d, expected %d (k = %d): the dependent kernel read x before "
                         "the primary wrote it", i, host[i], 2 * (i + k), k);
}

START_TEST(programmatic_dependent_launch)
{
    if (cc_major < 9) {
        printf("launch_attrs: PDL: compute capability %d.x serializes (overlap needs 9.0); "
               "nothing to measure\n", cc_major);
        return;
    }
    cuabi_kernel *kp = kernel("primary"), *ks = kernel("secondary");
    cuabi_buffer *t = upload(fresh_stamps, sizeof fresh_stamps), *x = upload(NULL, N * sizeof(int)),
                 *y = upload(NULL, N * sizeof(int));
    cuabi_stream *s = stream(0);
    cuabi_argpack *pp, *ps;
    ck_assert_ok(cuabi_argpack_create(&pp, "buffer, buffer, i32, i32, u64, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(pp, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(pp, 1, x));
    ck_assert_ok(cuabi_argpack_set_int(pp, 2, N));
    ck_assert_ok(cuabi_argpack_set_uint(pp, 4, 2000000));   /* 2 ms */
    ck_assert_ok(cuabi_argpack_set_int(pp, 5, 1));
    ck_assert_ok(cuabi_argpack_create(&ps, "buffer, buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(ps, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(ps, 1, x));
    ck_assert_ok(cuabi_argpack_set_buffer(ps, 2, y));
    ck_assert_ok(cuabi_argpack_set_int(ps, 3, N));
    cuabi_launch_config cp = on(s, (unsigned)(sms / 2 > 0 ? sms / 2 : 1), 128);
    cuabi_launch_config cs = on(s, 8, 256);
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cs.attributes = &a;
    /* Both launches must be queued before the primary's 2 ms end: a host
     * that was late with the second launch (a loaded 2-GPU host was 281 us
     * late, 2026-11-26) saw the dependent start after the end, PDL or not.
     * A gate kernel holds the stream until both are queued; the test queues
     * the secondary 3 ms late on purpose, which failed without the gate. */
    cuabi_kernel *kg = kernel("gate");
    cuabi_memory_resource *pinned;
    cuabi_buffer *flag;
    uintptr_t flag_ptr;
    cuabi_argpack *pg;
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev));
    ck_assert_ok(cuabi_buffer_allocate(&flag, pinned, sizeof(int), 0, NULL));
    ck_assert_ok(cuabi_buffer_pointer(&flag_ptr, flag));
    ck_assert_ok(cuabi_argpack_create(&pg, "buffer"));
    ck_assert_ok(cuabi_argpack_set_buffer(pg, 0, flag));
    cuabi_launch_config cg = on(s, 1, 1);
    volatile int *open_gate = (volatile int *)flag_ptr;
    for (int pdl = 0; pdl < 2; pdl++) {
        a.programmatic_stream_serialization = pdl;
        ck_assert_ok(cuabi_buffer_copy_from_host(t, 0, fresh_stamps, sizeof fresh_stamps, NULL));
        ck_assert_ok(cuabi_device_synchronize(dev));
        ck_assert_ok(cuabi_argpack_set_int(pp, 3, 10 + pdl));
        *open_gate = 0;
        ck_assert_ok(cuabi_launch(kg, pg, &cg));
        double queued = now_us();
        ck_assert_ok(cuabi_launch(kp, pp, &cp));
        /* Later than the primary runs: the ungated test failed this way. */
        nanosleep(&(struct timespec){ .tv_nsec = 3000000 }, NULL);
        ck_assert_ok(cuabi_launch(ks, ps, &cs));
        queued = now_us() - queued;
        __atomic_store_n(open_gate, 1, __ATOMIC_SEQ_CST);
        ck_assert_ok(cuabi_stream_synchronize(s));
        printf("launch_attrs: PDL %s: both kernels queued in %.1f us, behind the gate\n",
               pdl ? "on " : "off", queued);
        unsigned long long st[4];
        download(st, t, sizeof st);
        check_doubled(y, 10 + pdl);
        printf("launch_attrs: PDL %s: secondary started %+.1f us after the primary ended, its "
               "griddepcontrol.wait returned %+.1f us after (primary ran %.1f us)\n",
               pdl ? "on " : "off", ((double)st[1] - (double)st[0]) / 1e3,
               ((double)st[2] - (double)st[0]) / 1e3, ((double)st[0] - (double)st[3]) / 1e3);
        if (pdl) {
            ck_assert_msg(st[1] < st[0], "with PDL the dependent kernel started %llu ns after the "
                          "primary ended: no overlap", st[1] - st[0]);
            ck_assert_msg(st[2] >= st[0], "griddepcontrol.wait returned before the primary ended");
        } else {
            ck_assert_msg(st[1] >= st[0], "without PDL the dependent kernel started before the "
                          "primary ended");
        }
    }
    cuabi_argpack_release(pg);
    cuabi_buffer_destroy(flag);
    cuabi_memory_resource_release(pinned);
    cuabi_kernel_release(kg);
    /* prepared pairs, many times: the results stay right */
    ck_assert_ok(cuabi_argpack_set_uint(pp, 4, 20000));     /* 20 us */
    a.programmatic_stream_serialization = 1;
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, ks, ps, &cs));
    for (int k = 0; k < 20; k++) {
        ck_assert_ok(cuabi_argpack_set_int(pp, 3, 100 + k));
        ck_assert_ok(cuabi_launch(kp, pp, &cp));
        ck_assert_ok(cuabi_prepared_launch(pl));
        ck_assert_ok(cuabi_stream_synchronize(s));
        check_doubled(y, 100 + k);
    }
    cuabi_prepared_release(pl);
    cuabi_argpack_release(pp);
    cuabi_argpack_release(ps);
    cuabi_stream_release(s);
    cuabi_buffer_destroy(t);
    cuabi_buffer_destroy(x);
    cuabi_buffer_destroy(y);
    cuabi_kernel_release(kp);
    cuabi_kernel_release(ks);
}
END_TEST

/* A probe kernel on stream b after an event: s[0] = when it started. */
static unsigned long long probe_after(cuabi_event *e, cuabi_stream *b, cuabi_kernel *kstart,
                                      cuabi_buffer *s)
{
    ck_assert_ok(cuabi_stream_wait_event(b, e));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, s));
    cuabi_launch_config c = on(b, 1, 32);
    ck_assert_ok(cuabi_launch(kstart, p, &c));
    cuabi_argpack_release(p);
    ck_assert_ok(cuabi_stream_synchronize(b));
    unsigned long long v;
    download(&v, s, sizeof v);
    return v;
}

START_TEST(programmatic_and_completion_events)
{
    cuabi_kernel *kp = kernel("primary"), *kstart = kernel("starts");
    cuabi_buffer *t = upload(fresh_stamps, sizeof fresh_stamps), *x = upload(NULL, N * sizeof(int)),
                 *s = upload(NULL, sizeof(unsigned long long));
    cuabi_stream *a = stream(0), *b = stream(0);
    cuabi_event *pe = untimed_event(), *ce = untimed_event();
    cuabi_argpack *pp;
    ck_assert_ok(cuabi_argpack_create(&pp, "buffer, buffer, i32, i32, u64, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(pp, 0, t));
    ck_assert_ok(cuabi_argpack_set_buffer(pp, 1, x));
    ck_assert_ok(cuabi_argpack_set_int(pp, 2, N));
    ck_assert_ok(cuabi_argpack_set_uint(pp, 4, 2000000));
    ck_assert_ok(cuabi_argpack_set_int(pp, 5, 1));
    cuabi_launch_attributes at = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = on(a, (unsigned)sms, 128);
    c.attributes = &at;
    /* programmatic event: recorded once every block triggered */
    at.programmatic_event = pe;
    if (cc_major < 9) {
        ck_assert_status(cuabi_launch_check(kp, pp, &c), CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("programmatic_event needs compute capability 9.0");
        printf("launch_attrs: programmatic event: refused on compute capability %d.x, as "
               "documented\n", cc_major);
    } else {
        ck_assert_ok(cuabi_launch(kp, pp, &c));
        unsigned long long probe = probe_after(pe, b, kstart, s);
        ck_assert_ok(cuabi_event_synchronize(pe));
        ck_assert_ok(cuabi_stream_synchronize(a));
        unsigned long long st[4];
        download(st, t, sizeof st);
        ck_assert_msg(probe >= st[3], "work after the programmatic event started before the "
                      "primary did");
        printf("launch_attrs: programmatic event recorded; work waiting on it started %.1f us "
               "after the primary's first block, %+.1f us from its end (overlap %s)\n",
               ((double)probe - (double)st[3]) / 1e3, ((double)probe - (double)st[0]) / 1e3,
               probe < st[0] ? "yes" : "no");
    }
    /* launch completion event: recorded once every block started */
    at.programmatic_event = NULL;
    at.launch_completion_event = ce;
    ck_assert_ok(cuabi_buffer_copy_from_host(t, 0, fresh_stamps, sizeof fresh_stamps, NULL));
    ck_assert_ok(cuabi_device_synchronize(dev));
    cuabi_status st = cuabi_launch(kp, pp, &c);
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    ck_assert_ok(cuabi_runtime_info_get(&info));
    if (info.driver_version < 12030) {
        ck_assert_status(st, CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("launch_completion_event needs a CUDA 12.3 driver");
    } else {
        ck_assert_ok(st);
        unsigned long long probe = probe_after(ce, b, kstart, s);
        ck_assert_ok(cuabi_event_synchronize(ce));
        ck_assert_ok(cuabi_stream_synchronize(a));
        unsigned long long stamps[4];
        download(stamps, t, sizeof stamps);
        ck_assert_msg(probe >= stamps[3], "work after the completion event started before the "
                      "primary did");
        printf("launch_attrs: launch completion event recorded; work waiting on it started "
               "%.1f us after the primary's first block, %+.1f us from its end\n",
               ((double)probe - (double)stamps[3]) / 1e3,
               ((double)probe - (double)stamps[0]) / 1e3);
    }
    cuabi_argpack_release(pp);
    cuabi_event_release(pe);
    cuabi_event_release(ce);
    cuabi_stream_release(a);
    cuabi_stream_release(b);
    cuabi_buffer_destroy(t);
    cuabi_buffer_destroy(x);
    cuabi_buffer_destroy(s);
    cuabi_kernel_release(kp);
    cuabi_kernel_release(kstart);
}
END_TEST

/* Blocks that take a whole SM's shared memory: a filler grid of 8 waves
 * on a low-priority stream, then one probe block launched on another
 * low-priority stream. With the priority attribute set high, the probe is
 * scheduled as soon as an SM frees up, ahead of the filler's queued blocks. */
static void hog_run(cuabi_kernel *k, int smem, int probe_priority, unsigned long long *probe_start,
                    unsigned long long *first, unsigned long long *last, int least)
{
    unsigned filler_blocks = (unsigned)sms * 8;
    cuabi_buffer *fs = upload(NULL, filler_blocks * sizeof(unsigned long long)),
                 *ps = upload(NULL, sizeof(unsigned long long));
    cuabi_stream *s1 = stream(least), *s2 = stream(least);
    cuabi_argpack *pf, *pp;
    ck_assert_ok(cuabi_argpack_create(&pf, "buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pf, 0, fs));
    ck_assert_ok(cuabi_argpack_set_uint(pf, 1, 100000));    /* 100 us per block */
    ck_assert_ok(cuabi_argpack_create(&pp, "buffer, u64"));
    ck_assert_ok(cuabi_argpack_set_buffer(pp, 0, ps));
    ck_assert_ok(cuabi_argpack_set_uint(pp, 1, 0));
    cuabi_launch_config cf = on(s1, filler_blocks, 32), cp = on(s2, 1, 32);
    cf.dynamic_shared_bytes = cp.dynamic_shared_bytes = (size_t)smem;
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.priority = probe_priority;
    cp.attributes = &a;
    ck_assert_ok(cuabi_launch(k, pf, &cf));
    ck_assert_ok(cuabi_launch(k, pp, &cp));
    ck_assert_ok(cuabi_device_synchronize(dev));
    unsigned long long *starts = malloc(filler_blocks * sizeof *starts);
    download(starts, fs, filler_blocks * sizeof *starts);
    download(probe_start, ps, sizeof *probe_start);
    *first = ULLONG_MAX;
    *last = 0;
    for (unsigned i = 0; i < filler_blocks; i++) {
        *first = starts[i] < *first ? starts[i] : *first;
        *last = starts[i] > *last ? starts[i] : *last;
    }
    free(starts);
    cuabi_argpack_release(pf);
    cuabi_argpack_release(pp);
    cuabi_stream_release(s1);
    cuabi_stream_release(s2);
    cuabi_buffer_destroy(fs);
    cuabi_buffer_destroy(ps);
}

START_TEST(priority_orders_under_load)
{
    int least = 0, greatest = 0;
    ck_assert_ok(cuabi_device_stream_priority_range(&least, &greatest, dev));
    if (least == greatest) {
        printf("launch_attrs: priority: this device has one stream priority; nothing to order\n");
        return;
    }
    cuabi_kernel *k = kernel("hog");
    int smem = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    ck_assert_ok(cuabi_kernel_set_attribute(k, dev, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
    unsigned long long probe, first, last;
    hog_run(k, smem, greatest, &probe, &first, &last, least);
    double hi = ((double)probe - (double)first) / 1e3, span = ((double)last - (double)first) / 1e3;
    hog_run(k, smem, least, &probe, &first, &last, least);
    double lo = ((double)probe - (double)first) / 1e3, span_lo = ((double)last - (double)first) / 1e3;
    printf("launch_attrs: priority: a probe block behind 8 waves of low-priority blocks started "
           "%.1f us after the first of them with priority %d (the last started at %.1f us), "
           "%.1f us with priority %d (last at %.1f us)\n", hi, greatest, span, lo, least, span_lo);
    ck_assert_msg(hi < span / 2, "the high-priority probe did not jump the queue: it started "
                  "%.1f us in, the queued low-priority blocks by %.1f us", hi, span);
    cuabi_kernel_release(k);
}
END_TEST

START_TEST(access_policy_window)
{
    cuabi_kernel *k = kernel("add_one");
    enum { M = 1 << 16 };
    static int host[M];
    for (int i = 0; i < M; i++) host[i] = i;
    cuabi_buffer *x = upload(host, sizeof host), *y = upload(NULL, sizeof host);
    uintptr_t xp;
    ck_assert_ok(cuabi_buffer_pointer(&xp, x));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, y));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, M));
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = M / 256;
    c.block[0] = 256;
    c.device = dev;
    c.attributes = &a;
    int max = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
    a.access_policy_base = xp;
    a.access_policy_bytes = sizeof host < (size_t)max || max == 0 ? sizeof host : (size_t)max;
    a.access_policy_hit_ratio = 0.6f;
    if (max == 0) {
        ck_assert_status(cuabi_launch_check(k, p, &c), CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("no L2 access-policy windows");
    } else {
        ck_assert_ok(cuabi_launch_check(k, p, &c));
        ck_assert_ok(cuabi_launch(k, p, &c));
        static int out[M];
        download(out, y, sizeof out);
        for (int i = 0; i < M; i++)
            ck_assert_int_eq(out[i], i + 1);
        /* over the device's limit: the full check names it; the driver's answer is printed */
        a.access_policy_bytes = (size_t)max + 4096;
        ck_assert_status(cuabi_launch_check(k, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
        ck_assert_error_mentions("access_policy_bytes");
        cuabi_status st = cuabi_launch(k, p, &c);
        printf("launch_attrs: access policy: a %d-byte window accepted (hit ratio 0.6, persisting "
               "hits, streaming misses); a larger one: cuabi_launch_check says \"over the "
               "device's largest window\", cuabi_launch gives %s\n", max, cuabi_status_name(st));
        ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_LAUNCH_CONFIG);
        if (st != CUABI_SUCCESS)
            ck_assert_error_mentions("access_policy_bytes");
    }
    ck_assert_ok(cuabi_device_synchronize(dev));
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(x);
    cuabi_buffer_destroy(y);
    cuabi_kernel_release(k);
}
END_TEST

/* Attributes whose effect a kernel cannot see: accepted, the kernel's result
 * right; a driver or device without them answers with the attribute's name. */
START_TEST(sync_domains_carveout_nvlink)
{
    cuabi_kernel *k = kernel("add_one");
    enum { M = 4096 };
    static int host[M];
    for (int i = 0; i < M; i++) host[i] = 3 * i;
    cuabi_buffer *x = upload(host, sizeof host), *y = upload(NULL, sizeof host);
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, buffer, i32"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, x));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 1, y));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, M));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = M / 128;
    c.block[0] = 128;
    c.device = dev;
    int domains = dev_attr(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT);
    for (int which = 0; which < 4; which++) {
        cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
        const char *name = "";
        switch (which) {
        case 0: a.mem_sync_domain = CUABI_MEM_SYNC_DOMAIN_REMOTE; name = "mem_sync_domain"; break;
        case 1: a.mem_sync_domain_map[0] = 0; a.mem_sync_domain_map[1] = domains - 1;
                name = "mem_sync_domain_map"; break;
        case 2: a.preferred_shared_memory_carveout = 25; name = "preferred_shared_memory_carveout"; break;
        case 3: a.nvlink_util_centric_scheduling = 1; name = "nvlink_util_centric_scheduling"; break;
        }
        c.attributes = &a;
        ck_assert_ok(cuabi_buffer_memset(y, 0, 0, 1, sizeof host, NULL));
        cuabi_status st = cuabi_launch(k, p, &c);
        printf("launch_attrs: %s: %s%s%s\n", name, st ? cuabi_status_name(st) : "accepted",
               st ? ": " : "", st ? cuabi_last_error()->message : "");
        if (which < 3) {
            ck_assert_ok(st);
        } else if (st != CUABI_SUCCESS) {
            ck_assert(st == CUABI_ERROR_NOT_SUPPORTED || st == CUABI_ERROR_LAUNCH_CONFIG);
            ck_assert_error_mentions(name);
            continue;
        }
        static int out[M];
        download(out, y, sizeof out);
        for (int i = 0; i < M; i++)
            ck_assert_int_eq(out[i], 3 * i + 1);
    }
    /* a domain id the device does not have */
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.mem_sync_domain_map[0] = 0;
    a.mem_sync_domain_map[1] = domains;
    c.attributes = &a;
    ck_assert_status(cuabi_launch_check(k, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("memory sync domains");
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(x);
    cuabi_buffer_destroy(y);
    cuabi_kernel_release(k);
}
END_TEST

START_TEST(preferred_cluster_and_scheduling_policy)
{
    cuabi_kernel *k = kernel("cluster_shape");
    enum { GRID = 32 };
    cuabi_buffer *out = upload(NULL, 2 * GRID * sizeof(unsigned));
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer"));
    ck_assert_ok(cuabi_argpack_set_buffer(p, 0, out));
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = GRID;
    c.block[0] = 32;
    c.cluster[0] = 2;
    c.device = dev;
    c.attributes = &a;
    a.cluster_scheduling_policy = CUABI_CLUSTER_SCHEDULING_SPREAD;
    if (cc_major < 9) {
        ck_assert_status(cuabi_launch_check(k, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
        ck_assert_error_mentions("clusters need");
        goto done;
    }
    ck_assert_ok(cuabi_launch(k, p, &c));
    unsigned host[2 * GRID];
    download(host, out, sizeof host);
    for (int b = 0; b < GRID; b++) {
        ck_assert_uint_eq(host[2 * b], 2);
        ck_assert_uint_eq(host[2 * b + 1], GRID / 2);
    }
    /* preferred clusters of 4 over regular ones of 2 */
    a.cluster_scheduling_policy = CUABI_CLUSTER_SCHEDULING_DEFAULT;
    a.preferred_cluster[0] = 4;
    ck_assert_ok(cuabi_buffer_memset(out, 0, 0, 1, sizeof host, NULL));
    cuabi_status st = cuabi_launch(k, p, &c);
    if (st != CUABI_SUCCESS) {
        printf("launch_attrs: preferred cluster on compute capability %d.x: %s: %s\n", cc_major,
               cuabi_status_name(st), cuabi_last_error()->message);
        ck_assert(st == CUABI_ERROR_LAUNCH_CONFIG || st == CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("preferred_cluster");
        ck_assert_msg(cc_major < 10, "sm_100 and newer take preferred clusters");
        goto done;
    }
    download(host, out, sizeof host);
    int of4 = 0, of2 = 0;
    for (int b = 0; b < GRID; b++) {
        ck_assert_msg(host[2 * b] == 2 || host[2 * b] == 4, "block %d saw %%cluster_nctaid.x = %u",
                      b, host[2 * b]);
        of4 += host[2 * b] == 4;
        of2 += host[2 * b] == 2;
    }
    printf("launch_attrs: preferred cluster 4 over cluster 2 on compute capability %d.x: %d "
           "blocks in clusters of 4, %d in clusters of 2\n", cc_major, of4, of2);
    if (cc_major >= 10)
        ck_assert_int_gt(of4, 0);
done:
    ck_assert_ok(cuabi_device_synchronize(dev));
    cuabi_argpack_release(p);
    cuabi_buffer_destroy(out);
    cuabi_kernel_release(k);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_launch_attrs");
    TCase *tc = tcase_create("launch_attrs");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, programmatic_dependent_launch);
    tcase_add_test(tc, programmatic_and_completion_events);
    tcase_add_test(tc, priority_orders_under_load);
    tcase_add_test(tc, access_policy_window);
    tcase_add_test(tc, sync_domains_carveout_nvlink);
    tcase_add_test(tc, preferred_cluster_and_scheduling_policy);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
