#!/usr/bin/env bash
# Tests/cli/hardening.sh — the portal-session process itself:
#
#   swift build && scripts/with-keyring.sh scripts/with-portal-api.sh Tests/cli/hardening.sh
#
#  1. argv: a handle-redirect blocked in the grant exchange (the fake Portal API delays
#     /api/v3/auth/* by 4 s) is looked at from outside: its /proc/PID/cmdline, what ps and any
#     local user see, must not contain the grant, while the URL's scheme and path remain; also
#     for a private-use redirect URL without an authority (com.example.app:/cb, RFC 8252 §7.1).
#  2. core dumps: the same blocked handler, with `ulimit -c unlimited` and the kernel's
#     core_pattern writing a file in the working directory, is killed with SIGSEGV: no core file
#     may appear (the process is non-dumpable). Control: a `sleep` killed the same way in the
#     same directory leaves a core file (so the check can fail). Skipped, with the reason, when
#     core_pattern is a pipe (systemd-coredump, apport): then the file is not ours to see.
# Exits 1 if any check failed.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
for var in PORTAL_TEST_KEYRING_PID PORTAL_TEST_API_URL PORTAL_TEST_API_HOST; do
    [[ -n ${!var:-} ]] || { echo "cli/hardening.sh: $var unset: run inside scripts/with-keyring.sh scripts/with-portal-api.sh" >&2; exit 2; }
done
[[ -x $ps_bin ]] || { echo "cli/hardening.sh: $ps_bin not built (swift build)" >&2; exit 2; }

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
admin() { # admin METHOD PATH [JSON] → the "data" member as JSON
    python3 - "$PORTAL_TEST_API_URL/_admin/$2" "$1" "${3:-}" <<'PY'
import json, sys, urllib.request
url, method, body = sys.argv[1:4]
req = urllib.request.Request(url, method=method, data=body.encode() or None, headers={"Content-Type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(req))["data"]))
PY
}
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }
# Waits (at most 10 s) until process PID has a TCP connection to the fake Portal API's port
# (then it is inside a request, which the fault delays).
wait_for_connection() {
    python3 - "$1" "${PORTAL_TEST_API_HOST##*:}" <<'PY'
import os, sys, time
pid, port = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
    except OSError:
        sys.exit(1)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).readlines()[1:]:
            f = line.split()
            if f[9] in inodes and int(f[2].rsplit(":", 1)[1], 16) == port and f[3] == "01":
                sys.exit(0)
    time.sleep(0.01)
sys.exit(1)
PY
}

redirect="portalkeyring://auth/callback"
env_id="cli-hardening-$$"
export PORTAL_MAGIC_LINK_FROM_EMAIL=login@example.com PORTAL_MAGIC_LINK_TEMPLATE_ID=tpl-cli
cli=("$ps_bin" --env "$env_id" --api-host "$PORTAL_TEST_API_HOST" --redirect-url "$redirect")
dir=$(mktemp -d "${TMPDIR:-/tmp}/cli-hardening.XXXXXX")
trap 'admin DELETE faults >/dev/null 2>&1; "${cli[@]}" clear >/dev/null 2>&1; rm -rf "$dir"' EXIT

# A handle-redirect for a sign-in this user started, blocked in the exchange; prints its pid.
start_blocked_handler() {
    "${cli[@]}" send-magic-link memsec@example.com >/dev/null 2>&1
    local grant url
    grant=$(admin POST grants "{\"kind\":\"magic_link\",\"endUserId\":\"eu-hardening\",\"redirectUrl\":\"$redirect\"}")
    url=$(field "$grant" redirectUrl)
    grant_token=$(field "$grant" token)
    admin POST faults '{"route":"/api/v3/auth/*","delayMs":4000,"count":1}' >/dev/null
    # SWIFT_BACKTRACE=enable=no: the Swift runtime's crash handler would otherwise catch the
    # signal and print a backtrace instead of the default action (a core dump).
    (cd "$dir" && ulimit -c unlimited && SWIFT_BACKTRACE=enable=no exec "${cli[@]}" handle-redirect "$url" >/dev/null 2>&1) &
    handler=$!
}

echo "== argv: the grant leaves /proc/PID/cmdline"
start_blocked_handler
if wait_for_connection "$handler"; then
    cmdline=$(tr '\0' ' ' <"/proc/$handler/cmdline")
    if [[ -z $grant_token ]]; then
        bad "the fake Portal API returned no grant token"
    elif [[ $cmdline == *"$grant_token"* ]]; then
        bad "/proc/$handler/cmdline of a running handle-redirect shows the grant: $cmdline"
    else
        ok "/proc/PID/cmdline of a blocked handle-redirect has no grant"
    fi
    if [[ $cmdline == *"handle-redirect $redirect"* ]]; then
        ok "its cmdline still shows the command and the URL without query ($cmdline)"
    else
        bad "cmdline lost more than the query: $cmdline"
    fi

    echo "== core dumps: the handler is non-dumpable"
    if [[ $(cat /proc/sys/kernel/core_pattern) == \|* ]]; then
        skip "core_pattern is a pipe ($(cat /proc/sys/kernel/core_pattern)): core files are not written here"
        kill "$handler" 2>/dev/null
        wait "$handler" 2>/dev/null
    else
        kill -SEGV "$handler"
        wait "$handler" 2>/dev/null
        status=$?
        if compgen -G "$dir/core*" >/dev/null; then
            bad "a core file was written for portal-session: $(ls "$dir")"
        else
            if ((status == 128 + 11)); then
                ok "no core file for portal-session killed by SIGSEGV"
            else
                bad "portal-session did not die of SIGSEGV (exit $status): the check proves nothing"
            fi
        fi
        (cd "$dir" && ulimit -c unlimited && exec sleep 30) &
        control=$!
        # Killed once it runs sleep (not the subshell before exec).
        for _ in $(seq 1 500); do [[ $(readlink "/proc/$control/exe" 2>/dev/null) == */sleep ]] && break; sleep 0.01; done
        kill -SEGV "$control"
        wait "$control" 2>/dev/null
        if compgen -G "$dir/core*" >/dev/null; then
            ok "control: a dumpable process (sleep) killed the same way leaves a core file"
        else
            bad "control: no core file for a dumpable process either (core_pattern $(cat /proc/sys/kernel/core_pattern)): the check above proves nothing"
        fi
        rm -f "$dir"/core*
    fi
else
    bad "the handler's grant exchange never reached the fake Portal API"
    kill "$handler" 2>/dev/null
fi

echo "== argv: a private-use redirect's grant (scheme:/path, no authority) leaves /proc/PID/cmdline"
redirect="com.example.app:/oauth2redirect"
cli=("$ps_bin" --env "$env_id" --api-host "$PORTAL_TEST_API_HOST" --redirect-url "$redirect")
start_blocked_handler
if wait_for_connection "$handler"; then
    cmdline=$(tr '\0' ' ' <"/proc/$handler/cmdline")
    if [[ -z $grant_token ]]; then
        bad "the fake Portal API returned no grant token"
    elif [[ $cmdline == *"$grant_token"* ]]; then
        bad "/proc/$handler/cmdline of a handle-redirect of $redirect shows the grant: $cmdline"
    elif [[ $cmdline == *"handle-redirect $redirect"* ]]; then
        ok "no grant in the cmdline of a blocked handle-redirect of $redirect ($cmdline)"
    else
        bad "cmdline lost more than the query: $cmdline"
    fi
else
    bad "the private-use handler's grant exchange never reached the fake Portal API"
fi
kill "$handler" 2>/dev/null
wait "$handler" 2>/dev/null

harness_summary cli/hardening.sh
