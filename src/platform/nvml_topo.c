/* NVML: NVLink links, the topology between two GPUs, the processes on a
 * GPU (api/nvml.toml, docs/nvml.md). */
#include "platform/nvml_query.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ NVLink */

/* nvmlNvlinkVersion_t (nvml.h): 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0,
 * 5 = 3.1, 6 = 4.0, 7 = 5.0, 8 = 6.0. */
static void nvlink_version(unsigned v, int *major, int *minor)
{
    static const int known[][2] = { { 0, 0 }, { 1, 0 }, { 2, 0 }, { 2, 2 }, { 3, 0 },
                                    { 3, 1 }, { 4, 0 }, { 5, 0 }, { 6, 0 } };
    bool ok = v < sizeof known / sizeof *known;
    *major = ok ? known[v][0] : 0;
    *minor = ok ? known[v][1] : 0;
}

/* What is at the far end of the link: its PCI bus id, and NVML's index
 * when it is a GPU NVML lists. */
static void nvlink_remote(cuabi__nvq *q, unsigned link, cuabi_nvml_nvlink *out)
{
    cuabi__nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    out->remote_index = -1;
    if (!CUABI__NVQ_ASK(q, CUABI_NVML_FIELD_NVLINK_REMOTE, nvmlDeviceGetNvLinkRemotePciInfo_v2,
                        q->dev, link, &pci))
        return;
    cuabi__nvml_text(pci.bus_id, sizeof pci.bus_id);
    snprintf(out->remote_pci_bus_id, sizeof out->remote_pci_bus_id, "%s", pci.bus_id);
    cuabi_status st = cuabi__nvml_index_of_pci(q->nv, pci.domain, pci.bus, pci.device,
                                               &out->remote_index, q->caller);
    if (st != CUABI_SUCCESS && q->st == CUABI_SUCCESS)
        q->st = st;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_nvlink_get(cuabi_nvml_nvlink *out, int index,
                                                        int link)
{
    CUABI__CHECK_OPTS(out, "cuabi_nvml_nvlink", CUABI_NVML_NVLINK_VERSION, false);
    unsigned v = out->version;
    *out = (cuabi_nvml_nvlink){ .version = v, .link = link, .remote_index = -1 };
    cuabi__nvq q;
    CUABI__TRY(cuabi__nvq_open(&q, index, __func__));
    int count = cuabi__nvq_nvlink_count(&q);
    CUABI__TRY(q.st);
    CUABI__CHECK_ARG(link >= 0 && link < count, "%s: link %d: GPU %d has %d NVLink link%s%s",
                     __func__, link, index, count, count == 1 ? "" : "s",
                     count ? "" : " (none NVML reports)");
    int active = 0;
    /* A link that is down may have nothing at its end to ask about. */
    q.invalid_is_unavailable = true;
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_NVLINK_STATE, nvmlDeviceGetNvLinkState, q.dev,
                       (unsigned)link, &active))
        out->active = active != 0;
    unsigned version = 0;
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_NVLINK_VERSION, nvmlDeviceGetNvLinkVersion, q.dev,
                       (unsigned)link, &version)) {
        out->nvlink_version = version;
        nvlink_version(version, &out->version_major, &out->version_minor);
    }
    nvlink_remote(&q, (unsigned)link, out);
    unsigned p2p = 0;
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_NVLINK_P2P, nvmlDeviceGetNvLinkCapability, q.dev,
                       (unsigned)link, CUABI__NVML_NVLINK_CAP_P2P_SUPPORTED, &p2p))
        out->p2p_supported = p2p != 0;
    out->unavailable = q.unavailable;
    return q.st;
}

/* ------------------------------------------------------------ topology */

static cuabi_nvml_p2p_status p2p(cuabi__nvq *q, cuabi__nvdev other, int caps_index)
{
    int status = CUABI_NVML_P2P_UNKNOWN;
    uint64_t before = q->unavailable;
    bool ok = CUABI__NVQ_ASK(q, 0, nvmlDeviceGetP2PStatus, q->dev, other, caps_index, &status);
    q->unavailable = before;
    return ok && status >= CUABI_NVML_P2P_OK && status <= CUABI_NVML_P2P_UNKNOWN
               ? (cuabi_nvml_p2p_status)status : CUABI_NVML_P2P_UNKNOWN;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_topology_get(cuabi_nvml_topology *out, int index1,
                                                   int index2)
{
    CUABI__CHECK_OPTS(out, "cuabi_nvml_topology", CUABI_NVML_TOPOLOGY_VERSION, false);
    unsigned v = out->version;
    *out = (cuabi_nvml_topology){ .version = v, .common_ancestor = CUABI_NVML_TOPOLOGY_SYSTEM };
    cuabi__nvq q;
    cuabi__nvdev other;
    CUABI__TRY(cuabi__nvq_open(&q, index1, __func__));
    CUABI__TRY(cuabi__nvml_handle(q.nv, index2, &other, __func__));
    int level = 0;
    if (CUABI__NVQ_ASK(&q, CUABI_NVML_FIELD_TOPOLOGY, nvmlDeviceGetTopologyCommonAncestor, q.dev,
                       other, &level)) {
        if (level >= 0 && level <= CUABI_NVML_TOPOLOGY_SYSTEM && level % 10 == 0)
            out->common_ancestor = (cuabi_nvml_topology_level)level;
        else
            q.unavailable |= CUABI_NVML_FIELD_TOPOLOGY;
    }
    out->p2p_read = p2p(&q, other, CUABI__NVML_P2P_CAPS_INDEX_READ);
    out->p2p_write = p2p(&q, other, CUABI__NVML_P2P_CAPS_INDEX_WRITE);
    out->p2p_nvlink = p2p(&q, other, CUABI__NVML_P2P_CAPS_INDEX_NVLINK);
    out->p2p_atomics = p2p(&q, other, CUABI__NVML_P2P_CAPS_INDEX_ATOMICS);
    out->p2p_pci = p2p(&q, other, CUABI__NVML_P2P_CAPS_INDEX_PCI);
    out->unavailable = q.unavailable;
    return q.st;
}

/* ------------------------------------------------------------ processes */

typedef cuabi__nvml_return (*list_fn)(cuabi__nvdev, unsigned *, cuabi__nvml_process_info *);

/* One list (compute or graphics) into a new array of *n entries (NULL
 * when empty). False when NVML does not list this kind (not supported, no
 * permission) or on a failure (q->st). The list may grow between the size
 * query and the fetch: it is asked again, a few times. */
static bool fetch_list(cuabi__nvq *q, list_fn fn, const char *entry,
                       cuabi__nvml_process_info **out, unsigned *n)
{
    *out = NULL;
    *n = 0;
    cuabi__nvml_process_info probe[1];
    unsigned want = 0;
    for (int attempt = 0; attempt < 8 && q->st == CUABI_SUCCESS; attempt++) {
        unsigned cap = want;
        cuabi__nvml_process_info *buf = cap ? cuabi__malloc(cap * sizeof *buf) : probe;
        if (!buf) {
            q->st = CUABI_ERROR_OUT_OF_MEMORY;
            return false;
        }
        unsigned got = cap;
        cuabi__nvml_return r = fn(q->dev, &got, buf);
        if (r == CUABI__NVML_SUCCESS && got <= cap) {
            if (got == 0 && buf != probe)
                cuabi__free(buf), buf = NULL;
            *out = buf == probe ? NULL : buf;
            *n = got;
            return true;
        }
        if (buf != probe)
            cuabi__free(buf);
        if (r == CUABI__NVML_SUCCESS || r == CUABI__NVML_ERROR_INSUFFICIENT_SIZE) {
            if (got > CUABI__NVML_MAX_PROCESSES) {
                q->st = cuabi__error(CUABI_ERROR_NVML, "%s: %s reports %u processes, more than "
                                     "the %d cuabi takes from it", q->caller, entry, got,
                                     CUABI__NVML_MAX_PROCESSES);
                return false;
            }
            want = got + got / 4 + 4; /* room for a few more next time */
            continue;
        }
        cuabi__nvq_answer(q, r, 1, entry);
        return false;
    }
    if (q->st == CUABI_SUCCESS)
        q->st = cuabi__error(CUABI_ERROR_NVML, "%s: %s: the process list kept growing while "
                             "it was read", q->caller, entry);
    return false;
}

typedef struct proc {
    cuabi__nvml_process_info info;
    unsigned kinds;
} proc;

static int by_pid(const void *a, const void *b)
{
    unsigned x = ((const proc *)a)->info.pid, y = ((const proc *)b)->info.pid;
    return (x > y) - (x < y);
}

static unsigned long long merge_memory(unsigned long long a, unsigned long long b)
{
    if (a == CUABI__NVML_VALUE_NOT_AVAILABLE)
        return b;
    if (b == CUABI__NVML_VALUE_NOT_AVAILABLE)
        return a;
    return a > b ? a : b;
}

/* Both lists, one entry per process (sorted by pid, kinds ORed). */
static size_t merge(proc *all, size_t n)
{
    qsort(all, n, sizeof *all, by_pid);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && all[m - 1].info.pid == all[i].info.pid) {
            all[m - 1].kinds |= all[i].kinds;
            all[m - 1].info.used_gpu_memory =
                merge_memory(all[m - 1].info.used_gpu_memory, all[i].info.used_gpu_memory);
        } else {
            all[m++] = all[i];
        }
    }
    return m;
}

/* Compute and graphics lists, from the _v3 queries or else the _v2 ones
 * (the same layout). */
static cuabi_status gather(cuabi__nvq *q, proc **all, size_t *n)
{
    struct { list_fn v3, v2; const char *n3, *n2; unsigned kind; } kinds[2] = {
        { q->nv->nvmlDeviceGetComputeRunningProcesses_v3,
          q->nv->nvmlDeviceGetComputeRunningProcesses_v2,
          "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
          CUABI_NVML_PROCESS_COMPUTE },
        { q->nv->nvmlDeviceGetGraphicsRunningProcesses_v3,
          q->nv->nvmlDeviceGetGraphicsRunningProcesses_v2,
          "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
          CUABI_NVML_PROCESS_GRAPHICS },
    };
    cuabi__nvml_process_info *lists[2] = { NULL, NULL };
    unsigned counts[2] = { 0, 0 };
    int listed = 0;
    for (int k = 0; k < 2 && q->st == CUABI_SUCCESS; k++) {
        list_fn fn = kinds[k].v3 ? kinds[k].v3 : kinds[k].v2;
        if (fn)
            listed += fetch_list(q, fn, kinds[k].v3 ? kinds[k].n3 : kinds[k].n2, &lists[k],
                                 &counts[k]);
    }
    *all = NULL;
    *n = (size_t)counts[0] + counts[1];
    if (q->st == CUABI_SUCCESS && !listed)
        q->st = cuabi__error(CUABI_ERROR_NOT_SUPPORTED, "%s: NVML lists no processes for this "
                             "GPU (not supported, no permission, or this NVML lacks the "
                             "queries)", q->caller);
    if (q->st == CUABI_SUCCESS && *n && !(*all = cuabi__malloc(*n * sizeof **all)))
        q->st = CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t k = 0, at = 0; k < 2 && *all; k++)
        for (unsigned i = 0; i < counts[k]; i++, at++)
            (*all)[at] = (proc){ lists[k][i], kinds[k].kind };
    cuabi__free(lists[0]);
    cuabi__free(lists[1]);
    return q->st;
}

CUABI_EXTERN(cuabi_status) cuabi_nvml_device_processes(cuabi_nvml_process *out, size_t capacity,
                                                       size_t *count, int index)
{
    CUABI__CHECK_ARG(count, "%s: count is NULL", __func__);
    *count = 0;
    CUABI__CHECK_ARG(out || capacity == 0, "%s: out is NULL but capacity is %zu", __func__,
                     capacity);
    for (size_t i = 0; i < capacity; i++)
        CUABI__CHECK_VERSION("cuabi_nvml_process", out[i].version, CUABI_NVML_PROCESS_VERSION);
    cuabi__nvq q;
    CUABI__TRY(cuabi__nvq_open(&q, index, __func__));
    proc *all;
    size_t n;
    CUABI__TRY(gather(&q, &all, &n));
    n = n ? merge(all, n) : 0;
    for (size_t i = 0; i < n && i < capacity; i++)
        out[i] = (cuabi_nvml_process){
            .version = out[i].version,
            .pid = all[i].info.pid,
            .used_memory = all[i].info.used_gpu_memory,
            .kinds = all[i].kinds,
            .gpu_instance_id = all[i].info.gpu_instance_id,
            .compute_instance_id = all[i].info.compute_instance_id,
        };
    cuabi__free(all);
    *count = n;
    return CUABI_SUCCESS;
}
