/* The thread-local last-error record and the status tables.
 *
 * Each thread has one record (cuabi_last_error() never returns NULL). The
 * message lives in a fixed thread-local buffer; the optional compiler/linker
 * log is heap-allocated and freed by a pthread key destructor at thread exit,
 * so threads that hit compile errors do not leak. */
#include "util/error.h"
#include "util/tables.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGE_CAP 4096

typedef struct error_record {
    cuabi_error_info pub;
    char message[MESSAGE_CAP];
    char *log;          /* owned; NULL when there is no log */
    bool key_set;
} error_record;

static _Thread_local error_record tls_error = {
    .pub = { .version = CUABI_ERROR_INFO_VERSION, .status = CUABI_SUCCESS,
             .message = "no error", .log = "" },
};

static pthread_key_t log_key;
static pthread_once_t log_key_once = PTHREAD_ONCE_INIT;

static void free_thread_log(void *p)
{
    error_record *rec = p;
    free(rec->log);
    rec->log = NULL;
}

static bool log_key_ok;
static void make_log_key(void)
{
    /* If key creation fails we only lose the exit-time free of the log. */
    log_key_ok = pthread_key_create(&log_key, free_thread_log) == 0;
}

/* At dlclose(): no thread may run free_thread_log once it is unmapped. */
__attribute__((destructor)) static void error_unload(void)
{
    if (log_key_ok)
        pthread_key_delete(log_key);
}

static void drop_log(error_record *rec)
{
    free(rec->log);
    rec->log = NULL;
    rec->pub.log = "";
    rec->pub.log_size = 0;
}

cuabi_status cuabi__error(cuabi_status status, const char *fmt, ...)
{
    error_record *rec = &tls_error;
    char buf[MESSAGE_CAP];
    va_list ap;
    va_start(ap, fmt);
    /* Format into a local buffer first: arguments may point into the
     * record's own message (re-raising a previous error). */
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(rec->message, buf, sizeof buf);
    drop_log(rec);
    rec->pub.version = CUABI_ERROR_INFO_VERSION;
    rec->pub.status = status;
    rec->pub.message = rec->message;
    rec->pub.cu_result = 0;
    rec->pub.nvrtc_result = 0;
    rec->pub.nvjitlink_result = 0;
    rec->pub.nvml_result = 0;
    return status;
}

void cuabi__error_set_cu(int cu_result) { tls_error.pub.cu_result = cu_result; }
void cuabi__error_set_nvrtc(int r) { tls_error.pub.nvrtc_result = r; }
void cuabi__error_set_nvjitlink(int r) { tls_error.pub.nvjitlink_result = r; }
void cuabi__error_set_nvml(int r) { tls_error.pub.nvml_result = r; }

int cuabi__error_set_log(const char *log, size_t len)
{
    error_record *rec = &tls_error;
    drop_log(rec);
    if (!log)
        return 0;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, log, len);
    copy[len] = '\0';
    if (!rec->key_set) {
        pthread_once(&log_key_once, make_log_key);
        rec->key_set = pthread_setspecific(log_key, rec) == 0;
    }
    rec->log = copy;
    rec->pub.log = copy;
    rec->pub.log_size = len;
    return 0;
}

CUABI_EXTERN(const cuabi_error_info *) cuabi_last_error(void)
{
    return &tls_error.pub;
}

CUABI_EXTERN(void) cuabi_error_clear(void)
{
    error_record *rec = &tls_error;
    drop_log(rec);
    rec->pub.status = CUABI_SUCCESS;
    rec->pub.message = "no error";
    rec->pub.cu_result = rec->pub.nvrtc_result = rec->pub.nvjitlink_result = 0;
    rec->pub.nvml_result = 0;
}

static const cuabi__status_info *status_info(cuabi_status status)
{
    for (const cuabi__status_info *s = cuabi__status_table; s->name; s++)
        if (s->status == status)
            return s;
    return NULL;
}

CUABI_EXTERN(const char *) cuabi_status_name(cuabi_status status)
{
    const cuabi__status_info *s = status_info(status);
    return s ? s->name : "CUABI_ERROR_UNKNOWN_STATUS";
}

CUABI_EXTERN(const char *) cuabi_status_message(cuabi_status status)
{
    const cuabi__status_info *s = status_info(status);
    return s ? s->message : "unknown status code";
}
