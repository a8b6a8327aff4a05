/* Argument packs: a parameter list described once (signature string, type
 * descriptors or sizes), laid out with C rules through libffi, owning the
 * storage of the values that launches pass as kernelParams.
 *
 * Every way of making a pack ends in one array of cuabi_arg_type
 * descriptors (structs followed by their members, depth first); pack_build()
 * turns that into ffi_type trees, asks libffi for the offsets
 * (ffi_get_struct_offsets) and records the items. The whole parameter list is
 * laid out as one struct of all parameters: that is the layout the driver
 * gives kernel parameters, so slot offsets compare directly with
 * cuKernelGetParamInfo. */
#include "runtime/argpack.h"
#include "runtime/kernel.h"
#include "runtime/memory.h"
#include "compile/param_types.h"
#include "util/checked.h"

#include <ffi.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ kinds */

typedef struct kind_info {
    const char *name;
    size_t size, align;
    ffi_type *ffi;      /* NULL: built as a struct of `count` x `elem` */
    ffi_type *elem;
    int count;
} kind_info;

static const kind_info kinds[] = {
    [CUABI_ARG_I8] = { "i8", 1, 1, &ffi_type_sint8, NULL, 0 },
    [CUABI_ARG_I16] = { "i16", 2, 2, &ffi_type_sint16, NULL, 0 },
    [CUABI_ARG_I32] = { "i32", 4, 4, &ffi_type_sint32, NULL, 0 },
    [CUABI_ARG_I64] = { "i64", 8, 8, &ffi_type_sint64, NULL, 0 },
    [CUABI_ARG_U8] = { "u8", 1, 1, &ffi_type_uint8, NULL, 0 },
    [CUABI_ARG_U16] = { "u16", 2, 2, &ffi_type_uint16, NULL, 0 },
    [CUABI_ARG_U32] = { "u32", 4, 4, &ffi_type_uint32, NULL, 0 },
    [CUABI_ARG_U64] = { "u64", 8, 8, &ffi_type_uint64, NULL, 0 },
    [CUABI_ARG_F16] = { "f16", 2, 2, &ffi_type_uint16, NULL, 0 },
    [CUABI_ARG_BF16] = { "bf16", 2, 2, &ffi_type_uint16, NULL, 0 },
    [CUABI_ARG_F32] = { "f32", 4, 4, &ffi_type_float, NULL, 0 },
    [CUABI_ARG_F64] = { "f64", 8, 8, &ffi_type_double, NULL, 0 },
    /* CUDA's complex types are float2 / double2: aligned to their size. */
    [CUABI_ARG_C64] = { "c64", 8, 8, NULL, &ffi_type_float, 2 },
    [CUABI_ARG_C128] = { "c128", 16, 16, NULL, &ffi_type_double, 2 },
    [CUABI_ARG_BOOL] = { "bool", 1, 1, &ffi_type_uint8, NULL, 0 },
    /* Device pointers and handles are 64-bit whatever the host is. */
    [CUABI_ARG_PTR] = { "ptr", 8, 8, &ffi_type_uint64, NULL, 0 },
    [CUABI_ARG_BUFFER] = { "buffer", 8, 8, &ffi_type_uint64, NULL, 0 },
    [CUABI_ARG_VIEW] = { "view", 8, 8, &ffi_type_uint64, NULL, 0 },
    [CUABI_ARG_HANDLE] = { "handle", 8, 8, &ffi_type_uint64, NULL, 0 },
    /* CUtensorMap: 16 x u64, alignas(64). */
    [CUABI_ARG_TENSORMAP] = { "tensormap", 128, 64, NULL, &ffi_type_uint64, 16 },
    [CUABI_ARG_STRUCT] = { "struct", 0, 0, NULL, NULL, 0 },
    [CUABI_ARG_RAW] = { "raw", 0, 0, NULL, NULL, 0 },
    /* Sized by the descriptor (1, 2, 4 or 8), signedness unknown (PTX .u32). */
    [CUABI_ARG_INTEGER] = { "integer", 0, 0, NULL, NULL, 0 },
    [CUABI_ARG_INTPTR] = { "intptr", 8, 8, &ffi_type_uint64, NULL, 0 },
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static const char *kind_name(cuabi_arg_kind k)
{
    return (unsigned)k < NKINDS && kinds[k].name ? kinds[k].name : "?";
}

static bool is_pow2(size_t x) { return x && !(x & (x - 1)); }

/* ------------------------------------------------------------ layout */

/* One ffi_type per descriptor, with its element array for structs. */
typedef struct ffi_node {
    ffi_type type;
    ffi_type **elements;
    size_t *offsets;        /* of the direct members */
} ffi_node;

typedef struct builder {
    const cuabi_arg_type *types;
    size_t count, pos;
    ffi_node *nodes;        /* count nodes */
    cuabi__arg_item *items; /* count items */
    const char *caller;
} builder;

static cuabi_status check_entry(builder *b, size_t i)
{
    const cuabi_arg_type *t = &b->types[i];
    if (t->version == 0 || t->version > CUABI_ARG_TYPE_VERSION)
        return cuabi__error(CUABI_ERROR_INVALID_VERSION,
                            "%s: types[%zu].version %u is not supported (use CUABI_ARG_TYPE_INIT)",
                            b->caller, i, t->version);
    if (t->kind <= CUABI_ARG_NONE || (size_t)t->kind >= NKINDS)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: types[%zu].kind %d is not a cuabi_arg_kind",
                            b->caller, i, (int)t->kind);
    if (t->align && (!is_pow2(t->align) || t->align > 4096))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: types[%zu].align %zu is not a power of two up to 4096",
                            b->caller, i, t->align);
    if (t->kind == CUABI_ARG_RAW && t->size == 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: types[%zu] is raw with size 0",
                            b->caller, i);
    if (t->kind == CUABI_ARG_INTEGER && t->size != 1 && t->size != 2 && t->size != 4 &&
        t->size != 8)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: types[%zu] is an integer of size %zu (1, 2, 4 or 8)",
                            b->caller, i, t->size);
    if (t->kind == CUABI_ARG_STRUCT && t->member_count == 0)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: types[%zu] is a struct with no members",
                            b->caller, i);
    /* Before anything is allocated for the members: they follow in the array. */
    if (t->kind == CUABI_ARG_STRUCT && t->member_count > b->count - i - 1)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: types[%zu].member_count %zu is larger than the %zu descriptors "
                            "after it (the type array ends inside the struct)", b->caller, i,
                            t->member_count, b->count - i - 1);
    return CUABI_SUCCESS;
}

/* Allocate a struct node's element array (n members + NULL) and offsets. */
static cuabi_status node_struct(ffi_node *n, size_t members)
{
    n->elements = cuabi__calloc(members + 1, sizeof *n->elements);
    n->offsets = cuabi__calloc(members ? members : 1, sizeof *n->offsets);
    if (!n->elements || !n->offsets)
        return CUABI_ERROR_OUT_OF_MEMORY;
    n->type.type = FFI_TYPE_STRUCT;
    n->type.elements = n->elements;
    return CUABI_SUCCESS;
}

/* Lay out a struct node with libffi, then raise its alignment if asked
 * (what __align__(16) / alignas does: the size rounds up too). */
static cuabi_status node_layout(ffi_node *n, size_t align, const char *caller)
{
    /* libffi adds and rounds the members' sizes without overflow checks:
     * the same C layout computed here with them first, so that a size near
     * SIZE_MAX (a raw parameter's, from the caller) cannot wrap the struct
     * or the parameter list to a few bytes whose slots point anywhere. */
    size_t size = 0, most = align;
    for (ffi_type **e = n->type.elements; *e; e++) {
        size_t a = (*e)->alignment ? (*e)->alignment : 1;
        size = cuabi__size_round_up_sat(size, a);
        if (size == SIZE_MAX || !cuabi__size_add(&size, size, (*e)->size))
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the parameters' sizes "
                                "overflow: a struct or the parameter list would be larger than "
                                "the address space", caller);
        if (a > most)
            most = a;
    }
    if (cuabi__size_round_up_sat(size, most ? most : 1) == SIZE_MAX)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: the parameters' sizes overflow: a "
                            "struct or the parameter list would be larger than the address space",
                            caller);
    if (ffi_get_struct_offsets(FFI_DEFAULT_ABI, &n->type, n->offsets) != FFI_OK)
        return cuabi__error(CUABI_ERROR_INTERNAL, "%s: libffi could not lay out a struct", caller);
    if (align > n->type.alignment) {
        n->type.alignment = (unsigned short)align;
        n->type.size = (n->type.size + align - 1) / align * align;
    }
    return CUABI_SUCCESS;
}

/* Build the node for descriptor b->pos (and, for a struct, its members),
 * advancing b->pos past them. Items get kind/size/align/member offsets. */
static cuabi_status build_one(builder *b, int depth)
{
    if (b->pos >= b->count)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the type array ends inside a struct (a member_count is too large)",
                            b->caller);
    if (depth > 64)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: structs nested deeper than 64",
                            b->caller);
    size_t i = b->pos++;
    CUABI__TRY(check_entry(b, i));
    const cuabi_arg_type *t = &b->types[i];
    const kind_info *ki = &kinds[t->kind];
    ffi_node *n = &b->nodes[i];
    cuabi__arg_item *it = &b->items[i];
    it->kind = t->kind;
    it->depth = depth;
    if (t->kind == CUABI_ARG_STRUCT) {
        CUABI__TRY(node_struct(n, t->member_count));
        size_t *member_idx = cuabi__calloc(t->member_count, sizeof *member_idx);
        if (!member_idx)
            return CUABI_ERROR_OUT_OF_MEMORY;
        cuabi_status st = CUABI_SUCCESS;
        for (size_t m = 0; m < t->member_count && st == CUABI_SUCCESS; m++) {
            member_idx[m] = b->pos;
            st = build_one(b, depth + 1);
            if (st == CUABI_SUCCESS)
                n->elements[m] = &b->nodes[member_idx[m]].type;
        }
        if (st == CUABI_SUCCESS)
            st = node_layout(n, t->align, b->caller);
        /* Members record their offset inside this struct for now; pack_build
         * turns them into offsets inside the slot. */
        for (size_t m = 0; m < t->member_count && st == CUABI_SUCCESS; m++)
            b->items[member_idx[m]].offset = n->offsets[m];
        cuabi__free(member_idx);
        CUABI__TRY(st);
        it->member_count = t->member_count;
    } else if (t->kind == CUABI_ARG_RAW) {
        /* Opaque bytes: libffi only needs size and alignment of an element
         * that is already laid out (size != 0 stops it from recursing). */
        n->type.type = FFI_TYPE_STRUCT;
        n->type.size = t->size;
        n->type.alignment = (unsigned short)(t->align ? t->align : 1);
    } else if (t->kind == CUABI_ARG_INTEGER) {
        static ffi_type *const by_size[9] = { [1] = &ffi_type_uint8, [2] = &ffi_type_uint16,
                                              [4] = &ffi_type_uint32, [8] = &ffi_type_uint64 };
        n->type = *by_size[t->size];
        if (t->align > n->type.alignment)
            n->type.alignment = (unsigned short)t->align;
    } else if (ki->ffi) {
        n->type = *ki->ffi;
        if (t->align > n->type.alignment)
            n->type.alignment = (unsigned short)t->align;
    } else { /* complex, tensor map: a struct of equal elements */
        CUABI__TRY(node_struct(n, (size_t)ki->count));
        for (int e = 0; e < ki->count; e++)
            n->elements[e] = ki->elem;
        CUABI__TRY(node_layout(n, t->align > ki->align ? t->align : ki->align, b->caller));
    }
    it->size = n->type.size;
    it->align = n->type.alignment;
    return CUABI_SUCCESS;
}

static void pack_destroy(cuabi__object *o)
{
    cuabi__argpack *p = (cuabi__argpack *)o;
    cuabi__free(p->items);
    cuabi__free(p->slot_item);
    cuabi__free(p->storage);
    cuabi__free(p->params);
    cuabi__free(p->ref_kind);
    cuabi__free(p->ref_handle);
    cuabi__free(p);
}

/* Lay out the top level (one struct of all slots) and fill the pack. */
static cuabi_status pack_finish(cuabi__argpack *p, builder *b, size_t *slot_desc, size_t nslots)
{
    size_t blob = 0;
    if (nslots) {
        ffi_node top;
        memset(&top, 0, sizeof top);
        cuabi_status st = node_struct(&top, nslots);
        for (size_t s = 0; s < nslots && st == CUABI_SUCCESS; s++)
            top.elements[s] = &b->nodes[slot_desc[s]].type;
        if (st == CUABI_SUCCESS)
            st = node_layout(&top, 0, b->caller);
        if (st == CUABI_SUCCESS) {
            for (size_t s = 0; s < nslots; s++)
                b->items[slot_desc[s]].offset = top.offsets[s];
            blob = top.type.size;
        }
        cuabi__free(top.elements);
        cuabi__free(top.offsets);
        CUABI__TRY(st);
    }
    p->nslots = nslots;
    p->nitems = b->count;
    p->blob_size = blob;
    p->items = cuabi__calloc(b->count ? b->count : 1, sizeof *p->items);
    p->slot_item = cuabi__calloc(nslots ? nslots : 1, sizeof *p->slot_item);
    p->storage = cuabi__calloc(blob ? blob : 1, 1);
    p->params = cuabi__calloc(nslots ? nslots : 1, sizeof *p->params);
    p->ref_kind = cuabi__calloc(nslots ? nslots : 1, 1);
    p->ref_handle = cuabi__calloc(nslots ? nslots : 1, sizeof *p->ref_handle);
    if (!p->items || !p->slot_item || !p->storage || !p->params || !p->ref_kind || !p->ref_handle)
        return CUABI_ERROR_OUT_OF_MEMORY;
    memcpy(p->items, b->items, b->count * sizeof *p->items);
    /* Member offsets: relative to their parent so far; make them relative
     * to the slot by walking depth first with a stack of parent offsets. */
    size_t slots_seen = 0, base[66];
    for (size_t i = 0; i < p->nitems; i++) {
        cuabi__arg_item *it = &p->items[i];
        if (it->depth == 0)
            slots_seen++;
        else
            it->offset += base[it->depth - 1];
        it->slot = slots_seen - 1;
        base[it->depth] = it->depth == 0 ? 0 : it->offset;
    }
    for (size_t s = 0; s < nslots; s++) {
        cuabi__arg_item *it = &p->items[slot_desc[s]];
        p->slot_item[s] = slot_desc[s];
        p->params[s] = p->storage + it->offset;
        if (it->kind == CUABI_ARG_BUFFER || it->kind == CUABI_ARG_VIEW) {
            p->ref_kind[s] = it->kind == CUABI_ARG_BUFFER ? CUABI__REF_BUFFER : CUABI__REF_VIEW;
            p->nrefs++;
        }
    }
    return CUABI_SUCCESS;
}

/* Make a pack from a validated-as-we-go descriptor array. */
static cuabi_status pack_build(cuabi_argpack **out, const cuabi_arg_type *types, size_t count,
                               const char *caller)
{
    builder b = { types, count, 0, NULL, NULL, caller };
    cuabi__argpack *p = cuabi__calloc(1, sizeof *p);
    b.nodes = cuabi__calloc(count ? count : 1, sizeof *b.nodes);
    b.items = cuabi__calloc(count ? count : 1, sizeof *b.items);
    size_t *slot_desc = cuabi__calloc(count ? count : 1, sizeof *slot_desc);
    cuabi_status st = (p && b.nodes && b.items && slot_desc) ? CUABI_SUCCESS
                                                             : CUABI_ERROR_OUT_OF_MEMORY;
    size_t nslots = 0;
    while (st == CUABI_SUCCESS && b.pos < count) {
        slot_desc[nslots++] = b.pos;
        st = build_one(&b, 0);
    }
    if (st == CUABI_SUCCESS)
        st = pack_finish(p, &b, slot_desc, nslots);
    if (st == CUABI_SUCCESS)
        st = cuabi__handle_register(&p->base, CUABI__T_ARGPACK, pack_destroy);
    if (st == CUABI_SUCCESS)
        *out = CUABI__HANDLE(p, cuabi_argpack);
    else if (p)
        pack_destroy(&p->base);
    for (size_t i = 0; b.nodes && i < count; i++) {
        cuabi__free(b.nodes[i].elements);
        cuabi__free(b.nodes[i].offsets);
    }
    cuabi__free(b.nodes);
    cuabi__free(b.items);
    cuabi__free(slot_desc);
    return st;
}

/* ------------------------------------------------------------ signature parser */

typedef struct parser {
    const char *src, *p;
    cuabi_arg_type *types;
    size_t count, cap;
} parser;

static cuabi_status parse_error(parser *ps, const char *what)
{
    const char *at = ps->p;
    int n = 0;
    while (at[n] && n < 12)
        n++;
    return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                        "cuabi_argpack_create: signature \"%s\", position %zu: %s (at \"%.*s\")",
                        ps->src, (size_t)(at - ps->src), what, n, at);
}

static void skip_ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static bool accept(parser *ps, char c)
{
    skip_ws(ps);
    if (*ps->p != c)
        return false;
    ps->p++;
    return true;
}

static size_t ident(parser *ps, char *buf, size_t cap)
{
    skip_ws(ps);
    size_t n = 0;
    while ((ps->p[n] >= 'a' && ps->p[n] <= 'z') || (ps->p[n] >= 'A' && ps->p[n] <= 'Z') ||
           (ps->p[n] >= '0' && ps->p[n] <= '9') || ps->p[n] == '_') {
        if (n + 1 < cap)
            buf[n] = ps->p[n];
        n++;
    }
    buf[n < cap ? n : cap - 1] = 0;
    return n;
}

static cuabi_status push(parser *ps, cuabi_arg_kind kind, size_t align, size_t *index)
{
    if (ps->count == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 16;
        cuabi_arg_type *grown = cuabi__realloc(ps->types, cap * sizeof *grown);
        if (!grown)
            return CUABI_ERROR_OUT_OF_MEMORY;
        ps->types = grown;
        ps->cap = cap;
    }
    cuabi_arg_type t = CUABI_ARG_TYPE_INIT;
    t.kind = kind;
    t.align = align;
    if (index)
        *index = ps->count;
    ps->types[ps->count++] = t;
    return CUABI_SUCCESS;
}

static const struct { const char *name; cuabi_arg_kind kind; } aliases[] = {
    { "int", CUABI_ARG_I32 }, { "uint", CUABI_ARG_U32 }, { "unsigned", CUABI_ARG_U32 },
    { "float", CUABI_ARG_F32 }, { "double", CUABI_ARG_F64 }, { "half", CUABI_ARG_F16 },
    { "long", CUABI_ARG_I64 }, { "size_t", CUABI_ARG_U64 },
};

static cuabi_status parse_type(parser *ps, size_t *direct, int depth);

static cuabi_status parse_list(parser *ps, int depth, size_t *direct)
{
    do {
        CUABI__TRY(parse_type(ps, direct, depth));
    } while (accept(ps, ','));
    return CUABI_SUCCESS;
}

static cuabi_status parse_type(parser *ps, size_t *direct, int depth)
{
    char name[32];
    size_t align = 0;
    if (depth > 64)
        return parse_error(ps, "structs nested deeper than 64");
    size_t n = ident(ps, name, sizeof name);
    if (n == 5 && strcmp(name, "align") == 0) {
        ps->p += n;
        if (!accept(ps, '('))
            return parse_error(ps, "expected '(' after align");
        skip_ws(ps);
        char *end;
        unsigned long v = strtoul(ps->p, &end, 10);
        if (end == ps->p || !is_pow2(v) || v > 4096)
            return parse_error(ps, "align needs a power of two up to 4096");
        ps->p = end;
        if (!accept(ps, ')'))
            return parse_error(ps, "expected ')'");
        align = v;
        n = ident(ps, name, sizeof name);
    }
    if (n == 0)
        return parse_error(ps, "expected a type");
    if (n >= sizeof name)
        return parse_error(ps, "unknown type");
    ps->p += n;
    (*direct)++;
    if (strcmp(name, "struct") == 0) {
        size_t idx, members = 0;
        CUABI__TRY(push(ps, CUABI_ARG_STRUCT, align, &idx));
        if (!accept(ps, '{'))
            return parse_error(ps, "expected '{' after struct");
        if (accept(ps, '}'))
            return parse_error(ps, "a struct needs at least one member");
        CUABI__TRY(parse_list(ps, depth + 1, &members));
        if (!accept(ps, '}'))
            return parse_error(ps, "expected ',' or '}'");
        ps->types[idx].member_count = members;
        return CUABI_SUCCESS;
    }
    /* CUDA vector types: a struct of n equal members, aligned as in
     * vector_types.h (float4 and int4 to 16, float2 to 8, float3 to 4, ...). */
    cuabi_arg_kind elem;
    int count;
    size_t valign;
    if (cuabi__vector_type(name, strlen(name), &elem, &count, &valign)) {
        size_t idx;
        CUABI__TRY(push(ps, CUABI_ARG_STRUCT, align > valign ? align : valign, &idx));
        ps->types[idx].member_count = (size_t)count;
        for (int e = 0; e < count; e++)
            CUABI__TRY(push(ps, elem, 0, NULL));
        return CUABI_SUCCESS;
    }
    for (size_t a = 0; a < sizeof aliases / sizeof aliases[0]; a++)
        if (strcmp(name, aliases[a].name) == 0)
            return push(ps, aliases[a].kind, align, NULL);
    for (size_t k = 1; k < NKINDS; k++)
        if (kinds[k].name && k != CUABI_ARG_STRUCT && k != CUABI_ARG_RAW &&
            k != CUABI_ARG_INTEGER && strcmp(name, kinds[k].name) == 0)
            return push(ps, (cuabi_arg_kind)k, align, NULL);
    ps->p -= n;
    return parse_error(ps, "unknown type");
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_create(cuabi_argpack **out, const char *signature)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(signature, "%s: signature is NULL (use \"\" for no parameters)", __func__);
    parser ps = { signature, signature, NULL, 0, 0 };
    cuabi_status st = CUABI_SUCCESS;
    skip_ws(&ps);
    if (*ps.p) {
        size_t direct = 0;
        st = parse_list(&ps, 0, &direct);
        skip_ws(&ps);
        if (st == CUABI_SUCCESS && *ps.p)
            st = parse_error(&ps, "expected ',' or the end");
    }
    if (st == CUABI_SUCCESS)
        st = pack_build(out, ps.types, ps.count, __func__);
    cuabi__free(ps.types);
    return st;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_create_from_types(cuabi_argpack **out,
                                                           const cuabi_arg_type *types,
                                                           size_t count)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(types || count == 0, "%s: types is NULL but count is %zu", __func__, count);
    return pack_build(out, types, count, __func__);
}

/* Largest power of two dividing x, at most 16 (0 -> 16). */
static size_t pow2_divisor_upto(size_t x, size_t cap)
{
    size_t a = 1;
    while (a < cap && x % (a * 2) == 0)
        a *= 2;
    return a;
}

static size_t pow2_divisor(size_t x)
{
    return pow2_divisor_upto(x, 16);
}

/* The alignment a parameter at `offset` of `size` bytes may have: what the
 * offset shows, up to 16, or up to the size's own for larger parameters
 * (a CUtensorMap is 128 bytes aligned to 64: offset 64 after a pointer). */
static size_t offset_alignment(size_t offset, size_t size)
{
    size_t by_size = pow2_divisor_upto(size, 4096);
    return pow2_divisor_upto(offset, by_size > 16 ? by_size : 16);
}

/* A kernel's parameters sit in a constant bank at an address that is only
 * 16-byte aligned on some GPUs (0x210 on sm_90), so a parameter aligned to
 * 64 (a CUtensorMap) may start at offset 48, and every offset after it
 * follows the C layout as if the list started at that base, not at 0.
 * Whether `sizes` with `aligns` laid out from `base` give `offsets`: */
static bool layout_at_base(const size_t *sizes, const size_t *aligns, size_t n, size_t base,
                           const size_t *offsets)
{
    size_t end = 0;
    for (size_t i = 0; i < n; i++) {
        size_t a = aligns[i] ? aligns[i] : 1;
        size_t off = (base + end + a - 1) / a * a - base;
        if (off != offsets[i])
            return false;
        end = off + sizes[i];
    }
    return true;
}

/* The bank is 16-byte aligned: only parameters aligned to more than 16 can
 * move with its base, and trying bases of 16 * k keeps every other
 * alignment check as strict as from 0. */
#define BANK_ALIGN 16
#define BANK_SPAN 128

/* The base (a multiple of BANK_ALIGN below BANK_SPAN) from which the layout
 * gives `offsets`, or -1 when none does. */
static int layout_base(const size_t *sizes, const size_t *aligns, size_t n, const size_t *offsets)
{
    for (int base = 0; base < BANK_SPAN; base += BANK_ALIGN)
        if (layout_at_base(sizes, aligns, n, (size_t)base, offsets))
            return base;
    return -1;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_create_from_sizes(cuabi_argpack **out, const size_t *sizes,
                                                           const size_t *offsets, size_t count)
{
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(sizes || count == 0, "%s: sizes is NULL but count is %zu", __func__, count);
    for (size_t i = 0; i < count; i++)
        CUABI__CHECK_ARG(sizes[i], "%s: sizes[%zu] is 0", __func__, i);
    cuabi_arg_type *types = cuabi__calloc(count ? count : 1, sizeof *types);
    size_t *aligns = cuabi__calloc(count ? count : 1, sizeof *aligns);
    if (!types || !aligns) {
        cuabi__free(types);
        cuabi__free(aligns);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    /* The offsets show the alignment the compiler used, seen from the base
     * of the parameter bank (see layout_at_base); without offsets, guess
     * the natural alignment of a scalar of each size. */
    int base = -1;
    for (int b = 0; offsets && b < BANK_SPAN && base < 0; b += BANK_ALIGN) {
        for (size_t i = 0; i < count; i++)
            aligns[i] = offset_alignment(offsets[i] + (size_t)b, sizes[i]);
        if (layout_at_base(sizes, aligns, count, (size_t)b, offsets))
            base = b;
    }
    cuabi_status st = CUABI_SUCCESS;
    if (offsets && base < 0) {
        for (size_t i = 0; i < count; i++)
            aligns[i] = offset_alignment(offsets[i], sizes[i]);
        size_t bad = 0;
        for (size_t end = 0; bad < count; bad++) {
            size_t a = aligns[bad], off = (end + a - 1) / a * a;
            if (off != offsets[bad])
                break;
            end = off + sizes[bad];
        }
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                          "%s: offsets[%zu] = %zu does not follow the C layout of the sizes "
                          "from any base of the parameter bank", __func__, bad < count ? bad : 0,
                          offsets[bad < count ? bad : 0]);
    }
    for (size_t i = 0; i < count && st == CUABI_SUCCESS; i++) {
        cuabi_arg_type t = CUABI_ARG_TYPE_INIT;
        t.kind = CUABI_ARG_RAW;
        t.size = sizes[i];
        t.align = offsets ? aligns[i] : pow2_divisor(sizes[i]);
        if (t.align > 8 && !offsets)
            t.align = 8;
        types[i] = t;
    }
    if (st == CUABI_SUCCESS)
        st = pack_build(out, types, count, __func__);
    cuabi__free(types);
    cuabi__free(aligns);
    return st;
}

/* A pack for a kernel: one slot per parameter, typed where the kernel's
 * name or PTX says the type (param_types.h), raw elsewhere with the
 * alignment its offset shows. Typing never makes this fail: a typed layout
 * that disagrees with the kernel's (it cannot, short of a bug) falls back
 * to raw slots. */
static cuabi_status kernel_types(cuabi_arg_type **out, size_t *count,
                                 const cuabi__param_types *t, const size_t *offs,
                                 const size_t *sizes)
{
    size_t n = t->count;
    for (size_t i = 0; i < t->count; i++)
        if (t->params[i].kind == CUABI_ARG_STRUCT)
            n += (size_t)t->params[i].count;
    cuabi_arg_type *types = cuabi__calloc(n ? n : 1, sizeof *types);
    if (!types)
        return CUABI_ERROR_OUT_OF_MEMORY;
    size_t at = 0;
    for (size_t i = 0; i < t->count; i++) {
        const cuabi__param *p = &t->params[i];
        cuabi_arg_type e = CUABI_ARG_TYPE_INIT;
        e.kind = p->kind;
        if (p->kind == CUABI_ARG_RAW) {
            e.size = sizes[i];
            e.align = pow2_divisor(offs[i]);
        } else if (p->kind == CUABI_ARG_INTEGER) {
            e.size = p->size;
        } else if (p->kind == CUABI_ARG_STRUCT) {
            e.align = p->align;
            e.member_count = (size_t)p->count;
        }
        types[at++] = e;
        for (int m = 0; p->kind == CUABI_ARG_STRUCT && m < p->count; m++) {
            cuabi_arg_type member = CUABI_ARG_TYPE_INIT;
            member.kind = p->elem;
            types[at++] = member;
        }
    }
    *out = types;
    *count = n;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_create_for_kernel(cuabi_argpack **out, cuabi_kernel *kernel)
{
    cuabi__kernel *k;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(k, kernel, KERNEL);
    size_t n, count;
    const size_t *offs, *sizes;
    const cuabi__param_types *t;
    cuabi_arg_type *types;
    CUABI__TRY(cuabi__kernel_param_layout(k, &n, &offs, &sizes));
    CUABI__TRY(cuabi__kernel_param_types(k, &t, __func__));
    CUABI__TRY(kernel_types(&types, &count, t, offs, sizes));
    cuabi_status st = pack_build(out, types, count, __func__);
    cuabi__free(types);
    CUABI__TRY(st);
    cuabi__argpack *p;
    CUABI__GET(p, *out, ARGPACK);
    if (cuabi__argpack_check_layout(p, n, offs, sizes, __func__) == CUABI_SUCCESS)
        return CUABI_SUCCESS;
    cuabi_error_clear();
    cuabi__handle_release(*out, CUABI__T_ARGPACK);
    *out = NULL;
    return cuabi_argpack_create_from_sizes(out, sizes, offs, n);
}

/* ------------------------------------------------------------ getters */

#define GET_SLOT(p, pack, slot)                                                     \
    do {                                                                            \
        CUABI__GET(p, pack, ARGPACK);                                               \
        if (CUABI__UNLIKELY((slot) >= (p)->nslots))                                 \
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,                       \
                                "%s: slot %zu is out of range (the pack has %zu)",  \
                                __func__, (size_t)(slot), (p)->nslots);             \
    } while (0)

static inline cuabi__arg_item *slot_of(cuabi__argpack *p, size_t slot)
{
    return &p->items[p->slot_item[slot]];
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_count(size_t *out, cuabi_argpack *pack)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, pack, ARGPACK);
    *out = p->nslots;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_blob_size(size_t *out, cuabi_argpack *pack)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, pack, ARGPACK);
    *out = p->blob_size;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_slot_size(size_t *out, cuabi_argpack *pack, size_t slot)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    GET_SLOT(p, pack, slot);
    *out = slot_of(p, slot)->size;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_slot_offset(size_t *out, cuabi_argpack *pack, size_t slot)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    GET_SLOT(p, pack, slot);
    *out = slot_of(p, slot)->offset;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_slot_kind(cuabi_arg_kind *out, cuabi_argpack *pack,
                                                   size_t slot)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    GET_SLOT(p, pack, slot);
    *out = slot_of(p, slot)->kind;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_item_count(size_t *out, cuabi_argpack *pack)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, pack, ARGPACK);
    *out = p->nitems;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_item(cuabi_arg_info *out, cuabi_argpack *pack, size_t index)
{
    cuabi__argpack *p;
    CUABI__CHECK_OPTS(out, "cuabi_arg_info", CUABI_ARG_INFO_VERSION, false);
    CUABI__GET(p, pack, ARGPACK);
    CUABI__CHECK_ARG(index < p->nitems, "%s: item %zu is out of range (the pack has %zu)",
                     __func__, index, p->nitems);
    const cuabi__arg_item *it = &p->items[index];
    out->kind = it->kind;
    out->size = it->size;
    out->align = it->align;
    out->offset = it->offset;
    out->slot = it->slot;
    out->depth = it->depth;
    out->member_count = it->member_count;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ setters */

static cuabi_status kind_error(const cuabi__argpack *p, size_t slot, const char *wanted,
                               const char *caller)
{
    return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH, "%s: slot %zu is %s, not %s",
                        caller, slot, kind_name(p->items[p->slot_item[slot]].kind), wanted);
}

/* Slots that take a buffer or view besides raw addresses: pointers,
 * integers-or-pointers (PTX .u64) and 8-byte slots of unknown type. */
static inline bool address_slot(const cuabi__arg_item *it)
{
    return it->kind == CUABI_ARG_PTR || it->kind == CUABI_ARG_INTPTR ||
           (it->kind == CUABI_ARG_RAW && it->size == 8);
}

/* A slot that holds a raw value from now on (a buffer/view reference set
 * earlier on a ptr slot is dropped). */
static inline void clear_ref(cuabi__argpack *p, size_t slot)
{
    if (p->ref_kind[slot] &&
        (p->ref_kind[slot] >= CUABI__REF_TEXTURE || address_slot(slot_of(p, slot)))) {
        p->ref_kind[slot] = CUABI__REF_NONE;
        p->ref_handle[slot] = 0;
        p->nrefs--;
    }
}

static cuabi_status store_int(cuabi__argpack *p, size_t slot, bool neg, uint64_t mag,
                              const char *caller)
{
    cuabi__arg_item *it = slot_of(p, slot);
    void *dst = p->params[slot];
    /* Range per kind: [-(lo), hi] as magnitudes. */
    uint64_t hi, lo;
    switch (it->kind) {
    case CUABI_ARG_I8: hi = INT8_MAX; lo = (uint64_t)INT8_MAX + 1; break;
    case CUABI_ARG_I16: hi = INT16_MAX; lo = (uint64_t)INT16_MAX + 1; break;
    case CUABI_ARG_I32: hi = INT32_MAX; lo = (uint64_t)INT32_MAX + 1; break;
    case CUABI_ARG_I64: hi = INT64_MAX; lo = (uint64_t)INT64_MAX + 1; break;
    case CUABI_ARG_U8: hi = UINT8_MAX; lo = 0; break;
    case CUABI_ARG_U16: hi = UINT16_MAX; lo = 0; break;
    case CUABI_ARG_U32: hi = UINT32_MAX; lo = 0; break;
    case CUABI_ARG_U64: hi = UINT64_MAX; lo = 0; break;
    case CUABI_ARG_BOOL: hi = 1; lo = 0; break;
    case CUABI_ARG_RAW: case CUABI_ARG_INTEGER: case CUABI_ARG_INTPTR:
        /* Raw slots (from a kernel's parameter sizes) and integers of
         * unknown signedness (PTX .u32, .u64) take any integer of their
         * size, signed or unsigned. */
        if (it->size != 1 && it->size != 2 && it->size != 4 && it->size != 8)
            return kind_error(p, slot, "an integer", caller);
        hi = it->size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * it->size)) - 1;
        lo = UINT64_C(1) << (8 * it->size - 1);
        break;
    default: return kind_error(p, slot, "an integer", caller);
    }
    if (neg ? mag > lo : mag > hi)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: %s%llu does not fit slot %zu (%s)",
                            caller, neg ? "-" : "", (unsigned long long)mag, slot,
                            kind_name(it->kind));
    uint64_t v = neg ? (uint64_t)0 - mag : mag; /* two's complement */
    clear_ref(p, slot);
    switch (it->size) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(dst, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &v, 8); break;
    }
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_int(cuabi_argpack *pack, size_t slot, int64_t value)
{
    cuabi__argpack *p;
    GET_SLOT(p, pack, slot);
    uint64_t mag = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    return store_int(p, slot, value < 0, mag, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_uint(cuabi_argpack *pack, size_t slot, uint64_t value)
{
    cuabi__argpack *p;
    GET_SLOT(p, pack, slot);
    return store_int(p, slot, false, value, __func__);
}

/* Round the low `shift` bits of `v` away, to nearest even. */
static uint32_t round_shift(uint32_t v, int shift)
{
    if (shift <= 0)
        return v;
    if (shift >= 32)
        return 0;
    uint32_t kept = v >> shift, rem = v & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (kept & 1)))
        kept++;
    return kept;
}

uint16_t cuabi__f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    int exp = (int)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* half subnormal: value = m * 2^-24 */
        if (exp == 0)
            return sign; /* float subnormals are far below half's range */
        return (uint16_t)(sign | round_shift(man | 0x800000, 14 - e));
    }
    /* A carry out of the mantissa correctly bumps the exponent (to inf). */
    return (uint16_t)(sign | (((uint32_t)e << 10) + round_shift(man, 13)));
}

uint16_t cuabi__f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* keep NaN a quiet NaN */
    /* The sign rides along in bit 15; a carry only reaches it from NaNs. */
    return (uint16_t)round_shift(x, 16);
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_float(cuabi_argpack *pack, size_t slot, double value)
{
    cuabi__argpack *p;
    GET_SLOT(p, pack, slot);
    void *dst = p->params[slot];
    switch (slot_of(p, slot)->kind) {
    case CUABI_ARG_RAW:
        if (slot_of(p, slot)->size != 4 && slot_of(p, slot)->size != 8)
            break;
        clear_ref(p, slot);   /* an 8-byte raw slot may have held a buffer */
        if (slot_of(p, slot)->size == 8) { memcpy(dst, &value, 8); return CUABI_SUCCESS; }
        /* fall through - a 4-byte raw slot takes a float */
    case CUABI_ARG_F32: { float x = (float)value; memcpy(dst, &x, 4); return CUABI_SUCCESS; }
    case CUABI_ARG_F64: memcpy(dst, &value, 8); return CUABI_SUCCESS;
    case CUABI_ARG_F16: { uint16_t h = cuabi__f32_to_f16((float)value); memcpy(dst, &h, 2); return CUABI_SUCCESS; }
    case CUABI_ARG_BF16: { uint16_t h = cuabi__f32_to_bf16((float)value); memcpy(dst, &h, 2); return CUABI_SUCCESS; }
    default: break;
    }
    return kind_error(p, slot, "a floating-point type (f16, bf16, f32, f64)", __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_complex(cuabi_argpack *pack, size_t slot, double real,
                                                     double imag)
{
    cuabi__argpack *p;
    GET_SLOT(p, pack, slot);
    unsigned char *dst = p->params[slot];
    switch (slot_of(p, slot)->kind) {
    case CUABI_ARG_C128: memcpy(dst, &real, 8); memcpy(dst + 8, &imag, 8); return CUABI_SUCCESS;
    case CUABI_ARG_C64: {
        float re = (float)real, im = (float)imag;
        memcpy(dst, &re, 4);
        memcpy(dst + 4, &im, 4);
        return CUABI_SUCCESS;
    }
    default: return kind_error(p, slot, "complex (c64, c128)", __func__);
    }
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_pointer(cuabi_argpack *pack, size_t slot, uint64_t value)
{
    cuabi__argpack *p;
    GET_SLOT(p, pack, slot);
    cuabi_arg_kind k = slot_of(p, slot)->kind;
    if (k != CUABI_ARG_PTR && k != CUABI_ARG_HANDLE && k != CUABI_ARG_U64 &&
        k != CUABI_ARG_INTPTR && !(k == CUABI_ARG_RAW && slot_of(p, slot)->size == 8))
        return kind_error(p, slot, "ptr or handle", __func__);
    clear_ref(p, slot);
    memcpy(p->params[slot], &value, 8);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_bytes(cuabi_argpack *pack, size_t slot, const void *data,
                                                   size_t size)
{
    cuabi__argpack *p;
    GET_SLOT(p, pack, slot);
    CUABI__CHECK_ARG(data, "%s: data is NULL", __func__);
    cuabi__arg_item *it = slot_of(p, slot);
    if (it->kind == CUABI_ARG_BUFFER || it->kind == CUABI_ARG_VIEW)
        return kind_error(p, slot, "a plain value (use cuabi_argpack_set_buffer / _set_view)", __func__);
    if (size != it->size)
        return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                            "%s: slot %zu (%s) is %zu bytes, %zu given", __func__, slot,
                            kind_name(it->kind), it->size, size);
    clear_ref(p, slot);
    memcpy(p->params[slot], data, size);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_get_bytes(void *out, size_t size, cuabi_argpack *pack,
                                                   size_t slot)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    GET_SLOT(p, pack, slot);
    cuabi__arg_item *it = slot_of(p, slot);
    if (size != it->size)
        return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                            "%s: slot %zu (%s) is %zu bytes, %zu asked for", __func__, slot,
                            kind_name(it->kind), it->size, size);
    if (p->ref_kind[slot])
        memcpy(out, &p->ref_handle[slot], 8);
    else
        memcpy(out, p->params[slot], size);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_blob(cuabi_argpack *pack, const void *blob, size_t size)
{
    cuabi__argpack *p;
    CUABI__GET(p, pack, ARGPACK);
    CUABI__CHECK_ARG(blob || size == 0, "%s: blob is NULL", __func__);
    if (size != p->blob_size)
        return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                            "%s: the pack's blob is %zu bytes, %zu given", __func__,
                            p->blob_size, size);
    for (size_t s = 0; s < p->nslots; s++)
        clear_ref(p, s);
    if (size)
        memcpy(p->storage, blob, size);
    /* Buffer and view slots carry handle values in the blob. */
    for (size_t s = 0; p->nrefs && s < p->nslots; s++)
        if (p->ref_kind[s])
            memcpy(&p->ref_handle[s], p->params[s], 8);
    return CUABI_SUCCESS;
}

/* Bindings pack arguments straight into the storage (no copy, no call per
 * launch). Buffer/view slots keep handles apart from the blob, so writes
 * there would be ignored: such packs are refused. */
CUABI_EXTERN(cuabi_status) cuabi_argpack_blob_pointer(void **out, cuabi_argpack *pack)
{
    cuabi__argpack *p;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    CUABI__GET(p, pack, ARGPACK);
    for (size_t s = 0; s < p->nslots; s++) {
        cuabi_arg_kind k = slot_of(p, s)->kind;
        if (k == CUABI_ARG_BUFFER || k == CUABI_ARG_VIEW)
            return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                                "%s: slot %zu is a %s slot, whose handle is not in the blob; "
                                "use cuabi_argpack_set_blob or cuabi_argpack_set_%s",
                                __func__, s, kind_name(k), kind_name(k));
    }
    for (size_t s = 0; s < p->nslots; s++)
        clear_ref(p, s);
    *out = p->storage;
    return CUABI_SUCCESS;
}

/* ------------------------------------------------------------ buffers and views */

/* The pack keeps buffer and view *handles*, not references: a pack must
 * not keep memory alive behind the user's back, and a handle lookup (a few
 * loads) at launch tells a released buffer from a live one. */
static cuabi_status resolve_ref(uint64_t *addr, int ref, uint64_t handle)
{
    void *obj;
    const void *h = (const void *)(uintptr_t)handle;
    CUABI__TRY(cuabi__handle_get(h, cuabi__ref_type(ref), &obj, "launch"));
    if (ref == CUABI__REF_BUFFER)
        *addr = ((cuabi__buffer *)obj)->ptr;
    else if (ref == CUABI__REF_VIEW)
        *addr = ((cuabi__view *)obj)->data + ((cuabi__view *)obj)->byte_offset;
    else
        *addr = ((cuabi__valued_object *)obj)->value;
    return CUABI_SUCCESS;
}

/* Point a buffer/view (or ptr) slot at a handle. */
static cuabi_status set_ref(cuabi_argpack *pack, size_t slot, const void *handle, int ref,
                            const char *caller)
{
    cuabi__argpack *p;
    void *obj;
    CUABI__TRY(cuabi__handle_get(pack, CUABI__T_ARGPACK, &obj, caller));
    p = obj;
    if (slot >= p->nslots)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: slot %zu is out of range (the pack has %zu)",
                            caller, slot, p->nslots);
    cuabi_arg_kind k = slot_of(p, slot)->kind;
    cuabi_arg_kind want = ref == CUABI__REF_BUFFER ? CUABI_ARG_BUFFER : CUABI_ARG_VIEW;
    if (k != want && !address_slot(slot_of(p, slot)))
        return kind_error(p, slot, ref == CUABI__REF_BUFFER ? "buffer or ptr" : "view or ptr", caller);
    CUABI__TRY(cuabi__handle_get(handle, ref == CUABI__REF_BUFFER ? CUABI__T_BUFFER : CUABI__T_VIEW,
                                 &obj, caller));
    if (!p->ref_kind[slot])
        p->nrefs++;
    p->ref_kind[slot] = (unsigned char)ref;
    p->ref_handle[slot] = (uint64_t)(uintptr_t)handle;
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_buffer(cuabi_argpack *pack, size_t slot,
                                                    cuabi_buffer *buffer)
{
    return set_ref(pack, slot, buffer, CUABI__REF_BUFFER, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_argpack_set_view(cuabi_argpack *pack, size_t slot, cuabi_view *view)
{
    return set_ref(pack, slot, view, CUABI__REF_VIEW, __func__);
}

/* Slots that take a texture or surface object's 64-bit value. */
static inline bool object_slot(const cuabi__arg_item *it)
{
    return it->kind == CUABI_ARG_HANDLE || it->kind == CUABI_ARG_U64 ||
           it->kind == CUABI_ARG_I64 || it->kind == CUABI_ARG_INTPTR ||
           ((it->kind == CUABI_ARG_RAW || it->kind == CUABI_ARG_INTEGER) && it->size == 8);
}

cuabi_status cuabi__argpack_set_object(cuabi_argpack *pack, size_t slot, const void *handle,
                                       int ref, const char *caller)
{
    cuabi__argpack *p;
    void *obj;
    CUABI__TRY(cuabi__handle_get(pack, CUABI__T_ARGPACK, &obj, caller));
    p = obj;
    if (slot >= p->nslots)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT, "%s: slot %zu is out of range (the pack "
                            "has %zu)", caller, slot, p->nslots);
    if (!object_slot(slot_of(p, slot)))
        return kind_error(p, slot, "handle (or u64, i64, intptr, an 8-byte raw slot)", caller);
    CUABI__TRY(cuabi__handle_get(handle, cuabi__ref_type(ref), &obj, caller));
    if (!p->ref_kind[slot])
        p->nrefs++;
    p->ref_kind[slot] = (unsigned char)ref;
    p->ref_handle[slot] = (uint64_t)(uintptr_t)handle;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__argpack_resolve_slow(cuabi__argpack *p, const char *caller)
{
    for (size_t s = 0; s < p->nslots; s++) {
        int ref = p->ref_kind[s];
        if (!ref)
            continue;
        const char *what = cuabi__ref_name(ref);
        if (!p->ref_handle[s])
            return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                "%s: argument %zu (%s) was never set", caller, s, what);
        uint64_t addr;
        if (resolve_ref(&addr, ref, p->ref_handle[s]) != CUABI_SUCCESS)
            return cuabi__error(CUABI_ERROR_INVALID_HANDLE,
                                "%s: argument %zu holds a %s that was released (or is not a "
                                "cuabi_%s); set it again before launching",
                                caller, s, what, what);
        memcpy(p->params[s], &addr, 8);
    }
    return CUABI_SUCCESS;
}

/* Whether the kernel's offsets are the pack's slots laid out from some base
 * of the parameter bank (layout_at_base, layout_base): the values reach the
 * kernel the same, since each slot goes through its own kernelParams
 * pointer. */
static bool layout_from_some_base(const cuabi__argpack *p, const size_t *offsets)
{
    size_t n = p->nslots, stack_sizes[16], stack_aligns[16];
    size_t *sizes = n <= 16 ? stack_sizes : cuabi__malloc(n * sizeof *sizes);
    size_t *aligns = n <= 16 ? stack_aligns : cuabi__malloc(n * sizeof *aligns);
    bool ok = sizes && aligns;
    for (size_t i = 0; ok && i < n; i++) {
        sizes[i] = p->items[p->slot_item[i]].size;
        aligns[i] = p->items[p->slot_item[i]].align;
    }
    ok = ok && layout_base(sizes, aligns, n, offsets) >= 0;
    if (n > 16) {
        cuabi__free(sizes);
        cuabi__free(aligns);
    }
    if (!ok)
        cuabi_error_clear();   /* an allocation failure only means "no" */
    return ok;
}

CUABI__HOT cuabi_status cuabi__argpack_check_layout(const cuabi__argpack *p, size_t count,
                                                    const size_t *offsets, const size_t *sizes,
                                                    const char *caller)
{
    if (p->nslots != count)
        return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                            "%s: the kernel takes %zu parameter%s, the pack has %zu",
                            caller, count, count == 1 ? "" : "s", p->nslots);
    size_t first_moved = count;
    for (size_t i = 0; i < count; i++) {
        const cuabi__arg_item *it = &p->items[p->slot_item[i]];
        if (it->size != sizes[i])
            return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                                "%s: parameter %zu: the kernel expects %zu bytes, the pack gives "
                                "%zu (%s)", caller, i, sizes[i], it->size, kind_name(it->kind));
        if (offsets && it->offset != offsets[i] && first_moved == count)
            first_moved = i;
    }
    if (first_moved == count || layout_from_some_base(p, offsets))
        return CUABI_SUCCESS;
    const cuabi__arg_item *it = &p->items[p->slot_item[first_moved]];
    return cuabi__error(CUABI_ERROR_ARGUMENT_MISMATCH,
                        "%s: parameter %zu: the kernel expects offset %zu, the pack has "
                        "%zu (check the alignment of the type)",
                        caller, first_moved, offsets[first_moved], it->offset);
}
