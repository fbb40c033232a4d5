import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// The sign-in methods an auth environment allows (`GET /api/v3/auth/methods`).
public struct AuthMethods: Sendable, Equatable {
    /// For example `["EMAIL_MAGIC_LINK", "GOOGLE", "APPLE"]`.
    public let allowedMethods: [String]
    /// Whether Portal creates a wallet for a new end user automatically.
    public let autoCreateWallet: Bool
}

/// What `handleRedirect(url:options:)` may do beyond the default (docs/sign-in.md#redirect-hijacking).
public struct RedirectOptions: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// The opt-out: exchange a grant although no sign-in was started for this auth environment
    /// (no pending sign-in marker), e.g. when the app's backend sends the magic links. This
    /// re-opens login CSRF: any link an attacker sends the end user can sign them in to the
    /// attacker's account (the different-end-user check still applies).
    public static let allowUnsolicited = RedirectOptions(rawValue: 1 << 0)
    /// The confirmation after `PortalAuthError.differentEndUser`: replace the stored session of
    /// another end user. Given with the same URL to the same instance, it persists the
    /// remembered exchange without a second one.
    public static let replaceDifferentEndUser = RedirectOptions(rawValue: 1 << 1)
}

extension PortalAuth {
    // MARK: - Public sign-in API (docs/sign-in.md)

    /// The sign-in methods this auth environment allows. Network: one request.
    /// - Throws: `networkFailure`, `rateLimited`, `unauthorized`, `clientError(status:message:)`,
    ///   `internalServerError(status:)`, `malformedResponse(field:)`.
    public func getMethods() throws(PortalAuthError) -> AuthMethods {
        struct Wire: Decodable { let allowedMethods: [String]?; let allowedAuthMethods: [String]?; let autoCreateWallet: Bool? }
        let wire: Wire = try api("GET", "/api/v3/auth/methods")
        // As PortalSwift reads it: no list is an empty one, and a method this library cannot
        // start (a newer backend's) is left out rather than offered to the end user.
        let methods = (wire.allowedAuthMethods ?? wire.allowedMethods ?? []).filter(Self.signInMethods.contains)
        return AuthMethods(allowedMethods: methods, autoCreateWallet: wire.autoCreateWallet ?? false)
    }

    /// The sign-in methods this library can start.
    static let signInMethods: Set<String> = ["EMAIL_MAGIC_LINK", "GOOGLE", "APPLE"]

    /// Asks Portal to email a sign-in link to `email` (trimmed and lower-cased) that opens this
    /// app's `redirectUrl`: `POST /api/v3/auth/magic-links` with the `MagicLinkConfig`'s sender
    /// and template, and `isAccountAbstracted` when set. The answer's body is not read. Never
    /// retried automatically: a retry could send a second email. Blocks (network).
    ///
    /// Records the pending sign-in marker first (see `handleRedirect(url:options:)`); when it cannot
    /// be written this throws `sessionStorageFailure` and sends nothing.
    /// - Throws: `magicLinkNotConfigured` (no `MagicLinkConfig`; checked first, nothing sent or
    ///   recorded), `invalidArgument(name: "email")`, `sessionStorageFailure`, `rateLimited`
    ///   (per address per minute; no wait is announced), `accountAbstractionUnavailable(message:)`,
    ///   `clientError(status:message:)`, `internalServerError(status:)`, `networkFailure`.
    public func sendMagicLink(email: String) throws(PortalAuthError) {
        guard let magicLink else { throw .magicLinkNotConfigured }
        let normalized = email.trimmingWhitespace().lowercased()
        guard normalized.contains("@"), normalized.utf8.count <= 320,
              !normalized.unicodeScalars.contains(where: { $0.isWhiteSpace }) else { throw .invalidArgument(name: "email") }
        try pendingSignIn.record()
        struct Body: Encodable {
            let email: String, redirectUrl: String, fromEmail: String, templateId: String
            let isAccountAbstracted: Bool?  // left out of the JSON when nil (synthesized encodeIfPresent)
        }
        _ = try apiResponse("POST", "/api/v3/auth/magic-links",
                            body: Body(email: normalized, redirectUrl: redirectUrl, fromEmail: magicLink.fromEmail,
                                       templateId: magicLink.templateId, isAccountAbstracted: isAccountAbstracted),
                            accountAbstraction: isAccountAbstracted != nil)
    }

    /// The Google authorize URL to open in the end user's browser (`GET
    /// /api/v3/auth/oauth/urls`, fetched fresh on every call: its `state` is single-use); Portal
    /// redirects back to `redirectUrl` with a grant for `handleRedirect(url:)`. Records the
    /// pending sign-in marker first, like `sendMagicLink(email:)`. Blocks (network).
    /// - Throws: `authMethodUnavailable(method: "GOOGLE")` when the auth environment has not
    ///   enabled Google; `accountAbstractionUnavailable(message:)`, `unauthorized` (unknown auth
    ///   environment, redirect URL not allow-listed, or a half-configured provider: the backend
    ///   does not say which), `rateLimited`, `clientError`, `internalServerError`,
    ///   `malformedResponse`, `networkFailure`, `sessionStorageFailure`.
    public func loginWithGoogle() throws(PortalAuthError) -> String { try authorizeURL(provider: "GOOGLE") }

    /// The Apple authorize URL; see `loginWithGoogle()` (`authMethodUnavailable(method: "APPLE")`).
    public func loginWithApple() throws(PortalAuthError) -> String { try authorizeURL(provider: "APPLE") }

    /// The longest redirect URL: 8192, PortalSwift's limit. A configured `redirectUrl` is held to
    /// it in UTF-8 bytes; `handleRedirect(url:)` counts UTF-16 code units, as PortalSwift does.
    public static let maxRedirectURLBytes = 8192

    /// Completes a sign-in from the redirect URL the browser opened (query parameters `token`,
    /// `error`, `authMethod=EMAIL_MAGIC_LINK`, `login_type=GOOGLE|APPLE`).
    ///
    /// Login CSRF defences (docs/sign-in.md#redirect-hijacking): a grant is exchanged only while a sign-in
    /// started by `sendMagicLink`, `loginWithGoogle` or `loginWithApple` for this auth environment,
    /// by this user (any process), is pending: at most `PendingSignIn.lifetimeSeconds` (15 min)
    /// old and not completed since; otherwise this throws `unsolicitedRedirect` and does nothing
    /// (`options: .allowUnsolicited` opts out). A signed-in redirect or `.totpRequired` completes
    /// (consumes) the pending sign-in. A stored session of a different end user is never replaced
    /// silently: this throws `differentEndUser` and stores nothing, and the exchange is remembered
    /// so that the same URL with `.replaceDifferentEndUser` persists it. The same end user
    /// signing in again replaces the session silently. Error redirects and URLs without a grant
    /// do nothing whatever the marker says, and are reported as before (an error, or `.notHandled`).
    ///
    /// The grant is exchanged once: delivering the same redirect again returns the same result
    /// without a second exchange; a TOTP step that `verifyTotp` completed since replays as the
    /// `.authenticated` it became (PortalSwift's rule). When the exchange succeeded but the keyring write failed, this
    /// throws `sessionStorageFailure` and a repeat delivery retries only the write. A failed
    /// exchange stays retryable. Blocks (network, keyring).
    ///
    /// The exchange's answer decides (`decodeExchange`): a non-blank `clientSessionToken` signs in
    /// (then `endUserId` is required); else a non-blank `userJwt` is the TOTP step (`endUserId` may
    /// be absent: "" then); neither is `invalidGrant`.
    ///
    /// - Returns: `.notHandled`, doing nothing, for a URL that is not this app's: longer than
    ///   `maxRedirectURLBytes` UTF-16 code units (checked before it is parsed), another URL
    ///   (`RedirectQuery`), no or an empty `token`, or no known method (`authMethod=EMAIL_MAGIC_LINK`,
    ///   else `login_type=GOOGLE|APPLE`, exact case); `.authenticated` with the session, persisted
    ///   before returning, and the client the API named; `.totpRequired`.
    /// - Throws: `authenticationFailed(message:)` for an `error` parameter (even beside a token),
    ///   `invalidGrant` (grant rejected, or an answer with neither token), `rateLimited`,
    ///   `clientError`, `internalServerError` (HTTP 5xx: not a failed sign-in; the grant stays
    ///   usable), `malformedResponse(field:)`, `networkFailure`, `sessionStorageFailure`,
    ///   `unsolicitedRedirect`, `differentEndUser(storedEndUserId:newEndUserId:)`.
    ///
    /// A desktop sign-in of this auth environment waiting in this process
    /// (`signInWithGoogle(timeout:)`) ends with this call's result or error (see
    /// `SignInInFlight.endDelivery`).
    public func handleRedirect(url: String, options: RedirectOptions = []) throws(PortalAuthError) -> RedirectResult {
        let delivery = SignInInFlight.shared.beginDelivery(authEnvironmentId)
        var errorRedirect: SignInInFlight.ErrorRedirect?
        do throws(PortalAuthError) {
            let result = try completeRedirect(url: url, options: options, errorRedirect: &errorRedirect)
            if let delivery { SignInInFlight.shared.endDelivery(delivery, .success(result)) }
            return result
        } catch {
            if let delivery { SignInInFlight.shared.endDelivery(delivery, .failure(error), errorRedirect: errorRedirect) }
            throw error
        }
    }

    /// The body of `handleRedirect(url:options:)`. An `error` redirect sets `errorRedirect` (with
    /// its `state` parameter) before it throws.
    private func completeRedirect(url: String, options: RedirectOptions,
                                  errorRedirect: inout SignInInFlight.ErrorRedirect?) throws(PortalAuthError) -> RedirectResult {
        // Not ours, as PortalSwift decides: longer than its limit (counted in UTF-16 code units, as
        // it counts), another URL, no grant, or no sign-in method it knows. Nothing is done.
        guard url.utf16.count <= Self.maxRedirectURLBytes,
              let query = RedirectQuery(url: url, redirectUrl: redirectUrl) else { return .notHandled }
        if let error = query["error"] {
            errorRedirect = SignInInFlight.ErrorRedirect(state: query["state"])
            // Attacker-controlled text on its way to a log or terminal: no control characters
            // (ESC sequences), at most 100 characters.
            let shown = DisplayText.sanitized(error, limit: DisplayText.maxRedirectErrorCharacters)
            throw .authenticationFailed(message: "sign-in failed: " + (shown.isEmpty ? "(no reason given)" : shown))
        }
        guard let grant = query["token"], !grant.isEmpty else { return .notHandled }
        let route: String
        if query["authMethod"] == "EMAIL_MAGIC_LINK" {
            route = "/api/v3/auth/magic-links/validations"
        } else if let type = query["login_type"], type == "GOOGLE" || type == "APPLE" {
            route = "/api/v3/auth/oauth/tokens"
        } else {
            return .notHandled
        }

        switch grants.begin(grant) {
        case .cached(let result):
            return result
        case .persistOnly(let exchange):
            return try finishAuthenticated(grant, exchange, options)
        case .exchange:
            // A grant nobody here asked for is not exchanged (login CSRF).
            guard options.contains(.allowUnsolicited) || pendingSignIn.isPending() else {
                grants.abandon(grant)
                throw .unsolicitedRedirect
            }
            // The keyring is read before the single-use grant is spent: a keyring that is locked
            // or unavailable now fails the sign-in with the grant intact (deliver the URL again
            // once it is unlocked), instead of exchanging it and losing the session when the
            // write fails in a handler process that then exits.
            do throws(PortalAuthError) {
                _ = try restoreSession()
            } catch {
                grants.abandon(grant)
                throw error
            }
        }
        let exchange: Exchange
        do {
            struct Body: Encodable { let token: String }
            exchange = try decodeExchange(try api("POST", route, body: Body(token: grant), unauthorized: .invalidGrant))
        } catch {
            grants.abandon(grant)
            throw error
        }
        if let userJwt = exchange.userJwt {
            let result = RedirectResult.totpRequired(TotpRequiredResult(userJwt: userJwt.string(), totpLink: exchange.totpLink,
                                                                        endUserId: exchange.endUserId ?? ""))
            grants.finish(grant, result)
            pendingSignIn.consume()
            return result
        }
        return try finishAuthenticated(grant, exchange, options)
    }

    /// What `verifyTotp` checks before anything else: `code` is 1–16 ASCII digits, `userJwt`
    /// is a token without whitespace or control characters (`checkNewToken`). The non-blocking C call checks the same before it returns.
    @_spi(Bindings)
    public static func checkTotpArguments(code: String, userJwt: String) throws(PortalAuthError) {
        guard !code.isEmpty, code.utf8.count <= 16, code.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw .invalidArgument(name: "code")
        }
        try checkNewToken(userJwt, name: "userJwt")
    }

    /// Completes a TOTP sign-in: sends `code` with the user JWT from `.totpRequired`, persists
    /// the session and returns it with the client the API named. The session's end user is the
    /// JWT's `endUserId` claim (the API's answer names none), read before the code is sent.
    /// Blocks (network, keyring).
    /// - Throws: `invalidArgument`; `invalidUserJwt` when the JWT has no readable `endUserId`
    ///   claim (nothing sent, the code stays unused); `authenticationFailed(message:)` when Portal
    ///   rejects the code (HTTP 401: a mistyped or stale code, or a JWT that expired or was used:
    ///   Portal does not say which; ask for a new code and call again with the same JWT, and
    ///   restart the sign-in when it keeps failing); `rateLimited`, `malformedResponse`,
    ///   `networkFailure`, `sessionStorageFailure`.
    ///
    /// Like `handleRedirect`, it never silently replaces another end user's stored session: when
    /// the JWT names an end user other than the stored one, it throws `differentEndUser` before
    /// the code is sent (the code stays unused); `.replaceDifferentEndUser` in `options`
    /// confirms. (C and Python: sign out first, then verify the same code again.)
    ///
    /// Portal spends the user JWT when it accepts a code, so this instance remembers an accepted
    /// exchange (in memory, filed under a SHA-256 digest of the user JWT, never the JWT; the
    /// token in wiped memory) until `clearPersistedSession()`. When Portal accepted the code but
    /// the keyring write failed (`sessionStorageFailure`, or `differentEndUser` from the check at
    /// write time), calling this again with the same JWT, from any thread and with whatever code
    /// the end user types then, retries only the write; after a successful write it returns the
    /// same result. A call with the same JWT while one is running waits for it. Once the code is
    /// accepted, cancelling the operation (`async`, C `_async`) no longer stops the keyring write
    /// (bounded by the keyring deadline): the session is persisted when the keyring allows, else
    /// kept for the retry. A rejected or unanswered exchange is not remembered.
    @discardableResult
    public func verifyTotp(code: String, userJwt: String,
                           options: RedirectOptions = []) throws(PortalAuthError) -> AuthenticatedResult {
        try Self.checkTotpArguments(code: code, userJwt: userJwt)
        // The session's only source of an end user: read first, so a JWT without one costs no code.
        let endUserId = try UserJwt.endUserId(of: userJwt)
        let jwt = SecretBytes.copyingUTF8(of: userJwt)
        // Without libgcrypt no keyring write could succeed: refuse before the code is spent.
        guard let key = TotpExchangeKey(userJwt: jwt) else {
            throw .sessionStorageFailure(message: "no encrypted transfer session: libgcrypt is not usable")
        }
        switch grants.beginTotp(key) {
        case .cached(let result):
            return result
        case .persistOnly(let exchange):
            return try finishTotp(key, userJwt, exchange, options)
        case .exchange:
            break
        }
        let exchange: TotpExchange
        do throws(PortalAuthError) {
            // Before the code is spent: the JWT's end user against the stored one (this also
            // reads the keyring first, so a locked keyring fails with the code still unused).
            try checkSameEndUser(endUserId, options)
            struct Body: Encodable { let code: String }
            exchange = try decodeTotpValidation(
                try api("POST", "/api/v3/auth/totps/validations", body: Body(code: code), bearer: jwt,
                        unauthorized: .authenticationFailed(message: Self.totpCodeRejected)),
                endUserId: endUserId)
        } catch {
            grants.abandonTotp(key)
            throw error
        }
        return try finishTotp(key, userJwt, exchange, options)
    }

    /// What a 401 on `/api/v3/auth/totps/validations` means to the end user. Portal answers a
    /// wrong code with a bare 401, the same as for a spent or expired JWT.
    static let totpCodeRejected = "the TOTP code was not accepted: enter the current code from the authenticator "
        + "app and try again (if it keeps failing, the sign-in has expired: start it again)"

    // MARK: - Exchange plumbing

    /// Persists an accepted TOTP exchange and records the outcome in the ledger: the session (and
    /// the redirect that asked for this JWT's code now replays it), or the exchange itself when
    /// the write failed (so a retry writes without a second exchange).
    private func finishTotp(_ key: TotpExchangeKey, _ userJwt: String, _ exchange: TotpExchange,
                            _ options: RedirectOptions) throws(PortalAuthError) -> AuthenticatedResult {
        do throws(PortalAuthError) {
            // The code is spent: the write runs under an operation token of its own, so that
            // cancelling the caller's operation no longer aborts it (the keyring deadline still
            // bounds it) and the worker persists when it can.
            let session = try OperationToken().run { () throws(PortalAuthError) -> PortalSession in
                try pendingSignIn.withCompletionLock { () throws(PortalAuthError) -> PortalSession in
                    try checkSameEndUser(exchange.endUserId, options)
                    return try persist(endUserId: exchange.endUserId, token: exchange.clientSessionToken)
                }
            }
            let result = AuthenticatedResult(session: session, clientId: exchange.clientId,
                                             isAccountAbstracted: exchange.isAccountAbstracted)
            grants.finishTotp(key, result)
            grants.completeTotpStep(userJwt: userJwt, result)
            return result
        } catch {
            grants.totpExchangedButNotPersisted(key, exchange)
            throw error
        }
    }

    /// The pending sign-in marker of this auth environment (`PendingSignIn`).
    var pendingSignIn: PendingSignIn { PendingSignIn(authEnvironmentId: authEnvironmentId) }

    /// Throws `differentEndUser` when the keyring holds a session of an end user other than
    /// `endUserId`, unless `options` confirms the replacement.
    private func checkSameEndUser(_ endUserId: String, _ options: RedirectOptions) throws(PortalAuthError) {
        guard !options.contains(.replaceDifferentEndUser), let stored = try restoreSession()?.endUserId,
              stored != endUserId else { return }
        throw PortalAuthError.differentEndUser(storedEndUserId: stored, newEndUserId: endUserId)
    }

    private func finishAuthenticated(_ grant: String, _ exchange: Exchange,
                                     _ options: RedirectOptions) throws(PortalAuthError) -> RedirectResult {
        guard let endUserId = exchange.endUserId, let token = exchange.clientSessionToken else {
            grants.abandon(grant)
            throw .malformedResponse(field: exchange.endUserId == nil ? "endUserId" : "clientSessionToken")
        }
        do throws(PortalAuthError) {
            // Check and store under the completion lock: of two sign-ins completing at once in
            // different processes, the second sees the first's session.
            let result = try pendingSignIn.withCompletionLock { () throws(PortalAuthError) -> RedirectResult in
                // Another end user's stored session is replaced only on confirmation.
                try checkSameEndUser(endUserId, options)
                let session = try persist(endUserId: endUserId, token: token)
                return .authenticated(AuthenticatedResult(session: session, clientId: exchange.clientId,
                                                          isAccountAbstracted: exchange.isAccountAbstracted))
            }
            grants.finish(grant, result)
            pendingSignIn.consume()
            return result
        } catch {
            grants.exchangedButNotPersisted(grant, exchange)
            throw error
        }
    }
}
