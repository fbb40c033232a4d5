import CCurl
import FoundationEssentials
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

/// What `handleRedirect(url:)` made of a URL.
public enum RedirectResult: Sendable {
    /// The URL is not this app's redirect URL (other scheme, host or path): nothing was done.
    case notHandled
    /// Signed in; the session was persisted before this was returned.
    case authenticated(PortalSession)
    /// The end user must enter a TOTP code: call `verifyTotp(code:userJwt:)`. Nothing was
    /// persisted. `totpLink` (an `otpauth://` enrolment link) is present for first-time setup.
    case totpRequired(userJwt: String, totpLink: String?)
}

/// What `handleRedirect(url:options:)` may do beyond the default (README "Redirect hijacking").
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
    // MARK: - Public sign-in API (SPEC §3 sign-in row, §4)

    /// The sign-in methods this auth environment allows. Network: one request.
    /// - Throws: `networkFailure`, `rateLimited`, `authenticationFailed(message:)`,
    ///   `malformedResponse(field:)`.
    public func getMethods() throws(PortalAuthError) -> AuthMethods {
        struct Wire: Decodable { let allowedMethods: [String]?; let allowedAuthMethods: [String]?; let autoCreateWallet: Bool? }
        let wire: Wire = try api("GET", "/api/v3/auth/methods")
        guard let methods = wire.allowedMethods ?? wire.allowedAuthMethods else {
            throw .malformedResponse(field: "allowedMethods")
        }
        return AuthMethods(allowedMethods: methods, autoCreateWallet: wire.autoCreateWallet ?? false)
    }

    /// Asks Portal to email a sign-in link to `email` (trimmed and lower-cased) that opens this
    /// app's `redirectUrl`. Never retried automatically: a retry could send a second email.
    /// - Throws: `invalidArgument(name: "email")`, `rateLimited`, `networkFailure`, `authenticationFailed`.
    ///
    /// Records the pending sign-in marker first (see `handleRedirect(url:options:)`); when it cannot
    /// be written this throws `sessionStorageFailure` and sends nothing.
    public func sendMagicLink(email: String) throws(PortalAuthError) {
        let normalized = String(email.unicodeScalars.drop { $0.properties.isWhitespace }.reversed()
            .drop { $0.properties.isWhitespace }.reversed().map(Character.init)).lowercased()
        guard normalized.contains("@"), normalized.utf8.count <= 320,
              !normalized.contains(where: { $0.isWhitespace }) else { throw .invalidArgument(name: "email") }
        try pendingSignIn.record()
        struct Body: Encodable { let email: String; let redirectUrl: String }
        struct Empty: Decodable {}
        let _: Empty = try api("POST", "/api/v3/auth/magic-links", body: Body(email: normalized, redirectUrl: redirectUrl))
    }

    /// The Google authorize URL to open in the end user's browser; Portal redirects back to
    /// `redirectUrl` (sent form-encoded) with a grant for `handleRedirect(url:)`. Records the
    /// pending sign-in marker first, like `sendMagicLink(email:)`.
    public func loginWithGoogle() throws(PortalAuthError) -> String { try authorizeURL(provider: "GOOGLE") }

    /// The Apple authorize URL; see `loginWithGoogle()`.
    public func loginWithApple() throws(PortalAuthError) -> String { try authorizeURL(provider: "APPLE") }

    /// The longest redirect URL `handleRedirect(url:)` accepts, in UTF-8 bytes (PortalSwift's limit).
    public static let maxRedirectURLBytes = 8192

    /// Completes a sign-in from the redirect URL the browser opened (query parameters `token`,
    /// `error`, `authMethod=EMAIL_MAGIC_LINK`, `login_type=GOOGLE|APPLE`).
    ///
    /// Login CSRF defences (README "Redirect hijacking"): a grant is exchanged only while a sign-in
    /// started by `sendMagicLink`, `loginWithGoogle` or `loginWithApple` for this auth environment,
    /// by this user (any process), is pending: at most `PendingSignIn.lifetimeSeconds` (15 min)
    /// old and not completed since; otherwise this throws `unsolicitedRedirect` and does nothing
    /// (`options: .allowUnsolicited` opts out). A signed-in redirect or `.totpRequired` completes
    /// (consumes) the pending sign-in. A stored session of a different end user is never replaced
    /// silently: this throws `differentEndUser` and stores nothing, and the exchange is remembered
    /// so that the same URL with `.replaceDifferentEndUser` persists it. The same end user
    /// signing in again replaces the session silently. Error redirects and URLs without a grant
    /// do nothing whatever the marker says, and are reported as before.
    ///
    /// The grant is exchanged once: delivering the same redirect again returns the same result
    /// without a second exchange. When the exchange succeeded but the keyring write failed, this
    /// throws `sessionStorageFailure` and a repeat delivery retries only the write. A failed
    /// exchange stays retryable. Blocks (network, keyring).
    ///
    /// - Returns: `.notHandled` for a URL that is not this app's redirect URL; `.authenticated`
    ///   with the session, persisted before returning; `.totpRequired`.
    /// - Throws: `authenticationFailed(message:)` for an `error` parameter or an unknown method,
    ///   `invalidGrant`, `rateLimited`, `malformedResponse(field:)`, `networkFailure`,
    ///   `sessionStorageFailure`; `invalidArgument(name: "url")` for a URL longer than
    ///   `maxRedirectURLBytes` (8192 bytes, PortalSwift's limit), before it is parsed;
    ///   `unsolicitedRedirect`, `differentEndUser(storedEndUserId:newEndUserId:)`.
    public func handleRedirect(url: String, options: RedirectOptions = []) throws(PortalAuthError) -> RedirectResult {
        guard url.utf8.count <= Self.maxRedirectURLBytes else { throw .invalidArgument(name: "url") }
        guard let query = RedirectQuery(url: url, redirectUrl: redirectUrl) else { return .notHandled }
        if let error = query["error"] {
            // Attacker-controlled text on its way to a log or terminal: no control characters
            // (ESC sequences), at most 100 characters.
            let shown = DisplayText.sanitized(error, limit: DisplayText.maxRedirectErrorCharacters)
            throw .authenticationFailed(message: "sign-in failed: \(shown)")
        }
        guard let grant = query["token"], !grant.isEmpty else {
            throw .authenticationFailed(message: "the redirect carries no token")
        }
        let route: String
        if query["authMethod"] == "EMAIL_MAGIC_LINK" {
            route = "/api/v3/auth/magic-links/validations"
        } else if let type = query["login_type"], type == "GOOGLE" || type == "APPLE" {
            route = "/api/v3/auth/oauth/tokens"
        } else {
            throw .authenticationFailed(message: "the redirect names no known sign-in method")
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
            let result = RedirectResult.totpRequired(userJwt: userJwt.string(), totpLink: exchange.totpLink)
            grants.finish(grant, result)
            pendingSignIn.consume()
            return result
        }
        return try finishAuthenticated(grant, exchange, options)
    }

    /// What `verifyTotp` checks before anything else: `code` is 1–16 ASCII digits, `userJwt`
    /// is a token without whitespace or control characters (`checkNewToken`). The non-blocking C call checks the same before it returns.
    @_spi(PortalKeyringC)
    public static func checkTotpArguments(code: String, userJwt: String) throws(PortalAuthError) {
        guard !code.isEmpty, code.utf8.count <= 16, code.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw .invalidArgument(name: "code")
        }
        try checkNewToken(userJwt, name: "userJwt")
    }

    /// Completes a TOTP sign-in: exchanges `code` with the user JWT from `.totpRequired`,
    /// persists the session (end user id from the JWT's claims when the response lacks it) and
    /// returns it. Blocks (network, keyring).
    /// - Throws: `invalidArgument`, `invalidUserJwt` (expired, used or malformed JWT),
    ///   `authenticationFailed(message:)` (wrong code), `rateLimited`, `malformedResponse`,
    ///   `networkFailure`, `sessionStorageFailure`.
    ///
    /// Like `handleRedirect`, it never silently replaces another end user's stored session: when
    /// the JWT names an end user other than the stored one, it throws `differentEndUser` before
    /// the code is sent (the code stays unused); `.replaceDifferentEndUser` in `options`
    /// confirms. (C and Python: sign out first, then verify the same code again.)
    ///
    /// An accepted code is exchanged once per instance, like a redirect grant: this instance
    /// remembers the exchange (in memory, filed under a SHA-256 digest of user JWT and code, never
    /// the JWT; the token in wiped memory) until `clearPersistedSession()`. When Portal accepted
    /// the code but the keyring write failed (`sessionStorageFailure`, or `differentEndUser` from
    /// the check at write time), calling this again with the same code and JWT, from any thread,
    /// retries only the write; after a successful write it returns the same session. A call
    /// with the same code and JWT while one is running waits for it. Once the code is accepted,
    /// cancelling the operation (`async`, C `_async`) no longer stops the keyring write (bounded
    /// by the keyring deadline): the session is persisted when the keyring allows, else kept
    /// for the retry. A rejected or unanswered exchange is not remembered.
    @discardableResult
    public func verifyTotp(code: String, userJwt: String,
                           options: RedirectOptions = []) throws(PortalAuthError) -> PortalSession {
        try Self.checkTotpArguments(code: code, userJwt: userJwt)
        let jwt = SecretBytes.copyingUTF8(of: userJwt)
        // Without libgcrypt no keyring write could succeed: refuse before the code is spent.
        guard let key = TotpExchangeKey(userJwt: jwt, code: code) else {
            throw .sessionStorageFailure(message: "no encrypted transfer session: libgcrypt is not usable")
        }
        switch grants.beginTotp(key) {
        case .cached(let session):
            return session
        case .persistOnly(let endUserId, let token):
            return try finishTotp(key, endUserId, token, options)
        case .exchange:
            break
        }
        let endUserId: String, token: SecretBytes
        do throws(PortalAuthError) {
            try checkBeforeSpendingTheCode(userJwt, options)
            struct Body: Encodable { let code: String }
            var exchange = try decodeExchange(try api("POST", "/api/v3/auth/totps/validations", body: Body(code: code),
                                                      bearer: jwt, unauthorized: .invalidUserJwt), requireUser: false)
            if exchange.endUserId == nil { exchange.endUserId = Self.endUserId(fromJWT: userJwt) }
            guard let named = exchange.endUserId else { throw .malformedResponse(field: "endUserId") }
            guard let bytes = exchange.clientSessionToken else { throw .malformedResponse(field: "clientSessionToken") }
            (endUserId, token) = (named, bytes)
        } catch {
            grants.abandonTotp(key)
            throw error
        }
        return try finishTotp(key, endUserId, token, options)
    }

    // MARK: - Exchange plumbing

    /// Before a TOTP code is spent: the JWT's end user against the stored one (this also reads
    /// the keyring first, so a locked keyring fails with the code still unused).
    private func checkBeforeSpendingTheCode(_ userJwt: String, _ options: RedirectOptions) throws(PortalAuthError) {
        if let named = Self.endUserId(fromJWT: userJwt) {
            try checkSameEndUser(named, options)
        } else {
            _ = try restoreSession()
        }
    }

    /// Persists an accepted TOTP exchange and records the outcome in the ledger: the session, or
    /// the exchange itself when the write failed (so a retry writes without a second exchange).
    private func finishTotp(_ key: TotpExchangeKey, _ endUserId: String, _ token: SecretBytes,
                            _ options: RedirectOptions) throws(PortalAuthError) -> PortalSession {
        do throws(PortalAuthError) {
            // The code is spent: the write runs under an operation token of its own, so that
            // cancelling the caller's operation no longer aborts it (the keyring deadline still
            // bounds it) and the worker persists when it can.
            let session = try OperationToken().run { () throws(PortalAuthError) -> PortalSession in
                try pendingSignIn.withCompletionLock { () throws(PortalAuthError) -> PortalSession in
                    try checkSameEndUser(endUserId, options)
                    return try persist(endUserId: endUserId, token: token)
                }
            }
            grants.finishTotp(key, session)
            return session
        } catch {
            grants.totpExchangedButNotPersisted(key, endUserId: endUserId, token: token)
            throw error
        }
    }

    struct Exchange: @unchecked Sendable {
        var endUserId: String?
        var clientSessionToken: SecretBytes?
        var userJwt: SecretBytes?
        var totpLink: String?
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
                return RedirectResult.authenticated(try persist(endUserId: endUserId, token: token))
            }
            grants.finish(grant, result)
            pendingSignIn.consume()
            return result
        } catch {
            grants.exchangedButNotPersisted(grant, exchange)
            throw error
        }
    }

    private func decodeExchange(_ data: ExchangeWire, requireUser: Bool = true) throws(PortalAuthError) -> Exchange {
        if requireUser, data.endUserId == nil { throw .malformedResponse(field: "endUserId") }
        if data.clientSessionToken == nil && data.userJwt == nil {
            throw .malformedResponse(field: "clientSessionToken")
        }
        var exchange = Exchange(endUserId: data.endUserId, totpLink: data.totpLink)
        // The decoder's Strings are this call's own: copied into wiped memory, then zeroed in place.
        if var token = data.clientSessionToken {
            let bytes = SecretBytes.copyingUTF8(of: token)
            SecretBytes.wipeStorage(of: &token)
            do { try Self.checkToken(bytes, name: "clientSessionToken") } catch { throw .malformedResponse(field: "clientSessionToken") }
            exchange.clientSessionToken = bytes
        } else if var jwt = data.userJwt {
            exchange.userJwt = SecretBytes.copyingUTF8(of: jwt)
            SecretBytes.wipeStorage(of: &jwt)
        }
        return exchange
    }

    struct ExchangeWire: Decodable {
        let endUserId: String?
        let clientId: String?
        let clientSessionToken: String?
        let userJwt: String?
        let totpLink: String?
    }

    private func authorizeURL(provider: String) throws(PortalAuthError) -> String {
        try pendingSignIn.record()
        struct Wire: Decodable { let google: String?; let apple: String?; let url: String? }
        let wire: Wire = try api("GET", "/api/v3/auth/oauth/urls?redirectUrl=\(Self.formEncode(redirectUrl))&provider=\(provider)")
        guard let url = wire.url ?? (provider == "GOOGLE" ? wire.google : wire.apple) else {
            throw .malformedResponse(field: provider == "GOOGLE" ? "google" : "apple")
        }
        return url
    }

    /// One client-auth call: `x-portal-auth-environment-id`, JSON in, `{"data": …}` out, errors
    /// mapped as PortalSwift maps them (429 → rateLimited, 401 → `unauthorized`'s case, other
    /// non-2xx → authenticationFailed with the backend's message).
    func api<Response: Decodable>(_ method: String, _ path: String, body: (some Encodable)? = Optional<String>.none,
                                  bearer: SecretBytes? = nil,
                                  unauthorized: PortalAuthError = .unauthorized) throws(PortalAuthError) -> Response {
        guard let target = TargetURL.forAPI(host: apiHost, path: path) else { throw .invalidArgument(name: "apiHost") }
        var bytes: [UInt8]?
        if let body {
            do { bytes = Array(try JSONEncoder().encode(body)) } catch { throw .invalidArgument(name: "body") }
        }
        let request = PortalRequest(method: method, target: path,
                                    headers: [(name: "x-portal-auth-environment-id", value: authEnvironmentId)], body: bytes)
        let response: PortalResponse
        do {
            response = try http.send(request, to: target, bearer: bearer)
        } catch {
            throw .networkFailure(message: error.message(reaching: target.authority))
        }
        switch response.status {
        case 200..<300:
            guard let envelope = try? Self.decode(Envelope<Response>.self, response) else {
                throw .malformedResponse(field: "data")
            }
            guard let data = envelope.data else { throw .malformedResponse(field: "data") }
            return data
        case 429:
            throw .rateLimited(retryAfterSeconds: response.retryAfterSeconds)
        case 401:
            throw unauthorized
        default:
            let detail = try? Self.decode(ErrorBody.self, response)
            // The server's text is outside input: no control characters, bounded length.
            let text = (detail?.error ?? detail?.message).map { ": " + DisplayText.sanitized($0) } ?? ""
            throw .authenticationFailed(message: "HTTP \(response.status)" + text)
        }
    }

    /// Decodes the response body where the library received it (wiped on release): no array or
    /// `Data` copy of a body that may carry a CST is left behind in freed memory.
    private static func decode<T: Decodable>(_ type: T.Type, _ response: PortalResponse) throws -> T {
        try response.withBodyBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return try JSONDecoder().decode(type, from: Data()) }
            let view = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: bytes.count, deallocator: .none)
            return try JSONDecoder().decode(type, from: view)
        }
    }

    /// Form-encodes a query value (RFC 3986 unreserved characters kept).
    static func formEncode(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    /// The `endUserId` (or `sub`) claim of a JWT, without verifying it (the backend did).
    static func endUserId(fromJWT jwt: String) -> String? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = String(parts[1].replacingOccurrences("-", "+").replacingOccurrences("_", "/"))
        while base64.count % 4 != 0 { base64 += "=" }
        guard let payload = Data(base64Encoded: base64) else { return nil }
        struct Claims: Decodable { let endUserId: String?; let sub: String? }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: payload) else { return nil }
        return claims.endUserId ?? claims.sub
    }
}

private struct Envelope<T: Decodable>: Decodable { let data: T? }
private struct ErrorBody: Decodable { let error: String?; let message: String?; let code: String? }

private extension Substring {
    func replacingOccurrences(_ target: Character, _ replacement: Character) -> Substring {
        Substring(map { $0 == target ? replacement : $0 })
    }
}
