/* cuabi cache: show, list, clear, warm (files or a manifest) or verify the
 * compile cache. Each action has its own option table; `cuabi cache
 * --help` lists them all. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_cache(int argc, char **argv);

/* Every action's options, in one place: each action's table points into
 * it. */
typedef struct cache_args {
    bool json, memory, disk;
    cli_list inputs, archs;  /* warm */
    long long jobs;          /* warm: 0 = one per CPU */
    bool allow_outside;      /* warm: a manifest may reach outside its directory */
    cli_json j;
} cache_args;

static int stats(cache_args *a)
{
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    cuabi_status st = cuabi_cache_get_stats(&s);
    if (st != CUABI_SUCCESS)
        return cli_fail("cache stats", st, &a->j);
    char dir[4096] = "";
    size_t n = sizeof dir;
    if (cuabi_cache_get_directory(dir, &n) != CUABI_SUCCESS)
        snprintf(dir, sizeof dir, "(none)");
    if (a->json) {
        json_begin_object(&a->j, NULL);
        json_string(&a->j, "directory", dir);
        json_bool(&a->j, "enabled", s.enabled);
        json_int(&a->j, "entries", (long long)s.entries);
        json_int(&a->j, "bytes", (long long)s.bytes);
        json_int(&a->j, "size_limit", (long long)s.size_limit);
        return json_finish(&a->j, 0);
    }
    printf("directory  %s\n", dir);
    printf("enabled    %s\n", s.enabled ? "yes" : "no (CUABI_CACHE=0)");
    printf("entries    %llu\n", (unsigned long long)s.entries);
    printf("bytes      %llu\n", (unsigned long long)s.bytes);
    if (s.size_limit)
        printf("limit      %llu (%.1f%% used)\n", (unsigned long long)s.size_limit,
               100.0 * (double)s.bytes / (double)s.size_limit);
    else
        printf("limit      none\n");
    return 0;
}

static const char *type_name(cuabi_code_type t)
{
    return t == CUABI_CODE_CUBIN ? "cubin" : t == CUABI_CODE_PTX ? "ptx"
         : t == CUABI_CODE_LTOIR ? "ltoir" : "other";
}

static int list_one(const cuabi_cache_entry_info *e, void *payload)
{
    cli_json *j = payload;
    if (j) {
        json_begin_object(j, NULL);
        json_string(j, "key", e->key);
        json_string(j, "type", e->problem ? "?" : type_name(e->code_type));
        json_int(j, "bytes", (long long)e->size);
        json_int(j, "last_used", (long long)e->last_used);
        json_int(j, "name_expressions", (long long)e->num_names);
        json_bool(j, "linked", e->linked != 0);
        json_string(j, "path", e->path);
        if (e->problem)
            json_string(j, "problem", e->problem);
        else
            json_null(j, "problem");
        json_end_object(j);
    } else {
        char when[32];
        time_t t = (time_t)e->last_used;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
        if (e->problem) /* a file under an entry's name the cache cannot use */
            printf("%s  %-5s %9llu  %s  unusable: %s\n", e->key, "?",
                   (unsigned long long)e->size, when, e->problem);
        else if (e->linked)
            printf("%s  %-5s %9llu  %s  linked\n", e->key, type_name(e->code_type),
                   (unsigned long long)e->size, when);
        else
            printf("%s  %-5s %9llu  %s  %zu names\n", e->key, type_name(e->code_type),
                   (unsigned long long)e->size, when, e->num_names);
    }
    return 0;
}

/* With --json an array; a failure replaces it with an error object (an
 * empty array would read as an empty cache). */
static int list(cache_args *a)
{
    if (a->json)
        json_begin_array(&a->j, NULL);
    else
        printf("%-32s  %-5s %9s  %-19s\n", "key (least recently used first)", "type", "bytes",
               "last used");
    cuabi_status st = cuabi_cache_list(list_one, a->json ? &a->j : NULL);
    if (st != CUABI_SUCCESS)
        return cli_fail("cache list", st, &a->j);
    return json_finish(&a->j, 0);
}

static int clear(cache_args *a)
{
    unsigned flags = a->memory || a->disk ? (a->memory ? CUABI_CACHE_CLEAR_MEMORY : 0) |
                                                (a->disk ? CUABI_CACHE_CLEAR_DISK : 0)
                                          : CUABI_CACHE_CLEAR_ALL;
    cuabi_status st = cuabi_cache_clear(flags);
    if (st != CUABI_SUCCESS)
        return cli_fail("cache clear", st, &a->j);
    if (!a->json) {
        printf("cleared\n");
        return 0;
    }
    json_begin_object(&a->j, NULL);
    json_bool(&a->j, "cleared", true);
    return json_finish(&a->j, 0);
}

/* How warm reports: a progress bar (stderr), failures (stderr), a summary
 * (stdout) — or JSON. */
typedef struct warm_state {
    bool bar;
    bool json;
    cli_json *j;
    const char *manifest;  /* NULL: warm FILE... */
    size_t failed;         /* compiles and manifest problems */
    size_t compiled, cached;
    cuabi_status first_status; /* the first failure, for --json's "error" */
    char first_error[1024];
} warm_state;

static void show_bar(warm_state *w, size_t done, size_t total, const char *name)
{
    enum { WIDTH = 30 };
    if (!w->bar || !total)
        return;
    size_t fill = done * WIDTH / total;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-40.40s", (int)fill, "##############################",
            (int)(WIDTH - fill), "", done, total, name);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

/* The first failure, for --json's "error". */
static void remember_failure(warm_state *w, const char *name, const char *arch, int line,
                             cuabi_status status, int hit, const char *message)
{
    char *e = w->first_error;
    size_t len = sizeof w->first_error;
    w->first_status = status;
    if (hit < 0 && line > 0 && w->manifest)
        snprintf(e, len, "%s:%d: %s", w->manifest, line, message);
    else if (*name && *arch)
        snprintf(e, len, "%s (%s): %s", name, arch, message);
    else if (*name)
        snprintf(e, len, "%s: %s", name, message);
    else
        snprintf(e, len, "%s", message);
}

/* One outcome, in whichever form. `line` < 0: no manifest line; `hit` < 0:
 * a manifest problem. */
static void warm_outcome(warm_state *w, const char *name, const char *arch, int line,
                         cuabi_status status, int hit, const char *message, const char *log)
{
    if (status != CUABI_SUCCESS) {
        if (w->failed++ == 0)
            remember_failure(w, name, arch, line, status, hit, message);
    } else if (hit > 0)
        w->cached++;
    else
        w->compiled++;
    if (w->json) {
        json_begin_object(w->j, NULL);
        json_string(w->j, w->manifest ? "name" : "file", name);
        json_string(w->j, "arch", arch);
        if (line >= 0)
            json_int(w->j, "line", line);
        json_string(w->j, "status", cuabi_status_name(status));
        if (hit < 0)
            json_string(w->j, "source", "manifest");
        else
            json_string(w->j, "source", status != CUABI_SUCCESS && !hit ? "failed"
                                        : hit == 1 ? "memory cache" : hit == 2 ? "disk cache"
                                                                              : "compiled");
        json_string(w->j, "message", message);
        json_string(w->j, "log", log);
        json_end_object(w->j);
        return;
    }
    if (status == CUABI_SUCCESS)
        return;
    if (w->bar)
        fputc('\n', stderr);
    if (w->manifest && hit < 0)
        fprintf(stderr, "%s:%d: %s\n", w->manifest, line, message);
    else if (w->manifest)
        fprintf(stderr, "%s:%d: %s (%s): %s\n", w->manifest, line, name, arch, message);
    else
        fprintf(stderr, "cuabi cache warm: %s (%s): %s\n", name, arch, message);
}

static int on_progress(size_t done, size_t total, const char *name, const char *arch,
                       cuabi_status status, int hit, void *payload)
{
    warm_state *w = payload;
    const cuabi_error_info *e = cuabi_last_error();
    warm_outcome(w, name, arch, -1, status, hit, status == CUABI_SUCCESS ? "" : e->message,
                 status == CUABI_SUCCESS || !e->log_size ? "" : e->log);
    show_bar(w, done, total, name);
    return 0;
}

static int on_event(const cuabi_warm_event *ev, void *payload)
{
    warm_state *w = payload;
    warm_outcome(w, ev->name, ev->arch, ev->line, ev->status, ev->cache_hit, ev->message,
                 ev->log);
    show_bar(w, ev->done, ev->total, ev->name);
    return 0;
}

static void begin_results(warm_state *w)
{
    json_begin_object(w->j, NULL);
    json_begin_array(w->j, "results");
}

static void print_summary(const warm_state *w, size_t total, size_t problems)
{
    printf("%zu compile%s: %zu compiled, %zu already cached, %zu failed", total,
           total == 1 ? "" : "s", w->compiled, w->cached, w->failed - problems);
    if (w->manifest)
        printf("; %zu problem%s in %s", problems, problems == 1 ? "" : "s", w->manifest);
    printf("\n");
}

/* --json's "error": what failed, then the first failure. */
static int warm_failed(warm_state *w, cuabi_status st, size_t total, size_t problems)
{
    char why[1400] = "";
    size_t failed = w->failed - problems;
    int n = 0;
    if (failed)
        n = snprintf(why, sizeof why, "%zu of %zu compile%s failed", failed, total,
                     total == 1 ? "" : "s");
    if (problems)
        n += snprintf(why + n, sizeof why - (size_t)n, "%s%zu problem%s%s%s", n ? ", " : "",
                      problems, problems == 1 ? "" : "s", w->manifest ? " in " : "",
                      w->manifest ? w->manifest : "");
    snprintf(why + n, sizeof why - (size_t)n, "%s%s", n ? ": " : "",
             w->failed ? w->first_error : cuabi_last_error()->message);
    return json_fail(w->j, w->failed ? w->first_status : st, why, 1);
}

/* Close the JSON or print the summary; the exit status. Anything that went
 * wrong makes it 1, whatever the library returned (issue 17: --json once
 * exited 0 over an error), and gives the JSON an "error". */
static int end_results(warm_state *w, cuabi_status st, size_t problems)
{
    size_t total = w->compiled + w->cached + w->failed - problems;
    int rc = st != CUABI_SUCCESS || w->failed ? 1 : 0;
    if (!json_on(w->j)) {
        if (w->compiled + w->cached + w->failed) /* else nothing ran: just the error */
            print_summary(w, total, problems);
        if (st != CUABI_SUCCESS && !w->failed)
            cli_fail("cache warm", st, NULL);
        return rc;
    }
    json_end_array(w->j);
    json_begin_object(w->j, "summary");
    json_int(w->j, "total", (long long)total);
    json_int(w->j, "compiled", (long long)w->compiled);
    json_int(w->j, "cached", (long long)w->cached);
    json_int(w->j, "failed", (long long)(w->failed - problems));
    json_int(w->j, "problems", (long long)problems);
    json_end_object(w->j);
    if (!rc)
        return json_finish(w->j, 0);
    return warm_failed(w, st, total, problems);
}

static bool is_manifest(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && !strcmp(path + n - 5, ".toml");
}

/* cuabi cache warm MANIFEST.toml [--arch A]... [--jobs N] */
static int warm_manifest(cache_args *a, const char *path)
{
    warm_state w = { .bar = !a->json, .json = a->json, .j = &a->j, .manifest = path };
    cuabi_warm_options o = CUABI_WARM_OPTIONS_INIT;
    o.jobs = (int)a->jobs;
    o.archs = a->archs.n ? a->archs.v : NULL;
    o.num_archs = a->archs.n;
    o.allow_outside = a->allow_outside;
    cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
    begin_results(&w);
    cuabi_status st = cuabi_cache_warm_manifest(&s, path, &o, on_event, &w);
    if (st != CUABI_SUCCESS && !w.failed && a->json) {
        /* nothing was compiled (unreadable manifest, unusable cache): say
         * why in the results too */
        warm_outcome(&w, path, "", 0, st, -1, cuabi_last_error()->message, "");
        s.problems++;
    }
    return end_results(&w, st, s.problems);
}

/* Each FILE's text into items[i] (PTX by its extension); the exit status. */
static int read_sources(cache_args *a, cuabi_precompile_item *items)
{
    for (size_t i = 0; i < a->inputs.n; i++) {
        const char *path = a->inputs.v[i];
        char why[256] = "empty";
        char *text = cli_read_file(path, NULL, why, sizeof why);
        if (!text || !*text) {
            free(text);
            return cli_error(&a->j, "cache warm", CUABI_ERROR_IO, 1, "cannot read %s: %s",
                             path, why);
        }
        cuabi_precompile_item it = CUABI_PRECOMPILE_ITEM_INIT;
        size_t len = strlen(path);
        it.type = len > 4 && !strcmp(path + len - 4, ".ptx") ? CUABI_CODE_PTX
                                                            : CUABI_CODE_CUDA_CXX;
        it.source = text;
        it.name = path;
        items[i] = it;
    }
    return 0;
}

/* cuabi cache warm FILE... [--arch A]... */
static int warm_files(cache_args *a)
{
    size_t n = a->inputs.n, na = a->archs.n;
    cuabi_precompile_item *items = calloc(n, sizeof *items);
    if (!items)
        return cli_error(&a->j, "cache warm", CUABI_ERROR_OUT_OF_MEMORY, 1, "out of memory");
    warm_state w = { .bar = n * (na ? na : 1) > 1 && !a->json, .json = a->json, .j = &a->j };
    begin_results(&w);
    int rc = read_sources(a, items);
    if (rc == 0) {
        cuabi_status st = cuabi_cache_precompile(items, n, na ? a->archs.v : NULL, na,
                                                 on_progress, &w);
        bool told = st == CUABI_SUCCESS || w.failed || !a->json;
        if (!told)   /* nothing ran (an unusable cache): a result saying why */
            warm_outcome(&w, "", "", -1, st, -1, cuabi_last_error()->message, "");
        rc = end_results(&w, st, told ? 0 : 1);
    }
    for (size_t i = 0; i < n; i++)
        free((char *)items[i].source);
    free(items);
    return rc;
}

static int warm(cache_args *a)
{
    const char *manifest = NULL;
    for (size_t i = 0; i < a->inputs.n; i++)
        if (is_manifest(a->inputs.v[i]))
            manifest = a->inputs.v[i];
    if (manifest && a->inputs.n > 1)
        return cli_error(&a->j, "cache warm", CUABI_ERROR_INVALID_ARGUMENT, 2,
                         "give one manifest (%s) or source files, not both", manifest);
    return manifest ? warm_manifest(a, manifest) : warm_files(a);
}

/* Each file verify removed or left alone. With --json the removals are
 * written as they come ("removed"), the files left alone kept for "left",
 * written once that array is closed. */
typedef struct verify_state {
    cli_json *j;
    char **paths, **problems;  /* left alone, for --json */
    size_t n;
} verify_state;

static int on_finding(const cuabi_cache_verify_finding *f, void *payload)
{
    verify_state *v = payload;
    if (!v->j) {
        printf("%s %s: %s\n", f->removed ? "removed" : "left alone", f->path, f->problem);
    } else if (f->removed) {
        json_begin_object(v->j, NULL);
        json_string(v->j, "path", f->path);
        json_string(v->j, "problem", f->problem);
        json_end_object(v->j);
    } else {
        char **p = realloc(v->paths, (v->n + 1) * sizeof *p);
        if (p)
            v->paths = p;
        char **q = p ? realloc(v->problems, (v->n + 1) * sizeof *q) : NULL;
        if (q)
            v->problems = q;
        if (!p || !q)
            return 1; /* out of memory: stop */
        v->paths[v->n] = strdup(f->path);
        v->problems[v->n++] = strdup(f->problem);
    }
    return 0;
}

static void write_left(verify_state *v)
{
    json_begin_array(v->j, "left");
    for (size_t i = 0; i < v->n; i++) {
        json_begin_object(v->j, NULL);
        json_string(v->j, "path", v->paths[i] ? v->paths[i] : "");
        json_string(v->j, "problem", v->problems[i] ? v->problems[i] : "");
        json_end_object(v->j);
        free(v->paths[i]);
        free(v->problems[i]);
    }
    json_end_array(v->j);
    free(v->paths);
    free(v->problems);
}

/* cuabi cache verify */
static int verify(cache_args *a)
{
    verify_state v = { .j = a->json ? &a->j : NULL };
    if (a->json) {
        json_begin_object(&a->j, NULL);
        json_begin_array(&a->j, "removed");
    }
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    cuabi_status st = cuabi_cache_verify_each(&r, on_finding, &v);
    if (a->json) {
        json_end_array(&a->j);
        write_left(&v);
        json_int(&a->j, "checked", (long long)r.checked);
        json_int(&a->j, "removed_count", (long long)r.removed);
        json_int(&a->j, "bytes_removed", (long long)r.bytes_removed);
        json_int(&a->j, "kept", (long long)r.kept);
        json_int(&a->j, "skipped", (long long)r.skipped);
    } else if (st == CUABI_SUCCESS) {
        printf("%llu entr%s checked, %llu damaged removed (%llu bytes)",
               (unsigned long long)r.checked, r.checked == 1 ? "y" : "ies",
               (unsigned long long)r.removed, (unsigned long long)r.bytes_removed);
        if (r.kept)
            printf(", %llu of another cuabi version kept", (unsigned long long)r.kept);
        if (r.skipped)
            printf(", %llu left alone (see above)", (unsigned long long)r.skipped);
        printf("\n");
    }
    return st == CUABI_SUCCESS ? json_finish(&a->j, 0) : cli_fail("cache verify", st, &a->j);
}

/* ---- The actions and their tables ---- */

typedef struct cache_action {
    const char *name;
    int (*run)(cache_args *a);
    const char *about;
    const char *json_help;
} cache_action;

static const cache_action actions[] = {
    { "stats", stats, "The cache's directory, whether it is on, its entries and bytes and its\n"
      "size limit.\n", "{\"directory\", \"enabled\", \"entries\", \"bytes\", \"size_limit\"}" },
    { "list", list, "Every entry, least recently used first: key, kind, bytes, last use, and\n"
      "its name expressions (or \"linked\" for a linker's output). A file under an\n"
      "entry's name that the cache cannot use (a FIFO, a link, another user's) is\n"
      "listed as unusable, with why.\n",
      "an array of {\"key\", \"type\", \"bytes\", \"last_used\", \"name_expressions\", "
      "\"linked\", \"path\", \"problem\" (null when usable)}" },
    { "clear", clear, "Empty the cache: both layers, or the one named.\n", "{\"cleared\": true}" },
    { "warm", warm,
      "warm MANIFEST.toml precompiles a project: every [[source]] of the manifest for\n"
      "each of its architectures (--arch replaces them), N at a time (default: one\n"
      "per CPU); what is cached already is not compiled again. A problem in the\n"
      "manifest is reported with its line and the rest goes on (format:\n"
      "docs/compile-cache.md; example:\n"
      "examples/precompile/cuabi-precompile.toml).\n"
      "warm FILE... compiles each file (CUDA C++, or PTX if it ends in .ptx) for each\n"
      "--arch (default: the current GPU's, or sm_90).\n"
      "Both show a progress bar on stderr when there is more than one compile, then a\n"
      "summary. The exit status is 1 when anything failed or the manifest has a\n"
      "problem.\n"
      "A manifest reads only files of its own directory tree (symbolic links\n"
      "resolved), and its sources may #include only those: --allow-outside lifts\n"
      "that, for a manifest you trust.\n",
      "{\"results\": [...], \"summary\": {...}} instead of the bar and the summary, with "
      "\"error\" and \"status\" when anything failed" },
    { "verify", verify, "Re-check every entry's checksum and remove the damaged ones. Only what\n"
      "is proven bad goes; a file that cannot be read or is not yours is left\n"
      "alone and named, with why.\n",
      "{\"removed\": [{\"path\", \"problem\"}], \"left\": [{\"path\", \"problem\"}], "
      "\"checked\", \"removed_count\", \"bytes_removed\", \"kept\", \"skipped\"}" },
};
enum { NACTIONS = sizeof actions / sizeof actions[0] };

/* The action's table in rows[] (room for 8), and its spec. */
static cli_spec action_spec(const cache_action *act, cache_args *a, cli_option *rows,
                            char *command, size_t len)
{
    size_t n = 0;
    snprintf(command, len, "cache %s", act->name);
    if (act->run == warm) {
        rows[n++] = (cli_option)CLI_ARGS("MANIFEST.toml|FILE...", &a->inputs, 1,
                                         "a precompile manifest, or CUDA C++ / PTX files");
        rows[n++] = (cli_option)CLI_OPT_LIST("arch", 0, "sm_XX", &a->archs,
                                             "an architecture to compile for; repeat for several");
        rows[n++] = (cli_option)CLI_OPT_INT("jobs", 'j', "N", &a->jobs, 1, 1024,
                                            "compiles at once (a manifest; default: one per CPU)");
        rows[n++] = (cli_option)CLI_OPT_FLAG("allow-outside", 0, &a->allow_outside,
                                             "let the manifest name files, include paths and "
                                             "#includes outside its own directory (refused by "
                                             "default: a manifest you did not write could "
                                             "copy any file you can read into an error)");
    } else if (act->run == clear) {
        rows[n++] = (cli_option)CLI_OPT_FLAG("memory", 0, &a->memory,
                                             "the in-memory layer of this process only");
        rows[n++] = (cli_option)CLI_OPT_FLAG("disk", 0, &a->disk, "the directory's entries only");
    }
    rows[n++] = (cli_option)CLI_OPT_FLAG("json", 0, &a->json, act->json_help);
    return (cli_spec){ command, act->about, rows, n };
}

static const char cache_about[] =
    "The compile cache shared by every cuabi binding: $CUABI_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/cuabi, else ~/.cache/cuabi. CUABI_CACHE=0 turns it off.\n"
    "`cuabi cache ACTION --help` tells more about each action.\n";

/* `cuabi cache --help`: every action's usage line, from its table. */
static void overview(FILE *out)
{
    cache_args a = { .jobs = 0 };
    cli_option rows[8];
    char command[32];
    for (size_t i = 0; i < NACTIONS; i++) {
        cli_spec spec = action_spec(&actions[i], &a, rows, command, sizeof command);
        cli_print_usage(&spec, i ? "       " : "usage: ", out);
    }
    fprintf(out, "\n%s", cache_about);
}

static int run_action(const cache_action *act, int argc, char **argv)
{
    cache_args a = { .jobs = 0 };
    cli_option rows[8];
    char command[32];
    cli_spec spec = action_spec(act, &a, rows, command, sizeof command);
    int rc = cli_parse(&spec, argc, argv);
    if (rc == CLI_GO_ON)
        rc = a.json && !json_start(&a.j) ? 1 : act->run(&a);
    cli_list_free(&a.inputs);
    cli_list_free(&a.archs);
    return rc;
}

int cli_cache(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        overview(stdout);
        return 0;
    }
    for (size_t i = 0; argc >= 2 && i < NACTIONS; i++)
        if (!strcmp(argv[1], actions[i].name))
            return run_action(&actions[i], argc - 1, argv + 1);
    cli_json j = { .out = NULL };
    if (cli_has_arg(argc, argv, "--json"))
        json_start(&j);
    if (argc < 2)
        cli_error(&j, "cache", CUABI_ERROR_INVALID_ARGUMENT, 2, "which action? (stats, list, "
                  "clear, warm or verify)");
    else
        cli_error(&j, "cache", CUABI_ERROR_INVALID_ARGUMENT, 2, "unknown action '%s'", argv[1]);
    overview(stderr);
    return 2;
}
