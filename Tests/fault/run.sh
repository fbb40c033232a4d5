#!/usr/bin/env bash
# Tests/fault/run.sh — the fault-injection suite: the library against a real
# gnome-keyring-daemon on a private D-Bus session bus, under the failures that credential
# libraries meet in the field. Each numbered condition asserts the status and message, the time
# it took, and that nothing stored was lost.
#
#   Tests/fault/run.sh [--slow | --slow-only] [CONDITION...]
#
# CONDITION is a number 1..15 or "session" (the encrypted transfer session) or "fuzz"; default:
# all of them. Each condition runs in its own throwaway keyring (scripts/with-keyring.sh: a
# private dbus-daemon + gnome-keyring-daemon), started and stopped here. Builds what it needs
# (swift build, the C programs into build/fault). Output: "ok"/"FAIL" per check and "time" lines
# with the measurements; the last line is "fault: N passed, M failed". Exits 1 if any check
# failed.
#
# --slow additionally runs (minutes): the Swift tests under ThreadSanitizer and AddressSanitizer
# (swift test --sanitize=..., own scratch paths, built one after the other; then the checks run in
# two lanes side by side, AddressSanitizer's run split in two, see the slow section below;
# LeakSanitizer suppressions for XCTest's runner: Tests/fault/lsan.supp), the C fault programs under valgrind memcheck (suppressions:
# Tests/fault/valgrind.supp), and the fuzzers for longer
# (PORTAL_FUZZ_SECONDS_SLOW, default 300 s each). Without --slow the fuzzers run
# PORTAL_FUZZ_SECONDS (default 20 s) each. --slow-only runs the slow checks and no condition (CI:
# the test command has just run every condition on the same tree).
#
# Hard timeouts (coreutils `timeout`; a step that overruns is killed with its whole process group,
# keyring daemons included, and reported as "FAIL  TIMEOUT: <step> ..."): every condition,
# PORTAL_FAULT_TIMEOUT seconds if set, else 120 s (condition 11: 420 s, 12: 240 s, fuzz:
# PORTAL_FUZZ_SECONDS + 600 s for its build); the build 1200 s; with --slow, 900 s per valgrind
# program, 2400 s per sanitizer build, 3600 s per sanitizer test run, PORTAL_FUZZ_SECONDS_SLOW + 900 s for fuzzing.
#
# Needs (installed with apt-get when missing and running as root): gdb (gcore, condition 12),
# dbus-bin (dbus-monitor, "session"), valgrind (--slow), plus what scripts/deps.sh installs.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build/fault
SCHEMA=io.portalhq.PortalKeyring.Session

# ------------------------------------------------------------------------ reporting

# ok, fail, check, timing, section, bounded and the closing line: Tests/lib/harness.sh.
# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"

# The hard timeout of a condition, in seconds.
condition_timeout() { # CONDITION
    if [[ -n ${PORTAL_FAULT_TIMEOUT:-} ]]; then echo "$PORTAL_FAULT_TIMEOUT"; return; fi
    case $1 in
    11) echo 420 ;;
    12) echo 240 ;;
    fuzz) echo $((${PORTAL_FUZZ_SECONDS:-20} + 600)) ;;
    *) echo 120 ;;
    esac
}
# Counts ok/FAIL lines of a C program's output (already printed).
absorb() { # FILE
    local n
    n=$(grep -c '^ok ' "$1" || true)
    passed=$((passed + n))
    n=$(grep -c '^FAIL' "$1" || true)
    failed=$((failed + n))
    sed 's/^/  /' "$1"
}

# ------------------------------------------------------------------------ fault_op results
# A result line: R <action> status=<n> ms=<t> out=<...> msg=<...>

r_field() { # LINE FIELD
    local line=$1 field=$2
    case $field in
    action) awk '{print $2}' <<<"$line" ;;
    status | ms | out) grep -oE "(^| )$field=[^ ]*" <<<"$line" | head -n1 | sed "s/^ *$field=//" ;;
    msg) sed 's/.* msg=//' <<<"$line" ;;
    esac
}

# expect LINE STATUS MAX_MS [OUT_PATTERN [MSG_PATTERN]] DESCRIPTION... (patterns are EREs; "" = any)
expect() {
    local line=$1 status=$2 max_ms=$3 out_re=$4 msg_re=$5
    shift 5
    local what="$*"
    if [[ -z $line ]]; then
        fail "$what: no result (the process crashed or hung?)"
        return
    fi
    local st ms out msg
    st=$(r_field "$line" status)
    ms=$(r_field "$line" ms)
    out=$(r_field "$line" out)
    msg=$(r_field "$line" msg)
    timing "$what: status $st after ${ms} ms${msg:+: $msg}"
    local problems=""
    [[ $st == "$status" ]] || problems+=" status $st (expected $status);"
    awk -v a="$ms" -v b="$max_ms" 'BEGIN { exit !(a <= b) }' || problems+=" took $ms ms (limit $max_ms);"
    [[ -z $out_re || $out =~ $out_re ]] || problems+=" out=$out;"
    [[ -z $msg_re || $msg =~ $msg_re ]] || problems+=" message does not match /$msg_re/;"
    if [[ -z $problems ]]; then ok "$what"; else fail "$what:$problems"; fi
}

# The N-th result line of an output file.
nth() { grep '^R ' "$1" | sed -n "${2}p"; }

# ------------------------------------------------------------------------ helpers (in a keyring)

kctl() { "$build/keyringctl" "$@"; }
count() { kctl count --schema "$SCHEMA" auth_environment_id="$1"; }
op() { "$build/fault_op" "$@"; }

wait_for_name() { # seconds
    local i
    for ((i = 0; i < ${1:-10} * 20; i++)); do
        [[ $(gdbus call --session --timeout 1 --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
            --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets 2>/dev/null) == "(true,)" ]] && return 0
        sleep 0.05
    done
    return 1
}

wait_for_default() {
    local i
    for ((i = 0; i < 200; i++)); do
        [[ $(gdbus call --session --timeout 1 --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
            --method org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null) =~ collection ]] && return 0
        sleep 0.05
    done
    return 1
}

# Starts a replacement gnome-keyring-daemon (same HOME: same keyring files), unlocked with the
# harness's password; sets new_keyring_pid. with-keyring.sh stops it at teardown.
start_keyring() {
    gnome-keyring-daemon --foreground --unlock --components=secrets \
        < <(printf '%s' "$PORTAL_TEST_KEYRING_PASSWORD") >/dev/null 2>>"$PORTAL_TEST_KEYRING_DIR/log/replacement.log" &
    new_keyring_pid=$!
    wait_for_name 10 && wait_for_default
}

stop_pid() {
    local pid=$1 i
    kill -CONT "$pid" 2>/dev/null
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null
}

# Runs fault_op as a coprocess, answering its PAUSE lines with the function named after the tag
# (pause_<tag>); its output goes to FILE. Usage: drive FILE ENV ACTION...
drive() {
    local file=$1
    shift
    : >"$file"
    local pid line rfd wfd
    coproc OPPROC { "$build/fault_op" "$@" 2>&1; echo "EXIT $?"; }
    # Our own copies: bash unsets OPPROC (and closes its fds) when the coprocess ends.
    pid=$OPPROC_PID
    exec {rfd}<&"${OPPROC[0]}" {wfd}>&"${OPPROC[1]}"
    while IFS= read -r line <&"$rfd"; do
        printf '%s\n' "$line" >>"$file"
        if [[ $line == "PAUSE "* ]]; then
            "pause_${line#PAUSE }"
            echo go >&"$wfd"
        fi
    done
    exec {rfd}<&- {wfd}>&-
    wait "$pid" 2>/dev/null
}

exit_line() { grep -E '^EXIT ' "$1" | tail -n1; }

# ------------------------------------------------------------------------ conditions (inside)

cond_1() {
    section "1. no session bus (unset, disabled:, missing socket, stale socket)"
    op c1 persist:user-1:token-1 >/dev/null
    local sock="$PORTAL_TEST_KEYRING_DIR/stale-bus"
    python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$sock"
    local variant out
    for variant in unset "disabled:" "unix:path=$PORTAL_TEST_KEYRING_DIR/no-such-socket" "unix:path=$sock"; do
        out=$build/c1.out
        if [[ $variant == unset ]]; then
            env -u DBUS_SESSION_BUS_ADDRESS -u DISPLAY "$build/fault_op" c1 restore persist:user-2:token-2 clear >"$out" 2>&1
        else
            env -u DISPLAY DBUS_SESSION_BUS_ADDRESS="$variant" "$build/fault_op" c1 restore persist:user-2:token-2 clear >"$out" 2>&1
        fi
        check "address $variant: the process exits normally" [ $? -eq 0 ]
        expect "$(nth "$out" 1)" 2 1000 '^none$' 'no session bus' "address $variant: restore fails (not signed out)"
        expect "$(nth "$out" 2)" 2 1000 '' 'no session bus' "address $variant: persist fails"
        expect "$(nth "$out" 3)" 2 1000 '' 'no session bus' "address $variant: clear fails"
    done
    check "nothing stored was lost (1 item)" [ "$(count c1)" = 1 ]
    expect "$(op c1 restore | grep '^R ')" 0 1000 '^user:user-1:token:token-1$' '' "the stored session is unchanged"
}

cond_2() {
    section "2. a session bus without a Secret Service provider"
    local d=$PORTAL_TEST_KEYRING_DIR/bus2
    mkdir -p "$d/services"
    sed "s#<listen>.*</listen>#<listen>unix:path=$d/sock</listen>#" "$PORTAL_TEST_DBUS_CONFIG" >"$d/plain.conf"
    dbus-daemon --nofork --config-file="$d/plain.conf" 2>/dev/null &
    local bus=$!
    sleep 0.3
    local out=$build/c2.out
    DBUS_SESSION_BUS_ADDRESS=unix:path=$d/sock "$build/fault_op" c2 restore persist:user:token clear >"$out" 2>&1
    expect "$(nth "$out" 1)" 2 1000 '^none$' 'not provided by any .service files' "no provider: restore fails (not signed out)"
    expect "$(nth "$out" 2)" 2 1000 '' 'not provided' "no provider: persist fails"
    expect "$(nth "$out" 3)" 2 1000 '' 'not provided' "no provider: clear fails"
    stop_pid "$bus"

    # The same bus with a service directory whose provider is activated but never starts.
    cat >"$d/services/org.freedesktop.secrets.service" <<EOF
[D-BUS Service]
Name=org.freedesktop.secrets
Exec=/bin/sh -c "echo \$\$ > $d/provider.pid; exec sleep 600"
EOF
    sed "s#<listen>.*</listen>#<listen>unix:path=$d/sock</listen><servicedir>$d/services</servicedir>#" \
        "$PORTAL_TEST_DBUS_CONFIG" >"$d/activating.conf"
    rm -f "$d/sock"
    dbus-daemon --nofork --config-file="$d/activating.conf" 2>/dev/null &
    bus=$!
    sleep 0.3
    DBUS_SESSION_BUS_ADDRESS=unix:path=$d/sock "$build/fault_op" c2 restore timeouts:1000:1000 persist:user:token clear \
        >"$out" 2>&1
    expect "$(nth "$out" 1)" 2 5500 '^none$' 'did not answer' "provider activated but never starting: restore fails at the 5000 ms deadline (not 25 s)"
    expect "$(nth "$out" 2)" 2 1500 '' 'did not answer' "... persist fails at a 1000 ms deadline"
    expect "$(nth "$out" 3)" 2 1500 '' 'did not answer' "... clear fails at a 1000 ms deadline"
    [[ -s $d/provider.pid ]] && stop_pid "$(cat "$d/provider.pid")"
    stop_pid "$bus"
}

pause_stop() { kill -STOP "$PORTAL_TEST_KEYRING_PID"; }
pause_cont() { kill -CONT "$PORTAL_TEST_KEYRING_PID"; }

cond_3() {
    section "3. provider connected but not answering (SIGSTOP)"
    local out=$build/c3.out
    drive "$out" c3 persist:user-1:token-1 restore pause:stop restore persist:user-2:token-2 clear \
        timeouts:1000:1000 restore pause:cont restore persist:user-3:token-3 restore
    check "the process exits normally" [ "$(exit_line "$out")" = "EXIT 0" ]
    expect "$(nth "$out" 3)" 2 5500 '^none$' 'did not answer restore within 5000 ms' "stopped: restore fails at the default deadline"
    expect "$(nth "$out" 4)" 2 5500 '' 'within 5000 ms' "stopped: persist fails at the default deadline"
    expect "$(nth "$out" 5)" 2 5500 '' 'within 5000 ms' "stopped: clear fails at the default deadline"
    expect "$(nth "$out" 6)" 2 1500 '' 'within 1000 ms' "stopped: restore fails at a 1000 ms deadline"
    expect "$(nth "$out" 7)" 0 1000 '^user:user-1:token:token-1$' '' "after SIGCONT the same process restores the unchanged session"
    expect "$(nth "$out" 8)" 0 1000 '' '' "... and persists"
    expect "$(nth "$out" 9)" 0 1000 '^user:user-3:token:token-3$' '' "... and restores the new one"

    kill -STOP "$PORTAL_TEST_KEYRING_PID"
    out=$build/c3b.out
    "$build/fault_op" c3 timeouts:1000:1000 restore >"$out" 2>&1
    kill -CONT "$PORTAL_TEST_KEYRING_PID"
    expect "$(nth "$out" 1)" 2 1500 '^none$' 'did not answer' "stopped provider, first call of a fresh process: fails at the deadline"
    # portal-session status asks the provider twice (its description, then a restore): both must
    # fit in one deadline, not two. Timed from outside the process, so the bound lies halfway
    # between one deadline and two (a whole second either side: a loaded machine's stall of
    # 600 ms once failed a bound of deadline + 500 ms).
    kill -STOP "$PORTAL_TEST_KEYRING_PID"
    local start=$(date +%s%N) status_exit=0
    timeout 30 "$repo/.build/debug/portal-session" --env c3 --timeout-ms 2000 status >/dev/null 2>&1 || status_exit=$?
    local status_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    kill -CONT "$PORTAL_TEST_KEYRING_PID"
    timing "status with the provider stopped, 2000 ms deadline: exit $status_exit after $status_ms ms"
    check "stopped provider: status ends within one 2000 ms deadline (exit 2, under 3000 ms; took $status_ms ms)" \
        [ "$status_exit" = 2 -a "$status_ms" -lt 3000 ]
    expect "$(op c3 restore | grep '^R ')" 0 1000 '^user:user-3:' '' "a fresh process restores after SIGCONT"

    kill -STOP "$PORTAL_TEST_DBUS_PID"
    "$build/fault_op" c3 timeouts:1000:1000 restore >"$out" 2>&1
    kill -CONT "$PORTAL_TEST_DBUS_PID"
    expect "$(nth "$out" 1)" 2 1500 '^none$' '' "the bus daemon itself stopped: a fresh process fails at the deadline"
    check "nothing stored was lost (1 item)" [ "$(count c3)" = 1 ]
}

cond_4() {
    section "4. persist into a locked collection"
    op c4 persist:user-1:token-1 >/dev/null
    kctl lock
    local out=$build/c4.out
    op c4 persist:user-2:token-2 >"$out" 2>&1
    expect "$(nth "$out" 1)" 2 1000 '' '^keyring locked: ' "persist while locked fails as locked"
    check "the message is not 'no default keyring'" bash -c "! grep -q 'no default keyring' '$out'"
    kctl unlock
    check "no second item was written (1 item)" [ "$(count c4)" = 1 ]
    expect "$(op c4 restore | grep '^R ')" 0 1000 '^user:user-1:token:token-1$' '' "after unlocking, the previous session is intact"
}

cond_5() {
    section "5. unlock refused: a secret that does not arrive, no prompter, a prompter that never answers"
    local out=$build/c5.out
    # First (the stuck prompter below keeps gnome-keyring's prompting busy for ~25 s).
    PORTAL_TEST_KEYRINGCTL=$build/keyringctl "$build/fault_test" absent-secret >"$out" 2>&1
    check "absent-secret program exits 0" [ $? -eq 0 ]
    absorb "$out"
    op c5 persist:user-1:token-1 >/dev/null
    kctl lock
    op c5 restore clear persist:user-2:token-2 >"$out" 2>&1
    expect "$(nth "$out" 1)" 2 1000 '^none$' 'dismissed or could not be shown' "no prompter: restore fails as locked/dismissed"
    expect "$(nth "$out" 2)" 2 1000 '' 'dismissed or could not be shown' "no prompter: clear fails as locked/dismissed"
    expect "$(nth "$out" 3)" 2 1000 '' 'dismissed or could not be shown' "no prompter: persist fails as locked/dismissed"

    : >"$build/prompter.out"  # emptied before it starts: an earlier run's "ready" must not count
    kctl stuck-prompter >"$build/prompter.out" 2>&1 &
    local prompter=$! i
    for ((i = 0; i < 100; i++)); do grep -q ready "$build/prompter.out" && break; sleep 0.05; done
    op c5 timeouts:5000:1500 restore restore persist:user-2:token-2 >"$out" 2>&1
    check "stuck prompter: the process exits normally (no hang in libsecret)" [ $? -eq 0 ]
    expect "$(nth "$out" 1)" 2 2500 '^none$' 'not answered within 1500 ms' "stuck prompter: restore fails at the prompt deadline"
    expect "$(nth "$out" 2)" 2 2500 '^none$' 'not answered within 1500 ms' "stuck prompter: a second call waits for the same prompt, bounded"
    expect "$(nth "$out" 3)" 2 2500 '' 'not answered' "stuck prompter: persist fails at the prompt deadline"
    check "gnome-keyring-daemon survived the timed-out prompts (never dismissed)" kill -0 "$PORTAL_TEST_KEYRING_PID"
    stop_pid "$prompter"
    kctl unlock
    check "nothing was deleted or added (1 item)" [ "$(count c5)" = 1 ]
    expect "$(op c5 restore | grep '^R ')" 0 1000 '^user:user-1:token:token-1$' '' "after unlocking, the session is intact"

}

cond_6() {
    section "6. restore while locked + the app's usual error handling"
    local out=$build/c6.out
    PORTAL_TEST_KEYRINGCTL=$build/keyringctl "$build/fault_test" locked-app >"$out" 2>&1
    check "locked-app program exits 0" [ $? -eq 0 ]
    absorb "$out"
}

cond_7() {
    section "7. no default collection (gnome-keyring-daemon without --unlock)"
    check "the harness started without a default collection" [ "$PORTAL_TEST_KEYRING_MODE" = no-unlock ]
    local out=$build/c7.out
    op c7 restore clear persist:user:token restore >"$out" 2>&1
    expect "$(nth "$out" 1)" 0 1000 '^signed-out$' '' "restore says signed out"
    expect "$(nth "$out" 2)" 0 1000 '' '' "clear is a no-op success"
    expect "$(nth "$out" 3)" 2 1000 '' '^no default keyring' "persist fails with 'no default keyring'"
    check "... not 'locked'" bash -c "! sed -n 3p '$out' | grep -qi locked"
    expect "$(nth "$out" 4)" 0 1000 '^signed-out$' '' "restore afterwards still says signed out"
}

pause_restart_daemon() {
    kill -TERM "$PORTAL_TEST_KEYRING_PID"
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$PORTAL_TEST_KEYRING_PID" 2>/dev/null || break; sleep 0.05; done
    start_keyring || fail "replacement gnome-keyring-daemon did not come up"
}

pause_restart_bus() {
    stop_pid "$new_keyring_pid"
    stop_pid "$PORTAL_TEST_DBUS_PID"
    dbus-daemon --nofork --config-file="$PORTAL_TEST_DBUS_CONFIG" 2>/dev/null &
    local i
    for ((i = 0; i < 100; i++)); do
        gdbus call --session --timeout 1 --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
            --method org.freedesktop.DBus.GetId >/dev/null 2>&1 && break
        sleep 0.05
    done
    start_keyring || fail "gnome-keyring-daemon on the new bus did not come up"
}

cond_8() {
    section "8. the daemon, then the whole bus, restarted between calls of one process"
    local out=$build/c8.out
    drive "$out" c8 persist:user-1:token-1 restore pause:restart_daemon restore persist:user-2:token-2 restore \
        pause:restart_bus restore persist:user-3:token-3 restore
    check "the process survived both restarts and exits normally" [ "$(exit_line "$out")" = "EXIT 0" ]
    check "no GLib criticals on stderr" bash -c "! grep -q CRITICAL '$out'"
    expect "$(nth "$out" 3)" 0 1000 '^user:user-1:token:token-1$' '' "after a daemon restart: the next restore succeeds"
    expect "$(nth "$out" 4)" 0 1000 '' '' "... persist succeeds"
    expect "$(nth "$out" 5)" 0 1000 '^user:user-2:token:token-2$' '' "... restore sees it"
    expect "$(nth "$out" 6)" 0 1000 '^user:user-2:token:token-2$' '' "after a bus restart: the next restore succeeds"
    expect "$(nth "$out" 7)" 0 1000 '' '' "... persist succeeds"
    expect "$(nth "$out" 8)" 0 1000 '^user:user-3:token:token-3$' '' "... restore sees it"
}

run_c_condition() { # NUMBER TITLE PROGRAM-ARGS...
    local n=$1 title=$2
    shift 2
    section "$n. $title"
    local out=$build/c$n.out
    PORTAL_TEST_KEYRINGCTL=$build/keyringctl "$build/fault_test" "$@" >"$out" 2>"$out.err"
    check "fault_test $1 exits 0" [ $? -eq 0 ]
    absorb "$out"
}

cond_9() { run_c_condition 9 "look-alike items of other applications" lookalike; }
cond_10() { run_c_condition 10 "token bytes: byte-exact or rejected, never truncated" tokens; }
cond_13() { run_c_condition 13 "bad input at every entry point" bad-input; }
cond_14() { run_c_condition 14 "callbacks that re-enter the library" reentry; }

cond_15() {
    section "15. a slow provider: one restore (read, attributes, delete of an unusable item) is one deadline"
    local out=$build/c15.out
    PORTAL_TEST_KEYRINGCTL=$build/keyringctl "$build/slow_provider_test" >"$out" 2>"$out.err"
    check "slow_provider_test exits 0" [ $? -eq 0 ]
    absorb "$out"
}

cond_11() {
    run_c_condition 11 "16 threads, first call at once, 100 rounds each" threads "${PORTAL_FAULT_ROUNDS:-100}"
    section "11. 8 processes, 100 rounds each, one auth environment"
    local pids=() i t0 t1
    t0=$(date +%s%N)
    for ((i = 0; i < 8; i++)); do
        "$build/fault_test" churn fault-processes "${PORTAL_FAULT_ROUNDS:-100}" "$((100 + i))" >"$build/churn.$i" 2>&1 &
        pids+=($!)
    done
    local crashed=0
    for i in "${!pids[@]}"; do wait "${pids[$i]}" || crashed=$((crashed + 1)); done
    t1=$(date +%s%N)
    check "all 8 processes exit 0" [ "$crashed" = 0 ]
    local totals
    totals=$(cat "$build"/churn.* | grep '^CHURN' | awk '{for (i = 2; i <= NF; i++) { split($i, kv, "="); s[kv[1]] += kv[2] }}
        END { printf "sessions=%d signed_out=%d storage=%d other=%d mixes=%d", s["sessions"], s["signed_out"], s["storage"], s["other"], s["mixes"] }')
    timing "8 processes x ${PORTAL_FAULT_ROUNDS:-100} rounds: $(((t1 - t0) / 1000000)) ms; $totals"
    check "8 processes: never a mix" grep -q 'mixes=0' <<<"$totals"
    check "8 processes: no storage failure and no unexpected status" grep -q 'storage=0 other=0' <<<"$totals"
    grep -hv '^CHURN' "$build"/churn.* | sort | uniq -c | sort -rn | head -n 5 | sed 's/^/  note  /'
}

cond_12() {
    section "12. memory hygiene: a marker token in a core dump"
    if ! command -v gcore >/dev/null; then
        fail "gcore (gdb) is not installed"
        return
    fi
    local out=$build/c12.out marker="" counts=()
    : >"$out"
    local pid line rfd wfd
    coproc MEM { exec "$build/fault_test" memory fault-memory 10 100 2>&1; }
    pid=$MEM_PID
    exec {rfd}<&"${MEM[0]}" {wfd}>&"${MEM[1]}"
    while IFS= read -r line <&"$rfd"; do
        case $line in
        MARKER*) marker=${line#MARKER } ;;
        PAUSE*)
            local n=${line#PAUSE } core=$build/core
            rm -f "$core".*
            gcore -o "$core" "$pid" >/dev/null 2>&1
            counts+=("$n:$(grep -aoF -- "$marker" "$core".* 2>/dev/null | wc -l)")
            rm -f "$core".*
            echo go >&"$wfd"
            ;;
        *) printf '%s\n' "$line" >>"$out" ;;
        esac
    done
    exec {rfd}<&- {wfd}>&-
    wait "$pid" 2>/dev/null
    check "the memory program ran (marker and three dumps)" [ -n "$marker" ] && [ "${#counts[@]}" = 3 ]
    [[ ${#counts[@]} == 3 ]] || return
    local after10=${counts[0]#*:} after110=${counts[1]#*:} held=${counts[2]#*:}
    timing "marker copies in the core: $after10 after 10 restore+free rounds, $after110 after 110," \
        "$held while one session and one token copy are held"
    check "the marker count does not grow with the number of calls ($after10 -> $after110)" [ "$after110" -le "$after10" ]
    check "control: the dump finds the marker while a session is held ($held)" [ "$held" -ge 1 ]
    absorb "$out"
}

cond_session() {
    section "encrypted Secret Service session (dbus-monitor on the private bus)"
    if ! command -v dbus-monitor >/dev/null; then
        fail "dbus-monitor (dbus-bin) is not installed"
        return
    fi
    local pcap=$build/session.pcap marker plain
    marker="CST-MARKER-$RANDOM$RANDOM$RANDOM"
    plain="PLAIN-MARKER-$RANDOM$RANDOM$RANDOM"
    dbus-monitor --address "$DBUS_SESSION_BUS_ADDRESS" --pcap >"$pcap" 2>/dev/null &
    local mon=$!
    sleep 0.5
    op session-env "persist:user:$marker" restore >"$build/session.out" 2>&1
    # Positive control: keyringctl transfers its secret over a "plain" session.
    printf '%s' "$plain" | kctl store --schema org.example.Control k=v >/dev/null
    sleep 0.5
    stop_pid "$mon"
    check "the library persisted and restored the marker" grep -q "token:$marker" "$build/session.out"
    check "OpenSession used dh-ietf1024-sha256-aes128-cbc-pkcs7" grep -qaF dh-ietf1024-sha256-aes128-cbc-pkcs7 "$pcap"
    check "the monitor sees plain secrets (control: keyringctl's plain session)" grep -qaF "$plain" "$pcap"
    check "the library's token never crossed the bus in plain text" bash -c "! grep -qaF '$marker' '$pcap'"
}

cond_fuzz() {
    section "fuzz: SessionDocument.decode (libFuzzer)"
    bounded "$(condition_timeout fuzz)" "condition fuzz (libFuzzer build and run)" \
        "$here/../fuzz/run.sh" "${PORTAL_FUZZ_SECONDS:-20}" >"$build/fuzz.out" 2>&1
    local rc=$?
    ((rc == 124)) && return
    sed 's/^/  | /' "$build/fuzz.out" | tail -n 8
    check "the decoder fuzzer found nothing (exit $rc)" [ "$rc" = 0 ]
}

# ------------------------------------------------------------------------ inside mode

if [[ ${1:-} == --inside ]]; then
    shift
    for c in "$@"; do "cond_$c"; done
    printf 'INSIDE %d %d\n' "$passed" "$failed"
    exit 0
fi

# ------------------------------------------------------------------------ outside: build and run

slow=0
only_slow=0
conditions=()
for arg in "$@"; do
    case $arg in
    --slow) slow=1 ;;
    --slow-only) slow=1 only_slow=1 ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    [0-9] | 1[0-5] | session | fuzz) conditions+=("$arg") ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done
((${#conditions[@]} || only_slow)) || conditions=(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 session fuzz)
((only_slow && ${#conditions[@]})) && { echo "run.sh: --slow-only takes no condition" >&2; exit 2; }

cd "$repo" || exit 2
# shellcheck source=scripts/deps.sh
source scripts/deps.sh || exit 2
need=(gdb dbus-bin)
((slow)) && need+=(valgrind)
missing=()
for pkg in "${need[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "run.sh: missing packages: ${missing[*]} (apt-get install them)" >&2
    fi
fi

section "build"
mkdir -p "$build"
# The test command has built the package just before (PORTAL_TEST_BUILT=1): no second swift build,
# which would wait for SwiftPM's lock while a Swift suite beside this one holds it.
build_rc=0
if [[ -z ${PORTAL_TEST_BUILT:-} ]]; then
    timeout 1200 swift build --product portal-keyring 2>&1 | grep -v "prohibited flag" | tail -n 1
    build_rc=${PIPESTATUS[0]}
fi
case $build_rc in
0) ;;
124 | 137) fail "TIMEOUT: swift build did not finish within 1200 s (killed)" ;;
*) fail "swift build" ;;
esac
lib=$repo/.build/debug
check "build keyringctl" gcc -O1 -Wall -Wextra -Werror -o "$build/keyringctl" "$repo/Tests/tools/keyringctl.c" \
    $(pkg-config --cflags --libs libsecret-1)
# A program is one .c file here, or a folder of them (fault_test/).
for program in fault_op fault_test slow_provider_test; do
    src=$here/$program.c
    [[ -d $here/$program ]] && src=$here/$program
    check "build $program" "$repo/Tests/c/build.sh" "$src" --out "$build" --lib "$lib"
done

# Runs conditions inside a fresh keyring; adds their counts.
inside() { # [--no-unlock] CONDITION...
    local flag=()
    if [[ $1 == --no-unlock ]]; then flag=(--no-unlock); shift; fi
    local log=$build/inside.log limit
    limit=$(condition_timeout "$1")
    timeout --kill-after=10 "$limit" scripts/with-keyring.sh "${flag[@]}" "$0" --inside "$@" 2>&1 |
        tee "$log" | grep -v '^INSIDE '
    local rc=${PIPESTATUS[0]}
    if ((rc == 124 || rc == 137)); then
        fail "TIMEOUT: condition $* did not finish within $limit s (killed with its keyring; PORTAL_FAULT_TIMEOUT)"
        return
    fi
    local counts
    counts=$(grep '^INSIDE ' "$log" | tail -n1)
    if [[ -z $counts ]]; then
        fail "conditions $* did not complete (harness or shell failure; see above)"
        return
    fi
    set -- $counts
    passed=$((passed + $2))
    failed=$((failed + $3))
}

t_start=$(date +%s)
for c in "${conditions[@]+"${conditions[@]}"}"; do
    case $c in
    7) inside --no-unlock 7 ;;
    fuzz) cond_fuzz ;;
    *) inside "$c" ;;
    esac
done

if ((slow)); then
    # valgrind first, alone: its programs keep the library's real 5-second call bound, which
    # valgrind's ~20x slowdown approaches when it shares a core.
    section "slow: valgrind memcheck on the C fault programs"
    for prog in "bad-input" "tokens" "reentry"; do
        bounded 900 "valgrind fault_test $prog" scripts/with-keyring.sh env PORTAL_TEST_KEYRINGCTL="$build/keyringctl" \
            valgrind --tool=memcheck --error-exitcode=99 --errors-for-leak-kinds=definite --leak-check=full \
            --suppressions="$here/valgrind.supp" --num-callers=30 "$build/fault_test" $prog >"$build/valgrind.$prog" 2>&1
        rc=$?
        grep -aE 'ERROR SUMMARY|definitely lost' "$build/valgrind.$prog" | sed 's/^/  | /'
        check "valgrind: fault_test $prog (exit $rc)" [ "$rc" = 0 ]
    done
    # Both sanitizer builds first (each takes both cores), then the slow checks in two lanes side
    # by side, each check one process on one core with its own private bus, keyring and API
    # server: AddressSanitizer's run is split in two (its hostile-file and Secret portal suites,
    # about 500 of its ~840 seconds, then the rest), balanced by their seconds on the 2-core
    # machine:
    #   lane a: ASan, FileKeyringHostileInputTests and SecretPortalBusTests; then fuzzing for longer
    #   lane b: ThreadSanitizer; then ASan, every other suite
    for sanitizer in thread address; do
        section "slow: swift build --sanitize=$sanitizer"
        bounded 2400 "swift build --sanitize=$sanitizer" swift build --build-tests --sanitize="$sanitizer" \
            --scratch-path "$repo/.build/sanitize-$sanitizer" >"$build/sanitize-$sanitizer.build.log" 2>&1
        rc=$?
        ((rc == 0)) || tail -n 20 "$build/sanitize-$sanitizer.build.log" | sed 's/^/  | /'
        check "swift build --sanitize=$sanitizer (exit $rc, log $build/sanitize-$sanitizer.build.log)" [ "$rc" = 0 ]
    done
    asan_heavy='FileKeyringHostileInputTests|SecretPortalBusTests'
    # slow_check NAME LIMIT COMMAND...: one slow check, its output in $build/NAME.log and its exit
    # status in $build/NAME.rc; the lanes report after both have ended.
    slow_check() {
        local name=$1 limit=$2 rc
        shift 2
        bounded "$limit" "$name" "$@" >"$build/$name.log" 2>&1 && rc=0 || rc=$?
        echo "$rc" >"$build/$name.rc"
    }
    # sanitized NAME SANITIZER SCRATCH SWIFT-TEST-ARGS...: the Swift tests of a sanitizer's build
    # under it, one test at a time.
    sanitized() {
        local name=$1 sanitizer=$2 scratch=$3
        shift 3
        PORTAL_TEST_KEYRINGCTL=$build/keyringctl LSAN_OPTIONS=suppressions=$here/lsan.supp \
            ASAN_OPTIONS=fast_unwind_on_malloc=0 TSAN_OPTIONS=halt_on_error=0 \
            slow_check "$name" 3600 scripts/with-keyring.sh scripts/with-portal-api.sh swift test --skip-build \
            --sanitize="$sanitizer" --scratch-path "$scratch" --no-parallel "$@"
    }
    # SwiftPM lets one process at a time use a scratch path (its .lock), so ASan's second part runs
    # from a second scratch path that links to the first's build (its own .lock, copies of the
    # top-level files, links to the directories).
    asan=$repo/.build/sanitize-address asan_b=$repo/.build/sanitize-address-b
    rm -rf "$asan_b" && mkdir -p "$asan_b"
    for entry in "$asan"/* "$asan"/.[!.]*; do
        [[ -e $entry || -L $entry ]] || continue # a pattern that matched nothing
        case ${entry##*/} in
        .lock) ;;
        *) if [[ -d $entry && ! -L $entry ]]; then ln -s "$entry" "$asan_b/"; else cp -P "$entry" "$asan_b/"; fi ;;
        esac
    done
    rm -f "$build"/*.rc
    (
        sanitized sanitize-address-a address "$asan" --filter "$asan_heavy"
        slow_check fuzz-slow $((${PORTAL_FUZZ_SECONDS_SLOW:-300} + 900)) "$here/../fuzz/run.sh" "${PORTAL_FUZZ_SECONDS_SLOW:-300}"
    ) &
    lane_a=$!
    (
        sanitized sanitize-thread thread "$repo/.build/sanitize-thread"
        sanitized sanitize-address-b address "$asan_b" --skip "$asan_heavy"
    ) &
    wait "$lane_a" $!
    for name in sanitize-thread sanitize-address-a sanitize-address-b; do
        section "slow: swift test, $name"
        rc=$(cat "$build/$name.rc" 2>/dev/null || echo missing)
        grep -aE 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|SUMMARY|Test run with' "$build/$name.log" | sort | uniq -c | head -n 12 | sed 's/^/  | /'
        # A failing run names its failing tests and their first issues here: CI keeps only this output.
        [ "$rc" = 0 ] || grep -aE '✘|error: |XCTAssert|failed \(' "$build/$name.log" | head -n 40 | cut -c1-400 | sed 's/^/  | /'
        check "swift test, $name (exit $rc, log $build/$name.log)" [ "$rc" = 0 ]
    done
    section "slow: fuzzing for longer"
    rc=$(cat "$build/fuzz-slow.rc" 2>/dev/null || echo missing)
    tail -n 4 "$build/fuzz-slow.log" | sed 's/^/  | /'
    check "long fuzz run found nothing (exit $rc)" [ "$rc" = 0 ]
fi

printf '\n(%d s)\n' "$(($(date +%s) - t_start))"
harness_summary fault
