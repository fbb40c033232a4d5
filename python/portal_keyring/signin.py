"""Typed results of the sign-in calls of :class:`portal_keyring.PortalAuth`.

:meth:`PortalAuth.handle_redirect` returns ``None`` (not this app's redirect URL; nothing done),
a :class:`SignedIn` (the session was persisted before the call returned) or a
:class:`TotpRequired` (nothing persisted; pass :attr:`TotpRequired.user_jwt` and the end user's
code to :meth:`PortalAuth.verify_totp`). Match on them with ``isinstance`` or ``match``.
Plain values: safe to pass between threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple, Union

from ._strings import SecretToken

if TYPE_CHECKING:
    from .auth import Session
    from .qrcode import QRCode


@dataclass(frozen=True)
class MagicLinkConfig:
    """The sender and email template Portal requires to send a magic link (PortalSwift's
    ``MagicLinkConfig``), given to :class:`PortalAuth` as ``magic_link=``. Each: not blank, at
    most 2048 bytes of UTF-8, no control characters (checked when :class:`PortalAuth` is made)."""

    #: The sender address; it must belong to a sending domain the auth environment enabled.
    from_email: str
    #: The id of an email template of the auth environment.
    template_id: str


@dataclass(frozen=True)
class SignInMethods:
    """What :meth:`PortalAuth.get_methods` returns (``GET /api/v3/auth/methods``)."""

    #: The allowed methods, e.g. ``("EMAIL_MAGIC_LINK", "GOOGLE", "APPLE")``, in the API's order.
    methods: Tuple[str, ...]
    #: Whether Portal creates a wallet for a new end user automatically.
    auto_create_wallet: bool


@dataclass(frozen=True)
class SignedIn:
    """The redirect signed the end user in (PortalSwift's ``AuthenticatedResult``);
    :attr:`session` is persisted and owned by the caller (close it, or use it in a ``with``
    block). :attr:`client_id` and :attr:`is_account_abstracted` are what Portal said about the
    client, ``None`` when it said nothing (also on :attr:`session`)."""

    session: "Session"
    client_id: Optional[str] = None
    is_account_abstracted: Optional[bool] = None


@dataclass(frozen=True, repr=False)
class TotpRequired:
    """The end user must enter a TOTP code: call ``auth.verify_totp(code, result.user_jwt)``
    (PortalSwift's ``TotpRequiredResult``).

    :attr:`user_jwt` is a credential (a :class:`SecretToken`: wiped by ``with`` or ``wipe()``);
    :attr:`totp_link` is the ``otpauth://`` enrolment link when the end user has not set up TOTP
    yet (show it as a QR code), else ``None``; :attr:`totp_secret` is its shared secret (base32,
    uppercased, validated; ``None`` without a valid one), to type into an authenticator app.
    Both embed the secret: never log them. :attr:`end_user_id` is the end user the session will
    be stored for (the JWT's ``endUserId`` claim; ``""`` when the JWT has none, and then
    :meth:`PortalAuth.verify_totp` raises :class:`InvalidUserJwt` without sending the code).
    ``repr`` shows only the end user.
    """

    user_jwt: SecretToken
    totp_link: Optional[str]
    end_user_id: str = ""
    totp_secret: Optional[str] = None

    def qr_code(self) -> "QRCode":
        """:attr:`totp_link` as a QR code to scan (:func:`portal_keyring.totp_qr_code`). Raises
        :class:`TotpQrUnavailable` without a link or without a valid secret in it."""
        from .qrcode import totp_qr_code

        if self.totp_link is None:
            from .errors import Status, TotpQrUnavailable

            raise TotpQrUnavailable(Status.TOTP_QR_UNAVAILABLE, "the TOTP step carries no enrolment link")
        return totp_qr_code(self.totp_link)

    def __repr__(self) -> str:
        return (
            f"TotpRequired(end_user_id={self.end_user_id!r}, user_jwt=<redacted>, "
            f"totp_link={'<redacted>' if self.totp_link else None}, "
            f"totp_secret={'<redacted>' if self.totp_secret else None})"
        )


#: A handled redirect.
RedirectResult = Union[SignedIn, TotpRequired]
