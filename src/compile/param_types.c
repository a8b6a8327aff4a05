/* Kernel parameter types, learnt where the code says them:
 *
 * - a C++ kernel's Itanium-mangled name holds the exact C++ type of every
 *   parameter: libiberty's demangler (the one binutils and GCC use) turns it
 *   into text, and the parameter list of that text is classified here;
 * - the PTX .entry declaration of any kernel says integer (.u32: NVVM writes
 *   it for int and unsigned alike), float (.f32/.f64), integer-or-pointer
 *   (.u64) or bytes (.b8 name[N]); the program module keeps these
 *   signatures with code compiled from CUDA C++ or PTX (and the compile
 *   cache keeps them with its entries);
 * - nothing else (a CUBIN from elsewhere, extern "C"): size only.
 *
 * Every answer is checked against the kernel's parameter layout (driver or
 * CUBIN): a type whose size differs is dropped, never trusted. Argument
 * packs made for a kernel get typed slots from here, so every binding's
 * conversions and refusals come from one place. */
#include "compile/param_types.h"

#include <libiberty/demangle.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------ vector types */

/* CUDA's vector types (vector_types.h) with their real alignment. */
static const struct {
    const char *name;
    cuabi_arg_kind elem;
    int count;
    size_t align;
} vectors[] = {
    { "char1", CUABI_ARG_I8, 1, 1 }, { "char2", CUABI_ARG_I8, 2, 2 },
    { "char3", CUABI_ARG_I8, 3, 1 }, { "char4", CUABI_ARG_I8, 4, 4 },
    { "uchar1", CUABI_ARG_U8, 1, 1 }, { "uchar2", CUABI_ARG_U8, 2, 2 },
    { "uchar3", CUABI_ARG_U8, 3, 1 }, { "uchar4", CUABI_ARG_U8, 4, 4 },
    { "short1", CUABI_ARG_I16, 1, 2 }, { "short2", CUABI_ARG_I16, 2, 4 },
    { "short3", CUABI_ARG_I16, 3, 2 }, { "short4", CUABI_ARG_I16, 4, 8 },
    { "ushort1", CUABI_ARG_U16, 1, 2 }, { "ushort2", CUABI_ARG_U16, 2, 4 },
    { "ushort3", CUABI_ARG_U16, 3, 2 }, { "ushort4", CUABI_ARG_U16, 4, 8 },
    { "int1", CUABI_ARG_I32, 1, 4 }, { "int2", CUABI_ARG_I32, 2, 8 },
    { "int3", CUABI_ARG_I32, 3, 4 }, { "int4", CUABI_ARG_I32, 4, 16 },
    { "uint1", CUABI_ARG_U32, 1, 4 }, { "uint2", CUABI_ARG_U32, 2, 8 },
    { "uint3", CUABI_ARG_U32, 3, 4 }, { "uint4", CUABI_ARG_U32, 4, 16 },
    { "long1", CUABI_ARG_I64, 1, 8 }, { "long2", CUABI_ARG_I64, 2, 16 },
    { "long3", CUABI_ARG_I64, 3, 8 }, { "long4", CUABI_ARG_I64, 4, 16 },
    { "long4_16a", CUABI_ARG_I64, 4, 16 }, { "long4_32a", CUABI_ARG_I64, 4, 32 },
    { "ulong1", CUABI_ARG_U64, 1, 8 }, { "ulong2", CUABI_ARG_U64, 2, 16 },
    { "ulong3", CUABI_ARG_U64, 3, 8 }, { "ulong4", CUABI_ARG_U64, 4, 16 },
    { "ulong4_16a", CUABI_ARG_U64, 4, 16 }, { "ulong4_32a", CUABI_ARG_U64, 4, 32 },
    { "longlong1", CUABI_ARG_I64, 1, 8 }, { "longlong2", CUABI_ARG_I64, 2, 16 },
    { "longlong3", CUABI_ARG_I64, 3, 8 }, { "longlong4", CUABI_ARG_I64, 4, 16 },
    { "longlong4_16a", CUABI_ARG_I64, 4, 16 }, { "longlong4_32a", CUABI_ARG_I64, 4, 32 },
    { "ulonglong1", CUABI_ARG_U64, 1, 8 }, { "ulonglong2", CUABI_ARG_U64, 2, 16 },
    { "ulonglong3", CUABI_ARG_U64, 3, 8 }, { "ulonglong4", CUABI_ARG_U64, 4, 16 },
    { "ulonglong4_16a", CUABI_ARG_U64, 4, 16 }, { "ulonglong4_32a", CUABI_ARG_U64, 4, 32 },
    { "float1", CUABI_ARG_F32, 1, 4 }, { "float2", CUABI_ARG_F32, 2, 8 },
    { "float3", CUABI_ARG_F32, 3, 4 }, { "float4", CUABI_ARG_F32, 4, 16 },
    { "double1", CUABI_ARG_F64, 1, 8 }, { "double2", CUABI_ARG_F64, 2, 16 },
    { "double3", CUABI_ARG_F64, 3, 8 }, { "double4", CUABI_ARG_F64, 4, 16 },
    { "double4_16a", CUABI_ARG_F64, 4, 16 }, { "double4_32a", CUABI_ARG_F64, 4, 32 },
};

bool cuabi__vector_type(const char *name, size_t len, cuabi_arg_kind *elem, int *count,
                        size_t *align)
{
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        if (strlen(vectors[i].name) == len && memcmp(vectors[i].name, name, len) == 0) {
            *elem = vectors[i].elem;
            *count = vectors[i].count;
            *align = vectors[i].align;
            return true;
        }
    }
    return false;
}

static size_t scalar_size(cuabi_arg_kind k)
{
    switch (k) {
    case CUABI_ARG_I8: case CUABI_ARG_U8: case CUABI_ARG_BOOL: return 1;
    case CUABI_ARG_I16: case CUABI_ARG_U16: case CUABI_ARG_F16: case CUABI_ARG_BF16: return 2;
    case CUABI_ARG_I32: case CUABI_ARG_U32: case CUABI_ARG_F32: return 4;
    case CUABI_ARG_TENSORMAP: return 128;
    case CUABI_ARG_C128: return 16;
    default: return 8;
    }
}

/* ------------------------------------------------------------ C++ types */

/* Builtin types as the demangler prints them (LP64, as nvcc/NVRTC). */
static const struct { const char *name; cuabi_arg_kind kind; } builtins[] = {
    { "bool", CUABI_ARG_BOOL },
    { "char", CUABI_ARG_I8 }, { "signed char", CUABI_ARG_I8 }, { "unsigned char", CUABI_ARG_U8 },
    { "char8_t", CUABI_ARG_U8 },
    { "short", CUABI_ARG_I16 }, { "unsigned short", CUABI_ARG_U16 },
    { "char16_t", CUABI_ARG_U16 },
    { "int", CUABI_ARG_I32 }, { "unsigned int", CUABI_ARG_U32 },
    { "wchar_t", CUABI_ARG_I32 }, { "char32_t", CUABI_ARG_U32 },
    { "long", CUABI_ARG_I64 }, { "unsigned long", CUABI_ARG_U64 },
    { "long long", CUABI_ARG_I64 }, { "unsigned long long", CUABI_ARG_U64 },
    { "float", CUABI_ARG_F32 }, { "double", CUABI_ARG_F64 },
    { "__half", CUABI_ARG_F16 }, { "_Float16", CUABI_ARG_F16 },
    { "__nv_bfloat16", CUABI_ARG_BF16 }, { "std::bfloat16_t", CUABI_ARG_BF16 },
    { "decltype(nullptr)", CUABI_ARG_PTR }, { "std::nullptr_t", CUABI_ARG_PTR },
    { "CUtensorMap_st", CUABI_ARG_TENSORMAP }, { "CUtensorMap", CUABI_ARG_TENSORMAP },
};

static bool word_at_end(const char *t, size_t n, const char *w)
{
    size_t k = strlen(w);
    return n > k && t[n - k - 1] == ' ' && memcmp(t + n - k, w, k) == 0;
}

/* Drop top-level qualifiers (they do not change how a value is passed). */
static void strip_cv(const char **t, size_t *n)
{
    for (bool again = true; again;) {
        again = false;
        while (*n && (*t)[*n - 1] == ' ')
            (*n)--;
        while (*n && **t == ' ')
            (*t)++, (*n)--;
        static const char *const words[] = { "const", "volatile", "restrict", "__restrict" };
        for (int w = 0; w < 4; w++) {
            size_t k = strlen(words[w]);
            if (*n > k && memcmp(*t, words[w], k) == 0 && (*t)[k] == ' ') {
                *t += k + 1, *n -= k + 1, again = true;
            } else if (word_at_end(*t, *n, words[w])) {
                *n -= k + 1, again = true;
            }
        }
    }
}

static bool contains(const char *t, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(t + i, needle, k) == 0)
            return true;
    return false;
}

/* Classify one demangled parameter type. Unknown (structs, classes, enums,
 * member pointers, ...) stays CUABI_ARG_RAW with its name. */
static void classify_cxx(cuabi__param *p, const char *t, size_t n)
{
    p->kind = CUABI_ARG_RAW;
    strip_cv(&t, &n);
    if (n == 0)
        return;
    char last = t[n - 1];
    bool member = contains(t, n, "::*");
    if (!member && (last == '*' || last == '&' || contains(t, n, "(*)") || contains(t, n, "(&)"))) {
        p->kind = CUABI_ARG_PTR;   /* pointers, references, function pointers */
        p->size = 8;
        return;
    }
    if (member)
        return;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        if (strlen(builtins[i].name) == n && memcmp(builtins[i].name, t, n) == 0) {
            p->kind = builtins[i].kind;
            p->size = scalar_size(p->kind);
            return;
        }
    }
    if (cuabi__vector_type(t, n, &p->elem, &p->count, &p->align)) {
        p->kind = CUABI_ARG_STRUCT;
        p->size = scalar_size(p->elem) * (size_t)p->count;
        p->size = (p->size + p->align - 1) / p->align * p->align;
    }
}

/* A growable text buffer filled by the demangler's callback. */
typedef struct text {
    char *s;
    size_t len, cap;
    bool oom;
} text;

static void text_add(text *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = cuabi__realloc(b->s, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void demangle_sink(const char *s, size_t n, void *opaque)
{
    text_add(opaque, s, n);
}

/* Where the parameter list of a demangled function ends: its ')' is the
 * last character (kernels have no cv/ref qualifiers); its '(' the matching
 * one. Template arguments may hold parentheses, so match backwards. */
static bool param_list(const char *d, size_t n, size_t *open, size_t *close)
{
    if (n < 2 || d[n - 1] != ')')
        return false;
    int depth = 0;
    for (size_t i = n; i-- > 0;) {
        if (d[i] == ')')
            depth++;
        else if (d[i] == '(' && --depth == 0) {
            *open = i;
            *close = n - 1;
            return true;
        }
    }
    return false;
}

/* Split "a, b<c, d>, void (*)(int, int)" at top-level commas: ranges into
 * starts/lens (cap entries); returns the count, or SIZE_MAX on overflow. A
 * '>' closes a '<' only when one is open at this level, so the '>' of
 * operators inside template-argument expressions ("(1)>(2)") is skipped. */
static size_t split_params(const char *s, size_t n, size_t *starts, size_t *lens, size_t cap)
{
    char stack[256];
    int depth = 0;
    size_t count = 0, begin = 0;
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any |= s[i] != ' ';
    if (!any || (n == 4 && memcmp(s, "void", 4) == 0))
        return 0;
    for (size_t i = 0; i <= n; i++) {
        char c = i < n ? s[i] : ',';
        if (c == '(' || c == '<' || c == '[') {
            if (depth == (int)sizeof stack)
                return SIZE_MAX;
            stack[depth++] = c;
        } else if ((c == ')' && depth && stack[depth - 1] == '(') ||
                   (c == ']' && depth && stack[depth - 1] == '[') ||
                   (c == '>' && depth && stack[depth - 1] == '<')) {
            depth--;
        } else if (c == ',' && depth == 0) {
            if (count == cap)
                return SIZE_MAX;
            starts[count] = begin;
            lens[count] = i - begin;
            count++;
            begin = i + 1;
        }
    }
    return count;
}

/* ------------------------------------------------------------ PTX */

typedef struct lexer {
    const char *p, *end;
} lexer;

static void lex_space(lexer *l)
{
    while (l->p < l->end) {
        if (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r') {
            l->p++;
        } else if (l->p + 1 < l->end && l->p[0] == '/' && l->p[1] == '/') {
            while (l->p < l->end && *l->p != '\n')
                l->p++;
        } else if (l->p + 1 < l->end && l->p[0] == '/' && l->p[1] == '*') {
            const char *e = NULL;
            for (const char *q = l->p + 2; q + 1 < l->end && !e; q++)
                if (q[0] == '*' && q[1] == '/')
                    e = q + 2;
            l->p = e ? e : l->end;
        } else {
            break;
        }
    }
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '$' || c == '%';
}

/* The next token: an identifier, a number, one directive (".ptr.global"
 * is two), or one punctuation char. */
static size_t lex_token(lexer *l, const char **tok)
{
    lex_space(l);
    *tok = l->p;
    if (l->p >= l->end)
        return 0;
    size_t n = *l->p == '.' ? 1 : 0;
    while (l->p + n < l->end && ident_char(l->p[n]))
        n++;
    if (n == 0)
        n = 1;
    l->p += n;
    return n;
}

static bool tok_is(const char *t, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(t, s, n) == 0;
}

static bool ptx_param_type(const char *t, size_t n)
{
    static const char *const types[] = { ".u8", ".u16", ".u32", ".u64", ".s8", ".s16", ".s32",
                                         ".s64", ".b8", ".b16", ".b32", ".b64", ".f16", ".f32",
                                         ".f64" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (tok_is(t, n, types[i]))
            return true;
    return false;
}

/* Parse one ".param ..." of an entry into `out` as ".u32", ".b8[16]@4".
 * Returns false on anything unexpected. Stops after the name (and [N]). */
static bool ptx_param(lexer *l, text *out)
{
    const char *t, *type = NULL;
    size_t n, type_len = 0;
    unsigned long align = 0, count = 0;
    n = lex_token(l, &t);
    if (!tok_is(t, n, ".param"))
        return false;
    for (;;) {
        n = lex_token(l, &t);
        if (n == 0)
            return false;
        if (tok_is(t, n, ".align")) {
            n = lex_token(l, &t);
            char *e;
            align = strtoul(t, &e, 10);
            if (e != t + n || align == 0)
                return false;
        } else if (ptx_param_type(t, n)) {
            type = t;
            type_len = n;
        } else if (t[0] == '.') {
            continue;   /* .ptr, .global, ... (pointer attributes) */
        } else {
            break;      /* the parameter's name */
        }
    }
    if (!type || !ident_char(t[0]))
        return false;
    lexer peek = *l;
    n = lex_token(&peek, &t);
    if (n == 1 && *t == '[') {
        n = lex_token(&peek, &t);
        char *e;
        count = strtoul(t, &e, 10);
        if (e != t + n || count == 0)
            return false;
        n = lex_token(&peek, &t);
        if (n != 1 || *t != ']')
            return false;
        *l = peek;
    }
    char buf[64];
    int len = snprintf(buf, sizeof buf, "%.*s", (int)type_len, type);
    if (count)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "[%lu]", count);
    if (align)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "@%lu", align);
    text_add(out, buf, (size_t)len);
    return true;
}

/* Parse ".entry NAME ( params )" after the ".entry" token into `out`. */
static bool ptx_entry(lexer *l, text *out)
{
    const char *name, *t;
    size_t nn = lex_token(l, &name), n;
    if (nn == 0 || !ident_char(*name))
        return false;
    lexer at_body = *l;
    n = lex_token(l, &t);
    if (n == 1 && *t == '{') {   /* no parameter list at all */
        *l = at_body;
        text_add(out, name, nn);
        text_add(out, "()\n", 3);
        return true;
    }
    if (n != 1 || *t != '(')
        return false;
    text_add(out, name, nn);
    text_add(out, "(", 1);
    lexer peek = *l;
    n = lex_token(&peek, &t);
    if (n == 1 && *t == ')') {
        *l = peek;
    } else {
        for (bool first = true;; first = false) {
            if (!first)
                text_add(out, ",", 1);
            if (!ptx_param(l, out))
                return false;
            n = lex_token(l, &t);
            if (n == 1 && *t == ')')
                break;
            if (n != 1 || *t != ',')
                return false;
        }
    }
    text_add(out, ")\n", 2);
    return true;
}

cuabi_status cuabi__ptx_signatures(char **out, const char *ptx, size_t size)
{
    *out = NULL;
    text sigs = { 0 };
    lexer l = { ptx, ptx + size };
    const char *t;
    size_t n;
    while ((n = lex_token(&l, &t)) != 0) {
        if (!tok_is(t, n, ".entry"))
            continue;
        size_t mark = sigs.len;
        if (!ptx_entry(&l, &sigs) && !sigs.oom) {
            sigs.len = mark;   /* a declaration this parser does not follow: no types */
            if (sigs.s)
                sigs.s[mark] = '\0';
        }
    }
    if (sigs.oom) {
        cuabi__free(sigs.s);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    *out = sigs.s;
    return CUABI_SUCCESS;
}

/* The line "name(...)" of `name` in a signature text: the parameter list
 * between the parentheses; false when the kernel is not there. */
static bool ptx_lookup(const char *sigs, const char *name, const char **list, size_t *len)
{
    size_t nl = strlen(name);
    for (const char *line = sigs; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol)
            eol = line + strlen(line);
        if ((size_t)(eol - line) > nl + 1 && memcmp(line, name, nl) == 0 && line[nl] == '(' &&
            eol[-1] == ')') {
            *list = line + nl + 1;
            *len = (size_t)(eol - 1 - *list);
            return true;
        }
        line = *eol ? eol + 1 : eol;
    }
    return false;
}

/* Classify one PTX token (".u32", ".b8[16]@4"). */
static void classify_ptx(cuabi__param *p, const char *t, size_t n)
{
    static const struct { const char *name; cuabi_arg_kind kind; size_t size; } types[] = {
        { ".u8", CUABI_ARG_INTEGER, 1 }, { ".u16", CUABI_ARG_INTEGER, 2 },
        { ".u32", CUABI_ARG_INTEGER, 4 }, { ".u64", CUABI_ARG_INTPTR, 8 },
        { ".s8", CUABI_ARG_I8, 1 }, { ".s16", CUABI_ARG_I16, 2 }, { ".s32", CUABI_ARG_I32, 4 },
        { ".s64", CUABI_ARG_I64, 8 }, { ".f16", CUABI_ARG_F16, 2 }, { ".f32", CUABI_ARG_F32, 4 },
        { ".f64", CUABI_ARG_F64, 8 },
    };
    p->kind = CUABI_ARG_RAW;
    p->size = 0;
    if (memchr(t, '[', n))
        return;   /* bytes (structs, vectors, halves): raw of the layout's size */
    const char *at = memchr(t, '@', n);   /* an alignment changes nothing here */
    if (at)
        n = (size_t)(at - t);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (tok_is(t, n, types[i].name)) {
            p->kind = types[i].kind;
            p->size = types[i].size;
            return;
        }
    }
}

/* ------------------------------------------------------------ building */

void cuabi__param_types_free(cuabi__param_types *t)
{
    cuabi__free(t->params);
    cuabi__free(t->text);
    cuabi__free(t->signature);
    *t = (cuabi__param_types){ 0 };
}

/* Does `p` agree with the layout's size (and, for typed slots, offset)? */
static bool fits(const cuabi__param *p, size_t offset, size_t size)
{
    if (p->kind == CUABI_ARG_RAW)
        return true;
    size_t align = p->kind == CUABI_ARG_STRUCT ? p->align
                 : p->kind == CUABI_ARG_INTEGER ? p->size : scalar_size(p->kind);
    if (p->kind == CUABI_ARG_TENSORMAP)
        align = 64;
    return p->size == size && offset % align == 0;
}

/* The demangled text of a mangled kernel name (NULL when it is not one). */
static cuabi_status demangle(const char *name, text *out)
{
    *out = (text){ 0 };
    if (strncmp(name, "_Z", 2) != 0)
        return CUABI_SUCCESS;
    if (!cplus_demangle_v3_callback(name, DMGL_PARAMS | DMGL_ANSI, demangle_sink, out) ||
        out->oom) {
        bool oom = out->oom;
        cuabi__free(out->s);
        *out = (text){ 0 };
        return oom ? CUABI_ERROR_OUT_OF_MEMORY : CUABI_SUCCESS;
    }
    return CUABI_SUCCESS;
}

typedef struct ranges {
    size_t count;        /* SIZE_MAX: unusable */
    size_t *starts, *lens;
    const char *base;
} ranges;

static cuabi_status ranges_alloc(ranges *r, size_t cap)
{
    r->count = SIZE_MAX;
    r->starts = cuabi__calloc(cap ? cap : 1, sizeof(size_t));
    r->lens = cuabi__calloc(cap ? cap : 1, sizeof(size_t));
    return r->starts && r->lens ? CUABI_SUCCESS : CUABI_ERROR_OUT_OF_MEMORY;
}

static void ranges_free(ranges *r)
{
    cuabi__free(r->starts);
    cuabi__free(r->lens);
}

/* Decide every parameter and write the names into t->text. */
static cuabi_status decide(cuabi__param_types *t, const ranges *cxx, const ranges *ptx,
                           const size_t *offsets, const size_t *sizes)
{
    text names = { 0 };
    size_t *name_at = cuabi__calloc(t->count ? t->count : 1, sizeof *name_at);
    if (!name_at)
        return CUABI_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < t->count; i++) {
        cuabi__param *p = &t->params[i], from_ptx = { .kind = CUABI_ARG_RAW };
        const char *tn = "";
        size_t tl = 0;
        *p = (cuabi__param){ .kind = CUABI_ARG_RAW, .source = CUABI_PARAM_UNKNOWN };
        if (ptx->count == t->count) {
            classify_ptx(&from_ptx, ptx->base + ptx->starts[i], ptx->lens[i]);
            if (!fits(&from_ptx, offsets[i], sizes[i]))
                from_ptx = (cuabi__param){ .kind = CUABI_ARG_RAW };
            from_ptx.source = CUABI_PARAM_FROM_PTX;
            tn = ptx->base + ptx->starts[i], tl = ptx->lens[i];
            const char *at = memchr(tn, '@', tl);   /* the alignment is not shown */
            if (at)
                tl = (size_t)(at - tn);
            *p = from_ptx;
        }
        if (cxx->count == t->count) {
            const char *s = cxx->base + cxx->starts[i];
            size_t n = cxx->lens[i];
            while (n && *s == ' ')
                s++, n--;
            cuabi__param named = { 0 };
            classify_cxx(&named, s, n);
            tn = s, tl = n;
            if (named.kind != CUABI_ARG_RAW && fits(&named, offsets[i], sizes[i])) {
                named.source = CUABI_PARAM_FROM_NAME;
                *p = named;
            } else if (p->kind == CUABI_ARG_RAW) {
                /* A struct, class or enum: the name says which, the PTX (an
                 * enum is .u32) may say how it is passed. */
                p->source = CUABI_PARAM_FROM_NAME;
            }
        }
        if (p->kind == CUABI_ARG_RAW)
            p->size = 0;
        name_at[i] = names.len;
        text_add(&names, tn, tl);
        text_add(&names, "", 1);   /* the NUL separator */
    }
    if (names.oom || !(t->text = cuabi__malloc(names.len + 1))) {
        cuabi__free(names.s);
        cuabi__free(name_at);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    if (names.len)
        memcpy(t->text, names.s, names.len);
    t->text[names.len] = '\0';
    for (size_t i = 0; i < t->count; i++)
        t->params[i].type_name = t->text + name_at[i];
    cuabi__free(names.s);
    cuabi__free(name_at);
    return CUABI_SUCCESS;
}

static cuabi_status join_signature(cuabi__param_types *t)
{
    text sig = { 0 };
    text_add(&sig, "", 0);
    for (size_t i = 0; i < t->count; i++) {
        const char *n = t->params[i].type_name;
        if (i)
            text_add(&sig, ", ", 2);
        text_add(&sig, *n ? n : "?", *n ? strlen(n) : 1);
    }
    if (sig.oom || (!sig.s && !(sig.s = cuabi__calloc(1, 1)))) {
        cuabi__free(sig.s);
        return CUABI_ERROR_OUT_OF_MEMORY;
    }
    t->signature = sig.s;
    return CUABI_SUCCESS;
}

cuabi_status cuabi__param_types_build(cuabi__param_types *out, const char *name,
                                      const char *ptx_signatures, size_t count,
                                      const size_t *offsets, const size_t *sizes)
{
    *out = (cuabi__param_types){ .count = count };
    text dem;
    ranges cxx = { 0 }, ptx = { 0 };
    cuabi_status st = demangle(name, &dem);
    if (st == CUABI_SUCCESS)
        st = ranges_alloc(&cxx, count);
    if (st == CUABI_SUCCESS)
        st = ranges_alloc(&ptx, count);
    size_t open, close;
    if (st == CUABI_SUCCESS && dem.s && param_list(dem.s, dem.len, &open, &close)) {
        cxx.base = dem.s + open + 1;
        cxx.count = split_params(cxx.base, close - open - 1, cxx.starts, cxx.lens, count);
    }
    const char *list;
    size_t len;
    if (st == CUABI_SUCCESS && ptx_signatures && ptx_lookup(ptx_signatures, name, &list, &len)) {
        ptx.base = list;
        /* PTX tokens hold no brackets but "[N]", so the same split serves. */
        ptx.count = split_params(list, len, ptx.starts, ptx.lens, count);
    }
    if (st == CUABI_SUCCESS && !(out->params = cuabi__calloc(count ? count : 1, sizeof *out->params)))
        st = CUABI_ERROR_OUT_OF_MEMORY;
    if (st == CUABI_SUCCESS)
        st = decide(out, &cxx, &ptx, offsets, sizes);
    if (st == CUABI_SUCCESS)
        st = join_signature(out);
    ranges_free(&cxx);
    ranges_free(&ptx);
    cuabi__free(dem.s);
    if (st != CUABI_SUCCESS)
        cuabi__param_types_free(out);
    return st;
}
