/* Precompile manifests on untrusted text: the TOML reader (src/util/toml.c)
 * must give a tree or a list of errors with lines — no crash, leak, read
 * past the end or unbounded recursion — whose invariants hold (strings
 * NUL-terminated at their length, tables with a key per value, lines within
 * the document); then the manifest reader (src/compile/manifest.c) turns it into
 * sources and problems, each problem with a line in the document and a
 * status. File names are resolved in a private directory holding a source
 * and a header; inputs naming other directories ('/') are only parsed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/manifest.h"
#include "util/toml.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/cuabi-fuzz-manifest-XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (!mkdtemp(dir))
        abort();
    const char *files[][2] = { { "k.cu", "__global__ void k() {}\n" },
                               { "h.h", "#define H 1\n" }, { "k.ptx", ".version 8.0\n" } };
    for (size_t i = 0; i < 3; i++) {
        char path[96];
        snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
        FILE *f = fopen(path, "w");
        if (!f)
            abort();
        fputs(files[i][1], f);
        fclose(f);
    }
    return 0;
}

static int lines_in(const uint8_t *data, size_t size)
{
    int n = 1;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

static void walk(const cuabi__toml_value *v, int max_line, int depth)
{
    if (!v || depth > 64 || v->line < 1 || v->line > max_line)
        __builtin_trap();
    switch (v->kind) {
    case CUABI__TOML_STRING:
        if (!v->str || strlen(v->str) != v->len)
            __builtin_trap();
        break;
    case CUABI__TOML_ARRAY:
    case CUABI__TOML_TABLE:
        for (size_t i = 0; i < v->count; i++) {
            if (v->kind == CUABI__TOML_TABLE &&
                (!v->keys[i] || cuabi__toml_get(v, v->keys[i]) == NULL))
                __builtin_trap();
            walk(v->items[i], max_line, depth + 1);
        }
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cuabi__toml_doc doc;
    if (cuabi__toml_parse(&doc, (const char *)data, size) != 0)
        return 0; /* out of memory: nothing to free */
    int max_line = lines_in(data, size);
    walk(doc.root, max_line, 0);
    for (size_t i = 0; i < doc.num_errors; i++)
        if (doc.errors[i].line < 1 || doc.errors[i].line > max_line ||
            !memchr(doc.errors[i].message, '\0', sizeof doc.errors[i].message))
            __builtin_trap();
    cuabi__toml_free(&doc);

    if (memchr(data, '/', size))
        return 0;
    cuabi__manifest m;
    if (cuabi__manifest_read(&m, (const char *)data, size, "fuzz.toml", dir, 0, "fuzz") !=
        CUABI_SUCCESS)
        return 0; /* out of memory */
    for (size_t i = 0; i < m.num_problems; i++)
        if (m.problems[i].line < 0 || m.problems[i].line > max_line ||
            m.problems[i].status == CUABI_SUCCESS || !m.problems[i].message[0])
            __builtin_trap();
    for (size_t i = 0; i < m.num_sources; i++) {
        const cuabi__manifest_source *s = &m.sources[i];
        if (!s->text || strlen(s->text) != s->size || !s->size || !s->name ||
            s->line < 1 || s->line > max_line ||
            (s->type != CUABI_CODE_CUDA_CXX && s->type != CUABI_CODE_PTX))
            __builtin_trap();
        for (size_t a = 0; a < s->num_archs; a++)
            if (!s->archs[a] || !*s->archs[a])
                __builtin_trap();
        for (size_t h = 0; h < s->options.num_headers; h++)
            if (!s->options.header_names[h] || !s->options.header_contents[h])
                __builtin_trap();
    }
    cuabi__manifest_free(&m);
    return 0;
}
