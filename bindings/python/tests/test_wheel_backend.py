"""The package's build backend (bindings/python/build_backend/cuabi_build.py)
and the `cuabi` console script, without building anything: metadata equal
to pyproject.toml's, the wheel's tag, files and RECORD, and the script's
environment. tests/bindings/check_wheel.sh installs a real wheel."""
import base64
import hashlib
import importlib.util
import os
import sys
import zipfile

import pytest

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.dirname(os.path.dirname(PKG))
_spec = importlib.util.spec_from_file_location(
    "cuabi_build", os.path.join(PKG, "build_backend", "cuabi_build.py"))
backend = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(backend)


def test_metadata_equals_pyproject():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(PKG, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    p, bs = project["project"], project["build-system"]
    assert bs == {"requires": [], "build-backend": "cuabi_build",
                  "backend-path": ["build_backend"]}
    assert p["name"] == backend.NAME and p["description"] == backend.SUMMARY
    assert p["requires-python"] == backend.REQUIRES_PYTHON
    assert p["license"]["text"] == backend.LICENSE
    assert p["optional-dependencies"] == backend.EXTRAS
    assert p["scripts"] == backend.CONSOLE_SCRIPTS
    with open(os.path.join(SRC, "pyproject.toml"), "rb") as f:
        top = tomllib.load(f)["build-system"]
    assert top["backend-path"] == ["bindings/python/build_backend"]


def test_version_is_the_projects():
    import cuabi
    assert backend.version(SRC) == cuabi.__version__
    assert backend.abi_version(SRC) == str(cuabi.abi_version())
    meta = backend.metadata("1.2.3")
    assert "Name: cuabi\n" in meta and "Version: 1.2.3\n" in meta
    assert 'Requires-Dist: numpy; extra == "test"' in meta


def test_wheel_tag_names_this_interpreter():
    py, abi, plat = backend.wheel_tag().split("-")
    assert py == f"cp{sys.version_info[0]}{sys.version_info[1]}" or sys.implementation.name != "cpython"
    assert abi.startswith(py[:2]) and plat and "-" not in plat and "." not in plat


def test_written_wheel_has_a_true_record(tmp_path):
    files = backend.package_files()
    assert "cuabi/__init__.py" in files and "cuabi/_cli.py" in files
    files["cuabi/bin/cuabi"] = (b"#!/bin/sh\n", True)
    name = backend.write_wheel(str(tmp_path), "9.9.9", files)
    assert name == f"cuabi-9.9.9-{backend.wheel_tag()}.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = z.namelist()
        record = z.read("cuabi-9.9.9.dist-info/RECORD").decode().splitlines()
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if path.endswith("RECORD"):
                assert digest == size == ""
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data)
        assert len(record) == len(names)
        assert (z.getinfo("cuabi/bin/cuabi").external_attr >> 16) & 0o111
        assert not (z.getinfo("cuabi/_lib.py").external_attr >> 16) & 0o111
        wheel = z.read("cuabi-9.9.9.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: false" in wheel and f"Tag: {backend.wheel_tag()}" in wheel
        assert z.read("cuabi-9.9.9.dist-info/entry_points.txt").decode() == \
            "[console_scripts]\ncuabi = cuabi._cli:main\n"


def test_a_package_without_its_source_tree_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(backend, "PACKAGE_DIR", str(tmp_path / "a" / "b"))
    with pytest.raises(backend.BuildError, match="no cuabi source tree"):
        backend.source_root()


def test_configure_arguments(monkeypatch):
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda")
    # What `./config.status --config` of a build tree says, as check_wheel.sh
    # passes it: the backend keeps what configures the build, not where.
    monkeypatch.setenv("CUABI_CONFIGURE_ARGS", "'--srcdir=../..' '-q' 'CFLAGS=-O1 -g' "
                       "'--enable-sanitizers' 'LIBFFI_CFLAGS=-I/p/include'")
    assert backend.configure_args({"configure-args": "--with-dlpack=/d --cache-file=x"}) == [
        "--with-cuda=/opt/cuda", "CFLAGS=-O1 -g", "LIBFFI_CFLAGS=-I/p/include",
        "--with-dlpack=/d"]


def test_console_script_environment():
    from cuabi import _cli
    here = os.path.dirname(_cli.tool_path())
    env = _cli.tool_environment({"LD_LIBRARY_PATH": "/x"})
    assert env["LD_LIBRARY_PATH"].split(os.pathsep) == [os.path.dirname(here), "/x"]
    assert "LD_PRELOAD" not in env
    env = _cli.tool_environment({"CUABI_LIBRARY": "/lib/libcuabi.so", "LD_PRELOAD": "a.so"})
    assert env["LD_PRELOAD"] == "/lib/libcuabi.so a.so"


def test_console_script_without_a_bundled_tool(capsys):
    from cuabi import _cli
    if os.access(_cli.tool_path(), os.X_OK):
        pytest.skip("an installed wheel: the tool is there")
    assert _cli.main(["info"]) == 2
    assert "not bundled" in capsys.readouterr().err
