"""All-reduce bus bandwidth, 8 B to 1 GiB, two processes on GPUs 0 and 1
(issue 23 item 5): cuabi.Communicator beside torch.distributed's NCCL
backend and nccl4py (where each imports), all on the same NCCL library:
cuabi is pointed at the libnccl.so.2 torch loaded (CUABI_NCCL_PATH), and
each line names the library and the card. Median of >= 5 timed runs of 20
in-place float32 all-reduces per size; bus bandwidth = 2 (n-1)/n * bytes /
time, as nccl-tests reports it. Target: cuabi >= 0.98x torch at >= 64 MiB.

    python3 bench/bench_nccl.py [--max-bytes N] [--runs 5] [--iters 20] [--json FILE]

Run from the repository root with cuabi importable (PYTHONPATH=bindings/python,
CUABI_LIBRARY=build/.libs/libcuabi.so). The host time per 8-byte call
against raw ncclAllReduce is bench/bench_nccl (C)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def sizes(max_bytes):
    s = 8
    while s <= max_bytes:
        yield s
        s *= 4 if s < (1 << 20) else 2


def busbw(nbytes, seconds, n=2):
    return 2 * (n - 1) / n * nbytes / seconds / 1e9


def torch_nccl_path():
    """The libnccl.so.2 torch loaded (its wheel's), or None."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    with open("/proc/self/maps") as f:
        for line in f:
            if "libnccl.so" in line:
                return line.split()[-1]
    try:
        import nvidia.nccl  # noqa: F401
        d = os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2")
        return d if os.path.exists(d) else None
    except ImportError:
        return None


def time_runs(step, sync, iters, runs):
    step()
    sync()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        out.append((time.perf_counter() - t0) / iters)
    return statistics.median(out)


def rank_main(args):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    results = {}
    lib = args.which
    if lib == "cuabi":
        import cuabi
        import numpy as np  # noqa: F401
        dev = cuabi.Device(rank)
        s = cuabi.Stream(dev)
        comm = cuabi.Communicator.from_env(device=rank)
        buf = cuabi.Buffer(args.max_bytes, cuabi.default_resource(rank), stream=s)
        for n in sizes(args.max_bytes):
            v = buf.view("float32", (max(n // 4, 1),))
            t = time_runs(lambda: comm.all_reduce(v, stream=s), s.synchronize, args.iters,
                          args.runs)
            results[n] = t
        comm.close()
    elif lib == "torch":
        import torch
        import torch.distributed as dist
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=world)
        x = torch.empty(args.max_bytes // 4, dtype=torch.float32, device="cuda")
        for n in sizes(args.max_bytes):
            v = x[:max(n // 4, 1)]
            t = time_runs(lambda: dist.all_reduce(v), torch.cuda.synchronize, args.iters,
                          args.runs)
            results[n] = t
        dist.destroy_process_group()
    elif lib == "nccl4py":
        import cupy  # nccl4py's examples use CuPy arrays and streams
        import nccl.core as nccl
        cupy.cuda.Device(rank).use()
        import cuabi
        store = cuabi.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1,
                               is_server=rank == 0)
        if rank == 0:
            uid = nccl.get_unique_id()
            store.set("id", bytes(uid.as_bytes() if hasattr(uid, "as_bytes") else uid))
        raw = store.get("id")
        comm = nccl.Communicator.init(world, rank, nccl.UniqueId.from_bytes(raw)
                                      if hasattr(nccl, "UniqueId") else raw)
        x = cupy.empty(args.max_bytes // 4, dtype=cupy.float32)
        st = cupy.cuda.Stream()
        for n in sizes(args.max_bytes):
            v = x[:max(n // 4, 1)]
            t = time_runs(lambda: comm.allreduce(v, v, nccl.SUM, stream=st.ptr),
                          st.synchronize, args.iters, args.runs)
            results[n] = t
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f)


def run_two(which, args, env_extra):
    out = f"/tmp/bench_nccl_{which}_{os.getpid()}.json"
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000),
                   **env_extra)
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-main", which,
                                       "--max-bytes", str(args.max_bytes), "--runs",
                                       str(args.runs), "--iters", str(args.iters), "--out", out],
                                      env=env))
    codes = []
    for p in procs:         # a rank that fails while its peer waits must not hang the table
        try:
            codes.append(p.wait(timeout=1800 if which != "nccl4py" else 600))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            codes.append("timeout")
    for p in procs:
        p.wait()
    if any(codes) or not os.path.exists(out):
        print(f"{which}: failed (exit codes {codes}); left out")
        return None
    with open(out) as f:
        res = {int(k): v for k, v in json.load(f).items()}
    os.unlink(out)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--rank-main")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.rank_main:
        args.which = args.rank_main
        return rank_main(args)
    nccl_path = os.environ.get("CUABI_NCCL_PATH") or torch_nccl_path()
    extra = {"CUABI_NCCL_PATH": nccl_path} if nccl_path else {}
    card = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip().splitlines()
    print(f"cards: {card}; NCCL for every library: {nccl_path or 'each its own'}")
    table = {}
    for which in ("cuabi", "torch", "nccl4py"):
        table[which] = run_two(which, args, extra)
    names = [w for w in table if table[w]]
    print(f"{'bytes':>12} " + " ".join(f"{w + ' GB/s':>14}" for w in names) +
          ("   cuabi/torch" if "torch" in names and "cuabi" in names else ""))
    for n in sizes(args.max_bytes):
        row = [busbw(n, table[w][n]) for w in names]
        ratio = (f"   {table['torch'][n] / table['cuabi'][n]:.3f}"
                 if "torch" in names and "cuabi" in names else "")
        print(f"{n:>12} " + " ".join(f"{x:>14.2f}" for x in row) + ratio)
    if "torch" in names and "cuabi" in names:
        big = [table["torch"][n] / table["cuabi"][n] for n in sizes(args.max_bytes)
               if n >= 64 << 20]
        if big:
            print(f"cuabi / torch bus bandwidth at >= 64 MiB: min {min(big):.3f} "
                  f"(target >= 0.98: {'met' if min(big) >= 0.98 else 'NOT met'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({w: {str(k): v for k, v in (table[w] or {}).items()} for w in table}, f,
                      indent=1)


if __name__ == "__main__":
    main()
