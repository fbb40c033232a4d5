"""Parked portals: the Python side of the listener-lifetime rule (docs/threading.md "Listener
lifetime", rule 2: dropping the last reference is not a cancel).

A :class:`~portal_keyring.Portal` collected by the garbage collector while it still has listener
registrations and its validation request may still be in flight is not freed at once (freeing is
``portal_free``, the explicit close, which would cancel them). Its library handle is *parked*
here, and a reaper thread frees it (``portal_free``, releasing whatever is left uncalled) as soon
as one of these holds:

- every registration of that portal has been released (delivered: the listener was called once);
- the validation request can no longer be in flight — :data:`VALIDATION_BOUND_S` seconds after the
  portal was created (libcurl's 30 s total timeout plus a margin) — and the session was not
  invalidated (nothing can detect a rejection any more);
- the session was invalidated but its deliveries have not drained within
  :data:`DELIVERY_BOUND_S` more seconds (a keyring delete stuck behind its deadlines).

The library has no call that says "the validation request has returned", hence the time bound.
Safety: the C callbacks of every registration are the module-level ``CFUNCTYPE`` objects of
:mod:`portal_keyring.portal`, which live as long as the module, and each registration's Python
callable stays in its table until ``destroy_notify``; parking only delays ``portal_free``. At
interpreter exit :func:`close_all` frees every parked portal (an explicit close: their listeners
are cancelled) before the interpreter finalizes.

Threads: :func:`park` may run on any thread (a finalizer runs wherever the collector does,
including a library thread inside a callback); it never calls the library.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, List, Optional

#: Seconds after a portal's creation by which its validation request has returned (libcurl's
#: CURLOPT_TIMEOUT_MS is 30 s for the whole transfer, connect included; 2 s of margin).
VALIDATION_BOUND_S = 32.0
#: Seconds after VALIDATION_BOUND_S that an invalidated session's deliveries may take to drain.
DELIVERY_BOUND_S = 120.0


class _Parked:
    __slots__ = ("handle", "keys", "session", "validate_until")

    def __init__(self, handle: Any, keys: List[int], session: Any, validate_until: float) -> None:
        self.handle = handle  # the portal's _Handle; close() frees it with portal_free
        self.keys = keys  # its listener registrations' keys
        self.session = session  # the Session object, to see whether the session was invalidated
        self.validate_until = validate_until


_parked: List[_Parked] = []
_cond = threading.Condition()
_reaper: Optional[threading.Thread] = None
_closing = False
_generation = 0  # bumped by every release: a wake-up the reaper missed while it was deciding
_live: Callable[[int], bool] = lambda key: False


def set_registration_test(live: Callable[[int], bool]) -> None:
    """Tells this module how to see whether a registration key is still live (not released)."""
    global _live
    _live = live


def park(handle: Any, keys: Iterable[int], session: Any, created: float) -> bool:
    """Parks a collected portal's handle if rule 2 says its listeners must outlive the drop.

    :param handle: the portal's ``_Handle`` (not closed).
    :param keys: the keys of the registrations made on it.
    :param session: its ``Session`` (``None`` for an API-key portal, which never invalidates).
    :param created: ``time.monotonic()`` at the portal's creation.
    :returns: ``False`` when nothing needs to wait (the caller closes the portal now).
    """
    global _reaper
    live = [key for key in keys if _live(key)]
    if not live or session is None or _closing:
        return False
    validate_until = created + VALIDATION_BOUND_S
    if time.monotonic() >= validate_until and not _invalidated(session):
        return False
    with _cond:
        _parked.append(_Parked(handle, live, session, validate_until))
        if _reaper is None:
            _reaper = threading.Thread(target=_reap, name="portal_keyring-parked", daemon=True)
            _reaper.start()
        _cond.notify()
    return True


def registration_released() -> None:
    """Called after a registration is released (destroy_notify): wakes the reaper."""
    global _generation
    if _parked:
        with _cond:
            _generation += 1
            _cond.notify()


def parked_count() -> int:
    """How many collected portals are parked (for tests)."""
    with _cond:
        return len(_parked)


def close_all() -> None:
    """Frees every parked portal now (interpreter exit); later collections are freed at once."""
    global _closing
    with _cond:
        _closing = True
        entries = list(_parked)
        del _parked[:]
        _cond.notify()
    for entry in entries:
        entry.handle.close()


def _invalidated(session: Any) -> bool:
    try:
        return not session.closed and not session.is_valid
    except Exception:  # pragma: no cover - a closed handle between the two checks
        return False


def _due(entry: _Parked, now: float) -> bool:
    if not any(_live(key) for key in entry.keys):
        return True  # delivered (or cancelled): nothing left to wait for
    if now < entry.validate_until:
        return False
    if now >= entry.validate_until + DELIVERY_BOUND_S:
        return True
    return not _invalidated(entry.session)


def _reap() -> None:
    while True:
        with _cond:
            if _closing:
                return
            entries = list(_parked)
            generation = _generation
        # Decided outside the lock: reading the session calls the library.
        now = time.monotonic()
        due = [entry for entry in entries if _due(entry, now)]
        with _cond:
            due = [entry for entry in due if entry in _parked]
            for entry in due:
                _parked.remove(entry)
            if not due and generation == _generation:
                # Until the next validation bound; past it, an invalidated session's deliveries
                # are awaited (each release wakes this thread; the 50 ms poll is a backstop).
                waits = [entry.validate_until - now if entry.validate_until > now else 0.05 for entry in _parked]
                _cond.wait(min(waits) if waits else None)
                continue
        for entry in due:
            entry.handle.close()  # portal_free: releases what is left, waits for aborted requests
