import Testing
import Dispatch
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

let redirect = "portalkeyring://auth/callback"
/// The sender and template the tests' magic links use (the fake API requires both, as Portal does).
let testMagicLink = MagicLinkConfig(fromEmail: "login@example.com", templateId: "tpl-test")

private struct Grant: Decodable { let token: String?; let redirectUrl: String }
private struct Envelope<T: Decodable>: Decodable { let data: T }

/// Mints a grant on the loopback Portal API; returns the redirect URL a browser would open.
func grant(_ kind: String, user: String, totp: Bool = false, provider: String? = nil, error: String? = nil) throws -> String {
    var body = #"{"kind":"\#(kind)","endUserId":"\#(user)","totpRequired":\#(totp),"redirectUrl":"\#(redirect)""#
    if let provider { body += #","provider":"\#(provider)""# }
    if let error { body += #","error":"\#(error)""# }
    body += "}"
    let text = try FakePortalAPI.admin("POST", "grants", body)
    return try JSONDecoder().decode(Envelope<Grant>.self, from: Data(text.utf8)).data.redirectUrl
}

/// Sign-in flows against the loopback Portal API and the real keyring.
@Suite(.serialized) struct SignInTests {
    /// A fresh auth environment with a sign-in pending (grants here are minted by the fake API,
    /// not started by sendMagicLink, so the marker is recorded directly).
    private func auth() throws -> PortalAuth {
        _ = try KeyringControl.environment()
        let auth = try PortalAuth(authEnvironmentId: "signin-\(ItemSchema.newGeneration().prefix(12))", redirectUrl: redirect,
                              apiHost: try FakePortalAPI.host(), magicLink: testMagicLink,
                              keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
        try auth.pendingSignIn.record()
        return auth
    }

    @Test func methodsAndAuthorizeURLs() throws {
        let a = try auth()
        let methods = try a.getMethods()
        #expect(methods.allowedMethods.contains("EMAIL_MAGIC_LINK"))
        let google = try a.loginWithGoogle()
        #expect(google.hasPrefix("http"))
        #expect(try a.loginWithApple().hasPrefix("http"))
        #expect(PortalAuth.formEncode("portalkeyring://auth/callback?x=1 2") == "portalkeyring%3A%2F%2Fauth%2Fcallback%3Fx%3D1%202")
        // The SDKs' encoding (Java URLEncoder, space as %20): "*" kept, "~" encoded.
        #expect(PortalAuth.formEncode("a~b*c_d-e.f+") == "a%7Eb*c_d-e.f%2B")
    }

    @Test func magicLinkEmailIsNormalizedAndNotRetried() throws {
        let a = try auth()
        let before = try FakePortalAPI.requests("/api/v3/auth/magic-links").total
        try a.sendMagicLink(email: "  Person@Example.COM \n")
        struct Links: Decodable { struct Link: Decodable { let email: String }; let links: [Link] }
        let links = try JSONDecoder().decode(Envelope<Links>.self, from: Data(try FakePortalAPI.admin("GET", "magic-links").utf8))
        #expect(links.data.links.last?.email == "person@example.com")
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/magic-links","status":500,"count":1}"#)
        #expect(throws: PortalAuthError.self) { try a.sendMagicLink(email: "person@example.com") }
        #expect(try FakePortalAPI.requests("/api/v3/auth/magic-links").total == before + 2) // no automatic retry
        #expect(throws: PortalAuthError.invalidArgument(name: "email")) { try a.sendMagicLink(email: "not an email") }
    }

    @Test(arguments: [("magic_link", nil), ("oauth", "GOOGLE"), ("oauth", "APPLE")] as [(String, String?)])
    func redirectsPersistBeforeReturningAndRestoreElsewhere(kind: String, provider: String?) throws {
        let a = try auth()
        let url = try grant(kind, user: "eu-\(kind)", provider: provider)
        guard case .authenticated(let sessionResult) = try a.handleRedirect(url: url) else {
            Issue.record("expected authenticated")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-\(kind)")
        let other = try PortalAuth(authEnvironmentId: a.authEnvironmentId, redirectUrl: redirect, apiHost: a.apiHost)
        #expect(try other.restoreSession()?.getToken() == session.getToken())
        // The restored CST is a live session on the Portal API.
        #expect(try Portal(credentials: session).send(PortalRequest(target: "/api/v3/clients/me")).status == 200)
        try a.clearPersistedSession()
    }

    @Test func repeatDeliveryExchangesOnce() throws {
        let a = try auth()
        let url = try grant("magic_link", user: "eu-repeat")
        let before = try FakePortalAPI.requests("/api/v3/auth/magic-links/validations").total
        var tokens: [String] = []
        let results = [try a.handleRedirect(url: url), try a.handleRedirect(url: url)]
        for case .authenticated(let s) in results { tokens.append(try s.session.getToken()) }
        #expect(tokens.count == 2 && tokens[0] == tokens[1])
        #expect(try FakePortalAPI.requests("/api/v3/auth/magic-links/validations").total == before + 1)
        // Concurrent deliveries of one grant also exchange once (a new sign-in: the first completed).
        try a.pendingSignIn.record()
        let url2 = try grant("oauth", user: "eu-repeat", provider: "GOOGLE")
        let before2 = try FakePortalAPI.requests("/api/v3/auth/oauth/tokens").total
        DispatchQueue.concurrentPerform(iterations: 6) { _ in _ = try? a.handleRedirect(url: url2) }
        #expect(try FakePortalAPI.requests("/api/v3/auth/oauth/tokens").total == before2 + 1)
        try a.clearPersistedSession()
    }

    @Test(.disabled(if: KeyringControl.lockIsUndoneByReads, KeyringControl.passwordlessReason))
    func storageFailureThenRetryWritesWithoutASecondExchange() throws {
        let a = try auth()
        let url = try grant("magic_link", user: "eu-locked")
        let before = try FakePortalAPI.requests("/api/v3/auth/magic-links/validations").total
        try KeyringControl.lock()
        defer { try? KeyringControl.unlock() }
        #expect {
            _ = try a.handleRedirect(url: url)
        } throws: { error in
            if case PortalAuthError.sessionStorageFailure = error { return true } else { return false }
        }
        try KeyringControl.unlock()
        guard case .authenticated(let sessionResult) = try a.handleRedirect(url: url) else {
            Issue.record("the retry must complete the sign-in")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-locked")
        #expect(try FakePortalAPI.requests("/api/v3/auth/magic-links/validations").total == before + 1)
        #expect(try a.restoreSession()?.endUserId == "eu-locked")
        try a.clearPersistedSession()
    }

    @Test func totpRequiredThenVerifyPersists() throws {
        let a = try auth()
        let url = try grant("magic_link", user: "eu-totp", totp: true)
        guard case .totpRequired(let step) = try a.handleRedirect(url: url) else {
            Issue.record("expected totpRequired")
            return
        }
        let jwt = step.userJwt
        #expect(try a.restoreSession() == nil) // nothing persisted yet
        #expect(try UserJwt.endUserId(of: jwt) == "eu-totp")
        #expect(step.endUserId == "") // the TOTP step's answer names no end user (the fake is strict)
        #expect(step.totpSecret?.isEmpty == false)
        #expect(throws: PortalAuthError.self) { try a.verifyTotp(code: "000000", userJwt: jwt + "x") }
        struct Code: Decodable { let code: String }
        let code = try JSONDecoder().decode(Envelope<Code>.self,
                                            from: Data(try FakePortalAPI.admin("GET", "totp?endUserId=eu-totp").utf8)).data.code
        let session = try a.verifyTotp(code: code, userJwt: jwt).session
        #expect(session.endUserId == "eu-totp")
        #expect(try a.restoreSession()?.getToken() == session.getToken())
        try a.clearPersistedSession()
    }

    @Test func failuresMapLikePortalSwift() throws {
        let a = try auth()
        #expect(throws: PortalAuthError.authenticationFailed(message: "sign-in failed: access_denied")) {
            try a.handleRedirect(url: "\(redirect)?error=access_denied&authMethod=EMAIL_MAGIC_LINK")
        }
        #expect(throws: PortalAuthError.invalidGrant) {
            try a.handleRedirect(url: "\(redirect)?token=unknown-grant&authMethod=EMAIL_MAGIC_LINK")
        }
        let route = "/api/v3/auth/magic-links/validations"
        try FakePortalAPI.admin("POST", "faults", #"{"route":"\#(route)","status":429,"count":1}"#)
        let url = try grant("magic_link", user: "eu-fail")
        // A 429 without Retry-After (the backend sends none): no wait is made up.
        #expect(throws: PortalAuthError.rateLimited(retryAfterSeconds: nil)) { try a.handleRedirect(url: url) }
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"\#(route)","status":200,"count":1,"body":{"data":{"endUserId":"eu-fail","clientId":"c"}}}"#)
        // Neither a session token nor a user JWT: an invalid grant response (PortalSwift's
        // invalidGrantResponse).
        #expect(throws: PortalAuthError.invalidGrant) { try a.handleRedirect(url: url) }
        // Failed exchanges stay retryable: the grant was never used up.
        guard case .authenticated = try a.handleRedirect(url: url) else {
            Issue.record("a failed exchange must stay retryable")
            return
        }
        // Not our redirect URL: not handled, nothing thrown, nothing sent.
        for foreign in ["https://example.com/cb?token=x&authMethod=EMAIL_MAGIC_LINK", "portalkeyring://other/callback?token=x",
                        "otherscheme://auth/callback?token=x", "not a url"] {
            guard case .notHandled = try a.handleRedirect(url: foreign) else {
                Issue.record("\(foreign) must not be handled")
                continue
            }
        }
        try a.clearPersistedSession()
    }

    @Test func clearWaitsForAnExchangeInFlightAndForgetsTheGrant() throws {
        let a = try auth()
        let route = "/api/v3/auth/magic-links/validations"
        let url = try grant("magic_link", user: "eu-race")
        try FakePortalAPI.admin("POST", "faults", #"{"route":"\#(route)","delayMs":700,"count":1}"#)
        let exchange = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? a.handleRedirect(url: url)
            exchange.signal()
        }
        usleep(200_000) // the exchange is in flight
        try a.clearPersistedSession()
        // The clear waited for the exchange, then removed what it persisted.
        #expect(exchange.wait(timeout: .now()) == .success)
        #expect(try a.restoreSession() == nil)
        // And the grant is forgotten: delivering it again (with a sign-in pending) goes to the
        // server (used → invalid).
        try a.pendingSignIn.record()
        #expect(throws: PortalAuthError.invalidGrant) { try a.handleRedirect(url: url) }
    }

    /// A host sign-out through the Portal (`clearSession`, C `portal_clear_session`) ends the
    /// remembered sign-in too: delivering the same redirect again is a used link, never the old
    /// "authenticated" session replayed (docs/security.md).
    @Test func aSignedOutSessionIsNeverReplayed() throws {
        let a = try auth()
        let url = try grant("magic_link", user: "eu-replay")
        guard case .authenticated(let sessionResult) = try a.handleRedirect(url: url) else {
            Issue.record("the sign-in did not complete")
            return
        }
        let session = sessionResult.session
        let portal = Portal(credentials: session, apiHost: try FakePortalAPI.host(), http: HTTPClient(), validate: false)
        try portal.clearSession()
        portal.close()
        #expect(try a.restoreSession() == nil)
        try a.pendingSignIn.record()
        #expect(throws: PortalAuthError.invalidGrant) { try a.handleRedirect(url: url) }
        #expect(try a.restoreSession() == nil)
    }
}
