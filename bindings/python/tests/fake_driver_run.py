"""Run one of the fake_*_checks.py files against the C tests' fake driver
(tests/fixtures/.libs/fake_cuda_graph.so) in a process of its own: the
layers above the library, tested without a GPU. Skips where the fake is
not built (make check builds it)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def fake_driver():
    """The fake libcuda's path (CUABI_TEST_FAKE_CUDA, or the build tree's), or None."""
    path = os.environ.get("CUABI_TEST_FAKE_CUDA")
    if not path:
        build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
        path = os.path.join(build, "tests", "fixtures", ".libs", "fake_cuda_graph.so")
    return path if os.path.exists(path) else None


def run_checks(checks: str, unset=(), timeout: float = 300) -> None:
    """pytest `checks` (a file next to this one) with CUABI_DRIVER_PATH naming the
    fake and the variables `unset` removed; fails with the end of its output."""
    fake = fake_driver()
    if fake is None:
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(fake), PYTHONDONTWRITEBYTECODE="1")
    for name in unset:
        env.pop(name, None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, checks)],
                       env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
