"""The package's invalidation listeners, report_unauthorized, request, cancel and callbacks, and the
garbage collection of handles with callbacks registered, against a real keyring on a private bus
and the loopback Portal API (conftest.py)."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any, List

import pytest

from conftest import settle, wait_until

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


def test_every_portal_on_the_sign_in_hears_its_rejection(pk: Any, auth: Any, api: Any) -> None:
    """Invalidation is per credential, process-wide: a Portal on another restore of the same
    sign-in hears the 401 another Portal saw, once."""
    issued = api.issue_session("user-peers")
    token = issued["token"]
    auth.persist_session("user-peers", token)
    first, second = auth.restore_session(), auth.restore_session()
    seer, peer = pk.Portal(first), pk.Portal(second)
    calls: List[str] = []
    seer.on_session_invalidated(lambda: calls.append("seer"))
    peer.on_session_invalidated(lambda: calls.append("peer"))
    # Both Portals' validation requests answered before the revoke: only `seer` sees a 401.
    wait_until(lambda: api.requests_with(issued["sessionId"]) >= 2, what="the validation requests")
    api.revoke(token)
    assert seer.report_unauthorized(token) is True
    wait_until(lambda: sorted(calls) == ["peer", "seer"], what="both Portals' listeners")
    assert not second.is_valid
    assert peer.report_unauthorized(token) is False  # at most once
    settle()
    assert sorted(calls) == ["peer", "seer"]
    seer.close()
    peer.close()


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
