#!/usr/bin/env bash
# Tests/flatpak/c.sh — the C ABI's tests inside a Flatpak sandbox whose only way to the keyring is
# the Secret portal (the file keyring), each program in its own sandbox instance.
#
#   swift build && scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh Tests/flatpak/c.sh [BUILD_DIR]
#
# The programs of Tests/c/run.sh, built into BUILD_DIR (default build/c-flatpak, inside the
# repository: the sandbox sees it read-only), linked to $PORTAL_KEYRING_LIBDIR (default
# .build/debug):
#   invalidation_test       a 401 clears the stored session once and tells every listener once
#   listener_lifetime_test  listeners of a freed handle delete nothing
#   async_signin_test       the non-blocking sign-in calls, persisting into the file keyring
#   signin_contract_test    the strict fake Portal API's contract, sign-ins persisted
#   memscan_test            no copy of the token left in memory after each API path
#   wipe_test               freed strings, sessions and portals are wiped
#   fork_test               a fork() child works (the parent's key is kept) or fails naming fork()
#   abi_test                every entry point's arguments and answers, round trips, the stored
#                           item's attributes and document, unusable and foreign items, threads
#   watch_test              portal_auth_watch across processes: every change once, foreign and
#                           look-alike items unheard, a burst bounded, an idle watch asleep
# Items are planted and read by keyringctl's stand-in (Tests/tools/keyringctl-sandbox.py). What
# needs the host's keyring or its daemon is skipped by the programs there and done from outside
# by Tests/flatpak/run.sh (locking it, stopping the portal); not run here: async_test (a stuck
# unlock prompter and a stopped gnome-keyring: gnome-keyring only, as on the matrix's other
# providers) and persist_order_test (it acts right before the Secret Service's CreateItem, which
# the file keyring has no counterpart of; Tests/flatpak/run.sh's two writers race instead).
# The sandbox gets the fake API's address and the host's keyring pid (the programs' "inside a
# keyring harness" check); PORTAL_TEST_PROVIDER=flatpak. Every program is bounded in time.
# Exits 1 if any program failed, 2 if the environment is missing.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for var in PORTAL_TEST_IN_SANDBOX PORTAL_TEST_KEYRING_PID PORTAL_TEST_API_URL PORTAL_TEST_API_HOST; do
    [[ -n ${!var:-} ]] || {
        echo "flatpak/c.sh: $var unset: run as scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh $0" >&2
        exit 2
    }
done
build=${1:-$repo/build/c-flatpak}
mkdir -p "$build" && build=$(cd "$build" && pwd) || exit 2
libdir=$(cd "${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}" 2>/dev/null && pwd) || libdir=""
[[ -n $libdir && -f $libdir/libportal-keyring.so ]] ||
    { echo "flatpak/c.sh: libportal-keyring.so not built (swift build, or set PORTAL_KEYRING_LIBDIR)" >&2; exit 2; }
cli=${PORTAL_SESSION_BIN:-$libdir/portal-session}

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"

echo "== build into $build (library: $libdir)"
programs=(invalidation_test listener_lifetime_test async_signin_test signin_contract_test memscan_test wipe_test fork_test
    abi_test watch_test)
for name in "${programs[@]}"; do
    if "$repo/Tests/c/build.sh" "$name" --out "$build" --lib "$libdir"; then
        ok "build $name"
    else
        bad "build $name"
    fi
done

echo "== each program in its own sandbox instance (the file keyring, the portal's secret)"
for name in "${programs[@]}"; do
    [[ -x $build/$name ]] || continue
    start=$SECONDS
    out=$("$PORTAL_TEST_IN_SANDBOX" env PORTAL_TEST_API_URL="$PORTAL_TEST_API_URL" PORTAL_TEST_API_HOST="$PORTAL_TEST_API_HOST" \
        PORTAL_SESSION_BIN="$cli" PORTAL_TEST_KEYRING_PID="$PORTAL_TEST_KEYRING_PID" PORTAL_TEST_PROVIDER=flatpak \
        PORTAL_TEST_KEYRINGCTL="$repo/Tests/tools/keyringctl-sandbox.py" \
        timeout 300 "$build/$name" 2>&1)
    rc=$?
    if ((rc == 0)); then
        ok "$name in the sandbox ($((SECONDS - start)) s): $(tail -n 1 <<<"$out")"
    else
        bad "$name in the sandbox: exit $rc$( ((rc == 124)) && echo ' (timed out after 300 s)')"
        # The failed checks (with what follows each), then how the program ended.
        grep -i -B2 -A4 'check failed' <<<"$out" | head -n 60 | sed 's/^/  ! /'
        sed 's/^/  | /' <<<"$out" | tail -n 40
    fi
done

harness_summary flatpak/c.sh
