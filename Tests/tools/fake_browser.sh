#!/bin/sh
# fake_browser.sh STATE_DIR URL — the web browser of the desktop sign-in tests
# (Tests/PortalKeyringTests/Support/FakeBrowser.swift, Tests/c/desktop_signin_test.c). The tests register
# it with the XDG desktop files GIO reads (a .desktop file whose Exec is this script with their
# STATE_DIR, the default for x-scheme-handler/http and https in mimeapps.list), so the library's
# URL opener launches it with the authorize URL.
#
# Each launch appends URL to STATE_DIR/opened, then does what STATE_DIR/mode says:
#   ignore   nothing more (an end user who never finishes);
#   deliver  requests URL from the fake Portal API (Tests/portal-api), which answers 302 to the
#            app's redirect URL with a grant for $PORTAL_TEST_END_USER, and writes that redirect
#            to STATE_DIR/redirect for the test to pass to handleRedirect in its own process;
#   handler  the same, then runs the URL handler's process, $PORTAL_TEST_CLI handle-redirect
#            REDIRECT (portal-session), and writes its exit status to STATE_DIR/handler-status.
# STATE_DIR/env (sourced) sets PORTAL_TEST_END_USER, PORTAL_TEST_CLI and the PORTAL_* variables
# portal-session reads.
dir=$1
url=$2
# Appended as a whole (a new file moved in place): a test that sees the file sees the URL in it.
{ cat "$dir/opened" 2>/dev/null; printf '%s\n' "$url"; } >"$dir/opened.tmp.$$" && mv -f "$dir/opened.tmp.$$" "$dir/opened"
mode=$(cat "$dir/mode")
[ "$mode" = ignore ] && exit 0
. "$dir/env"
location=$(python3 -c '
import http.client, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("GET", u.path + "?" + u.query + "&endUserId=" + urllib.parse.quote(sys.argv[2]))
print(c.getresponse().getheader("Location") or "")' "$url" "$PORTAL_TEST_END_USER") || exit 1
case $mode in
deliver)
    printf '%s\n' "$location" >"$dir/redirect.tmp" && mv "$dir/redirect.tmp" "$dir/redirect" ;;
handler)
    "$PORTAL_TEST_CLI" handle-redirect "$location" >"$dir/handler.out" 2>&1
    echo $? >"$dir/handler-status.tmp" && mv "$dir/handler-status.tmp" "$dir/handler-status" ;;
esac
