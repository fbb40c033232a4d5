"""Tests for fake_portal_api.py: runs the server as a real subprocess and talks HTTP to it.

Run with:  python3 -m unittest discover -s Tests/portal-api -v
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "fake_portal_api.py")
ENV_ID = "env-test-1234"
ENV = "x-portal-auth-environment-id"
HOUR = 3600
DAY = 24 * HOUR


class ServerProcess:
    """The fake server in a subprocess on a free port."""

    def __init__(self, *extra_args):
        self.tmp = tempfile.TemporaryDirectory(prefix="fake-portal-test-")
        self.port_file = os.path.join(self.tmp.name, "port")
        self.stderr_path = os.path.join(self.tmp.name, "stderr.log")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--port", "0", "--port-file", self.port_file,
             "--auth-environment-id", ENV_ID, "--exit-with-parent", *extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr)
        self.base_url = self._read_first_line(10.0)
        parsed = urllib.parse.urlsplit(self.base_url)
        self.host, self.port = parsed.hostname, parsed.port

    def _read_first_line(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        buf = b""
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                self.stop()
                raise RuntimeError("fake server did not print its URL in time")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                self.stop()
                raise RuntimeError("fake server exited: " + self.stderr_text())
            buf += chunk
        sel.close()
        return buf.split(b"\n", 1)[0].decode().strip()

    def stderr_text(self):
        with open(self.stderr_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stdout.close()
        self._stderr.close()
        self.tmp.cleanup()


SERVER_PROC = None


def setUpModule():
    global SERVER_PROC
    SERVER_PROC = ServerProcess()


def tearDownModule():
    if SERVER_PROC is not None:
        SERVER_PROC.stop()


class Reply:
    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers
        self.raw = raw
        try:
            self.json = json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            self.json = None  # the HTML magic-link answer

    @property
    def data(self):
        return self.json["data"]


def totp_at(secret_b32, at, step=0):
    secret = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    counter = int(at // 30) + step
    mac = hmac.new(secret, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    return "%06d" % ((struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF) % 1000000)


def jwt_part(token, index):
    seg = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)))


class FakePortalTestCase(unittest.TestCase):
    server = None

    def setUp(self):
        self.server = SERVER_PROC
        self.admin("POST", "/_admin/reset")

    # ---- HTTP helpers ------------------------------------------------------------------------

    def connect(self):
        return http.client.HTTPConnection(self.server.host, self.server.port, timeout=15)

    def call(self, method, path, body=None, bearer=None, env=ENV_ID, headers=None, conn=None):
        own = conn is None
        conn = conn or self.connect()
        hdrs = {"Accept": "application/json"}
        if env is not None:
            hdrs[ENV] = env
        if bearer is not None:
            hdrs["Authorization"] = "Bearer " + bearer
        hdrs.update(headers or {})
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=payload, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            return Reply(resp.status, resp.headers, raw)
        finally:
            if own:
                conn.close()

    def admin(self, method, path, body=None, expect=200):
        reply = self.call(method, path, body=body, env=None)
        self.assertEqual(reply.status, expect, reply.raw)
        return reply.json.get("data") if reply.json else None

    def me(self, token, **kw):
        return self.call("GET", "/api/v3/clients/me", bearer=token, **kw)

    def new_session(self, **body):
        return self.admin("POST", "/_admin/sessions", body)

    def advance(self, seconds):
        return self.admin("POST", "/_admin/clock", {"advanceSeconds": seconds})

    def assert_401(self, reply):
        self.assertEqual(reply.status, 401, reply.raw)
        self.assertEqual(reply.json, {})

    def grant(self, **body):
        body.setdefault("kind", "magic_link")
        return self.admin("POST", "/_admin/grants", body)


class ClientsMeTests(FakePortalTestCase):
    def test_valid_cst_returns_client(self):
        s = self.new_session(endUserId="user-1", clientId="client-1")
        reply = self.me(s["token"])
        self.assertEqual(reply.status, 200)
        self.assertEqual(reply.headers["Content-Type"], "application/json; charset=utf-8")
        self.assertEqual(reply.data["id"], "client-1")
        self.assertEqual(reply.data["endUserId"], "user-1")
        self.assertIn("custodian", reply.data)

    def test_clients_me_does_not_need_environment_header(self):
        s = self.new_session()
        self.assertEqual(self.me(s["token"], env=None).status, 200)

    def test_missing_or_malformed_bearer_is_401(self):
        s = self.new_session()
        self.assert_401(self.call("GET", "/api/v3/clients/me"))
        self.assert_401(self.me("not-a-token"))
        self.assert_401(self.call("GET", "/api/v3/clients/me",
                                  headers={"Authorization": "Basic " + s["token"]}))
        self.assert_401(self.call("GET", "/api/v3/clients/me", headers={"Authorization": "Bearer"}))

    def test_revoked_cst_is_401(self):
        s = self.new_session()
        other = self.new_session()
        self.assertEqual(self.me(s["token"]).status, 200)
        self.assertEqual(self.admin("POST", "/_admin/revoke", {"token": s["token"]})["revoked"], 1)
        self.assert_401(self.me(s["token"]))
        self.assertEqual(self.me(other["token"]).status, 200)
        self.admin("POST", "/_admin/revoke", {"sessionId": other["sessionId"]})
        self.assert_401(self.me(other["token"]))
        self.admin("POST", "/_admin/revoke", {"token": "unknown"}, expect=404)

    def test_custom_token_and_api_key_kind(self):
        s = self.new_session(token="custom.Token-~_+/=!value")
        self.assertEqual(self.me("custom.Token-~_+/=!value").status, 200)
        self.assertEqual(s["token"], "custom.Token-~_+/=!value")
        key = self.new_session(kind="apiKey")
        self.advance(30 * DAY)
        self.assertEqual(self.me(key["token"]).status, 200)
        self.assert_401(self.me(s["token"]))
        self.admin("POST", "/_admin/sessions", {"token": "has space"}, expect=400)


class LifetimeTests(FakePortalTestCase):
    def test_idle_expiry_after_24_hours(self):
        s = self.new_session()
        self.advance(DAY)
        self.assert_401(self.me(s["token"]))
        # A rejected request does not revive the token.
        self.advance(-DAY)
        self.advance(DAY + 5)
        self.assert_401(self.me(s["token"]))

    def test_not_expired_just_before_24_hours(self):
        s = self.new_session()
        self.advance(DAY - 2)
        self.assertEqual(self.me(s["token"]).status, 200)

    def test_sliding_expiry_extends(self):
        s = self.new_session()
        self.advance(23 * HOUR)
        self.assertEqual(self.me(s["token"]).status, 200)
        self.advance(23 * HOUR)  # 46 h after issue, 23 h after the last request
        self.assertEqual(self.me(s["token"]).status, 200)
        self.advance(23 * HOUR)
        self.assertEqual(self.me(s["token"]).status, 200)
        self.advance(DAY)  # 24 h idle
        self.assert_401(self.me(s["token"]))

    def test_seven_day_cap(self):
        s = self.new_session()
        issued = s["issuedAt"]
        self.assertAlmostEqual(s["maxExpiresAt"] - issued, 7 * DAY, places=3)
        elapsed = 0
        while elapsed + 20 * HOUR < 7 * DAY - 10:
            self.advance(20 * HOUR)
            elapsed += 20 * HOUR
            self.assertEqual(self.me(s["token"]).status, 200, "at %.1f h" % (elapsed / HOUR))
        self.advance((7 * DAY - 10) - elapsed)
        self.assertEqual(self.me(s["token"]).status, 200)
        sessions = self.admin("GET", "/_admin/sessions")["sessions"]
        self.assertAlmostEqual(sessions[0]["expiresAt"], issued + 7 * DAY, places=3)
        self.advance(10)
        self.assert_401(self.me(s["token"]))
        sessions = self.admin("GET", "/_admin/sessions")["sessions"]
        self.assertEqual(sessions[0]["status"], "expired")

    def test_clock_admin(self):
        c0 = self.admin("GET", "/_admin/clock")
        self.assertEqual(c0["offsetSeconds"], 0)
        c1 = self.admin("POST", "/_admin/clock", {"offsetSeconds": 100})
        self.assertEqual(c1["offsetSeconds"], 100)
        c2 = self.advance(50)
        self.assertEqual(c2["offsetSeconds"], 150)
        self.assertGreater(c2["now"], time.time() + 140)
        self.admin("POST", "/_admin/clock", {}, expect=400)


class FaultTests(FakePortalTestCase):
    def test_status_fault_count(self):
        s = self.new_session()
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/clients/me", "status": 500, "count": 2})
        for _ in range(2):
            reply = self.me(s["token"])
            self.assertEqual(reply.status, 500)
            self.assertEqual(reply.json["code"], "INJECTED_FAULT")
        self.assertEqual(self.me(s["token"]).status, 200)

    def test_wildcard_fault_until_cleared(self):
        s = self.new_session()
        self.admin("POST", "/_admin/faults", {"route": "*", "status": 503})
        for _ in range(3):
            self.assertEqual(self.me(s["token"]).status, 503)
        self.assertEqual(self.call("GET", "/api/v3/auth/methods").status, 503)
        # The admin API is never faulted.
        self.assertEqual(len(self.admin("GET", "/_admin/faults")["faults"]), 1)
        self.admin("DELETE", "/_admin/faults")
        self.assertEqual(self.me(s["token"]).status, 200)

    def test_injected_401_has_empty_body(self):
        s = self.new_session()
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/clients/me", "status": 401, "count": 1})
        self.assert_401(self.me(s["token"]))
        self.assertEqual(self.me(s["token"]).status, 200)

    def test_delay_fault(self):
        s = self.new_session()
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/clients/me", "delayMs": 400, "count": 1})
        t0 = time.monotonic()
        self.assertEqual(self.me(s["token"]).status, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.38)
        t0 = time.monotonic()
        self.assertEqual(self.me(s["token"]).status, 200)
        self.assertLess(time.monotonic() - t0, 0.3)

    def test_connection_reset_fault(self):
        s = self.new_session()
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/clients/me", "reset": True, "count": 1})
        with self.assertRaises((ConnectionError, http.client.HTTPException, OSError)):
            self.me(s["token"])
        self.assertEqual(self.me(s["token"]).status, 200)
        recent = self.admin("GET", "/_admin/stats")["recent"]
        self.assertIsNone(recent[0]["status"])
        self.assertEqual(recent[0]["fault"], "reset")
        self.assertEqual(recent[1]["status"], 200)

    def test_reset_after_processing_consumes_grant(self):
        g = self.grant()
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/auth/magic-links/validations",
                                              "reset": True, "when": "after", "count": 1})
        with self.assertRaises((ConnectionError, http.client.HTTPException, OSError)):
            self.call("POST", "/api/v3/auth/magic-links/validations", {"token": g["token"]})
        # The grant was used before the response was lost.
        self.assert_401(self.call("POST", "/api/v3/auth/magic-links/validations", {"token": g["token"]}))

    def test_fault_validation(self):
        self.admin("POST", "/_admin/faults", {"route": "*"}, expect=400)
        self.admin("POST", "/_admin/faults", {"route": "*", "status": 99}, expect=400)


class GrantTests(FakePortalTestCase):
    def exchange(self, path, token):
        return self.call("POST", path, {"token": token})

    def test_admin_grant_is_single_use(self):
        g = self.grant(endUserId="user-7")
        self.assertEqual(g["query"], "token=%s&authMethod=EMAIL_MAGIC_LINK" % g["token"])
        first = self.exchange("/api/v3/auth/magic-links/validations", g["token"])
        self.assertEqual(first.status, 200, first.raw)
        self.assertEqual(first.data["endUserId"], "user-7")
        self.assertTrue(first.data["clientId"])
        cst = first.data["clientSessionToken"]
        self.assertEqual(self.me(cst).status, 200)
        self.assert_401(self.exchange("/api/v3/auth/magic-links/validations", g["token"]))
        self.assert_401(self.exchange("/api/v3/auth/magic-links/validations", "bogus"))

    def test_wrong_kind_and_expired_grants_are_rejected(self):
        oauth = self.grant(kind="oauth", provider="APPLE")
        self.assertTrue(oauth["query"].endswith("&login_type=APPLE"))
        self.assert_401(self.exchange("/api/v3/auth/magic-links/validations", oauth["token"]))
        self.assertEqual(self.exchange("/api/v3/auth/oauth/tokens", oauth["token"]).status, 200)
        old = self.grant()
        self.advance(901)
        self.assert_401(self.exchange("/api/v3/auth/magic-links/validations", old["token"]))
        self.assertEqual(self.call("POST", "/api/v3/auth/oauth/tokens", {}).status, 400)

    def test_magic_link_flow(self):
        reply = self.call("POST", "/api/v3/auth/magic-links",
                          {"email": "ada@example.com", "redirectUrl": "myapp://auth?x=1",
                           "fromEmail": "a@b.c", "templateId": "t"})
        self.assertEqual(reply.status, 200)
        self.assertEqual(reply.json, {"data": {}})
        links = self.admin("GET", "/_admin/magic-links")["links"]
        self.assertEqual(len(links), 1)
        link = urllib.parse.urlsplit(links[0]["link"])
        self.assertEqual(link.scheme + "://" + link.netloc + link.path, "myapp://auth")
        query = urllib.parse.parse_qs(link.query)
        self.assertEqual(query["x"], ["1"])
        self.assertEqual(query["authMethod"], ["EMAIL_MAGIC_LINK"])
        done = self.exchange("/api/v3/auth/magic-links/validations", query["token"][0])
        self.assertEqual(done.status, 200)
        self.assertEqual(done.data["endUserId"], links[0]["endUserId"])
        # Same email, same end user.
        self.call("POST", "/api/v3/auth/magic-links",
                  {"email": "ada@example.com", "redirectUrl": "myapp://auth", "fromEmail": "login@example.com", "templateId": "tpl-1"})
        self.assertEqual(self.admin("GET", "/_admin/magic-links")["links"][1]["endUserId"],
                         links[0]["endUserId"])
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", {"email": "a@b.c"}).status, 400)

    def test_oauth_flow(self):
        reply = self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=" +
                          urllib.parse.quote("myapp://oauth", safe=""))
        self.assertEqual(reply.status, 200)
        self.assertEqual(set(reply.data), {"google", "apple"})
        url = urllib.parse.urlsplit(reply.data["google"])
        self.assertEqual((url.hostname, url.port), (self.server.host, self.server.port))
        conn = self.connect()
        conn.request("GET", url.path + "?" + url.query)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        self.assertEqual(resp.status, 302)
        location = urllib.parse.urlsplit(resp.headers["Location"])
        query = urllib.parse.parse_qs(location.query)
        self.assertEqual(query["login_type"], ["GOOGLE"])
        done = self.exchange("/api/v3/auth/oauth/tokens", query["token"][0])
        self.assertEqual(done.status, 200)
        self.assertEqual(self.me(done.data["clientSessionToken"]).status, 200)
        # The state was single-use, for both providers.
        apple = urllib.parse.urlsplit(reply.data["apple"])
        state = urllib.parse.parse_qs(apple.query)["state"][0]
        self.admin("POST", "/_admin/grants", {"kind": "oauth", "state": state}, expect=400)

    def test_oauth_urls_refuse_other_parameters_and_omit_disabled_providers(self):
        # The SDKs send redirectUrl and, optionally, isAccountAbstracted: nothing else.
        refused = self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x%3A%2F%2Fy&provider=APPLE")
        self.assertEqual(refused.status, 400)
        self.assertEqual(refused.json["error"], "Unknown query parameter: provider")
        self.assertEqual(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x&isAccountAbstracted=1").status, 400)
        both = self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x&isAccountAbstracted=false")
        self.assertEqual(set(both.data), {"google", "apple"})
        # A provider that is not enabled is absent, with 200; none enabled is an empty object.
        self.admin("POST", "/_admin/config", {"allowedMethods": ["EMAIL_MAGIC_LINK", "APPLE"]})
        self.assertEqual(set(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x").data), {"apple"})
        self.admin("POST", "/_admin/config", {"allowedMethods": ["EMAIL_MAGIC_LINK"]})
        none = self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x")
        self.assertEqual((none.status, none.json), (200, {"data": {}}))
        methods = self.call("GET", "/api/v3/auth/methods")
        self.assertEqual(methods.data["allowedMethods"], ["EMAIL_MAGIC_LINK"])

    def test_methods_default_and_config(self):
        reply = self.call("GET", "/api/v3/auth/methods")
        self.assertEqual(reply.json, {"data": {"allowedMethods": ["EMAIL_MAGIC_LINK", "GOOGLE", "APPLE"],
                                               "allowedAuthMethods": ["EMAIL_MAGIC_LINK", "GOOGLE", "APPLE"],
                                               "autoCreateWallet": True}})
        self.admin("POST", "/_admin/config", {"autoCreateWallet": False})
        self.assertFalse(self.call("GET", "/api/v3/auth/methods").data["autoCreateWallet"])

    def test_redirect_allow_list(self):
        self.admin("POST", "/_admin/config", {"allowedRedirectUrls": ["myapp://ok"]})
        self.assert_401(self.call("POST", "/api/v3/auth/magic-links",
                                  {"email": "a@b.c", "redirectUrl": "myapp://evil", "fromEmail": "login@example.com", "templateId": "tpl-1"}))
        # Byte-exact: no trailing-slash, case or whitespace normalisation.
        for near in ("myapp://ok/", "MYAPP://ok", "myapp://ok "):
            self.assert_401(self.call("POST", "/api/v3/auth/magic-links",
                                      {"email": "a@b.c", "redirectUrl": near, "fromEmail": "login@example.com", "templateId": "tpl-1"}))
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links",
                                   {"email": "a@b.c", "redirectUrl": "myapp://ok", "fromEmail": "login@example.com", "templateId": "tpl-1"}).status, 200)
        # On the OAuth query, the value as sent must be the SDKs' form encoding.
        self.assertEqual(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=myapp%3A%2F%2Fok").status, 200)
        self.assert_401(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=myapp://ok"))
        self.assert_401(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=myapp%3a%2f%2fok"))

    def test_magic_links_require_sender_and_template(self):
        base = {"email": "a@b.c", "redirectUrl": "a://b"}
        for missing, body in (("fromEmail", dict(base, templateId="t")),
                              ("templateId", dict(base, fromEmail="f@b.c")),
                              ("fromEmail", dict(base, fromEmail=" ", templateId="t"))):
            reply = self.call("POST", "/api/v3/auth/magic-links", body)
            self.assertEqual((reply.status, reply.json["error"]), (400, missing + " is required"))
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links",
                                   dict(base, email="A@b.c", fromEmail="f", templateId="t")).status, 400)
        self.assertEqual(self.admin("GET", "/_admin/magic-links")["links"], [])
        ok = self.call("POST", "/api/v3/auth/magic-links", dict(base, fromEmail="f@b.c", templateId="t"))
        self.assertEqual(ok.status, 200)
        sent = self.admin("GET", "/_admin/magic-links")["links"][0]
        self.assertEqual((sent["fromEmail"], sent["templateId"], sent["isAccountAbstracted"]), ("f@b.c", "t", None))

    def test_magic_link_answer_bodies(self):
        body = {"email": "a@b.c", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"}
        for kind, raw in (("empty", b""), ("object", b"{}"), ("data", b'{"data":{}}')):
            self.admin("POST", "/_admin/config", {"magicLinkResponse": kind})
            reply = self.call("POST", "/api/v3/auth/magic-links", body)
            self.assertEqual((reply.status, reply.raw), (200, raw))
        self.admin("POST", "/_admin/config", {"magicLinkResponse": "html"})
        self.assertTrue(self.call("POST", "/api/v3/auth/magic-links", body).raw.startswith(b"<!doctype html>"))
        self.admin("POST", "/_admin/config", {"magicLinkResponse": "xml"}, expect=400)

    def test_account_abstraction_unavailable(self):
        body = {"email": "a@b.c", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"}
        self.admin("POST", "/_admin/config", {"accountAbstractionAvailable": False})
        refused = self.call("POST", "/api/v3/auth/magic-links", dict(body, isAccountAbstracted=True))
        self.assertEqual(refused.status, 400)
        self.assertIn("error", refused.json)
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", dict(body, isAccountAbstracted=False)).status, 200)
        self.assertEqual(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x&isAccountAbstracted=true").status, 400)
        self.assertEqual(self.call("GET", "/api/v3/auth/oauth/urls?redirectUrl=x&isAccountAbstracted=false").status, 200)

    def test_stats_record_the_trace_id(self):
        self.call("GET", "/api/v3/auth/methods", headers={"X-Portal-Trace-Id": "3f1c2b9e-0d4a-4e8b-9c71-5a2e6f0b1d33"})
        self.call("GET", "/api/v3/auth/methods")
        recent = self.admin("GET", "/_admin/stats?last=2")["recent"]
        self.assertEqual([r["traceId"] for r in recent], ["3f1c2b9e-0d4a-4e8b-9c71-5a2e6f0b1d33", None])

    def test_error_redirect(self):
        g = self.grant(kind="oauth", provider="GOOGLE", error="access_denied", redirectUrl="myapp://cb")
        self.assertIsNone(g["token"])
        self.assertEqual(g["redirectUrl"], "myapp://cb?error=access_denied&login_type=GOOGLE")


class TotpTests(FakePortalTestCase):
    def start_totp(self, **grant_body):
        g = self.grant(totpRequired=True, **grant_body)
        reply = self.call("POST", "/api/v3/auth/magic-links/validations", {"token": g["token"]})
        self.assertEqual(reply.status, 200, reply.raw)
        # The TOTP step names no end user (config totpStepEndUserId adds it): the JWT does.
        self.assertNotIn("endUserId", reply.data)
        self.assertEqual(jwt_part(reply.data["userJwt"], 1)["endUserId"], g["endUserId"])
        return dict(reply.data, endUserId=g["endUserId"])

    def test_totp_step_end_user_only_when_configured(self):
        self.admin("POST", "/_admin/config", {"totpStepEndUserId": True})
        g = self.grant(totpRequired=True, endUserId="named-user")
        reply = self.call("POST", "/api/v3/auth/magic-links/validations", {"token": g["token"]})
        self.assertEqual(reply.data["endUserId"], "named-user")
        self.assertIn("userJwt", reply.data)

    def test_wrong_code_is_a_bare_401_and_the_jwt_stays_usable(self):
        data = self.start_totp(endUserId="typo-user")
        secret = urllib.parse.parse_qs(urllib.parse.urlsplit(data["totpLink"]).query)["secret"][0]
        now = self.admin("GET", "/_admin/clock")["now"]
        valid = {totp_at(secret, now, step) for step in (-1, 0, 1)}
        wrong = next(c for c in ("000000", "111111", "222222", "333333") if c not in valid)
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": wrong}, bearer=data["userJwt"]))
        # Compared exactly as sent: a padded valid code is a wrong code, and a number is no code.
        code = self.admin("GET", "/_admin/totp?endUserId=typo-user")["code"]
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": " " + code},
                                  bearer=data["userJwt"]))
        self.assertEqual(self.call("POST", "/api/v3/auth/totps/validations", {"code": int(code) + 1000000},
                                   bearer=data["userJwt"]).status, 400)
        ok = self.call("POST", "/api/v3/auth/totps/validations", {"code": code}, bearer=data["userJwt"])
        self.assertEqual(ok.status, 200, ok.raw)
        self.assertNotIn("endUserId", ok.data)

    def test_totp_path(self):
        data = self.start_totp(endUserId="totp-user")
        self.assertNotIn("clientSessionToken", data)
        jwt = data["userJwt"]
        self.assertEqual(jwt_part(jwt, 0)["alg"], "HS256")
        claims = jwt_part(jwt, 1)
        self.assertEqual(claims["endUserId"], "totp-user")
        self.assertEqual(claims["sub"], "totp-user")
        self.assertGreater(claims["exp"], claims["iat"])
        link = urllib.parse.urlsplit(data["totpLink"])
        self.assertEqual(link.scheme, "otpauth")
        secret = urllib.parse.parse_qs(link.query)["secret"][0]

        now = self.admin("GET", "/_admin/clock")["now"]
        valid = {totp_at(secret, now, step) for step in (-1, 0, 1)}
        wrong = next(c for c in ("000000", "111111", "222222", "333333") if c not in valid)
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": wrong}, bearer=jwt))
        self.assertEqual(self.call("POST", "/api/v3/auth/totps/validations", {}, bearer=jwt).status, 400)

        self.assertEqual(self.admin("GET", "/_admin/totp?endUserId=totp-user")["secret"], secret)
        now = self.admin("GET", "/_admin/clock")["now"]
        ok = self.call("POST", "/api/v3/auth/totps/validations", {"code": totp_at(secret, now)}, bearer=jwt)
        self.assertEqual(ok.status, 200, ok.raw)
        self.assertEqual(set(ok.data), {"clientId", "clientSessionToken", "isAccountAbstracted"})
        self.assertEqual(self.me(ok.data["clientSessionToken"]).status, 200)
        # The JWT is single-use.
        code = self.admin("GET", "/_admin/totp?endUserId=totp-user")["code"]
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": code}, bearer=jwt))
        # Enrolled: the next TOTP sign-in carries no totpLink.
        again = self.start_totp(endUserId="totp-user")
        self.assertIn("userJwt", again)
        self.assertNotIn("totpLink", again)

    def test_totp_rejects_bad_and_expired_jwt(self):
        data = self.start_totp()
        code = self.admin("GET", "/_admin/totp?endUserId=" + data["endUserId"])["code"]
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": code}))
        tampered = data["userJwt"][:-2] + ("AA" if data["userJwt"][-2:] != "AA" else "BB")
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": code}, bearer=tampered))
        self.advance(601)
        code = self.admin("GET", "/_admin/totp?endUserId=" + data["endUserId"])["code"]
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": code},
                                  bearer=data["userJwt"]))

    def test_totp_attempts_exhausted(self):
        data = self.start_totp()
        for _ in range(5):
            self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": "abc"},
                                      bearer=data["userJwt"]))
        code = self.admin("GET", "/_admin/totp?endUserId=" + data["endUserId"])["code"]
        self.assert_401(self.call("POST", "/api/v3/auth/totps/validations", {"code": code},
                                  bearer=data["userJwt"]))

    def test_end_user_totp_setting_applies_to_magic_links(self):
        self.admin("POST", "/_admin/end-users", {"email": "t@example.com", "totpRequired": True})
        self.call("POST", "/api/v3/auth/magic-links", {"email": "t@example.com", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"})
        link = self.admin("GET", "/_admin/magic-links")["links"][0]["link"]
        token = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["token"][0]
        reply = self.call("POST", "/api/v3/auth/magic-links/validations", {"token": token})
        self.assertIn("userJwt", reply.data)
        self.admin("POST", "/_admin/config", {"staticTotpCode": "424242"})
        ok = self.call("POST", "/api/v3/auth/totps/validations", {"code": "424242"},
                       bearer=reply.data["userJwt"])
        self.assertEqual(ok.status, 200)


class RateLimitTests(FakePortalTestCase):
    def test_429(self):
        self.admin("POST", "/_admin/rate-limits",
                   {"route": "/api/v3/auth/magic-links", "limit": 2, "windowSeconds": 60})
        body = {"email": "r@example.com", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"}
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).status, 200)
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).status, 200)
        limited = self.call("POST", "/api/v3/auth/magic-links", body)
        self.assertEqual(limited.status, 429)
        self.assertEqual(limited.json["code"], "RATE_LIMITED")
        # Like the backend: no Retry-After unless the limit was installed with one.
        self.assertNotIn("Retry-After", limited.headers)
        # Other routes are not limited.
        self.assertEqual(self.call("GET", "/api/v3/auth/methods").status, 200)
        self.advance(61)
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).status, 200)
        self.admin("DELETE", "/_admin/rate-limits")
        for _ in range(3):
            self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).status, 200)

    def test_injected_429(self):
        body = {"email": "a@b.c", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"}
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/auth/magic-links", "status": 429, "count": 1})
        reply = self.call("POST", "/api/v3/auth/magic-links", body)
        self.assertEqual(reply.status, 429)
        self.assertNotIn("Retry-After", reply.headers)
        self.admin("POST", "/_admin/faults", {"route": "/api/v3/auth/magic-links", "status": 429, "count": 1,
                                              "retryAfterSeconds": 9})
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).headers["Retry-After"], "9")

    def test_explicit_retry_after_on_a_rate_limit(self):
        self.admin("POST", "/_admin/rate-limits", {"route": "/api/v3/auth/magic-links", "limit": 1,
                                                   "windowSeconds": 60, "retryAfterSeconds": 7})
        body = {"email": "a@b.c", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"}
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).status, 200)
        self.assertEqual(self.call("POST", "/api/v3/auth/magic-links", body).headers["Retry-After"], "7")


class EnvironmentHeaderTests(FakePortalTestCase):
    AUTH_CALLS = [
        ("GET", "/api/v3/auth/methods", None),
        ("POST", "/api/v3/auth/magic-links", {"email": "a@b.c", "redirectUrl": "a://b", "fromEmail": "login@example.com", "templateId": "tpl-1"}),
        ("POST", "/api/v3/auth/magic-links/validations", {"token": "x"}),
        ("GET", "/api/v3/auth/oauth/urls?redirectUrl=a", None),
        ("POST", "/api/v3/auth/oauth/tokens", {"token": "x"}),
        ("POST", "/api/v3/auth/totps/validations", {"code": "123456"}),
    ]

    def test_missing_header_is_400(self):
        for method, path, body in self.AUTH_CALLS:
            with self.subTest(path=path):
                reply = self.call(method, path, body, env=None)
                self.assertEqual(reply.status, 400)
                self.assertEqual(reply.json["code"], "MISSING_AUTH_ENVIRONMENT_ID")
                self.assertEqual(self.call(method, path, body, env="  ").status, 400)

    def test_other_environment_is_401(self):
        for method, path, body in self.AUTH_CALLS:
            with self.subTest(path=path):
                self.assert_401(self.call(method, path, body, env="env-other"))

    def test_optional_requirement_on_clients_me(self):
        s = self.new_session()
        self.admin("POST", "/_admin/config", {"requireAuthEnvironmentOnClientsMe": True})
        self.assertEqual(self.me(s["token"], env=None).status, 400)
        self.assert_401(self.me(s["token"], env="env-other"))
        self.assertEqual(self.me(s["token"]).status, 200)


class StatsAndProtocolTests(FakePortalTestCase):
    def test_stats_never_contain_tokens(self):
        secrets_seen = []
        s = self.new_session()
        secrets_seen.append(s["token"])
        self.me(s["token"])
        self.me("some-unknown-token-value")
        secrets_seen.append("some-unknown-token-value")
        g = self.grant(totpRequired=True)
        secrets_seen.append(g["token"])
        data = self.call("POST", "/api/v3/auth/magic-links/validations", {"token": g["token"]}).data
        secrets_seen.append(data["userJwt"])
        code = self.admin("GET", "/_admin/totp?endUserId=" + g["endUserId"])["code"]
        done = self.call("POST", "/api/v3/auth/totps/validations", {"code": code}, bearer=data["userJwt"])
        secrets_seen.append(done.data["clientSessionToken"])
        self.me(done.data["clientSessionToken"])
        self.call("GET", "/api/v3/clients/me?token=" + s["token"], bearer=s["token"])

        stats_reply = self.call("GET", "/_admin/stats", env=None)
        raw = stats_reply.raw.decode()
        for secret in secrets_seen:
            self.assertNotIn(secret, raw)
        stats = stats_reply.data
        me = stats["routes"]["/api/v3/clients/me"]
        self.assertEqual(me["requests"], 4)
        self.assertEqual(me["withBearer"], 4)
        self.assertEqual(me["statuses"], {"200": 3, "401": 1})
        totp = stats["routes"]["/api/v3/auth/totps/validations"]
        self.assertEqual((totp["requests"], totp["withBearer"]), (1, 1))
        grants = stats["routes"]["/api/v3/auth/magic-links/validations"]
        self.assertEqual((grants["requests"], grants["withBearer"]), (1, 0))
        self.assertEqual(stats["totalRequests"], 6)
        last = stats["recent"][-1]
        self.assertEqual(last["path"], "/api/v3/clients/me")
        self.assertTrue(last["authorization"])
        self.assertEqual(last["sessionId"], s["sessionId"])
        self.assertEqual(len(self.admin("GET", "/_admin/stats?last=2")["recent"]), 2)

        # Nor does the request log on stderr.
        deadline = time.monotonic() + 5
        while "GET /_admin/stats" not in self.server.stderr_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = self.server.stderr_text()
        self.assertIn("GET /api/v3/clients/me 200", log)
        for secret in secrets_seen:
            self.assertNotIn(secret, log)
        self.assertNotIn("token=", log)

    def test_keep_alive(self):
        s = self.new_session()
        conn = self.connect()
        try:
            self.assertEqual(self.me(s["token"], conn=conn).status, 200)
            sock = conn.sock
            self.assertIsNotNone(sock)
            local = sock.getsockname()
            self.assertEqual(self.call("GET", "/api/v3/auth/methods", conn=conn).status, 200)
            self.assert_401(self.me("nope", conn=conn))
            self.assertIs(conn.sock, sock)
            self.assertEqual(conn.sock.getsockname(), local)
        finally:
            conn.close()

    def test_unknown_route_and_method(self):
        self.assertEqual(self.call("GET", "/api/v3/nope").status, 404)
        reply = self.call("POST", "/api/v3/clients/me")
        self.assertEqual(reply.status, 405)
        self.assertEqual(reply.headers["Allow"], "GET")
        bad = self.connect()
        try:
            bad.request("POST", "/api/v3/auth/magic-links", body=b"{not json",
                        headers={ENV: ENV_ID, "Content-Type": "application/json"})
            resp = bad.getresponse()
            self.assertEqual(resp.status, 400)
            self.assertEqual(json.loads(resp.read())["code"], "INVALID_JSON")
        finally:
            bad.close()

    def test_chunked_request_body(self):
        conn = self.connect()
        try:
            conn.request("POST", "/api/v3/auth/magic-links",
                         body=iter([b'{"email":"c@d.e",', b'"redirectUrl":"a://b",',
                                    b'"fromEmail":"f@d.e","templateId":"t"}']),
                         headers={ENV: ENV_ID, "Content-Type": "application/json"},
                         encode_chunked=True)
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200, resp.read())
        finally:
            conn.close()

    def test_reset_clears_state(self):
        s = self.new_session()
        self.admin("POST", "/_admin/faults", {"route": "*", "status": 500})
        self.advance(100)
        self.admin("POST", "/_admin/reset")
        self.assertEqual(self.admin("GET", "/_admin/clock")["offsetSeconds"], 0)
        self.assertEqual(self.admin("GET", "/_admin/faults")["faults"], [])
        self.assert_401(self.me(s["token"]))
        self.assertEqual(self.admin("GET", "/_admin/sessions")["sessions"], [])


class ProcessTests(unittest.TestCase):
    def test_port_file_rate_limit_flag_and_sigterm(self):
        proc = ServerProcess("--rate-limit", "/api/v3/auth/methods=1/60")
        try:
            with open(proc.port_file, encoding="utf-8") as fh:
                self.assertEqual(fh.read(), proc.base_url + "\n")
            self.assertTrue(proc.base_url.startswith("http://127.0.0.1:"))
            statuses = []
            for _ in range(2):
                conn = http.client.HTTPConnection(proc.host, proc.port, timeout=10)
                conn.request("GET", "/api/v3/auth/methods", headers={ENV: ENV_ID})
                statuses.append(conn.getresponse().status)
                conn.close()
            self.assertEqual(statuses, [200, 429])
            # An idle keep-alive connection does not block shutdown.
            idle = socket.create_connection((proc.host, proc.port))
            proc.proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.proc.wait(10), 0)
            idle.close()
            self.assertFalse(os.path.exists(proc.port_file))
        finally:
            proc.stop()


if __name__ == "__main__":
    unittest.main()
