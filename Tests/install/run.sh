#!/usr/bin/env bash
# Tests/install/run.sh — install portal-keyring like a system library and check the result.
#
#   Tests/install/run.sh            (or: make check-install)
#
# Starts its own private keyring (scripts/with-keyring.sh); never touches the system prefix.
# Steps, each reported as ok/FAIL (every step runs even after a failure):
#   1. scripts/deps.sh (Debian packages, swift on PATH); abigail-tools via apt-get when missing;
#      `make` (release: self-contained libportal-keyring.so, portal-keyring.pc, portal-session);
#      the README's C and C++ build lines, as written, and its build/make/bin/portal-session path;
#   2. `make install DESTDIR=<tmp>/stage`: the exact file layout under /usr/local (library with
#      soname symlinks, headers, .pc, portal-session, Python module, desktop files, the GNOME
#      API's library, headers, .pc, .gir, .typelib, .vapi and .deps), then
#      the example desktop files only with `make install-examples`;
#      `make uninstall DESTDIR=...` leaves no file behind;
#   3. `make install PREFIX=<tmp>/prefix`, then on that prefix:
#      - exported dynamic symbols (nm -D --defined-only) == the header's PORTAL_API functions;
#      - ldd: only libc/libm/libstdc++/libgcc_s, GLib/GIO/GObject, libgcrypt and libcurl plus their
#        own dependencies; nothing from the Swift toolchain, nothing "not found";
#      - versions: header macros, runtime functions, soname, file name and pkg-config agree;
#      - relative relocations packed (DT_RELR) in the library and portal-session, which require
#        GLIBC_ABI_DT_RELR;
#      - libcurl search path: no RUNPATH/RPATH in the library or portal-session, libcurl neither
#        DT_NEEDED nor in the .pc; a fake libcurl.so.4 planted in <prefix>/lib (its constructor
#        leaves a file; control: it does when loaded) is never loaded by a request
#        (Tests/install/curl_search.c, fake_curl.c);
#      - `cc app.c $(pkg-config --cflags --libs portal-keyring)` with PATH and PKG_CONFIG_PATH
#        free of the toolchain, then the program persists / restores (separate processes) / clears
#        a session in a private keyring with LD_LIBRARY_PATH=<prefix>/lib only and /opt/swift
#        hidden (a private mount namespace with an empty tmpfs over it, when unshare works);
#      - the installed Python module and portal-session restore that session the same way;
#      - `make install PREFIX=$VIRTUAL_ENV` in an active venv: the venv's python imports the module;
#      - the GNOME API (Tests/install/gnome.sh): no rpath, ldd and the .gir's shared-library; a C
#        program built with `pkg-config --cflags --libs portal-keyring-gobject-1`, a Vala one with
#        `valac --pkg portal-keyring-gobject-1 --vapidir PREFIX/share/vala/vapi`, `gjs -m` and
#        PyGObject with GI_TYPELIB_PATH=PREFIX/lib/girepository-1.0: each gets INVALID_ARGUMENT
#        for a blank id and restores the session, with the build tree on no path;
#      - the CMake package and the Qt 6 API (Tests/install/cmake.sh): a project of examples/qt's
#        sources and exactly docs/qt.md's CMake lines builds with -DCMAKE_PREFIX_PATH=PREFIX and
#        runs with no LD_LIBRARY_PATH (find_package(PortalKeyring COMPONENTS qt6));
#   4. ABI: abidiff of the header's ABI against the committed baseline abi/portal-keyring.abi;
#   5. informational: library size, ldd list, symbol count, dlopen + first-call times against
#      raw libsecret (Tests/install/load_time.c);
#   6. `make uninstall PREFIX=<tmp>/prefix` removes every installed file (and the GNOME API's
#      include directory).
# Exits 1 if any check failed, 2 if the environment could not be prepared.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo" || exit 2

die() {
    printf 'install/run.sh: error: %s\n' "$*" >&2
    exit 2
}

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
# shellcheck source=Tests/install/gnome.sh
source "$here/gnome.sh"
# shellcheck source=Tests/install/cmake.sh
source "$here/cmake.sh"

# ------------------------------------------------------------------------------ environment

# shellcheck source=scripts/deps.sh
source scripts/deps.sh || die "scripts/deps.sh failed"
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
    [[ $(id -u) == 0 ]] || die "abigail-tools is missing: apt-get install abigail-tools (as root)"
    echo "install/run.sh: installing abigail-tools" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends abigail-tools >/dev/null 2>&1; then
        apt-get update >/dev/null 2>&1 || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends abigail-tools >/dev/null ||
            die "apt-get install abigail-tools failed"
    fi
fi
for tool in make cc pkg-config nm readelf objdump ldd abidw abidiff; do
    command -v "$tool" >/dev/null || die "'$tool' not found"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/portal-install.XXXXXXXX") || die "mktemp failed"
cleanup() { rm -rf -- "$work"; }
trap cleanup EXIT
stage=$work/stage
prefix=$work/prefix
log=$work/make.log

read -r major minor patch number vstring < <(build-support/header-api.sh version Include/portal_keyring.h) ||
    die "cannot read the version macros"
version=$major.$minor.$patch
soname=libportal-keyring.so.$major
realname=libportal-keyring.so.$version
# The toolchain's root (/opt/swift for /opt/swift/usr/bin/swift); it is hidden below only when it
# is a directory of its own (never / or /usr).
swift_dir=$(cd "$(dirname "$(command -v swift)")" && pwd -P)
toolchain_root=""
if [[ $swift_dir == */usr/bin ]]; then
    toolchain_root=${swift_dir%/usr/bin}
fi
toolchain_pat="swift${toolchain_root:+|$toolchain_root}"
system_python=$(command -v /usr/bin/python3 || command -v python3)

# ------------------------------------------------------------------------------ build

section "build (make)"
if make >"$log" 2>&1; then
    pass "make: $(grep -E '^built ' "$log" | sed 's/^built //')"
else
    sed 's/^/  | /' "$log" | tail -n 40
    fail "make failed (log above)"
    harness_summary install/run.sh " (nothing else can run)"
    exit 1
fi
# The README's "C in 20 lines" built with the README's own build line, as written, after `make`
# (from the checkout's root, where a reader runs it).
readme_line=$(awk '/^## C in 20 lines$/ {s=1} s && /^`cc app.c/ {gsub(/`/, ""); print; exit}' README.md)
awk '/^## C in 20 lines$/ {s=1} s && /^```c$/ {g=1; next} g && /^```$/ {exit} g {print}' README.md >app.c
if [[ -n $readme_line ]] && eval "$readme_line -o build/make/readme-app" >"$log" 2>&1 && [[ -x build/make/readme-app ]]; then
    pass "README's C build line, as written, after make: $readme_line"
else
    sed 's/^/  | /' "$log" | tail -n 5
    fail "README's C build line does not build after make: ${readme_line:-(not found in README.md)}"
fi
rm -f app.c build/make/readme-app
# The C++ guide's build line (docs/cpp.md), as written, on its C++ snippet put in a
# function (it is not a whole program) beside stand-ins for the app's own functions it calls;
# the program checks the library it loaded.
cpp_line=$(grep -o 'g++ -std=c++17 app.cpp[^`]*' docs/cpp.md | head -n1)
{
    awk '/^```cpp$/ {g=1; next} g && /^```$/ {exit} g {print}' docs/cpp.md |
        sed -n '1p'
    printf '%s\n' 'static int show_sign_in() { return 1; }' \
        'template <class T> static void show_error(const T &) {}' \
        'template <class T> static void show_signed_in(T &&) {}' 'int app();' 'int app() {'
    awk '/^```cpp$/ {g=1; next} g && /^```$/ {exit} g {print}' docs/cpp.md |
        sed '1d'
    printf '    return 0;\n}\nint main() { return portal_keyring::library_matches_header() ? 0 : 1; }\n'
} >app.cpp
if [[ -n $cpp_line ]] && eval "$cpp_line -o build/make/readme-app-cpp" >"$log" 2>&1 && build/make/readme-app-cpp; then
    pass "docs/cpp.md's C++ build line, as written, after make (and the program runs): $cpp_line"
else
    sed 's/^/  | /' "$log" | tail -n 5
    fail "docs/cpp.md's C++ build line does not build after make: ${cpp_line:-(not found in docs/cpp.md)}"
fi
rm -f app.cpp build/make/readme-app-cpp
# The path the README gives for the tool `make` builds.
cli_path=$(grep -o '`make` builds it at `[^`]*`' README.md | sed 's/.*at `//; s/`$//')
if [[ -n $cli_path && -x $cli_path ]] && "$cli_path" --version >"$log" 2>&1; then
    pass "README's portal-session path exists after make and runs: $cli_path ($(cat "$log"))"
else
    fail "README's portal-session path after make: '${cli_path:-(not found in README.md)}' is not a working program"
fi
has_cli=0
[[ -f build/make/bin/portal-session ]] && has_cli=1
((has_cli)) || info "no portal-session product: the CLI checks are skipped"

# ------------------------------------------------------------------------------ staged install

section "make install DESTDIR=$stage (PREFIX=/usr/local)"
if make install DESTDIR="$stage" >"$log" 2>&1; then
    pass "make install DESTDIR=... succeeded"
else
    sed 's/^/  | /' "$log" | tail -n 20
    fail "make install DESTDIR=... failed"
fi
root=$stage/usr/local
expect_file() { # PATH MODE DESCRIPTION
    if [[ -f $1 && ! -L $1 ]] && [[ $(stat -c %a "$1") == "$2" ]]; then
        pass "$3 (mode $2)"
    else
        fail "$3: $1 missing, a symlink, or mode $(stat -c %a "$1" 2>/dev/null) instead of $2"
    fi
}
expect_link() { # PATH TARGET DESCRIPTION
    if [[ -L $1 && $(readlink "$1") == "$2" ]]; then
        pass "$3"
    else
        fail "$3: $1 is not a symlink to $2 ($(readlink "$1" 2>/dev/null || echo missing))"
    fi
}
expect_file "$root/lib/$realname" 755 "lib/$realname"
expect_link "$root/lib/$soname" "$realname" "lib/$soname -> $realname"
expect_link "$root/lib/libportal-keyring.so" "$soname" "lib/libportal-keyring.so -> $soname"
for h in Include/*.h Include/*.hpp; do
    [[ -e $h ]] || continue
    expect_file "$root/include/$(basename "$h")" 644 "include/$(basename "$h")"
done
expect_file "$root/lib/pkgconfig/portal-keyring.pc" 644 "lib/pkgconfig/portal-keyring.pc"
if grep -qx 'prefix=/usr/local' "$root/lib/pkgconfig/portal-keyring.pc" 2>/dev/null; then
    pass "the staged .pc says prefix=/usr/local (DESTDIR is not baked in)"
else
    fail "the staged .pc does not say prefix=/usr/local: $(grep '^prefix=' "$root/lib/pkgconfig/portal-keyring.pc" 2>/dev/null)"
fi
((has_cli)) && expect_file "$root/bin/portal-session" 755 "bin/portal-session"
if [[ -f python/portal_keyring/__init__.py ]]; then
    pydir_sys=$("$system_python" build-support/python-dir.py /usr/local)
    for f in python/portal_keyring/*.py python/portal_keyring/py.typed; do
        expect_file "$stage$pydir_sys/portal_keyring/$(basename "$f")" 644 "Python package file portal_keyring/$(basename "$f") in $pydir_sys (on $system_python's sys.path)"
    done
fi
gnome_expect_installed "$root"
cmake_expect_installed "$root"
# The examples' URL handler is not installed by default, only by `make install-examples`.
if [[ -e $root/share/applications ]]; then
    fail "make install installed share/applications: $(ls "$root/share/applications" | tr '\n' ' ')"
else
    pass "make install installs no example desktop file"
fi
if make install-examples DESTDIR="$stage" >"$log" 2>&1; then
    for d in examples/desktop/*.desktop; do
        [[ -e $d ]] || continue
        expect_file "$root/share/applications/$(basename "$d")" 644 "make install-examples: share/applications/$(basename "$d")"
    done
else
    cat "$log"
    fail "make install-examples failed"
fi
if make uninstall DESTDIR="$stage" >"$log" 2>&1; then
    left=$(find "$stage" ! -type d | sed "s|^$stage||")
    if [[ -z $left ]]; then
        pass "make uninstall DESTDIR=... removed every installed file"
    else
        fail "make uninstall DESTDIR=... left: $(tr '\n' ' ' <<<"$left")"
    fi
    gnome_expect_removed "$stage"
else
    sed 's/^/  | /' "$log" | tail -n 20
    fail "make uninstall DESTDIR=... failed"
fi

# ------------------------------------------------------------------------------ prefix install

section "make install PREFIX=$prefix"
if make install PREFIX="$prefix" >"$log" 2>&1; then
    pass "make install PREFIX=... succeeded"
else
    sed 's/^/  | /' "$log" | tail -n 20
    fail "make install PREFIX=... failed"
fi
lib=$prefix/lib/$realname
[[ -f $lib ]] || die "$lib was not installed; nothing else can be checked"
pydir=$("$system_python" build-support/python-dir.py "$prefix")

section "exported symbols (nm -D --defined-only $realname)"
declared=$(build-support/header-api.sh names Include/portal_keyring.h)
# Global and weak definitions (upper-case nm types); local entries of .dynsym are not exports.
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ { print $3 }' | sed 's/@.*//' | sort -u)
ndeclared=$(grep -c . <<<"$declared")
nexported=$(grep -c . <<<"$exported")
missing=$(comm -23 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported"))
extra=$(comm -13 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported"))
if [[ -z $missing && -z $extra ]]; then
    pass "exactly the $ndeclared PORTAL_API functions of the header are exported"
else
    [[ -z $missing ]] || fail "declared in the header but not exported: $(tr '\n' ' ' <<<"$missing")"
    [[ -z $extra ]] || fail "exported but not declared in the header: $(head -n 20 <<<"$extra" | tr '\n' ' ')"
fi
notfunc=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ && $2 != "T" { print $3 }')
if [[ -z $notfunc ]]; then pass "every export is a function (type T)"; else fail "exports that are not functions: $notfunc"; fi
locals=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[a-z]$/' | grep -c . || true)
((locals == 0)) || info "$locals local (non-exported) entries in .dynsym"

section "dependencies (ldd $realname)"
ldd_out=$(ldd "$lib" 2>&1)
if grep -qE "not found" <<<"$ldd_out"; then
    printf '%s\n' "$ldd_out" | sed 's/^/  | /'
    fail "unresolved dependencies"
else
    pass "every dependency resolves"
fi
if grep -qE "$toolchain_pat" <<<"$ldd_out"; then
    fail "the library depends on the Swift toolchain"
else
    pass "nothing from the Swift toolchain (${toolchain_root:-no separate toolchain directory})"
fi
allowed_direct='^(libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux[-a-z0-9_.]*\.so\.[0-9]+|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libutil\.so\.1|libglib-2\.0\.so\.0|libgobject-2\.0\.so\.0|libgio-2\.0\.so\.0|libgmodule-2\.0\.so\.0|libgcrypt\.so\.20|libcurl(-gnutls|-nss)?\.so\.4)$'
needed=$(readelf -d "$lib" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
bad_needed=$(grep -vE "$allowed_direct" <<<"$needed" || true)
if [[ -z $bad_needed ]]; then
    pass "direct dependencies: $(tr '\n' ' ' <<<"$needed")"
else
    fail "unexpected direct dependencies: $(tr '\n' ' ' <<<"$bad_needed")"
fi
# Everything ldd lists must be a direct dependency or a dependency of one of them.
closure=$(
    printf '%s\n' "$needed"
    for dep in $needed; do
        path=$(awk -v d="$dep" '$1 == d && $2 == "=>" { print $3 }' <<<"$ldd_out")
        [[ -n $path ]] && ldd "$path" 2>/dev/null | awk '{ print $1 }'
    done
)
listed=$(awk '$1 !~ /^linux-vdso/ { print $1 }' <<<"$ldd_out" | sed 's|.*/||')
stray=$(comm -23 <(sort -u <<<"$listed") <(sed 's|.*/||' <<<"$closure" | sort -u))
if [[ -z $stray ]]; then
    pass "the other $(($(grep -c . <<<"$listed") - $(grep -c . <<<"$needed"))) libraries are dependencies of those"
else
    fail "libraries that no allowed dependency brings in: $(tr '\n' ' ' <<<"$stray")"
fi

section "versions"
if [[ $number == $((major * 1000000 + minor * 1000 + patch)) && $vstring == "$version" ]]; then
    pass "header: VERSION_NUMBER $number and VERSION_STRING \"$vstring\" agree with MAJOR.MINOR.PATCH $version"
else
    fail "header: MAJOR.MINOR.PATCH $version, VERSION_NUMBER $number, VERSION_STRING \"$vstring\" disagree"
fi
lib_soname=$(readelf -d "$lib" | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
if [[ $lib_soname == "$soname" ]]; then pass "soname $lib_soname (major $major)"; else fail "soname '$lib_soname', expected $soname"; fi
pc_version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion portal-keyring 2>&1)
if [[ $pc_version == "$version" ]]; then pass "pkg-config --modversion $pc_version"; else fail "pkg-config --modversion: '$pc_version', expected $version"; fi

# ------------------------------------------------------------------------------ packed relocations

section "relative relocations packed (-z pack-relative-relocs; docs/ABI.md)"
# The ~36,000 relative relocations in .relr.dyn (a few KiB) rather than .rela.dyn (843 KiB the
# loader reads at every dlopen); the GLIBC_ABI_DT_RELR version makes an older glibc refuse the
# file instead of loading it unrelocated.
# Only built so where glibc has DT_RELR (2.36+; the Makefile's RELR_GLIBC): elsewhere the library
# must stay loadable by its own build machine's loader, so nothing is packed.
glibc=$(getconf GNU_LIBC_VERSION | awk '{ print $2 }')
if ! awk -v v="$glibc" 'BEGIN { split(v, p, "."); exit !(p[1] > 2 || (p[1] == 2 && p[2] >= 36)) }'; then
    for bin in "$lib" "$prefix/bin/portal-session"; do
        [[ -e $bin ]] || continue
        if readelf -dW "$bin" | grep -q '(RELR)'; then fail "$(basename "$bin"): DT_RELR on glibc $glibc"
        else pass "$(basename "$bin"): relocations not packed on glibc $glibc (no DT_RELR support)"; fi
    done
fi
for bin in "$lib" "$prefix/bin/portal-session"; do
    [[ -e $bin ]] || continue
    awk -v v="$glibc" 'BEGIN { split(v, p, "."); exit !(p[1] > 2 || (p[1] == 2 && p[2] >= 36)) }' || continue
    what=$(basename "$bin")
    relative=$(readelf -rW "$bin" | grep -c 'R_X86_64_RELATIVE' || true)
    if readelf -dW "$bin" | grep -q '(RELR)' && ((relative < 100)); then
        pass "$what: DT_RELR, $relative R_X86_64_RELATIVE entries left in .rela.dyn"
    else
        fail "$what: relative relocations not packed (DT_RELR $(readelf -dW "$bin" | grep -c '(RELR)'), $relative R_X86_64_RELATIVE entries)"
    fi
    if objdump -p "$bin" | grep -q 'GLIBC_ABI_DT_RELR'; then
        pass "$what requires GLIBC_ABI_DT_RELR (an older loader refuses it)"
    else
        fail "$what does not require GLIBC_ABI_DT_RELR"
    fi
done

# ------------------------------------------------------------------------------ code layout

section "the first restore's code laid out together (build-support/hot-symbols.txt)"
# The kernel maps code in 64 KiB windows around each page a process touches: the functions that
# loading the library and the first restore run (build-support/hot-symbols.txt, from
# bench/hot-symbols.sh) are placed together by the linker (Makefile LAYOUT_FLAGS). Read from the
# unstripped library the same link wrote. Laid out so, they lie in about 18 windows; left in
# input order, in about 42. A list that no longer matches the code (renamed functions) fails too.
unstripped=.build/make/release/libportal-keyring.so
if [[ ! -e $unstripped ]]; then
    fail "no $unstripped after make"
else
    layout=$(python3 - "$unstripped" build-support/hot-symbols.txt <<'PY2'
import subprocess, sys
library, listing = sys.argv[1], sys.argv[2]
wanted = [line.strip() for line in open(listing) if line.strip()]
address = {}
for line in subprocess.run(["nm", "--defined-only", library], capture_output=True, text=True, check=True).stdout.splitlines():
    fields = line.split()
    if len(fields) == 3 and fields[1] in "tTwW":
        address.setdefault(fields[2], int(fields[0], 16))
found = [address[name] for name in wanted if name in address]
print(len(wanted), len(found), len({a // 65536 for a in found}))
PY2
)
    read -r listed found windows <<<"$layout"
    if ((found * 10 >= listed * 8)); then
        pass "$found of the $listed listed functions are in the library"
    else
        fail "only $found of the $listed functions of build-support/hot-symbols.txt are in the library: run bench/hot-symbols.sh"
    fi
    if ((windows <= 24)); then
        pass "they lie in $windows windows of 64 KiB"
    else
        fail "they lie in $windows windows of 64 KiB (laid out together: about 18)"
    fi
    # The other way round: the functions the first restore runs now (renamed, split or new ones
    # since the list was made are laid out elsewhere, and each pulls another window in: a list
    # 90% current cost +0.8 MiB resident).
    if bench/hot-symbols.sh --out "$work/hot-now.txt" >"$work/hot-now.log" 2>&1; then
        read -r running listed_now <<<"$(python3 - "$work/hot-now.txt" build-support/hot-symbols.txt <<'PY3'
import sys
now = [l.strip() for l in open(sys.argv[1]) if l.strip()]
listed = {l.strip() for l in open(sys.argv[2]) if l.strip()}
print(len(now), sum(name in listed for name in now))
PY3
)"
        if ((listed_now * 100 >= running * 97)); then
            pass "$listed_now of the $running functions the first restore runs now are listed"
        else
            fail "only $listed_now of the $running functions the first restore runs now are in build-support/hot-symbols.txt: run \`make lib bin && bench/hot-symbols.sh\` and commit the list"
        fi
    else
        fail "bench/hot-symbols.sh --out failed (log: $work/hot-now.log)"
    fi
fi

# ------------------------------------------------------------------------------ libcurl search path

section "libcurl comes from the system library path only"
dyn=$(readelf -d "$lib")
if grep -qE '\((RUNPATH|RPATH)\)' <<<"$dyn"; then
    fail "the installed library has a search path of its own: $(grep -E '\((RUNPATH|RPATH)\)' <<<"$dyn")"
else
    pass "no RUNPATH or RPATH in $realname"
fi
if [[ -x $prefix/bin/portal-session ]] && readelf -d "$prefix/bin/portal-session" | grep -qE '\((RUNPATH|RPATH)\)'; then
    fail "portal-session has a RUNPATH/RPATH: $(readelf -d "$prefix/bin/portal-session" | grep -E '\((RUNPATH|RPATH)\)')"
else
    pass "no RUNPATH or RPATH in portal-session"
fi
if grep -qE '(NEEDED).*libcurl' <<<"$dyn"; then fail "libcurl is a DT_NEEDED entry"; else pass "libcurl is not a DT_NEEDED entry (dlopen at the first request)"; fi
if grep -qiE '^(Requires|Requires\.private|Libs(\.private)?):.*curl' "$prefix/lib/pkgconfig/portal-keyring.pc"; then
    fail "portal-keyring.pc names libcurl as a build or link dependency"
else
    pass "portal-keyring.pc names no libcurl link dependency"
fi
# A fake libcurl next to the installed library: its constructor would leave $marker.
curldir=$work/curl-search
mkdir -p "$curldir"
marker=$curldir/fake-curl-loaded
planted=()
if cc -shared -fPIC -o "$curldir/libcurl.so.4" Tests/install/fake_curl.c >"$log" 2>&1 &&
    # shellcheck disable=SC2046 # pkg-config's output is a list of flags
    cc Tests/install/curl_search.c $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs portal-keyring) \
        -Wl,--enable-new-dtags -Wl,-rpath,"$prefix/lib" -o "$curldir/curl_search" >>"$log" 2>&1; then
    for name in libcurl.so.4 libcurl-gnutls.so.4; do
        cp "$curldir/libcurl.so.4" "$prefix/lib/$name" && planted+=("$prefix/lib/$name")
    done
    # Control: the fake does run its constructor when it is loaded.
    rm -f "$marker"
    FAKE_CURL_MARKER=$marker python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$prefix/lib/libcurl.so.4"
    if [[ -f $marker ]]; then pass "control: loading the planted fake libcurl.so.4 runs its constructor"; else fail "control: the fake libcurl left no marker when loaded"; fi
    rm -f "$marker"
    out=$(env -u LD_LIBRARY_PATH FAKE_CURL_MARKER="$marker" "$curldir/curl_search" 2>&1)
    rc=$?
    if [[ -f $marker ]]; then
        fail "the library loaded the libcurl.so.4 planted next to it ($prefix/lib): $out"
    else
        pass "a libcurl.so.4 planted next to the installed library is never loaded"
    fi
    if ((rc == 0)); then pass "the system libcurl made the request ($out)"; else fail "curl_search: exit $rc: $out"; fi
    rm -f "${planted[@]}" "$marker"
else
    fail "building the fake libcurl or curl_search failed: $(cat "$log")"
fi

# ------------------------------------------------------------------------------ compile and run

section "cc app.c \$(pkg-config --cflags --libs portal-keyring), run without the toolchain"
clean_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
appdir=$work/app
mkdir -p "$appdir"
cp Tests/install/app.c "$appdir/app.c"
flags=$(env -i PATH="$clean_path" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs portal-keyring 2>&1)
info "pkg-config --cflags --libs: $flags"
# shellcheck disable=SC2016
if (cd "$appdir" && env -i PATH="$clean_path" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
    sh -c 'cc app.c $(pkg-config --cflags --libs portal-keyring) -o app' >"$log" 2>&1); then
    pass "compiled with only cc and pkg-config (PATH and PKG_CONFIG_PATH without the toolchain)"
else
    sed 's/^/  | /' "$log"
    fail "compiling app.c against the installed prefix failed"
fi
app=$appdir/app
app_ldd=$(env -i LD_LIBRARY_PATH="$prefix/lib" ldd "$app" 2>&1)
if grep -qE "libportal-keyring\.so\.$major => $prefix/lib/$soname " <<<"$app_ldd" &&
    ! grep -qE "not found|$toolchain_pat" <<<"$app_ldd"; then
    pass "ldd app: libportal-keyring.so.$major from $prefix/lib, nothing from the toolchain, nothing missing"
else
    printf '%s\n' "$app_ldd" | sed 's/^/  | /'
    fail "ldd app does not resolve cleanly to the temporary prefix"
fi

# Runs a command with the toolchain out of reach: a minimal environment whose loader path is
# only the prefix's lib, and — when a private mount namespace is available — an empty
# read-only tmpfs over the toolchain's root, so that nothing in it can be loaded at all.
hide=()
if [[ -n $toolchain_root && -d $toolchain_root ]] && unshare --mount --propagation private \
    sh -c "mount -t tmpfs -o ro,size=4k none '$toolchain_root' && test -z \"\$(ls -A '$toolchain_root')\"" 2>/dev/null; then
    hide=(unshare --mount --propagation private sh -c "mount -t tmpfs -o ro,size=4k none '$toolchain_root' && exec \"\$@\"" sh)
    pass "the toolchain ($toolchain_root) is hidden by an empty tmpfs in a private mount namespace"
else
    info "unshare/mount not available: relying on the clean environment and the ldd checks"
fi
cat >"$work/no-toolchain.sh" <<EOF
#!/usr/bin/env bash
# Generated by Tests/install/run.sh: run "\$@" with nothing of the Swift toolchain reachable.
exec ${hide[@]+$(printf '%q ' "${hide[@]}")} env -i PATH='$clean_path' HOME="\$HOME" \\
    XDG_RUNTIME_DIR="\$XDG_RUNTIME_DIR" DBUS_SESSION_BUS_ADDRESS="\$DBUS_SESSION_BUS_ADDRESS" \\
    LD_LIBRARY_PATH='$prefix/lib' PYTHONPATH='$pydir' PYTHONDONTWRITEBYTECODE=1 "\$@"
EOF
chmod +x "$work/no-toolchain.sh"
if out=$("$work/no-toolchain.sh" "$app" version 2>&1); then
    pass "app version: $out"
else
    fail "app version: $out"
fi

section "the GNOME API in $prefix, outside the build tree"
gnome_check_prefix

section "the CMake package and the Qt 6 API in $prefix, outside the build tree"
cmake_check_prefix "$prefix"

section "Python wheel: pip wheel ./python, installed into a fresh venv with the library in its prefix"
if [[ -f python/pyproject.toml ]]; then
    # A copy of python/: an in-tree setuptools build writes build/ and *.egg-info next to the sources.
    rm -rf "$work/pysrc" "$work/wheel" "$work/venv" "$work/outside"
    cp -r python "$work/pysrc"
    if "$system_python" -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/wheel" "$work/pysrc" >"$log" 2>&1; then
        whl=$(ls "$work/wheel"/portal_keyring-*.whl 2>/dev/null | head -n1)
        contents=$("$system_python" -m zipfile -l "$whl" 2>/dev/null | awk '{print $1}')
        if grep -qx portal_keyring/py.typed <<<"$contents" && grep -qx portal_keyring/__init__.py <<<"$contents"; then
            pass "pip wheel: $(basename "$whl") holds portal_keyring/ and py.typed"
        else
            fail "the wheel lacks portal_keyring/__init__.py or py.typed: $(tr '\n' ' ' <<<"$contents")"
        fi
        if "$system_python" -m venv "$work/venv" >"$log" 2>&1 &&
            "$work/venv/bin/python" -m pip install --quiet --no-index --no-deps "$whl" >>"$log" 2>&1; then
            pass "the wheel installs into a fresh venv ($work/venv)"
            cp -a "$prefix/lib"/libportal-keyring.so* "$work/venv/lib/"
            mkdir -p "$work/outside"
            cp examples/python/restore_on_launch.py "$work/outside/"
        else
            sed 's/^/  | /' "$log" | tail -n 20
            fail "cannot install the wheel into a venv"
        fi
    else
        sed 's/^/  | /' "$log" | tail -n 20
        fail "pip wheel ./python failed"
    fi
fi

section "make install PREFIX=\$VIRTUAL_ENV in an active venv: the Python package is the venv's"
# docs/python.md: make install PREFIX=$VIRTUAL_ENV installs the module for the venv's
# python (the Makefile's PYTHON follows VIRTUAL_ENV), and its library into the venv's lib/.
mkvenv=$work/make-venv
if "$system_python" -m venv "$mkvenv" >"$log" 2>&1 &&
    VIRTUAL_ENV=$mkvenv PATH=$mkvenv/bin:$PATH make install PREFIX="$mkvenv" >>"$log" 2>&1; then
    found=$(cd "$work" && env -u PYTHONPATH -u PORTAL_KEYRING_LIBRARY -u LD_LIBRARY_PATH "$mkvenv/bin/python" -c \
        'import portal_keyring as pk; print(pk.__file__); print(pk.library_path)' 2>&1)
    module=$(sed -n 1p <<<"$found") library=$(sed -n 2p <<<"$found")
    if [[ $module == "$mkvenv"/lib/python3*/site-packages/portal_keyring/__init__.py &&
        $library == "$mkvenv"/lib/libportal-keyring.so* ]]; then
        pass "the venv's python imports portal_keyring from the venv ($module, library $library)"
    else
        fail "the venv's python after make install PREFIX=\$VIRTUAL_ENV: $found"
    fi
else
    sed 's/^/  | /' "$log" | tail -n 20
    fail "python3 -m venv or make install PREFIX=\$VIRTUAL_ENV failed"
fi

env_id="install-test-$$-$RANDOM"
user="end-user-$RANDOM"
token="cst-install-$RANDOM-$RANDOM"
cat >"$work/keyring-steps.sh" <<EOF
#!/usr/bin/env bash
# Generated by Tests/install/run.sh: runs inside scripts/with-keyring.sh; one line per step,
# "<exit status> <step>: <output>".
nt='$work/no-toolchain.sh'
step() {
    local name=\$1 out rc
    shift
    out=\$("\$@" 2>&1)
    rc=\$?
    out=\$(tr '\n' ' ' <<<"\$out")
    out=\${out%% }
    printf '%s %s%s\n' "\$rc" "\$name" "\${out:+: \$out}"
}
if [[ -n '${hide[*]+x}' ]]; then
    step "the toolchain is unreachable ($toolchain_root is empty for these programs)" "\$nt" sh -c '! ls -A "$toolchain_root" | grep -q .'
fi
step "app persist" "\$nt" '$app' persist '$env_id' '$user' '$token'
step "app restore (another process)" "\$nt" '$app' restore '$env_id' '$user' '$token'
if [[ -f '$pydir/portal_keyring/__init__.py' ]]; then
    step "python3: import the installed package, restore" "\$nt" '$system_python' -c '
import os, sys, portal_keyring as pk
maps = open("/proc/self/maps").read()
assert "$prefix/lib/$realname" in maps, "not loaded from the prefix: " + pk.library_path
assert pk.library_version() == "$version", pk.library_version()
with pk.PortalAuth("$env_id", "portal-install-test://auth/callback") as auth:
    s = auth.restore_session()
    assert s is not None and s.end_user_id == "$user", s
print("module", pk.__file__, "library", pk.library_path, pk.library_version(), "restored", s.end_user_id)
'
    # No LD_LIBRARY_PATH, no PYTHONPATH, no PORTAL_KEYRING_LIBRARY: the package finds the
    # library installed in its own prefix (step 2 of the search order), not through the loader path.
    step "python3 without any environment variable: the package loads $prefix/lib's library" \
        "\$nt" env -u LD_LIBRARY_PATH -u PYTHONPATH -u PORTAL_KEYRING_LIBRARY '$system_python' -c '
import sys
sys.path.insert(0, "$pydir")
import portal_keyring as pk
assert pk.__file__.startswith("$pydir/"), pk.__file__
assert pk.library_path == "$prefix/lib/libportal-keyring.so.0", pk.library_path
with pk.PortalAuth("$env_id", "portal-install-test://auth/callback") as auth:
    s = auth.restore_session()
    assert s is not None and s.end_user_id == "$user", s
print("no environment: library", pk.library_path, "restored", s.end_user_id)
'
fi
if [[ -x '$work/venv/bin/python' ]]; then
    # The wheel in a fresh venv whose prefix holds the installed library: the example, copied out
    # of the repository, run from outside it (first launch clears; the next launch restores).
    step "wheel in a venv: restore_on_launch.py outside the repository restores" \
        "\$nt" env -u LD_LIBRARY_PATH -u PYTHONPATH sh -c '
cd "$work/outside" &&
XDG_STATE_HOME="$work/outside/state" "$work/venv/bin/python" restore_on_launch.py "$env_id-wheel"; test \$? = 1 &&
"$work/venv/bin/python" -c "import portal_keyring as pk, sys
with pk.PortalAuth(sys.argv[1], \"example-app://portal/redirect\") as a: a.persist_session(sys.argv[2], sys.argv[3]).close()
print(\"venv module\", pk.__file__, \"library\", pk.library_path)" "$env_id-wheel" "$user" "$token" &&
XDG_STATE_HOME="$work/outside/state" "$work/venv/bin/python" restore_on_launch.py "$env_id-wheel"'
fi
if [[ -x '$prefix/bin/portal-session' ]]; then
    step "portal-session restore" "\$nt" '$prefix/bin/portal-session' --env '$env_id' \\
        --redirect-url portal-install-test://auth/callback restore
fi
$(gnome_keyring_steps)
step "app clear" "\$nt" '$app' clear '$env_id'
EOF
chmod +x "$work/keyring-steps.sh"
steps=$(scripts/with-keyring.sh "$work/keyring-steps.sh" 2>&1)
krc=$?
if ((krc == 125)); then
    printf '%s\n' "$steps" | sed 's/^/  | /'
    fail "scripts/with-keyring.sh could not start the private keyring"
fi
while IFS= read -r line; do
    [[ $line =~ ^([0-9]+)\ (.*)$ ]] || { [[ -n $line ]] && info "$line"; continue; }
    rc=${BASH_REMATCH[1]} what=${BASH_REMATCH[2]}
    if [[ $what == "portal-session restore:"* ]]; then
        if ((rc == 0)) && [[ $what == *"$user"* ]]; then pass "$what"; else fail "exit $rc: $what"; fi
    elif ((rc == 0)); then
        pass "$what"
    else
        fail "exit $rc: $what"
    fi
done <<<"$steps"
if grep -qF -- "$token" <<<"$steps"; then fail "a token was printed"; fi
if [[ -x $prefix/bin/portal-session ]]; then
    if ldd "$prefix/bin/portal-session" 2>&1 | grep -qE "not found|$toolchain_pat"; then
        fail "portal-session depends on the Swift toolchain or has unresolved libraries"
    else
        pass "ldd portal-session: nothing from the Swift toolchain"
    fi
fi

# ------------------------------------------------------------------------------ ABI

section "ABI (abidiff against abi/portal-keyring.abi)"
if make abi-check >"$log" 2>&1; then
    pass "$(grep -E '^abi.sh: ABI compatible' "$log" | sed 's/^abi.sh: //')"
    if grep -q 'compatible additions' "$log"; then
        sed -n '/compatible additions/,$p' "$log" | grep -E "^\s+\[A\]|Added" | sed 's/^ */  info  /'
        info "regenerate the baseline with 'make abi-baseline' when these additions are released"
    fi
else
    sed 's/^/  | /' "$log" | grep -vE '^\s*\|\s*(cc|abidw|build-support|\s)' | tail -n 40
    fail "the ABI is not compatible with abi/portal-keyring.abi (see docs/ABI.md)"
fi
probe_syms=$(nm -D --defined-only "build/make/abi/$soname" 2>/dev/null | awk '$2 ~ /^[A-Z]$/ { print $3 }' | sort -u)
if [[ $probe_syms == "$exported" ]]; then
    pass "the ABI probe and the installed library export the same $nexported functions"
else
    fail "the ABI probe's exports differ from the library's"
fi

# ------------------------------------------------------------------------------ measurements

section "measurements (informational)"
info "$realname: $(stat -c %s "$lib") bytes installed (stripped); .text $(size -A "$lib" | awk '$1 == ".text" { print $2 }') bytes"
info "exported dynamic symbols: $nexported"
info "ldd: $(awk '$1 !~ /^linux-vdso/ { print $1 }' <<<"$ldd_out" | tr '\n' ' ')"
if cc -O2 -o "$work/load_time" Tests/install/load_time.c -ldl 2>"$log"; then
    cat >"$work/bench.sh" <<EOF
#!/usr/bin/env bash
nt='$work/no-toolchain.sh'
"\$nt" '$app' persist load-time-env load-time-user load-time-token >/dev/null || exit 1
for i in 1 2 3 4 5 6 7; do
    "\$nt" '$work/load_time' portal '$prefix/lib/$soname' load-time-env
    "\$nt" '$work/load_time' secret libsecret-1.so.0 load-time-env
done
"\$nt" '$app' clear load-time-env >/dev/null
EOF
    chmod +x "$work/bench.sh"
    if bench=$(scripts/with-keyring.sh "$work/bench.sh" 2>&1); then
        median() { sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "?") }'; }
        for m in portal secret; do
            line="$m:"
            for field in dlopen_us first_call_us restore_us; do
                line+=" $field $(grep "^$m " <<<"$bench" | sed -nE "s/.* $field=([0-9]+).*/\1/p" | median)"
            done
            info "$line (median of 7)"
        done
        info "(portal = dlopen libportal-keyring, portal_keyring_version_number(), portal_auth_new +"
        info " portal_auth_restore_session; secret = dlopen libsecret-1, secret_schema_ref(),"
        info " secret_password_lookup_sync of the same item)"
    else
        info "load-time measurement failed: $bench"
    fi
else
    info "load_time.c did not compile: $(cat "$log")"
fi

# ------------------------------------------------------------------------------ uninstall

section "make uninstall PREFIX=$prefix"
if make uninstall PREFIX="$prefix" >"$log" 2>&1; then
    left=$(find "$prefix" ! -type d 2>/dev/null | sed "s|^$prefix/||")
    if [[ -z $left ]]; then pass "every installed file was removed"; else fail "left behind: $(tr '\n' ' ' <<<"$left")"; fi
    gnome_expect_removed "$prefix"
else
    sed 's/^/  | /' "$log" | tail -n 20
    fail "make uninstall PREFIX=... failed"
fi

harness_summary install/run.sh
