#!/usr/bin/env bash
# Tests/flatpak/providers.sh — the keyring contract suite (Tests/providers/run.sh) as the Flatpak
# sandbox's entry of the provider matrix: inside a sandbox whose only way to the keyring is the
# Secret portal, over the portal-keyed file keyring.
#
#   swift build && scripts/with-flatpak-sandbox.sh --host scripts/with-portal-api.sh Tests/flatpak/providers.sh
#
# The suite runs in one sandbox instance with PORTAL_TEST_PROVIDER=flatpak: keyringctl's stand-in
# (Tests/tools/keyringctl-sandbox.py: libsecret's secret-tool) plants and counts items; its locked
# and stopped-provider checks are skipped there (Tests/flatpak/run.sh does them from outside).
# Exits with the suite's status; 2 if the environment is missing.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ -n ${PORTAL_TEST_IN_SANDBOX:-} ]] || {
    echo "flatpak/providers.sh: PORTAL_TEST_IN_SANDBOX unset: run as scripts/with-flatpak-sandbox.sh --host $0" >&2
    exit 2
}
ps_bin=${PORTAL_SESSION_BIN:-$repo/.build/debug/portal-session}
[[ -x $ps_bin ]] || { echo "flatpak/providers.sh: $ps_bin not built (swift build)" >&2; exit 2; }
exec "$PORTAL_TEST_IN_SANDBOX" env PORTAL_TEST_PROVIDER=flatpak PORTAL_TEST_KEYRING_DIR=/tmp/portal-keyring-providers \
    PORTAL_TEST_KEYRINGCTL="$repo/Tests/tools/keyringctl-sandbox.py" PORTAL_SESSION_BIN="$ps_bin" \
    timeout 600 bash "$repo/Tests/providers/run.sh"
