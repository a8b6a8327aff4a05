"""Loading, ABI and layout checks, errors and handle misuse: no GPU needed."""
import ctypes as C
import gc
import os
import subprocess
import sys

import pytest

import cuabi
from cuabi import _capi, _lib
from cuabi._core import Stream

# Where the package under test lives (conftest): subprocesses import it too.
HERE = os.environ.get("CUABI_PYTHON_PATH") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))


def test_version_and_abi():
    assert cuabi.__version__.count(".") == 2
    assert cuabi.abi_version() == _capi.ABI_VERSION
    assert os.path.exists(cuabi.LIBRARY_PATH) or "libcuabi" in cuabi.LIBRARY_PATH


def test_runtime_info():
    info = cuabi.runtime_info()
    assert info["library_version"] == cuabi.__version__
    assert info["abi_version"] == _capi.ABI_VERSION
    for lib in ("driver", "nvrtc", "nvjitlink", "nvvm", "nvfatbin"):
        assert isinstance(info[lib + "_path"], str)
        assert isinstance(info[lib + "_version"], int)
        assert info[lib + "_status"] == 0 or info[lib + "_error"]
        assert info[lib + "_status"] != 0 or info[lib + "_path"]  # usable: its file named


def test_every_function_bound_with_generated_signature():
    for name, (restype, argtypes, params) in _capi.FUNCTIONS.items():
        fn = getattr(_lib.lib, name).ctypes_function
        assert fn.restype is restype
        assert tuple(fn.argtypes) == argtypes
        assert len(params) == len(argtypes)


def test_layouts_match_library():
    _lib.check_library(_lib._cdll, "libcuabi")  # what import did


def _struct_like(cls, change):
    fields = list(cls._fields_)
    fields = change(fields)
    return type(cls.__name__, (C.Structure,), {"_fields_": fields, "_cuabi_version_": 1})


def test_layout_mismatch_refused():
    bad = _struct_like(_capi.cuabi_stream_options,
                       lambda f: [f[0], ("flags", C.c_uint64), f[2]])
    with pytest.raises(cuabi.CuabiImportError) as ei:
        _lib.check_library(_lib._cdll, "libX", structs={"cuabi_stream_options": bad})
    msg = str(ei.value)
    assert "cuabi_stream_options" in msg and "size" in msg and "priority: offset" in msg
    assert isinstance(ei.value, ImportError)


def test_unknown_struct_and_missing_function_refused():
    fake = type("cuabi_nonexistent", (C.Structure,), {"_fields_": [("x", C.c_int)]})
    with pytest.raises(cuabi.CuabiImportError, match="cuabi_nonexistent: unknown"):
        _lib.check_library(_lib._cdll, "libX", structs={"cuabi_nonexistent": fake})
    with pytest.raises(cuabi.CuabiImportError, match="lacks 1 function.*cuabi_frobnicate"):
        _lib.check_library(_lib._cdll, "libX", functions={"cuabi_frobnicate": None})


def test_abi_mismatch_refused(monkeypatch):
    monkeypatch.setattr(_capi, "ABI_VERSION", _capi.ABI_VERSION + 1)
    with pytest.raises(cuabi.CuabiImportError, match="ABI version"):
        _lib.check_library(_lib._cdll, "libX")


def test_bad_library_path_is_import_error():
    env = dict(os.environ, CUABI_LIBRARY="/nonexistent/libcuabi.so")
    r = subprocess.run([sys.executable, "-c", "import cuabi"], cwd=HERE, env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "CuabiImportError" in r.stderr and "CUABI_LIBRARY" in r.stderr


def test_error_classes():
    for status, name in _capi.STATUS_NAMES.items():
        if status == 0:
            continue
        cls = cuabi.ERRORS[status]
        assert issubclass(cls, cuabi.CuabiError) and cls.status == status
        assert cls.status_name == name
        assert getattr(cuabi, cls.__name__) is cls
        assert cuabi.status_name(status) == name
        assert cuabi.status_message(status)
    assert issubclass(cuabi.InvalidArgumentError, ValueError)
    assert issubclass(cuabi.InvalidHandleError, cuabi.CuabiError)


def test_invalid_handle_raises_with_details():
    s = Stream._wrap(0x12345)
    with pytest.raises(cuabi.InvalidHandleError) as ei:
        s.raw
    e = ei.value
    assert e.status == _capi.CUABI_ERROR_INVALID_HANDLE
    assert e.status_name == "CUABI_ERROR_INVALID_HANDLE"
    assert "cuabi_stream_raw" in e.message
    assert e.log == ""
    s.close()  # releasing a bogus handle is swallowed by the finalizer
    s.close()
    assert s.closed
    with pytest.raises(cuabi.ClosedHandleError):
        s.raw
    with pytest.raises(cuabi.ClosedHandleError):
        with s:
            pass


def test_wrong_type_handle():
    with pytest.raises(cuabi.InvalidHandleError):
        cuabi.Event._wrap(0x999).raw


def test_finalizer_runs_on_collect():
    s = Stream._wrap(0x777)
    fin = s._fin
    del s
    gc.collect()
    assert not fin.alive


def test_null_handle_refused():
    with pytest.raises(ValueError):
        Stream._wrap(0)


def test_bad_struct_version():
    opts = _capi.cuabi_stream_options()
    with pytest.raises(cuabi.InvalidVersionError, match="version"):
        _lib.lib.cuabi_stream_options_init(C.byref(opts), 99)
    assert _lib.new_struct(_capi.cuabi_stream_options).version == 1


def test_generic_call_arity():
    with pytest.raises(TypeError, match="missing argument 'stream'"):
        _lib.call("cuabi_stream_raw")
    with pytest.raises(TypeError, match="too many"):
        _lib.call("cuabi_stream_raw", None, 1)


def test_no_driver_is_reported():
    if cuabi.runtime_info()["driver_status"] == 0:
        pytest.skip("a driver is present")
    with pytest.raises(cuabi.DriverNotFoundError) as ei:
        cuabi.device_count()
    assert "libcuda" in str(ei.value)
    with pytest.raises(cuabi.DriverNotFoundError):
        cuabi.Device(0)


def test_backend_is_the_one_asked_for():
    asked = os.environ.get("CUABI_BACKEND", "").lower()
    assert cuabi.backend in ("compiled", "ctypes") and isinstance(cuabi.backend_note, str)
    if asked in ("compiled", "ctypes"):
        assert cuabi.backend == asked
    assert (_lib.fast is not None) == (cuabi.backend == "compiled")


def _import_with(**env):
    env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", "import cuabi; print(cuabi.backend)"],
                          cwd=HERE, env=env, capture_output=True, text=True)


def test_unknown_backend_is_import_error():
    r = _import_with(CUABI_BACKEND="cffi")
    assert r.returncode != 0 and "CuabiImportError" in r.stderr
    assert "replaced by cuabi._fast" in r.stderr
    r = _import_with(CUABI_BACKEND="fortran")
    assert r.returncode != 0 and "'compiled'" in r.stderr


def test_ctypes_backend_can_always_be_forced():
    r = _import_with(CUABI_BACKEND="ctypes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ctypes"


def test_exit_with_live_handles_is_clean():
    code = ("import cuabi; from cuabi._core import Stream\n"
            "keep = [Stream._wrap(0x4242 + i) for i in range(3)]\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""


def test_exit_with_live_objects_of_every_kind_is_clean():
    """Interpreter exit with live handles everywhere, and numpy arrays that
    share cuabi memory outliving every cuabi object (their DLPack deleters
    run at the very end of shutdown)."""
    code = "\n".join([
        "import numpy as np, cuabi",
        "host = cuabi.MemoryResource.host()",
        "buf = cuabi.Buffer(4096, resource=host)",
        "view = buf.view('float32', (32, 32))",
        "arr = np.from_dlpack(view)",
        "arr[:] = 1.0",
        "back = cuabi.from_dlpack(np.arange(10.0))",
        "pack = cuabi.ArgPack('ptr, i32, f32')",
        "obj = cuabi.Program('extern \"C\" __global__ void k(int *p) { *p = 1; }')"
        ".compile(arch='sm_90')",
        "keep = [host, buf, view, back, pack, obj]",
        "del host, buf, view",        # only arr (and keep) hold the memory now
        "assert arr.sum() == 1024.0",
    ])
    r = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "Error" not in r.stderr, r.stderr


def test_import_loads_only_what_it_needs():
    # `import cuabi` (docs/python.md: <= 40 ms, bench/bench_import.py) loads
    # the library, the checks and the exceptions; the rest on first use.
    code = ("import sys, cuabi\n"
            "print(sorted(m for m in sys.modules if m.startswith('cuabi')))\n"
            "print('ctypes.util' in sys.modules, 'dataclasses' in sys.modules)\n"
            "cuabi.Program; cuabi.launch; cuabi.from_dlpack; cuabi.__version__\n"
            "print(sorted(m for m in sys.modules if m.startswith('cuabi')))\n")
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=HERE, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=HERE))
    assert r.returncode == 0, r.stderr
    first, flags, after = r.stdout.splitlines()
    assert set(eval(first)) <= {"cuabi", "cuabi._capi", "cuabi.errors", "cuabi._lib",
                                "cuabi._fast"}
    assert flags == "False False"      # find_library and dataclasses not needed
    assert {"cuabi._compile", "cuabi._launch", "cuabi._view"} <= set(eval(after))


def test_lazy_names_are_the_modules_names():
    from cuabi import _compile, _launch, _view
    assert cuabi.launch is _launch.launch and cuabi.Program is _compile.Program
    assert cuabi.from_dlpack is _view.from_dlpack and cuabi.__version__ == cuabi.version()
    assert {"launch", "Program", "View"} <= set(dir(cuabi))
    with pytest.raises(AttributeError):
        cuabi.no_such_thing


def test_without_the_extension_the_package_is_ctypes(tmp_path):
    # The package's sources alone (no cuabi._fast beside them): ctypes, and
    # the note says why; CUABI_BACKEND=compiled refuses to import.
    import shutil
    pkg = tmp_path / "cuabi"
    pkg.mkdir()
    for f in os.listdir(os.path.dirname(cuabi.__file__)):
        if f.endswith(".py"):
            shutil.copy(os.path.join(os.path.dirname(cuabi.__file__), f), pkg / f)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("CUABI_BACKEND", None)
    code = "import cuabi; print(cuabi.backend); print(cuabi.backend_note)"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    backend, note = r.stdout.splitlines()
    assert backend == "ctypes" and "not importable" in note
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                       env=dict(env, CUABI_BACKEND="compiled"), capture_output=True, text=True)
    assert r.returncode != 0 and "CUABI_BACKEND=compiled" in r.stderr
