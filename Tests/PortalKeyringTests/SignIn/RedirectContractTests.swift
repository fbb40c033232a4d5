import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring

/// `handleRedirect` decides "not ours" as PortalSwift does, without throwing and without any
/// network or keyring call (the API host here is unreachable and the storage in memory: anything
/// that reached them would fail the call), and reads the query as PortalSwift does.
@Suite struct RedirectContractTests {
    private func auth() throws -> (PortalAuth, InMemoryStorage) {
        let storage = InMemoryStorage()
        let auth = try PortalAuth(authEnvironmentId: "redir-\(ItemSchema.newGeneration().prefix(8))",
                                  redirectUrl: "myapp://auth/callback", apiHost: "127.0.0.1:9", storage: storage)
        try auth.pendingSignIn.record()
        return (auth, storage)
    }

    static let notOurs = [
        "", "   ", "myapp://auth/callback", "myapp://auth/callback?authMethod=EMAIL_MAGIC_LINK",
        "myapp://auth/callback?token=&authMethod=EMAIL_MAGIC_LINK",
        "myapp://auth/callback?token=g&authMethod=email_magic_link", "myapp://auth/callback?token=g&login_type=google",
        "myapp://auth/callback?token=g&authMethod=SMS", "myapp://auth/callback?token=g",
        "myapp://auth/other?token=g&authMethod=EMAIL_MAGIC_LINK",
        // The last token wins, and it is empty.
        "myapp://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK&token=",
    ]

    @Test(arguments: notOurs)
    func notOursIsNotHandledAndDoesNothing(_ url: String) throws {
        let (auth, storage) = try auth()
        let result = try auth.handleRedirect(url: url)
        guard case .notHandled = result else { Issue.record("\(url): \(result)"); return }
        #expect(storage.count == 0)
        #expect(auth.pendingSignIn.isPending(), "a URL that is not ours consumed the pending sign-in")
    }

    /// The limit counts UTF-16 code units: 8192 of them in "é" (2 bytes of UTF-8 each) are still
    /// parsed; one more is not handled, before parsing (an error parameter is never read).
    @Test func lengthLimitInUTF16CodeUnits() throws {
        let (auth, _) = try auth()
        let base = "myapp://auth/callback?error=x&pad="
        let padded = base + String(repeating: "é", count: 8192 - base.utf16.count)
        #expect(padded.utf16.count == 8192 && padded.utf8.count > 8192)
        #expect(throws: PortalAuthError.self) { try auth.handleRedirect(url: padded) }
        let result = try auth.handleRedirect(url: padded + "é")
        guard case .notHandled = result else { Issue.record("8193 code units: \(result)"); return }
    }

    @Test func errorWinsEvenBesideAToken() throws {
        let (auth, _) = try auth()
        #expect(throws: PortalAuthError.authenticationFailed(message: "sign-in failed: denied")) {
            try auth.handleRedirect(url: "myapp://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK&error=denied")
        }
        #expect(throws: PortalAuthError.authenticationFailed(message: "sign-in failed: (no reason given)")) {
            try auth.handleRedirect(url: "myapp://auth/callback?error=")
        }
    }

    @Test func queryIsReadAsPortalSwiftReadsIt() throws {
        let query = try #require(RedirectQuery(url: "  \tmyapp://auth/callback/?token=first&a=%zz&b=%E2%9C%93+x&&=v&token=last&c\n",
                                               redirectUrl: "myapp://auth/callback"))
        #expect(query["token"] == "last")          // the last duplicate wins
        #expect(query["a"] == "%zz")               // a malformed escape is kept as it came
        #expect(query["b"] == "✓ x")
        #expect(query["c"] == "")
        #expect(query[""] == nil)                  // empty names are skipped
        #expect(RedirectQuery(url: "myapp://auth/callback?x=%FF%FE", redirectUrl: "myapp://auth/callback")?["x"] == "%FF%FE")
    }
}
