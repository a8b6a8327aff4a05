/* The linker: one nvJitLink session per handle (the one-input link behind
 * the objcode's offline queries is jitlink.c's).
 *
 * Links go through the compile cache (src/compile/cache.c) when it is enabled: the
 * options and inputs are then only kept until cuabi_linker_complete, which
 * looks the link up by a key over nvJitLink's identity (libident.h: known
 * without loading it), the options (the arch among them), the output kind
 * and every input's kind, name and bytes. A hit returns the recorded output
 * and logs without loading nvJitLink (issue 13); a miss opens the session
 * then, feeds it the kept inputs and stores the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/cache.h"
#include "compile/code_type.h"
#include "compile/fatbin.h"
#include "compile/jitlink.h"
#include "platform/libident.h"
#include "compile/objcode.h"
#include "util/file.h"

/* An input kept for a PTX-output relink or a cache miss (see cuabi_linker_complete). */
typedef struct kept_input {
    nvJitLinkInputType type;
    void *data;
    size_t size;
    char *name;
} kept_input;

typedef struct cuabi__linker {
    cuabi__object base;
    nvJitLinkHandle h;               /* NULL until a session is open */
    const cuabi__nvjitlink *nvj;     /* NULL until nvJitLink is needed */
    char arch[16];
    char archs[128];                 /* a fatbin's list ("sm_80,sm_90"), else = arch */
    bool completed;
    size_t inputs;
    char *info_log, *error_log;      /* refreshed by the log getters; a hit's as recorded */
    /* nvJitLink emits PTX only when created with -ptx, but the output kind
     * is chosen at completion: with -lto the options and inputs are kept,
     * and a PTX completion relinks them in a second session. */
    bool keep, lto;
    /* Through the cache: options and inputs kept (keep is set too), and no
     * session before completion. */
    bool cached;
    int hit;                         /* 0 linked here, 1 memory hit, 2 disk hit */
    char **opts;
    size_t nopts;
    kept_input *kept;
} cuabi__linker;

static cuabi_status input_type(nvJitLinkInputType *out, cuabi_code_type type,
                               const void *data, size_t size, const char *caller)
{
    if (type == CUABI_CODE_NONE && data)
        type = cuabi__code_detect(data, size);
    switch (type) {
    case CUABI_CODE_CUBIN: *out = NVJITLINK_INPUT_CUBIN; return CUABI_SUCCESS;
    case CUABI_CODE_PTX: *out = NVJITLINK_INPUT_PTX; return CUABI_SUCCESS;
    case CUABI_CODE_LTOIR: *out = NVJITLINK_INPUT_LTOIR; return CUABI_SUCCESS;
    case CUABI_CODE_FATBIN: *out = NVJITLINK_INPUT_FATBIN; return CUABI_SUCCESS;
    case CUABI_CODE_OBJECT: *out = NVJITLINK_INPUT_OBJECT; return CUABI_SUCCESS;
    case CUABI_CODE_LIBRARY: *out = NVJITLINK_INPUT_LIBRARY; return CUABI_SUCCESS;
    case CUABI_CODE_NONE:
        if (!data) {
            *out = NVJITLINK_INPUT_ANY; /* a file: nvJitLink looks at its name */
            return CUABI_SUCCESS;
        }
        return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                            "%s: cannot tell what kind of code the input is; pass its "
                            "cuabi_code_type", caller);
    default:
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: nvJitLink takes CUBIN, PTX, LTO-IR, fatbin, object or library "
                            "inputs, not %s (type %d)", caller, cuabi__code_type_name(type),
                            (int)type);
    }
}

/* ------------------------------------------------------------ options */

typedef struct optlist {
    char *v[32];
    size_t n;
} optlist;

static cuabi_status add_opt(optlist *o, const char *fmt, const char *s, int i)
{
    if (o->n == sizeof o->v / sizeof o->v[0])
        return cuabi__error(CUABI_ERROR_INTERNAL, "cuabi_linker: too many options");
    char buf[64];
    if (s)
        snprintf(buf, sizeof buf, fmt, s);
    else
        snprintf(buf, sizeof buf, fmt, i);
    if (!(o->v[o->n] = cuabi__strdup(buf)))
        return CUABI_ERROR_OUT_OF_MEMORY;
    o->n++;
    return CUABI_SUCCESS;
}

static void free_opts(optlist *o)
{
    for (size_t i = 0; i < o->n; i++)
        cuabi__free(o->v[i]);
}

static cuabi_status check_tristate(int v, const char *name, const char *caller)
{
    if (v < -1 || v > 1)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: options->%s is %d; use -1 (default), 0 or 1", caller, name, v);
    return CUABI_SUCCESS;
}

static cuabi_status build_opts(optlist *o, const cuabi_linker_options *opt, const char *arch,
                               const char *caller)
{
    static const struct { const char *name, *flag; size_t off; } tri[] = {
        { "ftz", "-ftz=%d", offsetof(cuabi_linker_options, ftz) },
        { "prec_div", "-prec-div=%d", offsetof(cuabi_linker_options, prec_div) },
        { "prec_sqrt", "-prec-sqrt=%d", offsetof(cuabi_linker_options, prec_sqrt) },
        { "fma", "-fma=%d", offsetof(cuabi_linker_options, fma) },
    };
    CUABI__CHECK_ARG(opt->optimization >= -1 && opt->optimization <= 3,
                     "%s: options->optimization is %d; use -1 (default) or 0..3", caller,
                     opt->optimization);
    CUABI__CHECK_ARG(opt->max_registers >= 0 && opt->max_registers <= 255,
                     "%s: options->max_registers is %d; use 0 (no limit) or 1..255", caller,
                     opt->max_registers);
    CUABI__CHECK_ARG(opt->extra_option_count == 0 || opt->extra_options,
                     "%s: options->extra_options is NULL but extra_option_count is %zu", caller,
                     opt->extra_option_count);
    CUABI__TRY(add_opt(o, "-arch=%s", arch, 0));
    if (opt->lto)
        CUABI__TRY(add_opt(o, "-lto", NULL, 0));
    if (opt->optimization >= 0)
        CUABI__TRY(add_opt(o, "-O%d", NULL, opt->optimization));
    if (opt->debug)
        CUABI__TRY(add_opt(o, "-g", NULL, 0));
    if (opt->line_info)
        CUABI__TRY(add_opt(o, "-lineinfo", NULL, 0));
    for (size_t i = 0; i < sizeof tri / sizeof tri[0]; i++) {
        int v = *(const int *)((const char *)opt + tri[i].off);
        CUABI__TRY(check_tristate(v, tri[i].name, caller));
        if (v >= 0)
            CUABI__TRY(add_opt(o, tri[i].flag, NULL, v));
    }
    if (opt->max_registers > 0)
        CUABI__TRY(add_opt(o, "-maxrregcount=%d", NULL, opt->max_registers));
    if (opt->verbose)
        CUABI__TRY(add_opt(o, "-verbose", NULL, 0));
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ public API */

static void free_linker(cuabi__linker *l)
{
    if (l->h)
        l->nvj->nvJitLinkDestroy(&l->h);
    for (size_t i = 0; l->kept && i < l->inputs; i++) {
        cuabi__free(l->kept[i].data);
        cuabi__free(l->kept[i].name);
    }
    cuabi__free(l->kept);
    for (size_t i = 0; l->opts && i < l->nopts; i++)
        cuabi__free(l->opts[i]);
    cuabi__free(l->opts);
    cuabi__free(l->info_log);
    cuabi__free(l->error_log);
    cuabi__free(l);
}

static void linker_destroy(cuabi__object *base)
{
    free_linker((cuabi__linker *)base);
}

/* Keep a copy of the option list for a later relink. */
static cuabi_status keep_opts(cuabi__linker *l, const char **all, size_t n)
{
    l->opts = cuabi__calloc(n + 1, sizeof *l->opts);
    if (!l->opts)
        return CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        if (!(l->opts[i] = cuabi__strdup(all[i])))
            return CUABI_ERROR_OUT_OF_MEMORY;
        l->nopts = i + 1;
    }
    return CUABI_SUCCESS;
}

/* sm_ then two or more digits (no leading zero), optionally a or f:
 * nvJitLink exit()s the whole process on a one-digit arch ("-arch=sm_9"). */
static bool arch_form_ok(const char *a)
{
    size_t n = strlen(a), d = 3;
    if (n >= 16 || strncmp(a, "sm_", 3) != 0 || a[3] < '1' || a[3] > '9')
        return false;
    while (d < n && a[d] >= '0' && a[d] <= '9')
        d++;
    return d - 3 >= 2 && (d == n || (d == n - 1 && (a[d] == 'a' || a[d] == 'f')));
}

static bool arch_form_ok(const char *a);

/* A comma-separated list of such architectures (a fatbin's), at most 32;
 * `first` gets the first. */
static bool arch_list_ok(const char *list, char *first, size_t first_len)
{
    size_t count = 0;
    for (const char *p = list; p; count++) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char one[16];
        if (n >= sizeof one || count >= 32)
            return false;
        memcpy(one, p, n);
        one[n] = '\0';
        if (!arch_form_ok(one))
            return false;
        if (count == 0)
            snprintf(first, first_len, "%s", one);
        p = comma ? comma + 1 : NULL;
    }
    return true;
}

/* The first (or only) architecture of options->arch, checked; the
 * default one when it is NULL. */
static cuabi_status linker_arch(char arch[16], const cuabi_linker_options *options,
                                const char *caller)
{
    bool list = options->arch && strchr(options->arch, ',');
    if (list) {
        CUABI__CHECK_ARG(strlen(options->arch) < 128 &&
                             arch_list_ok(options->arch, arch, 16),
                         "%s: options->arch '%s' is not a list of up to 32 architectures of the "
                         "form sm_XY (e.g. \"sm_80,sm_90\", for a fatbin)", caller,
                         options->arch);
    } else if (options->arch) {
        CUABI__CHECK_ARG(arch_form_ok(options->arch),
                         "%s: options->arch '%s' is not of the form sm_XY (e.g. sm_90)", caller,
                         options->arch);
        snprintf(arch, 16, "%s", options->arch);
    } else {
        cuabi__default_arch(arch, 16);
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_create(cuabi_linker **out,
                                               const cuabi_linker_options *options)
{
    static const cuabi_linker_options defaults = CUABI_LINKER_OPTIONS_INIT;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_OPTS(options, "cuabi_linker_options", CUABI_LINKER_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    /* Version 1 of the options has no cache field: the cache is used. */
    int use_cache = options->version >= 2 ? options->cache : 1;
    CUABI__CHECK_ARG(use_cache == 0 || use_cache == 1, "%s: options->cache is %d; use 0 or 1",
                     __func__, use_cache);
    /* With the cache, nvJitLink is only found here (a hit never loads it);
     * without, it is loaded and the session opened now. */
    bool cached = use_cache && cuabi__cache_enabled();
    const cuabi__nvjitlink *nvj = NULL;
    if (cached) {
        const char *text;
        size_t len;
        CUABI__TRY(cuabi__compiler_ident(&cuabi__compiler_nvjitlink, cuabi__cache_record_dir,
                                         &text, &len, __func__));
    } else {
        CUABI__TRY(cuabi__nvjitlink_get(&nvj));
    }
    char arch[16];
    bool list = options->arch && strchr(options->arch, ',');
    CUABI__TRY(linker_arch(arch, options, __func__));
    optlist o = { .n = 0 };
    cuabi_status st = build_opts(&o, options, arch, __func__);
    size_t nopt = o.n + options->extra_option_count;
    const char **all = st == CUABI_SUCCESS ? cuabi__calloc(nopt, sizeof *all) : NULL;
    if (st == CUABI_SUCCESS && !all)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; st == CUABI_SUCCESS && i < options->extra_option_count; i++)
        if (!options->extra_options[i])
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                              "%s: options->extra_options[%zu] is NULL", __func__, i);
    cuabi__linker *l = NULL;
    if (st == CUABI_SUCCESS) {
        for (size_t i = 0; i < o.n; i++)
            all[i] = o.v[i];
        for (size_t i = 0; i < options->extra_option_count; i++)
            all[o.n + i] = options->extra_options[i];
        l = cuabi__calloc(1, sizeof *l);
        st = l ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
    }
    if (st == CUABI_SUCCESS) {
        l->nvj = nvj;
        l->cached = cached;
        l->lto = options->lto != 0;
        /* Several architectures: the inputs are kept and linked once per
         * architecture at completion (a session checks them as they come
         * when the cache is off). */
        l->keep = cached || l->lto || list;
        snprintf(l->arch, sizeof l->arch, "%s", arch);
        snprintf(l->archs, sizeof l->archs, "%s", list ? options->arch : arch);
        if (l->keep)
            st = keep_opts(l, all, nopt);
    }
    if (st == CUABI_SUCCESS && !cached) {
        nvJitLinkResult r = nvj->nvJitLinkCreate(&l->h, (uint32_t)nopt, all);
        if (r != NVJITLINK_SUCCESS) {
            st = cuabi__jitlink_fail(CUABI_ERROR_INVALID_ARGUMENT, nvj, l->h, r, __func__,
                      "nvJitLinkCreate (check the options)");
            if (l->h)
                nvj->nvJitLinkDestroy(&l->h);
        }
    }
    if (st == CUABI_SUCCESS)
        st = cuabi__handle_register(&l->base, CUABI__T_LINKER, linker_destroy);
    cuabi__free(all);
    free_opts(&o);
    if (st != CUABI_SUCCESS) {
        if (l)
            free_linker(l);
        return st;
    }
    *out = CUABI__HANDLE(l, cuabi_linker);
    return CUABI_SUCCESS;
}

static cuabi_status check_open(const cuabi__linker *l, const char *caller)
{
    if (l->completed)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the linker has completed; create a new one to link again",
                            caller);
    return CUABI_SUCCESS;
}

static cuabi_status add_data(cuabi__linker *l, cuabi_code_type type, const void *data,
                             size_t size, const char *name, const char *caller)
{
    nvJitLinkInputType it = NVJITLINK_INPUT_NONE;
    CUABI__TRY(input_type(&it, type, data, size, caller));
    if (!name)
        name = "<memory>";
    kept_input k = { it, NULL, size, NULL };
    if (l->keep) {
        kept_input *nk = cuabi__realloc(l->kept, (l->inputs + 1) * sizeof *nk);
        if (!nk)
            return CUABI_ERROR_OUT_OF_MEMORY;
        l->kept = nk;
        /* One byte more, a NUL: nvJitLink reads PTX text one byte past its
         * size (ASan saw it read 1140 bytes of a 1139-byte copy); the
         * caller's PTX from cuabi_linker_add_file has one there. */
        k.data = cuabi__malloc(size + 1);
        k.name = cuabi__strdup(name);
        if (!k.data || !k.name) {
            cuabi__free(k.data);
            cuabi__free(k.name);
            return CUABI_ERROR_OUT_OF_MEMORY;
        }
        memcpy(k.data, data, size);
        ((char *)k.data)[size] = '\0';
    }
    nvJitLinkResult r = l->cached ? NVJITLINK_SUCCESS
                                  : l->nvj->nvJitLinkAddData(l->h, it, data, size, name);
    if (r != NVJITLINK_SUCCESS) {
        cuabi__free(k.data);
        cuabi__free(k.name);
        char what[300];
        snprintf(what, sizeof what, "adding %s", name);
        return cuabi__jitlink_fail(CUABI_ERROR_INVALID_IMAGE, l->nvj, l->h, r, caller, what);
    }
    if (l->keep)
        l->kept[l->inputs] = k;
    l->inputs++;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_add_data(cuabi_linker *linker, cuabi_code_type type,
                                                 const void *data, size_t size, const char *name)
{
    cuabi__linker *l;
    CUABI__GET(l, linker, LINKER);
    CUABI__CHECK_ARG(data, "%s: data is NULL", __func__);
    CUABI__CHECK_ARG(size > 0, "%s: size is 0", __func__);
    CUABI__TRY(check_open(l, __func__));
    if (type == CUABI_CODE_PTX && ((const char *)data)[size - 1] != '\0') {
        /* nvJitLink reads PTX as a C string: give it a terminated copy. */
        char *copy = cuabi__malloc(size + 1);
        if (!copy)
            return CUABI_ERROR_OUT_OF_MEMORY;
        memcpy(copy, data, size);
        copy[size] = '\0';
        cuabi_status st = add_data(l, type, copy, size + 1, name, __func__);
        cuabi__free(copy);
        return st;
    }
    return add_data(l, type, data, size, name, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_linker_add_file(cuabi_linker *linker, cuabi_code_type type,
                                                 const char *path)
{
    cuabi__linker *l;
    CUABI__GET(l, linker, LINKER);
    CUABI__CHECK_ARG(path, "%s: path is NULL", __func__);
    CUABI__TRY(check_open(l, __func__));
    /* Read it ourselves: a clear CUABI_ERROR_IO for missing files, and the
     * type detection of objcodes. */
    void *data;
    size_t size;
    CUABI__TRY(cuabi__read_file(path, &data, &size, __func__));
    cuabi_status st;
    if (size == 0)
        st = cuabi__error(CUABI_ERROR_INVALID_IMAGE, "%s: '%s' is empty", __func__, path);
    else
        st = add_data(l, type, data, type == CUABI_CODE_PTX ? size + 1 : size, path, __func__);
    cuabi__free(data);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_add_objcode(cuabi_linker *linker, cuabi_objcode *objcode)
{
    cuabi__linker *l;
    cuabi__objcode *o;
    CUABI__GET(l, linker, LINKER);
    CUABI__GET(o, objcode, OBJCODE);
    CUABI__TRY(check_open(l, __func__));
    size_t n = o->type == CUABI_CODE_PTX ? o->size + 1 : o->size;
    return add_data(l, o->type, o->data, n, o->name, __func__);
}

/* Open a session on the kept options and inputs, replacing any open one:
 * with -ptx for a PTX completion, and the deferred session of a cache miss,
 * whose option and input errors are reported as cuabi_linker_create and
 * cuabi_linker_add_data report them without the cache (a relink's inputs
 * were accepted once: its errors are link errors). A session that refused
 * an input stays, so that cuabi_linker_error_log can read it. */
static cuabi_status open_session(cuabi__linker *l, const char *arch, bool ptx,
                                 const char *caller)
{
    if (!l->nvj)
        CUABI__TRY(cuabi__nvjitlink_get_for(&l->nvj, caller));
    const cuabi__nvjitlink *nvj = l->nvj;
    const char **opts = cuabi__calloc(l->nopts + 1, sizeof *opts);
    if (!opts)
        return CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < l->nopts; i++)
        opts[i] = l->opts[i];
    char archopt[32];
    if (arch) { /* another architecture of a fatbin: build_opts puts -arch= first */
        snprintf(archopt, sizeof archopt, "-arch=%s", arch);
        opts[0] = archopt;
    }
    opts[l->nopts] = "-ptx";
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = nvj->nvJitLinkCreate(&h, (uint32_t)l->nopts + ptx, opts);
    cuabi__free(opts);
    bool relink = !l->cached;
    if (r != NVJITLINK_SUCCESS) {
        cuabi_status st =
            relink ? cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, h, r, caller, "nvJitLinkCreate (-ptx)")
                   : cuabi__jitlink_fail(CUABI_ERROR_INVALID_ARGUMENT, nvj, h, r, caller,
                          "nvJitLinkCreate (check the options)");
        if (h)
            nvj->nvJitLinkDestroy(&h);
        return st;
    }
    if (l->h)
        nvj->nvJitLinkDestroy(&l->h);
    l->h = h;
    for (size_t i = 0; i < l->inputs; i++) {
        const kept_input *k = &l->kept[i];
        r = nvj->nvJitLinkAddData(h, k->type, k->data, k->size, k->name);
        if (r != NVJITLINK_SUCCESS) {
            char what[300];
            snprintf(what, sizeof what, "adding %s", k->name);
            return relink ? cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, h, r, caller, "nvJitLinkAddData (-ptx)")
                          : cuabi__jitlink_fail(CUABI_ERROR_INVALID_IMAGE, nvj, h, r, caller, what);
        }
    }
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ the cache */

/* The link's key: nvJitLink's identity, the options (the arch among them),
 * the output kind and each input's kind, name and bytes, all
 * length-prefixed. Fails only when nvJitLink cannot be found. */
static cuabi_status link_key(cuabi__cache_key *out, const cuabi__linker *l,
                             cuabi_code_type output, const char *caller)
{
    static const char scheme[] = "cuabi-cache-format=" CUABI__CACHE_FORMAT_STR " link=1";
    const char *ident;
    size_t ident_len;
    CUABI__TRY(cuabi__compiler_ident(&cuabi__compiler_nvjitlink, cuabi__cache_record_dir, &ident,
                                     &ident_len, caller));
    uint32_t out_type = (uint32_t)output;
    uint64_t counts[2] = { l->nopts, l->inputs };
    uint32_t *types = cuabi__calloc(l->inputs + 1, sizeof *types);
    cuabi__bytes *f = cuabi__calloc(7 + l->nopts + 3 * l->inputs, sizeof *f);
    if (!types || !f) {
        cuabi__free(types);
        cuabi__free(f);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    size_t k = 0;
    f[k++] = (cuabi__bytes){ scheme, sizeof scheme - 1 };
    f[k++] = (cuabi__bytes){ ident, ident_len };
    f[k++] = (cuabi__bytes){ &out_type, sizeof out_type };
    f[k++] = (cuabi__bytes){ l->archs, strlen(l->archs) };   /* a fatbin's list */
    f[k++] = (cuabi__bytes){ counts, sizeof counts };
    for (size_t i = 0; i < l->nopts; i++)
        f[k++] = (cuabi__bytes){ l->opts[i], strlen(l->opts[i]) };
    for (size_t i = 0; i < l->inputs; i++) {
        types[i] = (uint32_t)l->kept[i].type;
        f[k++] = (cuabi__bytes){ &types[i], sizeof types[i] };
        f[k++] = (cuabi__bytes){ l->kept[i].name, strlen(l->kept[i].name) };
        f[k++] = (cuabi__bytes){ l->kept[i].data, l->kept[i].size };
    }
    f[k++] = (cuabi__bytes){ "end", 3 };
    cuabi__cache_key_compute(out, f, k);
    cuabi__free(types);
    cuabi__free(f);
    return CUABI_SUCCESS;
}

/* Keep a hit's logs for the log getters. */
static cuabi_status take_logs(cuabi__linker *l, const cuabi__codeblob *b)
{
    char *info = cuabi__strdup(b->log);
    char *error = cuabi__strdup(b->log2 ? b->log2 : "");
    if (!info || !error) {
        cuabi__free(info);
        cuabi__free(error);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    cuabi__free(l->info_log);
    cuabi__free(l->error_log);
    l->info_log = info;
    l->error_log = error;
    return CUABI_SUCCESS;
}

/* Store the link's output with its logs (best effort), under the identity
 * of the nvJitLink that ran. */
static void store_link(const cuabi__linker *l, cuabi_code_type output, void *data, size_t size)
{
    cuabi__cache_key key;
    cuabi__cache_entry e = { .type = output, .data = data, .size = size,
                             .flags = CUABI__ENTRY_LINKED };
    cuabi__codeblob *b = NULL;
    e.log = cuabi__jitlink_log(l->nvj, l->h, false);
    e.log2 = cuabi__jitlink_log(l->nvj, l->h, true);
    if (e.log && e.log2 && link_key(&key, l, output, "cuabi_linker_complete") == CUABI_SUCCESS &&
        cuabi__codeblob_make(&b, &e) == CUABI_SUCCESS)
        cuabi__cache_store(&key, b, NULL);
    cuabi__codeblob_release(b);
    cuabi__free(e.log);
    cuabi__free(e.log2);
    cuabi_error_clear(); /* the cache is best effort: the link succeeded */
}

/* "<linked CUBIN for sm_90>": the name of a link's objcode. */
static void output_name(char *buf, size_t len, const cuabi__linker *l, cuabi_code_type output)
{
    snprintf(buf, len, "<linked %s for %s>",
             output == CUABI_CODE_PTX ? "PTX" : output == CUABI_CODE_FATBIN ? "fatbin" : "CUBIN",
             output == CUABI_CODE_FATBIN ? l->archs : l->arch);
}

static cuabi_status output_objcode(cuabi_objcode **out, const cuabi__linker *l,
                                   cuabi_code_type output, void *data, size_t size,
                                   bool trusted)
{
    char name[160];
    output_name(name, sizeof name, l, output);
    cuabi__objcode *o;
    CUABI__TRY(trusted ? cuabi__objcode_new_trusted(&o, output, data, size, name)
                       : cuabi__objcode_new(&o, output, data, size, name));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

/* A hit's objcode: it shares the cached result's bytes. */
static cuabi_status shared_objcode(cuabi_objcode **out, const cuabi__linker *l,
                                   cuabi__codeblob *b)
{
    char name[160];
    output_name(name, sizeof name, l, b->type);
    cuabi__objcode *o;
    CUABI__TRY(cuabi__objcode_new_shared(&o, b, name));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

/* Complete session `h` and copy its CUBIN (cuabi__malloc'ed). */
static cuabi_status session_cubin(const cuabi__nvjitlink *nvj, nvJitLinkHandle h, void **out,
                                  size_t *size, const char *caller)
{
    *out = NULL;
    nvJitLinkResult r = nvj->nvJitLinkComplete(h);
    if (r != NVJITLINK_SUCCESS)
        return cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, h, r, caller, "nvJitLinkComplete");
    if ((r = nvj->nvJitLinkGetLinkedCubinSize(h, size)) != NVJITLINK_SUCCESS)
        return cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, h, r, caller, "nvJitLinkGetLinkedCubinSize");
    if (!(*out = cuabi__malloc(*size ? *size : 1)))
        return CUABI_ERROR_OUT_OF_MEMORY;
    if ((r = nvj->nvJitLinkGetLinkedCubin(h, *out)) != NVJITLINK_SUCCESS) {
        cuabi__free(*out);
        *out = NULL;
        return cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, h, r, caller, "getting the linked output");
    }
    return CUABI_SUCCESS;
}

/* A fatbin output: one session per architecture of the list, fed the kept
 * inputs, their CUBINs packed; stored in the cache like any link. */
static cuabi_status complete_fatbin(cuabi_objcode **out, cuabi__linker *l, const char *caller)
{
    cuabi__fatbin_input in[32];
    void *cubins[32] = { 0 };
    size_t n = 0;
    cuabi_status st = CUABI_SUCCESS;
    for (const char *p = l->archs; p && st == CUABI_SUCCESS && n < 32; n++) {
        const char *comma = strchr(p, ',');
        char arch[16];
        snprintf(arch, sizeof arch, "%.*s", (int)(comma ? (size_t)(comma - p) : strlen(p)), p);
        p = comma ? comma + 1 : NULL;
        size_t size = 0;
        /* The first architecture is the linker's: without the cache its
         * session is open since cuabi_linker_create and has the inputs
         * (and only a list keeps them for more sessions). */
        if (n > 0 || !l->h)
            st = open_session(l, arch, false, caller);
        if (st == CUABI_SUCCESS)
            st = session_cubin(l->nvj, l->h, &cubins[n], &size, caller);
        in[n] = (cuabi__fatbin_input){ CUABI_CODE_CUBIN, cubins[n], size,
                                       (unsigned)strtoul(arch + 3, NULL, 10) };
    }
    void *data = NULL;
    size_t size = 0;
    const char *packer;
    if (st == CUABI_SUCCESS)
        st = cuabi__fatbin_pack(&data, &size, &packer, in, n, caller);
    for (size_t i = 0; i < n; i++)
        cuabi__free(cubins[i]);
    if (st != CUABI_SUCCESS)
        return st;
    if (l->cached)
        store_link(l, CUABI_CODE_FATBIN, data, size);
    return output_objcode(out, l, CUABI_CODE_FATBIN, data, size, true);
}

/* Look the link up; on a hit fill *out and the logs. */
static cuabi_status lookup_link(cuabi_objcode **out, cuabi__linker *l, cuabi_code_type output,
                                const char *caller)
{
    cuabi__cache_key key;
    cuabi__codeblob *b;
    CUABI__TRY(link_key(&key, l, output, caller));
    CUABI__TRY(cuabi__cache_lookup(&key, &b, &l->hit, NULL));
    if (!l->hit)
        return CUABI_SUCCESS;
    /* The key names the output kind, so another kind is a foreign entry. */
    cuabi_status st = b->type != output
        ? cuabi__error(CUABI_ERROR_CACHE, "%s: the cache entry for this link holds %s, not %s",
                       caller, cuabi__code_type_name(b->type), cuabi__code_type_name(output))
        : take_logs(l, b);
    if (st == CUABI_SUCCESS)
        st = shared_objcode(out, l, b);
    cuabi__codeblob_release(b);
    if (st != CUABI_SUCCESS)
        l->hit = 0;
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_complete(cuabi_objcode **out, cuabi_linker *linker,
                                                 cuabi_code_type output)
{
    cuabi__linker *l;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(l, linker, LINKER);
    CUABI__CHECK_ARG(output == CUABI_CODE_CUBIN || output == CUABI_CODE_PTX ||
                         output == CUABI_CODE_FATBIN,
                     "%s: the output must be CUABI_CODE_CUBIN, CUABI_CODE_PTX or "
                     "CUABI_CODE_FATBIN, not %s", __func__, cuabi__code_type_name(output));
    CUABI__TRY(check_open(l, __func__));
    CUABI__CHECK_ARG(l->inputs > 0, "%s: nothing to link; add inputs first", __func__);
    bool ptx = output == CUABI_CODE_PTX;
    CUABI__CHECK_ARG(!ptx || l->lto,
                     "%s: PTX output needs link-time optimisation: set options.lto = 1 and "
                     "add LTO-IR inputs", __func__);
    CUABI__CHECK_ARG(output == CUABI_CODE_FATBIN || !strchr(l->archs, ','),
                     "%s: the linker was made for several architectures (%s): ask for "
                     "CUABI_CODE_FATBIN", __func__, l->archs);
    l->completed = true;
    if (l->cached) {
        CUABI__TRY(lookup_link(out, l, output, __func__));
        if (l->hit)
            return CUABI_SUCCESS;
    }
    if (output == CUABI_CODE_FATBIN)
        return complete_fatbin(out, l, __func__);
    if (ptx || l->cached)
        CUABI__TRY(open_session(l, NULL, ptx, __func__));
    const cuabi__nvjitlink *nvj = l->nvj;
    nvJitLinkResult r = nvj->nvJitLinkComplete(l->h);
    if (r != NVJITLINK_SUCCESS)
        return cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, l->h, r, __func__, "nvJitLinkComplete");
    size_t size = 0;
    r = ptx ? nvj->nvJitLinkGetLinkedPtxSize(l->h, &size)
            : nvj->nvJitLinkGetLinkedCubinSize(l->h, &size);
    if (r != NVJITLINK_SUCCESS)
        return cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, l->h, r, __func__,
                    ptx ? "nvJitLinkGetLinkedPtxSize" : "nvJitLinkGetLinkedCubinSize");
    char *data = cuabi__malloc(size + 1);
    if (!data)
        return CUABI_ERROR_OUT_OF_MEMORY;
    r = ptx ? nvj->nvJitLinkGetLinkedPtx(l->h, data) : nvj->nvJitLinkGetLinkedCubin(l->h, data);
    if (r != NVJITLINK_SUCCESS) {
        cuabi__free(data);
        return cuabi__jitlink_fail(CUABI_ERROR_LINK, nvj, l->h, r, __func__, "getting the linked output");
    }
    data[size] = '\0';
    if (ptx)
        size = strlen(data); /* the reported size counts the NUL */
    if (l->cached)
        store_link(l, output, data, size);
    return output_objcode(out, l, output, data, size, false);
}

static cuabi_status log_getter(const char **out, cuabi_linker *linker, bool error,
                               const char *caller)
{
    cuabi__linker *l;
    void *obj;
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    CUABI__TRY(cuabi__handle_get(linker, CUABI__T_LINKER, &obj, caller));
    l = obj;
    char **slot = error ? &l->error_log : &l->info_log;
    if (!l->h) { /* no session: a cache hit's logs, or nothing yet */
        if (!*slot && !(*slot = cuabi__strdup("")))
            return CUABI_ERROR_OUT_OF_MEMORY;
        *out = *slot;
        return CUABI_SUCCESS;
    }
    char *log = cuabi__jitlink_log(l->nvj, l->h, error);
    if (!log)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi__free(*slot);
    *slot = log;
    *out = log;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_info_log(const char **out, cuabi_linker *linker)
{
    return log_getter(out, linker, false, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_linker_error_log(const char **out, cuabi_linker *linker)
{
    return log_getter(out, linker, true, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_linker_cache_hit(int *out, cuabi_linker *linker)
{
    cuabi__linker *l;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(l, linker, LINKER);
    *out = l->hit;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_backend_handle(void **out, cuabi_linker *linker)
{
    cuabi__linker *l;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(l, linker, LINKER);
    if (!l->h && l->completed)
        return cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: the link was answered by the compile "
                            "cache: no nvJitLink session ran", __func__);
    if (!l->h) {
        /* Through the cache: open the session now, on the options and inputs so
         * far; from here on the link is the caller's to see, so it no longer
         * goes through the cache (inputs reach the session as they come). */
        CUABI__TRY(open_session(l, NULL, false, __func__));
        l->cached = false;
    }
    *out = l->h;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_linker_options_render(char *out, size_t *size,
                                                       const cuabi_linker_options *options)
{
    static const cuabi_linker_options defaults = CUABI_LINKER_OPTIONS_INIT;
    CUABI__CHECK_ARG(size, "%s: size is NULL", __func__);
    CUABI__CHECK_ARG(out || *size == 0, "%s: out is NULL but *size is %zu", __func__, *size);
    CUABI__CHECK_OPTS(options, "cuabi_linker_options", CUABI_LINKER_OPTIONS_VERSION, true);
    if (!options)
        options = &defaults;
    int use_cache = options->version >= 2 ? options->cache : 1;
    CUABI__CHECK_ARG(use_cache == 0 || use_cache == 1, "%s: options->cache is %d; use 0 or 1",
                     __func__, use_cache);
    char arch[16];
    CUABI__TRY(linker_arch(arch, options, __func__));
    optlist o = { .n = 0 };
    cuabi_status st = build_opts(&o, options, arch, __func__);
    for (size_t i = 0; st == CUABI_SUCCESS && i < options->extra_option_count; i++)
        if (!options->extra_options[i])
            st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                              "%s: options->extra_options[%zu] is NULL", __func__, i);
    size_t need = 0, had = *size;
    for (size_t i = 0; st == CUABI_SUCCESS && i < o.n + options->extra_option_count; i++) {
        const char *a = i < o.n ? o.v[i] : options->extra_options[i - o.n];
        size_t n = strlen(a) + 1;
        if (need + n <= had)
            memcpy(out + need, a, n);
        need += n;
    }
    free_opts(&o);
    CUABI__TRY(st);
    *size = need;
    if (need > had)
        return cuabi__error(CUABI_ERROR_BUFFER_TOO_SMALL, "%s: the options need %zu bytes, "
                            "the buffer has %zu", __func__, need, had);
    return CUABI_SUCCESS;
}
