/* Graph nodes added one by one: kernel, copies, memset, host callback,
 * empty, event record and wait, child graph and conditional nodes.
 *
 * Every addition follows one pattern (add_begin / add_done / add_close):
 * under the graph's lock, room for the record and the node's handle is made
 * and what the node references is kept before the driver call, so a failure
 * at any step undoes the earlier ones and leaves the graph as it was. */
#include "platform/release.h"
#include "runtime/graph.h"
#include "runtime/launch_attrs.h"
#include "runtime/occupancy.h"
#include "util/checked.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ additions */

typedef struct add_ctx {
    cuabi__graph *g;
    const cuabi__driver *drv;
    CUgraphNode *deps, local[8];
    size_t ndeps;
    cuabi__graph_node *node;     /* registered handle, not yet linked */
    size_t keep_mark;
    const char *caller;
    cuabi__context_scope scope;  /* the caller's context, given back by add_close */
    cuabi_graph_node **out;      /* the caller's out parameter */
} add_ctx;

/* Lock graph `g`, make room, take the dependencies: node handles (each a
 * live node of g), or with `raw` the driver's nodes as they are (a capture's
 * current dependencies, copied). */
static cuabi_status add_begin_g(add_ctx *a, cuabi__graph *g, cuabi_graph_node *const *deps,
                                const CUgraphNode *raw, size_t ndeps, const char *caller)
{
    a->g = g;
    a->scope = (cuabi__context_scope)CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__graph_driver(&a->drv, caller));
    cuabi__graph_lock(a->g);
    cuabi_status st = cuabi__graph_reserve(a->g, caller);
    if (st == CUABI_SUCCESS && raw) {
        size_t bytes;
        a->deps = a->local;
        if (ndeps > sizeof a->local / sizeof *a->local) {
            a->deps = cuabi__size_mul(&bytes, ndeps, sizeof *a->deps)
                          ? cuabi__malloc_in(bytes, caller) : NULL;
            if (!a->deps)
                st = CUABI_ERROR_OUT_OF_MEMORY;
        }
        if (st == CUABI_SUCCESS && ndeps)
            memcpy(a->deps, raw, ndeps * sizeof *a->deps);
    } else if (st == CUABI_SUCCESS) {
        st = cuabi__graph_deps(&a->deps, a->g, deps, ndeps, a->local,
                               sizeof a->local / sizeof *a->local, caller);
    }
    if (st == CUABI_SUCCESS) {
        a->ndeps = ndeps;
        a->node = cuabi__calloc_in(1, sizeof *a->node, caller);
        st = a->node ? cuabi__handle_register(&a->node->base, CUABI__T_GRAPH_NODE, NULL)
                     : CUABI_ERROR_OUT_OF_MEMORY;
        if (st != CUABI_SUCCESS) {
            cuabi__free(a->node);
            a->node = NULL;
        }
    }
    if (st != CUABI_SUCCESS) {
        if (a->deps && a->deps != a->local)
            cuabi__free(a->deps);
        a->deps = NULL;
        cuabi__graph_unlock(a->g);
        return st;
    }
    a->keep_mark = cuabi__keep_mark(&a->g->shared->keep);
    return CUABI_SUCCESS;
}

/* Check out and the graph, lock it, make room, resolve the dependencies. */
static cuabi_status add_begin(add_ctx *a, cuabi_graph_node **out, cuabi_graph *graph,
                              cuabi_graph_node *const *deps, size_t ndeps, const char *caller)
{
    void *obj;
    memset(a, 0, sizeof *a);
    a->caller = caller;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    *out = NULL;
    a->out = out;
    CUABI__TRY(cuabi__handle_get(graph, CUABI__T_GRAPH, &obj, caller));
    return add_begin_g(a, obj, deps, NULL, ndeps, caller);
}

/* After the driver call: record the node and hand out its handle, or undo
 * everything when `st` is a failure. The lock stays held (add_close). */
static cuabi_status add_done(add_ctx *a, cuabi_graph_node **out, cuabi_status st, CUgraphNode n,
                             int type, cuabi__node_rec **rec)
{
    size_t index = 0;
    if (st == CUABI_SUCCESS) /* cannot fail: add_begin made room */
        st = cuabi__graph_record(a->g, n, type, &index, a->caller);
    if (st != CUABI_SUCCESS) {
        cuabi__keep_rollback(&a->g->shared->keep, a->keep_mark);
        if (cuabi__object_drop(&a->node->base))
            cuabi__free(a->node);
        a->node = NULL;
        return st;
    }
    cuabi__graph_node *node = a->node;
    a->node = NULL;
    node->base.destroy = cuabi__graph_node_destroy;
    node->graph = a->g;
    node->index = index;
    cuabi__object_retain(&a->g->base);
    a->g->nodes[index].handle = node;
    if (rec)
        *rec = &a->g->nodes[index];
    *out = CUABI__HANDLE(node, cuabi_graph_node);
    return CUABI_SUCCESS;
}

static cuabi_status add_close(add_ctx *a, cuabi_status st)
{
    if (a->node && cuabi__object_drop(&a->node->base))
        cuabi__free(a->node);
    if (a->deps && a->deps != a->local)
        cuabi__free(a->deps);
    cuabi__graph_unlock(a->g);
    /* A failed restore fails the call: the new node's handle goes back (the
     * node stays in the graph, where cuabi_graph_node_at finds it). */
    return CUABI__CONTEXT_END_OUT(&a->scope, st, a->out, GRAPH_NODE, a->caller);
}

/* Nodes a conditional body may not hold (CUDA's rule: kernel, empty, child
 * graph, memset, memcpy and conditional nodes only). */
static cuabi_status body_allows(const add_ctx *a, const char *what)
{
    if (!a->g->parent)
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the graph is a body of conditional "
                        "node %zu, which may hold only kernel, empty, child graph, memset, "
                        "memcpy and conditional nodes, not %s", a->caller, a->g->parent_rec,
                        what);
}

/* The primary context of `dev`, retained lazily and made current in the
 * addition's scope (add_close gives the caller's back). */
static cuabi_status device_context(CUcontext *ctx, cuabi__device *dev, add_ctx *a)
{
    CUABI__TRY(cuabi__device_enter(&a->scope, dev, a->drv));
    *ctx = atomic_load_explicit(&dev->primary, memory_order_acquire);
    return CUABI_SUCCESS;
}

/* A node on `dev` in a body graph must share the conditional's device. */
static cuabi_status body_device_ok(const add_ctx *a, cuabi__device *dev)
{
    if (!a->g->parent || !a->g->body_device || a->g->body_device == dev)
        return CUABI_SUCCESS;
    return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the node is on device %d but the "
                        "conditional node this body belongs to is on device %d (a body's nodes "
                        "must share its device)", a->caller, dev->ordinal,
                        a->g->body_device->ordinal);
}

/* ------------------------------------------------------------- kernels */

/* Only the caller's version is read (a version-1 struct is shorter); a node
 * keeps no attributes pointer (cuabi__graph_kernel_params refuses one). */
void cuabi__graph_config_copy(cuabi_launch_config *dst, const cuabi_launch_config *src)
{
    cuabi__launch_config_copy(dst, src);
    dst->attributes = NULL;
}

cuabi_status cuabi__graph_config_on(const cuabi_launch_config *config, cuabi__device *dev,
                                    const char *what, const char *caller)
{
    if (!config || (!config->stream && !config->device))
        return CUABI_SUCCESS;
    cuabi__device *named;
    CUstream s;
    CUABI__TRY(cuabi__launch_target(&named, &s, config, caller));
    if (named != dev)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is on device %d; the "
                            "configuration names device %d", caller, what, dev->ordinal,
                            named->ordinal);
    return CUABI_SUCCESS;
}

bool cuabi__graph_same_attrs(const cuabi_launch_config *a, const cuabi_launch_config *b)
{
    CUlaunchConfig la, lb;
    CUlaunchAttribute aa[CUABI__GRAPH_MAX_ATTRS], ab[CUABI__GRAPH_MAX_ATTRS];
    memset(aa, 0, sizeof aa);
    memset(ab, 0, sizeof ab);
    cuabi__launch_fill(&la, aa, a, NULL);
    cuabi__launch_fill(&lb, ab, b, NULL);
    return la.numAttrs == lb.numAttrs && memcmp(aa, ab, la.numAttrs * sizeof *aa) == 0;
}

cuabi_status cuabi__graph_kernel_params(cuabi__context_scope *scope, cuabi__kernel_params *kp,
                                        cuabi_kernel *kernel, cuabi_argpack *pack,
                                        const cuabi_launch_config *config, const char *caller)
{
    CUfunction f;
    void *obj;
    memset(kp, 0, sizeof *kp);
    if (config && cuabi__launch_attributes(config))
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED,
                            "%s: graph kernel nodes take clusters and cooperative launches, not "
                            "the other launch attributes (config.attributes must be NULL): order "
                            "nodes with edges or event nodes instead", caller);
    CUABI__TRY(cuabi__launch_check_for(&f, &kp->device, kernel, pack, config, caller));
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    CUABI__TRY(cuabi__device_enter(scope, kp->device, drv));
    CUABI__TRY(cuabi__handle_get(kernel, CUABI__T_KERNEL, &obj, caller));
    kp->kernel = obj;
    CUABI__TRY(cuabi__handle_get(pack, CUABI__T_ARGPACK, &obj, caller));
    kp->pack = obj;
    CUABI__TRY(cuabi__argpack_resolve(kp->pack, caller));
    CUlaunchConfig lc;
    cuabi__launch_fill(&lc, kp->attrs, config, NULL);
    kp->nattrs = lc.numAttrs;
    kp->p.func = f;
    kp->p.gridDimX = lc.gridDimX;
    kp->p.gridDimY = lc.gridDimY;
    kp->p.gridDimZ = lc.gridDimZ;
    kp->p.blockDimX = lc.blockDimX;
    kp->p.blockDimY = lc.blockDimY;
    kp->p.blockDimZ = lc.blockDimZ;
    kp->p.sharedMemBytes = lc.sharedMemBytes;
    kp->p.kernelParams = kp->pack->params;
    return CUABI_SUCCESS;
}

static const char *attr_name(CUlaunchAttributeID id)
{
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: return "access-policy window";
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: return "cooperative";
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: return "cluster dimension";
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: return "cluster scheduling policy";
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: return "programmatic stream serialization";
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: return "programmatic event";
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: return "priority";
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: return "memory sync domain map";
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: return "memory sync domain";
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: return "preferred cluster dimension";
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: return "launch completion event";
    default: return "launch attribute";
    }
}

/* Attributes CUDA takes for stream launches but not for graph kernel nodes
 * (an edge or an event does that job in a graph). */
static bool launch_only(CUlaunchAttributeID id)
{
    return id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
           id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
           id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
}

static cuabi_status check_node_attrs(const cuabi__kernel_params *kp, const char *caller)
{
    for (unsigned i = 0; i < kp->nattrs; i++)
        if (launch_only(kp->attrs[i].id))
            return cuabi__error(CUABI_ERROR_LAUNCH_CONFIG, "%s: the %s attribute applies to "
                                "stream launches, not to graph kernel nodes (use a dependency "
                                "or an event node in the graph)", caller,
                                attr_name(kp->attrs[i].id));
    return CUABI_SUCCESS;
}

static cuabi_status set_node_attrs(CUgraphNode n, const cuabi__kernel_params *kp,
                                   const cuabi__driver *drv, const char *caller)
{
    for (unsigned i = 0; i < kp->nattrs; i++) {
        cuabi_status st = CUABI__CU_IN(caller, drv, cuGraphKernelNodeSetAttribute, n,
                                       kp->attrs[i].id, &kp->attrs[i].value);
        if (st != CUABI_SUCCESS) {
            /* Name the attribute; keep the driver's status and code. */
            char why[512];
            const char *m = cuabi_last_error()->message;
            size_t l = strlen(caller);
            int cu = cuabi_last_error()->cu_result;
            if (strncmp(m, caller, l) == 0 && m[l] == ':' && m[l + 1] == ' ')
                m += l + 2;
            snprintf(why, sizeof why, "%s", m);
            st = cuabi__error(st, "%s: the driver refused the %s attribute for a graph kernel "
                              "node: %s", caller, attr_name(kp->attrs[i].id), why);
            cuabi__error_set_cu(cu);
            return st;
        }
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_kernel(cuabi_graph_node **out, cuabi_graph *graph,
                                                  cuabi_graph_node **dependencies,
                                                  size_t num_dependencies, cuabi_kernel *kernel,
                                                  cuabi_argpack *pack,
                                                  const cuabi_launch_config *config)
{
    add_ctx a;
    cuabi__kernel_params kp;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    cuabi__keep *keep = &a.g->shared->keep;
    cuabi_status st = cuabi__graph_kernel_params(&a.scope, &kp, kernel, pack, config, __func__);
    if (st == CUABI_SUCCESS)
        st = check_node_attrs(&kp, __func__);
    if (st == CUABI_SUCCESS)
        st = body_device_ok(&a, kp.device);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_pack(keep, kp.pack, "the kernel node", __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_object(keep, &kp.kernel->base, __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_object(keep, &kp.device->base, __func__);
    CUgraphNode n = NULL;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(a.drv, cuGraphAddKernelNode, &n, a.g->cu_graph, a.deps, a.ndeps, &kp.p);
    if (st == CUABI_SUCCESS) {
        st = set_node_attrs(n, &kp, a.drv, __func__);
        if (st != CUABI_SUCCESS && a.drv->cuGraphDestroyNode)
            CUABI__CU_RELEASE(a.drv, cuGraphDestroyNode, n);
    }
    cuabi__node_rec *r;
    st = add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_KERNEL, &r);
    if (st == CUABI_SUCCESS) {
        r->kernel = kp.kernel;
        r->device = kp.device;
        r->func = kp.p.func;
        cuabi__graph_config_copy(&r->config, config);
        cuabi__graph_use_device(a.g, kp.device);
    }
    return add_close(&a, st);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_kernel_node_set(cuabi_graph_node *node, cuabi_argpack *pack,
                                                       const cuabi_launch_config *config)
{
    cuabi__graph_node *n;
    const cuabi__driver *drv;
    CUABI__GET(n, node, GRAPH_NODE);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    cuabi__graph *g = n->graph;
    cuabi__graph_lock(g);
    cuabi_status st = cuabi__graph_node_live(n, __func__);
    if (st != CUABI_SUCCESS) {
        cuabi__graph_unlock(g);
        return st;
    }
    cuabi__node_rec *r = &g->nodes[n->index];
    if (!r->kernel)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: node %zu was not made by "
                          "cuabi_graph_add_kernel (only those can be changed here)", __func__,
                          n->index);
    cuabi_launch_config c;
    if (st == CUABI_SUCCESS)
        st = cuabi__graph_config_on(config, r->device, "the node", __func__);
    cuabi__graph_config_copy(&c, config ? config : &r->config);
    if (st == CUABI_SUCCESS)
        c.device = CUABI__HANDLE(r->device, cuabi_device);
    if (st == CUABI_SUCCESS && config && !cuabi__graph_same_attrs(&c, &r->config))
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: node %zu: a kernel node's attributes "
                          "(clusters, cooperative, ...) cannot change; add a new node", __func__,
                          n->index);
    cuabi__kernel_params kp;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the caller's comes back */
    size_t mark = cuabi__keep_mark(&g->shared->keep);
    if (st == CUABI_SUCCESS)
        st = cuabi__graph_kernel_params(&scope, &kp, CUABI__HANDLE(r->kernel, cuabi_kernel), pack,
                                        &c, __func__);
    if (st == CUABI_SUCCESS && kp.device != r->device)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: node %zu is on device %d; the "
                          "configuration names device %d", __func__, n->index, r->device->ordinal,
                          kp.device->ordinal);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_pack(&g->shared->keep, kp.pack, "the kernel node", __func__);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuGraphKernelNodeSetParams, r->cu_node, &kp.p);
    if (st == CUABI_SUCCESS) {
        cuabi__graph_config_copy(&r->config, &c);
    } else {
        cuabi__keep_rollback(&g->shared->keep, mark);
    }
    cuabi__graph_unlock(g);
    return cuabi__context_end(&scope, st);
}

/* --------------------------------------------------------------- copies */

/* One side of a copy: an address, how the driver must read it, and the
 * device whose context runs the copy (NULL for plain host memory). */
typedef struct mem_side {
    uintptr_t ptr;
    CUmemorytype type;
    cuabi__device *device;
} mem_side;

static cuabi_status buffer_side(mem_side *m, cuabi__buffer *b, size_t offset, size_t size,
                                const char *what, const char *caller)
{
    if (offset > b->size || size > b->size - offset)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu bytes at offset %zu run past "
                            "the end of the %s buffer (%zu bytes)", caller, size, offset, what,
                            b->size);
    m->ptr = b->ptr + offset;
    m->type = b->kind == CUABI_MEMORY_DEVICE || b->kind == CUABI_MEMORY_MANAGED
                  ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    m->device = b->device;
    return CUABI_SUCCESS;
}

static void host_side(mem_side *m, const void *p)
{
    m->ptr = (uintptr_t)p;
    m->type = CU_MEMORYTYPE_HOST;
    m->device = NULL;
}

static void set_side(CUDA_MEMCPY3D *p, const mem_side *m, bool dst)
{
    if (dst) {
        p->dstMemoryType = m->type;
        if (m->type == CU_MEMORYTYPE_DEVICE)
            p->dstDevice = (CUdeviceptr)m->ptr;
        else
            p->dstHost = (void *)m->ptr;
    } else {
        p->srcMemoryType = m->type;
        if (m->type == CU_MEMORYTYPE_DEVICE)
            p->srcDevice = (CUdeviceptr)m->ptr;
        else
            p->srcHost = (const void *)m->ptr;
    }
}

/* The copy node itself, once both sides are known and kept. */
static cuabi_status copy_node(add_ctx *a, CUgraphNode *n, const mem_side *dst,
                              const mem_side *src, size_t size)
{
    if (!size)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: size is 0 (a copy node must copy "
                            "something)", a->caller);
    /* Device memory's own device runs the copy; pinned memory's next. */
    cuabi__device *dev = dst->type == CU_MEMORYTYPE_DEVICE ? dst->device
                       : src->type == CU_MEMORYTYPE_DEVICE ? src->device
                       : dst->device ? dst->device : src->device;
    if (!dev)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: both sides are plain host memory; "
                            "a graph copy needs CUDA memory on one side (use a host node for "
                            "host-to-host work)", a->caller);
    CUABI__TRY(body_device_ok(a, dev));
    CUcontext ctx;
    CUABI__TRY(device_context(&ctx, dev, a));
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    set_side(&p, src, false);
    set_side(&p, dst, true);
    p.WidthInBytes = size;
    p.Height = 1;
    p.Depth = 1;
    CUABI__TRY(CUABI__CU_IN(a->caller, a->drv, cuGraphAddMemcpyNode, n, a->g->cu_graph, a->deps,
                            a->ndeps, &p, ctx));
    cuabi__graph_use_device(a->g, dev);
    return CUABI_SUCCESS;
}

/* Resolve a buffer argument inside an addition (the lock is held). */
static cuabi_status get_buffer(cuabi__buffer **out, cuabi_buffer *buffer, const char *what,
                               const char *caller)
{
    void *obj;
    cuabi_status st = cuabi__handle_get(buffer, CUABI__T_BUFFER, &obj, caller);
    if (st != CUABI_SUCCESS)
        return cuabi__error(st, "%s: the %s buffer is not a live cuabi_buffer (NULL, released or "
                            "another type)", caller, what);
    *out = obj;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memcpy(cuabi_graph_node **out, cuabi_graph *graph,
                                                  cuabi_graph_node **dependencies,
                                                  size_t num_dependencies, cuabi_buffer *dst,
                                                  size_t dst_offset, cuabi_buffer *src,
                                                  size_t src_offset, size_t size)
{
    add_ctx a;
    cuabi__buffer *d = NULL, *s = NULL;
    mem_side md, ms;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    cuabi__keep *keep = &a.g->shared->keep;
    CUgraphNode n = NULL;
    cuabi_status st = get_buffer(&d, dst, "destination", __func__);
    if (st == CUABI_SUCCESS)
        st = get_buffer(&s, src, "source", __func__);
    if (st == CUABI_SUCCESS)
        st = buffer_side(&md, d, dst_offset, size, "destination", __func__);
    if (st == CUABI_SUCCESS)
        st = buffer_side(&ms, s, src_offset, size, "source", __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_buffer(keep, d, __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_buffer(keep, s, __func__);
    if (st == CUABI_SUCCESS)
        st = copy_node(&a, &n, &md, &ms, size);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEMCPY, NULL));
}

/* A copy between a buffer and host memory, either way. */
static cuabi_status add_host_copy(cuabi_graph_node **out, cuabi_graph *graph,
                                  cuabi_graph_node *const *deps, size_t ndeps, cuabi_buffer *buffer,
                                  size_t offset, const void *host, size_t size, bool to_host,
                                  const char *caller)
{
    add_ctx a;
    cuabi__buffer *b = NULL;
    mem_side mb, mh;
    const char *side = to_host ? "source" : "destination";
    CUABI__TRY(add_begin(&a, out, graph, deps, ndeps, caller));
    CUgraphNode n = NULL;
    cuabi_status st = host ? get_buffer(&b, buffer, side, caller)
                           : cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", caller,
                                          to_host ? "dst" : "src");
    if (st == CUABI_SUCCESS)
        st = buffer_side(&mb, b, offset, size, side, caller);
    if (st == CUABI_SUCCESS && !cuabi__span_fits((uintptr_t)host, size))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s + size (%zu bytes) wraps around "
                          "the address space", caller, to_host ? "dst" : "src", size);
    host_side(&mh, host);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_buffer(&a.g->shared->keep, b, caller);
    if (st == CUABI_SUCCESS)
        st = to_host ? copy_node(&a, &n, &mh, &mb, size) : copy_node(&a, &n, &mb, &mh, size);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEMCPY, NULL));
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memcpy_from_host(cuabi_graph_node **out,
                                                            cuabi_graph *graph,
                                                            cuabi_graph_node **dependencies,
                                                            size_t num_dependencies,
                                                            cuabi_buffer *dst, size_t dst_offset,
                                                            const void *src, size_t size)
{
    return add_host_copy(out, graph, dependencies, num_dependencies, dst, dst_offset, src, size,
                         false, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memcpy_to_host(cuabi_graph_node **out,
                                                          cuabi_graph *graph,
                                                          cuabi_graph_node **dependencies,
                                                          size_t num_dependencies, void *dst,
                                                          cuabi_buffer *src, size_t src_offset,
                                                          size_t size)
{
    return add_host_copy(out, graph, dependencies, num_dependencies, src, src_offset, dst, size,
                         true, __func__);
}

/* A contiguous view as one side of a copy. A view of device memory names
 * its device by ordinal: *dev_ref receives a reference to it (the caller
 * releases it). */
static cuabi_status view_side(mem_side *m, uint64_t *nbytes, cuabi_device **dev_ref,
                              cuabi__view **out, cuabi_view *view, const char *what,
                              const char *caller)
{
    void *obj;
    *dev_ref = NULL;
    cuabi_status st = cuabi__handle_get(view, CUABI__T_VIEW, &obj, caller);
    if (st != CUABI_SUCCESS)
        return cuabi__error(st, "%s: the %s view is not a live cuabi_view (NULL, released or "
                            "another type)", caller, what);
    cuabi__view *v = *out = obj;
    int contiguous = 0;
    CUABI__TRY(cuabi_view_is_c_contiguous(&contiguous, view));
    if (!contiguous)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s view is not contiguous "
                            "(row-major, dense); a graph copy moves one range of bytes",
                            caller, what);
    *nbytes = (uint64_t)v->size * (v->bits / 8u);
    m->ptr = v->data + v->byte_offset;
    m->device = NULL;
    m->type = v->device_type == CUABI_DLPACK_CUDA || v->device_type == CUABI_DLPACK_CUDA_MANAGED
                  ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (v->device_type != CUABI_DLPACK_CUDA)
        return CUABI_SUCCESS;
    CUABI__TRY(cuabi_device_get(dev_ref, v->device_id));
    CUABI__GET(m->device, *dev_ref, DEVICE);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memcpy_view(cuabi_graph_node **out, cuabi_graph *graph,
                                                       cuabi_graph_node **dependencies,
                                                       size_t num_dependencies, cuabi_view *dst,
                                                       cuabi_view *src)
{
    add_ctx a;
    mem_side md, ms;
    uint64_t nd = 0, ns = 0;
    cuabi_device *dd = NULL, *ds = NULL;
    cuabi__view *vd = NULL, *vs = NULL;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    cuabi__keep *keep = &a.g->shared->keep;
    CUgraphNode n = NULL;
    cuabi_status st = view_side(&md, &nd, &dd, &vd, dst, "destination", __func__);
    if (st == CUABI_SUCCESS)
        st = view_side(&ms, &ns, &ds, &vs, src, "source", __func__);
    if (st == CUABI_SUCCESS && nd != ns)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the destination view has %llu bytes, "
                          "the source %llu", __func__, (unsigned long long)nd,
                          (unsigned long long)ns);
    /* Managed or pinned memory has no device in its DLPack description: the
     * graph's device runs the copy. */
    if (st == CUABI_SUCCESS && !md.device && !ms.device)
        md.device = a.g->shared->mixed ? NULL : a.g->shared->device;
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_object(keep, &vd->base, __func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_object(keep, &vs->base, __func__);
    if (st == CUABI_SUCCESS)
        st = copy_node(&a, &n, &md, &ms, (size_t)nd);
    st = add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEMCPY, NULL);
    /* The graph holds its own reference to a device it uses. */
    if (dd)
        cuabi__handle_release(dd, CUABI__T_DEVICE);
    if (ds)
        cuabi__handle_release(ds, CUABI__T_DEVICE);
    return add_close(&a, st);
}

/* ------------------------------------------------------------- memsets */

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memset(cuabi_graph_node **out, cuabi_graph *graph,
                                                  cuabi_graph_node **dependencies,
                                                  size_t num_dependencies, cuabi_buffer *buffer,
                                                  size_t offset, uint32_t value,
                                                  unsigned int width, size_t count)
{
    add_ctx a;
    cuabi__buffer *b = NULL;
    mem_side m;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    cuabi_status st = get_buffer(&b, buffer, "target", __func__);
    if (st == CUABI_SUCCESS && width != 1 && width != 2 && width != 4)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: width must be 1, 2 or 4 bytes, not "
                          "%u", __func__, width);
    else if (st == CUABI_SUCCESS && width != 4 && value >= (UINT32_C(1) << (8 * width)))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: value 0x%x does not fit in %u "
                          "byte%s", __func__, value, width, width == 1 ? "" : "s");
    else if (st == CUABI_SUCCESS && offset % width)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: offset %zu is not a multiple of the "
                          "width %u", __func__, offset, width);
    else if (st == CUABI_SUCCESS && (count == 0 || count > SIZE_MAX / width))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: count %zu is %s", __func__, count,
                          count ? "too large" : "0 (a memset node must set something)");
    else if (st == CUABI_SUCCESS && b->kind == CUABI_MEMORY_HOST)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the buffer is plain host memory, "
                          "which a graph memset cannot reach (use device, pinned or managed "
                          "memory, or a host node)", __func__);
    if (st == CUABI_SUCCESS)
        st = buffer_side(&m, b, offset, count * width, "target", __func__);
    if (st == CUABI_SUCCESS)
        st = body_device_ok(&a, b->device);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_buffer(&a.g->shared->keep, b, __func__);
    CUcontext ctx = NULL;
    if (st == CUABI_SUCCESS)
        st = device_context(&ctx, b->device, &a);
    if (st == CUABI_SUCCESS) {
        CUDA_MEMSET_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.dst = (CUdeviceptr)m.ptr;
        p.value = value;
        p.elementSize = width;
        p.width = count;
        p.height = 1;
        p.pitch = count * width;
        st = CUABI__CU(a.drv, cuGraphAddMemsetNode, &n, a.g->cu_graph, a.deps, a.ndeps, &p, ctx);
    }
    if (st == CUABI_SUCCESS)
        cuabi__graph_use_device(a.g, b->device);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEMSET, NULL));
}

/* ----------------------------------------- copies and memsets by address */

/* A buffer whose memory the graph keeps for a node made by address (NULL: none). */
static cuabi_status keep_optional(add_ctx *a, cuabi_buffer *buffer, const char *what)
{
    if (!buffer)
        return CUABI_SUCCESS;
    cuabi__buffer *b = NULL;
    CUABI__TRY(get_buffer(&b, buffer, what, a->caller));
    return cuabi__keep_buffer(&a->g->shared->keep, b, a->caller);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memcpy_ptr(cuabi_graph_node **out, cuabi_graph *graph,
                                                      cuabi_graph_node **dependencies,
                                                      size_t num_dependencies,
                                                      cuabi_device *device, uintptr_t dst,
                                                      cuabi_buffer *dst_keep, uintptr_t src,
                                                      cuabi_buffer *src_keep, size_t size)
{
    add_ctx a;
    void *obj;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    cuabi_status st = cuabi__handle_get(device, CUABI__T_DEVICE, &obj, __func__);
    cuabi__device *dev = st == CUABI_SUCCESS ? obj : NULL;
    if (st == CUABI_SUCCESS)
        st = keep_optional(&a, dst_keep, "dst_keep");
    if (st == CUABI_SUCCESS)
        st = keep_optional(&a, src_keep, "src_keep");
    if (st == CUABI_SUCCESS && (!dst || !src))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s address is 0", __func__,
                          dst ? "source" : "destination");
    if (st == CUABI_SUCCESS && !size)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: size is 0 (a copy node must copy "
                          "something)", __func__);
    if (st == CUABI_SUCCESS && (dst > UINTPTR_MAX - size || src > UINTPTR_MAX - size))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu bytes from the %s address wrap "
                          "around the address space", __func__, size,
                          dst > UINTPTR_MAX - size ? "destination" : "source");
    if (st == CUABI_SUCCESS)
        st = body_device_ok(&a, dev);
    CUcontext ctx = NULL;
    if (st == CUABI_SUCCESS)
        st = device_context(&ctx, dev, &a);
    if (st == CUABI_SUCCESS) {
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof p);
        p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
        p.srcDevice = (CUdeviceptr)src;
        p.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        p.dstDevice = (CUdeviceptr)dst;
        p.WidthInBytes = size;
        p.Height = 1;
        p.Depth = 1;
        st = CUABI__CU(a.drv, cuGraphAddMemcpyNode, &n, a.g->cu_graph, a.deps, a.ndeps, &p, ctx);
    }
    if (st == CUABI_SUCCESS)
        cuabi__graph_use_device(a.g, dev);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEMCPY, NULL));
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_memset_ptr(cuabi_graph_node **out, cuabi_graph *graph,
                                                      cuabi_graph_node **dependencies,
                                                      size_t num_dependencies,
                                                      cuabi_device *device, uintptr_t dst,
                                                      cuabi_buffer *dst_keep, uint32_t value,
                                                      unsigned int element_size, size_t width,
                                                      size_t height, size_t pitch)
{
    add_ctx a;
    void *obj;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    size_t row = 0, span = 0;
    cuabi_status st = cuabi__handle_get(device, CUABI__T_DEVICE, &obj, __func__);
    cuabi__device *dev = st == CUABI_SUCCESS ? obj : NULL;
    if (st == CUABI_SUCCESS)
        st = keep_optional(&a, dst_keep, "dst_keep");
    if (st == CUABI_SUCCESS && element_size != 1 && element_size != 2 && element_size != 4)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: element_size must be 1, 2 or 4 "
                          "bytes, not %u", __func__, element_size);
    else if (st == CUABI_SUCCESS && element_size != 4 &&
             value >= (UINT32_C(1) << (8 * element_size)))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: value 0x%x does not fit in %u "
                          "byte%s", __func__, value, element_size, element_size == 1 ? "" : "s");
    else if (st == CUABI_SUCCESS && !dst)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the destination address is 0",
                          __func__);
    else if (st == CUABI_SUCCESS && (!width || !height))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is 0 (a memset node must set "
                          "something)", __func__, width ? "height" : "width");
    else if (st == CUABI_SUCCESS && !cuabi__size_mul(&row, width, element_size))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: width %zu is too large", __func__,
                          width);
    if (st == CUABI_SUCCESS && height == 1)
        pitch = row;
    if (st == CUABI_SUCCESS && pitch < row)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: pitch %zu is less than a row "
                          "(%zu elements of %u bytes)", __func__, pitch, width, element_size);
    if (st == CUABI_SUCCESS && (!cuabi__size_mul(&span, pitch, height - 1) ||
                                !cuabi__size_add(&span, span, row) || dst > UINTPTR_MAX - span))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu rows of pitch %zu are too "
                          "large", __func__, height, pitch);
    if (st == CUABI_SUCCESS)
        st = body_device_ok(&a, dev);
    CUcontext ctx = NULL;
    if (st == CUABI_SUCCESS)
        st = device_context(&ctx, dev, &a);
    if (st == CUABI_SUCCESS) {
        CUDA_MEMSET_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.dst = (CUdeviceptr)dst;
        p.value = value;
        p.elementSize = element_size;
        p.width = width;
        p.height = height;
        p.pitch = pitch;
        st = CUABI__CU(a.drv, cuGraphAddMemsetNode, &n, a.g->cu_graph, a.deps, a.ndeps, &p, ctx);
    }
    if (st == CUABI_SUCCESS)
        cuabi__graph_use_device(a.g, dev);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEMSET, NULL));
}

/* ------------------------------------------------------- memory nodes */

static cuabi_status get_device(cuabi__device **out, cuabi_device *device, const char *what,
                               size_t i, const char *caller)
{
    void *obj;
    cuabi_status st = cuabi__handle_get(device, CUABI__T_DEVICE, &obj, caller);
    if (st != CUABI_SUCCESS)
        return i == SIZE_MAX
                   ? cuabi__error(st, "%s: %s is not a live cuabi_device", caller, what)
                   : cuabi__error(st, "%s: %s[%zu] is not a live cuabi_device", caller, what, i);
    *out = obj;
    return CUABI_SUCCESS;
}

/* Most peers one allocation node names: a device appears once. */
#define MEM_ALLOC_MAX_PEERS 64

CUABI_EXTERN(cuabi_status) cuabi_graph_add_mem_alloc(cuabi_graph_node **out, cuabi_graph *graph,
                                                     cuabi_graph_node **dependencies,
                                                     size_t num_dependencies, cuabi_device *device,
                                                     cuabi_memory_kind kind, size_t size,
                                                     cuabi_device **peers, size_t num_peers)
{
    add_ctx a;
    cuabi__device *dev = NULL;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    CUmemAccessDesc desc[MEM_ALLOC_MAX_PEERS];
    size_t ndesc = 0;
    cuabi_status st = body_allows(&a, "a memory allocation node");
    if (st == CUABI_SUCCESS)
        st = get_device(&dev, device, "device", SIZE_MAX, __func__);
    if (st == CUABI_SUCCESS && kind != CUABI_MEMORY_DEVICE && kind != CUABI_MEMORY_PINNED &&
        kind != CUABI_MEMORY_MANAGED)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: kind %d is not device, pinned or "
                          "managed memory (a graph cannot allocate plain host memory)", __func__,
                          (int)kind);
    if (st == CUABI_SUCCESS && !size)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: size is 0 (an allocation node must "
                          "allocate something)", __func__);
    if (st == CUABI_SUCCESS && num_peers && !peers)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: peers is NULL but num_peers is %zu",
                          __func__, num_peers);
    if (st == CUABI_SUCCESS && num_peers > MEM_ALLOC_MAX_PEERS)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: num_peers %zu is more than %d "
                          "devices", __func__, num_peers, MEM_ALLOC_MAX_PEERS);
    for (size_t i = 0; st == CUABI_SUCCESS && i < num_peers; i++) {
        cuabi__device *p = NULL;
        st = get_device(&p, peers[i], "peers", i, __func__);
        for (size_t j = 0; st == CUABI_SUCCESS && j < ndesc; j++)
            if (desc[j].location.id == p->ordinal)
                st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: peers[%zu] (device %d) is "
                                  "given twice", __func__, i, p->ordinal);
        if (st != CUABI_SUCCESS || p == dev)
            continue;  /* the allocating device has access anyway */
        memset(&desc[ndesc], 0, sizeof desc[ndesc]);
        desc[ndesc].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc[ndesc].location.id = p->ordinal;
        desc[ndesc].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        ndesc++;
    }
    CUcontext ctx = NULL;
    if (st == CUABI_SUCCESS)
        st = device_context(&ctx, dev, &a);
    if (st == CUABI_SUCCESS) {
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.poolProps.allocType = kind == CUABI_MEMORY_MANAGED ? CU_MEM_ALLOCATION_TYPE_MANAGED
                                                             : CU_MEM_ALLOCATION_TYPE_PINNED;
        p.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
        p.poolProps.location.type = kind == CUABI_MEMORY_PINNED ? CU_MEM_LOCATION_TYPE_HOST
                                                                : CU_MEM_LOCATION_TYPE_DEVICE;
        p.poolProps.location.id = kind == CUABI_MEMORY_PINNED ? 0 : dev->ordinal;
        p.accessDescs = ndesc ? desc : NULL;
        p.accessDescCount = ndesc;
        p.bytesize = size;
        st = CUABI__CU(a.drv, cuGraphAddMemAllocNode, &n, a.g->cu_graph, a.deps, a.ndeps, &p);
    }
    if (st == CUABI_SUCCESS)
        cuabi__graph_use_device(a.g, dev);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEM_ALLOC, NULL));
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_mem_free(cuabi_graph_node **out, cuabi_graph *graph,
                                                    cuabi_graph_node **dependencies,
                                                    size_t num_dependencies, uintptr_t pointer)
{
    add_ctx a;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    cuabi_status st = body_allows(&a, "a memory free node");
    if (st == CUABI_SUCCESS && !pointer)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: pointer is 0", __func__);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(a.drv, cuGraphAddMemFreeNode, &n, a.g->cu_graph, a.deps, a.ndeps,
                       (CUdeviceptr)pointer);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_MEM_FREE, NULL));
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_mem_info(uintptr_t *pointer, size_t *size,
                                                     cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(pointer && size, "%s: %s is NULL", __func__, pointer ? "size" : "pointer");
    *pointer = 0;
    *size = 0;
    CUABI__GET(n, node, GRAPH_NODE);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    cuabi__graph *g = n->graph;
    cuabi__graph_lock(g);
    cuabi_status st = cuabi__graph_node_live(n, __func__);
    if (st == CUABI_SUCCESS) {
        const cuabi__node_rec *r = &g->nodes[n->index];
        if (r->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            CUDA_MEM_ALLOC_NODE_PARAMS p;
            memset(&p, 0, sizeof p);
            st = CUABI__CU(drv, cuGraphMemAllocNodeGetParams, r->cu_node, &p);
            if (st == CUABI_SUCCESS) {
                *pointer = (uintptr_t)p.dptr;
                *size = p.bytesize;
            }
        } else if (r->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            CUdeviceptr d = 0;
            st = CUABI__CU(drv, cuGraphMemFreeNodeGetParams, r->cu_node, &d);
            if (st == CUABI_SUCCESS)
                *pointer = (uintptr_t)d;
        } else {
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: node %zu is not a memory "
                              "allocation or free node", __func__, n->index);
        }
    }
    cuabi__graph_unlock(g);
    return st;
}

/* ----------------------------------------- host, empty, events, children */

CUABI_EXTERN(cuabi_status) cuabi_graph_add_host(cuabi_graph_node **out, cuabi_graph *graph,
                                                cuabi_graph_node **dependencies,
                                                size_t num_dependencies, cuabi_graph_host_fn fn,
                                                void *payload)
{
    add_ctx a;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    cuabi_status st = fn ? body_allows(&a, "a host node")
                         : cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: fn is NULL", __func__);
    if (st == CUABI_SUCCESS) {
        CUDA_HOST_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.fn = fn;
        p.userData = payload;
        st = CUABI__CU(a.drv, cuGraphAddHostNode, &n, a.g->cu_graph, a.deps, a.ndeps, &p);
    }
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_HOST, NULL));
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_empty(cuabi_graph_node **out, cuabi_graph *graph,
                                                 cuabi_graph_node **dependencies,
                                                 size_t num_dependencies)
{
    add_ctx a;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    CUgraphNode n = NULL;
    cuabi_status st = CUABI__CU(a.drv, cuGraphAddEmptyNode, &n, a.g->cu_graph, a.deps, a.ndeps);
    return add_close(&a, add_done(&a, out, st, n, CU_GRAPH_NODE_TYPE_EMPTY, NULL));
}

static cuabi_status add_event_node(cuabi_graph_node **out, cuabi_graph *graph,
                                   cuabi_graph_node *const *deps, size_t ndeps,
                                   cuabi_event *event, bool record, const char *caller)
{
    add_ctx a;
    void *obj;
    CUABI__TRY(add_begin(&a, out, graph, deps, ndeps, caller));
    CUgraphNode n = NULL;
    cuabi_status st = body_allows(&a, record ? "an event record node" : "an event wait node");
    if (st == CUABI_SUCCESS)
        st = cuabi__handle_get(event, CUABI__T_EVENT, &obj, caller);
    cuabi__event *e = obj;
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_object(&a.g->shared->keep, &e->base, caller);
    if (st == CUABI_SUCCESS)
        st = record ? CUABI__CU_IN(caller, a.drv, cuGraphAddEventRecordNode, &n, a.g->cu_graph,
                                   a.deps, a.ndeps, e->cu_event)
                    : CUABI__CU_IN(caller, a.drv, cuGraphAddEventWaitNode, &n, a.g->cu_graph,
                                   a.deps, a.ndeps, e->cu_event);
    if (st == CUABI_SUCCESS)
        cuabi__graph_use_device(a.g, e->device);
    return add_close(&a, add_done(&a, out, st, n, record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                                         : CU_GRAPH_NODE_TYPE_WAIT_EVENT, NULL));
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_event_record(cuabi_graph_node **out,
                                                        cuabi_graph *graph,
                                                        cuabi_graph_node **dependencies,
                                                        size_t num_dependencies,
                                                        cuabi_event *event)
{
    return add_event_node(out, graph, dependencies, num_dependencies, event, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_event_wait(cuabi_graph_node **out, cuabi_graph *graph,
                                                      cuabi_graph_node **dependencies,
                                                      size_t num_dependencies, cuabi_event *event)
{
    return add_event_node(out, graph, dependencies, num_dependencies, event, false, __func__);
}

/* A capture's node was added: later work on the stream `follow` depends on
 * it alone (cuStreamUpdateCaptureDependencies). On failure the node goes
 * again, so the caller's add_done undoes the rest. */
static cuabi_status follow_node(add_ctx *a, cuabi_status st, CUstream follow, CUgraphNode n)
{
    if (st != CUABI_SUCCESS || !follow)
        return st;
    if (!a->drv->cuStreamUpdateCaptureDependencies) {
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the driver lacks "
                          "cuStreamUpdateCaptureDependencies (CUDA 12.3)", a->caller);
    } else {
        CUgraphNode one[1] = { n };
        st = CUABI__CU_IN(a->caller, a->drv, cuStreamUpdateCaptureDependencies, follow, one, NULL,
                          1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
    }
    if (st != CUABI_SUCCESS)
        (void)CUABI__CU_RELEASE_IN(a->caller, a->drv, cuGraphDestroyNode, n);
    return st;
}

/* A child graph node of a copy of `c` (after add_begin*). */
static cuabi_status add_child(add_ctx *a, cuabi_graph_node **out, cuabi__graph *c,
                              cuabi__device *cdev, CUstream follow)
{
    CUgraphNode n = NULL;
    cuabi_status st = cuabi__keep_object(&a->g->shared->keep, &c->base, a->caller);
    if (st == CUABI_SUCCESS && cdev)
        st = body_device_ok(a, cdev);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_IN(a->caller, a->drv, cuGraphAddChildGraphNode, &n, a->g->cu_graph,
                          a->deps, a->ndeps, c->cu_graph);
    st = follow_node(a, st, follow, n);
    if (st == CUABI_SUCCESS && cdev)
        cuabi__graph_use_device(a->g, cdev);
    return add_done(a, out, st, n, CU_GRAPH_NODE_TYPE_GRAPH, NULL);
}

/* The child's device, retained (NULL when none or several), after the
 * checks every child graph addition makes. */
static cuabi_status child_check(cuabi__device **cdev, cuabi__graph *g, cuabi__graph *c,
                                const char *caller)
{
    *cdev = NULL;
    /* Read the child's device before taking the graph's lock (never two
     * graph locks at once). */
    CUABI__CHECK_ARG(c->shared != g->shared, "%s: the child is %s; a graph cannot contain itself "
                     "or its own body graphs", caller, c == g ? "the graph itself"
                                                              : "part of the same graph");
    cuabi__graph_lock(c);
    *cdev = c->shared->mixed ? NULL : c->shared->device;
    if (*cdev)
        cuabi__object_retain(&(*cdev)->base);
    cuabi__graph_unlock(c);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_child(cuabi_graph_node **out, cuabi_graph *graph,
                                                 cuabi_graph_node **dependencies,
                                                 size_t num_dependencies, cuabi_graph *child)
{
    cuabi__graph *c, *g;
    cuabi__device *cdev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(g, graph, GRAPH);
    CUABI__GET(c, child, GRAPH);
    CUABI__TRY(child_check(&cdev, g, c, __func__));
    add_ctx a;
    cuabi_status st = add_begin(&a, out, graph, dependencies, num_dependencies, __func__);
    if (st == CUABI_SUCCESS)
        st = add_close(&a, add_child(&a, out, c, cdev, NULL));
    if (cdev)
        cuabi__object_release(&cdev->base);
    return st;
}

/* --------------------------------------------------------- conditionals */

static cuabi_status conditionals_supported(const cuabi__driver *drv, int need_version,
                                           const char *what, const char *caller)
{
    int v = cuabi__driver_info()->version;
    if (!drv->cuGraphConditionalHandleCreate || !drv->cuGraphAddNode || v < need_version)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: %s need%s a CUDA %d.%d driver or "
                            "newer; the loaded driver is CUDA %d.%d", caller, what,
                            strchr(what, ' ') ? "" : "s", need_version / 1000,
                            need_version % 1000 / 10, v / 1000, v % 1000 / 10);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__graph_cond_create(uint64_t *out, cuabi__graph *g, cuabi__device *dev,
                                      unsigned int default_value, unsigned int flags,
                                      const char *caller)
{
    const cuabi__driver *drv;
    CUABI__CHECK_ARG((flags & ~(unsigned)CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT) == 0,
                     "%s: unknown flags 0x%x (only CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT)",
                     caller, flags);
    CUABI__TRY(cuabi__graph_driver(&drv, caller));
    CUABI__TRY(conditionals_supported(drv, 12030, "conditional nodes", caller));
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    CUABI__TRY(cuabi__device_enter(&scope, dev, drv));
    CUcontext ctx = atomic_load_explicit(&dev->primary, memory_order_acquire);
    cuabi__graph_lock(g);
    cuabi__graph_shared *sh = g->shared;
    cuabi_status st = CUABI_SUCCESS;
    if (sh->nconds == sh->cap_conds) {
        size_t cap = sh->cap_conds ? 2 * sh->cap_conds : 4;
        void *p = cuabi__realloc_in(sh->conds, cap * sizeof *sh->conds, caller);
        if (p) {
            sh->conds = p;
            sh->cap_conds = cap;
        } else {
            st = CUABI_ERROR_OUT_OF_MEMORY;
        }
    }
    size_t mark = cuabi__keep_mark(&sh->keep);
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_object(&sh->keep, &dev->base, caller);
    CUgraphConditionalHandle h = 0;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_IN(caller, drv, cuGraphConditionalHandleCreate, &h, g->cu_graph, ctx,
                          default_value, flags);
    if (st == CUABI_SUCCESS) {
        sh->conds[sh->nconds].handle = h;
        sh->conds[sh->nconds].device = dev;
        sh->nconds++;
        *out = h;
    } else {
        cuabi__keep_rollback(&sh->keep, mark);
    }
    cuabi__graph_unlock(g);
    return cuabi__context_end(&scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_conditional_handle_create(uint64_t *out, cuabi_graph *graph,
                                                                 cuabi_device *device,
                                                                 unsigned int default_value,
                                                                 unsigned int flags)
{
    cuabi__graph *g;
    cuabi__device *dev;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(g, graph, GRAPH);
    CUABI__GET(dev, device, DEVICE);
    return cuabi__graph_cond_create(out, g, dev, default_value, flags, __func__);
}

/* The most bodies cuabi asks the driver for in one conditional node (a
 * switch of more cases is refused before any allocation). */
#define CUABI__MAX_BODIES 65536u

/* The driver refused a conditional node's parameters (CUDA_ERROR_INVALID_VALUE):
 * cuabi checked everything but the handle's graph, which it knows only by the
 * handle's number -- and the numbers are per graph (an H100 gave a handle of
 * another graph the number of one of this graph's), so this is the likely
 * cause: an argument error, not a driver failure. */
static cuabi_status cond_refused(uint64_t handle, const char *caller)
{
    int cu = cuabi_last_error()->cu_result;
    cuabi_status st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                   "%s: the driver refused the conditional node "
                                   "(CUDA_ERROR_INVALID_VALUE): handle 0x%llx is not a condition "
                                   "of this graph (handle numbers are per graph: another graph's "
                                   "can equal one of this graph's)", caller,
                                   (unsigned long long)handle);
    cuabi__error_set_cu(cu);
    return st;
}

/* A conditional node (after add_begin*); with `follow`, later work on that
 * capturing stream depends on it. */
static cuabi_status add_conditional(add_ctx *a, cuabi_graph_node **out, uint64_t handle,
                                    cuabi_graph_conditional_type type, unsigned int body_count,
                                    CUstream follow)
{
    CUgraphNode n = NULL;
    cuabi__device *dev = cuabi__graph_cond_device(a->g, handle);
    bool extended = type == CUABI_GRAPH_CONDITIONAL_SWITCH ||
                    (type == CUABI_GRAPH_CONDITIONAL_IF && body_count == 2);
    const char *caller = a->caller;
    cuabi_status st = conditionals_supported(a->drv, 12030, "conditional nodes", caller);
    if (st == CUABI_SUCCESS && !dev)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: handle 0x%llx was not made by "
                          "cuabi_graph_conditional_handle_create for this graph", caller,
                          (unsigned long long)handle);
    else if (st == CUABI_SUCCESS && (unsigned)type > CUABI_GRAPH_CONDITIONAL_SWITCH)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %d is not a "
                          "cuabi_graph_conditional_type", caller, (int)type);
    else if (st == CUABI_SUCCESS &&
             (body_count == 0 || (type == CUABI_GRAPH_CONDITIONAL_WHILE && body_count != 1) ||
              (type == CUABI_GRAPH_CONDITIONAL_IF && body_count > 2)))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a %s node takes %s bodies, not %u",
                          caller, type == CUABI_GRAPH_CONDITIONAL_WHILE ? "while"
                                  : type == CUABI_GRAPH_CONDITIONAL_IF ? "if" : "switch",
                          type == CUABI_GRAPH_CONDITIONAL_WHILE ? "exactly 1"
                          : type == CUABI_GRAPH_CONDITIONAL_IF ? "1 or 2" : "at least 1",
                          body_count);
    else if (st == CUABI_SUCCESS && body_count > CUABI__MAX_BODIES)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: a switch of %u cases is more than "
                          "cuabi makes (at most %u)", caller, body_count, CUABI__MAX_BODIES);
    else if (st == CUABI_SUCCESS && extended)
        st = conditionals_supported(a->drv, 12080, type == CUABI_GRAPH_CONDITIONAL_SWITCH
                                                       ? "switch nodes" : "if/else nodes",
                                    caller);
    if (st == CUABI_SUCCESS)
        st = body_device_ok(a, dev);
    CUgraph *bodies = NULL;
    cuabi__graph **handles = NULL;
    if (st == CUABI_SUCCESS) {
        bodies = cuabi__calloc(body_count, sizeof *bodies);
        handles = bodies ? cuabi__calloc(body_count, sizeof *handles) : NULL;
        if (!handles)
            st = CUABI_ERROR_OUT_OF_MEMORY;
    }
    CUcontext ctx = NULL;
    if (st == CUABI_SUCCESS)
        st = device_context(&ctx, dev, a);
    if (st == CUABI_SUCCESS) {
        CUgraphNodeParams p;
        memset(&p, 0, sizeof p);
        p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        p.conditional.handle = handle;
        p.conditional.type = (CUgraphConditionalNodeType)type;
        p.conditional.size = body_count;
        p.conditional.ctx = ctx;
        st = CUABI__CU_IN(caller, a->drv, cuGraphAddNode, &n, a->g->cu_graph, a->deps, NULL,
                          a->ndeps, &p);
        if (st == CUABI_SUCCESS)
            memcpy(bodies, p.conditional.phGraph_out, body_count * sizeof *bodies);
        else if (cuabi_last_error()->cu_result == CUDA_ERROR_INVALID_VALUE)
            st = cond_refused(handle, caller);
    }
    st = follow_node(a, st, follow, n);
    cuabi__node_rec *r;
    st = add_done(a, out, st, n, CU_GRAPH_NODE_TYPE_CONDITIONAL, &r);
    if (st == CUABI_SUCCESS) {
        r->device = dev;
        r->nbodies = body_count;
        r->bodies = bodies;
        r->body_handles = handles;
        cuabi__graph_use_device(a->g, dev);
    } else {
        cuabi__free(bodies);
        cuabi__free(handles);
    }
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_conditional(cuabi_graph_node **out, cuabi_graph *graph,
                                                       cuabi_graph_node **dependencies,
                                                       size_t num_dependencies, uint64_t handle,
                                                       cuabi_graph_conditional_type type,
                                                       unsigned int body_count)
{
    add_ctx a;
    CUABI__TRY(add_begin(&a, out, graph, dependencies, num_dependencies, __func__));
    return add_close(&a, add_conditional(&a, out, handle, type, body_count, NULL));
}

/* ------------------------------------------- into a capture (graph_capture.c) */

cuabi_status cuabi__graph_capture_add_conditional(cuabi_graph_node **out, cuabi__graph *g,
                                                  const CUgraphNode *deps, size_t ndeps,
                                                  CUstream follow, uint64_t handle,
                                                  cuabi_graph_conditional_type type,
                                                  unsigned int body_count, const char *caller)
{
    add_ctx a;
    memset(&a, 0, sizeof a);
    a.caller = caller;
    a.out = out;
    CUABI__TRY(add_begin_g(&a, g, NULL, deps, ndeps, caller));
    return add_close(&a, add_conditional(&a, out, handle, type, body_count, follow));
}

cuabi_status cuabi__graph_capture_add_child(cuabi_graph_node **out, cuabi__graph *g,
                                            const CUgraphNode *deps, size_t ndeps,
                                            CUstream follow, cuabi__graph *child,
                                            const char *caller)
{
    cuabi__device *cdev;
    CUABI__TRY(child_check(&cdev, g, child, caller));
    add_ctx a;
    memset(&a, 0, sizeof a);
    a.caller = caller;
    a.out = out;
    cuabi_status st = add_begin_g(&a, g, NULL, deps, ndeps, caller);
    if (st == CUABI_SUCCESS)
        st = add_close(&a, add_child(&a, out, child, cdev, follow));
    if (cdev)
        cuabi__object_release(&cdev->base);
    return st;
}
