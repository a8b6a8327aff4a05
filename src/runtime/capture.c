/* The capture seam's state: see capture.h. */
#include "runtime/capture.h"

_Atomic int cuabi__captures_active;

static _Atomic(const cuabi__capture_ops *) capture_ops;

CUABI__HOT void cuabi__capture_register(const cuabi__capture_ops *ops)
{
    atomic_store_explicit(&capture_ops, ops, memory_order_release);
}

CUABI__HOT const cuabi__capture_ops *cuabi__capture_ops_get(void)
{
    return atomic_load_explicit(&capture_ops, memory_order_acquire);
}
