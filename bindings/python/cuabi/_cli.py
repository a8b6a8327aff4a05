"""The `cuabi` console script of a wheel: runs the command-line tool bundled
in the package (cuabi/bin/cuabi) with the bundled library, or with the one
CUABI_LIBRARY names, as `import cuabi` would use."""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def tool_path() -> str:
    return os.path.join(_HERE, "bin", "cuabi")


def tool_environment(environ=None) -> dict:
    """The tool's environment: the package directory (the bundled
    libcuabi.so.<ABI>) first on LD_LIBRARY_PATH, and CUABI_LIBRARY, when
    set, preloaded so that it is the copy the tool runs with."""
    env = dict(os.environ if environ is None else environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (_HERE, env.get("LD_LIBRARY_PATH", "")) if p)
    override = env.get("CUABI_LIBRARY")
    if override:
        env["LD_PRELOAD"] = " ".join(p for p in (override, env.get("LD_PRELOAD", "")) if p)
    return env


def main(argv=None) -> int:
    exe = tool_path()
    if not os.access(exe, os.X_OK):
        print(f"cuabi: the command-line tool is not bundled here ({exe}); it comes with "
              "the wheel (pip install ./bindings/python) or with `make install`",
              file=sys.stderr)
        return 2
    args = [exe] + list(sys.argv[1:] if argv is None else argv)
    os.execve(exe, args, tool_environment())
    return 127   # not reached


if __name__ == "__main__":
    sys.exit(main())
