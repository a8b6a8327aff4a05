/* CUBIN (ELF64) parsing without a GPU; see cubin_elf.h for where the facts live.
 *
 * The reader never trusts an offset or a size: every access goes through
 * rd_* helpers that check the range against the image first, and section
 * ranges are validated once when the section table is read. */
#include <string.h>

#include "util/cubin_elf.h"

enum {
    EHDR_SIZE = 64, SHDR_SIZE = 64, SYM_SIZE = 24,
    EM_CUDA = 190, SHT_SYMTAB = 2, SHT_NOBITS = 8, SHT_CUDA_INFO = 0x70000000,
    STT_FUNC = 2, STO_CUDA_ENTRY = 0x10,
    /* .nv.info attribute formats: NVAL/BVAL/HVAL take 4 bytes in all,
     * SVAL is followed by a 16-bit size and that many bytes. */
    EIFMT_NVAL = 1, EIFMT_BVAL = 2, EIFMT_HVAL = 3, EIFMT_SVAL = 4,
    /* The attributes we read. */
    EIATTR_MAX_THREADS = 0x05, EIATTR_REQNTID = 0x10, EIATTR_FRAME_SIZE = 0x11,
    EIATTR_MIN_STACK_SIZE = 0x12, EIATTR_KPARAM_INFO = 0x17,
    EIATTR_CBANK_PARAM_SIZE = 0x19, EIATTR_MAXREG_COUNT = 0x1b,
    EIATTR_MAX_STACK_SIZE = 0x23, EIATTR_REGCOUNT = 0x2f,
    EIATTR_CTA_PER_CLUSTER = 0x3d, EIATTR_MAX_CLUSTER_RANK = 0x3f,
    EIATTR_KPARAM_INFO_V2 = 0x45, EIATTR_NUM_BARRIERS = 0x4c,
    /* sm_90's system-reserved shared memory when no .nv.reservedSmem.cap. */
    RESERVED_SMEM_DEFAULT = 1024,
};

typedef struct section {
    uint32_t name, type, info, link;
    uint64_t flags, offset, size;
    const char *sname;               /* NUL-terminated inside the image, or "" */
} section;

typedef struct reader {
    const uint8_t *p;
    size_t size;
    const char *caller, *what;
    section *sec;
    uint16_t nsec;
} reader;

static bool in_range(size_t size, uint64_t off, uint64_t len)
{
    return off <= size && len <= size - off;
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static cuabi_status bad(const reader *r, const char *why)
{
    return cuabi__error(CUABI_ERROR_INVALID_IMAGE,
                        "%s: %s is not a valid CUBIN: %s", r->caller, r->what, why);
}

/* The NUL-terminated string at `off` of string section `s`, or NULL when
 * it runs past the section. */
static const char *str_at(const reader *r, uint32_t sidx, uint64_t off)
{
    if (sidx >= r->nsec || r->sec[sidx].type == SHT_NOBITS)
        return NULL;
    const section *s = &r->sec[sidx];
    if (off >= s->size)
        return NULL;
    const char *start = (const char *)r->p + s->offset + off;
    return memchr(start, 0, s->size - off) ? start : NULL;
}

bool cuabi__elf_is_elf(const void *data, size_t size)
{
    return data && size >= 4 && memcmp(data, "\x7f" "ELF", 4) == 0;
}

static cuabi_status read_sections(reader *r, int *arch)
{
    const uint8_t *p = r->p;
    if (r->size < EHDR_SIZE || !cuabi__elf_is_elf(p, r->size))
        return bad(r, "no ELF header");
    if (p[4] != 2 || p[5] != 1)
        return bad(r, "not a 64-bit little-endian ELF (32-bit CUBINs are not supported)");
    if (rd16(p + 18) != EM_CUDA)
        return bad(r, "the ELF machine is not EM_CUDA (190)");
    /* The SM number sits in the low byte of e_flags for the old ABI
     * (OS ABI 0x33) and in the second byte for the current one (0x41). */
    uint32_t flags = rd32(p + 48);
    *arch = p[7] == 0x41 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
    uint64_t shoff = rd64(p + 40);
    uint16_t shentsize = rd16(p + 58), shnum = rd16(p + 60), shstrndx = rd16(p + 62);
    if (shnum == 0)
        return bad(r, "no section table");
    if (shentsize < SHDR_SIZE || !in_range(r->size, shoff, (uint64_t)shnum * shentsize))
        return bad(r, "the section table lies outside the image (truncated?)");
    r->sec = cuabi__calloc(shnum, sizeof *r->sec);
    if (!r->sec)
        return CUABI_ERROR_OUT_OF_MEMORY;
    r->nsec = shnum;
    for (uint16_t i = 0; i < shnum; i++) {
        const uint8_t *h = p + shoff + (uint64_t)i * shentsize;
        section *s = &r->sec[i];
        s->name = rd32(h);
        s->type = rd32(h + 4);
        s->flags = rd64(h + 8);
        s->offset = rd64(h + 24);
        s->size = rd64(h + 32);
        s->link = rd32(h + 40);
        s->info = rd32(h + 44);
        if (s->type != SHT_NOBITS && !in_range(r->size, s->offset, s->size))
            return bad(r, "a section lies outside the image (truncated?)");
    }
    if (shstrndx >= shnum)
        return bad(r, "the section name table index is out of range");
    for (uint16_t i = 0; i < shnum; i++) {
        const char *n = str_at(r, shstrndx, r->sec[i].name);
        r->sec[i].sname = n ? n : "";
    }
    return CUABI_SUCCESS;
}

/* Per-symbol facts from the global .nv.info section. */
typedef struct symfacts {
    int regs;            /* -1 unknown */
    uint32_t frame, min_stack, max_stack;
} symfacts;

/* Walk the attributes of an .nv.info section, calling fn for each with
 * the attribute, a pointer to its value and the value's length. */
typedef void (*attr_fn)(void *ctx, uint8_t attr, const uint8_t *val, size_t len);
static cuabi_status walk_info(const reader *r, const section *s, attr_fn fn, void *ctx)
{
    const uint8_t *p = r->p + s->offset;
    uint64_t off = 0;
    while (off + 4 <= s->size) {
        uint8_t fmt = p[off], attr = p[off + 1];
        if (fmt == EIFMT_SVAL) {
            uint16_t len = rd16(p + off + 2);
            if (!in_range(s->size, off + 4, len))
                return bad(r, "an .nv.info attribute runs past its section");
            fn(ctx, attr, p + off + 4, len);
            off += 4 + (uint64_t)len;
        } else if (fmt >= EIFMT_NVAL && fmt <= EIFMT_HVAL) {
            fn(ctx, attr, p + off + 2, 2);
            off += 4;
        } else {
            return bad(r, "unknown .nv.info attribute format");
        }
    }
    return CUABI_SUCCESS;
}

typedef struct global_ctx { symfacts *facts; size_t nsyms; } global_ctx;

static void global_attr(void *vctx, uint8_t attr, const uint8_t *val, size_t len)
{
    global_ctx *c = vctx;
    if (len < 8)
        return;
    uint32_t sym = rd32(val), v = rd32(val + 4);
    if (sym >= c->nsyms)
        return;
    symfacts *f = &c->facts[sym];
    switch (attr) {
    case EIATTR_REGCOUNT: f->regs = (int)v; break;
    case EIATTR_FRAME_SIZE: f->frame = v; break;
    case EIATTR_MIN_STACK_SIZE: f->min_stack = v; break;
    case EIATTR_MAX_STACK_SIZE: f->max_stack = v; break;
    default: break;
    }
}

typedef struct param { uint32_t ordinal, offset, size; } param;
typedef struct kernel_ctx {
    cuabi_kernel_resources *res;
    param *params;
    size_t nparams, cap;
    bool oom;
} kernel_ctx;

static void add_param(kernel_ctx *c, uint32_t ordinal, uint32_t offset, uint32_t size)
{
    if (c->nparams == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        param *np = cuabi__realloc(c->params, cap * sizeof *np);
        if (!np) {
            c->oom = true;
            return;
        }
        c->params = np;
        c->cap = cap;
    }
    c->params[c->nparams++] = (param){ ordinal, offset, size };
}

static void kernel_attr(void *vctx, uint8_t attr, const uint8_t *val, size_t len)
{
    kernel_ctx *c = vctx;
    cuabi_kernel_resources *res = c->res;
    switch (attr) {
    case EIATTR_MAX_THREADS:
    case EIATTR_REQNTID:
        if (len >= 12) {
            int *dim = attr == EIATTR_MAX_THREADS ? res->max_threads : res->required_threads;
            for (int i = 0; i < 3; i++)
                dim[i] = (int)rd32(val + 4 * i);
        }
        break;
    case EIATTR_CTA_PER_CLUSTER:
        if (len >= 12)
            for (int i = 0; i < 3; i++)
                res->cluster_dim[i] = (int)rd32(val + 4 * i);
        break;
    case EIATTR_MAX_CLUSTER_RANK:
        if (len >= 4)
            res->max_cluster_rank = (int)rd32(val);
        break;
    case EIATTR_MAXREG_COUNT: res->max_registers = rd16(val); break;
    case EIATTR_NUM_BARRIERS: res->barriers = len >= 4 ? (int)rd32(val) : val[0]; break;
    case EIATTR_CBANK_PARAM_SIZE: res->param_bytes = rd16(val); break;
    case EIATTR_KPARAM_INFO:
        /* u32 index, u16 ordinal, u16 offset, u32 flags (size in bits 18..31) */
        if (len >= 12)
            add_param(c, rd16(val + 4), rd16(val + 6), rd32(val + 8) >> 18);
        break;
    case EIATTR_KPARAM_INFO_V2:
        /* u32 index, u16 ordinal, u16 offset, u32 size: large parameters */
        if (len >= 12)
            add_param(c, rd16(val + 4), rd16(val + 6), rd32(val + 8));
        break;
    default: break;
    }
}

static void free_kernel(cuabi__elf_kernel *k)
{
    cuabi__free(k->name);
    cuabi__free(k->param_offsets);
    cuabi__free(k->param_sizes);
}

void cuabi__elf_free(cuabi__elf_info *info)
{
    if (!info)
        return;
    for (size_t i = 0; i < info->kernel_count; i++)
        free_kernel(&info->kernels[i]);
    cuabi__free(info->kernels);
    cuabi__free(info);
}

/* Order the parameters by ordinal into the kernel; they are listed last
 * first in the image. A gap or duplicate leaves params_known false. */
static cuabi_status take_params(cuabi__elf_kernel *k, kernel_ctx *c)
{
    size_t n = c->nparams;
    k->res.param_count = n;
    k->params_known = true;
    if (n == 0)
        return CUABI_SUCCESS;
    k->param_offsets = cuabi__calloc(n, sizeof(size_t));
    k->param_sizes = cuabi__calloc(n, sizeof(size_t));
    if (!k->param_offsets || !k->param_sizes)
        return CUABI_ERROR_OUT_OF_MEMORY;
    bool *seen = cuabi__calloc(n, sizeof *seen);
    if (!seen)
        return CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        const param *pp = &c->params[i];
        if (pp->ordinal >= n || seen[pp->ordinal]) {
            k->params_known = false;
            break;
        }
        seen[pp->ordinal] = true;
        k->param_offsets[pp->ordinal] = pp->offset;
        k->param_sizes[pp->ordinal] = pp->size;
    }
    cuabi__free(seen);
    return CUABI_SUCCESS;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Fill one kernel from its sections. `text` is its .text section index. */
static cuabi_status fill_kernel(const reader *r, cuabi__elf_kernel *k, uint32_t text,
                                uint64_t sym_size, const symfacts *f, uint64_t reserved_smem)
{
    cuabi_kernel_resources *res = &k->res;
    res->registers = f->regs >= 0 ? f->regs : (int)(r->sec[text].info >> 24);
    res->local_bytes = f->frame;
    res->stack_bytes = f->max_stack > f->min_stack ? f->max_stack : f->min_stack;
    res->code_bytes = sym_size ? sym_size : r->sec[text].size;
    kernel_ctx c = { .res = res };
    cuabi_status st = CUABI_SUCCESS;
    for (uint16_t i = 0; i < r->nsec && st == CUABI_SUCCESS; i++) {
        const section *s = &r->sec[i];
        if (s->info != text)
            continue;
        if (s->type == SHT_CUDA_INFO && has_prefix(s->sname, ".nv.info.")) {
            st = walk_info(r, s, kernel_attr, &c);
        } else if (has_prefix(s->sname, ".nv.shared.")) {
            res->shared_static_bytes = s->size > reserved_smem ? s->size - reserved_smem : 0;
        } else if (has_prefix(s->sname, ".nv.constant0.")) {
            res->const_bytes = s->size;
        }
    }
    if (st == CUABI_SUCCESS && c.oom)
        st = CUABI_ERROR_OUT_OF_MEMORY;
    if (st == CUABI_SUCCESS)
        st = take_params(k, &c);
    cuabi__free(c.params);
    /* The product, saturated: a damaged image must not overflow an int. */
    int64_t prod = res->max_threads[0] > 0 ? 1 : 0;
    for (int i = 0; i < 3 && prod; i++) {
        if (res->max_threads[i] > 0)
            prod *= res->max_threads[i];
        if (prod > INT32_MAX)
            prod = INT32_MAX;
    }
    res->max_threads_per_block = (int)prod;
    return st;
}

typedef struct symtab {
    const uint8_t *base;
    size_t count;
    uint32_t strtab;
} symtab;

static cuabi_status find_symtab(const reader *r, symtab *out)
{
    for (uint16_t i = 0; i < r->nsec; i++) {
        const section *s = &r->sec[i];
        if (s->type != SHT_SYMTAB)
            continue;
        out->base = r->p + s->offset;
        out->count = s->size / SYM_SIZE;
        out->strtab = s->link;
        return CUABI_SUCCESS;
    }
    out->base = NULL;
    out->count = 0;
    return bad(r, "no symbol table");
}

/* Bytes at the start of each .nv.shared.<kernel> that belong to the
 * system: present when the image declares .nv.reservedSmem.* symbols. */
static uint64_t reserved_smem(const reader *r, const symtab *t)
{
    bool reserved = false;
    uint64_t cap = RESERVED_SMEM_DEFAULT;
    for (size_t i = 0; i < t->count; i++) {
        const uint8_t *s = t->base + i * SYM_SIZE;
        const char *n = str_at(r, t->strtab, rd32(s));
        if (!n)
            continue;
        if (strcmp(n, ".nv.reservedSmem.offset0") == 0)
            reserved = true;
        else if (strcmp(n, ".nv.reservedSmem.cap") == 0)
            cap = rd64(s + 8);
    }
    return reserved ? cap : 0;
}

static cuabi_status read_global_info(const reader *r, symfacts *facts, size_t nsyms)
{
    global_ctx c = { facts, nsyms };
    for (size_t i = 0; i < nsyms; i++)
        facts[i].regs = -1;
    for (uint16_t i = 0; i < r->nsec; i++) {
        const section *s = &r->sec[i];
        if (s->type == SHT_CUDA_INFO && strcmp(s->sname, ".nv.info") == 0)
            CUABI__TRY(walk_info(r, s, global_attr, &c));
    }
    return CUABI_SUCCESS;
}

static cuabi_status read_kernels(const reader *r, cuabi__elf_info *info)
{
    symtab t;
    CUABI__TRY(find_symtab(r, &t));
    if (t.count == 0)
        return CUABI_SUCCESS;
    symfacts *facts = cuabi__calloc(t.count, sizeof *facts);
    if (!facts)
        return CUABI_ERROR_OUT_OF_MEMORY;
    info->kernels = cuabi__calloc(t.count, sizeof *info->kernels);
    cuabi_status st = info->kernels ? read_global_info(r, facts, t.count)
                                    : CUABI_ERROR_OUT_OF_MEMORY;
    uint64_t reserved = st == CUABI_SUCCESS ? reserved_smem(r, &t) : 0;
    for (size_t i = 0; i < t.count && st == CUABI_SUCCESS; i++) {
        const uint8_t *s = t.base + i * SYM_SIZE;
        uint8_t st_info = s[4], st_other = s[5];
        uint16_t shndx = rd16(s + 6);
        if ((st_info & 0xf) != STT_FUNC || !(st_other & STO_CUDA_ENTRY))
            continue;
        const char *name = str_at(r, t.strtab, rd32(s));
        if (!name || !*name || shndx == 0 || shndx >= r->nsec) {
            st = bad(r, "a kernel symbol has a bad name or section");
            break;
        }
        cuabi__elf_kernel *k = &info->kernels[info->kernel_count++];
        k->res.version = CUABI_KERNEL_RESOURCES_VERSION;
        k->res.arch = info->arch;
        k->name = cuabi__strdup(name);
        st = k->name ? fill_kernel(r, k, shndx, rd64(s + 16), &facts[i], reserved)
                     : CUABI_ERROR_OUT_OF_MEMORY;
    }
    cuabi__free(facts);
    return st;
}

cuabi_status cuabi__elf_parse(cuabi__elf_info **out, const void *data, size_t size,
                              const char *caller, const char *what)
{
    *out = NULL;
    reader r = { .p = data, .size = size, .caller = caller, .what = what ? what : "the image" };
    cuabi__elf_info *info = cuabi__calloc(1, sizeof *info);
    if (!info)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi_status st = data ? read_sections(&r, &info->arch) : bad(&r, "no data");
    if (st == CUABI_SUCCESS)
        st = read_kernels(&r, info);
    cuabi__free(r.sec);
    if (st != CUABI_SUCCESS) {
        cuabi__elf_free(info);
        return st;
    }
    *out = info;
    return CUABI_SUCCESS;
}

const cuabi__elf_kernel *cuabi__elf_find(const cuabi__elf_info *info, const char *name)
{
    for (size_t i = 0; info && i < info->kernel_count; i++)
        if (strcmp(info->kernels[i].name, name) == 0)
            return &info->kernels[i];
    return NULL;
}

cuabi_status cuabi__elf_copy_resources(cuabi_kernel_resources *out,
                                       const cuabi__elf_kernel *k, const char *caller)
{
    if (!out)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: out is NULL", caller);
    if (out->version == 0 || out->version > CUABI_KERNEL_RESOURCES_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: cuabi_kernel_resources version %u is not supported "
                            "(this library knows 1..%u; use CUABI_KERNEL_RESOURCES_INIT)",
                            caller, out->version, (unsigned)CUABI_KERNEL_RESOURCES_VERSION);
    unsigned version = out->version;
    *out = k->res; /* one version so far: the whole struct */
    out->version = version;
    return CUABI_SUCCESS;
}
