"""mypy --strict must REJECT this (Tests/bindings/run.sh checks that it fails naming "knd"): a
misspelt attribute of a change from session_changes() and from watch() is an error, not Any."""

from __future__ import annotations

import portal_keyring as pk


async def first_kind(auth: pk.PortalAuth) -> str:
    async with auth.session_changes() as changes:
        async for change in changes:
            return change.knd
    return ""


def watch(auth: pk.PortalAuth) -> None:
    def on_change(change: pk.SessionChange) -> None:
        print(change.knd)

    auth.watch(on_change).close()
    auth.watch(lambda change: print(change.knd)).close()
