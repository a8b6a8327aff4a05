"""ObjectCode, Kernel and Linker without a GPU (PTX through nvJitLink)."""
import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "ObjectCode"), reason="no objcode module")

PTX = b""".version 8.0
.target sm_90
.address_size 64

.visible .entry scale(
    .param .u64 p,
    .param .u32 n,
    .param .f32 a
)
{
    ret;
}
"""


def _need_jit():
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")


def test_objcode_from_ptx():
    _need_jit()
    with cuabi.ObjectCode.from_bytes(PTX, "ptx", name="scale.ptx") as oc:
        assert oc.code_type == "ptx"
        assert bytes(oc) == PTX
        assert oc.kernel_names == ["scale"]
        k = oc.get_kernel("scale")
        assert k.name == "scale"
        assert k.param_info == [(0, 8), (8, 4), (12, 4)]
        r = k.resources
        assert r.param_count == 3 and r.arch >= 90
        assert oc.kernel_resources("scale").param_bytes == 16
        assert k.objcode == oc
        k.close()


def test_missing_kernel_and_bad_image():
    _need_jit()
    oc = cuabi.ObjectCode.from_bytes(PTX, "ptx")
    with pytest.raises(cuabi.NotFoundError) as ei:
        oc.get_kernel("nope")
    assert "nope" in str(ei.value)
    with pytest.raises(cuabi.CuabiError):
        cuabi.ObjectCode.from_bytes(b"\x7fELFgarbage", "cubin").kernel_names


def test_link_ptx_to_cubin():
    _need_jit()
    with cuabi.Linker(cuabi.ObjectCode.from_bytes(PTX, "ptx"), arch="sm_90") as ln:
        cubin = ln.link("cubin")
    assert cubin.code_type == "cubin" and cubin.arch == 90
    assert cubin.kernel_names == ["scale"]
    assert bytes(cubin)[:4] == b"\x7fELF"


def test_link_error_has_log():
    _need_jit()
    ln = cuabi.Linker(arch="sm_90")
    with pytest.raises(cuabi.CuabiError) as ei:
        ln.add(b".version 8.0\n.target sm_90\nthis is not ptx\n", "ptx", name="bad.ptx")
        ln.link("cubin")
    assert ei.value.status_name.startswith("CUABI_ERROR_")


def test_objcode_from_missing_file():
    with pytest.raises(cuabi.CuabiError) as ei:
        cuabi.ObjectCode.from_file("/nonexistent/k.cubin")
    assert "/nonexistent/k.cubin" in str(ei.value)


@pytest.mark.skipif(not hasattr(cuabi, "arch_limits"), reason="no occupancy module")
def test_arch_limits():
    lim = cuabi.arch_limits("sm_90")
    assert lim["arch"] == 90 and lim["registers_per_sm"] == 65536
    assert lim["shared_bytes_per_block_optin"] == 232448
    assert 90 in cuabi.known_archs()
    with pytest.raises(cuabi.NotFoundError):
        cuabi.arch_limits("sm_10")
