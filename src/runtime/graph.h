/* Graph internals: shared by the graph modules (graph.c, graph_nodes.c,
 * graph_exec.c, graph_capture.c). The work modules below them reach a
 * capture through runtime/capture.h, never through this header. */
#ifndef CUABI_GRAPH_INTERNAL_H
#define CUABI_GRAPH_INTERNAL_H

#include <pthread.h>

#include "runtime/argpack.h"
#include "runtime/capture.h"
#include "runtime/kernel.h"
#include "runtime/launch.h"
#include "runtime/memory.h"

/* Take a reference unless the count already reached zero (the object is
 * being destroyed): for the weak pointers of node and body-graph records. */
static inline bool cuabi__object_try_retain(cuabi__object *o)
{
    int64_t r = atomic_load_explicit(&o->refs, memory_order_relaxed);
    while (r > 0)
        if (atomic_compare_exchange_weak_explicit(&o->refs, &r, r + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    return false;
}

/* ------------------------------------------------------ what a graph keeps */

/* What a graph, an executable or a capture keeps alive for the work it
 * holds: objects (kernels, views, events, graphs) with a reference, buffer
 * memory with a memory reference, and buffers whose free a capture put off
 * until the graph is gone. Not synchronised: the owner's lock guards it. */
enum { CUABI__KEEP_OBJECT = 1, CUABI__KEEP_BUFFER_MEM, CUABI__KEEP_DEFERRED_FREE,
       CUABI__KEEP_HOST_CALL };
typedef struct cuabi__keep_item {
    unsigned char kind;
    void *ptr;
} cuabi__keep_item;
typedef struct cuabi__keep {
    cuabi__keep_item *items;
    size_t count, cap;
} cuabi__keep;

/* Keep an object (retained) / a buffer's memory (a memory reference); an
 * entry already among the last few is not added again. */
cuabi_status cuabi__keep_object(cuabi__keep *k, cuabi__object *o, const char *caller);
cuabi_status cuabi__keep_buffer(cuabi__keep *k, cuabi__buffer *b, const char *caller);
/* Take over the memory of a buffer whose last reference is gone; it is
 * freed (cuabi__buffer_mem_free) when the keep list is released. */
cuabi_status cuabi__keep_deferred_free(cuabi__keep *k, cuabi__buffer *b, const char *caller);
/* A host function queued by cuabi_stream_launch_host_func: on an ordinary
 * stream it frees itself after its one run; captured, a keep list owns it
 * (CUABI__KEEP_HOST_CALL) and dropping it calls release(payload) once. */
typedef struct cuabi__host_call {
    cuabi_graph_host_fn fn;
    void *payload;
    cuabi_graph_host_release_fn release;
} cuabi__host_call;
/* Take over a host call (never deduplicated); on failure it stays the
 * caller's. */
cuabi_status cuabi__keep_host_call(cuabi__keep *k, cuabi__host_call *h, const char *caller);
/* Keep the live buffers and views of a pack's slots; a released or unset
 * one is an error naming `what` (the node) and the slot. */
cuabi_status cuabi__keep_pack(cuabi__keep *k, const cuabi__argpack *p, const char *what,
                              const char *caller);
/* Move everything from src to dst (src ends empty). */
cuabi_status cuabi__keep_move(cuabi__keep *dst, cuabi__keep *src, const char *caller);
/* Drop every reference (deferred frees happen now) and the array. */
void cuabi__keep_release(cuabi__keep *k);
size_t cuabi__keep_mark(const cuabi__keep *k);
/* Drop the entries added after `mark` (undo of a failed addition). */
void cuabi__keep_rollback(cuabi__keep *k, size_t mark);

/* --------------------------------------------------------------- graphs */

typedef struct cuabi__graph cuabi__graph;
typedef struct cuabi__graph_node cuabi__graph_node;

/* What cuabi knows of one node. Records are made when cuabi adds a node, or
 * for nodes found in the driver's graph (captured ones) when the node list
 * is next read; their index changes only when cuabi_graph_node_destroy
 * removes a record before them (the live handles and body graphs are
 * renumbered then, under the lock). */
typedef struct cuabi__node_rec {
    CUgraphNode cu_node;
    int type;                      /* CUgraphNodeType */
    cuabi__graph_node *handle;     /* weak: the live node object, or NULL */
    /* Kernel nodes made by cuabi_graph_add_kernel (else kernel is NULL). */
    cuabi__kernel *kernel;         /* kept alive by the graph */
    cuabi__device *device;         /* kept alive by the graph */
    CUfunction func;
    cuabi_launch_config config;    /* stream and device cleared */
    /* Conditional nodes: the driver's body graphs and their live handles. */
    unsigned nbodies;
    CUgraph *bodies;
    cuabi__graph **body_handles;   /* weak */
} cuabi__node_rec;

/* One per root graph, shared by its body graphs (they live in its CUgraph). */
typedef struct cuabi__graph_shared {
    pthread_mutex_t lock;
    cuabi__keep keep;
    cuabi__device *device;         /* retained; NULL until a node names one */
    bool mixed;                    /* nodes name several devices */
    struct cuabi__cond_handle { uint64_t handle; cuabi__device *device; } *conds;
    size_t nconds, cap_conds;
} cuabi__graph_shared;

struct cuabi__graph {
    cuabi__object base;
    CUgraph cu_graph;
    cuabi__graph *parent;          /* body graphs: the graph of the conditional node (retained) */
    size_t parent_rec;             /* body graphs: that node's record in parent */
    unsigned body_index;
    cuabi__device *body_device;    /* body graphs: the conditional's device (kept by shared) */
    cuabi__graph_shared *shared;   /* the root's */
    cuabi__node_rec *nodes;
    size_t nnodes, cap_nodes;
    /* Open-addressing map CUgraphNode -> record index + 1 (0 = empty). */
    CUgraphNode *map_keys;
    size_t *map_vals;
    size_t map_cap;
};

struct cuabi__graph_node {
    cuabi__object base;
    cuabi__graph *graph;           /* retained */
    size_t index;                  /* of its record (graph lock); CUABI__NODE_GONE once destroyed */
};

/* The index of a node handle whose node cuabi_graph_node_destroy removed. */
#define CUABI__NODE_GONE SIZE_MAX
/* With the lock held: an error naming `caller` when the node was destroyed. */
cuabi_status cuabi__graph_node_live(const cuabi__graph_node *n, const char *caller);

/* The driver, checked to be new enough for graphs (CUDA 12.3). */
cuabi_status cuabi__graph_driver(const cuabi__driver **drv, const char *caller);
/* A new root graph owning `g` (destroyed with it); on failure g is left to
 * the caller. */
cuabi_status cuabi__graph_wrap(cuabi__graph **out, CUgraph g, const char *caller);
/* Lock a graph's shared state (the root's mutex). */
void cuabi__graph_lock(cuabi__graph *g);
void cuabi__graph_unlock(cuabi__graph *g);
/* With the lock held: make room for one more record (after this, the next
 * cuabi__graph_record cannot fail). */
cuabi_status cuabi__graph_reserve(cuabi__graph *g, const char *caller);
/* With the lock held: record a node added by cuabi (appended; index out). */
cuabi_status cuabi__graph_record(cuabi__graph *g, CUgraphNode n, int type, size_t *index,
                                 const char *caller);
/* With the lock held: bring the records up to date with the driver's node
 * list (nodes added by capture or through the raw CUgraph). */
cuabi_status cuabi__graph_sync(cuabi__graph *g, const cuabi__driver *drv, const char *caller);
/* With the lock held: the record index of a driver node, or SIZE_MAX. */
size_t cuabi__graph_find(const cuabi__graph *g, CUgraphNode n);
/* With the lock held: the node handle of record `index` (a new reference;
 * the same object while one lives). */
cuabi_status cuabi__graph_node_handle(cuabi_graph_node **out, cuabi__graph *g, size_t index,
                                      const char *caller);
/* The destroy function of node handles. */
void cuabi__graph_node_destroy(cuabi__object *o);
/* With the lock held: "kernel node 3 (segred<float, 256>)" for messages. */
void cuabi__graph_describe(char *buf, size_t size, cuabi__graph *g, size_t index,
                           const cuabi__driver *drv);
/* With the lock held: note that the graph's nodes use `dev`. */
cuabi_status cuabi__graph_use_device(cuabi__graph *g, cuabi__device *dev);
/* Resolve a dependency array: every node must be a live node of `g`. */
cuabi_status cuabi__graph_deps(CUgraphNode **out, cuabi__graph *g, cuabi_graph_node *const *deps,
                               size_t n, CUgraphNode *local, size_t nlocal, const char *caller);
/* The device of a conditional handle made for g's root graph, or NULL. */
cuabi__device *cuabi__graph_cond_device(cuabi__graph *g, uint64_t handle);

/* Nodes added into a capture's graph `g` (graph_capture.c) at the capture's
 * dependencies `deps` (the driver's, copied), after which the capturing
 * stream `follow` depends on the new node alone; on failure nothing stays. */
cuabi_status cuabi__graph_capture_add_conditional(cuabi_graph_node **out, cuabi__graph *g,
                                                  const CUgraphNode *deps, size_t ndeps,
                                                  CUstream follow, uint64_t handle,
                                                  cuabi_graph_conditional_type type,
                                                  unsigned int body_count, const char *caller);
cuabi_status cuabi__graph_capture_add_child(cuabi_graph_node **out, cuabi__graph *g,
                                            const CUgraphNode *deps, size_t ndeps,
                                            CUstream follow, cuabi__graph *child,
                                            const char *caller);
/* With g's lock not held: make a conditional handle for g on `dev`. */
cuabi_status cuabi__graph_cond_create(uint64_t *out, cuabi__graph *g, cuabi__device *dev,
                                      unsigned int default_value, unsigned int flags,
                                      const char *caller);

/* Kernel node parameters from a kernel, a pack (its current values; buffer
 * and view slots resolved) and a configuration, checked as
 * cuabi_launch_check; the node attributes the configuration asks for
 * (clusters, cooperative, ...) in attrs. kernelParams point into the pack.
 * The kernel's device's context is left current in *scope: the driver's
 * kernel-node calls (cuGraphAddKernelNode, cuGraph[Exec]KernelNodeSetParams)
 * work in the current context, and an H200 crashed in cuGraphAddKernelNode
 * with none current. The caller ends the scope after its driver call. */
#define CUABI__GRAPH_MAX_ATTRS 16
typedef struct cuabi__kernel_params {
    CUDA_KERNEL_NODE_PARAMS p;
    CUlaunchAttribute attrs[CUABI__GRAPH_MAX_ATTRS];
    unsigned nattrs;
    cuabi__device *device;
    cuabi__kernel *kernel;
    cuabi__argpack *pack;
} cuabi__kernel_params;
cuabi_status cuabi__graph_kernel_params(cuabi__context_scope *scope, cuabi__kernel_params *kp,
                                        cuabi_kernel *kernel, cuabi_argpack *pack,
                                        const cuabi_launch_config *config, const char *caller);
/* A caller's launch configuration as a graph stores it: stream and device
 * cleared. The one place that copies a cuabi_launch_config given by a
 * caller: when the struct gains a version, copy only src->version's fields
 * here. */
void cuabi__graph_config_copy(cuabi_launch_config *dst, const cuabi_launch_config *src);
/* A configuration given to change a node on `dev`: when it names a stream
 * or device, it must be `dev`'s (an error naming `what` otherwise). */
cuabi_status cuabi__graph_config_on(const cuabi_launch_config *config, cuabi__device *dev,
                                    const char *what, const char *caller);
/* Whether two configurations ask for the same node attributes. */
bool cuabi__graph_same_attrs(const cuabi_launch_config *a, const cuabi_launch_config *b);

#endif
