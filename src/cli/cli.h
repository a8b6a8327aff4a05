/* The cuabi command-line tool: shared helpers for subcommands.
 * The tool uses only the public API (it links libcuabi.so). */
#ifndef CUABI_CLI_H
#define CUABI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "cuabi.h"

/* A subcommand: argv[0] is the subcommand name. Returns the exit code. */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* Subcommands; each lives in its own src/cli/<name>.c. */
int cli_info(int argc, char **argv);

/* Print "cuabi NAME: <last error message>" (and the log, if any) to stderr;
 * returns 1. */
int cli_fail(const char *command, cuabi_status st);
/* True if argv holds --help or -h. */
bool cli_wants_help(int argc, char **argv);
/* Files the tool reads are at most this big (a source of 1 GiB is a mistake). */
#define CLI_MAX_FILE_BYTES (1u << 30)
/* The whole of a regular file, malloc'ed and NUL-terminated (the NUL not
 * counted in *size; size may be NULL). Bitcode and other binary input keep
 * their NUL bytes: use *size. NULL when it cannot be read, with the reason
 * in why ("No such file or directory", "a FIFO, not a regular file"). A
 * FIFO or device is refused without waiting for a writer. */
char *cli_read_file(const char *path, size_t *size, char *why, size_t len);

/* Minimal JSON writer on a FILE: enough for flat records and arrays.
 * Commas are inserted automatically. Strings (keys too) are escaped, and
 * bytes that are not UTF-8 become U+FFFD, one per byte. */
typedef struct cli_json {
    FILE *out;
    int depth;
    bool need_comma[32];
} cli_json;
void json_begin_object(cli_json *j, const char *key);
void json_end_object(cli_json *j);
void json_begin_array(cli_json *j, const char *key);
void json_end_array(cli_json *j);
void json_string(cli_json *j, const char *key, const char *value);
void json_int(cli_json *j, const char *key, long long value);
void json_double(cli_json *j, const char *key, double value);
void json_bool(cli_json *j, const char *key, bool value);
void json_null(cli_json *j, const char *key);

#endif
