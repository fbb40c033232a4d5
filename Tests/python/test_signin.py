"""Sign-in through the portal_keyring package against the loopback Portal API and the real
keyring: methods, magic link, Google/Apple URLs, redirects (signed in, TOTP required, not
handled, unsolicited, another end user), TOTP verification, and the api_host check."""

from __future__ import annotations

import itertools
import os
import urllib.parse
from typing import Any, Callable, Dict, List

import pytest

from conftest import PortalApi

REDIRECT = "py-test://portal/redirect"
_emails = itertools.count(1)


def new_email(tag: str) -> str:
    return f"py-{tag}-{os.getpid()}-{next(_emails)}@example.com"


def magic_link(pk: Any, auth: Any, api: PortalApi, email: str) -> str:
    """Sends a magic link through the library and returns the link the fake API "emailed"."""
    auth.send_magic_link(email)
    links = [entry for entry in api.admin("magic-links")["links"] if entry["email"] == email.lower()]
    assert links, f"no magic link recorded for {email}"
    link: str = links[-1]["link"]
    assert link.startswith(REDIRECT + "?"), link
    return link


def end_user_of(api: PortalApi, email: str, totp_required: bool = False) -> Dict[str, Any]:
    user: Dict[str, Any] = api.admin("end-users", {"email": email, "totpRequired": totp_required})
    return user


def test_get_methods(pk: Any, auth: Any) -> None:
    methods = auth.get_methods()
    assert isinstance(methods, pk.SignInMethods)
    assert "EMAIL_MAGIC_LINK" in methods.methods and all(m and "," not in m for m in methods.methods)
    assert isinstance(methods.auto_create_wallet, bool)


def test_magic_link_signs_in_and_persists(pk: Any, auth: Any, api: PortalApi, env_id: str) -> None:
    email = new_email("magic")
    user = end_user_of(api, email)
    result = auth.handle_redirect(magic_link(pk, auth, api, email))
    assert isinstance(result, pk.SignedIn)
    with result.session as session:
        assert session.end_user_id == user["endUserId"]
        assert session.is_valid
    # Persisted before handle_redirect returned: another handle restores it.
    with pk.PortalAuth(env_id, REDIRECT, api.host) as other:
        restored = other.restore_session()
        assert restored is not None and restored.end_user_id == user["endUserId"]
        restored.close()


def test_totp_required_then_verify(pk: Any, auth: Any, api: PortalApi) -> None:
    email = new_email("totp")
    user = end_user_of(api, email, totp_required=True)
    result = auth.handle_redirect(magic_link(pk, auth, api, email))
    assert isinstance(result, pk.TotpRequired)
    assert isinstance(result.user_jwt, pk.SecretToken) and len(result.user_jwt) > 20
    assert result.totp_link is not None and result.totp_link.startswith("otpauth://totp/")
    assert "<redacted>" in repr(result) and result.user_jwt.decode() not in repr(result)
    assert auth.restore_session() is None  # nothing persisted yet
    with pytest.raises(pk.AuthenticationFailed):
        auth.verify_totp("000000" if api.admin(f"totp?endUserId={user['endUserId']}")["code"] != "000000"
                         else "111111", result.user_jwt)
    code = api.admin(f"totp?endUserId={user['endUserId']}")["code"]
    with auth.verify_totp(code, result.user_jwt) as session:
        assert session.end_user_id == user["endUserId"]
    result.user_jwt.wipe()
    restored = auth.restore_session()
    assert restored is not None and restored.end_user_id == user["endUserId"]
    restored.close()


def test_enrolled_totp_user_gets_no_link(pk: Any, auth: Any, api: PortalApi) -> None:
    email = new_email("enrolled")
    user = end_user_of(api, email, totp_required=True)
    first = auth.handle_redirect(magic_link(pk, auth, api, email))
    auth.verify_totp(api.admin(f"totp?endUserId={user['endUserId']}")["code"], first.user_jwt).close()
    second = auth.handle_redirect(magic_link(pk, auth, api, email))
    assert isinstance(second, pk.TotpRequired) and second.totp_link is None


def test_other_urls_are_not_handled(pk: Any, auth: Any) -> None:
    assert auth.handle_redirect("https://example.com/somewhere?token=abc") is None
    assert auth.handle_redirect("other-app://portal/redirect?token=abc&authMethod=EMAIL_MAGIC_LINK") is None


def test_unsolicited_redirect_and_the_opt_out(pk: Any, auth: Any, api: PortalApi) -> None:
    email = new_email("unsolicited")
    user = end_user_of(api, email)
    grant = api.admin("grants", {"kind": "magic_link", "email": email, "redirectUrl": REDIRECT})
    url = grant["redirectUrl"]
    with pytest.raises(pk.UnsolicitedRedirect) as caught:
        auth.handle_redirect(url)
    assert caught.value.status == pk.Status.UNSOLICITED_REDIRECT and caught.value.message
    assert auth.restore_session() is None
    result = auth.handle_redirect(url, allow_unsolicited=True)
    assert isinstance(result, pk.SignedIn) and result.session.end_user_id == user["endUserId"]
    result.session.close()


def test_different_end_user_needs_confirmation(pk: Any, auth: Any, api: PortalApi) -> None:
    auth.persist_session("someone-else", api.issue("someone-else")).close()
    email = new_email("replace")
    user = end_user_of(api, email)
    url = magic_link(pk, auth, api, email)
    with pytest.raises(pk.DifferentEndUser):
        auth.handle_redirect(url)
    kept = auth.restore_session()
    assert kept is not None and kept.end_user_id == "someone-else"
    kept.close()
    result = auth.handle_redirect(url, replace_end_user=True)
    assert isinstance(result, pk.SignedIn) and result.session.end_user_id == user["endUserId"]
    result.session.close()


def test_error_redirect_is_authentication_failed(pk: Any, auth: Any) -> None:
    with pytest.raises(pk.AuthenticationFailed) as caught:
        auth.handle_redirect(REDIRECT + "?error=access_denied&authMethod=EMAIL_MAGIC_LINK")
    assert "access_denied" in caught.value.message


def test_login_with_google_and_apple(pk: Any, auth: Any, api: PortalApi) -> None:
    for login, provider in ((auth.login_with_google, "google"), (auth.login_with_apple, "apple")):
        url = login()
        assert isinstance(url, str)
        parsed = urllib.parse.urlsplit(url)
        assert parsed.scheme in ("http", "https") and parsed.netloc, url
        assert provider in url.lower(), url


def test_invalid_arguments_are_value_errors(pk: Any, auth: Any) -> None:
    calls: List[Callable[[], Any]] = [lambda: auth.send_magic_link(""), lambda: auth.verify_totp("123456", ""),
                                      lambda: auth.handle_redirect("a\0b")]
    for call in calls:
        with pytest.raises(pk.InvalidArgument) as caught:
            call()
        error: Any = caught.value
        assert error.status == pk.Status.INVALID_ARGUMENT and isinstance(error, ValueError)


@pytest.mark.parametrize("host", ["https://api.portalhq.io", "api.portalhq.io/api/v3", "user@api.portalhq.io"])
def test_a_wrong_api_host_says_what_is_expected(pk: Any, env_id: str, host: str) -> None:
    with pytest.raises(pk.InvalidArgument) as caught:
        pk.PortalAuth(env_id, REDIRECT, host)
    assert "expected a host name or host:port" in caught.value.message and repr(host) in caught.value.message
    with pytest.raises(ValueError):
        pk.Portal.with_api_key("key", host)


def test_private_use_redirect_url_signs_in(pk: Any, env_id: str, api: PortalApi) -> None:
    """RFC 8252 §7.1 redirect URLs (a scheme, one slash, no authority) are accepted and matched
    with the scheme case-insensitive and the path case-sensitive (issue 15)."""
    private = "com.example.app:/oauth2redirect"
    with pk.PortalAuth(env_id, private, api.host) as auth:
        email = new_email("private-use")
        user = end_user_of(api, email)
        auth.send_magic_link(email)  # records the pending sign-in
        link = [e for e in api.admin("magic-links")["links"] if e["email"] == email.lower()][-1]["link"]
        assert link.startswith(private + "?token="), link
        query = link[len(private):]
        assert auth.handle_redirect("com.example.app:/OAUTH2REDIRECT" + query) is None
        assert auth.handle_redirect("com.example.app://oauth2redirect" + query) is None
        result = auth.handle_redirect("COM.Example.APP:/oauth2redirect" + query)
        assert isinstance(result, pk.SignedIn)
        with result.session as session:
            assert session.end_user_id == user["endUserId"]
        auth.clear_persisted_session()
    for bad in ("com.example.app:oauth2redirect", "javascript:/alert(1)", "myapp:/a b"):
        with pytest.raises(pk.InvalidArgument, match="redirect_url.*scheme:/path"):
            pk.PortalAuth(env_id, bad, api.host)


def test_rate_limited_carries_retry_after(pk: Any, auth: Any, api: PortalApi) -> None:
    """A 429's Retry-After is in the message and in ``RateLimited.retry_after`` (issue 15)."""
    api.admin("faults", {"route": "/api/v3/auth/magic-links", "status": 429, "count": 1, "retryAfterSeconds": 42})
    with pytest.raises(pk.RateLimited) as caught:
        auth.send_magic_link(new_email("rate-limited"))
    assert caught.value.retry_after == 42
    assert caught.value.message == "rate limited by the Portal API; retry after 42 s"
    api.admin("faults", {"route": "/api/v3/auth/magic-links", "status": 429, "count": 1,
                         "retryAfterSeconds": "Wed, 21 Oct 2015 07:28:00 GMT"})
    with pytest.raises(pk.RateLimited) as caught:
        auth.send_magic_link(new_email("rate-limited"))
    assert caught.value.retry_after is None  # a date already passed: no wait known
