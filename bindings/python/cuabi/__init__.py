"""cuabi: CUDA through libcuabi's stable C ABI, from Python.

The ctypes layer (cuabi._capi, generated from the API description) is
checked against the loaded library at import; see docs/python.md.
"""
from . import _capi
from . import errors
from .errors import CuabiError, CuabiImportError, ClosedHandleError, ERRORS
from .errors import *  # noqa: F401,F403  (one exception class per status)
from ._lib import LIBRARY_PATH, status_name, status_message
from ._core import (Device, Event, Stream, abi_version, device_count, raw_stream_of,
                    runtime_info, version)

__version__ = version()
