/* launch() and prepared launches in C (fast_launch.c). */
#ifndef CUABI_FAST_LAUNCH_H
#define CUABI_FAST_LAUNCH_H

#include "fast_common.h"

/* Adds this part's functions, types and constants to the module (called by
 * fast_module.c only). */
int fast_launch_init(PyObject *module);

#endif
