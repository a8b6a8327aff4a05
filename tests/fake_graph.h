/* A fake of the driver's graph API for CPU-only tests: graphs of nodes with
 * incoming edges, executables that run on the host when launched (copies
 * and memsets move host memory, which is what fake device memory is; host
 * nodes call their function; kernel nodes call a test's host
 * implementation of the kernel, looked up by name), whole-graph and
 * per-node updates with the driver's rules (same topology, node kinds and
 * functions), conditional nodes (if / while / switch on a handle the test's
 * kernel implementations set with fake_cond_set), and stream capture per
 * fake stream: launches, async copies, memsets, pool allocations and frees
 * on a capturing stream become nodes; an event recorded on a capturing
 * stream lets another stream join; a synchronising call invalidates the
 * capture as the driver does.
 *
 * Graphs, executables and graph-allocated memory are heap objects counted
 * in fake_live_graphs / fake_live_execs (and fake_live_allocs), so leaks
 * show up in the counts and under LeakSanitizer.
 *
 * Use after fake_driver_install() + fake_memory_install() +
 * fake_driver_install_libraries(): fake_graph_install(). It wraps the
 * stream-ordered entry points those installed (chaining to them when the
 * stream is not being captured). */
#ifndef CUABI_FAKE_GRAPH_H
#define CUABI_FAKE_GRAPH_H

#include "fake_memory.h"

#define FG_ARGS 24 /* the fake kernels' 3 parameters of 8 bytes */

typedef struct fake_graph fake_graph;
typedef struct fake_gnode fake_gnode;

struct fake_gnode {
    fake_graph *graph;
    CUgraphNodeType type;
    fake_gnode **deps;
    size_t ndeps, cap_deps;
    fake_gnode *orig;                   /* executables: the node it was cloned from */
    /* kernel */
    CUfunction func;
    unsigned grid[3], block[3], shmem;
    unsigned char args[FG_ARGS];
    CUlaunchAttribute attrs[8];
    unsigned nattrs;
    /* memcpy / memset */
    void *dst;
    const void *src;
    size_t bytes;
    unsigned value, elem, count;
    /* host, events */
    CUhostFn fn;
    void *user;
    CUevent event;
    /* child graph (owned clone) and conditional bodies (owned) */
    fake_graph *child;
    CUgraphConditionalHandle cond;
    CUgraphConditionalNodeType ctype;
    unsigned nbodies;
    CUgraph bodies[4];
    /* memory nodes */
    CUdeviceptr mem;
};

struct fake_graph {
    fake_gnode **nodes;
    size_t n, cap;
    CUdeviceptr allocs[32];             /* memory its alloc nodes made; freed with it when */
    bool freed_inside[32];              /* a free node of the same graph frees it */
    size_t nallocs;
    bool is_exec;
};

static int fake_live_graphs, fake_live_execs, fake_graph_launches, fake_graph_uploads;
static int fake_foreign_frees;   /* captured frees of memory not allocated in the capture */
static int fake_kernel_runs;     /* kernel nodes and direct launches run */

/* ---- host implementations of fake kernels, by name */

typedef void (*fake_kernel_impl)(const unsigned char args[FG_ARGS], const unsigned grid[3]);
static struct { char name[128]; fake_kernel_impl fn; } fake_impls[8];
static int fake_nimpls;

static inline void fake_kernel_implement(const char *name, fake_kernel_impl fn)
{
    for (int i = 0; i < fake_nimpls; i++)
        if (strcmp(fake_impls[i].name, name) == 0) {
            fake_impls[i].fn = fn;
            return;
        }
    snprintf(fake_impls[fake_nimpls].name, 128, "%s", name);
    fake_impls[fake_nimpls++].fn = fn;
}

static const char *fake_func_name(CUfunction f)
{
    return ((fake_kernel *)((char *)f - 1))->name;
}

static void fake_run_kernel(CUfunction f, const unsigned char *args, const unsigned grid[3])
{
    fake_kernel_runs++;
    const char *name = fake_func_name(f);
    for (int i = 0; i < fake_nimpls; i++)
        if (strcmp(fake_impls[i].name, name) == 0)
            fake_impls[i].fn(args, grid);
}

/* ---- conditional handles: value and default per handle (1-based) */

static inline void fake_cond_set(CUgraphConditionalHandle h, unsigned v);

/* Host implementations the tests register for fake kernels (by name). */
/* out[0] += in[0] + ... + in[n-1] (int64): args (out, in, n). */
static inline void fake_impl_add_i64(const unsigned char args[FG_ARGS], const unsigned grid[3])
{
    (void)grid;
    int64_t *out, *in;
    uint64_t n;
    memcpy(&out, args, 8);
    memcpy(&in, args + 8, 8);
    memcpy(&n, args + 16, 8);
    for (uint64_t i = 0; i < n; i++)
        out[0] += in[i];
}

/* One iteration of a while loop: args (handle, counter pointer, limit);
 * counter++, and the loop goes on while counter < limit. */
static inline void fake_impl_count_loop(const unsigned char args[FG_ARGS], const unsigned grid[3])
{
    (void)grid;
    uint64_t h, limit;
    int64_t *counter;
    memcpy(&h, args, 8);
    memcpy(&counter, args + 8, 8);
    memcpy(&limit, args + 16, 8);
    ++*counter;
    fake_cond_set(h, *counter < (int64_t)limit);
}

static struct { unsigned value, dflt, flags; CUgraph graph; bool used; } fake_conds[64];
static int fake_nconds;

static inline void fake_cond_set(CUgraphConditionalHandle h, unsigned v)
{
    if (h >= 1 && h <= (CUgraphConditionalHandle)fake_nconds)
        fake_conds[h - 1].value = v;
}

/* ---- graphs */

/* Everything the fake driver allocates for graphs and captures stays listed
 * here until its destroy call runs: a destroy that a fault injection refuses
 * leaves the object with the driver (as a real one keeps it), not leaked. */
static void **fake_owned;
static size_t fake_nowned, fake_owned_cap;

static void fake_own(void *p)
{
    if (fake_nowned == fake_owned_cap) {
        fake_owned_cap = fake_owned_cap ? 2 * fake_owned_cap : 64;
        fake_owned = realloc(fake_owned, fake_owned_cap * sizeof *fake_owned);
    }
    fake_owned[fake_nowned++] = p;
}

static void fake_disown(void *p)
{
    for (size_t i = fake_nowned; i-- > 0;)
        if (fake_owned[i] == p) {
            fake_owned[i] = fake_owned[--fake_nowned];
            return;
        }
}

static fake_graph *fg_new(bool exec)
{
    fake_graph *g = calloc(1, sizeof *g);
    fake_own(g);
    g->is_exec = exec;
    if (exec)
        fake_live_execs++;
    else
        fake_live_graphs++;
    return g;
}

static void fg_free(fake_graph *g);

static void fg_node_free(fake_gnode *n)
{
    if (n->child)
        fg_free(n->child);
    for (unsigned i = 0; i < n->nbodies; i++)
        fg_free((fake_graph *)n->bodies[i]);
    free(n->deps);
    free(n);
}

static void fg_free(fake_graph *g)
{
    for (int i = 0; i < fake_nconds; i++)
        if (fake_conds[i].graph == (CUgraph)g)
            fake_conds[i].graph = NULL;
    for (size_t i = 0; i < g->n; i++)
        fg_node_free(g->nodes[i]);
    for (size_t i = 0; i < g->nallocs; i++)
        if (g->freed_inside[i]) {
            free((void *)(uintptr_t)g->allocs[i]);
            fake_live_allocs--;
        }
    if (g->is_exec)
        fake_live_execs--;
    else
        fake_live_graphs--;
    free(g->nodes);
    fake_disown(g);
    free(g);
}

static fake_gnode *fg_add(fake_graph *g, CUgraphNodeType type, const CUgraphNode *deps, size_t nd)
{
    fake_gnode *n = calloc(1, sizeof *n);
    n->graph = g;
    n->type = type;
    if (nd) {
        n->deps = malloc(nd * sizeof *n->deps);
        memcpy(n->deps, deps, nd * sizeof *n->deps);
        n->ndeps = n->cap_deps = nd;
    }
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->nodes = realloc(g->nodes, g->cap * sizeof *g->nodes);
    }
    g->nodes[g->n++] = n;
    return n;
}

static bool fg_has(fake_graph *g, fake_gnode *n)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i] == n)
            return true;
    return false;
}

static CUresult fg_check_deps(fake_graph *g, const CUgraphNode *deps, size_t nd)
{
    if (nd && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nd; i++) {
        if (!fg_has(g, (fake_gnode *)deps[i]))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static size_t fg_index(const fake_graph *g, const fake_gnode *n)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i] == n)
            return i;
    return SIZE_MAX;
}

/* A copy of g: nodes with their parameters and edges, children and bodies
 * cloned; `orig` links each copy to its original. */
static fake_graph *fg_clone(const fake_graph *g, bool exec)
{
    fake_graph *c = fg_new(exec);
    for (size_t i = 0; i < g->n; i++) {
        fake_gnode *o = g->nodes[i];
        fake_gnode *n = fg_add(c, o->type, NULL, 0);
        *n = *o;
        n->graph = c;
        n->deps = NULL;
        n->ndeps = n->cap_deps = 0;
        n->orig = o->orig ? o->orig : o;
        n->child = o->child ? fg_clone(o->child, false) : NULL;
        for (unsigned b = 0; b < o->nbodies; b++)
            n->bodies[b] = (CUgraph)fg_clone((fake_graph *)o->bodies[b], false);
    }
    for (size_t i = 0; i < g->n; i++) {
        fake_gnode *o = g->nodes[i], *n = c->nodes[i];
        if (o->ndeps) {
            n->deps = malloc(o->ndeps * sizeof *n->deps);
            n->ndeps = n->cap_deps = o->ndeps;
            for (size_t d = 0; d < o->ndeps; d++)
                n->deps[d] = c->nodes[fg_index(g, o->deps[d])];
        }
    }
    return c;
}

/* Topological order (Kahn); false when there is a cycle, with *bad set to
 * a node on it. */
static bool fg_order(const fake_graph *g, size_t *order, fake_gnode **bad)
{
    size_t n = g->n, done = 0;
    unsigned char *placed = calloc(n ? n : 1, 1);
    while (done < n) {
        bool progress = false;
        for (size_t i = 0; i < n; i++) {
            if (placed[i])
                continue;
            bool ready = true;
            for (size_t d = 0; d < g->nodes[i]->ndeps; d++)
                ready &= placed[fg_index(g, g->nodes[i]->deps[d])] != 0;
            if (ready) {
                placed[i] = 1;
                order[done++] = i;
                progress = true;
            }
        }
        if (!progress)
            break;
    }
    if (done < n && bad)
        for (size_t i = 0; i < n; i++)
            if (!placed[i]) {
                *bad = g->nodes[i];
                break;
            }
    free(placed);
    return done == n;
}

static void fg_run(const fake_graph *g);

static void fg_run_node(const fake_gnode *x)
{
    switch (x->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        fake_run_kernel(x->func, x->args, x->grid);
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        memmove(x->dst, x->src, x->bytes);
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        for (unsigned i = 0; i < x->count; i++)
            memcpy((char *)x->dst + (size_t)i * x->elem, &x->value, x->elem);
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        x->fn(x->user);
        break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        fg_run(x->child);
        break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
        unsigned *v = &fake_conds[x->cond - 1].value;
        if (x->ctype == CU_GRAPH_COND_TYPE_WHILE) {
            for (int guard = 0; *v && guard < 100000; guard++)
                fg_run((fake_graph *)x->bodies[0]);
        } else if (x->ctype == CU_GRAPH_COND_TYPE_IF) {
            if (*v)
                fg_run((fake_graph *)x->bodies[0]);
            else if (x->nbodies == 2)
                fg_run((fake_graph *)x->bodies[1]);
        } else if (*v < x->nbodies) {
            fg_run((fake_graph *)x->bodies[*v]);
        }
        break;
    }
    default: /* empty, events, memory nodes: nothing to do on the host */
        break;
    }
}

static void fg_run(const fake_graph *g)
{
    size_t *order = malloc((g->n ? g->n : 1) * sizeof *order);
    if (fg_order(g, order, NULL))
        for (size_t i = 0; i < g->n; i++)
            fg_run_node(g->nodes[order[i]]);
    free(order);
}

/* ---- graph entry points */

static CUresult CUDAAPI fake_cuGraphCreate(CUgraph *g, unsigned flags)
{
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    *g = (CUgraph)fg_new(false);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphDestroy(CUgraph g)
{
    fg_free((fake_graph *)g);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
    fake_graph *fg = (fake_graph *)g;
    if (nodes)
        for (size_t i = 0; i < *n && i < fg->n; i++)
            nodes[i] = (CUgraphNode)fg->nodes[i];
    *n = fg->n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphNodeGetType(CUgraphNode n, CUgraphNodeType *t)
{
    *t = ((fake_gnode *)n)->type;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphDestroyNode(CUgraphNode node)
{
    fake_gnode *n = (fake_gnode *)node;
    fake_graph *g = n->graph;
    size_t at = fg_index(g, n);
    for (size_t i = 0; i < g->n; i++) {
        fake_gnode *o = g->nodes[i];
        for (size_t d = 0; d < o->ndeps;)
            if (o->deps[d] == n) o->deps[d] = o->deps[--o->ndeps]; else d++;
    }
    memmove(&g->nodes[at], &g->nodes[at + 1], (g->n - at - 1) * sizeof *g->nodes);
    g->n--;
    fg_node_free(n);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode *deps,
                                                        CUgraphEdgeData *data, size_t *n)
{
    fake_gnode *x = (fake_gnode *)node;
    if (deps)
        for (size_t i = 0; i < *n && i < x->ndeps; i++) {
            deps[i] = (CUgraphNode)x->deps[i];
            if (data) memset(&data[i], 0, sizeof data[i]);
        }
    *n = x->ndeps;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode *out,
                                                          CUgraphEdgeData *data, size_t *n)
{
    fake_gnode *x = (fake_gnode *)node;
    size_t k = 0;
    for (size_t i = 0; i < x->graph->n; i++) {
        fake_gnode *o = x->graph->nodes[i];
        for (size_t d = 0; d < o->ndeps; d++)
            if (o->deps[d] == x) {
                if (out && k < *n) {
                    out[k] = (CUgraphNode)o;
                    if (data) memset(&data[k], 0, sizeof data[k]);
                }
                k++;
            }
    }
    *n = k;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphAddDependencies(CUgraph g, const CUgraphNode *from,
                                                    const CUgraphNode *to,
                                                    const CUgraphEdgeData *data, size_t n)
{
    (void)data;
    fake_graph *fg = (fake_graph *)g;
    for (size_t i = 0; i < n; i++) {
        fake_gnode *a = (fake_gnode *)from[i], *b = (fake_gnode *)to[i];
        if (!fg_has(fg, a) || !fg_has(fg, b)) return CUDA_ERROR_INVALID_VALUE;
        for (size_t d = 0; d < b->ndeps; d++)
            if (b->deps[d] == a) return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n; i++) {
        fake_gnode *b = (fake_gnode *)to[i];
        if (b->ndeps == b->cap_deps) {
            b->cap_deps = b->cap_deps ? 2 * b->cap_deps : 4;
            b->deps = realloc(b->deps, b->cap_deps * sizeof *b->deps);
        }
        b->deps[b->ndeps++] = (fake_gnode *)from[i];
    }
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphRemoveDependencies(CUgraph g, const CUgraphNode *from,
                                                       const CUgraphNode *to,
                                                       const CUgraphEdgeData *data, size_t n)
{
    (void)g; (void)data;
    for (size_t i = 0; i < n; i++) {
        fake_gnode *b = (fake_gnode *)to[i];
        size_t d = 0;
        while (d < b->ndeps && b->deps[d] != (fake_gnode *)from[i]) d++;
        if (d == b->ndeps) return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n; i++) {
        fake_gnode *b = (fake_gnode *)to[i];
        for (size_t d = 0; d < b->ndeps; d++)
            if (b->deps[d] == (fake_gnode *)from[i]) {
                b->deps[d] = b->deps[--b->ndeps];
                break;
            }
    }
    return CUDA_SUCCESS;
}

static void fg_kernel_from(fake_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    n->func = p->func;
    n->grid[0] = p->gridDimX; n->grid[1] = p->gridDimY; n->grid[2] = p->gridDimZ;
    n->block[0] = p->blockDimX; n->block[1] = p->blockDimY; n->block[2] = p->blockDimZ;
    n->shmem = p->sharedMemBytes;
    for (int i = 0; i < 3; i++)
        memcpy(n->args + 8 * i, p->kernelParams[i], 8);
}
static CUresult CUDAAPI fake_cuGraphAddKernelNode(CUgraphNode *out, CUgraph g,
                                                  const CUgraphNode *deps, size_t nd,
                                                  const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (!p->func || !p->kernelParams || p->extra) return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_KERNEL, deps, nd);
    fg_kernel_from(n, p);
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
    fake_gnode *n = (fake_gnode *)node;
    if (n->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof *p);
    p->func = n->func;
    p->gridDimX = n->grid[0]; p->gridDimY = n->grid[1]; p->gridDimZ = n->grid[2];
    p->blockDimX = n->block[0]; p->blockDimY = n->block[1]; p->blockDimZ = n->block[2];
    p->sharedMemBytes = n->shmem;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphKernelNodeSetParams(CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS *p)
{
    fake_gnode *n = (fake_gnode *)node;
    if (n->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
    fg_kernel_from(n, p);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID id,
                                                           const CUkernelNodeAttrValue *v)
{
    fake_gnode *n = (fake_gnode *)node;
    if (n->type != CU_GRAPH_NODE_TYPE_KERNEL || n->nattrs == 8) return CUDA_ERROR_INVALID_VALUE;
    n->attrs[n->nattrs].id = id;
    n->attrs[n->nattrs].value = *v;
    n->nattrs++;
    return CUDA_SUCCESS;
}
static void *fg_side(CUmemorytype t, const void *host, CUdeviceptr dev)
{
    return t == CU_MEMORYTYPE_HOST ? (void *)host : (void *)(uintptr_t)dev;
}
static CUresult CUDAAPI fake_cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g,
                                                  const CUgraphNode *deps, size_t nd,
                                                  const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx || !p->WidthInBytes || p->Height != 1 || p->Depth != 1) return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_MEMCPY, deps, nd);
    n->dst = fg_side(p->dstMemoryType, p->dstHost, p->dstDevice);
    n->src = fg_side(p->srcMemoryType, p->srcHost, p->srcDevice);
    n->bytes = p->WidthInBytes;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g,
                                                  const CUgraphNode *deps, size_t nd,
                                                  const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx || p->height != 1 || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
        return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_MEMSET, deps, nd);
    n->dst = (void *)(uintptr_t)p->dst;
    n->value = p->value;
    n->elem = p->elementSize;
    n->count = (unsigned)p->width;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphAddHostNode(CUgraphNode *out, CUgraph g,
                                                const CUgraphNode *deps, size_t nd,
                                                const CUDA_HOST_NODE_PARAMS *p)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (!p->fn) return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_HOST, deps, nd);
    n->fn = p->fn;
    n->user = p->userData;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g,
                                                 const CUgraphNode *deps, size_t nd)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    *out = (CUgraphNode)fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_EMPTY, deps, nd);
    return CUDA_SUCCESS;
}
static CUresult fg_event_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                              CUevent e, CUgraphNodeType t)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, t, deps, nd);
    n->event = e;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g,
                                                       const CUgraphNode *deps, size_t nd,
                                                       CUevent e)
{
    return fg_event_node(out, g, deps, nd, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}
static CUresult CUDAAPI fake_cuGraphAddEventWaitNode(CUgraphNode *out, CUgraph g,
                                                     const CUgraphNode *deps, size_t nd, CUevent e)
{
    return fg_event_node(out, g, deps, nd, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}
static CUresult CUDAAPI fake_cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g,
                                                      const CUgraphNode *deps, size_t nd,
                                                      CUgraph child)
{
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (!child || child == g) return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_GRAPH, deps, nd);
    n->child = fg_clone((fake_graph *)child, false);
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *h, CUgraph g,
                                                            CUcontext ctx, unsigned dflt,
                                                            unsigned flags)
{
    if (!ctx || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
    int i = 0; /* a slot whose graph is gone, else a new one */
    while (i < fake_nconds && fake_conds[i].graph) i++;
    if (i == 64) return CUDA_ERROR_OUT_OF_MEMORY;
    if (i == fake_nconds) fake_nconds++;
    fake_conds[i].dflt = dflt;
    fake_conds[i].flags = flags;
    fake_conds[i].value = dflt;
    fake_conds[i].graph = g;
    fake_conds[i].used = false;
    *h = (CUgraphConditionalHandle)(i + 1);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphAddNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                            const CUgraphEdgeData *data, size_t nd,
                                            CUgraphNodeParams *p)
{
    (void)data;
    CUresult r = fg_check_deps((fake_graph *)g, deps, nd);
    if (r != CUDA_SUCCESS) return r;
    if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
    if (!c->ctx || c->handle < 1 || c->handle > (CUgraphConditionalHandle)fake_nconds ||
        c->size < 1 || c->size > 4)
        return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *n = fg_add((fake_graph *)g, CU_GRAPH_NODE_TYPE_CONDITIONAL, deps, nd);
    n->cond = c->handle;
    n->ctype = c->type;
    n->nbodies = c->size;
    for (unsigned i = 0; i < c->size; i++)
        n->bodies[i] = (CUgraph)fg_new(false);
    c->phGraph_out = n->bodies;
    fake_conds[c->handle - 1].used = true;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphDebugDotPrint(CUgraph g, const char *path, unsigned flags)
{
    fake_graph *fg = (fake_graph *)g;
    FILE *f = fopen(path, "w");
    if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
    fprintf(f, "digraph fake {\n");
    for (size_t i = 0; i < fg->n; i++)
        fprintf(f, "  n%zu [label=\"%d%s\"];\n", i, (int)fg->nodes[i]->type,
                flags & 1 ? " verbose" : "");
    for (size_t i = 0; i < fg->n; i++)
        for (size_t d = 0; d < fg->nodes[i]->ndeps; d++)
            fprintf(f, "  n%zu -> n%zu;\n", fg_index(fg, fg->nodes[i]->deps[d]), i);
    fprintf(f, "}\n");
    fclose(f);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuFuncGetName(const char **name, CUfunction f)
{
    *name = fake_func_name(f);
    return CUDA_SUCCESS;
}

/* ---- executables */

static CUresult CUDAAPI fake_cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g,
                                                          CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    fake_graph *fg = (fake_graph *)g;
    p->hErrNode_out = NULL;
    p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) && !p->hUploadStream)
        return CUDA_ERROR_INVALID_VALUE;
    size_t *order = malloc((fg->n ? fg->n : 1) * sizeof *order);
    fake_gnode *bad = NULL;
    bool ok = fg_order(fg, order, &bad);
    free(order);
    if (!ok) {
        p->hErrNode_out = (CUgraphNode)bad;
        p->result_out = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (int i = 0; i < fake_nconds; i++)
        if (fake_conds[i].graph == g && !fake_conds[i].used) {
            p->result_out = CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED;
            return CUDA_ERROR_INVALID_VALUE;
        }
    *out = (CUgraphExec)fg_clone(fg, true);
    if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
        fake_graph_uploads++;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphExecDestroy(CUgraphExec e)
{
    fg_free((fake_graph *)e);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphUpload(CUgraphExec e, CUstream s)
{
    (void)e; (void)s;
    fake_graph_uploads++;
    return CUDA_SUCCESS;
}
/* Whether x and y (nodes of two graphs) have the same incoming edges, by
 * node index; *from receives an edge of y's that x lacks (or NULL). */
static bool fg_same_edges(const fake_gnode *x, const fake_gnode *y, fake_gnode **from)
{
    *from = NULL;
    if (x->ndeps != y->ndeps) {
        if (y->ndeps) *from = y->deps[0];
        return false;
    }
    for (size_t d = 0; d < y->ndeps; d++) {
        size_t want = fg_index(y->graph, y->deps[d]);
        bool found = false;
        for (size_t e = 0; e < x->ndeps; e++)
            found |= fg_index(x->graph, x->deps[e]) == want;
        if (!found) {
            *from = y->deps[d];
            return false;
        }
    }
    return true;
}
static CUresult CUDAAPI fake_cuGraphExecUpdate(CUgraphExec e, CUgraph g,
                                               CUgraphExecUpdateResultInfo *info)
{
    fake_graph *x = (fake_graph *)e, *y = (fake_graph *)g;
    memset(info, 0, sizeof *info);
    for (size_t i = 0; i < y->n || i < x->n; i++) {
        fake_gnode *from = NULL;
        if (i >= x->n || i >= y->n) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            info->errorNode = i < y->n ? (CUgraphNode)y->nodes[i] : NULL;
        } else if (x->nodes[i]->type != y->nodes[i]->type) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            info->errorNode = (CUgraphNode)y->nodes[i];
        } else if (!fg_same_edges(x->nodes[i], y->nodes[i], &from)) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            info->errorNode = (CUgraphNode)y->nodes[i];
            info->errorFromNode = (CUgraphNode)from;
        } else if (x->nodes[i]->type == CU_GRAPH_NODE_TYPE_KERNEL &&
                   x->nodes[i]->func != y->nodes[i]->func) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
            info->errorNode = (CUgraphNode)y->nodes[i];
        }
        if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < y->n; i++) {
        fake_gnode *a = x->nodes[i], *b = y->nodes[i];
        if (b->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            a->grid[0] = b->grid[0]; a->grid[1] = b->grid[1]; a->grid[2] = b->grid[2];
            a->block[0] = b->block[0]; a->block[1] = b->block[1]; a->block[2] = b->block[2];
            a->shmem = b->shmem;
            memcpy(a->args, b->args, FG_ARGS);
        } else if (b->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
            a->dst = b->dst; a->src = b->src; a->bytes = b->bytes;
        } else if (b->type == CU_GRAPH_NODE_TYPE_MEMSET) {
            a->dst = b->dst; a->value = b->value; a->elem = b->elem; a->count = b->count;
        } else if (b->type == CU_GRAPH_NODE_TYPE_HOST) {
            a->fn = b->fn; a->user = b->user;
        }
    }
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                            const CUDA_KERNEL_NODE_PARAMS *p)
{
    fake_graph *x = (fake_graph *)e;
    for (size_t i = 0; i < x->n; i++)
        if (x->nodes[i]->orig == (fake_gnode *)node) {
            if (x->nodes[i]->type != CU_GRAPH_NODE_TYPE_KERNEL || x->nodes[i]->func != p->func)
                return CUDA_ERROR_INVALID_VALUE;
            fg_kernel_from(x->nodes[i], p);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- stream capture */

typedef struct fake_session {
    cuuint64_t id;
    fake_graph *graph;
    CUstream origin;
    CUstreamCaptureMode mode;
    bool invalidated;
} fake_session;

/* A stream taking part in a capture, with the nodes its next work depends on. */
static struct fake_member {
    CUstream stream;
    fake_session *session;
    CUgraphNode tail[8];
    size_t ntail;
    bool pending;                 /* non-origin stream with work not joined back */
} fake_members[16];
static int fake_nmembers;
static cuuint64_t fake_capture_ids;
/* Events recorded on capturing streams: where they were recorded. */
static struct { CUevent event; fake_session *session; CUstream stream; CUgraphNode tail[8]; size_t ntail; }
    fake_cap_events[16];
static int fake_ncap_events;

/* The stream entry points the capture wraps (installed before it). */
static cuabi__driver fake_graph_next;

static struct fake_member *fake_member_of(CUstream s)
{
    for (int i = 0; i < fake_nmembers; i++)
        if (fake_members[i].stream == s)
            return &fake_members[i];
    return NULL;
}

static void fake_invalidate(fake_session *ss)
{
    ss->invalidated = true;
}

/* Any GLOBAL-mode capture in progress: unsafe calls invalidate it. */
static bool fake_unsafe_call(void)
{
    bool hit = false;
    for (int i = 0; i < fake_nmembers; i++)
        if (fake_members[i].session->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
            !fake_members[i].session->invalidated) {
            fake_invalidate(fake_members[i].session);
            hit = true;
        }
    return hit;
}

/* The member stream `s` (capturing and valid) or NULL. */
static struct fake_member *fake_capturing(CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    return m && !m->session->invalidated ? m : NULL;
}

static fake_gnode *fake_capture_node(struct fake_member *m, CUgraphNodeType t)
{
    fake_gnode *n = fg_add(m->session->graph, t, m->tail, m->ntail);
    m->tail[0] = (CUgraphNode)n;
    m->ntail = 1;
    if (m->stream != m->session->origin)
        m->pending = true;
    return n;
}

static CUresult CUDAAPI fake_cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode)
{
    if ((uintptr_t)s <= 1) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (fake_member_of(s) || fake_nmembers == 16) return CUDA_ERROR_ILLEGAL_STATE;
    fake_session *ss = calloc(1, sizeof *ss);
    fake_own(ss);
    ss->id = ++fake_capture_ids;
    ss->graph = fg_new(false);
    ss->origin = s;
    ss->mode = mode;
    struct fake_member *m = &fake_members[fake_nmembers++];
    memset(m, 0, sizeof *m);
    m->stream = s;
    m->session = ss;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status,
                                                    cuuint64_t *id, CUgraph *g,
                                                    const CUgraphNode **deps,
                                                    const CUgraphEdgeData **data, size_t *nd)
{
    struct fake_member *m = fake_member_of(s);
    *status = !m ? CU_STREAM_CAPTURE_STATUS_NONE
            : m->session->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id) *id = m ? m->session->id : 0;
    if (g) *g = m ? (CUgraph)m->session->graph : NULL;
    if (deps) *deps = m ? m->tail : NULL;
    if (data) *data = NULL;
    if (nd) *nd = m ? m->ntail : 0;
    return CUDA_SUCCESS;
}
static void fake_drop_members(fake_session *ss)
{
    for (int i = 0; i < fake_nmembers;)
        if (fake_members[i].session == ss)
            fake_members[i] = fake_members[--fake_nmembers];
        else
            i++;
    for (int i = 0; i < fake_ncap_events;)
        if (fake_cap_events[i].session == ss)
            fake_cap_events[i] = fake_cap_events[--fake_ncap_events];
        else
            i++;
}
static CUresult CUDAAPI fake_cuStreamEndCapture(CUstream s, CUgraph *g)
{
    struct fake_member *m = fake_member_of(s);
    *g = NULL;
    if (!m) return CUDA_ERROR_ILLEGAL_STATE;
    fake_session *ss = m->session;
    if (ss->origin != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    bool unjoined = false;
    for (int i = 0; i < fake_nmembers; i++)
        unjoined |= fake_members[i].session == ss && fake_members[i].pending;
    fake_drop_members(ss);
    CUresult r = ss->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
               : unjoined ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        *g = (CUgraph)ss->graph;
    else
        fg_free(ss->graph);
    fake_disown(ss);
    free(ss);
    return r;
}

/* Wrapped stream work: a node when capturing, else the next fake. */
static CUresult CUDAAPI fake_cap_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                                unsigned gz, unsigned bx, unsigned by,
                                                unsigned bz, unsigned smem, CUstream s,
                                                void **params, void **extra)
{
    (void)extra;
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if ((uintptr_t)s <= 1 && fake_unsafe_call()) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    unsigned grid[3] = { gx, gy, gz };
    if (!m) {
        unsigned char args[FG_ARGS];
        for (int i = 0; i < 3; i++) memcpy(args + 8 * i, params[i], 8);
        fake_run_kernel(f, args, grid);
        return CUDA_SUCCESS;
    }
    CUDA_KERNEL_NODE_PARAMS p = { f, gx, gy, gz, bx, by, bz, smem, params, NULL, NULL, NULL };
    fg_kernel_from(fake_capture_node(m, CU_GRAPH_NODE_TYPE_KERNEL), &p);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cap_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f,
                                                  void **params, void **extra)
{
    CUresult r = fake_cap_cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                                         c->blockDimY, c->blockDimZ, c->sharedMemBytes,
                                         c->hStream, params, extra);
    struct fake_member *m = fake_capturing(c->hStream);
    if (r == CUDA_SUCCESS && m) {
        fake_gnode *n = (fake_gnode *)m->tail[0];
        for (unsigned i = 0; i < c->numAttrs && i < 8; i++)
            n->attrs[n->nattrs++] = c->attrs[i];
    }
    return r;
}
static CUresult CUDAAPI fake_cap_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    struct fake_member *m = fake_member_of(st);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!m) return fake_graph_next.cuMemcpyAsync(d, s, n, st);
    fake_gnode *x = fake_capture_node(m, CU_GRAPH_NODE_TYPE_MEMCPY);
    x->dst = (void *)(uintptr_t)d;
    x->src = (const void *)(uintptr_t)s;
    x->bytes = n;
    return CUDA_SUCCESS;
}
static CUresult fake_cap_memset(CUdeviceptr d, unsigned v, unsigned elem, size_t n, CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    fake_gnode *x = fake_capture_node(m, CU_GRAPH_NODE_TYPE_MEMSET);
    x->dst = (void *)(uintptr_t)d;
    x->value = v;
    x->elem = elem;
    x->count = (unsigned)n;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cap_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return fake_member_of(s) ? fake_cap_memset(d, v, 1, n, s) : fake_graph_next.cuMemsetD8Async(d, v, n, s);
}
static CUresult CUDAAPI fake_cap_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    return fake_member_of(s) ? fake_cap_memset(d, v, 2, n, s) : fake_graph_next.cuMemsetD16Async(d, v, n, s);
}
static CUresult CUDAAPI fake_cap_cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s)
{
    return fake_member_of(s) ? fake_cap_memset(d, v, 4, n, s) : fake_graph_next.cuMemsetD32Async(d, v, n, s);
}
static CUresult CUDAAPI fake_cap_cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, CUmemoryPool p,
                                                         CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    CUresult r = fake_graph_next.cuMemAllocFromPoolAsync(d, n, p, s);
    if (r != CUDA_SUCCESS || !m) return r;
    fake_graph *g = m->session->graph;
    if (g->nallocs == 32) return CUDA_ERROR_OUT_OF_MEMORY;
    g->allocs[g->nallocs] = *d;
    g->freed_inside[g->nallocs++] = false;
    fake_capture_node(m, CU_GRAPH_NODE_TYPE_MEM_ALLOC)->mem = *d;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cap_cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!m) return fake_graph_next.cuMemFreeAsync(d, s);
    fake_graph *g = m->session->graph;
    bool mine = false;
    for (size_t i = 0; i < g->nallocs; i++)
        if (g->allocs[i] == d && !g->freed_inside[i])
            mine = g->freed_inside[i] = true;
    if (!mine)
        fake_foreign_frees++;   /* would free it again at every replay */
    fake_capture_node(m, CU_GRAPH_NODE_TYPE_MEM_FREE)->mem = d;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cap_cuEventRecord(CUevent e, CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!m) return fake_graph_next.cuEventRecord(e, s);
    for (int i = 0; i < fake_ncap_events; i++)
        if (fake_cap_events[i].event == e) {
            fake_cap_events[i] = fake_cap_events[--fake_ncap_events];
            break;
        }
    if (fake_ncap_events == 16) return CUDA_ERROR_OUT_OF_MEMORY;
    fake_cap_events[fake_ncap_events].event = e;
    fake_cap_events[fake_ncap_events].session = m->session;
    fake_cap_events[fake_ncap_events].stream = s;
    memcpy(fake_cap_events[fake_ncap_events].tail, m->tail, sizeof m->tail);
    fake_cap_events[fake_ncap_events].ntail = m->ntail;
    fake_ncap_events++;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_cap_cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags)
{
    for (int i = 0; i < fake_ncap_events; i++) {
        if (fake_cap_events[i].event != e)
            continue;
        struct fake_member *m = fake_member_of(s);
        if (m && m->session != fake_cap_events[i].session) return CUDA_ERROR_STREAM_CAPTURE_MERGE;
        if (!m) {
            if (fake_nmembers == 16) return CUDA_ERROR_OUT_OF_MEMORY;
            m = &fake_members[fake_nmembers++];
            memset(m, 0, sizeof *m);
            m->stream = s;
            m->session = fake_cap_events[i].session;
        }
        /* Join: the waiter's next work depends on both tails. */
        for (size_t t = 0; t < fake_cap_events[i].ntail && m->ntail < 8; t++)
            m->tail[m->ntail++] = fake_cap_events[i].tail[t];
        if (s == m->session->origin) {
            struct fake_member *src = fake_member_of(fake_cap_events[i].stream);
            if (src && src->ntail == fake_cap_events[i].ntail &&
                memcmp(src->tail, fake_cap_events[i].tail, src->ntail * sizeof *src->tail) == 0)
                src->pending = false;
        }
        return CUDA_SUCCESS;
    }
    if (fake_member_of(s)) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    return fake_graph_next.cuStreamWaitEvent(s, e, flags);
}
static CUresult CUDAAPI fake_cap_cuStreamSynchronize(CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m) {
        fake_invalidate(m->session);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((uintptr_t)s <= 1 && fake_unsafe_call()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return fake_graph_next.cuStreamSynchronize(s);
}
static CUresult CUDAAPI fake_cap_cuStreamQuery(CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m) {
        fake_invalidate(m->session);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return fake_graph_next.cuStreamQuery(s);
}
static CUresult CUDAAPI fake_cap_cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    if (fake_unsafe_call()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return fake_graph_next.cuMemcpy(d, s, n);
}
static CUresult CUDAAPI fake_cap_cuCtxSynchronize(void)
{
    if (fake_unsafe_call()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return fake_graph_next.cuCtxSynchronize();
}
/* A destroyed stream leaves its capture (the whole capture when it began
 * there), so a later stream at the same address starts clean. */
static CUresult CUDAAPI fake_cap_cuStreamDestroy(CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->origin == s) {
        fake_session *ss = m->session;
        fake_drop_members(ss);
        fg_free(ss->graph);
        fake_disown(ss);
        free(ss);
    } else if (m) {
        *m = fake_members[--fake_nmembers];
    }
    return fake_graph_next.cuStreamDestroy(s);
}
static CUresult CUDAAPI fake_cuGraphLaunch(CUgraphExec e, CUstream s)
{
    struct fake_member *m = fake_member_of(s);
    if (m && m->session->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (m) { /* launched into a capture: a child graph node */
        fake_capture_node(m, CU_GRAPH_NODE_TYPE_GRAPH)->child = fg_clone((fake_graph *)e, false);
        return CUDA_SUCCESS;
    }
    for (int i = 0; i < fake_nconds; i++)
        if (fake_conds[i].flags & 1)
            fake_conds[i].value = fake_conds[i].dflt;
    fake_graph_launches++;
    fg_run((fake_graph *)e);
    return CUDA_SUCCESS;
}

/* Function attributes the launch checks read (the objcode fake has none). */
static CUresult CUDAAPI fake_graph_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)f;
    *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024
       : a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ? 48 * 1024 : 0;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_graph_cuOccupancy(int *n, CUfunction f, int block, size_t smem,
                                               unsigned flags)
{
    (void)f; (void)block; (void)smem; (void)flags;
    *n = 4;
    return CUDA_SUCCESS;
}

static inline void fake_graph_install(void)
{
    cuabi__driver *d = cuabi__driver_for_test();
    fake_graph_next = *d;
    d->cuGraphCreate = fake_cuGraphCreate;
    d->cuGraphDestroy = fake_cuGraphDestroy;
    d->cuGraphGetNodes = fake_cuGraphGetNodes;
    d->cuGraphNodeGetType = fake_cuGraphNodeGetType;
    d->cuGraphDestroyNode = fake_cuGraphDestroyNode;
    d->cuGraphNodeGetDependencies = fake_cuGraphNodeGetDependencies;
    d->cuGraphNodeGetDependentNodes = fake_cuGraphNodeGetDependentNodes;
    d->cuGraphAddDependencies = fake_cuGraphAddDependencies;
    d->cuGraphRemoveDependencies = fake_cuGraphRemoveDependencies;
    d->cuGraphAddKernelNode = fake_cuGraphAddKernelNode;
    d->cuGraphKernelNodeGetParams = fake_cuGraphKernelNodeGetParams;
    d->cuGraphKernelNodeSetParams = fake_cuGraphKernelNodeSetParams;
    d->cuGraphKernelNodeSetAttribute = fake_cuGraphKernelNodeSetAttribute;
    d->cuGraphAddMemcpyNode = fake_cuGraphAddMemcpyNode;
    d->cuGraphAddMemsetNode = fake_cuGraphAddMemsetNode;
    d->cuGraphAddHostNode = fake_cuGraphAddHostNode;
    d->cuGraphAddEmptyNode = fake_cuGraphAddEmptyNode;
    d->cuGraphAddEventRecordNode = fake_cuGraphAddEventRecordNode;
    d->cuGraphAddEventWaitNode = fake_cuGraphAddEventWaitNode;
    d->cuGraphAddChildGraphNode = fake_cuGraphAddChildGraphNode;
    d->cuGraphAddNode = fake_cuGraphAddNode;
    d->cuGraphConditionalHandleCreate = fake_cuGraphConditionalHandleCreate;
    d->cuGraphDebugDotPrint = fake_cuGraphDebugDotPrint;
    d->cuGraphInstantiateWithParams = fake_cuGraphInstantiateWithParams;
    d->cuGraphExecDestroy = fake_cuGraphExecDestroy;
    d->cuGraphLaunch = fake_cuGraphLaunch;
    d->cuGraphUpload = fake_cuGraphUpload;
    d->cuGraphExecUpdate = fake_cuGraphExecUpdate;
    d->cuGraphExecKernelNodeSetParams = fake_cuGraphExecKernelNodeSetParams;
    d->cuFuncGetName = fake_cuFuncGetName;
    d->cuStreamBeginCapture = fake_cuStreamBeginCapture;
    d->cuStreamEndCapture = fake_cuStreamEndCapture;
    d->cuStreamGetCaptureInfo = fake_cuStreamGetCaptureInfo;
    d->cuLaunchKernel = fake_cap_cuLaunchKernel;
    d->cuLaunchKernelEx = fake_cap_cuLaunchKernelEx;
    d->cuMemcpyAsync = fake_cap_cuMemcpyAsync;
    d->cuMemsetD8Async = fake_cap_cuMemsetD8Async;
    d->cuMemsetD16Async = fake_cap_cuMemsetD16Async;
    d->cuMemsetD32Async = fake_cap_cuMemsetD32Async;
    d->cuMemAllocFromPoolAsync = fake_cap_cuMemAllocFromPoolAsync;
    d->cuMemFreeAsync = fake_cap_cuMemFreeAsync;
    d->cuEventRecord = fake_cap_cuEventRecord;
    d->cuStreamWaitEvent = fake_cap_cuStreamWaitEvent;
    d->cuStreamSynchronize = fake_cap_cuStreamSynchronize;
    d->cuStreamQuery = fake_cap_cuStreamQuery;
    d->cuMemcpy = fake_cap_cuMemcpy;
    d->cuCtxSynchronize = fake_cap_cuCtxSynchronize;
    d->cuStreamDestroy = fake_cap_cuStreamDestroy;
    if (!d->cuFuncGetAttribute)
        d->cuFuncGetAttribute = fake_graph_cuFuncGetAttribute;
    if (!d->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
        d->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = fake_graph_cuOccupancy;
    fake_live_graphs = fake_live_execs = fake_graph_launches = fake_graph_uploads = 0;
    fake_foreign_frees = fake_kernel_runs = 0;
    fake_nconds = fake_nmembers = fake_ncap_events = 0;
    fake_nimpls = 0;
}

#endif
