#if canImport(Glibc)
import Glibc
#endif

/// The move of a session from the host's Secret Service into the sandbox's file keyring
/// (README, "Flatpak"): an app that reached `org.freedesktop.secrets` in an earlier release (the
/// talk-name, or no sandbox) has its session there. Before the first operation on the file
/// keyring for an auth environment, while the bus still reaches the Secret Service, the newest
/// sign-in there is written into the file and read back, and only then are the host's items of
/// that auth environment deleted. Nothing is lost at any step:
///
/// - the host unreachable (`StorageFailure.unavailable`: the sandbox without the talk-name): nothing
///   to move, the file keyring alone is the storage;
/// - the file holds this sign-in already (the process that wrote it stopped before the host
///   delete), or a newer one: nothing is written; the host items are deleted (no duplicate left);
/// - the host cannot be read, or the write, read-back or delete fails: the operation fails with
///   that storage error, and the next operation tries again (never "signed out" while the host
///   holds a session we could not read).
///
/// Done once per process, file and auth environment, once it succeeded.
struct HostKeyringMigration: Sendable {
    let host: any SessionStorage
    let file: any SessionStorage
    /// Names the file keyring, to remember per file which auth environments are done.
    let fileKey: String

    /// `fileKey` + auth environment of the moves done (or found unneeded) in this process.
    private static let done = Lock<Set<String>>([])

    /// The newest host sign-in moved into the file, when there is one and it is not already
    /// done in this process.
    func ensure(authEnvironmentId: String) throws(StorageFailure) {
        let key = fileKey + "\u{0}" + authEnvironmentId
        if Self.done.withLock({ $0.contains(key) }) { return }
        try move(authEnvironmentId)
        Self.done.withLock { _ = $0.insert(key) }
    }

    private func move(_ authEnvironmentId: String) throws(StorageFailure) {
        let found: ReadPolicy.Restored?
        do {
            found = try host.restore(authEnvironmentId: authEnvironmentId)
        } catch {
            if case .unavailable = error { return }
            throw error
        }
        guard let found else { return }
        let current = try file.restore(authEnvironmentId: authEnvironmentId)
        if Self.needsWrite(found, over: current) {
            let generation = found.generation ?? PortalAuth.newGeneration()
            let document = found.document
            _ = try file.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: PortalAuth.persistTimestamp(),
                                 label: PortalAuth.itemLabel(authEnvironmentId)) { persistedAt in
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
        // Every host item of this auth environment is the moved sign-in or older than it.
        try host.deleteAll(authEnvironmentId: authEnvironmentId, generation: nil)
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
