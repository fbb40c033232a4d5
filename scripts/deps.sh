#!/usr/bin/env bash
# deps.sh — make sure this machine has what portal-keyring needs to build and test.
#
#   scripts/deps.sh           check (and, as root, install) the Debian packages
#   source scripts/deps.sh    the same, and also puts swift on PATH in your shell
#
# Checks the Debian packages below with dpkg-query. If some are missing:
# as root it runs `apt-get update` once and installs exactly the missing ones
# (noninteractive, --no-install-recommends); otherwise it prints the exact
# apt-get command to run and fails (exit/return 1). Prints nothing when
# everything is present. Then, if `swift` is not on PATH but
# $PORTAL_SWIFT_BIN (default /opt/swift/usr/bin) has it, that directory is
# prepended to PATH and exported (effective in the caller's shell only when
# sourced; when run, it tells you to source it); if swift is nowhere, it says
# so and fails. Idempotent; sourcing it does not change your shell options.

# gdbus (used by scripts/with-keyring.sh) is in libglib2.0-bin. keepassxc,
# libkf5wallet-bin (kwalletd5) and libqca-qt5-2-plugins (KWallet's encrypted
# transfer session) are the other providers of scripts/test-matrix.sh.
# libqrencode4 encodes TOTP QR codes (loaded only when one is asked for); zbar-tools' zbarimg
# reads them back in the tests. bubblewrap, xdg-dbus-proxy and xdg-desktop-portal make the Flatpak
# sandbox of scripts/with-flatpak-sandbox.sh (its Secret portal, Flatpak's bus filter). libjsmn-dev
# is the header-only JSON tokenizer the library compiles in (Sources/CJsmn).
# The GNOME API (make gobject, Tests/gobject/run.sh): gobject-introspection (g-ir-scanner,
# g-ir-compiler) and libgirepository1.0-dev (GLib's and Gio's .gir, which the scanner reads) make
# the .gir and .typelib; valac (valac, vapigen) the .vapi and the Vala test; gi-docgen checks that
# every public symbol is documented; gjs and python3-gi run the binding tests; valgrind runs the C
# test under memcheck (a leaked GTask or object is a definite leak there). The GTK 4 example app
# (examples/gnome) runs under xvfb with gir1.2-gtk-4.0 and gir1.2-adw-1 (libadwaita); chromium
# (headless) screenshots the gi-docgen reference. gir1.2-secret-1 is libsecret's typelib, the
# baseline of the GNOME API's benchmarks from PyGObject and GJS (bench/gi_figures.py).
# The Qt 6 API (make qt, Tests/qt/run.sh, examples/qt): qt6-base-dev (QtCore, QtWidgets, moc),
# qt6-qpa-plugins (the offscreen platform the tests run the widgets on) and cmake (the CMake
# package's consumer test, Tests/install/cmake.sh).
# The Debian packages (debian/, Tests/debian/run.sh): dpkg-dev (dpkg-buildpackage), debhelper,
# dh-python and bash-completion (their dh sequences), libgcrypt20-dev (a Build-Depends that
# libsecret-1-dev only happens to pull in), lintian, man-db (the CLI test reads the man page).
PORTAL_DEPS_PACKAGES=(
    libsecret-1-dev libglib2.0-dev libglib2.0-bin gnome-keyring dbus-daemon
    libsecret-tools pkg-config gcc g++ make libcurl4-openssl-dev python3
    gdb dbus-bin keepassxc libkf5wallet-bin libqca-qt5-2-plugins libqrencode4 zbar-tools
    bubblewrap xdg-dbus-proxy xdg-desktop-portal libjsmn-dev
    gobject-introspection libgirepository1.0-dev valac gi-docgen gjs python3-gi valgrind
    xvfb gir1.2-gtk-4.0 gir1.2-adw-1 chromium gir1.2-secret-1
    qt6-base-dev qt6-qpa-plugins cmake
    dpkg-dev debhelper dh-python bash-completion libgcrypt20-dev lintian man-db
)

portal_deps_missing() {
    local pkg status
    for pkg in "${PORTAL_DEPS_PACKAGES[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) || status=""
        if [[ $status != "install ok installed" ]]; then
            printf '%s\n' "$pkg"
        fi
    done
}

portal_deps_packages() {
    local missing=()
    local pkg
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "deps.sh: dpkg-query not found: this script supports Debian/Ubuntu only;" \
            "install the equivalents of: ${PORTAL_DEPS_PACKAGES[*]}" >&2
        return 1
    fi
    while IFS= read -r pkg; do
        [[ -n $pkg ]] && missing+=("$pkg")
    done < <(portal_deps_missing)
    ((${#missing[@]} == 0)) && return 0

    if [[ $(id -u) != 0 ]]; then
        echo "deps.sh: missing Debian packages: ${missing[*]}" >&2
        echo "deps.sh: run as root (e.g. with sudo):" >&2
        echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
        return 1
    fi
    echo "deps.sh: installing missing Debian packages: ${missing[*]}" >&2
    apt-get update || { echo "deps.sh: apt-get update failed" >&2; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" || {
        echo "deps.sh: apt-get install failed" >&2
        return 1
    }
    local still
    still=$(portal_deps_missing | tr '\n' ' ')
    if [[ -n ${still// /} ]]; then
        echo "deps.sh: still missing after apt-get install: $still" >&2
        return 1
    fi
}

# $1 = 1 when sourced
portal_deps_swift() {
    local sourced=$1
    local swift_bin=${PORTAL_SWIFT_BIN:-/opt/swift/usr/bin}
    command -v swift >/dev/null 2>&1 && return 0
    if [[ -x $swift_bin/swift ]]; then
        export PATH="$swift_bin:$PATH"
        if [[ $sourced != 1 ]]; then
            echo "deps.sh: swift is not on your PATH; it is in $swift_bin." \
                "Run 'source scripts/deps.sh' or: export PATH=\"$swift_bin:\$PATH\"" >&2
        fi
        return 0
    fi
    echo "deps.sh: error: the Swift toolchain was not found: 'swift' is not on PATH and" \
        "$swift_bin/swift does not exist. Install a Swift toolchain from https://www.swift.org/install/linux/" \
        "(e.g. unpacked under /opt/swift) or set PORTAL_SWIFT_BIN to its usr/bin." >&2
    return 1
}

portal_deps_main() {
    local sourced=$1 rc=0
    portal_deps_packages || rc=1
    portal_deps_swift "$sourced" || rc=1
    return "$rc"
}

portal_deps_cleanup() {
    local rc=$1
    unset -f portal_deps_missing portal_deps_packages portal_deps_swift portal_deps_main \
        portal_deps_cleanup
    unset PORTAL_DEPS_PACKAGES
    return "$rc"
}

if [[ ${BASH_SOURCE[0]} != "$0" ]]; then
    # Sourced: leave the caller's shell options and namespace alone (only PATH
    # may change); return, never exit their shell.
    portal_deps_main 1
    portal_deps_cleanup $?
else
    set -euo pipefail
    portal_deps_main 0
fi
