/* What every nvJitLink session of the library shares (jitlink.c). */
#ifndef CUABI_COMPILE_JITLINK_H
#define CUABI_COMPILE_JITLINK_H

#include "platform/loader.h"

/* "NVJITLINK_ERROR_PTX_COMPILE", ... for messages. */
const char *cuabi__jitlink_result_name(nvJitLinkResult r);
/* A fresh copy of the session's error or info log ("" when empty), or NULL
 * when out of memory (cuabi__free it). */
char *cuabi__jitlink_log(const cuabi__nvjitlink *nvj, nvJitLinkHandle h, bool error);
/* Record a failed nvJitLink call (`what`) with the session's error log;
 * returns `status`. */
cuabi_status cuabi__jitlink_fail(cuabi_status status, const cuabi__nvjitlink *nvj,
                                 nvJitLinkHandle h, nvJitLinkResult r, const char *caller,
                                 const char *what);

/* Link one PTX/LTO-IR image to a CUBIN for `arch` with nvJitLink (jitlink.c).
 * *cubin is cuabi__malloc'ed. CUABI_ERROR_LINK / INVALID_IMAGE with the
 * linker's log on failure. */
cuabi_status cuabi__link_to_cubin(void **cubin, size_t *size, cuabi_code_type type,
                                  const void *data, size_t data_size, const char *name,
                                  const char *arch, const char *caller);

#endif
