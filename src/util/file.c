/* Opening and reading files without blocking or unbounded reads, and
 * whose files and directories are whose: see file.h. */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cuabi__file_kind(mode_t mode)
{
    return S_ISREG(mode)    ? "a regular file"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISLNK(mode)  ? "a symbolic link"
                            : "not a file";
}

int cuabi__file_open(const char *path, unsigned flags, uint64_t max, struct stat *st, char *why,
                     size_t why_cap)
{
    int oflags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    if (flags & CUABI__FILE_NOFOLLOW)
        oflags |= O_NOFOLLOW;
    int fd = open(path, oflags);
    if (fd < 0) {
        /* What is there, when it is not a regular file, says more than the
         * open's errno: O_NOFOLLOW's ELOOP for a link, ENXIO for a socket,
         * EACCES for someone else's FIFO. */
        int err = errno;
        struct stat lst;
        bool there = err != ENOENT && lstat(path, &lst) == 0 && !S_ISREG(lst.st_mode);
        if (there && S_ISLNK(lst.st_mode) && (flags & CUABI__FILE_NOFOLLOW)) {
            snprintf(why, why_cap, "a symbolic link, which is not followed here");
            errno = err;
            return CUABI__FILE_ERR_TYPE;
        }
        if (there && !S_ISLNK(lst.st_mode)) {
            snprintf(why, why_cap, "%s, not a regular file", cuabi__file_kind(lst.st_mode));
            errno = err;
            return CUABI__FILE_ERR_TYPE;
        }
        snprintf(why, why_cap, "%s", strerror(err));
        errno = err;
        return CUABI__FILE_ERR_OPEN;
    }
    if (fstat(fd, st) != 0) {
        int err = errno;
        close(fd);
        snprintf(why, why_cap, "%s", strerror(err));
        errno = err;
        return CUABI__FILE_ERR_OPEN;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        snprintf(why, why_cap, "%s, not a regular file", cuabi__file_kind(st->st_mode));
        errno = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
        return CUABI__FILE_ERR_TYPE;
    }
    if (st->st_size < 0 || (uint64_t)st->st_size > max) {
        close(fd);
        snprintf(why, why_cap, "%" PRIu64 " bytes, more than the %" PRIu64 " allowed",
                 (uint64_t)st->st_size, max);
        errno = EFBIG;
        return CUABI__FILE_ERR_SIZE;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        snprintf(why, why_cap, "%s", strerror(err));
        errno = err;
        return CUABI__FILE_ERR_OPEN;
    }
    return fd;
}

static void *grow(void *p, size_t n, bool counted)
{
    return counted ? cuabi__realloc(p, n) : realloc(p, n);
}

int cuabi__file_read_fd(int fd, uint64_t hint, uint64_t max, bool counted, char **data,
                        size_t *size)
{
    *data = NULL;
    *size = 0;
    if (max > SIZE_MAX - 2)
        max = SIZE_MAX - 2;
    /* Room for the expected bytes, one more (to see the end of file without
     * a second buffer), and the NUL. */
    size_t cap = (size_t)(hint < max ? hint : max) + 2, got = 0;
    char *buf = grow(NULL, cap, counted);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        if (got + 1 == cap) { /* full (but for the NUL): the file grew */
            if (got > max)
                break;
            size_t more = cap - 1 <= max / 2 ? 2 * (cap - 1) : (size_t)max + 1;
            char *b = grow(buf, more + 1, counted);
            if (!b) {
                counted ? cuabi__free(buf) : free(buf);
                errno = ENOMEM;
                return -1;
            }
            buf = b;
            cap = more + 1;
        }
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            counted ? cuabi__free(buf) : free(buf);
            errno = err;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (got > max) {
        counted ? cuabi__free(buf) : free(buf);
        errno = EFBIG;
        return -1;
    }
    buf[got] = '\0';
    *data = buf;
    *size = got;
    return 0;
}

cuabi_status cuabi__read_file_max(const char *path, unsigned flags, uint64_t max, void **data,
                                  size_t *size, const char *caller)
{
    *data = NULL;
    *size = 0;
    struct stat st;
    char why[256];
    int fd = cuabi__file_open(path, flags, max, &st, why, sizeof why);
    if (fd == CUABI__FILE_ERR_OPEN)
        return cuabi__error(CUABI_ERROR_IO, "%s: cannot open '%s': %s", caller, path, why);
    if (fd < 0)
        return cuabi__error(CUABI_ERROR_IO, "%s: '%s' is %s", caller, path, why);
    char *buf;
    size_t n;
    int r = cuabi__file_read_fd(fd, (uint64_t)st.st_size, max, true, &buf, &n);
    int err = errno;
    close(fd);
    if (r != 0) {
        if (err == ENOMEM)
            return CUABI_ERROR_OUT_OF_MEMORY; /* recorded by cuabi__realloc */
        if (err == EFBIG)
            return cuabi__error(CUABI_ERROR_IO, "%s: '%s' grew past %" PRIu64 " bytes while "
                                "read", caller, path, max);
        return cuabi__error(CUABI_ERROR_IO, "%s: reading '%s' failed: %s", caller, path,
                            strerror(err));
    }
    *data = buf;
    *size = n;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__read_file(const char *path, void **data, size_t *size, const char *caller)
{
    return cuabi__read_file_max(path, 0, CUABI__FILE_MAX, data, size, caller);
}

int cuabi__file_owned(const struct stat *st, uid_t uid, char *why, size_t why_cap)
{
    if (st->st_uid != uid && st->st_uid != 0) {
        snprintf(why, why_cap, "owned by uid %u, not by this user (uid %u)",
                 (unsigned)st->st_uid, (unsigned)uid);
        return -1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, why_cap, "writable by %s (mode %04o)",
                 (st->st_mode & S_IWOTH) ? "others" : "its group",
                 (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

int cuabi__dir_owned(const struct stat *st, uid_t uid, const char *path, char *why,
                     size_t why_cap)
{
    if (st->st_uid != uid) {
        snprintf(why, why_cap, "%s belongs to uid %u, not to this user (uid %u)", path,
                 (unsigned)st->st_uid, (unsigned)uid);
        return -1;
    }
    if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
        return 0;
    if (st->st_mode & S_ISVTX)
        return 1;
    snprintf(why, why_cap, "%s is writable by %s (mode %04o) and not sticky: another user "
             "could put files in it", path, (st->st_mode & S_IWOTH) ? "others" : "its group",
             (unsigned)(st->st_mode & 07777));
    return -1;
}
