"""The package from several Python threads, at interpreter exit and in multiprocessing children,
against a real keyring on a private bus and the loopback Portal API (conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any, List

import pytest

from conftest import REPO, settle, wait_until

# ----------------------------------------------------------------------------- threads


def test_eight_python_threads(pk: Any, api: Any, keyring: Any) -> None:
    n = 8
    errors: List[BaseException] = []
    barrier = threading.Barrier(n)
    shared_env = f"py-threads-{os.getpid()}"
    shared_auth = pk.PortalAuth(shared_env, "py-test://cb", api.host)
    token = api.issue("user-threads")
    session = shared_auth.persist_session("user-threads", token)
    portal = pk.Portal(session)
    calls = [0] * n
    lock = threading.Lock()
    won: List[bool] = []
    mine: List[str] = []

    def count(i: int) -> None:
        with lock:
            calls[i] += 1

    def worker(i: int) -> None:
        try:
            own_env = f"py-thread-{i}-{os.getpid()}"
            mine.append(own_env)
            with pk.PortalAuth(own_env, "py-test://cb", api.host) as own:
                for round_ in range(5):
                    value = f"token-{i}-{round_}-ü"
                    own.persist_session(f"user-{i}", value).close()
                    restored = own.restore_session()
                    assert restored is not None and restored.end_user_id == f"user-{i}"
                    with restored.token() as t:
                        assert t == value.encode()
                    restored.close()
                    # Readers of the shared item, concurrently with the other threads.
                    shared = shared_auth.restore_session()
                    assert shared is not None and shared.end_user_id == "user-threads"
                own.clear_persisted_session()
                assert own.restore_session() is None
            portal.on_session_invalidated(lambda: count(i))
            barrier.wait(30)
            result = portal.report_unauthorized(token)  # all threads at once
            with lock:
                won.append(result)
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), name=f"pk-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert sorted(won) == [False] * (n - 1) + [True]  # exactly one invalidation
    wait_until(lambda: calls == [1] * n, what="every listener once")
    settle()
    assert calls == [1] * n
    assert shared_auth.restore_session() is None
    portal.close()
    shared_auth.close()
    for env in mine + [shared_env]:
        assert keyring.count(env) == 0


def test_interpreter_exit_with_live_registrations(env_id: str, api: Any) -> None:
    """Exiting while listeners are registered, a delivery is pending and one is running: the
    atexit hook closes the portals, so no library thread calls into a finalized interpreter."""
    code = (
        "import sys, time, json, urllib.request as u, portal_keyring as pk\n"
        "env, url, host = sys.argv[1:4]\n"
        "def admin(path, body):\n"
        "    r = u.Request(url + '/_admin/' + path, data=json.dumps(body).encode(),\n"
        "                  headers={'Content-Type': 'application/json'})\n"
        "    return json.load(u.urlopen(r))['data']\n"
        "auth = pk.PortalAuth(env, 'py-test://cb', host)\n"
        "keep = []\n"
        "for i in range(4):\n"
        "    token = admin('sessions', {'endUserId': 'exit-%d' % i})['token']\n"
        "    session = auth.persist_session('exit-%d' % i, token)\n"
        "    if i % 2: admin('revoke', {'token': token})\n"
        "    portal = pk.Portal(session)\n"
        "    portal.on_session_invalidated(lambda: time.sleep(0.3))  # running at exit\n"
        "    portal.on_session_invalidated(lambda: None)             # pending at exit\n"
        "    keep.append(portal)\n"
        "time.sleep(0.05)\n"
        "print('exiting', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code, env_id, api.url, api.host], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout == "exiting\n"
        assert "Fatal" not in out.stderr and "Exception" not in out.stderr, out.stderr


def _restore_in_child(env_id: str, queue: Any) -> None:
    import portal_keyring as child_pk
    try:
        with child_pk.PortalAuth(env_id, "py-test://fork") as child_auth:
            session = child_auth.restore_session()
            queue.put(("restored", session.end_user_id if session else None))
    except child_pk.SessionStorageFailure as error:
        queue.put(("storage failure", str(error)))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_child_works_or_fails_at_once(pk: Any, auth: Any, env_id: str, method: str) -> None:
    """A child after fork() never hangs. `fork` after this process used D-Bus fails at
    once naming fork(); `spawn` works."""
    import multiprocessing
    auth.persist_session("user-mp", "token-mp").close()
    assert auth.restore_session() is not None  # this process has used D-Bus
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    started = time.monotonic()
    child = context.Process(target=_restore_in_child, args=(env_id, queue))  # type: ignore[attr-defined]
    child.start()
    child.join(30)
    took = time.monotonic() - started
    if child.is_alive():
        child.kill()
        pytest.fail(f"the {method} child hung")
    kind, detail = queue.get(timeout=5)
    if method == "fork":
        assert kind == "storage failure" and "fork()" in detail, (kind, detail)
        assert took < 5, took
    else:
        assert (kind, detail) == ("restored", "user-mp")
    assert keyring_count_after(auth) == 1


def keyring_count_after(auth: Any) -> int:
    session = auth.restore_session()
    return 0 if session is None else 1


def test_loop_listener_registered_from_a_worker_thread(pk: Any, auth: Any, api: Any) -> None:
    """``on_session_invalidated(cb, loop=loop)`` from a thread that does not run the loop works
    (docs/api.md#threads: every call from any thread): the callback runs once, on the loop's thread."""
    import asyncio

    token = api.issue("user-worker-listener")
    session = auth.persist_session("user-worker-listener", token)
    portal = pk.Portal(session)
    ran: List[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fired = asyncio.Event()

        def listener() -> None:
            ran.append(threading.current_thread().name)
            fired.set()

        errors: List[BaseException] = []

        def register() -> None:
            try:
                portal.on_session_invalidated(listener, loop=loop)
            except BaseException as error:  # pragma: no cover - the failure under test
                errors.append(error)

        worker = threading.Thread(target=register, name="registering-worker")
        worker.start()
        await loop.run_in_executor(None, worker.join)
        assert not errors, errors
        assert portal.report_unauthorized(token)
        await asyncio.wait_for(fired.wait(), 10)

    asyncio.run(main())
    assert ran == [threading.main_thread().name]
    portal.close()
