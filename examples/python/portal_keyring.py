"""portal_keyring — Python bindings (ctypes, no compiled parts) for libportal-keyring.so.

portal-keyring keeps a Portal end user's Client Session Token (CST) in the user's Secret Service
keyring (GNOME Keyring, KWallet, KeePassXC), restores it on the next launch without a network
call, clears it on sign-out, and tells the app once when the Portal backend rejects it. This
module wraps the C ABI in ``Include/portal_keyring.h``; the header is the reference for every
behaviour described here.

Example::

    import portal_keyring as pk

    with pk.PortalAuth("YOUR_AUTH_ENVIRONMENT_ID", "myapp://portal/redirect") as auth:
        session = auth.restore_session()      # None = signed out; raises SessionStorageFailure
        if session is None:                   # when the keyring cannot be read this time
            show_sign_in()
        else:
            portal = pk.Portal(session)       # validates the CST (GET /api/v3/clients/me)
            portal.on_session_invalidated(show_sign_in)

Finding the library: ``$PORTAL_KEYRING_LIBRARY`` (a file), then ``$PORTAL_KEYRING_LIBDIR`` (a
directory), then the newest of ``.build/{debug,release}/libportal-keyring.so`` of the source
tree this file lives in, then the system loader path (``libportal-keyring.so``). An ``OSError``
lists every place that was tried.

Errors: every failed call raises a subclass of :class:`PortalKeyringError`, one per status code
(:class:`InvalidArgument`, :class:`SessionStorageFailure`, :class:`SessionInvalidated`,
:class:`Unauthorized`, :class:`NetworkError`, :class:`InternalError`, and the sign-in codes'
:class:`RateLimited`, :class:`MalformedResponse`, :class:`InvalidGrant`, :class:`InvalidUserJwt`,
:class:`AuthenticationFailed`), carrying ``status`` and the library's ``message``; a code this
module does not know raises the base class with the ``int`` status. "Signed out" is not an error: :meth:`PortalAuth.restore_session` returns
``None``. :class:`SessionStorageFailure` means the keyring could not be read *this time*; the end
user is then NOT known to be signed out and nothing was deleted.

Handles: :class:`PortalAuth`, :class:`Session` and :class:`Portal` own a library handle. They are
context managers; ``close()`` frees the handle (idempotent), and so does garbage collection. A
handle shared between threads is safe to close while another thread is using it: the library
handle is freed when the last call in flight returns.

Threads: every method may be called from any thread. Calls that block (keyring I/O, network)
release the GIL. Listener callbacks run on a library-owned thread (one serial queue per portal),
never while the library holds a lock; they may call anything in this module, including
``handle.cancel()`` and ``portal.close()``. Do not make a callback wait for a lock that the
thread calling ``cancel()``/``close()`` holds: those calls wait for a callback that is running.

Tokens: :meth:`Session.token` returns a :class:`SecretToken`, a ``bytearray`` that wipes itself
when its ``with`` block ends (and on ``wipe()`` or garbage collection). The library's own copy is
wiped by ``portal_string_free``. Tokens passed in are copied into a ``bytearray`` that is wiped
after the call; pass a ``bytearray`` rather than a ``str`` to avoid immutable copies.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import enum
import glob
import itertools
import json as _json
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Type, Union

__all__ = [
    "ABI_VERSION",
    "Status",
    "PortalKeyringError",
    "InvalidArgument",
    "SessionStorageFailure",
    "SessionInvalidated",
    "Unauthorized",
    "NetworkError",
    "InternalError",
    "RateLimited",
    "MalformedResponse",
    "InvalidGrant",
    "InvalidUserJwt",
    "AuthenticationFailed",
    "UnsolicitedRedirect",
    "DifferentEndUser",
    "Cancelled",
    "SecretToken",
    "PortalAuth",
    "Session",
    "Portal",
    "ListenerHandle",
    "Response",
    "library_path",
    "library_version",
    "library_version_number",
    "status_name",
]

#: The C ABI version this module was written against (Include/portal_keyring.h).
ABI_VERSION: Tuple[int, int, int] = (0, 1, 0)

TokenLike = Union[str, bytes, bytearray, memoryview]

# ------------------------------------------------------------------------------------------------
# Loading the library
# ------------------------------------------------------------------------------------------------

_LIBRARY_NAME = "libportal-keyring.so"


def _candidates() -> List[str]:
    paths: List[str] = []
    explicit = os.environ.get("PORTAL_KEYRING_LIBRARY")
    if explicit:
        return [explicit]  # an explicit choice is never second-guessed
    libdir = os.environ.get("PORTAL_KEYRING_LIBDIR")
    if libdir:
        paths.append(os.path.join(libdir, _LIBRARY_NAME))
    # The source tree: examples/python/portal_keyring.py -> <repo>/.build/<config>/
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    built = [p for p in glob.glob(os.path.join(repo, ".build", "*", _LIBRARY_NAME)) if os.path.isfile(p)]
    built.sort(key=os.path.getmtime, reverse=True)  # the most recent build wins
    paths.extend(built)
    # The system loader path (ld.so.cache, LD_LIBRARY_PATH): the soname first, which runtime
    # packages ship; the unversioned link normally comes only with development files.
    paths.append(_LIBRARY_NAME + ".0")
    paths.append(_LIBRARY_NAME)
    return paths


def _load() -> Tuple[ctypes.CDLL, str]:
    tried: List[str] = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            tried.append(f"  {path}: {exc}")
    raise OSError(
        "portal_keyring: cannot load libportal-keyring.so. Build it with 'swift build', or set "
        "PORTAL_KEYRING_LIBRARY to the file (or PORTAL_KEYRING_LIBDIR to its directory). Tried:\n"
        + "\n".join(tried)
    )


_lib, library_path = _load()


class _Auth(ctypes.Structure):
    """Opaque ``portal_auth``."""


class _Session(ctypes.Structure):
    """Opaque ``portal_session``."""


class _Portal(ctypes.Structure):
    """Opaque ``portal``."""


_AuthP = ctypes.POINTER(_Auth)
_SessionP = ctypes.POINTER(_Session)
_PortalP = ctypes.POINTER(_Portal)
_CharP = ctypes.POINTER(ctypes.c_char)  # not c_char_p: that would copy into an immutable bytes

#: ``void (*)(void *user_data)`` — portal_session_invalidated_cb and portal_destroy_notify.
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Status(enum.IntEnum):
    """``portal_status``."""

    OK = 0
    INVALID_ARGUMENT = 1
    SESSION_STORAGE = 2
    SESSION_INVALIDATED = 3
    UNAUTHORIZED = 4
    NETWORK = 5
    INTERNAL = 6
    RATE_LIMITED = 7
    MALFORMED_RESPONSE = 8
    INVALID_GRANT = 9
    INVALID_USER_JWT = 10
    AUTHENTICATION_FAILED = 11
    UNSOLICITED_REDIRECT = 12
    DIFFERENT_END_USER = 13
    CANCELLED = 14


def _errcheck(result: int, func: Any, args: Any) -> int:
    # Runs right after the foreign call on the same thread, before any other library call can
    # replace the thread-local message.
    if result != Status.OK:
        raise _error(result, _last_error_message())
    return result


_DECLARED: "set[str]" = set()  # names given argtypes/restype (checked by the tests against every use)


def _declare(name: str, restype: Any, argtypes: List[Any]) -> None:
    func = getattr(_lib, name)
    func.restype = restype
    func.argtypes = argtypes
    if restype is ctypes.c_int:  # every int-returning function returns a portal_status
        func.errcheck = _errcheck
    _DECLARED.add(name)


_c_char_p = ctypes.c_char_p
_declare("portal_keyring_version_number", ctypes.c_uint32, [])
_declare("portal_keyring_version", _c_char_p, [])
_declare("portal_status_str", _c_char_p, [ctypes.c_int])
_declare("portal_last_error_message", _c_char_p, [])
_declare("portal_string_free", None, [_CharP])
_declare("portal_auth_new", ctypes.c_int, [ctypes.POINTER(_AuthP), _c_char_p, _c_char_p, _c_char_p])
_declare("portal_auth_free", None, [_AuthP])
_declare("portal_auth_set_keyring_timeouts", ctypes.c_int, [_AuthP, ctypes.c_uint32, ctypes.c_uint32])
_declare("portal_auth_restore_session", ctypes.c_int, [_AuthP, ctypes.POINTER(_SessionP)])
_declare("portal_auth_clear_persisted_session", ctypes.c_int, [_AuthP])
_declare("portal_auth_persist_session", ctypes.c_int, [_AuthP, _c_char_p, _CharP, ctypes.POINTER(_SessionP)])
_declare("portal_session_get_end_user_id", _c_char_p, [_SessionP])
_declare("portal_session_get_auth_environment_id", _c_char_p, [_SessionP])
_declare("portal_session_copy_token", ctypes.c_int, [_SessionP, ctypes.POINTER(_CharP)])
_declare("portal_session_free", None, [_SessionP])
_declare("portal_session_invalidate", ctypes.c_int, [_SessionP])
_declare("portal_new", ctypes.c_int, [ctypes.POINTER(_PortalP), _SessionP, _c_char_p])
_declare("portal_new_with_api_key", ctypes.c_int, [ctypes.POINTER(_PortalP), _CharP, _c_char_p])
_declare("portal_free", None, [_PortalP])
_declare(
    "portal_on_session_invalidated",
    ctypes.c_int,
    [_PortalP, _CALLBACK, ctypes.c_void_p, _CALLBACK, ctypes.POINTER(ctypes.c_uint64)],
)
_declare("portal_listener_cancel", ctypes.c_int, [_PortalP, ctypes.c_uint64])
_declare("portal_report_unauthorized", ctypes.c_int, [_PortalP, _CharP, ctypes.POINTER(ctypes.c_bool)])
_declare("portal_clear_session", ctypes.c_int, [_PortalP])
_declare(
    "portal_request",
    ctypes.c_int,
    [_PortalP, _c_char_p, _c_char_p, _c_char_p, ctypes.POINTER(ctypes.c_long), ctypes.POINTER(_CharP),
     ctypes.POINTER(ctypes.c_size_t)],
)

_strlen = ctypes.CDLL(None).strlen
_strlen.restype = ctypes.c_size_t
_strlen.argtypes = [_CharP]


def library_version() -> str:
    """The loaded library's version string, e.g. ``"0.1.0"``."""
    return str(_lib.portal_keyring_version().decode("ascii"))


def library_version_number() -> int:
    """The loaded library's version as ``MAJOR*1000000 + MINOR*1000 + PATCH``."""
    return int(_lib.portal_keyring_version_number())


if library_version_number() // 1_000_000 != ABI_VERSION[0]:
    raise ImportError(
        f"portal_keyring: {library_path} is version {library_version()}, but this module needs "
        f"ABI major version {ABI_VERSION[0]}"
    )


def status_name(status: int) -> str:
    """The library's static name for a status code (``portal_status_str``)."""
    return str(_lib.portal_status_str(int(status)).decode("utf-8", "replace"))


def _last_error_message() -> str:
    return str((_lib.portal_last_error_message() or b"").decode("utf-8", "replace"))


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------


class PortalKeyringError(Exception):
    """A failed library call. ``status`` is the :class:`Status` code (an ``int`` for codes this
    module does not know), ``message`` the library's detail (never contains a token)."""

    status: Union[Status, int] = -1

    def __init__(self, status: int, message: str) -> None:
        try:
            self.status = Status(status)
        except ValueError:
            self.status = int(status)
        self.message = message
        self.status_name = status_name(status)
        super().__init__(f"{self.status_name} ({int(status)}): {message}")


class InvalidArgument(PortalKeyringError, ValueError):
    """``PORTAL_ERR_INVALID_ARGUMENT``: an argument was rejected (blank, not UTF-8, too long,
    contains NUL, a closed handle); nothing was done."""


class SessionStorageFailure(PortalKeyringError):
    """``PORTAL_ERR_SESSION_STORAGE``: the Secret Service could not be used this time (no session
    bus, no provider, collection locked, prompt dismissed, timeout). This is never "signed out",
    and nothing was deleted."""


class SessionInvalidated(PortalKeyringError):
    """``PORTAL_ERR_SESSION_INVALIDATED``: the session was invalidated; its token is gone."""


class Unauthorized(PortalKeyringError):
    """``PORTAL_ERR_UNAUTHORIZED``: the Portal API rejected the credential (HTTP 401)."""


class NetworkError(PortalKeyringError):
    """``PORTAL_ERR_NETWORK``: the Portal API could not be reached, timed out or answered with
    an unexpected response."""


class InternalError(PortalKeyringError):
    """``PORTAL_ERR_INTERNAL``: an internal error such as out of memory."""


class RateLimited(PortalKeyringError):
    """``PORTAL_ERR_RATE_LIMITED``: the Portal API answered HTTP 429; try again later."""


class MalformedResponse(PortalKeyringError):
    """``PORTAL_ERR_MALFORMED_RESPONSE``: a Portal API response lacked a required field."""


class InvalidGrant(PortalKeyringError):
    """``PORTAL_ERR_INVALID_GRANT``: a sign-in grant was used, expired or unknown."""


class InvalidUserJwt(PortalKeyringError):
    """``PORTAL_ERR_INVALID_USER_JWT``: the user JWT of a TOTP verification was rejected."""


class AuthenticationFailed(PortalKeyringError):
    """``PORTAL_ERR_AUTHENTICATION_FAILED``: sign-in failed (error redirect, wrong TOTP code)."""


class UnsolicitedRedirect(PortalKeyringError):
    """``PORTAL_ERR_UNSOLICITED_REDIRECT``: a redirect no pending sign-in asked for; nothing done."""


class DifferentEndUser(PortalKeyringError):
    """``PORTAL_ERR_DIFFERENT_END_USER``: another end user's session is stored; nothing stored."""
class Cancelled(PortalKeyringError):
    """``PORTAL_ERR_CANCELLED``: a non-blocking C call was cancelled (this module has none yet)."""


_ERRORS: Dict[int, Type[PortalKeyringError]] = {
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.SESSION_STORAGE: SessionStorageFailure,
    Status.SESSION_INVALIDATED: SessionInvalidated,
    Status.UNAUTHORIZED: Unauthorized,
    Status.NETWORK: NetworkError,
    Status.INTERNAL: InternalError,
    Status.RATE_LIMITED: RateLimited,
    Status.MALFORMED_RESPONSE: MalformedResponse,
    Status.INVALID_GRANT: InvalidGrant,
    Status.INVALID_USER_JWT: InvalidUserJwt,
    Status.AUTHENTICATION_FAILED: AuthenticationFailed,
    Status.UNSOLICITED_REDIRECT: UnsolicitedRedirect,
    Status.DIFFERENT_END_USER: DifferentEndUser,
    Status.CANCELLED: Cancelled,
}


def _error(status: int, message: str) -> PortalKeyringError:
    return _ERRORS.get(status, PortalKeyringError)(status, message)


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(Status.INVALID_ARGUMENT, message)


# ------------------------------------------------------------------------------------------------
# Strings in and out
# ------------------------------------------------------------------------------------------------


def _text_arg(value: Optional[Union[str, bytes]], name: str, optional: bool = False) -> Optional[bytes]:
    """Encodes a non-secret string argument as NUL-free UTF-8 bytes (the library checks the
    rest: blank, invalid UTF-8, length)."""
    if value is None:
        if optional:
            return None
        raise _invalid(f"{name}: must not be None")
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise _invalid(f"{name}: not valid UTF-8 (lone surrogate)") from None
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise TypeError(f"{name} must be str or bytes, not {type(value).__name__}")
    if b"\0" in data:
        raise _invalid(f"{name}: contains a NUL byte")
    return data


@contextlib.contextmanager
def _secret_arg(value: TokenLike, name: str) -> Iterator[Any]:
    """Yields a NUL-terminated ``char`` array holding a copy of ``value`` that is wiped (zeroed)
    when the block ends."""
    if isinstance(value, str):
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError:
            raise _invalid(f"{name}: not valid UTF-8 (lone surrogate)") from None
        source: Union[bytes, bytearray, memoryview] = encoded
    elif isinstance(value, (bytes, bytearray, memoryview)):
        source = value
    else:
        raise TypeError(f"{name} must be str, bytes or bytearray, not {type(value).__name__}")
    view = memoryview(source).cast("B")
    size = view.nbytes
    buffer = bytearray(size + 1)  # exact size: never grown, so never reallocated with a stale copy
    buffer[:size] = view
    view.release()
    array = (ctypes.c_char * (size + 1)).from_buffer(buffer)
    try:
        if buffer.find(0, 0, size) != -1:
            # The C ABI takes NUL-terminated strings: refuse rather than truncate.
            raise _invalid(f"{name}: contains a NUL byte, which the C ABI cannot pass")
        yield array
    finally:
        ctypes.memset(array, 0, size + 1)
        del array


def _take_string(pointer: Any) -> "SecretToken":
    """Copies a caller-owned library string into a :class:`SecretToken` and releases (wipes) the
    library's copy."""
    try:
        size = _strlen(pointer)
        token = SecretToken(size)
        if size:
            ctypes.memmove((ctypes.c_char * size).from_buffer(token), pointer, size)
        return token
    finally:
        _lib.portal_string_free(pointer)


class SecretToken(bytearray):
    """A token copy (UTF-8 bytes) that wipes itself.

    A ``bytearray``: compare it, slice it, ``decode()`` it (a ``str`` copy cannot be wiped, so keep
    those short-lived). Use it in a ``with`` block — it is zeroed and emptied when the block ends —
    or call :meth:`wipe`; garbage collection wipes it too. ``repr``/``str`` never show the bytes,
    and it refuses to be pickled.
    """

    def __enter__(self) -> "SecretToken":
        return self

    def __exit__(self, *exc: object) -> None:
        self.wipe()

    def wipe(self) -> None:
        """Overwrites the bytes with zeros, then empties the token."""
        size = len(self)
        if size:
            try:
                array = (ctypes.c_char * size).from_buffer(self)
            except Exception:  # pragma: no cover - only if exported elsewhere (memoryview held)
                self[:] = bytes(size)
            else:
                ctypes.memset(array, 0, size)
                del array
            del self[:]

    def __del__(self) -> None:
        try:
            self.wipe()
        except Exception:  # pragma: no cover - interpreter shutdown or a live memoryview
            pass

    def __repr__(self) -> str:
        return f"<SecretToken: {len(self)} bytes, redacted>"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a SecretToken cannot be pickled")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a SecretToken cannot be pickled")


# ------------------------------------------------------------------------------------------------
# Handle ownership
# ------------------------------------------------------------------------------------------------


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

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pointer = self._take_if_done()
        if pointer is not None:
            self._free(pointer)


class _Owner:
    """Base of the handle-owning classes: context manager, ``close()``, free on collection."""

    _h: Optional[_Handle] = None

    def close(self) -> None:
        """Frees the library handle (idempotent). Further use raises :class:`InvalidArgument`."""
        if self._h is not None:
            self._h.close()

    @property
    def closed(self) -> bool:
        return self._h is None or self._h.closed

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


# ------------------------------------------------------------------------------------------------
# PortalAuth and Session
# ------------------------------------------------------------------------------------------------


class PortalAuth(_Owner):
    """Client auth for one Portal auth environment (``portal_auth``). Does no I/O on creation.

    :param auth_environment_id: the auth environment id (not blank, at most 2048 bytes).
    :param redirect_url: the app's sign-in redirect URL (not blank, at most 2048 bytes).
    :param api_host: the Portal API host (``"host"`` or ``"host:port"``); ``None`` for
        ``api.portalhq.io``.
    :raises InvalidArgument: naming the first bad argument.
    """

    def __init__(self, auth_environment_id: str, redirect_url: str, api_host: Optional[str] = None) -> None:
        env = _text_arg(auth_environment_id, "auth_environment_id")
        redirect = _text_arg(redirect_url, "redirect_url")
        host = _text_arg(api_host, "api_host", optional=True)
        out = _AuthP()
        _lib.portal_auth_new(ctypes.byref(out), env, redirect, host)
        self._h = _Handle(out, _lib.portal_auth_free, "auth")
        self.auth_environment_id = auth_environment_id
        self.redirect_url = redirect_url
        self.api_host = api_host

    def __repr__(self) -> str:
        return f"PortalAuth({self.auth_environment_id!r}, {self.redirect_url!r}, api_host={self.api_host!r})"

    def set_keyring_timeouts(self, call_timeout_ms: int, prompt_timeout_ms: int) -> None:
        """Sets the keyring deadlines of later calls, in milliseconds (1 … 600000 each; defaults
        5000 for the provider calls of one operation and 30000 for an unlock prompt)."""
        for name, value in (("call_timeout_ms", call_timeout_ms), ("prompt_timeout_ms", prompt_timeout_ms)):
            if not isinstance(value, int) or not 1 <= value <= 600_000:
                raise _invalid(f"{name}: must be an int 1 … 600000")
        assert self._h is not None
        with self._h.use() as auth:
            _lib.portal_auth_set_keyring_timeouts(auth, call_timeout_ms, prompt_timeout_ms)

    def restore_session(self) -> Optional["Session"]:
        """Restores the persisted session without a network call. Blocks (keyring I/O).

        :returns: the session, or ``None`` when the end user is signed out (nothing stored, or
            only unusable items, which were deleted).
        :raises SessionStorageFailure: the keyring cannot be read this time; nothing was deleted
            and the end user is NOT known to be signed out.
        """
        out = _SessionP()
        assert self._h is not None
        with self._h.use() as auth:
            _lib.portal_auth_restore_session(auth, ctypes.byref(out))
        return Session._adopt(out) if out else None

    def clear_persisted_session(self) -> None:
        """Deletes every stored session of this auth environment (sign-out, or a clean slate on
        the first launch after install). Succeeds when nothing is stored; never fires listeners.
        Blocks (keyring I/O). :raises SessionStorageFailure:"""
        assert self._h is not None
        with self._h.use() as auth:
            _lib.portal_auth_clear_persisted_session(auth)

    def persist_session(self, end_user_id: str, client_session_token: TokenLike) -> "Session":
        """Stores a CST that the app's own backend issued, replacing any stored session of this
        auth environment, and returns it. Blocks (keyring I/O).

        The token (1 … 65536 bytes of UTF-8, not all whitespace) round-trips byte-exact; a NUL
        byte, invalid UTF-8 or a longer token raise :class:`InvalidArgument` (never truncated).
        :raises SessionStorageFailure: the previously stored session is then intact.
        """
        user = _text_arg(end_user_id, "end_user_id")
        out = _SessionP()
        assert self._h is not None
        with _secret_arg(client_session_token, "client_session_token") as token, self._h.use() as auth:
            _lib.portal_auth_persist_session(auth, user, token, ctypes.byref(out))
        return Session._adopt(out)


class Session(_Owner):
    """A signed-in end user's session (``portal_session``). Obtained from
    :meth:`PortalAuth.restore_session` or :meth:`PortalAuth.persist_session`."""

    end_user_id: str
    auth_environment_id: str

    def __init__(self) -> None:
        raise TypeError("sessions come from PortalAuth.restore_session() or persist_session()")

    @classmethod
    def _adopt(cls, pointer: Any) -> "Session":
        self = cls.__new__(cls)
        self._h = _Handle(pointer, _lib.portal_session_free, "session")
        # Immutable for the handle's lifetime: copy once.
        self.end_user_id = _lib.portal_session_get_end_user_id(pointer).decode("utf-8")
        self.auth_environment_id = _lib.portal_session_get_auth_environment_id(pointer).decode("utf-8")
        return self

    def __repr__(self) -> str:
        return f"<Session end_user_id={self.end_user_id!r} auth_environment_id={self.auth_environment_id!r}>"

    def token(self) -> SecretToken:
        """A copy of the Client Session Token; use it in a ``with`` block so that it is wiped::

            with session.token() as token:
                headers["Authorization"] = b"Bearer " + token

        :raises SessionInvalidated: the session was invalidated (by :meth:`invalidate`, or by the
            backend through a :class:`Portal`).
        """
        out = _CharP()
        assert self._h is not None
        with self._h.use() as session:
            _lib.portal_session_copy_token(session, ctypes.byref(out))
        return _take_string(out)

    @property
    def is_valid(self) -> bool:
        """``False`` once the session has been invalidated (its token is gone)."""
        try:
            self.token().wipe()
        except SessionInvalidated:
            return False
        return True

    def invalidate(self) -> None:
        """Drops the token from memory, then deletes the stored item if it still holds this
        sign-in (a newer sign-in is never wiped). Idempotent. Does not fire listeners. Blocks.
        :raises SessionStorageFailure: the delete failed (the token is gone regardless)."""
        assert self._h is not None
        with self._h.use() as session:
            _lib.portal_session_invalidate(session)


# ------------------------------------------------------------------------------------------------
# Listener registrations
# ------------------------------------------------------------------------------------------------

# Python callables by registration key (the C user_data). An entry lives exactly as long as the
# C registration: it is removed by destroy_notify, which the library calls exactly once (after
# the only delivery, on cancel, on portal_free, at once for a spent registration, or before a
# failed registration returns). The two C function pointers are module-level CFUNCTYPE objects
# that live as long as the module, so a registration never depends on a per-call ctypes thunk
# (which destroy_notify would otherwise have to release while running inside it).
_registrations: Dict[int, Callable[[], Any]] = {}
_registration_keys = itertools.count(1)


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


_DELIVER = _CALLBACK(_deliver)
_RELEASE = _CALLBACK(_release)


def _registration_count() -> int:
    """How many listener registrations are live (for tests)."""
    return len(_registrations)


class ListenerHandle:
    """A listener registration returned by :meth:`Portal.on_session_invalidated`.

    Dropping the handle does not cancel the listener; :meth:`cancel` does (and so does closing
    or collecting the portal). Usable as a context manager that cancels on exit.
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


class Portal(_Owner):
    """The Portal client for one credential (``portal``).

    ``Portal(session)`` validates the session at once: ``GET /api/v3/clients/me`` with the CST as
    bearer, on a library thread (the constructor does not wait). A 401 from the exact Portal API
    host invalidates the session (the token is dropped, that sign-in's keyring item deleted) and
    calls every listener once — including listeners registered after the rejection (replay).

    Closing (or collecting) the portal cancels its listeners. The session object may be closed
    first; the portal keeps the library session alive.

    :param session: the credential.
    :param api_host: ``"host"`` or ``"host:port"``; ``None`` for the host of the session's
        :class:`PortalAuth`.
    """

    def __init__(self, session: Session, api_host: Optional[str] = None) -> None:
        if not isinstance(session, Session):
            raise TypeError(f"session must be a Session, not {type(session).__name__}")
        host = _text_arg(api_host, "api_host", optional=True)
        out = _PortalP()
        assert session._h is not None
        with session._h.use() as pointer:
            _lib.portal_new(ctypes.byref(out), pointer, host)
        self._adopt(out)
        self.session: Optional[Session] = session

    @classmethod
    def with_api_key(cls, api_key: TokenLike, api_host: Optional[str] = None) -> "Portal":
        """A Portal client from a static API key. It never invalidates anything; listeners
        registered on it are spent at once (:attr:`ListenerHandle.spent`)."""
        host = _text_arg(api_host, "api_host", optional=True)
        out = _PortalP()
        with _secret_arg(api_key, "api_key") as key:
            _lib.portal_new_with_api_key(ctypes.byref(out), key, host)
        self = cls.__new__(cls)
        self._adopt(out)
        self.session = None
        return self

    def _adopt(self, pointer: Any) -> None:
        self._h = _Handle(pointer, _lib.portal_free, "portal")
        _live_portals.add(self)

    def close(self) -> None:
        """Frees the portal and cancels every listener (each is released once). No callback of
        this portal starts after this returns; one already running on the library thread is
        waited for (unless this is called from inside it). Idempotent."""
        _live_portals.discard(self)
        super().close()

    def on_session_invalidated(self, callback: Callable[[], Any]) -> ListenerHandle:
        """Registers ``callback()`` to be called at most once, on a library thread, when the
        backend rejects the session; if it was already rejected, it is called once soon
        (replay). The callable is referenced until the registration ends (delivered, cancelled,
        or the portal closed). An exception it raises is reported through
        ``sys.unraisablehook`` and does not affect other listeners.
        """
        if not callable(callback):
            raise TypeError("callback must be callable")
        out = ctypes.c_uint64()
        assert self._h is not None
        with self._h.use() as pointer:
            key = next(_registration_keys)
            _registrations[key] = callback  # before the call: delivery may start before it returns
            # On failure destroy_notify has already removed the entry, and _errcheck raises.
            _lib.portal_on_session_invalidated(pointer, _DELIVER, key, _RELEASE, ctypes.byref(out))
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
        assert self._h is not None
        with _secret_arg(rejected_token, "rejected_token") as token, self._h.use() as pointer:
            _lib.portal_report_unauthorized(pointer, token, ctypes.byref(invalidated))
        return bool(invalidated.value)

    def clear_session(self) -> None:
        """Host-initiated sign-out: drops the token and deletes every stored session of the auth
        environment. Never fires listeners. Blocks (keyring I/O)."""
        assert self._h is not None
        with self._h.use() as pointer:
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
        assert self._h is not None
        with self._h.use() as pointer:
            _lib.portal_request(pointer, m, t, b, ctypes.byref(status), ctypes.byref(out), ctypes.byref(length))
        try:
            data = ctypes.string_at(out, length.value) if out else b""
        finally:
            _lib.portal_string_free(out)
        return Response(int(status.value), data)


@atexit.register
def _close_live_portals() -> None:
    # No library thread may call into Python after the interpreter has finalized: closing the
    # portals cancels every registration (portal_free waits for a callback that is running).
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
