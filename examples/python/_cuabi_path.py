"""Lets the examples run from any directory in a source checkout: when the
cuabi package is not installed, use the one in bindings/python, and when
CUABI_LIBRARY is not set, the library built in build/ (the README's build
folder). Installed (pip install ./bindings/python, make install), nothing
here is needed."""
import importlib.util
import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("cuabi") is None:
    sys.path.insert(0, os.path.join(_root, "bindings", "python"))
_built = os.path.join(_root, "build", ".libs", "libcuabi.so")
if "CUABI_LIBRARY" not in os.environ and os.path.exists(_built):
    os.environ["CUABI_LIBRARY"] = _built
