/* Giving the process heap, once, the memory the CUDA driver's first graphs
 * will take from it (heap.c). */
#ifndef CUABI_UTIL_HEAP_H
#define CUABI_UTIL_HEAP_H

#include <stddef.h>

/* Once per process (later calls return at once): grow the heap by
 * cuabi__heap_reserve_bytes(getenv("CUABI_HEAP_RESERVE")), its pages made
 * resident, and leave it free for any malloc. Never fails: where the memory
 * cannot be had, nothing is reserved. */
void cuabi__heap_reserve(void);

/* The reserve's size for a CUABI_HEAP_RESERVE setting: unset, empty or not a
 * plain decimal number: CUABI__HEAP_RESERVE_BYTES; "0": none; "N": N KiB, at
 * most 14 MiB (rounded down to whole 112 KiB blocks when reserved). */
size_t cuabi__heap_reserve_bytes(const char *setting);

/* The work of cuabi__heap_reserve, every time it is called (tests): `bytes`
 * rounded down to whole blocks. Returns the bytes reserved (0 when malloc
 * refused the first block). */
size_t cuabi__heap_reserve_now(size_t bytes);

/* 72 blocks of 112 KiB (8064 KiB): the driver's module loads take ~2.5 MB of it
 * before the first graph (a 4 MB reserve left the first instantiate 23 page
 * faults on an H200; docs/PERFORMANCE.md, seventh session). */
#define CUABI__HEAP_RESERVE_BYTES ((size_t)72 * 112 * 1024)

#endif
