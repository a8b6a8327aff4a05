"""The build backend of the cuabi Python package (PEP 517), standard library
only, so `pip install` needs nothing from PyPI (also offline, in pip's
isolated build environment).

    pip install ./bindings/python      # from a checkout (autotools needed)
    pip install cuabi-X.Y.Z.tar.gz     # from `make dist` (no autotools needed)
    python -m build bindings/python    # an sdist (make dist) and a wheel

build_wheel builds libcuabi, the `cuabi` tool and the extension cuabi._fast
with the project's own autotools build (configure && make, out of tree in a
temporary directory; a checkout without `configure` is copied and
autoreconf'ed first, so the source tree is never written to), and bundles
them in the package: cuabi/libcuabi.so.<ABI> (found by cuabi._lib before any
installed copy; CUABI_LIBRARY still overrides), cuabi/bin/cuabi (run by the
`cuabi` console script) and cuabi/_fast*.so. build_sdist is `make dist`,
whose tarball carries this backend and a pyproject.toml at its top.

Build requirements are the library's: a C compiler, make, the CUDA toolkit
headers (--with-cuda, or CUDA_HOME), libffi, DLPack and xxHash headers
(Debian: libffi-dev libdlpack-dev libxxhash-dev), and Python.h for the
extension (python3-dev). Extra configure arguments: the environment
variable CUABI_CONFIGURE_ARGS or --config-settings configure-args="..."
(without the options the backend decides: --srcdir, caches, sanitizers).
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

NAME = "cuabi"
SUMMARY = ("CUDA from Python through libcuabi's stable C ABI: a compiled fast path "
           "(cuabi._fast) over ctypes")
REQUIRES_PYTHON = ">=3.10"
LICENSE = "MIT"
EXTRAS = {"test": ["pytest", "numpy"]}
CONSOLE_SCRIPTS = {"cuabi": "cuabi._cli:main"}

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)                       # bindings/python


# ------------------------------------------------------------ source tree

def source_root() -> str:
    """The cuabi source tree this package belongs to (bindings/python is
    inside it: a checkout, or an unpacked `make dist` tarball)."""
    root = os.path.dirname(os.path.dirname(PACKAGE_DIR))
    if not os.path.exists(os.path.join(root, "configure.ac")):
        raise BuildError(
            f"cuabi: no cuabi source tree (configure.ac) above {PACKAGE_DIR}. Install from a "
            "checkout (pip install ./bindings/python) or from a `make dist` tarball; a "
            "copy of bindings/python alone cannot build libcuabi.")
    return root


def version(root: str) -> str:
    """MAJOR.MINOR.PATCH from version.m4, the project's one version."""
    with open(os.path.join(root, "version.m4"), encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(r"m4_define\(\[cuabi_%s\], \[(\d+)\]\)" % k, text) for k in
             ("major", "minor", "patch")]
    if not all(parts):
        raise BuildError(f"cuabi: cannot read the version from {root}/version.m4")
    return ".".join(p.group(1) for p in parts)


def abi_version(root: str) -> str:
    with open(os.path.join(root, "version.m4"), encoding="utf-8") as f:
        text = f.read()
    cur = re.search(r"m4_define\(\[cuabi_lt_current\], \[(\d+)\]\)", text)
    age = re.search(r"m4_define\(\[cuabi_lt_age\], \[(\d+)\]\)", text)
    return str(int(cur.group(1)) - int(age.group(1)))


class BuildError(Exception):
    pass


def _tracked_files(root: str):
    """Files of a git checkout (None when it is not one or git is missing)."""
    if not os.path.exists(os.path.join(root, ".git")) or not shutil.which("git"):
        return None
    r = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if r.returncode != 0:
        return None
    return [p for p in r.stdout.decode().split("\0") if p]


_SKIP = {".git", ".gpu", "autom4te.cache", "__pycache__", "rust-target"}


def _copy_tree(root: str, dest: str) -> None:
    files = _tracked_files(root)
    if files is None:
        def ignore(d, names):
            return [n for n in names if n in _SKIP or (d == root and n.startswith("build"))]
        shutil.copytree(root, dest, ignore=ignore, symlinks=True)
        return
    for rel in files:
        src = os.path.join(root, rel)
        if not os.path.lexists(src):      # deleted, not yet committed
            continue
        dst = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)


def _run(cmd, cwd, what, log):
    print(f"cuabi build: {what}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    with open(log, "ab") as out:
        r = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        with open(log, "rb") as f:
            tail = f.read().decode("utf-8", "replace").splitlines()[-40:]
        raise BuildError(f"cuabi: {what} failed (exit {r.returncode}); the end of its "
                         "output:\n  " + "\n  ".join(tail) + _HINT)


_HINT = ("\n\nlibcuabi needs a C compiler, make, the CUDA toolkit headers (default "
         "/usr/local/cuda; set CUDA_HOME or CUABI_CONFIGURE_ARGS=--with-cuda=DIR), and the "
         "libffi, DLPack and xxHash headers (Debian: apt-get install libffi-dev "
         "libdlpack-dev libxxhash-dev); the Python extension needs Python.h (python3-dev); "
         "a checkout without `configure` needs autoconf, automake and libtool.")


def configured_source(root: str, work: str, log: str) -> str:
    """A source tree with `configure` that an out-of-tree build may use:
    the tree itself, `make distdir` of a tree configured in place (which
    out-of-tree builds refuse), or a copy of a checkout, autoreconf'ed."""
    if os.path.exists(os.path.join(root, "configure")) and \
            not os.path.exists(os.path.join(root, "config.status")):
        return root
    src = os.path.join(work, "src")
    if os.path.exists(os.path.join(root, "config.status")) and \
            os.path.exists(os.path.join(root, "Makefile")):
        # Configured (and maybe built) in place, as scripts/gpu-check.sh does
        # with a dist tarball: an out-of-tree build refuses such a tree, and
        # make's VPATH search would take its built files as up to date.
        # `make distdir` writes the clean tree the tarball had: make only,
        # no autotools.
        _run(["make", "-s", "distdir", f"distdir={src}"], root, "make distdir", log)
        return src
    _copy_tree(root, src)
    if not os.path.exists(os.path.join(src, "configure")):
        if not shutil.which("autoreconf"):
            raise BuildError("cuabi: this checkout has no `configure` and autoreconf is "
                             "missing (install autoconf, automake and libtool, or install "
                             "from a `make dist` tarball)")
        _run(["autoreconf", "-fi"], src, "autoreconf", log)
    return src


# Options the backend decides itself: where the sources are, and caches of
# another build (e.g. in a `./config.status --config` of a build tree).
_OWN_OPTIONS = ("--srcdir", "--cache-file", "-C", "--config-cache", "-q", "--quiet", "--silent",
                "--enable-sanitizers", "--disable-python-extension", "PYTHON3=")


def configure_args(config_settings) -> list:
    args = []
    cuda = os.environ.get("CUDA_HOME")
    if cuda:
        args.append(f"--with-cuda={cuda}")
    args += shlex.split(os.environ.get("CUABI_CONFIGURE_ARGS", ""))
    extra = (config_settings or {}).get("configure-args")
    if extra:
        args += shlex.split(extra if isinstance(extra, str) else " ".join(extra))
    return [a for a in args if not a.startswith(_OWN_OPTIONS)]


def build_native(root: str, work: str, config_settings) -> dict:
    """configure && make the library, the CLI and the extension; the paths
    of what goes into the wheel."""
    log = os.path.join(work, "build.log")
    src = configured_source(root, work, log)
    build = os.path.join(work, "build")
    os.makedirs(build)
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    _run([os.path.join(src, "configure"), "-q", f"PYTHON3={sys.executable}",
          "--enable-python-extension"] + configure_args(config_settings),
         build, "configure", log)
    jobs = str(os.cpu_count() or 2)
    fast = f"bindings/python/cuabi/_fast{ext}"
    _run(["make", f"-j{jobs}", "libcuabi.la", "cuabi", fast], build, "make", log)
    abi = abi_version(src)
    lib = os.path.realpath(os.path.join(build, ".libs", f"libcuabi.so.{abi}"))
    cli = os.path.join(build, ".libs", "cuabi")
    for path in (lib, cli, os.path.join(build, fast)):
        if not os.path.exists(path):
            raise BuildError(f"cuabi: the build did not make {path}" + _HINT)
    return {f"cuabi/libcuabi.so.{abi}": lib, "cuabi/bin/cuabi": cli,
            f"cuabi/_fast{ext}": os.path.join(build, fast)}


# ------------------------------------------------------------ wheel files

def _readme() -> str:
    try:
        with open(os.path.join(PACKAGE_DIR, "README.md"), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def metadata(ver: str) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {ver}",
             f"Summary: {SUMMARY}", f"Requires-Python: {REQUIRES_PYTHON}",
             f"License: {LICENSE}"]
    for extra, reqs in EXTRAS.items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + _readme()


def wheel_tag() -> str:
    """interpreter-abi-platform of this interpreter (the package holds a
    CPython extension and native code)."""
    impl = {"cpython": "cp", "pypy": "pp"}.get(sys.implementation.name,
                                                sys.implementation.name)
    py = f"{impl}{sys.version_info[0]}{sys.version_info[1]}"
    soabi = sysconfig.get_config_var("SOABI") or ""
    m = re.match(r"cpython-(\d+)(\w*)", soabi)
    abi = f"cp{m.group(1)}{m.group(2)}" if m else py
    plat = re.sub(r"[^\w]", "_", sysconfig.get_platform())
    return f"{py}-{abi}-{plat}"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_wheel(out_dir: str, ver: str, files: dict) -> str:
    """files: archive path -> (bytes, executable)."""
    tag = wheel_tag()
    name = f"{NAME}-{ver}-{tag}.whl"
    info = f"{NAME}-{ver}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = (metadata(ver).encode(), False)
    files[f"{info}/WHEEL"] = (("Wheel-Version: 1.0\nGenerator: cuabi_build\n"
                               f"Root-Is-Purelib: false\nTag: {tag}\n").encode(), False)
    files[f"{info}/entry_points.txt"] = (
        ("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in CONSOLE_SCRIPTS.items())
         ).encode(), False)
    files[f"{info}/top_level.txt"] = (f"{NAME}\n".encode(), False)
    record = [_record_line(p, data) for p, (data, _x) in sorted(files.items())]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = (("\n".join(record) + "\n").encode(), False)
    path = os.path.join(out_dir, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, (data, executable) in sorted(files.items()):
            zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = (0o100755 if executable else 0o100644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def package_files() -> dict:
    pkg = os.path.join(PACKAGE_DIR, "cuabi")
    out = {}
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                out[f"cuabi/{name}"] = (f.read(), False)
    return out


# ------------------------------------------------------------ PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    ver = version(source_root())
    info = os.path.join(metadata_directory, f"{NAME}-{ver}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata(ver))
    with open(os.path.join(info, "entry_points.txt"), "w", encoding="utf-8") as f:
        f.write("[console_scripts]\n" + "".join(f"{k} = {v}\n"
                                                for k, v in CONSOLE_SCRIPTS.items()))
    return os.path.basename(info)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    root = source_root()
    ver = version(root)
    with tempfile.TemporaryDirectory(prefix="cuabi-wheel-") as work:
        native = build_native(root, work, config_settings)
        files = package_files()
        for arc, path in native.items():
            with open(path, "rb") as f:
                files[arc] = (f.read(), arc.endswith("/bin/cuabi") or ".so" in arc)
        name = write_wheel(wheel_directory, ver, files)
    print(f"cuabi build: wrote {name}", flush=True)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """`make dist`: the project's own tarball, which is an sdist (a
    pyproject.toml at its top naming this backend, and PKG-INFO)."""
    root = source_root()
    with tempfile.TemporaryDirectory(prefix="cuabi-sdist-") as work:
        log = os.path.join(work, "build.log")
        src = configured_source(root, work, log)
        build = os.path.join(work, "build")
        os.makedirs(build)
        _run([os.path.join(src, "configure"), "-q", f"PYTHON3={sys.executable}"]
             + configure_args(config_settings), build, "configure", log)
        _run(["make", "dist"], build, "make dist", log)
        tarballs = [n for n in os.listdir(build) if n.endswith(".tar.gz")]
        if len(tarballs) != 1:
            raise BuildError(f"cuabi: make dist made {tarballs or 'no tarball'}")
        name = tarballs[0]
        _check_sdist(os.path.join(build, name))
        shutil.copy2(os.path.join(build, name), os.path.join(sdist_directory, name))
    return name


def _check_sdist(path: str) -> None:
    with tarfile.open(path) as t:
        names = set(t.getnames())
    top = os.path.basename(path)[:-len(".tar.gz")]
    for need in ("pyproject.toml", "PKG-INFO", "configure",
                 "bindings/python/build_backend/cuabi_build.py"):
        if f"{top}/{need}" not in names:
            raise BuildError(f"cuabi: {os.path.basename(path)} lacks {need}: not an sdist")


def pkg_info(ver: str) -> str:
    """PKG-INFO for the dist tarball (make dist-hook)."""
    return metadata(ver)


if __name__ == "__main__":
    # `python3 cuabi_build.py pkg-info DIR`: write DIR/PKG-INFO (make dist).
    if len(sys.argv) == 3 and sys.argv[1] == "pkg-info":
        with open(os.path.join(sys.argv[2], "PKG-INFO"), "w", encoding="utf-8") as f:
            f.write(pkg_info(version(sys.argv[2])))
        sys.exit(0)
    sys.exit(f"usage: {sys.argv[0]} pkg-info DISTDIR")
