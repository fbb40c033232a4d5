import CGLib

/// The storage of an app inside a Flatpak sandbox (`/.flatpak-info` exists: `StorageBackend`),
/// chosen the way libsecret chooses its backend, so that our items live where the app's own
/// libsecret code looks (docs/providers.md, "Flatpak"):
///
/// - the Secret portal answers `version` 1: the file keyring at
///   `$XDG_DATA_HOME/keyrings/default.keyring` (`~/.var/app/APP_ID/data/keyrings/` in the
///   sandbox), keyed by the portal's master secret (`StorageBackend.portalSecret`);
/// - it answers another version, or the portal has no Secret interface (Plasma 5's has none):
///   the Secret Service, as outside the sandbox (it needs `--talk-name=org.freedesktop.secrets`).
///
/// Every operation here is one operation under one deadline (`OperationDeadline`): the portal's
/// version query, the move of the host's session (`HostKeyringMigration`) and the file or Secret
/// Service work share `callMilliseconds`, never a deadline each.
///
/// The choice is made at the first storage operation, within its deadline, and kept for the
/// life of the process, as libsecret keeps its backend. Where libsecret takes a portal that
/// cannot be asked (not running, no answer) for "no portal" and uses the Secret Service for
/// good, this fails the operation with a storage error naming the portal and decides at the next
/// one: sessions never go to one keyring for a while and to another later, and a portal that
/// starts late is still used.
struct FlatpakStorage: SessionStorage {
    /// The file keyring's path, for when the portal answers version 1.
    let keyringPath: String
    let timeouts: KeyringTimeouts
    /// The host's keyring the migration moves from (nil: the Secret Service; tests put theirs).
    var host: (any SessionStorage)? = nil

    /// What the first operation decided, with the portal's version.
    enum Choice: Equatable {
        case fileKeyring(portalVersion: UInt32)
        case secretService(portalVersion: UInt32)
    }

    /// The process's choice; nil until an operation made it.
    static let chosen = Lock<Choice?>(nil)

    /// The version that selects the file keyring (libsecret accepts exactly this one).
    static let fileKeyringVersion: UInt32 = 1

    func withTimeouts(_ timeouts: KeyringTimeouts) -> any SessionStorage {
        FlatpakStorage(keyringPath: keyringPath, timeouts: timeouts, host: host?.withTimeouts(timeouts))
    }

    /// The process's choice, made now (asking the portal within this operation's deadline) when
    /// no operation made it yet.
    func choice() throws(StorageFailure) -> Choice {
        if let made = Self.chosen.withLock({ $0 }) { return made }
        let version = try SecretPortal.version(until: OperationDeadline.end(timeouts))
        let made: Choice = version == Self.fileKeyringVersion
            ? .fileKeyring(portalVersion: version) : .secretService(portalVersion: version)
        // Two threads may ask at once: the first answer stored is the one every call uses.
        return Self.chosen.withLock { chosen in
            if let chosen { return chosen }
            chosen = made
            return made
        }
    }

    /// The storage the choice names. Over the file keyring, an operation on an auth environment
    /// first moves that environment's session from the host's Secret Service into the file,
    /// while the bus still reaches it (`HostKeyringMigration`: once per file keyring and auth
    /// environment, recorded in the file; every step within the deadline of the operation that
    /// needed it, which the caller's `OperationDeadline.run` set).
    func storage(migrating authEnvironmentId: String? = nil) throws(StorageFailure) -> any SessionStorage {
        switch try choice() {
        case .fileKeyring:
            let file = FileKeyringStorage(path: keyringPath, masterSecret: StorageBackend.portalSecret, timeouts: timeouts)
            if let authEnvironmentId {
                try HostKeyringMigration(host: host ?? SecretServiceStorage(timeouts: timeouts), file: file, fileKey: keyringPath)
                    .ensure(authEnvironmentId: authEnvironmentId)
            }
            return file
        case .secretService:
            return SecretServiceStorage(timeouts: timeouts)
        }
    }

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
            try storage(migrating: authEnvironmentId).restore(authEnvironmentId: authEnvironmentId)
        }
    }

    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try OperationDeadline.run(timeouts, persist: true) { () throws(StorageFailure) in
            try storage(migrating: authEnvironmentId).replace(authEnvironmentId: authEnvironmentId, generation: generation,
                                                              now: now, label: label, document: document)
        }
    }

    /// The host's session moved into the file keyring first (once per file), so that
    /// `portal-session status` describes the file as the next call finds it.
    func prepare(authEnvironmentId: String) throws(StorageFailure) {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
            _ = try storage(migrating: authEnvironmentId)
        }
    }

    func delete(itemId: String) throws(StorageFailure) {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) in try storage().delete(itemId: itemId) }
    }

    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
            try storage(migrating: authEnvironmentId).deleteAll(authEnvironmentId: authEnvironmentId, generation: generation)
        }
    }

    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
            try storage(migrating: authEnvironmentId).observe(authEnvironmentId: authEnvironmentId)
        }
    }

    /// The file keyring's path whatever the choice: known without asking the portal, so a watch
    /// starts while the portal does not answer (over the Secret Service a change of the file
    /// only makes the watch read again).
    func watchedFile() throws(StorageFailure) -> String? { keyringPath }

    /// The chosen storage's description, after what chose it: the sandbox and the Secret
    /// portal's version ("none" when the portal has no Secret interface).
    func describe() throws(StorageFailure) -> [(String, String)] {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) in try describeInOperation() }
    }

    private func describeInOperation() throws(StorageFailure) -> [(String, String)] {
        let version: UInt32
        switch try choice() {
        case .fileKeyring(let answered), .secretService(let answered): version = answered
        }
        let portal = version == 0 ? "none (the portal has no Secret interface)" : "version \(version)"
        return [("sandbox", "Flatpak"), ("secretPortal", portal)] + (try storage().describe())
    }
}
