/* Opening and reading the files the library is given or finds (cache
 * entries and identity records, manifests and the files they name, headers
 * the include scan reads, libdevice, objcode and linker inputs, compiler
 * libraries' ELF notes, fatbinary's output): one way in for all of them
 * (issue 29). Nothing blocks in open() — a FIFO or a device at the path is
 * refused by name, never waited on — and nothing is read before its size
 * is checked against the caller's maximum, so a 20 GB sparse file costs a
 * stat, not 20 GB. The owner/mode checks say whether a file or a
 * directory is this user's own (the compile cache runs what it reads). */
#ifndef CUABI_UTIL_FILE_H
#define CUABI_UTIL_FILE_H

#include <sys/stat.h>
#include <sys/types.h>

#include "util/common.h"

/* cuabi__file_open flags. */
#define CUABI__FILE_NOFOLLOW 1u   /* a symbolic link at the path is refused, not followed */

/* cuabi__file_open's failures (errno is set too). */
enum {
    CUABI__FILE_ERR_OPEN = -1,    /* open() or fstat() failed: errno says why */
    CUABI__FILE_ERR_TYPE = -2,    /* not a regular file (a symbolic link under NOFOLLOW too) */
    CUABI__FILE_ERR_SIZE = -3,    /* larger than the maximum: nothing was read */
};

/* Open `path` for reading: O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY
 * (+ O_NOFOLLOW), so a FIFO or a device never blocks the open; fstat the
 * descriptor; refuse anything but a regular file, and a file of more than
 * `max` bytes, before reading a byte; then clear O_NONBLOCK. Returns the
 * descriptor (*st is its fstat), or one of CUABI__FILE_ERR_* with the reason
 * in `why` (without the path: "a FIFO, not a regular file", "8589934592
 * bytes, more than the 1073741824 allowed", strerror). Records no error. */
int cuabi__file_open(const char *path, unsigned flags, uint64_t max, struct stat *st, char *why,
                     size_t why_cap);

/* Read what is left of an open file, up to `max` bytes, into a buffer with
 * a NUL past its end (*size excludes it). `hint` (the fstat size) sizes the
 * first allocation; the file may change size meanwhile: what is there at
 * end of file is returned, and a file growing past `max` fails with EFBIG —
 * never more than max + 1 bytes are read. `counted`: allocate with
 * cuabi__malloc (failure injection; an out-of-memory error recorded), else
 * malloc (free() it). 0, or -1 with errno (ENOMEM, EFBIG, EIO, ...). */
int cuabi__file_read_fd(int fd, uint64_t hint, uint64_t max, bool counted, char **data,
                        size_t *size);

/* Read a whole regular file of at most `max` bytes (cuabi__file_open, then
 * cuabi__file_read_fd) into a cuabi__malloc'ed buffer with a NUL past
 * *size. CUABI_ERROR_IO naming `caller` and the path, with what the file is
 * or the OS reason; CUABI_ERROR_OUT_OF_MEMORY. */
cuabi_status cuabi__read_file_max(const char *path, unsigned flags, uint64_t max, void **data,
                                  size_t *size, const char *caller);
/* The same with a maximum of CUABI__FILE_MAX and symbolic links followed:
 * files the caller names (objcode and linker inputs, manifests). */
#define CUABI__FILE_MAX ((uint64_t)1 << 30)
cuabi_status cuabi__read_file(const char *path, void **data, size_t *size, const char *caller);

/* What a file of mode `mode` is, for messages: "a FIFO", "a directory", ... */
const char *cuabi__file_kind(mode_t mode);

/* Whether a file (its fstat) is this user's own, as far as its owner and
 * mode say: owned by `uid` or by root, and writable by neither its group
 * nor others. 0 yes; -1 no, with why ("owned by uid 1001, not by this user
 * (uid 1000)", "writable by its group (mode 0664)"). */
int cuabi__file_owned(const struct stat *st, uid_t uid, char *why, size_t why_cap);

/* Whether a directory (its stat) may hold files this user will trust:
 * owned by `uid`, and writable by no one else unless sticky (like /tmp:
 * others may add files there but not replace or remove this user's, and
 * each file is then checked with cuabi__file_owned). 0 private, 1 shared
 * but sticky, -1 refused with why (naming `path`). */
int cuabi__dir_owned(const struct stat *st, uid_t uid, const char *path, char *why,
                     size_t why_cap);

#endif
