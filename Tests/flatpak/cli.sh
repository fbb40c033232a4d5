#!/usr/bin/env bash
# Tests/flatpak/cli.sh — the portal-session command's suite (Tests/cli/run.sh) inside a Flatpak
# sandbox whose only way to the keyring is the Secret portal: every subcommand and exit code, the
# desktop handler, the watch and the sign-ins, over the portal-keyed file keyring.
#
#   swift build && scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh Tests/flatpak/cli.sh
#
# The whole suite runs in one sandbox instance with PORTAL_TEST_PROVIDER=flatpak: there its
# locked-keyring checks are skipped (Tests/flatpak/run.sh locks the host's keyring from outside:
# RetrieveSecret answered 2) and keyringctl's stand-in there (Tests/tools/keyringctl-sandbox.py:
# libsecret's secret-tool) plants and counts items. The sandbox gets the fake API's address and the host's keyring pid (the suite's
# "inside a keyring harness" check). Exits with the suite's status; 2 if the environment is missing.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for var in PORTAL_TEST_IN_SANDBOX PORTAL_TEST_KEYRING_PID PORTAL_TEST_API_URL PORTAL_TEST_API_HOST; do
    [[ -n ${!var:-} ]] || {
        echo "flatpak/cli.sh: $var unset: run as scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh $0" >&2
        exit 2
    }
done
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
[[ -x $ps_bin ]] || { echo "flatpak/cli.sh: $ps_bin not built (swift build)" >&2; exit 2; }
exec "$PORTAL_TEST_IN_SANDBOX" env PORTAL_TEST_KEYRING_PID="$PORTAL_TEST_KEYRING_PID" PORTAL_TEST_PROVIDER=flatpak \
    PORTAL_TEST_KEYRINGCTL="$repo/Tests/tools/keyringctl-sandbox.py" \
    PORTAL_TEST_API_URL="$PORTAL_TEST_API_URL" PORTAL_TEST_API_HOST="$PORTAL_TEST_API_HOST" PORTAL_SESSION_BIN="$ps_bin" \
    timeout 900 bash "$repo/Tests/cli/run.sh"
