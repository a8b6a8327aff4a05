#!/usr/bin/env python3
"""Count test results over every suite of one or more Automake build trees.

Reads each test's .trs (its Automake result) and .log (its output) and counts
the individual tests inside a suite where the runner reports them:
  Check      "NN%: Checks: N, Failures: F, Errors: E"
  pytest     "N passed, M failed, K skipped ..." (last summary line)
  cargo      "test result: ok. N passed; F failed; I ignored; ..."
  our checks "N passed, F failed[, S skipped]" (plain line)
Anything else counts as one test with its .trs result. A suite that exits 77
(SKIP, e.g. a GPU suite without a GPU) counts as one skipped test.

Prints one line per suite (with --verbose) and ends with the one line
    N passed, N failed, N skipped
Before that line, the last lines of each failed suite's log, so that a
failure seen only on another machine (CI) shows its cause.
Exit status 1 if anything failed or no test ran.
"""
import glob
import os
import re
import sys

CHECK = re.compile(r"^\d+%: Checks: (\d+), Failures: (\d+), Errors: (\d+)", re.M)
CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", re.M)
PYTEST_WORD = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")
FAILED_LOG_LINES = 30
PLAIN = re.compile(r"^(?:\w+: )?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$", re.M)


def trs_result(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(":test-result:"):
                return line.split(":", 2)[2].strip()
    return "ERROR"


def pytest_counts(text):
    # The last line that looks like pytest's summary ("=== ... in 1.2s ===").
    lines = [ln for ln in text.splitlines()
             if re.search(r"\b(passed|failed|skipped|error)", ln) and " in " in ln]
    if not lines:
        return None
    p = f = s = 0
    for n, word in PYTEST_WORD.findall(lines[-1]):
        n = int(n)
        if word in ("passed", "xpassed"):
            p += n
        elif word in ("failed", "error", "errors"):
            f += n
        elif word in ("skipped", "xfailed", "deselected"):
            s += n
    return p, f, s


def count_suite(log_text, result):
    if result == "SKIP":
        return 0, 0, 1
    found = None
    checks = CHECK.findall(log_text)
    cargo = CARGO.findall(log_text)
    plain = PLAIN.findall(log_text)
    if checks:
        n, fl, er = map(int, checks[-1])
        found = (n - fl - er, fl + er, 0)
    elif cargo:
        p = sum(int(a) for a, _, _ in cargo)
        f = sum(int(b) for _, b, _ in cargo)
        s = sum(int(c) for _, _, c in cargo)
        found = (p, f, s)
    elif plain:
        a, b, c = plain[-1]
        found = (int(a), int(b), int(c or 0))
    else:
        found = pytest_counts(log_text)
    if found is None:
        return (1, 0, 0) if result in ("PASS", "XFAIL") else (0, 1, 0)
    p, f, s = found
    if result not in ("PASS", "XFAIL") and f == 0:
        f = 1  # the suite failed (crash, non-zero exit) after its counts
    return p, f, s


def main(argv):
    verbose = "--verbose" in argv
    dirs = [a for a in argv if not a.startswith("--")] or ["."]
    total = [0, 0, 0]
    failed_logs = []
    for d in dirs:
        for trs in sorted(glob.glob(os.path.join(d, "**", "*.trs"), recursive=True)):
            log = trs[:-4] + ".log"
            text = ""
            if os.path.exists(log):
                with open(log, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            result = trs_result(trs)
            c = count_suite(text, result)
            for i in range(3):
                total[i] += c[i]
            if c[1]:
                failed_logs.append((os.path.join(d, os.path.relpath(trs[:-4], d)), text))
            if verbose:
                print(f"{result:5} {os.path.relpath(trs[:-4], d):40} "
                      f"{c[0]} passed, {c[1]} failed, {c[2]} skipped")
    for name, text in failed_logs:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        print(f"--- last lines of {name}.log")
        for ln in lines[-FAILED_LOG_LINES:]:
            print(f"    {ln[:300]}")
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] or total[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
