import Testing
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// A 429 from the Portal API carries its `Retry-After` wait into `rateLimited(retryAfterSeconds:)`
/// and the error's message, against the loopback Portal API.
@Suite(.serialized) struct RateLimitTests {
    private struct Grant: Decodable { let redirectUrl: String }
    private struct Envelope<T: Decodable>: Decodable { let data: T }

    private func auth() throws -> PortalAuth {
        _ = try KeyringControl.environment()
        let auth = try PortalAuth(authEnvironmentId: "rate-limit-\(ItemSchema.newGeneration().prefix(12))",
                                  redirectUrl: redirect, apiHost: try FakePortalAPI.host(),
                                  keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
        try auth.pendingSignIn.record()
        return auth
    }

    private func grantURL(user: String) throws -> String {
        let text = try FakePortalAPI.admin("POST", "grants",
                                           #"{"kind":"magic_link","endUserId":"\#(user)","redirectUrl":"\#(redirect)"}"#)
        return try JSONDecoder().decode(Envelope<Grant>.self, from: Data(text.utf8)).data.redirectUrl
    }

    @Test func rateLimitedCarriesTheRetryAfterWait() throws {
        let a = try auth()
        let route = "/api/v3/auth/magic-links/validations"
        defer { _ = try? FakePortalAPI.admin("DELETE", "faults") }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"\#(route)","status":429,"count":1,"retryAfterSeconds":37}"#)
        let url = try grantURL(user: "eu-rate-limited")
        do {
            _ = try a.handleRedirect(url: url)
            Issue.record("a 429 must throw rateLimited")
        } catch {
            #expect(error == .rateLimited(retryAfterSeconds: 37))
            #expect(error.description == "rate limited by the Portal API; retry after 37 s")
        }
        // An HTTP-date is converted to seconds from now (a date in the past: no wait known).
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"\#(route)","status":429,"count":1,"retryAfterSeconds":"\#(Self.httpDate(secondsFromNow: 120))"}"#)
        do {
            _ = try a.handleRedirect(url: url)
            Issue.record("a 429 must throw rateLimited")
        } catch {
            guard case .rateLimited(let seconds?) = error, (100...120).contains(seconds) else {
                Issue.record("an HTTP-date 120 s ahead gave \(error)")
                return
            }
        }
        try FakePortalAPI.admin("POST", "faults",
                                #"{"route":"\#(route)","status":429,"count":1,"retryAfterSeconds":"Wed, 21 Oct 2015 07:28:00 GMT"}"#)
        #expect(throws: PortalAuthError.rateLimited(retryAfterSeconds: nil)) { try a.handleRedirect(url: url) }
        #expect(PortalAuthError.rateLimited(retryAfterSeconds: nil).description == "rate limited by the Portal API; retry later")
        // The grant was never used up: the sign-in still completes.
        guard case .authenticated = try a.handleRedirect(url: url) else {
            Issue.record("a rate-limited exchange must stay retryable")
            return
        }
        try a.clearPersistedSession()
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7) `seconds` from now.
    static func httpDate(secondsFromNow seconds: Int) -> String {
        var when = time(nil) + seconds
        var parts = tm()
        gmtime_r(&when, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
