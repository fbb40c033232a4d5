#if canImport(Glibc)
import Glibc
#endif

/// A storage that keeps, for each auth environment, the record that the host's session was moved
/// into it (`HostKeyringMigration`): the file keyring keeps it as an item of its own
/// (`FileKeyringStorage+HostMigration.swift`), so the record belongs to the file, not to a process.
protocol HostMigrationRecord: SessionStorage {
    /// Whether the move for `authEnvironmentId` is recorded here.
    func hostMigrationRecorded(authEnvironmentId: String) throws(StorageFailure) -> Bool
    /// Records the move for `authEnvironmentId` (nothing when it is recorded already).
    func recordHostMigration(authEnvironmentId: String) throws(StorageFailure)
}

/// The move of a session from the host's Secret Service into the sandbox's file keyring
/// (docs/flatpak.md#in-your-app): an app that reached `org.freedesktop.secrets` in an earlier release (the
/// talk-name, or no sandbox) has its session there. Before the first operation on a file keyring
/// for an auth environment, while the bus still reaches the Secret Service, the newest sign-in
/// there is written into the file and read back, then the host items that read listed are
/// deleted, and the move is recorded in the file. Once recorded, that file never takes a session
/// from the host for that auth environment again: another Secret Service client of the user can
/// store a sign-in of its own account on the host at any time, and the app's private file must not
/// take it later (after a sign-out, say). Nothing is lost at any step:
///
/// - the host unreachable (`StorageFailure.unavailable`: the sandbox without the talk-name): nothing
///   to move, the file keyring alone is the storage; nothing is recorded (the host may be reachable
///   to a later process);
/// - the file holds this sign-in already (the process that wrote it stopped before the host
///   delete), or a newer one: nothing is written; the host items read are deleted (no duplicate);
/// - the host's sign-in is newer than the file's but of **another end user**: it is not written
///   (the file's session is never replaced by another end user's without the person's say, as a
///   redirect's `differentEndUser`), it stays on the host where it was stored, and the move is
///   recorded;
/// - a sign-in stored on the host during the move (after the read): it is not deleted, and the move
///   is not recorded, so the next call moves it (or keeps it on the host, as above);
/// - the host cannot be read, or the write, read-back or delete fails: the operation fails with
///   that storage error, and the next operation tries again (never "signed out" while the host
///   holds a session we could not read).
///
/// Done once per file keyring and auth environment (the record), remembered per process too.
/// Every step — the host's reads and deletes, the file's reads and writes — runs within the
/// deadline of the operation that needed the move (`OperationDeadline`, set by `FlatpakStorage`),
/// never a deadline of its own: a move cut by it fails that operation with nothing lost, and the
/// next call goes on from where the file and the host are.
struct HostKeyringMigration: Sendable {
    let host: any SessionStorage
    let file: any HostMigrationRecord
    /// Names the file keyring, to remember per file which auth environments are done.
    let fileKey: String

    /// `fileKey` + auth environment of the moves recorded (or found unneeded) in this process.
    private static let done = Lock<Set<String>>([])

    /// The newest host sign-in moved into the file, unless the file records the move done.
    func ensure(authEnvironmentId: String) throws(StorageFailure) {
        let key = doneKey(authEnvironmentId)
        if Self.done.withLock({ $0.contains(key) }) { return }
        if try move(authEnvironmentId) {
            Self.done.withLock { _ = $0.insert(key) }
        }
    }

    /// Forgets what this process remembers of this file and auth environment (tests: a new
    /// process over the same file).
    func forgetDone(authEnvironmentId: String) {
        let key = doneKey(authEnvironmentId)
        Self.done.withLock { _ = $0.remove(key) }
    }

    /// What this process remembers a move by: the file and the auth environment.
    private func doneKey(_ authEnvironmentId: String) -> String {
        fileKey + "\u{0}" + authEnvironmentId
    }

    /// One attempt; true when the move is finished (recorded, or the host out of reach).
    private func move(_ authEnvironmentId: String) throws(StorageFailure) -> Bool {
        if try file.hostMigrationRecorded(authEnvironmentId: authEnvironmentId) { return true }
        let found: ReadPolicy.Restored?
        do {
            found = try host.restore(authEnvironmentId: authEnvironmentId)
        } catch {
            if case .unavailable = error { return true }
            throw error
        }
        if let found {
            let current = try file.restore(authEnvironmentId: authEnvironmentId)
            if Self.needsWrite(found, over: current) {
                if let current, current.document.endUserId != found.document.endUserId {
                    // Another end user's sign-in: kept on the host, never written over this one.
                    try file.recordHostMigration(authEnvironmentId: authEnvironmentId)
                    return true
                }
                try write(found, authEnvironmentId)
            }
            // The items that read listed: the moved sign-in and older ones. One stored since is
            // not among them.
            for itemId in found.itemsRead { try host.delete(itemId: itemId) }
            if try host.restore(authEnvironmentId: authEnvironmentId) != nil {
                // Stored on the host during the move: the next call moves it.
                return false
            }
        }
        try file.recordHostMigration(authEnvironmentId: authEnvironmentId)
        return true
    }

    /// Writes the host's sign-in into the file, ranked where it was (its `persisted_at`, or above
    /// the file's older items), and reads it back: a sign-in stored on the host during the move
    /// still ranks above the moved one at the next call.
    private func write(_ found: ReadPolicy.Restored, _ authEnvironmentId: String) throws(StorageFailure) {
        let generation = found.generation ?? ItemSchema.newGeneration()
        let document = found.document
        _ = try file.replace(authEnvironmentId: authEnvironmentId, generation: generation,
                             now: document.persistedAt ?? ItemSchema.persistTimestamp(),
                             label: ItemSchema.itemLabel(authEnvironmentId)) { persistedAt in
            SessionDocument.encode(authEnvironmentId: authEnvironmentId, endUserId: document.endUserId,
                                   token: document.token, generation: generation, persistedAt: persistedAt)
        }
        let back = try file.restore(authEnvironmentId: authEnvironmentId)
        guard let back, back.generation == generation, back.document.endUserId == document.endUserId,
              Self.same(back.document.token, document.token) else {
            throw .fileKeyring("could not take over the session of the host's Secret Service: it did not read back "
                               + "as written; the host keeps it")
        }
    }

    /// Whether the host's sign-in must be written: the file has none, or an older one.
    static func needsWrite(_ host: ReadPolicy.Restored, over file: ReadPolicy.Restored?) -> Bool {
        guard let file else { return true }
        if let generation = host.generation, generation == file.generation { return false }
        return PersistOrder.precedes(rank(file), rank(host))
    }

    /// Whether two tokens hold the same bytes (no copy made).
    private static func same(_ a: SecretBytes, _ b: SecretBytes) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.count == y.count && memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 } }  // trusted: tokens are never empty (checkToken)
    }

    private static func rank(_ restored: ReadPolicy.Restored) -> (UInt64, String?) {
        (restored.document.persistedAt ?? 0, restored.generation)
    }
}
