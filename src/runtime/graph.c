/* Graphs: the handle, its node records, edges, Graphviz output, and what a
 * graph keeps alive. Node kinds live in graph_nodes.c, executables in
 * graph_exec.c, stream capture in graph_capture.c.
 *
 * A graph's records mirror the driver's node list: cuabi appends one for
 * each node it adds, and imports the nodes a capture (or a caller holding
 * the raw CUgraph) made when the list is next read. A node handle is the
 * graph plus a record index; the record points back at the live handle
 * weakly, so one node has one handle value while any reference lives. */
#include "platform/release.h"
#include "runtime/graph.h"
#include "util/checked.h"
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ----------------------------------------------------------- keep lists */

/* Entries already among the last few are not added again: a capture that
 * launches the same kernel on the same buffers 1000 times keeps each once. */
#define KEEP_DEDUP_WINDOW 16

CUABI__HOT
static cuabi_status keep_push(cuabi__keep *k, unsigned char kind, void *ptr, const char *caller)
{
    size_t from = k->count > KEEP_DEDUP_WINDOW ? k->count - KEEP_DEDUP_WINDOW : 0;
    for (size_t i = from; i < k->count; i++)
        if (k->items[i].ptr == ptr && k->items[i].kind == kind && kind != CUABI__KEEP_DEFERRED_FREE &&
            kind != CUABI__KEEP_HOST_CALL)
            return CUABI_SUCCESS;
    if (k->count == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 8;
        cuabi__keep_item *items = cuabi__realloc_in(k->items, cap * sizeof *items, caller);
        if (!items)
            return CUABI_ERROR_OUT_OF_MEMORY;
        k->items = items;
        k->cap = cap;
    }
    k->items[k->count].kind = kind;
    k->items[k->count].ptr = ptr;
    k->count++;
    return CUABI_SUCCESS;
}

CUABI__HOT cuabi_status cuabi__keep_object(cuabi__keep *k, cuabi__object *o, const char *caller)
{
    size_t before = k->count;
    CUABI__TRY(keep_push(k, CUABI__KEEP_OBJECT, o, caller));
    if (k->count != before)
        cuabi__object_retain(o);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__keep_buffer(cuabi__keep *k, cuabi__buffer *b, const char *caller)
{
    size_t before = k->count;
    CUABI__TRY(keep_push(k, CUABI__KEEP_BUFFER_MEM, b, caller));
    if (k->count != before)
        cuabi__buffer_mem_retain(b);
    return CUABI_SUCCESS;
}

cuabi_status cuabi__keep_pack(cuabi__keep *k, const cuabi__argpack *p, const char *what,
                              const char *caller)
{
    if (!p->nrefs)
        return CUABI_SUCCESS;
    for (size_t s = 0; s < p->nslots; s++) {
        int ref = p->ref_kind[s];
        if (!ref)
            continue;
        const char *kind = cuabi__ref_name(ref);
        void *obj;
        const void *h = (const void *)(uintptr_t)p->ref_handle[s];
        if (!h)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s: argument %zu (%s) was "
                                "never set", caller, what, s, kind);
        cuabi_status st = cuabi__handle_get(h, cuabi__ref_type(ref), &obj, caller);
        if (st != CUABI_SUCCESS)
            return cuabi__error(CUABI_ERROR_INVALID_HANDLE, "%s: %s: argument %zu holds a %s "
                                "that was released (or is not a cuabi_%s); set it again",
                                caller, what, s, kind, kind);
        st = ref == CUABI__REF_BUFFER ? cuabi__keep_buffer(k, obj, caller)
                                      : cuabi__keep_object(k, obj, caller);
        CUABI__TRY(st);
    }
    return CUABI_SUCCESS;
}

cuabi_status cuabi__keep_deferred_free(cuabi__keep *k, cuabi__buffer *b, const char *caller)
{
    return keep_push(k, CUABI__KEEP_DEFERRED_FREE, b, caller);
}

cuabi_status cuabi__keep_host_call(cuabi__keep *k, cuabi__host_call *h, const char *caller)
{
    return keep_push(k, CUABI__KEEP_HOST_CALL, h, caller);
}

size_t cuabi__keep_mark(const cuabi__keep *k)
{
    return k->count;
}

static void keep_drop(cuabi__keep_item *it)
{
    switch (it->kind) {
    case CUABI__KEEP_OBJECT:
        cuabi__object_release(it->ptr);
        break;
    case CUABI__KEEP_BUFFER_MEM:
        (void)cuabi__buffer_mem_release(it->ptr, "cuabi_graph_release");
        break;
    case CUABI__KEEP_DEFERRED_FREE:
        /* Another capture on the buffer's stream takes it over in turn. */
        if (!(cuabi__capturing() && cuabi__capture_defer_free(it->ptr)))
            (void)cuabi__buffer_mem_free(it->ptr, "cuabi_graph_release");
        break;
    case CUABI__KEEP_HOST_CALL: {
        /* No execution can call it any more: the payload goes, on this
         * (releasing) thread, never the driver's callback thread. */
        cuabi__host_call *h = it->ptr;
        if (h->release)
            h->release(h->payload);
        cuabi__free(h);
        break;
    }
    }
}

CUABI__HOT void cuabi__keep_rollback(cuabi__keep *k, size_t mark)
{
    while (k->count > mark)
        keep_drop(&k->items[--k->count]);
}

CUABI__HOT void cuabi__keep_release(cuabi__keep *k)
{
    /* Newest first: a view goes before the buffer memory it was made on. */
    cuabi__keep_rollback(k, 0);
    cuabi__free(k->items);
    k->items = NULL;
    k->cap = 0;
}

CUABI__HOT cuabi_status cuabi__keep_move(cuabi__keep *dst, cuabi__keep *src, const char *caller)
{
    if (!src->count)
        return CUABI_SUCCESS;
    if (!dst->count) {
        cuabi__keep tmp = *dst;
        *dst = *src;
        *src = tmp;
        return CUABI_SUCCESS;
    }
    size_t need = dst->count + src->count;
    if (need > dst->cap) {
        cuabi__keep_item *items = cuabi__realloc_in(dst->items, need * sizeof *items, caller);
        if (!items)
            return CUABI_ERROR_OUT_OF_MEMORY;
        dst->items = items;
        dst->cap = need;
    }
    memcpy(dst->items + dst->count, src->items, src->count * sizeof *src->items);
    dst->count = need;
    src->count = 0;
    return CUABI_SUCCESS;
}

/* ---------------------------------------------------------- the driver */

CUABI__HOT cuabi_status cuabi__graph_driver(const cuabi__driver **drv, const char *caller)
{
    CUABI__TRY(cuabi__driver_get_for(drv, caller));
    int v = cuabi__driver_info()->version;
    if (CUABI__UNLIKELY(v < 12030))
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: CUDA graphs in cuabi need a CUDA "
                            "12.3 driver or newer; the loaded driver is CUDA %d.%d", caller,
                            v / 1000, v % 1000 / 10);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ the handle */

CUABI__HOT void cuabi__graph_lock(cuabi__graph *g)
{
    pthread_mutex_lock(&g->shared->lock);
}

CUABI__HOT void cuabi__graph_unlock(cuabi__graph *g)
{
    pthread_mutex_unlock(&g->shared->lock);
}

static void shared_free(cuabi__graph_shared *sh)
{
    cuabi__keep_release(&sh->keep);
    if (sh->device)
        cuabi__object_release(&sh->device->base);
    cuabi__free(sh->conds);
    pthread_mutex_destroy(&sh->lock);
    cuabi__free(sh);
}

static void records_free(cuabi__graph *g)
{
    for (size_t i = 0; i < g->nnodes; i++) {
        cuabi__free(g->nodes[i].bodies);
        cuabi__free(g->nodes[i].body_handles);
    }
    cuabi__free(g->nodes);
    cuabi__free(g->map_keys);
    cuabi__free(g->map_vals);
}

static void graph_destroy(cuabi__object *o)
{
    cuabi__graph *g = (cuabi__graph *)o;
    if (g->parent) {
        /* A body graph: its CUgraph belongs to the conditional node. */
        cuabi__graph *p = g->parent;
        cuabi__graph_lock(p);
        cuabi__node_rec *r = &p->nodes[g->parent_rec];
        if (r->body_handles && r->body_handles[g->body_index] == g)
            r->body_handles[g->body_index] = NULL;
        cuabi__graph_unlock(p);
        records_free(g);
        cuabi__free(g);
        cuabi__object_release(&p->base);
        return;
    }
    const cuabi__driver *drv;
    if (g->cu_graph && cuabi__driver_get(&drv) == CUABI_SUCCESS && drv->cuGraphDestroy)
        CUABI__CU_RELEASE(drv, cuGraphDestroy, g->cu_graph);
    records_free(g);
    /* After the CUgraph: nothing can run the work any more. */
    shared_free(g->shared);
    cuabi__free(g);
}

static cuabi__graph_shared *shared_new(const char *caller)
{
    cuabi__graph_shared *sh = cuabi__calloc_in(1, sizeof *sh, caller);
    if (sh && pthread_mutex_init(&sh->lock, NULL) != 0) {
        cuabi__free(sh);
        cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: cannot create a mutex", caller);
        return NULL;
    }
    return sh;
}

CUABI__HOT cuabi_status cuabi__graph_wrap(cuabi__graph **out, CUgraph cg, const char *caller)
{
    cuabi__graph *g = cuabi__calloc_in(1, sizeof *g, caller);
    if (!g)
        return CUABI_ERROR_OUT_OF_MEMORY;
    g->shared = shared_new(caller);
    if (!g->shared) {
        cuabi__free(g);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    cuabi_status st = cuabi__handle_register(&g->base, CUABI__T_GRAPH, graph_destroy);
    if (st != CUABI_SUCCESS) {
        shared_free(g->shared);
        cuabi__free(g);
        return st;
    }
    g->cu_graph = cg;
    *out = g;
    return CUABI_SUCCESS;
}

/* A handle for body `b` of conditional record `rec` of `parent` (lock held). */
static cuabi_status body_handle(cuabi_graph **out, cuabi__graph *parent, size_t rec, unsigned b,
                                const char *caller)
{
    cuabi__node_rec *r = &parent->nodes[rec];
    cuabi__graph *g = r->body_handles[b];
    if (g && cuabi__object_try_retain(&g->base)) {
        *out = CUABI__HANDLE(g, cuabi_graph);
        return CUABI_SUCCESS;
    }
    g = cuabi__calloc_in(1, sizeof *g, caller);
    if (!g)
        return CUABI_ERROR_OUT_OF_MEMORY;
    g->cu_graph = r->bodies[b];
    g->parent = parent;
    g->parent_rec = rec;
    g->body_index = b;
    g->shared = parent->shared;
    cuabi_status st = cuabi__handle_register(&g->base, CUABI__T_GRAPH, graph_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(g);
        return st;
    }
    cuabi__object_retain(&parent->base);
    g->body_device = r->device;
    r->body_handles[b] = g;
    *out = CUABI__HANDLE(g, cuabi_graph);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_create(cuabi_graph **out)
{
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    CUgraph cg;
    CUABI__TRY(CUABI__CU(drv, cuGraphCreate, &cg, 0));
    cuabi__graph *g;
    cuabi_status st = cuabi__graph_wrap(&g, cg, __func__);
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuGraphDestroy, cg);
        return st;
    }
    *out = CUABI__HANDLE(g, cuabi_graph);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_raw(uintptr_t *out, cuabi_graph *graph)
{
    cuabi__graph *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(g, graph, GRAPH);
    *out = (uintptr_t)g->cu_graph;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_device(cuabi_device **out, cuabi_graph *graph)
{
    cuabi__graph *g;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(g, graph, GRAPH);
    cuabi__graph_lock(g);
    if (g->shared->device && !g->shared->mixed)
        *out = CUABI__HANDLE(g->shared->device, cuabi_device);
    cuabi__graph_unlock(g);
    return CUABI_SUCCESS;
}

CUABI__HOT cuabi_status cuabi__graph_use_device(cuabi__graph *g, cuabi__device *dev)
{
    cuabi__graph_shared *sh = g->shared;
    if (!sh->device) {
        cuabi__object_retain(&dev->base);
        sh->device = dev;
    } else if (sh->device != dev) {
        sh->mixed = true;
    }
    return CUABI_SUCCESS;
}

cuabi__device *cuabi__graph_cond_device(cuabi__graph *g, uint64_t handle)
{
    cuabi__graph_shared *sh = g->shared;
    for (size_t i = 0; i < sh->nconds; i++)
        if (sh->conds[i].handle == handle)
            return sh->conds[i].device;
    return NULL;
}

/* ------------------------------------------------------------- records */

static size_t hash_node(CUgraphNode n, size_t cap)
{
    uint64_t v = (uint64_t)(uintptr_t)n;
    v ^= v >> 33;
    v *= UINT64_C(0xff51afd7ed558ccd);
    v ^= v >> 33;
    return (size_t)v & (cap - 1);
}

static void map_put(CUgraphNode *keys, size_t *vals, size_t cap, CUgraphNode n, size_t index)
{
    size_t i = hash_node(n, cap);
    while (vals[i])
        i = (i + 1) & (cap - 1);
    keys[i] = n;
    vals[i] = index + 1;
}

size_t cuabi__graph_find(const cuabi__graph *g, CUgraphNode n)
{
    if (!g->map_cap)
        return SIZE_MAX;
    for (size_t i = hash_node(n, g->map_cap); g->map_vals[i]; i = (i + 1) & (g->map_cap - 1))
        if (g->map_keys[i] == n)
            return g->map_vals[i] - 1;
    return SIZE_MAX;
}

/* Room for one more record and its map entry (kept at most half full). */
cuabi_status cuabi__graph_reserve(cuabi__graph *g, const char *caller)
{
    if (g->nnodes == g->cap_nodes) {
        size_t cap = g->cap_nodes ? 2 * g->cap_nodes : 16;
        cuabi__node_rec *nodes = cuabi__realloc_in(g->nodes, cap * sizeof *nodes, caller);
        if (!nodes)
            return CUABI_ERROR_OUT_OF_MEMORY;
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    if (2 * (g->nnodes + 1) > g->map_cap) {
        size_t cap = g->map_cap ? 2 * g->map_cap : 32;
        CUgraphNode *keys = cuabi__calloc_in(cap, sizeof *keys, caller);
        size_t *vals = keys ? cuabi__calloc_in(cap, sizeof *vals, caller) : NULL;
        if (!vals) {
            cuabi__free(keys);
            return CUABI_ERROR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < g->nnodes; i++)
            map_put(keys, vals, cap, g->nodes[i].cu_node, i);
        cuabi__free(g->map_keys);
        cuabi__free(g->map_vals);
        g->map_keys = keys;
        g->map_vals = vals;
        g->map_cap = cap;
    }
    return CUABI_SUCCESS;
}

cuabi_status cuabi__graph_record(cuabi__graph *g, CUgraphNode n, int type, size_t *index,
                                 const char *caller)
{
    CUABI__TRY(cuabi__graph_reserve(g, caller));
    cuabi__node_rec *r = &g->nodes[g->nnodes];
    memset(r, 0, sizeof *r);
    r->cu_node = n;
    r->type = type;
    map_put(g->map_keys, g->map_vals, g->map_cap, n, g->nnodes);
    *index = g->nnodes++;
    return CUABI_SUCCESS;
}

/* The driver's nodes of a graph: a malloc'ed array (NULL when empty). */
static cuabi_status driver_nodes(CUgraphNode **out, size_t *n, CUgraph cg,
                                 const cuabi__driver *drv, const char *caller)
{
    *out = NULL;
    *n = 0;
    size_t count = 0;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuGraphGetNodes, cg, NULL, &count));
    if (!count)
        return CUABI_SUCCESS;
    CUgraphNode *nodes = cuabi__malloc_in(count * sizeof *nodes, caller);
    if (!nodes)
        return CUABI_ERROR_OUT_OF_MEMORY;
    size_t got = count;
    cuabi_status st = CUABI__CU_IN(caller, drv, cuGraphGetNodes, cg, nodes, &got);
    if (st != CUABI_SUCCESS) {
        cuabi__free(nodes);
        return st;
    }
    *out = nodes;
    *n = got < count ? got : count;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__graph_sync(cuabi__graph *g, const cuabi__driver *drv, const char *caller)
{
    /* Nodes only come (cuabi removes none): equal counts, nothing new. */
    size_t count = 0;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuGraphGetNodes, g->cu_graph, NULL, &count));
    if (count == g->nnodes)
        return CUABI_SUCCESS;
    CUgraphNode *nodes;
    size_t n;
    CUABI__TRY(driver_nodes(&nodes, &n, g->cu_graph, drv, caller));
    cuabi_status st = CUABI_SUCCESS;
    for (size_t i = 0; i < n && st == CUABI_SUCCESS; i++) {
        if (cuabi__graph_find(g, nodes[i]) != SIZE_MAX)
            continue;
        CUgraphNodeType type;
        size_t index;
        st = CUABI__CU_IN(caller, drv, cuGraphNodeGetType, nodes[i], &type);
        if (st == CUABI_SUCCESS)
            st = cuabi__graph_record(g, nodes[i], (int)type, &index, caller);
    }
    cuabi__free(nodes);
    return st;
}

/* ---------------------------------------------------------- node handles */

void cuabi__graph_node_destroy(cuabi__object *o)
{
    cuabi__graph_node *n = (cuabi__graph_node *)o;
    cuabi__graph *g = n->graph;
    cuabi__graph_lock(g);
    if (n->index < g->nnodes && g->nodes[n->index].handle == n)
        g->nodes[n->index].handle = NULL;
    cuabi__graph_unlock(g);
    cuabi__free(n);
    cuabi__object_release(&g->base);
}

cuabi_status cuabi__graph_node_handle(cuabi_graph_node **out, cuabi__graph *g, size_t index,
                                      const char *caller)
{
    cuabi__node_rec *r = &g->nodes[index];
    cuabi__graph_node *n = r->handle;
    if (n && cuabi__object_try_retain(&n->base)) {
        *out = CUABI__HANDLE(n, cuabi_graph_node);
        return CUABI_SUCCESS;
    }
    n = cuabi__calloc_in(1, sizeof *n, caller);
    if (!n)
        return CUABI_ERROR_OUT_OF_MEMORY;
    n->graph = g;
    n->index = index;
    cuabi_status st = cuabi__handle_register(&n->base, CUABI__T_GRAPH_NODE, cuabi__graph_node_destroy);
    if (st != CUABI_SUCCESS) {
        cuabi__free(n);
        return st;
    }
    cuabi__object_retain(&g->base);
    r->handle = n;
    *out = CUABI__HANDLE(n, cuabi_graph_node);
    return CUABI_SUCCESS;
}

static const char *type_name(int type)
{
    static const char *const names[] = {
        "kernel", "memcpy", "memset", "host", "child graph", "empty", "event wait",
        "event record", "semaphore signal", "semaphore wait", "memory allocation",
        "memory free", "batch memory operation", "conditional",
    };
    return type >= 0 && type < (int)(sizeof names / sizeof *names) ? names[type] : "unknown";
}

void cuabi__graph_describe(char *buf, size_t size, cuabi__graph *g, size_t index,
                           const cuabi__driver *drv)
{
    if (index >= g->nnodes) {
        snprintf(buf, size, "a node unknown to cuabi");
        return;
    }
    const cuabi__node_rec *r = &g->nodes[index];
    const char *name = r->kernel ? r->kernel->name : NULL;
    if (!name && r->type == CU_GRAPH_NODE_TYPE_KERNEL && drv->cuGraphKernelNodeGetParams &&
        drv->cuFuncGetName) {
        /* A captured kernel node: ask the driver for the function's name. */
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (drv->cuGraphKernelNodeGetParams(r->cu_node, &p) == CUDA_SUCCESS && p.func)
            drv->cuFuncGetName(&name, p.func);
    }
    if (name)
        snprintf(buf, size, "%s node %zu (%s)", type_name(r->type), index, name);
    else
        snprintf(buf, size, "%s node %zu", type_name(r->type), index);
}

/* A live node of `g`: the node object of a handle, checked. */
static cuabi_status node_of(cuabi__graph_node **out, cuabi__graph *g, cuabi_graph_node *node,
                            const char *what, size_t i, const char *caller)
{
    void *obj;
    cuabi_status st = cuabi__handle_get(node, CUABI__T_GRAPH_NODE, &obj, caller);
    if (st != CUABI_SUCCESS)
        return cuabi__error(st, "%s: %s[%zu] is not a live cuabi_graph_node (NULL, released or "
                            "another type)", caller, what, i);
    cuabi__graph_node *n = obj;
    if (n->graph != g)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s[%zu] belongs to another graph",
                            caller, what, i);
    if (n->index == CUABI__NODE_GONE)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s[%zu] was destroyed "
                            "(cuabi_graph_node_destroy)", caller, what, i);
    *out = n;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__graph_deps(CUgraphNode **out, cuabi__graph *g, cuabi_graph_node *const *deps,
                               size_t n, CUgraphNode *local, size_t nlocal, const char *caller)
{
    *out = local;
    if (!n)
        return CUABI_SUCCESS;
    if (!deps)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: dependencies is NULL but "
                            "num_dependencies is %zu", caller, n);
    size_t bytes;
    if (!cuabi__size_mul(&bytes, n, sizeof(CUgraphNode)))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: num_dependencies %zu is too large",
                            caller, n);
    CUgraphNode *arr = n <= nlocal ? local : cuabi__malloc_in(bytes, caller);
    if (!arr)
        return CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        cuabi__graph_node *node;
        cuabi_status st = node_of(&node, g, deps[i], "dependencies", i, caller);
        for (size_t j = 0; st == CUABI_SUCCESS && j < i; j++)
            if (arr[j] == g->nodes[node->index].cu_node)
                st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: node %zu is given twice "
                                  "as a dependency (dependencies[%zu] and [%zu])", caller,
                                  node->index, j, i);
        if (st != CUABI_SUCCESS) {
            if (arr != local)
                cuabi__free(arr);
            return st;
        }
        arr[i] = g->nodes[node->index].cu_node;
    }
    *out = arr;
    return CUABI_SUCCESS;
}

/* -------------------------------------------------------------- queries */

CUABI_EXTERN(cuabi_status) cuabi_graph_node_count(size_t *out, cuabi_graph *graph)
{
    cuabi__graph *g;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(g, graph, GRAPH);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    cuabi__graph_lock(g);
    cuabi_status st = cuabi__graph_sync(g, drv, __func__);
    *out = g->nnodes;
    cuabi__graph_unlock(g);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_at(cuabi_graph_node **out, cuabi_graph *graph,
                                               size_t index)
{
    cuabi__graph *g;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(g, graph, GRAPH);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    cuabi__graph_lock(g);
    cuabi_status st = cuabi__graph_sync(g, drv, __func__);
    if (st == CUABI_SUCCESS && index >= g->nnodes)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: index %zu is out of range (the "
                          "graph has %zu nodes)", __func__, index, g->nnodes);
    if (st == CUABI_SUCCESS)
        st = cuabi__graph_node_handle(out, g, index, __func__);
    cuabi__graph_unlock(g);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_type(cuabi_graph_node_kind *out, cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(n, node, GRAPH_NODE);
    cuabi__graph_lock(n->graph);
    cuabi_status st = cuabi__graph_node_live(n, __func__);
    if (st == CUABI_SUCCESS)
        *out = (cuabi_graph_node_kind)n->graph->nodes[n->index].type;
    cuabi__graph_unlock(n->graph);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_index(size_t *out, cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(n, node, GRAPH_NODE);
    cuabi__graph_lock(n->graph);
    cuabi_status st = cuabi__graph_node_live(n, __func__);
    if (st == CUABI_SUCCESS)
        *out = n->index;
    cuabi__graph_unlock(n->graph);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_graph(cuabi_graph **out, cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(n, node, GRAPH_NODE);
    *out = CUABI__HANDLE(n->graph, cuabi_graph);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_raw(uintptr_t *out, cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(n, node, GRAPH_NODE);
    cuabi__graph_lock(n->graph);
    cuabi_status st = cuabi__graph_node_live(n, __func__);
    if (st == CUABI_SUCCESS)
        *out = (uintptr_t)n->graph->nodes[n->index].cu_node;
    cuabi__graph_unlock(n->graph);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_body(cuabi_graph **out, cuabi_graph_node *node,
                                                 unsigned int index)
{
    cuabi__graph_node *n;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(n, node, GRAPH_NODE);
    cuabi__graph *g = n->graph;
    cuabi__graph_lock(g);
    cuabi_status st = cuabi__graph_node_live(n, __func__);
    if (st != CUABI_SUCCESS) {
        cuabi__graph_unlock(g);
        return st;
    }
    cuabi__node_rec *r = &g->nodes[n->index];
    if (!r->nbodies)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: node %zu is a %s node, not a "
                          "conditional node made by cuabi_graph_add_conditional", __func__,
                          n->index, type_name(r->type));
    else if (index >= r->nbodies)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: body %u is out of range (the "
                          "conditional node has %u)", __func__, index, r->nbodies);
    else
        st = body_handle(out, g, n->index, index, __func__);
    cuabi__graph_unlock(g);
    return st;
}

cuabi_status cuabi__graph_node_live(const cuabi__graph_node *n, const char *caller)
{
    if (CUABI__UNLIKELY(n->index == CUABI__NODE_GONE))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the node was destroyed "
                            "(cuabi_graph_node_destroy); its handle names no node", caller);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_is_valid(int *out, cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(n, node, GRAPH_NODE);
    cuabi__graph_lock(n->graph);
    *out = n->index != CUABI__NODE_GONE;
    cuabi__graph_unlock(n->graph);
    return CUABI_SUCCESS;
}

/* With the lock held: drop record `at` (its node is gone from the driver's
 * graph) and renumber the records after it, their live node handles and
 * the body graphs of conditional ones. Cannot fail. */
static void record_remove(cuabi__graph *g, size_t at)
{
    cuabi__free(g->nodes[at].bodies);
    cuabi__free(g->nodes[at].body_handles);
    memmove(&g->nodes[at], &g->nodes[at + 1], (g->nnodes - at - 1) * sizeof *g->nodes);
    g->nnodes--;
    for (size_t i = at; i < g->nnodes; i++) {
        cuabi__node_rec *r = &g->nodes[i];
        if (r->handle)
            r->handle->index = i;
        for (unsigned b = 0; b < r->nbodies; b++)
            if (r->body_handles && r->body_handles[b])
                r->body_handles[b]->parent_rec = i;
    }
    /* The map in place: cleared and refilled (its capacity stays enough). */
    memset(g->map_vals, 0, g->map_cap * sizeof *g->map_vals);
    for (size_t i = 0; i < g->nnodes; i++)
        map_put(g->map_keys, g->map_vals, g->map_cap, g->nodes[i].cu_node, i);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_destroy(cuabi_graph_node *node)
{
    cuabi__graph_node *n;
    const cuabi__driver *drv;
    CUABI__GET(n, node, GRAPH_NODE);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    cuabi__graph *g = n->graph;
    cuabi__graph_lock(g);
    if (n->index == CUABI__NODE_GONE) {
        cuabi__graph_unlock(g);
        return CUABI_SUCCESS;
    }
    size_t at = n->index;
    cuabi__node_rec *r = &g->nodes[at];
    cuabi_status st = CUABI_SUCCESS;
    for (unsigned b = 0; b < r->nbodies && st == CUABI_SUCCESS; b++)
        if (r->body_handles && r->body_handles[b])
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: conditional node %zu still has "
                              "a live handle of its body graph %u (or of a node in it); release "
                              "those first (the bodies go with the node)", __func__, at, b);
    /* CUDA's rule: a graph holding memory nodes keeps all its nodes and edges. */
    for (size_t i = 0; i < g->nnodes && st == CUABI_SUCCESS; i++)
        if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
            g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_FREE)
            st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the graph holds a memory %s node "
                              "(node %zu); CUDA does not delete nodes or edges of such a graph",
                              __func__, g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC
                                            ? "allocation" : "free", i);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_RELEASE_IN(__func__, drv, cuGraphDestroyNode, r->cu_node);
    if (st == CUABI_SUCCESS) {
        record_remove(g, at);
        n->index = CUABI__NODE_GONE;
    }
    cuabi__graph_unlock(g);
    return st;
}

/* ---------------------------------------------------------------- edges */

/* The dependencies (incoming = true) or dependents of a driver node, as a
 * malloc'ed array. */
static cuabi_status node_edges(CUgraphNode **out, size_t *n, CUgraphNode node, bool incoming,
                               const cuabi__driver *drv, const char *caller)
{
    *out = NULL;
    *n = 0;
    size_t count = 0;
    if (incoming)
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuGraphNodeGetDependencies, node, NULL, NULL, &count));
    else
        CUABI__TRY(CUABI__CU_IN(caller, drv, cuGraphNodeGetDependentNodes, node, NULL, NULL,
                                &count));
    if (!count)
        return CUABI_SUCCESS;
    CUgraphNode *arr = cuabi__malloc_in(count * sizeof *arr, caller);
    CUgraphEdgeData *data = arr ? cuabi__malloc_in(count * sizeof *data, caller) : NULL;
    if (!data) {
        cuabi__free(arr);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    size_t got = count;
    cuabi_status st =
        incoming ? CUABI__CU_IN(caller, drv, cuGraphNodeGetDependencies, node, arr, data, &got)
                 : CUABI__CU_IN(caller, drv, cuGraphNodeGetDependentNodes, node, arr, data, &got);
    cuabi__free(data);
    if (st != CUABI_SUCCESS) {
        cuabi__free(arr);
        return st;
    }
    *out = arr;
    *n = got < count ? got : count;
    return CUABI_SUCCESS;
}

static cuabi_status edge_count(size_t *out, cuabi_graph_node *node, bool incoming,
                               const char *caller)
{
    cuabi__graph_node *n;
    const cuabi__driver *drv;
    void *obj;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    *out = 0;
    CUABI__TRY(cuabi__handle_get(node, CUABI__T_GRAPH_NODE, &obj, caller));
    n = obj;
    CUABI__TRY(cuabi__graph_driver(&drv, caller));
    /* Under the lock: a destroy on another thread cannot free the node meanwhile. */
    cuabi__graph_lock(n->graph);
    CUgraphNode *arr = NULL;
    cuabi_status st = cuabi__graph_node_live(n, caller);
    if (st == CUABI_SUCCESS)
        st = node_edges(&arr, out, n->graph->nodes[n->index].cu_node, incoming, drv, caller);
    cuabi__graph_unlock(n->graph);
    cuabi__free(arr);
    return st;
}

static cuabi_status edge_at(cuabi_graph_node **out, cuabi_graph_node *node, size_t index,
                            bool incoming, const char *caller)
{
    cuabi__graph_node *n;
    const cuabi__driver *drv;
    void *obj;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    *out = NULL;
    CUABI__TRY(cuabi__handle_get(node, CUABI__T_GRAPH_NODE, &obj, caller));
    n = obj;
    CUABI__TRY(cuabi__graph_driver(&drv, caller));
    cuabi__graph *g = n->graph;
    cuabi__graph_lock(g);
    CUgraphNode *arr = NULL;
    size_t count = 0;
    cuabi_status st = cuabi__graph_node_live(n, caller);
    if (st == CUABI_SUCCESS)
        st = node_edges(&arr, &count, g->nodes[n->index].cu_node, incoming, drv, caller);
    if (st == CUABI_SUCCESS && index >= count)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: index %zu is out of range (node %zu "
                          "has %zu %s)", caller, index, n->index, count,
                          incoming ? "dependencies" : "dependents");
    size_t at = SIZE_MAX;
    if (st == CUABI_SUCCESS) {
        at = cuabi__graph_find(g, arr[index]);
        if (at == SIZE_MAX) {
            st = cuabi__graph_sync(g, drv, caller);
            at = cuabi__graph_find(g, arr[index]);
        }
        if (st == CUABI_SUCCESS && at == SIZE_MAX)
            st = cuabi__error(CUABI_ERROR_INTERNAL, "%s: the driver names a node that is not "
                              "in the graph", caller);
    }
    if (st == CUABI_SUCCESS)
        st = cuabi__graph_node_handle(out, g, at, caller);
    cuabi__graph_unlock(g);
    cuabi__free(arr);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_dependency_count(size_t *out, cuabi_graph_node *node)
{
    return edge_count(out, node, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_dependency(cuabi_graph_node **out,
                                                       cuabi_graph_node *node, size_t index)
{
    return edge_at(out, node, index, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_dependent_count(size_t *out, cuabi_graph_node *node)
{
    return edge_count(out, node, false, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_node_dependent(cuabi_graph_node **out,
                                                      cuabi_graph_node *node, size_t index)
{
    return edge_at(out, node, index, false, __func__);
}

/* The edges of one add/remove call, resolved to record indices. */
typedef struct edge_set {
    size_t *from, *to;
    size_t n;
} edge_set;

static cuabi_status edges_resolve(edge_set *e, cuabi__graph *g, cuabi_graph_node *const *from,
                                  cuabi_graph_node *const *to, size_t count, const char *caller)
{
    e->from = e->to = NULL;
    e->n = 0;
    if (!count)
        return CUABI_SUCCESS;
    if (!from || !to)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is NULL but count is %zu",
                            caller, from ? "to" : "from", count);
    size_t bytes;
    if (!cuabi__size_mul(&bytes, count, 2 * sizeof *e->from))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: count %zu is too large", caller,
                            count);
    e->from = cuabi__malloc_in(bytes, caller);
    if (!e->from)
        return CUABI_ERROR_OUT_OF_MEMORY;
    e->to = e->from + count;
    for (size_t i = 0; i < count; i++) {
        cuabi__graph_node *a, *b;
        cuabi_status st = node_of(&a, g, from[i], "from", i, caller);
        if (st == CUABI_SUCCESS)
            st = node_of(&b, g, to[i], "to", i, caller);
        if (st != CUABI_SUCCESS) {
            cuabi__free(e->from);
            e->from = NULL;
            return st;
        }
        e->from[i] = a->index;
        e->to[i] = b->index;
    }
    e->n = count;
    return CUABI_SUCCESS;
}

/* Whether the edge a -> b exists in the driver's graph. */
static cuabi_status edge_exists(bool *out, cuabi__graph *g, size_t a, size_t b,
                                const cuabi__driver *drv, const char *caller)
{
    CUgraphNode *arr;
    size_t n;
    *out = false;
    CUABI__TRY(node_edges(&arr, &n, g->nodes[a].cu_node, false, drv, caller));
    for (size_t i = 0; i < n; i++)
        if (arr[i] == g->nodes[b].cu_node)
            *out = true;
    cuabi__free(arr);
    return CUABI_SUCCESS;
}

/* Depth-first search from `start` along outgoing edges (the driver's plus
 * the first `pending` edges of e) for `goal`. On success *found says whether
 * it is reachable and prev[] holds the path back from goal. */
static cuabi_status reachable(bool *found, size_t *prev, cuabi__graph *g, size_t start,
                              size_t goal, const edge_set *e, size_t pending,
                              const cuabi__driver *drv, const char *caller)
{
    size_t n = g->nnodes;
    *found = false;
    size_t *stack = cuabi__malloc_in((n + 1) * sizeof *stack, caller);
    unsigned char *seen = stack ? cuabi__calloc_in(n, 1, caller) : NULL;
    if (!seen) {
        cuabi__free(stack);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    size_t top = 0;
    stack[top++] = start;
    seen[start] = 1;
    prev[start] = SIZE_MAX;
    cuabi_status st = CUABI_SUCCESS;
    while (top && !*found && st == CUABI_SUCCESS) {
        size_t v = stack[--top];
        CUgraphNode *out;
        size_t nout;
        st = node_edges(&out, &nout, g->nodes[v].cu_node, false, drv, caller);
        for (size_t i = 0; st == CUABI_SUCCESS && i < nout + pending; i++) {
            size_t w;
            if (i < nout) {
                w = cuabi__graph_find(g, out[i]);
                if (w == SIZE_MAX)
                    continue; /* not in this graph's records: cannot lead back */
            } else {
                if (e->from[i - nout] != v)
                    continue;
                w = e->to[i - nout];
            }
            if (seen[w])
                continue;
            seen[w] = 1;
            prev[w] = v;
            if (w == goal) {
                *found = true;
                break;
            }
            stack[top++] = w;
        }
        cuabi__free(out);
    }
    cuabi__free(seen);
    cuabi__free(stack);
    return st;
}

/* "node 0 -> node 1 -> node 2" along prev[] from start to goal. */
static void path_text(char *buf, size_t size, const size_t *prev, size_t goal)
{
    size_t chain[64], n = 0;
    for (size_t v = goal; v != SIZE_MAX && n < 64; v = prev[v])
        chain[n++] = v;
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = n; i-- > 0 && len < size;)
        len += (size_t)snprintf(buf + len, size - len, "%snode %zu", i + 1 == n ? "" : " -> ",
                                chain[i]);
}

/* Refuse an edge that exists, repeats one of the call, or closes a cycle. */
static cuabi_status check_new_edges(cuabi__graph *g, const edge_set *e, const cuabi__driver *drv,
                                    const char *caller)
{
    size_t *prev = cuabi__malloc_in((g->nnodes ? g->nnodes : 1) * sizeof *prev, caller);
    if (!prev)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi_status st = CUABI_SUCCESS;
    char a[160], b[160], path[512];
    for (size_t i = 0; i < e->n && st == CUABI_SUCCESS; i++) {
        size_t f = e->from[i], t = e->to[i];
        bool dup = false, cycle = f == t;
        for (size_t j = 0; j < i; j++)
            dup |= e->from[j] == f && e->to[j] == t;
        if (!dup && !cycle)
            st = edge_exists(&dup, g, f, t, drv, caller);
        if (st == CUABI_SUCCESS && !dup && !cycle)
            st = reachable(&cycle, prev, g, t, f, e, i, drv, caller);
        if (st != CUABI_SUCCESS || (!dup && !cycle))
            continue;
        cuabi__graph_describe(a, sizeof a, g, f, drv);
        cuabi__graph_describe(b, sizeof b, g, t, drv);
        if (f == t)
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: edge %zu: %s cannot depend on "
                              "itself (a cycle); nothing was added", caller, i, a);
        else if (dup)
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: edge %zu: %s -> %s already "
                              "exists; nothing was added", caller, i, a, b);
        else {
            path_text(path, sizeof path, prev, f);
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: edge %zu: %s -> %s would close "
                              "a cycle (the first already runs after the second: %s); nothing "
                              "was added", caller, i, a, b, path);
        }
    }
    cuabi__free(prev);
    return st;
}

static cuabi_status change_edges(cuabi_graph *graph, cuabi_graph_node *const *from,
                                 cuabi_graph_node *const *to, size_t count, bool add,
                                 const char *caller)
{
    cuabi__graph *g;
    const cuabi__driver *drv;
    void *obj;
    CUABI__TRY(cuabi__handle_get(graph, CUABI__T_GRAPH, &obj, caller));
    g = obj;
    CUABI__TRY(cuabi__graph_driver(&drv, caller));
    cuabi__graph_lock(g);
    edge_set e;
    cuabi_status st = cuabi__graph_sync(g, drv, caller);
    if (st == CUABI_SUCCESS)
        st = edges_resolve(&e, g, from, to, count, caller);
    if (st != CUABI_SUCCESS || !count) {
        cuabi__graph_unlock(g);
        return st;
    }
    CUgraphNode *cf = cuabi__malloc_in(2 * count * sizeof *cf, caller), *ct = cf + count;
    if (!cf)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; st == CUABI_SUCCESS && i < count; i++) {
        cf[i] = g->nodes[e.from[i]].cu_node;
        ct[i] = g->nodes[e.to[i]].cu_node;
    }
    if (st == CUABI_SUCCESS && add) {
        st = check_new_edges(g, &e, drv, caller);
        if (st == CUABI_SUCCESS)
            st = CUABI__CU_IN(caller, drv, cuGraphAddDependencies, g->cu_graph, cf, ct, NULL,
                              count);
    } else if (st == CUABI_SUCCESS) {
        char a[160], b[160];
        for (size_t i = 0; st == CUABI_SUCCESS && i < count; i++) {
            bool exists;
            st = edge_exists(&exists, g, e.from[i], e.to[i], drv, caller);
            if (st == CUABI_SUCCESS && !exists) {
                cuabi__graph_describe(a, sizeof a, g, e.from[i], drv);
                cuabi__graph_describe(b, sizeof b, g, e.to[i], drv);
                st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: edge %zu: %s -> %s does "
                                  "not exist; nothing was removed", caller, i, a, b);
            }
        }
        if (st == CUABI_SUCCESS)
            st = CUABI__CU_IN(caller, drv, cuGraphRemoveDependencies, g->cu_graph, cf, ct, NULL,
                              count);
    }
    cuabi__graph_unlock(g);
    cuabi__free(cf);
    cuabi__free(e.from);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_add_dependencies(cuabi_graph *graph,
                                                        cuabi_graph_node **from,
                                                        cuabi_graph_node **to, size_t count)
{
    return change_edges(graph, from, to, count, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_remove_dependencies(cuabi_graph *graph,
                                                           cuabi_graph_node **from,
                                                           cuabi_graph_node **to, size_t count)
{
    return change_edges(graph, from, to, count, false, __func__);
}

/* ------------------------------------------------------------- Graphviz */

CUABI_EXTERN(cuabi_status) cuabi_graph_debug_dot(cuabi_graph *graph, const char *path,
                                                 unsigned int flags)
{
    cuabi__graph *g;
    const cuabi__driver *drv;
    CUABI__GET(g, graph, GRAPH);
    CUABI__CHECK_ARG(path && *path, "%s: path is NULL or empty", __func__);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    return CUABI__CU(drv, cuGraphDebugDotPrint, g->cu_graph, path, flags);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_debug_dot_text(char *out, size_t *size, cuabi_graph *graph,
                                                      unsigned int flags)
{
    cuabi__graph *g;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(size, "%s: size is NULL", __func__);
    CUABI__CHECK_ARG(out || *size == 0, "%s: out is NULL but *size is %zu", __func__, *size);
    CUABI__GET(g, graph, GRAPH);
    CUABI__TRY(cuabi__graph_driver(&drv, __func__));
    /* The driver writes only files: print to a private temporary one. */
    const char *dir = getenv("TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/cuabi-graph-XXXXXX.dot", dir && *dir ? dir : "/tmp");
    int fd = mkstemps(path, 4);
    if (fd < 0)
        return cuabi__error(CUABI_ERROR_IO, "%s: cannot create a temporary file %s: %s", __func__,
                            path, strerror(errno));
    close(fd);
    cuabi_status st = CUABI__CU(drv, cuGraphDebugDotPrint, g->cu_graph, path, flags);
    void *text = NULL;
    size_t len = 0;
    if (st == CUABI_SUCCESS)
        st = cuabi__read_file(path, &text, &len, __func__);
    unlink(path);
    if (st != CUABI_SUCCESS)
        return st;
    size_t need = len + 1, cap = *size;
    *size = need;
    if (cap < need) {
        cuabi__free(text);
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL, "%s: the text needs %zu bytes, the "
                            "buffer has %zu", __func__, need, cap);
    }
    memcpy(out, text, need);
    cuabi__free(text);
    return CUABI_SUCCESS;
}
