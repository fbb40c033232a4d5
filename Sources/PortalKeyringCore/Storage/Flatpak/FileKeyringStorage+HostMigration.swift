/// The record, in the file keyring itself, that the host's session was moved into it
/// (`HostKeyringMigration`): one item per auth environment, of a schema of its own, which
/// libsecret reads like any other item (`secret-tool search xdg:schema
/// io.portalhq.PortalKeyring.HostMigration`). Its attribute names are not a session item's, so it
/// is never read, ranked or counted as one, also under another key (`hidden`). Removing it (or
/// the file) makes the next call look at the host again.
extension FileKeyringStorage: HostMigrationRecord {
    static let migrationSchema = "io.portalhq.PortalKeyring.HostMigration"
    static let migratedAttribute = "migrated_auth_environment_id"

    static func migrationMatch(_ authEnvironmentId: String) -> [String: String] {
        ["xdg:schema": migrationSchema, migratedAttribute: authEnvironmentId]
    }

    /// One read of the file (no file: not recorded).
    func hostMigrationRecorded(authEnvironmentId: String) throws(StorageFailure) -> Bool {
        guard let snapshot = try snapshot() else { return false }
        return try !recorded(snapshot.keyring, snapshot.key, authEnvironmentId).isEmpty
    }

    /// One write under the file's lock (the file is made when there is none), nothing when the
    /// record is there already.
    func recordHostMigration(authEnvironmentId: String) throws(StorageFailure) {
        try transaction("record the move from the host keyring", until: deadline(), creating: true,
                        otherwise: ()) { keyring, key throws(StorageFailure) in
            if try !recorded(keyring, key, authEnvironmentId).isEmpty { return ((), false) }
            let time = FileKeyring.now()
            let item = FileKeyringItem(attributes: Self.migrationMatch(authEnvironmentId),
                                       label: "Portal session moved from the host keyring (\(authEnvironmentId))",
                                       created: time, modified: time,
                                       secret: SecretBytes.copyingUTF8(of: "host keyring migration done"))
            _ = try mapping { () throws(FileKeyringError) in try keyring.add(item, key: key) }
            return ((), true)
        }
    }

    /// The records of `authEnvironmentId`, confirmed on the decrypted attributes.
    private func recorded(_ keyring: FileKeyring, _ key: FileKeyringKey,
                          _ authEnvironmentId: String) throws(StorageFailure) -> [FileKeyring.Found] {
        let query = Self.migrationMatch(authEnvironmentId)
        return try mapping { () throws(FileKeyringError) in try keyring.search(query, key: key) }
            .filter { $0.item.attributes == query }
    }
}
