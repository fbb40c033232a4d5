"""The session watch of the portal_keyring package (issue 16) against the real keyring: changes
made by another process arrive in order, other auth environments give nothing, on the loop's
thread (async form) or the watch's own thread (callback form); cancelling stops the watch."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from typing import Any, List

from conftest import REPO, wait_until


def other_process(env_id: str, action: str, user: str = "") -> None:
    """persist/clear in a separate Python process (the URL handler's role)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import portal_keyring as pk\n"
        "a = pk.PortalAuth(sys.argv[2], 'py-test://portal/redirect')\n"
        "a.persist_session(sys.argv[4], 'tok-watch') if sys.argv[3] == 'persist' else a.clear_persisted_session()\n"
    )
    subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "python"), env_id, action, user],
                   check=True, timeout=30)


def test_async_iterator_sees_another_process(pk: Any, auth: Any, env_id: str) -> None:
    async def main() -> List[Any]:
        seen: List[Any] = []
        loop = asyncio.get_running_loop()
        async with auth.session_changes() as changes:
            await loop.run_in_executor(None, other_process, env_id, "persist", "eu-py-1")
            change = await asyncio.wait_for(changes.__anext__(), 10)
            seen.append(change)
            await loop.run_in_executor(None, other_process, env_id + "-other", "persist", "eu-other")
            await loop.run_in_executor(None, other_process, env_id, "clear")
            seen.append(await asyncio.wait_for(changes.__anext__(), 10))
            await loop.run_in_executor(None, other_process, env_id + "-other", "clear")
        return seen

    seen = asyncio.run(main())
    assert seen == [pk.SessionChange("signed_in", "eu-py-1"), pk.SessionChange("signed_out")]


def test_cancelling_the_iterating_task_stops_the_watch(pk: Any, auth: Any) -> None:
    async def main() -> bool:
        changes = auth.session_changes()
        await changes.start()

        async def consume() -> None:
            async for _ in changes:
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return changes._watch is None

    assert asyncio.run(main())


def test_callback_form_on_its_own_thread(pk: Any, auth: Any, env_id: str) -> None:
    seen: List[Any] = []
    names: List[str] = []

    def on_change(change: Any) -> None:
        names.append(threading.current_thread().name)
        seen.append(change)

    with auth.watch(on_change) as watch:
        other_process(env_id, "persist", "eu-py-2")
        wait_until(lambda: len(seen) >= 1, 10)
        other_process(env_id, "clear")
        wait_until(lambda: len(seen) >= 2, 10)
    assert watch.closed
    assert seen == [pk.SessionChange("signed_in", "eu-py-2"), pk.SessionChange("signed_out")]
    assert set(names) == {"portal-watch-py"}
    other_process(env_id, "persist", "eu-py-3")  # after close: nothing more
    assert len(seen) == 2
