"""The asyncio sign-in coroutines of portal_keyring against the loopback Portal API and
the real keyring: each coroutine's result (the blocking call's result classes), TOTP required then
verified, the blocking calls' exceptions, argument errors raised before anything starts, a slow
API that never blocks the loop, and a cancelled sign-in task that cancels the library operation."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import urllib.parse
from typing import Any, Awaitable, Callable, List, Tuple

import pytest

from conftest import PortalApi, wait_until
from test_asyncio import MAX_GAP, PERIOD, Ticker, run
from test_signin import REDIRECT, end_user_of, new_email


async def emailed_link(auth: Any, api: PortalApi, email: str) -> str:
    """Sends a magic link with the coroutine and returns the link the fake API "emailed"."""
    await auth.send_magic_link_async(email)
    links = [entry for entry in api.admin("magic-links")["links"] if entry["email"] == email.lower()]
    assert links, f"no magic link recorded for {email}"
    link: str = links[-1]["link"]
    assert link.startswith(REDIRECT + "?"), link
    return link


def api_requests(api: PortalApi) -> int:
    total: int = api.admin("stats")["totalRequests"]
    return total


def test_methods_and_authorize_urls(pk: Any, auth: Any) -> None:
    async def main() -> Tuple[Any, str, str, int]:
        loop_thread = threading.get_ident()
        methods = await auth.get_methods_async()
        google = await auth.login_with_google_async()
        apple = await auth.login_with_apple_async()
        assert threading.get_ident() == loop_thread
        return methods, google, apple, pk.aio.loop_queue().dispatched

    methods, google, apple, dispatched = run(main())
    assert dispatched == 3  # each completion ran from the loop's reader
    assert isinstance(methods, pk.SignInMethods) and methods == auth.get_methods()
    assert "EMAIL_MAGIC_LINK" in methods.methods and isinstance(methods.auto_create_wallet, bool)
    for url, provider in ((google, "google"), (apple, "apple")):
        assert isinstance(url, str)
        parsed = urllib.parse.urlsplit(url)
        assert parsed.scheme in ("http", "https") and parsed.netloc and provider in url.lower(), url
    wait_until(lambda: pk.aio.operation_count() == 0, what="every operation released")


def test_magic_link_signs_in_and_persists(pk: Any, auth: Any, api: PortalApi, env_id: str) -> None:
    email = new_email("async-magic")
    user = end_user_of(api, email)

    async def main() -> Tuple[Any, Any, Any]:
        link = await emailed_link(auth, api, email)
        first = await auth.handle_redirect_async(link)
        again = await auth.handle_redirect_async(link)  # the remembered exchange on this handle
        other = await auth.handle_redirect_async("https://example.com/somewhere?token=abc")
        return first, again, other

    first, again, other = run(main())
    assert other is None
    for result in (first, again):
        assert isinstance(result, pk.SignedIn) and isinstance(result.session, pk.Session)
        with result.session as session:
            assert session.end_user_id == user["endUserId"] and session.is_valid
    # Persisted before the coroutine returned: another handle restores it.
    with pk.PortalAuth(env_id, REDIRECT, api.host) as fresh:
        restored = fresh.restore_session()
        assert restored is not None and restored.end_user_id == user["endUserId"]
        restored.close()


def test_totp_required_then_verify(pk: Any, auth: Any, api: PortalApi) -> None:
    email = new_email("async-totp")
    user = end_user_of(api, email, totp_required=True)

    def current_code() -> str:
        code: str = api.admin(f"totp?endUserId={user['endUserId']}")["code"]
        return code

    async def main() -> Tuple[Any, Any]:
        result = await auth.handle_redirect_async(await emailed_link(auth, api, email))
        assert isinstance(result, pk.TotpRequired)
        assert await auth.restore_session_async() is None  # nothing persisted yet
        with pytest.raises(pk.AuthenticationFailed):
            await auth.verify_totp_async("000000" if current_code() != "000000" else "111111", result.user_jwt)
        session = await auth.verify_totp_async(current_code(), result.user_jwt)
        return result, session

    result, session = run(main())
    assert isinstance(result.user_jwt, pk.SecretToken) and len(result.user_jwt) > 20
    assert result.totp_link is not None and result.totp_link.startswith("otpauth://totp/")
    assert result.end_user_id == user["endUserId"]
    assert result.totp_secret == api.admin(f"totp?endUserId={user['endUserId']}")["secret"]
    assert "<redacted>" in repr(result) and result.user_jwt.decode() not in repr(result)
    result.user_jwt.wipe()
    assert isinstance(session, pk.Session)
    with session:
        assert session.end_user_id == user["endUserId"]
        assert (session.client_id, session.is_account_abstracted) == (user["clientId"], False)
    restored = auth.restore_session()
    assert restored is not None and restored.end_user_id == user["endUserId"]
    restored.close()


def test_errors_are_the_blocking_calls_exceptions(pk: Any, auth: Any, api: PortalApi) -> None:
    auth.persist_session("someone-else", api.issue("someone-else")).close()
    email = new_email("async-errors")
    user = end_user_of(api, email)

    async def main() -> None:
        with pytest.raises(pk.AuthenticationFailed) as failed:
            await auth.handle_redirect_async(REDIRECT + "?error=access_denied&authMethod=EMAIL_MAGIC_LINK")
        assert "access_denied" in failed.value.message
        with pytest.raises(pk.InvalidArgument):
            await auth.send_magic_link_async("not an address")  # checked on the worker
        unsolicited = api.admin("grants", {"kind": "magic_link", "email": email, "redirectUrl": REDIRECT})
        with pytest.raises(pk.UnsolicitedRedirect) as caught:
            await auth.handle_redirect_async(unsolicited["redirectUrl"])
        assert caught.value.status == pk.Status.UNSOLICITED_REDIRECT and caught.value.message
        link = await emailed_link(auth, api, email)
        with pytest.raises(pk.DifferentEndUser):
            await auth.handle_redirect_async(link)
        kept = await auth.restore_session_async()
        assert kept is not None and kept.end_user_id == "someone-else"
        kept.close()
        replaced = await auth.handle_redirect_async(link, replace_end_user=True)
        assert isinstance(replaced, pk.SignedIn) and replaced.session.end_user_id == user["endUserId"]
        replaced.session.close()
        again = api.admin("grants", {"kind": "magic_link", "email": email, "redirectUrl": REDIRECT})
        allowed = await auth.handle_redirect_async(again["redirectUrl"], allow_unsolicited=True)
        assert isinstance(allowed, pk.SignedIn) and allowed.session.end_user_id == user["endUserId"]
        allowed.session.close()

    run(main())
    wait_until(lambda: pk.aio.operation_count() == 0, what="every operation released")


def test_argument_errors_are_raised_before_anything_starts(pk: Any, auth: Any, api: PortalApi,
                                                          env_id: str) -> None:
    closed = pk.PortalAuth(env_id, REDIRECT, api.host)
    closed.close()
    invalid: List[Callable[[], Awaitable[Any]]] = [
        lambda: auth.send_magic_link_async(None),
        lambda: auth.send_magic_link_async("a\0b@example.com"),
        lambda: auth.handle_redirect_async("a\0b"),
        lambda: auth.handle_redirect_async(None),
        lambda: auth.verify_totp_async("123456", ""),  # refused by the library before it returns
        lambda: auth.verify_totp_async("12\x00456", "jwt"),
        lambda: auth.verify_totp_async("123456", "jwt\0tail"),
        lambda: closed.get_methods_async(),
        lambda: closed.login_with_google_async(),
        lambda: closed.handle_redirect_async(REDIRECT + "?token=abc"),
    ]
    wrong_type: List[Callable[[], Awaitable[Any]]] = [
        lambda: auth.send_magic_link_async(42),
        lambda: auth.handle_redirect_async(3.5),
        lambda: auth.verify_totp_async("123456", 12345),
    ]

    async def main() -> None:
        started = pk.aio.operation_count()
        requests = api_requests(api)
        for call in invalid:
            with pytest.raises(pk.InvalidArgument) as caught:
                await call()
            assert caught.value.status == pk.Status.INVALID_ARGUMENT and isinstance(caught.value, ValueError)
            assert pk.aio.operation_count() == started  # nothing in flight, nothing left behind
        for call in wrong_type:
            with pytest.raises(TypeError):
                await call()
            assert pk.aio.operation_count() == started
        assert api_requests(api) == requests  # nothing reached the Portal API
        assert pk.aio.loop_queue().dispatched == 0  # and no completion ever ran

    run(main())


def test_slow_api_never_blocks_the_loop(pk: Any, auth: Any, api: PortalApi) -> None:
    api.admin("faults", {"route": "/api/v3/auth/magic-links", "delayMs": 1500, "count": 1})
    email = new_email("async-slow")
    end_user_of(api, email)

    async def main() -> Tuple[float, float]:
        gc.collect()  # earlier tests' handles are collected now, not during the measurement
        ticker = Ticker(asyncio.get_running_loop())
        started = time.monotonic()
        await auth.send_magic_link_async(email)
        took = time.monotonic() - started
        await asyncio.sleep(3 * PERIOD)
        ticker.stop()
        return took, ticker.max_gap

    took, gap = run(main())
    print(f"send_magic_link_async through an API that answers after 1.5 s: {took * 1000:.0f} ms; "
          f"largest gap of a 10 ms loop callback: {gap * 1000:.1f} ms")
    assert 1.4 < took < 5.0
    assert gap <= MAX_GAP, f"the loop was blocked for {gap * 1000:.1f} ms"
    assert any(entry["email"] == email.lower() for entry in api.admin("magic-links")["links"])


@pytest.mark.parametrize("call", ["get_methods", "handle_redirect"])
def test_cancelling_a_sign_in_task_cancels_the_operation(pk: Any, auth: Any, api: PortalApi, call: str) -> None:
    # The API holds the request for 8 s: only a forwarded cancel ends the operation sooner.
    if call == "get_methods":
        api.admin("faults", {"route": "/api/v3/auth/methods", "delayMs": 8000, "count": 1})
        start: Callable[[], Awaitable[Any]] = auth.get_methods_async
    else:
        email = new_email("async-cancel")
        end_user_of(api, email)
        grant = api.admin("grants", {"kind": "magic_link", "email": email, "redirectUrl": REDIRECT})
        api.admin("faults", {"route": "/api/v3/auth/magic-links/validations", "delayMs": 8000, "count": 1})
        url = grant["redirectUrl"]

        def start() -> Awaitable[Any]:
            coroutine: Awaitable[Any] = auth.handle_redirect_async(url, allow_unsolicited=True)
            return coroutine

    async def main() -> Tuple[float, float, float]:
        gc.collect()
        before = pk.aio.operation_count()
        ticker = Ticker(asyncio.get_running_loop())
        task = asyncio.ensure_future(start())
        await asyncio.sleep(0.3)
        assert not task.done() and pk.aio.operation_count() == before + 1  # waiting on the API
        cancel_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        raised = time.monotonic() - cancel_at
        # The library completed the operation (CANCELLED, then destroy_notify on this loop).
        while pk.aio.operation_count() != before and time.monotonic() - cancel_at < 3.0:
            await asyncio.sleep(PERIOD)
        released = time.monotonic() - cancel_at
        ticker.stop()
        assert pk.aio.operation_count() == before, "the operation was not cancelled in the library"
        return raised, released, ticker.max_gap

    raised, released, gap = run(main())
    print(f"cancelled {call}_async mid-request: CancelledError after {raised * 1000:.1f} ms, released by the "
          f"library after {released * 1000:.1f} ms; largest loop gap {gap * 1000:.1f} ms")
    assert raised < 0.1 and released < 1.0 and gap <= MAX_GAP
