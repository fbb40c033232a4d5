import Testing
@testable import PortalKeyring

/// The core's logic over the in-memory storage: argument checks, decoding, ordering, and that a
/// storage failure never turns into "signed out" or a deletion.
@Suite struct CoreTests {
    private func auth(_ storage: InMemoryStorage, id: String = "env") throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: storage)
    }

    @Test func initializerChecksArgumentsInOrder() {
        #expect(throws: PortalAuthError.invalidArgument(name: "authEnvironmentId")) {
            try PortalAuth(authEnvironmentId: "  ", redirectUrl: "")
        }
        #expect(throws: PortalAuthError.invalidArgument(name: "redirectUrl")) {
            try PortalAuth(authEnvironmentId: "env", redirectUrl: "\n")
        }
        #expect(throws: PortalAuthError.invalidArgument(name: "apiHost")) {
            try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "evil.test/path")
        }
        #expect(throws: PortalAuthError.invalidArgument(name: "authEnvironmentId")) {
            try PortalAuth(authEnvironmentId: String(repeating: "x", count: PortalAuth.maxIdentifierBytes + 1),
                           redirectUrl: "app://cb")
        }
    }

    @Test func persistChecksArguments() throws {
        let storage = InMemoryStorage()
        let a = try auth(storage)
        #expect(throws: PortalAuthError.invalidArgument(name: "endUserId")) {
            try a.persistSession(endUserId: " ", clientSessionToken: "t")
        }
        for bad in ["", " \t\n", "a\u{0}b", String(repeating: "t", count: PortalAuth.maxTokenBytes + 1)] {
            #expect(throws: PortalAuthError.invalidArgument(name: "clientSessionToken")) {
                try a.persistSession(endUserId: "u", clientSessionToken: bad)
            }
        }
        #expect(storage.count == 0)
        let max = String(repeating: "t", count: PortalAuth.maxTokenBytes)
        #expect(try a.persistSession(endUserId: "u", clientSessionToken: max).getToken() == max)
    }

    @Test func documentRoundTripIsByteExact() throws {
        for token in ["plain", "line\nbreak", "quote\"and\\slash/", "ünï✓ 🔑", String(repeating: "z", count: 16_384)] {
            let doc = try SessionDocument.encode(endUserId: "user-1", token: SecretBytes.copyingUTF8(of: token))
            let decoded = try #require(doc.withUnsafeBytes { SessionDocument.decode($0) })
            #expect(decoded.endUserId == "user-1")
            #expect(decoded.token.string() == token)
        }
    }

    @Test(arguments: [
        "", "not json", "{}", "[]", #"{"v":2,"clientSessionToken":"t","endUserId":"u"}"#,
        #"{"v":1,"endUserId":"u"}"#, #"{"v":1,"clientSessionToken":"t"}"#,
        #"{"v":1,"clientSessionToken":"","endUserId":"u"}"#, #"{"v":"1","clientSessionToken":"t","endUserId":"u"}"#,
    ])
    func unusableDocumentsDoNotDecode(_ text: String) {
        #expect(Array(text.utf8).withUnsafeBytes { SessionDocument.decode($0) } == nil)
    }

    @Test func invalidUTF8DoesNotDecode() {
        var bytes = Array(#"{"v":1,"clientSessionToken":"t","endUserId":"u"}"#.utf8)
        bytes[30] = 0xFF
        #expect(bytes.withUnsafeBytes { SessionDocument.decode($0) } == nil)
    }

    @Test func restoreDeletesUnusableItemsAndReturnsNil() throws {
        let storage = InMemoryStorage()
        storage.add("env", secret: Array("garbage".utf8), persistedAt: 5)
        storage.add("other", secret: Array("garbage".utf8))
        #expect(try auth(storage).restoreSession() == nil)
        #expect(storage.count == 1) // the other auth environment's item is untouched
    }

    @Test func restorePicksTheNewestUsableGeneration() throws {
        let storage = InMemoryStorage()
        let doc = { (user: String) in Array(#"{"v":1,"clientSessionToken":"tok-\#(user)","endUserId":"\#(user)"}"#.utf8) }
        storage.add("env", secret: doc("old"), generation: "a", persistedAt: 10)
        storage.add("env", secret: doc("new"), generation: "b", persistedAt: 20)
        storage.add("env", secret: Array("broken".utf8), generation: "c", persistedAt: 30)
        let session = try #require(try auth(storage).restoreSession())
        #expect(session.endUserId == "new")
        #expect(session.generation == "b")
        #expect(storage.count == 2) // the broken newest one was deleted, the older usable one kept
    }

    @Test func storageFailureIsNotSignedOutAndDeletesNothing() throws {
        let storage = InMemoryStorage()
        storage.add("env", secret: Array("garbage".utf8))
        storage.fail(with: .locked("test"))
        #expect(throws: PortalAuthError.sessionStorageFailure(message: StorageFailure.locked("test").message)) {
            try auth(storage).restoreSession()
        }
        #expect(storage.count == 1)
    }

    @Test func persistReplacesOlderSessionsOnly() throws {
        let storage = InMemoryStorage()
        let a = try auth(storage)
        try a.persistSession(endUserId: "u1", clientSessionToken: "t1")
        // A sign-in from "the future" (another process, a later clock) must survive.
        storage.add("env", secret: Array(#"{"v":1,"clientSessionToken":"t9","endUserId":"u9"}"#.utf8),
                    generation: "f", persistedAt: UInt64.max)
        try a.persistSession(endUserId: "u2", clientSessionToken: "t2")
        #expect(storage.count == 2)
        #expect(try a.restoreSession()?.endUserId == "u9")
    }

    @Test func generationsAreRandom128BitHex() {
        let a = PortalAuth.newGeneration(), b = PortalAuth.newGeneration()
        #expect(a.count == 32 && b.count == 32 && a != b)
        #expect(a.allSatisfy { $0.isHexDigit })
    }
}
