/* cuabi cache: show, list, clear, warm (files or a manifest) or verify the
 * compile cache. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_cache(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuabi cache stats [--json]\n"
            "       cuabi cache list [--json]\n"
            "       cuabi cache clear [--memory | --disk]\n"
            "       cuabi cache warm MANIFEST.toml [--arch sm_XX]... [--jobs N] [--json]\n"
            "       cuabi cache warm FILE... [--arch sm_XX]... [--json]\n"
            "       cuabi cache verify [--json]\n\n"
            "The compile cache shared by every cuabi binding: $CUABI_CACHE_DIR, else\n"
            "$XDG_CACHE_HOME/cuabi, else ~/.cache/cuabi. CUABI_CACHE=0 turns it off.\n"
            "warm MANIFEST.toml precompiles a project: every [[source]] of the manifest for\n"
            "each of its architectures (--arch replaces them), N at a time (default: one\n"
            "per CPU); what is cached already is not compiled again. A problem in the\n"
            "manifest is reported with its line and the rest goes on (format:\n"
            "docs/compile-cache.md, example: examples/precompile.toml).\n"
            "warm FILE... compiles each file (CUDA C++, or PTX if it ends in .ptx) for each\n"
            "--arch (default: the current GPU's, or sm_90).\n"
            "Both show a progress bar on stderr when there is more than one compile, then a\n"
            "summary; --json prints {\"results\": [...], \"summary\": {...}} instead. The\n"
            "exit status is 1 when anything failed or the manifest has a problem.\n"
            "verify re-checks every entry's checksum and removes the damaged ones.\n");
}

static int stats(bool json)
{
    cuabi_cache_stats s = CUABI_CACHE_STATS_INIT;
    cuabi_status st = cuabi_cache_get_stats(&s);
    if (st != CUABI_SUCCESS)
        return cli_fail("cache", st);
    char dir[4096] = "";
    size_t n = sizeof dir;
    if (cuabi_cache_get_directory(dir, &n) != CUABI_SUCCESS)
        snprintf(dir, sizeof dir, "(none)");
    if (json) {
        cli_json j = { .out = stdout };
        json_begin_object(&j, NULL);
        json_string(&j, "directory", dir);
        json_bool(&j, "enabled", s.enabled);
        json_int(&j, "entries", (long long)s.entries);
        json_int(&j, "bytes", (long long)s.bytes);
        json_int(&j, "size_limit", (long long)s.size_limit);
        json_end_object(&j);
        fputc('\n', stdout);
    } else {
        printf("directory  %s\n", dir);
        printf("enabled    %s\n", s.enabled ? "yes" : "no (CUABI_CACHE=0)");
        printf("entries    %llu\n", (unsigned long long)s.entries);
        printf("bytes      %llu\n", (unsigned long long)s.bytes);
        if (s.size_limit)
            printf("limit      %llu (%.1f%% used)\n", (unsigned long long)s.size_limit,
                   100.0 * (double)s.bytes / (double)s.size_limit);
        else
            printf("limit      none\n");
    }
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
        json_string(j, "type", type_name(e->code_type));
        json_int(j, "bytes", (long long)e->size);
        json_int(j, "last_used", (long long)e->last_used);
        json_int(j, "name_expressions", (long long)e->num_names);
        json_bool(j, "linked", e->linked != 0);
        json_string(j, "path", e->path);
        json_end_object(j);
    } else {
        char when[32];
        time_t t = (time_t)e->last_used;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
        if (e->linked)
            printf("%s  %-5s %9llu  %s  linked\n", e->key, type_name(e->code_type),
                   (unsigned long long)e->size, when);
        else
            printf("%s  %-5s %9llu  %s  %zu names\n", e->key, type_name(e->code_type),
                   (unsigned long long)e->size, when, e->num_names);
    }
    return 0;
}

static int list(bool json)
{
    cli_json j = { .out = stdout };
    if (json)
        json_begin_array(&j, NULL);
    else
        printf("%-32s  %-5s %9s  %-19s\n", "key (least recently used first)", "type", "bytes",
               "last used");
    cuabi_status st = cuabi_cache_list(list_one, json ? &j : NULL);
    if (json) {
        json_end_array(&j);
        fputc('\n', stdout);
    }
    return st == CUABI_SUCCESS ? 0 : cli_fail("cache", st);
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

/* One outcome, in whichever form. `line` < 0: no manifest line; `hit` < 0:
 * a manifest problem. */
static void warm_outcome(warm_state *w, const char *name, const char *arch, int line,
                         cuabi_status status, int hit, const char *message, const char *log)
{
    if (status != CUABI_SUCCESS)
        w->failed++;
    else if (hit > 0)
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
    if (!w->json)
        return;
    json_begin_object(w->j, NULL);
    json_begin_array(w->j, "results");
}

/* Close the JSON or print the summary; the exit status. */
static int end_results(warm_state *w, cuabi_status st, size_t problems)
{
    size_t total = w->compiled + w->cached + w->failed - problems;
    if (w->json) {
        json_end_array(w->j);
        json_begin_object(w->j, "summary");
        json_int(w->j, "total", (long long)total);
        json_int(w->j, "compiled", (long long)w->compiled);
        json_int(w->j, "cached", (long long)w->cached);
        json_int(w->j, "failed", (long long)(w->failed - problems));
        json_int(w->j, "problems", (long long)problems);
        json_end_object(w->j);
        json_end_object(w->j);
        fputc('\n', stdout);
    } else if (w->compiled + w->cached + w->failed) { /* else nothing ran: just the error */
        printf("%zu compile%s: %zu compiled, %zu already cached, %zu failed", total,
               total == 1 ? "" : "s", w->compiled, w->cached, w->failed - problems);
        if (w->manifest)
            printf("; %zu problem%s in %s", problems, problems == 1 ? "" : "s", w->manifest);
        printf("\n");
    }
    /* Anything that went wrong makes the exit status 1, whatever the
     * library returned (issue 17: --json once exited 0 over an error). */
    if (st != CUABI_SUCCESS && !w->failed && !w->json)
        cli_fail("cache", st);
    return st != CUABI_SUCCESS || w->failed ? 1 : 0;
}

static bool is_manifest(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && !strcmp(path + n - 5, ".toml");
}

/* cuabi cache warm MANIFEST.toml [--arch A]... [--jobs N] */
static int warm_manifest(const char *path, const char **archs, size_t na, int jobs, bool json)
{
    cli_json j = { .out = stdout };
    warm_state w = { .bar = !json, .json = json, .j = &j, .manifest = path };
    cuabi_warm_options o = CUABI_WARM_OPTIONS_INIT;
    o.jobs = jobs;
    o.archs = na ? archs : NULL;
    o.num_archs = na;
    cuabi_warm_summary s = CUABI_WARM_SUMMARY_INIT;
    begin_results(&w);
    cuabi_status st = cuabi_cache_warm_manifest(&s, path, &o, on_event, &w);
    if (st != CUABI_SUCCESS && !w.failed && json) {
        /* nothing was compiled (unreadable manifest, unusable cache): say
         * why in the JSON too */
        const char *arch = "";
        warm_outcome(&w, path, arch, 0, st, -1, cuabi_last_error()->message, "");
        s.problems++;
    }
    return end_results(&w, st, s.problems);
}

static int warm(int argc, char **argv, bool json)
{
    const char **archs = calloc((size_t)argc, sizeof *archs);
    cuabi_precompile_item *items = calloc((size_t)argc, sizeof *items);
    const char *manifest = NULL;
    size_t na = 0, ni = 0, nfiles = 0;
    int rc = 0, jobs = 0;
    if (!archs || !items) {
        rc = 1;
        goto out;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            continue;
        if (!strcmp(argv[i], "--arch")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cuabi cache warm: --arch needs a value\n");
                rc = 2;
                goto out;
            }
            archs[na++] = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--jobs") || !strcmp(argv[i], "-j")) {
            char *end = NULL;
            long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || n < 1 || n > 1024) {
                fprintf(stderr, "cuabi cache warm: %s needs a number of compiles at once "
                                "(1 to 1024)\n", argv[i]);
                rc = 2;
                goto out;
            }
            jobs = (int)n;
            i++;
            continue;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "cuabi cache warm: unknown option %s\n", argv[i]);
            rc = 2;
            goto out;
        }
        nfiles++;
        if (is_manifest(argv[i]))
            manifest = argv[i];
    }
    if (manifest && nfiles > 1) {
        fprintf(stderr, "cuabi cache warm: give one manifest (%s) or source files, not both\n",
                manifest);
        rc = 2;
        goto out;
    }
    if (manifest) {
        rc = warm_manifest(manifest, archs, na, jobs, json);
        goto out;
    }
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-') {
            i += !strcmp(argv[i], "--arch") || !strcmp(argv[i], "--jobs") || !strcmp(argv[i], "-j");
            continue;
        }
        char why[256] = "empty";
        char *text = cli_read_file(argv[i], NULL, why, sizeof why);
        if (!text || !*text) {
            fprintf(stderr, "cuabi cache warm: cannot read %s: %s\n", argv[i], why);
            free(text);
            rc = 1;
            goto out;
        }
        cuabi_precompile_item it = CUABI_PRECOMPILE_ITEM_INIT;
        size_t len = strlen(argv[i]);
        it.type = len > 4 && !strcmp(argv[i] + len - 4, ".ptx") ? CUABI_CODE_PTX
                                                               : CUABI_CODE_CUDA_CXX;
        it.source = text;
        it.name = argv[i];
        items[ni++] = it;
    }
    if (!ni) {
        fprintf(stderr, "cuabi cache warm: no FILE or MANIFEST.toml given\n");
        rc = 2;
        goto out;
    }
    cli_json j = { .out = stdout };
    warm_state w = { .bar = ni * (na ? na : 1) > 1 && !json, .json = json, .j = &j };
    begin_results(&w);
    cuabi_status st = cuabi_cache_precompile(items, ni, na ? archs : NULL, na, on_progress, &w);
    if (st != CUABI_SUCCESS && !w.failed && json) {
        warm_outcome(&w, "", "", -1, st, -1, cuabi_last_error()->message, "");
        rc = end_results(&w, st, 1);
    } else {
        rc = end_results(&w, st, 0);
    }
out:
    for (size_t i = 0; i < ni; i++)
        free((char *)items[i].source);
    free(items);
    free(archs);
    return rc;
}

typedef struct verify_state {
    cli_json *j;
} verify_state;

static int on_damaged(const char *path, const char *problem, void *payload)
{
    verify_state *v = payload;
    if (v->j) {
        json_begin_object(v->j, NULL);
        json_string(v->j, "path", path);
        json_string(v->j, "problem", problem);
        json_end_object(v->j);
    } else {
        printf("removed %s: %s\n", path, problem);
    }
    return 0;
}

/* cuabi cache verify */
static int verify(bool json)
{
    cli_json j = { .out = stdout };
    verify_state v = { json ? &j : NULL };
    if (json) {
        json_begin_object(&j, NULL);
        json_begin_array(&j, "removed");
    }
    cuabi_cache_verify_report r = CUABI_CACHE_VERIFY_REPORT_INIT;
    cuabi_status st = cuabi_cache_verify(&r, on_damaged, &v);
    if (json) {
        json_end_array(&j);
        json_int(&j, "checked", (long long)r.checked);
        json_int(&j, "removed_count", (long long)r.removed);
        json_int(&j, "bytes_removed", (long long)r.bytes_removed);
        json_int(&j, "kept", (long long)r.kept);
        if (st != CUABI_SUCCESS)
            json_string(&j, "error", cuabi_last_error()->message);
        json_end_object(&j);
        fputc('\n', stdout);
    } else if (st == CUABI_SUCCESS) {
        printf("%llu entr%s checked, %llu damaged removed (%llu bytes)",
               (unsigned long long)r.checked, r.checked == 1 ? "y" : "ies",
               (unsigned long long)r.removed, (unsigned long long)r.bytes_removed);
        if (r.kept)
            printf(", %llu of another cuabi version kept", (unsigned long long)r.kept);
        printf("\n");
    }
    return st == CUABI_SUCCESS ? 0 : json ? 1 : cli_fail("cache", st);
}

int cli_cache(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    bool json = false, memory = false, disk = false;
    for (int i = 2; i < argc; i++) {
        json |= !strcmp(argv[i], "--json");
        memory |= !strcmp(argv[i], "--memory");
        disk |= !strcmp(argv[i], "--disk");
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "stats"))
        return stats(json);
    if (!strcmp(sub, "list"))
        return list(json);
    if (!strcmp(sub, "clear")) {
        unsigned flags = memory || disk ? (memory ? CUABI_CACHE_CLEAR_MEMORY : 0) |
                                              (disk ? CUABI_CACHE_CLEAR_DISK : 0)
                                        : CUABI_CACHE_CLEAR_ALL;
        cuabi_status st = cuabi_cache_clear(flags);
        if (st != CUABI_SUCCESS)
            return cli_fail("cache", st);
        if (json)
            printf("{\"cleared\": true}\n");
        else
            printf("cleared\n");
        return 0;
    }
    if (!strcmp(sub, "warm"))
        return warm(argc, argv, json);
    if (!strcmp(sub, "verify"))
        return verify(json);
    fprintf(stderr, "cuabi cache: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
