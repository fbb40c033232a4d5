#!/usr/bin/env bash
# header-api.sh — derive build inputs from the public header, the ABI's single source of truth.
#
#   build-support/header-api.sh names          HEADER   every PORTAL_API function name, sorted
#   build-support/header-api.sh version-script HEADER   a linker version script exporting exactly them
#   build-support/header-api.sh probe          HEADER   C source defining every PORTAL_API function
#                                                       with a stub body (the ABI probe: compiled with
#                                                       -g so that abidw sees the header's C types)
#   build-support/header-api.sh version        HEADER   "MAJOR MINOR PATCH NUMBER STRING" from the macros
#
# A declaration starts at a line beginning with PORTAL_API and ends at the first ';'. The function
# name is the identifier right before the declaration's first '('. Fails (exit 1) when the header
# declares no function, a name does not match ^portal_[a-z0-9_]+$, or a name repeats.
set -euo pipefail

die() { printf 'header-api.sh: error: %s\n' "$*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: header-api.sh names|version-script|probe|version HEADER"
mode=$1
header=$2
[[ -r $header ]] || die "cannot read $header"

# One line per declaration, whitespace collapsed, without the PORTAL_API macro.
declarations() {
    awk '
        /^PORTAL_API[ \t]/ { collecting = 1; decl = "" }
        collecting {
            line = $0
            sub(/\/\*.*\*\//, "", line)            # a trailing one-line comment
            decl = decl " " line
            if (index(line, ";")) {
                sub(/;.*/, ";", decl)
                sub(/^[ \t]*PORTAL_API[ \t]+/, "", decl)
                gsub(/[ \t]+/, " ", decl)
                print decl
                collecting = 0
            }
        }
        END { if (collecting) { print "unterminated declaration: " decl > "/dev/stderr"; exit 1 } }
    ' "$header"
}

names() {
    local decl name
    local -A seen=()
    while IFS= read -r decl; do
        name=${decl%%(*}
        name=${name%"${name##*[! ]}"}      # trailing blanks
        name=${name##*[!A-Za-z0-9_]}       # the identifier before '('
        [[ $name =~ ^portal_[a-z0-9_]+$ ]] || die "unexpected function name '$name' in: $decl"
        [[ -z ${seen[$name]:-} ]] || die "function $name is declared twice"
        seen[$name]=1
        printf '%s\n' "$name"
    done < <(declarations) | sort
}

case $mode in
names)
    out=$(names)
    [[ -n $out ]] || die "no PORTAL_API function found in $header"
    printf '%s\n' "$out"
    ;;
version-script)
    out=$(names)
    [[ -n $out ]] || die "no PORTAL_API function found in $header"
    printf '/* Generated from %s by build-support/header-api.sh: export exactly the PORTAL_API\n' "$(basename "$header")"
    printf '   functions; everything else (the Swift runtime included) stays local. */\n{\n  global:\n'
    sed 's/.*/    &;/' <<<"$out"
    printf '  local:\n    *;\n};\n'
    ;;
probe)
    [[ -n $(names) ]] || die "no PORTAL_API function found in $header"
    printf '/* Generated from %s by build-support/header-api.sh: the ABI probe. Every PORTAL_API\n' "$(basename "$header")"
    printf '   function with a stub body, so that the compiler checks each definition against its\n'
    printf '   declaration and abidw records the C types of the ABI (the Swift library has no C DWARF). */\n'
    printf '#include "%s"\n\n' "$(basename "$header")"
    declarations | sed 's/;$/ { __builtin_trap(); }/; s/^/PORTAL_API /'
    ;;
version)
    get() {
        local v
        v=$(sed -nE "s/^#define[[:space:]]+$1[[:space:]]+(.*[^[:space:]])[[:space:]]*$/\1/p" "$header")
        [[ -n $v ]] || die "no #define $1 in $header"
        printf '%s' "$v"
    }
    major=$(get PORTAL_KEYRING_VERSION_MAJOR)
    minor=$(get PORTAL_KEYRING_VERSION_MINOR)
    patch=$(get PORTAL_KEYRING_VERSION_PATCH)
    number=$(get PORTAL_KEYRING_VERSION_NUMBER)
    string=$(get PORTAL_KEYRING_VERSION_STRING)
    string=${string#\"}
    string=${string%\"}
    for v in "$major" "$minor" "$patch" "$number"; do
        [[ $v =~ ^[0-9]+$ ]] || die "version macro '$v' is not a plain decimal number"
    done
    printf '%s %s %s %s %s\n' "$major" "$minor" "$patch" "$number" "$string"
    ;;
*)
    die "unknown mode '$mode'"
    ;;
esac
