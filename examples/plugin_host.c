/* A host program that loads libcuabi at run time with one dlsym():
 *
 *     ./plugin_host [path/to/libcuabi.so.1]
 *
 * It needs only the headers at build time (no -lcuabi): cuabi_get_api()
 * returns a versioned table of every entry point. */
#include <dlfcn.h>
#include <stdio.h>

#include <cuabi.h>

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "libcuabi.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "plugin_host: cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    cuabi_get_api_fn get_api = (cuabi_get_api_fn)dlsym(lib, "cuabi_get_api");
    const cuabi_api *api = NULL;
    if (!get_api || get_api(CUABI_API_TABLE_VERSION, &api) != CUABI_SUCCESS) {
        fprintf(stderr, "plugin_host: %s has no usable cuabi_get_api\n", path);
        dlclose(lib);
        return 1;
    }
    printf("loaded cuabi %s (ABI %u), table version %u with %zu bytes\n", api->version_string(),
           api->abi_version(), api->version, api->size);
    cuabi_runtime_info info = CUABI_RUNTIME_INFO_INIT;
    api->runtime_info_get(&info);
    printf("NVRTC: %s\n", info.nvrtc_status == CUABI_SUCCESS ? info.nvrtc_path : info.nvrtc_error);
    int n = 0;
    cuabi_status st = api->device_count(&n);
    if (st == CUABI_SUCCESS)
        printf("GPUs: %d\n", n);
    else
        printf("GPUs: none (%s)\n", api->last_error()->message);
    /* Misuse through the table is caught like any other call. */
    st = api->stream_synchronize(NULL);
    printf("stream_synchronize(NULL) -> %s\n", api->status_name(st));
    dlclose(lib);
    return st == CUABI_ERROR_INVALID_HANDLE ? 0 : 1;
}
