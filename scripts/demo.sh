#!/usr/bin/env bash
# demo.sh — the README's demo command: the main job end to end.
#
#   scripts/demo.sh
#
# Installs what is missing (Debian, as root), builds the library and the C examples, then — on a
# private throwaway keyring (scripts/with-keyring.sh) and the loopback Portal API
# (scripts/with-portal-api.sh) — shows, each step a separate process:
#   1. first launch after install: clear, restore → signed out;
#   2. sign-in: the app waits with portal-session watch (no polling); portal-session
#      send-magic-link (with the sender and template Portal requires), then the emailed link goes through the desktop handler's command,
#      portal-session handle-redirect, which persists the session, and the watch prints
#      "signed-in EU" at once;
#   3. restore_on_launch (C) and portal-session restore restore it without a network call;
#   4. portal-session clear signs out; restore → signed out;
#   5. a CST from the app's backend is persisted (persist_session, token on stdin);
#      check_session: restore → Portal validates the CST (200);
#   6. the Portal API revokes the CST; check_session: the request is rejected → the listener
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
    for example in restore_on_launch persist_session check_session; do
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
export PORTAL_AUTH_ENVIRONMENT_ID=$env_id PORTAL_API_HOST=$PORTAL_TEST_API_HOST PORTAL_REDIRECT_URL=example-app://portal/redirect
PATH=$PWD/.build/debug:$PATH

say "# 1. first launch after install: a clean slate, then restore"
run $bin/restore_on_launch "$env_id"

say "# 2. sign-in with a magic link; the app waits for it with a watch (no polling)"
say "portal-session watch &    # the app, waiting for the sign-in another process completes"
: >"$bin/watch.out"  # emptied before it starts: the last demo's "watching" must not count
: >"$bin/watch.err"
portal-session watch >"$bin/watch.out" 2>"$bin/watch.err" &
watch_pid=$!
for _ in $(seq 100); do grep -q '^watching' "$bin/watch.err" && break; sleep 0.05; done
# Portal sends a magic link only with a sender and an email template of the auth environment.
run portal-session send-magic-link demo@example.com --from-email login@example-app.test --template-id demo-signin
sent=$(admin GET magic-links | python3 -c 'import json,sys; l=json.load(sys.stdin)["links"][-1]; print(l["fromEmail"], l["templateId"])')
echo "(the Portal API sent it from ${sent% *} with template ${sent#* })"
link=$(admin GET magic-links | python3 -c 'import json,sys; print(json.load(sys.stdin)["links"][-1]["link"])')
echo "(the email arrives; the end user clicks the link; the desktop's URL handler runs:)"
say "portal-session handle-redirect '${link%%\?*}?token=…&authMethod=EMAIL_MAGIC_LINK'"
portal-session handle-redirect "$link" || printf '(exit status %d)\n' "$?"
for _ in $(seq 100); do [[ -s $bin/watch.out ]] && break; sleep 0.05; done
echo "(the waiting app's watch printed, as soon as the handler had stored the session:)"
cat "$bin/watch.out"
kill -TERM "$watch_pid" && wait "$watch_pid" || true

say "# 3. next launch: restore without a network call, from separate processes"
run $bin/restore_on_launch "$env_id"
run portal-session restore --json

say "# 4. sign out"
run portal-session clear
run $bin/restore_on_launch "$env_id"

say "# 5. a CST from the app's own backend (custodian-created session), token on stdin"
issued=$(admin POST sessions '{"endUserId":"eu_demo_42"}')
token=$(field "$issued" token)
printf '%s\n' "$token" | $bin/persist_session "$env_id" eu_demo_42
run $bin/check_session "$env_id" "$PORTAL_TEST_API_HOST"

say "# 6. the Portal backend revokes the CST"
admin POST revoke "{\"token\": \"$token\"}" >/dev/null && echo "revoked"
run $bin/check_session "$env_id" "$PORTAL_TEST_API_HOST"
run $bin/restore_on_launch "$env_id"
echo
echo "Demo finished: the private keyring and the Portal API are being stopped."
