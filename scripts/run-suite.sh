#!/usr/bin/env bash
# run-suite.sh — run one suite by hand, in the environment the test command gives it (a private
# keyring from scripts/with-keyring.sh, the loopback Portal API from scripts/with-portal-api.sh).
#
#   scripts/run-suite.sh [--provider P] [--build] NAME         a whole suite: a row of Tests/suites
#   scripts/run-suite.sh [--provider P] [--build] KIND ARG...  a part of one
#   scripts/run-suite.sh --list                                the rows of Tests/suites
#
# NAME runs the row as the test command does (its hard limit, its Portal API, on --provider P or
# else the row's first provider): `scripts/run-suite.sh c --provider kwallet`,
# `scripts/run-suite.sh gobject`, `scripts/run-suite.sh flatpak`.
# Kinds (the `suite:` lines of Tests/mutants/*.mutant name suites the same way):
#   swift FILTER          swift test --skip-build --no-parallel --filter FILTER (must run a test)
#   swift-on P FILTER     the same on provider P
#   c PROGRAM             Tests/c/PROGRAM built by Tests/c/build.sh (into build/run-suite) and
#                         run
#   c-on P PROGRAM        the same on provider P
#   pytest NODE           python3 -m pytest Tests/python/NODE (a file or file::test; must run a
#                         test), with this tree's python/ package and library
#   script PATH           a test script of the tree (Tests/cli/hardening.sh); one of
#                         Tests/flatpak/ runs on the host side of scripts/with-flatpak-sandbox.sh
#   provider P            Tests/providers/run.sh on provider P
#   fault CONDITION       Tests/fault/run.sh CONDITION (it starts its own keyrings)
# --provider P   the provider for swift, c, pytest and script (default gnome-keyring;
#                scripts/with-keyring.sh --help lists them)
# --build        swift build first (with --build-tests for swift); without it, the build runs first
#                anyway when a source is newer than the last build (or nothing is built yet)
#
#   scripts/run-suite.sh swift DesktopSignInTests
#   scripts/run-suite.sh swift StorageContractTests --provider kwallet
#   scripts/run-suite.sh c abi_test --provider kwallet
#   scripts/run-suite.sh pytest test_signin.py
#
# Builds keyringctl (the test tool that locks and unlocks the keyring) when
# $PORTAL_TEST_KEYRINGCTL is unset. Exits with the suite's status; 3 when the suite could not run
# (a filter or selection that ran no test, a C program that does not compile); 2 on a usage error.
# No time limit of its own: the test command and the mutation runner wrap it in `timeout`.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=run-suite.sh
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "$me: $*" >&2; exit 2; }

provider=""
build=0
list=0
words=()
while (($#)); do
    case $1 in
    --provider) [[ -n ${2:-} ]] || die "--provider needs a provider name"; provider=$2; shift ;;
    --provider=*) provider=${1#--provider=} ;;
    --build) build=1 ;;
    -h | --help) usage; exit 0 ;;
    --list) list=1 ;;
    *) words+=("$1") ;;
    esac
    shift
done
cd "$repo" || exit 2
# shellcheck source=scripts/suites.sh
source scripts/suites.sh
suites_load || exit 2
if ((list)); then
    for name in "${SUITE_NAMES[@]}"; do printf '%-18s %s\n' "$name" "${SUITE_CMD[$name]}"; done
    exit 0
fi
whole=""
if ((${#words[@]} == 1)) && [[ -n ${SUITE_ROW[${words[0]}]:-} ]]; then
    whole=${words[0]}
    if [[ ${SUITE_PROVIDERS[$whole]} == - ]]; then
        [[ -z $provider ]] || die "$whole starts what it needs itself (no --provider)"
    elif [[ -z $provider ]]; then
        provider=${SUITE_PROVIDERS[$whole]%%,*}
    fi
    kind=suite
fi
[[ -n $whole ]] || ((${#words[@]} >= 2)) || { usage >&2; exit 2; }
kind=${kind:-${words[0]}}
case $kind in
swift-on | c-on)
    ((${#words[@]} == 3)) || die "$kind takes a provider and one argument"
    [[ -z $provider || $provider == "${words[1]}" ]] || die "$kind names its provider; --provider says another"
    provider=${words[1]} kind=${kind%-on} arg=${words[2]}
    ;;
swift | c | pytest | script | provider | fault)
    ((${#words[@]} == 2)) || die "$kind takes one argument"
    arg=${words[1]}
    ;;
suite) ;;
*) die "unknown kind or suite '$kind' (see --help, --list)" ;;
esac
case $kind in
provider) [[ -z $provider ]] || die "provider names its provider (provider P)"; provider=$arg ;;
fault) [[ -z $provider ]] || die "the fault suite starts its own keyrings (no --provider)" ;;
esac

cd "$repo" || exit 2
# The Swift toolchain where the README's commands find it (scripts/deps.sh: PORTAL_SWIFT_BIN or
# /opt/swift/usr/bin) when it is not on PATH.
command -v swift >/dev/null 2>&1 || PATH=${PORTAL_SWIFT_BIN:-/opt/swift/usr/bin}:$PATH
# A fresh clone has nothing built, and an edit since the last build would run the old code (a
# suite that passes on it says nothing of the edit): build first, as --build would. Skipped with
# PORTAL_TEST_BUILT=1 (the test command and the mutation runner build before they run suites).
# SwiftPM leaves its products' times alone when a source changed but the code did not (a touch, a
# comment), so the time of this script's last build is kept too (a stamp), and the newer counts.
tests=0
[[ $kind == swift || $whole == swift ]] && tests=1
stamp=$repo/.build/debug/run-suite-built$((tests)).stamp
stale_build() {
    local built=$repo/.build/debug/libportal-keyring.so folders=(Sources Package.swift)
    ((tests)) && built=$repo/.build/debug/portal-keyringPackageTests.xctest folders+=(Tests/PortalKeyringTests)
    [[ -e $built ]] || return 0
    [[ -e $stamp && $stamp -nt $built ]] && built=$stamp
    [[ -n $(find "${folders[@]}" -type f -newer "$built" -print -quit 2>/dev/null) ]]
}
if ((!build)) && [[ ${PORTAL_TEST_BUILT:-} != 1 ]] && stale_build; then
    echo "$me: the sources changed since the last build: building first" >&2
    build=1
fi
if ((build)); then
    if ((tests)); then swift build --build-tests || exit 3; else swift build || exit 3; fi
    touch "$stamp"
fi
out=$repo/build/run-suite
mkdir -p "$out" || exit 2
if [[ -z ${PORTAL_TEST_KEYRINGCTL:-} ]]; then
    export PORTAL_TEST_KEYRINGCTL=$repo/build/keyringctl
    if [[ ! -x $PORTAL_TEST_KEYRINGCTL || $repo/Tests/tools/keyringctl.c -nt $PORTAL_TEST_KEYRINGCTL ]]; then
        # shellcheck disable=SC2046  # pkg-config's flags are words
        gcc -O1 -o "$PORTAL_TEST_KEYRINGCTL" Tests/tools/keyringctl.c $(pkg-config --cflags --libs libsecret-1) ||
            { echo "$me: cannot build keyringctl" >&2; exit 3; }
    fi
fi
export PORTAL_SESSION_BIN=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
keyring=(scripts/with-keyring.sh ${provider:+--provider "$provider"})
harnesses=("${keyring[@]}" scripts/with-portal-api.sh)

# must_run_a_test LOG ERE WHAT: status 3 and a line saying so when the passing run's LOG has no ERE.
must_run_a_test() {
    grep -aqE "$2" "$1" && return 0
    echo "$me: $3 ran no test"
    return 3
}

case $kind in
suite)
    export PORTAL_TEST_BUILT=1
    suite_command "$whole" "$provider"
    exit
    ;;
swift)
    # A filter that matches nothing passes: report it as a suite that could not run.
    log=$(mktemp "${TMPDIR:-/tmp}/run-suite.XXXXXX") || exit 2
    trap 'rm -f "$log"' EXIT
    "${harnesses[@]}" swift test --skip-build --no-parallel --filter "$arg" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    ((rc == 0)) || exit "$rc"
    must_run_a_test "$log" 'Test run with [1-9][0-9]* tests?' "the filter '$arg'"
    ;;
c)
    Tests/c/build.sh "$arg" --out "$out" || { echo "$me: cannot compile $arg"; exit 3; }
    # What the C suite gives a program that asks for it (Tests/c/run.sh's test_env).
    export PORTAL_TEST_CLI=${PORTAL_TEST_CLI:-$PORTAL_SESSION_BIN}
    export PORTAL_TEST_FAKE_BROWSER=${PORTAL_TEST_FAKE_BROWSER:-$repo/Tests/tools/fake_browser.sh}
    export PORTAL_TEST_KEYRING_RESTART=${PORTAL_TEST_KEYRING_RESTART:-$repo/scripts/keyring-restart.sh}
    exec "${harnesses[@]}" "$out/$arg"
    ;;
pytest)
    # A selection that runs no test (pytest's status 5) is a suite that could not run.
    [[ -e $repo/Tests/python/${arg%%::*} ]] || { echo "$me: there is no Tests/python/${arg%%::*}"; exit 3; }
    env PYTHONPATH="$repo/python" PYTHONDONTWRITEBYTECODE=1 PORTAL_KEYRING_LIBRARY="$repo/.build/debug/libportal-keyring.so" \
        "${harnesses[@]}" python3 -m pytest -q -p no:cacheprovider -W error "$repo/Tests/python/$arg"
    rc=$?
    ((rc == 5)) && { echo "$me: the selection '$arg' ran no test"; exit 3; }
    exit "$rc"
    ;;
script)
    # A script of Tests/flatpak/ runs on the host side of the sandbox harness instead.
    [[ $arg == Tests/flatpak/* ]] && harnesses=(scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh)
    exec "${harnesses[@]}" "$repo/$arg"
    ;;
provider) exec "${keyring[@]}" Tests/providers/run.sh ;;
fault) exec Tests/fault/run.sh "$arg" ;;
esac
