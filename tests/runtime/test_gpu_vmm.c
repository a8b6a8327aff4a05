/* Virtual memory on a real GPU (issue 25 item 1): VMM support and the
 * granularities (printed); sizes rounded up to the granularity and said;
 * a buffer that grows in place while a kernel on another stream is still
 * reading its old range (the kernel's sum is checked, the address never
 * changes, old bytes stay, the new range is written by a kernel and read
 * back); growing past the reservation refused; shrinking by whole chunks
 * (the device's free memory printed before and after); read-only access
 * for the owning device; a DLPack export of a VMM view (kDLCUDA); a
 * VMM buffer crossing into another process (a spawned child: the chunks'
 * file descriptors through SCM_RIGHTS, cuabi_vmm_import, the child reads
 * the bytes, runs a kernel on them, and writes an answer the parent
 * reads); fabric handles where the device has them (skipped, said, where
 * the driver refuses them: single-node hosts without an IMEX channel).
 * With two GPUs, the peer case: GPU 1 gets read-write access to GPU 0's
 * VMM buffer, writes it from a kernel, keeps the access over a growth,
 * loses it again; a resource's peer access for its new buffers. With one
 * GPU that case is skipped, said. Exits 77 without a GPU. */
#include "testutil.h"

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { D = CUABI_IPC_DESCRIPTOR_SIZE };

static const char source[] =
    "extern \"C\" __global__ void spin_sum(const unsigned *p, int n, unsigned long long *out,\n"
    "                                      long long cycles) {\n"
    "  long long t = clock64();\n"
    "  while (clock64() - t < cycles) { }\n"
    "  unsigned long long acc = 0;\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    acc += p[i];\n"
    "  atomicAdd(out, acc);\n"
    "}\n"
    "extern \"C\" __global__ void fill(unsigned *p, int n, unsigned v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] = v + i;\n"
    "}\n";

static const char *self;
static cuabi_device *d0;
static size_t gran;   /* recommended granularity of device 0 */

static void setup(void)
{
    ck_assert_ok(cuabi_device_get(&d0, 0));
    ck_assert_ok(cuabi_vmm_granularity(&gran, d0, NULL));
}
static void teardown(void) { cuabi_device_release(d0); }

static cuabi_memory_resource *vmm(cuabi_device *d, uint64_t reserve, cuabi_vmm_handle_type h)
{
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.reserve_size = reserve;
    o.handle_type = h;
    cuabi_memory_resource *r;
    ck_assert_ok(cuabi_vmm_resource_create(&r, d, &o));
    return r;
}

static cuabi_vmm_info info_of(cuabi_buffer *b)
{
    cuabi_vmm_info i = CUABI_VMM_INFO_INIT;
    ck_assert_ok(cuabi_vmm_buffer_info(&i, b));
    return i;
}

static cuabi_kernel *kernel(cuabi_objcode **code, const char *name)
{
    cuabi_program *p;
    cuabi_kernel *k;
    ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "vmm.cu"));
    ck_assert_ok(cuabi_program_compile(code, p, NULL));
    cuabi_program_release(p);
    ck_assert_ok(cuabi_objcode_get_kernel(&k, *code, name));
    return k;
}

/* fill(p + off, n words, v) on `dev`, `s` (NULL: the default stream) */
static void launch_fill(cuabi_device *dev, cuabi_stream *s, uintptr_t p, int n, unsigned v)
{
    cuabi_objcode *code;
    cuabi_kernel *k = kernel(&code, "fill");
    cuabi_argpack *a;
    ck_assert_ok(cuabi_argpack_create(&a, "ptr, i32, u32"));
    ck_assert_ok(cuabi_argpack_set_pointer(a, 0, p));
    ck_assert_ok(cuabi_argpack_set_int(a, 1, n));
    ck_assert_ok(cuabi_argpack_set_uint(a, 2, v));
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 128;
    c.block[0] = 256;
    c.device = dev;
    c.stream = s;
    ck_assert_ok(cuabi_launch(k, a, &c));
    if (s)
        ck_assert_ok(cuabi_stream_synchronize(s));
    else
        ck_assert_ok(cuabi_device_synchronize(dev));
    cuabi_argpack_release(a);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
}

static void check_words(cuabi_buffer *b, size_t off, size_t n, unsigned v)
{
    uint32_t *h = malloc(n * 4);
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, off, n * 4, NULL));
    for (size_t i = 0; i < n; i++)
        if (h[i] != (uint32_t)(v + i))
            ck_abort_msg("word %zu at byte %zu: %u, expected %u", i, off, h[i], (unsigned)(v + i));
    free(h);
}

START_TEST(granularity_and_rounding)
{
    int yes = 0;
    ck_assert_ok(cuabi_vmm_supported(&yes, d0));
    ck_assert_int_eq(yes, 1);
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.granularity = CUABI_VMM_GRANULARITY_MINIMUM;
    size_t gmin;
    ck_assert_ok(cuabi_vmm_granularity(&gmin, d0, &o));
    printf("VMM granularity: minimum %zu, recommended %zu\n", gmin, gran);
    ck_assert_uint_gt(gmin, 0);
    ck_assert_uint_ge(gran, gmin);
    ck_assert_uint_eq(gran % gmin, 0);
    cuabi_memory_resource *r = vmm(d0, 0, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_memory_kind kind;
    ck_assert_ok(cuabi_memory_resource_kind(&kind, r));
    ck_assert_int_eq(kind, CUABI_MEMORY_DEVICE);
    /* 1 byte more than a granule: two granules, and both sizes said */
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, gran + 1, 0, NULL));
    size_t size;
    ck_assert_ok(cuabi_buffer_size(&size, b));
    ck_assert_uint_eq(size, 2 * gran);
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.requested, gran + 1);
    ck_assert_uint_eq(i.size, 2 * gran);
    ck_assert_uint_eq(i.reserved, 2 * gran);
    ck_assert_uint_eq(i.granularity, gran);
    ck_assert_uint_eq(i.chunks, 1);
    ck_assert_int_eq(i.imported, 0);
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(p, i.address);
    ck_assert_uint_eq(p % gran, 0);
    /* every byte usable, by a copy and by a kernel */
    ck_assert_ok(cuabi_buffer_memset(b, 0, 0x5a, 1, size, NULL));
    launch_fill(d0, NULL, p + gran, (int)(gran / 4), 3);
    check_words(b, gran, gran / 4, 3);
    uint8_t h[2];
    ck_assert_ok(cuabi_buffer_copy_to_host(h, b, gran - 1, 1, NULL));
    ck_assert_uint_eq(h[0], 0x5a);
    /* a view exports as CUDA device memory */
    cuabi_view *v;
    int64_t shape[1] = { 16 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 1, shape, NULL, 0));
    DLManagedTensorVersioned *t;
    ck_assert_ok(cuabi_view_to_dlpack_versioned(&t, v));
    ck_assert_int_eq(t->dl_tensor.device.device_type, CUABI_DLPACK_CUDA);
    ck_assert_int_eq(t->dl_tensor.device.device_id, 0);
    ck_assert_uint_eq((uintptr_t)t->dl_tensor.data + t->dl_tensor.byte_offset, p);
    t->deleter(t);
    ck_assert_ok(cuabi_view_release(v));
    ck_assert_ok(cuabi_buffer_destroy(b));
    /* the owning device's access can be read-only */
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.self_access = CUABI_PEER_ACCESS_READ;
    cuabi_memory_resource *ro;
    ck_assert_ok(cuabi_vmm_resource_create(&ro, d0, &o));
    ck_assert_ok(cuabi_buffer_allocate(&b, ro, gran, 0, NULL));
    cuabi_peer_access a;
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d0));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(ro));
    /* bad input */
    ck_assert_status(cuabi_vmm_buffer_allocate(&b, r, 0, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_vmm_buffer_allocate(&b, r, SIZE_MAX, 0), CUABI_ERROR_INVALID_ARGUMENT);
    o = (cuabi_vmm_options)CUABI_VMM_OPTIONS_INIT;
    o.addr_align = 3 * gran;
    ck_assert_status(cuabi_vmm_resource_create(&ro, d0, &o), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A kernel spinning and then summing the first chunk runs on its own stream
 * while the host grows the buffer twice: the address stays, the kernel's sum
 * is right, and the new chunks are usable at once. */
START_TEST(grows_while_a_kernel_reads_the_old_range)
{
    size_t words = gran / 4;
    cuabi_memory_resource *r = vmm(d0, 8 * gran, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, gran, 0, NULL));
    uintptr_t p0;
    ck_assert_ok(cuabi_buffer_pointer(&p0, b));
    uint32_t *h = malloc(gran);
    unsigned long long want = 0;
    for (size_t i = 0; i < words; i++) {
        h[i] = (uint32_t)(i % 1013);
        want += h[i];
    }
    ck_assert_ok(cuabi_buffer_copy_from_host(b, 0, h, gran, NULL));
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, d0));
    cuabi_buffer *sum;
    ck_assert_ok(cuabi_buffer_allocate(&sum, pool, 8, 0, NULL));
    ck_assert_ok(cuabi_buffer_memset(sum, 0, 0, 4, 2, NULL));
    cuabi_stream *s;
    ck_assert_ok(cuabi_stream_create(&s, d0, NULL));
    cuabi_objcode *code;
    cuabi_kernel *k = kernel(&code, "spin_sum");
    cuabi_argpack *a;
    ck_assert_ok(cuabi_argpack_create(&a, "ptr, i32, buffer, i64"));
    ck_assert_ok(cuabi_argpack_set_pointer(a, 0, p0));
    ck_assert_ok(cuabi_argpack_set_int(a, 1, (int64_t)words));
    ck_assert_ok(cuabi_argpack_set_buffer(a, 2, sum));
    ck_assert_ok(cuabi_argpack_set_int(a, 3, 400000000));   /* ~0.2 s at 2 GHz */
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 64;
    c.block[0] = 256;
    c.stream = s;
    c.device = d0;
    ck_assert_ok(cuabi_launch(k, a, &c));
    double t0 = now();
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * gran, NULL));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 4 * gran, NULL));
    double dt = now() - t0;
    int done = -1;
    ck_assert_ok(cuabi_stream_query(&done, s));
    printf("grew 1 -> 2 -> 4 granules in %.3f ms while the kernel ran (kernel %s)\n", dt * 1e3,
           done ? "had already finished: the overlap was not seen" : "still running");
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    ck_assert_uint_eq(p, p0);
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.size, 4 * gran);
    ck_assert_uint_eq(i.chunks, 3);
    ck_assert_uint_eq(i.mapped, 4 * gran);
    ck_assert_ok(cuabi_stream_synchronize(s));
    unsigned long long got = 0;
    ck_assert_ok(cuabi_buffer_copy_to_host(&got, sum, 0, 8, NULL));
    ck_assert_uint_eq(got, want);
    /* old bytes kept, new range written by a kernel through the same address */
    uint32_t *back = malloc(gran);
    ck_assert_ok(cuabi_buffer_copy_to_host(back, b, 0, gran, NULL));
    ck_assert_int_eq(memcmp(back, h, gran), 0);
    launch_fill(d0, s, p + gran, (int)(3 * words), 1000);
    check_words(b, gran, 3 * words, 1000);
    /* past the reservation: refused, named, and nothing changed */
    ck_assert_status(cuabi_vmm_buffer_resize(b, 8 * gran + 1, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("reserved range");
    ck_assert_uint_eq(info_of(b).size, 4 * gran);
    /* up to the reservation exactly */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 8 * gran, s));
    launch_fill(d0, s, p + 4 * gran, (int)(4 * words), 77);
    check_words(b, 4 * gran, 4 * words, 77);
    check_words(b, gran, 3 * words, 1000);
    /* shrink to one granule: the chunks past it go, the first stays */
    uint64_t free_before, free_after, total;
    ck_assert_ok(cuabi_device_memory_info(&free_before, &total, d0));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, gran, s));
    ck_assert_ok(cuabi_device_memory_info(&free_after, &total, d0));
    printf("shrinking 8 -> 1 granules: device free memory %+.1f MiB\n",
           ((double)free_after - (double)free_before) / (1 << 20));
    i = info_of(b);
    ck_assert_uint_eq(i.size, gran);
    ck_assert_uint_eq(i.mapped, gran);
    ck_assert_uint_eq(i.chunks, 1);
    ck_assert_ok(cuabi_buffer_copy_to_host(back, b, 0, gran, NULL));
    ck_assert_int_eq(memcmp(back, h, gran), 0);
    /* and grows again into the released range */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 2 * gran, NULL));
    launch_fill(d0, NULL, p + gran, (int)words, 5);
    check_words(b, gran, words, 5);
    /* shrinking under a view is refused */
    cuabi_view *v;
    int64_t shape[1] = { 4 };
    ck_assert_ok(cuabi_view_create(&v, b, 0, CUABI_DTYPE_UINT, 32, 1, shape, NULL, 0));
    ck_assert_status(cuabi_vmm_buffer_resize(b, gran, NULL), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_view_release(v));
    cuabi_argpack_release(a);
    cuabi_kernel_release(k);
    cuabi_objcode_release(code);
    cuabi_stream_release(s);
    ck_assert_ok(cuabi_buffer_destroy(sum));
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(pool));
    ck_assert_ok(cuabi_memory_resource_release(r));
    free(h);
    free(back);
}
END_TEST

/* Not VMM buffers: pool memory is refused by the VMM calls. */
START_TEST(other_buffers_are_refused)
{
    cuabi_memory_resource *pool;
    ck_assert_ok(cuabi_memory_resource_device_default(&pool, d0));
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, pool, 4096, 0, NULL));
    ck_assert_status(cuabi_vmm_buffer_resize(b, 8192, NULL), CUABI_ERROR_NOT_SUPPORTED);
    cuabi_vmm_info i = CUABI_VMM_INFO_INIT;
    ck_assert_status(cuabi_vmm_buffer_info(&i, b), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_vmm_set_access(b, d0, CUABI_PEER_ACCESS_READ), CUABI_ERROR_NOT_SUPPORTED);
    cuabi_buffer *no = (cuabi_buffer *)1;
    ck_assert_status(cuabi_vmm_buffer_allocate(&no, pool, 4096, 0), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_null(no);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(pool));
}
END_TEST

/* ---- another process ---- */

#define CHILD_CHECK(cond, ...)                                                \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "child: " __VA_ARGS__);                            \
            fprintf(stderr, " (%s)\n", cuabi_last_error()->message);           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* argv = self --vmm-child <socket fd>: receive every chunk, import, check the
 * bytes (word i == 7 + i), run a kernel writing 900 + i over the second
 * half, answer one byte. */
static int child_main(char **argv)
{
    int sock = atoi(argv[2]);
    uint8_t desc[16 * D];
    int fds[16];
    size_t idx, cnt = 1;
    for (size_t i = 0; i < cnt; i++) {
        CHILD_CHECK(cuabi_ipc_fd_receive(&fds[i], desc + i * D, D, sock) == CUABI_SUCCESS,
                    "receive chunk %zu", i);
        CHILD_CHECK(cuabi_vmm_descriptor_chunks(&idx, &cnt, desc + i * D, D) == CUABI_SUCCESS &&
                    idx == i && cnt <= 16, "descriptor %zu", i);
    }
    cuabi_device *dev;
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    CHILD_CHECK(cuabi_device_get(&dev, 0) == CUABI_SUCCESS, "device");
    CHILD_CHECK(cuabi_vmm_resource_create(&r, dev, NULL) == CUABI_SUCCESS, "resource");
    CHILD_CHECK(cuabi_vmm_import(&b, r, fds, cnt, desc, cnt * D) == CUABI_SUCCESS, "import");
    for (size_t i = 0; i < cnt; i++)
        close(fds[i]);
    cuabi_vmm_info info = CUABI_VMM_INFO_INIT;
    CHILD_CHECK(cuabi_vmm_buffer_info(&info, b) == CUABI_SUCCESS && info.imported == 1 &&
                info.chunks == cnt, "info");
    size_t words = info.size / 4;
    uint32_t *h = malloc(info.size);
    CHILD_CHECK(cuabi_buffer_copy_to_host(h, b, 0, info.size, NULL) == CUABI_SUCCESS, "read");
    for (size_t i = 0; i < words; i++)
        CHILD_CHECK(h[i] == (uint32_t)(7 + i), "word %zu is %u", i, h[i]);
    CHILD_CHECK(cuabi_vmm_buffer_resize(b, 2 * info.size, NULL) == CUABI_ERROR_NOT_SUPPORTED,
                "an imported buffer does not resize");
    cuabi_program *p;
    cuabi_objcode *code;
    cuabi_kernel *k;
    cuabi_argpack *a;
    CHILD_CHECK(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1,
                                     "vmm.cu") == CUABI_SUCCESS &&
                cuabi_program_compile(&code, p, NULL) == CUABI_SUCCESS &&
                cuabi_objcode_get_kernel(&k, code, "fill") == CUABI_SUCCESS, "kernel");
    CHILD_CHECK(cuabi_argpack_create(&a, "ptr, i32, u32") == CUABI_SUCCESS &&
                cuabi_argpack_set_pointer(a, 0, info.address + info.size / 2) == CUABI_SUCCESS &&
                cuabi_argpack_set_int(a, 1, (int64_t)(words / 2)) == CUABI_SUCCESS &&
                cuabi_argpack_set_uint(a, 2, 900) == CUABI_SUCCESS, "arguments");
    cuabi_launch_config c = CUABI_LAUNCH_CONFIG_INIT;
    c.grid[0] = 64;
    c.block[0] = 256;
    c.device = dev;
    CHILD_CHECK(cuabi_launch(k, a, &c) == CUABI_SUCCESS &&
                cuabi_device_synchronize(dev) == CUABI_SUCCESS, "launch");
    CHILD_CHECK(cuabi_buffer_destroy(b) == CUABI_SUCCESS, "unmap");
    char ok = 'y';
    CHILD_CHECK(write(sock, &ok, 1) == 1, "answer");
    free(h);
    return 0;
}

START_TEST(another_process_maps_and_writes_the_buffer)
{
    cuabi_memory_resource *r = vmm(d0, 4 * gran, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, gran, 0, NULL));
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 3 * gran, NULL));     /* two chunks */
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    size_t words = 3 * gran / 4;
    launch_fill(d0, NULL, p, (int)words, 7);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
    char *args[] = { (char *)self, "--vmm-child", fdarg, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, sv[0]);
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, self, &fa, NULL, args, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    cuabi_vmm_info i = info_of(b);
    ck_assert_uint_eq(i.chunks, 2);
    uint8_t desc[D];
    for (size_t c = 0; c < i.chunks; c++) {
        int fd = -1;
        ck_assert_ok(cuabi_vmm_export_chunk(&fd, desc, D, b, c));
        ck_assert_int_ge(fd, 0);
        cuabi_ipc_kind kind;
        ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, desc, D));
        ck_assert_int_eq(kind, CUABI_IPC_VMM_CHUNK);
        ck_assert_ok(cuabi_ipc_fd_send(sv[0], fd, desc, D));
        close(fd);
    }
    int fd;
    ck_assert_status(cuabi_vmm_export_chunk(&fd, desc, D, b, i.chunks),
                     CUABI_ERROR_INVALID_ARGUMENT);
    char answer = 0;
    ssize_t got = read(sv[0], &answer, 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)",
                  status);
    ck_assert_int_eq(got, 1);
    ck_assert_int_eq(answer, 'y');
    close(sv[0]);
    check_words(b, 0, words / 2, 7);
    check_words(b, words / 2 * 4, words / 2, 900);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* Fabric handles: exported into the descriptor itself, imported in this
 * process under a second resource (the driver allows a fabric import in the
 * exporting process). Skipped, said, where the device or the driver does not
 * give fabric memory. */
START_TEST(fabric_handles_where_the_driver_has_them)
{
    cuabi_vmm_options o = CUABI_VMM_OPTIONS_INIT;
    o.handle_type = CUABI_VMM_HANDLE_FABRIC;
    cuabi_memory_resource *r;
    cuabi_status st = cuabi_vmm_resource_create(&r, d0, &o);
    if (st == CUABI_ERROR_NOT_SUPPORTED) {
        printf("SKIP part: no fabric handles (%s)\n", cuabi_last_error()->message);
        return;
    }
    ck_assert_ok(st);
    cuabi_buffer *b;
    st = cuabi_buffer_allocate(&b, r, gran, 0, NULL);
    if (st != CUABI_SUCCESS) {
        printf("SKIP part: the driver makes no fabric memory here (%s)\n",
               cuabi_last_error()->message);
        ck_assert_ok(cuabi_memory_resource_release(r));
        return;
    }
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    launch_fill(d0, NULL, p, (int)(gran / 4), 11);
    uint8_t desc[D];
    int fd = 0;
    ck_assert_ok(cuabi_vmm_export_chunk(&fd, desc, D, b, 0));
    ck_assert_int_eq(fd, -1);
    cuabi_ipc_kind kind;
    ck_assert_ok(cuabi_ipc_descriptor_kind(&kind, desc, D));
    ck_assert_int_eq(kind, CUABI_IPC_VMM_FABRIC_CHUNK);
    cuabi_buffer *imp;
    st = cuabi_vmm_import(&imp, r, NULL, 1, desc, D);
    if (st == CUABI_SUCCESS) {
        check_words(imp, 0, gran / 4, 11);
        ck_assert_ok(cuabi_buffer_destroy(imp));
    } else {
        printf("fabric import in the exporting process: %s (%s)\n", cuabi_status_name(st),
               cuabi_last_error()->message);
        ck_assert_int_eq(st, CUABI_ERROR_IPC);
    }
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
}
END_TEST

/* ---- two GPUs ---- */

START_TEST(peer_access_to_a_vmm_buffer)
{
    cuabi_device *d1;
    ck_assert_ok(cuabi_device_get(&d1, 1));
    cuabi_memory_resource *r = vmm(d0, 4 * gran, CUABI_VMM_HANDLE_POSIX_FD);
    cuabi_buffer *b;
    ck_assert_ok(cuabi_buffer_allocate(&b, r, gran, 0, NULL));
    uintptr_t p;
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    cuabi_peer_access a;
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    ck_assert_ok(cuabi_vmm_set_access(b, d1, CUABI_PEER_ACCESS_READ_WRITE));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    /* GPU 1 writes GPU 0's memory through the VMM mapping (no context peer access) */
    launch_fill(d1, NULL, p, (int)(gran / 4), 40);
    check_words(b, 0, gran / 4, 40);
    /* the access is remembered for the chunk it grows by */
    ck_assert_ok(cuabi_vmm_buffer_resize(b, 3 * gran, NULL));
    launch_fill(d1, NULL, p + gran, (int)(2 * gran / 4), 50);
    check_words(b, gran, 2 * gran / 4, 50);
    check_words(b, 0, gran / 4, 40);
    /* read-only, then none */
    ck_assert_ok(cuabi_vmm_set_access(b, d1, CUABI_PEER_ACCESS_READ));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ);
    ck_assert_ok(cuabi_vmm_set_access(b, d1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    /* the owning device's access: vmm.h says the driver refuses taking it
     * away; whichever way the driver answers, the buffer stays usable */
    cuabi_status own = cuabi_vmm_set_access(b, d0, CUABI_PEER_ACCESS_NONE);
    printf("taking the owning device's access away: %s (%s)\n", cuabi_status_name(own),
           own ? cuabi_last_error()->message : "allowed");
    if (own == CUABI_SUCCESS)
        ck_assert_ok(cuabi_vmm_set_access(b, d0, CUABI_PEER_ACCESS_READ_WRITE));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d0));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    check_words(b, 0, gran / 4, 40);
    ck_assert_ok(cuabi_buffer_destroy(b));
    /* a resource's peers: its new buffers come with the access */
    ck_assert_ok(cuabi_vmm_resource_set_peer_access(r, d1, CUABI_PEER_ACCESS_READ_WRITE));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, gran, 0, NULL));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_READ_WRITE);
    ck_assert_ok(cuabi_buffer_pointer(&p, b));
    launch_fill(d1, NULL, p, (int)(gran / 4), 60);
    check_words(b, 0, gran / 4, 60);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_vmm_resource_set_peer_access(r, d1, CUABI_PEER_ACCESS_NONE));
    ck_assert_ok(cuabi_buffer_allocate(&b, r, gran, 0, NULL));
    ck_assert_ok(cuabi_vmm_get_access(&a, b, d1));
    ck_assert_int_eq(a, CUABI_PEER_ACCESS_NONE);
    ck_assert_ok(cuabi_buffer_destroy(b));
    ck_assert_ok(cuabi_memory_resource_release(r));
    cuabi_device_release(d1);
}
END_TEST

static Suite *suite(int gpus)
{
    Suite *s = suite_create("gpu_vmm");
    TCase *tc = tcase_create("vmm");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, granularity_and_rounding);
    tcase_add_test(tc, grows_while_a_kernel_reads_the_old_range);
    tcase_add_test(tc, other_buffers_are_refused);
    tcase_add_test(tc, another_process_maps_and_writes_the_buffer);
    tcase_add_test(tc, fabric_handles_where_the_driver_has_them);
    if (gpus >= 2)
        tcase_add_test(tc, peer_access_to_a_vmm_buffer);
    else
        printf("SKIP part: VMM peer access needs two GPUs (%d visible)\n", gpus);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--vmm-child") == 0)
        return child_main(argv);
    self = argv[0];
    int n = cuabi_test_require_gpu();
    cuabi_device *d;
    int yes = 0;
    if (cuabi_device_get(&d, 0) == CUABI_SUCCESS && cuabi_vmm_supported(&yes, d) == CUABI_SUCCESS &&
        !yes) {
        printf("SKIP: device 0 has no VMM (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED "
               "is 0)\n");
        return 77;
    }
    cuabi_device_release(d);
    return cuabi_test_run(suite(n));
}
