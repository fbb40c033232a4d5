#!/usr/bin/env bash
# Tests/fuzz/run.sh — builds and runs the libFuzzer targets for a bounded time.
#
#   Tests/fuzz/run.sh [SECONDS]            (default 20 per target)
#
# Targets (each a Swift file here, compiled with the PortalKeyringCore sources as one module by
# `swiftc -sanitize=fuzzer,address -parse-as-library`, so internal API is reachable; the Swift
# package is not involved):
#   session-document   SessionDocumentFuzz.swift: SessionDocument.decode, the stored-session
#                      decoder (seed corpus: corpus/session-document/)
#   redirect-url       RedirectURLFuzz.swift: RedirectQuery, the parser of redirect URLs the
#                      desktop hands to handle-redirect (seed corpus: corpus/redirect-url/)
#   json-text          JSONTextFuzz.swift: JSONText, the library's JSON reader (jsmn and our
#                      checks), against an independent RFC 8259 reader written in the target
#                      (seed corpus: corpus/json-text/, the Portal API's answer shapes)
#                      and checks that reading is linear in the text (time per byte bounded)
#
# Each run first replays every committed seed (regression), then fuzzes for SECONDS with a
# scratch corpus under build/fuzz (the committed corpus is never modified). A crash, trap, ASan
# report or broken invariant exits non-zero; the reproducer is written to
# build/fuzz/artifacts/<target>/ — copy it into corpus/<target>/ so it becomes a test.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
seconds=${1:-20}
out=$repo/build/fuzz
mkdir -p "$out"
command -v swiftc >/dev/null || PATH=/opt/swift/usr/bin:$PATH

status=0
# libFuzzer reports crashes itself; Swift's backtracer would read the ASan process's memory too.
export SWIFT_BACKTRACE=enable=no
for target in ${PORTAL_FUZZ_TARGETS:-session-document redirect-url json-text}; do
    case $target in
    session-document) source_file=$here/SessionDocumentFuzz.swift ;;
    redirect-url) source_file=$here/RedirectURLFuzz.swift ;;
    json-text) source_file=$here/JSONTextFuzz.swift ;;
    esac
    bin=$out/$target-fuzz
    # Every source of the core, its SecretService/ folder included.
    mapfile -t sources < <(find "$repo/Sources/PortalKeyringCore" -name '*.swift' | sort)
    printf '== %s: build\n' "$target"
    # jsmn, the JSON tokenizer (a C target of the package): its one object file, and a module map
    # for its header as SwiftPM would generate it.
    mkdir -p "$out/cjsmn"
    printf 'module CJsmn {\n    header "%s"\n    export *\n}\n' "$repo/Sources/CJsmn/include/cjsmn.h" >"$out/cjsmn/module.modulemap"
    if ! clang -fsanitize=fuzzer-no-link,address -g -c "$repo/Sources/CJsmn/jsmn.c" -o "$out/cjsmn/jsmn.o" 2>"$out/$target-build.log"; then
        cat "$out/$target-build.log"
        echo "$target: build failed (jsmn.c)"
        status=1
        continue
    fi
    # -package-name: the core's `package` declarations (Lock) need the one SwiftPM gives.
    # shellcheck disable=SC2046
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -g -Onone -module-name PortalKeyringCore -package-name portal_keyring \
        -I "$repo/Sources/CGLib" -I "$repo/Sources/CCurl" -I "$out/cjsmn" "$out/cjsmn/jsmn.o" \
        $(pkg-config --cflags libsecret-1 libcurl | tr " " "\n" | grep -E "^-I" | sed "s/^/-Xcc /") \
        "${sources[@]}" "$source_file" \
        $(pkg-config --libs libsecret-1 libcurl | tr " " "\n" | grep -E "^-[lL]") -o "$bin" 2>"$out/$target-build.log"; then
        grep -E 'error' "$out/$target-build.log" | head -n 20
        echo "$target: build failed (log: $out/$target-build.log)"
        status=1
        continue
    fi
    seeds=$here/corpus/$target
    scratch=$out/corpus/$target
    artifacts=$out/artifacts/$target
    mkdir -p "$scratch" "$artifacts"
    printf '== %s: replay %d seeds\n' "$target" "$(find "$seeds" -type f | wc -l)"
    if ! "$bin" -runs=0 "$seeds" >"$out/$target-replay.log" 2>&1; then
        tail -n 30 "$out/$target-replay.log"
        echo "$target: a committed seed fails"
        status=1
        continue
    fi
    printf '== %s: fuzz for %s s\n' "$target" "$seconds"
    if "$bin" -max_total_time="$seconds" -max_len=70000 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$scratch" "$seeds" >"$out/$target-fuzz.log" 2>&1; then
        grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$out/$target-fuzz.log" | tail -n 2
        echo "$target: no finding"
    else
        tail -n 40 "$out/$target-fuzz.log"
        echo "$target: FINDING — reproducer in $artifacts/ (copy it into $seeds/ to make it a test)"
        status=1
    fi
done
exit $status
