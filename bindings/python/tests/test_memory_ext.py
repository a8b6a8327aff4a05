"""Virtual memory, managed memory, pool statistics and batched copies from
Python without a GPU: fake_memory_checks.py runs against the C tests' fake
driver in a separate process (as test_ipc_pool.py does)."""
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


def test_memory_against_the_fake_driver():
    fake = _fake_driver()
    if fake is None:
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(fake), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, "fake_memory_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_names_are_cuda_cores():
    import cuabi
    for name in ("VirtualMemoryResource", "VirtualMemoryResourceOptions", "ManagedMemoryResource",
                 "ManagedMemoryResourceOptions", "ManagedBuffer", "copy_batch", "CopyOptions",
                 "MemcpySrcAccessOrder", "MemcpyOverlapMode", "Host"):
        assert name in cuabi.__all__, name
        assert getattr(cuabi, name) is not None
    assert issubclass(cuabi.VirtualMemoryResource, cuabi.MemoryResource)
    assert issubclass(cuabi.ManagedBuffer, cuabi.Buffer)
    assert {m.value for m in cuabi.MemcpySrcAccessOrder} == {"stream", "during_api_call", "any"}
    assert callable(cuabi.VirtualMemoryResource.modify_allocation)
    o = cuabi.CopyOptions()
    assert o.src_access_order == "stream" and o.overlap_mode == "default"
    assert cuabi.MemoryResource.attributes.__doc__
