#!/usr/bin/python3
"""pygobject_test.py — the GNOME API from PyGObject (3.42, Debian 12's: callbacks, no awaitables)
on a GLib main loop, against the private keyring: restore signed out, persist, restore, clear,
a cancel, bad arguments; then a magic-link sign-in against the fake Portal API
(scripts/with-portal-api.sh) to the session a restore finds, a half magic-link configuration, a
cancelled sign-in. One line a check; exits 1 when any failed.

    GI_TYPELIB_PATH=build/gobject LD_LIBRARY_PATH=build/gobject python3 Tests/gobject/pygobject_test.py
"""
import json
import os
import sys
import urllib.request

import gi

gi.require_version("PortalKeyring", "1")
from gi.repository import Gio, GLib, PortalKeyring  # noqa: E402

failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
    print(f"{'ok   ' if ok else 'FAIL '} {what}", flush=True)


loop = GLib.MainLoop()
env_id = f"pygobject-test-{os.getpid()}"
token = "cst-pygobject.Token_0123456789"

try:
    PortalKeyring.Auth.new(env_id, "javascript:alert(1)", None)
    check(False, "a javascript: redirect URL is refused")
except GLib.Error as e:
    check(e.matches(PortalKeyring.error_quark(), PortalKeyring.Error.INVALID_ARGUMENT),
          f"a javascript: redirect URL is refused: {e.message}")

auth = PortalKeyring.Auth(auth_environment_id=env_id, redirect_url="portalkeyring://auth/callback",
                          call_timeout_ms=3000)
auth.init(None)
check(auth.props.call_timeout_ms == 3000, "construct properties through GObject and Gio.Initable.init")

# Each step starts the next from its callback, as a callback-style app chains them.


def on_first_restore(source, result):
    check(source.restore_session_finish(result) is None, "restore when signed out returns None, no exception")
    source.persist_session_async("end-user-py", token, None, on_persisted)


def on_persisted(source, result):
    session = source.persist_session_finish(result)
    check(session.props.end_user_id == "end-user-py", "persist returns the stored session")
    source.restore_session_async(None, on_restored)


def on_restored(source, result):
    session = source.restore_session_finish(result)
    check(session is not None and session.props.end_user_id == "end-user-py"
          and session.props.auth_environment_id == env_id, "restore returns the persisted session")
    check(session is not None and session.copy_token() == token, "copy_token gives the token back")
    cancellable = Gio.Cancellable()
    cancellable.cancel()
    source.restore_session_async(cancellable, on_cancelled)


def on_cancelled(source, result):
    try:
        source.restore_session_finish(result)
        check(False, "a cancelled restore raises")
    except GLib.Error as e:
        check(e.matches(Gio.io_error_quark(), Gio.IOErrorEnum.CANCELLED), "a cancelled restore raises CANCELLED")
    source.clear_persisted_session_async(None, on_cleared)


def on_cleared(source, result):
    check(source.clear_persisted_session_finish(result), "clear")
    check(source.restore_session_sync(None) is None, "signed out after clear (restore_session_sync)")
    sign_in()


# The sign-in: the magic link "emailed" by the fake API, through handle_redirect.

def admin(path):
    with urllib.request.urlopen(os.environ["PORTAL_TEST_API_URL"] + path) as answer:
        return json.load(answer)["data"]


def sign_in():
    half = PortalKeyring.Auth(auth_environment_id=env_id, redirect_url="portalkeyring://auth/callback",
                              magic_link_from_email="login@example.com")
    try:
        half.init(None)
        check(False, "a magic link without its template is refused")
    except GLib.Error as e:
        check(e.matches(PortalKeyring.error_quark(), PortalKeyring.Error.INVALID_ARGUMENT)
              and e.message.startswith("magic-link-template-id"), f"a magic link without its template: {e.message}")
    signer = PortalKeyring.Auth(auth_environment_id=env_id, redirect_url="portalkeyring://auth/callback",
                                api_host=os.environ["PORTAL_TEST_API_HOST"],
                                magic_link_from_email="login@example.com", magic_link_template_id="tpl-py",
                                account_abstraction=PortalKeyring.AccountAbstraction.OFF)
    signer.init(None)
    check(signer.props.account_abstraction == PortalKeyring.AccountAbstraction.OFF, "account-abstraction reads back")
    cancellable = Gio.Cancellable()
    cancellable.cancel()
    signer.send_magic_link_async("py.user@example.com", cancellable, on_send_cancelled)


def on_send_cancelled(source, result):
    try:
        source.send_magic_link_finish(result)
        check(False, "a cancelled send_magic_link raises")
    except GLib.Error as e:
        check(e.matches(Gio.io_error_quark(), Gio.IOErrorEnum.CANCELLED), "a cancelled send_magic_link raises CANCELLED")
    source.send_magic_link_async("Py.User@Example.com", None, on_sent)


def on_sent(source, result):
    check(source.send_magic_link_finish(result), "send_magic_link")
    link = [entry for entry in admin("/_admin/magic-links")["links"] if entry["email"] == "py.user@example.com"][-1]
    source.handle_redirect_async(link["link"], PortalKeyring.RedirectFlags.NONE, None,
                                 lambda s, r: on_redirected(s, r, link["endUserId"]))


def on_redirected(source, result, end_user):
    signed_in = source.handle_redirect_finish(result)
    check(signed_in.props.kind == PortalKeyring.RedirectKind.AUTHENTICATED
          and signed_in.props.session.props.end_user_id == end_user, "handle_redirect signs the end user in")
    restored = source.restore_session_sync(None)
    check(restored is not None and restored.props.end_user_id == end_user, "restore finds the signed-in session")
    check(source.clear_persisted_session_sync(None), "clear after the sign-in")
    loop.quit()


auth.clear_persisted_session_async(None, lambda s, r: (s.clear_persisted_session_finish(r),
                                                        s.restore_session_async(None, on_first_restore)))
GLib.timeout_add_seconds(60, lambda: (check(False, "timed out"), loop.quit()))
loop.run()
print(f"pygobject_test: {failed} failed")
sys.exit(1 if failed else 0)
