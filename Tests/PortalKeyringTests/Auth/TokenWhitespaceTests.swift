import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring

/// `persistSession` refuses a Client Session Token with whitespace or a control character
/// anywhere: a pasted token with a space or a trailing newline would be stored and then
/// sent as a broken bearer. Only persist checks this: restore reads what earlier versions stored.
@Suite struct TokenWhitespaceTests {
    static let refused = ["tok en", " tok", "tok ", "tok\n", "tok\r\n", "\ttok", "to\rk", "tok\u{0B}", "tok\u{0C}",
                          "a\u{01}b", "tok\u{7F}", "tok\u{85}", "tok\u{A0}", "tok\u{2028}", "tok\u{3000}", "line\nbreak"]
    static let accepted = ["cst_abc.DEF-123", #"quotes"'\/"#, "ünï✓🔑", "=+/-_base64look", "x"]

    private func auth(_ storage: InMemoryStorage) throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: "token-ws", redirectUrl: "app://cb", apiHost: "127.0.0.1:1", storage: storage)
    }

    @Test(arguments: refused)
    func persistRefusesWhitespaceAndControls(_ token: String) throws {
        let storage = InMemoryStorage()
        let a = try auth(storage)
        try a.persistSession(endUserId: "u-before", clientSessionToken: "cst-before")
        #expect(throws: PortalAuthError.invalidArgument(name: "clientSessionToken")) {
            try a.persistSession(endUserId: "u", clientSessionToken: token)
        }
        // Nothing was stored or replaced.
        #expect(storage.count == 1)
        #expect(try a.restoreSession()?.getToken() == "cst-before")
    }

    @Test(arguments: accepted)
    func persistAcceptsTokensWithoutThem(_ token: String) throws {
        let a = try auth(InMemoryStorage())
        #expect(try a.persistSession(endUserId: "u", clientSessionToken: token).getToken() == token)
        #expect(try a.restoreSession()?.getToken() == token)
    }

    /// What an earlier version stored (it accepted these tokens) is restored byte-exact.
    @Test(arguments: refused)
    func restoreReadsWhatEarlierVersionsStored(_ token: String) throws {
        let a = try auth(InMemoryStorage())
        _ = try a.persist(endUserId: "u-old", token: SecretBytes.copyingUTF8(of: token))
        let restored = try a.restoreSession()
        #expect(restored?.endUserId == "u-old")
        #expect(try restored?.getToken() == token)
    }
}
