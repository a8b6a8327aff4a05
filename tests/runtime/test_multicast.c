/* Multicast objects against the fake driver (fake_vmm.h): a team of both
 * fake devices, sizes rounded to the granularity, VMM buffers bound by
 * chunk and by address, the mapping and its lifetime, unbinding (by hand
 * and at the object's end, releasing the bound buffers' memory), and the
 * refusals: a device without CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED,
 * a device twice, misaligned or out-of-range bindings, a buffer of a
 * device outside the team, a range across two chunks, host memory. */
#include "testutil.h"
#include "fake_vmm.h"
#include "runtime/memory.h"

enum { G = 64 << 10 };

static cuabi_device *dev0, *dev1;
static cuabi_memory_resource *v0, *v1;

static void setup(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    fake_vmm_install();
    ck_assert_ok(cuabi_device_get(&dev0, 0));
    ck_assert_ok(cuabi_device_get(&dev1, 1));
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.granularity = CUABI_VMM_GRANULARITY_MINIMUM;
    o.reserve_size = 8 * G;
    ck_assert_ok(cuabi_vmm_resource_create(&v0, dev0, &o));
    ck_assert_ok(cuabi_vmm_resource_create(&v1, dev1, &o));
}
static void teardown(void)
{
    cuabi_memory_resource_release(v0);
    cuabi_memory_resource_release(v1);
    cuabi_device_release(dev0);
    cuabi_device_release(dev1);
    ck_assert_int_eq(fake_mc_live, 0);
    ck_assert_int_eq(fake_vmm_live_handles, 0);
    ck_assert_int_eq(fake_vmm_live_maps, 0);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_multicast *team(size_t size)
{
    cuabi_device *devs[2] = { dev0, dev1 };
    cuabi_multicast *m;
    ck_assert_ok(cuabi_multicast_create(&m, devs, 2, size, CUABI_VMM_HANDLE_NONE));
    return m;
}

START_TEST(create_bind_map_unbind)
{
    int yes = 0;
    ck_assert_ok(cuabi_multicast_supported(&yes, dev0));
    ck_assert_int_eq(yes, 1);
    size_t g;
    ck_assert_ok(cuabi_multicast_granularity(&g, 2, 1 << 20, 0));
    ck_assert_uint_eq(g, G);
    ck_assert_ok(cuabi_multicast_granularity(&g, 2, 1 << 20, 1));
    ck_assert_uint_eq(g, 4 * G);
    cuabi_multicast *m = team(G + 1);
    size_t size;
    ck_assert_ok(cuabi_multicast_size(&size, m));
    ck_assert_uint_eq(size, 2 * G);                   /* rounded up, and said */
    cuabi_buffer *b0, *b1;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b0, v0, 2 * G, 0));
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b1, v1, 2 * G, 0));
    ck_assert_ok(cuabi_multicast_bind_memory(m, 0, b0, 0, 2 * G));
    ck_assert_ok(cuabi_multicast_bind_buffer(m, 0, b1, 0, G));
    ck_assert_ok(cuabi_multicast_bind_buffer(m, G, b1, G, G));
    ck_assert_int_eq(fake_mc_binds, 3);
    cuabi_buffer *mc;
    ck_assert_ok(cuabi_multicast_map(&mc, m));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, mc));
    ck_assert_uint_ne(p, 0);
    ck_assert_ok(cuabi_buffer_size(&size, mc));
    ck_assert_uint_eq(size, 2 * G);
    cuabi_device *d;
    ck_assert_ok(cuabi_buffer_device(&d, mc));
    ck_assert_ptr_eq(d, dev0);
    /* the bound buffers' memory outlives their handles while bound */
    ck_assert_ok(cuabi_buffer_destroy(b0));
    ck_assert_ok(cuabi_buffer_destroy(b1));
    ck_assert_int_eq(fake_vmm_live_handles, 3);      /* 2 chunks + the object */
    ck_assert_ok(cuabi_multicast_unbind(m, dev0, 0));
    ck_assert_int_eq(fake_mc_unbinds, 1);
    ck_assert_int_eq(fake_vmm_live_handles, 2);      /* b0's chunk went with its unbind */
    ck_assert_status(cuabi_multicast_unbind(m, dev0, 0), CUABI_ERROR_NOT_FOUND);
    /* the mapping keeps the object: releasing the handle unbinds nothing yet */
    ck_assert_ok(cuabi_multicast_release(m));
    ck_assert_int_eq(fake_mc_live, 1);
    ck_assert_int_eq(fake_mc_unbinds, 1);
    ck_assert_ok(cuabi_buffer_destroy(mc));           /* the last: unbinds b1's two ranges */
    ck_assert_int_eq(fake_mc_unbinds, 3);
    ck_assert_int_eq(fake_mc_live, 0);
}
END_TEST

START_TEST(refusals)
{
    cuabi_device *devs[2] = { dev0, dev0 };
    cuabi_multicast *m = (void *)1;
    ck_assert_status(cuabi_multicast_create(&m, devs, 2, G, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("twice");
    ck_assert_ptr_null(m);
    ck_assert_status(cuabi_multicast_create(&m, devs, 0, G, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_multicast_create(&m, devs, 1, 0, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_multicast_create(&m, devs, 1, G, (cuabi_vmm_handle_type)3),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_multicast_create(&m, NULL, 1, G, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_device *bad[1] = { (cuabi_device *)(uintptr_t)0x77 };
    ck_assert_status(cuabi_multicast_create(&m, bad, 1, G, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_INVALID_HANDLE);
    ck_assert_status(cuabi_multicast_granularity(&(size_t){ 0 }, 0, G, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    /* a device without multicast: refused naming the attribute */
    fake_attr_override(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0);
    int yes = 1;
    ck_assert_ok(cuabi_multicast_supported(&yes, dev1));
    ck_assert_int_eq(yes, 0);
    cuabi_device *pair[2] = { dev0, dev1 };
    ck_assert_status(cuabi_multicast_create(&m, pair, 2, G, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED");
    ck_assert_ptr_null(m);
    ck_assert_int_eq(fake_mc_live, 0);
    fake_attr_override(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 1);
    /* bindings */
    cuabi_device *one[1] = { dev0 };
    ck_assert_ok(cuabi_multicast_create(&m, one, 1, 4 * G, CUABI_VMM_HANDLE_NONE));
    cuabi_buffer *b0, *b1, *h;
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b0, v0, G, 4 * G));
    ck_assert_ok(cuabi_vmm_buffer_resize(b0, 3 * G, NULL));    /* chunks: [0,G) [G,3G) */
    ck_assert_ok(cuabi_vmm_buffer_allocate(&b1, v1, G, 0));
    cuabi_memory_resource *hr;
    ck_assert_ok(cuabi_memory_resource_host(&hr));
    ck_assert_ok(cuabi_buffer_allocate(&h, hr, G, 0, NULL));
    ck_assert_status(cuabi_multicast_bind_memory(m, 0, b0, 0, 2 * G),
                     CUABI_ERROR_INVALID_ARGUMENT);             /* across two chunks */
    ck_assert_error_mentions("one physical chunk");
    ck_assert_status(cuabi_multicast_bind_memory(m, 1, b0, 0, G), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("granularity");
    ck_assert_status(cuabi_multicast_bind_memory(m, 4 * G, b0, 0, G),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("past the multicast object");
    ck_assert_status(cuabi_multicast_bind_buffer(m, 0, b0, 2 * G, 2 * G),
                     CUABI_ERROR_INVALID_ARGUMENT);             /* past the buffer */
    ck_assert_status(cuabi_multicast_bind_buffer(m, 0, b1, 0, G), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not in the multicast team");
    ck_assert_status(cuabi_multicast_bind_buffer(m, 0, h, 0, G), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("device memory");
    ck_assert_status(cuabi_multicast_bind_memory(m, 0, h, 0, G), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fake_mc_binds, 0);
    ck_assert_ok(cuabi_multicast_bind_memory(m, G, b0, G, 2 * G));   /* the second chunk */
    cuabi__fault_arm("cuMulticastBindAddr", 1, false, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_status(cuabi_multicast_bind_buffer(m, 0, b0, 0, G),
                     CUABI_ERROR_DEVICE_OUT_OF_MEMORY);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_status(cuabi_multicast_unbind(m, dev1, G), CUABI_ERROR_NOT_FOUND);
    ck_assert_status(cuabi_multicast_unbind(NULL, dev0, G), CUABI_ERROR_INVALID_HANDLE);
    /* an unbind the driver refuses keeps the binding */
    cuabi__fault_arm("cuMulticastUnbind", 1, false, CUDA_ERROR_INVALID_VALUE);
    ck_assert_status(cuabi_multicast_unbind(m, dev0, G), CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_multicast_unbind(m, dev0, G));
    /* a failing map leaves nothing */
    cuabi__fault_arm("cuMemSetAccess", 1, false, CUDA_ERROR_INVALID_VALUE);
    cuabi_buffer *mc = (void *)1;
    ck_assert_status(cuabi_multicast_map(&mc, m), CUABI_ERROR_CUDA);
    ck_assert_ptr_null(mc);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_ok(cuabi_buffer_destroy(h));
    ck_assert_ok(cuabi_memory_resource_release(hr));
    ck_assert_ok(cuabi_buffer_destroy(b0));
    ck_assert_ok(cuabi_buffer_destroy(b1));
    ck_assert_ok(cuabi_multicast_release(m));
    /* a create failing half way (adding a device) releases the object */
    cuabi__fault_arm("cuMulticastAddDevice", 2, false, CUDA_ERROR_INVALID_DEVICE);
    ck_assert_status(cuabi_multicast_create(&m, pair, 2, G, CUABI_VMM_HANDLE_NONE),
                     CUABI_ERROR_CUDA);
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    ck_assert_int_eq(fake_mc_live, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("multicast");
    TCase *tc = tcase_create("multicast");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, create_bind_map_unbind);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
