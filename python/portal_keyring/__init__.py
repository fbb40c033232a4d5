"""portal_keyring — Python bindings (ctypes, no compiled parts) for libportal-keyring.so.

The distribution is ``portal-keyring`` (``pip install ./python``); fully typed (``py.typed``).

portal-keyring keeps a Portal end user's Client Session Token (CST) in the user's Secret Service
keyring (GNOME Keyring, KWallet, KeePassXC), restores it on the next launch without a network
call, clears it on sign-out, and tells the app once when the Portal backend rejects it. This
package wraps the C ABI in ``Include/portal_keyring.h``; the header is the reference for every
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

Finding the library: ``$PORTAL_KEYRING_LIBRARY`` (a file), then the library installed in the same
prefix as this package (``PREFIX/lib``, ``PREFIX/lib64``, ``PREFIX/lib/<multiarch>``), then the
system soname ``libportal-keyring.so.0`` through the dynamic loader. When none loads,
:class:`LibraryNotFound` (an ``OSError``) lists every attempt with the loader's message.

Errors: every failed call raises a subclass of :class:`PortalKeyringError`, one per status code
(:class:`InvalidArgument`, :class:`SessionStorageFailure`, :class:`SessionInvalidated`,
:class:`Unauthorized`, :class:`NetworkError`, :class:`InternalError`, and the sign-in codes'
:class:`RateLimited`, :class:`MalformedResponse`, :class:`InvalidGrant`, :class:`InvalidUserJwt`,
:class:`AuthenticationFailed`, :class:`UnsolicitedRedirect`, :class:`DifferentEndUser`,
:class:`Cancelled`, :class:`MagicLinkNotConfigured`, :class:`AuthMethodUnavailable`,
:class:`AccountAbstractionUnavailable`, :class:`ServerError` (HTTP 5xx: not a failed sign-in),
:class:`RequestRefused`, :class:`TotpQrUnavailable`, and the desktop sign-in's :class:`SignInInProgress`,
:class:`SignInUnavailable`, :class:`SignInTimedOut`), carrying ``status`` and the library's ``message``; a code this
package does not know raises the base class with the ``int`` status. :class:`InvalidArgument` is
also a ``ValueError``. "Signed out" is not an error: :meth:`PortalAuth.restore_session` returns
``None``. :class:`SessionStorageFailure` means the keyring could not be read *this time*; the end
user is then NOT known to be signed out and nothing was deleted.

Handles: :class:`PortalAuth`, :class:`Session` and :class:`Portal` own a library handle. They are
context managers; ``close()`` frees the handle (idempotent), and so does garbage collection —
except that collecting a :class:`Portal` is not a cancel: while its validation request may still
detect a rejection, its listeners are kept (and called once on a 401), then released uncalled. A
handle shared between threads is safe to close while another thread is using it: the library
handle is freed when the last call in flight returns.

Sign-in: ``PortalAuth(…, magic_link=MagicLinkConfig(from_email=…, template_id=…),
is_account_abstracted=None)``, :meth:`PortalAuth.get_methods`, :meth:`~PortalAuth.send_magic_link`,
:meth:`~PortalAuth.login_with_google` / ``_apple``, :meth:`~PortalAuth.handle_redirect` (``None``,
:class:`SignedIn` or :class:`TotpRequired`) and :meth:`~PortalAuth.verify_totp`; the desktop sign-in
:meth:`~PortalAuth.sign_in_with_google` / ``_apple``, which opens the page in the desktop's browser and
returns when the redirect came back.

asyncio: every keyring, sign-in and Portal call has a coroutine twin (``restore_session_async``,
``handle_redirect_async`` …, ``Portal.aclose``) that completes on the running loop without blocking it; cancelling the task
cancels the operation; ``on_session_invalidated(cb, loop=loop)`` delivers on the loop. See
:mod:`portal_keyring.aio`.

Style: attributes and properties never block, raise or hand out a secret (``end_user_id``,
``is_valid``, ``closed``); whatever does I/O, may raise or copies a secret is a method
(``token()``).

Threads: every method may be called from any thread. Calls that block (keyring I/O, network)
release the GIL. Listener callbacks (without ``loop=``) run on a library-owned thread (one serial queue per portal),
never while the library holds a lock; they may call anything in this module, including
``handle.cancel()`` and ``portal.close()``. Do not make a callback wait for a lock that the
thread calling ``cancel()``/``close()`` holds: those calls wait for a callback that is running.

Tokens: :meth:`Session.token` returns a :class:`SecretToken`, a ``bytearray`` that wipes itself
when its ``with`` block ends (and on ``wipe()`` or garbage collection). The library's own copy is
wiped by ``portal_string_free``. Tokens passed in are copied into a ``bytearray`` that is wiped
after the call; pass a ``bytearray`` rather than a ``str`` to avoid immutable copies.
"""

from __future__ import annotations

#: This package's version (the library's version it was released with; see :data:`ABI_VERSION`).
__version__ = "0.1.0"

from . import aio
from ._ffi import _DECLARED, ABI_VERSION, library_version, library_version_number
from ._library import LibraryNotFound, library_path
from ._library import lib as _lib
from ._strings import SecretToken, TokenLike
from .auth import PortalAuth, Session
from .errors import (
    AccountAbstractionUnavailable,
    AuthenticationFailed,
    AuthMethodUnavailable,
    Cancelled,
    DifferentEndUser,
    InternalError,
    InvalidArgument,
    InvalidGrant,
    InvalidUserJwt,
    MagicLinkNotConfigured,
    MalformedResponse,
    NetworkError,
    PortalKeyringError,
    RateLimited,
    RequestRefused,
    ServerError,
    SessionInvalidated,
    SessionStorageFailure,
    SignInInProgress,
    SignInTimedOut,
    SignInUnavailable,
    Status,
    TotpQrUnavailable,
    Unauthorized,
    UnsolicitedRedirect,
    _errcheck,
    _error,
    status_name,
)
from .portal import ListenerHandle, Portal, Response, _registration_count
from .qrcode import QRCode, totp_qr_code
from .signin import MagicLinkConfig, RedirectResult, SignedIn, SignInMethods, TotpRequired
from .watch import SessionChange, SessionWatch

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
    "MagicLinkNotConfigured",
    "AuthMethodUnavailable",
    "AccountAbstractionUnavailable",
    "ServerError",
    "RequestRefused",
    "TotpQrUnavailable",
    "SignInInProgress",
    "SignInUnavailable",
    "SignInTimedOut",
    "MagicLinkConfig",
    "LibraryNotFound",
    "SecretToken",
    "TokenLike",
    "PortalAuth",
    "Session",
    "Portal",
    "ListenerHandle",
    "Response",
    "SignInMethods",
    "SignedIn",
    "TotpRequired",
    "RedirectResult",
    "QRCode",
    "totp_qr_code",
    "library_path",
    "library_version",
    "library_version_number",
    "status_name",
    "aio",
    "SessionChange",
    "SessionWatch",
]
