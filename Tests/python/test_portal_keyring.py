"""The portal_keyring package (python/portal_keyring) against a real gnome-keyring-daemon on a
private session bus and the loopback Portal API. See conftest.py for the environment."""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import re
import subprocess
import sys
import threading
import time
import weakref
from typing import Any, List

import pytest

from conftest import REPO, settle, wait_until

# ------------------------------------------------------------------------------------ module


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_loads_the_library_and_reports_its_version(pk: Any) -> None:
    assert os.path.isfile(pk.library_path) or pk.library_path == "libportal-keyring.so"
    major, minor, patch = (int(part) for part in pk.library_version().split("."))
    assert pk.library_version_number() == major * 1_000_000 + minor * 1_000 + patch
    assert major == pk.ABI_VERSION[0]


def test_every_foreign_function_used_has_argtypes_and_restype(pk: Any) -> None:
    header = read_text(os.path.join(REPO, "Include", "portal_keyring.h"))
    declared = set(re.findall(r"^PORTAL_API[^;]*?\b(portal_[a-z0-9_]+)\s*\(", header, re.M | re.S))
    package = os.path.dirname(pk.__file__)
    source = "".join(read_text(os.path.join(package, f)) for f in sorted(os.listdir(package)) if f.endswith(".py"))
    used = set(re.findall(r"_lib\.(portal_[a-z0-9_]+)", source))
    assert len(used) >= 20
    assert used <= declared, f"not in the header: {used - declared}"
    assert used <= pk._DECLARED, f"used without argtypes/restype: {used - pk._DECLARED}"
    for name in sorted(used):
        func = getattr(pk._lib, name)
        assert func.argtypes is not None, f"{name} has no argtypes"
        if func.restype is ctypes.c_int and name != "portal_completion_queue_get_fd":  # a status: errcheck
            assert func.errcheck is pk._errcheck, name


def test_one_exception_class_per_status_under_a_common_base(pk: Any) -> None:
    classes = {
        pk.Status.INVALID_ARGUMENT: pk.InvalidArgument,
        pk.Status.SESSION_STORAGE: pk.SessionStorageFailure,
        pk.Status.SESSION_INVALIDATED: pk.SessionInvalidated,
        pk.Status.UNAUTHORIZED: pk.Unauthorized,
        pk.Status.NETWORK: pk.NetworkError,
        pk.Status.INTERNAL: pk.InternalError,
        pk.Status.RATE_LIMITED: pk.RateLimited,
        pk.Status.MALFORMED_RESPONSE: pk.MalformedResponse,
        pk.Status.INVALID_GRANT: pk.InvalidGrant,
        pk.Status.INVALID_USER_JWT: pk.InvalidUserJwt,
        pk.Status.AUTHENTICATION_FAILED: pk.AuthenticationFailed,
        pk.Status.UNSOLICITED_REDIRECT: pk.UnsolicitedRedirect,
        pk.Status.DIFFERENT_END_USER: pk.DifferentEndUser,
        pk.Status.CANCELLED: pk.Cancelled,
    }
    # Every code the header declares has its class.
    header = read_text(os.path.join(REPO, "Include", "portal_keyring.h"))
    codes = {int(v) for v in re.findall(r"^\s*PORTAL_ERR_[A-Z_]+\s*=\s*(\d+)", header, re.M)}
    assert codes == {int(s) for s in classes}, f"header codes without a class: {codes - set(classes)}"
    assert len(set(classes.values())) == len(classes)
    for status, cls in classes.items():
        error = pk._error(status, "detail")
        assert type(error) is cls and isinstance(error, pk.PortalKeyringError)
        assert error.status == status and error.message == "detail"
        assert error.status_name == pk.status_name(status) != "unknown status"
        assert str(error) == f"{error.status_name} ({int(status)}): detail"
    assert not issubclass(pk.SessionStorageFailure, pk.SessionInvalidated)
    unknown = pk._error(99, "future")
    assert type(unknown) is pk.PortalKeyringError and unknown.status == 99
    assert unknown.status_name == "unknown status"


# ------------------------------------------------------------------------- round trip, input


def test_round_trip_byte_exact(pk: Any, auth: Any, env_id: str, api: Any, keyring: Any) -> None:
    assert auth.restore_session() is None
    tokens = [
        api.issue("user-rt"),
        "tøkén✓\"quoted\"\\back\\nslash\\ttab",
        b"raw-bytes-\xc3\xa9",
        bytearray(b"from-a-bytearray"),
        "x" * 65536,
    ]
    for i, token in enumerate(tokens):
        expected = token.encode() if isinstance(token, str) else bytes(token)
        with auth.persist_session(f"user-{i}", token) as stored:
            assert stored.end_user_id == f"user-{i}"
            assert stored.auth_environment_id == env_id
            with stored.token() as copy:
                assert copy == expected
        # A second PortalAuth for the same id (any handle sees the same item).
        with pk.PortalAuth(env_id, "py-test://other", api.host) as other:
            restored = other.restore_session()
            assert restored is not None
            with restored, restored.token() as copy:
                assert restored.end_user_id == f"user-{i}"
                assert copy == expected
        assert keyring.count(env_id) == 1
        assert keyring.get(env_id)["clientSessionToken"] == expected.decode()


def test_restore_in_another_process(pk: Any, auth: Any, env_id: str, api: Any) -> None:
    token = api.issue("user-proc")
    auth.persist_session("user-proc", token).close()
    code = (
        "import sys, portal_keyring as pk\n"
        "s = pk.PortalAuth(sys.argv[1], 'py-test://cb').restore_session()\n"
        "with s.token() as t: print(s.end_user_id, t == sys.argv[2].encode())\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    out = subprocess.run([sys.executable, "-c", code, env_id, token], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "user-proc True\n"


@pytest.mark.parametrize(
    "env, redirect, name",
    [("", "app://cb", "auth_environment_id"), ("   ", "app://cb", "auth_environment_id"),
     ("ok", "", "redirect_url"), ("a\0b", "app://cb", "auth_environment_id"),
     ("x" * 2049, "app://cb", "auth_environment_id"), ("\udcff", "app://cb", "auth_environment_id")],
)
def test_bad_auth_arguments(pk: Any, env: str, redirect: str, name: str) -> None:
    with pytest.raises(pk.InvalidArgument) as info:
        pk.PortalAuth(env, redirect)
    assert info.value.status == pk.Status.INVALID_ARGUMENT
    assert name in info.value.message
    assert isinstance(info.value, ValueError)


def test_bad_tokens_are_rejected_never_truncated(pk: Any, auth: Any, env_id: str, keyring: Any) -> None:
    auth.persist_session("keeper", "the-good-token").close()
    for bad in ["", " \n", "a\0b", b"\xff\xfe", "y" * 65537, "\udc80"]:
        with pytest.raises(pk.InvalidArgument) as info:
            auth.persist_session("someone", bad)
        assert "client_session_token" in info.value.message
    with pytest.raises(pk.InvalidArgument):
        auth.persist_session("", "token")
    with pytest.raises(TypeError):
        auth.persist_session("someone", 12345)
    with pytest.raises(pk.InvalidArgument):
        auth.set_keyring_timeouts(0, 1000)
    session = auth.restore_session()
    assert session is not None and session.end_user_id == "keeper"
    assert keyring.get(env_id)["clientSessionToken"] == "the-good-token"


# ----------------------------------------------------------- signed out vs storage failure


def test_signed_out_is_none(auth: Any) -> None:
    assert auth.restore_session() is None
    auth.clear_persisted_session()  # nothing stored: success
    assert auth.restore_session() is None


def test_unusable_item_is_signed_out_and_deleted(auth: Any, env_id: str, keyring: Any) -> None:
    keyring.store_raw(env_id, b"{not json", "session_generation=00112233445566778899aabbccddeeff")
    assert keyring.count(env_id) == 1
    assert auth.restore_session() is None
    assert keyring.count(env_id) == 0


def test_locked_collection_is_storage_failure_not_signed_out(pk: Any, auth: Any, env_id: str, keyring: Any) -> None:
    auth.persist_session("user-locked", "token-locked").close()
    keyring.lock()
    try:
        with pytest.raises(pk.SessionStorageFailure) as info:
            auth.restore_session()
        assert info.value.status == pk.Status.SESSION_STORAGE
        assert "lock" in info.value.message.lower()
        assert "token-locked" not in str(info.value)
        with pytest.raises(pk.SessionStorageFailure):
            auth.clear_persisted_session()
        with pytest.raises(pk.SessionStorageFailure):
            auth.persist_session("user-other", "token-other")
    finally:
        keyring.unlock()
    # Nothing was deleted or replaced while locked.
    assert keyring.count(env_id) == 1
    session = auth.restore_session()
    assert session is not None and session.end_user_id == "user-locked"
    with session.token() as token:
        assert token == b"token-locked"


def test_no_session_bus_is_storage_failure(env_id: str) -> None:
    code = (
        "import sys, portal_keyring as pk\n"
        "try:\n"
        "    pk.PortalAuth(sys.argv[1], 'py-test://cb').restore_session()\n"
        "except pk.SessionStorageFailure as e:\n"
        "    print('storage failure', e.status)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"),
               DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent")
    out = subprocess.run([sys.executable, "-c", code, env_id], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "storage failure 2\n"


def test_clear_and_invalidate(pk: Any, auth: Any, env_id: str, keyring: Any) -> None:
    session = auth.persist_session("user-clear", "token-clear")
    assert session.is_valid
    session.invalidate()
    session.invalidate()  # idempotent
    assert not session.is_valid
    with pytest.raises(pk.SessionInvalidated):
        session.token()
    assert keyring.count(env_id) == 0
    auth.persist_session("user-clear", "token-2").close()
    auth.clear_persisted_session()
    assert auth.restore_session() is None


# -------------------------------------------------------------------------------- tokens


def test_secret_token_is_wiped_and_redacted(pk: Any, auth: Any) -> None:
    session = auth.persist_session("user-secret", "s3cret-value")
    token = session.token()
    assert isinstance(token, pk.SecretToken) and bytearray in type(token).__mro__ and token == b"s3cret-value"
    assert "s3cret" not in repr(token) and "s3cret" not in str(token)
    with pytest.raises(TypeError):
        pickle.dumps(token)
    with token as inside:
        assert inside is token
    assert len(token) == 0
    again = session.token()
    again.wipe()
    assert again == b""
    assert "s3cret" not in repr(session)


# ---------------------------------------------------------------------------- handles


def test_closed_handles_raise_and_close_is_idempotent(pk: Any, env_id: str, api: Any) -> None:
    auth = pk.PortalAuth(env_id, "py-test://cb", api.host)
    session = auth.persist_session("user-close", "token-close")
    portal = pk.Portal(session, api_host="127.0.0.1:9")  # nothing listens: never invalidates
    auth.close()
    auth.close()
    with pytest.raises(pk.InvalidArgument, match="closed"):
        auth.restore_session()
    session.close()
    with pytest.raises(pk.InvalidArgument):
        session.token()
    with pytest.raises(pk.InvalidArgument):
        pk.Portal(session)
    handle = portal.on_session_invalidated(lambda: None)
    portal.close()
    handle.cancel()  # a no-op once the portal is closed
    with pytest.raises(pk.InvalidArgument):
        portal.on_session_invalidated(lambda: None)
    with pytest.raises(TypeError):
        pk.Session()
    assert auth.closed and session.closed and portal.closed


def test_close_while_other_threads_use_the_handle(pk: Any, auth: Any, api: Any) -> None:
    auth.persist_session("user-race", "token-race").close()
    for _ in range(5):
        shared = pk.PortalAuth(auth.auth_environment_id, "py-test://cb", api.host)
        errors: List[BaseException] = []

        def worker() -> None:
            try:
                for _ in range(20):
                    try:
                        s = shared.restore_session()
                        assert s is not None and s.end_user_id == "user-race"
                    except pk.InvalidArgument as e:  # closed meanwhile
                        assert "closed" in e.message
                        return
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        settle(0.02)
        shared.close()
        for t in threads:
            t.join(60)
        assert not errors


# ---------------------------------------------------------------------------- invalidation


def _rejected_portal(pk: Any, auth: Any, api: Any, user: str) -> Any:
    """A Portal whose session the backend has revoked before the validation request."""
    token = api.issue(user)
    session = auth.persist_session(user, token)
    api.revoke(token)
    return session, pk.Portal(session)


def test_invalidation_with_a_late_listener(pk: Any, auth: Any, api: Any, keyring: Any, env_id: str) -> None:
    calls: List[str] = []
    threads: List[int] = []

    def record(name: str) -> None:
        calls.append(name)
        threads.append(threading.get_ident())

    token = api.issue("user-late")
    session = auth.persist_session("user-late", token)
    api.revoke(token)
    portal = pk.Portal(session)
    early = portal.on_session_invalidated(lambda: record("early"))
    # The validation request (GET /api/v3/clients/me) is rejected: the session drops its token.
    wait_until(lambda: not session.is_valid, what="the validation request's rejection")
    with pytest.raises(pk.SessionInvalidated):
        session.token()
    # Registered after the rejection: exactly one replayed delivery.
    late = portal.on_session_invalidated(lambda: record("late"))
    assert late.id != 0 and late.id != early.id
    wait_until(lambda: calls.count("late") == 1 and calls.count("early") == 1, what="both listeners")
    settle()
    assert sorted(calls) == ["early", "late"]
    assert threading.get_ident() not in threads  # delivered on a library thread
    assert auth.restore_session() is None  # that sign-in's item was deleted
    assert keyring.count(env_id) == 0
    wait_until(lambda: pk._registration_count() == 0, what="destroy_notify of both registrations")
    portal.close()


def test_report_unauthorized_and_request(pk: Any, auth: Any, api: Any) -> None:
    issued = api.issue_session("user-req")
    token = issued["token"]
    session = auth.persist_session("user-req", token)
    portal = pk.Portal(session)
    response = portal.request("GET", "/api/v3/clients/me")
    assert response.status == 200
    # The Portal's own validation request runs in the background: let it finish before the
    # revoke, so that the 401 below answers our request.
    wait_until(lambda: api.requests_with(issued["sessionId"]) >= 2, what="the validation request")
    assert response.json()["data"]["endUserId"] == "user-req"
    calls: List[int] = []
    portal.on_session_invalidated(lambda: calls.append(1))
    assert portal.report_unauthorized("some-other-token") is False
    api.revoke(token)
    response = portal.request("GET", "/api/v3/clients/me")
    assert response.status == 401
    wait_until(lambda: calls == [1], what="the listener after a 401")
    assert portal.report_unauthorized(token) is False  # at most once
    with pytest.raises(pk.SessionInvalidated):
        portal.request("GET", "/api/v3/clients/me")
    settle()
    assert calls == [1]


def test_cancel(pk: Any, auth: Any, api: Any) -> None:
    token = api.issue("user-cancel")
    session = auth.persist_session("user-cancel", token)
    portal = pk.Portal(session)
    calls: List[str] = []
    baseline = pk._registration_count()
    cancelled = portal.on_session_invalidated(lambda: calls.append("cancelled"))
    kept = portal.on_session_invalidated(lambda: calls.append("kept"))
    holder: List[Any] = []

    def self_cancelling() -> None:
        calls.append("self")
        holder[0].cancel()  # cancelling its own handle from inside the callback

    holder.append(portal.on_session_invalidated(self_cancelling))
    with portal.on_session_invalidated(lambda: calls.append("scoped")):
        pass  # the with block cancels it
    assert pk._registration_count() == baseline + 3
    cancelled.cancel()
    cancelled.cancel()  # idempotent
    assert pk._registration_count() == baseline + 2  # destroy_notify ran at once
    assert portal.report_unauthorized(token) is True
    wait_until(lambda: "kept" in calls and "self" in calls, what="the remaining listeners")
    settle()
    assert sorted(calls) == ["kept", "self"]
    wait_until(lambda: pk._registration_count() == baseline, what="destroy_notify")
    kept.cancel()  # after delivery: harmless
    portal.close()


def test_callback_exceptions_are_reported_never_crash(pk: Any, auth: Any, api: Any, unraisable: List[Any]) -> None:
    token = api.issue("user-raise")
    session = auth.persist_session("user-raise", token)
    portal = pk.Portal(session)
    calls: List[str] = []

    def raises() -> None:
        calls.append("raises")
        raise RuntimeError("listener failed")

    def exits() -> None:
        calls.append("exits")
        raise SystemExit(3)

    portal.on_session_invalidated(raises)
    portal.on_session_invalidated(exits)
    portal.on_session_invalidated(lambda: calls.append("after"))
    assert portal.report_unauthorized(token) is True
    wait_until(lambda: len(calls) == 3 and len(unraisable) == 2, what="all listeners and both reports")
    assert calls == ["raises", "exits", "after"]  # one portal's callbacks run in order
    kinds = sorted(exc_type.__name__ for exc_type, _, _ in unraisable)
    assert kinds == ["RuntimeError", "SystemExit"]
    assert any(str(value) == "listener failed" for _, value, _ in unraisable)
    wait_until(lambda: pk._registration_count() == 0, what="destroy_notify after failing callbacks")
    # The process and the library are fine afterwards.
    assert auth.restore_session() is None
    portal.close()


def test_spent_registrations(pk: Any, auth: Any, api: Any) -> None:
    with pk.Portal.with_api_key("static-api-key", api.host) as keyed:
        handle = keyed.on_session_invalidated(lambda: None)
        assert handle.spent and handle.id == 0
        handle.cancel()
    token = api.issue("user-spent")
    session = auth.persist_session("user-spent", token)
    with pk.Portal(session) as portal:
        calls: List[int] = []
        portal.on_session_invalidated(lambda: calls.append(1))
        portal.clear_session()  # host sign-out: never fires
        assert portal.on_session_invalidated(lambda: calls.append(2)).spent
        assert auth.restore_session() is None
        settle()
        assert calls == []
    assert pk._registration_count() == 0


# ------------------------------------------------------------------- garbage collection


def test_gc_of_handles_while_callbacks_are_registered(pk: Any, auth: Any, api: Any) -> None:
    baseline = pk._registration_count()
    delivered: List[int] = []
    # 1. Everything dropped while the validation request that will reject the session is in
    #    flight: collecting the portal is not a cancel (listener-lifetime rule 2): each listener
    #    is still called once, then released; no callback runs into freed memory.
    for i in range(10):
        session, portal = _rejected_portal(pk, auth, api, f"user-gc-{i}")
        for _ in range(3):
            portal.on_session_invalidated(lambda: delivered.append(1))
        del session, portal
        gc.collect()
    wait_until(lambda: pk._registration_count() == baseline, what="the dropped portals' registrations released")
    assert delivered.count(1) == 30
    # 2. Only the listener handles survive (they keep their portal alive): delivery still works.
    handles = []
    for i in range(5):
        session, portal = _rejected_portal(pk, auth, api, f"user-gc-h-{i}")
        handles.append(portal.on_session_invalidated(lambda: delivered.append(2)))
        del session, portal
    gc.collect()
    wait_until(lambda: delivered.count(2) == 5, what="deliveries to portals held only by handles")
    # 3. A callback that closes over its own portal (a cycle through the registration): the
    #    portal lives until delivery, then is collected — freeing it on the library thread
    #    from inside destroy_notify.
    refs = []
    for i in range(5):
        session, portal = _rejected_portal(pk, auth, api, f"user-gc-c-{i}")
        portal.on_session_invalidated(lambda p=portal: delivered.append(3 if p is not None else 0))
        refs.append(weakref.ref(portal))
        del session, portal
    gc.collect()
    wait_until(lambda: delivered.count(3) == 5, what="deliveries to self-referencing callbacks")
    wait_until(lambda: (gc.collect(), all(r() is None for r in refs))[1], what="the portals to be collected")
    # 4. Sessions and auths collected while a portal still uses the library session.
    token = api.issue("user-gc-s")
    session = auth.persist_session("user-gc-s", token)
    portal = pk.Portal(session)
    portal.on_session_invalidated(lambda: delivered.append(4))
    del session
    gc.collect()
    assert portal.report_unauthorized(token) is True
    wait_until(lambda: delivered.count(4) == 1, what="delivery after the session object was collected")
    del handles, portal
    gc.collect()
    wait_until(lambda: pk._registration_count() == baseline, what="all registrations released")
    assert 0 not in delivered


# ----------------------------------------------------------------------------- threads


def test_eight_python_threads(pk: Any, api: Any, keyring: Any) -> None:
    n = 8
    errors: List[BaseException] = []
    barrier = threading.Barrier(n)
    shared_env = f"py-threads-{os.getpid()}"
    shared_auth = pk.PortalAuth(shared_env, "py-test://cb", api.host)
    token = api.issue("user-threads")
    session = shared_auth.persist_session("user-threads", token)
    portal = pk.Portal(session)
    calls = [0] * n
    lock = threading.Lock()
    won: List[bool] = []
    mine: List[str] = []

    def count(i: int) -> None:
        with lock:
            calls[i] += 1

    def worker(i: int) -> None:
        try:
            own_env = f"py-thread-{i}-{os.getpid()}"
            mine.append(own_env)
            with pk.PortalAuth(own_env, "py-test://cb", api.host) as own:
                for round_ in range(5):
                    value = f"token-{i}-{round_}-ü"
                    own.persist_session(f"user-{i}", value).close()
                    restored = own.restore_session()
                    assert restored is not None and restored.end_user_id == f"user-{i}"
                    with restored.token() as t:
                        assert t == value.encode()
                    restored.close()
                    # Readers of the shared item, concurrently with the other threads.
                    shared = shared_auth.restore_session()
                    assert shared is not None and shared.end_user_id == "user-threads"
                own.clear_persisted_session()
                assert own.restore_session() is None
            portal.on_session_invalidated(lambda: count(i))
            barrier.wait(30)
            result = portal.report_unauthorized(token)  # all threads at once
            with lock:
                won.append(result)
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), name=f"pk-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert sorted(won) == [False] * (n - 1) + [True]  # exactly one invalidation
    wait_until(lambda: calls == [1] * n, what="every listener once")
    settle()
    assert calls == [1] * n
    assert shared_auth.restore_session() is None
    portal.close()
    shared_auth.close()
    for env in mine + [shared_env]:
        assert keyring.count(env) == 0


def test_interpreter_exit_with_live_registrations(env_id: str, api: Any) -> None:
    """Exiting while listeners are registered, a delivery is pending and one is running: the
    atexit hook closes the portals, so no library thread calls into a finalized interpreter."""
    code = (
        "import sys, time, json, urllib.request as u, portal_keyring as pk\n"
        "env, url, host = sys.argv[1:4]\n"
        "def admin(path, body):\n"
        "    r = u.Request(url + '/_admin/' + path, data=json.dumps(body).encode(),\n"
        "                  headers={'Content-Type': 'application/json'})\n"
        "    return json.load(u.urlopen(r))['data']\n"
        "auth = pk.PortalAuth(env, 'py-test://cb', host)\n"
        "keep = []\n"
        "for i in range(4):\n"
        "    token = admin('sessions', {'endUserId': 'exit-%d' % i})['token']\n"
        "    session = auth.persist_session('exit-%d' % i, token)\n"
        "    if i % 2: admin('revoke', {'token': token})\n"
        "    portal = pk.Portal(session)\n"
        "    portal.on_session_invalidated(lambda: time.sleep(0.3))  # running at exit\n"
        "    portal.on_session_invalidated(lambda: None)             # pending at exit\n"
        "    keep.append(portal)\n"
        "time.sleep(0.05)\n"
        "print('exiting', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code, env_id, api.url, api.host], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout == "exiting\n"
        assert "Fatal" not in out.stderr and "Exception" not in out.stderr, out.stderr


def _restore_in_child(env_id: str, queue: Any) -> None:
    import portal_keyring as child_pk
    try:
        with child_pk.PortalAuth(env_id, "py-test://fork") as child_auth:
            session = child_auth.restore_session()
            queue.put(("restored", session.end_user_id if session else None))
    except child_pk.SessionStorageFailure as error:
        queue.put(("storage failure", str(error)))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_child_works_or_fails_at_once(pk: Any, auth: Any, env_id: str, method: str) -> None:
    """Issue 11: a child after fork() never hangs. `fork` after this process used D-Bus fails at
    once naming fork(); `spawn` works."""
    import multiprocessing
    auth.persist_session("user-mp", "token-mp").close()
    assert auth.restore_session() is not None  # this process has used D-Bus
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    started = time.monotonic()
    child = context.Process(target=_restore_in_child, args=(env_id, queue))  # type: ignore[attr-defined]
    child.start()
    child.join(30)
    took = time.monotonic() - started
    if child.is_alive():
        child.kill()
        pytest.fail(f"the {method} child hung")
    kind, detail = queue.get(timeout=5)
    if method == "fork":
        assert kind == "storage failure" and "fork()" in detail, (kind, detail)
        assert took < 5, took
    else:
        assert (kind, detail) == ("restored", "user-mp")
    assert keyring_count_after(auth) == 1


def keyring_count_after(auth: Any) -> int:
    session = auth.restore_session()
    return 0 if session is None else 1
