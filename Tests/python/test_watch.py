"""The session watch of the portal_keyring package against the real keyring: changes
made by another process arrive in order, other auth environments give nothing, on the loop's
thread (async form) or the watch's own thread (callback form); cancelling stops the watch."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import pytest

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


def provider_pid() -> int:
    """The provider's pid now: scripts/with-keyring.sh keeps it in $PORTAL_TEST_KEYRING_DIR/keyring.pid
    (a restart by an earlier test changes it), else $PORTAL_TEST_KEYRING_PID."""
    try:
        with open(os.path.join(os.environ["PORTAL_TEST_KEYRING_DIR"], "keyring.pid")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError, KeyError):
        return int(os.environ["PORTAL_TEST_KEYRING_PID"])


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
    assert [change.origin for change in seen] == ["other_process", "other_process"]


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
    assert [change.origin for change in seen] == ["other_process", "other_process"]
    assert set(names) == {"portal-watch-py"}
    other_process(env_id, "persist", "eu-py-3")  # after close: nothing more
    assert len(seen) == 2


def test_aclose_from_another_task_ends_a_waiting_async_for(pk: Any, auth: Any) -> None:
    """An ``async for`` waiting for the next change ends when another task closes the iterator,
    as an async generator or a shut-down queue would (it used to wait forever)."""

    from test_asyncio import MAX_GAP, Ticker

    async def main() -> "tuple[List[Any], float]":
        changes = auth.session_changes()
        await changes.start()
        seen: List[Any] = []

        async def consume() -> None:
            async for change in changes:
                seen.append(change)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        ticker = Ticker(asyncio.get_running_loop())
        await changes.aclose()
        await asyncio.wait_for(task, 5)  # ends; a hang fails here
        await asyncio.sleep(0.1)
        ticker.stop()
        return seen, ticker.max_gap

    seen, gap = asyncio.run(main())
    assert seen == []
    assert gap <= MAX_GAP, f"the loop was blocked for {gap * 1000:.1f} ms"


def test_aclose_during_a_hung_read_never_blocks_the_loop(pk: Any, auth: Any, env_id: str) -> None:
    """The watch's read hangs on a stopped provider; leaving ``async with`` (aclose) returns at
    once and the loop keeps ticking (portal_watch_free used to wait out the read: 4.7 s)."""
    from test_asyncio import MAX_GAP, Ticker

    provider = provider_pid()

    async def main() -> "tuple[float, float]":
        loop = asyncio.get_running_loop()
        async with auth.session_changes() as changes:
            # The first persist is read at once; the second's read waits out the 100 ms
            # coalescing window and starts while the provider is stopped.
            await loop.run_in_executor(None, other_process, env_id, "persist", "eu-hung-1")
            await asyncio.wait_for(changes.__anext__(), 10)
            writer = pk.PortalAuth(env_id, "py-test://portal/redirect")
            writer.persist_session("eu-hung-2", "tok-2")
            os.kill(provider, signal.SIGSTOP)
            await asyncio.sleep(0.3)
            ticker = Ticker(loop)
            started = time.monotonic()
            await changes.aclose()
        took = time.monotonic() - started
        await asyncio.sleep(0.1)
        ticker.stop()
        os.kill(provider, signal.SIGCONT)
        writer.clear_persisted_session()
        writer.close()
        return took, ticker.max_gap

    try:
        took, gap = asyncio.run(main())
    finally:
        os.kill(provider, signal.SIGCONT)
    print(f"aclose during a hung read: {took * 1000:.1f} ms, largest loop gap {gap * 1000:.1f} ms")
    assert took < MAX_GAP and gap <= MAX_GAP, (took, gap)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def settled_descriptors() -> int:
    """The number of open descriptors once it has not changed for half a second (a stopped
    watch's library thread closes its bus connection just after the free, not in it)."""
    count, since = open_descriptors(), time.monotonic()
    deadline = since + 10
    while time.monotonic() - since < 0.5 and time.monotonic() < deadline:
        time.sleep(0.05)
        now = open_descriptors()
        if now != count:
            count, since = now, time.monotonic()
    return count


@pytest.mark.parametrize("opens_descriptors", [False, True])
def test_close_from_its_own_callback_ends_the_watch_cleanly(pk: Any, auth: Any, env_id: str,
                                                            opens_descriptors: bool) -> None:
    """``close()`` inside the callback (python/README.md#watch): the watch's thread ends once
    the callback returns, with nothing raised there, and frees the queue and its descriptors only
    then. Descriptors the callback opens right after closing (they reuse the numbers a teardown
    inside the callback would have freed) are the app's: the watch neither waits on them nor
    reads them."""
    raised: List[Optional[BaseException]] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: raised.append(args.exc_value)
    seen: List[Any] = []
    pipes: List[Any] = []
    # The library's first watch opens what lasts for the process (its bus connection, GLib's
    # wakeup descriptors): counted before, so that only this watch's own are compared.
    with auth.watch(seen.append):
        pass
    before = settled_descriptors()
    try:
        box: Dict[str, Any] = {}

        def on_change(change: Any) -> None:
            seen.append(change)
            box["watch"].close()
            if opens_descriptors:
                pipes.extend(os.pipe() for _ in range(4))

        box["watch"] = auth.watch(on_change)
        thread = box["watch"]._thread
        other_process(env_id, "persist", "eu-py-close-1")
        wait_until(lambda: len(seen) >= 1, 10)
        thread.join(5)
        assert not thread.is_alive(), "the watch's thread ended after its callback closed it"
        assert raised == [], f"the watch's thread raised: {raised!r}"
        for r, w in pipes:
            os.write(w, b"app data")
            assert os.read(r, 100) == b"app data"
        other_process(env_id, "persist", "eu-py-close-2")
        time.sleep(0.5)
        assert seen == [pk.SessionChange("signed_in", "eu-py-close-1")]
        assert box["watch"].closed
    finally:
        threading.excepthook = previous_hook
        for r, w in pipes:
            os.close(r)
            os.close(w)
    # (The library's watch thread closes its connection once it ends, just after the free.)
    wait_until(lambda: open_descriptors() == before, 10, "the queue's and the stop pipe's descriptors closed")


def test_dropping_the_last_reference_stops_the_watch(pk: Any, auth: Any, env_id: str) -> None:
    """A SessionWatch nobody references any more is stopped (garbage collection frees it, as it
    frees every other handle): its thread ends and its callback never runs again."""
    import gc

    seen: List[Any] = []
    watch = auth.watch(seen.append)
    thread = watch._thread
    del watch
    gc.collect()
    thread.join(10)
    assert not thread.is_alive(), "the watch's thread ended once the watch was dropped"
    other_process(env_id, "persist", "eu-py-dropped")
    time.sleep(0.5)
    assert seen == []


def test_own_changes_say_this_process(pk: Any, auth: Any) -> None:
    """The app's own sign-in and sign-out come with origin "this_process" (a UI shows "signed
    out elsewhere" only for "other_process")."""
    seen: List[Any] = []
    with auth.watch(seen.append):
        auth.persist_session("eu-py-own", "cst_py_own_token")
        wait_until(lambda: len(seen) >= 1, 10)
        auth.clear_persisted_session()
        wait_until(lambda: len(seen) >= 2, 10)
    assert seen == [pk.SessionChange("signed_in", "eu-py-own"), pk.SessionChange("signed_out")]
    assert [change.origin for change in seen] == ["this_process", "this_process"]
