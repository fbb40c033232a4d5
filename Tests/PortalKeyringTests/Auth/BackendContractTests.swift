import Testing
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The Portal backend's contract for starting a sign-in (docs/sign-in.md#magic-links): magic links with a
/// `MagicLinkConfig`, account abstraction, OAuth URLs, status mapping and trace ids, against
/// the strict loopback fake API (Tests/portal-api/fake_portal_api.py).
@Suite(.serialized) struct BackendContractTests {
    private struct Envelope<T: Decodable>: Decodable { let data: T }
    private struct Links: Decodable {
        struct Link: Decodable { let email: String; let fromEmail: String?; let templateId: String?; let isAccountAbstracted: Bool? }
        let links: [Link]
    }

    private func auth(magicLink: MagicLinkConfig? = testMagicLink, isAccountAbstracted: Bool? = nil) throws -> PortalAuth {
        _ = try KeyringControl.environment()
        return try PortalAuth(authEnvironmentId: "contract-\(ItemSchema.newGeneration().prefix(12))", redirectUrl: redirect,
                              apiHost: try FakePortalAPI.host(), magicLink: magicLink,
                              isAccountAbstracted: isAccountAbstracted,
                              keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
    }

    private func lastLink() throws -> Links.Link? {
        try JSONDecoder().decode(Envelope<Links>.self, from: Data(try FakePortalAPI.admin("GET", "magic-links").utf8)).data.links.last
    }

    /// Resets what a test changed in the fake API's shared configuration and faults.
    private func restoreFake() {
        _ = try? FakePortalAPI.admin("POST", "config",
                                     #"{"accountAbstractionAvailable":true,"magicLinkResponse":"data","allowedMethods":["EMAIL_MAGIC_LINK","GOOGLE","APPLE"]}"#)
        _ = try? FakePortalAPI.admin("DELETE", "faults")
    }

    /// `GET /methods` as the reference reads it: `allowedAuthMethods`, a missing list is an empty
    /// one, and a method this library cannot start is left out.
    @Test func methodsMissingAreNoneAndUnknownOnesAreDropped() throws {
        defer { restoreFake() }
        let a = try auth()
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/methods","status":200,"count":1,"body":{"data":{"allowedAuthMethods":["PASSKEY","GOOGLE","SMS_OTP","EMAIL_MAGIC_LINK"],"autoCreateWallet":true}}}"#)
        #expect(try a.getMethods() == AuthMethods(allowedMethods: ["GOOGLE", "EMAIL_MAGIC_LINK"], autoCreateWallet: true))
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/methods","status":200,"count":1,"body":{"data":{}}}"#)
        #expect(try a.getMethods() == AuthMethods(allowedMethods: [], autoCreateWallet: false))
    }

    @Test func magicLinkWithoutConfigFailsLocallyAndSendsNothing() throws {
        let a = try auth(magicLink: nil)
        let before = try FakePortalAPI.requests("/api/v3/auth/magic-links").total
        #expect(throws: PortalAuthError.magicLinkNotConfigured) { try a.sendMagicLink(email: "person@example.com") }
        // Checked before the address, too.
        #expect(throws: PortalAuthError.magicLinkNotConfigured) { try a.sendMagicLink(email: "not an email") }
        #expect(try FakePortalAPI.requests("/api/v3/auth/magic-links").total == before)
        #expect(!a.pendingSignIn.isPending(), "no pending sign-in may be recorded for an email never sent")
        #expect("\(PortalAuthError.magicLinkNotConfigured)".contains("MagicLinkConfig"))
    }

    @Test func magicLinkSendsSenderTemplateAndAccountAbstractionOnlyWhenSet() throws {
        defer { restoreFake() }
        try auth().sendMagicLink(email: "Config@Example.com")
        var link = try #require(try lastLink())
        #expect(link.email == "config@example.com")
        #expect(link.fromEmail == "login@example.com")
        #expect(link.templateId == "tpl-test")
        #expect(link.isAccountAbstracted == nil, "isAccountAbstracted is left out when not set")
        for value in [true, false] {
            try auth(isAccountAbstracted: value).sendMagicLink(email: "aa@example.com")
            link = try #require(try lastLink())
            #expect(link.isAccountAbstracted == value)
        }
        // A configuration with a blank or line-broken field is refused at init, before any I/O.
        #expect(throws: PortalAuthError.invalidArgument(name: "fromEmail")) {
            _ = try auth(magicLink: MagicLinkConfig(fromEmail: " ", templateId: "t"))
        }
        #expect(throws: PortalAuthError.invalidArgument(name: "templateId")) {
            _ = try auth(magicLink: MagicLinkConfig(fromEmail: "a@b.c", templateId: "t\r\nX: y"))
        }
    }

    @Test(arguments: ["empty", "object", "html", "data"])
    func magicLinkAnswerBodyIsNotRead(kind: String) throws {
        defer { restoreFake() }
        try FakePortalAPI.admin("POST", "config", #"{"magicLinkResponse":"\#(kind)"}"#)
        try auth().sendMagicLink(email: "body@example.com")
    }

    @Test func accountAbstractionUnavailableOnMagicLinksAndOAuthURLs() throws {
        defer { restoreFake() }
        try FakePortalAPI.admin("POST", "config", #"{"accountAbstractionAvailable":false}"#)
        let a = try auth(isAccountAbstracted: true)
        let expected = PortalAuthError.accountAbstractionUnavailable(message: "Account abstraction is not enabled for this environment")
        #expect(throws: expected) { try a.sendMagicLink(email: "aa@example.com") }
        #expect(throws: expected) { try a.loginWithGoogle() }
        // Without isAccountAbstracted, or with false, nothing is asked for: both succeed.
        try auth().sendMagicLink(email: "aa@example.com")
        #expect(try auth(isAccountAbstracted: false).loginWithApple().hasPrefix("http"))
        // The server's text: control characters removed, at most 200 characters.
        let long = String(repeating: "x", count: 150) + "\\u001b[31m" + String(repeating: "y", count: 150)
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"/api/v3/auth/oauth/urls","status":400,"count":1,"body":{"error":"\#(long)"}}"#)
        do {
            _ = try a.loginWithApple()
            Issue.record("a 400 with an error must throw")
        } catch .accountAbstractionUnavailable(let message) {
            #expect(message.count == 200)
            #expect(!message.unicodeScalars.contains { $0.value < 0x20 })
            #expect(message.hasPrefix(String(repeating: "x", count: 150) + "[31m"))
        } catch {
            Issue.record("expected accountAbstractionUnavailable, got \(error)")
        }
        // A 400 on another route, or one without an error string, is not about account abstraction.
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/oauth/urls","status":400,"count":1,"body":{"message":"no"}}"#)
        #expect(throws: PortalAuthError.clientError(status: 400, message: "no")) { try a.loginWithApple() }
        // Nor is a 400 {"error"} when the app asked for nothing: a disabled method, say, has
        // another cause than account abstraction (found by a newcomer: "account abstraction
        // unavailable" for a magic link the auth environment does not allow).
        let plain = try auth()
        for route in ["/api/v3/auth/magic-links", "/api/v3/auth/oauth/urls"] {
            try FakePortalAPI.admin("POST", "faults",
                                    #"{"route":"\#(route)","status":400,"count":1,"body":{"error":"Email magic links are not enabled"}}"#)
        }
        let refused = PortalAuthError.clientError(status: 400, message: "Email magic links are not enabled")
        #expect(throws: refused) { try plain.sendMagicLink(email: "aa@example.com") }
        #expect(throws: refused) { try plain.loginWithGoogle() }
    }

    @Test func oauthURLsAskOnceWithoutProviderAndReportDisabledProviders() throws {
        defer { restoreFake() }
        let a = try auth()
        // The fake refuses any query parameter other than redirectUrl and isAccountAbstracted.
        #expect(try a.loginWithGoogle().contains("provider=google"))
        #expect(try auth(isAccountAbstracted: true).loginWithApple().contains("provider=apple"))
        try FakePortalAPI.admin("POST", "config", #"{"allowedMethods":["EMAIL_MAGIC_LINK","APPLE"]}"#)
        #expect(throws: PortalAuthError.authMethodUnavailable(method: "GOOGLE")) { try a.loginWithGoogle() }
        #expect(try a.loginWithApple().hasPrefix("http"))
        try FakePortalAPI.admin("POST", "config", #"{"allowedMethods":["EMAIL_MAGIC_LINK"]}"#)
        #expect(throws: PortalAuthError.authMethodUnavailable(method: "APPLE")) { try a.loginWithApple() }
        // The URL is trimmed; a blank one is a disabled provider.
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"/api/v3/auth/oauth/urls","status":200,"count":1,"body":{"data":{"google":"  https://accounts.example/o?s=1 \n","apple":" "}}}"#)
        #expect(try a.loginWithGoogle() == "https://accounts.example/o?s=1")
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"/api/v3/auth/oauth/urls","status":200,"count":1,"body":{"data":{"apple":" \t"}}}"#)
        #expect(throws: PortalAuthError.authMethodUnavailable(method: "APPLE")) { try a.loginWithApple() }
    }

    /// A client-auth answer is read up to `PortalAuth.maxAnswerBytes` (256 KiB)
    /// and no further: a longer 2xx answer is a network failure that says so, never parsed (a
    /// 0.96 MB body took ~11 s to parse); a longer error answer is read by its status alone. An
    /// answer just under the cap is read whole.
    @Test func anAnswerOverTheCapIsAClearErrorAndNotParsed() throws {
        defer { restoreFake() }
        let a = try auth()
        func urls(_ length: Int, status: Int = 200) throws {
            let url = "https://accounts.example/o?s=" + String(repeating: "a", count: length)
            try FakePortalAPI.admin("POST", "faults",
                                    #"{"route":"/api/v3/auth/oauth/urls","status":\#(status),"count":1,"body":{"data":{"google":"\#(url)"}}}"#)
        }
        try urls(PortalAuth.maxAnswerBytes - 100)
        #expect(try a.loginWithGoogle().count == PortalAuth.maxAnswerBytes - 100 + 29)
        try urls(PortalAuth.maxAnswerBytes)
        var failure = "no error"
        do throws(PortalAuthError) { _ = try a.loginWithGoogle() } catch { failure = "\(error)" }
        #expect(failure.hasPrefix("network failure: the answer from ") && failure.contains("was larger than 262144 bytes"), "\(failure)")
        try urls(512 << 10, status: 503)
        #expect(throws: PortalAuthError.internalServerError(status: 503)) { try a.loginWithGoogle() }
    }

    @Test(arguments: [500, 502, 503])
    func serverErrorsAreNotFailedSignIns(status: Int) throws {
        defer { restoreFake() }
        let a = try auth()
        try a.pendingSignIn.record()
        let url = try grant("magic_link", user: "eu-5xx-\(status)")
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/magic-links/validations","status":\#(status),"count":1}"#)
        #expect(throws: PortalAuthError.internalServerError(status: status)) { try a.handleRedirect(url: url) }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/magic-links","status":\#(status),"count":1}"#)
        #expect(throws: PortalAuthError.internalServerError(status: status)) { try a.sendMagicLink(email: "s@example.com") }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/methods","status":\#(status),"count":1}"#)
        #expect(throws: PortalAuthError.internalServerError(status: status)) { try a.getMethods() }
        // The grant was not spent: the sign-in completes once the server is back.
        guard case .authenticated = try a.handleRedirect(url: url) else {
            Issue.record("a 5xx must leave the grant usable")
            return
        }
        try a.clearPersistedSession()
    }

    @Test func forbiddenIsARefusedRequestNotAFailedSignIn() throws {
        defer { restoreFake() }
        let a = try auth()
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"/api/v3/auth/oauth/urls","status":403,"count":1,"body":{"error":"Forbidden\u0007 origin"}}"#)
        #expect(throws: PortalAuthError.clientError(status: 403, message: "Forbidden origin")) { try a.loginWithGoogle() }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/magic-links","status":403,"count":1}"#)
        #expect(throws: PortalAuthError.clientError(status: 403, message: "Injected fault")) {
            try a.sendMagicLink(email: "f@example.com")
        }
    }

    @Test func rateLimitWithoutRetryAfterPromisesNoWait() throws {
        defer { restoreFake() }
        let a = try auth()
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/magic-links","status":429,"count":1}"#)
        do {
            try a.sendMagicLink(email: "rl@example.com")
            Issue.record("a 429 must throw")
        } catch {
            #expect(error == .rateLimited(retryAfterSeconds: nil))
            #expect(!error.description.contains("after"))
        }
    }

    @Test func everyRequestCarriesAFreshTraceId() throws {
        let a = try auth()
        try FakePortalAPI.admin("DELETE", "stats")
        _ = try a.getMethods()
        _ = try a.loginWithGoogle()
        try a.sendMagicLink(email: "trace@example.com")
        _ = try a.getMethods()
        let token = try FakePortalAPI.issueToken(endUserId: "eu-trace")
        let session = try a.persistSession(endUserId: "eu-trace", clientSessionToken: token)
        #expect(try Portal(credentials: session).send(PortalRequest(target: "/api/v3/clients/me")).status == 200)
        try a.clearPersistedSession()
        struct Stats: Decodable { struct Entry: Decodable { let traceId: String? }; struct Body: Decodable { let recent: [Entry] }; let data: Body }
        let recent = try JSONDecoder().decode(Stats.self, from: Data(try FakePortalAPI.admin("GET", "stats").utf8)).data.recent
        let ids = recent.compactMap(\.traceId)
        #expect(ids.count == recent.count && recent.count >= 5, "every request carries one: \(recent.map(\.traceId))")
        #expect(Set(ids).count == ids.count, "trace ids are never reused")
        for id in ids { #expect(Self.isLowercaseUUIDv4(id), "\(id)") }
        #expect(Self.isLowercaseUUIDv4(TraceId.fresh()))
    }

    static func isLowercaseUUIDv4(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                if byte != UInt8(ascii: "-") { return false }
            } else if !((0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)) {
                return false
            }
        }
        return bytes[14] == UInt8(ascii: "4") && [UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(bytes[19])
    }
}
