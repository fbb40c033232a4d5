# Tests/install/gnome.sh — sourced by Tests/install/run.sh: the GNOME API's part of the install
# test (libportal-keyring-gobject-1, PortalKeyring-1, its .pc and .vapi; docs/gnome.md).
#
#   gnome_expect_installed ROOT     the file layout under ROOT (PREFIX, or DESTDIR's /usr/local)
#   gnome_check_prefix              on run.sh's $prefix, with the build tree on no path: the library
#                                   has no rpath and needs libportal-keyring.so.MAJOR, ldd resolves
#                                   both to the prefix, the .gir names the soname; gnome_app.c
#                                   compiles with `pkg-config --cflags --libs portal-keyring-gobject-1`
#                                   and gnome_app.vala with `valac --pkg portal-keyring-gobject-1
#                                   --vapidir PREFIX/share/vala/vapi` (env -i, PKG_CONFIG_PATH only)
#   gnome_keyring_steps             step lines for run.sh's keyring-steps.sh: the C, Vala, GJS
#                                   (gjs -m) and PyGObject programs each get INVALID_ARGUMENT for a
#                                   blank id, then restore the session app.c persisted, with
#                                   GI_TYPELIB_PATH=PREFIX/lib/girepository-1.0 and
#                                   LD_LIBRARY_PATH=PREFIX/lib only
#   gnome_expect_removed ROOT       after make uninstall: no directory of ours left
# Uses run.sh's pass/fail/info, expect_file/expect_link, $here, $work, $log, $prefix, $major,
# $soname, $clean_path, $env_id, $user and $toolchain_pat.

# shellcheck shell=bash
gnome_name=portal-keyring-gobject-1
gnome_soname=lib$gnome_name.so.0

gnome_expect_installed() { # ROOT
    local root=$1 h
    expect_file "$root/lib/$gnome_soname" 755 "lib/$gnome_soname"
    expect_link "$root/lib/lib$gnome_name.so" "$gnome_soname" "lib/lib$gnome_name.so -> $gnome_soname"
    for h in Include/portal-keyring-gobject/*.h; do
        expect_file "$root/include/$gnome_name/portal-keyring-gobject/${h##*/}" 644 \
            "include/$gnome_name/portal-keyring-gobject/${h##*/}"
    done
    expect_file "$root/lib/pkgconfig/$gnome_name.pc" 644 "lib/pkgconfig/$gnome_name.pc"
    expect_file "$root/share/gir-1.0/PortalKeyring-1.gir" 644 "share/gir-1.0/PortalKeyring-1.gir"
    expect_file "$root/lib/girepository-1.0/PortalKeyring-1.typelib" 644 "lib/girepository-1.0/PortalKeyring-1.typelib"
    expect_file "$root/share/vala/vapi/$gnome_name.vapi" 644 "share/vala/vapi/$gnome_name.vapi"
    expect_file "$root/share/vala/vapi/$gnome_name.deps" 644 "share/vala/vapi/$gnome_name.deps"
}

gnome_check_prefix() {
    local lib=$prefix/lib/$gnome_soname dynamic out shared
    dynamic=$(readelf -d "$lib" 2>&1)
    if grep -qE '\((RUNPATH|RPATH)\)' <<<"$dynamic"; then
        fail "$gnome_soname has an rpath: $(grep -E 'RUNPATH|RPATH' <<<"$dynamic")"
    else
        pass "$gnome_soname: no RUNPATH/RPATH (the build tree's rpath is not installed)"
    fi
    if grep -qF "(NEEDED)             Shared library: [$soname]" <<<"$dynamic" &&
        grep -qF "(SONAME)             Library soname: [$gnome_soname]" <<<"$dynamic"; then
        pass "$gnome_soname: soname $gnome_soname, needs $soname"
    else
        fail "$gnome_soname: soname or DT_NEEDED wrong: $(grep -E 'NEEDED|SONAME' <<<"$dynamic" | tr -s ' ' | tr '\n' ' ')"
    fi
    out=$(env -i LD_LIBRARY_PATH="$prefix/lib" ldd "$lib" 2>&1)
    if grep -qE "$soname => $prefix/lib/$soname " <<<"$out" && ! grep -qE "not found|$toolchain_pat" <<<"$out"; then
        pass "ldd $gnome_soname: $soname from $prefix/lib, nothing missing, nothing from the toolchain"
    else
        fail "ldd $gnome_soname: $(tr '\n' ' ' <<<"$out")"
    fi
    shared=$(sed -nE 's/.*shared-library="([^"]*)".*/\1/p' "$prefix/share/gir-1.0/PortalKeyring-1.gir")
    if [[ $shared == "$gnome_soname" ]]; then
        pass "PortalKeyring-1.gir's shared-library is the soname ($shared)"
    else
        fail "PortalKeyring-1.gir's shared-library is '$shared', not $gnome_soname"
    fi
    mkdir -p "$work/gnome"
    cp "$here"/gnome_app.{c,js,py,vala} "$work/gnome/"
    # shellcheck disable=SC2016 # expanded by the inner shell
    if (cd "$work/gnome" && env -i PATH="$clean_path" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
        sh -c 'cc -Wall -Werror gnome_app.c $(pkg-config --cflags --libs '"$gnome_name"') -o gnome_app' >"$log" 2>&1); then
        pass "gnome_app.c compiles with only cc and pkg-config --cflags --libs $gnome_name"
    else
        sed 's/^/  | /' "$log"
        fail "compiling gnome_app.c against the installed $gnome_name.pc failed"
    fi
    if ! command -v valac >/dev/null; then
        info "valac not installed: the Vala program is skipped"
    elif (cd "$work/gnome" && env -i PATH="$clean_path" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
        valac --pkg "$gnome_name" --vapidir "$prefix/share/vala/vapi" -o gnome_app_vala gnome_app.vala >"$log" 2>&1); then
        pass "gnome_app.vala compiles with valac --pkg $gnome_name --vapidir PREFIX/share/vala/vapi"
    else
        sed 's/^/  | /' "$log"
        fail "valac against the installed .vapi failed"
    fi
}

# Printed into keyring-steps.sh (after "app persist", before "app clear"): each program must see
# INVALID_ARGUMENT and the session of $user.
gnome_keyring_steps() {
    local gi="env GI_TYPELIB_PATH='$prefix/lib/girepository-1.0'"
    printf 'step %q "$nt" %q %q %q\n' "GNOME API, C (gnome_app.c)" "$work/gnome/gnome_app" "$env_id" "$user"
    if [[ -x $work/gnome/gnome_app_vala ]]; then
        printf 'step %q "$nt" %q %q %q\n' "GNOME API, Vala (gnome_app.vala)" "$work/gnome/gnome_app_vala" "$env_id" "$user"
    fi
    if command -v gjs >/dev/null; then
        printf 'step %q "$nt" %s gjs -m %q %q %q\n' "GNOME API, GJS: gjs -m imports gi://PortalKeyring" \
            "$gi" "$work/gnome/gnome_app.js" "$env_id" "$user"
    fi
    if /usr/bin/python3 -c 'import gi' 2>/dev/null; then
        printf 'step %q "$nt" %s /usr/bin/python3 %q %q %q\n' "GNOME API, PyGObject: from gi.repository import PortalKeyring" \
            "$gi" "$work/gnome/gnome_app.py" "$env_id" "$user"
    fi
}

gnome_expect_removed() { # ROOT
    local left
    left=$(find "$1" -name "*$gnome_name*" -o -name 'PortalKeyring-1.*' 2>/dev/null)
    if [[ -z $left ]]; then
        pass "nothing of the GNOME API is left under $1 (files or directories)"
    else
        fail "left of the GNOME API: $(tr '\n' ' ' <<<"$left")"
    fi
}
