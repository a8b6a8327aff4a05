import os
import sys

# Run from the source tree without installing, or from the package the
# build tree assembled (tests/bindings/check_python.sh: with the compiled extension).
sys.path.insert(0, os.environ.get("CUABI_PYTHON_PATH")
                or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402


def _has_gpu() -> bool:
    import cuabi
    try:
        return cuabi.device_count() > 0
    except cuabi.CuabiError:
        return False


@pytest.fixture(scope="session")
def gpu():
    """A cuabi.Device, or skip the test on a machine without a GPU."""
    if not _has_gpu():
        pytest.skip("needs a CUDA GPU and driver")
    import cuabi
    return cuabi.Device(0)
