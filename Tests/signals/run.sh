#!/usr/bin/env bash
# Tests/signals/run.sh — the signal fuzzer (docs/security.md, "Signals from other processes"):
# a process with no keyring access sends thousands of Secret Service and bus-daemon signals
# (every name, random signatures, broadcast and addressed to each connection) at a watching C
# app (portal_auth_watch), `portal-session watch` and a Python app (auth.watch()). None may
# die, and none may report anything: no event (not even "resync") comes of them. Then a real
# persist by another process must reach all three as exactly one "signed in".
#
#   swift build && scripts/with-keyring.sh Tests/signals/run.sh [BUILD_DIR] [COUNT]
#
# COUNT signals (default 3000; PORTAL_SIGNAL_FUZZ_COUNT), seed $PORTAL_SIGNAL_FUZZ_SEED (default
# the date, printed, so that a failure can be replayed).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:-$repo/build/signals}
count=${2:-${PORTAL_SIGNAL_FUZZ_COUNT:-3000}}
seed=${PORTAL_SIGNAL_FUZZ_SEED:-$(date +%s)}
libdir=${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}
ps_bin=${PORTAL_SESSION_BIN:-$libdir/portal-session}
[[ -n ${DBUS_SESSION_BUS_ADDRESS:-} ]] || { echo "signals/run.sh: run me inside scripts/with-keyring.sh" >&2; exit 2; }
[[ -f $libdir/libportal-keyring.so && -x $ps_bin ]] || { echo "signals/run.sh: build first (swift build)" >&2; exit 2; }
mkdir -p "$build"
# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"

gcc -std=c11 -O1 -Wall -Wextra -Werror -o "$build/signal_fuzzer" "$here/signal_fuzzer.c" $(pkg-config --cflags --libs gio-2.0) || exit 1
gcc -std=c11 -O1 -Wall -Wextra -Werror -I"$repo/Include" -o "$build/watch_events" "$here/watch_events.c" \
    $(pkg-config --cflags --libs glib-2.0) -L"$libdir" -lportal-keyring -Wl,-rpath,"$libdir" || exit 1

env_id=signals-$$
out=$(mktemp -d /tmp/portal-signals.XXXXXX)
trap 'kill $pids 2>/dev/null; rm -rf "$out"' EXIT
"$build/watch_events" "$env_id" >"$out/c" 2>"$out/c.err" & c_pid=$!
"$ps_bin" --env "$env_id" watch >"$out/cli" 2>"$out/cli.err" & cli_pid=$!
PYTHONPATH=$repo/python PORTAL_KEYRING_LIBRARY=$libdir/libportal-keyring.so \
    python3 "$here/watcher.py" "$env_id" >"$out/py" 2>"$out/py.err" & py_pid=$!
pids="$c_pid $cli_pid $py_pid"

# Each watcher gets up to 20 s (wait_for: Tests/lib/harness.sh).
wait_for "$out/c" '^watching$' 20 || bad "C watcher did not start: $(cat "$out/c.err")"
wait_for "$out/cli.err" "^watching $env_id\$" 20 || bad "portal-session watch did not start: $(cat "$out/cli.err")"
wait_for "$out/py" '^watching$' 20 || bad "Python watcher did not start: $(cat "$out/py.err")"

echo "seed $seed (PORTAL_SIGNAL_FUZZ_SEED=$seed replays it)"
fuzzed=$("$build/signal_fuzzer" "$count" "$seed") || bad "the fuzzer failed"
echo "$fuzzed"
# A last signal through each watcher's own connection: a real persist, after the fuzz.
sleep 0.5
for name in c:$c_pid cli:$cli_pid python:$py_pid; do
    kill -0 "${name#*:}" 2>/dev/null && ok "${name%%:*} watcher alive after $count signals" || bad "${name%%:*} watcher died"
done
printf 'tok-signals' | "$ps_bin" --env "$env_id" persist --end-user-id eu-signals >/dev/null || bad "persist failed"
wait_for "$out/c" '^signed-in eu-signals$' 20 || bad "C watcher: no event for the real persist"
wait_for "$out/cli" 'eu-signals' 20 || bad "portal-session watch: no event for the real persist"
wait_for "$out/py" '^signed_in eu-signals$' 20 || bad "Python watcher: no event for the real persist"
"$ps_bin" --env "$env_id" clear >/dev/null 2>&1
sleep 0.3
kill -TERM $c_pid $cli_pid $py_pid 2>/dev/null
for name in c:$c_pid cli:$cli_pid python:$py_pid; do
    wait "${name#*:}"; rc=$?
    ((rc == 0)) && ok "${name%%:*} watcher ended with exit 0" || bad "${name%%:*} watcher exit $rc (132 = SIGILL, 139 = SIGSEGV)"
done
pids=""
# Exactly the real changes, nothing from the fuzz (no resync, no extra read's event).
[[ $(cat "$out/c") == $'watching\nsigned-in eu-signals\nsigned-out' ]] && ok "C watcher: exactly signed-in, signed-out" ||
    bad "C watcher printed: $(tr '\n' '|' <"$out/c")"
[[ $(grep -c . "$out/cli") == 2 ]] && grep -q eu-signals "$out/cli" && ok "portal-session watch: exactly two lines" ||
    bad "portal-session watch printed: $(tr '\n' '|' <"$out/cli")"
[[ $(cat "$out/py") == $'watching\nsigned_in eu-signals\nsigned_out' ]] && ok "Python watcher: exactly signed_in, signed_out" ||
    bad "Python watcher printed: $(tr '\n' '|' <"$out/py")"
((failed)) && cat "$out"/*.err
harness_summary signals/run.sh " ($count signals, seed $seed)"
