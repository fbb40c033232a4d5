"""mypy --strict accepts this (Tests/bindings/run.sh): the watch's changes are typed, so an app's
use of them is checked. watch_bad.py is the same with one misspelt attribute, which mypy rejects."""

from __future__ import annotations

from typing import List

import portal_keyring as pk


async def kinds(auth: pk.PortalAuth) -> List[str]:
    seen: List[str] = []
    async with auth.session_changes() as changes:
        async for change in changes:
            seen.append(change.kind)
            if change.end_user_id is not None:
                seen.append(change.end_user_id)
    return seen


def on_change(change: pk.SessionChange) -> None:
    print(change.kind, change.end_user_id)


def watch(auth: pk.PortalAuth) -> bool:
    with auth.watch(on_change) as w:
        return w.closed
