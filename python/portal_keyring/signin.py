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


@dataclass(frozen=True)
class SignInMethods:
    """What :meth:`PortalAuth.get_methods` returns (``GET /api/v3/auth/methods``)."""

    #: The allowed methods, e.g. ``("EMAIL_MAGIC_LINK", "GOOGLE", "APPLE")``, in the API's order.
    methods: Tuple[str, ...]
    #: Whether Portal creates a wallet for a new end user automatically.
    auto_create_wallet: bool


@dataclass(frozen=True)
class SignedIn:
    """The redirect signed the end user in; :attr:`session` is persisted and owned by the caller
    (close it, or use it in a ``with`` block)."""

    session: "Session"


@dataclass(frozen=True, repr=False)
class TotpRequired:
    """The end user must enter a TOTP code: call ``auth.verify_totp(code, result.user_jwt)``.

    :attr:`user_jwt` is a credential (a :class:`SecretToken`: wiped by ``with`` or ``wipe()``);
    :attr:`totp_link` is the ``otpauth://`` enrolment link when the end user has not set up TOTP
    yet (show it as a QR code), else ``None``.
    """

    user_jwt: SecretToken
    totp_link: Optional[str]

    def __repr__(self) -> str:
        return f"TotpRequired(user_jwt=<redacted>, totp_link={'<set>' if self.totp_link else None})"


#: A handled redirect.
RedirectResult = Union[SignedIn, TotpRequired]
