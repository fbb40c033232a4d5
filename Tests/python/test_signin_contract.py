"""The Portal backend's sign-in contract through the portal_keyring package, against the strict
loopback Portal API: ``magic_link=`` and ``is_account_abstracted=`` keyword arguments, and the
exceptions of the statuses that came with them (docs/sign-in.md#magic-links)."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from conftest import PortalApi

REDIRECT = "py-test://portal/redirect"


def last_link(api: PortalApi) -> Any:
    return api.admin("magic-links")["links"][-1]


@pytest.fixture
def fake(api: PortalApi) -> Iterator[PortalApi]:
    """The shared fake API, put back as it was after the test."""
    yield api
    api.admin("config", {"accountAbstractionAvailable": True, "allowedMethods": ["EMAIL_MAGIC_LINK", "GOOGLE", "APPLE"]})
    api.delete("faults")


def test_magic_link_needs_a_config(pk: Any, env_id: str, fake: PortalApi) -> None:
    with pk.PortalAuth(env_id, REDIRECT, fake.host) as auth:
        before = fake.admin("stats")["routes"].get("/api/v3/auth/magic-links", {}).get("requests", 0)
        with pytest.raises(pk.MagicLinkNotConfigured):
            auth.send_magic_link("nobody@example.com")
        after = fake.admin("stats")["routes"].get("/api/v3/auth/magic-links", {}).get("requests", 0)
        assert after == before
    assert pk.Status.MAGIC_LINK_NOT_CONFIGURED == 15


def test_magic_link_config_and_account_abstraction_are_sent(pk: Any, env_id: str, fake: PortalApi) -> None:
    magic = pk.MagicLinkConfig(from_email="login@example.com", template_id="tpl-py")
    email = f"py-contract-{os.getpid()}@example.com"
    for value in (None, True, False):
        with pk.PortalAuth(env_id, REDIRECT, fake.host, magic_link=magic, is_account_abstracted=value) as auth:
            auth.send_magic_link(email.upper())
        link = last_link(fake)
        assert (link["email"], link["fromEmail"], link["templateId"], link["isAccountAbstracted"]) == (
            email, "login@example.com", "tpl-py", value)
    with pytest.raises(pk.InvalidArgument, match="from_email"):
        pk.PortalAuth(env_id, REDIRECT, fake.host, magic_link=pk.MagicLinkConfig(from_email=" ", template_id="t"))
    with pytest.raises(TypeError):
        pk.PortalAuth(env_id, REDIRECT, fake.host, is_account_abstracted=1)
    with pytest.raises(TypeError):
        pk.PortalAuth(env_id, REDIRECT, fake.host, magic_link=("a@b.c", "t"))


def test_account_abstraction_unavailable(pk: Any, env_id: str, fake: PortalApi) -> None:
    fake.admin("config", {"accountAbstractionAvailable": False})
    magic = pk.MagicLinkConfig(from_email="login@example.com", template_id="tpl-py")
    with pk.PortalAuth(env_id, REDIRECT, fake.host, magic_link=magic, is_account_abstracted=True) as auth:
        with pytest.raises(pk.AccountAbstractionUnavailable) as caught:
            auth.send_magic_link("aa@example.com")
        assert caught.value.message == "Account abstraction is not enabled for this environment"
        with pytest.raises(pk.AccountAbstractionUnavailable):
            auth.login_with_apple()


def test_disabled_provider_server_error_and_refusal(pk: Any, auth: Any, fake: PortalApi) -> None:
    fake.admin("config", {"allowedMethods": ["EMAIL_MAGIC_LINK", "GOOGLE"]})
    with pytest.raises(pk.AuthMethodUnavailable, match="APPLE"):
        auth.login_with_apple()
    assert auth.login_with_google().startswith("http")
    fake.admin("faults", {"route": "/api/v3/auth/magic-links", "status": 502, "count": 1})
    with pytest.raises(pk.ServerError, match="502"):
        auth.send_magic_link("s@example.com")
    fake.admin("faults", {"route": "/api/v3/auth/methods", "status": 403, "count": 1})
    with pytest.raises(pk.RequestRefused, match="403"):
        auth.get_methods()
    fake.admin("faults", {"route": "/api/v3/auth/magic-links", "status": 429, "count": 1})
    with pytest.raises(pk.RateLimited) as caught:
        auth.send_magic_link("rl@example.com")
    assert caught.value.retry_after is None
    assert caught.value.message == "rate limited by the Portal API; retry later"
