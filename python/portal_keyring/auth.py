"""Client auth (:class:`PortalAuth`) and the signed-in session (:class:`Session`).

Style: attributes and properties are plain values that never block, never raise and never hand
out a secret (``Session.end_user_id``, ``Session.is_valid``, ``closed``); everything that does I/O,
may raise, or copies a secret is a method (``Session.token()``, ``restore_session()``).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from . import aio
from ._ffi import _AuthP, _CharP, _SessionP
from ._handles import _Handle, _Owner
from ._library import lib as _lib
from ._strings import (
    SecretToken,
    TokenLike,
    _api_host_arg,
    _invalid,
    _secret_arg,
    _take_string,
    _take_text,
    _text_arg,
)
from .errors import InternalError, InvalidArgument, InvalidUserJwt, SessionInvalidated, Status
from .signin import MagicLinkConfig, RedirectResult, SignedIn, SignInMethods, TotpRequired

if TYPE_CHECKING:  # watch imports this module
    from .watch import SessionChange, SessionChanges, SessionWatch

T = TypeVar("T")

# portal_redirect_kind and portal_redirect_flags
_AUTHENTICATED = 1
_TOTP_REQUIRED = 2
_ALLOW_UNSOLICITED = 1
_REPLACE_END_USER = 2
# portal_account_abstraction
_ACCOUNT_ABSTRACTION = {None: 0, False: 1, True: 2}


class PortalAuth(_Owner):
    """Client auth for one Portal auth environment (``portal_auth``). Does no I/O on creation.

    :param auth_environment_id: the auth environment id (not blank, at most 2048 bytes).
    :param redirect_url: the app's sign-in redirect URL (an absolute URL scheme://… or a
        private-use scheme:/path such as ``com.example.app:/oauth2redirect``, at most 8192 bytes).
    :param api_host: the Portal API host (``"host"`` or ``"host:port"``); ``None`` for
        ``api.portalhq.io``.
    :param magic_link: keyword only: the sender and template :meth:`send_magic_link` sends
        (Portal requires both); without it that call raises :class:`MagicLinkNotConfigured`.
    :param is_account_abstracted: keyword only: ``True``/``False`` asks for an account-abstracted
        client (or not) with magic links and OAuth URLs; ``None`` (the default) sends nothing.
    :raises InvalidArgument: naming the first bad argument.
    """

    def __init__(self, auth_environment_id: str, redirect_url: str, api_host: Optional[str] = None, *,
                 magic_link: Optional[MagicLinkConfig] = None,
                 is_account_abstracted: Optional[bool] = None) -> None:
        env = _text_arg(auth_environment_id, "auth_environment_id")
        redirect = _text_arg(redirect_url, "redirect_url")
        host = _api_host_arg(api_host)
        if magic_link is not None and not isinstance(magic_link, MagicLinkConfig):
            raise TypeError(f"magic_link must be a MagicLinkConfig, not {type(magic_link).__name__}")
        if is_account_abstracted not in _ACCOUNT_ABSTRACTION or not isinstance(is_account_abstracted, (bool, type(None))):
            raise TypeError("is_account_abstracted must be True, False or None")
        sender = template = None
        if magic_link is not None:
            sender = _text_arg(magic_link.from_email, "from_email")
            template = _text_arg(magic_link.template_id, "template_id")
        out = _AuthP()
        _lib.portal_auth_new(ctypes.byref(out), env, redirect, host)
        self._h = _Handle(out, _lib.portal_auth_free, "auth")
        with self._use() as auth:
            if magic_link is not None:
                _lib.portal_auth_set_magic_link(auth, sender, template)
            _lib.portal_auth_set_account_abstraction(auth, _ACCOUNT_ABSTRACTION[is_account_abstracted])
        self.auth_environment_id = auth_environment_id
        self.redirect_url = redirect_url
        self.api_host = api_host
        self.magic_link = magic_link
        self.is_account_abstracted = is_account_abstracted

    def __repr__(self) -> str:
        return (f"PortalAuth({self.auth_environment_id!r}, {self.redirect_url!r}, api_host={self.api_host!r}, "
                f"magic_link={self.magic_link!r}, is_account_abstracted={self.is_account_abstracted!r})")

    def set_keyring_timeouts(self, call_timeout_ms: int, prompt_timeout_ms: int) -> None:
        """Sets the keyring deadlines of later calls, in milliseconds (1 … 600000 each; defaults
        5000 for the provider calls of one operation and 30000 for an unlock prompt)."""
        for name, value in (("call_timeout_ms", call_timeout_ms), ("prompt_timeout_ms", prompt_timeout_ms)):
            if not isinstance(value, int) or not 1 <= value <= 600_000:
                raise _invalid(f"{name}: must be an int 1 … 600000")
        with self._use() as auth:
            _lib.portal_auth_set_keyring_timeouts(auth, call_timeout_ms, prompt_timeout_ms)

    def restore_session(self) -> Optional["Session"]:
        """Restores the persisted session without a network call. Blocks (keyring I/O).

        :returns: the session, or ``None`` when the end user is signed out (nothing stored, or
            only unusable items, which were deleted).
        :raises SessionStorageFailure: the keyring cannot be read this time; nothing was deleted
            and the end user is NOT known to be signed out.
        """
        out = _SessionP()
        with self._use() as auth:
            _lib.portal_auth_restore_session(auth, ctypes.byref(out))
        return Session._adopt(out) if out else None

    def clear_persisted_session(self) -> None:
        """Deletes every stored session of this auth environment (sign-out, or a clean slate on
        the first launch after install). Succeeds when nothing is stored; never fires listeners.
        Blocks (keyring I/O). :raises SessionStorageFailure:"""
        with self._use() as auth:
            _lib.portal_auth_clear_persisted_session(auth)

    def watch(self, callback: "Callable[[SessionChange], None]") -> "SessionWatch":
        """Watches this auth environment's stored session (docs/threading.md): ``callback(change)`` (a
        :class:`~portal_keyring.watch.SessionChange`) runs on the watch's own Python thread for
        every change made by any process after this returns, in order. Blocks for the
        subscription and a keyring read (at most the call deadline; never a prompt). Returns a
        :class:`~portal_keyring.watch.SessionWatch`; ``close()`` it (or use ``with``).
        :raises SessionStorageFailure: no session bus."""
        from .watch import SessionWatch

        return SessionWatch(self, callback)

    def session_changes(self) -> "SessionChanges":
        """``async with auth.session_changes() as changes: async for change in changes:`` — the
        changes of this auth environment's stored session, by any process, on the running loop
        (docs/threading.md): a :class:`~portal_keyring.watch.SessionChanges`. The watch starts on entering
        the block (or at the first iteration), off the loop's thread; leaving the block,
        ``aclose()`` or cancelling the iterating task stops it.
        :raises SessionStorageFailure: no session bus."""
        from .watch import SessionChanges

        return SessionChanges(self)

    def persist_session(self, end_user_id: str, client_session_token: TokenLike) -> "Session":
        """Stores a CST that the app's own backend issued, replacing any stored session of this
        auth environment, and returns it. Blocks (keyring I/O).

        The token (1 … 65536 bytes of UTF-8 without whitespace or control characters) round-trips
        byte-exact; whitespace or a control character anywhere (a trailing newline included), a
        NUL byte, invalid UTF-8 or a longer token raise :class:`InvalidArgument` naming
        ``client_session_token`` (never trimmed or truncated). Sessions stored by earlier
        versions are restored whatever their token holds.
        :raises SessionStorageFailure: the previously stored session is then intact.
        """
        user = _text_arg(end_user_id, "end_user_id")
        out = _SessionP()
        with _secret_arg(client_session_token, "client_session_token") as token, self._use() as auth:
            _lib.portal_auth_persist_session(auth, user, token, ctypes.byref(out))
        return Session._adopt(out)


    # -------------------------------------------------------------------------------- asyncio

    async def restore_session_async(self) -> Optional["Session"]:
        """:meth:`restore_session` as a coroutine: the keyring work runs on a library worker
        thread and completes on the running loop (``portal_auth_restore_session_async``), which
        never blocks. Same results and errors. Cancelling the task cancels the operation (an
        unlock-prompt wait ends within 250 ms) and raises ``asyncio.CancelledError`` at once.
        Await it on the loop that runs it; see :mod:`portal_keyring.aio`."""
        with self._use() as auth:
            operation = aio.start(_lib.portal_auth_restore_session_async, aio.take_session, auth)
        pointer = await operation.wait()
        return Session._adopt(pointer) if pointer else None

    async def clear_persisted_session_async(self) -> None:
        """:meth:`clear_persisted_session` as a coroutine (see :meth:`restore_session_async`)."""
        with self._use() as auth:
            operation = aio.start(_lib.portal_auth_clear_persisted_session_async, aio.nothing, auth)
        await operation.wait()

    async def persist_session_async(self, end_user_id: str, client_session_token: TokenLike) -> "Session":
        """:meth:`persist_session` as a coroutine. The strings are copied (and the token copy
        wiped) before the first ``await`` suspends. A cancelled persist either stored the new session or
        left the previous one intact."""
        user = _text_arg(end_user_id, "end_user_id")
        with _secret_arg(client_session_token, "client_session_token") as token, self._use() as auth:
            operation = aio.start(_lib.portal_auth_persist_session_async, aio.take_session, auth, user, token)
        pointer = await operation.wait()
        return Session._adopt(pointer)

    # -------------------------------------------------------------------------------- sign-in

    def get_methods(self) -> SignInMethods:
        """The sign-in methods the auth environment allows. Blocks (network, at most 30 s).
        :raises NetworkError, RateLimited, MalformedResponse, Unauthorized, ServerError, RequestRefused:"""
        methods = _CharP()
        auto = ctypes.c_bool(False)
        with self._use() as auth:
            _lib.portal_auth_get_methods(auth, ctypes.byref(methods), ctypes.byref(auto))
        text = _take_text(methods)
        return SignInMethods(tuple(m for m in text.split(",") if m), bool(auto.value))

    def send_magic_link(self, email: str) -> None:
        """Emails a sign-in link that opens the redirect URL, from the ``magic_link`` sender with
        its template, after recording the pending sign-in that :meth:`handle_redirect` requires.
        The answer's body is not read. Never retried automatically. Blocks (network).
        :raises MagicLinkNotConfigured (no ``magic_link=``; checked first, nothing sent or
            recorded), InvalidArgument, RateLimited, AccountAbstractionUnavailable, NetworkError,
            SessionStorageFailure (the pending marker could not be written; nothing sent),
            ServerError, RequestRefused:"""
        address = _text_arg(email, "email")
        with self._use() as auth:
            _lib.portal_auth_send_magic_link(auth, address)

    def login_with_google(self) -> str:
        """The Google authorize URL to open in the browser (records the pending sign-in first,
        as :meth:`send_magic_link` does). Fetched fresh every call. Blocks (network).
        :raises AuthMethodUnavailable (Google is not enabled), AccountAbstractionUnavailable,
            Unauthorized, RateLimited, NetworkError, SessionStorageFailure, ServerError,
            RequestRefused:"""
        return self._login(_lib.portal_auth_login_with_google)

    def login_with_apple(self) -> str:
        """The Apple authorize URL; see :meth:`login_with_google`."""
        return self._login(_lib.portal_auth_login_with_apple)

    def _login(self, function: Any) -> str:
        url = _CharP()
        with self._use() as auth:
            function(auth, ctypes.byref(url))
        return _take_text(url)

    def handle_redirect(
        self, url: str, *, allow_unsolicited: bool = False, replace_end_user: bool = False
    ) -> Optional[RedirectResult]:
        """Completes a sign-in from the redirect URL the browser opened
        (``portal_auth_handle_redirect_v2``). Blocks (network, keyring).

        :param allow_unsolicited: exchange the grant although no sign-in started by this user is
            pending (re-opens login CSRF; for apps whose sign-ins start elsewhere).
        :param replace_end_user: after :class:`DifferentEndUser`, replace the other end user's
            stored session (the same handle reuses the remembered exchange).
        :returns: ``None`` when ``url`` is not this app's redirect URL (nothing done), else a
            :class:`SignedIn` or a :class:`TotpRequired`.
        :raises UnsolicitedRedirect, DifferentEndUser, AuthenticationFailed, InvalidGrant,
            RateLimited, MalformedResponse, NetworkError, SessionStorageFailure, InvalidArgument:
        """
        text = _text_arg(url, "url")
        flags = (_ALLOW_UNSOLICITED if allow_unsolicited else 0) | (_REPLACE_END_USER if replace_end_user else 0)
        return self._redirect_outputs(_lib.portal_auth_handle_redirect_v2, text, flags)

    def sign_in_with_google(self, timeout_ms: int = 0) -> RedirectResult:
        """Signs the end user in with Google in their browser and returns when it completed
        (``portal_auth_sign_in_with_google``; docs/sign-in.md#desktop-sign-in): opens the authorize page
        with the desktop's URL opener (GIO: the default browser, or the OpenURI portal in a
        Flatpak sandbox), then waits for the redirect: handed to :meth:`handle_redirect` in this
        process (from another thread: that call's result or error; an error redirect only when it
        carries the ``state`` of the page this call opened), or stored by the URL
        handler's process (a :class:`SignedIn` with the restored session). Persists nothing
        itself; one per auth environment in a process. Blocks until then: use the ``_async`` form
        on an event loop (cancellable).

        :param timeout_ms: how long to wait once the page is open; 0 (the default) and at most
            900000 (15 minutes).
        :raises SignInInProgress, SignInUnavailable (no application could open the page),
            SignInTimedOut, AuthMethodUnavailable, NetworkError, SessionStorageFailure,
            InvalidArgument, or the in-process delivery's error:"""
        return _completed(self._redirect_outputs(_lib.portal_auth_sign_in_with_google, _sign_in_timeout(timeout_ms)))

    def sign_in_with_apple(self, timeout_ms: int = 0) -> RedirectResult:
        """Signs the end user in with Apple in their browser; see :meth:`sign_in_with_google`."""
        return _completed(self._redirect_outputs(_lib.portal_auth_sign_in_with_apple, _sign_in_timeout(timeout_ms)))

    def _redirect_outputs(self, function: Any, *args: Any) -> Optional[RedirectResult]:
        """Calls ``function(auth, *args, &kind, &session, &user_jwt, &totp_link)`` and reads the
        sign-in it reports (``None``: not handled)."""
        kind = ctypes.c_int(0)
        session = _SessionP()
        jwt = _CharP()
        link = _CharP()
        with self._use() as auth:
            function(auth, *args, ctypes.byref(kind), ctypes.byref(session), ctypes.byref(jwt), ctypes.byref(link))
        if kind.value == _AUTHENTICATED and session:
            return _signed_in(Session._adopt(session))
        if kind.value == _TOTP_REQUIRED and jwt:
            return _totp_required(jwt, link)
        return None

    def verify_totp(self, code: str, user_jwt: TokenLike) -> "Session":
        """Completes a TOTP sign-in with the end user's code and the :class:`TotpRequired`
        user JWT; persists the session and returns it (with :attr:`Session.client_id` and
        :attr:`Session.is_account_abstracted`). Blocks (network, keyring). The session's end user
        is the JWT's ``endUserId`` claim, read first: without one, :class:`InvalidUserJwt` and
        nothing is sent. A rejected code (Portal's 401: mistyped, stale, or the sign-in expired)
        is :class:`AuthenticationFailed`: ask for a new code and call again with the same JWT.
        When Portal accepted the code but the keyring write failed
        (:class:`SessionStorageFailure`), calling this again with the same JWT on this handle,
        with whatever code, stores the remembered session without a second exchange (Portal
        spent the JWT); forgotten by :meth:`clear_persisted_session`.
        :raises InvalidUserJwt, AuthenticationFailed (code rejected), RateLimited, NetworkError,
            SessionStorageFailure, InvalidArgument:"""
        digits = _text_arg(code, "code")
        out = _SessionP()
        with _secret_arg(user_jwt, "user_jwt") as jwt, self._use() as auth:
            _lib.portal_auth_verify_totp(auth, digits, jwt, ctypes.byref(out))
        return Session._adopt(out)

    # ----------------------------------------------------------------------- sign-in, asyncio
    # Each coroutine checks its arguments (raising before anything starts), starts the library's
    # *_async call and completes on the running loop, which never blocks. Results and errors are
    # the blocking call's; a result is built on the loop's thread inside the completion (so a
    # session or user JWT that a cancelled task never receives is freed or wiped by the garbage
    # collector). Cancelling the task calls portal_operation_cancel and raises CancelledError at
    # once. Await them on the loop that runs them; see portal_keyring.aio.

    async def get_methods_async(self) -> SignInMethods:
        """:meth:`get_methods` as a coroutine (``portal_auth_get_methods_async``). Same result and
        errors; the request runs on a library worker thread and is aborted when the task is
        cancelled."""
        return await self._sign_in(_lib.portal_auth_get_methods_async, _read_methods)

    async def send_magic_link_async(self, email: str) -> None:
        """:meth:`send_magic_link` as a coroutine. ``email`` is checked for ``None``, type and NUL
        bytes before anything starts; its format is checked on the worker (then
        :class:`InvalidArgument` is raised and nothing was sent). A cancelled send may still have
        reached Portal (an email may be sent; never retried). Same errors."""
        address = _text_arg(email, "email")
        await self._sign_in(_lib.portal_auth_send_magic_link_async, aio.nothing, address)

    async def login_with_google_async(self) -> str:
        """:meth:`login_with_google` as a coroutine: the Google authorize URL. Same errors."""
        return await self._sign_in(_lib.portal_auth_login_with_google_async, _read_text)

    async def login_with_apple_async(self) -> str:
        """:meth:`login_with_apple` as a coroutine: the Apple authorize URL. Same errors."""
        return await self._sign_in(_lib.portal_auth_login_with_apple_async, _read_text)

    async def handle_redirect_async(
        self, url: str, *, allow_unsolicited: bool = False, replace_end_user: bool = False
    ) -> Optional[RedirectResult]:
        """:meth:`handle_redirect` as a coroutine (``portal_auth_handle_redirect_async``): the
        URL is checked and copied before the first ``await`` suspends. Same options, results
        (``None``, :class:`SignedIn`, :class:`TotpRequired`) and errors. A task cancelled after
        the grant exchange leaves the session persisted or not, never half; delivering the same
        URL again on this handle returns the remembered exchange."""
        text = _text_arg(url, "url")
        flags = (_ALLOW_UNSOLICITED if allow_unsolicited else 0) | (_REPLACE_END_USER if replace_end_user else 0)
        return await self._sign_in(_lib.portal_auth_handle_redirect_async, _read_redirect, text, flags)

    async def sign_in_with_google_async(self, timeout_ms: int = 0) -> RedirectResult:
        """:meth:`sign_in_with_google` as a coroutine (``portal_auth_sign_in_with_google_async``):
        the loop keeps running while the end user is in the browser, and the redirect may be
        handed to :meth:`handle_redirect_async` on the same loop. Cancelling the task ends the
        wait at once (no page is opened when the cancel comes first). Same results and errors."""
        timeout = _sign_in_timeout(timeout_ms)
        return await self._sign_in(_lib.portal_auth_sign_in_with_google_async, _read_sign_in, timeout)

    async def sign_in_with_apple_async(self, timeout_ms: int = 0) -> RedirectResult:
        """:meth:`sign_in_with_apple` as a coroutine; see :meth:`sign_in_with_google_async`."""
        timeout = _sign_in_timeout(timeout_ms)
        return await self._sign_in(_lib.portal_auth_sign_in_with_apple_async, _read_sign_in, timeout)

    async def verify_totp_async(self, code: str, user_jwt: TokenLike) -> "Session":
        """:meth:`verify_totp` as a coroutine: the code and the user JWT are checked and copied
        (the JWT copy wiped) before the first ``await`` suspends. Same result and errors. A task
        cancelled after Portal accepted the code does not stop the keyring write: the session is
        persisted when the keyring allows, and verifying again with the same JWT returns it."""
        digits = _text_arg(code, "code")
        with _secret_arg(user_jwt, "user_jwt") as jwt, self._use() as auth:
            operation = aio.start_sign_in(_lib.portal_auth_verify_totp_async, _read_session, auth, digits, jwt)
        return await operation.wait()

    async def _sign_in(self, function: Any, read: Callable[[Any], T], *args: Any) -> T:
        with self._use() as auth:
            operation = aio.start_sign_in(function, read, auth, *args)
        return await operation.wait()


def _read_methods(result: Any) -> SignInMethods:
    text = _take_text(aio.take_pointer(result, "text", _CharP))
    return SignInMethods(tuple(m for m in text.split(",") if m), bool(result.auto_create_wallet))


def _read_text(result: Any) -> str:
    return _take_text(aio.take_pointer(result, "text", _CharP))


def _read_session(result: Any) -> "Session":
    return Session._adopt(aio.take_session(result))


def _read_redirect(result: Any) -> Optional[RedirectResult]:
    if result.kind == _AUTHENTICATED and result.session:
        return _signed_in(_read_session(result))
    if result.kind == _TOTP_REQUIRED and result.user_jwt:
        link = aio.take_pointer(result, "totp_link", _CharP) if result.totp_link else None
        return _totp_required(aio.take_pointer(result, "user_jwt", _CharP), link)
    return None


def _read_sign_in(result: Any) -> RedirectResult:
    return _completed(_read_redirect(result))


def _completed(result: Optional[RedirectResult]) -> RedirectResult:
    """A desktop sign-in's result: the library never reports one as "not handled"."""
    if result is None:
        raise InternalError(Status.INTERNAL, "the desktop sign-in completed without a result")
    return result


def _sign_in_timeout(timeout_ms: int) -> int:
    """A desktop sign-in's ``timeout_ms``: 0 (the default, 15 minutes) … 900000."""
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or not 0 <= timeout_ms <= 900_000:
        raise _invalid("timeout_ms: must be an int 0 … 900000 (0: the default, 15 minutes)")
    return timeout_ms


def _signed_in(session: "Session") -> SignedIn:
    return SignedIn(session, session.client_id, session.is_account_abstracted)


def _totp_required(jwt: Any, link: Any) -> TotpRequired:
    """Takes the library's user JWT and link strings (both freed; the JWT wiped) into a
    :class:`TotpRequired` with the JWT's end user and the link's secret."""
    end_user_id = ""
    out = _CharP()
    try:
        _lib.portal_user_jwt_get_end_user_id(jwt, ctypes.byref(out))
        end_user_id = _take_text(out)
    except InvalidUserJwt:
        pass
    user_jwt = _take_string(jwt)
    if not link:
        return TotpRequired(user_jwt, None, end_user_id, None)
    totp_link = _take_text(link)
    secret = _CharP()
    _lib.portal_totp_link_get_secret(totp_link.encode("utf-8"), ctypes.byref(secret))
    return TotpRequired(user_jwt, totp_link, end_user_id, _take_text(secret) if secret else None)


class Session(_Owner):
    """A signed-in end user's session (``portal_session``). Obtained from
    :meth:`PortalAuth.restore_session` or :meth:`PortalAuth.persist_session`."""

    end_user_id: str
    auth_environment_id: str
    #: The client the sign-in that returned this session named (``handle_redirect``,
    #: ``verify_totp``); ``None`` when Portal named none, and for restored or persisted sessions.
    client_id: Optional[str]
    #: Whether that sign-in reported an account-abstracted client; ``None`` when unknown.
    is_account_abstracted: Optional[bool]

    def __init__(self) -> None:
        raise TypeError("sessions come from PortalAuth.restore_session() or persist_session()")

    @classmethod
    def _adopt(cls, pointer: Any) -> "Session":
        self = cls.__new__(cls)
        self._h = _Handle(pointer, _lib.portal_session_free, "session")
        # Immutable for the handle's lifetime: copy once.
        self.end_user_id = _lib.portal_session_get_end_user_id(pointer).decode("utf-8")
        self.auth_environment_id = _lib.portal_session_get_auth_environment_id(pointer).decode("utf-8")
        client_id = _lib.portal_session_get_client_id(pointer)
        self.client_id = client_id.decode("utf-8") if client_id is not None else None
        abstracted = _lib.portal_session_get_is_account_abstracted(pointer).value
        self.is_account_abstracted = None if abstracted < 0 else abstracted == 1
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
        with self._use() as session:
            _lib.portal_session_copy_token(session, ctypes.byref(out))
        return _take_string(out)

    @property
    def is_valid(self) -> bool:
        """``False`` once the session has been invalidated (its token is gone), and once this
        handle is closed (then nothing can use the token through it). Never raises, like every
        property."""
        try:
            self.token().wipe()
        except (SessionInvalidated, InvalidArgument):  # InvalidArgument: the handle is closed
            return False
        return True

    async def invalidate_async(self) -> None:
        """:meth:`invalidate` as a coroutine: the token is dropped before the coroutine first
        suspends; the keyring delete runs on a library worker thread."""
        with self._use() as session:
            operation = aio.start(_lib.portal_session_invalidate_async, aio.nothing, session)
        await operation.wait()

    def invalidate(self) -> None:
        """Drops the token from memory, then deletes the stored item if it still holds this
        sign-in (a newer sign-in is never wiped). Idempotent. Does not fire listeners. Blocks.
        :raises SessionStorageFailure: the delete failed (the token is gone regardless)."""
        with self._use() as session:
            _lib.portal_session_invalidate(session)
