#!/usr/bin/env python3
"""The one-way rule of src/ (docs/ARCHITECTURE.md), checked.

libcuabi's sources live on floors, one folder each; a file may include and
call only its own floor and the floors below it, and no files call each
other in a circle. Two readings of the code enforce it:

  includes  every `#include "..."` of src/<floor>/*.[ch] names its floor
            ("runtime/memory.h", not "memory.h"), and no floor includes a
            floor above it; the include graph of files has no circle.
  symbols   with --build, every object of the built library (nm): no object
            refers to a symbol another object defines on a floor above it,
            and the graph "object A uses a symbol of object B" has no circle.
            An inline function of a header counts for the file that uses it.

src/cli, the `cuabi` tool, is no floor of the library: it may include only
the public headers (cuabi.h, cuabi/...) and its own.

Every source of a floor is also listed in mk/library.am (the tool's in
mk/cli.am): a file the build does not list is missing from `make dist`'s
tarball, which then fails to build elsewhere.

    python3 tests/library/layers.py --src SRC [--build BUILD]
    python3 tests/library/layers.py --self-test

Exit 0 when the rule holds; 1 with every breach listed.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

# Lowest first. A new floor goes here and in docs/ARCHITECTURE.md.
FLOORS = ["util", "platform", "compile", "runtime", "abi"]
RANK = {f: i for i, f in enumerate(FLOORS)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
PUBLIC = re.compile(r"^cuabi(\.h|/)")


def floor_files(src: str):
    """(floor, path relative to src) of every library source."""
    for fl in FLOORS:
        d = os.path.join(src, fl)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                yield fl, f"{fl}/{name}"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` (a list of nodes, first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    sys.setrecursionlimit(10000)
    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def check_includes(src: str) -> list[str]:
    errors = []
    graph: dict[str, set[str]] = {}
    stray = [n for n in os.listdir(src)
             if n.endswith((".c", ".h")) and os.path.isfile(os.path.join(src, n))]
    for n in sorted(stray):
        errors.append(f"src/{n}: a source outside every floor (move it to src/<floor>/)")
    for fl in FLOORS:
        if os.path.isdir(os.path.join(src, fl)) and \
                not os.path.isfile(os.path.join(src, fl, "README.md")):
            errors.append(f"src/{fl}: no README.md saying what lives there")
    for fl, rel in floor_files(src):
        with open(os.path.join(src, rel), encoding="utf-8") as f:
            text = f.read()
        graph.setdefault(rel, set())
        for inc in INCLUDE.findall(text):
            if PUBLIC.match(inc):
                continue
            target_floor = inc.split("/", 1)[0] if "/" in inc else None
            if target_floor not in RANK:
                errors.append(f"src/{rel}: #include \"{inc}\" does not name its floor "
                              f"(write \"<floor>/{os.path.basename(inc)}\")")
                continue
            if not os.path.isfile(os.path.join(src, inc)):
                errors.append(f"src/{rel}: #include \"{inc}\": no such file in src/")
                continue
            if RANK[target_floor] > RANK[fl]:
                errors.append(f"src/{rel}: includes {inc}, a floor above {fl}")
            graph[rel].add(inc)
    cycle = find_cycle(graph)
    if cycle:
        errors.append("include circle: " + " -> ".join(cycle))
    errors += check_listed(src)
    cli = os.path.join(src, "cli")
    for name in sorted(os.listdir(cli)) if os.path.isdir(cli) else []:
        if not name.endswith((".c", ".h")):
            continue
        with open(os.path.join(cli, name), encoding="utf-8") as f:
            for inc in INCLUDE.findall(f.read()):
                if not PUBLIC.match(inc) and not os.path.isfile(os.path.join(cli, inc)):
                    errors.append(f"src/cli/{name}: #include \"{inc}\": the tool uses the "
                                  "public headers only")
    return errors


def check_listed(src: str) -> list[str]:
    """Every source of src/<floor>/ named in mk/library.am, of src/cli in
    mk/cli.am (paths as automake writes them: src/<floor>/<file>)."""
    mk = os.path.join(os.path.dirname(os.path.abspath(src)), "mk")
    def words(name: str) -> set[str]:
        try:
            with open(os.path.join(mk, name), encoding="utf-8") as f:
                return set(f.read().split())
        except OSError:
            return set()
    listed = words("library.am") | words("cli.am")
    errors = []
    places = [(fl, rel) for fl, rel in floor_files(src)]
    cli = os.path.join(src, "cli")
    if os.path.isdir(cli):
        places += [("cli", f"cli/{n}") for n in sorted(os.listdir(cli)) if n.endswith((".c", ".h"))]
    for fl, rel in places:
        if f"src/{rel}" not in listed:
            errors.append(f"src/{rel}: not listed in mk/{'cli' if fl == 'cli' else 'library'}.am "
                          "(make dist would leave it out)")
    # Every public header is installed (cuabi.h includes each one: one
    # missing breaks every program that includes cuabi.h after install).
    public = os.path.join(os.path.dirname(os.path.abspath(src)), "include", "cuabi")
    if os.path.isdir(public) and listed:
        for n in sorted(os.listdir(public)):
            if n.endswith(".h") and n != "version.h" and f"include/cuabi/{n}" not in listed:
                errors.append(f"include/cuabi/{n}: not listed in mk/library.am "
                              "(make install would leave it out)")
    return errors


def objects(build: str) -> dict[str, str]:
    """floor/name -> object file of the built library (PIC objects first)."""
    found: dict[str, str] = {}
    for fl in FLOORS:
        for sub in (os.path.join(build, "src", fl, ".libs"), os.path.join(build, "src", fl)):
            if not os.path.isdir(sub):
                continue
            for name in sorted(os.listdir(sub)):
                m = re.match(r"(?:libcuabi_core_la-)?(.+)\.o$", name)
                if m:
                    found.setdefault(f"{fl}/{m.group(1)}", os.path.join(sub, name))
    return found


def symbols(path: str) -> tuple[set[str], set[str]]:
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRCVW":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def check_symbols(build: str) -> list[str]:
    objs = objects(build)
    if not objs:
        return [f"{build}: no objects of the library under src/<floor>/ (build it first)"]
    defined_in: dict[str, str] = {}
    uses: dict[str, set[str]] = {}
    for unit, path in objs.items():
        d, u = symbols(path)
        for s in d:
            defined_in.setdefault(s, unit)
        uses[unit] = u
    errors = []
    graph: dict[str, set[str]] = {u: set() for u in objs}
    for unit, used in sorted(uses.items()):
        upward: dict[str, list[str]] = {}
        for s in used:
            owner = defined_in.get(s)
            if not owner or owner == unit:
                continue
            graph[unit].add(owner)
            if RANK[owner.split("/")[0]] > RANK[unit.split("/")[0]]:
                upward.setdefault(owner, []).append(s)
        for owner, syms in sorted(upward.items()):
            errors.append(f"{unit}: calls up into {owner} ({', '.join(sorted(syms)[:5])})")
    cycle = find_cycle(graph)
    if cycle:
        errors.append("call circle between files: " + " -> ".join(cycle))
    return errors


def self_test() -> int:
    """The checker finds what it must: an upward include, a bare include and a
    circle, in a made-up tree; and passes a clean one."""
    with tempfile.TemporaryDirectory() as tmp:
        def tree(files: dict[str, str], unlisted: tuple[str, ...] = ()) -> str:
            top = tempfile.mkdtemp(dir=tmp)
            root = os.path.join(top, "src")
            for fl in ("util", "runtime", "cli"):
                os.makedirs(os.path.join(root, fl))
            for fl in ("util", "runtime"):
                open(os.path.join(root, fl, "README.md"), "w").close()
            for rel, text in files.items():
                with open(os.path.join(root, rel), "w") as f:
                    f.write(text)
            os.makedirs(os.path.join(top, "mk"))
            with open(os.path.join(top, "mk", "library.am"), "w") as f:
                f.write(" ".join(f"src/{r}" for r in files if r not in unlisted))
            return root
        clean = tree({"util/a.h": "", "runtime/b.c": '#include "util/a.h"\n#include "cuabi.h"\n',
                      "cli/main.c": '#include "cuabi.h"\n'})
        cases = {
            "upward": tree({"util/a.c": '#include "runtime/b.h"\n', "runtime/b.h": ""}),
            "bare": tree({"runtime/b.c": '#include "b.h"\n', "runtime/b.h": ""}),
            "circle": tree({"runtime/x.h": '#include "runtime/y.h"\n',
                            "runtime/y.h": '#include "runtime/x.h"\n'}),
            "cli": tree({"cli/main.c": '#include "runtime/b.h"\n', "runtime/b.h": ""}),
            "stray": tree({"loose.c": ""}),
            "unlisted": tree({"runtime/b.c": '#include "cuabi.h"\n'}, unlisted=("runtime/b.c",)),
        }
        ok = True
        if check_includes(clean):
            print("self-test: a clean tree was refused:", check_includes(clean))
            ok = False
        for name, root in cases.items():
            if not check_includes(root):
                print(f"self-test: the '{name}' breach went unnoticed")
                ok = False
        g = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
        if find_cycle(g) != ["a", "b", "c", "a"] or find_cycle({"a": {"b"}, "b": set()}):
            print("self-test: find_cycle is wrong")
            ok = False
    print("self-test: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", help="the src/ folder")
    ap.add_argument("--build", help="a build folder (objects are read with nm)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.src:
        ap.error("--src is required")
    errors = check_includes(a.src)
    if a.build:
        errors += check_symbols(a.build)
    for e in errors:
        print("layers:", e)
    n = sum(1 for _ in floor_files(a.src))
    print(f"layers: {n} files on {len(FLOORS)} floors, {len(errors)} breaches"
          + ("" if a.build else " (includes only)"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
