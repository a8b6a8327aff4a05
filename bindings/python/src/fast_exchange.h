/* The DLPack C exchange API cuabi.View exports (fast_exchange.c). */
#ifndef CUABI_FAST_EXCHANGE_H
#define CUABI_FAST_EXCHANGE_H

#include "fast_common.h"

/* Adds this part's functions, types and constants to the module (called by
 * fast_module.c only). */
int fast_exchange_init(PyObject *module);

#endif
