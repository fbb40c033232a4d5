#!/usr/bin/env bash
# gnome_example_test.sh — examples/gnome/main.js (GTK 4, libadwaita, GJS) end to end on a private
# Xvfb display, against the private keyring and the fake Portal API (Tests/gobject/run.sh runs it
# with GI_TYPELIB_PATH and LD_LIBRARY_PATH on build/gobject). Driven only through the app's
# GApplication actions (gapplication action, on the private session bus) and its `open` (a second
# instance with the redirect URL, as the desktop starts it), checked through its state lines:
#   signed out → the magic link emailed and opened → signed in as its end user → the window as a
#   PNG (build/gobject/gnome-example.png) → another process signs out → signed out → a TOTP grant
#   opened and the code verified → signed in → a request while the API takes 1.5 s → the API
#   revokes the session and the app's request gets 401 → signed out. Meanwhile
#   Tests/gobject/main_loop_probe.py measures how long the app's main loop keeps a D-Bus call
#   waiting: a blocking call on the loop (the keyring, the network) would show as seconds.
# PORTAL_UPDATE_SCREENSHOTS=1 also copies the PNG to docs/images/gnome-example.png.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2
out=$repo/build/gobject
app_id=org.example.PortalKeyringDemo
log=$out/gnome-example-app.log
png=$out/gnome-example.png
export PORTAL_AUTH_ENVIRONMENT_ID=gnome-example-$$ PORTAL_API_HOST=${PORTAL_TEST_API_HOST:?}
export PORTAL_MAGIC_LINK_FROM=login@example.com PORTAL_MAGIC_LINK_TEMPLATE=demo-template
export GDK_BACKEND=x11 GSK_RENDERER=cairo NO_AT_BRIDGE=1 GTK_A11Y=none
unset WAYLAND_DISPLAY
failed=0
check() { # WHAT COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; failed=$((failed + 1)); fi
}
admin() { # METHOD PATH [JSON] PYTHON_EXPR_OF_d: prints the expression over the answer d
    python3 -c 'import sys; sys.path.insert(0, "Tests/gobject"); from fake_api_admin import admin
d = admin(sys.argv[1], sys.argv[2], sys.argv[3] or None)["data"]; print(eval(sys.argv[4]))' "$@"
}
# wait_line N LINE: the app printed LINE N times (within 10 s).
wait_line() {
    local n=$1 line=$2 end=$((SECONDS + 10))
    ((failed == 0)) || return 1 # one step failed: the next ones cannot pass, fail them fast
    while (($(grep -cxF -- "$line" "$log") < n)); do
        ((SECONDS < end)) || return 1
        sleep 0.05
    done
}
action() { gapplication action "$app_id" "$@"; }

mkdir -p "$out" docs/images
exec 3>"$out/gnome-example-display"
Xvfb -displayfd 3 -screen 0 1280x900x24 -nolisten tcp >"$out/gnome-example-xvfb.log" 2>&1 &
xvfb=$!
exec 3>&-
for _ in $(seq 100); do [[ -s $out/gnome-example-display ]] && break; sleep 0.05; done
export DISPLAY=:$(cat "$out/gnome-example-display")
gjs -m examples/gnome/main.js >"$log" 2>&1 &
app=$!
trap 'kill "$app" "$xvfb" "${probe:-}" 2>/dev/null; wait 2>/dev/null' EXIT

check "launched signed out: the sign-in screen" wait_line 1 "state: signed-out"
/usr/bin/python3 Tests/gobject/main_loop_probe.py "$app_id" "$out/gnome-example-probe" &
probe=$!
action send-magic-link "'demo@example.com'"
check "send-magic-link: Portal emails the link" wait_line 1 "sent: demo@example.com"
link=$(admin GET /_admin/magic-links "" 'd["links"][-1]["link"]')
user=$(admin GET /_admin/magic-links "" 'd["links"][-1]["endUserId"]')
gjs -m examples/gnome/main.js "$link" >>"$out/gnome-example-open.log" 2>&1
check "the link opened (a second instance hands it over): signed in as $user" \
    wait_line 1 "state: signed-in $user"
action screenshot "'$png'"
check "the signed-in window as a PNG" wait_line 1 "screenshot: $png"
check "the PNG is a PNG" bash -c '[[ $(head -c 8 "$1" | od -An -tx1 | tr -d " \n") == 89504e470d0a1a0a ]]' _ "$png"
[[ ${PORTAL_UPDATE_SCREENSHOTS:-} == 1 ]] && cp "$png" docs/images/gnome-example.png

gjs -m Tests/gobject/gjs_watch_test.js clear "$PORTAL_AUTH_ENVIRONMENT_ID"
check "another process signs out: back to sign-in (the watch)" wait_line 2 "state: signed-out"

# An end user with a second factor: the link, then the code screen.
totp_user=$(admin POST /_admin/end-users '{"email":"totp@example.com","totpRequired":true}' 'd["endUserId"]')
action send-magic-link "'totp@example.com'"
check "send-magic-link again" wait_line 1 "sent: totp@example.com"
link=$(admin GET /_admin/magic-links "" 'd["links"][-1]["link"]')
gjs -m examples/gnome/main.js "$link" >>"$out/gnome-example-open.log" 2>&1
check "a TOTP grant: the code screen" wait_line 1 "state: totp-required"
action verify-totp "'$(admin GET "/_admin/totp?endUserId=$totp_user" "" 'd["code"]')'"
check "the code verified: signed in as $totp_user" wait_line 1 "state: signed-in $totp_user"

# The API slow: the request waits off the main loop.
admin POST /_admin/faults '{"route":"/api/v3/clients/me","delayMs":1500}' 'd' >/dev/null
action check
check "a request while the API takes 1.5 s answers 200" wait_line 1 "check: HTTP 200"
admin DELETE /_admin/faults "" 'd' >/dev/null
kill -TERM "$probe" && wait "$probe"
worst=$(cat "$out/gnome-example-probe")
check "the main loop answered D-Bus within ${LOOP_LIMIT_MS:=500} ms throughout, the slow request too (worst $worst ms)" \
    python3 -c 'import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))' "$worst" "$LOOP_LIMIT_MS"

admin POST /_admin/revoke "{\"endUserId\":\"$totp_user\"}" 'd' >/dev/null
action check
check "the app's request after the API revoked the session answers 401" wait_line 1 "check: HTTP 401"
check "back to sign-in" wait_line 3 "state: signed-out"
# The watch also sees the stored session go; the app tells the end user why only from the portal.
check "the portal's session-invalidated reached the app" wait_line 1 "invalidated"
action quit
check "quit" timeout 5 tail --pid="$app" -f /dev/null
check "no error printed" bash -c '! grep -iE "error|critical|warning" "$1"' _ "$log"
echo "gnome_example: $failed failed"
((failed == 0))
