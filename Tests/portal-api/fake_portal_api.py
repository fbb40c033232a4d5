#!/usr/bin/env python3
"""A fake Portal API server for portal-keyring integration tests and demos.

A real HTTP/1.1 server (Python 3 standard library only) that speaks the Portal API routes the
library calls on loopback, keeps client session tokens (CSTs) with the backend's lifetime
rules, and exposes an unauthenticated ``/_admin/`` API that tests use to issue and revoke
sessions, move the server clock, mint sign-in grants, inject faults and read request stats.

Usage
=====

    python3 fake_portal_api.py [--host 127.0.0.1] [--port 0] [--port-file PATH]
                               [--auth-environment-id ID] [--rate-limit ROUTE=LIMIT/SECONDS]
                               [--history N] [--idle-timeout SECONDS] [--exit-with-parent]
                               [--quiet]

* ``--port 0`` (the default) picks a free port.  The base URL, e.g. ``http://127.0.0.1:40123``,
  is printed on stdout as the first line (then stdout is flushed) and, with ``--port-file``,
  written to that file atomically (a temporary file in the same directory, then ``rename``).
  The port file holds the URL followed by a newline and is removed again on a clean exit.
* ``--auth-environment-id ID`` makes the server accept only that value in
  ``x-portal-auth-environment-id``; without it any non-blank value is accepted.
* ``--rate-limit ROUTE=LIMIT/SECONDS`` (repeatable) installs a rate limit at start-up, e.g.
  ``--rate-limit /api/v3/auth/magic-links=3/60``.  ``ROUTE`` may be ``*``.
* ``--history N`` is how many recent requests ``/_admin/stats`` keeps (default 200).
* ``--idle-timeout`` closes keep-alive connections idle that long (default 120 s).
* ``--exit-with-parent`` exits when the parent process goes away (useful for test harnesses).
* SIGTERM and SIGINT shut the server down cleanly (exit status 0).
* One line per request goes to stderr: client address, method, path (never the query string),
  status and duration.  Header values, bodies and tokens are never logged.  ``--quiet`` turns the
  request log off.

Conventions
===========

* Every JSON success response is wrapped as ``{"data": ...}``.
* Every 401 response body is exactly ``{}`` (with ``WWW-Authenticate: Bearer``).
* Other errors (400, 403, 404, 405, 413, 429, injected 5xx) use the Portal backend's error shape
  ``{"error": "<human message>", "code": "<MACHINE_CODE>"}``.  Messages never echo tokens.
* ``Content-Length`` is always set; HTTP/1.1 keep-alive works; chunked request bodies are read.
* The server clock is ``time.time() + offset``; the offset is moved with ``/_admin/clock``.
  Every expiry below (CSTs, grants, user JWTs, TOTP codes, rate-limit windows) uses it.

Portal API routes
=================

Client-auth routes are ``/api/v3/auth/*``.  They require the header
``x-portal-auth-environment-id``:

* missing or blank header -> **400** ``{"error": ..., "code": "MISSING_AUTH_ENVIRONMENT_ID"}``;
* with ``--auth-environment-id``, a different value -> **401** ``{}`` (what the real backend
  answers for an unknown auth environment).

``GET /api/v3/clients/me`` does not require the header (set the config key
``requireAuthEnvironmentOnClientsMe`` to require it with the same 400/401 rules).

``GET /api/v3/clients/me`` -- ``Authorization: Bearer <CST>``
    200 ``{"data": {"id": clientId, "endUserId", "custodian": {...}, "createdAt",
    "environment": {...}, "ejectedAt": null, "isAccountAbstracted", "metadata": {...},
    "wallets": []}}`` when the CST is alive, else 401 ``{}`` (missing/malformed header, unknown,
    revoked or expired token).

    CST lifetime, as the Portal backend defines it: a CST expires 24 h
    (``idleTimeoutSeconds``) after its last authenticated request and never lives beyond 7 days
    (``maxLifetimeSeconds``) after issue.  Each successful authenticated request moves the expiry
    to ``now + 24 h``, capped at ``issuedAt + 7 d``.  A token is dead at ``now >= expiresAt``.
    A rejected request does not revive or extend anything.  Sessions created with
    ``{"kind": "apiKey"}`` never expire (static API keys) but can be revoked.

``GET /api/v3/auth/methods``
    200 ``{"data": {"allowedMethods": [...], "allowedAuthMethods": [...],
    "autoCreateWallet": true}}``.  Both method keys carry the same list (``allowedMethods`` is
    the name in this project's brief, ``allowedAuthMethods`` the one PortalSwift decodes).
    Configurable with ``/_admin/config``.

``POST /api/v3/auth/magic-links`` ``{email, redirectUrl, fromEmail, templateId, isAccountAbstracted?}``
    Finds or creates the end user for ``email``, creates a single-use magic-link grant and
    "emails" ``redirectUrl?token=<grant>&authMethod=EMAIL_MAGIC_LINK`` (recorded, see
    ``GET /_admin/magic-links``).  200 with the body the config key ``magicLinkResponse`` picks:
    ``"data"`` (default, ``{"data": {}}``), ``"empty"`` (no body), ``"object"`` (``{}``) or
    ``"html"`` (an HTML page): the SDKs never read it.
    400 ``{"error": "<field> is required"}`` when ``email``, ``redirectUrl``, ``fromEmail`` or
    ``templateId`` is missing or blank (the backend requires all four); 400 when ``email`` is not
    lower case (the backend does not fold case) or EMAIL_MAGIC_LINK is not an allowed method;
    400 ``{"error": ...}`` for ``isAccountAbstracted: true`` while the config key
    ``accountAbstractionAvailable`` is false, and for a non-boolean ``isAccountAbstracted``;
    401 when ``allowedRedirectUrls`` is configured and does not contain ``redirectUrl`` (exact
    string comparison: no case folding, trimming or trailing-slash normalisation).

``POST /api/v3/auth/magic-links/validations`` ``{token}``
``POST /api/v3/auth/oauth/tokens`` ``{token}``
    Grant exchange.  200 ``{"data": {"endUserId", "clientId", "clientSessionToken",
    "isAccountAbstracted"}}``; for a grant whose end user must pass TOTP
    200 ``{"data": {"clientId", "userJwt", "totpLink"?, "isAccountAbstracted"}}``: **no
    ``endUserId``** (the reference SDK allows the backend to omit it on this step and reads the
    end user from the JWT; the strict choice keeps clients honest).  The config key
    ``totpStepEndUserId`` (default false) adds it, for tests of a backend that sends it.
    ``totpLink`` (``otpauth://totp/...?secret=BASE32...``) is included until the end user has
    completed one TOTP validation (first-time enrolment), then omitted.
    Grants are **single-use**: a second use -> **401** ``{}``.  Unknown, expired
    (``grantTtlSeconds``, default 900 s) or wrong-kind grants (an OAuth grant on the magic-link
    route and vice versa) -> 401 ``{}``; a wrong-kind attempt does not consume the grant.
    Missing ``token`` -> 400.

``GET /api/v3/auth/oauth/urls?redirectUrl=...[&isAccountAbstracted=true|false]``
    200 ``{"data": {"google": url, "apple": url}}`` with a key per enabled provider only: a
    provider that is not enabled is absent (200 ``{"data": {}}`` when none is).  The URLs point
    at ``/_admin/oauth/authorize`` on this server and share one single-use ``state``.  Opening
    one (a browser, or ``GET`` without following redirects) answers 302 to
    ``redirectUrl?token=<grant>&login_type=GOOGLE|APPLE``; ``POST /_admin/grants`` with
    ``{"kind": "oauth", "state": ...}`` does the same without the redirect.
    400 ``{"error": ...}`` without ``redirectUrl``, for any other query parameter (``provider``
    among them: the SDKs never send one), for ``isAccountAbstracted`` other than ``true`` /
    ``false``, and for ``true`` while ``accountAbstractionAvailable`` is false.  401 for a
    redirect URL not allowed by ``allowedRedirectUrls``: byte-exact, on the query value as sent,
    which must be the SDKs' form encoding (Java ``URLEncoder``, space as ``%20``: ``A-Z a-z 0-9
    - _ . *`` kept, every other byte ``%XX`` upper case) of an allowed URL.

``POST /api/v3/auth/totps/validations`` ``{code}`` with ``Authorization: Bearer <userJwt>``
    200 ``{"data": {"clientId", "clientSessionToken", "isAccountAbstracted"}}``: **no
    ``endUserId``**, as the backend answers (clients read the JWT's ``endUserId`` claim).
    The user JWT is an HS256 JWT (server-random key) with claims ``iss, sub, endUserId,
    clientId, authEnvironmentId, scope="totp", iat, exp, jti``; it expires after
    ``userJwtTtlSeconds`` (600 s) and is single-use.  The code is a real RFC 6238 TOTP (SHA-1,
    6 digits, 30 s, +/- one step) over the secret in ``totpLink``; ``GET /_admin/totp`` tells
    the current code, and ``staticTotpCode`` in the config adds a fixed accepted code.
    The code is compared exactly as sent (a JSON string; no trimming).  Wrong code -> **401**
    ``{}``, the backend's bare 401 (the reference SDK's fixture), indistinguishable from a dead
    JWT; the JWT stays usable for another code, up to ``totpMaxAttempts`` (5) wrong codes, after
    which it is dead.  Missing, invalid, expired, used or exhausted JWT -> 401 ``{}``.

    Leniencies that stay on this route and the grant exchanges, each for a reason:

    * a missing or non-string ``code`` -> 400 ``{"error", "code": "MISSING_FIELD"}``: what the
      backend answers is unconfirmed, and no client of this project sends one (the library
      checks the code is 1-16 digits before any request), so a distinct answer only helps debug
      the fake itself;
    * ``totpMaxAttempts``: the attempt limit is unconfirmed (the reference says only that the
      user may retry with the same JWT); a limit makes the "restart the sign-in" path testable,
      and 5 is above what any test here types by mistake;
    * ``staticTotpCode``: a fixed extra accepted code, off by default, for demos that cannot read
      ``GET /_admin/totp``; never used by the strictness tests;
    * ``totpStepEndUserId`` (above), off by default.

Rate limiting: a route over its limit answers **429** ``{"error", "code": "RATE_LIMITED"}``
without ``Retry-After`` (the backend sends none), unless the limit was installed with
``retryAfterSeconds``.  Requests answered 429 do not count against the window.

Every request's ``X-Portal-Trace-Id`` header is recorded (``traceId`` in ``/_admin/stats``) but
not required.

Leniencies kept on purpose (each differs from the strictest reading of the backend):

* ``GET /api/v3/auth/methods`` answers both ``allowedMethods`` and ``allowedAuthMethods``: older
  clients of this project read the first name; PortalSwift reads the second.
* A missing ``X-Portal-Trace-Id`` or ``Content-Type`` is accepted: no stored source says the
  backend refuses either, and the tests check the trace id through the stats instead.
* Unknown JSON fields in request bodies are ignored: what the backend does with them is
  unconfirmed, and refusing them would test a guess.
* ``GET /api/v3/clients/me`` does not require the auth-environment header by default (see below):
  it is not a client-auth route.
* ``allowedRedirectUrls`` is null (any redirect URL) until a test sets it: the suites use many
  redirect URLs; the allow-list itself, when set, is byte-exact.
* An ``email`` is not checked beyond being lower case and non-blank: the backend's address rules
  are unconfirmed, and the client's own check is tested on the client.

Unknown paths -> 404; a known path with another method -> 405 with ``Allow``.

Order of checks for an API request: injected fault, rate limit, auth-environment header,
route handler.

Admin API (``/_admin/*``)
=========================

No authentication; answered only to loopback peers (others get 403).  JSON in, JSON out,
wrapped as ``{"data": ...}``; errors as ``{"error", "code"}``.  Admin requests are logged but
are not counted in the stats and are never subject to faults or rate limits.

``GET /_admin/health`` -> ``{"ok": true, "baseUrl"}``.

``POST /_admin/sessions`` ``{endUserId?, clientId?, email?, token?, kind?: "cst"|"apiKey"}``
    Issues a new CST (end user created when unknown; ``token`` picks the exact token value,
    printable ASCII without spaces, <= 8192 chars).  -> ``{"token", "sessionId", "endUserId",
    "clientId", "kind", "issuedAt", "expiresAt", "maxExpiresAt"}`` (epoch seconds, server clock).
``GET /_admin/sessions`` -> ``{"sessions": [...]}``: id, end user, client, kind, timestamps and
    ``status`` (``valid``/``expired``/``revoked``); never the token.
``POST /_admin/revoke`` ``{token}`` | ``{sessionId}`` | ``{endUserId}`` -> ``{"revoked": n}``
    (404 when nothing matched).  Revoked tokens answer 401 from then on.
``GET /_admin/clock`` -> ``{"offsetSeconds", "now", "nowIso"}``.
``POST /_admin/clock`` ``{advanceSeconds}`` (relative) or ``{offsetSeconds}`` (absolute) -> same.
``POST /_admin/grants`` ``{kind: "magic_link"|"oauth", endUserId?, email?, totpRequired?,
    provider?: "GOOGLE"|"APPLE", state?, redirectUrl?, error?, isAccountAbstracted?}``
    Creates a single-use grant -> ``{"token", "kind", "provider", "endUserId", "clientId",
    "totpRequired", "expiresAt", "query", "redirectUrl"}`` where ``query`` is the redirect query
    (``token=...&authMethod=EMAIL_MAGIC_LINK`` or ``token=...&login_type=GOOGLE``) and
    ``redirectUrl`` the full redirect URL.  ``state`` completes a pending OAuth URL (its
    redirect URL and provider are used; the state is consumed).  ``error`` mints no grant and
    returns the error redirect (``?error=...&authMethod=...``) with ``token: null``.  The
    redirect base defaults to the config's ``defaultRedirectUrl``.  ``totpRequired`` defaults
    to the end user's setting.
``GET /_admin/oauth/authorize?state=...&provider=google[&endUserId=][&email=][&totpRequired=1][&error=]``
    The fake provider page the OAuth URLs point at: 302 to the app's redirect URL.
``GET /_admin/grants`` -> ``{"grants": [...]}`` (kind, end user, used, expiry; no token).
``POST /_admin/end-users`` ``{endUserId?, email?, clientId?, totpRequired?}`` -> creates or
    updates an end user; ``GET /_admin/end-users`` lists them.
``GET /_admin/totp?endUserId=...`` -> ``{"code", "secret", "period", "secondsRemaining"}``.
    (The TOTP step's answer names no end user: take it from the grant, ``POST /_admin/grants``,
    or from the user JWT's ``endUserId`` claim.)
``POST /_admin/faults`` ``{route: "/api/v3/clients/me" | "/api/v3/auth/*" | "*", method?,
    status?: 500, delayMs?: N, reset?: true, count?: N, when?: "before"|"after", body?,
    retryAfterSeconds?}`` -> ``{"id", ...}``.
    The next ``count`` matching API requests (default: until cleared) are delayed by
    ``delayMs``, then either answered with ``status`` (401 -> ``{}``, others ``body`` or
    ``{"error": "Injected fault", "code": "INJECTED_FAULT"}``) or have their TCP connection
    reset (``reset``: socket closed with ``SO_LINGER`` 0, no response).  ``reset`` wins over
    ``status``.  ``when: "before"`` (default) fails the request without processing it;
    ``"after"`` processes it first (a grant is consumed, a session slides) and then replaces the
    response: "the response was lost".  Only the oldest matching fault applies to a request.
    A route ending in ``*`` is a prefix match; ``*`` matches every non-admin path.
    A fault sends ``Retry-After`` only when given ``retryAfterSeconds``.
``GET /_admin/faults`` lists them; ``DELETE /_admin/faults`` clears all (``?id=`` one).
``POST /_admin/rate-limits`` ``{route, method?, limit, windowSeconds, retryAfterSeconds?}``;
    ``GET`` lists, ``DELETE`` clears.  Sliding window on the server clock.
``GET /_admin/config`` / ``POST /_admin/config`` ``{key: value, ...}``: ``allowedMethods``,
    ``autoCreateWallet``, ``authEnvironmentId``, ``idleTimeoutSeconds``, ``maxLifetimeSeconds``,
    ``grantTtlSeconds``, ``userJwtTtlSeconds``, ``totpMaxAttempts``, ``staticTotpCode``, ``totpStepEndUserId``,
    ``allowedRedirectUrls`` (null = any), ``requireAuthEnvironmentOnClientsMe``,
    ``defaultRedirectUrl``, ``isAccountAbstracted``, ``accountAbstractionAvailable`` (default
    true), ``magicLinkResponse`` (``data``/``empty``/``object``/``html``).
``GET /_admin/stats[?last=N]`` -> ``{"totalRequests", "routes": {path: {"requests",
    "withBearer", "withAuthorization", "statuses": {"200": n}, "methods": {"GET": n},
    "resets"}}, "recent": [{"seq", "time", "method", "path", "status", "authorization",
    "bearer", "authEnvironmentHeader", "traceId", "sessionId", "fault", "durationMs"}],
    "historySize"}``.  ``traceId`` is the request's ``X-Portal-Trace-Id`` (not a secret), or null.
    ``status`` is null for a reset connection.  ``sessionId`` names the server-side session a
    bearer matched (not the token).  Unknown paths are counted under ``"(unmatched)"``.  No
    token, other header value, query string or body ever appears.  ``DELETE /_admin/stats`` clears.
``GET /_admin/magic-links`` -> ``{"links": [{"email", "redirectUrl", "link", "endUserId",
    "sentAt", "fromEmail", "templateId"}]}`` (newest last, up to 100).  ``link`` is the URL the
    demo "clicks"; it contains the grant.
``POST /_admin/reset`` clears all state (sessions, users, grants, faults, rate limits back to
    the command line ones, config back to defaults, stats, links, clock offset).
"""

import argparse
import base64
import collections
import hashlib
import hmac
import ipaddress
import json
import math
import os
import secrets
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_PREFIX = "/api/v3"
AUTH_PREFIX = "/api/v3/auth/"
ADMIN_PREFIX = "/_admin"
ENV_HEADER = "x-portal-auth-environment-id"
TRACE_HEADER = "X-Portal-Trace-Id"
OAUTH_URL_PARAMETERS = ("redirectUrl", "isAccountAbstracted")
MAGIC_LINK_RESPONSES = ("data", "empty", "object", "html")

ALL_METHODS = ("EMAIL_MAGIC_LINK", "GOOGLE", "APPLE")
PROVIDERS = ("GOOGLE", "APPLE")

MAX_BODY_BYTES = 1 << 20
MAX_CUSTOM_TOKEN_CHARS = 8192
MAX_MAGIC_LINKS = 100
TOTP_PERIOD = 30
TOTP_DIGITS = 6

DEFAULT_IDLE_TIMEOUT = 24 * 3600
DEFAULT_MAX_LIFETIME = 7 * 24 * 3600


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text):
    padded = text + "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii"))


def iso(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % int((ts % 1) * 1000)


def totp_code(secret_bytes, at, step_offset=0):
    counter = max(0, int(at // TOTP_PERIOD) + step_offset)
    mac = hmac.new(secret_bytes, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = (struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF) % (10 ** TOTP_DIGITS)
    return "%0*d" % (TOTP_DIGITS, value)


def build_redirect(base, params):
    """Appends ``params`` to ``base`` as a query, keeping any fragment last."""
    fragment = ""
    if "#" in base:
        base, fragment = base.split("#", 1)
        fragment = "#" + fragment
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
    if "?" not in base:
        sep = "?"
    elif base.endswith("?") or base.endswith("&"):
        sep = ""
    else:
        sep = "&"
    return base + sep + query + fragment


def is_loopback(address):
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def printable_path(path):
    """The path as it may appear in a log line: printable ASCII, bounded."""
    cleaned = "".join(ch if 0x21 <= ord(ch) < 0x7F else "?" for ch in path)
    return cleaned[:200] + ("..." if len(cleaned) > 200 else "")


def valid_custom_token(token):
    return (isinstance(token, str) and 0 < len(token) <= MAX_CUSTOM_TOKEN_CHARS
            and all(0x21 <= ord(ch) < 0x7F for ch in token))


class ApiError(Exception):
    def __init__(self, status, message="", code="ERROR", headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or []


def unauthorized():
    return ApiError(401)


class Response:
    def __init__(self, status, payload=None, headers=None):
        self.status = status
        self.payload = payload
        self.headers = list(headers or [])
        self.reset = False

    @classmethod
    def data(cls, data, status=200, headers=None):
        return cls(status, {"data": data}, headers)

    @classmethod
    def from_error(cls, err):
        if err.status == 401:
            return cls(401, {}, [("WWW-Authenticate", "Bearer")] + err.headers)
        return cls(err.status, {"error": err.message or "Error", "code": err.code}, err.headers)

    def body(self):
        return json.dumps(self.payload if self.payload is not None else {},
                          separators=(",", ":")).encode("utf-8")


class RawResponse(Response):
    """A response whose body is given as bytes (the non-JSON magic-link answers)."""

    def __init__(self, status, raw, content_type):
        super().__init__(status)
        self.raw = raw
        self.content_type = content_type

    def body(self):
        return self.raw


class Request:
    raw_query = ""

    def __init__(self, method, path, query, headers, body, client_ip):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.client_ip = client_ip

    def json_object(self):
        if not self.body:
            return {}
        try:
            value = json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ApiError(400, "Request body is not valid JSON", "INVALID_JSON")
        if not isinstance(value, dict):
            raise ApiError(400, "Request body must be a JSON object", "INVALID_JSON")
        return value

    def query_value(self, name):
        values = self.query.get(name)
        return values[-1] if values else None

    def authorization_values(self):
        return self.headers.get_all("Authorization") or []

    def bearer(self):
        values = self.authorization_values()
        if len(values) != 1:
            return None
        scheme, _, token = values[0].partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return token

    def env_header(self):
        return self.headers.get(ENV_HEADER)


def require_string(body, name):
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, "%s is required" % name, "MISSING_FIELD")
    return value


def optional_bool(body, name, default=None):
    value = body.get(name, default)
    if value is None or isinstance(value, bool):
        return value
    raise ApiError(400, "%s must be a boolean" % name, "INVALID_FIELD")


def sdk_form_encode(value):
    """The query encoding the Portal SDKs send (Java ``URLEncoder``, space as ``%20``)."""
    keep = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.*"
    return "".join(chr(b) if b in keep else "%%%02X" % b for b in value.encode("utf-8"))


def raw_query_value(query, name):
    """The last ``name=`` value of a query string exactly as sent (not decoded), or None."""
    found = None
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if urllib.parse.unquote_plus(key) == name:
            found = value
    return found


def parse_bool_text(text):
    return text is not None and text.strip().lower() in ("1", "true", "yes", "on")


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


class App:
    """All server state, guarded by one lock."""

    CONFIG_TYPES = {
        "allowedMethods": list,
        "autoCreateWallet": bool,
        "authEnvironmentId": (str, type(None)),
        "idleTimeoutSeconds": (int, float),
        "maxLifetimeSeconds": (int, float),
        "grantTtlSeconds": (int, float),
        "userJwtTtlSeconds": (int, float),
        "totpMaxAttempts": int,
        "staticTotpCode": (str, type(None)),
        "totpStepEndUserId": bool,
        "allowedRedirectUrls": (list, type(None)),
        "requireAuthEnvironmentOnClientsMe": bool,
        "defaultRedirectUrl": str,
        "isAccountAbstracted": bool,
        "accountAbstractionAvailable": bool,
        "magicLinkResponse": str,
    }

    def __init__(self, auth_environment_id=None, rate_limits=(), history=200, quiet=False,
                 idle_timeout=120.0):
        self.lock = threading.RLock()
        self.initial_env_id = auth_environment_id
        self.initial_rate_limits = list(rate_limits)
        self.history_size = max(1, history)
        self.quiet = quiet
        self.idle_timeout = idle_timeout
        self.base_url = None
        self.log_lock = threading.Lock()
        self.reset()

    # ---- lifecycle --------------------------------------------------------------------------

    def reset(self):
        with self.lock:
            self.offset = 0.0
            self.config = {
                "allowedMethods": list(ALL_METHODS),
                "autoCreateWallet": True,
                "authEnvironmentId": self.initial_env_id,
                "idleTimeoutSeconds": DEFAULT_IDLE_TIMEOUT,
                "maxLifetimeSeconds": DEFAULT_MAX_LIFETIME,
                "grantTtlSeconds": 900,
                "userJwtTtlSeconds": 600,
                "totpMaxAttempts": 5,
                "staticTotpCode": None,
                "totpStepEndUserId": False,
                "allowedRedirectUrls": None,
                "requireAuthEnvironmentOnClientsMe": False,
                "defaultRedirectUrl": "portalkeyring://auth/callback",
                "isAccountAbstracted": False,
                "accountAbstractionAvailable": True,
                "magicLinkResponse": "data",
            }
            self.jwt_key = secrets.token_bytes(32)
            self.users = {}
            self.users_by_email = {}
            self.sessions = {}        # token -> session
            self.sessions_by_id = {}  # id -> session
            self.grants = {}          # token -> grant
            self.oauth_states = {}    # state -> pending OAuth request
            self.user_jwts = {}       # jti -> record
            self.magic_links = collections.deque(maxlen=MAX_MAGIC_LINKS)
            self.faults = []
            self.next_fault_id = 1
            self.rate_limits = []
            for rl in self.initial_rate_limits:
                self._add_rate_limit(dict(rl))
            self._clear_stats()

    def _clear_stats(self):
        self.stats_routes = {}
        self.stats_total = 0
        self.stats_seq = 0
        self.history = collections.deque(maxlen=self.history_size)

    def now(self):
        return time.time() + self.offset

    # ---- logging ----------------------------------------------------------------------------

    def log(self, line):
        if self.quiet:
            return
        with self.log_lock:
            try:
                sys.stderr.write("fake-portal-api: " + line + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    # ---- users and sessions -----------------------------------------------------------------

    def _get_or_create_user(self, end_user_id=None, email=None, client_id=None):
        user = None
        if end_user_id:
            user = self.users.get(end_user_id)
        if user is None and email:
            user = self.users_by_email.get(email.strip().lower())
        if user is None:
            end_user_id = end_user_id or "eu_" + secrets.token_hex(8)
            user = {
                "endUserId": end_user_id,
                "clientId": client_id or "cl_" + secrets.token_hex(8),
                "email": email.strip() if email else None,
                "totpRequired": False,
                "totpEnrolled": False,
                "totpSecret": secrets.token_bytes(20),
                "createdAt": self.now(),
            }
            self.users[end_user_id] = user
        if email and not user["email"]:
            user["email"] = email.strip()
        if email:
            self.users_by_email[email.strip().lower()] = user
        return user

    def _public_user(self, user):
        return {
            "endUserId": user["endUserId"],
            "clientId": user["clientId"],
            "email": user["email"],
            "totpRequired": user["totpRequired"],
            "totpEnrolled": user["totpEnrolled"],
            "createdAt": user["createdAt"],
        }

    def _session_expiry(self, s):
        if s["kind"] == "apiKey":
            return None
        cap = s["issuedAt"] + self.config["maxLifetimeSeconds"]
        return min(s["lastActivity"] + self.config["idleTimeoutSeconds"], cap)

    def _session_status(self, s, now):
        if s["revoked"]:
            return "revoked"
        expiry = self._session_expiry(s)
        if expiry is not None and now >= expiry:
            return "expired"
        return "valid"

    def _issue_session(self, user, client_id=None, token=None, kind="cst"):
        if token is None:
            token = "cst_" + secrets.token_urlsafe(32)
        now = self.now()
        s = {
            "id": "ses_" + secrets.token_hex(8),
            "token": token,
            "kind": kind,
            "endUserId": user["endUserId"],
            "clientId": client_id or user["clientId"],
            "issuedAt": now,
            "lastActivity": now,
            "revoked": False,
            "requests": 0,
        }
        old = self.sessions.get(token)
        if old is not None:
            self.sessions_by_id.pop(old["id"], None)
        self.sessions[token] = s
        self.sessions_by_id[s["id"]] = s
        return s

    def _public_session(self, s, now):
        expiry = self._session_expiry(s)
        return {
            "sessionId": s["id"],
            "kind": s["kind"],
            "endUserId": s["endUserId"],
            "clientId": s["clientId"],
            "issuedAt": s["issuedAt"],
            "lastActivity": s["lastActivity"],
            "expiresAt": expiry,
            "maxExpiresAt": None if s["kind"] == "apiKey"
            else s["issuedAt"] + self.config["maxLifetimeSeconds"],
            "revoked": s["revoked"],
            "status": self._session_status(s, now),
            "authenticatedRequests": s["requests"],
        }

    # ---- grants -----------------------------------------------------------------------------

    def _new_grant(self, kind, user, totp_required, redirect_url, provider=None,
                   is_account_abstracted=None):
        token = secrets.token_urlsafe(32)
        now = self.now()
        grant = {
            "token": token,
            "id": "gr_" + secrets.token_hex(6),
            "kind": kind,
            "provider": provider,
            "endUserId": user["endUserId"],
            "totpRequired": bool(totp_required),
            "redirectUrl": redirect_url,
            "createdAt": now,
            "expiresAt": now + self.config["grantTtlSeconds"],
            "used": False,
            "isAccountAbstracted": is_account_abstracted,
        }
        self.grants[token] = grant
        return grant

    def _redirect_params(self, kind, provider, token=None, error=None):
        params = []
        if token is not None:
            params.append(("token", token))
        if error is not None:
            params.append(("error", error))
        if kind == "magic_link":
            params.append(("authMethod", "EMAIL_MAGIC_LINK"))
        else:
            params.append(("login_type", provider))
        return params

    def _totp_link(self, user):
        label = urllib.parse.quote("FakePortal:" + (user["email"] or user["endUserId"]), safe=":@")
        secret = base64.b32encode(user["totpSecret"]).decode("ascii").rstrip("=")
        return ("otpauth://totp/%s?secret=%s&issuer=FakePortal&algorithm=SHA1&digits=%d&period=%d"
                % (label, secret, TOTP_DIGITS, TOTP_PERIOD))

    def _issue_user_jwt(self, user):
        now = self.now()
        jti = secrets.token_hex(12)
        exp = now + self.config["userJwtTtlSeconds"]
        claims = {
            "iss": "fake-portal-api",
            "sub": user["endUserId"],
            "endUserId": user["endUserId"],
            "clientId": user["clientId"],
            "authEnvironmentId": self.config["authEnvironmentId"],
            "scope": "totp",
            "iat": int(now),
            "exp": int(math.ceil(exp)),
            "jti": jti,
        }
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = header + "." + payload
        sig = b64url(hmac.new(self.jwt_key, signing_input.encode("ascii"), hashlib.sha256).digest())
        self.user_jwts[jti] = {"endUserId": user["endUserId"], "exp": exp, "used": False,
                               "attempts": 0, "dead": False}
        return signing_input + "." + sig

    def _verify_user_jwt(self, token):
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(header, dict) or header.get("alg") != "HS256" or not isinstance(claims, dict):
            return None
        expected = hmac.new(self.jwt_key, (parts[0] + "." + parts[1]).encode("ascii"),
                            hashlib.sha256).digest()
        if not hmac.compare_digest(expected, sig):
            return None
        return claims

    # ---- faults and rate limits ------------------------------------------------------------

    @staticmethod
    def _route_matches(pattern, path):
        if pattern == "*":
            return True
        if pattern.endswith("*"):
            return path.startswith(pattern[:-1])
        return pattern == path

    def take_fault(self, method, path):
        with self.lock:
            for fault in self.faults:
                if not self._route_matches(fault["route"], path):
                    continue
                if fault["method"] and fault["method"] != method:
                    continue
                fault["hits"] += 1
                if fault["remaining"] is not None:
                    fault["remaining"] -= 1
                    if fault["remaining"] <= 0:
                        self.faults.remove(fault)
                return dict(fault)
        return None

    def _add_rate_limit(self, body):
        route = body.get("route")
        if not isinstance(route, str) or not route:
            raise ApiError(400, "route is required", "MISSING_FIELD")
        limit = body.get("limit")
        window = body.get("windowSeconds")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ApiError(400, "limit must be a non-negative integer", "INVALID_FIELD")
        if not isinstance(window, (int, float)) or isinstance(window, bool) or window <= 0:
            raise ApiError(400, "windowSeconds must be a positive number", "INVALID_FIELD")
        method = body.get("method")
        retry_after = body.get("retryAfterSeconds")
        rl = {"route": route, "method": method.upper() if isinstance(method, str) else None,
              "limit": limit, "windowSeconds": window, "retryAfterSeconds": retry_after,
              "hits": collections.deque(), "rejected": 0}
        self.rate_limits.append(rl)
        return rl

    def _check_rate_limits(self, method, path):
        now = self.now()
        matching = [rl for rl in self.rate_limits
                    if self._route_matches(rl["route"], path)
                    and (rl["method"] is None or rl["method"] == method)]
        retry = None
        for rl in matching:
            hits = rl["hits"]
            while hits and hits[0] <= now - rl["windowSeconds"]:
                hits.popleft()
            if len(hits) >= rl["limit"]:
                if rl["retryAfterSeconds"] is not None:
                    wait = rl["retryAfterSeconds"]
                elif hits:
                    wait = hits[0] + rl["windowSeconds"] - now
                else:
                    wait = rl["windowSeconds"]
                retry = max(retry or 0, max(1, int(math.ceil(wait))))
                rl["rejected"] += 1
        if retry is not None:
            # Like the backend: no Retry-After unless the limit was given one explicitly.
            explicit = [rl["retryAfterSeconds"] for rl in matching
                        if rl["retryAfterSeconds"] is not None and len(rl["hits"]) >= rl["limit"]]
            headers = [("Retry-After", str(max(explicit)))] if explicit else []
            raise ApiError(429, "Too many requests", "RATE_LIMITED", headers)
        for rl in matching:
            rl["hits"].append(now)

    # ---- stats ------------------------------------------------------------------------------

    def record(self, req, route_key, status, fault_kind, duration_ms):
        with self.lock:
            self.stats_total += 1
            self.stats_seq += 1
            auth_values = req.authorization_values()
            token = req.bearer()
            session_id = None
            if token is not None:
                s = self.sessions.get(token)
                if s is not None:
                    session_id = s["id"]
            entry = self.stats_routes.setdefault(route_key, {
                "requests": 0, "withBearer": 0, "withAuthorization": 0,
                "statuses": {}, "methods": {}, "resets": 0,
            })
            entry["requests"] += 1
            if token is not None:
                entry["withBearer"] += 1
            if auth_values:
                entry["withAuthorization"] += 1
            if status is None:
                entry["resets"] += 1
            else:
                key = str(status)
                entry["statuses"][key] = entry["statuses"].get(key, 0) + 1
            entry["methods"][req.method] = entry["methods"].get(req.method, 0) + 1
            self.history.append({
                "seq": self.stats_seq,
                "time": self.now(),
                "method": req.method,
                "path": req.path if route_key != "(unmatched)" else printable_path(req.path),
                "route": route_key,
                "status": status,
                "authorization": bool(auth_values),
                "bearer": token is not None,
                "authEnvironmentHeader": req.env_header() is not None,
                "traceId": req.headers.get(TRACE_HEADER),
                "sessionId": session_id,
                "fault": fault_kind,
                "durationMs": round(duration_ms, 3),
            })

    # ---- dispatch ---------------------------------------------------------------------------

    def api_route_key(self, path):
        return path if path in API_ROUTES else "(unmatched)"

    def handle_api(self, req):
        with self.lock:
            try:
                routes = API_ROUTES.get(req.path)
                if routes is None:
                    raise ApiError(404, "Not found", "NOT_FOUND")
                handler_name = routes.get(req.method)
                if handler_name is None:
                    raise ApiError(405, "Method not allowed", "METHOD_NOT_ALLOWED",
                                   [("Allow", ", ".join(sorted(routes)))])
                self._check_rate_limits(req.method, req.path)
                if req.path.startswith(AUTH_PREFIX) or self.config["requireAuthEnvironmentOnClientsMe"]:
                    self._check_env(req)
                return getattr(self, handler_name)(req)
            except ApiError as err:
                return Response.from_error(err)

    def handle_admin(self, req):
        with self.lock:
            try:
                routes = ADMIN_ROUTES.get(req.path)
                if routes is None:
                    raise ApiError(404, "Not found", "NOT_FOUND")
                handler_name = routes.get(req.method)
                if handler_name is None:
                    raise ApiError(405, "Method not allowed", "METHOD_NOT_ALLOWED",
                                   [("Allow", ", ".join(sorted(routes)))])
                return getattr(self, handler_name)(req)
            except ApiError as err:
                return Response.from_error(err)

    def _check_env(self, req):
        value = req.env_header()
        if value is None or not value.strip():
            raise ApiError(400, "The %s header is required" % ENV_HEADER,
                           "MISSING_AUTH_ENVIRONMENT_ID")
        expected = self.config["authEnvironmentId"]
        if expected is not None and value != expected:
            raise unauthorized()

    def _check_redirect_allowed(self, redirect_url, raw_query_value=None):
        """Byte-exact: ``redirect_url`` must be an allowed URL as written (JSON bodies); a query
        value must also have been sent in the SDKs' form encoding of it (``raw_query_value``)."""
        allowed = self.config["allowedRedirectUrls"]
        if allowed is None:
            return
        if redirect_url not in allowed:
            raise unauthorized()
        if raw_query_value is not None and raw_query_value != sdk_form_encode(redirect_url):
            raise unauthorized()

    def _check_account_abstraction(self, requested):
        if requested is True and not self.config["accountAbstractionAvailable"]:
            raise ApiError(400, "Account abstraction is not enabled for this environment",
                           "ACCOUNT_ABSTRACTION_UNAVAILABLE")

    # ---- API handlers -----------------------------------------------------------------------

    def api_clients_me(self, req):
        token = req.bearer()
        if token is None:
            raise unauthorized()
        s = self.sessions.get(token)
        now = self.now()
        if s is None or self._session_status(s, now) != "valid":
            raise unauthorized()
        s["lastActivity"] = now
        s["requests"] += 1
        user = self.users.get(s["endUserId"], {})
        env_id = self.config["authEnvironmentId"] or "env_fake"
        return Response.data({
            "id": s["clientId"],
            "endUserId": s["endUserId"],
            "custodian": {"id": "custodian_fake", "name": "Fake Portal Custodian"},
            "createdAt": iso(user.get("createdAt", s["issuedAt"])),
            "environment": {"id": env_id, "name": "fake-portal-api",
                            "backupWithPortalEnabled": False, "isMultiBackupEnabled": False},
            "ejectedAt": None,
            "isAccountAbstracted": self.config["isAccountAbstracted"],
            "metadata": {"namespaces": {}},
            "wallets": [],
        })

    def api_auth_methods(self, req):
        methods = list(self.config["allowedMethods"])
        return Response.data({"allowedMethods": methods, "allowedAuthMethods": methods,
                              "autoCreateWallet": self.config["autoCreateWallet"]})

    def api_magic_links(self, req):
        body = req.json_object()
        email = require_string(body, "email")
        redirect_url = require_string(body, "redirectUrl")
        from_email = require_string(body, "fromEmail")
        template_id = require_string(body, "templateId")
        if email != email.lower():
            raise ApiError(400, "email must be lower case", "INVALID_FIELD")
        is_aa = optional_bool(body, "isAccountAbstracted")
        if "EMAIL_MAGIC_LINK" not in self.config["allowedMethods"]:
            raise ApiError(400, "Email magic links are not enabled", "METHOD_DISABLED")
        self._check_account_abstraction(is_aa)
        self._check_redirect_allowed(redirect_url)
        user = self._get_or_create_user(email=email)
        grant = self._new_grant("magic_link", user, user["totpRequired"], redirect_url,
                                is_account_abstracted=is_aa)
        link = build_redirect(redirect_url, self._redirect_params("magic_link", None, grant["token"]))
        self.magic_links.append({
            "email": email,
            "redirectUrl": redirect_url,
            "link": link,
            "endUserId": user["endUserId"],
            "sentAt": self.now(),
            "fromEmail": from_email,
            "templateId": template_id,
            "isAccountAbstracted": is_aa,
        })
        kind = self.config["magicLinkResponse"]
        if kind == "empty":
            return RawResponse(200, b"", "application/json")
        if kind == "object":
            return Response(200, {})
        if kind == "html":
            return RawResponse(200, b"<!doctype html><html><body>sent</body></html>", "text/html")
        return Response.data({})

    def _exchange(self, req, kind):
        body = req.json_object()
        token = require_string(body, "token")
        grant = self.grants.get(token)
        now = self.now()
        if grant is None or grant["kind"] != kind or grant["used"] or now >= grant["expiresAt"]:
            raise unauthorized()
        grant["used"] = True
        grant["usedAt"] = now
        user = self.users[grant["endUserId"]]
        is_aa = grant["isAccountAbstracted"]
        if is_aa is None:
            is_aa = self.config["isAccountAbstracted"]
        data = {"endUserId": user["endUserId"], "clientId": user["clientId"],
                "isAccountAbstracted": is_aa}
        if grant["totpRequired"]:
            if not self.config["totpStepEndUserId"]:
                del data["endUserId"]
            data["userJwt"] = self._issue_user_jwt(user)
            if not user["totpEnrolled"]:
                data["totpLink"] = self._totp_link(user)
        else:
            data["clientSessionToken"] = self._issue_session(user)["token"]
        return Response.data(data)

    def api_magic_link_validations(self, req):
        return self._exchange(req, "magic_link")

    def api_oauth_tokens(self, req):
        return self._exchange(req, "oauth")

    def api_oauth_urls(self, req):
        unknown = sorted(set(req.query) - set(OAUTH_URL_PARAMETERS))
        if unknown:
            raise ApiError(400, "Unknown query parameter: %s" % unknown[0], "INVALID_FIELD")
        redirect_url = req.query_value("redirectUrl")
        if redirect_url is None or not redirect_url.strip():
            raise ApiError(400, "redirectUrl is required", "MISSING_FIELD")
        is_aa = req.query_value("isAccountAbstracted")
        if is_aa is not None and is_aa not in ("true", "false"):
            raise ApiError(400, "isAccountAbstracted must be true or false", "INVALID_FIELD")
        self._check_account_abstraction(is_aa == "true")
        enabled = [p for p in PROVIDERS if p in self.config["allowedMethods"]]
        self._check_redirect_allowed(redirect_url, raw_query_value(req.raw_query, "redirectUrl"))
        state = secrets.token_urlsafe(16)
        self.oauth_states[state] = {
            "redirectUrl": redirect_url,
            "providers": enabled,
            "createdAt": self.now(),
            "used": False,
            "isAccountAbstracted": None if is_aa is None else parse_bool_text(is_aa),
        }
        data = {}
        for p in enabled:
            data[p.lower()] = "%s%s/oauth/authorize?%s" % (
                self.base_url, ADMIN_PREFIX,
                urllib.parse.urlencode({"state": state, "provider": p.lower()}))
        return Response.data(data)

    def api_totp_validations(self, req):
        token = req.bearer()
        if token is None:
            raise unauthorized()
        claims = self._verify_user_jwt(token)
        if claims is None:
            raise unauthorized()
        record = self.user_jwts.get(claims.get("jti"))
        now = self.now()
        if record is None or record["used"] or record["dead"] or now >= record["exp"]:
            raise unauthorized()
        body = req.json_object()
        code = body.get("code")
        if not isinstance(code, str) or not code:
            raise ApiError(400, "code is required", "MISSING_FIELD")
        user = self.users[record["endUserId"]]
        accepted = {totp_code(user["totpSecret"], now, step) for step in (-1, 0, 1)}
        if self.config["staticTotpCode"]:
            accepted.add(self.config["staticTotpCode"])
        if code not in accepted:
            record["attempts"] += 1
            if record["attempts"] >= self.config["totpMaxAttempts"]:
                record["dead"] = True
            raise unauthorized()
        record["used"] = True
        user["totpEnrolled"] = True
        s = self._issue_session(user)
        return Response.data({"clientId": user["clientId"], "clientSessionToken": s["token"],
                              "isAccountAbstracted": self.config["isAccountAbstracted"]})

    # ---- admin handlers ---------------------------------------------------------------------

    def admin_health(self, req):
        return Response.data({"ok": True, "baseUrl": self.base_url})

    def admin_sessions_create(self, req):
        body = req.json_object()
        kind = body.get("kind", "cst")
        if kind not in ("cst", "apiKey"):
            raise ApiError(400, "kind must be cst or apiKey", "INVALID_FIELD")
        token = body.get("token")
        if token is not None and not valid_custom_token(token):
            raise ApiError(400, "token must be 1-%d printable ASCII characters without spaces"
                           % MAX_CUSTOM_TOKEN_CHARS, "INVALID_FIELD")
        for name in ("endUserId", "clientId", "email"):
            if body.get(name) is not None and not isinstance(body.get(name), str):
                raise ApiError(400, "%s must be a string" % name, "INVALID_FIELD")
        user = self._get_or_create_user(body.get("endUserId"), body.get("email"), body.get("clientId"))
        s = self._issue_session(user, client_id=body.get("clientId"), token=token, kind=kind)
        data = self._public_session(s, self.now())
        data["token"] = s["token"]
        return Response.data(data)

    def admin_sessions_list(self, req):
        now = self.now()
        return Response.data({"sessions": [self._public_session(s, now)
                                           for s in self.sessions_by_id.values()]})

    def admin_revoke(self, req):
        body = req.json_object()
        targets = []
        if isinstance(body.get("token"), str):
            s = self.sessions.get(body["token"])
            targets = [s] if s else []
        elif isinstance(body.get("sessionId"), str):
            s = self.sessions_by_id.get(body["sessionId"])
            targets = [s] if s else []
        elif isinstance(body.get("endUserId"), str):
            targets = [s for s in self.sessions_by_id.values() if s["endUserId"] == body["endUserId"]]
        else:
            raise ApiError(400, "token, sessionId or endUserId is required", "MISSING_FIELD")
        if not targets:
            raise ApiError(404, "No matching session", "NOT_FOUND")
        for s in targets:
            s["revoked"] = True
        return Response.data({"revoked": len(targets),
                              "sessionIds": [s["id"] for s in targets]})

    def _clock_data(self):
        now = self.now()
        return {"offsetSeconds": self.offset, "now": now, "nowIso": iso(now)}

    def admin_clock_get(self, req):
        return Response.data(self._clock_data())

    def admin_clock_set(self, req):
        body = req.json_object()
        adv = body.get("advanceSeconds")
        off = body.get("offsetSeconds")
        for name, value in (("advanceSeconds", adv), ("offsetSeconds", off)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise ApiError(400, "%s must be a number" % name, "INVALID_FIELD")
        if (adv is None) == (off is None):
            raise ApiError(400, "Give exactly one of advanceSeconds or offsetSeconds", "INVALID_FIELD")
        if off is not None:
            self.offset = float(off)
        else:
            self.offset += float(adv)
        return Response.data(self._clock_data())

    def _make_grant(self, body):
        kind = body.get("kind", "magic_link")
        if kind in ("magic-link", "magicLink", "EMAIL_MAGIC_LINK"):
            kind = "magic_link"
        if kind not in ("magic_link", "oauth"):
            raise ApiError(400, "kind must be magic_link or oauth", "INVALID_FIELD")
        for name in ("endUserId", "email", "redirectUrl", "error", "state", "provider"):
            if body.get(name) is not None and not isinstance(body.get(name), str):
                raise ApiError(400, "%s must be a string" % name, "INVALID_FIELD")
        totp_required = optional_bool(body, "totpRequired")
        is_aa = optional_bool(body, "isAccountAbstracted")
        provider = None
        redirect_url = body.get("redirectUrl")
        if kind == "oauth":
            provider = (body.get("provider") or "").upper() or None
            state_key = body.get("state")
            if state_key is not None:
                state = self.oauth_states.get(state_key)
                if state is None or state["used"]:
                    raise ApiError(400, "Unknown or used OAuth state", "INVALID_STATE")
                if provider is None:
                    provider = state["providers"][0]
                if provider not in state["providers"]:
                    raise ApiError(400, "Provider not offered for this state", "INVALID_FIELD")
                state["used"] = True
                redirect_url = state["redirectUrl"]
                if is_aa is None:
                    is_aa = state["isAccountAbstracted"]
            provider = provider or "GOOGLE"
            if provider not in PROVIDERS:
                raise ApiError(400, "provider must be GOOGLE or APPLE", "INVALID_FIELD")
        if not redirect_url:
            redirect_url = self.config["defaultRedirectUrl"]
        if body.get("error") is not None:
            return {"token": None, "kind": kind, "provider": provider, "error": body["error"],
                    "query": urllib.parse.urlencode(
                        self._redirect_params(kind, provider, error=body["error"]),
                        quote_via=urllib.parse.quote),
                    "redirectUrl": build_redirect(
                        redirect_url, self._redirect_params(kind, provider, error=body["error"]))}
        user = self._get_or_create_user(body.get("endUserId"), body.get("email"))
        if totp_required is None:
            totp_required = user["totpRequired"]
        grant = self._new_grant(kind, user, totp_required, redirect_url, provider, is_aa)
        params = self._redirect_params(kind, provider, grant["token"])
        return {
            "token": grant["token"],
            "kind": kind,
            "provider": provider,
            "endUserId": user["endUserId"],
            "clientId": user["clientId"],
            "totpRequired": grant["totpRequired"],
            "expiresAt": grant["expiresAt"],
            "query": urllib.parse.urlencode(params, quote_via=urllib.parse.quote),
            "redirectUrl": build_redirect(redirect_url, params),
        }

    def admin_grants_create(self, req):
        return Response.data(self._make_grant(req.json_object()))

    def admin_grants_list(self, req):
        now = self.now()
        return Response.data({"grants": [{
            "id": g["id"], "kind": g["kind"], "provider": g["provider"],
            "endUserId": g["endUserId"], "totpRequired": g["totpRequired"], "used": g["used"],
            "createdAt": g["createdAt"], "expiresAt": g["expiresAt"],
            "expired": now >= g["expiresAt"],
        } for g in self.grants.values()]})

    def admin_oauth_authorize(self, req):
        state = req.query_value("state")
        if not state:
            raise ApiError(400, "state is required", "MISSING_FIELD")
        body = {"kind": "oauth", "state": state,
                "provider": (req.query_value("provider") or "").upper() or None,
                "endUserId": req.query_value("endUserId") or None,
                "email": req.query_value("email") or None,
                "error": req.query_value("error") or None}
        if req.query_value("totpRequired") is not None:
            body["totpRequired"] = parse_bool_text(req.query_value("totpRequired"))
        result = self._make_grant(body)
        return Response(302, {"data": {"location": result["redirectUrl"]}},
                         [("Location", result["redirectUrl"])])

    def admin_end_users_create(self, req):
        body = req.json_object()
        for name in ("endUserId", "email", "clientId"):
            if body.get(name) is not None and not isinstance(body.get(name), str):
                raise ApiError(400, "%s must be a string" % name, "INVALID_FIELD")
        totp_required = optional_bool(body, "totpRequired")
        user = self._get_or_create_user(body.get("endUserId"), body.get("email"), body.get("clientId"))
        if totp_required is not None:
            user["totpRequired"] = totp_required
        if body.get("clientId"):
            user["clientId"] = body["clientId"]
        return Response.data(self._public_user(user))

    def admin_end_users_list(self, req):
        return Response.data({"endUsers": [self._public_user(u) for u in self.users.values()]})

    def admin_totp(self, req):
        end_user_id = req.query_value("endUserId")
        user = self.users.get(end_user_id or "")
        if user is None:
            raise ApiError(404, "Unknown end user", "NOT_FOUND")
        now = self.now()
        return Response.data({
            "code": totp_code(user["totpSecret"], now),
            "secret": base64.b32encode(user["totpSecret"]).decode("ascii").rstrip("="),
            "period": TOTP_PERIOD,
            "secondsRemaining": TOTP_PERIOD - (now % TOTP_PERIOD),
        })

    @staticmethod
    def _public_fault(f):
        return {k: v for k, v in f.items()}

    def admin_faults_create(self, req):
        body = req.json_object()
        route = body.get("route")
        if not isinstance(route, str) or not route:
            raise ApiError(400, "route is required", "MISSING_FIELD")
        status = body.get("status")
        delay = body.get("delayMs")
        reset = body.get("reset", False)
        count = body.get("count")
        when = body.get("when", "before")
        method = body.get("method")
        if status is not None and (not isinstance(status, int) or isinstance(status, bool)
                                   or not 100 <= status <= 599):
            raise ApiError(400, "status must be an HTTP status code", "INVALID_FIELD")
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))
                                  or delay < 0 or delay > 600000):
            raise ApiError(400, "delayMs must be 0..600000", "INVALID_FIELD")
        if not isinstance(reset, bool):
            raise ApiError(400, "reset must be a boolean", "INVALID_FIELD")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise ApiError(400, "count must be a positive integer", "INVALID_FIELD")
        if when not in ("before", "after"):
            raise ApiError(400, "when must be before or after", "INVALID_FIELD")
        if method is not None and not isinstance(method, str):
            raise ApiError(400, "method must be a string", "INVALID_FIELD")
        if status is None and not delay and not reset:
            raise ApiError(400, "Give status, delayMs or reset", "MISSING_FIELD")
        fault = {
            "id": self.next_fault_id,
            "route": route,
            "method": method.upper() if method else None,
            "status": status,
            "delayMs": delay or 0,
            "reset": reset,
            "count": count,
            "remaining": count,
            "when": when,
            "body": body.get("body"),
            "retryAfterSeconds": body.get("retryAfterSeconds"),
            "hits": 0,
        }
        self.next_fault_id += 1
        self.faults.append(fault)
        return Response.data(self._public_fault(fault))

    def admin_faults_list(self, req):
        return Response.data({"faults": [self._public_fault(f) for f in self.faults]})

    def admin_faults_clear(self, req):
        fid = req.query_value("id")
        before = len(self.faults)
        if fid is not None:
            self.faults = [f for f in self.faults if str(f["id"]) != fid]
        else:
            self.faults = []
        return Response.data({"cleared": before - len(self.faults)})

    def admin_rate_limits_create(self, req):
        rl = self._add_rate_limit(req.json_object())
        return Response.data(self._public_rate_limit(rl))

    @staticmethod
    def _public_rate_limit(rl):
        return {"route": rl["route"], "method": rl["method"], "limit": rl["limit"],
                "windowSeconds": rl["windowSeconds"], "retryAfterSeconds": rl["retryAfterSeconds"],
                "inWindow": len(rl["hits"]), "rejected": rl["rejected"]}

    def admin_rate_limits_list(self, req):
        return Response.data({"rateLimits": [self._public_rate_limit(r) for r in self.rate_limits]})

    def admin_rate_limits_clear(self, req):
        n = len(self.rate_limits)
        self.rate_limits = []
        return Response.data({"cleared": n})

    def admin_config_get(self, req):
        return Response.data(dict(self.config))

    def admin_config_set(self, req):
        body = req.json_object()
        for key, value in body.items():
            expected = self.CONFIG_TYPES.get(key)
            if expected is None:
                raise ApiError(400, "Unknown config key %s" % key, "INVALID_FIELD")
            ok = isinstance(value, expected)
            if isinstance(value, bool) and expected is not bool and bool not in (
                    expected if isinstance(expected, tuple) else (expected,)):
                ok = False
            if not ok:
                raise ApiError(400, "Invalid value for %s" % key, "INVALID_FIELD")
            if key in ("allowedMethods", "allowedRedirectUrls") and value is not None:
                if not all(isinstance(v, str) for v in value):
                    raise ApiError(400, "%s must be a list of strings" % key, "INVALID_FIELD")
            if key == "magicLinkResponse" and value not in MAGIC_LINK_RESPONSES:
                raise ApiError(400, "magicLinkResponse must be one of %s" % ", ".join(MAGIC_LINK_RESPONSES),
                               "INVALID_FIELD")
        self.config.update(body)
        return Response.data(dict(self.config))

    def admin_stats(self, req):
        last = req.query_value("last")
        recent = list(self.history)
        if last is not None:
            try:
                n = max(0, int(last))
            except ValueError:
                raise ApiError(400, "last must be an integer", "INVALID_FIELD")
            recent = recent[-n:] if n else []
        return Response.data({
            "totalRequests": self.stats_total,
            "routes": json.loads(json.dumps(self.stats_routes)),
            "recent": recent,
            "historySize": self.history_size,
        })

    def admin_stats_clear(self, req):
        self._clear_stats()
        return Response.data({})

    def admin_reset(self, req):
        self.reset()
        return Response.data({"reset": True})

    def admin_magic_links(self, req):
        return Response.data({"links": list(self.magic_links)})


API_ROUTES = {
    "/api/v3/clients/me": {"GET": "api_clients_me"},
    "/api/v3/auth/methods": {"GET": "api_auth_methods"},
    "/api/v3/auth/magic-links": {"POST": "api_magic_links"},
    "/api/v3/auth/magic-links/validations": {"POST": "api_magic_link_validations"},
    "/api/v3/auth/oauth/urls": {"GET": "api_oauth_urls"},
    "/api/v3/auth/oauth/tokens": {"POST": "api_oauth_tokens"},
    "/api/v3/auth/totps/validations": {"POST": "api_totp_validations"},
}

ADMIN_ROUTES = {
    "/_admin/health": {"GET": "admin_health"},
    "/_admin/sessions": {"GET": "admin_sessions_list", "POST": "admin_sessions_create"},
    "/_admin/revoke": {"POST": "admin_revoke"},
    "/_admin/clock": {"GET": "admin_clock_get", "POST": "admin_clock_set"},
    "/_admin/grants": {"GET": "admin_grants_list", "POST": "admin_grants_create"},
    "/_admin/oauth/authorize": {"GET": "admin_oauth_authorize"},
    "/_admin/end-users": {"GET": "admin_end_users_list", "POST": "admin_end_users_create"},
    "/_admin/totp": {"GET": "admin_totp"},
    "/_admin/faults": {"GET": "admin_faults_list", "POST": "admin_faults_create",
                       "DELETE": "admin_faults_clear"},
    "/_admin/rate-limits": {"GET": "admin_rate_limits_list", "POST": "admin_rate_limits_create",
                            "DELETE": "admin_rate_limits_clear"},
    "/_admin/config": {"GET": "admin_config_get", "POST": "admin_config_set"},
    "/_admin/stats": {"GET": "admin_stats", "DELETE": "admin_stats_clear"},
    "/_admin/reset": {"POST": "admin_reset"},
    "/_admin/magic-links": {"GET": "admin_magic_links"},
}


# --------------------------------------------------------------------------------------------
# HTTP layer
# --------------------------------------------------------------------------------------------


class BodyError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakePortalAPI/1.0"
    sys_version = ""
    disable_nagle_algorithm = True

    def version_string(self):
        return self.server_version

    def setup(self):
        self.timeout = self.server.app.idle_timeout
        super().setup()

    # The stdlib's own request logging includes the raw request line (and so the query
    # string); it is replaced by one sanitized line per request written by _dispatch.
    def log_request(self, code="-", size="-"):
        pass

    def log_message(self, format, *args):
        pass

    def log_error(self, format, *args):
        code = args[0] if args and isinstance(args[0], int) else "-"
        self.server.app.log("%s malformed or timed-out request (%s)" % (self.client_address[0], code))

    def send_error(self, code, message=None, explain=None):
        # Used by the stdlib for malformed requests; the default HTML page would echo the raw
        # request line (query string included) back, so answer with a fixed JSON body instead.
        self.log_error("code %d", code)
        self.close_connection = True
        self._send(Response(code, {"error": "Malformed request", "code": "MALFORMED_REQUEST"}))

    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    # ---- body -------------------------------------------------------------------------------

    def _read_exact(self, n):
        data = self.rfile.read(n)
        if len(data) != n:
            raise BodyError(400, "Incomplete request body")
        return data

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        if te:
            if te != "chunked":
                raise BodyError(400, "Unsupported Transfer-Encoding")
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                if not line.endswith(b"\n"):
                    raise BodyError(400, "Bad chunk")
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise BodyError(400, "Bad chunk size")
                if size == 0:
                    while True:  # trailers
                        trailer = self.rfile.readline(8192)
                        if trailer in (b"\r\n", b"\n", b""):
                            break
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    raise BodyError(413, "Request body too large")
                chunks.append(self._read_exact(size))
                self._read_exact(2)
            return b"".join(chunks)
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            raise BodyError(400, "Bad Content-Length")
        if n < 0:
            raise BodyError(400, "Bad Content-Length")
        if n > MAX_BODY_BYTES:
            raise BodyError(413, "Request body too large")
        return self._read_exact(n) if n else b""

    # ---- responses --------------------------------------------------------------------------

    def _send(self, resp):
        body = resp.body()
        try:
            self.send_response(resp.status)
            for name, value in resp.headers:
                self.send_header(name, value)
            self.send_header("Content-Type", getattr(resp, "content_type", "application/json; charset=utf-8"))
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            self.close_connection = True

    def _reset_connection(self):
        """Closes the TCP connection with RST (SO_LINGER 0) and no response."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            self.rfile.close()
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass

    def _fault_response(self, fault):
        status = fault["status"]
        headers = []
        if fault.get("retryAfterSeconds") is not None:
            headers.append(("Retry-After", str(fault["retryAfterSeconds"])))
        if status == 401:
            return Response(401, {}, [("WWW-Authenticate", "Bearer")] + headers)
        payload = fault["body"] if fault["body"] is not None else {
            "error": "Injected fault", "code": "INJECTED_FAULT"}
        return Response(status, payload, headers)

    # ---- dispatch ---------------------------------------------------------------------------

    def _dispatch(self):
        app = self.server.app
        started = time.monotonic()
        split = urllib.parse.urlsplit(self.path)
        path = split.path or "/"
        req = Request(self.command, path, urllib.parse.parse_qs(split.query, keep_blank_values=True),
                      self.headers, b"", self.client_address[0])
        req.raw_query = split.query
        is_admin = path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")
        route_key = "(admin)" if is_admin else app.api_route_key(path)

        # Stats and the log line are written before the response goes out, so a client that
        # has read a response always finds its request in /_admin/stats.
        def finish(status, fault_kind=None, record=True):
            ms = (time.monotonic() - started) * 1000.0
            if record and not is_admin:
                app.record(req, route_key, status, fault_kind, ms)
            shown = path if (is_admin or route_key != "(unmatched)") else printable_path(path)
            app.log("%s %s %s %s %.1fms%s" % (
                self.client_address[0], self.command, shown,
                "RESET" if status is None else status, ms,
                " (fault: %s)" % fault_kind if fault_kind else ""))

        try:
            req.body = self._read_body()
        except BodyError as err:
            self.close_connection = True
            resp = Response(err.status, {"error": err.message, "code": "BAD_REQUEST_BODY"})
            finish(resp.status)
            self._send(resp)
            return

        if is_admin:
            if not is_loopback(self.client_address[0]):
                resp = Response(403, {"error": "Admin API is loopback-only", "code": "FORBIDDEN"})
            else:
                resp = app.handle_admin(req)
            finish(resp.status)
            self._send(resp)
            return

        fault = app.take_fault(self.command, path)
        fault_kind = None
        if fault is not None:
            if fault["delayMs"]:
                time.sleep(fault["delayMs"] / 1000.0)
                fault_kind = "delay"
            if fault["when"] == "before":
                if fault["reset"]:
                    finish(None, "reset")
                    self._reset_connection()
                    return
                if fault["status"] is not None:
                    resp = self._fault_response(fault)
                    finish(resp.status, "status")
                    self._send(resp)
                    return

        resp = app.handle_api(req)

        if fault is not None and fault["when"] == "after":
            if fault["reset"]:
                finish(None, "reset-after")
                self._reset_connection()
                return
            if fault["status"] is not None:
                resp = self._fault_response(fault)
                fault_kind = "status-after"

        finish(resp.status, fault_kind)
        self._send(resp)


class FakePortalServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, app):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.app = app
        super().__init__(address, Handler)

    def server_bind(self):
        # HTTPServer.server_bind would do a reverse DNS lookup (getfqdn); not wanted here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port


def make_base_url(host, port):
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = "[%s]" % host
    return "http://%s:%d" % (host, port)


def write_port_file(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.tmp.%d" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def parse_rate_limit(text):
    try:
        route, spec = text.rsplit("=", 1)
        limit, window = spec.split("/", 1)
        return {"route": route, "limit": int(limit), "windowSeconds": float(window)}
    except ValueError:
        raise argparse.ArgumentTypeError("expected ROUTE=LIMIT/SECONDS, got %r" % text)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fake Portal API server for tests and demos.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--auth-environment-id")
    parser.add_argument("--rate-limit", action="append", type=parse_rate_limit, default=[])
    parser.add_argument("--history", type=int, default=200)
    parser.add_argument("--idle-timeout", type=float, default=120.0)
    parser.add_argument("--exit-with-parent", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    app = App(auth_environment_id=args.auth_environment_id, rate_limits=args.rate_limit,
              history=args.history, quiet=args.quiet, idle_timeout=args.idle_timeout)
    server = FakePortalServer((args.host, args.port), app)
    port = server.server_address[1]
    app.base_url = make_base_url(args.host, port)
    if not is_loopback(args.host):
        app.log("warning: listening on non-loopback %s; /_admin/ still answers loopback peers only"
                % args.host)

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name="fake-portal-api", daemon=True)
    thread.start()

    if args.port_file:
        write_port_file(args.port_file, app.base_url)
    sys.stdout.write(app.base_url + "\n")
    sys.stdout.flush()
    app.log("listening on %s" % app.base_url)

    parent = os.getppid()
    while not stop.wait(0.25):
        if args.exit_with_parent and os.getppid() != parent:
            break
        if not thread.is_alive():
            break

    server.shutdown()
    server.server_close()
    if args.port_file:
        try:
            with open(args.port_file, encoding="utf-8") as fh:
                if fh.read().strip() == app.base_url:
                    os.remove(args.port_file)
        except OSError:
            pass
    app.log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
