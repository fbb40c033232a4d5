import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring

/// The move of a session from the host's Secret Service into the sandbox's file keyring
/// (`HostKeyringMigration`): written and read back before the host delete, never lost, never
/// left twice — including after a process that stopped between the write and the delete. The
/// storages are in memory here; Tests/flatpak/run.sh moves a real one through the Secret portal.
@Suite struct HostKeyringMigrationTests {
    let env = "env-migration"

    /// A stored version-2 document, as a persist writes it.
    @discardableResult
    func store(_ storage: InMemoryStorage, user: String, token: String, generation: String, at persistedAt: UInt64) -> String {
        let document = SessionDocument.encode(authEnvironmentId: env, endUserId: user, token: SecretBytes.copyingUTF8(of: token),
                                              generation: generation, persistedAt: persistedAt)
        return storage.add(env, secret: document.withUnsafeBytes { Array($0) }, generation: generation, persistedAt: persistedAt)
    }

    /// A migration with a file key of its own (the process remembers each key's done moves).
    func migration(_ host: InMemoryStorage, _ file: InMemoryStorage) -> HostKeyringMigration {
        HostKeyringMigration(host: host, file: file, fileKey: "/test/\(PortalAuth.newGeneration())/default.keyring")
    }

    func restored(_ storage: InMemoryStorage) throws -> (user: String, token: String, generation: String?)? {
        guard let found = try storage.restore(authEnvironmentId: env) else { return nil }
        return (found.document.endUserId, found.document.token.string(), found.generation)
    }

    @Test func theHostsSessionMovesIntoTheFileAndLeavesTheHost() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(host, user: "eu-1", token: "cst-host", generation: "aa01", at: 100)
        store(host, user: "eu-0", token: "cst-older", generation: "aa00", at: 50)
        try migration(host, file).ensure(authEnvironmentId: env)
        let moved = try #require(try restored(file))
        #expect(moved.user == "eu-1" && moved.token == "cst-host" && moved.generation == "aa01")
        #expect(file.count == 1)
        #expect(host.count == 0, "the host keeps nothing once the file holds the session")
    }

    @Test func aStopBetweenTheWriteAndTheHostDeleteLeavesOneSessionAfterTheNextCall() throws {
        // The state a process leaves when it stops after the write, before the host delete: the
        // copy's persisted_at above the host's, or below it when the host's clock was ahead.
        for copiedAt: UInt64 in [200, 50] {
            let host = InMemoryStorage(), file = InMemoryStorage()
            store(host, user: "eu-1", token: "cst-host", generation: "bb01", at: 100)
            store(file, user: "eu-1", token: "cst-host", generation: "bb01", at: copiedAt)
            try migration(host, file).ensure(authEnvironmentId: env)
            #expect(file.count == 1, "not written twice (copy at \(copiedAt))")
            #expect(try restored(file)?.generation == "bb01")
            #expect(host.count == 0)
        }
    }

    @Test func aNewerSignInInTheFileStaysAndTheOlderHostOneGoes() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(host, user: "eu-old", token: "cst-old", generation: "cc01", at: 100)
        store(file, user: "eu-new", token: "cst-new", generation: "cc02", at: 300)
        try migration(host, file).ensure(authEnvironmentId: env)
        let kept = try #require(try restored(file))
        #expect(kept.user == "eu-new" && kept.token == "cst-new")
        #expect(file.count == 1 && host.count == 0)
    }

    @Test func aNewerSignInOnTheHostReplacesAnOlderOneInTheFile() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(host, user: "eu-new", token: "cst-new", generation: "dd02", at: 300)
        store(file, user: "eu-old", token: "cst-old", generation: "dd01", at: 100)
        try migration(host, file).ensure(authEnvironmentId: env)
        let moved = try #require(try restored(file))
        #expect(moved.user == "eu-new" && moved.token == "cst-new" && moved.generation == "dd02")
        #expect(file.count == 1 && host.count == 0)
    }

    @Test func anUnreachableHostIsNothingToMove() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        host.fail(with: .unavailable("no provider owns org.freedesktop.secrets"))
        store(file, user: "eu-1", token: "cst-file", generation: "ee01", at: 100)
        try migration(host, file).ensure(authEnvironmentId: env)
        #expect(try restored(file)?.token == "cst-file")
        #expect(host.deleteCalls == 0)
    }

    @Test func aHostThatCannotBeReadFailsTheCallAndLosesNothingUntilItCanBe() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(host, user: "eu-1", token: "cst-host", generation: "ff01", at: 100)
        let move = migration(host, file)
        host.fail(with: .locked("the collection is locked"))
        #expect(throws: StorageFailure.locked("the collection is locked")) { try move.ensure(authEnvironmentId: env) }
        #expect(file.count == 0)
        host.fail(with: nil)
        #expect(host.count == 1, "nothing deleted on the host")
        try move.ensure(authEnvironmentId: env)
        #expect(try restored(file)?.token == "cst-host")
        #expect(host.count == 0)
    }
}
