/* Loading libNVVM (nvvm_lib.c), for NVVM IR programs (src/compile/nvvm.c)
 * and for what the library reports it loaded (library.c).
 *
 * libNVVM is dlopen()ed on first use, like NVRTC (loader.c), from the
 * toolkit's nvvm/lib64 (or next to NVRTC in a pip-style layout). The entry
 * points are declared here rather than taken from nvvm.h: the toolkit keeps
 * that header under nvvm/include, outside the include directory configure
 * checks, and the C API has been stable since CUDA 5. */
#ifndef CUABI_PLATFORM_NVVM_LIB_H
#define CUABI_PLATFORM_NVVM_LIB_H

#include "platform/libident.h"

typedef int cuabi__nvvm_result; /* nvvmResult: 0 success */
#define CUABI__NVVM_SUCCESS 0
#define CUABI__NVVM_ERROR_OUT_OF_MEMORY 1
#define CUABI__NVVM_ERROR_INVALID_INPUT 4
#define CUABI__NVVM_ERROR_INVALID_OPTION 7
#define CUABI__NVVM_ERROR_COMPILATION 9
typedef struct cuabi__nvvm_prog *cuabi__nvvm_program; /* nvvmProgram */

/* libNVVM's entry points: X(name, return, parameters, required). */
#define CUABI__NVVM_FUNCS(X)                                                  \
    X(nvvmVersion, (int *major, int *minor), 1)                                \
    X(nvvmIRVersion, (int *major_ir, int *minor_ir, int *major_dbg, int *minor_dbg), 0) \
    X(nvvmCreateProgram, (cuabi__nvvm_program *prog), 1)                       \
    X(nvvmDestroyProgram, (cuabi__nvvm_program *prog), 1)                      \
    X(nvvmAddModuleToProgram,                                                  \
      (cuabi__nvvm_program prog, const char *buf, size_t size, const char *name), 1) \
    X(nvvmLazyAddModuleToProgram,                                              \
      (cuabi__nvvm_program prog, const char *buf, size_t size, const char *name), 1) \
    X(nvvmCompileProgram, (cuabi__nvvm_program prog, int n, const char **options), 1) \
    X(nvvmGetCompiledResultSize, (cuabi__nvvm_program prog, size_t *size), 1)  \
    X(nvvmGetCompiledResult, (cuabi__nvvm_program prog, char *buf), 1)         \
    X(nvvmGetProgramLogSize, (cuabi__nvvm_program prog, size_t *size), 1)      \
    X(nvvmGetProgramLog, (cuabi__nvvm_program prog, char *buf), 1)

#define CUABI__NVVM_FIELD(name, params, req) cuabi__nvvm_result (*name) params;
typedef struct cuabi__nvvm {
    CUABI__NVVM_FUNCS(CUABI__NVVM_FIELD)
} cuabi__nvvm;
#undef CUABI__NVVM_FIELD

/* Load (once) and return the table; on failure CUABI_ERROR_NOT_SUPPORTED
 * with a message naming libNVVM and every place looked. Thread-safe; the
 * outcome is kept for the life of the process (see the test hook). */
cuabi_status cuabi__nvvm_get_for(const cuabi__nvvm **out, const char *caller);
#define cuabi__nvvm_get(out) cuabi__nvvm_get_for((out), __func__)
bool cuabi__nvvm_loaded(void);
const cuabi__lib_info *cuabi__nvvm_info(void);
/* libNVVM as the compile cache's key names it (libident.h). */
cuabi__compiler *cuabi__nvvm_compiler(void);

/* libdevice.10.bc: the file a compile linking it reads, found without
 * loading libNVVM (CUABI_LIBDEVICE_PATH, else beside the libNVVM the
 * loader would open, else under the toolkit). 0, or -1 with `why` set. */
int cuabi__libdevice_locate(char *out, size_t cap, char *why, size_t why_cap);

/* Testing: swap entries of the loaded table; forget the load (the next
 * call loads again, after a change of CUABI_NVVM_PATH). */
cuabi__nvvm *cuabi__nvvm_for_test(void);
void cuabi__nvvm_reset_for_test(void);

#endif
