"""examples/python/*.py run from any directory (issue 17 item 4): each is
started from a temporary folder with no PYTHONPATH, finding the package
itself; the library comes from CUABI_LIBRARY as the test run sets it."""
import os
import subprocess
import sys

import pytest

import cuabi

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples", "python")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py") and not f.startswith("_")) \
    if os.path.isdir(EXAMPLES) else []


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs_from_elsewhere(script, tmp_path):
    if script == "link_ptx.py" and cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    # The example finds the package itself (_cuabi_path.py): the sources,
    # so the ctypes backend unless the package is installed.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CUABI_BACKEND", "CUABI_PYTHON_PATH")}
    env["CUABI_LIBRARY"] = cuabi.LIBRARY_PATH    # an absolute path, as documented
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
