/// One stored session item as the core sees it: its secret plus the non-secret attributes that
/// order and name sign-ins (SPEC §2).
struct StoredSessionItem: Sendable {
    /// Storage-specific identity of the item (a D-Bus object path for the Secret Service).
    let itemId: String
    /// The `session_generation` attribute (128-bit hex), nil when the item lacks it (or when
    /// `attributesRead` is false).
    let generation: String?
    /// The `persisted_at` attribute: microseconds since the Unix epoch, 0 when absent (or when
    /// `attributesRead` is false).
    let persistedAt: UInt64
    /// The stored secret, byte-exact; nil when it was not requested.
    let secret: SecretBytes?
    /// Whether `generation` and `persistedAt` were read from the item. A storage may skip that
    /// when secrets are requested (each attribute read can cost a round trip, and the session
    /// document carries copies of both); `items(authEnvironmentId:withSecrets: false)` reads them.
    var attributesRead = true

    /// Whether this item holds an older sign-in than (`persistedAt`, `generation`): the order
    /// restore ranks sign-ins by, and the only items a persist may remove. False when the
    /// attributes were not read (an item of unknown age is never removed as "older").
    func isOlder(than persistedAt: UInt64, _ generation: String) -> Bool {
        attributesRead && self.generation != generation
            && (self.persistedAt, self.generation ?? "") < (persistedAt, generation)
    }

    /// Whether this item holds a newer sign-in than (`persistedAt`, `generation`): a persist
    /// that finds one removes its own item (two persists at the same time leave the newer).
    /// False when the attributes were not read.
    func isNewer(than persistedAt: UInt64, _ generation: String) -> Bool {
        attributesRead && self.generation != generation
            && (self.persistedAt, self.generation ?? "") > (persistedAt, generation)
    }
}

/// Why the keyring could not be used this time. Every case becomes
/// `PortalAuthError.sessionStorageFailure(message:)`; none of them means "signed out".
enum StorageFailure: Error, Equatable {
    /// No session bus or no Secret Service provider on it.
    case unavailable(String)
    /// The collection or item is locked and the unlock was refused, dismissed or timed out.
    case locked(String)
    /// The provider's confirmation prompt for storing or deleting an item was dismissed (by the
    /// person, or because it could not be shown); the message names the refused operation.
    case refused(String)
    /// There is no default collection (alias `default` unset) to store into.
    case noDefaultCollection
    /// The provider did not answer within the deadline (milliseconds).
    case timedOut(operation: String, milliseconds: UInt32)
    /// Any other provider error.
    case failed(String)

    var message: String {
        switch self {
        case .unavailable(let m): return "Secret Service unavailable: \(m)"
        case .locked(let m): return "keyring locked: \(m)"
        case .refused(let m): return "keyring refused: \(m)"
        case .noDefaultCollection:
            return "no default keyring: the Secret Service has no collection with the alias 'default'"
        case .timedOut(let op, let ms): return "Secret Service did not answer \(op) within \(ms) ms"
        case .failed(let m): return "Secret Service error: \(m)"
        }
    }
}

/// The one narrow seam between the core and the keyring (STYLE.md "Layout").
/// `LibSecretStorage` is the only real implementation; tests may use an in-memory one.
///
/// Implementations are thread-safe and every call is bounded in time. No call returns a partial
/// result: either all matching items are readable, or the call throws.
protocol SessionStorage: Sendable {
    /// Every item of the session schema whose `auth_environment_id` equals `authEnvironmentId`.
    ///
    /// With `withSecrets`, each item's secret; throws `StorageFailure` when any matching item's
    /// secret cannot be read (for example it is locked and stays locked), so a caller never
    /// mistakes "unreadable" for "absent". The attributes may then be left unread
    /// (`attributesRead` false). Without `withSecrets`, the attributes, and no unlock is attempted.
    func items(authEnvironmentId: String, withSecrets: Bool) throws(StorageFailure) -> [StoredSessionItem]

    /// Stores a new item with these attributes in the default collection. Never replaces an
    /// existing item (generations are unique).
    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               label: String, secret: SecretBytes) throws(StorageFailure)

    /// Persists a sign-in (SPEC §2): stores a new item like `store`, then removes this auth
    /// environment's items that hold an older sign-in (`StoredSessionItem.isOlder`); a newer
    /// one, stored meanwhile by any process, is kept. Throws only when the new item could not be
    /// stored (then nothing was removed); a failed removal is left to the next persist or clear
    /// (restore ranks the leftover below the new item). When a newer sign-in was stored meanwhile
    /// (two persists at the same time), the new item is removed as well: the newer one replaced
    /// it. Returns once the removal is done.
    func replace(authEnvironmentId: String, generation: String, persistedAt: UInt64,
                 label: String, secret: SecretBytes) throws(StorageFailure)

    /// Deletes the item with this identity; an item that is already gone is not an error.
    func delete(itemId: String) throws(StorageFailure)

    /// Deletes every item of the schema for `authEnvironmentId`, restricted to one
    /// `session_generation` when given. Returns how many were deleted.
    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int
}

extension SessionStorage {
    /// `store`, then `items` without secrets and `delete` for each older item.
    func replace(authEnvironmentId: String, generation: String, persistedAt: UInt64,
                 label: String, secret: SecretBytes) throws(StorageFailure) {
        try store(authEnvironmentId: authEnvironmentId, generation: generation, persistedAt: persistedAt,
                  label: label, secret: secret)
        guard let items = try? items(authEnvironmentId: authEnvironmentId, withSecrets: false) else { return }
        for item in items where item.isOlder(than: persistedAt, generation) {
            try? delete(itemId: item.itemId)
        }
        if items.contains(where: { $0.isNewer(than: persistedAt, generation) }),
           let ours = items.first(where: { $0.generation == generation }) {
            try? delete(itemId: ours.itemId)
        }
    }
}
