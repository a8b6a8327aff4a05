/* cuabi: show what the library does. `cuabi help` lists the subcommands. */
#include "cli.h"

#include <string.h>

/* Each subcommand lives in src/cli/<name>.c, added to cuabi_SOURCES by its
 * area's mk/ fragment. They are weak here so the tool links while an area
 * is still being built; a missing one is simply not listed. */
int cli_compile(int argc, char **argv) __attribute__((weak));
int cli_cache(int argc, char **argv) __attribute__((weak));
int cli_occupancy(int argc, char **argv) __attribute__((weak));
int cli_demo(int argc, char **argv) __attribute__((weak));

static const cli_command commands[] = {
    { "info", "library, driver, NVRTC and nvJitLink versions and every GPU", cli_info },
    { "compile", "compile CUDA C++ or PTX to PTX/CUBIN/LTO-IR and show kernel resources",
      cli_compile },
    { "occupancy", "occupancy per block size, live or for a named architecture",
      cli_occupancy },
    { "cache", "inspect, clear or warm the compile cache", cli_cache },
    { "demo", "compile, link, inspect and run the segmented-reduction kernel", cli_demo },
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

static void usage(FILE *out)
{
    fprintf(out, "usage: cuabi <command> [options]   (cuabi <command> --help for details)\n\n"
                 "commands:\n");
    for (size_t i = 0; i < ncommands; i++)
        if (commands[i].run)
            fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nEvery command takes --json: one JSON document on stdout, with \"error\" and\n"
                 "\"status\" when it fails.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cuabi %s\n", cuabi_version_string());
        return 0;
    }
    for (size_t i = 0; i < ncommands; i++)
        if (commands[i].run && !strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    char why[256];
    snprintf(why, sizeof why, "unknown command '%s'", argv[1]);
    fprintf(stderr, "cuabi: %s\n", why);
    usage(stderr);
    cli_json j;
    if (cli_has_arg(argc - 1, argv + 1, "--json") && json_start(&j))
        json_fail(&j, CUABI_ERROR_INVALID_ARGUMENT, why, 2);
    return 2;
}
