/// Deadlines for keyring calls, in milliseconds.
///
/// Every storage operation (one `restoreSession()`, `persistSession`, `clearPersistedSession()`)
/// runs its D-Bus round trips, Secret portal calls and keyring-file work under one
/// `callMilliseconds` in total (`OperationDeadline`: in a Flatpak sandbox the move of the host's
/// session shares it); an unlock prompt, which waits for a person, gets `promptMilliseconds` of
/// its own, and a persist may first wait up to `callMilliseconds` for its turn (`PersistTurn`).
/// When a deadline passes the pending call is cancelled and the operation throws
/// `PortalAuthError.sessionStorageFailure` (nothing is deleted). Without these bounds GDBus would
/// wait 25 s per call, and a prompt forever (docs/api.md#failures-and-deadlines).
public struct KeyringTimeouts: Sendable, Equatable {
    /// Bound for the provider calls, portal calls and file work of one operation together.
    /// Default 5000 ms.
    public var callMilliseconds: UInt32
    /// Bound for one unlock prompt. Default 30000 ms.
    public var promptMilliseconds: UInt32

    public static let `default` = KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 30_000)

    public init(callMilliseconds: UInt32, promptMilliseconds: UInt32) {
        self.callMilliseconds = max(callMilliseconds, 1)
        self.promptMilliseconds = max(promptMilliseconds, 1)
    }
}
