#!/usr/bin/env bash
# A planted oversized item (docs/security.md): restore time of the real session with a planted item of our schema and auth
# environment ranked below it (persisted_at 0) whose secret is `{"v":1,"a":0,"a":0,…}` of SIZE
# bytes. Run inside a throw-away keyring:
#   scripts/with-keyring.sh --provider gnome-keyring bench/planted-item.sh CLI KEYRINGCTL [SIZE...]
# PLANTED_KILL_AFTER=SECONDS kills a restore that runs longer (exit 124).
# Prints one line per size: bytes, restore's exit status, wall time (ms), and its message.
set -u
cli=$1 ctl=$2
shift 2
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(100000 500000 1000000 4000000)
for size in "${sizes[@]}"; do
    env_id="planted-$size-$$"
    printf 'tok-real-%s' "$size" | "$cli" --env "$env_id" persist --end-user-id real-user >/dev/null || { echo "persist failed"; exit 2; }
    # Size 0: nothing planted (the restore's own cost, for comparison).
    [[ $size -eq 0 ]] || python3 -c '
import sys
n = int(sys.argv[1]); head = b"{\"v\":1"; member = b",\"a\":0"
k = max(0, (n - len(head) - 1) // len(member))
sys.stdout.buffer.write(head + member * k + b"}")' "$size" |
        "$ctl" store --schema io.portalhq.PortalKeyring.Session --content-type application/json \
            auth_environment_id="$env_id" session_generation=00 persisted_at=0 >/dev/null || { echo "plant failed"; exit 2; }
    start=$(date +%s%N)
    out=$(timeout "${PLANTED_KILL_AFTER:-0}" "$cli" --env "$env_id" --timeout-ms 1000 restore 2>&1)
    rc=$?
    end=$(date +%s%N)
    printf '%s\t%s\t%s\t%s\n' "$size" "$rc" "$(( (end - start) / 1000000 ))" "$(tr '\n' ' ' <<<"$out")"
done
