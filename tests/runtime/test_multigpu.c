/* Peers and IPC (issue 15) against the fake driver: peer access, copies
 * (plain and strided), pool access, and every IPC error path (truncated,
 * corrupt, forged, other-host, other-version, stale, same-process). */
#include "testutil.h"
#include "fake_multigpu.h"
#include "runtime/ipc.h"
#include "runtime/memory.h"

#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static cuabi_device *dev0, *dev1;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
}
static void teardown(void)
{
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

START_TEST(peer_enable_disable)
{
    ck_assert_status(cuabi_peer_enable(NULL, dev1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_enable(dev0, (cuabi_device *)((uintptr_t)dev0 + 7)), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_enable(dev0, dev0), CUABI_ERROR_PEER_ACCESS);
    ck_assert_error_mentions("cuabi_peer_enable");
    ck_assert_ok(cuabi_peer_enable(dev1, dev0));
    ck_assert_int_eq(fake_peer_enabled[1][0], 1);
    ck_assert_int_eq(fake_peer_enabled[0][1], 0);   /* one direction only */
    ck_assert_ok(cuabi_peer_enable(dev1, dev0));     /* again: fine */
    ck_assert_ok(cuabi_peer_disable(dev1, dev0));
    ck_assert_int_eq(fake_peer_enabled[1][0], 0);
    ck_assert_status(cuabi_peer_disable(dev1, dev0), CUABI_ERROR_PEER_ACCESS);
    ck_assert_error_mentions("not enabled");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    ck_assert_status(cuabi_peer_disable(dev0, dev0), CUABI_ERROR_PEER_ACCESS);
    ck_assert_status(cuabi_peer_disable(dev0, NULL), CUABI_ERROR_INVALID_HANDLE);
    /* A pair that cannot be peers. */
    fake_peer_supported = 0;
    ck_assert_status(cuabi_peer_enable(dev0, dev1), CUABI_ERROR_PEER_ACCESS);
    ck_assert_error_mentions("CUABI_PEER_ACCESS_SUPPORTED");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    /* Other driver failures stay CUDA errors. */
    fake_peer_supported = 1;
    cuabi__fault_arm("cuCtxEnablePeerAccess", 1, false, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_status(cuabi_peer_enable(dev0, dev1), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    /* A driver without the entry point. */
    cuabi__driver_for_test()->cuCtxEnablePeerAccess = NULL;
    ck_assert_status(cuabi_peer_enable(dev0, dev1), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
}
END_TEST

START_TEST(peer_attributes)
{
    int v = -1;
    ck_assert_status(cuabi_peer_get_attribute(NULL, dev0, dev1, CUABI_PEER_ACCESS_SUPPORTED),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_peer_get_attribute(&v, dev0, NULL, CUABI_PEER_ACCESS_SUPPORTED),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_get_attribute(&v, dev0, dev1, (cuabi_peer_attribute)9),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_peer_get_attribute(&v, dev0, dev0, CUABI_PEER_ACCESS_SUPPORTED),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("same");
    ck_assert_ok(cuabi_peer_get_attribute(&v, dev0, dev1, CUABI_PEER_ACCESS_SUPPORTED));
    ck_assert_int_eq(v, 1);
    fake_peer_supported = 0;
    ck_assert_ok(cuabi_peer_get_attribute(&v, dev1, dev0, CUABI_PEER_NATIVE_ATOMIC_SUPPORTED));
    ck_assert_int_eq(v, 0);
}
END_TEST

static cuabi_buffer *device_buffer(cuabi_device *d, size_t n)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_memory_resource_device_default(&r, d));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_release(r));
    return b;
}

static uint8_t *host_of(cuabi_buffer *b)
{
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    return (uint8_t *)p;   /* fake device memory is host memory */
}

START_TEST(peer_copy_buffers)
{
    size_t live = cuabi__handle_live_count();
    cuabi_buffer *a = device_buffer(dev0, 4096), *b = device_buffer(dev1, 4096);
    for (int i = 0; i < 4096; i++)
        host_of(a)[i] = (uint8_t)(i * 7);
    memset(host_of(b), 0, 4096);
    ck_assert_ok(cuabi_peer_copy(b, 100, a, 200, 1000, NULL));
    ck_assert_int_eq(memcmp(host_of(b) + 100, host_of(a) + 200, 1000), 0);
    ck_assert_int_eq(host_of(b)[99], 0);
    ck_assert_int_eq(host_of(b)[1100], 0);
    /* On a stream of the source's device. */
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev0, NULL));
    ck_assert_ok(cuabi_peer_copy(b, 0, a, 0, 4096, s));
    ck_assert_int_eq(memcmp(host_of(b), host_of(a), 4096), 0);
    ck_assert_ptr_nonnull(fake_last_stream);
    ck_assert_ok(cuabi_peer_copy(b, 0, a, 0, 0, s));   /* nothing to do */
    /* Bad input. */
    ck_assert_status(cuabi_peer_copy(b, 4000, a, 0, 100, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("destination");
    ck_assert_status(cuabi_peer_copy(b, 0, a, SIZE_MAX, 2, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_peer_copy(NULL, 0, a, 0, 1, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_copy(b, 0, a, 0, 1, (cuabi_stream *)a), CUABI_ERROR_INVALID_HANDLE);
    cuabi_memory_resource *hr;
    cuabi_buffer *h;
    ck_assert_ok(cuabi_memory_resource_host(&hr));
    ck_assert_ok(cuabi_buffer_allocate(&h, hr, 64, 0, NULL));
    ck_assert_status(cuabi_peer_copy(h, 0, a, 0, 64, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not device memory");
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_memory_resource_release(hr));
    cuabi__fault_arm("cuMemcpyPeerAsync", 1, false, CUDA_ERROR_ILLEGAL_ADDRESS);
    ck_assert_status(cuabi_peer_copy(b, 0, a, 0, 8, NULL), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

static cuabi_view *view_of(cuabi_buffer *b, uint64_t off, int ndim, const int64_t *shape,
                           const int64_t *strides)
{
    cuabi_view *v;
    ck_assert_ok(cuabi_view_create(&v, b, off, CUABI_DTYPE_FLOAT, 32, ndim, shape, strides, 0));
    return v;
}

START_TEST(peer_copy_strided_views)
{
    enum { N = 4096 };
    cuabi_buffer *a = device_buffer(dev0, N * 4), *b = device_buffer(dev1, N * 4);
    float *fa = (float *)host_of(a), *fb = (float *)host_of(b);
    for (int i = 0; i < N; i++) {
        fa[i] = (float)i;
        fb[i] = -1.0f;
    }
    /* 2-D: a 5x7 block of a row-pitched 32-wide source into a packed one. */
    int64_t shape2[2] = { 5, 7 }, src2[2] = { 32, 1 };
    cuabi_view *vs = view_of(a, 4 * 3, 2, shape2, src2), *vd = view_of(b, 0, 2, shape2, NULL);
    ck_assert_ok(cuabi_peer_copy_view(vd, vs, NULL));
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++)
            ck_assert_float_eq(fb[y * 7 + x], fa[3 + y * 32 + x]);
    ck_assert_float_eq(fb[35], -1.0f);
    ck_assert_uint_eq(fake_last_3d.WidthInBytes, 28);
    ck_assert_uint_eq(fake_last_3d.srcPitch, 128);
    ck_assert_uint_eq(fake_last_3d.Height, 5);
    cuabi_view_release(vs);
    cuabi_view_release(vd);
    /* 3-D, both sides pitched, on a stream; contiguous dims merge. */
    for (int i = 0; i < N; i++)
        fb[i] = -1.0f;
    int64_t shape3[4] = { 3, 4, 2, 5 }, s3[4] = { 400, 40, 5, 1 }, d3[4] = { 160, 20, 5, 1 };
    vs = view_of(a, 0, 4, shape3, s3);
    vd = view_of(b, 0, 4, shape3, d3);
    cuabi_stream *st;
    ck_assert_ok(cuabi_stream_create(&st, dev1, NULL));
    ck_assert_ok(cuabi_peer_copy_view(vd, vs, st));
    for (int z = 0; z < 3; z++)
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 10; x++)
                ck_assert_float_eq(fb[z * 160 + y * 20 + x], fa[z * 400 + y * 40 + x]);
    ck_assert_float_eq(fb[10], -1.0f);
    ck_assert_uint_eq(fake_last_3d.Depth, 3);
    ck_assert_uint_eq(fake_last_3d.srcHeight, 10);
    ck_assert_uint_eq(fake_last_3d.dstHeight, 8);
    cuabi_view_release(vs);
    cuabi_view_release(vd);
    /* Refused layouts. */
    int64_t shape4[4] = { 2, 2, 2, 2 }, s4[4] = { 64, 16, 4, 1 };
    vs = view_of(a, 0, 4, shape4, s4);
    vd = view_of(b, 0, 4, shape4, s4);
    ck_assert_status(cuabi_peer_copy_view(vd, vs, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("at most 3");
    cuabi_view_release(vs);
    cuabi_view_release(vd);
    int64_t shape1[1] = { 8 }, step2[1] = { 2 }, neg[1] = { -1 };
    vs = view_of(a, 0, 1, shape1, step2);
    vd = view_of(b, 0, 1, shape1, NULL);
    ck_assert_status(cuabi_peer_copy_view(vd, vs, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("innermost stride");
    cuabi_view_release(vs);
    vs = view_of(a, 4 * 100, 1, shape1, neg);
    ck_assert_status(cuabi_peer_copy_view(vd, vs, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("negative");
    cuabi_view_release(vs);
    /* Issue 29: an inner stride whose span (stride x extent) overflows 64
     * bits while the view's reach fits ((extent - 1) x stride): compared
     * with the outer stride through a signed overflow (UBSan aborts). Views
     * of foreign device memory (never touched: the plan refuses them). */
    {
        int64_t shp[2] = { 2, 2 }, str[2] = { 1, INT64_C(1) << 62 };
        DLTensor t = { 0 };
        t.data = (void *)(uintptr_t)0x100000;
        t.device.device_type = kDLCUDA;
        t.ndim = 2;
        t.dtype.code = kDLUInt;
        t.dtype.bits = 8;
        t.dtype.lanes = 1;
        t.shape = shp;
        t.strides = str;
        cuabi_view *fs, *fd;
        ck_assert_ok(cuabi_view_from_dltensor(&fs, &t, 0));
        t.device.device_id = 1;
        ck_assert_ok(cuabi_view_from_dltensor(&fd, &t, 0));
        ck_assert_status(cuabi_peer_copy_view(fd, fs, NULL), CUABI_ERROR_NOT_SUPPORTED);
        ck_assert_error_mentions("innermost stride");
        cuabi_view_release(fs);
        cuabi_view_release(fd);
    }
    int64_t shape3z[3] = { 2, 3, 4 }, zero_mid[3] = { 16, 0, 1 };
    cuabi_view *v3s = view_of(a, 0, 3, shape3z, zero_mid), *v3d = view_of(b, 0, 3, shape3z, NULL);
    ck_assert_status(cuabi_peer_copy_view(v3d, v3s, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("zero (broadcast)");
    cuabi_view_release(v3s);
    cuabi_view_release(v3d);
    int64_t shape1b[1] = { 9 };
    vs = view_of(a, 0, 1, shape1b, NULL);
    ck_assert_status(cuabi_peer_copy_view(vd, vs, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("shapes");
    cuabi_view_release(vs);
    ck_assert_ok(cuabi_view_create(&vs, a, 0, CUABI_DTYPE_INT, 32, 1, shape1, NULL, 0));
    ck_assert_status(cuabi_peer_copy_view(vd, vs, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("element types");
    cuabi_view_release(vs);
    int64_t zero[1] = { 0 };
    vs = view_of(a, 0, 1, zero, NULL);
    cuabi_view *vz = view_of(b, 0, 1, zero, NULL);
    int before = fake_3d_copies;
    ck_assert_ok(cuabi_peer_copy_view(vz, vs, NULL));   /* empty: nothing queued */
    ck_assert_int_eq(fake_3d_copies, before);
    cuabi_view_release(vs);
    cuabi_view_release(vz);
    ck_assert_status(cuabi_peer_copy_view(vd, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_view_release(vd);
    ck_assert_ok(cuabi_stream_release(st));
    ck_assert_ok(cuabi_buffer_destroy(a));
    ck_assert_ok(cuabi_buffer_destroy(b));
}
END_TEST

START_TEST(pool_access)
{
    cuabi_memory_resource *pool, *pinned;
    cuabi_peer_access acc = CUABI_PEER_ACCESS_READ;
    ck_assert_ok(cuabi_memory_resource_pool_create(&pool, dev0, NULL));
    ck_assert_ok(cuabi_peer_set_pool_access(pool, dev1, CUABI_PEER_ACCESS_READ_WRITE));
    ck_assert_ok(cuabi_peer_get_pool_access(&acc, pool, dev1));
    ck_assert_int_eq(acc, CUABI_PEER_ACCESS_READ_WRITE);
    ck_assert_ok(cuabi_peer_set_pool_access(pool, dev1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_peer_get_pool_access(&acc, pool, dev1));
    ck_assert_int_eq(acc, CUABI_PEER_ACCESS_NONE);
    ck_assert_status(cuabi_peer_set_pool_access(pool, dev1, (cuabi_peer_access)2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_peer_set_pool_access(pool, dev0, CUABI_PEER_ACCESS_READ),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("owns the pool");
    ck_assert_status(cuabi_peer_get_pool_access(NULL, pool, dev1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_peer_set_pool_access(NULL, dev1, CUABI_PEER_ACCESS_READ),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_set_pool_access(pool, NULL, CUABI_PEER_ACCESS_READ),
                     CUABI_ERROR_INVALID_HANDLE);
    fake_peer_supported = 0;
    ck_assert_status(cuabi_peer_set_pool_access(pool, dev1, CUABI_PEER_ACCESS_READ),
                     CUABI_ERROR_PEER_ACCESS);
    ck_assert_ok(cuabi_memory_resource_pinned(&pinned, dev0));
    ck_assert_status(cuabi_peer_set_pool_access(pinned, dev1, CUABI_PEER_ACCESS_READ),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_peer_get_pool_access(&acc, pinned, dev1), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_memory_resource_release(pinned));
    ck_assert_ok(cuabi_memory_resource_release(pool));
}
END_TEST

/* ------------------------------------------------------------------ IPC */

static cuabi_buffer *ipc_buffer(cuabi_device *d, size_t n)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    ck_assert_ok(cuabi_ipc_memory_resource(&r, d));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, n, 0, NULL));
    ck_assert_ok(cuabi_memory_resource_release(r));
    return b;
}

/* Make a descriptor look as if another live process (our parent) made it. */
static void from_parent(uint8_t *desc)
{
    cuabi__ipc_put(desc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(desc);
}

START_TEST(ipc_export_import_round_trip)
{
    size_t live = cuabi__handle_live_count();
    cuabi_buffer *b = ipc_buffer(dev1, 1000);
    for (int i = 0; i < 1000; i++)
        host_of(b)[i] = (uint8_t)i;
    /* Its own driver allocation of whole 2 MiB pages (a suballocated small
     * block stayed importable after its free: GPU run 2026-11-26). */
    uintptr_t p;
    CUdeviceptr base;
    size_t range;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_int_eq(cuabi__driver_for_test()->cuMemGetAddressRange(&base, &range, p), CUDA_SUCCESS);
    ck_assert_uint_eq(range, (size_t)2 << 20);
    ck_assert_uint_eq(base, p);
    uint8_t desc[CUABI_IPC_DESCRIPTOR_SIZE + 8];
    cuabi_ipc_kind kind = 0;
    ck_assert_ok(cuabi_ipc_buffer_export(desc, sizeof desc, b));
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, desc, CUABI_IPC_DESCRIPTOR_SIZE));
    ck_assert_int_eq(kind, CUABI_IPC_MEMORY);
    ck_assert_int_eq(memcmp(desc, "CUABIIPC", 8), 0);
    ck_assert_uint_eq(cuabi__ipc_get(desc + CUABI__IPC_PID, 4), (uint64_t)getpid());
    ck_assert_uint_eq(cuabi__ipc_get(desc + CUABI__IPC_SIZE, 8), 1000);
    /* The exporter itself cannot import. */
    cuabi_buffer *imp = (cuabi_buffer *)1;
    ck_assert_status(cuabi_ipc_buffer_import(&imp, desc, CUABI_IPC_DESCRIPTOR_SIZE), CUABI_ERROR_IPC);
    ck_assert_error_mentions("this process");
    ck_assert_ptr_null(imp);
    from_parent(desc);
    ck_assert_ok(cuabi_ipc_buffer_import(&imp, desc, CUABI_IPC_DESCRIPTOR_SIZE));
    ck_assert_int_eq(fake_ipc_open_maps, 1);
    size_t n;
    cuabi_memory_kind k;
    cuabi_device *d;
    ck_assert_ok(cuabi_buffer_size(&n, imp));
    ck_assert_uint_eq(n, 1000);
    ck_assert_ok(cuabi_buffer_kind(&k, imp));
    ck_assert_int_eq(k, CUABI_MEMORY_DEVICE);
    ck_assert_ok(cuabi_buffer_device(&d, imp));
    ck_assert_ptr_eq(d, dev1);   /* found by UUID */
    ck_assert_int_eq(memcmp(host_of(imp), host_of(b), 1000), 0);
    /* A view keeps the mapping after the buffer handle goes. */
    cuabi_view *v;
    int64_t shape[1] = { 1000 };
    ck_assert_ok(cuabi_view_create(&v, imp, 0, CUABI_DTYPE_UINT, 8, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_int_eq(fake_ipc_open_maps, 1);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_int_eq(fake_ipc_open_maps, 0);
    /* A sub-range: a wrapped pointer inside the allocation exports its offset. */
    cuabi_buffer *w;
    ck_assert_ok(cuabi_buffer_wrap(&w, dev1, CUABI_MEMORY_DEVICE, (uintptr_t)host_of(b) + 256, 100,
                                   NULL, NULL));
    ck_assert_ok(cuabi_ipc_buffer_export(desc, sizeof desc, w));
    ck_assert_uint_eq(cuabi__ipc_get(desc + CUABI__IPC_OFFSET, 8), 256);
    from_parent(desc);
    ck_assert_ok(cuabi_ipc_buffer_import(&imp, desc, CUABI_IPC_DESCRIPTOR_SIZE));
    ck_assert_ptr_eq(host_of(imp), host_of(b) + 256);
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_buffer_destroy(w));
    ck_assert_int_eq(fake_ipc_open_maps, 0);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

START_TEST(ipc_export_refusals)
{
    cuabi_buffer *b = ipc_buffer(dev0, 64), *pool = device_buffer(dev0, 64);
    uint8_t desc[CUABI_IPC_DESCRIPTOR_SIZE];
    ck_assert_status(cuabi_ipc_buffer_export(NULL, sizeof desc, b), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_buffer_export(desc, sizeof desc, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_buffer_export(desc, sizeof desc - 1, b), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_status(cuabi_ipc_buffer_export(desc, sizeof desc, pool), CUABI_ERROR_IPC);
    ck_assert_error_mentions("cuabi_ipc_memory_resource");
    cuabi_memory_resource *hr;
    cuabi_buffer *h;
    ck_assert_ok(cuabi_memory_resource_host(&hr));
    ck_assert_ok(cuabi_buffer_allocate(&h, hr, 64, 0, NULL));
    ck_assert_status(cuabi_ipc_buffer_export(desc, sizeof desc, h), CUABI_ERROR_IPC);
    ck_assert_error_mentions("device memory");
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_memory_resource_release(hr));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_buffer_destroy(pool));
    ck_assert_int_eq(fake_live_allocs, 0);
}
END_TEST

/* Import must fail with CUABI_ERROR_IPC, mention `needle`, map nothing. */
static void refused(const uint8_t *desc, size_t n, const char *needle)
{
    cuabi_buffer *imp = (cuabi_buffer *)1;
    size_t live = cuabi__handle_live_count();
    ck_assert_status(cuabi_ipc_buffer_import(&imp, desc, n), CUABI_ERROR_IPC);
    ck_assert_error_mentions(needle);
    ck_assert_error_mentions("cuabi_ipc_buffer_import");
    ck_assert_ptr_null(imp);
    ck_assert_int_eq(fake_ipc_open_maps, 0);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}

START_TEST(ipc_bad_descriptors)
{
    cuabi_buffer *b = ipc_buffer(dev0, 512);
    uint8_t good[CUABI_IPC_DESCRIPTOR_SIZE], d[CUABI_IPC_DESCRIPTOR_SIZE + 4];
    ck_assert_ok(cuabi_ipc_buffer_export(good, sizeof good, b));
    from_parent(good);
    cuabi_buffer *imp;
    ck_assert_status(cuabi_ipc_buffer_import(NULL, good, sizeof good), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_buffer_import(&imp, NULL, sizeof good), CUABI_ERROR_INVALID_ARGUMENT);
    /* Truncated at every length, and with trailing bytes. */
    for (size_t n = 0; n < sizeof good; n++)
        refused(good, n, n < 8 ? "not a cuabi IPC descriptor" : "truncated");
    memcpy(d, good, sizeof good);
    memset(d + sizeof good, 0, 4);
    refused(d, sizeof d, "trailing");
    /* Not ours at all. */
    memset(d, 0x41, sizeof d);
    refused(d, sizeof good, "not a cuabi IPC descriptor");
    /* Any flipped bit: corrupt. */
    for (size_t i = 16; i < sizeof good; i += 7) {
        memcpy(d, good, sizeof good);
        d[i] ^= 0x10;
        refused(d, sizeof good, "corrupt");
    }
    /* Another format version (even with a valid checksum); format 2 is a
     * host pool's descriptor only (issue 24), forged on memory. */
    memcpy(d, good, sizeof good);
    cuabi__ipc_put(d + CUABI__IPC_VERSION, 3, 2);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "version 3");
    memcpy(d, good, sizeof good);
    cuabi__ipc_put(d + CUABI__IPC_VERSION, 2, 2);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "format 2");
    /* Another host. */
    memcpy(d, good, sizeof good);
    cuabi__ipc_put(d + CUABI__IPC_HOST, cuabi__ipc_host_hash() ^ 1, 8);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "another host");
    /* An exporter that is gone. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    memcpy(d, good, sizeof good);
    cuabi__ipc_put(d + CUABI__IPC_PID, (uint64_t)child, 4);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "gone");
    /* A device this process does not see. */
    memcpy(d, good, sizeof good);
    d[CUABI__IPC_UUID] ^= 0x80;
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "not visible");
    /* A forged handle the driver refuses (cu_result kept). */
    memcpy(d, good, sizeof good);
    memset(d + CUABI__IPC_HANDLE, 0x5a, 64);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "forged");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    /* A forged size past the allocation (the IPC resource allocates whole
     * 2 MiB pages): the mapping is closed again. */
    memcpy(d, good, sizeof good);
    cuabi__ipc_put(d + CUABI__IPC_SIZE, ((uint64_t)2 << 20) + 1, 8);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "runs past");
    cuabi__ipc_put(d + CUABI__IPC_SIZE, UINT64_MAX, 8);
    cuabi__ipc_put(d + CUABI__IPC_OFFSET, 2, 8);
    cuabi__ipc_reseal(d);
    refused(d, sizeof good, "invalid");
    /* An event descriptor given to the memory import. */
    cuabi_event *ev;
    ck_assert_ok(cuabi_ipc_event_create(&ev, dev0));
    ck_assert_ok(cuabi_ipc_event_export(d, sizeof good, ev));
    from_parent(d);
    refused(d, sizeof good, "an event, not memory");
    ck_assert_ok(cuabi_event_release(ev));
    /* Allocation failures on the way leak no mapping. */
    for (long n = 1; n < 8; n++) {
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi_ipc_buffer_import(&imp, good, sizeof good);
        cuabi__alloc_fail_at(0, false);
        if (st == CUABI_SUCCESS)
            ck_assert_ok(cuabi_buffer_destroy(imp));
        else
            ck_assert_int_eq(st, CUABI_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(fake_ipc_open_maps, 0);
    }
    /* Stale: the exporter freed the memory. */
    ck_assert_ok(cuabi_buffer_destroy(b));
    refused(good, sizeof good, "freed");
    ck_assert_int_eq(fake_live_allocs, 0);
    /* The frame check alone. */
    cuabi_ipc_kind kind;
    ck_assert_status(cuabi_ipc_descriptor_kind(NULL, good, sizeof good), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_descriptor_kind(&kind, good, 20), CUABI_ERROR_IPC);
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, good, sizeof good));
}
END_TEST

START_TEST(ipc_events)
{
    size_t live = cuabi__handle_live_count();
    int events = fake_live_events;
    cuabi_event *ev, *plain, *imp = (cuabi_event *)1;
    uint8_t d[CUABI_IPC_DESCRIPTOR_SIZE];
    ck_assert_status(cuabi_ipc_event_create(NULL, dev0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_event_create(&ev, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_ipc_event_create(&ev, dev1));
    ck_assert_ok(cuabi_event_create(&plain, dev1, NULL));
    ck_assert_status(cuabi_ipc_event_export(d, sizeof d, plain), CUABI_ERROR_IPC);
    ck_assert_error_mentions("cuabi_ipc_event_create");
    ck_assert_status(cuabi_ipc_event_export(d, 10, ev), CUABI_ERROR_BUFFER_TOO_SMALL);
    ck_assert_status(cuabi_ipc_event_export(NULL, sizeof d, ev), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_event_export(d, sizeof d, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_ok(cuabi_ipc_event_export(d, sizeof d, ev));
    cuabi_ipc_kind kind;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, d, sizeof d));
    ck_assert_int_eq(kind, CUABI_IPC_EVENT);
    ck_assert_status(cuabi_ipc_event_import(&imp, d, sizeof d), CUABI_ERROR_IPC);
    ck_assert_ptr_null(imp);
    from_parent(d);
    ck_assert_ok(cuabi_ipc_event_import(&imp, d, sizeof d));
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev1, NULL));
    ck_assert_ok(cuabi_stream_wait_event(s, imp));
    ck_assert_ok(cuabi_event_synchronize(imp));
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_event_release(imp));
    d[100] ^= 1;
    ck_assert_status(cuabi_ipc_event_import(&imp, d, sizeof d), CUABI_ERROR_IPC);
    ck_assert_error_mentions("corrupt");
    ck_assert_status(cuabi_ipc_event_import(&imp, d, 3), CUABI_ERROR_IPC);
    ck_assert_status(cuabi_ipc_event_import(NULL, d, sizeof d), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_event_release(plain));
    ck_assert_ok(cuabi_event_release(ev));
    ck_assert_int_eq(fake_live_events, events);
    ck_assert_uint_eq(cuabi__handle_live_count(), live);
}
END_TEST

/* NULL, released and wrong-type handles everywhere: INVALID_HANDLE (or
 * INVALID_ARGUMENT for a NULL out), never a crash. */
START_TEST(handle_misuse)
{
    cuabi_stream *st;
    cuabi_event *ev;
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    int v;
    cuabi_peer_access acc;
    uint8_t d[CUABI_IPC_DESCRIPTOR_SIZE];
    ck_assert_ok(cuabi_stream_create(&st, dev0, NULL));
    cuabi_device *wrong = (cuabi_device *)(void *)st;   /* a stream where a device goes */
    cuabi_stream *dead;
    ck_assert_ok(cuabi_stream_create(&dead, dev0, NULL));
    ck_assert_ok(cuabi_stream_release(dead));
    ck_assert_status(cuabi_peer_enable(wrong, dev1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_disable(dev0, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_get_attribute(&v, wrong, dev1, CUABI_PEER_ACCESS_SUPPORTED),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_copy((cuabi_buffer *)(void *)st, 0, NULL, 0, 0, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_copy_view((cuabi_view *)(void *)st, NULL, NULL),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_set_pool_access((cuabi_memory_resource *)(void *)st, dev1,
                                                CUABI_PEER_ACCESS_READ), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_peer_get_pool_access(&acc, NULL, dev1), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_memory_resource(NULL, dev0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_ipc_memory_resource(&r, NULL), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_memory_resource(&r, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_buffer_export(d, sizeof d, (cuabi_buffer *)(void *)st),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_event_export(d, sizeof d, (cuabi_event *)(void *)st),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_event_create(&ev, wrong), CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_event_create(&ev, (cuabi_device *)(void *)dead),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_ipc_buffer_import(&b, NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_stream_release(st));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("multigpu");
    TCase *tc = tcase_create("peers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, peer_enable_disable);
    tcase_add_test(tc, peer_attributes);
    tcase_add_test(tc, peer_copy_buffers);
    tcase_add_test(tc, peer_copy_strided_views);
    tcase_add_test(tc, pool_access);
    suite_add_tcase(s, tc);
    tc = tcase_create("ipc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ipc_export_import_round_trip);
    tcase_add_test(tc, ipc_export_refusals);
    tcase_add_test(tc, ipc_bad_descriptors);
    tcase_add_test(tc, ipc_events);
    tcase_add_test(tc, handle_misuse);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
