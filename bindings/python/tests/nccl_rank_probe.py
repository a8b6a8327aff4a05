"""One rank of test_gpu_nccl.py's multi-process runs (a fresh process per
rank, started by the test or by mpirun): the rank comes from the launcher's
variables (RANK / WORLD_SIZE / LOCAL_RANK, or mpirun's) through
Communicator.from_env() -- or from_mpi() with --mpi -- and the id through
the rendezvous the environment names. Every collective is checked here;
exit 0 when all hold, 3 on cuabi.TimeoutError (a rank that never arrived),
1 otherwise (the message on stderr)."""
import sys

import numpy as np

import cuabi

TYPES = ("float32", "int32", "float64", "int64", "uint8", "float16")


def val(n, r, dtype):
    return ((np.arange(n) % 13) + 1 + r).astype(dtype)


def main():
    timeout = float(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 120
    try:
        comm = cuabi.Communicator.from_mpi(timeout=timeout) if "--mpi" in sys.argv else \
            cuabi.Communicator.from_env(timeout=timeout)
    except cuabi.TimeoutError as e:
        print(f"timeout: {e}", file=sys.stderr)
        return 3
    r, n = comm.rank, comm.nranks
    dev = comm.device
    s = dev.create_stream()
    mr = cuabi.MemoryResource.device_default(dev)

    def up(a):
        return cuabi.Buffer.from_host(np.ascontiguousarray(a), mr, stream=s)

    def view(b, dtype, count):
        return cuabi.View.of_buffer(b, dtype, (count,))

    def down(b, dtype):
        s.sync()
        return np.frombuffer(b.to_bytes(), dtype)

    def want(cond, what):
        if not cond:
            raise AssertionError(f"rank {r}: {what}")

    everyone = sum(range(n))          # the sum of the ranks
    for dtype in TYPES:
        for count in (1, 1000, (1 << 20) + 3):
            base = sum(val(count, k, np.float64) for k in range(n))
            # all-reduce in place
            b = up(val(count, r, dtype))
            comm.all_reduce(view(b, dtype, count), stream=s)
            want(np.array_equal(down(b, dtype).astype(np.float64), base),
                 f"all_reduce {dtype} x{count}")
            # broadcast from the last rank, out of place
            src, dst = up(val(count, r, dtype)), up(np.zeros(count, dtype))
            comm.broadcast(view(src, dtype, count), view(dst, dtype, count), root=n - 1,
                           stream=s)
            want(np.array_equal(down(dst, dtype), val(count, n - 1, dtype)),
                 f"broadcast {dtype} x{count}")
            # all-gather
            g = up(np.zeros(count * n, dtype))
            comm.all_gather(view(src, dtype, count), view(g, dtype, count * n), stream=s)
            want(np.array_equal(down(g, dtype),
                                np.concatenate([val(count, k, dtype) for k in range(n)])),
                 f"all_gather {dtype} x{count}")
            if count > 1000:
                continue
            # reduce (max) to rank 0
            out = up(np.zeros(count, dtype))
            comm.reduce(view(src, dtype, count), view(out, dtype, count), op="max", root=0,
                        stream=s)
            if r == 0:
                want(np.array_equal(down(out, dtype), val(count, n - 1, dtype)),
                     f"reduce max {dtype} x{count}")
            # reduce-scatter
            full = up(np.tile(val(count, r, dtype), n))
            part = up(np.zeros(count, dtype))
            comm.reduce_scatter(view(full, dtype, count * n), view(part, dtype, count), stream=s)
            want(np.array_equal(down(part, dtype).astype(np.float64), base),
                 f"reduce_scatter {dtype} x{count}")
    # send / receive around the ring, as one group
    count = 4099
    mine, got = up(val(count, r, np.float32)), up(np.zeros(count, np.float32))
    with cuabi.nccl_group():
        comm.send(view(mine, "float32", count), (r + 1) % n, stream=s)
        comm.recv(view(got, "float32", count), (r - 1) % n, stream=s)
    want(np.array_equal(down(got, np.float32), val(count, (r - 1) % n, np.float32)), "send/recv")
    # a Buffer operand with dtype=
    b = up(np.full(257, r + 1, np.int64))
    comm.all_reduce(b, dtype="int64", stream=s)
    want((down(b, np.int64) == sum(k + 1 for k in range(n))).all(), "all_reduce Buffer int64")
    # split: every rank alone (color = rank), then all together again
    alone = comm.split(r)
    want(alone.nranks == 1 and alone.rank == 0, "split by rank")
    alone.close()
    again = comm.split(0, key=n - 1 - r)
    want(again.nranks == n and again.rank == n - 1 - r, "split reversed")
    b = up(np.full(9, again.rank, np.float32))
    again.all_reduce(view(b, "float32", 9), stream=s)
    want((down(b, np.float32) == everyone).all(), "all_reduce on the split")
    again.close()
    comm.synchronize(s)
    want(comm.get_async_error() == 0, "async error")
    comm.finalize()
    comm.close()
    print(f"rank {r} of {n}: every collective checked")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except cuabi.TimeoutError as e:
        print(f"timeout: {e}", file=sys.stderr)
        sys.exit(3)
