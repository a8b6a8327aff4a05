#!/usr/bin/env python3
"""`import cuabi` as a process-level cost: the median over N interleaved
pairs of `python3 -c pass` and `python3 -c "import cuabi"` (target: <= 40 ms
on a machine like CI's), and with --detail the modules' own times from
`-X importtime`.

    CUABI_LIBRARY=build/.libs/libcuabi.so PYTHONPATH=build/bindings/python \\
        python3 bench/bench_import.py [--runs 21] [--detail] [--json FILE]

Bytecode is compiled once into a private cache first (PYTHONPYCACHEPREFIX),
as an installed package has it: what is measured is loading, not compiling
the sources (PYTHONDONTWRITEBYTECODE, if set, is ignored for that cache).
Runs both backends unless CUABI_BACKEND is set.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(code, env):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"bench_import: {code!r} failed:\n{r.stderr}")
    return dt * 1e3


def measure(env, runs):
    run("import cuabi", env)                 # compile the bytecode once
    base, imp = [], []
    for _ in range(runs):
        base.append(run("pass", env))
        imp.append(run("import cuabi", env))
    diffs = [i - b for i, b in zip(imp, base)]
    return {"python_ms": statistics.median(base), "import_ms": statistics.median(imp),
            "difference_ms": statistics.median(diffs), "runs": runs}


def detail(env, top=12):
    """The slowest modules (own time, microseconds) of one import."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cuabi"], env=env,
                       capture_output=True, text=True)
    rows = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = (x.strip() for x in line[len("import time:"):].split("|"))
        rows.append((int(self_us), int(cum_us), name))
    return sorted(rows, reverse=True)[:top]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--detail", action="store_true", help="also the slowest modules")
    ap.add_argument("--json", help="write the results here")
    opts = ap.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="cuabi-pyc-")
    env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    backends = [os.environ["CUABI_BACKEND"]] if os.environ.get("CUABI_BACKEND") else \
        ["compiled", "ctypes"]
    out = {}
    for b in backends:
        e = dict(env, CUABI_BACKEND=b)
        try:
            run("import cuabi", e)
        except SystemExit as err:
            print(f"{b:9s} n/a ({str(err).splitlines()[-1][:80]})")
            continue
        res = out[b] = measure(e, opts.runs)
        print(f"{b:9s} import cuabi {res['difference_ms']:6.1f} ms over python -c pass "
              f"(median of {opts.runs} pairs; python {res['python_ms']:.1f} ms)")
        if opts.detail:
            res["modules"] = detail(e)
            for self_us, cum_us, name in res["modules"]:
                print(f"    {self_us / 1e3:6.1f} ms self {cum_us / 1e3:6.1f} ms total  {name}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
