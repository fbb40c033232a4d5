#!/usr/bin/env bash
# bench/compare.sh — several builds of libportal-keyring.so side by side, in one run (each
# build option is judged against the build without it, measured together on this noisy
# shared machine).
#
#   bench/compare.sh [--rounds N] NAME=LIBRARY [NAME=LIBRARY ...]
#
# For every library: the stripped size, its relocation tables, and, on a private keyring
# (scripts/with-keyring.sh), in fresh processes with the order rotated every round:
#   load     dlopen + first restore and peak RSS (bench/loadprobe.c), minus raw libsecret's
#            dlopen + first lookup, beside the Swift-runtime floor (bench/build-floor.sh)
#   cold     examples/c/restore_on_launch.c run against that library (LD_LIBRARY_PATH), over the
#            raw libsecret C program (bench/raw_secret.c), as a ratio of medians
# The CLI that persists the session is build/make/bin/portal-session. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rounds=60
if [[ ${1:-} == --rounds ]]; then rounds=$2; shift 2; fi
(($# > 0)) || { echo "usage: bench/compare.sh [--rounds N] NAME=LIBRARY ..." >&2; exit 64; }
# shellcheck source=scripts/deps.sh
source scripts/deps.sh >/dev/null
out=build/compare
rm -rf "$out"
mkdir -p "$out"
read -r -a secret_cflags <<<"$(pkg-config --cflags libsecret-1)"
read -r -a secret_libs <<<"$(pkg-config --libs libsecret-1)"
cflags=(-std=gnu11 -O2 -Wall -Wextra -Werror)
cc "${cflags[@]}" -o "$out/loadprobe" bench/loadprobe.c "${secret_cflags[@]}" -ldl
cc "${cflags[@]}" -o "$out/raw_secret" bench/raw_secret.c "${secret_cflags[@]}" "${secret_libs[@]}"
floor=$root/$(bench/build-floor.sh "$out")
specs=()
for spec in "$@"; do
    name=${spec%%=*} lib=${spec#*=}
    [[ -f $lib && $name != "$spec" ]] || { echo "bench/compare.sh: $spec: not NAME=LIBRARY" >&2; exit 64; }
    soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
    mkdir -p "$out/$name"
    cp "$(readlink -f "$lib")" "$out/$name/${soname:-libportal-keyring.so}"
    ln -sf "${soname:-libportal-keyring.so}" "$out/$name/libportal-keyring.so"
    specs+=("$name=$root/$out/$name/libportal-keyring.so")
done
# The example links against the first library; LD_LIBRARY_PATH picks each one at run time.
first=${specs[0]#*=}
cc "${cflags[@]}" -o "$out/restore_on_launch" examples/c/restore_on_launch.c -I Include \
    -L "$(dirname "$first")" -lportal-keyring
sync
scripts/with-keyring.sh --provider gnome-keyring -- python3 bench/compare.py --bin "$root/$out" \
    --cli "$root/build/make/bin/portal-session" --floor "$floor" --rounds "$rounds" "${specs[@]}"
