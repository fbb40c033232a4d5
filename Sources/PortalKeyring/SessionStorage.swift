/// One stored session item as the core sees it: its secret plus the non-secret attributes that
/// order and name sign-ins (SPEC §2).
struct StoredSessionItem: Sendable {
    /// Storage-specific identity of the item (a D-Bus object path for the Secret Service).
    let itemId: String
    /// The `session_generation` attribute (128-bit hex), nil when the item lacks it.
    let generation: String?
    /// The `persisted_at` attribute: microseconds since the Unix epoch, 0 when absent.
    let persistedAt: UInt64
    /// The stored secret, byte-exact; nil when it was not requested.
    let secret: SecretBytes?
}

/// Why the keyring could not be used this time. Every case becomes
/// `PortalAuthError.sessionStorageFailure(message:)`; none of them means "signed out".
enum StorageFailure: Error, Equatable {
    /// No session bus or no Secret Service provider on it.
    case unavailable(String)
    /// The collection or item is locked and the unlock was refused, dismissed or timed out.
    case locked(String)
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
    /// Every item of the session schema whose `auth_environment_id` equals `authEnvironmentId`,
    /// with secrets when `withSecrets`. Throws `StorageFailure` when any matching item cannot be read (for example
    /// it is locked and stays locked), so a caller never mistakes "unreadable" for "absent".
    func items(authEnvironmentId: String, withSecrets: Bool) throws(StorageFailure) -> [StoredSessionItem]

    /// Stores a new item with these attributes in the default collection. Never replaces an
    /// existing item (generations are unique).
    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               label: String, secret: SecretBytes) throws(StorageFailure)

    /// Deletes the item with this identity; an item that is already gone is not an error.
    func delete(itemId: String) throws(StorageFailure)

    /// Deletes every item of the schema for `authEnvironmentId`, restricted to one
    /// `session_generation` when given. Returns how many were deleted.
    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int
}
