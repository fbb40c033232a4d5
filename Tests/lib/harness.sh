# Tests/lib/harness.sh — sourced (not run) by the shell test suites: how a check is reported,
# how a step is bounded in time, and the closing line.
#
#   source "$repo/Tests/lib/harness.sh"
#   ok "what held"; fail "what did not"      (bad and pass are the same two)
#   check "what" COMMAND...                  ok when COMMAND succeeds, else FAIL
#   harness_summary "suite/run.sh"           the closing line; its status is the suite's
#
# One line a check, in the form scripts/test.sh and Tests/mutants/run.sh grep for:
#   "  ok    WHAT", "  FAIL  WHAT", and "  note", "  skip", "  info", "  time" lines that count
#   nothing; with $harness_tag set (the provider), every line carries "[TAG] " before WHAT.
# The last line is "NAME: N passed, M failed": harness_summary returns 0 when nothing failed, so
# a suite that ends with it exits 1 on any failure.

# shellcheck shell=bash
# passed, failed and harness_tag are the caller's to read and set.
# shellcheck disable=SC2034

passed=0
failed=0
harness_tag=""
# The report's stdout, for reports from steps whose own output goes to a log file.
exec {harness_report_fd}>&1

harness_line() { # WORD TEXT...
    local word=$1
    shift
    printf '  %-5s %s%s\n' "$word" "${harness_tag:+[$harness_tag] }" "$*"
}
ok() { passed=$((passed + 1)); harness_line ok "$@"; }
fail() { failed=$((failed + 1)); harness_line FAIL "$@"; }
pass() { ok "$@"; }
bad() { fail "$@"; }
note() { harness_line note "$@"; }
skip() { harness_line skip "$@"; }
info() { harness_line info "$@"; }
timing() { harness_line time "$@"; }
# detail LINE...: lines under the check just reported (what was wanted, what came).
detail() { (($# == 0)) || printf '        %s\n' "$@"; }
section() { printf '\n== %s\n' "$*"; }

# check DESCRIPTION COMMAND...: ok when COMMAND succeeds (its output passes through), else FAIL.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}

# check_quiet DESCRIPTION COMMAND...: the same, COMMAND's output shown only when it fails.
check_quiet() {
    local what=$1 output
    shift
    if output=$("$@" 2>&1); then ok "$what"; else fail "$what"; detail "command: $*" "output: $output"; fi
}

# expect_exit WANT DESCRIPTION -- COMMAND...: COMMAND must exit with WANT. Leaves its stdout in
# $out, its stderr in $err and its status in $got for the checks that follow.
expect_exit() {
    local want=$1 what=$2 err_file
    shift 3
    err_file=$(mktemp "${TMPDIR:-/tmp}/harness-err.XXXXXX")
    out=$("$@" 2>"$err_file") && got=0 || got=$?
    err=$(cat "$err_file")
    rm -f "$err_file"
    if [[ $got == "$want" ]]; then ok "$what (exit $got)"; else fail "$what: exit $got, wanted $want; stdout: $out; stderr: $err"; fi
}

# bounded SECONDS STEP COMMAND...: runs COMMAND under a hard timeout (coreutils `timeout`, SIGKILL
# 10 s after SIGTERM); on expiry reports "FAIL  TIMEOUT: STEP did not finish within SECONDS s"
# on the report's stdout and returns 124; else COMMAND's status.
bounded() {
    local limit=$1 step=$2 rc
    shift 2
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    if ((rc == 124 || rc == 137)); then
        fail "TIMEOUT: $step did not finish within $limit s (killed)" >&"$harness_report_fd"
        return 124
    fi
    return $rc
}

# wait_for FILE ERE [SECONDS]: true once FILE has a line matching ERE; false after SECONDS (10).
wait_for() {
    local i
    for ((i = 0; i < ${3:-10} * 20; i++)); do
        grep -qE -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# run_logged NAME SECONDS COMMAND...: COMMAND under `bounded`, its output in $out/NAME.log (the
# suite's output folder, $out); ok with the log's last line, or FAIL with the log's failed lines.
run_logged() {
    local name=$1 limit=$2
    shift 2
    if bounded "$limit" "$name" "$@" >"$out/$name.log" 2>&1; then
        ok "$name ($(tail -n 1 "$out/$name.log"))"
    else
        fail "$name (log: ${out#"${repo:-}/"}/$name.log)"
        detail "$(grep -E 'FAIL|check failed|ERROR|Error|error' "$out/$name.log" | head -n 20)"
    fi
}

# harness_summary NAME [MORE]: the closing line "NAME: N passed, M failed[MORE]" after a blank
# line; true when nothing failed.
harness_summary() {
    printf '\n%s: %d passed, %d failed%s\n' "$1" "$passed" "$failed" "${2:-}"
    ((failed == 0))
}

