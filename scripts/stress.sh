#!/usr/bin/env bash
# Stress (issue 15): the Swift and C suites N times in a row (default 5, about a minute each), so
# that a rare race (like the invalidation_test crash seen once in a full run) shows up before
# users see it. Run after scripts/test.sh, which builds everything this uses:
#   scripts/stress.sh [RUNS]        (PORTAL_STRESS_RUNS is the default for RUNS; 0 skips)
# Each run has its own private bus, keyring and Portal API (scripts/with-keyring.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh >/dev/null
runs=${1:-${PORTAL_STRESS_RUNS:-5}}
export PORTAL_TEST_KEYRINGCTL=$PWD/build/keyringctl
[[ -x $PORTAL_TEST_KEYRINGCTL && -d build/c ]] || { echo "stress.sh: run scripts/test.sh first (build/keyringctl, build/c)" >&2; exit 1; }
log=$(mktemp -d /tmp/portal-stress.XXXXXX)
for run in $(seq 1 "$runs"); do
    echo "=== stress run $run/$runs: Swift and C suites"
    timeout 900 scripts/with-keyring.sh scripts/with-portal-api.sh swift test --skip-build --no-parallel >"$log/swift.log" 2>&1 \
        || { tail -n 60 "$log/swift.log"; echo "stress run $run: Swift tests failed (log: $log/swift.log)" >&2; exit 1; }
    timeout 600 scripts/with-keyring.sh scripts/with-portal-api.sh Tests/c/run.sh build/c >"$log/c.log" 2>&1 \
        || { tail -n 60 "$log/c.log"; echo "stress run $run: C tests failed (log: $log/c.log)" >&2; exit 1; }
done
rm -rf "$log"
echo "stress: $runs runs passed"
