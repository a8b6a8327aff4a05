"""Device.set_current keeps the device, and so its primary context, alive
while it is the thread's current one: `cuabi.Device(0).set_current()` with
no reference kept used to release the context at once, so the next call
(an IPC import in the 2026-11-26 benchmark: ~4 ms a buffer instead of
~40 us) made it again. Checked without a GPU, in a subprocess whose driver
is the do-nothing bench/.libs/fake_libcuda.so: the library hands back the
same device handle while that device object lives, a new one once it died."""
import os
import subprocess
import sys

import pytest

from cuabi import _lib

DRIVER = os.environ.get("CUABI_FAKE_DRIVER", "")

PROBE = r"""
import gc, threading
import cuabi
d = cuabi.Device(0)
before = d._h
del d
gc.collect()
assert cuabi.Device(0)._h != before, "a dropped device should be released"
d = cuabi.Device(0)
d.set_current()
kept = d._h
del d
gc.collect()
assert cuabi.Device(0)._h == kept, "the current device was released"
# another thread's current device is its own
def other():
    cuabi.Device(0).set_current()
t = threading.Thread(target=other)
t.start(); t.join()
assert cuabi.Device(0)._h == kept
print("ok")
"""


def test_set_current_keeps_the_device():
    if not os.path.exists(DRIVER):
        pytest.skip("no fake driver (CUABI_FAKE_DRIVER: bench/.libs/fake_libcuda.so)")
    env = dict(os.environ, CUABI_DRIVER_PATH=DRIVER,
               PYTHONPATH=os.path.dirname(os.path.dirname(_lib.__file__)))
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
