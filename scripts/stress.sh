#!/usr/bin/env bash
# Stress: the Swift and C suites N times in a row (default 20, about a minute each), so
# that a rare race (like the invalidation_test crash seen once in a full run) shows up before
# users see it. Run after scripts/test.sh, which builds everything this uses:
#   scripts/stress.sh [RUNS] [--until EPOCH]
# PORTAL_STRESS_RUNS is the default for RUNS (0 skips). With --until (a time in seconds since the
# epoch, as `date +%s` prints), the first run always starts (a stress step that runs nothing proves
# nothing, and said "0 of 5 runs passed" with success when its budget equalled the first run's
# estimate); each later run starts only if it can end before then, judged by the longest run so far
# plus half of it, so the count adapts to the machine's load instead of failing the whole run.
# Each run has its own private bus, keyring and Portal API (scripts/with-keyring.sh).
# PORTAL_STRESS_DRY_RUN=1 decides the runs without running them (Tests/tools/test_stress.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh >/dev/null
runs=${PORTAL_STRESS_RUNS:-20}
until=0
while [[ $# -gt 0 ]]; do
    case $1 in
    --until) until=${2:-}; shift ;;
    --until=*) until=${1#--until=} ;;
    *) runs=$1 ;;
    esac
    shift
done
[[ $runs =~ ^[0-9]+$ && $until =~ ^[0-9]+$ ]] || { echo "usage: scripts/stress.sh [RUNS] [--until EPOCH]" >&2; exit 2; }
export PORTAL_TEST_KEYRINGCTL=$PWD/build/keyringctl
dry=${PORTAL_STRESS_DRY_RUN:-0}
((dry)) || [[ -x $PORTAL_TEST_KEYRINGCTL && -e .build/debug/libportal-keyring.so ]] || { echo "stress.sh: run scripts/test.sh first (build/keyringctl, the debug build)" >&2; exit 1; }
log=$(mktemp -d /tmp/portal-stress.XXXXXX)
# failed_lines LOG: the lines that name what failed, printed after the tail (CI keeps only its log's tail).
failed_lines() {
    echo "--- what failed (first 20 lines from $1):"
    grep -a -m 20 -E '✘|  FAIL |check failed|TIMEOUT|PROVIDER CRASHED|Fatal error|error:' "$1" || true
}
longest=120
done_runs=0
for run in $(seq 1 "$runs"); do
    now=$(date +%s)
    if ((run > 1 && until > 0 && now + longest * 3 / 2 > until)); then
        echo "stress: time budget reached before run $run/$runs (a run is expected to take up to ${longest} s)"
        break
    fi
    echo "=== stress run $run/$runs: Swift and C suites"
    if ((dry)); then done_runs=$run; continue; fi
    timeout 900 scripts/with-keyring.sh scripts/with-portal-api.sh swift test --skip-build --no-parallel >"$log/swift.log" 2>&1 \
        || { tail -n 60 "$log/swift.log"; failed_lines "$log/swift.log"; echo "stress run $run: Swift tests failed (log: $log/swift.log)" >&2; exit 1; }
    timeout 600 scripts/with-keyring.sh scripts/with-portal-api.sh Tests/c/run.sh build/c >"$log/c.log" 2>&1 \
        || { tail -n 60 "$log/c.log"; failed_lines "$log/c.log"; echo "stress run $run: C tests failed (log: $log/c.log)" >&2; exit 1; }
    took=$(($(date +%s) - now))
    ((took > longest)) && longest=$took
    done_runs=$run
done
rm -rf "$log"
echo "stress: $done_runs of $runs runs passed"
