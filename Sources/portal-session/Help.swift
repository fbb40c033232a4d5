// portal-session's help texts, version and exit codes.

/// The tool's version: the library's (Include/portal_keyring.h PORTAL_KEYRING_VERSION_*;
/// Tests/cli/run.sh compares them).
let toolVersion = "0.1.0"

/// Exit codes (also in `portal-session --help`).
enum Exit: Int32 {
    case ok = 0             // restored / done
    case signedOut = 1      // restore/status: nothing usable stored; handle-redirect: not our URL
    case storage = 2        // the keyring could not be used this time (NOT signed out)
    case signIn = 3         // sign-in or network failure (invalid grant, rate limited, …)
    case unsolicited = 4    // handle-redirect: no sign-in pending (login CSRF); nothing done
    case differentUser = 5  // handle-redirect: another end user's session is stored; nothing stored
    case rejected = 6       // check: the Portal API rejected the session; that sign-in's item deleted
    case usage = 64         // bad command line (EX_USAGE)
    case output = 74        // stdout could not be written (EX_IOERR)
}

let usage = """
usage: portal-session [--env ID] [--api-host HOST] [--redirect-url URL] [--timeout-ms N]
                      [--prompt-timeout-ms N] COMMAND [ARGS]
       portal-session --help | -h | --version | help [COMMAND]

Keeps a Portal end user's session in the desktop's keyring (Secret Service) or a Flatpak app's.

commands:
  restore [--json] [--show-token]   restore the stored session (no network); print the end user id
  clear [--json]                    delete the stored session (sign out)
  persist --end-user-id ID [--json] store a session; the Client Session Token is read from stdin
  send-magic-link EMAIL --from-email ADDR --template-id ID [--account-abstracted BOOL] [--json]
                                    email a sign-in link that opens the redirect URL
  login-with-google | login-with-apple [--account-abstracted BOOL] [--json]
                                    print the authorize URL to open in a browser
  sign-in-with-google | sign-in-with-apple [--sign-in-timeout-ms N] [--account-abstracted BOOL]
                      [--json] [--show-token]
                                    open the sign-in page in the desktop's browser and wait until
                                    the URL handler (handle-redirect) has stored the session
  handle-redirect URL [--json] [--show-token] [--qr] [--allow-unsolicited] [--replace-user]
                                    complete a sign-in from a redirect URL (magic link, Google, Apple)
  verify-totp CODE [--json] [--show-token] [--replace-user]
                                    complete a TOTP sign-in; the user JWT is read from stdin
  check [--json]                    ask the Portal API whether the stored session is still valid;
                                    if rejected, sign out that sign-in (exit 6)
  status [--json]                   configuration and whether a session is stored
  watch [--json]                    print a line per sign-in, sign-out, lock or provider restart,
                                    by any process, until SIGINT/SIGTERM
  help [COMMAND]                    this text, or a command's (with its --json output)

options (or environment variables):
  --env ID             auth environment id (PORTAL_AUTH_ENVIRONMENT_ID)
  --api-host HOST      Portal API host, host[:port] (PORTAL_API_HOST; default api.portalhq.io)
  --redirect-url URL   the app's sign-in redirect URL, scheme://… or scheme:/path (PORTAL_REDIRECT_URL)
  --timeout-ms N       deadline for the keyring calls of one operation, ms (default 5000)
  --prompt-timeout-ms N
                       deadline for an unlock prompt, ms (default 30000; not counted in
                       --timeout-ms; a prompt not answered in time stays open)
  --from-email ADDR    magic-link sender, required by Portal (PORTAL_MAGIC_LINK_FROM_EMAIL)
  --template-id ID     magic-link email template, required by Portal (PORTAL_MAGIC_LINK_TEMPLATE_ID)
  --account-abstracted true|false
                       ask for an account-abstracted client or not (PORTAL_ACCOUNT_ABSTRACTED;
                       default: not sent, the auth environment decides)
  -h, --help           this text (after a command: that command's)
  --version            print "portal-session VERSION"

Options go before or after the command, as --opt VALUE or --opt=VALUE; "--" ends the options.
An option given twice takes the last value (an option overrides its environment variable).
--json prints one JSON object on stdout, also on failure (keys sorted; see help COMMAND; a usage
error's is {"status":"usage","message":…}); messages go to stderr.

exit status: 0 ok/restored, 1 signed out (or: not our redirect URL), 2 keyring unavailable,
locked or timed out (NOT signed out), 3 sign-in or network failure, 4 unsolicited redirect (no
sign-in pending), 5 another end user is signed in (nothing stored), 6 check: the Portal API
rejected the session (its sign-in deleted: signed out), 64 usage error, 74 stdout could not be
written (the command may have been carried out).
Tokens are never printed unless --show-token is given, and never accepted in arguments.
"""

let loginHelp = """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL login-with-google|login-with-apple
                          [--account-abstracted true|false] [--json]
    Prints the Google (Apple) authorize URL to open in the end user's browser; Portal then opens
    the redirect URL (handle-redirect). Records the pending sign-in first, like send-magic-link.
    --json prints {"authorizeUrl":URL}.
    exit: 0 printed, 2 the pending sign-in could not be recorded, 3 provider not enabled /
    account abstraction unavailable / network / rejected / server error, 64 usage.
    """

let signInHelp = """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL sign-in-with-google|sign-in-with-apple
                          [--sign-in-timeout-ms N] [--account-abstracted true|false] [--json] [--show-token]
    Signs the end user in with Google (Apple) in their browser and waits until it is done: fetches
    the authorize URL (recording the pending sign-in, like login-with-*), opens it with the
    desktop's URL opener (the default web browser, x-scheme-handler/https in mimeapps.list; the
    OpenURI portal in a Flatpak sandbox), then waits until the redirect URL's handler, another
    process such as handle-redirect (run by the scheme's .desktop handler), has stored the session,
    and prints it as restore does. This command stores nothing itself. A TOTP step or an error the
    handler meets is not seen here: it waits until --sign-in-timeout-ms (default and at most
    900000, 15 minutes). One per auth environment in a process.
    --json prints {"status":"authenticated","authEnvironmentId":…,"endUserId":…} (with
    --show-token also "clientSessionToken").
    exit: 0 signed in, 2 keyring unavailable or no session bus, 3 no browser could open the page /
    timed out / provider not enabled / network / rejected, 64 usage.
    """

let commandHelp: [String: String] = [
    "restore": """
    usage: portal-session [--env ID] restore [--json] [--show-token]
    Restores the stored session without a network call and prints the end user id.
    --json prints {"authEnvironmentId":…,"endUserId":…,"status":"restored"|"signedOut"|"unavailable"|"error"}
    ("unavailable" and "error" also carry "message"; with --show-token, "clientSessionToken").
    --show-token also prints the Client Session Token (a credential: handle with care).
    exit: 0 restored, 1 signed out, 2 keyring unavailable/locked/timed out, 64 usage.
    """,
    "clear": """
    usage: portal-session [--env ID] clear [--json]
    Deletes every stored session of the auth environment (succeeds when none is stored).
    --json prints {"authEnvironmentId":…,"status":"cleared"}.
    exit: 0 cleared, 2 keyring unavailable/locked/timed out, 64 usage.
    """,
    "persist": """
    usage: portal-session [--env ID] persist --end-user-id ID [--json]  < token
    Stores a session whose Client Session Token your backend issued. The token is read from
    stdin (one trailing line end, LF or CRLF, is removed); it is never accepted as an argument,
    and stdin must not be a terminal (pipe the token in). A token with any other whitespace or
    control character (a space, a tab, a second line end) is refused (exit 64), not trimmed.
    --json prints {"authEnvironmentId":…,"endUserId":…,"status":"stored"}.
    exit: 0 stored, 2 keyring failure (the previous session is intact; after a deadline, the
    provider may still complete the store: restore tells which session is current), 64 usage or
    bad token.
    """,
    "send-magic-link": """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL send-magic-link EMAIL
                          --from-email ADDR --template-id ID [--account-abstracted true|false] [--json]
    Asks Portal to email a sign-in link (to EMAIL, trimmed and lower-cased) that opens the
    redirect URL; the desktop handler then completes the sign-in (handle-redirect). Not retried.
    Portal requires the sender and the email template: --from-email and --template-id (or
    PORTAL_MAGIC_LINK_FROM_EMAIL and PORTAL_MAGIC_LINK_TEMPLATE_ID); without them nothing is
    sent or recorded (exit 64).
    First records the pending sign-in that handle-redirect requires (15 minutes; a file under
    $XDG_RUNTIME_DIR/portal-keyring — in a Flatpak $XDG_RUNTIME_DIR/app/$FLATPAK_ID/portal-keyring —
    else $XDG_STATE_HOME or ~/.local/state/portal-keyring-pending).
    --json prints {"status":"sent"}.
    exit: 0 sent, 2 the pending sign-in could not be recorded, 3 rate limited / network / rejected /
    server error, 64 usage, invalid email or no sender and template.
    """,
    "login-with-google": loginHelp,
    "login-with-apple": loginHelp,
    "sign-in-with-google": signInHelp,
    "sign-in-with-apple": signInHelp,
    "handle-redirect": """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL handle-redirect URL [--json] [--show-token]
                          [--qr] [--allow-unsolicited] [--replace-user]
    Completes a sign-in from the redirect URL a browser opened (desktop URL-scheme handler:
    Exec=portal-session … handle-redirect %u). Exchanges the grant with the Portal API and
    persists the session before reporting success. Prints the end user id, or "totp required"
    and "end user: ID" (with --show-token also the user JWT for verify-totp, and the enrolment
    link and "secret: BASE32" if the end user still has to set up the authenticator app; with
    --qr, that link as a QR code to scan, drawn for a dark terminal background: it encodes the
    secret, so --qr shows it with or without --show-token). To finish a TOTP step with
    verify-totp you need the user JWT: give --show-token (the grant is spent either way).
    Redirect hijacking (login CSRF): the grant is exchanged only while a sign-in started by
    send-magic-link or login-with-* (this user, any process, this --env) is pending, at most 15
    minutes; success completes it. Otherwise exit 4 and nothing is done; --allow-unsolicited opts
    out (then any link sent to the user can sign them in to someone else's account). When the
    keyring holds another end user's session, nothing is stored and the exit is 5: sign out
    (clear) and sign in again, or confirm up front with --replace-user (the grant is single-use,
    so a refused one cannot be confirmed afterwards). The same end user signing in is silent.
    --json prints {"status":"authenticated","authEnvironmentId":…,"endUserId":…} (with
    --show-token also "clientSessionToken"; "clientId" and "isAccountAbstracted" when Portal named
    them), {"status":"totpRequired","endUserId":…} (with --show-token also "userJwt", "totpLink"
    and "totpSecret"; with --qr, "totpQrSvg", the QR code as SVG), {"status":"notHandled"}, {"status":"unsolicitedRedirect"} or
    {"status":"differentEndUser","endUserId":NEW,"storedEndUserId":OLD}.
    exit: 0 signed in or TOTP required, 1 not this app's redirect URL, 2 keyring failure,
    3 sign-in failed (error redirect, invalid grant, rate limited, network), 4 unsolicited
    redirect, 5 another end user is signed in, 64 usage.
    """,
    "verify-totp": """
    usage: portal-session [--env ID] [--api-host HOST] verify-totp CODE [--json] [--show-token] [--replace-user]  < user-jwt
    Completes a TOTP sign-in; the user JWT from handle-redirect is read from stdin (not a
    terminal). Persists the session and prints the end user id. A rejected code exits 3: run it
    again with the same JWT and the current code (it keeps failing once the sign-in expired:
    start it again). A JWT without an endUserId claim exits 3 and nothing is sent. When another
    end user's session is stored, nothing is sent and it exits 5 (the code stays unused): sign
    out with clear and run it again, or confirm with --replace-user.
    --json prints {"status":"authenticated","authEnvironmentId":…,"endUserId":…} (with
    --show-token also "clientSessionToken"; "clientId" and "isAccountAbstracted" when Portal
    named them).
    exit: 0 signed in, 2 keyring failure, 3 wrong code / invalid JWT / network, 5 another end
    user is signed in, 64 usage.
    """,
    "check": """
    usage: portal-session [--env ID] [--api-host HOST] check [--json]
    Asks the Portal API whether the stored session is still accepted (GET /api/v3/clients/me with
    its Client Session Token; the token is never printed) and prints the end user id when it is.
    When the API rejects it (HTTP 401), that sign-in is signed out as a Portal does on any 401:
    its stored item is deleted — only that one, so a newer sign-in stored meanwhile by another
    process stays — and every portal-session watch prints "signed-out". A server error (5xx),
    another status or no answer clears nothing (exit 3): try again later. The keyring calls are
    bounded by --timeout-ms, the request by the library's limits (10 s to connect, 30 s in all).
    --json prints {"authEnvironmentId":…,"endUserId":…,"status":"valid"|"rejected"},
    {"authEnvironmentId":…,"status":"signedOut"}, or "status" "unavailable" or "error" with "message".
    exit: 0 valid, 1 signed out (nothing stored), 2 keyring unavailable/locked/timed out (also
    when the rejected item could not be deleted), 3 server error / network / unexpected answer
    (nothing cleared), 6 rejected (signed out), 64 usage.
    """,
    "status": """
    usage: portal-session [--env ID] status [--json]
    Prints the configuration, whether a session is stored (no network, no token), the Secret Service
    provider, the transfer algorithm protecting secrets on the bus, and the default collection.
    --json prints one object: "authEnvironmentId", "apiHost", "redirectUrl", "keyring" ("session
    stored", "signed out" or "unavailable: …"), "endUserId", "provider" ("NAME (pid N)"), "transfer",
    "defaultCollection" (a D-Bus path, "/" if none) as strings, and "defaultCollectionLocked" as
    true/false; over a file keyring "backend", "file", "linkedTo" (the file a symbolic link at
    "file" leads to), "items", "unreadableItems", and in a Flatpak
    sandbox "sandbox" and "secretPortal" (the Secret portal's version); keys without a value are
    left out.
    exit: 0 a session is stored, 1 signed out, 2 keyring unavailable/locked/timed out, 64 usage.
    """,
    "watch": """
    usage: portal-session [--env ID] watch [--json]
    Prints one line per change of the auth environment's stored session, made by any process,
    until SIGINT or SIGTERM: "signed-in END_USER_ID" (a new sign-in was stored), "signed-out"
    (cleared or invalidated), "locked" (the keyring is locked: NOT signed out; restore unlocks),
    "resync" (the keyring provider restarted: restore to learn the state), "available" (the
    keyring answers again after failed reads: restore to learn the state). No polling: it waits
    for the Secret Service's signals, then reads the keyring (never unlocking). Bursts are
    coalesced (at most one read per 100 ms), so the last line names the final state. Once the
    watch is live, "watching ID" goes to stderr: every change after it is reported; the state at
    that moment is not (run restore).
    --json prints one object per line (NDJSON): {"authEnvironmentId":…,"event":"signedIn"|
    "signedOut"|"locked"|"resync"|"available"} ("signedIn" also carries "endUserId"; "signedIn"
    and "signedOut" carry "origin":"otherProcess", as this command never writes).
    exit: 0 stopped by SIGINT/SIGTERM, 2 no session bus, 64 usage, 74 stdout could not be written.
    """,
]

/// The options each command accepts besides the global ones (`--env`, `--api-host`,
/// `--redirect-url`, `--timeout-ms`, `--prompt-timeout-ms`, `--help`, `--version`).
let commandOptions: [String: Set<String>] = [
    "restore": ["--json", "--show-token"],
    "clear": ["--json"],
    "persist": ["--json", "--end-user-id"],
    "send-magic-link": ["--json", "--from-email", "--template-id", "--account-abstracted"],
    "login-with-google": ["--json", "--account-abstracted"],
    "login-with-apple": ["--json", "--account-abstracted"],
    "sign-in-with-google": ["--json", "--account-abstracted", "--sign-in-timeout-ms", "--show-token"],
    "sign-in-with-apple": ["--json", "--account-abstracted", "--sign-in-timeout-ms", "--show-token"],
    "handle-redirect": ["--json", "--show-token", "--qr", "--allow-unsolicited", "--replace-user"],
    "verify-totp": ["--json", "--show-token", "--replace-user"],
    "check": ["--json"],
    "status": ["--json"],
    "watch": ["--json"],
]
