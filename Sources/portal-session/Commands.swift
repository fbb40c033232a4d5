// portal-session's commands: each one's work and its output (text, or --json).
@_spi(PortalKeyringCLI) import PortalKeyringCore

func printSession(_ session: PortalSession, status: String, options: Options,
                  clientId: String? = nil, isAccountAbstracted: Bool? = nil) {
    if options.flags.contains("--json") {
        let token = options.flags.contains("--show-token") ? try? session.getToken() : nil
        var fields: [String: JSONValue?] = ["status": .string(status), "endUserId": .string(session.endUserId),
                                            "authEnvironmentId": .string(session.authEnvironmentId),
                                            "clientSessionToken": token.map(JSONValue.string),
                                            "clientId": clientId.map(JSONValue.string)]
        if let isAccountAbstracted { fields["isAccountAbstracted"] = .bool(isAccountAbstracted) }
        output(json(values: fields))
    } else {
        say(session.endUserId)
        if options.flags.contains("--show-token"), let token = try? session.getToken() { outputSecret(token, "token") }
    }
}

/// Prints `object` with --json, else `text` (which may carry outside text: sanitized).
func report(_ options: Options, _ object: [String: String?], text: String) {
    if options.flags.contains("--json") { output(json(object)) } else { say(text) }
}

/// `help [COMMAND]`, `--help`, `--version` and a missing command; nil when a command is to run.
func helpOrVersion(_ options: Options) throws(UsageError) -> Exit? {
    if options.flags.contains("--version") {
        // `--version` alone: anything else with it is a mistake, not silently ignored.
        guard options.command == nil, options.arguments.isEmpty, options.flags == ["--version"] else {
            throw UsageError(message: "--version takes nothing else")
        }
        output("portal-session \(toolVersion)")
        return .ok
    }
    guard let command = options.command else {
        if options.flags.contains("--help") { output(usage); return .ok }
        throw UsageError(message: "no command given", showUsage: true)
    }
    if command == "help" {
        guard let topic = options.arguments.first, topic != "help" else { output(usage); return .ok }
        guard options.arguments.count == 1, let text = commandHelp[topic] else {
            throw UsageError(message: "help: no command \(options.arguments.joined(separator: " "))"
                + suggestion(for: topic, among: commandHelp.keys))
        }
        output(text)
        return .ok
    }
    guard let text = commandHelp[command] else {
        throw UsageError(message: "unknown command \(command)" + suggestion(for: command, among: commandHelp.keys))
    }
    if options.flags.contains("--help") { output(text); return .ok }
    return nil
}

func run(_ options: Options) throws(UsageError) -> Exit {
    if let exit = try helpOrVersion(options) { return exit }
    guard let command = options.command else { return .usage }
    try options.checkOptions(for: command)
    let env = options.env
    do {
        switch command {
        case "restore":
            try options.expectArguments(0, "no arguments")
            guard let session = try options.auth().restoreSession() else {
                report(options, ["status": "signedOut", "authEnvironmentId": env], text: "signed out")
                return .signedOut
            }
            printSession(session, status: "restored", options: options)
            return .ok
        case "clear":
            try options.expectArguments(0, "no arguments")
            try options.auth().clearPersistedSession()
            report(options, ["status": "cleared", "authEnvironmentId": env], text: "cleared")
            return .ok
        case "persist":
            guard options.arguments.isEmpty else {
                throw UsageError(message: "persist takes no arguments: give the end user id with --end-user-id ID "
                    + "(the token is read from stdin)")
            }
            guard let user = options.values["end-user-id"] else { throw UsageError(message: "persist needs --end-user-id ID") }
            let auth = try options.auth()
            let token = try readSecretFromStdin(limit: PortalAuth.maxTokenBytes, what: "the Client Session Token",
                                                example: "printf '%s' \"$TOKEN\" | portal-session persist --end-user-id ID")
            let session = try auth.persistSession(endUserId: user, clientSessionToken: token)
            report(options, ["status": "stored", "authEnvironmentId": env, "endUserId": session.endUserId],
                   text: "stored session for end user \(session.endUserId)")
            return .ok
        case "send-magic-link":
            try options.expectArguments(1, "one email address")
            try options.auth(needsRedirect: true).sendMagicLink(email: options.arguments[0])
            report(options, ["status": "sent"], text: "sign-in link sent")
            return .ok
        case "login-with-google", "login-with-apple":
            try options.expectArguments(0, "no arguments")
            let auth = try options.auth(needsRedirect: true)
            let url = command == "login-with-google" ? try auth.loginWithGoogle() : try auth.loginWithApple()
            report(options, ["authorizeUrl": url], text: url) // server text
            return .ok
        case "sign-in-with-google", "sign-in-with-apple":
            try options.expectArguments(0, "no arguments")
            let auth = try options.auth(needsRedirect: true)
            let result = command == "sign-in-with-google" ? try auth.signInWithGoogle(timeout: options.signInTimeout)
                : try auth.signInWithApple(timeout: options.signInTimeout)
            switch result {
            case .authenticated(let signedIn): printSignedIn(signedIn, options: options)
            case .totpRequired(let step): printTotpStep(step, options: options)
            }
            return .ok
        case "handle-redirect":
            return try handleRedirect(options)
        case "verify-totp":
            try options.expectArguments(1, "one TOTP code")
            let auth = try options.auth()
            let jwt = try readSecretFromStdin(limit: PortalAuth.maxTokenBytes, what: "the user JWT",
                                              example: "printf '%s' \"$JWT\" | portal-session verify-totp CODE")
            let signedIn = try auth.verifyTotp(code: options.arguments[0], userJwt: jwt,
                                               options: options.flags.contains("--replace-user") ? .replaceDifferentEndUser : [])
            printSignedIn(signedIn, options: options)
            return .ok
        case "status":
            try options.expectArguments(0, "no arguments")
            return try status(options)
        case "check":
            try options.expectArguments(0, "no arguments")
            return try check(options)
        case "watch":
            return try watch(options)
        default:
            throw UsageError(message: "unknown command \(command)")
        }
    } catch let error as UsageError {
        throw error
    } catch let error as PortalAuthError {
        printError(usageMessage(for: error, sources: options.sources))
        // With --json, every command prints exactly one object, also on failure.
        if options.flags.contains("--json") {
            if case .differentEndUser(let stored, let new) = error {
                output(json(["status": "differentEndUser", "endUserId": new, "storedEndUserId": stored]))
            } else if case .unsolicitedRedirect = error {
                output(json(["status": "unsolicitedRedirect"]))
            } else if exitCode(for: error) == .usage {
                // An argument the library refused (a blank token, say): the usage object, as for
                // the command line's own usage errors (docs/cli.md#json-output).
                output(json(["status": "usage", "message": usageMessage(for: error, sources: options.sources)]))
            } else {
                output(json(["status": exitCode(for: error) == .storage ? "unavailable" : "error",
                            "authEnvironmentId": env, "message": usageMessage(for: error, sources: options.sources)]))
            }
        }
        return exitCode(for: error)
    } catch {
        printError("\(error)")
        if options.flags.contains("--json") {
            output(json(["status": "error", "authEnvironmentId": env, "message": DisplayText.sanitized("\(error)")]))
        }
        return .signIn
    }
}

func handleRedirect(_ options: Options) throws -> Exit {
    try options.expectArguments(1, "one URL")
    let url = options.arguments[0]
    if url.isBlank { throw UsageError(message: "handle-redirect: the URL is empty") }
    var redirectOptions: RedirectOptions = []
    if options.flags.contains("--allow-unsolicited") { redirectOptions.insert(.allowUnsolicited) }
    if options.flags.contains("--replace-user") { redirectOptions.insert(.replaceDifferentEndUser) }
    switch try options.auth(needsRedirect: true).handleRedirect(url: url, options: redirectOptions) {
    case .notHandled:
        printError("not this app's redirect URL; nothing done")
        if options.flags.contains("--json") { output(json(["status": "notHandled"])) }
        return .signedOut
    case .authenticated(let signedIn):
        printSignedIn(signedIn, options: options)
        return .ok
    case .totpRequired(let step):
        printTotpStep(step, options: options)
        return .ok
    }
}

func printSignedIn(_ signedIn: AuthenticatedResult, options: Options) {
    printSession(signedIn.session, status: "authenticated", options: options, clientId: signedIn.clientId,
                 isAccountAbstracted: signedIn.isAccountAbstracted)
}

/// The TOTP step: its end user always (the exchange's, else the JWT's claim, which the session
/// will be stored under; not a secret); the user JWT, the enrolment link and its secret only with
/// --show-token (credentials); the link as a QR code to scan only with --qr (it encodes the secret).
func printTotpStep(_ step: TotpRequiredResult, options: Options) {
    let show = options.flags.contains("--show-token")
    let endUserId = step.endUserId.isEmpty ? (try? PortalAuth.endUserId(ofUserJwt: step.userJwt)) ?? "" : step.endUserId
    var qrCode: QRCode?
    if options.flags.contains("--qr"), step.totpLink != nil {
        do { qrCode = try step.qrCode() } catch { printError("\(error)") }
    }
    if options.flags.contains("--json") {
        output(json(["status": "totpRequired", "endUserId": endUserId, "userJwt": show ? step.userJwt : nil,
                     "totpLink": show ? step.totpLink : nil, "totpSecret": show ? step.totpSecret : nil,
                     "totpQrSvg": qrCode?.svg]))
    } else {
        output("totp required")
        if !endUserId.isEmpty { say("end user: " + endUserId) }
        if show {
            outputSecret(step.userJwt, "user JWT")
            if let totpLink = step.totpLink { say(totpLink) }
            if let secret = step.totpSecret { output("secret: " + secret) }
        }
        // Half blocks, light modules drawn: scans on a dark terminal background.
        if let qrCode { output(String(qrCode.terminalText().dropLast())) }
    }
}

func status(_ options: Options) throws -> Exit {
    let auth = try options.auth()
    var fields: [String: JSONValue?] = ["authEnvironmentId": .string(auth.authEnvironmentId), "apiHost": .string(auth.apiHost),
                                        "redirectUrl": options.redirectUrl.map(JSONValue.string)]
    var text: [String: String] = [:]
    // The provider's description first: it shows whether the default collection is locked
    // before restore's unlock prompt can change that, and when the provider cannot answer,
    // restore would fail the same way — so status ends within one deadline, not two.
    var keyringKeys: [String] = []
    var unreachable: PortalAuthError?
    do {
        for (key, value) in try auth.describeKeyring() {
            fields[key] = keyringJSONValue(key: key, value: value)
            text[key] = value
            keyringKeys.append(key)
        }
    } catch {
        unreachable = error
    }
    let exit: Exit
    do {
        if let unreachable { throw unreachable }
        if let session = try auth.restoreSession() {
            fields["keyring"] = .string("session stored")
            fields["endUserId"] = .string(session.endUserId)
            exit = .ok
        } else {
            fields["keyring"] = .string("signed out")
            exit = .signedOut
        }
    } catch {
        fields["keyring"] = .string("unavailable: \(error)")
        exit = .storage
    }
    fields["secretMemory"] = .string(SecretMemory.summary)
    if options.flags.contains("--json") {
        output(json(values: fields))
    } else {
        for key in ["authEnvironmentId", "apiHost", "redirectUrl", "keyring", "endUserId"] + keyringKeys + ["secretMemory"] {
            if let value = text[key] ?? fields[key].flatMap({ $0 }).flatMap({ if case .string(let s) = $0 { s } else { nil } }) {
                say("\(key): \(value)")
            }
        }
    }
    return exit
}
