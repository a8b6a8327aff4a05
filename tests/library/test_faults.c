/* Fault injection across every module (SQLite's method): each scenario is a
 * whole piece of work through the public API — devices/streams/events,
 * memory/buffers/views/DLPack, objcode/kernels, programs through the cache,
 * PTX through nvJitLink, NVVM IR through libNVVM, the linker, fatbins through
 * the fatbinary tool and nvFatbin, NVML through the fake NVML — that cleans
 * up after itself. For N = 1, 2, ... the Nth allocation, or the Nth call of
 * any loaded entry point (driver, NVRTC, nvJitLink, libNVVM, nvFatbin,
 * NVML), or the Nth call of one named entry
 * point, is made to fail, once or for ever; the scenario must then return
 * an error status with a message (or succeed where the failed call is one
 * the library may do without, such as fetching a log), leak no handle and
 * no driver object, and the same scenario must succeed right after. The loop
 * ends when a run no longer reaches the Nth call. LeakSanitizer (the
 * --enable-sanitizers build) checks the host memory.
 *
 * Set CUABI_FAULTS_REPORT=1 to print the counts per entry point (the figures
 * of docs/RELIABILITY.md). */
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"
#include "fake_driver.h"
#include "fake_memory.h"
#include "fake_graph.h"
#include "fake_multigpu.h"
#include "fake_texture.h"
#include "fake_green.h"
#include "fake_checkpoint.h"
#include "fake_vmm.h"
#include "fault_wrap.h"
#include "compile/cache.h"
#include "compile/fatbin.h"
#include "runtime/graph.h"
#include "runtime/ipc.h"
#include "compile/objcode.h"
#include "util/file.h"
#include "platform/nccl_lib.h"

#include <dlfcn.h>

/* ------------------------------------------------------------ scenarios */

typedef cuabi_status (*scenario_fn)(void);

#define STEP(expr)                                                            \
    do {                                                                       \
        if (st == CUABI_SUCCESS) st = (expr);                                  \
    } while (0)

static cuabi_status sc_device(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_event *a = NULL, *b = NULL;
    float ms;
    STEP(cuabi_device_get(&d, 1));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_event_create(&a, d, NULL));
    STEP(cuabi_event_create(&b, d, NULL));
    STEP(cuabi_event_record(a, s));
    STEP(cuabi_stream_wait_event(s, a));
    STEP(cuabi_event_record(b, s));
    STEP(cuabi_event_synchronize(b));
    STEP(cuabi_event_elapsed_ms(&ms, a, b));
    STEP(cuabi_stream_synchronize(s));
    if (b) cuabi_event_release(b);
    if (a) cuabi_event_release(a);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

static void dl_deleter(DLManagedTensorVersioned *self)
{
    ++*(int *)self->manager_ctx;
    free(self);
}

/* A host tensor we produce, imported then released: the deleter must run
 * exactly once whether the import succeeds or fails. */
static cuabi_status import_one(void)
{
    static float data[12];
    static int64_t shape[2] = { 3, 4 };
    DLManagedTensorVersioned *mt = calloc(1, sizeof *mt);
    mt->version.major = 1;
    int deletes = 0;
    mt->manager_ctx = &deletes;
    mt->deleter = dl_deleter;
    mt->dl_tensor.data = data;
    mt->dl_tensor.device.device_type = kDLCPU;
    mt->dl_tensor.ndim = 2;
    mt->dl_tensor.dtype = (DLDataType){ kDLFloat, 32, 1 };
    mt->dl_tensor.shape = shape;
    cuabi_view *v = NULL;
    cuabi_status st = cuabi_view_from_dlpack_versioned(&v, mt);
    if (st == CUABI_SUCCESS) {
        uint64_t n;
        st = cuabi_view_nbytes(&n, v);
        cuabi_view_release(v);
    }
    /* Not ck_assert: this runs on worker threads too. */
    if (deletes != 1)
        return cuabi__error(CUABI_ERROR_INTERNAL, "test: deleter ran %d times", deletes);
    return st;
}

/* A producer's DLPack C exchange table (cuabi_view_from_exchange), in the
 * memory scenario: under every fault the tensor it hands out is deleted
 * exactly once. */
static int exchange_export(void *py_object, DLManagedTensorVersioned **out)
{
    static float data[12];
    static int64_t shape[2] = { 3, 4 };
    DLManagedTensorVersioned *mt = calloc(1, sizeof *mt);
    mt->version.major = 1;
    mt->manager_ctx = py_object;          /* the deletes counter */
    mt->deleter = dl_deleter;
    mt->dl_tensor.data = data;
    mt->dl_tensor.device.device_type = kDLCPU;
    mt->dl_tensor.ndim = 2;
    mt->dl_tensor.dtype = (DLDataType){ kDLFloat, 32, 1 };
    mt->dl_tensor.shape = shape;
    *out = mt;
    return 0;
}

static cuabi_status exchange_one(void)
{
    DLPackExchangeAPI api;
    memset(&api, 0, sizeof api);
    api.header.version.major = 1;
    api.header.version.minor = 3;
    api.managed_tensor_from_py_object_no_sync = exchange_export;
    int deletes = 0;
    cuabi_view *v = NULL;
    cuabi_status st = cuabi_view_from_exchange(&v, &api, &deletes);
    if (st == CUABI_SUCCESS) {
        uint64_t n;
        st = cuabi_view_nbytes(&n, v);
        cuabi_view_release(v);
    }
    if (deletes != 1)
        return cuabi__error(CUABI_ERROR_INTERNAL, "test: deleter ran %d times", deletes);
    return st;
}

static cuabi_status sc_memory(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_memory_resource *host = NULL, *pool = NULL, *dflt = NULL;
    cuabi_buffer *hb = NULL, *db = NULL;
    cuabi_view *v = NULL, *sl = NULL, *back = NULL;
    DLManagedTensorVersioned *out = NULL;
    DLManagedTensor *legacy = NULL;
    int64_t shape[2] = { 4, 8 }, start[2] = { 1, 0 }, stop[2] = { 4, 8 }, step[2] = { 1, 2 };
    float ones[32];
    for (int i = 0; i < 32; i++) ones[i] = 1.0f;
    cuabi_memory_pool_options po = CUABI_MEMORY_POOL_OPTIONS_INIT;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_memory_resource_host(&host));
    STEP(cuabi_memory_resource_device_default(&dflt, d));
    STEP(cuabi_memory_resource_pool_create(&pool, d, &po));
    STEP(cuabi_buffer_allocate(&hb, host, sizeof ones, 64, NULL));
    STEP(cuabi_buffer_allocate(&db, pool, sizeof ones, 256, NULL));
    STEP(cuabi_buffer_copy_from_host(hb, 0, ones, sizeof ones, NULL));
    STEP(cuabi_buffer_copy(db, 0, hb, 0, sizeof ones, NULL));
    STEP(cuabi_view_create(&v, hb, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    STEP(cuabi_view_slice(&sl, v, 2, start, stop, step));
    STEP(cuabi_view_to_dlpack_versioned(&out, sl));
    STEP(cuabi_view_to_dlpack(&legacy, v));
    STEP(cuabi_view_from_dltensor(&back, &legacy->dl_tensor, 0));
    STEP(import_one());
    STEP(exchange_one());
    if (back) cuabi_view_release(back);
    if (legacy) legacy->deleter(legacy);
    if (out) out->deleter(out);
    if (sl) cuabi_view_release(sl);
    if (v) cuabi_view_release(v);
    if (db) cuabi_buffer_destroy(db);
    if (hb) cuabi_buffer_destroy(hb);
    if (pool) cuabi_memory_resource_release(pool);
    if (dflt) cuabi_memory_resource_release(dflt);
    if (host) cuabi_memory_resource_release(host);
    if (d) cuabi_device_release(d);
    return st;
}

static void *cubin_sm90;
static size_t cubin_sm90_size;

static cuabi_status sc_objcode(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_objcode *o = NULL;
    cuabi_kernel *k = NULL;
    size_t count = 0, params = 0;
    const char *name;
    int attr;
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    uintptr_t module = 0;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, cubin_sm90, cubin_sm90_size, "k.cubin"));
    STEP(cuabi_objcode_kernel_count(&count, o));
    for (size_t i = 0; i < count && st == CUABI_SUCCESS; i++)
        st = cuabi_objcode_kernel_name(&name, o, i);
    STEP(cuabi_objcode_kernel_resources(&r, o, "add", "sm_90"));
    STEP(cuabi_objcode_load(o));
    STEP(cuabi_objcode_module(&module, o, d));
    STEP(cuabi_objcode_get_kernel(&k, o, "add"));
    STEP(cuabi_kernel_attribute(&attr, k, d, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    STEP(cuabi_kernel_param_count(&params, k));
    STEP(cuabi_kernel_get_resources(&r, k));
    if (k) cuabi_kernel_release(k);
    if (o) cuabi_objcode_release(o);
    if (d) cuabi_device_release(d);
    return st;
}

static const char kernel_src[] =
    "template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }\n"
    "extern \"C\" __global__ void fill(float *x) { x[threadIdx.x] = 1.0f; }\n";

static cuabi_status compile_once(int cache, cuabi_code_type output)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_program *p = NULL;
    cuabi_objcode *o = NULL;
    const char *exprs[] = { "scale<float>" }, *lowered, *log;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.output = output;
    opts.cache = cache;
    opts.lto = opts.relocatable = output == CUABI_CODE_LTOIR;
    opts.name_expressions = exprs;
    opts.num_name_expressions = 1;
    STEP(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "k.cu"));
    STEP(cuabi_program_compile(&o, p, &opts));
    STEP(cuabi_program_lowered_name(&lowered, p, "scale<float>"));
    STEP(cuabi_program_log(&log, p));
    STEP(cuabi_objcode_lowered_name(&lowered, o, "scale<float>"));
    if (o) cuabi_objcode_release(o);
    if (p) cuabi_program_release(p);
    return st;
}

/* Cache off: the whole NVRTC path every time. */
static cuabi_status sc_compile(void) { return compile_once(0, CUABI_CODE_CUBIN); }
static cuabi_status sc_ltoir(void) { return compile_once(0, CUABI_CODE_LTOIR); }

/* Through the cache: miss and store, memory hit, disk hit. */
static cuabi_status sc_cache(void)
{
    cuabi__cache_reset_for_test();
    cuabi_status st = cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL);
    STEP(compile_once(1, CUABI_CODE_PTX));
    STEP(compile_once(1, CUABI_CODE_PTX));
    cuabi__cache_reset_for_test();
    STEP(compile_once(1, CUABI_CODE_PTX));
    return st;
}

static const char ptx_src[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n  ret;\n}\n";

/* PTX source compiled to CUBIN (nvJitLink under the program module). */
static cuabi_status sc_ptx(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_program *p = NULL;
    cuabi_objcode *o = NULL;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.cache = 0;
    STEP(cuabi_program_create(&p, CUABI_CODE_PTX, ptx_src, 0, "k.ptx"));
    STEP(cuabi_program_compile(&o, p, &opts));
    if (o) cuabi_objcode_release(o);
    if (p) cuabi_program_release(p);
    return st;
}

/* NVVM IR (text) with a libdevice call, to PTX with a name lookup and to
 * LTO-IR; cache off, then through the cache (miss, memory and disk hits). */
static const char nvvm_src[] =
    "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-"
    "i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
    "target triple = \"nvptx64-nvidia-cuda\"\n"
    "declare float @__nv_expf(float)\n"
    "define void @k(float* %x) {\n"
    "  %v = load float, float* %x\n"
    "  %e = call float @__nv_expf(float %v)\n"
    "  store float %e, float* %x\n"
    "  ret void\n"
    "}\n"
    "!nvvm.annotations = !{!0}\n"
    "!0 = !{void (float*)* @k, !\"kernel\", i32 1}\n"
    "!nvvmir.version = !{!1}\n"
    "!1 = !{i32 2, i32 0, i32 3, i32 1}\n";

static cuabi_status nvvm_once(int cache, cuabi_code_type output)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_program *p = NULL;
    cuabi_objcode *o = NULL;
    const char *names[] = { "k" }, *lowered, *log;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.output = output;
    opts.cache = cache;
    opts.libdevice = 1;
    opts.name_expressions = names;
    opts.num_name_expressions = 1;
    STEP(cuabi_program_create(&p, CUABI_CODE_NVVM, nvvm_src, 0, NULL));
    STEP(cuabi_program_compile(&o, p, &opts));
    STEP(cuabi_program_lowered_name(&lowered, p, "k"));
    STEP(cuabi_program_log(&log, p));
    if (o) cuabi_objcode_release(o);
    if (p) cuabi_program_release(p);
    return st;
}

/* Malformed IR: the compile error (with libNVVM's log) is the expected
 * outcome, anything else is the run's failure. */
static cuabi_status nvvm_malformed(void)
{
    cuabi_program *p = NULL;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.output = CUABI_CODE_PTX;
    opts.cache = 0;
    cuabi_status st = cuabi_program_create(&p, CUABI_CODE_NVVM, "define void @k() {\n bogus\n}\n",
                                           0, NULL);
    if (st == CUABI_SUCCESS) {
        st = cuabi_program_compile(NULL, p, &opts);
        st = st == CUABI_ERROR_COMPILE ? CUABI_SUCCESS
           : st == CUABI_SUCCESS ? cuabi__error(CUABI_ERROR_INTERNAL, "malformed IR compiled")
                                 : st;
    }
    if (p) cuabi_program_release(p);
    return st;
}

static cuabi_status sc_nvvm(void)
{
    cuabi_status st = nvvm_once(0, CUABI_CODE_PTX);
    STEP(nvvm_malformed());
    STEP(nvvm_once(0, CUABI_CODE_LTOIR));
    cuabi__cache_reset_for_test();
    STEP(cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL));
    STEP(nvvm_once(1, CUABI_CODE_PTX));
    STEP(nvvm_once(1, CUABI_CODE_PTX));
    cuabi__cache_reset_for_test();
    STEP(nvvm_once(1, CUABI_CODE_PTX));
    return st;
}

/* cuda.core's compile-side names: the compiler's program kept by a program
 * that handed it out, the rendered argument lists, an NVVM extra module,
 * PCH options and a linker's session opened on demand (cache off and on). */
static cuabi_status sc_backend(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_program *p = NULL, *v = NULL;
    cuabi_linker *l = NULL;
    cuabi_objcode *o = NULL, *out = NULL;
    void *h;
    char buf[2048];
    size_t size = sizeof buf;
    cuabi_pch_status pch;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.output = CUABI_CODE_PTX;
    opts.cache = 0;
    opts.pch_verbose = 0;
    STEP(cuabi_program_options_render(buf, &size, CUABI_CODE_CUDA_CXX, &opts));
    STEP(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "k.cu"));
    STEP(cuabi_program_backend_handle(&h, p));
    STEP(cuabi_program_compile(&o, p, &opts));
    STEP(cuabi_program_backend_handle(&h, p));
    STEP(cuabi_program_pch_status(&pch, p));
    const char *names[] = { "more.ll" }, *srcs[] = { nvvm_src };
    cuabi_program_options nv = CUABI_PROGRAM_OPTIONS_INIT;
    nv.arch = "sm_90";
    nv.output = CUABI_CODE_PTX;
    nv.libdevice = 1;
    nv.extra_source_names = names;
    nv.extra_sources = srcs;
    nv.num_extra_sources = 1;
    static const char empty_ir[] =
        "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-"
        "i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
        "target triple = \"nvptx64-nvidia-cuda\"\n"
        "!nvvmir.version = !{!0}\n!0 = !{i32 2, i32 0, i32 3, i32 1}\n";
    STEP(cuabi_program_create(&v, CUABI_CODE_NVVM, empty_ir, 0, NULL));
    STEP(cuabi_program_backend_handle(&h, v));
    STEP(cuabi_program_compile(NULL, v, &nv));
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    lo.arch = "sm_90";
    size = sizeof buf;
    STEP(cuabi_linker_options_render(buf, &size, &lo));
    STEP(cuabi_linker_create(&l, &lo));
    STEP(cuabi_linker_add_objcode(l, o));
    STEP(cuabi_linker_backend_handle(&h, l));
    STEP(cuabi_linker_complete(&out, l, CUABI_CODE_CUBIN));
    if (out) cuabi_objcode_release(out);
    if (l) cuabi_linker_destroy(l);
    if (o) cuabi_objcode_release(o);
    if (v) cuabi_program_release(v);
    if (p) cuabi_program_release(p);
    return st;
}

static void *lto_a, *lto_b;
static size_t lto_a_size, lto_b_size;

/* LTO-IR of two units linked to CUBIN and to PTX, then a PTX input; with
 * `cache` 0 every call reaches nvJitLink. */
static cuabi_status link_all(int cache)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_linker *l = NULL, *l2 = NULL, *l3 = NULL;
    cuabi_objcode *a = NULL, *out = NULL, *ptx = NULL, *lptx = NULL;
    const char *log;
    size_t count;
    int hit;
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = "sm_90";
    o.lto = 1;
    o.verbose = 1;
    o.cache = cache;
    STEP(cuabi_objcode_from_memory(&a, CUABI_CODE_LTOIR, lto_a, lto_a_size, "a.ltoir"));
    STEP(cuabi_linker_create(&l, &o));
    STEP(cuabi_linker_add_objcode(l, a));
    STEP(cuabi_linker_add_data(l, CUABI_CODE_LTOIR, lto_b, lto_b_size, "b.ltoir"));
    STEP(cuabi_linker_complete(&out, l, CUABI_CODE_CUBIN));
    STEP(cuabi_linker_info_log(&log, l));
    STEP(cuabi_linker_error_log(&log, l));
    STEP(cuabi_linker_cache_hit(&hit, l));
    STEP(cuabi_objcode_kernel_count(&count, out));
    o.verbose = 0;
    STEP(cuabi_linker_create(&l3, &o));
    STEP(cuabi_linker_add_objcode(l3, a));
    STEP(cuabi_linker_add_data(l3, CUABI_CODE_LTOIR, lto_b, lto_b_size, "b.ltoir"));
    STEP(cuabi_linker_complete(&lptx, l3, CUABI_CODE_PTX));
    o.lto = 0;
    o.verbose = 0;
    STEP(cuabi_linker_create(&l2, &o));
    STEP(cuabi_linker_add_data(l2, CUABI_CODE_PTX, ptx_src, sizeof ptx_src - 1, "k.ptx"));
    STEP(cuabi_linker_complete(&ptx, l2, CUABI_CODE_CUBIN));
    if (ptx) cuabi_objcode_release(ptx);
    if (out) cuabi_objcode_release(out);
    if (lptx) cuabi_objcode_release(lptx);
    if (l3) cuabi_linker_destroy(l3);
    if (l2) cuabi_linker_destroy(l2);
    if (l) cuabi_linker_destroy(l);
    if (a) cuabi_objcode_release(a);
    return st;
}

static cuabi_status sc_linker(void) { return link_all(0); }

/* Links through the cache: miss and store, memory hit, disk hit. */
static cuabi_status sc_link_cache(void)
{
    cuabi__cache_reset_for_test();
    cuabi_status st = cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL);
    STEP(link_all(1));
    STEP(link_all(1));
    cuabi__cache_reset_for_test();
    STEP(link_all(1));
    return st;
}

/* Fatbins (issue 16): a program compiled to one (NVRTC per architecture,
 * then packed), its images read, listed and extracted, resources per
 * architecture, a fatbin packed from objcodes, and a linker's fatbin.
 * `packer` 2: through the fatbinary tool; 1: through nvFatbin (wrapped by
 * fault_wrap.h: the real one where it loads, else the fake), so that every
 * machine takes the same path. */
static cuabi_status fatbin_all(int packer)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_program *p = NULL;
    cuabi_objcode *fat = NULL, *img = NULL, *packed = NULL, *linked = NULL;
    cuabi_linker *l = NULL;
    const char *by = NULL, *want = packer == 1 ? "nvfatbin" : "fatbinary";
    size_t n;
    int archs[4];
    cuabi_code_type type;
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    cuabi_linker_options lo = CUABI_LINKER_OPTIONS_INIT;
    opts.arch = "sm_90,compute_90";
    opts.output = CUABI_CODE_FATBIN;
    opts.cache = 0;
    lo.arch = "sm_90";
    cuabi__fatbin_force_packer(packer);
    STEP(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, kernel_src, 0, "k.cu"));
    STEP(cuabi_program_compile(&fat, p, &opts));
    STEP(cuabi_fatbin_image_count(&n, fat));
    STEP(cuabi_fatbin_image_info(&type, archs, fat, 1));
    STEP(cuabi_fatbin_archs(archs, 4, &n, fat));
    STEP(cuabi_fatbin_packer(&by, fat));
    if (st == CUABI_SUCCESS && strcmp(by, want) != 0)
        st = cuabi__error(CUABI_ERROR_INTERNAL, "test: packed by '%s', not %s", by, want);
    STEP(cuabi_objcode_kernel_resources(&r, fat, "fill", "sm_90"));
    STEP(cuabi_fatbin_extract(&img, fat, "sm_90"));
    STEP(cuabi_fatbin_create(&packed, &img, 1));
    STEP(cuabi_linker_create(&l, &lo));
    STEP(cuabi_linker_add_data(l, CUABI_CODE_PTX, ptx_src, sizeof ptx_src - 1, "k.ptx"));
    STEP(cuabi_linker_complete(&linked, l, CUABI_CODE_FATBIN));
    cuabi__fatbin_force_packer(0);
    if (linked) cuabi_objcode_release(linked);
    if (l) cuabi_linker_destroy(l);
    if (packed) cuabi_objcode_release(packed);
    if (img) cuabi_objcode_release(img);
    if (fat) cuabi_objcode_release(fat);
    if (p) cuabi_program_release(p);
    return st;
}

static cuabi_status sc_fatbin(void) { return fatbin_all(2); }
static cuabi_status sc_nvfatbin(void) { return fatbin_all(1); }

/* A borrowed view of device memory at a made-up address (nothing reads it). */
static cuabi_status device_view(cuabi_view **out, uintptr_t addr, int ndim, const int64_t *shape)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)addr;
    t.device.device_type = kDLCUDA;
    t.ndim = ndim;
    t.dtype = (DLDataType){ kDLFloat, 32, 1 };
    t.shape = (int64_t *)shape;
    return cuabi_view_from_dltensor(out, &t, 0);
}

/* Tensor maps: tiled and im2col encodings, info, bytes, a pack slot, a new
 * address. */
static cuabi_status sc_tensormap(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_view *v = NULL, *w = NULL, *img = NULL;
    cuabi_tensormap *tiled = NULL, *im2col = NULL;
    cuabi_argpack *p = NULL;
    static const int64_t shape[2] = { 64, 64 }, nhwc[4] = { 1, 8, 8, 16 };
    const uint32_t box[2] = { 16, 16 };
    const int lower[2] = { -1, -1 }, upper[2] = { 1, 1 };
    cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
    o.swizzle = CUABI_TENSORMAP_SWIZZLE_64B;
    cuabi_tensormap_info info = CUABI_TENSORMAP_INFO_INIT;
    uint64_t bytes[16];
    STEP(device_view(&v, 0x100000, 2, shape));
    STEP(device_view(&w, 0x200000, 2, shape));
    STEP(device_view(&img, 0x300000, 4, nhwc));
    STEP(cuabi_tensormap_encode_tiled(&tiled, v, box, 2, &o));
    STEP(cuabi_tensormap_encode_im2col(&im2col, img, lower, upper, 2, 16, 64, NULL));
    STEP(cuabi_tensormap_get_info(&info, tiled));
    STEP(cuabi_tensormap_bytes(bytes, sizeof bytes, im2col));
    STEP(cuabi_argpack_create(&p, "tensormap, ptr"));
    STEP(cuabi_argpack_set_tensormap(p, 0, tiled));
    STEP(cuabi_tensormap_replace_address(tiled, w));
    if (p) cuabi_argpack_release(p);
    if (im2col) cuabi_tensormap_release(im2col);
    if (tiled) cuabi_tensormap_release(tiled);
    if (img) cuabi_view_release(img);
    if (w) cuabi_view_release(w);
    if (v) cuabi_view_release(v);
    return st;
}

/* Launches with every attribute: checked, one-shot and prepared. */
static cuabi_status sc_launch_attrs(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_event *pe = NULL, *ce = NULL;
    cuabi_objcode *o = NULL;
    cuabi_kernel *k = NULL;
    cuabi_argpack *p = NULL;
    cuabi_prepared *pl = NULL;
    cuabi_event_options eo = CUABI_EVENT_OPTIONS_INIT;
    eo.flags = CUABI_EVENT_DISABLE_TIMING;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_event_create(&pe, d, &eo));
    STEP(cuabi_event_create(&ce, d, &eo));
    STEP(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, cubin_sm90, cubin_sm90_size, "k.cubin"));
    STEP(cuabi_objcode_get_kernel(&k, o, "add"));
    STEP(cuabi_argpack_create_for_kernel(&p, k));   /* the layout the kernel reports */
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.preferred_cluster[0] = 4;
    a.programmatic_stream_serialization = 1;
    a.programmatic_event = pe;
    a.launch_completion_event = ce;
    a.priority = -1;
    a.access_policy_base = 0x100000;
    a.access_policy_bytes = 1;     /* the fake device's largest window */
    a.mem_sync_domain_map[0] = a.mem_sync_domain_map[1] = 0;
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 8;
    c.cluster[0] = 2;
    c.stream = s;
    c.attributes = &a;
    STEP(cuabi_launch_check(k, p, &c));
    STEP(cuabi_launch(k, p, &c));
    STEP(cuabi_prepared_create(&pl, k, p, &c));
    STEP(cuabi_prepared_launch(pl));
    STEP(cuabi_stream_synchronize(s));
    if (pl) cuabi_prepared_release(pl);
    if (p) cuabi_argpack_release(p);
    if (k) cuabi_kernel_release(k);
    if (o) cuabi_objcode_release(o);
    if (ce) cuabi_event_release(ce);
    if (pe) cuabi_event_release(pe);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

static void sc_graph_host(void *payload)
{
    ++*(int *)payload;
}

/* cuabi_stream_launch_host_func's payload: freed by its release, once (a
 * leak or a double free under any fault shows in LeakSanitizer / ASan). */
static void sc_host_free(void *payload)
{
    free(payload);
}

static void sc_host_func(cuabi_stream *s, cuabi_status *st)
{
    if (*st != CUABI_SUCCESS)
        return;
    int *payload = calloc(1, sizeof *payload);
    *st = payload ? cuabi_stream_launch_host_func(s, sc_graph_host, payload, sc_host_free)
                  : CUABI_ERROR_OUT_OF_MEMORY;
    if (*st != CUABI_SUCCESS)
        free(payload);      /* on an error the payload stays the caller's */
}

/* Graphs: explicit nodes of every kind and edges, a conditional body, instantiate,
 * upload, launch, both updates, Graphviz text, then a capture of a launch,
 * a copy, a host function and a temporary allocation, instantiated and
 * launched; a host function on the stream before the capture. */
static cuabi_status sc_graph(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_memory_resource *pool = NULL;
    cuabi_buffer *a = NULL, *b = NULL, *tmp = NULL;
    cuabi_objcode *o = NULL;
    cuabi_kernel *k = NULL;
    cuabi_argpack *p = NULL;
    cuabi_graph *g = NULL, *cap = NULL, *body = NULL, *child = NULL;
    cuabi_graph_node *n1 = NULL, *n2 = NULL, *n3 = NULL, *n4 = NULL, *cond = NULL, *bk = NULL,
                     *q = NULL, *hn = NULL, *ch = NULL, *er = NULL, *ew = NULL, *cl = NULL;
    cuabi_graph_node *ma = NULL, *mf = NULL, *gone = NULL;   /* memory nodes, a destroyed one */
    cuabi_graph_node *ps = NULL, *pc = NULL;                  /* by address */
    uintptr_t mptr = 0, bptr = 0;
    size_t msize = 0;
    cuabi_event *ev = NULL;
    int calls = 0;
    cuabi_graph_exec *e = NULL, *e2 = NULL;
    uint64_t h = 0;
    size_t count, size;
    char text[4096];
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_memory_resource_device_default(&pool, d));
    STEP(cuabi_buffer_allocate(&a, pool, 64, 0, s));
    STEP(cuabi_buffer_allocate(&b, pool, 64, 0, s));
    STEP(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, cubin_sm90, cubin_sm90_size, "k.cubin"));
    STEP(cuabi_objcode_get_kernel(&k, o, "add"));
    /* The fake driver says 3 parameters of 8 bytes; when reading them fails
     * the kernel takes the CUBIN's word (4: float *, const float *, int,
     * double). Either way slots 0 and 1 hold the buffers. */
    size_t nparams = 0;
    STEP(cuabi_kernel_param_count(&nparams, k));
    STEP(cuabi_argpack_create(&p, nparams == 4 ? "buffer, buffer, i32, f64"
                                               : "buffer, buffer, u64"));
    STEP(cuabi_argpack_set_buffer(p, 0, a));
    STEP(cuabi_argpack_set_buffer(p, 1, b));
    STEP(cuabi_argpack_set_int(p, 2, 0));
    c.device = d;
    STEP(cuabi_graph_create(&g));
    STEP(cuabi_graph_add_memset(&n1, g, NULL, 0, a, 0, 0, 4, 16));
    STEP(cuabi_graph_add_kernel(&n2, g, &n1, 1, k, p, &c));
    STEP(cuabi_graph_add_memcpy(&n3, g, &n2, 1, b, 0, a, 0, 64));
    STEP(cuabi_graph_add_empty(&n4, g, NULL, 0));
    STEP(cuabi_graph_add_dependencies(g, &n3, &n4, 1));
    STEP(cuabi_graph_remove_dependencies(g, &n3, &n4, 1));
    STEP(cuabi_graph_add_dependencies(g, &n3, &n4, 1));
    STEP(cuabi_graph_kernel_node_set(n2, p, NULL));
    c.cluster[0] = 1;
    STEP(cuabi_graph_add_kernel(&cl, g, &n4, 1, k, p, &c));
    c.cluster[0] = 0;
    STEP(cuabi_event_create(&ev, d, NULL));
    STEP(cuabi_graph_add_event_record(&er, g, &n4, 1, ev));
    STEP(cuabi_graph_add_event_wait(&ew, g, &er, 1, ev));
    STEP(cuabi_graph_create(&child));
    STEP(cuabi_graph_add_host(&hn, child, NULL, 0, sc_graph_host, &calls));
    STEP(cuabi_graph_add_child(&ch, g, &ew, 1, child));
    STEP(cuabi_graph_node_count(&count, g));
    STEP(cuabi_graph_node_dependency(&q, n4, 0));
    size = sizeof text;
    STEP(cuabi_graph_debug_dot_text(text, &size, g, CUABI_GRAPH_DOT_VERBOSE));
    STEP(cuabi_graph_conditional_handle_create(&h, g, d, 0, CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    STEP(cuabi_graph_add_conditional(&cond, g, &n4, 1, h, CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    STEP(cuabi_graph_node_body(&body, cond, 0));
    STEP(cuabi_graph_add_kernel(&bk, body, NULL, 0, k, p, &c));
    STEP(cuabi_buffer_pointer(&bptr, b));
    STEP(cuabi_graph_add_memset_ptr(&ps, g, &n4, 1, d, bptr, b, 0, 4, 4, 2, 32));
    STEP(cuabi_graph_add_memcpy_ptr(&pc, g, &ps, 1, d, bptr, b, bptr + 32, b, 16));
    STEP(cuabi_graph_add_empty(&gone, g, &n4, 1));
    STEP(cuabi_graph_node_destroy(gone));   /* before memory nodes: CUDA keeps their graph's */
    STEP(cuabi_graph_add_mem_alloc(&ma, g, &n4, 1, d, CUABI_MEMORY_DEVICE, 64, NULL, 0));
    STEP(cuabi_graph_node_mem_info(&mptr, &msize, ma));
    STEP(cuabi_graph_add_mem_free(&mf, g, &ma, 1, mptr));
    STEP(cuabi_graph_instantiate(&e, g, NULL));
    STEP(cuabi_graph_exec_upload(e, s));
    STEP(cuabi_graph_exec_launch(e, s));
    STEP(cuabi_graph_exec_update_kernel(e, n2, p, NULL));
    STEP(cuabi_graph_exec_update(e, g, NULL));
    c.stream = s;
    sc_host_func(s, &st);           /* an ordinary stream: run and released */
    STEP(cuabi_graph_capture_begin(s, CUABI_CAPTURE_MODE_GLOBAL));
    bool capturing = st == CUABI_SUCCESS;
    STEP(cuabi_launch(k, p, &c));
    STEP(cuabi_buffer_copy(b, 0, a, 0, 64, s));
    sc_host_func(s, &st);           /* captured: the graph keeps the payload */
    STEP(cuabi_buffer_allocate(&tmp, pool, 64, 0, s));
    if (tmp) /* a release: a refused free is the driver's word, as elsewhere */
        (void)cuabi_buffer_free_async(tmp, s);
    if (capturing) {
        cuabi_status es = cuabi_graph_capture_end(&cap, s);
        if (es != CUABI_SUCCESS) {
            /* A failed end abandons cuabi's capture; end the driver's too. */
            cuabi_graph *again = NULL;
            if (cuabi_graph_capture_end(&again, s) == CUABI_SUCCESS)
                cuabi_graph_release(again);
        }
        STEP(es);
    }
    STEP(cuabi_graph_node_count(&count, cap));
    STEP(cuabi_graph_instantiate(&e2, cap, NULL));
    STEP(cuabi_graph_exec_launch(e2, s));
    if (e2) cuabi_graph_exec_release(e2);
    e2 = NULL;
    if (cap) cuabi_graph_release(cap);
    /* GraphBuilder's way (issue 24): a capture into a graph, a while node
     * at its place whose body another stream captures, a child graph. */
    cuabi_stream *s2 = NULL;
    cuabi_graph *into = NULL, *loop_body = NULL, *ended = NULL;
    cuabi_graph_node *cw = NULL, *cc = NULL;
    uint64_t hw = 0;
    STEP(cuabi_stream_create(&s2, d, NULL));
    STEP(cuabi_graph_create(&into));
    STEP(cuabi_graph_capture_begin_to_graph(s, into, CUABI_CAPTURE_MODE_GLOBAL));
    bool outer = st == CUABI_SUCCESS;
    STEP(cuabi_buffer_memset(a, 0, 0, 4, 16, s));
    STEP(cuabi_graph_capture_conditional_handle(&hw, s, 0, CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT));
    STEP(cuabi_graph_capture_add_conditional(&cw, s, hw, CUABI_GRAPH_CONDITIONAL_WHILE, 1));
    STEP(cuabi_graph_node_body(&loop_body, cw, 0));
    STEP(cuabi_graph_capture_begin_to_graph(s2, loop_body, CUABI_CAPTURE_MODE_GLOBAL));
    bool inner = st == CUABI_SUCCESS;
    c.stream = s2;
    STEP(cuabi_launch(k, p, &c));
    c.stream = s;
    if (inner) {
        cuabi_status es = cuabi_graph_capture_end(&ended, s2);
        cuabi_capture_status cs = CUABI_CAPTURE_STATUS_NONE;
        /* A failed end ends the driver's capture into a graph too; if it
         * could not, end it here. */
        if (es != CUABI_SUCCESS && cuabi_graph_capture_status(&cs, s2) == CUABI_SUCCESS &&
            cs != CUABI_CAPTURE_STATUS_NONE) {
            if (cuabi_graph_capture_end(&ended, s2) == CUABI_SUCCESS)
                cuabi_graph_release(ended);
        } else if (es == CUABI_SUCCESS) {
            cuabi_graph_release(ended);
        }
        ended = NULL;
        STEP(es);
    }
    if (child)
        STEP(cuabi_graph_capture_add_child(&cc, s, child));
    STEP(cuabi_buffer_copy(b, 0, a, 0, 64, s));
    if (outer) {
        cuabi_status es = cuabi_graph_capture_end(&ended, s);
        cuabi_capture_status cs = CUABI_CAPTURE_STATUS_NONE;
        if (es != CUABI_SUCCESS && cuabi_graph_capture_status(&cs, s) == CUABI_SUCCESS &&
            cs != CUABI_CAPTURE_STATUS_NONE) {
            if (cuabi_graph_capture_end(&ended, s) == CUABI_SUCCESS)
                cuabi_graph_release(ended);
        } else if (es == CUABI_SUCCESS) {
            cuabi_graph_release(ended);
        }
        STEP(es);
    }
    STEP(cuabi_graph_instantiate(&e2, into, NULL));
    STEP(cuabi_graph_exec_launch(e2, s));
    if (e2) cuabi_graph_exec_release(e2);
    if (cw) cuabi_graph_node_release(cw);
    if (cc) cuabi_graph_node_release(cc);
    if (loop_body) cuabi_graph_release(loop_body);
    if (into) cuabi_graph_release(into);
    if (s2) cuabi_stream_release(s2);
    if (e) cuabi_graph_exec_release(e);
    cuabi_graph_node *nodes[] = { n1, n2, n3, n4, cond, bk, q, hn, ch, er, ew, cl, ma, mf, gone, ps, pc };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
        if (nodes[i]) cuabi_graph_node_release(nodes[i]);
    if (body) cuabi_graph_release(body);
    if (g) cuabi_graph_release(g);
    if (child) cuabi_graph_release(child);
    if (ev) cuabi_event_release(ev);
    if (p) cuabi_argpack_release(p);
    if (k) cuabi_kernel_release(k);
    if (o) cuabi_objcode_release(o);
    if (b) cuabi_buffer_destroy(b);
    if (a) cuabi_buffer_destroy(a);
    if (pool) cuabi_memory_resource_release(pool);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

/* Collectives (issue 23) against the fake NCCL: a unique id, a communicator
 * by rank (nonblocking setup, then the blocking child), collectives over a
 * buffer and a view, a group, a registration, synchronize, a split and
 * finalize. Afterwards no NCCL communicator or registration is left, under
 * every fault (an injected NCCL failure returns ncclInternalError). */
static int (*nccl_live_comms)(void), (*nccl_live_regs)(void);

static void nccl_fake_load(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/.libs/fake_nccl.so",
             getenv("CUABI_TEST_BUILDDIR") ? getenv("CUABI_TEST_BUILDDIR") : ".");
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(dl != NULL, "%s: %s", path, dlerror());
    *(void **)&nccl_live_comms = dlsym(dl, "fake_nccl_live_comms");
    *(void **)&nccl_live_regs = dlsym(dl, "fake_nccl_live_registrations");
    setenv("CUABI_NCCL_PATH", path, 1);
    cuabi__nccl_install_fake(NULL);
}

static void nccl_release_fn(uintptr_t p, size_t n, void *payload)
{
    (void)n; (void)payload;
    free((void *)p);
}

static cuabi_status sc_nccl(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_buffer *b = NULL;
    cuabi_view *v = NULL;
    cuabi_nccl_comm *c = NULL, *k = NULL;
    cuabi_nccl_registration *g = NULL;
    cuabi_nccl_unique_id id;
    cuabi_nccl_comm_options o = CUABI_NCCL_COMM_OPTIONS_INIT;
    o.timeout_ms = 5000;
    o.comm_name = "faults";
    int64_t shape[1] = { 8 };
    void *mem = calloc(1, 64);
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_buffer_wrap(&b, d, CUABI_MEMORY_DEVICE, (uintptr_t)mem, 64, nccl_release_fn, NULL));
    if (!b)
        free(mem);
    STEP(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    STEP(cuabi_nccl_get_unique_id(&id));
    STEP(cuabi_nccl_comm_init_rank(&c, d, 1, &id, 0, &o));
    STEP(cuabi_nccl_all_reduce(c, NULL, 0, b, 0, 16, CUABI_NCCL_FLOAT32, CUABI_NCCL_SUM, s));
    STEP(cuabi_nccl_all_reduce_view(c, NULL, v, CUABI_NCCL_MAX, s));
    STEP(cuabi_nccl_group_start());
    if (st == CUABI_SUCCESS) {
        cuabi_status inner = cuabi_nccl_broadcast(c, NULL, 0, b, 0, 4, CUABI_NCCL_INT32, 0, s);
        cuabi_status end = cuabi_nccl_group_end();
        st = inner != CUABI_SUCCESS ? inner : end;
    }
    STEP(cuabi_nccl_register(&g, c, b));
    STEP(cuabi_nccl_comm_synchronize(c, s, 0));
    STEP(cuabi_nccl_comm_split(&k, c, 0, 0, NULL));
    STEP(cuabi_nccl_all_gather_view(k, v, v, s));
    STEP(cuabi_nccl_comm_finalize(c));
    if (g) cuabi_nccl_registration_destroy(g);
    if (k) cuabi_nccl_comm_release(k);
    if (c) cuabi_nccl_comm_release(c);
    if (v) cuabi_view_release(v);
    if (b) cuabi_buffer_destroy(b);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    ck_assert_msg(nccl_live_comms() == 0 && nccl_live_regs() == 0,
                  "nccl: %d NCCL communicators and %d registrations left (%s)",
                  nccl_live_comms(), nccl_live_regs(), cuabi_status_name(st));
    return st;
}

typedef struct scenario {
    const char *name;
    scenario_fn fn;
} scenario;
/* Peers and IPC (issue 15): enable/disable, a plain and a strided peer
 * copy, pool access, an IPC buffer and event exported and imported (the
 * descriptors made to look as if the parent process exported them). */
static cuabi_status sc_multigpu(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d0 = NULL, *d1 = NULL;
    cuabi_memory_resource *pool = NULL, *ipc = NULL;
    cuabi_buffer *a = NULL, *b = NULL, *imp = NULL;
    cuabi_view *va = NULL, *vb = NULL;
    cuabi_event *ev = NULL, *evi = NULL;
    cuabi_stream *s = NULL;
    uint8_t desc[CUABI_IPC_DESCRIPTOR_SIZE], edesc[CUABI_IPC_DESCRIPTOR_SIZE];
    int64_t shape[2] = { 4, 8 }, strides[2] = { 16, 1 };
    cuabi_peer_access acc;
    STEP(cuabi_device_get(&d0, 0));
    STEP(cuabi_device_get(&d1, 1));
    STEP(cuabi_peer_enable(d1, d0));
    STEP(cuabi_peer_disable(d1, d0));
    STEP(cuabi_memory_resource_pool_create(&pool, d0, NULL));
    STEP(cuabi_peer_set_pool_access(pool, d1, CUABI_PEER_ACCESS_READ_WRITE));
    STEP(cuabi_peer_get_pool_access(&acc, pool, d1));
    STEP(cuabi_stream_create(&s, d1, NULL));
    STEP(cuabi_buffer_allocate(&a, pool, 512, 0, s));
    STEP(cuabi_ipc_memory_resource(&ipc, d1));
    STEP(cuabi_buffer_allocate(&b, ipc, 512, 0, NULL));
    STEP(cuabi_peer_copy(b, 0, a, 0, 512, s));
    STEP(cuabi_view_create(&va, a, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, strides, 0));
    STEP(cuabi_view_create(&vb, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    STEP(cuabi_peer_copy_view(vb, va, NULL));
    STEP(cuabi_ipc_buffer_export(desc, sizeof desc, b));
    STEP(cuabi_ipc_event_create(&ev, d1));
    STEP(cuabi_ipc_event_export(edesc, sizeof edesc, ev));
    if (st == CUABI_SUCCESS) {
        cuabi__ipc_put(desc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(desc);
        cuabi__ipc_put(edesc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(edesc);
    }
    STEP(cuabi_ipc_buffer_import(&imp, desc, sizeof desc));
    STEP(cuabi_ipc_event_import(&evi, edesc, sizeof edesc));
    STEP(cuabi_stream_wait_event(s, evi));
    STEP(cuabi_buffer_copy(imp, 0, b, 0, 64, s));
    if (evi) cuabi_event_release(evi);
    if (ev) cuabi_event_release(ev);
    if (imp) cuabi_buffer_destroy(imp);
    if (vb) cuabi_view_release(vb);
    if (va) cuabi_view_release(va);
    if (b) cuabi_buffer_destroy(b);
    if (a) cuabi_buffer_destroy(a);
    if (s) cuabi_stream_release(s);
    if (ipc) cuabi_memory_resource_release(ipc);
    if (pool) cuabi_memory_resource_release(pool);
    if (d1) cuabi_device_release(d1);
    if (d0) cuabi_device_release(d0);
    return st;
}

/* Pool IPC: an IPC pool, a buffer on a stream, the pool exported and
 * imported (as if from the parent process), the buffer exported, imported
 * into the mapped pool and copied from. */
static cuabi_status sc_ipc_pool(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_memory_resource *pool = NULL, *mapped = NULL;
    cuabi_buffer *b = NULL, *imp = NULL;
    cuabi_stream *s = NULL;
    uint8_t pd[CUABI_IPC_DESCRIPTOR_SIZE], bd[CUABI_IPC_DESCRIPTOR_SIZE];
    int fd = -1;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_ipc_pool_create(&pool, d, NULL));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_buffer_allocate(&b, pool, 512, 0, s));
    STEP(cuabi_ipc_pool_export(&fd, pd, sizeof pd, pool));
    STEP(cuabi_ipc_buffer_export(bd, sizeof bd, b));
    if (st == CUABI_SUCCESS) {
        cuabi__ipc_put(pd + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(pd);
        cuabi__ipc_put(bd + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(bd);
    }
    STEP(cuabi_ipc_pool_import(&mapped, fd, pd, sizeof pd));
    STEP(cuabi_ipc_pool_buffer_import(&imp, mapped, bd, sizeof bd));
    STEP(cuabi_buffer_copy(imp, 0, b, 0, 64, s));
    /* The batch calls (issue 24): two buffers out and in, all or nothing. */
    cuabi_buffer *two[2] = { b, NULL }, *imps[2] = { NULL, NULL };
    uint8_t bds[2 * CUABI_IPC_DESCRIPTOR_SIZE];
    STEP(cuabi_buffer_allocate(&two[1], pool, 256, 0, s));
    STEP(cuabi_ipc_buffers_export(bds, sizeof bds, two, 2));
    for (int i = 0; st == CUABI_SUCCESS && i < 2; i++) {
        cuabi__ipc_put(bds + i * CUABI_IPC_DESCRIPTOR_SIZE + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(bds + i * CUABI_IPC_DESCRIPTOR_SIZE);
    }
    STEP(cuabi_ipc_pool_buffers_import(imps, NULL, mapped, bds, sizeof bds, 2));
    for (int i = 0; i < 2; i++)
        if (imps[i]) cuabi_buffer_destroy(imps[i]);
    if (two[1]) cuabi_buffer_destroy(two[1]);
    if (fd >= 0) close(fd);
    if (imp) cuabi_buffer_destroy(imp);
    if (mapped) cuabi_memory_resource_release(mapped);
    if (b) cuabi_buffer_destroy(b);
    if (s) cuabi_stream_release(s);
    if (pool) cuabi_memory_resource_release(pool);
    if (d) cuabi_device_release(d);
    return st;
}

/* Textures (issue 27): arrays of each kind, one from a view, a mipmapped
 * array and a level, copies from and to host memory, a buffer, a strided
 * view and another array (synchronous and on a stream), textures over an
 * array, a mipmapped array, a view and an image, a surface, both in a pack
 * and launched, then a capture of a copy and a launch, instantiated and
 * launched. */
static cuabi_status sc_texture(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_memory_resource *pool = NULL;
    cuabi_buffer *b = NULL;
    cuabi_array *a = NULL, *c = NULL, *fv = NULL, *lv = NULL;
    cuabi_mipmapped_array *m = NULL;
    cuabi_view *v = NULL, *dv = NULL;
    cuabi_texture *t = NULL, *tm = NULL, *tv = NULL, *ti = NULL;
    cuabi_surface *sf = NULL;
    cuabi_objcode *o = NULL;
    cuabi_kernel *k = NULL;
    cuabi_argpack *p = NULL;
    cuabi_graph *g = NULL;
    cuabi_graph_exec *e = NULL;
    static float host[8][16];
    static const int64_t shape[2] = { 8, 16 }, strides[2] = { 16, 1 };
    cuabi_array_desc ad = CUABI_ARRAY_DESC_INIT;
    ad.width = 16, ad.height = 8, ad.format = CUABI_ARRAY_FORMAT_FLOAT32;
    ad.flags = CUABI_ARRAY_SURFACE_LDST;
    cuabi_array_region r = CUABI_ARRAY_REGION_INIT;
    r.x = 4, r.y = 2, r.width = 8, r.height = 4;
    cuabi_array_info info = CUABI_ARRAY_INFO_INIT;
    cuabi_texture_info ti_info = CUABI_TEXTURE_INFO_INIT;
    cuabi_texture_desc td = CUABI_TEXTURE_DESC_INIT;
    td.filter_mode = CUABI_TEXTURE_FILTER_LINEAR;
    td.normalized_coords = 1;
    DLTensor ht = { .data = host, .device = { kDLCPU, 0 }, .ndim = 2,
                    .dtype = { kDLFloat, 32, 1 }, .shape = (int64_t *)shape };
    cuabi_launch_config lc = CUABI_LAUNCH_CONFIG_INIT;
    STEP(cuabi_device_get(&d, 0));
    /* A non-blocking stream captured in RELAXED mode: a capture that a refused
     * stream destroy leaves behind (the driver's word, under sticky faults)
     * must not refuse the synchronous copies of the run after. */
    cuabi_stream_options so = CUABI_STREAM_OPTIONS_INIT;
    so.flags = CUABI_STREAM_NON_BLOCKING;
    STEP(cuabi_stream_create(&s, d, &so));
    STEP(cuabi_memory_resource_device_default(&pool, d));
    STEP(cuabi_buffer_allocate(&b, pool, sizeof host, 0, s));
    STEP(cuabi_array_create(&a, d, &ad));
    STEP(cuabi_array_create(&c, d, &ad));
    STEP(cuabi_array_get_info(&info, a));
    STEP(cuabi_array_copy_from_host(a, NULL, host, sizeof host, 0, 0, NULL));
    STEP(cuabi_array_copy_to_buffer(b, 0, 0, 0, a, NULL, s));
    STEP(cuabi_array_copy_from_buffer(c, &r, b, 0, 64, 0, s));
    STEP(cuabi_array_copy(c, NULL, a, &r, s));
    STEP(cuabi_array_copy_to_host(host, sizeof host, 0, 0, c, NULL, s));
    STEP(cuabi_view_from_dltensor(&v, &ht, 0));
    STEP(cuabi_array_copy_from_view(a, NULL, v, NULL));
    STEP(cuabi_array_copy_to_view(v, a, NULL, s));
    STEP(cuabi_array_create_from_view(&fv, v, 1, 0, NULL, s));
    STEP(cuabi_mipmapped_array_create(&m, d, &ad, 3));
    STEP(cuabi_mipmapped_array_get_level(&lv, m, 1));
    STEP(cuabi_texture_create_from_array(&t, a, &td));
    STEP(cuabi_texture_create_from_mipmapped_array(&tm, m, &td));
    STEP(cuabi_view_create(&dv, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, strides, 0));
    STEP(cuabi_texture_create_from_view(&tv, dv, 1, NULL));
    STEP(cuabi_texture_create_from_image(&ti, v, 1, 0, NULL, d));
    STEP(cuabi_texture_get_info(&ti_info, ti));
    STEP(cuabi_surface_create(&sf, lv));
    STEP(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, cubin_sm90, cubin_sm90_size, "k.cubin"));
    STEP(cuabi_objcode_get_kernel(&k, o, "add"));
    /* 3 parameters of 8 bytes from the fake driver, or the CUBIN's 4 (float *,
     * const float *, int, double) when reading them fails, as in sc_graph. */
    size_t nparams = 0;
    STEP(cuabi_kernel_param_count(&nparams, k));
    STEP(cuabi_argpack_create(&p, nparams == 4 ? "handle, handle, i32, f64" : "handle, handle, u64"));
    STEP(cuabi_argpack_set_texture(p, 0, t));
    STEP(cuabi_argpack_set_surface(p, 1, sf));
    STEP(nparams == 4 ? cuabi_argpack_set_int(p, 2, 1) : cuabi_argpack_set_texture(p, 2, tv));
    lc.stream = s;
    STEP(cuabi_launch(k, p, &lc));
    STEP(cuabi_graph_capture_begin(s, CUABI_CAPTURE_MODE_RELAXED));
    bool capturing = st == CUABI_SUCCESS;
    STEP(cuabi_array_copy_from_buffer(c, NULL, b, 0, 0, 0, s));
    STEP(cuabi_launch(k, p, &lc));
    if (capturing) {
        cuabi_status es = cuabi_graph_capture_end(&g, s);
        if (es != CUABI_SUCCESS) {
            cuabi_graph *again = NULL;
            if (cuabi_graph_capture_end(&again, s) == CUABI_SUCCESS)
                cuabi_graph_release(again);
        }
        STEP(es);
    }
    STEP(cuabi_graph_instantiate(&e, g, NULL));
    STEP(cuabi_graph_exec_launch(e, s));
    if (e) cuabi_graph_exec_release(e);
    if (g) cuabi_graph_release(g);
    if (p) cuabi_argpack_release(p);
    if (k) cuabi_kernel_release(k);
    if (o) cuabi_objcode_release(o);
    if (sf) cuabi_surface_release(sf);
    cuabi_texture *ts[] = { t, tm, tv, ti };
    for (int i = 0; i < 4; i++)
        if (ts[i]) cuabi_texture_release(ts[i]);
    if (dv) cuabi_view_release(dv);
    if (v) cuabi_view_release(v);
    cuabi_array *as[] = { a, c, fv, lv };
    for (int i = 0; i < 4; i++)
        if (as[i]) cuabi_array_release(as[i]);
    if (m) cuabi_mipmapped_array_release(m);
    if (b) cuabi_buffer_destroy(b);
    if (pool) cuabi_memory_resource_release(pool);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

/* Virtual memory and multicast (issue 25): a VMM resource with a peer's
 * access, a buffer grown and shrunk in place, access set and read, its
 * chunks exported (fds) and imported under another device's resource (as if
 * from the parent process), a multicast object for both devices with a
 * chunk bound, mapped and unbound. */
static cuabi_status sc_vmm(void)
{
    enum { G = 128 << 10, D = CUABI_IPC_DESCRIPTOR_SIZE };
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d0 = NULL, *d1 = NULL;
    cuabi_memory_resource *r = NULL, *ri = NULL;
    cuabi_buffer *b = NULL, *imp = NULL, *mcb = NULL;
    cuabi_multicast *mc = NULL;
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    cuabi_vmm_info info = CUABI_VMM_INFO_INIT;
    cuabi_peer_access acc;
    uint8_t desc[2 * D];
    int fds[2] = { -1, -1 };
    size_t g = 0;
    o.reserve_size = 4 * G;
    STEP(cuabi_device_get(&d0, 0));
    STEP(cuabi_device_get(&d1, 1));
    STEP(cuabi_vmm_granularity(&g, d0, &o));
    STEP(cuabi_vmm_resource_create(&r, d0, &o));
    STEP(cuabi_vmm_resource_set_peer_access(r, d1, CUABI_PEER_ACCESS_READ));
    STEP(cuabi_vmm_buffer_allocate(&b, r, G, 0));
    STEP(cuabi_vmm_buffer_resize(b, 3 * G, NULL));
    STEP(cuabi_vmm_set_access(b, d1, CUABI_PEER_ACCESS_READ_WRITE));
    STEP(cuabi_vmm_get_access(&acc, b, d1));
    STEP(cuabi_buffer_memset(b, 0, 7, 1, 3 * G, NULL));
    STEP(cuabi_vmm_buffer_info(&info, b));
    for (size_t i = 0; i < 2; i++)
        STEP(cuabi_vmm_export_chunk(&fds[i], desc + i * D, D, b, i));
    if (st == CUABI_SUCCESS)
        for (size_t i = 0; i < 2; i++) {
            cuabi__ipc_put(desc + i * D + CUABI__IPC_PID, (uint64_t)getppid(), 4);
            cuabi__ipc_reseal(desc + i * D);
        }
    STEP(cuabi_vmm_resource_create(&ri, d1, NULL));
    STEP(cuabi_vmm_import(&imp, ri, fds, 2, desc, sizeof desc));
    STEP(cuabi_buffer_copy(imp, 0, b, G, 64, NULL));
    /* a shrink unmaps and releases chunks: a release path (its failure leaves
     * the driver's objects to the driver), so its status is not a step's */
    if (st == CUABI_SUCCESS)
        (void)cuabi_vmm_buffer_resize(b, G, NULL);
    cuabi_device *team[2] = { d0, d1 };
    STEP(cuabi_multicast_create(&mc, team, 2, G, CUABI_VMM_HANDLE_NONE));
    STEP(cuabi_multicast_bind_memory(mc, 0, b, 0, G));
    STEP(cuabi_multicast_map(&mcb, mc));
    STEP(cuabi_multicast_unbind(mc, d0, 0));
    for (size_t i = 0; i < 2; i++)
        if (fds[i] >= 0) close(fds[i]);
    if (mcb) cuabi_buffer_destroy(mcb);
    if (mc) cuabi_multicast_release(mc);
    if (imp) cuabi_buffer_destroy(imp);
    if (b) cuabi_buffer_destroy(b);
    if (ri) cuabi_memory_resource_release(ri);
    if (r) cuabi_memory_resource_release(r);
    if (d1) cuabi_device_release(d1);
    if (d0) cuabi_device_release(d0);
    return st;
}

/* Pool statistics, managed memory and batched copies (issue 25): a pool's
 * summary and its text, attributes set, the marks reset, a host NUMA pool;
 * a managed resource with a preferred location, advice, prefetch, the
 * range attributes, discard, the batches of whole buffers; a 1-D batch of mixed ends and a 3-D batch. */
static cuabi_status sc_memory_ext(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_memory_resource *pool = NULL, *numa = NULL, *man = NULL;
    cuabi_buffer *a = NULL, *m = NULL, *h = NULL;
    cuabi_pool_stats stats = CUABI_POOL_STATS_INIT;
    cuabi_managed_options mo = CUABI_MANAGED_OPTIONS_INIT;
    cuabi_managed_range range = CUABI_MANAGED_RANGE_INIT;
    cuabi_copy_result res = CUABI_COPY_RESULT_INIT;
    cuabi_copy_item it[2] = { CUABI_COPY_ITEM_INIT, CUABI_COPY_ITEM_INIT };
    cuabi_copy_3d_item it3 = CUABI_COPY_3D_ITEM_INIT;
    char text[512];
    size_t n = sizeof text;
    uint8_t raw[64] = { 1 };
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_memory_resource_pool_create(&pool, d, NULL));
    STEP(cuabi_buffer_allocate(&a, pool, 4096, 0, s));
    STEP(cuabi_pool_stats_get(&stats, pool));
    STEP(cuabi_pool_stats_format(text, &n, &stats));
    STEP(cuabi_pool_set_attribute(pool, CUABI_POOL_RELEASE_THRESHOLD, 1 << 20));
    STEP(cuabi_pool_reset_high_water(pool));
    STEP(cuabi_pool_at_location(&numa, d, CUABI_LOCATION_HOST_NUMA, 0, CUABI_POOL_DEFAULT));
    STEP(cuabi_buffer_allocate(&h, numa, 256, 0, s));
    mo.preferred_location_type = CUABI_LOCATION_DEVICE;
    STEP(cuabi_managed_resource_create(&man, d, &mo));
    STEP(cuabi_buffer_allocate(&m, man, 4096, 0, NULL));
    STEP(cuabi_managed_advise(m, 0, 4096, CUABI_MANAGED_SET_READ_MOSTLY, CUABI_LOCATION_NONE, 0));
    STEP(cuabi_managed_prefetch(m, 0, 4096, CUABI_LOCATION_DEVICE, 0, s));
    STEP(cuabi_managed_range_info(&range, m, 0, 4096));
    STEP(cuabi_managed_discard(m, 0, 4096, s));
    {
        cuabi_buffer *ms[1] = { m };
        int32_t lt = CUABI_LOCATION_DEVICE, li = 0;
        STEP(cuabi_managed_prefetch_batch(ms, 1, &lt, &li, 1, s));
        STEP(cuabi_managed_discard_batch(ms, 1, s));
        STEP(cuabi_managed_discard_prefetch_batch(ms, 1, &lt, &li, 1, s));
    }
    it[0].dst_buffer = m, it[0].src_buffer = a, it[0].size = 1024;
    it[1].dst_buffer = a, it[1].src_address = (uintptr_t)raw, it[1].size = sizeof raw;
    STEP(cuabi_copy_batch(&res, it, 2, s));
    it3.dst_buffer = h, it3.src_buffer = a, it3.src_row_length = 64;
    it3.width = 16, it3.height = 4, it3.depth = 1;
    STEP(cuabi_copy_batch_3d(&res, &it3, 1, s));
    STEP(cuabi_stream_synchronize(s));
    if (h) cuabi_buffer_free_async(h, s);
    if (a) cuabi_buffer_free_async(a, s);
    if (m) cuabi_buffer_destroy(m);
    if (man) cuabi_memory_resource_release(man);
    if (numa) cuabi_memory_resource_release(numa);
    if (pool) cuabi_memory_resource_release(pool);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

/* Host pools opened to the device (CUDA 13 host locations give devices no
 * access until cuMemPoolSetAccess): the fake's grants are taken back first,
 * so every run asks (cuMemPoolGetAccess) and grants (cuMemPoolSetAccess);
 * then the device's memset and a copy back on the pool's memory, which the
 * fake refuses without the grant. */
static cuabi_status sc_host_pool(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_memory_resource *host = NULL;
    cuabi_buffer *b = NULL;
    uint8_t back[64];
    memset(fake_host_pool_access, 0, sizeof fake_host_pool_access);
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_pool_at_location(&host, d, CUABI_LOCATION_HOST, 0, CUABI_POOL_DEFAULT));
    STEP(cuabi_buffer_allocate(&b, host, sizeof back, 0, s));
    STEP(cuabi_buffer_memset(b, 0, 0x42, 1, sizeof back, s));
    STEP(cuabi_buffer_copy_to_host(back, b, 0, sizeof back, s));
    STEP(cuabi_stream_synchronize(s));
    if (st == CUABI_SUCCESS && back[63] != 0x42)
        st = cuabi__error(CUABI_ERROR_INTERNAL, "sc_host_pool: the memset did not land");
    if (b) cuabi_buffer_free_async(b, s);
    if (host) cuabi_memory_resource_release(host);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

/* Pools created in host memory (issue 24: cuda.core's PinnedMemoryResource):
 * a HOST pool (cuabi_memory_pool_options version 3) and an IPC pool on a
 * host NUMA node, each opened to the device at creation (the fake refuses
 * device work without that grant); a buffer of each written by the device;
 * the IPC pool exported with its location (format 2) and mapped (as if
 * from the parent process), opened to the importer's device, a buffer
 * imported and copied from. */
static cuabi_status sc_pinned_pool(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_memory_resource *host = NULL, *numa = NULL, *mapped = NULL;
    cuabi_buffer *a = NULL, *b = NULL, *imp = NULL;
    uint8_t pd[CUABI_IPC_DESCRIPTOR_SIZE], bd[CUABI_IPC_DESCRIPTOR_SIZE], back[64];
    int fd = -1;
    cuabi_memory_pool_options po = CUABI_MEMORY_POOL_OPTIONS_INIT;
    po.location_type = CUABI_LOCATION_HOST;
    po.max_size = 1 << 20;
    cuabi_ipc_pool_options io = CUABI_IPC_POOL_OPTIONS_INIT;
    io.location_type = CUABI_LOCATION_HOST_NUMA;
    io.location_id = 1;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_stream_create(&s, d, NULL));
    STEP(cuabi_memory_resource_pool_create(&host, d, &po));
    STEP(cuabi_buffer_allocate(&a, host, sizeof back, 0, s));
    STEP(cuabi_buffer_memset(a, 0, 0x33, 1, sizeof back, s));
    STEP(cuabi_ipc_pool_create(&numa, d, &io));
    STEP(cuabi_buffer_allocate(&b, numa, sizeof back, 0, s));
    STEP(cuabi_buffer_copy(b, 0, a, 0, sizeof back, s));
    STEP(cuabi_stream_synchronize(s));
    STEP(cuabi_ipc_pool_export(&fd, pd, sizeof pd, numa));
    STEP(cuabi_ipc_buffer_export(bd, sizeof bd, b));
    if (st == CUABI_SUCCESS) {
        cuabi__ipc_put(pd + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(pd);
        cuabi__ipc_put(bd + CUABI__IPC_PID, (uint64_t)getppid(), 4);
        cuabi__ipc_reseal(bd);
    }
    STEP(cuabi_ipc_pool_import(&mapped, fd, pd, sizeof pd));
    STEP(cuabi_ipc_pool_buffer_import(&imp, mapped, bd, sizeof bd));
    STEP(cuabi_buffer_copy_to_host(back, imp, 0, sizeof back, s));
    STEP(cuabi_stream_synchronize(s));
    if (st == CUABI_SUCCESS && back[63] != 0x33)
        st = cuabi__error(CUABI_ERROR_INTERNAL, "sc_pinned_pool: the bytes did not arrive");
    if (fd >= 0) close(fd);
    if (imp) cuabi_buffer_destroy(imp);
    if (mapped) cuabi_memory_resource_release(mapped);
    if (b) cuabi_buffer_destroy(b);
    if (a) cuabi_buffer_destroy(a);
    if (numa) cuabi_memory_resource_release(numa);
    if (host) cuabi_memory_resource_release(host);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

/* Green contexts (issue 26): the device's SMs, a dry run and a split, a
 * green context of two groups, workqueue configurations (a device's, a
 * green context made with one), its resource and a stream on it, a launch
 * and a prepared launch there, events, live occupancy in it (min grid,
 * waves) and a synchronize. */
static cuabi_status sc_green(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_sm_resource *all = NULL, *g[2] = { NULL, NULL }, *rem = NULL, *mine = NULL;
    cuabi_green_ctx *gc = NULL;
    cuabi_stream *s = NULL;
    cuabi_event *e = NULL;
    cuabi_objcode *o = NULL;
    cuabi_kernel *k = NULL;
    cuabi_argpack *p = NULL;
    cuabi_prepared *pl = NULL;
    cuabi_sm_split_options so = CUABI_SM_SPLIT_OPTIONS_INIT;
    cuabi_sm_resource_info info = CUABI_SM_RESOURCE_INFO_INIT;
    cuabi_grid_waves w = CUABI_GRID_WAVES_INIT;
    size_t n = 0;
    int block, grid;
    so.min_count = 16;
    STEP(cuabi_device_get(&d, 0));
    STEP(cuabi_device_sm_resource(&all, d));
    STEP(cuabi_sm_resource_split(NULL, &n, NULL, all, &so));
    n = 2;
    STEP(cuabi_sm_resource_split(g, &n, &rem, all, &so));
    STEP(cuabi_sm_resource_get_info(&info, g[0]));
    STEP(cuabi_green_ctx_create(&gc, d, g, 2));
    /* CUDA 13.1's workqueue configurations: the device's, a green context
     * made with one, and its own read back */
    cuabi_workqueue_config wq = CUABI_WORKQUEUE_CONFIG_INIT;
    cuabi_green_ctx *gwq = NULL;
    STEP(cuabi_device_workqueue_config(&wq, d));
    wq.concurrency_limit = 2;
    STEP(cuabi_green_ctx_create_with_workqueue(&gwq, d, g, 1, &wq));
    STEP(cuabi_green_ctx_workqueue_config(&wq, gwq));
    if (gwq) cuabi_green_ctx_release(gwq);
    STEP(cuabi_green_ctx_sm_resource(&mine, gc));
    STEP(cuabi_green_ctx_stream_create(&s, gc, NULL));
    STEP(cuabi_event_create(&e, d, NULL));
    STEP(cuabi_objcode_from_memory(&o, CUABI_CODE_NONE, cubin_sm90, cubin_sm90_size, "k.cubin"));
    STEP(cuabi_objcode_get_kernel(&k, o, "add"));
    STEP(cuabi_argpack_create_for_kernel(&p, k));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 8;
    c.stream = s;
    STEP(cuabi_launch(k, p, &c));
    STEP(cuabi_prepared_create(&pl, k, p, &c));
    STEP(cuabi_prepared_launch(pl));
    STEP(cuabi_green_ctx_record_event(gc, e));
    STEP(cuabi_green_ctx_wait_event(gc, e));
    STEP(cuabi_occupancy_green_max_potential_block_size(&block, &grid, k, gc, NULL, NULL, 0, 0));
    STEP(cuabi_occupancy_green_waves(&w, k, gc, 128, 0, 1000));
    STEP(cuabi_green_ctx_synchronize(gc));
    if (pl) cuabi_prepared_release(pl);
    if (p) cuabi_argpack_release(p);
    if (k) cuabi_kernel_release(k);
    if (o) cuabi_objcode_release(o);
    if (e) cuabi_event_release(e);
    if (s) cuabi_stream_release(s);
    if (mine) cuabi_sm_resource_release(mine);
    if (gc) cuabi_green_ctx_release(gc);
    if (rem) cuabi_sm_resource_release(rem);
    if (g[1]) cuabi_sm_resource_release(g[1]);
    if (g[0]) cuabi_sm_resource_release(g[0]);
    if (all) cuabi_sm_resource_release(all);
    if (d) cuabi_device_release(d);
    return st;
}

/* Stream memory operations: each kind alone, a batch of every operation,
 * the legacy stream, then a write and a wait captured and replayed. */
static cuabi_status sc_memop(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_device *d = NULL;
    cuabi_stream *s = NULL;
    cuabi_memory_resource *pool = NULL;
    cuabi_buffer *w = NULL;
    cuabi_graph *g = NULL;
    cuabi_graph_exec *e = NULL;
    cuabi_stream_mem_op ops[4] = { CUABI_STREAM_MEM_OP_INIT, CUABI_STREAM_MEM_OP_INIT,
                                   CUABI_STREAM_MEM_OP_INIT, CUABI_STREAM_MEM_OP_INIT };
    STEP(cuabi_device_get(&d, 0));
    /* A non-blocking stream captured in RELAXED mode: a capture that a refused
     * stream destroy leaves behind (the driver's word, under sticky faults)
     * must not refuse the synchronous copies of the run after. */
    cuabi_stream_options so = CUABI_STREAM_OPTIONS_INIT;
    so.flags = CUABI_STREAM_NON_BLOCKING;
    STEP(cuabi_stream_create(&s, d, &so));
    STEP(cuabi_memory_resource_device_default(&pool, d));
    STEP(cuabi_buffer_allocate(&w, pool, 64, 0, s));
    ops[0].kind = CUABI_STREAM_MEM_OP_WRITE_VALUE_32, ops[0].buffer = w, ops[0].value = 1;
    ops[1].kind = CUABI_STREAM_MEM_OP_BARRIER;
    ops[2].kind = CUABI_STREAM_MEM_OP_WAIT_VALUE_64, ops[2].buffer = w, ops[2].offset = 8;
    ops[3].kind = CUABI_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    STEP(cuabi_stream_write_value32(s, w, 0, 1, 0));
    STEP(cuabi_stream_write_value64(NULL, w, 8, 2, 0));
    STEP(cuabi_stream_wait_value32(s, w, 0, 1, CUABI_STREAM_WAIT_VALUE_EQ));
    STEP(cuabi_stream_wait_value64(s, w, 8, 2, CUABI_STREAM_WAIT_VALUE_GEQ));
    STEP(cuabi_stream_batch_mem_op(s, ops, 4));
    STEP(cuabi_graph_capture_begin(s, CUABI_CAPTURE_MODE_RELAXED));
    bool capturing = st == CUABI_SUCCESS;
    STEP(cuabi_stream_write_value32(s, w, 4, 3, 0));
    STEP(cuabi_stream_batch_mem_op(s, ops, 2));
    if (capturing) {
        cuabi_status es = cuabi_graph_capture_end(&g, s);
        if (es != CUABI_SUCCESS) {
            cuabi_graph *again = NULL;
            if (cuabi_graph_capture_end(&again, s) == CUABI_SUCCESS)
                cuabi_graph_release(again);
        }
        STEP(es);
    }
    STEP(cuabi_graph_instantiate(&e, g, NULL));
    STEP(cuabi_graph_exec_launch(e, s));
    if (e) cuabi_graph_exec_release(e);
    if (g) cuabi_graph_release(g);
    if (w) cuabi_buffer_destroy(w);
    if (pool) cuabi_memory_resource_release(pool);
    if (s) cuabi_stream_release(s);
    if (d) cuabi_device_release(d);
    return st;
}

/* Checkpoint and restore (issue 26): a fresh fake process each run, its
 * state and restore thread, two cycles (the second onto device 0 named by
 * its UUID). */
static cuabi_status sc_checkpoint(void)
{
    enum { PID = 31337 };
    cuabi_status st = CUABI_SUCCESS;
    fake_nprocs = 0;
    fake_checkpoint_add(PID);
    cuabi_process_state state;
    int tid;
    cuabi_device *d = NULL;
    cuabi_device_properties props = CUABI_DEVICE_PROPERTIES_INIT;
    cuabi_checkpoint_gpu_pair pair;
    STEP(cuabi_device_get(&d, 0));      /* restore onto it, named by its UUID */
    STEP(cuabi_device_get_properties(&props, d));
    memcpy(pair.old_uuid, props.uuid, 16);
    memcpy(pair.new_uuid, props.uuid, 16);
    STEP(cuabi_checkpoint_process_state(&state, PID));
    STEP(cuabi_checkpoint_process_restore_thread_id(&tid, PID));
    for (int cycle = 0; cycle < 2; cycle++) {
        STEP(cuabi_checkpoint_process_lock(PID, 1000));
        STEP(cuabi_checkpoint_process_checkpoint(PID));
        STEP(cuabi_checkpoint_process_restore(PID, cycle ? &pair : NULL, cycle ? 1 : 0));
        STEP(cuabi_checkpoint_process_unlock(PID));
    }
    if (d) cuabi_device_release(d);
    return st;
}

/* NVML (issue 26): the machine, every GPU's facts and health, its NVLink
 * links, the topology, its processes, finding it by UUID and PCI bus id,
 * and the mapping to CUDA ordinals (the fake NVML beside the fake driver). */
static cuabi_status sc_nvml(void)
{
    cuabi_status st = CUABI_SUCCESS;
    cuabi_nvml_system_info sys = CUABI_NVML_SYSTEM_INFO_INIT;
    cuabi_nvml_process procs[4];
    int count = 0;
    for (int k = 0; k < 4; k++)
        cuabi_nvml_process_init(&procs[k], CUABI_NVML_PROCESS_VERSION);
    STEP(cuabi_nvml_system_info_get(&sys));
    STEP(cuabi_nvml_device_count(&count));
    for (int i = 0; i < count && st == CUABI_SUCCESS; i++) {
        cuabi_nvml_device_info d = CUABI_NVML_DEVICE_INFO_INIT;
        cuabi_nvml_health h = CUABI_NVML_HEALTH_INIT;
        cuabi_nvml_topology t = CUABI_NVML_TOPOLOGY_INIT;
        size_t n;
        int idx, ord = -1;
        unsigned tx, rx;
        STEP(cuabi_nvml_device_info_get(&d, i));
        STEP(cuabi_nvml_device_health_get(&h, i));
        STEP(cuabi_nvml_device_pcie_throughput(&tx, &rx, i));
        for (int link = 0; link < d.nvlink_count && st == CUABI_SUCCESS; link++) {
            cuabi_nvml_nvlink l = CUABI_NVML_NVLINK_INIT;
            STEP(cuabi_nvml_device_nvlink_get(&l, i, link));
        }
        STEP(cuabi_nvml_topology_get(&t, i, (i + 1) % count));
        STEP(cuabi_nvml_device_processes(procs, 4, &n, i));
        STEP(cuabi_nvml_device_find(&idx, d.uuid));
        STEP(cuabi_nvml_device_find(&idx, d.pci_bus_id));
        STEP(cuabi_nvml_device_cuda_ordinal(&ord, i));
        if (ord >= 0)
            STEP(cuabi_nvml_device_from_cuda_ordinal(&idx, ord));
    }
    return st;
}

static const scenario scenarios[] = {
    { "device", sc_device }, { "memory", sc_memory }, { "objcode", sc_objcode },
    { "compile", sc_compile }, { "ltoir", sc_ltoir }, { "cache", sc_cache }, { "ptx", sc_ptx },
    { "nvvm", sc_nvvm }, { "linker", sc_linker }, { "linkcache", sc_link_cache },
    { "backend", sc_backend },
    { "tensormap", sc_tensormap }, { "launchattrs", sc_launch_attrs },
    { "graph", sc_graph }, { "multigpu", sc_multigpu }, { "fatbin", sc_fatbin },
    { "nvfatbin", sc_nvfatbin }, { "ipc_pool", sc_ipc_pool },
    { "texture", sc_texture }, { "memop", sc_memop }, { "nccl", sc_nccl },
    { "green", sc_green }, { "checkpoint", sc_checkpoint },
    { "nvml", sc_nvml },
    { "vmm", sc_vmm }, { "memory_ext", sc_memory_ext },
    { "host_pool", sc_host_pool },
    { "pinned_pool", sc_pinned_pool },
};
#define NUM_SCENARIOS (sizeof scenarios / sizeof *scenarios)

/* -------------------------------------------------------------- fixture */

static char tmpdir[64];
static void rebase(void);

static void *slurp(const char *name, size_t *size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/%s", cuabi_test_srcdir(), name);
    void *data;
    ck_assert_ok(cuabi__read_file(path, &data, size, "test"));
    return data;
}

static void *ltoir(const char *src, size_t *size)
{
    cuabi_program *p;
    cuabi_objcode *o;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.lto = 1;
    opts.relocatable = 1;
    opts.output = CUABI_CODE_LTOIR;
    opts.cache = 0;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, src, 0, "u.cu"));
    ck_assert_ok(cuabi_program_compile(&o, p, &opts));
    const void *d;
    ck_assert_ok(cuabi_objcode_bytes(&d, size, o));
    void *copy = malloc(*size);
    memcpy(copy, d, *size);
    cuabi_objcode_release(o);
    cuabi_program_release(p);
    return copy;
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_driver_install_tensormaps();
    fake_driver_install_launches();
    fake_graph_install();
    fake_multigpu_install();
    fake_texture_install();
    fake_green_install();
    fake_checkpoint_install();
    fake_vmm_install();
    (void)fake_attr_override;   /* fake_vmm.h's; the VMM suites use it */
    ck_assert_msg(fault_wrap_install(), "NVRTC and nvJitLink are needed: %s",
                  cuabi_last_error()->message);
    fault_wrap_install_nvfatbin();
    nccl_fake_load();
    ck_assert_msg(fault_wrap_install_nvml(), "the fake NVML (%s) is needed: %s",
                  fake_nvml_path(), cuabi_last_error()->message);
    strcpy(tmpdir, "/tmp/cuabi-test-faults-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    setenv("CUABI_CACHE_DIR", tmpdir, 1);
    unsetenv("CUABI_CACHE");
    cuabi__cache_reset_for_test();
    rebase();
    if (!cubin_sm90)
        cubin_sm90 = slurp("objcode_kernels_sm90.cubin", &cubin_sm90_size);
    if (!lto_a) {
        lto_a = ltoir("extern __device__ float h(float);\n"
                      "extern \"C\" __global__ void k(float *x) { x[0] = h(x[0]); }\n",
                      &lto_a_size);
        lto_b = ltoir("__device__ float h(float v) { return v * 2.0f; }\n", &lto_b_size);
    }
}

static void teardown(void)
{
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__alloc_fail_at(0, false);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

/* ---------------------------------------------------------- the loops */

typedef enum { F_ALLOC, F_CALL } fault_kind;

static long total_runs, total_faults;

/* Driver objects (fake streams, events, allocations, pools, libraries)
 * left by earlier runs whose free calls were made to fail: a free the
 * driver refuses leaves the driver's object behind, which is the driver's
 * word, not a leak of ours (the handle and our host memory still go). */
static int base_streams, base_events, base_allocs, base_pools, base_libraries, base_graphs,
    base_execs, base_arrays, base_mipmaps, base_texobjs, base_surfobjs, base_greens, base_vmm;

static void rebase(void)
{
    base_streams = fake_live_streams, base_events = fake_live_events;
    base_allocs = fake_live_allocs, base_pools = fake_live_pools;
    base_libraries = fake_live_libraries;
    base_graphs = fake_live_graphs, base_execs = fake_live_execs;
    base_arrays = fake_live_arrays, base_mipmaps = fake_live_mipmaps;
    base_texobjs = fake_live_texobjs, base_surfobjs = fake_live_surfobjs;
    base_greens = fake_live_greens;
    base_vmm = fake_vmm_live_handles + fake_vmm_live_reservations + fake_vmm_live_maps +
               fake_mc_live;
}

/* After a run: no handle is left, and (unless a release call was made to
 * fail) no driver object either. */
static void check_clean(const scenario *sc, const char *what, long n, bool driver)
{
    ck_assert_msg(cuabi__handle_live_count() == 0, "%s %s n=%ld: %zu handles leaked (%s)",
                  sc->name, what, n, cuabi__handle_live_count(), cuabi_last_error()->message);
    if (driver)
        ck_assert_msg(fake_live_streams == base_streams && fake_live_events == base_events &&
                          fake_live_allocs == base_allocs && fake_live_pools == base_pools &&
                          fake_live_libraries == base_libraries &&
                          fake_live_graphs == base_graphs && fake_live_execs == base_execs &&
                          fake_live_arrays == base_arrays && fake_live_mipmaps == base_mipmaps &&
                          fake_live_texobjs == base_texobjs && fake_live_surfobjs == base_surfobjs &&
                          fake_live_greens == base_greens &&
                          fake_vmm_live_handles + fake_vmm_live_reservations +
                                  fake_vmm_live_maps + fake_mc_live == base_vmm,
                      "%s %s n=%ld: driver objects leaked: %d streams, %d events, "
                      "%d allocations, %d pools, %d libraries, %d graphs, %d executables, "
                      "%d arrays, %d mipmapped arrays, %d textures, %d surfaces, %d green contexts, "
                      "%d VMM/multicast objects",
                      sc->name, what, n, fake_live_streams - base_streams,
                      fake_live_events - base_events, fake_live_allocs - base_allocs,
                      fake_live_pools - base_pools, fake_live_libraries - base_libraries,
                      fake_live_graphs - base_graphs, fake_live_execs - base_execs,
                      fake_live_arrays - base_arrays, fake_live_mipmaps - base_mipmaps,
                      fake_live_texobjs - base_texobjs, fake_live_surfobjs - base_surfobjs,
                      fake_live_greens - base_greens,
                      fake_vmm_live_handles + fake_vmm_live_reservations + fake_vmm_live_maps +
                          fake_mc_live - base_vmm);
    rebase();
}

/* Loop N until the scenario no longer reaches the Nth fault point; returns
 * the number of runs in which a fault fired. `entry` limits call faults to
 * one entry point (NULL: any). A run where the fault fired but the scenario
 * still succeeded (a log or note the library does without) counts in
 * *tolerated. */
static long loop(const scenario *sc, fault_kind kind, const char *entry, bool sticky,
                 long limit, long *tolerated)
{
    long faults = 0;
    const char *what = kind == F_ALLOC ? "alloc" : entry ? entry : "any call";
    for (long n = 1; n <= limit; n++) {
        ck_assert_msg(n < 20000, "%s: fault loop does not end", sc->name);
        long fired;
        cuabi_status st;
        fake_current = NULL;   /* the context rule: none before, none after */
        if (kind == F_ALLOC) {
            cuabi__alloc_fail_at(n, sticky);
            st = sc->fn();
            fired = cuabi__alloc_fail_count();
            cuabi__alloc_fail_at(0, false);
        } else {
            cuabi__fault_arm(entry, n, sticky, CUDA_ERROR_LAUNCH_FAILED);
            st = sc->fn();
            fired = cuabi__fault_count();
            cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        }
        total_runs++;
        ck_assert_msg(fake_current == NULL, "%s (%s n=%ld): %s, and left a context current "
                      "(the caller had none)", sc->name, what, n, cuabi_status_name(st));
        /* A fault that fired once and failed the work hit a step, not a
         * release: every driver object must be gone. Sticky faults and
         * tolerated ones may have failed a release. */
        check_clean(sc, what, n, kind == F_ALLOC || (!sticky && st != CUABI_SUCCESS) || !fired);
        if (fired == 0) {
            ck_assert_msg(st == CUABI_SUCCESS, "%s (%s n=%ld): run without a fault failed: %s",
                          sc->name, what, n, cuabi_last_error()->message);
            break;
        }
        faults++;
        total_faults += fired;
        if (st == CUABI_SUCCESS) {
            (*tolerated)++;
        } else {
            ck_assert_msg(cuabi_last_error()->message[0] != '\0',
                          "%s (%s n=%ld): %s without a message", sc->name, what, n,
                          cuabi_status_name(st));
            if (kind == F_ALLOC)
                ck_assert_msg(st == CUABI_ERROR_OUT_OF_MEMORY,
                              "%s: allocation %ld failed, got %s: %s", sc->name, n,
                              cuabi_status_name(st), cuabi_last_error()->message);
            else if (kind == F_CALL && entry && strncmp(entry, "cu", 2) == 0)
                ck_assert_msg(st == CUABI_ERROR_CUDA &&
                                  cuabi_last_error()->cu_result == CUDA_ERROR_LAUNCH_FAILED,
                              "%s: %s failed, got %s: %s", sc->name, entry,
                              cuabi_status_name(st), cuabi_last_error()->message);
            else if (kind == F_CALL && entry && strncmp(entry, "nvml", 4) == 0)
                ck_assert_msg(st == CUABI_ERROR_NVML &&
                                  cuabi_last_error()->nvml_result == CUABI__NVML_ERROR_UNKNOWN &&
                                  strstr(cuabi_last_error()->message, entry),
                              "%s: %s failed, got %s: %s", sc->name, entry,
                              cuabi_status_name(st), cuabi_last_error()->message);
            else if (kind == F_CALL && entry && strncmp(entry, "nvFatbin", 8) == 0)
                ck_assert_msg(strstr(cuabi_last_error()->message, entry),
                              "%s: %s failed, but the error does not name it: %s", sc->name,
                              entry, cuabi_last_error()->message);
        }
        /* The library is still usable: the same work succeeds now. */
        st = sc->fn();
        ck_assert_msg(st == CUABI_SUCCESS, "%s after a fault (%s n=%ld): %s", sc->name, what, n,
                      cuabi_last_error()->message);
        check_clean(sc, "rerun", n, true);
        total_runs++;
    }
    return faults;
}

static bool report(void) { return getenv("CUABI_FAULTS_REPORT") != NULL; }

START_TEST(scenarios_succeed_without_faults)
{
    for (size_t i = 0; i < NUM_SCENARIOS; i++) {
        ck_assert_msg(scenarios[i].fn() == CUABI_SUCCESS, "%s: %s", scenarios[i].name,
                      cuabi_last_error()->message);
        check_clean(&scenarios[i], "plain", 0, true);
    }
}
END_TEST

/* Every allocation of every scenario, once and for ever. */
START_TEST(allocation_failures)
{
    const scenario *sc = &scenarios[_i];
    for (int sticky = 0; sticky < 2; sticky++) {
        long tolerated = 0;
        long f = loop(sc, F_ALLOC, NULL, sticky, LONG_MAX, &tolerated);
        ck_assert_int_gt(f, 0);
        if (report())
            printf("faults: alloc %-7s %-6s injected-runs=%ld tolerated=%ld\n", sc->name,
                   sticky ? "sticky" : "once", f, tolerated);
    }
}
END_TEST

/* The Nth call of any driver / NVRTC / nvJitLink entry point, once and for
 * ever. */
START_TEST(entry_point_failures_any)
{
    const scenario *sc = &scenarios[_i];
    for (int sticky = 0; sticky < 2; sticky++) {
        long tolerated = 0;
        long f = loop(sc, F_CALL, NULL, sticky, LONG_MAX, &tolerated);
        ck_assert_int_gt(f, 0);
        if (report())
            printf("faults: call  %-7s %-6s injected-runs=%ld tolerated=%ld\n", sc->name,
                   sticky ? "sticky" : "once", f, tolerated);
    }
}
END_TEST

/* Each entry point by name, in every scenario: the figures per entry point.
 * Every wrapped NVRTC/nvJitLink entry point and every driver entry point
 * the fake driver has must be reached by some scenario. */
START_TEST(entry_point_failures_by_name)
{
    const cuabi__driver *fake = cuabi__driver_for_test();
    for (size_t e = 0; e < FAULT_WRAP_NUM_ENTRIES; e++) {
        const char *entry = fault_wrap_entries[e];
        long faults = 0, tolerated = 0;
        for (size_t i = 0; i < NUM_SCENARIOS; i++)
            for (int sticky = 0; sticky < 2; sticky++) {
                /* Only the NVML scenario calls NVML. */
                if (strncmp(entry, "nvml", 4) == 0 && scenarios[i].fn != sc_nvml)
                    continue;
                /* Once at every N; for ever from the first call (the
                 * 'any call' loop already did for ever from every N). */
                faults += loop(&scenarios[i], F_CALL, entry, sticky, sticky ? 1 : LONG_MAX,
                               &tolerated);
            }
        if (report() && faults)
            printf("faults: entry %-40s runs-with-fault=%ld tolerated=%ld\n", entry, faults,
                   tolerated);
        (void)fake;
    }
}
END_TEST

/* Faults while other threads work: nothing crashes, every status is
 * consistent, nothing leaks. */
static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        sc_device();
        sc_memory();
        sc_objcode();
    }
    return NULL;
}

START_TEST(faults_under_threads)
{
    pthread_t t[4];
    cuabi__fault_arm(NULL, 7, true, CUDA_ERROR_OUT_OF_MEMORY);
    cuabi__alloc_fail_at(13, true);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__alloc_fail_at(0, false);
    /* The fake driver's counters are not atomic: check handles only. */
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
    rebase();
    for (size_t i = 0; i < NUM_SCENARIOS; i++)
        ck_assert_msg(scenarios[i].fn() == CUABI_SUCCESS, "%s: %s", scenarios[i].name,
                      cuabi_last_error()->message);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, scenarios_succeed_without_faults);
    tcase_add_loop_test(tc, allocation_failures, 0, NUM_SCENARIOS);
    tcase_add_loop_test(tc, entry_point_failures_any, 0, NUM_SCENARIOS);
    tcase_add_test(tc, entry_point_failures_by_name);
    tcase_add_test(tc, faults_under_threads);
    suite_add_tcase(s, tc);
    return s;
}

/* The fake driver's objects whose destroy/free call this test made fail
 * stay allocated (that is what a refused free means; see rebase()); they
 * are the fake driver's host memory, not cuabi's, so LeakSanitizer is told
 * to ignore exactly those allocators. */
const char *__lsan_default_suppressions(void);
__attribute__((visibility("default"))) const char *__lsan_default_suppressions(void)
{
    return "leak:fake_alloc\nleak:fake_cuEventCreate\nleak:fake_cuLibraryLoadData\n"
           "leak:fake_cuMemPoolCreate\nleak:fake_cuStreamCreateWithPriority\n"
           "leak:fake_cuArray3DCreate\nleak:fake_array_init\nleak:fake_cuMipmappedArrayCreate\n"
           "leak:fake_cuTexObjectCreate\nleak:fake_cuSurfObjectCreate\n"
           "leak:fake_cuGreenCtxCreate\nleak:fake_cuGreenCtxStreamCreate\n";
}

int main(void)
{
    int rc = cuabi_test_run(suite());
    if (report())
        printf("faults: %ld runs, %ld faults injected\n", total_runs, total_faults);
    return rc;
}
