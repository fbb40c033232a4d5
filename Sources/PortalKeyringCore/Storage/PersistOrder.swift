/// The one order of sign-ins, for persist, restore and the watch (docs/storage.md#persist-order; docs/security.md,
/// "Ordering sign-ins"): by (`persisted_at`, `session_generation`), where `persisted_at` is a
/// logical clock — a persist stores a value above every item it saw, so a sign-in ranks above
/// every sign-in stored before it, whatever the wall clock says (a clock that was ahead, a VM
/// snapshot, NTP stepping back, another app's planted item far in the future). The wall clock
/// only seeds it. Ties between persists that did not see each other go to the larger
/// `persisted_at`, then `session_generation` (random): both sides agree which one stays.
enum PersistOrder {
    /// Whether sign-in `a` ranks below sign-in `b`: (`persisted_at`, `session_generation`)
    /// compared in that order, an unknown generation lowest.
    static func precedes(_ a: (UInt64, String?), _ b: (UInt64, String?)) -> Bool {
        (a.0, a.1 ?? "") < (b.0, b.1 ?? "")
    }

    /// Persist, the one algorithm, with the storage's calls made inside the caller's one
    /// operation: `seen` lists the items of ours that exist now (with their attributes);
    /// `create` stores the new item with the `persisted_at` given and returns its id; `found`
    /// lists the items there after the create, excluding `ours` (nil when that listing failed:
    /// the removal is then left to the next persist or clear); `delete` removes one item (a
    /// failure is left the same way). See `SessionStorage.replace`.
    static func replace(now: UInt64, generation: String,
                        seen listSeen: () throws(StorageFailure) -> [StoredSessionItem],
                        create: (UInt64) throws(StorageFailure) -> String,
                        found listFound: (_ ours: String, _ seen: [StoredSessionItem]) -> [StoredSessionItem]?,
                        delete: (String) -> Void) throws(StorageFailure) -> UInt64 {
        let seen = try listSeen()
        let persistedAt = timestamp(now: now, after: seen)
        let ours = try create(persistedAt)
        // Stored. A failed listing or removal from here is left to the next persist or clear
        // (restore ranks the leftover below ours); only a newer concurrent sign-in throws.
        guard let found = listFound(ours, seen), !found.isEmpty else { return persistedAt }
        let plan = cleanup(persistedAt: persistedAt, generation: generation, ours: ours,
                           seen: Set(seen.map { $0.itemId }), found: found)
        for itemId in plan.remove { delete(itemId) }
        if plan.superseded { throw superseded }
        return persistedAt
    }

    /// The `persisted_at` of a new sign-in: `now`, or one above the newest item `seen`.
    static func timestamp(now: UInt64, after seen: [StoredSessionItem]) -> UInt64 {
        let newest = seen.filter { $0.attributesRead }.map { $0.persistedAt }.max() ?? 0
        return max(now, newest == UInt64.max ? newest : newest + 1)
    }

    /// What a persist removes once its item is stored: every other item it `seen` before storing
    /// (they precede it, whatever their timestamps), and of the items stored meanwhile (`found`
    /// but not `seen`) those ranked below it; `superseded` when one of those ranks above it —
    /// then its own item (`ours`, when found) is removed as well.
    static func cleanup(persistedAt: UInt64, generation: String, ours: String?, seen: Set<String>,
                        found: [StoredSessionItem]) -> (remove: [String], superseded: Bool) {
        var remove: [String] = []
        var superseded = false
        for item in found where item.itemId != ours && item.generation != generation {
            if seen.contains(item.itemId) || item.isOlder(than: persistedAt, generation) {
                remove.append(item.itemId)
            } else if item.isNewer(than: persistedAt, generation) {
                superseded = true
            }
        }
        if superseded, let ours { remove.append(ours) }
        return (remove, superseded)
    }

    /// The file whose lock persists of `authEnvironmentId` take turns on (`PrivateDirectory`).
    static func lockName(_ authEnvironmentId: String) -> String {
        PrivateDirectory.hashedName("persist", authEnvironmentId) + ".lock"
    }

    /// A persist that another one, stored at the same time, replaced.
    static let superseded = StorageFailure.superseded
}
