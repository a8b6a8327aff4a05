/* cache_probe: compile one file, or link files, through the compile cache
 * in a fresh process and report where the code came from and which compiler
 * libraries are mapped into the process afterwards (tests/compile/check_cache_cold.sh).
 *
 *   cache_probe FILE --arch sm_XX [--name-expr E]... [--ptx|--ltoir [--rdc]]
 *               [-o OUT] [--load KERNEL] [--libdevice]
 *   cache_probe --link FILE... --arch sm_XX [--lto] [-O N] [--ptx] [-o OUT]
 *               [--load KERNEL]
 *
 * FILE is CUDA C++, or PTX when it ends in .ptx, or NVVM IR (compiled to
 * PTX unless --ltoir; --libdevice links libdevice) when it ends in .ll or
 * .bc; --rdc compiles relocatable
 * device code for LTO (-rdc -dlto). --link links the files (their kind
 * detected from their bytes) with cuabi_linker, and hit= is the linker's.
 * Prints one line (--link adds link_ms=, create to complete):
 *   hit=<0|1|2> nvrtc=<0|1> nvjitlink=<0|1> nvvm=<0|1> bytes=<size of the code> [gpu=<0|1>]
 * where nvrtc / nvjitlink / nvvm say whether libnvrtc / libnvJitLink /
 * libnvvm appear in /proc/self/maps. With --load, the kernel (a name or name expression) is
 * also loaded on device 0 and its CUfunction looked up first, when a GPU
 * is usable (gpu=1; gpu=0 without one). Uses only the public API (links
 * libcuabi.so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuabi.h"

static int mapped(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

static char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *size = (size_t)n;
    }
    return buf;
}

static int write_out(const char *out, const void *data, size_t size)
{
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "cache_probe: cannot write %s\n", out);
        return 1;
    }
    return 0;
}

/* --load: load `name` of `obj` on device 0 and look its CUfunction up.
 * 1 done, 0 no GPU, -2 failed (said on stderr). */
static int load_kernel(cuabi_objcode *obj, const char *name)
{
    cuabi_device *dev;
    cuabi_kernel *k;
    uintptr_t fn = 0;
    int ndev = 0;
    if (cuabi_device_count(&ndev) != CUABI_SUCCESS || ndev == 0)
        return 0;
    if (cuabi_device_get(&dev, 0) != CUABI_SUCCESS ||
        cuabi_objcode_get_kernel(&k, obj, name) != CUABI_SUCCESS ||
        cuabi_kernel_function(&fn, k, dev) != CUABI_SUCCESS || !fn) {
        fprintf(stderr, "cache_probe: loading %s: %s\n", name, cuabi_last_error()->message);
        return -2;
    }
    cuabi_kernel_release(k);
    cuabi_device_release(dev);
    return 1;
}

/* --link: the linker through the cache. */
static int link_files(const char **files, size_t n, const char *arch, int lto, int opt,
                      cuabi_code_type output, const char *out, const char *load)
{
    cuabi_linker_options o = CUABI_LINKER_OPTIONS_INIT;
    o.arch = arch;
    o.lto = lto;
    o.optimization = opt;
    cuabi_linker *l;
    cuabi_objcode *obj;
    int hit = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cuabi_status st = cuabi_linker_create(&l, &o);
    for (size_t i = 0; st == CUABI_SUCCESS && i < n; i++)
        st = cuabi_linker_add_file(l, CUABI_CODE_NONE, files[i]);
    if (st == CUABI_SUCCESS)
        st = cuabi_linker_complete(&obj, l, output);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st == CUABI_SUCCESS)
        st = cuabi_linker_cache_hit(&hit, l);
    if (st != CUABI_SUCCESS) {
        fprintf(stderr, "cache_probe: %s\n", cuabi_last_error()->message);
        return 1;
    }
    const void *data;
    size_t size = 0;
    cuabi_objcode_bytes(&data, &size, obj);
    if (out && write_out(out, data, size) != 0)
        return 1;
    int gpu = load ? load_kernel(obj, load) : -1;
    if (gpu < -1)
        return 1;
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("hit=%d nvrtc=%d nvjitlink=%d bytes=%zu link_ms=%.3f", hit, mapped("libnvrtc"),
           mapped("libnvJitLink"), size, ms);
    if (gpu >= 0)
        printf(" gpu=%d", gpu);
    printf("\n");
    cuabi_objcode_release(obj);
    cuabi_linker_destroy(l);
    return 0;
}

int main(int argc, char **argv)
{
    const char *file = NULL, *arch = NULL, *out = NULL, *load = NULL, *names[16], *links[16];
    size_t nnames = 0, nlinks = 0;
    int link = 0, lto = 0, rdc = 0, opt = -1;
    cuabi_code_type output = CUABI_CODE_CUBIN;
    int libdevice = 0, output_given = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--link"))
            link = 1;
        else if (!strcmp(argv[i], "--lto"))
            lto = 1;
        else if (!strcmp(argv[i], "--rdc"))
            rdc = 1;
        else if (!strcmp(argv[i], "-O") && i + 1 < argc)
            opt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--name-expr") && i + 1 < argc && nnames < 16)
            names[nnames++] = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--load") && i + 1 < argc)
            load = argv[++i];
        else if (!strcmp(argv[i], "--ptx"))
            output = CUABI_CODE_PTX, output_given = 1;
        else if (!strcmp(argv[i], "--ltoir"))
            output = CUABI_CODE_LTOIR, output_given = 1;
        else if (!strcmp(argv[i], "--libdevice"))
            libdevice = 1;
        else if (link && nlinks < 16)
            links[nlinks++] = argv[i];
        else
            file = argv[i];
    }
    if (link && nlinks && arch)
        return link_files(links, nlinks, arch, lto, opt, output, out, load);
    size_t text_size = 0;
    char *text = file ? slurp(file, &text_size) : NULL;
    if (!text || !arch) {
        fprintf(stderr, "usage: cache_probe FILE --arch sm_XX [--name-expr E]... "
                        "[--ptx|--ltoir [--rdc]] [-o OUT] [--load KERNEL]\n"
                        "       cache_probe --link FILE... --arch sm_XX [--lto] [-O N] [--ptx] "
                        "[-o OUT] [--load KERNEL]\n");
        return 2;
    }
    const char *ext = strrchr(file, '.');
    cuabi_code_type type = ext && !strcmp(ext, ".ptx") ? CUABI_CODE_PTX
                         : ext && (!strcmp(ext, ".ll") || !strcmp(ext, ".bc")) ? CUABI_CODE_NVVM
                         : CUABI_CODE_CUDA_CXX;
    if (type == CUABI_CODE_NVVM && !output_given)
        output = CUABI_CODE_PTX; /* libNVVM makes no CUBIN */
    cuabi_program *p;
    cuabi_objcode *obj;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = arch;
    o.output = output;
    o.name_expressions = names;
    o.num_name_expressions = nnames;
    o.relocatable = o.lto = rdc;
    o.libdevice = libdevice;
    int hit = -1;
    if (cuabi_program_create(&p, type, text, text_size, file) != CUABI_SUCCESS ||
        cuabi_program_compile(&obj, p, &o) != CUABI_SUCCESS ||
        cuabi_program_cache_hit(&hit, p) != CUABI_SUCCESS) {
        fprintf(stderr, "cache_probe: %s\n", cuabi_last_error()->message);
        return 1;
    }
    const void *data;
    size_t size = 0;
    cuabi_objcode_bytes(&data, &size, obj);
    for (size_t i = 0; i < nnames; i++) {
        const char *low;
        if (cuabi_objcode_lowered_name(&low, obj, names[i]) != CUABI_SUCCESS) {
            fprintf(stderr, "cache_probe: %s\n", cuabi_last_error()->message);
            return 1;
        }
    }
    if (out && write_out(out, data, size) != 0)
        return 1;
    int gpu = load ? load_kernel(obj, load) : -1;
    if (gpu < -1)
        return 1;
    printf("hit=%d nvrtc=%d nvjitlink=%d nvvm=%d bytes=%zu", hit, mapped("libnvrtc"),
           mapped("libnvJitLink"), mapped("libnvvm"), size);
    if (gpu >= 0)
        printf(" gpu=%d", gpu);
    printf("\n");
    cuabi_objcode_release(obj);
    cuabi_program_release(p);
    free(text);
    return 0;
}
