#!/usr/bin/env bash
# Tests/install/cmake.sh — the CMake package and the Qt 6 API's part of the install test
# (PortalKeyringConfig.cmake, libportal-keyring-qt6.so; docs/qt.md). Sourced by Tests/install/run.sh:
#
#   cmake_expect_installed ROOT   the file layout under ROOT (PREFIX, or DESTDIR's /usr/local)
#   cmake_check_prefix PREFIX     with the build tree on no path (env -i): a project made of
#                                 examples/qt's sources and exactly the CMake lines docs/qt.md shows
#                                 configures with -DCMAKE_PREFIX_PATH=PREFIX and builds; the program
#                                 finds both libraries in PREFIX/lib with no LD_LIBRARY_PATH (CMake's
#                                 build rpath from the imported targets), and runs (offscreen): a
#                                 blank auth environment id is refused, through failed(); and
#                                 examples/qt/CMakeLists.txt uses the same lines
# or run on its own against a prefix that `make install PREFIX=…` filled:
#   Tests/install/cmake.sh PREFIX
# Uses run.sh's pass/fail/skip/expect_file/expect_link and $work (its own when run alone).

# shellcheck shell=bash
cmake_expect_installed() { # ROOT
    local root=$1 h
    expect_file "$root/lib/cmake/PortalKeyring/PortalKeyringConfig.cmake" 644 "lib/cmake/PortalKeyring/PortalKeyringConfig.cmake"
    expect_file "$root/lib/cmake/PortalKeyring/PortalKeyringConfigVersion.cmake" 644 \
        "lib/cmake/PortalKeyring/PortalKeyringConfigVersion.cmake"
    pkg-config --exists Qt6Core || { skip "Qt 6 not installed: no libportal-keyring-qt6"; return; }
    expect_file "$root/lib/libportal-keyring-qt6.so.0" 755 "lib/libportal-keyring-qt6.so.0"
    expect_link "$root/lib/libportal-keyring-qt6.so" libportal-keyring-qt6.so.0 "lib/libportal-keyring-qt6.so -> libportal-keyring-qt6.so.0"
    for h in Include/portal-keyring-qt6/*.h; do
        expect_file "$root/include/portal-keyring-qt6/${h##*/}" 644 "include/portal-keyring-qt6/${h##*/}"
    done
}

cmake_check_prefix() { # PREFIX
    local prefix=$1 dir=$work/cmake-app lines line dyn resolved
    if ! command -v cmake >/dev/null || ! pkg-config --exists Qt6Widgets; then
        skip "the CMake consumer: cmake or Qt 6 not installed (Debian: cmake qt6-base-dev)"
        return
    fi
    # Its one search path is its own directory (build-support/qt.mk says why): no build-tree path.
    dyn=$(readelf -d "$prefix/lib/libportal-keyring-qt6.so.0" | grep -E 'RUNPATH|RPATH')
    if [[ $dyn == *'(RUNPATH)'*'[$ORIGIN]' && $(grep -c . <<<"$dyn") == 1 ]]; then
        pass "the installed libportal-keyring-qt6.so.0's only search path is \$ORIGIN"
    else
        fail "the installed libportal-keyring-qt6.so.0's search path: ${dyn:-none}"
    fi
    lines=$(sed -n '/^```cmake$/,/^```$/{/^```/d;p}' docs/qt.md)
    mkdir -p "$dir" && cp examples/qt/main.cpp examples/qt/sign_in_window.* "$dir/"
    printf '%s\n' 'cmake_minimum_required(VERSION 3.16)' 'project(myapp LANGUAGES CXX)' \
        'set(CMAKE_CXX_STANDARD 17)' 'add_executable(myapp main.cpp sign_in_window.cpp)' "$lines" >"$dir/CMakeLists.txt"
    if env -i PATH=/usr/bin:/bin HOME="$HOME" cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$prefix" \
        >"$dir/cmake.log" 2>&1 && env -i PATH=/usr/bin:/bin HOME="$HOME" cmake --build "$dir/build" >>"$dir/cmake.log" 2>&1; then
        pass "a project with docs/qt.md's CMake lines builds against $prefix ($(grep -c . <<<"$lines") lines)"
    else
        fail "a project with docs/qt.md's CMake lines does not build against $prefix"
        detail "$(tail -n 15 "$dir/cmake.log")"
        return
    fi
    resolved=$(env -i ldd "$dir/build/myapp" | grep portal-keyring)
    if grep -q "libportal-keyring-qt6.so.0 => $prefix/lib/" <<<"$resolved" &&
        grep -q "libportal-keyring.so[.0-9]* => $prefix/lib/" <<<"$resolved" &&
        ! grep -qE "$repo/(build/qt|build/make|\.build)/" <<<"$resolved"; then
        pass "with no LD_LIBRARY_PATH both libraries resolve to $prefix/lib"
    else
        fail "the libraries do not resolve to $prefix/lib: $resolved"
    fi
    dyn=$(env -i QT_QPA_PLATFORM=offscreen PORTAL_AUTH_ENVIRONMENT_ID= bash -c "echo quit | timeout 20 '$dir/build/myapp'" 2>&1)
    if grep -q "^state: failed 0 $((1))" <<<"$dyn"; then
        pass "the program runs: a blank auth environment id fails restore with INVALID_ARGUMENT"
    else
        fail "the program did not report the refused id: $dyn"
    fi
    while IFS= read -r line; do
        [[ -z $line ]] || grep -qF -- "${line/myapp/portal-keyring-qt-example}" examples/qt/CMakeLists.txt ||
            { fail "examples/qt/CMakeLists.txt lacks docs/qt.md's line: $line"; return; }
    done <<<"$lines"
    pass "examples/qt/CMakeLists.txt uses the same lines"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then # run alone: Tests/install/cmake.sh PREFIX
    set -uo pipefail
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    cd "$repo" || exit 2
    source Tests/lib/harness.sh
    expect_file() { if [[ -f $1 && ! -L $1 && $(stat -c %a "$1") == "$2" ]]; then ok "$3"; else fail "$3"; fi; }
    expect_link() { if [[ $(readlink "$1") == "$2" ]]; then ok "$3"; else fail "$3"; fi; }
    work=$(mktemp -d "$repo/build/cmake-check.XXXXXX") || exit 2
    trap 'rm -rf -- "$work"' EXIT
    cmake_expect_installed "$1"
    cmake_check_prefix "$1"
    harness_summary "install/cmake.sh"
fi
