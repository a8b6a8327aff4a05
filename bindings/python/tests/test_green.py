"""Green contexts and checkpoints from Python without a GPU: the layer over
the C tests' fake driver, in a process of its own (fake_green_checks.py),
and what needs no driver at all."""
import os
import subprocess
import sys

import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "GreenContext"), reason="no green contexts")


def test_names_are_cuda_cores():
    for name in ("Context", "ContextOptions", "DeviceResources", "SMResource",
                 "SMResourceOptions", "GridWaves"):
        assert name in cuabi.__all__ and name in dir(cuabi), name
    assert "checkpoint" in dir(cuabi)
    from cuabi import checkpoint
    assert cuabi.checkpoint is checkpoint and hasattr(checkpoint, "Process")
    o = cuabi.SMResourceOptions()
    assert (o.count, o.coscheduled_sm_count, o.backfill) == (None, None, False)


def test_checkpoint_arguments_need_no_driver():
    from cuabi import checkpoint
    with pytest.raises(cuabi.InvalidArgumentError):
        checkpoint.Process(-3)
    with pytest.raises(TypeError):
        checkpoint.Process("12")
    assert repr(checkpoint.Process(12)) == "<cuabi.checkpoint.Process 12>"


def test_against_the_fake_driver():
    path = os.environ.get("CUABI_TEST_FAKE_CUDA")
    if not path:
        build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
        path = os.path.join(build, "tests", "fixtures", ".libs", "fake_cuda_graph.so")
    if not os.path.exists(path):
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(path), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(here, "fake_green_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout
