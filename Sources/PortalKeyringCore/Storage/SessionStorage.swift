/// One stored session item as the core sees it: its secret plus the non-secret attributes that
/// order and name sign-ins (docs/storage.md#the-item).
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
    /// document carries copies of both); the `attributes` listing of `ReadPolicy.restore` reads them.
    var attributesRead = true

    /// Whether this item holds an older sign-in than (`persistedAt`, `generation`): the order
    /// restore ranks sign-ins by, and the only items a persist may remove. False when the
    /// attributes were not read (an item of unknown age is never removed as "older").
    func isOlder(than persistedAt: UInt64, _ generation: String) -> Bool {
        attributesRead && self.generation != generation
            && PersistOrder.precedes((self.persistedAt, self.generation), (persistedAt, generation))
    }

    /// Whether this item holds a newer sign-in than (`persistedAt`, `generation`): a persist
    /// that finds one removes its own item (two persists at the same time leave the newer).
    /// False when the attributes were not read.
    func isNewer(than persistedAt: UInt64, _ generation: String) -> Bool {
        attributesRead && self.generation != generation
            && PersistOrder.precedes((persistedAt, generation), (self.persistedAt, self.generation))
    }
}

/// The one narrow seam between the core and the keyring (docs/storage.md#the-storage-protocol). The core never
/// looks past it (no downcast to an adapter): what differs between storages is a member here.
/// `SecretServiceStorage` and `FileKeyringStorage` (libsecret's file keyring, for a Flatpak sandbox)
/// implement it; tests may use an in-memory one. What the
/// stored items mean — which are ours, which is newest, which are unusable — is decided once, by
/// `ReadPolicy` and `PersistOrder`, which every implementation calls with its own list, read and
/// delete steps.
///
/// Implementations are thread-safe and every call is one operation, bounded in time by one
/// deadline (`KeyringTimeouts.callMilliseconds` for the provider calls, portal calls and file work
/// together, `OperationDeadline`; plus a prompt's own, and a persist's turn). A call made inside
/// another (the sandbox's migration) shares the outer one's deadline. No
/// call returns a partial result.
protocol SessionStorage: Sendable {
    /// Restores in one operation: reads this auth environment's items with their secrets (never
    /// answering "none" while an item of ours is unreadable or locked and stays locked), decides
    /// with `ReadPolicy.restore` (listing attributes when it asks), deletes the unusable items it
    /// names, and returns the newest usable sign-in (nil: none). Throws `StorageFailure` when the
    /// items cannot be read, or an unusable item cannot be deleted, within the operation.
    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored?

    /// Persists a sign-in (docs/storage.md#persist-order) in one operation, ordered without trusting a clock
    /// (`PersistOrder.replace`, the one algorithm): reads this auth environment's items, stores
    /// the new item with a `persisted_at` above every one it saw (the document made by
    /// `document(persistedAt)`), removes the items it saw (they precede it whatever their
    /// timestamps say) and those stored meanwhile that rank below it. When one stored meanwhile
    /// ranks above it (two persists at once), the new item is removed and the call throws
    /// `PersistOrder.superseded`: it never reports success for a session that is no longer
    /// stored. Throws before storing when the items cannot be read (nothing written), or when the
    /// new item cannot be stored (nothing removed); a failed removal is left to the next persist
    /// or clear (restore ranks the leftover below the new item). Returns the `persisted_at` stored.
    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64

    /// Deletes the item with this identity; an item that is already gone is not an error.
    func delete(itemId: String) throws(StorageFailure)

    /// Deletes every item of the schema for `authEnvironmentId`, restricted to one
    /// `session_generation` when given. Returns how many were deleted.
    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int

    /// What a session watch sees now (`SessionObservation`), decided with `ReadPolicy.newest`;
    /// never unlocks, never prompts.
    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation

    /// The keyring as `portal-session status` shows it, as (name, value) pairs; empty when the
    /// storage has nothing to show.
    func describe() throws(StorageFailure) -> [(String, String)]

    /// What the storage does before any operation on `authEnvironmentId`, so that a description
    /// shows the state the next operation sees (a Flatpak's move of the host's session:
    /// `FlatpakStorage`); nothing for most storages.
    func prepare(authEnvironmentId: String) throws(StorageFailure)

    /// The file whose changes a session watch must notice besides the Secret Service's signals
    /// (a file keyring: `FileKeyringMonitor`); nil when the signals tell everything.
    func watchedFile() throws(StorageFailure) -> String?

    /// The same storage with other deadlines.
    func withTimeouts(_ timeouts: KeyringTimeouts) -> any SessionStorage
}

extension SessionStorage {
    /// Nothing to show (a storage other than the Secret Service: tests).
    func describe() throws(StorageFailure) -> [(String, String)] { [] }

    /// A storage without deadlines of its own (tests) is the same storage.
    func withTimeouts(_ timeouts: KeyringTimeouts) -> any SessionStorage { self }
}

extension SessionStorage {
    /// A storage without a file of its own: the Secret Service's signals tell every change.
    func watchedFile() throws(StorageFailure) -> String? { nil }

    /// Nothing to do before an operation.
    func prepare(authEnvironmentId: String) throws(StorageFailure) {}
}
