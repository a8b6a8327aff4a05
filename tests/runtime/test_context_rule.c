/* The context rule (docs/ARCHITECTURE.md, "Contexts"): a cuabi call gives
 * the calling thread's current CUDA context back as it found it, success or
 * failure; only cuabi_device_set_current sets it. Found on two H100s: init-all
 * and copies left device 1 current, torch followed it, and a copy on device
 * 0's stream was then refused.
 *
 * One table of calls on device 0 of the fake driver's two devices, each run
 *   - with device 1's context current: still current after, and device 0's
 *     was made current for the work when the call needs a context;
 *   - with no context current: none after;
 *   - with device 0's current (the one-GPU case): cuCtxSetCurrent never
 *     called, and the hot calls ask cuCtxGetCurrent once;
 *   - failing after the switch (an injected driver or NCCL failure): device
 *     1's context current again, the failure reported.
 * cuCtxSetCurrent and cuCtxGetCurrent are wrapped to see every switch. */
#include "testutil.h"
#include "fake_graph.h"
#include "fake_green.h"
#include "fake_multigpu.h"
#include "fake_texture.h"
#include "fake_vmm.h"
#include "platform/nccl_lib.h"
#include "runtime/ipc.h"
#include "runtime/launch.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define CTX0 ((CUcontext)(uintptr_t)0x1000)
#define CTX1 ((CUcontext)(uintptr_t)0x1001)

/* ---------------------------------------------------- watching switches */

enum { SEEN_MAX = 64 };
static CUcontext seen[SEEN_MAX];
static int nseen, get_calls;

static bool refuse_ctx1;   /* giving device 1's context back fails (a failed restore) */
static CUresult CUDAAPI watch_set(CUcontext c)
{
    if (nseen < SEEN_MAX)
        seen[nseen++] = c;
    if (refuse_ctx1 && c == CTX1)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_current = c;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI watch_get(CUcontext *c)
{
    get_calls++;
    *c = fake_current;
    return CUDA_SUCCESS;
}
static bool was_current(CUcontext c)
{
    for (int i = 0; i < nseen; i++)
        if (seen[i] == c)
            return true;
    return false;
}
static void watch_reset(CUcontext current)
{
    fake_current = current;
    nseen = 0;
    get_calls = 0;
    fake_launch_ctx = NULL;
}

/* ------------------------------------------ the fake's kernels (launches) */

static CUresult CUDAAPI lf_load(CUlibrary *l, const void *code, CUjit_option *o, void **ov,
                                unsigned n, CUlibraryOption *lo, void **lov, unsigned ln)
{
    (void)code; (void)o; (void)ov; (void)n; (void)lo; (void)lov; (void)ln;
    *l = (CUlibrary)(uintptr_t)0x5000;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI lf_unload(CUlibrary l) { (void)l; return CUDA_SUCCESS; }
static CUresult CUDAAPI lf_get_kernel(CUkernel *k, CUlibrary l, const char *name)
{
    (void)l;
    if (strcmp(name, "add") != 0) return CUDA_ERROR_NOT_FOUND;
    *k = (CUkernel)(uintptr_t)0x6000;
    return CUDA_SUCCESS;
}
/* The function is the current context's: a distinct one per device. */
static CUresult CUDAAPI lf_get_function(CUfunction *f, CUkernel k)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    *f = (CUfunction)((uintptr_t)k + 1 + ((uintptr_t)fake_current & 0xf) * 0x10);
    return CUDA_SUCCESS;
}
/* Launches go to the driver unwrapped (no fault injection): a knob. */
#define LAUNCH_FAULT "cuLaunchKernel (refused by the fake)"
static CUresult launch_result = CUDA_SUCCESS;
static CUresult CUDAAPI lf_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                  unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                  CUstream s, void **params, void **extra)
{
    if (launch_result != CUDA_SUCCESS)
        return launch_result;
    return fake_la_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}
static CUresult CUDAAPI lf_occupancy(int *n, CUfunction f, int block, size_t smem, unsigned fl)
{
    (void)f; (void)block; (void)smem; (void)fl;
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    *n = 2;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ fixture */

static cuabi_device *dev0, *dev1;
static cuabi_stream *legacy0, *per_thread0, *s0, *s1;
static cuabi_memory_resource *pool0, *pinned0;
static cuabi_objcode *code;
static cuabi_kernel *kern;
static cuabi_argpack *pack;
static cuabi_nccl_comm *comm[2];
static void *nccl_dl;
static char nccl_path[1024];
static void (*nccl_fail)(const char *, int, int);
static int (*nccl_live_comms)(void), (*nccl_live_registrations)(void);

static void load_nccl(void)
{
    snprintf(nccl_path, sizeof nccl_path, "%s/tests/fixtures/.libs/fake_nccl.so",
             getenv("CUABI_TEST_BUILDDIR") ? getenv("CUABI_TEST_BUILDDIR") : ".");
    nccl_dl = dlopen(nccl_path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(nccl_dl != NULL, "cannot load %s: %s", nccl_path, dlerror());
    *(void **)&nccl_fail = dlsym(nccl_dl, "fake_nccl_fail");
    ck_assert_ptr_nonnull(nccl_fail);
    *(void **)&nccl_live_comms = dlsym(nccl_dl, "fake_nccl_live_comms");
    *(void **)&nccl_live_registrations = dlsym(nccl_dl, "fake_nccl_live_registrations");
    ck_assert(nccl_live_comms && nccl_live_registrations);
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    fake_driver_install_libraries();
    fake_driver_install_launches();
    fake_graph_install();
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuLibraryLoadData = lf_load;
    d->cuLibraryUnload = lf_unload;
    d->cuLibraryGetKernel = lf_get_kernel;
    d->cuKernelGetFunction = lf_get_function;
    d->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = lf_occupancy;
    d->cuKernelGetParamInfo = NULL;   /* the CUBIN's own parameter table */
    d->cuLaunchKernel = lf_launch;
    launch_result = CUDA_SUCCESS;
    d->cuCtxSetCurrent = watch_set;
    d->cuCtxGetCurrent = watch_get;
    if (!nccl_dl)
        load_nccl();
    setenv("CUABI_NCCL_PATH", nccl_path, 1);
    unsetenv("CUABI_NCCL_TIMEOUT_MS");
    cuabi__nccl_install_fake(NULL);
    nccl_fail("", 0, 0);

    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_stream_legacy_default(&legacy0, dev0));
    ck_assert_ok(cuabi_stream_per_thread_default(&per_thread0, dev0));
    ck_assert_ok(cuabi_stream_create(&s0, dev0, NULL));
    ck_assert_ok(cuabi_stream_create(&s1, dev1, NULL));
    ck_assert_ok(cuabi_memory_resource_device_default(&pool0, dev0));
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned0, dev0));
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin",
             cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    ck_assert_ok(cuabi_argpack_create(&pack, "ptr, ptr, i32, f64"));
    cuabi_device *devs[2] = { dev0, dev1 };
    ck_assert_ok(cuabi_nccl_comm_init_all(comm, devs, 2, NULL));
    watch_reset(NULL);
}

static void teardown(void)
{
    refuse_ctx1 = false;
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    nccl_fail("", 0, 0);
    cuabi_nccl_comm_release(comm[0]);
    cuabi_nccl_comm_release(comm[1]);
    cuabi_argpack_release(pack);
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_memory_resource_release(pinned0);
    cuabi_memory_resource_release(pool0);
    cuabi_stream_release(s1);
    cuabi_stream_release(s0);
    cuabi_stream_release(per_thread0);
    cuabi_stream_release(legacy0);
    cuabi_device_release(dev1);
    cuabi_device_release(dev0);
    cuabi__launch_forget_implicit_devices();
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* ------------------------------------------------------------ the calls */

static cuabi_status c_synchronize(void) { return cuabi_device_synchronize(dev0); }

static cuabi_status c_memory_info(void)
{
    uint64_t f, t;
    return cuabi_device_memory_info(&f, &t, dev0);
}

static cuabi_status c_priority_range(void)
{
    int least, greatest;
    return cuabi_device_stream_priority_range(&least, &greatest, dev0);
}

static cuabi_status c_stream_create(void)
{
    cuabi_stream *s;
    cuabi_status st = cuabi_stream_create(&s, dev0, NULL);
    if (st == CUABI_SUCCESS)
        cuabi_stream_release(s);
    return st;
}

static cuabi_status c_event_create(void)
{
    cuabi_event *e;
    cuabi_status st = cuabi_event_create(&e, dev0, NULL);
    if (st == CUABI_SUCCESS)
        cuabi_event_release(e);
    return st;
}

static cuabi_status c_legacy_sync(void) { return cuabi_stream_synchronize(legacy0); }
static cuabi_status c_per_thread_sync(void) { return cuabi_stream_synchronize(per_thread0); }
static cuabi_status c_created_sync(void) { return cuabi_stream_synchronize(s0); }

static cuabi_status c_event_record_legacy(void)
{
    cuabi_event *e;
    cuabi_status st = cuabi_event_create(&e, dev0, NULL);
    if (st != CUABI_SUCCESS)
        return st;
    st = cuabi_event_record(e, legacy0);
    cuabi_event_release(e);
    return st;
}

/* Allocation and free without a stream: the legacy stream, in the device's
 * context. */
static cuabi_status c_alloc_no_stream(void)
{
    uintptr_t p;
    cuabi_status st = cuabi_memory_resource_allocate(&p, pool0, 256, 0, NULL);
    if (st == CUABI_SUCCESS)
        st = cuabi_memory_resource_deallocate(pool0, p, 256, 0, NULL);
    return st;
}

/* A pool on a created stream: the stream's context; nothing made current. */
static cuabi_status c_alloc_created_stream(void)
{
    uintptr_t p;
    cuabi_status st = cuabi_memory_resource_allocate(&p, pool0, 256, 0, s0);
    if (st == CUABI_SUCCESS)
        st = cuabi_memory_resource_deallocate(pool0, p, 256, 0, s0);
    return st;
}

/* Pinned memory ignores the stream: cuMemAllocHost needs the context. */
static cuabi_status c_pinned_with_stream(void)
{
    cuabi_buffer *b;
    cuabi_status st = cuabi_buffer_allocate(&b, pinned0, 64, 0, s0);
    if (st == CUABI_SUCCESS)
        st = cuabi_buffer_destroy(b);
    return st;
}

/* The free of a buffer without a stream, alone: allocated with device 0
 * current (the caller's choice), freed from a thread where it is not. */
static cuabi_buffer *to_free;
static uintptr_t lost_ptr;   /* memory whose injected free failure lost it: the test frees it */
static cuabi_status c_free(void)
{
    cuabi_status st = CUABI_SUCCESS;
    if (!to_free) {
        CUcontext keep = fake_current;
        fake_current = CTX0;
        st = cuabi_buffer_allocate(&to_free, pool0, 64, 0, NULL);
        fake_current = keep;
        nseen = 0;
        get_calls = 0;
        if (st != CUABI_SUCCESS)
            return st;
    }
    uintptr_t p = 0;
    cuabi_buffer_pointer(&p, to_free);
    st = cuabi_buffer_destroy(to_free);
    to_free = NULL;   /* a failed free is given up: the handle is gone */
    lost_ptr = cuabi__fault_count() > 0 ? p : 0;
    return st;
}

static cuabi_status c_trim(void) { return cuabi_memory_resource_trim(pool0, 0); }

static cuabi_status c_pool_create(void)
{
    cuabi_memory_resource *r;
    cuabi_status st = cuabi_memory_resource_pool_create(&r, dev0, NULL);
    if (st == CUABI_SUCCESS)
        cuabi_memory_resource_release(r);
    return st;
}

static cuabi_status c_pool_stats(void)
{
    cuabi_pool_stats s = CUABI_POOL_STATS_INIT;
    return cuabi_pool_stats_get(&s, pool0);
}

static cuabi_status c_launch_legacy(void)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.device = dev0;     /* no stream: device 0's legacy stream */
    return cuabi_launch(kern, pack, &c);
}

static cuabi_status c_launch_created(void)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.stream = s0;
    return cuabi_launch(kern, pack, &c);
}

static cuabi_status c_prepared_legacy(void)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.device = dev0;
    cuabi_prepared *pl;
    cuabi_status st = cuabi_prepared_create(&pl, kern, pack, &c);
    if (st != CUABI_SUCCESS)
        return st;
    st = cuabi_prepared_launch(pl);
    cuabi_prepared_release(pl);
    return st;
}

static cuabi_status c_kernel_attribute(void)
{
    int v;
    return cuabi_kernel_attribute(&v, kern, dev0, CU_FUNC_ATTRIBUTE_NUM_REGS);
}

static cuabi_status c_occupancy(void)
{
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
    return cuabi_occupancy_max_active_blocks(&r, kern, dev0, 32, 0);
}

/* Rank 0's all-reduce on its device's legacy stream (NULL), then rank 1's
 * on its created stream: the fake runs it when both have posted. */
static cuabi_buffer *nccl_buf[2];
static cuabi_status c_nccl_default_stream(void)
{
    for (int r = 0; r < 2; r++)
        if (!nccl_buf[r]) {
            void *p = calloc(1, 64);
            ck_assert_ok(cuabi_buffer_wrap(&nccl_buf[r], r ? dev1 : dev0, CUABI_MEMORY_DEVICE,
                                           (uintptr_t)p, 64, NULL, NULL));
        }
    cuabi_status st = cuabi_nccl_all_reduce(comm[0], NULL, 0, nccl_buf[0], 0, 16,
                                            CUABI_NCCL_FLOAT32, CUABI_NCCL_SUM, NULL);
    if (st == CUABI_SUCCESS)   /* a created stream: the device's context all the same */
        st = cuabi_nccl_all_reduce(comm[0], NULL, 0, nccl_buf[0], 0, 16, CUABI_NCCL_FLOAT32,
                                   CUABI_NCCL_SUM, s0);
    return st;
}

static cuabi_status c_nccl_synchronize(void)
{
    return cuabi_nccl_comm_synchronize(comm[0], NULL, 0);
}

/* An IPC buffer exported by "the parent process" (the descriptor's pid is
 * made our parent's, as test_multigpu does) and imported here. */
static cuabi_status c_ipc_import(void)
{
    cuabi_memory_resource *ipc;
    cuabi_buffer *b, *imp;
    CUcontext keep = fake_current;
    fake_current = CTX0;
    ck_assert_ok(cuabi_ipc_memory_resource(&ipc, dev0));
    ck_assert_ok(cuabi_buffer_allocate(&b, ipc, 1000, 0, NULL));
    uint8_t desc[CUABI_IPC_DESCRIPTOR_SIZE];
    ck_assert_ok(cuabi_ipc_buffer_export(desc, sizeof desc, b));
    cuabi__ipc_put(desc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(desc);
    fake_current = keep;
    nseen = 0;
    get_calls = 0;
    cuabi_status st = cuabi_ipc_buffer_import(&imp, desc, sizeof desc);
    if (st == CUABI_SUCCESS)
        st = cuabi_buffer_destroy(imp);      /* cuIpcCloseMemHandle: a release */
    CUcontext after = fake_current;
    fake_current = CTX0;
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(ipc));
    fake_current = after;
    return st;
}

static cuabi_status c_peer_enable(void)
{
    cuabi_status st = cuabi_peer_enable(dev0, dev1);
    if (st == CUABI_SUCCESS)
        st = cuabi_peer_disable(dev0, dev1);
    return st;
}

static cuabi_status c_peer_copy(void)
{
    cuabi_buffer *a, *b;
    void *pa = calloc(1, 64), *pb = calloc(1, 64);
    ck_assert_ok(cuabi_buffer_wrap(&a, dev0, CUABI_MEMORY_DEVICE, (uintptr_t)pa, 64, NULL, NULL));
    ck_assert_ok(cuabi_buffer_wrap(&b, dev1, CUABI_MEMORY_DEVICE, (uintptr_t)pb, 64, NULL, NULL));
    cuabi_status st = cuabi_peer_copy(a, 0, b, 0, 64, NULL);
    cuabi_buffer_destroy(a);
    cuabi_buffer_destroy(b);
    free(pa);
    free(pb);
    return st;
}

/* A graph with a memset node of a device-0 buffer: the addition, the
 * instantiation and the upload on device 0's legacy stream. */
static cuabi_status c_graph(void)
{
    cuabi_buffer *b;
    void *p = calloc(1, 256);
    ck_assert_ok(cuabi_buffer_wrap(&b, dev0, CUABI_MEMORY_DEVICE, (uintptr_t)p, 256, NULL, NULL));
    cuabi_graph *g;
    cuabi_graph_node *n;
    cuabi_graph_exec *e = NULL;
    cuabi_status st = cuabi_graph_create(&g);
    if (st == CUABI_SUCCESS) {
        st = cuabi_graph_add_memset(&n, g, NULL, 0, b, 0, 7, 4, 16);
        if (st == CUABI_SUCCESS)
            cuabi_graph_node_release(n);
        if (st == CUABI_SUCCESS)
            st = cuabi_graph_instantiate(&e, g, NULL);
        if (st == CUABI_SUCCESS)
            st = cuabi_graph_exec_upload(e, legacy0);
        if (st == CUABI_SUCCESS)
            st = cuabi_graph_exec_launch(e, legacy0);
        if (e)
            cuabi_graph_exec_release(e);
        cuabi_graph_release(g);
    }
    cuabi_buffer_destroy(b);
    free(p);
    return st;
}

/* Explicit kernel nodes: the driver's kernel-node calls work in the current
 * context (an H200 crashed in cuGraphAddKernelNode with none current). */
static cuabi_status c_graph_kernel(void)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.device = dev0;
    cuabi_graph *g;
    cuabi_graph_node *n = NULL;
    cuabi_graph_exec *e = NULL;
    cuabi_status st = cuabi_graph_create(&g);
    if (st != CUABI_SUCCESS)
        return st;
    st = cuabi_graph_add_kernel(&n, g, NULL, 0, kern, pack, &c);
    if (st == CUABI_SUCCESS)
        st = cuabi_graph_kernel_node_set(n, pack, NULL);
    if (st == CUABI_SUCCESS)
        st = cuabi_graph_instantiate(&e, g, NULL);
    if (st == CUABI_SUCCESS)
        st = cuabi_graph_exec_update_kernel(e, n, pack, NULL);
    if (e)
        cuabi_graph_exec_release(e);
    if (n)
        cuabi_graph_node_release(n);
    cuabi_graph_release(g);
    return st;
}

/* The check of a cooperative launch on a created stream asks the driver's
 * occupancy, which works in the current context (an H200 refused it with a
 * green context's stream: CUDA_ERROR_INVALID_CONTEXT). */
static cuabi_status c_cooperative_check(void)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.stream = s0;
    c.cooperative = 1;
    return cuabi_launch_check(kern, pack, &c);
}

static cuabi_status c_device_context(void)
{
    uintptr_t raw;
    cuabi_status st = cuabi_device_context(&raw, dev0);
    if (st == CUABI_SUCCESS && raw != (uintptr_t)CTX0)
        return cuabi__error(CUABI_ERROR_INTERNAL, "cuabi_device_context gave %#lx",
                            (unsigned long)raw);
    return st;
}

/* ------------------------------------------------------------- the table */

typedef struct rule_case {
    const char *name;
    cuabi_status (*fn)(void);
    bool enters;        /* device 0's context made current for the work */
    int hot_gets;       /* with device 0 current: cuCtxGetCurrent calls (-1: not checked) */
    const char *fault;  /* a driver entry after the switch to fail; NULL: none */
    const char *nccl_fault;
} rule_case;

static const rule_case cases[] = {
    { "device synchronize", c_synchronize, true, 1, "cuCtxSynchronize", NULL },
    { "memory info", c_memory_info, true, 1, "cuMemGetInfo_v2", NULL },
    { "stream priority range", c_priority_range, true, 1, "cuCtxGetStreamPriorityRange", NULL },
    { "stream create", c_stream_create, true, 1, "cuStreamCreateWithPriority", NULL },
    { "event create", c_event_create, true, 1, "cuEventCreate", NULL },
    { "legacy stream synchronize", c_legacy_sync, true, 1, "cuStreamSynchronize", NULL },
    { "per-thread stream synchronize", c_per_thread_sync, true, 1, "cuStreamSynchronize", NULL },
    { "created stream synchronize", c_created_sync, false, 0, "cuStreamSynchronize", NULL },
    { "event record on the legacy stream", c_event_record_legacy, true, -1, "cuEventRecord", NULL },
    { "allocate and free without a stream", c_alloc_no_stream, true, 2,
      "cuMemAllocFromPoolAsync", NULL },
    { "allocate and free on a created stream", c_alloc_created_stream, false, 0,
      "cuMemAllocFromPoolAsync", NULL },
    { "pinned allocate on a stream", c_pinned_with_stream, true, -1, "cuMemAllocHost_v2", NULL },
    { "free without a stream", c_free, true, 1, "cuMemFreeAsync", NULL },
    { "pool trim", c_trim, true, 1, "cuMemPoolTrimTo", NULL },
    { "pool create", c_pool_create, true, -1, "cuMemPoolCreate", NULL },
    { "pool stats", c_pool_stats, true, 1, "cuMemPoolGetAttribute", NULL },
    { "launch on the legacy stream", c_launch_legacy, true, 1, LAUNCH_FAULT, NULL },
    { "launch on a created stream", c_launch_created, false, 0, LAUNCH_FAULT, NULL },
    { "prepared launch on the legacy stream", c_prepared_legacy, true, -1, LAUNCH_FAULT,
      NULL },
    { "kernel attribute", c_kernel_attribute, true, 1, "cuKernelGetAttribute", NULL },
    { "occupancy", c_occupancy, true, 1, "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
      NULL },
    { "NCCL collective on a default stream", c_nccl_default_stream, true, -1, NULL,
      "ncclAllReduce" },
    { "NCCL synchronize on a default stream", c_nccl_synchronize, true, -1, "cuStreamQuery",
      NULL },
    { "IPC import", c_ipc_import, true, -1, "cuIpcOpenMemHandle_v2", NULL },
    { "peer access", c_peer_enable, true, -1, "cuCtxEnablePeerAccess", NULL },
    { "peer copy without a stream", c_peer_copy, true, -1, "cuMemcpyPeerAsync", NULL },
    { "graph add, instantiate, upload, launch", c_graph, true, -1,
      "cuGraphInstantiateWithParams", NULL },
    { "graph kernel node: add, set, instantiate, update", c_graph_kernel, true, -1,
      "cuGraphAddKernelNode_v2", NULL },
    { "cooperative launch check on a created stream", c_cooperative_check, true, -1,
      "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", NULL },
    { "device context (not made current)", c_device_context, false, 0, NULL, NULL },
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static void release_leftovers(void)
{
    for (int r = 0; r < 2; r++)
        if (nccl_buf[r]) {
            uintptr_t p;
            cuabi_buffer_pointer(&p, nccl_buf[r]);
            cuabi_buffer_destroy(nccl_buf[r]);
            free((void *)p);
            nccl_buf[r] = NULL;
        }
    if (to_free) {
        fake_current = CTX0;
        cuabi_buffer_destroy(to_free);
        to_free = NULL;
    }
}

/* Another device's context current: given back, the work done in device 0's. */
START_TEST(other_context_comes_back)
{
    const rule_case *c = &cases[_i];
    if (!c->enters) {   /* first use may need the context (a kernel's function lookup) */
        watch_reset(CTX0);
        (void)c->fn();
        release_leftovers();
    }
    watch_reset(CTX1);
    cuabi_status st = c->fn();
    ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(fake_current == CTX1, "%s: device %d's context is current after the call, "
                  "not the caller's (device 1's)", c->name, (int)((uintptr_t)fake_current - 0x1000));
    if (c->enters)
        ck_assert_msg(was_current(CTX0), "%s: device 0's context was never made current", c->name);
    else
        ck_assert_msg(!was_current(CTX0), "%s: made device 0's context current (%d switches) "
                      "where the driver needs none", c->name, nseen);
    if (c->fn == c_launch_legacy || c->fn == c_prepared_legacy)
        ck_assert_ptr_eq(fake_launch_ctx, CTX0);
    if (c->fn == c_launch_created)
        ck_assert_ptr_eq(fake_launch_ctx, CTX1);  /* the stream carries its context */
    release_leftovers();
}
END_TEST

/* No context current before: none after. */
START_TEST(no_context_stays_none)
{
    const rule_case *c = &cases[_i];
    if (c->fn == c_launch_created || c->fn == c_alloc_created_stream)
        return;   /* the fake refuses these without a context; a retry path is covered below */
    watch_reset(NULL);
    cuabi_status st = c->fn();
    ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(fake_current == NULL, "%s: left device %d's context current", c->name,
                  (int)((uintptr_t)fake_current - 0x1000));
    release_leftovers();
}
END_TEST

/* The one-GPU case: device 0 current already, no switch at all. */
START_TEST(hot_path_switches_nothing)
{
    const rule_case *c = &cases[_i];
    (void)c->fn();            /* first use: retains, loads, caches */
    release_leftovers();
    watch_reset(CTX0);
    cuabi_status st = c->fn();
    ck_assert_msg(st == CUABI_SUCCESS, "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(fake_current == CTX0, "%s: device 0 is no longer current", c->name);
    ck_assert_msg(nseen == 0, "%s: %d cuCtxSetCurrent calls with the context current already",
                  c->name, nseen);
    if (c->hot_gets >= 0)
        ck_assert_msg(get_calls == c->hot_gets, "%s: %d cuCtxGetCurrent calls, expected %d",
                      c->name, get_calls, c->hot_gets);
    release_leftovers();
}
END_TEST

/* A failure after the switch: the caller's context back all the same. */
START_TEST(failure_gives_the_context_back)
{
    const rule_case *c = &cases[_i];
    if (!c->fault && !c->nccl_fault)
        return;
    watch_reset(CTX1);
    bool launch = c->fault && strcmp(c->fault, LAUNCH_FAULT) == 0;
    if (launch)
        launch_result = CUDA_ERROR_LAUNCH_FAILED;
    else if (c->fault)
        cuabi__fault_arm(c->fault, 1, false, CUDA_ERROR_LAUNCH_FAILED);
    else
        nccl_fail(c->nccl_fault, 2 /* ncclSystemError */, 1);
    cuabi_status st = c->fn();
    long fired = c->fault && !launch ? cuabi__fault_count() : 1;
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    launch_result = CUDA_SUCCESS;
    nccl_fail("", 0, 0);
    if (lost_ptr) {   /* the fake's memory of the failed free (ASan's leak check) */
        cuabi__driver_for_test()->cuMemFreeAsync((CUdeviceptr)lost_ptr, NULL);
        lost_ptr = 0;
    }
    ck_assert_msg(fired > 0, "%s: %s was never called", c->name, c->fault);
    ck_assert_msg(fake_current == CTX1, "%s failing in %s: device %d's context is current "
                  "after the call, not the caller's", c->name,
                  c->fault ? c->fault : c->nccl_fault, (int)((uintptr_t)fake_current - 0x1000));
    if (st == CUABI_SUCCESS)   /* a release the call survives (a free, a close) */
        ck_assert_msg(c->fn == c_free || c->fn == c_ipc_import,
                      "%s: the failure of %s was not reported", c->name, c->fault);
    else
        ck_assert_msg(cuabi_last_error()->message[0] != '\0', "%s: no message", c->name);
    if (c->enters && c->fault)
        ck_assert_msg(was_current(CTX0), "%s: failed before any switch (the fault is not "
                      "after the enter)", c->name);
    release_leftovers();
}
END_TEST

/* A failure before any work: arguments refused, nothing switched. */
START_TEST(refused_arguments_switch_nothing)
{
    watch_reset(CTX1);
    uint64_t f;
    ck_assert_status(cuabi_device_memory_info(&f, NULL, dev0), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_stream_options so = CUABI_STREAM_OPTIONS_INIT;
    so.flags = 0x80;
    cuabi_stream *s;
    ck_assert_status(cuabi_stream_create(&s, dev0, &so), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 0;                                      /* zero grid */
    c.block[0] = 32;
    c.device = dev0;
    ck_assert_status(cuabi_launch(kern, pack, &c), CUABI_ERROR_LAUNCH_CONFIG);
    uint8_t junk[CUABI_IPC_DESCRIPTOR_SIZE] = { 0 };
    cuabi_buffer *b;
    ck_assert_status(cuabi_ipc_buffer_import(&b, junk, sizeof junk), CUABI_ERROR_IPC);
    ck_assert_ptr_eq(fake_current, CTX1);
    ck_assert_int_eq(nseen, 0);
}
END_TEST

/* The exceptions: cuabi_device_set_current sets it, and keeps it set. */
START_TEST(set_current_sets_it)
{
    watch_reset(CTX1);
    ck_assert_ok(cuabi_device_set_current(dev0));
    ck_assert_ptr_eq(fake_current, CTX0);
    ck_assert_ok(cuabi_device_synchronize(dev1));   /* other work: device 0 stays */
    ck_assert_ptr_eq(fake_current, CTX0);
    watch_reset(CTX0);
    ck_assert_ok(cuabi_device_set_current(dev0));   /* already: one query, no switch */
    ck_assert_int_eq(nseen, 0);
    ck_assert_int_eq(get_calls, 1);
    watch_reset(NULL);
    ck_assert_ok(cuabi_device_set_current(dev1));
    ck_assert_ptr_eq(fake_current, CTX1);
}
END_TEST

/* A graph with no device of its own (an empty node) is instantiated in the
 * caller's context; with none current, in device 0's (the runtime's default
 * device), and none is current after (an H200 refused the instantiate with no
 * context: a thread whose first cuabi call made the graph). */
START_TEST(device_less_graph_instantiates_in_device_0_without_a_context)
{
    cuabi_graph *g;
    cuabi_graph_node *n;
    cuabi_graph_exec *e;
    cuabi_device *d;
    ck_assert_ok(cuabi_graph_create(&g));
    ck_assert_ok(cuabi_graph_add_empty(&n, g, NULL, 0));
    cuabi_graph_node_release(n);
    watch_reset(NULL);
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ptr_null(fake_current);
    ck_assert_msg(was_current(CTX0), "device 0's context was not made current");
    ck_assert_ok(cuabi_graph_exec_device(&d, e));
    ck_assert_ptr_eq(d, dev0);
    ck_assert_ok(cuabi_graph_exec_launch(e, s0));
    cuabi_graph_exec_release(e);
    watch_reset(CTX1);                 /* the caller's context: used, kept */
    ck_assert_ok(cuabi_graph_instantiate(&e, g, NULL));
    ck_assert_ptr_eq(fake_current, CTX1);
    ck_assert_int_eq(nseen, 0);
    ck_assert_ok(cuabi_graph_exec_device(&d, e));
    ck_assert_ptr_null(d);
    cuabi_graph_exec_release(e);
    cuabi_graph_release(g);
}
END_TEST

/* NCCL enqueues in the CUDA runtime's current device, whatever the stream:
 * a collective on device 1's created stream makes device 1's context
 * current for the call (two H200s: a rank on device 1 with no context
 * current failed with "Cuda failure 'invalid argument'"), and gives the
 * caller's back. */
START_TEST(nccl_collective_on_a_created_stream_enters_its_device)
{
    void *p = calloc(1, 64);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_wrap(&b, dev1, CUABI_MEMORY_DEVICE, (uintptr_t)p, 64, NULL, NULL));
    watch_reset(NULL);
    ck_assert_ok(cuabi_nccl_all_reduce(comm[1], NULL, 0, b, 0, 16, CUABI_NCCL_FLOAT32,
                                       CUABI_NCCL_SUM, s1));
    ck_assert_msg(was_current(CTX1), "device 1's context was not current for the call");
    ck_assert_ptr_null(fake_current);
    watch_reset(CTX0);
    ck_assert_ok(cuabi_nccl_all_reduce(comm[1], NULL, 0, b, 0, 16, CUABI_NCCL_FLOAT32,
                                       CUABI_NCCL_SUM, s1));
    ck_assert_msg(was_current(CTX1), "device 1's context was not current for the call");
    ck_assert_ptr_eq(fake_current, CTX0);
    cuabi_buffer_destroy(b);
    free(p);
}
END_TEST

/* Init-all makes each rank's device current in turn and gives the caller's
 * back (the 2 x H100 finding), failing or not. */
START_TEST(init_all_gives_it_back)
{
    cuabi_device *devs[2] = { dev0, dev1 };
    cuabi_nccl_comm *c[2];
    watch_reset(NULL);
    ck_assert_ok(cuabi_nccl_comm_init_all(c, devs, 2, NULL));
    ck_assert_ptr_null(fake_current);
    ck_assert(was_current(CTX0) && was_current(CTX1));
    cuabi_nccl_comm_release(c[0]);
    cuabi_nccl_comm_release(c[1]);
    watch_reset(CTX0);
    nccl_fail("ncclCommInitRankConfig", 2, 1);
    ck_assert_status(cuabi_nccl_comm_init_all(c, devs, 2, NULL), CUABI_ERROR_NCCL);
    nccl_fail("", 0, 0);
    ck_assert_ptr_eq(fake_current, CTX0);
}
END_TEST

/* Every thread has its own current context: a call on one thread changes
 * nothing on another, and each gets its own back. */
static void *other_thread(void *arg)
{
    (void)arg;
    fake_current = CTX1;
    for (int i = 0; i < 200; i++) {
        if (cuabi_device_synchronize(dev0) != CUABI_SUCCESS || fake_current != CTX1)
            return (void *)1;
    }
    return NULL;
}

START_TEST(threads_keep_their_own)
{
    pthread_t t;
    fake_current = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    for (int i = 0; i < 200; i++) {
        ck_assert_ok(cuabi_device_synchronize(dev1));
        ck_assert_ptr_null(fake_current);
    }
    void *ret;
    pthread_join(t, &ret);
    ck_assert_ptr_null(ret);
}
END_TEST

/* ------------------------------------- a failed restore after a creation
 *
 * The work succeeded, then giving the caller's context back failed: the call
 * fails, so it must hand out nothing and keep nothing (a caller seeing an
 * error releases nothing). Each creator below runs on device 0 with device
 * 1's context current and the restore refused; *made is what it wrote to
 * its out parameter (poisoned before, so an untouched one shows). */

#define POISON ((void *)(uintptr_t)0xdead)

static cuabi_status m_stream(void **made)
{
    cuabi_stream *s = POISON;
    cuabi_status st = cuabi_stream_create(&s, dev0, NULL);
    *made = s;
    return st;
}

static cuabi_status m_event(void **made)
{
    cuabi_event *e = POISON;
    cuabi_status st = cuabi_event_create(&e, dev0, NULL);
    *made = e;
    return st;
}

static cuabi_status m_ipc_event(void **made)
{
    cuabi_event *e = POISON;
    cuabi_status st = cuabi_ipc_event_create(&e, dev0);
    *made = e;
    return st;
}

static cuabi_status m_pool(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_memory_resource_pool_create(&r, dev0, NULL);
    *made = r;
    return st;
}

static cuabi_status m_device_default(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_memory_resource_device_default(&r, dev0);
    *made = r;
    return st;
}

static cuabi_status m_pinned_resource(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_memory_resource_pinned(&r, dev0);
    *made = r;
    return st;
}

static cuabi_status m_pool_at_location(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_pool_at_location(&r, dev0, CUABI_LOCATION_DEVICE, 0,
                                             CUABI_POOL_DEFAULT);
    *made = r;
    return st;
}

/* Memory from the pool on the legacy stream (the device's context). */
static cuabi_status m_allocate(void **made)
{
    uintptr_t p = 0xdead;
    cuabi_status st = cuabi_memory_resource_allocate(&p, pool0, 256, 0, NULL);
    *made = (void *)p;
    return st;
}

static cuabi_status m_buffer(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_buffer_allocate(&b, pool0, 256, 0, NULL);
    *made = b;
    return st;
}

static cuabi_status m_pinned_buffer(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_buffer_allocate(&b, pinned0, 64, 0, s0);
    *made = b;
    return st;
}

static cuabi_status m_prepared(void **made)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 1;
    c.block[0] = 32;
    c.device = dev0;
    cuabi_prepared *pl = POISON;
    cuabi_status st = cuabi_prepared_create(&pl, kern, pack, &c);
    *made = pl;
    return st;
}

/* A graph of device 0 (a memset node of its memory), made before the
 * restore is refused; the creator's graph and buffer go with m_graph_done. */
static cuabi_graph *mgraph;
static cuabi_buffer *mbuf;
static void *mmem;

static void m_graph_setup(void)
{
    mmem = calloc(1, 256);
    ck_assert_ok(cuabi_buffer_wrap(&mbuf, dev0, CUABI_MEMORY_DEVICE, (uintptr_t)mmem, 256, NULL,
                                   NULL));
    ck_assert_ok(cuabi_graph_create(&mgraph));
    cuabi_graph_node *n;
    ck_assert_ok(cuabi_graph_add_memset(&n, mgraph, NULL, 0, mbuf, 0, 7, 4, 16));
    cuabi_graph_node_release(n);
}

static cuabi_status m_instantiate(void **made)
{
    cuabi_graph_exec *e = POISON;
    cuabi_status st = cuabi_graph_instantiate(&e, mgraph, NULL);
    *made = e;
    return st;
}

static cuabi_status m_graph_node(void **made)
{
    cuabi_graph_node *n = POISON;
    cuabi_status st = cuabi_graph_add_memset(&n, mgraph, NULL, 0, mbuf, 0, 1, 4, 16);
    *made = n;
    return st;
}

static cuabi_status m_nccl_init_rank(void **made)
{
    cuabi_nccl_unique_id id;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    cuabi_nccl_comm *c = POISON;
    cuabi_status st = cuabi_nccl_comm_init_rank(&c, dev0, 1, &id, 0, NULL);
    *made = c;
    return st;
}

static cuabi_status m_nccl_register(void **made)
{
    cuabi_nccl_registration *r = POISON;
    cuabi_status st = cuabi_nccl_register(&r, comm[0], mbuf);
    *made = r;
    return st;
}

/* A borrowed CUmodule (the objcode's library owns it): a failed call must not
 * hand it out either. */
static cuabi_status m_objcode_module(void **made)
{
    uintptr_t m = (uintptr_t)POISON;
    cuabi_status st = cuabi_objcode_module(&m, code, dev0);
    *made = (void *)m;
    return st;
}

/* ---- arrays, textures, surfaces (fake_texture.h, installed for these) */

static cuabi_array *marr;              /* 16 x 16 float, surface load/store */
static cuabi_mipmapped_array *mmip;    /* 32 x 32 float, 3 levels */
static cuabi_buffer *mdbuf;            /* device memory of pool0 */
static cuabi_view *mdview, *mhview;    /* 100 float2 of it; a 4 x 6 RGBA8 host image */
static uint8_t mimg[4][6][4];

static cuabi_view *host_image_view(void)
{
    static int64_t shape[3] = { 4, 6, 4 };
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = mimg;
    t.device.device_type = kDLCPU;
    t.ndim = 3;
    t.dtype.code = CUABI_DTYPE_UINT;
    t.dtype.bits = 8;
    t.dtype.lanes = 1;
    t.shape = shape;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dltensor(&v, &t, 0));
    return v;
}

static void m_texture_setup(void)
{
    fake_texture_install();
    cuabi_array_desc d = CUABI_ARRAY_DESC_INIT;
    d.width = 16;
    d.height = 16;
    d.format = CUABI_ARRAY_FORMAT_FLOAT32;
    d.num_channels = 1;
    d.flags = CUABI_ARRAY_SURFACE_LDST;
    ck_assert_ok(cuabi_array_create(&marr, dev0, &d));
    d.width = d.height = 32;
    d.flags = 0;
    ck_assert_ok(cuabi_mipmapped_array_create(&mmip, dev0, &d, 3));
    ck_assert_ok(cuabi_buffer_allocate(&mdbuf, pool0, 1 << 16, 0, NULL));
    int64_t shape[2] = { 100, 2 };
    ck_assert_ok(cuabi_view_create(&mdview, mdbuf, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    mhview = host_image_view();
}

static void m_texture_done(void)
{
    cuabi_view_release(mhview);
    cuabi_view_release(mdview);
    cuabi_buffer_destroy(mdbuf);
    cuabi_mipmapped_array_release(mmip);
    cuabi_array_release(marr);
    ck_assert_int_eq(fake_live_arrays, 0);
    ck_assert_int_eq(fake_live_mipmaps, 0);
    ck_assert_int_eq(fake_live_texobjs, 0);
    ck_assert_int_eq(fake_live_surfobjs, 0);
}

static cuabi_status m_array(void **made)
{
    cuabi_array_desc d = CUABI_ARRAY_DESC_INIT;
    d.width = 8;
    d.height = 8;
    d.format = CUABI_ARRAY_FORMAT_UINT8;
    d.num_channels = 4;
    cuabi_array *a = POISON;
    cuabi_status st = cuabi_array_create(&a, dev0, &d);
    *made = a;
    return st;
}

/* A host image copied into a new array of device 0 (the legacy stream). */
static cuabi_status m_array_from_view(void **made)
{
    cuabi_array *a = POISON;
    cuabi_status st = cuabi_array_create_from_view(&a, mhview, 4, 0, dev0, NULL);
    *made = a;
    return st;
}

static cuabi_status m_mipmapped(void **made)
{
    cuabi_array_desc d = CUABI_ARRAY_DESC_INIT;
    d.width = 16;
    d.height = 16;
    d.format = CUABI_ARRAY_FORMAT_FLOAT32;
    d.num_channels = 1;
    cuabi_mipmapped_array *m = POISON;
    cuabi_status st = cuabi_mipmapped_array_create(&m, dev0, &d, 2);
    *made = m;
    return st;
}

static cuabi_status m_mipmap_level(void **made)
{
    cuabi_array *a = POISON;
    cuabi_status st = cuabi_mipmapped_array_get_level(&a, mmip, 1);
    *made = a;
    return st;
}

static cuabi_status m_texture_array(void **made)
{
    cuabi_texture *t = POISON;
    cuabi_status st = cuabi_texture_create_from_array(&t, marr, NULL);
    *made = t;
    return st;
}

static cuabi_status m_texture_mipmapped(void **made)
{
    cuabi_texture_desc d = CUABI_TEXTURE_DESC_INIT;
    d.normalized_coords = 1;
    d.mipmap_filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    d.max_mipmap_level_clamp = 2.0f;
    cuabi_texture *t = POISON;
    cuabi_status st = cuabi_texture_create_from_mipmapped_array(&t, mmip, &d);
    *made = t;
    return st;
}

static cuabi_status m_texture_view(void **made)
{
    cuabi_texture *t = POISON;
    cuabi_status st = cuabi_texture_create_from_view(&t, mdview, 2, NULL);
    *made = t;
    return st;
}

/* An array made, filled and textured in one call: neither may stay. */
static cuabi_status m_texture_image(void **made)
{
    cuabi_texture *t = POISON;
    cuabi_status st = cuabi_texture_create_from_image(&t, mhview, 4, 0, NULL, dev0);
    *made = t;
    return st;
}

static cuabi_status m_surface(void **made)
{
    cuabi_surface *s = POISON;
    cuabi_status st = cuabi_surface_create(&s, marr);
    *made = s;
    return st;
}

/* ---------------------------------------------------- TMA tensor maps */

static cuabi_view *mtview;   /* device 0's memory at a made-up address: never read */

static cuabi_view *made_up_device_view(int ndim, const int64_t *shape)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)(uintptr_t)0x300000;
    t.device.device_type = kDLCUDA;
    t.device.device_id = 0;
    t.ndim = ndim;
    t.dtype.code = CUABI_DTYPE_FLOAT;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = (int64_t *)shape;
    cuabi_view *v;
    ck_assert_ok(cuabi_view_from_dltensor(&v, &t, 0));
    return v;
}

static void m_tensormap_setup(void)
{
    static const int64_t shape[4] = { 2, 10, 12, 16 };   /* NHWC */
    fake_driver_install_tensormaps();
    mtview = made_up_device_view(4, shape);
}

static void m_tensormap_done(void) { cuabi_view_release(mtview); }

static cuabi_status m_tensormap_tiled(void **made)
{
    uint32_t box[4] = { 1, 2, 4, 16 };
    cuabi_tensormap *tm = POISON;
    cuabi_status st = cuabi_tensormap_encode_tiled(&tm, mtview, box, 4, NULL);
    *made = tm;
    return st;
}

static cuabi_status m_tensormap_im2col(void **made)
{
    int lower[2] = { -1, -1 }, upper[2] = { 1, 1 };
    cuabi_tensormap *tm = POISON;
    cuabi_status st = cuabi_tensormap_encode_im2col(&tm, mtview, lower, upper, 2, 16, 32, NULL);
    *made = tm;
    return st;
}

/* ------------------------------- VMM and multicast (fake_vmm.h) */

enum { G = 64 << 10 };   /* the fake's granularity */
static cuabi_memory_resource *mvmm, *mvmm_fabric;
static cuabi_multicast *mmc;
static cuabi_buffer *mexported;
static uint8_t mchunk[CUABI_IPC_DESCRIPTOR_SIZE];

static void m_vmm_setup(void)
{
    fake_vmm_install();
    fake_attr_override(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 1);   /* said, not assumed */
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.granularity = CUABI_VMM_GRANULARITY_MINIMUM;
    ck_assert_ok(cuabi_vmm_resource_create(&mvmm, dev0, &o));
    o.handle_type = CUABI_VMM_HANDLE_FABRIC;
    ck_assert_ok(cuabi_vmm_resource_create(&mvmm_fabric, dev0, &o));
    /* one chunk exported as if by our parent (test_vmm does the same) */
    ck_assert_ok(cuabi_vmm_buffer_allocate(&mexported, mvmm_fabric, G, 0));
    int fd;
    ck_assert_ok(cuabi_vmm_export_chunk(&fd, mchunk, sizeof mchunk, mexported, 0));
    ck_assert_int_eq(fd, -1);
    cuabi__ipc_put(mchunk + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(mchunk);
    cuabi_device *devs[2] = { dev0, dev1 };
    ck_assert_ok(cuabi_multicast_create(&mmc, devs, 2, G, CUABI_VMM_HANDLE_NONE));
}

static void m_vmm_done(void)
{
    cuabi_multicast_release(mmc);
    cuabi_buffer_destroy(mexported);
    cuabi_memory_resource_release(mvmm_fabric);
    cuabi_memory_resource_release(mvmm);
    ck_assert_int_eq(fake_vmm_live_handles, 0);
    ck_assert_int_eq(fake_vmm_live_reservations, 0);
    ck_assert_int_eq(fake_vmm_live_maps, 0);
    ck_assert_int_eq(fake_mc_live, 0);
}

static cuabi_status m_vmm_resource(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_vmm_resource_create(&r, dev0, NULL);
    *made = r;
    return st;
}

static cuabi_status m_vmm_buffer(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_vmm_buffer_allocate(&b, mvmm, G, 4 * G);
    *made = b;
    return st;
}

static cuabi_status m_vmm_import(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_vmm_import(&b, mvmm_fabric, NULL, 1, mchunk, sizeof mchunk);
    *made = b;
    return st;
}

/* A team of both devices: made in device 0's context (the team's first). */
static cuabi_status m_multicast(void **made)
{
    cuabi_device *devs[2] = { dev0, dev1 };
    cuabi_multicast *m = POISON;
    cuabi_status st = cuabi_multicast_create(&m, devs, 2, G, CUABI_VMM_HANDLE_NONE);
    *made = m;
    return st;
}

static cuabi_status m_multicast_map(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_multicast_map(&b, mmc);
    *made = b;
    return st;
}

/* ---------------------------------------- green contexts (fake_green.h) */

static cuabi_sm_resource *mgroup;

static void m_green_setup(void)
{
    fake_green_install();
    cuabi_sm_resource *all;
    ck_assert_ok(cuabi_device_sm_resource(&all, dev0));
    cuabi_sm_split_options o = CUABI_SM_SPLIT_OPTIONS_INIT;
    o.min_count = 16;
    size_t n = 1;
    ck_assert_ok(cuabi_sm_resource_split(&mgroup, &n, NULL, all, &o));
    ck_assert_uint_eq(n, 1);
    cuabi_sm_resource_release(all);
}

static void m_green_done(void)
{
    cuabi_sm_resource_release(mgroup);
    ck_assert_int_eq(fake_live_greens, 0);
    fake_green_reset();
}

static cuabi_status m_green(void **made)
{
    cuabi_green_ctx *g = POISON;
    cuabi_status st = cuabi_green_ctx_create(&g, dev0, &mgroup, 1);
    *made = g;
    return st;
}

static cuabi_status m_green_workqueue(void **made)
{
    cuabi_workqueue_config wq = CUABI_WORKQUEUE_CONFIG_INIT;
    wq.concurrency_limit = 2;
    cuabi_green_ctx *g = POISON;
    cuabi_status st = cuabi_green_ctx_create_with_workqueue(&g, dev0, &mgroup, 1, &wq);
    *made = g;
    return st;
}

/* ------------------------------------------- IPC imports (fake_multigpu.h)
 * What "the parent process" exported (descriptors made our parent's, as
 * c_ipc_import does), made with device 0 current; imported with device 1's. */

static cuabi_memory_resource *mipc_res, *mipc_pool, *mipc_mapped;
static cuabi_buffer *mipc_buf, *mipc_pool_buf;
static cuabi_event *mipc_event;
static uint8_t mdesc_buf[CUABI_IPC_DESCRIPTOR_SIZE], mdesc_event[CUABI_IPC_DESCRIPTOR_SIZE],
    mdesc_pool[CUABI_IPC_DESCRIPTOR_SIZE], mdesc_pool_buf[CUABI_IPC_DESCRIPTOR_SIZE];
static int mpool_fd = -1;

static void from_parent(uint8_t *desc)
{
    cuabi__ipc_put(desc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(desc);
}

static void m_ipc_setup(void)
{
    CUcontext keep = fake_current;
    fake_current = CTX0;
    ck_assert_ok(cuabi_ipc_memory_resource(&mipc_res, dev0));
    ck_assert_ok(cuabi_buffer_allocate(&mipc_buf, mipc_res, 1000, 0, NULL));
    ck_assert_ok(cuabi_ipc_buffer_export(mdesc_buf, sizeof mdesc_buf, mipc_buf));
    from_parent(mdesc_buf);
    ck_assert_ok(cuabi_ipc_event_create(&mipc_event, dev0));
    ck_assert_ok(cuabi_ipc_event_export(mdesc_event, sizeof mdesc_event, mipc_event));
    from_parent(mdesc_event);
    ck_assert_ok(cuabi_ipc_pool_create(&mipc_pool, dev0, NULL));
    ck_assert_ok(cuabi_ipc_pool_export(&mpool_fd, mdesc_pool, sizeof mdesc_pool, mipc_pool));
    from_parent(mdesc_pool);
    ck_assert_ok(cuabi_ipc_pool_import(&mipc_mapped, mpool_fd, mdesc_pool, sizeof mdesc_pool));
    ck_assert_ok(cuabi_buffer_allocate(&mipc_pool_buf, mipc_pool, 256, 0, NULL));
    ck_assert_ok(cuabi_ipc_buffer_export(mdesc_pool_buf, sizeof mdesc_pool_buf, mipc_pool_buf));
    from_parent(mdesc_pool_buf);
    fake_current = keep;
}

static void m_ipc_done(void)
{
    fake_current = CTX0;
    cuabi_memory_resource_release(mipc_mapped);
    cuabi_buffer_destroy(mipc_pool_buf);
    cuabi_memory_resource_release(mipc_pool);
    close(mpool_fd);
    mpool_fd = -1;
    cuabi_event_release(mipc_event);
    cuabi_buffer_destroy(mipc_buf);
    cuabi_memory_resource_release(mipc_res);
    ck_assert_int_eq(fake_ipc_open_maps, 0);
}

static cuabi_status m_ipc_buffer_import(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_ipc_buffer_import(&b, mdesc_buf, sizeof mdesc_buf);
    *made = b;
    return st;
}

static cuabi_status m_ipc_event_import(void **made)
{
    cuabi_event *e = POISON;
    cuabi_status st = cuabi_ipc_event_import(&e, mdesc_event, sizeof mdesc_event);
    *made = e;
    return st;
}

static cuabi_status m_ipc_pool_create(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_ipc_pool_create(&r, dev0, NULL);
    *made = r;
    return st;
}

/* The pool is mapped here already (m_ipc_setup): the live resource, one
 * more reference, which a failed call must not hand out either. */
static cuabi_status m_ipc_pool_import(void **made)
{
    cuabi_memory_resource *r = POISON;
    cuabi_status st = cuabi_ipc_pool_import(&r, mpool_fd, mdesc_pool, sizeof mdesc_pool);
    *made = r;
    return st;
}

static cuabi_status m_ipc_pool_buffer_import(void **made)
{
    cuabi_buffer *b = POISON;
    cuabi_status st = cuabi_ipc_pool_buffer_import(&b, mipc_mapped, mdesc_pool_buf,
                                                   sizeof mdesc_pool_buf);
    *made = b;
    return st;
}

static cuabi_status m_ipc_pool_buffers_import(void **made)
{
    cuabi_buffer *b[1] = { POISON };
    uint64_t address = 0xdead;
    cuabi_status st = cuabi_ipc_pool_buffers_import(b, &address, mipc_mapped, mdesc_pool_buf,
                                                    sizeof mdesc_pool_buf, 1);
    ck_assert_msg(st == CUABI_SUCCESS || address == 0, "a failed batch import left address %#llx",
                  (unsigned long long)address);
    *made = b[0];
    return st;
}

/* ----------------------------------------------------- graph capture */

/* A capture of device 0's per-thread default stream (device 0's context)
 * begun with the restore allowed; its end is the call under test. */
static cuabi_graph *minto;

static void capture_begun(cuabi_graph *into)
{
    bool refuse = refuse_ctx1;
    refuse_ctx1 = false;
    if (into)
        ck_assert_ok(cuabi_graph_capture_begin_to_graph(per_thread0, into,
                                                        CUABI_CAPTURE_MODE_RELAXED));
    else
        ck_assert_ok(cuabi_graph_capture_begin(per_thread0, CUABI_CAPTURE_MODE_RELAXED));
    ck_assert_ptr_eq(fake_current, CTX1);
    refuse_ctx1 = refuse;
    nseen = 0;
    get_calls = 0;
}

static cuabi_status m_capture_end(void **made)
{
    capture_begun(NULL);
    cuabi_graph *g = POISON;
    cuabi_status st = cuabi_graph_capture_end(&g, per_thread0);
    *made = g;
    return st;
}

static void m_capture_into_setup(void) { ck_assert_ok(cuabi_graph_create(&minto)); }
static void m_capture_into_done(void) { cuabi_graph_release(minto); }

/* Captured into the caller's graph: the graph handed out is that one (a new
 * reference to it). */
static cuabi_status m_capture_end_into(void **made)
{
    capture_begun(minto);
    cuabi_graph *g = POISON;
    cuabi_status st = cuabi_graph_capture_end(&g, per_thread0);
    *made = g;
    return st;
}

/* ---------------------------------------------------------------- NCCL */

static cuabi_nccl_comm *mcomm;   /* one rank on device 0 */

static void m_nccl_split_setup(void)
{
    cuabi_nccl_unique_id id;
    ck_assert_ok(cuabi_nccl_get_unique_id(&id));
    ck_assert_ok(cuabi_nccl_comm_init_rank(&mcomm, dev0, 1, &id, 0, NULL));
}

static void m_nccl_split_done(void) { cuabi_nccl_comm_release(mcomm); }

static cuabi_status m_nccl_split(void **made)
{
    cuabi_nccl_comm *c = POISON;
    cuabi_status st = cuabi_nccl_comm_split(&c, mcomm, 0, 0, NULL);
    *made = c;
    return st;
}

static void m_graph_done(void)
{
    cuabi_graph_release(mgraph);
    cuabi_buffer_destroy(mbuf);
    free(mmem);
}

typedef struct made_case {
    const char *name;
    cuabi_status (*fn)(void **made);
    void (*setup)(void);   /* before the first call (NULL: none) */
    void (*done)(void);    /* after the first call's object is given back */
} made_case;

#define GRAPH m_graph_setup, m_graph_done
#define TEXTURE m_texture_setup, m_texture_done
#define TENSORMAP m_tensormap_setup, m_tensormap_done
#define VMM m_vmm_setup, m_vmm_done
#define GREEN m_green_setup, m_green_done
#define IPC m_ipc_setup, m_ipc_done

static const made_case made_cases[] = {
    { "cuabi_stream_create", m_stream, NULL, NULL },
    { "cuabi_event_create", m_event, NULL, NULL },
    { "cuabi_ipc_event_create", m_ipc_event, NULL, NULL },
    { "cuabi_memory_resource_pool_create", m_pool, NULL, NULL },
    { "cuabi_memory_resource_device_default", m_device_default, NULL, NULL },
    { "cuabi_memory_resource_pinned", m_pinned_resource, NULL, NULL },
    { "cuabi_pool_at_location", m_pool_at_location, NULL, NULL },
    { "cuabi_memory_resource_allocate", m_allocate, NULL, NULL },
    { "cuabi_buffer_allocate", m_buffer, NULL, NULL },
    { "cuabi_buffer_allocate (pinned)", m_pinned_buffer, NULL, NULL },
    { "cuabi_prepared_create", m_prepared, NULL, NULL },
    { "cuabi_graph_instantiate", m_instantiate, GRAPH },
    { "cuabi_graph_add_memset", m_graph_node, GRAPH },
    { "cuabi_nccl_comm_init_rank", m_nccl_init_rank, NULL, NULL },
    { "cuabi_nccl_register", m_nccl_register, GRAPH },
    { "cuabi_objcode_module", m_objcode_module, NULL, NULL },
    { "cuabi_array_create", m_array, TEXTURE },
    { "cuabi_array_create_from_view", m_array_from_view, TEXTURE },
    { "cuabi_mipmapped_array_create", m_mipmapped, TEXTURE },
    { "cuabi_mipmapped_array_get_level", m_mipmap_level, TEXTURE },
    { "cuabi_texture_create_from_array", m_texture_array, TEXTURE },
    { "cuabi_texture_create_from_mipmapped_array", m_texture_mipmapped, TEXTURE },
    { "cuabi_texture_create_from_view", m_texture_view, TEXTURE },
    { "cuabi_texture_create_from_image", m_texture_image, TEXTURE },
    { "cuabi_surface_create", m_surface, TEXTURE },
    { "cuabi_tensormap_encode_tiled", m_tensormap_tiled, TENSORMAP },
    { "cuabi_tensormap_encode_im2col", m_tensormap_im2col, TENSORMAP },
    { "cuabi_vmm_resource_create", m_vmm_resource, VMM },
    { "cuabi_vmm_buffer_allocate", m_vmm_buffer, VMM },
    { "cuabi_vmm_import", m_vmm_import, VMM },
    { "cuabi_multicast_create", m_multicast, VMM },
    { "cuabi_multicast_map", m_multicast_map, VMM },
    { "cuabi_green_ctx_create", m_green, GREEN },
    { "cuabi_green_ctx_create_with_workqueue", m_green_workqueue, GREEN },
    { "cuabi_ipc_buffer_import", m_ipc_buffer_import, IPC },
    { "cuabi_ipc_event_import", m_ipc_event_import, IPC },
    { "cuabi_ipc_pool_create", m_ipc_pool_create, NULL, NULL },
    { "cuabi_ipc_pool_import (mapped already)", m_ipc_pool_import, IPC },
    { "cuabi_ipc_pool_buffer_import", m_ipc_pool_buffer_import, IPC },
    { "cuabi_ipc_pool_buffers_import", m_ipc_pool_buffers_import, IPC },
    { "cuabi_graph_capture_end", m_capture_end, NULL, NULL },
    { "cuabi_graph_capture_end (into a graph)", m_capture_end_into, m_capture_into_setup,
      m_capture_into_done },
    { "cuabi_nccl_comm_split", m_nccl_split, m_nccl_split_setup, m_nccl_split_done },
};
enum { NMADE = sizeof made_cases / sizeof made_cases[0] };

/* What the fake drivers hold. */
static const char *const census_names[] = {
    "streams", "events", "allocations", "pools", "execs", "graphs", "arrays",
    "mipmapped arrays", "texture objects", "surface objects", "VMM handles",
    "VMM reservations", "VMM mappings", "multicast objects", "green contexts",
    "IPC memory mappings", "imported pool pointers", "NCCL communicators",
    "NCCL registrations",
};
enum { NCENSUS = sizeof census_names / sizeof census_names[0] };
typedef struct fake_census {
    int n[NCENSUS];
} fake_census;

static fake_census census(void)
{
    int imported = 0;
    for (int i = 0; i < FAKE_IMPORT_SLOTS; i++)
        imported += fake_imported_ptrs[i] != 0;
    return (fake_census){ { fake_live_streams, fake_live_events, fake_live_allocs,
                            fake_live_pools, fake_live_execs, fake_live_graphs, fake_live_arrays,
                            fake_live_mipmaps, fake_live_texobjs, fake_live_surfobjs,
                            fake_vmm_live_handles, fake_vmm_live_reservations,
                            fake_vmm_live_maps, fake_mc_live, fake_live_greens,
                            fake_ipc_open_maps, imported, nccl_live_comms(),
                            nccl_live_registrations() } };
}

START_TEST(failed_restore_hands_out_nothing)
{
    const made_case *c = &made_cases[_i];
    if (c->setup)
        c->setup();
    void *made = NULL;
    watch_reset(CTX1);
    (void)c->fn(&made);          /* first use: what is retained or cached once */
    ck_assert_msg(made != NULL && made != POISON, "%s: %s", c->name,
                  cuabi_last_error()->message);
    uintptr_t first = (uintptr_t)made;
    size_t live = cuabi__handle_live_count();
    fake_census before = census();
    watch_reset(CTX1);
    refuse_ctx1 = true;
    made = POISON;
    cuabi_status st = c->fn(&made);
    refuse_ctx1 = false;
    ck_assert_msg(was_current(CTX0), "%s: device 0's context was never made current", c->name);
    fake_current = CTX1;
    ck_assert_msg(st != CUABI_SUCCESS, "%s: succeeded though the caller's context could not be "
                  "given back", c->name);
    ck_assert_msg(strstr(cuabi_last_error()->message, "could not be made current") != NULL,
                  "%s: %s", c->name, cuabi_last_error()->message);
    ck_assert_msg(made == NULL, "%s: failed, but its out parameter holds %p", c->name, made);
    ck_assert_msg(cuabi__handle_live_count() == live, "%s: %zu live handles after the failure, "
                  "%zu before", c->name, cuabi__handle_live_count(), live);
    fake_census after = census();
    for (int i = 0; i < NCENSUS; i++)
        ck_assert_msg(after.n[i] == before.n[i], "%s: the fake drivers hold %d %s after the "
                      "failure, %d before", c->name, after.n[i], census_names[i], before.n[i]);
    /* The first call's object, given back as its caller would. */
    if (c->fn == m_allocate)
        ck_assert_ok(cuabi_memory_resource_deallocate(pool0, first, 256, 0, NULL));
    else if (c->fn == m_buffer || c->fn == m_pinned_buffer)
        ck_assert_ok(cuabi_buffer_destroy((cuabi_buffer *)first));
    else if (c->fn == m_stream)
        ck_assert_ok(cuabi_stream_release((cuabi_stream *)first));
    else if (c->fn == m_event || c->fn == m_ipc_event)
        ck_assert_ok(cuabi_event_release((cuabi_event *)first));
    else if (c->fn == m_pool || c->fn == m_device_default || c->fn == m_pinned_resource ||
             c->fn == m_pool_at_location)
        ck_assert_ok(cuabi_memory_resource_release((cuabi_memory_resource *)first));
    else if (c->fn == m_prepared)
        ck_assert_ok(cuabi_prepared_release((cuabi_prepared *)first));
    else if (c->fn == m_instantiate)
        ck_assert_ok(cuabi_graph_exec_release((cuabi_graph_exec *)first));
    else if (c->fn == m_graph_node)
        ck_assert_ok(cuabi_graph_node_release((cuabi_graph_node *)first));
    else if (c->fn == m_nccl_init_rank)
        ck_assert_ok(cuabi_nccl_comm_release((cuabi_nccl_comm *)first));
    else if (c->fn == m_nccl_register)
        ck_assert_ok(cuabi_nccl_registration_destroy((cuabi_nccl_registration *)first));
    else if (c->fn == m_array || c->fn == m_array_from_view || c->fn == m_mipmap_level)
        ck_assert_ok(cuabi_array_release((cuabi_array *)first));
    else if (c->fn == m_mipmapped)
        ck_assert_ok(cuabi_mipmapped_array_release((cuabi_mipmapped_array *)first));
    else if (c->fn == m_texture_array || c->fn == m_texture_mipmapped ||
             c->fn == m_texture_view || c->fn == m_texture_image)
        ck_assert_ok(cuabi_texture_release((cuabi_texture *)first));
    else if (c->fn == m_surface)
        ck_assert_ok(cuabi_surface_release((cuabi_surface *)first));
    else if (c->fn == m_tensormap_tiled || c->fn == m_tensormap_im2col)
        ck_assert_ok(cuabi_tensormap_release((cuabi_tensormap *)first));
    else if (c->fn == m_vmm_resource || c->fn == m_ipc_pool_create || c->fn == m_ipc_pool_import)
        ck_assert_ok(cuabi_memory_resource_release((cuabi_memory_resource *)first));
    else if (c->fn == m_vmm_buffer || c->fn == m_vmm_import || c->fn == m_multicast_map ||
             c->fn == m_ipc_buffer_import || c->fn == m_ipc_pool_buffer_import ||
             c->fn == m_ipc_pool_buffers_import)
        ck_assert_ok(cuabi_buffer_destroy((cuabi_buffer *)first));
    else if (c->fn == m_multicast)
        ck_assert_ok(cuabi_multicast_release((cuabi_multicast *)first));
    else if (c->fn == m_green || c->fn == m_green_workqueue)
        ck_assert_ok(cuabi_green_ctx_release((cuabi_green_ctx *)first));
    else if (c->fn == m_ipc_event_import)
        ck_assert_ok(cuabi_event_release((cuabi_event *)first));
    else if (c->fn == m_capture_end || c->fn == m_capture_end_into)
        ck_assert_ok(cuabi_graph_release((cuabi_graph *)first));
    else if (c->fn == m_nccl_split)
        ck_assert_ok(cuabi_nccl_comm_release((cuabi_nccl_comm *)first));
    if (c->done)
        c->done();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("context_rule");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, other_context_comes_back, 0, NCASES);
    tcase_add_loop_test(tc, no_context_stays_none, 0, NCASES);
    tcase_add_loop_test(tc, hot_path_switches_nothing, 0, NCASES);
    tcase_add_loop_test(tc, failure_gives_the_context_back, 0, NCASES);
    tcase_add_loop_test(tc, failed_restore_hands_out_nothing, 0, NMADE);
    suite_add_tcase(s, tc);
    tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, refused_arguments_switch_nothing);
    tcase_add_test(tc, set_current_sets_it);
    tcase_add_test(tc, device_less_graph_instantiates_in_device_0_without_a_context);
    tcase_add_test(tc, nccl_collective_on_a_created_stream_enters_its_device);
    tcase_add_test(tc, init_all_gives_it_back);
    tcase_add_test(tc, threads_keep_their_own);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
