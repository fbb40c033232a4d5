"""The portal_keyring package (python/portal_keyring) against a real gnome-keyring-daemon on a
private session bus and the loopback Portal API: the module, round trips, signed out vs storage
failure, tokens and handles. See conftest.py for the environment; invalidation is in
test_invalidation.py, threads and processes in test_threads.py."""

from __future__ import annotations

import ctypes
import os
import pickle
import re
import subprocess
import sys
import threading
from typing import Any, List

import pytest

from conftest import REPO, settle

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
        pk.Status.MAGIC_LINK_NOT_CONFIGURED: pk.MagicLinkNotConfigured,
        pk.Status.AUTH_METHOD_UNAVAILABLE: pk.AuthMethodUnavailable,
        pk.Status.ACCOUNT_ABSTRACTION_UNAVAILABLE: pk.AccountAbstractionUnavailable,
        pk.Status.SERVER: pk.ServerError,
        pk.Status.REQUEST_REFUSED: pk.RequestRefused,
        pk.Status.TOTP_QR_UNAVAILABLE: pk.TotpQrUnavailable,
        pk.Status.SIGN_IN_IN_PROGRESS: pk.SignInInProgress,
        pk.Status.SIGN_IN_UNAVAILABLE: pk.SignInUnavailable,
        pk.Status.SIGN_IN_TIMED_OUT: pk.SignInTimedOut,
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


def test_is_valid_never_raises_on_a_closed_session(pk: Any, auth: Any) -> None:
    """Properties never raise (python/README.md#reference): a closed session is simply not valid any more."""
    session = auth.persist_session("user-closed-valid", "tok-closed-valid")
    assert session.is_valid
    session.close()
    assert session.is_valid is False
    auth.clear_persisted_session()
