/* Whether the driver makes a multicast team of one GPU (test_gpu_multicast's
 * "team of one" case was refused with CUDA_ERROR_INVALID_VALUE on two H100s,
 * 2026-11-28): cuMulticastCreate with numDevices 1 and 2, handle types none
 * and POSIX fd, at the minimum and recommended granularity; then
 * cuMulticastAddDevice of device 0. Raw driver, no cuabi.
 * Build: gcc probe_multicast_solo.c -I/usr/local/cuda/include -lcuda */
#include <cuda.h>
#include <stdio.h>

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        printf("no device\n");
        return 0;
    }
    int count = 0, mc = 0;
    cuDeviceGetCount(&count);
    cuDeviceGetAttribute(&mc, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev);
    printf("%d devices, multicast supported %d\n", count, mc);
    for (unsigned n = 1; n <= 2; n++)
        for (int h = 0; h < 2; h++) {
            CUmulticastObjectProp p = { 0 };
            p.numDevices = n;
            p.handleTypes = h ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
            size_t gmin = 0, grec = 0;
            p.size = 1;
            CUresult r1 = cuMulticastGetGranularity(&gmin, &p, CU_MULTICAST_GRANULARITY_MINIMUM);
            CUresult r2 = cuMulticastGetGranularity(&grec, &p, CU_MULTICAST_GRANULARITY_RECOMMENDED);
            for (int g = 0; g < 2; g++) {
                p.size = g ? grec : gmin;
                CUmemGenericAllocationHandle m = 0;
                CUresult r = cuMulticastCreate(&m, &p);
                CUresult a = r ? -1 : cuMulticastAddDevice(m, dev);
                printf("numDevices %u handles %s size %zu (%s; granularity %d/%d): create %d, add "
                       "device 0 %d\n", n, h ? "fd" : "none", p.size, g ? "recommended" : "minimum",
                       r1, r2, r, a);
                if (!r)
                    cuMemRelease(m);
            }
        }
    return 0;
}
