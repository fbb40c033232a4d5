#!/usr/bin/env bash
# Tests/providers/run.sh — the keyring contract on one Secret Service provider and state.
#
#   scripts/with-keyring.sh --provider P Tests/providers/run.sh
#
# Run by scripts/test-matrix.sh for every provider of the matrix. Through the portal-session
# command (a separate process per call, as desktop integration uses it), checks:
#   - status names the provider and an encrypted transfer algorithm, and a capture of the bus
#     (dbus-monitor) during persist and restore never holds the token, its base64url form or the
#     stored document: the token never crosses the bus in clear;
#   - tokens with backslashes, escape-like text (\t, \n), JSON and base64 look-alikes round-trip byte-exact, also
#     after the provider reloads its keyring from disk (gnome-keyring's passwordless key file);
#   - locked ≠ absent: with the keyring locked, restore and clear exit 2 "keyring locked" (never
#     1 "signed out" / "cleared"), for a stored session and for none, and nothing is deleted; after
#     unlocking, the session is still there;
#   - gnome-keyring restarted over a login keyring on disk (loaded locked): the same;
#   - clear and persist's removal of the older sign-in work (KeePassXC runs a prompt for each);
#   - an unusable item of ours is deleted; a foreign item matching our attributes is not; nor are
#     items whose attributes are ours plus a line end (KeePassXC's search returns them);
#   - KeePassXC: a database unlocked between the library's search and its Locked read is not
#     "signed out" / "cleared" (unlock_race_test.c; PORTAL_TEST_UNLOCK_RACE_CYCLES, default 3,
#     1 on keepassxc-confirm);
#   - a provider that stops answering (SIGSTOP): restore, persist, clear and status end at their
#     deadline with exit 2, and the session stored before is restored after SIGCONT;
#   - KeePassXC: a dismissed create or delete prompt is "keyring refused", nothing lost
#     (refused_test.c); processes and threads clearing one session at once never crash it
#     (concurrent_delete_test.c);
#   - a session GetSecrets never returns is "keyring locked", not deleted (unreadable_test.c;
#     gnome-keyring-passwordless and kwallet, whose unlock needs nobody).
#   - a session replaced by another process between the search and GetSecrets is restored as the
#     new one, never "signed out"; replaced before every read, a storage failure (replaced_test.c;
#     every provider but keepassxc-confirm).
# Provider flatpak (Tests/flatpak/providers.sh runs this script inside a Flatpak sandbox, over the
# file keyring keyed by the Secret portal): the same round trips, unusable, foreign and look-alike
# items (planted and counted by Tests/tools/keyringctl-sandbox.py: libsecret's secret-tool), and
# instead of the bus capture the keyring file holding no token in clear; the locked and stopped
# provider checks are Tests/flatpak/run.sh's (it locks and stops the host's side from outside).
# Exits 1 if any check failed; every step is bounded in time.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
kctl=${PORTAL_TEST_KEYRINGCTL:-$repo/build/keyringctl}
provider=${PORTAL_TEST_PROVIDER:-gnome-keyring}
schema=io.portalhq.PortalKeyring.Session
for var in PORTAL_TEST_KEYRING_DIR DBUS_SESSION_BUS_ADDRESS; do
    [[ -n ${!var:-} ]] || { echo "providers/run.sh: $var unset: run inside scripts/with-keyring.sh" >&2; exit 2; }
done
[[ -x $ps_bin ]] || { echo "providers/run.sh: $ps_bin not built (swift build)" >&2; exit 2; }
[[ -x $kctl ]] || { echo "providers/run.sh: keyringctl not built at $kctl" >&2; exit 2; }

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
harness_tag=$provider
tmp=$PORTAL_TEST_KEYRING_DIR/providers-test
mkdir -p "$tmp"

env_id="prov-$$"
cli=("$ps_bin" --env "$env_id" --redirect-url "portalkeyring://auth/callback" --timeout-ms 5000 --prompt-timeout-ms 3000)
# ps EXPECTED DESCRIPTION [stdin-file] -- ARGS...: runs portal-session (bounded), output in $out/$err.
ps() {
    local want=$1 what=$2 input=/dev/null
    shift 2
    if [[ $1 != -- ]]; then input=$1; shift; fi
    shift
    local start=$(date +%s%N)
    out=$(timeout 60 "${cli[@]}" "$@" <"$input" 2>"$tmp/err") && got=0 || got=$?
    err=$(cat "$tmp/err")
    if [[ $got == "$want" ]]; then
        ok "$what (exit $got, $(( ($(date +%s%N) - start) / 1000000 )) ms)"
    else
        bad "$what: exit $got, wanted $want; stdout: ${out:0:300}; stderr: ${err:0:300}"
    fi
}
count() { timeout 30 "$kctl" count --schema "$schema" "auth_environment_id=$1" 2>/dev/null || echo "?"; }
b64url() { printf '%s' "$1" | basenc --base64url | tr -d '=\n'; }

# Restarts gnome-keyring-daemon WITHOUT --unlock over the keyrings on disk (as after a reboot
# without PAM unlocking): a password-protected login keyring loads locked, a passwordless one
# unlocked. Returns 1 when the provider cannot be restarted this way.
restart_gnome_keyring() {
    [[ $provider == gnome-keyring* && -n ${PORTAL_TEST_KEYRING_PID:-} ]] || return 1
    local pid
    pid=$(timeout 5 gdbus call --session -d org.freedesktop.DBus -o /org/freedesktop/DBus \
        -m org.freedesktop.DBus.GetConnectionUnixProcessID org.freedesktop.secrets 2>/dev/null | sed -n 's/.*uint32 \([0-9]*\).*/\1/p')
    [[ -n $pid ]] || return 1
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    gnome-keyring-daemon --foreground --components=secrets </dev/null >/dev/null 2>>"$tmp/gnome-keyring-restart.log" &
    for _ in $(seq 100); do
        if timeout 5 gdbus call --session -d org.freedesktop.secrets -o /org/freedesktop/secrets \
            -m org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null | grep -q "collection/"; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

locked_checks() { # $1 = what is stored ("session" or "nothing")
    if [[ $provider == gnome-keyring-passwordless || $provider == kwallet ]]; then
        # A keyring without a password (gnome-keyring's passwordless login keyring; the harness's
        # empty-password KDE wallet) is unlocked by the provider without asking anyone: the
        # library's unlock prompt completes at once, and the answer is the truth.
        local want=0
        [[ $1 == session ]] || want=1
        ps "$want" "restore while 'locked' ($1 stored): the provider unlocks a keyring without a password at once" -- restore
        # Lock again: the restore above unlocked it. KWallet 5.103 reports its collection
        # unlocked although the wallet is closed; only a provider that says "locked" is checked.
        timeout 30 "$kctl" lock >/dev/null 2>&1
        local reported=no
        timeout 30 "$kctl" is-locked >/dev/null 2>&1 && reported=yes
        ps "$want" "status while 'locked' ($1 stored)" -- status
        if [[ $reported == yes ]]; then
            grep -q '^defaultCollectionLocked: yes$' <<<"$out" &&
                ok "status shows the collection locked, as it was before its own restore unlocked it" ||
                bad "status after locking: $(grep '^defaultCollection' <<<"$out" | tr '\n' ' ')"
        else
            note "the provider reports its collection unlocked while locked: status cannot tell"
        fi
        return
    fi
    ps 2 "restore while locked ($1 stored) is 'keyring locked', not signed out" -- restore
    grep -q "keyring locked" <<<"$err" && ok "the message says 'keyring locked'" || bad "message: $err"
    ps 2 "clear while locked ($1 stored) fails, nothing cleared" -- clear
    ps 2 "status while locked ($1 stored) is unavailable" -- status
    grep -q '^defaultCollectionLocked: yes$' <<<"$out" && ok "status shows the collection locked" ||
        bad "status while locked: $(grep '^defaultCollection' <<<"$out" | tr '\n' ' ')"
}

if [[ $provider == gnome-keyring-locked ]]; then
    echo "== [$provider] the login keyring as loaded from disk: locked"
    timeout 30 "$kctl" is-locked && ok "the default collection is locked" || bad "the default collection is not locked"
    locked_checks nothing
    printf 'tok-x' >"$tmp/t"
    ps 2 "persist while locked fails (no prompter to unlock)" "$tmp/t" -- persist --end-user-id eu-x
    timeout 30 "$kctl" unlock || bad "keyringctl unlock failed"
fi

if [[ $provider == keepassxc* ]]; then
    # KeePassXC's search skips a locked database: an unlock between the library's search and its
    # read of the collection's Locked property must not read as "nothing stored"
    # (unlock_race_test.c injects the unlock exactly there).
    echo "== [$provider] unlocked in the middle of a restore and a clear"
    # keepassxc-confirm: a search of the locked database blocks on an unlock dialog (UnlockBeforeSearch)
    # until the call deadline, and every cycle restarts KeePassXC twice (about 20 s): one cycle.
    cycles=3
    [[ $provider == keepassxc-confirm ]] && cycles=1
    libdir=${PORTAL_KEYRING_LIBDIR:-$(dirname "$ps_bin")}
    if "$repo/Tests/c/build.sh" "$repo/Tests/providers/unlock_race_test.c" --out "$tmp" --lib "$libdir" 2>"$tmp/cc.err"; then
        if PORTAL_TEST_KEYRINGCTL=$kctl timeout 300 "$tmp/unlock_race_test" "${PORTAL_TEST_UNLOCK_RACE_CYCLES:-$cycles}" \
            >"$tmp/race.out" 2>&1; then
            ok "$(tail -n 1 "$tmp/race.out")"
        else
            bad "unlock_race_test: $(cat "$tmp/race.out")"
        fi
        sed -n 's/^  \[/    [/p' "$tmp/race.out"
    else
        bad "unlock_race_test does not compile: $(cat "$tmp/cc.err")"
    fi
fi

if [[ $provider == keepassxc* ]]; then
    # A create or delete prompt dismissed (refused_test.c dismisses it right before the library
    # runs it): "keyring refused", nothing lost.
    echo "== [$provider] a dismissed create or delete prompt"
    if "$repo/Tests/c/build.sh" "$repo/Tests/providers/refused_test.c" --out "$tmp" --lib "$libdir" 2>"$tmp/cc.err"; then
        if PORTAL_TEST_KEYRINGCTL=$kctl timeout 120 "$tmp/refused_test" >"$tmp/refused.out" 2>&1; then
            ok "$(tail -n 1 "$tmp/refused.out")"
        else
            bad "refused_test: $(cat "$tmp/refused.out")"
        fi
        sed -n 's/^  /    /p' "$tmp/refused.out"
    else
        bad "refused_test does not compile: $(cat "$tmp/cc.err")"
    fi
fi

if [[ $provider == keepassxc ]]; then
    # Two delete prompts for one item, run one after the other, crash KeePassXC 2.7.4 (SIGSEGV):
    # 8 processes and then 8 threads clear the same session at once, 10 rounds each.
    echo "== [$provider] concurrent clears of one session by processes and threads"
    if "$repo/Tests/c/build.sh" "$repo/Tests/providers/concurrent_delete_test.c" --out "$tmp" --lib "$libdir" 2>"$tmp/cc.err"; then
        if timeout 180 "$tmp/concurrent_delete_test" 10 >"$tmp/concurrent.out" 2>&1; then
            ok "$(tail -n 1 "$tmp/concurrent.out"); $(sed -n 's/^  //p' "$tmp/concurrent.out")"
        else
            bad "concurrent_delete_test: $(cat "$tmp/concurrent.out")"
        fi
    else
        bad "concurrent_delete_test does not compile: $(cat "$tmp/cc.err")"
    fi
fi

if [[ $provider == keepassxc-confirm ]]; then
    # ConfirmAccessItem / ConfirmDeleteItem / UnlockBeforeSearch on: KeePassXC trusts the process
    # that created an item; to any other process the item is locked, and unlocking it opens an
    # access dialog (headless: never answered). So another process's restore and clear must end
    # in "keyring locked" within the prompt deadline, deleting nothing — never "signed out".
    echo "== [$provider] items of another process need the person's confirmation"
    printf 'tok-confirm' >"$tmp/t"
    ps 0 "persist" "$tmp/t" -- persist --end-user-id eu-confirm
    ps 2 "restore from another process waits for the access dialog, then 'keyring locked'" -- restore
    grep -q "keyring locked" <<<"$err" && ok "the message says 'keyring locked'" || bad "message: $err"
    ps 2 "clear from another process fails the same way" -- clear
    [[ $(count "$env_id") == 1 ]] && ok "nothing was deleted" || bad "$(count "$env_id") items left"
    printf 'garbage' | timeout 30 "$kctl" store --schema "$schema" "auth_environment_id=$env_id-u" session_generation=00 >/dev/null
    timeout 60 "${cli[@]/$env_id/$env_id-u}" restore >/dev/null 2>&1
    [[ $(count "$env_id-u") == 1 ]] && ok "an unusable item that cannot be read is not deleted" || bad "the unreadable item was deleted"
    echo "== [$provider] in one process, the creating client is trusted"
    out=$(PYTHONPATH=$repo/python PORTAL_KEYRING_LIBRARY=${PORTAL_KEYRING_LIBDIR:-$(dirname "$ps_bin")}/libportal-keyring.so \
        timeout 120 python3 - "$env_id-py" <<'PY' 2>&1
import sys, portal_keyring as pk
with pk.PortalAuth(sys.argv[1], "portalkeyring://auth/callback") as auth:
    auth.persist_session("eu-py", "tok-py").close()
    session = auth.restore_session()
    print("restored", session.end_user_id if session else None)
    auth.clear_persisted_session()
    print("after clear", auth.restore_session())
PY
    )
    [[ $out == $'restored eu-py
after clear None' ]] && ok "persist, restore and clear in one process" || bad "one process: $out"
    harness_summary "providers/run.sh [$provider]"
    exit
fi

if [[ $provider == gnome-keyring-passwordless || $provider == kwallet ]]; then
    # The library's last read attempt: GetSecrets keeps skipping an item that every search lists
    # unlocked again (unreadable_test.c locks the keyring before each GetSecrets; this provider
    # unlocks without asking anyone).
    echo "== [$provider] a stored session the provider never hands out"
    libdir=${PORTAL_KEYRING_LIBDIR:-$(dirname "$ps_bin")}
    if "$repo/Tests/c/build.sh" "$repo/Tests/providers/unreadable_test.c" --out "$tmp" --lib "$libdir" 2>"$tmp/cc.err"; then
        if PORTAL_TEST_KEYRINGCTL=$kctl timeout 120 "$tmp/unreadable_test" >"$tmp/unreadable.out" 2>&1; then
            ok "$(tail -n 1 "$tmp/unreadable.out"); $(sed -n 's/^  //p' "$tmp/unreadable.out")"
        else
            bad "unreadable_test: $(cat "$tmp/unreadable.out")"
        fi
    else
        bad "unreadable_test does not compile: $(cat "$tmp/cc.err")"
    fi
fi

# A persist by another process between the library's search and its GetSecrets removes the item
# found and stores a new one: the restore must read the new one, never answer "signed out"
# (replaced_test.c runs `portal-session persist` right before GetSecrets).
echo "== [$provider] the session replaced by another process during a restore"
libdir=${PORTAL_KEYRING_LIBDIR:-$(dirname "$ps_bin")}
if [[ $provider == flatpak ]]; then
    # No GetSecrets to race: a restore reads the whole file once, and a writer replaces the file
    # (rename); Tests/flatpak/run.sh's two processes persisting in a loop are that race.
    skip "replaced_test: the file keyring has no read between search and secret to inject into"
elif "$repo/Tests/c/build.sh" "$repo/Tests/providers/replaced_test.c" --out "$tmp" --lib "$libdir" 2>"$tmp/cc.err"; then
    if PORTAL_TEST_KEYRINGCTL=$kctl timeout 240 "$tmp/replaced_test" "$ps_bin" >"$tmp/replaced.out" 2>&1; then
        ok "$(tail -n 1 "$tmp/replaced.out"); $(sed -n 's/^  //p' "$tmp/replaced.out" | tr '\n' ';')"
    else
        bad "replaced_test: $(cat "$tmp/replaced.out")"
    fi
else
    bad "replaced_test does not compile: $(cat "$tmp/cc.err")"
fi

echo "== [$provider] status: provider and transfer algorithm"
ps 1 "status on an empty environment says signed out" -- status
if [[ $provider == flatpak ]]; then
    grep -q '^backend: ' <<<"$out" && grep -q '^secretPortal: ' <<<"$out" &&
        ok "status names the file keyring and the Secret portal: $(grep -E '^(backend|secretPortal): ' <<<"$out" | tr '\n' ' ')" ||
        bad "status over the file keyring: $out"
else
    grep -q '^transfer: dh-ietf1024-sha256-aes128-cbc-pkcs7$' <<<"$out" &&
        ok "secrets cross the bus encrypted (transfer: dh-ietf1024-sha256-aes128-cbc-pkcs7)" ||
        bad "transfer algorithm: $(grep '^transfer' <<<"$out")"
    grep -q '^provider: ' <<<"$out" && ok "status names the provider: $(grep '^provider' <<<"$out" | cut -d' ' -f2-)" ||
        bad "status names no provider: $out"
fi

marker="clear-marker-$$-$RANDOM$RANDOM"
printf '%s' "$marker" >"$tmp/marker"
if [[ $provider == flatpak ]]; then
    # No Secret Service on the bus here (the portal hands out a key, through a pipe): what must
    # never hold the token in clear is the file keyring.
    echo "== [$provider] the token is never in clear in the file keyring"
    ps 0 "persist a marker token" "$tmp/marker" -- persist --end-user-id eu-marker
    ps 0 "restore it" -- restore --show-token
    [[ $out == *"$marker"* ]] && ok "restore returned the marker" || bad "restore did not return the marker: $out"
    ps 0 "status names the file" -- status
    file=$(sed -n 's/^file: //p' <<<"$out")
    if [[ ! -s $file ]]; then
        bad "no keyring file at '$file'"
    elif grep -qaF -e "$marker" -e "$(b64url "$marker")" -e "portal-keyring-session/2" "$file"; then
        bad "the token or the stored document is in clear in $file"
    else
        ok "the $(stat -c %s "$file")-byte file holds neither the token, its base64url form nor the document"
    fi
else
    echo "== [$provider] the token never crosses the bus in clear"
    if command -v dbus-monitor >/dev/null; then
        timeout 60 dbus-monitor --session --binary >"$tmp/capture.bin" 2>"$tmp/monitor.err" &
        monitor=$!
        sleep 0.5
        ps 0 "persist a marker token" "$tmp/marker" -- persist --end-user-id eu-marker
        ps 0 "restore it" -- restore --show-token
        [[ $out == *"$marker"* ]] && ok "restore returned the marker" || bad "restore did not return the marker: $out"
        sleep 0.3
        kill "$monitor" 2>/dev/null
        wait "$monitor" 2>/dev/null
        size=$(stat -c %s "$tmp/capture.bin")
        if ((size < 1000)); then
            bad "the bus capture is empty ($size bytes): $(head -c 300 "$tmp/monitor.err")"
        elif grep -qaF -e "$marker" -e "$(b64url "$marker")" -e "portal-keyring-session/2" "$tmp/capture.bin"; then
            bad "the token or the stored document crossed the bus in clear"
        else
            ok "a $size-byte capture of the bus holds neither the token, its base64url form nor the document"
        fi
        grep -qaF "OpenSession" "$tmp/capture.bin" || grep -qaF "dh-ietf1024" "$tmp/capture.bin" ||
            note "the capture shows no OpenSession (the session was opened before the capture began)"
    else
        bad "dbus-monitor is not installed (Debian package dbus-bin)"
    fi
fi
ps 0 "clear" -- clear

echo "== [$provider] tokens round-trip byte-exact"
# (Persist refuses a real tab or space; the escape-like text stays.)
tokens=('a\b' 'tab\there' '\n\t\\' '{"v":1,"clientSessionToken":"t","endUserId":"u"}' '=+/-_base64look' 'x'
    "$(head -c 48000 /dev/zero | tr '\0' 'k')")
for i in "${!tokens[@]}"; do
    printf '%s' "${tokens[$i]}" >"$tmp/token.$i"
    ps 0 "persist token $i (${#tokens[$i]} bytes)" "$tmp/token.$i" -- persist --end-user-id "eu-$i"
    out=$(timeout 60 "${cli[@]}" restore --show-token --json 2>"$tmp/err")
    got=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("clientSessionToken",""), end="")' <<<"$out" 2>/dev/null)
    [[ $got == "${tokens[$i]}" ]] && ok "token $i comes back byte-exact" || bad "token $i came back as '${got:0:80}'"
done
[[ $provider == flatpak ]] || type=$(timeout 30 "$kctl" content-type --schema "$schema" "auth_environment_id=$env_id" 2>/dev/null)
if [[ $provider == flatpak ]]; then
    skip "content type: libsecret's file format keeps none (secret-tool lookup of our item: Tests/flatpak/run.sh)"
elif [[ $provider == gnome-keyring* ]]; then
    [[ $type == text/plain* ]] && ok "gnome-keyring stores no content type (answers text/plain)" || bad "content type: $type"
else
    # KeePassXC turns text/* and text/plain subtypes (application/json) into entry passwords.
    [[ $type == application/octet-stream* ]] && ok "the provider keeps the content type application/octet-stream" ||
        bad "content type stored: '$type' (must not be a text/plain subtype)"
fi
(( $(count "$env_id") == 1 )) && ok "each persist removed the older sign-in (one item left)" ||
    bad "$(count "$env_id") items stored after 7 persists (the older sign-ins were not removed)"
if [[ $provider == gnome-keyring-passwordless ]]; then
    printf '%s' 'a\b' >"$tmp/token.back"
    ps 0 "persist 'a\\b' before a restart" "$tmp/token.back" -- persist --end-user-id eu-back
    restart_gnome_keyring || bad "gnome-keyring did not restart"
    out=$(timeout 60 "${cli[@]}" restore --show-token --json 2>"$tmp/err")
    got=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("clientSessionToken",""), end="")' <<<"$out" 2>/dev/null)
    [[ $got == 'a\b' ]] && ok "'a\\b' survives gnome-keyring reloading the passwordless key file" ||
        bad "after the reload the token is '$got' ($out; $(cat "$tmp/err"))"
fi
ps 0 "clear" -- clear
(( $(count "$env_id") == 0 )) && ok "clear deleted the item" || bad "clear left $(count "$env_id") items"

echo "== [$provider] locked is not signed out"
if [[ $provider == flatpak ]]; then
    # The sandbox cannot lock the host's keyring; Tests/flatpak/run.sh locks it from outside
    # (RetrieveSecret answered 2: a storage failure, nothing deleted).
    skip "locking: done from outside the sandbox by Tests/flatpak/run.sh"
elif timeout 30 "$kctl" lock 2>"$tmp/err"; then
    printf 'tok-locked' >"$tmp/t"
    timeout 30 "$kctl" unlock
    ps 0 "persist before locking" "$tmp/t" -- persist --end-user-id eu-locked
    timeout 30 "$kctl" lock || bad "keyringctl lock failed"
    locked_checks session
    timeout 30 "$kctl" unlock || bad "keyringctl unlock failed"
    ps 0 "after unlocking, the session is still there" -- restore
    ps 0 "clear" -- clear
    if [[ $provider == keepassxc* ]]; then
        # KeePassXC 2.7.4 cannot be locked again over D-Bus while the unlock dialog that the
        # library's prompt opened (headless: never answered) is still open; restart it locked.
        timeout 60 "$repo/scripts/keyring-restart.sh" --locked || bad "could not restart KeePassXC locked"
    else
        timeout 30 "$kctl" lock || bad "keyringctl lock failed"
    fi
    locked_checks nothing
    timeout 30 "$kctl" unlock || bad "keyringctl unlock failed"
    ps 1 "after unlocking, signed out" -- restore
else
    bad "keyringctl lock is not supported on $provider: $(cat "$tmp/err")"
fi

if [[ $provider == gnome-keyring || $provider == gnome-keyring-locked ]]; then
    echo "== [$provider] gnome-keyring restarted over the login keyring on disk (loaded locked)"
    timeout 30 "$kctl" unlock 2>/dev/null
    printf 'tok-disk' >"$tmp/t"
    ps 0 "persist" "$tmp/t" -- persist --end-user-id eu-disk
    if restart_gnome_keyring; then
        timeout 30 "$kctl" is-locked && ok "the login keyring loaded locked" || bad "the login keyring loaded unlocked"
        locked_checks session
        timeout 30 "$kctl" unlock || bad "keyringctl unlock after the restart failed"
        ps 0 "after unlocking, the session is still there" -- restore
        [[ $out == *eu-disk* ]] && ok "restored eu-disk" || bad "restored: $out"
        ps 0 "clear" -- clear
    else
        bad "could not restart gnome-keyring-daemon"
    fi
fi

echo "== [$provider] unusable and foreign items"
[[ $provider == flatpak ]] || timeout 30 "$kctl" unlock 2>/dev/null
printf 'garbage' | timeout 30 "$kctl" store --schema "$schema" "auth_environment_id=$env_id" session_generation=00 >/dev/null ||
    bad "storing the unusable item failed"
printf 'garbage' | timeout 30 "$kctl" store --schema org.example.LookAlike "auth_environment_id=$env_id" >/dev/null ||
    bad "storing the foreign item failed"
ps 1 "restore with an unusable item of ours says signed out" -- restore
(( $(count "$env_id") == 0 )) && ok "the unusable item was deleted" || bad "the unusable item is still there"
foreign=$(timeout 30 "$kctl" count --schema org.example.LookAlike "auth_environment_id=$env_id")
[[ $foreign == 1 ]] && ok "the foreign item was not deleted" || bad "foreign items left: $foreign"
ps 0 "clear leaves the foreign item alone" -- clear
foreign=$(timeout 30 "$kctl" count --schema org.example.LookAlike "auth_environment_id=$env_id")
[[ $foreign == 1 ]] && ok "the foreign item survived clear" || bad "foreign items after clear: $foreign"
timeout 30 "$kctl" delete-all --schema org.example.LookAlike "auth_environment_id=$env_id" >/dev/null

echo "== [$provider] items whose attributes only look like ours (an over-matching search)"
# KeePassXC 2.7.4 matches attribute values with the regex ^(?:value)$, and $ also matches before
# a final line end: a search for our schema and auth environment also returns an item whose
# values are ours plus "\n". Such an item is not ours: never restored, never deleted. Its
# secrets are a version-1 document (which names no auth environment) and an unusable one, so
# only the library's attribute confirmation can tell.
over="$env_id-over"
printf '{"v":1,"clientSessionToken":"theirs","endUserId":"them"}' | timeout 30 "$kctl" store --schema "$schema"$'\n' "auth_environment_id=$over"$'\n' \
    session_generation=00 >/dev/null || bad "storing the look-alike v1 item failed"
printf 'garbage' | timeout 30 "$kctl" store --schema "$schema"$'\n' "auth_environment_id=$over"$'\n' session_generation=01 >/dev/null ||
    bad "storing the look-alike unusable item failed"
matched=$(count "$over")
note "the provider's search for our attributes returns $matched of the 2 look-alike items"
cli_over=("${cli[@]/$env_id/$over}")
start=$(date +%s%N)
out=$(timeout 60 "${cli_over[@]}" restore 2>"$tmp/err") && got=0 || got=$?
[[ $got == 1 ]] && ok "restore with only look-alike items says signed out (exit 1, $(( ($(date +%s%N) - start) / 1000000 )) ms)" ||
    bad "restore with look-alike items: exit $got, wanted 1; stdout: $out; stderr: $(cat "$tmp/err")"
timeout 60 "${cli_over[@]}" clear >/dev/null 2>&1 || bad "clear with look-alike items failed"
left=$(timeout 30 "$kctl" count --schema "$schema"$'\n' "auth_environment_id=$over"$'\n' 2>/dev/null)
[[ $left == 2 ]] && ok "restore and clear deleted neither look-alike item" || bad "look-alike items left: $left of 2"
timeout 30 "$kctl" delete-all --schema "$schema"$'\n' "auth_environment_id=$over"$'\n' >/dev/null

echo "== [$provider] a provider that stops answering (SIGSTOP): every call ends at its deadline, nothing lost"
if [[ $provider == flatpak ]]; then
    # The portal runs outside the sandbox's pid namespace: Tests/flatpak/run.sh stops it.
    skip "stopping the provider: Tests/flatpak/run.sh stops the portal from outside the sandbox"
else
    # The provider's pid from the bus (earlier sections may have restarted it).
    provider_pid=$(timeout 5 gdbus call --session -d org.freedesktop.DBus -o /org/freedesktop/DBus \
        -m org.freedesktop.DBus.GetConnectionUnixProcessID org.freedesktop.secrets 2>/dev/null | sed -n 's/.*uint32 \([0-9]*\).*/\1/p')
    if [[ -n $provider_pid ]] && kill -0 "$provider_pid" 2>/dev/null; then
        printf 'tok-before-stop' >"$tmp/t"
        ps 0 "persist before the provider stops" "$tmp/t" -- persist --end-user-id eu-stop
        kill -STOP "$provider_pid"
        # Timed from outside the process: the bound lies halfway between one deadline and two, a
        # whole second either side (a loaded machine once stalled a command 600 ms).
        stopped() { # NAME COMMAND...: exit 2 "did not answer" within 3 s at a 2000 ms deadline
            local name=$1 input=/dev/null start ms code
            shift
            [[ $1 == persist ]] && input=$tmp/t2
            start=$(date +%s%N)
            out=$(timeout 30 "${cli[@]:0:5}" --timeout-ms 2000 "$@" <"$input" 2>"$tmp/err") && code=0 || code=$?
            ms=$(( ($(date +%s%N) - start) / 1000000 ))
            # (status prints its findings, the error included, on stdout)
            if [[ $code == 2 ]] && ((ms < 3000)) && grep -q "did not answer" <<<"$(cat "$tmp/err"; printf '%s' "$out")"; then
                ok "$name with the provider stopped: exit 2 at the 2000 ms deadline ($ms ms)"
            else
                bad "$name with the provider stopped: exit $code after $ms ms; stderr: $(head -c 300 "$tmp/err")"
            fi
        }
        printf 'tok-during-stop' >"$tmp/t2"
        stopped restore restore
        stopped persist persist --end-user-id eu-stop-2
        stopped clear clear
        stopped status status
        kill -CONT "$provider_pid"
        out=$(timeout 60 "${cli[@]}" restore --show-token --json 2>"$tmp/err") && got=0 || got=$?
        token=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("clientSessionToken",""), end="")' <<<"$out" 2>/dev/null)
        [[ $got == 0 && $token == tok-before-stop ]] && ok "after SIGCONT the session stored before the stop is restored" ||
            bad "after SIGCONT: exit $got, token '$token'; stderr: $(head -c 300 "$tmp/err")"
        ps 0 "clear after SIGCONT" -- clear
    else
        bad "no provider pid on the bus: cannot stop it"
    fi
fi

harness_summary "providers/run.sh [$provider]"
