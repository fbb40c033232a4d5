import CGLib

/// A keyring operation of this process failed for want of the provider (`StorageFailure.meansUnreadable`):
/// every live session watch of that auth environment reads the keyring again, keeps reading (once a second after each
/// failed read) until a read succeeds, then reports `.available`. Without this a watch whose
/// own reads never failed (no signal came while the provider was stopped) would stay silent
/// when the provider resumes, and an app showing "keyring unavailable" would never hear that it
/// is back (docs/threading.md#watching-the-stored-session).
enum KeyringTrouble {
    /// The running watches (registered by their thread while it runs).
    private static let watches = Lock<[ObjectIdentifier: WatchLoop]>([:])

    static func register(_ loop: WatchLoop) {
        watches.withLock { $0[ObjectIdentifier(loop)] = loop }
    }

    /// After this returns no probe is posted to `loop` any more (the lock orders it after any
    /// `report` in progress), so the watch thread's final drain runs the ones already posted.
    static func unregister(_ loop: WatchLoop) {
        watches.withLock { $0[ObjectIdentifier(loop)] = nil }
    }

    /// Only the watches of the auth environment whose call failed: another one's app saw no
    /// failure (and a test process that runs many auth environments one after the other heard
    /// "available" in a later test from an earlier one's failed call).
    static func report(authEnvironmentId: String) {
        watches.withLock { all in
            for loop in all.values where loop.authEnvironmentId == authEnvironmentId { loop.postProbe() }
        }
    }
}
