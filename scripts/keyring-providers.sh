# keyring-providers.sh — sourced (not run) by Tests/lib/private-env.sh (for
# scripts/with-keyring.sh and scripts/with-flatpak-sandbox.sh) and
# scripts/keyring-restart.sh: how each Secret Service provider of the test
# matrix is prepared, started, recognised as ready and stopped.
#
# The caller sets, before calling anything here:
#   dir      the private keyring directory (PORTAL_TEST_KEYRING_DIR)
#   address  the private bus address (DBUS_SESSION_BUS_ADDRESS)
#   ME       prefix for messages
# and exports HOME / XDG_* into that directory. Functions report problems in
# $kp_error and return 1; they never exit.
#
# Providers (see docs/providers.md for what each one does with the library):
#   gnome-keyring               login keyring created and unlocked with --unlock
#   gnome-keyring-locked        same keyring, daemon restarted without --unlock:
#                               loaded LOCKED from disk
#   gnome-keyring-passwordless  plain (unencrypted) login keyring written before
#                               the daemon starts; it loads Locked=true and is
#                               unlocked with a prompt-less Service.Unlock
#   keepassxc                   KeePassXC 2.7.4 headless, FdoSecrets on, no
#                               confirmations
#   keepassxc-confirm           same, ConfirmDeleteItem, ConfirmAccessItem and
#                               UnlockBeforeSearch on
#   kwallet                     kwalletd5 headless with an empty-password wallet
#                               "kdewallet" created through pamOpen; loads
#                               locked, Service.Unlock's prompt completes by
#                               itself

# shellcheck shell=bash
# Functions called from traps and other files look unused to shellcheck 0.9;
# `address` is set by the caller; kp_error is read by the callers.
# shellcheck disable=SC2317,SC2154,SC2034

KP_PROVIDERS=(gnome-keyring gnome-keyring-locked gnome-keyring-passwordless keepassxc keepassxc-confirm kwallet)

kp_error=""
kp_pid=""

kp_known_provider() {
    local p
    for p in "${KP_PROVIDERS[@]}"; do [[ $p == "$1" ]] && return 0; done
    return 1
}

# True while PID exists and is not a zombie.
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# True if PID is our child or was started inside this private environment
# (its environment carries our PORTAL_TEST_KEYRING_DIR). Guards against
# killing an unrelated process that reused the pid of a daemon a test had
# already killed.
ours() {
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    read -r -a fields <<<"${stat##*) }"
    [[ ${fields[1]:-} == "$$" ]] && return 0
    [[ -n ${dir:-} ]] && grep -qzxF -- "PORTAL_TEST_KEYRING_DIR=$dir" "/proc/$1/environ" 2>/dev/null
}

# Stop one of our processes: SIGCONT (it may have been SIGSTOPped by a test),
# SIGTERM, SIGKILL after 3 s; reap it if it is our child.
stop_pid() {
    local pid=$1 i
    [[ -n $pid ]] || return 0
    if ! alive "$pid" || ! ours "$pid"; then
        wait "$pid" 2>/dev/null || true
        return 0
    fi
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
        alive "$pid" || break
        sleep 0.05
    done
    if alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 40; i++)); do
            alive "$pid" || break
            sleep 0.05
        done
    fi
    wait "$pid" 2>/dev/null || true
}

bus_call() {
    gdbus call --address "$address" --timeout 2 "$@" 2>/dev/null
}

kp_name_owned() { # NAME
    [[ $(bus_call --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
        --method org.freedesktop.DBus.NameHasOwner "$1") == "(true,)" ]]
}

# Prints the default collection's path ("/" if none; nothing if no answer).
kp_default_collection() {
    local reply
    reply=$(bus_call --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
        --method org.freedesktop.Secret.Service.ReadAlias default) || return 1
    [[ $reply =~ ^\(objectpath\ \'([^\']*)\',\)$ ]] || return 1
    printf '%s\n' "${BASH_REMATCH[1]}"
}

# Prints "true" or "false": Collection.Locked of PATH.
kp_collection_locked() {
    local reply
    reply=$(bus_call --dest org.freedesktop.secrets --object-path "$1" \
        --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked) || return 1
    case $reply in
    "(<true>,)") echo true ;;
    "(<false>,)") echo false ;;
    *) return 1 ;;
    esac
}

# kp_wait_ready PID WANT TIMEOUT — wait until the daemon PID serves
# org.freedesktop.secrets and WANT holds:
#   name      only the bus name is owned
#   alias     ReadAlias("default") names a collection
#   unlocked  ... and that collection's Locked is false
#   locked    ... and that collection's Locked is true
# Sets kp_default to the collection path.
kp_default=""
kp_wait_ready() {
    local pid=$1 want=$2 timeout=$3 deadline locked="" owned=0
    deadline=$((SECONDS + timeout))
    kp_default=""
    while ((SECONDS <= deadline)); do
        if ! alive "$pid"; then
            kp_error="the provider daemon (pid $pid) exited during start-up"
            return 1
        fi
        if ((!owned)) && kp_name_owned org.freedesktop.secrets; then
            owned=1
        fi
        if ((owned)); then
            [[ $want == name ]] && return 0
            kp_default=$(kp_default_collection) || kp_default=""
            if [[ -n $kp_default && $kp_default != / ]]; then
                [[ $want == alias ]] && return 0
                locked=$(kp_collection_locked "$kp_default") || locked=""
                [[ $want == unlocked && $locked == false ]] && return 0
                [[ $want == locked && $locked == true ]] && return 0
            fi
        fi
        sleep 0.05
    done
    if ((!owned)); then
        kp_error="org.freedesktop.secrets was not owned on the private bus within ${timeout}s"
    elif [[ $want == alias || -z $kp_default || $kp_default == / ]]; then
        kp_error="ReadAlias(\"default\") was still '${kp_default:-<no answer>}' after ${timeout}s"
    else
        kp_error="the default collection $kp_default was not $want after ${timeout}s (Locked=${locked:-<no answer>})"
    fi
    return 1
}

# ------------------------------------------------------------ gnome-keyring

# kp_start_gnome_keyring unlock|plain — start gnome-keyring-daemon in the
# background (with --unlock and $PORTAL_TEST_KEYRING_PASSWORD on stdin, or
# without --unlock); sets kp_pid. Output is appended to $dir/log.
kp_start_gnome_keyring() {
    if [[ $1 == unlock ]]; then
        # --unlock reads the password from stdin up to EOF (no trailing newline)
        # and creates/unlocks the "login" keyring, which becomes "default".
        gnome-keyring-daemon --foreground --unlock --components=secrets \
            < <(printf '%s' "$PORTAL_TEST_KEYRING_PASSWORD") \
            >>"$dir/log/gnome-keyring.out" 2>>"$dir/log/gnome-keyring.log" &
    else
        gnome-keyring-daemon --foreground --components=secrets \
            </dev/null >>"$dir/log/gnome-keyring.out" 2>>"$dir/log/gnome-keyring.log" &
    fi
    kp_pid=$!
}

# A passwordless login keyring: gnome-keyring's plain format is a GKeyFile
# (no encryption); "default" names it. Written before the daemon starts.
kp_write_passwordless_keyring() {
    local now
    now=$(date +%s)
    mkdir -p "$XDG_DATA_HOME/keyrings" && chmod 700 "$XDG_DATA_HOME/keyrings"
    cat >"$XDG_DATA_HOME/keyrings/login.keyring" <<EOF
[keyring]
display-name=Login
ctime=$now
mtime=0
lock-on-idle=false
lock-after=false
EOF
    chmod 600 "$XDG_DATA_HOME/keyrings/login.keyring"
    printf 'login' >"$XDG_DATA_HOME/keyrings/default"
}

# Service.Unlock of the default collection, which must need no prompt (a
# passwordless keyring loads Locked=true and unlocks without one).
kp_unlock_without_prompt() {
    local coll reply
    coll=$(kp_default_collection) || { kp_error="ReadAlias(\"default\") gave no answer"; return 1; }
    reply=$(bus_call --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
        --method org.freedesktop.Secret.Service.Unlock "['$coll']") || {
        kp_error="Service.Unlock($coll) failed"
        return 1
    }
    if [[ $reply != *"objectpath '/')" ]]; then
        kp_error="Service.Unlock($coll) asked for a prompt: $reply"
        return 1
    fi
}

# ---------------------------------------------------------------- KeePassXC

# kp_make_keepassxc_db — a database protected by $PORTAL_TEST_KEYRING_PASSWORD
# with a group "Portal" exposed over the Secret Service; sets and exports
# PORTAL_TEST_KEEPASSXC_DB.
kp_make_keepassxc_db() {
    local kdir=$dir/keepassxc pw=$PORTAL_TEST_KEYRING_PASSWORD log=$dir/log/keepassxc-cli.log
    mkdir -p "$kdir" && chmod 700 "$kdir"
    local db=$kdir/portal.kdbx plain=$kdir/plain.kdbx
    if ! printf '%s\n%s\n' "$pw" "$pw" | keepassxc-cli db-create -p "$plain" >>"$log" 2>&1; then
        kp_error="keepassxc-cli db-create failed (see $log)"
        return 1
    fi
    if ! printf '%s\n' "$pw" | keepassxc-cli mkdir "$plain" Portal >>"$log" 2>&1; then
        kp_error="keepassxc-cli mkdir failed (see $log)"
        return 1
    fi
    # The exposed group is the database's Meta/CustomData item
    # FDO_SECRETS_EXPOSED_GROUP = {group uuid}; keepassxc-cli cannot set it,
    # so: export to XML, add the item, import into the final database.
    if ! printf '%s\n' "$pw" | keepassxc-cli export -f xml "$plain" >"$kdir/export.xml" 2>>"$log"; then
        kp_error="keepassxc-cli export failed (see $log)"
        return 1
    fi
    if ! python3 - "$kdir/export.xml" "$kdir/import.xml" Portal 2>>"$log" <<'PY'; then
import base64, sys, uuid
import xml.etree.ElementTree as ET
src, dst, group_name = sys.argv[1:4]
tree = ET.parse(src)
meta = tree.getroot().find("Meta")
group = next(g for g in tree.getroot().find("Root").iter("Group") if g.findtext("Name") == group_name)
group_uuid = uuid.UUID(bytes=base64.b64decode(group.findtext("UUID")))
custom = meta.find("CustomData")
if custom is None:
    custom = ET.SubElement(meta, "CustomData")
item = ET.SubElement(custom, "Item")
ET.SubElement(item, "Key").text = "FDO_SECRETS_EXPOSED_GROUP"
ET.SubElement(item, "Value").text = "{%s}" % group_uuid
tree.write(dst, encoding="UTF-8", xml_declaration=True)
PY
        kp_error="could not add FDO_SECRETS_EXPOSED_GROUP to the exported XML (see $log)"
        return 1
    fi
    if ! printf '%s\n%s\n' "$pw" "$pw" | keepassxc-cli import -p "$kdir/import.xml" "$db" >>"$log" 2>&1; then
        kp_error="keepassxc-cli import failed (see $log)"
        return 1
    fi
    rm -f "$kdir/export.xml" "$kdir/import.xml" "$plain"
    export PORTAL_TEST_KEEPASSXC_DB=$db
}

# kp_write_keepassxc_ini 0|1 — 1 turns the confirmations on.
kp_write_keepassxc_ini() {
    local confirm=false
    [[ $1 == 1 ]] && confirm=true
    mkdir -p "$XDG_CONFIG_HOME/keepassxc" && chmod 700 "$XDG_CONFIG_HOME/keepassxc"
    cat >"$XDG_CONFIG_HOME/keepassxc/keepassxc.ini" <<EOF
[General]
ConfigVersion=2
SingleInstance=false
RememberLastDatabases=false
OpenPreviousDatabasesOnStartup=false
AutoSaveAfterEveryChange=true

[GUI]
CheckForUpdates=false
ShowTrayIcon=false

[Security]
LockDatabaseIdle=false
LockDatabaseScreenLock=false

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmDeleteItem=$confirm
ConfirmAccessItem=$confirm
UnlockBeforeSearch=$confirm
EOF
}

# kp_start_keepassxc — start KeePassXC headless on the database (password on
# stdin); sets kp_pid.
kp_start_keepassxc() {
    QT_QPA_PLATFORM=offscreen keepassxc --pw-stdin "$PORTAL_TEST_KEEPASSXC_DB" \
        < <(printf '%s\n' "$PORTAL_TEST_KEYRING_PASSWORD") \
        >>"$dir/log/keepassxc.out" 2>>"$dir/log/keepassxc.log" &
    kp_pid=$!
}

kp_keepassxc_lock_all() {
    bus_call --dest org.keepassxc.KeePassXC.MainWindow --object-path /keepassxc \
        --method org.keepassxc.KeePassXC.MainWindow.lockAllDatabases >/dev/null
}

# ------------------------------------------------------------------ KWallet

# Service.Unlock of the default collection and, if it returns a prompt,
# Prompt("") and a wait (polling Locked) until the collection is unlocked.
kp_unlock_with_prompt() {
    local coll reply prompt timeout=$1
    coll=$(kp_default_collection) || { kp_error="ReadAlias(\"default\") gave no answer"; return 1; }
    reply=$(bus_call --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
        --method org.freedesktop.Secret.Service.Unlock "['$coll']") || {
        kp_error="Service.Unlock($coll) failed"
        return 1
    }
    prompt=$(grep -o "/org/freedesktop/secrets/prompt/[^']*" <<<"$reply" || true)
    if [[ -n $prompt ]]; then
        bus_call --dest org.freedesktop.secrets --object-path "$prompt" \
            --method org.freedesktop.Secret.Prompt.Prompt "" >/dev/null || {
            kp_error="Prompt.Prompt($prompt) failed"
            return 1
        }
    fi
    kp_wait_ready "$kp_pid" unlocked "$timeout"
}

kp_start_kwalletd() {
    QT_QPA_PLATFORM=offscreen kwalletd5 </dev/null >>"$dir/log/kwalletd5.out" 2>>"$dir/log/kwalletd5.log" &
    kp_pid=$!
}

# kp_make_kwallet TIMEOUT — the empty-password wallet "kdewallet": a salt
# file, the key PBKDF2-HMAC-SHA512(empty password, salt, 50000 rounds, 56
# bytes) handed to kwalletd5's pamOpen, which creates the wallet; kwalletd5
# is then stopped (the caller starts it again, and only then does it serve
# the wallet over the Secret Service).
kp_make_kwallet() {
    local timeout=$1 key i
    mkdir -p "$XDG_DATA_HOME/kwalletd" && chmod 700 "$XDG_DATA_HOME/kwalletd"
    head -c 56 /dev/urandom >"$XDG_DATA_HOME/kwalletd/kdewallet.salt"
    key=$(python3 -c '
import hashlib, sys
salt = open(sys.argv[1], "rb").read()
key = hashlib.pbkdf2_hmac("sha512", b"", salt, 50000, 56)
print("[" + ", ".join("byte 0x%02x" % b for b in key) + "]")' "$XDG_DATA_HOME/kwalletd/kdewallet.salt") || {
        kp_error="could not derive the wallet key with python3"
        return 1
    }
    kp_start_kwalletd
    for ((i = 0; i < timeout * 20; i++)); do
        kp_name_owned org.kde.kwalletd5 && break
        alive "$kp_pid" || { kp_error="kwalletd5 exited during start-up"; return 1; }
        sleep 0.05
    done
    if ! gdbus call --address "$address" --timeout 5 --dest org.kde.kwalletd5 --object-path /modules/kwalletd5 \
        --method org.kde.KWallet.pamOpen kdewallet "$key" 0 >/dev/null 2>>"$dir/log/kwalletd5.log"; then
        kp_error="org.kde.KWallet.pamOpen failed"
        return 1
    fi
    for ((i = 0; i < timeout * 20; i++)); do
        [[ -s $XDG_DATA_HOME/kwalletd/kdewallet.kwl ]] && break
        sleep 0.05
    done
    [[ -s $XDG_DATA_HOME/kwalletd/kdewallet.kwl ]] || { kp_error="pamOpen created no kdewallet.kwl"; return 1; }
    stop_pid "$kp_pid"
    for ((i = 0; i < 100; i++)); do
        kp_name_owned org.freedesktop.secrets || break
        sleep 0.05
    done
}

# ------------------------------------------------------------ start / restart

# kp_start PROVIDER FIRST TIMEOUT — start the provider's daemon (FIRST=1: the
# first start in this environment, which also prepares the keyring files) and
# wait until it is ready in the provider's starting state. Sets kp_pid and
# kp_default. Seeding and the locked restart are done by the callers.
kp_start() {
    local provider=$1 first=$2 timeout=$3
    case $provider in
    gnome-keyring)
        kp_start_gnome_keyring unlock
        kp_wait_ready "$kp_pid" alias "$timeout"
        ;;
    gnome-keyring-no-unlock)
        kp_start_gnome_keyring plain
        kp_wait_ready "$kp_pid" name "$timeout"
        ;;
    gnome-keyring-locked)
        if ((first)); then
            kp_start_gnome_keyring unlock
            kp_wait_ready "$kp_pid" alias "$timeout"
        else
            kp_start_gnome_keyring plain
            kp_wait_ready "$kp_pid" locked "$timeout"
        fi
        ;;
    gnome-keyring-passwordless)
        # The plain keyring loads with Locked=true; Service.Unlock opens it
        # without a prompt (libsecret does that on its own when it reads).
        ((first)) && kp_write_passwordless_keyring
        kp_start_gnome_keyring plain
        kp_wait_ready "$kp_pid" alias "$timeout" || return 1
        kp_unlock_without_prompt || return 1
        kp_wait_ready "$kp_pid" unlocked "$timeout"
        ;;
    keepassxc | keepassxc-confirm)
        if ((first)); then
            kp_make_keepassxc_db || return 1
            if [[ $provider == keepassxc-confirm ]]; then
                kp_write_keepassxc_ini 1
            else
                kp_write_keepassxc_ini 0
            fi
        fi
        kp_start_keepassxc
        kp_wait_ready "$kp_pid" unlocked "$timeout"
        ;;
    kwallet)
        if ((first)); then
            kp_make_kwallet "$timeout" || return 1
        fi
        kp_start_kwalletd
        kp_wait_ready "$kp_pid" locked "$timeout" || return 1
        kp_unlock_with_prompt "$timeout"
        ;;
    *)
        kp_error="unknown provider '$provider'"
        return 1
        ;;
    esac
}

# The log files worth showing when a provider failed to start.
kp_logs() {
    local f
    for f in "$dir"/log/gnome-keyring.log "$dir"/log/keepassxc.log "$dir"/log/keepassxc-cli.log "$dir"/log/kwalletd5.log; do
        [[ -e $f ]] && printf '%s\n' "$f"
    done
    return 0
}
