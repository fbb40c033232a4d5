#!/usr/bin/env bash
# Tests/flatpak/migration.sh — a session in the host's Secret Service moves into the sandbox's
# file keyring at the first call of an app that still has --talk-name=org.freedesktop.secrets
# (docs/flatpak.md#in-your-app), written and read back before the host delete; a process that stops between
# the two leaves nothing lost and nothing twice after the next call. The move is recorded in the
# file (libsecret reads the record) and never runs again for it: a sign-in stored on the host later
# (another account's, by any Secret Service client) is not taken, also after a sign-out; a host
# sign-in of another end user is never moved over the file's session; one stored on the host during
# the move is neither deleted nor dropped.
#
#   swift build && scripts/with-flatpak-sandbox.sh --talk-name org.freedesktop.secrets \
#       --host Tests/flatpak/migration.sh
#
# Runs on the host side (keyringctl and portal-session there use the host's Secret Service, as
# the app did unsandboxed or in its earlier release) and runs the app in the sandbox
# ($PORTAL_TEST_IN_SANDBOX). Exits 1 if any check failed.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
libdir=${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}
for var in PORTAL_TEST_IN_SANDBOX PORTAL_TEST_APP_DATA PORTAL_TEST_KEYRING_DIR; do
    [[ -n ${!var:-} ]] || { echo "flatpak/migration.sh: $var unset: run as scripts/with-flatpak-sandbox.sh --talk-name org.freedesktop.secrets --host $0" >&2; exit 2; }
done
[[ -x $ps_bin ]] || { echo "flatpak/migration.sh: $ps_bin not built (swift build)" >&2; exit 2; }
work=$(mktemp -d "$HOME/flatpak-migration.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
kctl=${PORTAL_TEST_KEYRINGCTL:-$repo/build/keyringctl}
if [[ ! -x $kctl ]]; then
    kctl=$work/keyringctl
    # shellcheck disable=SC2046  # pkg-config's flags are words
    gcc -O1 -Wall -Wextra -Werror -o "$kctl" "$repo/Tests/tools/keyringctl.c" $(pkg-config --cflags --libs libsecret-1) ||
        { echo "flatpak/migration.sh: could not build keyringctl" >&2; exit 2; }
fi
stopper=$work/stop_before_host_delete
# shellcheck disable=SC2046  # pkg-config's flags are words
gcc -std=c11 -O1 -Wall -Wextra -Werror -rdynamic -I"$repo/Include" -o "$stopper" \
    "$repo/Tests/flatpak/stop_before_host_delete.c" -L"$libdir" -lportal-keyring -Wl,-rpath,"$libdir" \
    -Wl,--no-as-needed $(pkg-config --libs libsecret-1) ||
    { echo "flatpak/migration.sh: could not build stop_before_host_delete" >&2; exit 2; }
during=$work/store_during_host_delete
# shellcheck disable=SC2046  # pkg-config's flags are words
gcc -std=c11 -O1 -Wall -Wextra -Werror -rdynamic -I"$repo/Include" -o "$during" \
    "$repo/Tests/flatpak/store_during_host_delete.c" -L"$libdir" -lportal-keyring -Wl,-rpath,"$libdir" \
    -Wl,--no-as-needed $(pkg-config --libs libsecret-1) ||
    { echo "flatpak/migration.sh: could not build store_during_host_delete" >&2; exit 2; }

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
# expect WHERE STATUS DESCRIPTION -- CMD...   (WHERE: sandbox or host; stdout in $out, stderr in $err)
expect() { # host|sandbox WANT DESCRIPTION -- COMMAND...
    local where=$1
    shift
    if [[ $where == sandbox ]]; then expect_exit "$1" "$2" -- "$PORTAL_TEST_IN_SANDBOX" "${@:4}"; else expect_exit "$@"; fi
}
schema=io.portalhq.PortalKeyring.Session
keyring=$PORTAL_TEST_APP_DATA/keyrings/default.keyring
host_count() { "$kctl" count --schema "$schema" "auth_environment_id=$1"; }
# Our items in the sandbox's file keyring, through libsecret's file backend there: keyringctl's
# stand-in, which tries a secret-tool run again when libsecret 0.20.5 hangs on the portal (a count
# here that hung read as 0 and failed a CI run).
file_items() {
    "$PORTAL_TEST_IN_SANDBOX" "$repo/Tests/tools/keyringctl-sandbox.py" count --schema "$schema" "auth_environment_id=$1"
}
# The move's record in the file keyring, through libsecret's file backend there.
recorded() {
    "$PORTAL_TEST_IN_SANDBOX" "$repo/Tests/tools/keyringctl-sandbox.py" count --schema io.portalhq.PortalKeyring.HostMigration \
        "migrated_auth_environment_id=$1"
}
b64() { printf '%s' "$1" | base64 -w0 | tr '+/' '-_' | tr -d =; }
document() { # ENV USER TOKEN GENERATION PERSISTED_AT: a stored session document, as a persist writes it
    printf 'portal-keyring-session/2 e=%s u=%s g=%s t=%s c=%s' "$(b64 "$1")" "$(b64 "$2")" "$4" "$5" "$(b64 "$3")"
}
store_on_host() { # ENV USER TOKEN GENERATION PERSISTED_AT
    document "$@" | "$kctl" store --schema "$schema" "auth_environment_id=$1" "session_generation=$4" "persisted_at=$5" \
        >/dev/null || bad "keyringctl store on the host ($2)"
}
# A session in the file written without a record of the move: by an earlier release of this
# library, which moved the host's session without recording it.
store_in_file() { # ENV USER TOKEN GENERATION PERSISTED_AT
    document "$@" | "$PORTAL_TEST_IN_SANDBOX" "$repo/Tests/tools/keyringctl-sandbox.py" store --schema "$schema" \
        "auth_environment_id=$1" "session_generation=$4" "persisted_at=$5" >/dev/null || bad "store in the file ($2)"
}
cli() { echo timeout 30 "$ps_bin" --env "$1" --redirect-url app://cb --timeout-ms 5000; }
persist_on_host() { # ENV USER TOKEN
    printf '%s\n' "$3" | $(cli "$1") persist --end-user-id "$2" >/dev/null 2>"$work/err" ||
        bad "persist on the host: $(cat "$work/err")"
}

echo "== the sandbox reaches the host's Secret Service (--talk-name=org.freedesktop.secrets)"
expect sandbox 0 "org.freedesktop.secrets answers in the sandbox" -- gdbus call --session --timeout 5 \
    --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets --method org.freedesktop.Secret.Service.ReadAlias default

echo "== the first call in the sandbox moves the host's session into the file keyring"
persist_on_host env-move eu-host tok-host-1
[[ $(host_count env-move) == 1 ]] && ok "the session is in the host's keyring" || bad "host items: $(host_count env-move)"
expect sandbox 0 "restore in the sandbox" -- $(cli env-move) restore --show-token
[[ $out == $'eu-host\ntok-host-1' ]] && ok "it is the host's session, byte-exact" || bad "restore printed: $out"
[[ $(host_count env-move) == 0 ]] && ok "the host keeps nothing of it" || bad "host items left: $(host_count env-move)"
[[ $(file_items env-move) == 1 ]] && ok "the file keyring holds it once" || bad "file items: $(file_items env-move)"
[[ $(recorded env-move) == 1 ]] && ok "the move is recorded in the file (libsecret reads the record)" ||
    bad "records of the move: $(recorded env-move)"
expect sandbox 0 "status there names the file keyring" -- $(cli env-move) status --json
[[ $out == *"$keyring"* ]] && ok "... $keyring" || bad "status: $out"

echo "== status as the first call describes the file after the move"
persist_on_host env-status eu-status tok-status
expect sandbox 0 "status in the sandbox" -- $(cli env-status) status --json
first=$out
expect sandbox 0 "status again" -- $(cli env-status) status --json
items() { sed -n 's/.*"items":"\([0-9]*\).*/\1/p' <<<"$1"; }
[[ $first == *'"keyring":"session stored"'* && $first == *'"endUserId":"eu-status"'* && -n $(items "$first") &&
    $(items "$first") == "$(items "$out")" ]] &&
    ok "session stored, and the file's items count it already ($(items "$first"))" ||
    bad "first status: $first; second: $out"
[[ $(host_count env-status) == 0 ]] && ok "the host keeps nothing of it" || bad "host items: $(host_count env-status)"
expect sandbox 0 "clear in the sandbox" -- $(cli env-move) clear
expect sandbox 1 "restore after the clear: signed out" -- $(cli env-move) restore
[[ $(host_count env-move) == 0 && $(file_items env-move) == 0 ]] && ok "nothing left anywhere" ||
    bad "after clear: host $(host_count env-move), file $(file_items env-move)"

echo "== after the move, a sign-in stored on the host (any Secret Service client can) is never taken"
persist_on_host env-move eu-attacker tok-attacker
expect sandbox 1 "restore in a new sandboxed process, signed out there: still signed out" -- $(cli env-move) restore --show-token
[[ $(host_count env-move) == 1 ]] && ok "the host's item stays where it was stored" || bad "host items: $(host_count env-move)"

echo "== a newer sign-in in the file (no record of the move yet) wins over an older one left on the host"
store_in_file env-newer eu-sandbox tok-sandbox 00000000000000000000000000000002 100
store_on_host env-newer eu-sandbox tok-old 00000000000000000000000000000001 1
expect sandbox 0 "restore in a new sandboxed process" -- $(cli env-newer) restore --show-token
[[ $out == $'eu-sandbox\ntok-sandbox' ]] && ok "the newer sign-in stays" || bad "restore printed: $out"
[[ $(host_count env-newer) == 0 && $(file_items env-newer) == 1 ]] && ok "the older host item is gone, one left" ||
    bad "host $(host_count env-newer), file $(file_items env-newer)"

echo "== another end user's newer sign-in on the host is never moved over the file's session"
store_in_file env-other eu-user tok-user 00000000000000000000000000000003 100
store_on_host env-other eu-attacker tok-attacker 00000000000000000000000000000004 200
expect sandbox 0 "restore in the sandbox" -- $(cli env-other) restore --show-token
[[ $out == $'eu-user\ntok-user' ]] && ok "the file's session stays the user's" || bad "restore printed: $out"
[[ $(host_count env-other) == 1 && $(file_items env-other) == 1 ]] && ok "the other account's item stays on the host" ||
    bad "host $(host_count env-other), file $(file_items env-other)"
[[ $(recorded env-other) == 1 ]] && ok "the move is recorded" || bad "records: $(recorded env-other)"
expect sandbox 0 "clear in the sandbox" -- $(cli env-other) clear
expect sandbox 1 "restore after the clear: signed out (the other account is not taken now either)" -- $(cli env-other) restore

echo "== a sign-in stored on the host during the move is neither deleted nor dropped"
persist_on_host env-during eu-during tok-read
later=$(( $(date +%s%N) / 1000 + 1000000 ))
document env-during eu-during tok-during 0000000000000000000000000000000d "$later" >"$work/during.doc"
# Run in the sandbox, which reaches the host's Secret Service (the talk-name): the harness's private
# one, through Flatpak's bus proxy, whose socket keyringctl cannot tell from a real session bus.
printf 'KEYRINGCTL_ALLOW_REAL_KEYRING=1 PORTAL_TEST_KEYRING_DIR=%q %q store --schema %s auth_environment_id=env-during session_generation=0000000000000000000000000000000d persisted_at=%s <%q >/dev/null\n' \
    "$PORTAL_TEST_KEYRING_DIR" "$kctl" "$schema" "$later" "$work/during.doc" >"$work/during.sh"
expect sandbox 0 "a restore whose first host delete comes after another process stored a sign-in there" -- \
    "$during" env-during app://cb "sh $work/during.sh"
[[ $(host_count env-during) == 1 && $(file_items env-during) == 1 ]] &&
    ok "the moved session is in the file, the one stored meanwhile still on the host" ||
    bad "host $(host_count env-during), file $(file_items env-during)"
[[ $(recorded env-during) == 0 ]] && ok "the move is not recorded yet" || bad "records: $(recorded env-during)"
expect sandbox 0 "the next restore" -- $(cli env-during) restore --show-token
[[ $out == $'eu-during\ntok-during' ]] && ok "moves the sign-in stored during the move" || bad "restore printed: $out"
[[ $(host_count env-during) == 0 && $(file_items env-during) == 1 && $(recorded env-during) == 1 ]] &&
    ok "one session left, in the file; the move recorded" ||
    bad "host $(host_count env-during), file $(file_items env-during), records $(recorded env-during)"

echo "== a process stopped between the write into the file and the host delete"
persist_on_host env-stop eu-stop tok-stop
expect sandbox 9 "the move stopped right before the host delete" -- "$stopper" env-stop app://cb
[[ $(host_count env-stop) == 1 && $(file_items env-stop) == 1 ]] && ok "both hold it now (written and read back first)" ||
    bad "after the stop: host $(host_count env-stop), file $(file_items env-stop)"
expect sandbox 0 "the next restore" -- $(cli env-stop) restore --show-token
[[ $out == $'eu-stop\ntok-stop' ]] && ok "restores the session" || bad "restore printed: $out"
[[ $(host_count env-stop) == 0 && $(file_items env-stop) == 1 ]] && ok "one session left, in the file" ||
    bad "after the next call: host $(host_count env-stop), file $(file_items env-stop)"

echo "== the host's login keyring locked (the portal's master secret too): the call fails, nothing moves, nothing is lost"
persist_on_host env-locked eu-locked tok-locked
if "$kctl" lock; then
    expect sandbox 2 "restore in the sandbox fails as a storage failure" -- $(cli env-locked) restore
    [[ $err == *"locked"* || $err == *"Secret portal"* ]] && ok "... saying why: ${err%%$'\n'*}" || bad "message: $err"
    "$kctl" unlock || bad "keyringctl unlock"
    [[ $(host_count env-locked) == 1 ]] && ok "the host still holds it" || bad "host items: $(host_count env-locked)"
    expect sandbox 0 "after the unlock the restore moves it" -- $(cli env-locked) restore --show-token
    [[ $out == $'eu-locked\ntok-locked' && $(host_count env-locked) == 0 ]] && ok "moved" || bad "restore printed: $out"
else
    bad "keyringctl lock"
fi

harness_summary migration
