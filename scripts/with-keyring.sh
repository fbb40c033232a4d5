#!/usr/bin/env bash
# with-keyring.sh — run a command inside a private, throwaway Secret Service.
#
#   scripts/with-keyring.sh [--no-unlock] CMD [ARGS...]
#
# Creates a temporary directory (HOME, XDG_* dirs, XDG_RUNTIME_DIR mode 700),
# starts a private dbus-daemon on a unix socket inside it (generated config:
# session bus, EXTERNAL auth, allow everything, NO service directories, so
# nothing is ever auto-activated from the real system) and a
# gnome-keyring-daemon (--foreground --components=secrets) on that bus, waits
# until org.freedesktop.secrets is owned and — unless --no-unlock — until
# ReadAlias("default") names a collection, runs CMD, and then tears everything
# down (also on Ctrl-C / SIGTERM / SIGHUP). Exits with CMD's status; 125 if the
# environment could not be set up (with the daemons' stderr printed). The
# developer's own keyring and session bus are never touched.
#
# Exported to CMD:
#   DBUS_SESSION_BUS_ADDRESS      the private bus
#   PORTAL_TEST_KEYRING_PASSWORD  the login keyring's (random) password
#   PORTAL_TEST_KEYRING_PID       gnome-keyring-daemon's pid
#   PORTAL_TEST_DBUS_PID          dbus-daemon's pid
#   PORTAL_TEST_DBUS_CONFIG       the generated bus config (start a replacement
#                                 bus on the same address with
#                                 dbus-daemon --nofork --config-file=...)
#   PORTAL_TEST_KEYRING_DIR       the temporary directory
#   PORTAL_TEST_KEYRING_MODE      "unlocked" or "no-unlock"
#   HOME XDG_RUNTIME_DIR XDG_DATA_HOME XDG_CONFIG_HOME XDG_CACHE_HOME
#   XDG_STATE_HOME                all inside the temporary directory
# and DISPLAY / WAYLAND_DISPLAY / XAUTHORITY are unset, GIO_USE_VFS=local,
# GSETTINGS_BACKEND=memory (no gvfs/dconf), GNOME_KEYRING_* cleared.
#
# --no-unlock  start gnome-keyring-daemon WITHOUT --unlock: no login keyring,
#              no default collection (ReadAlias("default") = "/"); only waits
#              for the bus name.
#
# Environment:
#   PORTAL_KEYRING_REAL=1   start nothing; run CMD in the current environment
#                           (e.g. to point a demo at the desktop's keyring)
#   PORTAL_TEST_KEYRING_START_TIMEOUT  seconds to wait for start-up (10)
#   PORTAL_TEST_KEEP_KEYRING_DIR=1     keep the temp dir (daemons are still
#                                      stopped) and print its path
#
# Teardown: SIGCONT then SIGTERM (SIGKILL after 3 s) to gnome-keyring-daemon,
# dbus-daemon and any other process still carrying this run's
# PORTAL_TEST_KEYRING_DIR in its environment (e.g. a replacement daemon a
# fault test started), then rm -rf of the directory.

# Functions that run from traps look like dead code to shellcheck 0.9.
# shellcheck disable=SC2317
set -euo pipefail

readonly ME="with-keyring"
readonly SETUP_FAILED=125

# A closed stdin would be reused by the first file we open; give CMD /dev/null.
[[ -e /dev/fd/0 ]] || exec </dev/null

usage() { # --help: stdout, exit 0; no command: stderr, exit 2
    if [[ ${1:-} == help ]]; then sed -n '2,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0"; exit 0; fi
    sed -n '2,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
}

note() { printf '%s: %s\n' "$ME" "$*" >&2; }

unlock=1
if [[ $# -gt 0 && $1 == --no-unlock ]]; then
    unlock=0
    shift
fi
if [[ $# -gt 0 && $1 == -- ]]; then
    shift
fi
if [[ $# -gt 0 && ( $1 == -h || $1 == --help ) ]]; then
    usage help
fi
if [[ $# -eq 0 ]]; then
    usage
fi

if [[ ${PORTAL_KEYRING_REAL:-} == 1 ]]; then
    note "PORTAL_KEYRING_REAL=1: no private keyring; running '$1' against the current session bus and keyring"
    exec "$@"
fi

for tool in dbus-daemon gnome-keyring-daemon gdbus mktemp od; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        note "error: '$tool' not found (run scripts/deps.sh)"
        exit "$SETUP_FAILED"
    fi
done

start_timeout=${PORTAL_TEST_KEYRING_START_TIMEOUT:-10}
if ! [[ $start_timeout =~ ^[0-9]+$ ]] || ((start_timeout < 1)); then
    note "error: PORTAL_TEST_KEYRING_START_TIMEOUT must be a positive integer"
    exit "$SETUP_FAILED"
fi

# ------------------------------------------------------------------ helpers

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

# Pids of processes (other than this script) whose environment carries this
# run's PORTAL_TEST_KEYRING_DIR: everything started in the private env.
leftover_pids() {
    local proc pid
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [[ $pid != "$$" && $pid != "${BASHPID:-$$}" ]] || continue
        if ours "$pid" && alive "$pid"; then
            printf '%s\n' "$pid"
        fi
    done
}

show_log() {
    local title=$1 file=$2
    if [[ -s $file ]]; then
        printf '%s: ---- %s ----\n' "$ME" "$title" >&2
        sed 's/^/    /' "$file" >&2
    else
        printf '%s: (%s: no output)\n' "$ME" "$title" >&2
    fi
}

fail_setup() {
    note "error: $*"
    [[ -n ${dir:-} ]] && show_log "dbus-daemon stderr" "$dir/log/dbus-daemon.log"
    [[ -n ${dir:-} && -e $dir/log/gnome-keyring.log ]] &&
        show_log "gnome-keyring-daemon stderr" "$dir/log/gnome-keyring.log"
    exit "$SETUP_FAILED"
}

dir=""
dbus_pid=""
keyring_pid=""
cmd_pid=""
torn_down=0

teardown() {
    local rc=$? pid comm
    ((torn_down)) && return 0
    torn_down=1
    trap - EXIT INT TERM HUP
    set +e
    # Our own helpers (grep, sleep) must not look like leftovers.
    unset PORTAL_TEST_KEYRING_DIR
    if [[ -n $cmd_pid ]] && alive "$cmd_pid"; then
        stop_pid "$cmd_pid"
    fi
    stop_pid "$keyring_pid"
    stop_pid "$dbus_pid"
    if [[ -n $dir ]]; then
        for pid in $(leftover_pids); do
            comm=$(cat "/proc/$pid/comm" 2>/dev/null)
            note "stopping leftover process $pid ($comm) from this keyring environment"
            stop_pid "$pid"
        done
        if [[ ${PORTAL_TEST_KEEP_KEYRING_DIR:-} == 1 ]]; then
            note "kept $dir (PORTAL_TEST_KEEP_KEYRING_DIR=1)"
        elif ! rm -rf -- "$dir" 2>/dev/null; then
            sleep 0.2
            rm -rf -- "$dir" || note "warning: could not remove $dir"
        fi
    fi
    exit "$rc"
}

on_signal() {
    local sig=$1 code=$2
    # Asynchronous commands ignore SIGINT in a non-interactive shell, so the
    # command is always asked to stop with SIGTERM.
    if [[ -n $cmd_pid ]] && alive "$cmd_pid"; then
        note "got SIG$sig, stopping the command"
    fi
    exit "$code"
}

trap teardown EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# ------------------------------------------------------------ environment

tmp_base=${TMPDIR:-/tmp}
# A unix socket path must fit in sun_path (108 bytes).
if ((${#tmp_base} > 60)); then
    tmp_base=/tmp
fi
dir=$(mktemp -d "$tmp_base/portal-keyring.XXXXXXXX") || fail_setup "mktemp -d failed"
chmod 700 "$dir"
mkdir -m 700 "$dir/home" "$dir/run" "$dir/data" "$dir/config" "$dir/cache" "$dir/state" "$dir/log"

# Nothing of the real desktop session may leak in.
unset DBUS_SESSION_BUS_ADDRESS DBUS_STARTER_ADDRESS DBUS_STARTER_BUS_TYPE \
    GNOME_KEYRING_CONTROL GNOME_KEYRING_PID DISPLAY WAYLAND_DISPLAY XAUTHORITY \
    SESSION_MANAGER DESKTOP_AUTOSTART_ID
export HOME="$dir/home"
export XDG_RUNTIME_DIR="$dir/run"
export XDG_DATA_HOME="$dir/data"
export XDG_CONFIG_HOME="$dir/config"
export XDG_CACHE_HOME="$dir/cache"
export XDG_STATE_HOME="$dir/state"
export GIO_USE_VFS=local
export GSETTINGS_BACKEND=memory
export PORTAL_TEST_KEYRING_DIR="$dir"
if ((unlock)); then
    export PORTAL_TEST_KEYRING_MODE=unlocked
else
    export PORTAL_TEST_KEYRING_MODE=no-unlock
fi

# ------------------------------------------------------------ dbus-daemon

xml_escape() {
    local s=$1
    s=${s//&/&amp;}
    s=${s//</&lt;}
    s=${s//>/&gt;}
    s=${s//\"/&quot;}
    printf '%s' "$s"
}

config="$dir/bus.conf"
cat >"$config" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- generated by scripts/with-keyring.sh: private test bus, no service
     directories (nothing is auto-activated) -->
<busconfig>
  <type>session</type>
  <listen>unix:path=$(xml_escape "$dir/bus")</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
export PORTAL_TEST_DBUS_CONFIG="$config"

# --print-address/--print-pid go to FIFOs that we hold open read-write (so no
# open() can block and `read -t` bounds the wait); no pidfile, no races.
mkfifo -m 600 "$dir/.address" "$dir/.pid"
exec {addr_fd}<>"$dir/.address" {pid_fd}<>"$dir/.pid"
(
    exec {addr_fd}>&- {pid_fd}>&-
    exec dbus-daemon --nofork --nopidfile --config-file="$config" \
        --print-address=3 --print-pid=4 \
        3>"$dir/.address" 4>"$dir/.pid" </dev/null 2>"$dir/log/dbus-daemon.log" >&2
) &
dbus_pid=$!
address="" printed_pid=""
deadline=$((SECONDS + start_timeout))
until read -r -t 0.2 -u "$addr_fd" address; do
    address=""
    alive "$dbus_pid" || fail_setup "dbus-daemon exited during start-up"
    ((SECONDS <= deadline)) || fail_setup "dbus-daemon printed no address within ${start_timeout}s"
done
read -r -t 2 -u "$pid_fd" printed_pid || true
exec {addr_fd}>&- {pid_fd}>&-
rm -f "$dir/.address" "$dir/.pid"
if [[ -z $address ]] || ! alive "$dbus_pid"; then
    fail_setup "dbus-daemon did not start"
fi
if [[ $printed_pid != "$dbus_pid" ]]; then
    fail_setup "dbus-daemon printed pid '$printed_pid' but was started as $dbus_pid"
fi
export DBUS_SESSION_BUS_ADDRESS="$address"
export PORTAL_TEST_DBUS_PID="$dbus_pid"

# --------------------------------------------------- gnome-keyring-daemon

PORTAL_TEST_KEYRING_PASSWORD=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export PORTAL_TEST_KEYRING_PASSWORD
if ((unlock)); then
    # --unlock reads the password from stdin up to EOF (no trailing newline)
    # and creates/unlocks the "login" keyring, which becomes "default".
    gnome-keyring-daemon --foreground --unlock --components=secrets \
        < <(printf '%s' "$PORTAL_TEST_KEYRING_PASSWORD") \
        >"$dir/log/gnome-keyring.out" 2>"$dir/log/gnome-keyring.log" &
else
    gnome-keyring-daemon --foreground --components=secrets \
        </dev/null >"$dir/log/gnome-keyring.out" 2>"$dir/log/gnome-keyring.log" &
fi
keyring_pid=$!
export PORTAL_TEST_KEYRING_PID="$keyring_pid"

bus_call() {
    gdbus call --address "$address" --timeout 2 "$@" 2>/dev/null
}

deadline=$((SECONDS + start_timeout))
name_owned=0
alias_ok=0
default_path=""
while ((SECONDS <= deadline)); do
    if ! alive "$keyring_pid"; then
        fail_setup "gnome-keyring-daemon exited during start-up"
    fi
    if ! alive "$dbus_pid"; then
        fail_setup "dbus-daemon exited during start-up"
    fi
    if ((!name_owned)); then
        if [[ $(bus_call --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
            --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets) == "(true,)" ]]; then
            name_owned=1
        fi
    fi
    if ((name_owned)); then
        ((unlock)) || break
        reply=$(bus_call --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
            --method org.freedesktop.Secret.Service.ReadAlias default) || reply=""
        if [[ $reply =~ ^\(objectpath\ \'([^\']*)\',\)$ ]]; then
            default_path=${BASH_REMATCH[1]}
            if [[ $default_path != / ]]; then
                alias_ok=1
                break
            fi
        fi
    fi
    sleep 0.05
done
if ((!name_owned)); then
    fail_setup "org.freedesktop.secrets was not owned on the private bus within ${start_timeout}s"
fi
if ((unlock && !alias_ok)); then
    fail_setup "ReadAlias(\"default\") was still '${default_path:-<no answer>}' after ${start_timeout}s (login keyring not created/unlocked)"
fi

# ------------------------------------------------------------------- run

# In the background so that INT/TERM reach our traps at once; stdin is passed
# on explicitly (async commands would otherwise get /dev/null).
"$@" <&0 &
cmd_pid=$!
rc=0
wait "$cmd_pid" || rc=$?
cmd_pid=""
exit "$rc"
