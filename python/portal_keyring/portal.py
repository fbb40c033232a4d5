"""The Portal client (:class:`Portal`), its HTTP :class:`Response` and invalidation listeners
(:class:`ListenerHandle`)."""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import inspect
import itertools
import json as _json
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Union

from . import _lifetime, aio
from ._ffi import _CALLBACK, _CharP, _PortalP
from ._handles import _Handle, _Owner
from ._library import lib as _lib
from ._strings import TokenLike, _api_host_arg, _secret_arg, _text_arg
from .auth import Session
from .errors import InvalidArgument

# Python callables by registration key (the C user_data). An entry lives exactly as long as the
# C registration: it is removed by destroy_notify, which the library calls exactly once (after
# the only delivery, on cancel, on portal_free, at once for a spent registration, or before a
# failed registration returns). The two C function pointers are module-level CFUNCTYPE objects
# that live as long as the module, so a registration never depends on a per-call ctypes thunk
# (which destroy_notify would otherwise have to release while running inside it).
_registrations: Dict[int, Callable[[], Any]] = {}
_registration_keys = itertools.count(1)
_listener_keys_lock = threading.Lock()


def _deliver(user_data: Optional[int]) -> None:
    callback = _registrations.get(user_data or 0)
    if callback is None:
        return
    try:
        callback()
    except BaseException as exc:
        # Re-raised into ctypes, which reports it through sys.unraisablehook ("Exception
        # ignored on calling ctypes callback function") and returns normally to the library.
        if hasattr(exc, "add_note"):
            exc.add_note(f"raised by the portal_keyring on_session_invalidated listener {callback!r}")
        raise


def _release(user_data: Optional[int]) -> None:
    _registrations.pop(user_data or 0, None)
    _lifetime.registration_released()


_DELIVER = _CALLBACK(_deliver)
_RELEASE = _CALLBACK(_release)


_lifetime.set_registration_test(lambda key: key in _registrations)


def _registration_count() -> int:
    """How many listener registrations are live (for tests)."""
    return len(_registrations)


class ListenerHandle:
    """A listener registration returned by :meth:`Portal.on_session_invalidated`.

    Dropping the handle does not cancel the listener; :meth:`cancel` does (and so does closing
    the portal; collecting it does not, see :class:`Portal`). The handle keeps its portal
    alive. Usable as a context manager that cancels on exit.
    """

    __slots__ = ("_portal", "id", "__weakref__")

    def __init__(self, portal: "Portal", handle_id: int) -> None:
        self._portal = portal
        #: The library's handle id; 0 for a spent registration (API-key portal, or after
        #: :meth:`Portal.clear_session`), which is never called.
        self.id = handle_id

    def __repr__(self) -> str:
        return f"<ListenerHandle id={self.id}>"

    @property
    def spent(self) -> bool:
        """True for a registration that can never be called (id 0)."""
        return self.id == 0

    def cancel(self) -> None:
        """Cancels the registration: after this returns the callback is never entered (if it is
        running on the library thread, this waits for it, unless called from inside it).
        Idempotent; a no-op once the portal is closed (closing cancelled it)."""
        portal = self._portal
        if self.id == 0 or portal._h is None:
            return
        try:
            with portal._h.use() as pointer:
                _lib.portal_listener_cancel(pointer, self.id)
        except InvalidArgument:
            if not portal.closed:
                raise

    def __enter__(self) -> "ListenerHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


# ------------------------------------------------------------------------------------------------
# Portal
# ------------------------------------------------------------------------------------------------


class Response:
    """An HTTP response from :meth:`Portal.request`."""

    __slots__ = ("status", "body")

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        return _json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Response status={self.status} body={len(self.body)} bytes>"


_live_portals: "weakref.WeakSet[Portal]" = weakref.WeakSet()



# Tasks started for async listeners, held until done (the loop keeps only weak references).
_listener_tasks: "set[asyncio.Future[Any]]" = set()


def _is_async_callable(callback: Any) -> bool:
    """``async def`` functions, ``functools.partial`` of one, and objects whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(getattr(callback, "__call__", None))


def _awaiting(callback: Callable[[], Any], loop: Optional[asyncio.AbstractEventLoop]) -> Callable[[], None]:
    """``callback`` as a listener: when it returns a coroutine (an ``async def`` listener, or a
    lambda around one), the coroutine runs as a task on ``loop`` (an exception it raises goes to
    the loop's exception handler). Without a loop nothing could await it: it is closed and a
    :class:`TypeError` is reported through ``sys.unraisablehook``."""

    def run() -> None:
        result = callback()
        if not inspect.iscoroutine(result):
            return
        if loop is None:
            result.close()
            raise TypeError(f"the listener {callback!r} returned a coroutine, which nothing would await: "
                            "register it with loop=")
        task = asyncio.ensure_future(result, loop=loop)
        _listener_tasks.add(task)
        task.add_done_callback(_listener_tasks.discard)

    return run

class Portal(_Owner):
    """The Portal client for one credential (``portal``).

    ``Portal(session)`` validates the session at once: ``GET /api/v3/clients/me`` with the CST as
    bearer, on a library thread (the constructor does not wait). A 401 from the exact Portal API
    host invalidates the session (the token is dropped, that sign-in's keyring item deleted) and
    calls every listener once — including listeners registered after the rejection (replay).

    Closing the portal (:meth:`close`, :meth:`aclose`, leaving its ``with`` block) cancels its
    listeners. Garbage collection does not (docs/threading.md "Listener lifetime"): a portal
    collected while its validation request may still be in flight keeps its listeners until that
    request can no longer detect a rejection (at most about 32 s after the portal was created),
    so a 401 it gets still deletes the item and calls each listener once; then the remaining
    registrations are released uncalled. See :mod:`portal_keyring._lifetime`. The session object
    may be closed first; the portal keeps the library session alive.

    :param session: the credential.
    :param api_host: ``"host"`` or ``"host:port"``; ``None`` for the host of the session's
        :class:`PortalAuth`.
    """

    def __init__(self, session: Session, api_host: Optional[str] = None) -> None:
        if not isinstance(session, Session):
            raise TypeError(f"session must be a Session, not {type(session).__name__}")
        host = _api_host_arg(api_host)
        out = _PortalP()
        with session._use() as pointer:
            _lib.portal_new(ctypes.byref(out), pointer, host)
        self._adopt(out)
        self.session: Optional[Session] = session

    @classmethod
    def with_api_key(cls, api_key: TokenLike, api_host: Optional[str] = None) -> "Portal":
        """A Portal client from a static API key. It never invalidates anything; listeners
        registered on it are spent at once (:attr:`ListenerHandle.spent`)."""
        host = _api_host_arg(api_host)
        out = _PortalP()
        with _secret_arg(api_key, "api_key") as key:
            _lib.portal_new_with_api_key(ctypes.byref(out), key, host)
        self = cls.__new__(cls)
        self._adopt(out)
        self.session = None
        return self

    def _adopt(self, pointer: Any) -> None:
        self._h = _Handle(pointer, _lib.portal_free, "portal")
        self._created = time.monotonic()
        self._listener_keys: List[int] = []
        _live_portals.add(self)

    def __del__(self) -> None:
        # Collection is not a cancel: park the handle while the validation request may still
        # detect a rejection (listener-lifetime rule 2), else free it now.
        try:
            handle = self._h
            keys = getattr(self, "_listener_keys", [])
            session = getattr(self, "session", None)
            if handle is not None and not handle.closed and _lifetime.park(handle, keys, session, self._created):
                return
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def close(self) -> None:
        """Frees the portal and cancels every listener (each is released once). No callback of
        this portal starts after this returns; one already running on the library thread is
        waited for (unless this is called from inside it). Idempotent."""
        _live_portals.discard(self)
        super().close()

    def on_session_invalidated(
        self, callback: Callable[[], Any], *, loop: Optional[asyncio.AbstractEventLoop] = None
    ) -> ListenerHandle:
        """Registers ``callback()`` to be called at most once when the backend rejects the
        session; if it was already rejected, it is called once soon (replay). The callable is
        referenced until the registration ends (delivered, cancelled, or the portal closed). An
        exception it raises is reported through ``sys.unraisablehook`` and does not affect
        other listeners.

        :param loop: ``None``: the callback runs on a library thread. An asyncio loop: it runs
            on that loop's thread (``portal_on_session_invalidated_queued`` on the loop's
            completion queue); register from any thread, and note that a delivery already
            handed to the loop still runs after
            :meth:`ListenerHandle.cancel`. An ``async def`` callback needs ``loop``: it runs as
            a task on that loop (without ``loop``, :class:`TypeError`: nothing would await it).
            A rejection that comes after ``loop`` has closed still invalidates the session (the
            token dropped, the item deleted), but the callback is not called: nothing runs on a
            closed loop. Use ``loop=None`` for a listener that must outlive its loop. Anything
            else (a ``GLib.MainLoop``) raises :class:`TypeError` here: a PyGObject app uses the
            GNOME API, ``gi.repository.PortalKeyring`` (docs/gnome.md).
        """
        if not callable(callback):
            raise TypeError("callback must be callable")
        if loop is None and _is_async_callable(callback):
            raise TypeError("callback is an async function: pass loop= so that it runs as a task on that loop")
        callback = _awaiting(callback, loop)
        out = ctypes.c_uint64()
        queue = aio.loop_queue(loop) if loop is not None else None
        with self._use() as pointer:
            key = next(_registration_keys)
            _registrations[key] = callback  # before the call: delivery may start before it returns
            # On failure destroy_notify has already removed the entry, and _errcheck raises.
            if queue is None:
                _lib.portal_on_session_invalidated(pointer, _DELIVER, key, _RELEASE, ctypes.byref(out))
            else:
                _lib.portal_on_session_invalidated_queued(
                    pointer, queue.pointer, _DELIVER, key, _RELEASE, ctypes.byref(out)
                )
            with _listener_keys_lock:  # registrations may come from several threads at once
                self._listener_keys = [k for k in self._listener_keys if k in _registrations] + [key]
        return ListenerHandle(self, int(out.value))

    def report_unauthorized(self, rejected_token: TokenLike) -> bool:
        """Reports that a request the app made itself, with ``rejected_token`` as bearer to the
        Portal API host, got HTTP 401. If it is the session's current token, invalidates the
        session (keyring I/O) and fires the listeners once.

        :returns: ``True`` if this call invalidated the session.
        :raises SessionStorageFailure: the delete failed (the session is invalidated in memory
            and the listeners fire regardless).
        """
        invalidated = ctypes.c_bool(False)
        with _secret_arg(rejected_token, "rejected_token") as token, self._use() as pointer:
            _lib.portal_report_unauthorized(pointer, token, ctypes.byref(invalidated))
        return bool(invalidated.value)

    def clear_session(self) -> None:
        """Host-initiated sign-out: drops the token and deletes every stored session of the auth
        environment. Never fires listeners. Blocks (keyring I/O)."""
        with self._use() as pointer:
            _lib.portal_clear_session(pointer)

    def request(self, method: str, target: str, body: Optional[Union[str, bytes]] = None) -> Response:
        """Sends an authenticated request and waits for the response (network, up to 30 s).

        :param method: ``GET``, ``POST``, ``PUT``, ``PATCH`` or ``DELETE``.
        :param target: a path on the Portal API host (``"/api/v3/clients/me"``) or an absolute
            https URL; the bearer is attached only for the Portal API host.
        :param body: optional JSON body.
        :returns: the response, whatever its HTTP status (a 401 from the Portal API host has
            invalidated the session and fired the listeners).
        :raises SessionInvalidated, NetworkError, InvalidArgument:
        """
        m = _text_arg(method, "method")
        t = _text_arg(target, "target")
        b = _text_arg(body, "body", optional=True)
        status = ctypes.c_long(0)
        out = _CharP()
        length = ctypes.c_size_t(0)
        with self._use() as pointer:
            _lib.portal_request(pointer, m, t, b, ctypes.byref(status), ctypes.byref(out), ctypes.byref(length))
        try:
            data = ctypes.string_at(out, length.value) if out else b""
        finally:
            _lib.portal_string_free(out)
        return Response(int(status.value), data)


    # -------------------------------------------------------------------------------- asyncio

    async def aclose(self) -> None:
        """:meth:`close` without blocking the loop (``portal_free_async``): requests in flight
        are aborted and every listener is cancelled at once; the wait for the aborted requests
        to return (up to about a second) happens on a library worker, and this coroutine
        returns when it is over. A call in flight on another thread defers the free until it
        returns. Idempotent. ``async with Portal(...)`` calls it."""
        _live_portals.discard(self)
        if self._h is None:
            return
        key, future, queue = aio.expect(aio.nothing)

        def free_async(pointer: Any) -> None:
            _lib.portal_free_async(pointer, queue.pointer, aio._COMPLETE, key, aio._RELEASE)

        if not self._h.close(free_async):
            aio._release(key)  # closed already: nothing will complete it
            return
        await future

    async def __aenter__(self) -> "Portal":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request_async(self, method: str, target: str, body: Optional[Union[str, bytes]] = None) -> Response:
        """:meth:`request` as a coroutine (``portal_request_async``): the request runs on a
        library worker thread and completes on the running loop. Cancelling the task aborts the
        request (within about a second) and raises ``asyncio.CancelledError`` at once."""
        m = _text_arg(method, "method")
        t = _text_arg(target, "target")
        b = _text_arg(body, "body", optional=True)
        with self._use() as pointer:
            operation = aio.start(_lib.portal_request_async, aio.body, pointer, m, t, b)
        status, data = await operation.wait()
        return Response(status, data)

    async def report_unauthorized_async(self, rejected_token: TokenLike) -> bool:
        """:meth:`report_unauthorized` as a coroutine; the token copy is wiped before the
        coroutine first suspends. :returns: ``True`` if this call invalidated the session."""
        with _secret_arg(rejected_token, "rejected_token") as token, self._use() as pointer:
            operation = aio.start(_lib.portal_report_unauthorized_async, aio.invalidated, pointer, token)
        return await operation.wait()

    async def clear_session_async(self) -> None:
        """:meth:`clear_session` as a coroutine (keyring work on a library worker thread)."""
        with self._use() as pointer:
            operation = aio.start(_lib.portal_clear_session_async, aio.nothing, pointer)
        await operation.wait()


@atexit.register
def _close_live_portals() -> None:
    # No library thread may call into Python after the interpreter has finalized: closing the
    # portals cancels every registration (portal_free waits for a callback that is running),
    # the parked ones (collected, listeners kept) included.
    _lifetime.close_all()
    for portal in list(_live_portals):
        try:
            portal.close()
        except Exception:  # pragma: no cover
            pass
    # A destroy_notify that follows a delivery can still be on its way when portal_free()
    # returns (libportal-keyring 0.1.0 announces the end of a delivery before calling it); let it
    # finish while the interpreter is alive. Bounded: registrations of a portal whose close is
    # deferred by a call still in flight on a daemon thread may never drain.
    deadline = time.monotonic() + 1.0
    while _registrations and time.monotonic() < deadline:
        time.sleep(0.001)
