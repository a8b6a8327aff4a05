/* Lifecycle: the shared library dlopen()ed, used (compile, views, DLPack
 * export), dlclose()d and loaded again, twice; and DLPack deleters that run
 * after every cuabi object they refer to has been released — the exported
 * tensor keeps what it needs alive, so its deleter is the last thing. Plain
 * C with exit codes (no Check: it must link only libdl, not libcuabi). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuabi.h"

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

typedef struct api {
    void *lib;
#define F(name) __typeof__(&name) name;
    F(cuabi_memory_resource_host) F(cuabi_memory_resource_release) F(cuabi_buffer_allocate)
    F(cuabi_buffer_destroy) F(cuabi_view_create) F(cuabi_view_release)
    F(cuabi_view_to_dlpack_versioned) F(cuabi_view_to_dlpack) F(cuabi_view_from_dlpack_versioned)
    F(cuabi_program_create) F(cuabi_program_compile) F(cuabi_program_release)
    F(cuabi_objcode_release) F(cuabi_objcode_kernel_count) F(cuabi_last_error)
    F(cuabi_version_string)
#undef F
} api;

static int load(api *a, const char *path)
{
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib)
        FAIL("dlopen %s: %s", path, dlerror());
#define F(name) if (!(*(void **)&a->name = dlsym(a->lib, #name))) FAIL("dlsym %s", #name);
    F(cuabi_memory_resource_host) F(cuabi_memory_resource_release) F(cuabi_buffer_allocate)
    F(cuabi_buffer_destroy) F(cuabi_view_create) F(cuabi_view_release)
    F(cuabi_view_to_dlpack_versioned) F(cuabi_view_to_dlpack) F(cuabi_view_from_dlpack_versioned)
    F(cuabi_program_create) F(cuabi_program_compile) F(cuabi_program_release)
    F(cuabi_objcode_release) F(cuabi_objcode_kernel_count) F(cuabi_last_error)
    F(cuabi_version_string)
#undef F
    return 0;
}

#define OK(expr) do { if ((expr) != CUABI_SUCCESS) FAIL("%s: %s", #expr, a->cuabi_last_error()->message); } while (0)

/* Export a view, release every cuabi object, then run the deleters. */
static int deleters_after_everything(api *a)
{
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    cuabi_view *v;
    int64_t shape[2] = { 4, 4 };
    DLManagedTensorVersioned *t;
    DLManagedTensor *legacy;
    OK(a->cuabi_memory_resource_host(&r));
    OK(a->cuabi_buffer_allocate(&b, r, 64, 64, NULL));
    float *data;
    OK(a->cuabi_view_create(&v, b, 0, CUABI_DTYPE_FLOAT, 32, 2, shape, NULL, 0));
    OK(a->cuabi_view_to_dlpack_versioned(&t, v));
    OK(a->cuabi_view_to_dlpack(&legacy, v));
    OK(a->cuabi_view_release(v));
    OK(a->cuabi_buffer_destroy(b));
    OK(a->cuabi_memory_resource_release(r));
    /* Nothing of ours is referenced by the caller now; the tensors still
     * point at live memory. */
    data = t->dl_tensor.data;
    for (int i = 0; i < 16; i++)
        data[i] = (float)i;
    if (((float *)legacy->dl_tensor.data)[5] != 5.0f)
        FAIL("legacy export does not see the same memory");
    legacy->deleter(legacy);
    t->deleter(t);
    return 0;
}

static int use(api *a)
{
    cuabi_program *p;
    cuabi_objcode *o;
    size_t n;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.arch = "sm_90";
    opts.cache = 0;
    OK(a->cuabi_program_create(&p, CUABI_CODE_CUDA_CXX,
                               "extern \"C\" __global__ void k(int *x) { *x = 1; }", 0, "k.cu"));
    OK(a->cuabi_program_compile(&o, p, &opts));
    OK(a->cuabi_objcode_kernel_count(&n, o));
    if (n != 1)
        FAIL("kernel count %zu", n);
    OK(a->cuabi_objcode_release(o));
    OK(a->cuabi_program_release(p));
    return deleters_after_everything(a);
}

/* A thread that uses the library (an error record with a log, handles, a
 * freed buffer parked for reuse) and ends only after the library is
 * unloaded: its thread-specific data destructors must not point into the
 * unmapped library. */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static void *late_thread(void *arg)
{
    api *a = arg;
    cuabi_memory_resource *r;
    cuabi_buffer *b;
    if (a->cuabi_memory_resource_host(&r) != CUABI_SUCCESS)
        return (void *)1;
    if (a->cuabi_buffer_allocate(&b, r, 64, 0, NULL) != CUABI_SUCCESS)
        return (void *)1;
    a->cuabi_buffer_destroy(b);
    a->cuabi_memory_resource_release(r);
    cuabi_program *p;
    cuabi_objcode *o;
    cuabi_program_options opts = CUABI_PROGRAM_OPTIONS_INIT;
    opts.cache = 0;
    if (a->cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, "this is not C++", 0, "bad.cu") == 0) {
        (void)a->cuabi_program_compile(&o, p, &opts); /* fails: leaves a log */
        a->cuabi_program_release(p);
    }
    pthread_mutex_lock(&gate); /* until main has dlclose()d */
    pthread_mutex_unlock(&gate);
    return NULL;
}

/* Whether libcuabi.so is still in the address space. */
static int mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "libcuabi.so") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* The handle registry keeps its slot chunks at unload on purpose (see
 * src/util/handle.c): not a leak this test checks. */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    const char *builddir = getenv("CUABI_TEST_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/.libs/libcuabi.so", argc > 1 ? argv[1] : builddir ? builddir : ".");
    for (int round = 0; round < 3; round++) {
        api a;
        if (load(&a, path) || use(&a))
            return 1;
        pthread_t late;
        pthread_mutex_lock(&gate);
        if (pthread_create(&late, NULL, late_thread, &a) != 0)
            FAIL("pthread_create");
        struct timespec ts = { 0, 300 * 1000 * 1000 };
        nanosleep(&ts, NULL); /* let it use the library */
        if (dlclose(a.lib) != 0)
            FAIL("dlclose: %s", dlerror());
        pthread_mutex_unlock(&gate);
        void *rv;
        pthread_join(late, &rv); /* the thread ends after the unload */
        if (rv)
            FAIL("late thread could not use the library");
        printf("round %d: loaded, used, deleters after release, dlclose()d; %s\n", round + 1,
               mapped() ? "still mapped (something holds it)" : "unmapped");
    }
    return 0;
}
