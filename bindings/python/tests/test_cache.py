"""The compile cache from Python (issue 13 items 1 and 3, issue 17 items 4
and 5): a hit in a fresh process loads no compiler, a project warms from
its manifest in one call, cuabi.cache.verify, per-source options for
cuabi.cache.precompile, and an edited header is never answered stale."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "Program"), reason="no program module")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    cuabi.cache.set_directory(str(tmp_path / "cache"))
    monkeypatch.setenv("CUABI_CACHE_DIR", str(tmp_path / "cache"))
    yield
    cuabi.cache.set_directory(None)


def _mapped(name):
    with open("/proc/self/maps") as f:
        return any(name in line for line in f)


CHILD = textwrap.dedent("""
    import json, sys
    import cuabi
    p = cuabi.Program("template <int N> __global__ void k(int *x) { x[0] = N; }", name="k.cu")
    obj = p.compile(arch="sm_90", name_expressions=["k<7>"])
    maps = open("/proc/self/maps").read()
    print(json.dumps({"hit": p.cache_hit, "lowered": obj.lowered_name("k<7>"),
                      "nvrtc": "libnvrtc" in maps, "nvjitlink": "libnvJitLink" in maps}))
""")


def _child():
    env = dict(os.environ, CUABI_DRIVER_PATH="/nonexistent/libcuda.so.1")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(cuabi.__file__)))
    return json.loads(out.stdout)


def test_a_hit_in_a_fresh_process_loads_no_compiler():
    first = _child()
    assert first["hit"] == 0 and first["nvrtc"]
    again = _child()
    assert again == {"hit": 2, "lowered": first["lowered"], "nvrtc": False, "nvjitlink": False}


LINK_CHILD = textwrap.dedent("""
    import json, sys
    import cuabi
    ptx = (b".version 8.0\\n.target sm_90\\n.address_size 64\\n"
           b".visible .entry k(.param .u64 p) { ret; }\\n")
    ln = cuabi.Linker(arch="sm_90")
    ln.add(ptx, "ptx", name="k.ptx")
    cubin = ln.link("cubin")
    maps = open("/proc/self/maps").read()
    print(json.dumps({"hit": ln.cache_hit, "kernels": cubin.kernel_names, "info": ln.info_log,
                      "nvrtc": "libnvrtc" in maps, "nvjitlink": "libnvJitLink" in maps}))
""")


def test_a_link_hit_in_a_fresh_process_loads_no_linker():
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    env = dict(os.environ, CUABI_DRIVER_PATH="/nonexistent/libcuda.so.1")

    def child():
        out = subprocess.run([sys.executable, "-c", LINK_CHILD], env=env, capture_output=True,
                             text=True, check=True,
                             cwd=os.path.dirname(os.path.dirname(cuabi.__file__)))
        return json.loads(out.stdout)

    first = child()
    assert first["hit"] == 0 and first["nvjitlink"] and first["kernels"] == ["k"]
    again = child()
    assert again == dict(first, hit=2, nvrtc=False, nvjitlink=False)
    linked = [e for e in cuabi.cache.entries() if e["linked"]]
    assert len(linked) == 1 and linked[0]["code_type"] == "cubin"


def test_linker_cache_switch():
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    ptx = b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k2() { ret; }\n"

    def link(**kw):
        ln = cuabi.Linker(arch="sm_90", **kw)
        ln.add(ptx, "ptx", name="k2.ptx")
        return bytes(ln.link("cubin")), ln.cache_hit

    first, hit = link()
    assert hit == 0
    assert link() == (first, 1)
    assert link(cache=False) == (first, 0)
    assert link(options=cuabi.LinkerOptions(arch="sm_90", cache=False))[1] == 0
    with pytest.raises(cuabi.CuabiError):
        cuabi.Linker(options=cuabi.LinkerOptions(arch="sm_90", cache=2))


MANIFEST = """
archs = ["sm_80", "sm_90"]

[[source]]
file = "seg.cu"
name_expressions = ["seg<float>"]

[[source]]
name = "inline.cu"
code = '''
extern "C" __global__ void fill(float *x) { x[0] = 1; }
'''
archs = ["sm_90"]
"""


def test_warm_a_manifest(tmp_path):
    (tmp_path / "seg.cu").write_text("template <typename T> __global__ void seg(T *x) { x[0] = 2; }\n")
    (tmp_path / "cuabi.toml").write_text(MANIFEST)
    seen = []
    s = cuabi.cache.warm(tmp_path / "cuabi.toml", progress=seen.append)
    assert (s.total, s.compiled, s.cached, s.failed, s.problems) == (3, 3, 0, 0, 0)
    assert [(r.arch, r.line) for r in s.results] == [("sm_80", 4), ("sm_90", 4), ("sm_90", 8)]
    assert seen == s.results and all(r.status == "CUABI_SUCCESS" for r in seen)
    again = cuabi.cache.warm(str(tmp_path / "cuabi.toml"), archs=["sm_80"], jobs=1)
    assert again.cached == 1 and again.compiled == 1      # inline.cu is new for sm_80
    # a program compiling the same thing hits what was warmed
    p = cuabi.Program((tmp_path / "seg.cu").read_text(), name=str(tmp_path / "seg.cu"))
    p.compile(arch="sm_90", name_expressions=["seg<float>"])
    assert p.cache_hit in (1, 2)


def test_warm_reports_problems_with_lines(tmp_path):
    # (a TOML error keeps the source it is in from compiling: its own source)
    (tmp_path / "bad.toml").write_text('[[source]]\nfile = "nothere.cu"\n[[source]]\n'
                                       'code = "__global__ void k() { nope; }"\narchs = ["sm_90"]\n'
                                       '[[source]]\ncode = "__global__ void y() {}"\nx = 1.5\n')
    with pytest.raises(cuabi.CuabiError) as ei:
        cuabi.cache.warm(tmp_path / "bad.toml")
    s = ei.value.summary
    assert (s.total, s.failed, s.problems) == (1, 1, 2)
    problems = {r.line: r for r in s.results if r.cache_hit == -1}
    assert "nothere.cu" in problems[2].message and "floats" in problems[8].message
    compile_error = [r for r in s.results if r.status == "CUABI_ERROR_COMPILE"][0]
    assert compile_error.line == 3 and "nope" in compile_error.log
    with pytest.raises(OSError) as ei:                    # the IO error is an OSError
        cuabi.cache.warm(tmp_path / "absent.toml")
    assert ei.value.status_name == "CUABI_ERROR_IO"
    # the progress callback stops it; its exception comes through
    (tmp_path / "ok.toml").write_text(MANIFEST.replace('file = "seg.cu"', 'code = "__global__ void z() {}"'))

    def boom(r):
        raise RuntimeError("stop here")
    with pytest.raises(cuabi.CuabiError) as ei:
        cuabi.cache.warm(tmp_path / "ok.toml", progress=boom)
    assert isinstance(ei.value.__cause__ or ei.value.__context__, RuntimeError)
    with pytest.raises(ValueError):
        cuabi.cache.warm(tmp_path / "ok.toml", jobs=-1)


def test_warm_stays_in_the_manifests_tree(tmp_path):
    # issue 29: a manifest reads only its own tree unless the caller allows more
    (tmp_path / "secret").write_text("root:x:0:0:SECRET\n")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "m.toml").write_text('archs = ["sm_90"]\n[[source]]\n'
                                              'file = "../secret"\ntype = "cuda"\n')
    with pytest.raises(cuabi.CuabiError) as ei:
        cuabi.cache.warm(tmp_path / "repo" / "m.toml")
    s = ei.value.summary
    assert (s.total, s.problems) == (0, 1) and "lies outside" in s.results[0].message
    assert "SECRET" not in str(ei.value)
    with pytest.raises(cuabi.CuabiError) as ei:           # allowed: compiled (and it fails)
        cuabi.cache.warm(tmp_path / "repo" / "m.toml", allow_outside=True)
    assert ei.value.summary.total == 1 and ei.value.status_name == "CUABI_ERROR_COMPILE"


def test_verify():
    cuabi.Program("__global__ void v() {}").compile(arch="sm_90")
    r = cuabi.cache.verify()
    assert r.checked == 1 and r.removed == 0 and r.problems == []
    path = cuabi.cache.entries()[0]["path"]
    with open(path, "r+b") as f:
        f.seek(90)
        f.write(b"!")
    r = cuabi.cache.verify()
    assert r.removed == 1 and r.problems == [(path, "checksum mismatch")]
    assert not os.path.exists(path)


def test_precompile_with_options_per_source():
    src = "extern \"C\" __global__ void m(int *x) { x[0] = VALUE; }\n"
    seen = []
    cuabi.cache.precompile(
        [("two.cu", src, cuabi.ProgramOptions(defines={"VALUE": 2})),
         ("three.cu", src, cuabi.ProgramOptions(defines={"VALUE": 3}, output="ptx")),
         ("default.cu", src)],
        ["sm_90"], options=cuabi.ProgramOptions(defines={"VALUE": 4}),
        progress=lambda *a: seen.append(a))
    assert [a[2] for a in seen] == ["two.cu", "three.cu", "default.cu"]
    for value, out in ((2, "cubin"), (3, "ptx"), (4, "cubin")):
        p = cuabi.Program(src)
        p.compile(arch="sm_90", defines={"VALUE": value}, output=out)
        assert p.cache_hit in (1, 2), value
    with pytest.raises(TypeError):
        cuabi.cache.precompile([("x.cu", src, {"defines": []})], ["sm_90"])
    with pytest.raises(ValueError):
        cuabi.cache.precompile([("x.cu", src, None, 4)], ["sm_90"])


def test_edited_header_is_not_stale(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "v.h").write_text("#define V 5\n")
    src = '#include <v.h>\nextern "C" __global__ void h(int *x) { x[0] = V; }\n'
    opts = dict(arch="sm_90", output="ptx", include_paths=[str(inc)])
    assert b", 5;" in bytes(cuabi.Program(src).compile(**opts))
    (inc / "v.h").write_text("#define V 6\n")            # same size, same second
    p = cuabi.Program(src)
    assert b", 6;" in bytes(p.compile(**opts)) and p.cache_hit == 0
