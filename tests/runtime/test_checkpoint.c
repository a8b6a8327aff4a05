/* Checkpoint and restore against the fake driver
 * (tests/fixtures/fake_checkpoint.h): the whole cycle, what reaches the
 * driver (timeouts, GPU pairs, zeroed reserved fields), each refusal in
 * cuabi's words (no such process, the wrong state named, a lock that timed
 * out, no support, no entry point), every bad argument, and one's own pid
 * refused where the driver would wait for this process forever. */
#include "testutil.h"
#include "fake_checkpoint.h"

#include <unistd.h>

enum { PID = 4242, OTHER = 4343 };

static void setup(void)
{
    fake_driver_install();
    fake_checkpoint_install();
    fake_checkpoint_add(PID);
    fake_checkpoint_add(OTHER);
}

static void teardown(void)
{
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver_install_fake(NULL);
    fake_current = NULL;
}

static cuabi_process_state state_of(int pid)
{
    cuabi_process_state s = (cuabi_process_state)-1;
    ck_assert_ok(cuabi_checkpoint_process_state(&s, pid));
    return s;
}

START_TEST(the_whole_cycle)
{
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_RUNNING);
    int tid = 0;
    ck_assert_ok(cuabi_checkpoint_process_restore_thread_id(&tid, PID));
    ck_assert_int_eq(tid, PID + 1000);
    ck_assert_ok(cuabi_checkpoint_process_lock(PID, 5000));
    ck_assert_uint_eq(fake_checkpoint_last_timeout, 5000);
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_LOCKED);
    ck_assert_ok(cuabi_checkpoint_process_checkpoint(PID));
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_CHECKPOINTED);
    ck_assert_int_eq(fake_checkpoint_released, 1LL << 30);
    ck_assert_int_eq(state_of(OTHER), CUABI_PROCESS_STATE_RUNNING);   /* only that one */
    ck_assert_ok(cuabi_checkpoint_process_restore(PID, NULL, 0));
    ck_assert_uint_eq(fake_checkpoint_last_pairs, 0);
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_LOCKED);   /* restored: locked */
    ck_assert_ok(cuabi_checkpoint_process_unlock(PID));
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_RUNNING);
    ck_assert_int_eq(fake_checkpoint_released, 0);
    /* no timeout */
    ck_assert_ok(cuabi_checkpoint_process_lock(PID, 0));
    ck_assert_uint_eq(fake_checkpoint_last_timeout, 0);
    ck_assert_ok(cuabi_checkpoint_process_unlock(PID));
}
END_TEST

START_TEST(restore_onto_other_gpus)
{
    cuabi_checkpoint_gpu_pair pairs[2];
    for (int b = 0; b < 16; b++) {   /* the fake's UUIDs: byte b of device d is b + d */
        pairs[0].old_uuid[b] = (uint8_t)b;
        pairs[0].new_uuid[b] = (uint8_t)(b + 1);
        pairs[1].old_uuid[b] = (uint8_t)(b + 1);
        pairs[1].new_uuid[b] = (uint8_t)b;
    }
    ck_assert_ok(cuabi_checkpoint_process_lock(PID, 100));
    ck_assert_ok(cuabi_checkpoint_process_checkpoint(PID));
    ck_assert_ok(cuabi_checkpoint_process_restore(PID, pairs, 2));
    ck_assert_uint_eq(fake_checkpoint_last_pairs, 2);
    ck_assert_int_eq(memcmp(fake_checkpoint_pairs[0].oldUuid.bytes, pairs[0].old_uuid, 16), 0);
    ck_assert_int_eq(memcmp(fake_checkpoint_pairs[0].newUuid.bytes, pairs[0].new_uuid, 16), 0);
    ck_assert_int_eq(memcmp(fake_checkpoint_pairs[1].newUuid.bytes, pairs[1].new_uuid, 16), 0);
    ck_assert_ok(cuabi_checkpoint_process_unlock(PID));
    /* a GPU the driver does not know: refused, still checkpointed */
    ck_assert_ok(cuabi_checkpoint_process_lock(PID, 100));
    ck_assert_ok(cuabi_checkpoint_process_checkpoint(PID));
    pairs[0].new_uuid[3] = 0xee;
    ck_assert_status(cuabi_checkpoint_process_restore(PID, pairs, 1), CUABI_ERROR_CUDA);
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_CHECKPOINTED);
    /* the same old GPU twice, too many pairs, pairs NULL with a count */
    pairs[0].new_uuid[3] = 4;
    memcpy(pairs[1].old_uuid, pairs[0].old_uuid, 16);
    ck_assert_status(cuabi_checkpoint_process_restore(PID, pairs, 2), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("same checkpointed GPU");
    ck_assert_status(cuabi_checkpoint_process_restore(PID, pairs, 65), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_restore(PID, NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_ok(cuabi_checkpoint_process_restore(PID, NULL, 0));
    ck_assert_ok(cuabi_checkpoint_process_unlock(PID));
}
END_TEST

START_TEST(refusals_in_cuabis_words)
{
    /* the wrong state, named */
    ck_assert_status(cuabi_checkpoint_process_unlock(PID), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("process 4242 is running; this call needs it locked");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_status(cuabi_checkpoint_process_checkpoint(PID), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("needs it locked");
    ck_assert_status(cuabi_checkpoint_process_restore(PID, NULL, 0), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("needs it checkpointed");
    ck_assert_ok(cuabi_checkpoint_process_lock(PID, 10));
    ck_assert_status(cuabi_checkpoint_process_lock(PID, 10), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("is locked; this call needs it running");
    ck_assert_ok(cuabi_checkpoint_process_unlock(PID));
    /* no such process (or not ours) */
    cuabi_process_state s;
    ck_assert_status(cuabi_checkpoint_process_state(&s, 999999), CUABI_ERROR_NOT_FOUND);
    ck_assert_error_mentions("no CUDA process 999999");
    ck_assert_int_eq(cuabi_last_error()->cu_result, CUDA_ERROR_OPERATING_SYSTEM);
    ck_assert_status(cuabi_checkpoint_process_lock(999999, 0), CUABI_ERROR_NOT_FOUND);
    int tid;
    ck_assert_status(cuabi_checkpoint_process_restore_thread_id(&tid, 999999), CUABI_ERROR_NOT_FOUND);
    /* a lock that times out leaves it running */
    fake_checkpoint_lock_busy = 1;
    ck_assert_status(cuabi_checkpoint_process_lock(PID, 10), CUABI_ERROR_NOT_READY);
    ck_assert_error_mentions("still running");
    fake_checkpoint_lock_busy = 0;
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_RUNNING);
    /* no support here; no entry point in this driver; another failure */
    cuabi__fault_arm("cuCheckpointProcessLock", 1, false, CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_status(cuabi_checkpoint_process_lock(PID, 10), CUABI_ERROR_NOT_SUPPORTED);
    ck_assert_error_mentions("does not support checkpoint");
    cuabi__fault_arm("cuCheckpointProcessGetState", 1, false, CUDA_ERROR_UNKNOWN);
    ck_assert_status(cuabi_checkpoint_process_state(&s, PID), CUABI_ERROR_CUDA);
    ck_assert_error_mentions("cuCheckpointProcessGetState");
    cuabi__fault_arm(NULL, 0, false, CUDA_SUCCESS);
    cuabi__driver_for_test()->cuCheckpointProcessRestore = NULL;
    ck_assert_status(cuabi_checkpoint_process_restore(PID, NULL, 0),
                     CUABI_ERROR_ENTRY_POINT_NOT_FOUND);
    ck_assert_error_mentions("cuCheckpointProcessRestore");
    /* a state this library has no name for passes through */
    ck_assert_str_eq(cuabi_process_state_name((cuabi_process_state)77), "unknown");
    ck_assert_str_eq(cuabi_process_state_name(CUABI_PROCESS_STATE_CHECKPOINTED), "checkpointed");
    ck_assert_str_eq(cuabi_process_state_name(CUABI_PROCESS_STATE_RESTORING), "restoring");
}
END_TEST

START_TEST(bad_arguments)
{
    cuabi_process_state s;
    int tid;
    ck_assert_status(cuabi_checkpoint_process_state(NULL, PID), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_state(&s, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_state(&s, -1), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_error_mentions("not a process id");
    ck_assert_status(cuabi_checkpoint_process_restore_thread_id(NULL, PID),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_restore_thread_id(&tid, 0),
                     CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_lock(-5, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_checkpoint(0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_restore(0, NULL, 0), CUABI_ERROR_INVALID_ARGUMENT);
    ck_assert_status(cuabi_checkpoint_process_unlock(-1), CUABI_ERROR_INVALID_ARGUMENT);
    /* nothing reached the driver: every process still runs */
    ck_assert_int_eq(state_of(PID), CUABI_PROCESS_STATE_RUNNING);
}
END_TEST

/* A process cannot lock, checkpoint, restore or unlock itself: the driver
 * waits for the process's own calls and the call never returns (an H100
 * hung in a lock of getpid()). Refused before the driver; asking one's own
 * state and restore thread is fine. */
START_TEST(own_process_is_refused)
{
    int me = (int)getpid();
    fake_checkpoint_add(me);
    ck_assert_int_eq(state_of(me), CUABI_PROCESS_STATE_RUNNING);
    int tid = 0;
    ck_assert_ok(cuabi_checkpoint_process_restore_thread_id(&tid, me));
    ck_assert_int_eq(tid, me + 1000);
    const char *names[4] = { "cuabi_checkpoint_process_lock",
                             "cuabi_checkpoint_process_checkpoint",
                             "cuabi_checkpoint_process_restore",
                             "cuabi_checkpoint_process_unlock" };
    for (int i = 0; i < 4; i++) {
        cuabi_status st = i == 0   ? cuabi_checkpoint_process_lock(me, 1000)
                          : i == 1 ? cuabi_checkpoint_process_checkpoint(me)
                          : i == 2 ? cuabi_checkpoint_process_restore(me, NULL, 0)
                                   : cuabi_checkpoint_process_unlock(me);
        ck_assert_msg(st == CUABI_ERROR_INVALID_ARGUMENT, "%s: %s (%s)", names[i],
                      cuabi_status_name(st), cuabi_last_error()->message);
        ck_assert_error_mentions(names[i]);
        ck_assert_error_mentions("a process cannot checkpoint itself");
        ck_assert_error_mentions("another process");
        ck_assert_error_mentions("cuda-checkpoint --toggle --pid");
        ck_assert_int_eq(cuabi_last_error()->cu_result, 0);
    }
    /* nothing reached the driver: no call the H100 would hang in */
    ck_assert_int_eq(fake_checkpoint_self_calls, 0);
    ck_assert_int_eq(state_of(me), CUABI_PROCESS_STATE_RUNNING);
    /* another process is still fine */
    ck_assert_ok(cuabi_checkpoint_process_lock(PID, 0));
    ck_assert_ok(cuabi_checkpoint_process_unlock(PID));
}
END_TEST

START_TEST(no_driver)
{
    cuabi__driver_install_fake(NULL);
    cuabi_process_state s;
    ck_assert_status(cuabi_checkpoint_process_state(&s, PID), CUABI_ERROR_DRIVER_NOT_FOUND);
    ck_assert_status(cuabi_checkpoint_process_lock(PID, 0), CUABI_ERROR_DRIVER_NOT_FOUND);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_whole_cycle);
    tcase_add_test(tc, restore_onto_other_gpus);
    tcase_add_test(tc, refusals_in_cuabis_words);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, own_process_is_refused);
    tcase_add_test(tc, no_driver);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
