import CGLib

extension SecretServiceStorage {
    /// Looks at this auth environment's items as a restore would find them, but never unlocks and
    /// never prompts: SearchItems with `xdg:schema` and `auth_environment_id`, every match's
    /// attributes confirmed exactly (a provider whose search over-matches — KeePassXC — must not
    /// make another environment's or application's item count), then GetSecrets of the confirmed
    /// unlocked items to name the end user of the newest sign-in (the end user id is only in the
    /// secret document), chosen by `ReadPolicy.newest`. The token read with it is wiped when the
    /// document is released.
    ///
    /// Locked (`.locked`): a confirmed item of ours is locked, a match whose attributes cannot be
    /// read while locked, a locked item that matches without the schema (gnome-keyring loaded
    /// locked from disk hides the schema), or a locked default collection (a locked KeePassXC
    /// database answers searches with nothing).
    /// - Throws: `StorageFailure` when the keyring cannot be read now (the caller keeps its last
    ///   observation and reads again on the next signal).
    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        try ServiceConnection.shared.run(operation: "watch", timeouts: timeouts) { endpoint, call throws(StorageFailure) in
            let bus = SecretBus(endpoint, call)
            let match = ItemSchema.match(authEnvironmentId)
            let found = try bus.search(match)
            if !found.locked.isEmpty {
                let (mine, unconfirmed, _) = try Self.confirm(bus, found.locked, authEnvironmentId)
                if !mine.isEmpty || unconfirmed { return .locked }
            }
            let (mine, _, vanished) = try Self.confirm(bus, found.unlocked, authEnvironmentId)
            // The search predates a change in progress (another process's persist deleted the
            // item it found after storing a newer one): not "signed out". The change's own
            // signal makes the caller read again.
            if mine.isEmpty && vanished { throw .failed("a stored session item changed while the watch read it") }
            if mine.isEmpty {
                if try !bus.search([(ItemSchema.authEnvironmentAttribute, authEnvironmentId)]).locked.isEmpty { return .locked }
                do throws(StorageFailure.Classified) {
                    let collection = try bus.readAlias("default")
                    if collection != "/", try bus.isLocked(collection: collection) { return .locked }
                } catch {
                    if case .gone = error.kind { return .signedOut }
                    throw error.storageFailure
                }
                return .signedOut
            }
            FaultInjectionSeam.beforeGetSecrets(call.cancellable)
            let secrets: [String: SecretBytes]
            do throws(StorageFailure.Classified) {
                secrets = try bus.secrets(mine.map { $0.itemId })
            } catch {
                throw error.storageFailure
            }
            // Which is the newest usable sign-in: the read policy restore decides by (`ReadPolicy`):
            // unusable, newer-version, damaged and foreign documents are no sign-in to announce.
            // An EMPTY secret counts as unread, not as an unusable document: KWallet 5.103 serves
            // the items of a wallet closed after the search with empty secrets, and restore
            // believes one only once a search that needed no unlock finds the item again
            // (`readSecrets`), which a watch that never unlocks cannot do. Judged, it was a
            // "signed-out" event while the session was stored (docs/security.md, "The watch and a secret served empty").
            let plan = ReadPolicy.newest(authEnvironmentId, items: mine.map { item in
                StoredSessionItem(itemId: item.itemId, generation: item.generation, persistedAt: item.persistedAt,
                                  secret: secrets[item.itemId].flatMap { $0.count == 0 ? nil : $0 })
            })
            if let chosen = plan.chosen {
                return .signedIn(generation: chosen.generation ?? "", endUserId: chosen.document.endUserId)
            }
            // Nothing usable (read as signed out, as restore does), unless an item could not be
            // read (deleted or locked since the search): then the next signal decides.
            if plan.unread { throw .failed("a stored session item changed while the watch read it") }
            return .signedOut
        }
    }

    /// Which of `paths` are this auth environment's items of our schema (attributes compared
    /// exactly), whether any could not be confirmed because it is locked, and whether any was gone
    /// (left out).
    private static func confirm(_ bus: SecretBus, _ paths: [String], _ authEnvironmentId: String)
        throws(StorageFailure) -> (mine: [StoredSessionItem], unconfirmed: Bool, vanished: Bool) {
        var mine: [StoredSessionItem] = []
        var unconfirmed = false
        var vanished = false
        for path in paths {
            do throws(StorageFailure.Classified) {
                let attributes = try bus.attributes(path)
                guard ItemSchema.isOurs(attributes, authEnvironmentId) else { continue }
                mine.append(ItemSchema.storedItem(path, attributes, secret: nil))
            } catch {
                switch error.kind {
                case .gone: vanished = true
                case .locked: unconfirmed = true
                default: throw error.storageFailure
                }
            }
        }
        return (mine, unconfirmed, vanished)
    }
}
