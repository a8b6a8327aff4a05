/* The cuabi command-line tool: shared helpers for subcommands.
 * The tool uses only the public API (it links libcuabi.so). */
#ifndef CUABI_CLI_H
#define CUABI_CLI_H

#include <stdbool.h>
#include <stddef.h>
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

/* ---- Options (src/cli/options.c) ----
 * Each subcommand describes its command line in one table of cli_option
 * rows: the option's names, its value's name (metavar), its help and where
 * the value goes. cli_parse reads argv by the table, and --help, the usage
 * line and every usage error are made from it. Long options take their
 * value as "--name VALUE" or "--name=VALUE", short ones as "-x VALUE" or
 * "-xVALUE"; "--" ends the options; "-" alone is an argument. */

/* The values of a repeatable option or of several arguments, in order. */
typedef struct cli_list {
    const char **v;
    size_t n;
} cli_list;

typedef enum cli_opt_kind {
    CLI_FLAG,   /* bool: set; saying it again changes nothing */
    CLI_CHOICE, /* int: set to the row's value; rows sharing a target are
                   alternatives, and two different ones are an error */
    CLI_STRING, /* const char *: the value; given twice is an error */
    CLI_LIST,   /* cli_list: every value, in order; repeat it for several */
    CLI_INT,    /* long long: an integer in min..max (decimal or 0x hex); once */
    CLI_CALL,   /* the row's call does the parsing, each time it is given */
} cli_opt_kind;

/* A callback row's parser: 0 when `value` is good, else -1 with a reason
 * ("wants sm_XX or compute_XX") in why. */
typedef int (*cli_opt_call)(const char *value, void *target, char *why, size_t len);

typedef struct cli_option {
    const char *name;    /* long name without "--"; NULL with no short_name:
                            a positional argument */
    char short_name;     /* one-letter form, or 0 */
    cli_opt_kind kind;
    const char *metavar; /* the value's name in help and errors; NULL: none */
    const char *help;
    void *target;
    long long min, max;  /* CLI_INT: the range; a positional: how many are
                            required (min) */
    int value;           /* CLI_CHOICE: what the row stores */
    cli_opt_call call;   /* CLI_CALL */
} cli_option;

#define CLI_OPT_FLAG(long_, short_, target_, help_) \
    { .name = (long_), .short_name = (short_), .kind = CLI_FLAG, .help = (help_), \
      .target = (target_) }
#define CLI_OPT_CHOICE(long_, target_, value_, help_) \
    { .name = (long_), .kind = CLI_CHOICE, .help = (help_), .target = (target_), \
      .value = (value_) }
#define CLI_OPT_STRING(long_, short_, metavar_, target_, help_) \
    { .name = (long_), .short_name = (short_), .kind = CLI_STRING, .metavar = (metavar_), \
      .help = (help_), .target = (target_) }
#define CLI_OPT_LIST(long_, short_, metavar_, target_, help_) \
    { .name = (long_), .short_name = (short_), .kind = CLI_LIST, .metavar = (metavar_), \
      .help = (help_), .target = (target_) }
#define CLI_OPT_INT(long_, short_, metavar_, target_, min_, max_, help_) \
    { .name = (long_), .short_name = (short_), .kind = CLI_INT, .metavar = (metavar_), \
      .help = (help_), .target = (target_), .min = (min_), .max = (max_) }
#define CLI_OPT_CALL(long_, short_, metavar_, call_, target_, help_) \
    { .name = (long_), .short_name = (short_), .kind = CLI_CALL, .metavar = (metavar_), \
      .help = (help_), .target = (target_), .call = (call_) }
/* Positional arguments, taken in table order: one (a const char *), or all
 * the rest (a cli_list). `required`: how many must be given (0 or more). */
#define CLI_ARG(metavar_, target_, required_, help_) \
    { .kind = CLI_STRING, .metavar = (metavar_), .help = (help_), .target = (target_), \
      .min = (required_) }
#define CLI_ARGS(metavar_, target_, required_, help_) \
    { .kind = CLI_LIST, .metavar = (metavar_), .help = (help_), .target = (target_), \
      .min = (required_) }

/* A subcommand's command line. -h/--help is every command's: not a row. */
typedef struct cli_spec {
    const char *command;       /* "occupancy", "cache warm": errors say "cuabi <command>:" */
    const char *about;         /* what --help prints after the usage line */
    const cli_option *options;
    size_t count;
} cli_spec;

/* cli_parse's answer when the command should go on. */
#define CLI_GO_ON (-1)

/* Read argv[1..argc-1] by the table. CLI_GO_ON, or the exit status: 0 when
 * --help was printed, 2 after a usage error (told on stderr with the usage
 * line, and as a JSON error document on stdout when --json is among the
 * arguments and the table has it). */
int cli_parse(const cli_spec *spec, int argc, char **argv);
/* The same, writing help to `out` and errors to `err`. */
int cli_parse_to(const cli_spec *spec, int argc, char **argv, FILE *out, FILE *err);
/* --help: the usage line, `about`, the arguments and the options. */
void cli_print_help(const cli_spec *spec, FILE *out);
/* The usage line alone ("usage: cuabi compile FILE [--arch A]..."), wrapped;
 * `lead` replaces "usage: " (for a list of several commands' lines). */
void cli_print_usage(const cli_spec *spec, const char *lead, FILE *out);
/* Append to a list (the parser's CLI_LIST rows, and callbacks). -1: out of
 * memory. */
int cli_list_push(cli_list *l, const char *s);
void cli_list_free(cli_list *l);
/* True if argv[1..] holds `word` before any "--". */
bool cli_has_arg(int argc, char **argv, const char *word);

/* ---- JSON (src/cli/util.c) ----
 * A --json command writes one JSON document to stdout, whatever happens: the
 * writer builds it in memory, and json_finish writes it, or json_fail
 * writes an error document instead (or adds "error" and "status" members to
 * the object being built). Strings are escaped: control characters as \n,
 * \t, \u00XX, and each byte that is not part of valid UTF-8 as \ufffd, so
 * the output is valid UTF-8 JSON whatever the input bytes. Commas are
 * inserted automatically. Nesting is limited to CLI_JSON_DEPTH - 1 levels. */
#define CLI_JSON_DEPTH 16
typedef struct cli_json {
    FILE *dest;      /* where the document goes (stdout) */
    FILE *out;       /* the memory buffer; NULL: not writing JSON */
    char *buf;
    size_t size;
    int depth;
    bool need_comma[CLI_JSON_DEPTH];
    char open[CLI_JSON_DEPTH]; /* '{' or '[' at each depth */
    bool failed;     /* an error document replaced this one */
} cli_json;

/* Begin a document in memory, for stdout (false: out of memory, told on
 * stderr); json_start_to: for `dest`. */
bool json_start(cli_json *j);
bool json_start_to(cli_json *j, FILE *dest);
/* Whether j is building a document. */
bool json_on(const cli_json *j);
/* Close what is open, write the document to stdout; returns rc (1 if stdout
 * failed). Calls after the document is written do nothing. */
int json_finish(cli_json *j, int rc);
/* A failure: the document becomes {"error": message, "status": NAME} — or,
 * when an object is under way, it is closed with those two members added —
 * and is written to stdout. Does nothing for a j not building JSON. Returns
 * rc. */
int json_fail(cli_json *j, cuabi_status st, const char *message, int rc);
/* Write s as a JSON string (quoted, escaped as above). */
void json_write_string(FILE *out, const char *s);

void json_begin_object(cli_json *j, const char *key);
void json_end_object(cli_json *j);
void json_begin_array(cli_json *j, const char *key);
void json_end_array(cli_json *j);
void json_string(cli_json *j, const char *key, const char *value);
void json_int(cli_json *j, const char *key, long long value);
void json_double(cli_json *j, const char *key, double value);
void json_bool(cli_json *j, const char *key, bool value);
void json_null(cli_json *j, const char *key);

/* ---- GPU health from NVML (src/cli/health.c), for cuabi info ---- */

/* The NVML line of the header (text), or the "nvml" member (JSON); fills
 * *sys. Whether NVML is available. */
bool health_nvml_header(cli_json *j, cuabi_nvml_system_info *sys);
/* The health table and processes (text), or the "health" array (JSON),
 * and with `topology` the topology between the GPUs; the first GPU that
 * cannot be read goes into *failed / why. */
void health_report(cli_json *j, bool topology, cuabi_status *failed, char *why, size_t len);
/* cuabi info --watch SECONDS: the table every SECONDS (one JSON document a
 * line with --json) until SIGINT/SIGTERM or `count` refreshes (0: no
 * end); 0, or 1 when NVML is not available. */
int health_watch(bool json, long long seconds, long long count);

/* ---- Errors and files (src/cli/util.c) ---- */

/* A library call failed with st: "cuabi COMMAND: <last error message>
 * (STATUS)" and the log, if any, on stderr, and the JSON error document
 * when j builds one (j may be NULL). Returns 1. */
int cli_fail(const char *command, cuabi_status st, cli_json *j);
/* The tool's own failure (a file it cannot read, ...): "cuabi COMMAND:
 * <message>" on stderr, and the JSON error document with status st when j
 * builds one. Returns rc. */
int cli_error(cli_json *j, const char *command, cuabi_status st, int rc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Files the tool reads are at most this big (a source of 1 GiB is a mistake). */
#define CLI_MAX_FILE_BYTES (1u << 30)
/* The whole of a regular file, malloc'ed and NUL-terminated (the NUL not
 * counted in *size; size may be NULL). Bitcode and other binary input keep
 * their NUL bytes: use *size. NULL when it cannot be read, with the reason
 * in why ("No such file or directory", "a FIFO, not a regular file"). A
 * FIFO or device is refused without waiting for a writer. */
char *cli_read_file(const char *path, size_t *size, char *why, size_t len);

#endif
