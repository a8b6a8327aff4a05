/* The error record every module reports through (error.c), the checks at
 * the top of public functions, and the compiler hints they use. */
#ifndef CUABI_UTIL_ERROR_H
#define CUABI_UTIL_ERROR_H

#include "cuabi.h"

#if defined(__GNUC__)
#  define CUABI__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#  define CUABI__UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define CUABI__LIKELY(x) __builtin_expect(!!(x), 1)
/* The code of a process's first launch, capture and instantiate: grouped in
 * .text.hot, so that a first capture finds its code already mapped by the
 * launches before it. Spread over the library, the first capture faulted in
 * two fresh 64 KiB windows of code (2-7 us a page fault; issue 24: a first
 * capture as fast as cuda.core's). */
#  define CUABI__HOT __attribute__((hot))
#else
#  define CUABI__PRINTF(fmt, args)
#  define CUABI__UNLIKELY(x) (x)
#  define CUABI__LIKELY(x) (x)
#  define CUABI__HOT
#endif


/* Record an error in the calling thread's last-error record and return
 * `status`. The message is prefixed by nothing: callers name themselves
 * (usually with __func__). Clears the CUDA/NVRTC/nvJitLink/NVML codes and log. */
cuabi_status cuabi__error(cuabi_status status, const char *fmt, ...)
    CUABI__PRINTF(2, 3);
/* Attach the underlying library codes to the current record. */
void cuabi__error_set_cu(int cu_result);
void cuabi__error_set_nvrtc(int nvrtc_result);
void cuabi__error_set_nvjitlink(int nvjitlink_result);
void cuabi__error_set_nvml(int nvml_result);
/* Attach a compiler/linker log (copied) to the current record. Returns 0,
 * or -1 if the copy could not be allocated (the log is then dropped). */
int cuabi__error_set_log(const char *log, size_t len);

#define CUABI__CHECK_VERSION(what, version, max)                              \
    do {                                                                       \
        if ((version) == 0 || (version) > (unsigned)(max))                     \
            return cuabi__error(CUABI_ERROR_INVALID_VERSION,                   \
                                "%s: %s version %u is not supported "         \
                                "(this library knows 1..%u; use the "         \
                                "*_INIT macro or *_init())",                  \
                                __func__, what, (unsigned)(version),           \
                                (unsigned)(max));                              \
    } while (0)

/* Check a versioned struct pointer given to a function; NULL allowed when
 * `optional`. */
#define CUABI__CHECK_OPTS(opts, what, max, optional)                          \
    do {                                                                       \
        if (!(opts)) {                                                         \
            if (optional) break;                                               \
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,                  \
                                "%s: %s is NULL", __func__, what);             \
        }                                                                      \
        CUABI__CHECK_VERSION(what, (opts)->version, max);                      \
    } while (0)

#define CUABI__CHECK_ARG(cond, ...)                                           \
    do {                                                                       \
        if (CUABI__UNLIKELY(!(cond)))                                          \
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, __VA_ARGS__);    \
    } while (0)

#define CUABI__TRY(expr)                                                      \
    do {                                                                       \
        cuabi_status st__ = (expr);                                            \
        if (st__ != CUABI_SUCCESS) return st__;                                \
    } while (0)

#endif
