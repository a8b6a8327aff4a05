"""scripts/run-cuda-core-examples.py (issue 24 item 2): only the imports
change, each run has a timeout, the table and the summary line are right.
No GPU needed (the examples here use numpy only)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "run-cuda-core-examples.py")

pytestmark = pytest.mark.skipif(not os.path.exists(SCRIPT),
                                reason="scripts/ is not next to the package")


def _module():
    spec = importlib.util.spec_from_file_location("run_examples", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_only_the_imports_change():
    m = _module()
    src = ("from cuda.core import Device, launch\n"
           "from cuda.core.experimental import Program\n"
           "from cuda.core.utils import (\n    StridedMemoryView,\n)\n"
           "import cuda.core.experimental as cc\n"
           "  from cuda.core import system  # indented\n"
           "from cuda.pathfinder import get_cuda_path_or_home\n"
           "x = 'from cuda.core import Device'\n")
    out = m.to_cuabi(src)
    assert out.splitlines() == [
        "from cuabi import Device, launch",
        "from cuabi import Program",
        "from cuabi.utils import (", "    StridedMemoryView,", ")",
        "import cuabi as cc",
        "  from cuabi import system  # indented",
        "from cuda.pathfinder import get_cuda_path_or_home",
        "x = 'from cuda.core import Device'"]
    bare = m.to_cuabi("import cuda.core\nprint(cuda.core.Device)\n")
    assert bare.startswith("import cuabi; import types as _t; cuda = _t.SimpleNamespace(core=cuabi)")
    assert m.first_error("Traceback (most recent call last):\n  File x\n"
                         "ValueError: bad thing\n") == "ValueError: bad thing"


def test_runs_both_and_summarises(tmp_path):
    ex = tmp_path / "examples"
    ex.mkdir()
    (ex / "ok_view.py").write_text(
        "import numpy as np\n"
        "from cuda.core.utils import StridedMemoryView\n"
        "a = np.arange(6, dtype=np.int32)\n"
        "v = StridedMemoryView(a, -1)\n"
        "assert v.dtype == np.int32 and v.shape == (6,) and not v.is_device_accessible\n")
    (ex / "fails.py").write_text("from cuda.core import NoSuchName\n")
    (ex / "hangs.py").write_text("import time\nfrom cuda.core import Device\ntime.sleep(60)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
        importlib.import_module("cuabi").__file__)))
    r = subprocess.run([sys.executable, SCRIPT, str(ex), "--timeout", "3", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    rows = {x["example"]: x for x in d["examples"]}
    assert rows["ok_view"]["cuabi"]["rc"] == 0
    assert rows["fails"]["cuabi"]["rc"] == 1
    assert "ImportError" in rows["fails"]["cuabi"]["error"]
    assert rows["hangs"]["cuabi"]["rc"] == "timeout"
    assert d["total"] == 3 and d["passed"] == 1
    assert d["summary"] == (f"cuda.core examples on cuabi: 1 of 3 pass "
                            f"({d['passed_as_written']} pass as written)")
    t = subprocess.run([sys.executable, SCRIPT, str(ex), "--timeout", "5", "--only", "ok_view",
                        "--skip-original"], capture_output=True, text=True, env=env, timeout=120)
    assert t.returncode == 0
    lines = t.stdout.splitlines()
    assert lines[0].split()[:3] == ["example", "original", "cuabi"]
    assert lines[1].split()[:3] == ["ok_view", "-", "0"]
    assert lines[-1] == "cuda.core examples on cuabi: 1 of 1 pass (0 pass as written)"
