/// The read policy, once for every reader of the stored items (docs/security.md, "One read
/// policy"): which items are ours, which sign-in is the newest (`PersistOrder`'s order), and which
/// items are unusable (`SessionDocument`). Restore (`SessionStorage.restore`, in each storage's one
/// operation), the watch (`SessionStorage.observe`) and the in-memory test store all decide through
/// it; a storage only says how to list, read and delete.
enum ReadPolicy {
    /// The sign-in a restore hands out: its item, its `session_generation` (the attribute when
    /// read, else the document's copy) and its decoded document.
    struct Restored {
        let itemId: String
        let generation: String?
        let document: SessionDocument.Decoded
        /// Every item of ours the read that chose it listed (it included): what a caller that
        /// takes this sign-in elsewhere may delete, and nothing stored after the read
        /// (`HostKeyringMigration`). Filled by `restore`; empty from `newest`.
        var itemsRead: [String] = []
    }

    /// What the items say, newest first: the newest usable sign-in (nil when none), the unusable
    /// items of ours ranked above it (a restore deletes them, in this order), and whether an item
    /// ranked above it came without its secret (deleted or locked since it was listed: the caller
    /// cannot tell what it held).
    struct Plan {
        var chosen: Restored?
        var unusable: [String] = []
        var unread = false
    }

    /// Restore's decision, with the storage's calls made inside the caller's one operation:
    /// `items` were read with their secrets; `attributes` lists the items of ours with their
    /// attributes, and is called at most once, only when an item came without attributes and its
    /// document cannot stand in for them (`needsAttributes`); `delete` removes one unusable item,
    /// and a failed delete fails the restore (never "signed out" with the item left behind).
    /// A document written by a newer version is neither restored nor deleted (docs/storage.md#read-policy).
    /// `inTime` throws when the operation's deadline has passed: it is asked before each
    /// document is decoded, so the work of decoding counts against the deadline as the provider's
    /// calls do (docs/security.md, "A planted oversized item"; each document is capped, so one decode is short).
    static func restore(_ authEnvironmentId: String, items: [StoredSessionItem],
                        inTime: () throws(StorageFailure) -> Void,
                        attributes: () throws(StorageFailure) -> [StoredSessionItem],
                        delete: (String) throws(StorageFailure) -> Void) throws(StorageFailure) -> Restored? {
        if items.isEmpty { return nil }
        var candidates = try ours(authEnvironmentId, items, inTime: inTime)
        // Which sign-in each item holds, and how new it is, come from its attributes or — when the
        // storage did not read them — from the copies in its document. Attributes are read only
        // when they matter: to confirm that an item is ours before it is deleted as unusable or
        // restored from a version-1 document (which names no auth environment), to rank two or
        // more items, or to name the one usable sign-in (for `PortalSession.invalidate()`) of a
        // document without `g`.
        let count = candidates.count
        let needsAttributes = { (candidate: Candidate) -> Bool in
            if candidate.item.attributesRead { return false }
            guard let document = candidate.document else { return true }
            return document.version < 2 || (count > 1 && !candidate.ranked) || candidate.generation == nil
        }
        if candidates.contains(where: needsAttributes) {
            // The storage lists only items whose attributes confirm the schema and auth environment.
            let listed = try attributes()
            let byId = Dictionary(listed.map { ($0.itemId, $0) }, uniquingKeysWith: { first, _ in first })
            // An item missing from this listing was deleted meanwhile, or is not ours: it is
            // neither restored nor deleted.
            candidates = candidates.compactMap { needsAttributes($0) ? byId[$0.item.itemId].map($0.with) : $0 }
        }
        let plan = plan(candidates)
        // Unusable and confirmed ours: no caller action could make them readable, so they are
        // removed (docs/storage.md#read-policy).
        for itemId in plan.unusable { try delete(itemId) }
        guard var chosen = plan.chosen else { return nil }
        chosen.itemsRead = candidates.map { $0.item.itemId }
        return chosen
    }

    /// The watch's decision over items whose attributes were read (confirmed ours) and whose
    /// secrets were read where the provider served them (`secret` nil: not served).
    static func newest(_ authEnvironmentId: String, items: [StoredSessionItem]) -> Plan {
        plan(ours(authEnvironmentId, items, inTime: { () throws(Never) in }))
    }

    /// Trust nothing the provider returns: a document that names another auth environment was
    /// over-matched by the provider's search, and is neither restored, announced nor deleted.
    /// Each document is decoded once, here, after `inTime` said the deadline has not passed.
    private static func ours<E: Error>(_ authEnvironmentId: String, _ items: [StoredSessionItem],
                                       inTime: () throws(E) -> Void) throws(E) -> [Candidate] {
        var candidates: [Candidate] = []
        for item in items {
            try inTime()
            let candidate = Candidate(item: item)
            if !candidate.namesOtherEnvironment(authEnvironmentId) { candidates.append(candidate) }
        }
        return candidates
    }

    /// The newest usable sign-in, by `PersistOrder`; the unusable items above it.
    private static func plan(_ candidates: [Candidate]) -> Plan {
        var plan = Plan()
        for candidate in candidates.sorted(by: { PersistOrder.precedes($1.rank, $0.rank) }) {
            if candidate.item.secret == nil {
                plan.unread = true
                continue
            }
            if let document = candidate.usableDocument {
                plan.chosen = Restored(itemId: candidate.item.itemId, generation: candidate.generation, document: document)
                return plan
            }
            // A newer version's document: not ours to judge, so it is kept and the end user reads
            // as signed out here (a newer copy of the library can still restore it; docs/storage.md#read-policy).
            if candidate.newerVersion { continue }
            plan.unusable.append(candidate.item.itemId)
        }
        return plan
    }

    /// A stored item being judged: its decoded document (nil when unusable) and what names and
    /// ranks its sign-in.
    private struct Candidate {
        let item: StoredSessionItem
        let document: SessionDocument.Decoded?
        /// Attributes read separately (the `attributes` listing), when the item came without.
        var attributes: StoredSessionItem?

        /// Unusable to this library because a newer version wrote it (never deleted).
        let newerVersion: Bool

        /// The secret judged once (`SessionDocument.read`): an unusable document is not parsed
        /// again to ask whether a newer version wrote it.
        init(item: StoredSessionItem) {
            self.item = item
            let reading = item.secret.map { secret in secret.withUnsafeBytes { SessionDocument.read($0) } }
            switch reading {
            case .usable(let decoded): (document, newerVersion) = (decoded, false)
            case .newerVersion: (document, newerVersion) = (nil, true)
            case .unusable, nil: (document, newerVersion) = (nil, false)
            }
        }

        /// The document, unless it names another sign-in than its item's `session_generation`
        /// attribute (when both are known). Such an item is damaged: the provider serves one
        /// sign-in's secret under another's attributes (seen on KeePassXC 2.7.4 after an outside
        /// lock and unlock: the newest item's attributes with an older sign-in's document). Its
        /// document may be another end user's, so it is never restored nor announced; it is
        /// unusable, and removed like any unusable item of ours.
        var usableDocument: SessionDocument.Decoded? {
            guard let document else { return nil }
            if let read, let stored = document.generation, read.generation != stored { return nil }
            return document
        }

        /// Whether the document names an auth environment other than `id` (version 2 only).
        func namesOtherEnvironment(_ id: String) -> Bool {
            guard let named = document?.authEnvironmentId else { return false }
            return named != id
        }

        func with(_ attributes: StoredSessionItem) -> Candidate {
            var copy = self
            copy.attributes = attributes
            return copy
        }

        /// The attributes, when read: authoritative, since invalidation deletes by them.
        private var read: StoredSessionItem? { item.attributesRead ? item : attributes }

        /// `session_generation`: the attribute when read (nil when the item lacks it), else the
        /// document's copy. (Not `read.map { $0.generation }`: that key path is built at run time,
        /// and the runtime's key-path code would become resident on every restore.)
        var generation: String? {
            if let read { return read.generation }
            return document?.generation
        }
        /// Whether `rank` is known (attributes read, or both copies in the document).
        var ranked: Bool { read != nil || (document?.persistedAt != nil && document?.generation != nil) }
        /// (`persisted_at`, `session_generation`): the newest sign-in wins. Unknown ranks lowest.
        var rank: (UInt64, String?) {
            if let read { return (read.persistedAt, read.generation) }
            return (document?.persistedAt ?? 0, document?.generation)
        }
    }
}
