"""The exception hierarchy: one class per ``portal_status`` code, under :class:`PortalKeyringError`.

Every class carries ``status`` (a :class:`Status`, or the ``int`` for a code this package does not
know) and ``message`` (the library's detail, never containing a token). :class:`InvalidArgument`
is also a ``ValueError``. Thread-safe: exceptions are plain values.
"""

from __future__ import annotations

import ctypes
import enum
import re
from typing import Any, Dict, Optional, Type, Union

from ._library import lib as _lib


def _declare_names() -> None:
    _lib.portal_status_str.restype = ctypes.c_char_p
    _lib.portal_status_str.argtypes = [ctypes.c_int]
    _lib.portal_last_error_message.restype = ctypes.c_char_p
    _lib.portal_last_error_message.argtypes = []


def status_name(status: int) -> str:
    """The library's static name for a status code (``portal_status_str``), e.g.
    ``"session storage failure"``; ``"unknown status"`` for a code it does not know."""
    name: bytes = _lib.portal_status_str(int(status))
    return name.decode("utf-8", "replace")


def last_error_message() -> str:
    """This thread's last error message (``portal_last_error_message``)."""
    message: "bytes | None" = _lib.portal_last_error_message()
    return (message or b"").decode("utf-8", "replace")


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
    MAGIC_LINK_NOT_CONFIGURED = 15
    AUTH_METHOD_UNAVAILABLE = 16
    ACCOUNT_ABSTRACTION_UNAVAILABLE = 17
    SERVER = 18
    REQUEST_REFUSED = 19
    TOTP_QR_UNAVAILABLE = 20
    SIGN_IN_IN_PROGRESS = 21
    SIGN_IN_UNAVAILABLE = 22
    SIGN_IN_TIMED_OUT = 23



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
    """``PORTAL_ERR_RATE_LIMITED``: the Portal API answered HTTP 429; try again later (Portal
    limits magic links per address per minute). Never retried automatically.

    ``retry_after`` is the wait the API's ``Retry-After`` asked for, in whole seconds (an
    ``int``), read from the library's message ("rate limited by the Portal API; retry after N s");
    ``None`` when the API gave none, which is what Portal does."""

    retry_after: Optional[int]

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        found = re.search(r"; retry after ([0-9]{1,18}) s\b", message)
        self.retry_after = int(found.group(1)) if found else None


class MalformedResponse(PortalKeyringError):
    """``PORTAL_ERR_MALFORMED_RESPONSE``: a Portal API response lacked a required field."""


class InvalidGrant(PortalKeyringError):
    """``PORTAL_ERR_INVALID_GRANT``: a sign-in grant was used, expired or unknown."""


class InvalidUserJwt(PortalKeyringError):
    """``PORTAL_ERR_INVALID_USER_JWT``: the user JWT of a TOTP verification was rejected."""


class AuthenticationFailed(PortalKeyringError):
    """``PORTAL_ERR_AUTHENTICATION_FAILED``: sign-in failed (error redirect, wrong TOTP code)."""


class MagicLinkNotConfigured(PortalKeyringError):
    """``PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED``: :meth:`PortalAuth.send_magic_link` on an auth
    made without ``magic_link=``; nothing was sent."""


class AuthMethodUnavailable(PortalKeyringError):
    """``PORTAL_ERR_AUTH_METHOD_UNAVAILABLE``: the auth environment has not enabled that provider
    (Google or Apple); not retryable."""


class AccountAbstractionUnavailable(PortalKeyringError):
    """``PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE``: the ``is_account_abstracted`` asked for is
    not available for this auth environment; ``message`` is the server's text (200 characters
    at most)."""


class ServerError(PortalKeyringError):
    """``PORTAL_ERR_SERVER``: the Portal API answered HTTP 5xx; not a failed sign-in (a sign-in
    link stays usable). Try again later."""


class RequestRefused(PortalKeyringError):
    """``PORTAL_ERR_REQUEST_REFUSED``: the Portal API refused the request with a 4xx status other
    than 401 and 429 (403 …): configuration or request, not a failed sign-in."""


class TotpQrUnavailable(PortalKeyringError):
    """``PORTAL_ERR_TOTP_QR_UNAVAILABLE``: no QR code could be made of a TOTP enrolment link (not
    an ``otpauth://`` link with a valid secret, too long, or libqrencode4 not installed)."""


class SignInInProgress(PortalKeyringError):
    """``PORTAL_ERR_SIGN_IN_IN_PROGRESS``: a desktop sign-in of this auth environment is already
    waiting in this process; nothing done."""


class SignInUnavailable(PortalKeyringError):
    """``PORTAL_ERR_SIGN_IN_UNAVAILABLE``: the desktop could not open the sign-in page (no
    application registered for its URL scheme, no OpenURI portal); nothing stored."""


class SignInTimedOut(PortalKeyringError):
    """``PORTAL_ERR_SIGN_IN_TIMED_OUT``: no redirect came back within the desktop sign-in's
    timeout; nothing stored by the call."""


class UnsolicitedRedirect(PortalKeyringError):
    """``PORTAL_ERR_UNSOLICITED_REDIRECT``: a redirect no pending sign-in asked for; nothing done."""


class DifferentEndUser(PortalKeyringError):
    """``PORTAL_ERR_DIFFERENT_END_USER``: another end user's session is stored; nothing stored.
    :meth:`PortalAuth.handle_redirect` with ``replace_end_user=True`` replaces it."""


class Cancelled(PortalKeyringError):
    """``PORTAL_ERR_CANCELLED``: an operation was cancelled before it completed."""


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
    Status.MAGIC_LINK_NOT_CONFIGURED: MagicLinkNotConfigured,
    Status.AUTH_METHOD_UNAVAILABLE: AuthMethodUnavailable,
    Status.ACCOUNT_ABSTRACTION_UNAVAILABLE: AccountAbstractionUnavailable,
    Status.SERVER: ServerError,
    Status.REQUEST_REFUSED: RequestRefused,
    Status.TOTP_QR_UNAVAILABLE: TotpQrUnavailable,
    Status.SIGN_IN_IN_PROGRESS: SignInInProgress,
    Status.SIGN_IN_UNAVAILABLE: SignInUnavailable,
    Status.SIGN_IN_TIMED_OUT: SignInTimedOut,
}


def _error(status: int, message: str) -> PortalKeyringError:
    return _ERRORS.get(status, PortalKeyringError)(status, message)


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(Status.INVALID_ARGUMENT, message)


def _errcheck(result: int, func: Any, args: Any) -> int:
    # Runs right after the foreign call on the same thread, before any other library call can
    # replace the thread-local message.
    if result != Status.OK:
        raise _error(result, last_error_message())
    return result


_declare_names()
