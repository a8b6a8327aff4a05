/* The fake driver of the C tests (tests/fake_driver.h, fake_memory.h,
 * fake_graph.h) as a libcuda stand-in that libcuabi.so loads through
 * CUABI_DRIVER_PATH, so that the bindings' graph layers run against it
 * without a GPU (bindings/python/tests/test_graph.py starts a process with
 * it). The fakes fill a driver table; cuGetProcAddress_v2 hands out its
 * entries by name. Kernels named `add_i64` and `count_loop` run on the host
 * (fake_impl_add_i64, fake_impl_count_loop in fake_graph.h). Never a
 * library to ship. */
#include <pthread.h>

#include "fake_graph.h"

static cuabi__driver table;

/* What fake_driver.h expects of the loader, here inside the fake. */
void cuabi__driver_install_fake(const cuabi__driver *fake)
{
    table = *fake;
}

cuabi__driver *cuabi__driver_for_test(void)
{
    return &table;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_kernel_implement("add_i64", fake_impl_add_i64);
    fake_kernel_implement("count_loop", fake_impl_count_loop);
}

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *found)
{
    (void)version;
    (void)flags;
    pthread_once(&once, install);
    *pfn = NULL;
#define FAKE_ENTRY(name, ver)                                                 \
    if (strcmp(symbol, #name) == 0)                                            \
        *pfn = (void *)table.name;
    CUABI__DRIVER_FUNCS(FAKE_ENTRY)
#undef FAKE_ENTRY
    if (found)
        *found = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
