/* cuabi cache: show, list, clear or warm the compile cache. */
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
            "       cuabi cache warm FILE... [--arch sm_XX]... [--json]\n\n"
            "The compile cache shared by every cuabi binding: $CUABI_CACHE_DIR, else\n"
            "$XDG_CACHE_HOME/cuabi, else ~/.cache/cuabi. CUABI_CACHE=0 turns it off.\n"
            "warm compiles each FILE (CUDA C++, or PTX if it ends in .ptx) for each --arch\n"
            "(default: the current GPU's, or sm_90) into the cache, showing a progress bar\n"
            "on stderr when there is more than one compile.\n");
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
        json_string(j, "path", e->path);
        json_end_object(j);
    } else {
        char when[32];
        time_t t = (time_t)e->last_used;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
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

typedef struct warm_state {
    bool bar;
    bool json;
    cli_json *j;
    size_t failed;
} warm_state;

static int on_progress(size_t done, size_t total, const char *name, const char *arch,
                       cuabi_status status, int hit, void *payload)
{
    warm_state *w = payload;
    if (status != CUABI_SUCCESS) {
        w->failed++;
        if (w->bar)
            fputc('\n', stderr);
        fprintf(stderr, "cuabi cache warm: %s (%s): %s\n", name, arch,
                cuabi_last_error()->message);
    }
    if (w->json) {
        json_begin_object(w->j, NULL);
        json_string(w->j, "file", name);
        json_string(w->j, "arch", arch);
        json_string(w->j, "status", cuabi_status_name(status));
        json_string(w->j, "source", hit == 1 ? "memory cache" : hit == 2 ? "disk cache"
                                                                         : "compiled");
        json_end_object(w->j);
    }
    if (w->bar) {
        enum { WIDTH = 30 };
        size_t fill = done * WIDTH / total;
        fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-40.40s", (int)fill,
                "##############################", (int)(WIDTH - fill), "", done, total, name);
        if (done == total)
            fputc('\n', stderr);
        fflush(stderr);
    }
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

static int warm(int argc, char **argv, bool json)
{
    const char **archs = calloc((size_t)argc, sizeof *archs);
    cuabi_precompile_item *items = calloc((size_t)argc, sizeof *items);
    size_t na = 0, ni = 0;
    int rc = 0;
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
        if (argv[i][0] == '-') {
            fprintf(stderr, "cuabi cache warm: unknown option %s\n", argv[i]);
            rc = 2;
            goto out;
        }
        char *text = slurp(argv[i]);
        if (!text || !*text) {
            fprintf(stderr, "cuabi cache warm: cannot read %s%s\n", argv[i],
                    text ? " (empty)" : "");
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
        fprintf(stderr, "cuabi cache warm: no FILE given\n");
        rc = 2;
        goto out;
    }
    cli_json j = { .out = stdout };
    warm_state w = { .bar = ni * (na ? na : 1) > 1 && !json, .json = json, .j = &j };
    if (json)
        json_begin_array(&j, NULL);
    cuabi_status st = cuabi_cache_precompile(items, ni, na ? archs : NULL, na, on_progress, &w);
    if (json) {
        json_end_array(&j);
        fputc('\n', stdout);
    } else if (st == CUABI_SUCCESS) {
        printf("warmed %zu compile%s\n", ni * (na ? na : 1), ni * (na ? na : 1) > 1 ? "s" : "");
    }
    rc = st == CUABI_SUCCESS ? 0 : 1;
    if (st != CUABI_SUCCESS && !w.failed)
        cli_fail("cache", st);
out:
    for (size_t i = 0; i < ni; i++)
        free((char *)items[i].source);
    free(items);
    free(archs);
    return rc;
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
    fprintf(stderr, "cuabi cache: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
