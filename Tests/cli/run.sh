#!/usr/bin/env bash
# Tests/cli/run.sh — the portal-session command and the desktop redirect handler, end to end.
#
#   swift build && scripts/with-keyring.sh scripts/with-portal-api.sh Tests/cli/run.sh
#
# Checks every subcommand and exit code against the private keyring and the loopback Portal
# API, that a token never appears in output (without --show-token) or in any process's argv,
# and runs examples/desktop/*.desktop's Exec line the way a desktop does (%u expanded) before
# restoring the session from another process. Exits 1 if any check failed.
#
# Provider-aware (scripts/with-keyring.sh --provider, $PORTAL_TEST_PROVIDER): on
# gnome-keyring-locked the keyring is locked when this starts (first check: that is reported as
# locked, not signed out), and "lock" means a daemon restart that loads it locked from disk
# (scripts/keyring-restart.sh), since Service.Lock in a running daemon does not reproduce that;
# on gnome-keyring-passwordless a lock is undone by any reader without a prompt, so the locked
# checks are replaced by "lock, then everything still works" and a restart that re-reads the
# keyring file must give the token back byte-exact. Provider flatpak: run inside a Flatpak sandbox
# by Tests/flatpak/cli.sh (the file keyring keyed by the Secret portal); the locked checks are
# Tests/flatpak/run.sh's there, and libsecret's secret-tool stands in for keyringctl.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
kctl=${PORTAL_TEST_KEYRINGCTL:-$repo/build/keyringctl}
for var in PORTAL_TEST_KEYRING_PID PORTAL_TEST_API_URL PORTAL_TEST_API_HOST; do
    [[ -n ${!var:-} ]] || { echo "cli/run.sh: $var unset: run inside scripts/with-keyring.sh scripts/with-portal-api.sh" >&2; exit 2; }
done
[[ -x $ps_bin ]] || { echo "cli/run.sh: $ps_bin not built (swift build)" >&2; exit 2; }
[[ -x $kctl ]] || { echo "cli/run.sh: keyringctl not built at $kctl" >&2; exit 2; }

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
# expect STATUS DESCRIPTION -- CMD...   (stdout in $out, stderr in $err)
expect() { expect_exit "$@"; } # WANT DESCRIPTION -- COMMAND...
admin() { # admin METHOD PATH [JSON] → the "data" member as JSON
    python3 - "$PORTAL_TEST_API_URL/_admin/$2" "$1" "${3:-}" <<'PY'
import json, sys, urllib.request
url, method, body = sys.argv[1:4]
req = urllib.request.Request(url, method=method, data=body.encode() or None, headers={"Content-Type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(req))["data"]))
PY
}
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }

export PORTAL_API_HOST=$PORTAL_TEST_API_HOST
# Portal sends magic links only with a sender and a template: every send-magic-link below gets
# them from the environment, as a desktop integration would ("magic-link contract" checks the
# options, and their absence).
export PORTAL_MAGIC_LINK_FROM_EMAIL=login@example.com PORTAL_MAGIC_LINK_TEMPLATE_ID=tpl-cli
provider=${PORTAL_TEST_PROVIDER:-gnome-keyring}
restart=${PORTAL_TEST_KEYRING_RESTART:-$repo/scripts/keyring-restart.sh}
# Plants and counts items (in a Flatpak sandbox $kctl is Tests/tools/keyringctl-sandbox.py).
kstore() { timeout 30 "$kctl" store --schema "$@"; }  # kstore SCHEMA K=V... (the secret on stdin)
kcount() { timeout 30 "$kctl" count --schema "$@"; }  # kcount SCHEMA K=V...: the number of items
# Lock the default collection the way this provider gets locked in real life.
lock_keyring() {
    case $provider in
    gnome-keyring-locked) "$restart" --locked >/dev/null ;;
    *) "$kctl" lock >/dev/null ;;
    esac
}
redirect="portalkeyring://auth/callback"
env_id="cli-$$"
cli=("$ps_bin" --env "$env_id" --redirect-url "$redirect")

echo "== usage and help"
expect 0 "--help" -- "$ps_bin" --help
for sub in restore clear persist send-magic-link login-with-google login-with-apple sign-in-with-google sign-in-with-apple \
    handle-redirect verify-totp status check watch; do
    expect 0 "$sub --help" -- "$ps_bin" "$sub" --help
    grep -q "usage: portal-session" <<<"$out" || bad "$sub --help prints no usage"
done
expect 64 "no auth environment" -- env -u PORTAL_AUTH_ENVIRONMENT_ID "$ps_bin" restore
expect 64 "unknown command" -- "${cli[@]}" frobnicate
expect 64 "unknown option" -- "${cli[@]}" restore --frob
expect 64 "token in argv is refused" -- "${cli[@]}" persist --end-user-id u --token secret
expect 64 "persist without --end-user-id" -- "${cli[@]}" persist
expect 64 "blank token on stdin" -- sh -c "printf '   \n' | \"\$@\" persist --end-user-id u" sh "${cli[@]}"
expect 64 "invalid --api-host" -- "$ps_bin" --env "$env_id" --api-host "evil.test/x" restore
grep -q "no scheme or path" <<<"$err" && ok "the --api-host message says why" || bad "api-host message: $err"
expect 64 "invalid UTF-8 in --env is refused, not repaired" -- "$ps_bin" --env $'bad\xff' restore
expect 64 "invalid UTF-8 in PORTAL_AUTH_ENVIRONMENT_ID" -- env PORTAL_AUTH_ENVIRONMENT_ID=$'bad\xff' "$ps_bin" restore
expect 64 "an empty redirect URL" -- "${cli[@]}" handle-redirect ""
expect 64 "an over-long --end-user-id" -- sh -c "printf 't\n' | \"\$@\" persist --end-user-id $(head -c 3000 /dev/zero | tr '\0' x)" sh "${cli[@]}"
grep -q "at most 2048 bytes" <<<"$err" && ok "the message gives the limit" || bad "end-user-id message: $err"

echo "== restore / persist / status / clear"
if [[ ${PORTAL_TEST_KEYRING_MODE:-} == locked ]]; then
    # Nothing can be known about a keyring that is locked since login: not "signed out".
    expect 2 "restore with the keyring locked since login" -- "${cli[@]}" --timeout-ms 3000 restore
    grep -qi "locked" <<<"$err" && ok "the message says locked" || bad "locked-since-login message: $err"
    "$kctl" unlock >/dev/null || bad "keyringctl unlock (locked since login)"
fi
echo "== GNU conventions, misuse, typos (after the locked-since-login check, which must come first)"
expect 64 "no command: usage error" -- "$ps_bin"
[[ -z $out ]] && grep -q "^usage: portal-session" <<<"$err" && ok "no command: usage on stderr, nothing on stdout" || bad "no command: stdout '$out' stderr '$err'"
expect 64 "help for an unknown command" -- "$ps_bin" help bogus
[[ -z $out ]] && grep -q "no command bogus" <<<"$err" && ok "help bogus: said on stderr" || bad "help bogus: stdout '$out' stderr '$err'"
expect 64 "help with a typo" -- "$ps_bin" help restor
grep -q "did you mean restore?" <<<"$err" && ok "help restor suggests restore" || bad "help restor: $err"
expect 0 "help" -- "$ps_bin" help
grep -q "^usage: portal-session" <<<"$out" && ok "help prints the usage on stdout" || bad "help: $out"
expect 64 "a misspelt command" -- "${cli[@]}" restor
[[ $(grep -c "did you mean restore?" <<<"$err") == 1 && $(grep -c "see: portal-session --help" <<<"$err") == 1 ]] \
    && ok "restor: one suggestion, one hint" || bad "restor: $err"
expect 64 "a misspelt option" -- "${cli[@]}" restore --jsn
grep -q "did you mean --json?" <<<"$err" && ok "--jsn suggests --json" || bad "--jsn: $err"
expect 0 "--version" -- "$ps_bin" --version
header_version=$(awk '/define PORTAL_KEYRING_VERSION_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' "$repo/Include/portal_keyring.h")
[[ $out == "portal-session $header_version" ]] && ok "--version prints the library's version ($header_version)" || bad "--version: '$out' (header $header_version)"
expect 64 "--version with an argument" -- "$ps_bin" --version extra
expect 64 "--version with another option" -- "$ps_bin" --version --json
# --json prints one object whatever the outcome, a usage error included (help: "--json prints").
usage_json() { # DESCRIPTION: $out is exactly one {"status":"usage","message":…} with a message
    if python3 -c 'import json,sys; o=json.loads(sys.argv[1]); sys.exit(0 if set(o)=={"status","message"} and o["status"]=="usage" and o["message"] else 1)' "$out" 2>/dev/null &&
        [[ $(wc -l <<<"$out") == 1 ]]; then
        ok "$1: one {status: usage, message} object on stdout"
    else
        bad "$1: stdout is not one usage object: $out"
    fi
}
usage_json "--version --json"
expect 64 "clear --json with an unknown option" -- "${cli[@]}" clear --json --frob
usage_json "clear --json --frob"
[[ $(field "$out" message) == *--frob* ]] && ok "the usage object's message names --frob" || bad "usage message: $out"
expect 64 "--json before an unknown command" -- "${cli[@]}" --json frobnicate
usage_json "--json frobnicate"
expect 64 "restore --json without an auth environment" -- env -u PORTAL_AUTH_ENVIRONMENT_ID "$ps_bin" restore --json
usage_json "restore --json without --env"
expect 64 "persist --json with an empty token (refused by the library)" -- sh -c 'printf "" | "$@" persist --json --end-user-id eu' sh "${cli[@]}"
usage_json "persist --json with an empty token"
expect 64 "persist --json with a blank --end-user-id" -- sh -c 'printf "tok" | "$@" persist --json --end-user-id " "' sh "${cli[@]}"
usage_json "persist --json with a blank --end-user-id"
expect 64 "a usage error without --json" -- "${cli[@]}" clear --frob
[[ -z $out ]] && ok "without --json a usage error prints nothing on stdout" || bad "clear --frob printed: $out"
expect 0 "help help" -- "$ps_bin" help help
grep -q "^usage: portal-session" <<<"$out" && ok "help help prints the usage" || bad "help help: $out"
expect 0 "-h" -- "$ps_bin" -h
grep -q "^usage: portal-session" <<<"$out" && ok "-h prints the usage" || bad "-h: $out"
expect 0 "restore -h" -- "$ps_bin" restore -h
grep -q "usage: portal-session \[--env ID\] restore" <<<"$out" && ok "restore -h prints restore's help" || bad "restore -h: $out"
expect 1 "--opt=value forms" -- "$ps_bin" --env="$env_id" --redirect-url="$redirect" --timeout-ms=4000 restore --json
[[ $(field "$out" authEnvironmentId) == "$env_id" ]] && ok "--env=ID is the auth environment" || bad "--env=ID: $out"
expect 1 "a repeated option: the last one wins (GNU getopt_long)" -- "$ps_bin" --env first --env "$env_id" restore --json
[[ $(field "$out" authEnvironmentId) == "$env_id" ]] && ok "--env first --env ID uses ID" || bad "repeated --env: $out"
expect 1 "an option overrides its environment variable" -- env PORTAL_AUTH_ENVIRONMENT_ID=from-env "$ps_bin" --env "$env_id" restore --json
[[ $(field "$out" authEnvironmentId) == "$env_id" ]] && ok "--env beats PORTAL_AUTH_ENVIRONMENT_ID" || bad "env override: $out"
expect 0 "a repeated --end-user-id: the last one is stored" -- sh -c "printf 't-rep\n' | \"\$@\" persist --end-user-id first --end-user-id=second" sh "$ps_bin" --env "$env_id-rep"
[[ $out == "stored session for end user second" ]] && ok "persist stored end user second" || bad "repeated --end-user-id: $out"
expect 0 "restore it" -- "$ps_bin" --env "$env_id-rep" restore
[[ $out == second ]] && ok "restore reads end user second" || bad "restore after repeated --end-user-id: $out"
expect 0 "clear --json" -- "$ps_bin" --env "$env_id-rep" clear --json
[[ $(field "$out" status) == cleared && $(field "$out" authEnvironmentId) == "$env_id-rep" ]] && ok "clear --json prints {status: cleared}" || bad "clear --json: $out"
expect 64 "a flag with a value" -- "${cli[@]}" restore --json=yes
grep -q -- "--json takes no value" <<<"$err" && ok "--json=yes: said why" || bad "--json=yes: $err"
expect 64 "an option the command does not take" -- "${cli[@]}" clear --show-token
grep -q "clear does not take --show-token" <<<"$err" && ok "clear --show-token: said why" || bad "clear --show-token: $err"
expect 64 "persist with the end user id as an argument" -- "${cli[@]}" persist eu_1
grep -q -- "--end-user-id" <<<"$err" && ok "the message names --end-user-id" || bad "persist eu_1: $err"
# A terminal on stdin: refused at once with a message, never a silent wait (a pty, 10 s bound).
pty_out=$(python3 - "${cli[@]}" persist --end-user-id eu-tty <<'PY'
import os, pty, subprocess, sys
master, slave = pty.openpty()
try:
    p = subprocess.run(sys.argv[1:], stdin=slave, capture_output=True, text=True, timeout=10)
    print(p.returncode, p.stderr.strip().replace("\n", " | "))
except subprocess.TimeoutExpired:
    print("timeout")
PY
)
[[ $pty_out == "64 "*"stdin, which is a terminal"* ]] && ok "persist with a terminal on stdin: exit 64 and a message" || bad "persist on a terminal: $pty_out"
expect 64 "a bad PORTAL_API_HOST" -- env PORTAL_API_HOST=https://api.portalhq.io "$ps_bin" --env "$env_id" restore
grep -q "invalid PORTAL_API_HOST" <<<"$err" && ! grep -q -- "--api-host" <<<"$err" && ok "the message names PORTAL_API_HOST" || bad "PORTAL_API_HOST: $err"
expect 64 "a bad --api-host is named as such" -- "$ps_bin" --env "$env_id" --api-host=https://api.portalhq.io restore
grep -q "invalid --api-host" <<<"$err" && ok "the message names --api-host" || bad "--api-host=: $err"
expect 64 "--redirect-url not-a-url" -- "$ps_bin" --env "$env_id" --redirect-url "not a url" status
grep -q "invalid --redirect-url: an absolute URL scheme://" <<<"$err" && ok "the message says what a redirect URL is" || bad "--redirect-url: $err"
expect 64 "a bad PORTAL_REDIRECT_URL" -- env PORTAL_REDIRECT_URL=myapp:x "$ps_bin" --env "$env_id" status
grep -q "invalid PORTAL_REDIRECT_URL" <<<"$err" && ok "the message names PORTAL_REDIRECT_URL" || bad "PORTAL_REDIRECT_URL: $err"
expect 74 "restore --json > /dev/full: a write error is reported" -- sh -c '"$@" >/dev/full' sh "${cli[@]}" restore --json
grep -q "could not write to stdout" <<<"$err" && ok "the message says stdout could not be written" || bad "/dev/full: $err"
expect 74 "persist with stdout closed is refused" -- sh -c "printf 't\n' | \"\$@\" persist --end-user-id eu-closed >&-" sh "${cli[@]}"
grep -q "stdout is closed: nothing done" <<<"$err" && ok "the message says stdout is closed" || bad "stdout closed: $err"
expect 1 "nothing was stored with stdout closed" -- "${cli[@]}" restore
expect 3 "a network failure" -- "${cli[@]}" --api-host 127.0.0.1:1 send-magic-link someone@example.com
[[ $err == *"127.0.0.1:1"* && $(grep -o -i network <<<"$err" | wc -l) == 1 ]] && ok "the message names the host and says network once" || bad "network failure: $err"
echo "== restore / persist / status / clear (continued)"
expect 1 "restore when signed out" -- "${cli[@]}" restore
expect 1 "status when signed out" -- "${cli[@]}" status
token="cst-cli-$$-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# The token travels on stdin; while persist runs, no process may carry it in argv.
( printf '%s\n' "$token"; sleep 0.3 ) | "${cli[@]}" persist --end-user-id eu-cli >/tmp/cli-out.$$ 2>&1 &
sleep 0.15
printf '%s\n' "$token" >/tmp/cli-pattern.$$ # grep reads the pattern from a file: its own argv stays clean
if grep -a -l -F -f /tmp/cli-pattern.$$ /proc/[0-9]*/cmdline 2>/dev/null | grep -q .; then bad "the token is visible in a process's argv"; else ok "the token is in no process's argv"; fi
wait $! && ok "persist (token on stdin)" || bad "persist failed: $(cat /tmp/cli-out.$$)"
expect 0 "restore" -- "${cli[@]}" restore
[[ $out == eu-cli ]] && ok "restore prints the end user id" || bad "restore printed '$out'"
expect 0 "restore --json" -- "${cli[@]}" restore --json
[[ $(field "$out" endUserId) == eu-cli && $(field "$out" status) == restored ]] && ok "restore --json fields" || bad "restore --json: $out"
grep -q -- "$token" <<<"$out$err" && bad "restore printed the token without --show-token" || ok "no token without --show-token"
expect 0 "restore --json --show-token" -- "${cli[@]}" restore --json --show-token
[[ $(field "$out" clientSessionToken) == "$token" ]] && ok "--show-token prints the exact token" || bad "--show-token: $out"
expect 0 "status" -- "${cli[@]}" status
grep -q "session stored" <<<"$out" && ! grep -q -- "$token" <<<"$out" && ok "status shows a stored session, no token" || bad "status: $out"
expect 0 "status --json" -- "${cli[@]}" status --json
[[ $(field "$out" secretMemory) == "locked in RAM"* ]] && ok "status: the token memory is locked in RAM" || bad "secretMemory: $out"
# Without CAP_IPC_LOCK (root has it; dropped from the bounding set) and with RLIMIT_MEMLOCK 0, no
# mlock succeeds: the token memory is used unlocked, and everything still works.
if command -v setpriv >/dev/null; then
    out=$(sh -c 'ulimit -l 0 && exec setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock -- "$@" status --json' sh "${cli[@]}" 2>/dev/null); rc=$?
    [[ $rc == 0 && $(field "$out" keyring) == "session stored" && $(field "$out" secretMemory) == *"not locked in RAM"* ]] &&
        ok "RLIMIT_MEMLOCK 0: status restores the session, memory reported unlocked" || bad "RLIMIT_MEMLOCK 0: exit $rc: $out"
fi
if [[ $provider == flatpak ]]; then
    [[ $(field "$out" backend) == "file keyring" && $(field "$out" secretPortal) == "version 1" ]] &&
        ok "status --json names the file keyring and the Secret portal's version" || bad "status --json in the sandbox: $out"
else
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); v=d.get("defaultCollectionLocked"); sys.exit(0 if v is False else 1)' "$out" \
        && ok "status --json: defaultCollectionLocked is the boolean false" || bad "status --json defaultCollectionLocked: $out"
fi
if [[ $provider == flatpak ]]; then
    skip "restore/status/persist while locked: in a Flatpak sandbox the host's keyring is locked from outside (Tests/flatpak/run.sh: RetrieveSecret answered 2)"
elif [[ $provider == gnome-keyring-passwordless || $provider == kwallet ]]; then
    skip "restore/status/persist while locked: $provider unlocks without a user, so libsecret undoes a lock (checked instead: lock, then restore still works)"
    "$kctl" lock >/dev/null || bad "keyringctl lock"
    expect 0 "restore after a lock of the passwordless keyring" -- "${cli[@]}" restore --json --show-token
    [[ $(field "$out" clientSessionToken) == "$token" ]] && ok "the same session after the lock" || bad "after the lock: $out"
    "$restart" --locked >/dev/null || bad "keyring-restart.sh --locked (re-read the keyring file)"
    expect 0 "restore after the daemon re-read the keyring file" -- "${cli[@]}" restore --json --show-token
    [[ $(field "$out" clientSessionToken) == "$token" ]] && ok "the token survives the keyring file byte-exact" || bad "after the restart: $out"
    # The stored document escapes these; the plain keyring file (which unescapes \\, \n, \t on
    # load) must not change them. (Persist refuses a real tab.)
    odd='back\slash"quoted"tab\tend\n'
    printf '%s\n' "$odd" | "${cli[@]}" persist --end-user-id eu-odd >/dev/null || bad "persist of a token with \\, \" and \\t"
    "$restart" --locked >/dev/null || bad "keyring-restart.sh --locked (re-read the keyring file)"
    expect 0 "restore of a token with \\, \" and \\t after a re-read" -- "${cli[@]}" restore --json --show-token
    [[ $(field "$out" clientSessionToken) == "$odd" ]] && ok "that token survives the keyring file byte-exact" || bad "after the restart: $out"
    printf '%s\n' "$token" | "${cli[@]}" persist --end-user-id eu-cli >/dev/null || bad "persist the first token again"
else
    lock_keyring || bad "locking the keyring ($provider)"
    expect 2 "restore while the keyring is locked" -- "${cli[@]}" --timeout-ms 3000 restore
    grep -qi "locked" <<<"$err" && ok "the message says locked" || bad "locked message: $err"
    grep -q "GDBus.Error" <<<"$err" && bad "a raw D-Bus error name in the message: $err" || ok "no raw D-Bus error name in the message"
    expect 2 "restore --json while locked still prints JSON" -- "${cli[@]}" --timeout-ms 3000 restore --json
    [[ $(field "$out" status) == unavailable ]] && ok "status unavailable in JSON" || bad "restore --json while locked: $out"
    expect 2 "status while locked" -- "${cli[@]}" status
    expect 2 "persist while locked" -- sh -c "printf 'other\n' | \"\$@\" persist --end-user-id eu-other" sh "${cli[@]}"
    expect 2 "clear while locked does not report cleared" -- "${cli[@]}" --timeout-ms 3000 clear
    expect 2 "clear --json while locked prints one JSON object" -- "${cli[@]}" --timeout-ms 3000 clear --json
    [[ $(field "$out" status) == unavailable && -n $(field "$out" message) ]] && ok "clear --json: status unavailable, with the message" ||
        bad "clear --json while locked: $out"
    "$kctl" unlock >/dev/null || bad "keyringctl unlock"
    expect 0 "restore after unlock keeps the session" -- "${cli[@]}" restore --json --show-token
    [[ $(field "$out" clientSessionToken) == "$token" ]] && ok "nothing was lost while locked" || bad "after unlock: $out"
fi
expect 0 "clear" -- "${cli[@]}" clear
expect 1 "restore after clear" -- "${cli[@]}" restore
expect 0 "clear when nothing is stored" -- "${cli[@]}" clear
expect 2 "no session bus → storage failure, not signed out" -- env DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent "${cli[@]}" restore

# --json keeps every character of a value (escaped), so a script reads back what was stored; no
# raw control character reaches the terminal.
# persist refuses control characters in a new end user id; an item stored by an earlier version
# (written here as it did) can hold them, and restore reads it.
odd_id=$(printf 'a\tb\\c\001d\302\233e')
expect 64 "persist refuses an end user id with a tab, \\001 and U+009B" -- \
    sh -c 'printf tok-odd | "$@"' sh "${cli[@]}" persist --end-user-id "$odd_id"
[[ $err == *"no control characters"* ]] && ok "the error says why" || bad "error: $err"
b64() { printf '%s' "$1" | basenc --base64url | tr -d '=\n'; }
printf 'portal-keyring-session/2 e=%s u=%s g=0f t=1 c=%s' "$(b64 "$env_id")" "$(b64 "$odd_id")" "$(b64 tok-odd)" |
    kstore io.portalhq.PortalKeyring.Session auth_environment_id="$env_id" session_generation=0f \
        persisted_at=1 >/dev/null || bad "keyringctl store of an earlier version's item"
expect 0 "restore --json" -- "${cli[@]}" restore --json
got_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["endUserId"], end="")' "$out")
[[ $got_id == "$odd_id" ]] && ok "the JSON endUserId is exactly the stored one" || bad "JSON endUserId: $(printf '%q' "$got_id")"
if LC_ALL=C grep -q $'[\x01-\x1f\x7f]\|\xc2[\x80-\x9f]' <<<"$out"; then bad "raw control characters in JSON: $(printf '%q' "$out")"
else ok "the JSON holds them escaped"; fi
expect 0 "clear" -- "${cli[@]}" clear
# An item dated far in the future (a clock that was ahead at an earlier sign-in, or another app's
# plant) neither survives a new sign-in nor outranks it: persist's success is what restore returns.
printf 'portal-keyring-session/2 e=%s u=%s g=0f t=18446744073709551615 c=%s' "$(b64 "$env_id")" "$(b64 planted-user)" "$(b64 tok-planted)" |
    kstore io.portalhq.PortalKeyring.Session auth_environment_id="$env_id" session_generation=0f \
        persisted_at=18446744073709551615 >/dev/null || bad "keyringctl store of a future-dated item"
expect 0 "persist after a future-dated item" -- sh -c "printf 'tok-new-user' | \"\$@\" persist --end-user-id new-user" sh "${cli[@]}"
expect 0 "restore after it" -- "${cli[@]}" restore --json
[[ $(field "$out" endUserId) == new-user ]] && ok "the new sign-in wins over the future-dated item" || bad "restore: $out"
[[ $(kcount io.portalhq.PortalKeyring.Session auth_environment_id="$env_id") == 1 ]] &&
    ok "the future-dated item is gone" || bad "items left: $(kcount io.portalhq.PortalKeyring.Session auth_environment_id="$env_id")"
expect 0 "clear" -- "${cli[@]}" clear

echo "== send-magic-link / handle-redirect / verify-totp"
expect 0 "send-magic-link" -- "${cli[@]}" send-magic-link "  CLI.User@Example.com "
link=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["links"][-1]["link"] if d["links"][-1]["email"]=="cli.user@example.com" else "")' "$(admin GET magic-links)")
[[ -n $link ]] && ok "the link was emailed to the normalized address" || bad "no link for cli.user@example.com"
expect 0 "handle-redirect of the emailed link" -- "${cli[@]}" handle-redirect "$link"
"${cli[@]}" clear >/dev/null
expect 64 "send-magic-link with an invalid address" -- "${cli[@]}" send-magic-link "no address"
grant=$(admin POST grants "{\"kind\":\"magic_link\",\"endUserId\":\"eu-link\",\"redirectUrl\":\"$redirect\"}")
url=$(field "$grant" redirectUrl)
"${cli[@]}" login-with-google >/dev/null || bad "login-with-google (starts the next sign-in)"
expect 0 "handle-redirect (magic link)" -- "${cli[@]}" handle-redirect "$url"
[[ $out == eu-link ]] && ok "prints the end user id" || bad "handle-redirect printed '$out'"
expect 0 "restore from another process" -- "${cli[@]}" restore
[[ $out == eu-link ]] && ok "the redirect's session was persisted" || bad "restore printed '$out'"
expect 4 "the same grant in a new process: the sign-in completed, so it is unsolicited" -- "${cli[@]}" handle-redirect "$url"
expect 3 "the used grant with --allow-unsolicited: invalid grant" -- "${cli[@]}" handle-redirect "$url" --allow-unsolicited
grep -q "start the sign-in again" <<<"$err" && ok "invalid grant: says to start the sign-in again" || bad "invalid grant: $err"
expect 1 "a foreign URL is not handled" -- "${cli[@]}" handle-redirect "https://example.com/callback?token=x"
expect 3 "an error redirect" -- "${cli[@]}" handle-redirect "$redirect?error=access_denied&authMethod=EMAIL_MAGIC_LINK"
# Attacker text from a redirect never drives the terminal; URLs are capped at 8192 bytes.
expect 3 "an error redirect with escape sequences" -- "${cli[@]}" handle-redirect "$redirect?error=denied%1B%5B2J%1B%5D0%3Bpwned%07%0D%C2%9Bx$(head -c 7000 /dev/zero | tr '\0' A)"
if LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]\|\xc2[\x80-\x9f]' <<<"$out$err"; then
    bad "control characters reached the terminal: $(printf '%q' "$err")"
else ok "no control characters in the output"; fi
[[ $err == *denied* && $err == *'[2J'* ]] && ok "the visible text is kept" || bad "stderr: $err"
a_count=$(tr -cd A <<<"$err" | wc -c)
[[ $a_count -le 100 ]] && ok "the error value is cut to 100 characters ($a_count A's shown)" || bad "$a_count A's shown"
expect 1 "a redirect URL over 8192 characters is not handled" -- "${cli[@]}" handle-redirect "$redirect?error=x&y=$(head -c $((8193 - ${#redirect} - 11)) /dev/zero | tr '\0' /)"
[[ $err == *"not this app's redirect URL"* ]] && ok "it says so: $err" || bad "stderr: $err"
start_ns=$(date +%s%N)
expect 1 "an 8192-byte URL of slashes is handled (not ours)" -- "${cli[@]}" handle-redirect "app:$(head -c 8188 /dev/zero | tr '\0' /)"
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
[[ $elapsed_ms -lt 3000 ]] && ok "in ${elapsed_ms} ms" || bad "an 8192-byte URL of slashes took ${elapsed_ms} ms"
expect 64 "handle-redirect without --redirect-url" -- env -u PORTAL_REDIRECT_URL "$ps_bin" --env "$env_id" handle-redirect "$url"
"${cli[@]}" clear >/dev/null
"${cli[@]}" login-with-apple >/dev/null || bad "login-with-apple (starts the TOTP sign-in)"
grant=$(admin POST grants "{\"kind\":\"oauth\",\"provider\":\"GOOGLE\",\"endUserId\":\"eu-totp\",\"totpRequired\":true,\"redirectUrl\":\"$redirect\"}")
expect 0 "handle-redirect → totp required" -- "${cli[@]}" handle-redirect "$(field "$grant" redirectUrl)" --json --show-token
[[ $(field "$out" status) == totpRequired ]] && ok "status totpRequired" || bad "totp: $out"
jwt=$(field "$out" userJwt)
totp=$(admin GET 'totp?endUserId=eu-totp')
code=$(field "$totp" code)
# The step's end user (the JWT's claim: the answer names none) and the enrolment secret.
[[ $(field "$out" endUserId) == eu-totp ]] && ok "the TOTP step names its end user" || bad "totp endUserId: $out"
[[ $(field "$out" totpSecret) == "$(field "$totp" secret)" ]] && ok "--show-token shows the enrolment secret" || bad "totpSecret: $out"
wrong=$([[ $code == 000000 ]] && echo 111111 || echo 000000)
expect 3 "verify-totp with a wrong code" -- sh -c "printf '%s' \"\$0\" | \"\$@\" verify-totp $wrong" "$jwt" "${cli[@]}"
[[ $err == *"not accepted"* && $err != *"invalid user JWT"* ]] && ok "a wrong code says the code was not accepted" || bad "wrong code: $err"
expect 0 "verify-totp with the same JWT and the right code" -- sh -c "printf '%s' \"\$0\" | \"\$@\" verify-totp $code --json" "$jwt" "${cli[@]}"
[[ $(field "$out" endUserId) == eu-totp ]] && ok "verify-totp persisted eu-totp" || bad "verify-totp printed '$out'"
[[ -n $(field "$out" clientId) && $(field "$out" isAccountAbstracted) == False ]] && ok "verify-totp reports the client" || bad "verify-totp: $out"
expect 3 "verify-totp with a JWT without an endUserId claim" -- sh -c "printf '%s' \"\$0\" | \"\$@\" verify-totp $code" "h.eyJzdWIiOiJ4In0.s" "${cli[@]}"
"${cli[@]}" clear >/dev/null
"${cli[@]}" login-with-apple >/dev/null || bad "login-with-apple (starts the enrolled TOTP sign-in)"
grant=$(admin POST grants "{\"kind\":\"oauth\",\"provider\":\"GOOGLE\",\"endUserId\":\"eu-totp\",\"totpRequired\":true,\"redirectUrl\":\"$redirect\"}")
expect 0 "handle-redirect → totp required (plain text)" -- "${cli[@]}" handle-redirect "$(field "$grant" redirectUrl)"
[[ $out == $'totp required\nend user: eu-totp' ]] && ok "prints the step and its end user, no secret" || bad "totp text: $out"
# --qr draws the enrolment link in the terminal; zbarimg reads the drawing back as the link.
"${cli[@]}" login-with-apple >/dev/null || bad "login-with-apple (starts the TOTP sign-in with --qr)"
grant=$(admin POST grants "{\"kind\":\"oauth\",\"provider\":\"GOOGLE\",\"endUserId\":\"eu-qr-$$\",\"totpRequired\":true,\"redirectUrl\":\"$redirect\"}")
expect 0 "handle-redirect --qr --show-token of an enrolment step" -- "${cli[@]}" handle-redirect "$(field "$grant" redirectUrl)" --qr --show-token
qr_link=$(grep -m1 '^otpauth://' <<<"$out")
read_back=$(sed -n '/^secret: /,$p' <<<"$out" | tail -n +2 | python3 -c '
import subprocess, sys, tempfile
rows = [line.rstrip("\n") for line in sys.stdin if line.strip("\n")]
light = {"\u2588": (1, 1), "\u2580": (1, 0), "\u2584": (0, 1), " ": (0, 0)}
grid = []
for row in rows:
    pairs = [light[c] for c in row]
    grid += [[p[0] for p in pairs], [p[1] for p in pairs]]
scale, side = 4, len(grid[0]) * 4
pixels = bytes(255 if grid[y // scale][x // scale] else 0 for y in range(len(grid) * scale) for x in range(side))
with tempfile.NamedTemporaryFile(suffix=".pgm") as f:
    f.write(b"P5\n%d %d\n255\n" % (side, len(grid) * scale) + pixels)
    f.flush()
    print(subprocess.run(["zbarimg", "--quiet", "--raw", f.name], capture_output=True, text=True).stdout.strip())
')
[[ -n $qr_link && $read_back == "$qr_link" ]] && ok "the QR code drawn reads back as the enrolment link" || bad "QR read back '$read_back', link '$qr_link'"
"${cli[@]}" login-with-apple >/dev/null || bad "login-with-apple (starts the TOTP sign-in with --qr --json)"
grant=$(admin POST grants "{\"kind\":\"oauth\",\"provider\":\"GOOGLE\",\"endUserId\":\"eu-qr2-$$\",\"totpRequired\":true,\"redirectUrl\":\"$redirect\"}")
expect 0 "handle-redirect --qr --json" -- "${cli[@]}" handle-redirect "$(field "$grant" redirectUrl)" --qr --json
[[ $(field "$out" totpQrSvg) == "<svg "*"</svg>" && -z $(field "$out" totpLink) ]] && ok "--json --qr gives the SVG, not the link" || bad "qr json: $out"
expect 64 "verify-totp with a non-numeric code" -- sh -c "printf 'x' | \"\$@\" verify-totp abc" sh "${cli[@]}"
"${cli[@]}" clear >/dev/null

echo "== redirect hijacking: pending sign-in and different end user"
csrf=("$ps_bin" --env "cli-csrf-$$" --redirect-url "$redirect")
exchanges() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["routes"].get("/api/v3/auth/magic-links/validations",{}).get("requests",0))' "$(admin GET stats)"; }
mint() { field "$(admin POST grants "{\"kind\":\"magic_link\",\"endUserId\":\"$1\",\"redirectUrl\":\"$redirect\"}")" redirectUrl; }
before=$(exchanges)
expect 4 "an attacker's grant with no sign-in pending" -- "${csrf[@]}" handle-redirect "$(mint eu-attacker)" --json
[[ $(field "$out" status) == unsolicitedRedirect && $err == *unsolicited* ]] && ok "reported as unsolicited" || bad "out: $out err: $err"
[[ $(exchanges) == "$before" ]] && ok "the grant was not exchanged" || bad "an unsolicited grant was exchanged"
expect 1 "nothing was stored" -- "${csrf[@]}" restore
expect 0 "login-with-google prints the authorize URL" -- "${csrf[@]}" login-with-google
[[ $out == http* ]] && ok "an http(s) URL" || bad "login-with-google printed '$out'"
# In a Flatpak sandbox the per-app directory the app's instances share (docs/flatpak.md#in-your-app).
markers=$XDG_RUNTIME_DIR/portal-keyring
[[ $provider == flatpak ]] && markers=$XDG_RUNTIME_DIR/app/$FLATPAK_ID/portal-keyring
marker=$(ls "$markers"/signin-* 2>/dev/null | head -n 1)
[[ -n $marker && $(stat -c %a "$marker") == 600 && $(stat -c %a "$markers") == 700 ]] &&
    ok "the marker is a 0600 file in a 0700 directory under XDG_RUNTIME_DIR" || bad "marker: '$marker' (in $markers)"
expect 0 "the handler (another process) completes the started sign-in" -- "${csrf[@]}" handle-redirect "$(mint eu-owner)"
expect 4 "a second grant after the sign-in completed" -- "${csrf[@]}" handle-redirect "$(mint eu-owner)"
"${csrf[@]}" send-magic-link owner@example.com >/dev/null || bad "send-magic-link"
expect 5 "another end user's grant while eu-owner is signed in" -- "${csrf[@]}" handle-redirect "$(mint eu-other)" --json
[[ $(field "$out" status) == differentEndUser && $(field "$out" endUserId) == eu-other && $(field "$out" storedEndUserId) == eu-owner ]] &&
    ok "JSON names both end users" || bad "out: $out"
[[ $err == *--replace-user* ]] && ok "the message says how to confirm" || bad "err: $err"
expect 0 "eu-owner is still stored" -- "${csrf[@]}" restore
[[ $out == eu-owner ]] && ok "not replaced" || bad "restore printed '$out'"
expect 0 "--replace-user confirms the switch (the refused one left the sign-in pending)" -- "${csrf[@]}" handle-redirect "$(mint eu-other)" --replace-user
expect 0 "restore" -- "${csrf[@]}" restore
[[ $out == eu-other ]] && ok "switched to eu-other" || bad "restore printed '$out'"
"${csrf[@]}" login-with-apple >/dev/null || bad "login-with-apple"
expect 0 "the same end user signing in again is silent" -- "${csrf[@]}" handle-redirect "$(mint eu-other)"
expect 0 "--allow-unsolicited opts out" -- "${csrf[@]}" handle-redirect "$(mint eu-other)" --allow-unsolicited
# Without XDG_RUNTIME_DIR the marker lives under XDG_STATE_HOME; it is seen only there.
expect 0 "send-magic-link without XDG_RUNTIME_DIR" -- env -u XDG_RUNTIME_DIR "${csrf[@]}" send-magic-link owner@example.com
[[ -n $(ls "$XDG_STATE_HOME"/portal-keyring-pending/signin-* 2>/dev/null) ]] && ok "the marker is under \$XDG_STATE_HOME/portal-keyring-pending" || bad "no marker under XDG_STATE_HOME"
url=$(mint eu-other)
expect 4 "a handler with XDG_RUNTIME_DIR does not see it" -- "${csrf[@]}" handle-redirect "$url"
expect 0 "a handler without XDG_RUNTIME_DIR does" -- env -u XDG_RUNTIME_DIR "${csrf[@]}" handle-redirect "$url"
"${csrf[@]}" clear >/dev/null

echo "== desktop handler (examples/desktop)"
desktop=$repo/examples/desktop/portal-example-signin.desktop
desktop_env=$(python3 - "$desktop" <<'PY'
import re, sys
exec_line = next(l.split("=", 1)[1].strip() for l in open(sys.argv[1]) if l.startswith("Exec="))
print(re.search(r"--env (\S+)", exec_line).group(1))
PY
)
grant=$(admin POST grants "{\"kind\":\"magic_link\",\"endUserId\":\"eu-desktop\",\"redirectUrl\":\"portal-example://auth/callback\"}")
url=$(field "$grant" redirectUrl)
desktop_app=("$ps_bin" --env "$desktop_env" --redirect-url portal-example://auth/callback)
# Run the Exec line as a desktop launcher does: split per the Desktop Entry spec, %u → the URL as
# one argument, no shell. portal-session is found on PATH like an installed command.
run_exec_line() { # URL → the handler's exit status
    PATH="$(dirname "$ps_bin"):$PATH" python3 - "$desktop" "$1" <<'PY'
import shlex, subprocess, sys
path, url = sys.argv[1], sys.argv[2]
exec_line = next(l.split("=", 1)[1].strip() for l in open(path) if l.startswith("Exec="))
argv = [url if a == "%u" else a for a in shlex.split(exec_line)]
sys.exit(subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode)
PY
}
run_exec_line "$url"; status=$?
[[ $status == 4 ]] && ok "the Exec line refuses a sign-in nobody started (exit 4)" || bad "unsolicited via the Exec line: exit $status"
# The app (another process than the handler) starts the sign-in, then the link arrives.
"${desktop_app[@]}" send-magic-link desktop@example.com >/dev/null || bad "the app's send-magic-link"
if run_exec_line "$url"; then ok "the desktop Exec line completed the sign-in"; else bad "the desktop Exec line failed"; fi
expect 0 "restore the desktop sign-in from another process" -- "$ps_bin" --env "$desktop_env" restore
[[ $out == eu-desktop ]] && ok "restored eu-desktop" || bad "restore printed '$out'"
grep -q "^MimeType=x-scheme-handler/portal-example;" "$desktop" && ok "the desktop file registers x-scheme-handler/portal-example" || bad "MimeType missing"
"$ps_bin" --env "$desktop_env" clear >/dev/null

echo "== docs/cli.md's portal-session lines, as written"
# docs/cli.md's block of portal-session lines runs line by line, with only its placeholders filled
# in: the auth environment id (…), the grant in the redirect URL (…) and $CST. The fake API's
# host comes from PORTAL_API_HOST, as a user would set it for a non-default API.
readme_lines=$(awk '/^```sh/ {f = 1; b = ""; next} /^```/ {if (f && b ~ /portal-session send-magic-link/) printf "%s", b; f = 0; next} f {b = b $0 "\n"}' "$repo/docs/cli.md")
if [[ -z $readme_lines ]]; then
    bad "docs/cli.md has no block of portal-session lines"
else
    readme_env="cli-readme-$$"
    readme_url=$(field "$(admin POST grants '{"kind":"magic_link","endUserId":"eu-readme","redirectUrl":"myapp://auth/callback"}')" redirectUrl)
    CST=$(field "$(admin POST sessions '{"endUserId":"eu-readme-2"}')" token)
    [[ -n $CST ]] || CST="readme-token-$$"
    line_no=0 readme_prefix=""
    while IFS= read -r line; do
        [[ -n ${line// } ]] || continue
        line_no=$((line_no + 1))
        command=${line//PORTAL_AUTH_ENVIRONMENT_ID=…/PORTAL_AUTH_ENVIRONMENT_ID=$readme_env}
        command=${command//"'myapp://auth/callback?token=…&authMethod=EMAIL_MAGIC_LINK'"/"'$readme_url'"}
        command=${command//portal-session/$ps_bin}
        if [[ $command == *…* ]]; then bad "docs/cli.md line $line_no has a placeholder this test does not fill: $line"; continue; fi
        got=0
        # One line each: a line's "# comment" must not swallow the lines after it.
        out=$(export PORTAL_API_HOST="$PORTAL_TEST_API_HOST" CST; eval "$readme_prefix$command" 2>/tmp/cli-err.$$) || got=$?
        [[ $command == export* ]] && readme_prefix="$readme_prefix$command"$'\n'
        if [[ $got == 0 ]]; then ok "docs/cli.md: $line (exit 0)"; else bad "docs/cli.md: $line: exit $got; $(cat /tmp/cli-err.$$)"; fi
    done <<<"$readme_lines"
    "$ps_bin" --env "$readme_env" --redirect-url myapp://auth/callback clear >/dev/null 2>&1
fi

echo "== watch: a line per change made by other processes, until SIGINT/SIGTERM"
watch_out=/tmp/cli-watch-out.$$ watch_err=/tmp/cli-watch-err.$$
# A file a background process writes is emptied here, before it starts: its own redirection runs
# in the child, after this shell has gone on, so wait_for could still see the last watch's
# "watching" line and persist before this watch is live (the persist then is its baseline).
: >"$watch_out"
: >"$watch_err"
"${cli[@]}" watch --json >"$watch_out" 2>"$watch_err" &
watch_pid=$!
if wait_for "$watch_err" "^watching $env_id\$"; then ok "watch --json: 'watching $env_id' on stderr once live"; else bad "watch never said it was watching: $(cat "$watch_err")"; fi
printf 'tok-watch-1' | "${cli[@]}" persist --end-user-id eu-watch-1 >/dev/null
wait_for "$watch_out" '"endUserId":"eu-watch-1"' || bad "watch: no line for the persist"
printf 'tok-watch-other' | "$ps_bin" --env "$env_id-other" persist --end-user-id eu-other >/dev/null
"${cli[@]}" clear >/dev/null
wait_for "$watch_out" '"event":"signedOut"' || bad "watch: no line for the clear"
kill -INT "$watch_pid"
wait "$watch_pid" && got=0 || got=$?
[[ $got == 0 ]] && ok "watch --json: SIGINT ends it with exit 0" || bad "watch --json: exit $got after SIGINT"
expected="{\"authEnvironmentId\":\"$env_id\",\"endUserId\":\"eu-watch-1\",\"event\":\"signedIn\",\"origin\":\"otherProcess\"}
{\"authEnvironmentId\":\"$env_id\",\"event\":\"signedOut\",\"origin\":\"otherProcess\"}"
if [[ $(cat "$watch_out") == "$expected" ]]; then
    ok "watch --json: exactly signedIn eu-watch-1, signedOut (NDJSON; the other environment gave nothing)"
else
    bad "watch --json printed: $(cat "$watch_out")"
fi
grep -q 'tok-watch' "$watch_out" "$watch_err" && bad "watch printed a token"
: >"$watch_out"
: >"$watch_err"
"${cli[@]}" watch >"$watch_out" 2>"$watch_err" &
watch_pid=$!
wait_for "$watch_err" "^watching " || bad "watch (text) never said it was watching"
printf 'tok-watch-2' | "${cli[@]}" persist --end-user-id eu-watch-2 >/dev/null || bad "watch (text): the persist failed (exit $?)"
wait_for "$watch_out" '^signed-in eu-watch-2$' || bad "watch (text): no line for the persist"
kill -TERM "$watch_pid"
wait "$watch_pid" && got=0 || got=$?
[[ $got == 0 && $(cat "$watch_out") == "signed-in eu-watch-2" ]] && ok "watch: 'signed-in eu-watch-2', SIGTERM ends it with exit 0" ||
    bad "watch (text): exit $got, printed: $(cat "$watch_out")"
expect 64 "watch takes no arguments" -- "${cli[@]}" watch extra
"${cli[@]}" clear >/dev/null
"$ps_bin" --env "$env_id-other" clear >/dev/null

echo "== check: the stored session against the Portal API; a rejection signs out exactly that sign-in"
ccli=("$ps_bin" --env "cli-check-$$")
check_items() { kcount io.portalhq.PortalKeyring.Session "auth_environment_id=cli-check-$$"; }
# The provider's pid now: a lock on gnome-keyring-locked restarted it (scripts/keyring-restart.sh).
provider_pid() { cat "${PORTAL_TEST_KEYRING_DIR:-/nonexistent}/keyring.pid" 2>/dev/null || echo "$PORTAL_TEST_KEYRING_PID"; }
expect 1 "check with nothing stored: signed out, as restore" -- "${ccli[@]}" check --json
[[ $(field "$out" status) == signedOut ]] && ok "... {status: signedOut}" || bad "check --json signed out: $out"
check_cst=$(field "$(admin POST sessions '{"endUserId":"eu-check"}')" token)
printf '%s' "$check_cst" | "${ccli[@]}" persist --end-user-id eu-check >/dev/null || bad "persist eu-check"
me_requests() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["routes"].get("/api/v3/clients/me",{}).get("requests",0))' "$(admin GET stats)"; }
before=$(me_requests)
expect 0 "check of a valid session" -- "${ccli[@]}" check
[[ $out == eu-check ]] && ok "... prints its end user" || bad "check printed '$out'"
[[ $(me_requests) == $((before + 1)) ]] && ok "... with one GET /api/v3/clients/me" || bad "clients/me requests: $before, then $(me_requests)"
expect 0 "check --json of a valid session" -- "${ccli[@]}" check --json
[[ $(field "$out" status) == valid && $(field "$out" endUserId) == eu-check ]] && ok "... {status: valid, endUserId: eu-check}" || bad "check --json: $out"
[[ $out$err != *"$check_cst"* ]] && ok "... no token in its output" || bad "check printed the token"
[[ $(check_items) == 1 ]] && ok "a valid session's item is kept" || bad "items after a valid check: $(check_items)"
admin POST faults '{"route":"/api/v3/clients/me","status":500,"count":1}' >/dev/null
expect 3 "check answered 500" -- "${ccli[@]}" check --json
[[ $(field "$out" status) == error && $err == *"server error (HTTP 500)"* && $err == *"kept"* ]] && ok "... an error that says the session is kept" || bad "500: $out / $err"
admin POST faults '{"route":"/api/v3/clients/me","reset":true,"count":1}' >/dev/null
expect 3 "check with the connection reset" -- "${ccli[@]}" check
admin POST faults '{"route":"/api/v3/clients/me","status":403,"count":1}' >/dev/null
expect 3 "check answered 403" -- "${ccli[@]}" check
expect 0 "after 500, reset and 403 the session is still stored" -- "${ccli[@]}" restore
[[ $out == eu-check && $(check_items) == 1 ]] && ok "... the same one, one item" || bad "restore '$out', items $(check_items)"
if [[ $provider != flatpak ]]; then
    # --timeout-ms bounds the keyring calls: a provider that does not answer is exit 2, nothing sent.
    before=$(me_requests)
    kill -STOP "$(provider_pid)"
    started=$SECONDS
    expect 2 "check with the keyring provider stopped (--timeout-ms 1000)" -- timeout 20 "${ccli[@]}" --timeout-ms 1000 check
    kill -CONT "$(provider_pid)"
    (( SECONDS - started <= 6 )) && ok "... within the deadline ($((SECONDS - started)) s)" || bad "check with a stopped provider took $((SECONDS - started)) s"
    [[ $(me_requests) == "$before" && $(check_items) == 1 ]] && ok "... no request sent, the item kept" || bad "requests $before → $(me_requests), items $(check_items)"
fi
# A rejection: the backend revoked the token. Another process's watch hears the sign-out.
: >"$watch_out"
: >"$watch_err"
"${ccli[@]}" watch --json >"$watch_out" 2>"$watch_err" &
watch_pid=$!
wait_for "$watch_err" "^watching cli-check-$$\$" || bad "check: the watch never said it was watching"
admin POST revoke "{\"token\":\"$check_cst\"}" >/dev/null
expect 6 "check of a revoked session: rejected" -- "${ccli[@]}" check
[[ $out == rejected && $err == *"rejected the session of eu-check"* ]] && ok "... says so" || bad "rejected: '$out' / $err"
[[ $(check_items) == 0 ]] && ok "... its item is deleted" || bad "items after a rejection: $(check_items)"
expect 1 "restore after the rejection: signed out" -- "${ccli[@]}" restore
if wait_for "$watch_out" '"event":"signedOut"'; then ok "the watch in another process printed signedOut"; else bad "watch after check's rejection: $(cat "$watch_out")"; fi
kill -INT "$watch_pid"
wait "$watch_pid" || bad "check: the watch ended with exit $?"
expect 1 "check again: signed out" -- "${ccli[@]}" check
# --json of a rejection (a 401 the fake API is told to give).
printf 'tok-check-json' | "${ccli[@]}" persist --end-user-id eu-check-json >/dev/null
admin POST faults '{"route":"/api/v3/clients/me","status":401,"count":1}' >/dev/null
expect 6 "check --json of a rejected session" -- "${ccli[@]}" check --json
[[ $(field "$out" status) == rejected && $(field "$out" endUserId) == eu-check-json && $(check_items) == 0 ]] && ok "... {status: rejected, endUserId: eu-check-json}, item deleted" || bad "rejected --json: $out; items $(check_items)"
# A newer sign-in stored while check waits for its answer survives the older one's 401: check
# deletes the item of the sign-in it read (its generation), never the auth environment's.
check_old=$(field "$(admin POST sessions '{"endUserId":"eu-check-old"}')" token)
printf '%s' "$check_old" | "${ccli[@]}" persist --end-user-id eu-check-old >/dev/null || bad "persist eu-check-old"
admin POST faults '{"route":"/api/v3/clients/me","status":401,"delayMs":3000,"count":1}' >/dev/null
"${ccli[@]}" check >"$watch_out" 2>"$watch_err" &
check_pid=$!
taken=no
for _ in $(seq 1 200); do
    [[ $(admin GET faults) == *'"faults": []'* ]] && { taken=yes; break; }
    sleep 0.05
done
[[ $taken == yes ]] && ok "check's request reached the API (its answer delayed 3 s)" || bad "check's request never reached the API"
printf 'tok-check-new' | "${ccli[@]}" persist --end-user-id eu-check-new >/dev/null || bad "persist eu-check-new during the check"
wait "$check_pid" && got=0 || got=$?
[[ $got == 6 ]] && ok "check of the older sign-in: rejected (exit 6)" || bad "check during a newer sign-in: exit $got; $(cat "$watch_err")"
expect 0 "the newer sign-in survives the older one's rejection" -- "${ccli[@]}" restore --json --show-token
[[ $(field "$out" endUserId) == eu-check-new && $(field "$out" clientSessionToken) == tok-check-new ]] && ok "... eu-check-new, its token" || bad "restore after: $out"
expect 0 "clear" -- "${ccli[@]}" clear
if [[ $provider != flatpak ]]; then
    # The rejected item cannot be deleted (the provider stops while the 401 is on its way): exit 2,
    # not 6 — the sign-in is still stored, and the next check deletes it.
    check_stuck=$(field "$(admin POST sessions '{"endUserId":"eu-check-stuck"}')" token)
    printf '%s' "$check_stuck" | "${ccli[@]}" persist --end-user-id eu-check-stuck >/dev/null || bad "persist eu-check-stuck"
    admin POST revoke "{\"token\":\"$check_stuck\"}" >/dev/null
    admin POST faults '{"route":"/api/v3/clients/me","delayMs":2000,"count":1}' >/dev/null
    "${ccli[@]}" --timeout-ms 1000 check --json >"$watch_out" 2>"$watch_err" &
    check_pid=$!
    taken=no
    for _ in $(seq 1 200); do
        [[ $(admin GET faults) == *'"faults": []'* ]] && { taken=yes; break; }
        sleep 0.05
    done
    kill -STOP "$(provider_pid)"
    wait "$check_pid" && got=0 || got=$?
    kill -CONT "$(provider_pid)"
    [[ $taken == yes && $got == 2 && $(field "$(cat "$watch_out")" status) == unavailable && $(cat "$watch_err") == *"rejected the session, but its stored item could not be deleted"* ]] &&
        ok "a rejection whose delete fails: exit 2, {status: unavailable}, says so" || bad "stuck delete: taken $taken, exit $got; $(cat "$watch_out") $(cat "$watch_err")"
    [[ $(grep -o "session storage failure" <<<"$(cat "$watch_err")" | wc -l) == 1 ]] && ok "... the message says 'session storage failure' once" || bad "stuck delete message: $(cat "$watch_err")"
    expect 0 "... the rejected sign-in is still stored" -- "${ccli[@]}" restore
    expect 6 "... and the next check deletes it" -- "${ccli[@]}" check
    expect 1 "... signed out" -- "${ccli[@]}" restore
fi
expect 64 "check takes no arguments" -- "${ccli[@]}" check extra
expect 64 "check does not take --show-token" -- "${ccli[@]}" check --show-token

rm -f "$watch_out" "$watch_err"

echo "== magic-link contract: sender and template, account abstraction, disabled providers, statuses"
mcli=("$ps_bin" --env "cli-contract-$$" --redirect-url "$redirect")
ml_requests() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["routes"].get("/api/v3/auth/magic-links",{}).get("requests",0))' "$(admin GET stats)"; }
last_link() { python3 -c 'import json,sys; l=json.loads(sys.argv[1])["links"][-1]; print(l["fromEmail"], l["templateId"], json.dumps(l["isAccountAbstracted"]))' "$(admin GET magic-links)"; }
before=$(ml_requests)
expect 64 "send-magic-link without a sender and template" -- env -u PORTAL_MAGIC_LINK_FROM_EMAIL -u PORTAL_MAGIC_LINK_TEMPLATE_ID "${mcli[@]}" send-magic-link c@example.com
[[ $err == *"magic link not configured"*--from-email*--template-id* && $err != *MagicLinkConfig* ]] && ok "the message names the options, not the Swift type" || bad "err: $err"
[[ $(ml_requests) == "$before" ]] && ok "nothing was sent" || bad "a request went out without a sender and template"
expect 64 "--from-email without --template-id" -- env -u PORTAL_MAGIC_LINK_FROM_EMAIL -u PORTAL_MAGIC_LINK_TEMPLATE_ID "${mcli[@]}" send-magic-link c@example.com --from-email a@example.com
expect 64 "a blank --template-id" -- "${mcli[@]}" send-magic-link c@example.com --template-id " "
[[ $err == *"invalid --template-id"* ]] && ok "names --template-id" || bad "err: $err"
expect 64 "--from-email on a command that sends no email" -- "${mcli[@]}" handle-redirect "$redirect" --from-email a@example.com
expect 0 "send-magic-link with --from-email and --template-id (over the environment's)" -- env -u PORTAL_MAGIC_LINK_FROM_EMAIL "${mcli[@]}" send-magic-link c@example.com --from-email sender@example.com --template-id tpl-opt
[[ $(last_link) == "sender@example.com tpl-opt null" ]] && ok "sent with them, isAccountAbstracted left out" || bad "sent: $(last_link)"
expect 0 "--account-abstracted false" -- "${mcli[@]}" send-magic-link c@example.com --account-abstracted false
[[ $(last_link) == "login@example.com tpl-cli false" ]] && ok "from the environment, isAccountAbstracted false" || bad "sent: $(last_link)"
expect 64 "--account-abstracted yes" -- "${mcli[@]}" send-magic-link c@example.com --account-abstracted yes
admin POST config '{"accountAbstractionAvailable":false}' >/dev/null
expect 3 "account abstraction the environment does not offer" -- env PORTAL_ACCOUNT_ABSTRACTED=true "${mcli[@]}" login-with-google
[[ $err == *"account abstraction unavailable"* ]] && ok "says so: $err" || bad "err: $err"
admin POST config '{"accountAbstractionAvailable":true,"allowedMethods":["EMAIL_MAGIC_LINK","GOOGLE"]}' >/dev/null
expect 3 "login-with-apple when Apple is not enabled" -- "${mcli[@]}" login-with-apple
[[ $err == *"APPLE is not enabled"* ]] && ok "names the provider" || bad "err: $err"
admin POST config '{"allowedMethods":["EMAIL_MAGIC_LINK","GOOGLE","APPLE"]}' >/dev/null
admin POST config '{"allowedRedirectUrls":["app://another"]}' >/dev/null
expect 3 "a redirect URL the auth environment does not allow" -- "${mcli[@]}" send-magic-link c@example.com
[[ $err == *unauthorized*--redirect-url* ]] && ok "points at --redirect-url: $err" || bad "err: $err"
admin POST config '{"allowedRedirectUrls":null}' >/dev/null
admin POST faults '{"route":"/api/v3/auth/magic-links","status":503,"count":1}' >/dev/null
expect 3 "send-magic-link answered 503" -- "${mcli[@]}" send-magic-link c@example.com --json
[[ $err == *"server error (HTTP 503)"* && $err != *"authentication failed"* ]] && ok "a server error, not a failed sign-in" || bad "err: $err"
admin POST faults '{"route":"/api/v3/auth/magic-links","status":429,"count":1}' >/dev/null
expect 3 "send-magic-link answered 429 without Retry-After" -- "${mcli[@]}" send-magic-link c@example.com
[[ $err == *"rate limited by the Portal API; retry later"* ]] && ok "no wait made up: $err" || bad "429: $err"

echo "== private-use redirect URLs and Retry-After"
private=com.example.app:/oauth2redirect
pcli=("$ps_bin" --env "cli-private-$$" --redirect-url "$private")
expect 1 "status with --redirect-url $private (signed out: exit 1)" -- "${pcli[@]}" status
expect 64 "a javascript: redirect URL is refused" -- "$ps_bin" --env "$env_id" --redirect-url "javascript:/alert(1)" status
grep -q "scheme:/path" <<<"$err" && ok "the message names both forms" || bad "javascript: $err"
"${pcli[@]}" login-with-google >/dev/null || bad "login-with-google with a private-use redirect URL"
purl=$(field "$(admin POST grants "{\"kind\":\"magic_link\",\"endUserId\":\"eu-private\",\"redirectUrl\":\"$private\"}")" redirectUrl)
[[ $purl == "$private?token="* ]] && ok "the grant redirects to $private" || bad "grant URL: $purl"
expect 1 "the same path under an authority is another URL" -- "${pcli[@]}" handle-redirect "${purl/:\//://}"
expect 0 "handle-redirect of the private-use redirect (scheme in upper case)" -- "${pcli[@]}" handle-redirect "COM.EXAMPLE.APP${purl#com.example.app}"
[[ $out == eu-private ]] && ok "signed in eu-private" || bad "handle-redirect printed '$out'"
"${pcli[@]}" clear >/dev/null
admin POST faults '{"route":"/api/v3/auth/magic-links","status":429,"count":1,"retryAfterSeconds":42}' >/dev/null
expect 3 "send-magic-link answered 429" -- "${pcli[@]}" send-magic-link someone@example.com
[[ $err == *"rate limited by the Portal API; retry after 42 s"* ]] && ok "the message gives the wait: $err" || bad "429: $err"

echo "== persist refuses a token with whitespace or control characters; restore reads old ones"
wcli=("$ps_bin" --env "cli-ws-$$")
printf 'tok-ws-before\n' | "${wcli[@]}" persist --end-user-id eu-ws >/dev/null || bad "persist tok-ws-before"
for spaced in 'tok en\n' ' tok\n' 'tok\t\n' 'tok\n\n' 'tok\r\r\n' 'tok\r' '\001tok\n'; do
    expect 64 "persist of printf '$spaced' is refused" -- sh -c "printf '$spaced' | \"\$@\" persist --end-user-id eu-ws" sh "${wcli[@]}"
    [[ $err == *"invalid token on stdin"*"without whitespace or control characters"* ]] && ok "it says why" || bad "message: $err"
done
expect 0 "the stored session is intact" -- "${wcli[@]}" restore --json --show-token
[[ $(field "$out" clientSessionToken) == tok-ws-before ]] && ok "still tok-ws-before" || bad "after refusals: $out"
expect 0 "a token with CRLF from stdin: the line end is not part of it" -- sh -c "printf 'tok-crlf\r\n' | \"\$@\" persist --end-user-id eu-ws" sh "${wcli[@]}"
"${wcli[@]}" clear >/dev/null
# The tab and line end as \u escapes: gnome-keyring's passwordless keyring unescapes \t and \n in a
# secret whenever it reloads its key file (docs/providers.md), which would change the item under test.
printf '%s' '{"v":1,"endUserId":"eu-old","clientSessionToken":"old tok\u0009with\u000awhitespace "}' |
    kstore io.portalhq.PortalKeyring.Session "auth_environment_id=cli-ws-$$" >/dev/null || bad "keyringctl store"
expect 0 "restore of an item an earlier version stored with whitespace in its token" -- "${wcli[@]}" restore --json --show-token
[[ $(field "$out" clientSessionToken) == $'old tok\twith\nwhitespace ' ]] && ok "its token comes back byte-exact" || bad "restore: $out"
"${wcli[@]}" clear >/dev/null
# A token with a terminal escape (planted in the keyring, or sent by a server): plain output never
# prints a control character; --json prints it escaped and exact.
esc_token=$'tok\e]0;pwned\a\e[2J'
printf 'portal-keyring-session/2 e=%s u=%s g=0e t=1 c=%s' "$(b64 "cli-ws-$$")" "$(b64 eu-esc)" "$(b64 "$esc_token")" |
    kstore io.portalhq.PortalKeyring.Session "auth_environment_id=cli-ws-$$" session_generation=0e \
        persisted_at=1 >/dev/null || bad "keyringctl store of a token with escapes"
expect 0 "restore --show-token of a token with escape sequences" -- "${wcli[@]}" restore --show-token
if LC_ALL=C grep -q $'[\x01-\x1f\x7f]' <<<"$out"; then bad "plain --show-token printed control characters: $(printf '%q' "$out")"
else ok "plain --show-token prints no control character"; fi
[[ $err == *"control characters"* ]] && ok "stderr says why the token was not printed" || bad "stderr: $err"
expect 0 "restore --json --show-token of that token" -- "${wcli[@]}" restore --json --show-token
[[ $(field "$out" clientSessionToken) == "$esc_token" ]] && ok "--json gives it back exact (escaped)" || bad "json: $(printf '%q' "$out")"
"${wcli[@]}" clear >/dev/null

# The library's cross-process locks (the persist turn on every provider, KeePassXC's delete-prompt
# lock) live where only this user can create files: with XDG_RUNTIME_DIR unset, under
# $HOME/.local/state (0700), never /tmp, where another local user could hold them and stall every
# sign-in or sign-out (docs/security.md, "The prompt lock's place").
lock_home=$(mktemp -d)
rm -f /tmp/portal-keyring-prompt.lock /tmp/prompt.lock /tmp/persist-*.lock
printf 'tok-lock' | env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME HOME="$lock_home" "$ps_bin" --env "cli-lock-$$" persist --end-user-id eu-lock >/dev/null &&
    env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME HOME="$lock_home" "$ps_bin" --env "cli-lock-$$" clear >/dev/null || bad "persist and clear without XDG_RUNTIME_DIR"
lock_dir=$lock_home/.local/state/portal-keyring-pending
in_tmp=$(ls /tmp/portal-keyring-prompt.lock /tmp/prompt.lock /tmp/persist-*.lock 2>/dev/null)
[[ -z $in_tmp && $(stat -c %a "$lock_dir" 2>/dev/null) == 700 ]] && ls "$lock_dir"/persist-*.lock >/dev/null 2>&1 &&
    ok "without XDG_RUNTIME_DIR the persist lock is in \$HOME/.local/state (0700), nothing in /tmp" ||
    bad "persist lock: in /tmp: '$in_tmp'; $(ls -la "$lock_dir" 2>&1 | tr '\n' ' ')"
if [[ $provider == keepassxc ]]; then
    [[ -f $lock_dir/prompt.lock ]] && ok "... and so is KeePassXC's delete-prompt lock" || bad "prompt lock: $(ls -la "$lock_dir" 2>&1 | tr '\n' ' ')"
fi
rm -rf "$lock_home"

# sign-in-with-google/-apple: the desktop's URL opener (GIO) launches Tests/tools/fake_browser.sh,
# registered here for http(s) URLs in this run's XDG directories; the redirect goes to another
# portal-session (handle-redirect), and the waiting command sees the stored session.
echo "== sign-in-with-google / -apple (the desktop's browser, the URL handler's process)"
dcli=("$ps_bin" --env "cli-desktop-$$" --redirect-url "$redirect")
browser_state=$XDG_DATA_HOME/portal-test-browser-cli
mkdir -p "$browser_state" "$XDG_DATA_HOME/applications"
expect 3 "no application for http(s) URLs" -- "${dcli[@]}" sign-in-with-google --sign-in-timeout-ms 2000
[[ $err == *"x-scheme-handler/http"* && $err != *"state="* ]] && ok "the message names the scheme, not the URL" || bad "stderr: $err"
expect 1 "... nothing stored" -- "${dcli[@]}" restore
expect 64 "--sign-in-timeout-ms over 15 minutes" -- "${dcli[@]}" sign-in-with-apple --sign-in-timeout-ms 900001
printf '%s\n' "[Desktop Entry]" "Type=Application" "Name=Portal test browser (CLI)" \
    "Exec=\"$repo/Tests/tools/fake_browser.sh\" \"$browser_state\" %u" \
    "MimeType=x-scheme-handler/http;x-scheme-handler/https;" >"$XDG_DATA_HOME/applications/portal-test-browser-cli.desktop"
printf '%s\n' "[Default Applications]" "x-scheme-handler/http=portal-test-browser-cli.desktop" \
    "x-scheme-handler/https=portal-test-browser-cli.desktop" >"$XDG_CONFIG_HOME/mimeapps.list"
# (The output is read whole: grep -q ending the pipe early would fail it under pipefail.)
gio_mime=$(gio mime x-scheme-handler/https 2>&1)
[[ $gio_mime == *portal-test-browser-cli.desktop* ]] && ok "gio mime names the test browser" || bad "gio mime x-scheme-handler/https: $gio_mime"
printf '%s\n' "PORTAL_AUTH_ENVIRONMENT_ID='cli-desktop-$$'" "PORTAL_REDIRECT_URL='$redirect'" \
    "PORTAL_TEST_END_USER='eu-cli-desktop'" "PORTAL_TEST_CLI='$ps_bin'" \
    "export PORTAL_AUTH_ENVIRONMENT_ID PORTAL_REDIRECT_URL" >"$browser_state/env"
echo handler >"$browser_state/mode"
expect 0 "sign-in-with-apple --json: the handler's process stored it" -- "${dcli[@]}" sign-in-with-apple --json
[[ $(field "$out" status) == authenticated && $(field "$out" endUserId) == eu-cli-desktop ]] && ok "... and it printed the signed-in end user" || bad "json: $out"
[[ $(cat "$browser_state/handler-status" 2>/dev/null) == 0 ]] && ok "... handle-redirect exited 0" || bad "handler: $(cat "$browser_state/handler.out" 2>&1)"
expect 0 "restore in another process" -- "${dcli[@]}" restore
echo ignore >"$browser_state/mode"
expect 3 "no redirect within --sign-in-timeout-ms" -- "${dcli[@]}" sign-in-with-google --sign-in-timeout-ms 300
[[ $err == *"timed out"* ]] && ok "... says it timed out" || bad "stderr: $err"
"${dcli[@]}" clear >/dev/null

rm -f /tmp/cli-err.$$ /tmp/cli-out.$$ /tmp/cli-pattern.$$
harness_summary cli/run.sh
