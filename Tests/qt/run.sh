#!/usr/bin/env bash
# Tests/qt/run.sh — the Qt 6 API (libportal-keyring-qt6.so: PortalKeyring::QtAuth, QtPortal)
# against the private keyring and the fake Portal API.
#
#   scripts/with-keyring.sh scripts/with-portal-api.sh Tests/qt/run.sh
#
# Builds the library (make qt), then runs, each bounded in time, with its output in
# build/qt/NAME.log, once with Qt's default event dispatcher (GLib's) and once with QT_NO_GLIB=1
# (Qt's own):
#   qt_test       restore / persist / clear, a magic-link sign-in and a desktop (Google/Apple)
#                 sign-in completed by the URL handler's process, cancelled, or refused for its
#                 timeout; a 401 reaching invalidated()
#                 once; another process's sign-in and sign-out as sessionChanged(); the provider
#                 stopped (SIGSTOP): a 10 ms QTimer never gaps over 50 ms; every signal on the
#                 GUI thread
#   qt_example    examples/qt (Qt Widgets, QT_QPA_PLATFORM=offscreen) driven through its sign-in
#                 screen, signed-in screen, another process's sign-out and a 401
# Skipped with a note when Qt 6 is missing (pkg-config Qt6Core). Exits 1 if any check failed.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2
for var in DBUS_SESSION_BUS_ADDRESS PORTAL_TEST_KEYRING_PID PORTAL_TEST_API_URL; do
    [[ -n ${!var:-} ]] || { echo "qt/run.sh: $var unset: run inside scripts/with-keyring.sh scripts/with-portal-api.sh" >&2; exit 2; }
done
# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
export PORTAL_KEYRING_LIBDIR=${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}
out=$repo/build/qt
mkdir -p "$out" || exit 2

if ! pkg-config --exists Qt6Core Qt6Widgets; then
    skip "Qt 6 not installed (Debian: qt6-base-dev)"
    harness_summary "qt/run.sh"
    exit
fi

section "build"
if make -s qt >"$out/make.log" 2>&1; then
    ok "make qt: libportal-keyring-qt6.so (moc, -Werror)"
else
    fail "make qt (log: build/qt/make.log)"
    detail "$(tail -n 20 "$out/make.log")"
    harness_summary "qt/run.sh"
    exit 1
fi
read -r -a qt <<<"$(pkg-config --cflags --libs Qt6Widgets)"
read -r -a gio <<<"$(pkg-config --cflags --libs gio-2.0)" # the fake browser's registration
rm -f "$out/qt_test" "$out/qt_example" # a program that no longer compiles must not run as it was
check_quiet "qt_test compiles (C++17, warnings as errors)" \
    g++ -std=c++17 -g -O1 -fPIC -Wall -Wextra -Werror -IInclude -IInclude/portal-keyring-qt6 -ITests/c \
    Tests/qt/qt_test.cpp -o "$out/qt_test" "${qt[@]}" "${gio[@]}" -L"$out" -lportal-keyring-qt6 -L"$PORTAL_KEYRING_LIBDIR" \
    -lportal-keyring -Wl,-rpath,"$out:$PORTAL_KEYRING_LIBDIR"
check_quiet "examples/qt compiles (no moc of its own)" \
    g++ -std=c++17 -g -O1 -fPIC -Wall -Wextra -Werror -IInclude -IInclude/portal-keyring-qt6 examples/qt/main.cpp \
    examples/qt/sign_in_window.cpp -o "$out/qt_example" "${qt[@]}" -L"$out" -lportal-keyring-qt6 \
    -L"$PORTAL_KEYRING_LIBDIR" -lportal-keyring -Wl,-rpath,"$out:$PORTAL_KEYRING_LIBDIR"

# The desktop sign-in's browser (Tests/tools/fake_browser.sh) and the URL handler's process it runs.
export PORTAL_TEST_FAKE_BROWSER=$repo/Tests/tools/fake_browser.sh
PORTAL_TEST_CLI=${PORTAL_SESSION_BIN:-$PORTAL_KEYRING_LIBDIR/portal-session}
[[ -x $PORTAL_TEST_CLI ]] || PORTAL_TEST_CLI=$repo/.build/debug/portal-session
export PORTAL_TEST_CLI
export QT_QPA_PLATFORM=offscreen out
for dispatcher in glib qt; do
    section "event dispatcher: $dispatcher"
    if [[ $dispatcher == qt ]]; then export QT_NO_GLIB=1; else unset QT_NO_GLIB; fi
    run_logged "qt_test-$dispatcher" 120 "$out/qt_test"
    grep -E '^(event dispatcher|largest timer gap|restore with|cancelled)' "$out/qt_test-$dispatcher.log" |
        while IFS= read -r line; do info "$line"; done
    run_logged "qt_example-$dispatcher" 60 Tests/qt/qt_example_test.sh
done
unset QT_NO_GLIB

harness_summary "qt/run.sh"
