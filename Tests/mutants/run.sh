#!/usr/bin/env bash
# Tests/mutants/run.sh — mutation testing from the catalogue in Tests/mutants/: each
# mutant breaks one promise; the suites named in its file must notice.
#
#   Tests/mutants/run.sh                   every mutant
#   Tests/mutants/run.sh --only NAME ...   some of them (repeatable; NAME,NAME also works)
#   Tests/mutants/run.sh --changed [--slices N] [--budget M] [--time-budget S]
#                                          what CI runs: every mutant guarding a file changed since
#                                          the commit in Tests/mutants/green (the last full green
#                                          run), and slice (HEAD's commit count mod N, default 4)
#                                          of the rest (`mutants.py select`): those of the changed
#                                          code itself first (never cut by M), then those of a
#                                          changed suite or harness file, then the slice, cut so
#                                          that at most M run besides the changed code's own
#   --time-budget S  no mutant starts once S seconds have passed: the rest are listed as NOT RUN
#                    (not a failure; `make mutants` runs them), so a change that many mutants
#                    guard still ends within CI's time; the selection's order decides who waits
#   Tests/mutants/run.sh --list            the catalogue: name, file, promise, guarding suites
#   Tests/mutants/run.sh --no-baseline     skip the check that every guarding suite passes unmutated
#   make mutants                           the same as the first line
#
# The working tree is never modified. The runner copies it (tracked and untracked-not-ignored
# files) to one scratch directory, $PORTAL_MUTANTS_SCRATCH (default
# ${TMPDIR:-/tmp}/portal-keyring-mutants), which keeps its .build between mutants and between
# runs, so every build is incremental (the first run ever builds from scratch: a few minutes).
# Then:
#   1. baseline: before a suite first guards a mutant, it runs once on the unmutated copy; a
#      suite that fails there would "kill" every mutant, so the run stops (exit 2);
#   2. per mutant: applies it (exact search text -> replacement; STALE when the text is not found
#      exactly once), builds what its suites need (BUILD-FAILED if that fails), runs its suites
#      in order under a hard timeout until one fails (killed) or all pass (SURVIVED), and puts
#      the original file back;
#   3. prints the table: mutant | promise | result | seconds.
#   4. a full run (no --only, no --changed) in which every mutant was killed records HEAD's commit
#      in Tests/mutants/green of the working tree: commit that file with the change.
# Suite kinds (a mutant's `suite:` lines; scripts/run-suite.sh KIND ARG... runs one by hand):
#   swift FILTER     swift test --skip-build --filter FILTER, inside scripts/with-keyring.sh and
#                    scripts/with-portal-api.sh (must run at least one test)
#   script PATH      a test script of the tree (Tests/cli/hardening.sh) inside the same two
#                    harnesses, PORTAL_SESSION_BIN set to the scratch copy's portal-session
#   c PROGRAM        Tests/c/PROGRAM built by Tests/c/build.sh and run inside the same
#   swift-on P FILTER  the same under scripts/with-keyring.sh --provider P
#   c-on P PROGRAM   `c PROGRAM` under scripts/with-keyring.sh --provider P
#   provider P       Tests/providers/run.sh inside scripts/with-keyring.sh --provider P
#   pytest NODE      python3 -m pytest Tests/python/NODE (file or file::test) with the scratch
#                    copy's python/ package and library, inside the same two harnesses
#   fault COND       Tests/fault/run.sh COND (each condition under its own hard timeout,
#                    PORTAL_FAULT_TIMEOUT, default here 60 s)
# Timeouts: a mutant's `timeout:` line, else PORTAL_MUTANTS_TIMEOUT (default 180 s) per suite;
# the per-suite logs are kept in $SCRATCH/build/mutants/logs.
# Exits 0 when every mutant was killed; 1 when any SURVIVED, is STALE or BUILD-FAILED; 2 on a
# usage error or a failing baseline.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
tool=$here/mutants.py
scratch=${PORTAL_MUTANTS_SCRATCH:-${TMPDIR:-/tmp}/portal-keyring-mutants}
default_timeout=${PORTAL_MUTANTS_TIMEOUT:-180}
export PORTAL_FAULT_TIMEOUT=${PORTAL_FAULT_TIMEOUT:-60}

only=()
baseline=1
changed=0
slices=${PORTAL_MUTANTS_SLICES:-4}
budget=()
time_budget=0
while (($#)); do
    case $1 in
    --list)
        python3 "$tool" list "$here" | awk -F'\t' '{ printf "%-28s %s\n    promise: %s\n    suites:  %s\n", $1, $2, $3, $4 }'
        exit $?
        ;;
    --only)
        [[ -n ${2:-} ]] || { echo "run.sh: --only needs a mutant name" >&2; exit 2; }
        IFS=, read -ra names <<<"$2"
        only+=("${names[@]}")
        shift
        ;;
    --no-baseline) baseline=0 ;;
    --changed) changed=1 ;;
    --slices) slices=${2:-}; shift ;;
    --budget) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "run.sh: --budget needs a number" >&2; exit 2; }; budget=("$2"); shift ;;
    --time-budget) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "run.sh: --time-budget needs seconds" >&2; exit 2; }; time_budget=$2; shift ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# The commit the run proves (taken now: the working tree may move on while it runs).
start_head=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
catalogue=$(python3 "$tool" list "$here") || exit 2
mapfile -t all < <(cut -f1 <<<"$catalogue")
if ((changed)); then
    mapfile -t only < <(python3 "$tool" select "$here" "$repo" "$slices" "${budget[@]}") || exit 2
    ((${#only[@]})) || { echo "mutants: nothing selected"; exit 0; }
fi
if ((${#only[@]})); then
    for name in "${only[@]}"; do
        grep -qxF -- "$name" < <(printf '%s\n' "${all[@]}") || { echo "run.sh: no mutant named $name (see --list)" >&2; exit 2; }
    done
    selected=("${only[@]}")
else
    selected=("${all[@]}")
fi

t_run=$(date +%s)
cd "$repo" || exit 2
# shellcheck source=scripts/deps.sh
source scripts/deps.sh >/dev/null || { echo "run.sh: scripts/deps.sh failed" >&2; exit 2; }

mkdir -p "$scratch" || exit 2
# One run per scratch copy: a second run would patch and rebuild the same files underneath.
exec {lock_fd}>"$scratch.lock" || exit 2
flock -n "$lock_fd" || { echo "run.sh: another run is using $scratch (lock $scratch.lock)" >&2; exit 2; }
python3 "$tool" sync "$repo" "$scratch" || { echo "run.sh: cannot copy the tree to $scratch" >&2; exit 2; }
logs=$scratch/build/mutants/logs
cbuild=$scratch/build/mutants/c
mkdir -p "$logs" "$cbuild"
cd "$scratch" || exit 2
printf 'mutants: working copy %s (from %s)\n' "$scratch" "$repo"
# The keyring inspection tool that the Swift and C tests use (PORTAL_TEST_KEYRINGCTL).
gcc -O1 -o "$cbuild/keyringctl" "$scratch/Tests/tools/keyringctl.c" $(pkg-config --cflags --libs libsecret-1) ||
    { echo "run.sh: cannot build keyringctl" >&2; exit 2; }
export PORTAL_TEST_KEYRINGCTL=$cbuild/keyringctl
export PORTAL_SESSION_BIN=$scratch/.build/debug/portal-session
# Each suite runs right after the build its mutant needs (build_for): run-suite.sh need not check.
export PORTAL_TEST_BUILT=1

# ------------------------------------------------------------------------------------ steps

# build_for SUITE... : the builds those suites need; returns non-zero on a build failure.
build_for() {
    local tests=0 lib=0 s
    for s in "$@"; do
        case ${s%% *} in
        swift | swift-on) tests=1 ;;
        c | c-on | fault | provider | script | pytest) lib=1 ;;
        esac
    done
    if ((tests)); then
        timeout 1200 swift build --build-tests >"$logs/build.log" 2>&1 || return 1
    elif ((lib)); then
        # The library and portal-session (persist_order_test and the provider suite run it).
        timeout 1200 swift build >"$logs/build.log" 2>&1 || return 1
    fi
}

# Every process a suite starts carries this marker in its environment, daemons that left the
# suite's process group included; reap_leftovers stops those still running once a suite is over
# (a suite killed by its timeout cannot tear down its private environment itself).
export PORTAL_MUTANTS_RUN="$scratch:$$"
reap_leftovers() {
    local proc pid left=()
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [[ $pid != "$$" && $pid != "$BASHPID" ]] || continue
        grep -qzxF -- "PORTAL_MUTANTS_RUN=$PORTAL_MUTANTS_RUN" "$proc/environ" 2>/dev/null && left+=("$pid")
    done
    ((${#left[@]})) || return 0
    echo "  (stopping ${#left[@]} process(es) the suite left running: ${left[*]})"
    kill -CONT "${left[@]}" 2>/dev/null
    kill -KILL "${left[@]}" 2>/dev/null
    return 0
}

# run_suite SUITE TIMEOUT LOG : 0 = the suite passed; 124 = timed out; other = failed.
# KeePassXC 2.7.4 segfaults now and then on its own (docs/providers.md); a failed run during
# which it crashed ("PROVIDER CRASHED", scripts/with-keyring.sh) says nothing about the code, in
# the baseline or under a mutant: it runs again on a fresh provider, at most 3 runs (the crashed
# runs' logs are kept as LOG.crashedN), as scripts/test-matrix.sh does.
run_suite() {
    local attempt rc
    for attempt in 1 2 3; do
        # The suite never holds the run's lock (a process it leaves behind would keep the next
        # run out), and whatever it leaves running after its timeout is stopped before the next.
        run_suite_once "$@" {lock_fd}>&-
        rc=$?
        reap_leftovers
        if ((rc != 0 && rc != 124 && attempt < 3)) && grep -aq 'PROVIDER CRASHED' "$3"; then
            mv "$3" "$3.crashed$attempt"
            continue
        fi
        return $rc
    done
}

run_suite_once() {
    local suite=$1 limit=$2 log=$3 kind=${1%% *} arg=${1#* } args
    case $kind in
    c | swift | pytest | script | provider | fault) args=("$kind" "$arg") ;;
    c-on | swift-on) args=("$kind" "${arg%% *}" "${arg#* }") ;;
    *)
        echo "run.sh: unknown suite kind '$kind' in '$suite'" >"$log"
        return 3
        ;;
    esac
    # Every kind as scripts/run-suite.sh runs it by hand (in the scratch copy, with its
    # portal-session and keyringctl exported above; a C program built by Tests/c/build.sh); status 3 when a filter or selection ran no
    # test (a filter that matches nothing passes: a broken suite, never "survived").
    timeout --kill-after=10 "$limit" scripts/run-suite.sh "${args[@]}" >"$log" 2>&1
}

restore_file() { # FILE: the original, with a fresh mtime (mutants.py copy_fresh says why)
    python3 "$tool" restore "$repo" "$scratch" "$1"
}

# ------------------------------------------------------------------------------------ baseline

declare -A suite_limit=()
for name in "${selected[@]}"; do
    eval "$(python3 "$tool" show "$here" "$name" "$repo")"
    for s in "${m_suites[@]}"; do
        limit=${m_timeout:-$default_timeout}
        [[ -z ${suite_limit[$s]:-} || ${suite_limit[$s]} -lt $limit ]] && suite_limit[$s]=$limit
    done
done

# baseline_for SUITE...: each suite not run yet runs once on the unmutated copy (built for it
# first); a failure stops the whole run (exit 2). Run before the first mutant a suite guards, so
# that a run cut by --time-budget spends no time on suites of mutants it never reaches.
declare -A baseline_done=()
baseline_count=0
baseline_for() {
    local s t1 rc built=0
    ((baseline)) || return 0
    for s in "$@"; do
        [[ -n ${baseline_done[$s]:-} ]] && continue
        if ((!built)); then
            build_for "$@" || {
                echo "run.sh: the unmutated copy does not build (log: $logs/build.log)" >&2
                tail -n 20 "$logs/build.log" >&2
                exit 2
            }
            built=1
        fi
        baseline_count=$((baseline_count + 1))
        t1=$(date +%s)
        run_suite "$s" "${suite_limit[$s]}" "$logs/baseline.$baseline_count.log"
        rc=$?
        if ((rc != 0)); then
            printf '  baseline FAIL  %-60s exit %d (log %s)\n' "$s" "$rc" "$logs/baseline.$baseline_count.log"
            echo "run.sh: a guarding suite fails without any mutant: fix that first" >&2
            exit 2
        fi
        printf '  baseline ok    %-60s %3d s\n' "$s" "$(($(date +%s) - t1))"
        baseline_done[$s]=1
    done
}

# ------------------------------------------------------------------------------------ mutants

rows=()
bad=0
not_run=()
for name in "${selected[@]}"; do
    eval "$(python3 "$tool" show "$here" "$name" "$repo")"
    limit=${m_timeout:-$default_timeout}
    if ((time_budget > 0 && $(date +%s) - t_run >= time_budget)); then
        not_run+=("$m_name")
        rows+=("$m_name"$'\t'"$m_promise"$'\t'"NOT RUN (time budget of $time_budget s spent)"$'\t'0)
        continue
    fi
    printf '\n== %s: %s\n' "$m_name" "$m_promise"
    baseline_for "${m_suites[@]}"
    t0=$(date +%s)
    result=""
    if ! python3 "$tool" apply "$here" "$m_name" "$scratch" 2>"$logs/$m_name.apply.log"; then
        result="STALE ($(tr '\n' ' ' <"$logs/$m_name.apply.log"))"
        restore_file "$m_file" 2>/dev/null
    elif ! build_for "${m_suites[@]}"; then
        result="BUILD-FAILED (log: $logs/$m_name.build.log)"
        cp "$logs/build.log" "$logs/$m_name.build.log"
        restore_file "$m_file"
    else
        printf '  built in %d s\n' "$(($(date +%s) - t0))"
        i=0
        for s in "${m_suites[@]}"; do
            i=$((i + 1))
            t1=$(date +%s)
            run_suite "$s" "$limit" "$logs/$m_name.$i.log"
            rc=$?
            secs=$(($(date +%s) - t1))
            if ((rc == 0)); then
                printf '  passed  %s (%d s) — did not notice\n' "$s" "$secs"
                continue
            fi
            case $rc in
            124 | 137) how="timed out after $limit s" ;;
            3) how="suite error, see log" ;;
            *) how="exit $rc" ;;
            esac
            printf '  failed  %s (%d s, %s) — killed\n' "$s" "$secs" "$how"
            grep -aE '✘ Test .*(recorded an issue|failed)|check failed|CHECK failed|FAIL |TIMEOUT' "$logs/$m_name.$i.log" |
                grep -av 'with [0-9]* issue' | head -n 3 | cut -c1-220 | sed 's/^/          /'
            result="killed by $s ($how)"
            break
        done
        [[ -n $result ]] || result="SURVIVED"
        restore_file "$m_file"
    fi
    secs=$(($(date +%s) - t0))
    [[ $result == killed* ]] || bad=1
    printf '  => %s (%d s)\n' "$result" "$secs"
    rows+=("$m_name"$'\t'"$m_promise"$'\t'"$result"$'\t'"$secs")
done

# ------------------------------------------------------------------------------------ table

total=$(($(date +%s) - t_run))
printf '\n| mutant | promise | result | s |\n|---|---|---|---|\n'
for row in "${rows[@]}"; do
    IFS=$'\t' read -r n p r s <<<"$row"
    printf '| %s | %s | %s | %s |\n' "$n" "$p" "$r" "$s"
done | tee "$scratch/build/mutants/table.md"
printf '\nmutants: %d run in %d s (%d min %d s); %s\n' "$((${#rows[@]} - ${#not_run[@]}))" "$total" $((total / 60)) $((total % 60)) \
    "$( ((bad)) && echo 'NOT ALL KILLED' || echo 'all killed')"
if ((${#not_run[@]})); then
    printf 'mutants: %d NOT RUN, the time budget of %d s spent (owed to the next full run, make mutants): %s\n' \
        "${#not_run[@]}" "$time_budget" "${not_run[*]}"
fi
if ((!bad && !changed && ${#not_run[@]} == 0 && ${#selected[@]} == ${#all[@]})); then
    head=$start_head
    { echo "$head"; sed -n '2,$p' "$here/green"; } >"$here/green.new" && mv "$here/green.new" "$here/green"
    echo "mutants: the whole catalogue is green at $head (recorded in Tests/mutants/green: commit it)"
fi
exit $bad
