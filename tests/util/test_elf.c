/* CUBIN parsing without a GPU: the resources read from the ELF match what
 * ptxas reported when it built the image (tests/fixtures/data/objcode_kernels_smXX.*),
 * and no bytes at all make the parser crash or leak. */
#include "testutil.h"
#include "util/cubin_elf.h"

typedef struct blob { void *data; size_t size; } blob;

static blob read_data(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/%s", cuabi_test_srcdir(), name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    blob b = { malloc((size_t)n + 1), (size_t)n };
    ck_assert_uint_eq(fread(b.data, 1, (size_t)n, f), (size_t)n);
    ((char *)b.data)[n] = '\0';
    fclose(f);
    return b;
}

/* One entry of a ptxas -v report. */
typedef struct expect {
    char name[128];
    int regs, barriers;
    long smem, frame;
} expect;

/* Parse "ptxas info : Compiling entry function 'X'", the "N bytes stack
 * frame" line and the "Used N registers, used B barriers, S bytes smem" line. */
static size_t parse_report(const char *text, expect *out, size_t max)
{
    size_t n = 0;
    const char *p = text;
    while (n < max && (p = strstr(p, "Compiling entry function '"))) {
        expect *e = &out[n++];
        memset(e, 0, sizeof *e);
        p += strlen("Compiling entry function '");
        const char *q = strchr(p, '\'');
        snprintf(e->name, sizeof e->name, "%.*s", (int)(q - p), p);
        const char *frame = strstr(q, "bytes stack frame");
        const char *line = frame;
        while (line > q && line[-1] != '\n')
            line--;
        e->frame = strtol(line, NULL, 10);
        const char *used = strstr(q, "Used ");
        e->regs = (int)strtol(used + 5, NULL, 10);
        const char *bar = strstr(used, "used ");
        e->barriers = (int)strtol(bar + 5, NULL, 10);
        const char *eol = strchr(used, '\n');
        const char *smem = strstr(used, "bytes smem");
        if (smem && (!eol || smem < eol)) {
            const char *s = smem - 2;
            while (s > used && s[-1] != ' ')
                s--;
            e->smem = strtol(s, NULL, 10);
        }
        p = q;
    }
    return n;
}

static void check_against_ptxas(int arch)
{
    char cubin[64], report[64];
    snprintf(cubin, sizeof cubin, "objcode_kernels_sm%d.cubin", arch);
    snprintf(report, sizeof report, "objcode_kernels_sm%d.txt", arch);
    blob b = read_data(cubin), r = read_data(report);
    expect want[32];
    size_t n = parse_report(r.data, want, 32);
    ck_assert_uint_ge(n, 7);
    cuabi__elf_info *info;
    ck_assert_ok(cuabi__elf_parse(&info, b.data, b.size, "test", cubin));
    ck_assert_int_eq(info->arch, arch);
    ck_assert_uint_eq(info->kernel_count, n);
    for (size_t i = 0; i < n; i++) {
        const cuabi__elf_kernel *k = cuabi__elf_find(info, want[i].name);
        ck_assert_msg(k != NULL, "sm_%d: kernel %s not found", arch, want[i].name);
        ck_assert_msg(k->res.registers == want[i].regs, "sm_%d %s: %d registers, ptxas says %d",
                      arch, want[i].name, k->res.registers, want[i].regs);
        ck_assert_msg((long)k->res.shared_static_bytes == want[i].smem,
                      "sm_%d %s: %zu bytes smem, ptxas says %ld", arch, want[i].name,
                      k->res.shared_static_bytes, want[i].smem);
        ck_assert_msg(k->res.barriers == want[i].barriers, "sm_%d %s: %d barriers, ptxas says %d",
                      arch, want[i].name, k->res.barriers, want[i].barriers);
        ck_assert_msg((long)k->res.local_bytes == want[i].frame,
                      "sm_%d %s: %zu local bytes, ptxas says %ld", arch, want[i].name,
                      k->res.local_bytes, want[i].frame);
        ck_assert_int_eq(k->res.arch, arch);
        ck_assert(k->params_known);
    }
    cuabi__elf_free(info);
    free(b.data);
    free(r.data);
}

START_TEST(resources_match_ptxas_sm75) { check_against_ptxas(75); }
END_TEST
START_TEST(resources_match_ptxas_sm80) { check_against_ptxas(80); }
END_TEST
START_TEST(resources_match_ptxas_sm90) { check_against_ptxas(90); }
END_TEST

START_TEST(launch_bounds_params_and_clusters)
{
    blob b = read_data("objcode_kernels_sm90.cubin");
    cuabi__elf_info *info;
    ck_assert_ok(cuabi__elf_parse(&info, b.data, b.size, "test", "sm90"));
    const cuabi__elf_kernel *add = cuabi__elf_find(info, "add");
    ck_assert_ptr_nonnull(add);
    ck_assert_int_eq(add->res.max_threads_per_block, 256);
    ck_assert_int_eq(add->res.max_threads[0], 256);
    ck_assert_int_eq(add->res.max_registers, 128); /* __launch_bounds__(256, 2) */
    ck_assert_uint_eq(add->res.param_count, 4);
    ck_assert_uint_eq(add->res.param_bytes, 32);
    const size_t add_off[] = { 0, 8, 16, 24 }, add_size[] = { 8, 8, 4, 8 };
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(add->param_offsets[i], add_off[i]);
        ck_assert_uint_eq(add->param_sizes[i], add_size[i]);
    }
    ck_assert_uint_eq(add->res.code_bytes % 128, 0);
    ck_assert_uint_gt(add->res.const_bytes, add->res.param_bytes);
    /* A 20000-byte parameter uses the V2 parameter record. */
    const cuabi__elf_kernel *p = cuabi__elf_find(info, "p20k");
    ck_assert_ptr_nonnull(p);
    const size_t p_off[] = { 0, 4, 20004, 20008 }, p_size[] = { 1, 20000, 2, 8 };
    ck_assert_uint_eq(p->res.param_count, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(p->param_offsets[i], p_off[i]);
        ck_assert_uint_eq(p->param_sizes[i], p_size[i]);
    }
    const cuabi__elf_kernel *c = cuabi__elf_find(info, "clus");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->res.cluster_dim[0], 2);
    ck_assert_int_eq(c->res.cluster_dim[1], 1);
    const cuabi__elf_kernel *e = cuabi__elf_find(info, "empty");
    ck_assert_uint_eq(e->res.param_count, 0);
    ck_assert_int_eq(e->res.max_threads_per_block, 0);
    const cuabi__elf_kernel *s = cuabi__elf_find(info, "spill");
    ck_assert_uint_eq(s->res.stack_bytes, 800);
    ck_assert_int_eq(s->res.max_threads_per_block, 32);
    /* Dynamic shared memory only: the section holds just the reserved 1 KiB. */
    ck_assert_uint_eq(cuabi__elf_find(info, "dyn")->res.shared_static_bytes, 0);
    ck_assert_ptr_null(cuabi__elf_find(info, "rec"));
    ck_assert_ptr_null(cuabi__elf_find(info, "_Z3reci")); /* a device function */
    cuabi__elf_free(info);
    free(b.data);
}
END_TEST

START_TEST(copy_resources_checks_version)
{
    blob b = read_data("objcode_kernels_sm80.cubin");
    cuabi__elf_info *info;
    ck_assert_ok(cuabi__elf_parse(&info, b.data, b.size, "test", "sm80"));
    cuabi_kernel_resources r = CUABI_KERNEL_RESOURCES_INIT;
    ck_assert_ok(cuabi__elf_copy_resources(&r, &info->kernels[0], "test"));
    ck_assert_uint_eq(r.version, CUABI_KERNEL_RESOURCES_VERSION);
    r.version = 0;
    ck_assert_status(cuabi__elf_copy_resources(&r, &info->kernels[0], "test"),
                     CUABI_ERROR_INVALID_VERSION);
    r.version = 99;
    ck_assert_status(cuabi__elf_copy_resources(&r, &info->kernels[0], "test"),
                     CUABI_ERROR_INVALID_VERSION);
    ck_assert_status(cuabi__elf_copy_resources(NULL, &info->kernels[0], "test"),
                     CUABI_ERROR_INVALID_ARGUMENT);
    cuabi__elf_free(info);
    free(b.data);
}
END_TEST

START_TEST(bad_images_are_refused)
{
    cuabi__elf_info *info = (cuabi__elf_info *)1;
    ck_assert_status(cuabi__elf_parse(&info, NULL, 0, "f", "x"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_ptr_null(info);
    ck_assert_status(cuabi__elf_parse(&info, "\x7f" "ELF", 4, "f", "x"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("f: x is not a valid CUBIN");
    unsigned char junk[256];
    for (int i = 0; i < 256; i++)
        junk[i] = (unsigned char)(i * 37 + 11);
    ck_assert_status(cuabi__elf_parse(&info, junk, sizeof junk, "f", "x"),
                     CUABI_ERROR_INVALID_IMAGE);
    blob b = read_data("objcode_kernels_sm90.cubin");
    /* A 32-bit ELF, and one for another machine. */
    unsigned char *p = b.data;
    p[4] = 1;
    ck_assert_status(cuabi__elf_parse(&info, b.data, b.size, "f", "x"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("64-bit");
    p[4] = 2;
    p[18] = 62;
    ck_assert_status(cuabi__elf_parse(&info, b.data, b.size, "f", "x"), CUABI_ERROR_INVALID_IMAGE);
    ck_assert_error_mentions("EM_CUDA");
    p[18] = 190;
    /* Every truncation fails cleanly (or parses, when only the tail went). */
    for (size_t n = 0; n < b.size; n += (n < 128 ? 1 : 61)) {
        cuabi_status st = cuabi__elf_parse(&info, b.data, n, "f", "x");
        if (st == CUABI_SUCCESS) { /* only the program headers at the end went */
            ck_assert_uint_gt(n, b.size / 2);
            cuabi__elf_free(info);
            continue;
        }
        ck_assert_status(st, CUABI_ERROR_INVALID_IMAGE);
        ck_assert_error_mentions("not a valid CUBIN");
    }
    free(b.data);
}
END_TEST

/* Flip random bytes and words of real CUBINs: any outcome but a crash, a
 * leak or an out-of-bounds read (the sanitizer build checks those). */
START_TEST(mutations_never_crash)
{
    static const char *const files[] = { "objcode_kernels_sm75.cubin",
                                         "objcode_kernels_sm90.cubin" };
    unsigned long seed = 12345;
    for (int f = 0; f < 2; f++) {
        blob b = read_data(files[f]);
        unsigned char *copy = malloc(b.size);
        for (int iter = 0; iter < 1500; iter++) {
            memcpy(copy, b.data, b.size);
            int flips = 1 + iter % 8;
            for (int j = 0; j < flips; j++) {
                seed = seed * 6364136223846793005UL + 1442695040888963407UL;
                size_t at = (seed >> 20) % b.size;
                /* Bias toward headers and tables, where offsets live. */
                if (iter % 3 == 0)
                    at %= 1024;
                copy[at] = (unsigned char)(seed >> 8);
                if (iter % 5 == 0 && at + 4 <= b.size)
                    memset(copy + at, 0xff, 4);
            }
            cuabi__elf_info *info = NULL;
            cuabi_status st = cuabi__elf_parse(&info, copy, b.size, "fuzz", "mutant");
            ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_INVALID_IMAGE);
            ck_assert((st == CUABI_SUCCESS) == (info != NULL));
            cuabi__elf_free(info);
        }
        free(copy);
        free(b.data);
    }
}
END_TEST

START_TEST(allocation_failures_do_not_leak)
{
    blob b = read_data("objcode_kernels_sm90.cubin");
    for (long n = 1; n < 200; n++) {
        cuabi__elf_info *info = NULL;
        cuabi__alloc_fail_at(n, false);
        cuabi_status st = cuabi__elf_parse(&info, b.data, b.size, "f", "x");
        cuabi__alloc_fail_at(0, false);
        ck_assert(st == CUABI_SUCCESS || st == CUABI_ERROR_OUT_OF_MEMORY);
        cuabi__elf_free(info);
        if (st == CUABI_SUCCESS)
            break;
    }
    free(b.data);
}
END_TEST

int main(void)
{
    cuabi_test_no_driver();
    Suite *s = suite_create("elf");
    TCase *tc = tcase_create("elf");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, resources_match_ptxas_sm75);
    tcase_add_test(tc, resources_match_ptxas_sm80);
    tcase_add_test(tc, resources_match_ptxas_sm90);
    tcase_add_test(tc, launch_bounds_params_and_clusters);
    tcase_add_test(tc, copy_resources_checks_version);
    tcase_add_test(tc, bad_images_are_refused);
    tcase_add_test(tc, mutations_never_crash);
    tcase_add_test(tc, allocation_failures_do_not_leak);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
