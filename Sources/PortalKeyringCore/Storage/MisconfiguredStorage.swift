/// The storage of a misconfigured override (`StorageBackend`): every call fails with the
/// message; nothing is read or written anywhere.
struct MisconfiguredStorage: SessionStorage {
    let message: String

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? { throw .misconfigured(message) }

    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 { throw .misconfigured(message) }

    func delete(itemId: String) throws(StorageFailure) { throw .misconfigured(message) }

    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int { throw .misconfigured(message) }

    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation { throw .misconfigured(message) }

    func describe() throws(StorageFailure) -> [(String, String)] { throw .misconfigured(message) }
}
