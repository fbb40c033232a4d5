#!/usr/bin/env bash
# Tests/c/build.sh — the one way a C test program is built against libportal-keyring.so.
#
#   Tests/c/build.sh PROGRAM [--out DIR] [--lib DIR]
#
# PROGRAM is a name of Tests/c (abi_test: every .c file of the folder Tests/c/abi_test/, or else
# Tests/c/abi_test.c, or else Tests/c/abi_test.cpp: C++17, the C++ API's tests), the path of a .c file (Tests/fault/slow_provider_test.c) or the path of a
# folder of them, one program (Tests/fault/fault_test). Builds DIR/NAME (DIR:
# default build/c) with the flags that every test program shares: C11, warnings as errors,
# Include/, threads, libdl, its symbols exported (-rdynamic: the library finds a program's fault
# injection seams with dlsym), GIO and GLib (the main-loop tests), and the library of DIR of
# --lib ($PORTAL_KEYRING_LIBDIR, default .build/debug), found at run time through an rpath.
# Prints nothing on success; the compiler's messages and a non-zero exit otherwise (2: bad usage).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage() {
    echo "usage: Tests/c/build.sh PROGRAM [--out DIR] [--lib DIR]" >&2
    exit 2
}

program=""
out=build/c
libdir=${PORTAL_KEYRING_LIBDIR:-$repo/.build/debug}
while (($#)); do
    case $1 in
    --out) [[ -n ${2:-} ]] || usage; out=$2; shift ;;
    --lib) [[ -n ${2:-} ]] || usage; libdir=$2; shift ;;
    -*) usage ;;
    *) [[ -z $program ]] || usage; program=$1 ;;
    esac
    shift
done
[[ -n $program ]] || usage

if [[ $program == *.c ]]; then
    sources=("$program")
    name=$(basename "$program" .c)
elif [[ $program == */* && -d $program ]]; then
    sources=("${program%/}"/*.c)
    name=$(basename "$program")
elif [[ -d $repo/Tests/c/$program ]]; then
    sources=("$repo/Tests/c/$program"/*.c)
    name=$program
elif [[ ! -f $repo/Tests/c/$program.c && -f $repo/Tests/c/$program.cpp ]]; then
    sources=("$repo/Tests/c/$program.cpp")
    name=$program
else
    sources=("$repo/Tests/c/$program.c")
    name=$program
fi
for source in "${sources[@]}"; do
    [[ -f $source ]] || { echo "build.sh: no source $source" >&2; exit 2; }
done
[[ -f $libdir/libportal-keyring.so ]] ||
    { echo "build.sh: $libdir/libportal-keyring.so not found (swift build, or --lib DIR)" >&2; exit 2; }
libdir=$(cd "$libdir" && pwd)
mkdir -p "$out" || exit 2

read -r -a gio <<<"$(pkg-config --cflags --libs gio-2.0)" || exit 2
compiler=(gcc -std=c11)
[[ ${sources[0]} == *.cpp ]] && compiler=(g++ -std=c++17)
exec "${compiler[@]}" -g -O1 -Wall -Wextra -Werror -I"$repo/Include" "${sources[@]}" -o "$out/$name" \
    -pthread -rdynamic -ldl "${gio[@]}" -L"$libdir" -lportal-keyring -Wl,-rpath,"$libdir"
