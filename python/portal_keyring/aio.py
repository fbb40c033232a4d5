"""asyncio support: the completion queue of each event loop and the coroutines behind the
``*_async`` methods (:meth:`PortalAuth.restore_session_async` and the others, the sign-in
coroutines such as :meth:`PortalAuth.handle_redirect_async` included).

How it works: each running loop gets one pollable completion queue
(``portal_completion_queue_new_pollable``) whose file descriptor is watched with
``loop.add_reader``; when it is readable, ``portal_completion_queue_dispatch`` runs the ready
completions on the loop's thread, and each one resolves its asyncio future there. The blocking
keyring and HTTP work runs on the library's ``portal-async`` worker threads, so the loop never
blocks (not even for the GIL: the workers never call into Python).

Cancelling the awaiting task calls ``portal_operation_cancel``: the operation stops (a keyring
call is cancelled, an unlock-prompt wait ends within 250 ms, an HTTP request is aborted) and the
coroutine raises ``asyncio.CancelledError`` at once. A cancelled persist either stored the new
session or left the previous one intact, never half.

Threads: each coroutine must be awaited on the loop that runs it (as every coroutine is);
:class:`LoopQueue` objects belong to one loop. A loop's queue is freed when the loop is garbage
collected; :func:`close_loop_queue` frees it earlier (call it before closing a loop that will
live on).
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import threading
import weakref
from typing import Any, Callable, Dict, Generic, Optional, Tuple, TypeVar

from ._ffi import _CALLBACK, _DECLARED, _AuthP, _CharP, _PortalP, _SessionP, _declare
from ._library import lib as _lib
from .errors import Status, _error

T = TypeVar("T")


class _Queue(ctypes.Structure):
    """Opaque ``portal_completion_queue``."""


class _Result(ctypes.Structure):
    """``portal_result`` (read through the pointer the callback gets; never copied)."""

    _fields_ = [
        ("session", _SessionP),
        ("http_status", ctypes.c_long),
        ("body", _CharP),
        ("body_len", ctypes.c_size_t),
        ("invalidated", ctypes.c_bool),
    ]


class _SignInResult(ctypes.Structure):
    """``portal_sign_in_result`` (read through the pointer the callback gets; never copied)."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("session", _SessionP),
        ("text", _CharP),
        ("auto_create_wallet", ctypes.c_bool),
        ("user_jwt", _CharP),
        ("totp_link", _CharP),
    ]


_QueueP = ctypes.POINTER(_Queue)
_ResultP = ctypes.POINTER(_Result)
#: ``void (*)(portal_status, portal_result *, const char *error_message, void *user_data)``
_COMPLETION = ctypes.CFUNCTYPE(None, ctypes.c_int, _ResultP, ctypes.c_char_p, ctypes.c_void_p)
#: ``portal_sign_in_cb``: the same, with a ``portal_sign_in_result *``.
_SIGN_IN_COMPLETION = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.POINTER(_SignInResult), ctypes.c_char_p, ctypes.c_void_p
)
_NOTIFY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ASYNC_TAIL = [_QueueP, _COMPLETION, ctypes.c_void_p, _NOTIFY, ctypes.POINTER(ctypes.c_uint64)]
_SIGN_IN_TAIL = [_QueueP, _SIGN_IN_COMPLETION, ctypes.c_void_p, _NOTIFY, ctypes.POINTER(ctypes.c_uint64)]

_declare("portal_completion_queue_new_pollable", ctypes.c_int, [ctypes.POINTER(_QueueP)])
_declare("portal_completion_queue_dispatch", ctypes.c_int, [_QueueP, ctypes.POINTER(ctypes.c_size_t)])
_declare("portal_completion_queue_free", None, [_QueueP])
_declare("portal_operation_cancel", ctypes.c_int, [ctypes.c_uint64])

_c_char_p = ctypes.c_char_p
_declare("portal_auth_restore_session_async", ctypes.c_int, [_AuthP, *_ASYNC_TAIL])
_declare("portal_auth_persist_session_async", ctypes.c_int, [_AuthP, _c_char_p, _CharP, *_ASYNC_TAIL])
_declare("portal_auth_clear_persisted_session_async", ctypes.c_int, [_AuthP, *_ASYNC_TAIL])
_declare("portal_session_invalidate_async", ctypes.c_int, [_SessionP, *_ASYNC_TAIL])
_declare("portal_request_async", ctypes.c_int, [_PortalP, _c_char_p, _c_char_p, _c_char_p, *_ASYNC_TAIL])
_declare("portal_report_unauthorized_async", ctypes.c_int, [_PortalP, _CharP, *_ASYNC_TAIL])
_declare("portal_clear_session_async", ctypes.c_int, [_PortalP, *_ASYNC_TAIL])
_declare("portal_auth_get_methods_async", ctypes.c_int, [_AuthP, *_SIGN_IN_TAIL])
_declare("portal_auth_send_magic_link_async", ctypes.c_int, [_AuthP, _c_char_p, *_SIGN_IN_TAIL])
_declare("portal_auth_login_with_google_async", ctypes.c_int, [_AuthP, *_SIGN_IN_TAIL])
_declare("portal_auth_login_with_apple_async", ctypes.c_int, [_AuthP, *_SIGN_IN_TAIL])
_declare(
    "portal_auth_handle_redirect_async", ctypes.c_int, [_AuthP, _c_char_p, ctypes.c_uint32, *_SIGN_IN_TAIL]
)
_declare("portal_auth_verify_totp_async", ctypes.c_int, [_AuthP, _c_char_p, _CharP, *_SIGN_IN_TAIL])
_declare("portal_auth_sign_in_with_google_async", ctypes.c_int, [_AuthP, ctypes.c_uint32, *_SIGN_IN_TAIL])
_declare("portal_auth_sign_in_with_apple_async", ctypes.c_int, [_AuthP, ctypes.c_uint32, *_SIGN_IN_TAIL])
_declare("portal_free_async", ctypes.c_int, [_PortalP, _QueueP, _COMPLETION, ctypes.c_void_p, _NOTIFY])
_declare(
    "portal_on_session_invalidated_queued",
    ctypes.c_int,
    [_PortalP, _QueueP, _CALLBACK, ctypes.c_void_p, _CALLBACK, ctypes.POINTER(ctypes.c_uint64)],
)

# The fd getter returns an fd, not a status: no errcheck (a -1 is checked where it is used).
_lib.portal_completion_queue_get_fd.restype = ctypes.c_int
_lib.portal_completion_queue_get_fd.argtypes = [_QueueP]
_DECLARED.add("portal_completion_queue_get_fd")


# ------------------------------------------------------------------------------ loop queues


class LoopQueue:
    """One event loop's pollable completion queue, watched with ``loop.add_reader``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, from_other_thread: bool = False) -> None:
        pointer = _QueueP()
        _lib.portal_completion_queue_new_pollable(ctypes.byref(pointer))
        fd = int(_lib.portal_completion_queue_get_fd(pointer))
        if fd < 0:  # pragma: no cover - a pollable queue always has its eventfd
            _lib.portal_completion_queue_free(pointer)
            raise OSError("portal_keyring: the completion queue has no file descriptor")
        # A weak reference: `_queues` maps each loop to its queue weakly by key but strongly by
        # value, so a strong one here would keep every loop (and its queue's two fds) alive forever.
        self._loop = weakref.ref(loop)
        self.pointer: Any = pointer
        self.fd = fd
        #: How many completions this queue has run on the loop (for tests and diagnostics).
        self.dispatched = 0
        if from_other_thread:
            # add_reader is not thread-safe: the loop adds it itself. Completions posted before
            # that wait in the queue's eventfd, which is readable when the reader is added.
            loop.call_soon_threadsafe(loop.add_reader, fd, self._dispatch)
        else:
            loop.add_reader(fd, self._dispatch)
        self._finalizer = weakref.finalize(loop, _free_queue, pointer)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop this queue belongs to (alive while a coroutine of it is using the queue)."""
        loop = self._loop()
        if loop is None:  # pragma: no cover - the loop is alive while its coroutines run
            raise RuntimeError("portal_keyring: the event loop of this queue is gone")
        return loop

    def _dispatch(self) -> None:
        ran = ctypes.c_size_t(0)
        _lib.portal_completion_queue_dispatch(self.pointer, ctypes.byref(ran))
        self.dispatched += ran.value

    def close(self) -> None:
        """Stops watching the fd and frees the queue; completions still pending are dropped."""
        if self._finalizer.alive:
            loop = self._loop()
            if loop is not None and not loop.is_closed():
                loop.remove_reader(self.fd)
            self._finalizer()


def _free_queue(pointer: Any) -> None:
    _lib.portal_completion_queue_free(pointer)


_queues: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopQueue]" = weakref.WeakKeyDictionary()
_queues_lock = threading.Lock()


def _require_event_loop(loop: object) -> None:
    """:raises TypeError: ``loop`` is not an asyncio event loop (a ``GLib.MainLoop``, say): the
    message says what is expected and sends PyGObject apps to the GNOME API, whose calls
    complete on GLib's main context (docs/gnome.md)."""
    if not isinstance(loop, asyncio.AbstractEventLoop):
        kind = f"{type(loop).__module__}.{type(loop).__qualname__}"
        raise TypeError(
            f"loop must be an asyncio event loop (asyncio.AbstractEventLoop, e.g. asyncio.get_running_loop()), "
            f"not {kind}; for a GLib main loop (PyGObject, GTK) use the GNOME API instead: "
            "gi.require_version('PortalKeyring', '1'); from gi.repository import PortalKeyring (docs/gnome.md)"
        )


def loop_queue(loop: Optional[asyncio.AbstractEventLoop] = None) -> LoopQueue:
    """The completion queue of ``loop`` (default: the running loop), created on first use.
    From any thread: when ``loop`` runs in another thread, the loop itself starts watching the
    new queue (``call_soon_threadsafe``). :raises RuntimeError: no loop given and none running;
    ``loop`` is closed. :raises TypeError: ``loop`` is not an asyncio event loop
    (:func:`_require_event_loop`)."""
    if loop is not None:
        _require_event_loop(loop)
    running = asyncio._get_running_loop()
    if loop is None:
        if running is None:
            raise RuntimeError("portal_keyring: no running event loop (call from a coroutine)")
        loop = running
    if loop.is_closed():
        raise RuntimeError("portal_keyring: the event loop is closed")
    with _queues_lock:
        queue = _queues.get(loop)
        if queue is None or not queue._finalizer.alive:
            queue = _queues[loop] = LoopQueue(loop, from_other_thread=running is not loop and loop.is_running())
        return queue


def close_loop_queue(loop: asyncio.AbstractEventLoop) -> None:
    """Frees ``loop``'s completion queue now (operations still running complete nowhere: their
    coroutines never finish). Call it on the loop's thread, after its last operation."""
    with _queues_lock:
        queue = _queues.pop(loop, None)
    if queue is not None:
        queue.close()


# ------------------------------------------------------------------------------ operations

# Live operations by key (the C user_data): the future and how to read its result. An entry lives
# until destroy_notify, which the library calls exactly once per started operation.
_operations: Dict[int, Tuple["asyncio.Future[Any]", Callable[[Any], Any]]] = {}
_keys = itertools.count(1)


def _complete(status: int, result: Any, message: Optional[bytes], user_data: Optional[int]) -> None:
    entry = _operations.get(user_data or 0)
    if entry is None:
        return
    future, read = entry
    if future.done():  # the task was cancelled first: leave the results for the library to free
        return
    if status != Status.OK:
        future.set_exception(_error(status, (message or b"").decode("utf-8", "replace")))
        return
    try:
        future.set_result(read(result.contents))
    except BaseException as exc:  # a result that cannot be read must not strand the coroutine
        future.set_exception(exc)


def _release(user_data: Optional[int]) -> None:
    _operations.pop(user_data or 0, None)


_COMPLETE = _COMPLETION(_complete)
_COMPLETE_SIGN_IN = _SIGN_IN_COMPLETION(_complete)
_RELEASE = _NOTIFY(_release)


def operation_count() -> int:
    """How many operations have not yet been released by the library (for tests)."""
    return len(_operations)


class Operation(Generic[T]):
    """A started non-blocking operation: ``await op.wait()`` for its result. Cancelling the
    awaiting task cancels the operation (``portal_operation_cancel``)."""

    __slots__ = ("future", "id")

    def __init__(self, future: "asyncio.Future[T]", operation_id: int) -> None:
        self.future = future
        #: The library's operation id (never 0).
        self.id = operation_id

    def cancel(self) -> None:
        """Cancels the operation; its waiter raises ``asyncio.CancelledError``. Idempotent."""
        _lib.portal_operation_cancel(self.id)
        self.future.cancel()

    async def wait(self) -> T:
        try:
            return await self.future
        except asyncio.CancelledError:
            # Ignored by the library when the operation already completed.
            _lib.portal_operation_cancel(self.id)
            raise


def expect(read: Callable[[Any], T]) -> Tuple[int, "asyncio.Future[T]", LoopQueue]:
    """Registers a completion for a call made later (or on another thread): its user_data key,
    the future it resolves and the running loop's queue."""
    queue = loop_queue()
    future: "asyncio.Future[T]" = queue.loop.create_future()
    key = next(_keys)
    _operations[key] = (future, read)
    return key, future, queue


def start(function: Callable[..., Any], read: Callable[[Any], T], *args: Any) -> Operation[T]:
    """Calls ``function(*args, queue, callback, user_data, destroy_notify, &operation)`` with the
    running loop's queue; returns at once. Arguments need to live only during this call (the
    library copies strings before it returns). ``read`` gets the ``portal_result`` on the loop's
    thread. :raises PortalKeyringError: nothing started."""
    return _start(function, _COMPLETE, read, args)


def start_sign_in(function: Callable[..., Any], read: Callable[[Any], T], *args: Any) -> Operation[T]:
    """:func:`start` for the sign-in calls, whose callback is a ``portal_sign_in_cb``: ``read``
    gets the ``portal_sign_in_result`` on the loop's thread; whatever it does not take (see
    :func:`take_pointer`) the library frees, wiping strings, after it returns."""
    return _start(function, _COMPLETE_SIGN_IN, read, args)


def _start(
    function: Callable[..., Any], callback: Any, read: Callable[[Any], T], args: Tuple[Any, ...]
) -> Operation[T]:
    queue = loop_queue()
    future: "asyncio.Future[T]" = queue.loop.create_future()
    key = next(_keys)
    _operations[key] = (future, read)  # before the call: the completion may be queued before it returns
    operation = ctypes.c_uint64(0)
    # On failure destroy_notify has already removed the entry, and errcheck raises.
    function(*args, queue.pointer, callback, key, _RELEASE, ctypes.byref(operation))
    return Operation(future, int(operation.value))


# ------------------------------------------------------------------------------ result readers


def take_pointer(result: Any, field: str, pointer_type: Any) -> Optional[Any]:
    """Takes the pointer field ``field`` of a result (sets it to NULL, so the library no longer
    frees it; the caller now owns what it points to): a ``pointer_type``, or ``None``."""
    address = ctypes.cast(getattr(result, field), ctypes.c_void_p).value
    if not address:
        return None
    setattr(result, field, None)
    return ctypes.cast(ctypes.c_void_p(address), pointer_type)


def take_session(result: Any) -> Optional[Any]:
    """Takes ``result->session`` (the library no longer frees it): a pointer, or ``None``."""
    return take_pointer(result, "session", _SessionP)


def nothing(result: Any) -> None:
    return None


def body(result: Any) -> Tuple[int, bytes]:
    data = ctypes.string_at(result.body, result.body_len) if result.body else b""
    return int(result.http_status), data


def invalidated(result: Any) -> bool:
    return bool(result.invalidated)
