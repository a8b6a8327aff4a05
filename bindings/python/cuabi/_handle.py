"""Base class of Python objects that own a cuabi handle."""
from __future__ import annotations

import ctypes as C
import weakref

from . import _capi
from ._lib import call, close_handle, counted, fast, holding, lib, raw
from .errors import ClosedHandleError


def _release(fn, value):
    # Runs from close(), the garbage collector or at exit: never raise.
    try:
        fn(C.c_void_p(value))
    except Exception:
        pass


class _ReleaseOnDeath:
    """A handle's release that runs when its owner is collected, or once when
    called (close(): cuabi._lib takes it out of the owner's `_fin`). For the
    objects every capture makes (Graph, GraphExec: `_release_on_death`), where
    a weakref.finalize cost more than the rest of the object (issue 24: a
    first capture as fast as cuda.core's). Unlike weakref.finalize it does
    not run at interpreter exit for an owner still alive then: the process's
    end frees a graph. The release is capture-safe in C, so this may run at
    any moment, a stream capture included."""
    __slots__ = ("fn", "value")

    def __call__(self):
        v = self.value
        if v is not None:
            self.value = None
            _release(self.fn, v)

    def __del__(self):
        try:
            self()
        except BaseException:  # interpreter shutdown
            pass


class Handle:
    """Owns one reference to a cuabi handle.

    Released by close(), by leaving a `with` block, or by a finalizer when the
    object is collected (also at interpreter exit, while the library is still
    loaded). Subclasses set _ctype to the handle's C type name.

    Safe from several threads (docs/RELIABILITY.md, "Threat model"): every C
    call is counted in `_uses` while it runs (cuabi._lib.use/done), close()
    marks the object closed at once -- later calls raise ClosedHandleError --
    and leaves the release to the last call in flight; it never blocks."""

    _ctype: str = ""
    _release_fn = None          # filled per subclass on first use
    _release_on_death = False   # True: a _ReleaseOnDeath, not a weakref.finalize
    # _uses: C calls in flight on the handle (unset until the first one)
    __slots__ = ("_h", "_fin", "_uses", "__weakref__")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        counted.add(cls)        # lib calls count instances passed to them

    def __init__(self, value: int, owned: bool = True):
        if not value:
            raise ValueError(f"{type(self).__name__}: NULL handle")
        self._h = value
        if not owned:
            self._fin = None
        elif type(self)._release_on_death:
            r = self._fin = _ReleaseOnDeath.__new__(_ReleaseOnDeath)
            r.fn, r.value = type(self)._releaser(), value
        else:
            self._fin = weakref.finalize(self, _release, type(self)._releaser(), value)
        if fast is None:
            self._uses = []     # the ctypes backend's count (cuabi._lib: handles in use)

    @classmethod
    def _releaser(cls):
        fn = cls.__dict__.get("_release_fn")
        if fn is None:
            verb = "release" if _capi.HANDLES[cls._ctype] == "shared" else "destroy"
            fn = raw(f"{cls._ctype}_{verb}")
            cls._release_fn = fn
        return fn

    @property
    def cuabi_handle(self) -> int:
        """The cuabi handle's value (an int); raises after close()."""
        h = self._h
        if h is None:
            raise ClosedHandleError(f"{type(self).__name__} is closed")
        return h

    @property
    def handle(self) -> int:
        """The cuabi handle (cuabi_handle), where cuda.core has no `handle`
        of its own: Stream, Event, Buffer, Kernel, ObjectCode, ... give
        cuda.core's (the CUstream, CUevent, pointer, ...)."""
        return self.cuabi_handle

    @property
    def _as_parameter_(self):  # lets a Handle be passed straight to ctypes
        return C.c_void_p(self.cuabi_handle)

    @property
    def closed(self) -> bool:
        return self._h is None

    @property
    def is_closed(self) -> bool:
        """cuda.core's name of `closed`."""
        return self.closed

    def close(self) -> None:
        """Release the handle: now, or when the last call on it that other
        threads have in flight returns. New calls raise ClosedHandleError at
        once; never blocks; idempotent."""
        close_handle(self)

    def __enter__(self):
        self.cuabi_handle
        return self

    def __exit__(self, *exc):
        self.close()

    def __eq__(self, other):
        return type(other) is type(self) and other._h == self._h and self._h is not None

    def __hash__(self):
        return hash((type(self), self._h))

    def __repr__(self):
        state = "closed" if self._h is None else f"0x{self._h:x}"
        return f"<cuabi.{type(self).__name__} {state}>"

    @classmethod
    def _borrowed(cls, value: int):
        """A new owning object for a borrowed handle: retains it first."""
        getattr(lib, cls._ctype + "_retain")(C.c_void_p(value))
        return cls._wrap(value)

    @classmethod
    def _borrowed_of(cls, fn: str, source, *args):
        """A new owning object for the handle `fn(source, *args)` lends (a
        buffer's device, a kernel's object code), or None for NULL: `source`
        stays in use until the handle is retained, so that a close() of it on
        another thread cannot release the lent object in between."""
        with holding(source):
            h = call(fn, source, *args)
            return cls._borrowed(h) if h else None

    @classmethod
    def _shared(cls, other: "Handle"):
        """A new owning object for the handle of `other` (retained while
        `other` is in use)."""
        with holding(other) as (h,):
            return cls._borrowed(h)

    @classmethod
    def _wrap(cls, value: int):
        obj = cls.__new__(cls)
        Handle.__init__(obj, value)
        return obj


counted.add(Handle)

if fast is not None:
    # The compiled paths read _h directly, and count calls in _uses.
    fast.set_handle_class(Handle, ClosedHandleError)
