/* Reading whole files: see file.h. */
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

cuabi_status cuabi__read_file(const char *path, void **data, size_t *size, const char *caller)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cuabi__error(CUABI_ERROR_IO, "%s: cannot open '%s': %s", caller, path,
                            strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return cuabi__error(CUABI_ERROR_IO, "%s: '%s' is not a regular file", caller, path);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = cuabi__malloc(n + 1);
    if (!buf) {
        fclose(f);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != n) {
        cuabi__free(buf);
        return cuabi__error(CUABI_ERROR_IO, "%s: reading '%s' failed: %s", caller, path,
                            err ? strerror(err) : "file changed size while read");
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return CUABI_SUCCESS;
}
