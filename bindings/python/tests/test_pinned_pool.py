"""cuda.core's PinnedMemoryResource (a pool of page-locked host memory,
issue 24) from Python without a GPU: fake_pinned_pool_checks.py runs
against the C tests' fake driver in a separate process (as
test_ipc_pool.py does)."""
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


def test_pinned_pools_against_the_fake_driver():
    fake = _fake_driver()
    if fake is None:
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(fake), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, "fake_pinned_pool_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_names():
    import cuabi
    assert not issubclass(cuabi.PinnedMemoryResource, cuabi.LegacyPinnedMemoryResource)
    assert issubclass(cuabi.PinnedMemoryResource, cuabi.MemoryResource)
    for name in ("allocate", "deallocate", "allocation_handle", "from_allocation_handle",
                 "register", "from_registry", "device_id", "numa_id", "is_ipc_enabled",
                 "is_device_accessible", "is_host_accessible", "__reduce__"):
        assert hasattr(cuabi.PinnedMemoryResource, name), name
    o = cuabi.PinnedMemoryResourceOptions()
    assert (o.ipc_enabled, o.max_size, o.numa_id) == (False, 0, None)
