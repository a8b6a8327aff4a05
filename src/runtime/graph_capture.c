/* Stream capture: begin and end on a cuabi stream, the capture status, and
 * the hooks through which cuabi's launch, copy, memset, allocation and free
 * paths tell a capture what its graph must keep alive.
 *
 * Each capture begun here has a record, found by the driver's capture id
 * (cuStreamGetCaptureInfo), so work on any stream that joined the capture
 * (a forked stream, another handle wrapping the same CUstream) reaches it.
 * The hooks are registered with the capture seam (capture.h) when a
 * capture begins, and run only while cuabi__captures_active is non-zero:
 * with no capture in progress they cost their callers one relaxed load. */
#include "platform/release.h"
#include "runtime/graph.h"

#include <stdio.h>
#include <string.h>

typedef struct alloc_rec {
    cuabi__buffer *buffer;
    uintptr_t ptr;
} alloc_rec;

typedef struct capture {
    cuuint64_t id;
    cuabi__stream *stream;       /* where it began; retained */
    cuabi__graph *into;          /* cuabi_graph_capture_begin_to_graph's graph; retained */
    cuabi__keep keep;            /* moves to the graph at the end */
    alloc_rec *allocs;           /* buffers allocated inside the capture */
    size_t nallocs, cap_allocs;
    struct capture *next;
} capture;

static pthread_mutex_t captures_lock = PTHREAD_MUTEX_INITIALIZER;
static capture *captures;        /* guarded by captures_lock */

CUABI__HOT static void capture_free(capture *c)
{
    if (c->into) {
        /* The graph may hold nodes the capture recorded (a failed capture
         * into a graph leaves them): it keeps what they use. */
        cuabi__graph_lock(c->into);
        cuabi_status st = cuabi__keep_move(&c->into->shared->keep, &c->keep, "cuabi_graph_capture_end");
        cuabi__graph_unlock(c->into);
        (void)st; /* out of memory: released below, as a plain capture's */
        cuabi__object_release(&c->into->base);
    }
    cuabi__keep_release(&c->keep);
    cuabi__free(c->allocs);
    cuabi__object_release(&c->stream->base);
    cuabi__free(c);
}

/* The cuabi capture that stream `s` takes part in: on success with one,
 * captures_lock is held (release it with capture_done). Errors of the
 * status query are returned (the work on `s` would fail the same way).
 *
 * The stream a capture began on is found in the list without asking the
 * driver: between cuabi_graph_capture_begin and _end it is in that capture
 * (active, or invalidated: then the capture fails at its end and releases
 * what it kept). That saves a cuStreamGetCaptureInfo per captured launch,
 * copy and memset on the capturing stream (the common case). Streams that
 * joined a capture through an event are found by the driver's capture id.
 * The per-thread default stream is one handle value for as many streams as
 * threads: it is always asked about. A capture ended behind cuabi's back
 * (cuStreamEndCapture on the raw CUstream) leaves its record here, as it
 * did before; work on that stream then goes on being kept by it until a
 * new cuabi capture begins on the stream (docs/graphs.md). */
CUABI__HOT static cuabi_status capture_of(capture **out, CUstream s, const cuabi__driver *drv,
                                          const char *caller)
{
    *out = NULL;
    if (!s || s == CU_STREAM_LEGACY) /* never captured */
        return CUABI_SUCCESS;
    if (s != CU_STREAM_PER_THREAD) {
        pthread_mutex_lock(&captures_lock);
        for (capture *c = captures; c; c = c->next) /* newest first */
            if (c->stream->cu_stream == s) {
                *out = c;
                return CUABI_SUCCESS;
            }
        pthread_mutex_unlock(&captures_lock);
    }
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuStreamGetCaptureInfo, s, &status, &id, NULL, NULL,
                            NULL, NULL));
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return CUABI_SUCCESS;
    pthread_mutex_lock(&captures_lock);
    for (capture *c = captures; c; c = c->next)
        if (c->id == id) {
            *out = c;
            return CUABI_SUCCESS;
        }
    pthread_mutex_unlock(&captures_lock);
    return CUABI_SUCCESS;
}

CUABI__HOT static void capture_done(void)
{
    pthread_mutex_unlock(&captures_lock);
}

static bool allocated_in(const capture *c, const cuabi__buffer *b)
{
    for (size_t i = c->nallocs; i-- > 0;)
        if (c->allocs[i].buffer == b && c->allocs[i].ptr == b->ptr)
            return true;
    return false;
}

/* Keep a buffer's memory unless the capture allocated it (then it is the
 * graph's own memory, freed by a node of the graph or by the caller). */
static cuabi_status keep_buffer(capture *c, cuabi__buffer *b, const char *caller)
{
    if (!b || allocated_in(c, b))
        return CUABI_SUCCESS;
    return cuabi__keep_buffer(&c->keep, b, caller);
}

/* ---------------------------------------------------------------- hooks */

CUABI__HOT static cuabi_status capture_keep_launch(CUstream s, cuabi__kernel *k,
                                                   const cuabi__argpack *p, const char *caller)
{
    const cuabi__driver *drv;
    capture *c;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    CUABI__TRY(capture_of(&c, s, drv, caller));
    if (!c)
        return CUABI_SUCCESS;
    cuabi_status st = cuabi__keep_object(&c->keep, &k->base, caller);
    for (size_t i = 0; st == CUABI_SUCCESS && p->nrefs && i < p->nslots; i++) {
        void *obj;
        const void *h = (const void *)(uintptr_t)p->ref_handle[i];
        /* The launch resolved every slot already: the handles are live. */
        int ref = p->ref_kind[i];
        if (!ref || cuabi__handle_get(h, cuabi__ref_type(ref), &obj, caller) != CUABI_SUCCESS)
            continue;
        /* Buffers: their memory; views, textures, surfaces: the object,
         * which keeps what it reads. */
        st = ref == CUABI__REF_BUFFER ? keep_buffer(c, obj, caller)
                                      : cuabi__keep_object(&c->keep, obj, caller);
    }
    capture_done();
    return st;
}

static cuabi_status capture_keep_object(CUstream s, cuabi__object *o, const char *caller)
{
    const cuabi__driver *drv;
    capture *c;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    CUABI__TRY(capture_of(&c, s, drv, caller));
    if (!c)
        return CUABI_SUCCESS;
    cuabi_status st = cuabi__keep_object(&c->keep, o, caller);
    capture_done();
    return st;
}

static cuabi_status capture_keep_buffers(cuabi__stream *s, cuabi__buffer *a, cuabi__buffer *b,
                                         const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    const cuabi__driver *drv;
    capture *c;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    CUABI__TRY_SCOPE(cuabi__stream_enter(&scope, s, drv));
    CUABI__TRY_SCOPE(capture_of(&c, s->cu_stream, drv, caller));
    if (!c)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    cuabi_status st = keep_buffer(c, a, caller);
    if (st == CUABI_SUCCESS && b != a)
        st = keep_buffer(c, b, caller);
    capture_done();
    CUABI__SCOPE_RETURN(st);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

static cuabi_status capture_refuse_host_work(cuabi__stream *s, const char *what,
                                             const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get_for(&drv, caller));
    if (!s->cu_stream || s->cu_stream == CU_STREAM_LEGACY)
        return CUABI_SUCCESS;
    CUABI__TRY_SCOPE(cuabi__stream_enter(&scope, s, drv));
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUABI__TRY_SCOPE(CUABI__CU_IN(caller, drv, cuStreamGetCaptureInfo, s->cu_stream, &status, NULL,
                            NULL, NULL, NULL, NULL));
    if (status == CU_STREAM_CAPTURE_STATUS_NONE)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_STREAM_CAPTURE, "%s: the stream is being captured, and %s "
                        "runs on the host at once, so it cannot be recorded into a graph (add a "
                        "host node, or use CUDA memory on one side)", caller, what));
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* The cuabi capture the stream of `b` belongs to (held: capture_done), found
 * with a default stream's device current for the query and the caller's
 * context back after (the record needs none). */
static bool capture_of_buffer(capture **c, cuabi__buffer *b, const char *caller)
{
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    bool found = cuabi__driver_get_for(&drv, caller) == CUABI_SUCCESS &&
                 cuabi__stream_enter(&scope, b->stream, drv) == CUABI_SUCCESS &&
                 capture_of(c, b->stream->cu_stream, drv, caller) == CUABI_SUCCESS && *c;
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    return found;
}

static void capture_note_alloc(cuabi__buffer *b)
{
    capture *c;
    if (!capture_of_buffer(&c, b, "cuabi_buffer_allocate"))
        return;
    if (c->nallocs == c->cap_allocs) {
        size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 8;
        alloc_rec *a = cuabi__realloc_in(c->allocs, cap * sizeof *a, "cuabi_buffer_allocate");
        if (!a) {
            /* Then the memory counts as the caller's: kept and freed with the
             * graph. Only an allocation failure leads here. */
            capture_done();
            return;
        }
        c->allocs = a;
        c->cap_allocs = cap;
    }
    c->allocs[c->nallocs].buffer = b;
    c->allocs[c->nallocs].ptr = b->ptr;
    c->nallocs++;
    capture_done();
}

static bool capture_defer_free(cuabi__buffer *b)
{
    capture *c;
    if (!b->res || !b->res->stream_ordered || !b->stream || !b->ptr)
        return false;
    if (!capture_of_buffer(&c, b, "cuabi_buffer_destroy"))
        return false;
    bool deferred = false;
    for (size_t i = c->nallocs; i-- > 0;)
        if (c->allocs[i].buffer == b && c->allocs[i].ptr == b->ptr) {
            /* A temporary of the capture: its free is a node of the graph. */
            c->allocs[i] = c->allocs[--c->nallocs];
            capture_done();
            return false;
        }
    /* Memory from before the capture: freeing it inside the graph would
     * free it at every replay. The graph frees it once, when released. */
    deferred = cuabi__keep_deferred_free(&c->keep, b, "cuabi_buffer_destroy") == CUABI_SUCCESS;
    capture_done();
    return deferred;
}

static const cuabi__capture_ops capture_ops = {
    .keep_launch = capture_keep_launch,
    .keep_object = capture_keep_object,
    .keep_buffers = capture_keep_buffers,
    .refuse_host_work = capture_refuse_host_work,
    .note_alloc = capture_note_alloc,
    .defer_free = capture_defer_free,
};

/* ------------------------------------------------------- begin and end */

/* The stream, a default stream's device current in *scope. */
CUABI__HOT static cuabi_status capture_stream(cuabi__context_scope *scope, cuabi__stream **s,
                                              const cuabi__driver **drv, cuabi_stream *stream,
                                              const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    *s = obj;
    CUABI__TRY(cuabi__graph_driver(drv, caller));
    return cuabi__stream_enter(scope, *s, *drv);
}

CUABI__HOT static cuabi_status capture_begin(cuabi_stream *stream, cuabi__graph *into,
                                              cuabi_capture_mode mode, const char *caller)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__stream *s;
    const cuabi__driver *drv;
    void *obj;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
    s = obj;
    CUABI__CHECK_ARG((unsigned)mode <= CUABI_CAPTURE_MODE_RELAXED,
                     "%s: %d is not a cuabi_capture_mode", caller, (int)mode);
    CUABI__CHECK_ARG(s->cu_stream && s->cu_stream != CU_STREAM_LEGACY,
                     "%s: the legacy default stream cannot be captured (it synchronises with "
                     "every blocking stream); capture a stream made by cuabi_stream_create, or "
                     "the per-thread default stream", caller);
    CUABI__TRY_SCOPE(capture_stream(&scope, &s, &drv, stream, caller));
    if (into && !drv->cuStreamBeginCaptureToGraph)
        CUABI__SCOPE_RETURN(cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the driver lacks "
                            "cuStreamBeginCaptureToGraph (CUDA 12.3)", caller));
    CUstreamCaptureStatus now = CU_STREAM_CAPTURE_STATUS_NONE;
    CUABI__TRY_SCOPE(CUABI__CU_IN(caller, drv, cuStreamGetCaptureInfo, s->cu_stream, &now, NULL, NULL,
                            NULL, NULL, NULL));
    CUABI__CHECK_ARG_SCOPE(now == CU_STREAM_CAPTURE_STATUS_NONE, "%s: the stream is already being "
                     "captured%s; end that capture first (cuabi_graph_capture_end)", caller,
                     now == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? " (and the capture is invalid)"
                                                                 : "");
    if (into) {
        /* One capture at a time into a graph: two would interleave their
         * nodes with no order between them. */
        bool busy = false;
        pthread_mutex_lock(&captures_lock);
        for (capture *c = captures; c && !busy; c = c->next)
            busy = c->into == into;
        pthread_mutex_unlock(&captures_lock);
        CUABI__CHECK_ARG_SCOPE(!busy, "%s: another stream is capturing into this graph; end that "
                         "capture first", caller);
    }
    capture *c = cuabi__calloc_in(1, sizeof *c, caller);
    if (!c)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    cuabi_status st = into ? CUABI__CU_IN(caller, drv, cuStreamBeginCaptureToGraph, s->cu_stream,
                                          into->cu_graph, NULL, NULL, 0,
                                          (CUstreamCaptureMode)mode)
                           : CUABI__CU_IN(caller, drv, cuStreamBeginCapture, s->cu_stream,
                                          (CUstreamCaptureMode)mode);
    if (st != CUABI_SUCCESS) {
        cuabi__free(c);
        CUABI__SCOPE_RETURN(st);
    }
    CUstreamCaptureStatus status;
    st = CUABI__CU_IN(caller, drv, cuStreamGetCaptureInfo, s->cu_stream, &status, &c->id, NULL,
                      NULL, NULL, NULL);
    if (st != CUABI_SUCCESS) {
        /* Undo the capture: nothing was recorded yet. */
        CUgraph g = NULL;
        if (drv->cuStreamEndCapture && CUABI__CU_RAW(drv, cuStreamEndCapture, s->cu_stream, &g) ==
                                           CUDA_SUCCESS && g && !into && drv->cuGraphDestroy)
            CUABI__CU_RELEASE(drv, cuGraphDestroy, g);
        cuabi__free(c);
        CUABI__SCOPE_RETURN(st);
    }
    c->stream = s;
    cuabi__object_retain(&s->base);
    if (into) {
        c->into = into;
        cuabi__object_retain(&into->base);
    }
    pthread_mutex_lock(&captures_lock);
    c->next = captures;
    captures = c;
    /* Before the count: a work path that sees the count finds the hooks. */
    cuabi__capture_register(&capture_ops);
    atomic_fetch_add_explicit(&cuabi__captures_active, 1, memory_order_relaxed);
    pthread_mutex_unlock(&captures_lock);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI__HOT
CUABI_EXTERN(cuabi_status) cuabi_graph_capture_begin(cuabi_stream *stream, cuabi_capture_mode mode)
{
    return capture_begin(stream, NULL, mode, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_capture_begin_to_graph(cuabi_stream *stream,
                                                              cuabi_graph *graph,
                                                              cuabi_capture_mode mode)
{
    cuabi__graph *g;
    CUABI__GET(g, graph, GRAPH);
    return capture_begin(stream, g, mode, __func__);
}

/* Take the record of capture `id` out of the list (NULL if not ours); with
 * no id (the status query failed), the capture begun on `origin`. A record
 * begun on another stream stays: *elsewhere then says so. */
CUABI__HOT
static capture *capture_take(bool have_id, cuuint64_t id, CUstream origin, bool *elsewhere)
{
    pthread_mutex_lock(&captures_lock);
    capture **at = NULL;
    *elsewhere = false;
    for (capture **p = &captures; *p && !at; p = &(*p)->next)
        if (have_id ? (*p)->id == id : (*p)->stream->cu_stream == origin)
            at = p;
    if (at && (*at)->stream->cu_stream != origin) {
        *elsewhere = true;
        at = NULL;
    } else if (!at && have_id) {
        /* Not found by the driver's id (an invalidated capture's id need not
         * be the one it began with): the record cuabi made on this stream is
         * the one ending. Left behind, it would keep alive what later work on
         * the stream names (an H100 run of test_gpu_graph's bad_input_on_a_gpu). */
        for (capture **p = &captures; *p && !at; p = &(*p)->next)
            if ((*p)->stream->cu_stream == origin)
                at = p;
    }
    capture *found = at ? *at : NULL;
    if (found) {
        *at = found->next;
        atomic_fetch_sub_explicit(&cuabi__captures_active, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&captures_lock);
    return found;
}

CUABI__HOT
CUABI_EXTERN(cuabi_status) cuabi_graph_capture_end(cuabi_graph **out, cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY_SCOPE(capture_stream(&scope, &s, &drv, stream, __func__));
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    /* If even the status query fails, end what cuabi began on this stream:
     * a capture must not outlive a failed end (it keeps objects alive). */
    bool known = CUABI__CU(drv, cuStreamGetCaptureInfo, s->cu_stream, &status, &id, NULL, NULL,
                           NULL, NULL) == CUABI_SUCCESS;
    CUABI__CHECK_ARG_SCOPE(!known || status != CU_STREAM_CAPTURE_STATUS_NONE,
                     "%s: the stream is not being captured (begin with "
                     "cuabi_graph_capture_begin)", __func__);
    bool elsewhere;
    capture *c = capture_take(known, id, s->cu_stream, &elsewhere);
    CUABI__CHECK_ARG_SCOPE(!elsewhere, "%s: the capture began on another stream; end it there (this "
                     "stream joined it through an event)", __func__);
    CUgraph cg = NULL;
    cuabi_status st = CUABI__CU(drv, cuStreamEndCapture, s->cu_stream, &cg);
    bool invalidated = status == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    /* Pool frees the capture held back from the legacy stream (memory.c). */
    cuabi__memory_flush_deferred();
    if (st != CUABI_SUCCESS || !cg || invalidated) {
        /* No half graph: whatever the driver made goes, with what the
         * capture kept alive. */
        char why[1024] = "";
        int cu = 0;
        if (st != CUABI_SUCCESS) {
            /* The driver call's message, without our name a second time. */
            const char *m = cuabi_last_error()->message;
            size_t l = strlen(__func__);
            if (strncmp(m, __func__, l) == 0 && m[l] == ':' && m[l + 1] == ' ')
                m += l + 2;
            snprintf(why, sizeof why, "%s", m);
            cu = cuabi_last_error()->cu_result;
        }
        /* A graph given to cuabi_graph_capture_begin_to_graph stays its
         * owner's (capture_free moves what the capture kept to it). When the
         * driver's end itself failed, its capture may live on: end it now,
         * or a later end (cuabi's record gone) would hand out that graph as
         * a new one of its own, destroyed twice. */
        if (st != CUABI_SUCCESS && c && c->into && drv->cuStreamEndCapture) {
            CUgraph again = NULL;
            (void)CUABI__CU_RAW(drv, cuStreamEndCapture, s->cu_stream, &again);
        }
        if (cg && !(c && c->into) && drv->cuGraphDestroy)
            CUABI__CU_RELEASE(drv, cuGraphDestroy, cg);
        if (c)
            capture_free(c);
        if (st == CUABI_SUCCESS || st == CUABI_ERROR_STREAM_CAPTURE || invalidated)
            st = cuabi__error(CUABI_ERROR_STREAM_CAPTURE, "%s: the capture failed, so no graph "
                              "was made%s%s%s", __func__,
                              invalidated ? ": a call not allowed while a stream is captured (a "
                                            "synchronising call, a query, or work on the legacy "
                                            "default stream) invalidated it" : "",
                              why[0] ? ": " : "", why);
        else
            st = cuabi__error(st, "%s: ending the capture failed, so no graph was made: %s",
                              __func__, why);
        cuabi__error_set_cu(cu);
        CUABI__SCOPE_RETURN(st);
    }
    cuabi__graph *g;
    if (c && c->into) {
        /* Captured into a graph: that graph, with what the capture kept. */
        g = c->into;
        cuabi__object_retain(&g->base);
        cuabi__graph_lock(g);
        cuabi__graph_use_device(g, s->device);
        cuabi__graph_unlock(g);
        capture_free(c);
        *out = CUABI__HANDLE(g, cuabi_graph);
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    }
    st = cuabi__graph_wrap(&g, cg, __func__);
    if (st != CUABI_SUCCESS) {
        CUABI__CU_RELEASE(drv, cuGraphDestroy, cg);
        if (c)
            capture_free(c);
        CUABI__SCOPE_RETURN(st);
    }
    cuabi__graph_use_device(g, s->device);
    if (c) {
        /* The graph's keep list is empty: this is a swap and cannot fail. */
        (void)cuabi__keep_move(&g->shared->keep, &c->keep, __func__);
        capture_free(c);
    }
    *out = CUABI__HANDLE(g, cuabi_graph);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    /* The capture is over either way; a failed restore fails the call, and
     * the graph's reference goes back (a graph captured into stays its
     * owner's). */
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, GRAPH, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_capture_status(cuabi_capture_status *out,
                                                      cuabi_stream *stream)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__stream *s;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = CUABI_CAPTURE_STATUS_NONE;
    CUABI__TRY_SCOPE(capture_stream(&scope, &s, &drv, stream, __func__));
    if (!s->cu_stream || s->cu_stream == CU_STREAM_LEGACY)
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUABI__TRY_SCOPE(CUABI__CU(drv, cuStreamGetCaptureInfo, s->cu_stream, &status, NULL, NULL, NULL,
                         NULL, NULL));
    *out = (cuabi_capture_status)status;
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* ------------------------------- conditionals and child graphs in a capture */

/* The graph that `s` captures into (a capture of
 * cuabi_graph_capture_begin_to_graph, joined by `s`), retained, and the
 * capture's current dependencies (the driver's array: read it before the
 * next call on the stream). */
static cuabi_status capture_into(cuabi__graph **out, const CUgraphNode **deps, size_t *ndeps,
                                 cuabi__stream *s, const cuabi__driver *drv, const char *caller)
{
    *out = NULL;
    CUABI__CHECK_ARG(s->cu_stream && s->cu_stream != CU_STREAM_LEGACY, "%s: the legacy default "
                     "stream is never captured", caller);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph cg = NULL;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuStreamGetCaptureInfo, s->cu_stream, &status, NULL,
                            &cg, deps, NULL, ndeps));
    CUABI__CHECK_ARG(status != CU_STREAM_CAPTURE_STATUS_NONE, "%s: the stream is not being "
                     "captured (begin with cuabi_graph_capture_begin_to_graph; a builder whose "
                     "building ended takes no more work)", caller);
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return cuabi__error(CUABI_ERROR_STREAM_CAPTURE, "%s: the stream's capture was "
                            "invalidated (a call not allowed during a capture); end it "
                            "(cuabi_graph_capture_end) and begin again", caller);
    capture *c;
    CUABI__TRY(capture_of(&c, s->cu_stream, drv, caller));
    if (!c)
        return cuabi__error(CUABI_ERROR_STREAM_CAPTURE, "%s: the stream is captured by another "
                            "library, not by cuabi: cuabi cannot keep what the node uses alive "
                            "with that graph", caller);
    cuabi_status st = CUABI_SUCCESS;
    if (!c->into)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the capture was begun by "
                          "cuabi_graph_capture_begin, whose graph is the driver's until the "
                          "capture ends; begin it with cuabi_graph_capture_begin_to_graph into a "
                          "graph of cuabi_graph_create to add conditional or child graph nodes",
                          caller);
    else if (c->into->cu_graph != cg)
        st = cuabi__error(CUABI_ERROR_STREAM_CAPTURE, "%s: the driver reports another graph for "
                          "the capture than the one cuabi began it into", caller);
    else {
        *out = c->into;
        cuabi__object_retain(&c->into->base);
    }
    capture_done();
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_graph_capture_conditional_handle(uint64_t *out,
                                                                  cuabi_stream *stream,
                                                                  unsigned int default_value,
                                                                  unsigned int flags)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__stream *s;
    const cuabi__driver *drv;
    cuabi__graph *g;
    const CUgraphNode *deps;
    size_t ndeps;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__TRY_SCOPE(capture_stream(&scope, &s, &drv, stream, __func__));
    CUABI__TRY_SCOPE(capture_into(&g, &deps, &ndeps, s, drv, __func__));
    cuabi_status st = cuabi__graph_cond_create(out, g, s->device, default_value, flags, __func__);
    cuabi__object_release(&g->base);
    scope_st = st;
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_capture_add_conditional(cuabi_graph_node **out,
                                                               cuabi_stream *stream,
                                                               uint64_t handle,
                                                               cuabi_graph_conditional_type type,
                                                               unsigned int body_count)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__stream *s;
    const cuabi__driver *drv;
    cuabi__graph *g;
    const CUgraphNode *deps;
    size_t ndeps;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY_SCOPE(capture_stream(&scope, &s, &drv, stream, __func__));
    CUABI__TRY_SCOPE(capture_into(&g, &deps, &ndeps, s, drv, __func__));
    cuabi_status st = cuabi__graph_capture_add_conditional(out, g, deps, ndeps, s->cu_stream,
                                                           handle, type, body_count, __func__);
    cuabi__object_release(&g->base);
    scope_st = st;
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, GRAPH_NODE, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_graph_capture_add_child(cuabi_graph_node **out,
                                                         cuabi_stream *stream,
                                                         cuabi_graph *child)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__stream *s;
    const cuabi__driver *drv;
    cuabi__graph *g, *ch;
    const CUgraphNode *deps;
    size_t ndeps;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(ch, child, GRAPH);
    CUABI__TRY_SCOPE(capture_stream(&scope, &s, &drv, stream, __func__));
    /* A graph still being captured into has no end yet to copy. */
    bool busy = false;
    pthread_mutex_lock(&captures_lock);
    for (capture *c = captures; c && !busy; c = c->next)
        busy = c->into == ch;
    pthread_mutex_unlock(&captures_lock);
    CUABI__CHECK_ARG_SCOPE(!busy, "%s: the child graph is still being captured into; end its capture "
                     "(cuabi_graph_capture_end) first", __func__);
    CUABI__TRY_SCOPE(capture_into(&g, &deps, &ndeps, s, drv, __func__));
    cuabi_status st = cuabi__graph_capture_add_child(out, g, deps, ndeps, s->cu_stream, ch,
                                                     __func__);
    cuabi__object_release(&g->base);
    scope_st = st;
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, GRAPH_NODE, __func__);
}

/* ------------------------------------------------- host functions */

/* On an ordinary stream: one run, then the payload goes (on the driver's
 * thread, as documented: release must not call CUDA). */
static void CUDA_CB host_call_once(void *p)
{
    cuabi__host_call *h = p;
    h->fn(h->payload);
    if (h->release)
        h->release(h->payload);
    cuabi__free(h);
}

/* Captured: a host node that may run at every launch of every executable;
 * the graph's keep list owns h and releases the payload with the graph. */
static void CUDA_CB host_call_captured(void *p)
{
    cuabi__host_call *h = p;
    h->fn(h->payload);
}

CUABI_EXTERN(cuabi_status) cuabi_stream_launch_host_func(cuabi_stream *stream,
                                                         cuabi_graph_host_fn fn, void *payload,
                                                         cuabi_graph_host_release_fn release)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    void *obj;
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, __func__));
    cuabi__stream *s = obj;
    CUABI__CHECK_ARG(fn, "%s: fn is NULL", __func__);
    CUABI__TRY(cuabi__driver_get_for(&drv, __func__));
    CUABI__TRY_SCOPE(cuabi__stream_enter(&scope, s, drv));
    cuabi__host_call *h = cuabi__malloc(sizeof *h);
    if (!h)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    h->fn = fn;
    h->payload = payload;
    h->release = release;
    /* The legacy default stream is never captured (work on it while a
     * blocking stream is captured is the driver's to refuse). Other streams:
     * one cheap query, and the capture's record only when there is one. */
    capture *c = NULL;
    cuabi_status st = CUABI_SUCCESS;
    if (s->cu_stream && s->cu_stream != CU_STREAM_LEGACY) {
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        st = CUABI__CU(drv, cuStreamIsCapturing, s->cu_stream, &status);
        if (st == CUABI_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
            st = capture_of(&c, s->cu_stream, drv, __func__);
            if (st == CUABI_SUCCESS && !c)
                st = cuabi__error(CUABI_ERROR_STREAM_CAPTURE, "%s: the stream is being "
                                  "captured%s, but not by cuabi_graph_capture_begin: cuabi "
                                  "cannot know when that graph and its executables are gone, "
                                  "so the payload would have no owner (capture with "
                                  "cuabi_graph_capture_begin, or add a host node to a graph: "
                                  "cuabi_graph_add_host)", __func__,
                                  status == CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      ? " (and the capture is invalid)" : "");
        }
    }
    if (st == CUABI_SUCCESS && c) {
        /* Kept first, launched second, with the capture's lock held
         * throughout: a failed launch takes back the entry it just added
         * (the last one) without releasing the caller's payload. */
        st = cuabi__keep_host_call(&c->keep, h, __func__);
        if (st == CUABI_SUCCESS) {
            st = CUABI__CU(drv, cuLaunchHostFunc, s->cu_stream, host_call_captured, h);
            if (st != CUABI_SUCCESS)
                c->keep.count--;
        }
        capture_done();
    } else if (st == CUABI_SUCCESS) {
        st = CUABI__CU(drv, cuLaunchHostFunc, s->cu_stream, host_call_once, h);
    }
    if (st != CUABI_SUCCESS)
        cuabi__free(h);
    CUABI__SCOPE_RETURN(st);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}
