import Testing
import Dispatch
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// Promises of the file keyring's writers that the suites let through when they were broken on
/// purpose (docs/security.md, "The file keyring's writers"): each test here fails
/// under its mutant in Tests/mutants/file-keyring/.
@Suite(.serialized) struct FileKeyringPromiseTests {
    private func auth(_ storage: any SessionStorage, id: String = "env") throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: storage)
    }

    /// Promise 1: restore removes an unusable item of ours (a document it cannot decode) in a
    /// write under the file's lock; when that write fails — here the lock is held by another
    /// writer past the operation's deadline — restore throws a storage failure, as the Secret
    /// Service path does when a delete fails ("an unusable entry could not be cleared"), and never
    /// answers "signed out" with the item left behind. Once the lock is free, the next restore
    /// removes it and answers signed out.
    @Test func aRestoreWhoseRemovalOfAnUnusableItemFailsIsAStorageFailure() throws {
        let store = try FileStore(timeouts: KeyringTimeouts(callMilliseconds: 300, promptMilliseconds: 300))
        _ = try store.plant("env", secret: Array("not a session document".utf8), generation: "aa", persistedAt: 5)
        // The key derived without the 300 ms bound (PBKDF2 is slow under the sanitizers); the
        // storages share the master secret, so the bounded restore below reuses it.
        #expect(try store.storage.withTimeouts(.default).observe(authEnvironmentId: "env") == .signedOut)
        let reader = try auth(store.storage)
        let lock = try FileKeyringLock.take(store.path, until: .distantFuture)
        do {
            defer { close(lock) }
            do throws(PortalAuthError) {
                let restored = try reader.restoreSession()
                Issue.record("restore answered \(restored == nil ? "signed out" : "a session") although the unusable item could not be removed")
            } catch {
                guard case .sessionStorageFailure(let message) = error else { Issue.record("restore threw \(error)"); return }
                #expect(message.contains("restore did not get the file's lock within 300 ms"), "\(message)")
            }
            #expect(try store.total() == 1, "the unusable item is still there")
        }
        #expect(try auth(store.storage.withTimeouts(.default)).restoreSession() == nil)
        #expect(try store.total() == 0, "removed once the lock was free")
    }

    /// Promise 2: a writer holds the lock beside the file from its read to its replace. A second
    /// writer of this app (a persist of another auth environment: no persist turn keeps them
    /// apart, only the file's lock) started while the first is about to put its new file in place
    /// cannot finish until the first has; the first writes once. With the lock released early,
    /// the second completes inside the first's read–change–write and the first starts over on
    /// the file it finds — nothing is lost, which is why only this shows it.
    @Test func aWriterHoldsTheLockUntilItsWriteIsInPlace() throws {
        let store = try FileStore(timeouts: KeyringTimeouts(callMilliseconds: 10_000, promptMilliseconds: 10_000))
        try auth(store.storage, id: "setup").persistSession(endUserId: "s", clientSessionToken: "t")
        let replaces = Lock(0)
        let finishedInside = Lock<Bool?>(nil)
        let second = Lock<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        var thread: pthread_t?
        let storage = store.storage, path = store.path
        // The hook is the process's: other suites running meanwhile write keyrings of their own.
        FileKeyringFile.beforeReplace = { replaced in
            guard replaced == path, replaces.withLock({ $0 += 1; return $0 }) == 1 else { return }
            // The first writer's new file is written, not yet in place: the second writer starts.
            thread = startThread {
                let generation = ItemSchema.newGeneration()
                do throws(StorageFailure) {
                    _ = try storage.replace(authEnvironmentId: "promise-second", generation: generation, now: ItemSchema.persistTimestamp(),
                                            label: "L") { persistedAt in
                        SessionDocument.encode(authEnvironmentId: "promise-second", endUserId: "u2", token: SecretBytes.copyingUTF8(of: "t2"),
                                               generation: generation, persistedAt: persistedAt)
                    }
                    second.withLock { $0 = "ok" }
                } catch {
                    second.withLock { $0 = error.message }
                }
                finished.signal()
            }
            finishedInside.withLock { $0 = finished.wait(timeout: .now() + .seconds(3)) == .success }
        }
        defer { FileKeyringFile.beforeReplace = nil }
        try auth(store.storage, id: "promise-first").persistSession(endUserId: "u1", clientSessionToken: "t1")
        let started = try #require(thread, "the second writer was started")
        pthread_join(started, nil)
        #expect(finishedInside.withLock { $0 } == false,
                "a second writer finished while the first held (should have held) the lock, between its read and its replace")
        #expect(second.withLock { $0 } == "ok")
        #expect(replaces.withLock { $0 } == 2, "the first writer replaced the file once, the second once")
        #expect(try auth(store.storage, id: "promise-first").restoreSession()?.endUserId == "u1")
        #expect(try auth(store.storage, id: "promise-second").restoreSession()?.endUserId == "u2")
        #expect(try store.total() == 3)
    }

    /// Promise 6, the file's half: a writer waits for the lock beside the file at most its
    /// operation's deadline, so a persist whose turn is free (`PersistTurn`, guarded by
    /// `PersistTurnTests/aPersistWaitsForItsTurnAtMostOneCallDeadlineInAll`) and a clear each
    /// give up after one call deadline while another writer holds the lock. The existing
    /// `FileKeyringStorageTests/aWriterHoldingTheLockPastTheDeadline…` allows a persist 2000 ms
    /// for its 300 ms turn and 300 ms lock, which a doubled wait passes.
    @Test func aWriterWaitsForTheLockAtMostItsDeadline() throws {
        let store = try FileStore(timeouts: KeyringTimeouts(callMilliseconds: 1_000, promptMilliseconds: 1_000))
        let id = "lock-wait-\(getpid())"  // a turn of its own: other suites persist "env" meanwhile
        // The key derived without the bound (PBKDF2), kept for the bounded storage below.
        try auth(store.storage.withTimeouts(.default), id: id).persistSession(endUserId: "u", clientSessionToken: "t")
        let writer = try auth(store.storage, id: id)
        let lock = try FileKeyringLock.take(store.path, until: .distantFuture)
        defer { close(lock) }
        let operations: [(String, () throws -> Void)] = [
            ("persist", { _ = try writer.persistSession(endUserId: "v", clientSessionToken: "t2") }),
            ("clear", { try writer.clearPersistedSession() }),
        ]
        for (operation, body) in operations {
            let start = monotonicMilliseconds()
            #expect(throws: PortalAuthError.self, "\(operation) wrote while another writer held the lock") { try body() }
            let waited = monotonicMilliseconds() - start
            #expect(waited >= 990 && waited < 1_600, "\(operation) waited \(waited) ms for the lock under a 1000 ms deadline")
        }
        #expect(try auth(store.storage.withTimeouts(.default), id: id).restoreSession()?.endUserId == "u")
    }
}
