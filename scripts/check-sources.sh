#!/usr/bin/env bash
# check-sources.sh — rules of the source tree that need no build (seconds; run by scripts/test.sh):
#   1. every force-unwrap (`x!`) in Sources/ carries a `// trusted:` comment on its line saying why
#      it cannot fail on outside input (docs/security.md, "Signals from other processes");
#   2. every mutant of the catalogue still applies (its search text is found exactly once), so a
#      refactor that strands a mutant fails here at once, not at the next full mutation run;
#   3. CI's choice of mutants (`mutants.py select`) picks what a change guards
#      (Tests/mutants/test_select.py, on a throw-away git repository);
#   4. the library (Sources/PortalKeyringCore, Sources/PortalKeyring, Sources/PortalKeyringC)
#      imports neither Foundation nor FoundationEssentials: loaded into other people's processes,
#      it stays light (the portal-session command may use them);
#   5. no `Lock` guards an empty value (`Lock<Void>`): ThreadSanitizer reports a false race on it
#      (Sources/PortalKeyringCore/Runtime/Lock.swift);
#   6. what the C library links (Sources/PortalKeyringCore, Sources/PortalKeyringC) uses no Swift
#      concurrency (async functions, await, Task, actors, async sequences, continuations): one use
#      links Swift's concurrency runtime and libdispatch into libportal-keyring.so (0.67 MB;
#      bench/results.md). The `async` Swift API lives in Sources/PortalKeyring;
#   7. nor key-path expressions (`\.name`, `\Type.name`): one that is built at run time (as
#      `optional.map(\.name)` is) makes the runtime's key-path code resident in every process at
#      its first use (about 0.1 MiB, bench/results.md); a closure (`{ $0.name }`) does the same
#      work without it;
#   8. the core and its tests keep their files in the folders of docs/architecture.md's map: at
#      most a handful (5) of Swift files at the root of Sources/PortalKeyringCore or
#      Tests/PortalKeyringTests;
#   9. no dead link: every relative Markdown link in the tree's Markdown and every `<file>.md#<anchor>`
#      citation in its sources, tests, scripts and docs names a file that exists and, with an anchor,
#      one of that file's headings (scripts/check-links.py; Tests/tools/test_check_links.py shows
#      it failing on planted dead ones). Code cites the docs by heading, so a renamed heading fails
#      here until its citations follow.
#  10. the core's dependencies run one way (docs/architecture.md#the-layer-rule): no Swift file
#      of Sources/PortalKeyringCore names a type declared in a folder of a layer above its own,
#      and no storage backend names a sibling backend's (scripts/check-layers.py).
#  11. one lock type in process: no `pthread_mutex_`/`pthread_cond_` call, GLib mutex (`GMutex`,
#      `g_mutex_`) or `Synchronization.Mutex` (`Mutex<`, `Mutex(`) in Sources/ outside
#      Runtime/Lock*.swift, nor in the Swift tests (`Lock`: what ThreadSanitizer sees, storage that
#      never moves; a test's futex lock is a false race in the slow checks); across processes, `flock`.
#      The rule is first tried on a planted file holding each of them, and fails unless it finds
#      every one (Tests/mutants/ci/lock-rule-misses-mutex).
#  12. the tree carries no project history: no issue number and no citation of the project's
#      specification (it does not ship); a rule says why in its own terms, and history stays in
#      git (first shown firing on a planted file; Tests/mutants/ci/history-rule-misses-issue).
#  13. one deadline currency: the core reads the monotonic clock (`g_get_monotonic_time`,
#      `clock_gettime(CLOCK_MONOTONIC, …)`) only in Runtime/MonotonicInstant.swift; every deadline
#      is a `MonotonicInstant`, and a system call's relative timeout is its one rounded-up
#      conversion (first shown firing on a planted file; Tests/mutants/ci/clock-rule-misses-gettime).
# Tests/tools/test_check_layers.py plants offences against rules 8 and 10 in a copy of the core
# and its tests and runs this script there, with PORTAL_CHECK_NESTED=1: the copy skips what
# needs the whole tree (links, the catalogue) and the self-tests.
set -uo pipefail
cd "$(dirname "$0")/.."
failed=0
# rule FOUND BAD GOOD: prints GOOD when FOUND (the offending lines) is empty, else BAD and the lines.
rule() {
    if [[ -n $1 ]]; then
        echo "check-sources: $2:"
        printf '%s\n' "$1"
        failed=1
    else
        echo "check-sources: $3"
    fi
}
# self_test FILE WHAT: a check's own test (python3 FILE) passes: prints WHAT, else its output.
self_test() {
    local out
    if out=$(python3 "$1" 2>&1); then
        echo "check-sources: $2 ($1)"
    else
        printf 'check-sources: %s failed:\n%s\n' "$1" "$out"
        failed=1
    fi
}
# Lines of Swift sources under the given folders that match the pattern, comment lines left out.
code_lines() { # PATTERN FOLDER...
    local pattern=$1
    shift
    grep -rnE "$pattern" --include='*.swift' "$@" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true
}
rule "$(code_lines '(\$[0-9]|[]A-Za-z0-9_)])!([^=]|$)' Sources | grep -v '// trusted:')" \
    "force-unwraps without a '// trusted:' reason" "every force-unwrap in Sources/ is marked '// trusted:'"
rule "$(code_lines '^[[:space:]]*(@_implementationOnly[[:space:]]+|(public|internal|package|private|fileprivate)[[:space:]]+)?import[[:space:]]+(struct[[:space:]]+|class[[:space:]]+|enum[[:space:]]+|func[[:space:]]+)?(Foundation|FoundationEssentials|FoundationInternationalization)\b' \
    Sources/PortalKeyringCore Sources/PortalKeyring Sources/PortalKeyringC)" \
    "the library imports Foundation (it must stay light to load)" "the library imports no Foundation"
rule "$(code_lines 'Lock<(Void|\(\))>|Lock\(\(\)\)' Sources)" \
    "a Lock guards an empty value (ThreadSanitizer reports a false race; Lock.swift)" "no Lock guards an empty value"
concurrency='(^|[^.[:alnum:]_])async[[:space:]]*(throws|->|\{|$)|\bawait\b|\bTask[[:space:]]*[{.(<]|@MainActor|'\
'\bAsync(Stream|Sequence|IteratorProtocol)\b|with(Checked|Unsafe)(Throwing)?Continuation|\bisolated\b|'\
'^[[:space:]]*((public|package|internal|final|private)[[:space:]]+)*actor[[:space:]]'
rule "$(code_lines "$concurrency" Sources/PortalKeyringCore Sources/PortalKeyringC)" \
    "the C library's modules use Swift concurrency (it would link its runtime; move it to Sources/PortalKeyring)" \
    "the C library's modules use no Swift concurrency"
rule "$(code_lines '\\\.[A-Za-z_]|\\[A-Z][A-Za-z0-9_]*\.[A-Za-z_]' Sources/PortalKeyringCore Sources/PortalKeyringC)" \
    "the C library's modules use key-path expressions (use a closure: { \$0.name })" \
    "the C library's modules use no key-path expressions"
# Rule 8: files at a root beyond the limit (PORTAL_CHECK_ROOT_LIMIT: a test plants a violation).
root_limit=${PORTAL_CHECK_ROOT_LIMIT:-5}
for root in Sources/PortalKeyringCore Tests/PortalKeyringTests; do
    at_root=$(find "$root" -maxdepth 1 -name '*.swift' | sort)
    count=$(printf '%s' "$at_root" | grep -c . || true)
    rule "$( ((count > root_limit)) && printf '%s\n' "$at_root")" \
        "$count Swift files at the root of $root (at most $root_limit: put each in its folder, docs/architecture.md)" \
        "$root keeps its files in folders ($count at its root)"
done
# Rule 10: the layer rule (the checker prints each offence).
rule "$(python3 scripts/check-layers.py Sources/PortalKeyringCore 2>&1)" \
    "the core names types of a layer above (or a sibling backend's; docs/architecture.md#the-layer-rule)" \
    "the core's files name no type of a layer above"
# Rule 11: lock primitives outside Runtime/Lock*.swift (first shown firing on a planted file).
lock_primitives='pthread_mutex_|pthread_cond_|\bGMutex\b|\bg_mutex_|\bMutex[<(]'
lock_uses() { code_lines "$lock_primitives" "$@" | grep -vE '^Sources/PortalKeyringCore/Runtime/Lock[^/]*\.swift:' || true; }
rule "$(lock_uses Sources Tests/PortalKeyringTests)" \
    "a lock primitive outside Runtime/Lock*.swift (use Lock: Sources/PortalKeyringCore/Runtime/Lock.swift)" \
    "every in-process lock in Sources/ and the Swift tests is a Lock"
# Rule 13: the core reads the monotonic clock only in Runtime/MonotonicInstant.swift, so every
# deadline is an instant and each conversion to a relative timeout is that file's one (first
# shown firing on a planted file).
clock_reads='\bg_get_monotonic_time[[:space:]]*\(|\bclock_gettime[[:space:]]*\([[:space:]]*CLOCK_MONOTONIC'
clock_uses() { code_lines "$clock_reads" "$@" | grep -vE '^Sources/PortalKeyringCore/Runtime/MonotonicInstant\.swift:' || true; }
rule "$(clock_uses Sources/PortalKeyringCore)" \
    "the core reads the monotonic clock outside Runtime/MonotonicInstant.swift (take a MonotonicInstant)" \
    "the core reads the monotonic clock only through MonotonicInstant"
if [[ -z ${PORTAL_CHECK_NESTED:-} ]]; then
    plant=$(mktemp -d)
    printf '%s\n' 'let end = g_get_monotonic_time() + 5' 'clock_gettime(CLOCK_MONOTONIC, &now)' \
        'let t = Int(g_get_monotonic_time ())' >"$plant/planted.swift"
    planted=$(clock_uses "$plant" | grep -c . || true)
    rm -rf "$plant"
    rule "$( ((planted < 3)) && echo "found $planted of the 3 planted clock reads")" \
        "rule 13 misses planted clock reads" "rule 13 finds each planted clock read"
    plant=$(mktemp -d)
    printf '%s\n' 'pthread_mutex_lock(m)' 'pthread_cond_wait(c, m)' 'let m = GMutex()' 'g_mutex_lock(m)' \
        'let s = Mutex<Int>(0)' 'let t = Mutex(0)' >"$plant/planted.swift"
    planted=$(lock_uses "$plant" | grep -c . || true)
    rm -rf "$plant"
    rule "$( ((planted < 6)) && echo "found $planted of the 6 planted lock primitives")" \
        "rule 11 misses planted lock primitives" "rule 11 finds each planted lock primitive"
    # Rule 12: issue numbers and spec citations anywhere in the tree (first shown firing).
    history_lines() { grep -rnIE '\b[Ii]ssues? #?[0-9]+|\bSPEC\b' --exclude-dir=.build --exclude-dir=build \
        --exclude-dir=.git --exclude=green "$@" || true; }
    plant=$(mktemp -d)
    printf '// see %s %s\n' 'iss''ue' 12 'SP''EC' '§2' >"$plant/planted.swift"
    planted=$(history_lines "$plant" | grep -c . || true)
    rm -rf "$plant"
    rule "$( ((planted < 2)) && echo "found $planted of the 2 planted citations")" \
        "rule 12 misses planted history" "rule 12 finds each planted citation"
    rule "$(history_lines .)" "issue numbers or spec citations in the tree (say why in the rule's own terms)" \
        "the tree cites no issue number and no spec section"
    # Rule 9: dead links and anchors (the checker prints each one), and the checker's own test.
    links=$(python3 scripts/check-links.py 2>&1) || [[ -n $links ]] || links="scripts/check-links.py failed"
    rule "$links" "dead links or anchors (FILE:LINE: TARGET)" "every link and docs citation resolves"
    self_test Tests/tools/test_check_links.py "the link check fails on planted dead links"
    # The table of suites (Tests/suites) parses, each row's program exists, and the scheduler that
    # runs it passes its own tests on planted tables.
    suites=$(bash -c 'source scripts/suites.sh && suites_load && for n in "${SUITE_NAMES[@]}"; do
        read -r -a w <<<"${SUITE_CMD[$n]}"; for x in "${w[@]}"; do
            [[ $x == */* && $x != build/* && $x != *"{provider}"* && ! -e $x ]] && echo "Tests/suites: $n: no $x"; done; done' 2>&1)
    rule "$suites" "rows of Tests/suites that do not parse or name a missing file" "every row of Tests/suites parses and runs a file of the tree"
    self_test Tests/tools/test_run_suites.py "the suites' scheduler passes its tests on planted tables"
    # The package build's symbol check (debian/symbols.py check-built) on planted libraries.
    self_test Tests/tools/test_symbols.py "a packaged library that lost or gained a symbol fails the package build"
    # The stress step's count of runs for a time budget (scripts/stress.sh, dry run).
    self_test Tests/tools/test_stress.py "the stress step starts its first run within any budget, later ones while they fit"
    python3 Tests/mutants/mutants.py check Tests/mutants . || failed=1
    python3 Tests/mutants/test_select.py 2>&1 | tail -n 3 || failed=1
    python3 Tests/tools/test_check_layers.py 2>&1 | tail -n 3 || failed=1
fi
exit "$failed"
