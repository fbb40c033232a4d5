#!/usr/bin/env bash
# plain_refused.sh — a provider that offers no encrypted transfer session (OpenSession answers
# NotSupported for dh-ietf1024-sha256-aes128-cbc-pkcs7 and accepts only "plain") never receives
# a session: persist, restore and clear fail with exit 2 and a message naming the reason, and the
# provider sees no CreateItem and no GetSecrets (the token would cross the bus in clear).
#
# Runs its own private session bus (dbus-run-session) with Tests/tools/plain_only_provider.c as
# the only provider. Usage: Tests/providers/plain_refused.sh  (after `swift build`)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
build=$repo/build
mkdir -p "$build"
gcc -Wall -Wextra -Werror -o "$build/plain_only_provider" "$repo/Tests/tools/plain_only_provider.c" \
    $(pkg-config --cflags --libs gio-2.0) || { echo "plain_refused.sh: FAIL: build the fake provider"; exit 1; }

if [[ ${1:-} != --inside ]]; then
    exec timeout 120 dbus-run-session -- "$0" --inside
fi

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
log=$(mktemp)
"$build/plain_only_provider" >"$log" 2>&1 &
provider=$!
trap 'kill $provider 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q '^ready' "$log" && break; sleep 0.05; done
grep -q '^ready' "$log" || { echo "plain_refused.sh: FAIL: the fake provider did not start: $(cat "$log")"; exit 1; }

echo "== a provider that only offers the plain transfer algorithm"
marker="plain-marker-$$-$RANDOM"
refused() { # name expected-exit -- args…  (stdin from $input)
    local name=$1 want=$2; shift 3
    local err out code
    err=$(mktemp)
    out=$(printf '%s' "${input:-}" | "$ps_bin" --env plain-refused --timeout-ms 3000 "$@" 2>"$err")
    code=$?
    if [[ $code == "$want" ]] && grep -q "no encrypted transfer session" "$err"; then
        ok "$name: exit $code, $(head -c 160 "$err")"
    else
        bad "$name: exit $code (wanted $want with 'no encrypted transfer session'); stdout: $out; stderr: $(cat "$err")"
    fi
    rm -f "$err"
}
input=$marker refused "persist is refused" 2 -- persist --end-user-id eu_plain
input='' refused "restore is refused (not 'signed out')" 2 -- restore
input='' refused "clear is refused (not 'cleared')" 2 -- clear
if grep -qE '^CALL (CreateItem|GetSecrets)' "$log"; then
    bad "the provider received CreateItem or GetSecrets: $(grep -E '^CALL' "$log" | sort | uniq -c | tr '\n' ' ')"
else
    ok "no secret was sent or requested ($(grep -cE '^CALL OpenSession' "$log") OpenSession calls, nothing else)"
fi
if grep -q "$marker" "$log"; then bad "the token reached the provider"; else ok "the token never reached the provider"; fi

harness_summary plain_refused.sh
