#!/usr/bin/env python3
"""asyncio_app.py — a desktop app's start-up on an asyncio loop (the portal_keyring package).

    asyncio_app.py AUTH_ENVIRONMENT_ID [API_HOST]

Restores the stored session without blocking the loop, validates it with a request to the
Portal API, and reacts to invalidation on the loop's own thread. A 10 ms periodic callback
stands for the app's UI; the largest gap between two of its ticks goes to stderr.

Exit status: 0 signed in (the backend accepted the session), 1 signed out or the session was
invalidated (show sign-in), 2 error (the keyring could not be read this time, or the network).
The Client Session Token is never printed. From a source checkout run with PYTHONPATH=python and
PORTAL_KEYRING_LIBRARY=.build/debug/libportal-keyring.so.
"""

import asyncio
import sys
import threading
import time
from typing import List, Optional

import portal_keyring as pk

REDIRECT_URL = "example-app://portal/redirect"


class Ui:
    """Stands for the app's UI: a periodic callback on the loop, recording its largest gap."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.last = time.monotonic()
        self.max_gap = 0.0
        self.timer = self.loop.call_later(0.010, self.tick)

    def tick(self) -> None:
        now = time.monotonic()
        self.max_gap = max(self.max_gap, now - self.last)
        self.last = now
        self.timer = self.loop.call_later(0.010, self.tick)

    def stop(self) -> None:
        self.timer.cancel()


async def main(env_id: str, api_host: Optional[str]) -> int:
    ui = Ui()
    loop_thread = threading.get_ident()
    try:
        with pk.PortalAuth(env_id, REDIRECT_URL, api_host) as auth:
            session = await auth.restore_session_async()
            if session is None:
                print("signed out — show sign-in")
                return 1
            invalidated = asyncio.Event()
            on_loop: List[bool] = []

            def on_invalidated() -> None:  # runs on the loop's thread
                on_loop.append(threading.get_ident() == loop_thread)
                invalidated.set()

            with session, pk.Portal(session) as portal:
                print(f"restored session for end user {session.end_user_id}")
                portal.on_session_invalidated(on_invalidated, loop=asyncio.get_running_loop())
                try:
                    status = (await portal.request_async("GET", "/api/v3/clients/me")).status
                    print(f"GET /api/v3/clients/me: HTTP {status}")
                except pk.SessionInvalidated:  # Portal()'s own validation request got the 401 first
                    status = 401
                    print("GET /api/v3/clients/me: not sent, the session was invalidated already")
                if status == 401:
                    await asyncio.wait_for(invalidated.wait(), 10)
                    where = "on the loop thread" if on_loop == [True] else "on another thread"
                    print(f"session invalidated ({where}) — show sign-in")
                    return 1
                return 0
    except pk.PortalKeyringError as e:
        print(f"error: {e.status_name} ({int(e.status)}): {e.message}", file=sys.stderr)
        return 2
    finally:
        ui.stop()
        print(f"largest gap of the 10 ms UI callback: {ui.max_gap * 1000:.1f} ms", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(f"usage: {sys.argv[0]} AUTH_ENVIRONMENT_ID [API_HOST]", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)))
