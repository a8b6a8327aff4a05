"""cuda.core 1.2's names mean what they mean in cuda.core (issue 24 item 1):
here what needs no driver, and the rest against the C tests' fake driver in
a process of its own (fake_cuda_core_checks.py). No GPU needed; the same
meanings on a GPU, side by side with cuda.core: test_gpu_cuda_core_parity.py."""
import ctypes as C
import os
import subprocess

import numpy as np
import pytest

from fake_driver_run import run_checks

import cuabi

HERE = os.path.dirname(os.path.abspath(__file__))


def test_meanings_against_the_fake_driver():
    run_checks("fake_cuda_core_checks.py", unset=("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM",))


def test_explicit_graphs_against_the_fake_driver():
    """cuda.core 1.2's GraphDefinition / GraphNode / GraphCondition and
    GraphBuilder's split / join / callback (fake_graphdef_checks.py)."""
    run_checks("fake_graphdef_checks.py", unset=("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM",))


def test_explicit_graph_signatures_are_cuda_cores():
    """The builders take cuda.core 1.2's parameters (graph/_graph_node.pyi)."""
    import inspect
    from cuabi.graph import GraphBuilder, GraphDefinition, GraphNode

    def params(f):
        return [(p.name, p.kind.name, p.default) for p in inspect.signature(f).parameters.values()]
    E = inspect.Parameter.empty
    assert params(GraphNode.allocate)[1:] == [
        ("size", "POSITIONAL_OR_KEYWORD", E), ("device", "KEYWORD_ONLY", None),
        ("memory_type", "KEYWORD_ONLY", "device"), ("peer_access", "KEYWORD_ONLY", None)]
    assert params(GraphNode.memset)[1:] == [
        ("dst", "POSITIONAL_OR_KEYWORD", E), ("value", "POSITIONAL_OR_KEYWORD", E),
        ("width", "POSITIONAL_OR_KEYWORD", E), ("height", "POSITIONAL_OR_KEYWORD", 1),
        ("pitch", "POSITIONAL_OR_KEYWORD", 0), ("dst_owner", "KEYWORD_ONLY", None)]
    assert params(GraphNode.memcpy)[1:] == [
        ("dst", "POSITIONAL_OR_KEYWORD", E), ("src", "POSITIONAL_OR_KEYWORD", E),
        ("size", "POSITIONAL_OR_KEYWORD", E), ("dst_owner", "KEYWORD_ONLY", None),
        ("src_owner", "KEYWORD_ONLY", None)]
    assert params(GraphNode.callback)[1:] == [("fn", "POSITIONAL_OR_KEYWORD", E),
                                              ("user_data", "KEYWORD_ONLY", None)]
    assert params(GraphNode.switch)[1:] == [("condition", "POSITIONAL_OR_KEYWORD", E),
                                            ("count", "POSITIONAL_OR_KEYWORD", E)]
    assert params(GraphDefinition.create_condition)[1:] == [
        ("default_value", "POSITIONAL_OR_KEYWORD", None)]
    assert params(GraphNode.launch)[1:] == [("config", "POSITIONAL_OR_KEYWORD", E),
                                            ("kernel", "POSITIONAL_OR_KEYWORD", E),
                                            ("args", "VAR_POSITIONAL", E)]
    assert params(GraphNode.join)[1:] == [("nodes", "VAR_POSITIONAL", E)]
    assert isinstance(inspect.getattr_static(GraphBuilder, "join"), staticmethod)
    assert params(GraphBuilder.split)[1:] == [("count", "POSITIONAL_OR_KEYWORD", E)]
    for name in ("is_valid", "pred", "succ", "type", "graph", "handle"):
        assert isinstance(inspect.getattr_static(GraphNode, name), property), name
    assert isinstance(GraphBuilder.is_join_required, property)
    assert callable(GraphDefinition.nodes) and callable(GraphDefinition.edges)


# ---- the names (cuda.core 1.2's top level and submodules)

TOP = ("Buffer", "ComputeCapability", "Context", "Device", "DeviceMemoryResource",
       "DeviceMemoryResourceOptions", "DeviceProperties", "Event", "EventOptions",
       "GraphMemoryResource", "Kernel", "LaunchConfig", "LegacyPinnedMemoryResource", "Linker",
       "LinkerOptions", "MemoryResource", "ObjectCode", "PinnedMemoryResource",
       "PinnedMemoryResourceOptions", "Program", "ProgramOptions", "Stream", "StreamOptions",
       "TensorMapDescriptor", "TensorMapDescriptorOptions", "host_launch", "launch",
       "StridedMemoryView", "args_viewable_as_strided_memory", "IPCAllocationHandle")


@pytest.mark.parametrize("name", TOP)
def test_cuda_core_top_level_names(name):
    assert name in dir(cuabi)
    assert getattr(cuabi, name) is not None


def test_submodules_import_as_cuda_core_writes_them():
    from cuabi.utils import StridedMemoryView, args_viewable_as_strided_memory
    from cuabi.graph import Graph, GraphBuilder, GraphCompleteOptions, GraphDefinition
    assert StridedMemoryView is cuabi.StridedMemoryView
    assert args_viewable_as_strided_memory is cuabi.args_viewable_as_strided_memory
    assert Graph is cuabi.GraphExec and GraphDefinition is cuabi.Graph
    assert GraphBuilder is cuabi.GraphBuilder and GraphCompleteOptions is cuabi.CompleteOptions
    import cuabi.graph as cg
    for name in ("GraphCondition", "AllocNode", "ChildGraphNode", "ConditionalNode", "EmptyNode",
                 "EventRecordNode", "EventWaitNode", "FreeNode", "HostCallbackNode",
                 "IfElseNode", "IfNode", "KernelNode", "MemcpyNode", "MemsetNode", "SwitchNode",
                 "WhileNode"):
        assert name in cg.__all__ and getattr(cg, name) is not None
    assert issubclass(cg.KernelNode, cg.GraphNode) and issubclass(cg.IfNode, cg.ConditionalNode)
    import cuabi as core
    assert core.utils.StridedMemoryView is StridedMemoryView and core.graph.Graph is Graph


def test_program_caches_take_cuda_cores_arguments():
    """cuda.core.utils's program caches: the names, and the signatures of
    cuda.core 1.2 (their behaviour: test_program_cache.py)."""
    import inspect
    from cuabi.utils import (FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource,
                             make_program_cache_key)

    def params(f):
        return [(p.name, p.kind.name, p.default) for p in inspect.signature(f).parameters.values()]
    E = inspect.Parameter.empty
    assert params(FileStreamProgramCache) == [("path", "POSITIONAL_OR_KEYWORD", None),
                                              ("max_size_bytes", "KEYWORD_ONLY", None)]
    assert params(InMemoryProgramCache) == [("max_size_bytes", "KEYWORD_ONLY", None)]
    assert params(make_program_cache_key) == [
        ("code", "KEYWORD_ONLY", E), ("code_type", "KEYWORD_ONLY", E),
        ("options", "KEYWORD_ONLY", E), ("target_type", "KEYWORD_ONLY", E),
        ("name_expressions", "KEYWORD_ONLY", ()), ("extra_digest", "KEYWORD_ONLY", None)]
    assert ProgramCacheResource.__abstractmethods__ == {
        "__getitem__", "__setitem__", "__delitem__", "__len__", "clear"}
    for m in ("get", "update", "close", "__enter__", "__exit__"):
        assert callable(getattr(ProgramCacheResource, m))
    assert not hasattr(ProgramCacheResource, "__contains__")
    cache = inspect.signature(cuabi.Program.compile).parameters["cache"]
    assert cache.kind is inspect.Parameter.KEYWORD_ONLY and cache.default is None


def test_the_renamed_meanings_are_there():
    """Every cuabi meaning that moved (docs/CHANGELOG.md) has its new name."""
    assert isinstance(cuabi.Device.sm_arch, property)
    assert callable(cuabi.Device.legacy_default_stream)
    assert isinstance(cuabi.Device.context_handle, property)
    assert callable(cuabi.MemoryResource.allocate_ptr)
    assert callable(cuabi.MemoryResource.deallocate_ptr)
    assert callable(cuabi.Buffer.to_bytes)
    assert isinstance(cuabi.View.dtype_name, property)
    assert "grid_blocks" in cuabi.LaunchConfig.__slots__
    for cls in (cuabi.Stream, cuabi.Event, cuabi.Buffer, cuabi.View, cuabi.Graph):
        assert isinstance(cls.cuabi_handle, property)


# ---- views (numpy: no driver)

def test_view_dtype_is_a_numpy_dtype():
    v = cuabi.View(np.arange(6, dtype=np.int32))
    assert v.dtype == np.int32 and isinstance(v.dtype, np.dtype)
    assert v.dtype == "int32" and v.dtype_name == "int32"
    assert v.device_id == -1 and not v.is_device_accessible


def test_strided_memory_view_of_numpy():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    for v in (cuabi.StridedMemoryView(a, -1), cuabi.StridedMemoryView(a, None),
              cuabi.StridedMemoryView.from_dlpack(a, -1),
              cuabi.StridedMemoryView.from_array_interface(a),
              cuabi.StridedMemoryView.from_any_interface(a, -1)):
        assert isinstance(v, cuabi.StridedMemoryView) and isinstance(v, cuabi.View)
        assert v.ptr == a.ctypes.data and v.shape == (3, 4) and v.size == 12
        assert v.strides == (4, 1) and v.dtype == np.int16
        assert v.device_id == -1 and not v.is_device_accessible and not v.readonly
        assert v.exporting_obj is a
    t = cuabi.StridedMemoryView(a[:, ::2], -1)
    assert t.shape == (3, 2) and t.strides == (4, 2)
    ro = a.copy()
    ro.flags.writeable = False
    assert cuabi.StridedMemoryView(ro, -1).readonly


def test_strided_memory_view_refusals():
    with pytest.raises(BufferError):
        cuabi.StridedMemoryView(object(), -1)
    with pytest.raises(BufferError):
        cuabi.StridedMemoryView.from_dlpack(object())
    with pytest.raises(BufferError):
        cuabi.StridedMemoryView.from_cuda_array_interface(np.zeros(2))
    with pytest.raises(BufferError):
        cuabi.StridedMemoryView.from_array_interface(object())
    with pytest.raises(TypeError):
        cuabi.StridedMemoryView()


def test_strided_memory_view_from_a_host_buffer():
    with cuabi.MemoryResource.host() as r:
        b = cuabi.Buffer(48, r)
        b.copy_from(np.arange(12, dtype=np.float32))
        v = cuabi.StridedMemoryView.from_buffer(b, (3, 4), dtype=np.dtype(np.float32))
        assert v.shape == (3, 4) and v.dtype == np.float32 and v.exporting_obj is b
        assert np.from_dlpack(v).tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
        w = cuabi.StridedMemoryView.from_buffer(b, (4, 3), (1, 4), itemsize=4, is_readonly=True)
        assert w.dtype == np.uint32 and w.strides == (1, 4) and w.readonly
        with pytest.raises(ValueError):
            cuabi.StridedMemoryView.from_buffer(b, (3,), itemsize=8, dtype=np.int32)
        with pytest.raises(ValueError):
            cuabi.StridedMemoryView.from_buffer(b, (3,))


def test_args_viewable_as_strided_memory():
    seen = []

    @cuabi.args_viewable_as_strided_memory((1,))
    def f(x, arr, stream_ptr):
        v = arr.view(stream_ptr)
        seen.append((x, type(v), v.shape, v.dtype))
        return v.ptr

    a = np.zeros(5, np.float64)
    assert f("k", a, -1) == a.ctypes.data
    assert seen == [("k", cuabi.StridedMemoryView, (5,), np.float64)]
    assert f.__name__ == "f"


# ---- programs and links (NVRTC / nvJitLink: no driver)

def _needs(lib):
    if cuabi.runtime_info()[f"{lib}_status"] != 0:
        pytest.skip(f"{lib} not available")


@pytest.fixture
def _cache(tmp_path):
    cuabi.cache.set_directory(str(tmp_path / "cache"))
    yield
    cuabi.cache.set_directory(None)


def test_program_takes_a_dict_and_cuda_cores_arch(_cache):
    _needs("nvrtc")
    src = 'extern "C" __global__ void k(int *p) { *p = 1; }'
    for prog in (cuabi.Program(src, "c++", {"arch": "sm_90", "std": "c++17"}),
                 cuabi.Program(src, "c++", options={"arch": "90"}),
                 cuabi.Program(src, code_type="c++",
                               options=cuabi.ProgramOptions(std="c++17", arch="sm_90"))):
        obj = prog.compile("cubin")
        assert obj.code_type == "cubin" and obj.arch == 90
    assert cuabi.Program(src, "c++", {"arch": "90"}).compile("ptx").code_type == "ptx"


def test_linker_options_take_cuda_cores_names():
    o = cuabi.LinkerOptions(link_time_optimization=True, optimization_level=3, lineinfo=True,
                            max_register_count=32, kernels_used=["k"], ptxas_options="-v",
                            no_cache=True)
    assert o.lto and o.optimization == 3 and o.line_info and o.max_registers == 32
    assert not o.cache and "-kernels-used=k" in o.extra_options
    assert "-Xptxas=-v" in o.extra_options
    assert o.link_time_optimization is None       # folded into lto


def test_ltoir_link_with_link_time_optimization(_cache):
    _needs("nvrtc")
    _needs("nvjitlink")
    main = ('extern __device__ void art(float *d);\n'
            'extern "C" __global__ void main_workflow(float *d) { art(d); }')
    user = '__device__ void art(float *d) { d[threadIdx.x] = 1.0f; }'
    a = cuabi.Program(main, "c++", cuabi.ProgramOptions(link_time_optimization=True,
                                                         arch="sm_90")).compile("ltoir")
    b = cuabi.Program(user, "c++", {"link_time_optimization": True, "arch": "90"}) \
        .compile("ltoir")
    out = cuabi.Linker(a, b, options=cuabi.LinkerOptions(arch="90",
                                                         link_time_optimization=True)) \
        .link("cubin")
    assert out.code_type == "cubin" and out.arch == 90


def test_launch_config_cluster_meaning_needs_no_driver():
    c = cuabi.LaunchConfig(grid=(2, 3), cluster=(2, 1), block=64)
    assert c.grid == (2, 3, 1) and c.grid_blocks == (4, 3, 1)
    assert "cluster=(2, 1, 1)" in repr(c)


def test_launch_config_positional_order_is_cuda_cores():
    """cuda.core 1.2.2: LaunchConfig(grid=None, cluster=None, block=None,
    shmem_size=None, is_cooperative=False, programmatic_stream_serialization=False)."""
    import inspect
    params = list(inspect.signature(cuabi.LaunchConfig).parameters.values())
    assert [p.name for p in params[:6]] == ["grid", "cluster", "block", "shmem_size",
                                            "is_cooperative",
                                            "programmatic_stream_serialization"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params[:6])
    assert [p.default for p in params[:6]] == [None, None, None, None, False, False]
    # everything after them is a keyword (cuabi's aliases and attributes)
    assert all(p.kind is p.KEYWORD_ONLY for p in params[6:])
    c = cuabi.LaunchConfig(4, 2, 64, 256, True)
    assert (c.grid, c.cluster, c.block) == ((4, 1, 1), (2, 1, 1), (64, 1, 1))
    assert c.shmem_size == 256 and c.is_cooperative is True
    assert not c.programmatic_stream_serialization
    assert cuabi.LaunchConfig(4, None, 64, 0, False, True).programmatic_stream_serialization
    assert c.grid_blocks == (8, 1, 1)           # the grid counts clusters
    assert tuple(c._c.grid) == (8, 1, 1) and tuple(c._c.cluster) == (2, 1, 1)
    assert tuple(c._c.block) == (64, 1, 1) and c._c.dynamic_shared_bytes == 256
    assert c._c.cooperative == 1
    # cuda.core programs often pass the cluster as None positionally
    d = cuabi.LaunchConfig((8, 2), None, (32, 4))
    assert (d.grid, d.cluster, d.block) == ((8, 2, 1), None, (32, 4, 1))
    assert d.shmem_size == 0 and d.is_cooperative is False
    assert tuple(d._c.cluster) == (0, 0, 0)
    assert cuabi.LaunchConfig(grid=1, block=1).cluster is None
    # the same keywords mean the same in either order
    assert cuabi.LaunchConfig(block=64, cluster=2, grid=4) == c.__class__(4, 2, 64)
    assert repr(d) == ("LaunchConfig(grid=(8, 2, 1), cluster=None, block=(32, 4, 1), "
                       "shmem_size=0, is_cooperative=False, "
                       "programmatic_stream_serialization=False)")


def test_launch_config_keyword_aliases_still_work():
    a = cuabi.LaunchConfig(grid=2, block=64, shared_mem=128, cooperative=True)
    b = cuabi.LaunchConfig(2, None, 64, shmem_size=128, cooperative_launch=True)
    c = cuabi.LaunchConfig(grid=2, block=64, shmem_size=128, is_cooperative=True)
    assert a == b == c and hash(a) == hash(b) == hash(c)
    for x in (a, b, c):
        assert x.shared_mem == x.shmem_size == 128
        assert x.cooperative is x.cooperative_launch is x.is_cooperative is True
    # alike aliases are fine; no cluster, grid_blocks is the grid
    assert cuabi.LaunchConfig(1, cooperative_launch=True, cooperative=True).cooperative
    assert cuabi.LaunchConfig(grid_blocks=6, block=32).grid == (6, 1, 1)
    # the defaults cuabi keeps (cuda.core requires grid and block)
    e = cuabi.LaunchConfig()
    assert (e.grid, e.cluster, e.block, e.shmem_size) == ((1, 1, 1), None, (1, 1, 1), 0)
    assert cuabi.LaunchConfig(4, priority=-1) != cuabi.LaunchConfig(4)


def test_launch_config_bad_combinations_are_cuda_core_like():
    # cuda.core: ValueError("LaunchConfig.grid value must be >= 1 (got 0)")
    for kw in ("grid", "cluster", "block"):
        for bad in (0, (1, 0), (2, 2, 0)):
            with pytest.raises(ValueError, match=f"LaunchConfig.{kw}"):
                cuabi.LaunchConfig(**{kw: bad})
        with pytest.raises(ValueError, match=f"LaunchConfig.{kw}"):
            cuabi.LaunchConfig(**{kw: (1, 1, 1, 1)})        # more than 3
    with pytest.raises(ValueError, match="shmem_size or shared_mem"):
        cuabi.LaunchConfig(1, None, 1, 16, shared_mem=16)
    with pytest.raises(ValueError, match="disagree"):
        cuabi.LaunchConfig(1, None, 1, 0, True, cooperative=False)
    with pytest.raises(ValueError, match="disagree"):
        cuabi.LaunchConfig(is_cooperative=True, cooperative=False)
    with pytest.raises(ValueError, match="LaunchConfig.shmem_size"):
        cuabi.LaunchConfig(1, None, 1, -1)
    with pytest.raises(ValueError, match="not both"):
        cuabi.LaunchConfig(4, 2, 32, grid_blocks=8)
    with pytest.raises(TypeError):              # a seventh positional: extras are keywords
        cuabi.LaunchConfig(1, None, 1, 0, False, True, 0)
    with pytest.raises(TypeError):              # given twice
        cuabi.LaunchConfig(1, 2, 3, block=4)


def test_user_resources_override_allocate_ptr():
    class Host(cuabi.MemoryResource):
        def __init__(self):
            self.live = {}
            super().__init__(kind="host", stream_ordered=False)

        def allocate_ptr(self, size, alignment, stream):
            b = C.create_string_buffer(size)
            self.live[C.addressof(b)] = b
            return C.addressof(b)

        def deallocate_ptr(self, ptr, size, alignment, stream):
            del self.live[ptr]

    r = Host()
    buf = r.allocate(32)                       # cuda.core's allocate: a Buffer
    assert isinstance(buf, cuabi.Buffer) and buf.ptr in r.live
    assert buf.memory_resource is r and buf.is_host_accessible and buf.device_id == -1
    buf.close()
    assert not r.live

    class Old(cuabi.MemoryResource):
        def allocate(self, size, alignment, stream):       # cuabi's former protocol
            return 0
    with pytest.raises(TypeError, match="allocate_ptr"):
        Old()


# ---- docs/python.md's table tells the truth

def _table_rows():
    path = os.path.join(HERE, "..", "..", "..", "docs", "python.md")
    if not os.path.exists(path):
        pytest.skip("docs/python.md is not next to the package (an installed wheel)")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index("### Every cuda.core 1.2 name")
    rows = []
    for line in text[start:].splitlines():
        if line.startswith("| `"):
            name, status = line.split("|")[1:3]
            rows.append((name.strip().strip("`"), status.strip()))
        elif line.startswith("## "):
            break
    return rows


def test_the_tables_counts_are_the_tables():
    """The paragraph above the table counts its rows (kept true by hand
    after every branch that turns rows into "same")."""
    import re
    rows = _table_rows()
    def count(rs):
        return tuple(sum(1 for _, st in rs if st.startswith(k)) for k in ("same", "alias", "not yet"))
    top = [r for r in rows if r[0].startswith("cuda.core")]
    members = [r for r in rows if not r[0].startswith("cuda.core")]
    path = os.path.join(HERE, "..", "..", "..", "docs", "python.md")
    with open(path, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    m = re.search(r"(\d+) names: (\d+) same, (\d+) alias, (\d+) not yet; (\d+) class members: "
                  r"(\d+) same, (\d+) alias, (\d+) not yet \((\d+) in all: (\d+) same[;)]", text)
    assert m, "docs/python.md: the counts paragraph is not where it was"
    said = tuple(int(x) for x in m.groups())
    same_top, alias_top, ny_top = count(top)
    same_m, alias_m, ny_m = count(members)
    real = (len(top), same_top, alias_top, ny_top, len(members), same_m, alias_m, ny_m,
            len(rows), same_top + same_m)
    assert said == real, f"docs/python.md says {said}, the table has {real}"


_CLASS = {"Graph": "GraphExec", "GraphDefinition": "Graph",
          "GraphCompleteOptions": "CompleteOptions"}


def test_every_name_the_table_calls_same_is_there():
    rows = _table_rows()
    assert len(rows) > 300
    missing = []
    for name, status in rows:
        if not status.startswith("same"):
            assert status.startswith(("alias", "not yet")), (name, status)
            continue
        if name.startswith("cuda.core."):
            path = name[len("cuda.core."):].split(".")
            obj = cuabi
            try:
                for p in path:
                    obj = getattr(obj, p) if p not in ("LEGACY_DEFAULT_STREAM",
                                                       "PER_THREAD_DEFAULT_STREAM") else obj
            except AttributeError:
                missing.append(name)
            continue
        cls, member = name.split(".", 1)
        c = getattr(cuabi, _CLASS.get(cls, cls))
        import dataclasses
        names = set(dir(c)) | set(getattr(c, "__slots__", ()))
        if dataclasses.is_dataclass(c):
            names |= {f.name for f in dataclasses.fields(c)}
        if member not in names and (cls, member) != ("GraphBuilder", "stream"):
            missing.append(name)
    assert not missing, missing


def test_more_program_options_become_nvrtc_flags():
    o = cuabi.ProgramOptions(diag_suppress=[177, 550], split_compile=0, pch=True,
                             no_cache=True, device_float128=True, time="t.csv")
    assert "--diag-suppress=177" in o.extra_options and "--diag-suppress=550" in o.extra_options
    assert "--split-compile=0" in o.extra_options
    assert "--device-float128" in o.extra_options and "--time=t.csv" in o.extra_options
    assert not o.cache
    # the PCH options are fields of the C options struct (version 3), rendered there
    assert "--pch" not in o.extra_options and o.pch
    assert b"--pch" in o.as_bytes("nvrtc")


def test_event_and_stream_facts_are_cuda_cores():
    for cls in (cuabi.Event, cuabi.Stream, cuabi.Buffer, cuabi.Program, cuabi.Linker):
        assert isinstance(cls.is_closed, property)
    for name in ("is_timing_enabled", "is_blocking_sync", "is_ipc_enabled", "device", "context",
                 "is_done", "handle"):
        assert isinstance(getattr(cuabi.Event, name), property)
    assert callable(cuabi.Linker.get_error_log) and callable(cuabi.Linker.get_info_log)


# ---- cuda.core.typing and the texture options (no driver)

def test_typing_has_cuda_cores_names_and_values():
    from cuabi import typing as t
    assert cuabi.typing is t
    names = ("AddressModeType ArrayFormatType CompilerBackendType DevicePointerType "
             "DeviceResourcesType FilterModeType GraphConditionalType GraphMemoryType "
             "IsStreamType ManagedMemoryLocationType ObjectCodeFormatType PCHStatusType "
             "ProcessStateType ReadModeType SourceCodeType VirtualMemoryAccessType "
             "VirtualMemoryAllocationType VirtualMemoryGranularityType VirtualMemoryHandleType "
             "VirtualMemoryLocationType WorkqueueSharingScopeType").split()
    assert sorted(t.__all__) == sorted(names)
    assert [m.value for m in t.ArrayFormatType] == ["uint8", "uint16", "uint32", "int8",
                                                    "int16", "int32", "float16", "float32"]
    assert t.CompilerBackendType.NVJITLINK == "nvJitLink" and t.SourceCodeType.CXX == "c++"
    assert t.VirtualMemoryAccessType.READ_WRITE == "rw" and t.AddressModeType("border")
    assert str(t.FilterModeType.LINEAR) == "linear" and isinstance(t.ReadModeType.ELEMENT_TYPE, str)
    assert t.ObjectCodeFormatType.LIBRARY == "library" and t.PCHStatusType.FAILED == "failed"
    assert isinstance(cuabi.Stream.__new__(cuabi.Stream), t.IsStreamType)
    assert not isinstance(object(), t.IsStreamType)
    # cuabi takes the members where it takes cuda.core's strings
    from cuabi import _compile
    assert _compile.code_type(t.ObjectCodeFormatType.FATBIN) == _compile.code_type("fatbin")


def test_texture_options_check_and_normalize_like_cuda_core():
    from cuabi.texture import MipmappedArrayOptions, OpaqueArrayOptions, TextureObjectOptions
    from cuabi.typing import AddressModeType, ArrayFormatType, FilterModeType, ReadModeType
    o = OpaqueArrayOptions(shape=[8, 4], format=np.float16, num_channels=2)
    assert o.shape == (8, 4) and o.format is ArrayFormatType.FLOAT16
    assert o.num_channels == 2 and o.is_surface_load_store is False
    assert OpaqueArrayOptions((3,), "uint8", 4, True).format is ArrayFormatType.UINT8
    assert OpaqueArrayOptions((3,), np.dtype("int32"), 1).format is ArrayFormatType.INT32
    for bad in (dict(shape=(), format="uint8", num_channels=1),
                dict(shape=(1, 2, 3, 4), format="uint8", num_channels=1),
                dict(shape=(0, 2), format="uint8", num_channels=1),
                dict(shape=(2,), format="float64", num_channels=1),
                dict(shape=(2,), format="uint8", num_channels=3)):
        with pytest.raises(ValueError):
            OpaqueArrayOptions(**bad)
    with pytest.raises(TypeError):
        OpaqueArrayOptions(shape=5, format="uint8", num_channels=1)
    m = MipmappedArrayOptions(shape=(16, 16), format=ArrayFormatType.FLOAT32, num_channels=1,
                              num_levels=5)
    assert m.num_levels == 5 and m.shape == (16, 16)
    with pytest.raises(ValueError):
        MipmappedArrayOptions(shape=(16,), format="float32", num_channels=1, num_levels=0)
    t = TextureObjectOptions()
    assert t.address_mode is AddressModeType.CLAMP and t.filter_mode is FilterModeType.POINT
    assert t.read_mode is ReadModeType.ELEMENT_TYPE and t.border_color is None
    t = TextureObjectOptions(address_mode=("wrap", AddressModeType.MIRROR), filter_mode="linear",
                             read_mode="normalized_float", border_color=[0, 0, 0, 1])
    assert t.address_mode == (AddressModeType.WRAP, AddressModeType.MIRROR)
    assert t.filter_mode is FilterModeType.LINEAR and t.border_color == (0.0, 0.0, 0.0, 1.0)
    d = t._descriptor()
    assert d.address_mode == (cuabi.AddressMode.WRAP, cuabi.AddressMode.MIRROR)
    assert d.read_mode == cuabi.ReadMode.NORMALIZED_FLOAT
    for bad in (dict(address_mode="sideways"), dict(address_mode=("wrap",) * 4),
                dict(filter_mode="cubic"), dict(border_color=(1, 2)),
                dict(max_anisotropy=-1)):
        with pytest.raises(ValueError):
            TextureObjectOptions(**bad)


# ---- ObjectCode / Program members (NVRTC, nvJitLink, nvcc for host objects: no driver)

def test_object_code_name_and_symbol_mapping(_cache):
    _needs("nvrtc")
    src = ('template <typename T> __global__ void t(T *p) { *p = T(1); }\n'
           'extern "C" __global__ void k(int *p) { *p = 2; }\n')
    prog = cuabi.Program(src, "c++", {"arch": "sm_90"})
    code = prog.compile("cubin", name_expressions=["t<float>", "t<int>"])
    assert code.name == "default_program"                       # ProgramOptions.name's default
    m = code.symbol_mapping
    assert m == {"t<float>": "_Z1tIfEvPT_", "t<int>": "_Z1tIiEvPT_"}
    m["x"] = "y"
    assert "x" not in code.symbol_mapping                        # a copy
    named = cuabi.Program(src, "c++", {"arch": "sm_90", "name": "mine"}).compile("cubin")
    assert named.name == "mine" and named.symbol_mapping == {}
    raw = bytes(code)
    o = cuabi.ObjectCode.from_cubin(raw, name="loaded", symbol_mapping={"t<float>": "_Z1tIfEvPT_"})
    assert o.name == "loaded" and o.symbol_mapping == {"t<float>": "_Z1tIfEvPT_"}
    assert cuabi.ObjectCode.from_cubin(raw).name == ""
    with pytest.raises(TypeError):
        cuabi.ObjectCode.from_cubin(raw, symbol_mapping=[("a", "b")])


def test_program_backend():
    from cuabi.typing import CompilerBackendType
    assert cuabi.Program("__global__ void k() {}", "c++").backend is CompilerBackendType.NVRTC
    assert cuabi.Program(".version 8.0\n.target sm_90\n.address_size 64\n", "ptx").backend == \
        "nvJitLink"
    _needs("nvvm")
    assert cuabi.Program(b"BC\xc0\xde", "nvvm").backend is CompilerBackendType.NVVM


def test_object_code_from_object_and_library(tmp_path, _cache):
    """A host object and a host library made by nvcc -rdc (device code
    inside) link with nvJitLink into a CUBIN; neither loads."""
    _needs("nvjitlink")
    import shutil
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None or shutil.which("ar") is None:
        pytest.skip("nvcc / ar not found")
    (tmp_path / "a.cu").write_text('extern __device__ int twice(int);\n'
                                   'extern "C" __global__ void k(int *p) { *p = twice(*p); }\n')
    (tmp_path / "b.cu").write_text('__device__ int twice(int x) { return 2 * x; }\n')
    # the tools run without a sanitizer build's preloaded runtime (nvcc crashes under it)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    for n in ("a", "b"):
        subprocess.run([nvcc, "-c", "-rdc=true", "-arch=sm_90", str(tmp_path / f"{n}.cu"),
                        "-o", str(tmp_path / f"{n}.o")], check=True, timeout=300, env=env)
    subprocess.run(["ar", "rcs", str(tmp_path / "libb.a"), str(tmp_path / "b.o")], check=True,
                   env=env)
    a = cuabi.ObjectCode.from_object(str(tmp_path / "a.o"), name="a")
    b = cuabi.ObjectCode.from_library((tmp_path / "libb.a").read_bytes(), name="b",
                                      symbol_mapping={"tw": "twice"})
    assert (a.code_type, a.name, b.code_type, b.name) == ("object", "a", "library", "b")
    assert b.symbol_mapping == {"tw": "twice"}
    assert bytes(b) == (tmp_path / "libb.a").read_bytes()
    out = cuabi.Linker(a, b, options=cuabi.LinkerOptions(arch="sm_90", name="linked")).link("cubin")
    assert out.code_type == "cubin" and out.name == "linked" and out.kernel_names == ["k"]
    with pytest.raises(NotImplementedError, match="linked"):
        a.get_kernel("k")                                     # objects are linked, not loaded
    with pytest.raises(cuabi.CuabiError):
        cuabi.ObjectCode.from_library(b"not an archive")
    with pytest.raises(cuabi.CuabiError):
        cuabi.ObjectCode.from_object(b".version 8.0\n.target sm_90\n")


# ---- compile-side names over the C library: handles, as_bytes, PCH,
# extra_sources, numba_debug, bundled headers (NVRTC, libNVVM and nvJitLink
# work without a GPU)

def _loaded(stem):
    """The path of an already-loaded library (the one cuabi loaded)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith(stem + ".so"):
                return path
    pytest.skip(f"{stem} is not loaded")


def test_program_options_as_bytes_is_what_the_compiler_gets():
    _needs("nvrtc")
    o = cuabi.ProgramOptions(arch="sm_80", std="c++17", define_macro=("N", "4"),
                             pch_verbose=False, use_pch="/x/a.pch", numba_debug=True,
                             diag_suppress=177)
    got = o.as_bytes("nvrtc")
    assert all(isinstance(x, bytes) for x in got)
    assert got[0] == b"-arch=sm_80" and got[1].startswith(b"--pre-include=")
    for want in (b"-std=c++17", b"-DN=4", b"--pch-verbose=false", b"--use-pch=/x/a.pch",
                 b"--numba-debug"):
        assert want in got, (want, got)
    assert got[-1] == b"--diag-suppress=177"              # raw options last
    assert b"-dlto" in o.as_bytes("nvrtc", "ltoir")
    assert b"-dlto" not in got
    n = cuabi.ProgramOptions(arch="sm_90a", ftz=True, debug=True, numba_debug=True)
    assert n.as_bytes("NVVM") == [b"-arch=compute_90a", b"-g", b"--numba-debug", b"-ftz=1"]
    assert b"-gen-lto" in n.as_bytes("nvvm", "ltoir")
    with pytest.raises(ValueError, match="Must be one of: 'nvrtc', 'nvvm'"):
        o.as_bytes("nvjitlink")
    with pytest.raises(ValueError, match="cannot be given together"):
        cuabi.ProgramOptions(pch=True, create_pch="a.pch").as_bytes("nvrtc")
    with pytest.raises(ValueError, match="applies to CUDA C"):
        cuabi.ProgramOptions(arch="sm_90", create_pch="a.pch").as_bytes("nvvm")


def test_as_bytes_is_what_a_compile_passes(_cache):
    """A compile with the rendered list as raw options and nothing else makes
    the same PTX as the options themselves."""
    _needs("nvrtc")
    src = 'extern "C" __global__ void k(float *p) { p[0] = N * p[0]; }'
    o = cuabi.ProgramOptions(arch="sm_90", define_macro="N=3", lineinfo=True, cache=False)
    a = bytes(cuabi.Program(src, "c++").compile("ptx", options=o))
    argv = [x.decode() for x in o.as_bytes("nvrtc", "ptx")]
    raw = cuabi.ProgramOptions(arch="sm_90", cache=False,
                               extra_options=[x for x in argv[2:]])   # past -arch, pre-include
    b = bytes(cuabi.Program(src, "c++").compile("ptx", options=raw))
    assert a == b


def test_linker_options_as_bytes_and_numba_debug():
    _needs("nvjitlink")
    o = cuabi.LinkerOptions(arch="sm_80", link_time_optimization=True, optimization_level=3,
                            max_register_count=64, ftz=False, kernels_used="k", ptx=True)
    assert o.as_bytes() == o.as_bytes("nvJitLink") == [
        b"-arch=sm_80", b"-lto", b"-O3", b"-ftz=0", b"-maxrregcount=64", b"-ptx",
        b"-kernels-used=k"]
    with pytest.raises(ValueError, match="only supports 'nvjitlink'"):
        o.as_bytes("driver")
    with pytest.warns(DeprecationWarning, match="numba_debug"):
        d = cuabi.LinkerOptions(arch="sm_90", numba_debug=True)
    assert d.as_bytes() == [b"-arch=sm_90"]                  # no effect, as cuda.core
    with pytest.raises(ValueError):
        cuabi.LinkerOptions(arch="sm_9").as_bytes()
    from cuabi.typing import CompilerBackendType
    assert cuabi.Linker.which_backend() is CompilerBackendType.NVJITLINK
    assert cuabi.Linker.which_backend() == "nvJitLink"


def test_program_handle_is_the_nvrtc_program(_cache):
    _needs("nvrtc")
    p = cuabi.Program('extern "C" __global__ void k(int *p) { *p = 1; }', "c++",
                      {"arch": "sm_90"})
    h = p.handle
    assert isinstance(h, int) and h and h != p.cuabi_handle and p.handle == h
    code = p.compile("ptx", options=cuabi.ProgramOptions(arch="sm_90", cache=False))
    h2 = p.handle
    assert h2 and h2 != h                    # the compile's own program is kept
    nvrtc = C.CDLL(_loaded("libnvrtc"))
    n = C.c_size_t()
    assert nvrtc.nvrtcGetPTXSize(C.c_void_p(h2), C.byref(n)) == 0
    assert n.value == len(bytes(code)) + 1
    buf = C.create_string_buffer(n.value)
    assert nvrtc.nvrtcGetPTX(C.c_void_p(h2), buf) == 0
    assert buf.value == bytes(code)
    p.close()
    with pytest.raises(cuabi.ClosedHandleError):
        p.handle


def test_nvvm_extra_sources_and_handle(_cache):
    _needs("nvvm")
    head = ('target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-'
            'i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-'
            'n16:32:64"\ntarget triple = "nvptx64-nvidia-cuda"\n')
    ver = '!nvvmir.version = !{!9}\n!9 = !{i32 2, i32 0, i32 3, i32 1}\n'
    main = (head + "declare float @f(float)\n"
            "define void @k(float* %x) {\n  %v = load float, float* %x\n"
            "  %e = call float @f(float %v)\n  store float %e, float* %x\n  ret void\n}\n"
            '!nvvm.annotations = !{!0}\n!0 = !{void (float*)* @k, !"kernel", i32 1}\n' + ver)
    helper = head + "define float @f(float %v) {\n  %r = fmul float %v, 5.0\n  ret float %r\n}\n" + ver
    p = cuabi.Program(main, "nvvm")
    assert p.handle
    alone = bytes(p.compile("ptx", arch="sm_90"))
    assert b".extern .func" in alone
    both = p.compile("ptx", arch="sm_90", extra_sources=[("helper.ll", helper)])
    assert b".extern .func" not in bytes(both) and b"0f40A00000" in bytes(both)
    assert p.cache_hit == 0
    p.compile("ptx", arch="sm_90", extra_sources=(("helper.ll", helper.encode()),))
    assert p.cache_hit == 1                        # same bytes, as str or bytes: same key
    p.compile("ptx", arch="sm_90", extra_sources=[("helper.ll", helper.replace("5.0", "7.0"))])
    assert p.cache_hit == 0                        # another module: another key
    assert p.pch_status is None
    # cuda.core's checks
    with pytest.raises(TypeError, match="2-tuples"):
        cuabi.ProgramOptions(extra_sources="x")
    with pytest.raises(TypeError, match="Module name at index 0"):
        cuabi.ProgramOptions(extra_sources=[(1, "x")])
    with pytest.raises(TypeError, match="Module source at index 0"):
        cuabi.ProgramOptions(extra_sources=[("a", 3)])
    with pytest.raises(ValueError, match="cannot be empty"):
        cuabi.ProgramOptions(extra_sources=[("a", b"")])
    with pytest.raises(ValueError, match="NVVM IR modules"):
        cuabi.Program("__global__ void k() {}", "c++").compile(
            "ptx", arch="sm_90", extra_sources=[("a", "x")])


def test_pch_status_and_the_cache(tmp_path, _cache):
    _needs("nvrtc")
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "big.h").write_text("#pragma once\ntemplate <typename T> __device__ T sq(T x) "
                               "{ return x * x; }\n")
    pch = str(tmp_path / "big.pch")
    src = '#include "big.h"\nextern "C" __global__ void k(float *x) { x[0] = sq(x[0]); }\n'
    p = cuabi.Program(src, "c++", {"arch": "sm_90", "include_path": str(inc)})
    assert p.pch_status is None                       # not compiled yet
    p.compile("ptx", create_pch=pch)
    from cuabi.typing import PCHStatusType
    if p.pch_status is None:
        pytest.skip("NVRTC older than 12.8 (no PCH status)")
    assert p.pch_status is PCHStatusType.CREATED and p.pch_status == "created"
    assert os.path.getsize(pch) > 0 and p.cache_hit == 0
    assert "writes a precompiled header" in p.log     # never a cache hit
    p.compile("ptx", use_pch=pch)
    assert p.pch_status is None and p.cache_hit == 0
    q = cuabi.Program(src, "c++", {"arch": "sm_90", "include_path": str(inc)})
    q.compile("ptx", use_pch=pch)
    assert q.cache_hit == 1                           # keyed by the PCH file's identity
    auto = tmp_path / "auto"
    auto.mkdir()
    p.compile("ptx", pch=True, pch_dir=str(auto))
    assert p.pch_status in ("created", "not_attempted") and p.cache_hit == 0
    with pytest.raises(ValueError, match="side effects"):
        cuabi.utils.make_program_cache_key(code=src, code_type="c++", target_type="ptx",
                                     options=cuabi.ProgramOptions(arch="sm_90", create_pch=pch))
    with pytest.raises(ValueError, match="extra_digest"):
        cuabi.utils.make_program_cache_key(code=src, code_type="c++", target_type="ptx",
                                     options=cuabi.ProgramOptions(arch="sm_90", use_pch=pch))


def test_numba_debug_and_bundled_headers(tmp_path, monkeypatch, _cache):
    _needs("nvrtc")
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n"
    with pytest.warns(UserWarning, match="numba_debug is ignored"):
        cuabi.Program(ptx, "ptx").compile("cubin", arch="sm_90", numba_debug=True)
    monkeypatch.setenv("CUABI_NVRTC_HEADERS_DIR", str(tmp_path / "hdrs"))
    o = cuabi.ProgramOptions(arch="sm_90", use_bundled_headers=True)
    assert f"--use-bundled-headers={tmp_path / 'hdrs'}".encode() in o.as_bytes("nvrtc")
    p = cuabi.Program('#include <cuda/std/cstdint>\nextern "C" __global__ void k('
                      'cuda::std::uint32_t *x) { x[0] = 1; }', "c++")
    nvrtc = C.CDLL(_loaded("libnvrtc")) if cuabi.runtime_info()["nvrtc_status"] == 0 else None
    major, minor = C.c_int(), C.c_int()
    nvrtc.nvrtcVersion(C.byref(major), C.byref(minor))
    if (major.value, minor.value) < (13, 3):
        with pytest.raises(cuabi.CuabiError, match="NVRTC 13.3 or newer"):
            p.compile("ptx", options=o)
    else:
        assert p.compile("ptx", options=o).code_type == "ptx"
        assert (tmp_path / "hdrs").is_dir()


def test_linker_handle_is_the_nvjitlink_session(_cache):
    _needs("nvrtc")
    _needs("nvjitlink")
    ptx = cuabi.Program('extern "C" __global__ void k(int *p) { *p = 1; }', "c++").compile(
        "ptx", arch="sm_90")
    lk = cuabi.Linker(ptx, arch="sm_90")
    h = lk.handle
    assert isinstance(h, int) and h and h != lk.cuabi_handle and lk.handle == h
    out = lk.link("cubin")
    jl = C.CDLL(_loaded("libnvJitLink"))
    n = C.c_size_t()
    assert jl.nvJitLinkGetLinkedCubinSize(C.c_void_p(h), C.byref(n)) == 0
    assert n.value == len(bytes(out))
    # PTX programs: cuda.core's handle is the Linker's (nvJitLink)
    prog = cuabi.Program(".version 8.0\n.target sm_90\n.address_size 64\n", "ptx")
    assert prog.handle and prog.handle == prog.handle
