"""What `pip install ./bindings/python` leaves behind is ignored by git
(issue 17 item 4). Skips outside a git checkout (a dist tarball)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_pip_leftovers_are_ignored():
    if not shutil.which("git") or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    paths = ["bindings/python/build/lib/cuabi/__init__.py",
             "bindings/python/cuabi.egg-info/PKG-INFO",
             "bindings/python/cuabi/cuabi.egg-info/SOURCES.txt"]
    r = subprocess.run(["git", "-C", ROOT, "check-ignore", "--no-index", *paths],
                       capture_output=True, text=True)
    ignored = set(r.stdout.split())
    assert ignored == set(paths), f"not ignored: {set(paths) - ignored}"
