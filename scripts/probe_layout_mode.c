/* Issue 24 item 3: the H200 VM's processes run either fast or ~2x slow for their
 * whole life, and with ASLR off all ran slow (docs/PERFORMANCE.md, seventh
 * session). Does a raw-driver C program, with no Python and no cuabi, show the
 * two modes too, and what differs between them: the instructions (other work)
 * or the cycles per instruction (the same work placed worse)? One process:
 * capture + instantiate of 100 launches, 6 rounds (round 0 is the first), each
 * step's wall time and, where the VM exposes them, its cycles, instructions,
 * iTLB and dTLB misses (perf_event_open, this thread, user + kernel); a pure
 * CPU loop and a libc call loop the same way; and where the process's parts lie.
 * One JSON line on stdout.
 *   gcc -O2 -o probe scripts/probe_layout_mode.c -I/usr/local/cuda/include \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -ldl
 *   ./probe k.cubin            (scripts/probe_layout_mode.sh runs many) */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { CUresult r_ = (x); if (r_) { printf("{\"error\": \"%s = %d\"}\n", #x, r_); exit(1); } } while (0)
enum { CYCLES, INSTRUCTIONS, ITLB, DTLB, L1I, NCOUNTERS };
static const char *counter_names[NCOUNTERS] = { "cycles", "instructions", "itlb_miss", "dtlb_miss", "l1i_miss" };
static int counter_fd[NCOUNTERS];

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int open_counter(uint32_t type, uint64_t config)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.disabled = 0;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static uint64_t cache_miss(uint64_t cache)
{
    return cache | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
}

static void open_counters(void)
{
    counter_fd[CYCLES] = open_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    counter_fd[INSTRUCTIONS] = open_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
    counter_fd[ITLB] = open_counter(PERF_TYPE_HW_CACHE, cache_miss(PERF_COUNT_HW_CACHE_ITLB));
    counter_fd[DTLB] = open_counter(PERF_TYPE_HW_CACHE, cache_miss(PERF_COUNT_HW_CACHE_DTLB));
    counter_fd[L1I] = open_counter(PERF_TYPE_HW_CACHE, cache_miss(PERF_COUNT_HW_CACHE_L1I));
}

static void read_counters(uint64_t *v)
{
    for (int i = 0; i < NCOUNTERS; i++) {
        v[i] = 0;
        if (counter_fd[i] >= 0 && read(counter_fd[i], &v[i], sizeof v[i]) != sizeof v[i])
            v[i] = 0;
    }
}

/* A step: its wall time and counter deltas, printed as "name": {...}. */
struct step { double t0; uint64_t c0[NCOUNTERS]; };

static void step_begin(struct step *s)
{
    read_counters(s->c0);
    s->t0 = now_us();
}

static void step_end(struct step *s, const char *name)
{
    double us = now_us() - s->t0;
    uint64_t c1[NCOUNTERS];
    read_counters(c1);
    printf("\"%s\": {\"us\": %.2f", name, us);
    for (int i = 0; i < NCOUNTERS; i++)
        if (counter_fd[i] >= 0)
            printf(", \"%s\": %llu", counter_names[i], (unsigned long long)(c1[i] - s->c0[i]));
    printf("}, ");
}

static volatile uint64_t sink;

static void cpu_loop(void)
{
    uint64_t x = 1;
    for (int i = 0; i < 5000000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

static void libc_loop(void)
{
    char buf[64] = "a string the loop measures";
    size_t total = 0;
    size_t (*volatile len)(const char *) = strlen;
    for (int i = 0; i < 1000000; i++)
        total += len(buf);
    sink = total;
}

/* A random cycle through n slots (Sattolo's shuffle), walked for steps: the
 * memory's latency, TLB walks included when the slots span many pages. */
static size_t *chase_ring(size_t bytes, int huge)
{
    size_t n = bytes / sizeof(size_t);
    size_t *ring = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ring == MAP_FAILED)
        return NULL;
    if (huge)
        madvise(ring, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < n; i++)
        ring[i] = i;
    uint64_t x = 88172645463325252ULL;
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = x % i, t = ring[i];
        ring[i] = ring[j];
        ring[j] = t;
    }
    return ring;
}

static void chase(const char *name, size_t bytes, int huge)
{
    size_t *ring = chase_ring(bytes, huge);
    if (!ring)
        return;
    struct step st;
    size_t at = 0;
    step_begin(&st);
    for (int i = 0; i < 1000000; i++)
        at = ring[at];
    step_end(&st, name);
    sink = at;
    munmap(ring, bytes);
}

static void print_layout(void)
{
    void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *small = malloc(64);
    int local;
    printf("\"layout\": {\"exe\": %llu, \"libcuda\": %llu, \"libc\": %llu, \"brk\": %llu, "
           "\"malloc\": %llu, \"mmap\": %llu, \"stack\": %llu}",
           (unsigned long long)(uintptr_t)&cpu_loop,
           (unsigned long long)(uintptr_t)dlsym(RTLD_DEFAULT, "cuInit"),
           (unsigned long long)(uintptr_t)dlsym(RTLD_DEFAULT, "strlen"),
           (unsigned long long)(uintptr_t)sbrk(0), (unsigned long long)(uintptr_t)small,
           (unsigned long long)(uintptr_t)anon, (unsigned long long)(uintptr_t)&local);
    free(small);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f)
        return 2;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *img = malloc(n);
    if (fread(img, 1, n, f) != (size_t)n)
        return 1;
    fclose(f);
    open_counters();
    printf("{");
    struct step st;
    step_begin(&st); cpu_loop(); step_end(&st, "cpu_loop");
    step_begin(&st); libc_loop(); step_end(&st, "libc_loop");
    chase("chase_256k", 256 << 10, 0);
    chase("chase_1m", 1 << 20, 0);
    chase("chase_16m", 16 << 20, 0);
    chase("chase_64m", 64 << 20, 0);
    chase("chase_64m_huge", 64 << 20, 1);
    CUdevice d; CUcontext c; CUlibrary lib; CUkernel k; CUfunction fn; CUstream s; CUdeviceptr p;
    step_begin(&st);
    CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
    step_end(&st, "init");
    CK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "k"));
    CK(cuKernelGetFunction(&fn, k));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&p, 4096));
    int nn = 5; float a = 1; void *args[] = { &p, &nn, &a };
    CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    CK(cuStreamSynchronize(s));
    step_begin(&st);
    for (int i = 0; i < 10000; i++)
        CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    step_end(&st, "launch_x10000");
    CK(cuStreamSynchronize(s));
    for (int round = 0; round < 6; round++) {
        CUgraph g; CUgraphExec e;
        char name[32];
        step_begin(&st);
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < 100; i++)
            CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
        CK(cuStreamEndCapture(s, &g));
        snprintf(name, sizeof name, "capture%d", round);
        step_end(&st, name);
        step_begin(&st);
        CK(cuGraphInstantiate(&e, g, 0));
        snprintf(name, sizeof name, "instantiate%d", round);
        step_end(&st, name);
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
    }
    step_begin(&st); cpu_loop(); step_end(&st, "cpu_loop_after");
    step_begin(&st); libc_loop(); step_end(&st, "libc_loop_after");
    print_layout();
    printf("}\n");
    return 0;
}
