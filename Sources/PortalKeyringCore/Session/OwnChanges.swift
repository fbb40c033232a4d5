/// Who made a change a `SessionWatch` reports (docs/threading.md#watching-the-stored-session).
public enum SessionChangeOrigin: Sendable, Equatable, CustomStringConvertible {
    /// Not a change of the stored session (`.locked`, `.resync`, `.available`), or the watch
    /// cannot tell (a sign-out seen right after a lock or a resync).
    case unknown
    /// This process persisted the sign-in, or cleared or invalidated the one that went away.
    case thisProcess
    /// Another process did (or this one through storage the library does not own, e.g. a
    /// keyring tool).
    case otherProcess

    /// `unknown`, `this-process`, `other-process`.
    public var description: String {
        switch self {
        case .unknown: return "unknown"
        case .thisProcess: return "this-process"
        case .otherProcess: return "other-process"
        }
    }
}

/// The stored-session writes this process made, so that its watches can tell them from another
/// process's: the provider's signals do not say who wrote an item. Each persist records its
/// generation, each delete the generation it removes (nil: every sign-in of the auth
/// environment), before the keyring call, so a watch never reads the result before the record.
/// Bounded: the newest `limit` records of each kind.
enum OwnChanges {
    private struct Record {
        let authEnvironmentId: String
        let generation: String?
        let sequence: UInt64
    }

    private struct State {
        var sequence: UInt64 = 0
        var persisted: [Record] = []
        var deleted: [Record] = []
    }

    static let limit = 64
    private static let state = Lock(State())

    /// A mark for `deleted(_:generation:since:)`: records made after it count.
    static var sequence: UInt64 { state.withLock { $0.sequence } }

    static func persisting(_ authEnvironmentId: String, generation: String) {
        record(authEnvironmentId, generation, persist: true)
    }

    static func deleting(_ authEnvironmentId: String, generation: String?) {
        record(authEnvironmentId, generation, persist: false)
    }

    private static func record(_ id: String, _ generation: String?, persist: Bool) {
        state.withLock { s in
            s.sequence += 1
            let entry = Record(authEnvironmentId: id, generation: generation, sequence: s.sequence)
            if persist {
                s.persisted.append(entry)
                if s.persisted.count > limit { s.persisted.removeFirst() }
            } else {
                s.deleted.append(entry)
                if s.deleted.count > limit { s.deleted.removeFirst() }
            }
        }
    }

    /// Whether this process persisted `generation`.
    static func persisted(_ authEnvironmentId: String, generation: String) -> Bool {
        state.withLock { s in
            s.persisted.contains { $0.authEnvironmentId == authEnvironmentId && $0.generation == generation }
        }
    }

    /// Whether this process deleted `generation`: by name, or by clearing the auth environment
    /// after `since` (the mark taken when the watch first saw that generation).
    static func deleted(_ authEnvironmentId: String, generation: String, since: UInt64) -> Bool {
        state.withLock { s in
            s.deleted.contains {
                $0.authEnvironmentId == authEnvironmentId
                    && ($0.generation == generation || ($0.generation == nil && $0.sequence > since))
            }
        }
    }

    /// The origin of `change`, which the watch saw as `now` after `previous` (the latter first
    /// seen at mark `since`).
    static func origin(of change: SessionChange, _ authEnvironmentId: String, previous: SessionObservation?,
                       now: SessionObservation, since: UInt64) -> SessionChangeOrigin {
        switch (change, now, previous) {
        case (.signedIn, .signedIn(let generation, _), _):
            return persisted(authEnvironmentId, generation: generation) ? .thisProcess : .otherProcess
        case (.signedOut, _, .signedIn(let generation, _)?):
            return deleted(authEnvironmentId, generation: generation, since: since) ? .thisProcess : .otherProcess
        default:
            return .unknown
        }
    }
}
