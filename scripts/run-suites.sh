#!/usr/bin/env bash
# run-suites.sh — run the rows of Tests/suites side by side: every (suite, provider) run is one
# job, at most --jobs at a time, the longest expected work first, never two jobs of one group at
# once. Each job's output goes to $SUITES_STEPS_DIR/<job>.log (default build/steps) and is
# printed whole when the job ends (so outputs never interleave); its time and status go to
# times.tsv there (the step table of scripts/test.sh). Exits 1 when a job failed, after every job
# has run, and repeats what failed at the end (CI keeps the tail of the log); 2 on a usage error
# or a malformed table ($SUITES_TABLE, default Tests/suites).
#
#   scripts/run-suites.sh [--jobs N] [NAME...]      (default: every row, 3 jobs)
#
# Run after the build (scripts/test.sh builds first); scripts/run-suite.sh runs one row by hand.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/suites.sh
source scripts/suites.sh

jobs=3
names=()
while (($#)); do
    case $1 in
    --jobs) jobs=${2:-}; shift ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) names+=("$1") ;;
    esac
    shift
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run-suites.sh: --jobs takes a positive number" >&2; exit 2; }
suites_load || exit 2
steps=${SUITES_STEPS_DIR:-build/steps}
((${#names[@]})) || names=("${SUITE_NAMES[@]}")

# The jobs: one per (row, provider), with its expected seconds and group.
job_ids=() job_row=() job_provider=() job_expect=() job_group=()
for name in "${names[@]}"; do
    [[ -n ${SUITE_ROW[$name]:-} ]] || { echo "run-suites.sh: no suite '$name' in Tests/suites" >&2; exit 2; }
    for p in ${SUITE_PROVIDERS[$name]//,/ }; do
        [[ $p == - ]] && p=""
        job_ids+=("$name${p:+ [$p]}") job_row+=("$name") job_provider+=("$p")
        job_expect+=("$(suite_expect "$name" "$p")") job_group+=("${SUITE_GROUP[$name]}")
    done
done

mkdir -p "$steps"
touch "$steps/times.tsv"
declare -A running_group=() pid_job=()
pending=("${!job_ids[@]}")
failed=()

# next_job: the index in $pending of the job to start now (none: status 1). A job's weight is its
# own expected time plus what its group still has to run after it, so a long chain starts early.
next_job() {
    local best=-1 best_weight=-1 k i g w j
    for k in "${!pending[@]}"; do
        i=${pending[$k]} g=${job_group[$i]}
        [[ $g != - && -n ${running_group[$g]:-} ]] && continue
        w=${job_expect[$i]}
        if [[ $g != - ]]; then
            for j in "${pending[@]}"; do
                [[ $j != "$i" && ${job_group[$j]} == "$g" ]] && w=$((w + job_expect[j]))
            done
        fi
        ((w > best_weight)) && best=$k best_weight=$w
    done
    ((best >= 0)) || return 1
    picked=$best
}

start_job() {
    local i=$1 log
    log=$steps/$(suite_slug "${job_ids[$i]}").log
    [[ ${job_group[$i]} != - ]] && running_group[${job_group[$i]}]=$i
    (
        started=$SECONDS
        suite_command "${job_row[$i]}" "${job_provider[$i]}" >"$log" 2>&1
        rc=$?
        printf '%s\t%s\t%s\n' "${job_ids[$i]}" "$((SECONDS - started))" "$rc" >>"$steps/times.tsv"
        exit "$rc"
    ) &
    pid_job[$!]=$i
    printf '\n##### started: %s (expected ~%s s)\n' "${job_ids[$i]}" "${job_expect[$i]}"
}

finish_job() {
    local pid=$1 rc=$2 i=${pid_job[$1]} log
    unset "pid_job[$pid]"
    [[ ${job_group[$i]} != - ]] && unset "running_group[${job_group[$i]}]"
    log=$steps/$(suite_slug "${job_ids[$i]}").log
    printf '\n##### %s: %s (log %s)\n' "${job_ids[$i]}" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")" "$log"
    cat "$log"
    if ((rc != 0)); then
        failed+=("$i")
        ((rc == 124 || rc == 137)) && printf "\nTIMEOUT: '%s' did not finish within its limit (killed)\n" "${job_ids[$i]}" >&2
    fi
}

while ((${#pending[@]} || ${#pid_job[@]})); do
    while ((${#pid_job[@]} < jobs)) && next_job; do
        start_job "${pending[$picked]}"
        unset "pending[$picked]"
        pending=("${pending[@]}")
    done
    finished=""
    wait -n -p finished "${!pid_job[@]}"
    rc=$?
    [[ -n $finished ]] && finish_job "$finished" "$rc"
done

((${#failed[@]} == 0)) && exit 0
printf '\n--- what failed:\n' >&2
for i in "${failed[@]}"; do
    log=$steps/$(suite_slug "${job_ids[$i]}").log
    printf "\n--- '%s' failed (first 30 lines naming it, from %s):\n" "${job_ids[$i]}" "$log" >&2
    grep -a -m 30 -E '✘|  FAIL |check failed|TIMEOUT|PROVIDER CRASHED|Fatal error|error:|Traceback|FAILED|STALE|without a .// trusted:' "$log" >&2 || true
done
exit 1
