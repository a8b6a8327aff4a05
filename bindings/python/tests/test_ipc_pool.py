"""Pool IPC from Python without a GPU: fake_ipc_pool_checks.py runs against
the C tests' fake driver in a separate process (as test_graph.py does)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _fake_driver():
    path = os.environ.get("CUABI_TEST_FAKE_CUDA")
    if not path:
        build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
        path = os.path.join(build, "tests", "fixtures", ".libs", "fake_cuda_graph.so")
    return path if os.path.exists(path) else None


def test_pool_ipc_against_the_fake_driver():
    fake = _fake_driver()
    if fake is None:
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(fake), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, "fake_ipc_pool_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hostile_pickles_servers_and_clients():
    """IPC descriptors and fds as untrusted input (fake_ipc_hostile_checks.py)."""
    fake = _fake_driver()
    if fake is None:
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(fake), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, "fake_ipc_hostile_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_names():
    import cuabi
    assert callable(cuabi.MemoryResource.ipc_pool)
    assert callable(cuabi.MemoryResource.from_allocation_handle)
    assert callable(cuabi.MemoryResource.get_allocation_handle)
    assert callable(cuabi.Buffer.from_ipc_descriptor)
    h = cuabi.IPCAllocationHandle(os.dup(0), b"x" * 136)
    assert not h.closed
    fd = h.detach()
    assert h.closed
    os.close(fd)
