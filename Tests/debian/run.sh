#!/usr/bin/env bash
# Tests/debian/run.sh — the Debian packages from a clean tree to a clean system (as root, on Debian 12):
#
#   Tests/debian/run.sh              all the steps below
#   Tests/debian/run.sh --no-build   steps 2-5 on the packages a previous run left in build/deb/
#
#   1. dpkg-buildpackage -us -uc -b (timed; the clean target keeps .build/, so a tree SwiftPM has
#      built already rebuilds incrementally); the packages, .changes and .buildinfo are moved from
#      the parent directory, where dpkg-buildpackage writes them, to build/deb/
#   2. lintian --fail-on warning --info on the .changes (every .deb, the .buildinfo)
#   3. apt-get install ./build/deb/*.deb
#   4. each test of debian/tests/control, run directly as autopkgtest's null runner would: its
#      Depends installed with apt-get, AUTOPKGTEST_TMP a fresh directory, no source tree build
#      (every test starts its own private keyring)
#   5. apt-get purge of the packages, then no file or directory they installed is left behind
# Ends with "debian/run.sh: N passed, M failed"; exits 1 when anything failed.
# autopkgtest runs the same tests: with the packages installed, `autopkgtest --no-built-binaries
# . -- null` (the null runner: on this machine, as root).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2
# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
[[ $(id -u) == 0 ]] || { echo "debian/run.sh: run as root (apt-get install / purge)" >&2; exit 2; }
build=1
[[ ${1:-} == --no-build ]] && build=0
out=$repo/build/deb
((build)) && rm -rf "$out"
mkdir -p "$out/log" || exit 2
export DEBIAN_FRONTEND=noninteractive

version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
changes=portal-keyring_${version}_${arch}.changes
mapfile -t packages < <(dh_listpackages)
changes_files() { sed -n '/^Files:/,/^[^ ]/s/^ [0-9a-f]\{32\} [0-9]* [^ ]* [^ ]* //p' "$1"; }

section "build"
start=$SECONDS
if ((!build)); then
    [[ -f $out/$changes ]] || { echo "debian/run.sh: --no-build: no build/deb/$changes" >&2; exit 2; }
    skip "dpkg-buildpackage (--no-build: the packages in build/deb/)"
elif bounded 1800 dpkg-buildpackage dpkg-buildpackage -us -uc -b >"$out/log/build.log" 2>&1; then
    ok "dpkg-buildpackage -us -uc -b (${#packages[@]} packages)"
else
    fail "dpkg-buildpackage (log: build/deb/log/build.log)"
    detail "$(tail -n 20 "$out/log/build.log")"
    harness_summary "debian/run.sh"
    exit
fi
if ((build)); then
    timing "package build: $((SECONDS - start)) s"
    # The files the .changes names, and the .changes itself, out of the parent directory.
    for file in $(changes_files "../$changes") "$changes"; do mv -f "../$file" "$out/"; done
fi
mapfile -t files < <(changes_files "$out/$changes")
mapfile -t debs < <(printf '%s\n' "${files[@]}" | grep '\.deb$')
check_quiet "the .changes names a .deb for every package of debian/control" \
    test "${#debs[@]}" -eq "${#packages[@]}"

section "lintian"
start=$SECONDS
if lintian --fail-on warning --info --display-info "$out/$changes" >"$out/log/lintian.log" 2>&1; then
    ok "lintian --fail-on warning: $(grep -c '^[EW]: ' "$out/log/lintian.log") errors or warnings," \
        "$(grep -c '^I: ' "$out/log/lintian.log") infos (log: build/deb/log/lintian.log)"
else
    fail "lintian (log: build/deb/log/lintian.log)"
    detail "$(grep -E '^[EW]: ' "$out/log/lintian.log" | head -n 20)"
fi
timing "lintian: $((SECONDS - start)) s"

section "install"
if apt-get install -y --no-install-recommends "${debs[@]/#/$out/}" >"$out/log/install.log" 2>&1; then
    ok "apt-get install ./build/deb/*.deb"
else
    fail "apt-get install (log: build/deb/log/install.log)"
    detail "$(tail -n 20 "$out/log/install.log")"
fi
declare -A installed=()
for package in "${packages[@]}"; do
    while IFS= read -r path; do installed[$path]=1; done < <(dpkg -L "$package" 2>/dev/null)
done
check_quiet "dpkg knows the files of all ${#packages[@]} packages" test "${#installed[@]}" -gt 0

section "installed-package tests (debian/tests)"
start=$SECONDS
# debian/tests/control: "Tests: NAME" and "Depends: A, B" per stanza.
mapfile -t stanzas < <(awk -v RS= '{ t = ""; d = ""; n = split($0, line, "\n")
    for (i = 1; i <= n; i++) { if (line[i] ~ /^Tests:/) t = substr(line[i], 8); if (line[i] ~ /^Depends:/) d = substr(line[i], 10) }
    if (t != "") print t "|" d }' debian/tests/control)
for stanza in "${stanzas[@]}"; do
    name=${stanza%%|*} depends=${stanza#*|}
    read -ra deps <<<"${depends//,/ }"
    if ! apt-get install -y --no-install-recommends "${deps[@]}" >>"$out/log/install.log" 2>&1; then
        fail "$name: its Depends could not be installed: ${deps[*]}"
        continue
    fi
    tmp=$(mktemp -d "$out/autopkgtest.XXXXXX")
    # Run from an empty directory: nothing of the source tree on the path.
    if (cd "$tmp" && AUTOPKGTEST_TMP=$tmp bounded 300 "$name" "$repo/debian/tests/$name") \
        >"$out/log/test-$name.log" 2>&1; then
        ok "$name ($(grep -c '^ok' "$out/log/test-$name.log") checks)"
    else
        fail "$name (log: build/deb/log/test-$name.log)"
        detail "$(tail -n 15 "$out/log/test-$name.log")"
    fi
    rm -rf "$tmp"
done
timing "installed-package tests: $((SECONDS - start)) s"

section "purge"
if apt-get purge -y "${packages[@]}" >"$out/log/purge.log" 2>&1; then
    ok "apt-get purge ${packages[*]}"
else
    fail "apt-get purge (log: build/deb/log/purge.log)"
fi
left=()
for path in "${!installed[@]}"; do
    [[ $path == /. ]] && continue
    [[ -e $path || -L $path ]] || continue
    # A directory that another package also owns (/usr/lib, /usr/share/doc …) stays.
    [[ -d $path && ! -L $path ]] && dpkg -S "$path" >/dev/null 2>&1 && continue
    left+=("$path")
done
if ((${#left[@]} == 0)); then
    ok "nothing the packages installed is left (${#installed[@]} paths checked)"
else
    fail "left behind after purge: ${#left[@]} paths"
    detail "${left[@]:0:20}"
fi

harness_summary "debian/run.sh"
