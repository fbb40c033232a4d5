#!/usr/bin/env bash
# Tests/bindings/run.sh — build and run the Python and C++ bindings' tests and examples against
# libportal-keyring.so, inside a private keyring and the loopback Portal API.
#
#   swift build && scripts/with-keyring.sh scripts/with-portal-api.sh Tests/bindings/run.sh [BUILD_DIR]
#
# Must run inside BOTH wrappers (it stores, locks and deletes keyring items and issues/revokes
# CSTs on the fake API); it refuses to run otherwise. Steps:
#   1. pytest and mypy: imported, or installed (python3 -m pip install; as root, apt-get install
#      python3-pytest / python3-mypy as a fallback);
#   2. keyringctl ($PORTAL_TEST_KEYRINGCTL, else built into BUILD_DIR);
#   3. C++: Include/portal_keyring.hpp and portal_keyring_async.hpp compiled in two linked
#      translation units with g++ (and clang++ when found) -std=c++17 -Wall -Wextra -pedantic
#      -Werror (plus -Wshadow -Wconversion -Wsign-conversion -Wold-style-cast), then
#      examples/cpp/*.cpp and Tests/bindings/cpp_wrapper_test.cpp, and
#      Tests/c/cpp_async_test.cpp with every compiler and those flags (GLib's headers as
#      system headers; the C suite runs it, on every provider); BUILD_DIR defaults to build/bindings;
#   4. mypy --strict on python/portal_keyring, examples/python, Tests/python,
#      Tests/flatpak/python_restore.py and
#      Tests/bindings/typing/watch_good.py, and that it rejects watch_bad.py (mypy installed
#      like pytest when missing: pip, else apt-get install python3-mypy), then the pytest suite
#      Tests/python (python3 -m pytest -W error) with PYTHONPATH=python;
#   5. cpp_wrapper_test (the one built with CXX);
#   6. restore_on_launch end to end in Python, C++ and — as the reference — C
#      (examples/c/restore_on_launch.c): the same scenarios (first launch, restore, reinstall,
#      $HOME fallback, locked collection, no session bus, bad input), each run as a separate
#      process; checks exit codes, output lines and flag files, and that the Python and C++
#      transcripts equal the C one byte for byte (argv[0] aside).
# Environment: PORTAL_KEYRING_LIBDIR (default .build/debug), PYTHON (default python3), CXX
# (default g++). Every step runs even after a failure; exits 1 if any check failed, 2 if the
# environment is wrong.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
me="Tests/bindings/run.sh"

die() {
    printf '%s: error: %s\n' "$me" "$*" >&2
    exit 2
}

for var in DBUS_SESSION_BUS_ADDRESS PORTAL_TEST_KEYRING_DIR PORTAL_TEST_KEYRING_PID PORTAL_TEST_KEYRING_PASSWORD; do
    [[ -n ${!var:-} ]] || die "$var is not set: run me as  scripts/with-keyring.sh scripts/with-portal-api.sh $me"
done
for var in PORTAL_TEST_API_URL PORTAL_TEST_API_HOST; do
    [[ -n ${!var:-} ]] || die "$var is not set: run me as  scripts/with-keyring.sh scripts/with-portal-api.sh $me"
done
kill -0 "$PORTAL_TEST_KEYRING_PID" 2>/dev/null ||
    die "gnome-keyring-daemon (PORTAL_TEST_KEYRING_PID=$PORTAL_TEST_KEYRING_PID) is not running"

build=${1:-$repo/build/bindings}
mkdir -p "$build" || die "cannot create $build"
build=$(cd "$build" && pwd)
libdir=${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}
[[ -f $libdir/libportal-keyring.so ]] ||
    die "$libdir/libportal-keyring.so not found (run 'swift build' first, or set PORTAL_KEYRING_LIBDIR)"
libdir=$(cd "$libdir" && pwd)
lib=$libdir/libportal-keyring.so
python=${PYTHON:-python3}
cxx=${CXX:-g++}
export PORTAL_KEYRING_LIBRARY=$lib PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$repo/python${PYTHONPATH:+:$PYTHONPATH}

# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"

# ------------------------------------------------------------------------------- tools

section "tools (library: $lib)"
if "$python" -c 'import pytest' 2>/dev/null; then
    pass "pytest $("$python" -c 'import pytest; print(pytest.__version__)') is installed"
else
    printf '  ..    pytest is missing: installing it\n'
    "$python" -m pip install --quiet pytest >"$build/pip.log" 2>&1 ||
        { [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null &&
            apt-get install -y -qq python3-pytest >"$build/apt.log" 2>&1; } || true
    if "$python" -c 'import pytest' 2>/dev/null; then
        pass "pytest installed"
    else
        fail "cannot install pytest for $python (see $build/pip.log, $build/apt.log)"
    fi
fi

if "$python" -c 'import mypy' 2>/dev/null; then
    pass "mypy $("$python" -m mypy --version | awk '{print $2}') is installed"
else
    printf '  ..    mypy is missing: installing it\n'
    "$python" -m pip install --quiet mypy >"$build/pip-mypy.log" 2>&1 ||
        { [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null &&
            apt-get install -y -qq python3-mypy >"$build/apt-mypy.log" 2>&1; } || true
    if "$python" -c 'import mypy' 2>/dev/null; then
        pass "mypy installed"
    else
        fail "cannot install mypy for $python (see $build/pip-mypy.log, $build/apt-mypy.log)"
    fi
fi

kctl=${PORTAL_TEST_KEYRINGCTL:-}
if [[ -z $kctl || ! -x $kctl ]]; then
    kctl=$build/keyringctl
    # shellcheck disable=SC2046  # pkg-config output is a word list
    if gcc -O1 -Wall -Wextra -Werror -o "$kctl" "$repo/Tests/tools/keyringctl.c" $(pkg-config --cflags --libs libsecret-1); then
        pass "built keyringctl"
    else
        fail "cannot build keyringctl"
    fi
fi
export PORTAL_TEST_KEYRINGCTL=$kctl

# ------------------------------------------------------------------------------- C++ build

section "C++: build into $build"
strict=(-std=c++17 -Wall -Wextra -pedantic -Werror)
extra=(-Wshadow -Wconversion -Wsign-conversion -Wold-style-cast -Wnon-virtual-dtor -Wzero-as-null-pointer-constant)
# shellcheck disable=SC2054  # -Wl,-rpath,DIR is one argument
link=(-L"$libdir" -lportal-keyring -Wl,-rpath,"$libdir")
compilers=("$cxx")
if command -v clang++ >/dev/null 2>&1; then compilers+=(clang++); fi
printf '#include <portal_keyring.hpp>\n#include <portal_keyring_async.hpp>\nint tu_one(void);\nint tu_one(void) { return portal_keyring::library_matches_header() ? 0 : 1; }\n' >"$build/hpp_tu1.cpp"
printf '#include <portal_keyring_async.hpp>\n#include <portal_keyring.hpp>\n#include <portal_keyring_async.hpp>\nint tu_one(void);\nint main(void) { return tu_one(); }\n' >"$build/hpp_tu2.cpp"
for compiler in "${compilers[@]}"; do
    for std in c++17 c++20; do
        flags=("${strict[@]/-std=c++17/-std=$std}" "${extra[@]}")
        if "$compiler" "${flags[@]}" -I"$repo/Include" "$build/hpp_tu1.cpp" "$build/hpp_tu2.cpp" \
            -o "$build/hpp_check" "${link[@]}" 2>"$build/hpp_check.log" && "$build/hpp_check"; then
            pass "portal_keyring.hpp, portal_keyring_async.hpp: $compiler -std=$std ${strict[*]:1} ${extra[*]} (two TUs, linked, run)"
        else
            fail "portal_keyring.hpp with $compiler -$std: $(cat "$build/hpp_check.log")"
        fi
    done
done
cpp_built=1
compile() { # NAME SOURCE [EXTRA...]; COMPILER (default CXX) and FLAGS (default the strict ones) from the caller
    local name=$1 source=$2 with=${COMPILER:-$cxx} flags=("${strict[@]}")
    shift 2
    [[ -n ${FLAGS:-} ]] && read -ra flags <<<"$FLAGS"
    rm -f "$build/$name" # a failed build leaves no older program to run
    if "$with" "${flags[@]}" -I"$repo/Include" "$source" -o "$build/$name" "$@" "${link[@]}" 2>"$build/$name.log"; then
        pass "compiled ${source#"$repo"/} with $with (${flags[*]})"
    else
        fail "compile ${source#"$repo"/}: $(cat "$build/$name.log")"
        cpp_built=0
    fi
}
compile restore_on_launch_cpp "$repo/examples/cpp/restore_on_launch.cpp"
compile cpp_wrapper_test "$repo/Tests/bindings/cpp_wrapper_test.cpp" -pthread
# shellcheck disable=SC2207  # pkg-config output is a word list
glib=($(pkg-config --cflags glib-2.0 | sed 's/-I/-isystem /g') $(pkg-config --libs glib-2.0))
blocking_built=$cpp_built # cpp_async_test failing to build must not skip the blocking wrapper's steps
for compiler in "${compilers[@]}"; do
    COMPILER=$compiler FLAGS="${strict[*]} ${extra[*]}" compile "cpp_async_test.$(basename "$compiler")" \
        "$repo/Tests/c/cpp_async_test.cpp" -pthread "${glib[@]}"
done
cpp_built=$blocking_built
c_reference=1
if ! gcc -std=c99 -Wall -Wextra -pedantic -Werror -I"$repo/Include" "$repo/examples/c/restore_on_launch.c" \
    -o "$build/restore_on_launch_c" "${link[@]}" 2>"$build/restore_on_launch_c.log"; then
    fail "compile the C reference examples/c/restore_on_launch.c: $(cat "$build/restore_on_launch_c.log")"
    c_reference=0
fi

# ------------------------------------------------------------------------------- mypy

section "Python: mypy --strict on the package, the examples and the tests"
mypy_log=$build/mypy.log
if (cd "$repo" && MYPYPATH=$repo/python "$python" -m mypy --strict --no-incremental \
    python/portal_keyring examples/python Tests/python Tests/flatpak/python_restore.py \
    Tests/bindings/typing/watch_good.py) >"$mypy_log" 2>&1; then
    pass "mypy --strict: $(tail -n1 "$mypy_log")"
else
    sed 's/^/  | /' "$mypy_log" | tail -n 30
    fail "mypy --strict: $(tail -n1 "$mypy_log")"
fi
# The typing is precise, not Any: a misspelt attribute of a watch change is an error, at each of
# watch_bad.py's three uses (session_changes(), a watch() callback, a watch() lambda).
bad_log=$build/mypy-bad.log
(cd "$repo" && MYPYPATH=$repo/python "$python" -m mypy --strict --no-incremental \
    Tests/bindings/typing/watch_bad.py) >"$bad_log" 2>&1
bad_rc=$?
knd=$(grep -c 'has no attribute "knd"' "$bad_log")
if ((bad_rc == 1 && knd == 3)); then
    pass "mypy --strict rejects change.knd on session_changes() and watch() changes (3 of 3)"
else
    sed 's/^/  | /' "$bad_log" | tail -n 30
    fail "mypy --strict on watch_bad.py: exit $bad_rc, $knd of 3 uses of change.knd rejected"
fi

# ------------------------------------------------------------------------------- pytest

section "Python: pytest Tests/python ($("$python" --version 2>&1))"
pytest_log=$build/pytest.log
(cd "$repo" && "$python" -m pytest -q -p no:cacheprovider -W error Tests/python) 2>&1 | tee "$pytest_log" | sed 's/^/  | /'
pytest_rc=${PIPESTATUS[0]}
pytest_summary=$(grep -E '^[0-9]+ (passed|failed)|^(=+ )?[0-9]+ (passed|failed)' "$pytest_log" | tail -n1 | tr -d '=' | sed 's/^ *//;s/ *$//')
if ((pytest_rc == 0)); then
    pass "pytest: ${pytest_summary:-passed}"
else
    fail "pytest exited $pytest_rc: ${pytest_summary:-see $pytest_log}"
fi

# ------------------------------------------------------------------------------- C++ test

section "C++: cpp_wrapper_test"
if ((cpp_built)); then
    "$build/cpp_wrapper_test" 2>&1 | tee "$build/cpp_wrapper_test.log" | sed 's/^/  | /'
    cpp_rc=${PIPESTATUS[0]}
    cpp_summary=$(grep -E '^cpp_wrapper_test: ' "$build/cpp_wrapper_test.log" | tail -n1)
    if ((cpp_rc == 0)); then pass "$cpp_summary"; else fail "cpp_wrapper_test exited $cpp_rc: $cpp_summary"; fi
else
    fail "cpp_wrapper_test not run (build failed)"
fi

# ------------------------------------------------------------------------------- examples

schema=io.portalhq.PortalKeyring.Session
state_root=$build/example-state.$$
out=$build/example.out
err=$build/example.err
env_id="bindings-example-$$"
odd_id="bindings/odd id-$$"
locked=0
cleanup() {
    ((locked)) && "$kctl" unlock >/dev/null 2>&1
    "$kctl" delete-all auth_environment_id="$env_id" >/dev/null 2>&1
    "$kctl" delete-all auth_environment_id="$odd_id" >/dev/null 2>&1
    rm -rf "$state_root"
}
trap cleanup EXIT

persist() { # ENV_ID USER TOKEN: stores a session through the Python module (not the example)
    "$python" - "$1" "$2" "$3" <<'EOF' >/dev/null
import os, sys
sys.path.insert(0, os.path.join(os.environ["REPO"], "python"))
import portal_keyring as pk
with pk.PortalAuth(sys.argv[1], "example-app://portal/redirect") as auth:
    auth.persist_session(sys.argv[2], sys.argv[3]).close()
EOF
}
count() { "$kctl" count --schema "$schema" auth_environment_id="$1"; }
export REPO=$repo

# step RC DESCRIPTION [VAR=VALUE | -u VAR]... -- ARGS... : runs the example under test (with
# `env`), records the exit status, stdout and stderr in the transcript, and checks the status.
step() {
    local want=$1 what=$2 rc
    shift 2
    local envs=()
    while (($#)) && [[ $1 != -- ]]; do
        envs+=("$1")
        shift
    done
    shift
    env "${envs[@]}" "${example[@]}" "$@" >"$out" 2>"$err"
    rc=$?
    {
        printf '## %s\nexit %d\n-- stdout\n' "$what" "$rc"
        cat "$out"
        printf -- '-- stderr\n'
        sed -E 's/^usage: .* AUTH_ENVIRONMENT_ID$/usage: PROGRAM AUTH_ENVIRONMENT_ID/' "$err"
    } >>"$transcript"
    if ((rc == want)); then
        pass "$impl: $what (exit $rc)"
    else
        fail "$impl: $what: exit $rc, expected $want; stdout: $(cat "$out") stderr: $(cat "$err")"
    fi
}
expect_line() { # FILE LINE DESCRIPTION
    if grep -qxF -- "$2" "$1"; then pass "$impl: $3"; else fail "$impl: $3: no line '$2' in: $(cat "$1")"; fi
}
expect_match() { # FILE ERE DESCRIPTION
    if grep -qE -- "$2" "$1"; then pass "$impl: $3"; else fail "$impl: $3: nothing matches /$2/ in: $(cat "$1")"; fi
}
expect_empty() { # FILE DESCRIPTION
    if [[ ! -s $1 ]]; then pass "$impl: $2"; else fail "$impl: $2: $(cat "$1")"; fi
}
expect_count() { # ENV_ID N DESCRIPTION
    local n
    n=$(count "$1")
    if [[ $n == "$2" ]]; then pass "$impl: $3 (keyring items: $n)"; else fail "$impl: $3: $n items, expected $2"; fi
}
expect_file() { # PATH DESCRIPTION
    if [[ -f $1 ]]; then pass "$impl: $2"; else fail "$impl: $2: no file $1"; fi
}
expect_no_file() { # PATH DESCRIPTION
    if [[ ! -e $1 ]]; then pass "$impl: $2"; else fail "$impl: $2: $1 exists"; fi
}

scenarios() {
    cleanup
    mkdir -p "$state_root"
    : >"$transcript"
    local a=$state_root/a b=$state_root/b c=$state_root/c token1="cst-bind-$RANDOM-one"
    local flag_a=$a/portal-keyring-example/$env_id.launched
    local home_flag=$HOME/.local/state/portal-keyring-example/$env_id.launched

    step 2 "no arguments: usage" --
    expect_match "$err" '^usage: .* AUTH_ENVIRONMENT_ID$' "prints its usage"
    step 2 "a blank id is rejected" XDG_STATE_HOME="$a" -- "   "
    expect_match "$err" '^error: invalid argument \(1\): .*auth_environment_id' "error line names the argument"

    persist "$env_id" user-1 "$token1"
    step 1 "first launch (fresh XDG_STATE_HOME) clears the stored session" XDG_STATE_HOME="$a" -- "$env_id"
    expect_line "$out" "signed out — show sign-in" "first launch prints signed out"
    expect_empty "$err" "first launch writes nothing to stderr"
    expect_count "$env_id" 0 "the first launch deleted the stored session"
    expect_file "$flag_a" "flag created at \$XDG_STATE_HOME/portal-keyring-example/<id>.launched"
    step 1 "second launch is signed out" XDG_STATE_HOME="$a" -- "$env_id"

    persist "$env_id" user-2 "$token1"
    step 0 "restores a session stored by another process" XDG_STATE_HOME="$a" -- "$env_id"
    expect_line "$out" "restored session for end user user-2" "prints the end user"
    expect_empty "$err" "restore writes nothing to stderr"
    if grep -qF -- "$token1" "$out" "$err"; then fail "$impl: printed the token"; else pass "$impl: never prints the token"; fi
    step 0 "a later launch restores it again" XDG_STATE_HOME="$a" -- "$env_id"
    expect_count "$env_id" 1 "the session is still stored"

    step 1 "reinstall (another fresh XDG_STATE_HOME) clears the session" XDG_STATE_HOME="$b" -- "$env_id"
    expect_count "$env_id" 0 "reinstall launch deleted the session"

    persist "$env_id" user-3 "$token1"
    rm -f "$home_flag"
    step 1 "without XDG_STATE_HOME the flag lives under \$HOME/.local/state" -u XDG_STATE_HOME -- "$env_id"
    expect_file "$home_flag" "flag created under \$HOME/.local/state"
    step 1 "a relative XDG_STATE_HOME is ignored (\$HOME fallback)" XDG_STATE_HOME=relative/dir -- "$env_id"
    rm -f "$home_flag"

    persist "$odd_id" user-odd "$token1"
    step 1 "an id with '/' and a space: first launch" XDG_STATE_HOME="$a" -- "$odd_id"
    expect_file "$a/portal-keyring-example/bindings_odd id-$$.launched" "'/' in the id becomes '_' in the flag name"
    persist "$odd_id" user-odd "$token1"
    step 0 "an id with '/' and a space: restore" XDG_STATE_HOME="$a" -- "$odd_id"

    : >"$state_root/not-a-dir"
    step 2 "the state directory cannot be created" XDG_STATE_HOME="$state_root/not-a-dir" -- "$env_id"
    expect_match "$err" '^error: cannot create .*/not-a-dir/portal-keyring-example: Not a directory$' "error line names the directory"

    persist "$env_id" user-4 "$token1"
    if "$kctl" lock; then
        locked=1
        step 2 "first launch while locked: the clear fails" XDG_STATE_HOME="$c" -- "$env_id"
        expect_match "$err" '^error: session storage failure \(2\): .*locked' "error line: status, code and message"
        expect_empty "$out" "nothing on stdout when the clear failed"
        expect_no_file "$c/portal-keyring-example/$env_id.launched" "no flag when the clear failed"
        step 2 "restore while locked is an error, not signed out" XDG_STATE_HOME="$a" -- "$env_id"
        expect_match "$err" '^error: session storage failure \(2\): .*locked' "restore error line"
        expect_empty "$out" "restore while locked prints nothing on stdout"
        if "$kctl" unlock; then locked=0; else fail "$impl: keyringctl unlock"; fi
    else
        fail "$impl: keyringctl lock"
    fi
    expect_count "$env_id" 1 "nothing was deleted while locked"
    step 0 "after unlock the session restores" XDG_STATE_HOME="$a" -- "$env_id"
    expect_line "$out" "restored session for end user user-4" "same session after unlock"
    step 1 "the retried first launch clears now" XDG_STATE_HOME="$c" -- "$env_id"
    expect_file "$c/portal-keyring-example/$env_id.launched" "flag created on the successful retry"

    persist "$env_id" user-5 "$token1"
    step 2 "no session bus is an error" XDG_STATE_HOME="$a" DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent -- "$env_id"
    expect_match "$err" '^error: session storage failure \(2\): ' "no-bus error line"
    expect_count "$env_id" 1 "nothing changed without a bus"
}

impls=()
((c_reference)) && impls+=(c)
impls+=(python)
((cpp_built)) && impls+=(cpp)
for impl in "${impls[@]}"; do
    case $impl in
    c) example=("$build/restore_on_launch_c") ;;
    python) example=("$python" "$repo/examples/python/restore_on_launch.py") ;;
    cpp) example=("$build/restore_on_launch_cpp") ;;
    esac
    section "restore_on_launch end to end: $impl (separate processes)"
    transcript=$build/transcript.$impl
    scenarios
done

section "restore_on_launch: Python and C++ mirror the C example"
if ((c_reference)); then
    for impl in python cpp; do
        [[ -f $build/transcript.$impl ]] || continue
        if diff -u "$build/transcript.c" "$build/transcript.$impl" >"$build/transcript.$impl.diff"; then
            pass "$impl: exit codes, stdout and stderr equal the C example's in $(grep -c '^## ' "$build/transcript.c") runs"
        else
            fail "$impl differs from the C example: $(cat "$build/transcript.$impl.diff")"
        fi
    done
else
    fail "no C reference transcript (the C example did not build)"
fi

# ------------------------------------------------------------------------------- summary

harness_summary "$me" " (pytest: ${pytest_summary:-not run}; ${cpp_summary:-cpp_wrapper_test not run})"
