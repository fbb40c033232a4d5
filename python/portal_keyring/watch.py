"""Watching the stored session across processes (docs/threading.md): ``portal_auth_watch``.

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
restore to learn the state), ``available`` (the keyring answers again after a call of this process failed for
want of it, e.g. a stopped provider resumed: restore to learn the state). Every change after the watch started is reported, in order; the
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
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from . import aio
from ._ffi import _AuthP, _declare
from ._library import lib as _lib
from .errors import Status, _error


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
_declare(
    "portal_auth_watch_async",
    ctypes.c_int,
    [_AuthP, aio._QueueP, _WATCH_CB, ctypes.c_void_p, aio._NOTIFY, ctypes.POINTER(_WatchP)],
)
_declare("portal_watch_free", None, [_WatchP])
# An enum, not a portal_status: declared unsigned so that no status check applies to it.
_declare("portal_watch_current_origin", ctypes.c_uint, [])

_KINDS = {1: "signed_in", 2: "signed_out", 3: "locked", 4: "resync", 7: "available"}
_STARTED, _FAILED = 5, 6  # portal_auth_watch_async's first event (never a SessionChange)
_ORIGINS = {1: "this_process", 2: "other_process"}  # portal_watch_origin; others: "unknown"


@dataclass(frozen=True)
class SessionChange:
    """One change of the stored session: ``kind`` is ``"signed_in"``, ``"signed_out"``,
    ``"locked"``, ``"resync"`` or ``"available"``; ``end_user_id`` is set for ``"signed_in"``
    only. ``origin`` says who made a sign-in or sign-out: ``"this_process"`` (the app's own,
    a 401 it reported included), ``"other_process"`` (another window, a URL handler), else
    ``"unknown"``; it takes no part in equality."""

    kind: str
    end_user_id: Optional[str] = None
    origin: str = field(default="unknown", compare=False)


# Where each watch's events go, by key (the C user_data): (event, its text); removed by
# destroy_notify.
_sinks: Dict[int, Callable[[int, Optional[str]], None]] = {}
_keys = itertools.count(1)


def _change(kind: int, text: Optional[str]) -> SessionChange:
    # Both sinks call this inside the C watch callback, where the C ABI's origin is readable.
    origin = _ORIGINS.get(_lib.portal_watch_current_origin(), "unknown")
    return SessionChange(_KINDS.get(kind, f"unknown-{kind}"), text, origin)


def _callback_sink(callback: Callable[[SessionChange], object]) -> Callable[[int, Optional[str]], None]:
    """The callback form's sink: every event is a change, a coroutine returned is refused."""

    def sink(kind: int, text: Optional[str]) -> None:
        result = callback(_change(kind, text))
        if inspect.iscoroutine(result):  # a lambda around an async function: nothing would await it
            result.close()
            raise TypeError(f"the watch callback {callback!r} returned a coroutine, which its thread cannot await: "
                            "use `async for change in auth.session_changes()` instead")

    return sink


def _on_event(kind: int, end_user_id: Optional[bytes], user_data: Optional[int]) -> None:
    sink = _sinks.get(user_data or 0)
    if sink is not None:
        sink(kind, end_user_id.decode("utf-8", "replace") if end_user_id is not None else None)


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
        # Set once the watch is live. None in the queue: the iteration ends (aclose() from
        # another task wakes a waiting __anext__ with it, as a shut-down asyncio.Queue would).
        self._changes: "Optional[asyncio.Queue[Optional[SessionChange]]]" = None
        # While the watch starts: resolved by its first event (STARTED, or FAILED with the
        # error) or by aclose(); the queue its later events go to; how many start() wait.
        self._starting: "Optional[asyncio.Future[None]]" = None
        self._pending: "Optional[asyncio.Queue[Optional[SessionChange]]]" = None
        self._waiters = 0
        self._key = 0
        self._watch: Any = None
        self._closed = False

    async def start(self) -> None:
        """Starts the watch and waits until it is live; a no-op once started. Never blocks the
        loop (``portal_auth_watch_async``: the subscription and the baseline read run on the
        library's watch thread). Cancelled while it waits — ``asyncio.wait_for`` with a stalled
        provider — the watch is freed (Tests/python/test_watch_lifecycle.py); a later call
        starts anew. :raises SessionStorageFailure: no session bus."""
        if self._changes is not None or self._closed:
            return
        if self._starting is None:
            self._begin()
        starting, pending = self._starting, self._pending
        assert starting is not None
        self._waiters += 1
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The last waiter gone before the watch became anyone's: nobody will use it.
            if self._waiters == 1 and self._starting is starting and self._changes is None:
                self._stop()
            raise
        except BaseException:  # FAILED: nothing follows, free the watch
            if self._starting is starting:
                self._stop()
            raise
        finally:
            self._waiters -= 1
        if self._starting is starting and not self._closed:
            self._changes = pending

    def _begin(self) -> None:
        """portal_auth_watch_async: returns at once; the first event says how the start went."""
        queue = aio.loop_queue()
        changes: "asyncio.Queue[Optional[SessionChange]]" = asyncio.Queue()
        starting: "asyncio.Future[None]" = queue.loop.create_future()

        def sink(kind: int, text: Optional[str]) -> None:  # on the loop's thread (its queue's dispatch)
            if kind == _STARTED:
                if not starting.done():
                    starting.set_result(None)
            elif kind == _FAILED:
                if not starting.done():
                    starting.set_exception(_error(Status.SESSION_STORAGE, text or "the watch could not start"))
            else:
                changes.put_nowait(_change(kind, text))

        key = next(_keys)
        _sinks[key] = sink
        watch = _WatchP()
        try:
            with self._auth._use() as pointer:
                _lib.portal_auth_watch_async(pointer, queue.pointer, _EVENT, key, _RELEASE, ctypes.byref(watch))
        except BaseException:  # a failed call ran destroy_notify already; a closed auth made no call
            _sinks.pop(key, None)
            raise
        self._watch, self._key, self._starting, self._pending = watch, key, starting, changes

    def _stop(self) -> None:
        """Frees the watch (never waits for the keyring) and forgets a start in progress."""
        watch, self._watch = self._watch, None
        if watch is not None:
            _lib.portal_watch_free(watch)
        _sinks.pop(self._key, None)
        starting, self._starting, self._pending = self._starting, None, None
        if starting is not None and not starting.done():
            starting.set_result(None)  # waiters of a start that aclose() ended return

    def __aiter__(self) -> "SessionChanges":
        return self

    async def __anext__(self) -> SessionChange:
        await self.start()
        if self._closed or self._changes is None:
            raise StopAsyncIteration
        try:
            change = await self._changes.get()
        except asyncio.CancelledError:
            await self.aclose()
            raise
        if change is None:
            raise StopAsyncIteration
        return change

    async def aclose(self) -> None:
        """Stops the watch; an ``async for`` waiting in another task ends. Never waits for the
        keyring (a read in progress finishes on the library's watch thread). Idempotent."""
        self._closed = True
        self._stop()
        if self._changes is not None:
            self._changes.put_nowait(None)

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


class _Pump:
    """The watch thread's side of a :class:`SessionWatch`: the pollable completion queue, its
    descriptor and the stop pipe. Only the thread tears them down, once it leaves ``select()``,
    so a ``close()`` from the callback itself never frees a queue in the middle of its dispatch
    or closes a descriptor the loop is about to select on. It holds no reference to the
    :class:`SessionWatch`, so dropping the last reference to that stops the watch (``__del__``)."""

    def __init__(self, key: int) -> None:
        pointer = aio._QueueP()
        _lib.portal_completion_queue_new_pollable(ctypes.byref(pointer))
        self.queue: Any = pointer
        self.fd = int(_lib.portal_completion_queue_get_fd(pointer))
        self.stop_r, self.stop_w = os.pipe()
        self.key = key

    def run(self) -> None:
        ran = ctypes.c_size_t(0)
        try:
            while True:
                ready, _, _ = select.select([self.fd, self.stop_r], [], [])
                if self.stop_r in ready:
                    return
                _lib.portal_completion_queue_dispatch(self.queue, ctypes.byref(ran))
        finally:
            self.free()

    def stop(self) -> None:
        os.write(self.stop_w, b"x")

    def free(self) -> None:
        _lib.portal_completion_queue_free(self.queue)
        _sinks.pop(self.key, None)
        for fd in (self.stop_r, self.stop_w):
            os.close(fd)


class SessionWatch:
    """The callback form (:meth:`PortalAuth.watch`). A context manager; :meth:`close` stops it,
    and so does dropping the last reference to it (garbage collection)."""

    def __init__(self, auth: Any, callback: Callable[[SessionChange], None]) -> None:
        if not callable(callback):
            raise TypeError("callback must be callable")
        if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(getattr(callback, "__call__", None)):
            raise TypeError("callback is an async function, which the watch's thread cannot await: "
                            "use `async for change in auth.session_changes()` on the loop instead")
        self._watch: Any = None
        key = next(_keys)
        self._pump = _Pump(key)
        _sinks[key] = _callback_sink(callback)
        try:
            with auth._use() as auth_pointer:
                self._watch = _start(auth_pointer, self._pump.queue, key)
        except BaseException:
            self._pump.free()
            raise
        self._thread = threading.Thread(target=self._pump.run, name="portal-watch-py", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops the watch: no callback starts after this returns (unless called from the
        callback itself, which may still finish; the watch's thread then ends once it returns).
        Idempotent; any thread."""
        watch, self._watch = self._watch, None
        if watch is None:
            return
        _lib.portal_watch_free(watch)
        self._pump.stop()
        if threading.current_thread() is not self._thread:
            self._thread.join()

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
