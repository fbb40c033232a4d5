import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

/// The Secret Service adapter: the only code in the project that calls `secret_*` (STYLE.md).
///
/// Items use the vendor schema `io.portalhq.PortalKeyring.Session` (flags `SECRET_SCHEMA_NONE`, so
/// `xdg:schema` must match and other applications' look-alike items are never seen) with the
/// attributes `auth_environment_id`, `session_generation` and `persisted_at` (SPEC §2).
///
/// The adapter keeps one `SecretService` proxy of its own (with an encrypted transfer session)
/// for the process, on a private session-bus connection (`ServiceConnection`). When a call fails
/// on the cached proxy, the proxy is dropped and the call retried once on a fresh one, so a
/// provider restart between calls is survived; a closed connection (the bus restarted) is
/// replaced at the start of the next call. Unlock prompts go through `UnlockPrompts`.
///
/// Items and collections are addressed by object path through the Secret Service D-Bus API
/// (`SecretBus`), never through libsecret's `SecretItem`/`SecretCollection` proxies: building one
/// costs four blocking round trips (StartServiceByName, GetNameOwner, GetAll, signal
/// subscriptions) and, in libsecret 0.20, leaks about 1 KiB. libsecret still provides the
/// transfer session: its key encrypts every secret sent (`secret_service_encode_dbus_secret`)
/// and decrypts every secret received (`secret_service_decode_dbus_secret`), so a token never
/// crosses the bus in clear. Round trips per operation (gnome-keyring, unlocked, nothing racing):
///
/// | operation | calls |
/// |---|---|
/// | restore | SearchItems, GetSecrets (one call for all matches) |
/// | … with ≥ 2 matches lacking `g`/`t` in their documents, or one usable document without `g` (stored by an earlier version) | + SearchItems, Get(Attributes) per match (`items(withSecrets: false)`) |
/// | … with a locked match | + Unlock and the prompt (`UnlockPrompts`), SearchItems |
/// | persist, nothing older stored | ReadAlias, CreateItem, SearchItems |
/// | persist, replacing k older sign-ins | + Get(Attributes) and Delete per other item |
/// | clear / invalidate | SearchItems, Delete per match |
/// | delete one unusable item | Delete |
///
/// Persist removes older sign-ins before it returns, not in the background: the command-line tool
/// and many apps exit right after persisting, other processes (and the tests) look at the keyring
/// at once, and a removal still running after the call could race a later `clearPersistedSession()`
/// or an invalidation. The Delete costs gnome-keyring a second write of the keyring file, which is
/// most of what a persist costs beyond `secret_password_store_sync` (whose replace-in-place SPEC §2
/// rules out: it would overwrite a newer sign-in stored meanwhile by another process).
struct LibSecretStorage: SessionStorage {
    static let schemaName = "io.portalhq.PortalKeyring.Session"
    static let authEnvironmentAttribute = "auth_environment_id"
    static let generationAttribute = "session_generation"
    static let persistedAtAttribute = "persisted_at"

    let timeouts: KeyringTimeouts

    init(timeouts: KeyringTimeouts = .default) {
        self.timeouts = timeouts
    }

    func items(authEnvironmentId: String, withSecrets: Bool) throws(StorageFailure) -> [StoredSessionItem] {
        try ServiceConnection.shared.run(operation: "restore", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            let match = Self.match(authEnvironmentId)
            if !withSecrets {
                // Attributes can be read while an item is locked: no unlock, no prompt.
                let found = try bus.search(match)
                return try attributes(bus, found.unlocked + found.locked)
            }
            // An item deleted or locked by another thread or process between the search and
            // GetSecrets is searched for again (a few times) rather than reported as unreadable.
            var attempt = 0
            while true {
                attempt += 1
                if let result = try readSecrets(bus, match, lastAttempt: attempt >= 5) {
                    return result
                }
            }
        }
    }

    /// One search (unlocking what is locked) plus one GetSecrets for every match. Returns nil when
    /// an item vanished in between and the caller should search again (never on `lastAttempt`).
    /// The attributes are not read: the document carries the generation and timestamp.
    private func readSecrets(_ bus: SecretBus, _ match: [(String, String)],
                             lastAttempt: Bool) throws(StorageFailure) -> [StoredSessionItem]? {
        let paths = try unlockedSearch(bus, match)
        if paths.isEmpty { return [] }
        FaultInjectionSeam.beforeGetSecrets(bus.call.cancellable)
        let secrets: [String: SecretBytes]
        do throws(StorageFailure.Classified) {
            secrets = try bus.secrets(paths)
        } catch {
            if case .gone = error.kind, !lastAttempt { return nil }
            throw error.storageFailure
        }
        let result = paths.compactMap { path in
            secrets[path].map {
                StoredSessionItem(itemId: path, generation: nil, persistedAt: 0, secret: $0, attributesRead: false)
            }
        }
        if result.count == paths.count { return result }
        // GetSecrets silently skips items it cannot serve: deleted or locked meanwhile (another
        // thread or process). Search again, which unlocks what is locked or throws `.locked`.
        // Items that are gone were deleted: the rest is a consistent answer. Items still there
        // are read again; when that keeps failing, they are unreadable — never reported as absent.
        let missing = paths.filter { secrets[$0] == nil }
        let present = Set(try unlockedSearch(bus, match))
        if !missing.contains(where: present.contains) { return result }
        if lastAttempt { throw .locked("the provider returned no secret for a stored session item") }
        return nil
    }

    /// The attributes of the items at `paths`; items deleted meanwhile are left out, items whose
    /// attributes the provider refuses while locked come back with `attributesRead` false.
    private func attributes(_ bus: SecretBus, _ paths: [String]) throws(StorageFailure) -> [StoredSessionItem] {
        var result: [StoredSessionItem] = []
        for path in paths {
            do throws(StorageFailure.Classified) {
                let attributes = try bus.attributes(path)
                result.append(StoredSessionItem(
                    itemId: path,
                    generation: attributes[Self.generationAttribute],
                    persistedAt: attributes[Self.persistedAtAttribute].flatMap { UInt64($0) } ?? 0,
                    secret: nil))
            } catch {
                switch error.kind {
                case .gone: continue
                case .locked:
                    result.append(StoredSessionItem(itemId: path, generation: nil, persistedAt: 0, secret: nil,
                                                    attributesRead: false))
                default: throw error.storageFailure
                }
            }
        }
        return result
    }

    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            _ = try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                               persistedAt: persistedAt, label: label, secret: secret)
        }
    }

    /// One operation under one deadline: CreateItem, then (best effort, never throwing) the
    /// removal of older sign-ins. The search runs after the new item exists, so a sign-in that
    /// another process stores concurrently is seen by at least one of the two persists and the
    /// older of the two is removed; the newer one is never touched (`isOlder` compares
    /// `persisted_at`, then `session_generation`, read from each other item's attributes).
    /// When the search finds only the new item, that is the whole cleanup: one round trip.
    func replace(authEnvironmentId: String, generation: String, persistedAt: UInt64,
                 label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            let ours = try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                                      persistedAt: persistedAt, label: label, secret: secret)
            // Stored. From here on nothing throws: a failed removal is left to the next persist or
            // clear (restore ranks the leftover below ours), and the call reports success.
            guard let found = try? bus.search(Self.match(authEnvironmentId)) else { return }
            // Locked items cannot be deleted (and gnome-keyring never prompts for a delete).
            for path in found.unlocked where path != ours {
                guard let attributes = try? bus.attributes(path) else { continue }
                let other = StoredSessionItem(
                    itemId: path, generation: attributes[Self.generationAttribute],
                    persistedAt: attributes[Self.persistedAtAttribute].flatMap { UInt64($0) } ?? 0, secret: nil)
                if other.isOlder(than: persistedAt, generation) {
                    _ = try? bus.deleteItem(path)
                }
            }
        }
    }

    /// CreateItem in the default collection. Returns the new item's path.
    ///
    /// The collection is resolved with ReadAlias first, on every persist, although CreateItem
    /// would accept the alias path: a write must not be the first message of an operation. When
    /// the provider is stopped, a queued CreateItem outlives the deadline and stores the item
    /// after the call has reported failure; the read times out instead, and nothing is sent.
    /// No collection behind the alias is `.noDefaultCollection` (never a prompt to create one).
    /// A locked collection is unlocked through `UnlockPrompts` and the call repeated once.
    private func createItem(_ bus: SecretBus, authEnvironmentId: String, generation: String, persistedAt: UInt64,
                            label: String, secret: SecretBytes) throws(StorageFailure) -> String {
        let attributes = Self.match(authEnvironmentId) + [
            (Self.generationAttribute, generation),
            (Self.persistedAtAttribute, String(persistedAt)),
        ]
        var collection = try resolveDefaultCollection(bus)
        var unlocked = false
        var resolvedAgain = false
        while true {
            let created: (item: String, prompt: String)
            do throws(StorageFailure.Classified) {
                created = try bus.createItem(in: collection, label: label, attributes: attributes, secret: secret)
            } catch {
                switch error.kind {
                case .locked where !unlocked:
                    try unlock([collection], bus, what: "the default collection")
                    unlocked = true
                    continue
                case .gone where !resolvedAgain:
                    // The collection went away meanwhile: resolve the alias once more.
                    collection = try resolveDefaultCollection(bus)
                    resolvedAgain = true
                    continue
                default:
                    throw error.storageFailure
                }
            }
            if created.item != "/" { return created.item }
            // A prompt instead of an item: the provider wants the collection unlocked first.
            // That prompt itself is never run (nor dismissed): unlock, then ask once more.
            if !unlocked {
                try unlock([collection], bus, what: "the default collection")
                unlocked = true
                continue
            }
            throw .locked("the provider asked to confirm storing the item with a prompt, which is not shown")
        }
    }

    /// The path of the collection the `default` alias names (ReadAlias).
    private func resolveDefaultCollection(_ bus: SecretBus) throws(StorageFailure) -> String {
        let path: String
        do throws(StorageFailure.Classified) {
            path = try bus.readAlias("default")
        } catch {
            throw error.storageFailure
        }
        if path == "/" { throw .noDefaultCollection }
        return path
    }

    func delete(itemId: String) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "delete", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            do throws(StorageFailure.Classified) {
                _ = try bus.deleteItem(itemId)
            } catch {
                throw error.storageFailure
            }
        }
    }

    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try ServiceConnection.shared.run(operation: "clear", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            var match = Self.match(authEnvironmentId)
            if let generation { match.append((Self.generationAttribute, generation)) }
            var deleted = 0
            for path in try unlockedSearch(bus, match) {
                do throws(StorageFailure.Classified) {
                    if try bus.deleteItem(path) { deleted += 1 }
                } catch {
                    throw error.storageFailure
                }
            }
            return deleted
        }
    }

    // MARK: - Helpers

    /// The search attributes for this schema's items of one auth environment: `xdg:schema` first
    /// (what `SECRET_SCHEMA_NONE` means: other schemas' look-alike items never match).
    private static func match(_ authEnvironmentId: String) -> [(String, String)] {
        [("xdg:schema", schemaName), (authEnvironmentAttribute, authEnvironmentId)]
    }

    /// Searches the items matching `attributes`, in every collection, locked or not. When some
    /// are locked, asks the provider to unlock them (a prompt, under the prompt deadline) and
    /// searches again; throws `.locked` when any match stays locked. Returns the (then unlocked)
    /// paths. libsecret's password lookup returns NULL without an error in that case; this never does.
    private func unlockedSearch(_ bus: SecretBus, _ attributes: [(String, String)]) throws(StorageFailure) -> [String] {
        var unlockAttempted = false
        while true {
            let found = try bus.search(attributes)
            if found.locked.isEmpty { return found.unlocked }
            if unlockAttempted {
                throw .locked("the session item is still locked after the unlock request")
            }
            unlockAttempted = true
            try unlock(found.locked, bus, what: "the session item")
        }
    }

    /// Asks the provider to unlock the objects at `paths` (items or collections) through
    /// `UnlockPrompts`, under the prompt deadline; the call deadline is paused meanwhile, so a
    /// prompt answered in time does not make the rest of the operation time out. Throws
    /// `.locked` when the prompt is dismissed, cannot be shown or is not answered in time.
    private func unlock(_ paths: [String], _ bus: SecretBus, what: String) throws(StorageFailure) {
        if paths.isEmpty { return }
        let milliseconds = timeouts.promptMilliseconds
        let outcome = try bus.call.paused { () throws(StorageFailure) -> UnlockPrompts.Outcome in
            try UnlockPrompts.shared.unlock(paths, connection: bus.connection, busName: bus.name,
                                            milliseconds: milliseconds)
        }
        switch outcome {
        case .unlocked:
            return
        case .dismissed:
            throw .locked("\(what) is locked and the unlock prompt was dismissed or could not be shown")
        case .timedOut:
            throw .locked("\(what) is locked and the unlock prompt was not answered within \(milliseconds) ms "
                          + "(the prompt stays open; a later call waits for its answer)")
        }
    }
}
