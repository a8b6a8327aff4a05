/* What the driver does when one process imports the same pool pointer again
 * (issue 24 item 1: test_gpu_pinned_pool's child failed its second round with
 * CUDA_ERROR_ALREADY_MAPPED). Raw driver, no cuabi. For a pinned (HOST_NUMA)
 * pool and a device pool, exported to a forked child through a POSIX fd:
 *   dup      import the pointer twice while the first import lives
 *   free     import, cuMemFree, import again
 *   async    import, cuMemFreeAsync + sync, import again
 * Run: ./probe pinned; ./probe device (one pool kind per process).
 * Build: gcc -O2 probe_pool_reimport.c -I/usr/local/cuda/include -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define CK(x) do { CUresult r_ = (x); if (r_) { printf("  %s = %d\n", #x, r_); } } while (0)

static int send_fd(int sock, int fd)
{
    char b = 1, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = { &b, 1 };
    struct msghdr m = { 0 };
    m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = ctl; m.msg_controllen = sizeof ctl;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS; c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
    char b, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = { &b, 1 };
    struct msghdr m = { 0 };
    m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = ctl; m.msg_controllen = sizeof ctl;
    if (recvmsg(sock, &m, 0) != 1) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
    return fd;
}

static void child(int sock, int host)
{
    CUdevice dev; CUcontext ctx; CUstream s;
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx)); CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemPoolPtrExportData dd, *data = &dd;
    int fd = recv_fd(sock);
    if (fd < 0 || read(sock, &dd, sizeof dd) != (ssize_t)sizeof dd) { printf("  no fd/data\n"); return; }
    CUmemoryPool pool;
    CUresult r = cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    printf("%s pool: import pool -> %d\n", host ? "pinned" : "device", r);
    if (r) return;
    CUdeviceptr a = 0, b = 0;
    r = cuMemPoolImportPointer(&a, pool, data);
    CUresult r2 = cuMemPoolImportPointer(&b, pool, data);
    printf("  dup: first %d (%#llx), second while the first lives %d (%#llx)\n", r,
           (unsigned long long)a, r2, (unsigned long long)b);
    if (!r2 && b) CK(cuMemFree(b));
    if (!r) CK(cuMemFree(a));
    r = cuMemPoolImportPointer(&a, pool, data);
    printf("  free: import after cuMemFree -> %d\n", r);
    if (!r) {
        CK(cuMemFreeAsync(a, s)); CK(cuStreamSynchronize(s));
        r = cuMemPoolImportPointer(&a, pool, data);
        printf("  async: import after cuMemFreeAsync + sync -> %d\n", r);
        if (!r) CK(cuMemFree(a));
    }
    char ok = 1;
    if (write(sock, &ok, 1) != 1) perror("write");
}

static void run(int host)
{
    /* Fork before the parent touches CUDA (a child of an initialised process may not). */
    int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    fflush(stdout);
    pid_t pid = fork();
    if (!pid) { close(sv[0]); child(sv[1], host); fflush(stdout); _exit(0); }
    close(sv[1]);
    CUdevice dev; CUcontext ctx; CUstream s;
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx)); CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemPoolProps p; memset(&p, 0, sizeof p);
    p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (host) {
        int numa = -1;
        CK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
        p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; p.location.id = numa < 0 ? 0 : numa;
    } else {
        p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0;
    }
    CUmemoryPool pool;
    CUresult r = cuMemPoolCreate(&pool, &p);
    if (r) { printf("%s pool: create -> %d\n", host ? "pinned" : "device", r); kill(pid, 9); return; }
    CUdeviceptr ptr; CK(cuMemAllocFromPoolAsync(&ptr, 1 << 16, pool, s)); CK(cuStreamSynchronize(s));
    /* The pool is shared first: the driver exports no pointer of an unshared pool. */
    int fd = -1; CK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemPoolPtrExportData data; CK(cuMemPoolExportPointer(&data, ptr));
    send_fd(sv[0], fd);
    if (write(sv[0], &data, sizeof data) != (ssize_t)sizeof data) perror("write");
    char ok; if (read(sv[0], &ok, 1) != 1) printf("  child gave no answer\n");
    waitpid(pid, NULL, 0);
    CK(cuMemFreeAsync(ptr, s)); CK(cuStreamSynchronize(s)); CK(cuMemPoolDestroy(pool));
}

int main(int argc, char **argv)
{
    run(argc > 1 && !strcmp(argv[1], "device") ? 0 : 1);  /* one per process: fork first */
    return 0;
}
