"""cuda.core.utils's program caches on cuabi (issue 24): InMemoryProgramCache,
FileStreamProgramCache, ProgramCacheResource, make_program_cache_key and
Program.compile(cache=...), with cuda.core 1.2's meanings; the cache
directory as hostile input (links, FIFOs, truncated, garbage, misplaced and
huge entries, other users' files, shared directories) and writers in
several processes at once. No GPU needed: NVRTC compiles here, and the fake
driver (fake_cuda_core_checks.py) loads and runs a cached kernel;
test_gpu_program_cache.py does it on a GPU."""
import hashlib
import os
import resource
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import cuabi
from cuabi import _compile, _program_cache
from cuabi.utils import (FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource,
                         make_program_cache_key)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = 'extern "C" __global__ void k(int *a) { *a = 1; }'
SRC2 = 'extern "C" __global__ void k(int *a) { *a = 2; }'
HEADER = _program_cache._HEADER
ROOT = os.geteuid() == 0


def _nvrtc():
    return cuabi.runtime_info()["nvrtc_status"] == 0


needs_nvrtc = pytest.mark.skipif(not _nvrtc(), reason="NVRTC not available")


@pytest.fixture(autouse=True)
def _c_cache(tmp_path, monkeypatch):
    """cuabi's own C cache in a directory of the test's (not ~/.cache)."""
    if hasattr(cuabi, "cache"):
        cuabi.cache.set_directory(str(tmp_path / "c-cache"))
    monkeypatch.setenv("CUABI_CACHE_DIR", str(tmp_path / "c-cache"))
    yield
    if hasattr(cuabi, "cache"):
        cuabi.cache.set_directory(None)


@pytest.fixture(params=["memory", "file"])
def any_cache(request, tmp_path):
    if request.param == "memory":
        c = InMemoryProgramCache()
    else:
        c = FileStreamProgramCache(tmp_path / "pc")
    with c:
        yield c


def _entry_path(root, key):
    k = key.encode() if isinstance(key, str) else key
    h = hashlib.sha256(k).hexdigest()
    return os.path.join(root, "entries", h[:2], h[2:])


def _entry_bytes(key, payload, *, size=None, key_for=None, checksum=None):
    k = key.encode() if isinstance(key, str) else key
    kf = k if key_for is None else key_for
    return HEADER.pack(b"CUABIPC1", len(payload) if size is None else size,
                       hashlib.sha256(kf).digest(),
                       checksum or hashlib.sha256(payload).digest()) + payload


class _Compiles:
    """Counts Program compiles that reach the compiler."""

    def __init__(self, monkeypatch):
        self.n = 0
        real = _compile.Program._compile

        def counted(prog, options, logs):
            self.n += 1
            return real(prog, options, logs)
        monkeypatch.setattr(_compile.Program, "_compile", counted)


# ------------------------------------------------------------------ the mapping

def test_names_are_cuda_cores():
    import cuabi.utils as u
    for name in ("FileStreamProgramCache", "InMemoryProgramCache", "ProgramCacheResource",
                 "make_program_cache_key"):
        assert name in u.__all__ and getattr(u, name) is not None
    assert issubclass(FileStreamProgramCache, ProgramCacheResource)
    assert issubclass(InMemoryProgramCache, ProgramCacheResource)
    with pytest.raises(TypeError):
        ProgramCacheResource()          # abstract
    for cls in (FileStreamProgramCache, InMemoryProgramCache):
        assert "__contains__" not in vars(cls) and "__contains__" not in vars(ProgramCacheResource)


def test_mapping_behaviour(any_cache):
    c = any_cache
    assert len(c) == 0 and c.get("a") is None and c.get("a", b"d") == b"d"
    with pytest.raises(KeyError):
        c["a"]
    c["a"] = b"one"
    assert c[b"a"] == b"one" and c["a"] == b"one"      # str key = its UTF-8 bytes
    c[b"a"] = bytearray(b"two")
    assert c["a"] == b"two" and isinstance(c["a"], bytes) and len(c) == 1
    c["b"] = memoryview(b"three")
    c.update({"c": b"4"})
    c.update([("d", b"5"), (b"e", b"6")])
    assert len(c) == 5 and c["d"] == b"5"
    del c["a"]
    with pytest.raises(KeyError):
        del c["a"]
    assert c.get("a") is None and len(c) == 4
    c["empty"] = b""
    assert c["empty"] == b""
    c.clear()
    assert len(c) == 0 and c.get("b") is None


def test_refusals(any_cache):
    c = any_cache
    for bad in (1, 1.5, None, ("a",)):
        with pytest.raises(TypeError, match="cache keys must be bytes or str"):
            c[bad] = b"x"
        with pytest.raises(TypeError):
            c.get(bad)
    for bad in ("text", 3, [1, 2], object()):
        with pytest.raises(TypeError, match="cache values must be bytes-like or ObjectCode"):
            c["k"] = bad
    with pytest.raises(TypeError):      # no __contains__: `in` is refused, as in cuda.core
        "k" in c


@pytest.mark.parametrize("cls", ["memory", "file"])
def test_max_size_bytes_argument(cls, tmp_path):
    make = (lambda **kw: InMemoryProgramCache(**kw)) if cls == "memory" else \
        (lambda **kw: FileStreamProgramCache(tmp_path / "pc", **kw))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            make(max_size_bytes=bad)
    for bad in ("10", 1.5, True):
        with pytest.raises(TypeError):
            make(max_size_bytes=bad)
    make(max_size_bytes=None)
    with pytest.raises(TypeError):
        make(max_size_bytes=10, extra=1)


def test_context_manager_and_close(any_cache):
    with any_cache as c:
        c["x"] = b"1"
    assert c.get("x") == b"1"       # close() releases nothing these caches need


def test_in_memory_lru():
    c = InMemoryProgramCache(max_size_bytes=10)
    c["a"], c["b"] = b"1234", b"1234"
    c["a"]                          # a read makes "a" the most recent
    c["c"] = b"1234"                # 12 > 10: the least recent ("b") goes
    assert c.get("b") is None and c["a"] == b"1234" and c["c"] == b"1234"
    c["big"] = b"x" * 11            # alone over the cap: evicted by its own write
    assert c.get("big") is None and len(c) == 0
    c["a"] = b"12345"
    c["a"] = b"123456789"           # a rewrite counts its new size only
    assert c["a"] == b"123456789" and len(c) == 1


def test_in_memory_threads():
    c = InMemoryProgramCache(max_size_bytes=4000)
    errors = []

    def work(t):
        try:
            for i in range(300):
                c[f"{t}-{i % 50}"] = bytes([t]) * (i % 40 + 1)
                v = c.get(f"{t}-{(i * 7) % 50}")
                assert v is None or set(v) == {t}
                if i % 17 == 0:
                    with pytest.raises(KeyError):
                        del c["nothing"]
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(1, 9)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert c._total == sum(len(v) for v in c._entries.values()) <= 4000


# ------------------------------------------------------------------ on disk

def test_file_stream_persists_and_layout(tmp_path):
    root = tmp_path / "pc"
    with FileStreamProgramCache(root) as c:
        c["key"] = b"payload"
    path = _entry_path(root, "key")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600
    for d in (root, root / "entries", root / "tmp", os.path.dirname(path)):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    raw = open(path, "rb").read()
    assert raw == _entry_bytes("key", b"payload") and len(raw) == HEADER.size + 7
    assert os.listdir(root / "tmp") == []       # written there, renamed into place
    again = FileStreamProgramCache(str(root))   # a str path, a new instance (a new process alike)
    assert again["key"] == b"payload" and len(again) == 1


def test_default_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    c = FileStreamProgramCache()
    c["k"] = b"v"
    assert os.path.exists(_entry_path(tmp_path / "xdg" / "cuabi-python" / "program-cache", "k"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _program_cache._default_directory() == \
        tmp_path / "home" / ".cache" / "cuabi-python" / "program-cache"


def test_file_stream_eviction_by_last_read(tmp_path):
    per = HEADER.size + 100
    c = FileStreamProgramCache(tmp_path / "pc", max_size_bytes=3 * per)
    for name in ("a", "b", "c"):
        c[name] = bytes(100)
        time.sleep(0.02)
    assert len(c) == 3
    assert c["a"] == bytes(100)         # read: "a" is now the most recent
    time.sleep(0.02)
    c["d"] = bytes(100)                 # over the cap: "b", the least recently read, goes
    assert c.get("b") is None
    assert c.get("a") is not None and c.get("c") is not None and c.get("d") is not None
    assert c._total_size() <= 3 * per
    c["huge"] = bytes(4 * per)          # alone over the cap: evicted by its own write's pass
    assert c._total_size() <= 3 * per and c.get("huge") is None


def test_file_stream_size_cap_with_other_writers(tmp_path):
    """A second instance (another process alike) writes past this one's
    tracker; the next over-cap write rescans and gets back under."""
    per = HEADER.size + 50
    a = FileStreamProgramCache(tmp_path / "pc", max_size_bytes=5 * per)
    b = FileStreamProgramCache(tmp_path / "pc")
    for i in range(20):
        b[f"b{i}"] = bytes(50)
    for i in range(6):
        a[f"a{i}"] = bytes(50)
    assert a._total_size() <= 5 * per


def test_entry_over_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(_program_cache, "MAX_ENTRY_BYTES", 64)
    c = FileStreamProgramCache(tmp_path / "pc")
    with pytest.raises(ValueError, match="more than the 64 allowed"):
        c["k"] = bytes(65)
    c["k"] = bytes(64)
    assert c["k"] == bytes(64)


# ------------------------------------------------------------------ hostile directories

@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_shared_directories_are_refused(tmp_path, mode):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, mode)
    with pytest.raises(PermissionError, match="writable by .* without the sticky bit"):
        FileStreamProgramCache(root)
    assert not (root / "entries").exists()      # nothing was written


def test_sticky_shared_directory_is_used_but_foreign_entries_are_not(tmp_path):
    root = tmp_path / "sticky"
    root.mkdir()
    os.chmod(root, 0o1777)
    c = FileStreamProgramCache(root)
    c["k"] = b"v"
    assert c["k"] == b"v"


def test_entries_group_writable_directory_is_refused(tmp_path):
    c = FileStreamProgramCache(tmp_path / "pc")
    os.chmod(tmp_path / "pc" / "entries", 0o775)
    with pytest.raises(PermissionError, match="entries: writable by its group"):
        FileStreamProgramCache(tmp_path / "pc")
    c2 = c                                       # an instance made before: misses, refuses writes
    assert c2.get("k") is None
    with pytest.raises(PermissionError):
        c2["k"] = b"v"


@pytest.mark.skipif(not ROOT, reason="chown to another uid needs root")
def test_directory_of_another_user_is_refused(tmp_path):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 4242, 4242)
    with pytest.raises(PermissionError, match="owned by uid 4242"):
        FileStreamProgramCache(root)


def test_links_are_not_followed(tmp_path):
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    # 1. an entry that is a link to a well-formed entry for the same key elsewhere
    target = elsewhere / "entry"
    target.write_bytes(_entry_bytes("k", b"planted"))
    os.chmod(target, 0o600)
    path = _entry_path(root, "k")
    os.makedirs(os.path.dirname(path), mode=0o700)
    os.symlink(target, path)
    assert c.get("k") is None                   # a miss, not "planted"
    assert not os.path.lexists(path) and target.exists()   # the link went, its target stays
    # 2. the entry's directory a link to a directory holding one
    key2 = "k2"
    sub = os.path.dirname(_entry_path(root, key2))
    if os.path.isdir(sub):
        os.rmdir(sub)
    (elsewhere / os.path.basename(_entry_path(root, key2))).write_bytes(
        _entry_bytes(key2, b"planted"))
    os.chmod(elsewhere / os.path.basename(_entry_path(root, key2)), 0o600)
    os.symlink(elsewhere, sub)
    assert c.get(key2) is None
    c[key2] = b"mine"                            # the link is replaced by a directory
    assert c[key2] == b"mine" and not os.path.islink(sub)
    assert (elsewhere / os.path.basename(_entry_path(root, key2))).read_bytes().endswith(b"planted")
    # 3. entries/ itself replaced by a link (after the cache was made)
    os.rename(root / "entries", tmp_path / "old-entries")
    os.symlink(tmp_path / "old-entries", root / "entries")
    assert c.get(key2) is None and len(c) == 0   # not followed
    with pytest.raises(KeyError):
        del c[key2]
    assert (tmp_path / "old-entries").is_dir()


def test_constructor_replaces_a_planted_link_and_keeps_its_target(tmp_path):
    root = tmp_path / "pc"
    FileStreamProgramCache(root)["k"] = b"v"
    os.rename(root / "entries", tmp_path / "old")
    os.symlink(tmp_path / "old", root / "entries")
    c = FileStreamProgramCache(root)
    assert not os.path.islink(root / "entries") and (tmp_path / "old").is_dir()
    assert c.get("k") is None and len(os.listdir(tmp_path / "old")) == 1


def _in_thread(fn, timeout=5.0):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked"
    return out[0]


def test_fifo_at_an_entry_path_never_blocks(tmp_path):
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    path = _entry_path(root, "k")
    os.makedirs(os.path.dirname(path), mode=0o700)
    os.mkfifo(path, 0o600)
    t0 = time.monotonic()
    assert _in_thread(lambda: c.get("k")) is None
    assert time.monotonic() - t0 < 2 and not os.path.lexists(path)    # removed
    os.mkfifo(path, 0o600)
    _in_thread(lambda: c.__setitem__("k", b"v"))                        # replaced by the entry
    assert c["k"] == b"v" and stat.S_ISREG(os.lstat(path).st_mode)
    os.unlink(path)
    os.mkfifo(path, 0o600)
    _in_thread(lambda: c.clear())
    assert not os.path.lexists(path)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "header_only", "short_header",
                                    "bad_magic", "bad_checksum", "size_lies", "other_key",
                                    "empty"])
def test_damaged_entries_are_misses(tmp_path, damage):
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    c["k"] = b"payload" * 10
    path = _entry_path(root, "k")
    good = open(path, "rb").read()
    bad = {
        "truncated": good[:-5],
        "garbage": os.urandom(len(good)),
        "header_only": good[:HEADER.size],
        "short_header": good[:HEADER.size - 1],
        "bad_magic": b"CUDAPC01" + good[8:],
        "bad_checksum": _entry_bytes("k", b"payload" * 10, checksum=b"\0" * 32),
        "size_lies": _entry_bytes("k", b"payload" * 10, size=1 << 40),
        "other_key": _entry_bytes("k", b"payload" * 10, key_for=b"another key"),
        "empty": b"",
    }[damage]
    with open(path, "wb") as f:
        f.write(bad)
    assert c.get("k") is None
    with pytest.raises(KeyError):
        c["k"]
    assert not os.path.exists(path)             # removed: the next write stores it afresh
    c["k"] = b"again"
    assert c["k"] == b"again"


def test_mutated_entries_are_the_payload_or_a_miss(tmp_path):
    """The entry parser under seeded random damage (bit flips, cuts,
    appended bytes, overwritten runs, headers of other sizes): each read is
    exactly the payload or a miss, never an exception or other bytes."""
    import random
    rng = random.Random(2024)
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    payload = bytes(rng.getrandbits(8) for _ in range(300))
    c["k"] = payload
    path = _entry_path(root, "k")
    good = open(path, "rb").read()
    hits = misses = 0
    for i in range(600):
        b = bytearray(good)
        how = i % 5
        if how == 0:
            for _ in range(rng.randint(1, 4)):
                j = rng.randrange(len(b))
                b[j] ^= 1 << rng.randrange(8)
        elif how == 1:
            del b[rng.randrange(len(b)):]
        elif how == 2:
            b += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
        elif how == 3:
            j = rng.randrange(len(b))
            b[j:j + 16] = bytes(rng.getrandbits(8) for _ in range(16))
        else:
            b[8:16] = rng.choice([0, 1, 299, 301, 1 << 30, (1 << 30) + 1, (1 << 64) - 1]) \
                .to_bytes(8, "little")
        if not os.path.exists(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path), mode=0o700)
        with open(path, "wb") as f:
            f.write(b)
        os.chmod(path, 0o600)
        got = c.get("k")
        if got is None:
            misses += 1
            assert not os.path.exists(path)
        else:
            hits += 1
            assert got == payload and bytes(b) == good
    assert misses > 500


def test_huge_sparse_entry_is_refused_unread(tmp_path):
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    c["k"] = b"v"
    path = _entry_path(root, "k")
    with open(path, "r+b") as f:
        f.truncate(8 << 30)                      # 8 GiB, sparse; the header claims 1 byte
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    assert c.get("k") is None
    assert time.monotonic() - t0 < 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024   # KiB
    assert not os.path.exists(path)


def test_entries_not_ours_are_never_used_nor_removed(tmp_path):
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    c["k"] = b"v"
    path = _entry_path(root, "k")
    os.chmod(path, 0o664)                        # writable by its group
    assert c.get("k") is None and os.path.exists(path)
    assert len(c) == 0
    c.clear()
    assert os.path.exists(path)                  # not this user's to remove
    if ROOT:
        os.chmod(path, 0o600)
        os.chown(path, 4242, 4242)               # another user's
        assert c.get("k") is None and os.path.exists(path)
        c.clear()
        assert os.path.exists(path)
    c["k"] = b"mine"                             # a write replaces it (rename in our directory)
    assert c["k"] == b"mine"


def test_a_directory_at_an_entry_path(tmp_path):
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    path = _entry_path(root, "k")
    os.makedirs(path, mode=0o700)
    assert c.get("k") is None
    with pytest.raises(KeyError):
        del c["k"]
    with pytest.raises(OSError):                 # a clear error, nothing half-written
        c["k"] = b"v"
    assert os.path.isdir(path) and os.listdir(root / "tmp") == []


def test_unreadable_entry_is_a_miss(tmp_path):
    if ROOT:
        pytest.skip("permissions do not bind root")
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    c["k"] = b"v"
    os.chmod(_entry_path(root, "k"), 0o000)
    assert c.get("k") is None


def test_stale_temporary_files_are_swept(tmp_path):
    root = tmp_path / "pc"
    FileStreamProgramCache(root)
    old, young = root / "tmp" / "entry-dead", root / "tmp" / "entry-live"
    for p in (old, young):
        p.write_bytes(b"x")
        os.chmod(p, 0o600)
    t = time.time() - 2 * 3600
    os.utime(old, (t, t))
    c = FileStreamProgramCache(root)
    assert not old.exists() and young.exists()   # a writer at work keeps its file
    c.clear()
    assert young.exists()


def test_tmp_and_entries_removed_by_hand_are_made_again(tmp_path):
    import shutil
    root = tmp_path / "pc"
    c = FileStreamProgramCache(root)
    c["a"] = b"1"
    shutil.rmtree(root / "tmp")
    shutil.rmtree(root / "entries")
    assert c.get("a") is None and len(c) == 0
    c["a"] = b"2"
    assert c["a"] == b"2"
    shutil.rmtree(root)
    assert c.get("a") is None
    c["a"] = b"3"
    assert c["a"] == b"3" and stat.S_IMODE(os.stat(root).st_mode) == 0o700


WRITER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from cuabi._program_cache import FileStreamProgramCache
    root, me, cap = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) or None
    c = FileStreamProgramCache(root, max_size_bytes=cap)
    bad = 0
    for i in range(300):
        key = f"shared-{i % 7}"
        c[key] = bytes([me]) * (1000 + me)          # every writer, the same keys
        c[f"own-{me}-{i % 20}"] = bytes([me]) * 300
        v = c.get(f"shared-{(i * 3) % 7}")
        if v is not None and not (len(set(v)) == 1 and len(v) == 1000 + v[0]):
            bad += 1                                 # a torn or mixed entry
        if i % 50 == 0:
            try:
                del c[f"own-{me}-{i % 20}"]
            except KeyError:
                pass
    print(bad)
""")


@pytest.mark.parametrize("cap", [0, 20000])
def test_writers_in_several_processes(tmp_path, cap):
    root = str(tmp_path / "pc")
    pkg = os.path.dirname(os.path.dirname(_program_cache.__file__))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pkg, root, str(me), str(cap)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in range(1, 6)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "0"
    c = FileStreamProgramCache(root)
    for i in range(7):
        v = c.get(f"shared-{i}")
        if cap == 0:
            assert v is not None
        if v is not None:
            assert len(set(v)) == 1 and len(v) == 1000 + v[0]
    assert os.listdir(os.path.join(root, "tmp")) == []
    if cap:
        # soft: each process counts its own writes, so the directory may hold
        # more until a write of one that sees it over (a new one scans first)
        c = FileStreamProgramCache(root, max_size_bytes=cap)
        c["last"] = b"x"
        assert c._total_size() <= cap


# ------------------------------------------------------------------ keys

def _key(**kw):
    args = dict(code=SRC, code_type="c++", options=cuabi.ProgramOptions(arch="sm_90"),
                target_type="cubin")
    args.update(kw)
    return make_program_cache_key(**args)


def test_key_is_stable_and_covers_the_inputs():
    k = _key()
    assert isinstance(k, bytes) and len(k) == 32 and k == _key()
    others = [
        _key(code=SRC2), _key(target_type="ptx"), _key(target_type="ltoir"),
        _key(options=cuabi.ProgramOptions(arch="sm_80")),
        _key(options=cuabi.ProgramOptions(arch="sm_90", defines=["X=1"])),
        _key(options=cuabi.ProgramOptions(arch="sm_90", std="c++17")),
        _key(options=cuabi.ProgramOptions(arch="sm_90", headers={"h.h": "int x;"})),
        _key(options=cuabi.ProgramOptions(arch="sm_90", max_register_count=32)),
        _key(options=cuabi.ProgramOptions(arch="sm_90", name="other.cu")),
        _key(name_expressions=["k"]), _key(extra_digest=b"headers v1"),
        _key(code_type="ptx", code=".version 8.0"),
    ]
    assert len({k, *others}) == len(others) + 1
    assert _key(extra_digest=b"a") != _key(extra_digest=b"b")
    # order of name expressions does not matter; str and bytes differ
    assert _key(name_expressions=["a", "b"]) == _key(name_expressions=("b", "a"))
    assert _key(name_expressions=["a"]) != _key(name_expressions=[b"a"])
    # cuda.core's spellings are the same compile as cuabi's
    assert _key(options=cuabi.ProgramOptions(arch="sm_90", use_fast_math=True)) == \
        _key(options=cuabi.ProgramOptions(arch="sm_90", fast_math=True))
    assert _key(options={"arch": "sm_90", "define_macro": "X"}) == \
        _key(options=cuabi.ProgramOptions(arch="sm_90", defines=["X"]))
    assert _key(options=cuabi.ProgramOptions(arch="90")) == k
    # cuabi's C-cache switch is not a compile input; the output field is target_type's
    assert _key(options=cuabi.ProgramOptions(arch="sm_90", cache=False)) == k
    assert _key(options=cuabi.ProgramOptions(arch="sm_90", output="ptx")) == k
    # case as cuda.core folds it
    assert _key(code_type="C++", target_type="CUBIN") == k


def test_key_follows_the_compiler_version(monkeypatch):
    k = _key()
    info = dict(cuabi.runtime_info())
    monkeypatch.setattr(_compile, "_KEY_PROBES", {})    # probed again below
    monkeypatch.setattr(_compile, "runtime_info", lambda: dict(info, nvrtc_version=99999))
    assert _key() != k
    _compile._KEY_PROBES.clear()
    monkeypatch.setattr(_compile, "runtime_info", lambda: dict(info, nvrtc_status=9))
    broken = _key()
    assert broken != k and broken == _key()     # stable in a broken setup, never a working one's
    assert "nvrtc" not in _compile._KEY_PROBES  # a failed probe is asked again
    monkeypatch.setattr(_compile, "runtime_info", lambda: dict(info, library_version="9.9"))
    assert _key() != k
    _compile._KEY_PROBES.clear()
    monkeypatch.setattr(_compile, "runtime_info", lambda: dict(info))
    assert _key() == k


def test_key_arch_none_is_the_current_devices(monkeypatch):
    monkeypatch.setattr(_compile, "_default_arch", lambda: "sm_80")
    assert _key(options=cuabi.ProgramOptions()) == _key(options=cuabi.ProgramOptions(arch="sm_80"))


def test_key_refusals():
    with pytest.raises(ValueError, match="code_type"):
        _key(code_type="cubin")
    with pytest.raises(ValueError, match="not supported by the program cache"):
        _key(target_type="fatbin")
    with pytest.raises(ValueError, match="not valid for code_type='nvvm'"):
        _key(code_type="nvvm", target_type="cubin")
    with pytest.raises(ValueError, match="not valid for code_type='ptx'"):
        _key(code_type="ptx", code=".version 8.0", target_type="ltoir")
    with pytest.raises(TypeError, match="code must be str for code_type='c\\+\\+'"):
        _key(code=SRC.encode())
    assert _key(code_type="nvvm", code=b"\x42\x43", target_type="ptx") == \
        _key(code_type="nvvm", code="\x42\x43", target_type="ptx")
    with pytest.raises(TypeError):
        _key(code=3)
    with pytest.raises(TypeError, match="bytearray"):
        _key(name_expressions=[bytearray(b"k")])
    with pytest.raises(TypeError, match="ProgramOptions"):
        _key(options=3)
    with pytest.raises(TypeError, match="extra_digest"):
        _key(extra_digest="text")
    with pytest.raises(TypeError):
        make_program_cache_key(SRC, "c++", cuabi.ProgramOptions(), "cubin")   # keywords only


@pytest.mark.parametrize("opts", [dict(include_path="/usr/include"), dict(include_paths=["inc"]),
                                  dict(pre_include="h.h"), dict(pch=True), dict(use_pch="x.pch"),
                                  dict(pch_dir="d"), dict(extra_options=["-Iinc"]),
                                  dict(name="dir/k.cu")])
def test_key_needs_an_extra_digest_for_files_it_cannot_see(opts):
    o = cuabi.ProgramOptions(arch="sm_90", **opts)
    with pytest.raises(ValueError, match="extra_digest"):
        _key(options=o)
    assert len(_key(options=o, extra_digest=b"fingerprint")) == 32
    # a PTX program's options reach no NVRTC: no refusal there
    if "name" not in opts:
        _key(code_type="ptx", code=".version 8.0", options=o)


@pytest.mark.parametrize("opts", [dict(create_pch="x.pch"), dict(time="t.csv"),
                                  dict(fdevice_time_trace="t.json")])
def test_key_refuses_options_with_side_effects(opts):
    with pytest.raises(ValueError, match="side effects"):
        _key(options=cuabi.ProgramOptions(arch="sm_90", **opts), extra_digest=b"x")


def test_key_nvvm_libdevice_needs_an_extra_digest():
    o = cuabi.ProgramOptions(arch="sm_90", use_libdevice=True)
    with pytest.raises(ValueError, match="libdevice"):
        _key(code_type="nvvm", code=b"ir", target_type="ptx", options=o)
    _key(code_type="nvvm", code=b"ir", target_type="ptx", options=o, extra_digest=b"ld")


# ------------------------------------------------------------------ Program.compile(cache=)

@needs_nvrtc
def test_compile_with_a_cache(any_cache, monkeypatch):
    compiles = _Compiles(monkeypatch)
    opts = cuabi.ProgramOptions(arch="sm_90")
    first = cuabi.Program(SRC, "c++", options=opts).compile("cubin", cache=any_cache)
    assert compiles.n == 1 and len(any_cache) == 1
    key = make_program_cache_key(code=SRC, code_type="c++", options=opts, target_type="cubin")
    assert any_cache[key] == bytes(first)        # the key cuda.core's manual pattern makes
    logs = []

    class Log:
        def write(self, s):
            logs.append(s)
    hit = cuabi.Program(SRC, "c++", options=opts).compile("cubin", logs=Log(), cache=any_cache)
    assert compiles.n == 1 and logs == []        # a hit compiles nothing, logs nothing
    assert isinstance(hit, cuabi.ObjectCode) and hit is not first
    assert bytes(hit) == bytes(first) and hit.code_type == "cubin" and hit.kernel_names == ["k"]
    # another target, architecture or source: a miss
    cuabi.Program(SRC, "c++", options=opts).compile("ptx", cache=any_cache)
    cuabi.Program(SRC, "c++", options=cuabi.ProgramOptions(arch="sm_80")).compile(
        "cubin", cache=any_cache)
    ptx = cuabi.Program(SRC2, "c++", options=opts).compile("ptx", cache=any_cache)
    assert compiles.n == 4 and len(any_cache) == 4 and ptx.code_type == "ptx"
    # cuabi's spelling compile(arch=...) is the same key
    cuabi.Program(SRC).compile("cubin", arch="sm_90", cache=any_cache)
    assert compiles.n == 4


@needs_nvrtc
def test_compile_cache_bool_is_cuabis_c_cache_switch(monkeypatch):
    """compile(cache=False) kept its meaning (cuabi's ProgramOptions.cache):
    a bool is the C cache's switch, a ProgramCacheResource cuda.core's cache."""
    seen = []
    real = _compile.Program._compile

    def spy(prog, options, logs):
        seen.append(options.cache)
        return real(prog, options, logs)
    monkeypatch.setattr(_compile.Program, "_compile", spy)
    p = cuabi.Program(SRC)
    p.compile("cubin", arch="sm_90", cache=False)
    p.compile("cubin", arch="sm_80", cache=True)
    assert seen == [False, True]
    c = InMemoryProgramCache()
    p.compile("cubin", arch="sm_90", cache=c)
    assert len(c) == 1


@needs_nvrtc
def test_compile_cache_refusals(tmp_path):
    c = InMemoryProgramCache()
    p = cuabi.Program("template <int N> __global__ void t(int *a) { *a = N; }", "c++",
                      options=cuabi.ProgramOptions(arch="sm_90"))
    with pytest.raises(ValueError, match="name_expressions"):
        p.compile("cubin", name_expressions=["t<1>"], cache=c)
    with pytest.raises(TypeError, match="ProgramCacheResource"):
        p.compile("cubin", cache={})
    with pytest.raises(ValueError, match="extra_digest"):
        cuabi.Program(SRC, "c++", options=cuabi.ProgramOptions(
            arch="sm_90", include_path=str(tmp_path))).compile("cubin", cache=c)
    with pytest.raises(ValueError, match="not supported by the program cache"):
        cuabi.Program(SRC).compile("fatbin", arch=["sm_80", "sm_90"], cache=c)
    assert len(c) == 0


@needs_nvrtc
def test_compile_damaged_bytes_are_compiled_again(monkeypatch):
    compiles = _Compiles(monkeypatch)
    c = InMemoryProgramCache()
    opts = cuabi.ProgramOptions(arch="sm_90")
    key = make_program_cache_key(code=SRC, code_type="c++", options=opts, target_type="cubin")
    c[key] = b"not a cubin"                      # a user's cache that holds garbage
    obj = cuabi.Program(SRC, "c++", options=opts).compile("cubin", cache=c)
    assert compiles.n == 1 and obj.kernel_names == ["k"] and c[key] == bytes(obj)


@needs_nvrtc
def test_compile_arch_none_keys_the_architecture_it_compiles_for(monkeypatch):
    c = InMemoryProgramCache()
    obj = cuabi.Program(SRC).compile("cubin", cache=c)
    arch = _compile._default_arch()
    assert obj.arch == int(arch[3:])
    key = make_program_cache_key(code=SRC, code_type="c++",
                                 options=cuabi.ProgramOptions(arch=arch), target_type="cubin")
    assert c[key] == bytes(obj)


@needs_nvrtc
def test_compile_ptx_program_with_a_cache(monkeypatch):
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    ptx = bytes(cuabi.Program(SRC).compile("ptx", arch="sm_90")).decode()
    compiles = _Compiles(monkeypatch)
    c = InMemoryProgramCache()
    opts = cuabi.ProgramOptions(arch="sm_90")
    a = cuabi.Program(ptx, "ptx", options=opts).compile("cubin", cache=c)
    b = cuabi.Program(ptx, "ptx", options=opts).compile("cubin", cache=c)
    assert compiles.n == 1 and bytes(a) == bytes(b) and b.kernel_names == ["k"]
    assert c[make_program_cache_key(code=ptx, code_type="ptx", options=opts,
                                    target_type="cubin")] == bytes(a)


@needs_nvrtc
def test_compile_hit_in_a_fresh_process(tmp_path):
    child = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import cuabi
        from cuabi import _compile
        from cuabi.utils import FileStreamProgramCache
        n = [0]
        real = _compile.Program._compile
        def counted(*a):
            n[0] += 1
            return real(*a)
        _compile.Program._compile = counted
        with FileStreamProgramCache(sys.argv[2]) as cache:
            obj = cuabi.Program(sys.argv[3], "c++", options=cuabi.ProgramOptions(
                arch="sm_90")).compile("cubin", cache=cache)
        print(n[0], obj.kernel_names[0], len(bytes(obj)))
    """)
    pkg = os.path.dirname(os.path.dirname(cuabi.__file__))
    run = [sys.executable, "-c", child, pkg, str(tmp_path / "pc"), SRC]
    env = dict(os.environ, CUABI_CACHE="0")      # not cuabi's C cache: this one
    first = subprocess.run(run, capture_output=True, text=True, env=env, check=True).stdout.split()
    again = subprocess.run(run, capture_output=True, text=True, env=env, check=True).stdout.split()
    assert first[0] == "1" and again[0] == "0" and first[1:] == again[1:] == ["k", first[2]]
