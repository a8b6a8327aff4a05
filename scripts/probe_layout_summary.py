#!/usr/bin/env python3
"""Summary of scripts/probe_layout_mode.sh's JSON lines: per process, the
medians of capture and instantiate 1..5 (µs, cycles/instruction, instructions)
and the CPU loop's, then the processes sorted by instantiate time, to see the
two modes and whether they differ in work (instructions) or in speed (CPI).
    scripts/probe_layout_summary.py FILE"""
import json
import statistics
import sys


def med(p, prefix, key):
    vals = [p[f"{prefix}{r}"].get(key) for r in range(1, 6) if f"{prefix}{r}" in p]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else float("nan")


rows = []
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except json.JSONDecodeError:
        print("unreadable:", line.strip()[:200])
        continue
    p = d["p"]
    if "error" in p:
        print("error:", p["error"])
        continue
    inst = {k: med(p, "instantiate", k) for k in ("us", "cycles", "instructions", "itlb_miss",
                                                   "dtlb_miss", "l1i_miss")}
    cap = {k: med(p, "capture", k) for k in ("us", "cycles", "instructions")}
    rows.append((inst["us"], d.get("kind", d["aslr"]), p, inst, cap))
print("kind inst_us inst_cpi inst_Minstr itlb dtlb l1i | cap_us cap_cpi | inst0_us | launch10k_us "
      "| cpu_us libc_us chase256k 1m 16m 64m 64m_huge | mmap libcuda brk stack")
rows_in_order = list(rows)
for us, aslr, p, inst, cap in sorted(rows, key=lambda r: r[0]):
    ic = inst["cycles"] / inst["instructions"] if inst["instructions"] == inst["instructions"] and inst["instructions"] else float("nan")
    cc = cap["cycles"] / cap["instructions"] if cap["instructions"] == cap["instructions"] and cap["instructions"] else float("nan")
    L = p["layout"]
    print(f"{aslr} {us:8.1f} {ic:5.2f} {inst['instructions'] / 1e6:6.3f} {inst['itlb_miss']:7.0f} "
          f"{inst['dtlb_miss']:7.0f} {inst['l1i_miss']:8.0f} | {cap['us']:7.1f} {cc:5.2f} | "
          f"{p['instantiate0']['us']:7.1f} | {p['launch_x10000']['us']:8.0f} | "
          f"{p['cpu_loop']['us']:7.0f} {p['libc_loop']['us']:6.0f} "
          f"{p.get('chase_256k', {}).get('us', 0):6.0f} {p.get('chase_64m', {}).get('us', 0):6.0f} "
          f"{p.get('chase_64m_huge', {}).get('us', 0):6.0f} | "
          f"{L['mmap']:#x} {L['libcuda']:#x} {L['brk']:#x} {L['stack']:#x}")
# Per kind: how many processes ran slow (instantiate again over 1.3x the
# fastest tenth's), and the medians.
fast_ref = sorted(r[0] for r in rows)[max(0, len(rows) // 10 - 1)] if rows else 0
print(f"slow: instantiate again > {1.3 * fast_ref:.1f} us")
for kind in sorted({r[1] for r in rows}, key=str):
    mine = [r for r in rows if r[1] == kind]
    slow = sum(r[0] > 1.3 * fast_ref for r in mine)
    print(f"{kind}: {slow} of {len(mine)} slow; instantiate again median "
          f"{statistics.median(r[0] for r in mine):.1f} us, capture again "
          f"{statistics.median(r[4]['us'] for r in mine):.1f} us")
# The processes in the order they ran: S slow, f fast (the modes come in
# stretches of time when they are the machine's state rather than the layout's).
print("in order:", "".join("S" if r[0] > 1.3 * fast_ref else "f" for r in rows_in_order))
