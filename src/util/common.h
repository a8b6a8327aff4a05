/* What every module of libcuabi uses: the error record and the checks of
 * public functions (error.h), the allocation wrappers (alloc.h), and
 * handles and the objects behind them (handle.h). Nothing declared here is
 * exported from the shared library. It includes only the public headers
 * and the util floor (src/util/README.md). */
#ifndef CUABI_UTIL_COMMON_H
#define CUABI_UTIL_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuabi.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/handle.h"

#endif
