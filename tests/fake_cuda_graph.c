/* The fake driver of the C tests (tests/fake_driver.h, fake_memory.h,
 * fake_graph.h) as a libcuda stand-in that libcuabi.so loads through
 * CUABI_DRIVER_PATH, so that the bindings' graph layers run against it
 * without a GPU (bindings/python/tests/test_graph.py starts a process with
 * it). The fakes fill a driver table; cuGetProcAddress_v2 hands out its
 * entries by name. Kernel nodes of kernels named `add_i64` and `count_loop`
 * run on the host (see their implementations below). Never a library to
 * ship. */
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

/* add_i64(int64 *out, const int64 *in, uint64 n): out[0] += in[0..n). */
static void add_i64(const unsigned char args[FG_ARGS], const unsigned grid[3])
{
    (void)grid;
    int64_t *out, *in;
    uint64_t n;
    memcpy(&out, args, 8);
    memcpy(&in, args + 8, 8);
    memcpy(&n, args + 16, 8);
    for (uint64_t i = 0; i < n; i++)
        out[0] += in[i];
}

/* count_loop(uint64 handle, int64 *counter, uint64 limit): one iteration of
 * a while loop that goes on while the counter is below the limit. */
static void count_loop(const unsigned char args[FG_ARGS], const unsigned grid[3])
{
    (void)grid;
    uint64_t h, limit;
    int64_t *counter;
    memcpy(&h, args, 8);
    memcpy(&counter, args + 8, 8);
    memcpy(&limit, args + 16, 8);
    ++*counter;
    fake_cond_set(h, *counter < (int64_t)limit);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_driver_install_libraries();
    fake_graph_install();
    fake_kernel_implement("add_i64", add_i64);
    fake_kernel_implement("count_loop", count_loop);
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
