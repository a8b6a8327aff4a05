/* What the real CUDA driver does with hostile IPC input (issue 29), with
 * no cuabi in between: the checks cuabi makes before the driver are
 * documented in docs/RELIABILITY.md ("Threat model: IPC descriptors and
 * file descriptors"); this says what is left to the driver's own refusal.
 *
 * The parent makes two IPC pools (POSIX fd handles), a buffer in one, a
 * freed one, a cuMemAlloc buffer and an interprocess event, and keeps them
 * while it starts one child per trial (another process, as IPC needs; one
 * each, so that a crash ends one trial only) and hands it the pools' fds
 * and the export data over a unix socket. Trials:
 *   fds      cuMemPoolImportFromShareableHandle of fds of every kind but a
 *            pool's (a pipe, /dev/null, a regular file, a socket, a FIFO, an
 *            eventfd, a memfd, a directory, O_PATH, a closed number, -1);
 *   ptr N    cuMemPoolImportPointer of the genuine export data with byte N
 *            changed (N = 0..63), zeros, random bytes, a freed buffer's, the
 *            genuine data into the other pool's import, the genuine data;
 *   mem N, event N: cuIpcOpenMemHandle / cuIpcOpenEventHandle likewise.
 * Each call runs under a 20 s alarm. One line per trial: the CUresult, or
 * the signal that ended the child; for an accepted forged pointer, whether
 * it is the genuine buffer's address and the size the driver gives its
 * allocation. Exit status 0 when every forged input was refused.
 *
 * Build and run on a GPU machine:
 *   gcc -O1 -o probe scripts/probe_ipc_driver.c -I/usr/local/cuda/include -lcuda && ./probe */
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                                 \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #call, r_);  \
            exit(2);                                                             \
        }                                                                        \
    } while (0)

typedef struct shared {
    CUmemPoolPtrExportData data, freed;
    CUipcMemHandle mem;
    CUipcEventHandle event;
    CUdeviceptr ptr;        /* the genuine buffer's address (the same in every process) */
} shared;

static const char *name_of(CUresult r)
{
    const char *n = "?";
    cuGetErrorName(r, &n);
    return n;
}

static void send_fds(int sock, const int *fds, int n, const void *p, size_t len)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = { (void *)p, len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                        .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    if (sendmsg(sock, &m, 0) != (ssize_t)len) { perror("sendmsg"); exit(2); }
}

static void recv_fds(int sock, int *fds, void *p, size_t len)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = { p, len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                        .msg_controllen = sizeof ctl };
    if (recvmsg(sock, &m, 0) != (ssize_t)len || !CMSG_FIRSTHDR(&m)) { perror("recvmsg"); exit(2); }
    memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&m)), 2 * sizeof(int));
}

static CUmemoryPool make_pool(CUdevice dev)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CUmemoryPool pool;
    CK(cuMemPoolCreate(&pool, &props));
    return pool;
}

static void random_bytes(void *p, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)p)[i] = (unsigned char)rand();
}

static CUmemoryPool import_pool(int fd, CUdevice dev)
{
    CUmemoryPool p;
    CK(cuMemPoolImportFromShareableHandle(&p, (void *)(uintptr_t)fd,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    cuMemPoolSetAccess(p, &acc, 1);
    return p;
}

/* Every fd kind but a pool's; prints one line each, returns how many were
 * accepted. */
static int trial_fds(const int *pools)
{
    int pipefd[2], sv[2], accepted = 0;
    if (pipe(pipefd) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { perror("pipe"); exit(2); }
    char file[] = "/tmp/probe-ipc-XXXXXX", fifo[] = "/tmp/probe-ipc-fifo";
    int reg = mkstemp(file);
    unlink(file);
    if (write(reg, "not a pool, 16 b", 16) != 16) exit(2);
    unlink(fifo);
    mkfifo(fifo, 0600);
    int fifofd = open(fifo, O_RDWR);
    unlink(fifo);
    int mfd = memfd_create("probe", 0);
    if (write(mfd, pools, sizeof *pools) != sizeof *pools) exit(2);
    int closed = dup(pools[0]);
    close(closed);
    struct { const char *what; int fd; } fds[] = {
        { "a pipe (read end)", pipefd[0] }, { "a pipe (write end)", pipefd[1] },
        { "/dev/null", open("/dev/null", O_RDWR) }, { "a regular file", reg },
        { "a unix socket", sv[0] }, { "a FIFO nobody writes", fifofd },
        { "an eventfd", eventfd(0, 0) }, { "a memfd", mfd },
        { "a directory", open("/tmp", O_RDONLY | O_DIRECTORY) },
        { "an O_PATH fd of /dev/nvidiactl", open("/dev/nvidiactl", O_PATH) },
        { "/dev/nvidiactl opened here", open("/dev/nvidiactl", O_RDWR) },
        { "a closed fd number", closed }, { "-1", -1 },
        { "another pool's fd (genuine)", pools[1] }, { "the pool's fd (genuine)", pools[0] },
    };
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) {
        CUmemoryPool p;
        alarm(20);
        CUresult r = cuMemPoolImportFromShareableHandle(&p, (void *)(uintptr_t)fds[i].fd,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        alarm(0);
        printf("  pool fd: %-36s %s\n", fds[i].what, name_of(r));
        if (r == CUDA_SUCCESS) {
            accepted += i + 2 < sizeof fds / sizeof *fds;
            cuMemPoolDestroy(p);
        }
    }
    return accepted;
}

/* One trial in this (child) process: 0 refused as it should, 1 accepted
 * though forged, 2 the genuine input refused. */
static int child(int sock, const char *kind, int arg)
{
    shared s;
    int pools[2];
    recv_fds(sock, pools, &s, sizeof s);
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    if (strcmp(kind, "fds") == 0)
        return trial_fds(pools) ? 1 : 0;
    int genuine = arg == -1;
    CUresult r;
    char extra[160] = "";
    alarm(20);
    if (strcmp(kind, "ptr") == 0 || strcmp(kind, "ptr-other-pool") == 0) {
        CUmemoryPool pool = import_pool(pools[strcmp(kind, "ptr") == 0 ? 0 : 1], dev);
        CUmemPoolPtrExportData d = s.data;
        if (arg >= 0)
            d.reserved[arg] ^= 0x5a;
        else if (arg == -2)
            memset(&d, 0, sizeof d);
        else if (arg == -3)
            random_bytes(&d, sizeof d, 1);
        else if (arg == -4)
            d = s.freed;
        CUdeviceptr p = 0;
        r = cuMemPoolImportPointer(&p, pool, &d);
        if (r == CUDA_SUCCESS) {
            CUdeviceptr base = 0;
            size_t size = 0;
            CUresult rr = cuMemGetAddressRange(&base, &size, p);
            snprintf(extra, sizeof extra, " -> %s address, allocation of %zu bytes (%s)",
                     p == s.ptr ? "the genuine" : "ANOTHER", size, name_of(rr));
            cuMemFree(p);
        }
        genuine = arg == -1 && strcmp(kind, "ptr") == 0;
    } else if (strcmp(kind, "mem") == 0) {
        CUipcMemHandle h = s.mem;
        if (arg >= 0)
            h.reserved[arg] ^= 0x5a;
        else if (arg == -2)
            memset(&h, 0, sizeof h);
        else if (arg == -3)
            random_bytes(&h, sizeof h, 2);
        CUdeviceptr p = 0;
        r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r == CUDA_SUCCESS) {
            CUdeviceptr base = 0;
            size_t size = 0;
            cuMemGetAddressRange(&base, &size, p);
            snprintf(extra, sizeof extra, " -> allocation of %zu bytes", size);
            cuIpcCloseMemHandle(p);
        }
    } else {
        CUipcEventHandle h = s.event;
        if (arg >= 0)
            h.reserved[arg] ^= 0x5a;
        else if (arg == -2)
            memset(&h, 0, sizeof h);
        else if (arg == -3)
            random_bytes(&h, sizeof h, 3);
        CUevent e;
        r = cuIpcOpenEventHandle(&e, h);
        if (r == CUDA_SUCCESS)
            cuEventDestroy(e);
    }
    alarm(0);
    printf("%s%s\n", name_of(r), extra);
    return genuine ? (r == CUDA_SUCCESS ? 0 : 2) : (r == CUDA_SUCCESS ? 1 : 0);
}

static const char *arg_name(int arg, char *buf, size_t n)
{
    switch (arg) {
    case -1: return "genuine";
    case -2: return "zeros";
    case -3: return "random";
    case -4: return "a freed buffer's";
    default: snprintf(buf, n, "byte %2d changed", arg); return buf;
    }
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child(atoi(argv[2]), argv[3], atoi(argv[4]));
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    int version = 0;
    cuDriverGetVersion(&version);
    CUmemoryPool pool = make_pool(dev), pool2 = make_pool(dev);
    int fds[2];
    CK(cuMemPoolExportToShareableHandle(&fds[0], pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CK(cuMemPoolExportToShareableHandle(&fds[1], pool2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    struct stat st;
    fstat(fds[0], &st);
    char link[256] = "", path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    ssize_t n = readlink(path, link, sizeof link - 1);
    printf("driver API %d; a pool's fd: mode %o (%s) -> %s\n", version, (unsigned)st.st_mode,
           S_ISCHR(st.st_mode) ? "character device" : "not a character device",
           n > 0 ? link : "?");
    CUdeviceptr freed, m;
    CUstream s;
    shared sh;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAllocFromPoolAsync(&sh.ptr, 1 << 20, pool, s));
    CK(cuMemAllocFromPoolAsync(&freed, 4096, pool, s));
    CK(cuStreamSynchronize(s));
    CK(cuMemPoolExportPointer(&sh.data, sh.ptr));
    CK(cuMemPoolExportPointer(&sh.freed, freed));
    CK(cuMemFreeAsync(freed, s));
    CK(cuStreamSynchronize(s));
    CK(cuMemAlloc(&m, 2 << 20));
    CK(cuIpcGetMemHandle(&sh.mem, m));
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    CK(cuIpcGetEventHandle(&sh.event, ev));

    static const char *kinds[] = { "fds", "ptr", "ptr-other-pool", "mem", "event" };
    int forged_accepted = 0, forged_crashed = 0, genuine_failed = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        int first = strcmp(kinds[k], "fds") == 0 || strcmp(kinds[k], "ptr-other-pool") == 0
                        ? -1 : strcmp(kinds[k], "ptr") == 0 ? -4 : -3;
        int last = strcmp(kinds[k], "fds") == 0 || strcmp(kinds[k], "ptr-other-pool") == 0 ? -1 : 63;
        for (int arg = first; arg <= last; arg++) {
            char buf[32];
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv)) { perror("socketpair"); return 2; }
            printf("%-15s %-17s ", kinds[k], strcmp(kinds[k], "fds") == 0 ? "" : arg_name(arg, buf, sizeof buf));
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                close(sv[0]);
                char a[16], b[16];
                snprintf(a, sizeof a, "%d", sv[1]);
                snprintf(b, sizeof b, "%d", arg);
                if (strcmp(kinds[k], "fds") == 0)
                    printf("\n");
                fflush(stdout);
                execl("/proc/self/exe", argv[0], "--child", a, kinds[k], b, (char *)NULL);
                _exit(3);
            }
            close(sv[1]);
            send_fds(sv[0], fds, 2, &sh, sizeof sh);
            int status;
            waitpid(pid, &status, 0);
            close(sv[0]);
            if (WIFSIGNALED(status)) {
                printf("KILLED by signal %d (%s)\n", WTERMSIG(status),
                       WTERMSIG(status) == SIGALRM ? "a call hung past 20 s" : "a crash in the driver");
                forged_crashed++;
            } else if (WEXITSTATUS(status) == 1) {
                forged_accepted++;
            } else if (WEXITSTATUS(status) != 0) {
                genuine_failed++;
            }
        }
    }
    printf("forged inputs accepted: %d; children killed: %d; genuine inputs refused: %d\n",
           forged_accepted, forged_crashed, genuine_failed);
    cuMemFreeAsync(sh.ptr, s);
    cuStreamSynchronize(s);
    cuMemFree(m);
    cuEventDestroy(ev);
    cuMemPoolDestroy(pool);
    cuMemPoolDestroy(pool2);
    return forged_accepted || forged_crashed || genuine_failed;
}
