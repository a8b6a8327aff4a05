/* Why a library touches the process heap (docs/PERFORMANCE.md, "page faults of
 * the first graph"): the driver allocates a graph's nodes with malloc, during
 * the capture and again during cuGraphInstantiate. A process that compiled
 * with NVRTC first finds NVRTC's freed (already resident) memory in the heap;
 * a process the compile cache spared NVRTC has a small heap, and its first
 * 100-node graph grows it by ~600 KB, one page fault per 4 KiB page (~150
 * faults, ~1.6 us each on an H200 VM: a third of that process's first capture
 * and instantiate, measured with getrusage in bench/bench_graph.py; NVRTC
 * leaves ~6 MB free in the heap, a cache hit's process ~360 KB, and the
 * driver's lazy module loads take some before the first capture). This
 * raises glibc's mmap threshold as NVRTC's frees do (below), grows the heap
 * once, up front, with its pages made resident in one call
 * where the kernel can (MADV_POPULATE_WRITE, Linux 5.14), and frees it again
 * below a small allocation kept for the process's life, so that free() does
 * not give it back to the system: any later malloc, the driver's first,
 * reuses it without faulting.
 *
 * Plain malloc/free, not cuabi__malloc: the memory is no object of cuabi's,
 * its failure is nothing to report, and the allocation tests that count or
 * fail cuabi's allocations must not see it. With another allocator
 * (jemalloc, ASan's) the effect may be lost; nothing else changes. */
#include "util/heap.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Blocks under glibc's smallest mmap threshold (128 KiB), so they come from
 * the heap rather than from a mapping of their own that free() unmaps. */
#define BLOCK_BYTES ((size_t)112 * 1024)
#define MAX_BLOCKS 128   /* 14 MiB: the most CUABI_HEAP_RESERVE can ask */
/* Freed, raises glibc's mmap threshold to about this (and its trim threshold
 * to twice it): a process that ran NVRTC has it raised by NVRTC's frees. */
#define THRESHOLD_BYTES ((size_t)8 * 1024 * 1024)

/* Kept for the process's life: each call's blocks lie below its fence.
 * Tests call more than once; past FENCES a call's fence is freed again (its
 * blocks may then be trimmed: no harm). */
#define FENCES 8
static void *fences[FENCES];
static size_t nfences;
static pthread_mutex_t fences_lock = PTHREAD_MUTEX_INITIALIZER;

/* Make [p, p + len) resident: one madvise where the kernel has
 * MADV_POPULATE_WRITE, else a write to each page. The memory is ours
 * (allocated, not yet freed). */
static void make_resident(void *p, size_t len)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t e = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
    if (e <= a)
        return;
#ifdef MADV_POPULATE_WRITE
    if (madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
        return;
#endif
    for (uintptr_t q = a; q < e; q += page)
        *(volatile char *)q = 0;
}

size_t cuabi__heap_reserve_now(size_t bytes)
{
    void *blocks[MAX_BLOCKS + 1];
    size_t n = 0, want = bytes / BLOCK_BYTES;
    if (want == 0)
        return 0;
    if (want > MAX_BLOCKS)
        want = MAX_BLOCKS;
    /* glibc maps each allocation over its mmap threshold (128 KiB at start)
     * apart, faulted page by page and unmapped on free, every time; freeing
     * such a mapping raises the threshold to its size (glibc's own dynamic
     * rule, as NVRTC's large frees raise it in a process that compiles), so
     * the driver's larger node arrays come from the heap, and the reserve. */
    void *volatile big = malloc(THRESHOLD_BYTES);   /* volatile: not elided */
    free(big);
    /* One block more than reserved: the last, from the heap's top above the
     * others, is shrunk in place to the fence. (A small malloc would come
     * from any free small chunk, below the blocks: freed, they would then be
     * the top again, which free() trims.) */
    while (n < want + 1 && (blocks[n] = malloc(BLOCK_BYTES)) != NULL)
        n++;
    if (n < 2) {
        free(n ? blocks[0] : NULL);
        return 0;
    }
    void *last = blocks[--n];
    void *f = realloc(last, 64);
    if (f == NULL)
        f = last;   /* not shrunk: the whole block is the fence */
    pthread_mutex_lock(&fences_lock);
    if (f != NULL && nfences < FENCES) {
        fences[nfences++] = f;
        f = NULL;
    }
    pthread_mutex_unlock(&fences_lock);
    free(f);
    for (size_t i = 0; i < n; i++)
        make_resident(blocks[i], BLOCK_BYTES);
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
    return n * BLOCK_BYTES;
}

static pthread_once_t reserve_once = PTHREAD_ONCE_INIT;

size_t cuabi__heap_reserve_bytes(const char *setting)
{
    if (setting == NULL || *setting == '\0')
        return CUABI__HEAP_RESERVE_BYTES;
    char *end;
    errno = 0;
    unsigned long long kib = strtoull(setting, &end, 10);
    /* Not a plain decimal (a sign, spaces, junk, overflow): the default, as
     * for an unset variable; the setting is a tuning knob, not an input
     * worth failing a load for. */
    if (errno != 0 || *end != '\0' || setting[0] < '0' || setting[0] > '9')
        return CUABI__HEAP_RESERVE_BYTES;
    const unsigned long long most_kib = (unsigned long long)MAX_BLOCKS * BLOCK_BYTES / 1024;
    return (size_t)(kib > most_kib ? most_kib : kib) * 1024;
}

static void reserve_once_fn(void)
{
    size_t bytes = cuabi__heap_reserve_bytes(getenv("CUABI_HEAP_RESERVE"));
    if (bytes != 0)
        (void)cuabi__heap_reserve_now(bytes);
}

void cuabi__heap_reserve(void)
{
    pthread_once(&reserve_once, reserve_once_fn);
}
