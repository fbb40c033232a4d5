// portal-session's command line: GNU-style options (--opt VALUE, --opt=VALUE, -h, --), the
// environment variables behind the global ones, and what a misspelling probably meant.
@_spi(PortalKeyringCLI) import PortalKeyringCore

/// A command-line mistake: exit 64. `showUsage` prints the whole usage text to stderr instead of
/// the one-line hint.
struct UsageError: Error {
    let message: String
    var showUsage = false
}

/// Options that take a value.
let valueOptions: Set<String> = ["--env", "--api-host", "--redirect-url", "--timeout-ms", "--prompt-timeout-ms",
                                 "--end-user-id", "--from-email", "--template-id", "--account-abstracted",
                                 "--sign-in-timeout-ms"]
/// Options that take none.
let flagOptions: Set<String> = ["--json", "--show-token", "--qr", "--help", "--version", "--allow-unsolicited",
                                "--replace-user"]
/// Options every command accepts.
let globalOptions: Set<String> = ["--env", "--api-host", "--redirect-url", "--timeout-ms", "--prompt-timeout-ms",
                                  "--help", "--version"]
/// Spellings of a secret in argv, refused with a pointer to stdin.
let secretOptions: Set<String> = ["--token", "--cst", "--client-session-token", "--user-jwt"]

struct Options {
    var env: String?
    var apiHost: String?
    var redirectUrl: String?
    /// The magic-link sender and template (`--from-email`, `--template-id`, or
    /// `PORTAL_MAGIC_LINK_FROM_EMAIL`, `PORTAL_MAGIC_LINK_TEMPLATE_ID`).
    var fromEmail: String?
    var templateId: String?
    /// `--account-abstracted true|false` or `PORTAL_ACCOUNT_ABSTRACTED`; nil: not sent.
    var isAccountAbstracted: Bool?
    var timeoutMs: UInt32 = KeyringTimeouts.default.callMilliseconds
    var promptTimeoutMs: UInt32 = KeyringTimeouts.default.promptMilliseconds
    /// `--sign-in-timeout-ms` of sign-in-with-google/-apple; default 15 minutes.
    var signInTimeout: Duration = PortalAuth.defaultSignInTimeout
    var command: String?
    var arguments: [String] = []
    var flags: Set<String> = []
    var values: [String: String] = [:]
    /// Where each global setting came from, by its core parameter name: the option
    /// (`--api-host`) or the environment variable (`PORTAL_API_HOST`), for error messages.
    var sources: [String: String] = [:]
    /// Every option given, for the per-command check.
    var given: [String] = []

    static func parse(_ argv: [String]) throws(UsageError) -> Options {
        var options = Options()
        for (name, variable) in [("authEnvironmentId", "PORTAL_AUTH_ENVIRONMENT_ID"), ("apiHost", "PORTAL_API_HOST"),
                                 ("redirectUrl", "PORTAL_REDIRECT_URL")] {
            guard let value = try environment(variable) else { continue }
            options.set(name, value, from: variable)
        }
        // Read by every command (a desktop URL handler runs handle-redirect with the same
        // environment as send-magic-link), used by those that sign in.
        options.fromEmail = try environment("PORTAL_MAGIC_LINK_FROM_EMAIL")
        options.templateId = try environment("PORTAL_MAGIC_LINK_TEMPLATE_ID")
        if let text = try environment("PORTAL_ACCOUNT_ABSTRACTED") {
            options.isAccountAbstracted = try Self.parseBool(text, "PORTAL_ACCOUNT_ABSTRACTED")
        }
        var index = 0
        var optionsEnded = false
        while index < argv.count {
            let argument = argv[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                if options.command == nil { options.command = argument } else { options.arguments.append(argument) }
                continue
            }
            if argument == "--" { optionsEnded = true; continue }
            // --opt=value: split at the first "=".
            var name = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            if name == "-h" { name = "--help" }
            if secretOptions.contains(name) {
                throw UsageError(message: "\(name): secrets are read from stdin, never from arguments")
            }
            if flagOptions.contains(name) {
                if inline != nil { throw UsageError(message: "\(name) takes no value") }
                options.flags.insert(name)
                options.given.append(name)
                continue
            }
            guard valueOptions.contains(name) else {
                let known = valueOptions.union(flagOptions).union(["-h"])
                throw UsageError(message: "unknown option \(name)" + suggestion(for: name, among: known))
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < argv.count else { throw UsageError(message: "\(name) needs a value") }
                value = argv[index]
                index += 1
            }
            options.given.append(name)
            try options.apply(name, value)
        }
        return options
    }

    /// Records a value; a later one replaces an earlier one (GNU getopt_long programs: the last
    /// occurrence wins, and an option overrides its environment variable).
    private mutating func apply(_ name: String, _ value: String) throws(UsageError) {
        switch name {
        case "--env": set("authEnvironmentId", value, from: name)
        case "--api-host": set("apiHost", value, from: name)
        case "--redirect-url": set("redirectUrl", value, from: name)
        case "--timeout-ms":
            guard let ms = UInt32(value), (1...600_000).contains(ms) else {
                throw UsageError(message: "--timeout-ms needs a number of milliseconds, 1 … 600000")
            }
            timeoutMs = ms
        case "--prompt-timeout-ms":
            guard let ms = UInt32(value), (1...600_000).contains(ms) else {
                throw UsageError(message: "--prompt-timeout-ms needs a number of milliseconds, 1 … 600000")
            }
            promptTimeoutMs = ms
        case "--from-email": fromEmail = value
        case "--template-id": templateId = value
        case "--account-abstracted": isAccountAbstracted = try Self.parseBool(value, name)
        case "--sign-in-timeout-ms":
            let most = UInt32(PortalAuth.defaultSignInTimeout.components.seconds * 1000)
            guard let ms = UInt32(value), (1...most).contains(ms) else {
                throw UsageError(message: "--sign-in-timeout-ms needs a number of milliseconds, 1 … \(most)")
            }
            signInTimeout = .milliseconds(ms)
        default: values[String(name.dropFirst(2))] = value
        }
    }

    private static func parseBool(_ text: String, _ source: String) throws(UsageError) -> Bool {
        switch text {
        case "true": return true
        case "false": return false
        default: throw UsageError(message: "\(source) needs true or false")
        }
    }

    private mutating func set(_ parameter: String, _ value: String, from source: String) {
        switch parameter {
        case "authEnvironmentId": env = value
        case "apiHost": apiHost = value
        default: redirectUrl = value
        }
        sources[parameter] = source
    }

    /// Refuses options the command does not use (`clear --show-token`): exit 64, not ignored.
    func checkOptions(for command: String) throws(UsageError) {
        let allowed = globalOptions.union(commandOptions[command] ?? [])
        if let stray = given.first(where: { !allowed.contains($0) }) {
            throw UsageError(message: "\(command) does not take \(stray)")
        }
    }

    func auth(needsRedirect: Bool = false) throws(UsageError) -> PortalAuth {
        guard let env else { throw UsageError(message: "no auth environment: pass --env ID or set PORTAL_AUTH_ENVIRONMENT_ID") }
        let redirect = redirectUrl ?? (needsRedirect ? nil : "portal-session://unused")
        guard let redirect else {
            throw UsageError(message: "no redirect URL: pass --redirect-url URL or set PORTAL_REDIRECT_URL")
        }
        var magicLink: MagicLinkConfig?
        switch (fromEmail, templateId) {
        case (let from?, let template?): magicLink = MagicLinkConfig(fromEmail: from, templateId: template)
        case (nil, nil): magicLink = nil
        case (nil, _): throw UsageError(message: "--template-id needs --from-email (or PORTAL_MAGIC_LINK_FROM_EMAIL) too")
        case (_, nil): throw UsageError(message: "--from-email needs --template-id (or PORTAL_MAGIC_LINK_TEMPLATE_ID) too")
        }
        do {
            return try PortalAuth(authEnvironmentId: env, redirectUrl: redirect, apiHost: apiHost ?? PortalAuth.defaultApiHost,
                                  magicLink: magicLink, isAccountAbstracted: isAccountAbstracted,
                                  keyringTimeouts: KeyringTimeouts(callMilliseconds: timeoutMs, promptMilliseconds: promptTimeoutMs))
        } catch {
            throw UsageError(message: usageMessage(for: error, sources: sources))
        }
    }

    func expectArguments(_ count: Int, _ what: String) throws(UsageError) {
        if arguments.count != count { throw UsageError(message: "\(command ?? "") expects \(what)") }
    }
}

/// " (did you mean X?)" when one of `candidates` is within two edits of `word`, else "".
func suggestion(for word: String, among candidates: some Sequence<String>) -> String {
    let best = candidates.map { (candidate: $0, distance: editDistance(word, $0)) }
        .filter { $0.distance <= 2 && $0.distance < $0.candidate.count / 2 + 1 }
        .min { ($0.distance, $0.candidate) < ($1.distance, $1.candidate) }
    return best.map { "; did you mean \($0.candidate)?" } ?? ""
}

/// Levenshtein distance over characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    var previous = Array(0...b.count)
    for i in 1...max(a.count, 1) where !a.isEmpty {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...max(b.count, 1) where !b.isEmpty {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return a.isEmpty ? b.count : previous[b.count]
}

/// What was wrong with an argument, in the command's own terms: the option or environment
/// variable it came from (`sources`, by core parameter name), and what is expected.
func usageMessage(for error: PortalAuthError, sources: [String: String] = [:]) -> String {
    switch error {
    case .unsolicitedRedirect:
        return "\(error) (start the sign-in again: send-magic-link or login-with-*; or --allow-unsolicited)"
    case .differentEndUser:
        return "\(error) (sign out with clear and sign in again, or confirm with --replace-user)"
    case .magicLinkNotConfigured:
        // The library's own wording names its Swift type; the command's user has options instead.
        return "magic link not configured: pass --from-email and --template-id, or set "
            + "PORTAL_MAGIC_LINK_FROM_EMAIL and PORTAL_MAGIC_LINK_TEMPLATE_ID; nothing sent"
    case .unauthorized:
        return "\(error): the Portal API refused the request; check --env, and that --redirect-url is "
            + "one the auth environment allows"
    case .invalidGrant:
        return "\(error): the sign-in link was used already, has expired or is unknown; "
            + "start the sign-in again (send-magic-link or login-with-*)"
    default: break
    }
    guard case .invalidArgument(let name) = error else { return error.description }
    let limit = "at most \(PortalAuth.maxIdentifierBytes) bytes, not blank, no control characters (tab, CR, LF, NUL …)"
    switch name {
    case "authEnvironmentId": return "invalid \(sources[name] ?? "--env"): \(limit)"
    case "redirectUrl":
        return "invalid \(sources[name] ?? "--redirect-url"): an absolute URL scheme://… (myapp://auth) "
            + "or scheme:/path (com.example.app:/oauth2redirect), at most \(PortalAuth.maxRedirectURLBytes) bytes, no whitespace or control characters"
    case "apiHost":
        return "invalid \(sources[name] ?? "--api-host"): a host name or IP address, optionally :port — no scheme or path"
    case "endUserId": return "invalid --end-user-id: \(limit)"
    case "clientSessionToken":
        return "invalid token on stdin: 1 … \(PortalAuth.maxTokenBytes) bytes of UTF-8 without whitespace or control "
            + "characters (one trailing newline is ignored)"
    case "userJwt":
        return "invalid user JWT on stdin: at most \(PortalAuth.maxTokenBytes) bytes, no whitespace or control characters"
    case "code": return "invalid TOTP code: digits only"
    case "email": return "invalid email address"
    case "fromEmail": return "invalid \(sources[name] ?? "--from-email"): \(limit)"
    case "templateId": return "invalid \(sources[name] ?? "--template-id"): \(limit)"
    default: return "invalid \(name)"
    }
}

func exitCode(for error: PortalAuthError) -> Exit {
    switch error {
    case .invalidArgument, .magicLinkNotConfigured: return .usage
    case .sessionStorageFailure: return .storage
    case .sessionInvalidated, .unauthorized, .networkFailure, .rateLimited, .malformedResponse, .invalidGrant,
         .invalidUserJwt, .authenticationFailed, .totpQrUnavailable, .cancelled, .authMethodUnavailable, .accountAbstractionUnavailable,
         .internalServerError, .clientError, .signInInProgress, .signInUnavailable, .signInTimedOut:
        return .signIn
    case .unsolicitedRedirect: return .unsolicited
    case .differentEndUser: return .differentUser
    }
}
