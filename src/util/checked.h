/* Overflow-checked arithmetic on sizes, counts, offsets and addresses.
 *
 * Every size computation on a value a caller (or a foreign library: DLPack
 * producers, kernels' parameter tables) gave goes through these or through
 * __builtin_*_overflow directly: a product or sum that does not fit is an
 * error of the caller's, never a wrapped value. Each returns true when the
 * result fits (and stores it), false when it would overflow (*out is then
 * unspecified). Header-only: any floor may include it. */
#ifndef CUABI_UTIL_CHECKED_H
#define CUABI_UTIL_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool cuabi__size_mul(size_t *out, size_t a, size_t b)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline bool cuabi__size_add(size_t *out, size_t a, size_t b)
{
    return !__builtin_add_overflow(a, b, out);
}

/* a * b + c, all sizes. */
static inline bool cuabi__size_mul_add(size_t *out, size_t a, size_t b, size_t c)
{
    return cuabi__size_mul(out, a, b) && cuabi__size_add(out, *out, c);
}

/* `size` bytes at `offset` lie inside `total` bytes (offset + size <= total,
 * without computing a sum that could wrap). */
static inline bool cuabi__range_inside(size_t offset, size_t size, size_t total)
{
    return offset <= total && size <= total - offset;
}

/* `size` bytes from address `p` stay below the top of the address space
 * (p + size does not wrap; p + size == 2^N is not allowed either, so the
 * end is representable). */
static inline bool cuabi__span_fits(uintptr_t p, size_t size)
{
    return size <= UINTPTR_MAX - p;
}

/* Saturating versions, for figures that are reported, not used to address
 * memory (occupancy's bytes per block): SIZE_MAX stands for "too many". */
static inline size_t cuabi__size_add_sat(size_t a, size_t b)
{
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

/* x rounded up to a multiple of `unit` (> 0), or SIZE_MAX when that does
 * not fit. */
static inline size_t cuabi__size_round_up_sat(size_t x, size_t unit)
{
    size_t r;
    if (__builtin_add_overflow(x, unit - 1, &r))
        return SIZE_MAX;
    return r / unit * unit;
}

/* x rounded up to a multiple of `unit` (> 0); false when that does not fit. */
static inline bool cuabi__size_round_up(size_t *out, size_t x, size_t unit)
{
    if (__builtin_add_overflow(x, unit - 1, out))
        return false;
    *out = *out / unit * unit;
    return true;
}

#endif
