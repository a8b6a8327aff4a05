/* Virtual memory against the fake driver (tests/fixtures/fake_vmm.h, where
 * "physical memory" is a memfd mapped over a PROT_NONE reservation, so the
 * bytes behave as on a GPU and an unmapped page faults): granularity and
 * rounding, allocation, growth in place (address kept, old bytes kept, new
 * chunk with the same access), growing past the reservation, shrinking
 * (chunks released, a straddling chunk kept, refused under a view; a
 * failed unmap leaves the buffer as it was),
 * access per device, devices without VMM or a handle type, chunk export and
 * import (fds through SCM_RIGHTS to a child process, fabric handles), every
 * refusal of a descriptor set, and no leaks (handles, reservations,
 * mappings, fds). "Another process" is faked by rewriting the exporter pid
 * to our parent's and resealing, as test_ipc_pool does; the fork case is a
 * real other process. */
#include "testutil.h"
#include "fake_vmm.h"
#include "runtime/ipc.h"
#include "runtime/memory.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/wait.h>

enum { D = CUABI_IPC_DESCRIPTOR_SIZE, G = 64 << 10, R = 128 << 10 };  /* min / recommended */

static cuabi_device *dev0, *dev1;
static int fds_at_start;

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    fake_vmm_install();
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    fds_at_start = open_fds();
}
static void teardown(void)
{
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    ck_assert_int_eq(fake_vmm_live_handles, 0);
    ck_assert_int_eq(fake_vmm_live_reservations, 0);
    ck_assert_int_eq(fake_vmm_live_maps, 0);
    ck_assert_int_eq(open_fds(), fds_at_start);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_memory_resource *vmm(cuabi_device *d, uint64_t reserve, cuabi_vmm_handle_type h)
{
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.reserve_size = reserve;
    o.handle_type = h;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_vmm_resource_create(&r, d, &o));
    return r;
}

static cuabi_vmm_info info_of(cuabi_buffer *b)
{
    cuabi_vmm_info i = CUABI_VMM_INFO_INIT;
    ck_assert_ok(cuabi_vmm_buffer_info(&i, b));
    return i;
}

static void fill(cuabi_buffer *b, size_t off, size_t n, uint8_t seed)
{
    uint8_t *h = malloc(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(seed + i * 7);
    ck_assert_ok(cuabi_buffer_copy_from_host(b, off, h, n, NULL));
    free(h);
}
static void check(cuabi_buffer *b, size_t off, size_t n, uint8_t seed)
{
    uint8_t *h = malloc(n);
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, off, n, NULL));
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(h[i], (uint8_t)(seed + i * 7));
    free(h);
}

START_TEST(granularity_and_options)
{
    size_t g = 0;
    ck_assert_ok(cuabi_vmm_granularity(&g, dev0, NULL));
    ck_assert_uint_eq(g, R);
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.granularity = CUABI_VMM_GRANULARITY_MINIMUM;
    ck_assert_ok(cuabi_vmm_granularity(&g, dev0, &o));
    ck_assert_uint_eq(g, G);
    int yes = 0;
    ck_assert_ok(cuabi_vmm_supported(&yes, dev0));
    ck_assert_int_eq(yes, 1);
    ck_assert_status(cuabi_vmm_granularity(NULL, dev0, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_granularity(&g, NULL, NULL), CUABI_ERROR_INVALID_HANDLE);
    cuabi_memory_resource *r;
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.location_type = CUABI_LOCATION_NONE;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("location_type");
    ck_assert_ptr_null(r);
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.handle_type = (cuabi_vmm_handle_type)2;      /* Win32: not here */
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.addr_align = 3 << 20;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("power of two");
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.self_access = CUABI_PEER_ACCESS_NONE;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.granularity = (cuabi_vmm_granularity_kind)7;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.version = 99;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_VERSION);
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.reserve_size = UINT64_MAX;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("reserve_size");
}
END_TEST

START_TEST(unsupported_devices_are_refused_naming_the_attribute)
{
    cuabi_memory_resource *r = (void *)1;
    fake_attr_override(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
    int yes = 1;
    ck_assert_ok(cuabi_vmm_supported(&yes, dev0));
    ck_assert_int_eq(yes, 0);
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
    ck_assert_ptr_null(r);
    size_t g;
    ck_assert_status(cuabi_vmm_granularity(&g, dev0, NULL), CUABI_ERROR_NOT_SUPPORTED);
    fake_attr_override(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
    fake_attr_override(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, NULL), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED");
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.handle_type = CUABI_VMM_HANDLE_NONE;      /* then it needs no fd support */
    ck_assert_ok(cuabi_vmm_resource_create(&r, dev0, &o));
    ck_assert_ok(cuabi_memory_resource_release(r));
    fake_attr_override(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0);
    o.handle_type = CUABI_VMM_HANDLE_FABRIC;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED");
    fake_attr_override(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0);
    o.handle_type = CUABI_VMM_HANDLE_NONE;
    o.gpu_direct_rdma = 1;
    ck_assert_status(cuabi_vmm_resource_create(&r, dev0, &o), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("GPU_DIRECT_RDMA_WITH_CUDA_VMM");
}
END_TEST

START_TEST(allocate_rounds_up_and_says_so)
{
    cuabi_memory_resource *r = vmm(dev0, 0, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_memory_kind k;
    ck_assert_ok(cuabi_memory_resource_kind(&k, r));
    ck_assert_int_eq(k, CUABI_MEMORY_DEVICE);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 1000, 0, NULL));
    size_t size;
    ck_assert_ok(cuabi_buffer_size(&size, b));
    ck_assert_uint_eq(size, R);                  /* rounded up to the granularity */
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.requested, 1000);
    ck_assert_uint_eq(i.size, R);
    ck_assert_uint_eq(i.mapped, R);
    ck_assert_uint_eq(i.reserved, R);
    ck_assert_uint_eq(i.granularity, R);
    ck_assert_uint_eq(i.chunks, 1);
    ck_assert_int_eq(i.handle_type, CUABI_VMM_HANDLE_POSIX_FD);
    ck_assert_int_eq(i.imported, 0);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(i.address, p);
    ck_assert_uint_eq(p % R, 0);
    cuabi_peer_access a;
    ck_assert_ok(cuabi_vmm_get_access(&a, b, dev0));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    ck_assert_ok(cuabi_vmm_get_access(&a, b, dev1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    fill(b, 0, R, 3);
    check(b, 0, R, 3);
    /* the raw interface works too: the same rounding, freed by address */
    uintptr_t raw;
    ck_assert_ok(cuabi_memory_resource_allocate(&raw, r, 5, 0, NULL));
    ck_assert_int_eq(fake_vmm_live_maps, 2);
    ck_assert_status(cuabi_memory_resource_deallocate(r, raw + 4096, 5, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_memory_resource_deallocate(r, raw, 5, 0, NULL));
    int syncs = fake_vmm_syncs;
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_int_gt(fake_vmm_syncs, syncs);     /* the free waited for the device */
    ck_assert_int_eq(fake_vmm_live_maps, 0);
    /* size 0: nothing (as every resource); the VMM call refuses it */
    ck_assert_ok(cuabi_buffer_allocate(&b, r, 0, 0, NULL));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_status(cuabi_vmm_buffer_allocate(&b, r, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    /* a size whose rounding overflows */
    ck_assert_status(cuabi_buffer_allocate(&b, r, SIZE_MAX - 5, 0, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("granularity");
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(grows_in_place)
{
    cuabi_memory_resource *r = vmm(dev0, 0, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b, r, R, 4 * R));
    uintptr_t p0, p;
    ck_assert_ok(cuabi_buffer_pointer(&p0, b));
    fill(b, 0, R, 11);
    /* a view and a DLPack export of the old range stay valid while it grows */
    cuabi_view *v;
    int64_t shape[1] = { R };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 8, 1, shape, NULL, 0));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R + 100, NULL));
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(p, p0);                    /* the address never changes */
    size_t size;
    ck_assert_ok(cuabi_buffer_size(&size, b));
    ck_assert_uint_eq(size, 3 * R);
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.requested, 2 * R + 100);
    ck_assert_uint_eq(i.chunks, 2);
    ck_assert_uint_eq(i.mapped, 3 * R);
    check(b, 0, R, 11);                          /* old bytes kept */
    fill(b, R, 2 * R, 19);                       /* new bytes usable */
    check(b, R, 2 * R, 19);
    uintptr_t vp;
    ck_assert_ok(cuabi_view_data_pointer(&vp, v));
    ck_assert_uint_eq(vp, p0);
    ck_assert_uint_eq(((uint8_t *)vp)[5], (uint8_t)(11 + 5 * 7));
    /* past the reservation: refused, naming it; the buffer is as it was */
    ck_assert_status(cuabi_vmm_buffer_resize(b, 4 * R + 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("reserved range");
    i = info_of(b);
    ck_assert_uint_eq(i.size, 3 * R);
    ck_assert_uint_eq(i.chunks, 2);
    ck_assert_status(cuabi_vmm_buffer_resize(b, SIZE_MAX, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    /* shrinking is refused while a view holds the memory */
    ck_assert_status(cuabi_vmm_buffer_resize(b, R, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("views");
    ck_assert_ok(cuabi_view_release(v));
    /* up to the reservation exactly */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 4 * R, NULL));
    ck_assert_uint_eq(info_of(b).chunks, 3);
    ck_assert_uint_eq(fake_vmm_live_maps, 3);
    /* copies see the new size */
    ck_assert_ok(cuabi_buffer_memset(b, 4 * R - 4, 0xab, 1, 4, NULL));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(shrinks_by_whole_chunks)
{
    cuabi_memory_resource *r = vmm(dev0, 8 * R, CUABI_VMM_HANDLE_NONE);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));   /* the resource's reserve */
    ck_assert_uint_eq(info_of(b).reserved, 8 * R);
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R, NULL));    /* chunk 2: R..2R */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 4 * R, NULL));    /* chunk 3: 2R..4R */
    fill(b, 0, 4 * R, 5);
    /* 3R: chunk 3 straddles it and stays; nothing unmapped */
    int syncs = fake_vmm_syncs;
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 3 * R - 7, NULL));
    ck_assert_int_gt(fake_vmm_syncs, syncs);     /* waited for the device first */
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.size, 3 * R);
    ck_assert_uint_eq(i.mapped, 4 * R);
    ck_assert_uint_eq(i.chunks, 3);
    /* a copy past the new size is refused */
    uint8_t x[4];
    ck_assert_status(cuabi_buffer_copy_to_host(x, b, 3 * R, 4, NULL),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* growing within the mapped part maps nothing */
    int creates = fake_vmm_creates;
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 4 * R, NULL));
    ck_assert_int_eq(fake_vmm_creates, creates);
    check(b, 0, 4 * R, 5);
    /* R: chunks 2 and 3 go, on the stream given */
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, dev0, NULL));
    int ssyncs = fake_syncs;
    ck_assert_ok(cuabi_vmm_buffer_resize(b, R, s));
    ck_assert_int_gt(fake_syncs, ssyncs);
    i = info_of(b);
    ck_assert_uint_eq(i.size, R);
    ck_assert_uint_eq(i.mapped, R);
    ck_assert_uint_eq(i.chunks, 1);
    ck_assert_int_eq(fake_vmm_live_maps, 1);
    check(b, 0, R, 5);
    /* to 0 and back */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 0, NULL));
    ck_assert_uint_eq(info_of(b).chunks, 0);
    cuabi_peer_access a;
    ck_assert_ok(cuabi_vmm_get_access(&a, b, dev0));   /* what a next chunk gets */
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R, NULL));
    fill(b, 0, 2 * R, 9);
    check(b, 0, 2 * R, 9);
    ck_assert_ok(cuabi_stream_release(s));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(access_per_device)
{
    cuabi_memory_resource *r = vmm(dev0, 4 * R, CUABI_VMM_HANDLE_NONE);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_set_access(b, dev1, CUABI_PEER_ACCESS_READ));
    cuabi_peer_access a;
    ck_assert_ok(cuabi_vmm_get_access(&a, b, dev1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ);
    /* growth gives the new chunk the same access */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 3 * R, NULL));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    CUmemLocation l1 = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 };
    unsigned long long f = 0;
    ck_assert_int_eq(fake_cuMemGetAccess(&f, &l1, (CUdeviceptr)(p + 2 * R)), CUDA_SUCCESS);
    ck_assert_uint_eq(f, CU_MEM_ACCESS_FLAGS_PROT_READ);
    ck_assert_ok(cuabi_vmm_set_access(b, dev1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, dev1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    ck_assert_status(cuabi_vmm_set_access(b, dev1, (cuabi_peer_access)2),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* the resource's peers: buffers allocated from now on */
    ck_assert_ok(cuabi_vmm_resource_set_peer_access(r, dev1, CUABI_PEER_ACCESS_READ_WRITE));
    cuabi_buffer *c;
    ck_assert_ok(cuabi_buffer_allocate(&c, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_get_access(&a, c, dev1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    ck_assert_ok(cuabi_vmm_get_access(&a, b, dev1));   /* b keeps its own */
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    ck_assert_status(cuabi_vmm_resource_set_peer_access(r, dev0, CUABI_PEER_ACCESS_NONE),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_vmm_resource_set_peer_access(r, dev1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_buffer_destroy(c));
    ck_assert_ok(cuabi_buffer_allocate(&c, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_get_access(&a, c, dev1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    ck_assert_ok(cuabi_buffer_destroy(c));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(not_vmm_buffers_and_resources)
{
    cuabi_memory_resource *host, *pool;
    ck_assert_ok(cuabi_memory_resource_host(&host));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, host, 64, 0, NULL));
    cuabi_vmm_info i = CUABI_VMM_INFO_INIT;
    ck_assert_status(cuabi_vmm_buffer_info(&i, b), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("not a VMM buffer");
    ck_assert_status(cuabi_vmm_buffer_resize(b, 128, NULL), CUABI_ERROR_NOT_SUPPORTED);
    int fd;
    uint8_t d[D];
    ck_assert_status(cuabi_vmm_export_chunk(&fd, d, D, b, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(fd, -1);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_status(cuabi_vmm_buffer_allocate(&b, host, 64, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_null(b);
    ck_assert_status(cuabi_vmm_resource_set_peer_access(host, dev1, CUABI_PEER_ACCESS_READ),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, dev0));
    ck_assert_status(cuabi_vmm_import(&b, pool, NULL, 1, d, D), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_memory_resource_release(host));
    ck_assert_status(cuabi_vmm_buffer_info(NULL, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_buffer_info(&i, NULL), CUABI_ERROR_INVALID_HANDLE);
}
END_TEST

/* Export every chunk of `b`: descriptors as if from our parent, the fds. */
static size_t export_all(uint8_t *desc, int *fds, cuabi_buffer *b, bool as_parent)
{
    size_t n = info_of(b).chunks;
    for (size_t i = 0; i < n; i++) {
        ck_assert_ok(cuabi_vmm_export_chunk(&fds[i], desc + i * D, D, b, i));
        size_t idx, cnt;
        ck_assert_ok(cuabi_vmm_descriptor_chunks(&idx, &cnt, desc + i * D, D));
        ck_assert_uint_eq(idx, i);
        ck_assert_uint_eq(cnt, n);
        if (as_parent) {
            cuabi__ipc_put(desc + i * D + CUABI__IPC_PID, (uint64_t)getppid(), 4);
            cuabi__ipc_reseal(desc + i * D);
        }
    }
    return n;
}
static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

START_TEST(export_import_round_trip)
{
    cuabi_memory_resource *r = vmm(dev0, 4 * R, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b, *imp;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 3 * R, NULL));
    fill(b, 0, 3 * R, 21);
    uint8_t desc[4 * D];
    int fds[4];
    size_t n = export_all(desc, fds, b, true);
    ck_assert_uint_eq(n, 2);
    cuabi_ipc_kind k;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&k, desc, D));
    ck_assert_int_eq(k, CUABI_IPC_VMM_CHUNK);
    /* the importer: its own resource, on the other device */
    cuabi_memory_resource *ri = vmm(dev1, 0, CUABI_VMM_HANDLE_POSIX_FD);
    ck_assert_ok(cuabi_vmm_import(&imp, ri, fds, n, desc, n * D));
    close_all(fds, n);                          /* not kept by the import */
    cuabi_vmm_info i = info_of(imp);
    ck_assert_int_eq(i.imported, 1);
    ck_assert_uint_eq(i.size, 3 * R);
    ck_assert_uint_eq(i.chunks, 2);
    cuabi_device *d;
    ck_assert_ok(cuabi_buffer_device(&d, imp));
    ck_assert_ptr_eq(d, dev1);
    cuabi_peer_access a;
    ck_assert_ok(cuabi_vmm_get_access(&a, imp, dev1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    check(imp, 0, 3 * R, 21);                   /* the same memory */
    fill(imp, R, R, 77);
    check(b, R, R, 77);
    /* an imported buffer neither resizes nor exports */
    ck_assert_status(cuabi_vmm_buffer_resize(imp, 4 * R, NULL), CUABI_ERROR_NOT_SUPPORTED);
    int fd;
    ck_assert_status(cuabi_vmm_export_chunk(&fd, desc, D, imp, 0), CUABI_ERROR_IPC);
    /* the exporter's chunks outlive its free while the importer maps them */
    ck_assert_ok(cuabi_buffer_destroy(b));
    check(imp, R, R, 77);
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_memory_resource_release(ri));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(fabric_handles_travel_inside_the_descriptor)
{
    cuabi_memory_resource *r = vmm(dev0, 0, CUABI_VMM_HANDLE_FABRIC);
    cuabi_buffer *b, *imp;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    fill(b, 0, R, 31);
    uint8_t desc[D];
    int fd = 7;
    ck_assert_ok(cuabi_vmm_export_chunk(&fd, desc, D, b, 0));
    ck_assert_int_eq(fd, -1);
    cuabi_ipc_kind k;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&k, desc, D));
    ck_assert_int_eq(k, CUABI_IPC_VMM_FABRIC_CHUNK);
    cuabi__ipc_put(desc + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(desc);
    cuabi_memory_resource *ri = vmm(dev0, 0, CUABI_VMM_HANDLE_FABRIC);
    ck_assert_ok(cuabi_vmm_import(&imp, ri, NULL, 1, desc, D));
    check(imp, 0, R, 31);
    /* a file-descriptor resource refuses fabric chunks */
    cuabi_memory_resource *rf = vmm(dev0, 0, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *x = (void *)1;
    ck_assert_status(cuabi_vmm_import(&x, rf, NULL, 1, desc, D), CUABI_ERROR_IPC);
    ck_assert_error_mentions("fabric");
    ck_assert_ptr_null(x);
    ck_assert_ok(cuabi_buffer_destroy(imp));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(rf));
    ck_assert_ok(cuabi_memory_resource_release(ri));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(import_refusals)
{
    cuabi_memory_resource *r = vmm(dev0, 4 * R, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_memory_resource *ri = vmm(dev0, 0, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b, *b2, *x;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R, NULL));
    ck_assert_ok(cuabi_buffer_allocate(&b2, r, R, 0, NULL));
    uint8_t desc[2 * D], other[D], bad[2 * D];
    int fds[2], ofd[1], bfds[2];
    size_t n = export_all(desc, fds, b, true);
    export_all(other, ofd, b2, true);
    int live = fake_vmm_live_maps;
#define REFUSED(call, needle)                                                 \
    do {                                                                       \
        x = (void *)1;                                                         \
        ck_assert_status(call, CUABI_ERROR_IPC);                               \
        ck_assert_error_mentions(needle);                                      \
        ck_assert_ptr_null(x);                                                 \
        ck_assert_int_eq(fake_vmm_live_maps, live);                           \
    } while (0)
    REFUSED(cuabi_vmm_import(&x, ri, fds, 1, desc, D), "2 chunks but 1");
    memcpy(bad, desc + D, D);
    memcpy(bad + D, desc, D);
    bfds[0] = fds[1];
    bfds[1] = fds[0];
    REFUSED(cuabi_vmm_import(&x, ri, bfds, 2, bad, 2 * D), "in order");
    memcpy(bad, desc, D);
    memcpy(bad + D, other, D);
    REFUSED(cuabi_vmm_import(&x, ri, fds, 2, bad, 2 * D), "");   /* other buffer, count 1 */
    memcpy(bad, desc, 2 * D);
    cuabi__ipc_put(bad + D + CUABI__IPC_OFFSET, 12345, 8);        /* another buffer's id */
    cuabi__ipc_reseal(bad + D);
    REFUSED(cuabi_vmm_import(&x, ri, fds, 2, bad, 2 * D), "another buffer");
    memcpy(bad, desc, 2 * D);
    bad[D + 60] ^= 1;                                             /* corrupt */
    REFUSED(cuabi_vmm_import(&x, ri, fds, 2, bad, 2 * D), "corrupt");
    memcpy(bad, desc, 2 * D);
    cuabi__ipc_put(bad + CUABI__IPC_SIZE, G, 8);                  /* not a whole granule here */
    cuabi__ipc_reseal(bad);
    REFUSED(cuabi_vmm_import(&x, ri, fds, 2, bad, 2 * D), "granularity");
    memcpy(bad, desc, 2 * D);
    cuabi__ipc_put(bad + CUABI__IPC_CHUNK, 5, 2);                 /* index past the count */
    cuabi__ipc_reseal(bad);
    REFUSED(cuabi_vmm_import(&x, ri, fds, 2, bad, 2 * D), "chunk 5 of 2");
    memcpy(bad, desc, 2 * D);
    cuabi__ipc_put(bad + CUABI__IPC_PID, (uint64_t)getpid(), 4);  /* this process */
    cuabi__ipc_reseal(bad);
    cuabi__ipc_put(bad + D + CUABI__IPC_PID, (uint64_t)getpid(), 4);
    cuabi__ipc_reseal(bad + D);
    REFUSED(cuabi_vmm_import(&x, ri, fds, 2, bad, 2 * D), "this process");
    int closed[2] = { fds[0], 1000 };
    REFUSED(cuabi_vmm_import(&x, ri, closed, 2, desc, 2 * D), "not an open file descriptor");
    /* a descriptor of another kind */
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_ipc_pool_create(&pool, dev0, NULL));
    int pfd;
    uint8_t pd[D];
    ck_assert_ok(cuabi_ipc_pool_export(&pfd, pd, D, pool));
    REFUSED(cuabi_vmm_import(&x, ri, &pfd, 1, pd, D), "not a chunk of a VMM buffer");
    size_t idx, cnt;
    ck_assert_status(cuabi_vmm_descriptor_chunks(&idx, &cnt, pd, D), CUABI_ERROR_IPC);
    close(pfd);
    ck_assert_ok(cuabi_memory_resource_release(pool));
    /* the driver refuses a handle: a memfd that is not a chunk (size 0) */
    int empty = memfd_create("not-a-chunk", MFD_CLOEXEC);
    int efds[2] = { empty, empty };
    REFUSED(cuabi_vmm_import(&x, ri, efds, 2, desc, 2 * D), "refused");
    close(empty);
    /* arguments */
    ck_assert_status(cuabi_vmm_import(&x, ri, fds, 2, desc, 2 * D - 1),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_import(&x, ri, fds, 0, desc, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_import(&x, ri, NULL, 2, desc, 2 * D),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_import(NULL, ri, fds, 2, desc, 2 * D),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_export_chunk(&pfd, desc, D, b, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_export_chunk(&pfd, desc, D - 1, b, 0),
                     CUABI_ERROR_BUFFER_TOO_SMALL);
    /* a resource of non-shareable memory cannot export */
    cuabi_memory_resource *rn = vmm(dev0, 0, CUABI_VMM_HANDLE_NONE);
    cuabi_buffer *bn;
    ck_assert_ok(cuabi_buffer_allocate(&bn, rn, R, 0, NULL));
    ck_assert_status(cuabi_vmm_export_chunk(&pfd, desc, D, bn, 0), CUABI_ERROR_IPC);
    ck_assert_error_mentions("CUABI_VMM_HANDLE_NONE");
    ck_assert_ok(cuabi_buffer_destroy(bn));
    ck_assert_ok(cuabi_memory_resource_release(rn));
    /* and still importable after all that */
    ck_assert_ok(cuabi_vmm_import(&x, ri, fds, n, desc, n * D));
    ck_assert_ok(cuabi_buffer_destroy(x));
    close_all(fds, n);
    close_all(ofd, 1);
    ck_assert_ok(cuabi_buffer_destroy(b2));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(ri));
    ck_assert_ok(cuabi_memory_resource_release(r));
#undef REFUSED
}
END_TEST

/* A real other process: the chunks' fds and descriptors go to a child
 * through SCM_RIGHTS (cuabi_ipc_fd_send / _receive); it imports them,
 * checks the bytes and writes its own, which the parent then sees. */
START_TEST(another_process_maps_the_buffer)
{
    cuabi_memory_resource *r = vmm(dev0, 4 * R, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R, NULL));
    fill(b, 0, 2 * R, 41);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        close(sv[0]);
        uint8_t desc[4 * D];
        int fds[4], ok = 1;
        size_t idx, cnt = 1;
        for (size_t i = 0; i < cnt && ok; i++) {
            ok = cuabi_ipc_fd_receive(&fds[i], desc + i * D, D, sv[1]) == CUABI_SUCCESS &&
                 cuabi_vmm_descriptor_chunks(&idx, &cnt, desc + i * D, D) == CUABI_SUCCESS &&
                 idx == i && cnt <= 4;
        }
        cuabi_memory_resource *ri = NULL;
        cuabi_buffer *imp = NULL;
        ok = ok && cuabi_vmm_resource_create(&ri, dev0, NULL) == CUABI_SUCCESS &&
             cuabi_vmm_import(&imp, ri, fds, cnt, desc, cnt * D) == CUABI_SUCCESS;
        uint8_t h[2 * R];
        ok = ok && cuabi_buffer_copy_to_host(h, imp, 0, 2 * R, NULL) == CUABI_SUCCESS;
        for (size_t i = 0; ok && i < 2 * R; i++)
            ok = h[i] == (uint8_t)(41 + i * 7);
        memset(h, 0x5a, R);
        ok = ok && cuabi_buffer_copy_from_host(imp, R, h, R, NULL) == CUABI_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    close(sv[1]);
    uint8_t desc[D];
    for (size_t i = 0; i < 2; i++) {
        int fd;
        ck_assert_ok(cuabi_vmm_export_chunk(&fd, desc, D, b, i));
        ck_assert_ok(cuabi_ipc_fd_send(sv[0], fd, desc, D));
        close(fd);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    uint8_t h[R];
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, R, R, NULL));
    for (size_t i = 0; i < R; i++)
        ck_assert_uint_eq(h[i], 0x5a);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

START_TEST(driver_failures_leave_nothing)
{
    cuabi_memory_resource *r = vmm(dev0, 4 * R, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi__driver *d = cuabi__driver_for_test();
    cuabi_buffer *b;
    /* each step of an allocation failing once */
    const char *steps[] = { "cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess" };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        cuabi__fault_arm(steps[i], 1, false, CUDA_ERROR_OUT_OF_MEMORY);
        b = (void *)1;
        ck_assert_status(cuabi_buffer_allocate(&b, r, R, 0, NULL),
                         CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
        ck_assert_error_mentions(steps[i]);
        ck_assert_ptr_null(b);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        ck_assert_int_eq(fake_vmm_live_handles, 0);
        ck_assert_int_eq(fake_vmm_live_reservations, 0);
        ck_assert_int_eq(fake_vmm_live_maps, 0);
    }
    /* growth failing: the buffer is as it was */
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    fill(b, 0, R, 1);
    for (size_t i = 1; i < sizeof steps / sizeof *steps; i++) {
        cuabi__fault_arm(steps[i], 1, false, CUDA_ERROR_OUT_OF_MEMORY);
        ck_assert_status(cuabi_vmm_buffer_resize(b, 3 * R, NULL),
                         CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        cuabi_vmm_info info = info_of(b);
        ck_assert_uint_eq(info.size, R);
        ck_assert_uint_eq(info.chunks, 1);
        ck_assert_int_eq(fake_vmm_live_handles, 1);
        ck_assert_int_eq(fake_vmm_live_maps, 1);
    }
    check(b, 0, R, 1);
    /* no entry point at all: a driver without VMM */
    PFN_cuMemCreate_v10020 keep = d->cuMemCreate;
    d->cuMemCreate = NULL;
    ck_assert_status(cuabi_vmm_buffer_resize(b, 3 * R, NULL), CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    d->cuMemCreate = keep;
    /* the export failing hands out no fd */
    cuabi__fault_arm("cuMemExportToShareableHandle", 1, false, CUDA_ERROR_INVALID_VALUE);
    int fd = 5;
    uint8_t desc[D];
    ck_assert_status(cuabi_vmm_export_chunk(&fd, desc, D, b, 0), CUABI_ERROR_CUDA);
    ck_assert_int_eq(fd, -1);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* A shrink whose cuMemUnmap fails leaves the buffer as it was: size,
 * mapped size, chunks, bytes and access (the chunks it had unmapped are
 * mapped back). Before, the smaller size was stored first and the other
 * chunks still went, so the buffer reported less than it had mapped. */
static int unmap_calls, unmap_fail_at;
static CUresult CUDAAPI unmap_failing(CUdeviceptr p, size_t size)
{
    if (++unmap_calls == unmap_fail_at) return CUDA_ERROR_INVALID_VALUE;
    return fake_cuMemUnmap(p, size);
}
static CUresult CUDAAPI map_refused(CUdeviceptr p, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle h, unsigned long long flags)
{
    (void)p, (void)size, (void)offset, (void)h, (void)flags;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void assert_shape(cuabi_buffer *b, size_t size, size_t mapped, size_t chunks)
{
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.size, size);
    ck_assert_uint_eq(i.mapped, mapped);
    ck_assert_uint_eq(i.chunks, chunks);
    size_t n = 0;
    ck_assert_ok(cuabi_buffer_size(&n, b));
    ck_assert_uint_eq(n, size);
    ck_assert_int_eq(fake_vmm_live_maps, (int)chunks);
    ck_assert_int_eq(fake_vmm_live_handles, (int)chunks);
}

START_TEST(failed_shrink_leaves_the_buffer_as_it_was)
{
    cuabi_memory_resource *r = vmm(dev0, 8 * R, CUABI_VMM_HANDLE_NONE);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, R, 0, NULL));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R, NULL));    /* chunk 2: R..2R */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 4 * R, NULL));    /* chunk 3: 2R..4R */
    fill(b, 0, 4 * R, 7);
    uintptr_t base = info_of(b).address;
    cuabi__driver *d = cuabi__driver_for_test();
    /* the first unmap (chunk 3) refused; then the second (chunk 2), after
     * chunk 3 went: chunk 3 is mapped back */
    for (int n = 1; n <= 2; n++) {
        cuabi__fault_arm("cuMemUnmap", n, false, CUDA_ERROR_INVALID_VALUE);
        ck_assert_status(cuabi_vmm_buffer_resize(b, R, NULL), CUABI_ERROR_CUDA);
        cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
        ck_assert_error_mentions("cuMemUnmap");
        ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
        assert_shape(b, 4 * R, 4 * R, 3);
        ck_assert_error_mentions("the buffer is as it was");
        check(b, 0, 4 * R, 7);
        unsigned long long flags = 0;
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
        ck_assert_int_eq(d->cuMemGetAccess(&flags, &loc, (CUdeviceptr)(base + 3 * R)),
                         CUDA_SUCCESS);
        ck_assert_uint_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        uint8_t x[4];   /* copies still reach the end */
        ck_assert_ok(cuabi_buffer_copy_to_host(x, b, 4 * R - 4, 4, NULL));
    }
    /* a later shrink and growth work */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * R, NULL));
    assert_shape(b, 2 * R, 2 * R, 2);
    check(b, 0, 2 * R, 7);
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 4 * R, NULL));
    assert_shape(b, 4 * R, 4 * R, 3);
    fill(b, 0, 4 * R, 3);
    /* the unmap of chunk 2 refused and chunk 3 cannot be mapped back: the
     * buffer says what it really has, and the error says so too */
    PFN_cuMemUnmap_v10020 keep_unmap = d->cuMemUnmap;
    PFN_cuMemMap_v10020 keep_map = d->cuMemMap;
    unmap_calls = 0, unmap_fail_at = 2;
    d->cuMemUnmap = unmap_failing;
    d->cuMemMap = map_refused;
    ck_assert_status(cuabi_vmm_buffer_resize(b, R, NULL), CUABI_ERROR_CUDA);
    d->cuMemUnmap = keep_unmap;
    d->cuMemMap = keep_map;
    ck_assert_error_mentions("the buffer is now 262144 bytes, 2 chunks");
    assert_shape(b, 2 * R, 2 * R, 2);
    check(b, 0, 2 * R, 3);
    ck_assert_ok(cuabi_vmm_buffer_resize(b, R, NULL));
    assert_shape(b, R, R, 1);
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 3 * R, NULL));
    fill(b, 0, 3 * R, 4);
    check(b, 0, 3 * R, 4);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    ck_assert_int_eq(fake_vmm_live_maps, 0);
    ck_assert_int_eq(fake_vmm_live_handles, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vmm");
    TCase *tc = tcase_create("resource");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, granularity_and_options);
    tcase_add_test(tc, unsupported_devices_are_refused_naming_the_attribute);
    tcase_add_test(tc, allocate_rounds_up_and_says_so);
    tcase_add_test(tc, not_vmm_buffers_and_resources);
    tcase_add_test(tc, driver_failures_leave_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("growth");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, grows_in_place);
    tcase_add_test(tc, shrinks_by_whole_chunks);
    tcase_add_test(tc, failed_shrink_leaves_the_buffer_as_it_was);
    tcase_add_test(tc, access_per_device);
    suite_add_tcase(s, tc);
    tc = tcase_create("processes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, export_import_round_trip);
    tcase_add_test(tc, fabric_handles_travel_inside_the_descriptor);
    tcase_add_test(tc, import_refusals);
    tcase_add_test(tc, another_process_maps_the_buffer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
