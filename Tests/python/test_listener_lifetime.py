"""The listener-lifetime rule (docs/threading.md "Listener lifetime") in the portal_keyring
package, against the real keyring and the loopback Portal API: dropping the last reference to a
Portal is not a cancel (its validation request's 401 still deletes the item and calls each
listener once); with nothing left to detect, the registrations are released uncalled; close()
is explicit and wins; interpreter exit with a parked portal is clean."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any, List

from conftest import REPO, PortalApi, settle, wait_until


def test_dropped_portal_still_tells_its_listeners(pk: Any, auth: Any, api: PortalApi, env_id: str) -> None:
    baseline = pk._registration_count()
    token = api.issue("drop-rejected")
    session = auth.persist_session("drop-rejected", token)
    api.revoke(token)
    # The validation request gets its 401 only after the app has dropped the Portal.
    api.admin("faults", {"route": "/api/v3/clients/me", "delayMs": 300, "count": 1})
    calls: List[str] = []
    lock = threading.Lock()

    def listener(name: str) -> Any:
        def called() -> None:
            with lock:
                calls.append(name)
        return called

    portal = pk.Portal(session)
    portal.on_session_invalidated(listener("first"))
    portal.on_session_invalidated(listener("second"))
    del portal  # the last reference: collected here, while the request is in flight
    assert calls == []
    wait_until(lambda: len(calls) == 2, timeout=5, what="both listeners called after the drop")
    settle()  # a second (wrong) delivery would have run by now
    assert sorted(calls) == ["first", "second"]
    assert not session.is_valid, "the validation request's 401 must invalidate"
    assert auth.restore_session() is None, "the rejected session's item is deleted"
    wait_until(lambda: pk._registration_count() == baseline, what="the registrations released")
    wait_until(lambda: pk._lifetime.parked_count() == 0, what="the parked portal freed")
    session.close()


def test_dropped_portal_with_nothing_to_detect_releases_its_listener_uncalled(
    pk: Any, auth: Any, api: PortalApi, monkeypatch: Any
) -> None:
    # The validation request answers 200 at once; a 1 s bound stands for libcurl's 30 s one.
    monkeypatch.setattr(pk._lifetime, "VALIDATION_BOUND_S", 1.0)
    baseline = pk._registration_count()
    session = auth.persist_session("drop-valid", api.issue("drop-valid"))
    calls: List[int] = []
    portal = pk.Portal(session)
    portal.on_session_invalidated(lambda: calls.append(1))
    del portal
    assert pk._lifetime.parked_count() == 1
    wait_until(lambda: pk._registration_count() == baseline, timeout=5, what="the registration released")
    wait_until(lambda: pk._lifetime.parked_count() == 0, what="the parked portal freed")
    assert calls == [] and session.is_valid
    restored = auth.restore_session()
    assert restored is not None and restored.end_user_id == "drop-valid"
    restored.close()
    session.close()


def test_a_portal_collected_after_its_validation_is_freed_at_once(pk: Any, auth: Any, api: PortalApi,
                                                                  monkeypatch: Any) -> None:
    monkeypatch.setattr(pk._lifetime, "VALIDATION_BOUND_S", 0.0)
    baseline = pk._registration_count()
    with auth.persist_session("drop-late", api.issue("drop-late")) as session:
        portal = pk.Portal(session)
        portal.on_session_invalidated(lambda: None)
        del portal
        assert pk._lifetime.parked_count() == 0 and pk._registration_count() == baseline


def test_close_is_explicit_and_wins(pk: Any, auth: Any, api: PortalApi) -> None:
    baseline = pk._registration_count()
    token = api.issue("close-rejected")
    session = auth.persist_session("close-rejected", token)
    api.revoke(token)
    api.admin("faults", {"route": "/api/v3/clients/me", "delayMs": 300, "count": 1})
    calls: List[int] = []
    portal = pk.Portal(session)
    portal.on_session_invalidated(lambda: calls.append(1))
    portal.close()
    assert pk._registration_count() == baseline  # cancelled, released once, at once
    settle(0.6)  # past the 401
    assert calls == []
    kept = auth.restore_session()  # a closing portal deletes nothing
    assert kept is not None and kept.end_user_id == "close-rejected"
    kept.close()
    session.close()


def test_interpreter_exit_with_a_parked_portal(env_id: str, api: PortalApi) -> None:
    code = (
        "import sys, json, urllib.request as u, portal_keyring as pk\n"
        "env, url, host = sys.argv[1:4]\n"
        "def admin(path, body):\n"
        "    r = u.Request(url + '/_admin/' + path, data=json.dumps(body).encode(),\n"
        "                  headers={'Content-Type': 'application/json'})\n"
        "    return json.load(u.urlopen(r))['data']\n"
        "auth = pk.PortalAuth(env, 'py-test://exit', host)\n"
        "token = admin('sessions', {'endUserId': 'exit-parked'})['token']\n"
        "session = auth.persist_session('exit-parked', token)\n"
        "admin('revoke', {'token': token})\n"
        "admin('faults', {'route': '/api/v3/clients/me', 'delayMs': 2000, 'count': 1})\n"
        "portal = pk.Portal(session)\n"
        "portal.on_session_invalidated(lambda: print('called', flush=True))\n"
        "del portal\n"
        "print('exiting with', pk._lifetime.parked_count(), 'parked', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    out = subprocess.run([sys.executable, "-c", code, env_id, api.url, api.host], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "exiting with 1 parked\n"  # exit is an explicit close: cancelled
    assert "Fatal" not in out.stderr and "Exception" not in out.stderr, out.stderr
