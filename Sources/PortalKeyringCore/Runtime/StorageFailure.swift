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
    /// The provider answered, but reading what it handed out (the stored documents) took the
    /// rest of the operation's deadline: the library's own work, not the provider's.
    case overran(operation: String, milliseconds: UInt32)
    /// Any other provider error.
    case failed(String)
    /// The new item was removed because another sign-in, stored at the same moment, ranks above
    /// it (`PersistOrder`). Never retried: the call must not store again over the winner.
    case superseded
    /// The file keyring (`FileKeyringStorage`) could not be used this time, or holds items that
    /// do not open under the app's key; the message starts with the file's path and says what
    /// happened (its lock not given within the deadline, an unreadable or malformed file, …).
    case fileKeyring(String)
    /// The environment asks for a storage that cannot be made (`StorageBackend`); the message
    /// names the variable.
    case misconfigured(String)
    /// The Secret portal (`SecretPortal`) could not hand out the app's master secret this time:
    /// not reachable, no answer within the deadline, or the request cancelled or failed (the
    /// host's keyring locked with nobody to unlock it). Nothing was read or deleted.
    case secretPortal(String)

    /// Whether the keyring could not be read at all (no provider, no answer in time, a provider
    /// or keyring-file error), as opposed to an answer: a lock, a refusal, a lost race, a setting.
    /// After such a failure the session watches read again until they can (`KeyringTrouble`).
    var meansUnreadable: Bool {
        switch self {
        case .unavailable, .timedOut, .overran, .failed, .fileKeyring, .secretPortal: return true
        case .locked, .refused, .noDefaultCollection, .superseded, .misconfigured: return false
        }
    }

    var message: String {
        switch self {
        case .unavailable(let m): return "Secret Service unavailable: \(m)"
        case .locked(let m): return "keyring locked: \(m)"
        case .refused(let m): return "keyring refused: \(m)"
        case .noDefaultCollection:
            return "no default keyring: the Secret Service has no collection with the alias 'default'"
        case .timedOut(let op, let ms): return "Secret Service did not answer \(op) within \(ms) ms"
        case .overran(let op, let ms):
            return "\(op) did not finish within \(ms) ms: reading the stored items took the rest of the deadline (nothing was deleted)"
        case .failed(let m): return "Secret Service error: \(m)"
        case .superseded:
            return "another sign-in was stored at the same moment and replaced this one: the stored session is the other one"
        case .fileKeyring(let m): return "file keyring \(m)"
        case .misconfigured(let m): return "keyring backend misconfigured: \(m)"
        case .secretPortal(let m): return "Secret portal: \(m)"
        }
    }
}
