#!/usr/bin/env bash
# with-portal-api.sh — run a command with the loopback fake Portal API running.
#
#   scripts/with-portal-api.sh CMD [ARGS...]
#
# Starts Tests/portal-api/fake_portal_api.py on 127.0.0.1 (a free port), waits for its port
# file, exports for CMD:
#   PORTAL_TEST_API_URL   e.g. http://127.0.0.1:40123 (admin routes under /_admin/)
#   PORTAL_TEST_API_HOST  e.g. 127.0.0.1:40123 (what PortalAuth / Portal take as apiHost)
# runs CMD, stops the server (SIGTERM) and exits with CMD's status (125 if it could not start).
set -euo pipefail
if [[ $# -eq 0 || $1 == -h || $1 == --help ]]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    [[ $# -eq 0 ]] && exit 64 || exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/portal-api.XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
python3 "$here/Tests/portal-api/fake_portal_api.py" --port 0 --port-file "$dir/url" --quiet \
  >"$dir/stdout" 2>"$dir/stderr" &
server_pid=$!
for _ in $(seq 1 100); do
  [ -s "$dir/url" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  sleep 0.05
done
if [ ! -s "$dir/url" ]; then
  echo "with-portal-api: the fake Portal API did not start:" >&2
  cat "$dir/stderr" >&2
  exit 125
fi
PORTAL_TEST_API_URL=$(head -n1 "$dir/url")
PORTAL_TEST_API_HOST=${PORTAL_TEST_API_URL#http://}
export PORTAL_TEST_API_URL PORTAL_TEST_API_HOST
status=0
"$@" || status=$?
exit "$status"
