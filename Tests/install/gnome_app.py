"""gnome_app.py — the install test's PyGObject program: gi.repository.PortalKeyring from the
installed typelib (GI_TYPELIB_PATH=PREFIX/lib/girepository-1.0).

    python3 gnome_app.py ENV_ID END_USER

A blank auth environment id raises GLib.Error PortalKeyring.Error.INVALID_ARGUMENT; then a
restore of ENV_ID (persisted by app.c) gives END_USER's session. Exits 1 when either does not hold.
"""
import sys

import gi

gi.require_version("PortalKeyring", "1")
from gi.repository import GLib, PortalKeyring  # noqa: E402

env_id, user = sys.argv[1:3]
code = None
try:
    PortalKeyring.Auth.new("", "portal-install-test://auth/callback", None)
except GLib.Error as e:
    if e.matches(PortalKeyring.error_quark(), PortalKeyring.Error.INVALID_ARGUMENT):
        code = e.code
auth = PortalKeyring.Auth.new(env_id, "portal-install-test://auth/callback", None)
session = auth.restore_session_sync(None)
restored = session.props.end_user_id if session else None
print(f"blank id: error code {code}; restored {restored}")
sys.exit(0 if code == PortalKeyring.Error.INVALID_ARGUMENT and restored == user else 1)
