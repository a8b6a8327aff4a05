"""NCCL collectives without a GPU (issue 23): names, status classes, the
rendezvous stores and the launcher variables here; the Communicator against
the C tests' fake driver and fake NCCL in a process of its own
(fake_nccl_checks.py)."""
import os
import socket
import struct
import subprocess
import sys
import threading

import pytest

import cuabi
from cuabi import _nccl

HERE = os.path.dirname(os.path.abspath(__file__))


def _fixture(name):
    build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
    path = os.path.join(build, "tests", "fixtures", ".libs", name)
    return os.path.abspath(path) if os.path.exists(path) else None


def test_communicator_against_the_fake_nccl():
    driver = os.environ.get("CUABI_TEST_FAKE_CUDA") or _fixture("fake_cuda_graph.so")
    nccl = _fixture("fake_nccl.so")
    if driver is None or nccl is None:
        pytest.skip("the fake driver and fake NCCL are not built (make check builds them)")
    env = dict(os.environ, CUABI_DRIVER_PATH=driver, CUABI_NCCL_PATH=nccl,
               PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, "fake_nccl_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]


def test_names_and_statuses():
    for name in ("Communicator", "get_unique_id", "nccl_version", "nccl_group", "TCPStore",
                 "FileStore"):
        assert hasattr(cuabi, name), name
    assert cuabi.ERRORS[cuabi._capi.CUABI_ERROR_NCCL].__name__ == "NCCLError"
    assert issubclass(cuabi.TimeoutError, TimeoutError)
    assert issubclass(cuabi.TimeoutError, cuabi.CuabiError)
    assert cuabi._capi.CUABI_NCCL_UNIQUE_ID_BYTES == 128


def test_missing_nccl_is_a_clear_error():
    code = ("import cuabi\n"
            "try:\n"
            "    cuabi.get_unique_id()\n"
            "except NotImplementedError as e:\n"
            "    print('refused:', e)\n")
    env = dict(os.environ, CUABI_NCCL_PATH="/nonexistent/libnccl.so.2",
               PYTHONPATH=os.environ.get("CUABI_PYTHON_PATH") or os.path.dirname(HERE))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert "refused:" in r.stdout and "CUABI_NCCL_PATH=/nonexistent" in r.stdout, r.stderr


def test_operand_arguments():
    assert _nccl._op("SUM") == 0 and _nccl._op("avg") == 4
    with pytest.raises(ValueError):
        _nccl._op("mean")
    assert _nccl._dtype("torch.bfloat16") == 9
    assert _nccl._dtype("float32") == 7
    with pytest.raises(ValueError, match="no element type"):
        _nccl._dtype("complex64")


@pytest.mark.parametrize("env, want", [
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}, (3, 8, 1)),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
      "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, (2, 4, 0)),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2, 1)),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1"}, (5, 6, 1)),
])
def test_launcher_variables(monkeypatch, env, want):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
              "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _nccl.env_ranks() == want


def test_launcher_variables_missing_or_wrong(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(RuntimeError, match="RANK and WORLD_SIZE"):
        _nccl.env_ranks()
    monkeypatch.setenv("RANK", "4")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError, match="not a rank"):
        _nccl.env_ranks()
    monkeypatch.setenv("RANK", "1")
    for k in ("MASTER_ADDR", "MASTER_PORT", "CUABI_NCCL_ID_FILE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(RuntimeError, match="MASTER_ADDR"):
        _nccl.store_from_env(1, 4)


def test_tcp_store_between_threads():
    server = cuabi.TCPStore("127.0.0.1", 0, is_server=True, timeout=5)
    client = cuabi.TCPStore("127.0.0.1", server.port, timeout=5)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("v", client.get("k")))
    t.start()                       # waits for the key
    server.set("k", b"\x00" * 128)
    t.join(10)
    assert got["v"] == b"\x00" * 128
    with pytest.raises(ValueError, match="too long"):
        client.set("k", b"x" * (1 << 17))
    client.close()
    server.close()


def test_tcp_store_drops_hostile_clients():
    """A malformed or oversized request closes that connection and nothing
    else: the store still serves a well-formed client."""
    server = cuabi.TCPStore("127.0.0.1", 0, is_server=True, timeout=2)
    for junk in (b"X\x00\x01k", b"S" + struct.pack("!H", 5000), b"S\x00\x01k" +
                 struct.pack("!I", 1 << 30)):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(junk)
        s.settimeout(5)
        assert s.recv(16) == b""        # closed by the server
        s.close()
    client = cuabi.TCPStore("127.0.0.1", server.port, timeout=5)
    client.set("a", b"1")
    assert client.get("a") == b"1"
    client.close()
    server.close()


def test_tcp_store_get_times_out():
    server = cuabi.TCPStore("127.0.0.1", 0, is_server=True, timeout=0.3)
    client = cuabi.TCPStore("127.0.0.1", server.port, timeout=0.3)
    with pytest.raises(TimeoutError):
        client.get("never")
    client.close()
    server.close()


def test_file_store(tmp_path):
    a = cuabi.FileStore(tmp_path / "ids", timeout=0.2)
    with pytest.raises(TimeoutError):
        a.get("cuabi/nccl/unique_id")
    a.set("cuabi/nccl/unique_id", b"u" * 128)
    b = cuabi.FileStore(tmp_path / "ids")
    assert b.get("cuabi/nccl/unique_id") == b"u" * 128
    assert oct((tmp_path / "ids" / "cuabi_nccl_unique_id").stat().st_mode & 0o777) == "0o600"


def test_exchange_id_checks_the_length():
    class Store:
        def get(self, key):
            return b"short"
    with pytest.raises(ValueError, match="5 bytes"):
        _nccl.exchange_id(Store(), 1)

