/* What the cuabi_nvml_* functions share (nvml.c: the system, GPUs,
 * health, the mapping to CUDA ordinals; nvml_topo.c: NVLink links, the
 * topology between two GPUs, processes).
 *
 * A query asks NVML one value after another. A value NVML does not report
 * for this GPU (not supported, no permission, an entry point this NVML
 * lacks) sets its bit in the query's `unavailable` mask and leaves the
 * field 0; any other failure is recorded once (CUABI_ERROR_NVML naming the
 * entry point) and every later ask of the query is skipped. */
#ifndef CUABI_PLATFORM_NVML_QUERY_H
#define CUABI_PLATFORM_NVML_QUERY_H

#include "platform/nvml_lib.h"

typedef struct cuabi__nvq {
    const cuabi__nvml *nv;
    const char *caller;
    cuabi__nvdev dev;
    uint64_t unavailable;
    cuabi_status st;
    /* NVML_ERROR_INVALID_ARGUMENT also means "not reported" (a link that
     * is down has no remote end to ask about). */
    bool invalid_is_unavailable;
} cuabi__nvq;

/* Most GPUs cuabi takes from nvmlDeviceGetCount_v2, and most processes
 * from one list: more is an answer cuabi refuses (CUABI_ERROR_NVML). */
#define CUABI__NVML_MAX_DEVICES 4096
#define CUABI__NVML_MAX_PROCESSES 65536

/* The outcome r of entry point `entry`: true on success; false with the
 * bit set (not reported) or the error recorded (a failure). */
bool cuabi__nvq_answer(cuabi__nvq *q, cuabi__nvml_return r, uint64_t bit, const char *entry);

/* Ask an entry point of the table with these arguments. */
#define CUABI__NVQ_ASK(q, bit, fn, ...)                                       \
    ((q)->st == CUABI_SUCCESS &&                                               \
     ((q)->nv->fn ? cuabi__nvq_answer((q), (q)->nv->fn(__VA_ARGS__), (bit), #fn) \
                  : ((q)->unavailable |= (bit), false)))

/* A string NVML wrote into `cap` bytes, made safe: terminated inside the
 * buffer, every byte outside printable ASCII replaced by '?'. */
void cuabi__nvml_text(char *s, size_t cap);

/* Start a query: NVML loaded, GPU `index` (0 .. count-1) opened. */
cuabi_status cuabi__nvq_open(cuabi__nvq *q, int index, const char *caller);
/* How many GPUs NVML lists (refusing more than CUABI__NVML_MAX_DEVICES). */
cuabi_status cuabi__nvml_count(const cuabi__nvml *nv, unsigned *out, const char *caller);
/* GPU `index`'s handle, for a second GPU of a query. */
cuabi_status cuabi__nvml_handle(const cuabi__nvml *nv, int index, cuabi__nvdev *out,
                                const char *caller);
/* NVLink links NVML answers for on the query's GPU: one past the highest
 * whose state it tells (links it does not tell in between read as down). */
int cuabi__nvq_nvlink_count(cuabi__nvq *q);
/* The NVML index of the GPU at PCI domain:bus:device, or -1. */
cuabi_status cuabi__nvml_index_of_pci(const cuabi__nvml *nv, unsigned domain, unsigned bus,
                                      unsigned device, int *out, const char *caller);

#endif
