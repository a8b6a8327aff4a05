"""Kernel.occupancy_for: occupancy answered offline (no GPU) for kernels
compiled by NVRTC for sm_80 and sm_90, checked against the C library's
functions called directly and against `cuabi occupancy --json`; the
Python block-size callback; bad input."""
import ctypes as C
import json
import os
import subprocess

import pytest

import cuabi
from occupancy_kernels import KERNELS, SOURCE, TEMPLATES, compile_source

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "KernelOccupancy"),
                                reason="no occupancy module")

ARCHS = ["sm_80", "sm_90"]


@pytest.fixture(scope="module")
def capi():
    from cuabi import _capi
    from cuabi._lib import lib, new_struct
    return _capi, lib, new_struct


@pytest.fixture(scope="module", params=ARCHS)
def compiled(request, tmp_path_factory):
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    cuabi.cache.set_directory(str(tmp_path_factory.mktemp("cache")))
    try:
        yield request.param, compile_source(cuabi, request.param)
    finally:
        cuabi.cache.set_directory(None)


def _c_resources(capi, oc, name, arch):
    _capi, lib, new_struct = capi
    r = new_struct(_capi.cuabi_kernel_resources)
    lib.cuabi_objcode_kernel_resources(C.byref(r), oc, name.encode(), arch.encode())
    return r


def _c_options(capi, sm_count=0, max_dynamic_shared=-1, carveout=-1):
    _capi, _lib, new_struct = capi
    o = new_struct(_capi.cuabi_occupancy_options)
    o.sm_count, o.max_dynamic_shared_bytes, o.carveout = sm_count, max_dynamic_shared, carveout
    return o


def _c_blocks(capi, arch, res, block, smem, opts):
    _capi, lib, new_struct = capi
    r = new_struct(_capi.cuabi_occupancy_result)
    lib.cuabi_occupancy_offline_max_active_blocks(C.byref(r), arch.encode(), C.byref(res),
                                                  block, smem, C.byref(opts))
    return r


def _c_best(capi, arch, res, smem_fn, smem, limit, opts):
    _capi, lib, _n = capi
    block, grid = C.c_int(), C.c_int()
    fn = _capi.cuabi_block_smem_fn(lambda b, p: smem_fn(b)) if smem_fn else \
        _capi.cuabi_block_smem_fn()
    lib.cuabi_occupancy_offline_max_potential_block_size(
        C.byref(block), C.byref(grid), arch.encode(), C.byref(res), fn, None, smem, limit,
        C.byref(opts))
    return grid.value, block.value


def _c_avail(capi, arch, res, blocks, block, opts):
    _capi, lib, _n = capi
    out = C.c_size_t()
    lib.cuabi_occupancy_offline_available_dynamic_smem(C.byref(out), arch.encode(),
                                                       C.byref(res), blocks, block,
                                                       C.byref(opts))
    return out.value


OPTIONS = [{}, {"sm_count": 132}, {"max_dynamic_shared": 100 * 1024}, {"carveout": 50},
           {"sm_count": 40, "carveout": 100}]


def _c_opts_of(capi, kw):
    return _c_options(capi, kw.get("sm_count", 0), kw.get("max_dynamic_shared", -1),
                      kw.get("carveout", -1))


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_offline_equals_c(capi, compiled, name, opts):
    arch, oc = compiled
    k = oc.get_kernel(name)
    occ = k.occupancy_for(arch, **opts)
    res = _c_resources(capi, oc, name, arch)
    copts = _c_opts_of(capi, opts)
    assert occ.resources.registers == res.registers > 0
    for block in (32, 96, 128, 250, 256, 512, 1024):
        for smem in (0, 1024, 8192):
            want = _c_blocks(capi, arch, res, block, smem, copts)
            rep = occ.report(block, smem)
            assert occ.max_active_blocks_per_multiprocessor(block, smem) == \
                want.active_blocks_per_sm
            assert (rep.active_blocks_per_multiprocessor, rep.active_warps_per_multiprocessor,
                    rep.occupancy, rep.limiter) == \
                (want.active_blocks_per_sm, want.active_warps_per_sm, want.occupancy,
                 cuabi._occupancy.limiter_name(want.limiter))
            assert rep.block_size == block and rep.dynamic_shared_memory_size == smem
            assert rep.arch == arch and rep.live is False
    for smem in (0, 2048, 16384):
        for limit in (0, 128, 200, 1024):
            got = occ.max_potential_block_size(smem, limit)
            assert isinstance(got, cuabi.MaxPotentialBlockSizeOccupancyResult)
            assert tuple(got) == _c_best(capi, arch, res, None, smem, limit, copts)
            fits = occ.max_active_blocks_per_multiprocessor(32, smem) > 0
            assert (got.max_block_size > 0 and got.min_grid_size > 0) == fits
    for blocks, block in ((1, 128), (2, 256), (4, 256), (1, 1024), (3, 96)):
        assert _outcome(occ.available_dynamic_shared_memory_per_block, blocks, block) == \
            _outcome(_c_avail, capi, arch, res, blocks, block, copts)


def _outcome(fn, *args):
    """fn's value, or the class of the CuabiError it raised (both ways of
    asking must fail alike where the configuration cannot be resident)."""
    try:
        return fn(*args)
    except cuabi.CuabiError as e:
        return type(e)


def test_offline_callback_equals_c(capi, compiled):
    arch, oc = compiled
    for name in ("scale", "dyn", "staged<2048, double>"):
        occ = oc.get_kernel(name).occupancy_for(arch)
        res = _c_resources(capi, oc, name, arch)
        copts = _c_options(capi)
        for fn in (lambda b: 4 * b, lambda b: 48 * b, lambda b: 16384 if b > 256 else 0):
            for limit in (0, 384):
                want = _c_best(capi, arch, res, fn, 0, limit, copts)
                assert tuple(occ.max_potential_block_size(fn, limit)) == want
        # A callable giving a constant is the constant.
        assert occ.max_potential_block_size(lambda b: 6000, 0) == \
            occ.max_potential_block_size(6000, 0)


def test_callback_sees_block_sizes(compiled):
    arch, oc = compiled
    seen = []

    def need(block_size):
        seen.append(block_size)
        return 40 * block_size      # the best block is a small one: many are tried
    best = oc.get_kernel("dyn").occupancy_for(arch).max_potential_block_size(need, 0)
    assert seen and all(b % 32 == 0 for b in seen) and best.max_block_size in seen


def _cli():
    path = os.environ.get("CUABI_CLI")
    if not path:
        lib = os.environ.get("CUABI_LIBRARY", "")
        path = os.path.join(os.path.dirname(os.path.dirname(lib)), "cuabi") if lib else ""
    return path if path and os.access(path, os.X_OK) else None


@pytest.mark.parametrize("name", ["scale", "regheavy", "bounded", "staged<10240, float>",
                                  "segred<double, 1024>"])
def test_reports_equal_cli_json(compiled, tmp_path, name):
    """reports() is the table `cuabi occupancy --arch` prints."""
    cli = _cli()
    if cli is None:
        pytest.skip("the cuabi command-line tool is not next to the library (set CUABI_CLI)")
    arch, oc = compiled
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    for smem in (0, 4096):
        out = subprocess.run([cli, "occupancy", str(src), "--arch", arch, "--kernel", name,
                              "--smem", str(smem), "--json"], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        mine = oc.get_kernel(name).occupancy_for(arch).reports(smem)
        assert [r.block_size for r in mine] == [r["block_size"] for r in rows]
        for r, row in zip(mine, rows):
            assert r.active_blocks_per_multiprocessor == row["active_blocks_per_sm"]
            assert r.active_warps_per_multiprocessor == row["active_warps_per_sm"]
            assert r.occupancy == pytest.approx(row["occupancy"])
            assert r.limiter == row["limiter"] and r.arch == row["arch"]


def test_report_details(compiled):
    arch, oc = compiled
    k = oc.get_kernel("regheavy")
    occ = k.occupancy_for(arch)
    r = occ.report(256)
    assert r.limiter == "registers" and "registers" in r.limiters
    assert r.registers_per_block >= 256 * occ.resources.registers
    assert r.limit_shared_memory > r.limit_registers   # only the reserved 1 KiB
    assert 0 < r.occupancy < 1 and "registers" in str(r)
    s = oc.get_kernel("staged<10240, float>").occupancy_for(arch).report(64)
    assert s.limiter == "shared memory" and s.shared_bytes_per_block >= 40960
    b = oc.get_kernel("bounded").occupancy_for(arch)
    assert max(x.block_size for x in b.reports()) == 256
    assert b.report(512).limiter == "block size" and b.report(512).occupancy == 0
    assert occ.limits["arch"] == int(arch[3:])


def test_offline_clusters(capi, compiled):
    arch, oc = compiled
    occ = oc.get_kernel("scale").occupancy_for(arch, sm_count=132)
    cfg = cuabi.LaunchConfig(grid_blocks=(64, 1, 1), block=128, cluster=2)
    if arch == "sm_80":
        with pytest.raises(cuabi.NotSupportedError, match="cluster"):
            occ.max_potential_cluster_size(cfg)
        return
    _capi, lib, _n = capi
    res = _c_resources(capi, oc, "scale", arch)
    copts = _c_options(capi, sm_count=132)
    for cluster in (1, 2, 4, 8):
        cfg = cuabi.LaunchConfig(grid_blocks=(64, 1, 1), block=128, cluster=cluster)
        size, active = C.c_int(), C.c_int()
        lib.cuabi_occupancy_offline_max_potential_cluster_size(
            C.byref(size), arch.encode(), C.byref(res), C.byref(cfg._c), C.byref(copts))
        lib.cuabi_occupancy_offline_max_active_clusters(
            C.byref(active), arch.encode(), C.byref(res), C.byref(cfg._c), C.byref(copts))
        assert occ.max_potential_cluster_size(cfg) == size.value >= 8
        assert occ.max_active_clusters(cfg, stream=None) == active.value > 0
    # cuda.core's LaunchConfig attributes are enough.

    class Foreign:          # its grid counts clusters, as cuda.core's does
        grid, block, cluster, shmem_size, is_cooperative = 32, (128, 1, 1), 2, 0, False
    assert occ.max_active_clusters(Foreign()) == \
        occ.max_active_clusters(cuabi.LaunchConfig(grid_blocks=64, block=128, cluster=2))
    from cuabi._occupancy import _as_config
    c = _as_config(Foreign(), "test")
    assert (c.grid, c.grid_blocks, c.block, c.cluster) == ((32, 1, 1), (64, 1, 1), (128, 1, 1), (2, 1, 1))

    class Core12:           # cuda.core 1.2's spelling of the switch
        grid, block, cluster, shmem_size, cooperative_launch = 4, 64, None, 0, True
    c = _as_config(Core12(), "test")
    assert c.cooperative and c.cluster is None and c.grid_blocks == (4, 1, 1)


def test_ptx_for_two_archs():
    """A PTX image answers for every architecture (each compiled apart)."""
    if cuabi.runtime_info()["nvjitlink_status"] != 0 or \
            cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC or nvJitLink not available")
    oc = compile_source(cuabi, "compute_80", code="ptx")
    k = oc.get_kernel("regheavy")
    a = k.occupancy_for("sm_80")
    b = k.occupancy_for("sm_90")
    assert a.arch == "sm_80" and b.arch == "sm_90"
    assert a.resources.arch == 80 and b.resources.arch == 90
    assert a.report(128).active_blocks_per_multiprocessor > 0


class Boom(Exception):
    pass


def test_callback_exception_surfaces(compiled):
    arch, oc = compiled
    occ = oc.get_kernel("dyn").occupancy_for(arch)
    err = Boom("no size for this block")
    calls = []

    def need(block_size):
        calls.append(block_size)
        if len(calls) == 2:
            raise err
        return 100 * block_size     # large blocks do not fit: the search goes on
    with pytest.raises(Boom) as ei:
        occ.max_potential_block_size(need, 0)
    assert ei.value is err
    assert len(calls) == 2              # the search stops asking after the failure
    # Nothing left behind: the next call answers.
    assert occ.max_potential_block_size(lambda b: 0, 0) == occ.max_potential_block_size(0, 0)
    with pytest.raises(ZeroDivisionError):
        occ.max_potential_block_size(lambda b: 1 // 0, 0)
    with pytest.raises(TypeError):
        occ.max_potential_block_size(lambda b: "lots", 0)
    with pytest.raises(TypeError):
        occ.max_potential_block_size(lambda b: 1.5, 0)
    with pytest.raises(ValueError, match="returned -1"):
        occ.max_potential_block_size(lambda b: -1, 0)
    with pytest.raises(KeyboardInterrupt):
        occ.max_potential_block_size(lambda b: (_ for _ in ()).throw(KeyboardInterrupt()), 0)
    assert occ.max_potential_block_size(0, 0).max_block_size > 0


def test_bad_input(compiled):
    arch, oc = compiled
    k = oc.get_kernel("scale")
    with pytest.raises(cuabi.NotFoundError, match="sm_10"):
        k.occupancy_for("sm_10")
    with pytest.raises(cuabi.InvalidArgumentError, match="bogus"):
        k.occupancy_for("bogus")
    with pytest.raises(TypeError):
        k.occupancy_for(None)
    other = "sm_90" if arch == "sm_80" else "sm_80"
    with pytest.raises(cuabi.NotSupportedError, match=f"not {other}"):
        k.occupancy_for(other)             # a CUBIN answers for its own architecture
    assert k.occupancy_for(int(arch[3:])).arch == arch
    occ = k.occupancy_for(arch)
    for call in (lambda: occ.max_active_blocks_per_multiprocessor(0, 0),
                 lambda: occ.report(-32),
                 lambda: occ.max_active_blocks_per_multiprocessor(128, -1),
                 lambda: occ.max_potential_block_size(-1, 0),
                 lambda: occ.max_potential_block_size(0, -1),
                 lambda: occ.available_dynamic_shared_memory_per_block(0, 128),
                 lambda: occ.available_dynamic_shared_memory_per_block(1, 0),
                 lambda: occ.max_active_blocks_per_multiprocessor(2**40, 0),
                 lambda: occ.max_active_blocks_per_multiprocessor(128, 2**64),
                 lambda: occ.max_potential_block_size(0, 2**31),
                 lambda: k.occupancy_for(arch, sm_count=0),
                 lambda: k.occupancy_for(arch, carveout=101),
                 lambda: k.occupancy_for(arch, max_dynamic_shared=-5)):
        with pytest.raises(cuabi.InvalidArgumentError) as ei:
            call()
        assert isinstance(ei.value, ValueError)
    with pytest.raises(cuabi.InvalidArgumentError, match="max_active_blocks_per_multiprocessor"):
        occ.max_active_blocks_per_multiprocessor(0, 0)
    with pytest.raises(TypeError):
        occ.max_active_blocks_per_multiprocessor("128", 0)
    with pytest.raises(TypeError):
        occ.max_potential_block_size(None, 0)
    with pytest.raises(TypeError, match="LaunchConfig"):
        occ.max_active_clusters(object())
    # A block larger than the architecture allows fits nowhere.
    assert occ.max_active_blocks_per_multiprocessor(2048, 0) == 0
    assert occ.report(2048).limiter == "block size"


def test_closed_kernel(compiled):
    arch, oc = compiled
    k = oc.get_kernel("scale")
    occ = k.occupancy_for(arch)
    k.close()
    with pytest.raises(cuabi.ClosedHandleError):
        k.occupancy_for(arch)
    # The offline object holds the resources: it still answers.
    assert occ.max_active_blocks_per_multiprocessor(128, 0) > 0


def test_templates_by_name_expression(compiled):
    arch, oc = compiled
    for expr in TEMPLATES:
        k = oc.get_kernel(expr)
        assert k.name.startswith("_Z")
        assert k.occupancy_for(arch).max_potential_block_size(0, 0).max_block_size > 0


def test_live_layer_against_the_fake_driver():
    """Kernel.occupancy (live) with the driver calling the Python
    block-size callback, clusters, threads: fake_occupancy_checks.py in a
    process with the C tests' fake driver."""
    import sys
    path = os.environ.get("CUABI_TEST_FAKE_CUDA")
    if not path:
        build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
        path = os.path.join(build, "tests", "fixtures", ".libs", "fake_cuda_graph.so")
    if not os.path.exists(path):
        pytest.skip("tests/fixtures/.libs/fake_cuda_graph.so is not built (make check builds it)")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CUABI_DRIVER_PATH=os.path.abspath(path), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(here, "fake_occupancy_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout


def test_block_smem_callback_of_none_is_a_null_callback(capi, compiled):
    # Issue 17 item 4: block_smem_callback(None) gives what ctypes passes as
    # a NULL cuabi_block_smem_fn, so the C search uses the constant size.
    arch, oc = compiled
    _capi, lib, _n = capi
    res = _c_resources(capi, oc, "scale", arch)
    copts = _c_options(capi)
    block, grid = C.c_int(), C.c_int()
    st = lib.cuabi_occupancy_offline_max_potential_block_size(
        C.byref(block), C.byref(grid), arch.encode(), C.byref(res),
        cuabi._occupancy.block_smem_callback(None), None, 1024, 0, C.byref(copts))
    assert st == 0
    assert (grid.value, block.value) == _c_best(capi, arch, res, None, 1024, 0, copts)
