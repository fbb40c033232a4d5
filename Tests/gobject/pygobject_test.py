#!/usr/bin/python3
"""pygobject_test.py — the GNOME API from PyGObject (3.42, Debian 12's: callbacks, no awaitables)
on a GLib main loop, against the private keyring: restore signed out, persist, restore, clear,
a cancel, bad arguments; the Portal against the fake Portal API (scripts/with-portal-api.sh); a
magic-link sign-in to the session a restore finds, a half magic-link configuration, a cancelled
sign-in. One line a check; exits 1 when any failed.

    GI_TYPELIB_PATH=build/gobject LD_LIBRARY_PATH=build/gobject python3 Tests/gobject/pygobject_test.py
"""
import gc
import json
import os
import sys
import time

import gi

gi.require_version("PortalKeyring", "1")
from gi.repository import Gio, GLib, PortalKeyring  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_api_admin import admin  # noqa: E402  (the fake Portal API's admin routes)

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
    link = [entry for entry in admin("GET", "/_admin/magic-links")["data"]["links"] if entry["email"] == "py.user@example.com"][-1]
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

# The Portal, each step waited for on the loop: a request, a 401 invalidating once, a late
# handler, a cancel, and each portal finalised when Python drops it (no reference cycle).

def wait(start, finish):
    """Runs the loop until the callback that start(callback) passes on ran; finish's answer."""
    results = []
    start(lambda source, result: (results.append(result), loop.quit()))
    loop.run()
    return finish(results[0])


def settle(ms):
    GLib.timeout_add(ms, loop.quit)
    loop.run()


def stored_session(portal_auth, user):
    """A session the fake API knows, persisted and restored; and its token."""
    cst = admin("POST", "/_admin/sessions", json.dumps({"endUserId": user}))["data"]["token"]
    portal_auth.persist_session_sync(user, cst, None)
    return portal_auth.restore_session_sync(None), cst


def finalised(obj):
    """A list that gets an item when obj is finalised."""
    gone = []
    obj.weak_ref(lambda: gone.append(True))
    return gone


portal_auth = PortalKeyring.Auth.new(f"{env_id}-portal", "portalkeyring://auth/callback",
                                     os.environ["PORTAL_TEST_API_HOST"])
session, cst = stored_session(portal_auth, "end-user-py-portal")
portal = wait(lambda cb: PortalKeyring.Portal.new_async(session, None, cb), PortalKeyring.Portal.new_finish)
check(not portal.props.invalidated and portal.props.session == session, "a valid session makes a portal")
signals = []
portal.connect("session-invalidated", lambda p: signals.append(p.props.invalidated))
body, status = wait(lambda cb: portal.request_async("GET", "/api/v3/clients/me", None, None, cb),
                    portal.request_finish)
check(status == 200 and b"end-user-py-portal" in body.get_data(), f"request answers 200 (status {status})")

admin("POST", "/_admin/faults", json.dumps({"route": "/api/v3/clients/me", "delayMs": 5000}))
cancellable = Gio.Cancellable()
GLib.timeout_add(100, cancellable.cancel)
start = time.monotonic()
try:
    wait(lambda cb: portal.request_async("GET", "/api/v3/clients/me", None, cancellable, cb), portal.request_finish)
    check(False, "a cancelled request raises")
except GLib.Error as e:
    ms = (time.monotonic() - start) * 1000
    check(e.matches(Gio.io_error_quark(), Gio.IOErrorEnum.CANCELLED) and ms < 1000,
          f"a cancelled request raises CANCELLED at once ({ms:.0f} ms, the API delays 5 s)")
admin("DELETE", "/_admin/faults")

admin("POST", "/_admin/revoke", json.dumps({"token": cst}))
_, status = wait(lambda cb: portal.request_async("GET", "/api/v3/clients/me", None, None, cb), portal.request_finish)
settle(1000)
check(status == 401 and signals == [True] and portal.props.invalidated,
      f"a 401 emits session-invalidated exactly once ({len(signals)}) with invalidated already set")
try:
    portal.request_sync("GET", "/api/v3/clients/me", None, None)
    check(False, "a request after invalidation raises")
except GLib.Error as e:
    check(e.matches(PortalKeyring.error_quark(), PortalKeyring.Error.SESSION_INVALIDATED),
          "a request after invalidation raises SESSION_INVALIDATED")
gone = finalised(portal)
del portal
gc.collect()
check(gone == [True], "the portal is finalised when Python drops it (no cycle with its handler or session)")

session, cst = stored_session(portal_auth, "end-user-py-portal")
admin("POST", "/_admin/revoke", json.dumps({"token": cst}))
late = wait(lambda cb: PortalKeyring.Portal.new_async(session, None, cb), PortalKeyring.Portal.new_finish)
late_signals = []
late.connect("session-invalidated", lambda p: late_signals.append(True))
settle(500)
check(late.props.invalidated and late_signals == [],
      "a handler connected after construction rejected the session reads invalidated (no replay)")
gone = finalised(late)
del late
gc.collect()
check(gone == [True], "the rejected portal is finalised when Python drops it")
portal_auth.clear_persisted_session_sync(None)

print(f"pygobject_test: {failed} failed")
sys.exit(1 if failed else 0)
