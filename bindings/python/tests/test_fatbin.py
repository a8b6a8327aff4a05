"""Fatbins without a GPU (issue 16): Program.compile("fatbin"), the
Linker's fatbin, ObjectCode.pack_fatbin and the per-architecture queries."""
import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "ObjectCode"), reason="no objcode module")

SRC = r"""
extern "C" __global__ void scale(float *x, float f) { x[threadIdx.x] *= f; }
template <int N> __global__ void fill(int *x) { x[threadIdx.x] = N; }
"""


def _need_compilers():
    info = cuabi.runtime_info()
    if info["nvrtc_status"] != 0 or info["nvjitlink_status"] != 0:
        pytest.skip("NVRTC and nvJitLink are needed")


def _fatbin(arch=("sm_80", "sm_90", "compute_90")):
    _need_compilers()
    prog = cuabi.Program(SRC, "c++", name="k.cu")
    try:
        return prog.compile("fatbin", name_expressions=["fill<3>"], arch=arch if isinstance(arch, str) else list(arch),
                            cache=False)
    except cuabi.NotSupportedError as e:  # neither nvFatbin nor fatbinary here
        pytest.skip(str(e))


def test_program_compiles_a_fatbin():
    oc = _fatbin()
    assert oc.code_type == "fatbin"
    assert oc.fatbin_archs == [80, 90]
    assert oc.fatbin_images == [("cubin", 80), ("cubin", 90), ("ptx", 90)]
    assert oc.fatbin_packer in ("nvfatbin", "fatbinary")
    assert bytes(oc)[:4] == b"\x50\xed\x55\xba"
    for arch, want in (("sm_80", 80), ("sm_90", 90), ("sm_100", 100)):
        r = oc.kernel_resources("scale", arch)
        assert r.arch == want and r.registers > 0 and r.param_bytes == 12
        assert oc.kernel_resources("fill<3>", arch).arch == want
    assert sorted(oc.kernel_names) == sorted(["scale", oc.lowered_name("fill<3>")])


def test_extract_one_image():
    oc = _fatbin()
    cubin = oc.extract("sm_80")
    assert cubin.code_type == "cubin" and cubin.arch == 80
    assert cubin.kernel_resources("fill<3>").arch == 80
    ptx = oc.extract("compute_90")
    assert ptx.code_type == "ptx" and b".target sm_90" in bytes(ptx)
    with pytest.raises(cuabi.NotFoundError, match="sm_80 CUBIN, sm_90 CUBIN, compute_90 PTX"):
        oc.extract("sm_75")
    with pytest.raises(cuabi.InvalidArgumentError):
        cubin.fatbin_archs  # not a fatbin


def test_arch_list_as_a_string_and_the_bytes_round_trip():
    oc = _fatbin("sm_80,sm_90")
    again = cuabi.ObjectCode.from_fatbin(bytes(oc))
    assert again.fatbin_archs == [80, 90]
    assert again.fatbin_packer == oc.fatbin_packer


def test_pack_fatbin_and_linker_fatbin():
    oc = _fatbin()
    packed = cuabi.ObjectCode.pack_fatbin([oc.extract("sm_90"), oc.extract("compute_90")])
    assert packed.fatbin_images == [("cubin", 90), ("ptx", 90)]
    ptx = cuabi.Program(SRC, "c++").compile("ptx", arch="compute_80", cache=False)
    linked = cuabi.Linker(ptx, arch=["sm_80", "sm_90"]).link("fatbin")
    assert linked.fatbin_archs == [80, 90]
    with pytest.raises(cuabi.InvalidArgumentError, match="CUABI_CODE_FATBIN"):
        cuabi.Linker(ptx, arch="sm_80,sm_90").link("cubin")


def test_bad_fatbins_and_options():
    _need_compilers()
    prog = cuabi.Program(SRC, "c++")
    with pytest.raises(cuabi.InvalidArgumentError, match="twice"):
        prog.compile("fatbin", arch=["sm_80", "sm_80"], cache=False)
    cut = cuabi.ObjectCode.from_bytes(b"\x50\xed\x55\xba\x01\x00\x10\x00" + b"\xff" * 8, "fatbin")
    with pytest.raises(cuabi.InvalidImageError, match="not a well-formed fatbin"):
        cut.fatbin_images
