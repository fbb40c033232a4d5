import Testing
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring

/// Private-use-scheme redirect URLs without an authority (RFC 8252 §7.1,
/// `com.example.app:/oauth2redirect`): accepted at creation, and a sign-in completes through
/// them, matched like other redirect URLs (scheme case-insensitive, path case-sensitive).
@Suite(.serialized) struct PrivateUseRedirectTests {
    static let privateUse = "com.example.app:/oauth2redirect"

    private struct Grant: Decodable { let redirectUrl: String }
    private struct Envelope<T: Decodable>: Decodable { let data: T }

    private func auth() throws -> PortalAuth {
        _ = try KeyringControl.environment()
        let auth = try PortalAuth(authEnvironmentId: "private-use-\(ItemSchema.newGeneration().prefix(12))",
                                  redirectUrl: Self.privateUse, apiHost: try FakePortalAPI.host(),
                                  keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
        try auth.pendingSignIn.record()
        return auth
    }

    /// A magic-link grant whose redirect goes to `base`: the URL a browser would open.
    private func grantURL(user: String, base: String = privateUse) throws -> String {
        let text = try FakePortalAPI.admin("POST", "grants",
                                           #"{"kind":"magic_link","endUserId":"\#(user)","redirectUrl":"\#(base)"}"#)
        return try JSONDecoder().decode(Envelope<Grant>.self, from: Data(text.utf8)).data.redirectUrl
    }

    @Test func signInCompletesThroughAPrivateUseRedirect() throws {
        let a = try auth()
        defer { try? a.clearPersistedSession() }
        let url = try grantURL(user: "eu-private-use")
        #expect(url.hasPrefix(Self.privateUse + "?token="))
        // Look-alikes are not this app's redirect: nothing is exchanged (the grant stays usable).
        let query = String(url.dropFirst(Self.privateUse.count))
        for other in ["com.example.app:/OAuth2Redirect", "com.example.app://oauth2redirect", "com.example.app:/oauth2redirect/x",
                      "com.example.app:oauth2redirect", "com.example.other:/oauth2redirect"] {
            guard case .notHandled = try a.handleRedirect(url: other + query) else {
                Issue.record("\(other) must not be handled as \(Self.privateUse)")
                return
            }
        }
        // The scheme may come back in another case (URL handlers lower-case or not).
        guard case .authenticated(let sessionResult) = try a.handleRedirect(url: "COM.Example.App:/oauth2redirect" + query) else {
            Issue.record("a private-use redirect must complete the sign-in")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-private-use")
        #expect(try a.restoreSession()?.endUserId == "eu-private-use")
    }
}
