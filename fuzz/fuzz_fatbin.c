/* Fatbin containers from random and mutated bytes (issue 16): the parser
 * behind cuabi_fatbin_* and the objcode's offline view of a fatbin. Every
 * image is listed, each CUBIN extracted (its ELF parsed) and its kernels'
 * resources read through the fatbin; each PTX image extracted. Nothing is
 * handed to nvJitLink or the driver (resources are asked only for
 * architectures with a CUBIN, which is used as is).
 *
 * Input: the container; the magic is put in front when it is missing so
 * that mutations explore past the first check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuabi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void per_image(cuabi_objcode *o, cuabi_code_type type, int arch)
{
    char name[32];
    snprintf(name, sizeof name, "%s_%d", type == CUABI_CODE_PTX ? "compute" : "sm", arch);
    cuabi_objcode *img = NULL;
    if (cuabi_fatbin_extract(&img, o, name) != CUABI_SUCCESS)
        return;
    cuabi_code_type got;
    if (cuabi_objcode_code_type(&got, img) != CUABI_SUCCESS || got != type)
        __builtin_trap();
    if (type == CUABI_CODE_CUBIN) {
        size_t count = 0;
        if (cuabi_objcode_kernel_count(&count, img) == CUABI_SUCCESS) {
            for (size_t i = 0; i < count && i < 8; i++) {
                const char *kname = NULL;
                if (cuabi_objcode_kernel_name(&kname, img, i) != CUABI_SUCCESS)
                    __builtin_trap();
                cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
                (void)cuabi_objcode_kernel_resources(&r, img, kname, NULL);
                (void)cuabi_objcode_kernel_resources(&r, o, kname, name);
            }
        }
    }
    cuabi_objcode_release(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t magic[4] = { 0x50, 0xed, 0x55, 0xba };
    static int once;
    if (!once) { /* offline only: no driver, no nvFatbin */
        setenv("CUABI_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
        setenv("CUABI_NVJITLINK_PATH", "/nonexistent/libnvJitLink.so", 1);
        once = 1;
    }
    uint8_t *buf = malloc(size + 4);
    if (!buf)
        return 0;
    size_t n = size;
    if (size >= 4 && !memcmp(data, magic, 4)) {
        memcpy(buf, data, size);
    } else {
        memcpy(buf, magic, 4);
        memcpy(buf + 4, data, size);
        n = size + 4;
    }
    cuabi_objcode *o = NULL;
    if (cuabi_objcode_from_memory(&o, CUABI_CODE_FATBIN, buf, n, "fuzz") != CUABI_SUCCESS) {
        free(buf);
        return 0;
    }
    free(buf);
    size_t count = 0, narchs = 0;
    int archs[16];
    const char *packer;
    cuabi_status st = cuabi_fatbin_image_count(&count, o);
    if ((cuabi_fatbin_archs(archs, 16, &narchs, o) == CUABI_SUCCESS) != (st == CUABI_SUCCESS))
        __builtin_trap();
    if ((cuabi_fatbin_packer(&packer, o) == CUABI_SUCCESS) != (st == CUABI_SUCCESS))
        __builtin_trap();
    for (size_t i = 0; st == CUABI_SUCCESS && i <= count && i < 64; i++) {
        cuabi_code_type type;
        int arch;
        cuabi_status si = cuabi_fatbin_image_info(&type, &arch, o, i);
        if ((si == CUABI_SUCCESS) != (i < count))
            __builtin_trap();
        if (si == CUABI_SUCCESS && (type == CUABI_CODE_CUBIN || type == CUABI_CODE_PTX))
            per_image(o, type, arch);
    }
    cuabi_objcode_release(o);
    return 0;
}
