/* The fake driver of the C tests (tests/fake_driver.h, fake_memory.h,
 * fake_graph.h) as a libcuda stand-in that libcuabi.so loads through
 * CUABI_DRIVER_PATH, so that the bindings' graph layers run against it
 * without a GPU (bindings/python/tests/test_graph.py starts a process with
 * it). The fakes fill a driver table; cuGetProcAddress_v2 hands out its
 * entries by name. Kernels named `add_i64` and `count_loop` run on the host
 * (fake_impl_add_i64, fake_impl_count_loop in fake_graph.h). The peer and
 * IPC fakes (fake_multigpu.h) are in too, for the Python pool IPC checks
 * (bindings/python/tests/fake_ipc_pool_checks.py). Never a library to ship. */
#include <pthread.h>

#include "fake_graph.h"
#include "fake_multigpu.h"

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

/* Occupancy queries the graph fake lacks, so that the bindings' live
 * occupancy layer runs here (bindings/python/tests/fake_occupancy_checks.py):
 * the best block is the largest whose dynamic shared memory (the
 * block-size callback's answer, called as the driver calls it) is at most
 * 48 KiB. */
static CUresult CUDAAPI fake_occ_best(int *grid, int *block, CUfunction f,
                                      CUoccupancyB2DSize fn, size_t smem, int limit,
                                      unsigned flags)
{
    (void)f;
    (void)flags;
    *grid = *block = 0;
    for (int b = limit > 0 && limit < 1024 ? limit : 1024; b > 0; b -= 32) {
        if ((fn ? fn(b) : smem) <= 48 * 1024) {
            *block = b;
            *grid = 264;
            break;
        }
    }
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_occ_avail(size_t *out, CUfunction f, int n, int b)
{
    (void)f;
    (void)b;
    *out = 232448 / (size_t)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_occ_cluster_size(int *out, CUfunction f, const CUlaunchConfig *c)
{
    (void)f;
    *out = c->blockDimX <= 256 ? 8 : 4;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_occ_active_clusters(int *out, CUfunction f, const CUlaunchConfig *c)
{
    (void)f;
    unsigned x = 1;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            x = c->attrs[i].value.clusterDim.x;
    *out = 132 / (int)x;
    return CUDA_SUCCESS;
}

static void occupancy_install(void)
{
    table.cuOccupancyMaxPotentialBlockSizeWithFlags = fake_occ_best;
    table.cuOccupancyAvailableDynamicSMemPerBlock = fake_occ_avail;
    table.cuOccupancyMaxPotentialClusterSize = fake_occ_cluster_size;
    table.cuOccupancyMaxActiveClusters = fake_occ_active_clusters;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();   /* before the graph fakes, which chain to it */
    fake_driver_install_libraries();
    fake_graph_install();
    occupancy_install();
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
