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
    func migration(_ host: any SessionStorage, _ file: any HostMigrationRecord) -> HostKeyringMigration {
        HostKeyringMigration(host: host, file: file, fileKey: "/test/\(ItemSchema.newGeneration())/default.keyring")
    }

    func restored(_ storage: any SessionStorage, _ env: String? = nil) throws -> (user: String, token: String, generation: String?)? {
        guard let found = try storage.restore(authEnvironmentId: env ?? self.env) else { return nil }
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
        store(host, user: "eu-1", token: "cst-new", generation: "dd02", at: 300)
        store(file, user: "eu-1", token: "cst-old", generation: "dd01", at: 100)
        try migration(host, file).ensure(authEnvironmentId: env)
        let moved = try #require(try restored(file))
        #expect(moved.user == "eu-1" && moved.token == "cst-new" && moved.generation == "dd02")
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

    // MARK: - Once per file keyring and auth environment, never over another end user

    /// A stored document of `environment` (not the suite's own).
    func store(_ storage: InMemoryStorage, _ environment: String, user: String, token: String, generation: String,
               at persistedAt: UInt64) {
        let document = SessionDocument.encode(authEnvironmentId: environment, endUserId: user,
                                              token: SecretBytes.copyingUTF8(of: token), generation: generation,
                                              persistedAt: persistedAt)
        storage.add(environment, secret: document.withUnsafeBytes { Array($0) }, generation: generation, persistedAt: persistedAt)
    }

    @Test func anotherEndUsersSignInOnTheHostIsNeverMovedOverTheFilesSession() throws {
        // Any Secret Service client of the user can store a sign-in of its own account for our auth
        // environment on the host, newer than the user's session in the file.
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(file, user: "eu-user", token: "cst-user", generation: "a101", at: 100)
        store(host, user: "eu-attacker", token: "cst-attacker", generation: "a102", at: 300)
        let move = migration(host, file)
        try move.ensure(authEnvironmentId: env)
        let kept = try #require(try restored(file))
        #expect(kept.user == "eu-user" && kept.token == "cst-user", "the file's session was replaced by \(kept.user)")
        #expect(file.count == 1)
        #expect(host.count == 1, "the other end user's sign-in stays on the host, where it was stored")
        #expect(file.recordedMigrations.contains(env), "the move is recorded: no later call takes it")
        // Signed out in the sandbox, then a new process: the host's item is still not taken.
        try file.deleteAll(authEnvironmentId: env, generation: nil)
        move.forgetDone(authEnvironmentId: env)
        try move.ensure(authEnvironmentId: env)
        #expect(try restored(file) == nil, "after a sign-out the next process took the host's other account")
        #expect(host.count == 1)
    }

    @Test func theSameEndUsersNewerSignInOnTheHostIsMoved() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(file, user: "eu-1", token: "cst-old", generation: "a201", at: 100)
        store(host, user: "eu-1", token: "cst-new", generation: "a202", at: 300)
        try migration(host, file).ensure(authEnvironmentId: env)
        #expect(try restored(file)?.token == "cst-new")
        #expect(file.count == 1 && host.count == 0)
    }

    @Test func theMoveIsRecordedOnceAndTheHostIsNotReadAgainForThatFile() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(host, user: "eu-1", token: "cst-host", generation: "a301", at: 100)
        let move = migration(host, file)
        try move.ensure(authEnvironmentId: env)
        #expect(file.recordedMigrations == [env])
        // A new process over the same file, after a sign-out there; the host has a sign-in again.
        try file.deleteAll(authEnvironmentId: env, generation: nil)
        store(host, user: "eu-2", token: "cst-later", generation: "a302", at: 200)
        move.forgetDone(authEnvironmentId: env)
        try move.ensure(authEnvironmentId: env)
        #expect(try restored(file) == nil, "a recorded move ran again")
        #expect(host.count == 1)
    }

    @Test func aHostWithNothingOfOursIsRecordedAndOneOutOfReachIsNot() throws {
        let host = InMemoryStorage(), file = InMemoryStorage()
        try migration(host, file).ensure(authEnvironmentId: env)
        #expect(file.recordedMigrations == [env], "nothing to move is a finished move")
        let unreachable = InMemoryStorage(), other = InMemoryStorage()
        unreachable.fail(with: .unavailable("no provider owns org.freedesktop.secrets"))
        try migration(unreachable, other).ensure(authEnvironmentId: env)
        #expect(other.recordedMigrations.isEmpty, "a host out of reach may hold a session a later process can move")
    }

    @Test func aSecondAuthEnvironmentInTheSameFileAndProcessIsMoved() throws {
        // Promise: the move is per auth environment *and* per file keyring.
        let host = InMemoryStorage(), file = InMemoryStorage()
        store(host, "env-migration-a", user: "eu-a", token: "cst-a", generation: "a401", at: 100)
        store(host, "env-migration-b", user: "eu-b", token: "cst-b", generation: "a402", at: 100)
        let move = migration(host, file)
        try move.ensure(authEnvironmentId: "env-migration-a")
        try move.ensure(authEnvironmentId: "env-migration-b")
        #expect(try restored(file, "env-migration-a")?.token == "cst-a")
        #expect(try restored(file, "env-migration-b")?.token == "cst-b", "the second auth environment was never moved")
        #expect(host.count == 0)
    }

    @Test func aSecondFileKeyringInTheSameProcessIsMoved() throws {
        let host = InMemoryStorage(), first = InMemoryStorage(), second = InMemoryStorage()
        store(host, user: "eu-1", token: "cst-first", generation: "a501", at: 100)
        try migration(host, first).ensure(authEnvironmentId: env)
        #expect(try restored(first)?.token == "cst-first" && host.count == 0)
        // The same auth environment, another file keyring (another app's data, another path).
        store(host, user: "eu-1", token: "cst-second", generation: "a502", at: 200)
        try migration(host, second).ensure(authEnvironmentId: env)
        #expect(try restored(second)?.token == "cst-second", "the second file keyring was never moved into")
        #expect(host.count == 0)
    }

    @Test func aSignInStoredOnTheHostDuringTheMoveIsNeitherDeletedNorDropped() throws {
        let inner = InMemoryStorage(), file = InMemoryStorage()
        store(inner, user: "eu-1", token: "cst-read", generation: "a601", at: 100)
        // Another process of the app (unsandboxed, or an earlier release) persists right before
        // the move's first host delete.
        let host = HostStoringBeforeDelete(inner) {
            self.store(inner, user: "eu-1", token: "cst-during", generation: "a602", at: 500)
        }
        let move = migration(host, file)
        try move.ensure(authEnvironmentId: env)
        #expect(try restored(file)?.token == "cst-read")
        #expect(try restored(inner)?.token == "cst-during", "the sign-in stored during the move was deleted on the host")
        #expect(file.recordedMigrations.isEmpty, "recorded as done while a sign-in waits on the host")
        // The next call (same process) moves it.
        try move.ensure(authEnvironmentId: env)
        #expect(try restored(file)?.token == "cst-during", "the sign-in stored during the move was dropped")
        #expect(file.count == 1 && inner.count == 0)
        #expect(file.recordedMigrations == [env])
    }

    @Test func theRecordIsAnItemOfTheFileKeyringPerAuthEnvironmentThatLibsecretReads() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/default.keyring"
        let file = FileKeyringStorage(path: path, masterSecret: master(ourSecret))
        let host = InMemoryStorage()
        store(host, "env-migration-a", user: "eu-a", token: "cst-a", generation: "a701", at: 100)
        let move = HostKeyringMigration(host: host, file: file, fileKey: path)
        defer { for e in ["env-migration-a", "env-migration-b"] { move.forgetDone(authEnvironmentId: e) } }
        try move.ensure(authEnvironmentId: "env-migration-a")
        #expect(try restored(file, "env-migration-a")?.token == "cst-a")
        #expect(try file.hostMigrationRecorded(authEnvironmentId: "env-migration-a"))
        #expect(try !file.hostMigrationRecorded(authEnvironmentId: "env-migration-b"), "one record counts for every environment")
        // A new process: the record is in the file. Environment b is still moved; a is not again.
        move.forgetDone(authEnvironmentId: "env-migration-a")
        store(host, "env-migration-a", user: "eu-x", token: "cst-x", generation: "a702", at: 900)
        store(host, "env-migration-b", user: "eu-b", token: "cst-b", generation: "a703", at: 100)
        try move.ensure(authEnvironmentId: "env-migration-a")
        try move.ensure(authEnvironmentId: "env-migration-b")
        #expect(try restored(file, "env-migration-a")?.token == "cst-a", "a recorded move ran again in a new process")
        #expect(try restored(file, "env-migration-b")?.token == "cst-b")
        #expect(host.count == 1)
        // libsecret's own file backend reads the record.
        let read = try SecretTool.lookup(file: path, password: ourSecret,
                                         ["xdg:schema", FileKeyringStorage.migrationSchema,
                                          FileKeyringStorage.migratedAttribute, "env-migration-b"])
        #expect(read.map { String(decoding: $0, as: UTF8.self) } == "host keyring migration done")
    }
}

/// A host whose first single-item delete is preceded by `before` (another process storing a
/// sign-in there at that moment).
final class HostStoringBeforeDelete: SessionStorage, @unchecked Sendable {
    let inner: InMemoryStorage
    private var before: (() -> Void)?
    init(_ inner: InMemoryStorage, before: @escaping () -> Void) {
        self.inner = inner
        self.before = before
    }

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try inner.restore(authEnvironmentId: authEnvironmentId)
    }

    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try inner.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: now, label: label, document: document)
    }

    func delete(itemId: String) throws(StorageFailure) {
        if let before { self.before = nil; before() }
        try inner.delete(itemId: itemId)
    }

    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        if let before { self.before = nil; before() }
        return try inner.deleteAll(authEnvironmentId: authEnvironmentId, generation: generation)
    }

    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        try inner.observe(authEnvironmentId: authEnvironmentId)
    }
}
