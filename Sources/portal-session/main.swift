// portal-session: the Portal session layer for shell scripts and desktop integration.
// Built on the Swift core; never prints a token unless --show-token is given, never logs one.
import FoundationEssentials
@_spi(PortalKeyringCLI) import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// Exit codes (also in `portal-session --help`).
enum Exit: Int32 {
    case ok = 0             // restored / done
    case signedOut = 1      // restore/status: nothing usable stored; handle-redirect: not our URL
    case storage = 2        // the keyring could not be used this time (NOT signed out)
    case signIn = 3         // sign-in or network failure (invalid grant, rate limited, …)
    case unsolicited = 4    // handle-redirect: no sign-in pending (login CSRF); nothing done
    case differentUser = 5  // handle-redirect: another end user's session is stored; nothing stored
    case usage = 64         // bad command line (EX_USAGE)
}

let usage = """
usage: portal-session [--env ID] [--api-host HOST] [--redirect-url URL] [--timeout-ms N]
                      [--prompt-timeout-ms N] COMMAND [ARGS]

Keeps a Portal end user's session in the Secret Service keyring (GNOME Keyring …).

commands:
  restore [--json] [--show-token]   restore the stored session (no network); print the end user id
  clear                             delete the stored session (sign out)
  persist --end-user-id ID          store a session; the Client Session Token is read from stdin
  send-magic-link EMAIL             email a sign-in link that opens the redirect URL
  login-with-google | login-with-apple
                                    print the authorize URL to open in a browser
  handle-redirect URL [--json] [--show-token] [--allow-unsolicited] [--replace-user]
                                    complete a sign-in from a redirect URL (magic link, Google, Apple)
  verify-totp CODE                  complete a TOTP sign-in; the user JWT is read from stdin
  status [--json]                   configuration and whether a session is stored
  help [COMMAND]                    this text, or a command's

options (or environment variables):
  --env ID             auth environment id (PORTAL_AUTH_ENVIRONMENT_ID)
  --api-host HOST      Portal API host, host[:port] (PORTAL_API_HOST; default api.portalhq.io)
  --redirect-url URL   the app's sign-in redirect URL (PORTAL_REDIRECT_URL)
  --timeout-ms N       deadline for the keyring calls of one operation, ms (default 5000)
  --prompt-timeout-ms N
                       deadline for an unlock prompt, ms (default 30000; not counted in
                       --timeout-ms; a prompt not answered in time stays open)

exit status: 0 ok/restored, 1 signed out (or: not our redirect URL), 2 keyring unavailable,
locked or timed out (NOT signed out), 3 sign-in or network failure, 4 unsolicited redirect (no
sign-in pending), 5 another end user is signed in (nothing stored), 64 usage error.
Tokens are never printed unless --show-token is given, and never accepted in arguments.
"""

let loginHelp = """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL login-with-google|login-with-apple
    Prints the Google (Apple) authorize URL to open in the end user's browser; Portal then opens
    the redirect URL (handle-redirect). Records the pending sign-in first, like send-magic-link.
    exit: 0 printed, 2 the pending sign-in could not be recorded, 3 network / rejected, 64 usage.
    """

let commandHelp: [String: String] = [
    "restore": """
    usage: portal-session [--env ID] restore [--json] [--show-token]
    Restores the stored session without a network call and prints the end user id.
    --json prints {"authEnvironmentId":…,"endUserId":…,"status":"restored"|"signedOut"|"unavailable"}
    (keys sorted; "unavailable" also carries "message").
    --show-token also prints the Client Session Token (a credential: handle with care).
    exit: 0 restored, 1 signed out, 2 keyring unavailable/locked/timed out, 64 usage.
    """,
    "clear": """
    usage: portal-session [--env ID] clear
    Deletes every stored session of the auth environment (succeeds when none is stored).
    exit: 0 cleared, 2 keyring unavailable/locked/timed out, 64 usage.
    """,
    "persist": """
    usage: portal-session [--env ID] persist --end-user-id ID  < token
    Stores a session whose Client Session Token your backend issued. The token is read from
    stdin (one trailing line end, LF or CRLF, is removed); it is never accepted as an argument.
    exit: 0 stored, 2 keyring failure (the previous session is intact; after a deadline, the
    provider may still complete the store: restore tells which session is current), 64 usage or
    bad token.
    """,
    "send-magic-link": """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL send-magic-link EMAIL
    Asks Portal to email a sign-in link (to EMAIL, trimmed and lower-cased) that opens the
    redirect URL; the desktop handler then completes the sign-in (handle-redirect). Not retried.
    First records the pending sign-in that handle-redirect requires (15 minutes; a file under
    $XDG_RUNTIME_DIR/portal-keyring, else $XDG_STATE_HOME or ~/.local/state/portal-keyring-pending).
    exit: 0 sent, 2 the pending sign-in could not be recorded, 3 rate limited / network / rejected,
    64 usage or invalid email.
    """,
    "login-with-google": loginHelp,
    "login-with-apple": loginHelp,
    "handle-redirect": """
    usage: portal-session [--env ID] [--api-host HOST] --redirect-url URL handle-redirect URL [--json] [--show-token]
                          [--allow-unsolicited] [--replace-user]
    Completes a sign-in from the redirect URL a browser opened (desktop URL-scheme handler:
    Exec=portal-session … handle-redirect %u). Exchanges the grant with the Portal API and
    persists the session before reporting success. Prints the end user id, or "totp required"
    (with --show-token also the user JWT for verify-totp, and the enrolment link if any).
    Redirect hijacking (login CSRF): the grant is exchanged only while a sign-in started by
    send-magic-link or login-with-* (this user, any process, this --env) is pending, at most 15
    minutes; success completes it. Otherwise exit 4 and nothing is done; --allow-unsolicited opts
    out (then any link sent to the user can sign them in to someone else's account). When the
    keyring holds another end user's session, nothing is stored and the exit is 5: sign out
    (clear) and sign in again, or confirm up front with --replace-user (the grant is single-use,
    so a refused one cannot be confirmed afterwards). The same end user signing in is silent.
    --json reports these as {"status":"unsolicitedRedirect"} and
    {"status":"differentEndUser","endUserId":NEW,"storedEndUserId":OLD}.
    exit: 0 signed in or TOTP required, 1 not this app's redirect URL, 2 keyring failure,
    3 sign-in failed (error redirect, invalid grant, rate limited, network), 4 unsolicited
    redirect, 5 another end user is signed in, 64 usage.
    """,
    "verify-totp": """
    usage: portal-session [--env ID] [--api-host HOST] verify-totp CODE  < user-jwt
    Completes a TOTP sign-in; the user JWT from handle-redirect is read from stdin. Persists the
    session and prints the end user id.
    exit: 0 signed in, 2 keyring failure, 3 wrong code / invalid JWT / network, 64 usage.
    """,
    "status": """
    usage: portal-session [--env ID] status [--json]
    Prints the configuration, whether a session is stored (no network, no token), the Secret Service
    provider, the transfer algorithm protecting secrets on the bus, and the default collection.
    exit: 0 a session is stored, 1 signed out, 2 keyring unavailable/locked/timed out, 64 usage.
    """,
]

struct UsageError: Error { let message: String }

/// Prints to stderr. `message` may carry outside text (a redirect, a server, D-Bus): control
/// characters (ESC sequences, CR) are removed and the length capped so it cannot drive the terminal.
func printError(_ message: String) {
    let safe = message.split(separator: "\n", omittingEmptySubsequences: false)
        .map { DisplayText.sanitized($0, limit: 1000) }.joined(separator: "\n")
    let line = Array("portal-session: \(safe)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// An environment variable, which must be UTF-8 (never repaired: a repaired id would name
/// another auth environment).
func environment(_ name: String) throws(UsageError) -> String? {
    guard let value = getenv(name) else { return nil }
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: strlen(value))
    guard let string = String(validating: bytes, as: UTF8.self) else {
        throw UsageError(message: "\(name) is not valid UTF-8")
    }
    return string.isEmpty ? nil : string
}

/// The command line, rejecting arguments that are not UTF-8 (Swift's `CommandLine.arguments`
/// would silently replace the bad bytes).
func commandLineArguments() throws(UsageError) -> [String] {
    var result: [String] = []
    for index in 1..<Int(CommandLine.argc) {
        guard let pointer = CommandLine.unsafeArgv[index] else { continue }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self),
                                        count: strlen(pointer))
        guard let argument = String(validating: bytes, as: UTF8.self) else {
            throw UsageError(message: "argument \(index) is not valid UTF-8")
        }
        result.append(argument)
    }
    return result
}

/// Reads stdin (at most `limit` bytes) and removes one trailing line end (LF or CRLF).
func readSecretFromStdin(limit: Int) throws(UsageError) -> String {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(0, &buffer, buffer.count)
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[0..<count])
        if bytes.count > limit + 2 { break }
    }
    defer { for index in bytes.indices { bytes[index] = 0 } }
    if bytes.last == 0x0A { bytes.removeLast() }
    if bytes.last == 0x0D { bytes.removeLast() }
    guard bytes.count <= limit else { throw UsageError(message: "the value on stdin is longer than \(limit) bytes") }
    guard let text = String(validating: bytes, as: UTF8.self) else { throw UsageError(message: "stdin is not valid UTF-8") }
    return text
}

/// Prints a line of stdout built from outside text (end user ids, keyring descriptions, server
/// messages) without its control characters: nothing read from elsewhere drives the terminal.
func say(_ text: String) {
    print(DisplayText.sanitized(text, limit: Int.max))
}

func json(_ object: [String: String?]) -> String {
    // Values keep every character: the encoder escapes C0 controls, and DEL and C1 controls are
    // escaped here, so nothing in the output drives a terminal and a script reads back exactly
    // what was stored.
    let present = object.compactMapValues { $0 }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let data = (try? encoder.encode(present)) ?? Data("{}".utf8)
    var out = ""
    for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
        if scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// What was wrong with an argument, in the command's own terms.
func usageMessage(for error: PortalAuthError) -> String {
    switch error {
    case .unsolicitedRedirect:
        return "\(error) (start the sign-in again: send-magic-link or login-with-*; or --allow-unsolicited)"
    case .differentEndUser:
        return "\(error) (sign out with clear and sign in again, or confirm with --replace-user)"
    default: break
    }
    guard case .invalidArgument(let name) = error else { return error.description }
    let limit = "at most \(PortalAuth.maxIdentifierBytes) bytes, not blank, no NUL"
    switch name {
    case "authEnvironmentId": return "invalid --env: \(limit)"
    case "redirectUrl": return "invalid --redirect-url: a URL with a scheme (myapp://…), \(limit)"
    case "apiHost": return "invalid --api-host: a host name or IP address, optionally :port — no scheme or path"
    case "endUserId": return "invalid --end-user-id: \(limit)"
    case "clientSessionToken": return "invalid token on stdin: 1 … \(PortalAuth.maxTokenBytes) bytes of UTF-8, not blank, no NUL"
    case "userJwt": return "invalid user JWT on stdin: not blank, no NUL, at most \(PortalAuth.maxTokenBytes) bytes"
    case "code": return "invalid TOTP code: digits only"
    case "email": return "invalid email address"
    default: return "invalid \(name)"
    }
}

func exitCode(for error: PortalAuthError) -> Exit {
    switch error {
    case .invalidArgument: return .usage
    case .sessionStorageFailure: return .storage
    case .sessionInvalidated, .unauthorized, .networkFailure, .rateLimited, .malformedResponse, .invalidGrant,
         .invalidUserJwt, .authenticationFailed, .cancelled:
        return .signIn
    case .unsolicitedRedirect: return .unsolicited
    case .differentEndUser: return .differentUser
    }
}

struct Options {
    var env: String?
    var apiHost: String?
    var redirectUrl: String?
    var timeoutMs: UInt32 = KeyringTimeouts.default.callMilliseconds
    var promptTimeoutMs: UInt32 = KeyringTimeouts.default.promptMilliseconds
    var command: String?
    var arguments: [String] = []
    var flags: Set<String> = []
    var values: [String: String] = [:]

    static func parse(_ argv: [String]) throws(UsageError) -> Options {
        var options = Options(env: try environment("PORTAL_AUTH_ENVIRONMENT_ID"),
                              apiHost: try environment("PORTAL_API_HOST"),
                              redirectUrl: try environment("PORTAL_REDIRECT_URL"))
        var index = 0
        func value(_ name: String) throws(UsageError) -> String {
            index += 1
            guard index < argv.count else { throw UsageError(message: "\(name) needs a value") }
            return argv[index]
        }
        while index < argv.count {
            let argument = argv[index]
            switch argument {
            case "--env": options.env = try value(argument)
            case "--api-host": options.apiHost = try value(argument)
            case "--redirect-url": options.redirectUrl = try value(argument)
            case "--timeout-ms":
                guard let ms = UInt32(try value(argument)), (1...600_000).contains(ms) else {
                    throw UsageError(message: "--timeout-ms needs a number of milliseconds, 1 … 600000")
                }
                options.timeoutMs = ms
            case "--prompt-timeout-ms":
                guard let ms = UInt32(try value(argument)), (1...600_000).contains(ms) else {
                    throw UsageError(message: "--prompt-timeout-ms needs a number of milliseconds, 1 … 600000")
                }
                options.promptTimeoutMs = ms
            case "--end-user-id": options.values["end-user-id"] = try value(argument)
            case "--json", "--show-token", "--help", "-h", "--allow-unsolicited", "--replace-user":
                options.flags.insert(argument == "-h" ? "--help" : argument)
            case "--token", "--cst", "--client-session-token", "--user-jwt":
                throw UsageError(message: "\(argument): secrets are read from stdin, never from arguments")
            default:
                if argument.hasPrefix("-") && argument.count > 1 {
                    throw UsageError(message: "unknown option \(argument)")
                }
                if options.command == nil { options.command = argument } else { options.arguments.append(argument) }
            }
            index += 1
        }
        return options
    }

    func auth(needsRedirect: Bool = false) throws(UsageError) -> PortalAuth {
        guard let env else { throw UsageError(message: "no auth environment: pass --env ID or set PORTAL_AUTH_ENVIRONMENT_ID") }
        let redirect = redirectUrl ?? (needsRedirect ? nil : "portal-session://unused")
        guard let redirect else {
            throw UsageError(message: "no redirect URL: pass --redirect-url URL or set PORTAL_REDIRECT_URL")
        }
        do {
            return try PortalAuth(authEnvironmentId: env, redirectUrl: redirect, apiHost: apiHost ?? PortalAuth.defaultApiHost,
                                  keyringTimeouts: KeyringTimeouts(callMilliseconds: timeoutMs, promptMilliseconds: promptTimeoutMs))
        } catch {
            throw UsageError(message: usageMessage(for: error))
        }
    }

    func expectArguments(_ count: Int, _ what: String) throws(UsageError) {
        if arguments.count != count { throw UsageError(message: "\(command ?? "") expects \(what)") }
    }
}

func printSession(_ session: PortalSession, status: String, options: Options) {
    if options.flags.contains("--json") {
        let token = options.flags.contains("--show-token") ? try? session.getToken() : nil
        print(json(["status": status, "endUserId": session.endUserId, "authEnvironmentId": session.authEnvironmentId,
                    "clientSessionToken": token]))
    } else {
        say(session.endUserId)
        if options.flags.contains("--show-token"), let token = try? session.getToken() { print(token) }
    }
}

func run(_ options: Options) throws(UsageError) -> Exit {
    guard let command = options.command, command != "help" else {
        if let topic = options.arguments.first, let text = commandHelp[topic] { print(text) } else { print(usage) }
        return .ok
    }
    guard commandHelp[command] != nil else { throw UsageError(message: "unknown command \(command) (see --help)") }
    if options.flags.contains("--help") {
        print(commandHelp[command] ?? usage)
        return .ok
    }
    do {
        switch command {
        case "restore":
            try options.expectArguments(0, "no arguments")
            guard let session = try options.auth().restoreSession() else {
                if options.flags.contains("--json") { print(json(["status": "signedOut", "authEnvironmentId": options.env])) }
                else { print("signed out") }
                return .signedOut
            }
            printSession(session, status: "restored", options: options)
            return .ok
        case "clear":
            try options.expectArguments(0, "no arguments")
            try options.auth().clearPersistedSession()
            print("cleared")
            return .ok
        case "persist":
            try options.expectArguments(0, "no arguments (the token is read from stdin)")
            guard let user = options.values["end-user-id"] else { throw UsageError(message: "persist needs --end-user-id ID") }
            let auth = try options.auth()
            let token = try readSecretFromStdin(limit: PortalAuth.maxTokenBytes)
            let session = try auth.persistSession(endUserId: user, clientSessionToken: token)
            say("stored session for end user \(session.endUserId)")
            return .ok
        case "send-magic-link":
            try options.expectArguments(1, "one email address")
            try options.auth(needsRedirect: true).sendMagicLink(email: options.arguments[0])
            print("sign-in link sent")
            return .ok
        case "login-with-google", "login-with-apple":
            try options.expectArguments(0, "no arguments")
            let auth = try options.auth(needsRedirect: true)
            say(command == "login-with-google" ? try auth.loginWithGoogle() : try auth.loginWithApple()) // server text
            return .ok
        case "handle-redirect":
            try options.expectArguments(1, "one URL")
            if options.arguments[0].allSatisfy({ $0.isWhitespace }) { throw UsageError(message: "handle-redirect: the URL is empty") }
            if options.arguments[0].utf8.count > PortalAuth.maxRedirectURLBytes {
                throw UsageError(message: "handle-redirect: the URL is longer than \(PortalAuth.maxRedirectURLBytes) bytes")
            }
            var redirectOptions: RedirectOptions = []
            if options.flags.contains("--allow-unsolicited") { redirectOptions.insert(.allowUnsolicited) }
            if options.flags.contains("--replace-user") { redirectOptions.insert(.replaceDifferentEndUser) }
            switch try options.auth(needsRedirect: true).handleRedirect(url: options.arguments[0], options: redirectOptions) {
            case .notHandled:
                printError("not this app's redirect URL; nothing done")
                return .signedOut
            case .authenticated(let session):
                printSession(session, status: "authenticated", options: options)
                return .ok
            case .totpRequired(let userJwt, let totpLink):
                let show = options.flags.contains("--show-token")
                if options.flags.contains("--json") {
                    print(json(["status": "totpRequired", "userJwt": show ? userJwt : nil, "totpLink": show ? totpLink : nil]))
                } else {
                    print("totp required")
                    if show { print(userJwt); if let totpLink { print(totpLink) } }
                }
                return .ok
            }
        case "verify-totp":
            try options.expectArguments(1, "one TOTP code")
            let auth = try options.auth()
            let jwt = try readSecretFromStdin(limit: PortalAuth.maxTokenBytes)
            let session = try auth.verifyTotp(code: options.arguments[0], userJwt: jwt)
            printSession(session, status: "authenticated", options: options)
            return .ok
        case "status":
            try options.expectArguments(0, "no arguments")
            let auth = try options.auth()
            var fields: [String: String?] = ["authEnvironmentId": auth.authEnvironmentId, "apiHost": auth.apiHost,
                                             "redirectUrl": options.redirectUrl]
            // The provider's description first: it shows whether the default collection is locked
            // before restore's unlock prompt can change that, and when the provider cannot answer,
            // restore would fail the same way — so status ends within one deadline, not two.
            var keyringKeys: [String] = []
            var unreachable: PortalAuthError?
            do {
                for (key, value) in try auth.describeKeyring() {
                    fields[key] = value
                    keyringKeys.append(key)
                }
            } catch {
                unreachable = error
            }
            let exit: Exit
            do {
                if let unreachable { throw unreachable }
                if let session = try auth.restoreSession() {
                    fields["keyring"] = "session stored"
                    fields["endUserId"] = session.endUserId
                    exit = .ok
                } else {
                    fields["keyring"] = "signed out"
                    exit = .signedOut
                }
            } catch {
                fields["keyring"] = "unavailable: \(error)"
                exit = .storage
            }
            if options.flags.contains("--json") {
                print(json(fields))
            } else {
                for key in ["authEnvironmentId", "apiHost", "redirectUrl", "keyring", "endUserId"] + keyringKeys {
                    if let value = fields[key] ?? nil { say("\(key): \(value)") }
                }
            }
            return exit
        default:
            throw UsageError(message: "unknown command \(command)")
        }
    } catch let error as UsageError {
        throw error
    } catch let error as PortalAuthError {
        printError(usageMessage(for: error))
        if command == "handle-redirect" && options.flags.contains("--json") {
            if case .differentEndUser(let stored, let new) = error {
                print(json(["status": "differentEndUser", "endUserId": new, "storedEndUserId": stored]))
            } else if case .unsolicitedRedirect = error {
                print(json(["status": "unsolicitedRedirect"]))
            }
        }
        if command == "restore" && options.flags.contains("--json") {
            print(json(["status": exitCode(for: error) == .storage ? "unavailable" : "error",
                        "authEnvironmentId": options.env, "message": usageMessage(for: error)]))
        }
        return exitCode(for: error)
    } catch {
        printError("\(error)")
        return .signIn
    }
}

// No core file, no ptrace by other processes of the user (docs/security.md, "Core dumps").
ProcessHardening.makeNonDumpable()
do {
    let arguments = try commandLineArguments()
    // The redirect URL's grant leaves /proc/PID/cmdline as soon as it has been copied.
    ProcessHardening.scrubURLQueriesFromArgv()
    let options = try Options.parse(arguments)
    exit(try run(options).rawValue)
} catch {
    printError("\(error.message)\nsee: portal-session --help")
    exit(Exit.usage.rawValue)
}
