#!/usr/bin/env bash
# gnome_reference_test.sh — builds the gi-docgen reference (make gobject-doc, into
# build/gobject/doc/), checks that its index names the PortalKeyring namespace and its classes,
# and screenshots the index in headless Chromium to build/gobject/gnome-reference.png (a PNG).
# PORTAL_UPDATE_SCREENSHOTS=1 also copies it to docs/images/gnome-reference.png.
# Tests/gobject/run.sh runs it when chromium is installed.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2
out=$repo/build/gobject
index=$out/doc/index.html
png=$out/gnome-reference.png
failed=0
check() { # WHAT COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; failed=$((failed + 1)); fi
}
is_png() { [[ -s $1 && $(head -c 8 "$1" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; }

check "make gobject-doc" make -s gobject-doc
check "the index names the namespace PortalKeyring – 1" grep -q '<h1>PortalKeyring' "$index"
for class in Auth Portal Session SignInResult Watch; do
    check "class $class has its page" test -s "$out/doc/class.$class.html"
done
rm -f "$png"
sandbox=()
[[ $(id -u) == 0 ]] && sandbox=(--no-sandbox) # Chromium refuses root without it
# Its own profile under build/, no session bus: nothing of the test's keyring bus or the user's.
# Its chatter (no system bus, no UPower) goes to build/gobject/chromium.log.
screenshot() {
    env DBUS_SESSION_BUS_ADDRESS=disabled: timeout 60 chromium --headless "${sandbox[@]}" --disable-gpu \
        --hide-scrollbars --user-data-dir="$out/chromium-profile" --window-size=1280,900 \
        --screenshot="$png" "file://$index" >"$out/chromium.log" 2>&1
}
check "headless Chromium screenshots the index (log: build/gobject/chromium.log)" screenshot
check "the screenshot is a non-empty PNG" is_png "$png"
[[ ${PORTAL_UPDATE_SCREENSHOTS:-} == 1 ]] && cp "$png" docs/images/gnome-reference.png
echo "gnome_reference: $failed failed"
((failed == 0))
