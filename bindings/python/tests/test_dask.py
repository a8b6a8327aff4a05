"""Kernels that travel (issue 23 item 3), through a Dask LocalCluster of
worker processes, CPU only: an ObjectCode, a Kernel and a Program pickle to
the workers and back (the workers cannot even load NVRTC: nothing compiles
there), kernels re-resolve their names against the fake driver in each
worker, and the CacheWarmPlugin warms every worker's cache from a manifest
and reports it. Skips without dask.distributed."""
import os
import pickle

import pytest

import cuabi

distributed = pytest.importorskip("distributed")

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

SOURCE = r'''
extern "C" __global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
template <typename T> __global__ void twice(T *x) { x[threadIdx.x] *= 2; }
'''


def _fixture(name):
    build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
    path = os.path.join(build, "tests", "fixtures", ".libs", name)
    return os.path.abspath(path) if os.path.exists(path) else None


@pytest.fixture(scope="module")
def compiled():
    try:
        prog = cuabi.Program(SOURCE)
        code = prog.compile(arch="sm_90", name_expressions=["twice<float>"])
    except cuabi.CuabiError as e:
        pytest.skip(f"NVRTC is needed to compile here: {e}")
    return prog, code


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    driver = os.environ.get("CUABI_TEST_FAKE_CUDA") or _fixture("fake_cuda_graph.so")
    if driver is None:
        pytest.skip("the fake driver is not built (make check builds it)")
    pkg = os.environ.get("CUABI_PYTHON_PATH") or os.path.dirname(HERE)
    # Workers are fresh processes: they inherit this environment. They get
    # the fake driver, and an NVRTC that cannot load, so that any compile
    # on a worker would fail.
    saved = dict(os.environ)
    os.environ.update(CUABI_DRIVER_PATH=driver, CUABI_NVRTC_PATH="/nonexistent/libnvrtc.so",
                      PYTHONPATH=os.pathsep.join(p for p in (pkg, os.environ.get("PYTHONPATH"))
                                                 if p),
                      XDG_CACHE_HOME=str(tmp_path_factory.mktemp("cache")))
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, worker_dashboard_address=None)
        c = distributed.Client(cluster)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield c
    c.close()
    cluster.close()


def test_pickles_in_process(compiled):
    prog, code = compiled
    again = pickle.loads(pickle.dumps(code))
    assert again is code or bytes(again) == bytes(code)
    assert again.cache_key == code.cache_key
    assert again.code_type == "cubin"
    assert "scale" in again.kernel_names
    p2 = pickle.loads(pickle.dumps(prog))
    assert p2.compile(arch="sm_90", name_expressions=["twice<float>"]).cache_key == code.cache_key


def test_objcode_and_program_travel_without_compiling(client, compiled):
    prog, code = compiled

    def on_worker(obj, program):
        import os as _os
        # NVRTC cannot load here: the Program's compile returns what it carried
        same = program.compile(arch="sm_90", name_expressions=["twice<float>"])
        return (_os.getpid(), obj.cache_key, sorted(obj.kernel_names), same.cache_key, None)

    futures = [client.submit(on_worker, code, prog, pure=False, workers=[w])
               for w in client.scheduler_info()["workers"]]
    results = client.gather(futures)
    assert len({r[0] for r in results}) == 2                # two worker processes
    for pid, key, names, same_key, _lowered in results:
        assert pid != os.getpid()
        assert key == code.cache_key and same_key == code.cache_key
        assert "scale" in names


def test_kernel_resolves_its_name_on_the_worker(client, compiled):
    _prog, code = compiled
    k = None
    try:
        k = code.get_kernel("scale")
    except cuabi.CuabiError:
        pass        # no driver in this process: pickle the name by hand below

    def on_worker(kernel_or_code):
        import cuabi as _cuabi
        kern = kernel_or_code if isinstance(kernel_or_code, _cuabi.Kernel) else \
            kernel_or_code.get_kernel("scale")
        again = kern.objcode.get_kernel("scale")
        return kern.name, again.name, kern.objcode.cache_key

    name, again, key = client.submit(on_worker, k if k is not None else code,
                                     pure=False).result(timeout=120)
    assert name == again == "scale"
    assert key == code.cache_key


def test_cache_warm_plugin_reports_per_worker(client, tmp_path):
    from cuabi.workers import CacheWarmPlugin, TOPIC
    tool = os.path.join(os.environ.get("CUABI_TEST_BUILDDIR", "build"), "cuabi")
    if not os.access(tool, os.X_OK):
        pytest.skip("the cuabi tool is not built")
    manifest = tmp_path / "kernels.toml"
    manifest.write_text('archs = ["sm_90"]\n[[source]]\nname = "k.cu"\n'
                        'code = """extern "C" __global__ void k(float *x) { x[0] = 1; }"""\n')
    # The workers' NVRTC is unloadable (fixture): the warm-up fails, and says so.
    bad = CacheWarmPlugin(manifest, exe=os.path.abspath(tool), strict=False)
    client.register_plugin(bad, name="cuabi-cache-warm-bad")
    import time
    end = time.monotonic() + 30
    while True:     # events reach the scheduler asynchronously
        events = [e for _t, e in client.get_events(TOPIC)]
        if len(events) >= 2 or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert len(events) >= 2
    assert all(not e["ok"] and e["returncode"] not in (0, None) for e in events)
    assert all(e["worker"] for e in events)
    strict = CacheWarmPlugin(manifest, exe=os.path.abspath(tool))
    with pytest.raises(Exception, match="cuabi cache warm"):
        client.register_plugin(strict, name="cuabi-cache-warm-strict")


def test_cache_warm_plugin_succeeds_where_nvrtc_loads(tmp_path):
    """The same plugin's setup in this process, where NVRTC loads."""
    from cuabi.workers import CacheWarmPlugin
    tool = os.path.join(os.environ.get("CUABI_TEST_BUILDDIR", "build"), "cuabi")
    if not os.access(tool, os.X_OK):
        pytest.skip("the cuabi tool is not built")
    manifest = tmp_path / "kernels.toml"
    manifest.write_text('archs = ["sm_90"]\n[[source]]\nname = "k.cu"\n'
                        'code = """extern "C" __global__ void k(float *x) { x[0] = 1; }"""\n')
    env = dict(os.environ)
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    try:
        p = CacheWarmPlugin(manifest, exe=os.path.abspath(tool))

        class FakeWorker:
            address = "tcp://here"
            events = []

            def log_event(self, topic, msg):
                self.events.append((topic, msg))
        w = FakeWorker()
        p.setup(w)
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert p.report["ok"], p.report
    assert w.events and w.events[0][0] == "cuabi-cache-warm"
    assert p.report["summary"] is not None
