/* NVVM IR programs through libNVVM (issue 16 item 4). Loading libNVVM and
 * finding libdevice are the platform layer's (src/platform/nvvm_lib.h);
 * libdevice (nvvm/libdevice/libdevice.10.bc) is linked lazily when a
 * program asks for it.
 *
 * program.c calls in here for everything NVVM-specific: the argument list,
 * the compiler identity of the cache key and the compile itself. */
#ifndef CUABI_COMPILE_NVVM_H
#define CUABI_COMPILE_NVVM_H

#include "compile/program.h"
#include "platform/nvvm_lib.h"

/* NVVM's part of cuabi__compile_args_build: which options apply, and
 * libNVVM's argument list (-arch=compute_XX, -opt, -ftz..., -gen-lto). */
cuabi_status cuabi__nvvm_check_options(const cuabi_program_options *o, const char *caller);
void cuabi__nvvm_each_arg(const cuabi__compile_args *a, cuabi__arg_fn fn, void *ctx);

/* Compile `p` into `e` (PTX or LTO-IR); `*log` gets libNVVM's log either
 * way; a compile error is CUABI_ERROR_COMPILE with the log in the message
 * and the last error record. */
cuabi_status cuabi__nvvm_compile(const cuabi__program *p, const cuabi__compile_args *a,
                                 cuabi__cache_entry *e, char **log, const char *caller);

/* Whether `data` looks like LLVM bitcode (raw or in the wrapper). */
bool cuabi__nvvm_is_bitcode(const void *data, size_t size);

#endif
