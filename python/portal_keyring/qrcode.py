"""TOTP enrolment links as QR codes (``portal_totp_qr_code``, ``portal_totp_qr_svg``)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Tuple

from ._ffi import _CharP
from ._library import lib as _lib
from ._strings import _take_text, _text_arg


@dataclass(frozen=True, repr=False)
class QRCode:
    """A QR code of a TOTP enrolment link: error-correction level M, with its 4-module quiet zone
    included in :attr:`size`. :attr:`modules` holds one tuple per row, top row first, ``True``
    for a dark module; :attr:`svg` draws it (black on white, one unit per module). The modules
    encode the TOTP secret: show them, never log them (``repr`` shows only the size)."""

    size: int
    modules: Tuple[Tuple[bool, ...], ...]
    svg: str

    def is_dark(self, x: int, y: int) -> bool:
        """Whether the module at column ``x``, row ``y`` is dark; ``False`` outside the code."""
        return 0 <= x < self.size and 0 <= y < self.size and self.modules[y][x]

    def __repr__(self) -> str:
        return f"QRCode(size={self.size}, modules=<redacted>, svg=<redacted>)"


def totp_qr_code(totp_link: str) -> QRCode:
    """``totp_link`` (an ``otpauth://`` link, e.g. :attr:`TotpRequired.totp_link`) as a QR code
    for an authenticator app to scan. Raises :class:`TotpQrUnavailable` when the link carries no
    valid secret, is too long, or libqrencode4 is not installed; :class:`InvalidArgument` for a
    link that is not text."""
    link = _text_arg(totp_link, "totp_link")
    size = ctypes.c_size_t()
    modules = _CharP()
    _lib.portal_totp_qr_code(link, ctypes.byref(size), ctypes.byref(modules))
    text = _take_text(modules)
    svg = _CharP()
    _lib.portal_totp_qr_svg(link, ctypes.byref(svg))
    width = size.value
    rows = tuple(tuple(c == "1" for c in text[row * width:(row + 1) * width]) for row in range(width))
    return QRCode(width, rows, _take_text(svg))
