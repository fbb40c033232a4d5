import CLibSecret

/// Writing to the Secret Service: persist (CreateItem, then the removal of older sign-ins), clear,
/// and the deletion of one item, with the provider's prompts (KeePassXC asks for every create and
/// delete). The reading half, and what both share (the search that unlocks, the attribute
/// checks), is in LibSecretStorage.swift.
extension LibSecretStorage {
    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            _ = try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                               persistedAt: persistedAt, label: label, secret: secret)
        }
    }

    /// One operation under one deadline: CreateItem, then (best effort, never throwing) the
    /// removal of older sign-ins. The search runs after the new item exists, so a sign-in that
    /// another process stores concurrently is seen by at least one of the two persists and the
    /// older of the two is removed; the newer one is never touched (`isOlder` compares
    /// `persisted_at`, then `session_generation`, read from each other item's attributes, which
    /// also confirm that the item is ours). When the search finds only the new item, that is the
    /// whole cleanup: one round trip.
    func replace(authEnvironmentId: String, generation: String, persistedAt: UInt64,
                 label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            let ours = try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                                      persistedAt: persistedAt, label: label, secret: secret)
            // Stored. From here on nothing throws: a failed removal is left to the next persist or
            // clear (restore ranks the leftover below ours), and the call reports success.
            guard let found = try? bus.search(Self.match(authEnvironmentId)) else { return }
            // Locked items are left alone: this persist is not worth an unlock prompt.
            let others = found.unlocked.filter { $0 != ours }
            if others.isEmpty { return }
            guard let confirmed = try? confirmedAttributes(bus, others, authEnvironmentId) else { return }
            for other in confirmed where other.isOlder(than: persistedAt, generation) {
                _ = try? delete(bus, other.itemId)
            }
            // A newer sign-in stored meanwhile (another thread or process persisting at the same
            // time) replaces this one, as if it had come right after: ours is removed, so one
            // item is left and no older sign-in can come back once the newer one is invalidated.
            if confirmed.contains(where: { $0.isNewer(than: persistedAt, generation) }) {
                _ = try? delete(bus, ours)
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
    ///
    /// A locked collection (an `IsLocked` error — KWallet —, or a prompt while the collection's
    /// `Locked` property is true — gnome-keyring) is unlocked through `Prompts` and the call
    /// repeated once. A prompt for an unlocked collection (KeePassXC asks for every item) is run;
    /// dismissed, it is `.refused`.
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
            FaultInjectionSeam.beforeCreateItem(bus.call.cancellable)
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
            if created.prompt == "/" { throw .failed("the provider stored no item and returned no prompt") }
            if !unlocked, (try? bus.isLocked(collection: collection)) == true {
                // gnome-keyring: the prompt would unlock the collection; unlock it the way every
                // other unlock goes (one prompt at a time, never dismissed), then ask once more.
                try unlock([collection], bus, what: "the default collection")
                unlocked = true
                continue
            }
            let resultPath = try runPrompt(created.prompt, bus, refused: "the keyring refused to store the item")
            if let resultPath, resultPath != "/" { return resultPath }
            // The prompt named no item: find ours by its generation (unique).
            let found = try bus.search(Self.match(authEnvironmentId) + [(Self.generationAttribute, generation)])
            guard let path = found.unlocked.first ?? found.locked.first else {
                throw .failed("the provider's prompt completed but the stored item cannot be found")
            }
            return path
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
        try ServiceConnection.shared.run(operation: "delete", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            _ = try delete(bus, itemId)
        }
    }

    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try ServiceConnection.shared.run(operation: "clear", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            let paths = try locate(bus, authEnvironmentId, generation: generation)
            var deleted = 0
            for item in try confirmedAttributes(bus, paths, authEnvironmentId, generation: generation) {
                if try delete(bus, item.itemId) { deleted += 1 }
            }
            return deleted
        }
    }

    /// Item.Delete, running the provider's prompt when it returns one. True when deleted, false
    /// when the item was already gone. A dismissed prompt is `.refused`.
    private func delete(_ bus: SecretBus, _ path: String) throws(StorageFailure) -> Bool {
        let prompt: String?
        do throws(StorageFailure.Classified) {
            prompt = try bus.deleteItem(path)
        } catch {
            throw error.storageFailure
        }
        guard let prompt else { return false }
        if prompt != "/" { _ = try runPrompt(prompt, bus, refused: "the keyring refused to delete the item", item: path) }
        return true
    }

    /// Runs a prompt the provider returned for CreateItem or Item.Delete, under the prompt
    /// deadline (the call deadline paused meanwhile). Returns the object path its result names.
    /// For a delete prompt, `item` is the item: the prompt is not run when another thread's
    /// prompt deleted it meanwhile (`Prompts.run`).
    private func runPrompt(_ path: String, _ bus: SecretBus, refused: String,
                           item: String? = nil) throws(StorageFailure) -> String? {
        let milliseconds = timeouts.promptMilliseconds
        let (outcome, resultPath) = try bus.call.paused { () throws(StorageFailure) -> (Prompts.Outcome, String?) in
            try Prompts.shared.run(path, connection: bus.connection, busName: bus.name, milliseconds: milliseconds,
                                   unlessGone: item)
        }
        switch outcome {
        case .unlocked: return resultPath
        case .dismissed: throw .refused("\(refused): its confirmation prompt was dismissed or could not be shown")
        case .timedOut:
            throw .refused("\(refused): its confirmation prompt was not answered within \(milliseconds) ms")
        }
    }
}
