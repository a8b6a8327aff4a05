"""The compiled launch (cuabi._fast) against the Python one, good and bad
arguments alike, without a GPU: a subprocess whose CUDA driver is the
do-nothing bench/.libs/fake_libcuda.so (tests/bindings/check_python.sh exports its
path as CUABI_FAKE_DRIVER) runs fast_launch_probe.py. Each case must pack
the same bytes, or raise the same exception with the same message."""
import json
import os
import subprocess
import sys

import pytest

from cuabi import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.environ.get("CUABI_FAKE_DRIVER", "")


@pytest.fixture(scope="module")
def cases():
    if _lib.fast is None:
        pytest.skip("cuabi._fast not in use")
    if not os.path.exists(DRIVER):
        pytest.skip("no fake driver (CUABI_FAKE_DRIVER: bench/.libs/fake_libcuda.so)")
    env = dict(os.environ, CUABI_DRIVER_PATH=DRIVER,
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(_lib.__file__)), HERE]))
    r = subprocess.run([sys.executable, os.path.join(HERE, "fast_launch_probe.py")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_every_case_does_the_same_through_both(cases):
    for name, compiled, python in cases:
        assert compiled == python, name


def test_good_cases_pack_and_bad_ones_raise(cases):
    by_name = {c[0]: c[1] for c in cases}
    for name in ("buffer, numpy int32, numpy float32", "view, negative int, numpy float32",
                 "lazy view", "torch-like data_ptr()", "host buffer", "first launch of a kernel"):
        assert by_name[name][0] == "ok", (name, by_name[name])
    for name in ("too few", "too many", "string", "object", "raising __index__", "too large",
                 "array for a 4-byte slot", "closed buffer", "complex",
                 "closed stream", "config None", "kernel None", "closed kernel",
                 "kernel closed before its first launch", "a zero grid (refused by the library)",
                 "closed prepared launch", "keyword arguments"):
        assert by_name[name][0] == "error", (name, by_name[name])
    assert by_name["closed kernel"][1] == "ClosedHandleError"
    assert "takes 3 arguments" in by_name["too few"][2] and "2 given" in by_name["too few"][2]
    assert by_name["a zero grid (refused by the library)"][1] == "LaunchConfigError"
    assert by_name["closed prepared raw_launch"] == ["ok", 2]
