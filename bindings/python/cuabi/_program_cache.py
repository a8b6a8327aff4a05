"""cuda.core.utils's program caches (issue 24): ProgramCacheResource (the
abstract base), InMemoryProgramCache and FileStreamProgramCache -- bytes in,
bytes out, keyed by bytes or str (make_program_cache_key, in _compile, makes
the usual key; Program.compile(cache=...) uses both).

A FileStreamProgramCache directory is untrusted input, like cuabi's own
compile cache directory (docs/RELIABILITY.md, "Threat model: files, the
cache and manifests"); the same rules apply here, in Python: a directory
that is not this user's, or that others may write to without its sticky
bit, is refused when the cache is made; entries and directories are opened
relative to their parent's descriptor without following links
(O_NOFOLLOW), entries without blocking (O_NONBLOCK: a FIFO is a miss, not a
hang); an entry that is not this user's own (another owner than this user
or root, or writable by group or others) is never used nor removed; its
size is checked against the header before a byte is read, and never more
than the file's size + 1 bytes are read; each entry carries its key's hash
and a SHA-256 of its payload, so a truncated, garbage or misplaced entry is
a miss (and is removed); writes go to tmp/ (0600) and are renamed into
place, so a reader sees the old entry or the new one.

Imports nothing of cuabi: an ObjectCode value is recognised by its code
and code_type attributes (cuabi/README.md: duck typing where a type check
is all that is needed)."""
from __future__ import annotations

import abc
import collections
import collections.abc
import contextlib
import errno
import hashlib
import os
import secrets
import stat
import struct
import threading
import time
from pathlib import Path

# The on-disk entry: a header, then the payload (the compiled bytes).
# magic, payload size, SHA-256 of the key, SHA-256 of the payload.
_MAGIC = b"CUABIPC1"
_HEADER = struct.Struct("<8sQ32s32s")
# The largest payload stored or read (cuabi's C cache has the same bound).
MAX_ENTRY_BYTES = 1 << 30
_ENTRIES = "entries"
_TMP = "tmp"
# Temporary files older than this belong to a writer that died.
_TMP_STALE_SECONDS = 3600

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW


# ---------------------------------------------------------------- values

def _value_bytes(value) -> bytes:
    """The bytes a value stores: bytes-like as is, an ObjectCode its code."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if hasattr(value, "code_type") and hasattr(type(value), "code"):
        code = value.code
        if isinstance(code, (bytes, bytearray, memoryview)):
            return bytes(code)
    raise TypeError(f"cache values must be bytes-like or ObjectCode, got {type(value).__name__}")


def _key_bytes(key) -> bytes:
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    if isinstance(key, str):
        return key.encode("utf-8")
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")


def _size_cap(max_size_bytes):
    if max_size_bytes is None:
        return None
    if isinstance(max_size_bytes, bool) or not isinstance(max_size_bytes, int):
        raise TypeError(f"max_size_bytes must be an int or None, not "
                        f"{type(max_size_bytes).__name__}")
    if max_size_bytes <= 0:
        raise ValueError("max_size_bytes must be positive or None (0 would evict every write)")
    return max_size_bytes


# ---------------------------------------------------------------- the base

class ProgramCacheResource(abc.ABC):
    """The base of compiled-program caches (cuda.core.utils.ProgramCacheResource).

    A cache maps keys (bytes, or str taken as its UTF-8 bytes: "k" and b"k"
    are one entry) to the compiled bytes (CUBIN, PTX, LTO-IR). A value may
    be bytes, bytearray, memoryview or an ObjectCode (its bytes are stored);
    reads return bytes. make_program_cache_key() makes the usual key, and
    Program.compile(..., cache=cache) looks up, compiles on a miss and
    stores.

    There is no ``in``: ``if key in cache: cache[key]`` races another
    process's eviction or rewrite between the two steps; get() answers in
    one (``key in cache`` raises TypeError, as in cuda.core). The
    ObjectCode's name-expression mapping is not stored, only the bytes."""

    @abc.abstractmethod
    def __getitem__(self, key) -> bytes:
        """The bytes stored under key; KeyError when there are none."""

    @abc.abstractmethod
    def __setitem__(self, key, value) -> None:
        """Store value (bytes-like or ObjectCode) under key."""

    @abc.abstractmethod
    def __delitem__(self, key) -> None:
        """Remove key's entry; KeyError when there is none."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """How many entries the cache holds."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every entry."""

    def get(self, key, default=None):
        """self[key], or default when key has no entry."""
        try:
            return self[key]
        except KeyError:
            return default

    def update(self, items, /) -> None:
        """Store each (key, value) of a mapping or an iterable of pairs, one
        __setitem__ each (not all-or-nothing: a failure keeps the earlier)."""
        if isinstance(items, collections.abc.Mapping):
            items = items.items()
        for key, value in items:
            self[key] = value

    def close(self) -> None:  # noqa: B027 (a no-op by default, as in cuda.core)
        """Release what the cache holds (nothing, for both caches here)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()


# ---------------------------------------------------------------- in memory

class InMemoryProgramCache(ProgramCacheResource):
    """A cache in this process's memory, least recently used entries evicted
    first (cuda.core.utils.InMemoryProgramCache). max_size_bytes (None: no
    bound) bounds the sum of the stored payloads; a write that alone exceeds
    it is evicted too. Reads (cache[key], get) make an entry the most
    recently used. Thread-safe: one lock around each method."""

    def __init__(self, *, max_size_bytes: int | None = None) -> None:
        self._max_size_bytes = _size_cap(max_size_bytes)
        self._entries: collections.OrderedDict[bytes, bytes] = collections.OrderedDict()
        self._total = 0
        self._lock = threading.RLock()

    def __getitem__(self, key) -> bytes:
        k = _key_bytes(key)
        with self._lock:
            data = self._entries.get(k)
            if data is None:
                raise KeyError(key)
            self._entries.move_to_end(k)
            return data

    def __setitem__(self, key, value) -> None:
        data = _value_bytes(value)
        k = _key_bytes(key)
        with self._lock:
            old = self._entries.pop(k, None)
            if old is not None:
                self._total -= len(old)
            self._entries[k] = data
            self._total += len(data)
            cap = self._max_size_bytes
            while cap is not None and self._total > cap and self._entries:
                _, gone = self._entries.popitem(last=False)
                self._total -= len(gone)

    def __delitem__(self, key) -> None:
        k = _key_bytes(key)
        with self._lock:
            data = self._entries.pop(k, None)
            if data is None:
                raise KeyError(key)
            self._total -= len(data)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._total = 0


# ---------------------------------------------------------------- on disk

def _default_directory() -> Path:
    """$XDG_CACHE_HOME/cuabi-python/program-cache (~/.cache/... without it):
    not cuda.core's cuda-python/program-cache, whose entries are headerless
    (docs/compile-cache.md, "cuda.core's program caches"), nor cuabi's C
    cache directory."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "cuabi-python" / "program-cache"


def _file_refusal(st, uid: int) -> str | None:
    """Why a file (its fstat) is not this user's own, or None when it is."""
    if st.st_uid not in (uid, 0):
        return f"owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022:
        who = "its group" if st.st_mode & 0o020 else "others"
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _dir_refusal(st, uid: int) -> str | None:
    """Why a directory may not hold files this user trusts, or None: it must
    be this user's, and writable by no one else unless sticky (like /tmp;
    each entry is then checked on its own)."""
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        who = "its group" if st.st_mode & 0o020 else "others"
        return (f"writable by {who} without the sticky bit "
                f"(mode {stat.S_IMODE(st.st_mode):04o})")
    return None


class _Untrusted(Exception):
    """A directory of the cache is refused (the reason is the message)."""


def _stat_key(st):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _close(*fds):
    for fd in fds:
        if fd is not None and fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


class FileStreamProgramCache(ProgramCacheResource):
    """A cache in a directory that several processes share
    (cuda.core.utils.FileStreamProgramCache): path (None: the user's cache
    directory, $XDG_CACHE_HOME/cuabi-python/program-cache) is created if
    missing (0700); max_size_bytes (None: no bound) is a soft bound on the
    bytes on disk, enforced on writes by removing the least recently read
    entries (each read sets the entry's access time); concurrent writers may
    exceed it for a moment.

    Entries live in entries/<2 hex>/<62 hex> (the SHA-256 of the key), each
    written to tmp/ (0600, fsync'ed) and renamed into place: readers of
    other processes see the old entry or the new one, never a part. Safe
    from several threads and processes.

    The directory is untrusted input (module docstring): one that is not
    this user's, or that others may write to without its sticky bit, raises
    PermissionError here; within it, links are not followed, FIFOs do not
    block, another user's entry is never used, and a damaged entry is a
    miss (and removed). An entry is a 80-byte header (magic, size, the
    key's and the payload's SHA-256) then the compiled bytes: cuda.core's
    headerless entries are not read, and cuda.core does not read these
    (docs/compile-cache.md says why). A payload over 1 GiB is refused
    (ValueError)."""

    def __init__(self, path: str | os.PathLike | None = None, *,
                 max_size_bytes: int | None = None) -> None:
        self._max_size_bytes = _size_cap(max_size_bytes)
        self._root = Path(os.fspath(path)) if path is not None else _default_directory()
        self._uid = os.geteuid()
        self._size_lock = threading.Lock()
        self._tracked = 0
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            root = self._open_root()
            try:
                for sub in (_ENTRIES, _TMP):
                    _close(self._open_dir(root, sub, create=True))
            finally:
                _close(root)
        except _Untrusted as e:
            raise PermissionError(errno.EPERM, f"FileStreamProgramCache: {e}",
                                  str(self._root)) from None
        self._sweep_stale_tmp()
        if self._max_size_bytes is not None:
            self._tracked = self._total_size()

    def __repr__(self):
        return f"FileStreamProgramCache({str(self._root)!r}, max_size_bytes={self._max_size_bytes})"

    # ---- directories, each opened relative to its parent, links not followed

    def _open_root(self) -> int:
        fd = os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        why = _dir_refusal(os.fstat(fd), self._uid)
        if why:
            _close(fd)
            raise _Untrusted(f"{self._root}: {why}")
        return fd

    def _open_dir(self, parent: int, name: str, create: bool = False) -> int:
        """A subdirectory's descriptor; FileNotFoundError when it is missing
        (and not create), _Untrusted when something else is at its place or
        it is not this user's. With create, a link or a file planted at its
        place is removed first (only the link: its target stays)."""
        for attempt in range(3):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent)
                continue
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
                if not create or attempt == 2:
                    raise _Untrusted(f"{name}: {kind}") from None
                try:
                    os.unlink(name, dir_fd=parent)
                except OSError:
                    raise _Untrusted(f"{name}: {kind}, and it could not be removed") from None
                continue
            why = _dir_refusal(os.fstat(fd), self._uid)
            if why:
                _close(fd)
                raise _Untrusted(f"{name}: {why}")
            return fd
        raise _Untrusted(f"{name}: keeps changing")

    @contextlib.contextmanager
    def _entry_dir(self, hexd: str, create: bool):
        """(descriptor of entries/<2 hex>, descriptor of tmp/ or None)."""
        fds = []
        if create:      # removed by hand since: made again, as cuda.core does
            self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fds.append(self._open_root())
            fds.append(self._open_dir(fds[0], _ENTRIES, create))
            fds.append(self._open_dir(fds[1], hexd[:2], create))
            fds.append(self._open_dir(fds[0], _TMP, True) if create else None)
            yield fds[2], fds[3]
        finally:
            _close(*fds)

    @staticmethod
    def _name(key) -> tuple[bytes, str]:
        k = _key_bytes(key)
        digest = hashlib.sha256(k).digest()
        return digest, digest.hex()

    # ---- the mapping

    def __getitem__(self, key) -> bytes:
        digest, hexd = self._name(key)
        try:
            with self._entry_dir(hexd, create=False) as (sub, _):
                data = self._read(sub, hexd[2:], digest)
        except (OSError, _Untrusted):
            data = None         # no directory, or one refused: a miss
        if data is None:
            raise KeyError(key)
        return data

    def _read(self, sub: int, name: str, digest: bytes) -> bytes | None:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=sub)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:          # a link: removed, never followed
                self._discard(sub, name, None)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):    # FIFO, socket, device, directory
                if not stat.S_ISDIR(st.st_mode):
                    self._discard(sub, name, st)
                return None
            if _file_refusal(st, self._uid):    # not ours: neither used nor removed
                return None
            if not _HEADER.size <= st.st_size <= _HEADER.size + MAX_ENTRY_BYTES:
                self._discard(sub, name, st)
                return None
            raw = self._read_fd(fd, st.st_size)
            if raw is None:
                return None                     # changed size while read: a miss
            magic, size, key_hash, sum_ = _HEADER.unpack_from(raw)
            payload = raw[_HEADER.size:]
            if (magic != _MAGIC or size != len(payload) or key_hash != digest
                    or hashlib.sha256(payload).digest() != sum_):
                self._discard(sub, name, st)
                return None
            with contextlib.suppress(OSError):  # least recently read goes first
                os.utime(fd, ns=(time.time_ns(), st.st_mtime_ns))
            return payload
        finally:
            _close(fd)

    @staticmethod
    def _read_fd(fd: int, size: int) -> bytes | None:
        """The file's size bytes; None when it holds more or fewer."""
        chunks, got = [], 0
        while got <= size:
            chunk = os.read(fd, min(size + 1 - got, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks) if got == size else None

    def _discard(self, sub: int, name: str, st) -> None:
        """Remove a damaged entry, a FIFO or a link at an entry's place --
        if it is still the one looked at (a writer may have replaced it) and
        this user's to remove; best effort."""
        try:
            now = os.stat(name, dir_fd=sub, follow_symlinks=False)
            if st is not None and (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                return
            if stat.S_ISDIR(now.st_mode):
                return
            if stat.S_ISREG(now.st_mode) and _file_refusal(now, self._uid):
                return
            os.unlink(name, dir_fd=sub)
        except OSError:
            pass

    def __setitem__(self, key, value) -> None:
        data = _value_bytes(value)
        if len(data) > MAX_ENTRY_BYTES:
            raise ValueError(f"FileStreamProgramCache: an entry of {len(data)} bytes, more than "
                             f"the {MAX_ENTRY_BYTES} allowed")
        digest, hexd = self._name(key)
        header = _HEADER.pack(_MAGIC, len(data), digest, hashlib.sha256(data).digest())
        try:
            with self._entry_dir(hexd, create=True) as (sub, tmp):
                old = self._own_size(sub, hexd[2:])
                tmp_name = f"entry-{os.getpid()}-{secrets.token_hex(8)}"
                fd = os.open(tmp_name, _WRITE_FLAGS, 0o600, dir_fd=tmp)
                try:
                    try:
                        for part in (header, data):
                            view = memoryview(part)
                            while view:
                                view = view[os.write(fd, view):]
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    os.replace(tmp_name, hexd[2:], src_dir_fd=tmp, dst_dir_fd=sub)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp_name, dir_fd=tmp)
                    raise
        except _Untrusted as e:
            raise PermissionError(errno.EPERM, f"FileStreamProgramCache: {e}",
                                  str(self._root)) from None
        if self._max_size_bytes is None:
            return
        with self._size_lock:
            self._tracked += _HEADER.size + len(data) - old
            over = self._tracked > self._max_size_bytes
        if over:
            self._enforce_size_cap()

    def _own_size(self, sub: int, name: str) -> int:
        try:
            st = os.stat(name, dir_fd=sub, follow_symlinks=False)
        except OSError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) and not _file_refusal(st, self._uid) else 0

    def __delitem__(self, key) -> None:
        _, hexd = self._name(key)
        try:
            with self._entry_dir(hexd, create=False) as (sub, _):
                st = os.stat(hexd[2:], dir_fd=sub, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    raise KeyError(key)
                os.unlink(hexd[2:], dir_fd=sub)
        except (FileNotFoundError, _Untrusted):
            raise KeyError(key) from None
        if self._max_size_bytes is not None and stat.S_ISREG(st.st_mode):
            with self._size_lock:
                self._tracked = max(0, self._tracked - st.st_size)

    def __len__(self) -> int:
        """The entries on disk this user could read (regular files of its own,
        under entries/; an entry of an older key schema counts until evicted)."""
        return sum(1 for _ in self._scan())

    def clear(self) -> None:
        """Remove every entry of this user's (and links or FIFOs planted
        among them); another user's file in a shared sticky directory stays.
        Temporary files of writers still at work stay too."""
        for ent, sub_name, sub in self._entry_dirs():
            with os.scandir(sub) as it:
                names = [e.name for e in it]
            for name in names:
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=sub, follow_symlinks=False)
                    self._discard(sub, name, st)
            with contextlib.suppress(OSError):
                os.rmdir(sub_name, dir_fd=ent)
        self._sweep_stale_tmp()
        if self._max_size_bytes is not None:
            total = self._total_size()
            with self._size_lock:
                self._tracked = total

    # ---- scanning, eviction

    @staticmethod
    def _subdirs(ent: int) -> list[str]:
        with os.scandir(ent) as it:
            return [e.name for e in it if e.is_dir(follow_symlinks=False)]

    def _entry_dirs(self):
        """(entries/ fd, name, fd) of each directory under entries/ that
        opens safely; each fd is closed once the consumer moves on."""
        try:
            root = self._open_root()
        except (OSError, _Untrusted):
            return
        try:
            try:
                ent = self._open_dir(root, _ENTRIES)
            except (OSError, _Untrusted):
                return
            try:
                for sub_name in self._subdirs(ent):
                    try:
                        sub = self._open_dir(ent, sub_name)
                    except (OSError, _Untrusted):
                        continue
                    try:
                        yield ent, sub_name, sub
                    finally:
                        _close(sub)
            finally:
                _close(ent)
        finally:
            _close(root)

    def _scan(self):
        """(entries/<sub> name, file name, stat) of each regular file of this
        user's under entries/."""
        for _, sub_name, sub in self._entry_dirs():
            found = []
            with os.scandir(sub) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode) and not _file_refusal(st, self._uid):
                        found.append((e.name, st))
            yield from ((sub_name, name, st) for name, st in found)

    def _tmp_files(self):
        """(name, stat) of each regular file of this user's in tmp/."""
        try:
            root = self._open_root()
        except (OSError, _Untrusted):
            return []
        try:
            tmp = self._open_dir(root, _TMP)
        except (OSError, _Untrusted):
            _close(root)
            return []
        out = []
        try:
            with os.scandir(tmp) as it:
                for e in it:
                    with contextlib.suppress(OSError):
                        st = e.stat(follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode) and not _file_refusal(st, self._uid):
                            out.append((e.name, st))
        finally:
            _close(tmp, root)
        return out

    def _sweep_stale_tmp(self) -> None:
        cutoff = time.time() - _TMP_STALE_SECONDS
        stale = [name for name, st in self._tmp_files() if st.st_mtime < cutoff]
        if not stale:
            return
        with contextlib.suppress(OSError, _Untrusted):
            root = self._open_root()
            try:
                tmp = self._open_dir(root, _TMP)
                try:
                    for name in stale:
                        with contextlib.suppress(OSError):
                            os.unlink(name, dir_fd=tmp)
                finally:
                    _close(tmp)
            finally:
                _close(root)

    def _total_size(self) -> int:
        return (sum(st.st_size for _, _, st in self._scan())
                + sum(st.st_size for _, st in self._tmp_files()))

    def _enforce_size_cap(self) -> None:
        cap = self._max_size_bytes
        self._sweep_stale_tmp()
        entries = sorted(self._scan(), key=lambda e: e[2].st_atime_ns)
        total = sum(st.st_size for _, _, st in entries) + sum(
            st.st_size for _, st in self._tmp_files())
        if total > cap:
            try:
                root = self._open_root()
                ent = self._open_dir(root, _ENTRIES)
            except (OSError, _Untrusted):
                return
            try:
                for sub_name, name, st in entries:
                    if total <= cap:
                        break
                    try:
                        sub = self._open_dir(ent, sub_name)
                    except (OSError, _Untrusted):
                        continue
                    try:
                        now = os.stat(name, dir_fd=sub, follow_symlinks=False)
                        if _stat_key(now) != _stat_key(st):
                            total += now.st_size - st.st_size   # rewritten meanwhile: kept
                            continue
                        os.unlink(name, dir_fd=sub)
                        total -= st.st_size
                    except FileNotFoundError:
                        total -= st.st_size                      # another process evicted it
                    except OSError:
                        pass
                    finally:
                        _close(sub)
            finally:
                _close(ent, root)
        with self._size_lock:
            self._tracked = total
