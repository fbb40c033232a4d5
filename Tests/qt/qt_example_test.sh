#!/usr/bin/env bash
# qt_example_test.sh — examples/qt driven headless (QT_QPA_PLATFORM=offscreen) through lines on its
# stdin, reading its "state: …" lines: signed out → the magic link emailed and opened → "Signed in
# as" its end user → the window as a PNG → another process's sign-out → signed in again → the API
# revokes the session and Check gets a 401 → the sign-in screen. Run by Tests/qt/run.sh (which
# exports $out, the build directory, and builds $out/qt_example and $out/qt_test).
# PORTAL_UPDATE_SCREENSHOTS=1 writes the PNG to docs/images/qt-example.png.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2
source "$repo/Tests/lib/harness.sh"
export PORTAL_AUTH_ENVIRONMENT_ID=qt-example-env PORTAL_API_HOST=$PORTAL_TEST_API_HOST
export PORTAL_MAGIC_LINK_FROM=login@example.com PORTAL_MAGIC_LINK_TEMPLATE=template-1 QT_QPA_PLATFORM=offscreen
# One log per event dispatcher (Tests/qt/run.sh runs the example under both).
log=$out/qt_example-app${QT_NO_GLIB:+-qt-dispatcher}.log
admin() { # METHOD PATH JSON PICK
    python3 -c 'import json,sys,urllib.request as u; b=sys.argv[3]; r=u.Request(sys.argv[1]+sys.argv[2],data=b.encode() if b else None,method=sys.argv[4],headers={"Content-Type":"application/json"}); d=json.load(u.urlopen(r)); print(eval(sys.argv[5]))' \
        "$PORTAL_TEST_API_URL" "$2" "$3" "$1" "$4"
}
# expect WHAT ERE: a state line after the last one expected matches "state: ERE" (within 10 s).
seen=0
expect() {
    local what=$1 ere=$2 i n
    for ((i = 0; i < 200; i++)); do
        n=$(grep '^state: ' "$log" | tail -n +$((seen + 1)) | grep -nE -m1 "^state: $ere" | cut -d: -f1)
        if [[ -n $n ]]; then
            seen=$((seen + n))
            ok "$what"
            return
        fi
        sleep 0.05
    done
    fail "$what (wanted state: $ere; log: ${log#"$repo/"})"
    detail "$(tail -n 5 "$log")"
}
"$out/qt_test" --clear || fail "clearing the example's stored session"
coproc app { exec "$out/qt_example" >"$log" 2>&1; }
say() { printf '%s\n' "$*" >&"${app[1]}"; }
sign_in() {
    say "email $1"
    expect "$2: the magic link emailed" "sent $1"
    link=$(admin GET /_admin/magic-links "" 'd["data"]["links"][-1]["link"]')
    user=$(admin GET /_admin/magic-links "" 'd["data"]["links"][-1]["endUserId"]')
    say "open $link"
    expect "$2: opened, signed in as its end user" "signed-in $user"
}
expect "launch: nothing stored, the sign-in screen" "sign-in"
sign_in demo@example.com "sign-in"
shot=$out/qt-example${QT_NO_GLIB:+-qt-dispatcher}.png
[[ ${PORTAL_UPDATE_SCREENSHOTS:-} == 1 ]] && shot=$repo/docs/images/qt-example.png
say "screenshot $shot"
expect "the window grabbed as a PNG" "screenshot saved"
check "the PNG is an image" bash -c "file '$shot' | grep -q 'PNG image data'"
"$out/qt_test" --clear || fail "another process's sign-out"
expect "another process's sign-out: back to the sign-in screen" "sign-in Signed out in another window"
sign_in demo@example.com "again"
admin POST /_admin/revoke "{\"endUserId\": \"$user\"}" 'd' >/dev/null
say check
expect "a 401 after the API revoked the session: back to the sign-in screen" "sign-in Your session ended"
say quit
wait "$app_PID" && ok "the app quit cleanly" || fail "the app's exit status"
harness_summary "qt_example_test.sh"
