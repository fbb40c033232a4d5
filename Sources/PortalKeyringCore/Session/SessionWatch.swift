/// A change of one auth environment's stored session, seen by a `SessionWatch` (docs/threading.md).
public enum SessionChange: Sendable, Equatable, CustomStringConvertible {
    /// A new sign-in was persisted, by any process: the newest stored sign-in is now another one
    /// (another `session_generation`), of this end user.
    case signedIn(endUserId: String)
    /// The stored session was cleared or invalidated: nothing of this auth environment is stored.
    case signedOut
    /// The session item, or the collection that may hold it, is locked: the state cannot be read
    /// without an unlock. Not "signed out": restore (which unlocks) to learn the state.
    case locked
    /// The provider restarted, or the watch reconnected to the bus: changes may have been missed.
    /// Restore to learn the state; later changes are reported again.
    case resync
    /// The keyring is readable again after failed reads: the watch's own, or a keyring operation
    /// of this process that failed for want of the provider (a stalled, stopped or unreachable
    /// provider, past the call deadline). Restore to learn the state; a change of it since the
    /// last event follows as its own event.
    case available

    /// `signed-in END_USER_ID`, `signed-out`, `locked`, `resync`, `available`.
    public var description: String {
        switch self {
        case .signedIn(let endUserId): return "signed-in \(endUserId)"
        case .signedOut: return "signed-out"
        case .locked: return "locked"
        case .resync: return "resync"
        case .available: return "available"
        }
    }

    /// The event that tells a watcher which saw `previous` (nil: unknown) that it now sees `now`;
    /// nil when nothing changed. A lock is never a sign-out: locked items are reported as
    /// `.locked`, and the state behind them once they are readable again.
    static func between(_ previous: SessionObservation?, _ now: SessionObservation) -> SessionChange? {
        if previous == now { return nil }
        switch now {
        case .signedIn(_, let endUserId): return .signedIn(endUserId: endUserId)
        case .signedOut: return .signedOut
        case .locked: return .locked
        }
    }
}

/// Watches one auth environment's stored session across processes, without polling (docs/threading.md).
///
/// The watch listens on a session-bus connection of its own for the Secret Service's signals
/// (`ItemCreated`/`ItemDeleted`/`ItemChanged` and property changes of every collection,
/// `CollectionCreated`/`CollectionDeleted`/`CollectionChanged` of the service) and for
/// `NameOwnerChanged` of `org.freedesktop.secrets`. Signals are only a hint: on one, the watch
/// reads the auth environment's items again (never unlocking, never prompting; attributes
/// confirmed exactly, the secret read only to name the end user) and compares with what it saw
/// last. So items of other schemas and auth environments, and a provider's over-matching
/// searches, never produce events. A burst of signals is coalesced: the first one is read at
/// once, later ones at most once per `coalesceMilliseconds` (100 ms), so 1,000 persists in a
/// row end in a few events, the last of which names the final state. A provider that takes the
/// name gives `.resync` (and the watch takes the new state as its baseline); a closed bus
/// connection is reconnected once a second, then `.resync`.
///
/// Over a file keyring (a Flatpak sandbox: docs/flatpak.md#in-your-app) the watch also reads again when the
/// keyring file changes (`FileKeyringMonitor`: inotify on its directory), so a sign-in persisted
/// by another process of the app is seen the same way.
///
/// Cost: one library thread ("portal-watch") that sleeps in `poll()` until a D-Bus message for
/// the watch (or a change of the file keyring) arrives: no timer runs while nothing changes.
///
/// Events are handed to `onChange` on the watch thread, in order, one at a time; it must return
/// quickly (post the event to your loop). The C ABI and `PortalAuth.sessionChanges` do that.
/// Thread-safe; `cancel()` (or releasing the watch) stops it.
public final class SessionWatch: Sendable {
    /// The least time between two reads of the keyring while signals keep coming.
    static let coalesceMilliseconds: UInt32 = 100

    private let loop: WatchLoop

    /// Starts watching `auth`'s auth environment: subscribes, waits until the bus has the
    /// subscriptions, then reads the current state as the baseline (no event for it). Every
    /// change after this returns is reported. Blocks for at most the auth's call deadline
    /// (`keyringTimeouts.callMilliseconds`) plus the bus round trips.
    ///
    /// A provider that is not running, or a keyring that cannot be read now, is not an error:
    /// the watch reports `.resync` when a provider takes the name.
    /// - Throws: `.sessionStorageFailure` when there is no session bus (or the fork() rule
    ///   forbids D-Bus in this process).
    public convenience init(auth: PortalAuth, onChange: @escaping @Sendable (SessionChange) -> Void) throws(PortalAuthError) {
        try self.init(auth: auth, onEvent: { change, _ in onChange(change) })
    }

    /// `init(auth:onChange:)` with each change's origin: whether this process made it
    /// (`SessionChangeOrigin`; the provider's signal does not say, the library remembers its own
    /// persists and deletes).
    public init(auth: PortalAuth, onEvent: @escaping @Sendable (SessionChange, SessionChangeOrigin) -> Void)
        throws(PortalAuthError) {
        let storage = auth.storage
        let id = auth.authEnvironmentId
        loop = try storageCall(id) { () throws(StorageFailure) in
            try WatchLoop(authEnvironmentId: id, observe: { () throws(StorageFailure) in try storage.observe(authEnvironmentId: id) },
                          file: { () throws(StorageFailure) in try storage.watchedFile() }, onChange: onEvent)
        }
    }

    /// Starts watching without waiting for the bus or the keyring: returns at once, and
    /// `started` runs on the watch thread once the watch is live (nil: every change after that
    /// is reported) or could not start (the error; the watch has ended). Used by the C ABI's
    /// `portal_auth_watch_async`.
    @_spi(Bindings)
    public init(auth: PortalAuth, started: @escaping @Sendable (PortalAuthError?) -> Void,
                onEvent: @escaping @Sendable (SessionChange, SessionChangeOrigin) -> Void) throws(PortalAuthError) {
        let storage = auth.storage
        let id = auth.authEnvironmentId
        loop = try storageCall(id) { () throws(StorageFailure) in
            try WatchLoop(authEnvironmentId: id, observe: { () throws(StorageFailure) in try storage.observe(authEnvironmentId: id) },
                          file: { () throws(StorageFailure) in try storage.watchedFile() }, onChange: onEvent,
                          start: .background(started: { failure in
                              started(failure.map { .sessionStorageFailure(message: $0.message) })
                          }))
        }
    }

    /// Stops the watch: after this returns no `onChange` call runs or starts (unless called from
    /// inside `onChange`, which then finishes). Idempotent. Never waits for the keyring: a read
    /// in progress ends on the watch thread by itself (bounded by the call deadline), so this
    /// may be called from any thread, an executor's or a GUI loop's included.
    public func cancel() { loop.stop() }

    deinit { loop.stop() }
}
