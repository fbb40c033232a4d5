"""Persist refuses a Client Session Token with whitespace or control characters (a
pasted token with a space or line end), naming ``client_session_token``; restore still reads what
earlier versions stored, whatever the token holds."""

from __future__ import annotations

import json
from typing import Any

import pytest


@pytest.mark.parametrize("token", ["tok en", " tok", "tok\n", "tok\r\n", "\ttok", "a\x01b", "tok\u2028",
                                   b"tok\n", bytearray(b"tok ")])
def test_persist_refuses_whitespace_and_controls(pk: Any, auth: Any, env_id: str, keyring: Any, token: Any) -> None:
    """A pasted token with a space or line end is refused at persist, not stored."""
    auth.persist_session("user-before", "tok-before").close()
    with pytest.raises(pk.InvalidArgument, match="client_session_token.*whitespace or control characters"):
        auth.persist_session("user-ws", token)
    assert keyring.get(env_id)["clientSessionToken"] == "tok-before"


def test_restore_reads_tokens_stored_by_earlier_versions(pk: Any, auth: Any, env_id: str, keyring: Any) -> None:
    """Only persist checks: a token with whitespace stored by an earlier version is restored."""
    old = "  old tok\twith\r\nwhitespace \x01"
    # Escapes spelled \uXXXX (json.dumps writes \t): the passwordless key file rewrites \t (conftest).
    document = json.dumps({"v": 1, "endUserId": "user-old", "clientSessionToken": old})
    for short, code in (("\\t", "\\u0009"), ("\\r", "\\u000d"), ("\\n", "\\u000a")):
        document = document.replace(short, code)
    keyring.store_raw(env_id, document.encode(),
                      "session_generation=00112233445566778899aabbccddeeff", "persisted_at=1")
    restored = auth.restore_session()
    assert restored is not None
    with restored, restored.token() as copy:
        assert restored.end_user_id == "user-old"
        assert copy == old.encode()
