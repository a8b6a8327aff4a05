/* ObjectCode from random and mutated CUBIN, PTX, LTO-IR and fatbin bytes:
 * creation with type detection and validation, then every offline query
 * (kernel count, names, resources from the CUBIN's ELF, arch). No driver is
 * loaded and nothing is handed to nvJitLink (an external library's crash
 * on garbage would not be ours), so only the paths that need no GPU run.
 *
 * Input: byte 0 picks the declared type (0 detect, 2 PTX, 3 CUBIN,
 * 4 LTO-IR, 5 fatbin, 6 object, 7 library, else detect); the rest is the
 * image. Objects and libraries are never loaded: taking a kernel from one
 * must fail, offline queries must not crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuabi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const cuabi_code_type types[8] = { CUABI_CODE_NONE, CUABI_CODE_NONE, CUABI_CODE_PTX,
                                          CUABI_CODE_CUBIN, CUABI_CODE_LTOIR, CUABI_CODE_FATBIN,
                                          CUABI_CODE_OBJECT, CUABI_CODE_LIBRARY };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    cuabi_code_type type = types[data[0] & 7];
    cuabi_objcode *o = NULL;
    if (cuabi_objcode_from_memory(&o, type, data + 1, size - 1, "fuzz") != CUABI_SUCCESS)
        return 0;
    cuabi_code_type got;
    const void *bytes;
    size_t n;
    int arch;
    if (cuabi_objcode_code_type(&got, o) != CUABI_SUCCESS ||
        cuabi_objcode_bytes(&bytes, &n, o) != CUABI_SUCCESS || n != size - 1)
        __builtin_trap();
    (void)cuabi_objcode_arch(&arch, o);
    if (got == CUABI_CODE_OBJECT || got == CUABI_CODE_LIBRARY) {
        size_t count = 0;
        cuabi_kernel *k = NULL;
        (void)cuabi_objcode_kernel_count(&count, o);
        if (cuabi_objcode_get_kernel(&k, o, "add") != CUABI_ERROR_NOT_SUPPORTED || k)
            __builtin_trap();
    }
    if (got == CUABI_CODE_CUBIN) {
        size_t count = 0;
        if (cuabi_objcode_kernel_count(&count, o) == CUABI_SUCCESS) {
            for (size_t i = 0; i <= count; i++) { /* one past the end too */
                const char *name = NULL;
                cuabi_status st = cuabi_objcode_kernel_name(&name, o, i);
                if ((st == CUABI_SUCCESS) != (i < count))
                    __builtin_trap();
                if (st != CUABI_SUCCESS)
                    continue;
                cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
                (void)cuabi_objcode_kernel_resources(&r, o, name, NULL);
                (void)cuabi_objcode_kernel_resources(&r, o, name, "sm_90");
                cuabi_kernel *k = NULL;
                if (cuabi_objcode_get_kernel(&k, o, name) == CUABI_SUCCESS) {
                    size_t params;
                    (void)cuabi_kernel_get_resources(&r, k);
                    (void)cuabi_kernel_param_count(&params, k);
                    cuabi_kernel_release(k);
                }
            }
        }
        const char *lowered;
        (void)cuabi_objcode_lowered_name(&lowered, o, "fill<int>");
    }
    cuabi_objcode_release(o);
    return 0;
}
