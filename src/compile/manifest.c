/* Precompile manifests: see manifest.h and docs/compile-cache.md.
 *
 * The TOML tree (src/util/toml.c) is read into one cuabi__manifest_source per
 * [[source]] table. Top-level keys are defaults for every source: a
 * source's own value replaces a default, except `defines`, `include_paths`
 * and `options`, which add to it, and [[header]] tables, which every source
 * gets before its own [[source.header]] ones. Strings are borrowed from the
 * parsed document; everything else is allocated in blocks freed together.
 * Unless the caller allows more, everything a manifest makes the library
 * read — its files, include paths, path-taking options and what its CUDA
 * C++ sources #include — lies in the manifest's own tree, symbolic links
 * resolved, and files read as sources or headers are UTF-8 text (issue 29:
 * a manifest may come from a repository nobody has reviewed). */
#include "compile/manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/file.h"
#include "util/includes.h"
#include "compile/program.h"

/* ------------------------------------------------------------- storage */

static void *keep(cuabi__manifest *m, void *block)
{
    if (!block)
        return NULL;
    if (m->num_blocks == m->cap_blocks) {
        size_t cap = m->cap_blocks ? 2 * m->cap_blocks : 32;
        void **b = realloc(m->blocks, cap * sizeof *b);
        if (!b) {
            free(block);
            return NULL;
        }
        m->blocks = b;
        m->cap_blocks = cap;
    }
    return m->blocks[m->num_blocks++] = block;
}

void cuabi__manifest_free(cuabi__manifest *m)
{
    for (size_t i = 0; i < m->num_blocks; i++)
        free(m->blocks[i]);
    free(m->blocks);
    free(m->sources);
    free(m->problems);
    cuabi__toml_free(&m->doc);
    *m = (cuabi__manifest){ 0 };
}

/* Reading state: the manifest, where it lives, and whether memory ran out. */
typedef struct reader {
    cuabi__manifest *m;
    const char *path, *dir;
    bool confine;   /* files must lie in the manifest's tree (not allow_outside) */
    char *root;     /* that tree: `dir`, symbolic links resolved (NULL: unknown, nothing is in it) */
    bool oom;
    bool quiet;     /* reading something a second time: its problems are known */
} reader;

static void problem(reader *r, int line, cuabi_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(reader *r, int line, cuabi_status status, const char *fmt, ...)
{
    cuabi__manifest *m = r->m;
    if (r->quiet)
        return;
    cuabi__manifest_problem *p = realloc(m->problems, (m->num_problems + 1) * sizeof *p);
    if (!p) {
        r->oom = true;
        return;
    }
    m->problems = p;
    p += m->num_problems++;
    p->line = line;
    p->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof p->message, fmt, ap);
    va_end(ap);
}

/* A path from the manifest: relative ones are relative to its directory. */
static char *resolve_path(reader *r, const char *file)
{
    char *out;
    if (file[0] == '/' || !strcmp(r->dir, "."))
        out = strdup(file);
    else if (asprintf(&out, "%s/%s", r->dir, file) < 0)
        out = NULL;
    if (!keep(r->m, out))
        r->oom = true;
    return out;
}

/* --------------------------------------------------------- confinement */

/* Whether `path` (relative to the working directory, as it will be opened)
 * lies in the manifest's tree once every symbolic link is resolved: 1 in
 * it (or not confined), 0 outside, -1 it cannot be resolved (errno: it does
 * not exist, ...). *canon (when asked, and 1 returned while confined) is
 * the resolved path, to open instead: free() it. */
static int in_tree(const reader *r, const char *path, char **canon)
{
    if (canon)
        *canon = NULL;
    if (!r->confine)
        return 1;
    char *c = realpath(path, NULL);
    if (!c)
        return -1;
    size_t n = r->root ? strlen(r->root) : 0;
    bool in = r->root && (!strcmp(r->root, "/") ||
                          (!strncmp(c, r->root, n) && (c[n] == '/' || c[n] == '\0')));
    if (in && canon)
        *canon = c;
    else
        free(c);
    return in;
}

static const char outside_hint[] =
    "a manifest reads only its own directory tree (symbolic links resolved) unless the caller "
    "allows more: cuabi cache warm --allow-outside, cuabi_warm_options.allow_outside";

/* Read a file the manifest names (`path`: resolved against its directory)
 * for `what` ("source", "header"): in its tree unless allowed otherwise —
 * resolved first, then that resolved path opened without following a link
 * — a regular file of at most CUABI__FILE_MAX (util/file.h). false after a
 * problem on the file's line. */
static bool read_named(reader *r, const cuabi__toml_value *file, const char *what,
                       const char *path, void **data, size_t *size)
{
    char *canon;
    int in = in_tree(r, path, &canon);
    if (in == 0) {
        problem(r, file->line, CUABI_ERROR_INVALID_ARGUMENT, "%s \"%s\" lies outside the "
                "manifest's directory %s: refused; %s", what, file->str,
                r->root ? r->root : r->dir, outside_hint);
        return false;
    }
    if (in < 0) {
        problem(r, file->line, CUABI_ERROR_IO, "cannot open '%s': %s", path, strerror(errno));
        return false;
    }
    cuabi_status st = cuabi__read_file_max(canon ? canon : path, canon ? CUABI__FILE_NOFOLLOW : 0,
                                           CUABI__FILE_MAX, data, size, what);
    free(canon);
    if (st != CUABI_SUCCESS) {
        const char *msg = cuabi_last_error()->message;
        size_t skip = strlen(what) + 2; /* "source: " */
        problem(r, file->line, st, "%s", strlen(msg) >= skip ? msg + skip : msg);
        cuabi_error_clear();
        return false;
    }
    return true;
}

/* A file read as a source or header is text: no NUL byte, valid UTF-8 —
 * else it is refused before any compiler sees it, so that no line of a
 * file that is not what it claims ends up quoted in a compile error.
 * (NVVM bitcode is binary: `binary` skips both checks.) */
static bool is_text(reader *r, int line, const char *what, const char *path, const char *data,
                    size_t size, bool binary)
{
    if (binary)
        return true;
    if (strlen(data) != size) {
        problem(r, line, CUABI_ERROR_INVALID_ARGUMENT, "%s %s holds a NUL byte%s", what, path,
                !strcmp(what, "source") ? " (only NVVM bitcode may: type = \"nvvm\" or a .bc "
                                           "file)" : "");
        return false;
    }
    size_t ok = cuabi__utf8_prefix(data, size);
    if (ok == size)
        return true;
    int bad_line = 1;
    for (size_t i = 0; i < ok; i++)
        bad_line += data[i] == '\n';
    problem(r, line, CUABI_ERROR_INVALID_ARGUMENT, "%s %s is not UTF-8 text (line %d): refused, "
            "so that none of it is quoted in a compile error", what, path, bad_line);
    return false;
}

/* Include paths and the paths of path-taking compiler options in a
 * manifest's `include_paths` / `options` (as the compiler will resolve
 * them, from the working directory): in the manifest's tree unless allowed
 * otherwise. A path that does not exist cannot be read from: let through. */
static bool paths_in_tree(reader *r, const cuabi__toml_value *v, bool options)
{
    if (!r->confine || !v || v->kind != CUABI__TOML_ARRAY)
        return true;
    static const char *const joined[] = { "-I", "--include-path=", "-include=",
                                          "--pre-include=", "--use-pch=", "--pch-dir=",
                                          "--create-pch=" };
    bool ok = true;
    for (size_t i = 0; i < v->count; i++) {
        const cuabi__toml_value *x = v->items[i];
        if (x->kind != CUABI__TOML_STRING)
            continue;
        const char *path = NULL, *opt = x->str;
        if (!options) {
            path = opt;
        } else if ((!strcmp(opt, "-I") || !strcmp(opt, "-include")) && i + 1 < v->count &&
                   v->items[i + 1]->kind == CUABI__TOML_STRING) {
            path = v->items[++i]->str;
            x = v->items[i];
        } else {
            for (size_t j = 0; j < sizeof joined / sizeof joined[0] && !path; j++)
                if (!strncmp(opt, joined[j], strlen(joined[j])) && opt[strlen(joined[j])])
                    path = opt + strlen(joined[j]);
        }
        if (!path)
            continue;
        /* a file to create (a PCH): its directory must be in the tree */
        char *parent = NULL;
        int in = in_tree(r, path, NULL);
        if (in < 0 && options) {
            const char *slash = strrchr(path, '/');
            parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
                           : strdup(".");
            in = parent ? in_tree(r, parent, NULL) : -1;
        }
        free(parent);
        if (in == 0) {
            problem(r, x->line, CUABI_ERROR_INVALID_ARGUMENT, "%s \"%s\" lies outside the "
                    "manifest's directory %s: refused; %s", options ? "the option's path"
                    : "include path", path, r->root ? r->root : r->dir, outside_hint);
            ok = false;
        }
    }
    return ok;
}

/* The include scan's visitor: stop at the first file outside the tree. */
typedef struct outside_visit {
    const reader *r;
    char path[1024];
} outside_visit;

static int visit_outside(const char *path, void *ctx)
{
    outside_visit *v = ctx;
    if (in_tree(v->r, path, NULL) != 0)
        return 0;
    snprintf(v->path, sizeof v->path, "%s", path);
    return 1;
}

/* What a CUDA C++ source can #include (util/includes.h, the scan of the
 * cache key, resolved as NVRTC resolves it): in the manifest's tree unless
 * allowed otherwise, so `#include "/etc/passwd"` or a quoted include next
 * to a `name` elsewhere never reaches the compiler (whose error would
 * quote the file). An include the scan cannot follow is refused too: what
 * it reads cannot be known. */
static bool includes_in_tree(reader *r, const cuabi__manifest_source *src)
{
    if (!r->confine || src->type != CUABI_CODE_CUDA_CXX)
        return true;
    outside_visit v = { .r = r };
    char why[512];
    int result;
    if (cuabi__includes_visit(&result, src->name, src->text, src->size, &src->options,
                              visit_outside, &v, why, sizeof why) != CUABI_SUCCESS) {
        cuabi_error_clear();
        r->oom = true;
        return false;
    }
    if (result == CUABI__INCLUDES_STOPPED)
        problem(r, src->line, CUABI_ERROR_INVALID_ARGUMENT, "%s includes %s, which lies outside "
                "the manifest's directory %s: refused; %s", src->name, v.path,
                r->root ? r->root : r->dir, outside_hint);
    else if (result == CUABI__INCLUDES_UNRESOLVED)
        problem(r, src->line, CUABI_ERROR_INVALID_ARGUMENT, "which files %s includes cannot be "
                "told without compiling (%s), so it is not compiled: %s", src->name, why,
                outside_hint);
    return result != CUABI__INCLUDES_STOPPED && result != CUABI__INCLUDES_UNRESOLVED;
}

/* ------------------------------------------------------------ settings */

/* What a source can say (and the top level as defaults). */
typedef struct settings {
    const cuabi__toml_value *archs, *output, *std, *opt_level, *debug, *line_info, *fast_math,
        *relocatable, *lto, *defines, *include_paths, *options, *type, *libdevice;
} settings;

typedef struct key_spec {
    const char *key;
    size_t offset;               /* into settings, or (size_t)-1 for source-only keys */
} key_spec;

#define S(f) offsetof(settings, f)
static const key_spec option_keys[] = {
    { "archs", S(archs) }, { "output", S(output) }, { "std", S(std) },
    { "opt_level", S(opt_level) }, { "debug", S(debug) }, { "line_info", S(line_info) },
    { "fast_math", S(fast_math) }, { "relocatable", S(relocatable) }, { "lto", S(lto) },
    { "defines", S(defines) }, { "include_paths", S(include_paths) },
    { "options", S(options) }, { "type", S(type) }, { "libdevice", S(libdevice) },
};
#undef S
static const char *const source_only[] = { "file", "code", "name", "name_expressions",
                                           "header" };
static const char known_keys[] =
    "archs, output, std, opt_level, debug, line_info, fast_math, relocatable, lto, defines, "
    "include_paths, options, type, libdevice; in [[source]] also file, code, name, name_expressions, "
    "[[source.header]]; at the top also [[header]], [[source]]";

/* Sort a table's keys into `s`; report the unknown ones. */
static void gather(reader *r, const cuabi__toml_value *t, settings *s, bool in_source,
                   const char *where)
{
    for (size_t i = 0; i < t->count; i++) {
        const char *k = t->keys[i];
        bool known = false;
        for (size_t j = 0; j < sizeof option_keys / sizeof option_keys[0] && !known; j++)
            if (!strcmp(k, option_keys[j].key)) {
                *(const cuabi__toml_value **)((char *)s + option_keys[j].offset) = t->items[i];
                known = true;
            }
        for (size_t j = 0; j < sizeof source_only / sizeof source_only[0] && !known; j++)
            known = !strcmp(k, source_only[j]) && in_source;
        if (!in_source && (!strcmp(k, "source") || !strcmp(k, "header")))
            known = true;
        if (!known && !in_source && !strcmp(k, "name_expressions"))
            problem(r, t->items[i]->line, CUABI_ERROR_INVALID_ARGUMENT,
                    "name_expressions belong to a [[source]], not to the top level");
        else if (!known)
            problem(r, t->items[i]->line, CUABI_ERROR_INVALID_ARGUMENT,
                    "unknown key \"%s\" in %s (known: %s)", k, where, known_keys);
    }
}

/* A `name` (of a source or a header) is text the compiler and every log
 * show: valid UTF-8 without a NUL byte, or a problem (once: the TOML reader
 * has reported invalid UTF-8 on its line already, when it could). */
static bool good_name(reader *r, const cuabi__toml_value *name)
{
    bool nul = strlen(name->str) != name->len;
    if (!nul && cuabi__utf8_valid(name->str, name->len))
        return true;
    bool told = false;
    for (size_t i = 0; i < r->m->doc.num_errors && !told; i++)
        told = r->m->doc.errors[i].line == name->line;
    if (!told)
        problem(r, name->line, CUABI_ERROR_INVALID_ARGUMENT, "\"name\" %s",
                nul ? "holds a NUL byte" : "is not valid UTF-8");
    return false;
}

static bool is_kind(reader *r, const cuabi__toml_value *v, const char *key,
                    cuabi__toml_kind kind)
{
    if (v->kind == kind)
        return true;
    problem(r, v->line, CUABI_ERROR_INVALID_ARGUMENT, "\"%s\" must be %s, not %s", key,
            cuabi__toml_kind_name(kind), cuabi__toml_kind_name(v->kind));
    return false;
}

/* A string or an array of strings into (*list, *n), after `*n` already there
 * (so lists add up); false after a problem. */
static bool strings(reader *r, const cuabi__toml_value *v, const char *key, bool one_allowed,
                    const char ***list, size_t *n)
{
    if (!v)
        return true;
    size_t count = v->kind == CUABI__TOML_ARRAY ? v->count : 1;
    if (v->kind != CUABI__TOML_ARRAY && !(one_allowed && v->kind == CUABI__TOML_STRING)) {
        problem(r, v->line, CUABI_ERROR_INVALID_ARGUMENT, "\"%s\" must be %san array of "
                "strings, not %s", key, one_allowed ? "a string or " : "",
                cuabi__toml_kind_name(v->kind));
        return false;
    }
    for (size_t i = 0; v->kind == CUABI__TOML_ARRAY && i < count; i++)
        if (v->items[i]->kind != CUABI__TOML_STRING || !v->items[i]->len) {
            problem(r, v->items[i]->line, CUABI_ERROR_INVALID_ARGUMENT, "\"%s\"[%zu] must be "
                    "a non-empty string, not %s", key, i,
                    v->items[i]->kind == CUABI__TOML_STRING
                        ? "\"\"" : cuabi__toml_kind_name(v->items[i]->kind));
            return false;
        }
    const char **out = keep(r->m, malloc((*n + count + 1) * sizeof *out));
    if (!out) {
        r->oom = true;
        return false;
    }
    for (size_t i = 0; i < *n; i++)
        out[i] = (*list)[i];
    for (size_t i = 0; i < count; i++)
        out[*n + i] = v->kind == CUABI__TOML_ARRAY ? v->items[i]->str : v->str;
    *list = out;
    *n += count;
    return true;
}

static bool flag(reader *r, const cuabi__toml_value *v, const char *key, int *out)
{
    if (!v)
        return true;
    if (!is_kind(r, v, key, CUABI__TOML_BOOLEAN))
        return false;
    *out = v->boolean;
    return true;
}

/* A string among `names` into *out (the matching value). */
static bool choice(reader *r, const cuabi__toml_value *v, const char *key,
                   const char *const *names, const int *values, int *out)
{
    if (!v)
        return true;
    if (!is_kind(r, v, key, CUABI__TOML_STRING))
        return false;
    char list[256] = "";
    for (size_t i = 0, len = 0; names[i]; i++) {
        if (!strcmp(v->str, names[i])) {
            *out = values[i];
            return true;
        }
        len += (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"", i ? ", " : "",
                                names[i]);
    }
    problem(r, v->line, CUABI_ERROR_INVALID_ARGUMENT, "\"%s\" is \"%s\"; use one of %s", key,
            v->str, list);
    return false;
}

/* Lay the settings `s` over a source's options (a source's own over the
 * top level's, which are over the defaults). */
static bool apply(reader *r, const settings *s, cuabi__manifest_source *src)
{
    static const char *const outputs[] = { "cubin", "ptx", "ltoir", "fatbin", NULL };
    static const int output_values[] = { CUABI_CODE_CUBIN, CUABI_CODE_PTX, CUABI_CODE_LTOIR,
                                         CUABI_CODE_FATBIN };
    static const char *const types[] = { "cuda", "c++", "ptx", "nvvm", NULL };
    static const int type_values[] = { CUABI_CODE_CUDA_CXX, CUABI_CODE_CUDA_CXX, CUABI_CODE_PTX,
                                       CUABI_CODE_NVVM };
    cuabi_program_options *o = &src->options;
    bool ok = true;
    int out = (int)o->output, type = (int)src->type;
    ok &= choice(r, s->output, "output", outputs, output_values, &out);
    ok &= choice(r, s->type, "type", types, type_values, &type);
    o->output = (cuabi_code_type)out;
    src->type = (cuabi_code_type)type;
    if (s->std && !is_kind(r, s->std, "std", CUABI__TOML_STRING))
        ok = false;
    else if (s->std)
        o->std = s->std->str;
    if (s->opt_level && !is_kind(r, s->opt_level, "opt_level", CUABI__TOML_INTEGER)) {
        ok = false;
    } else if (s->opt_level) {
        if (s->opt_level->integer < 0 || s->opt_level->integer > 3) {
            problem(r, s->opt_level->line, CUABI_ERROR_INVALID_ARGUMENT,
                    "\"opt_level\" is %lld; use 0 to 3", (long long)s->opt_level->integer);
            ok = false;
        } else {
            o->opt_level = (int)s->opt_level->integer;
        }
    }
    ok &= flag(r, s->debug, "debug", &o->debug) & flag(r, s->line_info, "line_info", &o->line_info) &
          flag(r, s->fast_math, "fast_math", &o->fast_math) &
          flag(r, s->relocatable, "relocatable", &o->relocatable) & flag(r, s->lto, "lto", &o->lto) &
          flag(r, s->libdevice, "libdevice", &o->libdevice);
    ok &= strings(r, s->defines, "defines", false, &o->defines, &o->num_defines);
    ok &= strings(r, s->include_paths, "include_paths", false, &o->include_paths,
                  &o->num_include_paths) && paths_in_tree(r, s->include_paths, false);
    ok &= strings(r, s->options, "options", false, &o->extra_options, &o->num_extra_options) &&
          paths_in_tree(r, s->options, true);
    if (s->archs) { /* replaces */
        src->archs = NULL;
        src->num_archs = 0;
        src->archs_line = s->archs->line;
        ok &= strings(r, s->archs, "archs", true, &src->archs, &src->num_archs);
        for (size_t i = 0; ok && i < src->num_archs; i++) {
            bool virt;
            if (cuabi__check_arch(src->archs[i], &virt, "archs") != CUABI_SUCCESS) {
                problem(r, src->archs_line, CUABI_ERROR_INVALID_ARGUMENT, "%s",
                        cuabi_last_error()->message);
                cuabi_error_clear();
                ok = false;
            }
        }
    }
    return ok;
}

/* ------------------------------------------------------------- headers */

/* Append the [[header]] tables of `list` to the source's in-memory headers. */
static bool headers(reader *r, const cuabi__toml_value *list, cuabi__manifest_source *src,
                    const char *where)
{
    if (!list)
        return true;
    if (list->kind != CUABI__TOML_ARRAY || !list->of_tables) {
        problem(r, list->line, CUABI_ERROR_INVALID_ARGUMENT, "\"header\" must be written as "
                "[[%s]] tables (name = ..., then file = ... or code = ...)", where);
        return false;
    }
    cuabi_program_options *o = &src->options;
    size_t n = o->num_headers + list->count;
    const char **names = keep(r->m, malloc(n * sizeof *names));
    const char **texts = keep(r->m, malloc(n * sizeof *texts));
    if (!names || !texts) {
        r->oom = true;
        return false;
    }
    for (size_t i = 0; i < o->num_headers; i++) {
        names[i] = o->header_names[i];
        texts[i] = o->header_contents[i];
    }
    bool ok = true;
    for (size_t i = 0; i < list->count; i++) {
        const cuabi__toml_value *h = list->items[i];
        const cuabi__toml_value *name = cuabi__toml_get(h, "name"),
                                *file = cuabi__toml_get(h, "file"),
                                *code = cuabi__toml_get(h, "code");
        for (size_t k = 0; k < h->count; k++)
            if (strcmp(h->keys[k], "name") && strcmp(h->keys[k], "file") &&
                strcmp(h->keys[k], "code")) {
                problem(r, h->items[k]->line, CUABI_ERROR_INVALID_ARGUMENT, "unknown key "
                        "\"%s\" in [[%s]] (known: name, file, code)", h->keys[k], where);
                ok = false;
            }
        if (!name || !is_kind(r, name, "name", CUABI__TOML_STRING) || !name->len ||
            (!file == !code)) {
            if (!name || name->kind == CUABI__TOML_STRING)
                problem(r, h->line, CUABI_ERROR_INVALID_ARGUMENT, "[[%s]] needs a name and "
                        "either file or code", where);
            ok = false;
            continue;
        }
        if (!good_name(r, name)) {
            ok = false;
            continue;
        }
        if (h->damaged) /* a TOML error in it (reported already): read on, use none of it */
            ok = false;
        names[o->num_headers] = name->str;
        if (code) {
            if (!is_kind(r, code, "code", CUABI__TOML_STRING)) {
                ok = false;
                continue;
            }
            texts[o->num_headers++] = code->str;
            continue;
        }
        if (!is_kind(r, file, "file", CUABI__TOML_STRING)) {
            ok = false;
            continue;
        }
        const char *path = resolve_path(r, file->str);
        void *data = NULL;
        size_t size;
        if (!path || !read_named(r, file, "header", path, &data, &size)) {
            ok = false;
            continue;
        }
        if (!is_text(r, file->line, "header", path, data, size, false)) {
            cuabi__free(data);
            ok = false;
            continue;
        }
        char *copy = keep(r->m, strdup(data));
        cuabi__free(data);
        if (!copy) {
            r->oom = true;
            return false;
        }
        texts[o->num_headers++] = copy;
    }
    o->header_names = names;
    o->header_contents = texts;
    return ok;
}

/* ------------------------------------------------------------- sources */

/* The code type a file's extension names: .ptx PTX, .ll (text) and .bc
 * (bitcode) NVVM IR; CUABI_CODE_NONE for any other. */
static cuabi_code_type type_of_file(const cuabi__toml_value *file)
{
    static const struct { const char *ext; cuabi_code_type type; } exts[] = {
        { ".ptx", CUABI_CODE_PTX }, { ".ll", CUABI_CODE_NVVM }, { ".bc", CUABI_CODE_NVVM },
    };
    if (file->kind != CUABI__TOML_STRING)
        return CUABI_CODE_NONE;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t n = strlen(exts[i].ext);
        if (file->len > n && !strcmp(file->str + file->len - n, exts[i].ext))
            return exts[i].type;
    }
    return CUABI_CODE_NONE;
}

static bool source_text(reader *r, const cuabi__toml_value *t, cuabi__manifest_source *src)
{
    const cuabi__toml_value *file = cuabi__toml_get(t, "file"), *code = cuabi__toml_get(t, "code"),
                            *name = cuabi__toml_get(t, "name");
    if (!file == !code) {
        problem(r, t->line, CUABI_ERROR_INVALID_ARGUMENT, "a [[source]] needs either file = "
                "\"path\" or code = \"\"\"...\"\"\"%s", file ? ", not both" : "");
        return false;
    }
    if (name && (!is_kind(r, name, "name", CUABI__TOML_STRING) || !name->len ||
                 !good_name(r, name)))
        return false;
    if (code) {
        if (!is_kind(r, code, "code", CUABI__TOML_STRING))
            return false;
        if (!code->len) {
            problem(r, code->line, CUABI_ERROR_INVALID_ARGUMENT, "\"code\" is empty");
            return false;
        }
        src->text = code->str;
        src->size = code->len;
        src->name = name ? name->str
                    : src->type == CUABI_CODE_PTX  ? "program.ptx"
                    : src->type == CUABI_CODE_NVVM ? "program.ll"
                                                   : "program.cu";
        return true;
    }
    if (!is_kind(r, file, "file", CUABI__TOML_STRING))
        return false;
    const char *path = resolve_path(r, file->str);
    void *data = NULL;
    size_t size;
    if (!path || !read_named(r, file, "source", path, &data, &size))
        return false;
    if (src->type == CUABI_CODE_NONE) /* no type given: the file's extension says */
        src->type = type_of_file(file);
    /* NVVM IR may be bitcode, which is binary; every other kind is text */
    bool binary = src->type == CUABI_CODE_NVVM && size >= 4 &&
                  (!memcmp(data, "BC\xc0\xde", 4) || !memcmp(data, "\xde\xc0\x17\x0b", 4) ||
                   strlen(data) != size);
    if (!size)
        problem(r, file->line, CUABI_ERROR_INVALID_ARGUMENT, "source %s is empty", path);
    if (!size || !is_text(r, file->line, "source", path, data, size, binary)) {
        cuabi__free(data);
        return false;
    }
    char *copy = keep(r->m, malloc(size + 1));
    if (copy) {
        memcpy(copy, data, size);
        copy[size] = '\0';
    }
    cuabi__free(data);
    if (!copy) {
        r->oom = true;
        return false;
    }
    src->text = copy;
    src->size = size;
    src->name = name ? name->str : path;
    return true;
}

/* The code type a type = "..." value names (C++ for anything else: apply()
 * reports a bad one). */
static cuabi_code_type type_named(const cuabi__toml_value *type)
{
    if (type->kind != CUABI__TOML_STRING)
        return CUABI_CODE_CUDA_CXX;
    return !strcmp(type->str, "ptx") ? CUABI_CODE_PTX
           : !strcmp(type->str, "nvvm") ? CUABI_CODE_NVVM : CUABI_CODE_CUDA_CXX;
}

/* What a [[source]] is: its type, else the top level's (a default, like
 * every top-level value), else its file's extension, else CUDA C++ — the
 * order in which read_source settles the source's type, so the defaults
 * chosen here are those of the type it compiles as. */
static cuabi_code_type kind_of_source(const cuabi__toml_value *t, const settings *top)
{
    const cuabi__toml_value *type = cuabi__toml_get(t, "type"), *file = cuabi__toml_get(t, "file");
    if (!type)
        type = top->type;
    if (type)
        return type_named(type);
    cuabi_code_type by_file = file ? type_of_file(file) : CUABI_CODE_NONE;
    return by_file != CUABI_CODE_NONE ? by_file : CUABI_CODE_CUDA_CXX;
}

/* A [[source]] over `base` (the defaults, the top level's settings and
 * headers that apply to its kind of code). */
static void read_source(reader *r, const cuabi__toml_value *t, const cuabi__manifest_source *base)
{
    cuabi__manifest_source src = *base;
    src.line = t->line;
    settings own = { 0 };
    size_t before = r->m->num_problems;
    gather(r, t, &own, true, "[[source]]");
    /* an unknown key is likely a misspelt one; a TOML error in the table
     * (reported already) may have dropped or mangled a value */
    bool ok = r->m->num_problems == before && !t->damaged;
    ok &= apply(r, &own, &src); /* an explicit type before the file's extension */
    ok &= source_text(r, t, &src);
    if (src.type == CUABI_CODE_NONE)
        src.type = CUABI_CODE_CUDA_CXX;
    cuabi_code_type out = src.options.output;
    if (ok && src.type == CUABI_CODE_NVVM && out != CUABI_CODE_PTX && out != CUABI_CODE_LTOIR) {
        problem(r, own.output ? own.output->line : t->line, CUABI_ERROR_INVALID_ARGUMENT,
                "NVVM IR compiles to \"ptx\" (the default) or \"ltoir\", not \"%s\"; a "
                "CUBIN is the PTX compiled again as a PTX source", own.output && own.output->kind ==
                CUABI__TOML_STRING ? own.output->str : "cubin");
        ok = false;
    }
    const cuabi__toml_value *names = cuabi__toml_get(t, "name_expressions");
    ok &= strings(r, names, "name_expressions", false, &src.options.name_expressions,
                  &src.options.num_name_expressions);
    ok &= headers(r, cuabi__toml_get(t, "header"), &src, "source.header");
    if (!ok || r->oom || !includes_in_tree(r, &src))
        return;
    cuabi__manifest *m = r->m;
    cuabi__manifest_source *s = realloc(m->sources, (m->num_sources + 1) * sizeof *s);
    if (!s) {
        r->oom = true;
        return;
    }
    m->sources = s;
    m->sources[m->num_sources++] = src;
}

static const cuabi__manifest_source *base_for(cuabi_code_type type,
                                             const cuabi__manifest_source *cxx,
                                             const cuabi__manifest_source *ptx,
                                             const cuabi__manifest_source *nvvm)
{
    return type == CUABI_CODE_PTX ? ptx : type == CUABI_CODE_NVVM ? nvvm : cxx;
}

cuabi_status cuabi__manifest_read(cuabi__manifest *m, const char *text, size_t size,
                                  const char *path, const char *dir, unsigned flags,
                                  const char *caller)
{
    *m = (cuabi__manifest){ 0 };
    if (cuabi__toml_parse(&m->doc, text, size) != 0)
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of memory reading %s", caller,
                            path);
    bool confine = !(flags & CUABI__MANIFEST_ALLOW_OUTSIDE);
    reader r = { .m = m, .path = path, .dir = dir, .confine = confine,
                 .root = confine ? realpath(dir, NULL) : NULL };
    for (size_t i = 0; i < m->doc.num_errors; i++)
        problem(&r, m->doc.errors[i].line, CUABI_ERROR_INVALID_ARGUMENT, "%s",
                m->doc.errors[i].message);
    /* The top level, read once: its problems are reported once, and then
     * no source is compiled (each would be compiled wrong). */
    static const cuabi_program_options defaults = CUABI_PROGRAM_OPTIONS_INIT;
    cuabi__manifest_source base = { .type = CUABI_CODE_NONE, .options = defaults };
    settings top = { 0 };
    size_t before = m->num_problems;
    gather(&r, m->doc.root, &top, false, "the top level");
    bool base_ok = m->num_problems == before && !m->doc.root->damaged;
    base_ok &= apply(&r, &top, &base);
    base_ok &= headers(&r, cuabi__toml_get(m->doc.root, "header"), &base, "header");
    base.options.libdevice = 0; /* NVVM IR's only */
    /* PTX and NVVM IR sources take only the defaults that apply to them (a
     * top-level std or header is meant for the CUDA C++ ones). */
    cuabi__manifest_source base_ptx = { .type = CUABI_CODE_NONE, .options = defaults };
    settings top_ptx = top;
    top_ptx.std = top_ptx.defines = top_ptx.include_paths = top_ptx.fast_math = NULL;
    top_ptx.relocatable = top_ptx.lto = top_ptx.libdevice = NULL;
    /* NVVM IR: libNVVM makes PTX (the default here) or LTO-IR; a top-level
     * cubin or fatbin output is meant for the others. */
    cuabi__manifest_source base_nvvm = { .type = CUABI_CODE_NONE, .options = defaults };
    base_nvvm.options.output = CUABI_CODE_PTX;
    settings top_nvvm = top;
    top_nvvm.std = top_nvvm.defines = top_nvvm.include_paths = NULL;
    top_nvvm.relocatable = top_nvvm.lto = NULL;
    if (top.output && top.output->kind == CUABI__TOML_STRING && strcmp(top.output->str, "ptx") &&
        strcmp(top.output->str, "ltoir"))
        top_nvvm.output = NULL;
    r.quiet = true;
    apply(&r, &top_ptx, &base_ptx);
    apply(&r, &top_nvvm, &base_nvvm);
    r.quiet = false;
    const cuabi__toml_value *sources = cuabi__toml_get(m->doc.root, "source");
    if (sources && (sources->kind != CUABI__TOML_ARRAY || !sources->of_tables))
        problem(&r, sources->line, CUABI_ERROR_INVALID_ARGUMENT, "\"source\" must be written "
                "as [[source]] tables");
    else if (!sources && !m->doc.num_errors)
        problem(&r, 0, CUABI_ERROR_INVALID_ARGUMENT, "%s lists no [[source]]", path);
    for (size_t i = 0; base_ok && sources && sources->of_tables && i < sources->count && !r.oom;
         i++)
        read_source(&r, sources->items[i], base_for(kind_of_source(sources->items[i], &top),
                                                    &base, &base_ptx, &base_nvvm));
    free(r.root);
    if (r.oom) {
        cuabi__manifest_free(m);
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of memory reading %s", caller,
                            path);
    }
    return CUABI_SUCCESS;
}

cuabi_status cuabi__manifest_load(cuabi__manifest *m, const char *path, unsigned flags,
                                  const char *caller)
{
    *m = (cuabi__manifest){ 0 };
    void *text;
    size_t size;
    CUABI__TRY(cuabi__read_file(path, &text, &size, caller));
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    cuabi_status st = dir ? cuabi__manifest_read(m, text, size, path, dir, flags, caller)
                          : cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    free(dir);
    cuabi__free(text);
    return st;
}
