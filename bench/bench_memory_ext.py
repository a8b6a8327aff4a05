"""Python VMM and managed-memory calls, cuabi beside cuda.core (issue 25 item 7).

    python3 bench/bench_memory_ext.py [--processes N] [--json FILE]

Each figure is the median over N processes (default 5) of the process's own
median; the card is named first. Rows (microseconds per operation):

  vmm_grow      a VMM buffer of 1 GiB grown in 1 GiB steps to 8 GiB (allocate
                + 7 modify_allocation), freed untimed: cuabi.VirtualMemoryResource
                vs cuda.core.VirtualMemoryResource (its modify_allocation)
  managed_alloc allocate + free 1 MiB of managed memory: cuabi.ManagedBuffer
                vs cuda.core.ManagedMemoryResource().allocate / close
  prefetch      prefetch 64 MiB of managed memory to the device and back
  pool_stat     one pool statistic: cuabi mr.attributes.used_mem_current vs
                cuda.core mr.attributes.used_mem_current

Target: cuabi <= cuda.core on each row. Rows cuda.core lacks print "n/a".
"""
import json
import os
import statistics
import subprocess
import sys
import time

GiB = 1 << 30
MiB = 1 << 20


def timed(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


def cuabi_rows():
    import cuabi
    dev = cuabi.Device(0)
    s = dev.create_stream()
    rows = {}
    vmr = cuabi.VirtualMemoryResource(dev, cuabi.VirtualMemoryResourceOptions(reserve_size=8 * GiB))

    def grow():
        b = cuabi.Buffer(GiB, vmr)
        for g in range(2, 9):
            vmr.modify_allocation(b, g * GiB)
        return b

    def grow_timed():
        t0 = time.perf_counter()
        b = grow()
        dt = (time.perf_counter() - t0) * 1e6
        b.close()
        return dt
    grow_timed()
    rows["vmm_grow"] = statistics.median(grow_timed() for _ in range(3))
    mr = cuabi.ManagedMemoryResource(device=dev)
    rows["managed_alloc"] = timed(lambda: cuabi.ManagedBuffer(MiB, mr).close(), 200)
    big = cuabi.ManagedBuffer(64 * MiB, mr)

    def pf():
        big.prefetch(dev, stream=s)
        big.prefetch(cuabi.Host(), stream=s)
        s.synchronize()
    pf()
    rows["prefetch"] = timed(pf, 10)
    pool = cuabi.MemoryResource.device_default(dev)
    a = pool.attributes
    rows["pool_stat"] = timed(lambda: a.used_mem_current, 20000)
    return rows


def cuda_core_rows():
    try:
        import cuda.core as cc
    except ImportError:
        return {}
    dev = cc.Device(0)
    dev.set_current()
    s = dev.create_stream()
    rows = {}
    if hasattr(cc, "VirtualMemoryResource"):
        vmr = cc.VirtualMemoryResource(dev)

        def grow_timed():
            t0 = time.perf_counter()
            b = vmr.allocate(GiB)
            for g in range(2, 9):
                b = vmr.modify_allocation(b, g * GiB)
            dt = (time.perf_counter() - t0) * 1e6
            b.close()
            return dt
        grow_timed()
        rows["vmm_grow"] = statistics.median(grow_timed() for _ in range(3))
    if hasattr(cc, "ManagedMemoryResource"):
        mr = cc.ManagedMemoryResource()
        rows["managed_alloc"] = timed(lambda: mr.allocate(MiB, stream=s).close(stream=s), 200)
        big = mr.allocate(64 * MiB, stream=s)
        if hasattr(big, "prefetch") and hasattr(cc, "Host"):
            def pf():
                big.prefetch(dev, stream=s)
                big.prefetch(cc.Host(), stream=s)
                s.sync()
            pf()
            rows["prefetch"] = timed(pf, 10)
    pool = cc.DeviceMemoryResource(dev)
    if hasattr(pool, "attributes"):
        a = pool.attributes
        rows["pool_stat"] = timed(lambda: a.used_mem_current, 20000)
    return rows


def card():
    import cuabi
    try:
        return cuabi.Device(0).properties.name
    except Exception:                                  # noqa: BLE001 (a label only)
        return "device 0"


def main():
    if "--once" in sys.argv:
        which = sys.argv[sys.argv.index("--once") + 1]
        print("R " + json.dumps(cuabi_rows() if which == "cuabi" else cuda_core_rows()))
        return
    procs = int(sys.argv[sys.argv.index("--processes") + 1]) if "--processes" in sys.argv else 5
    runs = {"cuabi": [], "cuda.core": []}
    for _ in range(procs):
        for which in ("cuabi", "cuda.core"):
            r = subprocess.run([sys.executable, "-W", "ignore", __file__, "--once",
                                "cuabi" if which == "cuabi" else "cc"],
                               capture_output=True, text=True, env=os.environ)
            line = [x for x in r.stdout.splitlines() if x.startswith("R ")]
            if r.returncode != 0 or not line:
                print(f"{which} process failed: {r.stderr[-800:]}", file=sys.stderr)
                continue
            runs[which].append(json.loads(line[0][2:]))
    print(f"bench_memory_ext on {card()}, median of {procs} processes (us)")
    print(f"{'row':14} {'cuabi':>12} {'cuda.core':>12} {'ratio':>8}")
    table = {}
    for row in ("vmm_grow", "managed_alloc", "prefetch", "pool_stat"):
        med = {}
        for which, rs in runs.items():
            vals = [r[row] for r in rs if row in r]
            med[which] = statistics.median(vals) if vals else None
        ratio = med["cuabi"] / med["cuda.core"] if med["cuabi"] and med["cuda.core"] else None
        table[row] = dict(med, ratio=ratio)
        fmt = lambda v: f"{v:12.2f}" if v is not None else f"{'n/a':>12}"   # noqa: E731
        print(f"{row:14} {fmt(med['cuabi'])} {fmt(med['cuda.core'])} "
              f"{(f'{ratio:8.3f}' if ratio else '     n/a')}")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"card": card(), "processes": procs, "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
