import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The file-keyring adapter: sessions kept in libsecret's file keyring (`FileKeyring`,
/// `FileKeyringFile`) — the storage a Flatpak app's libsecret uses — under the key derived from
/// the app's master secret (`FileKeyringMasterSecret`).
///
/// Items are the Secret Service adapter's: the same attributes (`ItemSchema`; `xdg:schema` kept as
/// an attribute, as the Secret Service keeps it), the same document and
/// the same order (`PersistOrder`, `ReadPolicy`). Every search names the schema and the auth
/// environment (never an empty query), and both are confirmed on the decrypted attributes, so
/// other applications' items are never read as ours, and every item this adapter does not remove
/// is written back byte-exact.
///
/// Readers (restore, the watch, status) read the file without a lock: writers replace it whole
/// (a rename), so a read sees one version of it. Writers (persist, clear, invalidation,
/// restore's removal of unusable items: `FileKeyringStorage+Writing.swift`) hold the file's lock
/// (`FileKeyringLock`) across read–change–write, read the file again under it, and replace it
/// only while it is still the file they read (libsecret in the same app writes without the lock).
///
/// An item's id is `SealedItem.id`, a hash of its sealed bytes: it names the same item in every
/// later read of the file, whatever was added or removed before it.
///
/// Items that do not open under the key (stored under another master secret: the host keyring
/// was reset and gave the app a new one) are never removed and never read as ours. When such an
/// item shows our schema's attribute names in clear (its values cannot be checked) and no usable
/// sign-in of ours is there, restore throws and the watch reads `.locked` instead of "signed
/// out": what the file holds cannot be read, which is not the same as nothing stored (locked ≠ absent:
/// docs/storage.md#locked-is-not-absent). A persist stores a new sign-in beside such items, after which restore
/// returns it.
///
/// Deadlines: one per operation, shared with the operation this is part of (`OperationDeadline`:
/// in a sandbox, the portal's calls and the move of the host's session count too). A writer
/// waits for the lock until that deadline (`KeyringTimeouts.callMilliseconds`; a persist may
/// first wait as long for its turn, `PersistTurn`) and writes nothing once it has passed. Reading and decrypting the file is
/// linear in its size, which is capped (`FileKeyringFormat.maximumFileSize`, with caps on items
/// and attributes), and stops at the operation's deadline; the key derivation is bounded by the
/// iteration count (`FileKeyringFormat.iterationRange`, at most libsecret's). The file is never
/// opened in a way that can block (a FIFO in its place is an error at once), and a symbolic link
/// at the path is followed to its file (`FileKeyringFile.target`). There is no prompt.
struct FileKeyringStorage: SessionStorage {
    /// The keyring file (in a Flatpak sandbox, `$XDG_DATA_HOME/keyrings/default.keyring`).
    let path: String
    let masterSecret: FileKeyringMasterSecret
    let timeouts: KeyringTimeouts

    init(path: String, masterSecret: FileKeyringMasterSecret, timeouts: KeyringTimeouts = .default) {
        self.path = path
        self.masterSecret = masterSecret
        self.timeouts = timeouts
    }

    /// A storage over the keyring at `path` whose master secret is `masterSecret`, held for the
    /// storage's life.
    init(path: String, masterSecret: SecretBytes, timeouts: KeyringTimeouts = .default) {
        self.init(path: path, masterSecret: FileKeyringMasterSecret(masterSecret), timeouts: timeouts)
    }

    func withTimeouts(_ timeouts: KeyringTimeouts) -> any SessionStorage {
        FileKeyringStorage(path: path, masterSecret: masterSecret, timeouts: timeouts)
    }

    /// One operation under one deadline: the file read once, the choice made by
    /// `ReadPolicy.restore` (attributes are always read with the secrets: both are in the
    /// decrypted item), then the unusable items it names removed in one write under the lock
    /// (`remove(ids:)`, by id: the file may have changed since it was read). Throws, deleting
    /// nothing, when no usable sign-in is there but items that may be ours do not open.
    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        let end = deadline()
        guard let snapshot = try snapshot(until: end) else {
            // No file: signed out — once the master secret can be had, so that a keyring no write
            // could use now (the portal refusing, a misconfigured secret file) fails here too, as
            // a locked keyring does, and a sign-in that restores first keeps its grant unspent.
            try masterSecret.check(until: end)
            return nil
        }
        let items = try ours(snapshot, authEnvironmentId, secrets: true).map { $0.stored }
        var unusable: [String] = []
        // Each document decoded once (docs/security.md, "A planted oversized item"), the deadline asked before each.
        let restored = try ReadPolicy.restore(
            authEnvironmentId, items: items,
            inTime: { () throws(StorageFailure) in
                guard !end.hasPassed else {
                    throw .fileKeyring("\(path): restore did not finish within \(timeouts.callMilliseconds) ms; nothing was deleted")
                }
            },
            attributes: { () throws(StorageFailure) in try ours(snapshot, authEnvironmentId, secrets: false).map { $0.stored } },
            delete: { itemId in unusable.append(itemId) })
        // Nothing usable: items that may be ours but do not open fail the restore before anything
        // is deleted (the unusable ones were only noted so far).
        if restored == nil {
            try checkNothingHidden(snapshot)
        }
        if !unusable.isEmpty {
            try remove(ids: Set(unusable), authEnvironmentId: authEnvironmentId, operation: "restore", until: end)
        }
        return restored
    }

    /// What a watch sees now, decided with `ReadPolicy.newest` over one read of the file: the
    /// newest usable sign-in; else `.locked` when items that may be ours do not open under the
    /// key (the state cannot be read: restore says why); else `.signedOut`. No file is signed out.
    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        guard let snapshot = try snapshot() else { return .signedOut }
        let plan = ReadPolicy.newest(authEnvironmentId, items: try ours(snapshot, authEnvironmentId, secrets: true).map { $0.stored })
        if let chosen = plan.chosen {
            return .signedIn(generation: chosen.generation ?? "", endUserId: chosen.document.endUserId)
        }
        return try hidden(snapshot) > 0 ? .locked : .signedOut
    }

    func watchedFile() throws(StorageFailure) -> String? { path }

    /// The keyring as `portal-session status` shows it: the backend and its file, how many
    /// items the file holds, and how many of them do not open under this app's key. No secret
    /// is read.

    func describe() throws(StorageFailure) -> [(String, String)] {
        var result = [("backend", "file keyring"), ("file", path)]
        let file = try target()
        if file != path { result.append(("linkedTo", file)) }
        guard let snapshot = try snapshot() else {
            result.append(("items", "0 (no file yet: the first persist creates it)"))
            return result
        }
        result.append(("items", String(snapshot.keyring.items.count)))
        let unreadable = try mapping { () throws(FileKeyringError) in try snapshot.keyring.unreadable(key: snapshot.key) }
        result.append(("unreadableItems", unreadable == 0 ? "0" : "\(unreadable) (\(Self.otherKey))"))
        return result
    }

    // MARK: - Reading

    /// The file as read now, with its key; nil when there is no file.
    struct Snapshot {
        let keyring: FileKeyring
        let stamp: FileKeyringFile.Stamp
        let key: FileKeyringKey
    }

    /// `end`: the operation's, for the master secret when a key must be derived.
    func snapshot(until end: MonotonicInstant? = nil) throws(StorageFailure) -> Snapshot? {
        let end = end ?? deadline()
        let file = try target()
        guard let (keyring, stamp) = try mapping({ () throws(FileKeyringError) in try FileKeyringFile.loadStamped(file, until: end) })
        else { return nil }
        return Snapshot(keyring: keyring, stamp: stamp, key: try masterSecret.key(for: keyring, path: path, until: end))
    }

    /// The file the keyring is (`FileKeyringFile.target`: `path`, or the file a symbolic link
    /// there leads to), resolved once per operation.
    func target() throws(StorageFailure) -> String {
        try mapping { () throws(FileKeyringError) in try FileKeyringFile.target(of: path) }
    }

    /// This auth environment's items of our schema that open under the key: where each is in
    /// `keyring`, and as the core sees it (its secret only when `secrets`). Searched by the
    /// schema and the auth environment, both confirmed on the decrypted attributes.
    func ours(_ keyring: FileKeyring, _ key: FileKeyringKey, _ authEnvironmentId: String,
              generation: String? = nil, secrets: Bool) throws(StorageFailure) -> [(found: FileKeyring.Found, stored: StoredSessionItem)] {
        var query = Dictionary(uniqueKeysWithValues: ItemSchema.match(authEnvironmentId))
        if let generation { query[ItemSchema.generationAttribute] = generation }
        let found = try mapping { () throws(FileKeyringError) in try keyring.search(query, key: key) }
        return found.filter { ItemSchema.isOurs($0.item.attributes, authEnvironmentId) }.map { found in
            (found, ItemSchema.storedItem(keyring.items[found.index].id, found.item.attributes,
                                          secret: secrets ? found.item.secret : nil))
        }
    }

    func ours(_ snapshot: Snapshot, _ authEnvironmentId: String,
              secrets: Bool) throws(StorageFailure) -> [(found: FileKeyring.Found, stored: StoredSessionItem)] {
        try ours(snapshot.keyring, snapshot.key, authEnvironmentId, secrets: secrets)
    }

    /// How many items may be session items of ours but cannot be read: they show our schema's
    /// attribute names in clear and do not open under the key (or hold no well-formed item).
    func hidden(_ snapshot: Snapshot) throws(StorageFailure) -> Int {
        let names = ItemSchema.match("").map(\.0)
        return try mapping { () throws(FileKeyringError) in
            try snapshot.keyring.unreadable(key: snapshot.key, including: { $0.shows(names) })
        }
    }

    /// Throws when items that may be ours cannot be read (`hidden`): restore must not answer
    /// "signed out" over them.
    private func checkNothingHidden(_ snapshot: Snapshot) throws(StorageFailure) {
        let count = try hidden(snapshot)
        guard count > 0 else { return }
        let items = count == 1 ? "1 session item" : "\(count) session items"
        throw .fileKeyring("\(path): \(items) of this schema cannot be read, \(Self.otherKey). "
                           + "Signing in again stores a new session beside \(count == 1 ? "it" : "them")")
    }

    /// What the items that do not open are, for restore's error and for status.
    static let otherKey = "not opening under this app's master secret (stored under another key: the host keyring was "
        + "reset, or the file comes from another machine or app) or damaged; kept as they are"

    // MARK: - Deadlines and errors

    /// The end of an operation that starts now, or of the one this is part of
    /// (`OperationDeadline`: a sandbox operation with the move of the host's session).
    func deadline() -> MonotonicInstant { OperationDeadline.end(timeouts) }

    /// `body`, its file-keyring error told as a storage failure naming the file.
    func mapping<T>(_ body: () throws(FileKeyringError) -> T) throws(StorageFailure) -> T {
        do {
            return try body()
        } catch {
            switch error {
            case .malformed(let detail):
                let prefix = path + ": "
                let what = detail.hasPrefix(prefix) ? String(detail.dropFirst(prefix.count)) : detail
                throw .fileKeyring("\(path): not a keyring file this library can read (\(what)); it is left as it is")
            case .io(let detail):
                throw .fileKeyring("\(path): cannot be accessed: \(detail)")
            case .crypto(let detail):
                throw .fileKeyring("\(path): its cryptography failed: \(detail)")
            case .outOfTime(let detail):
                throw .fileKeyring("\(path): reading it did not finish within \(timeouts.callMilliseconds) ms (\(detail)); "
                                   + "nothing was written")
            }
        }
    }
}
