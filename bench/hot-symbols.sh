#!/usr/bin/env bash
# bench/hot-symbols.sh — regenerates build-support/hot-symbols.txt, the functions that loading the
# library and restoring a session run, in the order the linker is to lay them out (lld
# --symbol-ordering-file; Makefile LAYOUT_FLAGS). Why: the kernel maps a library's code in
# 64 KiB windows around each page a process touches, so the first restore's few hundred KiB of
# code, scattered over the library's 4.4 MB of text, made about 3.5 MiB of it resident; laid out
# together they make much less (bench/results.md).
#
#   make lib bin && bench/hot-symbols.sh     (writes build-support/hot-symbols.txt; commit it)
#   bench/hot-symbols.sh --out FILE          (the list as the code runs now, into FILE: the install
#                                             test compares it with the committed one)
#
# How: on a private keyring (scripts/with-keyring.sh, gnome-keyring), portal-session persists a
# session, then valgrind's callgrind runs bench/loadprobe.c (dlopen + portal_auth_new + restore +
# copy token + frees) against the unstripped release library and lists every function of the
# library that ran, in callgrind's order. Most of the Swift runtime's Swift.o is one 1.6 MB
# section (it is not built with -ffunction-sections): it moves as a whole, to where its first
# listed function is; its functions that ran stay scattered within it. (Leaving them out of the
# list, so that it goes after the hot code, measured worse: bench/results.md.)
# A stale list costs memory, not correctness: names that no longer exist are skipped by the linker.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
listing=$root/build-support/hot-symbols.txt
if [[ ${1:-} == --out && -n ${2:-} ]]; then
    listing=$(realpath -m -- "$2")
elif [[ $# -gt 0 ]]; then
    echo "usage: bench/hot-symbols.sh [--out FILE]" >&2
    exit 2
fi
lib=$root/.build/make/release/libportal-keyring.so
cli=$root/.build/make/release/portal-session
[[ -e $lib && -x $cli ]] || { echo "bench/hot-symbols.sh: run \`make lib bin\` first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench/hot-symbols.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
command -v swiftc >/dev/null || export PATH=/opt/swift/usr/bin:$PATH
out=$root/build/hot-symbols
rm -rf "$out"
mkdir -p "$out"
read -r -a secret_cflags <<<"$(pkg-config --cflags libsecret-1)"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$out/loadprobe" bench/loadprobe.c "${secret_cflags[@]}" -ldl

cat >"$out/run.sh" <<'SH'
set -euo pipefail
out=$1 lib=$2 cli=$3
printf 'cst_hot_symbols_0123456789\n' | "$cli" --env hot-symbols-env --redirect-url bench-app://portal/redirect \
    persist --end-user-id eu_hot >/dev/null
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$out/callgrind.out" \
    "$out/loadprobe" portal "$lib" hot-symbols-env >/dev/null 2>"$out/valgrind.log"
SH
scripts/with-keyring.sh --provider gnome-keyring -- bash "$out/run.sh" "$out" "$lib" "$cli"

python3 - "$out/callgrind.out" "$(basename "$lib")" >"$out/listing.tmp" <<'PY'
import re, sys
path, library = sys.argv[1], sys.argv[2]
names = {"ob": {}, "fn": {}}
def name(kind, spec):
    # callgrind compresses a repeated name to "(id)"; the first use is "(id) name".
    m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
    if not m:
        return spec
    if m.group(2) is not None:
        names[kind][m.group(1)] = m.group(2)
    return names[kind].get(m.group(1))
ob, seen = None, []
for line in open(path, encoding="utf-8", errors="replace"):
    line = line.rstrip("\n")
    key, _, spec = line.partition("=")
    if key == "ob":
        ob = name("ob", spec)
    elif key in ("cob", "cfn"):
        name(key[1:], spec)
    elif key == "fn":
        fn = (name("fn", spec) or "").split("'")[0]  # "f'2": callgrind's recursion depth
        if ob and ob.endswith("/" + library) and fn and not fn.startswith("0x") \
                and fn not in seen:
            seen.append(fn)
if len(seen) < 100:
    sys.exit(f"bench/hot-symbols.sh: only {len(seen)} functions of {library} ran; did the restore work?")
print("\n".join(seen))
PY
mv -f "$out/listing.tmp" "$listing"
echo "bench/hot-symbols.sh: $(wc -l <"$listing") functions in $listing" >&2
