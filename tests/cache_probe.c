/* cache_probe: compile one file through the compile cache in a fresh
 * process and report where the code came from and which compiler
 * libraries are mapped into the process afterwards (tests/check_cache_cold.sh).
 *
 *   cache_probe FILE --arch sm_XX [--name-expr E]... [--ptx|--ltoir] [-o OUT]
 *               [--load KERNEL] [--libdevice]
 *
 * FILE is CUDA C++, or PTX when it ends in .ptx, or NVVM IR (compiled to
 * PTX unless --ltoir; --libdevice links libdevice) when it ends in .ll or
 * .bc. Prints one line:
 *   hit=<0|1|2> nvrtc=<0|1> nvjitlink=<0|1> nvvm=<0|1> bytes=<size of the code> [gpu=<0|1>]
 * where nvrtc / nvjitlink / nvvm say whether libnvrtc / libnvJitLink /
 * libnvvm appear in /proc/self/maps. With --load, the kernel (a name or name expression) is
 * also loaded on device 0 and its CUfunction looked up first, when a GPU
 * is usable (gpu=1; gpu=0 without one). Uses only the public API (links
 * libcuabi.so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    const char *file = NULL, *arch = NULL, *out = NULL, *load = NULL, *names[16];
    size_t nnames = 0;
    cuabi_code_type output = CUABI_CODE_CUBIN;
    int libdevice = 0, output_given = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc)
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
        else
            file = argv[i];
    }
    size_t text_size = 0;
    char *text = file ? slurp(file, &text_size) : NULL;
    if (!text || !arch) {
        fprintf(stderr, "usage: cache_probe FILE --arch sm_XX [--name-expr E]... "
                        "[--ptx|--ltoir] [-o OUT]\n");
        return 2;
    }
    size_t len = strlen(file);
    const char *ext = strrchr(file, '.');
    cuabi_code_type type = ext && !strcmp(ext, ".ptx") ? CUABI_CODE_PTX
                         : ext && (!strcmp(ext, ".ll") || !strcmp(ext, ".bc")) ? CUABI_CODE_NVVM
                         : CUABI_CODE_CUDA_CXX;
    (void)len;
    if (type == CUABI_CODE_NVVM && !output_given)
        output = CUABI_CODE_PTX; /* libNVVM makes no CUBIN */
    cuabi_program *p;
    cuabi_objcode *obj;
    cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
    o.arch = arch;
    o.output = output;
    o.name_expressions = names;
    o.num_name_expressions = nnames;
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
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
            fprintf(stderr, "cache_probe: cannot write %s\n", out);
            return 1;
        }
    }
    int gpu = -1, ndev = 0;
    if (load) {
        cuabi_device *dev;
        cuabi_kernel *k;
        uintptr_t fn = 0;
        gpu = cuabi_device_count(&ndev) == CUABI_SUCCESS && ndev > 0;
        if (gpu && (cuabi_device_get(&dev, 0) != CUABI_SUCCESS ||
                    cuabi_objcode_get_kernel(&k, obj, load) != CUABI_SUCCESS ||
                    cuabi_kernel_function(&fn, k, dev) != CUABI_SUCCESS || !fn)) {
            fprintf(stderr, "cache_probe: loading %s: %s\n", load, cuabi_last_error()->message);
            return 1;
        }
        if (gpu) {
            cuabi_kernel_release(k);
            cuabi_device_release(dev);
        }
    }
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
