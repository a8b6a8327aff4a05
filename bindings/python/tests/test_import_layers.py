"""The package's modules and the extension's C files form layers (issue 22
item 2): no import circle among cuabi/*.py, imports at the top of a file and
inside functions alike, each pointing down the table of cuabi/README.md; an
import inside a function says why (it buys import time); and no call circle
between the C files of src/ (cuabi._fast), whose *_init functions only
fast_module.c calls. Reads the sources (only the hooks' check imports the
package); needs no GPU."""
import ast
import os
import re
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.normpath(os.path.join(HERE, "..", "cuabi"))
SRC = os.path.normpath(os.path.join(HERE, "..", "src"))
EXTENSIONS = {"_fast"}          # compiled submodules: leaves, not in the graph
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def find_cycle(graph: dict):
    """One circle of `graph` (node -> iterable of nodes) as [a, b, ..., a],
    or None when it has none."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


# ------------------------------------------------------------ the package

def modules() -> list:
    return sorted(f[:-3] for f in os.listdir(PKG) if f.endswith(".py"))


def _source(name):
    with open(os.path.join(PKG, name + ".py"), encoding="utf-8") as f:
        return f.read()


def _targets(node, known):
    """The cuabi modules an import statement imports ("__init__": the
    package itself, for a name taken from it)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.level == 1 or (node.level == 0 and (node.module or "").split(".")[0] == "cuabi"):
        base = node.module if node.level == 1 else node.module[len("cuabi"):].lstrip(".")
        names = ["cuabi." + base] if base else ["cuabi." + a.name for a in node.names]
    else:
        names = []
    out = []
    for full in names:
        parts = full.split(".")
        if parts[0] != "cuabi":
            continue
        mod = parts[1] if len(parts) > 1 else "__init__"
        if mod in EXTENSIONS:
            continue
        out.append(mod if mod in known else "__init__")
    return out


def imports(name, known) -> list:
    """(target module, line, inside a function) of every import of a cuabi
    module in cuabi/<name>.py."""
    out = []

    def visit(node, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.extend((t, child.lineno, nested) for t in _targets(child, known))
            visit(child, nested or isinstance(child, FUNCTIONS))

    visit(ast.parse(_source(name), name + ".py"), False)
    return out


def import_graph() -> dict:
    """module -> {module: first line importing it}. The package (__init__)
    also imports every module by name (its lazy loader)."""
    known = set(modules())
    graph = {m: {} for m in known}
    for m in known:
        for target, line, _nested in imports(m, known):
            if target != m:
                graph[m].setdefault(target, line)
    graph["__init__"].update({m: 0 for m in known - {"__init__"}
                              if m not in graph["__init__"]})
    return graph


def layers() -> dict:
    """module -> layer number, from the table of cuabi/README.md."""
    with open(os.path.join(PKG, "README.md"), encoding="utf-8") as f:
        text = f.read()
    table = {}
    for m in re.finditer(r"^ {4}(\d+) +(\w+)\b", text, re.M):
        assert m.group(2) not in table, f"cuabi/README.md lists {m.group(2)} twice"
        table[m.group(2)] = int(m.group(1))
    return table


def test_every_module_has_a_layer():
    table = layers()
    assert set(table) == set(modules()), (
        f"cuabi/README.md's table: add {sorted(set(modules()) - set(table))}, "
        f"drop {sorted(set(table) - set(modules()))}")


def test_imports_point_down():
    table, known = layers(), set(modules())
    wrong = [f"cuabi/{m}.py:{line}: {m} (layer {table[m]}) imports {t} (layer {table[t]})"
             for m in sorted(known) for t, line, _n in imports(m, known)
             if t != m and table[t] >= table[m]]
    assert not wrong, "imports that do not point down cuabi/README.md's layers:\n" + \
        "\n".join(wrong)


def test_no_import_circle():
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle:
        steps = [f"{a} -> {b} (cuabi/{a}.py:{graph[a][b] or 'its lazy loader'})"
                 for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import circle: " + " -> ".join(cycle) + "\n  " + "\n  ".join(steps))


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


_WHY = re.compile(r"#.*(lazy|import time)", re.I)


def test_nested_imports_say_why():
    # Any import inside a function (of a cuabi module or not): a comment
    # with "lazy" or "import time" on its lines, the line above, or above
    # the run of imports it belongs to.
    silent = []
    for m in modules():
        lines = _source(m).splitlines()
        is_import = [False] * (len(lines) + 2)
        nested = []

        def visit(node, inside):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for n in range(child.lineno, child.end_lineno + 1):
                        is_import[n] = True
                    if inside:
                        nested.append(child)
                visit(child, inside or isinstance(child, FUNCTIONS))

        visit(ast.parse("\n".join(lines)), False)
        for node in nested:
            first = node.lineno         # the first line of its run of imports
            while first > 1 and is_import[first - 1] and not _WHY.search(lines[first - 1]):
                first -= 1
            span = lines[max(first - 2, 0):node.end_lineno]
            if not any(_WHY.search(x) for x in span):
                silent.append(f"cuabi/{m}.py:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not silent, "imports inside functions without a comment saying why " \
        "(\"lazy: import time\"):\n" + "\n".join(silent)


def test_no_imports_by_name_below_the_package():
    # importlib.import_module / __import__ of a cuabi module would hide an
    # edge from the checks above: only the package's lazy loader does that.
    found = []
    for m in modules():
        if m == "__init__":
            continue
        for node in ast.walk(ast.parse(_source(m))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            fn = node.func
            fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if fname not in ("import_module", "__import__"):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr) or (
                    isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                    and (arg.value.startswith(("cuabi", ".")))):
                found.append(f"cuabi/{m}.py:{node.lineno}")
    assert not found, f"cuabi modules imported by name: {found}"


def test_the_package_sets_every_hook():
    import cuabi  # noqa: F401  (sets them)
    from cuabi import _lib
    assert set(vars(_lib.hooks)) == set(_lib.HOOKS), "hooks set that _lib.HOOKS does not list"
    for name in _lib.HOOKS:
        hook = getattr(_lib.hooks, name)
        assert hook is not _lib._hook_unset, f"cuabi._lib.hooks.{name} is not set"
        got = hook()
        if name.endswith("_module"):        # a module the lower layer uses at first need
            assert isinstance(got, types.ModuleType) and got.__name__ == "cuabi._graph_def", name
        else:
            assert isinstance(got, type), name


# ------------------------------------------------------------ the extension

def _c_files(ext):
    return sorted(f for f in os.listdir(SRC) if f.endswith(ext))


def _read(name):
    with open(os.path.join(SRC, name), encoding="utf-8") as f:
        return f.read()


def _code(text):
    """C text without comments, string and character literals, and
    preprocessor lines."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', text)
    return re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", "", text, flags=re.M)


def _file_scope(text):
    """The file-scope declarations and function definitions of C text:
    (its text up to the `;`, or up to the body, "declaration" or "body").
    Struct, union and enum definitions give nothing; a variable with a
    braced initializer gives its text up to the `=`."""
    out, depth, start, skip = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                head = text[start:i].rstrip()
                if head.endswith(")"):
                    out.append((head, "body"))              # a function
                else:
                    skip = True                             # up to the `;`
                    if head.endswith("="):
                        out.append((head[:-1], "declaration"))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and not skip:
                start = i + 1
        elif ch == ";" and depth == 0:
            if not skip:
                out.append((text[start:i], "declaration"))
            skip = False
            start = i + 1
    return out


_NAME = re.compile(r"\b(fast_\w+)\s*(\(|=|\[|$)")


def c_definitions(name) -> set:
    """The non-static fast_* functions and variables a .c file defines."""
    found = set()
    for chunk, kind in _file_scope(_code(_read(name))):
        words = chunk.split()
        if not words or {"static", "extern", "typedef"} & set(words) or "struct" == words[0]:
            continue
        m = _NAME.search(chunk.strip())
        if m and (kind == "body") == (m.group(2) == "("):
            found.add(m.group(1))
    return found


def c_declarations(name) -> set:
    """The non-static, non-inline fast_* functions and extern variables a
    header declares."""
    found = set()
    for chunk, kind in _file_scope(_code(_read(name))):
        words = chunk.split()
        if kind != "declaration" or not words or {"static", "typedef", "inline"} & set(words):
            continue
        m = _NAME.search(chunk.strip())
        if m and (m.group(2) == "(" or "extern" in words):
            found.add(m.group(1))
    return found


def c_includes(name) -> set:
    return set(re.findall(r'^\s*#\s*include\s*"([^"]+)"', _read(name), re.M))


def c_includes_all(name) -> set:
    """The local headers `name` includes, directly or through another."""
    seen, todo = set(), [name]
    while todo:
        for h in c_includes(todo.pop()) - seen:
            seen.add(h)
            todo.append(h)
    return seen


def c_call_graph() -> dict:
    """.c file -> {.c file defining a fast_* function or variable it uses}."""
    definer = {}
    for f in _c_files(".c"):
        for sym in c_definitions(f):
            assert sym not in definer, f"{sym} defined in {definer.get(sym)} and {f}"
            definer[sym] = f
    graph = {}
    for f in _c_files(".c"):
        used = set(re.findall(r"\bfast_\w+\b", _code(_read(f))))
        graph[f] = {definer[s] for s in used if s in definer and definer[s] != f}
    return graph


def test_c_parser_sees_the_shared_helpers():
    defs = {f: c_definitions(f) for f in _c_files(".c")}
    assert {"fast_api", "fast_raise", "fast_not_attached", "fast_slot_offset"} <= \
        defs["fast_common.c"]
    assert "fast_pack_init" in defs["fast_pack.c"] and "fast_view_init" in defs["fast_view.c"]
    assert "fast_common.c" in c_call_graph()["fast_launch.c"]


def test_c_includes_form_no_circle():
    graph = {f: c_includes(f) for f in _c_files(".c") + _c_files(".h")}
    cycle = find_cycle(graph)
    assert cycle is None, "#include circle in bindings/python/src: " + " -> ".join(cycle)


def test_c_calls_form_no_circle():
    cycle = find_cycle(c_call_graph())
    assert cycle is None, ("bindings/python/src: files calling each other: "
                           + " -> ".join(cycle) + " (shared helpers go in fast_common.c)")


def test_c_calls_go_through_the_callees_header():
    # A file uses another's functions through that file's header (fast_X.h
    # declares what fast_X.c defines), so the includes draw the call graph:
    # included directly or by another header it includes.
    headers = {h: c_declarations(h) for h in _c_files(".h")}
    for h, names in headers.items():
        own = h[:-2] + ".c"
        if names and os.path.exists(os.path.join(SRC, own)):
            assert names <= c_definitions(own), f"{h} declares {names - c_definitions(own)}, " \
                f"which {own} does not define"
    wrong = [f"{f} uses {callee} without including {callee[:-2]}.h"
             for f, callees in c_call_graph().items() for callee in sorted(callees)
             if callee[:-2] + ".h" not in c_includes_all(f)]
    assert not wrong, "\n".join(wrong)


def test_only_fast_module_calls_the_init_functions():
    inits = {s for f in _c_files(".c") for s in c_definitions(f) if s.endswith("_init")}
    assert len(inits) >= 4, inits
    callers = {f for f in _c_files(".c") for s in inits
               if re.search(r"\b%s\s*\(" % s, _code(_read(f))) and s not in c_definitions(f)}
    assert callers == {"fast_module.c"}, \
        f"only fast_module.c calls the parts' *_init functions, not {sorted(callers - {'fast_module.c'})}"
