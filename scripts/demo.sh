#!/usr/bin/env bash
# demo.sh — the README's demo command: the main job end to end.
#
#   scripts/demo.sh
#
# Installs what is missing (Debian, as root), builds the library and the C examples, then — on a
# private throwaway keyring (scripts/with-keyring.sh) and the loopback Portal API
# (scripts/with-portal-api.sh) — shows, each step a separate process:
#   1. first launch after install: clear, restore → signed out;
#   2. sign-in: the Portal API issues a CST, persist_session stores it (token on stdin);
#   3. restore_on_launch restores it (no network); sign_out clears it; restore → signed out;
#   4. sign in again; check_session: restore → Portal validates the CST (200);
#   5. the Portal API revokes the CST; check_session: the request is rejected → the listener
#      fires → the stored session is deleted; restore_on_launch → signed out.
# PORTAL_KEYRING_REAL=1 runs steps against your desktop's real keyring instead (it only touches
# the items of the demo's auth environment).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} != --inside ]]; then
    # shellcheck source=scripts/deps.sh
    source scripts/deps.sh
    echo "building…"
    swift build 2>&1 | grep -E "error|Compiling|Build complete" | grep -v "^\[" | tail -n 2
    mkdir -p build/demo
    for example in restore_on_launch persist_session sign_out check_session; do
        gcc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -O1 -o "build/demo/$example" "examples/c/$example.c" \
            -IInclude -L.build/debug -lportal-keyring -Wl,-rpath,"$PWD/.build/debug" -lpthread
    done
    exec scripts/with-keyring.sh scripts/with-portal-api.sh "$0" --inside
fi

bin=build/demo
env_id="demo-auth-env"
admin() { # admin METHOD PATH [JSON] — the loopback Portal API's admin routes
    python3 - "$PORTAL_TEST_API_URL/_admin/$2" "$1" "${3:-}" <<'PY'
import json, sys, urllib.request
url, method, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, method=method, data=body.encode() or None,
                             headers={"Content-Type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(req))["data"]))
PY
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@" || printf '(exit status %d)\n' "$?"; }

echo "Private keyring on $DBUS_SESSION_BUS_ADDRESS; Portal API at $PORTAL_TEST_API_URL"

run $bin/restore_on_launch "$env_id"

say "sign-in: the Portal API issues a Client Session Token for end user eu_demo_42"
issued=$(admin POST sessions '{"endUserId":"eu_demo_42"}')
token=$(field "$issued" token)
echo "CST issued (not shown)"
say "persist_session $env_id eu_demo_42 <<< \"\$CST\""
printf '%s\n' "$token" | $bin/persist_session "$env_id" eu_demo_42

run $bin/restore_on_launch "$env_id"
run $bin/sign_out "$env_id"
run $bin/restore_on_launch "$env_id"

say "sign in again"
printf '%s\n' "$token" | $bin/persist_session "$env_id" eu_demo_42
run $bin/check_session "$env_id" "$PORTAL_TEST_API_HOST"

say "the Portal API revokes the CST"
admin POST revoke "{\"token\": \"$token\"}" >/dev/null && echo "revoked"
run $bin/check_session "$env_id" "$PORTAL_TEST_API_HOST"
run $bin/restore_on_launch "$env_id"
echo
echo "Demo finished: the private keyring and the Portal API are being stopped."
