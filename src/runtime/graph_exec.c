/* Executable graphs: instantiate, launch, upload, and update in place (the
 * whole graph, or one kernel node's arguments and grid).
 *
 * An executable keeps the graph it was instantiated from (node handles for
 * per-node updates address its nodes), the graph of its last whole update
 * (whose nodes' parameters it now runs), and, per kernel node updated on
 * its own, what that node's new arguments reference. */
#include "platform/release.h"
#include "runtime/graph.h"

#include <stdio.h>
#include <string.h>

typedef struct node_override {
    CUgraphNode node;
    cuabi_launch_config config;    /* stream and device cleared */
    cuabi__keep keep;
} node_override;

typedef struct cuabi__graph_exec {
    cuabi__object base;
    CUgraphExec cu_exec;
    cuabi__graph *graph;           /* instantiated from; retained */
    cuabi__graph *current;         /* last whole update's graph (retained), or NULL */
    cuabi__device *device;         /* retained; NULL when the graph names none or several */
    pthread_mutex_t lock;          /* guards current and the overrides */
    node_override *over;
    size_t nover, cap_over;
} cuabi__graph_exec;

static void exec_destroy(cuabi__object *o)
{
    cuabi__graph_exec *e = (cuabi__graph_exec *)o;
    const cuabi__driver *drv;
    if (cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuGraphExecDestroy)
        CUABI__CU_RELEASE(drv, cuGraphExecDestroy, e->cu_exec);
    for (size_t i = 0; i < e->nover; i++)
        cuabi__keep_release(&e->over[i].keep);
    cuabi__free(e->over);
    if (e->current)
        cuabi__object_release(&e->current->base);
    cuabi__object_release(&e->graph->base);
    if (e->device)
        cuabi__object_release(&e->device->base);
    pthread_mutex_destroy(&e->lock);
    cuabi__free(e);
}

/* --------------------------------------------------------- instantiate */

static const char *instantiate_reason(CUgraphInstantiateResult r, cuabi_status *st)
{
    switch (r) {
    case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE:
        *st = CUABI_ERROR_INVALID_ARGUMENT;
        return "the graph's structure is invalid (a cycle among its dependencies?)";
    case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
        *st = CUABI_ERROR_NOT_SUPPORTED;
        return "a node does something a device-launchable graph cannot do";
    case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
        *st = CUABI_ERROR_NOT_SUPPORTED;
        return "a device-launchable graph must run on one device; nodes name several";
    case CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED:
        *st = CUABI_ERROR_INVALID_ARGUMENT;
        return "a conditional handle was made for the graph but no conditional node uses it";
    default:
        return NULL;
    }
}

/* The driver refused to instantiate: say why and at which node. */
static cuabi_status instantiate_failed(cuabi_status st, const CUDA_GRAPH_INSTANTIATE_PARAMS *ip,
                                       cuabi__graph *g, const cuabi__driver *drv,
                                       const char *caller)
{
    int cu = cuabi_last_error()->cu_result;
    const char *why = instantiate_reason(ip->result_out, &st);
    if (!why)
        return st;
    char node[200] = "";
    if (ip->hErrNode_out) {
        (void)cuabi__graph_sync(g, drv, caller);
        size_t at = cuabi__graph_find(g, ip->hErrNode_out);
        char d[160];
        cuabi__graph_describe(d, sizeof d, g, at, drv);
        snprintf(node, sizeof node, " at %s", d);
    }
    st = cuabi__error(st, "%s: the driver cannot instantiate the graph%s: %s", caller, node, why);
    cuabi__error_set_cu(cu);
    return st;
}

/* A graph with no device of its own (empty, host and event nodes only) is
 * instantiated in the caller's current context; with none current, in
 * device 0's, the CUDA runtime's default device: the driver refuses to
 * instantiate with no context (CUDA_ERROR_INVALID_CONTEXT on an H200, a
 * thread whose first cuabi call made such a graph). *d0: device 0 then
 * (else NULL), whose reference *held the caller releases. */
static cuabi_status context_or_device0(cuabi__device **d0, cuabi_device **held,
                                       const cuabi__driver *drv, const char *caller)
{
    *d0 = NULL;
    CUcontext current = NULL;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuCtxGetCurrent, &current));
    if (current)
        return CUABI_SUCCESS;
    CUABI__TRY(cuabi_device_get(held, 0));
    void *obj;
    CUABI__TRY(cuabi__handle_get(*held, CUABI__T_DEVICE, &obj, caller));
    *d0 = obj;
    return CUABI_SUCCESS;
}

CUABI__HOT
CUABI_EXTERN(cuabi_status) cuabi_graph_instantiate(cuabi_graph_exec **out, cuabi_graph *graph,
                                                   const cuabi_graph_instantiate_options *options)
{
    static const cuabi_graph_instantiate_options defaults = CUABI_GRAPH_INSTANTIATE_OPTIONS_INIT;
    cuabi__graph *g;
    cuabi__stream *us = NULL;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(g, graph, GRAPH);
    CUABI__CHECK_OPTS(options, "cuabi_graph_instantiate_options",
                      CUABI_GRAPH_INSTANTIATE_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    const unsigned known = CUABI_GRAPH_INSTANTIATE_AUTO_FREE_ON_LAUNCH |
                           CUABI_GRAPH_INSTANTIATE_UPLOAD | CUABI_GRAPH_INSTANTIATE_DEVICE_LAUNCH |
                           CUABI_GRAPH_INSTANTIATE_USE_NODE_PRIORITY;
    CUABI__CHECK_ARG((options->flags & ~known) == 0, "%s: unknown flags 0x%x", __func__,
                     options->flags & ~known);
    CUABI__CHECK_ARG(!g->parent, "%s: the graph is a body of conditional node %zu; instantiate "
                     "the graph that holds that node", __func__, g->parent_rec);
    if (options->flags & CUABI_GRAPH_INSTANTIATE_UPLOAD) {
        CUABI__CHECK_ARG(options->upload_stream, "%s: CUABI_GRAPH_INSTANTIATE_UPLOAD needs "
                         "options.upload_stream", __func__);
        CUABI__GET(us, options->upload_stream, STREAM);
    }
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    cuabi__graph_lock(g);
    cuabi__device *dev = g->shared->mixed ? NULL : g->shared->device;
    cuabi_status st = CUABI_SUCCESS;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the caller's comes back */
    if (us && dev && us->device != dev)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the upload stream is on device %d, "
                          "the graph on device %d", __func__, us->device->ordinal, dev->ordinal);
    /* The driver instantiates in the current context: the upload stream's
     * (a created stream's too), else the graph's device's. */
    if (st == CUABI_SUCCESS && (dev || us))
        st = us ? cuabi__stream_context_enter(&scope, us, drv)
                : cuabi__device_enter(&scope, dev, drv);
    cuabi_device *held = NULL;
    if (st == CUABI_SUCCESS && !dev && !us) {
        cuabi__device *d0;
        st = context_or_device0(&d0, &held, drv, __func__);
        if (st == CUABI_SUCCESS && d0) {
            st = cuabi__device_enter(&scope, d0, drv);
            if (!g->shared->mixed)
                dev = d0;        /* the executable's device */
        }
    }
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = options->flags;
    ip.hUploadStream = us ? us->cu_stream : NULL;
    CUgraphExec ce = NULL;
    if (st == CUABI_SUCCESS) {
        st = CUABI__CU(drv, cuGraphInstantiateWithParams, &ce, g->cu_graph, &ip);
        if (st != CUABI_SUCCESS)
            st = instantiate_failed(st, &ip, g, drv, __func__);
    }
    cuabi__graph_exec *e = NULL;
    if (st == CUABI_SUCCESS) {
        e = cuabi__calloc(1, sizeof *e);
        st = e ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
        if (e && pthread_mutex_init(&e->lock, NULL) != 0) {
            cuabi__free(e);
            e = NULL;
            st = cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: cannot create a mutex", __func__);
        }
    }
    if (st == CUABI_SUCCESS) {
        st = cuabi__handle_register(&e->base, CUABI__T_GRAPH_EXEC, exec_destroy);
        if (st != CUABI_SUCCESS) {
            pthread_mutex_destroy(&e->lock);
            cuabi__free(e);
        }
    }
    if (st != CUABI_SUCCESS) {
        if (ce)
            CUABI__CU_RELEASE(drv, cuGraphExecDestroy, ce);
        cuabi__graph_unlock(g);
        if (held)
            cuabi__handle_release(held, CUABI__T_DEVICE);
        return cuabi__context_end(&scope, st);
    }
    e->cu_exec = ce;
    e->graph = g;
    cuabi__object_retain(&g->base);
    e->device = dev;
    if (dev)
        cuabi__object_retain(&dev->base);
    cuabi__graph_unlock(g);
    if (held)
        cuabi__handle_release(held, CUABI__T_DEVICE);
    *out = CUABI__HANDLE(e, cuabi_graph_exec);
    return CUABI__CONTEXT_END_OUT(&scope, st, out, GRAPH_EXEC, __func__);
}

/* -------------------------------------------------------- launch, upload */

/* The executable and stream, a default stream's device current in *scope. */
CUABI__HOT
static cuabi_status exec_target(cuabi__context_scope *scope, cuabi__graph_exec **e, cuabi__stream **s, const cuabi__driver **drv,
                                cuabi_graph_exec *exec, cuabi_stream *stream, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(exec, CUABI__T_GRAPH_EXEC, &obj, caller));
    *e = obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    *s = obj;
    if (CUABI__UNLIKELY((*e)->device && (*s)->device != (*e)->device))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the executable was built for "
                            "device %d; the stream is on device %d", caller,
                            (*e)->device->ordinal, (*s)->device->ordinal);
    CUABI__TRY(cuabi__driver_get_for(drv, caller));
    return cuabi__stream_enter(scope, *s, *drv);
}

CUABI__HOT
CUABI_EXTERN(cuabi_status) cuabi_graph_exec_launch(cuabi_graph_exec *exec, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__graph_exec *e;
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__TRY_SCOPE(exec_target(&scope, &e, &s, &drv, exec, stream, __func__));
    if (CUABI__UNLIKELY(cuabi__capturing())) /* launched into a capture: a child graph */
        CUABI__TRY_SCOPE(cuabi__capture_keep_object(s->cu_stream, &e->base, __func__));
    scope_st = CUABI__CU(drv, cuGraphLaunch, e->cu_exec, s->cu_stream);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_exec_upload(cuabi_graph_exec *exec, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__graph_exec *e;
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__TRY_SCOPE(exec_target(&scope, &e, &s, &drv, exec, stream, __func__));
    scope_st = CUABI__CU(drv, cuGraphUpload, e->cu_exec, s->cu_stream);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* -------------------------------------------------------------- updates */

static const char *update_reason(CUgraphExecUpdateResult r)
{
    switch (r) {
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
        return "the topology differs (nodes or edges added, removed or moved)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
        return "a node's kind differs";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
        return "a kernel node runs another kernel";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
        return "a node's parameters changed in a way an update cannot apply";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
        return "a node cannot be updated";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
        return "a kernel node runs another kernel in a way an update cannot apply";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
        return "a kernel node's attributes changed in a way an update cannot apply";
    default:
        return "the driver refused the update";
    }
}

/* Index and description of a node of the update's graph (else of the
 * executable's own graph). Both locks are not held together: `g` is. */
static int64_t update_node(char *buf, size_t size, cuabi__graph *g, CUgraphNode n,
                           const cuabi__driver *drv, const char *caller)
{
    buf[0] = '\0';
    if (!n)
        return -1;
    size_t at = cuabi__graph_find(g, n);
    if (at == SIZE_MAX) {
        (void)cuabi__graph_sync(g, drv, caller);
        at = cuabi__graph_find(g, n);
    }
    cuabi__graph_describe(buf, size, g, at, drv);
    return at == SIZE_MAX ? -1 : (int64_t)at;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_exec_update(cuabi_graph_exec *exec, cuabi_graph *graph,
                                                   cuabi_graph_update_info *info)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__graph_exec *e;
    cuabi__graph *g;
    const cuabi__driver *drv;
    CUABI__CHECK_OPTS(info, "cuabi_graph_update_info", CUABI_GRAPH_UPDATE_INFO_VERSION, true);
    if (info) {
        info->result = CUABI_GRAPH_UPDATE_SUCCESS;
        info->node_index = info->from_node_index = -1;
        info->node_type = -1;
    }
    CUABI__GET(e, exec, GRAPH_EXEC);
    CUABI__GET(g, graph, GRAPH);
    CUABI__CHECK_ARG(!g->parent, "%s: the graph is a body of conditional node %zu; update from "
                     "the graph that holds that node", __func__, g->parent_rec);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    if (e->device)
        CUABI__TRY_SCOPE(cuabi__device_enter(&scope, e->device, drv));
    cuabi__graph_lock(g);
    CUgraphExecUpdateResultInfo ri;
    memset(&ri, 0, sizeof ri);
    cuabi_status st = CUABI__CU(drv, cuGraphExecUpdate, e->cu_exec, g->cu_graph, &ri);
    if (st != CUABI_SUCCESS && ri.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        int cu = cuabi_last_error()->cu_result;
        char to[160], from[160];
        int64_t ti = update_node(to, sizeof to, g, ri.errorNode, drv, __func__);
        int64_t fi = update_node(from, sizeof from, g, ri.errorFromNode, drv, __func__);
        if (info) {
            info->result = (int)ri.result;
            info->node_index = ti;
            info->from_node_index = fi;
            info->node_type = ti >= 0 ? g->nodes[ti].type : -1;
        }
        if (fi >= 0)
            st = cuabi__error(CUABI_ERROR_GRAPH_UPDATE, "%s: cannot update the executable: %s, "
                              "at the edge %s -> %s; the executable is unchanged", __func__,
                              update_reason(ri.result), from, to);
        else
            st = cuabi__error(CUABI_ERROR_GRAPH_UPDATE, "%s: cannot update the executable: %s%s%s;"
                              " the executable is unchanged", __func__, update_reason(ri.result),
                              to[0] ? ", at " : "", to);
        cuabi__error_set_cu(cu);
    } else if (st != CUABI_SUCCESS && info) {
        info->result = CUABI_GRAPH_UPDATE_ERROR;
    }
    cuabi__graph_unlock(g);
    if (st != CUABI_SUCCESS)
        CUABI__SCOPE_RETURN(st);
    pthread_mutex_lock(&e->lock);
    cuabi__graph *old = e->current;
    cuabi__object_retain(&g->base);
    e->current = g;
    /* Every node now runs g's parameters: per-node updates are gone. */
    for (size_t i = 0; i < e->nover; i++)
        cuabi__keep_release(&e->over[i].keep);
    e->nover = 0;
    pthread_mutex_unlock(&e->lock);
    if (old)
        cuabi__object_release(&old->base);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* The override entry of a node (made when missing); lock held. */
static node_override *override_of(cuabi__graph_exec *e, CUgraphNode n, bool make,
                                  const char *caller)
{
    for (size_t i = 0; i < e->nover; i++)
        if (e->over[i].node == n)
            return &e->over[i];
    if (!make)
        return NULL;
    if (e->nover == e->cap_over) {
        size_t cap = e->cap_over ? 2 * e->cap_over : 4;
        node_override *o = cuabi__realloc_in(e->over, cap * sizeof *o, caller);
        if (!o)
            return NULL;
        e->over = o;
        e->cap_over = cap;
    }
    node_override *o = &e->over[e->nover++];
    memset(o, 0, sizeof *o);
    o->node = n;
    return o;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_exec_update_kernel(cuabi_graph_exec *exec,
                                                          cuabi_graph_node *node,
                                                          cuabi_argpack *pack,
                                                          const cuabi_launch_config *config)
{
    cuabi__graph_exec *e;
    cuabi__graph_node *n;
    const cuabi__driver *drv;
    CUABI__GET(e, exec, GRAPH_EXEC);
    CUABI__GET(n, node, GRAPH_NODE);
    CUABI__CHECK_ARG(n->graph->shared == e->graph->shared, "%s: node %zu is not from the graph "
                     "the executable was instantiated from", __func__, n->index);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    /* What the graph knows of the node, read under its lock. */
    cuabi__graph_lock(n->graph);
    cuabi_status live = cuabi__graph_node_live(n, __func__);
    cuabi__node_rec r;
    memset(&r, 0, sizeof r);
    if (live == CUABI_SUCCESS)
        r = n->graph->nodes[n->index];
    cuabi__graph_unlock(n->graph);
    CUABI__TRY(live);
    CUABI__CHECK_ARG(r.kernel, "%s: node %zu was not made by cuabi_graph_add_kernel (only those "
                     "can be updated here; update captured nodes with cuabi_graph_exec_update)",
                     __func__, n->index);
    char what[64];
    snprintf(what, sizeof what, "kernel node %zu", n->index);
    pthread_mutex_lock(&e->lock);
    node_override *o = override_of(e, r.cu_node, false, __func__);
    const cuabi_launch_config *base = o ? &o->config : &r.config;
    cuabi_launch_config c;
    cuabi__graph_config_copy(&c, config ? config : base);
    c.device = CUABI__HANDLE(r.device, cuabi_device);
    cuabi_status st = cuabi__graph_config_on(config, r.device, what, __func__);
    bool known_version = config && config->version >= 1 &&
                         config->version <= CUABI_LAUNCH_CONFIG_VERSION;
    if (st == CUABI_SUCCESS && known_version && !cuabi__graph_same_attrs(config, base))
        st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: %s: an executable's kernel node keeps "
                          "its attributes (clusters, cooperative, ...); change them in the graph "
                          "(cuabi_graph_kernel_node_set) and update the whole executable",
                          __func__, what);
    cuabi__kernel_params kp;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* the caller's comes back */
    if (st == CUABI_SUCCESS)
        st = cuabi__graph_kernel_params(&scope, &kp, CUABI__HANDLE(r.kernel, cuabi_kernel), pack,
                                        &c, __func__);
    if (st == CUABI_SUCCESS && kp.device != r.device)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is on device %d; the "
                          "configuration names device %d", __func__, what, r.device->ordinal,
                          kp.device->ordinal);
    cuabi__keep keep = { 0 };
    if (st == CUABI_SUCCESS)
        st = cuabi__keep_pack(&keep, kp.pack, what, __func__);
    if (st == CUABI_SUCCESS && !o) {
        o = override_of(e, r.cu_node, true, __func__);
        if (!o)
            st = CUABI_ERROR_OUT_OF_MEMORY;
    }
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuGraphExecKernelNodeSetParams, e->cu_exec, r.cu_node, &kp.p);
    if (st == CUABI_SUCCESS) {
        cuabi__keep_release(&o->keep);
        o->keep = keep;
        cuabi__graph_config_copy(&o->config, &c);
    } else {
        cuabi__keep_release(&keep);
        if (o && !o->keep.count && o->config.version == 0)
            e->nover--; /* a new, unused entry (it is the last one) */
    }
    pthread_mutex_unlock(&e->lock);
    return cuabi__context_end(&scope, st);
}

/* -------------------------------------------------------------- queries */

CUABI_EXTERN(cuabi_status) cuabi_graph_exec_raw(uintptr_t *out, cuabi_graph_exec *exec)
{
    cuabi__graph_exec *e;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(e, exec, GRAPH_EXEC);
    *out = (uintptr_t)e->cu_exec;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_exec_device(cuabi_device **out, cuabi_graph_exec *exec)
{
    cuabi__graph_exec *e;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(e, exec, GRAPH_EXEC);
    if (e->device)
        *out = CUABI__HANDLE(e->device, cuabi_device);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_exec_graph(cuabi_graph **out, cuabi_graph_exec *exec)
{
    cuabi__graph_exec *e;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(e, exec, GRAPH_EXEC);
    *out = CUABI__HANDLE(e->graph, cuabi_graph);
    return CUABI_SUCCESS;
}
