#!/usr/bin/env python3
"""Static checks of the Julia bindings (no Julia runtime needed).

1. Every .jl file under bindings/julia parses with the tree-sitter Julia
   grammar without ERROR or MISSING nodes.
2. Every `ccall((:name, lib), Ret, (Args...), values...)` in those files
   names a function of the API description (api/*.toml), passes as many
   values as it declares types, and its return and argument types are the
   Julia spellings of the C declaration's types (the C -> Julia map below,
   written independently of gen/emit_julia.py).
3. Every function of the description has a ccall in src/LibCuABI.jl.
4. Every function of the modules in SAFE_MODULES is reached by the safe
   wrapper (`L.<name>` called or passed in a file other than LibCuABI.jl).
`@ccall` is refused: it would escape check 2.

Exit 0 when all pass, 1 on any failure, 77 (Automake SKIP) when the
tree-sitter packages are missing. Prints "N passed, M failed".
"""
from __future__ import annotations

import argparse
import os
import re
import sys

# C scalar -> canonical Julia type (x86-64 Linux, LP64).
C_TO_JULIA = {
    "void": "Cvoid", "char": "Int8", "int": "Int32", "unsigned int": "UInt32",
    "float": "Float32", "double": "Float64", "size_t": "UInt64", "bool": "Bool",
    "int8_t": "Int8", "int16_t": "Int16", "int32_t": "Int32", "int64_t": "Int64",
    "uint8_t": "UInt8", "uint16_t": "UInt16", "uint32_t": "UInt32",
    "uint64_t": "UInt64", "uintptr_t": "UInt64", "intptr_t": "Int64",
}
# Julia's C-named aliases and synonyms -> the same canonical names.
JULIA_ALIASES = {
    "Cint": "Int32", "Cuint": "UInt32", "Cchar": "Int8", "Cuchar": "UInt8",
    "Cshort": "Int16", "Cushort": "UInt16", "Clong": "Int64", "Culong": "UInt64",
    "Clonglong": "Int64", "Culonglong": "UInt64", "Csize_t": "UInt64",
    "Cssize_t": "Int64", "Cuintptr_t": "UInt64", "Cintptr_t": "Int64",
    "Cfloat": "Float32", "Cdouble": "Float64", "Int": "Int64", "UInt": "UInt64",
    "Nothing": "Cvoid", "Cvoid": "Cvoid", "Cstring": "Ptr{Int8}",
}


class Type:
    """A parsed Julia type expression: name{params...}."""

    def __init__(self, name: str, params: list["Type"] | None = None):
        self.name, self.params = name, params or []

    def __str__(self) -> str:
        return self.name + ("{" + ", ".join(map(str, self.params)) + "}" if self.params else "")


def parse_julia_type(text: str) -> Type:
    toks = re.findall(r'[A-Za-z_][A-Za-z_0-9!.]*|\d+|[{},]', text)
    pos = 0

    def one() -> Type:
        nonlocal pos
        if pos >= len(toks):
            raise ValueError(f"cannot parse type {text!r}")
        name = toks[pos].split(".")[-1]  # LibCuABI.cuabi_status -> cuabi_status
        pos += 1
        params = []
        if pos < len(toks) and toks[pos] == "{":
            pos += 1
            while toks[pos] != "}":
                params.append(one())
                if toks[pos] == ",":
                    pos += 1
            pos += 1
        return Type(name, params)

    t = one()
    if pos != len(toks):
        raise ValueError(f"cannot parse type {text!r}")
    return t


# Modules whose every function the safe wrapper (CuABI.jl and the files it
# includes) must expose, not only LibCuABI.jl.
SAFE_MODULES = ("occupancy", "nccl", "green", "checkpoint", "nvml")


class Checker:
    def __init__(self, api):
        self.api = api
        self.funcs = {f.name: f for f in api.functions}
        self.aliases = dict(JULIA_ALIASES)
        for h in api.handles:
            self.aliases[h] = "Cvoid"          # handles are opaque: Ptr{Cvoid}
        for e in api.enums:
            self.aliases[e] = "Int32"          # C enums are int-sized
        for cb in api.callbacks:
            self.aliases[cb] = "Ptr{Cvoid}"    # function pointers
        self.passed = 0
        self.failed = 0

    def canon(self, t: Type, arg: bool) -> str:
        """Canonical text of a Julia type; Ref{T} is Ptr{T} for arguments
        (ccall converts a Ref to a pointer to its contents)."""
        name = t.name
        if name == "Ref" and arg:
            name = "Ptr"
        if not t.params:
            a = self.aliases.get(name, name)
            return a
        return f"{name}{{{', '.join(self.canon(p, arg) for p in t.params)}}}"

    def expected(self, ct) -> str:
        """Canonical Julia type of a C type from the description."""
        if ct.base in C_TO_JULIA:
            s = C_TO_JULIA[ct.base]
        elif ct.base in self.api.handles:
            s = "Cvoid"
        elif ct.base in self.api.enums or ct.base == "cuabi_status":
            s = "Int32"
        elif ct.base in self.api.callbacks:
            s = "Ptr{Cvoid}"
        else:
            s = ct.base  # structs and DLPack types: same name in Julia
        for _ in range(ct.ptr):
            s = f"Ptr{{{s}}}"
        return s

    def ok(self) -> None:
        self.passed += 1

    def fail(self, where: str, msg: str) -> None:
        self.failed += 1
        print(f"FAIL {where}: {msg}")

    def check_ccall(self, where: str, node, src: bytes) -> str | None:
        text = lambda n: src[n.start_byte:n.end_byte].decode()
        args = next((c for c in node.children if c.type == "argument_list"), None)
        items = [c for c in (args.named_children if args else [])
                 if c.type not in ("comment", "line_comment", "block_comment")]
        if len(items) < 3:
            self.fail(where, f"ccall needs (name, lib), return type and argument types: {text(node)[:80]}")
            return None
        target, ret, argtypes, values = items[0], items[1], items[2], items[3:]
        m = re.fullmatch(r"\(\s*:(\w+)\s*,.*\)", text(target), re.S)
        if target.type != "tuple_expression" or not m:
            self.fail(where, f"ccall target is not (:name, library): {text(target)[:60]}")
            return None
        fname = m.group(1)
        f = self.funcs.get(fname)
        if f is None:
            self.fail(where, f"ccall of {fname}, which api/*.toml does not declare")
            return fname
        if argtypes.type != "tuple_expression":
            self.fail(where, f"{fname}: argument types must be a tuple, got {text(argtypes)}")
            return fname
        types = [c for c in argtypes.named_children if c.type not in ("comment", "line_comment")]
        errors = []
        if len(types) != len(f.params):
            errors.append(f"{len(types)} argument types for {len(f.params)} C parameters")
        if len(values) != len(types):
            errors.append(f"{len(values)} values for {len(types)} argument types")
        try:
            got = self.canon(parse_julia_type(text(ret)), arg=False)
            want = self.expected(f.returns)
            if got != want:
                errors.append(f"returns {text(ret)} ({got}), C returns {f.returns.c()} ({want})")
            for p, tn in zip(f.params, types):
                got = self.canon(parse_julia_type(text(tn)), arg=True)
                want = self.expected(p.type)
                if got != want:
                    errors.append(f"parameter {p.name}: {text(tn)} ({got}) but C has "
                                  f"{p.type.c()} ({want})")
        except ValueError as e:
            errors.append(str(e))
        if errors:
            self.fail(where, f"{fname}: " + "; ".join(errors))
        else:
            self.ok()
        return fname


def syntax_errors(node, out: list) -> None:
    if node.type == "ERROR" or node.is_missing:
        out.append(node)
    for c in node.children:
        syntax_errors(c, out)


def calls(node, name: str):
    """call_expression nodes whose callee is the identifier `name`, and
    macrocall nodes of `@name`."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "call_expression" and n.children and n.children[0].type == "identifier":
            yield n
        elif n.type == "macrocall_expression":
            yield n
        stack.extend(reversed(n.children))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = ap.parse_args(argv)
    try:
        import tree_sitter
        import tree_sitter_julia
    except ImportError as e:
        print(f"SKIP: the tree-sitter Julia grammar is not installed ({e}); "
              "install the PyPI packages tree-sitter and tree-sitter-julia")
        return 77
    sys.path.insert(0, os.path.join(args.root, "gen"))
    import cuabi_gen
    api = cuabi_gen.Api(args.root)
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_julia.language()))
    ck = Checker(api)

    jdir = os.path.join(args.root, "bindings", "julia")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(jdir) for f in fs if f.endswith(".jl"))
    if not files:
        ck.fail(jdir, "no .jl files")
    wrapped = set()
    ccalls = 0
    for path in files:
        rel = os.path.relpath(path, args.root)
        src = open(path, "rb").read()
        tree = parser.parse(src)
        errs = []
        syntax_errors(tree.root_node, errs)
        if errs:
            for n in errs[:5]:
                r, c = n.start_point
                kind = "missing " + n.type if n.is_missing else "syntax error"
                ck.fail(f"{rel}:{r + 1}:{c + 1}", f"{kind}: {src[n.start_byte:n.end_byte][:40]!r}")
            continue
        ck.ok()
        for n in calls(tree.root_node, "ccall"):
            r = n.start_point[0] + 1
            head = src[n.children[0].start_byte:n.children[0].end_byte].decode()
            if n.type == "macrocall_expression":
                if "@ccall" in head:
                    ck.fail(f"{rel}:{r}", "@ccall is not checked; write ccall((:name, lib), Ret, (Args,), ...)")
                continue
            if head != "ccall":
                continue
            ccalls += 1
            fname = ck.check_ccall(f"{rel}:{r}", n, src)
            if fname and os.path.basename(path) == "LibCuABI.jl":
                wrapped.add(fname)
    for f in api.functions:
        if f.name in wrapped:
            ck.ok()
        else:
            ck.fail("LibCuABI.jl", f"no ccall of {f.name}")
    safe = "".join(open(p, encoding="utf-8").read() for p in files
                   if os.path.basename(p) != "LibCuABI.jl")
    for f in api.functions:
        if f.module in SAFE_MODULES:
            if re.search(rf"\bL\.{f.name}\b", safe):
                ck.ok()
            else:
                ck.fail("CuABI", f"{f.name} ({f.module}) is not reached by the safe wrapper")
    print(f"checked {len(files)} Julia files, {ccalls} ccalls, {len(api.functions)} C functions")
    print(f"{ck.passed} passed, {ck.failed} failed")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
