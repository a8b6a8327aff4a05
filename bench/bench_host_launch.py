#!/usr/bin/env python3
"""host_launch from Python (issue 24): what one call costs the host, and
how long until the callable runs, on an ordinary stream -- cuabi's
host_launch (one cuabi_stream_launch_host_func: cuLaunchHostFunc) beside the
one-node graph it replaced (Graph.add_host, instantiate, launch, release)
and cuda.core's host_launch where cuda.core is installed -- and inside a
capture (100 host_launch calls on a GraphBuilder, then each replay of the
graph per host node).

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python \\
        python3 bench/bench_host_launch.py [--calls 2000] [--rounds 7]

Printed: per call, the best round's host time (us) of `--calls` calls
queued then waited for; the median latency (us) from the call on an idle
stream to the callable running; a captured graph's replay time per host
node. Target: host_launch per call <= the one-node graph's and <=
cuda.core's. Runs on the fake driver too (CUABI_DRIVER_PATH=
tests/fixtures/.libs/fake_cuda_graph.so): the host side only."""
import argparse
import statistics
import threading
import time

import cuabi


def best_round(rounds, calls, one, wait):
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            one()
        wait()
        best = min(best, (time.perf_counter() - t) / calls)
    return best * 1e6


def latency(launch, wait, n=200):
    got = []
    for _ in range(n):
        ev = threading.Event()
        t = time.perf_counter()
        launch(lambda: (got.append(time.perf_counter() - t), ev.set()))
        ev.wait(10)
        wait()
    return statistics.median(got) * 1e6


def one_node_graph(dev, s):
    """The former host_launch: a graph of one host node, made, run, released."""
    def run(fn):
        g = cuabi.Graph(dev)
        g.add_host(fn)
        e = g.instantiate()
        e.launch(s)
        return g, e
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    dev = cuabi.Device(0)
    dev.set_current()
    s = dev.create_stream()
    noop = lambda: None      # noqa: E731
    rows = []
    us = best_round(a.rounds, a.calls, lambda: cuabi.host_launch(s, noop), s.sync)
    lat = latency(lambda f: cuabi.host_launch(s, f), s.sync)
    rows.append(("cuabi host_launch", us, lat))
    made = []
    old = one_node_graph(dev, s)

    def old_wait():
        s.sync()
        for g, e in made:
            e.close()
            g.close()
        made.clear()
    us_old = best_round(a.rounds, a.calls // 4 or 1, lambda: made.append(old(noop)), old_wait)
    lat_old = latency(lambda f: made.append(old(f)), old_wait)
    rows.append(("one-node graph (before)", us_old, lat_old))
    try:
        from cuda.core import Device as CDevice, host_launch as c_host_launch
        cd = CDevice(0)
        cd.set_current()
        cs = cd.create_stream()
        us_c = best_round(a.rounds, a.calls, lambda: c_host_launch(cs, noop), cs.sync)
        lat_c = latency(lambda f: c_host_launch(cs, f), cs.sync)
        rows.append(("cuda.core host_launch", us_c, lat_c))
    except Exception as exc:      # not installed, or too old for host_launch
        rows.append((f"cuda.core: {type(exc).__name__}", float("nan"), float("nan")))
    print(f"{'ordinary stream':28} {'us/call':>9} {'latency us':>11}")
    for name, u, l in rows:
        print(f"{name:28} {u:9.2f} {l:11.1f}")
    # captured: 100 host nodes, replayed
    count = [0]

    def bump():
        count[0] += 1
    gb = dev.create_graph_builder().begin_building()
    for _ in range(100):
        cuabi.host_launch(gb, bump)
    gb.end_building()
    e = gb.complete()
    replays = 20
    best = float("inf")
    for _ in range(a.rounds):
        t = time.perf_counter()
        for _ in range(replays):
            e.launch(s)
        s.sync()
        best = min(best, (time.perf_counter() - t) / (replays * 100))
    assert count[0] == 100 * replays * a.rounds, count[0]
    e.close()
    gb.close()
    print(f"{'captured: replay per node':28} {best * 1e6:9.2f}")
    print(f"host_launch / one-node graph: {rows[0][1] / rows[1][1]:.3f} (target <= 1)")
    if len(rows) > 2 and rows[2][1] == rows[2][1]:
        print(f"host_launch / cuda.core: {rows[0][1] / rows[2][1]:.3f} (target <= 1)")


if __name__ == "__main__":
    main()
