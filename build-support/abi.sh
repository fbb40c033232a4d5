#!/usr/bin/env bash
# abi.sh — compare the C ABI with the committed abigail baseline, or update the baseline.
#
#   build-support/abi.sh check  BASELINE CURRENT   exit 0 if CURRENT is compatible with BASELINE
#   build-support/abi.sh update BASELINE CURRENT   copy CURRENT over BASELINE, refusing an
#                                                  incompatible change under the same soname
#                                                  (FORCE=1 overrides; see docs/ABI.md)
#
# BASELINE and CURRENT are abidw XML dumps of the ABI probe (build-support/header-api.sh probe):
# every header function with the header's C types. Policy (docs/ABI.md):
#   - compatible: identical, or only added functions / added enumerators  -> check passes
#   - incompatible: a removed function, or a changed function or type (parameters, return type,
#     enumerator values, struct layout)                                     -> check fails unless
#     the soname major was bumped and the baseline regenerated
#   - a baseline whose soname differs from the library's is stale         -> check fails
set -euo pipefail

die() { printf 'abi.sh: error: %s\n' "$*" >&2; exit 2; }
[[ $# -eq 3 ]] || die "usage: abi.sh check|update BASELINE CURRENT"
mode=$1 baseline=$2 current=$3
command -v abidiff >/dev/null || die "abidiff not found (apt-get install abigail-tools)"
[[ -r $current ]] || die "cannot read $current (run 'make abi' first)"

soname_of() { sed -nE "s/.*<abi-corpus [^>]*soname='([^']*)'.*/\1/p" "$1" | head -n 1; }

# compare: prints the report; returns 0 compatible (additions allowed), 1 incompatible, 2 error.
compare() {
    local rc=0 strict
    strict=$(abidiff --no-added-syms "$baseline" "$current") || rc=$?
    if ((rc & 3)); then
        printf '%s\n' "$strict"
        printf 'abi.sh: abidiff failed (exit %d)\n' "$rc" >&2
        return 2
    fi
    if ((rc & 12)); then
        printf '%s\n' "$strict" | sed 's/^/    /'
        return 1
    fi
    local added arc=0
    added=$(abidiff "$baseline" "$current") || arc=$?
    if ((arc & 4)); then
        printf 'abi.sh: compatible additions since the baseline:\n'
        printf '%s\n' "$added" | sed 's/^/    /'
    fi
    return 0
}

case $mode in
check)
    [[ -r $baseline ]] || { printf 'abi.sh: FAIL: no baseline %s (run make abi-baseline and commit it)\n' "$baseline"; exit 1; }
    base_soname=$(soname_of "$baseline")
    cur_soname=$(soname_of "$current")
    if [[ $base_soname != "$cur_soname" ]]; then
        printf 'abi.sh: FAIL: the baseline is for soname %s but the library is %s: after a soname\n' \
            "${base_soname:-<none>}" "${cur_soname:-<none>}"
        printf '        major bump, regenerate the baseline (make abi-baseline) and commit it\n'
        exit 1
    fi
    rc=0
    compare || rc=$?
    case $rc in
    0) printf 'abi.sh: ABI compatible with %s (soname %s)\n' "$baseline" "$cur_soname" ;;
    1)
        printf 'abi.sh: FAIL: incompatible ABI change against %s (soname %s).\n' "$baseline" "$cur_soname"
        printf '        Restore the ABI (grow it with new _v2 functions instead), or bump\n'
        printf '        PORTAL_KEYRING_VERSION_MAJOR (the soname) and run make abi-baseline (docs/ABI.md).\n'
        exit 1
        ;;
    *) exit 2 ;;
    esac
    ;;
update)
    if [[ -r $baseline && ${FORCE:-0} != 1 ]]; then
        base_soname=$(soname_of "$baseline")
        cur_soname=$(soname_of "$current")
        if [[ $base_soname == "$cur_soname" ]]; then
            rc=0
            compare >/dev/null || rc=$?
            if ((rc == 1)); then
                printf 'abi.sh: refusing to update %s: the change is incompatible but the soname is\n' "$baseline"
                printf '        still %s. Bump PORTAL_KEYRING_VERSION_MAJOR first (or FORCE=1 before\n' "$cur_soname"
                printf '        the first release; see docs/ABI.md). The change:\n'
                compare || true
                exit 1
            fi
            ((rc == 0)) || exit 2
        fi
    fi
    mkdir -p "$(dirname "$baseline")"
    cp "$current" "$baseline.tmp"
    mv -f "$baseline.tmp" "$baseline"
    printf 'abi.sh: wrote %s (soname %s)\n' "$baseline" "$(soname_of "$baseline")"
    ;;
*) die "unknown mode '$mode'" ;;
esac
