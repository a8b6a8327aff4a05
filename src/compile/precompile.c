/* Precompiling into the compile cache, ahead of time (Warp's load_module,
 * for every language): cuabi_cache_precompile (a list of programs) and
 * cuabi_cache_warm_manifest (a project's TOML manifest, src/compile/manifest.c).
 *
 * This module sits above both program.c (it compiles) and cache.c (it
 * checks the directory first); neither calls into it. Compiles run on a
 * pool of threads; outcomes are reported on the calling thread, in order,
 * so a binding's callback never runs on a thread it did not make (Julia's
 * cannot) and the output of a tool is the same from run to run. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/cache.h"
#include "compile/manifest.h"
#include "compile/program.h"

#define MAX_JOBS 32
#define WORKER_STACK ((size_t)32 << 20)   /* NVRTC's front end recurses deeply */

/* One thing to report: a compile, or a problem of the manifest. */
typedef struct job {
    cuabi_code_type type;
    const char *source;
    size_t size;
    const char *name;
    const cuabi_program_options *options;  /* NULL: the defaults */
    const char *arch;                      /* NULL: the options' (or the default) */
    int line, arch_line;
    const cuabi__manifest_problem *problem;
    /* outcome, written by whichever thread runs it */
    cuabi_status status;
    int hit;
    char shown_arch[256];
    /* A fatbin's compile: every architecture at once ("sm_80,sm_90"),
     * kept here (jobs are sorted, so no pointer into the job is kept). */
    char fat_archs[256];
    char *message, *log;
    bool done;                             /* under the pool's lock */
} job;

static void job_clear(job *j)
{
    free(j->message);
    free(j->log);
    j->message = j->log = NULL;
}

/* The "cuabi cache: not stored/not used" line of a log, if any (copied). */
static char *cache_trouble(const char *log)
{
    static const char *const notes[] = { CUABI__NOTE_NOT_STORED, CUABI__NOTE_NOT_USED };
    for (size_t i = 0; i < 2; i++) {
        const char *at = strstr(log, notes[i]);
        if (at && (at == log || at[-1] == '\n')) {
            size_t n = strcspn(at, "\n");
            return strndup(at, n);
        }
    }
    return NULL;
}

/* A fatbin is one compile of all the architectures. */
static bool is_fatbin(const cuabi_program_options *o)
{
    return o && o->output == CUABI_CODE_FATBIN;
}

/* The architectures joined with commas (the program refuses a list cut
 * short, since the result no longer parses as the list given). */
static void join_archs(job *j, const char *const *archs, size_t n)
{
    size_t used = 0;
    for (size_t a = 0; a < n && used < sizeof j->fat_archs; a++) {
        int w = snprintf(j->fat_archs + used, sizeof j->fat_archs - used, "%s%s", a ? "," : "",
                         archs[a]);
        used += w > 0 ? (size_t)w : 0;
    }
}

static void run_job(job *j)
{
    static const cuabi_program_options defaults = CUABI_PROGRAM_OPTIONS_INIT;
    /* Copied by the caller's version: a version-1 struct ends before
     * `libdevice` (the copy keeps version 1, so that field is not read). */
    cuabi_program_options o = defaults;
    if (j->options)
        memcpy(&o, j->options, j->options->version >= 2 ? sizeof o
                                   : offsetof(cuabi_program_options, libdevice));
    if (j->fat_archs[0])
        o.arch = j->fat_archs;
    else if (j->arch)
        o.arch = j->arch;
    o.cache = 1;
    if (o.arch && *o.arch)
        snprintf(j->shown_arch, sizeof j->shown_arch, "%s", o.arch);
    else
        cuabi__current_arch(j->shown_arch);
    cuabi_program *p;
    j->hit = 0;
    j->status = cuabi_program_create(&p, j->type, j->source, j->size, j->name);
    if (j->status != CUABI_SUCCESS) {
        j->message = strdup(cuabi_last_error()->message);
        return;
    }
    j->status = cuabi_program_compile(NULL, p, &o);
    if (j->status != CUABI_SUCCESS)
        j->message = strdup(cuabi_last_error()->message);
    const char *log = "";
    cuabi_program_cache_hit(&j->hit, p);
    cuabi_program_log(&log, p);
    j->log = strdup(log);
    if (j->status == CUABI_SUCCESS && !j->hit && (j->message = cache_trouble(log)))
        j->status = CUABI_ERROR_CACHE; /* compiled, but the work is lost */
    cuabi__handle_release(p, CUABI__T_PROGRAM);
}

/* ----------------------------------------------------------------- pool */

typedef struct pool {
    job *jobs;
    size_t n, next;
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} pool;

/* The next job to run, or NULL. */
static job *claim(pool *p)
{
    pthread_mutex_lock(&p->lock);
    job *j = NULL;
    while (!p->stop && p->next < p->n && !j) {
        j = &p->jobs[p->next++];
        if (j->problem) /* nothing to run */
            j = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    return j;
}

static void finish(pool *p, job *j)
{
    pthread_mutex_lock(&p->lock);
    j->done = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (job *j; (j = claim(p));) {
        run_job(j);
        finish(p, j);
    }
    return NULL;
}

static size_t default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_JOBS ? MAX_JOBS : (size_t)n;
}

/* Report each outcome in order; `report` returning non-zero cancels. Runs
 * up to `parallel` compiles at once (1: on this thread, one by one).
 * Returns whether it was cancelled. */
static bool run_all(job *jobs, size_t n, size_t parallel, int (*report)(job *, size_t, void *),
                    void *ctx)
{
    pool p = { .jobs = jobs, .n = n };
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.cond, NULL);
    size_t compiles = 0;
    for (size_t i = 0; i < n; i++)
        compiles += !jobs[i].problem;
    if (parallel > compiles)
        parallel = compiles;
    pthread_t threads[MAX_JOBS];
    size_t started = 0;
    pthread_attr_t attr;
    bool attr_ok = parallel > 1 && pthread_attr_init(&attr) == 0;
    if (attr_ok)
        pthread_attr_setstacksize(&attr, WORKER_STACK);
    for (size_t i = 0; parallel > 1 && i < parallel && i < MAX_JOBS; i++)
        if (pthread_create(&threads[started], attr_ok ? &attr : NULL, worker, &p) == 0)
            started++;
    if (attr_ok)
        pthread_attr_destroy(&attr);
    bool cancelled = false;
    for (size_t i = 0; i < n && !cancelled; i++) {
        job *j = &jobs[i];
        if (j->problem) {
            /* nothing to run or wait for */
        } else if (!started) { /* one by one, here (also when no thread could start) */
            run_job(j);
        } else {
            pthread_mutex_lock(&p.lock);
            while (!j->done)
                pthread_cond_wait(&p.cond, &p.lock);
            pthread_mutex_unlock(&p.lock);
        }
        cancelled = report(j, i + 1, ctx) != 0;
    }
    pthread_mutex_lock(&p.lock);
    p.stop = true;
    pthread_mutex_unlock(&p.lock);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    for (size_t i = 0; i < n; i++)
        job_clear(&jobs[i]);
    pthread_cond_destroy(&p.cond);
    pthread_mutex_destroy(&p.lock);
    return cancelled;
}

/* ------------------------------------------------------------ outcomes */

/* The first failure, for the returned error. */
typedef struct first_failure {
    size_t count;
    cuabi_status status;
    char text[1024];
} first_failure;

static void note_failure(first_failure *f, const job *j)
{
    if (f->count++)
        return;
    f->status = j->status;
    if (j->problem)
        snprintf(f->text, sizeof f->text, "line %d: %s", j->problem->line,
                 j->problem->message);
    else
        snprintf(f->text, sizeof f->text, "%s (%s): %s", j->name ? j->name : "",
                 j->shown_arch, j->message ? j->message : "");
}

/* Whether the cache can keep what precompiling makes: on, with a directory
 * this user can use (created when missing). */
static cuabi_status cache_usable(const char *caller)
{
    if (!cuabi__cache_enabled())
        return cuabi__error(CUABI_ERROR_CACHE, "%s: the compile cache is disabled (CUABI_CACHE=0 "
                            "or cuabi_cache_set_enabled(0)); precompiling would be lost", caller);
    return cuabi__cache_dir_check(caller);
}

/* -------------------------------------------------- cuabi_cache_precompile */

typedef struct precompile_ctx {
    cuabi_precompile_progress_fn progress;
    void *payload;
    size_t total;
    first_failure first;
} precompile_ctx;

static int precompile_report(job *j, size_t done, void *arg)
{
    precompile_ctx *c = arg;
    if (j->status != CUABI_SUCCESS) {
        note_failure(&c->first, j);
        /* the callback may read the failure from the error record */
        cuabi__error(j->status, "%s", j->message ? j->message : "");
        if (j->log && j->status == CUABI_ERROR_COMPILE)
            cuabi__error_set_log(j->log, strlen(j->log));
    }
    return c->progress && c->progress(done, c->total, j->name ? j->name : "", j->shown_arch,
                                      j->status, j->hit, c->payload) != 0;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_precompile(const cuabi_precompile_item *items,
                                                  size_t num_items, const char **archs,
                                                  size_t num_archs,
                                                  cuabi_precompile_progress_fn progress,
                                                  void *payload)
{
    CUABI__CHECK_ARG(items || !num_items, "%s: items is NULL but num_items is %zu", __func__,
                     num_items);
    CUABI__CHECK_ARG(archs || !num_archs, "%s: archs is NULL but num_archs is %zu", __func__,
                     num_archs);
    for (size_t i = 0; i < num_items; i++) {
        CUABI__CHECK_VERSION("cuabi_precompile_item", items[i].version,
                             CUABI_PRECOMPILE_ITEM_VERSION);
        CUABI__CHECK_ARG(items[i].source, "%s: items[%zu].source is NULL", __func__, i);
    }
    for (size_t i = 0; i < num_archs; i++)
        CUABI__CHECK_ARG(archs[i] && *archs[i], "%s: archs[%zu] is NULL or empty", __func__, i);
    CUABI__TRY(cache_usable(__func__));
    size_t per = num_archs ? num_archs : 1, total = 0;
    for (size_t i = 0; i < num_items; i++)
        total += is_fatbin(items[i].options) ? 1 : per;
    job *jobs = total ? cuabi__calloc(total, sizeof *jobs) : NULL;
    if (total && !jobs)
        return CUABI_ERROR_OUT_OF_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < num_items; i++) {
        bool fat = is_fatbin(items[i].options);
        for (size_t a = 0; a < (fat ? 1 : per); a++) {
            jobs[k] = (job){ .type = items[i].type, .source = items[i].source,
                             .size = items[i].size, .name = items[i].name,
                             .options = items[i].options,
                             .arch = num_archs ? archs[a] : NULL };
            if (fat)
                join_archs(&jobs[k], archs, num_archs);
            k++;
        }
    }
    precompile_ctx c = { .progress = progress, .payload = payload, .total = total };
    bool cancelled = run_all(jobs, total, default_jobs(), precompile_report, &c);
    cuabi__free(jobs);
    if (cancelled)
        return cuabi__error(CUABI_ERROR_CALLBACK, "%s: cancelled by the progress callback",
                            __func__);
    if (c.first.count)
        return cuabi__error(c.first.status, "%s: %zu of %zu compiles failed; the first: %s",
                            __func__, c.first.count, total, c.first.text);
    return CUABI_SUCCESS;
}

/* ------------------------------------------------ cuabi_cache_warm_manifest */

typedef struct warm_ctx {
    cuabi_warm_progress_fn progress;
    void *payload;
    const char *path;
    size_t total;
    cuabi_warm_summary summary;
    first_failure first;
} warm_ctx;

static int warm_report(job *j, size_t done, void *arg)
{
    warm_ctx *c = arg;
    cuabi_warm_summary *s = &c->summary;
    if (j->problem)
        s->problems++;
    else if (j->status != CUABI_SUCCESS)
        s->failed++;
    else if (j->hit)
        s->cached++;
    else
        s->compiled++;
    if (j->problem || j->status != CUABI_SUCCESS)
        note_failure(&c->first, j);
    if (!c->progress)
        return 0;
    cuabi_warm_event ev = CUABI_WARM_EVENT_INIT;
    ev.done = done;
    ev.total = c->total;
    ev.name = j->problem ? c->path : j->name ? j->name : "";
    ev.arch = j->problem ? "" : j->shown_arch;
    ev.line = j->status == CUABI_ERROR_NOT_SUPPORTED && j->arch_line ? j->arch_line : j->line;
    ev.status = j->status;
    ev.cache_hit = j->problem ? -1 : j->hit;
    ev.message = j->problem ? j->problem->message : j->message ? j->message : "";
    ev.log = j->log ? j->log : "";
    return c->progress(&ev, c->payload);
}

static int by_line(const void *a, const void *b)
{
    const job *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x < y ? -1 : x > y; /* stable: the order they were listed in */
}

/* Jobs for the manifest's problems and for every source x architecture, in
 * line order; NULL and *n = 0 when there is nothing to do. */
static job *manifest_jobs(const cuabi__manifest *m, const cuabi_warm_options *o, size_t *n)
{
    size_t count = m->num_problems;
    for (size_t i = 0; i < m->num_sources; i++) {
        size_t archs = o && o->num_archs ? o->num_archs : m->sources[i].num_archs;
        count += archs && !is_fatbin(&m->sources[i].options) ? archs : 1;
    }
    *n = count;
    job *jobs = count ? cuabi__calloc(count, sizeof *jobs) : NULL;
    if (!jobs)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < m->num_problems; i++)
        jobs[k++] = (job){ .problem = &m->problems[i], .line = m->problems[i].line,
                           .status = m->problems[i].status };
    for (size_t i = 0; i < m->num_sources; i++) {
        const cuabi__manifest_source *s = &m->sources[i];
        bool mine = o && o->num_archs;
        const char *const *archs = mine ? o->archs : s->archs;
        size_t na = mine ? o->num_archs : s->num_archs;
        bool fat = is_fatbin(&s->options);
        for (size_t a = 0; a < (na && !fat ? na : 1); a++) {
            jobs[k] = (job){ .type = s->type, .source = s->text, .size = s->size,
                             .name = s->name, .options = &s->options,
                             .arch = na ? archs[a] : NULL, .line = s->line,
                             .arch_line = mine ? 0 : s->archs_line };
            if (fat)
                join_archs(&jobs[k], archs, na);
            k++;
        }
    }
    /* qsort's by_line is stable here: ties compare by address, and the
     * array was filled in listing order */
    qsort(jobs, count, sizeof *jobs, by_line);
    return jobs;
}

CUABI_EXTERN(cuabi_status) cuabi_cache_warm_manifest(cuabi_warm_summary *out, const char *path,
                                                     const cuabi_warm_options *options,
                                                     cuabi_warm_progress_fn progress,
                                                     void *payload)
{
    if (out) {
        CUABI__CHECK_VERSION("cuabi_warm_summary", out->version, CUABI_WARM_SUMMARY_VERSION);
        unsigned v = out->version;
        *out = (cuabi_warm_summary){ .version = v };
    }
    CUABI__CHECK_ARG(path && *path, "%s: path is NULL or empty", __func__);
    CUABI__CHECK_OPTS(options, "cuabi_warm_options", CUABI_WARM_OPTIONS_VERSION, true);
    if (options) {
        CUABI__CHECK_ARG(options->jobs >= 0 && options->jobs <= 1024,
                         "%s: options.jobs is %d; use 0 (one per CPU) or 1..1024", __func__,
                         options->jobs);
        CUABI__CHECK_ARG(options->archs || !options->num_archs,
                         "%s: options.archs is NULL but num_archs is %zu", __func__,
                         options->num_archs);
        for (size_t i = 0; i < options->num_archs; i++) {
            bool virt;
            CUABI__CHECK_ARG(options->archs[i] && *options->archs[i],
                             "%s: options.archs[%zu] is NULL or empty", __func__, i);
            CUABI__TRY(cuabi__check_arch(options->archs[i], &virt, __func__));
        }
    }
    CUABI__TRY(cache_usable(__func__));
    /* allow_outside: version 2 on (a version-1 struct ends before it) */
    bool outside = options && options->version >= 2 && options->allow_outside;
    cuabi__manifest m;
    CUABI__TRY(cuabi__manifest_load(&m, path, outside ? CUABI__MANIFEST_ALLOW_OUTSIDE : 0,
                                    __func__));
    size_t n;
    job *jobs = manifest_jobs(&m, options, &n);
    if (n && !jobs) {
        cuabi__manifest_free(&m);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    warm_ctx c = { .progress = progress, .payload = payload, .path = path,
                   .total = n - m.num_problems };
    c.summary.total = c.total;
    c.total = n;
    size_t parallel = options && options->jobs ? (size_t)options->jobs : default_jobs();
    bool cancelled = run_all(jobs, n, parallel > MAX_JOBS ? MAX_JOBS : parallel, warm_report, &c);
    cuabi__free(jobs);
    cuabi__manifest_free(&m);
    if (out) {
        unsigned v = out->version;
        *out = c.summary;
        out->version = v;
    }
    if (cancelled)
        return cuabi__error(CUABI_ERROR_CALLBACK, "%s: cancelled by the progress callback",
                            __func__);
    if (c.first.count)
        return cuabi__error(c.first.status, "%s: %s: %zu of %zu compiles failed, %zu problem%s "
                            "with the manifest; the first: %s", __func__, path,
                            c.summary.failed, c.summary.total, c.summary.problems,
                            c.summary.problems == 1 ? "" : "s", c.first.text);
    return CUABI_SUCCESS;
}
