/* Host time per all-reduce call at 8 bytes (issue 23 item 5): cuabi's
 * cuabi_nccl_all_reduce beside a raw ncclAllReduce of the same NCCL library
 * (the file cuabi loaded, dlopen()ed again: the same copy), each on a
 * one-rank communicator of GPU 0, in alternating batches of 2000 calls with
 * a stream synchronize between batches, median of 9 batches each. Prints
 * one line per path and the difference; the target is <= 1 us.
 *
 *   bench/bench_nccl [calls per batch]      (a GPU and NCCL needed) */
#include <cuabi.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                              \
    do {                                                                       \
        cuabi_status s_ = (x);                                                 \
        if (s_ != CUABI_SUCCESS) {                                             \
            fprintf(stderr, "%s: %s\n", #x, cuabi_last_error()->message);      \
            return 1;                                                          \
        }                                                                      \
    } while (0)

typedef struct { char b[128]; } nid;
typedef int (*init_fn)(void **, int, nid, int);
typedef int (*ar_fn)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*id_fn)(nid *);
typedef int (*destroy_fn)(void *);

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 2000;
    enum { BATCHES = 9 };
    cuabi_device *d;
    cuabi_stream *s;
    cuabi_memory_resource *mr;
    cuabi_buffer *b;
    CHECK(cuabi_device_get(&d, 0));
    CHECK(cuabi_stream_create(&s, d, NULL));
    CHECK(cuabi_memory_resource_device_default(&mr, d));
    CHECK(cuabi_buffer_allocate(&b, mr, 256, 0, s));
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    CHECK(cuabi_runtime_info_get(&info));
    if (info.nccl_status != CUABI_SUCCESS) {
        fprintf(stderr, "no NCCL: %s\n", info.nccl_error);
        return 77;
    }
    cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
    CHECK(cuabi_device_get_properties(&p, d));
    printf("card: %s; NCCL %d.%d.%d from %s\n", p.name, info.nccl_version / 10000,
           info.nccl_version / 100 % 100, info.nccl_version % 100, info.nccl_path);
    void *dl = dlopen(info.nccl_path, RTLD_NOW | RTLD_LOCAL);
    init_fn init = (init_fn)dlsym(dl, "ncclCommInitRank");
    ar_fn ar = (ar_fn)dlsym(dl, "ncclAllReduce");
    id_fn getid = (id_fn)dlsym(dl, "ncclGetUniqueId");
    destroy_fn destroy = (destroy_fn)dlsym(dl, "ncclCommDestroy");
    if (!init || !ar || !getid || !destroy)
        return fprintf(stderr, "%s lacks an entry point\n", info.nccl_path), 1;
    cuabi_nccl_unique_id uid;
    cuabi_nccl_comm *c;
    CHECK(cuabi_nccl_get_unique_id(&uid));
    CHECK(cuabi_nccl_comm_init_rank(&c, d, 1, &uid, 0, NULL));
    nid rid;
    void *raw = NULL;
    if (getid(&rid) || init(&raw, 1, rid, 0))   /* device 0 is current (cuabi made it so) */
        return fprintf(stderr, "raw ncclCommInitRank failed\n"), 1;
    uintptr_t ptr;
    CHECK(cuabi_buffer_pointer(&ptr, b));
    uintptr_t cs;
    CHECK(cuabi_stream_raw(&cs, s));
    double t_cuabi[BATCHES], t_raw[BATCHES];
    for (int k = -1; k < BATCHES; k++) {   /* k = -1: warm-up */
        double t0 = now_ns();
        for (int i = 0; i < calls; i++)
            CHECK(cuabi_nccl_all_reduce(c, NULL, 0, b, 0, 2, CUABI_NCCL_FLOAT32, CUABI_NCCL_SUM,
                                        s));
        double t1 = now_ns();
        CHECK(cuabi_stream_synchronize(s));
        double t2 = now_ns();
        for (int i = 0; i < calls; i++)
            if (ar((void *)ptr, (void *)ptr, 2, 7, 0, raw, (void *)cs))
                return fprintf(stderr, "ncclAllReduce failed\n"), 1;
        double t3 = now_ns();
        CHECK(cuabi_stream_synchronize(s));
        if (k >= 0) {
            t_cuabi[k] = (t1 - t0) / calls;
            t_raw[k] = (t3 - t2) / calls;
        }
    }
    qsort(t_cuabi, BATCHES, sizeof(double), cmp);
    qsort(t_raw, BATCHES, sizeof(double), cmp);
    double mc = t_cuabi[BATCHES / 2], mr_ = t_raw[BATCHES / 2];
    printf("host time per 8-byte all-reduce call (median of %d batches of %d):\n", BATCHES, calls);
    printf("  raw ncclAllReduce        %8.0f ns\n", mr_);
    printf("  cuabi_nccl_all_reduce    %8.0f ns\n", mc);
    printf("  difference               %8.0f ns  (target <= 1000 ns: %s)\n", mc - mr_,
           mc - mr_ <= 1000 ? "met" : "NOT met");
    destroy(raw);
    cuabi_nccl_comm_release(c);
    cuabi_buffer_destroy(b);
    cuabi_memory_resource_release(mr);
    cuabi_stream_release(s);
    cuabi_device_release(d);
    return 0;
}
