/* Collectives through NCCL (api/nccl.toml): unique ids, communicators,
 * the collectives over buffers and views, groups and registrations.
 *
 * How a communicator made by rank is set up, and why (docs/distributed.md):
 * NCCL's blocking init waits for every rank for ever, so cuabi makes it in
 * NCCL's nonblocking mode and polls ncclCommGetAsyncError against a
 * deadline, aborting it when the deadline passes. But a nonblocking
 * communicator launches every later collective from a thread NCCL starts
 * for the call (NCCL 2.2x's ncclGroupEnd), tens of microseconds each. So,
 * unless the caller asks for the nonblocking mode, the ranks then split the
 * nonblocking "setup" communicator into a blocking child sharing its
 * resources (a split of a nonblocking parent is itself nonblocking: polled
 * against the same deadline). Collectives run on the child at NCCL's own
 * cost; later splits split the setup communicator again, the same way.
 * The setup communicator lives as long as the child (destroyed after it). */
#include "platform/nccl_lib.h"
#include "runtime/capture.h"
#include "runtime/memory.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/checked.h"

enum { COMM_LIVE = 0, COMM_FINALIZED = 1, COMM_ABORTED = 2 };

typedef struct cuabi__ncomm {
    cuabi__object base;
    cuabi__device *device;            /* retained */
    const cuabi__nccl *nccl;
    cuabi__nccl_comm comm;            /* what collectives use */
    cuabi__nccl_comm setup;           /* the nonblocking parent of `comm`, or NULL */
    int rank, nranks;
    int64_t timeout_ms;               /* resolved: > 0, or < 0 for none */
    bool nonblocking;                 /* `comm` is nonblocking */
    _Atomic int state;
    /* The options, for the communicators split from this one. */
    int cga_cluster_size, min_ctas, max_ctas, split_share;
    char *net_name, *comm_name;
} cuabi__ncomm;

typedef struct cuabi__nreg {
    cuabi__object base;
    cuabi__ncomm *comm;               /* retained */
    cuabi__buffer *buffer;            /* its memory retained */
    void *handle;
} cuabi__nreg;

/* ------------------------------------------------------------ helpers */

/* An NCCL call, with the library's fault injection (as CUABI__CU has it):
 * an injected fault returns ncclInternalError without calling NCCL. */
#define NCALL(n, fn, ...)                                                     \
    (CUABI__UNLIKELY(atomic_load_explicit(&cuabi__faults_armed, memory_order_relaxed)) && \
             cuabi__fault_fires(#fn)                                           \
         ? CUABI__NCCL_INTERNAL_ERROR                                          \
         : (n)->fn(__VA_ARGS__))

/* A release-path NCCL call (destroy, abort, deregister): it always runs, in
 * RELAXED capture mode (platform/release.h: NCCL frees memory and
 * synchronizes streams through the CUDA runtime, which shares the thread's
 * capture mode with the driver); an injected fault is reported after it. */
enum { REL_DESTROY, REL_ABORT, REL_DEREGISTER };
static const char *const release_entry[] = { "ncclCommDestroy", "ncclCommAbort",
                                             "ncclCommDeregister" };

static cuabi__nccl_result release_call(const cuabi__nccl *n, int what, cuabi__nccl_comm c,
                                       void *handle)
{
    const cuabi__driver *drv = NULL;
    bool relax = cuabi__driver_get_for(&drv, release_entry[what]) == CUABI_SUCCESS;
    if (relax)
        cuabi__release_enter_slow(drv);
    cuabi__nccl_result r = what == REL_DESTROY ? n->ncclCommDestroy(c)
                           : what == REL_ABORT ? n->ncclCommAbort(c)
                                               : n->ncclCommDeregister(c, handle);
    if (relax)
        (void)cuabi__release_leave_slow(drv, CUDA_SUCCESS);
    if (atomic_load_explicit(&cuabi__faults_armed, memory_order_relaxed) &&
        cuabi__fault_fires(release_entry[what]))
        r = CUABI__NCCL_INTERNAL_ERROR;
    return r;
}

static void abort_raw(const cuabi__nccl *n, cuabi__nccl_comm c)
{
    if (c)
        (void)release_call(n, REL_ABORT, c, NULL);
}

static cuabi_status nccl_error(const cuabi__nccl *n, cuabi__nccl_result r, cuabi__nccl_comm c,
                               const char *entry, const char *caller)
{
    char text[1024];
    return cuabi__error(CUABI_ERROR_NCCL, "%s: %s failed: %s", caller, entry,
                        cuabi__nccl_describe(text, sizeof text, n, r, c));
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waiting: yield for a while, then sleep, growing to 1 ms. */
static void backoff(unsigned *round)
{
    if (*round < 64) {
        (*round)++;
        sched_yield();
        return;
    }
    unsigned us = *round < 1000 ? *round : 1000;
    *round += *round / 4 + 1;
    struct timespec ts = { 0, (long)us * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int64_t resolve_timeout(int64_t requested)
{
    if (requested != 0)
        return requested;
    const char *env = getenv("CUABI_NCCL_TIMEOUT_MS");
    if (env && *env) {
        char *end;
        errno = 0;
        long long v = strtoll(env, &end, 10);
        if (errno == 0 && *end == '\0' && v != 0)
            return (int64_t)v;
    }
    return CUABI_NCCL_DEFAULT_TIMEOUT_MS;
}

/* Poll the n communicators until none is in progress: success, the first
 * error NCCL reports (CUABI_ERROR_NCCL), or CUABI_ERROR_TIMEOUT once
 * `timeout_ms` (< 0: none) has passed. Aborts nothing: the caller does. */
static cuabi_status wait_ready(const cuabi__nccl *n, cuabi__nccl_comm *comms, int count,
                               int64_t timeout_ms, const char *what, const char *caller)
{
    int64_t start = now_ms();
    unsigned round = 0;
    for (;;) {
        bool pending = false;
        for (int i = 0; i < count; i++) {
            if (!comms[i])
                continue;
            cuabi__nccl_result e = CUABI__NCCL_SUCCESS;
            cuabi__nccl_result r = NCALL(n, ncclCommGetAsyncError, comms[i], &e);
            if (r != CUABI__NCCL_SUCCESS)
                return nccl_error(n, r, comms[i], "ncclCommGetAsyncError", caller);
            if (e == CUABI__NCCL_IN_PROGRESS)
                pending = true;
            else if (e != CUABI__NCCL_SUCCESS)
                return nccl_error(n, e, comms[i], what, caller);
        }
        if (!pending)
            return CUABI_SUCCESS;
        int64_t waited = now_ms() - start;
        if (timeout_ms >= 0 && waited >= timeout_ms)
            return cuabi__error(CUABI_ERROR_TIMEOUT, "%s: %s did not finish within %lld ms: a "
                                "rank did not arrive or stopped answering (is every rank "
                                "started, with the same unique id and world size? can they "
                                "reach each other: NCCL_SOCKET_IFNAME, firewalls? "
                                "NCCL_DEBUG=INFO says more); the communicator was aborted",
                                caller, what, (long long)timeout_ms);
        backoff(&round);
    }
}

static void fill_config(cuabi__nccl_config *c, const cuabi__ncomm *o, int blocking, int share)
{
    memset(c, 0, sizeof *c);
    c->size = sizeof *c;
    c->magic = CUABI__NCCL_CONFIG_MAGIC;
    c->version = CUABI__NCCL_CONFIG_VERSION;
    c->blocking = blocking;
    c->cga_cluster_size = o->cga_cluster_size >= 0 ? o->cga_cluster_size : CUABI__NCCL_UNDEF_INT;
    c->min_ctas = o->min_ctas >= 0 ? o->min_ctas : CUABI__NCCL_UNDEF_INT;
    c->max_ctas = o->max_ctas >= 0 ? o->max_ctas : CUABI__NCCL_UNDEF_INT;
    c->net_name = o->net_name;
    c->split_share = share >= 0 ? share : CUABI__NCCL_UNDEF_INT;
    c->traffic_class = CUABI__NCCL_UNDEF_INT;
    c->comm_name = o->comm_name;
}

static void ncomm_free(cuabi__ncomm *o)
{
    if (o->device)
        cuabi__object_release(&o->device->base);
    cuabi__free(o->net_name);
    cuabi__free(o->comm_name);
    cuabi__free(o);
}

static void ncomm_destroy(cuabi__object *self)
{
    cuabi__ncomm *o = (cuabi__ncomm *)self;
    if (atomic_load(&o->state) != COMM_ABORTED) {
        if (o->comm)
            (void)release_call(o->nccl, REL_DESTROY, o->comm, NULL);
        if (o->setup)
            (void)release_call(o->nccl, REL_DESTROY, o->setup, NULL);
    }
    ncomm_free(o);
}

/* A communicator object with the options read (not yet holding an NCCL
 * communicator). `from`: inherit what `opts` (NULL) does not say. */
static cuabi_status ncomm_new(cuabi__ncomm **out, cuabi__device *dev, const cuabi__nccl *n,
                              const cuabi_nccl_comm_options *opts, const cuabi__ncomm *from)
{
    cuabi__ncomm *o = cuabi__calloc(1, sizeof *o);
    if (!o)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi__object_retain(&dev->base);
    o->device = dev;
    o->nccl = n;
    if (opts) {
        o->timeout_ms = resolve_timeout(opts->timeout_ms);
        o->nonblocking = opts->nonblocking != 0;
        o->cga_cluster_size = opts->cga_cluster_size;
        o->min_ctas = opts->min_ctas;
        o->max_ctas = opts->max_ctas;
        o->split_share = opts->split_share;
    } else if (from) {
        o->timeout_ms = from->timeout_ms;
        o->nonblocking = from->nonblocking;
        o->cga_cluster_size = from->cga_cluster_size;
        o->min_ctas = from->min_ctas;
        o->max_ctas = from->max_ctas;
        o->split_share = from->split_share;
    } else {
        o->timeout_ms = resolve_timeout(0);
        o->cga_cluster_size = o->min_ctas = o->max_ctas = o->split_share = -1;
    }
    const char *net = opts ? opts->net_name : from ? from->net_name : NULL;
    const char *name = opts ? opts->comm_name : from ? from->comm_name : NULL;
    if ((net && !(o->net_name = cuabi__strdup(net))) ||
        (name && !(o->comm_name = cuabi__strdup(name)))) {
        ncomm_free(o);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    *out = o;
    return CUABI_SUCCESS;
}

static cuabi_status ncomm_publish(cuabi_nccl_comm **out, cuabi__ncomm *o)
{
    cuabi_status st = cuabi__handle_register(&o->base, CUABI__T_NCCL_COMM, ncomm_destroy);
    if (st != CUABI_SUCCESS) {
        abort_raw(o->nccl, o->comm);
        abort_raw(o->nccl, o->setup);
        ncomm_free(o);
        return st;
    }
    *out = CUABI__HANDLE(o, cuabi_nccl_comm);
    return CUABI_SUCCESS;
}

static cuabi_status check_options(const cuabi_nccl_comm_options *opts, const char *caller)
{
    if (!opts)
        return CUABI_SUCCESS;
    if (opts->version < 1 || opts->version > CUABI_NCCL_COMM_OPTIONS_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION, "%s: cuabi_nccl_comm_options version "
                            "%u is unknown (this library knows 1 to %d)", caller,
                            opts->version, CUABI_NCCL_COMM_OPTIONS_VERSION);
    if (opts->nonblocking != 0 && opts->nonblocking != 1)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.nonblocking is %d; "
                            "0 or 1", caller, opts->nonblocking);
    const int v[4] = { opts->cga_cluster_size, opts->min_ctas, opts->max_ctas, opts->split_share };
    static const char *const names[4] = { "cga_cluster_size", "min_ctas", "max_ctas",
                                          "split_share" };
    for (int i = 0; i < 4; i++)
        if (v[i] < -1)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: options.%s is %d; -1 (NCCL's "
                                "default) or a value NCCL takes", caller, names[i], v[i]);
    return CUABI_SUCCESS;
}

/* This thread's groups: their depth, and the nonblocking communicators used
 * inside (retained), which the outermost end waits for. */
static _Thread_local int group_depth;
static _Thread_local cuabi__ncomm **group_comms;
static _Thread_local size_t group_len, group_cap;

static cuabi_status refuse_in_group(const char *caller)
{
    if (group_depth > 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: called inside a group "
                            "(cuabi_nccl_group_start); make communicators outside groups, "
                            "several devices of one process with cuabi_nccl_comm_init_all",
                            caller);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------ ids and init */

CUABI_EXTERN(cuabi_status) cuabi_nccl_version(int *out)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    const cuabi__nccl *n;
    CUABI__TRY(cuabi__nccl_get(&n));
    *out = cuabi__nccl_info()->version;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_get_unique_id(cuabi_nccl_unique_id *out)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    const cuabi__nccl *n;
    CUABI__TRY(cuabi__nccl_get(&n));
    cuabi__nccl_id id;
    memset(&id, 0, sizeof id);
    cuabi__nccl_result r = NCALL(n, ncclGetUniqueId, &id);
    if (r != CUABI__NCCL_SUCCESS)
        return nccl_error(n, r, NULL, "ncclGetUniqueId", __func__);
    memcpy(out->internal, id.internal, sizeof out->internal);
    return CUABI_SUCCESS;
}

/* Split the nonblocking `setup` (a ready communicator, or a parent's) into
 * a blocking communicator of the same ranks (color 0, key = rank), shared
 * resources, polled against o's timeout. On failure the child is aborted. */
static cuabi_status blocking_child(cuabi__nccl_comm *child, cuabi__ncomm *o,
                                   cuabi__nccl_comm setup, int color, int key, const char *caller)
{
    const cuabi__nccl *n = o->nccl;
    if (!n->ncclCommSplit)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the loaded NCCL lacks ncclCommSplit "
                            "(2.18); set options.nonblocking = 1 or timeout_ms < 0", caller);
    cuabi__nccl_config cfg;
    fill_config(&cfg, o, 1, 1);
    *child = NULL;
    cuabi__nccl_result r = NCALL(n, ncclCommSplit, setup, color, key, child, &cfg);
    if (r != CUABI__NCCL_SUCCESS && r != CUABI__NCCL_IN_PROGRESS) {
        abort_raw(n, *child);
        *child = NULL;
        return nccl_error(n, r, setup, "ncclCommSplit", caller);
    }
    cuabi__nccl_comm both[2] = { setup, *child };
    cuabi_status st = wait_ready(n, both, 2, o->timeout_ms, "ncclCommSplit", caller);
    if (st != CUABI_SUCCESS) {
        abort_raw(n, *child);
        *child = NULL;
    }
    return st;
}

/* rank and size from NCCL (splits: the new communicator says). */
static cuabi_status read_rank(cuabi__ncomm *o, const char *caller)
{
    cuabi__nccl_result r = NCALL(o->nccl, ncclCommUserRank, o->comm, &o->rank);
    if (r == CUABI__NCCL_SUCCESS)
        r = NCALL(o->nccl, ncclCommCount, o->comm, &o->nranks);
    return r == CUABI__NCCL_SUCCESS ? CUABI_SUCCESS
                                    : nccl_error(o->nccl, r, o->comm, "ncclCommUserRank", caller);
}

static void ncomm_abort(cuabi__ncomm *o);

/* The end of a call that made a communicator for *out (NULL: none, a
 * split's CUABI_NCCL_SPLIT_NOCOLOR): a failed restore fails the call, so
 * the new communicator is aborted, as every failure after its init is (a
 * destroy could wait on peers), and released. */
static cuabi_status comm_made_end(const cuabi__context_scope *scope, cuabi_status st,
                                  cuabi_nccl_comm **out, const char *caller)
{
    if (cuabi__context_end(scope, st) == CUABI_SUCCESS || st != CUABI_SUCCESS || !*out)
        return st;
    void *obj;
    if (cuabi__handle_get(*out, CUABI__T_NCCL_COMM, &obj, caller) == CUABI_SUCCESS) {
        cuabi__ncomm *o = obj;
        const cuabi__driver *drv;
        cuabi__context_scope again = CUABI__CONTEXT_SCOPE_NONE;   /* as cuabi_nccl_comm_abort */
        if (cuabi__driver_get(&drv) == CUABI_SUCCESS)
            (void)cuabi__device_enter(&again, o->device, drv);
        ncomm_abort(o);
        (void)cuabi__context_end(&again, CUABI_SUCCESS);
        cuabi__object_release(&o->base);
    }
    *out = NULL;
    return cuabi__context_made_lost(caller);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_init_rank(cuabi_nccl_comm **out, cuabi_device *device,
                                                     int nranks, const cuabi_nccl_unique_id *id,
                                                     int rank, const cuabi_nccl_comm_options *options)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi__device *dev;
    CUABI__GET(dev, device, DEVICE);
    CUABI__CHECK_ARG(id, "%s: id is NULL", __func__);
    CUABI__CHECK_ARG(nranks >= 1, "%s: nranks is %d; at least 1", __func__, nranks);
    CUABI__CHECK_ARG(rank >= 0 && rank < nranks, "%s: rank %d is not in [0, %d)", __func__,
                     rank, nranks);
    CUABI__TRY(check_options(options, __func__));
    CUABI__TRY(refuse_in_group(__func__));
    const cuabi__nccl *n;
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__nccl_get(&n));
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, dev, drv));
    cuabi__ncomm *o;
    CUABI__TRY_SCOPE(ncomm_new(&o, dev, n, options, NULL));
    o->rank = rank;
    o->nranks = nranks;
    bool wait = o->timeout_ms >= 0;
    cuabi__nccl_config cfg;
    fill_config(&cfg, o, wait ? 0 : 1, o->split_share);
    cuabi__nccl_id nid;
    memcpy(nid.internal, id->internal, sizeof nid.internal);
    cuabi__nccl_comm raw = NULL;
    cuabi__nccl_result r = NCALL(n, ncclCommInitRankConfig, &raw, nranks, nid, rank, &cfg);
    cuabi_status st = CUABI_SUCCESS;
    if (r != CUABI__NCCL_SUCCESS && (r != CUABI__NCCL_IN_PROGRESS || !wait))
        st = nccl_error(n, r, raw, "ncclCommInitRankConfig", __func__);
    if (st == CUABI_SUCCESS && wait)
        st = wait_ready(n, &raw, 1, o->timeout_ms, "ncclCommInitRankConfig", __func__);
    if (st == CUABI_SUCCESS && wait && !o->nonblocking) {
        o->setup = raw;
        st = blocking_child(&o->comm, o, raw, 0, rank, __func__);
    } else {
        o->comm = raw;
        o->nonblocking = wait;
    }
    if (st != CUABI_SUCCESS) {
        if (o->setup)
            abort_raw(n, o->comm); /* the child, if it was made */
        abort_raw(n, raw);
        ncomm_free(o);
        CUABI__SCOPE_RETURN(st);
    }
    CUABI__SCOPE_RETURN(ncomm_publish(out, o));
scope_leave:
    return comm_made_end(&scope, scope_st, out, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_init_all(cuabi_nccl_comm **out, cuabi_device **devices,
                                                    int ndev, const cuabi_nccl_comm_options *options)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(ndev >= 1 && ndev <= 4096, "%s: ndev is %d; 1 to 4096", __func__, ndev);
    for (int i = 0; i < ndev; i++)
        out[i] = NULL;
    CUABI__CHECK_ARG(devices, "%s: devices is NULL", __func__);
    cuabi__device **devs = cuabi__calloc((size_t)ndev, sizeof *devs);
    if (!devs)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi_status st = CUABI_SUCCESS;
    for (int i = 0; i < ndev && st == CUABI_SUCCESS; i++) {
        void *obj;
        st = cuabi__handle_get(devices[i], CUABI__T_DEVICE, &obj, __func__);
        devs[i] = obj;
        for (int j = 0; st == CUABI_SUCCESS && j < i; j++)
            if (devs[j] == devs[i])
                st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: devices[%d] and devices[%d] "
                                  "are the same device (%d); one rank per device", __func__, j,
                                  i, devs[i]->ordinal);
    }
    const cuabi__nccl *n = NULL;
    const cuabi__driver *drv = NULL;
    if (st == CUABI_SUCCESS)
        st = check_options(options, __func__);
    if (st == CUABI_SUCCESS)
        st = refuse_in_group(__func__);
    if (st == CUABI_SUCCESS)
        st = cuabi__nccl_get(&n);
    if (st == CUABI_SUCCESS)
        st = cuabi__driver_get(&drv);
    cuabi__ncomm **objs = st == CUABI_SUCCESS ? cuabi__calloc((size_t)ndev, sizeof *objs) : NULL;
    if (st == CUABI_SUCCESS && !objs)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    for (int i = 0; st == CUABI_SUCCESS && i < ndev; i++) {
        st = ncomm_new(&objs[i], devs[i], n, options, NULL);
        if (st == CUABI_SUCCESS) {
            objs[i]->rank = i;
            objs[i]->nranks = ndev;
        }
    }
    cuabi__nccl_id id;
    cuabi__nccl_result r = CUABI__NCCL_SUCCESS;
    if (st == CUABI_SUCCESS && (r = NCALL(n, ncclGetUniqueId, &id)) != CUABI__NCCL_SUCCESS)
        st = nccl_error(n, r, NULL, "ncclGetUniqueId", __func__);
    /* Every rank is in this process: no peer can fail to arrive, so the
     * communicators are blocking from the start (no setup, no split). */
    if (st == CUABI_SUCCESS && (r = NCALL(n, ncclGroupStart)) != CUABI__NCCL_SUCCESS)
        st = nccl_error(n, r, NULL, "ncclGroupStart", __func__);
    /* Each rank's device is made current in turn: the caller's context comes
     * back after (the last device's left current moved torch's current device
     * and later work of the caller's, 2 x H100, 2026-11-28). */
    cuabi__context_scope caller = CUABI__CONTEXT_SCOPE_NONE;
    if (st == CUABI_SUCCESS)
        st = cuabi__context_save(&caller, drv);
    if (st == CUABI_SUCCESS) {
        cuabi_status inner = CUABI_SUCCESS;
        for (int i = 0; i < ndev && inner == CUABI_SUCCESS; i++) {
            cuabi__nccl_config cfg;
            fill_config(&cfg, objs[i], 1, objs[i]->split_share);
            inner = cuabi__device_enter(&caller, devs[i], drv);   /* the saved one stays */
            if (inner == CUABI_SUCCESS &&
                (r = NCALL(n, ncclCommInitRankConfig, &objs[i]->comm, ndev, id, i, &cfg)) !=
                    CUABI__NCCL_SUCCESS)
                inner = nccl_error(n, r, NULL, "ncclCommInitRankConfig", __func__);
        }
        r = NCALL(n, ncclGroupEnd);
        st = inner;
        if (st == CUABI_SUCCESS && r != CUABI__NCCL_SUCCESS)
            st = nccl_error(n, r, NULL, "ncclGroupEnd", __func__);
    }
    if (drv)
        st = cuabi__context_leave(&caller, drv, st);
    for (int i = 0; objs && i < ndev; i++) {
        if (!objs[i])
            continue;
        objs[i]->nonblocking = false;
        if (st == CUABI_SUCCESS) {
            st = ncomm_publish(&out[i], objs[i]); /* frees objs[i] on failure */
        } else {
            abort_raw(n, objs[i]->comm);
            ncomm_free(objs[i]);
        }
        objs[i] = NULL;
    }
    if (st != CUABI_SUCCESS)
        for (int i = 0; i < ndev; i++)
            if (out[i]) {
                cuabi__handle_release(out[i], CUABI__T_NCCL_COMM);
                out[i] = NULL;
            }
    cuabi__free(objs);
    cuabi__free(devs);
    return st;
}

/* The communicator behind a handle, refused once aborted or finalized. */
static inline cuabi_status live_comm(cuabi__ncomm **o, cuabi_nccl_comm *comm, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(comm, CUABI__T_NCCL_COMM, &obj, caller));
    *o = obj;
    int s = atomic_load_explicit(&(*o)->state, memory_order_acquire);
    if (CUABI__UNLIKELY(s != COMM_LIVE))
        return cuabi__error(CUABI_ERROR_NCCL, "%s: the communicator was %s; make a new one",
                            caller, s == COMM_ABORTED ? "aborted" : "finalized");
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_split(cuabi_nccl_comm **out, cuabi_nccl_comm *comm,
                                                 int color, int key,
                                                 const cuabi_nccl_comm_options *options)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi__ncomm *p;
    CUABI__TRY(live_comm(&p, comm, __func__));
    CUABI__CHECK_ARG(color >= 0 || color == CUABI_NCCL_SPLIT_NOCOLOR, "%s: color %d is "
                     "negative; a color is >= 0, or CUABI_NCCL_SPLIT_NOCOLOR", __func__, color);
    CUABI__TRY(check_options(options, __func__));
    CUABI__TRY(refuse_in_group(__func__));
    const cuabi__nccl *n = p->nccl;
    if (!n->ncclCommSplit)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the loaded NCCL lacks ncclCommSplit "
                            "(2.18)", __func__);
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, p->device, drv));
    cuabi__ncomm *o;
    CUABI__TRY_SCOPE(ncomm_new(&o, p->device, n, options, p));
    /* Split the nonblocking communicator when there is one (the wait is
     * then polled); a blocking parent splits blocking. */
    cuabi__nccl_comm parent = p->setup ? p->setup : p->comm;
    bool polled = p->setup || p->nonblocking;
    bool wait = polled && o->timeout_ms >= 0;
    cuabi__nccl_config cfg;
    fill_config(&cfg, o, polled ? 0 : 1, o->split_share);
    cuabi__nccl_comm raw = NULL;
    cuabi__nccl_result r = NCALL(n, ncclCommSplit, parent, color, key, &raw, &cfg);
    cuabi_status st = CUABI_SUCCESS;
    if (r != CUABI__NCCL_SUCCESS && (r != CUABI__NCCL_IN_PROGRESS || !polled))
        st = nccl_error(n, r, parent, "ncclCommSplit", __func__);
    if (st == CUABI_SUCCESS && polled) {
        cuabi__nccl_comm both[2] = { parent, raw };
        st = wait_ready(n, both, 2, wait ? o->timeout_ms : -1, "ncclCommSplit", __func__);
    }
    if (st == CUABI_SUCCESS && !raw) { /* CUABI_NCCL_SPLIT_NOCOLOR */
        ncomm_free(o);
        CUABI__SCOPE_RETURN(CUABI_SUCCESS);
    }
    if (st == CUABI_SUCCESS && polled && !o->nonblocking) {
        o->setup = raw;
        st = blocking_child(&o->comm, o, raw, 0, key, __func__);
    } else {
        o->comm = raw;
        o->nonblocking = polled;
    }
    if (st == CUABI_SUCCESS)
        st = read_rank(o, __func__);
    if (st != CUABI_SUCCESS) {
        if (o->setup)
            abort_raw(n, o->comm); /* the child, if it was made */
        abort_raw(n, raw);
        ncomm_free(o);
        CUABI__SCOPE_RETURN(st);
    }
    CUABI__SCOPE_RETURN(ncomm_publish(out, o));
scope_leave:
    return comm_made_end(&scope, scope_st, out, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_finalize(cuabi_nccl_comm *comm)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__ncomm *o;
    CUABI__TRY(live_comm(&o, comm, __func__));
    CUABI__TRY(refuse_in_group(__func__));
    int expected = COMM_LIVE;
    if (!atomic_compare_exchange_strong(&o->state, &expected, COMM_FINALIZED))
        return cuabi__error(CUABI_ERROR_NCCL, "%s: the communicator was aborted or finalized "
                            "meanwhile", __func__);
    const cuabi__nccl *n = o->nccl;
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, o->device, drv));
    cuabi__nccl_comm list[2] = { o->comm, o->setup };
    for (int i = 0; i < 2; i++) {
        if (!list[i])
            continue;
        cuabi__nccl_result r = NCALL(n, ncclCommFinalize, list[i]);
        bool polled = i == 1 || o->nonblocking;
        cuabi_status st = CUABI_SUCCESS;
        if (r != CUABI__NCCL_SUCCESS && (r != CUABI__NCCL_IN_PROGRESS || !polled))
            st = nccl_error(n, r, list[i], "ncclCommFinalize", __func__);
        if (st == CUABI_SUCCESS && polled)
            st = wait_ready(n, &list[i], 1, o->timeout_ms, "ncclCommFinalize", __func__);
        if (st != CUABI_SUCCESS) {
            atomic_store(&o->state, COMM_ABORTED);
            abort_raw(n, o->comm);
            abort_raw(n, o->setup);
            CUABI__SCOPE_RETURN(st);
        }
    }
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

/* Abort both NCCL communicators once (the state says who did). */
static void ncomm_abort(cuabi__ncomm *o)
{
    if (atomic_exchange(&o->state, COMM_ABORTED) == COMM_ABORTED)
        return;
    abort_raw(o->nccl, o->comm);
    abort_raw(o->nccl, o->setup);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_abort(cuabi_nccl_comm *comm)
{
    cuabi__ncomm *o;
    CUABI__GET(o, comm, NCCL_COMM);
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (cuabi__driver_get(&drv) == CUABI_SUCCESS)
        (void)cuabi__device_enter(&scope, o->device, drv);
    ncomm_abort(o);
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    cuabi_error_clear();
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_rank(int *out, cuabi_nccl_comm *comm)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    cuabi__ncomm *o;
    CUABI__GET(o, comm, NCCL_COMM);
    *out = o->rank;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_size(int *out, cuabi_nccl_comm *comm)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    cuabi__ncomm *o;
    CUABI__GET(o, comm, NCCL_COMM);
    *out = o->nranks;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_device(cuabi_device **out, cuabi_nccl_comm *comm)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi__ncomm *o;
    CUABI__GET(o, comm, NCCL_COMM);
    cuabi__object_retain(&o->device->base);
    *out = CUABI__HANDLE(o->device, cuabi_device);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_get_async_error(int *out, cuabi_nccl_comm *comm)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    cuabi__ncomm *o;
    CUABI__TRY(live_comm(&o, comm, __func__));
    cuabi__nccl_result e = CUABI__NCCL_SUCCESS;
    cuabi__nccl_result r = NCALL(o->nccl, ncclCommGetAsyncError, o->comm, &e);
    if (r != CUABI__NCCL_SUCCESS)
        return nccl_error(o->nccl, r, o->comm, "ncclCommGetAsyncError", __func__);
    *out = e;
    return CUABI_SUCCESS;
}

/* The stream of a collective: NULL is the legacy default stream of the
 * communicator's device; a stream must be of that device. *drv is loaded
 * (not NULL) when the stream is a default one (the queries of
 * cuabi_nccl_comm_synchronize then run in the device's context). */
static inline cuabi_status comm_stream(cuabi__stream **s, CUstream *raw, cuabi__ncomm *o,
                                       cuabi_stream *stream, const cuabi__driver **drv,
                                       const char *caller)
{
    *s = NULL;
    *raw = NULL;
    if (stream) {
        void *obj;
        CUABI__TRY(cuabi__handle_get(stream, CUABI__T_STREAM, &obj, caller));
        *s = obj;
        if (CUABI__UNLIKELY((*s)->device != o->device))
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the stream is on device %d, "
                                "the communicator on device %d", caller, (*s)->device->ordinal,
                                o->device->ordinal);
        *raw = (*s)->cu_stream;
        if (CUABI__LIKELY((uintptr_t)*raw > 2))
            return CUABI_SUCCESS;
    }
    return cuabi__driver_get_for(drv, caller);
}

static cuabi_status comm_wait(cuabi__ncomm *o, CUstream raw, const cuabi__driver *drv,
                              int64_t timeout_ms);

CUABI_EXTERN(cuabi_status) cuabi_nccl_comm_synchronize(cuabi_nccl_comm *comm, cuabi_stream *stream,
                                                       int64_t timeout_ms)
{
    cuabi__ncomm *o;
    CUABI__TRY(live_comm(&o, comm, __func__));
    const cuabi__driver *drv = NULL;
    cuabi__stream *s;
    CUstream raw;
    CUABI__TRY(comm_stream(&s, &raw, o, stream, &drv, __func__));
    bool default_stream = drv != NULL;   /* queried in the device's context */
    if (!drv)
        CUABI__TRY(cuabi__driver_get(&drv));
    if (!drv->cuStreamQuery)
        return cuabi__missing_entry("cuStreamQuery", __func__);
    if (!raw)
        raw = CU_STREAM_LEGACY;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (default_stream)
        CUABI__TRY(cuabi__device_enter(&scope, o->device, drv));
    return cuabi__context_end(&scope, comm_wait(o, raw, drv, timeout_ms));
}

/* cuabi_nccl_comm_synchronize's wait: the stream drained, or the
 * communicator's error, or the time out. */
static cuabi_status comm_wait(cuabi__ncomm *o, CUstream raw, const cuabi__driver *drv,
                              int64_t timeout_ms)
{
    static const char *const caller = "cuabi_nccl_comm_synchronize";
    int64_t limit = timeout_ms != 0 ? timeout_ms : o->timeout_ms;
    int64_t start = now_ms();
    unsigned round = 0;
    for (;;) {
        CUresult q = CUABI__CU_RAW(drv, cuStreamQuery, raw);
        if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY)
            return cuabi__cu_check(q, "cuStreamQuery", caller);
        cuabi__nccl_result e = CUABI__NCCL_SUCCESS;
        cuabi__nccl_result r = NCALL(o->nccl, ncclCommGetAsyncError, o->comm, &e);
        if (r != CUABI__NCCL_SUCCESS)
            return nccl_error(o->nccl, r, o->comm, "ncclCommGetAsyncError", caller);
        if (e != CUABI__NCCL_SUCCESS && e != CUABI__NCCL_IN_PROGRESS) {
            char text[1024];
            cuabi__nccl_describe(text, sizeof text, o->nccl, e, o->comm);
            ncomm_abort(o);
            return cuabi__error(CUABI_ERROR_NCCL, "%s: the communicator (rank %d of %d) reports "
                                "%s; it was aborted", caller, o->rank, o->nranks, text);
        }
        if (q == CUDA_SUCCESS)
            return CUABI_SUCCESS;
        if (limit >= 0 && now_ms() - start >= limit) {
            ncomm_abort(o);
            return cuabi__error(CUABI_ERROR_TIMEOUT, "%s: the stream's work did not finish "
                                "within %lld ms (rank %d of %d): a peer stopped answering or "
                                "never posted the matching call; the communicator was aborted",
                                caller, (long long)limit, o->rank, o->nranks);
        }
        backoff(&round);
    }
}

/* --------------------------------------------------------------- groups */

CUABI_EXTERN(cuabi_status) cuabi_nccl_group_start(void)
{
    const cuabi__nccl *n;
    CUABI__TRY(cuabi__nccl_get(&n));
    cuabi__nccl_result r = NCALL(n, ncclGroupStart);
    if (r != CUABI__NCCL_SUCCESS)
        return nccl_error(n, r, NULL, "ncclGroupStart", __func__);
    group_depth++;
    return CUABI_SUCCESS;
}

static void group_forget(void)
{
    for (size_t i = 0; i < group_len; i++)
        cuabi__object_release(&group_comms[i]->base);
    group_len = 0;
    cuabi__free(group_comms);
    group_comms = NULL;
    group_cap = 0;
}

/* A nonblocking communicator used inside a group: the end waits for it. */
static cuabi_status group_note(cuabi__ncomm *o)
{
    for (size_t i = 0; i < group_len; i++)
        if (group_comms[i] == o)
            return CUABI_SUCCESS;
    if (group_len == group_cap) {
        size_t cap = group_cap ? group_cap * 2 : 8;
        cuabi__ncomm **grown = cuabi__realloc(group_comms, cap * sizeof *grown);
        if (!grown)
            return CUABI_ERROR_OUT_OF_MEMORY;
        group_comms = grown;
        group_cap = cap;
    }
    cuabi__object_retain(&o->base);
    group_comms[group_len++] = o;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_group_end(void)
{
    if (group_depth <= 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: no group is open on this thread "
                            "(cuabi_nccl_group_start)", __func__);
    const cuabi__nccl *n;
    CUABI__TRY(cuabi__nccl_get(&n));
    /* NCCL makes each communicator's device current to launch a group's work
     * and leaves the last one current (two H200s: torch's current device was
     * 1 after a group over devices 0 and 1): the caller's context comes back. */
    /* (A failure to remember it must not keep the group open: the group
     * ends all the same, with no context to give back.) */
    const cuabi__driver *drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (cuabi__driver_get(&drv) != CUABI_SUCCESS ||
        cuabi__context_save(&scope, drv) != CUABI_SUCCESS) {
        scope = (cuabi__context_scope)CUABI__CONTEXT_SCOPE_NONE;
        cuabi_error_clear();
    }
    cuabi__nccl_result r = NCALL(n, ncclGroupEnd);
    group_depth--;
    cuabi_status st = CUABI_SUCCESS;
    if (r != CUABI__NCCL_SUCCESS && r != CUABI__NCCL_IN_PROGRESS)
        st = nccl_error(n, r, NULL, "ncclGroupEnd", __func__);
    if (group_depth > 0)
        return cuabi__context_end(&scope, st);
    for (size_t i = 0; st == CUABI_SUCCESS && i < group_len; i++) {
        cuabi__ncomm *o = group_comms[i];
        st = wait_ready(n, &o->comm, 1, o->timeout_ms, "the group", __func__);
        if (st == CUABI_ERROR_TIMEOUT)
            ncomm_abort(o);
    }
    group_forget();
    return cuabi__context_end(&scope, st);
}

/* ----------------------------------------------------------- collectives */

static const unsigned char dtype_size[12] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

/* A collective being prepared: the communicator, stream and driver (set by
 * comm_stream for a default stream, by coll_enter otherwise) and the
 * caller's context. */
typedef struct coll {
    cuabi__ncomm *o;
    cuabi__stream *s;
    CUstream raw;
    const cuabi__driver *drv;
    cuabi__context_scope scope;
} coll;

static inline cuabi_status coll_begin(coll *c, cuabi_nccl_comm *comm, cuabi_stream *stream,
                                      const char *caller)
{
    CUABI__TRY(live_comm(&c->o, comm, caller));
    c->drv = NULL;
    c->scope = (cuabi__context_scope)CUABI__CONTEXT_SCOPE_NONE;
    return comm_stream(&c->s, &c->raw, c->o, stream, &c->drv, caller);
}

static inline cuabi_status check_dtype_op(int datatype, int op, bool reduces, const char *caller)
{
    CUABI__CHECK_ARG(datatype >= 0 && datatype < 12, "%s: %d is not a cuabi_nccl_datatype",
                     caller, datatype);
    CUABI__CHECK_ARG(!reduces || (op >= 0 && op <= CUABI_NCCL_AVG),
                     "%s: %d is not a cuabi_nccl_op", caller, op);
    return CUABI_SUCCESS;
}

static inline cuabi_status check_rank(int r, const cuabi__ncomm *o, const char *what,
                                      const char *caller)
{
    CUABI__CHECK_ARG(r >= 0 && r < o->nranks, "%s: %s %d is not a rank of the communicator "
                     "(0 to %d)", caller, what, r, o->nranks - 1);
    return CUABI_SUCCESS;
}

/* `count` elements of `esize` bytes at `offset` of the buffer: device memory
 * of the communicator's device (or managed memory), inside the buffer. */
static inline cuabi_status buffer_range(void **ptr, cuabi__buffer **b, cuabi_buffer *h,
                                        size_t offset, size_t count, size_t esize,
                                        const cuabi__ncomm *o, const char *what,
                                        const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(h, CUABI__T_BUFFER, &obj, caller));
    *b = obj;
    size_t bytes;
    if (CUABI__UNLIKELY(!cuabi__size_mul(&bytes, count, esize)))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu elements of %zu bytes "
                            "overflow", caller, count, esize);
    if (CUABI__UNLIKELY((*b)->kind != CUABI_MEMORY_DEVICE && (*b)->kind != CUABI_MEMORY_MANAGED))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s buffer is host memory "
                            "(kind %d); NCCL moves device or managed memory", caller, what,
                            (int)(*b)->kind);
    if (CUABI__UNLIKELY((*b)->kind == CUABI_MEMORY_DEVICE && (*b)->device != o->device))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s buffer is on device %d, "
                            "the communicator on device %d", caller, what,
                            (*b)->device ? (*b)->device->ordinal : -1, o->device->ordinal);
    CUABI__TRY(cuabi__buffer_check_range(*b, offset, bytes, what, caller));
    *ptr = (void *)((*b)->ptr + offset);
    return CUABI_SUCCESS;
}

/* Right before the NCCL call: the communicator's device is made current
 * (coll_end gives the caller's context back; one cuCtxGetCurrent when it is
 * already). A default stream is the current context's, and NCCL enqueues in
 * the CUDA runtime's current device even on a created stream: on two H200s
 * a rank on device 1 with no context current failed every collective with
 * "Cuda failure 'invalid argument'". */
static inline cuabi_status coll_enter(coll *c)
{
    if (!c->drv)
        CUABI__TRY(cuabi__driver_get(&c->drv));
    return cuabi__device_enter(&c->scope, c->o->device, c->drv);
}

static inline cuabi_status coll_finish(coll *c, cuabi__nccl_result r, const char *entry,
                                       const char *caller);

/* After the call: errors, the wait of a nonblocking communicator, and the
 * caller's context back. */
static inline cuabi_status coll_end(coll *c, cuabi__nccl_result r, const char *entry,
                                    const char *caller)
{
    return cuabi__context_end(&c->scope, coll_finish(c, r, entry, caller));
}

static inline cuabi_status coll_finish(coll *c, cuabi__nccl_result r, const char *entry,
                                       const char *caller)
{
    if (CUABI__LIKELY(r == CUABI__NCCL_SUCCESS && !c->o->nonblocking))
        return CUABI_SUCCESS;
    if (r != CUABI__NCCL_SUCCESS && r != CUABI__NCCL_IN_PROGRESS)
        return nccl_error(c->o->nccl, r, c->o->comm, entry, caller);
    if (r == CUABI__NCCL_IN_PROGRESS && !c->o->nonblocking)
        return nccl_error(c->o->nccl, r, c->o->comm, entry, caller);
    if (group_depth > 0)
        return group_note(c->o);
    cuabi_status st = wait_ready(c->o->nccl, &c->o->comm, 1, c->o->timeout_ms, entry, caller);
    if (st == CUABI_ERROR_TIMEOUT)
        ncomm_abort(c->o);
    return st;
}

/* What a capture of the stream must keep: the communicator and buffers. */
static inline cuabi_status coll_keep(coll *c, cuabi__buffer *a, cuabi__buffer *b,
                                     const char *caller)
{
    if (CUABI__LIKELY(!c->s || !cuabi__capturing()))
        return CUABI_SUCCESS;
    CUABI__TRY(cuabi__capture_keep_object(c->s->cu_stream, &c->o->base, caller));
    if (!a && !b)
        return CUABI_SUCCESS;
    return cuabi__capture_keep_buffers(c->s, a ? a : b, b, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_all_reduce(cuabi_nccl_comm *comm, cuabi_buffer *send,
                                                 size_t send_offset, cuabi_buffer *recv,
                                                 size_t recv_offset, size_t count,
                                                 cuabi_nccl_datatype datatype, cuabi_nccl_op op,
                                                 cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op((int)datatype, (int)op, true, __func__));
    size_t es = dtype_size[datatype];
    void *rp, *sp;
    cuabi__buffer *rb, *sb = NULL;
    CUABI__TRY(buffer_range(&rp, &rb, recv, recv_offset, count, es, c.o, "receive", __func__));
    sp = rp;
    if (send)
        CUABI__TRY(buffer_range(&sp, &sb, send, send_offset, count, es, c.o, "send", __func__));
    CUABI__TRY(coll_keep(&c, sb, rb, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result r = NCALL(c.o->nccl, ncclAllReduce, sp, rp, count, (int)datatype, (int)op,
                                 c.o->comm, c.raw);
    return coll_end(&c, r, "ncclAllReduce", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_broadcast(cuabi_nccl_comm *comm, cuabi_buffer *send,
                                                size_t send_offset, cuabi_buffer *recv,
                                                size_t recv_offset, size_t count,
                                                cuabi_nccl_datatype datatype, int root,
                                                cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op((int)datatype, 0, false, __func__));
    CUABI__TRY(check_rank(root, c.o, "root", __func__));
    size_t es = dtype_size[datatype];
    void *rp, *sp;
    cuabi__buffer *rb, *sb = NULL;
    CUABI__TRY(buffer_range(&rp, &rb, recv, recv_offset, count, es, c.o, "receive", __func__));
    sp = rp;
    if (send && c.o->rank == root)
        CUABI__TRY(buffer_range(&sp, &sb, send, send_offset, count, es, c.o, "send", __func__));
    CUABI__TRY(coll_keep(&c, sb, rb, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result r = NCALL(c.o->nccl, ncclBroadcast, sp, rp, count, (int)datatype, root,
                                 c.o->comm, c.raw);
    return coll_end(&c, r, "ncclBroadcast", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_reduce(cuabi_nccl_comm *comm, cuabi_buffer *send,
                                             size_t send_offset, cuabi_buffer *recv,
                                             size_t recv_offset, size_t count,
                                             cuabi_nccl_datatype datatype, cuabi_nccl_op op,
                                             int root, cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op((int)datatype, (int)op, true, __func__));
    CUABI__TRY(check_rank(root, c.o, "root", __func__));
    size_t es = dtype_size[datatype];
    void *rp = NULL, *sp = NULL;
    cuabi__buffer *rb = NULL, *sb = NULL;
    CUABI__CHECK_ARG(recv || c.o->rank != root, "%s: this rank (%d) is the root: it needs a "
                     "receive buffer", __func__, root);
    CUABI__CHECK_ARG(send || recv, "%s: neither a send nor a receive buffer", __func__);
    if (recv)
        CUABI__TRY(buffer_range(&rp, &rb, recv, recv_offset, count, es, c.o, "receive",
                                __func__));
    if (send)
        CUABI__TRY(buffer_range(&sp, &sb, send, send_offset, count, es, c.o, "send", __func__));
    else
        sp = rp;
    CUABI__TRY(coll_keep(&c, sb, rb, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result r = NCALL(c.o->nccl, ncclReduce, sp, rp, count, (int)datatype, (int)op,
                                 root, c.o->comm, c.raw);
    return coll_end(&c, r, "ncclReduce", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_all_gather(cuabi_nccl_comm *comm, cuabi_buffer *send,
                                                 size_t send_offset, cuabi_buffer *recv,
                                                 size_t recv_offset, size_t send_count,
                                                 cuabi_nccl_datatype datatype,
                                                 cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op((int)datatype, 0, false, __func__));
    size_t es = dtype_size[datatype], total;
    if (!cuabi__size_mul(&total, send_count, (size_t)c.o->nranks))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu elements times %d ranks "
                            "overflow", __func__, send_count, c.o->nranks);
    void *rp, *sp;
    cuabi__buffer *rb, *sb = NULL;
    CUABI__TRY(buffer_range(&rp, &rb, recv, recv_offset, total, es, c.o, "receive", __func__));
    sp = (char *)rp + (size_t)c.o->rank * send_count * es;
    if (send)
        CUABI__TRY(buffer_range(&sp, &sb, send, send_offset, send_count, es, c.o, "send",
                                __func__));
    CUABI__TRY(coll_keep(&c, sb, rb, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result r = NCALL(c.o->nccl, ncclAllGather, sp, rp, send_count, (int)datatype,
                                 c.o->comm, c.raw);
    return coll_end(&c, r, "ncclAllGather", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_reduce_scatter(cuabi_nccl_comm *comm, cuabi_buffer *send,
                                                     size_t send_offset, cuabi_buffer *recv,
                                                     size_t recv_offset, size_t recv_count,
                                                     cuabi_nccl_datatype datatype,
                                                     cuabi_nccl_op op, cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op((int)datatype, (int)op, true, __func__));
    size_t es = dtype_size[datatype], total;
    if (!cuabi__size_mul(&total, recv_count, (size_t)c.o->nranks))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %zu elements times %d ranks "
                            "overflow", __func__, recv_count, c.o->nranks);
    void *rp, *sp;
    cuabi__buffer *rb, *sb;
    CUABI__TRY(buffer_range(&sp, &sb, send, send_offset, total, es, c.o, "send", __func__));
    CUABI__TRY(buffer_range(&rp, &rb, recv, recv_offset, recv_count, es, c.o, "receive",
                            __func__));
    CUABI__TRY(coll_keep(&c, sb, rb, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result r = NCALL(c.o->nccl, ncclReduceScatter, sp, rp, recv_count, (int)datatype,
                                 (int)op, c.o->comm, c.raw);
    return coll_end(&c, r, "ncclReduceScatter", __func__);
}

/* ncclSend or ncclRecv of `count` elements at `offset` of `buffer`: the two
 * differ only in the direction. */
static cuabi_status p2p(cuabi_nccl_comm *comm, cuabi_buffer *buffer, size_t offset, size_t count,
                        cuabi_nccl_datatype datatype, int peer, cuabi_stream *stream, bool send,
                        const char *caller)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, caller));
    CUABI__TRY(check_dtype_op((int)datatype, 0, false, caller));
    CUABI__TRY(check_rank(peer, c.o, "peer", caller));
    void *p;
    cuabi__buffer *b;
    CUABI__TRY(buffer_range(&p, &b, buffer, offset, count, dtype_size[datatype], c.o,
                            send ? "send" : "receive", caller));
    CUABI__TRY(coll_keep(&c, b, NULL, caller));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result r =
        send ? NCALL(c.o->nccl, ncclSend, p, count, (int)datatype, peer, c.o->comm, c.raw)
             : NCALL(c.o->nccl, ncclRecv, p, count, (int)datatype, peer, c.o->comm, c.raw);
    return coll_end(&c, r, send ? "ncclSend" : "ncclRecv", caller);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_send(cuabi_nccl_comm *comm, cuabi_buffer *buffer,
                                           size_t offset, size_t count,
                                           cuabi_nccl_datatype datatype, int peer,
                                           cuabi_stream *stream)
{
    return p2p(comm, buffer, offset, count, datatype, peer, stream, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_recv(cuabi_nccl_comm *comm, cuabi_buffer *buffer,
                                           size_t offset, size_t count,
                                           cuabi_nccl_datatype datatype, int peer,
                                           cuabi_stream *stream)
{
    return p2p(comm, buffer, offset, count, datatype, peer, stream, false, __func__);
}

/* ---------------------------------------------------------------- views */

/* A view as a collective sees it: where it starts, how many elements of
 * which NCCL type. `moves`: data movement (broadcast, gathers, send,
 * receive), where a type NCCL cannot reduce goes as bytes. */
typedef struct vspan {
    cuabi__view *v;
    void *ptr;
    size_t count;
    int dtype;
} vspan;

static int view_nccl_type(const cuabi__view *v)
{
    switch (v->code) {
    case CUABI_DTYPE_INT: return v->bits == 8 ? 0 : v->bits == 32 ? 2 : v->bits == 64 ? 4 : -1;
    case CUABI_DTYPE_UINT: return v->bits == 8 ? 1 : v->bits == 32 ? 3 : v->bits == 64 ? 5 : -1;
    case CUABI_DTYPE_FLOAT: return v->bits == 16 ? 6 : v->bits == 32 ? 7 : v->bits == 64 ? 8 : -1;
    case CUABI_DTYPE_BFLOAT: return v->bits == 16 ? 9 : -1;
    case CUABI_DTYPE_FLOAT8_E4M3FN: return 10;
    case CUABI_DTYPE_FLOAT8_E5M2: return 11;
    default: return -1;
    }
}

static cuabi_status view_span(vspan *out, cuabi_view *h, const cuabi__ncomm *o, bool moves,
                              bool writes, const char *what, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(h, CUABI__T_VIEW, &obj, caller));
    cuabi__view *v = obj;
    out->v = v;
    if (v->device_type != CUABI_DLPACK_CUDA && v->device_type != CUABI_DLPACK_CUDA_MANAGED)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s view is not of CUDA device "
                            "memory (DLPack device type %d); NCCL moves device or managed "
                            "memory", caller, what, (int)v->device_type);
    if (v->device_type == CUABI_DLPACK_CUDA && v->device_id != o->device->ordinal)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s view is on device %d, the "
                            "communicator on device %d", caller, what, (int)v->device_id,
                            o->device->ordinal);
    if (writes && (v->flags & CUABI_VIEW_READ_ONLY))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s view is read-only",
                            caller, what);
    /* Dense, row-major: each stride the product of the extents inside it
     * (dimensions of extent 1 may have any stride). */
    int64_t expect = 1;
    for (int32_t d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] == 1)
            continue;
        if (v->shape[d] != 0 && v->strides[d] != expect)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the %s view is not contiguous "
                                "(dimension %d has stride %lld where a dense row-major layout "
                                "has %lld); NCCL takes one dense range: copy it into a "
                                "contiguous view first", caller, what, (int)d,
                                (long long)v->strides[d], (long long)expect);
        expect *= v->shape[d] ? v->shape[d] : 1;
    }
    int t = view_nccl_type(v);
    out->count = (size_t)v->size;
    if (t < 0) {
        if (!moves)
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: NCCL cannot reduce the %s "
                                "view's element type (DLPack code %d, %d bits); reductions take "
                                "int8/32/64, uint8/32/64, float16/32/64, bfloat16 and float8",
                                caller, what, (int)v->code, (int)v->bits);
        t = 1; /* bytes */
        out->count = (size_t)v->size * (v->bits / 8u);
    }
    out->dtype = t;
    out->ptr = (void *)(v->data + v->byte_offset);
    return CUABI_SUCCESS;
}

static cuabi_status same_type(const vspan *a, const vspan *b, const char *caller)
{
    if (a->v->code != b->v->code || a->v->bits != b->v->bits)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the send view's element type "
                            "(code %d, %d bits) differs from the receive view's (code %d, %d "
                            "bits)", caller, (int)a->v->code, (int)a->v->bits, (int)b->v->code,
                            (int)b->v->bits);
    return CUABI_SUCCESS;
}

static cuabi_status sizes_match(size_t send, size_t recv, const char *rule, const char *caller)
{
    return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: mismatched sizes: the send view has "
                        "%zu elements and the receive view %zu; %s", caller, send, recv, rule);
}

static inline cuabi_status coll_keep_views(coll *c, cuabi__view *a, cuabi__view *b,
                                           const char *caller)
{
    if (CUABI__LIKELY(!c->s || !cuabi__capturing()))
        return CUABI_SUCCESS;
    CUABI__TRY(cuabi__capture_keep_object(c->s->cu_stream, &c->o->base, caller));
    if (a)
        CUABI__TRY(cuabi__capture_keep_object(c->s->cu_stream, &a->base, caller));
    if (b && b != a)
        CUABI__TRY(cuabi__capture_keep_object(c->s->cu_stream, &b->base, caller));
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_all_reduce_view(cuabi_nccl_comm *comm, cuabi_view *send,
                                                      cuabi_view *recv, cuabi_nccl_op op,
                                                      cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op(0, (int)op, true, __func__));
    vspan r, s;
    CUABI__TRY(view_span(&r, recv, c.o, false, true, "receive", __func__));
    s = r;
    if (send && send != recv) {
        CUABI__TRY(view_span(&s, send, c.o, false, false, "send", __func__));
        CUABI__TRY(same_type(&s, &r, __func__));
        if (s.count != r.count)
            return sizes_match(s.count, r.count, "an all-reduce needs the same size", __func__);
    }
    CUABI__TRY(coll_keep_views(&c, s.v, r.v, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result res = NCALL(c.o->nccl, ncclAllReduce, s.ptr, r.ptr, r.count, r.dtype,
                                   (int)op, c.o->comm, c.raw);
    return coll_end(&c, res, "ncclAllReduce", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_broadcast_view(cuabi_nccl_comm *comm, cuabi_view *send,
                                                     cuabi_view *recv, int root,
                                                     cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_rank(root, c.o, "root", __func__));
    vspan r, s;
    CUABI__TRY(view_span(&r, recv, c.o, true, true, "receive", __func__));
    s = r;
    if (send && send != recv && c.o->rank == root) {
        CUABI__TRY(view_span(&s, send, c.o, true, false, "send", __func__));
        CUABI__TRY(same_type(&s, &r, __func__));
        if (s.count != r.count)
            return sizes_match(s.count, r.count, "a broadcast needs the same size", __func__);
    }
    CUABI__TRY(coll_keep_views(&c, s.v, r.v, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result res = NCALL(c.o->nccl, ncclBroadcast, s.ptr, r.ptr, r.count, r.dtype,
                                   root, c.o->comm, c.raw);
    return coll_end(&c, res, "ncclBroadcast", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_reduce_view(cuabi_nccl_comm *comm, cuabi_view *send,
                                                  cuabi_view *recv, cuabi_nccl_op op, int root,
                                                  cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op(0, (int)op, true, __func__));
    CUABI__TRY(check_rank(root, c.o, "root", __func__));
    CUABI__CHECK_ARG(recv || c.o->rank != root, "%s: this rank (%d) is the root: it needs a "
                     "receive view", __func__, root);
    vspan s, r;
    CUABI__TRY(view_span(&s, send, c.o, false, false, "send", __func__));
    r = s;
    r.ptr = NULL;
    if (recv && recv != send) {
        CUABI__TRY(view_span(&r, recv, c.o, false, true, "receive", __func__));
        CUABI__TRY(same_type(&s, &r, __func__));
        if (s.count != r.count)
            return sizes_match(s.count, r.count, "a reduce needs the same size", __func__);
    } else if (recv) {
        r.ptr = s.ptr;
    }
    CUABI__TRY(coll_keep_views(&c, s.v, recv ? r.v : NULL, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result res = NCALL(c.o->nccl, ncclReduce, s.ptr, r.ptr, s.count, s.dtype, (int)op,
                                   root, c.o->comm, c.raw);
    return coll_end(&c, res, "ncclReduce", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_all_gather_view(cuabi_nccl_comm *comm, cuabi_view *send,
                                                      cuabi_view *recv, cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    vspan s, r;
    CUABI__TRY(view_span(&s, send, c.o, true, false, "send", __func__));
    CUABI__TRY(view_span(&r, recv, c.o, true, true, "receive", __func__));
    CUABI__TRY(same_type(&s, &r, __func__));
    size_t want;
    if (!cuabi__size_mul(&want, s.count, (size_t)c.o->nranks) || want != r.count)
        return sizes_match(s.count, r.count, "an all-gather's receive view holds nranks times "
                           "the send view's elements", __func__);
    CUABI__TRY(coll_keep_views(&c, s.v, r.v, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result res = NCALL(c.o->nccl, ncclAllGather, s.ptr, r.ptr, s.count, s.dtype,
                                   c.o->comm, c.raw);
    return coll_end(&c, res, "ncclAllGather", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_reduce_scatter_view(cuabi_nccl_comm *comm, cuabi_view *send,
                                                          cuabi_view *recv, cuabi_nccl_op op,
                                                          cuabi_stream *stream)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, __func__));
    CUABI__TRY(check_dtype_op(0, (int)op, true, __func__));
    vspan s, r;
    CUABI__TRY(view_span(&s, send, c.o, false, false, "send", __func__));
    CUABI__TRY(view_span(&r, recv, c.o, false, true, "receive", __func__));
    CUABI__TRY(same_type(&s, &r, __func__));
    size_t want;
    if (!cuabi__size_mul(&want, r.count, (size_t)c.o->nranks) || want != s.count)
        return sizes_match(s.count, r.count, "a reduce-scatter's send view holds nranks times "
                           "the receive view's elements", __func__);
    CUABI__TRY(coll_keep_views(&c, s.v, r.v, __func__));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result res = NCALL(c.o->nccl, ncclReduceScatter, s.ptr, r.ptr, r.count, r.dtype,
                                   (int)op, c.o->comm, c.raw);
    return coll_end(&c, res, "ncclReduceScatter", __func__);
}

/* ncclSend or ncclRecv of a dense view (a receive's view must be writable). */
static cuabi_status p2p_view(cuabi_nccl_comm *comm, cuabi_view *view, int peer,
                             cuabi_stream *stream, bool send, const char *caller)
{
    coll c;
    CUABI__TRY(coll_begin(&c, comm, stream, caller));
    CUABI__TRY(check_rank(peer, c.o, "peer", caller));
    vspan s;
    CUABI__TRY(view_span(&s, view, c.o, true, !send, send ? "send" : "receive", caller));
    CUABI__TRY(coll_keep_views(&c, s.v, NULL, caller));
    CUABI__TRY(coll_enter(&c));
    cuabi__nccl_result res =
        send ? NCALL(c.o->nccl, ncclSend, s.ptr, s.count, s.dtype, peer, c.o->comm, c.raw)
             : NCALL(c.o->nccl, ncclRecv, s.ptr, s.count, s.dtype, peer, c.o->comm, c.raw);
    return coll_end(&c, res, send ? "ncclSend" : "ncclRecv", caller);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_send_view(cuabi_nccl_comm *comm, cuabi_view *view, int peer,
                                                cuabi_stream *stream)
{
    return p2p_view(comm, view, peer, stream, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_recv_view(cuabi_nccl_comm *comm, cuabi_view *view, int peer,
                                                cuabi_stream *stream)
{
    return p2p_view(comm, view, peer, stream, false, __func__);
}

/* --------------------------------------------------------- registration */

static void nreg_destroy(cuabi__object *self)
{
    cuabi__nreg *g = (cuabi__nreg *)self;
    if (atomic_load(&g->comm->state) != COMM_ABORTED) {
        (void)release_call(g->comm->nccl, REL_DEREGISTER, g->comm->comm, g->handle);
    }
    (void)cuabi__buffer_mem_release(g->buffer, "cuabi_nccl_registration_destroy");
    cuabi__object_release(&g->comm->base);
    cuabi__free(g);
}

CUABI_EXTERN(cuabi_status) cuabi_nccl_register(cuabi_nccl_registration **out,
                                               cuabi_nccl_comm *comm, cuabi_buffer *buffer)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    cuabi__ncomm *o;
    CUABI__TRY(live_comm(&o, comm, __func__));
    void *p;
    cuabi__buffer *b;
    CUABI__TRY(buffer_range(&p, &b, buffer, 0, 0, 1, o, "registered", __func__));
    const cuabi__nccl *n = o->nccl;
    if (!n->ncclCommRegister || !n->ncclCommDeregister)
        return cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: the loaded NCCL (%d) lacks "
                            "ncclCommRegister (2.19)", __func__, cuabi__nccl_info()->version);
    const cuabi__driver *drv;
    CUABI__TRY(cuabi__driver_get(&drv));
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, o->device, drv));
    cuabi__nreg *g = cuabi__calloc(1, sizeof *g);
    if (!g)
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    cuabi__nccl_result r = NCALL(n, ncclCommRegister, o->comm, (void *)b->ptr, b->size,
                                 &g->handle);
    if (r != CUABI__NCCL_SUCCESS) {
        cuabi__free(g);
        CUABI__SCOPE_RETURN(nccl_error(n, r, o->comm, "ncclCommRegister", __func__));
    }
    cuabi__object_retain(&o->base);
    cuabi__buffer_mem_retain(b);
    g->comm = o;
    g->buffer = b;
    cuabi_status st = cuabi__handle_register(&g->base, CUABI__T_NCCL_REGISTRATION, nreg_destroy);
    if (st != CUABI_SUCCESS) {
        nreg_destroy(&g->base);
        CUABI__SCOPE_RETURN(st);
    }
    *out = CUABI__HANDLE(g, cuabi_nccl_registration);
    CUABI__SCOPE_RETURN(CUABI_SUCCESS);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, NCCL_REGISTRATION, __func__);
}
