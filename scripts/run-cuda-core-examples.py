#!/usr/bin/env python3
"""Run NVIDIA's cuda.core examples as written and on cuabi (issue 24 item 2).

    scripts/run-cuda-core-examples.py DIR [--timeout S] [--json] [--only NAME ...]
                                          [--fake-driver LIB] [--skip-original]

DIR holds cuda.core's examples (cuda_core/examples/*.py of NVIDIA/cuda-python;
they stay outside this repository). Each example runs twice, each in a process
of its own with a timeout: once as written (cuda.core), and once as a copy whose
`cuda.core` / `cuda.core.experimental` imports name `cuabi` instead -- nothing
else changes. The copies live in a temporary directory.

Prints a table (example, original rc, cuabi rc, first error line of the cuabi
run, or of the original when only it failed) and the line

    cuda.core examples on cuabi: N of M pass (K pass as written)

where M counts the examples run, N those whose cuabi copy exits 0 and K those
whose original exits 0. --json prints the same as one JSON object instead.

--fake-driver LIB runs the cuabi copies with CUABI_DRIVER_PATH=LIB (the test
suite's fake libcuda, tests/fixtures/.libs/fake_cuda_graph.so: no GPU needed,
kernels do not run, so results an example checks will differ); the originals
run unchanged. cuabi must be importable (PYTHONPATH=bindings/python and
CUABI_LIBRARY, or an installed wheel).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# `from cuda.core[.experimental][.sub] import ...` and `import cuda.core[...] [as x]`:
# only the module path changes.
_FROM = re.compile(r"^(\s*from\s+)cuda\.core(?:\.experimental)?(\.[\w.]+)?(\s+import\b)", re.M)
_IMPORT_AS = re.compile(r"^(\s*import\s+)cuda\.core(?:\.experimental)?(\.[\w.]+)?(\s+as\s+\w+)",
                        re.M)
_IMPORT = re.compile(r"^(\s*import\s+)cuda\.core(?:\.experimental)?(\.[\w.]+)?\s*$", re.M)


def to_cuabi(source: str) -> str:
    """The example with every cuda.core import pointed at cuabi."""
    source = _FROM.sub(lambda m: f"{m.group(1)}cuabi{m.group(2) or ''}{m.group(3)}", source)
    source = _IMPORT_AS.sub(lambda m: f"{m.group(1)}cuabi{m.group(2) or ''}{m.group(3)}",
                            source)
    # A bare `import cuda.core` binds the name `cuda`: bind it to a namespace
    # whose `core` is cuabi, so `cuda.core.X` still resolves.
    return _IMPORT.sub(lambda m: (f"{m.group(1)}cuabi{m.group(2) or ''}; import types as _t; "
                                  f"cuda = _t.SimpleNamespace(core=cuabi)"), source)


def first_error(text: str) -> str:
    """The exception line of a traceback (its last line naming an error),
    or the last non-empty line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt|Warning)\b", ln) or \
                ln.startswith("AssertionError"):
            return ln[:200]
    return lines[-1][:200] if lines else ""


def run(path: str, cwd: str, timeout: float, env: dict) -> dict:
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, path], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        err += f"\nTimeoutError: no exit within {timeout:g} s"
    return {"rc": rc, "seconds": round(time.perf_counter() - t0, 2),
            "error": "" if rc == 0 else first_error(err or out),
            "stderr_tail": (err or "")[-2000:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run (300)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--only", nargs="*", help="example names (without .py) to run")
    ap.add_argument("--fake-driver", help="CUABI_DRIVER_PATH for the cuabi copies")
    ap.add_argument("--skip-original", action="store_true",
                    help="run only the cuabi copies (original rc: '-')")
    a = ap.parse_args(argv)

    names = sorted(f for f in os.listdir(a.dir) if f.endswith(".py"))
    if a.only:
        want = {n[:-3] if n.endswith(".py") else n for n in a.only}
        names = [n for n in names if n[:-3] in want]
    if not names:
        print(f"no examples (*.py) in {a.dir}", file=sys.stderr)
        return 2
    base_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    cuabi_env = dict(base_env)
    if a.fake_driver:
        cuabi_env["CUABI_DRIVER_PATH"] = os.path.abspath(a.fake_driver)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuda-core-examples-") as tmp:
        for name in names:
            src = os.path.join(os.path.abspath(a.dir), name)
            with open(src, encoding="utf-8") as f:
                text = f.read()
            copy = os.path.join(tmp, name)
            with open(copy, "w", encoding="utf-8") as f:
                f.write(to_cuabi(text))
            orig = {"rc": "-", "seconds": 0, "error": "", "stderr_tail": ""} \
                if a.skip_original else run(src, os.path.dirname(src), a.timeout, base_env)
            mine = run(copy, tmp, a.timeout, cuabi_env)
            rows.append({"example": name[:-3], "original": orig, "cuabi": mine,
                         "imports_changed": text != to_cuabi(text)})
            if not a.json:
                print(f"  ran {name[:-3]}: original {orig['rc']}, cuabi {mine['rc']}",
                      file=sys.stderr)
    n = sum(1 for r in rows if r["cuabi"]["rc"] == 0)
    k = sum(1 for r in rows if r["original"]["rc"] == 0)
    summary = f"cuda.core examples on cuabi: {n} of {len(rows)} pass ({k} pass as written)"
    if a.json:
        json.dump({"summary": summary, "passed": n, "total": len(rows), "passed_as_written": k,
                   "fake_driver": a.fake_driver, "examples": rows}, sys.stdout, indent=1)
        print()
        return 0
    w = max(len("example"), *(len(r["example"]) for r in rows))
    print(f"{'example':<{w}}  {'original':>8}  {'cuabi':>7}  first error line")
    for r in rows:
        o, c = r["original"], r["cuabi"]
        err = c["error"] or (f"(original) {o['error']}" if o["error"] else "")
        print(f"{r['example']:<{w}}  {str(o['rc']):>8}  {str(c['rc']):>7}  {err}")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
