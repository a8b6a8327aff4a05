"""Pool IPC from Python without a GPU: fake_ipc_pool_checks.py runs against
the C tests' fake driver in a separate process (as test_graph.py does)."""
import os

from fake_driver_run import run_checks


def test_pool_ipc_against_the_fake_driver():
    run_checks("fake_ipc_pool_checks.py")


def test_hostile_pickles_servers_and_clients():
    """IPC descriptors and fds as untrusted input (fake_ipc_hostile_checks.py)."""
    run_checks("fake_ipc_hostile_checks.py")


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
