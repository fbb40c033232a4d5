import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The Secret Service adapter, spoken over GDBus (`SecretBus`, `BusCall`): the only code behind
/// the storage protocol that reaches the keyring.
///
/// Items are of the schema in `ItemSchema` (docs/storage.md#the-item).
///
/// The adapter keeps one endpoint of its own for the process: a private session-bus connection,
/// the provider's unique name and an encrypted transfer session (`ServiceConnection`,
/// `TransferSession`). When a call fails on the cached endpoint, it is dropped and the call
/// retried once on a new one, so a provider restart between calls is survived; a closed
/// connection (the bus restarted) is replaced at the start of the next call. Prompts (unlock, and
/// KeePassXC's for every create and delete) go through `Prompts`.
///
/// Items and collections are addressed by object path through the Secret Service D-Bus API
/// (`SecretBus`), never through libsecret's `SecretItem`/`SecretCollection` proxies: building one
/// costs four blocking round trips (StartServiceByName, GetNameOwner, GetAll, signal
/// subscriptions) and, in libsecret 0.20, leaks about 1 KiB. The transfer session's key encrypts
/// every secret sent and decrypts every secret received, so a token never
/// crosses the bus in clear. Round trips per operation (gnome-keyring, unlocked, nothing racing):
///
/// | operation | calls |
/// |---|---|
/// | restore | SearchItems, GetSecrets (one call for all matches) |
/// | … on every provider but gnome-keyring (`ServiceEndpoint.confirmsReads`) | + Get(Attributes) per match, sent with GetSecrets (no extra wait) |
/// | … on gnome-keyring, with ≥ 2 matches lacking `g`/`t` in their documents, a version-1 document, an unusable one, or one without `g` | + SearchItems, Get(Attributes) per match (when `ReadPolicy.restore` asks) |
/// | … with a locked match | + Unlock and the prompt (`Prompts`), SearchItems |
/// | … with nothing found | + SearchItems without `xdg:schema`, ReadAlias, Get(Locked), SearchItems again (`locate`) |
/// | … with unusable items of ours ranked above the usable one | + Delete per unusable item (all of it one operation, one deadline) |
/// | persist, nothing older stored | ReadAlias, CreateItem, SearchItems |
/// | persist, replacing k older sign-ins | + Get(Attributes) and Delete per other item |
/// | clear / invalidate | SearchItems, Get(Attributes) and Delete per match |
/// | … on KeePassXC | + Prompt and its Completed signal per CreateItem and Delete |
///
/// Persist removes older sign-ins before it returns, not in the background: the command-line tool
/// and many apps exit right after persisting, other processes (and the tests) look at the keyring
/// at once, and a removal still running after the call could race a later `clearPersistedSession()`
/// or an invalidation. The Delete costs gnome-keyring a second write of the keyring file, which is
/// most of what a persist costs beyond `secret_password_store_sync`, whose replace-in-place the
/// storage rules exclude (docs/storage.md#persist-order): it would overwrite a newer sign-in stored meanwhile
/// by another process.
struct SecretServiceStorage: SessionStorage {
    let timeouts: KeyringTimeouts

    init(timeouts: KeyringTimeouts = .default) {
        self.timeouts = timeouts
    }

    func withTimeouts(_ timeouts: KeyringTimeouts) -> any SessionStorage { SecretServiceStorage(timeouts: timeouts) }

    /// One operation under one deadline (`ServiceConnection.run`): the items read with their
    /// secrets (`readItems`), the attributes when `ReadPolicy.restore` asks for them, and the
    /// deletion of the unusable items it names. A provider slow enough that these calls together
    /// outlast `callMilliseconds` fails the restore at that deadline (`Tests/fault`, condition 15),
    /// and so does decoding the documents read (`inTime`, checked before each).
    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try ServiceConnection.shared.run(operation: "restore", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            return try ReadPolicy.restore(
                authEnvironmentId, items: try readItems(bus, authEnvironmentId),
                inTime: { () throws(StorageFailure) in
                    // Decoding is work of this operation too: past the deadline it stops, and says
                    // that the time went to reading, not to a provider that did not answer.
                    if g_cancellable_is_cancelled(call.cancellable) != 0 {
                        throw .overran(operation: "restore", milliseconds: timeouts.callMilliseconds)
                    }
                },
                attributes: { () throws(StorageFailure) in try listed(bus, authEnvironmentId) },
                delete: { itemId throws(StorageFailure) in _ = try delete(bus, itemId) })
        }
    }

    /// This auth environment's items with their attributes (confirmed ours), locked ones
    /// included: attributes can be read while an item is locked, so no unlock, no prompt.
    private func listed(_ bus: SecretBus, _ authEnvironmentId: String) throws(StorageFailure) -> [StoredSessionItem] {
        let found = try bus.search(ItemSchema.match(authEnvironmentId))
        return try confirmedAttributes(bus, found.unlocked + found.locked, authEnvironmentId)
    }

    /// Every item of ours with its secret; throws when a matching item's secret cannot be read
    /// (locked, and it stays locked), so "unreadable" is never taken for "absent". An item
    /// deleted or locked by another thread or process between the search and GetSecrets is
    /// searched for again (a few times) rather than reported as unreadable.
    private func readItems(_ bus: SecretBus, _ authEnvironmentId: String) throws(StorageFailure) -> [StoredSessionItem] {
        var attempt = 0
        while true {
            attempt += 1
            if let result = try readSecrets(bus, authEnvironmentId, lastAttempt: attempt >= 5) {
                return result
            }
        }
    }

    /// One search (unlocking what is locked), one GetSecrets for every match and, where the
    /// provider needs it (`ServiceEndpoint.confirmsReads`: all but gnome-keyring), each match's
    /// attributes in the same round trip (`withAttributes`). Without them the items come back
    /// with `attributesRead` false, and `ReadPolicy.restore` trusts the documents' copies or
    /// asks for the attributes when it must. Returns nil when an item vanished or was
    /// locked in between and the caller should search again (never on `lastAttempt`).
    private func readSecrets(_ bus: SecretBus, _ authEnvironmentId: String,
                             lastAttempt: Bool) throws(StorageFailure) -> [StoredSessionItem]? {
        let paths = try locate(bus, authEnvironmentId)
        if paths.isEmpty { return [] }
        FaultInjectionSeam.beforeGetSecrets(bus.call.cancellable)
        let secrets: [String: SecretBytes]
        var attributes: [String: Result<[String: String], StorageFailure.Classified>]?
        do throws(StorageFailure.Classified) {
            if bus.endpoint.confirmsReads {
                (secrets, attributes) = try bus.secretsAndAttributes(paths)
            } else {
                secrets = try bus.secrets(paths)
            }
        } catch {
            guard case .gone = error.kind else { throw error.storageFailure }
            // An item found was deleted before GetSecrets (the whole call failed: KWallet,
            // KeePassXC): search again; after the last attempt, nothing there is signed out.
            if !lastAttempt { return nil }
            if try locate(bus, authEnvironmentId).isEmpty { return [] }
            throw Self.replacedDuringEveryRead
        }
        let read = paths.compactMap { path in
            secrets[path].map {
                StoredSessionItem(itemId: path, generation: nil, persistedAt: 0, secret: $0, attributesRead: false)
            }
        }
        // GetSecrets silently skips items it cannot serve: deleted or locked meanwhile (another
        // thread or process); an item whose attributes are gone by the time they are read was
        // deleted just after its secret was read.
        var unread = paths.filter { secrets[$0] == nil }
        var result = read
        if let attributes {
            guard let (confirmed, gone) = try withAttributes(read, attributes, authEnvironmentId, lastAttempt: lastAttempt) else {
                return nil
            }
            result = confirmed
            unread += gone
        }
        // KWallet 5.103 serves an item of a wallet closed after our search with an EMPTY secret
        // (not skipped): read as a document, that is "unusable", and the item would be deleted.
        // An empty secret is only believed when the item needed no unlock to be found again.
        let empty = result.filter { $0.secret?.count == 0 }.map { $0.itemId }
        if unread.isEmpty && empty.isEmpty { return result }
        // Search again, which unlocks what is locked or throws `.locked`. The answer is consistent
        // when every item there now was read: items that are gone were deleted, and nothing new
        // came. An item there now that was not read — one that could not be read, or a sign-in
        // persisted meanwhile by another thread or process, which also removes the older items we
        // found — means reading again: answering with what was read would be "signed out" while
        // a session is stored (seen on KWallet and KeePassXC with persists running at the same
        // time: 13 of 1,078 restores).
        var unlockedAgain = false
        let present = Set(try withUnsafeMutablePointer(to: &unlockedAgain) { flag throws(StorageFailure) in
            try locate(bus, authEnvironmentId, unlocked: flag)
        })
        if unlockedAgain { unread += empty }
        let answered = Set(read.map { $0.itemId }).subtracting(unread)
        let usable = result.filter { answered.contains($0.itemId) }
        if present.isSubset(of: answered) { return usable }
        if !lastAttempt { return nil }
        // Still unreadable after every attempt: never reported as absent.
        if unread.contains(where: present.contains) {
            throw .locked("the provider returned no secret for a stored session item")
        }
        // New sign-ins kept arriving during every attempt: what was read was stored a moment
        // ago; when nothing was, ask again rather than answer "signed out".
        if !usable.isEmpty { return usable }
        throw Self.replacedDuringEveryRead
    }

    private static let replacedDuringEveryRead = StorageFailure.failed("the stored session was replaced during every read; try again")

    /// `items` (just read with their secrets) with their attributes (read right after the
    /// secrets, in the same round trip: `SecretBus.secretsAndAttributes`): an
    /// item is returned only when its attributes confirm `xdg:schema` and `auth_environment_id`,
    /// so what is restored, ranked and deleted is judged by the attributes every other operation
    /// (invalidation, persist's cleanup, the watch) goes by, and a document that does not match
    /// its item's `session_generation` is seen as such (`ReadPolicy`).
    /// KeePassXC 2.7.4 was seen serving, after an outside lock and unlock under load, an item with
    /// the newest sign-in's attributes and an older sign-in's secret (docs/providers.md).
    /// Items deleted meanwhile are left out and returned as `gone`. Returns nil when an item was
    /// locked meanwhile and the caller should search again (which unlocks it); on `lastAttempt`
    /// that is `.locked`.
    private func withAttributes(_ items: [StoredSessionItem],
                                _ read: [String: Result<[String: String], StorageFailure.Classified>],
                                _ authEnvironmentId: String,
                                lastAttempt: Bool) throws(StorageFailure) -> (confirmed: [StoredSessionItem], gone: [String])? {
        var result: [StoredSessionItem] = []
        var gone: [String] = []
        for item in items {
            do throws(StorageFailure.Classified) {
                guard let answer = read[item.itemId] else { continue }
                let attributes = try answer.get()
                guard ItemSchema.isOurs(attributes, authEnvironmentId) else { continue }
                result.append(ItemSchema.storedItem(item.itemId, attributes, secret: item.secret))
            } catch {
                switch error.kind {
                case .gone: gone.append(item.itemId)
                case .locked where !lastAttempt: return nil
                case .locked: throw .locked("a stored session item was locked again while it was read")
                default: throw error.storageFailure
                }
            }
        }
        return (result, gone)
    }

    /// The attributes of the items at `paths` whose `xdg:schema` and `auth_environment_id` (and
    /// `session_generation`, when given) are ours: a provider whose search over-matches must not
    /// make us read or delete another environment's or another application's item. Items deleted
    /// meanwhile are left out, and so are items whose attributes cannot be read while locked
    /// (they cannot be confirmed).
    func confirmedAttributes(_ bus: SecretBus, _ paths: [String], _ authEnvironmentId: String,
                                     generation: String? = nil) throws(StorageFailure) -> [StoredSessionItem] {
        var result: [StoredSessionItem] = []
        for path in paths {
            do throws(StorageFailure.Classified) {
                let attributes = try bus.attributes(path)
                guard ItemSchema.isOurs(attributes, authEnvironmentId),
                      generation == nil || attributes[ItemSchema.generationAttribute] == generation else { continue }
                result.append(ItemSchema.storedItem(path, attributes, secret: nil))
            } catch {
                switch error.kind {
                case .gone, .locked: continue
                default: throw error.storageFailure
                }
            }
        }
        return result
    }

    /// What `portal-session status` shows about the keyring, as (name, value) pairs: the provider
    /// process, the transfer algorithm that protects secrets on the bus, the default collection and
    /// whether it is locked. No unlock, no secret read.
    func describe() throws(StorageFailure) -> [(String, String)] {
        try ServiceConnection.shared.run(operation: "status", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            do throws(StorageFailure.Classified) {
                let provider = try bus.provider()
                var result = [("provider", "\(provider.name) (pid \(provider.pid))"), ("transfer", bus.transferAlgorithm)]
                let collection = try bus.readAlias("default")
                result.append(("defaultCollection", collection))
                if collection != "/" {
                    result.append(("defaultCollectionLocked", try bus.isLocked(collection: collection) ? "yes" : "no"))
                }
                return result
            } catch {
                throw error.storageFailure
            }
        }
    }

    // MARK: - Helpers

    /// The unlocked paths of this auth environment's items (restricted to one generation when
    /// given), in every collection — never "none" while a collection that could hold one is
    /// locked (docs/storage.md#locked-is-not-absent: locked ≠ absent). Locked matches, and the locked places where a match
    /// could hide, are unlocked through the prompt (under the prompt deadline) and searched again;
    /// throws `.locked` when that fails. libsecret's password lookup returns NULL without an
    /// error in that case; this never does.
    ///
    /// Where a match can hide while locked:
    /// - gnome-keyring, keyring loaded locked from disk: a search that includes `xdg:schema`
    ///   matches nothing (the schema is stored encrypted), while the same search without it lists
    ///   the item as locked. So when nothing matches, the search is repeated without the schema;
    ///   its locked results are unlocked (the schema is confirmed afterwards).
    /// - KeePassXC, database locked: SearchItems skips locked databases and answers nothing. So
    ///   when nothing matches at all, the default collection's `Locked` property is read.
    ///
    /// "Nothing stored" is only answered from a search made after the collection was seen
    /// unlocked. The searches above ran before `Locked` was read: a database unlocked in between
    /// (KeePassXC: by the person or `openDatabase`, between our SearchItems and Get(Locked)) made
    /// them answer nothing while `Locked` then says false. So the search is repeated once; it
    /// costs one round trip on the "nothing found" path only.
    ///
    /// `unlocked` is set when an unlock was needed (and succeeded) to find the items.
    func locate(_ bus: SecretBus, _ authEnvironmentId: String, generation: String? = nil,
                        unlocked: UnsafeMutablePointer<Bool>? = nil) throws(StorageFailure) -> [String] {
        var match = ItemSchema.match(authEnvironmentId)
        if let generation { match.append((ItemSchema.generationAttribute, generation)) }
        var unlockAttempted = false
        var searchedAfterLockState = false
        while true {
            let found = try bus.search(match)
            if !found.locked.isEmpty {
                if unlockAttempted { throw .locked("the session item is still locked after the unlock request") }
                unlockAttempted = true
                try unlock(found.locked, bus, what: "the session item")
                unlocked?.pointee = true
                continue
            }
            if !found.unlocked.isEmpty || unlockAttempted || searchedAfterLockState { return found.unlocked }
            let hiding = try lockedHidingPlaces(bus, Array(match.dropFirst()))
            if hiding.isEmpty {
                searchedAfterLockState = true
                continue
            }
            unlockAttempted = true
            try unlock(hiding, bus, what: "the keyring that may hold the session")
            unlocked?.pointee = true
        }
    }

    /// When a search finds nothing: the locked items that match `attributes` without the schema,
    /// or else the default collection when it is locked. Empty when nothing locked could hide a
    /// session item.
    private func lockedHidingPlaces(_ bus: SecretBus, _ attributes: [(String, String)]) throws(StorageFailure) -> [String] {
        let candidates = try bus.search(attributes).locked
        if !candidates.isEmpty { return candidates }
        let collection: String
        do throws(StorageFailure.Classified) {
            collection = try bus.readAlias("default")
            if collection == "/" { return [] }
            FaultInjectionSeam.beforeLockedCheck(bus.call.cancellable)
            return try bus.isLocked(collection: collection) ? [collection] : []
        } catch {
            // The alias names a collection that is gone: nothing can hide there.
            if case .gone = error.kind { return [] }
            throw error.storageFailure
        }
    }

    /// Asks the provider to unlock the objects at `paths` (items or collections) through
    /// `Prompts`, under the prompt deadline; the call deadline is paused meanwhile, so a
    /// prompt answered in time does not make the rest of the operation time out. Throws
    /// `.locked` when the prompt is dismissed, cannot be shown or is not answered in time.
    func unlock(_ paths: [String], _ bus: SecretBus, what: String) throws(StorageFailure) {
        if paths.isEmpty { return }
        let milliseconds = timeouts.promptMilliseconds
        let outcome = try bus.call.paused { () throws(StorageFailure) -> Prompts.Outcome in
            try Prompts.shared.unlock(paths, connection: bus.connection, busName: bus.name,
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
