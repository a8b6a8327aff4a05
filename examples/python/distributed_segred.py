#!/usr/bin/env python3
"""The segmented reduction, data-parallel on N workers, the partial sums
all-reduced with NCCL (issue 23 item 3; docs/distributed.md).

    python3 examples/python/distributed_segred.py [--workers N] [--launcher dask|spawn]

The kernel is compiled once, here; the compiled Kernel pickles to each
worker (its bytes and name, never the source: a worker never runs NVRTC)
and finds its name again in the worker's context. Worker r owns rows
r, r + N, r + 2N, ... of a (ROWS, SEGS * SEG_LEN) array, reduces each
segment of its rows on GPU r, adds its rows' sums into SEGS partial sums,
and all-reduces them over NCCL, so every worker ends with the totals;
they are checked against NumPy here. Workers are the processes of a Dask
LocalCluster (one per GPU, one thread each: the ranks of one
communicator run at the same time) or, without Dask, plain spawned
processes. Without a GPU it compiles the kernel, checks that it pickles,
and says the rest is skipped.
"""
import argparse
import os
import pickle

import numpy as np

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi

SRC = r'''
template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out, const int *offsets)
{
    __shared__ T part[BLOCK];
    int s = blockIdx.x, t = threadIdx.x;
    T acc = 0;
    for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK) acc += in[i];
    part[t] = acc;
    __syncthreads();
    for (int w = BLOCK / 2; w > 0; w /= 2) {
        if (t < w) part[t] += part[t + w];
        __syncthreads();
    }
    if (t == 0) out[s] = part[0];
}
'''
NAME = "segred<float, 128>"
ROWS, SEGS, SEG_LEN = 64, 16, 1000


def data():
    """The whole input (every worker makes the rows it owns; small
    integers, so float32 sums are exact)."""
    return (np.arange(ROWS * SEGS * SEG_LEN, dtype=np.int64) % 7).astype(np.float32) \
        .reshape(ROWS, SEGS * SEG_LEN)


def worker(rank, nranks, uid, kernel):
    """One rank: its rows' segment sums on GPU `rank`, all-reduced."""
    import cuabi as c          # noqa: F811  (a worker process imports it afresh)
    dev = c.Device(rank)
    s = dev.create_stream()
    mr = c.MemoryResource.device_default(dev)
    comm = c.Communicator(nranks, rank, uid, device=dev, timeout=120)
    rows = data()[rank::nranks]
    offsets = (np.arange(SEGS + 1) * SEG_LEN).astype(np.int32)
    dx = c.Buffer.from_host(np.ascontiguousarray(rows), mr, stream=s)
    doff = c.Buffer.from_host(offsets, mr, stream=s)
    per_row = c.Buffer(4 * SEGS * len(rows), mr, stream=s)
    cfg = c.LaunchConfig(grid=SEGS, block=128)
    for i in range(len(rows)):
        c.launch(s, cfg, kernel, dx.ptr + 4 * i * SEGS * SEG_LEN, per_row.ptr + 4 * i * SEGS, doff)
    sums = np.frombuffer(per_row.to_bytes(stream=s), np.float32).reshape(len(rows), SEGS)
    s.sync()
    partial = c.Buffer.from_host(sums.sum(axis=0, dtype=np.float32), mr, stream=s)
    total = c.View.of_buffer(partial, "float32", (SEGS,))
    comm.all_reduce(total, stream=s)       # in place: the sum over every worker
    comm.synchronize(s)                    # a dead peer: an error, not a hang
    out = np.frombuffer(partial.to_bytes(stream=s), np.float32).copy()
    s.sync()
    comm.close()
    return rank, out.tolist()


def _spawned(rank, nranks, uid, kernel, q):
    try:
        q.put(worker(rank, nranks, uid, kernel))
    except BaseException as e:            # noqa: BLE001  (reported to the parent)
        q.put((rank, e))


def run_spawn(n, uid, kernel):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")          # never fork a process that has touched CUDA
    q = ctx.Queue()
    ps = [ctx.Process(target=_spawned, args=(r, n, uid, kernel, q)) for r in range(n)]
    for p in ps:
        p.start()
    results = [q.get(timeout=300) for _ in ps]
    for p in ps:
        p.join(60)
    return results


def run_dask(n, uid, kernel):
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(n)
        workers = sorted(client.scheduler_info()["workers"])
        # One task per worker, all at once: the ranks of one communicator.
        futures = [client.submit(worker, r, n, uid, kernel, workers=[w], pure=False,
                                 allow_other_workers=False)
                   for r, w in enumerate(workers)]
        return client.gather(futures)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=0, help="default: one per GPU")
    ap.add_argument("--launcher", choices=("dask", "spawn"), default=None,
                    help="default: dask where it imports, else spawned processes")
    a = ap.parse_args()
    try:
        gpus = cuabi.device_count()
    except cuabi.CuabiError:
        gpus = 0
    if not gpus:
        code = cuabi.Program(SRC).compile(arch="sm_90", name_expressions=[NAME])
        again = pickle.loads(pickle.dumps(code))
        assert again.cache_key == code.cache_key
        print(f"{NAME} compiled and pickles ({len(pickle.dumps(code))} bytes); no GPU, so the "
              "workers and the all-reduce are skipped")
        return 0
    n = min(a.workers or gpus, gpus)
    try:
        cuabi.nccl_version()
    except cuabi.CuabiError as e:
        print(f"{gpus} GPU(s) but no NCCL ({e}); the all-reduce is skipped")
        return 0
    # Workers are fresh processes: they find this cuabi package (and, through
    # CUABI_LIBRARY, which _cuabi_path set, this library) as this one did.
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cuabi.__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (pkg, os.environ.get("PYTHONPATH")) if p)
    launcher = a.launcher
    if launcher is None:
        try:
            import distributed  # noqa: F401
            launcher = "dask"
        except ImportError:
            launcher = "spawn"
    kernel = cuabi.Program(SRC).compile(arch=cuabi.Device(0).arch, name_expressions=[NAME]) \
        .get_kernel(NAME)
    uid = cuabi.get_unique_id()            # rank 0's id, sent with every task
    results = (run_dask if launcher == "dask" else run_spawn)(n, uid, kernel)
    want = data().reshape(ROWS, SEGS, SEG_LEN).sum(axis=(0, 2), dtype=np.float64)
    for rank, got in sorted(results, key=lambda r: r[0]):
        if isinstance(got, BaseException):
            raise SystemExit(f"worker {rank} failed: {got!r}")
        if not np.array_equal(np.asarray(got, np.float64), want):
            raise SystemExit(f"worker {rank}: {got[:4]}... != {want[:4].tolist()}...")
    print(f"{ROWS} rows x {SEGS} segments on {n} workers ({launcher}, one GPU each), "
          f"partial sums all-reduced with NCCL {'.'.join(map(str, cuabi.nccl_version()))}: "
          f"every worker holds the {SEGS} totals (first {want[0]:g}), checked")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
