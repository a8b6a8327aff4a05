"""NCCL collectives from Python on a host of two GPUs (issue 23 item 4;
skipped with fewer than two GPUs or without NCCL):
  - one process, Communicator.init_all over GPUs 0 and 1: every collective
    in a group, values checked for six dtypes and three sizes, over Views,
    Buffers with dtype= and torch tensors on torch streams (when torch
    imports); refusals with the real NCCL; a graph-captured all-reduce
    replayed three times;
  - two spawned processes (nccl_rank_probe.py, every collective and a
    split checked in each), the id through each rendezvous: a TCPStore
    (MASTER_ADDR/MASTER_PORT as torchrun sets them), a FileStore
    (CUABI_NCCL_ID_FILE), mpirun + from_mpi (where mpirun and mpi4py are),
    and once forced onto NCCL's socket transport over loopback;
  - a rank that never arrives: cuabi.TimeoutError, not a hang;
  - examples/python/distributed_segred.py on two workers (spawned, and Dask
    where it imports)."""
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

import cuabi

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "nccl_rank_probe.py")
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "python", "distributed_segred.py")
TYPES = ("float32", "int32", "float64", "int64", "uint8", "float16")
SIZES = (1, 1000, (1 << 20) + 3)


@pytest.fixture(scope="module")
def two(gpu):
    if cuabi.device_count() < 2:
        pytest.skip("needs two GPUs")
    try:
        cuabi.nccl_version()
    except cuabi.CuabiError as e:
        pytest.skip(f"NCCL not found: {e}")
    devs = [cuabi.Device(0), cuabi.Device(1)]
    return devs, [d.create_stream() for d in devs], \
        [cuabi.MemoryResource.device_default(d) for d in devs]


@pytest.fixture(scope="module")
def comms(two):
    cs = cuabi.Communicator.init_all([0, 1], timeout=120)
    yield cs
    for c in cs:
        c.close()


def val(n, r, dtype):
    return ((np.arange(n) % 13) + 1 + r).astype(dtype)


def up(two, r, a):
    _d, s, mr = two
    return cuabi.Buffer.from_host(np.ascontiguousarray(a), mr[r], stream=s[r])


def down(two, r, b, dtype):
    two[1][r].sync()
    return np.frombuffer(b.to_bytes(), dtype)


def vw(b, dtype, n):
    return cuabi.View.of_buffer(b, dtype, (n,))


def test_init_all(comms, two):
    assert [c.rank for c in comms] == [0, 1]
    assert all(c.nranks == 2 for c in comms)
    assert [c.device.ordinal for c in comms] == [0, 1]
    assert all(c.get_async_error() == 0 for c in comms)
    assert cuabi.nccl_version() >= (2, 19, 0)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", SIZES)
def test_every_collective(comms, two, dtype, n):
    s = two[1]
    base = val(n, 0, np.float64) + val(n, 1, np.float64)
    # all-reduce in place (sum) and out of place (max)
    b = [up(two, r, val(n, r, dtype)) for r in range(2)]
    o = [up(two, r, np.zeros(n, dtype)) for r in range(2)]
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].all_reduce(vw(b[r], dtype, n), stream=s[r])
    for r in range(2):
        assert np.array_equal(down(two, r, b[r], dtype).astype(np.float64), base)
    src = [up(two, r, val(n, r, dtype)) for r in range(2)]
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].all_reduce(vw(src[r], dtype, n), vw(o[r], dtype, n), op="max", stream=s[r])
    for r in range(2):
        assert np.array_equal(down(two, r, o[r], dtype), val(n, 1, dtype))
    # broadcast from rank 1
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].broadcast(vw(src[r], dtype, n), vw(o[r], dtype, n), root=1, stream=s[r])
    for r in range(2):
        assert np.array_equal(down(two, r, o[r], dtype), val(n, 1, dtype))
    # reduce (sum) to rank 0
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].reduce(vw(src[r], dtype, n), vw(o[r], dtype, n), root=0, stream=s[r])
    assert np.array_equal(down(two, 0, o[0], dtype).astype(np.float64), base)
    # all-gather
    g = [up(two, r, np.zeros(2 * n, dtype)) for r in range(2)]
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].all_gather(vw(src[r], dtype, n), vw(g[r], dtype, 2 * n), stream=s[r])
    for r in range(2):
        assert np.array_equal(down(two, r, g[r], dtype),
                              np.concatenate([val(n, 0, dtype), val(n, 1, dtype)]))
    # reduce-scatter: block r of the sum
    full = [up(two, r, np.concatenate([val(n, r, dtype), val(n, r + 2, dtype)]))
            for r in range(2)]
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].reduce_scatter(vw(full[r], dtype, 2 * n), vw(o[r], dtype, n), stream=s[r])
    assert np.array_equal(down(two, 0, o[0], dtype).astype(np.float64), base)
    assert np.array_equal(down(two, 1, o[1], dtype).astype(np.float64),
                          val(n, 2, np.float64) + val(n, 3, np.float64))
    # send / receive both ways
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].send(vw(src[r], dtype, n), 1 - r, stream=s[r])
            comms[r].recv(vw(o[r], dtype, n), 1 - r, stream=s[r])
    for r in range(2):
        assert np.array_equal(down(two, r, o[r], dtype), val(n, 1 - r, dtype))


def test_buffers_with_dtype_and_offsets(comms, two):
    s = two[1]
    n = 1000
    b = [up(two, r, np.concatenate([np.full(4, -1, np.float32), val(n, r, np.float32)]))
         for r in range(2)]
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].all_reduce(b[r], dtype="float32", offset=16, count=n, stream=s[r])
    for r in range(2):
        got = down(two, r, b[r], np.float32)
        assert (got[:4] == -1).all()             # before the offset: untouched
        assert np.array_equal(got[4:], val(n, 0, np.float32) + val(n, 1, np.float32))


def test_refusals_with_the_real_nccl(comms, two):
    b = up(two, 0, np.zeros(64, np.float32))
    strided = cuabi.View.of_buffer(b, "float32", (32,), (2,))
    with pytest.raises(cuabi.InvalidArgumentError, match="not contiguous"):
        comms[0].all_reduce(strided, stream=two[1][0])
    other = up(two, 0, np.zeros(32, np.float32))
    with pytest.raises(cuabi.CuabiError):
        comms[0].all_reduce(vw(b, "float32", 64), vw(other, "float32", 32), stream=two[1][0])
    on_gpu1 = up(two, 1, np.zeros(64, np.float32))
    with pytest.raises(cuabi.CuabiError):       # memory of the other device
        comms[0].all_reduce(vw(on_gpu1, "float32", 64), stream=two[1][0])
    assert all(c.get_async_error() == 0 for c in comms)


def test_captured_all_reduce(comms, two):
    s = two[1]
    n = 4096
    b = [up(two, r, val(n, r, np.float32)) for r in range(2)]
    for r in range(2):
        s[r].sync()
    with s[0].capture("relaxed") as g0, s[1].capture("relaxed") as g1:
        with cuabi.nccl_group():
            for r in range(2):
                comms[r].all_reduce(vw(b[r], "float32", n), stream=s[r])
    graphs = [g0, g1]
    exes = [g.instantiate() for g in graphs]
    base = val(n, 0, np.float32) + val(n, 1, np.float32)
    for k in range(1, 4):
        for r in range(2):
            exes[r].launch(s[r])
        for r in range(2):
            assert np.array_equal(down(two, r, b[r], np.float32), base * (1 << (k - 1)))


def test_torch_tensors_and_streams(comms, two):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("torch sees fewer than two GPUs")
    ts = [torch.arange(10000, device=f"cuda:{r}", dtype=torch.float32) + r for r in range(2)]
    streams = [torch.cuda.Stream(device=r) for r in range(2)]
    for r in range(2):
        streams[r].wait_stream(torch.cuda.current_stream(r))
    with cuabi.nccl_group():
        for r in range(2):
            comms[r].all_reduce(ts[r], stream=streams[r])
    for r in range(2):
        streams[r].synchronize()
        want = 2 * torch.arange(10000, dtype=torch.float32) + 1
        assert torch.equal(ts[r].cpu(), want)


def test_cuda_array_interface_carries_the_stream(two):
    s = two[1][0]
    b = cuabi.Buffer(256, two[2][0], stream=s)
    cai = b.__cuda_array_interface__
    assert cai["version"] == 3 and cai["data"][0] == b.ptr and cai["stream"] == s.raw
    assert cai["shape"] == (256,) and cai["typestr"] == "|u1"


# ------------------------------------------------------------ processes

def _port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def _env(**extra):
    env = dict(os.environ)
    pkg = os.environ.get("CUABI_PYTHON_PATH") or os.path.dirname(HERE)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg, env.get("PYTHONPATH")) if p)
    env["CUABI_LIBRARY"] = cuabi.LIBRARY_PATH
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _ranks(nranks, started=None, timeout=300, args=(), **extra):
    """Start ranks `started` (default all) of `nranks` as fresh processes;
    return [(returncode, output)]."""
    procs = []
    for r in (range(nranks) if started is None else started):
        env = _env(RANK=r, WORLD_SIZE=nranks, LOCAL_RANK=r, **extra)
        procs.append(subprocess.Popen([sys.executable, PROBE, *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out = []
    for p in procs:
        try:
            o, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, _ = p.communicate()
            o += "\n(killed: did not finish)"
        out.append((p.returncode, o))
    return out


def _all_ok(results):
    for rc, o in results:
        assert rc == 0, o[-4000:]
        assert "every collective checked" in o


def test_two_processes_tcp_store(two):
    _all_ok(_ranks(2, MASTER_ADDR="127.0.0.1", MASTER_PORT=_port() - 1))


def test_two_processes_file_store(two, tmp_path):
    env = {k: "" for k in ("MASTER_ADDR", "MASTER_PORT")}
    _all_ok(_ranks(2, CUABI_NCCL_ID_FILE=tmp_path, **env))


def test_two_processes_socket_transport_over_loopback(two):
    _all_ok(_ranks(2, MASTER_ADDR="127.0.0.1", MASTER_PORT=_port() - 1, NCCL_P2P_DISABLE=1,
                   NCCL_SHM_DISABLE=1, NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE=1,
                   NCCL_NET="Socket"))


def test_two_processes_under_mpirun(two):
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        pytest.skip("no mpirun")
    r = subprocess.run([sys.executable, "-c", "import mpi4py.MPI"], capture_output=True)
    if r.returncode:
        pytest.skip("mpi4py does not import")
    env = _env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    args = [mpirun, "-n", "2"]
    if "Open MPI" in subprocess.run([mpirun, "--version"], capture_output=True,
                                    text=True).stdout:
        args += ["--oversubscribe", "-x", "PYTHONPATH", "-x", "CUABI_LIBRARY"]
    r = subprocess.run(args + [sys.executable, PROBE, "--mpi"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert r.stdout.count("every collective checked") == 2, r.stdout


def test_a_rank_that_never_arrives_times_out(two, tmp_path):
    # Rank 0 alone of 2 (the id through a FileStore only rank 0 writes).
    env = {k: "" for k in ("MASTER_ADDR", "MASTER_PORT")}
    [(rc, out)] = _ranks(2, started=[0], timeout=120, args=("--timeout", "5"),
                         CUABI_NCCL_ID_FILE=tmp_path, **env)
    assert rc == 3, out[-3000:]
    assert "timeout" in out


@pytest.mark.parametrize("launcher", ["spawn", "dask"])
def test_distributed_example(two, launcher):
    if launcher == "dask":
        r = subprocess.run([sys.executable, "-c", "import distributed"], capture_output=True)
        if r.returncode:
            pytest.skip("dask.distributed does not import")
    r = subprocess.run([sys.executable, EXAMPLE, "--workers", "2", "--launcher", launcher],
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "on 2 workers" in r.stdout and "checked" in r.stdout, r.stdout
