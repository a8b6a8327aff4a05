"""Base class of Python objects that own a cuabi handle."""
from __future__ import annotations

import ctypes as C
import weakref

from . import _capi
from ._lib import fast, lib, raw
from .errors import ClosedHandleError


def _release(fn, value):
    # Runs from close(), the garbage collector or at exit: never raise.
    try:
        fn(C.c_void_p(value))
    except Exception:
        pass


class Handle:
    """Owns one reference to a cuabi handle.

    Released by close(), by leaving a `with` block, or by a finalizer when the
    object is collected (also at interpreter exit, while the library is still
    loaded). Subclasses set _ctype to the handle's C type name."""

    _ctype: str = ""
    _release_fn = None          # filled per subclass on first use
    __slots__ = ("_h", "_fin", "__weakref__")

    def __init__(self, value: int, owned: bool = True):
        if not value:
            raise ValueError(f"{type(self).__name__}: NULL handle")
        self._h = value
        self._fin = weakref.finalize(self, _release, type(self)._releaser(), value) \
            if owned else None

    @classmethod
    def _releaser(cls):
        fn = cls.__dict__.get("_release_fn")
        if fn is None:
            verb = "release" if _capi.HANDLES[cls._ctype] == "shared" else "destroy"
            fn = raw(f"{cls._ctype}_{verb}")
            cls._release_fn = fn
        return fn

    @property
    def handle(self) -> int:
        """The raw handle value (an int); raises after close()."""
        h = self._h
        if h is None:
            raise ClosedHandleError(f"{type(self).__name__} is closed")
        return h

    @property
    def _as_parameter_(self):  # lets a Handle be passed straight to ctypes
        return C.c_void_p(self.handle)

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Release the handle now; idempotent."""
        if self._h is not None:
            self._h = None
            if self._fin is not None:
                self._fin()

    def __enter__(self):
        self.handle
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
    def _wrap(cls, value: int):
        obj = cls.__new__(cls)
        Handle.__init__(obj, value)
        return obj


if fast is not None:
    fast.set_handle_class(Handle)    # the compiled paths read _h directly
