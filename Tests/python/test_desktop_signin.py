"""The desktop sign-in of portal_keyring (``PortalAuth.sign_in_with_google`` / ``_apple`` and their
coroutines) with real parts: GIO's URL opener launches Tests/tools/fake_browser.sh, registered once
for x-scheme-handler/http and https in the XDG directories scripts/with-keyring.sh made; the
loopback Portal API's authorize URLs and grants; the private keyring; portal-session
handle-redirect as the URL handler's process. The Swift, C and CLI suites also cover the case
without any handler (this process registers one before its first sign-in, and GIO keeps what it
read)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Iterator

import pytest

from conftest import REPO, PortalApi, wait_until
from test_asyncio import MAX_GAP, Ticker, run
from test_signin import REDIRECT

DESKTOP_ID = "portal-test-browser-py.desktop"


class Browser:
    """Tests/tools/fake_browser.sh's state directory: what it does next, and what it did."""

    def __init__(self, state: str) -> None:
        self.state = state

    def set(self, mode: str, auth: Any, end_user: str = "") -> None:
        for name in ("opened", "redirect", "handler-status", "handler.out"):
            try:
                os.unlink(os.path.join(self.state, name))
            except FileNotFoundError:
                pass
        library = os.environ.get("PORTAL_KEYRING_LIBRARY", "")
        cli = os.path.join(os.path.dirname(library), "portal-session")
        if not os.access(cli, os.X_OK):
            cli = os.path.join(REPO, ".build", "debug", "portal-session")
        write(os.path.join(self.state, "env"),
              f"PORTAL_AUTH_ENVIRONMENT_ID='{auth.auth_environment_id}'\nPORTAL_REDIRECT_URL='{REDIRECT}'\n"
              f"PORTAL_API_HOST='{auth.api_host}'\nPORTAL_TEST_END_USER='{end_user}'\nPORTAL_TEST_CLI='{cli}'\n"
              "export PORTAL_AUTH_ENVIRONMENT_ID PORTAL_REDIRECT_URL PORTAL_API_HOST\n")
        write(os.path.join(self.state, "mode"), mode + "\n")

    def opened(self) -> int:
        try:
            with open(os.path.join(self.state, "opened"), encoding="utf-8") as f:
                return len(f.read().splitlines())
        except FileNotFoundError:
            return 0

    def read(self, name: str) -> str:
        path = os.path.join(self.state, name)
        wait_until(lambda: os.path.exists(path), timeout=20, what=f"the browser's {name}")
        with open(path, encoding="utf-8") as f:
            return f.read().strip()


def write(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    data, config = os.environ["XDG_DATA_HOME"], os.environ["XDG_CONFIG_HOME"]
    state = os.path.join(data, "portal-test-browser-py")
    os.makedirs(state, exist_ok=True)
    os.makedirs(os.path.join(data, "applications"), exist_ok=True)
    script = os.path.join(REPO, "Tests", "tools", "fake_browser.sh")
    write(os.path.join(data, "applications", DESKTOP_ID),
          f'[Desktop Entry]\nType=Application\nName=Portal test browser (Python)\nExec="{script}" "{state}" %u\n'
          "MimeType=x-scheme-handler/http;x-scheme-handler/https;\nNoDisplay=true\n")
    write(os.path.join(config, "mimeapps.list"),
          f"[Default Applications]\nx-scheme-handler/http={DESKTOP_ID}\nx-scheme-handler/https={DESKTOP_ID}\n")
    yield Browser(state)


@pytest.fixture
def desktop_auth(pk: Any, env_id: str, api: PortalApi) -> Iterator[Any]:
    with pk.PortalAuth(env_id, REDIRECT, api.host) as a:
        yield a


def test_in_process_delivery_on_the_loop(pk: Any, desktop_auth: Any, browser: Browser) -> None:
    """The coroutine waits while the loop runs; the redirect handed to handle_redirect_async on the
    same loop ends it with that call's result (the client id only the exchange knows)."""
    browser.set("deliver", desktop_auth, "eu-py-desktop")

    async def main() -> Any:
        ticker = Ticker(asyncio.get_running_loop())
        signing_in = asyncio.ensure_future(desktop_auth.sign_in_with_google_async(30_000))
        path = os.path.join(browser.state, "redirect")
        while not os.path.exists(path):
            await asyncio.sleep(0.02)
        delivered = await desktop_auth.handle_redirect_async(browser.read("redirect"))
        result = await signing_in
        ticker.stop()
        return result, delivered, ticker.max_gap

    result, delivered, gap = run(main(), timeout=40)
    assert isinstance(result, pk.SignedIn) and isinstance(delivered, pk.SignedIn)
    assert result.session.end_user_id == "eu-py-desktop"
    assert result.client_id is not None and result.client_id == delivered.client_id
    assert gap <= MAX_GAP, f"the loop stalled {gap * 1000:.0f} ms"
    restored = desktop_auth.restore_session()
    assert restored is not None and restored.end_user_id == "eu-py-desktop"


def test_the_handler_process_completes_the_blocking_call(pk: Any, desktop_auth: Any, browser: Browser) -> None:
    browser.set("handler", desktop_auth, "eu-py-handler")
    result = desktop_auth.sign_in_with_apple(30_000)
    assert browser.read("handler-status") == "0"
    assert isinstance(result, pk.SignedIn) and result.session.end_user_id == "eu-py-handler"
    assert result.client_id is None  # restored: the handler's process had it


def test_single_flight_cancel_timeout_and_arguments(pk: Any, desktop_auth: Any, browser: Browser) -> None:
    browser.set("ignore", desktop_auth)

    async def main() -> None:
        first = asyncio.ensure_future(desktop_auth.sign_in_with_google_async(30_000))
        while browser.opened() < 1:
            await asyncio.sleep(0.02)
        started = time.monotonic()
        with pytest.raises(pk.SignInInProgress):
            await desktop_auth.sign_in_with_apple_async(5_000)
        assert time.monotonic() - started < 1.0
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first

    run(main(), timeout=40)
    assert browser.opened() == 1
    started = time.monotonic()
    with pytest.raises(pk.SignInTimedOut):
        desktop_auth.sign_in_with_google(300)
    assert time.monotonic() - started >= 0.3
    assert browser.opened() == 2 and desktop_auth.restore_session() is None
    for bad in (-1, 900_001, True, "5000"):
        with pytest.raises(pk.InvalidArgument):
            desktop_auth.sign_in_with_google(bad)
        with pytest.raises(pk.InvalidArgument):
            run(desktop_auth.sign_in_with_apple_async(bad))
    assert browser.opened() == 2
