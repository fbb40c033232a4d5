#!/usr/bin/env bash
# keyring-restart.sh — restart the Secret Service provider of the private test
# environment (run it from inside scripts/with-keyring.sh).
#
#   scripts/keyring-restart.sh [--locked | --unlocked]
#
# Stops the provider daemon (the pid in $PORTAL_TEST_KEYRING_DIR/keyring.pid,
# which this script keeps up to date, else $PORTAL_TEST_KEYRING_PID) and
# starts it again on the same files, then waits until the default collection
# is in the requested state:
#   --locked    gnome-keyring, gnome-keyring-locked: start without --unlock,
#               so the login keyring loads LOCKED from disk (the default for
#               these providers). keepassxc*: start, then lockAllDatabases.
#               gnome-keyring-passwordless: start without --unlock; the plain
#               keyring file is re-read and loads Locked=true, as after a
#               login (Service.Unlock opens it without a prompt).
#   --unlocked  gnome-keyring, gnome-keyring-locked: start with --unlock.
#               gnome-keyring-passwordless: as --locked, then a prompt-less
#               Service.Unlock (the default for this provider). keepassxc*:
#               start with the database password (their default).
#               kwallet: start kwalletd5 (the wallet loads locked), then
#               Service.Unlock, whose prompt completes by itself (default).
#   --locked    kwallet: start kwalletd5 and leave the wallet locked; the
#               library's next call unlocks it through a prompt that completes
#               by itself (nobody has to answer it), so an app calling meanwhile
#               can unlock it before this script sees it locked (then exit 1).
# Prints the new daemon's pid. Exit 0 when ready, 1 if the provider did not
# come back as asked (its log is printed), 2 on a usage error. The new daemon
# belongs to the environment: with-keyring.sh stops it at teardown.
set -euo pipefail

readonly ME="keyring-restart"
note() { printf '%s: %s\n' "$ME" "$*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/keyring-providers.sh
source "$here/keyring-providers.sh"

want=""
case ${1:-} in
--locked) want=locked ;;
--unlocked) want=unlocked ;;
"") ;;
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
*) note "unknown argument '$1'"; exit 2 ;;
esac

for var in PORTAL_TEST_KEYRING_DIR DBUS_SESSION_BUS_ADDRESS PORTAL_TEST_PROVIDER; do
    if [[ -z ${!var:-} ]]; then
        note "$var is not set: run me inside scripts/with-keyring.sh"
        exit 2
    fi
done
dir=$PORTAL_TEST_KEYRING_DIR
address=$DBUS_SESSION_BUS_ADDRESS
provider=$PORTAL_TEST_PROVIDER
if [[ $address != *"$dir"* ]]; then
    note "DBUS_SESSION_BUS_ADDRESS is not inside PORTAL_TEST_KEYRING_DIR: refusing"
    exit 2
fi
if [[ -z $want ]]; then
    case $provider in
    gnome-keyring | gnome-keyring-locked) want=locked ;;
    *) want=unlocked ;;
    esac
fi
timeout=${PORTAL_TEST_KEYRING_START_TIMEOUT:-10}

old=$(cat "$dir/keyring.pid" 2>/dev/null || true)
old=${old:-${PORTAL_TEST_KEYRING_PID:-}}
if [[ -n $old ]]; then
    if alive "$old" && ! ours "$old"; then
        note "pid $old is not a daemon of this environment: refusing to stop it"
        exit 2
    fi
    if [[ $provider == kwallet ]] && alive "$old"; then
        # kwalletd5 writes the wallet file only when the wallet is closed; on
        # SIGTERM it loses what was stored since (observed with 5.103). Close
        # it first, as a logout would.
        coll=$(kp_default_collection) || coll=""
        if [[ -n $coll && $coll != / && $(kp_collection_locked "$coll") == false ]]; then
            bus_call --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
                --method org.freedesktop.Secret.Service.Lock "['$coll']" >/dev/null || true
        fi
    fi
    if [[ $provider == keepassxc* && -x ${PORTAL_TEST_KEYRINGCTL:-} ]] && alive "$old"; then
        # KeePassXC 2.7.4 drops a write answered while it was saving (it marks the database clean
        # after the save), and quits without saving it: let it save everything first
        # (keyringctl settle, docs/providers.md).
        "$PORTAL_TEST_KEYRINGCTL" settle || true
    fi
    stop_pid "$old"
fi
# The bus name must be free before the new daemon asks for it.
for ((i = 0; i < 100; i++)); do
    kp_name_owned org.freedesktop.secrets || break
    sleep 0.05
done

failed() {
    note "$provider did not come back $want: $kp_error"
    local f
    for f in $(kp_logs); do
        note "---- $(basename "$f") (last lines) ----"
        tail -n 20 "$f" | sed 's/^/    /' >&2
    done
    exit 1
}

case $provider in
gnome-keyring | gnome-keyring-locked)
    if [[ $want == locked ]]; then kp_start_gnome_keyring plain; else kp_start_gnome_keyring unlock; fi
    printf '%s\n' "$kp_pid" >"$dir/keyring.pid"
    kp_wait_ready "$kp_pid" "$want" "$timeout" || failed
    ;;
gnome-keyring-passwordless)
    kp_start_gnome_keyring plain
    printf '%s\n' "$kp_pid" >"$dir/keyring.pid"
    kp_wait_ready "$kp_pid" locked "$timeout" || failed
    if [[ $want == unlocked ]]; then
        kp_unlock_without_prompt || failed
        kp_wait_ready "$kp_pid" unlocked "$timeout" || failed
    fi
    ;;
keepassxc | keepassxc-confirm)
    kp_start_keepassxc
    printf '%s\n' "$kp_pid" >"$dir/keyring.pid"
    kp_wait_ready "$kp_pid" unlocked "$timeout" || failed
    if [[ $want == locked ]]; then
        kp_keepassxc_lock_all || { kp_error="lockAllDatabases failed"; failed; }
        kp_wait_ready "$kp_pid" locked "$timeout" || failed
    fi
    ;;
kwallet)
    kp_start_kwalletd
    printf '%s\n' "$kp_pid" >"$dir/keyring.pid"
    if [[ $want == unlocked ]]; then
        # The wallet loads locked, unless an app running meanwhile has unlocked it already (its
        # call's unlock prompt completes by itself): wait for the collection, then unlock.
        kp_wait_ready "$kp_pid" alias "$timeout" || failed
        kp_unlock_with_prompt "$timeout" || failed
    else
        kp_wait_ready "$kp_pid" locked "$timeout" || failed
    fi
    ;;
*)
    note "unknown provider '$provider'"
    exit 2
    ;;
esac
printf '%s\n' "$kp_pid"
