"""ctypes declarations: argtypes and restype for every C function this package calls.

Every ``int``-returning function returns a ``portal_status`` and raises through
:func:`portal_keyring.errors._errcheck`. The tests check that every ``lib.portal_*`` used in the
package is declared here and in ``Include/portal_keyring.h``.
"""

from __future__ import annotations

import ctypes
from typing import Any, List

from ._library import lib as _lib
from .errors import _errcheck

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
_declare("portal_auth_get_methods", ctypes.c_int, [_AuthP, ctypes.POINTER(_CharP), ctypes.POINTER(ctypes.c_bool)])
_declare("portal_auth_send_magic_link", ctypes.c_int, [_AuthP, _c_char_p])
_declare("portal_auth_set_magic_link", ctypes.c_int, [_AuthP, _c_char_p, _c_char_p])
_declare("portal_auth_set_account_abstraction", ctypes.c_int, [_AuthP, ctypes.c_int])
_declare("portal_auth_login_with_google", ctypes.c_int, [_AuthP, ctypes.POINTER(_CharP)])
_declare("portal_auth_login_with_apple", ctypes.c_int, [_AuthP, ctypes.POINTER(_CharP)])
_declare(
    "portal_auth_handle_redirect_v2",
    ctypes.c_int,
    [_AuthP, _c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_SessionP),
     ctypes.POINTER(_CharP), ctypes.POINTER(_CharP)],
)
_declare("portal_auth_verify_totp", ctypes.c_int, [_AuthP, _c_char_p, _CharP, ctypes.POINTER(_SessionP)])
for _name in ("portal_auth_sign_in_with_google", "portal_auth_sign_in_with_apple"):
    _declare(
        _name,
        ctypes.c_int,
        [_AuthP, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_SessionP), ctypes.POINTER(_CharP),
         ctypes.POINTER(_CharP)],
    )
_declare("portal_session_get_end_user_id", _c_char_p, [_SessionP])
_declare("portal_session_get_auth_environment_id", _c_char_p, [_SessionP])
_declare("portal_session_get_client_id", _c_char_p, [_SessionP])


class _Tristate(ctypes.c_int):
    """An ``int`` result that is not a portal_status (1, 0, -1 unknown): no errcheck."""


_declare("portal_session_get_is_account_abstracted", _Tristate, [_SessionP])
_declare("portal_user_jwt_get_end_user_id", ctypes.c_int, [_CharP, ctypes.POINTER(_CharP)])
_declare("portal_totp_link_get_secret", ctypes.c_int, [_c_char_p, ctypes.POINTER(_CharP)])
_declare("portal_totp_qr_code", ctypes.c_int, [_c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_CharP)])
_declare("portal_totp_qr_svg", ctypes.c_int, [_c_char_p, ctypes.POINTER(_CharP)])
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

#: The C ABI version this package was written against (Include/portal_keyring.h).
ABI_VERSION = (0, 1, 0)


def library_version() -> str:
    """The loaded library's version string, e.g. ``"0.1.0"``. Never blocks; thread-safe."""
    version: bytes = _lib.portal_keyring_version()
    return version.decode("ascii")


def library_version_number() -> int:
    """The loaded library's version as ``MAJOR*1000000 + MINOR*1000 + PATCH``."""
    return int(_lib.portal_keyring_version_number())


if library_version_number() // 1_000_000 != ABI_VERSION[0]:
    raise ImportError(
        f"portal_keyring: the loaded library is version {library_version()}, but this package needs "
        f"ABI major version {ABI_VERSION[0]}"
    )
