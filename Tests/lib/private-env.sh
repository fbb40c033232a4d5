# Tests/lib/private-env.sh — sourced (not run) by scripts/with-keyring.sh and
# scripts/with-flatpak-sandbox.sh: the life of a private test environment, from its directory and
# its dbus-daemon to the teardown that leaves nothing behind.
#
# It sources scripts/keyring-providers.sh (alive, ours, stop_pid and the providers). The caller sets
# ME (the prefix of its messages) and defines
#   stop_daemons   stops the daemons it started on the bus (the teardown calls it before it stops
#                  dbus-daemon)
#   setup_logs     prints the paths of the logs to show when setup fails
# Then: penv_traps; penv_make_dir PREFIX [SUBDIR...]; penv_start_bus COMMENT [CONFIG-XML];
# start its daemons; penv_run CMD... (the command's status in $rc); exit "$rc".
#
# Teardown (on exit, also after SIGINT, SIGTERM, SIGHUP): SIGCONT then SIGTERM (SIGKILL after 3 s)
# to the command, the caller's daemons, dbus-daemon and any other process still carrying this
# run's PORTAL_TEST_KEYRING_DIR in its environment (a replacement daemon a test started), then
# rm -rf of the directory (kept, and its path printed, with PORTAL_TEST_KEEP_KEYRING_DIR=1).

# shellcheck shell=bash
# Functions that run from traps look like dead code to shellcheck 0.9; the caller reads what is
# set here.
# shellcheck disable=SC2317,SC2034

# shellcheck source=scripts/keyring-providers.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/keyring-providers.sh"

# The exit status when the environment could not be set up.
readonly SETUP_FAILED=125
# A closed stdin would be reused by the first file we open; give CMD /dev/null.
[[ -e /dev/fd/0 ]] || exec </dev/null

dir=""
dbus_pid=""
address=""
cmd_pid=""
penv_torn_down=0

note() { printf '%s: %s\n' "$ME" "$*" >&2; }

usage() { # --help: the caller's header on stdout, exit 0; no command: on stderr, exit 2
    if [[ ${1:-} == help ]]; then sed -n '2,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0"; exit 0; fi
    sed -n '2,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
}

# Pids of processes (other than this script) whose environment carries this
# run's PORTAL_TEST_KEYRING_DIR: everything started in the private env.
leftover_pids() {
    local proc pid
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [[ $pid != "$$" && $pid != "${BASHPID:-$$}" ]] || continue
        if ours "$pid" && alive "$pid"; then printf '%s\n' "$pid"; fi
    done
}

show_log() { # TITLE FILE [LINES]: the file (its last LINES lines) on stderr
    local title=$1 file=$2 lines=${3:-}
    if [[ -s $file ]]; then
        printf '%s: ---- %s ----\n' "$ME" "$title" >&2
        if [[ -n $lines ]]; then tail -n "$lines" "$file"; else cat "$file"; fi | sed 's/^/    /' >&2
    else
        printf '%s: (%s: no output)\n' "$ME" "$title" >&2
    fi
}

fail_setup() {
    note "error: $*"
    if [[ -n $dir ]]; then
        local f
        for f in $(setup_logs); do show_log "$(basename "$f")" "$f" "${penv_log_lines:-}"; done
    fi
    exit "$SETUP_FAILED"
}

penv_teardown() {
    local rc=$? pid comm
    ((penv_torn_down)) && return 0
    penv_torn_down=1
    trap - EXIT INT TERM HUP
    set +e
    # Our own helpers (grep, sleep) must not look like leftovers.
    unset PORTAL_TEST_KEYRING_DIR
    if [[ -n $cmd_pid ]] && alive "$cmd_pid"; then stop_pid "$cmd_pid"; fi
    stop_daemons
    stop_pid "$dbus_pid"
    if [[ -n $dir ]]; then
        for pid in $(leftover_pids); do
            comm=$(cat "/proc/$pid/comm" 2>/dev/null)
            note "stopping leftover process $pid ($comm) from this ${penv_what:-private} environment"
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

penv_on_signal() {
    local sig=$1 code=$2
    # Asynchronous commands ignore SIGINT in a non-interactive shell, so the
    # command is always asked to stop with SIGTERM (by the teardown).
    if [[ -n $cmd_pid ]] && alive "$cmd_pid"; then note "got SIG$sig, stopping the command"; fi
    exit "$code"
}

penv_traps() {
    trap penv_teardown EXIT
    trap 'penv_on_signal INT 130' INT
    trap 'penv_on_signal TERM 143' TERM
    trap 'penv_on_signal HUP 129' HUP
}

# penv_make_dir PREFIX [SUBDIR...]: the temporary directory ($dir, mode 700) with home, run, data,
# config, cache, state, log and the SUBDIRs; HOME and the XDG directories there, nothing of the
# real desktop session left in the environment.
penv_make_dir() {
    local prefix=$1 tmp_base=${TMPDIR:-/tmp} sub
    shift
    # A unix socket path must fit in sun_path (108 bytes).
    ((${#tmp_base} <= 60)) || tmp_base=/tmp
    dir=$(mktemp -d "$tmp_base/$prefix.XXXXXXXX") || fail_setup "mktemp -d failed"
    chmod 700 "$dir"
    for sub in home run data config cache state log "$@"; do mkdir -m 700 "$dir/$sub"; done
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
}

xml_escape() {
    local s=$1
    s=${s//&/&amp;}
    s=${s//</&lt;}
    s=${s//>/&gt;}
    s=${s//\"/&quot;}
    printf '%s' "$s"
}

# penv_start_bus COMMENT [CONFIG-XML]: a private session dbus-daemon listening on $dir/bus (EXTERNAL
# auth, everything allowed, CONFIG-XML added to its config: no service directory unless it names
# one); sets dbus_pid and address, exports DBUS_SESSION_BUS_ADDRESS, PORTAL_TEST_DBUS_PID and
# PORTAL_TEST_DBUS_CONFIG. Waits at most $start_timeout seconds.
penv_start_bus() {
    local comment=$1 extra=${2:-} config="$dir/bus.conf" printed_pid="" part="" deadline addr_fd pid_fd
    cat >"$config" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- $comment -->
<busconfig>
  <type>session</type>
  <listen>unix:path=$(xml_escape "$dir/bus")</listen>
  <auth>EXTERNAL</auth>${extra:+
  $extra}
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
    address=""
    deadline=$((SECONDS + start_timeout))
    # A `read -t` that times out mid-line keeps what it consumed in $part: append it, or the
    # address loses its first bytes ("nix:path=…", seen on a loaded machine in the fault suite).
    until read -r -t 0.2 -u "$addr_fd" part; do
        address+=$part
        alive "$dbus_pid" || fail_setup "dbus-daemon exited during start-up"
        ((SECONDS <= deadline)) || fail_setup "dbus-daemon printed no address within ${start_timeout}s"
    done
    address+=$part
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
}

# penv_run CMD...: runs CMD (stdin passed on) and waits for it; its status in $rc. In the
# background so that INT/TERM reach the traps at once (asynchronous commands would otherwise get
# /dev/null as stdin).
penv_run() {
    "$@" <&0 &
    cmd_pid=$!
    rc=0
    wait "$cmd_pid" || rc=$?
    cmd_pid=""
}
