/* bench_compile: what the compile cache buys, on the segmented-reduction
 * kernel segred<float, 256>.
 *
 *   direct   nvrtcCompileProgram (+ lowered name + CUBIN) called directly
 *   cold     cuabi_program_compile on a miss (key, compile, store on disk)
 *   disk     a new process: cuabi_program_compile hitting the on-disk cache,
 *            plus loading the module and looking the kernel up (needs a GPU;
 *            without one the load is left out and the row says so). The
 *            driver and NVRTC are loaded before the clock starts; their
 *            first-use cost is shown on its own row.
 *            Then the same hit where NVRTC was never loaded (issue 13:
 *            the compiler is named by its identity record).
 *   memory   cuabi_program_compile hitting the in-memory layer (+ release)
 *
 * Targets (issue 3): disk <= 0.3 ms, memory <= 2 us, cold <= 1.05 x direct.
 * Direct and cold compiles alternate (default 21 reps each; medians).
 * Usage: bench_compile [--reps N] [--arch sm_XX]
 */
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuabi.h"

#include "segred_kernel.h"
static const char *expr = "segred<float, 256>";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void row(const char *name, double *t, int n, const char *note)
{
    qsort(t, (size_t)n, sizeof *t, cmp);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += t[i];
    const char *unit = t[n / 2] < 1e-3 ? "us" : "ms";
    double k = t[n / 2] < 1e-3 ? 1e6 : 1e3;
    printf("%-44s %10.3f %10.3f %10.3f %s %6d  %s\n", name, t[n / 2] * k, sum / n * k, t[0] * k,
           unit, n, note);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_compile: %s: %s\n", what, cuabi_last_error()->message);
    exit(1);
}

static cuabi_program_options opts_for(const char *arch, const char **names)
{
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = arch;
    o.name_expressions = names;
    o.num_name_expressions = 1;
    return o;
}

/* NVRTC for the direct row, opened with dlopen() rather than linked: a
 * child measuring a hit without the compiler must start without it. */
static struct {
    __typeof__(&nvrtcVersion) version;
    __typeof__(&nvrtcCreateProgram) create;
    __typeof__(&nvrtcAddNameExpression) add_name;
    __typeof__(&nvrtcCompileProgram) compile;
    __typeof__(&nvrtcGetLoweredName) lowered;
    __typeof__(&nvrtcGetCUBINSize) cubin_size;
    __typeof__(&nvrtcGetCUBIN) cubin;
    __typeof__(&nvrtcDestroyProgram) destroy;
} nv;

static void open_nvrtc(void)
{
    void *h = dlopen(getenv("CUABI_NVRTC_PATH") ? getenv("CUABI_NVRTC_PATH") : "libnvrtc.so.13",
                     RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen(CUABI_CUDA_LIBDIR "/libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench_compile: cannot load NVRTC: %s\n", dlerror());
        exit(1);
    }
    nv.version = (__typeof__(nv.version))dlsym(h, "nvrtcVersion");
    nv.create = (__typeof__(nv.create))dlsym(h, "nvrtcCreateProgram");
    nv.add_name = (__typeof__(nv.add_name))dlsym(h, "nvrtcAddNameExpression");
    nv.compile = (__typeof__(nv.compile))dlsym(h, "nvrtcCompileProgram");
    nv.lowered = (__typeof__(nv.lowered))dlsym(h, "nvrtcGetLoweredName");
    nv.cubin_size = (__typeof__(nv.cubin_size))dlsym(h, "nvrtcGetCUBINSize");
    nv.cubin = (__typeof__(nv.cubin))dlsym(h, "nvrtcGetCUBIN");
    nv.destroy = (__typeof__(nv.destroy))dlsym(h, "nvrtcDestroyProgram");
    if (!nv.version || !nv.create || !nv.add_name || !nv.compile || !nv.lowered ||
        !nv.cubin_size || !nv.cubin || !nv.destroy) {
        fprintf(stderr, "bench_compile: NVRTC lacks an entry point\n");
        exit(1);
    }
}

/* One direct NVRTC compile with the options cuabi passes. */
static double direct_once(const char *arch)
{
    char archopt[64];
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    const char *opts[] = { archopt };
    double t0 = now();
    nvrtcProgram p;
    if (nv.create(&p, segred_src, "segred.cu", 0, NULL, NULL) != NVRTC_SUCCESS ||
        nv.add_name(p, expr) != NVRTC_SUCCESS ||
        nv.compile(p, 1, opts) != NVRTC_SUCCESS) {
        fprintf(stderr, "bench_compile: direct NVRTC compile failed\n");
        exit(1);
    }
    const char *low;
    size_t n;
    nv.lowered(p, expr, &low);
    nv.cubin_size(p, &n);
    char *cubin = malloc(n);
    nv.cubin(p, cubin);
    free(cubin);
    nv.destroy(&p);
    return now() - t0;
}

/* Whether libnvrtc is mapped into this process. */
static int nvrtc_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "libnvrtc") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Child: the driver (and, with `preload`, NVRTC) are loaded first; then
 * time a disk hit with the module load. Prints "seconds loaded_flag
 * first_use_seconds". Without `preload` the hit must not load NVRTC
 * (issue 13): the compiler is named from its identity record. */
static int child_disk(const char *arch, bool preload)
{
    double t0 = now();
    int gpu = 0;
    cuabi_device *dev = NULL;
    int ndev = 0;
    if (cuabi_device_count(&ndev) == CUABI_SUCCESS && ndev > 0 &&
        cuabi_device_get(&dev, 0) == CUABI_SUCCESS && cuabi_device_set_current(dev) == CUABI_SUCCESS)
        gpu = 1;
    size_t na;
    if (preload)
        cuabi_program_supported_archs(NULL, 0, &na); /* loads NVRTC */
    double first_use = now() - t0;

    const char *names[] = { expr };
    cuabi_program_options o = opts_for(arch, names);
    double t1 = now();
    cuabi_program *p;
    cuabi_objcode *obj;
    cuabi_kernel *k = NULL;
    if (cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, segred_src, 0, "segred.cu") ||
        cuabi_program_compile(&obj, p, &o))
        die("disk hit");
    if (gpu && cuabi_objcode_get_kernel(&k, obj, expr))
        die("kernel lookup");
    double t = now() - t1;
    int hit = 0;
    cuabi_program_cache_hit(&hit, p);
    if (hit != 2) {
        fprintf(stderr, "bench_compile: expected an on-disk hit, got %d\n", hit);
        return 1;
    }
    if (!preload && nvrtc_mapped()) {
        fprintf(stderr, "bench_compile: the on-disk hit loaded NVRTC\n");
        return 1;
    }
    printf("%.9f %d %.9f\n", t, gpu, first_use);
    if (k)
        cuabi_kernel_release(k);
    cuabi_objcode_release(obj);
    cuabi_program_release(p);
    if (dev)
        cuabi_device_release(dev);
    return 0;
}

/* Run `count` fresh processes of this program in `mode`; each prints
 * "seconds gpu first_use". Returns how many answered, or -1. */
static int run_children(const char *argv0, const char *mode, const char *target, int count,
                        double *t, double *first_use, int *gpu)
{
    int n = 0;
    for (int i = 0; i < count; i++) {
        int fds[2];
        if (pipe(fds))
            return -1;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            execl("/proc/self/exe", argv0, mode, "--arch", target, (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        char buf[128] = "";
        ssize_t r = read(fds[0], buf, sizeof buf - 1);
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        if (r <= 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "bench_compile: child (%s) failed\n", mode);
            return -1;
        }
        buf[r] = '\0';
        if (sscanf(buf, "%lf %d %lf", &t[n], gpu, &first_use[n]) == 3)
            n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    int reps = 21;
    const char *arch = NULL;
    bool child = false, preload = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--child-disk"))
            child = true;
        else if (!strcmp(argv[i], "--child-cold"))
            child = true, preload = false;
        else {
            fprintf(stderr, "usage: bench_compile [--reps N] [--arch sm_XX]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    if (child)
        return child_disk(arch ? arch : "sm_90", preload);
    open_nvrtc();

    char dir[] = "/tmp/cuabi-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("CUABI_CACHE_DIR", dir, 1);
    unsetenv("CUABI_CACHE");
    if (cuabi_cache_set_directory(dir))
        die("cache directory");

    /* The target: the device's architecture, or sm_90. */
    char target[32] = "sm_90";
    cuabi_device *dev;
    cuabi_device_properties props = CUABI_DEVICE_PROPERTIES_INIT;
    const char *devname = "no GPU";
    int ndev = 0;
    if (cuabi_device_count(&ndev) == CUABI_SUCCESS && ndev > 0 &&
        cuabi_device_get(&dev, 0) == CUABI_SUCCESS &&
        cuabi_device_get_properties(&props, dev) == CUABI_SUCCESS) {
        snprintf(target, sizeof target, "sm_%d%d", props.compute_capability_major,
                 props.compute_capability_minor);
        devname = props.name;
    }
    if (arch)
        snprintf(target, sizeof target, "%s", arch);
    int major = 0, minor = 0;
    nv.version(&major, &minor);
    time_t wall = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&wall));
    printf("cuabi %s compile benchmark: segred<float, 256> for %s\n", cuabi_version_string(),
           target);
    printf("date %s; device %s; NVRTC %d.%d; %d reps\n\n", date, devname, major, minor, reps);
    printf("%-44s %10s %10s %10s %s %6s\n", "case", "median", "mean", "min", "  ", "reps");

    const char *names[] = { expr };
    cuabi_program_options o = opts_for(target, names);
    double *t = calloc((size_t)(reps > 10000 ? reps : 10000), sizeof *t);
    double direct_med, cold_med;

    /* Direct and cold alternate, rep by rep, so drift (clock, thermal, other
     * load) hits both alike; medians of many reps tell a 5% difference. */
    direct_once(target); /* warm NVRTC's own start-up */
    double *td = calloc((size_t)reps, sizeof *td);
    for (int i = 0; i < reps; i++) {
        td[i] = direct_once(target);
        cuabi_cache_clear(CUABI_CACHE_CLEAR_ALL);
        double t0 = now();
        cuabi_program *p;
        cuabi_objcode *obj;
        if (cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, segred_src, 0, "segred.cu") ||
            cuabi_program_compile(&obj, p, &o))
            die("cold compile");
        t[i] = now() - t0;
        cuabi_objcode_release(obj);
        cuabi_program_release(p);
    }
    row("direct nvrtcCompileProgram (interleaved)", td, reps, "");
    direct_med = td[reps / 2];
    free(td);
    qsort(t, (size_t)reps, sizeof *t, cmp); /* sorted before taking the median */
    cold_med = t[reps / 2];
    char note[96];
    snprintf(note, sizeof note, "%.3f x direct (target <= 1.05)", cold_med / direct_med);
    row("cuabi cold compile (miss + store)", t, reps, note);

    /* The entry exists now; each child is a fresh process: first with NVRTC
     * loaded beforehand (the hit and module load alone), then as a program
     * starts (the hit names NVRTC from its identity record, never loads it). */
    int gpu = 0, n;
    double first_use[64];
    int children = reps < 64 ? (reps < 5 ? 5 : reps) : 64;
    if ((n = run_children(argv[0], "--child-disk", target, children, t, first_use, &gpu)) < 0)
        return 1;
    row(gpu ? "disk hit, new process, + module load" : "disk hit, new process (no GPU: no load)",
        t, n, "target <= 0.3 ms");
    row("  (first use in a process: driver + NVRTC)", first_use, n, "not in the row above");
    if ((n = run_children(argv[0], "--child-cold", target, children, t, first_use, &gpu)) < 0)
        return 1;
    row("  the same, NVRTC never loaded (issue 13)", t, n, "libnvrtc not mapped");

    cuabi_program *p;
    cuabi_objcode *obj;
    if (cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, segred_src, 0, "segred.cu") ||
        cuabi_program_compile(&obj, p, &o))
        die("memory hit");
    cuabi_objcode_release(obj);
    int loops = 10000;
    for (int i = 0; i < loops; i++) {
        double t0 = now();
        if (cuabi_program_compile(&obj, p, &o))
            die("memory hit");
        cuabi_objcode_release(obj);
        t[i] = now() - t0;
    }
    row("memory hit (compile + release)", t, loops, "target <= 1.5 us (issue 13)");
    cuabi_program_release(p);
    free(t);
    cuabi_cache_clear(CUABI_CACHE_CLEAR_DISK);
    rmdir(dir);
    return 0;
}
