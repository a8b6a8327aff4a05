/* IPC descriptors and file descriptors are untrusted input (issue 29): they
 * come from other processes, in pickles and over sockets. Against the fake
 * driver (tests/fixtures/fake_multigpu.h: legacy IPC, IPC events, IPC pools
 * whose fds are memfds), this target feeds
 *
 *  - descriptors: raw bytes, or a real descriptor of every kind written by
 *    the library at start-up (legacy memory, memory inside a wrapped
 *    allocation, events of two devices, two pools and their buffers, freed
 *    buffers) with fields patched and the checksum recomputed
 *    (cuabi__ipc_reseal) or not, truncated or with trailing bytes, to
 *    cuabi_ipc_descriptor_kind, cuabi_ipc_buffer_import,
 *    cuabi_ipc_event_import, cuabi_ipc_pool_import (with the pool's own fd,
 *    another pool's, -1, a closed number, a regular file, /dev/null, a pipe,
 *    a socket), cuabi_ipc_pool_buffer_import (into the right mapped pool,
 *    the wrong one, resources that are no mapped pool, the result of the
 *    import above), cuabi_ipc_pool_buffers_import (the descriptor among two
 *    real ones of pool A, or alone at another length) and cuabi_ipc_pool_info;
 *    a pool in host memory (a NUMA node, issue 24) and its buffer are among
 *    the real descriptors: its descriptor is format 2 and carries the
 *    location the import range-checks;
 *  - messages: payloads with 0 to 7 file descriptors of every kind over
 *    SEQPACKET, STREAM and DGRAM socket pairs (sent raw or by
 *    cuabi_ipc_fd_send, the sender closed or not) to cuabi_ipc_fd_receive.
 *
 * Traps when a refusal is not a status the API names with a message naming
 * the function, or leaves an output set; when an import succeeds that the
 * frame check (cuabi_ipc_descriptor_kind) refuses, or of another kind; when
 * an imported buffer is not exactly the descriptor's size inside a live
 * exporter allocation (its first and last bytes are read: ASan sees the
 * rest); when a message other than one of exactly the expected length with
 * exactly one descriptor is accepted (SEQPACKET, DGRAM); and when anything
 * is left after the input: a handle, a mapping, an imported pointer or
 * event, a fake pool, or a file descriptor (/proc/self/fd is counted).
 *
 * Input: byte 0 is the mode (bits 0-1: 0 raw descriptor, 1 and 3 patched
 * descriptor, 2 message; bit 2: reseal / adopt; bits 3-5: the fd for the
 * pool import, with bit 6: (bits 3-6) % NFD), byte 1 the calls to make; then the mode's fields (see
 * below). CUABI_FUZZ_WRITE_SEEDS=DIR writes the seed corpus (real
 * descriptors of every kind and mutations of them) into DIR and exits. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/ipc.h"
#include "runtime/memory.h"
#include "fake_multigpu.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz_ipc: line %d: %s fails (last error: %s)\n", __LINE__,   \
                    #cond, cuabi_last_error()->message);                                   \
            __builtin_trap();                                                              \
        }                                                                                  \
    } while (0)

enum { D = CUABI_IPC_DESCRIPTOR_SIZE, MAXD = 4096 };

/* The real descriptors, all "from our parent" (another live process). */
enum {
    SRC_MEM0,           /* legacy memory, device 0, a whole allocation */
    SRC_MEM1_INSIDE,    /* legacy memory, device 1, 1000 bytes at 256 of an allocation */
    SRC_MEM_FREED,      /* legacy memory the exporter freed */
    SRC_EVENT0,
    SRC_EVENT1,
    SRC_POOL_A,
    SRC_POOL_A_BUF1,    /* 4096 bytes */
    SRC_POOL_A_BUF2,    /* 100 bytes */
    SRC_POOL_A_FREED,   /* a buffer of pool A the exporter freed */
    SRC_POOL_B,
    SRC_POOL_B_BUF,
    SRC_POOL_H,         /* a pool in host memory: NUMA node 1, exported from device 0 */
    SRC_POOL_H_BUF,     /* 300 bytes of it */
    NSRC
};
static const char *src_names[NSRC] = { "mem0",  "mem1_inside", "mem_freed", "event0",
                                       "event1", "pool_a",     "pool_a_buf1", "pool_a_buf2",
                                       "pool_a_freed", "pool_b", "pool_b_buf", "pool_h",
                                       "pool_h_buf" };
static uint8_t src[NSRC][D];

/* File descriptors a pool import may be given. */
enum { FD_POOL_A, FD_POOL_B, FD_MINUS_ONE, FD_CLOSED, FD_FILE, FD_DEVNULL, FD_PIPE, FD_SOCKET,
       FD_POOL_H, NFD };
static int fds[NFD];

static cuabi_device *dev[2];
static cuabi_memory_resource *pool_a, *pool_b, *pool_h, *plain, *host;
static uint64_t pool_a_id, pool_b_id;
static pid_t dead_pid;
static uint8_t uuid[2][16];

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static uint64_t take(reader *r, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)(r->p < r->end ? *r->p++ : 0) << (8 * i);
    return v;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void from_parent(uint8_t *d)
{
    cuabi__ipc_put(d + CUABI__IPC_PID, (uint64_t)getppid(), 4);
    cuabi__ipc_reseal(d);
}

/* ------------------------------------------------------------ start-up */

static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    fake_driver_install();
    fake_memory_install();
    fake_multigpu_install();
    for (int i = 0; i < 2; i++) {
        CHECK(cuabi_device_get(&dev[i], i) == CUABI_SUCCESS);
        CUuuid u;
        fake_cuDeviceGetUuid(&u, i);
        memcpy(uuid[i], u.bytes, 16);
    }
    /* Legacy memory: a buffer, a range inside another allocation, a freed one. */
    cuabi_memory_resource *legacy[2];
    cuabi_buffer *b, *w;
    for (int i = 0; i < 2; i++)
        CHECK(cuabi_ipc_memory_resource(&legacy[i], dev[i]) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, legacy[0], 4096, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_MEM0], D, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, legacy[1], 8192, 0, NULL) == CUABI_SUCCESS);
    uintptr_t p;
    CHECK(cuabi_buffer_pointer(&p, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_wrap(&w, dev[1], CUABI_MEMORY_DEVICE, p + 256, 1000, NULL, NULL) ==
          CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_MEM1_INSIDE], D, w) == CUABI_SUCCESS);
    CHECK(cuabi__ipc_get(src[SRC_MEM1_INSIDE] + CUABI__IPC_OFFSET, 8) == 256);
    CHECK(cuabi_buffer_allocate(&b, legacy[0], 64, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_MEM_FREED], D, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_destroy(b) == CUABI_SUCCESS);
    /* Events. */
    for (int i = 0; i < 2; i++) {
        cuabi_event *e;
        CHECK(cuabi_ipc_event_create(&e, dev[i]) == CUABI_SUCCESS);
        CHECK(cuabi_ipc_event_export(src[SRC_EVENT0 + i], D, e) == CUABI_SUCCESS);
    }
    /* Pools A (device 0) and B (device 1), their buffers and fds. */
    CHECK(cuabi_ipc_pool_create(&pool_a, dev[0], NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_pool_create(&pool_b, dev[1], NULL) == CUABI_SUCCESS);
    cuabi_ipc_pool_role role;
    CHECK(cuabi_ipc_pool_info(&role, &pool_a_id, pool_a) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_pool_info(&role, &pool_b_id, pool_b) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_pool_export(&fds[FD_POOL_A], src[SRC_POOL_A], D, pool_a) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_pool_export(&fds[FD_POOL_B], src[SRC_POOL_B], D, pool_b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, pool_a, 4096, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_POOL_A_BUF1], D, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, pool_a, 100, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_POOL_A_BUF2], D, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, pool_a, 512, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_POOL_A_FREED], D, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_destroy(b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, pool_b, 256, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_POOL_B_BUF], D, b) == CUABI_SUCCESS);
    /* Pool H, in host memory (NUMA node 1), opened to both devices: a
     * forged UUID may map it on either (the fake's one process checks the
     * exporter's pool's access). */
    cuabi_ipc_pool_options ho = CUABI_IPC_POOL_OPTIONS_INIT;
    ho.location_type = CUABI_LOCATION_HOST_NUMA;
    ho.location_id = 1;
    CHECK(cuabi_ipc_pool_create(&pool_h, dev[0], &ho) == CUABI_SUCCESS);
    CHECK(cuabi_peer_set_pool_access(pool_h, dev[1], CUABI_PEER_ACCESS_READ_WRITE) ==
          CUABI_SUCCESS);
    CHECK(cuabi_ipc_pool_export(&fds[FD_POOL_H], src[SRC_POOL_H], D, pool_h) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_allocate(&b, pool_h, 300, 0, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_ipc_buffer_export(src[SRC_POOL_H_BUF], D, b) == CUABI_SUCCESS);
    for (int i = 0; i < NSRC; i++)
        from_parent(src[i]);
    /* Resources that are no mapped pool. */
    CHECK(cuabi_memory_resource_pool_create(&plain, dev[0], NULL) == CUABI_SUCCESS);
    CHECK(cuabi_memory_resource_host(&host) == CUABI_SUCCESS);
    /* The other file descriptors. */
    fds[FD_MINUS_ONE] = -1;
    fds[FD_CLOSED] = 900;
    close(900);
    char path[] = "/tmp/cuabi-fuzz-ipc-XXXXXX";
    fds[FD_FILE] = mkstemp(path);
    CHECK(fds[FD_FILE] >= 0);
    unlink(path);
    CHECK(write(fds[FD_FILE], "not a pool token", 16) == 16);
    fds[FD_DEVNULL] = open("/dev/null", O_RDWR | O_CLOEXEC);
    int pair[2];
    CHECK(pipe(pair) == 0);
    fds[FD_PIPE] = pair[0];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    fds[FD_SOCKET] = pair[0];
    /* A process id that is no process any more. */
    dead_pid = fork();
    if (dead_pid == 0)
        _exit(0);
    waitpid(dead_pid, NULL, 0);
}

/* ------------------------------------------------------------ checks */

/* A refusal: a status the API names for it, a message naming the function. */
static void refused(cuabi_status st, const char *fn)
{
    CHECK(st == CUABI_ERROR_IPC || st == CUABI_ERROR_INVALID_ARGUMENT);
    const char *m = cuabi_last_error()->message;
    CHECK(m && strstr(m, fn));
}

/* An imported buffer: exactly `size` bytes inside a live exporter
 * allocation of the right kind (an IPC pool's, or cuMemAlloc's for legacy
 * IPC); its first and last bytes are read. */
static void check_buffer(cuabi_buffer *b, uint64_t size, bool of_pool)
{
    uintptr_t p;
    size_t n;
    CHECK(cuabi_buffer_pointer(&p, b) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_size(&n, b) == CUABI_SUCCESS);
    CHECK(n == size && n > 0);
    int slot = fake_alloc_slot(p);
    CHECK(slot >= 0);
    CHECK(n <= fake_allocs[slot].base + fake_allocs[slot].size - p);
    CHECK((fake_allocs[slot].pool != NULL) == of_pool);
    uint8_t c[2];
    CHECK(cuabi_buffer_copy_to_host(&c[0], b, 0, 1, NULL) == CUABI_SUCCESS);
    CHECK(cuabi_buffer_copy_to_host(&c[1], b, n - 1, 1, NULL) == CUABI_SUCCESS);
}

/* Import the buffer `d` describes into `pool`; `frame_ok`/`kind` is what
 * the frame check said of it. */
static void pool_buffer_import(cuabi_memory_resource *pool, const uint8_t *d, size_t n,
                               bool frame_ok, cuabi_ipc_kind kind)
{
    cuabi_buffer *b = (cuabi_buffer *)1;
    cuabi_status st = cuabi_ipc_pool_buffer_import(&b, pool, d, n);
    if (st != CUABI_SUCCESS) {
        CHECK(b == NULL);
        if (st == CUABI_ERROR_INVALID_HANDLE)
            CHECK(pool == NULL);
        else
            refused(st, "cuabi_ipc_pool_buffer_import");
        return;
    }
    CHECK(frame_ok && kind == CUABI_IPC_POOL_MEMORY);
    cuabi_ipc_pool_role role;
    uint64_t id;
    CHECK(cuabi_ipc_pool_info(&role, &id, pool) == CUABI_SUCCESS);
    CHECK(role == CUABI_IPC_POOL_MAPPED && id == cuabi__ipc_get(d + CUABI__IPC_POOL_ID, 8));
    check_buffer(b, cuabi__ipc_get(d + CUABI__IPC_SIZE, 8), true);
    CHECK(cuabi_buffer_destroy(b) == CUABI_SUCCESS);
}

/* The batch import (cuabi_ipc_pool_buffers_import) of the input's
 * descriptor among real buffers of pool A, at position `at` of three; a
 * descriptor of another length alone. All or nothing: refused, every out[]
 * is NULL and address 0 (the leak checks after the input see any import
 * left behind); accepted, every buffer is its descriptor's. */
static void pool_buffers_import(cuabi_memory_resource *pool, const uint8_t *d, size_t n, int at)
{
    uint8_t blk[3 * D];
    cuabi_buffer *out[3] = { (cuabi_buffer *)1, (cuabi_buffer *)1, (cuabi_buffer *)1 };
    uint64_t addr[3] = { 7, 7, 7 };
    size_t count = 3, size = sizeof blk;
    const uint8_t *descs = blk;
    if (n == D) {
        memcpy(blk, src[SRC_POOL_A_BUF1], D);
        memcpy(blk + D, src[SRC_POOL_A_BUF2], D);
        memcpy(blk + 2 * D, src[SRC_POOL_A_BUF1], D);
        memcpy(blk + at * D, d, D);
    } else {
        count = 1;
        size = n;
        descs = d;
    }
    cuabi_status st = cuabi_ipc_pool_buffers_import(out, addr, pool, descs, size, count);
    if (st != CUABI_SUCCESS) {
        for (size_t i = 0; i < count; i++)
            CHECK(out[i] == NULL && addr[i] == 0);
        if (st == CUABI_ERROR_INVALID_HANDLE)
            CHECK(pool == NULL);
        else if (st == CUABI_ERROR_BUFFER_TOO_SMALL)
            CHECK(strstr(cuabi_last_error()->message, "cuabi_ipc_pool_buffers_import"));
        else
            refused(st, "cuabi_ipc_pool_buffers_import");
        return;
    }
    CHECK(n == D);
    for (size_t i = 0; i < count; i++) {
        uintptr_t p;
        CHECK(cuabi_buffer_pointer(&p, out[i]) == CUABI_SUCCESS && p == addr[i]);
        check_buffer(out[i], cuabi__ipc_get(blk + i * D + CUABI__IPC_SIZE, 8), true);
        CHECK(cuabi_buffer_destroy(out[i]) == CUABI_SUCCESS);
    }
}

/* A mapped pool of `which` from its own fd and descriptor; refused (NULL)
 * only while a forged descriptor's mapping of the same id is alive. */
static cuabi_memory_resource *mapped(int which, bool forged_alive)
{
    cuabi_memory_resource *m = (cuabi_memory_resource *)1;
    cuabi_status st = cuabi_ipc_pool_import(&m, fds[which == SRC_POOL_A ? FD_POOL_A : FD_POOL_B],
                                            src[which], D);
    if (st != CUABI_SUCCESS) {
        CHECK(forged_alive && m == NULL);
        refused(st, "cuabi_ipc_pool_import");
        return NULL;
    }
    return m;
}

/* Byte 1 of the input: which calls to make. */
enum {
    DO_KIND = 1,
    DO_BUFFER = 2,
    DO_EVENT = 4,
    DO_POOL = 8,
    DO_INTO_A = 16,
    DO_INTO_B = 32,
    DO_INTO_OTHERS = 64,
    DO_INTO_RESULT = 128,
};

static void descriptor_calls(const uint8_t *d, size_t n, unsigned what, int fd)
{
    cuabi_ipc_kind kind = 0;
    cuabi_status st = cuabi_ipc_descriptor_kind(&kind, d, n);
    bool frame_ok = st == CUABI_SUCCESS;
    if (!frame_ok)
        refused(st, "cuabi_ipc_descriptor_kind");
    else
        CHECK(kind >= CUABI_IPC_MEMORY && kind <= CUABI_IPC_VMM_FABRIC_CHUNK && n == D);
    if (what & DO_KIND)
        CHECK(cuabi_ipc_descriptor_kind(NULL, d, n) == CUABI_ERROR_INVALID_ARGUMENT);

    if (what & DO_BUFFER) {
        cuabi_buffer *b = (cuabi_buffer *)1;
        int maps = fake_ipc_open_maps;
        st = cuabi_ipc_buffer_import(&b, d, n);
        if (st == CUABI_SUCCESS) {
            CHECK(frame_ok && kind == CUABI_IPC_MEMORY);
            CHECK(fake_ipc_open_maps == maps + 1);
            check_buffer(b, cuabi__ipc_get(d + CUABI__IPC_SIZE, 8), false);
            CHECK(cuabi_buffer_destroy(b) == CUABI_SUCCESS);
        } else {
            CHECK(b == NULL);
            refused(st, "cuabi_ipc_buffer_import");
        }
        CHECK(fake_ipc_open_maps == maps);
    }
    if (what & DO_EVENT) {
        cuabi_event *e = (cuabi_event *)1;
        st = cuabi_ipc_event_import(&e, d, n);
        if (st == CUABI_SUCCESS) {
            CHECK(frame_ok && kind == CUABI_IPC_EVENT);
            CHECK(cuabi_event_synchronize(e) == CUABI_SUCCESS);
            CHECK(cuabi_event_release(e) == CUABI_SUCCESS);
        } else {
            CHECK(e == NULL);
            refused(st, "cuabi_ipc_event_import");
        }
    }
    cuabi_memory_resource *res = NULL;
    if (what & DO_POOL) {
        res = (cuabi_memory_resource *)1;
        st = cuabi_ipc_pool_import(&res, fd, d, n);
        if (st == CUABI_SUCCESS) {
            CHECK(frame_ok && kind == CUABI_IPC_POOL);
            cuabi_ipc_pool_role role;
            uint64_t id;
            CHECK(cuabi_ipc_pool_info(&role, &id, res) == CUABI_SUCCESS);
            CHECK(role == CUABI_IPC_POOL_MAPPED && id == cuabi__ipc_get(d + CUABI__IPC_POOL_ID, 8));
            cuabi_buffer *no = (cuabi_buffer *)1;
            CHECK(cuabi_buffer_allocate(&no, res, 64, 0, NULL) == CUABI_ERROR_NOT_SUPPORTED);
            CHECK(no == NULL);
        } else {
            CHECK(res == NULL);
            refused(st, "cuabi_ipc_pool_import");
        }
    }
    if (what & (DO_INTO_A | DO_INTO_B)) {
        cuabi_memory_resource *ma = what & DO_INTO_A ? mapped(SRC_POOL_A, res != NULL) : NULL;
        cuabi_memory_resource *mb = what & DO_INTO_B ? mapped(SRC_POOL_B, res != NULL) : NULL;
        if (ma)
            pool_buffer_import(ma, d, n, frame_ok, kind);
        if (mb)
            pool_buffer_import(mb, d, n, frame_ok, kind);
        if (ma)
            CHECK(cuabi_memory_resource_release(ma) == CUABI_SUCCESS);
        if (mb)
            CHECK(cuabi_memory_resource_release(mb) == CUABI_SUCCESS);
    }
    if (what & DO_INTO_OTHERS) {
        cuabi_memory_resource *others[] = { pool_a, pool_b, plain, host, NULL };
        for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
            cuabi_buffer *b = (cuabi_buffer *)1;
            st = cuabi_ipc_pool_buffer_import(&b, others[i], d, n);
            CHECK(st != CUABI_SUCCESS && b == NULL);
            if (others[i])
                refused(st, "cuabi_ipc_pool_buffer_import");
            else
                CHECK(st == CUABI_ERROR_INVALID_HANDLE);
            cuabi_ipc_pool_role role;
            uint64_t id;
            st = cuabi_ipc_pool_info(&role, &id, others[i]);
            CHECK(others[i] ? st == CUABI_SUCCESS : st == CUABI_ERROR_INVALID_HANDLE);
        }
    }
    if (res) {
        if (what & DO_INTO_RESULT) {
            pool_buffer_import(res, d, n, frame_ok, kind);
            pool_buffers_import(res, d, n, n ? d[n - 1] % 3 : 0);
            for (int i = SRC_POOL_A_BUF1; i <= SRC_POOL_H_BUF; i++)
                if (i != SRC_POOL_B && i != SRC_POOL_H)
                    pool_buffer_import(res, src[i], D, true, CUABI_IPC_POOL_MEMORY);
        }
        CHECK(cuabi_memory_resource_release(res) == CUABI_SUCCESS);
    }
}

/* ------------------------------------------------- patched descriptors */

static void patch(uint8_t *d, unsigned field, uint64_t v)
{
    switch (field % 16) {
    case 0: d[CUABI__IPC_MAGIC + (v & 7)] = (uint8_t)(v >> 8); break;
    case 1: cuabi__ipc_put(d + CUABI__IPC_VERSION, v, 2); break;
    case 2: cuabi__ipc_put(d + CUABI__IPC_KIND, v & 0x100 ? v >> 16 : v % 6, 2); break;
    case 3: cuabi__ipc_put(d + CUABI__IPC_LENGTH, v & 1 ? v >> 8 : D + (uint64_t)(int8_t)(v >> 8), 4); break;
    case 4: {
        uint64_t pid = 0;
        switch (v % 5) {
        case 0: pid = (uint64_t)getpid(); break;
        case 1: pid = (uint64_t)getppid(); break;
        case 2: pid = (uint64_t)dead_pid; break;
        case 3: pid = 1; break;
        default: pid = v >> 8; break;
        }
        cuabi__ipc_put(d + CUABI__IPC_PID, pid, 4);
        break;
    }
    case 5: cuabi__ipc_put(d + CUABI__IPC_HOST, v & 1 ? v : cuabi__ipc_host_hash(), 8); break;
    case 6:
        if (v % 3 < 2) {
            memcpy(d + CUABI__IPC_UUID, uuid[v % 3], 16);
        } else {
            cuabi__ipc_put(d + CUABI__IPC_UUID, v, 8);
            cuabi__ipc_put(d + CUABI__IPC_UUID + 8, v >> 3, 8);
        }
        break;
    case 7: cuabi__ipc_put(d + CUABI__IPC_SIZE, v, 8); break;
    case 8:
        cuabi__ipc_put(d + CUABI__IPC_SIZE,
                       cuabi__ipc_get(d + CUABI__IPC_SIZE, 8) + (uint64_t)(int16_t)v, 8);
        break;
    case 9: cuabi__ipc_put(d + CUABI__IPC_OFFSET, v, 8); break;
    case 10:
        cuabi__ipc_put(d + CUABI__IPC_OFFSET,
                       cuabi__ipc_get(d + CUABI__IPC_OFFSET, 8) + (uint64_t)(int16_t)v, 8);
        break;
    case 11: {
        const uint64_t ids[3] = { pool_a_id, pool_b_id, 0 };
        cuabi__ipc_put(d + CUABI__IPC_POOL_ID, ids[v % 3], 8);
        break;
    }
    /* case 12 also writes a pool descriptor's location (the handle bytes) */
    case 12: d[CUABI__IPC_HANDLE + (v & 63)] = (uint8_t)(v >> 8); break;
    case 13: memcpy(d + CUABI__IPC_HANDLE, src[v % NSRC] + CUABI__IPC_HANDLE, 64); break;
    case 14: d[v % D] = (uint8_t)(v >> 8); break;
    default: cuabi__ipc_put(d + CUABI__IPC_CHECKSUM, v, 8); break;
    }
}

/* ------------------------------------------------------------ messages */

/* Send `len` bytes with `nfd` descriptors (raw sendmsg: any count, any
 * length, zero included). */
static void send_raw(int sock, const uint8_t *p, size_t len, const int *fdv, int nfd)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(8 * sizeof(int))]; } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfd > 0) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
        memcpy(CMSG_DATA(c), fdv, (size_t)nfd * sizeof(int));
    }
    (void)sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Mode 2: [1] socket type (bits 0-1, % 3), number of fds (bits 2-4), by cuabi_ipc_fd_send
 * (bit 5), a second message (bit 6), the sender closes (bit 7); [2] which
 * fds (each pair of bits picks one); [3] the size asked for (0 and 255 are
 * 0 and 5000, refused); [4] the payload's length; the payload; the second
 * message is the rest. */
static void message(reader *r)
{
    static const int types[3] = { SOCK_SEQPACKET, SOCK_STREAM, SOCK_DGRAM };
    static const int kinds[4] = { FD_POOL_A, FD_FILE, FD_PIPE, FD_SOCKET };
    unsigned how = (unsigned)take(r, 1), which = (unsigned)take(r, 2);
    unsigned want_byte = (unsigned)take(r, 1);
    size_t want = want_byte == 0 ? 0 : want_byte == 255 ? 5000 : want_byte;
    int type = types[(how & 3) % 3], nfd = (int)((how >> 2) & 7);
    size_t len = (size_t)take(r, 1);
    if (len > (size_t)(r->end - r->p))
        len = (size_t)(r->end - r->p);
    const uint8_t *payload = r->p;
    r->p += len;
    int fdv[8];
    for (int i = 0; i < nfd; i++)
        fdv[i] = fds[kinds[(which >> (2 * i)) & 3]];

    int sv[2];
    CHECK(socketpair(AF_UNIX, type, 0, sv) == 0);
    CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);   /* never wait for what was not sent */
    bool expect_ok = false;
    if ((how & 32) && len > 0 && nfd <= 1) {
        int fd = nfd ? fdv[0] : (which & 1 ? -1 : fds[FD_CLOSED]);
        cuabi_status st = cuabi_ipc_fd_send(sv[0], fd, payload, len);
        if (st == CUABI_SUCCESS) {
            CHECK(nfd == 1);
            expect_ok = type != SOCK_STREAM && want == len;
        } else {
            CHECK(st == CUABI_ERROR_INVALID_ARGUMENT || st == CUABI_ERROR_IO);
            CHECK(strstr(cuabi_last_error()->message, "cuabi_ipc_fd_send"));
        }
    } else {
        send_raw(sv[0], payload, len, fdv, nfd);
        expect_ok = type != SOCK_STREAM && nfd == 1 && want == len && len > 0;
    }
    if (how & 64)
        send_raw(sv[0], r->p, (size_t)(r->end - r->p), fdv, nfd > 2 ? 2 : nfd);
    if (how & 128)
        close(sv[0]);

    uint8_t buf[5000];
    for (int round = 0; round < 3; round++) {
        int fd = -5;
        cuabi_status st = cuabi_ipc_fd_receive(&fd, buf, want, sv[1]);
        if (st == CUABI_SUCCESS) {
            CHECK(want >= 1 && want <= 4096);
            CHECK(round > 0 || type == SOCK_STREAM || expect_ok);
            CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
            if (round == 0 && expect_ok)
                CHECK(memcmp(buf, payload, want) == 0);
            close(fd);
        } else {
            CHECK(fd == -1);
            CHECK(round > 0 || !expect_ok);
            CHECK(st == CUABI_ERROR_IO || st == CUABI_ERROR_IPC ||
                  st == CUABI_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(cuabi_last_error()->message, "cuabi_ipc_fd_receive"));
            if (st != CUABI_ERROR_IPC)
                break;
        }
    }
    if (!(how & 128))
        close(sv[0]);
    close(sv[1]);
}

/* ------------------------------------------------------------ the input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    size_t live = cuabi__handle_live_count();
    int maps = fake_ipc_open_maps, imports = fake_pool_imports, events = fake_live_events;
    int pools = fake_live_pools, allocs = fake_live_allocs, nfds = open_fds();

    reader r = { data, data + size };
    unsigned mode = (unsigned)take(&r, 1), what = (unsigned)take(&r, 1);
    int fd = fds[((mode >> 3) & 15) % NFD];
    uint8_t d[MAXD + 64];
    size_t n;
    memset(d, 0, sizeof d);
    switch (mode & 3) {
    case 0:   /* raw bytes; bit 2: adopted (this host, our parent, resealed) */
        n = (size_t)(r.end - r.p);
        if (n > MAXD)
            n = MAXD;
        memcpy(d, r.p, n);
        if ((mode & 4) && n >= D) {
            cuabi__ipc_put(d + CUABI__IPC_HOST, cuabi__ipc_host_hash(), 8);
            from_parent(d);
        }
        descriptor_calls(d, n, what, fd);
        break;
    case 2:
        message(&r);
        break;
    default: {   /* [2] source, [3] length, then (field, 8-byte value) patches */
        unsigned s = (unsigned)take(&r, 1) % NSRC;
        unsigned lb = (unsigned)take(&r, 1);
        n = lb < 192 ? (size_t)D : (size_t)((int)D + (int)lb - 224);
        memcpy(d, src[s], D);
        while (r.p < r.end) {
            unsigned field = (unsigned)take(&r, 1);
            patch(d, field, take(&r, 8));
        }
        if (mode & 4)
            cuabi__ipc_reseal(d);
        descriptor_calls(d, n, what, fd);
        break;
    }
    }

    CHECK(cuabi__handle_live_count() == live);
    CHECK(fake_ipc_open_maps == maps);
    CHECK(fake_pool_imports == imports);
    CHECK(fake_live_events == events);
    CHECK(fake_live_pools == pools);
    CHECK(fake_live_allocs == allocs);
    CHECK(open_fds() == nfds);
    return 0;
}

/* ------------------------------------------------------------ seeds */

static void seed(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* A patched-descriptor seed: source, calls, the fd, then patches. */
static void seed_patched(const char *dir, const char *name, int s, unsigned what, int fd,
                         bool reseal, int len_byte, const uint8_t *patches, size_t np)
{
    uint8_t in[256];
    in[0] = (uint8_t)(1 | (reseal ? 4 : 0) | fd << 3);
    in[1] = (uint8_t)what;
    in[2] = (uint8_t)s;
    in[3] = (uint8_t)len_byte;
    if (np)
        memcpy(in + 4, patches, np);
    seed(dir, name, in, 4 + np);
}

static size_t one_patch(uint8_t *p, unsigned field, uint64_t v)
{
    p[0] = (uint8_t)field;
    cuabi__ipc_put(p + 1, v, 8);
    return 9;
}

/* The fd that goes with source `s`'s pool. */
static int own_fd(int s)
{
    return s == SRC_POOL_B ? FD_POOL_B : s == SRC_POOL_H || s == SRC_POOL_H_BUF ? FD_POOL_H
                                                                               : FD_POOL_A;
}

static void write_seeds(const char *dir)
{
    char name[128];
    uint8_t in[D + 2], p[64];
    /* Real descriptors of every kind, raw (as written by the exporter:
     * another pid, this host) and adopted, to every call. */
    for (int s = 0; s < NSRC; s++) {
        in[0] = 0;
        in[1] = 0xff;
        memcpy(in + 2, src[s], D);
        snprintf(name, sizeof name, "raw_%s", src_names[s]);
        seed(dir, name, in, sizeof in);
        in[0] = (uint8_t)(4 | own_fd(s) << 3);
        snprintf(name, sizeof name, "adopted_%s", src_names[s]);
        seed(dir, name, in, sizeof in);
    }
    /* Each one unpatched to every call with its own fd, and the pool with every fd. */
    for (int s = 0; s < NSRC; s++) {
        snprintf(name, sizeof name, "real_%s", src_names[s]);
        seed_patched(dir, name, s, 0xff, own_fd(s), true, 0, NULL, 0);
    }
    static const char *fd_names[NFD] = { "pool_a", "pool_b", "minus_one", "closed",
                                         "file", "devnull", "pipe", "socket", "pool_h" };
    for (int f = 0; f < NFD; f++) {
        snprintf(name, sizeof name, "pool_fd_%s", fd_names[f]);
        seed_patched(dir, name, SRC_POOL_A, DO_POOL | DO_INTO_RESULT, f, true, 0, NULL, 0);
    }
    /* Mutations: each field, resealed. */
    struct { const char *name; int s; unsigned field; uint64_t v; } m[] = {
        { "kind_event_as_memory", SRC_EVENT0, 2, 1 },
        { "kind_memory_as_pool", SRC_MEM0, 2, 3 },
        { "kind_pool_as_pool_memory", SRC_POOL_A, 2, 4 },
        { "kind_zero", SRC_MEM0, 2, 0 },
        { "kind_unknown", SRC_POOL_A_BUF1, 2, 5 },
        { "version_2", SRC_MEM0, 1, 2 },
        { "length_wrong", SRC_MEM0, 3, 0x8901 },
        { "pid_self", SRC_MEM0, 4, 0 },
        { "pid_dead", SRC_POOL_A, 4, 2 },
        { "pid_init", SRC_MEM0, 4, 3 },
        { "pid_negative", SRC_EVENT0, 4, 0xffffffff04ull },
        { "host_other", SRC_MEM0, 5, 0x1234567 },
        { "uuid_other_device", SRC_MEM0, 6, 1 },
        { "uuid_none", SRC_POOL_A, 6, 2 },
        { "pool_uuid_other_device", SRC_POOL_A, 6, 1 },
        { "size_huge", SRC_MEM0, 7, UINT64_MAX },
        { "size_zero", SRC_POOL_A_BUF1, 7, 0 },
        { "size_one_more", SRC_POOL_A_BUF2, 8, 1 },
        { "size_past_mapping", SRC_MEM1_INSIDE, 8, 7000 },
        { "offset_huge", SRC_MEM1_INSIDE, 9, UINT64_MAX - 100 },
        { "offset_past", SRC_MEM1_INSIDE, 10, 8000 },
        { "offset_back", SRC_MEM1_INSIDE, 10, (uint64_t)(uint16_t)-256 },
        { "pool_id_other", SRC_POOL_A_BUF1, 11, 1 },
        { "pool_id_zero", SRC_POOL_A, 11, 2 },
        { "pool_of_another_exporter", SRC_POOL_A, 4, 3 },
        { "handle_byte", SRC_POOL_A_BUF1, 12, 0x4209 },
        { "handle_of_event", SRC_MEM0, 13, SRC_EVENT0 },
        { "handle_of_freed", SRC_POOL_A_BUF1, 13, SRC_POOL_A_FREED },
        { "handle_of_other_pool", SRC_POOL_A_BUF1, 13, SRC_POOL_B_BUF },
        { "byte_in_pad", SRC_MEM0, 14, 0x7714 },
        /* a pool in host memory (issue 24): its location, its format */
        { "host_pool_location_host", SRC_POOL_H, 12, 0x0200 },
        { "host_pool_location_device", SRC_POOL_H, 12, 0x0100 },
        { "host_pool_node_huge", SRC_POOL_H, 12, 0xff07 },
        { "host_pool_node_other", SRC_POOL_H, 12, 0x0004 },
        { "host_pool_byte_after_location", SRC_POOL_H, 12, 0x0108 },
        { "host_pool_as_format_1", SRC_POOL_H, 1, 1 },
        { "host_pool_format_3", SRC_POOL_H, 1, 3 },
        { "device_pool_as_format_2", SRC_POOL_A, 1, 2 },
        { "host_pool_buf_as_format_2", SRC_POOL_H_BUF, 1, 2 },
        { "host_pool_uuid_none", SRC_POOL_H, 6, 2 },
        { "host_pool_uuid_other_device", SRC_POOL_H, 6, 1 },
        { "host_pool_buf_size_one_more", SRC_POOL_H_BUF, 8, 1 },
    };
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
        size_t np = one_patch(p, m[i].field, m[i].v);
        int fd = own_fd(m[i].s);
        snprintf(name, sizeof name, "mut_%s", m[i].name);
        seed_patched(dir, name, m[i].s, 0xff, fd, true, 0, p, np);
    }
    /* Not resealed (corrupt), truncated, trailing. */
    size_t np = one_patch(p, 7, 12345);
    seed_patched(dir, "corrupt_size", SRC_MEM0, 0xff, FD_POOL_A, false, 0, p, np);
    seed_patched(dir, "truncated_by_one", SRC_POOL_A, 0xff, FD_POOL_A, true, 223, NULL, 0);
    seed_patched(dir, "trailing_byte", SRC_POOL_A_BUF1, 0xff, FD_POOL_A, true, 225, NULL, 0);
    /* Raw short inputs. */
    static const uint8_t magic_only[] = { 0, 0xff, 'C', 'U', 'A', 'B', 'I', 'I', 'P', 'C' };
    seed(dir, "raw_magic_only", magic_only, sizeof magic_only);
    static const uint8_t empty[] = { 0, 0xff };
    seed(dir, "raw_empty", empty, sizeof empty);
    /* Messages: [0]=2, [1] unused, [2] how, [3..4] which fds, [5] size, [6] length, payload. */
    struct { const char *name; unsigned how, which, want, len; } msgs[] = {
        { "msg_good_seqpacket", 0 | 1 << 2, 0, 136, 136 },
        { "msg_good_by_fd_send", 0 | 1 << 2 | 32, 0, 136, 136 },
        { "msg_no_fd", 0, 0, 136, 136 },
        { "msg_two_fds", 0 | 2 << 2, 0x9, 136, 136 },
        { "msg_seven_fds_ctrunc", 0 | 7 << 2, 0x1b1b, 40, 40 },
        { "msg_fd_of_file", 0 | 1 << 2, 1, 20, 20 },
        { "msg_short", 0 | 1 << 2, 0, 136, 100 },
        { "msg_long", 0 | 1 << 2, 0, 100, 136 },
        /* found by this target: an empty message with descriptors leaked them */
        { "regression_empty_message_with_fd", 0 | 1 << 2, 2, 136, 0 },
        { "regression_empty_datagram_with_fds", 2 | 3 << 2, 0x24, 136, 0 },
        { "msg_stream", 1 | 1 << 2, 0, 136, 136 },
        { "msg_stream_two_messages", 1 | 1 << 2 | 64, 0, 20, 20 },
        { "msg_dgram", 2 | 1 << 2, 3, 8, 8 },
        { "msg_peer_closed", 0 | 1 << 2 | 128, 0, 16, 16 },
        { "msg_nothing_peer_closed", 128, 0, 16, 0 },
        { "msg_size_zero", 0 | 1 << 2, 0, 0, 16 },
        { "msg_size_5000", 0 | 1 << 2, 0, 255, 16 },
        { "msg_send_bad_fd", 0 | 32, 1, 16, 16 },
    };
    for (size_t i = 0; i < sizeof msgs / sizeof *msgs; i++) {
        uint8_t buf[8 + 256];
        buf[0] = 2;
        buf[1] = 0;
        buf[2] = (uint8_t)msgs[i].how;
        buf[3] = (uint8_t)msgs[i].which;
        buf[4] = (uint8_t)(msgs[i].which >> 8);
        buf[5] = (uint8_t)msgs[i].want;
        buf[6] = (uint8_t)msgs[i].len;
        for (unsigned k = 0; k < msgs[i].len; k++)
            buf[7 + k] = k < D ? src[SRC_POOL_A][k] : (uint8_t)k;
        seed(dir, msgs[i].name, buf, 7 + msgs[i].len);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("CUABI_FUZZ_WRITE_SEEDS");
    if (dir) {
        setup();
        write_seeds(dir);
        exit(0);
    }
    return 0;
}
