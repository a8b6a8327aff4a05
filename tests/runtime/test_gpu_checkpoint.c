/* Checkpoint and restore on the local GPU. This program starts itself again
 * as a child (a fresh process: CUDA does not survive fork), which fills
 * 1 GiB of device memory with a pattern, says it is ready and waits. The
 * parent locks it, checkpoints it (the device's free memory rises: the
 * child's memory is released), restores it (then onto the same GPU named
 * by UUID, a second cycle), unlocks it, and the child checks every word of
 * its buffer. Also the refusals: the wrong state, an unknown pid, this
 * process's own pid (refused at once instead of the driver's hang).
 *
 * Exits 77 without a GPU, and skips with the reason when the driver refuses
 * checkpointing here (CUDA_ERROR_NOT_SUPPORTED, no entry points, or no
 * permission over the child). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include <cuda.h>

#define CHILD_BYTES ((size_t)1 << 30)
#define PATTERN 0xA5C3u

static const char *self_path;

/* ------------------------------------------------------------ the child */

static int child(void)
{
    cuabi_device *dev;
    cuabi_memory_resource *pool;
    cuabi_buffer *buf;
    if (cuabi_device_get(&dev, cuabi_test_device_ordinal()) != CUABI_SUCCESS ||
        cuabi_memory_resource_device_default(&pool, dev) != CUABI_SUCCESS ||
        cuabi_buffer_allocate(&buf, pool, CHILD_BYTES, 0, NULL) != CUABI_SUCCESS) {
        printf("E %s\n", cuabi_last_error()->message);
        return 1;
    }
    size_t chunk = (size_t)64 << 20;
    uint32_t *h = malloc(chunk);
    for (size_t off = 0; off < CHILD_BYTES; off += chunk) {
        for (size_t i = 0; i < chunk / 4; i++)
            h[i] = (uint32_t)((off / 4 + i) * 2654435761u) ^ PATTERN;
        if (cuabi_buffer_copy_from_host(buf, off, h, chunk, NULL) != CUABI_SUCCESS) {
            printf("E %s\n", cuabi_last_error()->message);
            return 1;
        }
    }
    printf("R\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    /* after the restore: every word as written */
    size_t bad = 0;
    for (size_t off = 0; off < CHILD_BYTES; off += chunk) {
        if (cuabi_buffer_copy_to_host(h, buf, off, chunk, NULL) != CUABI_SUCCESS) {
            printf("E %s\n", cuabi_last_error()->message);
            return 1;
        }
        for (size_t i = 0; i < chunk / 4; i++)
            bad += h[i] != ((uint32_t)((off / 4 + i) * 2654435761u) ^ PATTERN);
    }
    printf(bad ? "B %zu\n" : "K %zu\n", bad);
    fflush(stdout);
    free(h);
    cuabi_buffer_destroy(buf);
    cuabi_memory_resource_release(pool);
    cuabi_device_release(dev);
    return 0;
}

/* ------------------------------------------------------------ the parent */

typedef struct kid {
    pid_t pid;
    FILE *from;   /* its stdout */
    FILE *to;     /* its stdin */
} kid;

static kid spawn(void)
{
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    kid k;
    k.pid = fork();
    ck_assert_int_ge(k.pid, 0);
    if (k.pid == 0) {
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(up[0]);
        close(down[1]);
        execl("/proc/self/exe", self_path, "--child", (char *)NULL);
        _exit(127);
    }
    close(up[1]);
    close(down[0]);
    k.from = fdopen(up[0], "r");
    k.to = fdopen(down[1], "w");
    return k;
}

/* The child's next line, waiting at most `seconds`. */
static void line_from(kid *k, char *line, size_t len, int seconds)
{
    struct pollfd p = { fileno(k->from), POLLIN, 0 };
    int r = poll(&p, 1, seconds * 1000);
    if (r <= 0 || !fgets(line, (int)len, k->from)) {
        kill(k->pid, SIGKILL);
        ck_abort_msg("the child said nothing in %d s", seconds);
    }
}

static void finish(kid *k)
{
    fclose(k->to);
    fclose(k->from);
    int status = 0;
    waitpid(k->pid, &status, 0);
}

/* Skip (the child killed) when the driver refuses checkpointing here. */
static void skip_unless_supported(kid *k, cuabi_status st)
{
    if (st == CUABI_ERROR_NOT_SUPPORTED || st == CUABI_ERROR_ENTRY_POINT_NOT_FOUND ||
        st == CUABI_ERROR_NOT_FOUND) {
        printf("SKIP: checkpointing refused here: %s\n", cuabi_last_error()->message);
        kill(k->pid, SIGKILL);
        finish(k);
        exit(77);
    }
}

static cuabi_process_state state_of(pid_t pid)
{
    cuabi_process_state s = (cuabi_process_state)-1;
    ck_assert_ok(cuabi_checkpoint_process_state(&s, pid));
    return s;
}

static uint64_t free_bytes(cuabi_device *dev)
{
    uint64_t f, t;
    ck_assert_ok(cuabi_device_memory_info(&f, &t, dev));
    return f;
}

/* A process's device memory as NVML lists it: 0 when it is not listed (a
 * checkpointed process holds none), UINT64_MAX when NVML cannot tell (no
 * NVML, no permission, more than 64 processes). The device's free memory is
 * every process's: the GPU suites side by side moved it by hundreds of MiB
 * (two H200s), so the child's release is judged by its own use when NVML
 * sees it. */
static uint64_t nvml_used_by(int pid, cuabi_device *dev)
{
    int ord, idx;
    cuabi_nvml_process p[64];
    size_t n = 0;
    if (cuabi_device_ordinal(&ord, dev) != CUABI_SUCCESS ||
        cuabi_nvml_device_from_cuda_ordinal(&idx, ord) != CUABI_SUCCESS) {
        cuabi_error_clear();
        return UINT64_MAX;
    }
    for (int k = 0; k < 64; k++)
        cuabi_nvml_process_init(&p[k], CUABI_NVML_PROCESS_VERSION);
    if (cuabi_nvml_device_processes(p, 64, &n, idx) != CUABI_SUCCESS || n > 64) {
        cuabi_error_clear();
        return UINT64_MAX;
    }
    for (size_t k = 0; k < n; k++)
        if (p[k].pid == (unsigned)pid)
            return p[k].used_memory;
    return 0;
}

START_TEST(checkpoint_restore_keeps_the_data)
{
    cuabi_device *dev;
    ck_assert_ok(cuabi_device_get(&dev, cuabi_test_device_ordinal()));
    kid k = spawn();
    char line[256];
    line_from(&k, line, sizeof line, 120);
    ck_assert_msg(line[0] == 'R', "the child failed: %s", line);
    cuabi_process_state st0;
    skip_unless_supported(&k, cuabi_checkpoint_process_state(&st0, k.pid));
    ck_assert_int_eq(st0, CUABI_PROCESS_STATE_RUNNING);
    int tid = 0;
    ck_assert_ok(cuabi_checkpoint_process_restore_thread_id(&tid, k.pid));
    ck_assert_int_gt(tid, 0);
    /* this process itself (it has a context on the device): its state is
     * fine to ask; a lock, checkpoint, restore or unlock of it returns
     * at once refused -- before the fix the lock never returned (H100,
     * 2026-11-27), so a hang here is Check's timeout */
    cuabi_process_state mine;
    ck_assert_ok(cuabi_checkpoint_process_state(&mine, (int)getpid()));
    ck_assert_int_eq(mine, CUABI_PROCESS_STATE_RUNNING);
    ck_assert_status(cuabi_checkpoint_process_lock((int)getpid(), 1000),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("a process cannot checkpoint itself");
    ck_assert_status(cuabi_checkpoint_process_checkpoint((int)getpid()),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_restore((int)getpid(), NULL, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_unlock((int)getpid()),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_checkpoint_process_state(&mine, (int)getpid()));
    ck_assert_int_eq(mine, CUABI_PROCESS_STATE_RUNNING);
    /* refusals in the running state */
    ck_assert_status(cuabi_checkpoint_process_unlock(k.pid), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("is running");
    ck_assert_status(cuabi_checkpoint_process_checkpoint(k.pid), CUABI_ERROR_CUDA);

    for (int cycle = 0; cycle < 2; cycle++) {
        uint64_t f0 = free_bytes(dev), u0 = nvml_used_by(k.pid, dev);
        bool by_nvml = u0 != UINT64_MAX && u0 >= CHILD_BYTES;   /* NVML sees the child */
        cuabi_status lst = cuabi_checkpoint_process_lock(k.pid, 30000);
        skip_unless_supported(&k, lst);
        ck_assert_ok(lst);
        ck_assert_int_eq(state_of(k.pid), CUABI_PROCESS_STATE_LOCKED);
        ck_assert_status(cuabi_checkpoint_process_lock(k.pid, 1000), CUABI_ERROR_CUDA);
        ck_assert_error_mentions("is locked");
        ck_assert_ok(cuabi_checkpoint_process_checkpoint(k.pid));
        ck_assert_int_eq(state_of(k.pid), CUABI_PROCESS_STATE_CHECKPOINTED);
        uint64_t f1 = free_bytes(dev), u1 = nvml_used_by(k.pid, dev);
        printf("cycle %d: free %llu MiB before, %llu MiB checkpointed (+%lld MiB); the child "
               "uses %lld MiB, then %lld (NVML; -1: cannot tell)\n", cycle,
               (unsigned long long)(f0 >> 20), (unsigned long long)(f1 >> 20),
               (long long)((int64_t)(f1 - f0) >> 20),
               u0 == UINT64_MAX ? -1LL : (long long)(u0 >> 20),
               u1 == UINT64_MAX ? -1LL : (long long)(u1 >> 20));
        if (by_nvml)
            ck_assert_msg(u1 != UINT64_MAX && u1 < ((uint64_t)64 << 20),
                          "the child's 1 GiB was not released (NVML: %llu bytes -> %llu)",
                          (unsigned long long)u0, (unsigned long long)u1);
        else
            ck_assert_msg(f1 >= f0 + CHILD_BYTES - ((uint64_t)64 << 20),
                          "the child's 1 GiB was not released (free %llu -> %llu)",
                          (unsigned long long)f0, (unsigned long long)f1);
        if (cycle == 0) {
            ck_assert_ok(cuabi_checkpoint_process_restore(k.pid, NULL, 0));
        } else {   /* onto the same GPU, named by UUID */
            cuabi_device_properties p = CUABI_DEVICE_PROPERTIES_INIT;
            ck_assert_ok(cuabi_device_get_properties(&p, dev));
            cuabi_checkpoint_gpu_pair pair;
            memcpy(pair.old_uuid, p.uuid, 16);
            memcpy(pair.new_uuid, p.uuid, 16);
            cuabi_status rst = cuabi_checkpoint_process_restore(k.pid, &pair, 1);
            if (rst != CUABI_SUCCESS) {   /* a host with other GPUs visible must name all */
                printf("restore by UUID refused (%s); restoring plainly\n",
                       cuabi_last_error()->message);
                ck_assert_ok(cuabi_checkpoint_process_restore(k.pid, NULL, 0));
            }
        }
        ck_assert_int_eq(state_of(k.pid), CUABI_PROCESS_STATE_LOCKED);
        ck_assert_ok(cuabi_checkpoint_process_unlock(k.pid));
        ck_assert_int_eq(state_of(k.pid), CUABI_PROCESS_STATE_RUNNING);
        uint64_t f2 = free_bytes(dev), u2 = nvml_used_by(k.pid, dev);
        printf("cycle %d: free %llu MiB after the restore; the child uses %lld MiB (NVML)\n",
               cycle, (unsigned long long)(f2 >> 20),
               u2 == UINT64_MAX ? -1LL : (long long)(u2 >> 20));
        if (by_nvml)
            ck_assert_msg(u2 != UINT64_MAX && u2 >= CHILD_BYTES,
                          "the restore gave the child no memory back (NVML: %llu bytes)",
                          (unsigned long long)u2);
        else
            ck_assert_msg(f2 + CHILD_BYTES / 2 < f1, "the restore gave the child no memory back");
    }
    fprintf(k.to, "go\n");
    fflush(k.to);
    line_from(&k, line, sizeof line, 120);
    printf("child: %s", line);
    ck_assert_msg(line[0] == 'K', "the child's data changed: %s", line);
    finish(&k);
    /* the child is gone: no such process */
    cuabi_process_state s;
    ck_assert_status(cuabi_checkpoint_process_state(&s, k.pid), CUABI_ERROR_NOT_FOUND);
    cuabi_device_release(dev);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child();
    self_path = argv[0];
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, checkpoint_restore_keeps_the_data);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
