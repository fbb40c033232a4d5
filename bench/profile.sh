#!/usr/bin/env bash
# bench/profile.sh — where the bytes, pages and relocations of libportal-keyring.so come from,
# beside the Swift-runtime floor. Prints a markdown report on stdout (pasted into
# bench/results.md's history); writes its work files to build/profile/.
#
#   bench/profile.sh          profiles build/make/lib/libportal-keyring.so (run `make lib bin`
#                             first; the CLI persists the session the probes restore)
#
# What it does:
#   bytes       runs `make -s lib` (a relink at most) so that SwiftPM's manifest holds the
#               library's link command, relinks the library with that command (read from
#               .build/make/release.yaml) plus `-Map`, and sums the allocated input sections of
#               the map by archive (libswiftCore.a, libFoundationEssentials.a, …, ours) and by
#               kind of output section; `size -A` of the stripped file; the floor's total.
#   relocations `readelf -r` entries by type, of ours and of the floor, and the loader's own count
#               (LD_DEBUG=statistics: "final number of relocations") for one load + first call.
#   pages       bench/pagesprobe.c: /proc/self/smaps after dlopen and after the first call, per
#               mapping, for ours (one restore), the floor (one call) and raw libsecret (one
#               lookup), on a private keyring (scripts/with-keyring.sh); and the library's present
#               pages (/proc/self/pagemap) credited to archives and objects through the link map.
# Nothing here is timed; bench/run.sh measures time and peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/deps.sh
source scripts/deps.sh >/dev/null
out=build/profile
mkdir -p "$out"
lib=build/make/lib/libportal-keyring.so
cli=build/make/bin/portal-session
[[ -e $lib && -x $cli ]] || { echo "bench/profile.sh: run \`make lib bin\` first" >&2; exit 2; }
lib=$(readlink -f "$lib")
# SwiftPM's build manifest holds the command of the last `swift build`: make it the library's.
make -s lib >&2

# ---------------------------------------------------------------- the floor and the probe
floor=$(bench/build-floor.sh "$out")
read -r -a secret_cflags <<<"$(pkg-config --cflags libsecret-1)"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$out/pagesprobe" bench/pagesprobe.c "${secret_cflags[@]}" -ldl
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$out/loadprobe" bench/loadprobe.c "${secret_cflags[@]}" -ldl

# ------------------------------------------------------- relink with a map (same command)
python3 - "$out/portal-keyring.lldmap" "$out/libportal-keyring.mapped.so" <<'PY' >"$out/relink.args"
import json, sys
mapfile, output = sys.argv[1], sys.argv[2]
lines = open(".build/make/release.yaml", encoding="utf-8").read().splitlines()
for i, line in enumerate(lines):
    if line.strip().startswith('description: "Linking') and line.rstrip().endswith('/libportal-keyring.so"'):
        args = json.loads(lines[i + 1].split("args:", 1)[1])
        break
else:
    sys.exit("bench/profile.sh: no link command for libportal-keyring.so in .build/make/release.yaml")
args[args.index("-o") + 1] = output
args += ["-Xlinker", "-Map=" + mapfile]
print("\0".join(args), end="")
PY
mapfile -d '' -t relink <"$out/relink.args"
"${relink[@]}" >&2
strip --strip-unneeded -o "$out/libportal-keyring.mapped.stripped.so" "$out/libportal-keyring.mapped.so"

echo "## Profile $(date -u '+%Y-%m-%d %H:%M UTC') (bench/profile.sh, commit $(git rev-parse --short HEAD))"
echo
echo "Stripped: ours $(stat -c %s "$lib") bytes ($(readlink -f "$lib" | sed "s|$root/||")), the relinked copy" \
    "with a map $(stat -c %s "$out/libportal-keyring.mapped.stripped.so"), the floor" \
    "$(stat -c %s "$floor") bytes (bench/floor/floor.swift, built the same way)."
echo
echo "### Bytes by archive (allocated input sections of the link map; .bss included, though not in the file)"
echo
python3 - "$out/portal-keyring.lldmap" <<'PY'
import collections, os, re, sys
kinds = ("text", "metadata/rodata", "eh_frame", "data/relro/got", "other")
def kind(sec):
    if sec.startswith(".text") or sec in (".init", ".fini", ".plt"): return "text"
    if sec.startswith((".rodata", "swift5_", ".swift")): return "metadata/rodata"
    if sec.startswith(".eh_frame") or sec == ".gcc_except_table": return "eh_frame"
    if sec.startswith((".data", ".got", ".bss", ".tbss", ".tdata", ".init_array", ".fini_array")): return "data/relro/got"
    return "other"
by = collections.defaultdict(lambda: collections.Counter())
out_sec = None
total = 0
in_col = None
row = re.compile(r"^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+)\s+(\S.*)$")
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    line = line.rstrip("\n")
    if in_col is None:
        if "VMA" in line and " In " in line: in_col = line.index(" In ") + 1
        continue
    m = row.match(line)
    if not m: continue
    vma, size, rest, col = int(m.group(1), 16), int(m.group(3), 16), m.group(5), m.start(5)
    if col < in_col:            # an output section; the non-allocated ones are not loaded (and stripped)
        out_sec = rest.split()[0]
        if out_sec.startswith((".debug", ".comment", ".symtab", ".strtab", ".shstrtab", ".swift_ast")): out_sec = None
        continue
    if col > in_col or vma == 0 or out_sec is None or ":(" not in rest: continue   # a symbol, or not loaded
    src = rest.split(":(", 1)[0]
    a = re.search(r"([^/]+\.a)\(", src)
    if a: name = a.group(1)
    elif "<internal>" in src: name = "<linker-generated> (.dynsym, .rela.dyn, .got, …)"
    elif ".build/" in src and "/release/" in src: name = "ours: " + src.split("/release/")[-1].split("/")[0].replace(".build", "")
    else: name = os.path.basename(src)
    by[name][kind(out_sec)] += size
    total += size
rows = sorted(by.items(), key=lambda kv: -sum(kv[1].values()))
print("| archive / object | bytes | share | " + " | ".join(kinds) + " |")
print("|---|---|---|" + "---|" * len(kinds))
shown = 0
for name, c in rows[:16]:
    s = sum(c.values()); shown += s
    print("| %s | %d | %.1f%% | %s |" % (name, s, 100.0 * s / total, " | ".join(str(c[k]) for k in kinds)))
rest = total - shown
print("| (the %d others) | %d | %.1f%% | |" % (max(0, len(rows) - 16), rest, 100.0 * rest / total) + " |" * (len(kinds) - 1))
print("| **total** | %d | 100%% | |" % total + " |" * (len(kinds) - 1))
PY
echo
echo "### Sections of the stripped file (size -A, ≥ 64 KiB), ours and the floor"
echo
echo "| section | ours | floor |"
echo "|---|---|---|"
join -a1 -a2 -e 0 -o 0,1.2,2.2 \
    <(size -A "$lib" | awk 'NR>2 && $2 ~ /^[0-9]+$/ {print $1, $2}' | sort) \
    <(size -A "$floor" | awk 'NR>2 && $2 ~ /^[0-9]+$/ {print $1, $2}' | sort) |
    awk '$2 >= 65536 || $3 >= 65536 {printf "| %s | %d | %d |\n", $1, $2, $3}' | sort -t'|' -k3 -nr
echo
echo "### Relocations (readelf -r entries by type; loader count for one load + first call)"
echo
relocs() { readelf -rW "$1" | awk '$3 ~ /^R_X86_64_/ {n[$3]++} /^Relocation section .\.relr\.dyn/ {relr=1} END {for (t in n) printf "%s=%d ", t, n[t]}'; }
relr() {
    if readelf -SW "$1" | grep -q '\.relr\.dyn'; then
        # Its size in hex (field 6 after "[ n]" splits in two); Debian's awk (mawk) has no strtonum.
        local hex
        hex=$(readelf -SW "$1" | awk '/\.relr\.dyn/ {for (i = 1; i < NF; i++) if ($i == ".relr.dyn") print $(i + 4)}')
        echo " (+ packed .relr.dyn: $((16#${hex:-0})) bytes)"
    fi
}
echo "- ours: $(relocs "$lib")$(relr "$lib")"
echo "- floor: $(relocs "$floor")$(relr "$floor")"

# ------------------------------------------------------------- pages (on a private keyring)
# Freshly written files have dirty page-cache pages, which smaps counts as Private_Dirty even
# when only read: write them back first, so "dirty" means written by this process.
sync "$lib" "$floor" "$out/libportal-keyring.mapped.stripped.so"
cat >"$out/pages.sh" <<'SH'
set -euo pipefail
out=$1 lib=$2 floor=$3 cli=$4
printf 'cst_profile_token_0123456789\n' | "$cli" --env profile-env --redirect-url bench-app://portal/redirect \
    persist --end-user-id eu_profile >/dev/null
"$out/pagesprobe" portal "$lib" profile-env >"$out/pages-portal.txt"
"$out/pagesprobe" floor "$floor" >"$out/pages-floor.txt"
# The relinked copy, whose link map is known, for the pages-by-archive table.
PAGESPROBE_PAGES=$out/present "$out/pagesprobe" portal "$out/libportal-keyring.mapped.stripped.so" profile-env >/dev/null
"$out/pagesprobe" raw profile-env >"$out/pages-raw.txt" || true   # raw finds nothing: the lookup still runs
for side in portal floor raw; do
    case $side in portal) args=(portal "$lib" profile-env) ;; floor) args=(floor "$floor") ;; raw) args=(raw profile-env) ;; esac
    LD_DEBUG=statistics "$out/loadprobe" "${args[@]}" 2>&1 >/dev/null |
        sed -n 's/.*final number of relocations: *\([0-9]*\).*/\1/p' | tail -1 >"$out/ldstat-$side.txt" || true
done
SH
scripts/with-keyring.sh --provider gnome-keyring -- bash "$out/pages.sh" "$root/$out" "$lib" "$root/$floor" "$root/$cli" >&2
echo "- loader (LD_DEBUG=statistics, final number of relocations, whole process incl. libc):" \
    "ours $(cat "$out/ldstat-portal.txt"), floor $(cat "$out/ldstat-floor.txt"), raw libsecret $(cat "$out/ldstat-raw.txt")"
echo
echo "### Resident pages (KiB, /proc/self/smaps): after dlopen → after the first call"
echo
echo "Resident, not touched: the kernel maps file pages around each fault (fault-around, 64 KiB by default)."
echo "Dirty: pages this process wrote (relocations, .data, .bss, heap)."
echo
python3 - "$out" "$lib" "$root/$floor" <<'PY'
import collections, os, sys
out, lib, floor = sys.argv[1:4]
def load(side):
    st = collections.defaultdict(lambda: collections.Counter())
    peak = 0
    for line in open(os.path.join(out, "pages-%s.txt" % side)):
        p = line.split(None, 5)
        if p[0] == "peak": peak = int(p[1]); continue
        stage, rss, dirty, size, perms, path = p[0], int(p[1]), int(p[2]), int(p[3]), p[4], p[5].strip()
        if os.path.realpath(path) in (os.path.realpath(lib), os.path.realpath(floor)):
            group = "the library " + {"r--p": "(r--: headers, .rela.dyn, swift5 metadata, .eh_frame; relro after dlopen)", "r-xp": "(r-x: .text)", "rw-p": "(rw-: .data, .rodata in this layout, .bss)"}.get(perms, perms)
        elif "libstdc++" in path: group = "libstdc++"
        elif "libsecret" in path or "libglib" in path or "libgio" in path or "libgobject" in path or "libgcrypt" in path or "libgmodule" in path: group = "libsecret + GLib/GIO/gcrypt"
        elif path == "[anon]" or path == "[heap]": group = "anonymous + heap"
        elif path.startswith("/") : group = "other files (libc, ld.so, probe, …)"
        else: group = "other (stack, vdso, …)"
        st[stage][group] += rss
        st[stage + "-dirty"][group] += dirty
    return st, peak
sides = {s: load(s) for s in ("portal", "floor", "raw")}
groups = []
for s in sides.values():
    for g in list(s[0]["call"]) + list(s[0]["dlopen"]):
        if g not in groups: groups.append(g)
groups.sort()
print("| mapping | ours: dlopen → restore (dirty) | floor: dlopen → call (dirty) | raw libsecret: dlopen → lookup |")
print("|---|---|---|---|")
for g in groups:
    cells = []
    for s in ("portal", "floor", "raw"):
        st = sides[s][0]
        cells.append("%d → %d (%d)" % (st["dlopen"][g], st["call"][g], st["call-dirty"][g]))
    print("| %s | %s |" % (g, " | ".join(cells)))
cells = ["%d → %d" % (sum(sides[s][0]["dlopen"].values()), sum(sides[s][0]["call"].values())) for s in ("portal", "floor", "raw")]
print("| **total RSS** | %s |" % " | ".join(cells))
print("| peak (VmHWM) | %s |" % " | ".join(str(sides[s][1]) for s in ("portal", "floor", "raw")))
PY
echo
echo "### Present pages of the library by archive (KiB, after dlopen → after the first restore)"
echo
echo "Each present page's bytes are credited to the archives whose input sections they hold"
echo "(/proc/self/pagemap of the relinked copy, whose link map is known). Fault-around makes this"
echo "an upper bound of what the code touched, in 64 KiB windows."
echo
python3 - "$out/portal-keyring.lldmap" "$out/libportal-keyring.mapped.stripped.so" "$out/present" <<'PY'
import bisect, collections, re, subprocess, sys
mapfile, lib, prefix = sys.argv[1:4]
row = re.compile(r"^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+)\s+(\S.*)$")
iv, in_col, out_sec = [], None, None
for line in open(mapfile, encoding="utf-8", errors="replace"):
    line = line.rstrip("\n")
    if in_col is None:
        if "VMA" in line and " In " in line: in_col = line.index(" In ") + 1
        continue
    m = row.match(line)
    if not m: continue
    vma, size, rest, col = int(m.group(1), 16), int(m.group(3), 16), m.group(5), m.start(5)
    if col < in_col:
        out_sec = rest.split()[0]
        continue
    if col > in_col or size == 0 or ":(" not in rest or out_sec.startswith((".debug", ".comment", ".symtab", ".strtab")): continue
    src = rest.split(":(", 1)[0]
    a = re.search(r"([^/]+\.a)\(", src)
    name = a.group(1) if a else ("ours" if ".build/" in src else "<linker-generated>" if "<internal>" in src else src.rsplit("/", 1)[-1])
    member = re.search(r"\(([^)]*)\)$", src)
    iv.append((vma, vma + size, name, "%s(%s)" % (name, member.group(1)) if a and member else name if not a else name))
    if name == "ours": iv[-1] = (vma, vma + size, name, "ours: " + src.rsplit("/", 1)[-1])
iv.sort()
starts = [x[0] for x in iv]
loads = []
for line in subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True).stdout.splitlines():
    p = line.split()
    if p and p[0] == "LOAD":
        loads.append((int(p[1], 16), int(p[2], 16), int(p[4], 16)))   # offset, vaddr, filesz
def credit(pages, key=2):
    c = collections.Counter()
    for off in pages:
        for o, v, fs in loads:
            if o <= off < o + fs + 4096:
                lo = v + (off - o); hi = lo + 4096
                i = max(0, bisect.bisect_right(starts, lo) - 1)
                while i < len(iv) and iv[i][0] < hi:
                    s, e = iv[i][0], iv[i][1]
                    c[iv[i][key]] += max(0, min(e, hi) - max(s, lo))
                    i += 1
                break
    return c
stages = {}
for stage in ("dlopen", "call"):
    with open(prefix + "." + stage) as f:
        stages[stage] = credit(int(x) for x in f if x.strip())
names = sorted(set(stages["call"]) | set(stages["dlopen"]), key=lambda n: -stages["call"][n])
print("| archive | after dlopen | after the first restore |")
print("|---|---|---|")
for n in names[:12]:
    print("| %s | %d | %d |" % (n, stages["dlopen"][n] // 1024, stages["call"][n] // 1024))
print("| **total** | %d | %d |" % (sum(stages["dlopen"].values()) // 1024, sum(stages["call"].values()) // 1024))
print()
print("The 15 objects with the most present bytes after the first restore:")
print()
members = {}
for stage in ("dlopen", "call"):
    with open(prefix + "." + stage) as f:
        members[stage] = credit((int(x) for x in f if x.strip()), key=3)
print("| archive(object) | after dlopen | after the first restore |")
print("|---|---|---|")
for n, v in members["call"].most_common(15):
    print("| %s | %d | %d |" % (n, members["dlopen"][n] // 1024, v // 1024))
PY
