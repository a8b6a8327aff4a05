/* Where work meets a stream capture: the seam between the modules that
 * queue work (buffers, copies, launches, peers, executables) and the graph
 * module that records what a captured graph must keep alive.
 *
 * The work modules sit below graphs and must not call them, so the graph
 * module registers its operations here when a capture begins
 * (graph_capture.c) and the work modules call the wrappers below. They run
 * only while cuabi__capturing() is true: with no capture in progress they
 * cost their callers one relaxed load. */
#ifndef CUABI_RUNTIME_CAPTURE_H
#define CUABI_RUNTIME_CAPTURE_H

#include "runtime/stream.h"

struct cuabi__kernel;
struct cuabi__argpack;
struct cuabi__buffer;

/* What a capture does for the work queued into it; see the wrappers. */
typedef struct cuabi__capture_ops {
    cuabi_status (*keep_launch)(CUstream s, struct cuabi__kernel *k,
                                const struct cuabi__argpack *p, const char *caller);
    cuabi_status (*keep_object)(CUstream s, cuabi__object *o, const char *caller);
    cuabi_status (*keep_buffers)(cuabi__stream *s, struct cuabi__buffer *a,
                                 struct cuabi__buffer *b, const char *caller);
    cuabi_status (*refuse_host_work)(cuabi__stream *s, const char *what, const char *caller);
    void (*note_alloc)(struct cuabi__buffer *b);
    bool (*defer_free)(struct cuabi__buffer *b);
} cuabi__capture_ops;

/* Captures begun through cuabi and not yet ended (any thread). Launch,
 * copy, memset, allocation and free paths test it (one relaxed load) and
 * only then ask the driver whether their stream is being captured. */
extern _Atomic int cuabi__captures_active;
static inline bool cuabi__capturing(void)
{
    return atomic_load_explicit(&cuabi__captures_active, memory_order_relaxed) != 0;
}

/* The graph module's operations; set once, before the first capture counts
 * in cuabi__captures_active, never cleared. */
void cuabi__capture_register(const cuabi__capture_ops *ops);
const cuabi__capture_ops *cuabi__capture_ops_get(void);

/* Keep what a launch on `s` references (kernel, pack slots) with the cuabi
 * capture `s` belongs to, if any. */
static inline cuabi_status cuabi__capture_keep_launch(CUstream s, struct cuabi__kernel *k,
                                                      const struct cuabi__argpack *p,
                                                      const char *caller)
{
    const cuabi__capture_ops *ops = cuabi__capture_ops_get();
    return ops ? ops->keep_launch(s, k, p, caller) : CUABI_SUCCESS;
}

/* Keep one object (an executable launched into a capture) the same way. */
static inline cuabi_status cuabi__capture_keep_object(CUstream s, cuabi__object *o,
                                                      const char *caller)
{
    const cuabi__capture_ops *ops = cuabi__capture_ops_get();
    return ops ? ops->keep_object(s, o, caller) : CUABI_SUCCESS;
}

/* The same for the buffers of a copy or memset (b may be NULL). */
static inline cuabi_status cuabi__capture_keep_buffers(cuabi__stream *s, struct cuabi__buffer *a,
                                                       struct cuabi__buffer *b, const char *caller)
{
    const cuabi__capture_ops *ops = cuabi__capture_ops_get();
    return ops ? ops->keep_buffers(s, a, b, caller) : CUABI_SUCCESS;
}

/* Host-side work queued "on" a stream (host-to-host copies and memsets run
 * at once) cannot be captured: an error when `s` is being captured. */
static inline cuabi_status cuabi__capture_refuse_host_work(cuabi__stream *s, const char *what,
                                                           const char *caller)
{
    const cuabi__capture_ops *ops = cuabi__capture_ops_get();
    return ops ? ops->refuse_host_work(s, what, caller) : CUABI_SUCCESS;
}

/* A stream-ordered buffer was just allocated: when its stream is being
 * captured by cuabi, its memory belongs to the graph. */
static inline void cuabi__capture_note_alloc(struct cuabi__buffer *b)
{
    const cuabi__capture_ops *ops = cuabi__capture_ops_get();
    if (ops)
        ops->note_alloc(b);
}

/* A stream-ordered buffer's memory is about to be freed on its stream. When
 * that stream is being captured and the memory did not come from the same
 * capture, the capture takes the buffer and frees it when the graph is
 * released: returns true, and the caller must not free it. */
static inline bool cuabi__capture_defer_free(struct cuabi__buffer *b)
{
    const cuabi__capture_ops *ops = cuabi__capture_ops_get();
    return ops && ops->defer_free(b);
}

#endif
