"""Keeping Python callables alive while C holds them, and carrying a
callback's exception back to the caller of the cuabi function."""
from __future__ import annotations

import itertools
import threading

_registry: dict[int, object] = {}
_ids = itertools.count(1)
_lock = threading.Lock()
_pending = threading.local()


def keep(obj) -> int:
    """Store obj under a new non-zero key usable as a C `void *payload`."""
    with _lock:
        key = next(_ids)
        _registry[key] = obj
    return key


def get(key):
    return _registry.get(key)


def drop(key) -> None:
    with _lock:
        _registry.pop(key, None)


def note_exception(exc: BaseException) -> None:
    """Called inside a callback that failed: the next CallbackError raised on
    this thread is chained to exc."""
    _pending.exc = exc


def take_exception():
    exc = getattr(_pending, "exc", None)
    _pending.exc = None
    return exc


# Captures begun from Python (cuabi._graph) in progress: the keep-lists of
# their graphs. Work queued during one (cuabi.launch, Buffer copies) appends
# what C cannot keep alive for the graph -- arguments passed by address,
# host memory of copies -- to every list here. Empty otherwise: a single
# truth test on the hot paths.
captures: list = []


def keep_for_captures(obj) -> None:
    for keep in captures:
        keep.append(obj)
