import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// One storage operation, one deadline (docs/api.md#failures-and-deadlines): the end of the
/// outermost storage operation running on this thread, which every step below it shares — the
/// Secret portal's version query and `RetrieveSecret`, the Secret Service calls
/// (`ServiceConnection.run`), the file keyring's reads, lock wait and writes
/// (`FileKeyringStorage.deadline()`), and in a sandbox the whole move of the host's session
/// (`HostKeyringMigration`), which runs inside the operation that needed it. A nested operation
/// (the migration's host restore inside a sandbox restore) takes the outer end, never one of its
/// own, so `callMilliseconds` bounds the provider calls, portal calls and file work of one
/// operation together.
///
/// Two waits are not counted, each with a documented bound of its own: an unlock prompt (the
/// prompt deadline: `Deadline.paused`) and a persist's wait for its turn (`PersistTurn`: at most
/// `callMilliseconds` in all for one persist, the migration's write included). Per thread, as
/// `OperationToken`: an operation runs on the thread that called it.
enum OperationDeadline {
    /// The budget of the operation running on this thread.
    final class Budget {
        /// When the operation's time is up.
        var end: MonotonicInstant
        /// The operation's bound, for messages.
        let milliseconds: UInt32
        /// How long this operation may still wait for a persist turn uncounted.
        var turnAllowance: Duration

        init(end: MonotonicInstant, milliseconds: UInt32, turnAllowance: Duration) {
            self.end = end
            self.milliseconds = milliseconds
            self.turnAllowance = turnAllowance
        }
    }

    /// Runs `body` as one operation bounded by `timeouts.callMilliseconds`, unless an operation
    /// runs on this thread already: then `body` is part of it and shares its end. `persist`: the
    /// operation is a persist, whose waits for a turn are not counted (up to the call deadline).
    static func run<T, E: Error>(_ timeouts: KeyringTimeouts, persist: Bool = false,
                                 _ body: () throws(E) -> T) throws(E) -> T {
        if current != nil { return try body() }
        let milliseconds = timeouts.callMilliseconds
        let budget = Budget(end: .now.advanced(byMilliseconds: milliseconds), milliseconds: milliseconds,
                            turnAllowance: persist ? .milliseconds(milliseconds) : .zero)
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(budget).toOpaque())
        defer {
            pthread_setspecific(key, previous)
            withExtendedLifetime(budget) {}
        }
        return try body()
    }

    /// The end of a step that starts now under `timeouts`: the running operation's, or
    /// `callMilliseconds` from now when none runs (never later than either).
    static func end(_ timeouts: KeyringTimeouts) -> MonotonicInstant {
        let own = MonotonicInstant.now.advanced(byMilliseconds: timeouts.callMilliseconds)
        guard let current else { return own }
        return min(current.end, own)
    }

    /// The bound to name in a timeout message: the running operation's, else `timeouts`'.
    static func milliseconds(_ timeouts: KeyringTimeouts) -> UInt32 {
        current?.milliseconds ?? timeouts.callMilliseconds
    }

    /// Runs `body` (a wait with a deadline of its own: an unlock prompt) without counting its time
    /// against the running operation: its end moves later by as long as `body` took.
    static func paused<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let budget = current else { return try body() }
        let start = MonotonicInstant.now
        defer { budget.end = budget.end.advanced(by: start.duration(to: .now)) }
        return try body()
    }

    /// The end of a wait for a persist turn that starts now, at most `milliseconds`, and the
    /// function to call when the wait is over. Within a persist (`run(persist: true)`) the wait
    /// is not counted, up to the turn allowance left; elsewhere (the migration's write inside a
    /// restore) it counts, and ends with the operation.
    static func turnWait(milliseconds: UInt32) -> (end: MonotonicInstant, over: () -> Void) {
        let start = MonotonicInstant.now
        let own = start.advanced(byMilliseconds: milliseconds)
        guard let budget = current else { return (own, {}) }
        guard budget.turnAllowance > .zero else { return (min(own, budget.end), {}) }
        return (min(own, start.advanced(by: budget.turnAllowance)), {
            let waited = min(max(start.duration(to: .now), .zero), budget.turnAllowance)
            budget.turnAllowance -= waited
            budget.end = budget.end.advanced(by: waited)
        })
    }

    /// The budget of the operation running on this thread, if any.
    static var current: Budget? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<Budget>.fromOpaque(raw).takeUnretainedValue()
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
