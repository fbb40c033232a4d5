#!/usr/bin/env python3
"""restore_on_launch.py — what a desktop app does at start-up, in Python (the portal_keyring
package). The same program as examples/c/restore_on_launch.c.

    restore_on_launch.py AUTH_ENVIRONMENT_ID

The package comes from ``pip install ./python`` or ``make install``; from a source checkout, run
with ``PYTHONPATH=python`` (and ``PORTAL_KEYRING_LIBRARY=build/make/lib/libportal-keyring.so`` after ``make``).

Exit status: 0 session restored, 1 signed out (show sign-in), 2 error (the keyring could not be
read this time: the end user is NOT known to be signed out, so do not show sign-in as if they
were). The Client Session Token is never printed.
"""

import errno
import os
import sys
from typing import List, TextIO, Union

import portal_keyring as pk


def write(stream: TextIO, *parts: Union[str, bytes]) -> None:
    """Writes one line as bytes (UTF-8 text, file names as they are), whatever the locale."""
    stream.buffer.write(b"".join(p if isinstance(p, bytes) else p.encode("utf-8") for p in parts) + b"\n")
    stream.flush()


def fail(error: pk.PortalKeyringError) -> int:
    write(sys.stderr, f"error: {error.status_name} ({int(error.status)}): {error.message}")
    return 2


def make_dirs(path: bytes) -> None:
    """Creates each directory of ``path`` (like mkdir -p, mode 0700)."""
    for i in range(1, len(path) + 1):
        if i == len(path) or path[i:i + 1] == b"/":
            try:
                os.mkdir(path[:i], 0o700)
            except FileExistsError:
                pass


def state_dir() -> bytes:
    """$XDG_STATE_HOME/portal-keyring-example (default ~/.local/state/portal-keyring-example)."""
    state = os.environb.get(b"XDG_STATE_HOME", b"")
    if state.startswith(b"/"):
        return state + b"/portal-keyring-example"
    return os.environb.get(b"HOME", b".") + b"/.local/state/portal-keyring-example"


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        write(sys.stderr, f"usage: {argv[0]} AUTH_ENVIRONMENT_ID")
        return 2
    env_id = argv[1]

    try:
        with pk.PortalAuth(env_id, "example-app://portal/redirect") as auth:
            # Keyring items survive uninstall and reinstall, so the first launch after install
            # starts from a clean slate. The flag lives in $XDG_STATE_HOME (default ~/.local/state).
            directory = state_dir()
            name = os.fsencode(env_id)[:200].replace(b"/", b"_")  # fits NAME_MAX; id as file name
            flag = directory + b"/" + name + b".launched"
            try:
                make_dirs(directory)
            except OSError as e:
                write(sys.stderr, b"error: cannot create ", directory, f": {os.strerror(e.errno or errno.EIO)}")
                return 2
            if not os.access(flag, os.F_OK):
                auth.clear_persisted_session()  # raises: no flag, so this is tried again next launch
                try:
                    open(flag, "wb").close()
                except OSError:
                    write(sys.stderr, b"warning: cannot create ", flag)

            # Restore without a network call: a session, None (signed out), or an exception.
            session = auth.restore_session()
            if session is None:
                write(sys.stdout, "signed out — show sign-in")
                return 1
            with session:
                write(sys.stdout, f"restored session for end user {session.end_user_id}")
            return 0
    except pk.PortalKeyringError as e:
        return fail(e)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
