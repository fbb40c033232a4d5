#!/usr/bin/env bash
# Tests/gobject/run.sh — the GNOME API (libportal-keyring-gobject-1.so, PortalKeyring-1) from C,
# GJS, PyGObject and Vala, against the private keyring.
#
#   scripts/with-keyring.sh scripts/with-portal-api.sh Tests/gobject/run.sh
#
# Builds the library, the .gir/.typelib and the .vapi (make gobject: any g-ir-scanner warning or
# undocumented symbol fails it), then runs, each bounded in time, with its output in
# build/gobject/NAME.log:
#   gobject_test      (C) construction errors, restore / persist / clear in the three forms,
#                     signed out vs a stopped provider, cancels, completion contexts, finalisation
#   watch_test        (C) PortalKeyringWatch: another process's sign-in and sign-out as "changed"
#                     on the maker's context; start, stop and unref with the provider stopped
#   portal_test       (C) the Portal: requests, a 401 invalidating once on the construction's
#                     context, a late handler, cancels with the API slow, finalisation
#   signin_test       (C) the sign-in configuration properties, the operations that start a
#                     sign-in against the fake Portal API, refused arguments, cancels
#   redirect_test     (C) a magic link and a TOTP sign-in through handle_redirect and
#                     verify_totp to the session a restore finds
#   end_user_test     (C) another end user's sign-in over a stored one: DIFFERENT_END_USER, then
#                     REPLACE_END_USER on the same auth replaces it; verify_totp's check
#   desktop_test      (C) sign_in_with_google / _apple: GIO opens Tests/tools/fake_browser.sh, the
#                     redirect through handle_redirect to the session a restore finds, a cancel,
#                     the redirect completed by the URL handler's process (portal-session)
#   memscan_test      (C) no copy of the token in memory once the objects that held it are
#                     finalised (every operation, _async and _sync, on the main thread and on a
#                     worker with its own context); a handler's closure holding its portal
#   each C test under valgrind (when installed): no leak, no invalid access (memcheck)
#   gjs_test.js       gjs -m, Gio._promisify and await
#   pygobject_test.py PyGObject with callbacks on a GLib.MainLoop
#   vala_test.vala    valac --pkg portal-keyring-gobject-1 (the generated .vapi), async/yield
#   {gjs,pygobject,vala}_watch_test  PortalKeyring.Watch in each language: another process's
#                     sign-in and sign-out as "changed"; a loop that never stalls on a stopped provider
#   the examples of docs/gnome.md  each language's first example (GJS, PyGObject, Vala, C), and
#                     python/README.md's PyGObject one, taken from the page (doc_snippets.py),
#                     built as the page says and run signed out and signed in: they print exactly
#                     what the page promises
#   gnome_example     examples/gnome (GTK 4, libadwaita) on Xvfb, driven by its GApplication
#                     actions: magic link, TOTP, another process's sign-out, a slow API, a 401, its
#                     main loop never kept waiting (main_loop_probe.py); its window as a PNG
#   gnome_reference   make gobject-doc, the index in headless Chromium as a PNG
# Every program runs with G_DEBUG=fatal-warnings,fatal-criticals. A language whose tool is
# missing (gjs, valac, python3-gi) is skipped with a note. The library links against
# libportal-keyring.so in $PORTAL_KEYRING_LIBDIR (default .build/debug).
# Exits 1 if any check failed.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2
for var in DBUS_SESSION_BUS_ADDRESS PORTAL_TEST_KEYRING_PID PORTAL_TEST_API_URL; do
    [[ -n ${!var:-} ]] || { echo "gobject/run.sh: $var unset: run inside scripts/with-keyring.sh scripts/with-portal-api.sh" >&2; exit 2; }
done
# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"
export PORTAL_KEYRING_LIBDIR=${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}
out=$repo/build/gobject
mkdir -p "$out" || exit 2

section "build"
if make -s gobject >"$out/make.log" 2>&1; then
    ok "make gobject: library, PortalKeyring-1.gir and .typelib with no scanner warning, the .vapi"
else
    fail "make gobject (log: build/gobject/make.log)"
    detail "$(tail -n 20 "$out/make.log")"
    harness_summary "gobject/run.sh"
    exit 1
fi
read -r -a gio <<<"$(pkg-config --cflags --libs gio-2.0)"
c_tests=(gobject_test watch_test portal_test signin_test redirect_test end_user_test desktop_test memscan_test)
# Sources of Tests/c that a program links beside its own file.
declare -A c_sources=(
    [memscan_test]="Tests/c/memscan_test/marker.c Tests/c/memscan_test/scan.c Tests/c/memscan_test/support.c"
)
# desktop_test registers it as the browser, in the private XDG directories; the browser hands a
# redirect to the URL handler's process, portal-session handle-redirect (PORTAL_SESSION_BIN, else
# the one beside the C library).
export PORTAL_TEST_FAKE_BROWSER=$repo/Tests/tools/fake_browser.sh
cli=${PORTAL_SESSION_BIN:-$PORTAL_KEYRING_LIBDIR/portal-session}
[[ -x $cli ]] || cli=$repo/.build/debug/portal-session
export PORTAL_TEST_CLI=$cli
for program in "${c_tests[@]}"; do
    read -r -a shared <<<"${c_sources[$program]:-}"
    check_quiet "$program compiles (C11, warnings as errors)" \
        gcc -std=c11 -g -O1 -Wall -Wextra -Werror -IInclude -ITests/c "Tests/gobject/$program.c" \
        "${shared[@]}" -o "$out/$program" "${gio[@]}" -L"$out" -lportal-keyring-gobject-1 -L"$PORTAL_KEYRING_LIBDIR" \
        -lportal-keyring -Wl,-rpath,"$out:$PORTAL_KEYRING_LIBDIR"
done

# A GLib warning or critical from the layer (an out-of-range property, a GTask misuse) aborts the
# program that meets it, instead of scrolling by.
export G_DEBUG=fatal-warnings,fatal-criticals

section "C"
for program in "${c_tests[@]}"; do
    run_logged "$program" 120 "$out/$program"
done
if command -v valgrind >/dev/null; then
    # --errors-for-leak-kinds=definite: GLib's type system keeps its classes for the life of the
    # process ("possibly lost" / "still reachable"), which is not a leak of this layer. The
    # suppressions are the Swift runtime's (Tests/gobject/valgrind.supp says why). The children
    # that GIO forks to launch the test browser (desktop_test) are not judged: a fork of a
    # threaded process "loses" the other threads' memory when it exits.
    for program in "${c_tests[@]}"; do
        run_logged "$program-valgrind" 600 valgrind --quiet --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=yes \
            --suppressions=Tests/gobject/valgrind.supp --child-silent-after-fork=yes "$out/$program"
    done
else
    skip "valgrind not installed"
fi

export GI_TYPELIB_PATH=$out${GI_TYPELIB_PATH:+:$GI_TYPELIB_PATH}
export LD_LIBRARY_PATH=$out:$PORTAL_KEYRING_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

section "GJS"
if command -v gjs >/dev/null; then
    run_logged gjs_test 120 gjs -m Tests/gobject/gjs_test.js
    run_logged gjs_watch_test 120 gjs -m Tests/gobject/gjs_watch_test.js
else
    skip "gjs not installed (Debian: gjs)"
fi

section "PyGObject"
if /usr/bin/python3 -c 'import gi' 2>/dev/null; then
    run_logged pygobject_test 120 /usr/bin/python3 Tests/gobject/pygobject_test.py
    run_logged pygobject_watch_test 120 /usr/bin/python3 Tests/gobject/pygobject_watch_test.py
else
    skip "python3-gi not installed"
fi

section "Vala"
if command -v valac >/dev/null; then
    # What a getter may return as NULL is nullable in the .vapi too (the metadata file), so Vala
    # code may compare it with null without a warning.
    for prop in api_host magic_link_from_email magic_link_template_id; do
        if grep -q "public string? $prop { get; construct; }" "$out/portal-keyring-gobject-1.vapi"; then
            ok "the .vapi's $prop is nullable (string?)"
        else
            fail "the .vapi's $prop is not nullable: $(grep " $prop {" "$out/portal-keyring-gobject-1.vapi")"
        fi
    done
    for prog in vala_test vala_watch_test; do
        if (cd "$out" && PKG_CONFIG_PATH=$out/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
            valac --vapidir "$out" --pkg portal-keyring-gobject-1 "$repo/Tests/gobject/$prog.vala" -o $prog \
            >"$out/$prog-build.log" 2>&1); then
            ok "$prog compiles with valac --pkg portal-keyring-gobject-1"
            run_logged $prog 120 "$out/$prog"
        else
            fail "$prog does not compile (log: build/gobject/$prog-build.log)"
            detail "$(tail -n 20 "$out/$prog-build.log")"
        fi
    done
else
    skip "valac not installed"
fi

section "The examples of docs/gnome.md"
# Each language's first example, as the page shows it (the block after its "<!-- run: LANG -->"
# line, only YOUR_AUTH_ENVIRONMENT_ID replaced: doc_snippets.py), and python/README.md's
# PyGObject one, built the way the page says and run with nothing stored, then after a session of
# a token the fake API issued was persisted for its auth environment: it must print exactly
# "signed out", then "signed in as END_USER", and nothing on stderr (no PyGIWarning, no GLib
# warning).
snip=$out/doc-examples
rm -rf "$snip" && mkdir -p "$snip" || exit 2
doc_env=gnome-doc-examples-$$
doc_user=doc-example-user
doc_names=()
declare -A doc_run=()
doc_example() { # NAME LANG PAGE FILE INSTALL-NOTE TEST...: PAGE's LANG block to $snip/FILE when TEST succeeds
    local name=$1 lang=$2 page=$3 file=$4 missing=$5
    shift 5
    if ! "$@" >/dev/null 2>&1; then
        skip "$name: $missing"
        return 1
    fi
    check_quiet "$page has one closed $lang example to run" \
        /usr/bin/python3 Tests/gobject/doc_snippets.py "$lang" "$doc_env" "$snip/$file" "$page" &&
        [[ -s $snip/$file ]]
}
doc_add() { doc_names+=("$1"); doc_run[$1]=$2; } # NAME COMMAND: a built example to run
doc_example "docs/gnome.md's GJS example" gjs docs/gnome.md restore.js "gjs not installed" command -v gjs &&
    doc_add "docs/gnome.md's GJS example" "gjs -m $snip/restore.js"
for page in docs/gnome.md python/README.md; do
    doc_example "$page's PyGObject example" python "$page" "${page//\//-}.py" "python3-gi not installed" \
        /usr/bin/python3 -c 'import gi' && doc_add "$page's PyGObject example" "/usr/bin/python3 $snip/${page//\//-}.py"
done
if doc_example "docs/gnome.md's Vala example" vala docs/gnome.md restore.vala "valac not installed" command -v valac; then
    # The page's way from a checkout: the .vapi's folder and the uninstalled .pc.
    if (cd "$snip" && PKG_CONFIG_PATH=$out/pkgconfig valac --vapidir "$out" --pkg portal-keyring-gobject-1 \
        restore.vala -o restore-vala >"$snip/vala-build.log" 2>&1) && ! grep -q 'warning:' "$snip/vala-build.log"; then
        ok "docs/gnome.md's Vala example compiles with valac --pkg portal-keyring-gobject-1, no warning"
        doc_add "docs/gnome.md's Vala example" "$snip/restore-vala"
    else
        fail "docs/gnome.md's Vala example does not compile cleanly (log: build/gobject/doc-examples/vala-build.log)"
        detail "$(head -n 20 "$snip/vala-build.log")"
    fi
fi
if doc_example "docs/gnome.md's C example" c docs/gnome.md restore.c "gcc not installed" command -v gcc; then
    read -r -a doc_pc <<<"$(PKG_CONFIG_PATH=$out/pkgconfig pkg-config --cflags --libs portal-keyring-gobject-1)"
    check_quiet "docs/gnome.md's C example compiles with pkg-config portal-keyring-gobject-1 (C11, warnings as errors)" \
        gcc -std=c11 -Wall -Wextra -Werror "$snip/restore.c" -o "$snip/restore-c" "${doc_pc[@]}"
    [[ -x $snip/restore-c ]] && doc_add "docs/gnome.md's C example" "$snip/restore-c"
fi
doc_examples_print() { # WANT STATE: each built example prints exactly WANT
    local name got
    for name in "${doc_names[@]}"; do
        # shellcheck disable=SC2086  # the command line with its arguments
        got=$(bounded 30 "$name" ${doc_run[$name]} 2>"$snip/stderr")
        if [[ $got == "$1" && ! -s $snip/stderr ]]; then
            ok "$name $2: prints '$1'"
        else
            fail "$name $2: wanted '$1' and nothing on stderr, printed '$got'"
            detail "stderr: $(head -n 10 "$snip/stderr")"
        fi
    done
}
if ((${#doc_names[@]} > 0)); then
    PORTAL_AUTH_ENVIRONMENT_ID=$doc_env "$cli" clear >/dev/null
    doc_examples_print "signed out" "with nothing stored"
    # A session the fake API issued, persisted as docs/testing.md shows it (the CLI, token on stdin).
    doc_token=$(/usr/bin/python3 Tests/gobject/fake_api_admin.py POST /_admin/sessions "{\"endUserId\": \"$doc_user\"}")
    if printf '%s\n' "$doc_token" | PORTAL_AUTH_ENVIRONMENT_ID=$doc_env PORTAL_API_HOST=$PORTAL_TEST_API_HOST \
        "$cli" persist --end-user-id "$doc_user" >/dev/null; then
        doc_examples_print "signed in as $doc_user" "with a session stored"
    else
        fail "portal-session persist for the examples' auth environment"
    fi
    PORTAL_AUTH_ENVIRONMENT_ID=$doc_env "$cli" clear >/dev/null
fi

section "GTK example and reference"
if command -v Xvfb >/dev/null && gjs -c "imports.gi.versions.Gtk = '4.0'; imports.gi.Adw" 2>/dev/null; then
    run_logged gnome_example 60 Tests/gobject/gnome_example_test.sh
else
    skip "examples/gnome: Xvfb, GTK 4 or libadwaita not installed (Debian: xvfb gir1.2-gtk-4.0 gir1.2-adw-1)"
fi
if command -v chromium >/dev/null; then
    run_logged gnome_reference 90 Tests/gobject/gnome_reference_test.sh
else
    skip "the reference's screenshot: chromium not installed (Debian: chromium)"
fi

harness_summary "gobject/run.sh"
