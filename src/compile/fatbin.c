/* The cuabi_fatbin_* functions: fatbins made from compiled images, their
 * entries listed and extracted as objcodes (fatbin.h says what a fatbin
 * is; fatbin_read.c reads one, fatbin_pack.c makes one). */
#include "compile/fatbin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/code_type.h"
#include "compile/objcode.h"

/* The objcode, which must be a fatbin, parsed. */
static cuabi_status get_fatbin(cuabi__objcode **o, cuabi__fatbin *f, cuabi_objcode *objcode,
                               const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(objcode, CUABI__T_OBJCODE, &obj, caller));
    *o = obj;
    if ((*o)->type != CUABI_CODE_FATBIN)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s is a %s objcode, not a "
                            "fatbin", caller, (*o)->name, cuabi__code_type_name((*o)->type));
    return cuabi__fatbin_parse(f, (*o)->data, (*o)->size, (*o)->name, caller);
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_create(cuabi_objcode **out,
                                               cuabi_objcode **images, size_t count)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(images || count == 0, "%s: images is NULL but count is %zu", __func__,
                     count);
    CUABI__CHECK_ARG(count > 0 && count <= 64, "%s: count is %zu; give 1 to 64 images",
                     __func__, count);
    cuabi__fatbin_input in[64];
    for (size_t i = 0; i < count; i++) {
        cuabi__objcode *o;
        CUABI__GET(o, images[i], OBJCODE);
        in[i] = (cuabi__fatbin_input){ o->type, o->data, o->size, 0 };
        if (o->type == CUABI_CODE_CUBIN) {
            const cuabi__elf_info *elf;
            CUABI__TRY(cuabi__objcode_elf(o, NULL, &elf, __func__));
            in[i].arch = (unsigned)elf->arch;
        }
    }
    void *data;
    size_t size;
    const char *packer;
    CUABI__TRY(cuabi__fatbin_pack(&data, &size, &packer, in, count, __func__));
    cuabi__objcode *o;
    CUABI__TRY(cuabi__objcode_new_trusted(&o, CUABI_CODE_FATBIN, data, size, "<fatbin>"));
    *out = CUABI__HANDLE(o, cuabi_objcode);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_image_count(size_t *out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    *out = f.count;
    cuabi__fatbin_free(&f);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_image_info(cuabi_code_type *out, int *arch,
                                                   cuabi_objcode *objcode, size_t index)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__CHECK_ARG(arch, "%s: arch is NULL", __func__);
    *out = CUABI_CODE_NONE;
    *arch = 0;
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    cuabi_status st = CUABI_SUCCESS;
    if (index >= f.count)
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: index %zu is out of range (%s "
                          "holds %zu images)", __func__, index, o->name, f.count);
    else
        *out = f.images[index].type, *arch = (int)f.images[index].arch;
    cuabi__fatbin_free(&f);
    return st;
}

/* No subtraction: a fatbin may claim any 32-bit architecture number
 * (fuzz_fatbin found INT_MAX - (-1) overflowing). */
static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_archs(int *out, size_t capacity, size_t *count,
                                              cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(count, "%s: count is NULL", __func__);
    *count = 0;
    CUABI__CHECK_ARG(out || capacity == 0, "%s: out is NULL but capacity is %zu", __func__,
                     capacity);
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    int *all = cuabi__malloc((f.count ? f.count : 1) * sizeof *all);
    if (!all) {
        cuabi__fatbin_free(&f);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    size_t n = 0;
    for (size_t i = 0; i < f.count; i++)
        if (f.images[i].type == CUABI_CODE_CUBIN)
            all[n++] = (int)f.images[i].arch;
    qsort(all, n, sizeof *all, cmp_int);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || all[u - 1] != all[i])
            all[u++] = all[i];
    for (size_t i = 0; i < u && i < capacity; i++)
        out[i] = all[i];
    *count = u;
    cuabi__free(all);
    cuabi__fatbin_free(&f);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_packer(const char **out, cuabi_objcode *objcode)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    const cuabi__fatbin_image *m = &f.images[0];
    size_t nv = sizeof CUABI__IDENT_NVFATBIN - 1, fb = sizeof CUABI__IDENT_FATBINARY - 1;
    *out = m->ident_len >= nv && !memcmp(m->ident, CUABI__IDENT_NVFATBIN, nv) ? "nvfatbin"
         : m->ident_len >= fb && !memcmp(m->ident, CUABI__IDENT_FATBINARY, fb) ? "fatbinary" : "";
    cuabi__fatbin_free(&f);
    return CUABI_SUCCESS;
}

/* A new objcode of one image, with the fatbin's name expressions. */
static cuabi_status child(cuabi__objcode **out, cuabi__objcode *o, const cuabi__fatbin_image *m,
                          const char *arch, const char *caller)
{
    bool ptx = m->type == CUABI_CODE_PTX;
    size_t n = ptx ? strnlen((const char *)m->data, m->size) : m->size;
    void *copy = cuabi__malloc(n + 1);
    char name[600];
    if (!copy)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memcpy(copy, m->data, n);
    ((char *)copy)[n] = '\0';
    snprintf(name, sizeof name, "%.500s [%s]", o->name, arch);
    CUABI__TRY(cuabi__objcode_new(out, m->type, copy, n, name));
    const char *sigs = NULL;
    cuabi_status st = cuabi__objcode_signatures(o, &sigs);
    char *sig_copy = st == CUABI_SUCCESS && sigs ? cuabi__strdup(sigs) : NULL;
    if (st == CUABI_SUCCESS && sigs && !sig_copy)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    if (sig_copy)
        cuabi__objcode_set_signatures(*out, sig_copy);
    pthread_mutex_lock(&o->lock);
    for (size_t i = 0; st == CUABI_SUCCESS && i < o->name_count; i++)
        st = cuabi__objcode_add_name(*out, o->names[i].expression, o->names[i].lowered);
    pthread_mutex_unlock(&o->lock);
    if (st != CUABI_SUCCESS) {
        cuabi__object_release(&(*out)->base);
        *out = NULL;
    }
    (void)caller;
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_fatbin_extract(cuabi_objcode **out, cuabi_objcode *objcode,
                                                const char *arch)
{
    cuabi__objcode *o;
    cuabi__fatbin f;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(arch, "%s: arch is NULL", __func__);
    bool virt = !strncmp(arch, "compute_", 8);
    unsigned want = cuabi__fatbin_arch_number(arch);
    CUABI__CHECK_ARG((virt || !strncmp(arch, "sm_", 3)) && want >= 10,
                     "%s: arch \"%s\" is not of the form sm_XX (the CUBIN) or compute_XX (the "
                     "PTX)", __func__, arch);
    CUABI__TRY(get_fatbin(&o, &f, objcode, __func__));
    const cuabi__fatbin_image *m = NULL;
    cuabi_code_type type = virt ? CUABI_CODE_PTX : CUABI_CODE_CUBIN;
    for (size_t i = 0; i < f.count && !m; i++)
        if (f.images[i].type == type && f.images[i].arch == want)
            m = &f.images[i];
    cuabi_status st;
    if (!m) {
        char have[512];
        cuabi__fatbin_describe(&f, have, sizeof have);
        st = cuabi__error(CUABI_ERROR_NOT_FOUND, "%s: %s has no %s for %s (it holds %s)",
                          __func__, o->name, cuabi__code_type_name(type), arch, have);
    } else if (m->compressed) {
        st = cuabi__fatbin_compressed(m, o->name, __func__);
    } else {
        cuabi__objcode *c;
        st = child(&c, o, m, arch, __func__);
        if (st == CUABI_SUCCESS)
            *out = CUABI__HANDLE(c, cuabi_objcode);
    }
    cuabi__fatbin_free(&f);
    return st;
}
