/* Reading a CUBIN (an NVIDIA ELF64 image) without a GPU: its kernels and
 * what each needs (registers, shared memory, parameters...).
 *
 * Where the facts live (checked against ptxas -v for sm_75..sm_120):
 *  - kernels: symbols of type STT_FUNC with STO_CUDA_ENTRY (0x10) in st_other;
 *  - registers: EIATTR_REGCOUNT in the global .nv.info section (keyed by
 *    symbol index); older CUBINs also keep them in the top byte of the
 *    .text.<kernel> section's sh_info;
 *  - static shared memory: the size of .nv.shared.<kernel>; from sm_90 that
 *    section starts with the 1 KiB block reserved for the system (the
 *    .nv.reservedSmem.* symbols say so), which is not the kernel's;
 *  - everything else: attributes of .nv.info.<kernel> (sh_info = the kernel's
 *    .text section) and the size of .nv.constant0.<kernel>.
 * Every read is bounds-checked: the parser must survive any bytes. */
#ifndef CUABI_CUBIN_ELF_H
#define CUABI_CUBIN_ELF_H

#include "util/common.h"

typedef struct cuabi__elf_kernel {
    char *name;                      /* owned copy */
    cuabi_kernel_resources res;      /* version = CUABI_KERNEL_RESOURCES_VERSION */
    bool params_known;               /* KPARAM_INFO found (or no params) */
    size_t *param_offsets;           /* res.param_count entries */
    size_t *param_sizes;
} cuabi__elf_kernel;

typedef struct cuabi__elf_info {
    int arch;                        /* 90 for sm_90 */
    size_t kernel_count;
    cuabi__elf_kernel *kernels;
} cuabi__elf_info;

/* True when the bytes start like an ELF image. */
bool cuabi__elf_is_elf(const void *data, size_t size);

/* Parse a CUBIN. On a malformed image: CUABI_ERROR_INVALID_IMAGE with a
 * message naming `caller`, `what` (e.g. the objcode's name) and the defect. */
cuabi_status cuabi__elf_parse(cuabi__elf_info **out, const void *data, size_t size,
                              const char *caller, const char *what);
void cuabi__elf_free(cuabi__elf_info *info);
/* The kernel of that (lowered) name, or NULL. */
const cuabi__elf_kernel *cuabi__elf_find(const cuabi__elf_info *info, const char *name);

/* Copy a kernel's resources into a caller's struct of any known version. */
cuabi_status cuabi__elf_copy_resources(cuabi_kernel_resources *out,
                                       const cuabi__elf_kernel *k, const char *caller);

#endif
