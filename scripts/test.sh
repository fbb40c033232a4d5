#!/usr/bin/env bash
# test.sh — the README's test command: installs what is missing (Debian, as root), builds, and
# runs every test against a private keyring and the loopback Portal API, then stops them.
#
#   scripts/test.sh
#
# Steps (each against services this script starts and stops itself; never your own keyring):
#   1. scripts/deps.sh: Debian packages (apt-get when run as root), swift on PATH;
#   2. swift build (library, tests), keyringctl (the test tool that locks/unlocks the keyring);
#   3. Swift tests (swift-testing) inside scripts/with-keyring.sh + scripts/with-portal-api.sh;
#   4. C tests and examples (Tests/c/run.sh) inside the same kind of environment;
#   5. the Python package (mypy --strict and pytest, installed if missing; asyncio and its
#      example included), the C++ RAII wrapper and the
#      Python/C++ examples, checked against the C example's output (Tests/bindings/run.sh);
#      the portal-session command and the desktop redirect handler (Tests/cli/run.sh), and the
#      command's process hardening: argv scrub, non-dumpable (Tests/cli/hardening.sh);
#   6. the install test (Tests/install/run.sh: release build with the Swift runtime linked in,
#      make install into a temporary prefix, exported symbols == header, versions, abidiff);
#   7. the fault-injection suite (Tests/fault/run.sh: 14 conditions on real daemons it starts
#      itself, a short libFuzzer run of the stored-session decoder);
#   8. the fake Portal API's own tests;
#   8b. the GNOME API (Tests/gobject/run.sh): make gobject (the GObject library, its .gir and
#      .typelib with no scanner warning, the .vapi), then the C test (also under valgrind), GJS,
#      PyGObject and Vala against it, linked to the C library of step 2 (.build/debug);
#   9. the Flatpak sandbox (scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh
#      Tests/flatpak/run.sh: the Secret portal and the file keyring, read and written beside
#      libsecret's own file backend, a sign-in finished by another instance of the app;
#      Tests/flatpak/c.sh: the C ABI's invalidation, listener, sign-in, memory-scan, wipe and
#      fork() tests, each program in a sandbox instance; Tests/flatpak/cli.sh: the CLI suite
#      (Tests/cli/run.sh) inside a sandbox instance; Tests/flatpak/providers.sh: the keyring
#      contract suite (Tests/providers/run.sh) there, the provider matrix's sandbox entry; Tests/flatpak/migration.sh: with the talk-name, the host's session moves into the file);
#   9b. one operation, one deadline (Tests/bounds/run.sh): every operation of portal-session under
#      hostile conditions (provider or portal stopped, planted oversized items, FIFO, symlinked,
#      empty, oversized keyring files, the host stopped during the migration) within its
#      --timeout-ms plus a slack, the real session kept; it prints the operation x condition table;
#  10. the provider matrix (scripts/test-matrix.sh, docs/providers.md): Tests/providers/run.sh on
#      gnome-keyring unlocked / locked since login / passwordless, KeePassXC with confirmations
#      off and on, KWallet; the Swift, CLI and C suites on the other providers as well.
# The slow checks (valgrind, TSan/ASan, long fuzzing) are `Tests/fault/run.sh --slow`, which
# .ci/run also runs.
# Every step runs under a hard timeout (coreutils `timeout`, which kills the step's whole
# process group, private daemons included); an overrun stops the run with
# "TIMEOUT: step '<name>' did not finish within N s". Limits in seconds (override with the
# environment variable in brackets): build 1800 [PORTAL_TIMEOUT_BUILD], Swift tests 900
# [PORTAL_TIMEOUT_SWIFT], C tests 600 [PORTAL_TIMEOUT_C], bindings 600 [PORTAL_TIMEOUT_BINDINGS],
# CLI 300 [PORTAL_TIMEOUT_CLI], install 1800 [PORTAL_TIMEOUT_INSTALL], fault suite 1800
# [PORTAL_TIMEOUT_FAULT] (each of its conditions has its own limit too: Tests/fault/run.sh),
# benchmark smoke 600 [PORTAL_TIMEOUT_BENCH], fake API tests 120 [PORTAL_TIMEOUT_API], GNOME API
# 900 [PORTAL_TIMEOUT_GOBJECT] (each of its programs has its own limit too), Flatpak sandbox 600
# [PORTAL_TIMEOUT_FLATPAK].
# Exits non-zero if any step fails.
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

step "the test harness's own checks (scripts/selftest-harness.sh: keyringctl, isolation, teardown)"
bounded 300 "harness self test" scripts/with-keyring.sh scripts/selftest-harness.sh build/selftest

step "Swift tests (private keyring + loopback Portal API)"
bounded "${PORTAL_TIMEOUT_SWIFT:-900}" "Swift tests" \
    scripts/with-keyring.sh scripts/with-portal-api.sh swift test --skip-build --no-parallel

step "C tests and examples (private keyring + loopback Portal API)"
bounded "${PORTAL_TIMEOUT_C:-600}" "C tests and examples" \
    scripts/with-keyring.sh scripts/with-portal-api.sh Tests/c/run.sh build/c

step "signal fuzzer: spoofed Secret Service and bus-daemon signals at watching C, CLI and Python processes"
bounded 300 "signal fuzzer" scripts/with-keyring.sh Tests/signals/run.sh build/signals

step "Python (ctypes) module, C++ wrapper and their examples (private keyring + loopback Portal API)"
bounded "${PORTAL_TIMEOUT_BINDINGS:-600}" "Python, C++ bindings" \
    scripts/with-keyring.sh scripts/with-portal-api.sh Tests/bindings/run.sh build/bindings

step "portal-session command and desktop handler (private keyring + loopback Portal API)"
bounded "${PORTAL_TIMEOUT_CLI:-300}" "portal-session command" \
    scripts/with-keyring.sh scripts/with-portal-api.sh Tests/cli/run.sh

step "portal-session process hardening: grant scrubbed from argv, non-dumpable (private keyring + loopback Portal API)"
bounded "${PORTAL_TIMEOUT_CLI:-300}" "portal-session hardening" \
    scripts/with-keyring.sh scripts/with-portal-api.sh Tests/cli/hardening.sh

# The remaining suites are independent (each starts its own private bus, providers and Portal
# API), so they run in lanes side by side: the 2 cores spend most of these suites waiting for
# daemons and deadlines. A lane's output is printed when it ends; the step table has each step.
lane_pids=() lane_logs=()
# lane NAME FUNCTION...: runs the step functions one after the other in the background (every one,
# also after a failure), output to build/steps/lane-NAME.out.
lane() {
    local name=$1 log=build/steps/lane-$1.out
    shift
    (
        rc=0
        for f in "$@"; do "$f" || rc=1; done
        exit "$rc"
    ) >"$log" 2>&1 &
    lane_pids+=("$!")
    lane_logs+=("$log")
}
# wait_lanes: waits for every lane, prints its output, fails when a step in any lane failed.
wait_lanes() {
    local i rc=0
    for i in "${!lane_pids[@]}"; do
        wait "${lane_pids[$i]}" || rc=1
        printf '\n##### lane output: %s\n' "${lane_logs[$i]}"
        cat "${lane_logs[$i]}"
    done
    lane_pids=() lane_logs=()
    if ((rc != 0)); then
        printf '\n--- a step in a lane failed; what failed:\n' >&2
        grep -a -h -A30 "^--- step '" build/steps/lane-*.out >&2 || true
    fi
    return "$rc"
}

install_step() {
    step "install like a system library: make install, pkg-config program without the toolchain, symbols, versions, ABI"
    bounded "${PORTAL_TIMEOUT_INSTALL:-1800}" "install test" Tests/install/run.sh
}
fault_step() {
    step "fault injection on the real keyring daemon (Tests/fault/README.md)"
    bounded "${PORTAL_TIMEOUT_FAULT:-1800}" "fault injection" Tests/fault/run.sh
}
bench_step() {
    step "benchmark smoke run (a few iterations; never fails on timings — make bench for figures)"
    bounded "${PORTAL_TIMEOUT_BENCH:-600}" "benchmark smoke run" bench/run.sh --smoke
}
flatpak_step() {
    step "Flatpak sandbox: the Secret portal and the file keyring (Tests/flatpak/run.sh)"
    bounded "${PORTAL_TIMEOUT_FLATPAK:-600}" "Flatpak sandbox" \
        scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh Tests/flatpak/run.sh
    step "Flatpak sandbox with --talk-name=org.freedesktop.secrets: the host's session moves into the file keyring"
    bounded 120 "Flatpak migration" \
        scripts/with-flatpak-sandbox.sh --talk-name org.freedesktop.secrets --host Tests/flatpak/migration.sh
}
bounds_step() {
    step "one operation, one deadline: each operation under hostile conditions within --timeout-ms (Tests/bounds/run.sh)"
    bounded 400 "bounds on the Secret Service" scripts/with-keyring.sh Tests/bounds/run.sh host
    bounded 400 "bounds in the sandbox" scripts/with-flatpak-sandbox.sh --host Tests/bounds/run.sh sandbox
    bounded 300 "bounds during the migration" \
        scripts/with-flatpak-sandbox.sh --talk-name org.freedesktop.secrets --host Tests/bounds/run.sh migration
}
flatpak_c_step() {
    step "Flatpak sandbox: the C ABI's tests, each program in a sandbox instance (Tests/flatpak/c.sh)"
    bounded "${PORTAL_TIMEOUT_FLATPAK_C:-600}" "Flatpak C tests" \
        scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh Tests/flatpak/c.sh
    step "Flatpak sandbox: the portal-session command's suite in a sandbox instance (Tests/flatpak/cli.sh)"
    bounded "${PORTAL_TIMEOUT_FLATPAK_CLI:-600}" "Flatpak CLI tests" \
        scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh Tests/flatpak/cli.sh
    step "Flatpak sandbox: the keyring contract suite in a sandbox instance, the matrix's sandbox entry (Tests/flatpak/providers.sh)"
    bounded "${PORTAL_TIMEOUT_FLATPAK_PROVIDERS:-300}" "Flatpak keyring contract" \
        scripts/with-flatpak-sandbox.sh --host Tests/flatpak/providers.sh
}
api_step() {
    step "fake Portal API tests"
    bounded "${PORTAL_TIMEOUT_API:-120}" "fake Portal API tests" python3 -m unittest discover -s Tests/portal-api
}
# The GNOME API links against the C library that the build step above made (.build/debug, the
# default of PORTAL_KEYRING_LIBDIR), so that it is tested on the same code as every other suite.
gobject_step() {
    step "GNOME API: make gobject (library, .gir/.typelib, .vapi), then C (also under valgrind), GJS, PyGObject, Vala (Tests/gobject/run.sh)"
    bounded "${PORTAL_TIMEOUT_GOBJECT:-900}" "GNOME API (GObject)" \
        env PORTAL_KEYRING_LIBDIR="${PORTAL_KEYRING_LIBDIR:-$PWD/.build/debug}" \
        scripts/with-keyring.sh scripts/with-portal-api.sh Tests/gobject/run.sh
}

# The provider matrix (docs/providers.md): the keyring contract on every Secret Service provider
# and state, then the integration suites on each provider the default run above does not cover.
# keepassxc-confirm runs only the contract suite (other processes, the test tools included, need a
# person's confirmation there). The C suite runs on keepassxc too: KeePassXC 2.7.4 segfaults when two
# delete prompts for one item run one after the other, which the library no longer does
# (docs/providers.md); a provider that dies anyway is reported by with-keyring.sh as
# "PROVIDER CRASHED" (exit 3), never as a test result.
all_providers=gnome-keyring,gnome-keyring-locked,gnome-keyring-passwordless,keepassxc,keepassxc-confirm,kwallet
other_providers=gnome-keyring-locked,gnome-keyring-passwordless,keepassxc,kwallet
contract_matrix_step() {
    step "provider matrix: the keyring contract (Tests/providers/run.sh) on $all_providers"
    bounded "${PORTAL_TIMEOUT_MATRIX:-1500}" "provider contract matrix" \
        scripts/test-matrix.sh --providers "$all_providers" --timeout 400 --no-portal-api --log-dir build/matrix/providers \
        -- Tests/providers/run.sh
}
plain_step() {
    step "a provider without encrypted transfer sessions gets nothing (Tests/providers/plain_refused.sh)"
    bounded 180 "plain transfer refused" Tests/providers/plain_refused.sh
    step "a provider whose prompts complete without acting is not believed (Tests/providers/lying_prompts.sh)"
    bounded 180 "lying prompts" Tests/providers/lying_prompts.sh
}
swift_matrix_step() {
    step "provider matrix: Swift tests on the other providers"
    bounded "${PORTAL_TIMEOUT_MATRIX:-1500}" "Swift tests matrix" \
        scripts/test-matrix.sh --providers "$other_providers" --timeout 400 \
        --log-dir build/matrix/swift -- swift test --skip-build --no-parallel
}
cli_matrix_step() {
    step "provider matrix: portal-session command on the other providers"
    bounded "${PORTAL_TIMEOUT_MATRIX:-1500}" "CLI matrix" \
        scripts/test-matrix.sh --providers "$other_providers" --timeout 400 \
        --log-dir build/matrix/cli -- Tests/cli/run.sh
}
# The C suite on KeePassXC takes as long as on the three other providers together (its prompts), so
# it has a build directory of its own and a lane with the contract matrix; the other three follow
# the CLI matrix.
c_matrix_step() {
    step "provider matrix: C tests on gnome-keyring-locked, gnome-keyring-passwordless, kwallet"
    bounded "${PORTAL_TIMEOUT_MATRIX:-1500}" "C tests matrix" \
        scripts/test-matrix.sh --providers gnome-keyring-locked,gnome-keyring-passwordless,kwallet --timeout 900 \
        --log-dir build/matrix/c -- Tests/c/run.sh build/c-matrix
}
c_keepassxc_step() {
    step "provider matrix: C tests on keepassxc"
    bounded "${PORTAL_TIMEOUT_MATRIX:-1500}" "C tests on KeePassXC" \
        scripts/test-matrix.sh --providers keepassxc --timeout 900 \
        --log-dir build/matrix/c-keepassxc -- Tests/c/run.sh build/c-keepassxc
}

# Two lanes while the install test's release build takes the CPU; then three for the matrix,
# balanced by their seconds on a clean clone (the longest lane is the test command's tail): the
# contract matrix, the two provider checks and the C suite on KeePassXC ~530 s; the Swift matrix
# ~390 s; the CLI matrix and the C suite on the other providers ~505 s. The GNOME API suite
# (~20 s) follows the fake API tests in the first lane, after the release build has let go of
# the CPU.
lane build-and-fault-a install_step bench_step api_step gobject_step flatpak_step
lane build-and-fault-b fault_step flatpak_c_step bounds_step
wait_lanes
lane matrix-a contract_matrix_step plain_step c_keepassxc_step
lane matrix-b swift_matrix_step
lane matrix-c cli_matrix_step c_matrix_step
wait_lanes

printf '\nAll tests passed.\n'
