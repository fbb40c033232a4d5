"""Fixtures for the portal_keyring (ctypes) tests.

These tests use a REAL Secret Service and the loopback Portal API; they never skip. Run them
inside both harness scripts (Tests/bindings/run.sh does all of this):

    scripts/with-keyring.sh scripts/with-portal-api.sh python3 -m pytest Tests/python

Environment: DBUS_SESSION_BUS_ADDRESS, PORTAL_TEST_KEYRING_DIR, PORTAL_TEST_KEYRING_PID and
PORTAL_TEST_KEYRING_PASSWORD (scripts/with-keyring.sh); PORTAL_TEST_API_URL and
PORTAL_TEST_API_HOST (scripts/with-portal-api.sh); PORTAL_TEST_KEYRINGCTL (default
build/keyringctl); PORTAL_KEYRING_LIBRARY (optional, see python/portal_keyring/_library.py).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable, Dict, Iterator, List

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

SCHEMA = "io.portalhq.PortalKeyring.Session"
REQUIRED_ENV = {
    "DBUS_SESSION_BUS_ADDRESS": "scripts/with-keyring.sh",
    "PORTAL_TEST_KEYRING_DIR": "scripts/with-keyring.sh",
    "PORTAL_TEST_KEYRING_PID": "scripts/with-keyring.sh",
    "PORTAL_TEST_KEYRING_PASSWORD": "scripts/with-keyring.sh",
    "PORTAL_TEST_API_URL": "scripts/with-portal-api.sh",
    "PORTAL_TEST_API_HOST": "scripts/with-portal-api.sh",
}


def pytest_sessionstart(session: Any) -> None:
    missing = [f"{name} (set by {script})" for name, script in REQUIRED_ENV.items() if not os.environ.get(name)]
    if missing:
        pytest.exit(
            "the portal_keyring tests need a private keyring and the loopback Portal API; missing: "
            + ", ".join(missing)
            + "\nrun: scripts/with-keyring.sh scripts/with-portal-api.sh Tests/bindings/run.sh",
            returncode=2,
        )
    if not os.path.exists(keyringctl_path()):
        pytest.exit(
            f"keyringctl not found at {keyringctl_path()}: build it with "
            "gcc -O1 -o build/keyringctl Tests/tools/keyringctl.c $(pkg-config --cflags --libs libsecret-1) "
            "or set PORTAL_TEST_KEYRINGCTL",
            returncode=2,
        )


def keyringctl_path() -> str:
    return os.environ.get("PORTAL_TEST_KEYRINGCTL") or os.path.join(REPO, "build", "keyringctl")


class Keyring:
    """The private test keyring, through keyringctl (never through the library under test)."""

    READ_ONLY = ("count", "get", "is-locked", "attrs", "content-type")

    def run(self, *args: str, stdin: bytes = b"", check: bool = True) -> "subprocess.CompletedProcess[bytes]":
        # Read-only queries are retried on a D-Bus error (exit 2): under heavy parallel load
        # gnome-keyring-daemon has been seen to answer one SearchItems call with UnknownMethod.
        attempts = 3 if args and args[0] in self.READ_ONLY else 1
        for attempt in range(attempts):
            result = subprocess.run([keyringctl_path(), *args], input=stdin, capture_output=True, timeout=30)
            if result.returncode != 2 or attempt == attempts - 1:
                break
            time.sleep(0.2)
        if check and result.returncode != 0:
            raise AssertionError(f"keyringctl {' '.join(args)} exited {result.returncode}: {result.stderr!r}")
        return result

    def lock(self) -> None:
        self.run("lock")
        assert self.run("is-locked", check=False).returncode == 0

    def unlock(self) -> None:
        self.run("unlock")
        assert self.run("is-locked", check=False).returncode == 1

    def count(self, env_id: str) -> int:
        return int(self.run("count", "--schema", SCHEMA, f"auth_environment_id={env_id}").stdout)

    def get(self, env_id: str) -> Dict[str, Any]:
        """The stored version-2 document (SessionDocument.swift), decoded into its fields."""
        raw = self.run("get", "--schema", SCHEMA, f"auth_environment_id={env_id}").stdout.decode().rstrip("\n")
        magic, *fields = raw.split(" ")
        assert magic == "portal-keyring-session/2", raw
        values = dict(field.split("=", 1) for field in fields)

        def text(value: str) -> str:
            return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()

        return {"authEnvironmentId": text(values["e"]), "endUserId": text(values["u"]),
                "clientSessionToken": text(values["c"]), "g": values["g"], "t": int(values["t"])}

    def store_raw(self, env_id: str, secret: bytes, *attrs: str) -> None:
        # gnome-keyring's passwordless keyring writes a secret raw into its key file and unescapes
        # \\, \n, \t, \r and \s in it whenever the daemon reloads the file (docs/providers.md), at
        # a moment no test controls: there a version-1 document spells its escapes \uXXXX.
        if os.environ.get("PORTAL_TEST_PROVIDER") == "gnome-keyring-passwordless":
            assert re.search(rb"\\[\\ntrs]", secret) is None, f"test fault: the key file would rewrite {secret!r}"
        self.run("store", "--schema", SCHEMA, "--content-type", "application/json",
                 f"auth_environment_id={env_id}", *attrs, stdin=secret)

    def delete_all(self, env_id: str) -> None:
        self.run("delete-all", f"auth_environment_id={env_id}")


class PortalApi:
    """The loopback fake Portal API's admin routes."""

    url = os.environ.get("PORTAL_TEST_API_URL", "")
    host = os.environ.get("PORTAL_TEST_API_HOST", "")

    def admin(self, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/_admin/{path}", data=data,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)["data"]

    def delete(self, path: str) -> None:
        """DELETE /_admin/PATH (clears faults, rate limits, stats)."""
        request = urllib.request.Request(f"{self.url}/_admin/{path}", method="DELETE")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def issue(self, end_user_id: str) -> str:
        """A fresh, valid CST for the end user."""
        return str(self.issue_session(end_user_id)["token"])

    def issue_session(self, end_user_id: str) -> Dict[str, Any]:
        """A fresh CST for the end user: ``{"token", "sessionId", ...}``."""
        session: Dict[str, Any] = self.admin("sessions", {"endUserId": end_user_id})
        return session

    def requests_with(self, session_id: str, path: str = "/api/v3/clients/me") -> int:
        """How many recent API requests carried the CST of ``session_id`` to ``path``."""
        stats = self.admin("stats?last=200")
        return sum(1 for r in stats["recent"] if r.get("sessionId") == session_id and r.get("path") == path)

    def revoke(self, token: str) -> None:
        assert self.admin("revoke", {"token": token})["revoked"] == 1


_ids = itertools.count(1)


@pytest.fixture(scope="session")
def pk() -> Any:
    import portal_keyring

    return portal_keyring


@pytest.fixture(scope="session")
def keyring() -> Keyring:
    return Keyring()


@pytest.fixture(scope="session")
def api() -> PortalApi:
    return PortalApi()


@pytest.fixture
def env_id(request: Any, keyring: Keyring) -> Iterator[str]:
    """A fresh auth environment id; its items are deleted afterwards (unlocking if needed)."""
    name = f"py-{request.node.name[:40]}-{os.getpid()}-{next(_ids)}"
    yield name
    if keyring.run("is-locked", check=False).returncode == 0:
        keyring.unlock()
    keyring.delete_all(name)


@pytest.fixture
def auth(pk: Any, env_id: str, api: PortalApi) -> Iterator[Any]:
    magic_link = pk.MagicLinkConfig(from_email="login@example.com", template_id="tpl-py")
    with pk.PortalAuth(env_id, "py-test://portal/redirect", api.host, magic_link=magic_link) as a:
        a.set_keyring_timeouts(5000, 2000)
        yield a


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def settle(seconds: float = 0.3) -> None:
    """Gives a library thread time to deliver something that must NOT arrive."""
    time.sleep(seconds)


@pytest.fixture
def unraisable(monkeypatch: Any) -> List[Any]:
    """Captures what reaches sys.unraisablehook (exceptions raised by listener callbacks)."""
    seen: List[Any] = []

    def hook(args: Any) -> None:
        seen.append((args.exc_type, args.exc_value, args.err_msg))

    monkeypatch.setattr(sys, "unraisablehook", hook)
    return seen
