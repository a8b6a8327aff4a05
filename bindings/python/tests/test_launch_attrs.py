"""LaunchConfig's cuLaunchKernelEx attributes and TMA tensor maps from Python,
without a GPU: what each keyword writes into the C structs, the rule
violations a descriptor is refused for (checked before any driver call), and
the success paths against the do-nothing driver of bench/ in a child
process (a process that found no driver keeps that answer)."""
import ctypes as C
import os
import subprocess
import sys
import textwrap

import pytest

import cuabi
from cuabi import _capi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "TensorMapDescriptor"),
                                reason="no tensormap module")


class DeviceArray:
    """A CuPy-like device array description: nothing reads the memory."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape),
                                         "typestr": typestr, "strides": strides,
                                         "version": 3}


# ---------------------------------------------------------------- LaunchConfig

def test_plain_config_has_no_attributes():
    cfg = cuabi.LaunchConfig(4, block=128)
    assert not cfg._c.attributes            # NULL: the launch keeps its fast path
    assert cfg._c.version == _capi.cuabi_launch_config._cuabi_version_ == 2


def test_each_keyword_fills_its_field():
    w = cuabi.AccessPolicyWindow(DeviceArray(0x7000_0000, (1024,)), 4096, hit_ratio=0.25,
                                 hit_prop="persisting", miss_prop="normal")
    cfg = cuabi.LaunchConfig(
        grid=8, block=64, cluster=2, programmatic_stream_serialization=True, priority=-3,
        access_policy_window=w, preferred_cluster=4, cluster_scheduling_policy="spread",
        mem_sync_domain="remote", mem_sync_domain_map=(0, 1),
        preferred_shared_memory_carveout=50, nvlink_util_centric_scheduling=True)
    a = cfg._c.attributes.contents
    assert tuple(a.preferred_cluster) == (4, 1, 1)
    assert a.cluster_scheduling_policy == _capi.CUABI_CLUSTER_SCHEDULING_SPREAD
    assert a.programmatic_stream_serialization == 1
    assert a.priority == -3
    assert (a.access_policy_base, a.access_policy_bytes) == (0x7000_0000, 4096)
    assert a.access_policy_hit_ratio == 0.25
    assert a.access_policy_hit_property == _capi.CUABI_ACCESS_PROPERTY_PERSISTING
    assert a.access_policy_miss_property == _capi.CUABI_ACCESS_PROPERTY_NORMAL
    assert a.mem_sync_domain == _capi.CUABI_MEM_SYNC_DOMAIN_REMOTE
    assert tuple(a.mem_sync_domain_map) == (0, 1)
    assert a.preferred_shared_memory_carveout == 50
    assert a.nvlink_util_centric_scheduling == 1
    assert not a.programmatic_event and not a.launch_completion_event
    assert "priority=-3" in repr(cfg)


def test_unset_keywords_stay_unset():
    a = cuabi.LaunchConfig(1, block=1, priority=0)._c.attributes.contents
    assert a.priority == 0                       # 0 is a priority, not "unset"
    assert a.mem_sync_domain == _capi.CUABI_LAUNCH_UNSET
    assert tuple(a.mem_sync_domain_map) == (_capi.CUABI_LAUNCH_UNSET,) * 2
    assert a.preferred_shared_memory_carveout == _capi.CUABI_LAUNCH_UNSET
    assert a.access_policy_bytes == 0 and tuple(a.preferred_cluster) == (0, 0, 0)


def test_bad_keyword_values():
    with pytest.raises(ValueError, match="cluster_scheduling_policy must be one of"):
        cuabi.LaunchConfig(1, block=1, cluster_scheduling_policy="round_robin")
    with pytest.raises(ValueError, match="mem_sync_domain must be one of"):
        cuabi.LaunchConfig(1, block=1, mem_sync_domain="far")
    with pytest.raises(ValueError, match="mem_sync_domain_map is"):
        cuabi.LaunchConfig(1, block=1, mem_sync_domain_map=(0,))
    with pytest.raises(ValueError, match="miss_prop must be one of"):
        cuabi.AccessPolicyWindow(0x1000, 64, miss_prop="sticky")
    with pytest.raises(TypeError):
        cuabi.LaunchConfig(1, None, 1, 0, False, True, 0)  # extras are keywords only


# ---------------------------------------------------------------- tensor maps

def test_names_follow_cuda_core():
    assert cuabi.TensorMapSwizzle.SWIZZLE_128B == 3
    assert cuabi.TensorMapInterleave.INTERLEAVE_32B == 2
    assert cuabi.TensorMapL2Promotion.L2_256B == 3
    assert cuabi.TensorMapOOBFill.NAN_REQUEST_ZERO_FMA == 1
    assert cuabi.TensorMapDataType.BFLOAT16 == 9
    o = cuabi.TensorMapDescriptorOptions(box_dim=[8, 8], swizzle=1)
    assert o.box_dim == (8, 8) and o.swizzle is cuabi.TensorMapSwizzle.SWIZZLE_32B
    with pytest.raises(TypeError, match="from_tiled"):
        cuabi.TensorMapDescriptor()


@pytest.mark.parametrize("array, box, kw, says", [
    (DeviceArray(0x10_0008, (8, 64)), (8, 8), {}, "is not 16-byte aligned"),
    (DeviceArray(0x10_0000, (4, 5)), (4, 4), {}, "stride of 20 bytes, not a multiple of 16"),
    (DeviceArray(0x10_0000, (8, 64)), (8, 512), {}, "box[1] = 512"),
    (DeviceArray(0x10_0000, (8, 64)), (8, 3), {}, "is 12 bytes, not a multiple of 16"),
    (DeviceArray(0x10_0000, (8, 8), strides=(4, 32)), (8, 8), {}, "must be contiguous"),
    (DeviceArray(0x10_0000, (8, 64)), (8, 16), {"swizzle": cuabi.TensorMapSwizzle.SWIZZLE_32B},
     "longer than the 32B swizzle's span"),
    (DeviceArray(0x10_0000, (8, 64), "<i4"), (8, 8),
     {"oob_fill": cuabi.TensorMapOOBFill.NAN_REQUEST_ZERO_FMA}, "needs a floating-point"),
    (DeviceArray(0x10_0000, (8, 64)), (8, 8), {"element_strides": (9, 1)},
     "element_strides[0] = 9"),
    (DeviceArray(0x10_0000, (8, 64)), (8, 8), {"data_type": "float64"},
     "FLOAT64 has 8-byte elements"),
])
def test_broken_rules_are_named(array, box, kw, says):
    with pytest.raises(cuabi.TensorMapError) as e:
        cuabi.TensorMapDescriptor.from_tiled(array, box, **kw)
    assert says in str(e.value)
    assert isinstance(e.value, ValueError)
    assert "cuabi_tensormap_encode_tiled" in str(e.value)


def test_im2col_rules_are_named():
    nhwc = DeviceArray(0x10_0000, (1, 8, 8, 16))
    with pytest.raises(cuabi.TensorMapError, match="with rank 4 TMA takes -128 to 127"):
        cuabi.TensorMapDescriptor.from_im2col(nhwc, (-200, 0), (0, 0), 16, 64)
    with pytest.raises(cuabi.TensorMapError, match="pixels_per_column = 2000"):
        cuabi.TensorMapDescriptor.from_im2col(nhwc, (0, 0), (0, 0), 16, 2000)
    with pytest.raises(ValueError, match="differ in length"):
        cuabi.TensorMapDescriptor.from_im2col(nhwc, (0,), (0, 0), 16, 64)


def test_argument_errors():
    a = DeviceArray(0x10_0000, (8, 64))
    with pytest.raises(TypeError, match="box_dim is required"):
        cuabi.TensorMapDescriptor.from_tiled(a)
    with pytest.raises(TypeError, match="not both"):
        cuabi.TensorMapDescriptor.from_tiled(
            a, (8, 8), options=cuabi.TensorMapDescriptorOptions(box_dim=(8, 8)))
    with pytest.raises(ValueError, match="element_strides has 1 entry; 2 expected"):
        cuabi.TensorMapDescriptor.from_tiled(a, (8, 8), element_strides=(1,))
    with pytest.raises(ValueError, match="has no TMA element type"):
        cuabi.TensorMapDescriptor.from_tiled(a, (8, 8), data_type="complex64")
    host = cuabi.from_dlpack(pytest.importorskip("numpy").zeros((8, 64), "float32"))
    with pytest.raises(cuabi.TensorMapError, match="host memory"):
        host.as_tensor_map((8, 8))


# ------------------------------------------- success paths, do-nothing driver

def _fake_driver():
    lib = os.environ.get("CUABI_LIBRARY", "")
    fake = os.path.join(os.path.dirname(os.path.dirname(lib)), "bench", ".libs",
                        "fake_libcuda.so")
    return fake if lib and os.path.exists(fake) else None


CHILD = textwrap.dedent(r'''
    import ctypes as C, sys
    sys.path.insert(0, sys.argv[1])
    import cuabi
    from cuabi import _capi

    class DeviceArray:
        def __init__(self, ptr, shape, typestr="<f4"):
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                             "typestr": typestr, "version": 3}

    a = DeviceArray(0x10_0000, (64, 96))
    tm = cuabi.TensorMapDescriptor.from_tiled(a, (16, 32), swizzle=cuabi.TensorMapSwizzle.SWIZZLE_128B)
    i = tm.info
    assert (i.rank, i.address, tuple(i.shape[:2]), tuple(i.box[:2])) == (2, 0x10_0000, (64, 96), (16, 32))
    assert tuple(i.byte_strides[:2]) == (384, 4) and tm.data_type is cuabi.TensorMapDataType.FLOAT32
    assert len(tm.tobytes()) == 128 and bytes(tm) == tm.tobytes()
    assert "tiled, rank=2, dtype=FLOAT32, swizzle=SWIZZLE_128B" in repr(tm)
    v = cuabi.from_dlpack(DeviceArray(0x20_0000, (64, 96)))
    tm2 = v.as_tensor_map(options={"box_dim": (8, 32), "data_type": "float32"})
    tm.replace_address(DeviceArray(0x30_0000, (64, 96)))
    assert tm.info.address == 0x30_0000
    try:
        tm.replace_address(DeviceArray(0x30_0000, (32, 96)))
        raise SystemExit("a different shape was accepted")
    except cuabi.TensorMapError as e:
        assert "only the address may change" in str(e)
    img = cuabi.TensorMapDescriptor.from_im2col(DeviceArray(0x10_0000, (1, 8, 8, 16), "<f2"),
                                                (-1, -1), (1, 1), 16, 64)
    assert img.info.kind == _capi.CUABI_TENSORMAP_IM2COL
    # a kernel argument by value: a tensormap slot, and a 128-byte raw slot
    p = cuabi.ArgPack("ptr, tensormap")
    p[1] = tm
    got = (C.c_char * 128)()
    cuabi._lib.lib.cuabi_argpack_get_bytes(got, 128, p, 1)
    assert bytes(got) == tm.tobytes()
    # events in a launch configuration: their handles, kept alive by the config
    ev = cuabi.Event(timing=False)
    cfg = cuabi.LaunchConfig(1, block=32, programmatic_event=ev, launch_completion_event=ev,
                             programmatic_event_trigger_at_block_start=True)
    at = cfg._c.attributes.contents
    assert at.programmatic_event == ev.cuabi_handle == at.launch_completion_event
    assert at.programmatic_event_trigger_at_block_start == 1
    for t in (tm, tm2, img):
        t.close()
    print("ok")
''')


def test_success_paths_with_the_do_nothing_driver(tmp_path):
    fake = _fake_driver()
    if fake is None:
        pytest.skip("bench/.libs/fake_libcuda.so is not built")
    env = dict(os.environ, CUABI_DRIVER_PATH=fake)
    # the package this run tests (the compiled one when CUABI_BACKEND=compiled)
    here = os.environ.get("CUABI_PYTHON_PATH") or \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", CHILD, here], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
