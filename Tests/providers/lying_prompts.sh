#!/usr/bin/env bash
# lying_prompts.sh — a provider whose prompts complete with dismissed = false without doing what
# they were for (Tests/tools/lying_prompt_provider.c; libsecret's mock service models the state: a
# prompt another client dismissed, answered "done") is not believed:
#   - delete: clear fails with exit 2 "keyring refused" (never 0 "cleared"), and the session is
#     still restored afterwards, byte-exact;
#   - create: persist fails with exit 2 "keyring refused" and restore says signed out (exit 1), also
#     when the prompt's result names an item that does not exist;
#   - unlock: restore and clear fail with exit 2 "keyring locked" (never "signed out" or "cleared"),
#     and the item is still there.
#
# Runs its own private session bus (dbus-run-session) with the fake provider as the only one, one
# provider instance per mode. Usage: Tests/providers/lying_prompts.sh  (after `swift build`)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
build=$repo/build
mkdir -p "$build"
# shellcheck disable=SC2046  # pkg-config's flags are words
gcc -Wall -Wextra -Werror -o "$build/lying_prompt_provider" "$repo/Tests/tools/lying_prompt_provider.c" \
    $(pkg-config --cflags --libs gio-2.0) -lgcrypt || { echo "lying_prompts.sh: FAIL: build the fake provider"; exit 1; }
[[ -x $ps_bin ]] || { echo "lying_prompts.sh: $ps_bin not built (swift build)" >&2; exit 2; }

if [[ ${1:-} != --inside ]]; then
    exec timeout 120 dbus-run-session -- "$0" --inside
fi

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
work=$(mktemp -d)
provider=
stop_provider() {
    [[ -n $provider ]] || return 0
    kill "$provider" 2>/dev/null
    wait "$provider" 2>/dev/null
    provider=
}
trap 'stop_provider; rm -rf "$work"' EXIT
start_provider() { # ARGS...
    stop_provider
    "$build/lying_prompt_provider" "$@" >"$work/provider.log" 2>&1 &
    provider=$!
    for _ in $(seq 100); do grep -q '^ready' "$work/provider.log" && return 0; sleep 0.05; done
    echo "lying_prompts.sh: FAIL: the fake provider did not start: $(cat "$work/provider.log")"
    exit 1
}
# ps WANT DESCRIPTION ENV [INPUT] -- ARGS...: portal-session, bounded; output in $out and $err.
ps() {
    local want=$1 what=$2 env=$3 input=
    shift 3
    if [[ $1 != -- ]]; then input=$1; shift; fi
    shift
    local start
    start=$(date +%s%N)
    out=$(printf '%s' "$input" | timeout 60 "$ps_bin" --env "$env" --redirect-url app://cb --timeout-ms 5000 \
        --prompt-timeout-ms 3000 "$@" 2>"$work/err") && got=0 || got=$?
    err=$(cat "$work/err")
    local ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [[ $got == "$want" ]]; then ok "$what (exit $got, $ms ms)"; else bad "$what: exit $got, wanted $want; stdout: $out; stderr: $err"; fi
}

echo "== delete prompts that complete without deleting"
start_provider --lie delete
ps 0 "persist" lie-delete tok-lie-delete -- persist --end-user-id eu-lie
ps 2 "clear is not 'cleared'" lie-delete -- clear
[[ $err == *"keyring refused"* ]] && ok "... it says 'keyring refused': ${err%%$'\n'*}" || bad "clear's message: $err"
grep -q '^CALL Prompt$' "$work/provider.log" && ok "the provider's delete prompt was run" ||
    bad "no prompt was run: $(grep -c '^CALL' "$work/provider.log") calls"
ps 0 "the session is still restored" lie-delete -- restore --show-token
[[ $out == $'eu-lie\ntok-lie-delete' ]] && ok "... byte-exact" || bad "restore printed: $out"

echo "== create prompts that complete without storing"
start_provider --lie create
ps 2 "persist fails" lie-create tok-lie-create -- persist --end-user-id eu-lie
[[ $err == *"keyring refused"* ]] && ok "... it says 'keyring refused': ${err%%$'\n'*}" || bad "persist's message: $err"
ps 1 "restore says signed out" lie-create -- restore

echo "== create prompts whose result names an item that does not exist"
start_provider --lie create-phantom
ps 2 "persist fails" lie-phantom tok-lie-phantom -- persist --end-user-id eu-lie
[[ $err == *"keyring refused"* ]] && ok "... it says 'keyring refused': ${err%%$'\n'*}" || bad "persist's message: $err"
ps 1 "restore says signed out" lie-phantom -- restore

echo "== unlock prompts that complete without unlocking"
start_provider --lie unlock
ps 0 "persist (the new item is then locked)" lie-unlock tok-lie-unlock -- persist --end-user-id eu-lie
ps 2 "restore is not 'signed out'" lie-unlock -- restore
[[ $err == *"keyring locked"* ]] && ok "... it says 'keyring locked': ${err%%$'\n'*}" || bad "restore's message: $err"
ps 2 "clear is not 'cleared'" lie-unlock -- clear
[[ $err == *"keyring locked"* ]] && ok "... it says 'keyring locked'" || bad "clear's message: $err"
grep -q '^CALL Delete$' "$work/provider.log" && bad "an Item.Delete reached the provider" || ok "nothing was deleted"

echo "== the same provider, honest (the control)"
start_provider
ps 0 "persist" honest tok-honest -- persist --end-user-id eu-honest
ps 0 "restore" honest -- restore --show-token
[[ $out == $'eu-honest\ntok-honest' ]] && ok "... byte-exact" || bad "restore printed: $out"
ps 0 "clear" honest -- clear
ps 1 "restore after the clear: signed out" honest -- restore

harness_summary lying_prompts.sh
