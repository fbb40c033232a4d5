#!/usr/bin/env bash
# test.sh — the README's test command: installs what is missing (Debian, as root), builds, and
# runs every test against a private keyring and the loopback Portal API, then stops them.
#
#   scripts/test.sh
#
# Steps (each against services its suite starts and stops itself; never your own keyring):
#   1. scripts/deps.sh: Debian packages (apt-get when run as root), swift on PATH;
#   2. source checks (scripts/check-sources.sh: no build needed);
#   3. swift build (library, tests), keyringctl (the test tool that locks/unlocks the keyring),
#      make (the release build that is installed and benchmarked);
#   4. every suite of the table Tests/suites on each of its providers (scripts/run-suites.sh,
#      three at a time): the Swift, C, CLI and contract suites on the provider matrix
#      (docs/providers.md), the bindings, the GNOME API, the install test, the fault suite, the
#      Flatpak sandbox, the bounds suites and the benchmark smoke run. docs/testing.md says what
#      each one checks; `scripts/run-suite.sh NAME` runs one row by hand.
# The slow checks (valgrind, TSan/ASan, long fuzzing) are `Tests/fault/run.sh --slow`, which
# .ci/run also runs.
# Every step runs under a hard timeout (coreutils `timeout`, which kills the step's whole
# process group, private daemons included): the build's is 1800 s [PORTAL_TIMEOUT_BUILD], each
# suite's is its row's limit in Tests/suites (the fault suite's conditions and the GNOME API's
# programs have their own limits too); an overrun fails the run with "TIMEOUT: ...".
# PORTAL_TEST_JOBS (default 3) is how many suites run at a time. Exits non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's seconds go to build/steps/times.tsv; the table is printed at the end (and on failure).
test_start=$SECONDS
mkdir -p build/steps
: >build/steps/times.tsv
step_table() {
    printf '\n| step | seconds |\n|---|---|\n'
    while IFS=$'\t' read -r name secs rc; do
        printf '| %s | %s%s |\n' "$name" "$secs" "$( ((rc != 0)) && echo " (exit $rc)")"
    done <build/steps/times.tsv
    printf '| **test command** | %s |\n' "$((SECONDS - test_start))"
}
trap step_table EXIT
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
printf 'Debian packages (scripts/deps.sh)\t%s\t0\n' "$((SECONDS - test_start))" >>build/steps/times.tsv

step() { printf '\n=== %s\n' "$*"; }

# bounded SECONDS NAME COMMAND...: runs COMMAND under a hard timeout; a timeout is reported with
# the step's name and fails the run. The output (stdout and stderr) is also kept in
# build/steps/NAME.log; when the step fails, the lines that say what failed are printed again
# at the end, so that a log that keeps only its tail (CI's) still names the failing test.
bounded() {
    local limit=$1 name=$2 rc=0 started=$SECONDS
    shift 2
    local log=build/steps/${name//[^A-Za-z0-9]/_}.log
    # (errexit holds inside the group too: the status is caught, or a failing step would end the
    # run before its row and its failed lines are written.)
    { status=0; timeout --kill-after=15 "$limit" "$@" 2>&1 || status=$?; echo "$status" >"$log.rc"; } | tee "$log"
    rc=$(cat "$log.rc")
    printf '%s\t%s\t%s\n' "$name" "$((SECONDS - started))" "$rc" >>build/steps/times.tsv
    if ((rc == 124 || rc == 137)); then
        printf "\nTIMEOUT: step '%s' did not finish within %s s (killed)\n" "$name" "$limit" >&2
    fi
    if ((rc != 0)); then
        printf "\n--- step '%s' failed (exit %s); what failed (first 30 lines from %s):\n" "$name" "$rc" "$log" >&2
        grep -a -m 30 -E '✘|  FAIL |check failed|TIMEOUT|PROVIDER CRASHED|Fatal error|error:|Traceback|FAILED|STALE|without a .// trusted:' "$log" >&2 || true
    fi
    return "$rc"
}

step "source checks (no build): force-unwraps marked, every mutant still applies"
bounded 120 "source checks" scripts/check-sources.sh

step "build"
bounded "${PORTAL_TIMEOUT_BUILD:-1800}" "swift build" swift build --build-tests 2>&1 | grep -v "prohibited flag" | tail -n 3
mkdir -p build
# The libsecret functions the adapter relies on beyond libsecret's stable API (SUBJECT_TO_CHANGE).
bounded 120 "build keyringctl" gcc -O1 -Wall -Wextra -Werror -o build/keyringctl Tests/tools/keyringctl.c $(pkg-config --cflags --libs libsecret-1)
export PORTAL_TEST_KEYRINGCTL=$PWD/build/keyringctl

# The release build (make: the shipped library and portal-keyring with the Swift runtime linked
# in) before the suites, so that the install test and the benchmark smoke run find it built and
# no suite waits for SwiftPM's lock while the Swift suites hold it.
step "release build (make)"
bounded "${PORTAL_TIMEOUT_BUILD:-1800}" "make (release build)" make
# The suites rebuild nothing of the Swift package (Tests/fault/run.sh skips its own swift build).
export PORTAL_TEST_BUILT=1

# Every suite of the table Tests/suites (name, providers, Portal API, hard limit, expected
# seconds, group, command), each (suite, provider) a job: three at a time (the 2 cores spend most
# of these suites waiting for daemons and deadlines), the longest expected work first, each with
# its own private bus, providers and Portal API. A job's output is printed whole when it ends;
# the step table has a row per job. scripts/run-suite.sh NAME runs one row by hand.
step "the suites of Tests/suites, side by side (scripts/run-suites.sh)"
scripts/run-suites.sh --jobs "${PORTAL_TEST_JOBS:-3}"

printf '\nAll tests passed.\n'
