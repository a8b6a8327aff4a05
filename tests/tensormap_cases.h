/* Tensor-map encodings that keep every rule the driver documents: the CPU
 * suite checks that cuabi lets each through (tests/test_tensormap.c), the
 * GPU suite that the real driver encodes each (tests/test_gpu_tensormap.c).
 * Views are row-major at a 256-byte aligned address; box in the view's
 * order. */
#ifndef CUABI_TENSORMAP_CASES_H
#define CUABI_TENSORMAP_CASES_H

#include "cuabi.h"

typedef struct tensormap_case {
    const char *what;
    int code, bits, ndim;
    int64_t shape[5];
    uint32_t box[5];
    cuabi_tensormap_interleave interleave;
    cuabi_tensormap_swizzle swizzle;
    cuabi_tensormap_l2_promotion l2;
    cuabi_tensormap_oob_fill oob;
} tensormap_case;

static const tensormap_case tensormap_valid_cases[] = {
    { "1-D float, box of 256", CUABI_DTYPE_FLOAT, 32, 1, { 1024 }, { 256 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_NONE,
      CUABI_TENSORMAP_L2_PROMOTION_NONE, CUABI_TENSORMAP_OOB_FILL_NONE },
    { "32-byte rows, 32B swizzle, NaN fill", CUABI_DTYPE_FLOAT, 32, 2, { 64, 64 }, { 8, 8 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_32B,
      CUABI_TENSORMAP_L2_PROMOTION_64B, CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA },
    { "64-byte rows, 64B swizzle", CUABI_DTYPE_FLOAT, 32, 2, { 64, 64 }, { 8, 16 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_64B,
      CUABI_TENSORMAP_L2_PROMOTION_128B, CUABI_TENSORMAP_OOB_FILL_NONE },
    { "128-byte half rows, 128B swizzle", CUABI_DTYPE_FLOAT, 16, 2, { 64, 64 }, { 64, 64 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_128B,
      CUABI_TENSORMAP_L2_PROMOTION_256B, CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA },
    { "3-D bfloat16", CUABI_DTYPE_BFLOAT, 16, 3, { 4, 64, 64 }, { 2, 16, 8 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_NONE,
      CUABI_TENSORMAP_L2_PROMOTION_NONE, CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA },
    { "4-D bytes", CUABI_DTYPE_UINT, 8, 4, { 2, 3, 64, 64 }, { 1, 1, 32, 16 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_NONE,
      CUABI_TENSORMAP_L2_PROMOTION_NONE, CUABI_TENSORMAP_OOB_FILL_NONE },
    { "5-D int64", CUABI_DTYPE_INT, 64, 5, { 2, 2, 2, 8, 8 }, { 1, 1, 2, 4, 2 },
      CUABI_TENSORMAP_INTERLEAVE_NONE, CUABI_TENSORMAP_SWIZZLE_NONE,
      CUABI_TENSORMAP_L2_PROMOTION_NONE, CUABI_TENSORMAP_OOB_FILL_NONE },
    { "NC/8HWC8 halves, 16B interleave", CUABI_DTYPE_FLOAT, 16, 3, { 4, 16, 8 }, { 2, 8, 8 },
      CUABI_TENSORMAP_INTERLEAVE_16B, CUABI_TENSORMAP_SWIZZLE_NONE,
      CUABI_TENSORMAP_L2_PROMOTION_NONE, CUABI_TENSORMAP_OOB_FILL_NONE },
    { "NC/16HWC16 halves, 32B interleave and swizzle", CUABI_DTYPE_FLOAT, 16, 3, { 4, 16, 16 },
      { 2, 8, 16 }, CUABI_TENSORMAP_INTERLEAVE_32B, CUABI_TENSORMAP_SWIZZLE_32B,
      CUABI_TENSORMAP_L2_PROMOTION_NONE, CUABI_TENSORMAP_OOB_FILL_NONE },
};
#define TENSORMAP_NUM_VALID_CASES (sizeof tensormap_valid_cases / sizeof tensormap_valid_cases[0])

static inline cuabi_tensormap_options tensormap_case_options(const tensormap_case *c)
{
    cuabi_tensormap_options o = CUABI_TENSORMAP_OPTIONS_INIT;
    o.interleave = c->interleave;
    o.swizzle = c->swizzle;
    o.l2_promotion = c->l2;
    o.oob_fill = c->oob;
    return o;
}

#endif
