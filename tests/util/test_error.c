/* The last-error record, status names and messages, option versions. */
#include "testutil.h"
#include "runtime/stream.h"
#include "runtime/event.h"

#include <pthread.h>

START_TEST(last_error_never_null)
{
    const cuabi_error_info *e = cuabi_last_error();
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->message);
    ck_assert_ptr_nonnull(e->log);
    ck_assert_uint_eq(e->version, CUABI_ERROR_INFO_VERSION);
}
END_TEST

START_TEST(error_records_status_and_message)
{
    ck_assert_int_eq(cuabi__error(CUABI_ERROR_NOT_FOUND, "thing %d missing", 7),
                     CUABI_ERROR_NOT_FOUND);
    ck_assert_int_eq(cuabi_last_error()->status, CUABI_ERROR_NOT_FOUND);
    ck_assert_str_eq(cuabi_last_error()->message, "thing 7 missing");
    cuabi__error_set_cu(2);
    ck_assert_int_eq(cuabi_last_error()->cu_result, 2);
    cuabi_error_clear();
    ck_assert_int_eq(cuabi_last_error()->status, CUABI_SUCCESS);
    ck_assert_int_eq(cuabi_last_error()->cu_result, 0);
}
END_TEST

START_TEST(error_message_may_quote_previous_message)
{
    cuabi__error(CUABI_ERROR_IO, "first");
    cuabi__error(CUABI_ERROR_IO, "second (after %s)", cuabi_last_error()->message);
    ck_assert_str_eq(cuabi_last_error()->message, "second (after first)");
}
END_TEST

START_TEST(long_messages_are_truncated_not_overflowed)
{
    char big[10000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cuabi__error(CUABI_ERROR_COMPILE, "%s", big);
    ck_assert_uint_lt(strlen(cuabi_last_error()->message), 4096);
}
END_TEST

START_TEST(log_is_attached_and_cleared)
{
    cuabi__error(CUABI_ERROR_COMPILE, "compile failed");
    ck_assert_int_eq(cuabi__error_set_log("a.cu(1): error", 14), 0);
    ck_assert_str_eq(cuabi_last_error()->log, "a.cu(1): error");
    ck_assert_uint_eq(cuabi_last_error()->log_size, 14);
    cuabi__error(CUABI_ERROR_IO, "another");
    ck_assert_str_eq(cuabi_last_error()->log, "");
    ck_assert_uint_eq(cuabi_last_error()->log_size, 0);
}
END_TEST

static void *thread_error(void *arg)
{
    (void)arg;
    cuabi__error(CUABI_ERROR_LINK, "thread-local");
    cuabi__error_set_log("log from thread", 15);
    return (void *)(intptr_t)(cuabi_last_error()->status == CUABI_ERROR_LINK);
}

START_TEST(errors_are_thread_local)
{
    cuabi__error(CUABI_ERROR_IO, "main thread");
    pthread_t t;
    void *ok;
    ck_assert_int_eq(pthread_create(&t, NULL, thread_error, NULL), 0);
    pthread_join(t, &ok);
    ck_assert(ok);
    ck_assert_int_eq(cuabi_last_error()->status, CUABI_ERROR_IO);
    ck_assert_str_eq(cuabi_last_error()->message, "main thread");
}
END_TEST

START_TEST(every_status_has_name_and_message)
{
    for (int s = CUABI_SUCCESS; s <= CUABI_ERROR_INTERNAL; s++) {
        ck_assert_str_ne(cuabi_status_name((cuabi_status)s), "CUABI_ERROR_UNKNOWN_STATUS");
        ck_assert_uint_gt(strlen(cuabi_status_message((cuabi_status)s)), 0);
    }
    ck_assert_str_eq(cuabi_status_name(CUABI_ERROR_INVALID_HANDLE), "CUABI_ERROR_INVALID_HANDLE");
    ck_assert_str_eq(cuabi_status_name((cuabi_status)9999), "CUABI_ERROR_UNKNOWN_STATUS");
    ck_assert_str_eq(cuabi_status_message((cuabi_status)-1), "unknown status code");
}
END_TEST

START_TEST(option_init_checks_version)
{
    cuabi_stream_options o;
    ck_assert_ok(cuabi_stream_options_init(&o, CUABI_STREAM_OPTIONS_VERSION));
    ck_assert_uint_eq(o.version, CUABI_STREAM_OPTIONS_VERSION);
    ck_assert_int_eq(o.priority, 0);
    ck_assert_status(cuabi_stream_options_init(&o, 0), CUABI_ERROR_INVALID_VERSION);
    ck_assert_error_mentions("version 0");
    ck_assert_status(cuabi_stream_options_init(&o, 99), CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi_stream_options_init(NULL, 1), CUABI_ERROR_INVALID_ARGUMENT);
    cuabi_event_options eo = CUABI_EVENT_OPTIONS_INIT;
    ck_assert_uint_eq(eo.version, CUABI_EVENT_OPTIONS_VERSION);
    ck_assert_uint_eq(eo.flags, CUABI_EVENT_DEFAULT);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, last_error_never_null);
    tcase_add_test(tc, error_records_status_and_message);
    tcase_add_test(tc, error_message_may_quote_previous_message);
    tcase_add_test(tc, long_messages_are_truncated_not_overflowed);
    tcase_add_test(tc, log_is_attached_and_cleared);
    tcase_add_test(tc, errors_are_thread_local);
    tcase_add_test(tc, every_status_has_name_and_message);
    tcase_add_test(tc, option_init_checks_version);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    cuabi_test_no_driver();
    return cuabi_test_run(suite());
}
