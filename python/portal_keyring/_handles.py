"""Handle ownership shared by every class that owns a library handle."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, ContextManager, Iterator, Optional, TypeVar

from ._strings import _invalid

_O = TypeVar("_O", bound="_Owner")


class _Handle:
    """One library handle, freed exactly once: on ``close()`` when no call is in flight, else
    by the last call in flight when it returns (so closing from another thread never frees a
    handle under a running call)."""

    __slots__ = ("_pointer", "_free", "_kind", "_lock", "_users", "_closed")

    def __init__(self, pointer: Any, free: Callable[[Any], None], kind: str) -> None:
        self._pointer = pointer
        self._free = free
        self._kind = kind
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def use(self) -> Iterator[Any]:
        with self._lock:
            if self._closed:
                raise _invalid(f"{self._kind}: the handle is closed")
            self._users += 1
        try:
            yield self._pointer
        finally:
            with self._lock:
                self._users -= 1
                pointer = self._take_if_done()
            if pointer is not None:
                self._free(pointer)

    def _take_if_done(self) -> Any:
        if self._closed and self._users == 0 and self._pointer is not None:
            pointer, self._pointer = self._pointer, None
            return pointer
        return None

    def close(self, free: Optional[Callable[[Any], None]] = None) -> bool:
        """Closes the handle; ``free`` (default: the handle's own) frees the pointer, now or when
        the last call in flight returns. :returns: ``False`` if it was closed already (then
        ``free`` is never called)."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            if free is not None:
                self._free = free
            pointer = self._take_if_done()
        if pointer is not None:
            self._free(pointer)
        return True


class _Owner:
    """Base of the handle-owning classes: context manager, ``close()``, free on collection."""

    _h: Optional[_Handle] = None

    def close(self) -> None:
        """Frees the library handle (idempotent). Further use raises :class:`InvalidArgument`."""
        if self._h is not None:
            self._h.close()

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`close` was called (or the handle was never created)."""
        return self._h is None or self._h.closed

    def _use(self) -> ContextManager[Any]:
        """Borrows the library pointer for one call; raises :class:`InvalidArgument` if closed."""
        if self._h is None:
            raise _invalid(f"{type(self).__name__}: the handle is closed")
        return self._h.use()

    def __enter__(self: _O) -> _O:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
