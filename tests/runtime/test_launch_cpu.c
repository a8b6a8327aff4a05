/* Launches against the fake driver: what reaches cuLaunchKernelEx, every
 * configuration and argument check, prepared launches, bad handles. */
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"
#include "fake_driver.h"
#include "runtime/argpack.h"
#include "runtime/occupancy.h"
#include "runtime/launch.h"

/* ---- the fake's launch side: libraries, kernels, functions, launches */

static int fake_launches;
static CUlaunchConfig fake_last;
static CUlaunchAttribute fake_last_attrs[16];
static unsigned char fake_last_params[64];
static CUresult fake_launch_result = CUDA_SUCCESS;
static int fake_cluster_support = 1;
static int fake_blocks_per_sm = 2;
static int fake_libraries;

static CUresult CUDAAPI lf_cuLibraryLoadData(CUlibrary *l, const void *code, CUjit_option *o,
                                               void **ov, unsigned n, CUlibraryOption *lo,
                                               void **lov, unsigned ln)
{
    (void)code; (void)o; (void)ov; (void)n; (void)lo; (void)lov; (void)ln;
    fake_libraries++;
    *l = (CUlibrary)(uintptr_t)0x5000;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI lf_cuLibraryUnload(CUlibrary l) { (void)l; fake_libraries--; return CUDA_SUCCESS; }
static CUresult CUDAAPI lf_cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name)
{
    (void)l;
    if (strcmp(name, "add") != 0) return CUDA_ERROR_NOT_FOUND;
    *k = (CUkernel)(uintptr_t)0x6000;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI lf_cuKernelGetFunction(CUfunction *f, CUkernel k)
{
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    *f = (CUfunction)((uintptr_t)k + 1);
    return CUDA_SUCCESS;
}
/* The CUBIN's `add`: __launch_bounds__(256), 1200 bytes of static smem. */
static CUresult CUDAAPI fake_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)f;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 256; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 11; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = 1200; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = 48 * 1024 - 1200; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}
/* The device's answers the launch-attribute checks read. */
static int fake_cc_major = 9, fake_window_bytes = 1 << 20, fake_sync_domains = 4;
static CUresult CUDAAPI fake_attr_no_cluster(int *v, CUdevice_attribute a, CUdevice d)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = fake_cluster_support; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = fake_cc_major; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: *v = fake_window_bytes; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: *v = fake_sync_domains; return CUDA_SUCCESS;
    default: return fake_cuDeviceGetAttribute(v, a, d);
    }
}
static CUresult CUDAAPI fake_cuOccupancyBlocks(int *n, CUfunction f, int block, size_t smem,
                                               unsigned flags)
{
    (void)f; (void)block; (void)smem; (void)flags;
    *n = fake_blocks_per_sm;
    return CUDA_SUCCESS;
}
static size_t fake_cb_bytes;
static CUresult CUDAAPI fake_cuOccupancyBest(int *grid, int *block, CUfunction f,
                                             CUoccupancyB2DSize fn, size_t smem, int limit,
                                             unsigned flags)
{
    (void)f; (void)flags; (void)limit;
    fake_cb_bytes = fn ? fn(128) : smem;
    *block = 128;
    *grid = 264;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuOccupancyAvail(size_t *out, CUfunction f, int n, int b)
{
    (void)f; (void)b;
    *out = 232448 / (size_t)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuOccupancyClusterSize(int *out, CUfunction f, const CUlaunchConfig *c)
{
    (void)f;
    *out = c->blockDimX <= 256 ? 8 : 4;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuOccupancyActiveClusters(int *out, CUfunction f, const CUlaunchConfig *c)
{
    (void)f;
    *out = c->numAttrs == 1 ? 132 / (int)c->attrs[0].value.clusterDim.x : -1;
    return CUDA_SUCCESS;
}

/* `add(float *a, const float *b, int n, double s)`: record the values. */
static CUresult CUDAAPI fake_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
                                              void **extra)
{
    (void)extra;
    if (!fake_current) return CUDA_ERROR_INVALID_CONTEXT;
    if (f != (CUfunction)(uintptr_t)0x6001) return CUDA_ERROR_INVALID_HANDLE;
    if (fake_launch_result != CUDA_SUCCESS) return fake_launch_result;
    fake_launches++;
    fake_launch_ctx = fake_current;   /* the context the launch ran in */
    fake_last = *c;
    if (c->numAttrs) /* attrs may be NULL then (UBSan: memcpy from NULL) */
        memcpy(fake_last_attrs, c->attrs, c->numAttrs * sizeof *c->attrs);
    memcpy(fake_last_params, params[0], 8);
    memcpy(fake_last_params + 8, params[1], 8);
    memcpy(fake_last_params + 16, params[2], 4);
    memcpy(fake_last_params + 24, params[3], 8);
    return CUDA_SUCCESS;
}

/* cuLaunchKernel (used when a launch has no attributes): count which entry
 * point was used, then record like the Ex variant. */
static int fake_plain_launches;
static CUresult CUDAAPI fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                            CUstream s, void **params, void **extra)
{
    CUlaunchConfig c = { gx, gy, gz, bx, by, bz, smem, s, NULL, 0 };
    fake_plain_launches++;
    return fake_cuLaunchKernelEx(&c, f, params, extra);
}

static cuabi_device *dev;
static cuabi_objcode *code;
static cuabi_kernel *kern;

static void setup(void)
{
    fake_driver_install();
    cuabi__driver *d = cuabi__driver_for_test();
    d->cuLibraryLoadData = lf_cuLibraryLoadData;
    d->cuLibraryUnload = lf_cuLibraryUnload;
    d->cuLibraryGetKernel = lf_cuLibraryGetKernel;
    d->cuKernelGetFunction = lf_cuKernelGetFunction;
    d->cuFuncGetAttribute = fake_cuFuncGetAttribute;
    d->cuDeviceGetAttribute = fake_attr_no_cluster;
    d->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = fake_cuOccupancyBlocks;
    d->cuLaunchKernelEx = fake_cuLaunchKernelEx;
    d->cuLaunchKernel = fake_cuLaunchKernel;
    d->cuOccupancyMaxPotentialBlockSizeWithFlags = fake_cuOccupancyBest;
    d->cuOccupancyAvailableDynamicSMemPerBlock = fake_cuOccupancyAvail;
    d->cuOccupancyMaxPotentialClusterSize = fake_cuOccupancyClusterSize;
    d->cuOccupancyMaxActiveClusters = fake_cuOccupancyActiveClusters;
    fake_launches = 0;
    fake_plain_launches = 0;
    fake_launch_result = CUDA_SUCCESS;
    fake_cluster_support = 1;
    fake_blocks_per_sm = 2;
    fake_cc_major = 9;
    fake_window_bytes = 1 << 20;
    fake_sync_domains = 4;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/objcode_kernels_sm90.cubin", cuabi_test_srcdir());
    ck_assert_ok(cuabi_objcode_from_file(&code, CUABI_CODE_CUBIN, path));
    ck_assert_ok(cuabi_objcode_get_kernel(&kern, code, "add"));
    ck_assert_ok(cuabi_device_get(&dev, 0));
}

static void teardown(void)
{
    cuabi_kernel_release(kern);
    cuabi_objcode_release(code);
    cuabi_device_release(dev);
    ck_assert_uint_eq(cuabi__handle_live_count(), 0);
    ck_assert_int_eq(fake_libraries, 0);
    ck_assert_int_eq(fake_live_streams, 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_argpack *add_pack(void)
{
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, ptr, i32, f64"));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 0, 0xA000));
    ck_assert_ok(cuabi_argpack_set_pointer(p, 1, 0xB000));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, 1000));
    ck_assert_ok(cuabi_argpack_set_float(p, 3, 2.5));
    return p;
}

static cuabi_launch_config config(unsigned grid, unsigned block)
{
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = grid;
    c.block[0] = block;
    c.device = dev;
    return c;
}

START_TEST(launch_passes_values_and_config)
{
    cuabi_argpack *p = add_pack();
    cuabi_launch_config c = config(4, 256);
    c.dynamic_shared_bytes = 512;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_int_eq(fake_launches, 1);
    ck_assert_uint_eq(fake_last.gridDimX, 4);
    ck_assert_uint_eq(fake_last.gridDimY, 1);
    ck_assert_uint_eq(fake_last.blockDimX, 256);
    ck_assert_uint_eq(fake_last.sharedMemBytes, 512);
    ck_assert_uint_eq(fake_last.numAttrs, 0);
    ck_assert_ptr_null(fake_last.hStream);
    uint64_t a, b;
    int32_t n;
    double s;
    memcpy(&a, fake_last_params, 8);
    memcpy(&b, fake_last_params + 8, 8);
    memcpy(&n, fake_last_params + 16, 4);
    memcpy(&s, fake_last_params + 24, 8);
    ck_assert_uint_eq(a, 0xA000);
    ck_assert_uint_eq(b, 0xB000);
    ck_assert_int_eq(n, 1000);
    ck_assert(s == 2.5);
    /* Run in the device's context, the caller's (none) given back. */
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ptr_null(fake_current);
    /* from a thread with another context current: made right for the
     * launch, and the other one current again after it */
    fake_current = (CUcontext)(uintptr_t)0x1001;
    fake_launch_ctx = NULL;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1001);
    /* on a stream: the stream's device, the stream's handle */
    cuabi_stream *st;
    ck_assert_ok(cuabi_stream_create(&st, dev, NULL));
    c.device = NULL;
    c.stream = st;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    uintptr_t raw;
    ck_assert_ok(cuabi_stream_raw(&raw, st));
    ck_assert_ptr_eq(fake_last.hStream, (CUstream)raw);
    /* a released stream: nothing launched */
    ck_assert_ok(cuabi_stream_release(st));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(fake_launches, 3);
    /* No launch attributes: the plain entry point carries them all. */
    ck_assert_int_eq(fake_plain_launches, 3);
    cuabi_argpack_release(p);
}
END_TEST

/* Issue 12: neither stream nor device is the legacy default stream of the
 * current device (the current context's), else of the kernel's device,
 * else of device 0. */
START_TEST(implicit_default_stream)
{
    cuabi_argpack *p = add_pack();
    cuabi_launch_config c = config(1, 32);
    c.device = NULL;
    cuabi_device *other;
    ck_assert_ok(cuabi_device_get(&other, 1));
    /* Nothing current, the kernel never loaded: device 0. */
    fake_current = NULL;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_ptr_eq(fake_last.hStream, NULL);   /* the legacy default stream */
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ptr_null(fake_current);            /* nothing current after, as before */
    /* Device 1 current: there. */
    ck_assert_ok(cuabi_device_set_current(other));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1001);
    ck_assert_ptr_eq(fake_current, (CUcontext)(uintptr_t)0x1001);
    /* Nothing current again: the first device the kernel was loaded on. */
    fake_current = NULL;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ptr_null(fake_current);
    /* Prepared launches resolve it once. */
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, &c));
    ck_assert_ok(cuabi_prepared_launch(pl));
    cuabi_prepared_release(pl);
    /* The driver cannot say what is current: the kernel's device still. */
    cuabi__driver *drv = cuabi__driver_for_test();
    CUresult (*saved)(CUcontext *) = drv->cuCtxGetCurrent;
    drv->cuCtxGetCurrent = NULL;
    fake_current = NULL;
    cuabi_status st = cuabi_launch(kern, p, &c);
    drv->cuCtxGetCurrent = saved;
    ck_assert_int_eq(st, CUABI_ERROR_ENTRY_POINT_NOT_FOUND); /* activation needs it */
    cuabi_device_release(other);
    cuabi_argpack_release(p);
    cuabi__launch_forget_implicit_devices();   /* for the teardown's handle count */
}
END_TEST

START_TEST(cluster_and_cooperative_attributes)
{
    cuabi_argpack *p = add_pack();
    cuabi_launch_config c = config(8, 128);
    c.cluster[0] = 2;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(fake_last.numAttrs, 1);
    ck_assert_int_eq(fake_last_attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    ck_assert_uint_eq(fake_last_attrs[0].value.clusterDim.x, 2);
    ck_assert_uint_eq(fake_last_attrs[0].value.clusterDim.y, 1);
    c.cooperative = 1;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(fake_last.numAttrs, 2);
    ck_assert_int_eq(fake_last_attrs[1].id, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
    ck_assert_int_eq(fake_last_attrs[1].value.cooperative, 1);
    ck_assert_ok(cuabi_launch_check(kern, p, &c));
    /* Attributes need cuLaunchKernelEx. */
    ck_assert_int_eq(fake_plain_launches, 0);
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(argument_mismatch_launches_nothing)
{
    cuabi_argpack *p;
    cuabi_launch_config c = config(1, 32);
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, ptr, i32"));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("the kernel takes 4 parameters, the pack has 3");
    ck_assert_status(cuabi_argpack_check_kernel(p, kern), CUABI_ERROR_ARGUMENT_MISMATCH);
    cuabi_argpack_release(p);
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, ptr, i64, f64"));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 2: the kernel expects 4 bytes, the pack gives 8");
    cuabi_prepared *pl = (cuabi_prepared *)1;
    ck_assert_status(cuabi_prepared_create(&pl, kern, p, &c), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_ptr_null(pl);
    cuabi_argpack_release(p);
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, ptr, i32, f32"));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 3: the kernel expects 8 bytes");
    cuabi_argpack_release(p);
    ck_assert_ok(cuabi_argpack_create(&p, "ptr, ptr, i32, align(16) f64"));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 3: the kernel expects offset 24, the pack has 32");
    cuabi_argpack_release(p);
    ck_assert_int_eq(fake_launches, 0);
    /* the kernel's own layout */
    ck_assert_ok(cuabi_argpack_create_for_kernel(&p, kern));
    size_t n, off;
    ck_assert_ok(cuabi_argpack_count(&n, p));
    ck_assert_uint_eq(n, 4);
    ck_assert_ok(cuabi_argpack_slot_offset(&off, p, 3));
    ck_assert_uint_eq(off, 24);
    ck_assert_ok(cuabi_argpack_set_pointer(p, 0, 0xA000));
    ck_assert_ok(cuabi_argpack_set_int(p, 2, -7));
    ck_assert_ok(cuabi_argpack_set_float(p, 3, 0.25));
    ck_assert_ok(cuabi_argpack_check_kernel(p, kern));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    int32_t v;
    memcpy(&v, fake_last_params + 16, 4);
    ck_assert_int_eq(v, -7);
    cuabi_argpack_release(p);
}
END_TEST

/* Parameter info from the driver (cuKernelGetParamInfo), as for a real
 * kernel: `fake_params` lists (offset, size) pairs, ending with size 0. */
static const size_t (*fake_params)[2];
static CUresult CUDAAPI table_cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
    (void)k;
    for (size_t j = 0; fake_params && fake_params[j][1]; j++)
        if (j == i) {
            *off = fake_params[j][0];
            *size = fake_params[j][1];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}
/* sbv(P p, float4 v, double d, Q q, signed char b, float *out) and
 * v4(signed char b, float4 v, float *out) as nvcc lays them out */
static const size_t sbv_params[][2] = { { 0, 16 }, { 16, 16 }, { 32, 8 }, { 40, 32 },
                                         { 72, 1 }, { 80, 8 }, { 0, 0 } };
static const size_t v4_params[][2] = { { 0, 1 }, { 16, 16 }, { 32, 8 }, { 0, 0 } };

/* A kernel whose parameter layout comes from the driver. */
static cuabi_kernel *driver_kernel(const size_t (*params)[2])
{
    cuabi__driver_for_test()->cuKernelGetParamInfo = table_cuKernelGetParamInfo;
    fake_params = params;
    cuabi_kernel *k;
    ck_assert_ok(cuabi_objcode_get_kernel(&k, code, "add"));
    size_t n;
    ck_assert_ok(cuabi_kernel_param_count(&n, k)); /* the layout is read (and kept) now */
    return k;
}

/* GPU run 2: a pack whose types differ from the kernel's passed the check.
 * The driver gives only offsets and sizes, so a plain struct of four floats
 * where a float4 lands at the same offset is the same layout; where the
 * alignment moves it (after an i8) the offsets differ and it is caught, and
 * the per-pack memo of a checked kernel never covers another kernel or pack. */
START_TEST(check_uses_the_drivers_offsets)
{
    cuabi_kernel *sbv = driver_kernel(sbv_params), *v4 = driver_kernel(v4_params);
    cuabi_argpack *good, *same, *bad, *v4good;
    ck_assert_ok(cuabi_argpack_create(&good,
        "struct{f32, f32, f32, i32}, float4, f64, struct{i8, struct{i16, f64}, u8}, i8, buffer"));
    ck_assert_ok(cuabi_argpack_create(&same,
        "struct{f32, f32, f32, i32}, struct{f32, f32, f32, f32}, f64, struct{i8, struct{i16, f64}, u8}, i8, ptr"));
    ck_assert_ok(cuabi_argpack_create(&bad, "i8, struct{f32, f32, f32, f32}, ptr"));
    ck_assert_ok(cuabi_argpack_create(&v4good, "i8, float4, ptr"));
    ck_assert_ok(cuabi_argpack_check_kernel(good, sbv));
    ck_assert_ok(cuabi_argpack_check_kernel(same, sbv));
    ck_assert_status(cuabi_argpack_check_kernel(bad, v4), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_error_mentions("parameter 1: the kernel expects offset 16, the pack has 4");
    ck_assert_ok(cuabi_argpack_check_kernel(v4good, v4));
    /* memo: checked against one kernel says nothing of another, nor of another pack */
    ck_assert_status(cuabi_argpack_check_kernel(bad, v4), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_check_kernel(v4good, sbv), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_status(cuabi_argpack_check_kernel(good, v4), CUABI_ERROR_ARGUMENT_MISMATCH);
    ck_assert_ok(cuabi_argpack_check_kernel(good, sbv));
    /* nor does a kernel released and looked up again inherit it */
    cuabi_kernel_release(v4);
    v4 = driver_kernel(sbv_params);
    ck_assert_status(cuabi_argpack_check_kernel(v4good, v4), CUABI_ERROR_ARGUMENT_MISMATCH);
    cuabi_argpack_release(good);
    cuabi_argpack_release(same);
    cuabi_argpack_release(bad);
    cuabi_argpack_release(v4good);
    cuabi_kernel_release(sbv);
    cuabi_kernel_release(v4);
}
END_TEST

/* GPU run A (H100, sm_90): a kernel whose first parameter is a 64-aligned
 * CUtensorMap reported it at offset 48 — the parameter bank starts at 0x210,
 * 16 bytes past a 64-byte boundary — and every pack for it was refused. The
 * layout from a base of 16 * k of the bank is accepted (each slot is passed
 * through its own pointer, so the values arrive the same); alignments of 16
 * or less still have to agree exactly. */
static const size_t tma_params[][2] = { { 48, 128 }, { 176, 8 }, { 184, 4 }, { 188, 4 },
                                        { 192, 8 }, { 0, 0 } };
static const size_t int_tma_params[][2] = { { 0, 4 }, { 48, 128 }, { 0, 0 } };

START_TEST(parameter_bank_base_of_64_aligned_parameters)
{
    cuabi_kernel *tma = driver_kernel(tma_params);
    cuabi_argpack *typed, *raw, *wrong;
    ck_assert_ok(cuabi_argpack_create(&typed, "tensormap, buffer, i32, i32, buffer"));
    ck_assert_ok(cuabi_argpack_check_kernel(typed, tma));
    ck_assert_ok(cuabi_argpack_create_for_kernel(&raw, tma));
    ck_assert_ok(cuabi_argpack_check_kernel(raw, tma));
    size_t align_of_first = 0;
    cuabi_arg_info info = CUABI_ARG_INFO_INIT;
    ck_assert_ok(cuabi_argpack_item(&info, raw, 0));
    align_of_first = info.align;
    ck_assert_uint_eq(align_of_first, 64);
    /* an int declared 16-aligned moves; that is still caught */
    ck_assert_ok(cuabi_argpack_create(&wrong, "tensormap, ptr, align(16) i32, i32, buffer"));
    ck_assert_status(cuabi_argpack_check_kernel(wrong, tma), CUABI_ERROR_ARGUMENT_MISMATCH);
    cuabi_argpack_release(typed);
    cuabi_argpack_release(raw);
    cuabi_argpack_release(wrong);
    cuabi_kernel_release(tma);

    tma = driver_kernel(int_tma_params);
    ck_assert_ok(cuabi_argpack_create(&typed, "i32, tensormap"));
    ck_assert_ok(cuabi_argpack_check_kernel(typed, tma));
    ck_assert_ok(cuabi_argpack_create_for_kernel(&raw, tma));
    ck_assert_ok(cuabi_argpack_check_kernel(raw, tma));
    cuabi_argpack_release(typed);
    cuabi_argpack_release(raw);
    cuabi_kernel_release(tma);
    /* offsets no base explains are refused, as before */
    static const size_t sizes[] = { 4, 8 }, offsets[] = { 0, 12 };
    ck_assert_status(cuabi_argpack_create_from_sizes(&raw, sizes, offsets, 2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("does not follow the C layout");
}
END_TEST

START_TEST(configuration_errors)
{
    cuabi_argpack *p = add_pack();
    struct { unsigned grid[3], block[3], cluster[3]; const char *says; } bad[] = {
        { { 0, 1, 1 }, { 32, 1, 1 }, { 0, 0, 0 }, "at least 1" },
        { { 1, 1, 1 }, { 32, 0, 1 }, { 0, 0, 0 }, "at least 1" },
        { { 1, 1, 1 }, { 2048, 1, 1 }, { 0, 0, 0 }, "block.x = 2048" },
        { { 1, 1, 1 }, { 1, 1, 65 }, { 0, 0, 0 }, "block.z = 65" },
        { { 1, 1, 1 }, { 64, 32, 1 }, { 0, 0, 0 }, "2048 threads" },
        { { 1, 70000, 1 }, { 32, 1, 1 }, { 0, 0, 0 }, "grid.y = 70000" },
        { { 6, 1, 1 }, { 32, 1, 1 }, { 4, 0, 0 }, "cluster.x = 4 does not divide grid.x = 6" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cuabi_launch_config c = config(1, 1);
        memcpy(c.grid, bad[i].grid, sizeof c.grid);
        memcpy(c.block, bad[i].block, sizeof c.block);
        memcpy(c.cluster, bad[i].cluster, sizeof c.cluster);
        ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
        ck_assert_error_mentions(bad[i].says);
        ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    }
    /* the kernel's own limits: launch bounds of 256 */
    cuabi_launch_config c = config(1, 512);
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("a block of 512 threads is larger than the kernel allows (256");
    /* the driver refuses it in cuabi_launch: the check says why */
    fake_launch_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("larger than the kernel allows");
    /* refused for a reason no check knows: the driver's error */
    c = config(1, 32);
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_CUDA);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    fake_launch_result = CUDA_SUCCESS;
    /* dynamic shared memory over the kernel's limit, then the device's */
    c.dynamic_shared_bytes = 48 * 1024;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("over the kernel's limit of 47952");
    ck_assert_error_mentions("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES");
    c.dynamic_shared_bytes = 232448;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("over the device's limit of 232448");
    /* Issue 29: more than the driver's unsigned int, checked before the
     * launch (cuabi_launch passed 2^32 + 16 truncated: 16 bytes) */
    c.dynamic_shared_bytes = ((size_t)1 << 32) + 16;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("config->dynamic_shared_bytes");
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_int_eq(fake_launches, 0);
    c.dynamic_shared_bytes = 0;
    /* clusters on a GPU without them; too large clusters */
    c = config(8, 32);
    c.cluster[0] = 2;
    fake_cluster_support = 0;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("clusters need a GPU of compute capability 9.0");
    fake_cluster_support = 1;
    c = config(32, 32);
    c.cluster[0] = 16;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("portable limit of 8");
    /* a cooperative grid larger than can be resident: 2 x 132 */
    c = config(265, 128);
    c.cooperative = 1;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("cooperative grid of 265 blocks is larger than can be resident at once (264");
    c.grid[0] = 264;
    ck_assert_ok(cuabi_launch_check(kern, p, &c));
    /* versions and NULLs */
    c.version = 0;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_launch(kern, p, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fake_launches, 0);
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(prepared_launches)
{
    cuabi_argpack *p = add_pack();
    cuabi_stream *st;
    ck_assert_ok(cuabi_stream_create(&st, dev, NULL));
    cuabi_launch_config c = config(4, 128);
    c.stream = st;
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, &c));
    /* the prepared launch keeps what it needs alive */
    ck_assert_ok(cuabi_stream_release(st));
    ck_assert_ok(cuabi_argpack_release(p));
    ck_assert_int_eq(fake_live_streams, 1);
    for (int i = 0; i < 3; i++) {
        cuabi_argpack *bound;
        ck_assert_ok(cuabi_prepared_pack(&bound, pl));
        ck_assert_ok(cuabi_argpack_set_int(bound, 2, i));
        ck_assert_ok(cuabi_prepared_launch(pl));
        int32_t n;
        memcpy(&n, fake_last_params + 16, 4);
        ck_assert_int_eq(n, i);
    }
    ck_assert_int_eq(fake_launches, 3);
    ck_assert_uint_eq(fake_last.gridDimX, 4);
    ck_assert_ok(cuabi_prepared_set_grid(pl, 7, 2, 1));
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_uint_eq(fake_last.gridDimX, 7);
    ck_assert_uint_eq(fake_last.gridDimY, 2);
    ck_assert_status(cuabi_prepared_set_grid(pl, 0, 1, 1), CUABI_ERROR_LAUNCH_CONFIG);
    /* driver failures come back as statuses */
    fake_launch_result = CUDA_ERROR_LAUNCH_FAILED;
    ck_assert_status(cuabi_prepared_launch(pl), CUABI_ERROR_CUDA);
    fake_launch_result = CUDA_SUCCESS;
    ck_assert_ok(cuabi_prepared_release(pl));
    ck_assert_int_eq(fake_live_streams, 0);
    /* creation runs the full checks */
    p = add_pack();
    c = config(1, 512);
    pl = (cuabi_prepared *)1;
    ck_assert_status(cuabi_prepared_create(&pl, kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_ptr_null(pl);
    /* cooperative prepared launches check a new grid */
    c = config(2, 128);
    c.cooperative = 1;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, &c));
    ck_assert_status(cuabi_prepared_set_grid(pl, 300, 1, 1), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_ok(cuabi_prepared_set_grid(pl, 264, 1, 1));
    ck_assert_ok(cuabi_prepared_release(pl));
    /* out of memory while creating: nothing leaks */
    c = config(1, 32);
    cuabi__alloc_fail_at(1, false);
    ck_assert_status(cuabi_prepared_create(&pl, kern, p, &c), CUABI_ERROR_OUT_OF_MEMORY);
    cuabi__alloc_fail_at(0, false);
    ck_assert_ok(cuabi_argpack_release(p));
}
END_TEST

/* Launches on a created stream make no current-context check (the stream
 * carries its context); the legacy default stream needs one per launch. A
 * driver that refuses the launch for want of a current context gets the
 * device made current and the launch once more. */
static int ctx_get_calls;
static CUresult CUDAAPI counting_ctx_get(CUcontext *c)
{
    ctx_get_calls++;
    *c = fake_current;
    return CUDA_SUCCESS;
}

START_TEST(created_streams_skip_the_context_check)
{
    cuabi__driver_for_test()->cuCtxGetCurrent = counting_ctx_get;
    cuabi_argpack *p = add_pack();
    cuabi_stream *st;
    ck_assert_ok(cuabi_stream_create(&st, dev, NULL));
    cuabi_launch_config legacy = config(2, 64), created = config(2, 64);
    created.stream = st;
    cuabi_prepared *pl_legacy, *pl_created;
    ck_assert_ok(cuabi_prepared_create(&pl_legacy, kern, p, &legacy));
    ck_assert_ok(cuabi_prepared_create(&pl_created, kern, p, &created));
    ck_assert_ok(cuabi_launch(kern, p, &legacy)); /* resolves and caches everything */
    ck_assert_ptr_null(fake_current);             /* the legacy launch gave "none" back */

    /* The device current (this fake refuses launches without one): a
     * launch on a created stream asks nothing. */
    ck_assert_ok(cuabi_device_set_current(dev));
    ctx_get_calls = 0;
    ck_assert_ok(cuabi_launch(kern, p, &created));
    ck_assert_ok(cuabi_prepared_launch(pl_created));
    ck_assert_int_eq(ctx_get_calls, 0);
    ck_assert_ok(cuabi_launch(kern, p, &legacy));
    ck_assert_ok(cuabi_prepared_launch(pl_legacy));
    ck_assert_int_eq(ctx_get_calls, 2);

    /* A thread with no current context: the fake refuses, cuabi activates
     * and launches again, once. */
    int before = fake_launches;
    fake_current = NULL;
    fake_launch_ctx = NULL;
    ck_assert_ok(cuabi_launch(kern, p, &created));
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ptr_null(fake_current);             /* and none again after */
    fake_launch_ctx = NULL;
    ck_assert_ok(cuabi_prepared_launch(pl_created));
    ck_assert_ptr_eq(fake_launch_ctx, (CUcontext)(uintptr_t)0x1000);
    ck_assert_ptr_null(fake_current);
    ck_assert_int_eq(fake_launches, before + 2);
    ck_assert_ok(cuabi_device_set_current(dev));
    /* Other failures are not retried. */
    fake_launch_result = CUDA_ERROR_LAUNCH_FAILED;
    ctx_get_calls = 0;
    ck_assert_status(cuabi_prepared_launch(pl_created), CUABI_ERROR_CUDA);
    ck_assert_status(cuabi_launch(kern, p, &created), CUABI_ERROR_CUDA);
    fake_launch_result = CUDA_SUCCESS;
    ck_assert_int_eq(fake_launches, before + 2);

    ck_assert_ok(cuabi_prepared_release(pl_legacy));
    ck_assert_ok(cuabi_prepared_release(pl_created));
    ck_assert_ok(cuabi_stream_release(st));
    ck_assert_ok(cuabi_argpack_release(p));
}
END_TEST

START_TEST(bad_handles)
{
    cuabi_argpack *p = add_pack();
    cuabi_launch_config c = config(1, 32);
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, &c));
    cuabi_prepared *dead = pl;
    ck_assert_ok(cuabi_prepared_release(pl));
    cuabi_argpack *a;
    /* NULL, released, and another type's handle */
    ck_assert_status(cuabi_prepared_launch(NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_launch(dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_launch((cuabi_prepared *)p), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_pack(&a, dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_pack(NULL, dead), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_prepared_set_grid(dead, 1, 1, 1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_retain(dead), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_create(NULL, kern, p, &c), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_kernel *k_as_pack = (cuabi_kernel *)p;
    cuabi_argpack *pack_as_k = (cuabi_argpack *)kern;
    ck_assert_status(cuabi_launch(NULL, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_launch(k_as_pack, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_launch(kern, NULL, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_launch(kern, pack_as_k, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_launch_check(kern, NULL, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_prepared_create(&pl, NULL, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_check_kernel(p, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_check_kernel(NULL, kern), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_create_for_kernel(&a, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_argpack_create_for_kernel(NULL, kern), CUABI_ERROR_INVALID_ARGUMENT);
    c.device = (cuabi_device *)p;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    c.device = NULL;
    c.stream = (cuabi_stream *)dev;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(fake_launches, 0);
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(released_buffer_in_prepared_pack)
{
    /* A buffer slot whose handle is gone: the launch is refused and names
     * the slot (values from a blob, as a binding would pass them). */
    cuabi_argpack *p;
    ck_assert_ok(cuabi_argpack_create(&p, "buffer, ptr, i32, f64"));
    uint64_t blob[4] = { (uint64_t)(uintptr_t)dev, 0, 0, 0 }; /* a device, not a buffer */
    ck_assert_ok(cuabi_argpack_set_blob(p, blob, sizeof blob));
    cuabi_launch_config c = config(1, 32);
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("argument 0 holds a buffer");
    ck_assert_int_eq(fake_launches, 0);
    cuabi_argpack_release(p);
}
END_TEST

static size_t per_thread(int block, void *payload)
{
    return (size_t)block * *(int *)payload;
}

START_TEST(live_occupancy)
{
    /* The fake device reports 1 for most attributes; give the calculator an
     * H100's numbers through the table's sm_90 entry (cc 9.0). */
    cuabi_occupancy_result r = CUABI_OCCUPANCY_RESULT_INIT;
    ck_assert_ok(cuabi_occupancy_max_active_blocks(&r, kern, dev, 128, 0));
    ck_assert_int_eq(r.active_blocks_per_sm, 2); /* what the driver said */
    ck_assert_int_ne(r.limiter, CUABI_OCCUPANCY_LIMIT_NONE);
    int b, g, bytes = 16;
    ck_assert_ok(cuabi_occupancy_max_potential_block_size(&b, &g, kern, dev, per_thread, &bytes, 0, 0));
    ck_assert_int_eq(b, 128);
    ck_assert_int_eq(g, 264);
    ck_assert_uint_eq(fake_cb_bytes, 128 * 16); /* the callback got its payload */
    ck_assert_ok(cuabi_occupancy_max_potential_block_size(&b, NULL, kern, dev, NULL, NULL, 99, 0));
    ck_assert_uint_eq(fake_cb_bytes, 99);
    size_t avail;
    ck_assert_ok(cuabi_occupancy_available_dynamic_smem(&avail, kern, dev, 2, 128));
    ck_assert_uint_eq(avail, 116224);
    cuabi_launch_config c = config(8, 128);
    c.cluster[0] = 2;
    int n;
    ck_assert_ok(cuabi_occupancy_max_potential_cluster_size(&n, kern, &c));
    ck_assert_int_eq(n, 8);
    ck_assert_ok(cuabi_occupancy_max_active_clusters(&n, kern, &c));
    ck_assert_int_eq(n, 66);
    /* bad input */
    ck_assert_status(cuabi_occupancy_max_active_blocks(&r, kern, dev, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_max_active_blocks(NULL, kern, dev, 32, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_max_active_blocks(&r, NULL, dev, 32, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_occupancy_max_active_blocks(&r, kern, (cuabi_device *)kern, 32, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_occupancy_max_potential_block_size(NULL, NULL, kern, dev, NULL, NULL, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_max_potential_block_size(&b, NULL, NULL, dev, NULL, NULL, 0, 0), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_occupancy_available_dynamic_smem(&avail, kern, dev, 0, 128), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_available_dynamic_smem(&avail, kern, NULL, 1, 128), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_occupancy_max_active_clusters(&n, kern, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_max_active_clusters(NULL, kern, &c), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_occupancy_max_potential_cluster_size(&n, NULL, &c), CUABI_ERROR_INVALID_HANDLE);
    c.version = 9;
    ck_assert_status(cuabi_occupancy_max_potential_cluster_size(&n, kern, &c), CUABI_ERROR_INVALID_VERSION);
}
END_TEST

/* ---- launch attributes (configuration version 2) */

/* The attribute of `id` among those of the last launch, or NULL. */
static const CUlaunchAttribute *last_attr(CUlaunchAttributeID id)
{
    for (unsigned i = 0; i < fake_last.numAttrs; i++)
        if (fake_last_attrs[i].id == id)
            return &fake_last_attrs[i];
    return NULL;
}

static cuabi_event *no_timing_event(void)
{
    cuabi_event *e;
    cuabi_event_options o = CUABI_EVENT_OPTIONS_INIT;
    o.flags = CUABI_EVENT_DISABLE_TIMING;
    ck_assert_ok(cuabi_event_create(&e, dev, &o));
    return e;
}

/* Every attribute set, then each one checked as it reached cuLaunchKernelEx. */
static void set_every_attribute(cuabi_launch_attributes *a, cuabi_event *pe, cuabi_event *ce)
{
    a->preferred_cluster[0] = 4;
    a->cluster_scheduling_policy = CUABI_CLUSTER_SCHEDULING_SPREAD;
    a->programmatic_stream_serialization = 1;
    a->programmatic_event = pe;
    a->programmatic_event_trigger_at_block_start = 1;
    a->launch_completion_event = ce;
    a->priority = -3;
    a->access_policy_base = 0xC0000;
    a->access_policy_bytes = 4096;
    a->access_policy_hit_ratio = 0.5f;
    a->mem_sync_domain = CUABI_MEM_SYNC_DOMAIN_REMOTE;
    a->mem_sync_domain_map[0] = 0;
    a->mem_sync_domain_map[1] = 3;
    a->preferred_shared_memory_carveout = 50;
    a->nvlink_util_centric_scheduling = 1;
}

static void assert_every_attribute(CUevent pe, CUevent ce)
{
    ck_assert_uint_eq(fake_last.numAttrs, 13);
    const CUlaunchAttribute *at;
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));
    ck_assert_uint_eq(at->value.clusterDim.x, 2);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_COOPERATIVE));
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION));
    ck_assert_uint_eq(at->value.preferredClusterDim.x, 4);
    ck_assert_uint_eq(at->value.preferredClusterDim.y, 1);
    ck_assert_uint_eq(at->value.preferredClusterDim.z, 1);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE));
    ck_assert_int_eq(at->value.clusterSchedulingPolicyPreference, CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION));
    ck_assert_int_eq(at->value.programmaticStreamSerializationAllowed, 1);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT));
    ck_assert_ptr_eq(at->value.programmaticEvent.event, pe);
    ck_assert_int_eq(at->value.programmaticEvent.triggerAtBlockStart, 1);
    ck_assert_int_eq(at->value.programmaticEvent.flags, 0);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT));
    ck_assert_ptr_eq(at->value.launchCompletionEvent.event, ce);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_PRIORITY));
    ck_assert_int_eq(at->value.priority, -3);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW));
    ck_assert_ptr_eq(at->value.accessPolicyWindow.base_ptr, (void *)0xC0000);
    ck_assert_uint_eq(at->value.accessPolicyWindow.num_bytes, 4096);
    ck_assert(at->value.accessPolicyWindow.hitRatio == 0.5f);
    ck_assert_int_eq(at->value.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
    ck_assert_int_eq(at->value.accessPolicyWindow.missProp, CU_ACCESS_PROPERTY_STREAMING);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN));
    ck_assert_int_eq(at->value.memSyncDomain, CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP));
    ck_assert_uint_eq(at->value.memSyncDomainMap.default_, 0);
    ck_assert_uint_eq(at->value.memSyncDomainMap.remote, 3);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT));
    ck_assert_uint_eq(at->value.sharedMemCarveout, 50);
    ck_assert_ptr_nonnull(at = last_attr(CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING));
    ck_assert_uint_eq(at->value.nvlinkUtilCentricScheduling, 1);
}

static CUevent raw_event(cuabi_event *e)
{
    uintptr_t raw;
    ck_assert_ok(cuabi_event_raw(&raw, e));
    return (CUevent)raw;
}

START_TEST(every_attribute_reaches_the_driver)
{
    cuabi_argpack *p = add_pack();
    cuabi_event *pe = no_timing_event(), *ce = no_timing_event();
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = config(8, 128);
    c.cluster[0] = 2;
    c.cooperative = 1;
    c.attributes = &a;
    /* all defaults: nothing added, the plain entry point */
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(fake_last.numAttrs, 2);
    c.cluster[0] = 0;
    c.cooperative = 0;
    ck_assert_ok(cuabi_launch(kern, p, &c));
    ck_assert_uint_eq(fake_last.numAttrs, 0);
    ck_assert_int_eq(fake_plain_launches, 1);
    c.cluster[0] = 2;
    c.cooperative = 1;
    set_every_attribute(&a, pe, ce);
    ck_assert_ok(cuabi_launch_check(kern, p, &c));
    ck_assert_ok(cuabi_launch(kern, p, &c));
    assert_every_attribute(raw_event(pe), raw_event(ce));
    /* a prepared launch copies the attributes and keeps its events */
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, &c));
    memset(&a, 0xff, sizeof a);
    CUevent rpe = raw_event(pe), rce = raw_event(ce);
    ck_assert_ok(cuabi_event_release(pe));
    ck_assert_ok(cuabi_event_release(ce));
    ck_assert_int_eq(fake_live_events, 2);
    memset(fake_last_attrs, 0, sizeof fake_last_attrs);
    ck_assert_ok(cuabi_prepared_launch(pl));
    assert_every_attribute(rpe, rce);
    /* a new grid is checked against the preferred cluster (4 divides 8, not 6) */
    ck_assert_status(cuabi_prepared_set_grid(pl, 6, 1, 1), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("attributes.preferred_cluster.x = 4 does not divide grid.x = 6");
    ck_assert_ok(cuabi_prepared_set_grid(pl, 16, 1, 1));
    ck_assert_ok(cuabi_prepared_release(pl));
    ck_assert_int_eq(fake_live_events, 0);
    cuabi_argpack_release(p);
}
END_TEST

START_TEST(attribute_errors_name_the_field)
{
    cuabi_argpack *p = add_pack();
    cuabi_event *timed, *good = no_timing_event();
    ck_assert_ok(cuabi_event_create(&timed, dev, NULL));
    static const struct { cuabi_status st; const char *says; } bad[] = {
        { CUABI_ERROR_INVALID_VERSION, "cuabi_launch_attributes version 0" },
        { CUABI_ERROR_INVALID_VERSION, "knows 1..1" },
        { CUABI_ERROR_LAUNCH_CONFIG, "preferred_cluster.x = 3 must be a multiple of cluster.x = 2" },
        { CUABI_ERROR_LAUNCH_CONFIG, "preferred_cluster.x = 16 does not divide grid.x = 8" },
        { CUABI_ERROR_LAUNCH_CONFIG, "preferred_cluster.z = 2 must equal cluster.z = 1" },
        { CUABI_ERROR_LAUNCH_CONFIG, "cluster_scheduling_policy = 7 is not" },
        { CUABI_ERROR_LAUNCH_CONFIG, "access_policy_base is 0" },
        { CUABI_ERROR_LAUNCH_CONFIG, "access_policy_hit_ratio = 1.5 is not in 0..1" },
        { CUABI_ERROR_LAUNCH_CONFIG, "access_policy_hit_ratio = nan" },
        { CUABI_ERROR_LAUNCH_CONFIG, "access_policy_hit_property = 3" },
        { CUABI_ERROR_LAUNCH_CONFIG, "no persisting misses" },
        { CUABI_ERROR_LAUNCH_CONFIG, "mem_sync_domain = 2" },
        { CUABI_ERROR_LAUNCH_CONFIG, "set both" },
        { CUABI_ERROR_LAUNCH_CONFIG, "mem_sync_domain_map[1] = 256" },
        { CUABI_ERROR_LAUNCH_CONFIG, "carveout = 101 is not a percentage" },
        { CUABI_ERROR_INVALID_HANDLE, "attributes.programmatic_event is not a live cuabi_event" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
        cuabi_launch_config c = config(8, 128);
        c.cluster[0] = 2;
        c.attributes = &a;
        switch (i) {
        case 0: a.version = 0; break;
        case 1: a.version = 2; break;
        case 2: a.preferred_cluster[0] = 3; break;
        case 3: a.preferred_cluster[0] = 16; break;
        case 4: a.preferred_cluster[0] = 4; a.preferred_cluster[2] = 2; break;
        case 5: a.cluster_scheduling_policy = 7; break;
        case 6: a.access_policy_bytes = 64; a.access_policy_base = 0; break;
        case 7: case 8: case 9: case 10:
            a.access_policy_bytes = 64;
            a.access_policy_base = 0x1000;
            if (i == 7) a.access_policy_hit_ratio = 1.5f;
            if (i == 8) a.access_policy_hit_ratio = nanf("");
            if (i == 9) a.access_policy_hit_property = 3;
            if (i == 10) a.access_policy_miss_property = CUABI_ACCESS_PROPERTY_PERSISTING;
            break;
        case 11: a.mem_sync_domain = 2; break;
        case 12: a.mem_sync_domain_map[0] = 1; break;
        case 13: a.mem_sync_domain_map[0] = 1; a.mem_sync_domain_map[1] = 256; break;
        case 14: a.preferred_shared_memory_carveout = 101; break;
        case 15: a.programmatic_event = (cuabi_event *)kern; break;
        }
        ck_assert_status(cuabi_launch(kern, p, &c), bad[i].st);
        ck_assert_error_mentions(bad[i].says);
        ck_assert_error_mentions("cuabi_launch: ");
        ck_assert_status(cuabi_launch_check(kern, p, &c), bad[i].st);
        cuabi_prepared *pl = (cuabi_prepared *)1;
        ck_assert_status(cuabi_prepared_create(&pl, kern, p, &c), bad[i].st);
        ck_assert_ptr_null(pl);
    }
    /* attributes that need a cluster */
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = config(8, 128);
    c.attributes = &a;
    a.preferred_cluster[1] = 2;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("preferred_cluster needs a cluster size");
    a = (cuabi_launch_attributes)CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.cluster_scheduling_policy = CUABI_CLUSTER_SCHEDULING_LOAD_BALANCING;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("cluster_scheduling_policy needs a cluster size");
    /* events: with timing, of another device, released */
    a = (cuabi_launch_attributes)CUABI_LAUNCH_ATTRIBUTES_INIT;
    a.launch_completion_event = timed;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("attributes.launch_completion_event must be created with "
                             "CUABI_EVENT_DISABLE_TIMING");
    cuabi_device *dev1;
    cuabi_event *other;
    cuabi_event_options o = CUABI_EVENT_OPTIONS_INIT;
    o.flags = CUABI_EVENT_DISABLE_TIMING;
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    ck_assert_ok(cuabi_event_create(&other, dev1, &o));
    a.launch_completion_event = NULL;
    a.programmatic_event = other;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("attributes.programmatic_event is an event of device 1, the launch "
                             "is on device 0");
    a.programmatic_event = good;
    ck_assert_ok(cuabi_event_release(good));
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_error_mentions("not a live cuabi_event");
    ck_assert_int_eq(fake_launches, 0);
    cuabi_event_release(other);
    cuabi_event_release(timed);
    cuabi_device_release(dev1);
    cuabi_argpack_release(p);
}
END_TEST

/* What the device cannot do, found by the full checks (cuabi_launch_check,
 * cuabi_prepared_create, and cuabi_launch once the driver refuses). */
START_TEST(attributes_against_the_device)
{
    cuabi_argpack *p = add_pack();
    cuabi_event *pe = no_timing_event();
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = config(8, 128);
    c.attributes = &a;
    a.programmatic_event = pe;
    fake_cc_major = 8;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("programmatic_event needs compute capability 9.0 or newer, device 0 "
                             "has 8.x");
    /* cuabi_launch leaves it to the driver; its refusal is explained the same way */
    fake_launch_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("needs compute capability 9.0");
    fake_launch_result = CUDA_SUCCESS;
    fake_cc_major = 9;
    a.programmatic_event = NULL;
    a.access_policy_base = 0x1000;
    a.access_policy_bytes = (1 << 20) + 1;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("access_policy_bytes = 1048577 is over device 0's largest "
                             "access-policy window of 1048576 bytes");
    fake_window_bytes = 0;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("device 0 has no L2 access-policy windows");
    a.access_policy_bytes = 0;
    a.mem_sync_domain_map[0] = 0;
    a.mem_sync_domain_map[1] = 4;
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("mem_sync_domain_map[1] = 4 is not below device 0's 4 memory sync "
                             "domains");
    cuabi_prepared *pl;
    ck_assert_status(cuabi_prepared_create(&pl, kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    a.mem_sync_domain_map[1] = 3;
    ck_assert_ok(cuabi_launch_check(kern, p, &c));
    /* a device query that fails is reported, not ignored */
    cuabi__fault_arm("cuDeviceGetAttribute", 1, true, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_status(cuabi_launch_check(kern, p, &c), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_int_eq(fake_launches, 0);
    cuabi_event_release(pe);
    cuabi_argpack_release(p);
}
END_TEST

/* The driver refuses a launch whose attributes passed every check: the
 * error names what the launch carried, and what the driver is too old for. */
START_TEST(driver_refusal_names_the_attributes)
{
    cuabi_argpack *p = add_pack();
    cuabi_event *ce = no_timing_event();
    cuabi_launch_attributes a = CUABI_LAUNCH_ATTRIBUTES_INIT;
    cuabi_launch_config c = config(8, 128);
    c.attributes = &a;
    a.programmatic_stream_serialization = 1;
    a.priority = -2;
    fake_launch_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_LAUNCH_CONFIG);
    ck_assert_error_mentions("cuabi_launch: cuLaunchKernelEx refused the launch with");
    ck_assert_error_mentions("programmatic_stream_serialization, priority -2");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    fake_launch_result = CUDA_ERROR_NOT_SUPPORTED;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    fake_launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("the launch had the attributes: programmatic_stream_serialization");
    /* a driver older than an attribute: named, NOT_SUPPORTED */
    cuabi__lib_info *info = (cuabi__lib_info *)cuabi__driver_info();
    info->version = 12020;
    a.launch_completion_event = ce;
    fake_launch_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("launch_completion_event needs a CUDA 12.3 driver; this driver is 12.2");
    /* the same from a prepared launch */
    fake_launch_result = CUDA_SUCCESS;
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, &c));
    fake_launch_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_prepared_launch(pl), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("cuabi_prepared_launch: cuLaunchKernelEx refused the launch");
    ck_assert_error_mentions("launch_completion_event needs a CUDA 12.3 driver");
    info->version = 13000;
    fake_launch_result = CUDA_SUCCESS;
    ck_assert_ok(cuabi_prepared_release(pl));
    /* without cuLaunchKernelEx at all */
    cuabi__driver_for_test()->cuLaunchKernelEx = NULL;
    ck_assert_status(cuabi_launch(kern, p, &c), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("does not provide cuLaunchKernelEx");
    cuabi_event_release(ce);
    cuabi_argpack_release(p);
}
END_TEST

/* A caller built against the version-1 header passes a shorter struct: the
 * library must not read past `device`. The struct is placed right before
 * an inaccessible page, so a read of `attributes` would crash the test. */
START_TEST(version_1_configurations_keep_working)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *mem = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    ck_assert_int_eq(mprotect(mem + page, (size_t)page, PROT_NONE), 0);
    size_t v1 = offsetof(cuabi_launch_config, attributes);
    cuabi_launch_config *c = (cuabi_launch_config *)(mem + page - v1);
    /* the generated initialiser writes version 1's fields only */
    ck_assert_ok(cuabi_launch_config_init(c, 1));
    ck_assert_uint_eq(c->version, 1);
    ck_assert_uint_eq(c->grid[0], 1);
    c->grid[0] = 8;
    c->block[0] = 128;
    c->cluster[0] = 2;
    c->device = dev;
    cuabi_argpack *p = add_pack();
    ck_assert_ok(cuabi_launch(kern, p, c));
    ck_assert_uint_eq(fake_last.numAttrs, 1);
    ck_assert_ok(cuabi_launch_check(kern, p, c));
    cuabi_prepared *pl;
    ck_assert_ok(cuabi_prepared_create(&pl, kern, p, c));
    ck_assert_ok(cuabi_prepared_launch(pl));
    ck_assert_ok(cuabi_prepared_set_grid(pl, 4, 1, 1));
    ck_assert_ok(cuabi_prepared_release(pl));
    int n;
    ck_assert_ok(cuabi_occupancy_max_potential_cluster_size(&n, kern, c));
    /* the driver refuses: the full checks read version 1's fields only */
    fake_launch_result = CUDA_ERROR_INVALID_VALUE;
    ck_assert_status(cuabi_launch(kern, p, c), CUABI_ERROR_CUDA);
    fake_launch_result = CUDA_SUCCESS;
    cuabi_argpack_release(p);
    munmap(mem, (size_t)page * 2);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("launch_cpu");
    TCase *tc = tcase_create("launch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, launch_passes_values_and_config);
    tcase_add_test(tc, implicit_default_stream);
    tcase_add_test(tc, cluster_and_cooperative_attributes);
    tcase_add_test(tc, argument_mismatch_launches_nothing);
    tcase_add_test(tc, check_uses_the_drivers_offsets);
    tcase_add_test(tc, parameter_bank_base_of_64_aligned_parameters);
    tcase_add_test(tc, configuration_errors);
    tcase_add_test(tc, prepared_launches);
    tcase_add_test(tc, created_streams_skip_the_context_check);
    tcase_add_test(tc, bad_handles);
    tcase_add_test(tc, released_buffer_in_prepared_pack);
    tcase_add_test(tc, live_occupancy);
    tcase_add_test(tc, every_attribute_reaches_the_driver);
    tcase_add_test(tc, attribute_errors_name_the_field);
    tcase_add_test(tc, attributes_against_the_device);
    tcase_add_test(tc, driver_refusal_names_the_attributes);
    tcase_add_test(tc, version_1_configurations_keep_working);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
