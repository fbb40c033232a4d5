import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Writing the file keyring: persist, clear, the deletion of one item, and restore's removal of
/// unusable items — each one read–change–write of the whole file under its lock
/// (`transaction`). The reading half is in FileKeyringStorage.swift.
extension FileKeyringStorage {
    /// One operation (`SessionStorage.replace`, decided by `PersistOrder.replace`) in one write:
    /// under the file's lock the items of ours are read, the new item is added with a
    /// `persisted_at` above every one of them, the items `PersistOrder.cleanup` names are
    /// removed, and the file is replaced once — the new item and the removals land together or
    /// not at all. Under the lock no persist of ours runs meanwhile, so nothing is superseded.
    ///
    /// Persists of one auth environment first take their turn (`PersistTurn`, waited for at most
    /// the call deadline before this operation's deadline starts), as on the Secret Service: the
    /// threads of a process then queue in arrival order, where the file lock alone would let a
    /// late thread overtake.
    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try PersistTurn.shared.run(authEnvironmentId, waitingAtMost: timeouts.callMilliseconds) { () throws(StorageFailure) in
            try transaction("persist", until: deadline(), creating: true, otherwise: 0) { keyring, key throws(StorageFailure) in
                let persistedAt = try PersistOrder.replace(
                    now: now, generation: generation,
                    seen: { () throws(StorageFailure) in try ours(keyring, key, authEnvironmentId, secrets: false).map { $0.stored } },
                    create: { persistedAt throws(StorageFailure) in
                        let attributes = ItemSchema.match(authEnvironmentId) + [
                            (ItemSchema.generationAttribute, generation),
                            (ItemSchema.persistedAtAttribute, String(persistedAt)),
                        ]
                        let time = FileKeyring.now()
                        let item = FileKeyringItem(attributes: Dictionary(uniqueKeysWithValues: attributes), label: label,
                                                   created: time, modified: time, secret: document(persistedAt))
                        return try mapping { () throws(FileKeyringError) in try keyring.add(item, key: key).id }
                    },
                    found: { ours, _ in
                        (try? self.ours(keyring, key, authEnvironmentId, secrets: false))?.map { $0.stored }.filter { $0.itemId != ours }
                    },
                    delete: { itemId in
                        if let found = try? self.ours(keyring, key, authEnvironmentId, secrets: false) {
                            keyring.remove(found.filter { $0.stored.itemId == itemId }.map { $0.found })
                        }
                    })
                return (persistedAt, true)
            }
        }
    }

    /// Removes the item with this id, when it is still there, opens under the key and is of our
    /// schema (any auth environment: the id came from one of ours).
    func delete(itemId: String) throws(StorageFailure) {
        try transaction("delete", until: deadline(), creating: false, otherwise: ()) { keyring, key throws(StorageFailure) in
            let query = ["xdg:schema": ItemSchema.name]
            let found = try mapping { () throws(FileKeyringError) in try keyring.search(query, key: key) }
                .filter { keyring.items[$0.index].id == itemId }
            keyring.remove(found)
            return ((), !found.isEmpty)
        }
    }

    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try transaction("clear", until: deadline(), creating: false, otherwise: 0) { keyring, key throws(StorageFailure) in
            let found = try ours(keyring, key, authEnvironmentId, generation: generation, secrets: false)
            keyring.remove(found.map { $0.found })
            return (found.count, !found.isEmpty)
        }
    }

    /// Removes this auth environment's items with these ids that are still there (restore's
    /// unusable items), within the operation that ends at `end`.
    func remove(ids: Set<String>, authEnvironmentId: String, operation: String, until end: MonotonicInstant) throws(StorageFailure) {
        try transaction(operation, until: end, creating: false, otherwise: ()) { keyring, key throws(StorageFailure) in
            let found = try ours(keyring, key, authEnvironmentId, secrets: false).filter { ids.contains($0.stored.itemId) }
            keyring.remove(found.map { $0.found })
            return ((), !found.isEmpty)
        }
    }

    /// One read–change–write of the file under its lock (`FileKeyringLock`), waited for until
    /// `end`: the file is read again under the lock, `change` edits it (returning its result and
    /// whether it changed anything), and the file is replaced when it did. Before the replace the
    /// file must still be the one read (`FileKeyringFile.Stamp`): a writer that takes no lock
    /// (libsecret in the same app) may have replaced it, and then `change` runs again on the new
    /// file, so that write is not lost. Nothing is written once `end` has passed.
    ///
    /// Without a file, `otherwise` is the answer (nothing to remove), unless `creating`: then the
    /// directory is made (0700) and a new keyring (a fresh salt) is written. The key of the file
    /// as it is now is made before the lock is taken.
    func transaction<T>(_ operation: String, until end: MonotonicInstant, creating: Bool, otherwise: T,
                        _ change: (inout FileKeyring, FileKeyringKey) throws(StorageFailure) -> (T, changed: Bool))
        throws(StorageFailure) -> T {
        // The file itself, when `path` is a symbolic link: it is read, locked (the lock beside
        // it) and replaced there, so the link stays and every writer takes the same lock.
        let file = try target()
        if creating {
            try mapping { () throws(FileKeyringError) in try FileKeyringFile.makeDirectory(of: file) }
        } else if try mapping({ () throws(FileKeyringError) in try FileKeyringFile.stamp(file) }) == nil {
            return otherwise
        }
        // The key before the lock: asking the Secret portal for the master secret and deriving
        // the key take tens of milliseconds (seconds on a loaded machine), which must not hold
        // the other writers up; under the lock it is then the kept one (same salt). Only a new
        // file (a fresh salt) needs its key under the lock.
        if let current = try mapping({ () throws(FileKeyringError) in try FileKeyringFile.loadStamped(file, until: end) }) {
            _ = try masterSecret.key(for: current.keyring, path: path, until: end)
        }
        let lock: Int32
        do throws(FileKeyringLock.Failure) {
            lock = try FileKeyringLock.take(file, until: end)
        } catch {
            switch error {
            case .timedOut:
                throw .fileKeyring("\(path): \(operation) did not get the file's lock within \(timeouts.callMilliseconds) ms "
                                   + "(another process of this app is writing it); nothing was written")
            case .cancelled: throw .fileKeyring("\(path): \(operation) was cancelled; nothing was written")
            case .io(let detail): throw .fileKeyring("\(path): its lock cannot be taken: \(detail)")
            }
        }
        defer { close(lock) }
        while true {
            let loaded = try mapping { () throws(FileKeyringError) in try FileKeyringFile.loadStamped(file, until: end) }
            if loaded == nil && !creating { return otherwise }
            var keyring: FileKeyring
            if let loaded {
                keyring = loaded.keyring
            } else {
                keyring = try mapping { () throws(FileKeyringError) in try FileKeyring() }
            }
            let key = try masterSecret.key(for: keyring, path: path, until: end)
            let (result, changed) = try change(&keyring, key)
            if !changed { return result }
            guard !end.hasPassed else {
                throw .fileKeyring("\(path): \(operation) did not finish within \(timeouts.callMilliseconds) ms; nothing was written")
            }
            // Replaced meanwhile by a writer that takes no lock (up to the moment of our rename):
            // start over on its file.
            guard try mapping({ () throws(FileKeyringError) in try FileKeyringFile.write(keyring, to: file, over: loaded?.stamp) })
            else { continue }
            return result
        }
    }
}
