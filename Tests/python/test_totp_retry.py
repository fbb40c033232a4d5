"""A TOTP code Portal accepted is not lost when the keyring write then fails:
the handle remembers the exchange, so verifying again with the same user JWT, whatever code the
end user types then, persists the session without a second exchange (Portal spent the JWT).
Real keyring, loopback Portal API."""

from __future__ import annotations

import threading
from typing import Any, Dict

from conftest import Keyring, PortalApi, wait_until
from test_signin import end_user_of, magic_link, new_email

ROUTE = "/api/v3/auth/totps/validations"


def exchanges(api: PortalApi) -> int:
    count: int = api.admin("stats")["routes"].get(ROUTE, {}).get("requests", 0)
    return count


def test_locked_keyring_after_the_exchange_then_retry(pk: Any, auth: Any, api: PortalApi, keyring: Keyring) -> None:
    email = new_email("totp-retry")
    user = end_user_of(api, email, totp_required=True)
    result = auth.handle_redirect(magic_link(pk, auth, api, email))
    assert isinstance(result, pk.TotpRequired)
    code = api.admin(f"totp?endUserId={user['endUserId']}")["code"]
    before = exchanges(api)
    # The answer is held 3 s; the keyring is locked meanwhile (after the library read it), and its
    # unlock prompt is never answered, so the write after the exchange fails.
    api.admin("faults", {"route": ROUTE, "delayMs": 3000, "count": 1})
    outcome: Dict[str, Any] = {}

    def verify() -> None:
        try:
            outcome["session"] = auth.verify_totp(code, result.user_jwt)
        except Exception as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error

    worker = threading.Thread(target=verify)
    worker.start()
    # A count-1 fault leaves the list when its request arrives (before the delay).
    wait_until(lambda: not [f for f in api.admin("faults")["faults"] if f["route"] == ROUTE],
               what="the TOTP request to reach the fake API")
    keyring.lock()
    worker.join(30)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), pk.SessionStorageFailure), outcome
    assert exchanges(api) == before + 1
    keyring.unlock()
    assert auth.restore_session() is None
    # The end user types the code shown now (here: any other code).
    with auth.verify_totp("000000" if code != "000000" else "111111", result.user_jwt) as session:
        assert session.end_user_id == user["endUserId"]
    assert exchanges(api) == before + 1  # the retry wrote the remembered session
    restored = auth.restore_session()
    assert restored is not None and restored.end_user_id == user["endUserId"]
    restored.close()
    result.user_jwt.wipe()
