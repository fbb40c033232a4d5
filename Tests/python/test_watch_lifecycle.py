"""The async watch's lifecycle against a stalled provider (SIGSTOP): a start that is cancelled
frees its watch, and aclose() from another task ends an ``async for`` during a hung read —
neither ever blocks the loop (python/README.md#watch)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from typing import Any, List, Set, Tuple

import pytest

from conftest import wait_until
from test_asyncio import MAX_GAP, Ticker
from test_watch import other_process, provider_pid


def bus_connections() -> Set[str]:
    """The unique names of this process's connections to the private session bus (gdbus, as
    scripts/with-keyring.sh uses it): a watch has a connection of its own until its thread ends."""

    def call(method: str, *args: str) -> str:
        return subprocess.run(["gdbus", "call", "--session", "--timeout", "5", "--dest", "org.freedesktop.DBus",
                               "--object-path", "/org/freedesktop/DBus", "--method", f"org.freedesktop.DBus.{method}",
                               *args], capture_output=True, text=True, timeout=10).stdout

    ours = set()
    for name in re.findall(r"'(:[0-9]+\.[0-9]+)'", call("ListNames")):
        pid = re.search(r"uint32 ([0-9]+)", call("GetConnectionUnixProcessID", name))
        if pid is not None and int(pid.group(1)) == os.getpid():
            ours.add(name)
    return ours


def test_a_cancelled_start_frees_the_watch(pk: Any, auth: Any) -> None:
    """``asyncio.wait_for(changes.start(), 0.2)`` with the provider stopped: the start's baseline
    read hangs on the watch thread, the loop keeps ticking, the timeout cancels the start, and
    the watch is freed (it used to keep running, unreferenced, its sink registered forever)."""
    from portal_keyring import watch as watch_module

    provider = provider_pid()
    auth.restore_session()  # the library's own bus connection exists before `before`
    before = bus_connections()

    async def main() -> Tuple[Any, float, float, Set[str]]:
        loop = asyncio.get_running_loop()
        changes = auth.session_changes()
        ticker = Ticker(loop)
        os.kill(provider, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(changes.start(), 0.2)
        took = time.monotonic() - started
        await asyncio.sleep(0.1)
        ticker.stop()
        return changes, took, ticker.max_gap, await loop.run_in_executor(None, bus_connections)

    try:
        changes, took, gap, during = asyncio.run(main())
    finally:
        os.kill(provider, signal.SIGCONT)
    print(f"cancelled start: {took * 1000:.1f} ms, largest loop gap {gap * 1000:.1f} ms")
    assert took < 0.2 + MAX_GAP and gap <= MAX_GAP, (took, gap)
    assert changes._watch is None, "the cancelled start left its watch running"
    assert changes._key not in watch_module._sinks, "the cancelled start left its sink registered"
    # The watch's own connection, there while its read hung; once the provider runs again the
    # read ends, and the freed watch's thread disconnects and exits.
    watch_connection = during - before
    assert watch_connection, f"no connection of the starting watch on the bus: {during} (before: {before})"
    wait_until(lambda: not (bus_connections() & watch_connection), 15, "the freed watch to disconnect")


def test_aclose_from_another_task_during_a_hung_read(pk: Any, auth: Any, env_id: str) -> None:
    """A task waits in ``async for`` while the watch's read hangs on the stopped provider;
    another task's aclose() returns at once, the iteration ends, the loop keeps ticking."""
    provider = provider_pid()

    async def main() -> Tuple[List[Any], float, float]:
        loop = asyncio.get_running_loop()
        changes = auth.session_changes()
        await changes.start()
        seen: List[Any] = []

        async def consume() -> None:
            async for change in changes:
                seen.append(change)

        task = asyncio.ensure_future(consume())
        await loop.run_in_executor(None, other_process, env_id, "persist", "eu-hung-a")
        for _ in range(1000):
            if seen:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the first persist was never reported")
        writer = pk.PortalAuth(env_id, "py-test://portal/redirect")
        # Two persists in a row: the second's read waits out the 100 ms coalescing window and
        # starts while the provider is stopped.
        writer.persist_session("eu-hung-b", "tok-b")
        writer.persist_session("eu-hung-c", "tok-c")
        os.kill(provider, signal.SIGSTOP)
        await asyncio.sleep(0.3)
        ticker = Ticker(loop)
        started = time.monotonic()
        await changes.aclose()
        await asyncio.wait_for(task, 5)  # ends; a hang fails here
        took = time.monotonic() - started
        await asyncio.sleep(0.1)
        ticker.stop()
        os.kill(provider, signal.SIGCONT)
        writer.clear_persisted_session()
        writer.close()
        return seen, took, ticker.max_gap

    try:
        seen, took, gap = asyncio.run(main())
    finally:
        os.kill(provider, signal.SIGCONT)
    print(f"aclose from another task during a hung read: {took * 1000:.1f} ms, largest loop gap {gap * 1000:.1f} ms")
    assert seen[0] == pk.SessionChange("signed_in", "eu-hung-a")
    assert took < MAX_GAP and gap <= MAX_GAP, (took, gap)
