import CGLib

/// The app's master secret for its file keyring (the Secret portal's 64 bytes), and the key
/// derived from it for the file's salt.
///
/// The key is derived once per salt and iteration count and kept for the next operation (the
/// derivation is PBKDF2 with 100,000 iterations: tens of milliseconds); a file with another salt
/// (replaced by a new keyring) gets a key of its own, which replaces the kept one. The secret
/// comes from `source` (the Secret portal's `RetrieveSecret`, `SecretPortal`; or the override's
/// file, `StorageBackend`), asked only when a key must be derived, within the operation that
/// needs it (`until`: its end); what it returns is released —
/// wiped (`SecretBytes`) — once the key is made, unless the source itself keeps it (the
/// `init(_: SecretBytes)` form does: tests and an explicit override hold one secret for the
/// storage's life). Thread-safe: one derivation at a time, so threads that need the same new key
/// wait for it instead of deriving it again.
final class FileKeyringMasterSecret: Sendable {
    /// Hands out the master secret before `until` (the operation's end), or says why it cannot
    /// now (a storage failure: never "no session").
    typealias Source = @Sendable (_ until: MonotonicInstant) throws(StorageFailure) -> SecretBytes

    private let source: Source
    private let kept = Lock<FileKeyringKey?>(nil)

    init(source: @escaping Source) {
        self.source = source
    }

    /// A master secret held for the storage's life.
    convenience init(_ secret: SecretBytes) {
        self.init(source: { _ throws(StorageFailure) in secret })
    }

    /// Whether the secret can be had now (before `end`): asked for and released (wiped) at once,
    /// also when a key is kept (a new file needs a new key, so the source must answer). Throws
    /// what the source throws.
    func check(until end: MonotonicInstant) throws(StorageFailure) {
        _ = try source(end)
    }

    /// The key of `keyring` (the file at `path`, for messages): the kept one when it was derived
    /// for the same salt and iteration count, else derived now (the secret asked for before
    /// `end`) and kept instead.
    func key(for keyring: FileKeyring, path: String, until end: MonotonicInstant) throws(StorageFailure) -> FileKeyringKey {
        try kept.withLock { kept throws(StorageFailure) -> FileKeyringKey in
            if let key = kept, key.salt == keyring.salt, key.iterations == keyring.iterations { return key }
            let secret = try source(end)
            // The derivation cannot be interrupted: none starts once the operation's time is up.
            guard !end.hasPassed else {
                throw .fileKeyring("\(path): the operation's deadline passed before its key could be derived; nothing was written")
            }
            do throws(FileKeyringError) {
                let key = try keyring.key(masterSecret: secret)
                kept = key
                return key
            } catch {
                throw .fileKeyring("\(path): its key could not be derived: \(error.message)")
            }
        }
    }
}
