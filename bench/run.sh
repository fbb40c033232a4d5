#!/usr/bin/env bash
# bench/run.sh — portal-keyring's benchmarks against raw libsecret, secret-tool and PyPI keyring.
#
#   bench/run.sh           full run (a few minutes): prints the table and writes bench/results.md
#   bench/run.sh --smoke   every benchmark for a few iterations (well under a minute), for CI:
#                          the table goes to stdout and build/bench/results-smoke.md
#
# Exit status: 0 when every benchmark program ran, whatever the timings (nothing here asserts
# on time); non-zero when a program could not be built or run, or the invalidation listener ran
# other than exactly once. If PyPI's keyring cannot be installed (no network), the two Python
# rows say NOT RUN and the exit status is not affected; so do the GNOME API's PyGObject and GJS
# rows when python3-gi or gjs is missing. Everything runs on a private keyring
# (scripts/with-keyring.sh: a throwaway dbus-daemon + gnome-keyring-daemon), never on yours.
#
# What is measured (bench/bench.py runs the figures; the C programs are in bench/):
#   warm restore / persist   C ABI vs secret_password_lookup_nonpageable_sync / _store_sync,
#                            one process, call by call alternating (bench/warm.c)
#   cold restore             examples/c/restore_on_launch.c vs a raw libsecret C program
#                            (bench/raw_secret.c); portal-session restore vs secret-tool lookup
#                            (whole processes, alternating: bench/spawnbench.c)
#   Python                   the ctypes package (python/portal_keyring) vs
#                            keyring.get_password with the SecretService backend (PyPI keyring,
#                            installed into build/bench/venv)
#   load cost                dlopen + first restore, and peak RSS, vs dlopen(libsecret) + first
#                            lookup, beside the Swift-runtime floor: a one-function Swift library
#                            built the same way (bench/floor/, bench/build-floor.sh), loaded and
#                            called once (bench/loadprobe.c); the stripped sizes of both
#   profile                  not here: bench/profile.sh (bytes by archive, pages, relocations)
#   invalidation             1000 threads reporting the same 401 at once: the listener must run
#                            exactly once; report→callback p50/p99 (bench/invalidate.c)
#   RSS drift                100,000 restore cycles in one process (bench/rss_cycles.c)
#   async restore            the non-blocking restore on a GMainLoop, completion included, vs the
#                            blocking call, alternating (median ratio, target ≤ 1.10×); and the
#                            largest gap of a 10 ms GLib timer while an async restore waits on an
#                            unlock prompt nobody answers, to its 30 s deadline (bench/async.c,
#                            keyringctl's stuck prompter)
#   watch                    persist returned in process A → event of a portal_auth_watch in process
#                            B, p50/p99 over 200 isolated rounds, next to a raw D-Bus signal A → B in
#                            the same run (target p50 ≤ 1.5×); the watch thread's wake-ups per minute
#                            over 60 s without changes (target 0) (bench/watch.c)
#   Flatpak sandbox          inside scripts/with-flatpak-sandbox.sh (bench/sandbox.py): cold
#                            `portal-session restore` vs `secret-tool lookup` (libsecret's file
#                            backend), alternating in one sandbox, runs over 3 s killed and counted
#                            (target ≤ 1.10×); warm restore (bench/warm.c in the sandbox) vs the host
#                            warm restore row (target ≤ 1.00×)
#   GNOME API                the GObject layer (libportal-keyring-gobject-1, PortalKeyring-1), built
#                            by `make gobject-lib gir` against the measured library into
#                            build/bench/gobject (bench/gi_figures.py): restore_session_sync +
#                            copy_token from PyGObject and from GJS (`gjs -m`) vs libsecret's
#                            Secret.password_lookup_sync in the same language and process,
#                            alternating (bench/gi_restore.py, bench/gi_restore.js; target ≤ 1.05×);
#                            its restore_session_async + _finish on a GMainLoop vs the C ABI's async
#                            restore, in C in one process (bench/gi_async.c; target ≤ 1.10×)
#
# Which build is measured: $PORTAL_BENCH_LIBRARY / $PORTAL_BENCH_CLI when set; otherwise the
# shipped build from the Makefile (build/make/lib/libportal-keyring.so, build/make/bin/
# portal-session: -static-stdlib), else .build/release/, else (--smoke only) .build/debug/. When
# none exists, the full run builds the shipped one (`make lib bin`, or `swift build -c release`
# without a Makefile) and the smoke run builds debug (`swift build`). The files are copied to
# build/bench/ first, so a rebuild during the run does not change what is measured.
#
# Environment: PYTHON (default python3) creates the venv; PORTAL_BENCH_KEYRING_REQ (default
# keyring==25.7.0) is what pip installs into it. PORTAL_BENCH_ONLY=WORD[,WORD…] runs only the
# figures whose step names contain a word (bench.py --only; e.g. GNOME for the three above); a full
# run of a subset writes build/bench/results-only.md, never bench/results.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

smoke=0
case "${1:-}" in
    "") ;;
    --smoke) smoke=1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "usage: bench/run.sh [--smoke]" >&2; exit 64 ;;
esac

note() { printf 'bench/run.sh: %s\n' "$*" >&2; }

# Debian packages (libsecret-1-dev, gnome-keyring, dbus-daemon, libsecret-tools, gcc, …) and
# swift on PATH, the same way the test command gets them.
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

out=build/bench
mkdir -p "$out/lib" "$out/bin"

# ------------------------------------------------------------------- the build to measure

first_existing() {
    local f
    for f in "$@"; do
        if [[ -e $f ]]; then
            printf '%s\n' "$f"
            return 0
        fi
    done
    return 1
}

lib_candidates=(build/make/lib/libportal-keyring.so .build/release/libportal-keyring.so)
cli_candidates=(build/make/bin/portal-session .build/release/portal-session)
if ((smoke)); then
    lib_candidates+=(.build/debug/libportal-keyring.so)
    cli_candidates+=(.build/debug/portal-session)
fi

lib=${PORTAL_BENCH_LIBRARY:-$(first_existing "${lib_candidates[@]}" || true)}
cli=${PORTAL_BENCH_CLI:-$(first_existing "${cli_candidates[@]}" || true)}
if [[ -z $lib || -z $cli ]]; then
    if ((smoke)); then
        note "no library/CLI build found; building debug (swift build)"
        swift build --product portal-keyring >&2
        swift build --product portal-session >&2
        lib=${lib:-.build/debug/libportal-keyring.so}
        cli=${cli:-.build/debug/portal-session}
    elif [[ -f Makefile ]] && grep -q '^lib:' Makefile; then
        note "no release build found; building the shipped one (make lib bin)"
        make lib bin >&2
        lib=${lib:-build/make/lib/libportal-keyring.so}
        cli=${cli:-build/make/bin/portal-session}
    else
        note "no release build found; building it (swift build -c release)"
        swift build -c release --product portal-keyring >&2
        swift build -c release --product portal-session >&2
        lib=${lib:-.build/release/libportal-keyring.so}
        cli=${cli:-.build/release/portal-session}
    fi
fi
for f in "$lib" "$cli"; do
    [[ -e $f ]] || { note "error: $f does not exist"; exit 2; }
done
newest_source=$(find Sources Include -type f -newer "$lib" -print -quit 2>/dev/null || true)
if [[ -n $newest_source ]]; then
    note "warning: $lib is older than $newest_source: the figures are of an older build"
fi

# Snapshot under its soname, so the programs below load exactly this file.
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
soname=${soname:-libportal-keyring.so}
rm -f "$out"/lib/libportal-keyring.so*
cp "$(readlink -f "$lib")" "$out/lib/$soname"
[[ $soname == libportal-keyring.so ]] || ln -s "$soname" "$out/lib/libportal-keyring.so"
cp "$(readlink -f "$cli")" "$out/bin/portal-session"
if ! "$out/bin/portal-session" --help >/dev/null 2>&1; then
    note "note: a copy of $cli does not run on its own; measuring it in place"
    bench_cli=$(readlink -f "$cli")
else
    bench_cli=$root/$out/bin/portal-session
fi
note "measuring $lib (as $out/lib/$soname) and $cli"

# ------------------------------------------------------------------------ the C programs

cflags=(-std=gnu11 -O2 -Wall -Wextra -Werror)
read -r -a secret_cflags <<<"$(pkg-config --cflags libsecret-1)"
read -r -a secret_libs <<<"$(pkg-config --libs libsecret-1)"
portal_link=(-I Include -L "$out/lib" -lportal-keyring "-Wl,-rpath,$root/$out/lib")

cc "${cflags[@]}" -o "$out/raw_secret" bench/raw_secret.c "${secret_cflags[@]}" "${secret_libs[@]}"
cc "${cflags[@]}" -o "$out/spawnbench" bench/spawnbench.c
cc "${cflags[@]}" -o "$out/loadprobe" bench/loadprobe.c "${secret_cflags[@]}" -ldl
cc "${cflags[@]}" -o "$out/warm" bench/warm.c "${portal_link[@]}" "${secret_cflags[@]}" "${secret_libs[@]}"
cc "${cflags[@]}" -pthread -o "$out/invalidate" bench/invalidate.c "${portal_link[@]}"
cc "${cflags[@]}" -o "$out/rss_cycles" bench/rss_cycles.c "${portal_link[@]}" "${secret_cflags[@]}" "${secret_libs[@]}"
cc "${cflags[@]}" -DBENCH_RAW_ONLY -o "$out/rss_cycles_raw" bench/rss_cycles.c "${secret_cflags[@]}" "${secret_libs[@]}"
cc "${cflags[@]}" -o "$out/restore_on_launch" examples/c/restore_on_launch.c "${portal_link[@]}"
read -r -a glib_flags <<<"$(pkg-config --cflags --libs glib-2.0)"
cc "${cflags[@]}" -o "$out/async" bench/async.c "${portal_link[@]}" "${glib_flags[@]}"
# The Swift-runtime floor: a one-function Swift library built the same way as ours.
floor=$root/$(bench/build-floor.sh "$out")
read -r -a gio_flags <<<"$(pkg-config --cflags --libs gio-2.0)"
cc "${cflags[@]}" -o "$out/watch" bench/watch.c "${portal_link[@]}" "${gio_flags[@]}"
cc "${cflags[@]}" -o "$out/keyringctl" Tests/tools/keyringctl.c "${secret_cflags[@]}" "${secret_libs[@]}"

# The GNOME API, built from this checkout against the measured library (its rpath and the
# introspection dump point at $out/lib); a failed build leaves --gi empty and its figures FAILED.
# The layer is relinked every run (the Makefile does not know the measured library changed); the
# .gir and .typelib, which describe only the layer's own sources, are not remade for that (-o).
gi_dir=""
gi_make=(make -s GOBJECT_OUT="$out/gobject" PORTAL_KEYRING_LIBDIR="$root/$out/lib")
gi_lib=$out/gobject/libportal-keyring-gobject-1.so.0
rm -f "$gi_lib"
if "${gi_make[@]}" gobject-lib >&2 && "${gi_make[@]}" -o "$gi_lib" gir >&2; then
    gi_dir=$root/$out/gobject
    cc "${cflags[@]}" -o "$out/gi_async" bench/gi_async.c -L "$out/gobject" -lportal-keyring-gobject-1 \
        "-Wl,-rpath,$gi_dir" "${portal_link[@]}" "${gio_flags[@]}"
else
    note "warning: make gobject-lib gir failed; the GNOME API figures are reported as failed"
fi

# -------------------------------------------------------- PyPI keyring (the Python baseline)

python=${PYTHON:-python3}
venv=$out/venv
req=${PORTAL_BENCH_KEYRING_REQ:-keyring==25.7.0}
bench_python=""
if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import keyring, secretstorage' 2>/dev/null; then
    bench_python=$root/$venv/bin/python
else
    note "installing $req from PyPI into $venv"
    rm -rf "$venv"
    if "$python" -m venv "$venv" >&2 &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$req" >&2 &&
        "$venv/bin/python" -c 'import keyring, secretstorage'; then
        bench_python=$root/$venv/bin/python
    else
        note "warning: could not install $req into $venv; the Python figures are reported as not run"
    fi
fi

# -------------------------------------------------------------------------------- run

args=(--bin "$root/$out" --lib "$root/$out/lib/libportal-keyring.so" --cli "$bench_cli" --python "$bench_python" --floor "$floor"
    --gi "$gi_dir" --only "${PORTAL_BENCH_ONLY:-}" --built-from "\`$lib\` and \`$cli\`")
if ((smoke)); then
    args+=(--smoke --out "$root/$out/results-smoke.md")
elif [[ -n ${PORTAL_BENCH_ONLY:-} ]]; then
    args+=(--out "$root/$out/results-only.md")
else
    args+=(--out "$root/bench/results.md")
fi
status=0
scripts/with-keyring.sh "$python" bench/bench.py "${args[@]}" || status=$?
if ((status != 0)); then
    note "a benchmark program failed (exit $status); see above"
fi
exit "$status"
