#!/usr/bin/env bash
# glib_app_check.sh — runs examples/c/glib_app end to end (Tests/c/run.sh calls it inside
# scripts/with-keyring.sh and scripts/with-portal-api.sh):
#   glib_app_check.sh BUILD_DIR/glib_app
# A valid session restores and validates (exit 0); after the backend revoked it, the next launch
# restores it, the validation gets 401 and the invalidation arrives on the main thread (exit 3);
# then it is signed out (exit 1). persist_session from the same build directory stores the session.
set -euo pipefail
app=$1
persist=$(dirname "$app")/persist_session
env_id="glib-app-$$"
api=${PORTAL_TEST_API_URL:?run inside scripts/with-portal-api.sh}
host=${PORTAL_TEST_API_HOST:?}
admin() { # ROUTE JSON -> the response's data.token, if any
    python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=sys.argv[2].encode(),headers={"Content-Type":"application/json"}); print(json.load(u.urlopen(r))["data"].get("token",""))' "$api/_admin/$1" "$2"
}
expect() { # WANTED_RC LINE -- COMMAND...
    local want=$1 line=$2 rc=0 out
    shift 3
    out=$("$@" 2>&1) || rc=$?
    if ((rc != want)) || ! grep -qxF -- "$line" <<<"$out"; then
        printf 'glib_app: exit %d (wanted %d), no line "%s" in:\n%s\n' "$rc" "$want" "$line" "$out" >&2
        exit 1
    fi
}
token=$(admin sessions '{"endUserId":"glib-user"}')
printf '%s' "$token" | "$persist" "$env_id" glib-user >/dev/null
expect 0 "validation answered HTTP 200 (main thread)" -- "$app" "$env_id" "$host"
admin revoke "{\"token\":\"$token\"}" >/dev/null
expect 3 "session invalidated (main thread) — show sign-in" -- "$app" "$env_id" "$host"
expect 1 "signed out — show sign-in" -- "$app" "$env_id" "$host"
echo "glib_app: restored and validated, invalidation on the main thread, then signed out"
