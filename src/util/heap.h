/* Giving the process heap, once, the memory the CUDA driver's first graphs
 * will take from it (heap.c). */
#ifndef CUABI_UTIL_HEAP_H
#define CUABI_UTIL_HEAP_H

#include <stddef.h>

/* Once per process (later calls return at once): grow the heap by
 * CUABI__HEAP_RESERVE_BYTES, its pages made resident, and leave it free for
 * any malloc. CUABI_HEAP_RESERVE=0 in the environment turns it off. Never
 * fails: where the memory cannot be had, nothing is reserved. */
void cuabi__heap_reserve(void);

/* The work of cuabi__heap_reserve, every time it is called (tests): `bytes`
 * rounded down to whole blocks. Returns the bytes reserved (0 when malloc
 * refused the first block). */
size_t cuabi__heap_reserve_now(size_t bytes);

/* 36 blocks of 112 KiB: the driver's module loads take some of it first. */
#define CUABI__HEAP_RESERVE_BYTES ((size_t)36 * 112 * 1024)

#endif
