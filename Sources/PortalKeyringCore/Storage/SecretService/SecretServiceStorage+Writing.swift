import CGLib

/// Writing to the Secret Service: persist (CreateItem, then the removal of older sign-ins), clear,
/// and the deletion of one item, with the provider's prompts (KeePassXC asks for every create and
/// delete). The reading half, and what both share (the search that unlocks, the attribute
/// checks), is in SecretServiceStorage.swift.
extension SecretServiceStorage {
    /// One operation under one deadline (`SessionStorage.replace`, decided by
    /// `PersistOrder.replace`): the items of ours that exist now (SearchItems, their attributes),
    /// CreateItem with a `persisted_at` above every one of them, then the removal of what
    /// `PersistOrder.cleanup` names. Locked items are left alone (this persist is not worth an
    /// unlock prompt). When the search before finds nothing and the one after only the new item,
    /// that is two round trips besides the create.
    ///
    /// Persists of one auth environment take turns across this user's threads and processes
    /// (`PersistTurn`, waited for at most the call deadline before this operation's starts).
    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try PersistTurn.shared.run(authEnvironmentId, waitingAtMost: timeouts.callMilliseconds) { () throws(StorageFailure) in
            try replaceInTurn(authEnvironmentId: authEnvironmentId, generation: generation, now: now, label: label,
                              document: document)
        }
    }

    private func replaceInTurn(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                               document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            return try PersistOrder.replace(
                now: now, generation: generation,
                seen: { () throws(StorageFailure) in
                    let before = try bus.search(ItemSchema.match(authEnvironmentId)).unlocked
                    return before.isEmpty ? [] : try confirmedAttributes(bus, before, authEnvironmentId)
                },
                create: { persistedAt throws(StorageFailure) in
                    try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                                   persistedAt: persistedAt, label: label, secret: document(persistedAt))
                },
                found: { ours, seen in
                    guard let found = try? bus.search(ItemSchema.match(authEnvironmentId)) else { return nil }
                    let others = found.unlocked.filter { $0 != ours }
                    // The items seen before are confirmed already; only those stored meanwhile are read.
                    let seenIds = Set(seen.map { $0.itemId })
                    let fresh = others.filter { !seenIds.contains($0) }
                    guard let confirmedFresh = try? confirmedAttributes(bus, fresh, authEnvironmentId) else { return nil }
                    return seen.filter { others.contains($0.itemId) } + confirmedFresh
                },
                delete: { itemId in _ = try? delete(bus, itemId) })
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
        let attributes = ItemSchema.match(authEnvironmentId) + [
            (ItemSchema.generationAttribute, generation),
            (ItemSchema.persistedAtAttribute, String(persistedAt)),
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
            // A completed prompt is the provider's word, not the item: the item it names must be
            // ours, and one it does not name is found by its generation (unique). A prompt that
            // completes without storing (not dismissed, nothing done) is a refusal.
            if let resultPath, resultPath != "/" {
                if try storedItem(bus, resultPath, generation) { return resultPath }
                throw .refused("the keyring refused to store the item: its confirmation prompt completed, "
                               + "but the item it named is not the one stored")
            }
            let found = try bus.search(ItemSchema.match(authEnvironmentId) + [(ItemSchema.generationAttribute, generation)])
            guard let path = found.unlocked.first ?? found.locked.first else {
                throw .refused("the keyring refused to store the item: its confirmation prompt completed, but no item was stored")
            }
            return path
        }
    }

    /// Whether the item at `path` exists and holds the sign-in `generation` (its attributes).
    private func storedItem(_ bus: SecretBus, _ path: String, _ generation: String) throws(StorageFailure) -> Bool {
        do throws(StorageFailure.Classified) {
            return try bus.attributes(path)[ItemSchema.generationAttribute] == generation
        } catch {
            if case .gone = error.kind { return false }
            throw error.storageFailure
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

    /// Item.Delete, running the provider's prompt when it returns one, within the caller's
    /// operation (restore's unusable items, persist's cleanup, clear). True when deleted, false
    /// when the item was already gone. A dismissed prompt is `.refused`, and so is a prompt that
    /// completed but left the item there: after a prompt the item's absence is checked, never
    /// taken from the prompt's word (a prompt dismissed by another client can answer "done").
    func delete(_ bus: SecretBus, _ path: String) throws(StorageFailure) -> Bool {
        let prompt: String?
        FaultInjectionSeam.beforeDelete(bus.call.cancellable)
        do throws(StorageFailure.Classified) {
            prompt = try bus.deleteItem(path)
        } catch {
            throw error.storageFailure
        }
        guard let prompt else { return false }
        guard prompt != "/" else { return true }
        _ = try runPrompt(prompt, bus, refused: "the keyring refused to delete the item", item: path)
        let gone: Bool
        do throws(StorageFailure.Classified) {
            gone = try bus.isGone(item: path)
        } catch {
            throw error.storageFailure
        }
        if !gone {
            throw .refused("the keyring refused to delete the item: its confirmation prompt completed, but the item is still there")
        }
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
