/* What a blob of compiled code is (code_type.c): every compile-layer module
 * that names or detects a cuabi_code_type uses it. */
#ifndef CUABI_COMPILE_CODE_TYPE_H
#define CUABI_COMPILE_CODE_TYPE_H

#include "util/common.h"

/* The type of `data` from its first bytes; CUABI_CODE_NONE when unknown. */
cuabi_code_type cuabi__code_detect(const void *data, size_t size);
/* "PTX", "CUBIN", ... for messages. */
const char *cuabi__code_type_name(cuabi_code_type type);

#endif
