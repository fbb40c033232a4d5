"""Sign-in through the portal_keyring package against the loopback Portal API and the real
keyring: methods, magic link, Google/Apple URLs, redirects (signed in, TOTP required, not
handled, unsolicited, another end user), TOTP verification, and the api_host check."""

from __future__ import annotations

import itertools
import os
import subprocess
import tempfile
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
    # The client Portal named, on the result and on the session handle.
    assert result.client_id == user["clientId"] and result.is_account_abstracted is False
    with result.session as session:
        assert session.end_user_id == user["endUserId"]
        assert (session.client_id, session.is_account_abstracted) == (user["clientId"], False)
        assert session.is_valid
    # Persisted before handle_redirect returned: another handle restores it.
    with pk.PortalAuth(env_id, REDIRECT, api.host) as other:
        restored = other.restore_session()
        assert restored is not None and restored.end_user_id == user["endUserId"]
        assert (restored.client_id, restored.is_account_abstracted) == (None, None)  # not a sign-in
        restored.close()


def test_totp_required_then_verify(pk: Any, auth: Any, api: PortalApi) -> None:
    email = new_email("totp")
    user = end_user_of(api, email, totp_required=True)
    result = auth.handle_redirect(magic_link(pk, auth, api, email))
    assert isinstance(result, pk.TotpRequired)
    assert isinstance(result.user_jwt, pk.SecretToken) and len(result.user_jwt) > 20
    assert result.totp_link is not None and result.totp_link.startswith("otpauth://totp/")
    # The end user (the JWT's claim: the TOTP step's answer names none) and the enrolment secret.
    assert result.end_user_id == user["endUserId"]
    assert result.totp_secret == api.admin(f"totp?endUserId={user['endUserId']}")["secret"]
    shown = repr(result)
    assert "<redacted>" in shown and result.user_jwt.decode() not in shown
    assert "otpauth" not in shown and result.totp_secret not in shown and user["endUserId"] in shown
    assert auth.restore_session() is None  # nothing persisted yet
    # A mistyped code (Portal's bare 401) is a rejected code, not a dead JWT: the same JWT works.
    with pytest.raises(pk.AuthenticationFailed):
        auth.verify_totp("000000" if api.admin(f"totp?endUserId={user['endUserId']}")["code"] != "000000"
                         else "111111", result.user_jwt)
    code = api.admin(f"totp?endUserId={user['endUserId']}")["code"]
    with auth.verify_totp(code, result.user_jwt) as session:
        assert session.end_user_id == user["endUserId"]
        assert (session.client_id, session.is_account_abstracted) == (user["clientId"], False)
    result.user_jwt.wipe()
    restored = auth.restore_session()
    assert restored is not None and restored.end_user_id == user["endUserId"]
    restored.close()


def test_jwt_without_end_user_sends_no_code(pk: Any, auth: Any, api: PortalApi) -> None:
    before = api.admin("stats")["routes"].get("/api/v3/auth/totps/validations", {}).get("requests", 0)
    with pytest.raises(pk.InvalidUserJwt):
        auth.verify_totp("123456", b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig")  # {"sub":"x"}
    assert api.admin("stats")["routes"].get("/api/v3/auth/totps/validations", {}).get("requests", 0) == before


def test_enrolled_totp_user_gets_no_link(pk: Any, auth: Any, api: PortalApi) -> None:
    email = new_email("enrolled")
    user = end_user_of(api, email, totp_required=True)
    first = auth.handle_redirect(magic_link(pk, auth, api, email))
    auth.verify_totp(api.admin(f"totp?endUserId={user['endUserId']}")["code"], first.user_jwt).close()
    second = auth.handle_redirect(magic_link(pk, auth, api, email))
    assert isinstance(second, pk.TotpRequired) and second.totp_link is None and second.totp_secret is None
    assert second.end_user_id == user["endUserId"]


def test_other_urls_are_not_handled(pk: Any, auth: Any) -> None:
    assert auth.handle_redirect("https://example.com/somewhere?token=abc") is None
    assert auth.handle_redirect("other-app://portal/redirect?token=abc&authMethod=EMAIL_MAGIC_LINK") is None
    # Ours, but without a grant or a known method, or over 8192 characters: not handled either,
    # as PortalSwift decides (no exception, nothing done).
    for url in ["", REDIRECT + "?authMethod=EMAIL_MAGIC_LINK", REDIRECT + "?token=&authMethod=EMAIL_MAGIC_LINK",
                REDIRECT + "?token=abc&authMethod=SMS", REDIRECT + "?token=abc&login_type=google",
                REDIRECT + "?error=x&pad=" + "é" * 8192]:
        assert auth.handle_redirect(url) is None, url[:80]


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
    with the scheme case-insensitive and the path case-sensitive."""
    private = "com.example.app:/oauth2redirect"
    magic = pk.MagicLinkConfig(from_email="login@example.com", template_id="tpl-py")
    with pk.PortalAuth(env_id, private, api.host, magic_link=magic) as auth:
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
    """A 429's Retry-After is in the message and in ``RateLimited.retry_after``."""
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


def test_totp_qr_code(pk: Any) -> None:
    """The enrolment link as a QR code: its modules read back with zbarimg (zbar-tools) give the
    link; a link without a valid secret has none."""
    link = "otpauth://totp/Portal:py?secret=JBSWY3DPEHPK3PXP&issuer=Portal"
    code = pk.totp_qr_code(link)
    assert code.size == len(code.modules) == len(code.modules[0]) >= 29
    assert not any(code.modules[0]) and code.is_dark(4, 4) and not code.is_dark(-1, 0)
    assert code.svg.startswith("<svg ") and "JBSWY3DP" not in repr(code)
    scale = 4
    side = code.size * scale
    pixels = bytes(0 if code.is_dark(x // scale, y // scale) else 255 for y in range(side) for x in range(side))
    with tempfile.NamedTemporaryFile(suffix=".pgm") as image:
        image.write(b"P5\n%d %d\n255\n" % (side, side) + pixels)
        image.flush()
        read = subprocess.run(["zbarimg", "--quiet", "--raw", image.name], capture_output=True, text=True, check=True)
    assert read.stdout.strip() == link
    step = pk.TotpRequired(pk.SecretToken(b"jwt"), link, "py")
    assert step.qr_code() == code
    for bad in [pk.TotpRequired(pk.SecretToken(b"jwt"), None, "py"), pk.TotpRequired(pk.SecretToken(b"jwt"), "otpauth://x", "")]:
        with pytest.raises(pk.TotpQrUnavailable):
            bad.qr_code()
