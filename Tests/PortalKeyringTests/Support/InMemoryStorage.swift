@testable import PortalKeyringCore
@testable import PortalKeyring

/// An in-memory `SessionStorage` for the core's pure logic (no D-Bus). It can be told to fail,
/// to check that failures never delete anything. Restore, persist and the watch decide through
/// the same `ReadPolicy` and `PersistOrder` the Secret Service adapter uses; only the list, read
/// and delete steps are its own.
final class InMemoryStorage: HostMigrationRecord, @unchecked Sendable {
    struct Item { var authEnvironmentId: String; var generation: String?; var persistedAt: UInt64; var secret: [UInt8] }
    private let state = Lock<(items: [String: Item], next: Int, failure: StorageFailure?)>(([:], 0, nil))

    func fail(with failure: StorageFailure?) { state.withLock { $0.failure = failure } }

    /// Makes reads (`items`) fail after `after` successful ones, while stores and deletes keep
    /// working: a restore must still delete nothing when its read fails.
    func failReads(with failure: StorageFailure, after: Int = 0) { readFailure.withLock { $0 = (failure, after) } }
    private let readFailure = Lock<(StorageFailure, Int)?>(nil)

    /// Makes single-item deletes fail (nil: they work again) while reads keep working: a provider
    /// whose deletes fail for a while (a refused prompt, a transient error).
    func failDeletes(with failure: StorageFailure?) { deleteFailure.withLock { $0 = failure } }
    private let deleteFailure = Lock<StorageFailure?>(nil)

    /// Like the Secret Service adapter: a read with secrets leaves the attributes unread, so the
    /// read policy must ask for them separately when it needs them.
    var secretsWithoutAttributes = false

    @discardableResult
    func add(_ authEnvironmentId: String, secret: [UInt8], generation: String? = nil, persistedAt: UInt64 = 0) -> String {
        state.withLock { s in
            s.next += 1
            let id = "item\(s.next)"
            s.items[id] = Item(authEnvironmentId: authEnvironmentId, generation: generation, persistedAt: persistedAt, secret: secret)
            return id
        }
    }

    var count: Int { state.withLock { $0.items.count } }
    private let deletes = Lock(0)
    /// How many delete calls (of any kind) reached the store.
    var deleteCalls: Int { deletes.withLock { $0 } }

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try ReadPolicy.restore(
            authEnvironmentId, items: try items(authEnvironmentId: authEnvironmentId, withSecrets: true),
            inTime: {},
            attributes: { () throws(StorageFailure) in try items(authEnvironmentId: authEnvironmentId, withSecrets: false) },
            delete: { itemId throws(StorageFailure) in try delete(itemId: itemId) })
    }

    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try PersistOrder.replace(
            now: now, generation: generation,
            seen: { () throws(StorageFailure) in try items(authEnvironmentId: authEnvironmentId, withSecrets: false) },
            create: { persistedAt throws(StorageFailure) in
                try store(authEnvironmentId: authEnvironmentId, generation: generation, persistedAt: persistedAt,
                          secret: document(persistedAt))
            },
            found: { ours, _ in
                (try? items(authEnvironmentId: authEnvironmentId, withSecrets: false))?.filter { $0.itemId != ours }
            },
            delete: { itemId in try? delete(itemId: itemId) })
    }

    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        let plan = ReadPolicy.newest(authEnvironmentId, items: try items(authEnvironmentId: authEnvironmentId, withSecrets: true))
        guard let chosen = plan.chosen else { return .signedOut }
        return .signedIn(generation: chosen.generation ?? "", endUserId: chosen.document.endUserId)
    }

    /// This auth environment's items; with `withSecrets`, their secrets too (and, with
    /// `secretsWithoutAttributes`, without their attributes).
    func items(authEnvironmentId: String, withSecrets: Bool) throws(StorageFailure) -> [StoredSessionItem] {
        let readFails: StorageFailure? = readFailure.withLock { slot in
            guard let (failure, after) = slot else { return nil }
            if after > 0 { slot = (failure, after - 1); return nil }
            return failure
        }
        if let readFails { throw readFails }
        let result: Result<[StoredSessionItem], StorageFailure> = state.withLock { s in
            if let failure = s.failure { return .failure(failure) }
            return .success(s.items.filter { $0.value.authEnvironmentId == authEnvironmentId }.map { id, item in
                withSecrets && secretsWithoutAttributes
                    ? StoredSessionItem(itemId: id, generation: nil, persistedAt: 0,
                                        secret: item.secret.withUnsafeBytes { SecretBytes(copying: $0) }, attributesRead: false)
                    : StoredSessionItem(itemId: id, generation: item.generation, persistedAt: item.persistedAt,
                                        secret: withSecrets ? item.secret.withUnsafeBytes { SecretBytes(copying: $0) } : nil)
            })
        }
        return try result.get()
    }

    /// Adds an item as a create would; returns its id.
    @discardableResult
    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               secret: SecretBytes) throws(StorageFailure) -> String {
        let result: Result<String, StorageFailure> = state.withLock { s in
            if let failure = s.failure { return .failure(failure) }
            s.next += 1
            s.items["item\(s.next)"] = Item(authEnvironmentId: authEnvironmentId, generation: generation,
                                            persistedAt: persistedAt, secret: secret.withUnsafeBytes { Array($0) })
            return .success("item\(s.next)")
        }
        return try result.get()
    }

    func delete(itemId: String) throws(StorageFailure) {
        deletes.withLock { $0 += 1 }
        if let failure = deleteFailure.withLock({ $0 }) { throw failure }
        let failure: StorageFailure? = state.withLock { s in
            if let failure = s.failure { return failure }
            s.items[itemId] = nil
            return nil
        }
        if let failure { throw failure }
    }

    /// The auth environments whose move from the host is recorded here (`HostMigrationRecord`).
    private let records = Lock<Set<String>>([])
    var recordedMigrations: Set<String> { records.withLock { $0 } }

    func hostMigrationRecorded(authEnvironmentId: String) throws(StorageFailure) -> Bool {
        if let failure = state.withLock({ $0.failure }) { throw failure }
        return records.withLock { $0.contains(authEnvironmentId) }
    }

    func recordHostMigration(authEnvironmentId: String) throws(StorageFailure) {
        if let failure = state.withLock({ $0.failure }) { throw failure }
        records.withLock { _ = $0.insert(authEnvironmentId) }
    }

    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        deletes.withLock { $0 += 1 }
        let result: Result<Int, StorageFailure> = state.withLock { s in
            if let failure = s.failure { return .failure(failure) }
            let doomed = s.items.filter {
                $0.value.authEnvironmentId == authEnvironmentId && (generation == nil || $0.value.generation == generation)
            }.map(\.key)
            doomed.forEach { s.items[$0] = nil }
            return .success(doomed.count)
        }
        return try result.get()
    }
}
