"""The Python package in the Flatpak sandbox (Tests/flatpak/run.sh): restore, blocking and with
asyncio, of the session another sandboxed process stored. Prints the end user and token of each;
exits 1 when either found nothing."""

from __future__ import annotations

import asyncio
import sys

import portal_keyring as pk


async def restored_async(auth: pk.PortalAuth) -> str:
    session = await auth.restore_session_async()
    if session is None:
        return "signed out"
    with session, session.token() as token:
        return f"{session.end_user_id} {bytes(token).decode()}"


def main() -> int:
    env_id = sys.argv[1]
    with pk.PortalAuth(env_id, "app://cb", None) as auth:
        session = auth.restore_session()
        if session is None:
            print("blocking: signed out")
            return 1
        with session, session.token() as token:
            print(f"blocking: {session.end_user_id} {bytes(token).decode()}")
        found = asyncio.run(restored_async(auth))
        print(f"asyncio: {found}")
        return 0 if found != "signed out" else 1


if __name__ == "__main__":
    sys.exit(main())
