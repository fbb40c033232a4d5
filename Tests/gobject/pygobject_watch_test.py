#!/usr/bin/python3
"""pygobject_watch_test.py — PortalKeyring.Watch from PyGObject, against the private keyring:
another process (this script as `pygobject_watch_test.py persist|clear ENV [END_USER]`) signs in
and out, seen as "changed" with the event and end user id on the main context; with the provider
stopped (SIGSTOP, then SIGCONT) making and stopping a watch leave a 10 ms timer on the same loop
ticking (no gap over 50 ms); the watch is finalised with its last reference. One line a check;
exits 1 when any failed.

    GI_TYPELIB_PATH=build/gobject LD_LIBRARY_PATH=build/gobject python3 Tests/gobject/pygobject_watch_test.py
"""
import gc
import os
import signal
import subprocess
import sys
import threading
import time

import gi

gi.require_version("PortalKeyring", "1")
from gi.repository import GLib, PortalKeyring  # noqa: E402

Event = PortalKeyring.WatchEvent
GAP_MS = 50


def make_auth(env_id):
    auth = PortalKeyring.Auth(auth_environment_id=env_id, redirect_url="portalkeyring://auth/callback",
                              call_timeout_ms=3000)
    auth.init(None)
    return auth


if len(sys.argv) >= 3:  # the other process
    auth = make_auth(sys.argv[2])
    if sys.argv[1] == "persist":
        auth.persist_session_sync(sys.argv[3], "cst-pywatch.Token_0123", None)
    else:
        auth.clear_persisted_session_sync(None)
    sys.exit(0)

failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
    print(f"{'ok   ' if ok else 'FAIL '} {what}", flush=True)


def spin(until=lambda: False, seconds=10.0):
    """Iterates the main context until until() or seconds passed; returns until()."""
    end = time.monotonic() + seconds
    context = GLib.MainContext.default()
    while not until() and time.monotonic() < end:
        context.iteration(False)
        time.sleep(0.001)
    return until()


def other_process(*args):
    subprocess.run([sys.executable, __file__, *args], check=True)


env_id = f"pygobject-watch-test-{os.getpid()}"
auth = make_auth(env_id)
auth.clear_persisted_session_sync(None)
main_thread = threading.get_ident()
seen = []


def on_changed(watch, event, end_user_id):
    seen.append((event, end_user_id, threading.get_ident() == main_thread
                 and GLib.MainContext.default().is_owner()))


watch = PortalKeyring.Watch.new(auth)
watch.connect("changed", on_changed)
check(watch.props.auth == auth, "Watch.new(auth): the auth property")
check(spin(lambda: any(e == Event.STARTED for e, _, _ in seen)), "STARTED")
other_process("persist", env_id, "end-user-pywatch")
check(spin(lambda: any(e == Event.SIGNED_IN for e, _, _ in seen)), "another process's sign-in")
check((Event.SIGNED_IN, "end-user-pywatch", True) in seen, f"SIGNED_IN names its end user, on the main context: {seen}")
other_process("clear", env_id)
check(spin(lambda: any(e == Event.SIGNED_OUT for e, _, _ in seen)), "another process's sign-out")
check((Event.SIGNED_OUT, None, True) in seen, f"SIGNED_OUT with None, on the main context: {seen}")
check(all(here for _, _, here in seen), "every signal on the main thread and context")

finalised = []
watch.weak_ref(lambda: finalised.append(True))
watch.stop()
del watch
gc.collect()
check(finalised == [True], "finalised with its last reference")

# The provider stopped: making and stopping watches never stall the loop.
pid_file = os.path.join(os.environ.get("PORTAL_TEST_KEYRING_DIR", ""), "keyring.pid")
provider = int(open(pid_file).read()) if os.path.exists(pid_file) else int(os.environ["PORTAL_TEST_KEYRING_PID"])
ticks = []
timer = GLib.timeout_add(10, lambda: ticks.append(time.monotonic()) or True)
spin(seconds=0.05)
ticks.clear()
os.kill(provider, signal.SIGSTOP)
try:
    stalled = []
    started = time.monotonic()
    watch = PortalKeyring.Watch.new(auth)
    watch.connect("changed", lambda w, e, u: stalled.append(e))
    spin(seconds=0.2)
    watch.stop()
    took_ms = (time.monotonic() - started) * 1000 - 200
    spin(seconds=0.2)
    dropped = PortalKeyring.Watch.new(auth)
    spin(seconds=0.2)
    del dropped
    gc.collect()
    spin(seconds=0.1)
finally:
    os.kill(provider, signal.SIGCONT)
GLib.source_remove(timer)
gap_ms = max(b - a for a, b in zip(ticks, ticks[1:])) * 1000
print(f"largest timer gap with the provider stopped: {gap_ms:.1f} ms; make + stop beyond the 200 ms wait: {took_ms:.1f} ms")
check(len(ticks) > 40 and gap_ms <= GAP_MS, f"the 10 ms timer never gapped over {GAP_MS} ms ({gap_ms:.1f})")
check(stalled == [], f"no signal from a watch stopped while the provider hung: {stalled}")
del watch
auth.clear_persisted_session_sync(None)
print(f"pygobject_watch_test: {failed} failed")
sys.exit(1 if failed else 0)
