"""Watching the stored session across processes (issue 16): ``portal_auth_watch``.

Two forms, both started from a :class:`~portal_keyring.PortalAuth`:

- ``async with auth.session_changes() as changes: async for change in changes:`` — an async
  iterator on the running loop (its events are dispatched on the loop's thread through the
  loop's completion queue, like the ``*_async`` coroutines). Leaving the block, ``aclose()`` or
  cancelling the iterating task stops the watch.
- ``with auth.watch(callback) as w:`` — ``callback(change)`` runs on a Python thread of the
  watch's own ("portal-watch-py"), which sleeps in ``select()`` until an event is ready.
  ``close()`` stops it.

Events (:class:`SessionChange`): ``signed_in`` (a new sign-in was stored by any process;
``end_user_id`` names its end user), ``signed_out`` (cleared or invalidated), ``locked`` (the
keyring is locked: NOT signed out; restore unlocks), ``resync`` (the provider restarted:
restore to learn the state). Every change after the watch started is reported, in order; the
state at the start is not (restore for it).
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import itertools
import os
import select
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from . import aio
from ._ffi import _AuthP, _declare
from ._library import lib as _lib


class _Watch(ctypes.Structure):
    """Opaque ``portal_watch``."""


_WatchP = ctypes.POINTER(_Watch)
#: ``void (*)(portal_watch_event, const char *end_user_id, void *user_data)``
_WATCH_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_declare(
    "portal_auth_watch",
    ctypes.c_int,
    [_AuthP, aio._QueueP, _WATCH_CB, ctypes.c_void_p, aio._NOTIFY, ctypes.POINTER(_WatchP)],
)
_declare("portal_watch_free", None, [_WatchP])

_KINDS = {1: "signed_in", 2: "signed_out", 3: "locked", 4: "resync"}


@dataclass(frozen=True)
class SessionChange:
    """One change of the stored session: ``kind`` is ``"signed_in"``, ``"signed_out"``,
    ``"locked"`` or ``"resync"``; ``end_user_id`` is set for ``"signed_in"`` only."""

    kind: str
    end_user_id: Optional[str] = None


# Where each watch's events go, by key (the C user_data); removed by destroy_notify.
_sinks: Dict[int, Callable[[SessionChange], None]] = {}
_keys = itertools.count(1)


def _on_event(kind: int, end_user_id: Optional[bytes], user_data: Optional[int]) -> None:
    sink = _sinks.get(user_data or 0)
    if sink is not None:
        text = end_user_id.decode("utf-8", "replace") if end_user_id is not None else None
        result = sink(SessionChange(_KINDS.get(kind, f"unknown-{kind}"), text))
        if inspect.iscoroutine(result):  # a lambda around an async function: nothing would await it
            result.close()
            raise TypeError(f"the watch callback {sink!r} returned a coroutine, which its thread cannot await: "
                            "use `async for change in auth.session_changes()` instead")


def _release(user_data: Optional[int]) -> None:
    _sinks.pop(user_data or 0, None)


_EVENT = _WATCH_CB(_on_event)
_RELEASE = aio._NOTIFY(_release)


def _start(auth_pointer: Any, queue_pointer: Any, key: int) -> Any:
    """``portal_auth_watch`` (blocks for the subscription and the baseline read, at most the
    call deadline). :raises PortalKeyringError: (destroy_notify already removed the sink)."""
    watch = _WatchP()
    _lib.portal_auth_watch(auth_pointer, queue_pointer, _EVENT, key, _RELEASE, ctypes.byref(watch))
    return watch


class SessionChanges:
    """The async form (:meth:`PortalAuth.session_changes`): an async iterator, and an async
    context manager whose entry waits until the watch is live::

        async with auth.session_changes() as changes:   # live here: every later change is seen
            async for change in changes:
                ...

    Used without ``async with``, the watch starts at the first iteration. Cancelling the
    iterating task, ``aclose()`` or leaving the ``async with`` block stops the watch. One loop:
    use it on the loop that started it.
    """

    def __init__(self, auth: Any) -> None:
        self._auth = auth
        self._changes: "Optional[asyncio.Queue[SessionChange]]" = None
        self._key = 0
        self._watch: Any = None
        self._closed = False

    async def start(self) -> None:
        """Starts the watch (off the loop's thread: a bus round trip and a keyring read); a
        no-op once started. :raises SessionStorageFailure: no session bus."""
        if self._changes is not None or self._closed:
            return
        queue = aio.loop_queue()
        changes: "asyncio.Queue[SessionChange]" = asyncio.Queue()
        key = next(_keys)
        _sinks[key] = changes.put_nowait  # runs on the loop's thread (its queue's dispatch)
        with self._auth._use() as pointer:
            self._watch = await queue.loop.run_in_executor(None, _start, pointer, queue.pointer, key)
        self._key, self._changes = key, changes

    def __aiter__(self) -> "SessionChanges":
        return self

    async def __anext__(self) -> SessionChange:
        await self.start()
        if self._closed or self._changes is None:
            raise StopAsyncIteration
        try:
            return await self._changes.get()
        except asyncio.CancelledError:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Stops the watch (waits for a keyring read in progress, if any). Idempotent."""
        self._closed = True
        watch, self._watch = self._watch, None
        if watch is not None:
            _lib.portal_watch_free(watch)
        _sinks.pop(self._key, None)

    async def __aenter__(self) -> "SessionChanges":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            try:
                _lib.portal_watch_free(watch)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass


class SessionWatch:
    """The callback form (:meth:`PortalAuth.watch`). A context manager; :meth:`close` stops it."""

    def __init__(self, auth: Any, callback: Callable[[SessionChange], None]) -> None:
        if not callable(callback):
            raise TypeError("callback must be callable")
        if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(getattr(callback, "__call__", None)):
            raise TypeError("callback is an async function, which the watch's thread cannot await: "
                            "use `async for change in auth.session_changes()` on the loop instead")
        self._callback = callback
        pointer = aio._QueueP()
        _lib.portal_completion_queue_new_pollable(ctypes.byref(pointer))
        self._queue: Any = pointer
        self._fd = int(_lib.portal_completion_queue_get_fd(pointer))
        self._stop_r, self._stop_w = os.pipe()
        self._key = next(_keys)
        _sinks[self._key] = callback
        self._watch: Any = None
        try:
            with auth._use() as auth_pointer:
                self._watch = _start(auth_pointer, pointer, self._key)
        except BaseException:
            self._free_queue()
            raise
        self._thread = threading.Thread(target=self._run, name="portal-watch-py", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ran = ctypes.c_size_t(0)
        while True:
            ready, _, _ = select.select([self._fd, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            _lib.portal_completion_queue_dispatch(self._queue, ctypes.byref(ran))

    def close(self) -> None:
        """Stops the watch: no callback starts after this returns (unless called from the
        callback itself, which may still finish). Idempotent."""
        watch, self._watch = self._watch, None
        if watch is None:
            return
        _lib.portal_watch_free(watch)
        os.write(self._stop_w, b"x")
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._free_queue()

    def _free_queue(self) -> None:
        _lib.portal_completion_queue_free(self._queue)
        _sinks.pop(self._key, None)
        for fd in (self._stop_r, self._stop_w):
            os.close(fd)

    @property
    def closed(self) -> bool:
        return self._watch is None

    def __enter__(self) -> "SessionWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
