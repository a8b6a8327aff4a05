/* The tables gen/cuabi_gen.py writes into tables.c from api/: every
 * status's name and message (error.c) and every handle type's name
 * (handle.c's messages). */
#ifndef CUABI_UTIL_TABLES_H
#define CUABI_UTIL_TABLES_H

#include "cuabi.h"

typedef struct cuabi__status_info {
    cuabi_status status;
    const char *name;
    const char *message;
} cuabi__status_info;
extern const cuabi__status_info cuabi__status_table[]; /* generated */
extern const char *const cuabi__handle_type_names[];   /* generated */

#endif
