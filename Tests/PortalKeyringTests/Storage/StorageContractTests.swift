import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// A storage under the contract, and how a test plants items in it as another writer would.
protocol PlantingStorage: SessionStorage {
    /// Stores an item of our schema for `authEnvironmentId` (no `session_generation` when nil);
    /// returns its id.
    @discardableResult
    func plant(_ authEnvironmentId: String, secret: [UInt8], generation: String?, persistedAt: UInt64) throws -> String
    /// How many items the store holds, of every auth environment.
    func total() throws -> Int
}

extension InMemoryStorage: PlantingStorage {
    func plant(_ authEnvironmentId: String, secret: [UInt8], generation: String?, persistedAt: UInt64) -> String {
        add(authEnvironmentId, secret: secret, generation: generation, persistedAt: persistedAt)
    }

    func total() -> Int { count }
}

/// A file keyring in a scratch directory of its own (removed on release), under `ourSecret`.
final class FileStore: PlantingStorage, @unchecked Sendable {
    let directory: String
    let path: String
    let storage: FileKeyringStorage

    init(timeouts: KeyringTimeouts = .default) throws {
        directory = try temporaryDirectory()
        path = directory + "/keyrings/default.keyring"
        storage = FileKeyringStorage(path: path, masterSecret: master(ourSecret), timeouts: timeouts)
    }

    deinit { removeDirectory(directory) }

    func plant(_ authEnvironmentId: String, secret: [UInt8], generation: String?, persistedAt: UInt64) throws -> String {
        try FileKeyringFile.makeDirectory(of: path)
        var keyring = try FileKeyringFile.load(path) ?? FileKeyring()
        var attributes = Dictionary(uniqueKeysWithValues: ItemSchema.match(authEnvironmentId))
        attributes[ItemSchema.generationAttribute] = generation
        attributes[ItemSchema.persistedAtAttribute] = String(persistedAt)
        let item = FileKeyringItem(attributes: attributes, label: "planted", created: 1, modified: 1,
                                   secret: secret.withUnsafeBytes { SecretBytes(copying: $0) })
        let id = try keyring.add(item, key: try keyring.key(masterSecret: master(ourSecret))).id
        try FileKeyringFile.write(keyring, to: path)
        return id
    }

    func total() throws -> Int { try FileKeyringFile.load(path)?.items.count ?? 0 }

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try storage.restore(authEnvironmentId: authEnvironmentId)
    }

    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try storage.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: now, label: label,
                            document: document)
    }

    func delete(itemId: String) throws(StorageFailure) { try storage.delete(itemId: itemId) }

    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try storage.deleteAll(authEnvironmentId: authEnvironmentId, generation: generation)
    }

    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        try storage.observe(authEnvironmentId: authEnvironmentId)
    }

    func describe() throws(StorageFailure) -> [(String, String)] { try storage.describe() }
}

/// The storage protocol's contract (SessionStorage.swift's doc comments; docs/storage.md; docs/security.md,
/// "Ordering sign-ins" and "One read policy"), run through the core (`PortalAuth`, `PortalSession`)
/// against each storage that has no provider behind it: the in-memory test store and the file
/// keyring. The Secret Service runs the same contract on real providers (KeyringIntegrationTests,
/// Tests/providers).
@Suite struct StorageContractTests {
    enum Backend: String, CaseIterable, CustomTestStringConvertible {
        case memory, file
        var testDescription: String { rawValue }

        func make() throws -> any PlantingStorage {
            switch self {
            case .memory: return InMemoryStorage()
            case .file: return try FileStore()
            }
        }
    }

    private func auth(_ storage: any SessionStorage, id: String = "env") throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: storage)
    }

    private func doc(_ user: String) -> [UInt8] {
        Array(#"{"v":1,"clientSessionToken":"tok-\#(user)","endUserId":"\#(user)"}"#.utf8)
    }

    @Test(arguments: Backend.allCases)
    func aPersistIsWhatTheNextRestoreReturnsByteExact(_ backend: Backend) throws {
        let storage = try backend.make()
        // As versions before the whitespace rule stored it (restore must read it byte-exact).
        let token = "quotes \" ' \\ / non-ASCII ünï 🔑 cr\r\nlf\n" + String(repeating: "x", count: 16_384)
        let session = try auth(storage).persist(endUserId: "user-1", token: SecretBytes.copyingUTF8(of: token))
        let restored = try #require(try auth(storage).restoreSession())
        #expect(restored.endUserId == "user-1")
        #expect(try restored.getToken() == token)
        #expect(restored.generation == session.generation)
        #expect(try auth(storage, id: "env-2").restoreSession() == nil, "another auth environment has nothing")
        #expect(try storage.observe(authEnvironmentId: "env") == .signedIn(generation: session.generation ?? "", endUserId: "user-1"))
        #expect(try storage.observe(authEnvironmentId: "env-2") == .signedOut)
    }

    /// A planted item costs no more than its length: a restore parses an unusable item planted below the real sign-in once
    /// (`JSONText.bytesRead` counts the bytes handed to the reader), and one over the cap never.
    @Test(arguments: Backend.allCases)
    func aPlantedItemIsParsedOnceAndAnOversizedOneNever(_ backend: Backend) throws {
        let storage = try backend.make()
        try auth(storage).persistSession(endUserId: "real-user", clientSessionToken: "real-token")
        let planted = HostileInput.repeatedMember(300_000)
        try storage.plant("env", secret: planted, generation: "00", persistedAt: 0)
        try storage.plant("env", secret: HostileInput.repeatedMember(1 << 20), generation: "01", persistedAt: 0)
        var restored: ReadPolicy.Restored?
        let parsed = try JSONText.bytesRead { restored = try storage.restore(authEnvironmentId: "env") }
        #expect(restored?.document.endUserId == "real-user")
        #expect(parsed == planted.count, "\(parsed) bytes parsed for one planted document of \(planted.count)")
        #expect(try storage.total() == 3, "unusable items below the restored sign-in are kept")
    }

    @Test(arguments: Backend.allCases)
    func aPersistReplacesThePreviousSignIn(_ backend: Backend) throws {
        let storage = try backend.make()
        let a = try auth(storage)
        try a.persistSession(endUserId: "u1", clientSessionToken: "t1")
        try auth(storage, id: "env-2").persistSession(endUserId: "v", clientSessionToken: "tv")
        let second = try a.persistSession(endUserId: "u2", clientSessionToken: "t2")
        #expect(try storage.total() == 2, "one item per auth environment")
        #expect(try a.restoreSession()?.generation == second.generation)
        #expect(try auth(storage, id: "env-2").restoreSession()?.endUserId == "v")
    }

    @Test(arguments: Backend.allCases)
    func aNewSignInWinsOverAFutureDatedItem(_ backend: Backend) throws {
        let storage = try backend.make()
        let a = try auth(storage)
        try a.persistSession(endUserId: "u1", clientSessionToken: "t1")
        for planted in [UInt64.max, UInt64.max - 1, 4_000_000_000_000_000] {
            try storage.plant("env", secret: doc("planted"), generation: "f", persistedAt: planted)
            let session = try a.persistSession(endUserId: "u2", clientSessionToken: "t2")
            let left = try storage.total()
            #expect(left == 1, "persist left \(left) items")
            #expect(try a.restoreSession()?.generation == session.generation, "a sign-in after an item dated \(planted)")
        }
    }

    @Test(arguments: Backend.allCases)
    func restoreDeletesUnusableItemsOfOursOnly(_ backend: Backend) throws {
        let storage = try backend.make()
        try storage.plant("env", secret: Array("garbage".utf8), generation: "a", persistedAt: 5)
        try storage.plant("other", secret: Array("garbage".utf8), generation: "b", persistedAt: 5)
        #expect(try auth(storage).restoreSession() == nil)
        #expect(try storage.total() == 1, "the other auth environment's item is untouched")
    }

    @Test(arguments: Backend.allCases)
    func restoreAndTheWatchChooseTheNewestUsableSignIn(_ backend: Backend) throws {
        let storage = try backend.make()
        try storage.plant("env", secret: doc("old"), generation: "a", persistedAt: 10)
        try storage.plant("env", secret: doc("new"), generation: "b", persistedAt: 20)
        try storage.plant("env", secret: Array("broken".utf8), generation: "c", persistedAt: 30)
        try storage.plant("env", secret: Array("portal-keyring-session/9 from-a-newer-version".utf8), generation: "d",
                          persistedAt: 40)
        let expected = SessionObservation.signedIn(generation: "b", endUserId: "new")
        #expect(try storage.observe(authEnvironmentId: "env") == expected)
        let session = try #require(try auth(storage).restoreSession())
        #expect(session.generation == "b" && session.endUserId == "new")
        #expect(try storage.total() == 3, "the unusable item was deleted, the newer version's kept")
        #expect(try storage.observe(authEnvironmentId: "env") == expected)
    }

    @Test(arguments: Backend.allCases)
    func aDocumentNamingAnotherEnvironmentIsNeitherRestoredNorDeleted(_ backend: Backend) throws {
        let storage = try backend.make()
        let document = SessionDocument.encode(authEnvironmentId: "env-other", endUserId: "them",
                                              token: SecretBytes.copyingUTF8(of: "theirs"), generation: "ab", persistedAt: 1)
        try storage.plant("env", secret: plainBytes(document), generation: "ab", persistedAt: 1)
        #expect(try auth(storage).restoreSession() == nil)
        #expect(try storage.total() == 1)
    }

    @Test(arguments: Backend.allCases)
    func invalidationRemovesThatSignInAndClearThisEnvironmentsOnly(_ backend: Backend) throws {
        let storage = try backend.make()
        let a = try auth(storage)
        try auth(storage, id: "env-2").persistSession(endUserId: "v", clientSessionToken: "tv")
        try a.persistSession(endUserId: "u1", clientSessionToken: "t1")
        let restored = try #require(try a.restoreSession())
        // A newer sign-in stored by another process survives the older one's invalidation.
        try storage.plant("env", secret: doc("newer"), generation: "ff", persistedAt: UInt64.max)
        try restored.invalidate()
        #expect(try a.restoreSession()?.endUserId == "newer")
        #expect(try storage.deleteAll(authEnvironmentId: "env", generation: nil) == 1)
        #expect(try a.restoreSession() == nil)
        #expect(try storage.deleteAll(authEnvironmentId: "env", generation: nil) == 0, "nothing to clear is not an error")
        #expect(try auth(storage, id: "env-2").restoreSession()?.endUserId == "v")
    }

    /// An item's id names it across later writes: removing an item stored before it, or adding
    /// one after it, leaves the id valid (a file keyring's position in the file would not be).
    @Test(arguments: Backend.allCases)
    func anItemIdOutlivesOtherWrites(_ backend: Backend) throws {
        let storage = try backend.make()
        try storage.plant("before", secret: doc("b"), generation: "b0", persistedAt: 1)
        let id = try storage.plant("env", secret: doc("mine"), generation: "a0", persistedAt: 2)
        #expect(try storage.restore(authEnvironmentId: "env")?.itemId == id)
        #expect(try storage.deleteAll(authEnvironmentId: "before", generation: nil) == 1)
        try storage.plant("after", secret: doc("c"), generation: "c0", persistedAt: 3)
        try storage.delete(itemId: id)
        #expect(try storage.restore(authEnvironmentId: "env") == nil)
        #expect(try storage.total() == 1)
        try storage.delete(itemId: id)  // already gone: not an error
        #expect(try storage.restore(authEnvironmentId: "after")?.document.endUserId == "c")
    }
}
