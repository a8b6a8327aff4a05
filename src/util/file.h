/* Reading files the library is given or finds (objcode and manifest files,
 * graph dumps read back by tests): whole regular files only, with the OS
 * reason in the error. */
#ifndef CUABI_UTIL_FILE_H
#define CUABI_UTIL_FILE_H

#include "util/common.h"

/* Read a whole file into a cuabi__malloc'ed buffer (one spare NUL byte
 * past *size). CUABI_ERROR_IO with the OS reason on failure. */
cuabi_status cuabi__read_file(const char *path, void **data, size_t *size, const char *caller);

#endif
